/* tests/check_daemon.c: the daemon's foundation, end to end: real hipd
 * processes (tests/harness.c) and real sockets, through libhipd and through
 * raw msgpack where the library would not misbehave on purpose.
 *
 * Covered: handshake and identity, ping, pipelining and out-of-order
 * replies, many clients and many threads, request errors, protocol
 * violations, disconnects with work in flight, backpressure (output cap,
 * max in-flight), shutdown, and the socket file's life (stale files, a
 * second daemon, permissions). Work that must stay in flight runs on the
 * CPU device (--devices cpu), so these tests behave the same on a GPU host.
 * No assertion depends on how long anything takes.
 */
#include "config.h"

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

static int64_t daemon_sessions(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;

  ck_assert_int_eq(hipd_daemon_info(conn, &info), 0);
  n = info_int(info, "sessions");
  hipd_info_free(info);
  return n;
}

/* Poll daemon.info until it counts @p want sessions (10 s at most). */
static void wait_sessions(hipd_conn_t *conn, int64_t want)
{
  long long deadline = harness_now_ms() + 10000;
  int64_t n;

  while ((n = daemon_sessions(conn)) != want && harness_now_ms() < deadline)
    harness_sleep_ms(10);
  ck_assert_msg(n == want, "daemon.info counts %lld sessions, expected %lld",
                (long long)n, (long long)want);
}

static void fill_random(void *buf, size_t n, unsigned seed)
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

static void *busy_main(void *arg)
{
  busy_t *b = arg;

  b->rc = hipd_mem_memset_async(b->conn, b->buf, 0, b->size, 0x5a, b->st);
  return NULL;
}

static int64_t session_inflight(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;

  ck_assert_int_eq(hipd_session_info(conn, &info), 0);
  n = info_int(info, "inflight");
  hipd_info_free(info);
  return n;
}

static void busy_start(busy_t *b, hipd_conn_t *conn, size_t size)
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

static int busy_join(busy_t *b)
{
  pthread_join(b->thread, NULL);
  return b->rc;
}

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
  harness_daemon_t *d = harness_start(NULL);
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
  /* One session served them all: 8 x 20 x 11 requests, plus this one and
   * the handshake. */
  ck_assert_int_eq(hipd_session_info(conn, &info), 0);
  ck_assert_int_eq(info_int(info, "requests"), NSHARED * 20 * 11 + 2);
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

/* ----------------------------------------------------------- bad requests */

START_TEST(test_before_hello)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;
  char msg[256];

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_request(r, 1, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 1, msg, sizeof(msg)), HIPD_EHELLO);
  ck_assert_msg(strstr(msg, "hello") != NULL, "message: %s", msg);
  raw_request(r, 2, "mem.alloc", 2);
  msgpack_pack_int(&r->pk, 16);
  proto_pack_cstr(&r->pk, "byte");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 2, NULL, 0), HIPD_EHELLO);
  /* ping needs no handshake (a liveness probe). */
  raw_request(r, 3, "ping", 1);
  msgpack_pack_bin_with_body(&r->pk, "pre", 3);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 3, NULL, 0), 0);
  ck_assert_int_eq(r->msg.result->type, MSGPACK_OBJECT_BIN);
  ck_assert_uint_eq(r->msg.result->via.bin.size, 3);
  /* After hello the same request works. */
  raw_hello(r);
  raw_request(r, 4, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 4, NULL, 0), 0);
  ck_assert_int_eq(r->msg.result->type, MSGPACK_OBJECT_MAP);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_unknown_method)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;
  char msg[256];

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_request(r, 7, "no.such_method", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 7, msg, sizeof(msg)), HIPD_ENOMETHOD);
  ck_assert_msg(strstr(msg, "no.such_method") != NULL, "message: %s", msg);
  /* The session goes on. */
  raw_request(r, 8, "ping", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 8, NULL, 0), 0);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_bad_params)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;
  char msg[256];

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  /* Too few. */
  raw_request(r, 1, "mem.size", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 1, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "mem.size") != NULL, "message: %s", msg);
  /* Too many. */
  raw_request(r, 2, "ping", 2);
  msgpack_pack_nil(&r->pk);
  msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 2, NULL, 0), HIPD_EPARAMS);
  /* Wrong types. */
  raw_request(r, 3, "device.get", 1);
  proto_pack_cstr(&r->pk, "zero");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 3, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "device") != NULL, "message: %s", msg);
  raw_request(r, 4, "mem.alloc", 2);
  proto_pack_cstr(&r->pk, "16");
  proto_pack_cstr(&r->pk, "byte");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 4, NULL, 0), HIPD_EPARAMS);
  raw_request(r, 5, "ping", 1);
  msgpack_pack_int(&r->pk, 5);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 5, NULL, 0), HIPD_EPARAMS);
  raw_request(r, 6, "mem.free", 1);
  proto_pack_cstr(&r->pk, "handle");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 6, NULL, 0), HIPD_EPARAMS);
  /* A nil where a required string goes is named as such. */
  raw_request(r, 8, "mem.alloc", 2);
  msgpack_pack_uint64(&r->pk, 16);
  msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 8, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "param 1 (kind) must be a string, not nil"),
                "message: %s", msg);
  /* So is a nil where a required integer goes: not read as 0. */
  raw_request(r, 9, "mem.alloc", 2);
  msgpack_pack_nil(&r->pk);
  proto_pack_cstr(&r->pk, "byte");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 9, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(
      strstr(msg, "param 0 (count) must be an unsigned integer, not nil"),
      "message: %s", msg);
  raw_request(r, 10, "device.set_current", 1);
  msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 10, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(
      strstr(msg, "param 0 (device) must be an unsigned integer, not nil"),
      "message: %s", msg);
  /* An optional param before a required one may be nil, not absent. */
  raw_request(r, 11, "run_source", 7);
  proto_pack_cstr(&r->pk, "src");
  msgpack_pack_nil(&r->pk);
  for (int i = 0; i < 5; i++)
    msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 11, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "param 1 (lang) must be a string, not nil"),
                "message: %s", msg);
  /* Bounds: an integer's range, a string's length, a target's type. */
  raw_request(r, 12, "hello", 1);
  msgpack_pack_int(&r->pk, -1);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 12, msg, sizeof(msg)), HIPD_ERANGE);
  ck_assert_msg(
      strstr(msg, "hello: param 0 (protocol) must be between 0 and 2147483647"),
      "message: %s", msg);
  {
    char name[256];
    memset(name, 'a', sizeof(name));
    raw_request(r, 13, "intrinsics.find", 1);
    msgpack_pack_str_with_body(&r->pk, name, sizeof(name));
    ck_assert_int_eq(raw_flush(r), 0);
    ck_assert_int_eq(raw_response(r, 13, msg, sizeof(msg)), HIPD_EPARAMS);
    ck_assert_msg(
        strstr(msg, "param 0 (name) is 256 bytes long, more than 255"),
        "message: %s", msg);
  }
  raw_request(r, 14, "kernel.compile", 4);
  proto_pack_cstr(&r->pk, "src");
  proto_pack_cstr(&r->pk, "k");
  msgpack_pack_nil(&r->pk);
  msgpack_pack_bin_with_body(&r->pk, "x", 1);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 14, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "param 3 (target) must be a device id (unsigned "
                            "integer) or an architecture (string), not bin"),
                "message: %s", msg);
  raw_request(r, 15, "kernel.compile", 3);
  proto_pack_cstr(&r->pk, "src");
  proto_pack_cstr(&r->pk, "k");
  msgpack_pack_array(&r->pk, 1);
  msgpack_pack_int(&r->pk, 3);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 15, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "option 0 must be a string of under 256 bytes"),
                "message: %s", msg);
  /* execute_direct takes any params, and reads none. */
  raw_request(r, 16, "execute_direct", 3);
  msgpack_pack_nil(&r->pk);
  msgpack_pack_map(&r->pk, 0);
  msgpack_pack_int(&r->pk, -5);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 16, msg, sizeof(msg)), HIPD_ENOTSUP);
  /* The session goes on. */
  raw_request(r, 7, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 7, NULL, 0), 0);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ---------------------------------------------------------- violations */

/* Bytes that break the protocol, and the reason the daemon logs. */
typedef struct {
  const char *name;
  const char *reason;
  void (*pack)(msgpack_packer *pk);
} violation_t;

static void pack_not_array(msgpack_packer *pk)
{
  msgpack_pack_int(pk, 5);
}

static void pack_type7(msgpack_packer *pk)
{
  msgpack_pack_array(pk, 4);
  msgpack_pack_int(pk, 7);
  msgpack_pack_int(pk, 1);
  proto_pack_cstr(pk, "ping");
  msgpack_pack_array(pk, 0);
}

static void pack_oversize(msgpack_packer *pk)
{
  size_t n = 100 << 10;
  char *big = calloc(1, n);

  proto_pack_request(pk, 1, "ping", 1);
  msgpack_pack_bin_with_body(pk, big, n);
  free(big);
}

static void pack_too_deep(msgpack_packer *pk)
{
  proto_pack_request(pk, 1, "ping", 1);
  for (int i = 0; i < 12; i++)
    msgpack_pack_array(pk, 1);
  msgpack_pack_nil(pk);
}

static void pack_c1(msgpack_packer *pk)
{
  static const char c1 = (char)0xc1;

  msgpack_pack_array(pk, 4);
  pk->callback(pk->data, &c1, 1);
}

static void pack_response(msgpack_packer *pk)
{
  proto_pack_response(pk, 1);
  msgpack_pack_nil(pk);
}

static const violation_t violations[] = {
    {"not an array", "a message must be a non-empty array", pack_not_array},
    {"type 7", "unknown message type", pack_type7},
    {"oversize", "larger than the maximum message size", pack_oversize},
    {"too deep", "nested deeper than the maximum depth", pack_too_deep},
    {"0xc1", "invalid msgpack type byte 0xc1", pack_c1},
    {"a response", "a client sent a response", pack_response},
};

/* Each violation closes its own connection, logged with its reason; a
 * client connected all along is not disturbed. */
START_TEST(test_protocol_violations)
{
  harness_daemon_t *d =
      harness_start("--max-message", "64K", "--max-depth", "8", NULL);
  const violation_t *v = &violations[_i];
  hipd_conn_t *keeper;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  keeper = connect_to(d);
  r = raw_open(d->socket);
  raw_hello(r);
  v->pack(&r->pk);
  raw_flush(r); /* may fail half-way once the daemon hangs up */
  ck_assert_msg(harness_raw_wait_closed(r->fd, 10000),
                "%s: the daemon kept the connection open", v->name);
  ck_assert_msg(harness_log_wait(d, v->reason, 5000),
                "%s: the log does not say '%s'", v->name, v->reason);
  ck_assert(harness_log_contains(d, "protocol violation"));
  ping_ok(keeper);
  wait_sessions(keeper, 1);
  raw_close(r);
  hipd_close(keeper);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_unknown_notification)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  proto_pack_notify(&r->pk, "no.such_notification", 1);
  msgpack_pack_int(&r->pk, 1);
  raw_request(r, 42, "ping", 1);
  msgpack_pack_bin_with_body(&r->pk, "still here", 10);
  ck_assert_int_eq(raw_flush(r), 0);
  /* The next message is the ping's reply: nothing answers a
   * notification. */
  ck_assert_int_eq(raw_response(r, 42, NULL, 0), 0);
  ck_assert_uint_eq(r->msg.result->via.bin.size, 10);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A memfd of @p size bytes with @p seals added. */
static int memfd_sealed(size_t size, int seals)
{
  int fd = memfd_create("check-daemon", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
  if (seals != 0)
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

/* shm.create with descriptor @p fd (-1: none) for @p size bytes.
 * @return the error code; the message goes to @p msg. */
static int raw_shm_create(raw_t *r, uint32_t msgid, int fd, uint64_t size,
                          char *msg, size_t msgsz)
{
  raw_request(r, msgid, "shm.create", 1);
  msgpack_pack_uint64(&r->pk, size);
  ck_assert_int_eq(fd >= 0 ? raw_flush_fd(r, fd) : raw_flush(r), 0);
  return raw_response(r, msgid, msg, msgsz);
}

/* Descriptors on the connection: only a memfd of the peer, sealed against
 * shrinking and as large as claimed, is taken; each refusal says why and
 * the session goes on. Descriptors nobody claims are a violation. */
START_TEST(test_shm_descriptors)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  char msg[256], path[256];
  int pipefd[2], fd;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);

  ck_assert_int_eq(raw_shm_create(r, 1, -1, 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "no file descriptor") != NULL, "%s", msg);

  fd = memfd_sealed(8192, 0);
  ck_assert_int_eq(raw_shm_create(r, 2, fd, 8192, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "F_SEAL_SHRINK") != NULL, "%s", msg);
  close(fd);

  fd = memfd_sealed(8192, F_SEAL_SHRINK);
  ck_assert_int_eq(raw_shm_create(r, 3, fd, 16384, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "beyond") != NULL, "%s", msg);
  ck_assert_int_eq(raw_shm_create(r, 4, fd, 8192, msg, sizeof(msg)), 0);
  ck_assert_int_eq(r->msg.result->type, MSGPACK_OBJECT_MAP);
  close(fd);

  /* A sparse memfd as large as the host's memory costs nothing to make;
   * pinning it would starve the node. */
  {
    uint64_t phys =
        (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    fd = memfd_sealed((size_t)phys, F_SEAL_SHRINK);
    ck_assert_int_eq(raw_shm_create(r, 40, fd, phys, msg, sizeof(msg)),
                     HIPD_ENOMEM);
    ck_assert_msg(strstr(msg, "half of the host") != NULL, "%s", msg);
    close(fd);
  }

  ck_assert_int_eq(pipe(pipefd), 0);
  ck_assert_int_eq(raw_shm_create(r, 5, pipefd[0], 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "not a memfd") != NULL, "%s", msg);
  close(pipefd[0]);
  close(pipefd[1]);

  /* A file on disk cannot be sealed: refused as unsealed. */
  snprintf(path, sizeof(path), "%s", harness_temp_path("not-memfd"));
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 4096), 0);
  ck_assert_int_eq(raw_shm_create(r, 6, fd, 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  close(fd);
  unlink(path);

  /* The session is still fine. */
  raw_request(r, 7, "ping", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 7, NULL, 0), 0);

  /* Nine descriptors received while one request is still incomplete (its
   * bytes one at a time, each with a descriptor): none is claimed yet, and
   * the ninth is a violation. The daemon goes on. */
  fd = memfd_sealed(4096, F_SEAL_SHRINK);
  raw_request(r, 100, "ping", 1);
  proto_pack_cstr(&r->pk, "sixteen bytes...");
  {
    msgpack_sbuffer whole = r->out;
    ck_assert_uint_gt(whole.size, 9);
    msgpack_sbuffer_init(&r->out);
    for (size_t i = 0; i < 9; i++) {
      msgpack_sbuffer_write(&r->out, whole.data + i, 1);
      if (raw_flush_fd(r, fd) != 0)
        break;
    }
    msgpack_sbuffer_destroy(&whole);
  }
  close(fd);
  ck_assert_int_eq(harness_raw_wait_closed(r->fd, 5000), 1);
  ck_assert(harness_log_wait(d, "more than 8 descriptors", 5000));
  raw_close(r);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* Wait until the daemon closed its copy of the write end of a pipe whose
 * read end is @p rfd (ours is closed): @return 1 at EOF, 0 if the write end
 * is still open somewhere after @p timeout_ms. */
static int pipe_writer_gone(int rfd, int timeout_ms)
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
static int raw_with_pipe(raw_t *r, uint32_t msgid, const char *method,
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

/* A descriptor belongs to the request it came with: a request refused
 * before its handler runs (no hello, unknown method, wrong arity), or one
 * that takes no descriptor, closes it, and the next shm.create gets its own
 * (not a leftover: memfd A sent with a refused request, then memfd B). */
START_TEST(test_fd_claimed_by_its_request)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  char msg[256];
  int rfd, fd;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);

  ck_assert_int_eq(raw_with_pipe(r, 1, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_EHELLO);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "EHELLO kept the descriptor");
  close(rfd);
  raw_hello(r);

  ck_assert_int_eq(raw_with_pipe(r, 2, "shm.creat", 1, &rfd, msg, sizeof(msg)),
                   HIPD_ENOMETHOD);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ENOMETHOD kept the descriptor");
  close(rfd);

  ck_assert_int_eq(raw_with_pipe(r, 3, "shm.create", 2, &rfd, msg, sizeof(msg)),
                   HIPD_EPARAMS);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "EPARAMS kept the descriptor");
  close(rfd);

  ck_assert_int_eq(raw_with_pipe(r, 4, "ping", 0, &rfd, msg, sizeof(msg)), 0);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ping kept the descriptor");
  close(rfd);

  ck_assert_int_eq(raw_with_pipe(r, 5, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "not a memfd") != NULL, "%s", msg);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "EINVAL kept the descriptor");
  close(rfd);

  /* memfd A (4096 bytes) with a shm.create of the wrong arity, then memfd
   * B (8192 bytes) with a good one: B is the one it gets. */
  fd = memfd_sealed(4096, F_SEAL_SHRINK);
  raw_request(r, 6, "shm.create", 2);
  msgpack_pack_uint64(&r->pk, 4096);
  msgpack_pack_uint64(&r->pk, 4096);
  ck_assert_int_eq(raw_flush_fd(r, fd), 0);
  ck_assert_int_eq(raw_response(r, 6, msg, sizeof(msg)), HIPD_EPARAMS);
  close(fd);
  fd = memfd_sealed(8192, F_SEAL_SHRINK);
  ck_assert_int_eq(raw_shm_create(r, 7, fd, 8192, msg, sizeof(msg)), 0);
  close(fd);
  /* ...and the next one without a descriptor finds none. */
  ck_assert_int_eq(raw_shm_create(r, 8, -1, 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "no file descriptor") != NULL, "%s", msg);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A connection that never completes hello is closed after --hello-timeout;
 * one that did stays. */
START_TEST(test_hello_timeout)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--hello-timeout", "300", NULL);
  raw_t *silent, *ok;
  hipd_conn_t *conn;
  int fd;

  ck_assert_ptr_nonnull(d);
  ok = raw_open(d->socket);
  raw_hello(ok);
  silent = raw_open(d->socket);
  /* A ping is allowed before hello but does not stand for it. */
  raw_request(silent, 1, "ping", 0);
  ck_assert_int_eq(raw_flush(silent), 0);
  ck_assert_int_eq(raw_response(silent, 1, NULL, 0), 0);
  fd = harness_raw_connect(d->socket);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(harness_raw_wait_closed(fd, 10000), 1);
  ck_assert_int_eq(harness_raw_wait_closed(silent->fd, 10000), 1);
  ck_assert(harness_log_wait(d, "handshake timeout", 5000));
  close(fd);
  raw_close(silent);
  raw_request(ok, 2, "ping", 0);
  ck_assert_int_eq(raw_flush(ok), 0);
  ck_assert_int_eq(raw_response(ok, 2, NULL, 0), 0);
  raw_close(ok);
  conn = connect_to(d);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A request whose first bytes came and whose rest does not come within
 * --request-timeout closes its session; a session that sends whole
 * requests slowly, or none, stays. */
START_TEST(test_request_timeout)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--request-timeout", "300", NULL);
  raw_t *half, *slow;
  long long end;

  ck_assert_ptr_nonnull(d);
  half = raw_open(d->socket);
  raw_hello(half);
  slow = raw_open(d->socket);
  raw_hello(slow);
  raw_request(half, 1, "ping", 1);
  proto_pack_cstr(&half->pk, "a payload that never ends");
  ck_assert_int_eq(harness_raw_send(half->fd, half->out.data,
                                    half->out.size - 5),
                   0);
  msgpack_sbuffer_clear(&half->out);
  /* Whole pings, slower than the timeout in all, each quick: fine. */
  end = harness_now_ms() + 1500;
  for (uint32_t id = 10; harness_now_ms() < end; id++) {
    raw_request(slow, id, "ping", 0);
    ck_assert_int_eq(raw_flush(slow), 0);
    ck_assert_int_eq(raw_response(slow, id, NULL, 0), 0);
    harness_sleep_ms(100);
  }
  ck_assert_int_eq(harness_raw_wait_closed(half->fd, 10000), 1);
  ck_assert(harness_log_wait(d, "request timeout", 5000));
  raw_close(half);
  raw_request(slow, 1, "ping", 0);
  ck_assert_int_eq(raw_flush(slow), 0);
  ck_assert_int_eq(raw_response(slow, 1, NULL, 0), 0);
  raw_close(slow);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A client that hangs up with 100 requests in flight, one of them a large
 * allocation still running, leaves nothing behind. */
START_TEST(test_disconnect_inflight)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  hipd_info_t *dev = NULL;
  hipd_conn_t *keeper;
  long long deadline;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  keeper = connect_to(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_request(r, 1, "mem.alloc", 2);
  msgpack_pack_uint64(&r->pk, 256 * MiB);
  proto_pack_cstr(&r->pk, "byte");
  raw_request(r, 2, "device.get", 0);
  for (uint32_t i = 3; i <= 100; i++) {
    raw_request(r, i, "ping", 1);
    msgpack_pack_bin_with_body(&r->pk, "x", 1);
  }
  ck_assert_int_eq(raw_flush(r), 0);
  raw_close(r);

  ping_ok(keeper);
  wait_sessions(keeper, 1);
  /* The allocation that finished for nobody is freed. */
  deadline = harness_now_ms() + 10000;
  for (;;) {
    int64_t allocated, buffers;
    ck_assert_int_eq(hipd_device_get(keeper, 0, &dev), 0);
    allocated = info_int(dev, "memory.hipd_allocated");
    buffers = info_int(dev, "memory.hipd_buffers");
    hipd_info_free(dev);
    if (allocated == 0 && buffers == 0)
      break;
    ck_assert_msg(harness_now_ms() < deadline,
                  "%lld bytes in %lld buffers still allocated",
                  (long long)allocated, (long long)buffers);
    harness_sleep_ms(10);
  }
  ping_ok(keeper);
  hipd_close(keeper);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ---------------------------------------------------------- backpressure */

/* A client that sends large pings and never reads the replies is cut off
 * at the output cap; the daemon goes on. */
START_TEST(test_output_cap)
{
  harness_daemon_t *d = harness_start("--output-cap", "1M", NULL);
  size_t payload = 256 << 10;
  char *body = calloc(1, payload);
  int sent = 0, closed;
  hipd_conn_t *keeper;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  keeper = connect_to(d);
  r = raw_open(d->socket);
  raw_hello(r);
  /* 64 MiB of replies at most; the daemon hangs up long before. */
  for (; sent < 256; sent++) {
    raw_request(r, (uint32_t)sent, "ping", 1);
    msgpack_pack_bin_with_body(&r->pk, body, payload);
    if (raw_flush(r) != 0)
      break;
  }
  closed = harness_raw_wait_closed(r->fd, 10000);
  ck_assert_msg(closed, "still connected after %d unread 256 KiB replies",
                sent);
  ck_assert_msg(harness_log_wait(d, "output cap", 5000) ||
                    harness_log_contains(d, "write stalled"),
                "the log does not say why the client was cut off");
  ping_ok(keeper);
  wait_sessions(keeper, 1);
  raw_close(r);
  hipd_close(keeper);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  free(body);
}
END_TEST

/* ------------------------------------------------------------- lifecycle */

/* SIGTERM with clients connected: work in flight finishes or fails with
 * EDISCONNECTED, later calls fail with EDISCONNECTED, nothing hangs, the
 * daemon exits 0 and removes its socket. */
START_TEST(test_shutdown_with_clients)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  hipd_call_t *sync_call = NULL;
  hipd_conn_t *idle, *busy;
  struct stat st;
  int rc;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  idle = connect_to(d);
  busy = connect_to(d);
  ping_ok(idle);
  busy_start(&b, busy, BUSY_BYTES);
  ck_assert_int_eq(hipd_stream_synchronize_begin(busy, b.st, &sync_call), 0);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  ck_assert_msg(stat(d->socket, &st) != 0 && errno == ENOENT,
                "the socket file is still there");

  rc = busy_join(&b);
  ck_assert_msg(rc == 0 || rc == HIPD_EDISCONNECTED, "memset: %s",
                hipd_err_name(rc));
  rc = hipd_wait(sync_call);
  ck_assert_msg(rc == 0 || rc == HIPD_EDISCONNECTED, "synchronize: %s",
                hipd_err_name(rc));
  rc = hipd_ping(idle, "x", 1, NULL, 0, NULL);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "ping after exit: %s",
                hipd_err_name(rc));
  rc = hipd_stream_synchronize(busy, b.st);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "call after exit: %s",
                hipd_err_name(rc));
  ck_assert(harness_log_contains(d, "stopping"));
  ck_assert(harness_log_contains(d, "stopped"));
  hipd_close(idle);
  hipd_close(busy);
  harness_free(d);
}
END_TEST

/* With --shutdown-timeout 0, work still in flight at SIGTERM is abandoned:
 * its calls fail with EDISCONNECTED at once and the daemon exits 0. */
START_TEST(test_shutdown_abandons_work)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--shutdown-timeout", "0", NULL);
  hipd_call_t *sync_call = NULL;
  hipd_conn_t *conn;
  struct stat st;
  int rc;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  busy_start(&b, conn, BUSY_BYTES);
  ck_assert_int_eq(hipd_stream_synchronize_begin(conn, b.st, &sync_call), 0);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  rc = hipd_wait(sync_call);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "synchronize: %s", hipd_err_name(rc));
  rc = busy_join(&b);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "memset: %s", hipd_err_name(rc));
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  ck_assert(stat(d->socket, &st) != 0 && errno == ENOENT);
  ck_assert(harness_log_contains(d, "in-flight work abandoned"));
  hipd_close(conn);
  harness_free(d);
}
END_TEST

/* Send kernel.compile of a kernel that #includes @p path (a FIFO nobody
 * writes: the compiler blocks reading it) as request @p msgid. */
static void raw_compile_include(raw_t *r, uint32_t msgid, const char *path)
{
  char src[512];

  snprintf(src, sizeof(src),
           "#include \"%s\"\n"
           "extern \"C\" __global__ void k(int *p) { *p = 1; }\n",
           path);
  raw_request(r, msgid, "kernel.compile", 2);
  proto_pack_cstr(&r->pk, src);
  proto_pack_cstr(&r->pk, "k");
  ck_assert_int_eq(raw_flush(r), 0);
}

/* Wait until a process has FIFO @p path open for reading; @return a write
 * end (which keeps that reader blocked), or -1 after 20 s. */
static int fifo_wait_reader(const char *path)
{
  long long deadline = harness_now_ms() + 20000;
  int fd;

  while ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
    if (errno != ENXIO || harness_now_ms() > deadline)
      return -1;
    harness_sleep_ms(20);
  }
  return fd;
}

/* SIGTERM while a compile runs, with --shutdown-timeout 1500: requests are
 * answered ESHUTDOWN (and close the descriptor they carried), the session
 * is closed at the deadline, the compiler is killed, and hipd exits 0
 * within the timeout and a bounded margin, not when the compile ends. */
START_TEST(test_shutdown_stops_compiles)
{
  const char *fifo = harness_temp_path("include.fifo");
  harness_daemon_t *d;
  char msg[256];
  int wfd, rfd;
  raw_t *r;

  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  d = harness_start("--devices", "cpu", "--shutdown-timeout", "1500",
                    "--cache-dir", "", NULL);
  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_compile_include(r, 1, fifo);
  wfd = fifo_wait_reader(fifo);
  ck_assert_msg(wfd >= 0, "the compiler never opened the FIFO");
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert(harness_log_wait(d, "stopping", 5000));
  ck_assert_int_eq(raw_with_pipe(r, 2, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_ESHUTDOWN);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ESHUTDOWN kept the descriptor");
  close(rfd);
  ck_assert_int_eq(harness_wait_exit(d, 1500 + 8000), 0);
  ck_assert(harness_log_contains(d, "compilers killed"));
  /* The compiler is gone: nobody reads the FIFO any more. */
  {
    struct pollfd p = {.fd = wfd, .events = POLLOUT};
    ck_assert_int_eq(poll(&p, 1, 5000), 1);
    ck_assert_msg(p.revents & POLLERR, "the FIFO still has a reader");
  }
  close(wfd);
  raw_close(r);
  unlink(fifo);
  harness_free(d);
}
END_TEST

/* A compile that cannot be stopped (here a compiler whose helper left its
 * process group and holds the output pipe; on a GPU, hiprtc in process) is
 * abandoned: hipd exits 0 shortly after the drain instead of waiting for
 * the compile's own timeout (60 s). */
START_TEST(test_shutdown_abandons_compile)
{
  const char *dir = harness_temp_path("cxx");
  char script[600], pidfile[600];
  harness_daemon_t *d;
  FILE *f;
  raw_t *r;
  long pid = 0;

  snprintf(script, sizeof(script), "%s.sh", dir);
  snprintf(pidfile, sizeof(pidfile), "%s.pid", dir);
  f = fopen(script, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "#!/bin/sh\n"
          "[ \"$1\" = --version ] && { echo 'stuck-cxx 1'; exit 0; }\n"
          "setsid sh -c 'echo $$ > %s; exec sleep 120' &\n"
          "exec sleep 120\n",
          pidfile);
  fclose(f);
  ck_assert_int_eq(chmod(script, 0700), 0);
  setenv("HIPD_CXX", script, 1);
  d = harness_start("--devices", "cpu", "--shutdown-timeout", "500",
                    "--cache-dir", "", NULL);
  unsetenv("HIPD_CXX");
  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_compile_include(r, 1, "/dev/null");
  for (int i = 0; i < 1000 && (f = fopen(pidfile, "r")) == NULL; i++)
    harness_sleep_ms(20);
  ck_assert_msg(f != NULL, "the compiler never ran");
  harness_sleep_ms(50);
  ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
  fclose(f);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_int_eq(harness_wait_exit(d, 500 + 8000), 0);
  ck_assert(harness_log_contains(d, "abandoned"));
  kill((pid_t)pid, SIGKILL);
  raw_close(r);
  unlink(script);
  unlink(pidfile);
  harness_free(d);
}
END_TEST

/* A socket file nobody listens on (a crashed daemon's) is replaced. */
START_TEST(test_stale_socket)
{
  const char *path = harness_temp_path("stale.sock");
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  harness_daemon_t *d;
  hipd_conn_t *conn;
  struct stat st;
  int fd;

  ck_assert_ptr_nonnull(path);
  strcpy(sa.sun_path, path);
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(fd);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(S_ISSOCK(st.st_mode));

  d = harness_spawn(path, NULL);
  ck_assert_ptr_nonnull(d);
  ck_assert_msg(harness_wait_ready(d, 20000) == 0,
                "hipd did not start over a stale socket file");
  ck_assert(harness_log_contains(d, "stale socket"));
  conn = connect_to(d);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  ck_assert(stat(path, &st) != 0 && errno == ENOENT);
  harness_free(d);
}
END_TEST

/* A second daemon on a live socket refuses to start and leaves the first
 * one (and its socket file) alone. */
START_TEST(test_second_daemon)
{
  harness_daemon_t *first = harness_start(NULL), *second;
  hipd_conn_t *conn;
  struct stat st;
  int code;

  ck_assert_ptr_nonnull(first);
  conn = connect_to(first);
  second = harness_spawn(first->socket, NULL);
  ck_assert_ptr_nonnull(second);
  code = harness_wait_exit(second, 20000);
  ck_assert_msg(code > 0, "the second daemon %s",
                code == 0 ? "exited 0" : "is still running");
  ck_assert(harness_log_contains(second, "another daemon"));
  ck_assert_int_eq(stat(first->socket, &st), 0);
  ping_ok(conn);
  hipd_close(conn);
  conn = connect_to(first);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(first), 0);
  harness_free(second);
  harness_free(first);
}
END_TEST

START_TEST(test_socket_mode)
{
  harness_daemon_t *d = harness_start(NULL), *d2;
  hipd_conn_t *conn;
  struct stat st;

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(stat(d->socket, &st), 0);
  ck_assert(S_ISSOCK(st.st_mode));
  ck_assert_msg((st.st_mode & 07777) == 0660, "default mode %04o",
                (unsigned)(st.st_mode & 07777));
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);

  d2 = harness_start("--socket-mode", "0600", NULL);
  ck_assert_ptr_nonnull(d2);
  ck_assert_int_eq(stat(d2->socket, &st), 0);
  ck_assert_msg((st.st_mode & 07777) == 0600, "mode %04o",
                (unsigned)(st.st_mode & 07777));
  conn = connect_to(d2);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d2), 0);
  harness_free(d2);
}
END_TEST

static Suite *daemon_suite(void)
{
  Suite *s = suite_create("daemon");
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

  tc = tcase_create("bad requests");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_before_hello);
  tcase_add_test(tc, test_unknown_method);
  tcase_add_test(tc, test_bad_params);
  suite_add_tcase(s, tc);

  tc = tcase_create("violations");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_protocol_violations, 0,
                      sizeof(violations) / sizeof(violations[0]));
  tcase_add_test(tc, test_unknown_notification);
  tcase_add_test(tc, test_shm_descriptors);
  tcase_add_test(tc, test_fd_claimed_by_its_request);
  tcase_add_test(tc, test_hello_timeout);
  tcase_add_test(tc, test_request_timeout);
  tcase_add_test(tc, test_disconnect_inflight);
  tcase_add_test(tc, test_output_cap);
  suite_add_tcase(s, tc);

  tc = tcase_create("lifecycle");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, test_shutdown_with_clients);
  tcase_add_test(tc, test_shutdown_abandons_work);
  tcase_add_test(tc, test_shutdown_stops_compiles);
  tcase_add_test(tc, test_shutdown_abandons_compile);
  tcase_add_test(tc, test_stale_socket);
  tcase_add_test(tc, test_second_daemon);
  tcase_add_test(tc, test_socket_mode);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr;
  int failed;

  harness_init("check_daemon");
  sr = srunner_create(daemon_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
