/* SPDX-License-Identifier: MIT */
/* daemon/codegen/gen_emit.c: the HIP generator's emitter toolkit
 * (gen_emit.h), which the rest of the generator uses and which uses none
 * of it. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_emit.h"
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

/* A string in the document's arena (NULL when out of memory). */
const char *gen_arena_printf(gen_t *g, const char *fmt, ...)
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
                                      "double", "__half",    "unsigned char",
                                      "int",    "void"};
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

size_t gen_vis_mark(gen_t *g)
{
  return g->nvis;
}

void gen_vis_pop(gen_t *g, size_t mark)
{
  while (g->nvis > mark) {
    void **slot = strmap_slot(&g->vis, g->visstack[--g->nvis]);
    if (slot != NULL)
      *slot = (void *)((uintptr_t)*slot - 1);
  }
}

int gen_visible(gen_t *g, const char *name)
{
  return strmap_get(&g->vis, name) != NULL || strmap_get(&g->top, name);
}

/* Choose the C name of a declaration and make it visible. */
int gen_declare_var(gen_t *g, ir_var_t *v)
{
  if (!gen_visible(g, v->name))
    v->cname = v->name;
  else if (v->vkind == IR_VK_SHARED)
    v->cname = gen_arena_printf(g, "sarek_sh%u_%s", g->tmp++, v->name);
  else
    v->cname = gen_arena_printf(g, "sarek_%llu_%s", (unsigned long long)v->id,
                                v->name);
  if (v->cname == NULL)
    return HIPD_ENOMEM;
  return gen_visible_push(g, v->cname);
}

/* ----------------------------------------------------------- intrinsics */

int gen_use_intr_helper(gen_t *g, const char *helper)
{
  for (unsigned i = 0; i < g->nintr_helpers; i++)
    if (g->intr_helpers[i] == helper)
      return 0;
  if (g->nintr_helpers >= sizeof(g->intr_helpers) / sizeof(g->intr_helpers[0]))
    return gen_fail(g, HIPD_EIR, g->k->path,
                    "a kernel uses at most %zu built-in helper functions",
                    sizeof(g->intr_helpers) / sizeof(g->intr_helpers[0]));
  g->intr_helpers[g->nintr_helpers++] = helper;
  return 0;
}
