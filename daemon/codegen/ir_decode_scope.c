/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode_scope.c: the decoder's phase 3 (ir_decode.c):
 * the kernel, then each helper, walked with its scopes, resolving every
 * variable, array, helper, field, constructor and pattern.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "codegen/ir_decode_internal.h"
#include "hipd.h"
#include "util/array.h"

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
      return dec_fail(d, dec_pk(d, v->path, "id"),
                      "id %llu declared twice (first at %s)",
                      (unsigned long long)v->id,
                      ir_path_format(prev->path, first, sizeof(first)));
    if (u64map_put(&d->ids, v->id, v) != 0)
      return dec_oom(d, v->path);
  }
  if ((slot = strmap_slot(&d->names, v->name)) == NULL)
    return dec_oom(d, v->path);
  if (v->vkind == IR_VK_SHARED && *slot != NULL)
    return dec_fail(
        d, dec_pk(d, v->path, "name"),
        "'%s' is already declared in the kernel's top scope (at %s)", v->name,
        ir_path_format(((ir_var_t *)*slot)->path, first, sizeof(first)));
  if (ARRAY_GROW(d->stack, d->nstack, d->capstack, 64) != 0)
    return dec_oom(d, v->path);
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
    return dec_fail(d, at, "var %llu ('%s') is not declared in this function",
                    (unsigned long long)id, name);
  if (strcmp(v->name, name) != 0)
    return dec_fail(d, at, "var %llu is declared as '%s', not '%s'",
                    (unsigned long long)id, v->name, name);
  if (!v->in_scope)
    return dec_fail(d, at, "var %llu ('%s') is not in scope here",
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
    return dec_fail(d, at, "no array named '%s' in scope", name);
  if (v->type->kind != IR_T_ARRAY && v->type->kind != IR_T_VEC)
    return dec_fail(d, at, "'%s' is not an array (it is of type %s)", name,
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
        rc = dec_fail(d, p->path, "a wildcard case must be the last case");
      wild = 1;
      continue;
    }
    c = strmap_get(&d->ctors, p->ctor);
    if (c == NULL) {
      rc = dec_fail(d, dec_pk(d, p->path, "ctor"), "unknown constructor '%s'",
                    p->ctor);
      break;
    }
    if (variant == NULL) {
      variant = c->variant;
      first_ctor = c->name;
      seen = calloc(variant->nctors, sizeof(*seen));
      if (seen == NULL) {
        rc = dec_oom(d, p->path);
        break;
      }
    } else if (c->variant != variant) {
      rc =
          dec_fail(d, dec_pk(d, p->path, "ctor"),
                   "'%s' and '%s' belong to different variants ('%s' and '%s')",
                   first_ctor, c->name, variant->name, c->variant->name);
      break;
    }
    if (seen[c->index] != NULL) {
      rc = dec_fail(d, dec_pk(d, p->path, "ctor"),
                    "constructor '%s' is matched twice (first at %s)", c->name,
                    ir_path_format(seen[c->index]->path, first, sizeof(first)));
      break;
    }
    seen[c->index] = p;
    p->def = c;
    if (p->nbinders != 0 && p->nbinders != c->npayload) {
      rc = dec_fail(d, dec_pk(d, p->path, "binders"),
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
        rc = dec_fail(d, at,
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
    if (resolve_array(d, dec_pk(d, e->path, "array"), e->u.aread.array,
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
      return dec_fail(d, dec_pk(d, e->path, "fn"), "no helper named '%s'",
                      e->u.app.fn);
    if (h->nparams != e->u.app.nargs)
      return dec_fail(d, dec_pk(d, e->path, "args"),
                      "helper '%s' takes %u args, got %u", h->name, h->nparams,
                      e->u.app.nargs);
    e->u.app.helper = h;
    return check_exprs(d, e->u.app.nargs, e->u.app.args);
  case IR_E_RECORD: {
    const ir_path_t *tp = dec_pk(d, e->path, "type");
    r = strmap_get(&d->records, e->u.record.type);
    if (r == NULL)
      return dec_fail(d, tp,
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
        return dec_fail(d, dec_pk(d, f->path, "field"),
                        "record '%s' has no field '%s'", r->name, f->field);
      for (uint32_t m = 0; m < i; m++)
        if (strcmp(e->u.record.fields[m].field, f->field) == 0)
          return dec_fail(d, dec_pk(d, f->path, "field"),
                          "field '%s' is given twice", f->field);
      if (check_expr(d, f->value) != 0)
        return HIPD_EIR;
    }
    for (uint32_t j = 0; j < r->nfields; j++) {
      uint32_t i;
      for (i = 0; i < e->u.record.n; i++)
        if (strcmp(r->fields[j].name, e->u.record.fields[i].field) == 0)
          break;
      if (i == e->u.record.n)
        return dec_fail(d, dec_pk(d, e->path, "fields"),
                        "field '%s' of record '%s' is missing",
                        r->fields[j].name, r->name);
    }
    return 0;
  }
  case IR_E_VARIANT: {
    ir_ctor_t *c = NULL;
    vt = strmap_get(&d->variants, e->u.variant.type);
    if (vt == NULL)
      return dec_fail(d, dec_pk(d, e->path, "type"),
                      strmap_get(&d->records, e->u.variant.type)
                          ? "'%s' is a record type, not a variant"
                          : "unknown variant type '%s'",
                      e->u.variant.type);
    for (uint32_t i = 0; i < vt->nctors; i++)
      if (strcmp(vt->ctors[i].name, e->u.variant.ctor) == 0)
        c = &vt->ctors[i];
    if (c == NULL)
      return dec_fail(d, dec_pk(d, e->path, "ctor"),
                      "variant '%s' has no constructor '%s'", vt->name,
                      e->u.variant.ctor);
    if (c->npayload != e->u.variant.nargs)
      return dec_fail(d, dec_pk(d, e->path, "args"),
                      "'%s' takes %u arg%s, got %u", c->name, c->npayload,
                      c->npayload == 1 ? "" : "s", e->u.variant.nargs);
    e->u.variant.def = c;
    return check_exprs(d, e->u.variant.nargs, e->u.variant.args);
  }
  case IR_E_ALEN:
    if (resolve_array(d, dec_pk(d, e->path, "array"), e->u.aread.array, &v) !=
        0)
      return HIPD_EIR;
    if (v->vkind != IR_VK_PARAM || !v->has_length)
      return dec_fail(d, dec_pk(d, e->path, "array"),
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
      return dec_oom(d, e->path);
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
      return dec_fail(d, l->path, "assign to immutable var %llu ('%s')",
                      (unsigned long long)l->u.var.id, l->u.var.name);
    return 0;
  case IR_L_AELEM:
    if (resolve_array(d, dec_pk(d, l->path, "array"), l->u.aelem.array,
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
      return dec_fail(d, dec_pk(d, v->path, "type"),
                      "a for variable is of type i32 or i64, not %s",
                      ir_type_describe(v->type, t, sizeof(t)));
    if (v->is_mutable)
      return dec_fail(d, dec_pk(d, v->path, "mutable"),
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
      return dec_oom(d, s->path);
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
    const ir_path_t *vp = dec_pk(d, s->path, "value");
    if (d->ret == NULL || d->ret->kind == IR_T_UNIT) {
      if (!is_unit_const(s->u.ret.value))
        return dec_fail(d, vp,
                        "%s returns nothing: its return value is "
                        "[\"const\", [\"unit\"]]",
                        d->ret == NULL ? "the kernel" : "this helper");
      return 0;
    }
    if (is_unit_const(s->u.ret.value))
      return dec_fail(d, vp, "this helper returns %s, not unit",
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
      return dec_fail(d, dec_pk(d, v->path, "mutable"),
                      "a letmut var is declared mutable: true");
    if (v->type->kind == IR_T_VEC)
      return dec_fail(d, dec_pk(d, v->path, "type"),
                      "vec is the type of kernel and helper parameters only");
    if (init->kind == IR_E_ACREATE) {
      ir_type_t want = {.kind = IR_T_ARRAY,
                        .elt = init->u.acreate.elt,
                        .mem = init->u.acreate.mem};
      char w[160];
      if (!ir_type_equal(v->type, &want))
        return dec_fail(d, dec_pk(d, v->path, "type"),
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
  case IR_S_COOPMAT:
    /* fragments are the kernel's (SPOC: they cannot escape its body); the
     * generator resolves their names, in order */
    if (!d->in_kernel)
      return dec_fail(d, s->path,
                      "coopmat operations are allowed in the kernel's body "
                      "only, not in helpers");
    if (s->u.cm.op != IR_CM_LOAD && s->u.cm.op != IR_CM_STORE)
      return 0;
    if (resolve_array(d,
                      dec_pk(d, dec_pk(d, s->path, "op"),
                             s->u.cm.op == IR_CM_LOAD ? "src" : "dst"),
                      s->u.cm.array, &s->u.cm.decl) != 0 ||
        check_expr(d, s->u.cm.index) != 0 || check_expr(d, s->u.cm.stride))
      return HIPD_EIR;
    return 0;
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

int dec_check_kernel(dec_t *d)
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
    const ir_path_t *tp = dec_pk(d, dec_pk(d, dl->path, "var"), "type");
    const ir_path_t *ap = dec_pk(d, dl->path, "arrinfo");
    switch (v->type->kind) {
    case IR_T_RECORD:
    case IR_T_VARIANT:
      rc = dec_fail(d, tp,
                    "kernel param '%s' is a %s passed by value: kernel "
                    "arguments are scalars and pointers (pass it in a vec)",
                    v->name, ir_type_describe(v->type, t, sizeof(t)));
      break;
    case IR_T_F16:
    case IR_T_U8:
      rc = dec_fail(d, tp,
                    "kernel param '%s' is a %s passed by value: no launch "
                    "argument kind carries one (pass it in a vec, or as "
                    "%s and cast it)",
                    v->name, ir_type_describe(v->type, t, sizeof(t)),
                    v->type->kind == IR_T_F16 ? "f32" : "i32");
      break;
    case IR_T_VEC:
      if (dl->has_arrinfo &&
          (!ir_type_equal(dl->elt, v->type->elt) || dl->mem != IR_MEM_GLOBAL))
        rc =
            dec_fail(d, ap,
                     "the arrinfo of a vec of %s says %s in %s memory (nil, or "
                     "its element type in global memory)",
                     ir_type_describe(v->type->elt, t, sizeof(t)),
                     ir_type_describe(dl->elt, w, sizeof(w)),
                     ir_tagsets[IR_TS_MEMSPACE].tags[dl->mem]);
      v->has_length = 1;
      break;
    case IR_T_ARRAY:
      if (v->type->mem != IR_MEM_GLOBAL)
        rc = dec_fail(d, tp, "a kernel param points to global memory, not %s",
                      ir_tagsets[IR_TS_MEMSPACE].tags[v->type->mem]);
      else if (dl->has_arrinfo && (!ir_type_equal(dl->elt, v->type->elt) ||
                                   dl->mem != v->type->mem))
        rc = dec_fail(d, ap, "the arrinfo does not match the param's type %s",
                      ir_type_describe(v->type, t, sizeof(t)));
      v->has_length = dl->has_arrinfo;
      break;
    default:
      if (dl->has_arrinfo)
        rc = dec_fail(d, ap, "an arrinfo on a param of type %s (arrays only)",
                      ir_type_describe(v->type, t, sizeof(t)));
    }
    if (rc == 0)
      rc = declare(d, v);
  }
  for (uint32_t i = 0; i < k->nlocals && rc == 0; i++) {
    ir_decl_t *dl = k->locals[i];
    if (dl->kind == IR_D_LOCAL) {
      if (dl->var->type->kind == IR_T_VEC)
        rc = dec_fail(d, dec_pk(d, dec_pk(d, dl->path, "var"), "type"),
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
