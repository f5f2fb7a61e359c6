/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode_read.c: the decoder's msgpack reader
 * (ir_decode.c, phase 1): failures and their paths, the recursive-descent
 * reader over the raw bytes, and the scalars (names, text, integers,
 * enumerations) and containers (arrays, maps, nodes, keys) of the IR.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "codegen/ir_decode_internal.h"
#include "hipd.h"

const char *const dec_vnames[] = {"nil", "bool", "int",   "int", "float",
                                  "str", "bin",  "array", "map", "ext"};

/* ------------------------------------------------------------- errors */

int dec_fail(dec_t *d, const ir_path_t *at, const char *fmt, ...)
{
  va_list ap;
  char msg[512];

  d->failed = 1;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return ir_error_set(d->err, HIPD_EIR, at, "%s", msg);
}

int dec_oom(dec_t *d, const ir_path_t *at)
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

void *dec_new(dec_t *d, const ir_path_t *at, size_t n)
{
  void *p = ir_alloc(d->arena, n);

  if (p == NULL)
    dec_oom(d, at);
  return p;
}

#define NEW(d, at, ptr) ((ptr) = dec_new((d), (at), sizeof(*(ptr))))
#define NEWN(d, at, ptr, n)                                                    \
  ((ptr) = dec_new((d), (at), sizeof(*(ptr)) * ((n) ? (n) : 1)))

/* ------------------------------------------------------------- paths */

const ir_path_t *dec_pk(dec_t *d, const ir_path_t *up, const char *key)
{
  ir_path_t *p = ir_alloc(d->arena, sizeof(*p));

  if (p == NULL) {
    dec_oom(d, up);
    return NULL;
  }
  p->up = up;
  p->key = key;
  return p;
}

const ir_path_t *dec_pi(dec_t *d, const ir_path_t *up, uint32_t index)
{
  ir_path_t *p = ir_alloc(d->arena, sizeof(*p));

  if (p == NULL) {
    dec_oom(d, up);
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
    return dec_fail(d, at, "truncated: the document ends inside a value");
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
 * container is entered: the caller reads its elements, then dec_leave(). */
int dec_rd(dec_t *d, const ir_path_t *at, val_t *v)
{
  uint8_t c;
  int lenbytes = 0;

  if (d->failed)
    return HIPD_EIR;
  memset(v, 0, sizeof(*v));
  if (need(d, at, 1) != 0)
    return HIPD_EIR;
  if (++d->values > d->lim.max_values)
    return dec_fail(d, at, "more than %llu values in the document",
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
    return dec_fail(d, at, "not msgpack: byte 0x%02x starts no value", c);
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
    return dec_fail(d, at, "an array of %u elements (at most %u)", v->n,
                    d->lim.max_array);
  if (v->t == V_MAP && v->n > d->lim.max_map)
    return dec_fail(d, at, "a map of %u pairs (at most %u)", v->n,
                    d->lim.max_map);
  /* Every element takes at least one byte: a count beyond what is left
   * is a truncated document, found before anything is allocated for it. */
  if ((uint64_t)v->n * (v->t == V_MAP ? 2 : 1) > (uint64_t)(d->end - d->p))
    return dec_fail(d, at, "truncated: the document ends inside a value");
  if (++d->depth > d->lim.max_depth)
    return dec_fail(d, at, "nesting deeper than %u", d->lim.max_depth);
  return 0;
}

void dec_leave(dec_t *d)
{
  d->depth--;
}

/* Read and drop one whole value (checking it as any other). */
int dec_skip(dec_t *d, const ir_path_t *at)
{
  val_t v;
  int rc = dec_rd(d, at, &v);

  if (rc != 0)
    return rc;
  if (v.t == V_ARRAY || v.t == V_MAP) {
    uint64_t n = (uint64_t)v.n * (v.t == V_MAP ? 2 : 1);
    for (uint64_t i = 0; i < n; i++)
      if ((rc = dec_skip(d, at)) != 0)
        return rc;
    dec_leave(d);
  }
  return 0;
}

static int is_nil_next(dec_t *d)
{
  return d->p < d->end && *d->p == 0xc0;
}

/* Consume a nil if one is next. @return 1 if it did. */
int dec_take_nil(dec_t *d)
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

int dec_word_ok(const char *s, size_t n)
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
int dec_read_name(dec_t *d, const ir_path_t *at, int kind, const char **out)
{
  val_t v;
  char q[300], *s;
  const char *why;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return dec_fail(d, at, "expected a %s (a string), got %s", name_kind(kind),
                    dec_vnames[v.t]);
  if (kind == NAME_TNAME) {
    /* idents joined by '.' */
    size_t start = 0;
    if (v.n == 0 || v.n > 255)
      return dec_fail(d, at, "a type name has 1 to 255 bytes, not %u", v.n);
    for (size_t i = 0; i <= v.n; i++) {
      if (i < v.n && v.s[i] != '.')
        continue;
      if (!dec_word_ok(v.s + start, i - start))
        return dec_fail(d, at,
                        "'%s' is not a type name (identifiers joined by '.')",
                        ir_quote(q, sizeof(q), v.s, v.n));
      s = ir_strndup(d->arena, v.s + start, i - start);
      if (s == NULL)
        return dec_oom(d, at);
      if ((why = ident_problem(s)) != NULL)
        return dec_fail(d, at, "'%s' in type name '%s' %s", s,
                        ir_quote(q, sizeof(q), v.s, v.n), why);
      start = i + 1;
    }
  } else if (!dec_word_ok(v.s, v.n)) {
    return dec_fail(d, at,
                    "'%s' is not a%s %s ([A-Za-z_][A-Za-z0-9_]*, 1 to 255 "
                    "bytes)",
                    ir_quote(q, sizeof(q), v.s, v.n),
                    kind == NAME_IDENT ? "n" : "", name_kind(kind));
  }
  if ((s = ir_strndup(d->arena, v.s, v.n)) == NULL)
    return dec_oom(d, at);
  if (kind == NAME_IDENT && (why = ident_problem(s)) != NULL)
    return dec_fail(d, at, "'%s' %s", s, why);
  *out = s;
  return 0;
}

/* A str of at most @p max bytes (valid UTF-8, no NUL), copied. */
int dec_read_text(dec_t *d, const ir_path_t *at, size_t max, const char **out,
                  size_t *len)
{
  val_t v;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return dec_fail(d, at, "expected a string, got %s", dec_vnames[v.t]);
  if (v.n > max)
    return dec_fail(d, at, "a string of %u bytes (at most %zu here)", v.n, max);
  if (!utf8_valid(v.s, v.n))
    return dec_fail(d, at, "the string is not valid UTF-8 or contains a NUL");
  if ((*out = ir_strndup(d->arena, v.s, v.n)) == NULL)
    return dec_oom(d, at);
  if (len != NULL)
    *len = v.n;
  return 0;
}

int dec_read_uint(dec_t *d, const ir_path_t *at, uint64_t *out)
{
  val_t v;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_UINT || v.u > INT64_MAX)
    return dec_fail(d, at, "expected an unsigned integer below 2^63, got %s",
                    v.t == V_UINT ? "a larger one" : dec_vnames[v.t]);
  *out = v.u;
  return 0;
}

int dec_read_bool(dec_t *d, const ir_path_t *at, int *out)
{
  val_t v;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_BOOL)
    return dec_fail(d, at, "expected true or false, got %s", dec_vnames[v.t]);
  *out = v.b;
  return 0;
}

/* A bare string of enumeration @p ts. */
int dec_read_enum(dec_t *d, const ir_path_t *at, ir_tagset_id_t ts,
                  unsigned *out)
{
  const ir_tagset_t *set = &ir_tagsets[ts];
  val_t v;
  char q[300];

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return dec_fail(d, at, "expected a %s (a string), got %s", set->type,
                    dec_vnames[v.t]);
  for (unsigned i = 0; i < set->n; i++)
    if (strlen(set->tags[i]) == v.n && memcmp(set->tags[i], v.s, v.n) == 0) {
      *out = i;
      d->doc->stats.tags[ts][i]++;
      return 0;
    }
  return dec_fail(d, at, "unknown %s '%s'", set->type,
                  ir_quote(q, sizeof(q), v.s, v.n));
}

/* --------------------------------------------------------- containers */

int dec_open_array(dec_t *d, const ir_path_t *at, const char *what, uint32_t *n)
{
  val_t v;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_ARRAY)
    return dec_fail(d, at, "expected %s (an array), got %s", what,
                    dec_vnames[v.t]);
  *n = v.n;
  return 0;
}

int dec_open_map(dec_t *d, const ir_path_t *at, const char *what, uint32_t *n)
{
  val_t v;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_MAP)
    return dec_fail(d, at, "expected %s (a map), got %s", what,
                    dec_vnames[v.t]);
  *n = v.n;
  return 0;
}

/* A pair [a, b] of a list. */
int dec_open_pair(dec_t *d, const ir_path_t *at, const char *what)
{
  uint32_t n = 0;

  if (dec_open_array(d, at, what, &n) != 0)
    return HIPD_EIR;
  if (n != 2)
    return dec_fail(d, at, "expected %s: a pair of 2 elements, got %u", what,
                    n);
  return 0;
}

/* A node of type @p ts: [tag, fields...] with the tag's arity. */
int dec_node_open(dec_t *d, const ir_path_t *at, ir_tagset_id_t ts,
                  unsigned *tag)
{
  const ir_tagset_t *set = &ir_tagsets[ts];
  val_t v;
  char q[300];
  const char *article = strchr("aeiou", set->type[0]) ? "an" : "a";

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_ARRAY)
    return dec_fail(d, at, "expected %s %s node (an array), got %s", article,
                    set->type, dec_vnames[v.t]);
  if (v.n == 0)
    return dec_fail(d, at, "expected %s %s node, got an empty array", article,
                    set->type);
  uint32_t n = v.n;
  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return dec_fail(d, at, "a %s node begins with its tag (a string), not %s",
                    set->type, dec_vnames[v.t]);
  for (unsigned i = 0; i < set->n; i++)
    if (strlen(set->tags[i]) == v.n && memcmp(set->tags[i], v.s, v.n) == 0) {
      /* a tag of a later version is unknown to this document's */
      if (set->since != NULL && set->since[i] > d->doc->version)
        break;
      if (n - 1 != (uint32_t)set->arity[i])
        return dec_fail(d, at, "'%s' takes %d field%s, got %u", set->tags[i],
                        set->arity[i], set->arity[i] == 1 ? "" : "s", n - 1);
      *tag = i;
      d->doc->stats.tags[ts][i]++;
      return 0;
    }
  return dec_fail(d, at, "unknown %s tag '%s'", set->type,
                  ir_quote(q, sizeof(q), v.s, v.n));
}

/*
 * The next key of a map of the IR among @p keys (n of them): its index, or
 * -1 for an annotation ('_' key, whose value is skipped). Unknown and
 * repeated keys are errors. @p seen tracks the keys read.
 */
int dec_map_key(dec_t *d, const ir_path_t *at, const char *const *keys,
                unsigned n, uint32_t *seen, int *which)
{
  val_t v;
  char q[300];

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  if (v.t != V_STR)
    return dec_fail(d, at, "map keys are strings, not %s", dec_vnames[v.t]);
  if (v.n > 0 && v.s[0] == '_') {
    *which = -1;
    return dec_skip(d, at);
  }
  for (unsigned i = 0; i < n; i++)
    if (strlen(keys[i]) == v.n && memcmp(keys[i], v.s, v.n) == 0) {
      if (*seen & (1u << i))
        return dec_fail(d, at, "duplicate key '%s'", keys[i]);
      *seen |= 1u << i;
      *which = (int)i;
      return 0;
    }
  return dec_fail(d, at, "unknown key '%s'", ir_quote(q, sizeof(q), v.s, v.n));
}

/* Every key of @p required (a mask over @p keys) must have been seen. */
int dec_map_required(dec_t *d, const ir_path_t *at, const char *const *keys,
                     unsigned n, uint32_t required, uint32_t seen)
{
  for (unsigned i = 0; i < n; i++)
    if ((required & (1u << i)) && !(seen & (1u << i)))
      return dec_fail(d, at, "missing key '%s'", keys[i]);
  return 0;
}
