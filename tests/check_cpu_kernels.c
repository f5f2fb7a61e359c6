/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_kernels.c: the CPU device's kernel runtime, end to end:
 * daemon/drivers/cpu/cpu_compile.c with the real C++ compiler and
 * hipd_cpu_device.h, and cpu_runner_client.c driving the real
 * hipd-cpu-runner process. Buffers are memfds of their own (as the
 * daemon's zero-copy buffers), and in the "arena" case the CPU device's
 * arena (cpu_arena.c) given to the runner as a chunk.
 *
 * Environment (set by `make check`): HIPD_CPU_RUNNER (the runner binary),
 * HIPD_CPU_HEADER (the device header in the source tree). */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "drivers/cpu/cpu_arena.h"
#include "drivers/cpu/cpu_compile.h"
#include "drivers/cpu/cpu_runner_client.h"
#include "drivers/driver.h"
#include "hipd.h"
#include "run.h"

/* One module with most test kernels, compiled once per test case. */
static const char kernels_src[] =
    "#include <hip/hip_runtime.h>\n"
    "\n"
    "extern \"C\" __global__ void vadd(const float *a, const float *b,\n"
    "                                 float *c, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    c[i] = a[i] + b[i];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void reduce_sum(const int *in, int *out, int n)\n"
    "{\n"
    "  __shared__ int s[256];\n"
    "  unsigned t = threadIdx.x;\n"
    "  unsigned i = blockIdx.x * blockDim.x + t;\n"
    "  s[t] = i < (unsigned)n ? in[i] : 0;\n"
    "  __syncthreads();\n"
    "  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {\n"
    "    if (t < k)\n"
    "      s[t] += s[t + k];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (t == 0)\n"
    "    out[blockIdx.x] = s[0];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void histogram(const unsigned char *data,\n"
    "                                      unsigned *bins, int n)\n"
    "{\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += blockDim.x * gridDim.x)\n"
    "    atomicAdd(&bins[data[i]], 1u);\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void atomics_misc(int *iv, unsigned *uv,\n"
    "    unsigned long long *ull, long long *ll, float *f, double *d)\n"
    "{\n"
    "  int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  atomicMax(&iv[0], t);\n"
    "  atomicMin(&iv[1], -t);\n"
    "  atomicSub(&iv[2], 1);\n"
    "  int old;\n"
    "  do {\n"
    "    old = iv[3];\n"
    "  } while (atomicCAS(&iv[3], old, old + 2) != old);\n"
    "  atomicExch(&iv[4], 7);\n"
    "  atomicOr(&uv[0], 1u << (t % 32));\n"
    "  atomicInc(&uv[1], 9u);\n"
    "  atomicDec(&uv[2], 1000u);\n"
    "  atomicAnd(&uv[3], ~(1u << (t % 32)));\n"
    "  atomicXor(&uv[4], 1u);\n"
    "  atomicAdd(&ull[0], 1ull << 33);\n"
    "  atomicMax(&ll[0], (long long)t << 35);\n"
    "  atomicAdd(&f[0], 0.5f);\n"
    "  atomicAdd(&d[0], 0.25);\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void grid2d(int *out, int width)\n"
    "{\n"
    "  int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  out[y * width + x] = x * 1000 + y;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void grid3d(int *out)\n"
    "{\n"
    "  int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  int z = blockIdx.z * blockDim.z + threadIdx.z;\n"
    "  int w = gridDim.x * blockDim.x, h = gridDim.y * blockDim.y;\n"
    "  out[(z * h + y) * w + x] = (x << 20) | (y << 10) | z;\n"
    "}\n"
    "\n"
    "/* dynamic shared memory, at namespace and at function scope */\n"
    "extern __shared__ int gsm[];\n"
    "\n"
    "extern \"C\" __global__ void reverse_dyn(float *d)\n"
    "{\n"
    "  extern __shared__ float s[];\n"
    "  int t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;\n"
    "  s[t] = d[base + t];\n"
    "  __syncthreads();\n"
    "  d[base + t] = s[n - 1 - t];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void global_dyn(int *out)\n"
    "{\n"
    "  gsm[threadIdx.x] = threadIdx.x * 3;\n"
    "  __syncthreads();\n"
    "  out[blockIdx.x * blockDim.x + threadIdx.x] =\n"
    "      gsm[blockDim.x - 1 - threadIdx.x];\n"
    "}\n"
    "\n"
    "template <class T> __global__ void sum_dyn(const T *in, T *out)\n"
    "{\n"
    "  extern __shared__ __align__(sizeof(T)) unsigned char smem[];\n"
    "  T *s = reinterpret_cast<T *>(smem);\n"
    "  unsigned t = threadIdx.x;\n"
    "  s[t] = in[blockIdx.x * blockDim.x + t];\n"
    "  __syncthreads();\n"
    "  if (t == 0) {\n"
    "    T acc = 0;\n"
    "    for (unsigned k = 0; k < blockDim.x; k++)\n"
    "      acc += s[k];\n"
    "    out[blockIdx.x] = acc;\n"
    "  }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void hip_dyn(int *out)\n"
    "{\n"
    "  HIP_DYNAMIC_SHARED(int, hs)\n"
    "  hs[hipThreadIdx_x] = hipThreadIdx_x * 2;\n"
    "  __syncthreads();\n"
    "  out[hipThreadIdx_x] = hs[hipBlockDim_x - 1 - hipThreadIdx_x];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void mixed(float a, double b, long long c, int "
    "d,\n"
    "                                  float *out, double *dout,\n"
    "                                  long long *lout)\n"
    "{\n"
    "  if (threadIdx.x == 0) {\n"
    "    out[0] = a * 2.0f;\n"
    "    dout[0] = b * 2.0 + d;\n"
    "    lout[0] = c + d;\n"
    "  }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void small_ints(signed char a, unsigned short b,\n"
    "    bool c, unsigned long long d, short e, unsigned char f,\n"
    "    double g, float h, long long *out, double *dout)\n"
    "{\n"
    "  out[0] = a;\n"
    "  out[1] = b;\n"
    "  out[2] = c;\n"
    "  out[3] = (long long)(d >> 1);\n"
    "  out[4] = e;\n"
    "  out[5] = f;\n"
    "  dout[0] = g;\n"
    "  dout[1] = h;\n"
    "}\n"
    "\n"
    "/* C++ linkage: mangled names */\n"
    "__global__ void scale(float *p, float f, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] = p[i] * f + rsqrtf(4.0f) * 0.0f + min(i, 0);\n"
    "}\n"
    "namespace ns {\n"
    "__global__ void fill(int *p, int v)\n"
    "{\n"
    "  p[threadIdx.x] = v + __popc(0xffu) - 8;\n"
    "}\n"
    "}\n"
    "template <class T> __global__ void axpy(T a, const T *x, T *y)\n"
    "{\n"
    "  y[threadIdx.x] += a * x[threadIdx.x];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void write_at(int *p, int which)\n"
    "{\n"
    "  if ((int)(blockIdx.x * blockDim.x + threadIdx.x) == which)\n"
    "    p[0] = 42;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void wait_flag(volatile int *flag, int *out)\n"
    "{\n"
    "  out[0] = 1;\n"
    "  while (flag[0] == 0)\n"
    "    __nanosleep(100000);\n"
    "  out[0] = 2;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void end_runner(int how)\n"
    "{\n"
    "  if (threadIdx.x == 1) {\n"
    "    if (how == 1)\n"
    "      abort();\n"
    "    if (how == 2)\n"
    "      exit(3);\n"
    "    if (how == 3)\n"
    "      for (;;)\n"
    "        __nanosleep(1000000);\n"
    "  }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void barrier_heavy(int *out, int iters)\n"
    "{\n"
    "  __shared__ int s[1024];\n"
    "  unsigned n = blockDim.x * blockDim.y * blockDim.z;\n"
    "  unsigned t = threadIdx.x +\n"
    "               blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "  int v = (int)t;\n"
    "  for (int k = 0; k < iters; k++) {\n"
    "    s[t] = v;\n"
    "    __syncthreads();\n"
    "    v = s[(t + 1) % n] + 1;\n"
    "    __syncthreads();\n"
    "  }\n"
    "  int c = __syncthreads_count(t % 3 == 0);\n"
    "  int a = __syncthreads_and(v >= iters);\n"
    "  int o = __syncthreads_or(t == 5);\n"
    "  int z = __syncthreads_or(0);\n"
    "  out[blockIdx.x * n + t] = v;\n"
    "  if (t == n - 1) {\n"
    "    int *r = out + gridDim.x * n + blockIdx.x * 4;\n"
    "    r[0] = c;\n"
    "    r[1] = a;\n"
    "    r[2] = o;\n"
    "    r[3] = z;\n"
    "  }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void early_exit(int *out, int n)\n"
    "{\n"
    "  __shared__ int s[256];\n"
    "  int t = threadIdx.x;\n"
    "  if (t >= n)\n"
    "    return;\n"
    "  s[t] = t * 5;\n"
    "  __syncthreads();\n"
    "  out[t] = s[n - 1 - t];\n"
    "}\n";

static const char *const kernel_names[] = {
    "vadd",           "reduce_sum",      "histogram",   "atomics_misc",
    "grid2d",         "grid3d",          "reverse_dyn", "global_dyn",
    "sum_dyn<float>", "sum_dyn<double>", "hip_dyn",     "mixed",
    "small_ints",     "scale",           "ns::fill",    "axpy<double>",
    "write_at",       "wait_flag",       "end_runner",  "barrier_heavy",
    "early_exit"};
#define NKERNELS (sizeof(kernel_names) / sizeof(kernel_names[0]))

static char *module_path; /* compiled once per test case */
static cpu_runner_t *runner;
static uint32_t module_id;
static hipd_err_t err;

/* ------------------------------------------------------------ fixtures */

static void compile_module(void)
{
  static char log[16384];
  int rc = cpu_compile(NULL, kernels_src, strlen(kernels_src), kernel_names,
                       NKERNELS, NULL, 0, &module_path, log, sizeof(log));
  if (rc != 0)
    fprintf(stderr, "compile failed (%d):\n%s\n", rc, log);
  ck_assert_int_eq(rc, 0);
  ck_assert_ptr_nonnull(module_path);
}

static void free_module(void)
{
  cpu_compile_free(module_path);
  module_path = NULL;
}

static void start_runner_cfg(const cpu_runner_cfg_t *cfg)
{
  int rc = cpu_runner_start(cfg, &runner, &err);
  if (rc != 0)
    fprintf(stderr, "runner: %s\n", err.msg);
  ck_assert_int_eq(rc, 0);
  rc = cpu_runner_load(runner, module_path, &module_id, &err);
  if (rc != 0)
    fprintf(stderr, "load: %s\n", err.msg);
  ck_assert_int_eq(rc, 0);
}

static void start_runner(void)
{
  start_runner_cfg(NULL);
}

static void stop_runner(void)
{
  cpu_runner_stop(runner);
  runner = NULL;
}

/* ------------------------------------------------------------- helpers */

/* A buffer of its own memfd, mapped into the runner with MAP (as the
 * daemon maps a client's shared memory for a zero-copy buffer). */
static drv_mem_t buf_new(size_t size)
{
  drv_mem_t m = {NULL, size, memfd_create("test-buffer", MFD_CLOEXEC)};

  ck_assert_int_ge(m.fd, 0);
  ck_assert_int_eq(ftruncate(m.fd, (off_t)size), 0);
  m.ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  ck_assert_ptr_ne(m.ptr, MAP_FAILED);
  ck_assert_int_eq(cpu_runner_map(runner, m.fd, m.ptr, m.size, &err), 0);
  return m;
}

static void buf_free(drv_mem_t *m)
{
  ck_assert_int_eq(cpu_runner_unmap(runner, m->ptr, &err), 0);
  munmap(m->ptr, m->size);
  close(m->fd);
  m->ptr = NULL;
  m->fd = -1;
}

static uint32_t kernel(const char *name, cpu_kernel_sig_t *sig)
{
  uint32_t id = 0;
  int rc = cpu_runner_kernel(runner, module_id, name, &id, sig, &err);
  if (rc != 0)
    fprintf(stderr, "kernel %s: %s\n", name, err.msg);
  ck_assert_int_eq(rc, 0);
  return id;
}

static cpu_arg_t P(const void *p)
{
  return (cpu_arg_t){.ptr = (uint64_t)(uintptr_t)p};
}

static cpu_arg_t I(int64_t v)
{
  return (cpu_arg_t){.i = v};
}

static cpu_arg_t U(uint64_t v)
{
  return (cpu_arg_t){.u = v};
}

static cpu_arg_t F(float v)
{
  cpu_arg_t a = {.u = 0};
  a.f32 = v;
  return a;
}

static cpu_arg_t D(double v)
{
  return (cpu_arg_t){.f64 = v};
}

static int launch(uint32_t k, uint32_t gx, uint32_t gy, uint32_t gz,
                  uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared,
                  const cpu_arg_t *args, uint32_t nargs)
{
  uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  int rc = cpu_runner_launch(runner, k, grid, block, shared, args, nargs, NULL,
                             &err);
  if (rc != 0)
    fprintf(stderr, "launch: %d %s\n", rc, err.msg);
  return rc;
}

/* -------------------------------------------------------- basic kernels */

START_TEST(test_vadd)
{
  const int n = 100003;
  drv_mem_t a = buf_new(n * sizeof(float)), b = buf_new(n * sizeof(float)),
            c = buf_new(n * sizeof(float));
  float *pa = a.ptr, *pb = b.ptr, *pc = c.ptr;
  cpu_kernel_sig_t sig;
  uint32_t k = kernel("vadd", &sig);

  ck_assert_uint_eq(sig.nargs, 4);
  ck_assert_uint_eq(sig.types[0], HIPD_CPU_T_PTR);
  ck_assert_uint_eq(sig.types[2], HIPD_CPU_T_PTR);
  ck_assert_uint_eq(sig.types[3], HIPD_CPU_T_I32);
  for (int i = 0; i < n; i++) {
    pa[i] = (float)i;
    pb[i] = 0.5f * (float)i;
  }
  cpu_arg_t args[] = {P(pa), P(pb), P(pc), I(n)};
  ck_assert_int_eq(launch(k, (n + 255) / 256, 1, 1, 256, 1, 1, 0, args, 4), 0);
  for (int i = 0; i < n; i++)
    ck_assert_float_eq(pc[i], 1.5f * (float)i);
  /* Looking it up again gives the same kernel. */
  ck_assert_uint_eq(kernel("vadd", NULL), k);
  buf_free(&a);
  buf_free(&b);
  buf_free(&c);
}
END_TEST

START_TEST(test_reduce_shared)
{
  const int n = 256 * 37 + 11, nb = (n + 255) / 256;
  drv_mem_t in = buf_new(n * sizeof(int)), out = buf_new(nb * sizeof(int));
  int *pi = in.ptr, *po = out.ptr;

  for (int i = 0; i < n; i++)
    pi[i] = i % 1000;
  cpu_arg_t args[] = {P(pi), P(po), I(n)};
  ck_assert_int_eq(
      launch(kernel("reduce_sum", NULL), nb, 1, 1, 256, 1, 1, 0, args, 3), 0);
  for (int b = 0; b < nb; b++) {
    int want = 0;
    for (int i = b * 256; i < (b + 1) * 256 && i < n; i++)
      want += pi[i];
    ck_assert_int_eq(po[b], want);
  }
  buf_free(&in);
  buf_free(&out);
}
END_TEST

START_TEST(test_histogram_atomics)
{
  const int n = 200000;
  drv_mem_t data = buf_new(n), bins = buf_new(256 * sizeof(unsigned));
  unsigned char *pd = data.ptr;
  unsigned *pb = bins.ptr, want[256] = {0};

  for (int i = 0; i < n; i++) {
    pd[i] = (unsigned char)((i * 2654435761u) >> 24);
    want[pd[i]]++;
  }
  cpu_arg_t args[] = {P(pd), P(pb), I(n)};
  ck_assert_int_eq(
      launch(kernel("histogram", NULL), 64, 1, 1, 128, 1, 1, 0, args, 3), 0);
  for (int i = 0; i < 256; i++)
    ck_assert_uint_eq(pb[i], want[i]);
  buf_free(&data);
  buf_free(&bins);
}
END_TEST

START_TEST(test_atomics_misc)
{
  const int nthreads = 4 * 64;
  drv_mem_t iv = buf_new(8 * sizeof(int)), uv = buf_new(8 * sizeof(unsigned)),
            ull = buf_new(8), ll = buf_new(8), f = buf_new(4), d = buf_new(8);
  int *pi = iv.ptr;
  unsigned *pu = uv.ptr;

  pi[1] = 5;
  pi[2] = 1000;
  pu[2] = 0;
  pu[3] = 0xffffffffu;
  cpu_arg_t args[] = {P(pi), P(pu), P(ull.ptr), P(ll.ptr), P(f.ptr), P(d.ptr)};
  ck_assert_int_eq(
      launch(kernel("atomics_misc", NULL), 4, 1, 1, 64, 1, 1, 0, args, 6), 0);
  ck_assert_int_eq(pi[0], nthreads - 1);
  ck_assert_int_eq(pi[1], -(nthreads - 1));
  ck_assert_int_eq(pi[2], 1000 - nthreads);
  ck_assert_int_eq(pi[3], 2 * nthreads);
  ck_assert_int_eq(pi[4], 7);
  ck_assert_uint_eq(pu[0], 0xffffffffu);
  ck_assert_uint_eq(pu[1], nthreads % 10);
  /* atomicDec from 0 with limit 1000: 0 -> 1000, then down by one. */
  ck_assert_uint_eq(pu[2], 1000 - (nthreads - 1));
  ck_assert_uint_eq(pu[3], 0);
  ck_assert_uint_eq(pu[4], 0); /* an even number of flips */
  ck_assert_uint_eq(*(unsigned long long *)ull.ptr,
                    (unsigned long long)nthreads << 33);
  ck_assert_int_eq(*(long long *)ll.ptr, (long long)(nthreads - 1) << 35);
  ck_assert_float_eq(*(float *)f.ptr, 0.5f * nthreads);
  ck_assert_double_eq(*(double *)d.ptr, 0.25 * nthreads);
  buf_free(&iv);
  buf_free(&uv);
  buf_free(&ull);
  buf_free(&ll);
  buf_free(&f);
  buf_free(&d);
}
END_TEST

START_TEST(test_grid_2d)
{
  const int bx = 8, by = 4, gx = 5, gy = 3, w = bx * gx, h = by * gy;
  drv_mem_t out = buf_new((size_t)w * h * sizeof(int));
  int *po = out.ptr;

  for (int i = 0; i < w * h; i++)
    po[i] = -1;
  cpu_arg_t args[] = {P(po), I(w)};
  ck_assert_int_eq(
      launch(kernel("grid2d", NULL), gx, gy, 1, bx, by, 1, 0, args, 2), 0);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      ck_assert_int_eq(po[y * w + x], x * 1000 + y);
  buf_free(&out);
}
END_TEST

START_TEST(test_grid_3d)
{
  const int bx = 4, by = 2, bz = 3, gx = 3, gy = 2, gz = 4;
  const int w = bx * gx, h = by * gy, dpt = bz * gz;
  drv_mem_t out = buf_new((size_t)w * h * dpt * sizeof(int));
  int *po = out.ptr;

  for (int i = 0; i < w * h * dpt; i++)
    po[i] = -1;
  cpu_arg_t args[] = {P(po)};
  ck_assert_int_eq(
      launch(kernel("grid3d", NULL), gx, gy, gz, bx, by, bz, 0, args, 1), 0);
  for (int z = 0; z < dpt; z++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        ck_assert_int_eq(po[(z * h + y) * w + x], (x << 20) | (y << 10) | z);
  buf_free(&out);
}
END_TEST

START_TEST(test_dynamic_shared)
{
  const int bs = 128, nb = 6, n = bs * nb;
  drv_mem_t d = buf_new(n * sizeof(float)), o = buf_new(n * sizeof(int));
  drv_mem_t fin = buf_new(n * sizeof(float)), fout = buf_new(nb * 8);
  drv_mem_t din = buf_new(n * sizeof(double));
  float *pd = d.ptr, *pf = fin.ptr;
  double *pdd = din.ptr;
  int *po = o.ptr;

  for (int i = 0; i < n; i++) {
    pd[i] = (float)i;
    pf[i] = 1.0f + (float)(i % 7);
    pdd[i] = 0.5 * i;
  }
  cpu_arg_t a1[] = {P(pd)};
  ck_assert_int_eq(launch(kernel("reverse_dyn", NULL), nb, 1, 1, bs, 1, 1,
                          bs * sizeof(float), a1, 1),
                   0);
  for (int b = 0; b < nb; b++)
    for (int t = 0; t < bs; t++)
      ck_assert_float_eq(pd[b * bs + t], (float)(b * bs + bs - 1 - t));

  cpu_arg_t a2[] = {P(po)};
  ck_assert_int_eq(launch(kernel("global_dyn", NULL), nb, 1, 1, bs, 1, 1,
                          bs * sizeof(int), a2, 1),
                   0);
  for (int b = 0; b < nb; b++)
    for (int t = 0; t < bs; t++)
      ck_assert_int_eq(po[b * bs + t], (bs - 1 - t) * 3);

  cpu_arg_t a3[] = {P(pf), P(fout.ptr)};
  ck_assert_int_eq(launch(kernel("sum_dyn<float>", NULL), nb, 1, 1, bs, 1, 1,
                          bs * sizeof(float), a3, 2),
                   0);
  for (int b = 0; b < nb; b++) {
    float want = 0;
    for (int t = 0; t < bs; t++)
      want += pf[b * bs + t];
    ck_assert_float_eq(((float *)fout.ptr)[b], want);
  }
  cpu_arg_t a4[] = {P(pdd), P(fout.ptr)};
  ck_assert_int_eq(launch(kernel("sum_dyn<double>", NULL), nb, 1, 1, bs, 1, 1,
                          bs * sizeof(double), a4, 2),
                   0);
  for (int b = 0; b < nb; b++) {
    double want = 0;
    for (int t = 0; t < bs; t++)
      want += pdd[b * bs + t];
    ck_assert_double_eq(((double *)fout.ptr)[b], want);
  }

  ck_assert_int_eq(launch(kernel("hip_dyn", NULL), 1, 1, 1, bs, 1, 1,
                          bs * sizeof(int), a2, 1),
                   0);
  for (int t = 0; t < bs; t++)
    ck_assert_int_eq(po[t], (bs - 1 - t) * 2);
  buf_free(&d);
  buf_free(&o);
  buf_free(&fin);
  buf_free(&fout);
  buf_free(&din);
}
END_TEST

/* --------------------------------------------------------- arguments */

START_TEST(test_mixed_scalars)
{
  drv_mem_t f = buf_new(4), d = buf_new(8), l = buf_new(8);
  cpu_kernel_sig_t sig;
  uint32_t k = kernel("mixed", &sig);
  static const uint8_t want[] = {HIPD_CPU_T_F32, HIPD_CPU_T_F64, HIPD_CPU_T_I64,
                                 HIPD_CPU_T_I32, HIPD_CPU_T_PTR, HIPD_CPU_T_PTR,
                                 HIPD_CPU_T_PTR};

  ck_assert_uint_eq(sig.nargs, 7);
  ck_assert_mem_eq(sig.types, want, sizeof(want));
  cpu_arg_t args[] = {F(1.25f), D(3.0e100), I(-(1LL << 40) - 5),
                      I(-7),    P(f.ptr),   P(d.ptr),
                      P(l.ptr)};
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 1, 0, args, 7), 0);
  ck_assert_float_eq(*(float *)f.ptr, 2.5f);
  ck_assert_double_eq(*(double *)d.ptr, 6.0e100 - 7);
  ck_assert_int_eq(*(long long *)l.ptr, -(1LL << 40) - 12);
  buf_free(&f);
  buf_free(&d);
  buf_free(&l);
}
END_TEST

START_TEST(test_small_scalars)
{
  drv_mem_t l = buf_new(6 * 8), d = buf_new(2 * 8);
  long long *pl = l.ptr;
  double *pd = d.ptr;
  cpu_kernel_sig_t sig;
  uint32_t k = kernel("small_ints", &sig);
  static const uint8_t want[] = {
      HIPD_CPU_T_I8,  HIPD_CPU_T_U16, HIPD_CPU_T_BOOL, HIPD_CPU_T_U64,
      HIPD_CPU_T_I16, HIPD_CPU_T_U8,  HIPD_CPU_T_F64,  HIPD_CPU_T_F32,
      HIPD_CPU_T_PTR, HIPD_CPU_T_PTR};

  ck_assert_uint_eq(sig.nargs, 10);
  ck_assert_mem_eq(sig.types, want, sizeof(want));
  /* Values wider than the declared type are narrowed as C would. */
  cpu_arg_t args[] = {I(-100),  U(65535),  U(5),    U(UINT64_MAX), I(-30000),
                      U(0x1ff), D(-0.125), F(3.5f), P(pl),         P(pd)};
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 1, 0, args, 10), 0);
  ck_assert_int_eq(pl[0], -100);
  ck_assert_int_eq(pl[1], 65535);
  ck_assert_int_eq(pl[2], 1);
  ck_assert_int_eq(pl[3], (long long)(UINT64_MAX >> 1));
  ck_assert_int_eq(pl[4], -30000);
  ck_assert_int_eq(pl[5], 0xff);
  ck_assert_double_eq(pd[0], -0.125);
  ck_assert_double_eq(pd[1], 3.5);
  buf_free(&l);
  buf_free(&d);
}
END_TEST

START_TEST(test_cxx_mangled)
{
  const int n = 300;
  drv_mem_t p = buf_new(n * sizeof(float)), q = buf_new(64 * sizeof(int));
  drv_mem_t x = buf_new(32 * 8), y = buf_new(32 * 8);
  float *pp = p.ptr;
  int *pq = q.ptr;
  double *px = x.ptr, *py = y.ptr;
  cpu_kernel_sig_t sig;

  for (int i = 0; i < n; i++)
    pp[i] = (float)i;
  uint32_t k = kernel("scale", &sig);
  ck_assert_uint_eq(sig.nargs, 3);
  ck_assert_uint_eq(sig.types[1], HIPD_CPU_T_F32);
  cpu_arg_t a1[] = {P(pp), F(-2.0f), I(n)};
  ck_assert_int_eq(launch(k, 3, 1, 1, 128, 1, 1, 0, a1, 3), 0);
  for (int i = 0; i < n; i++)
    ck_assert_float_eq(pp[i], -2.0f * (float)i);

  cpu_arg_t a2[] = {P(pq), I(1234)};
  ck_assert_int_eq(
      launch(kernel("ns::fill", NULL), 1, 1, 1, 64, 1, 1, 0, a2, 2), 0);
  for (int i = 0; i < 64; i++)
    ck_assert_int_eq(pq[i], 1234);

  for (int i = 0; i < 32; i++) {
    px[i] = i;
    py[i] = 1;
  }
  k = kernel("axpy<double>", &sig);
  ck_assert_uint_eq(sig.types[0], HIPD_CPU_T_F64);
  cpu_arg_t a3[] = {D(0.5), P(px), P(py)};
  ck_assert_int_eq(launch(k, 1, 1, 1, 32, 1, 1, 0, a3, 3), 0);
  for (int i = 0; i < 32; i++)
    ck_assert_double_eq(py[i], 1 + 0.5 * i);
  buf_free(&p);
  buf_free(&q);
  buf_free(&x);
  buf_free(&y);
}
END_TEST

START_TEST(test_unknown_kernel)
{
  uint32_t id;
  int rc =
      cpu_runner_kernel(runner, module_id, "not_compiled_in", &id, NULL, &err);
  ck_assert_int_eq(rc, HIPD_ENOKERNEL);
  ck_assert_ptr_nonnull(strstr(err.msg, "not_compiled_in"));
  rc = cpu_runner_kernel(runner, module_id + 100, "vadd", &id, NULL, &err);
  ck_assert_int_eq(rc, HIPD_ENOENT);
}
END_TEST

/* Two threads launching on one runner at once: requests are serialized. */
typedef struct {
  uint32_t k;
  float *a, *b, *c;
  int n, rounds, failures;
} vadd_job_t;

static void *vadd_thread(void *arg)
{
  vadd_job_t *j = arg;
  hipd_err_t e;

  for (int r = 0; r < j->rounds; r++) {
    uint32_t grid[3] = {(uint32_t)(j->n + 127) / 128, 1, 1};
    uint32_t block[3] = {128, 1, 1};
    for (int i = 0; i < j->n; i++)
      j->a[i] = (float)(r + i);
    cpu_arg_t args[] = {P(j->a), P(j->b), P(j->c), I(j->n)};
    if (cpu_runner_launch(runner, j->k, grid, block, 0, args, 4, NULL, &e) != 0)
      j->failures++;
    for (int i = 0; i < j->n; i++)
      if (j->c[i] != (float)(r + i) + j->b[i])
        j->failures++;
  }
  return NULL;
}

START_TEST(test_concurrent_launches)
{
  const int n = 5000;
  drv_mem_t m[6];
  vadd_job_t jobs[2];
  pthread_t th[2];
  uint32_t k = kernel("vadd", NULL);

  for (int i = 0; i < 6; i++)
    m[i] = buf_new(n * sizeof(float));
  for (int t = 0; t < 2; t++) {
    jobs[t] = (vadd_job_t){
        k, m[3 * t].ptr, m[3 * t + 1].ptr, m[3 * t + 2].ptr, n, 20, 0};
    for (int i = 0; i < n; i++)
      jobs[t].b[i] = (float)(t * 100000);
    ck_assert_int_eq(pthread_create(&th[t], NULL, vadd_thread, &jobs[t]), 0);
  }
  for (int t = 0; t < 2; t++) {
    pthread_join(th[t], NULL);
    ck_assert_int_eq(jobs[t].failures, 0);
  }
  for (int i = 0; i < 6; i++)
    buf_free(&m[i]);
}
END_TEST

/* ----------------------------------------------------------- barriers */

START_TEST(test_barrier_1024)
{
  const int n = 1024, nb = 6, iters = 50;
  drv_mem_t out = buf_new((size_t)(n * nb + 4 * nb) * sizeof(int));
  int *po = out.ptr;
  uint32_t k = kernel("barrier_heavy", NULL);

  cpu_arg_t args[] = {P(po), I(iters)};
  /* 1024 threads as 1024x1x1 and as 16x8x8. */
  for (int shape = 0; shape < 2; shape++) {
    memset(po, 0xff, out.size);
    if (shape == 0)
      ck_assert_int_eq(launch(k, nb, 1, 1, 1024, 1, 1, 0, args, 2), 0);
    else
      ck_assert_int_eq(launch(k, nb, 1, 1, 16, 8, 8, 0, args, 2), 0);
    for (int b = 0; b < nb; b++) {
      for (int t = 0; t < n; t++)
        ck_assert_int_eq(po[b * n + t], (t + iters) % n + iters);
      int *r = po + nb * n + b * 4;
      ck_assert_int_eq(r[0], (n + 2) / 3); /* t % 3 == 0 */
      ck_assert_int_eq(r[1], 1);
      ck_assert_int_eq(r[2], 1);
      ck_assert_int_eq(r[3], 0);
    }
  }
  buf_free(&out);
}
END_TEST

START_TEST(test_barrier_after_early_exit)
{
  drv_mem_t out = buf_new(256 * sizeof(int));
  int *po = out.ptr;

  cpu_arg_t args[] = {P(po), I(100)};
  ck_assert_int_eq(
      launch(kernel("early_exit", NULL), 1, 1, 1, 256, 1, 1, 0, args, 2), 0);
  for (int t = 0; t < 100; t++)
    ck_assert_int_eq(po[t], (99 - t) * 5);
  for (int t = 100; t < 256; t++)
    ck_assert_int_eq(po[t], 0);
  buf_free(&out);
}
END_TEST

/* ------------------------------------------------------------- limits */

START_TEST(test_launch_limits)
{
  drv_mem_t out = buf_new(4096);
  uint32_t k = kernel("write_at", NULL);
  cpu_arg_t args[] = {P(out.ptr), I(-1)};

  ck_assert_int_eq(launch(k, 1, 1, 1, 1025, 1, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_ptr_nonnull(strstr(err.msg, "1025"));
  ck_assert_int_eq(launch(k, 1, 1, 1, 64, 32, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_ptr_nonnull(strstr(err.msg, "2048 threads"));
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 65, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1025, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 1, 1, 1, 0, 1, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 0, 1, 1, 1, 1, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 1, 65536, 1, 1, 1, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 1, 1, 65536, 1, 1, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 1u << 31, 1, 1, 1, 1, 1, 0, args, 2), HIPD_ELIMIT);
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 1, 65537, args, 2), HIPD_ELIMIT);
  ck_assert_ptr_nonnull(strstr(err.msg, "65537"));
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 1, 0, args, 1), HIPD_ESIGNATURE);
  ck_assert_int_eq(launch(k + 1000, 1, 1, 1, 1, 1, 1, 0, args, 2),
                   HIPD_ENOKERNEL);
  /* At the limits it runs: 1024 threads, 64 KiB of dynamic shared memory. */
  ck_assert_int_eq(launch(k, 2, 1, 1, 1024, 1, 1, 65536, args, 2), 0);
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 64, 0, args, 2), 0);
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1024, 1, 0, args, 2), 0);
  buf_free(&out);
}
END_TEST

/* -------------------------------------------------------- containment */

START_TEST(test_crash_null_deref)
{
  const int n = 1000;
  drv_mem_t a = buf_new(n * sizeof(float)), b = buf_new(n * sizeof(float)),
            c = buf_new(n * sizeof(float));
  float *pa = a.ptr, *pb = b.ptr, *pc = c.ptr;
  uint32_t vadd = kernel("vadd", NULL), wr = kernel("write_at", NULL);
  int pid = cpu_runner_pid(runner);

  for (int i = 0; i < n; i++) {
    pa[i] = 1.0f;
    pb[i] = (float)i;
  }
  /* Thread 77 of the launch writes through a NULL pointer. */
  cpu_arg_t bad[] = {P(NULL), I(77)};
  ck_assert_int_eq(launch(wr, 4, 1, 1, 32, 1, 1, 0, bad, 2), HIPD_ELAUNCH);
  ck_assert_int_eq(err.code, HIPD_ELAUNCH);
  ck_assert_ptr_nonnull(strstr(err.msg, "kernel crashed on the CPU device"));
  ck_assert_ptr_nonnull(strstr(err.msg, "SIGSEGV (segmentation fault)"));
  ck_assert_uint_eq(cpu_runner_restarts(runner), 1);
  ck_assert_int_ne(cpu_runner_pid(runner), pid);
  ck_assert_int_gt(cpu_runner_pid(runner), 0);

  /* The same kernel ids and buffers work on the new runner. */
  cpu_arg_t args[] = {P(pa), P(pb), P(pc), I(n)};
  ck_assert_int_eq(launch(vadd, 4, 1, 1, 256, 1, 1, 0, args, 4), 0);
  for (int i = 0; i < n; i++)
    ck_assert_float_eq(pc[i], 1.0f + (float)i);
  cpu_arg_t good[] = {P(pc), I(77)};
  ck_assert_int_eq(launch(wr, 4, 1, 1, 32, 1, 1, 0, good, 2), 0);
  ck_assert_int_eq(*(int *)pc, 42);
  buf_free(&a);
  buf_free(&b);
  buf_free(&c);
}
END_TEST

START_TEST(test_abort_and_exit)
{
  drv_mem_t o = buf_new(4096);
  uint32_t k = kernel("end_runner", NULL), wr = kernel("write_at", NULL);
  cpu_arg_t how1[] = {I(1)}, how2[] = {I(2)}, ok[] = {P(o.ptr), I(0)};

  ck_assert_int_eq(launch(k, 1, 1, 1, 4, 1, 1, 0, how1, 1), HIPD_ELAUNCH);
  ck_assert_ptr_nonnull(strstr(err.msg, "SIGABRT"));
  ck_assert_int_eq(launch(k, 1, 1, 1, 4, 1, 1, 0, how2, 1), HIPD_ELAUNCH);
  ck_assert_ptr_nonnull(strstr(err.msg, "exit status 3"));
  ck_assert_uint_eq(cpu_runner_restarts(runner), 2);
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, ok, 2), 0);
  ck_assert_int_eq(*(int *)o.ptr, 42);
  buf_free(&o);
}
END_TEST

START_TEST(test_load_crash)
{
  /* A module whose constructor dereferences NULL (getenv of an unset
   * variable) crashes the runner while it loads. */
  static const char src[] =
      "static int boom =\n"
      "    *(volatile int *)getenv(\"HIPD_TEST_VARIABLE_NEVER_SET\");\n"
      "extern \"C\" __global__ void k(int *p) { p[0] = boom; }\n";
  const char *names[] = {"k"};
  char log[4096], *so = NULL;
  uint32_t m, k = kernel("write_at", NULL);
  drv_mem_t o = buf_new(4096);
  cpu_arg_t ok[] = {P(o.ptr), I(0)};

  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), names, 1, NULL, 0, &so,
                               log, sizeof(log)),
                   0);
  ck_assert_int_eq(cpu_runner_load(runner, so, &m, &err), HIPD_EDEVICE);
  ck_assert_ptr_nonnull(strstr(err.msg, "crashed"));
  ck_assert_ptr_nonnull(strstr(err.msg, "SIGSEGV"));
  /* The restarted runner has the fixture's module and buffer, not this. */
  ck_assert_int_eq(launch(k, 1, 1, 1, 1, 1, 1, 0, ok, 2), 0);
  ck_assert_int_eq(*(int *)o.ptr, 42);
  buf_free(&o);
  cpu_compile_free(so);
}
END_TEST

/* Buffers allocated inside a range that the runner reserves at start. */
START_TEST(test_reserved_range)
{
  const size_t rsize = (size_t)64 << 20, n = 4096;
  char *base = mmap(NULL, rsize, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  cpu_runner_cfg_t cfg = {.reserve_addr = base, .reserve_size = rsize};
  float *p[3];
  int fd[3];

  ck_assert_ptr_ne(base, MAP_FAILED);
  start_runner_cfg(&cfg);
  for (int i = 0; i < 3; i++) {
    fd[i] = memfd_create("test-buffer", MFD_CLOEXEC);
    ck_assert_int_ge(fd[i], 0);
    ck_assert_int_eq(ftruncate(fd[i], n * sizeof(float)), 0);
    p[i] = mmap(base + ((size_t)i << 20), n * sizeof(float),
                PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd[i], 0);
    ck_assert_ptr_ne(p[i], MAP_FAILED);
    ck_assert_int_eq(
        cpu_runner_map(runner, fd[i], p[i], n * sizeof(float), &err), 0);
  }
  for (size_t i = 0; i < n; i++) {
    p[0][i] = (float)i;
    p[1][i] = 1.0f;
  }
  uint32_t k = kernel("vadd", NULL);
  cpu_arg_t args[] = {P(p[0]), P(p[1]), P(p[2]), I((int)n)};
  ck_assert_int_eq(launch(k, n / 256, 1, 1, 256, 1, 1, 0, args, 4), 0);
  for (size_t i = 0; i < n; i++)
    ck_assert_float_eq(p[2][i], (float)i + 1.0f);
  /* Unmapped, the range is reserved again; another buffer can go there. */
  ck_assert_int_eq(cpu_runner_unmap(runner, p[2], &err), 0);
  close(fd[2]);
  fd[2] = memfd_create("test-buffer", MFD_CLOEXEC);
  ck_assert_int_eq(ftruncate(fd[2], n * sizeof(float)), 0);
  p[2] = mmap(p[2], n * sizeof(float), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_FIXED, fd[2], 0);
  ck_assert_int_eq(cpu_runner_map(runner, fd[2], p[2], n * sizeof(float), &err),
                   0);
  ck_assert_int_eq(launch(k, n / 256, 1, 1, 256, 1, 1, 0, args, 4), 0);
  ck_assert_float_eq(p[2][n - 1], (float)n);
  stop_runner();
  for (int i = 0; i < 3; i++)
    close(fd[i]);
  munmap(base, rsize);
}
END_TEST

/* A launch that runs on (here until the test lets it end) holds one runner
 * process and nothing else: meanwhile a buffer is mapped, a kernel looked
 * up and launched (on a second process), and a buffer unmapped; that one's
 * range comes back only once the long launch ended, and the process that
 * ran it then has the changes it missed (it faults on the unmapped buffer,
 * reaches the new one). */
typedef struct {
  uint32_t k;
  void *flag, *out;
  int rc;
} wait_job_t;

static void *wait_thread(void *arg)
{
  wait_job_t *j = arg;
  uint32_t one[3] = {1, 1, 1};
  cpu_arg_t args[] = {P(j->flag), P(j->out)};
  hipd_err_t e;

  j->rc = cpu_runner_launch(runner, j->k, one, one, 0, args, 2, NULL, &e);
  return NULL;
}

START_TEST(test_long_launch_blocks_nothing)
{
  const size_t len = 4096;
  cpu_arena_t *a = NULL;
  cpu_arena_buf_t b[3];
  cpu_runner_cfg_t cfg;
  volatile int *flag, *out;
  uint64_t offs[4];
  wait_job_t job;
  pthread_t th;
  uint32_t wr, vadd;
  int rc, released = -1;

  rc = cpu_arena_create((size_t)64 << 20, &a, &err);
  ck_assert_msg(rc == 0, "arena: %s", err.msg);
  cfg = (cpu_runner_cfg_t){.reserve_addr = cpu_arena_base(a),
                           .reserve_size = cpu_arena_span(a)};
  start_runner_cfg(&cfg);
  rc = cpu_runner_chunk(runner, 1, cpu_arena_fd(a), cpu_arena_base(a),
                        cpu_arena_span(a), &err);
  ck_assert_msg(rc == 0, "chunk: %s", err.msg);
  for (int i = 0; i < 2; i++) {
    cpu_bmap_ent_t e;
    ck_assert_int_eq(cpu_arena_alloc(a, len, &b[i], &err), 0);
    e = (cpu_bmap_ent_t){b[i].offset, b[i].map_size};
    ck_assert_int_eq(cpu_runner_bmap(runner, 1, &e, 1, &err), 0);
  }
  flag = b[0].ptr;
  out = (int *)b[0].ptr + 16;
  job = (wait_job_t){kernel("wait_flag", NULL), (void *)flag, (void *)out, -1};
  ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &job), 0);
  while (*out != 1)
    usleep(1000);

  /* It runs. A new buffer, a kernel looked up, a launch writing it. */
  {
    cpu_bmap_ent_t e;
    ck_assert_int_eq(cpu_arena_alloc(a, len, &b[2], &err), 0);
    e = (cpu_bmap_ent_t){b[2].offset, b[2].map_size};
    ck_assert_int_eq(cpu_runner_bmap(runner, 1, &e, 1, &err), 0);
  }
  wr = kernel("write_at", NULL);
  vadd = kernel("vadd", NULL);
  ck_assert_uint_gt(vadd, 0);
  cpu_arg_t w2[] = {P(b[2].ptr), I(0)};
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, w2, 2), 0);
  ck_assert_int_eq(*(int *)b[2].ptr, 42);
  ck_assert_uint_eq(cpu_runner_procs(runner), 2);
  /* Unmapped while the first process still maps it: held back. */
  ck_assert_int_eq(cpu_runner_bunmap(runner, 1, b[1].offset, &released, &err),
                   0);
  ck_assert_int_eq(released, 0);
  ck_assert_uint_eq(cpu_runner_reclaim(runner, 1, offs, 4), 0);
  ck_assert_int_eq(*out, 1); /* still running */

  *flag = 1;
  pthread_join(th, NULL);
  ck_assert_int_eq(job.rc, 0);
  ck_assert_int_eq(*out, 2);
  ck_assert_uint_eq(cpu_runner_reclaim(runner, 1, offs, 4), 1);
  ck_assert_uint_eq(offs[0], b[1].offset);
  ck_assert_uint_eq(cpu_runner_reclaim(runner, 1, offs, 4), 0);

  /* The first process (taken first again) caught up: it reaches the new
   * buffer and faults on the unmapped one. */
  memset(b[2].ptr, 0, len);
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, w2, 2), 0);
  ck_assert_int_eq(*(int *)b[2].ptr, 42);
  cpu_arg_t w1[] = {P(b[1].ptr), I(0)};
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, w1, 2), HIPD_ELAUNCH);
  ck_assert_ptr_nonnull(strstr(err.msg, "SIGSEGV"));
  stop_runner();
  cpu_arena_destroy(a);
}
END_TEST

/* The CPU device's arena in the runner: its file given once as a chunk,
 * buffers mapped into it with BMAP between guard gaps. A write just past
 * a buffer's end, or a page past it, crashes the launch and leaves the
 * next buffer alone; the restarted runner has the chunk and the buffers
 * back; an unmapped buffer faults; a freed and reused range reads zero. */
START_TEST(test_arena_guards)
{
  const size_t len = 4096;
  cpu_arena_t *a = NULL;
  cpu_arena_buf_t b[3], again;
  cpu_runner_cfg_t cfg;
  uint32_t wr;
  int rc;

  rc = cpu_arena_create((size_t)64 << 20, &a, &err);
  ck_assert_msg(rc == 0, "arena: %s", err.msg);
  cfg = (cpu_runner_cfg_t){.reserve_addr = cpu_arena_base(a),
                           .reserve_size = cpu_arena_span(a)};
  start_runner_cfg(&cfg);
  rc = cpu_runner_chunk(runner, 1, cpu_arena_fd(a), cpu_arena_base(a),
                        cpu_arena_span(a), &err);
  ck_assert_msg(rc == 0, "chunk: %s", err.msg);
  ck_assert_int_eq(cpu_runner_chunk(runner, 1, cpu_arena_fd(a),
                                    cpu_arena_base(a), cpu_arena_span(a), &err),
                   HIPD_EEXIST);
  for (int i = 0; i < 3; i++) {
    cpu_bmap_ent_t e;
    ck_assert_int_eq(cpu_arena_alloc(a, len, &b[i], &err), 0);
    e = (cpu_bmap_ent_t){b[i].offset, b[i].map_size};
    rc = cpu_runner_bmap(runner, 1, &e, 1, &err);
    ck_assert_msg(rc == 0, "bmap: %s", err.msg);
    memset(b[i].ptr, 0x5a, len);
  }
  /* Apart by the guard gap at least, in allocation order. */
  ck_assert_uint_ge((uintptr_t)b[1].ptr,
                    (uintptr_t)b[0].ptr + len + CPU_ARENA_GUARD);
  ck_assert_uint_eq((uintptr_t)b[0].ptr % CPU_ARENA_ALIGN, 0);
  wr = kernel("write_at", NULL);
  for (size_t past = 0; past <= 4096; past += 4096) {
    cpu_arg_t over[] = {P((char *)b[0].ptr + len + past), I(0)};
    ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, over, 2), HIPD_ELAUNCH);
    ck_assert_ptr_nonnull(strstr(err.msg, "SIGSEGV"));
    for (size_t i = 0; i < len; i++)
      ck_assert_uint_eq(((uint8_t *)b[1].ptr)[i], 0x5a);
  }
  ck_assert_uint_eq(cpu_runner_restarts(runner), 2);
  /* The restarted runner maps the same buffers. */
  cpu_arg_t ok[] = {P(b[1].ptr), I(0)};
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, ok, 2), 0);
  ck_assert_int_eq(*(int *)b[1].ptr, 42);
  /* Unmapped in the runner, a buffer is out of a kernel's reach. */
  int released = 0;
  ck_assert_int_eq(cpu_runner_bunmap(runner, 1, b[2].offset, &released, &err),
                   0);
  ck_assert_int_eq(released, 1); /* no launch is running */
  ck_assert_int_eq(cpu_runner_bunmap(runner, 1, b[2].offset, &released, &err),
                   HIPD_ENOENT);
  cpu_arg_t gone[] = {P(b[2].ptr), I(0)};
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, gone, 2), HIPD_ELAUNCH);
  ck_assert_int_eq(cpu_arena_free(a, b[2].ptr), 0);
  ck_assert_int_eq(cpu_arena_free(a, b[2].ptr), HIPD_ENOENT);
  /* Reused, the range is zero. */
  ck_assert_int_eq(cpu_arena_alloc(a, len, &again, &err), 0);
  ck_assert_ptr_eq(again.ptr, b[2].ptr);
  for (size_t i = 0; i < len; i++)
    ck_assert_uint_eq(((uint8_t *)again.ptr)[i], 0);
  ck_assert_uint_eq(cpu_arena_count(a), 3);
  stop_runner();
  cpu_arena_destroy(a);
}
END_TEST

static void start_runner_timeout(void)
{
  cpu_runner_cfg_t cfg = {.timeout_ms = 1500};
  start_runner_cfg(&cfg);
}

START_TEST(test_launch_timeout)
{
  drv_mem_t o = buf_new(4096);
  uint32_t k = kernel("end_runner", NULL), wr = kernel("write_at", NULL);
  cpu_arg_t spin[] = {I(3)}, ok[] = {P(o.ptr), I(0)};

  ck_assert_int_eq(launch(k, 1, 1, 1, 4, 1, 1, 0, spin, 1), HIPD_ETIMEDOUT);
  ck_assert_ptr_nonnull(strstr(err.msg, "did not finish within 1500 ms"));
  ck_assert_int_eq(launch(wr, 1, 1, 1, 1, 1, 1, 0, ok, 2), 0);
  ck_assert_int_eq(*(int *)o.ptr, 42);
  buf_free(&o);
}
END_TEST

START_TEST(test_map_errors)
{
  drv_mem_t a = buf_new(8192);
  char *p = a.ptr;

  /* The same address twice. */
  ck_assert_int_eq(cpu_runner_map(runner, a.fd, a.ptr, a.size, &err),
                   HIPD_EEXIST);
  /* A range of the runner that is taken (overlapping a mapped buffer). */
  ck_assert_int_eq(cpu_runner_map(runner, a.fd, p + 4096, 4096, &err),
                   HIPD_EEXIST);
  /* Larger than the buffer's file. */
  ck_assert_int_eq(cpu_runner_map(runner, a.fd,
                                  (void *)((uintptr_t)p + (1u << 30)), 1 << 20,
                                  &err),
                   HIPD_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "holds only 8192 bytes"));
  ck_assert_int_eq(cpu_runner_unmap(runner, p + 4096, &err), HIPD_ENOENT);
  buf_free(&a);
}
END_TEST

START_TEST(test_unload_reload)
{
  uint32_t k = kernel("vadd", NULL), m2;

  ck_assert_int_eq(cpu_runner_unload(runner, module_id, &err), 0);
  ck_assert_int_eq(cpu_runner_unload(runner, module_id, &err), HIPD_ENOENT);
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  cpu_arg_t args[4] = {P(NULL), P(NULL), P(NULL), I(0)};
  ck_assert_int_eq(
      cpu_runner_launch(runner, k, grid, block, 0, args, 4, NULL, &err),
      HIPD_ENOKERNEL);
  ck_assert_int_eq(cpu_runner_load(runner, module_path, &m2, &err), 0);
  ck_assert_uint_ne(m2, module_id);
  module_id = m2;
  k = kernel("vadd", NULL);
  ck_assert_int_eq(
      cpu_runner_launch(runner, k, grid, block, 0, args, 4, NULL, &err), 0);
}
END_TEST

START_TEST(test_runner_missing)
{
  cpu_runner_cfg_t cfg = {.path = "/nonexistent/hipd-cpu-runner"};
  cpu_runner_t *r = NULL;

  ck_assert_int_eq(cpu_runner_start(&cfg, &r, &err), HIPD_ENOENT);
  ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/hipd-cpu-runner"));
  ck_assert_ptr_null(r);
}
END_TEST

/* ------------------------------------------------------------ compile */

START_TEST(test_compile_error_log)
{
  static const char src[] = "extern \"C\" __global__ void k(int *p)\n"
                            "{\n"
                            "  p[0] = undeclared_thing + 1;\n"
                            "}\n";
  const char *names[] = {"k"};
  char log[8192];
  char *so = NULL;
  int rc = cpu_compile(NULL, src, strlen(src), names, 1, NULL, 0, &so, log,
                       sizeof(log));

  ck_assert_int_eq(rc, HIPD_ECOMPILE);
  ck_assert_ptr_null(so);
  ck_assert_ptr_nonnull(strstr(log, "kernel.hip:3:"));
  ck_assert_ptr_nonnull(strstr(log, "undeclared_thing"));
  ck_assert_ptr_nonnull(strstr(log, "error"));
  ck_assert_ptr_null(strstr(log, "/hipd-cpu-")); /* the temp dir is hidden */
}
END_TEST

START_TEST(test_compile_checks)
{
  static const char src[] = "extern \"C\" __global__ void k(int *p)\n"
                            "{\n"
                            "  p[0] = VALUE;\n"
                            "}\n"
                            "__global__ void o(int *p) {}\n"
                            "__global__ void o(float *p) {}\n";
  const char *k[] = {"k"}, *missing[] = {"nope"}, *over[] = {"o"};
  const char *bad_name[] = {"k); system(\"x\""};
  const char *opt_ok[] = {"-DVALUE=3", "-O3", "--use_fast_math",
                          "--gpu-architecture=sm_90", "-std=c++20"};
  const char *opt_bad[] = {"-I/etc"}, *opt_bad2[] = {"-std=c++11"};
  const char *opt_bad3[] = {"-fplugin=x.so"};
  cpu_compile_cfg_t nocxx = {.cxx = "/nonexistent/c++"};
  char log[8192], *so = NULL;

  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), k, 1, opt_ok, 5, &so,
                               log, sizeof(log)),
                   0);
  cpu_compile_free(so);
  so = NULL;
  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), k, 1, opt_bad, 1, &so,
                               log, sizeof(log)),
                   HIPD_EINVAL);
  ck_assert_ptr_nonnull(strstr(log, "-I/etc"));
  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), k, 1, opt_bad2, 1, &so,
                               log, sizeof(log)),
                   HIPD_EINVAL);
  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), k, 1, opt_bad3, 1, &so,
                               log, sizeof(log)),
                   HIPD_EINVAL);
  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), bad_name, 1, NULL, 0,
                               &so, log, sizeof(log)),
                   HIPD_EINVAL);
  /* VALUE undefined without -D */
  ck_assert_int_eq(
      cpu_compile(NULL, src, strlen(src), k, 1, NULL, 0, &so, log, sizeof(log)),
      HIPD_ECOMPILE);
  ck_assert_ptr_nonnull(strstr(log, "VALUE"));
  const char *dv[] = {"-DVALUE=1"};
  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), missing, 1, dv, 1, &so,
                               log, sizeof(log)),
                   HIPD_ECOMPILE);
  ck_assert_ptr_nonnull(strstr(log, "nope"));
  ck_assert_int_eq(cpu_compile(NULL, src, strlen(src), over, 1, dv, 1, &so, log,
                               sizeof(log)),
                   HIPD_ECOMPILE);
  ck_assert_ptr_nonnull(strstr(log, "not overloaded"));
  ck_assert_int_eq(
      cpu_compile(&nocxx, src, strlen(src), k, 1, dv, 1, &so, log, sizeof(log)),
      HIPD_ENOTSUP);
  ck_assert_ptr_nonnull(strstr(log, "no C++ compiler"));
  ck_assert_ptr_null(so);
}
END_TEST

START_TEST(test_compile_dyn_shared_bad)
{
  static const char src[] = "extern \"C\" __global__ void k(int *p)\n"
                            "{\n"
                            "  extern __shared__ int a[], b[];\n"
                            "  p[0] = a[0] + b[0];\n"
                            "}\n";
  const char *k[] = {"k"};
  char log[4096], *so = NULL;

  ck_assert_int_eq(
      cpu_compile(NULL, src, strlen(src), k, 1, NULL, 0, &so, log, sizeof(log)),
      HIPD_ECOMPILE);
  ck_assert_ptr_nonnull(strstr(log, "kernel.hip:3:"));
  ck_assert_ptr_nonnull(strstr(log, "dynamic shared memory"));
}
END_TEST

START_TEST(test_compile_timeout)
{
  /* Constant evaluation that takes the compiler minutes. */
  static const char src[] = "constexpr long f()\n"
                            "{\n"
                            "  long s = 0;\n"
                            "  for (int i = 0; i < 200000; i++)\n"
                            "    for (int j = 0; j < 200000; j++)\n"
                            "      s += i ^ j;\n"
                            "  return s;\n"
                            "}\n"
                            "extern \"C\" __global__ void k(long *p)\n"
                            "{\n"
                            "  constexpr long v = f();\n"
                            "  p[0] = v;\n"
                            "}\n";
  const char *k[] = {"k"};
  cpu_compile_cfg_t cfg = {.timeout_s = 1};
  char log[4096], *so = NULL;

  ck_assert_int_eq(
      cpu_compile(&cfg, src, strlen(src), k, 1, NULL, 0, &so, log, sizeof(log)),
      HIPD_ECOMPILE);
  ck_assert_ptr_nonnull(strstr(log, "timed out after 1 s"));
}
END_TEST

/* --------------------------------------------------------------- main */

static Suite *cpu_kernels_suite(void)
{
  Suite *s = suite_create("cpu_kernels");
  TCase *tc;

  tc = tcase_create("kernels");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, compile_module, free_module);
  tcase_add_checked_fixture(tc, start_runner, stop_runner);
  tcase_add_test(tc, test_vadd);
  tcase_add_test(tc, test_reduce_shared);
  tcase_add_test(tc, test_histogram_atomics);
  tcase_add_test(tc, test_atomics_misc);
  tcase_add_test(tc, test_grid_2d);
  tcase_add_test(tc, test_grid_3d);
  tcase_add_test(tc, test_dynamic_shared);
  tcase_add_test(tc, test_mixed_scalars);
  tcase_add_test(tc, test_small_scalars);
  tcase_add_test(tc, test_cxx_mangled);
  tcase_add_test(tc, test_unknown_kernel);
  tcase_add_test(tc, test_barrier_1024);
  tcase_add_test(tc, test_barrier_after_early_exit);
  tcase_add_test(tc, test_launch_limits);
  tcase_add_test(tc, test_map_errors);
  tcase_add_test(tc, test_unload_reload);
  tcase_add_test(tc, test_concurrent_launches);
  suite_add_tcase(s, tc);

  tc = tcase_create("containment");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, compile_module, free_module);
  tcase_add_checked_fixture(tc, start_runner, stop_runner);
  tcase_add_test(tc, test_crash_null_deref);
  tcase_add_test(tc, test_abort_and_exit);
  tcase_add_test(tc, test_runner_missing);
  tcase_add_test(tc, test_load_crash);
  suite_add_tcase(s, tc);

  tc = tcase_create("reserve");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, compile_module, free_module);
  tcase_add_test(tc, test_reserved_range);
  tcase_add_test(tc, test_arena_guards);
  tcase_add_test(tc, test_long_launch_blocks_nothing);
  suite_add_tcase(s, tc);

  tc = tcase_create("timeout");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, compile_module, free_module);
  tcase_add_checked_fixture(tc, start_runner_timeout, stop_runner);
  tcase_add_test(tc, test_launch_timeout);
  suite_add_tcase(s, tc);

  tc = tcase_create("compile");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_compile_error_log);
  tcase_add_test(tc, test_compile_checks);
  tcase_add_test(tc, test_compile_dyn_shared_bad);
  tcase_add_test(tc, test_compile_timeout);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  /* A crashing kernel must not take the test down: the runner process is
   * the one that dies, never this one. */
  signal(SIGPIPE, SIG_IGN);
  failed = test_run(cpu_kernels_suite());
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
