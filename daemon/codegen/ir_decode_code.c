/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode_code.c: the decoder's expressions (with
 * patterns, cases and lvalues) and statements (with native blocks)
 * (ir_decode.c, phase 1).
 */
#include "config.h"

#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "codegen/ir_decode_internal.h"
#include "hipd.h"

/* ---------------------------------------------------------- expressions */

/* Where an expression stands: what it may be. */
enum { CTX_INIT = 1 /* let/letmut initializer */, CTX_RETURN = 2 };

/* Remove the arguments that are the unit constant: OCaml passes () to a
 * function of no argument, and unit has no C value. */
static void drop_units(uint32_t *n, ir_expr_t **items)
{
  uint32_t k = 0;

  for (uint32_t i = 0; i < *n; i++)
    if (!(items[i]->kind == IR_E_CONST && items[i]->u.c.kind == IR_C_UNIT))
      items[k++] = items[i];
  *n = k;
}

/* [expr] at @p at. */
static int parse_exprs(dec_t *d, const ir_path_t *at, uint32_t *n,
                       ir_expr_t ***items)
{
  if (dec_open_array(d, at, "a list of exprs", n) != 0 ||
      NEWN(d, at, *items, *n) == NULL)
    return HIPD_EIR;
  for (uint32_t i = 0; i < *n; i++)
    if (dec_parse_expr(d, dec_pi(d, at, i), 0, &(*items)[i]) != 0)
      return HIPD_EIR;
  dec_leave(d);
  return 0;
}

static int parse_pattern(dec_t *d, const ir_path_t *at, ir_pattern_t **out)
{
  unsigned tag;
  ir_pattern_t *p;
  const ir_path_t *bp;

  if (dec_node_open(d, at, IR_TS_PATTERN, &tag) != 0 || NEW(d, at, p) == NULL)
    return HIPD_EIR;
  p->kind = (ir_pkind_t)tag;
  p->path = at;
  if (p->kind == IR_P_CTOR) {
    if (dec_read_name(d, dec_pk(d, at, "ctor"), NAME_IDENT, &p->ctor) != 0)
      return HIPD_EIR;
    bp = dec_pk(d, at, "binders");
    if (dec_open_array(d, bp, "a list of binders", &p->nbinders) != 0 ||
        NEWN(d, bp, p->binders, p->nbinders) == NULL)
      return HIPD_EIR;
    for (uint32_t i = 0; i < p->nbinders; i++)
      if (dec_parse_binder(d, dec_pi(d, bp, i), &p->binders[i]) != 0)
        return HIPD_EIR;
    dec_leave(d);
  }
  dec_leave(d);
  *out = p;
  return 0;
}

/* The cases [[pat, body]] of a match, bodies exprs or stmts. */
static int parse_cases(dec_t *d, const ir_path_t *at, int stmts, uint32_t *n,
                       void **cases)
{
  ir_ecase_t *ec = NULL;
  ir_scase_t *sc = NULL;

  if (dec_open_array(d, at, "a list of cases", n) != 0)
    return HIPD_EIR;
  if (*n == 0)
    return dec_fail(d, at, "a match has at least one case");
  if (stmts ? NEWN(d, at, sc, *n) == NULL : NEWN(d, at, ec, *n) == NULL)
    return HIPD_EIR;
  for (uint32_t i = 0; i < *n; i++) {
    const ir_path_t *cp = dec_pi(d, at, i);
    ir_pattern_t **pat = stmts ? &sc[i].pat : &ec[i].pat;
    if (dec_open_pair(d, cp, "a case [pat, body]") != 0 ||
        parse_pattern(d, dec_pk(d, cp, "pat"), pat) != 0)
      return HIPD_EIR;
    if (stmts ? dec_parse_stmt(d, dec_pk(d, cp, "body"), &sc[i].body)
              : dec_parse_expr(d, dec_pk(d, cp, "body"), 0, &ec[i].body))
      return HIPD_EIR;
    dec_leave(d);
  }
  dec_leave(d);
  *cases = stmts ? (void *)sc : (void *)ec;
  return 0;
}

int dec_parse_expr(dec_t *d, const ir_path_t *at, int ctx, ir_expr_t **out)
{
  unsigned tag;
  ir_expr_t *e;
  const ir_path_t *p;
  uint32_t n;

  if (dec_node_open(d, at, IR_TS_EXPR, &tag) != 0 || NEW(d, at, e) == NULL)
    return HIPD_EIR;
  e->kind = (ir_ekind_t)tag;
  e->path = at;
  switch (e->kind) {
  case IR_E_CONST:
    if (dec_parse_const(d, dec_pk(d, at, "c"), &e->u.c) != 0)
      return HIPD_EIR;
    break;
  case IR_E_VAR:
    if (dec_read_uint(d, dec_pk(d, at, "id"), &e->u.var.id) != 0 ||
        dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &e->u.var.name) !=
            0)
      return HIPD_EIR;
    break;
  case IR_E_BINOP:
    if (dec_read_enum(d, dec_pk(d, at, "op"), IR_TS_BINOP, &tag) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "lhs"), 0, &e->u.bin.l) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "rhs"), 0, &e->u.bin.r) != 0)
      return HIPD_EIR;
    e->u.bin.op = (ir_binop_t)tag;
    break;
  case IR_E_UNOP:
    if (dec_read_enum(d, dec_pk(d, at, "op"), IR_TS_UNOP, &tag) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "arg"), 0, &e->u.un.arg) != 0)
      return HIPD_EIR;
    e->u.un.op = (ir_unop_t)tag;
    break;
  case IR_E_AREAD:
    if (dec_read_name(d, dec_pk(d, at, "array"), NAME_IDENT,
                      &e->u.aread.array) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "index"), 0, &e->u.aread.index) != 0)
      return HIPD_EIR;
    break;
  case IR_E_AREADX:
    if (dec_parse_expr(d, dec_pk(d, at, "base"), 0, &e->u.areadx.base) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "index"), 0, &e->u.areadx.index) != 0)
      return HIPD_EIR;
    break;
  case IR_E_FIELD:
    if (dec_parse_expr(d, dec_pk(d, at, "rec"), 0, &e->u.field.rec) != 0 ||
        dec_read_name(d, dec_pk(d, at, "field"), NAME_IDENT,
                      &e->u.field.field) != 0)
      return HIPD_EIR;
    break;
  case IR_E_INTRINSIC:
    p = dec_pk(d, at, "path");
    if (dec_open_array(d, p, "a module path (a list of words)", &n) != 0 ||
        NEWN(d, p, e->u.intr.path, n) == NULL)
      return HIPD_EIR;
    e->u.intr.npath = n;
    for (uint32_t i = 0; i < n; i++)
      if (dec_read_name(d, dec_pi(d, p, i), NAME_WORD, &e->u.intr.path[i]) != 0)
        return HIPD_EIR;
    dec_leave(d);
    if (dec_read_name(d, dec_pk(d, at, "name"), NAME_WORD, &e->u.intr.name) !=
            0 ||
        parse_exprs(d, dec_pk(d, at, "args"), &e->u.intr.nargs,
                    &e->u.intr.args) != 0)
      return HIPD_EIR;
    drop_units(&e->u.intr.nargs, e->u.intr.args);
    e->u.intr.next = d->doc->intrs;
    d->doc->intrs = e;
    break;
  case IR_E_CAST:
    p = dec_pk(d, at, "type");
    if (dec_parse_type(d, p, &e->u.cast.type) != 0)
      return HIPD_EIR;
    if (!ir_type_is_scalar(e->u.cast.type))
      return dec_fail(d, p, "a cast is to i32, i64, f32, f64 or bool, not %s",
                      ir_tagsets[IR_TS_ELTTYPE].tags[e->u.cast.type->kind]);
    if (dec_parse_expr(d, dec_pk(d, at, "arg"), 0, &e->u.cast.arg) != 0)
      return HIPD_EIR;
    break;
  case IR_E_TUPLE:
    if (!(ctx & (CTX_INIT | CTX_RETURN)))
      return dec_fail(d, at,
                      "a tuple is only allowed as the initializer of let "
                      "or letmut, or as a returned value");
    p = dec_pk(d, at, "items");
    if (parse_exprs(d, p, &e->u.tuple.n, &e->u.tuple.items) != 0)
      return HIPD_EIR;
    if (e->u.tuple.n < 2)
      return dec_fail(d, p, "a tuple has at least 2 items, not %u",
                      e->u.tuple.n);
    break;
  case IR_E_APP:
    if (dec_read_name(d, dec_pk(d, at, "fn"), NAME_IDENT, &e->u.app.fn) != 0 ||
        parse_exprs(d, dec_pk(d, at, "args"), &e->u.app.nargs, &e->u.app.args))
      return HIPD_EIR;
    drop_units(&e->u.app.nargs, e->u.app.args);
    break;
  case IR_E_RECORD:
    if (dec_read_name(d, dec_pk(d, at, "type"), NAME_TNAME,
                      &e->u.record.type) != 0)
      return HIPD_EIR;
    p = dec_pk(d, at, "fields");
    if (dec_open_array(d, p, "a list of [field, value]", &n) != 0 ||
        NEWN(d, p, e->u.record.fields, n) == NULL)
      return HIPD_EIR;
    e->u.record.n = n;
    for (uint32_t i = 0; i < n; i++) {
      const ir_path_t *fp = dec_pi(d, p, i);
      ir_field_init_t *f = &e->u.record.fields[i];
      f->path = fp;
      if (dec_open_pair(d, fp, "a field [field, value]") != 0 ||
          dec_read_name(d, dec_pk(d, fp, "field"), NAME_IDENT, &f->field) !=
              0 ||
          dec_parse_expr(d, dec_pk(d, fp, "value"), 0, &f->value) != 0)
        return HIPD_EIR;
      dec_leave(d);
    }
    dec_leave(d);
    break;
  case IR_E_VARIANT:
    if (dec_read_name(d, dec_pk(d, at, "type"), NAME_TNAME,
                      &e->u.variant.type) ||
        dec_read_name(d, dec_pk(d, at, "ctor"), NAME_IDENT,
                      &e->u.variant.ctor) ||
        parse_exprs(d, dec_pk(d, at, "args"), &e->u.variant.nargs,
                    &e->u.variant.args))
      return HIPD_EIR;
    break;
  case IR_E_ALEN:
    if (dec_read_name(d, dec_pk(d, at, "array"), NAME_IDENT,
                      &e->u.aread.array) != 0)
      return HIPD_EIR;
    break;
  case IR_E_ACREATE:
    if (!(ctx & CTX_INIT))
      return dec_fail(d, at,
                      "acreate is only allowed as the initializer of let "
                      "or letmut");
    p = dec_pk(d, at, "elt");
    if (dec_parse_type(d, p, &e->u.acreate.elt) != 0)
      return HIPD_EIR;
    if (e->u.acreate.elt->kind == IR_T_UNIT ||
        e->u.acreate.elt->kind >= IR_T_ARRAY)
      return dec_fail(d, p, "an array's elements cannot be of type %s",
                      ir_tagsets[IR_TS_ELTTYPE].tags[e->u.acreate.elt->kind]);
    if (dec_parse_expr(d, dec_pk(d, at, "size"), 0, &e->u.acreate.size) != 0)
      return HIPD_EIR;
    p = dec_pk(d, at, "mem");
    if (dec_read_enum(d, p, IR_TS_MEMSPACE, &tag) != 0)
      return HIPD_EIR;
    e->u.acreate.mem = (ir_mem_t)tag;
    if (e->u.acreate.mem == IR_MEM_GLOBAL)
      return dec_fail(d, p,
                      "acreate makes arrays in shared or local memory, not "
                      "global");
    break;
  case IR_E_IF:
    if (dec_parse_expr(d, dec_pk(d, at, "cond"), 0, &e->u.cond.cond) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "then"), 0, &e->u.cond.then) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "else"), 0, &e->u.cond.els) != 0)
      return HIPD_EIR;
    break;
  case IR_E_MATCH:
    if (dec_parse_expr(d, dec_pk(d, at, "scrutinee"), 0, &e->u.match.scrut) !=
            0 ||
        parse_cases(d, dec_pk(d, at, "cases"), 0, &e->u.match.n,
                    (void **)&e->u.match.cases) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  dec_leave(d);
  *out = e;
  return 0;
}

static int parse_lvalue(dec_t *d, const ir_path_t *at, ir_lvalue_t **out)
{
  unsigned tag;
  ir_lvalue_t *l;

  if (dec_node_open(d, at, IR_TS_LVALUE, &tag) != 0 || NEW(d, at, l) == NULL)
    return HIPD_EIR;
  l->kind = (ir_lkind_t)tag;
  l->path = at;
  switch (l->kind) {
  case IR_L_VAR:
    if (dec_read_uint(d, dec_pk(d, at, "id"), &l->u.var.id) != 0 ||
        dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &l->u.var.name) !=
            0)
      return HIPD_EIR;
    break;
  case IR_L_AELEM:
    if (dec_read_name(d, dec_pk(d, at, "array"), NAME_IDENT,
                      &l->u.aelem.array) ||
        dec_parse_expr(d, dec_pk(d, at, "index"), 0, &l->u.aelem.index) != 0)
      return HIPD_EIR;
    break;
  case IR_L_AELEMX:
    if (dec_parse_expr(d, dec_pk(d, at, "base"), 0, &l->u.aelemx.base) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "index"), 0, &l->u.aelemx.index) != 0)
      return HIPD_EIR;
    break;
  case IR_L_FIELD:
    if (parse_lvalue(d, dec_pk(d, at, "target"), &l->u.field.target) != 0 ||
        dec_read_name(d, dec_pk(d, at, "field"), NAME_IDENT,
                      &l->u.field.field) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  dec_leave(d);
  *out = l;
  return 0;
}

/* ----------------------------------------------------------- statements */

/* Characters allowed in a pragma hint: enough for `unroll 4`,
 * `clang loop vectorize(enable)`, nothing that could end the line or open
 * a comment. */
static int hint_ok(const char *s, size_t n)
{
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
          (c >= '0' && c <= '9') || strchr("_ ()=,+-.:<>", c) != NULL) ||
        c == '\0')
      return 0;
  }
  return 1;
}

static int parse_native(dec_t *d, const ir_path_t *at, ir_stmt_t *s)
{
  uint32_t n, k = 0;
  val_t v;
  char q[300];

  if (dec_open_map(d, at, "native code ({framework: code})", &n) != 0)
    return HIPD_EIR;
  if (n > 64)
    return dec_fail(d, at, "native code for %u frameworks (at most 64)", n);
  if (NEWN(d, at, s->u.native.keys, n) == NULL ||
      NEWN(d, at, s->u.native.code, n) == NULL ||
      NEWN(d, at, s->u.native.paths, n) == NULL)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    const char *key;
    if (dec_rd(d, at, &v) != 0)
      return HIPD_EIR;
    if (v.t != V_STR)
      return dec_fail(d, at, "map keys are strings, not %s", dec_vnames[v.t]);
    if (v.n > 0 && v.s[0] == '_') {
      if (dec_skip(d, at) != 0)
        return HIPD_EIR;
      continue;
    }
    if (!dec_word_ok(v.s, v.n))
      return dec_fail(d, at, "'%s' is not a framework name (a word)",
                      ir_quote(q, sizeof(q), v.s, v.n));
    for (uint32_t j = 0; j < v.n; j++)
      if (v.s[j] >= 'A' && v.s[j] <= 'Z')
        return dec_fail(d, at, "framework names are lowercase: '%s'",
                        ir_quote(q, sizeof(q), v.s, v.n));
    if ((key = ir_strndup(d->arena, v.s, v.n)) == NULL)
      return dec_oom(d, at);
    for (uint32_t j = 0; j < k; j++)
      if (strcmp(s->u.native.keys[j], key) == 0)
        return dec_fail(d, at, "duplicate key '%s'", key);
    s->u.native.keys[k] = key;
    s->u.native.paths[k] = dec_pk(d, at, key);
    if (dec_read_text(d, s->u.native.paths[k], d->lim.max_native,
                      &s->u.native.code[k], NULL) != 0)
      return HIPD_EIR;
    k++;
  }
  dec_leave(d);
  if (k == 0)
    return dec_fail(d, at,
                    "a native block carries code for at least one "
                    "framework");
  s->u.native.n = k;
  return 0;
}

/* A component type name of a fragment or config. */
static int read_comp(dec_t *d, const ir_path_t *at, ir_cmcomp_t *out)
{
  const char *name;

  if (dec_read_name(d, at, NAME_WORD, &name) != 0)
    return HIPD_EIR;
  for (unsigned i = 0; i < IR_CMC__N; i++)
    if (strcmp(name, ir_cm_comp_names[i]) == 0) {
      *out = (ir_cmcomp_t)i;
      return 0;
    }
  return dec_fail(
      d, at, "unknown component type '%s' (f16, f32, u8, s8, u32, s32)", name);
}

static int read_dim(dec_t *d, const ir_path_t *at, uint32_t *out)
{
  uint64_t v;

  if (dec_read_uint(d, at, &v) != 0)
    return HIPD_EIR;
  if (v == 0 || v > 1024)
    return dec_fail(d, at, "a matrix dimension is 1 to 1024, not %llu",
                    (unsigned long long)v);
  *out = (uint32_t)v;
  return 0;
}

/* A fragment: {"use", "m", "n", "k", "component", "scope"?}. */
static int parse_frag(dec_t *d, const ir_path_t *at, ir_cm_frag_t *f)
{
  static const char *const keys[] = {"use", "m",         "n",
                                     "k",   "component", "scope"};
  uint32_t n, seen = 0;
  int which;
  const char *use;

  if (dec_open_map(d, at, "a fragment (a map)", &n) != 0)
    return HIPD_EIR;
  f->scope = "subgroup";
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 6, &seen, &which) != 0)
      return HIPD_EIR;
    const ir_path_t *kp = which >= 0 ? dec_pk(d, at, keys[which]) : NULL;
    switch (which) {
    case 0:
      if (dec_read_name(d, kp, NAME_WORD, &use) != 0)
        return HIPD_EIR;
      for (f->use = 0; f->use < IR_CMU__N; f->use++)
        if (strcmp(use, ir_cm_use_names[f->use]) == 0)
          break;
      if (f->use == IR_CMU__N)
        return dec_fail(d, kp, "unknown fragment use '%s' (a, b, accumulator)",
                        use);
      break;
    case 1:
    case 2:
    case 3:
      if (read_dim(d, kp, which == 1 ? &f->m : which == 2 ? &f->n : &f->k))
        return HIPD_EIR;
      break;
    case 4:
      if (read_comp(d, kp, &f->comp) != 0)
        return HIPD_EIR;
      break;
    case 5:
      if (dec_read_name(d, kp, NAME_WORD, &f->scope) != 0)
        return HIPD_EIR;
      break;
    default:
      break;
    }
  }
  dec_leave(d);
  return dec_map_required(d, at, keys, 6, 0x1f, seen);
}

/* A config: {"m", "n", "k", "a", "b", "c", "result", "saturating"?,
 * "scope"?}. */
static int parse_cfg(dec_t *d, const ir_path_t *at, ir_cm_cfg_t *c)
{
  static const char *const keys[] = {"m", "n",      "k",          "a",    "b",
                                     "c", "result", "saturating", "scope"};
  uint32_t n, seen = 0;
  int which;

  if (dec_open_map(d, at, "a coopmat config (a map)", &n) != 0)
    return HIPD_EIR;
  c->scope = "subgroup";
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 9, &seen, &which) != 0)
      return HIPD_EIR;
    const ir_path_t *kp = which >= 0 ? dec_pk(d, at, keys[which]) : NULL;
    int rc = 0;
    switch (which) {
    case 0:
      rc = read_dim(d, kp, &c->m);
      break;
    case 1:
      rc = read_dim(d, kp, &c->n);
      break;
    case 2:
      rc = read_dim(d, kp, &c->k);
      break;
    case 3:
      rc = read_comp(d, kp, &c->a);
      break;
    case 4:
      rc = read_comp(d, kp, &c->b);
      break;
    case 5:
      rc = read_comp(d, kp, &c->c);
      break;
    case 6:
      rc = read_comp(d, kp, &c->result);
      break;
    case 7:
      rc = dec_read_bool(d, kp, &c->saturating);
      break;
    case 8:
      rc = dec_read_name(d, kp, NAME_WORD, &c->scope);
      break;
    default:
      break;
    }
    if (rc != 0)
      return HIPD_EIR;
  }
  dec_leave(d);
  return dec_map_required(d, at, keys, 9, 0x7f, seen);
}

/* ["coopmat", op]: op is ["decl", name, frag], ["load", dst, frag, src,
 * index, stride], ["store", src, frag, dst, index, stride] or ["muladd",
 * dst, a, b, c, cfg]. */
static int parse_coopmat(dec_t *d, const ir_path_t *at, ir_stmt_t *s)
{
  unsigned tag;

  if (dec_node_open(d, at, IR_TS_COOPMAT, &tag) != 0)
    return HIPD_EIR;
  s->u.cm.op = (ir_cmkind_t)tag;
  switch (s->u.cm.op) {
  case IR_CM_DECL:
    if (dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &s->u.cm.frag) ||
        parse_frag(d, dec_pk(d, at, "frag"), &s->u.cm.f) != 0)
      return HIPD_EIR;
    break;
  case IR_CM_LOAD:
  case IR_CM_STORE: {
    int load = s->u.cm.op == IR_CM_LOAD;
    if (dec_read_name(d, dec_pk(d, at, load ? "dst" : "src"), NAME_IDENT,
                      &s->u.cm.frag) != 0 ||
        parse_frag(d, dec_pk(d, at, "frag"), &s->u.cm.f) != 0 ||
        dec_read_name(d, dec_pk(d, at, load ? "src" : "dst"), NAME_IDENT,
                      &s->u.cm.array) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "index"), 0, &s->u.cm.index) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "stride"), 0, &s->u.cm.stride) != 0)
      return HIPD_EIR;
    break;
  }
  default:
    if (dec_read_name(d, dec_pk(d, at, "dst"), NAME_IDENT, &s->u.cm.frag) ||
        dec_read_name(d, dec_pk(d, at, "a"), NAME_IDENT, &s->u.cm.a) != 0 ||
        dec_read_name(d, dec_pk(d, at, "b"), NAME_IDENT, &s->u.cm.b) != 0 ||
        dec_read_name(d, dec_pk(d, at, "c"), NAME_IDENT, &s->u.cm.c) != 0 ||
        parse_cfg(d, dec_pk(d, at, "cfg"), &s->u.cm.cfg) != 0)
      return HIPD_EIR;
  }
  dec_leave(d);
  return 0;
}

int dec_parse_stmt(dec_t *d, const ir_path_t *at, ir_stmt_t **out)
{
  unsigned tag;
  ir_stmt_t *s;
  const ir_path_t *p;
  uint32_t n;

  if (dec_node_open(d, at, IR_TS_STMT, &tag) != 0 || NEW(d, at, s) == NULL)
    return HIPD_EIR;
  s->kind = (ir_skind_t)tag;
  s->path = at;
  switch (s->kind) {
  case IR_S_ASSIGN:
    if (parse_lvalue(d, dec_pk(d, at, "target"), &s->u.assign.target) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "value"), 0, &s->u.assign.value) != 0)
      return HIPD_EIR;
    break;
  case IR_S_SEQ:
    /* The statements are indexed directly: kernel.body[3]. */
    if (dec_open_array(d, at, "a list of stmts", &n) != 0 ||
        NEWN(d, at, s->u.seq.items, n) == NULL)
      return HIPD_EIR;
    s->u.seq.n = n;
    for (uint32_t i = 0; i < n; i++)
      if (dec_parse_stmt(d, dec_pi(d, at, i), &s->u.seq.items[i]) != 0)
        return HIPD_EIR;
    dec_leave(d);
    break;
  case IR_S_IF:
    if (dec_parse_expr(d, dec_pk(d, at, "cond"), 0, &s->u.sif.cond) != 0 ||
        dec_parse_stmt(d, dec_pk(d, at, "then"), &s->u.sif.then) != 0)
      return HIPD_EIR;
    if (!dec_take_nil(d) &&
        dec_parse_stmt(d, dec_pk(d, at, "else"), &s->u.sif.els) != 0)
      return HIPD_EIR;
    break;
  case IR_S_WHILE:
    if (dec_parse_expr(d, dec_pk(d, at, "cond"), 0, &s->u.swhile.cond) != 0 ||
        dec_parse_stmt(d, dec_pk(d, at, "body"), &s->u.swhile.body) != 0)
      return HIPD_EIR;
    break;
  case IR_S_FOR:
    if (dec_parse_var(d, dec_pk(d, at, "var"), &s->u.sfor.var) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "from"), 0, &s->u.sfor.from) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "to"), 0, &s->u.sfor.to) != 0 ||
        dec_read_enum(d, dec_pk(d, at, "dir"), IR_TS_DIR, &tag) != 0 ||
        dec_parse_stmt(d, dec_pk(d, at, "body"), &s->u.sfor.body) != 0)
      return HIPD_EIR;
    s->u.sfor.dir = (ir_dir_t)tag;
    s->u.sfor.var->vkind = IR_VK_FOR;
    break;
  case IR_S_MATCH:
    if (dec_parse_expr(d, dec_pk(d, at, "scrutinee"), 0, &s->u.match.scrut) !=
            0 ||
        parse_cases(d, dec_pk(d, at, "cases"), 1, &s->u.match.n,
                    (void **)&s->u.match.cases) != 0)
      return HIPD_EIR;
    break;
  case IR_S_RETURN:
  case IR_S_EXPR:
    if (dec_parse_expr(d, dec_pk(d, at, "value"),
                       s->kind == IR_S_RETURN ? CTX_RETURN : 0,
                       &s->u.ret.value) != 0)
      return HIPD_EIR;
    break;
  case IR_S_LET:
  case IR_S_LETMUT:
    if (dec_parse_var(d, dec_pk(d, at, "var"), &s->u.let.var) != 0 ||
        dec_parse_expr(d, dec_pk(d, at, "init"), CTX_INIT, &s->u.let.init) !=
            0 ||
        dec_parse_stmt(d, dec_pk(d, at, "body"), &s->u.let.body) != 0)
      return HIPD_EIR;
    s->u.let.var->vkind = IR_VK_LET;
    break;
  case IR_S_PRAGMA:
    p = dec_pk(d, at, "hints");
    if (dec_open_array(d, p, "a list of hints", &n) != 0 ||
        NEWN(d, p, s->u.pragma.hints, n) == NULL)
      return HIPD_EIR;
    if (n == 0)
      return dec_fail(d, p, "a pragma has at least one hint");
    s->u.pragma.n = n;
    for (uint32_t i = 0; i < n; i++) {
      const ir_path_t *hp = dec_pi(d, p, i);
      size_t len;
      if (dec_read_text(d, hp, d->lim.max_hint, &s->u.pragma.hints[i], &len) !=
          0)
        return HIPD_EIR;
      if (!hint_ok(s->u.pragma.hints[i], len))
        return dec_fail(d, hp,
                        "a pragma hint is made of letters, digits, spaces "
                        "and _()=,+-.:<> only");
    }
    dec_leave(d);
    if (dec_parse_stmt(d, dec_pk(d, at, "body"), &s->u.pragma.body) != 0)
      return HIPD_EIR;
    break;
  case IR_S_BLOCK:
    if (dec_parse_stmt(d, dec_pk(d, at, "body"), &s->u.block.body) != 0)
      return HIPD_EIR;
    break;
  case IR_S_NATIVE:
    if (parse_native(d, dec_pk(d, at, "code"), s) != 0)
      return HIPD_EIR;
    break;
  case IR_S_COOPMAT:
    if (parse_coopmat(d, dec_pk(d, at, "op"), s) != 0)
      return HIPD_EIR;
    break;
  default:
    break;
  }
  dec_leave(d);
  *out = s;
  return 0;
}
