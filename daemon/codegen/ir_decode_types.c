/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode_types.c: the decoder's types, variables,
 * pattern binders and constants (ir_decode.c, phase 1).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "codegen/ir_decode_internal.h"
#include "hipd.h"
#include "util/array.h"

/* ------------------------------------------------------------- types */

static int add_named(dec_t *d, ir_type_t *t)
{
  if (ARRAY_GROW(d->named, d->nnamed, d->capnamed, 64) != 0)
    return dec_oom(d, t->path);
  d->named[d->nnamed++] = t;
  return 0;
}

int dec_parse_type(dec_t *d, const ir_path_t *at, ir_type_t **out)
{
  unsigned tag;
  ir_type_t *t;
  const ir_path_t *p;

  if (dec_node_open(d, at, IR_TS_ELTTYPE, &tag) != 0 || NEW(d, at, t) == NULL)
    return HIPD_EIR;
  t->kind = (ir_tkind_t)tag;
  t->path = at;
  switch (t->kind) {
  case IR_T_RECORD:
  case IR_T_VARIANT:
    if (dec_read_name(d, dec_pk(d, at, "name"), NAME_TNAME, &t->name) != 0 ||
        add_named(d, t) != 0)
      return HIPD_EIR;
    break;
  case IR_T_ARRAY:
    p = dec_pk(d, at, "elt");
    if (dec_parse_type(d, p, &t->elt) != 0 ||
        dec_read_enum(d, dec_pk(d, at, "mem"), IR_TS_MEMSPACE, &tag) != 0)
      return HIPD_EIR;
    t->mem = (ir_mem_t)tag;
    if (t->elt->kind == IR_T_UNIT || t->elt->kind >= IR_T_ARRAY)
      return dec_fail(d, p, "an array's elements cannot be of type %s",
                      ir_tagsets[IR_TS_ELTTYPE].tags[t->elt->kind]);
    break;
  case IR_T_VEC:
    p = dec_pk(d, at, "elt");
    if (dec_parse_type(d, p, &t->elt) != 0)
      return HIPD_EIR;
    if (t->elt->kind == IR_T_UNIT || t->elt->kind >= IR_T_ARRAY)
      return dec_fail(d, p, "a vec's elements cannot be of type %s",
                      ir_tagsets[IR_TS_ELTTYPE].tags[t->elt->kind]);
    break;
  default:
    break;
  }
  dec_leave(d);
  *out = t;
  return 0;
}

/* -------------------------------------------------------------- vars */

int dec_parse_var(dec_t *d, const ir_path_t *at, ir_var_t **out)
{
  static const char *const keys[] = {"name", "id", "type", "mutable"};
  uint32_t n, seen = 0;
  ir_var_t *v;
  const ir_path_t *tp = NULL;
  int which;

  if (dec_open_map(d, at, "a var", &n) != 0 || NEW(d, at, v) == NULL)
    return HIPD_EIR;
  v->path = at;
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 4, &seen, &which) != 0)
      return HIPD_EIR;
    switch (which) {
    case 0:
      if (dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &v->name) != 0)
        return HIPD_EIR;
      break;
    case 1:
      if (dec_read_uint(d, dec_pk(d, at, "id"), &v->id) != 0)
        return HIPD_EIR;
      break;
    case 2:
      tp = dec_pk(d, at, "type");
      if (dec_parse_type(d, tp, &v->type) != 0)
        return HIPD_EIR;
      break;
    case 3:
      if (dec_read_bool(d, dec_pk(d, at, "mutable"), &v->is_mutable) != 0)
        return HIPD_EIR;
      break;
    }
  }
  dec_leave(d);
  if (dec_map_required(d, at, keys, 4, 7, seen) != 0)
    return HIPD_EIR;
  if (v->type->kind == IR_T_UNIT)
    return dec_fail(d, tp, "a variable cannot be of type unit");
  *out = v;
  return 0;
}

/* A pattern binder: nil, or {"name", "id"}. */
int dec_parse_binder(dec_t *d, const ir_path_t *at, ir_var_t **out)
{
  static const char *const keys[] = {"name", "id"};
  uint32_t n, seen = 0;
  ir_var_t *v;
  int which;

  *out = NULL;
  if (dec_take_nil(d))
    return 0;
  if (dec_open_map(d, at, "a binder (nil or {name, id})", &n) != 0 ||
      NEW(d, at, v) == NULL)
    return HIPD_EIR;
  v->path = at;
  v->vkind = IR_VK_BINDER;
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0 &&
        dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &v->name))
      return HIPD_EIR;
    if (which == 1 && dec_read_uint(d, dec_pk(d, at, "id"), &v->id) != 0)
      return HIPD_EIR;
  }
  dec_leave(d);
  if (dec_map_required(d, at, keys, 2, 3, seen) != 0)
    return HIPD_EIR;
  *out = v;
  return 0;
}

/* ----------------------------------------------------------- constants */

static int float_payload(dec_t *d, const ir_path_t *at, const char *tag,
                         double *out)
{
  val_t v;

  if (dec_rd(d, at, &v) != 0)
    return HIPD_EIR;
  switch (v.t) {
  case V_FLOAT:
    *out = v.f;
    return 0;
  case V_UINT:
    if (v.u > (1ull << 53))
      return dec_fail(d, at,
                      "%s constant %llu is an integer beyond 2^53: send it "
                      "as a float",
                      tag, (unsigned long long)v.u);
    *out = (double)v.u;
    return 0;
  case V_INT:
    if (v.i < -(1ll << 53))
      return dec_fail(d, at,
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
      return dec_fail(d, at,
                      "a %s constant given as a string must be \"nan\", "
                      "\"inf\" or \"-inf\"",
                      tag);
    return 0;
  default:
    return dec_fail(d, at, "expected a number for a %s constant, got %s", tag,
                    dec_vnames[v.t]);
  }
}

int dec_parse_const(dec_t *d, const ir_path_t *at, ir_const_t *c)
{
  unsigned tag;
  const ir_path_t *p;
  val_t v;

  if (dec_node_open(d, at, IR_TS_CONST, &tag) != 0)
    return HIPD_EIR;
  c->kind = (ir_ckind_t)tag;
  p = dec_pk(d, at, "value");
  switch (c->kind) {
  case IR_C_I32:
    if (dec_rd(d, p, &v) != 0)
      return HIPD_EIR;
    if (v.t == V_UINT && v.u <= INT32_MAX)
      c->i = (int64_t)v.u;
    else if (v.t == V_INT && v.i >= INT32_MIN)
      c->i = v.i;
    else if (v.t == V_UINT)
      return dec_fail(d, p, "i32 constant %llu out of range",
                      (unsigned long long)v.u);
    else if (v.t == V_INT)
      return dec_fail(d, p, "i32 constant %lld out of range", (long long)v.i);
    else
      return dec_fail(d, p, "expected an integer for an i32 constant, got %s",
                      dec_vnames[v.t]);
    break;
  case IR_C_I64:
    if (dec_rd(d, p, &v) != 0)
      return HIPD_EIR;
    if (v.t == V_UINT && v.u <= INT64_MAX) {
      c->i = (int64_t)v.u;
    } else if (v.t == V_INT) {
      c->i = v.i;
    } else if (v.t == V_UINT) {
      return dec_fail(d, p, "i64 constant %llu out of range",
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
        return dec_fail(d, p,
                        "'%s' is not an i64 constant (decimal digits, an "
                        "optional '-', within 64 bits)",
                        ir_quote(q, sizeof(q), v.s, v.n));
      c->i = x;
    } else {
      return dec_fail(d, p, "expected an integer for an i64 constant, got %s",
                      dec_vnames[v.t]);
    }
    break;
  case IR_C_F32:
  case IR_C_F64:
    if (float_payload(d, p, c->kind == IR_C_F32 ? "f32" : "f64", &c->f) != 0)
      return HIPD_EIR;
    break;
  case IR_C_BOOL:
    if (dec_read_bool(d, p, &c->b) != 0)
      return HIPD_EIR;
    break;
  case IR_C_F16:
    if (float_payload(d, p, "f16", &c->f) != 0)
      return HIPD_EIR;
    break;
  case IR_C_U8:
    if (dec_rd(d, p, &v) != 0)
      return HIPD_EIR;
    if (v.t == V_UINT && v.u <= 255)
      c->i = (int64_t)v.u;
    else if (v.t == V_UINT)
      return dec_fail(d, p, "u8 constant %llu out of range (0 to 255)",
                      (unsigned long long)v.u);
    else if (v.t == V_INT)
      return dec_fail(d, p, "u8 constant %lld out of range (0 to 255)",
                      (long long)v.i);
    else
      return dec_fail(d, p, "expected an integer for a u8 constant, got %s",
                      dec_vnames[v.t]);
    break;
  default:
    break;
  }
  dec_leave(d);
  return 0;
}
