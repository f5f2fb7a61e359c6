/* SPDX-License-Identifier: MIT */
/* tests/lib/devices_util.h: what the check_devices_* programs share: the
 * daemon of the TCases that share one, memory checks, and a stream kept
 * busy.
 *
 * Those programs test devices, memory, streams, events and profiling end
 * to end against a real hipd (tests/lib/harness.c) through libhipd:
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
 * No assertion depends on how long anything takes. Compiled once in
 * tests/lib/devices_util.c (libhipdtest_devices).
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
extern harness_daemon_t *shared;

/* --------------------------------------------------------------- checks */

/* hipd_allocated and hipd_buffers of device @p dev. */
void device_usage(hipd_conn_t *conn, int dev, int64_t *bytes, int64_t *buffers);

/* Random bytes from @p seed (xorshift32). */
void fill_random(void *buf, size_t n, unsigned seed);

/* The first offset where @p a and @p b differ, or -1. */
long long first_diff(const void *a, const void *b, size_t n);

/* Assert that @p n bytes at @p a and @p b are the same, naming @p what and
 * the device (a variable `dev` in scope). */
#define ASSERT_SAME(a, b, n, what)                                             \
  do {                                                                         \
    long long at_ = first_diff((a), (b), (n));                                 \
    ck_assert_msg(at_ < 0, "device %d: %s differs at byte %lld", dev, (what),  \
                  at_);                                                        \
  } while (0)

/* The fixture of the shared daemon: hipd with --cpu-devices 2. */
void shared_setup(void);
void shared_teardown(void);

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

/* Keep a stream of device @p dev busy (above). */
void busy_start(busy_t *b, hipd_conn_t *conn, int dev);
/* Is the stream's work still pending (nobody's wait has returned)? */
int busy_pending(busy_t *b);
/* Join the threads and check that the memsets and the wait succeeded. */
void busy_finish(busy_t *b, int dev);

#endif
