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
} intr_def_t;

/* The built-in forms (several for an intrinsic with several arities), for
 * platform @p p. @return the number of forms; *defs points to a static
 * table the caller must not free (its codes are those of @p p). */
size_t intr_builtins(cg_platform_t p, const intr_def_t **defs);

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
 * The form a call of @p name (with module path @p full, "A.B.name", or
 * @p name when the path is empty) and @p nargs arguments uses: the
 * built-in table by name alone whatever the path, then @p s by the full
 * name, then by the name alone. @return 0 with *@p out; or HIPD_EINTRINSIC
 * (unknown, or no form of that arity) with @p msg.
 */
int intr_resolve(const intr_set_t *s, cg_platform_t p, const char *full,
                 const char *name, uint32_t nargs, intr_def_t *out, char *msg,
                 size_t msgsz);

/* Append the call of @p def with @p args (C expressions) to @p b. A
 * registered intrinsic's expansion is parenthesized as a whole. */
void intr_expand(strbuf_t *b, const intr_def_t *def, const char *const *args,
                 uint32_t nargs);

#endif
