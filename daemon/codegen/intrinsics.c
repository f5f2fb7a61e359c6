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

/*
 * Sarek's standard library (sarek/Sarek_stdlib's Float32, Int32, Int64,
 * Math and Gpu, sarek/Sarek_float64's Float64, and the path-qualified
 * table of Sarek's CUDA generator), with the spellings Sarek's CUDA
 * backend gives them. Path-qualified: a Float32 function is its float
 * form ("sinf"), a Float64 one the double form; the arguments of every
 * operator template are parenthesized.
 */
#define F32_1(S, name, fn) S("Float32." name, 1, INTR_UNIFORM, fn "(%s)", NULL)
#define F32_2(S, name, fn)                                                     \
  S("Float32." name, 2, INTR_UNIFORM, fn "(%s, %s)", NULL)
#define F64_1(S, name, fn) S("Float64." name, 1, INTR_UNIFORM, fn "(%s)", NULL)
#define F64_2(S, name, fn)                                                     \
  S("Float64." name, 2, INTR_UNIFORM, fn "(%s, %s)", NULL)
#define OP2(S, name, op) S(name, 2, INTR_UNIFORM, "((%s) " op " (%s))", NULL)
#define CONV(S, name, type) S(name, 1, INTR_UNIFORM, "((" type ")(%s))", NULL)
/* The math functions Float32 and Float64 both have, named alike. */
#define FLOAT_MATH(S, F1, F2, f)                                               \
  F1(S, "sin", "sin" f)                                                        \
  F1(S, "cos", "cos" f)                                                        \
  F1(S, "tan", "tan" f)                                                        \
  F1(S, "asin", "asin" f)                                                      \
  F1(S, "acos", "acos" f)                                                      \
  F1(S, "atan", "atan" f)                                                      \
  F1(S, "sinh", "sinh" f)                                                      \
  F1(S, "cosh", "cosh" f)                                                      \
  F1(S, "tanh", "tanh" f)                                                      \
  F1(S, "exp", "exp" f)                                                        \
  F1(S, "exp2", "exp2" f)                                                      \
  F1(S, "expm1", "expm1" f)                                                    \
  F1(S, "log", "log" f)                                                        \
  F1(S, "log2", "log2" f)                                                      \
  F1(S, "log10", "log10" f)                                                    \
  F1(S, "log1p", "log1p" f)                                                    \
  F1(S, "sqrt", "sqrt" f)                                                      \
  F1(S, "rsqrt", "rsqrt" f)                                                    \
  F1(S, "cbrt", "cbrt" f)                                                      \
  F1(S, "floor", "floor" f)                                                    \
  F1(S, "ceil", "ceil" f)                                                      \
  F1(S, "round", "round" f)                                                    \
  F1(S, "trunc", "trunc" f)                                                    \
  F1(S, "fabs", "fabs" f)                                                      \
  F1(S, "abs_float", "fabs" f)                                                 \
  F2(S, "pow", "pow" f)                                                        \
  F2(S, "atan2", "atan2" f)                                                    \
  F2(S, "hypot", "hypot" f)                                                    \
  F2(S, "copysign", "copysign" f)                                              \
  F2(S, "fmod", "fmod" f)                                                      \
  F2(S, "min", "fmin" f)                                                       \
  F2(S, "max", "fmax" f)

/* Int32 and Int64: @p m the module, @p t the C type, @p u its unsigned
 * type. */
#define INT_OPS(S, m, sfx, t, u)                                               \
  OP2(S, m ".add_" sfx, "+")                                                   \
  OP2(S, m ".sub_" sfx, "-")                                                   \
  OP2(S, m ".mul_" sfx, "*")                                                   \
  OP2(S, m ".div_" sfx, "/")                                                   \
  OP2(S, m ".mod_" sfx, "%%")                                                  \
  OP2(S, m ".logand", "&")                                                     \
  OP2(S, m ".logor", "|")                                                      \
  OP2(S, m ".logxor", "^")                                                     \
  S(m ".lognot", 1, INTR_UNIFORM, "(~(%s))", NULL)                             \
  OP2(S, m ".shift_left", "<<")                                                \
  OP2(S, m ".shift_right", ">>")                                               \
  S(m ".shift_right_logical", 2, INTR_UNIFORM,                                 \
    "((" t ")((" u ")(%s) >> (%s)))", NULL)                                    \
  S(m ".neg", 1, INTR_UNIFORM, "(-(%s))", NULL)

#define HELPER_MIN_I64                                                         \
  "__device__ long long hipd_min_i64(long long a, long long b) {\n"            \
  "  return a < b ? a : b;\n}\n"
#define HELPER_MAX_I64                                                         \
  "__device__ long long hipd_max_i64(long long a, long long b) {\n"            \
  "  return a > b ? a : b;\n}\n"
/* a ** b by squaring, wrapping as OCaml's int32 does; b < 0 gives what
 * (int)pow(a, b) gives (SPOC's definition): 1 / a ** -b truncated. */
#define HELPER_POWINT                                                          \
  "__device__ int hipd_spoc_powint(int a, int b) {\n"                          \
  "  unsigned int r = 1u, x = (unsigned int)a;\n"                              \
  "  if (b < 0)\n"                                                             \
  "    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;\n"                \
  "  for (; b > 0; b >>= 1) {\n"                                               \
  "    if (b & 1)\n"                                                           \
  "      r *= x;\n"                                                            \
  "    x *= x;\n"                                                              \
  "  }\n"                                                                      \
  "  return (int)r;\n}\n"

#define STD_QUALIFIED(S)                                                       \
  FLOAT_MATH(S, F32_1, F32_2, "f")                                             \
  S("Float32.fma", 3, INTR_UNIFORM, "fmaf(%s, %s, %s)", NULL)                  \
  CONV(S, "Float32.of_int", "float")                                           \
  CONV(S, "Float32.to_int", "int")                                             \
  OP2(S, "Float32.add_float32", "+")                                           \
  OP2(S, "Float32.sub_float32", "-")                                           \
  OP2(S, "Float32.mul_float32", "*")                                           \
  OP2(S, "Float32.div_float32", "/")                                           \
  OP2(S, "Float32.add", "+")                                                   \
  OP2(S, "Float32.minus", "-")                                                 \
  OP2(S, "Float32.mul", "*")                                                   \
  OP2(S, "Float32.div", "/")                                                   \
  FLOAT_MATH(S, F64_1, F64_2, "")                                              \
  S("Float64.fma", 3, INTR_UNIFORM, "fma(%s, %s, %s)", NULL)                   \
  CONV(S, "Float64.of_int", "double")                                          \
  CONV(S, "Float64.of_int32", "double")                                        \
  CONV(S, "Float64.to_int", "int")                                             \
  CONV(S, "Float64.to_int32", "int")                                           \
  CONV(S, "Float64.of_float32", "double")                                      \
  CONV(S, "Float64.to_float32", "float")                                       \
  OP2(S, "Float64.add_float64", "+")                                           \
  OP2(S, "Float64.sub_float64", "-")                                           \
  OP2(S, "Float64.mul_float64", "*")                                           \
  OP2(S, "Float64.div_float64", "/")                                           \
  INT_OPS(S, "Int32", "int32", "int", "unsigned int")                          \
  S("Int32.abs", 1, INTR_UNIFORM, "abs(%s)", NULL)                             \
  S("Int32.min", 2, INTR_UNIFORM, "min(%s, %s)", NULL)                         \
  S("Int32.max", 2, INTR_UNIFORM, "max(%s, %s)", NULL)                         \
  INT_OPS(S, "Int64", "int64", "long long", "unsigned long long")              \
  S("Int64.abs", 1, INTR_UNIFORM, "llabs(%s)", NULL)                           \
  S("Int64.min", 2, INTR_UNIFORM, "hipd_min_i64(%s, %s)", HELPER_MIN_I64)      \
  S("Int64.max", 2, INTR_UNIFORM, "hipd_max_i64(%s, %s)", HELPER_MAX_I64)      \
  OP2(S, "Math.xor", "^")                                                      \
  OP2(S, "Math.logical_and", "&")

/* By name, whatever the path (Gpu's conversions and atomics; OCaml's
 * Stdlib float functions, overloaded as the core math is). */
#define STD_UNQUALIFIED(S)                                                     \
  S("float", 1, INTR_UNIFORM, "(float)", NULL)                                 \
  S("float_of_int", 1, INTR_UNIFORM, "(float)", NULL)                          \
  S("float64_of_int", 1, INTR_UNIFORM, "(double)", NULL)                       \
  S("int_of_float", 1, INTR_UNIFORM, "(int)", NULL)                            \
  S("int_of_float64", 1, INTR_UNIFORM, "(int)", NULL)                          \
  S("spoc_powint", 2, INTR_UNIFORM, "hipd_spoc_powint(%s, %s)", HELPER_POWINT) \
  S("atomic_inc_int32", 2, INTR_DIVERGENT, "atomicAdd(&%s[%s], 1)", NULL)      \
  S("atomic_inc_global_int32", 2, INTR_DIVERGENT, "atomicAdd(&%s[%s], 1)",     \
    NULL)                                                                      \
  S("abs_float", 1, INTR_UNIFORM, "fabs(%s)", NULL)                            \
  S("expm1", 1, INTR_UNIFORM, "expm1(%s)", NULL)                               \
  S("log1p", 1, INTR_UNIFORM, "log1p(%s)", NULL)                               \
  S("hypot", 2, INTR_UNIFORM, "hypot(%s, %s)", NULL)                           \
  S("copysign", 2, INTR_UNIFORM, "copysign(%s, %s)", NULL)                     \
  S("fmod", 2, INTR_UNIFORM, "fmod(%s, %s)", NULL)

/* HIP on AMD has no __syncwarp on older ROCm (5.2 has none): a wavefront
 * barrier with wavefront-scope release and acquire fences is what newer
 * HIP defines it as. NVIDIA and the CPU device (one-lane warps) have
 * __syncwarp. */
#define WARP_AMD                                                               \
  "(__builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\"), "                 \
  "__builtin_amdgcn_wave_barrier(), "                                          \
  "__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\"))"

#define DEF(name, arity, conv, code) {name, code, arity, conv, 1, NULL},
#define SDEF(name, arity, conv, code, helper)                                  \
  {name, code, arity, conv, 1, helper},
#define COUNT4(a, b, c, d) +1
#define COUNT5(a, b, c, d, e) +1

enum {
  NCORE = 0 BUILTINS(COUNT4) + 1, /* + the warp barrier */
  NQUAL = 0 STD_QUALIFIED(COUNT5),
};

static const intr_def_t builtins_amd[] = {
    BUILTINS(DEF){"warp_barrier", WARP_AMD, 0, INTR_SYNC, 1, NULL},
    STD_QUALIFIED(SDEF) STD_UNQUALIFIED(SDEF)};
static const intr_def_t builtins_nvidia[] = {
    BUILTINS(DEF){"warp_barrier", "__syncwarp()", 0, INTR_SYNC, 1, NULL},
    STD_QUALIFIED(SDEF) STD_UNQUALIFIED(SDEF)};
static const intr_def_t builtins_host[] = {
    BUILTINS(DEF){"warp_barrier", "__syncwarp()", 0, INTR_SYNC, 1, NULL},
    STD_QUALIFIED(SDEF) STD_UNQUALIFIED(SDEF)};

#define NBUILTINS (sizeof(builtins_amd) / sizeof(builtins_amd[0]))

size_t intr_builtins(cg_platform_t p, const intr_def_t **defs)
{
  *defs = p == CG_PLATFORM_NVIDIA ? builtins_nvidia
          : p == CG_PLATFORM_HOST ? builtins_host
                                  : builtins_amd;
  return NBUILTINS;
}

intr_tab_t intr_builtin_tab(size_t i)
{
  return i < NCORE           ? INTR_TAB_CORE
         : i < NCORE + NQUAL ? INTR_TAB_QUAL
                             : INTR_TAB_STD;
}

/* A name of the core table (which a registration may not end with). */
static int is_builtin(const char *name)
{
  for (size_t i = 0; i < NCORE; i++)
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

/* The standard library's qualified name of a call of @p name with the
 * full name @p full into @p buf ("Sarek_stdlib.Math.Float32.sin":
 * "Float32.sin"). @return 0, or -1 when the call has no path. */
static int std_qualified(const char *full, const char *name, char *buf,
                         size_t size)
{
  static const char *const libs[] = {"Sarek_stdlib.", "Sarek_stdlib_meta.",
                                     "Sarek_float64."};
  size_t nf = strlen(full), nn = strlen(name), nm;
  const char *m = full;

  if (nf <= nn + 1 || strcmp(full + nf - nn, name) != 0 ||
      full[nf - nn - 1] != '.')
    return -1;
  for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
    if (strncmp(m, libs[i], strlen(libs[i])) == 0) {
      m += strlen(libs[i]);
      break;
    }
  if (strncmp(m, "Math.Float32.", 13) == 0 ||
      strncmp(m, "Math.Float64.", 13) == 0)
    m += 5;
  nm = (size_t)(full + nf - nn - 1 - m);
  if (m > full + nf - nn - 1 ||
      (size_t)snprintf(buf, size, "%.*s.%s", (int)nm, m, name) >= size)
    return -1;
  return 0;
}

size_t intr_forms(const intr_set_t *s, cg_platform_t p, const char *full,
                  const char *name, const intr_def_t **out, size_t max)
{
  const intr_def_t *b, *d;
  size_t nb = intr_builtins(p, &b), n = 0;
  char q[520];

  if ((d = intr_set_find(s, full)) != NULL && max > 0) {
    out[0] = d;
    return 1;
  }
  if (std_qualified(full, name, q, sizeof(q)) == 0)
    for (size_t i = NCORE; i < NCORE + NQUAL; i++)
      if (strcmp(b[i].name, q) == 0 && n < max)
        out[n++] = &b[i];
  if (n > 0)
    return n;
  for (size_t i = 0; i < NCORE; i++)
    if (strcmp(b[i].name, name) == 0 && n < max)
      out[n++] = &b[i];
  if (n > 0)
    return n;
  if (strcmp(full, name) != 0 && (d = intr_set_find(s, name)) != NULL &&
      max > 0) {
    out[0] = d;
    return 1;
  }
  for (size_t i = NCORE + NQUAL; i < nb; i++)
    if (strcmp(b[i].name, name) == 0 && n < max)
      out[n++] = &b[i];
  return n;
}

int intr_resolve(const intr_set_t *s, cg_platform_t p, const char *full,
                 const char *name, uint32_t nargs, intr_def_t *out, char *msg,
                 size_t msgsz)
{
  const intr_def_t *f[8];
  size_t n = intr_forms(s, p, full, name, f, 8);
  char arities[64] = "";
  size_t used = 0;

  for (size_t i = 0; i < n; i++) {
    if (f[i]->arity < 0 || f[i]->arity == (int)nargs) {
      *out = *f[i];
      return 0;
    }
    used += (size_t)snprintf(arities + used, sizeof(arities) - used, "%s%d",
                             used ? " or " : "", f[i]->arity);
  }
  if (n > 0) {
    snprintf(msg, msgsz, "intrinsic '%s' takes %s args, got %u", f[0]->name,
             arities, nargs);
    return HIPD_EINTRINSIC;
  }
  if (strcmp(full, name) != 0)
    snprintf(msg, msgsz,
             "unknown intrinsic '%s' (neither built in nor registered as "
             "'%s' or '%s')",
             full, full, name);
  else
    snprintf(msg, msgsz,
             "unknown intrinsic '%s' (neither built in nor registered)", name);
  return HIPD_EINTRINSIC;
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
