/* SPDX-License-Identifier: MIT */
/* tests/daemon_util.h: what the check_daemon_* programs share: session
 * counts, random fills, and work kept in flight.
 *
 * Those programs test the daemon's foundation, end to end: real hipd
 * processes (tests/harness.c) and real sockets, through libhipd and through
 * raw msgpack (tests/rawclient.h) where the library would not misbehave on
 * purpose:
 *   check_daemon_handshake.c  handshake and identity, ping, pipelining and
 *                             out-of-order replies, many clients and many
 *                             threads, max in-flight;
 *   check_daemon_protocol.c   request errors, protocol violations,
 *                             descriptors, timeouts, disconnects with work
 *                             in flight, the output cap;
 *   check_daemon_lifecycle.c  shutdown (with clients, work and compiles)
 *                             and the socket file's life (stale files, a
 *                             second daemon, permissions).
 * Work that must stay in flight runs on the CPU device (--devices cpu), so
 * these tests behave the same on a GPU host. No assertion depends on how
 * long anything takes. Everything here is static (inline): each program
 * includes it once.
 */
#ifndef HIPD_TESTS_DAEMON_UTIL_H
#define HIPD_TESTS_DAEMON_UTIL_H

#define _GNU_SOURCE 1

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "rawclient.h"
#include "rpc.h"
#define TESTUTIL_CLIENT "check_daemon"
#define TESTUTIL_TIMEOUT_MS 60000
#include "testutil.h"

#define MiB ((size_t)1 << 20)
/* A memset big enough to stay in flight while other requests come and go
 * (hundreds of milliseconds on a CPU device: the pages are first touched by
 * it). */
#define BUSY_BYTES (512 * MiB)

/* ------------------------------------------------------------ utilities */

static inline int64_t daemon_sessions(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;

  ck_assert_int_eq(hipd_daemon_info(conn, &info), 0);
  n = info_int(info, "sessions");
  hipd_info_free(info);
  return n;
}

/* Poll daemon.info until it counts @p want sessions (10 s at most). */
static inline void wait_sessions(hipd_conn_t *conn, int64_t want)
{
  long long deadline = harness_now_ms() + 10000;
  int64_t n;

  while ((n = daemon_sessions(conn)) != want && harness_now_ms() < deadline)
    harness_sleep_ms(10);
  ck_assert_msg(n == want, "daemon.info counts %lld sessions, expected %lld",
                (long long)n, (long long)want);
}

static inline void fill_random(void *buf, size_t n, unsigned seed)
{
  uint8_t *p = buf;
  uint32_t x = seed * 2654435761u + 1;

  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)x;
  }
}

/* --------------------------------------------------- work kept in flight */

/* A large memset on a stream of its own, issued by a thread (its call
 * returns when the memset is done) and known to be in flight at the
 * daemon once busy_start() returns. */
typedef struct {
  hipd_conn_t *conn;
  hipd_buffer_t buf;
  hipd_stream_t st;
  size_t size;
  int rc;
  pthread_t thread;
} busy_t;

static inline void *busy_main(void *arg)
{
  busy_t *b = arg;

  b->rc = hipd_mem_memset_async(b->conn, b->buf, 0, b->size, 0x5a, b->st);
  return NULL;
}

static inline int64_t session_inflight(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;

  ck_assert_int_eq(hipd_session_info(conn, &info), 0);
  n = info_int(info, "inflight");
  hipd_info_free(info);
  return n;
}

static inline void busy_start(busy_t *b, hipd_conn_t *conn, size_t size)
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

static inline int busy_join(busy_t *b)
{
  pthread_join(b->thread, NULL);
  return b->rc;
}

/* ------------------------------------------------ descriptors in requests */

/* Wait until the daemon closed its copy of the write end of a pipe whose
 * read end is @p rfd (ours is closed): @return 1 at EOF, 0 if the write end
 * is still open somewhere after @p timeout_ms. */
static inline int pipe_writer_gone(int rfd, int timeout_ms)
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
static inline int raw_with_pipe(raw_t *r, uint32_t msgid, const char *method,
                                uint32_t nparams, int *rfd, char *msg,
                                size_t msgsz)
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

#endif
