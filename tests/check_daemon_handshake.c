/* SPDX-License-Identifier: MIT */
/* tests/check_daemon_handshake.c: a session's start and its traffic:
 * connection refused, hello and identity, pings of every size, pipelined
 * and out-of-order replies, many clients, one connection shared by many
 * threads, and the cap on requests in flight. The shared helpers are in
 * tests/lib/daemon_util.h. */
#include "config.h"

#include "daemon_util.h"
#include "run.h"

/* ------------------------------------------------------------ handshake */

START_TEST(test_connect_refused)
{
  const char *path = harness_temp_path("nobody.sock");
  hipd_conn_t *conn = NULL;

  ck_assert_ptr_nonnull(path);
  ck_assert_int_eq(hipd_connect(path, &conn), HIPD_ECONNECT);
  ck_assert_ptr_null(conn);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(NULL), path));
}
END_TEST

START_TEST(test_hello_identity)
{
  harness_daemon_t *d = harness_start(NULL);
  hipd_info_t *hello = NULL, *dinfo = NULL, *sinfo = NULL;
  hipd_conn_t *conn;
  const char *s;
  size_t len;
  int found_cpu = 0;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  ck_assert_int_eq(hipd_hello(conn, &hello), 0);
  ck_assert_int_eq(hipd_info_str(hello, "name", &s, &len), 0);
  ck_assert_str_eq(s, "hipd");
  ck_assert_int_eq(hipd_info_str(hello, "version", &s, &len), 0);
  ck_assert_str_eq(s, hipd_version());
  ck_assert_int_eq(info_int(hello, "protocol"), hipd_protocol_version());
  ck_assert_int_gt(info_int(hello, "session"), 0);
  ck_assert_int_eq(info_int(hello, "pid"), d->pid);
  for (int i = 0; i < hipd_info_len(hello, "features"); i++) {
    char path[32];
    snprintf(path, sizeof(path), "features.%d", i);
    ck_assert_int_eq(hipd_info_str(hello, path, &s, &len), 0);
    found_cpu |= strcmp(s, "cpu") == 0;
  }
  ck_assert_msg(found_cpu, "the features do not list the cpu driver");

  ck_assert_int_eq(hipd_daemon_info(conn, &dinfo), 0);
  ck_assert_int_eq(hipd_info_str(dinfo, "name", &s, &len), 0);
  ck_assert_str_eq(s, "hipd");
  ck_assert_int_eq(info_int(dinfo, "pid"), d->pid);
  ck_assert_int_ge(info_int(dinfo, "sessions"), 1);
  ck_assert_int_eq(hipd_info_str(dinfo, "socket", &s, &len), 0);
  ck_assert_str_eq(s, d->socket);
  ck_assert_int_gt(info_int(dinfo, "limits.max_message"), 0);
  /* Only this one (the harness's readiness probe may linger a moment). */
  wait_sessions(conn, 1);

  ck_assert_int_eq(hipd_session_info(conn, &sinfo), 0);
  ck_assert_int_eq(info_int(sinfo, "id"), info_int(hello, "session"));
  ck_assert_int_eq(info_int(sinfo, "peer.pid"), getpid());
  ck_assert_int_eq(info_int(sinfo, "peer.uid"), getuid());
  ck_assert_int_eq(info_int(sinfo, "protocol"), hipd_protocol_version());
  ck_assert_int_eq(hipd_info_str(sinfo, "client", &s, &len), 0);
  ck_assert_str_eq(s, "check_daemon");
  ck_assert_int_eq(info_int(sinfo, "resources.buffers"), 0);

  hipd_info_free(hello);
  hipd_info_free(dinfo);
  hipd_info_free(sinfo);
  hipd_close(conn);

  /* A name with control characters (an escape sequence, a newline that
   * would forge a log line) is kept with '?' in their place. */
  ck_assert_int_eq(
      hipd_connect2(d->socket, "ev\x1b[31mil\nhipd: forged", &conn), 0);
  ck_assert_int_eq(hipd_session_info(conn, &sinfo), 0);
  ck_assert_int_eq(hipd_info_str(sinfo, "client", &s, &len), 0);
  ck_assert_str_eq(s, "ev?[31mil?hipd: forged");
  hipd_info_free(sinfo);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_ping_sizes)
{
  static const size_t sizes[] = {0, 1, 4095, 4096, MiB};
  harness_daemon_t *d = harness_start(NULL);
  hipd_conn_t *conn;
  uint8_t *in = malloc(MiB), *out = malloc(MiB);
  size_t n;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    fill_random(in, sizes[i], (unsigned)i);
    memset(out, 0, MiB);
    n = 12345;
    ck_assert_int_eq(hipd_ping(conn, in, sizes[i], out, MiB, &n), 0);
    ck_assert_uint_eq(n, sizes[i]);
    ck_assert_int_eq(memcmp(in, out, sizes[i]), 0);
  }
  /* A reply larger than the buffer: ERANGE with the length it needed. */
  ck_assert_int_eq(hipd_ping(conn, in, 100, out, 10, &n), HIPD_ERANGE);
  ck_assert_uint_eq(n, 100);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  free(in);
  free(out);
}
END_TEST

/* ----------------------------------------------------------- pipelining */

/* A ping sent after a stream.synchronize that waits behind a large memset
 * is answered first. */
START_TEST(test_out_of_order)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  hipd_call_t *sync_call = NULL, *ping_call = NULL;
  hipd_conn_t *conn;
  char out[8];
  size_t n = 0;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  busy_start(&b, conn, BUSY_BYTES);
  ck_assert_int_eq(hipd_stream_synchronize_begin(conn, b.st, &sync_call), 0);
  ck_assert_int_eq(
      hipd_ping_begin(conn, "late", 4, out, sizeof(out), &n, &ping_call), 0);
  while (!hipd_call_done(ping_call))
    harness_sleep_ms(1);
  ck_assert_msg(!hipd_call_done(sync_call),
                "stream.synchronize completed before the ping sent after it");
  ck_assert_int_eq(hipd_wait(ping_call), 0);
  ck_assert_uint_eq(n, 4);
  ck_assert_int_eq(memcmp(out, "late", 4), 0);
  ck_assert_int_eq(hipd_wait(sync_call), 0);
  ck_assert_int_eq(busy_join(&b), 0);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

#define NPIPE 1000

START_TEST(test_pipeline_reverse)
{
  harness_daemon_t *d = harness_start(NULL);
  static hipd_call_t *calls[NPIPE];
  static uint32_t out[NPIPE][2];
  static size_t lens[NPIPE];
  hipd_conn_t *conn;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  for (uint32_t i = 0; i < NPIPE; i++) {
    uint32_t payload[2] = {i, ~i};
    ck_assert_int_eq(hipd_ping_begin(conn, payload, sizeof(payload), out[i],
                                     sizeof(out[i]), &lens[i], &calls[i]),
                     0);
  }
  for (int i = NPIPE - 1; i >= 0; i--) {
    ck_assert_int_eq(hipd_wait(calls[i]), 0);
    ck_assert_uint_eq(lens[i], 8);
    ck_assert_uint_eq(out[i][0], (uint32_t)i);
    ck_assert_uint_eq(out[i][1], ~(uint32_t)i);
  }
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

#define NCLIENTS 64

typedef struct {
  const char *path;
  pthread_barrier_t *barrier;
  int index;
  int failures;
  int64_t session;
  char why[256];
} client_t;

static void *client_main(void *arg)
{
  client_t *c = arg;
  hipd_conn_t *conn = NULL;
  hipd_info_t *info = NULL;
  char name[32];
  int rc;

  snprintf(name, sizeof(name), "client-%d", c->index);
  rc = hipd_connect2(c->path, name, &conn);
  if (rc != 0) {
    c->failures++;
    snprintf(c->why, sizeof(c->why), "connect: %s", hipd_last_error(NULL));
  }
  for (int i = 0; conn != NULL && i < 20; i++) {
    uint32_t in[2] = {(uint32_t)c->index, (uint32_t)i}, out[2] = {0, 0};
    size_t n = 0;
    rc = hipd_ping(conn, in, sizeof(in), out, sizeof(out), &n);
    if (rc != 0 || n != sizeof(in) || memcmp(in, out, n) != 0) {
      c->failures++;
      snprintf(c->why, sizeof(c->why), "ping %d: %s", i, hipd_err_name(rc));
    }
  }
  if (conn != NULL && hipd_session_info(conn, &info) == 0) {
    const char *s;
    size_t len;
    hipd_info_int(info, "id", &c->session);
    if (hipd_info_str(info, "client", &s, &len) != 0 || strcmp(s, name) != 0) {
      c->failures++;
      snprintf(c->why, sizeof(c->why), "session.info names another client");
    }
    hipd_info_free(info);
  } else {
    c->failures++;
  }
  /* Stay connected until the main thread has counted the sessions. */
  pthread_barrier_wait(c->barrier);
  pthread_barrier_wait(c->barrier);
  hipd_close(conn);
  return NULL;
}

START_TEST(test_concurrent_clients)
{
  /* One worker for them all: daemon.info counts its sessions. */
  harness_daemon_t *d = harness_start("--tenant-workers", "1", NULL);
  static client_t clients[NCLIENTS];
  pthread_t threads[NCLIENTS];
  pthread_barrier_t barrier;
  hipd_conn_t *conn;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  pthread_barrier_init(&barrier, NULL, NCLIENTS + 1);
  for (int i = 0; i < NCLIENTS; i++) {
    clients[i] = (client_t){.path = d->socket, .barrier = &barrier, .index = i};
    ck_assert_int_eq(
        pthread_create(&threads[i], NULL, client_main, &clients[i]), 0);
  }
  pthread_barrier_wait(&barrier);
  wait_sessions(conn, NCLIENTS + 1);
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < NCLIENTS; i++)
    pthread_join(threads[i], NULL);
  for (int i = 0; i < NCLIENTS; i++) {
    ck_assert_msg(clients[i].failures == 0, "client %d: %s", i, clients[i].why);
    ck_assert_int_gt(clients[i].session, 0);
    for (int j = 0; j < i; j++)
      ck_assert_msg(clients[i].session != clients[j].session,
                    "clients %d and %d share session %lld", j, i,
                    (long long)clients[i].session);
  }
  wait_sessions(conn, 1);
  pthread_barrier_destroy(&barrier);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

#define NSHARED 8

typedef struct {
  hipd_conn_t *conn;
  int index;
  int failures;
  char why[256];
} sharer_t;

/* Synchronous calls and pipelined bursts from one thread of several that
 * share a connection. */
static void *sharer_main(void *arg)
{
  sharer_t *t = arg;

  for (int round = 0; round < 20; round++) {
    hipd_call_t *calls[10];
    uint32_t in[10][2], out[10][2];
    size_t lens[10];
    hipd_info_t *info = NULL;
    int rc;

    for (int i = 0; i < 10; i++) {
      in[i][0] = (uint32_t)t->index;
      in[i][1] = (uint32_t)(round * 10 + i);
      rc = hipd_ping_begin(t->conn, in[i], sizeof(in[i]), out[i],
                           sizeof(out[i]), &lens[i], &calls[i]);
      if (rc != 0) {
        t->failures++;
        snprintf(t->why, sizeof(t->why), "ping_begin: %s", hipd_err_name(rc));
        return NULL;
      }
    }
    for (int i = 0; i < 10; i++) {
      rc = hipd_wait(calls[i]);
      if (rc != 0 || lens[i] != 8 || memcmp(in[i], out[i], 8) != 0) {
        t->failures++;
        snprintf(t->why, sizeof(t->why), "ping %d.%d: %s", round, i,
                 hipd_err_name(rc));
      }
    }
    rc = hipd_session_info(t->conn, &info);
    if (rc != 0) {
      t->failures++;
      snprintf(t->why, sizeof(t->why), "session.info: %s", hipd_err_name(rc));
    }
    hipd_info_free(info);
  }
  return NULL;
}

START_TEST(test_shared_connection)
{
  harness_daemon_t *d = harness_start(NULL);
  sharer_t sharers[NSHARED];
  pthread_t threads[NSHARED];
  hipd_info_t *info = NULL;
  hipd_conn_t *conn;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  for (int i = 0; i < NSHARED; i++) {
    sharers[i] = (sharer_t){.conn = conn, .index = i};
    ck_assert_int_eq(
        pthread_create(&threads[i], NULL, sharer_main, &sharers[i]), 0);
  }
  for (int i = 0; i < NSHARED; i++)
    pthread_join(threads[i], NULL);
  for (int i = 0; i < NSHARED; i++)
    ck_assert_msg(sharers[i].failures == 0, "thread %d: %s", i, sharers[i].why);
  /* One session served them all: 8 x 20 x 11 requests, plus this one,
   * the handshake and libhipd's ring.open (when it opened a ring). */
  ck_assert_int_eq(hipd_session_info(conn, &info), 0);
  ck_assert_int_eq(info_int(info, "requests"),
                   NSHARED * 20 * 11 + 2 +
                       (info_int(info, "ring.entries") > 0));
  hipd_info_free(info);
  wait_sessions(conn, 1);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* With --max-inflight 4 the daemon stops reading while four requests wait
 * (behind a memset), then goes on: every one of 200 pipelined requests is
 * answered. */
START_TEST(test_max_inflight)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", "--max-inflight", "4",
                                      "--log-level", "debug", NULL);
  enum { N = 200 };
  static hipd_call_t *calls[N];
  static uint8_t outs[N][16];
  static size_t lens[N];
  static hipd_info_t *infos[N];
  uint8_t pattern[16];
  hipd_buffer_t small;
  hipd_stream_t other;
  hipd_conn_t *conn;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  fill_random(pattern, sizeof(pattern), 7);
  ck_assert_int_eq(hipd_mem_alloc(conn, 0, 16, "byte", &small), 0);
  ck_assert_int_eq(hipd_mem_write(conn, small, 0, pattern, 16), 0);
  ck_assert_int_eq(hipd_stream_create(conn, 0, &other), 0);
  busy_start(&b, conn, BUSY_BYTES);
  for (int i = 0; i < N; i++) {
    int rc;
    switch (i % 4) {
    case 0:
      rc = hipd_stream_synchronize_begin(conn, b.st, &calls[i]);
      break;
    case 1:
      rc = hipd_ping_begin(conn, &i, sizeof(i), outs[i], sizeof(outs[i]),
                           &lens[i], &calls[i]);
      break;
    case 2:
      rc = hipd_mem_read_async_begin(conn, small, 0, outs[i], 16, other,
                                     &calls[i]);
      break;
    default:
      rc = hipd_session_info_begin(conn, &infos[i], &calls[i]);
      break;
    }
    ck_assert_msg(rc == 0, "request %d: %s", i, hipd_last_error(conn));
  }
  for (int i = 0; i < N; i++) {
    ck_assert_msg(hipd_wait(calls[i]) == 0, "request %d: %s", i,
                  hipd_last_error(conn));
    if (i % 4 == 1) {
      ck_assert_uint_eq(lens[i], sizeof(i));
      ck_assert_int_eq(memcmp(outs[i], &i, sizeof(i)), 0);
    } else if (i % 4 == 2) {
      ck_assert_int_eq(memcmp(outs[i], pattern, 16), 0);
    } else if (i % 4 == 3) {
      ck_assert_int_le(info_int(infos[i], "inflight"), 4);
      hipd_info_free(infos[i]);
    }
  }
  ck_assert_int_eq(busy_join(&b), 0);
  ck_assert_msg(harness_log_contains(d, "reading paused"),
                "the daemon never throttled the session");
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

static Suite *daemon_handshake_suite(void)
{
  Suite *s = suite_create("daemon_handshake");
  TCase *tc;

  tc = tcase_create("handshake");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_connect_refused);
  tcase_add_test(tc, test_hello_identity);
  tcase_add_test(tc, test_ping_sizes);
  suite_add_tcase(s, tc);

  tc = tcase_create("pipelining");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, test_out_of_order);
  tcase_add_test(tc, test_pipeline_reverse);
  tcase_add_test(tc, test_concurrent_clients);
  tcase_add_test(tc, test_shared_connection);
  tcase_add_test(tc, test_max_inflight);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_daemon_handshake");
  failed = test_run(daemon_handshake_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
