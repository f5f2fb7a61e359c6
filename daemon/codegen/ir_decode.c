/* daemon/codegen/ir_decode.c: msgpack bytes -> validated IR (proto/IR.md).
 *
 * Three phases, as IR.md states them:
 *  1. the encoding: a recursive-descent reader over the raw msgpack bytes
 *     (msgpack-c's unpacker stops at 32 levels; an IR nests deeper) builds
 *     the tree, checking limits, node shapes, tags, arities, field and key
 *     types, name syntax and where constructs may appear;
 *  2. the tables: records, variants and helpers (names, duplicates,
 *     recursion by value, the C names they become), and every record or
 *     variant type reference is resolved;
 *  3. scopes and references: the kernel, then each helper, is walked with
 *     its scopes, resolving every variable, array, helper, field,
 *     constructor and pattern.
 * The first violation stops the decoding with HIPD_EIR and its path.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "hipd.h"

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

static const char *const vnames[] = {"nil", "bool", "int",   "int", "float",
                                     "str", "bin",  "array", "map", "ext"};

/* ------------------------------------------------------------- errors */

static int fail(dec_t *d, const ir_path_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(dec_t *d, const ir_path_t *at, const char *fmt, ...)
{
  va_list ap;
  char msg[512];

  d->failed = 1;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return ir_error_set(d->err, HIPD_EIR, at, "%s", msg);
}

static int oom(dec_t *d, const ir_path_t *at)
{
  d->failed = 1;
  if (d->lim.max_memory != 0 &&
      ir_arena_used(d->arena) + (64u << 10) >= d->lim.max_memory)
    return ir_error_set(d->err, HIPD_EIR, at,
                        "the document needs more than %zu bytes of memory "
                        "once decoded",
                        d->lim.max_memory);
  return ir_error_set(d->err, HIPD_ENOMEM, at, "out of memory");
}

static void *dnew(dec_t *d, const ir_path_t *at, size_t n)
{
  void *p = ir_alloc(d->arena, n);

  if (p == NULL)
    oom(d, at);
  return p;
}

#define NEW(d, at, ptr) ((ptr) = dnew((d), (at), sizeof(*(ptr))))
#define NEWN(d, at, ptr, n)                                                    \
  ((ptr) = dnew((d), (at), sizeof(*(ptr)) * ((n) ? (n) : 1)))

/* ------------------------------------------------------------- paths */

static const ir_path_t *pk(dec_t *d, const ir_path_t *up, const char *key)
{
  ir_path_t *p = ir_alloc(d->arena, sizeof(*p));

  if (p == NULL) {
    oom(d, up);
    return NULL;
  }
  p->up = up;
  p->key = key;
  return p;
}

static const ir_path_t *pi(dec_t *d, const ir_path_t *up, uint32_t index)
{
  ir_path_t *p = ir_alloc(d->arena, sizeof(*p));

  if (p == NULL) {
    oom(d, up);
    return NULL;
  }
  p->up = up;
  p->index = index;
  return p;
}

/* ------------------------------------------------------- the reader */

static int need(dec_t *d, const ir_path_t *at, size_t n)
{
  if ((size_t)(d->end - d->p) < n)
    return fail(d, at, "truncated: the document ends inside a value");
  return 0;
}

static uint64_t be(const uint8_t *p, int n)
{
  uint64_t v = 0;

  for (int i = 0; i < n; i++)
    v = (v << 8) | p[i];
  return v;
}

/* Read the next value's header (and a scalar's or string's payload). A
 * container is entered: the caller reads its elements, then leave(). */
static int rd(dec_t *d, const ir_path_t *at, val_t *v)
{
  uint8_t c;
  int lenbytes = 0;

  if (d->failed)
    return HIPD_EIR;
  memset(v, 0, sizeof(*v));
  if (need(d, at, 1) != 0)
    return HIPD_EIR;
  if (++d->values > d->lim.max_values)
    return fail(d, at, "more than %llu values in the document",
                (unsigned long long)d->lim.max_values);
  c = *d->p++;
  if (c <= 0x7f) {
    v->t = V_UINT;
    v->u = c;
    return 0;
  }
  if (c >= 0xe0) {
    v->t = V_INT;
    v->i = (int8_t)c;
    return 0;
  }
  if ((c & 0xf0) == 0x80 || (c & 0xf0) == 0x90) {
    v->t = (c & 0xf0) == 0x80 ? V_MAP : V_ARRAY;
    v->n = c & 0x0f;
    goto container;
  }
  if ((c & 0xe0) == 0xa0) {
    v->t = V_STR;
    v->n = c & 0x1f;
    goto payload;
  }
  switch (c) {
  case 0xc0:
    v->t = V_NIL;
    return 0;
  case 0xc2:
  case 0xc3:
    v->t = V_BOOL;
    v->b = c == 0xc3;
    return 0;
  case 0xc4:
  case 0xc5:
  case 0xc6:
    v->t = V_BIN;
    lenbytes = 1 << (c - 0xc4);
    break;
  case 0xd9:
  case 0xda:
  case 0xdb:
    v->t = V_STR;
    lenbytes = 1 << (c - 0xd9);
    break;
  case 0xc7:
  case 0xc8:
  case 0xc9:
    v->t = V_EXT;
    lenbytes = 1 << (c - 0xc7);
    if (need(d, at, (size_t)lenbytes + 1) != 0)
      return HIPD_EIR;
    v->n = (uint32_t)be(d->p, lenbytes);
    d->p += lenbytes + 1; /* the type byte */
    goto payload;
  case 0xd4:
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8:
    v->t = V_EXT;
    v->n = 1u << (c - 0xd4);
    if (need(d, at, 1) != 0)
      return HIPD_EIR;
    d->p++;
    goto payload;
  case 0xca: {
    uint32_t b;
    float f;
    if (need(d, at, 4) != 0)
      return HIPD_EIR;
    b = (uint32_t)be(d->p, 4);
    memcpy(&f, &b, 4);
    d->p += 4;
    v->t = V_FLOAT;
    v->f = f;
    return 0;
  }
  case 0xcb: {
    uint64_t b;
    if (need(d, at, 8) != 0)
      return HIPD_EIR;
    b = be(d->p, 8);
    memcpy(&v->f, &b, 8);
    d->p += 8;
    v->t = V_FLOAT;
    return 0;
  }
  case 0xcc:
  case 0xcd:
  case 0xce:
  case 0xcf: {
    int n = 1 << (c - 0xcc);
    if (need(d, at, (size_t)n) != 0)
      return HIPD_EIR;
    v->t = V_UINT;
    v->u = be(d->p, n);
    d->p += n;
    return 0;
  }
  case 0xd0:
  case 0xd1:
  case 0xd2:
  case 0xd3: {
    int n = 1 << (c - 0xd0);
    uint64_t u;
    if (need(d, at, (size_t)n) != 0)
      return HIPD_EIR;
    u = be(d->p, n);
    d->p += n;
    /* sign-extend from n bytes */
    if (n < 8 && (u >> (8 * n - 1)) & 1)
      u |= ~0ull << (8 * n);
    if ((int64_t)u >= 0) {
      v->t = V_UINT;
      v->u = u;
    } else {
      v->t = V_INT;
      v->i = (int64_t)u;
    }
    return 0;
  }
  case 0xdc:
  case 0xdd:
    v->t = V_ARRAY;
    lenbytes = c == 0xdc ? 2 : 4;
    if (need(d, at, (size_t)lenbytes) != 0)
      return HIPD_EIR;
    v->n = (uint32_t)be(d->p, lenbytes);
    d->p += lenbytes;
    goto container;
  case 0xde:
  case 0xdf:
    v->t = V_MAP;
    lenbytes = c == 0xde ? 2 : 4;
    if (need(d, at, (size_t)lenbytes) != 0)
      return HIPD_EIR;
    v->n = (uint32_t)be(d->p, lenbytes);
    d->p += lenbytes;
    goto container;
  default:
    return fail(d, at, "not msgpack: byte 0x%02x starts no value", c);
  }
  /* bin and str with an explicit length */
  if (need(d, at, (size_t)lenbytes) != 0)
    return HIPD_EIR;
  v->n = (uint32_t)be(d->p, lenbytes);
  d->p += lenbytes;
payload:
  if (need(d, at, v->n) != 0)
    return HIPD_EIR;
  v->s = (const char *)d->p;
  d->p += v->n;
  return 0;
container:
  if (v->t == V_ARRAY && v->n > d->lim.max_array)
    return fail(d, at, "an array of %u elements (at most %u)", v->n,
                d->lim.max_array);
  if (v->t == V_MAP && v->n > d->lim.max_map)
    return fail(d, at, "a map of %u pairs (at most %u)", v->n, d->lim.max_map);
  /* Every element takes at least one byte: a count beyond what is left
   * is a truncated document, found before anything is allocated for it. */
  if ((uint64_t)v->n * (v->t == V_MAP ? 2 : 1) > (uint64_t)(d->end - d->p))
    return fail(d, at, "truncated: the document ends inside a value");
  if (++d->depth > d->lim.max_depth)
    return fail(d, at, "nesting deeper than %u", d->lim.max_depth);
  return 0;
}

static void leave(dec_t *d)
{
  d->depth--;
}

/* Read and drop one whole value (checking it as any other). */
static int skip(dec_t *d, const ir_path_t *at)
{
  val_t v;
  int rc = rd(d, at, &v);

  if (rc != 0)
    return rc;
  if (v.t == V_ARRAY || v.t == V_MAP) {
    uint64_t n = (uint64_t)v.n * (v.t == V_MAP ? 2 : 1);
    for (uint64_t i = 0; i < n; i++)
      if ((rc = skip(d, at)) != 0)
        return rc;
    leave(d);
  }
  return 0;
}

static int is_nil_next(dec_t *d)
{
  return d->p < d->end && *d->p == 0xc0;
}

/* Consume a nil if one is next. @return 1 if it did. */
static int take_nil(dec_t *d)
{
  if (!is_nil_next(d))
    return 0;
  d->p++;
  d->values++;
  return 1;
}

/* --------------------------------------------------------- scalars */

static int utf8_valid(const char *s, size_t n)
{
  const unsigned char *p = (const unsigned char *)s, *e = p + n;

  while (p < e) {
    unsigned c = *p++;
    int more;
    unsigned min, cp;
    if (c == 0)
      return 0;
    if (c < 0x80)
      continue;
    if ((c & 0xe0) == 0xc0) {
      more = 1;
      cp = c & 0x1f;
      min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      more = 2;
      cp = c & 0x0f;
      min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      more = 3;
      cp = c & 0x07;
      min = 0x10000;
    } else {
      return 0;
    }
    if (e - p < more)
      return 0;
    while (more-- > 0) {
      if ((*p & 0xc0) != 0x80)
        return 0;
      cp = (cp << 6) | (*p++ & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
  }
  return 1;
}

enum { NAME_WORD, NAME_IDENT, NAME_TNAME, NAME_KEY };

static int word_ok(const char *s, size_t n)
{
  return n <= 255 && cg_word_ok(s, n);
}

/* Why @p s (a valid word) is not an ident, or NULL. */
static const char *ident_problem(const char *s)
{
  if (ir_is_keyword(s))
    return "is a C++ keyword";
  if (strncmp(s, "__", 2) == 0)
    return "begins with '__', which C++ reserves";
  if (strncmp(s, "sarek_", 6) == 0 || strncmp(s, "hipd_", 5) == 0)
    return "begins with a prefix reserved for generated names ('sarek_', "
           "'hipd_')";
  return NULL;
}

static const char *name_kind(int kind)
{
  static const char *const k[] = {"word", "identifier", "type name", "key"};
  return k[kind];
}

/* A str that is a name of @p kind, copied into the arena. */
static int read_name(dec_t *d, const ir_path_t *at, int kind, const char **out)
{
  val_t v;
  char q[300], *s;
  const char *why;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return fail(d, at, "expected a %s (a string), got %s", name_kind(kind),
                vnames[v.t]);
  if (kind == NAME_TNAME) {
    /* idents joined by '.' */
    size_t start = 0;
    if (v.n == 0 || v.n > 255)
      return fail(d, at, "a type name has 1 to 255 bytes, not %u", v.n);
    for (size_t i = 0; i <= v.n; i++) {
      if (i < v.n && v.s[i] != '.')
        continue;
      if (!word_ok(v.s + start, i - start))
        return fail(d, at,
                    "'%s' is not a type name (identifiers joined by '.')",
                    ir_quote(q, sizeof(q), v.s, v.n));
      s = ir_strndup(d->arena, v.s + start, i - start);
      if (s == NULL)
        return oom(d, at);
      if ((why = ident_problem(s)) != NULL)
        return fail(d, at, "'%s' in type name '%s' %s", s,
                    ir_quote(q, sizeof(q), v.s, v.n), why);
      start = i + 1;
    }
  } else if (!word_ok(v.s, v.n)) {
    return fail(d, at,
                "'%s' is not a%s %s ([A-Za-z_][A-Za-z0-9_]*, 1 to 255 "
                "bytes)",
                ir_quote(q, sizeof(q), v.s, v.n), kind == NAME_IDENT ? "n" : "",
                name_kind(kind));
  }
  if ((s = ir_strndup(d->arena, v.s, v.n)) == NULL)
    return oom(d, at);
  if (kind == NAME_IDENT && (why = ident_problem(s)) != NULL)
    return fail(d, at, "'%s' %s", s, why);
  *out = s;
  return 0;
}

/* A str of at most @p max bytes (valid UTF-8, no NUL), copied. */
static int read_text(dec_t *d, const ir_path_t *at, size_t max,
                     const char **out, size_t *len)
{
  val_t v;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return fail(d, at, "expected a string, got %s", vnames[v.t]);
  if (v.n > max)
    return fail(d, at, "a string of %u bytes (at most %zu here)", v.n, max);
  if (!utf8_valid(v.s, v.n))
    return fail(d, at, "the string is not valid UTF-8 or contains a NUL");
  if ((*out = ir_strndup(d->arena, v.s, v.n)) == NULL)
    return oom(d, at);
  if (len != NULL)
    *len = v.n;
  return 0;
}

static int read_uint(dec_t *d, const ir_path_t *at, uint64_t *out)
{
  val_t v;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_UINT || v.u > INT64_MAX)
    return fail(d, at, "expected an unsigned integer below 2^63, got %s",
                v.t == V_UINT ? "a larger one" : vnames[v.t]);
  *out = v.u;
  return 0;
}

static int read_bool(dec_t *d, const ir_path_t *at, int *out)
{
  val_t v;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_BOOL)
    return fail(d, at, "expected true or false, got %s", vnames[v.t]);
  *out = v.b;
  return 0;
}

/* A bare string of enumeration @p ts. */
static int read_enum(dec_t *d, const ir_path_t *at, ir_tagset_id_t ts,
                     unsigned *out)
{
  const ir_tagset_t *set = &ir_tagsets[ts];
  val_t v;
  char q[300];

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return fail(d, at, "expected a %s (a string), got %s", set->type,
                vnames[v.t]);
  for (unsigned i = 0; i < set->n; i++)
    if (strlen(set->tags[i]) == v.n && memcmp(set->tags[i], v.s, v.n) == 0) {
      *out = i;
      d->doc->stats.tags[ts][i]++;
      return 0;
    }
  return fail(d, at, "unknown %s '%s'", set->type,
              ir_quote(q, sizeof(q), v.s, v.n));
}

/* --------------------------------------------------------- containers */

static int open_array(dec_t *d, const ir_path_t *at, const char *what,
                      uint32_t *n)
{
  val_t v;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_ARRAY)
    return fail(d, at, "expected %s (an array), got %s", what, vnames[v.t]);
  *n = v.n;
  return 0;
}

static int open_map(dec_t *d, const ir_path_t *at, const char *what,
                    uint32_t *n)
{
  val_t v;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_MAP)
    return fail(d, at, "expected %s (a map), got %s", what, vnames[v.t]);
  *n = v.n;
  return 0;
}

/* A pair [a, b] of a list. */
static int open_pair(dec_t *d, const ir_path_t *at, const char *what)
{
  uint32_t n = 0;

  if (open_array(d, at, what, &n) != 0)
    return HIPD_EIR;
  if (n != 2)
    return fail(d, at, "expected %s: a pair of 2 elements, got %u", what, n);
  return 0;
}

/* A node of type @p ts: [tag, fields...] with the tag's arity. */
static int node_open(dec_t *d, const ir_path_t *at, ir_tagset_id_t ts,
                     unsigned *tag)
{
  const ir_tagset_t *set = &ir_tagsets[ts];
  val_t v;
  char q[300];
  const char *article = strchr("aeiou", set->type[0]) ? "an" : "a";

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_ARRAY)
    return fail(d, at, "expected %s %s node (an array), got %s", article,
                set->type, vnames[v.t]);
  if (v.n == 0)
    return fail(d, at, "expected %s %s node, got an empty array", article,
                set->type);
  uint32_t n = v.n;
  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return fail(d, at, "a %s node begins with its tag (a string), not %s",
                set->type, vnames[v.t]);
  for (unsigned i = 0; i < set->n; i++)
    if (strlen(set->tags[i]) == v.n && memcmp(set->tags[i], v.s, v.n) == 0) {
      if (n - 1 != (uint32_t)set->arity[i])
        return fail(d, at, "'%s' takes %d field%s, got %u", set->tags[i],
                    set->arity[i], set->arity[i] == 1 ? "" : "s", n - 1);
      *tag = i;
      d->doc->stats.tags[ts][i]++;
      return 0;
    }
  return fail(d, at, "unknown %s tag '%s'", set->type,
              ir_quote(q, sizeof(q), v.s, v.n));
}

/*
 * The next key of a map of the IR among @p keys (n of them): its index, or
 * -1 for an annotation ('_' key, whose value is skipped). Unknown and
 * repeated keys are errors. @p seen tracks the keys read.
 */
static int map_key(dec_t *d, const ir_path_t *at, const char *const *keys,
                   unsigned n, uint32_t *seen, int *which)
{
  val_t v;
  char q[300];

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return fail(d, at, "map keys are strings, not %s", vnames[v.t]);
  if (v.n > 0 && v.s[0] == '_') {
    *which = -1;
    return skip(d, at);
  }
  for (unsigned i = 0; i < n; i++)
    if (strlen(keys[i]) == v.n && memcmp(keys[i], v.s, v.n) == 0) {
      if (*seen & (1u << i))
        return fail(d, at, "duplicate key '%s'", keys[i]);
      *seen |= 1u << i;
      *which = (int)i;
      return 0;
    }
  return fail(d, at, "unknown key '%s'", ir_quote(q, sizeof(q), v.s, v.n));
}

/* Every key of @p required (a mask over @p keys) must have been seen. */
static int map_required(dec_t *d, const ir_path_t *at, const char *const *keys,
                        unsigned n, uint32_t required, uint32_t seen)
{
  for (unsigned i = 0; i < n; i++)
    if ((required & (1u << i)) && !(seen & (1u << i)))
      return fail(d, at, "missing key '%s'", keys[i]);
  return 0;
}

/* ------------------------------------------------------------- types */

static int add_named(dec_t *d, ir_type_t *t)
{
  if (d->nnamed == d->capnamed) {
    size_t cap = d->capnamed ? d->capnamed * 2 : 64;
    ir_type_t **p = realloc(d->named, cap * sizeof(*p));
    if (p == NULL)
      return oom(d, t->path);
    d->named = p;
    d->capnamed = cap;
  }
  d->named[d->nnamed++] = t;
  return 0;
}

static int parse_type(dec_t *d, const ir_path_t *at, ir_type_t **out)
{
  unsigned tag;
  ir_type_t *t;
  const ir_path_t *p;

  if (node_open(d, at, IR_TS_ELTTYPE, &tag) != 0 || NEW(d, at, t) == NULL)
    return HIPD_EIR;
  t->kind = (ir_tkind_t)tag;
  t->path = at;
  switch (t->kind) {
  case IR_T_RECORD:
  case IR_T_VARIANT:
    if (read_name(d, pk(d, at, "name"), NAME_TNAME, &t->name) != 0 ||
        add_named(d, t) != 0)
      return HIPD_EIR;
    break;
  case IR_T_ARRAY:
    p = pk(d, at, "elt");
    if (parse_type(d, p, &t->elt) != 0 ||
        read_enum(d, pk(d, at, "mem"), IR_TS_MEMSPACE, &tag) != 0)
      return HIPD_EIR;
    t->mem = (ir_mem_t)tag;
    if (t->elt->kind == IR_T_UNIT || t->elt->kind >= IR_T_ARRAY)
      return fail(d, p, "an array's elements cannot be of type %s",
                  ir_tagsets[IR_TS_ELTTYPE].tags[t->elt->kind]);
    break;
  case IR_T_VEC:
    p = pk(d, at, "elt");
    if (parse_type(d, p, &t->elt) != 0)
      return HIPD_EIR;
    if (t->elt->kind == IR_T_UNIT || t->elt->kind >= IR_T_ARRAY)
      return fail(d, p, "a vec's elements cannot be of type %s",
                  ir_tagsets[IR_TS_ELTTYPE].tags[t->elt->kind]);
    break;
  default:
    break;
  }
  leave(d);
  *out = t;
  return 0;
}

/* -------------------------------------------------------------- vars */

static int parse_var(dec_t *d, const ir_path_t *at, ir_var_t **out)
{
  static const char *const keys[] = {"name", "id", "type", "mutable"};
  uint32_t n, seen = 0;
  ir_var_t *v;
  const ir_path_t *tp = NULL;
  int which;

  if (open_map(d, at, "a var", &n) != 0 || NEW(d, at, v) == NULL)
    return HIPD_EIR;
  v->path = at;
  for (uint32_t i = 0; i < n; i++) {
    if (map_key(d, at, keys, 4, &seen, &which) != 0)
      return HIPD_EIR;
    switch (which) {
    case 0:
      if (read_name(d, pk(d, at, "name"), NAME_IDENT, &v->name) != 0)
        return HIPD_EIR;
      break;
    case 1:
      if (read_uint(d, pk(d, at, "id"), &v->id) != 0)
        return HIPD_EIR;
      break;
    case 2:
      tp = pk(d, at, "type");
      if (parse_type(d, tp, &v->type) != 0)
        return HIPD_EIR;
      break;
    case 3:
      if (read_bool(d, pk(d, at, "mutable"), &v->is_mutable) != 0)
        return HIPD_EIR;
      break;
    }
  }
  leave(d);
  if (map_required(d, at, keys, 4, 7, seen) != 0)
    return HIPD_EIR;
  if (v->type->kind == IR_T_UNIT)
    return fail(d, tp, "a variable cannot be of type unit");
  *out = v;
  return 0;
}

/* A pattern binder: nil, or {"name", "id"}. */
static int parse_binder(dec_t *d, const ir_path_t *at, ir_var_t **out)
{
  static const char *const keys[] = {"name", "id"};
  uint32_t n, seen = 0;
  ir_var_t *v;
  int which;

  *out = NULL;
  if (take_nil(d))
    return 0;
  if (open_map(d, at, "a binder (nil or {name, id})", &n) != 0 ||
      NEW(d, at, v) == NULL)
    return HIPD_EIR;
  v->path = at;
  v->vkind = IR_VK_BINDER;
  for (uint32_t i = 0; i < n; i++) {
    if (map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0 && read_name(d, pk(d, at, "name"), NAME_IDENT, &v->name))
      return HIPD_EIR;
    if (which == 1 && read_uint(d, pk(d, at, "id"), &v->id) != 0)
      return HIPD_EIR;
  }
  leave(d);
  if (map_required(d, at, keys, 2, 3, seen) != 0)
    return HIPD_EIR;
  *out = v;
  return 0;
}

/* ----------------------------------------------------------- constants */

static int float_payload(dec_t *d, const ir_path_t *at, const char *tag,
                         double *out)
{
  val_t v;

  if (rd(d, at, &v) != 0)
    return HIPD_EIR;
  switch (v.t) {
  case V_FLOAT:
    *out = v.f;
    return 0;
  case V_UINT:
    if (v.u > (1ull << 53))
      return fail(d, at,
                  "%s constant %llu is an integer beyond 2^53: send it "
                  "as a float",
                  tag, (unsigned long long)v.u);
    *out = (double)v.u;
    return 0;
  case V_INT:
    if (v.i < -(1ll << 53))
      return fail(d, at,
                  "%s constant %lld is an integer beyond -2^53: send "
                  "it as a float",
                  tag, (long long)v.i);
    *out = (double)v.i;
    return 0;
  case V_STR:
    if (v.n == 3 && memcmp(v.s, "nan", 3) == 0)
      *out = NAN;
    else if (v.n == 3 && memcmp(v.s, "inf", 3) == 0)
      *out = INFINITY;
    else if (v.n == 4 && memcmp(v.s, "-inf", 4) == 0)
      *out = -INFINITY;
    else
      return fail(d, at,
                  "a %s constant given as a string must be \"nan\", "
                  "\"inf\" or \"-inf\"",
                  tag);
    return 0;
  default:
    return fail(d, at, "expected a number for a %s constant, got %s", tag,
                vnames[v.t]);
  }
}

static int parse_const(dec_t *d, const ir_path_t *at, ir_const_t *c)
{
  unsigned tag;
  const ir_path_t *p;
  val_t v;

  if (node_open(d, at, IR_TS_CONST, &tag) != 0)
    return HIPD_EIR;
  c->kind = (ir_ckind_t)tag;
  p = pk(d, at, "value");
  switch (c->kind) {
  case IR_C_I32:
    if (rd(d, p, &v) != 0)
      return HIPD_EIR;
    if (v.t == V_UINT && v.u <= INT32_MAX)
      c->i = (int64_t)v.u;
    else if (v.t == V_INT && v.i >= INT32_MIN)
      c->i = v.i;
    else if (v.t == V_UINT)
      return fail(d, p, "i32 constant %llu out of range",
                  (unsigned long long)v.u);
    else if (v.t == V_INT)
      return fail(d, p, "i32 constant %lld out of range", (long long)v.i);
    else
      return fail(d, p, "expected an integer for an i32 constant, got %s",
                  vnames[v.t]);
    break;
  case IR_C_I64:
    if (rd(d, p, &v) != 0)
      return HIPD_EIR;
    if (v.t == V_UINT && v.u <= INT64_MAX) {
      c->i = (int64_t)v.u;
    } else if (v.t == V_INT) {
      c->i = v.i;
    } else if (v.t == V_UINT) {
      return fail(d, p, "i64 constant %llu out of range",
                  (unsigned long long)v.u);
    } else if (v.t == V_STR) {
      /* the JSON form of a large value: decimal digits, optional '-' */
      char buf[32], q[300], *e;
      long long x;
      size_t k = v.n > 0 && v.s[0] == '-' ? 1 : 0;
      int ok = v.n > k && v.n < sizeof(buf);
      for (size_t j = k; ok && j < v.n; j++)
        ok = v.s[j] >= '0' && v.s[j] <= '9';
      if (ok) {
        memcpy(buf, v.s, v.n);
        buf[v.n] = '\0';
        errno = 0;
        x = strtoll(buf, &e, 10);
        ok = errno == 0 && *e == '\0';
      }
      if (!ok)
        return fail(d, p,
                    "'%s' is not an i64 constant (decimal digits, an "
                    "optional '-', within 64 bits)",
                    ir_quote(q, sizeof(q), v.s, v.n));
      c->i = x;
    } else {
      return fail(d, p, "expected an integer for an i64 constant, got %s",
                  vnames[v.t]);
    }
    break;
  case IR_C_F32:
  case IR_C_F64:
    if (float_payload(d, p, c->kind == IR_C_F32 ? "f32" : "f64", &c->f) != 0)
      return HIPD_EIR;
    break;
  case IR_C_BOOL:
    if (read_bool(d, p, &c->b) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  leave(d);
  return 0;
}

/* ---------------------------------------------------------- expressions */

/* Where an expression stands: what it may be. */
enum { CTX_INIT = 1 /* let/letmut initializer */, CTX_RETURN = 2 };

static int parse_expr(dec_t *d, const ir_path_t *at, int ctx, ir_expr_t **out);
static int parse_stmt(dec_t *d, const ir_path_t *at, ir_stmt_t **out);

/* Remove the arguments that are the unit constant: OCaml passes () to a
 * function of no argument, and unit has no C value. */
static void drop_units(uint32_t *n, ir_expr_t **items)
{
  uint32_t k = 0;

  for (uint32_t i = 0; i < *n; i++)
    if (!(items[i]->kind == IR_E_CONST && items[i]->u.c.kind == IR_C_UNIT))
      items[k++] = items[i];
  *n = k;
}

/* [expr] at @p at. */
static int parse_exprs(dec_t *d, const ir_path_t *at, uint32_t *n,
                       ir_expr_t ***items)
{
  if (open_array(d, at, "a list of exprs", n) != 0 ||
      NEWN(d, at, *items, *n) == NULL)
    return HIPD_EIR;
  for (uint32_t i = 0; i < *n; i++)
    if (parse_expr(d, pi(d, at, i), 0, &(*items)[i]) != 0)
      return HIPD_EIR;
  leave(d);
  return 0;
}

static int parse_pattern(dec_t *d, const ir_path_t *at, ir_pattern_t **out)
{
  unsigned tag;
  ir_pattern_t *p;
  const ir_path_t *bp;

  if (node_open(d, at, IR_TS_PATTERN, &tag) != 0 || NEW(d, at, p) == NULL)
    return HIPD_EIR;
  p->kind = (ir_pkind_t)tag;
  p->path = at;
  if (p->kind == IR_P_CTOR) {
    if (read_name(d, pk(d, at, "ctor"), NAME_IDENT, &p->ctor) != 0)
      return HIPD_EIR;
    bp = pk(d, at, "binders");
    if (open_array(d, bp, "a list of binders", &p->nbinders) != 0 ||
        NEWN(d, bp, p->binders, p->nbinders) == NULL)
      return HIPD_EIR;
    for (uint32_t i = 0; i < p->nbinders; i++)
      if (parse_binder(d, pi(d, bp, i), &p->binders[i]) != 0)
        return HIPD_EIR;
    leave(d);
  }
  leave(d);
  *out = p;
  return 0;
}

/* The cases [[pat, body]] of a match, bodies exprs or stmts. */
static int parse_cases(dec_t *d, const ir_path_t *at, int stmts, uint32_t *n,
                       void **cases)
{
  ir_ecase_t *ec = NULL;
  ir_scase_t *sc = NULL;

  if (open_array(d, at, "a list of cases", n) != 0)
    return HIPD_EIR;
  if (*n == 0)
    return fail(d, at, "a match has at least one case");
  if (stmts ? NEWN(d, at, sc, *n) == NULL : NEWN(d, at, ec, *n) == NULL)
    return HIPD_EIR;
  for (uint32_t i = 0; i < *n; i++) {
    const ir_path_t *cp = pi(d, at, i);
    ir_pattern_t **pat = stmts ? &sc[i].pat : &ec[i].pat;
    if (open_pair(d, cp, "a case [pat, body]") != 0 ||
        parse_pattern(d, pk(d, cp, "pat"), pat) != 0)
      return HIPD_EIR;
    if (stmts ? parse_stmt(d, pk(d, cp, "body"), &sc[i].body)
              : parse_expr(d, pk(d, cp, "body"), 0, &ec[i].body))
      return HIPD_EIR;
    leave(d);
  }
  leave(d);
  *cases = stmts ? (void *)sc : (void *)ec;
  return 0;
}

static int parse_expr(dec_t *d, const ir_path_t *at, int ctx, ir_expr_t **out)
{
  unsigned tag;
  ir_expr_t *e;
  const ir_path_t *p;
  uint32_t n;

  if (node_open(d, at, IR_TS_EXPR, &tag) != 0 || NEW(d, at, e) == NULL)
    return HIPD_EIR;
  e->kind = (ir_ekind_t)tag;
  e->path = at;
  switch (e->kind) {
  case IR_E_CONST:
    if (parse_const(d, pk(d, at, "c"), &e->u.c) != 0)
      return HIPD_EIR;
    break;
  case IR_E_VAR:
    if (read_uint(d, pk(d, at, "id"), &e->u.var.id) != 0 ||
        read_name(d, pk(d, at, "name"), NAME_IDENT, &e->u.var.name) != 0)
      return HIPD_EIR;
    break;
  case IR_E_BINOP:
    if (read_enum(d, pk(d, at, "op"), IR_TS_BINOP, &tag) != 0 ||
        parse_expr(d, pk(d, at, "lhs"), 0, &e->u.bin.l) != 0 ||
        parse_expr(d, pk(d, at, "rhs"), 0, &e->u.bin.r) != 0)
      return HIPD_EIR;
    e->u.bin.op = (ir_binop_t)tag;
    break;
  case IR_E_UNOP:
    if (read_enum(d, pk(d, at, "op"), IR_TS_UNOP, &tag) != 0 ||
        parse_expr(d, pk(d, at, "arg"), 0, &e->u.un.arg) != 0)
      return HIPD_EIR;
    e->u.un.op = (ir_unop_t)tag;
    break;
  case IR_E_AREAD:
    if (read_name(d, pk(d, at, "array"), NAME_IDENT, &e->u.aread.array) != 0 ||
        parse_expr(d, pk(d, at, "index"), 0, &e->u.aread.index) != 0)
      return HIPD_EIR;
    break;
  case IR_E_AREADX:
    if (parse_expr(d, pk(d, at, "base"), 0, &e->u.areadx.base) != 0 ||
        parse_expr(d, pk(d, at, "index"), 0, &e->u.areadx.index) != 0)
      return HIPD_EIR;
    break;
  case IR_E_FIELD:
    if (parse_expr(d, pk(d, at, "rec"), 0, &e->u.field.rec) != 0 ||
        read_name(d, pk(d, at, "field"), NAME_IDENT, &e->u.field.field) != 0)
      return HIPD_EIR;
    break;
  case IR_E_INTRINSIC:
    p = pk(d, at, "path");
    if (open_array(d, p, "a module path (a list of words)", &n) != 0 ||
        NEWN(d, p, e->u.intr.path, n) == NULL)
      return HIPD_EIR;
    e->u.intr.npath = n;
    for (uint32_t i = 0; i < n; i++)
      if (read_name(d, pi(d, p, i), NAME_WORD, &e->u.intr.path[i]) != 0)
        return HIPD_EIR;
    leave(d);
    if (read_name(d, pk(d, at, "name"), NAME_WORD, &e->u.intr.name) != 0 ||
        parse_exprs(d, pk(d, at, "args"), &e->u.intr.nargs, &e->u.intr.args) !=
            0)
      return HIPD_EIR;
    drop_units(&e->u.intr.nargs, e->u.intr.args);
    break;
  case IR_E_CAST:
    p = pk(d, at, "type");
    if (parse_type(d, p, &e->u.cast.type) != 0)
      return HIPD_EIR;
    if (!ir_type_is_scalar(e->u.cast.type))
      return fail(d, p, "a cast is to i32, i64, f32, f64 or bool, not %s",
                  ir_tagsets[IR_TS_ELTTYPE].tags[e->u.cast.type->kind]);
    if (parse_expr(d, pk(d, at, "arg"), 0, &e->u.cast.arg) != 0)
      return HIPD_EIR;
    break;
  case IR_E_TUPLE:
    if (!(ctx & (CTX_INIT | CTX_RETURN)))
      return fail(d, at,
                  "a tuple is only allowed as the initializer of let "
                  "or letmut, or as a returned value");
    p = pk(d, at, "items");
    if (parse_exprs(d, p, &e->u.tuple.n, &e->u.tuple.items) != 0)
      return HIPD_EIR;
    if (e->u.tuple.n < 2)
      return fail(d, p, "a tuple has at least 2 items, not %u", e->u.tuple.n);
    break;
  case IR_E_APP:
    if (read_name(d, pk(d, at, "fn"), NAME_IDENT, &e->u.app.fn) != 0 ||
        parse_exprs(d, pk(d, at, "args"), &e->u.app.nargs, &e->u.app.args))
      return HIPD_EIR;
    drop_units(&e->u.app.nargs, e->u.app.args);
    break;
  case IR_E_RECORD:
    if (read_name(d, pk(d, at, "type"), NAME_TNAME, &e->u.record.type) != 0)
      return HIPD_EIR;
    p = pk(d, at, "fields");
    if (open_array(d, p, "a list of [field, value]", &n) != 0 ||
        NEWN(d, p, e->u.record.fields, n) == NULL)
      return HIPD_EIR;
    e->u.record.n = n;
    for (uint32_t i = 0; i < n; i++) {
      const ir_path_t *fp = pi(d, p, i);
      ir_field_init_t *f = &e->u.record.fields[i];
      f->path = fp;
      if (open_pair(d, fp, "a field [field, value]") != 0 ||
          read_name(d, pk(d, fp, "field"), NAME_IDENT, &f->field) != 0 ||
          parse_expr(d, pk(d, fp, "value"), 0, &f->value) != 0)
        return HIPD_EIR;
      leave(d);
    }
    leave(d);
    break;
  case IR_E_VARIANT:
    if (read_name(d, pk(d, at, "type"), NAME_TNAME, &e->u.variant.type) ||
        read_name(d, pk(d, at, "ctor"), NAME_IDENT, &e->u.variant.ctor) ||
        parse_exprs(d, pk(d, at, "args"), &e->u.variant.nargs,
                    &e->u.variant.args))
      return HIPD_EIR;
    break;
  case IR_E_ALEN:
    if (read_name(d, pk(d, at, "array"), NAME_IDENT, &e->u.aread.array) != 0)
      return HIPD_EIR;
    break;
  case IR_E_ACREATE:
    if (!(ctx & CTX_INIT))
      return fail(d, at,
                  "acreate is only allowed as the initializer of let "
                  "or letmut");
    p = pk(d, at, "elt");
    if (parse_type(d, p, &e->u.acreate.elt) != 0)
      return HIPD_EIR;
    if (e->u.acreate.elt->kind == IR_T_UNIT ||
        e->u.acreate.elt->kind >= IR_T_ARRAY)
      return fail(d, p, "an array's elements cannot be of type %s",
                  ir_tagsets[IR_TS_ELTTYPE].tags[e->u.acreate.elt->kind]);
    if (parse_expr(d, pk(d, at, "size"), 0, &e->u.acreate.size) != 0)
      return HIPD_EIR;
    p = pk(d, at, "mem");
    if (read_enum(d, p, IR_TS_MEMSPACE, &tag) != 0)
      return HIPD_EIR;
    e->u.acreate.mem = (ir_mem_t)tag;
    if (e->u.acreate.mem == IR_MEM_GLOBAL)
      return fail(d, p,
                  "acreate makes arrays in shared or local memory, not "
                  "global");
    break;
  case IR_E_IF:
    if (parse_expr(d, pk(d, at, "cond"), 0, &e->u.cond.cond) != 0 ||
        parse_expr(d, pk(d, at, "then"), 0, &e->u.cond.then) != 0 ||
        parse_expr(d, pk(d, at, "else"), 0, &e->u.cond.els) != 0)
      return HIPD_EIR;
    break;
  case IR_E_MATCH:
    if (parse_expr(d, pk(d, at, "scrutinee"), 0, &e->u.match.scrut) != 0 ||
        parse_cases(d, pk(d, at, "cases"), 0, &e->u.match.n,
                    (void **)&e->u.match.cases) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  leave(d);
  *out = e;
  return 0;
}

static int parse_lvalue(dec_t *d, const ir_path_t *at, ir_lvalue_t **out)
{
  unsigned tag;
  ir_lvalue_t *l;

  if (node_open(d, at, IR_TS_LVALUE, &tag) != 0 || NEW(d, at, l) == NULL)
    return HIPD_EIR;
  l->kind = (ir_lkind_t)tag;
  l->path = at;
  switch (l->kind) {
  case IR_L_VAR:
    if (read_uint(d, pk(d, at, "id"), &l->u.var.id) != 0 ||
        read_name(d, pk(d, at, "name"), NAME_IDENT, &l->u.var.name) != 0)
      return HIPD_EIR;
    break;
  case IR_L_AELEM:
    if (read_name(d, pk(d, at, "array"), NAME_IDENT, &l->u.aelem.array) ||
        parse_expr(d, pk(d, at, "index"), 0, &l->u.aelem.index) != 0)
      return HIPD_EIR;
    break;
  case IR_L_AELEMX:
    if (parse_expr(d, pk(d, at, "base"), 0, &l->u.aelemx.base) != 0 ||
        parse_expr(d, pk(d, at, "index"), 0, &l->u.aelemx.index) != 0)
      return HIPD_EIR;
    break;
  case IR_L_FIELD:
    if (parse_lvalue(d, pk(d, at, "target"), &l->u.field.target) != 0 ||
        read_name(d, pk(d, at, "field"), NAME_IDENT, &l->u.field.field) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  leave(d);
  *out = l;
  return 0;
}

/* ----------------------------------------------------------- statements */

/* Characters allowed in a pragma hint: enough for `unroll 4`,
 * `clang loop vectorize(enable)`, nothing that could end the line or open
 * a comment. */
static int hint_ok(const char *s, size_t n)
{
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
          (c >= '0' && c <= '9') || strchr("_ ()=,+-.:<>", c) != NULL) ||
        c == '\0')
      return 0;
  }
  return 1;
}

static int parse_native(dec_t *d, const ir_path_t *at, ir_stmt_t *s)
{
  uint32_t n, k = 0;
  val_t v;
  char q[300];

  if (open_map(d, at, "native code ({framework: code})", &n) != 0)
    return HIPD_EIR;
  if (n > 64)
    return fail(d, at, "native code for %u frameworks (at most 64)", n);
  if (NEWN(d, at, s->u.native.keys, n) == NULL ||
      NEWN(d, at, s->u.native.code, n) == NULL ||
      NEWN(d, at, s->u.native.paths, n) == NULL)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    const char *key;
    if (rd(d, at, &v) != 0)
      return HIPD_EIR;
    if (v.t != V_STR)
      return fail(d, at, "map keys are strings, not %s", vnames[v.t]);
    if (v.n > 0 && v.s[0] == '_') {
      if (skip(d, at) != 0)
        return HIPD_EIR;
      continue;
    }
    if (!word_ok(v.s, v.n))
      return fail(d, at, "'%s' is not a framework name (a word)",
                  ir_quote(q, sizeof(q), v.s, v.n));
    for (uint32_t j = 0; j < v.n; j++)
      if (v.s[j] >= 'A' && v.s[j] <= 'Z')
        return fail(d, at, "framework names are lowercase: '%s'",
                    ir_quote(q, sizeof(q), v.s, v.n));
    if ((key = ir_strndup(d->arena, v.s, v.n)) == NULL)
      return oom(d, at);
    for (uint32_t j = 0; j < k; j++)
      if (strcmp(s->u.native.keys[j], key) == 0)
        return fail(d, at, "duplicate key '%s'", key);
    s->u.native.keys[k] = key;
    s->u.native.paths[k] = pk(d, at, key);
    if (read_text(d, s->u.native.paths[k], d->lim.max_native,
                  &s->u.native.code[k], NULL) != 0)
      return HIPD_EIR;
    k++;
  }
  leave(d);
  if (k == 0)
    return fail(d, at,
                "a native block carries code for at least one "
                "framework");
  s->u.native.n = k;
  return 0;
}

static int parse_stmt(dec_t *d, const ir_path_t *at, ir_stmt_t **out)
{
  unsigned tag;
  ir_stmt_t *s;
  const ir_path_t *p;
  uint32_t n;

  if (node_open(d, at, IR_TS_STMT, &tag) != 0 || NEW(d, at, s) == NULL)
    return HIPD_EIR;
  s->kind = (ir_skind_t)tag;
  s->path = at;
  switch (s->kind) {
  case IR_S_ASSIGN:
    if (parse_lvalue(d, pk(d, at, "target"), &s->u.assign.target) != 0 ||
        parse_expr(d, pk(d, at, "value"), 0, &s->u.assign.value) != 0)
      return HIPD_EIR;
    break;
  case IR_S_SEQ:
    /* The statements are indexed directly: kernel.body[3]. */
    if (open_array(d, at, "a list of stmts", &n) != 0 ||
        NEWN(d, at, s->u.seq.items, n) == NULL)
      return HIPD_EIR;
    s->u.seq.n = n;
    for (uint32_t i = 0; i < n; i++)
      if (parse_stmt(d, pi(d, at, i), &s->u.seq.items[i]) != 0)
        return HIPD_EIR;
    leave(d);
    break;
  case IR_S_IF:
    if (parse_expr(d, pk(d, at, "cond"), 0, &s->u.sif.cond) != 0 ||
        parse_stmt(d, pk(d, at, "then"), &s->u.sif.then) != 0)
      return HIPD_EIR;
    if (!take_nil(d) && parse_stmt(d, pk(d, at, "else"), &s->u.sif.els) != 0)
      return HIPD_EIR;
    break;
  case IR_S_WHILE:
    if (parse_expr(d, pk(d, at, "cond"), 0, &s->u.swhile.cond) != 0 ||
        parse_stmt(d, pk(d, at, "body"), &s->u.swhile.body) != 0)
      return HIPD_EIR;
    break;
  case IR_S_FOR:
    if (parse_var(d, pk(d, at, "var"), &s->u.sfor.var) != 0 ||
        parse_expr(d, pk(d, at, "from"), 0, &s->u.sfor.from) != 0 ||
        parse_expr(d, pk(d, at, "to"), 0, &s->u.sfor.to) != 0 ||
        read_enum(d, pk(d, at, "dir"), IR_TS_DIR, &tag) != 0 ||
        parse_stmt(d, pk(d, at, "body"), &s->u.sfor.body) != 0)
      return HIPD_EIR;
    s->u.sfor.dir = (ir_dir_t)tag;
    s->u.sfor.var->vkind = IR_VK_FOR;
    break;
  case IR_S_MATCH:
    if (parse_expr(d, pk(d, at, "scrutinee"), 0, &s->u.match.scrut) != 0 ||
        parse_cases(d, pk(d, at, "cases"), 1, &s->u.match.n,
                    (void **)&s->u.match.cases) != 0)
      return HIPD_EIR;
    break;
  case IR_S_RETURN:
  case IR_S_EXPR:
    if (parse_expr(d, pk(d, at, "value"),
                   s->kind == IR_S_RETURN ? CTX_RETURN : 0,
                   &s->u.ret.value) != 0)
      return HIPD_EIR;
    break;
  case IR_S_LET:
  case IR_S_LETMUT:
    if (parse_var(d, pk(d, at, "var"), &s->u.let.var) != 0 ||
        parse_expr(d, pk(d, at, "init"), CTX_INIT, &s->u.let.init) != 0 ||
        parse_stmt(d, pk(d, at, "body"), &s->u.let.body) != 0)
      return HIPD_EIR;
    s->u.let.var->vkind = IR_VK_LET;
    break;
  case IR_S_PRAGMA:
    p = pk(d, at, "hints");
    if (open_array(d, p, "a list of hints", &n) != 0 ||
        NEWN(d, p, s->u.pragma.hints, n) == NULL)
      return HIPD_EIR;
    if (n == 0)
      return fail(d, p, "a pragma has at least one hint");
    s->u.pragma.n = n;
    for (uint32_t i = 0; i < n; i++) {
      const ir_path_t *hp = pi(d, p, i);
      size_t len;
      if (read_text(d, hp, d->lim.max_hint, &s->u.pragma.hints[i], &len) != 0)
        return HIPD_EIR;
      if (!hint_ok(s->u.pragma.hints[i], len))
        return fail(d, hp,
                    "a pragma hint is made of letters, digits, spaces "
                    "and _()=,+-.:<> only");
    }
    leave(d);
    if (parse_stmt(d, pk(d, at, "body"), &s->u.pragma.body) != 0)
      return HIPD_EIR;
    break;
  case IR_S_BLOCK:
    if (parse_stmt(d, pk(d, at, "body"), &s->u.block.body) != 0)
      return HIPD_EIR;
    break;
  case IR_S_NATIVE:
    if (parse_native(d, pk(d, at, "code"), s) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  leave(d);
  *out = s;
  return 0;
}

/* --------------------------------------------------------- declarations */

enum { IN_PARAMS, IN_LOCALS };

static int parse_arrinfo(dec_t *d, const ir_path_t *at, ir_decl_t *dl)
{
  static const char *const keys[] = {"elt", "mem"};
  uint32_t n, seen = 0;
  unsigned mem;
  int which;

  if (take_nil(d))
    return 0;
  if (open_map(d, at, "an arrinfo (nil or {elt, mem})", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0 && parse_type(d, pk(d, at, "elt"), &dl->elt) != 0)
      return HIPD_EIR;
    if (which == 1) {
      if (read_enum(d, pk(d, at, "mem"), IR_TS_MEMSPACE, &mem) != 0)
        return HIPD_EIR;
      dl->mem = (ir_mem_t)mem;
    }
  }
  leave(d);
  if (map_required(d, at, keys, 2, 3, seen) != 0)
    return HIPD_EIR;
  dl->has_arrinfo = 1;
  return 0;
}

static int parse_decl(dec_t *d, const ir_path_t *at, int where, ir_decl_t **out)
{
  unsigned tag;
  ir_decl_t *dl;
  ir_type_t *arr;
  const ir_path_t *p;

  if (node_open(d, at, IR_TS_DECL, &tag) != 0 || NEW(d, at, dl) == NULL)
    return HIPD_EIR;
  dl->kind = (ir_dkind_t)tag;
  dl->path = at;
  if ((dl->kind == IR_D_PARAM) != (where == IN_PARAMS))
    return fail(d, at, "a '%s' decl is only allowed in kernel.%s",
                ir_tagsets[IR_TS_DECL].tags[tag],
                dl->kind == IR_D_PARAM ? "params" : "locals");
  switch (dl->kind) {
  case IR_D_PARAM:
    if (parse_var(d, pk(d, at, "var"), &dl->var) != 0 ||
        parse_arrinfo(d, pk(d, at, "arrinfo"), dl) != 0)
      return HIPD_EIR;
    dl->var->vkind = IR_VK_PARAM;
    break;
  case IR_D_LOCAL:
    if (parse_var(d, pk(d, at, "var"), &dl->var) != 0)
      return HIPD_EIR;
    dl->var->vkind = IR_VK_LOCAL;
    if (!take_nil(d) && parse_expr(d, pk(d, at, "init"), 0, &dl->init) != 0)
      return HIPD_EIR;
    break;
  case IR_D_SHARED:
    if (NEW(d, at, dl->var) == NULL || NEW(d, at, arr) == NULL)
      return HIPD_EIR;
    if (read_name(d, pk(d, at, "name"), NAME_IDENT, &dl->var->name) != 0)
      return HIPD_EIR;
    p = pk(d, at, "elt");
    if (parse_type(d, p, &dl->elt) != 0)
      return HIPD_EIR;
    if (dl->elt->kind == IR_T_UNIT || dl->elt->kind >= IR_T_ARRAY)
      return fail(d, p, "an array's elements cannot be of type %s",
                  ir_tagsets[IR_TS_ELTTYPE].tags[dl->elt->kind]);
    if (!take_nil(d) && parse_expr(d, pk(d, at, "size"), 0, &dl->size) != 0)
      return HIPD_EIR;
    arr->kind = IR_T_ARRAY;
    arr->elt = dl->elt;
    arr->mem = IR_MEM_SHARED;
    arr->path = at;
    dl->var->type = arr;
    dl->var->vkind = IR_VK_SHARED;
    dl->var->path = at;
    break;
  default:
    break;
  }
  leave(d);
  *out = dl;
  return 0;
}

/* ------------------------------------------------- helpers and types */

static int parse_helper(dec_t *d, const ir_path_t *at, ir_helper_t *h)
{
  static const char *const keys[] = {"name", "params", "ret", "body"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  h->path = at;
  if (open_map(d, at, "a helper", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (map_key(d, at, keys, 4, &seen, &which) != 0)
      return HIPD_EIR;
    switch (which) {
    case 0:
      if (read_name(d, pk(d, at, "name"), NAME_IDENT, &h->name) != 0)
        return HIPD_EIR;
      break;
    case 1:
      p = pk(d, at, "params");
      if (open_array(d, p, "a list of vars", &h->nparams) != 0 ||
          NEWN(d, p, h->params, h->nparams) == NULL)
        return HIPD_EIR;
      for (uint32_t j = 0; j < h->nparams; j++) {
        if (parse_var(d, pi(d, p, j), &h->params[j]) != 0)
          return HIPD_EIR;
        h->params[j]->vkind = IR_VK_HPARAM;
      }
      leave(d);
      break;
    case 2:
      if (parse_type(d, pk(d, at, "ret"), &h->ret) != 0)
        return HIPD_EIR;
      break;
    case 3:
      if (parse_stmt(d, pk(d, at, "body"), &h->body) != 0)
        return HIPD_EIR;
      break;
    }
  }
  leave(d);
  return map_required(d, at, keys, 4, 15, seen);
}

static char *mangle(dec_t *d, const char *name)
{
  char *c = ir_strndup(d->arena, name, strlen(name));

  if (c != NULL)
    for (char *q = c; *q != '\0'; q++)
      if (*q == '.')
        *q = '_';
  return c;
}

static int parse_record_def(dec_t *d, const ir_path_t *at, ir_record_t *r)
{
  static const char *const keys[] = {"name", "fields"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  r->path = at;
  if (open_map(d, at, "a record definition", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0) {
      if (read_name(d, pk(d, at, "name"), NAME_TNAME, &r->name) != 0)
        return HIPD_EIR;
      if ((r->cname = mangle(d, r->name)) == NULL)
        return oom(d, at);
    } else if (which == 1) {
      p = pk(d, at, "fields");
      if (open_array(d, p, "a list of [field, type]", &r->nfields) != 0 ||
          NEWN(d, p, r->fields, r->nfields) == NULL)
        return HIPD_EIR;
      if (r->nfields == 0)
        return fail(d, p, "a record has at least one field");
      for (uint32_t j = 0; j < r->nfields; j++) {
        const ir_path_t *fp = pi(d, p, j);
        r->fields[j].path = fp;
        if (open_pair(d, fp, "a field [field, type]") != 0 ||
            read_name(d, pk(d, fp, "field"), NAME_IDENT, &r->fields[j].name) ||
            parse_type(d, pk(d, fp, "type"), &r->fields[j].type) != 0)
          return HIPD_EIR;
        leave(d);
      }
      leave(d);
    }
  }
  leave(d);
  return map_required(d, at, keys, 2, 3, seen);
}

static int parse_variant_def(dec_t *d, const ir_path_t *at, ir_variant_t *v)
{
  static const char *const keys[] = {"name", "ctors"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  v->path = at;
  if (open_map(d, at, "a variant definition", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0) {
      if (read_name(d, pk(d, at, "name"), NAME_TNAME, &v->name) != 0)
        return HIPD_EIR;
      if ((v->cname = mangle(d, v->name)) == NULL)
        return oom(d, at);
    } else if (which == 1) {
      p = pk(d, at, "ctors");
      if (open_array(d, p, "a list of [ctor, payload]", &v->nctors) != 0 ||
          NEWN(d, p, v->ctors, v->nctors) == NULL)
        return HIPD_EIR;
      if (v->nctors == 0)
        return fail(d, p, "a variant has at least one constructor");
      for (uint32_t j = 0; j < v->nctors; j++) {
        const ir_path_t *cp = pi(d, p, j), *pp;
        ir_ctor_t *c = &v->ctors[j];
        c->path = cp;
        c->index = j;
        c->variant = v;
        if (open_pair(d, cp, "a constructor [ctor, payload]") != 0 ||
            read_name(d, pk(d, cp, "ctor"), NAME_IDENT, &c->name) != 0)
          return HIPD_EIR;
        pp = pk(d, cp, "payload");
        if (open_array(d, pp, "a list of types", &c->npayload) != 0 ||
            NEWN(d, pp, c->payload, c->npayload) == NULL)
          return HIPD_EIR;
        for (uint32_t k = 0; k < c->npayload; k++)
          if (parse_type(d, pi(d, pp, k), &c->payload[k]) != 0)
            return HIPD_EIR;
        leave(d);
        leave(d);
      }
      leave(d);
    }
  }
  leave(d);
  return map_required(d, at, keys, 2, 3, seen);
}

static int parse_kernel(dec_t *d, const ir_path_t *at, ir_kernel_t *k)
{
  static const char *const keys[] = {"name",    "params",   "locals", "body",
                                     "records", "variants", "helpers"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  k->path = at;
  if (open_map(d, at, "the kernel", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t m;
    if (map_key(d, at, keys, 7, &seen, &which) != 0)
      return HIPD_EIR;
    if (which < 0)
      continue;
    p = pk(d, at, keys[which]);
    switch (which) {
    case 0:
      if (read_name(d, p, NAME_IDENT, &k->name) != 0)
        return HIPD_EIR;
      break;
    case 1:
    case 2: {
      ir_decl_t ***list = which == 1 ? &k->params : &k->locals;
      if (open_array(d, p, "a list of decls", &m) != 0 ||
          NEWN(d, p, *list, m) == NULL)
        return HIPD_EIR;
      for (uint32_t j = 0; j < m; j++)
        if (parse_decl(d, pi(d, p, j), which == 1 ? IN_PARAMS : IN_LOCALS,
                       &(*list)[j]) != 0)
          return HIPD_EIR;
      leave(d);
      if (which == 1)
        k->nparams = m;
      else
        k->nlocals = m;
      break;
    }
    case 3:
      if (parse_stmt(d, p, &k->body) != 0)
        return HIPD_EIR;
      break;
    case 4:
    case 5:
    case 6:
      if (open_array(d, p,
                     which == 4   ? "a list of record definitions"
                     : which == 5 ? "a list of variant definitions"
                                  : "a list of helpers",
                     &m) != 0)
        return HIPD_EIR;
      if (m > d->lim.max_defs)
        return fail(d, p, "%u %s (at most %u)", m, keys[which],
                    d->lim.max_defs);
      if (which == 4) {
        k->nrecords = m;
        if (NEWN(d, p, k->records, m) == NULL)
          return HIPD_EIR;
        for (uint32_t j = 0; j < m; j++)
          if (parse_record_def(d, pi(d, p, j), &k->records[j]) != 0)
            return HIPD_EIR;
      } else if (which == 5) {
        k->nvariants = m;
        if (NEWN(d, p, k->variants, m) == NULL)
          return HIPD_EIR;
        for (uint32_t j = 0; j < m; j++)
          if (parse_variant_def(d, pi(d, p, j), &k->variants[j]) != 0)
            return HIPD_EIR;
      } else {
        k->nhelpers = m;
        if (NEWN(d, p, k->helpers, m) == NULL)
          return HIPD_EIR;
        for (uint32_t j = 0; j < m; j++)
          if (parse_helper(d, pi(d, p, j), &k->helpers[j]) != 0)
            return HIPD_EIR;
      }
      leave(d);
      break;
    }
  }
  leave(d);
  return map_required(d, at, keys, 7, 0x0b, seen);
}

/* ------------------------------------------------------ phase 2: tables */

/* Claim C name @p name for the thing at @p at. */
static int claim(dec_t *d, const char *name, const ir_path_t *at)
{
  void **slot = strmap_slot(&d->cnames, name);
  char first[IR_PATH_MAX];

  if (slot == NULL)
    return oom(d, at);
  if (*slot != NULL)
    return fail(d, at, "C name '%s' is used twice (first at %s)", name,
                ir_path_format(*slot, first, sizeof(first)));
  *slot = (void *)at;
  return 0;
}

/* A field or payload type: a scalar, a record or a variant. */
static int check_member_type(dec_t *d, const ir_type_t *t)
{
  if (t->kind == IR_T_UNIT || t->kind >= IR_T_ARRAY)
    return fail(d, t->path,
                "record fields and constructor payloads are scalars, records "
                "or variants, not %s",
                ir_tagsets[IR_TS_ELTTYPE].tags[t->kind]);
  return 0;
}

static int visit_variant(dec_t *d, ir_variant_t *v);

/* Depth-first walk over by-value containment: a type met again while it
 * is being walked contains itself. */
static int visit_member(dec_t *d, const ir_type_t *t, const char *owner)
{
  int *mark = t->kind == IR_T_RECORD    ? &t->rec->mark
              : t->kind == IR_T_VARIANT ? &t->variant->mark
                                        : NULL;

  if (mark == NULL || *mark == 2)
    return 0;
  if (*mark == 1)
    return fail(d, t->path, "type '%s' contains itself by value (through '%s')",
                t->name, owner);
  if (t->kind == IR_T_VARIANT)
    return visit_variant(d, t->variant);
  *mark = 1;
  for (uint32_t i = 0; i < t->rec->nfields; i++)
    if (visit_member(d, t->rec->fields[i].type, t->rec->name) != 0)
      return HIPD_EIR;
  *mark = 2;
  return 0;
}

static int visit_variant(dec_t *d, ir_variant_t *v)
{
  if (v->mark == 2)
    return 0;
  v->mark = 1;
  for (uint32_t i = 0; i < v->nctors; i++)
    for (uint32_t j = 0; j < v->ctors[i].npayload; j++)
      if (visit_member(d, v->ctors[i].payload[j], v->name) != 0)
        return HIPD_EIR;
  v->mark = 2;
  return 0;
}

static int check_tables(dec_t *d)
{
  ir_kernel_t *k = d->doc->kernel;
  char first[IR_PATH_MAX];
  void **slot;

  if (claim(d, k->name, pk(d, k->path, "name")) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < k->nrecords; i++) {
    ir_record_t *r = &k->records[i];
    if ((slot = strmap_slot(&d->records, r->name)) == NULL)
      return oom(d, r->path);
    if (*slot != NULL || strmap_get(&d->variants, r->name) != NULL)
      return fail(d, pk(d, r->path, "name"), "type '%s' is defined twice",
                  r->name);
    *slot = r;
    if (claim(d, r->cname, pk(d, r->path, "name")) != 0)
      return HIPD_EIR;
    for (uint32_t j = 0; j < r->nfields; j++) {
      for (uint32_t m = 0; m < j; m++)
        if (strcmp(r->fields[m].name, r->fields[j].name) == 0)
          return fail(d, r->fields[j].path, "field '%s' is defined twice",
                      r->fields[j].name);
      if (check_member_type(d, r->fields[j].type) != 0)
        return HIPD_EIR;
    }
  }
  for (uint32_t i = 0; i < k->nvariants; i++) {
    ir_variant_t *v = &k->variants[i];
    if ((slot = strmap_slot(&d->variants, v->name)) == NULL)
      return oom(d, v->path);
    if (*slot != NULL || strmap_get(&d->records, v->name) != NULL)
      return fail(d, pk(d, v->path, "name"), "type '%s' is defined twice",
                  v->name);
    *slot = v;
    if (claim(d, v->cname, pk(d, v->path, "name")) != 0)
      return HIPD_EIR;
    for (uint32_t j = 0; j < v->nctors; j++) {
      ir_ctor_t *c = &v->ctors[j];
      const ir_path_t *cp = pk(d, c->path, "ctor");
      char *maker;
      if ((slot = strmap_slot(&d->ctors, c->name)) == NULL)
        return oom(d, c->path);
      if (*slot != NULL)
        return fail(
            d, cp,
            "constructor '%s' is defined twice (first at %s): "
            "constructors are C enum constants, unique in a kernel",
            c->name,
            ir_path_format(((ir_ctor_t *)*slot)->path, first, sizeof(first)));
      *slot = c;
      if (claim(d, c->name, cp) != 0)
        return HIPD_EIR;
      maker = dnew(d, cp, strlen(v->cname) + strlen(c->name) + 7);
      if (maker == NULL)
        return HIPD_EIR;
      sprintf(maker, "make_%s_%s", v->cname, c->name);
      c->maker = maker;
      if (claim(d, maker, cp) != 0)
        return HIPD_EIR;
      for (uint32_t m = 0; m < c->npayload; m++)
        if (check_member_type(d, c->payload[m]) != 0)
          return HIPD_EIR;
    }
  }
  for (uint32_t i = 0; i < k->nhelpers; i++) {
    ir_helper_t *h = &k->helpers[i];
    if ((slot = strmap_slot(&d->helpers, h->name)) == NULL)
      return oom(d, h->path);
    if (*slot != NULL)
      return fail(d, pk(d, h->path, "name"), "helper '%s' is defined twice",
                  h->name);
    *slot = h;
    if (claim(d, h->name, pk(d, h->path, "name")) != 0)
      return HIPD_EIR;
  }
  /* Every record and variant reference names a definition of its kind. */
  for (size_t i = 0; i < d->nnamed; i++) {
    ir_type_t *t = d->named[i];
    int rec = t->kind == IR_T_RECORD;
    t->rec = strmap_get(&d->records, t->name);
    t->variant = strmap_get(&d->variants, t->name);
    if (rec && t->rec == NULL)
      return fail(d, t->path,
                  t->variant ? "'%s' is a variant type, not a record"
                             : "unknown record type '%s'",
                  t->name);
    if (!rec && t->variant == NULL)
      return fail(d, t->path,
                  t->rec ? "'%s' is a record type, not a variant"
                         : "unknown variant type '%s'",
                  t->name);
  }
  for (uint32_t i = 0; i < k->nrecords; i++) {
    ir_type_t self = {.kind = IR_T_RECORD,
                      .name = k->records[i].name,
                      .rec = &k->records[i],
                      .path = k->records[i].path};
    if (visit_member(d, &self, k->records[i].name) != 0)
      return HIPD_EIR;
  }
  for (uint32_t i = 0; i < k->nvariants; i++)
    if (visit_variant(d, &k->variants[i]) != 0)
      return HIPD_EIR;
  return 0;
}

/* ---------------------------------------------- phase 3: scopes, names */

static size_t block_mark(dec_t *d)
{
  return d->nstack;
}

static void block_leave(dec_t *d, size_t mark)
{
  while (d->nstack > mark) {
    ir_var_t *v = d->stack[--d->nstack];
    void **slot = strmap_slot(&d->names, v->name); /* exists */
    if (slot != NULL)
      *slot = v->shadowed;
    v->in_scope = 0;
  }
}

static int declare(dec_t *d, ir_var_t *v)
{
  char first[IR_PATH_MAX];
  void **slot;

  if (v->vkind != IR_VK_SHARED) {
    ir_var_t *prev = u64map_get(&d->ids, v->id);
    if (prev != NULL)
      return fail(d, pk(d, v->path, "id"),
                  "id %llu declared twice (first at %s)",
                  (unsigned long long)v->id,
                  ir_path_format(prev->path, first, sizeof(first)));
    if (u64map_put(&d->ids, v->id, v) != 0)
      return oom(d, v->path);
  }
  if ((slot = strmap_slot(&d->names, v->name)) == NULL)
    return oom(d, v->path);
  if (v->vkind == IR_VK_SHARED && *slot != NULL)
    return fail(
        d, pk(d, v->path, "name"),
        "'%s' is already declared in the kernel's top scope (at %s)", v->name,
        ir_path_format(((ir_var_t *)*slot)->path, first, sizeof(first)));
  if (d->nstack == d->capstack) {
    size_t cap = d->capstack ? d->capstack * 2 : 64;
    ir_var_t **s = realloc(d->stack, cap * sizeof(*s));
    if (s == NULL)
      return oom(d, v->path);
    d->stack = s;
    d->capstack = cap;
  }
  v->shadowed = *slot;
  *slot = v;
  v->in_scope = 1;
  d->stack[d->nstack++] = v;
  return 0;
}

/* The declaration a use ["var", id, name] refers to. */
static int resolve_use(dec_t *d, const ir_path_t *at, uint64_t id,
                       const char *name, ir_var_t **out)
{
  ir_var_t *v = u64map_get(&d->ids, id);

  if (v == NULL)
    return fail(d, at, "var %llu ('%s') is not declared in this function",
                (unsigned long long)id, name);
  if (strcmp(v->name, name) != 0)
    return fail(d, at, "var %llu is declared as '%s', not '%s'",
                (unsigned long long)id, v->name, name);
  if (!v->in_scope)
    return fail(d, at, "var %llu ('%s') is not in scope here",
                (unsigned long long)id, name);
  *out = v;
  return 0;
}

/* The array an aread/aelem/alen names, innermost first. */
static int resolve_array(dec_t *d, const ir_path_t *at, const char *name,
                         ir_var_t **out)
{
  ir_var_t *v = strmap_get(&d->names, name);
  char t[160];

  if (v == NULL)
    return fail(d, at, "no array named '%s' in scope", name);
  if (v->type->kind != IR_T_ARRAY && v->type->kind != IR_T_VEC)
    return fail(d, at, "'%s' is not an array (it is of type %s)", name,
                ir_type_describe(v->type, t, sizeof(t)));
  *out = v;
  return 0;
}

static int check_expr(dec_t *d, ir_expr_t *e);
static int check_stmt(dec_t *d, ir_stmt_t *s);

static int check_exprs(dec_t *d, uint32_t n, ir_expr_t **items)
{
  for (uint32_t i = 0; i < n; i++)
    if (check_expr(d, items[i]) != 0)
      return HIPD_EIR;
  return 0;
}

/* The patterns of a match: constructors of one variant, each at most once,
 * a wildcard only last; binders typed from the payloads. An expression
 * match covers every constructor. */
static int check_patterns(dec_t *d, const ir_path_t *at, ir_pattern_t **pats,
                          uint32_t n, int is_expr)
{
  ir_variant_t *variant = NULL;
  const char *first_ctor = NULL;
  const ir_pattern_t **seen = NULL;
  char first[IR_PATH_MAX];
  int rc = 0, wild = 0;

  for (uint32_t i = 0; i < n && rc == 0; i++) {
    ir_pattern_t *p = pats[i];
    ir_ctor_t *c;
    if (p->kind == IR_P_WILD) {
      if (i != n - 1)
        rc = fail(d, p->path, "a wildcard case must be the last case");
      wild = 1;
      continue;
    }
    c = strmap_get(&d->ctors, p->ctor);
    if (c == NULL) {
      rc = fail(d, pk(d, p->path, "ctor"), "unknown constructor '%s'", p->ctor);
      break;
    }
    if (variant == NULL) {
      variant = c->variant;
      first_ctor = c->name;
      seen = calloc(variant->nctors, sizeof(*seen));
      if (seen == NULL) {
        rc = oom(d, p->path);
        break;
      }
    } else if (c->variant != variant) {
      rc = fail(d, pk(d, p->path, "ctor"),
                "'%s' and '%s' belong to different variants ('%s' and '%s')",
                first_ctor, c->name, variant->name, c->variant->name);
      break;
    }
    if (seen[c->index] != NULL) {
      rc = fail(d, pk(d, p->path, "ctor"),
                "constructor '%s' is matched twice (first at %s)", c->name,
                ir_path_format(seen[c->index]->path, first, sizeof(first)));
      break;
    }
    seen[c->index] = p;
    p->def = c;
    if (p->nbinders != 0 && p->nbinders != c->npayload) {
      rc = fail(d, pk(d, p->path, "binders"),
                "'%s' has %u payload%s; the pattern binds %u", c->name,
                c->npayload, c->npayload == 1 ? "" : "s", p->nbinders);
      break;
    }
    for (uint32_t j = 0; j < p->nbinders; j++)
      if (p->binders[j] != NULL) {
        p->binders[j]->type = c->payload[j];
        p->binders[j]->is_mutable = 0;
      }
  }
  if (rc == 0 && is_expr && !wild && variant != NULL)
    for (uint32_t i = 0; i < variant->nctors; i++)
      if (seen[i] == NULL) {
        rc = fail(d, at,
                  "this match expression does not cover constructor '%s' "
                  "(add a case for it or a wildcard)",
                  variant->ctors[i].name);
        break;
      }
  free(seen);
  return rc;
}

/* Declare the binders of @p p (in the case's own block). */
static int declare_binders(dec_t *d, ir_pattern_t *p)
{
  for (uint32_t j = 0; j < p->nbinders; j++)
    if (p->binders[j] != NULL && declare(d, p->binders[j]) != 0)
      return HIPD_EIR;
  return 0;
}

static int check_expr(dec_t *d, ir_expr_t *e)
{
  ir_var_t *v;
  ir_helper_t *h;
  ir_record_t *r;
  ir_variant_t *vt;

  switch (e->kind) {
  case IR_E_VAR:
    return resolve_use(d, e->path, e->u.var.id, e->u.var.name, &e->u.var.decl);
  case IR_E_BINOP:
    if (check_expr(d, e->u.bin.l) != 0)
      return HIPD_EIR;
    return check_expr(d, e->u.bin.r);
  case IR_E_UNOP:
    return check_expr(d, e->u.un.arg);
  case IR_E_AREAD:
    if (resolve_array(d, pk(d, e->path, "array"), e->u.aread.array,
                      &e->u.aread.decl) != 0)
      return HIPD_EIR;
    return check_expr(d, e->u.aread.index);
  case IR_E_AREADX:
    if (check_expr(d, e->u.areadx.base) != 0)
      return HIPD_EIR;
    return check_expr(d, e->u.areadx.index);
  case IR_E_FIELD:
    return check_expr(d, e->u.field.rec);
  case IR_E_INTRINSIC:
    return check_exprs(d, e->u.intr.nargs, e->u.intr.args);
  case IR_E_CAST:
    return check_expr(d, e->u.cast.arg);
  case IR_E_TUPLE:
    return check_exprs(d, e->u.tuple.n, e->u.tuple.items);
  case IR_E_APP:
    h = strmap_get(&d->helpers, e->u.app.fn);
    if (h == NULL)
      return fail(d, pk(d, e->path, "fn"), "no helper named '%s'", e->u.app.fn);
    if (h->nparams != e->u.app.nargs)
      return fail(d, pk(d, e->path, "args"),
                  "helper '%s' takes %u args, got %u", h->name, h->nparams,
                  e->u.app.nargs);
    e->u.app.helper = h;
    return check_exprs(d, e->u.app.nargs, e->u.app.args);
  case IR_E_RECORD: {
    const ir_path_t *tp = pk(d, e->path, "type");
    r = strmap_get(&d->records, e->u.record.type);
    if (r == NULL)
      return fail(d, tp,
                  strmap_get(&d->variants, e->u.record.type)
                      ? "'%s' is a variant type, not a record"
                      : "unknown record type '%s'",
                  e->u.record.type);
    e->u.record.def = r;
    for (uint32_t i = 0; i < e->u.record.n; i++) {
      ir_field_init_t *f = &e->u.record.fields[i];
      uint32_t j;
      for (j = 0; j < r->nfields; j++)
        if (strcmp(r->fields[j].name, f->field) == 0)
          break;
      if (j == r->nfields)
        return fail(d, pk(d, f->path, "field"), "record '%s' has no field '%s'",
                    r->name, f->field);
      for (uint32_t m = 0; m < i; m++)
        if (strcmp(e->u.record.fields[m].field, f->field) == 0)
          return fail(d, pk(d, f->path, "field"), "field '%s' is given twice",
                      f->field);
      if (check_expr(d, f->value) != 0)
        return HIPD_EIR;
    }
    for (uint32_t j = 0; j < r->nfields; j++) {
      uint32_t i;
      for (i = 0; i < e->u.record.n; i++)
        if (strcmp(r->fields[j].name, e->u.record.fields[i].field) == 0)
          break;
      if (i == e->u.record.n)
        return fail(d, pk(d, e->path, "fields"),
                    "field '%s' of record '%s' is missing", r->fields[j].name,
                    r->name);
    }
    return 0;
  }
  case IR_E_VARIANT: {
    ir_ctor_t *c = NULL;
    vt = strmap_get(&d->variants, e->u.variant.type);
    if (vt == NULL)
      return fail(d, pk(d, e->path, "type"),
                  strmap_get(&d->records, e->u.variant.type)
                      ? "'%s' is a record type, not a variant"
                      : "unknown variant type '%s'",
                  e->u.variant.type);
    for (uint32_t i = 0; i < vt->nctors; i++)
      if (strcmp(vt->ctors[i].name, e->u.variant.ctor) == 0)
        c = &vt->ctors[i];
    if (c == NULL)
      return fail(d, pk(d, e->path, "ctor"),
                  "variant '%s' has no constructor '%s'", vt->name,
                  e->u.variant.ctor);
    if (c->npayload != e->u.variant.nargs)
      return fail(d, pk(d, e->path, "args"), "'%s' takes %u arg%s, got %u",
                  c->name, c->npayload, c->npayload == 1 ? "" : "s",
                  e->u.variant.nargs);
    e->u.variant.def = c;
    return check_exprs(d, e->u.variant.nargs, e->u.variant.args);
  }
  case IR_E_ALEN:
    if (resolve_array(d, pk(d, e->path, "array"), e->u.aread.array, &v) != 0)
      return HIPD_EIR;
    if (v->vkind != IR_VK_PARAM || !v->has_length)
      return fail(d, pk(d, e->path, "array"),
                  "'%s' has no length (only kernel params of vec type or "
                  "with arrinfo have one)",
                  v->name);
    e->u.aread.decl = v;
    return 0;
  case IR_E_ACREATE:
    return check_expr(d, e->u.acreate.size);
  case IR_E_IF:
    if (check_expr(d, e->u.cond.cond) != 0 ||
        check_expr(d, e->u.cond.then) != 0)
      return HIPD_EIR;
    return check_expr(d, e->u.cond.els);
  case IR_E_MATCH: {
    ir_pattern_t **pats;
    int rc = 0;
    if (check_expr(d, e->u.match.scrut) != 0)
      return HIPD_EIR;
    pats = malloc(e->u.match.n * sizeof(*pats));
    if (pats == NULL)
      return oom(d, e->path);
    for (uint32_t i = 0; i < e->u.match.n; i++)
      pats[i] = e->u.match.cases[i].pat;
    rc = check_patterns(d, e->path, pats, e->u.match.n, 1);
    free(pats);
    for (uint32_t i = 0; rc == 0 && i < e->u.match.n; i++) {
      size_t mark = block_mark(d);
      rc = declare_binders(d, e->u.match.cases[i].pat);
      if (rc == 0)
        rc = check_expr(d, e->u.match.cases[i].body);
      block_leave(d, mark);
    }
    return rc;
  }
  default:
    return 0;
  }
}

static int check_lvalue(dec_t *d, ir_lvalue_t *l, int whole)
{
  switch (l->kind) {
  case IR_L_VAR:
    if (resolve_use(d, l->path, l->u.var.id, l->u.var.name, &l->u.var.decl))
      return HIPD_EIR;
    if (whole && !l->u.var.decl->is_mutable)
      return fail(d, l->path, "assign to immutable var %llu ('%s')",
                  (unsigned long long)l->u.var.id, l->u.var.name);
    return 0;
  case IR_L_AELEM:
    if (resolve_array(d, pk(d, l->path, "array"), l->u.aelem.array,
                      &l->u.aelem.decl) != 0)
      return HIPD_EIR;
    return check_expr(d, l->u.aelem.index);
  case IR_L_AELEMX:
    if (check_expr(d, l->u.aelemx.base) != 0)
      return HIPD_EIR;
    return check_expr(d, l->u.aelemx.index);
  case IR_L_FIELD:
    /* A field of a record bound by let may be written (OCaml's mutable
     * fields): the var itself need not be mutable. */
    return check_lvalue(d, l->u.field.target, 0);
  default:
    return 0;
  }
}

/* A nested statement in a C block of its own. */
static int check_block(dec_t *d, ir_stmt_t *s)
{
  size_t mark = block_mark(d);
  int rc = check_stmt(d, s);

  block_leave(d, mark);
  return rc;
}

static int is_unit_const(const ir_expr_t *e)
{
  return e->kind == IR_E_CONST && e->u.c.kind == IR_C_UNIT;
}

static int check_stmt(dec_t *d, ir_stmt_t *s)
{
  ir_var_t *v;
  char t[160];

  switch (s->kind) {
  case IR_S_ASSIGN:
    if (check_lvalue(d, s->u.assign.target, 1) != 0)
      return HIPD_EIR;
    return check_expr(d, s->u.assign.value);
  case IR_S_SEQ:
    for (uint32_t i = 0; i < s->u.seq.n; i++)
      if (check_stmt(d, s->u.seq.items[i]) != 0)
        return HIPD_EIR;
    return 0;
  case IR_S_IF:
    if (check_expr(d, s->u.sif.cond) != 0 || check_block(d, s->u.sif.then))
      return HIPD_EIR;
    return s->u.sif.els ? check_block(d, s->u.sif.els) : 0;
  case IR_S_WHILE:
    if (check_expr(d, s->u.swhile.cond) != 0)
      return HIPD_EIR;
    return check_block(d, s->u.swhile.body);
  case IR_S_FOR: {
    size_t mark;
    int rc;
    v = s->u.sfor.var;
    if (v->type->kind != IR_T_I32 && v->type->kind != IR_T_I64)
      return fail(d, pk(d, v->path, "type"),
                  "a for variable is of type i32 or i64, not %s",
                  ir_type_describe(v->type, t, sizeof(t)));
    if (v->is_mutable)
      return fail(d, pk(d, v->path, "mutable"),
                  "a for variable cannot be mutable");
    /* The bounds are evaluated before the variable exists. */
    if (check_expr(d, s->u.sfor.from) != 0 || check_expr(d, s->u.sfor.to))
      return HIPD_EIR;
    mark = block_mark(d);
    rc = declare(d, v);
    if (rc == 0)
      rc = check_stmt(d, s->u.sfor.body);
    block_leave(d, mark);
    return rc;
  }
  case IR_S_MATCH: {
    ir_pattern_t **pats;
    int rc;
    if (check_expr(d, s->u.match.scrut) != 0)
      return HIPD_EIR;
    pats = malloc(s->u.match.n * sizeof(*pats));
    if (pats == NULL)
      return oom(d, s->path);
    for (uint32_t i = 0; i < s->u.match.n; i++)
      pats[i] = s->u.match.cases[i].pat;
    rc = check_patterns(d, s->path, pats, s->u.match.n, 0);
    free(pats);
    for (uint32_t i = 0; rc == 0 && i < s->u.match.n; i++) {
      size_t mark = block_mark(d);
      rc = declare_binders(d, s->u.match.cases[i].pat);
      if (rc == 0)
        rc = check_stmt(d, s->u.match.cases[i].body);
      block_leave(d, mark);
    }
    return rc;
  }
  case IR_S_RETURN: {
    const ir_path_t *vp = pk(d, s->path, "value");
    if (d->ret == NULL || d->ret->kind == IR_T_UNIT) {
      if (!is_unit_const(s->u.ret.value))
        return fail(d, vp,
                    "%s returns nothing: its return value is "
                    "[\"const\", [\"unit\"]]",
                    d->ret == NULL ? "the kernel" : "this helper");
      return 0;
    }
    if (is_unit_const(s->u.ret.value))
      return fail(d, vp, "this helper returns %s, not unit",
                  ir_type_describe(d->ret, t, sizeof(t)));
    return check_expr(d, s->u.ret.value);
  }
  case IR_S_EXPR:
    return check_expr(d, s->u.ret.value);
  case IR_S_LET:
  case IR_S_LETMUT: {
    ir_expr_t *init = s->u.let.init;
    v = s->u.let.var;
    if (s->kind == IR_S_LETMUT && !v->is_mutable)
      return fail(d, pk(d, v->path, "mutable"),
                  "a letmut var is declared mutable: true");
    if (v->type->kind == IR_T_VEC)
      return fail(d, pk(d, v->path, "type"),
                  "vec is the type of kernel and helper parameters only");
    if (init->kind == IR_E_ACREATE) {
      ir_type_t want = {.kind = IR_T_ARRAY,
                        .elt = init->u.acreate.elt,
                        .mem = init->u.acreate.mem};
      char w[160];
      if (!ir_type_equal(v->type, &want))
        return fail(d, pk(d, v->path, "type"),
                    "acreate makes an %s; the var is of type %s",
                    ir_type_describe(&want, w, sizeof(w)),
                    ir_type_describe(v->type, t, sizeof(t)));
    }
    /* The var is not in scope in its own initializer. */
    if (check_expr(d, init) != 0 || declare(d, v) != 0)
      return HIPD_EIR;
    return check_stmt(d, s->u.let.body);
  }
  case IR_S_PRAGMA:
    return check_stmt(d, s->u.pragma.body);
  case IR_S_BLOCK:
    return check_block(d, s->u.block.body);
  default:
    return 0;
  }
}

static void function_begin(dec_t *d, const ir_type_t *ret, int in_kernel)
{
  u64map_clear(&d->ids);
  d->ret = ret;
  d->in_kernel = in_kernel;
}

static int check_kernel(dec_t *d)
{
  ir_kernel_t *k = d->doc->kernel;
  size_t mark;
  char t[160], w[160];
  int rc = 0;

  function_begin(d, NULL, 1);
  mark = block_mark(d);
  for (uint32_t i = 0; i < k->nparams && rc == 0; i++) {
    ir_decl_t *dl = k->params[i];
    ir_var_t *v = dl->var;
    const ir_path_t *tp = pk(d, pk(d, dl->path, "var"), "type");
    const ir_path_t *ap = pk(d, dl->path, "arrinfo");
    switch (v->type->kind) {
    case IR_T_RECORD:
    case IR_T_VARIANT:
      rc = fail(d, tp,
                "kernel param '%s' is a %s passed by value: kernel "
                "arguments are scalars and pointers (pass it in a vec)",
                v->name, ir_type_describe(v->type, t, sizeof(t)));
      break;
    case IR_T_VEC:
      if (dl->has_arrinfo &&
          (!ir_type_equal(dl->elt, v->type->elt) || dl->mem != IR_MEM_GLOBAL))
        rc = fail(d, ap,
                  "the arrinfo of a vec of %s says %s in %s memory (nil, or "
                  "its element type in global memory)",
                  ir_type_describe(v->type->elt, t, sizeof(t)),
                  ir_type_describe(dl->elt, w, sizeof(w)),
                  ir_tagsets[IR_TS_MEMSPACE].tags[dl->mem]);
      v->has_length = 1;
      break;
    case IR_T_ARRAY:
      if (v->type->mem != IR_MEM_GLOBAL)
        rc = fail(d, tp, "a kernel param points to global memory, not %s",
                  ir_tagsets[IR_TS_MEMSPACE].tags[v->type->mem]);
      else if (dl->has_arrinfo && (!ir_type_equal(dl->elt, v->type->elt) ||
                                   dl->mem != v->type->mem))
        rc = fail(d, ap, "the arrinfo does not match the param's type %s",
                  ir_type_describe(v->type, t, sizeof(t)));
      v->has_length = dl->has_arrinfo;
      break;
    default:
      if (dl->has_arrinfo)
        rc = fail(d, ap, "an arrinfo on a param of type %s (arrays only)",
                  ir_type_describe(v->type, t, sizeof(t)));
    }
    if (rc == 0)
      rc = declare(d, v);
  }
  for (uint32_t i = 0; i < k->nlocals && rc == 0; i++) {
    ir_decl_t *dl = k->locals[i];
    if (dl->kind == IR_D_LOCAL) {
      if (dl->var->type->kind == IR_T_VEC)
        rc = fail(d, pk(d, pk(d, dl->path, "var"), "type"),
                  "vec is the type of kernel and helper parameters only");
      if (rc == 0 && dl->init != NULL)
        rc = check_expr(d, dl->init);
    } else if (dl->size != NULL) {
      rc = check_expr(d, dl->size);
    }
    if (rc == 0)
      rc = declare(d, dl->var);
  }
  if (rc == 0)
    rc = check_stmt(d, k->body);
  block_leave(d, mark);
  for (uint32_t i = 0; i < k->nhelpers && rc == 0; i++) {
    ir_helper_t *h = &k->helpers[i];
    function_begin(d, h->ret, 0);
    mark = block_mark(d);
    for (uint32_t j = 0; j < h->nparams && rc == 0; j++)
      rc = declare(d, h->params[j]);
    if (rc == 0)
      rc = check_stmt(d, h->body);
    block_leave(d, mark);
  }
  return rc;
}

/* ------------------------------------------------------------ document */

void ir_doc_free(ir_doc_t *doc)
{
  if (doc != NULL)
    ir_arena_free(doc->arena);
}

static void dec_cleanup(dec_t *d)
{
  free(d->named);
  free(d->stack);
  strmap_free(&d->records);
  strmap_free(&d->variants);
  strmap_free(&d->ctors);
  strmap_free(&d->helpers);
  strmap_free(&d->cnames);
  strmap_free(&d->names);
  u64map_free(&d->ids);
}

/* Find the version key first, whatever the key order. */
static int read_version(dec_t *d, uint32_t n, const ir_path_t *vp)
{
  const uint8_t *start = d->p;
  uint64_t values = d->values;
  unsigned depth = d->depth;
  int found = 0;
  val_t k;

  for (uint32_t i = 0; i < n; i++) {
    if (rd(d, NULL, &k) != 0)
      return HIPD_EIR;
    if (k.t == V_STR && k.n == 2 && memcmp(k.s, "ir", 2) == 0) {
      if (read_uint(d, vp, &d->doc->version) != 0)
        return HIPD_EIR;
      found = 1;
      break;
    }
    if (skip(d, NULL) != 0)
      return HIPD_EIR;
  }
  if (!found)
    return fail(d, NULL, "missing key 'ir' (the IR version)");
  if (d->doc->version < IR_VERSION_MIN || d->doc->version > IR_VERSION_MAX)
    return fail(d, vp, "ir version %llu not supported (supported: %d)",
                (unsigned long long)d->doc->version, IR_VERSION_MAX);
  d->p = start;
  d->values = values;
  d->depth = depth;
  return 0;
}

int ir_decode(const void *bytes, size_t len, const ir_limits_t *lim,
              ir_doc_t **out, ir_error_t *err)
{
  static const char *const keys[] = {"ir", "kernel"};
  dec_t d = {0};
  uint32_t n, seen = 0;
  int which, rc;
  ir_error_t scratch;

  if (err == NULL)
    err = &scratch;
  memset(err, 0, sizeof(*err));
  *out = NULL;
  d.p = bytes;
  d.end = d.p + len;
  d.err = err;
  if (lim != NULL)
    d.lim = *lim;
  else
    ir_limits_default(&d.lim);
  d.arena = ir_arena_new(d.lim.max_memory);
  if (d.arena == NULL || (d.doc = ir_alloc(d.arena, sizeof(*d.doc))) == NULL ||
      (d.doc->kernel = ir_alloc(d.arena, sizeof(*d.doc->kernel))) == NULL) {
    ir_arena_free(d.arena);
    return ir_error_set(err, HIPD_ENOMEM, NULL, "out of memory");
  }
  d.doc->arena = d.arena;
  strmap_init(&d.records);
  strmap_init(&d.variants);
  strmap_init(&d.ctors);
  strmap_init(&d.helpers);
  strmap_init(&d.cnames);
  strmap_init(&d.names);
  u64map_init(&d.ids);

  rc = open_map(&d, NULL, "an IR document", &n);
  if (rc == 0)
    rc = read_version(&d, n, pk(&d, NULL, "ir"));
  for (uint32_t i = 0; rc == 0 && i < n; i++) {
    rc = map_key(&d, NULL, keys, 2, &seen, &which);
    if (rc == 0 && which == 0)
      rc = skip(&d, NULL); /* read above */
    else if (rc == 0 && which == 1)
      rc = parse_kernel(&d, pk(&d, NULL, "kernel"), d.doc->kernel);
  }
  if (rc == 0) {
    leave(&d);
    rc = map_required(&d, NULL, keys, 2, 3, seen);
  }
  if (rc == 0 && d.p != d.end)
    rc = fail(&d, NULL, "%zu bytes follow the document", (size_t)(d.end - d.p));
  if (rc == 0)
    rc = check_tables(&d);
  if (rc == 0)
    rc = check_kernel(&d);
  if (rc == 0 && d.failed)
    rc = err->code ? err->code : HIPD_EIR;
  dec_cleanup(&d);
  if (rc != 0) {
    if (err->code == 0)
      ir_error_set(err, rc, NULL, "%s", hipd_strerror(rc));
    ir_arena_free(d.arena);
    return err->code;
  }
  *out = d.doc;
  return 0;
}
