/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir.c: the IR's arena, paths, errors, tag tables and
 * names. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/ir.h"
#include "hipd.h"

/* ------------------------------------------------------------------ arena */

typedef struct chunk {
  struct chunk *next;
  size_t size, used;
  max_align_t data[]; /* size bytes */
} chunk_t;

struct ir_arena {
  chunk_t *head;
  size_t cap;   /* 0: none */
  size_t total; /* bytes of chunks */
  size_t used;  /* bytes handed out */
};

#define CHUNK_MIN ((size_t)64 << 10)
#define ALIGN_UP(n)                                                            \
  (((n) + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1))

ir_arena_t *ir_arena_new(size_t cap)
{
  ir_arena_t *a = calloc(1, sizeof(*a));

  if (a != NULL)
    a->cap = cap;
  return a;
}

void *ir_alloc(ir_arena_t *a, size_t n)
{
  chunk_t *c = a->head;
  void *p;

  n = ALIGN_UP(n ? n : 1);
  if (c == NULL || c->size - c->used < n) {
    size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
    if (a->cap != 0) {
      size_t left = a->total < a->cap ? a->cap - a->total : 0;
      if (n > left)
        return NULL;
      if (size > left)
        size = left;
    }
    c = malloc(sizeof(*c) + size);
    if (c == NULL)
      return NULL;
    c->size = size;
    c->used = 0;
    c->next = a->head;
    a->head = c;
    a->total += size;
  }
  p = (char *)c->data + c->used;
  c->used += n;
  a->used += n;
  memset(p, 0, n);
  return p;
}

char *ir_strndup(ir_arena_t *a, const char *s, size_t n)
{
  char *p = ir_alloc(a, n + 1);

  if (p != NULL) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

size_t ir_arena_used(const ir_arena_t *a)
{
  return a->used;
}

void ir_arena_free(ir_arena_t *a)
{
  if (a == NULL)
    return;
  while (a->head != NULL) {
    chunk_t *c = a->head;
    a->head = c->next;
    free(c);
  }
  free(a);
}

/* ------------------------------------------------------------------ paths */

char *ir_path_format(const ir_path_t *p, char *buf, size_t size)
{
  const ir_path_t *q;
  size_t n = 0, len = 0, o = 0;
  char *full;

  if (size == 0)
    return buf;
  if (p == NULL) {
    snprintf(buf, size, "document");
    return buf;
  }
  for (q = p; q != NULL; q = q->up, n++)
    len += q->key != NULL ? strlen(q->key) + 1 : 12;
  full = malloc(len + 1);
  if (full == NULL) {
    snprintf(buf, size, "(path unavailable: out of memory)");
    return buf;
  }
  /* Segments from the root down: walk up n - 1 - i steps for the i-th. */
  for (size_t i = 0; i < n; i++) {
    q = p;
    for (size_t k = 0; k < n - 1 - i; k++)
      q = q->up;
    if (q->key != NULL)
      o +=
          (size_t)snprintf(full + o, len + 1 - o, "%s%s", o ? "." : "", q->key);
    else
      o += (size_t)snprintf(full + o, len + 1 - o, "[%u]", q->index);
  }
  if (o > 1024)
    snprintf(buf, size, "%.500s...%s", full, full + o - 500);
  else
    snprintf(buf, size, "%s", full);
  free(full);
  return buf;
}

int ir_error_set(ir_error_t *err, int code, const ir_path_t *at,
                 const char *fmt, ...)
{
  va_list ap;

  if (err == NULL || err->code != 0)
    return code;
  err->code = code;
  ir_path_format(at, err->path, sizeof(err->path));
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
  va_end(ap);
  return code;
}

char *ir_quote(char *buf, size_t size, const char *s, size_t n)
{
  size_t o = 0;

  if (size == 0)
    return buf;
  for (size_t i = 0; i < n && i < 64 && o + 5 < size; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
      buf[o++] = (char)c;
    else
      o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
  }
  if (n > 64 && o + 4 < size) {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o] = '\0';
  return buf;
}

/* ------------------------------------------------------------- tag tables */

static const char *const memspace_tags[] = {"global", "shared", "local"};
static const char *const type_tags[] = {"i32",    "i64",     "f32",   "f64",
                                        "f16",    "u8",      "bool",  "unit",
                                        "record", "variant", "array", "vec"};
static const int8_t type_arity[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 1};
static const uint8_t type_since[] = {1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1};
static const char *const const_tags[] = {"i32",  "i64",  "f32", "f64",
                                         "bool", "unit", "f16", "u8"};
static const int8_t const_arity[] = {1, 1, 1, 1, 1, 0, 1, 1};
static const uint8_t const_since[] = {1, 1, 1, 1, 1, 1, 2, 2};
static const char *const binop_tags[] = {
    "add", "sub", "mul", "div", "mod", "eq",  "ne",   "lt",  "le",
    "gt",  "ge",  "and", "or",  "shl", "shr", "band", "bor", "bxor"};
static const char *const unop_tags[] = {"neg", "not", "bnot"};
static const char *const dir_tags[] = {"upto", "downto"};
static const char *const pattern_tags[] = {"ctor", "wild"};
static const int8_t pattern_arity[] = {2, 0};
static const char *const expr_tags[] = {
    "const",   "var",       "binop",   "unop",  "aread", "areadx",
    "field",   "intrinsic", "cast",    "tuple", "app",   "record",
    "variant", "alen",      "acreate", "if",    "match"};
static const int8_t expr_arity[] = {1, 2, 3, 2, 2, 2, 2, 3, 2,
                                    1, 2, 2, 3, 1, 3, 3, 2};
static const char *const lvalue_tags[] = {"var", "aelem", "aelemx", "field"};
static const int8_t lvalue_arity[] = {2, 2, 2, 2};
static const char *const stmt_tags[] = {
    "assign", "seq",     "if",           "while", "for",    "match",
    "return", "barrier", "warp_barrier", "expr",  "empty",  "let",
    "letmut", "pragma",  "fence",        "block", "native", "coopmat"};
static const int8_t stmt_arity[] = {2, 1, 3, 2, 5, 2, 1, 0, 0,
                                    1, 0, 3, 3, 2, 0, 1, 1, 1};
static const uint8_t stmt_since[] = {1, 1, 1, 1, 1, 1, 1, 1, 1,
                                     1, 1, 1, 1, 1, 1, 1, 1, 2};
static const char *const decl_tags[] = {"param", "local", "shared"};
static const int8_t decl_arity[] = {2, 2, 3};
static const char *const coopmat_tags[] = {"decl", "load", "store", "muladd"};
static const int8_t coopmat_arity[] = {2, 5, 5, 5};
static const uint8_t coopmat_since[] = {2, 2, 2, 2};
const char *const ir_cm_use_names[IR_CMU__N] = {"a", "b", "accumulator"};
const char *const ir_cm_comp_names[IR_CMC__N] = {"f16", "f32", "u8",
                                                 "s8",  "u32", "s32"};

#define TS(name, tags, arity)                                                  \
  {                                                                            \
    name, tags, arity, sizeof(tags) / sizeof(tags[0]), NULL                    \
  }
#define TSV(name, tags, arity, since)                                          \
  {                                                                            \
    name, tags, arity, sizeof(tags) / sizeof(tags[0]), since                   \
  }

const ir_tagset_t ir_tagsets[IR_TS__N] = {
    [IR_TS_MEMSPACE] = TS("memspace", memspace_tags, NULL),
    [IR_TS_ELTTYPE] = TSV("elttype", type_tags, type_arity, type_since),
    [IR_TS_CONST] = TSV("const", const_tags, const_arity, const_since),
    [IR_TS_BINOP] = TS("binop", binop_tags, NULL),
    [IR_TS_UNOP] = TS("unop", unop_tags, NULL),
    [IR_TS_DIR] = TS("dir", dir_tags, NULL),
    [IR_TS_PATTERN] = TS("pattern", pattern_tags, pattern_arity),
    [IR_TS_EXPR] = TS("expr", expr_tags, expr_arity),
    [IR_TS_LVALUE] = TS("lvalue", lvalue_tags, lvalue_arity),
    [IR_TS_STMT] = TSV("stmt", stmt_tags, stmt_arity, stmt_since),
    [IR_TS_DECL] = TS("decl", decl_tags, decl_arity),
    [IR_TS_COOPMAT] =
        TSV("coopmat op", coopmat_tags, coopmat_arity, coopmat_since),
};

/* The enums and the tables must agree. */
_Static_assert(sizeof(type_tags) / sizeof(type_tags[0]) == IR_T__N, "types");
_Static_assert(sizeof(type_arity) == IR_T__N, "type arity");
_Static_assert(sizeof(type_since) == IR_T__N, "type versions");
_Static_assert(sizeof(const_since) == IR_C__N, "const versions");
_Static_assert(sizeof(const_tags) / sizeof(const_tags[0]) == IR_C__N, "const");
_Static_assert(sizeof(binop_tags) / sizeof(binop_tags[0]) == IR_BINOP__N,
               "binop");
_Static_assert(sizeof(unop_tags) / sizeof(unop_tags[0]) == IR_UNOP__N, "unop");
_Static_assert(sizeof(expr_tags) / sizeof(expr_tags[0]) == IR_E__N, "expr");
_Static_assert(sizeof(expr_arity) == IR_E__N, "expr arity");
_Static_assert(sizeof(lvalue_tags) / sizeof(lvalue_tags[0]) == IR_L__N,
               "lvalue");
_Static_assert(sizeof(stmt_tags) / sizeof(stmt_tags[0]) == IR_S__N, "stmt");
_Static_assert(sizeof(stmt_arity) == IR_S__N, "stmt arity");
_Static_assert(sizeof(stmt_since) == IR_S__N, "stmt versions");
_Static_assert(sizeof(coopmat_tags) / sizeof(coopmat_tags[0]) == IR_CM__N,
               "coopmat");
_Static_assert(sizeof(decl_tags) / sizeof(decl_tags[0]) == IR_D__N, "decl");
_Static_assert(IR_BINOP__N <= 32 && IR_E__N <= 32 && IR_S__N <= 32,
               "ir_stats_t holds 32 tags per type");

void ir_limits_default(ir_limits_t *lim)
{
  lim->max_depth = 256;
  lim->max_values = 1u << 20;
  lim->max_array = 1u << 20;
  lim->max_map = 1u << 16;
  lim->max_native = 1u << 20;
  lim->max_hint = 4096;
  lim->max_defs = 4096;
  lim->max_memory = (size_t)256 << 20;
}

/* ------------------------------------------------------------------- names */

int ir_is_keyword(const char *s)
{
  /* C++20 keywords and alternative tokens, plus C's restrict. */
  static const char *const kw[] = {"alignas",
                                   "alignof",
                                   "and",
                                   "and_eq",
                                   "asm",
                                   "auto",
                                   "bitand",
                                   "bitor",
                                   "bool",
                                   "break",
                                   "case",
                                   "catch",
                                   "char",
                                   "char16_t",
                                   "char32_t",
                                   "char8_t",
                                   "class",
                                   "co_await",
                                   "co_return",
                                   "co_yield",
                                   "compl",
                                   "concept",
                                   "const",
                                   "const_cast",
                                   "consteval",
                                   "constexpr",
                                   "constinit",
                                   "continue",
                                   "decltype",
                                   "default",
                                   "delete",
                                   "do",
                                   "double",
                                   "dynamic_cast",
                                   "else",
                                   "enum",
                                   "explicit",
                                   "export",
                                   "extern",
                                   "false",
                                   "float",
                                   "for",
                                   "friend",
                                   "goto",
                                   "if",
                                   "inline",
                                   "int",
                                   "long",
                                   "mutable",
                                   "namespace",
                                   "new",
                                   "noexcept",
                                   "not",
                                   "not_eq",
                                   "nullptr",
                                   "operator",
                                   "or",
                                   "or_eq",
                                   "private",
                                   "protected",
                                   "public",
                                   "register",
                                   "reinterpret_cast",
                                   "requires",
                                   "restrict",
                                   "return",
                                   "short",
                                   "signed",
                                   "sizeof",
                                   "static",
                                   "static_assert",
                                   "static_cast",
                                   "struct",
                                   "switch",
                                   "template",
                                   "this",
                                   "thread_local",
                                   "throw",
                                   "true",
                                   "try",
                                   "typedef",
                                   "typeid",
                                   "typename",
                                   "union",
                                   "unsigned",
                                   "using",
                                   "virtual",
                                   "void",
                                   "volatile",
                                   "wchar_t",
                                   "while",
                                   "xor",
                                   "xor_eq"};

  for (size_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
    if (strcmp(kw[i], s) == 0)
      return 1;
  return 0;
}

int ir_type_is_scalar(const ir_type_t *t)
{
  return t->kind <= IR_T_BOOL;
}

int ir_type_equal(const ir_type_t *a, const ir_type_t *b)
{
  if (a->kind != b->kind)
    return 0;
  switch (a->kind) {
  case IR_T_RECORD:
  case IR_T_VARIANT:
    return strcmp(a->name, b->name) == 0;
  case IR_T_ARRAY:
    return a->mem == b->mem && ir_type_equal(a->elt, b->elt);
  case IR_T_VEC:
    return ir_type_equal(a->elt, b->elt);
  default:
    return 1;
  }
}

const char *ir_type_describe(const ir_type_t *t, char *buf, size_t size)
{
  char inner[128];

  switch (t->kind) {
  case IR_T_RECORD:
  case IR_T_VARIANT:
    snprintf(buf, size, "%s %s", type_tags[t->kind], t->name);
    break;
  case IR_T_ARRAY:
    snprintf(buf, size, "array of %s in %s memory",
             ir_type_describe(t->elt, inner, sizeof(inner)),
             memspace_tags[t->mem]);
    break;
  case IR_T_VEC:
    snprintf(buf, size, "vec of %s",
             ir_type_describe(t->elt, inner, sizeof(inner)));
    break;
  default:
    snprintf(buf, size, "%s", type_tags[t->kind]);
  }
  return buf;
}
