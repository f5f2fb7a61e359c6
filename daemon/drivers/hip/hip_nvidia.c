/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_nvidia.c: the HIP driver on NVIDIA (HIP's
 * header-only mapping onto the CUDA runtime; hiprtc on NVRTC): the
 * platform hooks of hip_internal.h. Built instead of hip_amd.c when
 * configure found HIP on NVIDIA (Makefile.am, HIP_NVIDIA).
 */
#include "config.h"

#include "hip_internal.h"

#include <nvrtc.h> /* hiprtcProgram is an nvrtcProgram: for the cubin */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/driver.h"
#include "hipd.h"

/* ---------------------------------------------------------------- runtime */

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

int hip_platform_error(const char *call, hipError_t err, int *rc)
{
  /* hipErrorUnknown may hide a CUDA error the mapping does not translate;
   * the thread's last CUDA error still names it. Taken (and cleared), not
   * peeked: a stream thread serves many streams in turn (executor.h), and
   * an error of an earlier one must not explain a later one's. */
  if (err == hipErrorUnknown) {
    cudaError_t cerr = cudaGetLastError();

    if (cerr != cudaSuccess && hipCUDAErrorTohipError(cerr) == err) {
      drv_set_error("%s: %s", call, cudaGetErrorString(cerr));
      *rc = cuda_sticky(cerr) ? HIPD_EDEVLOST : HIPD_EDEVICE;
      return 1;
    }
  }
  return 0;
}

int hip_platform_no_device(hipError_t err)
{
  /* Only CUDA's link-time stub libcuda.so is found, no driver: the mapping
   * turns cudaErrorStubLibrary into hipErrorUnknown. */
  return err == hipErrorUnknown &&
         cudaPeekAtLastError() == cudaErrorStubLibrary;
}

int hip_platform_stream_status(hipError_t status)
{
  /* HIP's nvidia mapping passes our callback to cudaStreamAddCallback as
   * is, so the status CUDA hands it is a cudaError_t. */
  if (cuda_sticky((cudaError_t)status))
    return HIPD_EDEVLOST;
  status = hipCUDAErrorTohipError((cudaError_t)status);
  return hip_err_code(status);
}

/* CU_STREAM_WRITE_VALUE_DEFAULT: a system-wide fence before the write. */
hipError_t hip_platform_write_value(hipStream_t stream, void *word,
                                    uint32_t value)
{
  return hipCUResultTohipError(
      cuStreamWriteValue32((CUstream)stream, (CUdeviceptr)word, value,
                           CU_STREAM_WRITE_VALUE_DEFAULT));
}

void hip_platform_arch(const hipDeviceProp_t *prop, dev_caps_t *c)
{
  snprintf(c->arch, sizeof(c->arch), "sm_%d%d", prop->major, prop->minor);
  c->cc_major = prop->major;
  c->cc_minor = prop->minor;
}

/* --------------------------------------------------------------- compiler */

/* The compiler's part of the runtime compiler state (hip_rtc_setup). */
static struct {
  int archs[64]; /* the SM numbers NVRTC compiles for */
  int narchs;
} nvrtc_archs;

void hip_platform_rtc_setup(char *id, size_t idsz)
{
  int major = 0, minor = 0, rt = 0, n = 0;

  (void)nvrtcVersion(&major, &minor);
  (void)cudaRuntimeGetVersion(&rt);
  snprintf(id, idsz, "nvrtc %d.%d cudart %d.%d hipd-hip-%d", major, minor,
           rt / 1000, rt % 1000 / 10, IMAGE_REVISION);
  if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 &&
      n <= (int)(sizeof(nvrtc_archs.archs) / sizeof(nvrtc_archs.archs[0])) &&
      nvrtcGetSupportedArchs(nvrtc_archs.archs) == NVRTC_SUCCESS)
    nvrtc_archs.narchs = n;
}

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
int hip_arch_supported(driver_t *drv, const char *arch)
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
  hip_rtc_setup();
  for (int i = 0; i < nvrtc_archs.narchs; i++)
    if (nvrtc_archs.archs[i] == num)
      return 1;
  return 0;
}

const char *hip_platform_opt_level(int level)
{
  /* NVRTC optimises fully and has no -O: the level goes to ptxas. */
  static const char *const olevel[] = {
      "--ptxas-options=-O0", "--ptxas-options=-O1", "--ptxas-options=-O2",
      "--ptxas-options=-O3"};

  return olevel[level];
}

const char *hip_platform_option(const char *opt)
{
  if (strcmp(opt, "-g") == 0)
    return "--device-debug";
  if (strcmp(opt, "-lineinfo") == 0 || strcmp(opt, "--generate-line-info") == 0)
    return "--generate-line-info";
  if (strcmp(opt, "--use_fast_math") == 0 ||
      strcmp(opt, "-use_fast_math") == 0 || strcmp(opt, "-ffast-math") == 0)
    return "--use_fast_math";
  if (strcmp(opt, "--fmad=true") == 0 || strcmp(opt, "--fmad=false") == 0)
    return opt;
  return NULL;
}

void hip_platform_target(char *out, size_t outsz, const char *arch)
{
  snprintf(out, outsz, "--gpu-architecture=%s", arch);
}

#ifndef HIPD_CUDA_INCLUDE_DIR
#define HIPD_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

/* NVRTC has the device built-ins but not the toolkit's headers: CUDA
 * source (kernels/lang.c) includes cuda_fp16.h, which includes more of
 * them (nv/target: under cccl/ since CUDA 13). Two options more, at
 * most (hip_compile's argv has room). */
int hip_platform_options(const char **argv, int argc)
{
  argv[argc++] = "--include-path=" HIPD_CUDA_INCLUDE_DIR;
  argv[argc++] = "--include-path=" HIPD_CUDA_INCLUDE_DIR "/cccl";
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
  return argc;
}

/* NVRTC's log says why. */
int hip_platform_compile_failed(hiprtcResult r, const char *text,
                                const char *arch)
{
  (void)r;
  (void)text;
  (void)arch;
  return 0;
}

/* NVRTC reaches its compute cache through the CUDA driver, which it sets
 * up and tears down in every compile of a process that has not: cuInit
 * once keeps it up (about 3 ms of a cold compile on an H100,
 * bench/RESULTS.md). No context: no device memory, no GPU time. */
int hip_platform_compiler_driver(void)
{
  CUresult r = cuInit(0);
  const char *s = NULL;

  if (r == CUDA_SUCCESS)
    return 0;
  if (cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
    s = "unknown error";
  drv_set_error("cuInit: %s (%d)", s, (int)r);
  return HIPD_EDEVICE;
}

/* Nothing to tidy on NVIDIA. */
void hip_platform_log_tidy(char *text)
{
  (void)text;
}

/* A cubin for a real sm_XY, else PTX. */
int hip_platform_code(hiprtcProgram prog, const char *arch, char **code,
                      size_t *len, int *kind)
{
  size_t size = 0;

  if (strncmp(arch, "sm_", 3) == 0) {
    nvrtcResult nr = nvrtcGetCUBINSize(prog, &size);

    if (nr != NVRTC_SUCCESS || size == 0) {
      drv_set_error("nvrtcGetCUBINSize: %s",
                    nr != NVRTC_SUCCESS ? nvrtcGetErrorString(nr)
                                        : "no cubin for a real architecture");
      return HIPD_EDEVICE;
    }
    if ((*code = malloc(size)) == NULL) {
      drv_set_error("compile: out of memory for %zu bytes of code", size);
      return HIPD_ENOMEM;
    }
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
  return hip_rtc_code(prog, code, len, *kind);
}

/* Parameter sizes come from the driver at lookup
 * (hip_platform_kernel_params). */
int hip_platform_params(const char *code, size_t len, compiled_kernel_t *cks,
                        size_t n)
{
  (void)code;
  (void)len;
  (void)cks;
  (void)n;
  return 0;
}

/* -------------------------------------------------------- images, modules */

const uint8_t hip_image_platform = IMAGE_PLATFORM_NVIDIA;

int hip_platform_image_kind(int kind)
{
  return kind == IMAGE_CODE_CUBIN || kind == IMAGE_CODE_PTX;
}

#if CUDA_VERSION >= 12040
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
void hip_platform_kernel_params(hip_kernel_t *k)
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
#else
void hip_platform_kernel_params(hip_kernel_t *k)
{
  (void)k;
}
#endif
