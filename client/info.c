/* SPDX-License-Identifier: MIT */
/* client/info.c: hipd_info_t, a structured result (daemon identity, session
 * details, device records) that outlives the reply it came in.
 *
 * A decoded reply refers into the receive buffer, which the next read
 * reuses, so a record is a deep copy of the result object into a zone of its
 * own: one allocation pattern, freed at once by hipd_info_free().
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

struct hipd_info {
  msgpack_zone zone;   /* owns every object and byte below root */
  msgpack_object root; /* the copied result */
};

/* ---------------------------------------------------------------- copy */

/* Copy @p n bytes into the zone with a NUL after them, so that strings can
 * be handed out as C strings. @return the copy or NULL. */
static char *zone_strdup(msgpack_zone *zone, const char *s, uint32_t n)
{
  char *p = msgpack_zone_malloc_no_align(zone, (size_t)n + 1);

  if (p == NULL)
    return NULL;
  if (n > 0)
    memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* Deep-copy @p src into @p dst with everything it refers to allocated in
 * @p zone. The recursion is bounded by the decode limits' depth.
 * @return 0 or HIPD_ENOMEM. */
static int object_copy(msgpack_zone *zone, msgpack_object *dst,
                       const msgpack_object *src)
{
  *dst = *src;
  switch (src->type) {
  case MSGPACK_OBJECT_STR:
    dst->via.str.ptr = zone_strdup(zone, src->via.str.ptr, src->via.str.size);
    return dst->via.str.ptr ? 0 : HIPD_ENOMEM;
  case MSGPACK_OBJECT_BIN:
    dst->via.bin.ptr = zone_strdup(zone, src->via.bin.ptr, src->via.bin.size);
    return dst->via.bin.ptr ? 0 : HIPD_ENOMEM;
  case MSGPACK_OBJECT_EXT:
    dst->via.ext.ptr = zone_strdup(zone, src->via.ext.ptr, src->via.ext.size);
    return dst->via.ext.ptr ? 0 : HIPD_ENOMEM;
  case MSGPACK_OBJECT_ARRAY: {
    uint32_t n = src->via.array.size;
    msgpack_object *a = NULL;
    if (n > 0) {
      a = msgpack_zone_malloc(zone, sizeof(*a) * n);
      if (a == NULL)
        return HIPD_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
      if (object_copy(zone, &a[i], &src->via.array.ptr[i]) < 0)
        return HIPD_ENOMEM;
    dst->via.array.ptr = a;
    return 0;
  }
  case MSGPACK_OBJECT_MAP: {
    uint32_t n = src->via.map.size;
    msgpack_object_kv *kv = NULL;
    if (n > 0) {
      kv = msgpack_zone_malloc(zone, sizeof(*kv) * n);
      if (kv == NULL)
        return HIPD_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
      if (object_copy(zone, &kv[i].key, &src->via.map.ptr[i].key) < 0 ||
          object_copy(zone, &kv[i].val, &src->via.map.ptr[i].val) < 0)
        return HIPD_ENOMEM;
    dst->via.map.ptr = kv;
    return 0;
  }
  default: /* scalars live in the object itself */
    return 0;
  }
}

int info_create(const msgpack_object *o, hipd_info_t **out)
{
  hipd_info_t *info = malloc(sizeof(*info));

  *out = NULL;
  if (info == NULL)
    return HIPD_ENOMEM;
  if (!msgpack_zone_init(&info->zone, 2048)) {
    free(info);
    return HIPD_ENOMEM;
  }
  if (object_copy(&info->zone, &info->root, o) < 0) {
    hipd_info_free(info);
    return HIPD_ENOMEM;
  }
  *out = info;
  return 0;
}

int info_decode(hipd_call_t *call, const msgpack_object *result,
                const conn_outs_t *outs)
{
  if (result->type != MSGPACK_OBJECT_MAP)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a map in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] == NULL)
    return 0;
  if (info_create(result, outs->p[0]) < 0)
    return conn_call_fail(call, HIPD_ENOMEM,
                          "%s: out of memory copying the reply", call->method);
  return 0;
}

int info_decode_array(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  if (result->type != MSGPACK_OBJECT_ARRAY)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected an array in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] == NULL)
    return 0;
  if (info_create(result, outs->p[0]) < 0)
    return conn_call_fail(call, HIPD_ENOMEM,
                          "%s: out of memory copying the reply", call->method);
  return 0;
}

void hipd_info_free(hipd_info_t *info)
{
  if (info == NULL)
    return;
  msgpack_zone_destroy(&info->zone);
  free(info);
}

/* -------------------------------------------------------------- lookup */

/* Parse a whole path component as an array index. @return 0 or -1. */
static int parse_index(const char *s, size_t n, uint32_t *out)
{
  uint64_t v = 0;

  if (n == 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (uint64_t)(s[i] - '0');
    if (v > UINT32_MAX)
      return -1;
  }
  *out = (uint32_t)v;
  return 0;
}

/* The map value whose key is the component s[0, n): a string key, or a
 * non-negative integer key written in decimal. */
static const msgpack_object *map_find(const msgpack_object *o, const char *s,
                                      size_t n)
{
  uint32_t index = 0;
  int numeric = parse_index(s, n, &index) == 0;

  for (uint32_t i = 0; i < o->via.map.size; i++) {
    const msgpack_object *k = &o->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
        memcmp(k->via.str.ptr, s, n) == 0)
      return &o->via.map.ptr[i].val;
    if (numeric && k->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
        k->via.u64 == index)
      return &o->via.map.ptr[i].val;
  }
  return NULL;
}

/* Follow the dotted @p path from the root ("" or NULL: the root itself).
 * Numeric components index arrays. @return the object or NULL. */
static const msgpack_object *info_find(const hipd_info_t *info,
                                       const char *path)
{
  const msgpack_object *o = &info->root;

  if (path == NULL || *path == '\0')
    return o;
  for (;;) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    uint32_t index;

    if (o->type == MSGPACK_OBJECT_MAP)
      o = map_find(o, path, n);
    else if (o->type == MSGPACK_OBJECT_ARRAY &&
             parse_index(path, n, &index) == 0 && index < o->via.array.size)
      o = &o->via.array.ptr[index];
    else
      o = NULL;
    if (o == NULL || dot == NULL)
      return o;
    path = dot + 1;
  }
}

/* Look @p path up for a getter. @return 0 with *out set, HIPD_EINVAL or
 * HIPD_ENOENT. */
static int info_get(const hipd_info_t *info, const char *path,
                    const msgpack_object **out)
{
  if (info == NULL)
    return HIPD_EINVAL;
  *out = info_find(info, path);
  return *out ? 0 : HIPD_ENOENT;
}

int hipd_info_int(const hipd_info_t *info, const char *path, int64_t *out)
{
  const msgpack_object *o;
  int err = info_get(info, path, &o);

  if (err < 0)
    return err;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (o->via.u64 > (uint64_t)INT64_MAX)
      return HIPD_ERANGE;
    *out = (int64_t)o->via.u64;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    *out = o->via.i64;
    return 0;
  }
  return HIPD_EHANDLETYPE;
}

int hipd_info_uint(const hipd_info_t *info, const char *path, uint64_t *out)
{
  const msgpack_object *o;
  int err = info_get(info, path, &o);

  if (err < 0)
    return err;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    *out = o->via.u64;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    return HIPD_ERANGE;
  return HIPD_EHANDLETYPE;
}

int hipd_info_double(const hipd_info_t *info, const char *path, double *out)
{
  const msgpack_object *o;
  int err = info_get(info, path, &o);

  if (err < 0)
    return err;
  return proto_obj_double(o, out) < 0 ? HIPD_EHANDLETYPE : 0;
}

int hipd_info_bool(const hipd_info_t *info, const char *path, int *out)
{
  const msgpack_object *o;
  int err = info_get(info, path, &o);

  if (err < 0)
    return err;
  if (o->type != MSGPACK_OBJECT_BOOLEAN)
    return HIPD_EHANDLETYPE;
  *out = o->via.boolean ? 1 : 0;
  return 0;
}

int hipd_info_str(const hipd_info_t *info, const char *path, const char **out,
                  size_t *len)
{
  const msgpack_object *o;
  int err = info_get(info, path, &o);

  if (err < 0)
    return err;
  if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
    return HIPD_EHANDLETYPE;
  /* The copy is NUL-terminated (zone_strdup). */
  *out = o->via.str.ptr;
  if (len != NULL)
    *len = o->via.str.size;
  return 0;
}

int hipd_info_len(const hipd_info_t *info, const char *path)
{
  const msgpack_object *o;
  int err = info_get(info, path, &o);

  if (err < 0)
    return err;
  if (o->type == MSGPACK_OBJECT_ARRAY)
    return o->via.array.size > INT_MAX ? INT_MAX : (int)o->via.array.size;
  if (o->type == MSGPACK_OBJECT_MAP)
    return o->via.map.size > INT_MAX ? INT_MAX : (int)o->via.map.size;
  return HIPD_EHANDLETYPE;
}

/* -------------------------------------------------------------- format */

/* A snprintf-like writer: counts everything, stores what fits. */
typedef struct {
  char *buf;
  size_t size;
  size_t len; /* the full length so far */
} writer_t;

static void w_put(writer_t *w, const char *s, size_t n)
{
  if (w->len < w->size) {
    size_t room = w->size - w->len;
    memcpy(w->buf + w->len, s, n < room ? n : room);
  }
  w->len += n;
}

static void w_printf(writer_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void w_printf(writer_t *w, const char *fmt, ...)
{
  char tmp[64];
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n > 0)
    w_put(w, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A quoted string with JSON escapes; other bytes (UTF-8) pass through. */
static void w_string(writer_t *w, const char *s, uint32_t n)
{
  uint32_t start = 0;

  w_put(w, "\"", 1);
  for (uint32_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char hex[8];
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\t')
      esc = "\\t";
    else if (c < 0x20 || c == 0x7f) {
      snprintf(hex, sizeof(hex), "\\u%04x", c);
      esc = hex;
    }
    if (esc == NULL)
      continue;
    w_put(w, s + start, i - start);
    w_put(w, esc, strlen(esc));
    start = i + 1;
  }
  w_put(w, s + start, n - start);
  w_put(w, "\"", 1);
}

/* A double that reads back the same, and still looks like a float. */
static void w_double(writer_t *w, double d)
{
  char tmp[40];

  snprintf(tmp, sizeof(tmp), "%.15g", d);
  if (isfinite(d) && strtod(tmp, NULL) != d)
    snprintf(tmp, sizeof(tmp), "%.17g", d);
  if (isfinite(d) && strpbrk(tmp, ".e") == NULL)
    strcat(tmp, ".0");
  w_put(w, tmp, strlen(tmp));
}

static void w_object(writer_t *w, const msgpack_object *o)
{
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    w_put(w, "null", 4);
    break;
  case MSGPACK_OBJECT_BOOLEAN:
    w_put(w, o->via.boolean ? "true" : "false", o->via.boolean ? 4 : 5);
    break;
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    w_printf(w, "%" PRIu64, o->via.u64);
    break;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    w_printf(w, "%" PRId64, o->via.i64);
    break;
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    w_double(w, o->via.f64);
    break;
  case MSGPACK_OBJECT_STR:
    w_string(w, o->via.str.ptr, o->via.str.size);
    break;
  case MSGPACK_OBJECT_BIN:
    w_printf(w, "<%" PRIu32 " bytes>", o->via.bin.size);
    break;
  case MSGPACK_OBJECT_EXT:
    w_printf(w, "<ext %d, %" PRIu32 " bytes>", (int)o->via.ext.type,
             o->via.ext.size);
    break;
  case MSGPACK_OBJECT_ARRAY:
    w_put(w, "[", 1);
    for (uint32_t i = 0; i < o->via.array.size; i++) {
      if (i > 0)
        w_put(w, ", ", 2);
      w_object(w, &o->via.array.ptr[i]);
    }
    w_put(w, "]", 1);
    break;
  case MSGPACK_OBJECT_MAP:
    w_put(w, "{", 1);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
      if (i > 0)
        w_put(w, ", ", 2);
      w_object(w, &o->via.map.ptr[i].key);
      w_put(w, ": ", 2);
      w_object(w, &o->via.map.ptr[i].val);
    }
    w_put(w, "}", 1);
    break;
  default:
    w_put(w, "?", 1);
    break;
  }
}

int hipd_info_format(const hipd_info_t *info, char *buf, size_t size)
{
  writer_t w = {.buf = buf, .size = size, .len = 0};

  if (info == NULL)
    return HIPD_EINVAL;
  if (buf == NULL)
    w.size = 0;
  w_object(&w, &info->root);
  if (w.size > 0)
    buf[w.len < w.size ? w.len : w.size - 1] = '\0';
  return w.len > INT_MAX ? INT_MAX : (int)w.len;
}
