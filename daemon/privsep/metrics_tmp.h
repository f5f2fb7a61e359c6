/* SPDX-License-Identifier: MIT */
/* daemon/privsep/metrics_tmp.h: TEMPORARY stand-in for branch admin's
 * admin_metrics_text() (docs: /work/notes/admin-spec.md), so that the
 * metrics process can be built and tested before admin is merged. Removed
 * by that merge. */
#ifndef HIPD_PRIVSEP_METRICS_TMP_H
#define HIPD_PRIVSEP_METRICS_TMP_H

#include <stddef.h>

#include "daemon.h"

typedef void (*admin_text_fn)(void *ctx, int status, char *text, size_t len);
void admin_metrics_text(daemon_t *d, admin_text_fn done, void *ctx);

#endif
