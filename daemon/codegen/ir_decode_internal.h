/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode_internal.h: the IR decoder's state and reader,
 * shared by its files: ir_decode.c (the document, declarations, helpers,
 * records, variants and the kernel), ir_decode_read.c (failures, paths,
 * the msgpack reader, scalars and containers), ir_decode_types.c (types,
 * variables, constants), ir_decode_code.c (expressions and statements),
 * ir_decode_tables.c (phase 2) and ir_decode_scope.c (phase 3). Private
 * to daemon/codegen.
 */
#ifndef HIPD_CODEGEN_IR_DECODE_INTERNAL_H
#define HIPD_CODEGEN_IR_DECODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"

/* A msgpack value as read (scalars whole, containers as their count). */
enum {
  V_NIL,
  V_BOOL,
  V_UINT,
  V_INT,
  V_FLOAT,
  V_STR,
  V_BIN,
  V_ARRAY,
  V_MAP,
  V_EXT
};

typedef struct {
  int t;
  int b;
  uint64_t u;    /* V_UINT */
  int64_t i;     /* V_INT (negative) */
  double f;      /* V_FLOAT */
  const char *s; /* V_STR, V_BIN, V_EXT payload */
  uint32_t n;    /* string length, container count */
} val_t;

typedef struct dec {
  const uint8_t *p, *end;
  unsigned depth;
  uint64_t values;
  ir_limits_t lim;
  ir_arena_t *arena;
  ir_error_t *err;
  ir_doc_t *doc;
  int failed;
  /* record and variant references, resolved in phase 2 */
  ir_type_t **named;
  size_t nnamed, capnamed;
  /* phase 2 and 3 tables */
  strmap_t records, variants, ctors, helpers, cnames;
  /* phase 3: the function being checked */
  u64map_t ids;
  strmap_t names;
  ir_var_t **stack;
  size_t nstack, capstack;
  const ir_type_t *ret; /* the function's return type; NULL: the kernel */
  int in_kernel;
} dec_t;

/* The names of the V_ types, for messages. */
extern const char *const dec_vnames[];

/* ir_decode_read.c: failures */
/* Record a failure at @p at (HIPD_EIR; the first one wins). @return its
 * code. */
int dec_fail(dec_t *d, const ir_path_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record an allocation failure: HIPD_EIR if the document is over its
 * memory limit, else HIPD_ENOMEM. @return that code. */
int dec_oom(dec_t *d, const ir_path_t *at);
/* @p n bytes of the arena, or NULL (the failure recorded). */
void *dec_new(dec_t *d, const ir_path_t *at, size_t n);

#define NEW(d, at, ptr) ((ptr) = dec_new((d), (at), sizeof(*(ptr))))
#define NEWN(d, at, ptr, n)                                                    \
  ((ptr) = dec_new((d), (at), sizeof(*(ptr)) * ((n) ? (n) : 1)))

/* ir_decode_read.c: paths, in the arena (NULL: the failure recorded) */
/* The path @p up.key. */
const ir_path_t *dec_pk(dec_t *d, const ir_path_t *up, const char *key);
/* The path @p up[index]. */
const ir_path_t *dec_pi(dec_t *d, const ir_path_t *up, uint32_t index);

/* ir_decode_read.c: the reader; each returns 0 or HIPD_EIR (recorded) */
/* Read the next value's header (and a scalar's or string's payload). A
 * container is entered: the caller reads its elements, then dec_leave(). */
int dec_rd(dec_t *d, const ir_path_t *at, val_t *v);
/* Leave the container entered last. */
void dec_leave(dec_t *d);
/* Read and drop one whole value (checking it as any other). */
int dec_skip(dec_t *d, const ir_path_t *at);
/* Consume a nil if one is next. @return 1 if it did. */
int dec_take_nil(dec_t *d);

/* ir_decode_read.c: scalars */
enum { NAME_WORD, NAME_IDENT, NAME_TNAME, NAME_KEY };

/* Is @p s (n bytes) a word (cg_word_ok) of at most 255 bytes? */
int dec_word_ok(const char *s, size_t n);
/* A str that is a name of @p kind (NAME_), copied into the arena. */
int dec_read_name(dec_t *d, const ir_path_t *at, int kind, const char **out);
/* A str of at most @p max bytes (valid UTF-8, no NUL), copied. */
int dec_read_text(dec_t *d, const ir_path_t *at, size_t max, const char **out,
                  size_t *len);
int dec_read_uint(dec_t *d, const ir_path_t *at, uint64_t *out);
int dec_read_bool(dec_t *d, const ir_path_t *at, int *out);
/* A bare string of enumeration @p ts. */
int dec_read_enum(dec_t *d, const ir_path_t *at, ir_tagset_id_t ts,
                  unsigned *out);

/* ir_decode_read.c: containers (entered: the caller calls dec_leave()) */
int dec_open_array(dec_t *d, const ir_path_t *at, const char *what,
                   uint32_t *n);
int dec_open_map(dec_t *d, const ir_path_t *at, const char *what, uint32_t *n);
/* A pair [a, b] of a list. */
int dec_open_pair(dec_t *d, const ir_path_t *at, const char *what);
/* A node of type @p ts: [tag, fields...] with the tag's arity. */
int dec_node_open(dec_t *d, const ir_path_t *at, ir_tagset_id_t ts,
                  unsigned *tag);
/* The next key of a map of the IR among @p keys (n of them): its index, or
 * -1 for an annotation ('_' key, whose value is skipped). Unknown and
 * repeated keys are errors. @p seen tracks the keys read. */
int dec_map_key(dec_t *d, const ir_path_t *at, const char *const *keys,
                unsigned n, uint32_t *seen, int *which);
/* Every key of @p required (a mask over @p keys) must have been seen. */
int dec_map_required(dec_t *d, const ir_path_t *at, const char *const *keys,
                     unsigned n, uint32_t required, uint32_t seen);

/* ir_decode_types.c; each returns 0 or an error code (recorded) */
int dec_parse_type(dec_t *d, const ir_path_t *at, ir_type_t **out);
int dec_parse_var(dec_t *d, const ir_path_t *at, ir_var_t **out);
/* A pattern binder: nil, or {"name", "id"}. */
int dec_parse_binder(dec_t *d, const ir_path_t *at, ir_var_t **out);
int dec_parse_const(dec_t *d, const ir_path_t *at, ir_const_t *c);

/* ir_decode_code.c; @p ctx: where the expression stands (0 or CTX_) */
int dec_parse_expr(dec_t *d, const ir_path_t *at, int ctx, ir_expr_t **out);
int dec_parse_stmt(dec_t *d, const ir_path_t *at, ir_stmt_t **out);

/* ir_decode.c */
int dec_parse_kernel(dec_t *d, const ir_path_t *at, ir_kernel_t *k);

/* ir_decode_tables.c: phase 2 */
int dec_check_tables(dec_t *d);

/* ir_decode_scope.c: phase 3 */
int dec_check_kernel(dec_t *d);

#endif
