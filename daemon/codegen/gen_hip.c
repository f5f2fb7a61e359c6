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

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_internal.h"
#include "hipd.h"
#include "util/array.h"

/* ----------------------------------------------------------- plumbing */

int gen_fail(gen_t *g, int code, const ir_path_t *at, const char *fmt, ...)
{
  va_list ap;
  char msg[512];

  g->failed = 1;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return ir_error_set(g->err, code, at, "%s", msg);
}

static const char *arena_printf(gen_t *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A string in the document's arena (NULL when out of memory). */
static const char *arena_printf(gen_t *g, const char *fmt, ...)
{
  va_list ap;
  char *p;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || (p = ir_alloc(g->doc->arena, (size_t)n + 1)) == NULL) {
    gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
    return NULL;
  }
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

const char *gen_ctype(const ir_type_t *t, char *buf, size_t size)
{
  static const char *const names[] = {"int",    "long long", "float",
                                      "double", "int",       "void"};
  char inner[300];

  switch (t->kind) {
  case IR_T_RECORD:
    snprintf(buf, size, "%s", t->rec->cname);
    break;
  case IR_T_VARIANT:
    snprintf(buf, size, "%s", t->variant->cname);
    break;
  case IR_T_ARRAY:
  case IR_T_VEC:
    snprintf(buf, size, "%s*", gen_ctype(t->elt, inner, sizeof(inner)));
    break;
  default:
    snprintf(buf, size, "%s", names[t->kind]);
  }
  return buf;
}

void gen_line(gen_t *g)
{
  for (int i = 0; i < g->indent; i++)
    strbuf_add(&g->out, "  ");
}

void gen_temp(gen_t *g, const char *prefix, char *buf, size_t size)
{
  snprintf(buf, size, "sarek_%s%u", prefix, g->tmp++);
}

int gen_param_add(gen_t *g, const char *name, gen_ptype_t type, gen_role_t role,
                  const char *param, const char *leaf)
{
  gen_param_t *p;

  if (ARRAY_GROW(g->params, g->nparams, g->capparams, 16) != 0)
    return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
  p = &g->params[g->nparams];
  memset(p, 0, sizeof(*p));
  p->name = strdup(name);
  p->param = strdup(param);
  p->leaf = leaf ? strdup(leaf) : NULL;
  p->type = type;
  p->role = role;
  g->nparams++;
  if (p->name == NULL || p->param == NULL || (leaf && p->leaf == NULL))
    return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
  return 0;
}

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

/* ------------------------------------------------------------- names */

int gen_visible_push(gen_t *g, const char *name)
{
  void **slot = strmap_slot(&g->vis, name);

  if (slot == NULL)
    return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
  if (ARRAY_GROW(g->visstack, g->nvis, g->capvis, 64) != 0)
    return gen_fail(g, HIPD_ENOMEM, NULL, "out of memory");
  *slot = (void *)((uintptr_t)*slot + 1);
  g->visstack[g->nvis++] = name;
  return 0;
}

static size_t vis_mark(gen_t *g)
{
  return g->nvis;
}

static void vis_pop(gen_t *g, size_t mark)
{
  while (g->nvis > mark) {
    void **slot = strmap_slot(&g->vis, g->visstack[--g->nvis]);
    if (slot != NULL)
      *slot = (void *)((uintptr_t)*slot - 1);
  }
}

static int visible(gen_t *g, const char *name)
{
  return strmap_get(&g->vis, name) != NULL || strmap_get(&g->top, name);
}

/* Choose the C name of a declaration and make it visible. */
static int declare_var(gen_t *g, ir_var_t *v)
{
  if (!visible(g, v->name))
    v->cname = v->name;
  else if (v->vkind == IR_VK_SHARED)
    v->cname = arena_printf(g, "sarek_sh%u_%s", g->tmp++, v->name);
  else
    v->cname =
        arena_printf(g, "sarek_%llu_%s", (unsigned long long)v->id, v->name);
  if (v->cname == NULL)
    return HIPD_ENOMEM;
  return gen_visible_push(g, v->cname);
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
  /* the math functions: the built-ins whose code is "name(%s...)" */
  for (size_t i = 0; i < nb; i++) {
    size_t n = strlen(b[i].name);
    if (strncmp(b[i].code, b[i].name, n) == 0 && b[i].code[n] == '(')
      TOP(b[i].name);
  }
#undef TOP
  return 0;
}

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
static const ir_variant_t *match_variant(ir_pattern_t *const *pats, uint32_t n)
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
      v->cname = arena_printf(g, "%s.data.%s_v", s, p->def->name);
    else
      v->cname = arena_printf(g, "%s.data.%s_v._%u", s, p->def->name, j);
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
  v = match_variant(pats, n);
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
  if (rc == 0)
    intr_expand(b, &def, strs, n);
  for (uint32_t i = 0; i < n; i++)
    strbuf_free(&args[i]);
  free(args);
  free(strs);
  strbuf_free(&full);
  return rc;
}

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
    if (soa_read(g, b, e, &handled) != 0)
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
    else
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

static int gen_lvalue(gen_t *g, strbuf_t *b, const ir_lvalue_t *l)
{
  switch (l->kind) {
  case IR_L_VAR:
    strbuf_add(b, l->u.var.decl->cname);
    return 0;
  case IR_L_AELEM:
    if (l->u.aelem.decl->soa) /* soa_assign takes these */
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

/* ----------------------------------------------------------- statements */

static int gen_stmt(gen_t *g, const ir_stmt_t *s);

/* One expression into a string of its own (freed by the caller). */
static int expr_string(gen_t *g, const ir_expr_t *e, strbuf_t *b)
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

/* @p s as the body of a C block whose '{' the caller wrote. */
static int gen_scoped(gen_t *g, const ir_stmt_t *s)
{
  size_t mark = vis_mark(g);
  int rc;

  g->indent++;
  rc = gen_stmt(g, s);
  g->indent--;
  vis_pop(g, mark);
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
  v = match_variant(pats, n);
  free(pats);
  if (expr_string(g, s->u.match.scrut, &scrut) != 0) {
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
    size_t mark = vis_mark(g);
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
      rc = declare_var(g, b);
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
    vis_pop(g, mark);
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

  if (expr_string(g, s->u.sfor.from, &from) != 0) {
    strbuf_free(&from);
    return g->err->code;
  }
  if (expr_string(g, s->u.sfor.to, &to) != 0) {
    strbuf_free(&from);
    strbuf_free(&to);
    return g->err->code;
  }
  mark = vis_mark(g);
  rc = declare_var(g, v);
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
  vis_pop(g, mark);
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
    if (expr_string(g, init->u.acreate.size, &b) != 0 || declare_var(g, v)) {
      strbuf_free(&b);
      return g->err->code;
    }
    gen_line(g);
    strbuf_printf(&g->out, "%s%s %s[%s];\n",
              init->u.acreate.mem == IR_MEM_SHARED ? "__shared__ " : "",
              gen_ctype(init->u.acreate.elt, t, sizeof(t)), v->cname, b.p);
  } else {
    if (expr_string(g, init, &b) != 0 || declare_var(g, v) != 0) {
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

static int gen_stmt(gen_t *g, const ir_stmt_t *s)
{
  strbuf_t a, b;
  intr_def_t def;
  char msg[300];
  int handled = 0, rc = 0;

  if (g->failed)
    return g->err->code;
  switch (s->kind) {
  case IR_S_ASSIGN:
    if (soa_assign(g, s, &handled) != 0 || handled)
      return g->failed ? g->err->code : 0;
    strbuf_init(&a, 0);
    strbuf_init(&b, 0);
    if (gen_lvalue(g, &a, s->u.assign.target) != 0 ||
        expr_string(g, s->u.assign.value, &b) != 0) {
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
    if (expr_string(g, s->u.sif.cond, &a) != 0) {
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
    if (expr_string(g, s->u.swhile.cond, &a) != 0) {
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
    if (expr_string(g, s->u.ret.value, &a) != 0) {
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
    if (expr_string(g, s->u.ret.value, &a) != 0) {
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
  default:
    return gen_fail(g, HIPD_EIR, s->path, "unknown statement");
  }
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
    strbuf_printf(&g->out, "  %s %s;\n", gen_ctype(r->fields[i].type, t, sizeof(t)),
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
          strbuf_printf(&g->out, " %s _%u;", gen_ctype(c->payload[j], t, sizeof(t)),
                    j);
        strbuf_printf(&g->out, " } %s_v;\n", c->name);
      }
    }
    strbuf_add(&g->out, "  } data;\n");
  }
  strbuf_printf(&g->out, "} %s;\n\n", v->cname);
  for (uint32_t i = 0; i < v->nctors; i++) {
    const ir_ctor_t *c = &v->ctors[i];
    strbuf_printf(&g->out, "__device__ __host__ inline %s %s(", v->cname, c->maker);
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
  vis_pop(g, 0);
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
    if (declare_var(g, h->params[i]) != 0)
      return g->err->code;
    strbuf_printf(&g->out, "%s%s %s", i ? ", " : "",
              gen_ctype(h->params[i]->type, t, sizeof(t)), h->params[i]->cname);
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
    if (declare_var(g, v) != 0)
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
      if (dl->init != NULL && expr_string(g, dl->init, &b) != 0)
        rc = g->err->code;
      if (rc == 0 && (rc = declare_var(g, v)) == 0) {
        gen_line(g);
        strbuf_printf(&g->out, "%s %s%s%s;\n", gen_ctype(v->type, t, sizeof(t)),
                  v->cname, dl->init ? " = " : "", dl->init ? b.p : "");
      }
    } else {
      if (dl->size != NULL && expr_string(g, dl->size, &b) != 0)
        rc = g->err->code;
      if (rc == 0 && (rc = declare_var(g, v)) == 0) {
        gen_line(g);
        strbuf_printf(&g->out, "%s__shared__ %s %s[%s];\n",
                  dl->size ? "" : "extern ", gen_ctype(dl->elt, t, sizeof(t)),
                  v->cname, dl->size ? b.p : "");
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
  for (uint32_t i = 0; i < k->nrecords; i++)
    k->records[i].mark = 0;
  for (uint32_t i = 0; i < k->nvariants; i++)
    k->variants[i].mark = 0;
  for (uint32_t i = 0; i < k->nparams; i++)
    k->params[i]->var->soa = 0;

  if ((rc = top_names(&g)) != 0 || (rc = soa_setup(&g)) != 0)
    goto done;
  strbuf_printf(&g.out,
            "/* Generated by hipd from Sarek IR version %llu for %s. */\n"
            "extern \"C\" {\n\n",
            (unsigned long long)doc->version, cg_platform_name(o->platform));
  for (uint32_t i = 0; i < k->nvariants && rc == 0; i++)
    rc = emit_variant(&g, &k->variants[i]);
  for (uint32_t i = 0; i < k->nrecords && rc == 0; i++)
    rc = emit_record(&g, &k->records[i]);
  if (rc == 0 && k->nhelpers > 0) {
    for (uint32_t i = 0; i < k->nhelpers; i++) {
      const ir_helper_t *h = &k->helpers[i];
      strbuf_printf(&g.out, "__device__ %s %s(", gen_ctype(h->ret, t, sizeof(t)),
                h->name);
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
  free(g.visstack);
  return rc;
}
