/* SPDX-License-Identifier: MIT */
/* tests/lib/daemon_util.h: what the check_daemon_* programs share: session
 * counts, random fills, and work kept in flight.
 *
 * Those programs test the daemon's foundation, end to end: real hipd
 * processes (tests/lib/harness.c) and real sockets, through libhipd and through
 * raw msgpack (tests/lib/rawclient.h) where the library would not misbehave on
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
 * long anything takes. Compiled once in tests/lib/daemon_util.c
 * (libhipdtest_daemon).
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

/* The sessions daemon.info counts. */
int64_t daemon_sessions(hipd_conn_t *conn);
/* Poll daemon.info until it counts @p want sessions (10 s at most). */
void wait_sessions(hipd_conn_t *conn, int64_t want);
/* Random bytes from @p seed (xorshift32). */
void fill_random(void *buf, size_t n, unsigned seed);

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

/* The requests session.info counts in flight (itself included). */
int64_t session_inflight(hipd_conn_t *conn);
void busy_start(busy_t *b, hipd_conn_t *conn, size_t size);
/* Wait for the memset. @return its code. */
int busy_join(busy_t *b);

/* ------------------------------------------------ descriptors in requests */

/* Wait until the daemon closed its copy of the write end of a pipe whose
 * read end is @p rfd (ours is closed): @return 1 at EOF, 0 if the write end
 * is still open somewhere after @p timeout_ms. */
int pipe_writer_gone(int rfd, int timeout_ms);

/* Send request @p method with @p nparams uint params of 4096 and the write
 * end of a fresh pipe, which we then close. @return the reply's code; the
 * read end goes to *@p rfd. */
int raw_with_pipe(raw_t *r, uint32_t msgid, const char *method,
                  uint32_t nparams, int *rfd, char *msg, size_t msgsz);

#endif
