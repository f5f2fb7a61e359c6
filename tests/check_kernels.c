/* tests/check_kernels.c: kernels end to end: compile, launch, check the
 * results, through libhipd against a real hipd (tests/harness.c) with the
 * real host compiler and the real CPU kernel runner.
 *
 * The kernels are written in the HIP/CUDA subset that both the CPU device
 * and a GPU take (hipd_cpu_device.h), and every kernel test runs on every
 * device the daemon serves: it is started with --cpu-devices 2, and on a GPU
 * host the HIP devices come first and are covered the same way. Tests that
 * only make sense on one kind of device say why where they skip.
 *
 * A CPU-device compile takes about a second, so the daemons of the kernel
 * TCases share one cache directory (made fresh for this run): each kernel
 * is compiled once, later daemons find it on disk. The cache tests use
 * directories of their own. No assertion depends on how long anything
 * takes.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "testutil.h"

#define MAX_DEVICES 64

/* The daemon of the TCases that share one (started by an unchecked
 * fixture, in check's runner process), and the cache directory all such
 * daemons use. */
static harness_daemon_t *shared;
static char shared_cache[256];

/* --------------------------------------------------------------- kernels */

static const char VECADD_SRC[] =
    "extern \"C\" __global__ void vecadd(const float *a, const float *b,\n"
    "                                    float *c, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    c[i] = a[i] + b[i];\n"
    "}\n";

/* A tree reduction in shared memory with barriers: one partial sum per
 * block, and the total through an atomic. */
static const char REDUCE_SRC[] =
    "extern \"C\" __global__ void block_sum(const int *in, int *partial,\n"
    "                                      int *total, int n)\n"
    "{\n"
    "  __shared__ int s[256];\n"
    "  unsigned t = threadIdx.x;\n"
    "  unsigned i = blockIdx.x * blockDim.x + t;\n"
    "  s[t] = i < (unsigned)n ? in[i] : 0;\n"
    "  __syncthreads();\n"
    "  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {\n"
    "    if (t < stride)\n"
    "      s[t] += s[t + stride];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (t == 0) {\n"
    "    partial[blockIdx.x] = s[0];\n"
    "    atomicAdd(total, s[0]);\n"
    "  }\n"
    "}\n";

/* A histogram: per-block bins in shared memory, merged with atomics. */
static const char HIST_SRC[] =
    "extern \"C\" __global__ void histogram(const unsigned char *data,\n"
    "                                      unsigned *bins, int n)\n"
    "{\n"
    "  __shared__ unsigned local[256];\n"
    "  for (int b = threadIdx.x; b < 256; b += blockDim.x)\n"
    "    local[b] = 0;\n"
    "  __syncthreads();\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += blockDim.x * gridDim.x)\n"
    "    atomicAdd(&local[data[i]], 1u);\n"
    "  __syncthreads();\n"
    "  for (int b = threadIdx.x; b < 256; b += blockDim.x)\n"
    "    if (local[b] != 0)\n"
    "      atomicAdd(&bins[b], local[b]);\n"
    "}\n";

/* Every thread writes its global (x, y, z) index and the grid's shape. */
static const char INDEX_SRC[] =
    "extern \"C\" __global__ void index3d(int *out, int nx, int ny, int nz)\n"
    "{\n"
    "  int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  int z = blockIdx.z * blockDim.z + threadIdx.z;\n"
    "  if (x < nx && y < ny && z < nz) {\n"
    "    long i = ((long)z * ny + y) * nx + x;\n"
    "    out[4 * i] = x;\n"
    "    out[4 * i + 1] = y;\n"
    "    out[4 * i + 2] = z;\n"
    "    out[4 * i + 3] = (int)(gridDim.x * gridDim.y * gridDim.z *\n"
    "                           blockDim.x * blockDim.y * blockDim.z);\n"
    "  }\n"
    "}\n";

/* Dynamic shared memory: each block reverses its slice through it. */
static const char DYN_SRC[] =
    "extern \"C\" __global__ void dyn_reverse(const float *in, float *out)\n"
    "{\n"
    "  extern __shared__ float s[];\n"
    "  unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;\n"
    "  s[t] = in[base + t];\n"
    "  __syncthreads();\n"
    "  out[base + t] = s[blockDim.x - 1 - t];\n"
    "}\n";

/* Scalars of every width: each must arrive whole. */
static const char MIX_SRC[] =
    "extern \"C\" __global__ void mix(float a, double b, long long c, int d,\n"
    "                                double *out, long long *iout)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
    "    out[0] = a;\n"
    "    out[1] = b;\n"
    "    out[2] = (double)a * b + (double)d;\n"
    "    out[3] = sqrt(b) + fabsf(a);\n"
    "    iout[0] = c;\n"
    "    iout[1] = c + d;\n"
    "    iout[2] = (long long)sizeof(c);\n"
    "  }\n"
    "}\n";

/* C++ names: a plain (mangled) kernel and a template. */
static const char CXX_SRC[] =
    "__global__ void scale(float *p, float f, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] *= f;\n"
    "}\n"
    "\n"
    "template <class T> __global__ void axpy(T a, const T *x, T *y, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n";

/* Thread @p which writes through @p bad (NULL). The address comes in as a
 * number so that the compiler cannot see it is NULL (GCC drops a store
 * through a pointer it knows to be NULL, even a volatile one). */
static const char CRASH_SRC[] =
    "extern \"C\" __global__ void crash(int *p, int which, long long bad)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i == which)\n"
    "    *(int *)bad = 42;\n"
    "  p[i] = 1;\n"
    "}\n";

/* An error on line 3. */
static const char BROKEN_SRC[] =
    "extern \"C\" __global__ void broken(float *x)\n"
    "{\n"
    "  x[0] = this_name_is_not_declared;\n"
    "}\n";

/* ---------------------------------------------------------------- checks */

/* Assert that @p expr returns @p want, naming the call, the device and the
 * daemon's message. `dev` must be in scope (-1 when there is none). */

/* Does a compiler log point at line 3? GCC, clang and hiprtc write
 * "kernel.hip:3:10: error", NVRTC "kernel.hip(3): error". */
static int names_line_3(const char *log)
{
  return strstr(log, ":3:") != NULL || strstr(log, "(3): ") != NULL;
}

static hipd_conn_t *connect_to(const harness_daemon_t *d)
{
  return connect_named(d, "check_kernels", 120000);
}

static int device_count(hipd_conn_t *conn)
{
  int n = device_count_min2(conn);

  ck_assert_int_le(n, MAX_DEVICES);
  return n;
}

static uint64_t info_uint(const hipd_info_t *info, const char *path)
{
  uint64_t v = 0;
  int rc = hipd_info_uint(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

/* A capability of device @p dev ("capabilities.<name>"). */
static int64_t device_cap(hipd_conn_t *conn, int dev, const char *name)
{
  hipd_info_t *info = NULL;
  char path[128];
  int64_t v;

  OK(conn, hipd_device_get(conn, dev, &info));
  snprintf(path, sizeof(path), "capabilities.%s", name);
  v = info_int(info, path);
  hipd_info_free(info);
  return v;
}

/* The first CPU device, or -1. */
static int first_cpu_device(hipd_conn_t *conn)
{
  int n = device_count(conn);

  for (int dev = 0; dev < n; dev++)
    if (device_is_cpu(conn, dev))
      return dev;
  return -1;
}

static void *xmalloc(size_t n)
{
  void *p = calloc(1, n ? n : 1);

  ck_assert_ptr_nonnull(p);
  return p;
}

static hipd_args_t *args_new(void)
{
  hipd_args_t *a = hipd_args_new();

  ck_assert_ptr_nonnull(a);
  return a;
}

static const uint32_t ONE[3] = {1, 1, 1};

/* Compile @p name of @p src through the cache on @p dev; *@p info (if not
 * NULL) gets the record. */
static hipd_kernel_t compile(hipd_conn_t *conn, int dev, const char *src,
                             const char *name, hipd_info_t **info)
{
  hipd_kernel_t k = 0;

  OK(conn, hipd_kernel_compile_cached(conn, dev, src, name, NULL, &k, info));
  ck_assert_uint_ne(k, 0);
  return k;
}

/* A buffer of @p n floats on @p dev holding @p data (NULL: zeros). */
static hipd_buffer_t float_buffer(hipd_conn_t *conn, int dev, size_t n,
                                  const float *data)
{
  hipd_buffer_t b = 0;

  OK(conn, hipd_mem_alloc(conn, dev, n, "float32", &b));
  if (data != NULL)
    OK(conn, hipd_mem_write(conn, b, 0, data, n * sizeof(float)));
  else
    OK(conn, hipd_mem_memset(conn, b, 0, n * sizeof(float), 0));
  return b;
}

/* The grid that covers @p n items with blocks of @p block. */
static uint32_t blocks_for(size_t n, uint32_t block)
{
  return (uint32_t)((n + block - 1) / block);
}

/* Vector add with kernel @p k on @p dev (its buffers fresh), on @p stream
 * (0: the default one); checks every element. */
static void vecadd_run(hipd_conn_t *conn, int dev, hipd_kernel_t k, int n,
                       hipd_stream_t stream)
{
  float *a = xmalloc((size_t)n * sizeof(float));
  float *b = xmalloc((size_t)n * sizeof(float));
  float *c = xmalloc((size_t)n * sizeof(float));
  hipd_buffer_t ba, bb, bc;
  uint32_t grid[3] = {blocks_for((size_t)n, 128), 1, 1}, block[3] = {128, 1, 1};
  hipd_args_t *args = args_new();

  for (int i = 0; i < n; i++) {
    a[i] = (float)i * 0.5f;
    b[i] = (float)(2 * i);
  }
  ba = float_buffer(conn, dev, (size_t)n, a);
  bb = float_buffer(conn, dev, (size_t)n, b);
  bc = float_buffer(conn, dev, (size_t)n, NULL);
  hipd_args_buffer(args, ba, 0);
  hipd_args_buffer(args, bb, 0);
  hipd_args_buffer(args, bc, 0);
  hipd_args_i32(args, n);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, stream, args));
  /* The synchronous read is ordered on the default stream only. */
  if (stream != 0)
    OK(conn, hipd_stream_synchronize(conn, stream));
  OK(conn, hipd_mem_read(conn, bc, 0, c, (size_t)n * sizeof(float)));
  for (int i = 0; i < n; i++)
    ck_assert_msg(c[i] == a[i] + b[i], "device %d: c[%d] = %g, expected %g",
                  dev, i, c[i], a[i] + b[i]);
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  OK(conn, hipd_mem_free(conn, bc));
  free(a);
  free(b);
  free(c);
}

/* ------------------------------------------------------ cache directories */

/* A fresh directory for a daemon's --cache-dir, in @p buf. */
static void cache_dir_make(char *buf, size_t size)
{
  const char *root = getenv("HIPD_TEST_TMP");

  snprintf(buf, size, "%s/kcache-XXXXXX",
           root != NULL && root[0] != '\0' ? root : "/tmp");
  ck_assert_msg(mkdtemp(buf) != NULL, "mkdtemp %s: %s", buf, strerror(errno));
}

static int remove_cb(const char *path, const struct stat *st, int flag,
                     struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void cache_dir_remove(const char *dir)
{
  if (dir[0] != '\0')
    nftw(dir, remove_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The number of entries (*.hkc) in @p dir; the last one's path in
 * @p path. */
static int cache_entries(const char *dir, char *path, size_t size)
{
  DIR *dh = opendir(dir);
  struct dirent *e;
  int n = 0;

  ck_assert_ptr_nonnull(dh);
  while ((e = readdir(dh)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".hkc") == 0) {
      n++;
      if (path != NULL)
        snprintf(path, size, "%s/%s", dir, e->d_name);
    }
  }
  closedir(dh);
  return n;
}

static harness_daemon_t *start_with_cache(const char *dir)
{
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--cache-dir", dir, NULL);

  ck_assert_msg(d != NULL, "hipd did not start");
  return d;
}

static void stop_daemon(harness_daemon_t *d)
{
  stop_checked(&d);
}

static void shared_setup(void)
{
  shared = start_with_cache(shared_cache);
}

static void shared_teardown(void)
{
  stop_checked(&shared);
}

/* ------------------------------------------------------------ running */

/* Vector add on every device: the record of a compile, launches on the
 * default stream and on a stream of its own, and pipelined launches. */
START_TEST(test_vecadd)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    enum { N = 10000, PIPE = 4 };
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", &info);
    const char *cache = info_str(info, "cache");
    hipd_stream_t st = 0;
    hipd_buffer_t bufs[PIPE];
    hipd_call_t *calls[PIPE];

    ck_assert_uint_eq(info_uint(info, "kernel"), k);
    ck_assert_msg(strcmp(cache, "miss") == 0 || strcmp(cache, "memory") == 0 ||
                      strcmp(cache, "disk") == 0 ||
                      strcmp(cache, "waited") == 0,
                  "device %d: cache %s", dev, cache);
    ck_assert_uint_eq(strlen(info_str(info, "key")), 64);
    ck_assert_int_gt(info_int(info, "bytes"), 0);
    {
      double ms = -1;
      ck_assert_int_eq(hipd_info_double(info, "compile_ms", &ms), 0);
      ck_assert(ms >= 0);
    }
    if (device_is_cpu(conn, dev)) {
      /* The CPU device knows the declaration. */
      ck_assert_int_eq(hipd_info_len(info, "params"), 4);
      ck_assert_str_eq(info_str(info, "params.0"), "pointer");
      ck_assert_str_eq(info_str(info, "params.2"), "pointer");
      ck_assert_str_eq(info_str(info, "params.3"), "int32");
    }
    hipd_info_free(info);

    OK(conn, hipd_kernel_info(conn, k, &info));
    ck_assert_str_eq(info_str(info, "name"), "vecadd");
    ck_assert_int_eq(info_int(info, "device"), dev);
    hipd_info_free(info);

    vecadd_run(conn, dev, k, N, 0);
    vecadd_run(conn, dev, k, 1, 0);
    OK(conn, hipd_stream_create(conn, dev, &st));
    vecadd_run(conn, dev, k, 777, st);

    /* Pipelined: each launch adds 1 to its own element of a buffer. */
    {
      hipd_buffer_t ones = 0;
      float x = 1.0f;
      OK(conn, hipd_mem_alloc(conn, dev, 1, "float32", &ones));
      OK(conn, hipd_mem_write(conn, ones, 0, &x, sizeof(x)));
      for (int i = 0; i < PIPE; i++) {
        hipd_args_t *args = args_new();
        bufs[i] = float_buffer(conn, dev, 1, NULL);
        hipd_args_buffer(args, bufs[i], 0);
        hipd_args_buffer(args, ones, 0);
        hipd_args_buffer(args, bufs[i], 0);
        hipd_args_i32(args, 1);
        OK(conn,
           hipd_kernel_launch_begin(conn, k, ONE, ONE, 0, st, args, &calls[i]));
        /* The arguments were packed: they may go at once. */
        hipd_args_free(args);
      }
      for (int i = 0; i < PIPE; i++)
        OK(conn, hipd_wait(calls[i]));
      OK(conn, hipd_stream_synchronize(conn, st));
      for (int i = 0; i < PIPE; i++) {
        float v = 0;
        OK(conn, hipd_mem_read(conn, bufs[i], 0, &v, sizeof(v)));
        ck_assert_msg(v == 1.0f, "device %d: pipelined launch %d left %g", dev,
                      i, v);
        OK(conn, hipd_mem_free(conn, bufs[i]));
      }
      OK(conn, hipd_mem_free(conn, ones));
    }
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* A reduction over many blocks of 256 threads: shared memory, barriers,
 * an atomic. */
START_TEST(test_reduce)
{
  enum { BLOCK = 256, GRID = 300, N = BLOCK * GRID - 17 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  int *in = xmalloc(N * sizeof(int)), *partial = xmalloc(GRID * sizeof(int));
  long long want_total = 0;

  for (int i = 0; i < N; i++) {
    in[i] = (int)((i * 7919u) % 1000) - 300;
    want_total += in[i];
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, REDUCE_SRC, "block_sum", NULL);
    hipd_buffer_t bin, bpart, btotal;
    uint32_t grid[3] = {GRID, 1, 1}, block[3] = {BLOCK, 1, 1};
    hipd_args_t *args = args_new();
    int total = 0;

    OK(conn, hipd_mem_alloc(conn, dev, N, "int32", &bin));
    OK(conn, hipd_mem_alloc(conn, dev, GRID, "int32", &bpart));
    OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &btotal));
    OK(conn, hipd_mem_write(conn, bin, 0, in, N * sizeof(int)));
    OK(conn, hipd_mem_memset(conn, btotal, 0, sizeof(int), 0));
    hipd_args_buffer(args, bin, 0);
    hipd_args_buffer(args, bpart, 0);
    hipd_args_buffer(args, btotal, 0);
    hipd_args_i32(args, N);
    OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bpart, 0, partial, GRID * sizeof(int)));
    OK(conn, hipd_mem_read(conn, btotal, 0, &total, sizeof(int)));
    for (int b = 0; b < GRID; b++) {
      long long want = 0;
      for (int i = b * BLOCK; i < (b + 1) * BLOCK && i < N; i++)
        want += in[i];
      ck_assert_msg(partial[b] == want,
                    "device %d: block %d summed to %d, expected %lld", dev, b,
                    partial[b], want);
    }
    ck_assert_msg(total == want_total, "device %d: total %d, expected %lld",
                  dev, total, want_total);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bin));
    OK(conn, hipd_mem_free(conn, bpart));
    OK(conn, hipd_mem_free(conn, btotal));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  free(in);
  free(partial);
  hipd_close(conn);
}
END_TEST

/* A histogram of 200003 bytes: atomics in shared and global memory. */
START_TEST(test_histogram)
{
  enum { N = 200003 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  unsigned char *data = xmalloc(N);
  unsigned want[256] = {0}, bins[256];
  uint32_t x = 12345;

  for (int i = 0; i < N; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    /* Skewed, so that many threads hit the same bins. */
    data[i] = (unsigned char)((x & 1) ? (x >> 8) & 0xff : (x >> 8) & 0x7);
    want[data[i]]++;
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, HIST_SRC, "histogram", NULL);
    hipd_buffer_t bdata, bbins;
    uint32_t grid[3] = {32, 1, 1}, block[3] = {128, 1, 1};
    hipd_args_t *args = args_new();

    OK(conn, hipd_mem_alloc(conn, dev, N, "uint8", &bdata));
    OK(conn, hipd_mem_alloc(conn, dev, 256, "uint32", &bbins));
    OK(conn, hipd_mem_write(conn, bdata, 0, data, N));
    OK(conn, hipd_mem_memset(conn, bbins, 0, sizeof(bins), 0));
    hipd_args_buffer(args, bdata, 0);
    hipd_args_buffer(args, bbins, 0);
    hipd_args_i32(args, N);
    OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bbins, 0, bins, sizeof(bins)));
    for (int b = 0; b < 256; b++)
      ck_assert_msg(bins[b] == want[b], "device %d: bin %d = %u, expected %u",
                    dev, b, bins[b], want[b]);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bdata));
    OK(conn, hipd_mem_free(conn, bbins));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  free(data);
  hipd_close(conn);
}
END_TEST

/* Launch index3d over a grid and check every element's (x, y, z). */
static void grid_check(hipd_conn_t *conn, int dev, hipd_kernel_t k,
                       const uint32_t grid[3], const uint32_t block[3],
                       const int shape[3])
{
  size_t count = (size_t)shape[0] * shape[1] * shape[2];
  int *out = xmalloc(count * 4 * sizeof(int));
  int threads =
      (int)(grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]);
  hipd_buffer_t b;
  hipd_args_t *args = args_new();

  OK(conn, hipd_mem_alloc(conn, dev, count * 4, "int32", &b));
  OK(conn, hipd_mem_memset(conn, b, 0, count * 4 * sizeof(int), 0xff));
  hipd_args_buffer(args, b, 0);
  hipd_args_i32(args, shape[0]);
  hipd_args_i32(args, shape[1]);
  hipd_args_i32(args, shape[2]);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args));
  OK(conn, hipd_mem_read(conn, b, 0, out, count * 4 * sizeof(int)));
  for (int z = 0; z < shape[2]; z++)
    for (int y = 0; y < shape[1]; y++)
      for (int x = 0; x < shape[0]; x++) {
        const int *e = &out[4 * (((size_t)z * shape[1] + y) * shape[0] + x)];
        ck_assert_msg(e[0] == x && e[1] == y && e[2] == z && e[3] == threads,
                      "device %d: element (%d,%d,%d) holds (%d,%d,%d) of %d "
                      "threads, expected %d",
                      dev, x, y, z, e[0], e[1], e[2], e[3], threads);
      }
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, b));
  free(out);
}

/* 2-D and 3-D grids: every thread's global index is where it should be. */
START_TEST(test_grids)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, INDEX_SRC, "index3d", NULL);
    /* 2-D, with partial blocks at the edges. */
    const uint32_t g2[3] = {4, 3, 1}, b2[3] = {16, 8, 1};
    const int s2[3] = {60, 20, 1};
    /* 3-D, with partial blocks in every dimension. */
    const uint32_t g3[3] = {3, 2, 4}, b3[3] = {8, 4, 2};
    const int s3[3] = {20, 7, 7};
    /* Only z. */
    const uint32_t gz[3] = {1, 1, 5}, bz[3] = {1, 1, 8};
    const int sz[3] = {1, 1, 40};

    grid_check(conn, dev, k, g2, b2, s2);
    grid_check(conn, dev, k, g3, b3, s3);
    grid_check(conn, dev, k, gz, bz, sz);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* Dynamic shared memory (`extern __shared__`), sized by the launch. */
START_TEST(test_dynamic_shared)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, DYN_SRC, "dyn_reverse", NULL);
    const uint32_t sizes[2] = {200, 1024};

    for (int s = 0; s < 2; s++) {
      uint32_t block[3] = {sizes[s], 1, 1}, grid[3] = {7, 1, 1};
      size_t count = (size_t)block[0] * grid[0];
      float *in = xmalloc(count * sizeof(float));
      float *out = xmalloc(count * sizeof(float));
      hipd_buffer_t bin, bout;
      hipd_args_t *args = args_new();

      for (size_t i = 0; i < count; i++)
        in[i] = (float)i + 0.25f;
      bin = float_buffer(conn, dev, count, in);
      bout = float_buffer(conn, dev, count, NULL);
      hipd_args_buffer(args, bin, 0);
      hipd_args_buffer(args, bout, 0);
      OK(conn, hipd_kernel_launch(conn, k, grid, block,
                                  block[0] * (uint32_t)sizeof(float), 0, args));
      OK(conn, hipd_mem_read(conn, bout, 0, out, count * sizeof(float)));
      for (size_t b = 0; b < grid[0]; b++)
        for (size_t t = 0; t < block[0]; t++) {
          size_t i = b * block[0] + t;
          float want = in[b * block[0] + block[0] - 1 - t];
          ck_assert_msg(out[i] == want,
                        "device %d: block %zu thread %zu read %g, expected %g",
                        dev, b, t, out[i], want);
        }
      hipd_args_free(args);
      OK(conn, hipd_mem_free(conn, bin));
      OK(conn, hipd_mem_free(conn, bout));
      free(in);
      free(out);
    }
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* float, double, long long and int arguments, and their combination. */
START_TEST(test_scalar_args)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  /* Exact in float; a * b + d is exact in double (no rounding to differ
   * with or without a fused multiply-add). */
  const float a = 1.5f + 1.0f / (1 << 20);
  const double b = 2.25;
  const int64_t c = -((int64_t)1 << 40) - 3;
  const int32_t d = -7;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile(conn, dev, MIX_SRC, "mix", &info);
    hipd_buffer_t bout, biout;
    double out[4];
    int64_t iout[3];
    hipd_args_t *args = args_new();

    if (device_is_cpu(conn, dev)) {
      static const char *const want[] = {"float", "double",  "int64",
                                         "int32", "pointer", "pointer"};
      ck_assert_int_eq(hipd_info_len(info, "params"), 6);
      for (int i = 0; i < 6; i++) {
        char p[16];
        snprintf(p, sizeof(p), "params.%d", i);
        ck_assert_str_eq(info_str(info, p), want[i]);
      }
    }
    hipd_info_free(info);
    OK(conn, hipd_mem_alloc(conn, dev, 4, "float64", &bout));
    OK(conn, hipd_mem_alloc(conn, dev, 3, "int64", &biout));
    hipd_args_f32(args, a);
    hipd_args_f64(args, b);
    hipd_args_i64(args, c);
    hipd_args_i32(args, d);
    hipd_args_buffer(args, bout, 0);
    hipd_args_buffer(args, biout, 0);
    OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bout, 0, out, sizeof(out)));
    OK(conn, hipd_mem_read(conn, biout, 0, iout, sizeof(iout)));
    ck_assert_msg(out[0] == (double)a, "device %d: a arrived as %.17g", dev,
                  out[0]);
    ck_assert_msg(out[1] == b, "device %d: b arrived as %.17g", dev, out[1]);
    ck_assert_msg(out[2] == (double)a * b + d,
                  "device %d: a * b + d = %.17g, expected %.17g", dev, out[2],
                  (double)a * b + d);
    ck_assert_msg(fabs(out[3] - (1.5 + (double)a)) < 1e-12,
                  "device %d: sqrt(b) + fabsf(a) = %.17g", dev, out[3]);
    ck_assert_msg(iout[0] == c, "device %d: c arrived as %lld", dev,
                  (long long)iout[0]);
    ck_assert_int_eq(iout[1], c + d);
    ck_assert_int_eq(iout[2], 8);

    /* The largest values too. */
    hipd_args_clear(args);
    hipd_args_f32(args, -3.0e38f);
    hipd_args_f64(args, 1.0e300);
    hipd_args_i64(args, INT64_MAX);
    hipd_args_i32(args, INT32_MIN);
    hipd_args_buffer(args, bout, 0);
    hipd_args_buffer(args, biout, 0);
    OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bout, 0, out, sizeof(out)));
    OK(conn, hipd_mem_read(conn, biout, 0, iout, sizeof(iout)));
    ck_assert(out[0] == (double)-3.0e38f);
    ck_assert(out[1] == 1.0e300);
    ck_assert_int_eq(iout[0], INT64_MAX);
    ck_assert_int_eq(iout[1], INT64_MAX + (int64_t)INT32_MIN);

    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bout));
    OK(conn, hipd_mem_free(conn, biout));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* Kernels that are not extern "C": a plain C++ function (its name is
 * mangled) and a template instance, compiled by their C++ names. Both the
 * CPU device (cpu_compile.h) and hiprtc (name expressions) take them. */
START_TEST(test_cxx_names)
{
  enum { N = 1000 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
  float *out = xmalloc(N * sizeof(float));

  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = (float)(N - i);
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t ks = compile(conn, dev, CXX_SRC, "scale", NULL);
    hipd_kernel_t ka = compile(conn, dev, CXX_SRC, "axpy<float>", NULL);
    hipd_buffer_t bx = float_buffer(conn, dev, N, x);
    hipd_buffer_t by = float_buffer(conn, dev, N, y);
    uint32_t grid[3] = {blocks_for(N, 64), 1, 1}, block[3] = {64, 1, 1};
    hipd_args_t *args = args_new();
    hipd_info_t *info = NULL;

    OK(conn, hipd_kernel_info(conn, ka, &info));
    ck_assert_str_eq(info_str(info, "name"), "axpy<float>");
    hipd_info_free(info);

    /* x *= 3 */
    hipd_args_buffer(args, bx, 0);
    hipd_args_f32(args, 3.0f);
    hipd_args_i32(args, N);
    OK(conn, hipd_kernel_launch(conn, ks, grid, block, 0, 0, args));
    /* y = 0.5 * x + y */
    hipd_args_clear(args);
    hipd_args_f32(args, 0.5f);
    hipd_args_buffer(args, bx, 0);
    hipd_args_buffer(args, by, 0);
    hipd_args_i32(args, N);
    OK(conn, hipd_kernel_launch(conn, ka, grid, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, by, 0, out, N * sizeof(float)));
    for (int i = 0; i < N; i++) {
      float want = 0.5f * (3.0f * x[i]) + y[i];
      ck_assert_msg(out[i] == want, "device %d: y[%d] = %g, expected %g", dev,
                    i, out[i], want);
    }
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bx));
    OK(conn, hipd_mem_free(conn, by));
    OK(conn, hipd_kernel_destroy(conn, ks));
    OK(conn, hipd_kernel_destroy(conn, ka));
  }
  free(x);
  free(y);
  free(out);
  hipd_close(conn);
}
END_TEST

/* run_source: compile, launch and wait in one call, on the current
 * device; and the languages. */
START_TEST(test_run_source)
{
  enum { N = 3000 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  float *a = xmalloc(N * sizeof(float)), *b = xmalloc(N * sizeof(float));
  float *c = xmalloc(N * sizeof(float));

  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = 0.25f * (float)i;
  }
  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t ba = float_buffer(conn, dev, N, a);
    hipd_buffer_t bb = float_buffer(conn, dev, N, b);
    hipd_buffer_t bc = float_buffer(conn, dev, N, NULL);
    uint32_t block[3] = {256, 1, 1}, grid[3] = {blocks_for(N, 256), 1, 1};
    hipd_args_t *args = args_new();
    hipd_info_t *langs = NULL;

    OK(conn, hipd_supported_source_langs(conn, dev, &langs));
    ck_assert_msg(info_has_str(langs, "", "hip"),
                  "device %d: \"hip\" is not a supported language", dev);
    hipd_info_free(langs);

    OK(conn, hipd_device_set_current(conn, dev));
    hipd_args_buffer(args, ba, 0);
    hipd_args_buffer(args, bb, 0);
    hipd_args_buffer(args, bc, 0);
    hipd_args_i32(args, N);
    OK(conn, hipd_run_source(conn, VECADD_SRC, "hip", "vecadd", block, grid, 0,
                             args));
    /* run_source returns once the kernel has run. */
    OK(conn, hipd_mem_read(conn, bc, 0, c, N * sizeof(float)));
    for (int i = 0; i < N; i++)
      ck_assert_msg(c[i] == a[i] + b[i], "device %d: c[%d] = %g", dev, i, c[i]);

    EXPECT(conn,
           hipd_run_source(conn, VECADD_SRC, "opencl", "vecadd", block, grid, 0,
                           args),
           HIPD_ELANG);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "opencl"));
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, ba));
    OK(conn, hipd_mem_free(conn, bb));
    OK(conn, hipd_mem_free(conn, bc));
  }
  dev = -1;
  {
    hipd_info_t *langs = NULL;
    OK(conn, hipd_supported_source_langs(conn, HIPD_DEVICE_CURRENT, &langs));
    ck_assert(info_has_str(langs, "", "hip"));
    hipd_info_free(langs);
  }
  EXPECT(conn, hipd_execute_direct(conn), HIPD_ENOTSUP);
  free(a);
  free(b);
  free(c);
  hipd_close(conn);
}
END_TEST

/* ---------------------------------------------------------------- errors */

/* A compile error is HIPD_ECOMPILE with the compiler's log, whole. */
START_TEST(test_compile_errors)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  char *many;
  size_t len = 0, cap = 64 * 1024;
  char ident[301];

  /* Forty errors with long names: a log well over 4 KiB. */
  memset(ident, 'q', sizeof(ident) - 1);
  ident[sizeof(ident) - 1] = '\0';
  many = xmalloc(cap);
  len += (size_t)snprintf(many + len, cap - len,
                          "extern \"C\" __global__ void many(int *p)\n{\n");
  for (int i = 0; i < 40; i++)
    len += (size_t)snprintf(many + len, cap - len,
                            "  p[%d] = undeclared_%s_%d;\n", i, ident, i);
  snprintf(many + len, cap - len, "}\n");

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = 1;
    hipd_info_t *info = (hipd_info_t *)1;
    const char *msg;

    EXPECT(conn,
           hipd_kernel_compile_cached(conn, dev, BROKEN_SRC, "broken", NULL, &k,
                                      &info),
           HIPD_ECOMPILE);
    ck_assert_uint_eq(k, 0);
    ck_assert_ptr_null(info);
    msg = hipd_last_error(conn);
    ck_assert_msg(names_line_3(msg),
                  "device %d: the log does not name line 3: %s", dev, msg);
    ck_assert_msg(strstr(msg, "this_name_is_not_declared") != NULL,
                  "device %d: the log does not quote the error: %s", dev, msg);
    /* Not cached: the same again fails the same way. */
    EXPECT(conn,
           hipd_kernel_compile(conn, dev, BROKEN_SRC, "broken", NULL, &k, NULL),
           HIPD_ECOMPILE);
    ck_assert(names_line_3(hipd_last_error(conn)));

    EXPECT(conn,
           hipd_kernel_compile_cached(conn, dev, many, "many", NULL, &k, NULL),
           HIPD_ECOMPILE);
    msg = hipd_last_error(conn);
    ck_assert_msg(strlen(msg) > 4096 + 512,
                  "device %d: a log of only %zu bytes came back", dev,
                  strlen(msg));
    ck_assert(names_line_3(msg));
    ck_assert_ptr_nonnull(strstr(msg, "undeclared_qqq"));

    /* The session goes on. */
    k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    vecadd_run(conn, dev, k, 100, 0);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  free(many);
  hipd_close(conn);
}
END_TEST

/* Launch geometry past the device's limits is HIPD_ELIMIT, checked before
 * anything runs. */
START_TEST(test_launch_limits)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    int64_t max_threads = device_cap(conn, dev, "max_threads_per_block");
    int64_t max_x = device_cap(conn, dev, "max_block_dims.0");
    int64_t max_z = device_cap(conn, dev, "max_block_dims.2");
    int64_t max_gy = device_cap(conn, dev, "max_grid_dims.1");
    int64_t shared_max = device_cap(conn, dev, "shared_mem_per_block");
    hipd_buffer_t b = float_buffer(conn, dev, 16, NULL);
    hipd_args_t *args = args_new();
    uint32_t grid[3], block[3];

    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_i32(args, 16);
#define LAUNCH_FAILS(g0, g1, g2, b0, b1, b2, sh)                               \
  do {                                                                         \
    grid[0] = (g0), grid[1] = (g1), grid[2] = (g2);                            \
    block[0] = (b0), block[1] = (b1), block[2] = (b2);                         \
    EXPECT(conn, hipd_kernel_launch(conn, k, grid, block, (sh), 0, args),      \
           HIPD_ELIMIT);                                                       \
  } while (0)
    ck_assert_int_lt(max_x, 2048);
    LAUNCH_FAILS(1, 1, 1, 2048, 1, 1, 0);
    LAUNCH_FAILS(1, 1, 1, 1, 1, (uint32_t)max_z + 1, 0);
    /* Each dimension within its limit, their product past the block's. */
    if (2 * max_x > max_threads)
      LAUNCH_FAILS(1, 1, 1, (uint32_t)max_x, 1, 2, 0);
    ck_assert_int_le(max_x, max_threads);
    if (max_gy < UINT32_MAX)
      LAUNCH_FAILS(1, (uint32_t)max_gy + 1, 1, 1, 1, 1, 0);
    if (shared_max < UINT32_MAX)
      LAUNCH_FAILS(1, 1, 1, 1, 1, 1, (uint32_t)shared_max + 1);
    LAUNCH_FAILS(0, 1, 1, 1, 1, 1, 0);
    LAUNCH_FAILS(1, 1, 1, 1, 0, 1, 0);
    LAUNCH_FAILS(1, 1, 0, 1, 1, 1, 0);
    LAUNCH_FAILS(1, 1, 1, 0, 0, 0, 0);
#undef LAUNCH_FAILS
    /* At the limits it runs. */
    if (shared_max > 0 && shared_max < UINT32_MAX) {
      block[0] = block[1] = block[2] = 1;
      grid[0] = grid[1] = grid[2] = 1;
      OK(conn, hipd_kernel_launch(conn, k, grid, block, (uint32_t)shared_max, 0,
                                  args));
    }
    block[0] = (uint32_t)max_x;
    block[1] = block[2] = 1;
    grid[0] = grid[1] = grid[2] = 1;
    OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args));
    vecadd_run(conn, dev, k, 50, 0);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, b));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* Where the daemon knows a kernel's declaration (the CPU device), the
 * arguments are checked against it. A GPU module does not say, so there a
 * mismatched launch is undefined: not tested. */
START_TEST(test_signature)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev, checked = 0;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile(conn, dev, MIX_SRC, "mix", &info);
    hipd_buffer_t bout, biout;
    hipd_args_t *args = args_new();
    int known = hipd_info_len(info, "params") >= 0;

    hipd_info_free(info);
    if (device_is_cpu(conn, dev))
      ck_assert_msg(known, "device %d: the CPU device must know params", dev);
    if (!known) {
      OK(conn, hipd_kernel_destroy(conn, k));
      hipd_args_free(args);
      continue;
    }
    checked++;
    OK(conn, hipd_mem_alloc(conn, dev, 4, "float64", &bout));
    OK(conn, hipd_mem_alloc(conn, dev, 3, "int64", &biout));
#define MIX_ARGS(A, B, C, D)                                                   \
  do {                                                                         \
    hipd_args_clear(args);                                                     \
    A;                                                                         \
    B;                                                                         \
    C;                                                                         \
    D;                                                                         \
    hipd_args_buffer(args, bout, 0);                                           \
    hipd_args_buffer(args, biout, 0);                                          \
  } while (0)
    /* Too few, too many. */
    hipd_args_clear(args);
    hipd_args_f32(args, 1);
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "6"));
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    hipd_args_i32(args, 5);
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, NULL),
           HIPD_ESIGNATURE);
    /* A double for the float, a float for the double. */
    MIX_ARGS(hipd_args_f64(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "float"));
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f32(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    /* Integers of the wrong width, a buffer for a scalar, a scalar for a
     * pointer. */
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i32(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i64(args, 4));
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    MIX_ARGS(hipd_args_buffer(args, bout, 0), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    hipd_args_clear(args);
    hipd_args_f32(args, 1);
    hipd_args_f64(args, 2);
    hipd_args_i64(args, 3);
    hipd_args_i32(args, 4);
    hipd_args_i64(args, 5);
    hipd_args_buffer(args, biout, 0);
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args),
           HIPD_ESIGNATURE);
    /* And right, it runs. */
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args));
#undef MIX_ARGS
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bout));
    OK(conn, hipd_mem_free(conn, biout));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  ck_assert_int_ge(checked, 2);
  hipd_close(conn);
}
END_TEST

/* The argument list itself: at most 256. */
START_TEST(test_args_limits)
{
  hipd_args_t *args = args_new();

  for (int i = 0; i < 256; i++)
    ck_assert_int_eq(hipd_args_i32(args, i), 0);
  ck_assert_int_eq(hipd_args_i32(args, 0), HIPD_ETOOMANY);
  ck_assert_int_eq(hipd_args_f64(args, 0), HIPD_ETOOMANY);
  hipd_args_clear(args);
  ck_assert_int_eq(hipd_args_f64(args, 0), 0);
  hipd_args_free(args);
  ck_assert_int_eq(hipd_args_i32(NULL, 0), HIPD_EINVAL);
  hipd_args_free(NULL);
}
END_TEST

/* Raw device addresses: accepted inside this session's buffers on the
 * kernel's device, refused anywhere else. */
START_TEST(test_raw_pointers)
{
  enum { N = 256, OFF = 16 };
  hipd_conn_t *conn = connect_to(shared), *other = connect_to(shared);
  int n = device_count(conn), dev;
  float a[N], b[N], c[N];

  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = (float)(1000 + i);
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    hipd_buffer_t ba = float_buffer(conn, dev, N, a);
    hipd_buffer_t bb = float_buffer(conn, dev, N, b);
    hipd_buffer_t bc = float_buffer(conn, dev, N, NULL);
    hipd_buffer_t theirs = 0, elsewhere = 0;
    hipd_stream_t their_stream = 0;
    uint64_t pa, pc, ptheirs;
    hipd_info_t *info = NULL;
    hipd_args_t *args = args_new();
    uint32_t grid[3] = {blocks_for(N, 64), 1, 1}, block[3] = {64, 1, 1};
    int odev = (dev + 1) % n;

    OK(conn, hipd_mem_info(conn, ba, &info));
    pa = info_uint(info, "device_ptr");
    hipd_info_free(info);
    OK(conn, hipd_mem_info(conn, bc, &info));
    pc = info_uint(info, "device_ptr");
    hipd_info_free(info);
    ck_assert_uint_ne(pa, 0);

    /* c[i] = a[i + OFF] + b[i] through raw addresses and offsets. */
    hipd_args_ptr(args, pa + OFF * sizeof(float));
    hipd_args_buffer(args, bb, 0);
    hipd_args_ptr(args, pc);
    hipd_args_i32(args, N - OFF);
    OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bc, 0, c, sizeof(c)));
    for (int i = 0; i < N - OFF; i++)
      ck_assert_msg(c[i] == a[i + OFF] + b[i], "device %d: c[%d] = %g", dev, i,
                    c[i]);
    for (int i = N - OFF; i < N; i++)
      ck_assert(c[i] == 0.0f);
    /* A buffer with an offset does the same. */
    hipd_args_clear(args);
    hipd_args_buffer(args, ba, OFF * sizeof(float));
    hipd_args_buffer(args, bb, OFF * sizeof(float));
    hipd_args_buffer(args, bc, OFF * sizeof(float));
    hipd_args_i32(args, N - OFF);
    OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bc, 0, c, sizeof(c)));
    for (int i = OFF; i < N; i++)
      ck_assert(c[i] == a[i] + b[i]);

#define ONE_BAD(ARG0, want)                                                    \
  do {                                                                         \
    hipd_args_clear(args);                                                     \
    ARG0;                                                                      \
    hipd_args_buffer(args, bb, 0);                                             \
    hipd_args_buffer(args, bc, 0);                                             \
    hipd_args_i32(args, N);                                                    \
    EXPECT(conn, hipd_kernel_launch(conn, k, grid, block, 0, 0, args), want);  \
  } while (0)
    /* Nowhere near a buffer. */
    ONE_BAD(hipd_args_ptr(args, 4096), HIPD_EPERM);
    ONE_BAD(hipd_args_ptr(args, 0), HIPD_EPERM);
    /* Another session's buffer, on the same device. */
    OK(other, hipd_mem_alloc(other, dev, N, "float32", &theirs));
    OK(other, hipd_mem_info(other, theirs, &info));
    ptheirs = info_uint(info, "device_ptr");
    hipd_info_free(info);
    ONE_BAD(hipd_args_ptr(args, ptheirs), HIPD_EPERM);
    ONE_BAD(hipd_args_ptr(args, ptheirs + 64), HIPD_EPERM);
    /* Their handle is not ours either. */
    ONE_BAD(hipd_args_buffer(args, theirs, 0), HIPD_EFOREIGN);
    /* Our buffer on another device. */
    OK(conn, hipd_mem_alloc(conn, odev, N, "float32", &elsewhere));
    ONE_BAD(hipd_args_buffer(args, elsewhere, 0), HIPD_EINVAL);
    OK(conn, hipd_mem_info(conn, elsewhere, &info));
    ONE_BAD(hipd_args_ptr(args, info_uint(info, "device_ptr")), HIPD_EPERM);
    hipd_info_free(info);
    /* Past the end of ours. */
    ONE_BAD(hipd_args_buffer(args, ba, N * sizeof(float) + 1), HIPD_ERANGE);
#undef ONE_BAD
    /* A stream of another device. */
    OK(conn, hipd_stream_default(conn, odev, &their_stream));
    hipd_args_clear(args);
    hipd_args_buffer(args, ba, 0);
    hipd_args_buffer(args, bb, 0);
    hipd_args_buffer(args, bc, 0);
    hipd_args_i32(args, N);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, grid, block, 0, their_stream, args),
           HIPD_EINVAL);

    /* Nothing was written by the refused launches. */
    OK(conn, hipd_mem_read(conn, bc, 0, c, sizeof(c)));
    for (int i = OFF; i < N; i++)
      ck_assert(c[i] == a[i] + b[i]);
    OK(other, hipd_mem_free(other, theirs));
    OK(conn, hipd_mem_free(conn, elsewhere));
    OK(conn, hipd_mem_free(conn, ba));
    OK(conn, hipd_mem_free(conn, bb));
    OK(conn, hipd_mem_free(conn, bc));
    /* A freed buffer's address is no longer ours. */
    hipd_args_clear(args);
    hipd_args_ptr(args, pa);
    hipd_args_ptr(args, pa);
    hipd_args_ptr(args, pa);
    hipd_args_i32(args, 1);
    EXPECT(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, 0, args), HIPD_EPERM);
    hipd_args_free(args);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(other);
  hipd_close(conn);
}
END_TEST

/* Kernel handles of one module: destroying one leaves the other working;
 * a destroyed one is stale. */
START_TEST(test_destroy)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k1 = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    hipd_kernel_t k2 = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    hipd_info_t *info = NULL;
    hipd_args_t *args = args_new();

    ck_assert_uint_ne(k1, k2);
    OK(conn, hipd_kernel_destroy(conn, k1));
    vecadd_run(conn, dev, k2, 500, 0);
    hipd_args_i32(args, 0);
    EXPECT(conn, hipd_kernel_launch(conn, k1, ONE, ONE, 0, 0, args),
           HIPD_ESTALE);
    EXPECT(conn, hipd_kernel_info(conn, k1, &info), HIPD_ESTALE);
    EXPECT(conn, hipd_kernel_destroy(conn, k1), HIPD_ESTALE);
    /* Launches queued just before a destroy still run. */
    {
      hipd_kernel_t k3 = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
      hipd_buffer_t b = float_buffer(conn, dev, 1, NULL);
      float one = 1.0f, v = 0;
      hipd_call_t *call = NULL;
      OK(conn, hipd_mem_write(conn, b, 0, &one, sizeof(one)));
      hipd_args_clear(args);
      hipd_args_buffer(args, b, 0);
      hipd_args_buffer(args, b, 0);
      hipd_args_buffer(args, b, 0);
      hipd_args_i32(args, 1);
      OK(conn, hipd_kernel_launch_begin(conn, k3, ONE, ONE, 0, 0, args, &call));
      OK(conn, hipd_kernel_destroy(conn, k3));
      OK(conn, hipd_wait(call));
      OK(conn, hipd_device_synchronize(conn, dev));
      OK(conn, hipd_mem_read(conn, b, 0, &v, sizeof(v)));
      ck_assert(v == 2.0f);
      OK(conn, hipd_mem_free(conn, b));
    }
    vecadd_run(conn, dev, k2, 10, 0);
    OK(conn, hipd_kernel_destroy(conn, k2));
    /* Not a kernel handle at all. */
    EXPECT(conn, hipd_kernel_launch(conn, 0, ONE, ONE, 0, 0, args),
           HIPD_EHANDLE);
    hipd_args_free(args);
  }
  hipd_close(conn);
}
END_TEST

/* compile_for: compile for an architecture without a device. */
START_TEST(test_compile_for_host)
{
  hipd_conn_t *conn = connect_to(shared);
  int dev = first_cpu_device(conn);
  hipd_info_t *info = NULL;
  char arch[64];
  uint64_t h = 0;

  ck_assert_int_ge(dev, 0);
  OK(conn, hipd_device_get(conn, dev, &info));
  snprintf(arch, sizeof(arch), "%s", info_str(info, "arch"));
  hipd_info_free(info);
  ck_assert_msg(strncmp(arch, "host", 4) == 0, "CPU arch %s", arch);

  OK(conn,
     hipd_kernel_compile_for(conn, arch, VECADD_SRC, "vecadd", NULL, 1, &info));
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  ck_assert_uint_eq(strlen(info_str(info, "key")), 64);
  /* No kernel: nothing was loaded. */
  ck_assert_int_eq(hipd_info_uint(info, "kernel", &h), HIPD_EHANDLETYPE);
  hipd_info_free(info);
  /* And then loading it on the device is a cache hit. */
  {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", &info);
    ck_assert_str_eq(info_str(info, "cache"), "memory");
    hipd_info_free(info);
    vecadd_run(conn, dev, k, 64, 0);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  /* Options reach the compiler, and are part of the key. */
  {
    static const char src[] =
        "extern \"C\" __global__ void axb(const float *a, float *b)\n"
        "{\n"
        "  b[threadIdx.x] += FACTOR * a[threadIdx.x];\n"
        "}\n";
    const char *const opts[] = {"-DFACTOR=3", "-O2", NULL};
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
    uint32_t block[3] = {4, 1, 1};
    hipd_buffer_t ba = float_buffer(conn, dev, 4, a);
    hipd_buffer_t bb = float_buffer(conn, dev, 4, b);
    hipd_args_t *args = args_new();
    hipd_kernel_t k = 0;

    EXPECT(conn,
           hipd_kernel_compile_cached(conn, dev, src, "axb", NULL, &k, NULL),
           HIPD_ECOMPILE);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "FACTOR"));
    OK(conn, hipd_kernel_compile_cached(conn, dev, src, "axb", opts, &k, NULL));
    hipd_args_buffer(args, ba, 0);
    hipd_args_buffer(args, bb, 0);
    OK(conn, hipd_kernel_launch(conn, k, ONE, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bb, 0, b, sizeof(b)));
    for (int i = 0; i < 4; i++)
      ck_assert(b[i] == 1 + 3 * a[i]);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, ba));
    OK(conn, hipd_mem_free(conn, bb));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  OK(conn,
     hipd_kernel_compile_for(conn, arch, VECADD_SRC, "vecadd", NULL, 1, NULL));
  EXPECT(
      conn,
      hipd_kernel_compile_for(conn, arch, BROKEN_SRC, "broken", NULL, 1, &info),
      HIPD_ECOMPILE);
  ck_assert(names_line_3(hipd_last_error(conn)));
  EXPECT(conn,
         hipd_kernel_compile_for(conn, "no-such-arch", VECADD_SRC, "vecadd",
                                 NULL, 1, &info),
         HIPD_ENOTSUP);
  EXPECT(
      conn,
      hipd_kernel_compile_for(conn, NULL, VECADD_SRC, "vecadd", NULL, 1, &info),
      HIPD_EINVAL);
  hipd_close(conn);
}
END_TEST

/* hiprtc compiles for AMD GPUs without one: the daemon of an AMD build
 * takes gfx targets on any host. */
START_TEST(test_compile_for_amd)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  int dev = -1;

  OK(conn, hipd_daemon_info(conn, &info));
  if (!info_has_str(info, "features", "hip-amd")) {
    printf("check_kernels: this hipd is not built for AMD HIP (no hip-amd "
           "feature): compile_for gfx90a not tested\n");
    hipd_info_free(info);
    hipd_close(conn);
    return;
  }
  hipd_info_free(info);
  OK(conn, hipd_kernel_compile_for(conn, "gfx90a", VECADD_SRC, "vecadd", NULL,
                                   1, &info));
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  ck_assert_uint_eq(strlen(info_str(info, "key")), 64);
  hipd_info_free(info);
  /* C++ names through hiprtc's name expressions. */
  OK(conn, hipd_kernel_compile_for(conn, "gfx90a", CXX_SRC, "axpy<float>", NULL,
                                   1, &info));
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  hipd_info_free(info);
  EXPECT(conn,
         hipd_kernel_compile_for(conn, "gfx90a", BROKEN_SRC, "broken", NULL, 1,
                                 &info),
         HIPD_ECOMPILE);
  ck_assert_msg(names_line_3(hipd_last_error(conn)),
                "the log does not name line 3: %s", hipd_last_error(conn));
  ck_assert_ptr_nonnull(
      strstr(hipd_last_error(conn), "this_name_is_not_declared"));
  hipd_close(conn);
}
END_TEST

/* ---------------------------------------------------------------- crashes */

/* A second session working on the same device meanwhile. */
typedef struct {
  const char *socket;
  int dev;
  atomic_int stop;
  int rounds;
  int failures;
  char error[512];
} bystander_t;

static void *bystander_main(void *arg)
{
  bystander_t *b = arg;
  hipd_conn_t *conn = NULL;
  hipd_kernel_t k = 0;
  enum { N = 512 };
  float a[N], out[N];
  hipd_buffer_t ba = 0, bc = 0;
  hipd_args_t *args = hipd_args_new();
  uint32_t grid[3] = {N / 64, 1, 1}, block[3] = {64, 1, 1};
  int rc;

  for (int i = 0; i < N; i++)
    a[i] = (float)i;
  if ((rc = hipd_connect(b->socket, &conn)) != 0 ||
      (rc = hipd_kernel_compile_cached(conn, b->dev, VECADD_SRC, "vecadd", NULL,
                                       &k, NULL)) != 0 ||
      (rc = hipd_mem_alloc(conn, b->dev, N, "float32", &ba)) != 0 ||
      (rc = hipd_mem_alloc(conn, b->dev, N, "float32", &bc)) != 0 ||
      (rc = hipd_mem_write(conn, ba, 0, a, sizeof(a))) != 0) {
    b->failures++;
    snprintf(b->error, sizeof(b->error), "set-up: %s: %s", hipd_err_name(rc),
             conn ? hipd_last_error(conn) : hipd_last_error(NULL));
    goto out;
  }
  hipd_set_timeout(conn, 120000);
  hipd_args_buffer(args, ba, 0);
  hipd_args_buffer(args, ba, 0);
  hipd_args_buffer(args, bc, 0);
  hipd_args_i32(args, N);
  /* At least a few rounds, and on until told to stop. */
  while (b->rounds < 3 || !atomic_load(&b->stop)) {
    memset(out, 0, sizeof(out));
    if ((rc = hipd_mem_memset(conn, bc, 0, sizeof(out), 0)) != 0 ||
        (rc = hipd_kernel_launch(conn, k, grid, block, 0, 0, args)) != 0 ||
        (rc = hipd_mem_read(conn, bc, 0, out, sizeof(out))) != 0) {
      b->failures++;
      snprintf(b->error, sizeof(b->error), "round %d: %s: %s", b->rounds,
               hipd_err_name(rc), hipd_last_error(conn));
      break;
    }
    for (int i = 0; i < N; i++)
      if (out[i] != 2.0f * a[i]) {
        b->failures++;
        snprintf(b->error, sizeof(b->error), "round %d: out[%d] = %g",
                 b->rounds, i, out[i]);
        break;
      }
    b->rounds++;
  }
out:
  hipd_args_free(args);
  hipd_close(conn);
  return NULL;
}

/* A kernel that writes through NULL on the CPU device: its launch fails
 * with HIPD_ELAUNCH naming SIGSEGV; the session's buffers and kernels go
 * on working, and another session working meanwhile sees nothing. GPU
 * devices are skipped: a fault there poisons the device context, which is
 * a test of its own. */
START_TEST(test_crash_cpu)
{
  enum { N = 256 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev, tested = 0;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t kc, kv;
    hipd_buffer_t bp, keep;
    int p[N];
    float kept[64], back[64];
    uint32_t grid[3] = {N / 64, 1, 1}, block[3] = {64, 1, 1};
    hipd_args_t *args = args_new();
    bystander_t by = {.socket = shared->socket, .dev = dev};
    pthread_t thread;

    if (!device_is_cpu(conn, dev)) {
      hipd_args_free(args);
      continue;
    }
    tested++;
    kc = compile(conn, dev, CRASH_SRC, "crash", NULL);
    kv = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    for (int i = 0; i < 64; i++)
      kept[i] = (float)i * 3.0f;
    keep = float_buffer(conn, dev, 64, kept);
    OK(conn, hipd_mem_alloc(conn, dev, N, "int32", &bp));
    OK(conn, hipd_mem_memset(conn, bp, 0, sizeof(p), 0));
    /* Harmless first: no thread is chosen. */
    hipd_args_buffer(args, bp, 0);
    hipd_args_i32(args, -1);
    hipd_args_i64(args, 0);
    OK(conn, hipd_kernel_launch(conn, kc, grid, block, 0, 0, args));
    OK(conn, hipd_mem_read(conn, bp, 0, p, sizeof(p)));
    for (int i = 0; i < N; i++)
      ck_assert_int_eq(p[i], 1);

    ck_assert_int_eq(pthread_create(&thread, NULL, bystander_main, &by), 0);
    for (int round = 0; round < 2; round++) {
      hipd_args_clear(args);
      hipd_args_buffer(args, bp, 0);
      hipd_args_i32(args, 100 + round);
      hipd_args_i64(args, 0);
      EXPECT(conn, hipd_kernel_launch(conn, kc, grid, block, 0, 0, args),
             HIPD_ELAUNCH);
      ck_assert_msg(strstr(hipd_last_error(conn), "SIGSEGV") != NULL,
                    "device %d: the crash is not named: %s", dev,
                    hipd_last_error(conn));
      /* The same session goes on: its buffers kept their contents, its
       * kernels run. */
      OK(conn, hipd_device_synchronize(conn, dev));
      OK(conn, hipd_mem_read(conn, keep, 0, back, sizeof(back)));
      ck_assert(memcmp(back, kept, sizeof(back)) == 0);
      vecadd_run(conn, dev, kv, 300, 0);
      OK(conn, hipd_mem_memset(conn, bp, 0, sizeof(p), 0));
      hipd_args_clear(args);
      hipd_args_buffer(args, bp, 0);
      hipd_args_i32(args, -1);
      hipd_args_i64(args, 0);
      OK(conn, hipd_kernel_launch(conn, kc, grid, block, 0, 0, args));
      OK(conn, hipd_mem_read(conn, bp, 0, p, sizeof(p)));
      for (int i = 0; i < N; i++)
        ck_assert_int_eq(p[i], 1);
    }
    atomic_store(&by.stop, 1);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_msg(by.failures == 0, "device %d: the other session failed: %s",
                  dev, by.error);
    ck_assert_int_ge(by.rounds, 3);

    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bp));
    OK(conn, hipd_mem_free(conn, keep));
    OK(conn, hipd_kernel_destroy(conn, kc));
    OK(conn, hipd_kernel_destroy(conn, kv));
  }
  ck_assert_int_ge(tested, 2);
  hipd_close(conn);
}
END_TEST

/* The forked client: kernels and buffers on every device and launches in
 * flight, then it says so on @p fd and waits to be killed. Never returns;
 * no check calls here. */
static void killed_child(const char *path, int fd)
{
  hipd_conn_t *conn = NULL;
  hipd_args_t *args = hipd_args_new();
  char ok = 'R';
  int n = 0;

  if (args == NULL || hipd_connect(path, &conn) != 0 ||
      hipd_device_count(conn, &n) != 0)
    ok = 'E';
  for (int dev = 0; ok == 'R' && dev < n; dev++) {
    hipd_kernel_t k = 0;
    hipd_buffer_t b = 0;
    hipd_call_t *call = NULL;
    uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
    if (hipd_kernel_compile_cached(conn, dev, VECADD_SRC, "vecadd", NULL, &k,
                                   NULL) != 0 ||
        hipd_mem_alloc(conn, dev, 64 * 256, "float32", &b) != 0) {
      ok = 'E';
      break;
    }
    hipd_args_clear(args);
    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_i32(args, 64 * 256);
    /* Left in flight as it dies. */
    for (int i = 0; i < 8; i++)
      if (hipd_kernel_launch_begin(conn, k, grid, block, 0, 0, args, &call) !=
          0)
        ok = 'E';
  }
  if (write(fd, &ok, 1) != 1)
    _exit(2);
  for (;;)
    pause();
}

/* A client killed with SIGKILL while holding kernels: the daemon cleans up
 * and serves on. */
START_TEST(test_killed_session)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev = -1, fds[2], status;
  struct pollfd pfd;
  char ready = 0;
  pid_t child;
  int64_t sessions = -1;
  long long deadline;

  ck_assert_int_eq(pipe(fds), 0);
  child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    close(fds[0]);
    killed_child(shared->socket, fds[1]);
  }
  close(fds[1]);
  pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
  ck_assert_msg(poll(&pfd, 1, 120000) == 1, "the client never got ready");
  ck_assert_int_eq(read(fds[0], &ready, 1), 1);
  close(fds[0]);
  ck_assert_int_eq(kill(child, SIGKILL), 0);
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(ready == 'R', "the client failed to set up");

  deadline = harness_now_ms() + 20000;
  for (;;) {
    hipd_info_t *info = NULL;
    OK(conn, hipd_daemon_info(conn, &info));
    sessions = info_int(info, "sessions");
    hipd_info_free(info);
    if (sessions == 1 || harness_now_ms() > deadline)
      break;
    harness_sleep_ms(10);
  }
  ck_assert_int_eq(sessions, 1);
  ck_assert_int_eq(kill(shared->pid, 0), 0);
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    vecadd_run(conn, dev, k, 2000, 0);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------------------ cache */

/* A source no cache has seen: @p base with a unique comment. */
static char *fresh_source(const char *base, const char *tag)
{
  struct timespec ts;
  char *s;

  clock_gettime(CLOCK_REALTIME, &ts);
  ck_assert_int_gt(asprintf(&s, "%s// %s %d %lld.%09ld\n", base, tag,
                            (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec),
                   0);
  return s;
}

/* The cache.stats counter @p name. */
static int64_t stat_of(hipd_conn_t *conn, const char *name)
{
  hipd_info_t *info = NULL;
  int dev = -1;
  int64_t v;

  OK(conn, hipd_cache_stats(conn, &info));
  v = info_int(info, name);
  hipd_info_free(info);
  return v;
}

/* compile_cached on device 0 and check where the binary came from; the
 * kernel must run. */
static void cached_run(hipd_conn_t *conn, const char *src, int refresh,
                       const char *want)
{
  hipd_kernel_t k = 0;
  hipd_info_t *info = NULL;
  int dev = 0;

  if (refresh)
    OK(conn, hipd_kernel_compile(conn, dev, src, "vecadd", NULL, &k, &info));
  else
    OK(conn,
       hipd_kernel_compile_cached(conn, dev, src, "vecadd", NULL, &k, &info));
  ck_assert_msg(strcmp(info_str(info, "cache"), want) == 0,
                "cache says %s, expected %s", info_str(info, "cache"), want);
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  hipd_info_free(info);
  vecadd_run(conn, dev, k, 1000, 0);
  OK(conn, hipd_kernel_destroy(conn, k));
}

/* Memory, then disk across a restart; a corrupted entry is detected,
 * dropped and rebuilt; kernel.compile replaces; cache.clear empties. */
START_TEST(test_cache_persistence)
{
  char dir[256], entry[512];
  char *src = fresh_source(VECADD_SRC, "persistence");
  harness_daemon_t *d;
  hipd_conn_t *conn;
  int64_t misses;
  int dev = 0;

  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  cached_run(conn, src, 0, "miss");
  cached_run(conn, src, 0, "memory");
  ck_assert_int_eq(stat_of(conn, "misses"), 1);
  ck_assert_int_ge(stat_of(conn, "hits_memory"), 1);
  ck_assert_int_ge(stat_of(conn, "disk_entries"), 1);
  hipd_close(conn);
  stop_daemon(d);
  ck_assert_int_eq(cache_entries(dir, entry, sizeof(entry)), 1);

  /* Across a restart, from disk. */
  d = start_with_cache(dir);
  conn = connect_to(d);
  cached_run(conn, src, 0, "disk");
  ck_assert_int_ge(stat_of(conn, "hits_disk"), 1);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  hipd_close(conn);
  stop_daemon(d);

  /* A flipped byte in the middle of the entry. */
  {
    int fd = open(entry, O_RDWR);
    struct stat st;
    unsigned char c;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_eq(pread(fd, &c, 1, st.st_size / 2), 1);
    c ^= 0x5a;
    ck_assert_int_eq(pwrite(fd, &c, 1, st.st_size / 2), 1);
    close(fd);
  }
  d = start_with_cache(dir);
  conn = connect_to(d);
  cached_run(conn, src, 0, "miss");
  ck_assert_int_ge(stat_of(conn, "corrupt"), 1);
  ck_assert_int_eq(stat_of(conn, "misses"), 1);
  cached_run(conn, src, 0, "memory");

  /* kernel.compile compiles anew even when cached. */
  cached_run(conn, src, 1, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), 2);
  cached_run(conn, src, 0, "memory");

  /* cache.clear empties it. */
  OK(conn, hipd_cache_clear(conn));
  ck_assert_int_eq(stat_of(conn, "entries"), 0);
  misses = stat_of(conn, "misses");
  cached_run(conn, src, 0, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), misses + 1);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

typedef struct {
  const char *socket;
  const char *src;
  pthread_barrier_t *go;
  int rc;
  char cache[16];
  char error[512];
} racer_t;

static void *racer_main(void *arg)
{
  racer_t *r = arg;
  hipd_conn_t *conn = NULL;
  hipd_info_t *info = NULL;
  hipd_kernel_t k = 0;
  const char *s = NULL;

  r->rc = hipd_connect(r->socket, &conn);
  pthread_barrier_wait(r->go);
  if (r->rc != 0) {
    snprintf(r->error, sizeof(r->error), "%s", hipd_last_error(NULL));
    return NULL;
  }
  hipd_set_timeout(conn, 120000);
  r->rc =
      hipd_kernel_compile_cached(conn, 0, r->src, "vecadd", NULL, &k, &info);
  if (r->rc != 0)
    snprintf(r->error, sizeof(r->error), "%s", hipd_last_error(conn));
  else if (hipd_info_str(info, "cache", &s, NULL) == 0)
    snprintf(r->cache, sizeof(r->cache), "%s", s);
  hipd_info_free(info);
  hipd_close(conn);
  return NULL;
}

/* Two sessions compile one new source at once: it is compiled once. */
START_TEST(test_cache_concurrent)
{
  char dir[256];
  char *src = fresh_source(VECADD_SRC, "concurrent");
  harness_daemon_t *d;
  hipd_conn_t *conn;
  pthread_barrier_t go;
  racer_t r[2];
  pthread_t t[2];
  int64_t misses, waits;
  int miss = 0;

  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  misses = stat_of(conn, "misses");
  waits = stat_of(conn, "waits");
  pthread_barrier_init(&go, NULL, 2);
  for (int i = 0; i < 2; i++) {
    r[i] = (racer_t){.socket = d->socket, .src = src, .go = &go};
    ck_assert_int_eq(pthread_create(&t[i], NULL, racer_main, &r[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_msg(r[i].rc == 0, "racer %d: %s: %s", i, hipd_err_name(r[i].rc),
                  r[i].error);
    if (strcmp(r[i].cache, "miss") == 0)
      miss++;
    else
      ck_assert_msg(strcmp(r[i].cache, "waited") == 0 ||
                        strcmp(r[i].cache, "memory") == 0,
                    "racer %d: cache %s", i, r[i].cache);
  }
  pthread_barrier_destroy(&go);
  ck_assert_int_eq(miss, 1);
  ck_assert_int_eq(stat_of(conn, "misses"), misses + 1);
  if (strcmp(r[0].cache, "waited") == 0 || strcmp(r[1].cache, "waited") == 0)
    ck_assert_int_eq(stat_of(conn, "waits"), waits + 1);
  cached_run(conn, src, 0, "memory");
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* ------------------------------------------------- cache authentication */

/* A kernel an attacker would like to see run as vecadd: it subtracts. */
static const char EVIL_SRC[] =
    "extern \"C\" __global__ void vecadd(const float *a, const float *b,\n"
    "                                    float *c, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    c[i] = a[i] - b[i];\n"
    "}\n";

enum { ENTRY_HEADER = 88 }; /* the documented header before the payload */

static unsigned char *file_read(const char *path, size_t *len)
{
  struct stat st;
  unsigned char *buf;
  int fd = open(path, O_RDONLY);

  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(fstat(fd, &st), 0);
  buf = xmalloc((size_t)st.st_size + 1);
  ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
  *len = (size_t)st.st_size;
  return buf;
}

static void file_write(const char *path, const void *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

/* SHA-256 of @p len bytes, by sha256sum(1) (this program does not link
 * libcrypto). */
static void sha256_of(const void *data, size_t len, unsigned char out[32])
{
  const char *tmp = harness_temp_path("payload");
  char cmd[400], hex[65] = "";
  FILE *f;

  file_write(tmp, data, len);
  snprintf(cmd, sizeof(cmd), "sha256sum < '%s'", tmp);
  f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fscanf(f, "%64s", hex), 1);
  pclose(f);
  for (int i = 0; i < 32; i++)
    ck_assert_int_eq(sscanf(hex + 2 * i, "%2hhx", &out[i]), 1);
  unlink(tmp);
}

/* Compile @p src through the cache of a daemon on @p dir and stop it;
 * @return the one entry it wrote, in @p entry. */
static void cache_one(const char *dir, const char *src, char *entry,
                      size_t size)
{
  harness_daemon_t *d = start_with_cache(dir);
  hipd_conn_t *conn = connect_to(d);
  int dev = 0;
  hipd_kernel_t k = compile(conn, dev, src, "vecadd", NULL);

  OK(conn, hipd_kernel_destroy(conn, k));
  hipd_close(conn);
  stop_daemon(d);
  ck_assert_int_eq(cache_entries(dir, entry, size), 1);
}

/* A restarted daemon on @p dir: compile_cached of @p src must compile
 * anew (cache "miss"), run correctly, and log and count the entry it
 * found as failing authentication. */
static void expect_discarded(const char *dir, const char *src)
{
  harness_daemon_t *d = start_with_cache(dir);
  hipd_conn_t *conn = connect_to(d);

  cached_run(conn, src, 0, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), 1);
  ck_assert_int_eq(stat_of(conn, "hits_disk"), 0);
  ck_assert_int_eq(stat_of(conn, "corrupt"), 1);
  ck_assert_int_eq(stat_of(conn, "auth_failures"), 1);
  ck_assert_msg(harness_log_wait(d, "failed authentication: discarded", 5000),
                "the log does not say the entry failed authentication");
  hipd_close(conn);
  stop_daemon(d);
}

/* A binary planted at the path of vecadd's entry, behind a well-formed
 * version-1 header with a valid checksum (all an attacker who could write
 * the directory needs for the old format), is never run: the daemon
 * compiles vecadd again and the launch adds. */
START_TEST(test_cache_planted_entry)
{
  char dir[256], evil_dir[256], entry[512], evil[512];
  char *src = fresh_source(VECADD_SRC, "planted");
  char *bad = fresh_source(EVIL_SRC, "planted");
  unsigned char *genuine, *payload, *file;
  size_t glen, plen;
  uint32_t hsize = ENTRY_HEADER, reserved = 0;
  uint64_t len64;

  cache_dir_make(dir, sizeof(dir));
  cache_dir_make(evil_dir, sizeof(evil_dir));
  cache_one(evil_dir, bad, evil, sizeof(evil));
  cache_one(dir, src, entry, sizeof(entry));
  genuine = file_read(entry, &glen);
  payload = file_read(evil, &plen);
  ck_assert_uint_gt(plen, ENTRY_HEADER);
  plen -= ENTRY_HEADER;
  len64 = plen;
  file = xmalloc(ENTRY_HEADER + plen);
  memcpy(file, "HIPDKC\0\1", 8);
  memcpy(file + 8, &hsize, 4);
  memcpy(file + 12, &reserved, 4);
  memcpy(file + 16, genuine + 16, 32); /* vecadd's key */
  memcpy(file + 48, &len64, 8);
  memcpy(file + ENTRY_HEADER, payload + ENTRY_HEADER, plen);
  sha256_of(file + ENTRY_HEADER, plen, file + 56);
  file_write(entry, file, ENTRY_HEADER + plen);
  expect_discarded(dir, src);
  free(file);
  free(payload);
  free(genuine);
  cache_dir_remove(evil_dir);
  cache_dir_remove(dir);
  free(bad);
  free(src);
}
END_TEST

/* A genuine entry with one payload byte changed is discarded. */
START_TEST(test_cache_changed_entry)
{
  char dir[256], entry[512];
  char *src = fresh_source(VECADD_SRC, "changed");
  unsigned char *file;
  size_t len;

  cache_dir_make(dir, sizeof(dir));
  cache_one(dir, src, entry, sizeof(entry));
  file = file_read(entry, &len);
  ck_assert_uint_gt(len, ENTRY_HEADER + 16);
  file[ENTRY_HEADER + (len - ENTRY_HEADER) / 2] ^= 0x01;
  /* What version 1 would have accepted: the checksum made to match. */
  sha256_of(file + ENTRY_HEADER, len - ENTRY_HEADER, file + 56);
  file_write(entry, file, len);
  free(file);
  expect_discarded(dir, src);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* An entry copied from the cache of a daemon with another key (another
 * directory) is discarded. */
START_TEST(test_cache_other_key)
{
  char dir[256], other[256], entry[512], there[512];
  char *src = fresh_source(VECADD_SRC, "other-key");
  unsigned char *file;
  const char *name;
  size_t len;

  cache_dir_make(dir, sizeof(dir));
  cache_dir_make(other, sizeof(other));
  cache_one(other, src, there, sizeof(there));
  /* The first daemon's own key, then the foreign entry beside it. */
  stop_daemon(start_with_cache(dir));
  file = file_read(there, &len);
  name = strrchr(there, '/') + 1;
  snprintf(entry, sizeof(entry), "%s/%s", dir, name);
  file_write(entry, file, len);
  free(file);
  expect_discarded(dir, src);
  cache_dir_remove(other);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* The key is made at first start, 0600 and hipd's, and is the same after
 * a restart, where the entry is a disk hit. */
START_TEST(test_cache_key_reused)
{
  char dir[256], entry[512], key[300];
  char *src = fresh_source(VECADD_SRC, "key");
  unsigned char *k1, *k2;
  size_t n1, n2;
  harness_daemon_t *d;
  hipd_conn_t *conn;
  struct stat st;

  cache_dir_make(dir, sizeof(dir));
  cache_one(dir, src, entry, sizeof(entry));
  snprintf(key, sizeof(key), "%s/.hmac-key", dir);
  ck_assert_msg(lstat(key, &st) == 0, "%s: %s", key, strerror(errno));
  ck_assert(S_ISREG(st.st_mode));
  ck_assert_uint_eq(st.st_mode & 07777, 0600);
  ck_assert_uint_eq(st.st_uid, geteuid());
  ck_assert_int_eq(st.st_size, 32);
  k1 = file_read(key, &n1);
  d = start_with_cache(dir);
  conn = connect_to(d);
  cached_run(conn, src, 0, "disk");
  ck_assert_int_eq(stat_of(conn, "hits_disk"), 1);
  ck_assert_int_eq(stat_of(conn, "auth_failures"), 0);
  hipd_close(conn);
  stop_daemon(d);
  k2 = file_read(key, &n2);
  ck_assert_mem_eq(k1, k2, 32);
  free(k1);
  free(k2);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* hipd on @p dir must refuse to start and say @p want. */
static void start_refused(const char *dir, const char *want)
{
  const char *args[] = {"--cpu-devices", "2", "--cache-dir", dir, NULL};
  harness_daemon_t *d = harness_spawn(NULL, args);
  int code;

  ck_assert_ptr_nonnull(d);
  code = harness_wait_exit(d, 20000);
  if (code == -1 || !harness_log_contains(d, want))
    harness_log_dump(d);
  ck_assert_msg(code > 0, "hipd on %s: exit %d, expected a refusal", dir, code);
  ck_assert_msg(harness_log_contains(d, want), "the log does not say \"%s\"",
                want);
  harness_free(d);
}

/* A cache directory someone else could have written makes hipd refuse to
 * start, and say why. */
START_TEST(test_cache_dir_refused)
{
  char dir[256], link[300], want[600], key[300];

  cache_dir_make(dir, sizeof(dir));
  ck_assert_int_eq(chmod(dir, 0777), 0);
  snprintf(want, sizeof(want),
           "cache directory %s is writable by its group or others (mode 0777)",
           dir);
  start_refused(dir, want);
  ck_assert_int_eq(chmod(dir, 0700), 0);

  snprintf(link, sizeof(link), "%s-link", dir);
  ck_assert_int_eq(symlink(dir, link), 0);
  snprintf(want, sizeof(want), "cache directory %s is a symbolic link", link);
  start_refused(link, want);
  unlink(link);

  stop_daemon(start_with_cache(dir)); /* makes the key */
  snprintf(key, sizeof(key), "%s/.hmac-key", dir);
  ck_assert_int_eq(chmod(key, 0644), 0);
  snprintf(want, sizeof(want),
           "cache key file %s is readable or writable by its group or others "
           "(mode 0644)",
           key);
  start_refused(dir, want);
  ck_assert_int_eq(chmod(key, 0600), 0);

  if (geteuid() == 0) {
    ck_assert_int_eq(chown(dir, 4242, (gid_t)-1), 0);
    snprintf(want, sizeof(want),
             "cache directory %s is owned by uid 4242, not hipd's uid 0", dir);
    start_refused(dir, want);
    ck_assert_int_eq(chown(dir, 0, (gid_t)-1), 0);
  } else {
    fprintf(stderr, "check_kernels: not root: a cache directory of another "
                    "uid is not tested\n");
  }
  stop_daemon(start_with_cache(dir)); /* all is well again */
  cache_dir_remove(dir);
}
END_TEST

/* ------------------------------------------------------------------ suite */

/* A CPU-device kernel that never ends is stopped at --cpu-kernel-timeout:
 * the launch fails with ETIMEDOUT and the device goes on. */
static const char *SPIN_SRC =
    "extern \"C\" __global__ void spin(volatile int *flag, int *out)\n"
    "{\n"
    "  long long n = 0;\n"
    "  while (*flag)\n"
    "    n++;\n"
    "  out[0] = (int)n;\n"
    "}\n";

START_TEST(test_cpu_kernel_timeout)
{
  char dir[256];
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_buffer_t flag, out;
  hipd_kernel_t k;
  hipd_args_t *args = args_new();
  uint32_t one[3] = {1, 1, 1};
  int dev, on = 1, rc;

  cache_dir_make(dir, sizeof(dir));
  d = harness_start("--cpu-devices", "2", "--cache-dir", dir,
                    "--cpu-kernel-timeout", "700", NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  k = compile(conn, dev, SPIN_SRC, "spin", NULL);
  OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &flag));
  OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &out));
  OK(conn, hipd_mem_write(conn, flag, 0, &on, sizeof(on)));
  hipd_args_buffer(args, flag, 0);
  hipd_args_buffer(args, out, 0);
  rc = hipd_kernel_launch(conn, k, one, one, 0, 0, args);
  if (rc == 0)
    rc = hipd_device_synchronize(conn, dev);
  ck_assert_msg(rc == HIPD_ETIMEDOUT, "spinning kernel: %s (%s)",
                hipd_err_name(rc), hipd_last_error(conn));
  /* The device goes on: the same buffers, a launch that ends. */
  on = 0;
  OK(conn, hipd_mem_write(conn, flag, 0, &on, sizeof(on)));
  OK(conn, hipd_kernel_launch(conn, k, one, one, 0, 0, args));
  OK(conn, hipd_device_synchronize(conn, dev));
  hipd_args_free(args);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
}
END_TEST

static Suite *kernels_suite(void)
{
  Suite *s = suite_create("kernels");
  TCase *tc;

  /* The first TCase compiles most kernels (about a second each on the CPU
   * device); the later ones find them in the shared cache directory. */
  tc = tcase_create("run");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_vecadd);
  tcase_add_test(tc, test_reduce);
  tcase_add_test(tc, test_histogram);
  tcase_add_test(tc, test_grids);
  tcase_add_test(tc, test_dynamic_shared);
  tcase_add_test(tc, test_scalar_args);
  tcase_add_test(tc, test_cxx_names);
  tcase_add_test(tc, test_run_source);
  suite_add_tcase(s, tc);

  tc = tcase_create("errors");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_compile_errors);
  tcase_add_test(tc, test_launch_limits);
  tcase_add_test(tc, test_signature);
  tcase_add_test(tc, test_args_limits);
  tcase_add_test(tc, test_raw_pointers);
  tcase_add_test(tc, test_destroy);
  suite_add_tcase(s, tc);

  tc = tcase_create("compile_for");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_compile_for_host);
  tcase_add_test(tc, test_compile_for_amd);
  suite_add_tcase(s, tc);

  tc = tcase_create("crashes");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_crash_cpu);
  tcase_add_test(tc, test_killed_session);
  tcase_add_test(tc, test_cpu_kernel_timeout);
  suite_add_tcase(s, tc);

  tc = tcase_create("cache");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_cache_persistence);
  tcase_add_test(tc, test_cache_concurrent);
  suite_add_tcase(s, tc);

  tc = tcase_create("cache_authentication");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_cache_planted_entry);
  tcase_add_test(tc, test_cache_changed_entry);
  tcase_add_test(tc, test_cache_other_key);
  tcase_add_test(tc, test_cache_key_reused);
  tcase_add_test(tc, test_cache_dir_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr;
  int failed;

  harness_init("check_kernels");
  {
    const char *root = getenv("HIPD_TEST_TMP");
    snprintf(shared_cache, sizeof(shared_cache), "%s/kcache-XXXXXX",
             root != NULL && root[0] != '\0' ? root : "/tmp");
    if (mkdtemp(shared_cache) == NULL) {
      fprintf(stderr, "mkdtemp %s: %s\n", shared_cache, strerror(errno));
      return EXIT_FAILURE;
    }
  }
  sr = srunner_create(kernels_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cache_dir_remove(shared_cache);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
