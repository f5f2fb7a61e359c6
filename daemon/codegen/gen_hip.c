/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_hip.c: Sarek IR -> HIP C++.
 *
 * The layout and spellings follow SPOC's CUDA generator (Sarek_ir_cuda)
 * where it is right, so that argument lists and vector layouts match;
 * where it would emit wrong code, this one departs (proto/IR.md marks
 * each departure):
 *  - names: a declaration whose name is already visible (OCaml shadows
 *    freely; C++ would refuse a redeclaration or, worse, let an
 *    initializer read the new variable) is emitted as sarek_<id>_<name>;
 *  - the bound of a for loop is evaluated once and the loop cannot
 *    overflow at INT_MAX;
 *  - a match evaluates its scrutinee once;
 *  - a record value is built whole (T{...}), in declaration order, also
 *    when assigned;
 *  - constants keep their exact value (INT_MIN, NaN, infinities, floats).
 * Generated names all begin with "sarek_", which IR identifiers cannot.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_emit.h"
#include "codegen/gen_expr.h"
#include "codegen/gen_hip.h"
#include "codegen/gen_stmt.h"
#include "codegen/soa.h"
#include "hipd.h"
#include "util/array.h"

/* --------------------------------------------------------- param names */

const char *gen_ptype_name(gen_ptype_t t)
{
  static const char *const n[] = {"pointer", "int32", "int64", "float",
                                  "double"};
  return t <= GEN_P_F64 ? n[t] : "?";
}

const char *gen_role_name(gen_role_t r)
{
  static const char *const n[] = {"value", "array", "length", "leaf"};
  return r <= GEN_ROLE_LEAF ? n[r] : "?";
}

/* Names every function sees: the kernel's own top-level names and those
 * the built-in intrinsics expand to, so that a variable never hides
 * them. */
static int top_names(gen_t *g)
{
  static const char *const runtime[] = {
      "threadIdx", "blockIdx",      "blockDim",  "gridDim",
      "warpSize",  "atomicAdd",     "atomicSub", "atomicMin",
      "atomicMax", "__syncthreads", "fma"};
  const ir_kernel_t *k = g->k;
  const intr_def_t *b;
  size_t nb = intr_builtins(g->o->platform, &b);
  void **slot;

#define TOP(name)                                                              \
  do {                                                                         \
    if ((slot = strmap_slot(&g->top, (name))) == NULL)                         \
      return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");                  \
    *slot = (void *)1;                                                         \
  } while (0)
  TOP(k->name);
  for (uint32_t i = 0; i < k->nhelpers; i++)
    TOP(k->helpers[i].name);
  for (uint32_t i = 0; i < k->nrecords; i++)
    TOP(k->records[i].cname);
  for (uint32_t i = 0; i < k->nvariants; i++) {
    TOP(k->variants[i].cname);
    for (uint32_t j = 0; j < k->variants[i].nctors; j++) {
      TOP(k->variants[i].ctors[j].name);
      TOP(k->variants[i].ctors[j].maker);
    }
  }
  for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
    TOP(runtime[i]);
  /* hipd's own math built-ins: those whose code is "name(%s...)", as in
   * IR version 1 */
  for (size_t i = 0; i < nb && intr_builtin_tab(i) == INTR_TAB_CORE; i++) {
    size_t n = strlen(b[i].name);
    if (strncmp(b[i].code, b[i].name, n) == 0 && b[i].code[n] == '(')
      TOP(b[i].name);
  }
  /* the functions the standard library's forms that the document calls
   * expand to: a code's leading identifier when a '(' follows it
   * ("sinf(%s)", "hipd_spoc_powint(%s, %s)"). Only those it calls, so
   * that a kernel that calls none generates as before the library was
   * built in. */
  for (const ir_expr_t *e = g->doc != NULL ? g->doc->intrs : NULL; e != NULL;
       e = e->u.intr.next) {
    char full[512], msg[400];
    size_t used = 0, n = 0;
    intr_def_t def;
    const char *c, *fn;
    int std = 0;

    for (uint32_t i = 0; i < e->u.intr.npath && used < sizeof(full); i++)
      used += (size_t)snprintf(full + used, sizeof(full) - used, "%s.",
                               e->u.intr.path[i]);
    if (used >= sizeof(full) ||
        (size_t)snprintf(full + used, sizeof(full) - used, "%s",
                         e->u.intr.name) >= sizeof(full) - used)
      continue; /* gen_intrinsic reports what it cannot resolve */
    if (intr_resolve(g->o->intrinsics, g->o->platform, full, e->u.intr.name,
                     e->u.intr.nargs, &def, msg, sizeof(msg)) != 0 ||
        !def.builtin)
      continue;
    for (size_t i = 0; i < nb && !std; i++)
      std = b[i].code == def.code && intr_builtin_tab(i) != INTR_TAB_CORE;
    if (!std)
      continue;
    for (c = def.code; c[n] == '_' || (c[n] >= 'a' && c[n] <= 'z') ||
                       (c[n] >= 'A' && c[n] <= 'Z') ||
                       (n > 0 && c[n] >= '0' && c[n] <= '9');)
      n++;
    if (n == 0 || c[n] != '(')
      continue;
    if ((fn = gen_arena_printf(g, "%.*s", (int)n, c)) == NULL)
      return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
    TOP(fn);
  }
#undef TOP
  return 0;
}

/* ----------------------------------------------------------- types */

static int emit_variant(gen_t *g, ir_variant_t *v);
static int emit_record(gen_t *g, ir_record_t *r);

/* The types a member type needs defined before it. */
static int emit_member(gen_t *g, const ir_type_t *t)
{
  if (t->kind == IR_T_RECORD)
    return emit_record(g, t->rec);
  if (t->kind == IR_T_VARIANT)
    return emit_variant(g, t->variant);
  return 0;
}

static int emit_record(gen_t *g, ir_record_t *r)
{
  char t[300];

  if (r->mark)
    return 0;
  r->mark = 1;
  for (uint32_t i = 0; i < r->nfields; i++)
    if (emit_member(g, r->fields[i].type) != 0)
      return HIPD_EIR;
  strbuf_add(&g->out, "typedef struct {\n");
  for (uint32_t i = 0; i < r->nfields; i++)
    strbuf_printf(&g->out, "  %s %s;\n",
                  gen_ctype(r->fields[i].type, t, sizeof(t)),
                  r->fields[i].name);
  strbuf_printf(&g->out, "} %s;\n\n", r->cname);
  return 0;
}

static int emit_variant(gen_t *g, ir_variant_t *v)
{
  char t[300];
  int payload = 0;

  if (v->mark)
    return 0;
  v->mark = 1;
  for (uint32_t i = 0; i < v->nctors; i++)
    for (uint32_t j = 0; j < v->ctors[i].npayload; j++) {
      payload = 1;
      if (emit_member(g, v->ctors[i].payload[j]) != 0)
        return HIPD_EIR;
    }
  strbuf_add(&g->out, "enum { ");
  for (uint32_t i = 0; i < v->nctors; i++)
    strbuf_printf(&g->out, "%s%s = %u", i ? ", " : "", v->ctors[i].name, i);
  strbuf_add(&g->out, " };\ntypedef struct {\n  int tag;\n");
  if (payload) {
    strbuf_add(&g->out, "  union {\n");
    for (uint32_t i = 0; i < v->nctors; i++) {
      const ir_ctor_t *c = &v->ctors[i];
      if (c->npayload == 1) {
        strbuf_printf(&g->out, "    %s %s_v;\n",
                      gen_ctype(c->payload[0], t, sizeof(t)), c->name);
      } else if (c->npayload > 1) {
        strbuf_add(&g->out, "    struct {");
        for (uint32_t j = 0; j < c->npayload; j++)
          strbuf_printf(&g->out, " %s _%u;",
                        gen_ctype(c->payload[j], t, sizeof(t)), j);
        strbuf_printf(&g->out, " } %s_v;\n", c->name);
      }
    }
    strbuf_add(&g->out, "  } data;\n");
  }
  strbuf_printf(&g->out, "} %s;\n\n", v->cname);
  for (uint32_t i = 0; i < v->nctors; i++) {
    const ir_ctor_t *c = &v->ctors[i];
    strbuf_printf(&g->out, "__device__ __host__ inline %s %s(", v->cname,
                  c->maker);
    for (uint32_t j = 0; j < c->npayload; j++) {
      if (c->npayload == 1)
        strbuf_printf(&g->out, "%s v", gen_ctype(c->payload[j], t, sizeof(t)));
      else
        strbuf_printf(&g->out, "%s%s v%u", j ? ", " : "",
                      gen_ctype(c->payload[j], t, sizeof(t)), j);
    }
    strbuf_printf(&g->out, ") {\n  %s r;\n  r.tag = %s;\n", v->cname, c->name);
    if (c->npayload == 1)
      strbuf_printf(&g->out, "  r.data.%s_v = v;\n", c->name);
    for (uint32_t j = 0; c->npayload > 1 && j < c->npayload; j++)
      strbuf_printf(&g->out, "  r.data.%s_v._%u = v%u;\n", c->name, j, j);
    strbuf_add(&g->out, "  return r;\n}\n\n");
  }
  return 0;
}

/* ----------------------------------------------------------- functions */

static void function_begin(gen_t *g)
{
  gen_vis_pop(g, 0);
  g->tmp = 0;
  g->indent = 1;
}

static int gen_helper(gen_t *g, const ir_helper_t *h)
{
  char t[300];
  int rc;

  function_begin(g);
  strbuf_printf(&g->out, "__device__ %s %s(", gen_ctype(h->ret, t, sizeof(t)),
                h->name);
  for (uint32_t i = 0; i < h->nparams; i++) {
    if (gen_declare_var(g, h->params[i]) != 0)
      return g->err->code;
    strbuf_printf(&g->out, "%s%s %s", i ? ", " : "",
                  gen_ctype(h->params[i]->type, t, sizeof(t)),
                  h->params[i]->cname);
  }
  strbuf_add(&g->out, ") {\n");
  rc = gen_stmt(g, h->body);
  strbuf_add(&g->out, "}\n\n");
  return rc;
}

static gen_ptype_t scalar_ptype(const ir_type_t *t)
{
  switch (t->kind) {
  case IR_T_I64:
    return GEN_P_I64;
  case IR_T_F32:
    return GEN_P_F32;
  case IR_T_F64:
    return GEN_P_F64;
  default: /* i32, bool */
    return GEN_P_I32;
  }
}

static int gen_kernel_params(gen_t *g)
{
  const ir_kernel_t *k = g->k;
  char t[300], len[600];
  int first = 1;

  for (uint32_t i = 0; i < k->nparams; i++) {
    ir_var_t *v = k->params[i]->var;
    const char *sep = first ? "" : ", ";
    soa_param_t *sp;
    if (gen_declare_var(g, v) != 0)
      return g->err->code;
    if (v->soa) {
      sp = soa_find(g, v);
      if (soa_emit_params(g, sp, &first) != 0)
        return g->err->code;
      continue;
    }
    first = 0;
    switch (v->type->kind) {
    case IR_T_VEC:
    case IR_T_ARRAY:
      strbuf_printf(&g->out, "%s%s%s %s", sep, gen_ctype(v->type, t, sizeof(t)),
                    v->type->kind == IR_T_VEC ? " __restrict__" : "", v->cname);
      if (gen_param_add(g, v->cname, GEN_P_PTR, GEN_ROLE_ARRAY, v->name, NULL))
        return g->err->code;
      break;
    default:
      strbuf_printf(&g->out, "%s%s %s", sep, gen_ctype(v->type, t, sizeof(t)),
                    v->cname);
      if (gen_param_add(g, v->cname, scalar_ptype(v->type), GEN_ROLE_VALUE,
                        v->name, NULL) != 0)
        return g->err->code;
    }
    if (v->has_length) {
      snprintf(len, sizeof(len), "sarek_%s_length", v->cname);
      strbuf_printf(&g->out, ", int %s", len);
      if (gen_param_add(g, len, GEN_P_I32, GEN_ROLE_LENGTH, v->name, NULL))
        return g->err->code;
    }
  }
  if (g->nparams > GEN_MAX_PARAMS)
    return gen_fail(g, HIPD_EIR, k->path,
                    "the kernel has %u parameters once lowered (at most %d, "
                    "the launch limit)",
                    g->nparams, GEN_MAX_PARAMS);
  return 0;
}

static int gen_kernel(gen_t *g)
{
  const ir_kernel_t *k = g->k;
  char t[300];
  strbuf_t b;
  int rc = 0;

  function_begin(g);
  strbuf_add(&g->out, "__global__ void ");
  if (g->o->has_block)
    strbuf_printf(&g->out, "__launch_bounds__(%u) ",
                  g->o->block[0] * g->o->block[1] * g->o->block[2]);
  strbuf_printf(&g->out, "%s(", k->name);
  if (gen_kernel_params(g) != 0)
    return g->err->code;
  strbuf_add(&g->out, ") {\n");
  for (uint32_t i = 0; i < k->nlocals && rc == 0; i++) {
    const ir_decl_t *dl = k->locals[i];
    ir_var_t *v = dl->var;
    strbuf_init(&b, 0);
    if (dl->kind == IR_D_LOCAL) {
      if (dl->init != NULL && gen_expr_string(g, dl->init, &b) != 0)
        rc = g->err->code;
      if (rc == 0 && (rc = gen_declare_var(g, v)) == 0) {
        gen_line(g);
        strbuf_printf(&g->out, "%s %s%s%s;\n", gen_ctype(v->type, t, sizeof(t)),
                      v->cname, dl->init ? " = " : "", dl->init ? b.p : "");
      }
    } else {
      if (dl->size != NULL && gen_expr_string(g, dl->size, &b) != 0)
        rc = g->err->code;
      if (rc == 0 && (rc = gen_declare_var(g, v)) == 0) {
        gen_line(g);
        strbuf_printf(
            &g->out, "%s__shared__ %s %s[%s];\n", dl->size ? "" : "extern ",
            gen_ctype(dl->elt, t, sizeof(t)), v->cname, dl->size ? b.p : "");
      }
    }
    strbuf_free(&b);
  }
  if (rc == 0)
    rc = gen_stmt(g, k->body);
  strbuf_add(&g->out, "}\n");
  return rc;
}

/* ------------------------------------------------------------ the whole */

void gen_result_free(gen_result_t *r)
{
  if (r == NULL)
    return;
  free(r->source);
  free(r->name);
  for (uint32_t i = 0; i < r->nparams; i++) {
    free(r->params[i].name);
    free(r->params[i].param);
    free(r->params[i].leaf);
  }
  free(r->params);
  memset(r, 0, sizeof(*r));
}

/* The helpers the kernel's built-in intrinsics call, once each, after the
 * types and before the kernel's own helpers. */
static void insert_intr_helpers(gen_t *g)
{
  strbuf_t nb;

  strbuf_init(&nb, g->out.limit);
  strbuf_addn(&nb, g->out.p, g->helpers_at);
  for (unsigned i = 0; i < g->nintr_helpers; i++) {
    strbuf_add(&nb, g->intr_helpers[i]);
    strbuf_addc(&nb, '\n');
  }
  strbuf_addn(&nb, g->out.p + g->helpers_at, g->out.len - g->helpers_at);
  strbuf_free(&g->out);
  g->out = nb;
}

/* Only for a kernel that uses f16 (so that other sources stay as they
 * were): what __half needs, and sarek_f32_barrier, which makes an f32 value
 * a register of its own before cast f16 narrows it. On AMD, LLVM's AMDGPU
 * back end fuses an f32 operation and the narrowing that follows it
 * (v_fma_mixlo_f16), skipping the f32 rounding the IR promises, whatever
 * -ffp-contract says; the empty asm stops that. hiprtc provides __half
 * without an include. On NVIDIA cuda_fp16.h declares __half (ptxas does not
 * fuse a conversion to f16, so the barrier is the identity); the CPU
 * device's header has its own __half. */
static void emit_f16_preamble(gen_t *g)
{
  switch (g->o->platform) {
  case CG_PLATFORM_AMD:
    strbuf_add(&g->out,
               "__device__ __forceinline__ float sarek_f32_barrier(float x) "
               "{\n  asm volatile(\"\" : \"+v\"(x));\n  return x;\n}\n");
    break;
  case CG_PLATFORM_NVIDIA:
    strbuf_add(&g->out, "#include <cuda_fp16.h>\n");
    /* fall through */
  default:
    strbuf_add(&g->out,
               "__device__ __forceinline__ float sarek_f32_barrier(float x) "
               "{\n  return x;\n}\n");
  }
}

/* Only for a kernel with coopmat statements: WMMA's header on NVIDIA, the
 * MFMA operand types on AMD (see gen_coopmat.c). */
static void emit_coopmat_preamble(gen_t *g)
{
  if (g->o->platform == CG_PLATFORM_NVIDIA)
    strbuf_add(&g->out, "#include <mma.h>\n");
  else if (g->o->platform == CG_PLATFORM_AMD)
    strbuf_add(&g->out,
               "typedef _Float16 sarek_cm_h4 __attribute__((ext_vector_type("
               "4)));\ntypedef float sarek_cm_f4 "
               "__attribute__((ext_vector_type(4)));\n");
}

int gen_hip(ir_doc_t *doc, const gen_options_t *o, gen_result_t *out,
            ir_error_t *err)
{
  gen_t g = {0};
  ir_kernel_t *k = doc->kernel;
  char t[300];
  int rc = 0;

  memset(out, 0, sizeof(*out));
  memset(err, 0, sizeof(*err));
  g.doc = doc;
  g.k = k;
  g.o = o;
  g.err = err;
  strbuf_init(&g.out, o->max_source ? o->max_source : GEN_MAX_SOURCE);
  strmap_init(&g.top);
  strmap_init(&g.vis);
  strmap_init(&g.frags);
  for (uint32_t i = 0; i < k->nrecords; i++)
    k->records[i].mark = 0;
  for (uint32_t i = 0; i < k->nvariants; i++)
    k->variants[i].mark = 0;
  for (uint32_t i = 0; i < k->nparams; i++)
    k->params[i]->var->soa = 0;

  if ((rc = top_names(&g)) != 0 || (rc = soa_setup(&g)) != 0)
    goto done;
  strbuf_printf(
      &g.out, "/* Generated by hipd from Sarek IR version %llu for %s. */\n",
      (unsigned long long)doc->version, cg_platform_name(o->platform));
  if (doc->stats.tags[IR_TS_ELTTYPE][IR_T_F16] > 0 ||
      doc->stats.tags[IR_TS_CONST][IR_C_F16] > 0)
    emit_f16_preamble(&g);
  if (doc->stats.tags[IR_TS_STMT][IR_S_COOPMAT] > 0)
    emit_coopmat_preamble(&g);
  strbuf_add(&g.out, "extern \"C\" {\n\n");
  for (uint32_t i = 0; i < k->nvariants && rc == 0; i++)
    rc = emit_variant(&g, &k->variants[i]);
  for (uint32_t i = 0; i < k->nrecords && rc == 0; i++)
    rc = emit_record(&g, &k->records[i]);
  g.helpers_at = g.out.len;
  if (rc == 0 && k->nhelpers > 0) {
    for (uint32_t i = 0; i < k->nhelpers; i++) {
      const ir_helper_t *h = &k->helpers[i];
      strbuf_printf(&g.out, "__device__ %s %s(",
                    gen_ctype(h->ret, t, sizeof(t)), h->name);
      for (uint32_t j = 0; j < h->nparams; j++)
        strbuf_printf(&g.out, "%s%s", j ? ", " : "",
                      gen_ctype(h->params[j]->type, t, sizeof(t)));
      strbuf_add(&g.out, ");\n");
    }
    strbuf_addc(&g.out, '\n');
    for (uint32_t i = 0; i < k->nhelpers && rc == 0; i++)
      rc = gen_helper(&g, &k->helpers[i]);
  }
  if (rc == 0)
    rc = gen_kernel(&g);
  strbuf_add(&g.out, "\n} /* extern \"C\" */\n");
  if (rc == 0 && g.nintr_helpers > 0 && !strbuf_failed(&g.out))
    insert_intr_helpers(&g);
  if (rc == 0 && g.failed)
    rc = err->code;
  if (rc == 0 && g.out.over)
    rc = gen_fail(&g, HIPD_EIR, k->path,
                  "the generated source would exceed the limit of %zu "
                  "bytes",
                  g.out.limit);
  if (rc == 0 && g.out.oom)
    rc = gen_fail(&g, HIPD_ENOMEM, NULL, "out of memory");
  if (rc == 0) {
    out->source = strbuf_take(&g.out, &out->len);
    out->name = strdup(k->name);
    out->params = g.params;
    out->nparams = g.nparams;
    g.params = NULL;
    g.nparams = 0;
    if (o->has_block)
      out->max_threads = o->block[0] * o->block[1] * o->block[2];
    if (out->source == NULL || out->name == NULL)
      rc = gen_fail(&g, HIPD_ENOMEM, NULL, "out of memory");
  }
done:
  if (rc != 0) {
    gen_result_free(out);
    if (err->code == 0)
      ir_error_set(err, rc, NULL, "%s", hipd_strerror(rc));
    rc = err->code;
  }
  for (uint32_t i = 0; i < g.nparams; i++) {
    free(g.params[i].name);
    free(g.params[i].param);
    free(g.params[i].leaf);
  }
  free(g.params);
  soa_cleanup(&g);
  strbuf_free(&g.out);
  strmap_free(&g.top);
  strmap_free(&g.vis);
  strmap_free(&g.frags);
  free(g.visstack);
  return rc;
}
