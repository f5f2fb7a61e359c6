/* tests/check_devices.c: devices, memory, streams, events and profiling,
 * end to end against a real hipd (tests/harness.c) through libhipd.
 *
 * Every test runs on every device the daemon serves: the daemon is started
 * with --cpu-devices 2, so there are always two devices or more, and on a
 * GPU host the HIP devices come first and are covered the same way.
 * No assertion depends on how long anything takes.
 */
#include "config.h"

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
static void device_usage(hipd_conn_t *conn, int dev, int64_t *bytes,
                         int64_t *buffers)
{
  hipd_info_t *info = NULL;

  OK(conn, hipd_device_get(conn, dev, &info));
  *bytes = info_int(info, "memory.hipd_allocated");
  *buffers = info_int(info, "memory.hipd_buffers");
  hipd_info_free(info);
}

static void fill_random(void *buf, size_t n, unsigned seed)
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
static long long first_diff(const void *a, const void *b, size_t n)
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

static void shared_setup(void)
{
  shared = harness_start("--cpu-devices", "2", NULL);
  ck_assert_msg(shared != NULL, "hipd did not start");
}

static void shared_teardown(void)
{
  stop_checked(&shared);
}

/* -------------------------------------------------- backend and devices */

START_TEST(test_backend_info)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  int dev = -1, cpu = 0, n;

  OK(conn, hipd_backend_info(conn, &info));
  ck_assert_str_eq(info_str(info, "name"), "hip");
  ck_assert_str_eq(info_str(info, "execution_model"), "jit");
  ck_assert(info_bool(info, "available"));
  ck_assert_int_eq(hipd_info_len(info, "version"), 3);
  ck_assert_int_ge(info_int(info, "version.0"), 0);
  n = hipd_info_len(info, "drivers");
  ck_assert_int_ge(n, 1);
  for (int i = 0; i < n; i++) {
    char path[32];
    snprintf(path, sizeof(path), "drivers.%d", i);
    cpu |= strcmp(info_str(info, path), "cpu") == 0;
  }
  ck_assert_msg(cpu, "the drivers do not include cpu");
  hipd_info_free(info);
  hipd_close(conn);
}
END_TEST

/* The capabilities every device record must have, sane. */
static void check_caps(const hipd_info_t *info, const char *prefix, int dev)
{
  char p[128];
  const char *driver;
  int is_cpu;

#define FIELD(name) (snprintf(p, sizeof(p), "%s%s", prefix, name), p)
  ck_assert_int_eq(info_int(info, FIELD("id")), dev);
  ck_assert_str_ne(info_str(info, FIELD("name")), "");
  ck_assert_str_ne(info_str(info, FIELD("arch")), "");
  ck_assert_str_ne(info_str(info, FIELD("platform")), "");
  driver = info_str(info, FIELD("driver"));
  is_cpu = info_bool(info, FIELD("is_cpu"));
  ck_assert_msg(is_cpu == (strcmp(driver, "cpu") == 0),
                "device %d: driver %s but is_cpu %d", dev, driver, is_cpu);
  ck_assert_int_eq(info_bool(info, FIELD("capabilities.is_cpu")), is_cpu);
  ck_assert_int_gt(info_int(info, FIELD("capabilities.max_threads_per_block")),
                   0);
  for (int i = 0; i < 3; i++) {
    char key[64];
    snprintf(key, sizeof(key), "capabilities.max_block_dims.%d", i);
    ck_assert_int_gt(info_int(info, FIELD(key)), 0);
    snprintf(key, sizeof(key), "capabilities.max_grid_dims.%d", i);
    ck_assert_int_gt(info_int(info, FIELD(key)), 0);
  }
  ck_assert_int_gt(info_int(info, FIELD("capabilities.total_global_mem")), 0);
  ck_assert_int_ge(info_int(info, FIELD("capabilities.warp_size")), 1);
  ck_assert_int_ge(info_int(info, FIELD("capabilities.multiprocessor_count")),
                   1);
  ck_assert_int_ge(info_int(info, FIELD("capabilities.shared_mem_per_block")),
                   0);
  ck_assert_int_eq(
      hipd_info_len(info, FIELD("capabilities.compute_capability")), 2);
  if (!is_cpu)
    ck_assert_int_ge(info_int(info, FIELD("capabilities.warp_size")), 32);
#undef FIELD
}

START_TEST(test_device_records)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *list = NULL;
  int n = device_count(conn), cpus = 0, dev = -1;

  OK(conn, hipd_device_list(conn, &list));
  ck_assert_int_eq(hipd_info_len(list, ""), n);
  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    char prefix[16], path[64];

    snprintf(prefix, sizeof(prefix), "%d.", dev);
    check_caps(list, prefix, dev);
    /* The list has no live memory figures. */
    snprintf(path, sizeof(path), "%d.memory", dev);
    ck_assert_int_eq(hipd_info_len(list, path), HIPD_ENOENT);

    OK(conn, hipd_device_get(conn, dev, &info));
    check_caps(info, "", dev);
    snprintf(path, sizeof(path), "%d.name", dev);
    ck_assert_str_eq(info_str(info, "name"), info_str(list, path));
    ck_assert_int_gt(info_int(info, "memory.total"), 0);
    ck_assert_int_ge(info_int(info, "memory.free"), 0);
    ck_assert_int_le(info_int(info, "memory.free"),
                     info_int(info, "memory.total"));
    ck_assert_int_ge(info_int(info, "memory.hipd_allocated"), 0);
    ck_assert_int_ge(info_int(info, "memory.hipd_buffers"), 0);
    cpus += info_bool(info, "is_cpu");
    hipd_info_free(info);
  }
  ck_assert_int_ge(cpus, 2);
  hipd_info_free(list);
  hipd_close(conn);
}
END_TEST

START_TEST(test_current_device)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), cur = -1, dev = -1;
  hipd_info_t *info = NULL;

  OK(conn, hipd_device_current(conn, &cur));
  ck_assert_int_eq(cur, 0);
  for (dev = 0; dev < n; dev++) {
    hipd_stream_t s_cur = 0, s_dev = 0;
    hipd_buffer_t buf = 0;
    hipd_event_t ev = 0;

    OK(conn, hipd_device_set_current(conn, dev));
    OK(conn, hipd_device_current(conn, &cur));
    ck_assert_int_eq(cur, dev);
    OK(conn, hipd_device_get(conn, HIPD_DEVICE_CURRENT, &info));
    ck_assert_int_eq(info_int(info, "id"), dev);
    hipd_info_free(info);
    OK(conn, hipd_stream_default(conn, HIPD_DEVICE_CURRENT, &s_cur));
    OK(conn, hipd_stream_default(conn, dev, &s_dev));
    ck_assert_uint_eq(s_cur, s_dev);
    OK(conn, hipd_mem_alloc(conn, HIPD_DEVICE_CURRENT, 64, "float32", &buf));
    OK(conn, hipd_mem_info(conn, buf, &info));
    ck_assert_int_eq(info_int(info, "device"), dev);
    hipd_info_free(info);
    /* An event of the current device records on its default stream. */
    OK(conn, hipd_event_create(conn, HIPD_DEVICE_CURRENT, &ev));
    OK(conn, hipd_event_record(conn, ev, s_dev));
    OK(conn, hipd_event_synchronize(conn, ev));
    OK(conn, hipd_device_synchronize(conn, HIPD_DEVICE_CURRENT));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_mem_free(conn, buf));
  }

  /* Devices that do not exist. */
  dev = n;
  EXPECT(conn, hipd_device_set_current(conn, n), HIPD_ENODEV);
  OK(conn, hipd_device_current(conn, &cur));
  ck_assert_int_eq(cur, n - 1);
  EXPECT(conn, hipd_device_get(conn, n, &info), HIPD_ENODEV);
  ck_assert_ptr_null(info);
  EXPECT(conn, hipd_device_get(conn, 1000000, &info), HIPD_ENODEV);
  EXPECT(conn, hipd_device_get(conn, -7, &info), HIPD_ENODEV);
  EXPECT(conn, hipd_device_synchronize(conn, n), HIPD_ENODEV);
  {
    hipd_stream_t st = 0;
    hipd_buffer_t buf = 0;
    hipd_event_t ev = 0;
    EXPECT(conn, hipd_stream_create(conn, n, &st), HIPD_ENODEV);
    EXPECT(conn, hipd_stream_default(conn, n, &st), HIPD_ENODEV);
    EXPECT(conn, hipd_mem_alloc(conn, n, 16, "byte", &buf), HIPD_ENODEV);
    EXPECT(conn, hipd_mem_alloc_custom(conn, n, 16, 4, &buf), HIPD_ENODEV);
    EXPECT(conn, hipd_event_create(conn, n, &ev), HIPD_ENODEV);
    ck_assert_uint_eq(st, 0);
    ck_assert_uint_eq(buf, 0);
    ck_assert_uint_eq(ev, 0);
  }
  EXPECT(conn, hipd_device_set_current(conn, HIPD_DEVICE_CURRENT), HIPD_EINVAL);
  hipd_close(conn);
}
END_TEST

/* ---------------------------------------------------------------- streams */

START_TEST(test_streams)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  hipd_stream_t prev_default = 0;

  for (dev = 0; dev < n; dev++) {
    hipd_stream_t s1 = 0, s2 = 0, def = 0, def2 = 0;
    int idle = -1;

    OK(conn, hipd_stream_create(conn, dev, &s1));
    OK(conn, hipd_stream_create(conn, dev, &s2));
    ck_assert_uint_ne(s1, 0);
    ck_assert_uint_ne(s1, s2);
    OK(conn, hipd_stream_synchronize(conn, s1));
    OK(conn, hipd_stream_query(conn, s1, &idle));
    ck_assert_int_eq(idle, 1);

    OK(conn, hipd_stream_default(conn, dev, &def));
    OK(conn, hipd_stream_default(conn, dev, &def2));
    ck_assert_uint_ne(def, 0);
    ck_assert_uint_eq(def, def2);
    ck_assert_uint_ne(def, prev_default);
    prev_default = def;
    OK(conn, hipd_stream_synchronize(conn, def));
    EXPECT(conn, hipd_stream_destroy(conn, def), HIPD_EPERM);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "default"));
    OK(conn, hipd_stream_synchronize(conn, def));

    /* Work queued on a stream still runs after the stream is destroyed.
     * Streams are not ordered with one another, so the read on the default
     * stream waits for it through an event recorded on s1 after the
     * memset (an event follows its record). */
    {
      hipd_buffer_t buf = 0;
      hipd_event_t ev = 0;
      uint8_t back[256];
      OK(conn, hipd_mem_alloc(conn, dev, sizeof(back), "byte", &buf));
      OK(conn, hipd_event_create(conn, dev, &ev));
      OK(conn, hipd_mem_memset(conn, buf, 0, sizeof(back), 0));
      OK(conn, hipd_mem_memset_async(conn, buf, 0, sizeof(back), 0x33, s1));
      OK(conn, hipd_event_record(conn, ev, s1));
      OK(conn, hipd_stream_destroy(conn, s1));
      OK(conn, hipd_event_synchronize(conn, ev));
      OK(conn, hipd_event_destroy(conn, ev));
      OK(conn, hipd_mem_read(conn, buf, 0, back, sizeof(back)));
      for (size_t i = 0; i < sizeof(back); i++)
        ck_assert_uint_eq(back[i], 0x33);
      OK(conn, hipd_mem_free(conn, buf));
    }
    EXPECT(conn, hipd_stream_synchronize(conn, s1), HIPD_ESTALE);
    EXPECT(conn, hipd_stream_query(conn, s1, &idle), HIPD_ESTALE);
    EXPECT(conn, hipd_stream_destroy(conn, s1), HIPD_ESTALE);
    OK(conn, hipd_stream_synchronize(conn, s2));
    OK(conn, hipd_device_synchronize(conn, dev));
    OK(conn, hipd_stream_destroy(conn, s2));
  }
  hipd_close(conn);
}
END_TEST

/* ----------------------------------------------------------------- memory */

START_TEST(test_alloc_kinds)
{
  static const struct {
    const char *kind;
    uint64_t size;
  } kinds[] = {
      {"int8", 1},    {"uint8", 1},  {"int16", 2},   {"uint16", 2},
      {"float16", 2}, {"int32", 4},  {"uint32", 4},  {"float32", 4},
      {"int64", 8},   {"uint64", 8}, {"float64", 8}, {"byte", 1},
  };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_buffer_t buf = 0;
    uint64_t size = 0;

    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
      OK(conn, hipd_mem_alloc(conn, dev, 10, kinds[k].kind, &buf));
      ck_assert_uint_ne(buf, 0);
      OK(conn, hipd_mem_size(conn, buf, &size));
      ck_assert_uint_eq(size, 10 * kinds[k].size);
      OK(conn, hipd_mem_info(conn, buf, &info));
      ck_assert_int_eq(info_int(info, "size"), (int64_t)(10 * kinds[k].size));
      ck_assert_int_eq(info_int(info, "elem_size"), (int64_t)kinds[k].size);
      ck_assert_int_eq(info_int(info, "count"), 10);
      ck_assert_int_eq(info_int(info, "device"), dev);
      ck_assert_int_ne(info_int(info, "device_ptr"), 0);
      info_bool(info, "zero_copy");
      hipd_info_free(info);
      OK(conn, hipd_mem_free(conn, buf));
    }
    OK(conn, hipd_mem_alloc_custom(conn, dev, 7, 12, &buf));
    OK(conn, hipd_mem_size(conn, buf, &size));
    ck_assert_uint_eq(size, 84);
    OK(conn, hipd_mem_info(conn, buf, &info));
    ck_assert_int_eq(info_int(info, "elem_size"), 12);
    ck_assert_int_eq(info_int(info, "count"), 7);
    hipd_info_free(info);
    OK(conn, hipd_mem_free(conn, buf));
  }
  hipd_close(conn);
}
END_TEST

/* Writes of 1 byte, 4 KiB + 3 and 8 MiB at several offsets read back
 * exactly, and leave the bytes around them alone. */
START_TEST(test_round_trip)
{
  static const size_t sizes[] = {1, 4 * KiB + 3, 8 * MiB};
  static const size_t offsets[] = {0, 3, 4096 + 1};
  const size_t cap = 8 * MiB + 8192;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *data = xmalloc(8 * MiB), *back = xmalloc(cap),
          *expect = xmalloc(cap);

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t buf = 0;

    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &buf));
    OK(conn, hipd_mem_memset(conn, buf, 0, cap, 0x11));
    memset(expect, 0x11, cap);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
      for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
        size_t len = sizes[s], off = offsets[o];
        fill_random(data, len, (unsigned)(dev * 100 + s * 10 + o));
        OK(conn, hipd_mem_write(conn, buf, off, data, len));
        memcpy(expect + off, data, len);
        memset(back, 0, len);
        OK(conn, hipd_mem_read(conn, buf, off, back, len));
        ASSERT_SAME(back, data, len, "the bytes read back");
      }
    }
    /* The whole buffer: every write landed where it was aimed. */
    OK(conn, hipd_mem_read(conn, buf, 0, back, cap));
    ASSERT_SAME(back, expect, cap, "the whole buffer");
    /* Zero-length transfers are fine. */
    OK(conn, hipd_mem_write(conn, buf, cap, data, 0));
    OK(conn, hipd_mem_read(conn, buf, cap, back, 0));
    OK(conn, hipd_mem_free(conn, buf));
  }
  free(data);
  free(back);
  free(expect);
  hipd_close(conn);
}
END_TEST

/* mem.copy within a device and between every pair of devices, byte for
 * byte, synchronous and on a stream. */
START_TEST(test_copy)
{
  const size_t len = MiB + 3, cap = MiB + 64;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev = -1;
  uint8_t *data = xmalloc(cap), *back = xmalloc(cap), *expect = xmalloc(cap);

  for (int from = 0; from < n; from++) {
    for (int to = 0; to < n; to++) {
      hipd_buffer_t src = 0, dst = 0;
      hipd_stream_t st = 0;

      dev = from * 100 + to; /* for messages: from * 100 + to */
      OK(conn, hipd_mem_alloc(conn, from, cap, "byte", &src));
      OK(conn, hipd_mem_alloc(conn, to, cap, "byte", &dst));
      fill_random(data, cap, (unsigned)dev);
      OK(conn, hipd_mem_write(conn, src, 0, data, cap));
      OK(conn, hipd_mem_memset(conn, dst, 0, cap, 0));

      OK(conn, hipd_mem_copy(conn, dst, 7, src, 5, len));
      memset(expect, 0, cap);
      memcpy(expect + 7, data + 5, len);
      OK(conn, hipd_mem_read(conn, dst, 0, back, cap));
      ASSERT_SAME(back, expect, cap, "the copy");
      OK(conn, hipd_mem_read(conn, src, 0, back, cap));
      ASSERT_SAME(back, data, cap, "the copy's source");

      /* On a stream of the destination's device, then the source's. */
      OK(conn, hipd_stream_create(conn, to, &st));
      OK(conn, hipd_mem_copy_async(conn, dst, 0, src, 0, cap, st));
      OK(conn, hipd_stream_synchronize(conn, st));
      OK(conn, hipd_mem_read(conn, dst, 0, back, cap));
      ASSERT_SAME(back, data, cap, "the stream-ordered copy");
      OK(conn, hipd_stream_destroy(conn, st));
      OK(conn, hipd_stream_create(conn, from, &st));
      OK(conn, hipd_mem_memset(conn, dst, 0, cap, 0));
      OK(conn, hipd_mem_copy_async(conn, dst, 1, src, 0, 100, st));
      OK(conn, hipd_stream_synchronize(conn, st));
      OK(conn, hipd_mem_read(conn, dst, 0, back, 101));
      ck_assert_uint_eq(back[0], 0);
      ASSERT_SAME(back + 1, data, 100, "the copy on the source's stream");
      OK(conn, hipd_stream_destroy(conn, st));

      OK(conn, hipd_mem_free(conn, src));
      OK(conn, hipd_mem_free(conn, dst));
    }
  }
  free(data);
  free(back);
  free(expect);
  hipd_close(conn);
}
END_TEST

START_TEST(test_memset)
{
  const size_t cap = 64 * KiB;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *data = xmalloc(cap), *back = xmalloc(cap);

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t buf = 0;

    fill_random(data, cap, (unsigned)dev);
    OK(conn, hipd_mem_alloc(conn, dev, cap, "uint8", &buf));
    OK(conn, hipd_mem_write(conn, buf, 0, data, cap));
    OK(conn, hipd_mem_memset(conn, buf, 100, 1000, 0xab));
    memset(data + 100, 0xab, 1000);
    /* -1 fills with 0xff, as C's memset does. */
    OK(conn, hipd_mem_memset(conn, buf, cap - 10, 10, -1));
    memset(data + cap - 10, 0xff, 10);
    OK(conn, hipd_mem_memset(conn, buf, 5000, 0, 0x12));
    OK(conn, hipd_mem_read(conn, buf, 0, back, cap));
    ASSERT_SAME(back, data, cap, "the memset buffer");
    OK(conn, hipd_mem_free(conn, buf));
  }
  free(data);
  free(back);
  hipd_close(conn);
}
END_TEST

/* The _async transfers on a created stream, then synchronize. */
START_TEST(test_async_ops)
{
  const size_t cap = 256 * KiB + 5;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *data = xmalloc(cap), *back = xmalloc(cap), *back2 = xmalloc(cap);

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t a = 0, b = 0;
    hipd_stream_t st = 0;
    hipd_call_t *rd = NULL, *wr = NULL;
    int idle = 0;

    fill_random(data, cap, (unsigned)dev + 7);
    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &a));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &b));
    OK(conn, hipd_mem_write_async(conn, a, 0, data, cap, st));
    OK(conn, hipd_mem_memset_async(conn, a, 10, 20, 0xcd, st));
    memset(data + 10, 0xcd, 20);
    OK(conn, hipd_mem_copy_async(conn, b, 0, a, 0, cap, st));
    OK(conn, hipd_mem_read_async(conn, b, 0, back, cap, st));
    ASSERT_SAME(back, data, cap, "read_async");
    OK(conn, hipd_stream_synchronize(conn, st));
    OK(conn, hipd_stream_query(conn, st, &idle));
    ck_assert_int_eq(idle, 1);
    OK(conn, hipd_mem_read(conn, b, 0, back, cap));
    ASSERT_SAME(back, data, cap, "the copy after synchronize");

    /* The pipelined forms: a write and a read in flight together. */
    fill_random(data, cap, (unsigned)dev + 8);
    OK(conn, hipd_mem_write_async_begin(conn, a, 0, data, cap, st, &wr));
    OK(conn, hipd_mem_read_async_begin(conn, a, 0, back2, cap, st, &rd));
    OK(conn, hipd_wait(rd));
    OK(conn, hipd_wait(wr));
    ASSERT_SAME(back2, data, cap, "read_async after write_async");

    /* A buffer freed with a transfer in flight: the handle goes at once,
     * the memory after the transfer, which completes. */
    OK(conn, hipd_mem_write_async_begin(conn, b, 0, data, cap, st, &wr));
    OK(conn, hipd_mem_free(conn, b));
    OK(conn, hipd_wait(wr));
    EXPECT(conn, hipd_mem_read(conn, b, 0, back, 1), HIPD_ESTALE);
    OK(conn, hipd_stream_synchronize(conn, st));

    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, a));
  }
  free(data);
  free(back);
  free(back2);
  hipd_close(conn);
}
END_TEST

/* Work on one stream runs in order: write A, memset, write B, read. */
START_TEST(test_stream_order)
{
  const size_t cap = MiB;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *a = xmalloc(cap), *b = xmalloc(2000), *back = xmalloc(cap),
          *expect = xmalloc(cap);

  for (dev = 0; dev < n; dev++) {
    hipd_call_t *wa = NULL, *wb = NULL, *rd = NULL;
    hipd_buffer_t buf = 0;
    hipd_stream_t st = 0;

    fill_random(a, cap, (unsigned)dev + 1);
    fill_random(b, 2000, (unsigned)dev + 2);
    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &buf));
    OK(conn, hipd_mem_write_async_begin(conn, buf, 0, a, cap, st, &wa));
    OK(conn, hipd_mem_memset_async(conn, buf, 1000, 5000, 0x77, st));
    OK(conn, hipd_mem_write_async_begin(conn, buf, 4000, b, 2000, st, &wb));
    OK(conn, hipd_mem_read_async_begin(conn, buf, 0, back, cap, st, &rd));
    OK(conn, hipd_wait(rd));
    OK(conn, hipd_wait(wb));
    OK(conn, hipd_wait(wa));
    memcpy(expect, a, cap);
    memset(expect + 1000, 0x77, 5000);
    memcpy(expect + 4000, b, 2000);
    ASSERT_SAME(back, expect, cap, "the stream-ordered result");
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, buf));
  }
  free(a);
  free(b);
  free(back);
  free(expect);
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------------ bad handles */

START_TEST(test_handle_errors)
{
  hipd_conn_t *conn = connect_to(shared), *other = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t bytes[16] = {0};
  uint64_t size;

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t mine = 0, theirs = 0, freed = 0;
    hipd_stream_t st = 0, their_st = 0;
    hipd_event_t ev = 0;
    int idle;

    OK(conn, hipd_mem_alloc(conn, dev, 16, "byte", &mine));
    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_event_create(conn, dev, &ev));
    OK(other, hipd_mem_alloc(other, dev, 16, "byte", &theirs));
    OK(other, hipd_stream_create(other, dev, &their_st));

    /* Another connection's handles. */
    EXPECT(conn, hipd_mem_size(conn, theirs, &size), HIPD_EFOREIGN);
    EXPECT(conn, hipd_mem_write(conn, theirs, 0, bytes, 16), HIPD_EFOREIGN);
    EXPECT(conn, hipd_mem_read(conn, theirs, 0, bytes, 16), HIPD_EFOREIGN);
    EXPECT(conn, hipd_mem_copy(conn, mine, 0, theirs, 0, 16), HIPD_EFOREIGN);
    EXPECT(conn, hipd_mem_free(conn, theirs), HIPD_EFOREIGN);
    EXPECT(conn, hipd_stream_synchronize(conn, their_st), HIPD_EFOREIGN);
    EXPECT(conn, hipd_mem_write_async(conn, mine, 0, bytes, 16, their_st),
           HIPD_EFOREIGN);
    /* ...which still work for their owner. */
    OK(other, hipd_mem_write(other, theirs, 0, bytes, 16));

    /* A freed buffer. */
    OK(conn, hipd_mem_alloc(conn, dev, 16, "byte", &freed));
    OK(conn, hipd_mem_free(conn, freed));
    EXPECT(conn, hipd_mem_size(conn, freed, &size), HIPD_ESTALE);
    EXPECT(conn, hipd_mem_write(conn, freed, 0, bytes, 16), HIPD_ESTALE);
    EXPECT(conn, hipd_mem_read(conn, freed, 0, bytes, 16), HIPD_ESTALE);
    EXPECT(conn, hipd_mem_memset(conn, freed, 0, 16, 0), HIPD_ESTALE);
    EXPECT(conn, hipd_mem_free(conn, freed), HIPD_ESTALE);

    /* Forged handles. A handle is tag:24 | generation:16 | index+1:24
     * (daemon/handles.h); these keep this session's tag, so they can only
     * be forged, not another session's. */
    EXPECT(conn, hipd_mem_size(conn, 0, &size), HIPD_EHANDLE);
    EXPECT(conn, hipd_mem_size(conn, mine | 0xffffff, &size), HIPD_EHANDLE);
    EXPECT(conn, hipd_mem_size(conn, mine & ~UINT64_C(0xffffff), &size),
           HIPD_EHANDLE);
    EXPECT(conn, hipd_mem_free(conn, mine & ~(UINT64_C(0xffff) << 24)),
           HIPD_EHANDLE);
    EXPECT(conn, hipd_stream_synchronize(conn, st + (UINT64_C(5) << 24)),
           HIPD_EHANDLE);

    /* Handles of the wrong type. */
    EXPECT(conn, hipd_mem_size(conn, st, &size), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_mem_write(conn, st, 0, bytes, 16), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_mem_free(conn, ev), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_stream_synchronize(conn, mine), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_stream_query(conn, ev, &idle), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_event_record(conn, mine, 0), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_mem_write_async(conn, mine, 0, bytes, 16, mine),
           HIPD_EHANDLETYPE);

    /* None of it broke the good handles. */
    OK(conn, hipd_mem_write(conn, mine, 0, bytes, 16));
    OK(conn, hipd_stream_synchronize(conn, st));
    OK(conn, hipd_mem_free(conn, mine));
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(other, hipd_mem_free(other, theirs));
    OK(other, hipd_stream_destroy(other, their_st));
  }
  hipd_close(other);
  hipd_close(conn);
}
END_TEST

/* Assert that the last error names both numbers and says "offset". */
static void check_range_message(hipd_conn_t *conn, int dev, const char *a,
                                const char *b)
{
  const char *msg = hipd_last_error(conn);

  ck_assert_msg(strstr(msg, "offset") && strstr(msg, a) && strstr(msg, b),
                "device %d: the message '%s' should name offset %s and %s", dev,
                msg, a, b);
}

START_TEST(test_range_errors)
{
  const size_t cap = 4096;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *bytes = xmalloc(2 * cap);

  memset(bytes, 0x3c, 2 * cap);
  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t buf = 0, small = 0;
    hipd_stream_t st = 0;

    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &buf));
    OK(conn, hipd_mem_alloc(conn, dev, 100, "byte", &small));
    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_mem_memset(conn, buf, 0, cap, 0));

    EXPECT(conn, hipd_mem_write(conn, buf, 4000, bytes, 200), HIPD_ERANGE);
    check_range_message(conn, dev, "4000", "4096");
    EXPECT(conn, hipd_mem_write(conn, buf, 0, bytes, cap + 1), HIPD_ERANGE);
    check_range_message(conn, dev, "0", "4096");
    EXPECT(conn, hipd_mem_write(conn, buf, UINT64_MAX, bytes, 1), HIPD_ERANGE);
    EXPECT(conn, hipd_mem_read(conn, buf, 4097, bytes, 0), HIPD_ERANGE);
    check_range_message(conn, dev, "4097", "4096");
    EXPECT(conn, hipd_mem_read(conn, buf, 1, bytes, cap), HIPD_ERANGE);
    EXPECT(conn, hipd_mem_memset(conn, buf, 4090, 10, 0), HIPD_ERANGE);
    check_range_message(conn, dev, "4090", "4096");
    EXPECT(conn, hipd_mem_memset(conn, buf, 0, UINT64_MAX, 0), HIPD_ERANGE);
    /* A copy out of either buffer. */
    EXPECT(conn, hipd_mem_copy(conn, small, 50, buf, 0, 51), HIPD_ERANGE);
    check_range_message(conn, dev, "50", "100");
    EXPECT(conn, hipd_mem_copy(conn, buf, 0, small, 1, 100), HIPD_ERANGE);
    check_range_message(conn, dev, "1", "100");
    /* And on a stream. */
    EXPECT(conn, hipd_mem_write_async(conn, buf, 4096, bytes, 1, st),
           HIPD_ERANGE);
    check_range_message(conn, dev, "4096", "4096");
    EXPECT(conn, hipd_mem_read_async(conn, small, 0, bytes, 101, st),
           HIPD_ERANGE);
    EXPECT(conn, hipd_mem_memset_async(conn, small, 99, 2, 0, st), HIPD_ERANGE);
    EXPECT(conn, hipd_mem_copy_async(conn, small, 0, buf, 4000, 100, st),
           HIPD_ERANGE);

    /* The edges themselves are fine, and the failed calls wrote nothing. */
    OK(conn, hipd_mem_write(conn, buf, cap - 1, bytes, 1));
    OK(conn, hipd_mem_read(conn, buf, 0, bytes + cap, cap));
    for (size_t i = 0; i < cap - 1; i++)
      ck_assert_msg(bytes[cap + i] == 0,
                    "device %d: byte %zu was written by a failed call", dev, i);
    ck_assert_uint_eq(bytes[2 * cap - 1], 0x3c);
    memset(bytes, 0x3c, 2 * cap);
    OK(conn, hipd_mem_free(conn, buf));
    OK(conn, hipd_mem_free(conn, small));
    OK(conn, hipd_stream_destroy(conn, st));
  }
  free(bytes);
  hipd_close(conn);
}
END_TEST

START_TEST(test_alloc_errors)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t buf = 0;
    int64_t bytes0, buffers0, bytes1, buffers1;

    device_usage(conn, dev, &bytes0, &buffers0);
    EXPECT(conn, hipd_mem_alloc(conn, dev, 0, "float32", &buf), HIPD_EINVAL);
    EXPECT(conn, hipd_mem_alloc_custom(conn, dev, 0, 8, &buf), HIPD_EINVAL);
    EXPECT(conn, hipd_mem_alloc_custom(conn, dev, 8, 0, &buf), HIPD_EINVAL);
    EXPECT(conn, hipd_mem_alloc(conn, dev, UINT64_C(1) << 60, "byte", &buf),
           HIPD_ENOMEM);
    EXPECT(conn, hipd_mem_alloc(conn, dev, UINT64_C(1) << 62, "float64", &buf),
           HIPD_ENOMEM);
    EXPECT(conn,
           hipd_mem_alloc_custom(conn, dev, UINT64_C(1) << 40,
                                 UINT64_C(1) << 30, &buf),
           HIPD_ENOMEM);
    EXPECT(conn, hipd_mem_alloc(conn, dev, 16, "float128", &buf), HIPD_EINVAL);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "float128"));
    EXPECT(conn, hipd_mem_alloc(conn, dev, 16, "", &buf), HIPD_EINVAL);
    ck_assert_uint_eq(buf, 0);
    device_usage(conn, dev, &bytes1, &buffers1);
    ck_assert_int_eq(bytes1, bytes0);
    ck_assert_int_eq(buffers1, buffers0);
  }
  hipd_close(conn);
}
END_TEST

/* A stream of another device cannot carry a transfer of this one's. */
START_TEST(test_stream_device_mismatch)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t bytes[64] = {0};

  for (dev = 0; dev < n; dev++) {
    int other = (dev + 1) % n, third = (dev + 2) % n;
    hipd_buffer_t buf = 0, buf2 = 0, far = 0;
    hipd_stream_t st_other = 0, st_third = 0;
    hipd_event_t ev = 0;

    OK(conn, hipd_mem_alloc(conn, dev, 64, "byte", &buf));
    OK(conn, hipd_mem_alloc(conn, dev, 64, "byte", &buf2));
    OK(conn, hipd_mem_alloc(conn, other, 64, "byte", &far));
    OK(conn, hipd_stream_create(conn, other, &st_other));
    OK(conn, hipd_stream_create(conn, third, &st_third));
    OK(conn, hipd_event_create(conn, dev, &ev));

    EXPECT(conn, hipd_mem_write_async(conn, buf, 0, bytes, 64, st_other),
           HIPD_EINVAL);
    EXPECT(conn, hipd_mem_read_async(conn, buf, 0, bytes, 64, st_other),
           HIPD_EINVAL);
    EXPECT(conn, hipd_mem_memset_async(conn, buf, 0, 64, 1, st_other),
           HIPD_EINVAL);
    EXPECT(conn, hipd_mem_copy_async(conn, buf2, 0, buf, 0, 64, st_other),
           HIPD_EINVAL);
    EXPECT(conn, hipd_event_record(conn, ev, st_other), HIPD_EINVAL);
    /* A copy between two devices may run on a stream of either. */
    OK(conn, hipd_mem_copy_async(conn, far, 0, buf, 0, 64, st_other));
    OK(conn, hipd_stream_synchronize(conn, st_other));
    if (third != dev && third != other)
      EXPECT(conn, hipd_mem_copy_async(conn, far, 0, buf, 0, 64, st_third),
             HIPD_EINVAL);

    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_stream_destroy(conn, st_other));
    OK(conn, hipd_stream_destroy(conn, st_third));
    OK(conn, hipd_mem_free(conn, buf));
    OK(conn, hipd_mem_free(conn, buf2));
    OK(conn, hipd_mem_free(conn, far));
  }
  hipd_close(conn);
}
END_TEST

/* ----------------------------------------------------------------- events */

START_TEST(test_events)
{
  const size_t big = 64 * MiB;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_event_t start = 0, stop = 0, elsewhere = 0;
    hipd_buffer_t buf = 0;
    hipd_stream_t st = 0;
    float ms = -1;
    int done = -1;

    OK(conn, hipd_event_create(conn, dev, &start));
    OK(conn, hipd_event_create(conn, dev, &stop));
    ck_assert_uint_ne(start, 0);
    ck_assert_uint_ne(start, stop);
    EXPECT(conn, hipd_event_query(conn, start, &done), HIPD_ENOTRECORDED);
    EXPECT(conn, hipd_event_synchronize(conn, start), HIPD_ENOTRECORDED);
    EXPECT(conn, hipd_event_elapsed(conn, start, stop, &ms), HIPD_ENOTRECORDED);

    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_mem_alloc(conn, dev, big, "byte", &buf));
    OK(conn, hipd_event_record(conn, start, st));
    /* Only one of the two recorded yet. */
    EXPECT(conn, hipd_event_elapsed(conn, start, stop, &ms), HIPD_ENOTRECORDED);
    OK(conn, hipd_mem_memset_async(conn, buf, 0, big, 0x42, st));
    OK(conn, hipd_event_record(conn, stop, st));
    OK(conn, hipd_event_synchronize(conn, stop));
    OK(conn, hipd_event_query(conn, stop, &done));
    ck_assert_int_eq(done, 1);
    OK(conn, hipd_event_query(conn, start, &done));
    ck_assert_int_eq(done, 1);
    OK(conn, hipd_event_elapsed(conn, start, stop, &ms));
    ck_assert_msg(ms >= 0.0f, "device %d: elapsed %f ms", dev, (double)ms);

    /* Stream 0: the default stream of the event's device. */
    OK(conn, hipd_event_record(conn, start, 0));
    OK(conn, hipd_event_synchronize(conn, start));
    OK(conn, hipd_event_query(conn, start, &done));
    ck_assert_int_eq(done, 1);

    /* Two events of different devices cannot be compared. */
    OK(conn, hipd_event_create(conn, (dev + 1) % n, &elsewhere));
    OK(conn, hipd_event_record(conn, elsewhere, 0));
    OK(conn, hipd_event_synchronize(conn, elsewhere));
    EXPECT(conn, hipd_event_elapsed(conn, start, elsewhere, &ms), HIPD_EINVAL);

    OK(conn, hipd_event_destroy(conn, start));
    EXPECT(conn, hipd_event_query(conn, start, &done), HIPD_ESTALE);
    EXPECT(conn, hipd_event_destroy(conn, start), HIPD_ESTALE);
    OK(conn, hipd_event_destroy(conn, stop));
    OK(conn, hipd_event_destroy(conn, elsewhere));
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, buf));
  }
  hipd_close(conn);
}
END_TEST

/* -------------------------------------------------------------- profiling */

/* The first record of @p op, or -1. */
static int find_record(const hipd_info_t *prof, const char *op)
{
  int n = hipd_info_len(prof, "records");

  for (int i = 0; i < n; i++) {
    char path[64];
    const char *s;
    size_t len;
    snprintf(path, sizeof(path), "records.%d.op", i);
    if (hipd_info_str(prof, path, &s, &len) == 0 && strcmp(s, op) == 0)
      return i;
  }
  return -1;
}

START_TEST(test_profile)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t data[4096], back[4096];

  memset(data, 0x5f, sizeof(data));
  for (dev = 0; dev < n; dev++) {
    hipd_info_t *prof = NULL;
    hipd_buffer_t buf = 0, buf2 = 0;
    hipd_stream_t def = 0;
    int records, w, r;

    OK(conn, hipd_stream_default(conn, dev, &def));
    OK(conn, hipd_mem_alloc(conn, dev, 4096, "byte", &buf));
    OK(conn, hipd_mem_alloc(conn, dev, 4096, "byte", &buf2));
    OK(conn, hipd_session_profile(conn, 0, &prof));
    ck_assert_int_eq(info_bool(prof, "enabled"), 0);
    ck_assert_int_eq(hipd_info_len(prof, "records"), 0);
    hipd_info_free(prof);

    OK(conn, hipd_profile_enable(conn));
    OK(conn, hipd_mem_write(conn, buf, 0, data, 4096));
    OK(conn, hipd_mem_read(conn, buf, 0, back, 1000));
    OK(conn, hipd_mem_memset(conn, buf2, 0, 300, 1));
    OK(conn, hipd_mem_copy(conn, buf2, 0, buf, 0, 200));
    OK(conn, hipd_session_profile(conn, 1, &prof));
    ck_assert_int_eq(info_bool(prof, "enabled"), 1);
    ck_assert_int_eq(info_int(prof, "dropped"), 0);
    records = hipd_info_len(prof, "records");
    ck_assert_int_ge(records, 4);
    w = find_record(prof, "mem.write");
    r = find_record(prof, "mem.read");
    ck_assert_msg(w >= 0 && r >= 0, "device %d: no write or read record", dev);
    ck_assert_int_ge(find_record(prof, "mem.memset"), 0);
    ck_assert_int_ge(find_record(prof, "mem.copy"), 0);
    for (int i = 0; i < records; i++) {
      char a[64], b[64];
      snprintf(a, sizeof(a), "records.%d.start_ms", i);
      snprintf(b, sizeof(b), "records.%d.end_ms", i);
      ck_assert_msg(info_double(prof, b) >= info_double(prof, a),
                    "device %d: record %d ends before it starts", dev, i);
      ck_assert(info_double(prof, a) >= 0);
      /* The sync transfers ran on the default stream. Handles can pass
       * INT64_MAX, which hipd_info_int() cannot return: compare as
       * doubles, which round the same way on both sides. */
      snprintf(a, sizeof(a), "records.%d.stream", i);
      ck_assert_msg(info_double(prof, a) == (double)def,
                    "device %d: record %d names another stream", dev, i);
    }
    {
      char path[64];
      snprintf(path, sizeof(path), "records.%d.bytes", w);
      ck_assert_int_eq(info_int(prof, path), 4096);
      snprintf(path, sizeof(path), "records.%d.bytes", r);
      ck_assert_int_eq(info_int(prof, path), 1000);
    }
    hipd_info_free(prof);
    /* Cleared. */
    OK(conn, hipd_session_profile(conn, 0, &prof));
    ck_assert_int_eq(hipd_info_len(prof, "records"), 0);
    hipd_info_free(prof);

    OK(conn, hipd_profile_disable(conn));
    OK(conn, hipd_mem_write(conn, buf, 0, data, 4096));
    OK(conn, hipd_session_profile(conn, 0, &prof));
    ck_assert_int_eq(info_bool(prof, "enabled"), 0);
    ck_assert_int_eq(hipd_info_len(prof, "records"), 0);
    hipd_info_free(prof);
    OK(conn, hipd_mem_free(conn, buf));
    OK(conn, hipd_mem_free(conn, buf2));
  }
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------------------ quota */

START_TEST(test_quota)
{
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--mem-quota", "1M", NULL);
  hipd_conn_t *conn = connect_to(d), *other;
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t a = 0, b = 0;

    OK(conn, hipd_mem_alloc(conn, dev, 512 * KiB, "byte", &a));
    EXPECT(conn, hipd_mem_alloc(conn, dev, 600 * KiB, "byte", &b), HIPD_EQUOTA);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "quota"));
    /* The quota is the session's, across devices. */
    EXPECT(conn, hipd_mem_alloc(conn, (dev + 1) % n, 600 * KiB, "byte", &b),
           HIPD_EQUOTA);
    OK(conn, hipd_mem_free(conn, a));
    OK(conn, hipd_mem_alloc(conn, dev, 600 * KiB, "byte", &b));
    OK(conn, hipd_mem_free(conn, b));
  }
  /* Another session has a quota of its own. */
  {
    hipd_buffer_t a = 0, b = 0;
    dev = 0;
    other = connect_to(d);
    OK(conn, hipd_mem_alloc(conn, 0, MiB, "byte", &a));
    OK(other, hipd_mem_alloc(other, 0, MiB, "byte", &b));
    EXPECT(conn, hipd_mem_alloc(conn, 0, 1, "byte", &a), HIPD_EQUOTA);
    hipd_close(other);
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* -------------------------------------------------------- session cleanup */

#define CHILD_BYTES (64 * MiB)

/* The forked client: allocate and use memory on every device, say so on
 * @p fd, then wait to be killed. Never returns; no check calls here. */
static void cleanup_child(const char *path, int fd)
{
  hipd_conn_t *conn = NULL;
  uint8_t chunk[4096];
  int n = 0;
  char ok = 'R';

  memset(chunk, 0xee, sizeof(chunk));
  if (hipd_connect(path, &conn) != 0 || hipd_device_count(conn, &n) != 0)
    ok = 'E';
  for (int dev = 0; ok == 'R' && dev < n; dev++) {
    hipd_buffer_t buf = 0;
    hipd_stream_t st = 0;
    hipd_event_t ev = 0;
    if (hipd_mem_alloc(conn, dev, CHILD_BYTES, "byte", &buf) != 0 ||
        hipd_mem_memset(conn, buf, 0, CHILD_BYTES, 1) != 0 ||
        hipd_mem_write(conn, buf, 4096, chunk, sizeof(chunk)) != 0 ||
        hipd_stream_create(conn, dev, &st) != 0 ||
        hipd_event_create(conn, dev, &ev) != 0 ||
        hipd_event_record(conn, ev, st) != 0)
      ok = 'E';
    if (ok == 'R') /* leave work queued as it dies */
      hipd_mem_memset_async(conn, buf, 0, CHILD_BYTES, 2, st);
  }
  if (write(fd, &ok, 1) != 1)
    _exit(2);
  for (;;)
    pause();
}

/* A client killed with SIGKILL while holding memory, streams and events
 * on every device: the daemon frees all of it. */
START_TEST(test_session_cleanup)
{
  harness_daemon_t *d = harness_start("--cpu-devices", "2", NULL);
  hipd_conn_t *conn = connect_to(d);
  int n = device_count(conn), dev = -1, fds[2], status;
  int64_t base_bytes[64], base_bufs[64];
  struct pollfd pfd;
  long long deadline;
  char ready = 0;
  pid_t child;

  ck_assert_int_le(n, 64);
  for (dev = 0; dev < n; dev++)
    device_usage(conn, dev, &base_bytes[dev], &base_bufs[dev]);
  /* An explicit free gives the memory back to the device's accounting. */
  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t buf = 0;
    int64_t bytes, bufs;
    OK(conn, hipd_mem_alloc(conn, dev, MiB, "byte", &buf));
    device_usage(conn, dev, &bytes, &bufs);
    ck_assert_int_eq(bytes, base_bytes[dev] + (int64_t)MiB);
    ck_assert_int_eq(bufs, base_bufs[dev] + 1);
    OK(conn, hipd_mem_free(conn, buf));
    deadline = harness_now_ms() + 10000;
    for (;;) {
      device_usage(conn, dev, &bytes, &bufs);
      if (bytes == base_bytes[dev] && bufs == base_bufs[dev])
        break;
      ck_assert_msg(harness_now_ms() < deadline,
                    "device %d: after mem.free, %lld bytes in %lld buffers "
                    "(baseline %lld in %lld)",
                    dev, (long long)bytes, (long long)bufs,
                    (long long)base_bytes[dev], (long long)base_bufs[dev]);
      harness_sleep_ms(10);
    }
  }
  ck_assert_int_eq(pipe(fds), 0);
  child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    close(fds[0]);
    cleanup_child(d->socket, fds[1]);
  }
  close(fds[1]);
  pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
  ck_assert_msg(poll(&pfd, 1, 60000) == 1, "the client never got ready");
  ck_assert_int_eq(read(fds[0], &ready, 1), 1);
  close(fds[0]);
  if (ready != 'R') {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    ck_abort_msg("the client failed to set up");
  }
  /* The daemon counts what the client holds... */
  for (dev = 0; dev < n; dev++) {
    int64_t bytes, bufs;
    device_usage(conn, dev, &bytes, &bufs);
    ck_assert_int_ge(bytes, base_bytes[dev] + (int64_t)CHILD_BYTES);
    ck_assert_int_ge(bufs, base_bufs[dev] + 1);
  }
  ck_assert_int_eq(kill(child, SIGKILL), 0);
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  /* ...and gives it all back once the client is gone. */
  deadline = harness_now_ms() + 10000;
  for (dev = 0; dev < n; dev++) {
    int64_t bytes, bufs;
    for (;;) {
      device_usage(conn, dev, &bytes, &bufs);
      if (bytes == base_bytes[dev] && bufs == base_bufs[dev])
        break;
      ck_assert_msg(harness_now_ms() < deadline,
                    "device %d: %lld bytes in %lld buffers left (baseline "
                    "%lld in %lld)",
                    dev, (long long)bytes, (long long)bufs,
                    (long long)base_bytes[dev], (long long)base_bufs[dev]);
      harness_sleep_ms(10);
    }
  }
  {
    hipd_info_t *info = NULL;
    int64_t sessions = -1;
    deadline = harness_now_ms() + 10000;
    do {
      OK(conn, hipd_daemon_info(conn, &info));
      sessions = info_int(info, "sessions");
      hipd_info_free(info);
    } while (sessions != 1 && harness_now_ms() < deadline &&
             (harness_sleep_ms(10), 1));
    ck_assert_int_eq(sessions, 1);
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

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

static void busy_start(busy_t *b, hipd_conn_t *conn, int dev)
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
static int busy_pending(busy_t *b)
{
  return !atomic_load(&b->synced) && (!b->cpu || !atomic_load(&b->issued));
}

static void busy_finish(busy_t *b, int dev)
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
typedef struct {
  int dev;
  int failures;
  char why[256];
} pair_t;

static void *pair_main(void *arg)
{
  enum { LEN = 1 << 20, ROUNDS = 20 };
  pair_t *p = arg;
  hipd_conn_t *c = NULL;
  unsigned char *in = malloc(LEN), *out = malloc(LEN);
  hipd_buffer_t a = 0, b = 0;

  if (hipd_connect(shared->socket, &c) != 0 || in == NULL || out == NULL ||
      hipd_mem_alloc(c, p->dev, LEN, "uint8", &a) != 0 ||
      hipd_mem_alloc(c, p->dev, LEN, "uint8", &b) != 0) {
    p->failures++;
    snprintf(p->why, sizeof(p->why), "setup on device %d: %s", p->dev,
             c ? hipd_last_error(c) : hipd_last_error(NULL));
    goto out;
  }
  for (int r = 0; r < ROUNDS; r++) {
    fill_random(in, LEN, (unsigned)(p->dev * 1000 + r));
    if (hipd_mem_write(c, a, 0, in, LEN) != 0 ||
        hipd_mem_copy(c, b, 0, a, 0, LEN) != 0 ||
        hipd_mem_read(c, b, 0, out, LEN) != 0 || memcmp(in, out, LEN) != 0) {
      p->failures++;
      snprintf(p->why, sizeof(p->why), "device %d round %d: %s", p->dev, r,
               hipd_last_error(c));
      break;
    }
  }
out:
  if (c != NULL)
    hipd_close(c);
  free(in);
  free(out);
  return NULL;
}

START_TEST(test_sessions_on_two_devices)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn);
  pair_t p[2] = {{.dev = 0}, {.dev = n > 1 ? 1 : 0}};
  pthread_t t[2];

  hipd_close(conn);
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, pair_main, &p[i]), 0);
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    ck_assert_msg(p[i].failures == 0, "%s", p[i].why);
  }
}
END_TEST

/* Client A waits in stream.synchronize behind large memsets while client B
 * pings and reads device records: B is served before A's wait returns. */
START_TEST(test_concurrent_sessions)
{
  hipd_conn_t *a = connect_to(shared), *b = connect_to(shared);
  int n = device_count(b), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    busy_t busy;

    busy_start(&busy, a, dev);
    for (int i = 0; i < 10; i++) {
      char out[8];
      size_t len = 0;
      OK(b, hipd_ping(b, "B", 1, out, sizeof(out), &len));
    }
    for (int other = 0; other < n; other++) {
      OK(b, hipd_device_get(b, other, &info));
      hipd_info_free(info);
    }
    OK(b, hipd_session_info(b, &info));
    hipd_info_free(info);
    ck_assert_msg(busy_pending(&busy),
                  "device %d: A's work finished before B was served", dev);
    busy_finish(&busy, dev);
  }
  hipd_close(a);
  hipd_close(b);
}
END_TEST

/* stream.query answers at once, busy, while the stream has work: it must
 * not wait behind that work. */
START_TEST(test_stream_query_busy)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    int idle = -1;
    busy_t busy;

    busy_start(&busy, conn, dev);
    OK(conn, hipd_stream_query(conn, busy.st, &idle));
    ck_assert_msg(busy_pending(&busy),
                  "device %d: stream.query waited for the stream's work", dev);
    ck_assert_int_eq(idle, 0);
    busy_finish(&busy, dev);
  }
  hipd_close(conn);
}
END_TEST

/* Many pipelined transfers on two streams of one device, then both
 * synchronized: each stream's buffer holds exactly its own writes. */
START_TEST(test_two_streams)
{
  enum { CHUNKS = 64, CHUNK = 4096 };
  const size_t cap = (size_t)CHUNKS * CHUNK;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *x = xmalloc(cap), *y = xmalloc(cap), *back = xmalloc(cap);
  hipd_call_t *calls[2 * CHUNKS];

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t bx = 0, by = 0;
    hipd_stream_t s1 = 0, s2 = 0;
    int idle = 0;

    fill_random(x, cap, (unsigned)dev * 2 + 1);
    fill_random(y, cap, (unsigned)dev * 2 + 2);
    OK(conn, hipd_stream_create(conn, dev, &s1));
    OK(conn, hipd_stream_create(conn, dev, &s2));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &bx));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &by));
    OK(conn, hipd_mem_memset_async(conn, bx, 0, cap, 0, s1));
    OK(conn, hipd_mem_memset_async(conn, by, 0, cap, 0, s2));
    for (int i = 0; i < CHUNKS; i++) {
      OK(conn, hipd_mem_write_async_begin(conn, bx, (size_t)i * CHUNK,
                                          x + (size_t)i * CHUNK, CHUNK, s1,
                                          &calls[2 * i]));
      OK(conn, hipd_mem_write_async_begin(conn, by, (size_t)i * CHUNK,
                                          y + (size_t)i * CHUNK, CHUNK, s2,
                                          &calls[2 * i + 1]));
    }
    OK(conn, hipd_stream_synchronize(conn, s1));
    OK(conn, hipd_stream_synchronize(conn, s2));
    for (int i = 0; i < 2 * CHUNKS; i++)
      OK(conn, hipd_wait(calls[i]));
    OK(conn, hipd_stream_query(conn, s1, &idle));
    ck_assert_int_eq(idle, 1);
    OK(conn, hipd_stream_query(conn, s2, &idle));
    ck_assert_int_eq(idle, 1);
    OK(conn, hipd_mem_read(conn, bx, 0, back, cap));
    ASSERT_SAME(back, x, cap, "stream 1's buffer");
    OK(conn, hipd_mem_read(conn, by, 0, back, cap));
    ASSERT_SAME(back, y, cap, "stream 2's buffer");
    OK(conn, hipd_device_synchronize(conn, dev));
    OK(conn, hipd_stream_destroy(conn, s1));
    OK(conn, hipd_stream_destroy(conn, s2));
    OK(conn, hipd_mem_free(conn, bx));
    OK(conn, hipd_mem_free(conn, by));
  }
  free(x);
  free(y);
  free(back);
  hipd_close(conn);
}
END_TEST

/* An event recorded on two streams follows the later record (PROTOCOL.md,
 * Events), even when the stream of the earlier record reaches its mark
 * last: here that stream is busy for a while, the other idle. Its time is
 * the later record's: between `start` and `after`, recorded just before
 * and after it on the idle stream, and it stays so once the busy stream
 * has passed the earlier mark too. */
START_TEST(test_event_latest_record)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_event_t start = 0, ev = 0, after = 0;
    hipd_stream_t idle = 0;
    hipd_call_t *early = NULL;
    float ms = -1;
    int done = -1;
    busy_t busy;

    OK(conn, hipd_event_create(conn, dev, &start));
    OK(conn, hipd_event_create(conn, dev, &ev));
    OK(conn, hipd_event_create(conn, dev, &after));
    OK(conn, hipd_stream_create(conn, dev, &idle));
    busy_start(&busy, conn, dev);
    /* Answered once the busy stream reaches it: do not wait. */
    OK(conn, hipd_event_record_begin(conn, ev, busy.st, &early));
    OK(conn, hipd_event_record(conn, start, idle));
    OK(conn, hipd_event_record(conn, ev, idle)); /* the latest record */
    OK(conn, hipd_event_record(conn, after, idle));
    OK(conn, hipd_event_synchronize(conn, ev));
    OK(conn, hipd_event_synchronize(conn, after));
    /* Now the busy stream passes the earlier mark as well. */
    OK(conn, hipd_wait(early));
    OK(conn, hipd_stream_synchronize(conn, busy.st));
    busy_finish(&busy, dev);

    OK(conn, hipd_event_query(conn, ev, &done));
    ck_assert_int_eq(done, 1);
    OK(conn, hipd_event_elapsed(conn, start, ev, &ms));
    ck_assert_msg(ms >= 0.0f, "device %d: start -> event: %f ms", dev,
                  (double)ms);
    OK(conn, hipd_event_elapsed(conn, ev, after, &ms));
    ck_assert_msg(ms >= 0.0f,
                  "device %d: event -> after: %f ms (the event kept the "
                  "earlier record's time)",
                  dev, (double)ms);

    OK(conn, hipd_event_destroy(conn, start));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_event_destroy(conn, after));
    OK(conn, hipd_stream_destroy(conn, idle));
  }
  hipd_close(conn);
}
END_TEST

/* One thread records an event again and again while another asks for its
 * time: each answer is a time or ENOTREADY (a record was pending), and the
 * daemon never reads the event's time while a stream writes it (which
 * scripts/sanitize.sh tsan checks). */
typedef struct {
  hipd_conn_t *conn;
  hipd_event_t ev;
  hipd_stream_t st;
  int rounds, rc;
} rerecord_t;

static void *rerecord_main(void *arg)
{
  rerecord_t *r = arg;

  for (int i = 0; i < r->rounds && r->rc == 0; i++)
    r->rc = hipd_event_record(r->conn, r->ev, r->st);
  return NULL;
}

START_TEST(test_event_record_while_read)
{
  enum { ROUNDS = 200 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_event_t start = 0, ev = 0;
    hipd_stream_t st = 0;
    rerecord_t r;
    pthread_t thread;
    float ms = -1;

    OK(conn, hipd_event_create(conn, dev, &start));
    OK(conn, hipd_event_create(conn, dev, &ev));
    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_event_record(conn, start, st));
    OK(conn, hipd_event_record(conn, ev, st));
    OK(conn, hipd_event_synchronize(conn, ev));
    r = (rerecord_t){.conn = conn, .ev = ev, .st = st, .rounds = ROUNDS};
    ck_assert_int_eq(pthread_create(&thread, NULL, rerecord_main, &r), 0);
    for (int i = 0; i < ROUNDS; i++) {
      int rc = hipd_event_elapsed(conn, start, ev, &ms);
      ck_assert_msg(rc == 0 || rc == HIPD_ENOTREADY,
                    "device %d: event.elapsed: %s", dev, hipd_err_name(rc));
      if (rc == 0)
        ck_assert_msg(ms >= 0.0f, "device %d: elapsed %f ms", dev, (double)ms);
    }
    pthread_join(thread, NULL);
    ck_assert_msg(r.rc == 0, "device %d: event.record: %s", dev,
                  hipd_err_name(r.rc));
    OK(conn, hipd_event_destroy(conn, start));
    OK(conn, hipd_event_destroy(conn, ev));
    OK(conn, hipd_stream_destroy(conn, st));
  }
  hipd_close(conn);
}
END_TEST

static Suite *devices_suite(void)
{
  Suite *s = suite_create("devices");
  TCase *tc;

  tc = tcase_create("devices");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_backend_info);
  tcase_add_test(tc, test_device_records);
  tcase_add_test(tc, test_current_device);
  tcase_add_test(tc, test_streams);
  suite_add_tcase(s, tc);

  tc = tcase_create("memory");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_alloc_kinds);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_copy);
  tcase_add_test(tc, test_memset);
  tcase_add_test(tc, test_async_ops);
  tcase_add_test(tc, test_stream_order);
  suite_add_tcase(s, tc);

  tc = tcase_create("errors");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_handle_errors);
  tcase_add_test(tc, test_range_errors);
  tcase_add_test(tc, test_alloc_errors);
  tcase_add_test(tc, test_stream_device_mismatch);
  suite_add_tcase(s, tc);

  tc = tcase_create("events");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_events);
  tcase_add_test(tc, test_event_latest_record);
  tcase_add_test(tc, test_event_record_while_read);
  tcase_add_test(tc, test_profile);
  suite_add_tcase(s, tc);

  tc = tcase_create("sessions");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_quota);
  tcase_add_test(tc, test_session_cleanup);
  suite_add_tcase(s, tc);

  tc = tcase_create("concurrency");
  tcase_set_timeout(tc, 180);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_concurrent_sessions);
  tcase_add_test(tc, test_sessions_on_two_devices);
  tcase_add_test(tc, test_stream_query_busy);
  tcase_add_test(tc, test_two_streams);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr;
  int failed;

  harness_init("check_devices");
  sr = srunner_create(devices_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
