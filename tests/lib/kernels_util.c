/* SPDX-License-Identifier: MIT */
/* tests/lib/kernels_util.c: the kernels and helpers of
 * tests/lib/kernels_util.h. */
#include "config.h"

#include "kernels_util.h"

/* The daemon of the TCases that share one (started by an unchecked
 * fixture, in check's runner process), and the cache directory all such
 * daemons use. */
harness_daemon_t *shared;
char shared_cache[256];

/* --------------------------------------------------------------- kernels */

const char VECADD_SRC[] =
    "extern \"C\" __global__ void vecadd(const float *a, const float *b,\n"
    "                                    float *c, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    c[i] = a[i] + b[i];\n"
    "}\n";

/* A tree reduction in shared memory with barriers: one partial sum per
 * block, and the total through an atomic. */
const char REDUCE_SRC[] =
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
const char HIST_SRC[] =
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
const char INDEX_SRC[] =
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
const char DYN_SRC[] =
    "extern \"C\" __global__ void dyn_reverse(const float *in, float *out)\n"
    "{\n"
    "  extern __shared__ float s[];\n"
    "  unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;\n"
    "  s[t] = in[base + t];\n"
    "  __syncthreads();\n"
    "  out[base + t] = s[blockDim.x - 1 - t];\n"
    "}\n";

/* Scalars of every width: each must arrive whole. */
const char MIX_SRC[] =
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
const char CXX_SRC[] =
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
const char CRASH_SRC[] =
    "extern \"C\" __global__ void crash(int *p, int which, long long bad)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i == which)\n"
    "    *(int *)bad = 42;\n"
    "  p[i] = 1;\n"
    "}\n";

/* An error on line 3. */
const char BROKEN_SRC[] = "extern \"C\" __global__ void broken(float *x)\n"
                          "{\n"
                          "  x[0] = this_name_is_not_declared;\n"
                          "}\n";

/* ---------------------------------------------------------------- checks */

/* Does a compiler log point at line 3? GCC, clang and hiprtc write
 * "kernel.hip:3:10: error", NVRTC "kernel.hip(3): error". */
int names_line_3(const char *log)
{
  return strstr(log, ":3:") != NULL || strstr(log, "(3): ") != NULL;
}

/* A capability of device @p dev ("capabilities.<name>"). */
int64_t device_cap(hipd_conn_t *conn, int dev, const char *name)
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
int first_cpu_device(hipd_conn_t *conn)
{
  int n = device_count(conn);

  for (int dev = 0; dev < n; dev++)
    if (device_is_cpu(conn, dev))
      return dev;
  return -1;
}

const uint32_t ONE[3] = {1, 1, 1};

/* Compile @p name of @p src through the cache on @p dev; *@p info (if not
 * NULL) gets the record. */
hipd_kernel_t compile(hipd_conn_t *conn, int dev, const char *src,
                      const char *name, hipd_info_t **info)
{
  hipd_kernel_t k = HIPD_KERNEL_NULL;

  OK(conn, hipd_kernel_compile_cached(conn, dev, src, name, NULL, &k, info));
  ck_assert_uint_ne(hipd_kernel_id(k), 0);
  return k;
}

/* A buffer of @p n floats on @p dev holding @p data (NULL: zeros). */
hipd_buffer_t float_buffer(hipd_conn_t *conn, int dev, size_t n,
                           const float *data)
{
  hipd_buffer_t b = HIPD_BUFFER_NULL;

  OK(conn, hipd_mem_alloc(conn, dev, n, "float32", &b));
  if (data != NULL)
    OK(conn, hipd_mem_write(conn, b, 0, data, n * sizeof(float)));
  else
    OK(conn, hipd_mem_memset(conn, b, 0, n * sizeof(float), 0));
  return b;
}

/* Vector add with kernel @p k on @p dev (its buffers fresh), on @p stream
 * (0: the default one); checks every element. */
void vecadd_run(hipd_conn_t *conn, int dev, hipd_kernel_t k, int n,
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
  if (hipd_stream_id(stream) != 0)
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
void cache_dir_make(char *buf, size_t size)
{
  ck_assert_msg(testutil_tmpdir(buf, size, "kcache") == 0, "mkdtemp %s: %s",
                buf, strerror(errno));
}

void cache_dir_remove(const char *dir)
{
  testutil_rmtree(dir);
}

/* The number of entries (*.hkc) in @p dir; the last one's path in
 * @p path. */
int cache_entries(const char *dir, char *path, size_t size)
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

harness_daemon_t *start_with_cache(const char *dir)
{
  return testutil_start_cached(dir);
}

harness_daemon_t *start_with_cache_warm(const char *dir, const char *warm)
{
  harness_daemon_t *d = harness_start("--cpu-devices", "2", "--cache-dir", dir,
                                      "--cache-warm", warm, NULL);

  ck_assert_msg(d != NULL, "hipd did not start");
  return d;
}

void stop_daemon(harness_daemon_t *d)
{
  stop_checked(&d);
}

void shared_setup(void)
{
  shared = start_with_cache(shared_cache);
}

void shared_teardown(void)
{
  stop_checked(&shared);
}

/* main() of a check_kernels_* program: the harness, a private shared cache
 * directory for the suite's shared daemon, the suite run, and cleanup.
 * @return main's exit status. */
int kernels_main(const char *name, Suite *(*make_suite)(void))
{
  return testutil_main_cached(name, "kcache", shared_cache,
                              sizeof(shared_cache), make_suite);
}
