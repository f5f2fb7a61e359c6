/* SPDX-License-Identifier: MIT */
/* daemon/codegen/soa.h: the Structure-of-Arrays lowering's params and
 * field chains (soa.c); the lowered reads are expressions (gen_expr.c), the
 * lowered writes statements (gen_stmt.c). Private to daemon/codegen. */
#ifndef HIPD_CODEGEN_SOA_H
#define HIPD_CODEGEN_SOA_H

#include "codegen/gen_emit.h"

/* The deepest chain of fields read or written through an SoA param. */
#define SOA_CHAIN_MAX 256

/* Check the options' soa_params and mark the params (leaves computed). */
int soa_setup(gen_t *g);
void soa_cleanup(gen_t *g);
soa_param_t *soa_find(gen_t *g, const ir_var_t *v);
/* Emit the expanded parameter list of SoA param @p sp. */
int soa_emit_params(gen_t *g, soa_param_t *sp, int *first);
/* Where a chain of @p n field names (collected innermost first; put in
 * order here) leads from the element of @p sp: to a leaf (*rec NULL) or to
 * a (sub)record (*rec set). @p prefix gets the C name prefix ("pts_pos" or
 * the leaf "pts_pos_x"). @return 0 or an error code. */
int soa_chain_resolve(gen_t *g, soa_param_t *sp, const char **fields,
                      const ir_path_t **paths, int n, const ir_record_t **rec,
                      strbuf_t *prefix);
/* Append rec{prefix_f[idx], sub{...}, ...}, the whole value of record @p r
 * at @p idx, to @p b. */
void soa_value(gen_t *g, strbuf_t *b, const ir_record_t *r, const char *prefix,
               const char *idx);
/* Emit prefix_f[idx] = value.f; ... for every leaf under @p r. */
int soa_scatter(gen_t *g, const ir_record_t *r, const char *prefix,
                const char *value, const char *idx);

#endif
