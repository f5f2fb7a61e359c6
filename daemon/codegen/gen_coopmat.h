/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_coopmat.h: IR version 2's cooperative-matrix statements,
 * per platform (gen_coopmat.c). Private to daemon/codegen. */
#ifndef HIPD_CODEGEN_GEN_COOPMAT_H
#define HIPD_CODEGEN_GEN_COOPMAT_H

#include "codegen/gen_emit.h"

/* Emit the coopmat statement @p s for the target platform. @return 0 or an
 * error code. */
int gen_coopmat(gen_t *g, const ir_stmt_t *s);

#endif
