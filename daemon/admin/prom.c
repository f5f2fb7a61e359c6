/* SPDX-License-Identifier: MIT */
/* daemon/admin/prom.c: the Prometheus text format (prom.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "admin/prom.h"

void prom_family(strbuf_t *b, const char *name, const char *type,
                 const char *help)
{
  strbuf_printf(b, "# HELP %s ", name);
  /* HELP text escapes backslash and newline. */
  for (const char *p = help; *p; p++) {
    if (*p == '\\')
      strbuf_add(b, "\\\\");
    else if (*p == '\n')
      strbuf_add(b, "\\n");
    else
      strbuf_addc(b, *p);
  }
  strbuf_printf(b, "\n# TYPE %s %s\n", name, type);
}

void prom_label(strbuf_t *lb, const char *name, const char *value)
{
  if (lb->len > 0)
    strbuf_addc(lb, ',');
  strbuf_printf(lb, "%s=\"", name);
  for (const char *p = value; *p; p++) {
    if (*p == '\\')
      strbuf_add(lb, "\\\\");
    else if (*p == '"')
      strbuf_add(lb, "\\\"");
    else if (*p == '\n')
      strbuf_add(lb, "\\n");
    else
      strbuf_addc(lb, *p);
  }
  strbuf_addc(lb, '"');
}

void prom_label_u64(strbuf_t *lb, const char *name, uint64_t value)
{
  char v[24];

  snprintf(v, sizeof(v), "%llu", (unsigned long long)value);
  prom_label(lb, name, v);
}

static void head(strbuf_t *b, const char *name, strbuf_t *lb)
{
  strbuf_add(b, name);
  if (lb != NULL && lb->len > 0) {
    strbuf_addc(b, '{');
    strbuf_addn(b, lb->p, lb->len);
    strbuf_addc(b, '}');
  }
  if (lb != NULL)
    strbuf_free(lb);
}

void prom_sample_u64(strbuf_t *b, const char *name, strbuf_t *lb, uint64_t v)
{
  head(b, name, lb);
  strbuf_printf(b, " %llu\n", (unsigned long long)v);
}

void prom_sample_f(strbuf_t *b, const char *name, strbuf_t *lb, double v)
{
  head(b, name, lb);
  strbuf_printf(b, " %.9g\n", v);
}
