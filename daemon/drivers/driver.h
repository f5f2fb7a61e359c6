/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver.h: the interface every device driver implements.
 *
 * A driver is a table of functions (driver_t). Two exist: "hip" (the HIP
 * runtime, on AMD or on NVIDIA through HIP's nvidia platform) and "cpu" (the
 * host as a device). The layers above (devices.c, executors, methods) call
 * only this interface; a driver never calls back into sessions or methods.
 *
 * Threads: a driver is called from the daemon's worker threads, never from
 * the loop thread except where a function says it is non-blocking. Calls
 * on one driver stream come from one thread at a time, in order.
 *
 * Errors: functions return 0 or a negative HIPD_E* code; on failure they
 * describe the problem with drv_set_error() (thread-local), which the caller
 * reads with drv_last_error() right away (driver_error.h).
 */
#ifndef HIPD_DRIVER_H
#define HIPD_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "driver_error.h"
#include "driver_output.h"

/* The capabilities record of a device (the Backend API's, plus identity). */
typedef struct dev_caps {
  char name[256];
  char arch[64]; /* "sm_90", "gfx90a", "host-x86_64" */
  int max_threads_per_block;
  int max_block_dims[3];
  int max_grid_dims[3];
  uint64_t shared_mem_per_block;
  uint64_t total_global_mem;
  int cc_major, cc_minor; /* compute capability, or gfx version */
  int supports_fp64;
  int supports_atomics;
  int warp_size;
  int max_registers_per_block;
  int clock_rate_khz;
  int multiprocessor_count;
  int is_cpu;
  int pci_bus_id; /* -1 when not a PCI device */
} dev_caps_t;

/* Device memory as the driver hands it out. */
typedef struct drv_mem {
  void *ptr;   /* device address (host address on the CPU device) */
  size_t size; /* bytes */
  int fd; /* CPU device's zero-copy buffers: the memfd behind it, else -1 */
} drv_mem_t;

/* Kernel parameter types, as far as a driver knows a kernel's declaration
 * (the values match the CPU device ABI's HIPD_CPU_T_* codes). */
enum {
  DRV_T_PTR = 1,
  DRV_T_I8,
  DRV_T_U8,
  DRV_T_I16,
  DRV_T_U16,
  DRV_T_I32,
  DRV_T_U32,
  DRV_T_I64,
  DRV_T_U64,
  DRV_T_F32,
  DRV_T_F64,
  DRV_T_BOOL,
};

#define DRV_MAX_ARGS 256

/* A kernel's declared parameters. known = 0 when the driver cannot tell
 * (HIP code objects do not record them). */
typedef struct drv_sig {
  int known;
  uint32_t nargs;
  uint8_t types[DRV_MAX_ARGS]; /* DRV_T_* */
} drv_sig_t;

/* One launch argument, of the kind the client gave. */
typedef enum {
  KARG_PTR = 1,
  KARG_I32,
  KARG_I64,
  KARG_F32,
  KARG_F64
} karg_kind_t;

typedef struct drv_arg {
  uint8_t kind; /* karg_kind_t */
  union {
    void *ptr;
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
  } v;
} drv_arg_t;

/* Called when a stream reaches a point (see stream_notify). It runs on a
 * driver or worker thread and must only hand the news on (no driver
 * calls). @p status is 0 or a negative code. */
typedef void (*drv_notify_fn)(void *arg, int status);

typedef struct driver driver_t;
struct driver {
  const char *name;     /* "hip" or "cpu" */
  const char *platform; /* "amd", "nvidia", "host" */

  /* Start the driver and count its devices. Called once, on the main
   * thread, before the loop runs. A driver with no devices returns 0 with
   * *count = 0 (not an error). */
  int (*init)(driver_t *drv, int *count);
  void (*shutdown)(driver_t *drv);
  /* Capabilities of device @p dev (0-based within the driver). */
  int (*get_caps)(driver_t *drv, int dev, dev_caps_t *caps);
  /* Free and total memory of the device, in bytes. */
  int (*mem_info)(driver_t *drv, int dev, uint64_t *free_b, uint64_t *total);
  /* Bind the calling thread to @p dev (HIP: hipSetDevice). Every worker
   * thread calls it once before anything else. */
  int (*bind_thread)(driver_t *drv, int dev);

  int (*mem_alloc)(driver_t *drv, int dev, size_t size, drv_mem_t *out);
  int (*mem_free)(driver_t *drv, int dev, drv_mem_t *mem);

  /* Streams: an ordered queue of device work. */
  int (*stream_create)(driver_t *drv, int dev, void **stream);
  int (*stream_destroy)(driver_t *drv, int dev, void *stream);
  /* Enqueue work on @p stream (may complete before returning, as on the
   * CPU device). Host memory passed in must stay valid until the stream
   * reaches the operation. @p stream may be NULL: the device's null
   * stream, used by cross-device copies followed by stream_sync(NULL). */
  int (*copy_h2d)(driver_t *drv, void *stream, void *dst, const void *src,
                  size_t n);
  int (*copy_d2h)(driver_t *drv, void *stream, void *dst, const void *src,
                  size_t n);
  int (*copy_d2d)(driver_t *drv, void *stream, void *dst, const void *src,
                  size_t n);
  int (*memset)(driver_t *drv, void *stream, void *dst, int value, size_t n);
  /* Copy between two devices of this driver on @p stream (of either
   * device): peer to peer where the hardware allows, else staged by the
   * runtime. NULL when the driver has no such path. */
  int (*copy_peer)(driver_t *drv, void *stream, void *dst, int dst_dev,
                   const void *src, int src_dev, size_t n);
  /* 0 if all work enqueued on @p stream has completed, HIPD_ENOTREADY if
   * not. Does not block. */
  int (*stream_query)(driver_t *drv, void *stream);
  /* Enqueue on @p stream a write of @p value to @p word, a device address
   * of page-locked host memory (host_map), made once the work enqueued
   * before it has completed and behind a system-wide fence: a thread that
   * reads the value there sees that work done, and its writes to host
   * memory, without a driver call. Never made after a fault on the
   * stream. NULL: the driver has no such path (stream_query instead). */
  int (*stream_mark)(driver_t *drv, void *stream, void *word, uint32_t value);
  /* Block until all work enqueued on @p stream has completed. */
  int (*stream_sync)(driver_t *drv, void *stream);
  /* Arrange for fn(arg, status) once all work enqueued so far on @p stream
   * has completed. Does not block. */
  int (*stream_notify)(driver_t *drv, void *stream, drv_notify_fn fn,
                       void *arg);

  /* Events: a timing mark on a stream. */
  int (*event_create)(driver_t *drv, int dev, void **event);
  int (*event_destroy)(driver_t *drv, int dev, void *event);
  /* Enqueue the mark on @p stream. Records of one event, and
   * event_elapsed on it, may come from different threads: the caller
   * serialises them (objects.c, event_t.rec_lock). */
  int (*event_record)(driver_t *drv, void *event, void *stream);
  /* Milliseconds between two completed marks (non-blocking). */
  int (*event_elapsed)(driver_t *drv, void *start, void *stop, float *ms);

  /* ---- kernels ---- */
  /* The compiler and its version, for cache keys ("hiprtc 5.2.21153",
   * "g++ 12.2.0"). Non-blocking. */
  const char *(*compiler_id)(driver_t *drv);
  /* Does this driver compile for target architecture @p arch ("gfx90a",
   * "sm_90", "host-x86_64")? Non-blocking. */
  int (*arch_supported)(driver_t *drv, const char *arch);
  /* Compile HIP source for @p arch, no device needed (a pool thread; it
   * may take seconds). @p names are the kernels to make launchable; names
   * of kernels that are not extern "C" are resolved here (hiprtc name
   * expressions). On success *image is a malloc'd image in the driver's
   * own format, which module_load takes. On failure the compiler's log is
   * in @p log. */
  int (*compile)(driver_t *drv, const char *arch, const char *src, size_t len,
                 const char *const *names, size_t nnames,
                 const char *const *opts, size_t nopts, void **image,
                 size_t *image_len, char *log, size_t logsz);
  /* In a compile helper that may open the device driver
   * (--compile-gpu-driver), once, before its first compile: initialise
   * what the compiler uses of the driver and keep it for every compile
   * after. NULL: nothing to do. Blocking; opens no device context. */
  int (*compile_driver_open)(driver_t *drv);
  /* Load an image on device @p dev; @p module gets the driver's module. */
  int (*module_load)(driver_t *drv, int dev, const void *image, size_t len,
                     void **module);
  int (*module_unload)(driver_t *drv, int dev, void *module);
  /* Find kernel @p name (as given to compile) in @p module; *sig gets its
   * declared parameters where the driver knows them. */
  int (*kernel_get)(driver_t *drv, void *module, const char *name, void **fn,
                    drv_sig_t *sig);
  /* The same without the device (any thread, non-blocking): 0, or
   * HIPD_ENOENT when only kernel_get can tell (not looked up yet, or not
   * there). NULL: always kernel_get. */
  int (*kernel_find)(driver_t *drv, void *module, const char *name, void **fn,
                     drv_sig_t *sig);
  /* Enqueue a launch on @p stream. Limits were checked by the caller;
   * argument values follow their kinds (a KARG_PTR is a device address).
   * On the CPU device it runs to completion before returning. What the
   * kernel prints goes to @p out (driver_output.h; NULL: dropped), as
   * soon as the driver has it: on the CPU device before this returns. */
  int (*launch)(driver_t *drv, void *stream, void *fn, const uint32_t grid[3],
                const uint32_t block[3], uint32_t shared, const drv_arg_t *args,
                uint32_t nargs, drv_output_t *out);
  /* Whether kernel @p fn can print: its output then comes out at a
   * stream_sync, which a launch from the loop thread (objects/submit.c)
   * does not make. NULL: no kernel prints that way. */
  int (*kernel_prints)(driver_t *drv, void *fn);

  /* ---- host memory shared with clients (a sealed memfd the daemon mapped
   * at @p addr) ---- */
  /* Page-lock [addr, addr + size) for every device of this driver so that
   * copies between it and device memory run at full speed, mapped for
   * device access where the platform can. NULL for drivers that copy from
   * any host memory at full speed (the CPU device). Blocking. */
  int (*host_register)(driver_t *drv, void *addr, size_t size);
  int (*host_unregister)(driver_t *drv, void *addr);
  /* A device view of shared host memory for a zero-copy buffer on @p dev:
   * *out->ptr is the address kernels use. @p fd is the memfd behind it
   * (the CPU device maps it into its kernel runner). HIP requires
   * host_register first. HIPD_ENOTSUP where the device cannot address
   * host memory. host_unmap undoes it; neither frees the memory. */
  int (*host_map)(driver_t *drv, int dev, void *addr, size_t size, int fd,
                  drv_mem_t *out);
  int (*host_unmap)(driver_t *drv, int dev, drv_mem_t *mem);

  /* Reset device @p dev after its context was lost (a kernel fault on
   * NVIDIA poisons the whole context): every object made on it before is
   * gone. NULL for drivers whose devices cannot be lost. Blocking. */
  int (*device_reset)(driver_t *drv, int dev);

  void *priv; /* the driver's own state */
};

/* The drivers compiled in, NULL-terminated, HIP first. */
driver_t **drivers_compiled(void);

driver_t *driver_cpu(void);
#ifdef HAVE_HIP
driver_t *driver_hip(void);
/* How a thread waiting for a GPU waits (hipSetDeviceFlags): 0 the
 * runtime's default, 1 spin, 2 yield, 3 block. Before init. */
void hip_driver_set_wait(int mode);
#endif

#endif
