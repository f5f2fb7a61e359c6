/* SPDX-License-Identifier: MIT */
/* daemon/kernels/lang.h: the source languages a compile takes: "hip" as
 * it is, and "cuda", CUDA C++ made into what each platform's compiler
 * takes by a prelude (proto/PROTOCOL.md, "Source languages").
 *
 * CUDA source gets, in front of it, a prelude for the compiling driver's
 * platform, then `#line 1 "kernel.cu"` so that the compiler's messages
 * name the client's lines; its `#include` lines of the CUDA toolkit's
 * runtime headers (cuda.h, cuda_runtime.h, cuda_runtime_api.h,
 * device_launch_parameters.h, cuda_fp16.h) become empty lines, since the
 * prelude provides what they would. The prelude is part of the source,
 * so of the cache key: a prelude that changes makes new keys.
 *   amd:    hiprtc's built-in HIP headers (hip_fp16.h's __half among
 *           them), and the CUDA warp
 *           functions (__syncwarp, the *_sync shuffles and votes,
 *           __activemask) for 32-thread warps: a 64-wide wavefront is two
 *           CUDA warps, warpSize is 32, and a mask's 32 bits name the
 *           lanes of the caller's half.
 *   nvidia: NVRTC compiles CUDA itself; the prelude includes the CUDA
 *           toolkit's cuda_fp16.h.
 *   host:   the CPU device header already has the warp functions (of a
 *           one-lane warp), atomics and __ldg; the prelude adds
 *           cuda_fp16.h's __half and its functions, computed in float
 *           and rounded to nearest even.
 * Any thread.
 */
#ifndef HIPD_KERNELS_LANG_H
#define HIPD_KERNELS_LANG_H

#include <stddef.h>

/* The languages every platform takes, in the order supported_source_langs
 * lists them (NULL-ended). */
extern const char *const lang_names[];

/* Is @p lang one of lang_names? */
int lang_known(const char *lang);

/* Is @p lang CUDA (needs lang_source)? NULL and "hip" are not. */
int lang_is_cuda(const char *lang);

/* The source to compile for CUDA source @p src[0, len) on driver platform
 * @p platform ("amd", "nvidia", "host"): the prelude, then the source with
 * its CUDA runtime #include lines emptied. @return 0 with *out (malloc'd,
 * NUL-terminated, the caller's) and *out_len, or HIPD_ENOMEM. */
int lang_source(const char *platform, const char *src, size_t len, char **out,
                size_t *out_len);

#endif
