/* SPDX-License-Identifier: MIT */
/* tools/hipctl/status.c: `status` (the daemon, its devices and their
 * activity) and `devices`.
 *
 * The figures come from `daemon.stats` (node-wide device activity). A
 * daemon without it (older than the admin methods) still gets an answer:
 * `daemon.info` and `device.get` give memory but no activity, and the
 * activity columns say "-".
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hipctl.h"

/* One device's figures, from whichever method had them. */
typedef struct {
  int64_t id;
  const char *name, *kind, *driver, *arch, *platform;
  int lost;
  uint64_t total, free, held, buffers, sessions, kernels, busy_ns, h2d, d2h,
      faults;
  int activity; /* the activity figures are known (daemon.stats) */
} dev_row_t;

typedef struct {
  hipd_info_t *info;  /* daemon.info */
  hipd_info_t *stats; /* daemon.stats, or NULL when the daemon has none */
  hipd_info_t *list;  /* device.list */
  hipd_info_t **get;  /* device.get per device, without daemon.stats */
  dev_row_t *dev;
  int ndev;
} status_t;

static void status_free(status_t *s)
{
  for (int i = 0; s->get != NULL && i < s->ndev; i++)
    hipd_info_free(s->get[i]);
  free(s->get);
  free(s->dev);
  hipd_info_free(s->info);
  hipd_info_free(s->stats);
  hipd_info_free(s->list);
}

/* Gather everything. @return 0 or an exit status (printed). */
static int status_gather(hipctl_t *h, status_t *s)
{
  int err, rc;

  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_daemon_info(h->conn, &s->info)) < 0)
    return hipctl_fail(h, NULL, err);
  err = hipd_daemon_stats(h->conn, &s->stats);
  if (err == HIPD_ENOMETHOD)
    s->stats = NULL;
  else if (err < 0)
    return hipctl_fail(h, NULL, err);
  if ((err = hipd_device_list(h->conn, &s->list)) < 0)
    return hipctl_fail(h, NULL, err);
  s->ndev = info_n(s->list, "%s", "");
  s->dev = calloc((size_t)s->ndev + 1, sizeof(*s->dev));
  s->get = calloc((size_t)s->ndev + 1, sizeof(*s->get));
  if (s->dev == NULL || s->get == NULL)
    return hipctl_fail(h, NULL, HIPD_ENOMEM);
  for (int i = 0; i < s->ndev; i++) {
    dev_row_t *d = &s->dev[i];
    const hipd_info_t *l = s->list;
    int j = -1;

    d->id = info_i64(l, "%d.id", i);
    d->name = info_s(l, "%d.name", i);
    d->driver = info_s(l, "%d.driver", i);
    d->arch = info_s(l, "%d.arch", i);
    d->platform = info_s(l, "%d.platform", i);
    for (int k = 0; s->stats != NULL && k < info_n(s->stats, "devices"); k++)
      if (info_i64(s->stats, "devices.%d.device", k) == d->id)
        j = k;
    if (j >= 0) {
      const hipd_info_t *t = s->stats;
      d->kind = info_s(t, "devices.%d.kind", j);
      d->lost = info_b(t, "devices.%d.lost", j);
      d->total = info_u64(t, "devices.%d.mem_total", j);
      d->free = info_u64(t, "devices.%d.mem_free", j);
      d->held = info_u64(t, "devices.%d.mem_held", j);
      d->buffers = info_u64(t, "devices.%d.buffers", j);
      d->sessions = info_u64(t, "devices.%d.sessions", j);
      d->kernels = info_u64(t, "devices.%d.kernels_launched", j);
      d->busy_ns = info_u64(t, "devices.%d.busy_ns", j);
      d->h2d = info_u64(t, "devices.%d.bytes_h2d", j);
      d->d2h = info_u64(t, "devices.%d.bytes_d2h", j);
      d->faults = info_u64(t, "devices.%d.faults", j);
      d->activity = 1;
      /* daemon.stats has no free figure where the driver gives none
       * there: device.get reads it on the device. */
      if (d->free == 0 && !d->lost &&
          hipd_device_get(h->conn, (int)d->id, &s->get[i]) == 0)
        d->free = info_u64(s->get[i], "memory.free");
      continue;
    }
    /* No daemon.stats: the memory from device.get. */
    d->kind = strcmp(d->driver, "cpu") == 0 ? "cpu" : "gpu";
    err = hipd_device_get(h->conn, (int)d->id, &s->get[i]);
    if (err == HIPD_EDEVLOST) {
      d->lost = 1;
      continue;
    }
    if (err < 0)
      return hipctl_fail(h, "device.get", err);
    d->total = info_u64(s->get[i], "memory.total");
    d->free = info_u64(s->get[i], "memory.free");
    d->held = info_u64(s->get[i], "memory.hipd_allocated");
    d->buffers = info_u64(s->get[i], "memory.hipd_buffers");
  }
  return 0;
}

static void dev_json(const dev_row_t *d, int full)
{
  js_obj_begin();
  js_key("device");
  js_int(d->id);
  js_key("name");
  js_str(d->name);
  js_key("kind");
  js_str(d->kind);
  if (full) {
    js_key("driver");
    js_str(d->driver);
    js_key("platform");
    js_str(d->platform);
    js_key("arch");
    js_str(d->arch);
  }
  js_key("lost");
  js_bool(d->lost);
  js_key("mem_total");
  js_uint(d->total);
  js_key("mem_free");
  js_uint(d->free);
  js_key("mem_held");
  js_uint(d->held);
  js_key("buffers");
  js_uint(d->buffers);
  /* Activity: null when the daemon does not count it (no daemon.stats). */
#define ACT(key, v)                                                            \
  js_key(key);                                                                 \
  if (d->activity)                                                             \
    js_uint(v);                                                                \
  else                                                                         \
    js_null()
  ACT("sessions", d->sessions);
  ACT("kernels_launched", d->kernels);
  ACT("busy_ns", d->busy_ns);
  ACT("bytes_h2d", d->h2d);
  ACT("bytes_d2h", d->d2h);
  ACT("faults", d->faults);
#undef ACT
  js_obj_end();
}

static void dev_table(const status_t *s, int full)
{
  static const char *const head_s[] = {"DEV",  "KIND",    "TOTAL", "HELD",
                                       "FREE", "BUFFERS", "SESS",  "KERNELS",
                                       "BUSY", "NAME",    NULL};
  static const char *const head_f[] = {
      "DEV",     "KIND", "ARCH", "TOTAL", "HELD",   "FREE", "BUFFERS", "SESS",
      "KERNELS", "BUSY", "H2D",  "D2H",   "FAULTS", "NAME", NULL};
  out_table_t *t = out_table_new(full ? head_f : head_s,
                                 full ? "rllrrrrrrrrrrl" : "rlrrrrrrrl");
  char a[32], b[32], c[32];

  for (int i = 0; i < s->ndev; i++) {
    const dev_row_t *d = &s->dev[i];
    out_table_cell(t, "%" PRId64, d->id);
    out_table_cell(t, "%s%s", d->kind, d->lost ? " LOST" : "");
    if (full)
      out_table_cell(t, "%s", d->arch);
    out_size(a, sizeof(a), d->total);
    out_size(b, sizeof(b), d->held);
    out_size(c, sizeof(c), d->free);
    out_table_cell(t, "%s", d->total ? a : "-");
    out_table_cell(t, "%s", b);
    out_table_cell(t, "%s", d->free ? c : "-");
    out_table_cell(t, "%" PRIu64, d->buffers);
    if (d->activity) {
      out_duration_ms(a, sizeof(a), (double)d->busy_ns / 1e6);
      out_table_cell(t, "%" PRIu64, d->sessions);
      out_table_cell(t, "%" PRIu64, d->kernels);
      out_table_cell(t, "%s", a);
    } else {
      out_table_cell(t, "-");
      out_table_cell(t, "-");
      out_table_cell(t, "-");
    }
    if (full) {
      out_size(a, sizeof(a), d->h2d);
      out_size(b, sizeof(b), d->d2h);
      out_table_cell(t, "%s", d->activity ? a : "-");
      out_table_cell(t, "%s", d->activity ? b : "-");
      if (d->activity)
        out_table_cell(t, "%" PRIu64, d->faults);
      else
        out_table_cell(t, "-");
    }
    out_table_cell(t, "%s", d->name);
  }
  out_table_print(t, stdout);
  out_table_free(t);
}

static const char status_help[] =
    "usage: hipctl status\n\n"
    "The daemon (version, uptime, isolation, sessions, tenants, compiles,\n"
    "cache) and its devices: memory total, held by hipd's sessions and free,\n"
    "buffers, sessions holding memory, kernels launched and device busy\n"
    "time (node-wide); then the grants you may see, with their usage\n"
    "(hipctl grants). --json: {daemon, stats, devices, grants}.\n";

int cmd_status(hipctl_t *h, int argc, char **argv)
{
  status_t s = {0};
  int rc;
  char up[32], a[32];

  if (argc > 1 && hipctl_help(argv[1], status_help))
    return HIPCTL_EXIT_OK;
  if (argc > 1)
    return hipctl_usage(h, "unexpected argument '%s'", argv[1]);
  if ((rc = status_gather(h, &s)) != 0)
    goto done;
  if (h->json) {
    js_obj_begin();
    js_key("daemon");
    js_info(s.info);
    js_key("stats");
    js_info(s.stats);
    js_key("devices");
    js_arr_begin();
    for (int i = 0; i < s.ndev; i++)
      dev_json(&s.dev[i], 0);
    js_arr_end();
    js_key("grants");
    {
      hipd_info_t *g = NULL;
      /* null from a daemon without grants */
      hipd_grant_list(h->conn, &g);
      js_info(g);
      hipd_info_free(g);
    }
    js_obj_end();
    js_end();
    goto done;
  }
  {
    const hipd_info_t *st = s.stats ? s.stats : s.info;
    out_duration_ms(up, sizeof(up), (double)info_u64(st, "uptime_ms"));
    printf("hipd %s (protocol %" PRIu64 "), pid %" PRIu64 ", socket %s\n",
           info_s(s.info, "version"), info_u64(s.info, "protocol"),
           info_u64(s.info, "pid"), info_s(s.info, "socket"));
    if (s.stats != NULL) {
      printf("uptime %s, isolation %s, sessions %" PRIu64 " (%" PRIu64
             " accepted since start), tenants %" PRIu64 "\n",
             up, info_s(st, "isolation"), info_u64(st, "sessions"),
             info_u64(st, "sessions_total"), info_u64(st, "tenants"));
      out_size(a, sizeof(a), info_u64(st, "cache.bytes"));
      printf("compiles %" PRIu64 " done, %" PRIu64 " failed, %" PRIu64
             " running, %" PRIu64 " queued; cache %" PRIu64
             " entries, %s, %" PRIu64 " hits, %" PRIu64 " misses\n",
             info_u64(st, "compiles.done"), info_u64(st, "compiles.failed"),
             info_u64(st, "compiles.running"), info_u64(st, "compiles.queued"),
             info_u64(st, "cache.entries"), a, info_u64(st, "cache.hits"),
             info_u64(st, "cache.misses"));
    } else {
      printf("uptime %s, isolation %s, sessions %" PRIu64
             " (this daemon has no daemon.stats: no node-wide figures)\n",
             up, info_s(s.info, "isolation.mode"),
             info_u64(s.info, "sessions"));
    }
    {
      /* How GPU tenants share (daemon.info's isolation: the caller's own
       * worker), and the caller's share under MPS. */
      uint64_t th = 0, mem = 0;
      const char *mps = info_s(s.info, "isolation.mps");
      if (mps[0] != '\0')
        printf("GPU sharing: %s\n", mps);
      if (hipd_info_uint(s.info, "isolation.mps_limits.active_threads", &th) ==
          0) {
        hipd_info_uint(s.info, "isolation.mps_limits.device_mem", &mem);
        out_size(a, sizeof(a), mem);
        printf("your share under MPS: %" PRIu64 "%% of each GPU's SMs "
               "(--mps-active-threads), device memory pinned: %s\n",
               th, mem != 0 ? a : "no limit (--mps-device-mem)");
      }
    }
    putchar('\n');
    dev_table(&s, 0);
    grants_print_status(h);
  }
done:
  status_free(&s);
  return rc;
}

static const char devices_help[] =
    "usage: hipctl devices\n\n"
    "Every device you may use: id, kind, architecture, memory (total, held\n"
    "by hipd's sessions, free), buffers, sessions holding memory there,\n"
    "kernels launched, busy time, bytes moved each way, faults, name.\n"
    "--json: an array of device objects.\n";

int cmd_devices(hipctl_t *h, int argc, char **argv)
{
  status_t s = {0};
  int rc;

  if (argc > 1 && hipctl_help(argv[1], devices_help))
    return HIPCTL_EXIT_OK;
  if (argc > 1)
    return hipctl_usage(h, "unexpected argument '%s'", argv[1]);
  if ((rc = status_gather(h, &s)) != 0)
    goto done;
  if (h->json) {
    js_arr_begin();
    for (int i = 0; i < s.ndev; i++)
      dev_json(&s.dev[i], 1);
    js_arr_end();
    js_end();
  } else {
    dev_table(&s, 1);
  }
done:
  status_free(&s);
  return rc;
}
