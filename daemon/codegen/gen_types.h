/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_types.h: the HIP generator's types: a kernel
 * parameter, the options and the result (gen_hip.h is the generator's
 * interface; the emitter, gen_emit.h, works on these too). */
#ifndef HIPD_CODEGEN_GEN_TYPES_H
#define HIPD_CODEGEN_GEN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/intrinsics.h"
#include "codegen/ir.h"

/* The C type class of a kernel parameter: what a launch argument must be. */
typedef enum {
  GEN_P_PTR,
  GEN_P_I32,
  GEN_P_I64,
  GEN_P_F32,
  GEN_P_F64
} gen_ptype_t;

/* Why a kernel parameter is there. */
typedef enum {
  GEN_ROLE_VALUE,  /* a scalar param */
  GEN_ROLE_ARRAY,  /* a vec or array param's pointer */
  GEN_ROLE_LENGTH, /* sarek_<name>_length after a vec or arrinfo param */
  GEN_ROLE_LEAF,   /* one leaf pointer of an SoA-lowered param */
} gen_role_t;

typedef struct gen_param {
  char *name; /* the C parameter's name */
  gen_ptype_t type;
  gen_role_t role;
  char *param; /* the IR param it stands for */
  char *leaf;  /* GEN_ROLE_LEAF: the field path ("pos.x"), else NULL */
} gen_param_t;

typedef struct gen_options {
  cg_platform_t platform;
  int has_block; /* emit __launch_bounds__(x * y * z) */
  uint32_t block[3];
  const char *const *soa; /* params to lower as SoA */
  uint32_t nsoa;
  const intr_set_t *intrinsics; /* the session's registry, may be NULL */
  size_t max_source;            /* 0: 16 MiB */
  const char *arch;             /* the target architecture, or NULL */
  int has_device, device;       /* the target device, for messages */
} gen_options_t;

typedef struct gen_result {
  char *source; /* NUL-terminated */
  size_t len;
  char *name; /* the kernel's name */
  gen_param_t *params;
  uint32_t nparams;
  uint32_t max_threads; /* the launch bound, 0 if none */
} gen_result_t;

#define GEN_MAX_SOURCE ((size_t)16 << 20)
#define GEN_MAX_PARAMS 256

#endif
