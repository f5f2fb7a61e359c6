/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_internal.h: what the HIP driver's files share.
 *
 * Private to daemon/drivers/hip*.c. The driver is split by concern:
 * hip_runtime.c (init, devices, memory, streams, events, peer access,
 * resets, and the driver table), hip_compile.c (hiprtc, options, the
 * image), hip_module.c (module load, kernel lookup, launch) and hip_shm.c
 * (shared host memory); and by platform: hip_amd.c or hip_nvidia.c, the
 * one Makefile.am builds (configure's HIP_AMD / HIP_NVIDIA), implements
 * the hooks declared at the end. The shared files hold no platform #if:
 * whatever differs between the platforms is a hook.
 */
#ifndef HIPD_HIP_INTERNAL_H
#define HIPD_HIP_INTERNAL_H

/* Nothing on AMD; on NVIDIA it must precede every HIP header. */
#include "hip_nvidia_compat.h"

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include <stddef.h>
#include <stdint.h>

#include "drivers/driver.h"

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

#define MAX_NAMES 1024    /* kernels per compile */
#define MAX_NAME_LEN 1024 /* bytes in a kernel name */
/* Options per compile: the client's 64, and compile_ir's --fmad=false. */
#define MAX_OPTS 65
#define MAX_PARAMS 65536 /* parameters of a kernel, in an image */

/* One kernel of a compile: names and parameter sizes. */
typedef struct {
  const char *name; /* as given */
  char *lowered;    /* malloc'd */
  uint32_t nparams; /* PARAMS_UNKNOWN if not known */
  uint32_t *sizes;  /* malloc'd, nparams entries */
} compiled_kernel_t;

/* A kernel of a loaded module; what kernel_get hands out as fn. */
typedef struct {
  const char *name;    /* as given to compile (in the module's table) */
  const char *lowered; /* its symbol */
  uint32_t nparams;    /* PARAMS_UNKNOWN when not known */
  uint32_t *sizes;     /* parameter sizes in bytes (DRV_MAX_ARGS at most) */
  hipFunction_t fn;    /* looked up at load; else NULL until kernel_get */
  int prints;          /* its module's code calls printf (hip_output.c) */
} hip_kernel_t;

/* ------------------------------------------------------ shared helpers */

/* Their contracts are at their definitions. */

/* hip_runtime.c */
int hip_err_code(hipError_t err);
int hip_report_error(const char *call, hipError_t err);
int hip_enter_device(int dev, int *prev);
void hip_leave_device(int dev, int prev);
void hip_thread_forget(void);

/* hip_compile.c */
void hip_rtc_setup(void);
const char *hip_compiler_id(driver_t *drv);
int hip_compile(driver_t *drv, const char *arch, const char *src, size_t len,
                const char *const *names, size_t nnames,
                const char *const *opts, size_t nopts, void **image,
                size_t *image_len, char *log, size_t logsz);
int hip_rtc_code(hiprtcProgram prog, char **code, size_t *len, int kind);
int hip_compile_driver_open(driver_t *drv);

/* hip_module.c */
int hip_module_load(driver_t *drv, int dev, const void *image, size_t len,
                    void **module);
int hip_module_unload(driver_t *drv, int dev, void *module);
int hip_kernel_get(driver_t *drv, void *module, const char *name, void **fn,
                   drv_sig_t *sig);
int hip_kernel_find(driver_t *drv, void *module, const char *name, void **fn,
                    drv_sig_t *sig);
int hip_kernel_prints(driver_t *drv, void *fn);
int hip_launch(driver_t *drv, void *stream, void *fn, const uint32_t grid[3],
               const uint32_t block[3], uint32_t shared, const drv_arg_t *args,
               uint32_t nargs, drv_output_t *out);

/* hip_output.c: kernels' printf to their sessions, not to stdout */
void hip_output_init(void);
/* After a launch (of a kernel that @p prints into @p out, or not). */
void hip_output_launched(int prints, drv_output_t *out);
/* After a synchronisation. */
void hip_output_synced(void);

/* hip_shm.c */
int hip_host_register(driver_t *drv, void *addr, size_t size);
int hip_host_unregister(driver_t *drv, void *addr);
int hip_host_map(driver_t *drv, int dev, void *addr, size_t size, int fd,
                 drv_mem_t *out);
int hip_host_unmap(driver_t *drv, int dev, drv_mem_t *mem);

/* ------------------------------------------------------ platform hooks
 *
 * Implemented by hip_amd.c (ROCm, hiprtc on comgr) or hip_nvidia.c (HIP's
 * mapping onto CUDA, hiprtc on NVRTC). */

/* Runtime (hip_runtime.c). */
/* Describe the failure of HIP call @p call where the platform knows better
 * than hipGetErrorString: returns 1 with the hipd code in *rc (error text
 * set), else 0 and nothing done. */
int hip_platform_error(const char *call, hipError_t err, int *rc);
/* Does @p err mean "no usable device" on this platform, beyond the errors
 * that mean it on both? */
int hip_platform_no_device(hipError_t err);
/* The hipd code of the status a stream callback is handed. Pure: called
 * on a runtime thread. */
int hip_platform_stream_status(hipError_t status);
/* Fill c->arch, c->cc_major and c->cc_minor from @p prop. */
void hip_platform_arch(const hipDeviceProp_t *prop, dev_caps_t *c);
/* hipStreamWriteValue32 (@p value below 2^31), with the fence before the
 * write. Outside nvcc, HIP 5.2's NVIDIA mapping declares it without
 * defining it, so there it is CUDA's own. */
hipError_t hip_platform_write_value(hipStream_t stream, void *word,
                                    uint32_t value);

/* Compiler (hip_compile.c). */
/* Set up the platform's compiler state and write compiler_id into @p id;
 * run once, by hip_rtc_setup(). */
void hip_platform_rtc_setup(char *id, size_t idsz);
/* The driver's arch_supported: does hiprtc compile for @p arch? */
int hip_arch_supported(driver_t *drv, const char *arch);
/* The spelling of user option -O<level> (0 to 3). */
const char *hip_platform_opt_level(int level);
/* The spelling of portable user option @p opt (-g, -lineinfo, fast math,
 * --fmad), NULL if it is none of those. */
const char *hip_platform_option(const char *opt);
/* The option that selects target @p arch, into @p out. */
void hip_platform_target(char *out, size_t outsz, const char *arch);
/* Adjust the @p argc options in @p argv (the target first) to what the
 * compiler accepts together; returns the new count. */
int hip_platform_options(const char **argv, int argc);
/* A failed compile (@p r) whose log is @p text (NULL if out of memory):
 * a code (error text set) when the platform can tell why better than the
 * log, else 0. */
int hip_platform_compile_failed(hiprtcResult r, const char *text,
                                const char *arch);
/* The driver's compile_driver_open: what the platform's compiler uses of
 * the device driver, initialised for the process's life (0, or a code
 * with the error text set). */
int hip_platform_compiler_driver(void);
/* Tidy compiler log @p text in place. */
void hip_platform_log_tidy(char *text);
/* The code of compiled program @p prog for @p arch (malloc'd) and its
 * IMAGE_CODE_* kind. Returns 0 or a code (error text set). */
int hip_platform_code(hiprtcProgram prog, const char *arch, char **code,
                      size_t *len, int *kind);
/* Fill the @p n kernels' parameter sizes from @p code where the platform
 * reads them at compile time. Returns 0 or a code (error text set). */
int hip_platform_params(const char *code, size_t len, compiled_kernel_t *cks,
                        size_t n);

/* Images and modules (hip_compile.c, hip_module.c). */
/* IMAGE_PLATFORM_AMD or IMAGE_PLATFORM_NVIDIA. */
extern const uint8_t hip_image_platform;
/* Does this platform load code of IMAGE_CODE_* kind @p kind? */
int hip_platform_image_kind(int kind);
/* Fill k->nparams and k->sizes from k->fn, just found, where the platform
 * reads them at lookup (else nothing). */
void hip_platform_kernel_params(hip_kernel_t *k);

#endif
