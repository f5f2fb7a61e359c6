/* daemon/drivers/hip.c: the HIP device driver.
 *
 * One source for both HIP platforms: AMD (the ROCm runtime, libamdhip64)
 * and NVIDIA (HIP's header-only mapping onto the CUDA runtime), chosen by
 * __HIP_PLATFORM_AMD__ or __HIP_PLATFORM_NVIDIA__ in HIP_CPPFLAGS. Driver
 * streams and events are hipStream_t and hipEvent_t themselves. Kernels
 * are compiled with hiprtc into an image of the driver's own (see
 * "kernels" below); its modules and kernels are the driver's structures.
 * The only global state is what the runtime compiler is (rtc_setup).
 *
 * Calls that take a device number make that device current for the call
 * and then give the thread back its previous device, so a query made from
 * any thread never moves a worker off the device it was bound to.
 */
#include "config.h"

#ifdef __HIP_PLATFORM_NVIDIA__
#include "hip_nvidia_compat.h" /* must precede every HIP header */
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#ifdef __HIP_PLATFORM_AMD__
#include <amd_comgr.h> /* types only: the library is looked up at run time */
#else
#include <nvrtc.h> /* hiprtcProgram is an nvrtcProgram: for the cubin */
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "hipd.h"

static void rtc_setup(void);

/* A hipd code for a HIP error. Errors that leave the device's context
 * unusable ("sticky": every later call on it fails too) are HIPD_EDEVLOST.
 * Pure: safe in stream callbacks. */
static int err_code(hipError_t err)
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

#ifdef __HIP_PLATFORM_NVIDIA__
/* The kernel faults that HIP 5.2.3's nvidia mapping does not know and
 * turns into hipErrorUnknown. Like the ones it knows (illegal address,
 * launch failure), they leave the context unusable. */
static int cuda_sticky(cudaError_t err)
{
  return err == cudaErrorHardwareStackError ||
         err == cudaErrorIllegalInstruction ||
         err == cudaErrorMisalignedAddress ||
         err == cudaErrorInvalidAddressSpace || err == cudaErrorInvalidPc;
}
#endif

/* Describe the failure of HIP call @p call and return its hipd code. */
static int report_error(const char *call, hipError_t err)
{
#ifdef __HIP_PLATFORM_NVIDIA__
  /* hipErrorUnknown may hide a CUDA error the mapping does not translate;
   * the thread's last CUDA error still names it. */
  if (err == hipErrorUnknown) {
    cudaError_t cerr = cudaPeekAtLastError();

    if (cerr != cudaSuccess && hipCUDAErrorTohipError(cerr) == err) {
      drv_set_error("%s: %s", call, cudaGetErrorString(cerr));
      return cuda_sticky(cerr) ? HIPD_EDEVLOST : HIPD_EDEVICE;
    }
  }
#endif
  drv_set_error("%s: %s", call, hipGetErrorString(err));
  return err_code(err);
}

/* Make @p dev the calling thread's device, saving the previous one in
 * *prev for leave_device(). Returns 0 or a code (error text set). */
static int enter_device(int dev, int *prev)
{
  hipError_t err;

  err = hipGetDevice(prev);
  if (err != hipSuccess)
    return report_error("hipGetDevice", err);
  if (*prev == dev)
    return 0;
  err = hipSetDevice(dev);
  if (err != hipSuccess)
    return report_error("hipSetDevice", err);
  return 0;
}

/* Give the thread back the device enter_device() saved. Cannot fail in a
 * way worth reporting: @p prev was current a moment ago. */
static void leave_device(int dev, int prev)
{
  if (prev != dev)
    (void)hipSetDevice(prev);
}

/* Errors that mean "this machine has no usable device" rather than a
 * failure: no GPU, no or too old a kernel driver. ROCm's hipInit answers
 * hipErrorInvalidDevice when there is no /dev/kfd. */
static int means_no_device(hipError_t err)
{
  if (err == hipErrorNoDevice || err == hipErrorInsufficientDriver ||
      err == hipErrorInvalidDevice)
    return 1;
#ifdef __HIP_PLATFORM_NVIDIA__
  /* Only CUDA's link-time stub libcuda.so is found, no driver: the mapping
   * turns cudaErrorStubLibrary into hipErrorUnknown. */
  if (err == hipErrorUnknown && cudaPeekAtLastError() == cudaErrorStubLibrary)
    return 1;
#endif
  return 0;
}

/* Without a usable device, returns 0 with *count = 0 and leaves the reason
 * in drv_last_error() for an informational log line. */
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
        enter_device(dev, &prev) == 0) {
      (void)hipDeviceEnablePeerAccess(other, 0);
      leave_device(dev, prev);
    }
    if (hipDeviceCanAccessPeer(&can, other, dev) == hipSuccess && can &&
        enter_device(other, &prev) == 0) {
      (void)hipDeviceEnablePeerAccess(dev, 0);
      leave_device(other, prev);
    }
  }
  (void)hipGetLastError(); /* "already enabled" is not an error here */
}

static int wait_mode; /* hip_driver_set_wait() */

void hip_driver_set_wait(int mode)
{
  wait_mode = mode;
}

static int hip_init(driver_t *drv, int *count)
{
  hipError_t init_err, err;
  int n = 0;

  (void)drv;
  *count = 0;
  /* The compiler works without a device; setting it up here keeps its
   * one-time cost (AMD: loading comgr and LLVM) off the loop thread. */
  rtc_setup();
  /* Without a GPU either call may fail; the device count decides whether
   * that is an error. */
  init_err = hipInit(0);
  err = hipGetDeviceCount(&n);
  if (err != hipSuccess) {
    if (means_no_device(err)) {
      (void)report_error("hipGetDeviceCount", err);
      return 0;
    }
    if (init_err != hipSuccess)
      return report_error("hipInit", init_err);
    return report_error("hipGetDeviceCount", err);
  }
  if (init_err != hipSuccess && n > 0)
    return report_error("hipInit", init_err);
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

#ifdef __HIP_PLATFORM_AMD__
/* Arch and "compute capability" of an AMD device, from its LLVM target
 * name gfx<major><minor><stepping> ("gfx90a:sramecc+:xnack-"): arch is the
 * name up to the first ':'; cc_major the decimal digits before the last
 * two characters; cc_minor those two characters read as one hex number, so
 * that the LLVM minor is the high nibble and the stepping the low one:
 * gfx90a -> 9, 0x0a (10); gfx942 -> 9, 0x42 (66); gfx1030 -> 10, 0x30 (48).
 * Every target then has its own pair, ordered as the targets are. A name
 * that does not parse leaves the runtime's major and minor. */
static void amd_arch(const hipDeviceProp_t *prop, dev_caps_t *c)
{
  const char *v;
  size_t len, i;
  int major = 0;
  char *end;
  long minor;

  len = strcspn(prop->gcnArchName, ":");
  if (len > 0)
    snprintf(c->arch, sizeof(c->arch), "%.*s", (int)len, prop->gcnArchName);
  else
    snprintf(c->arch, sizeof(c->arch), "gfx%d", prop->gcnArch);
  c->cc_major = prop->major;
  c->cc_minor = prop->minor;

  if (strncmp(c->arch, "gfx", 3) != 0)
    return;
  v = c->arch + 3;
  len = strlen(v);
  if (len < 3)
    return;
  for (i = 0; i < len - 2; i++) {
    if (v[i] < '0' || v[i] > '9')
      return;
    major = major * 10 + (v[i] - '0');
  }
  minor = strtol(v + len - 2, &end, 16);
  if (*end != '\0' || minor < 0)
    return;
  c->cc_major = major;
  c->cc_minor = (int)minor;
}
#endif

static int hip_get_caps(driver_t *drv, int dev, dev_caps_t *c)
{
  hipDeviceProp_t prop;
  hipError_t err;
  int clock_khz = 0;

  (void)drv;
  memset(c, 0, sizeof(*c));
  err = hipGetDeviceProperties(&prop, dev);
  if (err != hipSuccess)
    return report_error("hipGetDeviceProperties", err);
  /* CUDA 13 dropped cudaDeviceProp.clockRate; the attribute is the one
   * source both platforms keep. */
  err = hipDeviceGetAttribute(&clock_khz, hipDeviceAttributeClockRate, dev);
  if (err != hipSuccess)
    return report_error("hipDeviceGetAttribute(hipDeviceAttributeClockRate)",
                        err);

  snprintf(c->name, sizeof(c->name), "%.*s", (int)sizeof(prop.name), prop.name);
#ifdef __HIP_PLATFORM_AMD__
  amd_arch(&prop, c);
#else
  snprintf(c->arch, sizeof(c->arch), "sm_%d%d", prop.major, prop.minor);
  c->cc_major = prop.major;
  c->cc_minor = prop.minor;
#endif
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
  rc = enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipMemGetInfo(&f, &t);
  leave_device(dev, prev);
  if (err != hipSuccess)
    return report_error("hipMemGetInfo", err);
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
  rc = enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipDeviceReset();
  leave_device(dev, prev);
  if (err != hipSuccess)
    return report_error("hipDeviceReset", err);
  {
    int n = 0;
    if (hipGetDeviceCount(&n) == hipSuccess)
      enable_peers(dev, n);
  }
  return 0;
}

static int hip_bind_thread(driver_t *drv, int dev)
{
  hipError_t err;

  (void)drv;
  err = hipSetDevice(dev);
  if (err != hipSuccess)
    return report_error("hipSetDevice", err);
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
  rc = enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipMalloc(&p, size);
  leave_device(dev, prev);
  if (err != hipSuccess) {
    char call[80];

    snprintf(call, sizeof(call), "hipMalloc of %zu bytes on device %d", size,
             dev);
    return report_error(call, err);
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
    return report_error("hipFree", err);
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
  rc = enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  /* Non-blocking: no implicit synchronisation with the null stream, which
   * only the driver's cross-device copies use. */
  err = hipStreamCreateWithFlags(&s, hipStreamNonBlocking);
  leave_device(dev, prev);
  if (err != hipSuccess)
    return report_error("hipStreamCreateWithFlags", err);
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
    return report_error("hipStreamDestroy", err);
  return 0;
}

static int copy(void *stream, void *dst, const void *src, size_t n,
                hipMemcpyKind kind)
{
  hipError_t err;

  err = hipMemcpyAsync(dst, src, n, kind, (hipStream_t)stream);
  if (err != hipSuccess)
    return report_error("hipMemcpyAsync", err);
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
    return report_error("hipMemcpyPeerAsync", err);
  return 0;
}

static int hip_memset(driver_t *drv, void *stream, void *dst, int value,
                      size_t n)
{
  hipError_t err;

  (void)drv;
  err = hipMemsetAsync(dst, value, n, (hipStream_t)stream);
  if (err != hipSuccess)
    return report_error("hipMemsetAsync", err);
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
  return report_error("hipStreamQuery", err);
}

static int hip_stream_sync(driver_t *drv, void *stream)
{
  hipError_t err;

  (void)drv;
  err = hipStreamSynchronize((hipStream_t)stream);
  if (err != hipSuccess)
    return report_error("hipStreamSynchronize", err);
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
#ifdef __HIP_PLATFORM_NVIDIA__
  /* HIP's nvidia mapping passes our callback to cudaStreamAddCallback as
   * is, so the status CUDA hands it is a cudaError_t. */
  if (cuda_sticky((cudaError_t)status)) {
    n.fn(n.arg, HIPD_EDEVLOST);
    return;
  }
  status = hipCUDAErrorTohipError((cudaError_t)status);
#endif
  n.fn(n.arg, err_code(status));
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
    return report_error("hipStreamAddCallback", err);
  }
  return 0;
}

static int hip_event_create(driver_t *drv, int dev, void **event)
{
  hipEvent_t e = NULL;
  hipError_t err;
  int prev, rc;

  (void)drv;
  rc = enter_device(dev, &prev);
  if (rc != 0)
    return rc;
  err = hipEventCreate(&e); /* timing enabled */
  leave_device(dev, prev);
  if (err != hipSuccess)
    return report_error("hipEventCreate", err);
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
    return report_error("hipEventDestroy", err);
  return 0;
}

static int hip_event_record(driver_t *drv, void *event, void *stream)
{
  hipError_t err;

  (void)drv;
  err = hipEventRecord((hipEvent_t)event, (hipStream_t)stream);
  if (err != hipSuccess)
    return report_error("hipEventRecord", err);
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
  rc = report_error("hipEventElapsedTime", err);
  if (rc == HIPD_ENOTREADY || rc == HIPD_EDEVLOST)
    return rc;
  return HIPD_EDEVICE;
}

/* ---------------------------------------------------------------- kernels
 *
 * Compilation is hiprtc: on AMD the ROCm runtime's own (through the code
 * object manager, comgr), on NVIDIA HIP's mapping onto NVRTC. Neither needs
 * a device. Kernels are found by hiprtc name expressions, so a kernel need
 * not be extern "C": "axpy<float>" or "ns::scale" resolve to their mangled
 * ("lowered") names at compile time, and the image keeps the pairs.
 *
 * The image (what compile makes and module_load takes) is this driver's
 * own format, all integers little-endian:
 *
 *   offset  size  field
 *        0     8  magic "HIPDHIP1"
 *        8     1  platform: 1 AMD, 2 NVIDIA
 *        9     1  code kind: 1 AMD code object (ELF), 2 CUDA cubin (ELF),
 *                 3 PTX (text, NUL-terminated)
 *       10     2  reserved, 0
 *       12     4  N, the number of kernels
 *       16     4  T, the size of the kernel table in bytes
 *       20     4  C, the size of the code in bytes
 *       24     T  kernel table: the target architecture, NUL-terminated,
 *                 then N records: the name as given to compile (NUL-
 *                 terminated), its lowered name (NUL-terminated), u32 P,
 *                 then P u32 parameter sizes in bytes. P = 0xffffffff
 *                 when the compiler did not say (NVIDIA: the loader asks
 *                 the driver instead).
 *   24 + T     C  code
 *
 * and nothing after it. An image is only ever loaded by the platform that
 * made it.
 *
 * Parameter sizes guard launches: HIP copies as many parameters as the
 * kernel declares, each of its declared size, from the array it is given,
 * so a launch with too few or too narrow arguments would read past what the
 * client sent. Where the sizes are known, launch refuses such a call with
 * HIPD_ESIGNATURE. AMD sizes come from the code object's metadata (comgr),
 * NVIDIA ones from cuFuncGetParamInfo (CUDA 12.4 and later) at lookup.
 */

#define IMAGE_MAGIC "HIPDHIP1"
#define IMAGE_HEADER 24
#define IMAGE_PLATFORM_AMD 1
#define IMAGE_PLATFORM_NVIDIA 2
#define IMAGE_CODE_AMDGPU 1
#define IMAGE_CODE_CUBIN 2
#define IMAGE_CODE_PTX 3
#define PARAMS_UNKNOWN UINT32_MAX
/* Part of compiler_id, and so of every cache key: bump it when the image
 * format or the options this driver adds by itself change. */
#define IMAGE_REVISION 1

#ifdef __HIP_PLATFORM_AMD__
#define IMAGE_PLATFORM IMAGE_PLATFORM_AMD
#else
#define IMAGE_PLATFORM IMAGE_PLATFORM_NVIDIA
#endif

#define MAX_NAMES 1024    /* kernels per compile */
#define MAX_NAME_LEN 1024 /* bytes in a kernel name */
#define MAX_OPTS 64       /* user options per compile */
#define MAX_PARAMS 65536  /* parameters of a kernel, in an image */

/* The runtime compiler, set up once (rtc_setup). */
static struct {
  pthread_once_t once;
  char id[128]; /* compiler_id */
#ifdef __HIP_PLATFORM_AMD__
  /* comgr, which hiprtc loads itself: asked which targets it knows (hiprtc
   * 5.2 aborts the process on a target name comgr rejects) and for the
   * kernels' parameters. NULL functions when it cannot be loaded. */
  amd_comgr_status_t (*create_action_info)(amd_comgr_action_info_t *);
  amd_comgr_status_t (*destroy_action_info)(amd_comgr_action_info_t);
  amd_comgr_status_t (*set_isa_name)(amd_comgr_action_info_t, const char *);
  amd_comgr_status_t (*create_data)(amd_comgr_data_kind_t, amd_comgr_data_t *);
  amd_comgr_status_t (*set_data)(amd_comgr_data_t, size_t, const char *);
  amd_comgr_status_t (*release_data)(amd_comgr_data_t);
  amd_comgr_status_t (*get_data_metadata)(amd_comgr_data_t,
                                          amd_comgr_metadata_node_t *);
  amd_comgr_status_t (*destroy_metadata)(amd_comgr_metadata_node_t);
  amd_comgr_status_t (*metadata_lookup)(amd_comgr_metadata_node_t, const char *,
                                        amd_comgr_metadata_node_t *);
  amd_comgr_status_t (*get_metadata_list_size)(amd_comgr_metadata_node_t,
                                               size_t *);
  amd_comgr_status_t (*index_list_metadata)(amd_comgr_metadata_node_t, size_t,
                                            amd_comgr_metadata_node_t *);
  amd_comgr_status_t (*get_metadata_string)(amd_comgr_metadata_node_t, size_t *,
                                            char *);
  int have_comgr; /* every function above was found */
#else
  int archs[64]; /* the SM numbers NVRTC compiles for */
  int narchs;
#endif
} R = {.once = PTHREAD_ONCE_INIT};

#ifdef __HIP_PLATFORM_AMD__
/* The soname HIP 5.x itself loads comgr by. */
#define COMGR_LIB "libamd_comgr.so.2"
/* dlsym hands out object pointers; POSIX guarantees that they convert to
 * function pointers. */
#define COMGR_SYM(field, sym) *(void **)&R.field = dlsym(lib, sym)

static void rtc_setup_once(void)
{
  void (*get_version)(size_t *, size_t *);
  size_t major = 0, minor = 0;
  void *lib;

  snprintf(R.id, sizeof(R.id), "hiprtc %d.%d.%d hipd-hip-%d", HIP_VERSION_MAJOR,
           HIP_VERSION_MINOR, HIP_VERSION_PATCH, IMAGE_REVISION);
  lib = dlopen(COMGR_LIB, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL)
    return;
  COMGR_SYM(create_action_info, "amd_comgr_create_action_info");
  COMGR_SYM(destroy_action_info, "amd_comgr_destroy_action_info");
  COMGR_SYM(set_isa_name, "amd_comgr_action_info_set_isa_name");
  COMGR_SYM(create_data, "amd_comgr_create_data");
  COMGR_SYM(set_data, "amd_comgr_set_data");
  COMGR_SYM(release_data, "amd_comgr_release_data");
  COMGR_SYM(get_data_metadata, "amd_comgr_get_data_metadata");
  COMGR_SYM(destroy_metadata, "amd_comgr_destroy_metadata");
  COMGR_SYM(metadata_lookup, "amd_comgr_metadata_lookup");
  COMGR_SYM(get_metadata_list_size, "amd_comgr_get_metadata_list_size");
  COMGR_SYM(index_list_metadata, "amd_comgr_index_list_metadata");
  COMGR_SYM(get_metadata_string, "amd_comgr_get_metadata_string");
#undef COMGR_SYM
  *(void **)&get_version = dlsym(lib, "amd_comgr_get_version");
  R.have_comgr = R.create_action_info && R.destroy_action_info &&
                 R.set_isa_name && R.create_data && R.set_data &&
                 R.release_data && R.get_data_metadata && R.destroy_metadata &&
                 R.metadata_lookup && R.get_metadata_list_size &&
                 R.index_list_metadata && R.get_metadata_string;
  /* The compiler proper is comgr's LLVM: its version belongs in the id. */
  if (get_version != NULL) {
    get_version(&major, &minor);
    snprintf(R.id, sizeof(R.id), "hiprtc %d.%d.%d comgr %zu.%zu hipd-hip-%d",
             HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH, major,
             minor, IMAGE_REVISION);
  }
  /* The library stays loaded: hiprtc uses it for the process's life. */
}
#else
static void rtc_setup_once(void)
{
  int major = 0, minor = 0, rt = 0, n = 0;

  (void)nvrtcVersion(&major, &minor);
  (void)cudaRuntimeGetVersion(&rt);
  snprintf(R.id, sizeof(R.id), "nvrtc %d.%d cudart %d.%d hipd-hip-%d", major,
           minor, rt / 1000, rt % 1000 / 10, IMAGE_REVISION);
  if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
      n <= (int)(sizeof(R.archs) / sizeof(R.archs[0])) &&
      nvrtcGetSupportedArchs(R.archs) == NVRTC_SUCCESS)
    R.narchs = n;
}
#endif

/* Everything the kernel functions share, set up on first use. On AMD it
 * loads comgr and with it LLVM (a noticeable pause), which is why hip_init
 * calls it before the loop runs. */
static void rtc_setup(void)
{
  pthread_once(&R.once, rtc_setup_once);
}

static const char *hip_compiler_id(driver_t *drv)
{
  (void)drv;
  rtc_setup();
  return R.id;
}

#ifdef __HIP_PLATFORM_AMD__
/* "gfx" + hex digits, then any number of ":feature+" / ":feature-" (the
 * LLVM target ID syntax, "gfx90a:sramecc+:xnack-"). */
static int amd_arch_shape(const char *arch)
{
  const char *p = arch + 3;
  size_t n;

  if (strncmp(arch, "gfx", 3) != 0 || strlen(arch) > 48)
    return 0;
  n = strspn(p, "0123456789abcdef");
  if (n == 0)
    return 0;
  p += n;
  while (*p == ':') {
    n = strspn(++p, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (n == 0 || (p[n] != '+' && p[n] != '-'))
      return 0;
    p += n + 1;
  }
  return *p == '\0';
}

/* Does comgr, and so hiprtc, know target ID @p arch? The shape is checked
 * here; comgr then decides on the processor and its features (gfx1030 has
 * no xnack). This matters: hiprtc 5.2 aborts the process on a target comgr
 * refuses instead of failing the compile. */
static int hip_arch_supported(driver_t *drv, const char *arch)
{
  amd_comgr_action_info_t info;
  char isa[80];
  int ok;

  (void)drv;
  if (arch == NULL || !amd_arch_shape(arch))
    return 0;
  rtc_setup();
  if (!R.have_comgr || R.create_action_info(&info) != AMD_COMGR_STATUS_SUCCESS)
    return 0;
  snprintf(isa, sizeof(isa), "amdgcn-amd-amdhsa--%s", arch);
  ok = R.set_isa_name(info, isa) == AMD_COMGR_STATUS_SUCCESS;
  (void)R.destroy_action_info(info);
  return ok;
}
#else
/* Digits only, 1 to 4 of them, no leading zero: the value in *num. */
static int parse_number(const char *s, size_t len, int *num)
{
  int v = 0;

  if (len == 0 || len > 4 || s[0] == '0')
    return 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return 0;
    v = v * 10 + (s[i] - '0');
  }
  *num = v;
  return 1;
}

/* "sm_<N>" (a cubin) or "compute_<N>" (PTX), N one of the SM numbers
 * NVRTC lists, with NVRTC's suffixes: "a" (arch-specific, sm_90 on) and
 * "f" (family, sm_100 on). */
static int hip_arch_supported(driver_t *drv, const char *arch)
{
  const char *p;
  size_t len;
  int num;

  (void)drv;
  if (arch == NULL)
    return 0;
  if (strncmp(arch, "sm_", 3) == 0)
    p = arch + 3;
  else if (strncmp(arch, "compute_", 8) == 0)
    p = arch + 8;
  else
    return 0;
  len = strlen(p);
  if (len > 0 && (p[len - 1] == 'a' || p[len - 1] == 'f')) {
    len--;
    if (!parse_number(p, len, &num) || num < (p[len] == 'a' ? 90 : 100))
      return 0;
  } else if (!parse_number(p, len, &num)) {
    return 0;
  }
  rtc_setup();
  for (int i = 0; i < R.narchs; i++)
    if (R.archs[i] == num)
      return 1;
  return 0;
}
#endif

/* A C identifier starting at @p s; its length, 0 if none. */
static size_t ident_len(const char *s)
{
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
    return 0;
  return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789_");
}

/* No control characters (a newline in -D would add preprocessor lines). */
static int printable(const char *s)
{
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      return 0;
  return 1;
}

#define ALLOWED_OPTIONS                                                        \
  "-D<macro>[=value], -U<macro>, -O0..-O3, -std=c++11|c++14|c++17|c++20, "     \
  "-g, -lineinfo, --use_fast_math (or -ffast-math), --fmad=true|false"

/* Check user option @p opt and spell it for this platform in *out (NULL:
 * nothing to pass). Options are portable: the same list means the same on
 * AMD (clang spellings) and NVIDIA (NVRTC spellings); anything that could
 * read or write files (-I, -include, -o, --output...) or pick another
 * target is refused. *std is set when the option is a -std. Returns 0 or
 * HIPD_EINVAL (error text set). */
static int option_translate(const char *opt, const char **out, int *std)
{
#ifdef __HIP_PLATFORM_AMD__
  static const char *const olevel[] = {"-O0", "-O1", "-O2", "-O3"};
#else
  /* NVRTC optimises fully and has no -O: the level goes to ptxas. */
  static const char *const olevel[] = {
      "--ptxas-options=-O0", "--ptxas-options=-O1", "--ptxas-options=-O2",
      "--ptxas-options=-O3"};
#endif
  size_t n;

  *out = NULL;
  if (!printable(opt)) {
    drv_set_error("option '%.64s' contains a control character", opt);
    return HIPD_EINVAL;
  }
  if (strncmp(opt, "-D", 2) == 0 || strncmp(opt, "-U", 2) == 0) {
    n = ident_len(opt + 2);
    if (n > 0 && (opt[1] == 'D' ? (opt[2 + n] == '\0' || opt[2 + n] == '=')
                                : opt[2 + n] == '\0')) {
      *out = opt;
      return 0;
    }
    drv_set_error("option '%.64s': expected %s<macro>%s in one word", opt,
                  opt[1] == 'D' ? "-D" : "-U", opt[1] == 'D' ? "[=value]" : "");
    return HIPD_EINVAL;
  }
  if (strlen(opt) == 3 && opt[0] == '-' && opt[1] == 'O' && opt[2] >= '0' &&
      opt[2] <= '3') {
    *out = olevel[opt[2] - '0'];
    return 0;
  }
  if (strcmp(opt, "-std=c++11") == 0 || strcmp(opt, "-std=c++14") == 0 ||
      strcmp(opt, "-std=c++17") == 0 || strcmp(opt, "-std=c++20") == 0) {
    *out = opt;
    *std = 1;
    return 0;
  }
#ifdef __HIP_PLATFORM_AMD__
  if (strcmp(opt, "-g") == 0)
    *out = "-g";
  else if (strcmp(opt, "-lineinfo") == 0 ||
           strcmp(opt, "--generate-line-info") == 0)
    *out = "-gline-tables-only";
  else if (strcmp(opt, "--use_fast_math") == 0 ||
           strcmp(opt, "-use_fast_math") == 0 ||
           strcmp(opt, "-ffast-math") == 0)
    *out = "-ffast-math";
  else if (strcmp(opt, "--fmad=true") == 0)
    *out = "-ffp-contract=fast";
  else if (strcmp(opt, "--fmad=false") == 0)
    *out = "-ffp-contract=off";
#else
  if (strcmp(opt, "-g") == 0)
    *out = "--device-debug";
  else if (strcmp(opt, "-lineinfo") == 0 ||
           strcmp(opt, "--generate-line-info") == 0)
    *out = "--generate-line-info";
  else if (strcmp(opt, "--use_fast_math") == 0 ||
           strcmp(opt, "-use_fast_math") == 0 ||
           strcmp(opt, "-ffast-math") == 0)
    *out = "--use_fast_math";
  else if (strcmp(opt, "--fmad=true") == 0 || strcmp(opt, "--fmad=false") == 0)
    *out = opt;
#endif
  if (*out != NULL)
    return 0;
  if (strncmp(opt, "-I", 2) == 0 || strncmp(opt, "--include", 9) == 0 ||
      strncmp(opt, "-include", 8) == 0 || strncmp(opt, "-o", 2) == 0 ||
      strncmp(opt, "--output", 8) == 0 || strncmp(opt, "-M", 2) == 0 ||
      strncmp(opt, "--pre-include", 13) == 0 || strncmp(opt, "-save", 5) == 0)
    drv_set_error("option '%.64s' is not allowed: it reads or writes files "
                  "(allowed: " ALLOWED_OPTIONS ")",
                  opt);
  else
    drv_set_error(
        "option '%.64s' is not allowed (allowed: " ALLOWED_OPTIONS ")", opt);
  return HIPD_EINVAL;
}

/* A growing byte buffer for the image. */
typedef struct {
  unsigned char *p;
  size_t len, cap;
  int failed; /* out of memory: further writes are dropped */
} buf_t;

static void buf_put(buf_t *b, const void *data, size_t n)
{
  if (b->failed)
    return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    unsigned char *p;

    while (cap < b->len + n)
      cap *= 2;
    p = realloc(b->p, cap);
    if (p == NULL) {
      b->failed = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
}

static void buf_u32(buf_t *b, uint32_t v)
{
  unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                         (unsigned char)(v >> 16), (unsigned char)(v >> 24)};

  buf_put(b, le, 4);
}

static void buf_str(buf_t *b, const char *s)
{
  buf_put(b, s, strlen(s) + 1);
}

static uint32_t get_u32(const unsigned char *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* One kernel of a compile: names and parameter sizes. */
typedef struct {
  const char *name; /* as given */
  char *lowered;    /* malloc'd */
  uint32_t nparams; /* PARAMS_UNKNOWN if not known */
  uint32_t *sizes;  /* malloc'd, nparams entries */
} compiled_kernel_t;

#ifdef __HIP_PLATFORM_AMD__
/* A string-valued metadata entry @p key of map @p map into @p out.
 * Returns 1 if found and it fits. */
static int meta_string(amd_comgr_metadata_node_t map, const char *key,
                       char *out, size_t outsz)
{
  amd_comgr_metadata_node_t node;
  size_t size = 0;
  int ok = 0;

  if (R.metadata_lookup(map, key, &node) != AMD_COMGR_STATUS_SUCCESS)
    return 0;
  if (R.get_metadata_string(node, &size, NULL) == AMD_COMGR_STATUS_SUCCESS &&
      size > 0 && size <= outsz &&
      R.get_metadata_string(node, &size, out) == AMD_COMGR_STATUS_SUCCESS) {
    out[size - 1] = '\0';
    ok = 1;
  }
  (void)R.destroy_metadata(node);
  return ok;
}

/* The explicit parameters of kernel @p k (an entry of amdhsa.kernels) into
 * @p ck: hidden arguments (value kinds "hidden_*") are the runtime's.
 * Returns 0, or -1 if the metadata is not as expected. */
static int amd_kernel_params(amd_comgr_metadata_node_t k, compiled_kernel_t *ck)
{
  amd_comgr_metadata_node_t args, arg;
  char kind[64], size[32];
  uint32_t *sizes = NULL;
  uint32_t n = 0;
  size_t count = 0;
  int rc = -1;

  if (R.metadata_lookup(k, ".args", &args) != AMD_COMGR_STATUS_SUCCESS) {
    /* No arguments at all: the entry is left out. */
    ck->nparams = 0;
    return 0;
  }
  if (R.get_metadata_list_size(args, &count) != AMD_COMGR_STATUS_SUCCESS ||
      count > MAX_PARAMS)
    goto out;
  sizes = calloc(count ? count : 1, sizeof(*sizes));
  if (sizes == NULL)
    goto out;
  for (size_t i = 0; i < count; i++) {
    char *end;
    unsigned long v;
    int ok;

    if (R.index_list_metadata(args, i, &arg) != AMD_COMGR_STATUS_SUCCESS)
      goto out;
    ok = meta_string(arg, ".value_kind", kind, sizeof(kind)) &&
         meta_string(arg, ".size", size, sizeof(size));
    (void)R.destroy_metadata(arg);
    if (!ok)
      goto out;
    if (strncmp(kind, "hidden_", 7) == 0)
      continue;
    v = strtoul(size, &end, 10);
    if (*end != '\0' || v == 0 || v > UINT32_MAX - 1)
      goto out;
    sizes[n++] = (uint32_t)v;
  }
  ck->nparams = n;
  ck->sizes = sizes;
  sizes = NULL;
  rc = 0;
out:
  free(sizes);
  (void)R.destroy_metadata(args);
  return rc;
}

/* Fill the kernels' parameter sizes from code object @p code. A kernel
 * that the metadata lists no entry for is not a __global__ function:
 * HIPD_ENOKERNEL. Metadata that cannot be read leaves the sizes unknown
 * (0 returned). */
static int amd_params(const char *code, size_t len, compiled_kernel_t *cks,
                      size_t n)
{
  amd_comgr_metadata_node_t root, kernels, k;
  amd_comgr_data_t data;
  char sym[MAX_NAME_LEN + 8];
  size_t count = 0;
  int rc = 0, read_all = 1;

  if (!R.have_comgr || R.create_data(AMD_COMGR_DATA_KIND_EXECUTABLE, &data) !=
                           AMD_COMGR_STATUS_SUCCESS)
    return 0;
  if (R.set_data(data, len, code) != AMD_COMGR_STATUS_SUCCESS ||
      R.get_data_metadata(data, &root) != AMD_COMGR_STATUS_SUCCESS) {
    (void)R.release_data(data);
    return 0;
  }
  if (R.metadata_lookup(root, "amdhsa.kernels", &kernels) ==
      AMD_COMGR_STATUS_SUCCESS) {
    if (R.get_metadata_list_size(kernels, &count) != AMD_COMGR_STATUS_SUCCESS)
      count = 0, read_all = 0;
    for (size_t i = 0; i < count; i++) {
      size_t symlen;

      if (R.index_list_metadata(kernels, i, &k) != AMD_COMGR_STATUS_SUCCESS) {
        read_all = 0;
        continue;
      }
      /* .symbol is the kernel descriptor, "<lowered name>.kd". */
      if (meta_string(k, ".symbol", sym, sizeof(sym)) &&
          (symlen = strlen(sym)) > 3 && strcmp(sym + symlen - 3, ".kd") == 0) {
        sym[symlen - 3] = '\0';
        for (size_t j = 0; j < n; j++)
          if (cks[j].nparams == PARAMS_UNKNOWN &&
              strcmp(cks[j].lowered, sym) == 0 &&
              amd_kernel_params(k, &cks[j]) != 0)
            read_all = 0;
      } else {
        read_all = 0;
      }
      (void)R.destroy_metadata(k);
    }
    (void)R.destroy_metadata(kernels);
  } else {
    read_all = 0;
  }
  (void)R.destroy_metadata(root);
  (void)R.release_data(data);
  for (size_t j = 0; read_all && j < n; j++)
    if (cks[j].nparams == PARAMS_UNKNOWN) {
      drv_set_error("'%s' names no __global__ function in the source "
                    "(lowered name %s)",
                    cks[j].name, cks[j].lowered);
      rc = HIPD_ENOKERNEL;
      break;
    }
  return rc;
}
#endif

/* Copy compiler log @p text into @p log (@p logsz bytes), truncating with
 * a marker if it does not fit. */
static void log_copy(char *log, size_t logsz, const char *text)
{
  static const char more[] = "\n[log truncated]";
  size_t n = strlen(text);

  if (log == NULL || logsz == 0)
    return;
  if (n < logsz) {
    memcpy(log, text, n + 1);
    return;
  }
  if (logsz > sizeof(more)) {
    memcpy(log, text, logsz - sizeof(more));
    memcpy(log + logsz - sizeof(more), more, sizeof(more));
  } else {
    memcpy(log, text, logsz - 1);
    log[logsz - 1] = '\0';
  }
}

/* The first line of @p log that mentions an error (or a fatal one), for
 * the error text. */
static void first_error_line(const char *log, char *out, size_t outsz)
{
  const char *p = strstr(log, "error");
  const char *start, *end;

  if (p == NULL)
    p = strstr(log, "fatal");
  out[0] = '\0';
  if (p == NULL)
    return;
  start = p;
  while (start > log && start[-1] != '\n')
    start--;
  end = strchr(p, '\n');
  if (end == NULL)
    end = p + strlen(p);
  snprintf(out, outsz, ": %.*s", (int)(end - start), start);
}

#ifdef __HIP_PLATFORM_AMD__
/* comgr compiles a copy of the source in a temporary directory, and the
 * log names it ("/tmp/comgr-1a2b3c/input/CompileSource:2:14: error: ...").
 * Put the program's name back, in place (it is shorter). */
static void log_tidy(char *text)
{
  static const char tail[] = "/input/CompileSource";
  static const char name[] = "kernel.hip";
  char *p = text, *hit, *start;

  while ((hit = strstr(p, tail)) != NULL) {
    start = hit;
    while (start > text && start[-1] != ' ' && start[-1] != '\n' &&
           start[-1] != '\'' && start[-1] != '"')
      start--;
    if (start[0] != '/') {
      p = hit + sizeof(tail) - 1;
      continue;
    }
    memcpy(start, name, sizeof(name) - 1);
    memmove(start + sizeof(name) - 1, hit + sizeof(tail) - 1,
            strlen(hit + sizeof(tail) - 1) + 1);
    p = start + sizeof(name) - 1;
  }
}
#endif

/* The program's log (malloc'd, "" if none), or NULL if out of memory. */
static char *program_log(hiprtcProgram prog)
{
  size_t size = 0;
  char *text;

  if (hiprtcGetProgramLogSize(prog, &size) != HIPRTC_SUCCESS)
    size = 0;
  text = malloc(size + 1);
  if (text == NULL)
    return NULL;
  text[0] = '\0';
  if (size > 0 && hiprtcGetProgramLog(prog, text) != HIPRTC_SUCCESS)
    text[0] = '\0';
  text[size] = '\0';
#ifdef __HIP_PLATFORM_AMD__
  log_tidy(text);
#endif
  return text;
}

/* The compiled code: a cubin on NVIDIA for a real sm_XY, else what
 * hiprtcGetCode gives (AMD code object, or PTX). */
static int program_code(hiprtcProgram prog, const char *arch, char **code,
                        size_t *len, int *kind)
{
  hiprtcResult r;
  size_t size = 0;

#ifdef __HIP_PLATFORM_NVIDIA__
  if (strncmp(arch, "sm_", 3) == 0) {
    nvrtcResult nr = nvrtcGetCUBINSize(prog, &size);

    if (nr != NVRTC_SUCCESS || size == 0) {
      drv_set_error("nvrtcGetCUBINSize: %s",
                    nr != NVRTC_SUCCESS ? nvrtcGetErrorString(nr)
                                        : "no cubin for a real architecture");
      return HIPD_EDEVICE;
    }
    if ((*code = malloc(size)) == NULL)
      goto nomem;
    nr = nvrtcGetCUBIN(prog, *code);
    if (nr != NVRTC_SUCCESS) {
      free(*code);
      drv_set_error("nvrtcGetCUBIN: %s", nvrtcGetErrorString(nr));
      return HIPD_EDEVICE;
    }
    *len = size;
    *kind = IMAGE_CODE_CUBIN;
    return 0;
  }
  *kind = IMAGE_CODE_PTX;
#else
  (void)arch;
  *kind = IMAGE_CODE_AMDGPU;
#endif
  r = hiprtcGetCodeSize(prog, &size);
  if (r != HIPRTC_SUCCESS || size == 0) {
    drv_set_error("hiprtcGetCodeSize: %s",
                  r != HIPRTC_SUCCESS ? hiprtcGetErrorString(r) : "no code");
    return HIPD_EDEVICE;
  }
  if ((*code = malloc(size + 1)) == NULL)
    goto nomem;
  r = hiprtcGetCode(prog, *code);
  if (r != HIPRTC_SUCCESS) {
    free(*code);
    drv_set_error("hiprtcGetCode: %s", hiprtcGetErrorString(r));
    return HIPD_EDEVICE;
  }
  if (*kind == IMAGE_CODE_PTX && (*code)[size - 1] != '\0')
    (*code)[size++] = '\0'; /* PTX is loaded as a C string */
  *len = size;
  return 0;
nomem:
  drv_set_error("compile: out of memory for %zu bytes of code", size);
  return HIPD_ENOMEM;
}

/* Lay out the image (see the format above) in *image. */
static int image_build(const char *arch, const compiled_kernel_t *cks, size_t n,
                       int kind, const char *code, size_t code_len,
                       void **image, size_t *image_len)
{
  unsigned char head[IMAGE_HEADER] = {0};
  buf_t table = {0}, out = {0};

  buf_str(&table, arch);
  for (size_t i = 0; i < n; i++) {
    buf_str(&table, cks[i].name);
    buf_str(&table, cks[i].lowered);
    buf_u32(&table, cks[i].nparams);
    for (uint32_t j = 0; cks[i].nparams != PARAMS_UNKNOWN && j < cks[i].nparams;
         j++)
      buf_u32(&table, cks[i].sizes[j]);
  }
  if (table.failed) {
    free(table.p);
    drv_set_error("compile: out of memory for the image");
    return HIPD_ENOMEM;
  }
  if (table.len > UINT32_MAX || code_len > UINT32_MAX) {
    free(table.p);
    drv_set_error("compile: the image is too large (%zu bytes of code)",
                  code_len);
    return HIPD_ELIMIT;
  }
  memcpy(head, IMAGE_MAGIC, 8);
  head[8] = IMAGE_PLATFORM;
  head[9] = (unsigned char)kind;
  buf_put(&out, head, 12);
  buf_u32(&out, (uint32_t)n);
  buf_u32(&out, (uint32_t)table.len);
  buf_u32(&out, (uint32_t)code_len);
  buf_put(&out, table.p, table.len);
  buf_put(&out, code, code_len);
  free(table.p);
  if (out.failed) {
    free(out.p);
    drv_set_error("compile: out of memory for the image");
    return HIPD_ENOMEM;
  }
  *image = out.p;
  *image_len = out.len;
  return 0;
}

/* Compile through hiprtc. The options passed are, in order: the target
 * (AMD --offload-arch=<arch>, NVIDIA --gpu-architecture=<arch>), the
 * user's options as option_translate() spells them (on NVIDIA, -g drops -O
 * and -lineinfo), and -std=c++17 unless the user gave a -std. On failure the
 * log is in @p log: a compile error is HIPD_ECOMPILE, an option the compiler
 * refused HIPD_EINVAL. On success @p log gets the compiler's warnings, if any.
 */
static int hip_compile(driver_t *drv, const char *arch, const char *src,
                       size_t len, const char *const *names, size_t nnames,
                       const char *const *opts, size_t nopts, void **image,
                       size_t *image_len, char *log, size_t logsz)
{
  const char *argv[MAX_OPTS + 2];
  compiled_kernel_t *cks = NULL;
  hiprtcProgram prog = NULL;
  char target[96], first[200];
  char *source = NULL, *text = NULL, *code = NULL;
  size_t code_len = 0;
  int argc = 0, has_std = 0, kind = 0, rc;
  hiprtcResult r;

  if (log != NULL && logsz > 0)
    log[0] = '\0';
  *image = NULL;
  *image_len = 0;
  if (!hip_arch_supported(drv, arch)) {
    drv_set_error("hiprtc (%s) does not compile for '%.64s'", HIPD_HIP_PLATFORM,
                  arch ? arch : "(null)");
    return HIPD_ENOTSUP;
  }
  if (src == NULL || len == 0 || memchr(src, '\0', len) != NULL) {
    drv_set_error(src == NULL || len == 0
                      ? "compile: empty source"
                      : "compile: the source contains a NUL byte");
    return HIPD_EINVAL;
  }
  if (nnames > MAX_NAMES || nopts > MAX_OPTS) {
    drv_set_error("compile: %zu kernel names and %zu options (at most %d and "
                  "%d)",
                  nnames, nopts, MAX_NAMES, MAX_OPTS);
    return HIPD_EINVAL;
  }
  for (size_t i = 0; i < nnames; i++) {
    size_t n = names[i] ? strlen(names[i]) : 0;

    if (n == 0 || n > MAX_NAME_LEN || !printable(names[i])) {
      drv_set_error("compile: kernel name %zu is empty, longer than %d bytes "
                    "or contains a control character",
                    i, MAX_NAME_LEN);
      return HIPD_EINVAL;
    }
  }
#ifdef __HIP_PLATFORM_AMD__
  snprintf(target, sizeof(target), "--offload-arch=%s", arch);
#else
  snprintf(target, sizeof(target), "--gpu-architecture=%s", arch);
#endif
  argv[argc++] = target;
  for (size_t i = 0; i < nopts; i++) {
    const char *o;

    if (opts[i] == NULL) {
      drv_set_error("compile: option %zu is missing", i);
      return HIPD_EINVAL;
    }
    rc = option_translate(opts[i], &o, &has_std);
    if (rc != 0)
      return rc;
    if (o != NULL)
      argv[argc++] = o;
  }
#ifdef __HIP_PLATFORM_NVIDIA__
  /* -g is --device-debug, which turns device optimisation off: ptxas
   * refuses an -O level with it and ignores --generate-line-info. */
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--device-debug") == 0) {
      int kept = 1;

      for (int j = 1; j < argc; j++)
        if (strncmp(argv[j], "--ptxas-options=-O", 18) != 0 &&
            strcmp(argv[j], "--generate-line-info") != 0)
          argv[kept++] = argv[j];
      argc = kept;
      break;
    }
#endif
  if (!has_std)
    argv[argc++] = "-std=c++17";

  rc = HIPD_ENOMEM;
  source = malloc(len + 1);
  cks = calloc(nnames ? nnames : 1, sizeof(*cks));
  if (source == NULL || cks == NULL) {
    drv_set_error("compile: out of memory for %zu bytes of source", len);
    goto out;
  }
  memcpy(source, src, len);
  source[len] = '\0';

  r = hiprtcCreateProgram(&prog, source, "kernel.hip", 0, NULL, NULL);
  if (r != HIPRTC_SUCCESS) {
    drv_set_error("hiprtcCreateProgram: %s", hiprtcGetErrorString(r));
    rc = r == HIPRTC_ERROR_OUT_OF_MEMORY ? HIPD_ENOMEM : HIPD_EDEVICE;
    prog = NULL;
    goto out;
  }
  for (size_t i = 0; i < nnames; i++) {
    cks[i].name = names[i];
    cks[i].nparams = PARAMS_UNKNOWN;
    r = hiprtcAddNameExpression(prog, names[i]);
    if (r != HIPRTC_SUCCESS) {
      drv_set_error("hiprtcAddNameExpression(%s): %s", names[i],
                    hiprtcGetErrorString(r));
      rc = HIPD_EINVAL;
      goto out;
    }
  }

  r = hiprtcCompileProgram(prog, argc, argv);
  text = program_log(prog);
  log_copy(log, logsz, text ? text : "");
#ifdef __HIP_PLATFORM_AMD__
  if (r != HIPRTC_SUCCESS && text != NULL && text[0] == '\0') {
    /* A compile error always has a diagnostic: this is the environment.
     * comgr compiles in a temporary directory (TMPDIR or /tmp). */
    const char *tmp = getenv("TMPDIR");

    drv_set_error("compilation for %s failed without a compiler log (%s); "
                  "is the temporary directory %s writable?",
                  arch, hiprtcGetErrorString(r), tmp && tmp[0] ? tmp : "/tmp");
    rc = HIPD_EIO;
    goto out;
  }
#endif
  if (r != HIPRTC_SUCCESS) {
    first_error_line(text ? text : "", first, sizeof(first));
    drv_set_error("compilation for %s failed%s", arch, first);
    rc = r == HIPRTC_ERROR_INVALID_OPTION ? HIPD_EINVAL : HIPD_ECOMPILE;
    goto out;
  }

  for (size_t i = 0; i < nnames; i++) {
    const char *lowered = NULL;

    r = hiprtcGetLoweredName(prog, names[i], &lowered);
    if (r != HIPRTC_SUCCESS || lowered == NULL) {
      drv_set_error("no kernel '%s' in the source (hiprtcGetLoweredName: %s)",
                    names[i], hiprtcGetErrorString(r));
      rc = HIPD_ENOKERNEL;
      goto out;
    }
    if ((cks[i].lowered = strdup(lowered)) == NULL) {
      drv_set_error("compile: out of memory");
      rc = HIPD_ENOMEM;
      goto out;
    }
  }

  rc = program_code(prog, arch, &code, &code_len, &kind);
  if (rc != 0)
    goto out;
#ifdef __HIP_PLATFORM_AMD__
  rc = amd_params(code, code_len, cks, nnames);
  if (rc != 0)
    goto out;
#endif
  rc = image_build(arch, cks, nnames, kind, code, code_len, image, image_len);

out:
  if (prog != NULL)
    (void)hiprtcDestroyProgram(&prog);
  for (size_t i = 0; cks != NULL && i < nnames; i++) {
    free(cks[i].lowered);
    free(cks[i].sizes);
  }
  free(cks);
  free(code);
  free(text);
  free(source);
  return rc;
}

/* A kernel of a loaded module; what kernel_get hands out as fn. */
typedef struct {
  const char *name;    /* as given to compile (in the module's table) */
  const char *lowered; /* its symbol */
  uint32_t nparams;    /* PARAMS_UNKNOWN when not known */
  uint32_t *sizes;     /* parameter sizes in bytes (DRV_MAX_ARGS at most) */
  hipFunction_t fn;    /* NULL until the first kernel_get */
} hip_kernel_t;

typedef struct {
  hipModule_t mod;
  int dev;
  char *table; /* copy of the image's kernel table */
  void *code;  /* copy of the code, alive while loaded */
  uint32_t nkernels;
  hip_kernel_t *kernels;
  uint32_t *sizes;      /* DRV_MAX_ARGS parameter sizes per kernel */
  pthread_mutex_t lock; /* kernel lookups */
} hip_module_t;

/* The parts of an image, checked. */
typedef struct {
  int kind;
  uint32_t nkernels;
  const unsigned char *table, *code;
  uint32_t table_len, code_len;
  const char *arch;
} image_view_t;

/* Walk one kernel record at *p (before @p end) into @p k (sizes not
 * copied: *sizes_at points at them). Returns 0 or -1 if malformed. */
static int record_next(const unsigned char **p, const unsigned char *end,
                       hip_kernel_t *k, const unsigned char **sizes_at)
{
  const unsigned char *q = *p, *nul;

  for (int s = 0; s < 2; s++) {
    nul = memchr(q, '\0', (size_t)(end - q));
    if (nul == NULL || nul == q)
      return -1;
    if (s == 0)
      k->name = (const char *)q;
    else
      k->lowered = (const char *)q;
    q = nul + 1;
  }
  if (end - q < 4)
    return -1;
  k->nparams = get_u32(q);
  q += 4;
  *sizes_at = q;
  if (k->nparams != PARAMS_UNKNOWN) {
    if (k->nparams > MAX_PARAMS || (size_t)(end - q) / 4 < k->nparams)
      return -1;
    q += 4 * (size_t)k->nparams;
  }
  *p = q;
  return 0;
}

/* Check image @p image of @p len bytes into @p v. HIPD_EINVAL (error text
 * set) if it is not an image of this platform. */
static int image_parse(const void *image, size_t len, image_view_t *v)
{
  const unsigned char *b = image, *p, *end, *nul, *sizes;
  hip_kernel_t k;
  int kind_ok;

  if (image == NULL || len < IMAGE_HEADER || memcmp(b, IMAGE_MAGIC, 8) != 0) {
    drv_set_error("module image: not a HIP driver image (bad magic or "
                  "%zu bytes)",
                  len);
    return HIPD_EINVAL;
  }
  if (b[8] != IMAGE_PLATFORM) {
    drv_set_error("module image: compiled for HIP on %s, this is %s",
                  b[8] == IMAGE_PLATFORM_AMD      ? "amd"
                  : b[8] == IMAGE_PLATFORM_NVIDIA ? "nvidia"
                                                  : "an unknown platform",
                  HIPD_HIP_PLATFORM);
    return HIPD_EINVAL;
  }
  v->kind = b[9];
  v->nkernels = get_u32(b + 12);
  v->table_len = get_u32(b + 16);
  v->code_len = get_u32(b + 20);
#ifdef __HIP_PLATFORM_AMD__
  kind_ok = v->kind == IMAGE_CODE_AMDGPU;
#else
  kind_ok = v->kind == IMAGE_CODE_CUBIN || v->kind == IMAGE_CODE_PTX;
#endif
  if (!kind_ok || v->nkernels > MAX_NAMES || v->code_len == 0 ||
      (uint64_t)IMAGE_HEADER + v->table_len + v->code_len != len) {
    drv_set_error("module image: bad header (kind %d, %u kernels, table %u "
                  "and code %u bytes in %zu)",
                  v->kind, v->nkernels, v->table_len, v->code_len, len);
    return HIPD_EINVAL;
  }
  v->table = b + IMAGE_HEADER;
  v->code = v->table + v->table_len;
  if (v->kind == IMAGE_CODE_PTX && v->code[v->code_len - 1] != '\0') {
    drv_set_error("module image: PTX is not NUL-terminated");
    return HIPD_EINVAL;
  }
  end = v->table + v->table_len;
  nul = memchr(v->table, '\0', v->table_len);
  if (nul == NULL) {
    drv_set_error("module image: truncated kernel table");
    return HIPD_EINVAL;
  }
  v->arch = (const char *)v->table;
  p = nul + 1;
  for (uint32_t i = 0; i < v->nkernels; i++)
    if (record_next(&p, end, &k, &sizes) != 0) {
      drv_set_error("module image: kernel record %u is malformed", i);
      return HIPD_EINVAL;
    }
  if (p != end) {
    drv_set_error("module image: %zu stray bytes after the kernel table",
                  (size_t)(end - p));
    return HIPD_EINVAL;
  }
  return 0;
}

/* Make @p dev current for a call that needs its context current (module
 * loads and lookups), even when hipGetDevice already says @p dev: on
 * NVIDIA a thread that never made a runtime call has no current context.
 * *prev is for leave_device(). */
static int use_device(int dev, int *prev)
{
  hipError_t err;

  err = hipGetDevice(prev);
  if (err != hipSuccess)
    return report_error("hipGetDevice", err);
  err = hipSetDevice(dev);
  if (err != hipSuccess)
    return report_error("hipSetDevice", err);
  return 0;
}

static void module_free(hip_module_t *m)
{
  if (m == NULL)
    return;
  pthread_mutex_destroy(&m->lock);
  free(m->kernels);
  free(m->sizes);
  free(m->table);
  free(m->code);
  free(m);
}

/* Errors of loading code that mean "this image is not for this device"
 * rather than a device failure. */
static int bad_image(hipError_t err)
{
  return err == hipErrorInvalidImage || err == hipErrorNoBinaryForGpu ||
         err == hipErrorInvalidKernelFile ||
         err == hipErrorSharedObjectInitFailed;
}

static int hip_module_load(driver_t *drv, int dev, const void *image,
                           size_t len, void **module)
{
  const unsigned char *p, *end, *sizes;
  hip_module_t *m;
  image_view_t v;
  hipError_t err;
  int prev, rc;

  (void)drv;
  rc = image_parse(image, len, &v);
  if (rc != 0)
    return rc;
  m = calloc(1, sizeof(*m));
  if (m == NULL || pthread_mutex_init(&m->lock, NULL) != 0) {
    free(m);
    drv_set_error("module load: out of memory");
    return HIPD_ENOMEM;
  }
  m->dev = dev;
  m->nkernels = v.nkernels;
  m->table = malloc(v.table_len);
  /* A private, aligned copy: the runtime may read the code after the load
   * (the caller's image need not outlive this call) and ELF parsers expect
   * alignment. */
  m->code = malloc(v.code_len);
  m->kernels = calloc(v.nkernels ? v.nkernels : 1, sizeof(*m->kernels));
  m->sizes = calloc((size_t)v.nkernels * DRV_MAX_ARGS + 1, sizeof(uint32_t));
  if (m->table == NULL || m->code == NULL || m->kernels == NULL ||
      m->sizes == NULL) {
    module_free(m);
    drv_set_error("module load: out of memory");
    return HIPD_ENOMEM;
  }
  memcpy(m->table, v.table, v.table_len);
  memcpy(m->code, v.code, v.code_len);
  /* The table was checked: the walk cannot fail. */
  p = (const unsigned char *)m->table + strlen(m->table) + 1;
  end = (const unsigned char *)m->table + v.table_len;
  for (uint32_t i = 0; i < v.nkernels; i++) {
    hip_kernel_t *k = &m->kernels[i];

    (void)record_next(&p, end, k, &sizes);
    /* A kernel of more than DRV_MAX_ARGS parameters keeps its count (no
     * launch can match it) but not its sizes. */
    k->sizes = m->sizes + (size_t)i * DRV_MAX_ARGS;
    for (uint32_t j = 0;
         k->nparams != PARAMS_UNKNOWN && j < k->nparams && j < DRV_MAX_ARGS;
         j++)
      k->sizes[j] = get_u32(sizes + 4 * (size_t)j);
  }

  rc = use_device(dev, &prev);
  if (rc != 0) {
    module_free(m);
    return rc;
  }
  err = hipModuleLoadData(&m->mod, m->code);
  leave_device(dev, prev);
  if (err != hipSuccess) {
    char call[160];

    snprintf(call, sizeof(call),
             "hipModuleLoadData (%s code for %.64s) on device %d",
             v.kind == IMAGE_CODE_PTX     ? "PTX"
             : v.kind == IMAGE_CODE_CUBIN ? "cubin"
                                          : "AMD",
             v.arch, dev);
    rc = report_error(call, err);
    if (bad_image(err))
      rc = HIPD_EINVAL;
    module_free(m);
    return rc;
  }
  *module = m;
  return 0;
}

static int hip_module_unload(driver_t *drv, int dev, void *module)
{
  hip_module_t *m = module;
  hipError_t err;
  int prev, rc;

  (void)drv;
  if (m == NULL)
    return 0;
  rc = use_device(m->dev, &prev);
  if (rc == 0) {
    err = hipModuleUnload(m->mod);
    leave_device(m->dev, prev);
    if (err != hipSuccess)
      rc = report_error("hipModuleUnload", err);
  }
  (void)dev;
  module_free(m);
  return rc;
}

#if defined(__HIP_PLATFORM_NVIDIA__) && CUDA_VERSION >= 12040
/* cuFuncGetParamInfo (CUDA 12.4), looked up in the driver at run time so
 * that an older driver still runs the daemon (without the checks). */
typedef CUresult (*param_info_fn)(CUfunction, size_t, size_t *, size_t *);
static param_info_fn param_info;
static pthread_once_t param_info_once = PTHREAD_ONCE_INIT;

static void param_info_lookup(void)
{
  CUdriverProcAddressQueryResult status;
  void *fn = NULL;

  if (cuGetProcAddress("cuFuncGetParamInfo", &fn, 12040,
                       CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
      status == CU_GET_PROC_ADDRESS_SUCCESS)
    *(void **)&param_info = fn;
}

/* The parameter sizes of k->fn into k->sizes (left unknown if the driver
 * cannot tell). */
static void nvidia_params(hip_kernel_t *k)
{
  size_t off, size;
  uint32_t n = 0;
  CUresult res;

  pthread_once(&param_info_once, param_info_lookup);
  if (param_info == NULL)
    return;
  for (;;) {
    res = param_info((CUfunction)k->fn, n, &off, &size);
    if (res != CUDA_SUCCESS)
      break;
    if (n == MAX_PARAMS || size > UINT32_MAX - 1)
      return;
    /* Past DRV_MAX_ARGS only the count matters: no launch can match. */
    if (n < DRV_MAX_ARGS)
      k->sizes[n] = (uint32_t)size;
    n++;
  }
  /* An index past the last parameter is CUDA_ERROR_INVALID_VALUE. */
  if (res == CUDA_ERROR_INVALID_VALUE)
    k->nparams = n;
}
#endif

/* List the module's kernel names into @p out, for an error text. */
static void kernel_names(const hip_module_t *m, char *out, size_t outsz)
{
  size_t used = 0;

  out[0] = '\0';
  for (uint32_t i = 0; i < m->nkernels && used + 1 < outsz; i++) {
    int n = snprintf(out + used, outsz - used, "%s%s", i ? ", " : "",
                     m->kernels[i].name);

    if (n < 0)
      break;
    used += (size_t)n;
  }
  if (m->nkernels == 0)
    snprintf(out, outsz, "none");
}

/* @p name is a name given to compile ("axpy<float>") or, as a convenience,
 * the lowered name it stands for. The parameter types stay unknown
 * (sig->known = 0): code objects record sizes, not types. */
static int hip_kernel_get(driver_t *drv, void *module, const char *name,
                          void **fn, drv_sig_t *sig)
{
  hip_module_t *m = module;
  hip_kernel_t *k = NULL;
  hipFunction_t f = NULL;
  hipError_t err;
  int prev, rc = 0;

  (void)drv;
  for (uint32_t i = 0; i < m->nkernels && k == NULL; i++)
    if (strcmp(m->kernels[i].name, name) == 0)
      k = &m->kernels[i];
  for (uint32_t i = 0; i < m->nkernels && k == NULL; i++)
    if (strcmp(m->kernels[i].lowered, name) == 0)
      k = &m->kernels[i];
  if (k == NULL) {
    char list[300];

    kernel_names(m, list, sizeof(list));
    drv_set_error("no kernel '%.128s' in the module (it has: %s)", name, list);
    return HIPD_ENOKERNEL;
  }
  pthread_mutex_lock(&m->lock);
  if (k->fn == NULL) {
    rc = use_device(m->dev, &prev);
    if (rc == 0) {
      err = hipModuleGetFunction(&f, m->mod, k->lowered);
      if (err == hipSuccess) {
        k->fn = f;
#if defined(__HIP_PLATFORM_NVIDIA__) && CUDA_VERSION >= 12040
        nvidia_params(k);
#endif
      }
      leave_device(m->dev, prev);
      if (err != hipSuccess) {
        char call[MAX_NAME_LEN + 64];

        snprintf(call, sizeof(call), "hipModuleGetFunction(%s)", k->lowered);
        rc = report_error(call, err);
        if (err == hipErrorNotFound || err == hipErrorInvalidDeviceFunction)
          rc = HIPD_ENOKERNEL;
      }
    }
  }
  pthread_mutex_unlock(&m->lock);
  if (rc != 0)
    return rc;
  memset(sig, 0, sizeof(*sig));
  *fn = k;
  return 0;
}

/* The bytes a launch argument of kind @p kind provides, 0 if no kind. */
static uint32_t arg_width(uint8_t kind)
{
  switch (kind) {
  case KARG_I32:
  case KARG_F32:
    return 4;
  case KARG_PTR:
    return sizeof(void *);
  case KARG_I64:
  case KARG_F64:
    return 8;
  default:
    return 0;
  }
}

/* Each parameter is read from its argument's value: the union's members
 * all start at its address. Where the kernel's parameter sizes are known,
 * the count must match and each argument must be at least as wide as its
 * parameter (an int for a char or bool parameter is fine on this
 * little-endian ABI; an int for a pointer is not). */
static int hip_launch(driver_t *drv, void *stream, void *fn,
                      const uint32_t grid[3], const uint32_t block[3],
                      uint32_t shared, const drv_arg_t *args, uint32_t nargs)
{
  const hip_kernel_t *k = fn;
  void *params[DRV_MAX_ARGS];
  hipError_t err;
  int rc;

  (void)drv;
  if (nargs > DRV_MAX_ARGS) {
    drv_set_error("launch of %s: %u arguments (at most %d)", k->name, nargs,
                  DRV_MAX_ARGS);
    return HIPD_ESIGNATURE;
  }
  if (k->nparams != PARAMS_UNKNOWN && nargs != k->nparams) {
    drv_set_error("kernel %s takes %u arguments, %u given", k->name, k->nparams,
                  nargs);
    return HIPD_ESIGNATURE;
  }
  for (uint32_t i = 0; i < nargs; i++) {
    uint32_t width = arg_width(args[i].kind);

    if (width == 0) {
      drv_set_error("launch of %s: argument %u has unknown kind %d", k->name, i,
                    args[i].kind);
      return HIPD_EINVAL;
    }
    if (k->nparams != PARAMS_UNKNOWN && k->sizes[i] > width) {
      drv_set_error("kernel %s: parameter %u is %u bytes, the argument given "
                    "has %u",
                    k->name, i, k->sizes[i], width);
      return HIPD_ESIGNATURE;
    }
    params[i] = (void *)&args[i].v;
  }
  err = hipModuleLaunchKernel(k->fn, grid[0], grid[1], grid[2], block[0],
                              block[1], block[2], shared, (hipStream_t)stream,
                              nargs > 0 ? params : NULL, NULL);
  if (err == hipSuccess)
    return 0;
  rc = report_error("hipModuleLaunchKernel", err);
  switch (err) {
  case hipErrorInvalidConfiguration:
  case hipErrorLaunchOutOfResources:
    return HIPD_ELIMIT;
  case hipErrorInvalidValue:
    return HIPD_EINVAL;
  default:
    /* Lost contexts stay HIPD_EDEVLOST; the rest is a failed launch. */
    return rc == HIPD_EDEVICE ? HIPD_ELAUNCH : rc;
  }
}

/* ---------------------------------------------------- shared host memory */

/* Portable: page-locked for every device, not only the current one;
 * mapped: a device address exists for it (zero-copy buffers). */
static int hip_host_register(driver_t *drv, void *addr, size_t size)
{
  hipError_t err;

  (void)drv;
  err = hipHostRegister(addr, size,
                        hipHostRegisterPortable | hipHostRegisterMapped);
  if (err != hipSuccess) {
    char call[80];

    snprintf(call, sizeof(call), "hipHostRegister of %zu bytes", size);
    return report_error(call, err);
  }
  return 0;
}

static int hip_host_unregister(driver_t *drv, void *addr)
{
  hipError_t err;

  (void)drv;
  err = hipHostUnregister(addr);
  if (err != hipSuccess)
    return report_error("hipHostUnregister", err);
  return 0;
}

static int hip_host_map(driver_t *drv, int dev, void *addr, size_t size, int fd,
                        drv_mem_t *out)
{
  void *dptr = NULL;
  hipError_t err;
  int can = 0, prev, rc;

  (void)drv;
  (void)fd;
  err = hipDeviceGetAttribute(&can, hipDeviceAttributeCanMapHostMemory, dev);
  if (err != hipSuccess)
    return report_error("hipDeviceGetAttribute(CanMapHostMemory)", err);
  if (!can) {
    drv_set_error("device %d cannot map host memory", dev);
    return HIPD_ENOTSUP;
  }
  if ((rc = enter_device(dev, &prev)) != 0)
    return rc;
  err = hipHostGetDevicePointer(&dptr, addr, 0);
  leave_device(dev, prev);
  if (err != hipSuccess)
    return report_error("hipHostGetDevicePointer", err);
  out->ptr = dptr;
  out->size = size;
  out->fd = -1;
  return 0;
}

static int hip_host_unmap(driver_t *drv, int dev, drv_mem_t *mem)
{
  (void)drv;
  (void)dev;
  mem->ptr = NULL;
  return 0;
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
    .stream_sync = hip_stream_sync,
    .stream_notify = hip_stream_notify,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .event_elapsed = hip_event_elapsed,
    .compiler_id = hip_compiler_id,
    .arch_supported = hip_arch_supported,
    .compile = hip_compile,
    .module_load = hip_module_load,
    .module_unload = hip_module_unload,
    .kernel_get = hip_kernel_get,
    .launch = hip_launch,
    .device_reset = hip_device_reset,
};

driver_t *driver_hip(void)
{
  return &hip_driver;
}
