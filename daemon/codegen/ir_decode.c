/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode.c: msgpack bytes -> validated IR (proto/IR.md).
 *
 * Three phases, as IR.md states them:
 *  1. the encoding: a recursive-descent reader over the raw msgpack bytes
 *     (msgpack-c's unpacker stops at 32 levels; an IR nests deeper) builds
 *     the tree, checking limits, node shapes, tags, arities, field and key
 *     types, name syntax and where constructs may appear;
 *  2. the tables: records, variants and helpers (names, duplicates,
 *     recursion by value, the C names they become), and every record or
 *     variant type reference is resolved;
 *  3. scopes and references: the kernel, then each helper, is walked with
 *     its scopes, resolving every variable, array, helper, field,
 *     constructor and pattern.
 * The first violation stops the decoding with HIPD_EIR and its path.
 *
 * This file holds the document and kernel level of phase 1 (declarations,
 * helpers, records, variants, the kernel) and ir_decode() itself; the
 * reader is ir_decode_read.c, types and constants ir_decode_types.c,
 * expressions and statements ir_decode_code.c, phase 2
 * ir_decode_tables.c and phase 3 ir_decode_scope.c. Their shared state
 * is ir_decode_internal.h.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "codegen/ir_decode_internal.h"
#include "hipd.h"

/* --------------------------------------------------------- declarations */

enum { IN_PARAMS, IN_LOCALS };

static int parse_arrinfo(dec_t *d, const ir_path_t *at, ir_decl_t *dl)
{
  static const char *const keys[] = {"elt", "mem"};
  uint32_t n, seen = 0;
  unsigned mem;
  int which;

  if (dec_take_nil(d))
    return 0;
  if (dec_open_map(d, at, "an arrinfo (nil or {elt, mem})", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0 && dec_parse_type(d, dec_pk(d, at, "elt"), &dl->elt) != 0)
      return HIPD_EIR;
    if (which == 1) {
      if (dec_read_enum(d, dec_pk(d, at, "mem"), IR_TS_MEMSPACE, &mem) != 0)
        return HIPD_EIR;
      dl->mem = (ir_mem_t)mem;
    }
  }
  dec_leave(d);
  if (dec_map_required(d, at, keys, 2, 3, seen) != 0)
    return HIPD_EIR;
  dl->has_arrinfo = 1;
  return 0;
}

static int parse_decl(dec_t *d, const ir_path_t *at, int where, ir_decl_t **out)
{
  unsigned tag;
  ir_decl_t *dl;
  ir_type_t *arr;
  const ir_path_t *p;

  if (dec_node_open(d, at, IR_TS_DECL, &tag) != 0 || NEW(d, at, dl) == NULL)
    return HIPD_EIR;
  dl->kind = (ir_dkind_t)tag;
  dl->path = at;
  if ((dl->kind == IR_D_PARAM) != (where == IN_PARAMS))
    return dec_fail(d, at, "a '%s' decl is only allowed in kernel.%s",
                    ir_tagsets[IR_TS_DECL].tags[tag],
                    dl->kind == IR_D_PARAM ? "params" : "locals");
  switch (dl->kind) {
  case IR_D_PARAM:
    if (dec_parse_var(d, dec_pk(d, at, "var"), &dl->var) != 0 ||
        parse_arrinfo(d, dec_pk(d, at, "arrinfo"), dl) != 0)
      return HIPD_EIR;
    dl->var->vkind = IR_VK_PARAM;
    break;
  case IR_D_LOCAL:
    if (dec_parse_var(d, dec_pk(d, at, "var"), &dl->var) != 0)
      return HIPD_EIR;
    dl->var->vkind = IR_VK_LOCAL;
    if (!dec_take_nil(d) &&
        dec_parse_expr(d, dec_pk(d, at, "init"), 0, &dl->init) != 0)
      return HIPD_EIR;
    break;
  case IR_D_SHARED:
    if (NEW(d, at, dl->var) == NULL || NEW(d, at, arr) == NULL)
      return HIPD_EIR;
    if (dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &dl->var->name) !=
        0)
      return HIPD_EIR;
    p = dec_pk(d, at, "elt");
    if (dec_parse_type(d, p, &dl->elt) != 0)
      return HIPD_EIR;
    if (dl->elt->kind == IR_T_UNIT || dl->elt->kind >= IR_T_ARRAY)
      return dec_fail(d, p, "an array's elements cannot be of type %s",
                      ir_tagsets[IR_TS_ELTTYPE].tags[dl->elt->kind]);
    if (!dec_take_nil(d) &&
        dec_parse_expr(d, dec_pk(d, at, "size"), 0, &dl->size) != 0)
      return HIPD_EIR;
    arr->kind = IR_T_ARRAY;
    arr->elt = dl->elt;
    arr->mem = IR_MEM_SHARED;
    arr->path = at;
    dl->var->type = arr;
    dl->var->vkind = IR_VK_SHARED;
    dl->var->path = at;
    break;
  default:
    break;
  }
  dec_leave(d);
  *out = dl;
  return 0;
}

/* ------------------------------------------------- helpers and types */

static int parse_helper(dec_t *d, const ir_path_t *at, ir_helper_t *h)
{
  static const char *const keys[] = {"name", "params", "ret", "body"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  h->path = at;
  if (dec_open_map(d, at, "a helper", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 4, &seen, &which) != 0)
      return HIPD_EIR;
    switch (which) {
    case 0:
      if (dec_read_name(d, dec_pk(d, at, "name"), NAME_IDENT, &h->name) != 0)
        return HIPD_EIR;
      break;
    case 1:
      p = dec_pk(d, at, "params");
      if (dec_open_array(d, p, "a list of vars", &h->nparams) != 0 ||
          NEWN(d, p, h->params, h->nparams) == NULL)
        return HIPD_EIR;
      for (uint32_t j = 0; j < h->nparams; j++) {
        if (dec_parse_var(d, dec_pi(d, p, j), &h->params[j]) != 0)
          return HIPD_EIR;
        h->params[j]->vkind = IR_VK_HPARAM;
      }
      dec_leave(d);
      break;
    case 2:
      if (dec_parse_type(d, dec_pk(d, at, "ret"), &h->ret) != 0)
        return HIPD_EIR;
      break;
    case 3:
      if (dec_parse_stmt(d, dec_pk(d, at, "body"), &h->body) != 0)
        return HIPD_EIR;
      break;
    }
  }
  dec_leave(d);
  return dec_map_required(d, at, keys, 4, 15, seen);
}

static char *mangle(dec_t *d, const char *name)
{
  char *c = ir_strndup(d->arena, name, strlen(name));

  if (c != NULL)
    for (char *q = c; *q != '\0'; q++)
      if (*q == '.')
        *q = '_';
  return c;
}

static int parse_record_def(dec_t *d, const ir_path_t *at, ir_record_t *r)
{
  static const char *const keys[] = {"name", "fields"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  r->path = at;
  if (dec_open_map(d, at, "a record definition", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0) {
      if (dec_read_name(d, dec_pk(d, at, "name"), NAME_TNAME, &r->name) != 0)
        return HIPD_EIR;
      if ((r->cname = mangle(d, r->name)) == NULL)
        return dec_oom(d, at);
    } else if (which == 1) {
      p = dec_pk(d, at, "fields");
      if (dec_open_array(d, p, "a list of [field, type]", &r->nfields) != 0 ||
          NEWN(d, p, r->fields, r->nfields) == NULL)
        return HIPD_EIR;
      if (r->nfields == 0)
        return dec_fail(d, p, "a record has at least one field");
      for (uint32_t j = 0; j < r->nfields; j++) {
        const ir_path_t *fp = dec_pi(d, p, j);
        r->fields[j].path = fp;
        if (dec_open_pair(d, fp, "a field [field, type]") != 0 ||
            dec_read_name(d, dec_pk(d, fp, "field"), NAME_IDENT,
                          &r->fields[j].name) ||
            dec_parse_type(d, dec_pk(d, fp, "type"), &r->fields[j].type) != 0)
          return HIPD_EIR;
        dec_leave(d);
      }
      dec_leave(d);
    }
  }
  dec_leave(d);
  return dec_map_required(d, at, keys, 2, 3, seen);
}

static int parse_variant_def(dec_t *d, const ir_path_t *at, ir_variant_t *v)
{
  static const char *const keys[] = {"name", "ctors"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  v->path = at;
  if (dec_open_map(d, at, "a variant definition", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    if (dec_map_key(d, at, keys, 2, &seen, &which) != 0)
      return HIPD_EIR;
    if (which == 0) {
      if (dec_read_name(d, dec_pk(d, at, "name"), NAME_TNAME, &v->name) != 0)
        return HIPD_EIR;
      if ((v->cname = mangle(d, v->name)) == NULL)
        return dec_oom(d, at);
    } else if (which == 1) {
      p = dec_pk(d, at, "ctors");
      if (dec_open_array(d, p, "a list of [ctor, payload]", &v->nctors) != 0 ||
          NEWN(d, p, v->ctors, v->nctors) == NULL)
        return HIPD_EIR;
      if (v->nctors == 0)
        return dec_fail(d, p, "a variant has at least one constructor");
      for (uint32_t j = 0; j < v->nctors; j++) {
        const ir_path_t *cp = dec_pi(d, p, j), *pp;
        ir_ctor_t *c = &v->ctors[j];
        c->path = cp;
        c->index = j;
        c->variant = v;
        if (dec_open_pair(d, cp, "a constructor [ctor, payload]") != 0 ||
            dec_read_name(d, dec_pk(d, cp, "ctor"), NAME_IDENT, &c->name) != 0)
          return HIPD_EIR;
        pp = dec_pk(d, cp, "payload");
        if (dec_open_array(d, pp, "a list of types", &c->npayload) != 0 ||
            NEWN(d, pp, c->payload, c->npayload) == NULL)
          return HIPD_EIR;
        for (uint32_t k = 0; k < c->npayload; k++)
          if (dec_parse_type(d, dec_pi(d, pp, k), &c->payload[k]) != 0)
            return HIPD_EIR;
        dec_leave(d);
        dec_leave(d);
      }
      dec_leave(d);
    }
  }
  dec_leave(d);
  return dec_map_required(d, at, keys, 2, 3, seen);
}

int dec_parse_kernel(dec_t *d, const ir_path_t *at, ir_kernel_t *k)
{
  static const char *const keys[] = {"name",    "params",   "locals", "body",
                                     "records", "variants", "helpers"};
  uint32_t n, seen = 0;
  const ir_path_t *p;
  int which;

  k->path = at;
  if (dec_open_map(d, at, "the kernel", &n) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t m;
    if (dec_map_key(d, at, keys, 7, &seen, &which) != 0)
      return HIPD_EIR;
    if (which < 0)
      continue;
    p = dec_pk(d, at, keys[which]);
    switch (which) {
    case 0:
      if (dec_read_name(d, p, NAME_IDENT, &k->name) != 0)
        return HIPD_EIR;
      break;
    case 1:
    case 2: {
      ir_decl_t ***list = which == 1 ? &k->params : &k->locals;
      if (dec_open_array(d, p, "a list of decls", &m) != 0 ||
          NEWN(d, p, *list, m) == NULL)
        return HIPD_EIR;
      for (uint32_t j = 0; j < m; j++)
        if (parse_decl(d, dec_pi(d, p, j), which == 1 ? IN_PARAMS : IN_LOCALS,
                       &(*list)[j]) != 0)
          return HIPD_EIR;
      dec_leave(d);
      if (which == 1)
        k->nparams = m;
      else
        k->nlocals = m;
      break;
    }
    case 3:
      if (dec_parse_stmt(d, p, &k->body) != 0)
        return HIPD_EIR;
      break;
    case 4:
    case 5:
    case 6:
      if (dec_open_array(d, p,
                         which == 4   ? "a list of record definitions"
                         : which == 5 ? "a list of variant definitions"
                                      : "a list of helpers",
                         &m) != 0)
        return HIPD_EIR;
      if (m > d->lim.max_defs)
        return dec_fail(d, p, "%u %s (at most %u)", m, keys[which],
                        d->lim.max_defs);
      if (which == 4) {
        k->nrecords = m;
        if (NEWN(d, p, k->records, m) == NULL)
          return HIPD_EIR;
        for (uint32_t j = 0; j < m; j++)
          if (parse_record_def(d, dec_pi(d, p, j), &k->records[j]) != 0)
            return HIPD_EIR;
      } else if (which == 5) {
        k->nvariants = m;
        if (NEWN(d, p, k->variants, m) == NULL)
          return HIPD_EIR;
        for (uint32_t j = 0; j < m; j++)
          if (parse_variant_def(d, dec_pi(d, p, j), &k->variants[j]) != 0)
            return HIPD_EIR;
      } else {
        k->nhelpers = m;
        if (NEWN(d, p, k->helpers, m) == NULL)
          return HIPD_EIR;
        for (uint32_t j = 0; j < m; j++)
          if (parse_helper(d, dec_pi(d, p, j), &k->helpers[j]) != 0)
            return HIPD_EIR;
      }
      dec_leave(d);
      break;
    }
  }
  dec_leave(d);
  return dec_map_required(d, at, keys, 7, 0x0b, seen);
}

/* ------------------------------------------------------------ document */

void ir_doc_free(ir_doc_t *doc)
{
  if (doc != NULL)
    ir_arena_free(doc->arena);
}

static void dec_cleanup(dec_t *d)
{
  free(d->named);
  free(d->stack);
  strmap_free(&d->records);
  strmap_free(&d->variants);
  strmap_free(&d->ctors);
  strmap_free(&d->helpers);
  strmap_free(&d->cnames);
  strmap_free(&d->names);
  u64map_free(&d->ids);
}

/* Find the version key first, whatever the key order. */
static int read_version(dec_t *d, uint32_t n, const ir_path_t *vp)
{
  const uint8_t *start = d->p;
  uint64_t values = d->values;
  unsigned depth = d->depth;
  int found = 0;
  val_t k;

  for (uint32_t i = 0; i < n; i++) {
    if (dec_rd(d, NULL, &k) != 0)
      return HIPD_EIR;
    if (k.t == V_STR && k.n == 2 && memcmp(k.s, "ir", 2) == 0) {
      if (dec_read_uint(d, vp, &d->doc->version) != 0)
        return HIPD_EIR;
      found = 1;
      break;
    }
    if (dec_skip(d, NULL) != 0)
      return HIPD_EIR;
  }
  if (!found)
    return dec_fail(d, NULL, "missing key 'ir' (the IR version)");
  if (d->doc->version < IR_VERSION_MIN || d->doc->version > IR_VERSION_MAX)
    return dec_fail(
        d, vp, "ir version %llu not supported (supported: %d to %d)",
        (unsigned long long)d->doc->version, IR_VERSION_MIN, IR_VERSION_MAX);
  d->p = start;
  d->values = values;
  d->depth = depth;
  return 0;
}

int ir_decode(const void *bytes, size_t len, const ir_limits_t *lim,
              ir_doc_t **out, ir_error_t *err)
{
  static const char *const keys[] = {"ir", "kernel"};
  dec_t d = {0};
  uint32_t n, seen = 0;
  int which, rc;
  ir_error_t scratch;

  if (err == NULL)
    err = &scratch;
  memset(err, 0, sizeof(*err));
  *out = NULL;
  d.p = bytes;
  d.end = d.p + len;
  d.err = err;
  if (lim != NULL)
    d.lim = *lim;
  else
    ir_limits_default(&d.lim);
  d.arena = ir_arena_new(d.lim.max_memory);
  if (d.arena == NULL || (d.doc = ir_alloc(d.arena, sizeof(*d.doc))) == NULL ||
      (d.doc->kernel = ir_alloc(d.arena, sizeof(*d.doc->kernel))) == NULL) {
    ir_arena_free(d.arena);
    return ir_error_set(err, HIPD_ENOMEM, NULL, "out of memory");
  }
  d.doc->arena = d.arena;
  strmap_init(&d.records);
  strmap_init(&d.variants);
  strmap_init(&d.ctors);
  strmap_init(&d.helpers);
  strmap_init(&d.cnames);
  strmap_init(&d.names);
  u64map_init(&d.ids);

  rc = dec_open_map(&d, NULL, "an IR document", &n);
  if (rc == 0)
    rc = read_version(&d, n, dec_pk(&d, NULL, "ir"));
  for (uint32_t i = 0; rc == 0 && i < n; i++) {
    rc = dec_map_key(&d, NULL, keys, 2, &seen, &which);
    if (rc == 0 && which == 0)
      rc = dec_skip(&d, NULL); /* read above */
    else if (rc == 0 && which == 1)
      rc = dec_parse_kernel(&d, dec_pk(&d, NULL, "kernel"), d.doc->kernel);
  }
  if (rc == 0) {
    dec_leave(&d);
    rc = dec_map_required(&d, NULL, keys, 2, 3, seen);
  }
  if (rc == 0 && d.p != d.end)
    rc = dec_fail(&d, NULL, "%zu bytes follow the document",
                  (size_t)(d.end - d.p));
  if (rc == 0)
    rc = dec_check_tables(&d);
  if (rc == 0)
    rc = dec_check_kernel(&d);
  if (rc == 0 && d.failed)
    rc = err->code ? err->code : HIPD_EIR;
  dec_cleanup(&d);
  if (rc != 0) {
    if (err->code == 0)
      ir_error_set(err, rc, NULL, "%s", hipd_strerror(rc));
    ir_arena_free(d.arena);
    return err->code;
  }
  *out = d.doc;
  return 0;
}
