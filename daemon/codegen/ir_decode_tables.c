/* SPDX-License-Identifier: MIT */
/* daemon/codegen/ir_decode_tables.c: the decoder's phase 2 (ir_decode.c):
 * the records, variants and helpers tables, their names, duplicates,
 * recursion by value and C names, and the resolution of every record or
 * variant type reference.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "codegen/cg_util.h"
#include "codegen/ir.h"
#include "codegen/ir_decode_internal.h"
#include "hipd.h"

/* ------------------------------------------------------ phase 2: tables */

/* Claim C name @p name for the thing at @p at. */
static int claim(dec_t *d, const char *name, const ir_path_t *at)
{
  void **slot = strmap_slot(&d->cnames, name);
  char first[IR_PATH_MAX];

  if (slot == NULL)
    return dec_oom(d, at);
  if (*slot != NULL)
    return dec_fail(d, at, "C name '%s' is used twice (first at %s)", name,
                    ir_path_format(*slot, first, sizeof(first)));
  *slot = (void *)at;
  return 0;
}

/* A field or payload type: a scalar, a record or a variant. */
static int check_member_type(dec_t *d, const ir_type_t *t)
{
  if (t->kind == IR_T_UNIT || t->kind >= IR_T_ARRAY)
    return dec_fail(
        d, t->path,
        "record fields and constructor payloads are scalars, records "
        "or variants, not %s",
        ir_tagsets[IR_TS_ELTTYPE].tags[t->kind]);
  return 0;
}

static int visit_variant(dec_t *d, ir_variant_t *v);

/* Depth-first walk over by-value containment: a type met again while it
 * is being walked contains itself. */
static int visit_member(dec_t *d, const ir_type_t *t, const char *owner)
{
  int *mark = t->kind == IR_T_RECORD    ? &t->rec->mark
              : t->kind == IR_T_VARIANT ? &t->variant->mark
                                        : NULL;

  if (mark == NULL || *mark == 2)
    return 0;
  if (*mark == 1)
    return dec_fail(d, t->path,
                    "type '%s' contains itself by value (through '%s')",
                    t->name, owner);
  if (t->kind == IR_T_VARIANT)
    return visit_variant(d, t->variant);
  *mark = 1;
  for (uint32_t i = 0; i < t->rec->nfields; i++)
    if (visit_member(d, t->rec->fields[i].type, t->rec->name) != 0)
      return HIPD_EIR;
  *mark = 2;
  return 0;
}

static int visit_variant(dec_t *d, ir_variant_t *v)
{
  if (v->mark == 2)
    return 0;
  v->mark = 1;
  for (uint32_t i = 0; i < v->nctors; i++)
    for (uint32_t j = 0; j < v->ctors[i].npayload; j++)
      if (visit_member(d, v->ctors[i].payload[j], v->name) != 0)
        return HIPD_EIR;
  v->mark = 2;
  return 0;
}

int dec_check_tables(dec_t *d)
{
  ir_kernel_t *k = d->doc->kernel;
  char first[IR_PATH_MAX];
  void **slot;

  if (claim(d, k->name, dec_pk(d, k->path, "name")) != 0)
    return HIPD_EIR;
  for (uint32_t i = 0; i < k->nrecords; i++) {
    ir_record_t *r = &k->records[i];
    if ((slot = strmap_slot(&d->records, r->name)) == NULL)
      return dec_oom(d, r->path);
    if (*slot != NULL || strmap_get(&d->variants, r->name) != NULL)
      return dec_fail(d, dec_pk(d, r->path, "name"),
                      "type '%s' is defined twice", r->name);
    *slot = r;
    if (claim(d, r->cname, dec_pk(d, r->path, "name")) != 0)
      return HIPD_EIR;
    for (uint32_t j = 0; j < r->nfields; j++) {
      for (uint32_t m = 0; m < j; m++)
        if (strcmp(r->fields[m].name, r->fields[j].name) == 0)
          return dec_fail(d, r->fields[j].path, "field '%s' is defined twice",
                          r->fields[j].name);
      if (check_member_type(d, r->fields[j].type) != 0)
        return HIPD_EIR;
    }
  }
  for (uint32_t i = 0; i < k->nvariants; i++) {
    ir_variant_t *v = &k->variants[i];
    if ((slot = strmap_slot(&d->variants, v->name)) == NULL)
      return dec_oom(d, v->path);
    if (*slot != NULL || strmap_get(&d->records, v->name) != NULL)
      return dec_fail(d, dec_pk(d, v->path, "name"),
                      "type '%s' is defined twice", v->name);
    *slot = v;
    if (claim(d, v->cname, dec_pk(d, v->path, "name")) != 0)
      return HIPD_EIR;
    for (uint32_t j = 0; j < v->nctors; j++) {
      ir_ctor_t *c = &v->ctors[j];
      const ir_path_t *cp = dec_pk(d, c->path, "ctor");
      char *maker;
      if ((slot = strmap_slot(&d->ctors, c->name)) == NULL)
        return dec_oom(d, c->path);
      if (*slot != NULL)
        return dec_fail(
            d, cp,
            "constructor '%s' is defined twice (first at %s): "
            "constructors are C enum constants, unique in a kernel",
            c->name,
            ir_path_format(((ir_ctor_t *)*slot)->path, first, sizeof(first)));
      *slot = c;
      if (claim(d, c->name, cp) != 0)
        return HIPD_EIR;
      maker = dec_new(d, cp, strlen(v->cname) + strlen(c->name) + 7);
      if (maker == NULL)
        return HIPD_EIR;
      sprintf(maker, "make_%s_%s", v->cname, c->name);
      c->maker = maker;
      if (claim(d, maker, cp) != 0)
        return HIPD_EIR;
      for (uint32_t m = 0; m < c->npayload; m++)
        if (check_member_type(d, c->payload[m]) != 0)
          return HIPD_EIR;
    }
  }
  for (uint32_t i = 0; i < k->nhelpers; i++) {
    ir_helper_t *h = &k->helpers[i];
    if ((slot = strmap_slot(&d->helpers, h->name)) == NULL)
      return dec_oom(d, h->path);
    if (*slot != NULL)
      return dec_fail(d, dec_pk(d, h->path, "name"),
                      "helper '%s' is defined twice", h->name);
    *slot = h;
    if (claim(d, h->name, dec_pk(d, h->path, "name")) != 0)
      return HIPD_EIR;
  }
  /* Every record and variant reference names a definition of its kind. */
  for (size_t i = 0; i < d->nnamed; i++) {
    ir_type_t *t = d->named[i];
    int rec = t->kind == IR_T_RECORD;
    t->rec = strmap_get(&d->records, t->name);
    t->variant = strmap_get(&d->variants, t->name);
    if (rec && t->rec == NULL)
      return dec_fail(d, t->path,
                      t->variant ? "'%s' is a variant type, not a record"
                                 : "unknown record type '%s'",
                      t->name);
    if (!rec && t->variant == NULL)
      return dec_fail(d, t->path,
                      t->rec ? "'%s' is a record type, not a variant"
                             : "unknown variant type '%s'",
                      t->name);
  }
  for (uint32_t i = 0; i < k->nrecords; i++) {
    ir_type_t self = {.kind = IR_T_RECORD,
                      .name = k->records[i].name,
                      .rec = &k->records[i],
                      .path = k->records[i].path};
    if (visit_member(d, &self, k->records[i].name) != 0)
      return HIPD_EIR;
  }
  for (uint32_t i = 0; i < k->nvariants; i++)
    if (visit_variant(d, &k->variants[i]) != 0)
      return HIPD_EIR;
  return 0;
}
