/* SPDX-License-Identifier: MIT */
/* hipd_cpu_device.h: the HIP/CUDA kernel language on the host, for hipd's
 * CPU device.
 *
 * The CPU device compiles a client's kernel source with the host C++
 * compiler, with this header force-included (-include), into a shared object
 * that hipd's kernel runner (hipd-cpu-runner) loads and executes:
 *
 *  - A GPU thread is a call of the kernel function. The threads of one block
 *    run on one worker thread of the runner, as fibers that switch at every
 *    __syncthreads(); blocks are spread over the runner's workers.
 *  - threadIdx, blockIdx, blockDim and gridDim read the *running fiber's*
 *    context through hipd_cpu_cur, a pointer that is thread-local to the
 *    worker and that the runner updates at every fiber switch.
 *  - __shared__ variables are `static thread_local`: one worker runs one
 *    block at a time, so the fibers of a block share them and other workers
 *    have their own. `extern __shared__ T name[];` (dynamic shared memory) is
 *    rewritten by the compile step into a reference to the worker's dynamic
 *    shared buffer (see cpu_compile.c); HIP_DYNAMIC_SHARED does the same.
 *  - warpSize is 1: the threads of a block are not run in lock-step groups,
 *    so the warp functions below are those of a one-lane warp.
 *
 * The first part of this file is the binary interface between a compiled
 * kernel module and the runner; it is valid C as well, and the runner (a C
 * program) includes it for that part only. Everything else is C++17.
 */
#ifndef HIPD_CPU_DEVICE_H
#define HIPD_CPU_DEVICE_H

/* ======================================================================
 * Module <-> runner interface (C and C++)
 * ====================================================================== */
#include <stdint.h>

/* Bumped whenever anything in this section changes. A module reports the
 * version it was compiled with (hipd_cpu_abi_version) and the runner refuses
 * a module whose version differs from its own. */
#define HIPD_CPU_ABI_VERSION 1

/* Type codes of kernel parameters, as reported by a module's signature. */
enum {
  HIPD_CPU_T_PTR = 1, /* any pointer */
  HIPD_CPU_T_I8,
  HIPD_CPU_T_U8,
  HIPD_CPU_T_I16,
  HIPD_CPU_T_U16,
  HIPD_CPU_T_I32,
  HIPD_CPU_T_U32,
  HIPD_CPU_T_I64,
  HIPD_CPU_T_U64,
  HIPD_CPU_T_F32,
  HIPD_CPU_T_F64,
  HIPD_CPU_T_BOOL,
  HIPD_CPU_T_MAX_ = HIPD_CPU_T_BOOL
};

/* Arguments of __syncthreads-family barriers (hipd_cpu_ctx_t.sync). */
enum {
  HIPD_CPU_SYNC_PLAIN = 0, /* __syncthreads(): result unused */
  HIPD_CPU_SYNC_COUNT,     /* __syncthreads_count(): threads with pred != 0 */
  HIPD_CPU_SYNC_AND,       /* __syncthreads_and(): all preds != 0 */
  HIPD_CPU_SYNC_OR         /* __syncthreads_or(): any pred != 0 */
};

#ifdef __cplusplus
struct uint3 {
  unsigned int x, y, z;
};
typedef uint3 hipd_cpu_uint3_t;
#else
typedef struct hipd_cpu_uint3 {
  unsigned int x, y, z;
} hipd_cpu_uint3_t;
#endif

/* The context of one running GPU thread. The runner owns it (one per fiber)
 * and points the module's hipd_cpu_cur at the running fiber's context. */
typedef struct hipd_cpu_ctx {
  hipd_cpu_uint3_t thread_idx;
  hipd_cpu_uint3_t block_idx;
  hipd_cpu_uint3_t block_dim;
  hipd_cpu_uint3_t grid_dim;
  void *dyn_shared;          /* the worker's dynamic shared memory; its
                                address never changes for a worker */
  uint64_t dyn_shared_bytes; /* the launch's dynamic shared size */
  /* Barrier of the block: returns when every thread of the block that has
   * not finished has reached a barrier. @p op is a HIPD_CPU_SYNC_* code;
   * the result is the block-wide count/and/or of @p pred. */
  int (*sync)(struct hipd_cpu_ctx *ctx, int op, int pred);
  void *rt; /* the runner's own (the fiber) */
} hipd_cpu_ctx_t;

/* A kernel's signature: what hipd_sig_<name>() of a module returns. */
typedef struct hipd_kernel_sig {
  void (*entry)(void);  /* the kernel function, called through libffi */
  uint32_t nargs;       /* number of declared parameters */
  const uint8_t *types; /* nargs HIPD_CPU_T_* codes */
} hipd_kernel_sig_t;

/* Every module exports (C linkage, default visibility):
 *   int hipd_cpu_abi_version(void);
 *   hipd_cpu_ctx_t **hipd_cpu_tls_slot(void);  the calling thread's
 *                                              hipd_cpu_cur
 *   const hipd_kernel_sig_t *hipd_sig_<encoded name>(void);  one per kernel
 * where the encoded name keeps [A-Za-z0-9], turns '_' into "__" and any
 * other byte into "_XX" (two upper-case hex digits). */

#if defined(__cplusplus) && !defined(HIPD_CPU_ABI_ONLY)
/* ======================================================================
 * The kernel language (C++17)
 * ====================================================================== */
#if __cplusplus < 201703L
#error "hipd's CPU device compiles kernels as C++17 or later"
#endif

#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <math.h> /* libstdc++'s wrapper: float overloads in :: too */
#include <type_traits>

#define HIPD_CPU_DEVICE 1

/* The running GPU thread's context; see hipd_cpu_tls_slot(). */
static thread_local hipd_cpu_ctx_t *hipd_cpu_cur;

extern "C" __attribute__((visibility("default"))) int hipd_cpu_abi_version(void)
{
  return HIPD_CPU_ABI_VERSION;
}

extern "C" __attribute__((visibility("default"))) hipd_cpu_ctx_t **
hipd_cpu_tls_slot(void)
{
  return &hipd_cpu_cur;
}

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __shared__ static thread_local
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
#define HIP_DYNAMIC_SHARED_ATTRIBUTE
/* __restrict__ is a keyword of GCC and clang already. */

#define HIPD_CPU_INLINE static inline __attribute__((always_inline))

/* ---- vector types ---- */
#define HIPD_CPU_VEC124(N, T, A2, A4)                                          \
  struct N##1                                                                  \
  {                                                                            \
    T x;                                                                       \
  };                                                                           \
  struct alignas(A2) N##2                                                      \
  {                                                                            \
    T x, y;                                                                    \
  };                                                                           \
  struct alignas(A4) N##4                                                      \
  {                                                                            \
    T x, y, z, w;                                                              \
  };                                                                           \
  HIPD_CPU_INLINE N##1 make_##N##1(T x)                                        \
  {                                                                            \
    return N##1 {x};                                                           \
  }                                                                            \
  HIPD_CPU_INLINE N##2 make_##N##2(T x, T y)                                   \
  {                                                                            \
    return N##2 {x, y};                                                        \
  }                                                                            \
  HIPD_CPU_INLINE N##4 make_##N##4(T x, T y, T z, T w)                         \
  {                                                                            \
    return N##4 {x, y, z, w};                                                  \
  }
#define HIPD_CPU_VEC3(N, T)                                                    \
  struct N##3                                                                  \
  {                                                                            \
    T x, y, z;                                                                 \
  };                                                                           \
  HIPD_CPU_INLINE N##3 make_##N##3(T x, T y, T z)                              \
  {                                                                            \
    return N##3 {x, y, z};                                                     \
  }

HIPD_CPU_VEC124(char, signed char, 2, 4)
HIPD_CPU_VEC3(char, signed char)
HIPD_CPU_VEC124(uchar, unsigned char, 2, 4)
HIPD_CPU_VEC3(uchar, unsigned char)
HIPD_CPU_VEC124(short, short, 4, 8)
HIPD_CPU_VEC3(short, short)
HIPD_CPU_VEC124(ushort, unsigned short, 4, 8)
HIPD_CPU_VEC3(ushort, unsigned short)
HIPD_CPU_VEC124(int, int, 8, 16)
HIPD_CPU_VEC3(int, int)
HIPD_CPU_VEC124(uint, unsigned int, 8, 16)
HIPD_CPU_INLINE uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z)
{
  return uint3{x, y, z};
}
HIPD_CPU_VEC124(long, long, 16, 16)
HIPD_CPU_VEC3(long, long)
HIPD_CPU_VEC124(ulong, unsigned long, 16, 16)
HIPD_CPU_VEC3(ulong, unsigned long)
HIPD_CPU_VEC124(longlong, long long, 16, 16)
HIPD_CPU_VEC3(longlong, long long)
HIPD_CPU_VEC124(ulonglong, unsigned long long, 16, 16)
HIPD_CPU_VEC3(ulonglong, unsigned long long)
HIPD_CPU_VEC124(float, float, 8, 16)
HIPD_CPU_VEC3(float, float)
HIPD_CPU_VEC124(double, double, 16, 16)
HIPD_CPU_VEC3(double, double)

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz)
  {
  }
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z)
  {
  }
  constexpr operator uint3() const
  {
    return uint3{x, y, z};
  }
};

/* ---- thread and block coordinates (read-only, per GPU thread) ---- */
#define threadIdx (static_cast<const ::uint3 &>(::hipd_cpu_cur->thread_idx))
#define blockIdx (static_cast<const ::uint3 &>(::hipd_cpu_cur->block_idx))
#define blockDim (static_cast<const ::uint3 &>(::hipd_cpu_cur->block_dim))
#define gridDim (static_cast<const ::uint3 &>(::hipd_cpu_cur->grid_dim))
#define warpSize 1

#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)

/* ---- dynamic shared memory ---- */
/* The base of this worker's dynamic shared buffer. Its address is fixed for
 * the worker's lifetime, so a thread_local reference bound to it once per
 * worker (what `extern __shared__ T a[];` is rewritten to) stays valid. */
HIPD_CPU_INLINE void *hipd_cpu_dyn_shared_base(void)
{
  return ::hipd_cpu_cur->dyn_shared;
}
#define HIP_DYNAMIC_SHARED(type, var)                                          \
  static thread_local type(&var)[] =                                           \
      *reinterpret_cast<type(*)[]>(::hipd_cpu_dyn_shared_base());

/* ---- barriers and fences ---- */
/* The compiler barriers around the call keep loads and stores of shared
 * variables on their side of the barrier even where the compiler can prove
 * that no other code of the module takes their address. */
HIPD_CPU_INLINE int hipd_cpu_sync(int op, int pred)
{
  __asm__ __volatile__("" ::: "memory");
  int r = ::hipd_cpu_cur->sync(::hipd_cpu_cur, op, pred);
  __asm__ __volatile__("" ::: "memory");
  return r;
}
HIPD_CPU_INLINE void __syncthreads(void)
{
  (void)hipd_cpu_sync(HIPD_CPU_SYNC_PLAIN, 0);
}
HIPD_CPU_INLINE int __syncthreads_count(int pred)
{
  return hipd_cpu_sync(HIPD_CPU_SYNC_COUNT, pred);
}
HIPD_CPU_INLINE int __syncthreads_and(int pred)
{
  return hipd_cpu_sync(HIPD_CPU_SYNC_AND, pred);
}
HIPD_CPU_INLINE int __syncthreads_or(int pred)
{
  return hipd_cpu_sync(HIPD_CPU_SYNC_OR, pred);
}
HIPD_CPU_INLINE void __threadfence(void)
{
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
/* The fibers of a block share one OS thread: a compiler barrier orders them. */
HIPD_CPU_INLINE void __threadfence_block(void)
{
  __asm__ __volatile__("" ::: "memory");
}
HIPD_CPU_INLINE void __threadfence_system(void)
{
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- warp functions of a one-lane warp ---- */
HIPD_CPU_INLINE void __syncwarp(unsigned int mask = 0xffffffffu)
{
  (void)mask;
  __asm__ __volatile__("" ::: "memory");
}
HIPD_CPU_INLINE unsigned int __activemask(void)
{
  return 1u;
}
HIPD_CPU_INLINE unsigned int __lane_id(void)
{
  return 0u;
}
HIPD_CPU_INLINE unsigned int __ballot_sync(unsigned int mask, int pred)
{
  return (mask & 1u) && pred ? 1u : 0u;
}
HIPD_CPU_INLINE unsigned long long __ballot(int pred)
{
  return pred ? 1ull : 0ull;
}
HIPD_CPU_INLINE int __any_sync(unsigned int mask, int pred)
{
  return (mask & 1u) && pred;
}
HIPD_CPU_INLINE int __all_sync(unsigned int mask, int pred)
{
  return !(mask & 1u) || pred;
}
HIPD_CPU_INLINE int __any(int pred)
{
  return pred != 0;
}
HIPD_CPU_INLINE int __all(int pred)
{
  return pred != 0;
}
/* Every source lane but lane 0 is outside a one-lane warp, and reading
 * outside returns the caller's own value. */
template <class T>
HIPD_CPU_INLINE T __shfl_sync(unsigned int, T v, int, int = 1)
{
  return v;
}
template <class T>
HIPD_CPU_INLINE T __shfl_up_sync(unsigned int, T v, unsigned int, int = 1)
{
  return v;
}
template <class T>
HIPD_CPU_INLINE T __shfl_down_sync(unsigned int, T v, unsigned int, int = 1)
{
  return v;
}
template <class T>
HIPD_CPU_INLINE T __shfl_xor_sync(unsigned int, T v, int, int = 1)
{
  return v;
}
template <class T> HIPD_CPU_INLINE T __shfl(T v, int, int = 1)
{
  return v;
}
template <class T> HIPD_CPU_INLINE T __shfl_up(T v, unsigned int, int = 1)
{
  return v;
}
template <class T> HIPD_CPU_INLINE T __shfl_down(T v, unsigned int, int = 1)
{
  return v;
}
template <class T> HIPD_CPU_INLINE T __shfl_xor(T v, int, int = 1)
{
  return v;
}

/* ---- atomics ---- */
/* Blocks run on different OS threads, so atomics are real (sequentially
 * consistent, which costs nothing more than relaxed ones on x86). */
#define HIPD_CPU_MO __ATOMIC_SEQ_CST

template <class T, class F> HIPD_CPU_INLINE T hipd_cpu_atomic_update(T *a, F f)
{
  T old, desired;
  __atomic_load(a, &old, __ATOMIC_RELAXED);
  do {
    desired = f(old);
  } while (!__atomic_compare_exchange(a, &old, &desired, true, HIPD_CPU_MO,
                                      __ATOMIC_RELAXED));
  return old;
}

#define HIPD_CPU_ATOMIC_INT(T)                                                 \
  HIPD_CPU_INLINE T atomicAdd(T *a, T v)                                       \
  {                                                                            \
    return __atomic_fetch_add(a, v, HIPD_CPU_MO);                              \
  }                                                                            \
  HIPD_CPU_INLINE T atomicSub(T *a, T v)                                       \
  {                                                                            \
    return __atomic_fetch_sub(a, v, HIPD_CPU_MO);                              \
  }                                                                            \
  HIPD_CPU_INLINE T atomicAnd(T *a, T v)                                       \
  {                                                                            \
    return __atomic_fetch_and(a, v, HIPD_CPU_MO);                              \
  }                                                                            \
  HIPD_CPU_INLINE T atomicOr(T *a, T v)                                        \
  {                                                                            \
    return __atomic_fetch_or(a, v, HIPD_CPU_MO);                               \
  }                                                                            \
  HIPD_CPU_INLINE T atomicXor(T *a, T v)                                       \
  {                                                                            \
    return __atomic_fetch_xor(a, v, HIPD_CPU_MO);                              \
  }                                                                            \
  HIPD_CPU_INLINE T atomicExch(T *a, T v)                                      \
  {                                                                            \
    return __atomic_exchange_n(a, v, HIPD_CPU_MO);                             \
  }                                                                            \
  HIPD_CPU_INLINE T atomicCAS(T *a, T expected, T desired)                     \
  {                                                                            \
    __atomic_compare_exchange_n(a, &expected, desired, false, HIPD_CPU_MO,     \
                                HIPD_CPU_MO);                                  \
    return expected;                                                           \
  }                                                                            \
  HIPD_CPU_INLINE T atomicMin(T *a, T v)                                       \
  {                                                                            \
    return hipd_cpu_atomic_update(a, [v](T o) { return v < o ? v : o; });      \
  }                                                                            \
  HIPD_CPU_INLINE T atomicMax(T *a, T v)                                       \
  {                                                                            \
    return hipd_cpu_atomic_update(a, [v](T o) { return v > o ? v : o; });      \
  }

HIPD_CPU_ATOMIC_INT(int)
HIPD_CPU_ATOMIC_INT(unsigned int)
HIPD_CPU_ATOMIC_INT(long)
HIPD_CPU_ATOMIC_INT(unsigned long)
HIPD_CPU_ATOMIC_INT(long long)
HIPD_CPU_ATOMIC_INT(unsigned long long)

/* ((old >= v) ? 0 : old + 1), as CUDA defines it. */
HIPD_CPU_INLINE unsigned int atomicInc(unsigned int *a, unsigned int v)
{
  return hipd_cpu_atomic_update(
      a, [v](unsigned int o) { return o >= v ? 0u : o + 1u; });
}
/* (((old == 0) || (old > v)) ? v : old - 1), as CUDA defines it. */
HIPD_CPU_INLINE unsigned int atomicDec(unsigned int *a, unsigned int v)
{
  return hipd_cpu_atomic_update(
      a, [v](unsigned int o) { return (o == 0u || o > v) ? v : o - 1u; });
}

#define HIPD_CPU_ATOMIC_FP(T)                                                  \
  HIPD_CPU_INLINE T atomicAdd(T *a, T v)                                       \
  {                                                                            \
    return hipd_cpu_atomic_update(a, [v](T o) { return o + v; });              \
  }                                                                            \
  HIPD_CPU_INLINE T atomicSub(T *a, T v)                                       \
  {                                                                            \
    return hipd_cpu_atomic_update(a, [v](T o) { return o - v; });              \
  }                                                                            \
  HIPD_CPU_INLINE T atomicExch(T *a, T v)                                      \
  {                                                                            \
    T old;                                                                     \
    __atomic_exchange(a, &v, &old, HIPD_CPU_MO);                               \
    return old;                                                                \
  }                                                                            \
  HIPD_CPU_INLINE T atomicMin(T *a, T v)                                       \
  {                                                                            \
    return hipd_cpu_atomic_update(a, [v](T o) { return v < o ? v : o; });      \
  }                                                                            \
  HIPD_CPU_INLINE T atomicMax(T *a, T v)                                       \
  {                                                                            \
    return hipd_cpu_atomic_update(a, [v](T o) { return v > o ? v : o; });      \
  }
HIPD_CPU_ATOMIC_FP(float)
HIPD_CPU_ATOMIC_FP(double)

/* Scoped variants: one address space, one coherence domain. */
#define HIPD_CPU_ATOMIC_SCOPED(op)                                             \
  template <class P, class... A>                                               \
  HIPD_CPU_INLINE auto op##_block(P *a, A... v)->decltype(op(a, v...))         \
  {                                                                            \
    return op(a, v...);                                                        \
  }                                                                            \
  template <class P, class... A>                                               \
  HIPD_CPU_INLINE auto op##_system(P *a, A... v)->decltype(op(a, v...))        \
  {                                                                            \
    return op(a, v...);                                                        \
  }
HIPD_CPU_ATOMIC_SCOPED(atomicAdd)
HIPD_CPU_ATOMIC_SCOPED(atomicSub)
HIPD_CPU_ATOMIC_SCOPED(atomicAnd)
HIPD_CPU_ATOMIC_SCOPED(atomicOr)
HIPD_CPU_ATOMIC_SCOPED(atomicXor)
HIPD_CPU_ATOMIC_SCOPED(atomicExch)
HIPD_CPU_ATOMIC_SCOPED(atomicCAS)
HIPD_CPU_ATOMIC_SCOPED(atomicMin)
HIPD_CPU_ATOMIC_SCOPED(atomicMax)
HIPD_CPU_ATOMIC_SCOPED(atomicInc)
HIPD_CPU_ATOMIC_SCOPED(atomicDec)

/* ---- min and max ---- */
/* One template for every pair of arithmetic types, with the usual
 * arithmetic conversions (CUDA's overloads do the same: min(int, unsigned)
 * is an unsigned comparison). */
template <class A, class B,
          std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>,
                           int> = 0>
HIPD_CPU_INLINE constexpr std::common_type_t<A, B> min(A a, B b)
{
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b)
                                               : static_cast<C>(a);
}
template <class A, class B,
          std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>,
                           int> = 0>
HIPD_CPU_INLINE constexpr std::common_type_t<A, B> max(A a, B b)
{
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b)
                                               : static_cast<C>(a);
}
HIPD_CPU_INLINE unsigned int umin(unsigned int a, unsigned int b)
{
  return a < b ? a : b;
}
HIPD_CPU_INLINE unsigned int umax(unsigned int a, unsigned int b)
{
  return a > b ? a : b;
}
HIPD_CPU_INLINE long long llmin(long long a, long long b)
{
  return a < b ? a : b;
}
HIPD_CPU_INLINE long long llmax(long long a, long long b)
{
  return a > b ? a : b;
}
HIPD_CPU_INLINE unsigned long long ullmin(unsigned long long a,
                                          unsigned long long b)
{
  return a < b ? a : b;
}
HIPD_CPU_INLINE unsigned long long ullmax(unsigned long long a,
                                          unsigned long long b)
{
  return a > b ? a : b;
}

/* ---- math functions the host libm lacks ---- */
HIPD_CPU_INLINE float rsqrtf(float x)
{
  return 1.0f / sqrtf(x);
}
HIPD_CPU_INLINE double rsqrt(double x)
{
  return 1.0 / sqrt(x);
}
HIPD_CPU_INLINE float rcbrtf(float x)
{
  return 1.0f / cbrtf(x);
}
HIPD_CPU_INLINE double rcbrt(double x)
{
  return 1.0 / cbrt(x);
}
HIPD_CPU_INLINE float rhypotf(float x, float y)
{
  return 1.0f / hypotf(x, y);
}
HIPD_CPU_INLINE double rhypot(double x, double y)
{
  return 1.0 / hypot(x, y);
}
HIPD_CPU_INLINE float norm3df(float a, float b, float c)
{
  return sqrtf(a * a + b * b + c * c);
}
HIPD_CPU_INLINE float rnorm3df(float a, float b, float c)
{
  return 1.0f / norm3df(a, b, c);
}
HIPD_CPU_INLINE float norm4df(float a, float b, float c, float d)
{
  return sqrtf(a * a + b * b + c * c + d * d);
}
HIPD_CPU_INLINE double norm3d(double a, double b, double c)
{
  return sqrt(a * a + b * b + c * c);
}
HIPD_CPU_INLINE double rnorm3d(double a, double b, double c)
{
  return 1.0 / norm3d(a, b, c);
}
HIPD_CPU_INLINE float normcdff(float x)
{
  return 0.5f * erfcf(-x * 0.70710678118654752f);
}
HIPD_CPU_INLINE double normcdf(double x)
{
  return 0.5 * erfc(-x * 0.70710678118654752440);
}
/* sin(pi x) and friends, with the argument reduced exactly first. */
HIPD_CPU_INLINE float sinpif(float x)
{
  return sinf(3.14159265358979323846f * fmodf(x, 2.0f));
}
HIPD_CPU_INLINE float cospif(float x)
{
  return cosf(3.14159265358979323846f * fmodf(x, 2.0f));
}
HIPD_CPU_INLINE void sincospif(float x, float *s, float *c)
{
  *s = sinpif(x);
  *c = cospif(x);
}
HIPD_CPU_INLINE double sinpi(double x)
{
  return sin(3.14159265358979323846 * fmod(x, 2.0));
}
HIPD_CPU_INLINE double cospi(double x)
{
  return cos(3.14159265358979323846 * fmod(x, 2.0));
}
HIPD_CPU_INLINE void sincospi(double x, double *s, double *c)
{
  *s = sinpi(x);
  *c = cospi(x);
}
HIPD_CPU_INLINE float __saturatef(float x)
{
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; /* NaN -> 0 */
}
HIPD_CPU_INLINE float __fdividef(float a, float b)
{
  return a / b;
}
HIPD_CPU_INLINE float fdividef(float a, float b)
{
  return a / b;
}
/* The fast intrinsics are the accurate functions here. glibc's <math.h>
 * declares these names (extern "C") without exporting them, so they are
 * defined here with that linkage. */
#define HIPD_CPU_LIBM extern "C" inline __attribute__((always_inline))
HIPD_CPU_LIBM float __expf(float x) noexcept
{
  return expf(x);
}
HIPD_CPU_LIBM float __exp10f(float x) noexcept
{
  return exp10f(x);
}
HIPD_CPU_LIBM float __logf(float x) noexcept
{
  return logf(x);
}
HIPD_CPU_LIBM float __log2f(float x) noexcept
{
  return log2f(x);
}
HIPD_CPU_LIBM float __log10f(float x) noexcept
{
  return log10f(x);
}
HIPD_CPU_LIBM float __sinf(float x) noexcept
{
  return sinf(x);
}
HIPD_CPU_LIBM float __cosf(float x) noexcept
{
  return cosf(x);
}
HIPD_CPU_LIBM float __tanf(float x) noexcept
{
  return tanf(x);
}
HIPD_CPU_LIBM void __sincosf(float x, float *s, float *c) noexcept
{
  sincosf(x, s, c);
}
HIPD_CPU_LIBM float __powf(float x, float y) noexcept
{
  return powf(x, y);
}
/* Round-to-nearest arithmetic: the host's default rounding mode. */
HIPD_CPU_INLINE float __fadd_rn(float a, float b)
{
  return a + b;
}
HIPD_CPU_INLINE float __fsub_rn(float a, float b)
{
  return a - b;
}
HIPD_CPU_INLINE float __fmul_rn(float a, float b)
{
  return a * b;
}
HIPD_CPU_INLINE float __fdiv_rn(float a, float b)
{
  return a / b;
}
HIPD_CPU_INLINE float __frcp_rn(float a)
{
  return 1.0f / a;
}
HIPD_CPU_INLINE float __fsqrt_rn(float a)
{
  return sqrtf(a);
}
HIPD_CPU_INLINE float __frsqrt_rn(float a)
{
  return 1.0f / sqrtf(a);
}
HIPD_CPU_INLINE float __fmaf_rn(float a, float b, float c)
{
  return fmaf(a, b, c);
}
HIPD_CPU_INLINE double __dadd_rn(double a, double b)
{
  return a + b;
}
HIPD_CPU_INLINE double __dsub_rn(double a, double b)
{
  return a - b;
}
HIPD_CPU_INLINE double __dmul_rn(double a, double b)
{
  return a * b;
}
HIPD_CPU_INLINE double __ddiv_rn(double a, double b)
{
  return a / b;
}
HIPD_CPU_INLINE double __drcp_rn(double a)
{
  return 1.0 / a;
}
HIPD_CPU_INLINE double __dsqrt_rn(double a)
{
  return sqrt(a);
}
HIPD_CPU_INLINE double __fma_rn(double a, double b, double c)
{
  return fma(a, b, c);
}

/* ---- reinterpretation and conversion ---- */
template <class To, class From> HIPD_CPU_INLINE To hipd_cpu_bits(From f)
{
  static_assert(sizeof(To) == sizeof(From), "size mismatch");
  To t;
  memcpy(&t, &f, sizeof(t));
  return t;
}
HIPD_CPU_INLINE float __int_as_float(int x)
{
  return hipd_cpu_bits<float>(x);
}
HIPD_CPU_INLINE int __float_as_int(float x)
{
  return hipd_cpu_bits<int>(x);
}
HIPD_CPU_INLINE float __uint_as_float(unsigned int x)
{
  return hipd_cpu_bits<float>(x);
}
HIPD_CPU_INLINE unsigned int __float_as_uint(float x)
{
  return hipd_cpu_bits<unsigned int>(x);
}
HIPD_CPU_INLINE double __longlong_as_double(long long x)
{
  return hipd_cpu_bits<double>(x);
}
HIPD_CPU_INLINE long long __double_as_longlong(double x)
{
  return hipd_cpu_bits<long long>(x);
}
/* ---- binary16: __half (IR version 2's f16) ----
 * A storage type: 16 bits of IEEE binary16, converted to float for any
 * arithmetic (an operator applied to __half operands computes in float,
 * and the result is rounded back to binary16 when it is stored into a
 * __half), which is what the Sarek IR promises for f16. Conversions from
 * float round to nearest, ties to even, with overflow to infinity,
 * subnormals and NaN kept quiet. A software conversion rather than the
 * compiler's _Float16, which g++ 12 has on x86-64 but older g++ and clang
 * (before 15) do not: this works with every host compiler the CPU device
 * accepts, and gives the same bits. */
HIPD_CPU_INLINE unsigned short hipd_cpu_f2h(float f)
{
  uint32_t x = hipd_cpu_bits<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu, r, rem, half;

  if (a >= 0x7f800000u) /* infinity, NaN (quiet, top payload bits kept) */
    return (
        unsigned short)(sign | 0x7c00u |
                        (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  if (a >= 0x477ff000u) /* 65520 and above: infinity */
    return (unsigned short)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* below 2^-14: a subnormal or zero */
    if (a < 0x33000000u) /* below 2^-25 */
      return (unsigned short)sign;
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)e; /* to units of 2^-24: 14 to 24 */
    r = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
  } else {
    r = (a - 0x38000000u) >> 13; /* exponent rebiased, 10 mantissa bits */
    rem = a & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (r & 1u)))
    r++; /* a carry into the exponent is right, up to infinity */
  return (unsigned short)(sign | r);
}
HIPD_CPU_INLINE float hipd_cpu_h2f(unsigned short h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
           m = h & 0x3ffu;

  if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31)
    return hipd_cpu_bits<float>(sign | 0x7f800000u | (m << 13));
  return hipd_cpu_bits<float>(sign | ((e + 112u) << 23) | (m << 13));
}
/* double to binary16 rounded once: round to odd into float (24 bits, more
 * than 11 + 2), then to nearest even, which gives the correctly rounded
 * result (a plain (float) cast first would round twice). */
HIPD_CPU_INLINE unsigned short hipd_cpu_d2h(double d)
{
  float f = (float)d;

  if (d == d && (double)f != d) {
    uint32_t b = hipd_cpu_bits<uint32_t>(f);
    if (__builtin_fabs((double)f) > __builtin_fabs(d))
      b -= 1; /* toward zero: the same sign, one ulp smaller */
    f = hipd_cpu_bits<float>(b | 1u);
  }
  return hipd_cpu_f2h(f);
}
struct __half {
  unsigned short __x;
  __half() = default;
  __half(float f) : __x(hipd_cpu_f2h(f))
  {
  }
  __half(double d) : __x(hipd_cpu_d2h(d))
  {
  }
  __half(int i) : __x(hipd_cpu_f2h((float)i))
  {
  }
  operator float() const
  {
    return hipd_cpu_h2f(__x);
  }
};
typedef __half half;
HIPD_CPU_INLINE __half __ushort_as_half(unsigned short x)
{
  __half h;
  h.__x = x;
  return h;
}
HIPD_CPU_INLINE unsigned short __half_as_ushort(__half h)
{
  return h.__x;
}
HIPD_CPU_INLINE __half __float2half(float f)
{
  return __ushort_as_half(hipd_cpu_f2h(f));
}
HIPD_CPU_INLINE __half __float2half_rn(float f)
{
  return __ushort_as_half(hipd_cpu_f2h(f));
}
HIPD_CPU_INLINE float __half2float(__half h)
{
  return hipd_cpu_h2f(h.__x);
}
HIPD_CPU_INLINE int __double2hiint(double x)
{
  return (int)(hipd_cpu_bits<unsigned long long>(x) >> 32);
}
HIPD_CPU_INLINE int __double2loint(double x)
{
  return (int)(unsigned int)hipd_cpu_bits<unsigned long long>(x);
}
HIPD_CPU_INLINE double __hiloint2double(int hi, int lo)
{
  return hipd_cpu_bits<double>(((unsigned long long)(unsigned int)hi << 32) |
                               (unsigned int)lo);
}
#define HIPD_CPU_CVT(name, From, To, sfx)                                      \
  HIPD_CPU_INLINE To name##_rn(From x)                                         \
  {                                                                            \
    return (To)rint##sfx(x);                                                   \
  }                                                                            \
  HIPD_CPU_INLINE To name##_rz(From x)                                         \
  {                                                                            \
    return (To)trunc##sfx(x);                                                  \
  }                                                                            \
  HIPD_CPU_INLINE To name##_ru(From x)                                         \
  {                                                                            \
    return (To)ceil##sfx(x);                                                   \
  }                                                                            \
  HIPD_CPU_INLINE To name##_rd(From x)                                         \
  {                                                                            \
    return (To)floor##sfx(x);                                                  \
  }
HIPD_CPU_CVT(__float2int, float, int, f)
HIPD_CPU_CVT(__float2uint, float, unsigned int, f)
HIPD_CPU_CVT(__float2ll, float, long long, f)
HIPD_CPU_CVT(__float2ull, float, unsigned long long, f)
HIPD_CPU_CVT(__double2int, double, int, )
HIPD_CPU_CVT(__double2uint, double, unsigned int, )
HIPD_CPU_CVT(__double2ll, double, long long, )
HIPD_CPU_CVT(__double2ull, double, unsigned long long, )
#undef HIPD_CPU_CVT
HIPD_CPU_INLINE float __double2float_rn(double x)
{
  return (float)x;
}
HIPD_CPU_INLINE float __int2float_rn(int x)
{
  return (float)x;
}
HIPD_CPU_INLINE float __uint2float_rn(unsigned int x)
{
  return (float)x;
}
HIPD_CPU_INLINE float __ll2float_rn(long long x)
{
  return (float)x;
}
HIPD_CPU_INLINE float __ull2float_rn(unsigned long long x)
{
  return (float)x;
}
HIPD_CPU_INLINE double __int2double_rn(int x)
{
  return (double)x;
}
HIPD_CPU_INLINE double __uint2double_rn(unsigned int x)
{
  return (double)x;
}
HIPD_CPU_INLINE double __ll2double_rn(long long x)
{
  return (double)x;
}
HIPD_CPU_INLINE double __ull2double_rn(unsigned long long x)
{
  return (double)x;
}

/* ---- integer intrinsics ---- */
HIPD_CPU_INLINE int __popc(unsigned int x)
{
  return __builtin_popcount(x);
}
HIPD_CPU_INLINE int __popcll(unsigned long long x)
{
  return __builtin_popcountll(x);
}
HIPD_CPU_INLINE int __clz(int x)
{
  return x == 0 ? 32 : __builtin_clz((unsigned int)x);
}
HIPD_CPU_INLINE int __clzll(long long x)
{
  return x == 0 ? 64 : __builtin_clzll((unsigned long long)x);
}
HIPD_CPU_INLINE int __ffs(int x)
{
  return __builtin_ffs(x);
}
HIPD_CPU_INLINE int __ffsll(long long x)
{
  return __builtin_ffsll(x);
}
HIPD_CPU_INLINE unsigned int __brev(unsigned int x)
{
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
HIPD_CPU_INLINE unsigned long long __brevll(unsigned long long x)
{
  return ((unsigned long long)__brev((unsigned int)x) << 32) |
         __brev((unsigned int)(x >> 32));
}
HIPD_CPU_INLINE unsigned int __byte_perm(unsigned int x, unsigned int y,
                                         unsigned int s)
{
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; i++) {
    unsigned int sel = (s >> (4 * i)) & 7u;
    r |= (unsigned int)((v >> (8 * sel)) & 0xffu) << (8 * i);
  }
  return r;
}
HIPD_CPU_INLINE int __mul24(int a, int b)
{
  return (int)((long long)((a << 8) >> 8) * ((b << 8) >> 8));
}
HIPD_CPU_INLINE unsigned int __umul24(unsigned int a, unsigned int b)
{
  return (a & 0xffffffu) * (b & 0xffffffu);
}
HIPD_CPU_INLINE int __mulhi(int a, int b)
{
  return (int)(((long long)a * b) >> 32);
}
HIPD_CPU_INLINE unsigned int __umulhi(unsigned int a, unsigned int b)
{
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
HIPD_CPU_INLINE long long __mul64hi(long long a, long long b)
{
  return (long long)(((__int128)a * b) >> 64);
}
HIPD_CPU_INLINE unsigned long long __umul64hi(unsigned long long a,
                                              unsigned long long b)
{
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
HIPD_CPU_INLINE unsigned int __sad(int a, int b, unsigned int c)
{
  return c + (unsigned int)(a > b ? (long long)a - b : (long long)b - a);
}
HIPD_CPU_INLINE unsigned int __usad(unsigned int a, unsigned int b,
                                    unsigned int c)
{
  return c + (a > b ? a - b : b - a);
}
HIPD_CPU_INLINE int __hadd(int a, int b)
{
  return (int)(((long long)a + b) >> 1);
}
HIPD_CPU_INLINE int __rhadd(int a, int b)
{
  return (int)(((long long)a + b + 1) >> 1);
}
HIPD_CPU_INLINE unsigned int __uhadd(unsigned int a, unsigned int b)
{
  return (unsigned int)(((unsigned long long)a + b) >> 1);
}
HIPD_CPU_INLINE unsigned int __urhadd(unsigned int a, unsigned int b)
{
  return (unsigned int)(((unsigned long long)a + b + 1) >> 1);
}
HIPD_CPU_INLINE unsigned int __funnelshift_l(unsigned int lo, unsigned int hi,
                                             unsigned int s)
{
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)((v << (s & 31u)) >> 32);
}
HIPD_CPU_INLINE unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi,
                                              unsigned int s)
{
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)((v << (s > 32u ? 32u : s)) >> 32);
}
HIPD_CPU_INLINE unsigned int __funnelshift_r(unsigned int lo, unsigned int hi,
                                             unsigned int s)
{
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)(v >> (s & 31u));
}
HIPD_CPU_INLINE unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi,
                                              unsigned int s)
{
  unsigned long long v = ((unsigned long long)hi << 32) | lo;
  return (unsigned int)(v >> (s > 32u ? 32u : s));
}

/* ---- loads, clocks, traps ---- */
template <class T> HIPD_CPU_INLINE T __ldg(const T *p)
{
  return *p;
}
template <class T> HIPD_CPU_INLINE T __ldcg(const T *p)
{
  return *p;
}
template <class T> HIPD_CPU_INLINE T __ldca(const T *p)
{
  return *p;
}
template <class T> HIPD_CPU_INLINE T __ldcs(const T *p)
{
  return *p;
}
HIPD_CPU_INLINE long long clock64(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
HIPD_CPU_INLINE unsigned long long wall_clock64(void)
{
  return (unsigned long long)clock64();
}
HIPD_CPU_INLINE void __nanosleep(unsigned int ns)
{
  struct timespec ts = {0, (long)ns};
  nanosleep(&ts, nullptr);
}
/* A trap ends the runner with SIGILL (x86) or SIGTRAP; hipd reports it as a
 * kernel crash. */
[[noreturn]] HIPD_CPU_INLINE void __trap(void)
{
  __builtin_trap();
}
[[noreturn]] HIPD_CPU_INLINE void __brkpt(void)
{
  __builtin_trap();
}

/* ---- kernel signatures, for the runner ---- */
template <class> inline constexpr bool hipd_cpu_unsupported_v = false;

template <class T> constexpr uint8_t hipd_cpu_type_code()
{
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>)
    return HIPD_CPU_T_PTR;
  else if constexpr (std::is_same_v<U, bool>)
    return HIPD_CPU_T_BOOL;
  else if constexpr (std::is_enum_v<U>)
    return hipd_cpu_type_code<std::underlying_type_t<U>>();
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 1)
    return std::is_signed_v<U> ? HIPD_CPU_T_I8 : HIPD_CPU_T_U8;
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 2)
    return std::is_signed_v<U> ? HIPD_CPU_T_I16 : HIPD_CPU_T_U16;
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 4)
    return std::is_signed_v<U> ? HIPD_CPU_T_I32 : HIPD_CPU_T_U32;
  else if constexpr (std::is_integral_v<U> && sizeof(U) == 8)
    return std::is_signed_v<U> ? HIPD_CPU_T_I64 : HIPD_CPU_T_U64;
  else if constexpr (std::is_same_v<U, float>)
    return HIPD_CPU_T_F32;
  else if constexpr (std::is_same_v<U, double>)
    return HIPD_CPU_T_F64;
  else {
    static_assert(hipd_cpu_unsupported_v<U>,
                  "kernel parameter type not supported on hipd's CPU device: "
                  "use pointers, integers of 8 to 64 bits, float, double or "
                  "bool");
    return 0;
  }
}

template <class... A> struct hipd_cpu_sig_codes {
  static constexpr uint8_t codes[sizeof...(A) + 1] = {
      hipd_cpu_type_code<A>()..., 0};
};

/* The signature of kernel @p f: its entry point and its declared parameter
 * types, coded (the code array is shared by kernels of the same parameter
 * list). The compile step exports, for each kernel N it was asked for,
 *   extern "C" const hipd_kernel_sig_t *hipd_sig_<N>(void)
 *   { static const hipd_kernel_sig_t s = hipd_make_sig(&N); return &s; }
 * An overloaded N cannot be deduced here: a compile error. */
template <class... A> static hipd_kernel_sig_t hipd_make_sig(void (*f)(A...))
{
  return hipd_kernel_sig_t{reinterpret_cast<void (*)(void)>(f),
                           (uint32_t)sizeof...(A),
                           hipd_cpu_sig_codes<A...>::codes};
}

#undef HIPD_CPU_INLINE
#endif /* __cplusplus && !HIPD_CPU_ABI_ONLY */
#endif /* HIPD_CPU_DEVICE_H */
