/* SPDX-License-Identifier: MIT */
/* daemon/codegen/soa.c: the Structure-of-Arrays lowering of record-typed
 * vec params (generate_source's soa_params).
 *
 * A lowered param P of type vec(record) becomes, at its place in the
 * parameter list, one `leaf* __restrict__ P_<path>` per leaf field of the
 * record (nested records flattened depth-first in declaration order, path
 * segments joined by '_') and then one `int sarek_P_length`. Its uses
 * become per-leaf accesses:
 *   P[i].pos.x           -> P_pos_x[i]
 *   P[i] (a whole value) -> T{P_x[i], T_pos{P_pos_x[i], P_pos_y[i]}}
 *   P[i] = v             -> { const T t = v; const auto k = i;
 *                             P_x[k] = t.x; P_pos_x[k] = t.pos.x; ... }
 * Any other use of P (as a value, a helper argument, an areadx base) is
 * refused: it would need the packed array that no longer exists.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_internal.h"
#include "hipd.h"

/* ------------------------------------------------------------ set-up */

static int add_leaves(gen_t *g, soa_param_t *sp, const ir_record_t *r,
                      const char *path, const char *cname, const ir_path_t *at)
{
  for (uint32_t i = 0; i < r->nfields; i++) {
    const ir_field_t *f = &r->fields[i];
    size_t pl = strlen(path) + strlen(f->name) + 2;
    size_t cl = strlen(cname) + strlen(f->name) + 2;
    char *p = malloc(pl), *c = malloc(cl);
    int rc = 0;

    if (p == NULL || c == NULL) {
      free(p);
      free(c);
      return gen_fail(g, HIPD_ENOMEM, at, "out of memory");
    }
    snprintf(p, pl, "%s%s%s", path, path[0] ? "." : "", f->name);
    snprintf(c, cl, "%s_%s", cname, f->name);
    if (f->type->kind == IR_T_RECORD) {
      rc = add_leaves(g, sp, f->type->rec, p, c, at);
      free(p);
      free(c);
      if (rc != 0)
        return rc;
      continue;
    }
    if (f->type->kind != IR_T_I32 && f->type->kind != IR_T_I64 &&
        f->type->kind != IR_T_F32 && f->type->kind != IR_T_F64 &&
        f->type->kind != IR_T_F16 && f->type->kind != IR_T_U8 &&
        f->type->kind != IR_T_BOOL) {
      rc = gen_fail(g, HIPD_EIR, at,
                    "field '%s' of '%s' is a variant: the SoA lowering "
                    "splits records of scalars and records only",
                    p, sp->var->name);
      free(p);
      free(c);
      return rc;
    }
    soa_leaf_t *l = realloc(sp->leaves, (sp->nleaves + 1) * sizeof(*l));
    if (l == NULL) {
      free(p);
      free(c);
      return gen_fail(g, HIPD_ENOMEM, at, "out of memory");
    }
    sp->leaves = l;
    l[sp->nleaves].path = p;
    l[sp->nleaves].cname = c;
    l[sp->nleaves].type = f->type;
    sp->nleaves++;
  }
  return 0;
}

int soa_setup(gen_t *g)
{
  const ir_kernel_t *k = g->k;
  ir_path_t *root;
  strmap_t leaves;
  int rc = 0;

  if (g->o->nsoa == 0)
    return 0;
  g->soa = calloc(g->o->nsoa, sizeof(*g->soa));
  root = ir_alloc(g->doc->arena, sizeof(*root) * (g->o->nsoa + 1));
  if (g->soa == NULL || root == NULL)
    return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
  root[0].key = "soa_params";
  strmap_init(&leaves);
  for (uint32_t i = 0; i < g->o->nsoa && rc == 0; i++) {
    const char *name = g->o->soa[i];
    const ir_path_t *at = &root[i + 1];
    ir_var_t *v = NULL;
    char t[160];

    root[i + 1].up = &root[0];
    root[i + 1].index = i;
    for (uint32_t j = 0; j < k->nparams; j++)
      if (strcmp(k->params[j]->var->name, name) == 0)
        v = k->params[j]->var;
    if (v == NULL) {
      rc = gen_fail(g, HIPD_EIR, at, "the kernel has no param named '%.64s'",
                    name);
      break;
    }
    if (v->soa) {
      rc = gen_fail(g, HIPD_EIR, at, "'%s' is named twice", name);
      break;
    }
    if (v->type->kind != IR_T_VEC || v->type->elt->kind != IR_T_RECORD) {
      rc = gen_fail(g, HIPD_EIR, at,
                    "'%s' is of type %s: the SoA lowering applies to a vec "
                    "of records",
                    name, ir_type_describe(v->type, t, sizeof(t)));
      break;
    }
    v->soa = 1;
    g->soa[g->nsoa].var = v;
    g->soa[g->nsoa].rec = v->type->elt->rec;
    g->nsoa++;
    rc =
        add_leaves(g, &g->soa[g->nsoa - 1], v->type->elt->rec, "", v->name, at);
    /* A leaf's C name must be new: not another param's, not another
     * leaf's ("a_b" and "a.b" both give P_a_b), not a top-level name. */
    for (uint32_t j = 0; rc == 0 && j < g->soa[g->nsoa - 1].nleaves; j++) {
      soa_leaf_t *l = &g->soa[g->nsoa - 1].leaves[j];
      void **slot = strmap_slot(&leaves, l->cname);
      const char *clash = NULL;
      if (slot == NULL) {
        rc = gen_fail(g, HIPD_ENOMEM, at, "out of memory");
        break;
      }
      if (*slot != NULL)
        clash = "another leaf";
      else if (strmap_get(&g->top, l->cname) != NULL)
        clash = "a top-level name of the kernel";
      for (uint32_t m = 0; clash == NULL && m < k->nparams; m++)
        if (strcmp(k->params[m]->var->name, l->cname) == 0)
          clash = "a kernel param";
      if (clash != NULL)
        rc = gen_fail(g, HIPD_EIR, at,
                      "field '%s' of '%s' would become parameter '%s', "
                      "which is already %s",
                      l->path, name, l->cname, clash);
      *slot = l;
    }
  }
  strmap_free(&leaves);
  return rc;
}

void soa_cleanup(gen_t *g)
{
  for (uint32_t i = 0; i < g->nsoa; i++) {
    for (uint32_t j = 0; j < g->soa[i].nleaves; j++) {
      free(g->soa[i].leaves[j].path);
      free(g->soa[i].leaves[j].cname);
    }
    free(g->soa[i].leaves);
  }
  free(g->soa);
  g->soa = NULL;
  g->nsoa = 0;
}

soa_param_t *soa_find(gen_t *g, const ir_var_t *v)
{
  for (uint32_t i = 0; i < g->nsoa; i++)
    if (g->soa[i].var == v)
      return &g->soa[i];
  return NULL;
}

int soa_emit_params(gen_t *g, soa_param_t *sp, int *first)
{
  char t[300], len[600];

  for (uint32_t i = 0; i < sp->nleaves; i++) {
    soa_leaf_t *l = &sp->leaves[i];
    strbuf_printf(&g->out, "%s%s* __restrict__ %s", *first ? "" : ", ",
                  gen_ctype(l->type, t, sizeof(t)), l->cname);
    *first = 0;
    if (gen_param_add(g, l->cname, GEN_P_PTR, GEN_ROLE_LEAF, sp->var->name,
                      l->path) != 0 ||
        gen_visible_push(g, l->cname) != 0)
      return g->err->code;
  }
  snprintf(len, sizeof(len), "sarek_%s_length", sp->var->cname);
  strbuf_printf(&g->out, ", int %s", len);
  return gen_param_add(g, len, GEN_P_I32, GEN_ROLE_LENGTH, sp->var->name, NULL);
}

/* ------------------------------------------------------- field chains */

#define CHAIN_MAX 256

/* Where a chain of field names leads from the element of @p sp: to a leaf
 * (*rec NULL) or to a (sub)record (*rec set). @p prefix gets the C name
 * prefix ("pts_pos" or the leaf "pts_pos_x"). */
static int chain_resolve(gen_t *g, soa_param_t *sp, const char *const *fields,
                         const ir_path_t *const *paths, int n,
                         const ir_record_t **rec, strbuf_t *prefix)
{
  const ir_record_t *r = sp->rec;

  strbuf_add(prefix, sp->var->name);
  for (int i = 0; i < n; i++) {
    const ir_field_t *f = NULL;
    if (r == NULL)
      return gen_fail(g, HIPD_EIR, paths[i],
                      "'%s' is a scalar field: it has no field '%s'", prefix->p,
                      fields[i]);
    for (uint32_t j = 0; j < r->nfields; j++)
      if (strcmp(r->fields[j].name, fields[i]) == 0)
        f = &r->fields[j];
    if (f == NULL)
      return gen_fail(g, HIPD_EIR, paths[i], "record '%s' has no field '%s'",
                      r->name, fields[i]);
    strbuf_printf(prefix, "_%s", f->name);
    r = f->type->kind == IR_T_RECORD ? f->type->rec : NULL;
  }
  *rec = r;
  return strbuf_failed(prefix) ? gen_fail(g, HIPD_ENOMEM, NULL, "out of memory")
                               : 0;
}

/* rec{prefix_f[idx], sub{...}, ...} */
static void build_value(gen_t *g, strbuf_t *b, const ir_record_t *r,
                        const char *prefix, const char *idx)
{
  strbuf_printf(b, "%s{", r->cname);
  for (uint32_t i = 0; i < r->nfields; i++) {
    const ir_field_t *f = &r->fields[i];
    char *sub;
    size_t n = strlen(prefix) + strlen(f->name) + 2;
    if (i > 0)
      strbuf_add(b, ", ");
    if ((sub = malloc(n)) == NULL) {
      b->oom = 1;
      return;
    }
    snprintf(sub, n, "%s_%s", prefix, f->name);
    if (f->type->kind == IR_T_RECORD)
      build_value(g, b, f->type->rec, sub, idx);
    else
      strbuf_printf(b, "%s[%s]", sub, idx);
    free(sub);
  }
  strbuf_addc(b, '}');
}

/* A field chain is collected innermost first: put the outermost first. */
static void chain_reverse(const char **fields, const ir_path_t **paths, int n)
{
  for (int i = 0; i < n / 2; i++) {
    const char *f = fields[i];
    const ir_path_t *p = paths[i];
    fields[i] = fields[n - 1 - i];
    paths[i] = paths[n - 1 - i];
    fields[n - 1 - i] = f;
    paths[n - 1 - i] = p;
  }
}

int soa_read(gen_t *g, strbuf_t *b, const ir_expr_t *e, int *handled)
{
  const char *fields[CHAIN_MAX];
  const ir_path_t *paths[CHAIN_MAX];
  const ir_expr_t *cur = e;
  const ir_record_t *rec;
  soa_param_t *sp;
  strbuf_t prefix, idx;
  int n = 0, rc;

  *handled = 0;
  while (cur->kind == IR_E_FIELD && n < CHAIN_MAX) {
    fields[n] = cur->u.field.field;
    paths[n] = cur->path;
    n++;
    cur = cur->u.field.rec;
  }
  if (cur->kind != IR_E_AREAD || !cur->u.aread.decl->soa)
    return 0;
  if (n == CHAIN_MAX)
    return gen_fail(g, HIPD_EIR, e->path, "more than %d nested fields",
                    CHAIN_MAX - 1);
  chain_reverse(fields, paths, n);
  sp = soa_find(g, cur->u.aread.decl);
  strbuf_init(&prefix, 0);
  strbuf_init(&idx, 0);
  rc = chain_resolve(g, sp, fields, paths, n, &rec, &prefix);
  if (rc == 0)
    rc = gen_expr(g, &idx, cur->u.aread.index);
  if (rc == 0 && strbuf_failed(&idx))
    rc = gen_fail(g, HIPD_ENOMEM, e->path, "out of memory");
  if (rc == 0) {
    if (rec == NULL) {
      strbuf_printf(b, "%s[%s]", prefix.p, idx.p);
    } else if (gen_expr_simple(cur->u.aread.index)) {
      build_value(g, b, rec, prefix.p, idx.p);
    } else {
      /* the index is evaluated once */
      char tmp[32];
      gen_temp(g, "i", tmp, sizeof(tmp));
      strbuf_printf(b, "[&](const long long %s) { return ", tmp);
      build_value(g, b, rec, prefix.p, tmp);
      strbuf_printf(b, "; }(%s)", idx.p);
    }
    *handled = 1;
  }
  strbuf_free(&prefix);
  strbuf_free(&idx);
  return rc;
}

/* prefix_f[idx] = value.f; ... for every leaf under @p r. */
static int scatter(gen_t *g, const ir_record_t *r, const char *prefix,
                   const char *value, const char *idx)
{
  for (uint32_t i = 0; i < r->nfields; i++) {
    const ir_field_t *f = &r->fields[i];
    size_t pn = strlen(prefix) + strlen(f->name) + 2;
    size_t vn = strlen(value) + strlen(f->name) + 2;
    char *p = malloc(pn), *v = malloc(vn);
    int rc = 0;
    if (p == NULL || v == NULL) {
      free(p);
      free(v);
      return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
    }
    snprintf(p, pn, "%s_%s", prefix, f->name);
    snprintf(v, vn, "%s.%s", value, f->name);
    if (f->type->kind == IR_T_RECORD) {
      rc = scatter(g, f->type->rec, p, v, idx);
    } else {
      gen_line(g);
      strbuf_printf(&g->out, "%s[%s] = %s;\n", p, idx, v);
    }
    free(p);
    free(v);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int soa_assign(gen_t *g, const ir_stmt_t *s, int *handled)
{
  const char *fields[CHAIN_MAX];
  const ir_path_t *paths[CHAIN_MAX];
  const ir_lvalue_t *cur = s->u.assign.target;
  const ir_record_t *rec;
  soa_param_t *sp;
  strbuf_t prefix, idx, val;
  int n = 0, rc;

  *handled = 0;
  while (cur->kind == IR_L_FIELD && n < CHAIN_MAX) {
    fields[n] = cur->u.field.field;
    paths[n] = cur->path;
    n++;
    cur = cur->u.field.target;
  }
  if (cur->kind != IR_L_AELEM || !cur->u.aelem.decl->soa)
    return 0;
  if (n == CHAIN_MAX)
    return gen_fail(g, HIPD_EIR, s->path, "more than %d nested fields",
                    CHAIN_MAX - 1);
  chain_reverse(fields, paths, n);
  sp = soa_find(g, cur->u.aelem.decl);
  strbuf_init(&prefix, 0);
  strbuf_init(&idx, 0);
  strbuf_init(&val, 0);
  rc = chain_resolve(g, sp, fields, paths, n, &rec, &prefix);
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
    rc = scatter(g, rec, prefix.p, v, k);
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
