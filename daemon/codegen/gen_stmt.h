/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_stmt.h: the HIP generator's statements (gen_stmt.c),
 * SoA-lowered writes included. Private to daemon/codegen. */
#ifndef HIPD_CODEGEN_GEN_STMT_H
#define HIPD_CODEGEN_GEN_STMT_H

#include "codegen/gen_emit.h"

/* Emit statement @p s. @return 0 or an error code. */
int gen_stmt(gen_t *g, const ir_stmt_t *s);

#endif
