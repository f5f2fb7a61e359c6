/* SPDX-License-Identifier: MIT */
/* bench/kernels.h: the kernel sources every benchmark compiles, so that
 * hipd and the direct-HIP baselines build and run exactly the same code. */
#ifndef HIPD_BENCH_KERNELS_H
#define HIPD_BENCH_KERNELS_H

/* An empty kernel, launched as one block of one thread: the round-trip
 * and launch-throughput figures measure everything but the kernel. */
#define BENCH_EMPTY_NAME "bench_empty"
#define BENCH_EMPTY_SOURCE                                                     \
  "extern \"C\" __global__ void bench_empty()\n"                               \
  "{\n"                                                                        \
  "}\n"

/* A small kernel for the sharing figure: x[i] = x[i] * 0.5 + 1 over n
 * floats, 256 threads a block. */
#define BENCH_SMALL_NAME "bench_small"
#define BENCH_SMALL_SOURCE                                                     \
  "extern \"C\" __global__ void bench_small(float *x, int n)\n"                \
  "{\n"                                                                        \
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"                         \
  "  if (i < n)\n"                                                             \
  "    x[i] = x[i] * 0.5f + 1.0f;\n"                                           \
  "}\n"
#define BENCH_SMALL_BLOCK 256

/* The compile figure's source: the small kernel followed by a comment
 * that makes each variant (and each run) a different cache key:
 * printf(BENCH_VARIANT_FMT, run, i) appended to BENCH_SMALL_SOURCE. */
#define BENCH_VARIANT_FMT "// hipd_bench compile variant %llx.%d\n"

#endif
