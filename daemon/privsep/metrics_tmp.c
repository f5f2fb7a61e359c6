/* SPDX-License-Identifier: MIT */
/* daemon/privsep/metrics_tmp.c: TEMPORARY stand-in for branch admin's
 * admin_metrics_text() (metrics_tmp.h); removed when admin is merged. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "privsep/metrics_tmp.h"
#include "privsep/workers.h"

void admin_metrics_text(daemon_t *d, admin_text_fn done, void *ctx)
{
  char *t = malloc(1024);
  int n;
  unsigned sessions =
      d->role == ROLE_LISTENER ? workers_sessions(d) : d->nsessions;

  if (t == NULL) {
    done(ctx, -2, NULL, 0);
    return;
  }
  n = snprintf(t, 1024,
               "# HELP hipd_build_info hipd's version and isolation mode.\n"
               "# TYPE hipd_build_info gauge\n"
               "hipd_build_info{version=\"%s\",isolation=\"%s\"} 1\n"
               "# HELP hipd_uptime_seconds Seconds since hipd started.\n"
               "# TYPE hipd_uptime_seconds gauge\n"
               "hipd_uptime_seconds %.3f\n"
               "# HELP hipd_sessions Sessions open now.\n"
               "# TYPE hipd_sessions gauge\n"
               "hipd_sessions %u\n"
               "# HELP hipd_sessions_accepted_total Connections accepted.\n"
               "# TYPE hipd_sessions_accepted_total counter\n"
               "hipd_sessions_accepted_total %llu\n",
               PACKAGE_VERSION,
               d->cfg.isolation == ISOLATION_UID       ? "uid"
               : d->cfg.isolation == ISOLATION_SESSION ? "session"
                                                       : "none",
               (double)(uv_now(d->loop) - d->start_ms) / 1000.0, sessions,
               (unsigned long long)d->sessions_total);
  done(ctx, 0, t, (size_t)n);
}
