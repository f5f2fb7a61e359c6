/* SPDX-License-Identifier: MIT */
/* daemon/kernels/lang.c: CUDA source made into what each platform's
 * compiler takes (see lang.h). */
#include "config.h"

#include "kernels/lang.h"

#include <stdlib.h>
#include <string.h>

#include "hipd.h"

const char *const lang_names[] = {"hip", "cuda", NULL};

/* AMD (hiprtc, clang). CUDA's warp is 32 threads; a wavefront is 64 on
 * CDNA (gfx9) and 32 on RDNA. CUDA source is compiled as if each 32-lane
 * half of a wavefront were a warp: warpSize is 32, the shuffles default
 * to (and are meant for) width 32, and a ballot, __activemask and the
 * votes see the caller's half only, its lanes as bits 0 to 31 (lane 32 of
 * the wavefront is bit 0 of the upper half's ballot). A mask is accepted
 * as 32 or 64 bits and only its low 32 bits count: HIP's own
 * __shfl_sync family wants a 64-bit mask of the whole wavefront, which
 * CUDA code never has. The shuffles do not check the mask (as HIP's do
 * not): all the lanes of a width segment must take part, as CUDA
 * requires for a full mask. The names are macros over hipd_cuda::, so
 * that they win over whatever HIP version's own functions of those
 * names. hiprtc has HIP's runtime and hip_fp16.h (__half and its
 * functions) built in, ahead of every program: including them again
 * redefines them. */
static const char prelude_amd[] =
    "/* hipd: CUDA source on AMD (lang \"cuda\"); see PROTOCOL.md */\n"
    "#define __HIPD_CUDA__ 1\n"
    "namespace hipd_cuda {\n"
    "__device__ __forceinline__ unsigned int half_shift()\n"
    "{ return __lane_id() & 32u; }\n"
    "__device__ __forceinline__ unsigned int activemask()\n"
    "{ return (unsigned int)(__ballot(1) >> half_shift()); }\n"
    "__device__ __forceinline__ unsigned int\n"
    "ballot_sync(unsigned long long mask, int pred)\n"
    "{ return (unsigned int)(__ballot(pred) >> half_shift()) &\n"
    "         (unsigned int)mask; }\n"
    "__device__ __forceinline__ int any_sync(unsigned long long mask, int "
    "pred)\n"
    "{ return ballot_sync(mask, pred) != 0u; }\n"
    "__device__ __forceinline__ int all_sync(unsigned long long mask, int "
    "pred)\n"
    "{ unsigned int m = (unsigned int)mask & activemask();\n"
    "  return ballot_sync(m, pred) == m; }\n"
    "__device__ __forceinline__ void syncwarp(unsigned long long = "
    "0xffffffffu)\n"
    "{ __builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\");\n"
    "  __builtin_amdgcn_wave_barrier();\n"
    "  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\"); }\n"
    "template <class T> __device__ __forceinline__ T\n"
    "shfl_sync(unsigned long long, T v, int src, int width = 32)\n"
    "{ return __shfl(v, src, width); }\n"
    "template <class T> __device__ __forceinline__ T\n"
    "shfl_up_sync(unsigned long long, T v, unsigned int d, int width = 32)\n"
    "{ return __shfl_up(v, d, width); }\n"
    "template <class T> __device__ __forceinline__ T\n"
    "shfl_down_sync(unsigned long long, T v, unsigned int d, int width = 32)\n"
    "{ return __shfl_down(v, d, width); }\n"
    "template <class T> __device__ __forceinline__ T\n"
    "shfl_xor_sync(unsigned long long, T v, int m, int width = 32)\n"
    "{ return __shfl_xor(v, m, width); }\n"
    "} /* namespace hipd_cuda */\n"
    "#define __activemask hipd_cuda::activemask\n"
    "#define __ballot_sync hipd_cuda::ballot_sync\n"
    "#define __any_sync hipd_cuda::any_sync\n"
    "#define __all_sync hipd_cuda::all_sync\n"
    "#define __syncwarp hipd_cuda::syncwarp\n"
    "#define __shfl_sync hipd_cuda::shfl_sync\n"
    "#define __shfl_up_sync hipd_cuda::shfl_up_sync\n"
    "#define __shfl_down_sync hipd_cuda::shfl_down_sync\n"
    "#define __shfl_xor_sync hipd_cuda::shfl_xor_sync\n"
    "#define warpSize 32\n"
    /* cuda_fp16.h functions that hiprtc's hip_fp16.h (ROCm 5.2) lacks;
     * macros again, so that a newer HIP's own do not clash */
    "namespace hipd_cuda {\n"
    "__device__ __forceinline__ __half hbits(unsigned short b)\n"
    "{ return __ushort_as_half(b); }\n"
    "__device__ __forceinline__ __half double2half(double d)\n"
    "{ float f = (float)d;\n"
    "  if (d == d && (double)f != d) {\n"
    "    unsigned int b = __float_as_uint(f);\n"
    "    if (__builtin_fabs((double)f) > __builtin_fabs(d)) b -= 1u;\n"
    "    f = __uint_as_float(b | 1u);\n"
    "  }\n"
    "  return __float2half(f); }\n"
    "__device__ __forceinline__ bool hisnan(__half a)\n"
    "{ return (__half_as_ushort(a) & 0x7fffu) > 0x7c00u; }\n"
    "__device__ __forceinline__ __half hmax(__half a, __half b)\n"
    "{ if (hisnan(a) && hisnan(b)) return hbits(0x7fffu);\n"
    "  if ((__half_as_ushort(a) | __half_as_ushort(b)) == 0x8000u)\n"
    "    return hbits(0);\n"
    "  return hisnan(a) ? b : hisnan(b) ? a\n"
    "       : __half2float(a) < __half2float(b) ? b : a; }\n"
    "__device__ __forceinline__ __half hmin(__half a, __half b)\n"
    "{ if (hisnan(a) && hisnan(b)) return hbits(0x7fffu);\n"
    "  if ((__half_as_ushort(a) | __half_as_ushort(b)) == 0x8000u)\n"
    "    return hbits(0x8000u);\n"
    "  return hisnan(a) ? b : hisnan(b) ? a\n"
    "       : __half2float(b) < __half2float(a) ? b : a; }\n"
    "} /* namespace hipd_cuda */\n"
    "#define __double2half hipd_cuda::double2half\n"
    "#define __hmax hipd_cuda::hmax\n"
    "#define __hmin hipd_cuda::hmin\n";

/* NVIDIA: NVRTC compiles CUDA; only cuda_fp16.h is not built in (the
 * HIP driver gives NVRTC the toolkit's include directory). */
static const char prelude_nvidia[] =
    "/* hipd: CUDA source on NVIDIA (lang \"cuda\"); see PROTOCOL.md */\n"
    "#include <cuda_fp16.h>\n"
    "#define __HIPD_CUDA__ 1\n";

/* The CPU device: hipd_cpu_device.h has the rest, __half included (IR
 * version 2's f16: CUDA's bits, conversions rounding to nearest even);
 * cuda_fp16.h's functions here, in float rounded back to nearest even
 * (exact for +, -, *, /: a float holds their exact result rounded once). */
static const char prelude_host[] =
    "/* hipd: CUDA source on the CPU device (lang \"cuda\"); see "
    "PROTOCOL.md */\n"
    "#define __HIPD_CUDA__ 1\n"
    "static inline __half hipd_cuda_hbits(unsigned short b)\n"
    "{ __half h; h.__x = b; return h; }\n"
    "static inline __half __double2half(double d) { return __half(d); }\n"
    "static inline __half __int2half_rn(int i) { return __half((float)i); }\n"
    "static inline int __half2int_rz(__half h) { return (int)(float)h; }\n"
    "static inline short __half_as_short(__half h) { return (short)h.__x; }\n"
    "static inline __half __short_as_half(short s)\n"
    "{ return hipd_cuda_hbits((unsigned short)s); }\n"
    "static inline __half __hadd(__half a, __half b)\n"
    "{ return __half((float)a + (float)b); }\n"
    "static inline __half __hsub(__half a, __half b)\n"
    "{ return __half((float)a - (float)b); }\n"
    "static inline __half __hmul(__half a, __half b)\n"
    "{ return __half((float)a * (float)b); }\n"
    "static inline __half __hdiv(__half a, __half b)\n"
    "{ return __half((float)a / (float)b); }\n"
    "static inline __half __hfma(__half a, __half b, __half c)\n"
    "{ return __half(__builtin_fma((double)(float)a, (double)(float)b,"
    " (double)(float)c)); }\n"
    "static inline __half __hneg(__half a)\n"
    "{ return hipd_cuda_hbits((unsigned short)(a.__x ^ 0x8000u)); }\n"
    "static inline __half __habs(__half a)\n"
    "{ return hipd_cuda_hbits((unsigned short)(a.__x & 0x7fffu)); }\n"
    "static inline bool __heq(__half a, __half b) { return (float)a == "
    "(float)b; }\n"
    "static inline bool __hne(__half a, __half b)\n"
    "{ return (float)a < (float)b || (float)a > (float)b; }\n"
    "static inline bool __hlt(__half a, __half b) { return (float)a < "
    "(float)b; }\n"
    "static inline bool __hle(__half a, __half b) { return (float)a <= "
    "(float)b; }\n"
    "static inline bool __hgt(__half a, __half b) { return (float)a > "
    "(float)b; }\n"
    "static inline bool __hge(__half a, __half b) { return (float)a >= "
    "(float)b; }\n"
    "static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > "
    "0x7c00u; }\n"
    "static inline __half __hmax(__half a, __half b)\n"
    "{ if (__hisnan(a) && __hisnan(b)) return hipd_cuda_hbits(0x7fffu);\n"
    "  if ((a.__x | b.__x) == 0x8000u) return hipd_cuda_hbits(0);\n"
    "  return __hisnan(a) ? b : __hisnan(b) ? a : (float)a < (float)b ? b : a; "
    "}\n"
    "static inline __half __hmin(__half a, __half b)\n"
    "{ if (__hisnan(a) && __hisnan(b)) return hipd_cuda_hbits(0x7fffu);\n"
    "  if ((a.__x | b.__x) == 0x8000u) return hipd_cuda_hbits(0x8000u);\n"
    "  return __hisnan(a) ? b : __hisnan(b) ? a : (float)b < (float)a ? b : a; "
    "}\n"
    "static inline __half hsqrt(__half a)\n"
    "{ return __half(__builtin_sqrtf((float)a)); }\n"
    "static inline __half operator+(__half a, __half b) { return __hadd(a, "
    "b); }\n"
    "static inline __half operator-(__half a, __half b) { return __hsub(a, "
    "b); }\n"
    "static inline __half operator*(__half a, __half b) { return __hmul(a, "
    "b); }\n"
    "static inline __half operator/(__half a, __half b) { return __hdiv(a, "
    "b); }\n"
    "static inline __half operator-(__half a) { return __hneg(a); }\n"
    "static inline __half &operator+=(__half &a, __half b) { return a = a + "
    "b; }\n"
    "static inline __half &operator*=(__half &a, __half b) { return a = a * "
    "b; }\n";

/* The CUDA toolkit headers the prelude stands for. */
static const char *const runtime_headers[] = {"cuda.h",
                                              "cuda_runtime.h",
                                              "cuda_runtime_api.h",
                                              "cuda_fp16.h",
                                              "device_launch_parameters.h",
                                              NULL};

int lang_known(const char *lang)
{
  for (const char *const *l = lang_names; *l != NULL; l++)
    if (strcmp(*l, lang) == 0)
      return 1;
  return 0;
}

int lang_is_cuda(const char *lang)
{
  return lang != NULL && strcmp(lang, "cuda") == 0;
}

static const char *prelude_of(const char *platform)
{
  if (strcmp(platform, "amd") == 0)
    return prelude_amd;
  if (strcmp(platform, "nvidia") == 0)
    return prelude_nvidia;
  return prelude_host;
}

/* Is line @p p[0, n) an #include of one of runtime_headers? Spaces and
 * tabs may come around '#' and before the name, in <> or "". */
static int runtime_include(const char *p, size_t n)
{
  const char *e = p + n;
  size_t k;

  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  if (p == e || *p++ != '#')
    return 0;
  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  if ((size_t)(e - p) < 7 || memcmp(p, "include", 7) != 0)
    return 0;
  p += 7;
  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  if (p == e || (*p != '<' && *p != '"'))
    return 0;
  p++;
  for (const char *const *h = runtime_headers; *h != NULL; h++) {
    k = strlen(*h);
    if ((size_t)(e - p) > k && memcmp(p, *h, k) == 0 &&
        (p[k] == '>' || p[k] == '"'))
      return 1;
  }
  return 0;
}

int lang_source(const char *platform, const char *src, size_t len, char **out,
                size_t *out_len)
{
  static const char line[] = "#line 1 \"kernel.cu\"\n";
  const char *pre = prelude_of(platform);
  size_t npre = strlen(pre), n = 0;
  char *buf = malloc(npre + sizeof(line) - 1 + len + 1);

  *out = NULL;
  *out_len = 0;
  if (buf == NULL)
    return HIPD_ENOMEM;
  memcpy(buf, pre, npre);
  n = npre;
  memcpy(buf + n, line, sizeof(line) - 1);
  n += sizeof(line) - 1;
  for (size_t i = 0; i < len;) {
    const char *nl = memchr(src + i, '\n', len - i);
    size_t end = nl != NULL ? (size_t)(nl - src) : len;

    /* An emptied line keeps its newline: line numbers stay the client's. */
    if (!runtime_include(src + i, end - i)) {
      memcpy(buf + n, src + i, end - i);
      n += end - i;
    }
    if (nl != NULL)
      buf[n++] = '\n';
    i = end + 1;
  }
  buf[n] = '\0';
  *out = buf;
  *out_len = n;
  return 0;
}
