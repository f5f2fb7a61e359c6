/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_nvidia_compat.h: HIP 5.2.3's nvidia mapping on CUDA 13.
 *
 * Why this exists: on NVIDIA, HIP is a header-only mapping onto the CUDA
 * runtime and driver APIs, and the only HIP headers that still ship that
 * mapping (Debian's libamdhip64-dev 5.2.3, hip/nvidia_detail/) predate
 * CUDA 13. CUDA 13 changed cudaMemAdvise and cudaMemPrefetchAsync (a
 * struct cudaMemLocation instead of a device number, and a flags argument),
 * turned cuCtxCreate into cuCtxCreate_v4 (a params pointer), removed five
 * fields of struct cudaDeviceProp and the attribute
 * cudaDevAttrCooperativeMultiDeviceLaunch. Inline functions of
 * nvidia_hip_runtime_api.h use all of these, so including
 * <hip/hip_runtime_api.h> fails to compile even in a file that calls none of
 * them. This header, included first, puts back the spellings those inline
 * functions expect, on top of the CUDA 13 API. hipd calls none of the
 * affected functions except hipGetDeviceProperties.
 *
 * When it can go: as soon as hipd builds against HIP headers whose nvidia
 * mapping knows CUDA 13 (or no longer supports CUDA 13). Delete this file,
 * its #include in hip_internal.h, its mention in Makefile.am and
 * -fms-extensions in configure.ac's nvidia branch.
 *
 * It does nothing unless __HIP_PLATFORM_NVIDIA__ is defined and
 * CUDART_VERSION >= 13000. The cudaDeviceProp redirection needs
 * -fms-extensions (an anonymous member of a tagged struct type), which
 * configure adds to HIP_CPPFLAGS for the nvidia platform.
 */
#ifndef HIPD_HIP_NVIDIA_COMPAT_H
#define HIPD_HIP_NVIDIA_COMPAT_H

#ifdef __HIP_PLATFORM_NVIDIA__

#include <stddef.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#if CUDART_VERSION >= 13000

/* The location an old-style device number meant: cudaCpuDeviceId is the
 * host, anything else a device ordinal. */
static inline struct cudaMemLocation hipd_compat_mem_location(int device)
{
  struct cudaMemLocation loc;

  if (device == cudaCpuDeviceId) {
    loc.type = cudaMemLocationTypeHost;
    loc.id = 0;
  } else {
    loc.type = cudaMemLocationTypeDevice;
    loc.id = device;
  }
  return loc;
}

static inline cudaError_t hipd_compat_mem_advise(const void *ptr, size_t count,
                                                 enum cudaMemoryAdvise advice,
                                                 int device)
{
  return cudaMemAdvise(ptr, count, advice, hipd_compat_mem_location(device));
}

/* The old call had no flags; 0 is the only value CUDA 13 defines. */
static inline cudaError_t hipd_compat_mem_prefetch_async(const void *ptr,
                                                         size_t count,
                                                         int device,
                                                         cudaStream_t stream)
{
  return cudaMemPrefetchAsync(ptr, count, hipd_compat_mem_location(device), 0,
                              stream);
}

#undef cudaMemAdvise
#define cudaMemAdvise(ptr, count, advice, device)                              \
  hipd_compat_mem_advise((ptr), (count), (advice), (device))
/* cudaMemPrefetchAsync may be a macro for its per-thread-stream variant;
 * the wrapper above already called whichever it named. */
#undef cudaMemPrefetchAsync
#define cudaMemPrefetchAsync(ptr, count, device, stream)                       \
  hipd_compat_mem_prefetch_async((ptr), (count), (device), (stream))

/* cuda.h defines cuCtxCreate as cuCtxCreate_v4(pctx, params, flags, dev);
 * NULL params creates a context as the old call did. */
#undef cuCtxCreate
#define cuCtxCreate(pctx, flags, dev)                                          \
  cuCtxCreate_v4((pctx), NULL, (flags), (dev))

/* struct cudaDeviceProp as it was before CUDA 13: the real struct, then
 * the five removed fields. */
#ifdef __clang__
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wmicrosoft-anon-tag"
#endif
struct hipd_compat_device_prop {
  struct cudaDeviceProp; /* anonymous: its fields read as ours */
  int clockRate;         /* kHz */
  int memoryClockRate;   /* kHz */
  int computeMode;       /* enum cudaComputeMode */
  int kernelExecTimeoutEnabled;
  int cooperativeMultiDeviceLaunch; /* always 0: removed in CUDA 13 */
};
#ifdef __clang__
#pragma clang diagnostic pop
#endif

/* cudaGetDeviceProperties for the struct above: the real properties, then
 * the removed fields from cudaDeviceGetAttribute. Returns the first
 * failure. */
static inline cudaError_t
hipd_compat_get_device_properties(struct hipd_compat_device_prop *prop,
                                  int device)
{
  cudaError_t err;

  err = cudaGetDeviceProperties((struct cudaDeviceProp *)prop, device);
  prop->clockRate = 0;
  prop->memoryClockRate = 0;
  prop->computeMode = 0;
  prop->kernelExecTimeoutEnabled = 0;
  prop->cooperativeMultiDeviceLaunch = 0;
  if (err == cudaSuccess)
    err =
        cudaDeviceGetAttribute(&prop->clockRate, cudaDevAttrClockRate, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&prop->memoryClockRate,
                                 cudaDevAttrMemoryClockRate, device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&prop->computeMode, cudaDevAttrComputeMode,
                                 device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&prop->kernelExecTimeoutEnabled,
                                 cudaDevAttrKernelExecTimeout, device);
  return err;
}

/* hipChooseDevice fills our struct and hands it to cudaChooseDevice, which
 * needs the real one (the removed fields no longer count in CUDA 13). */
static inline cudaError_t
hipd_compat_choose_device(int *device,
                          const struct hipd_compat_device_prop *prop)
{
  return cudaChooseDevice(device, (const struct cudaDeviceProp *)prop);
}

#undef cudaGetDeviceProperties
#define cudaGetDeviceProperties hipd_compat_get_device_properties
#undef cudaChooseDevice
#define cudaChooseDevice hipd_compat_choose_device
#define cudaDeviceProp hipd_compat_device_prop

/* No attribute has this value, so cudaDeviceGetAttribute fails with
 * cudaErrorInvalidValue and hipDeviceGetAttribute with hipErrorInvalidValue,
 * as for any attribute the platform does not support. */
#define cudaDevAttrCooperativeMultiDeviceLaunch cudaDevAttrMax

#endif /* CUDART_VERSION >= 13000 */
#endif /* __HIP_PLATFORM_NVIDIA__ */
#endif
