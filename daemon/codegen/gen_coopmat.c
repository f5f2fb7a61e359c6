/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_coopmat.c: IR version 2's cooperative-matrix
 * statements (proto/IR.md, "Cooperative matrices"), per platform: NVIDIA's
 * WMMA (sm_70 and later), AMD's MFMA (gfx908, gfx90a, gfx940 to gfx942),
 * a plain loop on the CPU device (whose warps have one lane, so a thread
 * holds a whole fragment); refused with EIR elsewhere. One configuration:
 * 16x16x16, f16 * f16 + f32 -> f32, not saturating, subgroup scope.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_coopmat.h"
#include "codegen/gen_emit.h"
#include "codegen/gen_expr.h"
#include "hipd.h"

#define CM_DIM 16

/* Has the target matrix units this generator drives? Else @p why says
 * why not. */
static int cm_target_ok(const gen_t *g, char *why, size_t size)
{
  const char *arch = g->o->arch ? g->o->arch : "";

  switch (g->o->platform) {
  case CG_PLATFORM_HOST:
    return 1;
  case CG_PLATFORM_NVIDIA: {
    int sm = 0;
    if (arch[0] == '\0' || (sscanf(arch, "sm_%d", &sm) == 1 && sm >= 70) ||
        (sscanf(arch, "compute_%d", &sm) == 1 && sm >= 70))
      return 1;
    snprintf(why, size,
             "%s has no tensor cores WMMA can use (sm_70 and later have)",
             arch);
    return 0;
  }
  default:
    if (arch[0] == '\0' || strncmp(arch, "gfx908", 6) == 0 ||
        strncmp(arch, "gfx90a", 6) == 0 || strncmp(arch, "gfx940", 6) == 0 ||
        strncmp(arch, "gfx941", 6) == 0 || strncmp(arch, "gfx942", 6) == 0)
      return 1;
    snprintf(why, size,
             "%s has no matrix cores hipd drives (MFMA: gfx908, gfx90a, "
             "gfx940 to gfx942)",
             arch);
    return 0;
  }
}

static int cm_refuse(gen_t *g, const ir_stmt_t *s)
{
  char why[200], dev[64] = "";

  if (cm_target_ok(g, why, sizeof(why)))
    return 0;
  if (g->o->has_device)
    snprintf(dev, sizeof(dev), "device %d (", g->o->device);
  return gen_fail(g, HIPD_EIR, s->path,
                  "coopmat: %s%s%s: cooperative-matrix operations are not "
                  "available there",
                  dev, why, dev[0] ? ")" : "");
}

/* The one fragment shape and type of each use. */
static int frag_ok(gen_t *g, const ir_path_t *at, const ir_cm_frag_t *f)
{
  ir_cmcomp_t want = f->use == IR_CMU_ACC ? IR_CMC_F32 : IR_CMC_F16;

  if (f->m != CM_DIM || f->n != CM_DIM || f->k != CM_DIM || f->comp != want ||
      strcmp(f->scope, "subgroup") != 0)
    return gen_fail(g, HIPD_EIR, at,
                    "coopmat: a fragment of use %s, %ux%ux%u %s (%s scope), is "
                    "not supported: hipd lowers 16x16x16 fragments, f16 for "
                    "a "
                    "and b, f32 for the accumulator, subgroup scope",
                    ir_cm_use_names[f->use], f->m, f->n, f->k,
                    ir_cm_comp_names[f->comp], f->scope);
  return 0;
}

static int same_frag(const ir_cm_frag_t *a, const ir_cm_frag_t *b)
{
  return a->use == b->use && a->m == b->m && a->n == b->n && a->k == b->k &&
         a->comp == b->comp && strcmp(a->scope, b->scope) == 0;
}

/* The declared fragment @p name, of use @p use (IR_CMU__N: any). */
static const ir_cm_frag_t *frag_get(gen_t *g, const ir_path_t *at,
                                    const char *name, ir_cmuse_t use)
{
  const ir_cm_frag_t *f = strmap_get(&g->frags, name);

  if (f == NULL) {
    gen_fail(g, HIPD_EIR, at, "coopmat: no fragment named '%s' declared before",
             name);
    return NULL;
  }
  if (use != IR_CMU__N && f->use != use) {
    gen_fail(g, HIPD_EIR, at, "coopmat: fragment '%s' is of use %s, not %s",
             name, ir_cm_use_names[f->use], ir_cm_use_names[use]);
    return NULL;
  }
  return f;
}

static void decl(gen_t *g, const ir_cm_frag_t *f, const char *name)
{
  static const char *const nv_use[] = {"matrix_a", "matrix_b", "accumulator"};

  gen_line(g);
  switch (g->o->platform) {
  case CG_PLATFORM_NVIDIA:
    if (f->use == IR_CMU_ACC)
      strbuf_printf(&g->out,
                    "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, "
                    "16, 16, float> sarek_cm_%s;\n",
                    name);
    else
      strbuf_printf(&g->out,
                    "nvcuda::wmma::fragment<nvcuda::wmma::%s, 16, 16, 16, "
                    "__half, nvcuda::wmma::row_major> sarek_cm_%s;\n",
                    nv_use[f->use], name);
    break;
  case CG_PLATFORM_AMD:
    strbuf_printf(&g->out, "%s sarek_cm_%s = {};\n",
                  f->use == IR_CMU_ACC ? "sarek_cm_f4" : "sarek_cm_h4", name);
    break;
  default:
    strbuf_printf(&g->out, "%s sarek_cm_%s[256];\n",
                  f->use == IR_CMU_ACC ? "float" : "__half", name);
  }
}

/* The element, for lane sarek_lK and item sarek_jK of an MFMA fragment
 * (v_mfma_f32_16x16x16f16: a[i][k] in lane i + 16 (k / 4), item k % 4;
 * b[k][j] in lane j + 16 (k / 4); an accumulator's [i][j] in lane
 * j + 16 (i / 4), item i % 4), as an offset from the index. */
static void amd_offset(strbuf_t *b, ir_cmuse_t use, const char *l,
                       const char *j, const char *st)
{
  if (use == IR_CMU_A)
    strbuf_printf(b, "(%s %% 16) * %s + (%s / 16) * 4 + %s", l, st, l, j);
  else
    strbuf_printf(b, "((%s / 16) * 4 + %s) * %s + (%s %% 16)", l, j, st, l);
}

static int load_store(gen_t *g, const ir_stmt_t *s)
{
  const ir_cm_frag_t *f;
  const ir_var_t *arr = s->u.cm.decl;
  const char *an = arr->cname ? arr->cname : arr->name;
  const char *name = s->u.cm.frag;
  int load = s->u.cm.op == IR_CM_LOAD;
  ir_tkind_t want;
  strbuf_t ix, st;
  char ti[32], ts[32], tl[32], tj[32], tr[32], tc[32];
  int rc = 0;

  if ((f = frag_get(g, s->path, name, IR_CMU__N)) == NULL)
    return g->err->code;
  if (!same_frag(f, &s->u.cm.f))
    return gen_fail(g, HIPD_EIR, s->path,
                    "coopmat: the fragment given does not match the "
                    "declaration of '%s'",
                    name);
  want = f->use == IR_CMU_ACC ? IR_T_F32 : IR_T_F16;
  if (arr->soa || arr->type->elt->kind != want)
    return gen_fail(g, HIPD_EIR, s->path,
                    "coopmat: '%s' must be an array of %s (the fragment's "
                    "component type)%s",
                    arr->name, want == IR_T_F32 ? "f32" : "f16",
                    arr->soa ? ", not an SoA param" : "");
  strbuf_init(&ix, 0);
  strbuf_init(&st, 0);
  if (gen_expr_string(g, s->u.cm.index, &ix) != 0 ||
      gen_expr_string(g, s->u.cm.stride, &st) != 0) {
    rc = g->err->code;
    goto out;
  }
  gen_temp(g, "cmi", ti, sizeof(ti));
  gen_temp(g, "cms", ts, sizeof(ts));
  gen_line(g);
  strbuf_printf(&g->out, "{\n%*sconst long long %s = %s, %s = %s;\n",
                2 * g->indent + 2, "", ti, ix.p, ts, st.p);
  g->indent++;
  switch (g->o->platform) {
  case CG_PLATFORM_NVIDIA:
    gen_line(g);
    if (load)
      strbuf_printf(&g->out,
                    "nvcuda::wmma::load_matrix_sync(sarek_cm_%s, %s + %s, "
                    "(unsigned)%s%s);\n",
                    name, an, ti, ts,
                    f->use == IR_CMU_ACC ? ", nvcuda::wmma::mem_row_major"
                                         : "");
    else if (f->use == IR_CMU_ACC)
      strbuf_printf(&g->out,
                    "nvcuda::wmma::store_matrix_sync(%s + %s, sarek_cm_%s, "
                    "(unsigned)%s, nvcuda::wmma::mem_row_major);\n",
                    an, ti, name, ts);
    else
      rc = gen_fail(g, HIPD_EIR, s->path,
                    "coopmat: WMMA stores accumulator fragments only, not "
                    "'%s' (use %s)",
                    name, ir_cm_use_names[f->use]);
    break;
  case CG_PLATFORM_AMD: {
    strbuf_t off;
    gen_temp(g, "cml", tl, sizeof(tl));
    gen_temp(g, "cmj", tj, sizeof(tj));
    strbuf_init(&off, 0);
    amd_offset(&off, f->use, tl, tj, ts);
    gen_line(g);
    strbuf_printf(&g->out,
                  "const int %s = (int)__builtin_amdgcn_mbcnt_hi(~0u, "
                  "__builtin_amdgcn_mbcnt_lo(~0u, 0u));\n",
                  tl);
    gen_line(g);
    strbuf_printf(&g->out, "for (int %s = 0; %s < 4; %s++)\n", tj, tj, tj);
    gen_line(g);
    if (load)
      strbuf_printf(&g->out, "  sarek_cm_%s[%s] = (%s)(float)%s[%s + %s];\n",
                    name, tj, f->use == IR_CMU_ACC ? "float" : "_Float16", an,
                    ti, off.p);
    else
      strbuf_printf(&g->out, "  %s[%s + %s] = %s((float)sarek_cm_%s[%s]);\n",
                    an, ti, off.p, f->use == IR_CMU_ACC ? "" : "__float2half",
                    name, tj);
    strbuf_free(&off);
    break;
  }
  default: {
    unsigned cols = f->use == IR_CMU_B ? f->n : f->k;
    if (f->use == IR_CMU_ACC)
      cols = f->n;
    gen_temp(g, "cmr", tr, sizeof(tr));
    gen_temp(g, "cmc", tc, sizeof(tc));
    gen_line(g);
    strbuf_printf(&g->out,
                  "for (int %s = 0; %s < 16; %s++)\n%*sfor (int %s = 0; %s < "
                  "%u; %s++)\n",
                  tr, tr, tr, 2 * g->indent + 2, "", tc, tc, cols, tc);
    gen_line(g);
    if (load)
      strbuf_printf(&g->out,
                    "    sarek_cm_%s[%s * %u + %s] = %s[%s + %s * %s + %s];\n",
                    name, tr, cols, tc, an, ti, tr, ts, tc);
    else
      strbuf_printf(&g->out,
                    "    %s[%s + %s * %s + %s] = sarek_cm_%s[%s * %u + %s];\n",
                    an, ti, tr, ts, tc, name, tr, cols, tc);
  }
  }
  g->indent--;
  gen_line(g);
  strbuf_add(&g->out, "}\n");
out:
  strbuf_free(&ix);
  strbuf_free(&st);
  return rc;
}

static int muladd(gen_t *g, const ir_stmt_t *s)
{
  const ir_cm_cfg_t *c = &s->u.cm.cfg;
  const char *d = s->u.cm.frag, *a = s->u.cm.a, *b = s->u.cm.b,
             *acc = s->u.cm.c;
  char ti[32], tj[32], tk[32], tt[32], ts[32];

  if (c->m != CM_DIM || c->n != CM_DIM || c->k != CM_DIM ||
      c->a != IR_CMC_F16 || c->b != IR_CMC_F16 || c->c != IR_CMC_F32 ||
      c->result != IR_CMC_F32 || c->saturating ||
      strcmp(c->scope, "subgroup") != 0)
    return gen_fail(g, HIPD_EIR, s->path,
                    "coopmat: the configuration %ux%ux%u %s*%s+%s->%s%s (%s "
                    "scope) is not supported: hipd lowers 16x16x16 "
                    "f16*f16+f32->f32, not saturating, subgroup scope",
                    c->m, c->n, c->k, ir_cm_comp_names[c->a],
                    ir_cm_comp_names[c->b], ir_cm_comp_names[c->c],
                    ir_cm_comp_names[c->result],
                    c->saturating ? " saturating" : "", c->scope);
  if (frag_get(g, s->path, d, IR_CMU_ACC) == NULL ||
      frag_get(g, s->path, a, IR_CMU_A) == NULL ||
      frag_get(g, s->path, b, IR_CMU_B) == NULL ||
      frag_get(g, s->path, acc, IR_CMU_ACC) == NULL)
    return g->err->code;
  gen_line(g);
  switch (g->o->platform) {
  case CG_PLATFORM_NVIDIA:
    strbuf_printf(&g->out,
                  "nvcuda::wmma::mma_sync(sarek_cm_%s, sarek_cm_%s, "
                  "sarek_cm_%s, sarek_cm_%s);\n",
                  d, a, b, acc);
    return 0;
  case CG_PLATFORM_AMD:
    strbuf_printf(&g->out,
                  "sarek_cm_%s = __builtin_amdgcn_mfma_f32_16x16x16f16("
                  "sarek_cm_%s, sarek_cm_%s, sarek_cm_%s, 0, 0, 0);\n",
                  d, a, b, acc);
    return 0;
  default:
    /* into a temporary: d may be c */
    gen_temp(g, "cmt", tt, sizeof(tt));
    gen_temp(g, "cmi", ti, sizeof(ti));
    gen_temp(g, "cmj", tj, sizeof(tj));
    gen_temp(g, "cmk", tk, sizeof(tk));
    gen_temp(g, "cma", ts, sizeof(ts));
    strbuf_printf(&g->out, "{\n");
    g->indent++;
    gen_line(g);
    strbuf_printf(&g->out, "float %s[256];\n", tt);
    gen_line(g);
    strbuf_printf(&g->out,
                  "for (int %s = 0; %s < 16; %s++)\n%*sfor (int %s = 0; %s < "
                  "16; %s++) {\n",
                  ti, ti, ti, 2 * g->indent + 2, "", tj, tj, tj);
    gen_line(g);
    strbuf_printf(&g->out, "    float %s = sarek_cm_%s[%s * 16 + %s];\n", ts,
                  acc, ti, tj);
    gen_line(g);
    strbuf_printf(&g->out,
                  "    for (int %s = 0; %s < 16; %s++)\n%*s      %s += "
                  "(float)sarek_cm_%s[%s * 16 + %s] * (float)sarek_cm_%s[%s * "
                  "16 + %s];\n",
                  tk, tk, tk, 2 * g->indent, "", ts, a, ti, tk, b, tk, tj);
    gen_line(g);
    strbuf_printf(&g->out, "    %s[%s * 16 + %s] = %s;\n", tt, ti, tj, ts);
    gen_line(g);
    strbuf_add(&g->out, "  }\n");
    gen_line(g);
    strbuf_printf(&g->out,
                  "for (int %s = 0; %s < 256; %s++)\n%*s  sarek_cm_%s[%s] = "
                  "%s[%s];\n",
                  ti, ti, ti, 2 * g->indent, "", d, ti, tt, ti);
    g->indent--;
    gen_line(g);
    strbuf_add(&g->out, "}\n");
    return 0;
  }
}

int gen_coopmat(gen_t *g, const ir_stmt_t *s)
{
  void **slot;

  if (cm_refuse(g, s) != 0)
    return g->err->code;
  switch (s->u.cm.op) {
  case IR_CM_DECL:
    if (frag_ok(g, s->path, &s->u.cm.f) != 0)
      return g->err->code;
    slot = strmap_slot(&g->frags, s->u.cm.frag);
    if (slot == NULL)
      return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
    if (*slot != NULL)
      return gen_fail(g, HIPD_EIR, s->path,
                      "coopmat: fragment '%s' is declared twice", s->u.cm.frag);
    *slot = (void *)&s->u.cm.f;
    decl(g, &s->u.cm.f, s->u.cm.frag);
    return 0;
  case IR_CM_LOAD:
  case IR_CM_STORE:
    return load_store(g, s);
  default:
    return muladd(g, s);
  }
}
