/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_expr.h: the HIP generator's constants, expressions and
 * lvalues (gen_expr.c), SoA-lowered reads included. Private to daemon/codegen.
 */
#ifndef HIPD_CODEGEN_GEN_EXPR_H
#define HIPD_CODEGEN_GEN_EXPR_H

#include "codegen/gen_emit.h"

/* Append the C expression of @p e to @p b. @return 0 or an error code. */
int gen_expr(gen_t *g, strbuf_t *b, const ir_expr_t *e);
/* One expression into a string of its own, @p b (freed by the caller).
 * @return 0 or an error code. */
int gen_expr_string(gen_t *g, const ir_expr_t *e, strbuf_t *b);
/* Is @p e free of side effects and cheap to repeat (vars, constants,
 * fields, indexing and arithmetic on those)? */
int gen_expr_simple(const ir_expr_t *e);
/* Append the C lvalue of @p l to @p b. @return 0 or an error code. */
int gen_lvalue(gen_t *g, strbuf_t *b, const ir_lvalue_t *l);
/* The variant a match is on: that of its first constructor pattern, or
 * NULL when it has only a wildcard. */
const ir_variant_t *gen_match_variant(ir_pattern_t *const *pats, uint32_t n);

#endif
