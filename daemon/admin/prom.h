/* SPDX-License-Identifier: MIT */
/* daemon/admin/prom.h: the Prometheus text exposition format 0.0.4, as
 * hipd writes it: a family's "# HELP" and "# TYPE" lines, then its
 * samples, together; label values escaped (backslash, double quote,
 * newline). */
#ifndef HIPD_ADMIN_PROM_H
#define HIPD_ADMIN_PROM_H

#include <stdint.h>

#include "util/strbuf.h"

/* Start family @p name of @p type ("counter", "gauge") with @p help. */
void prom_family(strbuf_t *b, const char *name, const char *type,
                 const char *help);
/* Labels are built in @p lb: prom_label() appends name="value". */
void prom_label(strbuf_t *lb, const char *name, const char *value);
void prom_label_u64(strbuf_t *lb, const char *name, uint64_t value);
/* One sample of @p name with the labels in @p lb (NULL or empty: none),
 * which is emptied. */
void prom_sample_u64(strbuf_t *b, const char *name, strbuf_t *lb, uint64_t v);
void prom_sample_f(strbuf_t *b, const char *name, strbuf_t *lb, double v);

#endif
