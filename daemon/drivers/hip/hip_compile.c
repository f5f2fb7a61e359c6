/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_compile.c: the HIP driver's compiler: hiprtc, the
 * options users may give and how each platform spells them, target
 * architectures, and the image that compile makes (its format is in
 * hip_internal.h). The platform's part (comgr on AMD, NVRTC on NVIDIA) is
 * in hip_amd.c or hip_nvidia.c.
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
#include "util/strbuf.h"

/* The runtime compiler, set up once (hip_rtc_setup); the platform keeps
 * its own part. */
static struct {
  pthread_once_t once;
  char id[128]; /* compiler_id */
} rtc = {.once = PTHREAD_ONCE_INIT};

static void rtc_setup_once(void)
{
  hip_platform_rtc_setup(rtc.id, sizeof(rtc.id));
}

/* Everything the kernel functions share, set up on first use. On AMD it
 * loads comgr and with it LLVM (a noticeable pause), which is why hip_init
 * calls it before the loop runs. */
void hip_rtc_setup(void)
{
  pthread_once(&rtc.once, rtc_setup_once);
}

const char *hip_compiler_id(driver_t *drv)
{
  (void)drv;
  hip_rtc_setup();
  return rtc.id;
}

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
    *out = hip_platform_opt_level(opt[2] - '0');
    return 0;
  }
  if (strcmp(opt, "-std=c++11") == 0 || strcmp(opt, "-std=c++14") == 0 ||
      strcmp(opt, "-std=c++17") == 0 || strcmp(opt, "-std=c++20") == 0) {
    *out = opt;
    *std = 1;
    return 0;
  }
  *out = hip_platform_option(opt);
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

/* The image is built in strbuf_t's (bytes; the NUL it keeps after them
 * is not part of the image). */
static void buf_put(strbuf_t *b, const void *data, size_t n)
{
  strbuf_addn(b, (const char *)data, n);
}

static void buf_u32(strbuf_t *b, uint32_t v)
{
  unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                         (unsigned char)(v >> 16), (unsigned char)(v >> 24)};

  buf_put(b, le, 4);
}

static void buf_str(strbuf_t *b, const char *s)
{
  buf_put(b, s, strlen(s) + 1);
}
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
  hip_platform_log_tidy(text);
  return text;
}

/* What hiprtcGetCode gives for @p prog (malloc'd), of IMAGE_CODE_* kind
 * @p kind: an AMD code object, or PTX. For hip_platform_code(). */
int hip_rtc_code(hiprtcProgram prog, char **code, size_t *len, int kind)
{
  hiprtcResult r;
  size_t size = 0;

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
  if (kind == IMAGE_CODE_PTX && (*code)[size - 1] != '\0')
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
  strbuf_t table = {0}, out = {0};

  buf_str(&table, arch);
  for (size_t i = 0; i < n; i++) {
    buf_str(&table, cks[i].name);
    buf_str(&table, cks[i].lowered);
    buf_u32(&table, cks[i].nparams);
    for (uint32_t j = 0; cks[i].nparams != PARAMS_UNKNOWN && j < cks[i].nparams;
         j++)
      buf_u32(&table, cks[i].sizes[j]);
  }
  if (strbuf_failed(&table)) {
    strbuf_free(&table);
    drv_set_error("compile: out of memory for the image");
    return HIPD_ENOMEM;
  }
  if (table.len > UINT32_MAX || code_len > UINT32_MAX) {
    strbuf_free(&table);
    drv_set_error("compile: the image is too large (%zu bytes of code)",
                  code_len);
    return HIPD_ELIMIT;
  }
  memcpy(head, IMAGE_MAGIC, 8);
  head[8] = hip_image_platform;
  head[9] = (unsigned char)kind;
  buf_put(&out, head, 12);
  buf_u32(&out, (uint32_t)n);
  buf_u32(&out, (uint32_t)table.len);
  buf_u32(&out, (uint32_t)code_len);
  buf_put(&out, table.p, table.len);
  buf_put(&out, code, code_len);
  strbuf_free(&table);
  if (strbuf_failed(&out)) {
    strbuf_free(&out);
    drv_set_error("compile: out of memory for the image");
    return HIPD_ENOMEM;
  }
  *image = out.p;
  *image_len = out.len;
  return 0;
}

int hip_compile_driver_open(driver_t *drv)
{
  (void)drv;
  return hip_platform_compiler_driver();
}

/* Compile through hiprtc. The options passed are, in order: the target
 * (AMD --offload-arch=<arch>, NVIDIA --gpu-architecture=<arch>), the
 * user's options as option_translate() spells them (on NVIDIA, -g drops -O
 * and -lineinfo), and -std=c++17 unless the user gave a -std. On failure the
 * log is in @p log: a compile error is HIPD_ECOMPILE, an option the compiler
 * refused HIPD_EINVAL. On success @p log gets the compiler's warnings, if any.
 */
int hip_compile(driver_t *drv, const char *arch, const char *src, size_t len,
                const char *const *names, size_t nnames,
                const char *const *opts, size_t nopts, void **image,
                size_t *image_len, char *log, size_t logsz)
{
  /* the target, the options, the platform's own (hip_platform_options:
   * at most two more), -std */
  const char *argv[MAX_OPTS + 4];
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
  hip_platform_target(target, sizeof(target), arch);
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
  argc = hip_platform_options(argv, argc);
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
  if (r != HIPRTC_SUCCESS &&
      (rc = hip_platform_compile_failed(r, text, arch)) != 0)
    goto out;
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

  rc = hip_platform_code(prog, arch, &code, &code_len, &kind);
  if (rc != 0)
    goto out;
  rc = hip_platform_params(code, code_len, cks, nnames);
  if (rc != 0)
    goto out;
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
