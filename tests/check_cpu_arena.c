/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_arena.c: the CPU device's buffers against a real hipd
 * (daemon/drivers/cpu/cpu_arena.h): thousands of tiny buffers cost the
 * daemon no descriptor each, a kernel that runs past its buffer crashes
 * (the launch fails, the next buffer is intact) instead of corrupting its
 * neighbour, and a freed range reads as zeros when it is reused. The
 * shared helpers are in tests/lib/kernels_util.h. */
#include "config.h"

#include <sys/resource.h>

#include "kernels_util.h"

/* Writes one byte at p[at]. */
static const char POKE_SRC[] =
    "extern \"C\" __global__ void poke(char *p, long long at, int v)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    p[at] = (char)v;\n"
    "}\n";

/* Fills p[0, n) with v. */
static const char FILL_SRC[] =
    "extern \"C\" __global__ void fill(unsigned char *p, long long n, int v)\n"
    "{\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] = (unsigned char)v;\n"
    "}\n";

/* How many descriptors process @p pid has open. */
static int open_fds(pid_t pid)
{
  char path[64];
  struct dirent *e;
  DIR *d;
  int n = 0;

  snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
  d = opendir(path);
  ck_assert_msg(d != NULL, "%s: %s", path, strerror(errno));
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static int64_t device_buffers(hipd_conn_t *conn, int dev, int64_t *bytes)
{
  hipd_info_t *info = NULL;
  int64_t n;

  OK(conn, hipd_device_get(conn, dev, &info));
  n = info_int(info, "memory.hipd_buffers");
  *bytes = info_int(info, "memory.hipd_allocated");
  hipd_info_free(info);
  return n;
}

static uint64_t device_ptr(hipd_conn_t *conn, hipd_buffer_t b)
{
  hipd_info_t *info = NULL;
  uint64_t p;

  ck_assert_int_eq(hipd_mem_info(conn, b, &info), 0);
  p = (uint64_t)info_int(info, "device_ptr");
  hipd_info_free(info);
  return p;
}

static int poke(hipd_conn_t *conn, hipd_kernel_t k, hipd_buffer_t b,
                long long at)
{
  hipd_args_t *args = args_new();
  int rc;

  hipd_args_buffer(args, b, 0);
  hipd_args_i64(args, at);
  hipd_args_i32(args, 0x77);
  rc = hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args);
  hipd_args_free(args);
  return rc;
}

/* ------------------------------------------------------------- descriptors */

/* 5000 one-byte buffers in one session, with the daemon's descriptor limit
 * lowered to 1000: every allocation succeeds, the daemon's descriptor
 * count stays where it was, the device counts them all, a kernel started
 * afterwards (its runner is given all of them at once) writes into the
 * last one, and freeing them all gives the count back. */
START_TEST(test_many_tiny_buffers)
{
  enum { N = 5000 };
  const struct rlimit lim = {1000, 1000};
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--cache-dir", shared_cache, NULL);
  hipd_buffer_t *bufs = calloc(N, sizeof(*bufs));
  hipd_conn_t *conn;
  hipd_kernel_t k;
  int64_t bytes0, bytes1, n0, n1;
  int dev, fds0, fds1, fds2;
  uint8_t one = 0;

  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(bufs);
  ck_assert_int_eq(prlimit(d->pid, RLIMIT_NOFILE, &lim, NULL), 0);
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  ck_assert_int_ge(dev, 0);
  n0 = device_buffers(conn, dev, &bytes0);
  fds0 = open_fds(d->pid);
  for (int i = 0; i < N; i++) {
    int rc = hipd_mem_alloc(conn, dev, 1, "byte", &bufs[i]);
    ck_assert_msg(rc == 0, "buffer %d of %d: %s (%s)", i, N, hipd_err_name(rc),
                  hipd_last_error(conn));
  }
  fds1 = open_fds(d->pid);
  ck_assert_msg(fds1 <= fds0 + 2,
                "%d buffers took the daemon from %d to %d descriptors", N, fds0,
                fds1);
  n1 = device_buffers(conn, dev, &bytes1);
  ck_assert_int_eq(n1 - n0, N);
  ck_assert_int_eq(bytes1 - bytes0, N);

  k = compile(conn, dev, POKE_SRC, "poke", NULL);
  OK(conn, poke(conn, k, bufs[N - 1], 0));
  OK(conn, hipd_mem_read(conn, bufs[N - 1], 0, &one, 1));
  ck_assert_uint_eq(one, 0x77);
  OK(conn, hipd_mem_read(conn, bufs[N - 2], 0, &one, 1));
  ck_assert_uint_eq(one, 0);
  for (int i = 0; i < N; i++)
    OK(conn, hipd_mem_free(conn, bufs[i]));
  n1 = device_buffers(conn, dev, &bytes1);
  ck_assert_int_eq(n1, n0);
  ck_assert_int_eq(bytes1, bytes0);
  fds2 = open_fds(d->pid);
  ck_assert_msg(fds2 <= fds0 + 2, "the daemon had %d descriptors, now %d", fds0,
                fds2);
  OK(conn, hipd_kernel_destroy(conn, k));
  free(bufs);
  hipd_close(conn);
  stop_daemon(d);
}
END_TEST

/* ------------------------------------------------------------ guard gaps */

/* Wait until no CPU device has a buffer. The memory of a freed buffer
 * goes on its device's housekeeping thread after the request, and the
 * device counts it until then; once none is left, the arena is empty and
 * the next buffer goes where the first one went. */
static void wait_all_freed(hipd_conn_t *conn)
{
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    int64_t bytes;
    int tries = 0;
    if (!device_is_cpu(conn, dev))
      continue;
    while (device_buffers(conn, dev, &bytes) != 0) {
      ck_assert_msg(++tries < 4000, "device %d: buffers are never freed", dev);
      harness_sleep_ms(5);
    }
  }
}

/* A kernel writing one byte just past its buffer, a page past it, or at
 * the last byte before the next buffer: each launch fails with the crash
 * named, and the buffer allocated right after is unchanged. On every CPU
 * device, for a buffer of whole pages and one of 768 bytes (a multiple of
 * the 256-byte alignment). */
START_TEST(test_overrun_faults)
{
  static const size_t sizes[] = {4096, 768};
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev, tested = 0;
  uint8_t pattern[4096], back[4096];

  for (size_t i = 0; i < sizeof(pattern); i++)
    pattern[i] = (uint8_t)(i * 7 + 1);
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k;

    if (!device_is_cpu(conn, dev))
      continue;
    tested++;
    k = compile(conn, dev, POKE_SRC, "poke", NULL);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
      const size_t len = sizes[s];
      hipd_buffer_t a = HIPD_BUFFER_NULL, b = HIPD_BUFFER_NULL;
      uint64_t pa, pb;
      long long past[3];

      wait_all_freed(conn); /* b goes right after a then */
      OK(conn, hipd_mem_alloc(conn, dev, len, "byte", &a));
      OK(conn, hipd_mem_alloc(conn, dev, sizeof(pattern), "byte", &b));
      OK(conn, hipd_mem_write(conn, b, 0, pattern, sizeof(pattern)));
      pa = device_ptr(conn, a);
      pb = device_ptr(conn, b);
      /* b is the next buffer: no other lies between them. */
      ck_assert_msg(pb > pa + len && pb - (pa + len) <= 256 * 1024,
                    "device %d: buffers at 0x%llx (%zu bytes) and 0x%llx", dev,
                    (unsigned long long)pa, len, (unsigned long long)pb);
      past[0] = (long long)len;
      past[1] = (long long)len + 4096;
      past[2] = (long long)(pb - pa) - 1;
      for (int p = 0; p < 3; p++) {
        EXPECT(conn, poke(conn, k, a, past[p]), HIPD_ELAUNCH);
        ck_assert_msg(strstr(hipd_last_error(conn), "SIGSEGV") != NULL,
                      "device %d: a write %lld bytes into a buffer of %zu: %s",
                      dev, past[p], len, hipd_last_error(conn));
        OK(conn, hipd_mem_read(conn, b, 0, back, sizeof(back)));
        ck_assert_msg(memcmp(back, pattern, sizeof(back)) == 0,
                      "device %d: the next buffer changed", dev);
      }
      /* In bounds, the same kernel works (on the restarted runner). */
      OK(conn, poke(conn, k, a, (long long)len - 1));
      OK(conn, hipd_mem_read(conn, a, len - 1, back, 1));
      ck_assert_uint_eq(back[0], 0x77);
      OK(conn, hipd_mem_free(conn, a));
      OK(conn, hipd_mem_free(conn, b));
    }
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  ck_assert_int_ge(tested, 2);
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------------------ reuse */

/* Every byte of buffer @p b (@p size bytes) is zero. */
static void assert_zero(hipd_conn_t *conn, int dev, hipd_buffer_t b,
                        size_t size, uint8_t *back, const char *what)
{
  OK(conn, hipd_mem_read(conn, b, 0, back, size));
  for (size_t i = 0; i < size; i++)
    ck_assert_msg(back[i] == 0, "device %d, %s: byte %zu is 0x%02x", dev, what,
                  i, back[i]);
}

/* A buffer filled (by the client, then by a kernel), freed, and allocated
 * again over its range (the same size, then a larger one) reads as
 * zeros. */
START_TEST(test_reuse_reads_zero)
{
  const size_t len = 64 * 1024;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev, tested = 0;
  uint8_t *back = malloc(4 * len), *ff = malloc(len);

  ck_assert_ptr_nonnull(back);
  ck_assert_ptr_nonnull(ff);
  memset(ff, 0xff, len);
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k;
    hipd_buffer_t b = HIPD_BUFFER_NULL;
    uint64_t p0 = 0;

    if (!device_is_cpu(conn, dev))
      continue;
    tested++;
    k = compile(conn, dev, FILL_SRC, "fill", NULL);
    for (int round = 0; round < 3; round++) {
      size_t size = round < 2 ? len : 4 * len;
      hipd_args_t *args = args_new();
      uint32_t grid[3] = {(uint32_t)(size / 256), 1, 1}, block[3] = {256, 1, 1};

      wait_all_freed(conn);
      OK(conn, hipd_mem_alloc(conn, dev, size, "byte", &b));
      if (round == 0)
        p0 = device_ptr(conn, b);
      else /* sizes of whole pages start where their mapping does */
        ck_assert_msg(device_ptr(conn, b) == p0,
                      "device %d: the range was not reused", dev);
      assert_zero(conn, dev, b, size, back, round ? "reused" : "fresh");
      /* Dirty it both ways before it goes. */
      OK(conn, hipd_mem_write(conn, b, 0, ff, len));
      hipd_args_buffer(args, b, 0);
      hipd_args_i64(args, (long long)size);
      hipd_args_i32(args, 0xab);
      OK(conn,
         hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
      hipd_args_free(args);
      OK(conn, hipd_mem_read(conn, b, size - 1, back, 1));
      ck_assert_uint_eq(back[0], 0xab);
      OK(conn, hipd_mem_free(conn, b));
    }
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  ck_assert_int_ge(tested, 2);
  free(back);
  free(ff);
  hipd_close(conn);
}
END_TEST

static Suite *cpu_arena_suite(void)
{
  Suite *s = suite_create("cpu_arena");
  TCase *tc;

  tc = tcase_create("descriptors");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_many_tiny_buffers);
  suite_add_tcase(s, tc);

  tc = tcase_create("guards");
  tcase_set_timeout(tc, 240);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_overrun_faults);
  tcase_add_test(tc, test_reuse_reads_zero);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return kernels_main("check_cpu_arena", cpu_arena_suite);
}
