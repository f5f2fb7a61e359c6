/* SPDX-License-Identifier: MIT */
/* proto/params.c: request params decoded from msgpack and checked against
 * their rows, with no session or device (params.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "params.h"
#include "rpc.h"

const char *proto_param_kind_name(param_kind_t kind)
{
  static const char *const names[] = {
      [P_UINT] = "uint",       [P_INT] = "int",
      [P_BOOL] = "bool",       [P_BYTES] = "bin or str",
      [P_BIN] = "bin",         [P_STR] = "str",
      [P_HANDLE] = "handle",   [P_DEVICE] = "device",
      [P_DIMS] = "dims",       [P_BLOCK] = "block",
      [P_OPTIONS] = "options", [P_NAMES] = "names",
      [P_TARGET] = "target",   [P_LAUNCH_ARGS] = "launch args",
      [P_ANY] = "any",         [P_REST] = "rest"};

  return (unsigned)kind < sizeof(names) / sizeof(names[0]) && names[kind]
             ? names[kind]
             : "?";
}

static int fault(param_fault_t *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fault(param_fault_t *f, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
  va_end(ap);
  f->code = code;
  return code;
}

/* The type of a param of row @p p as messages say it. */
static const char *expected(const param_t *p)
{
  if (p->expect != NULL)
    return p->expect;
  switch (p->kind) {
  case P_UINT:
  case P_DEVICE:
    return "an unsigned integer";
  case P_INT:
    return "an integer";
  case P_BOOL:
    return "a boolean";
  case P_BYTES:
    return "bin or str";
  case P_BIN:
    return "bin";
  case P_STR:
    return "a string";
  case P_HANDLE:
    return "a handle (unsigned integer)";
  case P_TARGET:
    return "a device id (unsigned integer) or an architecture (string)";
  case P_LAUNCH_ARGS:
    return "an array";
  default:
    return "a value";
  }
}

/* @p o is not of the row's type (NULL: the param is missing). */
static int bad_type(const param_t *p, unsigned i, const msgpack_object *o,
                    param_fault_t *f)
{
  return fault(f, HIPD_EPARAMS, "param %u (%s) must be %s, not %s", i, p->name,
               expected(p), o ? proto_obj_type_name(o) : "missing");
}

/* A NUL-terminated copy of @p n bytes at @p s in @p zone. */
static char *zone_str(msgpack_zone *zone, const char *s, size_t n)
{
  char *d = msgpack_zone_malloc(zone, n + 1);

  if (d != NULL) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

static int no_memory(param_fault_t *f)
{
  return fault(f, HIPD_ENOMEM, "out of memory");
}

/* ------------------------------------------------------- value checks */

static int uint_range(const param_t *p, unsigned i, uint64_t max,
                      param_fault_t *f)
{
  return fault(f, HIPD_ERANGE, "param %u (%s) must be between 0 and %llu", i,
               p->name, (unsigned long long)max);
}

static int int_range(const param_t *p, unsigned i, param_fault_t *f)
{
  return fault(f, HIPD_ERANGE, "param %u (%s) must be between %lld and %lld", i,
               p->name, (long long)p->min, (long long)p->max);
}

/* A string param's @p n bytes at @p s: at most max, no NUL. */
static int str_check(const param_t *p, unsigned i, const char *s, size_t n,
                     param_fault_t *f)
{
  if (n > p->max)
    return fault(f, HIPD_EPARAMS,
                 "param %u (%s) is %zu bytes long, more than %llu", i, p->name,
                 n, (unsigned long long)p->max);
  if (memchr(s, '\0', n) != NULL)
    return fault(f, HIPD_EPARAMS, "param %u (%s) contains a NUL byte", i,
                 p->name);
  return 0;
}

static int dims_bad(const param_t *p, unsigned i, param_fault_t *f)
{
  return fault(f, HIPD_EPARAMS,
               "param %u (%s) must be [x, y, z] positive integers", i, p->name);
}

/* Launch dim @p j (0 x, 1 y, 2 z) of param @p i: at most max, not 0. */
static int dim_check(const param_t *p, unsigned i, unsigned j, uint64_t v,
                     param_fault_t *f)
{
  if (v > p->max)
    return dims_bad(p, i, f);
  if (v == 0)
    return fault(f, HIPD_ELIMIT, "%s.%c is 0", p->name, "xyz"[j]);
  return 0;
}

static int block_bad(const param_t *p, unsigned i, param_fault_t *f)
{
  return fault(f, HIPD_EPARAMS,
               "param %u (%s) must be [x, y, z], each 1 to %llu", i, p->name,
               (unsigned long long)p->max);
}

/* A code generator's block: at most max threads in all. */
static int block_threads(const param_t *p, const uint32_t d[3],
                         param_fault_t *f)
{
  uint64_t threads = (uint64_t)d[0] * d[1] * d[2];

  if (threads > p->max)
    return fault(f, HIPD_ELIMIT, "a block of %llu threads (at most %llu)",
                 (unsigned long long)threads, (unsigned long long)p->max);
  return 0;
}

static int strings_bad(const param_t *p, unsigned i, param_fault_t *f)
{
  return fault(f, HIPD_EPARAMS,
               "param %u (%s) must be an array of at most %llu %s", i, p->name,
               (unsigned long long)p->max,
               p->kind == P_NAMES ? "param names" : "strings");
}

static int string_bad(const param_t *p, uint32_t k, param_fault_t *f)
{
  if (p->kind == P_NAMES)
    return fault(f, HIPD_EPARAMS,
                 "%s[%u] must be a param name (a string of 1 to 255 bytes)",
                 p->name, k);
  return fault(f, HIPD_EPARAMS, "option %u must be a string of under 256 bytes",
               k);
}

/* String @p k of an options or names param: options under 256 bytes,
 * names 1 to 255, neither with a NUL. */
static int string_check(const param_t *p, uint32_t k, const char *s, size_t n,
                        param_fault_t *f)
{
  if (n > 255 || (p->kind == P_NAMES && n == 0) || memchr(s, '\0', n) != NULL)
    return string_bad(p, k, f);
  return 0;
}

static int largs_count(const param_t *p, uint32_t n, param_fault_t *f)
{
  if (n > p->max)
    return fault(f, HIPD_EPARAMS, "%u arguments, more than %llu", n,
                 (unsigned long long)p->max);
  return 0;
}

static int larg_fail(param_fault_t *f, uint32_t k, const char *fmt,
                     const char *what)
{
  return fault(f, HIPD_EPARAMS, "argument %u: %s%s", k, fmt, what);
}

static int larg_unknown(param_fault_t *f, uint32_t k)
{
  return larg_fail(f, k, "unknown kind (use ",
                   "buf, ptr, i32, i64, f32 or f64)");
}

int proto_param_check(const param_t *p, unsigned i, const param_value_t *v,
                      param_fault_t *f)
{
  int rc;

  if (!v->present) {
    if (p->optional || p->kind == P_REST)
      return 0;
    return p->kind == P_DIMS ? dims_bad(p, i, f) : bad_type(p, i, NULL, f);
  }
  switch (p->kind) {
  case P_UINT:
    return v->u > p->max ? uint_range(p, i, p->max, f) : 0;
  case P_INT:
    return v->i < p->min || v->i > (int64_t)p->max ? int_range(p, i, f) : 0;
  case P_STR:
    return str_check(p, i, v->s, v->len, f);
  case P_DEVICE:
    return v->u > p->max ? uint_range(p, i, p->max, f) : 0;
  case P_TARGET:
    if (v->s != NULL)
      return str_check(p, i, v->s, v->len, f);
    return v->u > UINT32_MAX ? uint_range(p, i, UINT32_MAX, f) : 0;
  case P_DIMS:
    for (unsigned j = 0; j < 3; j++)
      if ((rc = dim_check(p, i, j, v->dims[j], f)) != 0)
        return rc;
    return 0;
  case P_BLOCK:
    for (unsigned j = 0; j < 3; j++)
      if (v->dims[j] == 0 || v->dims[j] > p->max)
        return block_bad(p, i, f);
    return block_threads(p, v->dims, f);
  case P_OPTIONS:
  case P_NAMES:
    if (v->n > p->max)
      return strings_bad(p, i, f);
    for (uint32_t k = 0; k < v->n; k++)
      if ((rc = string_check(p, k, v->strv[k], strlen(v->strv[k]), f)) != 0)
        return rc;
    return 0;
  case P_LAUNCH_ARGS:
    if ((rc = largs_count(p, v->n, f)) != 0)
      return rc;
    for (uint32_t k = 0; k < v->n; k++)
      if (v->largs[k].kind < LARG_BUF || v->largs[k].kind > LARG_F64)
        return larg_unknown(f, k);
    return 0;
  default:
    return 0;
  }
}

/* ----------------------------------------------------- msgpack decoding */

static int decode_uint(const param_t *p, unsigned i, const msgpack_object *o,
                       uint64_t max, uint64_t *out, param_fault_t *f)
{
  int rc = proto_obj_uint(o, max, out);

  if (rc == HIPD_ERANGE)
    return uint_range(p, i, max, f);
  return rc != 0 ? bad_type(p, i, o, f) : 0;
}

static int decode_str(const param_t *p, unsigned i, const msgpack_object *o,
                      msgpack_zone *zone, param_value_t *v, param_fault_t *f)
{
  int rc;

  if (o->type != MSGPACK_OBJECT_STR)
    return bad_type(p, i, o, f);
  if ((rc = str_check(p, i, o->via.str.ptr, o->via.str.size, f)) != 0)
    return rc;
  if ((v->s = zone_str(zone, o->via.str.ptr, o->via.str.size)) == NULL)
    return no_memory(f);
  v->len = o->via.str.size;
  return 0;
}

/* Launch dims: x, or [x], [x, y] or [x, y, z]; missing ones are 1. */
static int decode_dims(const param_t *p, unsigned i, const msgpack_object *o,
                       param_value_t *v, param_fault_t *f)
{
  int rc;

  v->dims[0] = v->dims[1] = v->dims[2] = 1;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if ((rc = dim_check(p, i, 0, o->via.u64, f)) != 0)
      return rc;
    v->dims[0] = (uint32_t)o->via.u64;
    return 0;
  }
  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 ||
      o->via.array.size > 3)
    return dims_bad(p, i, f);
  for (uint32_t j = 0; j < o->via.array.size; j++) {
    uint64_t d;
    if (proto_obj_uint(&o->via.array.ptr[j], p->max, &d) != 0)
      return dims_bad(p, i, f);
    if ((rc = dim_check(p, i, j, d, f)) != 0)
      return rc;
    v->dims[j] = (uint32_t)d;
  }
  return 0;
}

/* The code generator's block: each dimension 1 to max, and at most max
 * threads in all. */
static int decode_block(const param_t *p, unsigned i, const msgpack_object *o,
                        param_value_t *v, param_fault_t *f)
{
  v->dims[0] = v->dims[1] = v->dims[2] = 1;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= 1 &&
      o->via.u64 <= p->max) {
    v->dims[0] = (uint32_t)o->via.u64;
  } else if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 1 &&
             o->via.array.size <= 3) {
    for (uint32_t k = 0; k < o->via.array.size; k++) {
      uint64_t d;
      if (proto_obj_uint(&o->via.array.ptr[k], p->max, &d) != 0 || d == 0)
        return block_bad(p, i, f);
      v->dims[k] = (uint32_t)d;
    }
  } else {
    return block_bad(p, i, f);
  }
  return block_threads(p, v->dims, f);
}

/* An array of strings: compiler options or names (soa_params). */
static int decode_strings(const param_t *p, unsigned i, const msgpack_object *o,
                          msgpack_zone *zone, param_value_t *v,
                          param_fault_t *f)
{
  const char **sv;
  uint32_t n;
  int rc;

  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > p->max)
    return strings_bad(p, i, f);
  n = o->via.array.size;
  sv = msgpack_zone_malloc(zone, (n ? n : 1) * sizeof(*sv));
  if (sv == NULL)
    return no_memory(f);
  for (uint32_t k = 0; k < n; k++) {
    const msgpack_object *e = &o->via.array.ptr[k];
    if (e->type != MSGPACK_OBJECT_STR)
      return string_bad(p, k, f);
    if ((rc = string_check(p, k, e->via.str.ptr, e->via.str.size, f)) != 0)
      return rc;
    if ((sv[k] = zone_str(zone, e->via.str.ptr, e->via.str.size)) == NULL)
      return no_memory(f);
  }
  v->strv = sv;
  v->n = n;
  return 0;
}

/* Launch argument @p k, @p a: [kind, value(, offset)]. */
static int decode_larg(uint32_t k, const msgpack_object *a, param_larg_t *d,
                       param_fault_t *f)
{
  const msgpack_object *kind, *v;
  int64_t iv;
  double dv;

  if (a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size < 2 ||
      a->via.array.size > 3 || a->via.array.ptr[0].type != MSGPACK_OBJECT_STR)
    return larg_fail(f, k, "must be [kind, value] with kind ",
                     "buf, ptr, i32, i64, f32 or f64");
  kind = &a->via.array.ptr[0];
  v = &a->via.array.ptr[1];
  if (proto_obj_streq(kind, "buf")) {
    d->kind = LARG_BUF;
    d->u = v->via.u64; /* as given: the bind's error names it */
    if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
      return fault(f, HIPD_EHANDLE,
                   "buffer argument 0x%llx is not a valid buffer handle",
                   (unsigned long long)d->u);
    if (a->via.array.size == 3 &&
        proto_obj_uint(&a->via.array.ptr[2], UINT64_MAX, &d->off) != 0)
      return larg_fail(f, k, "the buffer offset must be ",
                       "an unsigned integer");
    return 0;
  }
  if (proto_obj_streq(kind, "ptr")) {
    if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
      return larg_fail(f, k, "a raw pointer must be ", "an unsigned integer");
    d->kind = LARG_PTR;
    d->u = v->via.u64;
    return 0;
  }
  if (proto_obj_streq(kind, "i32")) {
    if (proto_obj_int(v, INT32_MIN, UINT32_MAX, &iv) != 0)
      return larg_fail(f, k, "an i32 must be ", "an integer in 32 bits");
    d->kind = LARG_I32;
    d->v.i32 = (int32_t)(uint32_t)iv;
    return 0;
  }
  if (proto_obj_streq(kind, "i64")) {
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      d->v.i64 = (int64_t)v->via.u64;
    else if (proto_obj_int(v, INT64_MIN, INT64_MAX, &iv) == 0)
      d->v.i64 = iv;
    else
      return larg_fail(f, k, "an i64 must be ", "an integer");
    d->kind = LARG_I64;
    return 0;
  }
  if (proto_obj_streq(kind, "f32") || proto_obj_streq(kind, "f64")) {
    if (proto_obj_double(v, &dv) != 0)
      return larg_fail(f, k, "a float must be ", "a number");
    if (proto_obj_streq(kind, "f32")) {
      d->kind = LARG_F32;
      d->v.f32 = (float)dv;
    } else {
      d->kind = LARG_F64;
      d->v.f64 = dv;
    }
    return 0;
  }
  return larg_unknown(f, k);
}

static int decode_largs(const param_t *p, unsigned i, const msgpack_object *o,
                        msgpack_zone *zone, param_value_t *v, param_fault_t *f)
{
  param_larg_t *la;
  uint32_t n;
  int rc;

  if (o->type != MSGPACK_OBJECT_ARRAY)
    return bad_type(p, i, o, f);
  n = o->via.array.size;
  if ((rc = largs_count(p, n, f)) != 0)
    return rc;
  la = msgpack_zone_malloc(zone, (n ? n : 1) * sizeof(*la));
  if (la == NULL)
    return no_memory(f);
  memset(la, 0, (n ? n : 1) * sizeof(*la));
  for (uint32_t k = 0; k < n; k++)
    if ((rc = decode_larg(k, &o->via.array.ptr[k], &la[k], f)) != 0)
      return rc;
  v->largs = la;
  v->n = n;
  return 0;
}

int proto_param_decode(const param_t *p, unsigned i, const msgpack_object *o,
                       msgpack_zone *zone, param_value_t *v, param_fault_t *f)
{
  int rc;

  v->o = o;
  if (o != NULL && o->type == MSGPACK_OBJECT_NIL)
    o = NULL;
  v->present = o != NULL;
  if (o == NULL) {
    if (p->optional || p->kind == P_REST)
      return 0;
    return p->kind == P_DIMS ? dims_bad(p, i, f) : bad_type(p, i, v->o, f);
  }
  switch (p->kind) {
  case P_UINT:
  case P_DEVICE:
    return decode_uint(p, i, o, p->max, &v->u, f);
  case P_INT:
    rc = proto_obj_int(o, p->min, (int64_t)p->max, &v->i);
    if (rc == HIPD_ERANGE)
      return int_range(p, i, f);
    return rc != 0 ? bad_type(p, i, o, f) : 0;
  case P_BOOL:
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
      return bad_type(p, i, o, f);
    v->b = o->via.boolean;
    return 0;
  case P_BYTES:
    return proto_obj_bytes(o, &v->s, &v->len) != 0 ? bad_type(p, i, o, f) : 0;
  case P_BIN:
    if (o->type != MSGPACK_OBJECT_BIN)
      return bad_type(p, i, o, f);
    v->s = o->via.bin.ptr;
    v->len = o->via.bin.size;
    return 0;
  case P_STR:
    return decode_str(p, i, o, zone, v, f);
  case P_HANDLE:
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
      return bad_type(p, i, o, f);
    v->u = o->via.u64;
    return 0;
  case P_DIMS:
    return decode_dims(p, i, o, v, f);
  case P_BLOCK:
    return decode_block(p, i, o, v, f);
  case P_OPTIONS:
  case P_NAMES:
    return decode_strings(p, i, o, zone, v, f);
  case P_TARGET:
    /* An architecture, or a device id (a uint, bounded as one). */
    if (o->type == MSGPACK_OBJECT_STR)
      return decode_str(p, i, o, zone, v, f);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
        o->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
      return bad_type(p, i, o, f);
    return decode_uint(p, i, o, UINT32_MAX, &v->u, f);
  case P_LAUNCH_ARGS:
    return decode_largs(p, i, o, zone, v, f);
  default: /* P_ANY, P_REST: the handler's */
    return 0;
  }
}
