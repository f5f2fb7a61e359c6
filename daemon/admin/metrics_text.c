/* SPDX-License-Identifier: MIT */
/* daemon/admin/metrics_text.c: an admin view as Prometheus text (the
 * metrics method and the HTTP metrics process's scrapes), in prom.h's
 * format. */
#include "config.h"

#include "admin/prom.h"
#include "admin/view.h"
#include "admin/who.h"
#include "compile/compile_pool.h"
#include "hipd.h"
#include "kernels/cache.h"

static void dev_label(strbuf_t *lb, int id)
{
  prom_label_u64(lb, "device", (uint64_t)id);
}

static void tenant_labels(const view_t *v, strbuf_t *lb, uint64_t uid)
{
  char user[64];

  admin_user_name(v->d, uid, user, sizeof(user));
  prom_label_u64(lb, "uid", uid);
  prom_label(lb, "user", user);
}

/* Per device family: one sample per known device. */
#define DEV_FAMILY(name, type, help, expr)                                     \
  do {                                                                         \
    prom_family(b, name, type, help);                                          \
    for (int i = 0; i < v->ndev; i++) {                                        \
      const view_dev_t *vd = &v->dev[i];                                       \
      if (!vd->present)                                                        \
        continue;                                                              \
      dev_label(&lb, i);                                                       \
      prom_sample_u64(b, name, &lb, (expr));                                   \
    }                                                                          \
  } while (0)

/* Each tenant @p tn of view v that the caller may see (by index: v->ten
 * is NULL when there is none, and NULL + 0 is undefined). The inner loop
 * runs once: a body's break leaves only it. */
#define FOR_VISIBLE_TENANT(tn)                                                 \
  for (uint32_t tn##_i = 0; tn##_i < v->nten; tn##_i++)                        \
    for (const view_tenant_t *tn = &v->ten[tn##_i]; tn != NULL; tn = NULL)     \
      if (admin_view_visible(v, tn->uid))

/* Per tenant family, for the tenants the caller may see. */
#define TEN_FAMILY(name, type, help, expr)                                     \
  do {                                                                         \
    prom_family(b, name, type, help);                                          \
    FOR_VISIBLE_TENANT (tn) {                                                  \
      tenant_labels(v, &lb, tn->uid);                                          \
      prom_sample_u64(b, name, &lb, (expr));                                   \
    }                                                                          \
  } while (0)

/* Per tenant and device family, for the tenants the caller may see. */
#define TEN_DEV_FAMILY(name, type, help, expr)                                 \
  do {                                                                         \
    prom_family(b, name, type, help);                                          \
    FOR_VISIBLE_TENANT (tn)                                                    \
      for (uint32_t i = 0; i < tn->ndev; i++) {                                \
        tenant_labels(v, &lb, tn->uid);                                        \
        dev_label(&lb, (int)i);                                                \
        prom_sample_u64(b, name, &lb, (expr));                                 \
      }                                                                        \
  } while (0)

void admin_metrics_render(const view_t *v, const report_set_t *set,
                          uint64_t scrape_errors, strbuf_t *b)
{
  daemon_t *d = v->d;
  strbuf_t lb = {0};
  cache_stats_t cs;
  compile_pool_stats_t ps;
  static const char *const dirs[2] = {"h2d", "d2h"};

  cache_get_stats(&cs);
  compile_pool_get_stats(&ps);
  prom_family(b, "hipd_build_info", "gauge", "hipd's version and isolation");
  prom_label(&lb, "version", PACKAGE_VERSION);
  prom_label(&lb, "isolation", admin_isolation_name(d));
  prom_sample_u64(b, "hipd_build_info", &lb, 1);
  prom_family(b, "hipd_uptime_seconds", "gauge", "seconds since hipd started");
  prom_sample_f(b, "hipd_uptime_seconds", NULL,
                (double)(uv_now(d->loop) - d->start_ms) / 1000.0);
  prom_family(b, "hipd_sessions", "gauge", "sessions open (visible)");
  prom_sample_u64(b, "hipd_sessions", NULL, v->nsess);
  prom_family(b, "hipd_tenants", "gauge", "tenant workers running");
  prom_sample_u64(b, "hipd_tenants", NULL,
                  d->role == ROLE_LISTENER
                      ? (uint64_t)set->n - set->exited + set->missing
                      : 0);
  prom_family(b, "hipd_scrape_errors_total", "counter",
              "workers left out of a view (no answer within 2 s)");
  prom_sample_u64(b, "hipd_scrape_errors_total", NULL, scrape_errors);

  prom_family(b, "hipd_device_info", "gauge", "a device hipd serves");
  for (int i = 0; i < v->ndev; i++) {
    if (!v->dev[i].present)
      continue;
    dev_label(&lb, i);
    prom_label(&lb, "device_name", v->dev[i].d.name);
    prom_label(&lb, "kind", v->dev[i].info ? v->dev[i].d.kind : "");
    prom_sample_u64(b, "hipd_device_info", &lb, 1);
  }
  DEV_FAMILY("hipd_device_memory_total_bytes", "gauge",
             "device memory, as the driver says", vd->d.mem_total);
  DEV_FAMILY("hipd_device_memory_held_bytes", "gauge",
             "device memory held by hipd's sessions", vd->d.held);
  DEV_FAMILY("hipd_device_buffers", "gauge", "buffers held on the device",
             vd->d.buffers);
  DEV_FAMILY("hipd_device_kernels_launched_total", "counter",
             "kernel launches completed", vd->d.c.launches);
  prom_family(b, "hipd_device_busy_seconds_total", "counter",
              "device busy time: kernel submission to observed completion, "
              "overlaps merged within a tenant");
  for (int i = 0; i < v->ndev; i++) {
    if (!v->dev[i].present)
      continue;
    dev_label(&lb, i);
    prom_sample_f(b, "hipd_device_busy_seconds_total", &lb,
                  (double)v->dev[i].d.c.busy_ns / 1e9);
  }
  prom_family(b, "hipd_device_transfer_bytes_total", "counter",
              "bytes copied between host and device");
  for (int i = 0; i < v->ndev; i++)
    for (int k = 0; k < 2 && v->dev[i].present; k++) {
      dev_label(&lb, i);
      prom_label(&lb, "direction", dirs[k]);
      prom_sample_u64(b, "hipd_device_transfer_bytes_total", &lb,
                      k == 0 ? v->dev[i].d.c.h2d : v->dev[i].d.c.d2h);
    }
  DEV_FAMILY("hipd_device_faults_total", "counter",
             "operations that failed with a lost device or a device error",
             vd->d.c.faults);
  DEV_FAMILY("hipd_device_lost", "gauge", "1 while the device is lost",
             (uint64_t)(vd->d.lost != 0));

  TEN_FAMILY("hipd_tenant_sessions", "gauge", "sessions of the tenant",
             tn->sessions);
  TEN_DEV_FAMILY("hipd_tenant_memory_held_bytes", "gauge",
                 "device memory held by the tenant's sessions", tn->held[i]);
  TEN_DEV_FAMILY("hipd_tenant_buffers", "gauge",
                 "buffers held by the tenant's sessions", tn->buffers[i]);
  TEN_DEV_FAMILY("hipd_tenant_kernels_launched_total", "counter",
                 "kernel launches of the tenant", tn->c[i].launches);
  prom_family(b, "hipd_tenant_busy_seconds_total", "counter",
              "device busy time of the tenant's work");
  FOR_VISIBLE_TENANT (tn)
    for (uint32_t i = 0; i < tn->ndev; i++) {
      tenant_labels(v, &lb, tn->uid);
      dev_label(&lb, (int)i);
      prom_sample_f(b, "hipd_tenant_busy_seconds_total", &lb,
                    (double)tn->c[i].busy_ns / 1e9);
    }
  prom_family(b, "hipd_tenant_transfer_bytes_total", "counter",
              "bytes the tenant copied between host and device");
  FOR_VISIBLE_TENANT (tn)
    for (uint32_t i = 0; i < tn->ndev; i++)
      for (int k = 0; k < 2; k++) {
        tenant_labels(v, &lb, tn->uid);
        dev_label(&lb, (int)i);
        prom_label(&lb, "direction", dirs[k]);
        prom_sample_u64(b, "hipd_tenant_transfer_bytes_total", &lb,
                        k == 0 ? tn->c[i].h2d : tn->c[i].d2h);
      }
  TEN_FAMILY("hipd_tenant_quota_refusals_total", "counter",
             "requests refused by a quota or tenant limit", tn->quota);
  TEN_FAMILY("hipd_tenant_mps_active_threads_percent", "gauge",
             "under MPS, the share of each GPU's SMs the tenant's kernels "
             "may hold at once (--mps-active-threads; 0: no MPS client)",
             tn->mps_threads);
  TEN_FAMILY("hipd_tenant_mps_device_memory_limit_bytes", "gauge",
             "under MPS, the device memory the tenant's contexts may pin "
             "on each GPU (--mps-device-mem; 0: no limit)",
             tn->mps_mem);
  TEN_FAMILY("hipd_tenant_faults_total", "counter",
             "requests of the tenant that failed with a lost device or a "
             "device error",
             tn->faults);

  /* Per grant (grants.h), for the grants the caller may see: what the
   * sessions under each did, labelled by its label (a job's id). */
#define GRANT_FAMILY(name, type, help, expr)                                   \
  do {                                                                         \
    prom_family(b, name, type, help);                                          \
    for (uint32_t g = 0; g < v->ngr; g++) {                                    \
      const view_grant_t *vg = &v->gr[g];                                      \
      prom_label(&lb, "label", vg->g->label);                                  \
      tenant_labels(v, &lb, vg->g->uid);                                       \
      prom_sample_u64(b, name, &lb, (expr));                                   \
    }                                                                          \
  } while (0)
  GRANT_FAMILY("hipd_grant_sessions", "gauge",
               "sessions under the grant (a job's)", vg->u.sessions);
  GRANT_FAMILY("hipd_grant_devices", "gauge", "devices the grant gives",
               (uint64_t)__builtin_popcountll(vg->g->devmask));
  GRANT_FAMILY("hipd_grant_memory_quota_bytes", "gauge",
               "the grant's quota of device memory (0: none)", vg->g->quota);
  GRANT_FAMILY("hipd_grant_memory_held_bytes", "gauge",
               "device memory held by the sessions under the grant",
               vg->u.held);
  GRANT_FAMILY("hipd_grant_memory_peak_bytes", "gauge",
               "the most device memory the sessions under the grant held",
               vg->u.peak);
  GRANT_FAMILY("hipd_grant_kernels_launched_total", "counter",
               "kernel launches under the grant", vg->u.launches);
#undef GRANT_FAMILY
  prom_family(b, "hipd_grant_transfer_bytes_total", "counter",
              "bytes the work under the grant copied between host and "
              "device");
  for (uint32_t g = 0; g < v->ngr; g++)
    for (int k = 0; k < 2; k++) {
      prom_label(&lb, "label", v->gr[g].g->label);
      tenant_labels(v, &lb, v->gr[g].g->uid);
      prom_label(&lb, "direction", k == 0 ? "h2d" : "d2h");
      prom_sample_u64(b, "hipd_grant_transfer_bytes_total", &lb,
                      k == 0 ? v->gr[g].u.h2d : v->gr[g].u.d2h);
    }
  prom_family(b, "hipd_grant_busy_seconds_total", "counter",
              "device busy time of the work under the grant");
  for (uint32_t g = 0; g < v->ngr; g++) {
    prom_label(&lb, "label", v->gr[g].g->label);
    tenant_labels(v, &lb, v->gr[g].g->uid);
    prom_sample_f(b, "hipd_grant_busy_seconds_total", &lb,
                  (double)v->gr[g].u.busy_ns / 1e9);
  }

  prom_family(b, "hipd_requests_total", "counter",
              "requests answered, by method and code");
  for (uint32_t i = 0; i < v->nreq; i++) {
    prom_label(&lb, "method", v->req[i].method);
    prom_label(&lb, "code",
               v->req[i].code == 0 ? "OK" : hipd_err_name(v->req[i].code));
    prom_sample_u64(b, "hipd_requests_total", &lb, v->req[i].n);
  }
  prom_family(b, "hipd_compiles_total", "counter",
              "kernel compiles, by result");
  prom_label(&lb, "result", "ok");
  prom_sample_u64(b, "hipd_compiles_total", &lb,
                  ps.compiles > cs.compile_failures
                      ? ps.compiles - cs.compile_failures
                      : 0);
  prom_label(&lb, "result", "failed");
  prom_sample_u64(b, "hipd_compiles_total", &lb, cs.compile_failures);
  prom_label(&lb, "result", "timeout");
  prom_sample_u64(b, "hipd_compiles_total", &lb, ps.timeouts);
  prom_family(b, "hipd_cache_hits_total", "counter",
              "compiles answered from the kernel cache");
  prom_sample_u64(b, "hipd_cache_hits_total", NULL,
                  cs.hits_memory + cs.hits_disk + cs.waits);
  prom_family(b, "hipd_cache_misses_total", "counter",
              "compiles the kernel cache did not hold");
  prom_sample_u64(b, "hipd_cache_misses_total", NULL, cs.misses);
  prom_family(b, "hipd_cache_entries", "gauge",
              "kernel cache entries in memory");
  prom_sample_u64(b, "hipd_cache_entries", NULL, cs.entries);
  prom_family(b, "hipd_cache_bytes", "gauge", "kernel cache bytes in memory");
  prom_sample_u64(b, "hipd_cache_bytes", NULL, cs.bytes);
  strbuf_free(&lb);
}
