/* SPDX-License-Identifier: MIT */
/* daemon/codegen/intrinsics.c: the built-in intrinsic table and the
 * per-session registries. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/intrinsics.h"
#include "hipd.h"

/* ------------------------------------------------------------- platforms */

static const char *const platform_names[CG_PLATFORM__N] = {"amd", "nvidia",
                                                           "host"};

const char *cg_platform_name(cg_platform_t p)
{
  return p < CG_PLATFORM__N ? platform_names[p] : "?";
}

int cg_platform_from_name(const char *name, cg_platform_t *out)
{
  for (int i = 0; i < CG_PLATFORM__N; i++)
    if (strcmp(name, platform_names[i]) == 0) {
      *out = (cg_platform_t)i;
      return 0;
    }
  return -1;
}

int cg_platform_from_arch(const char *arch, cg_platform_t *out)
{
  if (strncmp(arch, "gfx", 3) == 0 && arch[3] != '\0')
    *out = CG_PLATFORM_AMD;
  else if ((strncmp(arch, "sm_", 3) == 0 && arch[3] != '\0') ||
           (strncmp(arch, "compute_", 8) == 0 && arch[8] != '\0'))
    *out = CG_PLATFORM_NVIDIA;
  else if (strncmp(arch, "host-", 5) == 0 && arch[5] != '\0')
    *out = CG_PLATFORM_HOST;
  else
    return -1;
  return 0;
}

/* ----------------------------------------------------------- convergence */

static const char *const conv_names[INTR__N] = {"uniform", "divergent", "sync"};

const char *intr_conv_name(intr_conv_t c)
{
  return c < INTR__N ? conv_names[c] : "?";
}

int intr_conv_parse(const char *s, intr_conv_t *out)
{
  for (int i = 0; i < INTR__N; i++)
    if (strcmp(s, conv_names[i]) == 0) {
      *out = (intr_conv_t)i;
      return 0;
    }
  return -1;
}

/* -------------------------------------------------------------- built-ins */

/* The thread coordinates are unsigned in HIP; the IR types them int32
 * (Sarek's Gpu module), so they are converted: `thread_idx_x - 1` is -1
 * for thread 0, as in OCaml, not 4294967295. */
#define AXES(X, name, code, conv)                                              \
  X(name "_x", 0, conv, "((int)" code ".x)")                                   \
  X(name "_y", 0, conv, "((int)" code ".y)")                                   \
  X(name "_z", 0, conv, "((int)" code ".z)")
#define GLOBAL(X, name, a)                                                     \
  X(name, 0, INTR_DIVERGENT,                                                   \
    "((int)(threadIdx." a " + blockIdx." a " * blockDim." a "))")
#define MATH1(X, name) X(name, 1, INTR_UNIFORM, name "(%s)")
#define MATH2(X, name) X(name, 2, INTR_UNIFORM, name "(%s, %s)")
#define ATOMIC2(X, name, fn) X(name, 2, INTR_DIVERGENT, fn "(&%s, %s)")
#define ATOMIC3(X, name, fn) X(name, 3, INTR_DIVERGENT, fn "(&%s[%s], %s)")

/* Every form but the warp barrier's, which differs per platform. */
#define BUILTINS(X)                                                            \
  AXES(X, "thread_id", "threadIdx", INTR_DIVERGENT)                            \
  AXES(X, "thread_idx", "threadIdx", INTR_DIVERGENT)                           \
  AXES(X, "block_id", "blockIdx", INTR_UNIFORM)                                \
  AXES(X, "block_idx", "blockIdx", INTR_UNIFORM)                               \
  AXES(X, "block_dim", "blockDim", INTR_UNIFORM)                               \
  AXES(X, "grid_dim", "gridDim", INTR_UNIFORM)                                 \
  GLOBAL(X, "global_thread_id", "x")                                           \
  GLOBAL(X, "global_idx", "x")                                                 \
  GLOBAL(X, "global_idx_x", "x")                                               \
  GLOBAL(X, "global_idx_y", "y")                                               \
  GLOBAL(X, "global_idx_z", "z")                                               \
  X("global_size", 0, INTR_UNIFORM, "((int)(blockDim.x * gridDim.x))")         \
  X("block_barrier", 0, INTR_SYNC, "__syncthreads()")                          \
  X("memory_fence", 0, INTR_UNIFORM, "__threadfence()")                        \
  MATH1(X, "sin")                                                              \
  MATH1(X, "cos")                                                              \
  MATH1(X, "tan")                                                              \
  MATH1(X, "asin")                                                             \
  MATH1(X, "acos")                                                             \
  MATH1(X, "atan")                                                             \
  MATH1(X, "sinh")                                                             \
  MATH1(X, "cosh")                                                             \
  MATH1(X, "tanh")                                                             \
  MATH1(X, "exp")                                                              \
  MATH1(X, "exp2")                                                             \
  MATH1(X, "log")                                                              \
  MATH1(X, "log2")                                                             \
  MATH1(X, "log10")                                                            \
  MATH1(X, "sqrt")                                                             \
  MATH1(X, "rsqrt")                                                            \
  MATH1(X, "cbrt")                                                             \
  MATH1(X, "floor")                                                            \
  MATH1(X, "ceil")                                                             \
  MATH1(X, "round")                                                            \
  MATH1(X, "trunc")                                                            \
  MATH1(X, "fabs")                                                             \
  MATH2(X, "atan2")                                                            \
  MATH2(X, "pow")                                                              \
  MATH2(X, "min")                                                              \
  MATH2(X, "max")                                                              \
  X("fma", 3, INTR_UNIFORM, "fma(%s, %s, %s)")                                 \
  ATOMIC2(X, "atomic_add", "atomicAdd")                                        \
  ATOMIC3(X, "atomic_add", "atomicAdd")                                        \
  ATOMIC2(X, "atomic_add_int32", "atomicAdd")                                  \
  ATOMIC3(X, "atomic_add_int32", "atomicAdd")                                  \
  ATOMIC2(X, "atomic_add_global_int32", "atomicAdd")                           \
  ATOMIC3(X, "atomic_add_global_int32", "atomicAdd")                           \
  ATOMIC2(X, "atomic_sub", "atomicSub")                                        \
  ATOMIC2(X, "atomic_min", "atomicMin")                                        \
  ATOMIC2(X, "atomic_max", "atomicMax")

/* HIP on AMD has no __syncwarp on older ROCm (5.2 has none): a wavefront
 * barrier with wavefront-scope release and acquire fences is what newer
 * HIP defines it as. NVIDIA and the CPU device (one-lane warps) have
 * __syncwarp. */
#define WARP_AMD                                                               \
  "(__builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\"), "                 \
  "__builtin_amdgcn_wave_barrier(), "                                          \
  "__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\"))"

#define DEF(name, arity, conv, code) {name, code, arity, conv, 1},

static const intr_def_t builtins_amd[] = {
    BUILTINS(DEF){"warp_barrier", WARP_AMD, 0, INTR_SYNC, 1}};
static const intr_def_t builtins_nvidia[] = {
    BUILTINS(DEF){"warp_barrier", "__syncwarp()", 0, INTR_SYNC, 1}};
static const intr_def_t builtins_host[] = {
    BUILTINS(DEF){"warp_barrier", "__syncwarp()", 0, INTR_SYNC, 1}};

#define NBUILTINS (sizeof(builtins_amd) / sizeof(builtins_amd[0]))

size_t intr_builtins(cg_platform_t p, const intr_def_t **defs)
{
  *defs = p == CG_PLATFORM_NVIDIA ? builtins_nvidia
          : p == CG_PLATFORM_HOST ? builtins_host
                                  : builtins_amd;
  return NBUILTINS;
}

static int is_builtin(const char *name)
{
  for (size_t i = 0; i < NBUILTINS; i++)
    if (strcmp(builtins_amd[i].name, name) == 0)
      return 1;
  return 0;
}

/* ---------------------------------------------------------- registration */

/* The number of %s in a valid template, or -1. */
static int placeholders(const char *code)
{
  int n = 0;

  for (const char *p = code; *p != '\0'; p++) {
    if (*p != '%')
      continue;
    if (p[1] == 's')
      n++;
    else if (p[1] != '%')
      return -1;
    p++;
  }
  return n;
}

int intr_check_registration(const char *name, const char *code, int arity,
                            char *msg, size_t msgsz)
{
  size_t n = strlen(name), start = 0;
  const char *last = name;
  int depth_paren = 0, depth_bracket = 0, ph;

  if (n == 0 || n > 255) {
    snprintf(msg, msgsz, "an intrinsic name has 1 to 255 bytes");
    return HIPD_EPARAMS;
  }
  for (size_t i = 0; i <= n; i++) {
    if (i < n && name[i] != '.')
      continue;
    if (!cg_word_ok(name + start, i - start)) {
      snprintf(
          msg, msgsz,
          "'%.255s' is not an intrinsic name (words [A-Za-z_][A-Za-z0-9_]* "
          "joined by '.')",
          name);
      return HIPD_EPARAMS;
    }
    last = name + start;
    start = i + 1;
  }
  if (is_builtin(last)) {
    snprintf(msg, msgsz,
             "'%s' is a built-in intrinsic, which a registration cannot "
             "replace or shadow",
             last);
    return HIPD_EEXIST;
  }
  n = strlen(code);
  if (n == 0 || n > INTR_CODE_MAX) {
    snprintf(msg, msgsz, "the code has 1 to %d bytes", INTR_CODE_MAX);
    return HIPD_EPARAMS;
  }
  for (size_t i = 0; i < n; i++) {
    char c = code[i];
    if (c < 0x20 || c > 0x7e || strchr(";{}\\#\"'`", c) != NULL ||
        (c == '/' && (code[i + 1] == '*' || code[i + 1] == '/')) ||
        (c == '*' && code[i + 1] == '/')) {
      snprintf(msg, msgsz,
               "the code of an intrinsic is one C expression: printable "
               "ASCII without ; { } \\ # quotes or comments (byte %zu)",
               i);
      return HIPD_EPARAMS;
    }
    depth_paren += c == '(' ? 1 : c == ')' ? -1 : 0;
    depth_bracket += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth_paren < 0 || depth_bracket < 0)
      break;
  }
  if (depth_paren != 0 || depth_bracket != 0) {
    snprintf(msg, msgsz, "the code's parentheses or brackets do not balance");
    return HIPD_EPARAMS;
  }
  ph = placeholders(code);
  if (ph < 0) {
    snprintf(msg, msgsz,
             "in the code, %%s stands for an argument and %%%% "
             "for a %%; nothing else follows a %%");
    return HIPD_EPARAMS;
  }
  if (arity < -1 || arity > 64) {
    snprintf(msg, msgsz, "the arity is 0 to 64, or absent (any)");
    return HIPD_EPARAMS;
  }
  if (ph > 0 && arity >= 0 && arity != ph) {
    snprintf(msg, msgsz,
             "the code has %d placeholders, so the intrinsic takes %d "
             "arguments, not %d",
             ph, ph, arity);
    return HIPD_EPARAMS;
  }
  return 0;
}

/* ------------------------------------------------------------- registries */

struct intr_set {
  int refs;
  size_t n;
  intr_def_t *defs; /* sorted by name; strings owned */
};

static void def_free(intr_def_t *d)
{
  free((char *)d->name);
  free((char *)d->code);
}

int intr_set_add(const intr_set_t *base, const intr_def_t *def,
                 intr_set_t **out)
{
  size_t n = base ? base->n : 0, at = 0, j = 0;
  int replace = 0, ph;
  intr_set_t *s;

  *out = NULL;
  while (at < n && strcmp(base->defs[at].name, def->name) < 0)
    at++;
  replace = at < n && strcmp(base->defs[at].name, def->name) == 0;
  if (!replace && n >= INTR_SET_MAX)
    return HIPD_ETOOMANY;
  s = calloc(1, sizeof(*s));
  if (s == NULL)
    return HIPD_ENOMEM;
  s->refs = 1;
  s->n = replace ? n : n + 1;
  s->defs = calloc(s->n, sizeof(*s->defs));
  if (s->defs == NULL) {
    free(s);
    return HIPD_ENOMEM;
  }
  for (size_t i = 0; i < s->n; i++) {
    const intr_def_t *src;
    if (i == at)
      src = def;
    else
      src = &base->defs[j];
    if (i != at || replace)
      j++;
    s->defs[i] = *src;
    s->defs[i].name = strdup(src->name);
    s->defs[i].code = strdup(src->code);
    s->defs[i].builtin = 0;
    if (s->defs[i].name == NULL || s->defs[i].code == NULL) {
      s->n = i + 1;
      intr_set_unref(s);
      return HIPD_ENOMEM;
    }
  }
  ph = placeholders(def->code);
  if (ph > 0)
    s->defs[at].arity = ph;
  *out = s;
  return 0;
}

void intr_set_ref(intr_set_t *s)
{
  if (s != NULL)
    s->refs++;
}

void intr_set_unref(intr_set_t *s)
{
  if (s == NULL || --s->refs > 0)
    return;
  for (size_t i = 0; i < s->n; i++)
    def_free(&s->defs[i]);
  free(s->defs);
  free(s);
}

size_t intr_set_count(const intr_set_t *s)
{
  return s ? s->n : 0;
}

const intr_def_t *intr_set_at(const intr_set_t *s, size_t i)
{
  return s != NULL && i < s->n ? &s->defs[i] : NULL;
}

const intr_def_t *intr_set_find(const intr_set_t *s, const char *name)
{
  size_t lo = 0, hi = s ? s->n : 0;

  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(name, s->defs[mid].name);
    if (c == 0)
      return &s->defs[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

/* ------------------------------------------------------------- resolving */

int intr_resolve(const intr_set_t *s, cg_platform_t p, const char *full,
                 const char *name, uint32_t nargs, intr_def_t *out, char *msg,
                 size_t msgsz)
{
  const intr_def_t *b, *d;
  size_t n = intr_builtins(p, &b);
  char arities[64] = "";
  size_t used = 0;

  for (size_t i = 0; i < n; i++) {
    if (strcmp(b[i].name, name) != 0)
      continue;
    if (b[i].arity == (int)nargs) {
      *out = b[i];
      return 0;
    }
    used += (size_t)snprintf(arities + used, sizeof(arities) - used, "%s%d",
                             used ? " or " : "", b[i].arity);
  }
  if (used > 0) {
    snprintf(msg, msgsz, "intrinsic '%s' takes %s args, got %u", name, arities,
             nargs);
    return HIPD_EINTRINSIC;
  }
  d = intr_set_find(s, full);
  if (d == NULL)
    d = intr_set_find(s, name);
  if (d == NULL) {
    if (strcmp(full, name) != 0)
      snprintf(msg, msgsz,
               "unknown intrinsic '%s' (neither built in nor registered as "
               "'%s' or '%s')",
               full, full, name);
    else
      snprintf(msg, msgsz,
               "unknown intrinsic '%s' (neither built in nor registered)",
               name);
    return HIPD_EINTRINSIC;
  }
  if (d->arity >= 0 && d->arity != (int)nargs) {
    snprintf(msg, msgsz, "intrinsic '%s' takes %d args, got %u", d->name,
             d->arity, nargs);
    return HIPD_EINTRINSIC;
  }
  *out = *d;
  return 0;
}

void intr_expand(strbuf_t *b, const intr_def_t *def, const char *const *args,
                 uint32_t nargs)
{
  const char *c = def->code;
  uint32_t k = 0;

  if (!def->builtin)
    strbuf_addc(b, '(');
  if (placeholders(c) > 0) {
    for (; *c != '\0'; c++) {
      if (*c == '%' && c[1] == 's') {
        strbuf_add(b, k < nargs ? args[k] : "");
        k++;
        c++;
      } else if (*c == '%' && c[1] == '%') {
        strbuf_addc(b, '%');
        c++;
      } else {
        strbuf_addc(b, *c);
      }
    }
  } else {
    strbuf_add(b, c);
    if (nargs > 0) {
      strbuf_addc(b, '(');
      for (uint32_t i = 0; i < nargs; i++) {
        if (i > 0)
          strbuf_add(b, ", ");
        strbuf_add(b, args[i]);
      }
      strbuf_addc(b, ')');
    }
  }
  if (!def->builtin)
    strbuf_addc(b, ')');
}
