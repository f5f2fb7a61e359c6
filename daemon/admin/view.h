/* SPDX-License-Identifier: MIT */
/* daemon/admin/view.h: an admin view, private to admin/: the reports of
 * a gathering merged, filtered by what the caller may see (admin.c builds
 * it; admin.c packs session.list and daemon.stats from it, metrics_text.c
 * renders the metrics text). Loop thread only.
 */
#ifndef HIPD_ADMIN_VIEW_H
#define HIPD_ADMIN_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "admin/report.h"
#include "daemon.h"
#include "grants.h"
#include "util/strbuf.h"

/* A merged view: what the caller may see. */
typedef struct view_dev {
  int present;       /* a report or a fold knows it */
  int info;          /* name, kind, total from a report */
  report_dev_t d;    /* summed */
  uint64_t sessions; /* visible or not: node-wide */
} view_dev_t;

typedef struct view_tenant {
  uint64_t uid;
  uint64_t sessions, quota, faults;
  uint64_t mps_threads, mps_mem; /* the largest MPS share of its workers */
  uint64_t buffers[REPORT_MAX_DEVICES], held[REPORT_MAX_DEVICES];
  report_ctr_t c[REPORT_MAX_DEVICES];
  uint32_t ndev;
} view_tenant_t;

/* A grant the caller may see, with its usage summed over the reports
 * (and, in the listener, what exited workers left: grants.h). */
typedef struct view_grant {
  const grant_t *g; /* in d->grants, while the view lives */
  grant_usage_t u;
} view_grant_t;

typedef struct view_sess {
  const report_sess_t *s;
  const report_t *of; /* the report it came in */
} view_sess_t;

typedef struct view {
  daemon_t *d;
  uid_t uid;         /* the caller's */
  int admin;         /* the caller is an admin: sees every tenant */
  view_sess_t *sess; /* visible, by id */
  uint32_t nsess;
  uint64_t sessions_all;
  view_dev_t dev[REPORT_MAX_DEVICES];
  int ndev;
  view_tenant_t *ten;
  uint32_t nten;
  uint32_t capten;
  report_req_t *req;
  uint32_t nreq, capreq;
  uint32_t last_ten;  /* tenant_of()'s last answer: a report's sessions
                         mostly share their uid */
  uint32_t truncated; /* reports that left sessions out */
  view_grant_t *gr;   /* the grants the caller may see, in table order */
  uint32_t ngr;
} view_t;

/* May the view's caller see tenant @p uid's records? */
static inline int admin_view_visible(const view_t *v, uint64_t uid)
{
  return v->admin || uid == (uint64_t)v->uid;
}

/* --isolation's name: "none", "uid" or "session". */
static inline const char *admin_isolation_name(const daemon_t *d)
{
  return d->cfg.isolation == ISOLATION_NONE      ? "none"
         : d->cfg.isolation == ISOLATION_SESSION ? "session"
                                                 : "uid";
}

/* Render @p v (from @p set) as the metrics text into @p b (metrics_text.c);
 * @p scrape_errors: workers left out of views so far. */
void admin_metrics_render(const view_t *v, const report_set_t *set,
                          uint64_t scrape_errors, strbuf_t *b);

#endif
