/* SPDX-License-Identifier: MIT */
/* bench/hb_tenants.c: section 8, two tenants (two uids) sharing a GPU
 * against one tenant and against MPS, with what a tenant costs in
 * processes and memory; and --isolation-compare, this run's figures
 * against a second hipd started with --isolation none.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "procs.h"

#define TENANT_A "hipd_bench_a"
#define TENANT_B "hipd_bench_b"
/* The each-client-a-tenant figure's users: hipd_bench_a, _b, ... _p. */
#define TENANT_PREFIX "hipd_bench_"
#define EACH_MAX 16
#define MAX_GPU_APPS 256 /* lines of nvidia-smi read */

/* ------------------------------------------------------ daemon.info */

/* Read daemon.info's isolation (hb.isolation, hb.mps_info) and the
 * listener's pid on hb.conn. A daemon without the map leaves "?". */
void hb_isolation_read(void)
{
  hipd_info_t *info = NULL;
  int64_t pid = -1;

  snprintf(hb.isolation, sizeof(hb.isolation), "?");
  snprintf(hb.mps_info, sizeof(hb.mps_info), "?");
  hb.listener_pid = hb.own_daemon ? (long)hb.daemon.pid : -1;
  if (hb.conn == NULL || hipd_daemon_info(hb.conn, &info) != 0)
    return;
  hb_info_strcpy(info, "isolation.mode", hb.isolation, sizeof(hb.isolation));
  hb_info_strcpy(info, "isolation.mps", hb.mps_info, sizeof(hb.mps_info));
  if (hipd_info_int(info, "pid", &pid) == 0)
    hb.listener_pid = (long)pid;
  hipd_info_free(info);
}

int hb_tenants_possible(void)
{
  return geteuid() == 0;
}

/* ------------------------------------------------------ the two users */

/* Fill @p cl with the account @p name, creating it (no home, no group of
 * its own, no login shell) if it does not exist. @return 0, or -1 with the
 * reason in @p err. */
static int bench_user(const char *name, hb_client_t *cl, char *err,
                      size_t errsz)
{
  struct passwd *pw = getpwnam(name);

  if (pw == NULL) {
    const char *argv[] = {"/usr/sbin/useradd", "-M", "-N", "-s",
                          "/usr/sbin/nologin", name, NULL};
    char log[340];
    proc_t p;
    int code;

    snprintf(log, sizeof(log), "%s/useradd.log", hb.tmp);
    note("tenants: creating the user %s", name);
    if (proc_spawn(&p, argv, NULL, log, 0) != 0) {
      snprintf(err, errsz, "cannot run %s: %s", argv[0], strerror(errno));
      return -1;
    }
    if ((code = proc_wait(&p, 60)) != 0) {
      snprintf(err, errsz, "useradd %s: exit status %d", name, code);
      bu_log_tail(log, 5);
      return -1;
    }
    if ((pw = getpwnam(name)) == NULL) {
      snprintf(err, errsz, "useradd %s succeeded but there is no such user",
               name);
      return -1;
    }
  }
  snprintf(cl->user, sizeof(cl->user), "%s", name);
  cl->uid = pw->pw_uid;
  cl->gid = pw->pw_gid;
  return 0;
}

/* ------------------------------------------ processes and their memory */

/* The (first) number of line @p key of /proc/@p pid/@p file ("status",
 * "VmRSS": kB), or -1. */
static long proc_file_num(long pid, const char *file, const char *key)
{
  char path[64], line[256];
  size_t klen = strlen(key);
  long v = -1;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%ld/%s", pid, file);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = atol(line + klen + 1);
      break;
    }
  fclose(f);
  return v;
}

/* The real uid of @p pid, or -1. */
static long proc_uid(long pid)
{
  return proc_file_num(pid, "status", "Uid"); /* "Uid:\treal\teffective..." */
}

/* Where @p name is on PATH, into @p out. @return 0 if found. */
static int path_find(const char *name, char *out, size_t size)
{
  const char *path = getenv("PATH");

  while (path != NULL && *path != '\0') {
    size_t n = strcspn(path, ":");

    snprintf(out, size, "%.*s/%s", (int)n, n ? path : ".", name);
    if (access(out, X_OK) == 0)
      return 0;
    path += n + (path[n] == ':');
  }
  out[0] = '\0';
  return -1;
}

typedef struct {
  long pid;
  double mib;
} gpu_app_t;

/* The compute processes on the GPUs and the device memory each holds,
 * from nvidia-smi. @return how many (at most @p max), or -1 with the
 * reason in @p why. */
static int gpu_apps(gpu_app_t *apps, int max, char *why, size_t size)
{
  char bin[512], line[256];
  const char *argv[] = {bin, "--query-compute-apps=pid,used_memory",
                        "--format=csv,noheader,nounits", NULL};
  double deadline = bu_now() + 30;
  proc_t p;
  int n = 0, r, code;

  if (path_find("nvidia-smi", bin, sizeof(bin)) != 0) {
    snprintf(why, size, "n/a: nvidia-smi is not on PATH");
    return -1;
  }
  if (proc_spawn(&p, argv, NULL, NULL, 0) != 0) {
    snprintf(why, size, "n/a: cannot run %.150s: %s", bin, strerror(errno));
    return -1;
  }
  close(p.in_fd);
  p.in_fd = -1;
  while ((r = proc_readline(&p, line, sizeof(line), deadline)) == 1) {
    long pid;
    double mib;

    if (n < max && sscanf(line, "%ld , %lf", &pid, &mib) == 2) {
      apps[n].pid = pid;
      apps[n].mib = mib;
      n++;
    }
  }
  if (r < 0) {
    proc_kill(&p);
    snprintf(why, size, "n/a: nvidia-smi gave no answer within 30 s");
    return -1;
  }
  if ((code = proc_wait(&p, 10)) != 0) {
    snprintf(why, size, "n/a: nvidia-smi exited with status %d", code);
    return -1;
  }
  return n;
}

/* What a sharing run's processes were, sampled while it ran. */
#define MAX_TENANT_WORKERS 16
typedef struct {
  /* in: the pid serving each client, and the client's user */
  const long *pids;
  const hb_client_t *clients;
  int n;
  int gpu; /* the device is a GPU: ask nvidia-smi */
  /* out */
  int sampled;
  int tree;             /* processes of hipd's tree (the listener's) */
  char tree_names[200]; /* "hipd 3, hipd-cpu-runner 2" */
  int nworkers;         /* distinct worker pids */
  struct {
    long pid;
    long uid;           /* the account it runs as */
    const char *tenant; /* the user of its clients */
    int procs;          /* it and its descendants */
    double rss_mib;     /* resident, it and its descendants (summed) */
    double pss_mib;     /* the same as proportional set size: shared pages
                           divided among the processes that share them */
    double gpu_mib;     /* device memory (nvidia-smi), NAN: not known */
  } w[MAX_TENANT_WORKERS];
  char gpu_na[200];   /* why gpu_mib is NAN, "" if known */
  char gpu_apps[200]; /* what nvidia-smi listed: "pid:MiB ..." */
  double dev_free;    /* device.get memory.free of a GPU (bytes), or NAN */
} sample_t;

/* While the clients run (pool_run's during): half-way through, survey
 * hipd's processes, the workers that serve the clients, their memory. */
static void sample_cb(void *arg)
{
  sample_t *s = arg;
  pinfo_t *ps = malloc(sizeof(*ps) * PROCS_MAX);
  gpu_app_t apps[MAX_GPU_APPS];
  int n, napps = -1;

  bu_sleep(hb.share_seconds / 2);
  if (ps == NULL)
    return;
  n = procs_survey(ps, PROCS_MAX);
  s->sampled = 1;
  s->dev_free = NAN;
  if (s->gpu && hb.conn != NULL) {
    hipd_info_t *info = NULL;
    int64_t v;

    if (hipd_device_get(hb.conn, hb.dev, &info) == 0 &&
        hipd_info_int(info, "memory.free", &v) == 0)
      s->dev_free = (double)v;
    hipd_info_free(info);
  }
  /* hipd's tree, by process name */
  s->tree = 0;
  s->tree_names[0] = '\0';
  if (hb.listener_pid > 0) {
    struct {
      char comm[20];
      int count;
    } names[16];
    int nn = 0;

    for (int i = 0; i < n; i++) {
      int k;

      if (!procs_under(ps, n, ps[i].pid, hb.listener_pid))
        continue;
      s->tree++;
      for (k = 0; k < nn && strcmp(names[k].comm, ps[i].comm) != 0; k++)
        ;
      if (k == nn && nn < 16) {
        snprintf(names[nn].comm, sizeof(names[nn].comm), "%s", ps[i].comm);
        names[nn++].count = 0;
      }
      if (k < nn)
        names[k].count++;
    }
    for (int k = 0; k < nn; k++)
      snprintf(s->tree_names + strlen(s->tree_names),
               sizeof(s->tree_names) - strlen(s->tree_names), "%s%s %d",
               k ? ", " : "", names[k].comm, names[k].count);
  }
  /* the workers the clients named */
  s->nworkers = 0;
  for (int c = 0; c < s->n; c++) {
    int k;

    if (s->pids[c] <= 0)
      continue;
    for (k = 0; k < s->nworkers && s->w[k].pid != s->pids[c]; k++)
      ;
    if (k < s->nworkers || k == MAX_TENANT_WORKERS)
      continue;
    s->w[k].pid = s->pids[c];
    s->w[k].uid = proc_uid(s->pids[c]);
    s->w[k].tenant = s->clients[c].user[0] ? s->clients[c].user : "(bench)";
    s->w[k].procs = 0;
    s->w[k].rss_mib = 0;
    s->w[k].pss_mib = 0;
    s->w[k].gpu_mib = NAN;
    for (int i = 0; i < n; i++)
      if (procs_under(ps, n, ps[i].pid, s->w[k].pid)) {
        long kib = proc_file_num(ps[i].pid, "status", "VmRSS");
        long pss = proc_file_num(ps[i].pid, "smaps_rollup", "Pss");

        if (pss > 0)
          s->w[k].pss_mib += pss / 1024.0;

        s->w[k].procs++;
        if (kib > 0)
          s->w[k].rss_mib += kib / 1024.0;
      }
    s->nworkers++;
  }
  free(ps);
  /* device memory */
  s->gpu_apps[0] = '\0';
  if (!s->gpu)
    snprintf(s->gpu_na, sizeof(s->gpu_na), "n/a: the CPU device");
  else if ((napps = gpu_apps(apps, MAX_GPU_APPS, s->gpu_na,
                             sizeof(s->gpu_na))) >= 0) {
    int found = 0;

    s->gpu_na[0] = '\0';
    for (int a = 0; a < napps; a++) {
      snprintf(s->gpu_apps + strlen(s->gpu_apps),
               sizeof(s->gpu_apps) - strlen(s->gpu_apps), "%s%ld:%.0fMiB",
               a ? " " : "", apps[a].pid, apps[a].mib);
      for (int k = 0; k < s->nworkers; k++)
        if (apps[a].pid == s->w[k].pid) {
          s->w[k].gpu_mib = apps[a].mib;
          found++;
        }
    }
    if (found < s->nworkers)
      snprintf(s->gpu_na, sizeof(s->gpu_na),
               "nvidia-smi listed %d of the %d worker pids (apps: %.120s)",
               found, s->nworkers, napps ? s->gpu_apps : "none");
  }
}

/* One line per worker of @p s into @p buf. */
static void sample_workers_str(const sample_t *s, char *buf, size_t size)
{
  buf[0] = '\0';
  for (int k = 0; k < s->nworkers; k++) {
    char gpu[32];

    if (isfinite(s->w[k].gpu_mib))
      snprintf(gpu, sizeof(gpu), "%.0f MiB", s->w[k].gpu_mib);
    else
      snprintf(gpu, sizeof(gpu), "n/a");
    snprintf(buf + strlen(buf), size - strlen(buf),
             "%spid %ld (uid %ld) serves %s: %d process%s, %.1f MiB "
             "resident (PSS %.1f MiB), device memory %s",
             k ? "; " : "", s->w[k].pid, s->w[k].uid, s->w[k].tenant,
             s->w[k].procs, s->w[k].procs == 1 ? "" : "es", s->w[k].rss_mib,
             s->w[k].pss_mib, gpu);
  }
}

/* ------------------------------------------------- 8. two tenants */

/* @p n clients on hb.dev as @p cl say, sampled while they run. */
static int tenants_run(hb_client_t *cl, int n, sample_t *s, double *agg,
                       double *lo, char *err, size_t errsz)
{
  long *pids = calloc((size_t)n, sizeof(*pids));
  int rc;

  if (pids == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  memset(s, 0, sizeof(*s));
  s->pids = pids;
  s->clients = cl;
  s->n = n;
  s->gpu = !hb.devs[hb.dev].is_cpu;
  rc = hb_share_run(cl, n, sample_cb, s, agg, lo, NULL, pids, err, errsz);
  s->pids = NULL;
  free(pids);
  return rc;
}

static void tenants_each(int k, double one_agg, double one_lo);

#define ONE_LABEL "the same clients as one uid, same daemon"

/* A new tenants figure @p name (@p title) of @p n clients running as
 * @p who says (words of its how), with its MPS baseline's label in
 * @p mps_label. */
static figure_t *tenants_fig(const char *name, const char *title, int n,
                             const char *who, char *mps_label, size_t size)
{
  figure_t *f = fig_new(name, title, "kernels/s", 0);

  snprintf(mps_label, size, "%d direct-HIP processes under NVIDIA MPS", n);
  snprintf(f->how, sizeof(f->how),
           "%d forked clients, %s, each looping {launch a %d-float kernel; "
           "wait for it} for %g s, started together; sum of their rates. "
           "Each iteration: %s",
           n, who, hb.share_elems, hb.share_seconds, hb_sync_how[hb.sync_mode]);
  detail_num(f, "clients", n);
  detail_str(f, "isolation", hb.isolation);
  return f;
}

/* Figure @p f's baselines are not measured, for @p why. */
static void tenants_bases_na(figure_t *f, const char *mps_label,
                             const char *why)
{
  base_na(f, "one_tenant", ONE_LABEL, "%s", why);
  base_na(f, "mps", mps_label, "%s", why);
}

/* Figure @p f does not apply (not root): nor do its baselines. */
static void tenants_na(figure_t *f, const char *mps_label, const char *why)
{
  snprintf(f->na, sizeof(f->na), "%s", why);
  tenants_bases_na(f, mps_label, why);
}

/* Section 8b's K: the largest of --clients from 2 to EACH_MAX, else
 * section 8's @p n, at most EACH_MAX. */
static int each_k(int n)
{
  int k = 0;

  for (int i = 0; i < hb.nclients; i++)
    if (hb.clients[i] >= 2 && hb.clients[i] <= EACH_MAX && hb.clients[i] > k)
      k = hb.clients[i];
  return k != 0 ? k : n < EACH_MAX ? n : EACH_MAX;
}

/* Section 8: N clients (the largest of --clients, at least 2, even) on
 * hb.dev, client i as TENANT_A for even i and TENANT_B for odd i, against
 * the same N all as TENANT_A on the same daemon, and (later, with hipd
 * stopped) N direct-HIP processes under MPS; then section 8b
 * (tenants_each). */
void hb_sec_tenants(void)
{
  char name[48], title[96], mps_label[64], err[600], buf[200];
  hb_client_t *one = NULL, *two = NULL, a, b;
  sample_t *s1 = NULL, *s2 = NULL;
  double agg1 = NAN, lo1 = NAN, agg2 = NAN, lo2 = NAN;
  int n = 2, rc1, rc2;
  figure_t *f;

  hb_isolation_read(); /* the daemon may have been restarted since */
  for (int i = 0; i < hb.nclients; i++)
    if (hb.clients[i] > n)
      n = hb.clients[i];
  if (n % 2 != 0)
    n = n + 1 <= MAX_WORKERS ? n + 1 : n - 1;
  snprintf(name, sizeof(name), "tenants_n%d", n);
  snprintf(title, sizeof(title),
           "two tenants (uids) sharing device %d: %d client processes, "
           "aggregate",
           hb.dev, n);
  f = tenants_fig(name, title, n,
                  "even ones as uid " TENANT_A ", odd ones as uid " TENANT_B,
                  mps_label, sizeof(mps_label));
  if (!hb_tenants_possible()) {
    const char *why = "not applicable: needs root to run clients as two uids";

    tenants_na(f, mps_label, why);
    note("tenants: %s", why);
    tenants_each(each_k(n), NAN, NAN);
    return;
  }
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  if (bench_user(TENANT_A, &a, err, sizeof(err)) != 0 ||
      bench_user(TENANT_B, &b, err, sizeof(err)) != 0) {
    tenants_bases_na(f, mps_label, "no bench users");
    fig_fail(f, "%s", err);
    tenants_each(each_k(n), NAN, NAN); /* it says why it fails too */
    return;
  }
  snprintf(buf, sizeof(buf), "%s uid %ld", a.user, (long)a.uid);
  detail_str(f, "tenant_a", buf);
  snprintf(buf, sizeof(buf), "%s uid %ld", b.user, (long)b.uid);
  detail_str(f, "tenant_b", buf);
  detail_str(f, "daemon_mps", hb.mps_info);
  one = calloc((size_t)n, sizeof(*one));
  two = calloc((size_t)n, sizeof(*two));
  s1 = calloc(1, sizeof(*s1));
  s2 = calloc(1, sizeof(*s2));
  if (one == NULL || two == NULL || s1 == NULL || s2 == NULL) {
    fig_fail(f, "out of memory");
    rc1 = -1;
    goto each;
  }
  for (int i = 0; i < n; i++) {
    one[i] = a;
    two[i] = i % 2 == 0 ? a : b;
    one[i].dev = two[i].dev = hb.dev;
  }

  note("tenants: %d hipd clients as one uid (%s)", n, a.user);
  rc1 = tenants_run(one, n, s1, &agg1, &lo1, err, sizeof(err));
  if (rc1 == 0) {
    base_set(f, "one_tenant", ONE_LABEL, agg1);
    detail_num(f, "one_tenant_slowest_client", lo1);
  } else {
    base_na(f, "one_tenant", ONE_LABEL, "failed: %s", err);
    report_failure();
  }
  note("tenants: %d hipd clients as two uids (%s, %s)", n, a.user, b.user);
  rc2 = tenants_run(two, n, s2, &agg2, &lo2, err, sizeof(err));
  if (rc2 == 0) {
    f->hipd = agg2;
    detail_num(f, "two_tenant_slowest_client", lo2);
  } else {
    fig_fail(f, "%s", err);
  }
  hb_share_mps_later(f, &hb.dev, 1, n, mps_label);

  /* What a tenant costs: the workers of the two-tenant run. */
  if (rc2 == 0 && s2->sampled) {
    double rss = 0, pss = 0, gpu = 0;
    int procs = 0, gpu_known = 0;
    char workers[400];

    for (int k = 0; k < s2->nworkers; k++) {
      rss += s2->w[k].rss_mib;
      pss += s2->w[k].pss_mib;
      procs += s2->w[k].procs;
      if (isfinite(s2->w[k].gpu_mib)) {
        gpu += s2->w[k].gpu_mib;
        gpu_known++;
      }
    }
    detail_num(f, "workers", s2->nworkers);
    if (s2->nworkers > 0) {
      detail_num(f, "processes_per_tenant", (double)procs / s2->nworkers);
      detail_num(f, "resident_mib_per_tenant", rss / s2->nworkers);
      detail_num(f, "pss_mib_per_tenant", pss / s2->nworkers);
    }
    if (gpu_known == s2->nworkers && gpu_known > 0)
      detail_num(f, "device_mib_per_tenant", gpu / gpu_known);
    else
      detail_str(f, "device_mib_per_tenant", s2->gpu_na);
    if (s2->gpu_apps[0] != '\0')
      detail_str(f, "nvidia_smi_compute_apps", s2->gpu_apps);
    detail_num(f, "hipd_processes", s2->tree);
    detail_str(f, "hipd_process_names", s2->tree_names);
    if (rc1 == 0 && s1->sampled) {
      detail_num(f, "one_tenant_workers", s1->nworkers);
      detail_num(f, "one_tenant_hipd_processes", s1->tree);
    }
    sample_workers_str(s2, workers, sizeof(workers));
    for (int k = 0; k < s2->nworkers; k++) {
      sample_t one_w = *s2;
      char key[32];

      /* one worker a detail: a string of them all would be cut */
      one_w.nworkers = 1;
      one_w.w[0] = s2->w[k];
      sample_workers_str(&one_w, buf, sizeof(buf));
      snprintf(key, sizeof(key), "worker_%d", k);
      detail_str(f, key, buf);
    }
    if (rc1 == 0 && isfinite(s1->dev_free) && isfinite(s2->dev_free)) {
      double added = (s1->dev_free - s2->dev_free) / (1 << 20);

      detail_num(f, "device_mib_added_tenant", added);
      report_remark("%s: device memory free: %.0f MiB with one tenant, "
                    "%.0f MiB with two: the second tenant's worker costs "
                    "%.0f MiB",
                    f->name, s1->dev_free / (1 << 20), s2->dev_free / (1 << 20),
                    added);
    }
    report_remark("%s: %d worker process%s for two tenants: %s", f->name,
                  s2->nworkers, s2->nworkers == 1 ? "" : "es", workers);
    if (rc1 == 0 && s1->sampled)
      report_remark("%s: hipd's processes: %d with two tenants (%s), %d "
                    "with one (%s)",
                    f->name, s2->tree, s2->tree_names, s1->tree,
                    s1->tree_names);
    else
      report_remark("%s: hipd's processes: %d with two tenants (%s)", f->name,
                    s2->tree, s2->tree_names);
    if (gpu_known < s2->nworkers || s2->nworkers == 0)
      report_remark("%s: device memory per worker: %s", f->name, s2->gpu_na);
    note("tenants: %s", workers);
  }
each:
  /* 8b: as many uids as clients, up to EACH_MAX. */
  if (each_k(n) == n && rc1 == 0)
    tenants_each(n, agg1, lo1);
  else
    tenants_each(each_k(n), NAN, NAN);
  free(one);
  free(two);
  free(s1);
  free(s2);
}

/* ----------------------------------- 8b. every client its own tenant */

/* Section 8b: K clients (the largest of --clients from 2 to EACH_MAX) on
 * hb.dev, client i as user hipd_bench_<'a' + i>, so K uids: with
 * --isolation uid, K worker processes, each its own loop and GPU context
 * (under MPS only as --mps-tenants lets them: daemon_mps says). Against
 * the same K clients all as hipd_bench_a on the same daemon (@p one_agg
 * when section 8 measured that already for K clients, else NAN: measured
 * here) and K direct-HIP processes under MPS. */
static void tenants_each(int k, double one_agg, double one_lo)
{
  char name[48], title[112], mps_label[64], err[600], user[32], who[64];
  hb_client_t *one = NULL, *each = NULL;
  sample_t *s = NULL;
  double agg = NAN, lo = NAN;
  figure_t *f;

  snprintf(name, sizeof(name), "tenants_n%d_each", k);
  snprintf(title, sizeof(title),
           "%d tenants (uids), one client each, sharing device %d: "
           "aggregate",
           k, hb.dev);
  snprintf(who, sizeof(who), "client i as uid %s<'a'+i> (%d uids)",
           TENANT_PREFIX, k);
  f = tenants_fig(name, title, k, who, mps_label, sizeof(mps_label));
  detail_num(f, "uids", k);
  detail_str(f, "daemon_mps", hb.mps_info);
  if (!hb_tenants_possible()) {
    tenants_na(f, mps_label,
               "not applicable: needs root to run clients as other uids");
    return;
  }
  one = calloc((size_t)k, sizeof(*one));
  each = calloc((size_t)k, sizeof(*each));
  s = calloc(1, sizeof(*s));
  if (one == NULL || each == NULL || s == NULL) {
    tenants_bases_na(f, mps_label, "out of memory");
    fig_fail(f, "out of memory");
    goto out;
  }
  for (int i = 0; i < k; i++) {
    snprintf(user, sizeof(user), "%s%c", TENANT_PREFIX, 'a' + i);
    if (bench_user(user, &each[i], err, sizeof(err)) != 0) {
      tenants_bases_na(f, mps_label, "no bench users");
      fig_fail(f, "%s", err);
      goto out;
    }
    each[i].dev = hb.dev;
    one[i] = each[0];
  }
  if (!isfinite(one_agg)) {
    note("tenants: %d hipd clients as one uid (%s)", k, one[0].user);
    if (tenants_run(one, k, s, &one_agg, &one_lo, err, sizeof(err)) != 0) {
      base_na(f, "one_tenant", ONE_LABEL, "failed: %s", err);
      report_failure();
    }
  }
  if (isfinite(one_agg)) {
    base_set(f, "one_tenant", ONE_LABEL, one_agg);
    detail_num(f, "one_tenant_slowest_client", one_lo);
  }
  note("tenants: %d hipd clients as %d uids (%s to %s)", k, k, each[0].user,
       each[k - 1].user);
  if (tenants_run(each, k, s, &agg, &lo, err, sizeof(err)) == 0) {
    f->hipd = agg;
    detail_num(f, "slowest_client", lo);
    if (s->sampled) {
      detail_num(f, "workers", s->nworkers);
      detail_num(f, "hipd_processes", s->tree);
      detail_str(f, "hipd_process_names", s->tree_names);
      report_remark("%s: %d worker process%s for %d tenants; hipd's "
                    "processes: %d (%s)",
                    f->name, s->nworkers, s->nworkers == 1 ? "" : "es", k,
                    s->tree, s->tree_names);
    }
  } else {
    fig_fail(f, "%s", err);
  }
  hb_share_mps_later(f, &hb.dev, 1, k, mps_label);
out:
  free(one);
  free(each);
  free(s);
}

/* ------------------------------------------ --isolation-compare */

/* The figures of this run that --isolation-compare measures again. */
static int compared(const char *name, int rtt, int launch, int share)
{
  return (rtt && strcmp(name, "sync_rtt") == 0) ||
         (launch && strcmp(name, "launch_throughput") == 0) ||
         (share && strncmp(name, "share_n", 7) == 0 &&
          strstr(name, "_spread") == NULL);
}

/* The figure comparing @p mine (this run's daemon) with @p none (the same
 * measured on a daemon with --isolation none; NULL: not measured, for
 * @p why). */
static void compare_figure(const figure_t *mine, const figure_t *none,
                           const char *mode, const char *why)
{
  const char *label = "hipd --isolation none, same run";
  char name[80], title[140];
  figure_t *f;

  snprintf(name, sizeof(name), "isolation_%s", mine->name);
  snprintf(title, sizeof(title), "%s: --isolation %s / none", mine->title,
           mode);
  f = fig_new(name, title, mine->unit, mine->lower_better);
  snprintf(f->devices, sizeof(f->devices), "%s", mine->devices);
  f->device = mine->device;
  snprintf(f->how, sizeof(f->how),
           "the %.60s figure of this run (hipd --isolation %s); baseline: "
           "the same measured on a second hipd started with --isolation none "
           "in this run. %.180s",
           mine->name, mode, mine->how);
  f->hipd = mine->hipd;
  if (!isfinite(mine->hipd))
    snprintf(f->na, sizeof(f->na), "the --isolation %s figure: %.180s", mode,
             mine->error[0] ? mine->error
             : mine->na[0]  ? mine->na
                            : "not measured");
  if (none == NULL)
    base_na(f, "none", label, "%s", why);
  else if (!isfinite(none->hipd))
    base_na(f, "none", label, "failed: %.200s",
            none->error[0] ? none->error : "not measured");
  else
    base_set(f, "none", label, none->hipd);
  /* the bound: no figure falls by more than 10% */
  base_target(f, "none",
              mine->lower_better ? "<=" : ">=", mine->lower_better ? 1.1 : 0.9);
  if (none != NULL && isfinite(none->hipd) && isfinite(mine->hipd) &&
      none->hipd > 0 && mine->hipd > 0) {
    double fall = mine->lower_better ? (mine->hipd / none->hipd - 1) * 100
                                     : (1 - mine->hipd / none->hipd) * 100;

    detail_num(f, "fall_pct", fall);
    detail_str(f, "within_10pct", fall <= 10 ? "yes" : "no");
  }
}

/* See hipd_bench.h. */
void hb_isolation_compare(int rtt, int launch, int share)
{
  const char *why = NULL;
  char mode[16];
  int mark = report_count(), nnone;
  figure_t *none = NULL;

  snprintf(mode, sizeof(mode), "%s", hb.isolation);
  if (!hb.own_daemon)
    why = "needs the bench's own daemon (not --socket)";
  else if (strcmp(mode, "none") == 0)
    why = "the daemon measured already runs --isolation none";
  if (why == NULL) {
    note("isolation compare: restarting hipd with --isolation none");
    hb_conn_close();
    if (hb_daemon_stop() != 0)
      report_failure();
    hb.isolation_arg = "none";
    if (hb_daemon_start() != 0 || hb_conn_open() != 0) {
      why = "hipd --isolation none did not start";
      report_failure();
    } else {
      hb_isolation_read();
      if (strcmp(hb.isolation, "none") != 0) {
        why = "the second daemon does not say --isolation none";
        report_failure();
      }
    }
    snprintf(hb.isolation, sizeof(hb.isolation), "%s", mode);
  }
  if (why == NULL) {
    hb.hipd_only = 1;
    if (rtt)
      hb_sec_rtt();
    if (launch)
      hb_sec_launch();
    if (share)
      hb_sec_share(&hb.dev, 1, "");
    hb.hipd_only = 0;
  }
  /* The second daemon's figures, set aside, then one figure per pair. */
  nnone = report_count() - mark;
  if (nnone > 0 && (none = malloc(sizeof(*none) * (size_t)nnone)) == NULL) {
    why = "out of memory";
    nnone = 0;
  }
  for (int i = 0; i < nnone; i++)
    none[i] = *report_fig(mark + i);
  report_truncate(mark);
  for (int i = 0; i < mark; i++) {
    const figure_t *mine = report_fig(i);
    const figure_t *other = NULL;

    if (!compared(mine->name, rtt, launch, share))
      continue;
    for (int j = 0; j < nnone && other == NULL; j++)
      if (strcmp(none[j].name, mine->name) == 0)
        other = &none[j];
    compare_figure(mine, other, mode,
                   why != NULL ? why : "not measured on the second daemon");
  }
  free(none);
}
