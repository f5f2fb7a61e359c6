/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_emit.h: the HIP generator's state and its emitter
 * toolkit (gen_emit.c): failures, the source's lines, temporaries, C names
 * and their visibility, the kernel's parameter list. Every other file of
 * the generator builds on it: soa.c (the SoA params), gen_expr.c,
 * gen_coopmat.c, gen_stmt.c, and gen_hip.c, the entry point, on them all.
 * Private to daemon/codegen. */
#ifndef HIPD_CODEGEN_GEN_EMIT_H
#define HIPD_CODEGEN_GEN_EMIT_H

#include "codegen/cg_util.h"
#include "codegen/gen_types.h"

/* One leaf of an SoA-lowered param. */
typedef struct soa_leaf {
  char *path;  /* "pos.x" */
  char *cname; /* "pts_pos_x" */
  const ir_type_t *type;
} soa_leaf_t;

typedef struct soa_param {
  ir_var_t *var;
  const ir_record_t *rec;
  soa_leaf_t *leaves;
  uint32_t nleaves;
} soa_param_t;

typedef struct gen {
  ir_doc_t *doc;
  const ir_kernel_t *k;
  const gen_options_t *o;
  ir_error_t *err;
  int failed;
  strbuf_t out; /* the source */
  strmap_t top; /* top-level C names */
  strmap_t vis; /* C names visible in the function: value = count */
  const char **visstack;
  size_t nvis, capvis;
  unsigned tmp; /* the function's temporaries so far */
  int indent;
  gen_param_t *params;
  uint32_t nparams, capparams;
  soa_param_t *soa;
  uint32_t nsoa;
  /* the built-in intrinsics' helper definitions the kernel uses, each
   * once, emitted at out[helpers_at] (after the types) */
  const char *intr_helpers[8];
  unsigned nintr_helpers;
  size_t helpers_at;
  strmap_t frags; /* coopmat fragments declared: name -> ir_cm_frag_t */
} gen_t;

/* Record a failure (the first one wins). @return its code. */
int gen_fail(gen_t *g, int code, const ir_path_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A string in the document's arena (NULL when out of memory). */
const char *gen_arena_printf(gen_t *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The C type of @p t ("int", "Geo_point", "float*"). */
const char *gen_ctype(const ir_type_t *t, char *buf, size_t size);
/* Start a line of the source at the current indentation. */
void gen_line(gen_t *g);
/* A fresh temporary name "sarek_<prefix><n>" of the function. */
void gen_temp(gen_t *g, const char *prefix, char *buf, size_t size);
/* Add a kernel parameter to the result. @return 0 or HIPD_ENOMEM. */
int gen_param_add(gen_t *g, const char *name, gen_ptype_t type, gen_role_t role,
                  const char *param, const char *leaf);
/* Note that the kernel uses a built-in intrinsic's @p helper. */
int gen_use_intr_helper(gen_t *g, const char *helper);
/* Make @p name visible in the current C scope (the caller pops it with
 * the scope). @return 0 or HIPD_ENOMEM. */
int gen_visible_push(gen_t *g, const char *name);
/* The visibility stack's depth, to pop back to with gen_vis_pop(). */
size_t gen_vis_mark(gen_t *g);
void gen_vis_pop(gen_t *g, size_t mark);
/* Is @p name visible in the current C scope? */
int gen_visible(gen_t *g, const char *name);
/* Choose the C name of a declaration and make it visible. */
int gen_declare_var(gen_t *g, ir_var_t *v);

#endif
