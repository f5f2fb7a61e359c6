/* SPDX-License-Identifier: MIT */
/* tests/lib/daemon_util.c: the helpers of tests/lib/daemon_util.h. */
#include "config.h"

#include "daemon_util.h"

/* ------------------------------------------------------------ utilities */

int64_t daemon_sessions(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;

  ck_assert_int_eq(hipd_daemon_info(conn, &info), 0);
  n = info_int(info, "sessions");
  hipd_info_free(info);
  return n;
}

/* Poll daemon.info until it counts @p want sessions (10 s at most). */
void wait_sessions(hipd_conn_t *conn, int64_t want)
{
  long long deadline = harness_now_ms() + 10000;
  int64_t n;

  while ((n = daemon_sessions(conn)) != want && harness_now_ms() < deadline)
    harness_sleep_ms(10);
  ck_assert_msg(n == want, "daemon.info counts %lld sessions, expected %lld",
                (long long)n, (long long)want);
}

void fill_random(void *buf, size_t n, unsigned seed)
{
  testutil_fill_xorshift(buf, n, seed * 2654435761u + 1, 0);
}

/* --------------------------------------------------- work kept in flight */

static void *busy_main(void *arg)
{
  busy_t *b = arg;

  b->rc = hipd_mem_memset_async(b->conn, b->buf, 0, b->size, 0x5a, b->st);
  return NULL;
}

int64_t session_inflight(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;

  ck_assert_int_eq(hipd_session_info(conn, &info), 0);
  n = info_int(info, "inflight");
  hipd_info_free(info);
  return n;
}

void busy_start(busy_t *b, hipd_conn_t *conn, size_t size)
{
  long long deadline = harness_now_ms() + 10000;
  int rc;

  memset(b, 0, sizeof(*b));
  b->conn = conn;
  b->size = size;
  rc = hipd_mem_alloc(conn, 0, size, "byte", &b->buf);
  ck_assert_msg(rc == 0, "alloc: %s", hipd_last_error(conn));
  ck_assert_int_eq(hipd_stream_create(conn, 0, &b->st), 0);
  ck_assert_int_eq(pthread_create(&b->thread, NULL, busy_main, b), 0);
  /* In flight: the memset plus this session.info itself. */
  while (session_inflight(conn) < 2) {
    ck_assert_msg(harness_now_ms() < deadline, "the memset never started");
    harness_sleep_ms(1);
  }
}

int busy_join(busy_t *b)
{
  pthread_join(b->thread, NULL);
  return b->rc;
}

/* ------------------------------------------------ descriptors in requests */

/* Wait until the daemon closed its copy of the write end of a pipe whose
 * read end is @p rfd (ours is closed): @return 1 at EOF, 0 if the write end
 * is still open somewhere after @p timeout_ms. */
int pipe_writer_gone(int rfd, int timeout_ms)
{
  struct pollfd p = {.fd = rfd, .events = POLLIN};
  char c;

  if (poll(&p, 1, timeout_ms) != 1)
    return 0;
  return read(rfd, &c, 1) == 0;
}

/* Send request @p method with @p nparams uint params of 4096 and the write
 * end of a fresh pipe, which we then close. @return the reply's code; the
 * read end goes to *@p rfd. */
int raw_with_pipe(raw_t *r, uint32_t msgid, const char *method,
                  uint32_t nparams, int *rfd, char *msg, size_t msgsz)
{
  int p[2], rc;

  ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
  raw_request(r, msgid, method, nparams);
  for (uint32_t i = 0; i < nparams; i++)
    msgpack_pack_uint64(&r->pk, 4096);
  ck_assert_int_eq(raw_flush_fd(r, p[1]), 0);
  close(p[1]);
  rc = raw_response(r, msgid, msg, msgsz);
  *rfd = p[0];
  return rc;
}
