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
 *
 * This file sets the params up and resolves field chains; the reads are
 * lowered where expressions are emitted (gen_expr.c), the writes where
 * statements are (gen_stmt.c), since each emits the index expression: so
 * soa.c depends on the emitter only, and the expressions on it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/soa.h"
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

/* Where a chain of field names leads from the element of @p sp: to a leaf
 * (*rec NULL) or to a (sub)record (*rec set). @p prefix gets the C name
 * prefix ("pts_pos" or the leaf "pts_pos_x"). */
int soa_chain_resolve(gen_t *g, soa_param_t *sp, const char **fields,
                      const ir_path_t **paths, int n, const ir_record_t **rec,
                      strbuf_t *prefix)
{
  const ir_record_t *r = sp->rec;

  chain_reverse(fields, paths, n);
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
void soa_value(gen_t *g, strbuf_t *b, const ir_record_t *r, const char *prefix,
               const char *idx)
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
      soa_value(g, b, f->type->rec, sub, idx);
    else
      strbuf_printf(b, "%s[%s]", sub, idx);
    free(sub);
  }
  strbuf_addc(b, '}');
}

/* prefix_f[idx] = value.f; ... for every leaf under @p r. */
int soa_scatter(gen_t *g, const ir_record_t *r, const char *prefix,
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
      rc = soa_scatter(g, f->type->rec, p, v, idx);
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
