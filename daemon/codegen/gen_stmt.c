/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_stmt.c: the HIP generator's statements (gen_stmt:
 * blocks, matches, loops, lets, native code); split from gen_hip.c, whose
 * header comment says what the generated code looks like. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_coopmat.h"
#include "codegen/gen_emit.h"
#include "codegen/gen_expr.h"
#include "codegen/gen_stmt.h"
#include "codegen/soa.h"
#include "hipd.h"

/* ---------------------------------------------------- SoA-lowered writes */

/* If @p s (an assign) writes an SoA param, emit the lowered statements
 * and set *handled (soa.c says what they look like). */
static int assign_soa(gen_t *g, const ir_stmt_t *s, int *handled)
{
  const char *fields[SOA_CHAIN_MAX];
  const ir_path_t *paths[SOA_CHAIN_MAX];
  const ir_lvalue_t *cur = s->u.assign.target;
  const ir_record_t *rec;
  soa_param_t *sp;
  strbuf_t prefix, idx, val;
  int n = 0, rc;

  *handled = 0;
  while (cur->kind == IR_L_FIELD && n < SOA_CHAIN_MAX) {
    fields[n] = cur->u.field.field;
    paths[n] = cur->path;
    n++;
    cur = cur->u.field.target;
  }
  if (cur->kind != IR_L_AELEM || !cur->u.aelem.decl->soa)
    return 0;
  if (n == SOA_CHAIN_MAX)
    return gen_fail(g, HIPD_EIR, s->path, "more than %d nested fields",
                    SOA_CHAIN_MAX - 1);
  sp = soa_find(g, cur->u.aelem.decl);
  strbuf_init(&prefix, 0);
  strbuf_init(&idx, 0);
  strbuf_init(&val, 0);
  rc = soa_chain_resolve(g, sp, fields, paths, n, &rec, &prefix);
  /* the value before the index, as in a C++17 assignment */
  if (rc == 0)
    rc = gen_expr(g, &val, s->u.assign.value);
  if (rc == 0)
    rc = gen_expr(g, &idx, cur->u.aelem.index);
  if (rc == 0 && (strbuf_failed(&idx) || strbuf_failed(&val)))
    rc = gen_fail(g, HIPD_ENOMEM, s->path, "out of memory");
  if (rc == 0 && rec == NULL) {
    gen_line(g);
    strbuf_printf(&g->out, "%s[%s] = %s;\n", prefix.p, idx.p, val.p);
  } else if (rc == 0) {
    char v[32], k[32];
    gen_temp(g, "v", v, sizeof(v));
    gen_temp(g, "i", k, sizeof(k));
    gen_line(g);
    strbuf_add(&g->out, "{\n");
    g->indent++;
    gen_line(g);
    strbuf_printf(&g->out, "const %s %s = %s;\n", rec->cname, v, val.p);
    gen_line(g);
    strbuf_printf(&g->out, "const auto %s = %s;\n", k, idx.p);
    rc = soa_scatter(g, rec, prefix.p, v, k);
    g->indent--;
    gen_line(g);
    strbuf_add(&g->out, "}\n");
  }
  if (rc == 0)
    *handled = 1;
  strbuf_free(&prefix);
  strbuf_free(&idx);
  strbuf_free(&val);
  return rc;
}

/* ----------------------------------------------------------- statements */

/* @p s as the body of a C block whose '{' the caller wrote. */
static int gen_scoped(gen_t *g, const ir_stmt_t *s)
{
  size_t mark = gen_vis_mark(g);
  int rc;

  g->indent++;
  rc = gen_stmt(g, s);
  g->indent--;
  gen_vis_pop(g, mark);
  return rc;
}

static int gen_smatch(gen_t *g, const ir_stmt_t *s)
{
  uint32_t n = s->u.match.n;
  ir_pattern_t **pats = malloc(n * sizeof(*pats));
  const ir_variant_t *v;
  char tmp[32], t[300];
  strbuf_t scrut;
  int rc = 0;

  if (pats == NULL)
    return gen_fail(g, HIPD_ENOMEM, s->path, "out of memory");
  for (uint32_t i = 0; i < n; i++)
    pats[i] = s->u.match.cases[i].pat;
  v = gen_match_variant(pats, n);
  free(pats);
  if (gen_expr_string(g, s->u.match.scrut, &scrut) != 0) {
    strbuf_free(&scrut);
    return g->err->code;
  }
  gen_line(g);
  strbuf_add(&g->out, "{\n");
  if (v == NULL) { /* only a wildcard */
    if (!gen_expr_simple(s->u.match.scrut)) {
      g->indent++;
      gen_line(g);
      strbuf_printf(&g->out, "(void)(%s);\n", scrut.p);
      g->indent--;
    }
    rc = gen_scoped(g, s->u.match.cases[0].body);
    gen_line(g);
    strbuf_add(&g->out, "}\n");
    strbuf_free(&scrut);
    return rc;
  }
  gen_temp(g, "m", tmp, sizeof(tmp));
  g->indent++;
  gen_line(g);
  strbuf_printf(&g->out, "const %s %s = %s;\n", v->cname, tmp, scrut.p);
  gen_line(g);
  strbuf_printf(&g->out, "switch (%s.tag) {\n", tmp);
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    const ir_scase_t *c = &s->u.match.cases[i];
    size_t mark = gen_vis_mark(g);
    gen_line(g);
    if (c->pat->kind == IR_P_CTOR)
      strbuf_printf(&g->out, "case %s: {\n", c->pat->def->name);
    else
      strbuf_add(&g->out, "default: {\n");
    g->indent++;
    for (uint32_t j = 0; j < c->pat->nbinders && rc == 0; j++) {
      ir_var_t *b = c->pat->binders[j];
      if (b == NULL)
        continue;
      rc = gen_declare_var(g, b);
      if (rc != 0)
        break;
      gen_line(g);
      strbuf_printf(&g->out, "%s %s = %s.data.%s_v",
                    gen_ctype(b->type, t, sizeof(t)), b->cname, tmp,
                    c->pat->def->name);
      if (c->pat->def->npayload > 1)
        strbuf_printf(&g->out, "._%u", j);
      strbuf_add(&g->out, ";\n");
    }
    if (rc == 0)
      rc = gen_stmt(g, c->body);
    gen_line(g);
    strbuf_add(&g->out, "break;\n");
    g->indent--;
    gen_vis_pop(g, mark);
    gen_line(g);
    strbuf_add(&g->out, "}\n");
  }
  gen_line(g);
  strbuf_add(&g->out, "}\n");
  g->indent--;
  gen_line(g);
  strbuf_add(&g->out, "}\n");
  strbuf_free(&scrut);
  return rc;
}

/* for (t i = from, end = to; i <= end; i++) { body; if (i == end) break; }:
 * the bound is read once, and the last iteration leaves the loop before
 * the increment could overflow (OCaml's for i = a to max_int ends). */
static int gen_for(gen_t *g, const ir_stmt_t *s)
{
  ir_var_t *v = s->u.sfor.var;
  strbuf_t from, to;
  char t[300], end[32];
  size_t mark;
  int up = s->u.sfor.dir == IR_UPTO, rc;

  if (gen_expr_string(g, s->u.sfor.from, &from) != 0) {
    strbuf_free(&from);
    return g->err->code;
  }
  if (gen_expr_string(g, s->u.sfor.to, &to) != 0) {
    strbuf_free(&from);
    strbuf_free(&to);
    return g->err->code;
  }
  mark = gen_vis_mark(g);
  rc = gen_declare_var(g, v);
  if (rc == 0) {
    gen_temp(g, "end", end, sizeof(end));
    gen_line(g);
    strbuf_printf(&g->out, "for (%s %s = %s, %s = %s; %s %s %s; %s%s) {\n",
                  gen_ctype(v->type, t, sizeof(t)), v->cname, from.p, end, to.p,
                  v->cname, up ? "<=" : ">=", end, v->cname, up ? "++" : "--");
    g->indent++;
    rc = gen_stmt(g, s->u.sfor.body);
    gen_line(g);
    strbuf_printf(&g->out, "if (%s == %s) break;\n", v->cname, end);
    g->indent--;
    gen_line(g);
    strbuf_add(&g->out, "}\n");
  }
  gen_vis_pop(g, mark);
  strbuf_free(&from);
  strbuf_free(&to);
  return rc;
}

/* let v = init in body: the declaration, then the body at the same level
 * (the var stays visible until the enclosing block ends). */
static int gen_let(gen_t *g, const ir_stmt_t *s)
{
  ir_var_t *v = s->u.let.var;
  const ir_expr_t *init = s->u.let.init;
  strbuf_t b;
  char t[300];

  if (init->kind == IR_E_ACREATE) {
    if (gen_expr_string(g, init->u.acreate.size, &b) != 0 ||
        gen_declare_var(g, v)) {
      strbuf_free(&b);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "%s%s %s[%s];\n",
                  init->u.acreate.mem == IR_MEM_SHARED ? "__shared__ " : "",
                  gen_ctype(init->u.acreate.elt, t, sizeof(t)), v->cname, b.p);
  } else {
    if (gen_expr_string(g, init, &b) != 0 || gen_declare_var(g, v) != 0) {
      strbuf_free(&b);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "%s %s = %s;\n", gen_ctype(v->type, t, sizeof(t)),
                  v->cname, b.p);
  }
  strbuf_free(&b);
  return gen_stmt(g, s->u.let.body);
}

static int gen_native(gen_t *g, const ir_stmt_t *s)
{
  for (uint32_t i = 0; i < s->u.native.n; i++)
    if (strcmp(s->u.native.keys[i], "hip") == 0) {
      const char *code = s->u.native.code[i];
      size_t n = strlen(code);
      gen_line(g);
      strbuf_add(&g->out, code);
      if (n == 0 || code[n - 1] != '\n')
        strbuf_addc(&g->out, '\n');
      return 0;
    }
  return gen_fail(g, HIPD_EIR, s->path,
                  "native block has no 'hip' code (the HIP generator uses "
                  "no other framework's)");
}

int gen_stmt(gen_t *g, const ir_stmt_t *s)
{
  strbuf_t a, b;
  intr_def_t def;
  char msg[300];
  int handled = 0, rc = 0;

  if (g->failed)
    return g->err->code;
  switch (s->kind) {
  case IR_S_ASSIGN:
    if (assign_soa(g, s, &handled) != 0 || handled)
      return g->failed ? g->err->code : 0;
    strbuf_init(&a, 0);
    strbuf_init(&b, 0);
    if (gen_lvalue(g, &a, s->u.assign.target) != 0 ||
        gen_expr_string(g, s->u.assign.value, &b) != 0) {
      strbuf_free(&a);
      strbuf_free(&b);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "%s = %s;\n", a.p ? a.p : "", b.p);
    strbuf_free(&a);
    strbuf_free(&b);
    return 0;
  case IR_S_SEQ:
    for (uint32_t i = 0; i < s->u.seq.n && rc == 0; i++)
      rc = gen_stmt(g, s->u.seq.items[i]);
    return rc;
  case IR_S_IF:
    if (gen_expr_string(g, s->u.sif.cond, &a) != 0) {
      strbuf_free(&a);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "if (%s) {\n", a.p);
    strbuf_free(&a);
    if (gen_scoped(g, s->u.sif.then) != 0)
      return g->err->code;
    gen_line(g);
    if (s->u.sif.els != NULL) {
      strbuf_add(&g->out, "} else {\n");
      if (gen_scoped(g, s->u.sif.els) != 0)
        return g->err->code;
      gen_line(g);
    }
    strbuf_add(&g->out, "}\n");
    return 0;
  case IR_S_WHILE:
    if (gen_expr_string(g, s->u.swhile.cond, &a) != 0) {
      strbuf_free(&a);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "while (%s) {\n", a.p);
    strbuf_free(&a);
    rc = gen_scoped(g, s->u.swhile.body);
    gen_line(g);
    strbuf_add(&g->out, "}\n");
    return rc;
  case IR_S_FOR:
    return gen_for(g, s);
  case IR_S_MATCH:
    return gen_smatch(g, s);
  case IR_S_RETURN:
    gen_line(g);
    if (s->u.ret.value->kind == IR_E_CONST &&
        s->u.ret.value->u.c.kind == IR_C_UNIT) {
      strbuf_add(&g->out, "return;\n");
      return 0;
    }
    if (gen_expr_string(g, s->u.ret.value, &a) != 0) {
      strbuf_free(&a);
      return g->err->code;
    }
    strbuf_printf(&g->out, "return %s;\n", a.p);
    strbuf_free(&a);
    return 0;
  case IR_S_BARRIER:
    gen_line(g);
    strbuf_add(&g->out, "__syncthreads();\n");
    return 0;
  case IR_S_WARP_BARRIER:
    if (intr_resolve(NULL, g->o->platform, "warp_barrier", "warp_barrier", 0,
                     &def, msg, sizeof(msg)) != 0)
      return gen_fail(g, HIPD_EINTRINSIC, s->path, "%s", msg);
    gen_line(g);
    intr_expand(&g->out, &def, NULL, 0);
    strbuf_add(&g->out, ";\n");
    return 0;
  case IR_S_FENCE:
    gen_line(g);
    strbuf_add(&g->out, "__threadfence();\n");
    return 0;
  case IR_S_EXPR:
    if (gen_expr_string(g, s->u.ret.value, &a) != 0) {
      strbuf_free(&a);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "%s;\n", a.p);
    strbuf_free(&a);
    return 0;
  case IR_S_EMPTY:
    return 0;
  case IR_S_LET:
  case IR_S_LETMUT:
    return gen_let(g, s);
  case IR_S_PRAGMA:
    gen_line(g);
    strbuf_add(&g->out, "#pragma");
    for (uint32_t i = 0; i < s->u.pragma.n; i++)
      strbuf_printf(&g->out, " %s", s->u.pragma.hints[i]);
    strbuf_addc(&g->out, '\n');
    return gen_stmt(g, s->u.pragma.body);
  case IR_S_BLOCK:
    gen_line(g);
    strbuf_add(&g->out, "{\n");
    rc = gen_scoped(g, s->u.block.body);
    gen_line(g);
    strbuf_add(&g->out, "}\n");
    return rc;
  case IR_S_NATIVE:
    return gen_native(g, s);
  case IR_S_COOPMAT:
    return gen_coopmat(g, s);
  default:
    return gen_fail(g, HIPD_EIR, s->path, "unknown statement");
  }
}
