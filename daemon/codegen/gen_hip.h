/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_hip.h: Sarek IR -> HIP C++ source (proto/IR.md,
 * "Appendix: mapping to HIP").
 *
 * The source follows the conventions of SPOC's CUDA generator, so that
 * argument lists and element layouts are the same; the generator also says
 * what the kernel's parameter list is, so that hipd can check launches of
 * the kernel it compiles.
 */
#ifndef HIPD_CODEGEN_GEN_HIP_H
#define HIPD_CODEGEN_GEN_HIP_H

#include "codegen/gen_types.h"

/*
 * Generate the HIP source of @p doc (decoded by ir_decode). @p doc's
 * working fields (C names) are rewritten: one generation at a time per
 * document. @return 0 with @p out filled (free with gen_result_free); or
 * HIPD_EIR / HIPD_EINTRINSIC / HIPD_ENOMEM with @p err saying where.
 */
int gen_hip(ir_doc_t *doc, const gen_options_t *o, gen_result_t *out,
            ir_error_t *err);
void gen_result_free(gen_result_t *r);

/* "pointer", "int32", "int64", "float", "double" (kernel.info's names). */
const char *gen_ptype_name(gen_ptype_t t);
/* "value", "array", "length", "leaf". */
const char *gen_role_name(gen_role_t r);

#endif
