/* SPDX-License-Identifier: MIT */
/* tests/check_devices_memory.c: device memory on every device: the
 * allocation kinds, round trips, copies, memsets, asynchronous operations
 * and stream order; and what is refused (bad handles, ranges, allocations,
 * a stream of another device). The shared helpers are in
 * tests/lib/devices_util.h. */
#include "config.h"

#include "devices_util.h"
#include "run.h"

/* ----------------------------------------------------------------- memory */

START_TEST(test_alloc_kinds)
{
  static const struct {
    const char *kind;
    uint64_t size;
  } kinds[] = {
      {"int8", 1},      {"uint8", 1},      {"int16", 2},   {"uint16", 2},
      {"float16", 2},   {"int32", 4},      {"uint32", 4},  {"float32", 4},
      {"int64", 8},     {"uint64", 8},     {"float64", 8}, {"byte", 1},
      {"complex32", 8}, {"complex64", 16}, {"char", 1},
  };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    uint64_t size = 0;

    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
      OK(conn, hipd_mem_alloc(conn, dev, 10, kinds[k].kind, &buf));
      ck_assert_uint_ne(hipd_buffer_id(buf), 0);
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
    EXPECT(conn, hipd_mem_alloc(conn, dev, 10, "complex128", &buf),
           HIPD_EINVAL);
    ck_assert_ptr_nonnull(
        strstr(hipd_last_error(conn), "unknown element kind 'complex128'"));
    ck_assert_ptr_nonnull(
        strstr(hipd_last_error(conn), "complex32, complex64, char)"));
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
    hipd_buffer_t buf = HIPD_BUFFER_NULL;

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
      hipd_buffer_t src = HIPD_BUFFER_NULL, dst = HIPD_BUFFER_NULL;
      hipd_stream_t st = HIPD_STREAM_NULL;

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
    hipd_buffer_t buf = HIPD_BUFFER_NULL;

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
    hipd_buffer_t a = HIPD_BUFFER_NULL, b = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
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
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;

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

/* A handle of one type as another: a deliberate conversion, which the
 * handle types of <hipd.h> allow only explicitly. */
static hipd_buffer_t as_buffer(hipd_stream_t s)
{
  return hipd_buffer_from_id(hipd_stream_id(s));
}

static hipd_stream_t as_stream(hipd_buffer_t b)
{
  return hipd_stream_from_id(hipd_buffer_id(b));
}

START_TEST(test_handle_errors)
{
  hipd_conn_t *conn = connect_to(shared), *other = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t bytes[16] = {0};
  uint64_t size;

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t mine = HIPD_BUFFER_NULL, theirs = HIPD_BUFFER_NULL,
                  freed = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL, their_st = HIPD_STREAM_NULL;
    hipd_event_t ev = HIPD_EVENT_NULL;
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
    EXPECT(conn, hipd_mem_size(conn, HIPD_BUFFER_NULL, &size), HIPD_EHANDLE);
    EXPECT(conn,
           hipd_mem_size(conn,
                         hipd_buffer_from_id(hipd_buffer_id(mine) | 0xffffff),
                         &size),
           HIPD_EHANDLE);
    EXPECT(conn,
           hipd_mem_size(
               conn,
               hipd_buffer_from_id(hipd_buffer_id(mine) & ~UINT64_C(0xffffff)),
               &size),
           HIPD_EHANDLE);
    EXPECT(conn,
           hipd_mem_free(conn, hipd_buffer_from_id(hipd_buffer_id(mine) &
                                                   ~(UINT64_C(0xffff) << 24))),
           HIPD_EHANDLE);
    EXPECT(conn,
           hipd_stream_synchronize(
               conn,
               hipd_stream_from_id(hipd_stream_id(st) + (UINT64_C(5) << 24))),
           HIPD_EHANDLE);

    /* The null stream is a launch's or an event record's default stream,
     * not an _async memory function's (hipd.h). */
    EXPECT(conn,
           hipd_mem_write_async(conn, mine, 0, bytes, 16, HIPD_STREAM_NULL),
           HIPD_EHANDLE);

    /* Handles of the wrong type: the types of <hipd.h> make this a
     * compile error (tests/compile_fail), so the test converts on purpose,
     * to check the daemon's own check. */
    EXPECT(conn, hipd_mem_size(conn, as_buffer(st), &size), HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_mem_write(conn, as_buffer(st), 0, bytes, 16),
           HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_mem_free(conn, hipd_buffer_from_id(hipd_event_id(ev))),
           HIPD_EHANDLETYPE);
    EXPECT(conn, hipd_stream_synchronize(conn, as_stream(mine)),
           HIPD_EHANDLETYPE);
    EXPECT(
        conn,
        hipd_stream_query(conn, hipd_stream_from_id(hipd_event_id(ev)), &idle),
        HIPD_EHANDLETYPE);
    EXPECT(conn,
           hipd_event_record(conn, hipd_event_from_id(hipd_buffer_id(mine)),
                             HIPD_STREAM_NULL),
           HIPD_EHANDLETYPE);
    EXPECT(conn,
           hipd_mem_write_async(conn, mine, 0, bytes, 16, as_stream(mine)),
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
    hipd_buffer_t buf = HIPD_BUFFER_NULL, small = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;

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
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
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
    ck_assert_uint_eq(hipd_buffer_id(buf), 0);
    device_usage(conn, dev, &bytes1, &buffers1);
    ck_assert_int_eq(bytes1, bytes0);
    ck_assert_int_eq(buffers1, buffers0);
  }
  hipd_close(conn);
}
END_TEST

/* The host's MemAvailable in bytes, 0 if unknown. */
static uint64_t mem_available(void)
{
  char line[256];
  unsigned long long kib = 0;
  FILE *f = fopen("/proc/meminfo", "r");

  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
      break;
  fclose(f);
  return (uint64_t)kib << 10;
}

/* The CPU device's buffers are memfd pages in no process's RSS: filling
 * the host with them once woke the OOM killer against other processes.
 * An allocation that would leave the host less than --host-mem-reserve
 * fails with ENOMEM instead; set here 2 GiB under what is available now,
 * so that 4 GiB is refused and 64 MiB is not, without ever nearing the
 * host's limit. */
START_TEST(test_host_reserve)
{
  uint64_t avail = mem_available(), reserve;
  char arg[32];
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;
  hipd_buffer_t buf = HIPD_BUFFER_NULL;
  int dev = 0;

  if (avail < ((uint64_t)6 << 30)) {
    fprintf(stderr,
            "test_host_reserve: skipped (%llu MiB available, it "
            "wants 6 GiB)\n",
            (unsigned long long)(avail >> 20));
    return;
  }
  reserve = avail - ((uint64_t)2 << 30);
  snprintf(arg, sizeof(arg), "%llu", (unsigned long long)reserve);
  /* No share: the reserve is what refuses, however large the host. */
  d = harness_start("--devices", "cpu", "--host-mem-reserve", arg,
                    "--tenant-device-share", "0", NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  OK(conn, hipd_daemon_info(conn, &info));
  ck_assert_uint_eq(info_uint(info, "limits.host_mem_reserve"), reserve);
  hipd_info_free(info);
  EXPECT(conn, hipd_mem_alloc(conn, dev, (uint64_t)4 << 30, "byte", &buf),
         HIPD_ENOMEM);
  ck_assert_msg(strstr(hipd_last_error(conn), "--host-mem-reserve") != NULL,
                "%s", hipd_last_error(conn));
  OK(conn, hipd_mem_alloc(conn, dev, (uint64_t)64 << 20, "byte", &buf));
  OK(conn, hipd_mem_memset(conn, buf, 0, (size_t)64 << 20, 1));
  OK(conn, hipd_mem_free(conn, buf));
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  /* Without the option: a sixteenth of the host's, 256 MiB to 8 GiB. */
  d = harness_start("--devices", "cpu", NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  OK(conn, hipd_daemon_info(conn, &info));
  reserve = info_uint(info, "limits.host_mem_reserve");
  ck_assert_uint_ge(reserve, (uint64_t)256 << 20);
  ck_assert_uint_le(reserve, (uint64_t)8 << 30);
  hipd_info_free(info);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
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
    hipd_buffer_t buf = HIPD_BUFFER_NULL, buf2 = HIPD_BUFFER_NULL,
                  far = HIPD_BUFFER_NULL;
    hipd_stream_t st_other = HIPD_STREAM_NULL, st_third = HIPD_STREAM_NULL;
    hipd_event_t ev = HIPD_EVENT_NULL;

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

static Suite *devices_memory_suite(void)
{
  Suite *s = suite_create("devices_memory");
  TCase *tc;

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

  tc = tcase_create("host");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_host_reserve);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_devices_memory");
  failed = test_run(devices_memory_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
