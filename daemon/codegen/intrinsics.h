/* SPDX-License-Identifier: MIT */
/* daemon/codegen/intrinsics.h: the intrinsics the generator knows: a
 * built-in table (the mapping of SPOC's CUDA generator, lowered per HIP
 * platform) and per-session registries (intrinsics.register).
 *
 * A registry (intr_set_t) is immutable once made: registering makes a new
 * set from the old one, so a generation running on a pool thread keeps
 * reading the set it was given while its session registers more. The
 * reference count is touched on the loop thread only.
 */
#ifndef HIPD_CODEGEN_INTRINSICS_H
#define HIPD_CODEGEN_INTRINSICS_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/cg_util.h"

/* What the generated source is for: warp barriers differ. */
typedef enum {
  CG_PLATFORM_AMD,    /* hiprtc for AMD GPUs */
  CG_PLATFORM_NVIDIA, /* HIP on NVIDIA: NVRTC */
  CG_PLATFORM_HOST,   /* hipd's CPU device (g++ and hipd_cpu_device.h) */
  CG_PLATFORM__N
} cg_platform_t;

/* "amd", "nvidia", "host". */
const char *cg_platform_name(cg_platform_t p);
/* The platform of a driver's platform name ("amd", "nvidia", "host"), or
 * of an architecture name ("gfx90a", "sm_90", "compute_90",
 * "host-x86_64"). @return 0 or -1 if unknown. */
int cg_platform_from_name(const char *name, cg_platform_t *out);
int cg_platform_from_arch(const char *arch, cg_platform_t *out);

/* The convergence class of an intrinsic (SPOC's Framework_sig):
 * uniform: the same for all threads of a block; divergent: per thread,
 * safe in divergent control flow; sync: every thread of the group must
 * reach it (barriers). hipd records and lists it; it does not check where
 * a sync intrinsic is called. */
typedef enum { INTR_UNIFORM, INTR_DIVERGENT, INTR_SYNC, INTR__N } intr_conv_t;

const char *intr_conv_name(intr_conv_t c);
/* @return 0 or -1 if @p s is none of "uniform", "divergent", "sync". */
int intr_conv_parse(const char *s, intr_conv_t *out);

/*
 * One form of an intrinsic. The code is a template: with %s placeholders,
 * the arguments replace them in order and there are exactly as many
 * arguments as placeholders ("atomicAdd(&%s, %s)"); %% is a '%'. Without
 * placeholders the code stands alone when called with no argument
 * ("threadIdx.x") and is applied to the arguments otherwise ("sinf",
 * "(float)": "sinf(x)", "(float)(x)").
 */
typedef struct intr_def {
  const char *name;
  const char *code;
  int arity; /* the arguments it takes; -1: any */
  intr_conv_t conv;
  int builtin;
  /* A built-in's device function that the code calls (a complete C
   * definition, emitted once before the kernel's helpers of a kernel that
   * uses it), or NULL. Registered intrinsics have none. */
  const char *helper;
} intr_def_t;

/* Which part of the built-in table a form belongs to. */
typedef enum {
  INTR_TAB_CORE, /* hipd's own table: by name whatever the path */
  INTR_TAB_QUAL, /* Sarek's standard library, path-qualified: Float32.sin */
  INTR_TAB_STD,  /* Sarek's standard library, by name: float, spoc_powint */
} intr_tab_t;

/* The built-in forms (several for an intrinsic with several arities), for
 * platform @p p. @return the number of forms; *defs points to a static
 * table the caller must not free (its codes are those of @p p). */
size_t intr_builtins(cg_platform_t p, const intr_def_t **defs);
/* The part of the table form @p i of intr_builtins belongs to. */
intr_tab_t intr_builtin_tab(size_t i);

typedef struct intr_set intr_set_t;

#define INTR_SET_MAX 1024 /* registrations of one session */
#define INTR_CODE_MAX 1024

/* Check a registration. @return 0, or HIPD_EPARAMS (bad name, code or
 * arity) or HIPD_EEXIST (a built-in name) with @p msg saying why. */
int intr_check_registration(const char *name, const char *code, int arity,
                            char *msg, size_t msgsz);

/* A new set (1 reference): @p base (NULL: empty) with @p def added or
 * replacing the entry of the same name. The strings are copied; the arity
 * of a template with placeholders is their count. @return 0, HIPD_ENOMEM
 * or HIPD_ETOOMANY. */
int intr_set_add(const intr_set_t *base, const intr_def_t *def,
                 intr_set_t **out);
void intr_set_ref(intr_set_t *s);
void intr_set_unref(intr_set_t *s);
/* The entries, sorted by name. NULL is an empty set. */
size_t intr_set_count(const intr_set_t *s);
const intr_def_t *intr_set_at(const intr_set_t *s, size_t i);
const intr_def_t *intr_set_find(const intr_set_t *s, const char *name);

/*
 * The forms a call of @p name (with module path @p full, "A.B.name", or
 * @p name when the path is empty) may use, from the first of these that
 * has any: the registration of @p full in @p s; the standard library's
 * path-qualified form (the path with a leading Sarek_stdlib,
 * Sarek_stdlib_meta or Sarek_float64 dropped, Math.Float32 and
 * Math.Float64 read as Float32 and Float64: "Float32.sin"); the core
 * table by name (all its arities); the registration of @p name; the
 * standard library's form by name. @return how many (at most @p max) in
 * @p out, 0 if none.
 */
size_t intr_forms(const intr_set_t *s, cg_platform_t p, const char *full,
                  const char *name, const intr_def_t **out, size_t max);

/*
 * The form a call of @p name (module path as for intr_forms) with @p nargs
 * arguments uses: of intr_forms' forms, the one of that arity. @return 0
 * with *@p out; or HIPD_EINTRINSIC (unknown, or no form of that arity)
 * with @p msg.
 */
int intr_resolve(const intr_set_t *s, cg_platform_t p, const char *full,
                 const char *name, uint32_t nargs, intr_def_t *out, char *msg,
                 size_t msgsz);

/* Append the call of @p def with @p args (C expressions) to @p b. A
 * registered intrinsic's expansion is parenthesized as a whole. */
void intr_expand(strbuf_t *b, const intr_def_t *def, const char *const *args,
                 uint32_t nargs);

#endif
