/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_internal.h: the generator's state, shared by
 * gen_hip.c and the SoA lowering (soa.c). Private to daemon/codegen. */
#ifndef HIPD_CODEGEN_GEN_INTERNAL_H
#define HIPD_CODEGEN_GEN_INTERNAL_H

#include "codegen/cg_util.h"
#include "codegen/gen_hip.h"

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
/* Append the C expression of @p e to @p b. @return 0 or an error code. */
int gen_expr(gen_t *g, strbuf_t *b, const ir_expr_t *e);
/* Note that the kernel uses a built-in intrinsic's @p helper. */
int gen_use_intr_helper(gen_t *g, const char *helper);
/* The C type of @p t ("int", "Geo_point", "float*"). */
const char *gen_ctype(const ir_type_t *t, char *buf, size_t size);
/* Start a line of the source at the current indentation. */
void gen_line(gen_t *g);
/* A fresh temporary name "sarek_<prefix><n>" of the function. */
void gen_temp(gen_t *g, const char *prefix, char *buf, size_t size);
/* Make @p name visible in the current C scope (the caller pops it with
 * the scope). @return 0 or HIPD_ENOMEM. */
int gen_visible_push(gen_t *g, const char *name);
/* The generator's own helpers, shared by gen_hip.c (plumbing, names,
 * types, functions), gen_expr.c and gen_stmt.c. */
/* A string in the document's arena (NULL when out of memory). */
const char *gen_arena_printf(gen_t *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The visibility stack's depth, to pop back to with gen_vis_pop(). */
size_t gen_vis_mark(gen_t *g);
void gen_vis_pop(gen_t *g, size_t mark);
/* Is @p name visible in the current C scope? */
int gen_visible(gen_t *g, const char *name);
/* Choose the C name of a declaration and make it visible. */
int gen_declare_var(gen_t *g, ir_var_t *v);
/* The variant a match is on: that of its first constructor pattern, or
 * NULL when it has only a wildcard. */
const ir_variant_t *gen_match_variant(ir_pattern_t *const *pats, uint32_t n);
/* Append the C lvalue of @p l to @p b. @return 0 or an error code. */
int gen_lvalue(gen_t *g, strbuf_t *b, const ir_lvalue_t *l);
/* One expression into a string of its own, @p b (freed by the caller).
 * @return 0 or an error code. */
int gen_expr_string(gen_t *g, const ir_expr_t *e, strbuf_t *b);
/* Emit statement @p s. @return 0 or an error code. */
int gen_stmt(gen_t *g, const ir_stmt_t *s);
/* gen_coopmat.c: a coopmat statement, for the target platform. */
int gen_coopmat(gen_t *g, const ir_stmt_t *s);
/* Is @p e free of side effects and cheap to repeat (vars, constants,
 * fields, indexing and arithmetic on those)? */
int gen_expr_simple(const ir_expr_t *e);
/* Add a kernel parameter to the result. @return 0 or HIPD_ENOMEM. */
int gen_param_add(gen_t *g, const char *name, gen_ptype_t type, gen_role_t role,
                  const char *param, const char *leaf);

/* soa.c */
/* Check the options' soa_params and mark the params (leaves computed). */
int soa_setup(gen_t *g);
void soa_cleanup(gen_t *g);
soa_param_t *soa_find(gen_t *g, const ir_var_t *v);
/* Emit the expanded parameter list of SoA param @p sp. */
int soa_emit_params(gen_t *g, soa_param_t *sp, int *first);
/* If @p e (a field or aread) reads an SoA param, append the lowered read
 * to @p b and set *handled. */
int soa_read(gen_t *g, strbuf_t *b, const ir_expr_t *e, int *handled);
/* If @p s (an assign) writes an SoA param, emit the lowered statements
 * and set *handled. */
int soa_assign(gen_t *g, const ir_stmt_t *s, int *handled);

#endif
