/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_amd.c: the HIP driver on AMD (the ROCm runtime,
 * libamdhip64; hiprtc on the code object manager, comgr): the platform
 * hooks of hip_internal.h. Built instead of hip_nvidia.c when configure
 * found HIP on AMD (Makefile.am, HIP_AMD).
 */
#include "config.h"

#include "hip_internal.h"

#include <amd_comgr.h> /* types only: the library is looked up at run time */
#include <hip/hip_version.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/driver.h"
#include "hipd.h"

/* ---------------------------------------------------------------- runtime */

/* hipGetErrorString names every error of the ROCm runtime. */
int hip_platform_error(const char *call, hipError_t err, int *rc)
{
  (void)call;
  (void)err;
  (void)rc;
  return 0;
}

/* Only the errors both platforms share. */
int hip_platform_no_device(hipError_t err)
{
  (void)err;
  return 0;
}

/* The ROCm runtime hands stream callbacks a hipError_t. */
int hip_platform_stream_status(hipError_t status)
{
  return hip_err_code(status);
}

/* hiprtc on AMD (comgr) does not use the device driver. */
int hip_platform_compiler_driver(void)
{
  return 0;
}

hipError_t hip_platform_write_value(hipStream_t stream, void *word,
                                    uint32_t value)
{
  return hipStreamWriteValue32(stream, word, (int32_t)value, 0);
}

/* Arch and "compute capability" of an AMD device, from its LLVM target
 * name gfx<major><minor><stepping> ("gfx90a:sramecc+:xnack-"): arch is the
 * name up to the first ':'; cc_major the decimal digits before the last
 * two characters; cc_minor those two characters read as one hex number, so
 * that the LLVM minor is the high nibble and the stepping the low one:
 * gfx90a -> 9, 0x0a (10); gfx942 -> 9, 0x42 (66); gfx1030 -> 10, 0x30 (48).
 * Every target then has its own pair, ordered as the targets are. A name
 * that does not parse leaves the runtime's major and minor. */
void hip_platform_arch(const hipDeviceProp_t *prop, dev_caps_t *c)
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

/* --------------------------------------------------------------- compiler */

/* The compiler's part of the runtime compiler state (hip_rtc_setup). */
static struct {
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
} comgr_api;

/* The soname HIP 5.x itself loads comgr by. */
#define COMGR_LIB "libamd_comgr.so.2"
/* dlsym hands out object pointers; POSIX guarantees that they convert to
 * function pointers. */
#define COMGR_SYM(field, sym) *(void **)&comgr_api.field = dlsym(lib, sym)

void hip_platform_rtc_setup(char *id, size_t idsz)
{
  void (*get_version)(size_t *, size_t *);
  size_t major = 0, minor = 0;
  void *lib;

  snprintf(id, idsz, "hiprtc %d.%d.%d hipd-hip-%d", HIP_VERSION_MAJOR,
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
  comgr_api.have_comgr =
      comgr_api.create_action_info && comgr_api.destroy_action_info &&
      comgr_api.set_isa_name && comgr_api.create_data && comgr_api.set_data &&
      comgr_api.release_data && comgr_api.get_data_metadata &&
      comgr_api.destroy_metadata && comgr_api.metadata_lookup &&
      comgr_api.get_metadata_list_size && comgr_api.index_list_metadata &&
      comgr_api.get_metadata_string;
  /* The compiler proper is comgr's LLVM: its version belongs in the id. */
  if (get_version != NULL) {
    get_version(&major, &minor);
    snprintf(id, idsz, "hiprtc %d.%d.%d comgr %zu.%zu hipd-hip-%d",
             HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH, major,
             minor, IMAGE_REVISION);
  }
  /* The library stays loaded: hiprtc uses it for the process's life. */
}

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
int hip_arch_supported(driver_t *drv, const char *arch)
{
  amd_comgr_action_info_t info;
  char isa[80];
  int ok;

  (void)drv;
  if (arch == NULL || !amd_arch_shape(arch))
    return 0;
  hip_rtc_setup();
  if (!comgr_api.have_comgr ||
      comgr_api.create_action_info(&info) != AMD_COMGR_STATUS_SUCCESS)
    return 0;
  snprintf(isa, sizeof(isa), "amdgcn-amd-amdhsa--%s", arch);
  ok = comgr_api.set_isa_name(info, isa) == AMD_COMGR_STATUS_SUCCESS;
  (void)comgr_api.destroy_action_info(info);
  return ok;
}

const char *hip_platform_opt_level(int level)
{
  static const char *const olevel[] = {"-O0", "-O1", "-O2", "-O3"};

  return olevel[level];
}

const char *hip_platform_option(const char *opt)
{
  if (strcmp(opt, "-g") == 0)
    return "-g";
  if (strcmp(opt, "-lineinfo") == 0 || strcmp(opt, "--generate-line-info") == 0)
    return "-gline-tables-only";
  if (strcmp(opt, "--use_fast_math") == 0 ||
      strcmp(opt, "-use_fast_math") == 0 || strcmp(opt, "-ffast-math") == 0)
    return "-ffast-math";
  if (strcmp(opt, "--fmad=true") == 0)
    return "-ffp-contract=fast";
  if (strcmp(opt, "--fmad=false") == 0)
    return "-ffp-contract=off";
  return NULL;
}

void hip_platform_target(char *out, size_t outsz, const char *arch)
{
  snprintf(out, outsz, "--offload-arch=%s", arch);
}

/* clang takes the options together as they are. */
int hip_platform_options(const char **argv, int argc)
{
  (void)argv;
  return argc;
}

int hip_platform_compile_failed(hiprtcResult r, const char *text,
                                const char *arch)
{
  if (text != NULL && text[0] == '\0') {
    /* A compile error always has a diagnostic: this is the environment.
     * comgr compiles in a temporary directory (TMPDIR or /tmp). */
    const char *tmp = getenv("TMPDIR");

    drv_set_error("compilation for %s failed without a compiler log (%s); "
                  "is the temporary directory %s writable?",
                  arch, hiprtcGetErrorString(r), tmp && tmp[0] ? tmp : "/tmp");
    return HIPD_EIO;
  }
  return 0;
}

/* comgr compiles a copy of the source in a temporary directory, and the
 * log names it ("/tmp/comgr-1a2b3c/input/CompileSource:2:14: error: ...").
 * Put the program's name back, in place (it is shorter). */
void hip_platform_log_tidy(char *text)
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

/* An AMD code object, what hiprtcGetCode gives. */
int hip_platform_code(hiprtcProgram prog, const char *arch, char **code,
                      size_t *len, int *kind)
{
  (void)arch;
  *kind = IMAGE_CODE_AMDGPU;
  return hip_rtc_code(prog, code, len, *kind);
}

/* A string-valued metadata entry @p key of map @p map into @p out.
 * Returns 1 if found and it fits. */
static int meta_string(amd_comgr_metadata_node_t map, const char *key,
                       char *out, size_t outsz)
{
  amd_comgr_metadata_node_t node;
  size_t size = 0;
  int ok = 0;

  if (comgr_api.metadata_lookup(map, key, &node) != AMD_COMGR_STATUS_SUCCESS)
    return 0;
  if (comgr_api.get_metadata_string(node, &size, NULL) ==
          AMD_COMGR_STATUS_SUCCESS &&
      size > 0 && size <= outsz &&
      comgr_api.get_metadata_string(node, &size, out) ==
          AMD_COMGR_STATUS_SUCCESS) {
    out[size - 1] = '\0';
    ok = 1;
  }
  (void)comgr_api.destroy_metadata(node);
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

  if (comgr_api.metadata_lookup(k, ".args", &args) !=
      AMD_COMGR_STATUS_SUCCESS) {
    /* No arguments at all: the entry is left out. */
    ck->nparams = 0;
    return 0;
  }
  if (comgr_api.get_metadata_list_size(args, &count) !=
          AMD_COMGR_STATUS_SUCCESS ||
      count > MAX_PARAMS)
    goto out;
  sizes = calloc(count ? count : 1, sizeof(*sizes));
  if (sizes == NULL)
    goto out;
  for (size_t i = 0; i < count; i++) {
    char *end;
    unsigned long v;
    int ok;

    if (comgr_api.index_list_metadata(args, i, &arg) !=
        AMD_COMGR_STATUS_SUCCESS)
      goto out;
    ok = meta_string(arg, ".value_kind", kind, sizeof(kind)) &&
         meta_string(arg, ".size", size, sizeof(size));
    (void)comgr_api.destroy_metadata(arg);
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
  (void)comgr_api.destroy_metadata(args);
  return rc;
}

/* Fill the kernels' parameter sizes from code object @p code. A kernel
 * that the metadata lists no entry for is not a __global__ function:
 * HIPD_ENOKERNEL. Metadata that cannot be read leaves the sizes unknown
 * (0 returned). */
int hip_platform_params(const char *code, size_t len, compiled_kernel_t *cks,
                        size_t n)
{
  amd_comgr_metadata_node_t root, kernels, k;
  amd_comgr_data_t data;
  char sym[MAX_NAME_LEN + 8];
  size_t count = 0;
  int rc = 0, read_all = 1;

  if (!comgr_api.have_comgr ||
      comgr_api.create_data(AMD_COMGR_DATA_KIND_EXECUTABLE, &data) !=
          AMD_COMGR_STATUS_SUCCESS)
    return 0;
  if (comgr_api.set_data(data, len, code) != AMD_COMGR_STATUS_SUCCESS ||
      comgr_api.get_data_metadata(data, &root) != AMD_COMGR_STATUS_SUCCESS) {
    (void)comgr_api.release_data(data);
    return 0;
  }
  if (comgr_api.metadata_lookup(root, "amdhsa.kernels", &kernels) ==
      AMD_COMGR_STATUS_SUCCESS) {
    if (comgr_api.get_metadata_list_size(kernels, &count) !=
        AMD_COMGR_STATUS_SUCCESS)
      count = 0, read_all = 0;
    for (size_t i = 0; i < count; i++) {
      size_t symlen;

      if (comgr_api.index_list_metadata(kernels, i, &k) !=
          AMD_COMGR_STATUS_SUCCESS) {
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
      (void)comgr_api.destroy_metadata(k);
    }
    (void)comgr_api.destroy_metadata(kernels);
  } else {
    read_all = 0;
  }
  (void)comgr_api.destroy_metadata(root);
  (void)comgr_api.release_data(data);
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

/* -------------------------------------------------------- images, modules */

const uint8_t hip_image_platform = IMAGE_PLATFORM_AMD;

int hip_platform_image_kind(int kind)
{
  return kind == IMAGE_CODE_AMDGPU;
}

/* The sizes were read at compile time (hip_platform_params). */
void hip_platform_kernel_params(hip_kernel_t *k)
{
  (void)k;
}
