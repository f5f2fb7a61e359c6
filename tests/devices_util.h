/* SPDX-License-Identifier: MIT */
/* tests/devices_util.h: what the check_devices_* programs share: the
 * daemon of the TCases that share one, memory checks, and a stream kept
 * busy.
 *
 * Those programs test devices, memory, streams, events and profiling end
 * to end against a real hipd (tests/harness.c) through libhipd:
 *   check_devices_info.c      the backend, device records, the current
 *                             device, streams;
 *   check_devices_memory.c    allocation, transfers, copies, memsets,
 *                             stream order, and the errors of bad handles,
 *                             ranges and allocations;
 *   check_devices_events.c    events (also recorded twice, or while a read
 *                             waits) and profiling;
 *   check_devices_sessions.c  quotas, session cleanup, and concurrent
 *                             sessions and streams.
 *
 * Every test runs on every device the daemon serves: the daemon is started
 * with --cpu-devices 2, so there are always two devices or more, and on a
 * GPU host the HIP devices come first and are covered the same way.
 * No assertion depends on how long anything takes. Everything here is
 * static (inline): each program includes it once.
 */
#ifndef HIPD_TESTS_DEVICES_UTIL_H
#define HIPD_TESTS_DEVICES_UTIL_H

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#define TESTUTIL_CLIENT "check_devices"
#define TESTUTIL_TIMEOUT_MS 60000
#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The daemon of the TCases that share one (started by an unchecked
 * fixture, in check's runner process). */
static harness_daemon_t *shared;

/* --------------------------------------------------------------- checks */

/* Assert that @p expr returns @p want, naming the call, the device and the
 * daemon's message. `dev` must be in scope (-1 when there is none). */

/* hipd_allocated and hipd_buffers of device @p dev. */
static inline void device_usage(hipd_conn_t *conn, int dev, int64_t *bytes,
                                int64_t *buffers)
{
  hipd_info_t *info = NULL;

  OK(conn, hipd_device_get(conn, dev, &info));
  *bytes = info_int(info, "memory.hipd_allocated");
  *buffers = info_int(info, "memory.hipd_buffers");
  hipd_info_free(info);
}

static inline void fill_random(void *buf, size_t n, unsigned seed)
{
  uint8_t *p = buf;
  uint32_t x = seed * 2654435761u + 12345;

  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)(x >> 3);
  }
}

/* The first offset where @p a and @p b differ, or -1. */
static inline long long first_diff(const void *a, const void *b, size_t n)
{
  const uint8_t *x = a, *y = b;

  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i])
      return (long long)i;
  return -1;
}

#define ASSERT_SAME(a, b, n, what)                                             \
  do {                                                                         \
    long long at_ = first_diff((a), (b), (n));                                 \
    ck_assert_msg(at_ < 0, "device %d: %s differs at byte %lld", dev, (what),  \
                  at_);                                                        \
  } while (0)

static inline void shared_setup(void)
{
  shared = harness_start("--cpu-devices", "2", NULL);
  ck_assert_msg(shared != NULL, "hipd did not start");
}

static inline void shared_teardown(void)
{
  stop_checked(&shared);
}

/* ------------------------------------------------------------ concurrency */

/*
 * A stream kept busy: large memsets queued on it, and a thread waiting in
 * stream.synchronize behind them. On a CPU device a memset runs to
 * completion inside its call, so one 512 MiB memset (the first touch of
 * its pages) is issued by a thread of its own and the synchronize is
 * queued while it runs; on a GPU the memsets are asynchronous, so 1024 of
 * 2 GiB are queued first. Either way a hundred milliseconds or more of
 * device work are pending once busy_start() returns; tests then check that
 * what they do meanwhile is not held up (busy_pending() still true
 * afterwards), never how long anything took.
 */
typedef struct {
  hipd_conn_t *conn;
  int cpu;
  hipd_buffer_t buf;
  hipd_stream_t st;
  size_t size;
  int reps;
  int issue_rc, sync_rc;
  atomic_int issued, synced;
  pthread_t issuer, syncer;
} busy_t;

static inline void *busy_issue_main(void *arg)
{
  busy_t *b = arg;

  for (int i = 0; i < b->reps && b->issue_rc == 0; i++)
    b->issue_rc =
        hipd_mem_memset_async(b->conn, b->buf, 0, b->size, i & 0xff, b->st);
  atomic_store(&b->issued, 1);
  return NULL;
}

static inline void *busy_sync_main(void *arg)
{
  busy_t *b = arg;

  b->sync_rc = hipd_stream_synchronize(b->conn, b->st);
  atomic_store(&b->synced, 1);
  return NULL;
}

/* Wait until the session of @p b has @p want requests in flight (counting
 * the session.info asking), or @p stop is set. */
static inline void wait_inflight(busy_t *b, int64_t want, atomic_int *stop)
{
  long long deadline = harness_now_ms() + 30000;
  int64_t inflight = 0;

  while (inflight < want && !atomic_load(stop)) {
    hipd_info_t *info = NULL;
    int rc = hipd_session_info(b->conn, &info);
    ck_assert_msg(rc == 0, "session.info: %s", hipd_err_name(rc));
    inflight = info_int(info, "inflight");
    hipd_info_free(info);
    ck_assert_msg(harness_now_ms() < deadline, "the work never started");
  }
}

static inline void busy_start(busy_t *b, hipd_conn_t *conn, int dev)
{
  memset(b, 0, sizeof(*b));
  b->conn = conn;
  b->cpu = device_is_cpu(conn, dev);
  b->size = b->cpu ? 512 * MiB : 2048 * MiB;
  b->reps = b->cpu ? 1 : 1024;
  atomic_init(&b->issued, 0);
  atomic_init(&b->synced, 0);
  OK(conn, hipd_mem_alloc(conn, dev, b->size, "byte", &b->buf));
  OK(conn, hipd_stream_create(conn, dev, &b->st));
  ck_assert_int_eq(pthread_create(&b->issuer, NULL, busy_issue_main, b), 0);
  if (b->cpu) {
    /* The memset is at the daemon: its call and this session.info. */
    wait_inflight(b, 2, &b->issued);
  } else {
    /* All queued. */
    pthread_join(b->issuer, NULL);
  }
  ck_assert_int_eq(pthread_create(&b->syncer, NULL, busy_sync_main, b), 0);
  /* The synchronize is at the daemon too. */
  wait_inflight(b, b->cpu ? 3 : 2, &b->synced);
}

/* Is the stream's work still pending (nobody's wait has returned)? */
static inline int busy_pending(busy_t *b)
{
  return !atomic_load(&b->synced) && (!b->cpu || !atomic_load(&b->issued));
}

static inline void busy_finish(busy_t *b, int dev)
{
  if (b->cpu)
    pthread_join(b->issuer, NULL);
  pthread_join(b->syncer, NULL);
  ck_assert_msg(b->issue_rc == 0, "device %d: memset: %s", dev,
                hipd_err_name(b->issue_rc));
  ck_assert_msg(b->sync_rc == 0, "device %d: synchronize: %s", dev,
                hipd_err_name(b->sync_rc));
  OK(b->conn, hipd_stream_destroy(b->conn, b->st));
  OK(b->conn, hipd_mem_free(b->conn, b->buf));
}

/* Two sessions, each on its own device, working at the same time: every
 * round trip of each is checked byte for byte. */

#endif
