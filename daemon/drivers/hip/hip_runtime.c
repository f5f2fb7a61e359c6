/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_runtime.c: the HIP device driver's runtime side.
 *
 * One source for both HIP platforms: AMD (the ROCm runtime, libamdhip64)
 * and NVIDIA (HIP's header-only mapping onto the CUDA runtime), chosen by
 * __HIP_PLATFORM_AMD__ or __HIP_PLATFORM_NVIDIA__ in HIP_CPPFLAGS; where
 * they differ, hip_amd.c or hip_nvidia.c answers (hip_internal.h). Driver
 * streams and events are hipStream_t and hipEvent_t themselves. Kernels
 * are compiled with hiprtc into an image of the driver's own (see
 * hip_internal.h, hip_compile.c and hip_module.c); its modules and kernels
 * are the driver's structures. The only global state is what the runtime
 * compiler is (hip_rtc_setup).
 *
 * Calls that take a device number make that device current for the call
 * and then give the thread back its previous device, so a query made from
 * any thread never moves a worker off the device it was bound to.
 */
#include "config.h"

#include "hip_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/driver.h"
#include "hipd.h"

/* A hipd code for a HIP error. Errors that leave the device's context
 * unusable ("sticky": every later call on it fails too) are HIPD_EDEVLOST.
 * Pure: safe in stream callbacks. */
int hip_err_code(hipError_t err)
{
  switch (err) {
  case hipSuccess:
    return 0;
  case hipErrorOutOfMemory: /* also hipErrorMemoryAllocation */
    return HIPD_ENOMEM;
  case hipErrorInvalidValue:
  case hipErrorInvalidDevicePointer:
  case hipErrorInvalidMemcpyDirection:
  case hipErrorInvalidHandle:
    return HIPD_EINVAL;
  case hipErrorNotReady:
    return HIPD_ENOTREADY;
  case hipErrorInvalidDevice:
  case hipErrorNoDevice:
  case hipErrorInsufficientDriver:
    return HIPD_ENODEV;
  case hipErrorNotSupported:
    return HIPD_ENOTSUP;
  case hipErrorIllegalAddress:
  case hipErrorLaunchFailure:
  case hipErrorLaunchTimeOut:
  case hipErrorPriorLaunchFailure:
  case hipErrorAssert:
  case hipErrorECCNotCorrectable:
  case hipErrorContextIsDestroyed:
    return HIPD_EDEVLOST;
  default:
    return HIPD_EDEVICE;
  }
}

/* Describe the failure of HIP call @p call and return its hipd code. */
int hip_report_error(const char *call, hipError_t err)
{
  int rc;

  if (hip_platform_error(call, err, &rc))
    return rc;
  drv_set_error("%s: %s", call, hipGetErrorString(err));
  return hip_err_code(err);
}

/*
 * The device hip_bind_thread() made current on this thread, and that
 * device's reset generation then: while both still hold, the thread's
 * current context is that device's primary context and hip_bind_thread()
 * skips hipSetDevice (3 % of a shared GPU's worker loop, which binds
 * before every launch and every poll: bench/RESULTS.md, 2026-12-06).
 * hipGetDevice cannot tell instead: on NVIDIA it answers 0 on a thread
 * that never made a context current. Every other hipSetDevice here either
 * comes back to the device it found (hip_enter_device and
 * hip_leave_device, hip_module.c's use_device) or forgets the record
 * (hip_thread_forget); hipDeviceReset destroys the primary context under
 * every thread, so it moves the device's generation. Devices past
 * BIND_DEVICES are bound every time.
 */
#define BIND_DEVICES 64
static uint32_t reset_gen[BIND_DEVICES]; /* atomic */
static __thread int bound_dev = -1;      /* -1: not known */
static __thread uint32_t bound_gen;

void hip_thread_forget(void)
{
  bound_dev = -1;
}

/* Make @p dev the calling thread's device, saving the previous one in
 * *prev for hip_leave_device(). Returns 0 or a code (error text set). */
int hip_enter_device(int dev, int *prev)
{
  hipError_t err;

  err = hipGetDevice(prev);
  if (err != hipSuccess)
    return hip_report_error("hipGetDevice", err);
  if (*prev == dev)
    return 0;
  err = hipSetDevice(dev);
  if (err != hipSuccess) {
    hip_thread_forget();
    return hip_report_error("hipSetDevice", err);
  }
  return 0;
}

/* Give the thread back the device hip_enter_device() saved. Cannot fail in a
 * way worth reporting: @p prev was current a moment ago (if it does, the
 * thread binds again before its next task). */
void hip_leave_device(int dev, int prev)
{
  if (prev != dev && hipSetDevice(prev) != hipSuccess)
    hip_thread_forget();
}

/* Errors that mean "this machine has no usable device" rather than a
 * failure: no GPU, no or too old a kernel driver. ROCm's hipInit answers
 * hipErrorInvalidDevice when there is no /dev/kfd. */
static int means_no_device(hipError_t err)
{
  if (err == hipErrorNoDevice || err == hipErrorInsufficientDriver ||
      err == hipErrorInvalidDevice)
    return 1;
  return hip_platform_no_device(err);
}

/* Let device @p dev read and write the memory of every other device it
 * can reach directly (NVLink, PCIe peer to peer), and them its memory:
 * copies between GPUs then go device to device instead of through host
 * memory. A pair that cannot is left as it is (hipMemcpyPeer stages
 * through the host there). Peer access belongs to a context, so a reset
 * device needs it again. */
static void enable_peers(int dev, int n)
{
  int prev;

  for (int other = 0; other < n; other++) {
    int can = 0;
    if (other == dev)
      continue;
    if (hipDeviceCanAccessPeer(&can, dev, other) == hipSuccess && can &&
        hip_enter_device(dev, &prev) == 0) {
      (void)hipDeviceEnablePeerAccess(other, 0);
      hip_leave_device(dev, prev);
    }
    if (hipDeviceCanAccessPeer(&can, other, dev) == hipSuccess && can &&
        hip_enter_device(other, &prev) == 0) {
      (void)hipDeviceEnablePeerAccess(dev, 0);
      hip_leave_device(other, prev);
    }
  }
  (void)hipGetLastError(); /* "already enabled" is not an error here */
}

static int wait_mode; /* hip_driver_set_wait() */

void hip_driver_set_wait(int mode)
{
  wait_mode = mode;
}

/* Without a usable device, returns 0 with *count = 0 and leaves the reason
 * in drv_last_error() for an informational log line. */
static int hip_init(driver_t *drv, int *count)
{
  hipError_t init_err, err;
  int n = 0;

  (void)drv;
  *count = 0;
  /* The compiler works without a device; setting it up here keeps its
   * one-time cost (AMD: loading comgr and LLVM) off the loop thread. */
  hip_rtc_setup();
  /* Before the runtime starts: its printf output goes to stdout. */
  hip_output_init();
  /* Without a GPU either call may fail; the device count decides whether
   * that is an error. */
  init_err = hipInit(0);
  err = hipGetDeviceCount(&n);
  if (err != hipSuccess) {
    if (means_no_device(err)) {
      (void)hip_report_error("hipGetDeviceCount", err);
      return 0;
    }
    if (init_err != hipSuccess)
      return hip_report_error("hipInit", init_err);
    return hip_report_error("hipGetDeviceCount", err);
  }
  if (init_err != hipSuccess && n > 0)
    return hip_report_error("hipInit", init_err);
  if (n == 0)
    drv_set_error("hipGetDeviceCount: 0 devices");
  if (wait_mode != 0) {
    static const unsigned flags[] = {0, hipDeviceScheduleSpin,
                                     hipDeviceScheduleYield,
                                     hipDeviceScheduleBlockingSync};
    /* Before any context exists: the flags are the primary context's. */
    for (int dev = 0; dev < n; dev++)
      if (hipSetDevice(dev) != hipSuccess ||
          hipSetDeviceFlags(flags[wait_mode]) != hipSuccess)
        (void)hipGetLastError();
    hip_thread_forget();
  }
  for (int dev = 0; dev + 1 < n; dev++)
    enable_peers(dev, n);
  *count = n;
  return 0;
}

/* HIP has nothing to finalise: the runtime tears itself down at exit. */
static void hip_shutdown(driver_t *drv)
{
  (void)drv;
}

static int hip_get_caps(driver_t *drv, int dev, dev_caps_t *c)
{
  hipDeviceProp_t prop;
  hipError_t err;
  int clock_khz = 0;

  (void)drv;
  memset(c, 0, sizeof(*c));
  err = hipGetDeviceProperties(&prop, dev);
  if (err != hipSuccess)
    return hip_report_error("hipGetDeviceProperties", err);
  /* CUDA 13 dropped cudaDeviceProp.clockRate; the attribute is the one
   * source both platforms keep. */
  err = hipDeviceGetAttribute(&clock_khz, hipDeviceAttributeClockRate, dev);
  if (err != hipSuccess)
    return hip_report_error(
        "hipDeviceGetAttribute(hipDeviceAttributeClockRate)", err);

  snprintf(c->name, sizeof(c->name), "%.*s", (int)sizeof(prop.name), prop.name);
  hip_platform_arch(&prop, c);
  c->max_threads_per_block = prop.maxThreadsPerBlock;
  for (int i = 0; i < 3; i++) {
    c->max_block_dims[i] = prop.maxThreadsDim[i];
    c->max_grid_dims[i] = prop.maxGridSize[i];
  }
  c->shared_mem_per_block = prop.sharedMemPerBlock;
  c->total_global_mem = prop.totalGlobalMem;
  c->supports_fp64 = 1;
  c->supports_atomics = 1;
  c->warp_size = prop.warpSize;
  c->max_registers_per_block = prop.regsPerBlock;
  c->clock_rate_khz = clock_khz;
  c->multiprocessor_count = prop.multiProcessorCount;
  c->is_cpu = 0;
  c->pci_bus_id = prop.pciBusID;
  return 0;
}

static int hip_mem_info(driver_t *drv, int dev, uint64_t *free_b,
                        uint64_t *total)
{
  size_t f = 0, t = 0;
  hipError_t err;
  int prev, rc;

  (void)drv;
  rc = hip_enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipMemGetInfo(&f, &t);
  hip_leave_device(dev, prev);
  if (err != hipSuccess)
    return hip_report_error("hipMemGetInfo", err);
  *free_b = f;
  *total = t;
  return 0;
}

/* After a sticky fault (an illegal address on NVIDIA) the device's primary
 * context is unusable: destroy it. The next call on the device makes a new
 * one, so threads bound to the device keep working. */
static int hip_device_reset(driver_t *drv, int dev)
{
  hipError_t err;
  int prev, rc;

  (void)drv;
  rc = hip_enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipDeviceReset();
  /* Every thread's record of @p dev names the context just destroyed. */
  if (dev >= 0 && dev < BIND_DEVICES)
    __atomic_add_fetch(&reset_gen[dev], 1, __ATOMIC_RELEASE);
  hip_leave_device(dev, prev);
  if (err != hipSuccess)
    return hip_report_error("hipDeviceReset", err);
  {
    int n = 0;
    if (hipGetDeviceCount(&n) == hipSuccess)
      enable_peers(dev, n);
  }
  return 0;
}

static int hip_bind_thread(driver_t *drv, int dev)
{
  uint32_t gen = 0;
  hipError_t err;

  (void)drv;
  if (dev >= 0 && dev < BIND_DEVICES) {
    /* Read before hipSetDevice: a reset meanwhile leaves the record old,
     * and the next bind sets the device again. */
    gen = __atomic_load_n(&reset_gen[dev], __ATOMIC_ACQUIRE);
    if (bound_dev == dev && bound_gen == gen)
      return 0;
  }
  err = hipSetDevice(dev);
  if (err != hipSuccess) {
    hip_thread_forget();
    return hip_report_error("hipSetDevice", err);
  }
  bound_dev = dev < BIND_DEVICES ? dev : -1;
  bound_gen = gen;
  return 0;
}

static int hip_mem_alloc(driver_t *drv, int dev, size_t size, drv_mem_t *out)
{
  void *p = NULL;
  hipError_t err;
  int prev, rc;

  (void)drv;
  if (size == 0) {
    drv_set_error("cannot allocate 0 bytes");
    return HIPD_EINVAL;
  }
  rc = hip_enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipMalloc(&p, size);
  hip_leave_device(dev, prev);
  if (err != hipSuccess) {
    char call[80];

    snprintf(call, sizeof(call), "hipMalloc of %zu bytes on device %d", size,
             dev);
    return hip_report_error(call, err);
  }
  out->ptr = p;
  out->size = size;
  out->fd = -1;
  return 0;
}

static int hip_mem_free(driver_t *drv, int dev, drv_mem_t *mem)
{
  hipError_t err;

  (void)drv;
  (void)dev;
  if (mem->ptr == NULL)
    return 0;
  err = hipFree(mem->ptr);
  if (err != hipSuccess)
    return hip_report_error("hipFree", err);
  mem->ptr = NULL;
  mem->size = 0;
  return 0;
}

static int hip_stream_create(driver_t *drv, int dev, void **stream)
{
  hipStream_t s = NULL;
  hipError_t err;
  int prev, rc;

  (void)drv;
  rc = hip_enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  /* Non-blocking: no implicit synchronisation with the null stream, which
   * only the driver's cross-device copies use. */
  err = hipStreamCreateWithFlags(&s, hipStreamNonBlocking);
  hip_leave_device(dev, prev);
  if (err != hipSuccess)
    return hip_report_error("hipStreamCreateWithFlags", err);
  *stream = s;
  return 0;
}

static int hip_stream_destroy(driver_t *drv, int dev, void *stream)
{
  hipError_t err;

  (void)drv;
  (void)dev;
  if (stream == NULL) {
    drv_set_error("hipStreamDestroy: the null stream cannot be destroyed");
    return HIPD_EINVAL;
  }
  err = hipStreamDestroy((hipStream_t)stream);
  if (err != hipSuccess)
    return hip_report_error("hipStreamDestroy", err);
  return 0;
}

static int copy(void *stream, void *dst, const void *src, size_t n,
                hipMemcpyKind kind)
{
  hipError_t err;

  err = hipMemcpyAsync(dst, src, n, kind, (hipStream_t)stream);
  if (err != hipSuccess)
    return hip_report_error("hipMemcpyAsync", err);
  return 0;
}

static int hip_copy_h2d(driver_t *drv, void *stream, void *dst, const void *src,
                        size_t n)
{
  (void)drv;
  return copy(stream, dst, src, n, hipMemcpyHostToDevice);
}

static int hip_copy_d2h(driver_t *drv, void *stream, void *dst, const void *src,
                        size_t n)
{
  (void)drv;
  return copy(stream, dst, src, n, hipMemcpyDeviceToHost);
}

static int hip_copy_d2d(driver_t *drv, void *stream, void *dst, const void *src,
                        size_t n)
{
  (void)drv;
  return copy(stream, dst, src, n, hipMemcpyDeviceToDevice);
}

static int hip_copy_peer(driver_t *drv, void *stream, void *dst, int dst_dev,
                         const void *src, int src_dev, size_t n)
{
  hipError_t err;

  (void)drv;
  err = hipMemcpyPeerAsync(dst, dst_dev, src, src_dev, n, (hipStream_t)stream);
  if (err != hipSuccess)
    return hip_report_error("hipMemcpyPeerAsync", err);
  return 0;
}

static int hip_memset(driver_t *drv, void *stream, void *dst, int value,
                      size_t n)
{
  hipError_t err;

  (void)drv;
  err = hipMemsetAsync(dst, value, n, (hipStream_t)stream);
  if (err != hipSuccess)
    return hip_report_error("hipMemsetAsync", err);
  return 0;
}

/* Not ready is an answer, not a failure: no error text for it. */
static int hip_stream_query(driver_t *drv, void *stream)
{
  hipError_t err;

  (void)drv;
  err = hipStreamQuery((hipStream_t)stream);
  if (err == hipSuccess)
    return 0;
  if (err == hipErrorNotReady)
    return HIPD_ENOTREADY;
  return hip_report_error("hipStreamQuery", err);
}

/* hipd's marks stay below 2^31 (device.c): HIP takes an int32_t. */
static int hip_stream_mark(driver_t *drv, void *stream, void *word,
                           uint32_t value)
{
  hipError_t err;

  (void)drv;
  err = hip_platform_write_value((hipStream_t)stream, word, value);
  if (err != hipSuccess)
    return hip_report_error("hipStreamWriteValue32", err);
  return 0;
}

static int hip_stream_sync(driver_t *drv, void *stream)
{
  hipError_t err;

  (void)drv;
  err = hipStreamSynchronize((hipStream_t)stream);
  hip_output_synced(); /* what its kernels printed is flushed now */
  if (err != hipSuccess)
    return hip_report_error("hipStreamSynchronize", err);
  return 0;
}

typedef struct {
  drv_notify_fn fn;
  void *arg;
} notify_t;

/* Runs on a HIP runtime thread, where calling HIP is not allowed: it only
 * translates the status and hands it on. */
static void notify_cb(hipStream_t stream, hipError_t status, void *data)
{
  notify_t n = *(notify_t *)data;

  (void)stream;
  free(data);
  n.fn(n.arg, hip_platform_stream_status(status));
}

static int hip_stream_notify(driver_t *drv, void *stream, drv_notify_fn fn,
                             void *arg)
{
  notify_t *n;
  hipError_t err;

  (void)drv;
  n = malloc(sizeof(*n));
  if (n == NULL) {
    drv_set_error("stream notification: out of memory");
    return HIPD_ENOMEM;
  }
  n->fn = fn;
  n->arg = arg;
  /* hipStreamAddCallback rather than hipLaunchHostFunc, which HIP 5.2.3's
   * nvidia mapping lacks. */
  err = hipStreamAddCallback((hipStream_t)stream, notify_cb, n, 0);
  if (err != hipSuccess) {
    free(n);
    return hip_report_error("hipStreamAddCallback", err);
  }
  return 0;
}

static int hip_event_create(driver_t *drv, int dev, void **event)
{
  hipEvent_t e = NULL;
  hipError_t err;
  int prev, rc;

  (void)drv;
  rc = hip_enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipEventCreate(&e); /* timing enabled */
  hip_leave_device(dev, prev);
  if (err != hipSuccess)
    return hip_report_error("hipEventCreate", err);
  *event = e;
  return 0;
}

static int hip_event_destroy(driver_t *drv, int dev, void *event)
{
  hipError_t err;

  (void)drv;
  (void)dev;
  err = hipEventDestroy((hipEvent_t)event);
  if (err != hipSuccess)
    return hip_report_error("hipEventDestroy", err);
  return 0;
}

static int hip_event_record(driver_t *drv, void *event, void *stream)
{
  hipError_t err;

  (void)drv;
  err = hipEventRecord((hipEvent_t)event, (hipStream_t)stream);
  if (err != hipSuccess)
    return hip_report_error("hipEventRecord", err);
  return 0;
}

/* HIPD_ENOTREADY while either mark is pending; a lost device stays
 * HIPD_EDEVLOST; any other failure (a mark never recorded, among others)
 * is HIPD_EDEVICE. */
static int hip_event_elapsed(driver_t *drv, void *start, void *stop, float *ms)
{
  hipError_t err;
  int rc;

  (void)drv;
  err = hipEventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)stop);
  if (err == hipSuccess)
    return 0;
  rc = hip_report_error("hipEventElapsedTime", err);
  if (rc == HIPD_ENOTREADY || rc == HIPD_EDEVLOST)
    return rc;
  return HIPD_EDEVICE;
}

static driver_t hip_driver = {
    .name = "hip",
    .platform = HIPD_HIP_PLATFORM,
    .init = hip_init,
    .shutdown = hip_shutdown,
    .get_caps = hip_get_caps,
    .mem_info = hip_mem_info,
    .bind_thread = hip_bind_thread,
    .mem_alloc = hip_mem_alloc,
    .mem_free = hip_mem_free,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .copy_h2d = hip_copy_h2d,
    .copy_d2h = hip_copy_d2h,
    .copy_d2d = hip_copy_d2d,
    .copy_peer = hip_copy_peer,
    .host_register = hip_host_register,
    .host_unregister = hip_host_unregister,
    .host_map = hip_host_map,
    .host_unmap = hip_host_unmap,
    .memset = hip_memset,
    .stream_query = hip_stream_query,
    .stream_mark = hip_stream_mark,
    .stream_sync = hip_stream_sync,
    .stream_notify = hip_stream_notify,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .event_elapsed = hip_event_elapsed,
    .compiler_id = hip_compiler_id,
    .arch_supported = hip_arch_supported,
    .compile = hip_compile,
    .compile_driver_open = hip_compile_driver_open,
    .module_load = hip_module_load,
    .module_unload = hip_module_unload,
    .kernel_get = hip_kernel_get,
    .kernel_find = hip_kernel_find,
    .launch = hip_launch,
    .kernel_prints = hip_kernel_prints,
    .device_reset = hip_device_reset,
};

driver_t *driver_hip(void)
{
  return &hip_driver;
}
