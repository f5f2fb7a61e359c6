/* SPDX-License-Identifier: MIT */
/* tests/lib/devices_util.c: the helpers of tests/lib/devices_util.h. */
#include "config.h"

#include "devices_util.h"

/* The daemon of the TCases that share one (started by an unchecked
 * fixture, in check's runner process). */
harness_daemon_t *shared;

/* --------------------------------------------------------------- checks */

/* hipd_allocated and hipd_buffers of device @p dev. */
void device_usage(hipd_conn_t *conn, int dev, int64_t *bytes, int64_t *buffers)
{
  hipd_info_t *info = NULL;

  OK(conn, hipd_device_get(conn, dev, &info));
  *bytes = info_int(info, "memory.hipd_allocated");
  *buffers = info_int(info, "memory.hipd_buffers");
  hipd_info_free(info);
}

void fill_random(void *buf, size_t n, unsigned seed)
{
  testutil_fill_xorshift(buf, n, seed * 2654435761u + 12345, 3);
}

/* The first offset where @p a and @p b differ, or -1. */
long long first_diff(const void *a, const void *b, size_t n)
{
  const uint8_t *x = a, *y = b;

  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i])
      return (long long)i;
  return -1;
}

void shared_setup(void)
{
  shared = harness_start("--cpu-devices", "2", NULL);
  ck_assert_msg(shared != NULL, "hipd did not start");
}

void shared_teardown(void)
{
  stop_checked(&shared);
}

/* ------------------------------------------------------------ concurrency */

static void *busy_issue_main(void *arg)
{
  busy_t *b = arg;

  for (int i = 0; i < b->reps && b->issue_rc == 0; i++)
    b->issue_rc =
        hipd_mem_memset_async(b->conn, b->buf, 0, b->size, i & 0xff, b->st);
  atomic_store(&b->issued, 1);
  return NULL;
}

static void *busy_sync_main(void *arg)
{
  busy_t *b = arg;

  b->sync_rc = hipd_stream_synchronize(b->conn, b->st);
  atomic_store(&b->synced, 1);
  return NULL;
}

/* Wait until the session of @p b has @p want requests in flight (counting
 * the session.info asking), or @p stop is set. */
static void wait_inflight(busy_t *b, int64_t want, atomic_int *stop)
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

void busy_start(busy_t *b, hipd_conn_t *conn, int dev)
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
int busy_pending(busy_t *b)
{
  return !atomic_load(&b->synced) && (!b->cpu || !atomic_load(&b->issued));
}

void busy_finish(busy_t *b, int dev)
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
