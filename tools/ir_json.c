/* SPDX-License-Identifier: MIT */
/* tools/ir_json.c: JSON -> msgpack (see ir_json.h).
 *
 * Hand-written rather than built on a JSON library: it is small, it must
 * keep 64-bit integers exact (a double in between would not), and the
 * offline GPU build host then needs no extra package. The text is parsed
 * into a tree first (msgpack wants container sizes up front), then packed.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir_json.h"

enum { J_NULL, J_BOOL, J_INT, J_UINT, J_FLOAT, J_STR, J_ARR, J_OBJ };

typedef struct jv {
  int t;
  int b;
  int64_t i;
  uint64_t u;
  double f;
  char *s; /* J_STR, and J_OBJ keys as J_STR items */
  size_t slen;
  struct jv *items; /* J_ARR: n values; J_OBJ: n keys and n values */
  size_t n, cap;
} jv_t;

typedef struct {
  const char *p, *start, *end;
  char *err;
  size_t errsz;
  int failed;
  unsigned depth;
} jp_t;

#define MAX_DEPTH 1000

static int jfail(jp_t *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int jfail(jp_t *j, const char *fmt, ...)
{
  size_t line = 1, col = 1;
  char msg[256];
  va_list ap;

  if (j->failed)
    return -1;
  j->failed = 1;
  for (const char *q = j->start; q < j->p && q < j->end; q++) {
    if (*q == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(j->err, j->errsz, "JSON line %zu, column %zu: %s", line, col, msg);
  return -1;
}

static void jv_free(jv_t *v)
{
  size_t n = v->t == J_OBJ ? 2 * v->n : v->n;

  free(v->s);
  for (size_t i = 0; i < n && v->items != NULL; i++)
    jv_free(&v->items[i]);
  free(v->items);
}

static void ws(jp_t *j)
{
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static jv_t *push(jp_t *j, jv_t *parent)
{
  if (parent->n * (parent->t == J_OBJ ? 2 : 1) + 2 > parent->cap) {
    size_t cap = parent->cap ? parent->cap * 2 : 8;
    jv_t *it = realloc(parent->items, cap * sizeof(*it));
    if (it == NULL) {
      jfail(j, "out of memory");
      return NULL;
    }
    parent->items = it;
    parent->cap = cap;
  }
  return NULL;
}

static int hex4(jp_t *j, unsigned *out)
{
  unsigned v = 0;

  if (j->end - j->p < 4)
    return jfail(j, "truncated \\u escape");
  for (int i = 0; i < 4; i++) {
    char c = *j->p++;
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return jfail(j, "bad hex digit in a \\u escape");
  }
  *out = v;
  return 0;
}

static int put_utf8(char *o, size_t *n, unsigned cp)
{
  if (cp < 0x80) {
    o[(*n)++] = (char)cp;
  } else if (cp < 0x800) {
    o[(*n)++] = (char)(0xc0 | (cp >> 6));
    o[(*n)++] = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    o[(*n)++] = (char)(0xe0 | (cp >> 12));
    o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[(*n)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    o[(*n)++] = (char)(0xf0 | (cp >> 18));
    o[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[(*n)++] = (char)(0x80 | (cp & 0x3f));
  }
  return 0;
}

static int parse_string(jp_t *j, char **out, size_t *len)
{
  const char *q;
  char *o;
  size_t n = 0;

  j->p++; /* '"' */
  for (q = j->p; q < j->end && *q != '"'; q++)
    if (*q == '\\')
      q++;
  if (q >= j->end)
    return jfail(j, "unterminated string");
  /* an escape never expands: \uXXXX (6 bytes) gives at most 4 */
  o = malloc((size_t)(q - j->p) + 1);
  if (o == NULL)
    return jfail(j, "out of memory");
  while (*j->p != '"') {
    unsigned char c = (unsigned char)*j->p;
    if (c < 0x20) {
      free(o);
      return jfail(j, "control character in a string (escape it)");
    }
    if (c != '\\') {
      o[n++] = (char)c;
      j->p++;
      continue;
    }
    j->p++;
    switch (*j->p++) {
    case '"':
      o[n++] = '"';
      break;
    case '\\':
      o[n++] = '\\';
      break;
    case '/':
      o[n++] = '/';
      break;
    case 'b':
      o[n++] = '\b';
      break;
    case 'f':
      o[n++] = '\f';
      break;
    case 'n':
      o[n++] = '\n';
      break;
    case 'r':
      o[n++] = '\r';
      break;
    case 't':
      o[n++] = '\t';
      break;
    case 'u': {
      unsigned cp, lo;
      if (hex4(j, &cp) != 0) {
        free(o);
        return -1;
      }
      if (cp >= 0xd800 && cp <= 0xdbff) {
        if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') {
          free(o);
          return jfail(j, "a high surrogate without its low surrogate");
        }
        j->p += 2;
        if (hex4(j, &lo) != 0) {
          free(o);
          return -1;
        }
        if (lo < 0xdc00 || lo > 0xdfff) {
          free(o);
          return jfail(j, "a high surrogate without its low surrogate");
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        free(o);
        return jfail(j, "a lone low surrogate");
      }
      put_utf8(o, &n, cp);
      break;
    }
    default:
      free(o);
      j->p--;
      return jfail(j, "unknown escape '\\%c'", *j->p);
    }
  }
  j->p++; /* '"' */
  o[n] = '\0';
  *out = o;
  *len = n;
  return 0;
}

static int parse_number(jp_t *j, jv_t *v)
{
  const char *s = j->p;
  int real = 0;
  char buf[400], *e;
  size_t n;

  if (j->p < j->end && *j->p == '-')
    j->p++;
  if (j->p >= j->end || *j->p < '0' || *j->p > '9')
    return jfail(j, "bad number");
  if (*j->p == '0')
    j->p++;
  else
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  if (j->p < j->end && *j->p == '.') {
    real = 1;
    j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
      return jfail(j, "bad number: digits must follow '.'");
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    real = 1;
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
      j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
      return jfail(j, "bad number: digits must follow the exponent");
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  }
  n = (size_t)(j->p - s);
  if (n >= sizeof(buf))
    return jfail(j, "a number of %zu characters", n);
  memcpy(buf, s, n);
  buf[n] = '\0';
  errno = 0;
  if (real) {
    v->t = J_FLOAT;
    v->f = strtod(buf, &e);
  } else if (buf[0] == '-') {
    v->t = J_INT;
    v->i = strtoll(buf, &e, 10);
  } else {
    v->t = J_UINT;
    v->u = strtoull(buf, &e, 10);
  }
  if (errno == ERANGE && !real)
    return jfail(j, "integer %s is out of the 64-bit range", buf);
  return 0;
}

static int parse_value(jp_t *j, jv_t *v);

static int parse_container(jp_t *j, jv_t *v, int obj)
{
  char close = obj ? '}' : ']';

  v->t = obj ? J_OBJ : J_ARR;
  if (++j->depth > MAX_DEPTH)
    return jfail(j, "nesting deeper than %d", MAX_DEPTH);
  j->p++;
  ws(j);
  if (j->p < j->end && *j->p == close) {
    j->p++;
    j->depth--;
    return 0;
  }
  for (;;) {
    jv_t *slot;
    push(j, v);
    if (j->failed)
      return -1;
    if (obj) {
      slot = &v->items[2 * v->n];
      memset(slot, 0, 2 * sizeof(*slot));
      ws(j);
      if (j->p >= j->end || *j->p != '"')
        return jfail(j, "expected a key (a string)");
      slot->t = J_STR;
      if (parse_string(j, &slot->s, &slot->slen) != 0)
        return -1;
      v->n++; /* counted now, so that jv_free frees the key */
      ws(j);
      if (j->p >= j->end || *j->p != ':')
        return jfail(j, "expected ':' after a key");
      j->p++;
      if (parse_value(j, slot + 1) != 0)
        return -1;
    } else {
      slot = &v->items[v->n];
      memset(slot, 0, sizeof(*slot));
      v->n++;
      if (parse_value(j, slot) != 0)
        return -1;
    }
    ws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    if (j->p < j->end && *j->p == close) {
      j->p++;
      j->depth--;
      return 0;
    }
    return jfail(j, "expected ',' or '%c'", close);
  }
}

static int literal(jp_t *j, const char *word)
{
  size_t n = strlen(word);

  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
    return jfail(j, "unexpected character '%c'", *j->p);
  j->p += n;
  return 0;
}

static int parse_value(jp_t *j, jv_t *v)
{
  ws(j);
  if (j->p >= j->end)
    return jfail(j, "unexpected end of text");
  switch (*j->p) {
  case '{':
    return parse_container(j, v, 1);
  case '[':
    return parse_container(j, v, 0);
  case '"':
    v->t = J_STR;
    return parse_string(j, &v->s, &v->slen);
  case 't':
    v->t = J_BOOL;
    v->b = 1;
    return literal(j, "true");
  case 'f':
    v->t = J_BOOL;
    return literal(j, "false");
  case 'n':
    v->t = J_NULL;
    return literal(j, "null");
  default:
    return parse_number(j, v);
  }
}

static void pack(msgpack_packer *pk, const jv_t *v)
{
  switch (v->t) {
  case J_NULL:
    msgpack_pack_nil(pk);
    break;
  case J_BOOL:
    if (v->b)
      msgpack_pack_true(pk);
    else
      msgpack_pack_false(pk);
    break;
  case J_INT:
    msgpack_pack_int64(pk, v->i);
    break;
  case J_UINT:
    msgpack_pack_uint64(pk, v->u);
    break;
  case J_FLOAT:
    msgpack_pack_double(pk, v->f);
    break;
  case J_STR:
    msgpack_pack_str(pk, v->slen);
    msgpack_pack_str_body(pk, v->s, v->slen);
    break;
  case J_ARR:
    msgpack_pack_array(pk, (uint32_t)v->n);
    for (size_t i = 0; i < v->n; i++)
      pack(pk, &v->items[i]);
    break;
  case J_OBJ:
    msgpack_pack_map(pk, (uint32_t)v->n);
    for (size_t i = 0; i < 2 * v->n; i++)
      pack(pk, &v->items[i]);
    break;
  }
}

int ir_json_to_msgpack(const char *text, size_t len, msgpack_sbuffer *out,
                       char *err, size_t errsz)
{
  jp_t j = {text, text, text + len, err, errsz, 0, 0};
  jv_t root = {0};
  msgpack_packer pk;
  int rc;

  if (errsz > 0)
    err[0] = '\0';
  rc = parse_value(&j, &root);
  if (rc == 0) {
    ws(&j);
    if (j.p != j.end)
      rc = jfail(&j, "text after the value");
  }
  if (rc == 0) {
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    pack(&pk, &root);
  }
  jv_free(&root);
  return rc;
}

int ir_json_member(const char *text, size_t len, const char *key,
                   msgpack_sbuffer *out, char *err, size_t errsz)
{
  jp_t j = {text, text, text + len, err, errsz, 0, 0};
  jv_t root = {0};
  msgpack_packer pk;
  int rc, found = 0;

  if (errsz > 0)
    err[0] = '\0';
  rc = parse_value(&j, &root);
  if (rc == 0 && root.t != J_OBJ)
    rc = jfail(&j, "the document is not an object");
  for (size_t i = 0; rc == 0 && i < root.n; i++)
    if (strcmp(root.items[2 * i].s, key) == 0) {
      msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
      pack(&pk, &root.items[2 * i + 1]);
      found = 1;
      break;
    }
  jv_free(&root);
  return rc != 0 ? -1 : found;
}

char *ir_json_read_file(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t n = 0, cap = 0;

  if (f == NULL)
    return NULL;
  for (;;) {
    size_t r;
    if (n + 4096 + 1 > cap) {
      char *b = realloc(buf, cap = cap ? cap * 2 : 65536);
      if (b == NULL) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = b;
    }
    r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0)
      break;
  }
  if (ferror(f)) {
    int e = errno;
    free(buf);
    fclose(f);
    errno = e ? e : EIO;
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}
