/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_module.c: the HIP driver's modules and launches:
 * loading an image that compile made (hip_compile.c; its format is in
 * hip_internal.h) onto a device, finding its kernels and launching them.
 */
#include "config.h"

#include "hip_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/driver.h"
#include "hipd.h"

static uint32_t get_u32(const unsigned char *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

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
  if (b[8] != hip_image_platform) {
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
  kind_ok = hip_platform_image_kind(v->kind);
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
 * *prev is for hip_leave_device(). */
static int use_device(int dev, int *prev)
{
  hipError_t err;

  err = hipGetDevice(prev);
  if (err != hipSuccess)
    return hip_report_error("hipGetDevice", err);
  err = hipSetDevice(dev);
  if (err != hipSuccess) {
    hip_thread_forget();
    return hip_report_error("hipSetDevice", err);
  }
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

int hip_module_load(driver_t *drv, int dev, const void *image, size_t len,
                    void **module)
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
    /* A code object whose kernels call printf names it (NVIDIA's vprintf,
     * AMD's __ockl_printf_begin): hip_output.c follows their launches. */
    k->prints = memmem(v.code, v.code_len, "printf", 6) != NULL;
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
  /* Every kernel is looked up now, while the device is current, so that
   * kernel_find answers without the device (kernels.c looks kernels up
   * on the loop thread then). One that is not found is left to
   * kernel_get, which says why. */
  for (uint32_t i = 0; err == hipSuccess && i < m->nkernels; i++) {
    hip_kernel_t *k = &m->kernels[i];
    hipFunction_t f = NULL;

    if (hipModuleGetFunction(&f, m->mod, k->lowered) == hipSuccess) {
      k->fn = f;
      hip_platform_kernel_params(k);
    }
  }
  hip_leave_device(dev, prev);
  if (err != hipSuccess) {
    char call[160];

    snprintf(call, sizeof(call),
             "hipModuleLoadData (%s code for %.64s) on device %d",
             v.kind == IMAGE_CODE_PTX     ? "PTX"
             : v.kind == IMAGE_CODE_CUBIN ? "cubin"
                                          : "AMD",
             v.arch, dev);
    rc = hip_report_error(call, err);
    if (bad_image(err))
      rc = HIPD_EINVAL;
    module_free(m);
    return rc;
  }
  *module = m;
  return 0;
}

int hip_module_unload(driver_t *drv, int dev, void *module)
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
    hip_leave_device(m->dev, prev);
    if (err != hipSuccess)
      rc = hip_report_error("hipModuleUnload", err);
  }
  (void)dev;
  module_free(m);
  return rc;
}

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

/* The kernel of @p m that @p name names (see hip_kernel_get), or NULL. */
static hip_kernel_t *kernel_named(hip_module_t *m, const char *name)
{
  for (uint32_t i = 0; i < m->nkernels; i++)
    if (strcmp(m->kernels[i].name, name) == 0)
      return &m->kernels[i];
  for (uint32_t i = 0; i < m->nkernels; i++)
    if (strcmp(m->kernels[i].lowered, name) == 0)
      return &m->kernels[i];
  return NULL;
}

/* Without the device: the kernels module_load looked up. */
int hip_kernel_find(driver_t *drv, void *module, const char *name, void **fn,
                    drv_sig_t *sig)
{
  hip_module_t *m = module;
  hip_kernel_t *k = kernel_named(m, name);
  int found;

  (void)drv;
  if (k == NULL)
    return HIPD_ENOENT; /* kernel_get says what there is */
  /* Never waits: kernel_get holds the lock across a device call. */
  if (pthread_mutex_trylock(&m->lock) != 0)
    return HIPD_ENOENT;
  found = k->fn != NULL;
  pthread_mutex_unlock(&m->lock);
  if (!found)
    return HIPD_ENOENT;
  memset(sig, 0, sizeof(*sig));
  *fn = k;
  return 0;
}

/* @p name is a name given to compile ("axpy<float>") or, as a convenience,
 * the lowered name it stands for. The parameter types stay unknown
 * (sig->known = 0): code objects record sizes, not types. */
int hip_kernel_get(driver_t *drv, void *module, const char *name, void **fn,
                   drv_sig_t *sig)
{
  hip_module_t *m = module;
  hip_kernel_t *k = kernel_named(m, name);
  hipFunction_t f = NULL;
  hipError_t err;
  int prev, rc = 0;

  (void)drv;
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
        hip_platform_kernel_params(k);
      }
      hip_leave_device(m->dev, prev);
      if (err != hipSuccess) {
        char call[MAX_NAME_LEN + 64];

        snprintf(call, sizeof(call), "hipModuleGetFunction(%s)", k->lowered);
        rc = hip_report_error(call, err);
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
int hip_kernel_prints(driver_t *drv, void *fn)
{
  (void)drv;
  return ((const hip_kernel_t *)fn)->prints;
}

int hip_launch(driver_t *drv, void *stream, void *fn, const uint32_t grid[3],
               const uint32_t block[3], uint32_t shared, const drv_arg_t *args,
               uint32_t nargs, drv_output_t *out)
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
  hip_output_launched(k->prints, out);
  if (err == hipSuccess)
    return 0;
  rc = hip_report_error("hipModuleLaunchKernel", err);
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
