/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_expr.c: the HIP generator's constants and
 * expressions (gen_expr, gen_lvalue); split from gen_hip.c, whose header
 * comment says what the generated code looks like. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/gen_emit.h"
#include "codegen/gen_expr.h"
#include "codegen/soa.h"
#include "hipd.h"

/* ----------------------------------------------------------- constants */

/* The shortest decimal that reads back as @p v (a float when @p single),
 * with a '.' or an exponent. */
static void fmt_real(char *buf, size_t size, double v, int single)
{
  char fixed[64];

  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
      break;
  }
  /* 10 rather than 1e+01: fixed notation where it is as exact and short */
  if (strchr(buf, 'e') != NULL)
    for (int prec = 0; prec <= 17; prec++) {
      snprintf(fixed, sizeof(fixed), "%.*f", prec, v);
      if (strlen(fixed) > 20)
        break;
      if (single ? strtof(fixed, NULL) == (float)v : strtod(fixed, NULL) == v) {
        snprintf(buf, size, "%s", fixed);
        break;
      }
    }
  if (strpbrk(buf, ".e") == NULL && strlen(buf) + 3 < size)
    strcat(buf, ".0");
}

static void gen_const(strbuf_t *b, const ir_const_t *c)
{
  char num[64];

  switch (c->kind) {
  case IR_C_I32:
    if (c->i == INT32_MIN)
      strbuf_add(b, "(-2147483647 - 1)");
    else
      strbuf_printf(b, c->i < 0 ? "(%lld)" : "%lld", (long long)c->i);
    break;
  case IR_C_I64:
    if (c->i == INT64_MIN)
      strbuf_add(b, "(-9223372036854775807LL - 1)");
    else
      strbuf_printf(b, c->i < 0 ? "(%lldLL)" : "%lldLL", (long long)c->i);
    break;
  case IR_C_F32: {
    float f = (float)c->f; /* what the constant is as a float */
    if (isnan(f))
      strbuf_add(b, "__int_as_float(0x7fc00000)");
    else if (isinf(f))
      strbuf_add(b, f > 0 ? "__int_as_float(0x7f800000)"
                          : "(-__int_as_float(0x7f800000))");
    else {
      fmt_real(num, sizeof(num), f, 1);
      strbuf_printf(b, signbit(f) ? "(%sf)" : "%sf", num);
    }
    break;
  }
  case IR_C_F64:
    if (isnan(c->f))
      strbuf_add(b, "__longlong_as_double(0x7ff8000000000000LL)");
    else if (isinf(c->f))
      strbuf_add(b, c->f > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                             : "(-__longlong_as_double(0x7ff0000000000000LL))");
    else {
      fmt_real(num, sizeof(num), c->f, 0);
      strbuf_printf(b, signbit(c->f) ? "(%s)" : "%s", num);
    }
    break;
  case IR_C_BOOL:
    strbuf_add(b, c->b ? "1" : "0");
    break;
  case IR_C_F16: {
    /* the f32 constant narrowed as cast f16 narrows it (to nearest even);
     * the binary16 value is exact as a float literal */
    float h = cg_h2f(cg_f2h((float)c->f));
    if (isnan(h))
      strbuf_add(b, "__float2half(__int_as_float(0x7fc00000))");
    else if (isinf(h))
      strbuf_add(b, h > 0 ? "__float2half(__int_as_float(0x7f800000))"
                          : "__float2half(-__int_as_float(0x7f800000))");
    else {
      fmt_real(num, sizeof(num), h, 1);
      strbuf_printf(b, signbit(h) ? "__float2half(-%sf)" : "__float2half(%sf)",
                    signbit(h) ? num + 1 : num);
    }
    break;
  }
  case IR_C_U8:
    strbuf_printf(b, "((unsigned char)%lld)", (long long)c->i);
    break;
  default:
    strbuf_add(b, "((void)0)");
  }
}

/* ---------------------------------------------------------- expressions */

static const char *const binops[] = {" + ",  " - ",  " * ",  " / ",  " % ",
                                     " == ", " != ", " < ",  " <= ", " > ",
                                     " >= ", " && ", " || ", " << ", " >> ",
                                     " & ",  " | ",  " ^ "};
static const char *const unops[] = {"-", "!", "~"};

int gen_expr_simple(const ir_expr_t *e)
{
  switch (e->kind) {
  case IR_E_CONST:
  case IR_E_ALEN:
    return 1;
  case IR_E_VAR:
    return !e->u.var.decl->soa;
  case IR_E_FIELD:
    return gen_expr_simple(e->u.field.rec);
  case IR_E_AREAD:
    return !e->u.aread.decl->soa && gen_expr_simple(e->u.aread.index);
  case IR_E_AREADX:
    return gen_expr_simple(e->u.areadx.base) &&
           gen_expr_simple(e->u.areadx.index);
  case IR_E_BINOP:
    return gen_expr_simple(e->u.bin.l) && gen_expr_simple(e->u.bin.r);
  case IR_E_UNOP:
    return gen_expr_simple(e->u.un.arg);
  case IR_E_CAST:
    return gen_expr_simple(e->u.cast.arg);
  default:
    return 0;
  }
}

/* @p n expressions as C, comma-separated. */
static int gen_list(gen_t *g, strbuf_t *b, uint32_t n, ir_expr_t *const *items)
{
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0)
      strbuf_add(b, ", ");
    if (gen_expr(g, b, items[i]) != 0)
      return HIPD_EIR;
  }
  return 0;
}

/* The variant a match is on: that of its first constructor pattern, or
 * NULL when it has only a wildcard. */
const ir_variant_t *gen_match_variant(ir_pattern_t *const *pats, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    if (pats[i]->kind == IR_P_CTOR)
      return pats[i]->def->variant;
  return NULL;
}

/* Point the binders of @p p at the payloads of scrutinee @p s. */
static int bind_payloads(gen_t *g, const ir_pattern_t *p, const char *s)
{
  for (uint32_t j = 0; j < p->nbinders; j++) {
    ir_var_t *v = p->binders[j];
    if (v == NULL)
      continue;
    if (p->def->npayload == 1)
      v->cname = gen_arena_printf(g, "%s.data.%s_v", s, p->def->name);
    else
      v->cname = gen_arena_printf(g, "%s.data.%s_v._%u", s, p->def->name, j);
    if (v->cname == NULL)
      return HIPD_ENOMEM;
  }
  return 0;
}

/* A match expression: a chain of conditionals on the tag, the last case
 * the fallback (the decoder made sure the match is exhaustive). A
 * scrutinee that is not simple is evaluated once, as the parameter of a
 * lambda called on the spot. */
static int gen_ematch(gen_t *g, strbuf_t *b, const ir_expr_t *e)
{
  uint32_t n = e->u.match.n;
  ir_pattern_t **pats = malloc(n * sizeof(*pats));
  const ir_variant_t *v;
  strbuf_t scrut;
  char tmp[32];
  const char *s;
  int rc = 0, simple = gen_expr_simple(e->u.match.scrut);

  if (pats == NULL)
    return gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  for (uint32_t i = 0; i < n; i++)
    pats[i] = e->u.match.cases[i].pat;
  v = gen_match_variant(pats, n);
  free(pats);
  strbuf_init(&scrut, 0);
  if (gen_expr(g, &scrut, e->u.match.scrut) != 0 || strbuf_failed(&scrut)) {
    strbuf_free(&scrut);
    return gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  }
  if (v == NULL) { /* only a wildcard */
    if (!simple)
      strbuf_printf(b, "((void)(%s), ", scrut.p);
    rc = gen_expr(g, b, e->u.match.cases[0].body);
    if (!simple)
      strbuf_addc(b, ')');
    strbuf_free(&scrut);
    return rc;
  }
  if (simple) {
    s = scrut.p;
  } else {
    gen_temp(g, "m", tmp, sizeof(tmp));
    strbuf_printf(b, "[&](const %s &%s) { return ", v->cname, tmp);
    s = tmp;
  }
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    const ir_ecase_t *c = &e->u.match.cases[i];
    if (c->pat->kind == IR_P_CTOR)
      rc = bind_payloads(g, c->pat, s);
    if (rc != 0)
      break;
    if (i + 1 < n)
      strbuf_printf(b, "((%s.tag == %s) ? ", s, c->pat->def->name);
    rc = gen_expr(g, b, c->body);
    if (i + 1 < n)
      strbuf_add(b, " : ");
  }
  for (uint32_t i = 0; i + 1 < n; i++)
    strbuf_addc(b, ')');
  if (!simple)
    strbuf_printf(b, "; }(%s)", scrut.p);
  strbuf_free(&scrut);
  return rc;
}

static int gen_intrinsic(gen_t *g, strbuf_t *b, const ir_expr_t *e)
{
  uint32_t n = e->u.intr.nargs;
  strbuf_t full, *args = calloc(n ? n : 1, sizeof(*args));
  const char **strs = calloc(n ? n : 1, sizeof(*strs));
  intr_def_t def;
  char msg[400];
  int rc = 0;

  strbuf_init(&full, 0);
  if (args == NULL || strs == NULL) {
    free(args);
    free(strs);
    return gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  }
  for (uint32_t i = 0; i < e->u.intr.npath; i++) {
    strbuf_add(&full, e->u.intr.path[i]);
    strbuf_addc(&full, '.');
  }
  strbuf_add(&full, e->u.intr.name);
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    strbuf_init(&args[i], 0);
    rc = gen_expr(g, &args[i], e->u.intr.args[i]);
    strs[i] = args[i].p ? args[i].p : "";
    if (rc == 0 && strbuf_failed(&args[i]))
      rc = gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  }
  if (rc == 0 && strbuf_failed(&full))
    rc = gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  if (rc == 0 && intr_resolve(g->o->intrinsics, g->o->platform, full.p,
                              e->u.intr.name, n, &def, msg, sizeof(msg)) != 0)
    rc = gen_fail(g, HIPD_EINTRINSIC, e->path, "%s", msg);
  if (rc == 0 && def.helper != NULL)
    rc = gen_use_intr_helper(g, def.helper);
  if (rc == 0)
    intr_expand(b, &def, strs, n);
  for (uint32_t i = 0; i < n; i++)
    strbuf_free(&args[i]);
  free(args);
  free(strs);
  strbuf_free(&full);
  return rc;
}

/* ----------------------------------------------------- SoA-lowered reads */

/* If @p e (a field or aread) reads an SoA param, append the lowered read
 * to @p b and set *handled (soa.c says what it looks like). */
static int read_soa(gen_t *g, strbuf_t *b, const ir_expr_t *e, int *handled)
{
  const char *fields[SOA_CHAIN_MAX];
  const ir_path_t *paths[SOA_CHAIN_MAX];
  const ir_expr_t *cur = e;
  const ir_record_t *rec;
  soa_param_t *sp;
  strbuf_t prefix, idx;
  int n = 0, rc;

  *handled = 0;
  while (cur->kind == IR_E_FIELD && n < SOA_CHAIN_MAX) {
    fields[n] = cur->u.field.field;
    paths[n] = cur->path;
    n++;
    cur = cur->u.field.rec;
  }
  if (cur->kind != IR_E_AREAD || !cur->u.aread.decl->soa)
    return 0;
  if (n == SOA_CHAIN_MAX)
    return gen_fail(g, HIPD_EIR, e->path, "more than %d nested fields",
                    SOA_CHAIN_MAX - 1);
  sp = soa_find(g, cur->u.aread.decl);
  strbuf_init(&prefix, 0);
  strbuf_init(&idx, 0);
  rc = soa_chain_resolve(g, sp, fields, paths, n, &rec, &prefix);
  if (rc == 0)
    rc = gen_expr(g, &idx, cur->u.aread.index);
  if (rc == 0 && strbuf_failed(&idx))
    rc = gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  if (rc == 0) {
    if (rec == NULL) {
      strbuf_printf(b, "%s[%s]", prefix.p, idx.p);
    } else if (gen_expr_simple(cur->u.aread.index)) {
      soa_value(g, b, rec, prefix.p, idx.p);
    } else {
      /* the index is evaluated once */
      char tmp[32];
      gen_temp(g, "i", tmp, sizeof(tmp));
      strbuf_printf(b, "[&](const long long %s) { return ", tmp);
      soa_value(g, b, rec, prefix.p, tmp);
      strbuf_printf(b, "; }(%s)", idx.p);
    }
    *handled = 1;
  }
  strbuf_free(&prefix);
  strbuf_free(&idx);
  return rc;
}

/* ---------------------------------------------------------- expressions */

int gen_expr(gen_t *g, strbuf_t *b, const ir_expr_t *e)
{
  char t[300];
  int handled = 0;

  if (g->failed)
    return g->err->code;
  switch (e->kind) {
  case IR_E_CONST:
    gen_const(b, &e->u.c);
    return 0;
  case IR_E_VAR:
    if (e->u.var.decl->soa)
      return gen_fail(g, HIPD_EIR, e->path,
                      "'%s' is lowered as SoA (one pointer per field): it "
                      "can only be indexed (aread, aelem) or measured "
                      "(alen), not used as a value",
                      e->u.var.name);
    strbuf_add(b, e->u.var.decl->cname);
    return 0;
  case IR_E_BINOP:
    strbuf_addc(b, '(');
    if (gen_expr(g, b, e->u.bin.l) != 0)
      return g->err->code;
    strbuf_add(b, binops[e->u.bin.op]);
    if (gen_expr(g, b, e->u.bin.r) != 0)
      return g->err->code;
    strbuf_addc(b, ')');
    return 0;
  case IR_E_UNOP:
    strbuf_addc(b, '(');
    strbuf_add(b, unops[e->u.un.op]);
    if (gen_expr(g, b, e->u.un.arg) != 0)
      return g->err->code;
    strbuf_addc(b, ')');
    return 0;
  case IR_E_AREAD:
  case IR_E_FIELD:
    if (read_soa(g, b, e, &handled) != 0)
      return g->err->code;
    if (handled)
      return 0;
    if (e->kind == IR_E_FIELD) {
      if (gen_expr(g, b, e->u.field.rec) != 0)
        return g->err->code;
      strbuf_printf(b, ".%s", e->u.field.field);
      return 0;
    }
    strbuf_printf(b, "%s[", e->u.aread.decl->cname);
    if (gen_expr(g, b, e->u.aread.index) != 0)
      return g->err->code;
    strbuf_addc(b, ']');
    return 0;
  case IR_E_AREADX:
    strbuf_addc(b, '(');
    if (gen_expr(g, b, e->u.areadx.base) != 0)
      return g->err->code;
    strbuf_add(b, ")[");
    if (gen_expr(g, b, e->u.areadx.index) != 0)
      return g->err->code;
    strbuf_addc(b, ']');
    return 0;
  case IR_E_INTRINSIC:
    return gen_intrinsic(g, b, e);
  case IR_E_CAST:
    /* bool is an int in C but converts as a truth value */
    if (e->u.cast.type->kind == IR_T_BOOL)
      strbuf_add(b, "((int)(bool)");
    else if (e->u.cast.type->kind == IR_T_F16) {
      /* narrowing through the intrinsic (round to nearest even), after a
       * barrier that keeps the f32 value from being fused into it (as
       * Sarek's CUDA generator does: see gen_hip.c's f16 preamble) */
      strbuf_add(b, "__float2half(sarek_f32_barrier(");
      if (gen_expr(g, b, e->u.cast.arg) != 0)
        return g->err->code;
      strbuf_add(b, "))");
      return 0;
    } else
      strbuf_printf(b, "((%s)", gen_ctype(e->u.cast.type, t, sizeof(t)));
    if (gen_expr(g, b, e->u.cast.arg) != 0)
      return g->err->code;
    strbuf_addc(b, ')');
    return 0;
  case IR_E_TUPLE:
    strbuf_addc(b, '{');
    if (gen_list(g, b, e->u.tuple.n, e->u.tuple.items) != 0)
      return g->err->code;
    strbuf_addc(b, '}');
    return 0;
  case IR_E_APP:
    strbuf_printf(b, "%s(", e->u.app.helper->name);
    if (gen_list(g, b, e->u.app.nargs, e->u.app.args) != 0)
      return g->err->code;
    strbuf_addc(b, ')');
    return 0;
  case IR_E_RECORD: {
    const ir_record_t *r = e->u.record.def;
    strbuf_printf(b, "%s{", r->cname);
    for (uint32_t j = 0; j < r->nfields; j++)
      for (uint32_t i = 0; i < e->u.record.n; i++)
        if (strcmp(e->u.record.fields[i].field, r->fields[j].name) == 0) {
          if (j > 0)
            strbuf_add(b, ", ");
          if (gen_expr(g, b, e->u.record.fields[i].value) != 0)
            return g->err->code;
        }
    strbuf_addc(b, '}');
    return 0;
  }
  case IR_E_VARIANT:
    strbuf_printf(b, "%s(", e->u.variant.def->maker);
    if (gen_list(g, b, e->u.variant.nargs, e->u.variant.args) != 0)
      return g->err->code;
    strbuf_addc(b, ')');
    return 0;
  case IR_E_ALEN:
    strbuf_printf(b, "sarek_%s_length", e->u.aread.decl->cname);
    return 0;
  case IR_E_IF:
    strbuf_addc(b, '(');
    if (gen_expr(g, b, e->u.cond.cond) != 0)
      return g->err->code;
    strbuf_add(b, " ? ");
    if (gen_expr(g, b, e->u.cond.then) != 0)
      return g->err->code;
    strbuf_add(b, " : ");
    if (gen_expr(g, b, e->u.cond.els) != 0)
      return g->err->code;
    strbuf_addc(b, ')');
    return 0;
  case IR_E_MATCH:
    return gen_ematch(g, b, e);
  default: /* acreate: the decoder allows it only as a let initializer */
    return gen_fail(g, HIPD_EIR, e->path, "acreate outside a let");
  }
}

int gen_lvalue(gen_t *g, strbuf_t *b, const ir_lvalue_t *l)
{
  switch (l->kind) {
  case IR_L_VAR:
    strbuf_add(b, l->u.var.decl->cname);
    return 0;
  case IR_L_AELEM:
    if (l->u.aelem.decl->soa) /* assign_soa (gen_stmt.c) takes these */
      return gen_fail(g, HIPD_EIR, l->path, "unexpected SoA element");
    strbuf_printf(b, "%s[", l->u.aelem.decl->cname);
    if (gen_expr(g, b, l->u.aelem.index) != 0)
      return g->err->code;
    strbuf_addc(b, ']');
    return 0;
  case IR_L_AELEMX:
    strbuf_addc(b, '(');
    if (gen_expr(g, b, l->u.aelemx.base) != 0)
      return g->err->code;
    strbuf_add(b, ")[");
    if (gen_expr(g, b, l->u.aelemx.index) != 0)
      return g->err->code;
    strbuf_addc(b, ']');
    return 0;
  default:
    if (gen_lvalue(g, b, l->u.field.target) != 0)
      return g->err->code;
    strbuf_printf(b, ".%s", l->u.field.field);
    return 0;
  }
}

/* One expression into a string of its own (freed by the caller). */
int gen_expr_string(gen_t *g, const ir_expr_t *e, strbuf_t *b)
{
  strbuf_init(b, 0);
  if (gen_expr(g, b, e) != 0)
    return g->err->code;
  if (strbuf_failed(b) || b->p == NULL)
    strbuf_addn(b, "", 0);
  if (strbuf_failed(b))
    return gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  return 0;
}
