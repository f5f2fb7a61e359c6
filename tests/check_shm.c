/* SPDX-License-Identifier: MIT */
/* tests/check_shm.c: shared host buffers (zero-copy transfers), zero-copy
 * device buffers and corked submission, through libhipd against a real
 * hipd (tests/lib/harness.c). Every test runs on every device the daemon
 * serves: it is started with --cpu-devices 2, and on a GPU host the HIP devices
 * come first and are covered the same way.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "run.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

static harness_daemon_t *shared;

static void shared_start(void)
{
  /* Busy polling on: this suite also exercises the spinning loop and
   * workers. */
  shared = harness_start("--cpu-devices", "2", "--busy-poll", "20", NULL);
  if (shared == NULL)
    abort();
}

static void shared_stop(void)
{
  stop_checked(&shared);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
  uint32_t x = seed * 2654435761u + 1;

  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (uint8_t)(x >> 24);
  }
}

/* Write from a shared buffer, read back inline and into the shared buffer,
 * synchronously and on a stream, on every device. */
START_TEST(test_shm_roundtrip)
{
  hipd_conn_t *conn = connect_named(shared, "shm-roundtrip", 60000);
  const size_t n = 3 * MIB + 123;
  uint8_t *check = malloc(n);
  hipd_shm_t *shm = NULL;
  int ndev, dev = -1;

  ck_assert_ptr_nonnull(check);
  /* The client spins for its answers too, and a wait for a copy spins as
   * long as the copies before took (libhipd learns their rate): the bytes
   * must come through whether the answer was waited for spinning or
   * asleep. */
  hipd_set_busy_poll(conn, 20);
  ndev = device_count_min2(conn);
  OK(conn, hipd_shm_create(conn, 2 * n, &shm));
  ck_assert_uint_ge(hipd_shm_size(shm), 2 * n);
  ck_assert_uint_eq(hipd_shm_size(shm) % 4096, 0);
  ck_assert_uint_ne(hipd_shm_handle(shm), 0);
  uint8_t *p = hipd_shm_ptr(shm);
  ck_assert_ptr_nonnull(p);
  for (dev = 0; dev < ndev; dev++) {
    hipd_buffer_t b = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;

    OK(conn, hipd_mem_alloc(conn, dev, n, "byte", &b));
    for (unsigned rep = 0; rep < 3; rep++) {
      fill(p, n, (unsigned)dev + 1 + 10 * rep);
      memset(p + n, 0, n);
      OK(conn, hipd_mem_write_shm(conn, b, 0, shm, 0, n));
      /* Inline read: what the device holds is what the shared buffer
       * held. */
      OK(conn, hipd_mem_read(conn, b, 0, check, n));
      ck_assert_msg(memcmp(check, p, n) == 0,
                    "device %d, copy %u: write_shm differs", dev, rep);
      OK(conn, hipd_mem_read_shm(conn, b, 0, shm, n, n));
      ck_assert_msg(memcmp(p + n, p, n) == 0,
                    "device %d, copy %u: read_shm differs", dev, rep);
    }

    /* On a stream: an unaligned part, then read back after a sync. */
    OK(conn, hipd_stream_create(conn, dev, &st));
    fill(p, n, (unsigned)dev + 100);
    memset(p + n, 0, n);
    OK(conn, hipd_mem_write_shm_async(conn, b, 7, shm, 1, n - 8, st));
    OK(conn, hipd_mem_read_shm_async(conn, b, 7, shm, n + 1, n - 8, st));
    OK(conn, hipd_stream_synchronize(conn, st));
    ck_assert_msg(memcmp(p + n + 1, p + 1, n - 8) == 0,
                  "device %d: async shm round trip differs", dev);
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, b));
  }
  OK(conn, hipd_shm_free(conn, shm));
  free(check);
  hipd_close(conn);
}
END_TEST

/* Ranges and handles are checked before anything moves. */
START_TEST(test_shm_errors)
{
  hipd_conn_t *conn = connect_named(shared, "shm-errors", 60000);
  hipd_conn_t *other = connect_named(shared, "shm-other", 60000);
  hipd_shm_t *shm = NULL, *theirs = NULL;
  int ndev, dev = -1;

  ndev = device_count_min2(conn);
  OK(conn, hipd_shm_create(conn, MIB, &shm));
  OK(other, hipd_shm_create(other, MIB, &theirs));
  {
    hipd_shm_t *none = NULL;
    EXPECT(conn, hipd_shm_create(conn, 0, &none), HIPD_EINVAL);
    ck_assert_ptr_null(none);
  }
  for (dev = 0; dev < ndev; dev++) {
    hipd_buffer_t b = HIPD_BUFFER_NULL;

    OK(conn, hipd_mem_alloc(conn, dev, MIB, "byte", &b));
    /* Past the end of the shared buffer. */
    EXPECT(conn, hipd_mem_write_shm(conn, b, 0, shm, MIB - 10, 11),
           HIPD_ERANGE);
    ck_assert_msg(strstr(hipd_last_error(conn), "shm offset") != NULL, "%s",
                  hipd_last_error(conn));
    EXPECT(conn, hipd_mem_read_shm(conn, b, 0, shm, UINT64_MAX, 2),
           HIPD_ERANGE);
    /* Past the end of the device buffer. */
    EXPECT(conn, hipd_mem_read_shm(conn, b, 1, shm, 0, MIB), HIPD_ERANGE);
    /* Another session's shared buffer is not ours to use. */
    int rc = hipd_mem_write_shm(conn, b, 0, theirs, 0, 16);
    ck_assert_msg(rc == HIPD_EFOREIGN || rc == HIPD_EHANDLE, "%s: %s",
                  hipd_err_name(rc), hipd_last_error(conn));
    OK(conn, hipd_mem_free(conn, b));
  }
  /* A freed one is gone. */
  uint64_t h = hipd_shm_handle(shm);
  OK(conn, hipd_shm_free(conn, shm));
  ck_assert_uint_ne(h, 0);
  OK(other, hipd_shm_free(other, theirs));
  hipd_close(other);
  hipd_close(conn);
}
END_TEST

/* Shared buffers count against --mem-quota, and come back when freed or
 * when the session ends. */
START_TEST(test_shm_quota_and_cleanup)
{
  harness_daemon_t *d =
      harness_start("--cpu-devices", "1", "--mem-quota", "4M", NULL);
  hipd_conn_t *conn = connect_named(d, "shm-quota", 60000);
  hipd_shm_t *a = NULL, *b = NULL;
  int dev = -1;

  OK(conn, hipd_shm_create(conn, 3 * MIB, &a));
  EXPECT(conn, hipd_shm_create(conn, 2 * MIB, &b), HIPD_EQUOTA);
  ck_assert_msg(strstr(hipd_last_error(conn), "quota") != NULL, "%s",
                hipd_last_error(conn));
  OK(conn, hipd_shm_free(conn, a));
  OK(conn, hipd_shm_create(conn, 2 * MIB, &b));
  OK(conn, hipd_shm_free(conn, b));

  /* A client that dies holding shared buffers leaves nothing behind: its
   * session closes and the next one has the whole quota. */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    hipd_conn_t *c = NULL;
    hipd_shm_t *m = NULL;
    if (hipd_connect(d->socket, &c) != 0 || hipd_shm_create(c, 3 * MIB, &m))
      _exit(2);
    raise(SIGKILL);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFSIGNALED(status));
  for (int i = 0; i < 100; i++) {
    hipd_info_t *info = NULL;
    int64_t n = 0;
    OK(conn, hipd_daemon_info(conn, &info));
    n = info_int(info, "sessions");
    hipd_info_free(info);
    if (n == 1)
      break;
    harness_sleep_ms(50);
  }
  hipd_close(conn);
  conn = connect_named(d, "shm-quota-2", 60000);
  OK(conn, hipd_shm_create(conn, 4 * MIB, &a));
  OK(conn, hipd_shm_free(conn, a));
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

static const char FILL_SRC[] =
    "extern \"C\" __global__ void fill_idx(unsigned *out, unsigned add, int "
    "n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    out[i] = (unsigned)i * 3u + add;\n"
    "}\n";

/* A zero-copy buffer is the shared memory itself: a kernel's writes appear
 * in this process without a transfer. On a GPU it is mapped host memory. */
START_TEST(test_zero_copy)
{
  hipd_conn_t *conn = connect_named(shared, "zero-copy", 120000);
  const int n = 100000;
  hipd_shm_t *shm = NULL;
  int ndev, dev = -1;

  ndev = device_count_min2(conn);
  OK(conn, hipd_shm_create(conn, (size_t)n * 4, &shm));
  unsigned *p = hipd_shm_ptr(shm);
  for (dev = 0; dev < ndev; dev++) {
    hipd_buffer_t zb = HIPD_BUFFER_NULL, db = HIPD_BUFFER_NULL;
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    hipd_info_t *info = NULL;
    hipd_args_t *args = hipd_args_new();
    const uint32_t grid[3] = {(uint32_t)(n + 255) / 256, 1, 1};
    const uint32_t block[3] = {256, 1, 1};

    int rc = hipd_mem_alloc_zero_copy(conn, dev, shm, &zb);
    if (rc == HIPD_ENOTSUP) {
      /* Only a GPU that cannot map host memory may say so. */
      ck_assert_msg(!device_is_cpu(conn, dev), "CPU device %d: %s", dev,
                    hipd_last_error(conn));
      hipd_args_free(args);
      continue;
    }
    OK(conn, rc);
    OK(conn, hipd_mem_info(conn, zb, &info));
    ck_assert(info_bool(info, "zero_copy"));
    ck_assert_int_eq(info_int(info, "size"), (int64_t)hipd_shm_size(shm));
    hipd_info_free(info);

    memset(p, 0, (size_t)n * 4);
    OK(conn, hipd_kernel_compile_cached(conn, dev, FILL_SRC, "fill_idx", NULL,
                                        &k, NULL));
    OK(conn, hipd_args_buffer(args, zb, 0));
    OK(conn, hipd_args_i32(args, 7 + dev));
    OK(conn, hipd_args_i32(args, n));
    /* Launched and waited for in one request: the result is there. */
    OK(conn, hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    for (int i = 0; i < n; i++)
      ck_assert_msg(p[i] == (unsigned)i * 3u + 7u + (unsigned)dev,
                    "device %d: p[%d] = %u", dev, i, p[i]);

    /* Device memory and a zero-copy buffer copy to each other. */
    OK(conn, hipd_mem_alloc(conn, dev, (uint64_t)n * 4, "byte", &db));
    OK(conn, hipd_mem_copy(conn, db, 0, zb, 0, (size_t)n * 4));
    memset(p, 0, (size_t)n * 4);
    OK(conn, hipd_mem_copy(conn, zb, 0, db, 0, (size_t)n * 4));
    ck_assert_uint_eq(p[n - 1], (unsigned)(n - 1) * 3u + 7u + (unsigned)dev);

    OK(conn, hipd_mem_free(conn, db));
    OK(conn, hipd_mem_free(conn, zb));
    OK(conn, hipd_kernel_destroy(conn, k));
    hipd_args_free(args);
  }
  /* The daemon keeps its mapping while a zero-copy buffer uses it, even
   * after shm.free: the buffer stays usable. */
  {
    hipd_buffer_t zb = HIPD_BUFFER_NULL, zb2 = HIPD_BUFFER_NULL;
    uint8_t tmp[64];
    /* The two CPU devices (the last two) use one shared memory at once. */
    dev = ndev - 1;
    OK(conn, hipd_mem_alloc_zero_copy(conn, dev, shm, &zb));
    dev = ndev - 2;
    OK(conn, hipd_mem_alloc_zero_copy(conn, dev, shm, &zb2));
    memset(p, 0x5a, 64);
    OK(conn, hipd_shm_free(conn, shm));
    OK(conn, hipd_mem_read(conn, zb, 0, tmp, sizeof(tmp)));
    ck_assert_uint_eq(tmp[0], 0x5a);
    ck_assert_uint_eq(tmp[63], 0x5a);
    OK(conn, hipd_mem_free(conn, zb2));
    OK(conn, hipd_mem_memset(conn, zb, 0, 64, 0x33));
    OK(conn, hipd_mem_read(conn, zb, 0, tmp, sizeof(tmp)));
    ck_assert_uint_eq(tmp[10], 0x33);
    OK(conn, hipd_mem_free(conn, zb));
  }
  hipd_close(conn);
}
END_TEST

/* Corked submission: many requests written together; each still gets its
 * own reply, and an error goes to the call that caused it. */
START_TEST(test_cork)
{
  hipd_conn_t *conn = connect_named(shared, "cork", 60000);
  /* Waits spin before they sleep here (the CPU count may not turn it on). */
  hipd_set_busy_poll(conn, 50);
  enum { N = 300 };
  hipd_call_t *calls[N];
  int ndev, dev = -1;

  ndev = device_count_min2(conn);
  for (dev = 0; dev < ndev; dev++) {
    hipd_buffer_t b = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
    uint32_t vals[N], back[N];

    OK(conn, hipd_mem_alloc(conn, dev, N, "uint32", &b));
    OK(conn, hipd_stream_create(conn, dev, &st));
    hipd_cork(conn);
    hipd_cork(conn); /* corks nest */
    for (int i = 0; i < N; i++) {
      vals[i] = (uint32_t)(i * 7 + dev);
      /* Request 150 names a buffer that does not exist. */
      OK(conn,
         hipd_mem_write_async_begin(
             conn, i == 150 ? hipd_buffer_from_id(hipd_buffer_id(b) + 1) : b,
             (uint64_t)i * 4, &vals[i], 4, st, &calls[i]));
    }
    ck_assert_int_eq(hipd_uncork(conn), 0);
    /* Still corked once; waiting for a call writes what is pending. */
    ck_assert_int_eq(hipd_wait(calls[0]), 0);
    ck_assert_int_eq(hipd_uncork(conn), 0);
    for (int i = 1; i < N; i++) {
      int rc = hipd_wait(calls[i]);
      if (i == 150)
        ck_assert_msg(rc == HIPD_EHANDLE || rc == HIPD_EFOREIGN ||
                          rc == HIPD_EHANDLETYPE,
                      "call %d: %s", i, hipd_err_name(rc));
      else
        ck_assert_msg(rc == 0, "device %d call %d: %s (%s)", dev, i,
                      hipd_err_name(rc), hipd_last_error(conn));
    }
    OK(conn, hipd_stream_synchronize(conn, st));
    OK(conn, hipd_mem_read(conn, b, 0, back, sizeof(back)));
    for (int i = 0; i < N; i++)
      if (i != 150)
        ck_assert_uint_eq(back[i], vals[i]);
    /* A memset, a copy and an event record, corked together. */
    {
      hipd_buffer_t b2 = HIPD_BUFFER_NULL;
      hipd_event_t ev = HIPD_EVENT_NULL;
      hipd_call_t *c3[3];
      uint32_t back2[N];
      OK(conn, hipd_mem_alloc(conn, dev, N, "uint32", &b2));
      OK(conn, hipd_event_create(conn, dev, &ev));
      hipd_cork(conn);
      OK(conn, hipd_mem_memset_async_begin(conn, b2, 0, sizeof(back2), 0xff, st,
                                           &c3[0]));
      OK(conn, hipd_mem_copy_async_begin(conn, b2, 0, b, 0, 600, st, &c3[1]));
      OK(conn, hipd_event_record_begin(conn, ev, st, &c3[2]));
      ck_assert_int_eq(hipd_uncork(conn), 0);
      for (int i = 0; i < 3; i++)
        ck_assert_int_eq(hipd_wait(c3[i]), 0);
      OK(conn, hipd_event_synchronize(conn, ev));
      OK(conn, hipd_mem_read(conn, b2, 0, back2, sizeof(back2)));
      ck_assert_int_eq(memcmp(back2, back, 600), 0);
      ck_assert_uint_eq(back2[N - 1], 0xffffffffu);
      OK(conn, hipd_event_destroy(conn, ev));
      OK(conn, hipd_mem_free(conn, b2));
    }
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, b));
  }
  hipd_close(conn);
}
END_TEST

/* Large inline writes pipelined back to back with small ones: the daemon
 * hands a large request's input buffer to the write and goes on with the
 * bytes after it. Every byte lands where it should. */
START_TEST(test_large_writes_pipelined)
{
  hipd_conn_t *conn = connect_named(shared, "large-writes", 120000);
  enum { K = 12 };
  const size_t big = MIB + 4099;
  hipd_call_t *calls[2 * K];
  int ndev, dev = -1;

  ndev = device_count_min2(conn);
  uint8_t *src = malloc(K * big), *back = malloc(K * big);
  uint32_t small[K];
  ck_assert_ptr_nonnull(src);
  ck_assert_ptr_nonnull(back);
  for (dev = 0; dev < ndev; dev++) {
    hipd_buffer_t b = HIPD_BUFFER_NULL, s4 = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
    uint32_t sback[K];

    fill(src, K * big, (unsigned)dev + 7);
    OK(conn, hipd_mem_alloc(conn, dev, K * big, "byte", &b));
    OK(conn, hipd_mem_alloc(conn, dev, K, "uint32", &s4));
    OK(conn, hipd_stream_create(conn, dev, &st));
    for (int i = 0; i < K; i++) {
      small[i] = (uint32_t)(i * 31 + dev);
      OK(conn, hipd_mem_write_async_begin(conn, b, (uint64_t)i * big,
                                          src + (size_t)i * big, big, st,
                                          &calls[2 * i]));
      OK(conn, hipd_mem_write_async_begin(conn, s4, (uint64_t)i * 4, &small[i],
                                          4, st, &calls[2 * i + 1]));
    }
    for (int i = 0; i < 2 * K; i++)
      ck_assert_int_eq(hipd_wait(calls[i]), 0);
    OK(conn, hipd_stream_synchronize(conn, st));
    for (int i = 0; i < K; i++)
      OK(conn, hipd_mem_read(conn, b, (uint64_t)i * big, back + (size_t)i * big,
                             big));
    ck_assert_msg(memcmp(src, back, K * big) == 0, "device %d differs", dev);
    OK(conn, hipd_mem_read(conn, s4, 0, sback, sizeof(sback)));
    ck_assert_msg(memcmp(small, sback, sizeof(sback)) == 0, "device %d", dev);

    /* Large reads pipelined with small ones: each large reply goes from the
     * socket straight into its own buffer, the small ones through the
     * connection's buffer, all in order. */
    memset(back, 0, K * big);
    memset(sback, 0, sizeof(sback));
    for (int i = 0; i < K; i++) {
      OK(conn, hipd_mem_read_async_begin(conn, b, (uint64_t)i * big,
                                         back + (size_t)i * big, big, st,
                                         &calls[2 * i]));
      OK(conn, hipd_mem_read_async_begin(conn, s4, (uint64_t)i * 4, &sback[i],
                                         4, st, &calls[2 * i + 1]));
    }
    for (int i = 2 * K - 1; i >= 0; i--)
      ck_assert_int_eq(hipd_wait(calls[i]), 0);
    ck_assert_msg(memcmp(src, back, K * big) == 0, "device %d: reads differ",
                  dev);
    ck_assert_msg(memcmp(small, sback, sizeof(sback)) == 0, "device %d", dev);
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_mem_free(conn, b));
    OK(conn, hipd_mem_free(conn, s4));
  }
  free(src);
  free(back);
  hipd_close(conn);
}
END_TEST

/* hipd_shm_free() after hipd_close(): the buffer is unmapped here and the
 * call says the connection is gone (no use of freed memory: the sanitizer
 * builds of scripts/sanitize.sh would report one). Another connection's
 * buffer is refused and left alone. */
START_TEST(test_shm_free_after_close)
{
  hipd_conn_t *conn = connect_named(shared, "shm-after-close", 60000);
  hipd_conn_t *other = connect_named(shared, "shm-other", 60000);
  hipd_shm_t *shm = NULL, *kept = NULL;
  int dev = -1;

  OK(conn, hipd_shm_create(conn, 8192, &shm));
  OK(conn, hipd_shm_create(conn, 4096, &kept));
  memset(hipd_shm_ptr(shm), 0x5a, 8192);
  /* Not this connection's buffer: refused, and still usable. */
  EXPECT(other, hipd_shm_free(other, kept), HIPD_EFOREIGN);
  OK(conn, hipd_shm_free(NULL, kept));
  hipd_close(conn);
  /* Still mapped until it is freed. */
  ck_assert_int_eq(((uint8_t *)hipd_shm_ptr(shm))[8191], 0x5a);
  ck_assert_int_eq(hipd_shm_free(conn, shm), HIPD_EDISCONNECTED);
  /* The daemon goes on (the session's end released its side). */
  ping_ok(other);
  hipd_close(other);
}
END_TEST

static Suite *shm_suite(void)
{
  Suite *s = suite_create("shm");
  TCase *tc = tcase_create("shared");

  tcase_add_unchecked_fixture(tc, shared_start, shared_stop);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_shm_roundtrip);
  tcase_add_test(tc, test_shm_errors);
  tcase_add_test(tc, test_shm_free_after_close);
  tcase_add_test(tc, test_zero_copy);
  tcase_add_test(tc, test_cork);
  tcase_add_test(tc, test_large_writes_pipelined);
  suite_add_tcase(s, tc);

  tc = tcase_create("quota");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_shm_quota_and_cleanup);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_shm");
  failed = test_run(shm_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
