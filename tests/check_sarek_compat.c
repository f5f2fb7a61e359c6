/* SPDX-License-Identifier: MIT */
/* tests/check_sarek_compat.c: what a Sarek backend relies on, end to end
 * on a real hipd over a real socket, on every device it serves (started
 * with --cpu-devices 2; on a GPU host the HIP devices come first):
 *   - "cuda" source (run_source, kernel.compile with --lang=cuda): CUDA's
 *     runtime #includes, warp shuffles and votes with masks, __syncwarp,
 *     atomicAdd's overloads, __ldg and cuda_fp16.h's __half, checked
 *     against references computed here; and compiled for gfx90a when hipd
 *     is built for AMD;
 *   - generated kernels compiled without floating-point contraction by
 *     default (a*b+c with values whose fused and unfused results differ),
 *     and with it on request (--fmad=true), the option in the cache key;
 *   - run_source's wait: false answers once submitted, and the next
 *     synchronisation sees the kernel's results.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "ir_json.h"
#define MAX_DEVICES 64
#define TESTUTIL_CLIENT "check_sarek_compat"
#define TESTUTIL_TIMEOUT_MS 120000
#define TESTUTIL_MAX_DEVICES MAX_DEVICES
#include "testutil.h"

static harness_daemon_t *shared;
static char shared_cache[256];

#define NT 64 /* threads per block: two CUDA warps */
#define NB 4  /* blocks */
#define NTOT (NT * NB)

/* CUDA, as a Sarek program's generated source would be: the toolkit's
 * headers, warp functions with 32-bit masks, a warp reduction that loops
 * on warpSize, the atomicAdd overloads, __ldg and __half. out[0..6] are
 * totals, flags[i] per thread (15 when every vote answered as CUDA
 * says), half_out[i] per thread. */
static const char CUDA_SRC[] =
    "#include <cuda_runtime.h>\n"
    "#include <cuda_fp16.h>\n"
    "#define FULL 0xffffffffu\n"
    "extern \"C\" __global__ void sarek_cuda(const float *in, int *itot,\n"
    "    unsigned int *utot, unsigned long long *ulltot, float *ftot,\n"
    "    double *dtot, int *flags, float *half_out, unsigned short *bits)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int lane = threadIdx.x % warpSize;\n"
    "  float v = __ldg(&in[i]);\n"
    "  for (int o = warpSize / 2; o > 0; o /= 2)\n"
    "    v += __shfl_down_sync(FULL, v, o);\n"
    "  unsigned int odd = __ballot_sync(FULL, threadIdx.x & 1);\n"
    "  float first = __shfl_sync(FULL, (float)threadIdx.x, 0);\n"
    "  float up = __shfl_up_sync(FULL, (float)lane, 1);\n"
    "  float x = __shfl_xor_sync(FULL, (float)lane, 1);\n"
    "  __syncwarp();\n"
    "  __syncwarp(FULL);\n"
    "  if (lane == 0) {\n"
    "    atomicAdd(&ftot[1], v);\n"
    "    atomicAdd(&itot[1], __popc(odd));\n"
    "  }\n"
    "  atomicAdd(&itot[0], 1);\n"
    "  atomicAdd(&utot[0], 1u);\n"
    "  atomicAdd(&ulltot[0], 1ull);\n"
    "  atomicAdd(&ftot[0], 1.0f);\n"
    "  atomicAdd(&dtot[0], 1.0);\n"
    "  flags[i] = (__any_sync(FULL, lane == 0) ? 1 : 0) |\n"
    "             (__all_sync(FULL, 1) ? 2 : 0) |\n"
    "             (!__any_sync(FULL, 0) ? 4 : 0) |\n"
    "             (!__all_sync(FULL, lane != 0) ? 8 : 0) |\n"
    "             ((__activemask() & 1u) ? 16 : 0) |\n"
    "             (first == (float)(threadIdx.x - lane) ? 32 : 0) |\n"
    "             (up == (float)(lane == 0 ? 0 : lane - 1) ? 64 : 0) |\n"
    "             (x == (float)(warpSize == 1 ? lane : lane ^ 1) ? 128 : "
    "0);\n"
    "  __half a = __float2half(0.5f * (float)threadIdx.x);\n"
    "  __half b = __hmul(__float2half(0.25f), __float2half((float)i));\n"
    "  half_out[i] = __half2float(__hadd(a, b));\n"
    "  if (i == 0) {\n"
    "    bits[0] = __half_as_ushort(__float2half(1.0f / 3.0f));\n"
    "    bits[1] = __half_as_ushort(__float2half(65520.0f));\n"
    "    bits[2] = __half_as_ushort(__float2half(6e-8f));\n"
    "    bits[3] = __half_as_ushort(__float2half(-2.5f));\n"
    "    bits[4] = __half_as_ushort(__hsub(__float2half(1.0f),\n"
    "                                      __float2half(0.000244140625f)));\n"
    "    /* just above a tie: rounded once, up (twice: the tie, to even) */\n"
    "    bits[5] = __half_as_ushort(__double2half(1.0 + 1.0 / 2048.0 +\n"
    "                                             1.0 / 1099511627776.0));\n"
    "    bits[6] = __half_as_ushort(__hmax(__float2half(-0.0f),\n"
    "                                      __float2half(0.0f)));\n"
    "    bits[7] = __half_as_ushort(__hmin(__float2half(0.0f),\n"
    "                                      __float2half(-0.0f)));\n"
    "  }\n"
    "}\n";

/* The device buffers of one run. */
typedef struct {
  hipd_buffer_t in, itot, utot, ulltot, ftot, dtot, flags, half_out, bits;
} cuda_bufs_t;

static hipd_buffer_t zeroed(hipd_conn_t *conn, int dev, size_t n,
                            const char *kind, size_t elem)
{
  hipd_buffer_t b = HIPD_BUFFER_NULL;

  OK(conn, hipd_mem_alloc(conn, dev, n, kind, &b));
  OK(conn, hipd_mem_memset(conn, b, 0, n * elem, 0));
  return b;
}

static void cuda_bufs_new(hipd_conn_t *conn, int dev, cuda_bufs_t *b)
{
  float in[NTOT];

  for (int i = 0; i < NTOT; i++)
    in[i] = (float)(i % 7);
  b->in = zeroed(conn, dev, NTOT, "float32", 4);
  OK(conn, hipd_mem_write(conn, b->in, 0, in, sizeof(in)));
  b->itot = zeroed(conn, dev, 2, "int32", 4);
  b->utot = zeroed(conn, dev, 1, "uint32", 4);
  b->ulltot = zeroed(conn, dev, 1, "uint64", 8);
  b->ftot = zeroed(conn, dev, 2, "float32", 4);
  b->dtot = zeroed(conn, dev, 1, "float64", 8);
  b->flags = zeroed(conn, dev, NTOT, "int32", 4);
  b->half_out = zeroed(conn, dev, NTOT, "float32", 4);
  b->bits = zeroed(conn, dev, 8, "uint16", 2);
}

static void cuda_args(hipd_args_t *a, const cuda_bufs_t *b)
{
  hipd_args_clear(a);
  hipd_args_buffer(a, b->in, 0);
  hipd_args_buffer(a, b->itot, 0);
  hipd_args_buffer(a, b->utot, 0);
  hipd_args_buffer(a, b->ulltot, 0);
  hipd_args_buffer(a, b->ftot, 0);
  hipd_args_buffer(a, b->dtot, 0);
  hipd_args_buffer(a, b->flags, 0);
  hipd_args_buffer(a, b->half_out, 0);
  hipd_args_buffer(a, b->bits, 0);
}

/* Check one run's results against what CUDA defines. */
static void cuda_check(hipd_conn_t *conn, int dev, const cuda_bufs_t *b,
                       const char *how)
{
  int32_t itot[2], flags[NTOT];
  uint32_t utot;
  uint64_t ulltot;
  float ftot[2], half_out[NTOT], sum = 0;
  double dtot;
  uint16_t bits[8];
  static const uint16_t want_bits[8] = {0x3555, 0x7c00, 0x0001, 0xc100,
                                        0x3c00, 0x3c01, 0x0000, 0x8000};

  OK(conn, hipd_mem_read(conn, b->itot, 0, itot, sizeof(itot)));
  OK(conn, hipd_mem_read(conn, b->utot, 0, &utot, sizeof(utot)));
  OK(conn, hipd_mem_read(conn, b->ulltot, 0, &ulltot, sizeof(ulltot)));
  OK(conn, hipd_mem_read(conn, b->ftot, 0, ftot, sizeof(ftot)));
  OK(conn, hipd_mem_read(conn, b->dtot, 0, &dtot, sizeof(dtot)));
  OK(conn, hipd_mem_read(conn, b->flags, 0, flags, sizeof(flags)));
  OK(conn, hipd_mem_read(conn, b->half_out, 0, half_out, sizeof(half_out)));
  OK(conn, hipd_mem_read(conn, b->bits, 0, bits, sizeof(bits)));
  for (int i = 0; i < NTOT; i++)
    sum += (float)(i % 7);
  ck_assert_msg(itot[0] == NTOT && utot == NTOT && ulltot == NTOT &&
                    ftot[0] == (float)NTOT && dtot == (double)NTOT,
                "device %d (%s): atomicAdd totals int %d, unsigned %u, "
                "unsigned long long %llu, float %g, double %g; want %d",
                dev, how, itot[0], utot, (unsigned long long)ulltot, ftot[0],
                dtot, NTOT);
  ck_assert_msg(ftot[1] == sum, "device %d (%s): warp reduction %g, want %g",
                dev, how, ftot[1], sum);
  ck_assert_msg(itot[1] == NTOT / 2,
                "device %d (%s): ballots counted %d odd threads, want %d", dev,
                how, itot[1], NTOT / 2);
  for (int i = 0; i < NTOT; i++) {
    int t = i % NT;
    float want = 0.5f * (float)t + 0.25f * (float)i;
    ck_assert_msg(flags[i] == 255,
                  "device %d (%s): thread %d's votes/shuffles gave flags 0x%x, "
                  "want 0xff",
                  dev, how, i, flags[i]);
    ck_assert_msg(half_out[i] == want, "device %d (%s): half[%d] = %g, want %g",
                  dev, how, i, half_out[i], want);
  }
  for (int k = 0; k < 8; k++)
    ck_assert_msg(bits[k] == want_bits[k],
                  "device %d (%s): __half bits %d are 0x%04x, want 0x%04x", dev,
                  how, k, bits[k], want_bits[k]);
}

static void cuda_bufs_free(hipd_conn_t *conn, cuda_bufs_t *b)
{
  hipd_buffer_t *all[] = {&b->in,     &b->itot,     &b->utot,
                          &b->ulltot, &b->ftot,     &b->dtot,
                          &b->flags,  &b->half_out, &b->bits};
  int dev = -1;

  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    OK(conn, hipd_mem_free(conn, *all[i]));
}

START_TEST(test_langs_every_device)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev = -1;
  hipd_info_t *info = NULL;

  OK(conn, hipd_backend_info(conn, &info));
  ck_assert_int_eq(hipd_info_len(info, "source_langs"), 2);
  ck_assert_str_eq(info_str(info, "source_langs.0"), "hip");
  ck_assert_str_eq(info_str(info, "source_langs.1"), "cuda");
  hipd_info_free(info);
  for (dev = 0; dev < n; dev++) {
    hipd_info_t *langs = NULL;
    OK(conn, hipd_supported_source_langs(conn, dev, &langs));
    ck_assert_int_eq(hipd_info_len(langs, ""), 2);
    ck_assert_str_eq(info_str(langs, "0"), "hip");
    ck_assert_str_eq(info_str(langs, "1"), "cuda");
    hipd_info_free(langs);
  }
  hipd_close(conn);
}
END_TEST

START_TEST(test_cuda_source_runs)
{
  hipd_conn_t *conn = connect_to(shared);
  const uint32_t grid[3] = {NB, 1, 1}, block[3] = {NT, 1, 1};
  const char *const cuda_opts[] = {"--lang=cuda", NULL};
  hipd_args_t *args = args_new();
  int n = device_count(conn);

  for (int dev = 0; dev < n; dev++) {
    cuda_bufs_t b;
    hipd_kernel_t k;

    OK(conn, hipd_device_set_current(conn, dev));
    cuda_bufs_new(conn, dev, &b);
    cuda_args(args, &b);
    OK(conn, hipd_run_source(conn, CUDA_SRC, "cuda", "sarek_cuda", grid, block,
                             0, args));
    cuda_check(conn, dev, &b, "run_source");
    cuda_bufs_free(conn, &b);

    cuda_bufs_new(conn, dev, &b);
    cuda_args(args, &b);
    OK(conn, hipd_kernel_compile_cached(conn, dev, CUDA_SRC, "sarek_cuda",
                                        cuda_opts, &k, NULL));
    OK(conn, hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    cuda_check(conn, dev, &b, "kernel.compile_cached --lang=cuda");
    OK(conn, hipd_kernel_destroy(conn, k));
    cuda_bufs_free(conn, &b);
  }
  hipd_args_free(args);
  hipd_close(conn);
}
END_TEST

START_TEST(test_cuda_errors)
{
  hipd_conn_t *conn = connect_to(shared);
  const char *const bad_lang[] = {"--lang=fortran", NULL};
  const char *const cuda_opts[] = {"--lang=cuda", NULL};
  const char *const hip_opts[] = {"--lang=hip", NULL};
  static const char broken[] = "#include <cuda_runtime.h>\n"
                               "extern \"C\" __global__ void k(int *p)\n"
                               "{ *p = undeclared_name; }\n";
  static const char plain[] =
      "extern \"C\" __global__ void k(int *p) { *p = 1; }\n";
  hipd_info_t *a = NULL, *b = NULL;
  hipd_kernel_t k;
  int dev = -1;

  EXPECT(conn,
         hipd_kernel_compile(conn, HIPD_DEVICE_CURRENT, plain, "k", bad_lang,
                             &k, NULL),
         HIPD_ELANG);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "fortran"));
  /* The client's line numbers, though a prelude comes first; the
   * toolkit's #include line is emptied, not refused. */
  EXPECT(conn,
         hipd_kernel_compile(conn, HIPD_DEVICE_CURRENT, broken, "k", cuda_opts,
                             &k, NULL),
         HIPD_ECOMPILE);
  /* kernel.cu:3 (clang, g++), kernel.cu(3) (NVRTC). */
  ck_assert_msg(strstr(hipd_last_error(conn), "kernel.cu:3") != NULL ||
                    strstr(hipd_last_error(conn), "kernel.cu(3)") != NULL,
                "the log does not name kernel.cu:3: %s", hipd_last_error(conn));
  ck_assert_msg(strstr(hipd_last_error(conn), "cuda_runtime.h") == NULL,
                "cuda_runtime.h was not provided: %s", hipd_last_error(conn));
  /* HIP source as it was, "--lang=hip" the same key as no option; CUDA
   * another. */
  OK(conn, hipd_kernel_compile_cached(conn, HIPD_DEVICE_CURRENT, plain, "k",
                                      hip_opts, &k, &a));
  OK(conn, hipd_kernel_destroy(conn, k));
  OK(conn, hipd_kernel_compile_cached(conn, HIPD_DEVICE_CURRENT, plain, "k",
                                      NULL, &k, &b));
  OK(conn, hipd_kernel_destroy(conn, k));
  ck_assert_str_eq(info_str(a, "key"), info_str(b, "key"));
  hipd_info_free(b);
  OK(conn, hipd_kernel_compile_cached(conn, HIPD_DEVICE_CURRENT, plain, "k",
                                      cuda_opts, &k, &b));
  OK(conn, hipd_kernel_destroy(conn, k));
  ck_assert_str_ne(info_str(a, "key"), info_str(b, "key"));
  hipd_info_free(a);
  hipd_info_free(b);
  hipd_close(conn);
}
END_TEST

/* CUDA source compiled for the GPU targets this build has a compiler for,
 * without a device: gfx90a (wave64) and, where this comgr knows them,
 * gfx942 and gfx1030 (wave32) for AMD; sm_90 for NVIDIA (NVRTC and the
 * toolkit's cuda_fp16.h). */
START_TEST(test_cuda_compile_for_gpu)
{
  hipd_conn_t *conn = connect_to(shared);
  const char *const cuda_opts[] = {"--lang=cuda", NULL};
  static const char *const amd[] = {"gfx90a", "gfx942", "gfx1030", NULL};
  static const char *const nvidia[] = {"sm_90", NULL};
  const char *const *arch = NULL;
  hipd_info_t *info = NULL;
  const char *platform = testutil_hip_platform(conn);

  if (platform != NULL)
    arch = strcmp(platform, "amd") == 0 ? amd : nvidia;
  if (arch == NULL) {
    printf("check_sarek_compat: hipd has no HIP compiler: the CUDA source "
           "was not compiled for a GPU target\n");
    hipd_close(conn);
    return;
  }
  for (int t = 0; arch[t] != NULL; t++) {
    int rc = hipd_kernel_compile_for(conn, arch[t], CUDA_SRC, "sarek_cuda",
                                     cuda_opts, 1, &info);
    if (rc == HIPD_ENOTSUP && t > 0) {
      printf("check_sarek_compat: no compiler for %s here\n", arch[t]);
      continue;
    }
    if (rc != 0)
      printf("%s: %.4000s\n", arch[t], hipd_last_error(conn));
    ck_assert_int_eq(rc, 0);
    ck_assert_int_gt(info_int(info, "bytes"), 0);
    hipd_info_free(info);
    printf("check_sarek_compat: CUDA source compiled for %s\n", arch[t]);
  }
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------- fp contraction */

/* out[i] = a[i] * b[i] + c[i], in float. */
static const char FMA_IR[] =
    "{\"ir\": 1, \"kernel\": {\"name\": \"mul_add\", \"params\": ["
    "[\"param\", {\"name\": \"a\", \"id\": 0, \"type\": [\"vec\", "
    "[\"f32\"]]}, {\"elt\": [\"f32\"], \"mem\": \"global\"}],"
    "[\"param\", {\"name\": \"b\", \"id\": 1, \"type\": [\"vec\", "
    "[\"f32\"]]}, {\"elt\": [\"f32\"], \"mem\": \"global\"}],"
    "[\"param\", {\"name\": \"c\", \"id\": 2, \"type\": [\"vec\", "
    "[\"f32\"]]}, {\"elt\": [\"f32\"], \"mem\": \"global\"}],"
    "[\"param\", {\"name\": \"out\", \"id\": 3, \"type\": [\"vec\", "
    "[\"f32\"]]}, {\"elt\": [\"f32\"], \"mem\": \"global\"}],"
    "[\"param\", {\"name\": \"n\", \"id\": 4, \"type\": [\"i32\"]}, null]],"
    "\"body\": [\"let\", {\"name\": \"i\", \"id\": 5, \"type\": [\"i32\"]},"
    " [\"intrinsic\", [\"Gpu\"], \"global_thread_id\", []],"
    " [\"if\", [\"binop\", \"lt\", [\"var\", 5, \"i\"], [\"var\", 4, \"n\"]],"
    "  [\"assign\", [\"aelem\", \"out\", [\"var\", 5, \"i\"]],"
    "   [\"binop\", \"add\", [\"binop\", \"mul\", [\"aread\", \"a\", [\"var\", "
    "5, \"i\"]], [\"aread\", \"b\", [\"var\", 5, \"i\"]]],"
    "    [\"aread\", \"c\", [\"var\", 5, \"i\"]]]], null]]}}";

#define NF 64

static void ir_bytes(msgpack_sbuffer *sb)
{
  char err[256];

  msgpack_sbuffer_init(sb);
  ck_assert_msg(
      ir_json_to_msgpack(FMA_IR, strlen(FMA_IR), sb, err, sizeof(err)) == 0,
      "%s", err);
}

/* a*b rounds (a tie, to even) to exactly -c, so the unfused result is 0
 * and the fused one the product's low bits, 2^-24 (times i + 1). */
static void fma_inputs(float *a, float *b, float *c)
{
  for (int i = 0; i < NF; i++) {
    float s = (float)(i + 1);
    a[i] = 1.0f + ldexpf(1.0f, -12);
    b[i] = s * (1.0f + ldexpf(1.0f, -12));
    c[i] = -s * (1.0f + ldexpf(1.0f, -11));
  }
}

/* Run kernel @p k on @p dev; @p fused: every element must be the fused
 * result (else the unfused one, as the host computes it here). */
static void fma_run(hipd_conn_t *conn, int dev, hipd_kernel_t k, int fused,
                    const char *how)
{
  float a[NF], b[NF], c[NF], out[NF];
  hipd_buffer_t ba, bb, bc, bo;
  hipd_args_t *args = args_new();
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {NF, 1, 1};

  fma_inputs(a, b, c);
  OK(conn, hipd_mem_alloc(conn, dev, NF, "float32", &ba));
  OK(conn, hipd_mem_alloc(conn, dev, NF, "float32", &bb));
  OK(conn, hipd_mem_alloc(conn, dev, NF, "float32", &bc));
  OK(conn, hipd_mem_alloc(conn, dev, NF, "float32", &bo));
  OK(conn, hipd_mem_write(conn, ba, 0, a, sizeof(a)));
  OK(conn, hipd_mem_write(conn, bb, 0, b, sizeof(b)));
  OK(conn, hipd_mem_write(conn, bc, 0, c, sizeof(c)));
  hipd_args_buffer(args, ba, 0);
  hipd_args_i32(args, NF);
  hipd_args_buffer(args, bb, 0);
  hipd_args_i32(args, NF);
  hipd_args_buffer(args, bc, 0);
  hipd_args_i32(args, NF);
  hipd_args_buffer(args, bo, 0);
  hipd_args_i32(args, NF);
  hipd_args_i32(args, NF);
  OK(conn, hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_mem_read(conn, bo, 0, out, sizeof(out)));
  for (int i = 0; i < NF; i++) {
    volatile float p = a[i] * b[i]; /* rounded: never contracted */
    float unfused = p + c[i], fusedv = fmaf(a[i], b[i], c[i]);
    float want = fused ? fusedv : unfused;
    ck_assert_msg(unfused != fusedv, "the inputs do not tell fused from not");
    ck_assert_msg(out[i] == want,
                  "device %d (%s): out[%d] = %a, want %a (%s; the other is "
                  "%a)",
                  dev, how, i, out[i], want, fused ? "fused" : "not fused",
                  fused ? unfused : fusedv);
  }
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  OK(conn, hipd_mem_free(conn, bc));
  OK(conn, hipd_mem_free(conn, bo));
}

START_TEST(test_fp_contract_off_by_default)
{
  hipd_conn_t *conn = connect_to(shared);
  const char *const native[] = {"-march=native", NULL};
  const char *const native_fused[] = {"-march=native", "--fmad=true", NULL};
  const char *const fused_opts[] = {"--fmad=true", NULL};
  const char *const off_opts[] = {"--fmad=false", NULL};
  int n = device_count(conn);
  msgpack_sbuffer ir;

  ir_bytes(&ir);
  for (int dev = 0; dev < n; dev++) {
    hipd_info_t *d_info = NULL, *off = NULL, *dflt = NULL, *on = NULL;
    hipd_kernel_t k;
    int cpu = device_is_cpu(conn, dev);

    /* Default: no contraction. On the CPU device with -march=native the
     * host's compiler would contract (g++ and clang++ default to fast
     * contraction for C++) wherever the CPU has FMA. */
    OK(conn, hipd_kernel_compile_ir(conn, dev, ir.data, ir.size, NULL, NULL,
                                    cpu ? native : NULL, &k, &dflt));
    fma_run(conn, dev, k, 0, cpu ? "default, -march=native" : "default");
    OK(conn, hipd_kernel_destroy(conn, k));

    /* --fmad=false given is the same compile as the default. */
    if (!cpu) {
      OK(conn, hipd_kernel_compile_ir(conn, dev, ir.data, ir.size, NULL, NULL,
                                      off_opts, &k, &off));
      ck_assert_str_eq(info_str(off, "key"), info_str(dflt, "key"));
      OK(conn, hipd_kernel_destroy(conn, k));
    }

    /* --fmad=true: contraction allowed, another key. A GPU fuses a*b+c;
     * the CPU device does where its compiler may use FMA. */
    OK(conn, hipd_kernel_compile_ir(conn, dev, ir.data, ir.size, NULL, NULL,
                                    cpu ? native_fused : fused_opts, &k, &on));
    ck_assert_str_ne(info_str(on, "key"), info_str(dflt, "key"));
    if (!cpu || __builtin_cpu_supports("fma"))
      fma_run(conn, dev, k, 1, "--fmad=true");
    else
      printf("check_sarek_compat: this CPU has no FMA: the host compiler "
             "never contracts; the option's effect was checked through the "
             "cache key only\n");
    OK(conn, hipd_kernel_destroy(conn, k));
    hipd_info_free(d_info);
    hipd_info_free(off);
    hipd_info_free(dflt);
    hipd_info_free(on);
  }
  msgpack_sbuffer_destroy(&ir);
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------- run_source wait */

static const char SCALE_SRC[] =
    "extern \"C\" __global__ void scale(float *x, float s, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    x[i] = x[i] * s + 1.0f;\n"
    "}\n";

#define NS 1000

/* Spins for about @p cycles of the device's clock, then marks x[0]. */
static const char SPIN_SRC[] =
    "extern \"C\" __global__ void spin(float *x, long long cycles)\n"
    "{\n"
    "  long long t0 = clock64();\n"
    "  while (clock64() - t0 < cycles)\n"
    "    ;\n"
    "  x[0] = 42.0f;\n"
    "}\n";

START_TEST(test_run_source_wait)
{
  hipd_conn_t *conn = connect_to(shared);
  const uint32_t grid[3] = {(NS + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
  hipd_args_t *args = args_new();
  int n = device_count(conn);

  for (int dev = 0; dev < n; dev++) {
    float x[NS], got[NS];
    hipd_buffer_t b;
    hipd_stream_t st;

    for (int i = 0; i < NS; i++)
      x[i] = (float)i;
    OK(conn, hipd_device_set_current(conn, dev));
    OK(conn, hipd_mem_alloc(conn, dev, NS, "float32", &b));
    OK(conn, hipd_mem_write(conn, b, 0, x, sizeof(x)));
    hipd_args_clear(args);
    hipd_args_buffer(args, b, 0);
    hipd_args_f32(args, 2.0f);
    hipd_args_i32(args, NS);
    /* wait false, twice, then a stream.synchronize: both ran, in order. */
    OK(conn, hipd_run_source_async(conn, SCALE_SRC, "hip", "scale", grid, block,
                                   0, args));
    OK(conn, hipd_run_source_async(conn, SCALE_SRC, "cuda", "scale", grid,
                                   block, 0, args));
    OK(conn, hipd_stream_default(conn, dev, &st));
    OK(conn, hipd_stream_synchronize(conn, st));
    OK(conn, hipd_mem_read(conn, b, 0, got, sizeof(got)));
    for (int i = 0; i < NS; i++) {
      float want = ((float)i * 2.0f + 1.0f) * 2.0f + 1.0f;
      ck_assert_msg(got[i] == want, "device %d: x[%d] = %g, want %g", dev, i,
                    got[i], want);
    }
    /* wait false, then a synchronous mem.read sees it. */
    OK(conn, hipd_run_source_async(conn, SCALE_SRC, "hip", "scale", grid, block,
                                   0, args));
    OK(conn, hipd_mem_read(conn, b, 0, got, sizeof(got)));
    for (int i = 0; i < NS; i++) {
      float want = (((float)i * 2.0f + 1.0f) * 2.0f + 1.0f) * 2.0f + 1.0f;
      ck_assert_msg(got[i] == want, "device %d: x[%d] = %g, want %g", dev, i,
                    got[i], want);
    }
    /* the default, wait: done when answered. */
    OK(conn,
       hipd_run_source(conn, SCALE_SRC, "hip", "scale", grid, block, 0, args));
    OK(conn, hipd_mem_read(conn, b, 0, got, 4 * sizeof(float)));
    ck_assert(got[1] == ((((1.0f * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1));
    /* On a GPU, wait false answers while the kernel still runs: a kernel
     * that spins for about a second (2e9 cycles of a clock of 1 to 2 GHz)
     * is not done when the answer comes, and the default stream is then
     * busy; with wait it is done. (The CPU device answers once the kernel
     * has run, whatever wait says: PROTOCOL.md.) */
    if (!device_is_cpu(conn, dev)) {
      const uint32_t one[3] = {1, 1, 1};
      int idle = -1;
      hipd_args_clear(args);
      hipd_args_buffer(args, b, 0);
      hipd_args_i64(args, 2000000000LL);
      OK(conn, hipd_run_source_async(conn, SPIN_SRC, "cuda", "spin", one, one,
                                     0, args));
      OK(conn, hipd_stream_query(conn, st, &idle));
      ck_assert_msg(idle == 0,
                    "device %d: run_source with wait false answered after "
                    "its kernel had run",
                    dev);
      OK(conn, hipd_stream_synchronize(conn, st));
      hipd_args_clear(args);
      hipd_args_buffer(args, b, 0);
      hipd_args_i64(args, 1000LL);
      OK(conn,
         hipd_run_source(conn, SPIN_SRC, "cuda", "spin", one, one, 0, args));
      OK(conn, hipd_stream_query(conn, st, &idle));
      ck_assert_msg(idle == 1,
                    "device %d: run_source with wait answered "
                    "before its kernel had run",
                    dev);
      OK(conn, hipd_mem_read(conn, b, 0, got, sizeof(float)));
      ck_assert(got[0] == 42.0f);
    }
    OK(conn, hipd_mem_free(conn, b));
  }
  hipd_args_free(args);
  hipd_close(conn);
}
END_TEST

/* -------------------------------------------------------------- fixtures */

static void shared_setup(void)
{
  shared = testutil_start_cached(shared_cache);
}

static void shared_teardown(void)
{
  stop_checked(&shared);
}

static Suite *sarek_compat_suite(void)
{
  Suite *s = suite_create("sarek_compat");
  TCase *tc = tcase_create("sarek");

  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_langs_every_device);
  tcase_add_test(tc, test_cuda_source_runs);
  tcase_add_test(tc, test_cuda_errors);
  tcase_add_test(tc, test_cuda_compile_for_gpu);
  tcase_add_test(tc, test_fp_contract_off_by_default);
  tcase_add_test(tc, test_run_source_wait);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return testutil_main_cached("check_sarek_compat", "sarekcache", shared_cache,
                              sizeof(shared_cache), sarek_compat_suite);
}
