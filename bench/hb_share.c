/* SPDX-License-Identifier: MIT */
/* bench/hb_share.c: sections 5 to 7: sharing a GPU (and spreading over
 * several) between client processes, against independent processes and
 * MPS; and GPU-to-GPU copies.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "mps.h"
#include "procs.h"

#define READY_TIMEOUT 180.0 /* seconds for workers to set up */

/* ---------------------------------------------------- 5. sharing a GPU */

/* In a forked client: become @p cl's account (groups, gid, uid), then ask
 * again to die with the bench (a change of credentials clears
 * PR_SET_PDEATHSIG). @return 0, or -1 with the reason in @p msg. */
static int client_become(const hb_client_t *cl, char *msg, size_t size)
{
  if (cl->user[0] == '\0')
    return 0;
  if (initgroups(cl->user, cl->gid) != 0 || setgid(cl->gid) != 0 ||
      setuid(cl->uid) != 0) {
    snprintf(msg, size, "cannot become %s (uid %ld): %s", cl->user,
             (long)cl->uid, strerror(errno));
    return -1;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != cl->parent) {
    snprintf(msg, size, "the bench is gone");
    return -1;
  }
  return 0;
}

/* The process serving connection @p c (daemon.info isolation.pid), or -1
 * (a daemon without the isolation map). */
static long served_by(hipd_conn_t *c)
{
  hipd_info_t *info = NULL;
  int64_t v = -1;

  if (hipd_daemon_info(c, &info) != 0)
    return -1;
  if (hipd_info_int(info, "isolation.pid", &v) != 0)
    v = -1;
  hipd_info_free(info);
  return (long)v;
}

static void worker_error(FILE *out, const char *msg)
{
  fputs("{\"kind\":\"error\",\"message\":", out);
  bu_json_str(out, msg);
  fputs("}\n", out);
  fflush(out);
}

/* A forked hipd client of the sharing figures: become its account (if it
 * has one), connect, set up, say ready (with the pid of the daemon process
 * serving it), wait for the word, loop { launch the small kernel; wait for
 * it } for hb.share_seconds and report. Its own connection: nothing of the
 * parent's is used. */
static int hipd_worker(void *arg, int in_fd, int out_fd)
{
  hb_client_t *w = arg;
  FILE *out = fdopen(out_fd, "w");
  hipd_conn_t *c = NULL;
  long long count = 0;
  char go[16], msg[600];
  double t0, t;
  hk_t h;
  int rc;

  if (out == NULL)
    return 1;
  if (client_become(w, msg, sizeof(msg)) != 0) {
    worker_error(out, msg);
    return 1;
  }
  if (w->socket_only)
    setenv("HIPD_RING", "0", 1);
  if ((rc = hipd_connect2(hb.sock_path, "hipd_bench worker", &c)) != 0) {
    snprintf(msg, sizeof(msg), "connect%s%s: %s: %s", w->user[0] ? " as " : "",
             w->user, hipd_err_name(rc), hipd_last_error(NULL));
    worker_error(out, msg);
    return 1;
  }
  hipd_set_timeout(c, CALL_TIMEOUT_MS);
  if (hb_hk_open(&h, c, w->dev, hb.share_elems) != 0) {
    worker_error(out, h.err);
    return 1;
  }
  for (int i = 0; i < 10; i++)
    if (hb_hk_launch_sync(&h, hb.sync_mode) != 0) {
      worker_error(out, h.err);
      return 1;
    }
  fprintf(out, "{\"kind\":\"ready\",\"worker_pid\":%ld}\n", served_by(c));
  fflush(out);
  if (read(in_fd, go, sizeof(go)) <= 0)
    return 0; /* the bench gave up */
  t0 = bu_now();
  do {
    if (hb_hk_launch_sync(&h, hb.sync_mode) != 0) {
      worker_error(out, h.err);
      return 1;
    }
    count++;
    t = bu_now() - t0;
  } while (t < hb.share_seconds);
  fprintf(out, "{\"kind\":\"worker\",\"kernels\":%lld,\"seconds\":%.6f}\n",
          count, t);
  fflush(out);
  hb_hk_close(&h);
  hipd_close(c);
  return 0;
}

/* Run the @p n started workers as one: wait until every one is ready,
 * tell them all to go at once, collect their counts. *@p agg gets the sum
 * of their rates (kernels/s). @p pids (n entries, or NULL) gets each
 * ready line's worker_pid (-1 without one). @p during, if not NULL, runs
 * once they have all started. @return 0, or -1 with the reason in
 * @p err. */
/* The CPU time so far of the clients @p w and of the process tree of
 * @p root (0: none); *@p threads (may be NULL) gets the tree's threads, or
 * the clients' without a tree. */
static uint64_t pool_cpu_ns(const proc_t *w, int n, long root, long *threads)
{
  pinfo_t *ps = malloc(sizeof(*ps) * PROCS_MAX);
  pid_t *pids = malloc(sizeof(*pids) * (size_t)n);
  uint64_t ns = 0;

  if (threads != NULL)
    *threads = -1;
  if (ps != NULL && pids != NULL) {
    int np = procs_survey(ps, PROCS_MAX);

    int seen = root <= 0;

    for (int i = 0; i < np && !seen; i++)
      seen = ps[i].pid == root;
    /* A stale pid would leave hipd's CPU out of every figure silently. */
    if (!seen)
      note("the daemon's pid %ld is not running: its CPU is not counted", root);
    for (int i = 0; i < n; i++)
      pids[i] = w[i].pid;
    procs_total(ps, np, root, pids, n, &ns, NULL);
    if (threads != NULL)
      procs_total(ps, np, root, root > 0 ? NULL : pids, root > 0 ? 0 : n, NULL,
                  threads);
  }
  free(ps);
  free(pids);
  return ns;
}

/* --profile: the threads of the clients @p w and of @p root's tree, by
 * name, into @p out (at most @p max). @return how many. */
static int pool_threads(const proc_t *w, int n, long root, tprof_t *out,
                        int max)
{
  pinfo_t *ps = malloc(sizeof(*ps) * PROCS_MAX);
  pid_t *pids = malloc(sizeof(*pids) * (size_t)n);
  int nt = 0;

  if (ps != NULL && pids != NULL) {
    int np = procs_survey(ps, PROCS_MAX);
    for (int i = 0; i < n; i++)
      pids[i] = w[i].pid;
    nt = procs_thread_profile(ps, np, root, pids, n, out, max);
  }
  free(ps);
  free(pids);
  return nt;
}

#define PROFILE_MAX 64

/* --profile: print what each group of threads cost per kernel between
 * @p a and @p b. */
static void pool_profile_print(int n, double kernels, const tprof_t *a, int na,
                               const tprof_t *b, int nb)
{
  double cpu = 0, v = 0, iv = 0;

  if (!(kernels > 0))
    return;
  printf("\nprofile: %d client%s, %.0f kernels (per kernel: CPU time, "
         "voluntary and involuntary context switches)\n",
         n, n == 1 ? "" : "s", kernels);
  printf("  %-34s %7s %10s %8s %8s\n", "process/thread", "threads", "cpu_us",
         "vcsw", "ivcsw");
  for (int j = 0; j < nb; j++) {
    tprof_t d = b[j];
    for (int i = 0; i < na; i++)
      if (strcmp(a[i].name, b[j].name) == 0) {
        d.cpu_ns -= a[i].cpu_ns < d.cpu_ns ? a[i].cpu_ns : d.cpu_ns;
        d.vcsw -= a[i].vcsw < d.vcsw ? a[i].vcsw : d.vcsw;
        d.ivcsw -= a[i].ivcsw < d.ivcsw ? a[i].ivcsw : d.ivcsw;
        break;
      }
    if (d.cpu_ns == 0 && d.vcsw == 0 && d.ivcsw == 0)
      continue;
    printf("  %-34s %7d %10.2f %8.3f %8.3f\n", d.name, d.threads,
           (double)d.cpu_ns / 1e3 / kernels, (double)d.vcsw / kernels,
           (double)d.ivcsw / kernels);
    cpu += (double)d.cpu_ns / 1e3 / kernels;
    v += (double)d.vcsw / kernels;
    iv += (double)d.ivcsw / kernels;
  }
  printf("  %-34s %7s %10.2f %8.3f %8.3f\n", "total", "", cpu, v, iv);
  fflush(stdout);
}

static int pool_run(proc_t *w, int n, long root, double *agg, double *min_rate,
                    hb_cost_t *cost, long *pids, void (*during)(void *),
                    void *arg, char *err, size_t errsz)
{
  char line[512];
  double deadline = bu_now() + READY_TIMEOUT, sum = 0, lo = INFINITY;
  double kernels = 0;
  uint64_t cpu0;
  static tprof_t prof0[PROFILE_MAX], prof1[PROFILE_MAX];
  int nprof0 = 0;

  for (int i = 0; i < n; i++) {
    int r = proc_readline(&w[i], line, sizeof(line), deadline);
    double pid = -1;

    if (r != 1 || strstr(line, "\"ready\"") == NULL) {
      char msg[400] = "";

      if (r == 1)
        bu_json_get_str(line, "message", msg, sizeof(msg));
      snprintf(err, errsz, "client %d of %d: %s", i, n,
               r == 1   ? msg
               : r == 0 ? "exited before it was ready"
                        : "not ready in time");
      return -1;
    }
    if (pids != NULL)
      pids[i] = bu_json_get_num(line, "worker_pid", &pid) == 0 ? (long)pid : -1;
  }
  cpu0 = pool_cpu_ns(w, n, root, cost != NULL ? &cost->threads : NULL);
  if (hb.profile)
    nprof0 = pool_threads(w, n, root, prof0, PROFILE_MAX);
  for (int i = 0; i < n; i++)
    if (proc_write(&w[i], "go\n") != 0) {
      snprintf(err, errsz, "client %d of %d went away", i, n);
      return -1;
    }
  if (during != NULL)
    during(arg);
  deadline = bu_now() + hb.share_seconds + 120;
  for (int i = 0; i < n; i++) {
    int r = proc_readline(&w[i], line, sizeof(line), deadline);
    double k = NAN, s = NAN;

    if (r == 1 && strstr(line, "\"worker\"") != NULL &&
        bu_json_get_num(line, "kernels", &k) == 0 &&
        bu_json_get_num(line, "seconds", &s) == 0 && s > 0) {
      sum += k / s;
      kernels += k;
      if (k / s < lo)
        lo = k / s;
      continue;
    }
    char msg[400] = "";
    if (r == 1)
      bu_json_get_str(line, "message", msg, sizeof(msg));
    snprintf(err, errsz, "client %d of %d: %s", i, n,
             r == 1   ? msg
             : r == 0 ? "exited without a result"
                      : "no result in time");
    return -1;
  }
  *agg = sum;
  *min_rate = lo;
  if (hb.profile) {
    int nprof1 = pool_threads(w, n, root, prof1, PROFILE_MAX);
    pool_profile_print(n, kernels, prof0, nprof0, prof1, nprof1);
  }
  /* Read before the clients are reaped: their times stay with them. */
  if (cost != NULL)
    cost->cpu_us =
        kernels > 0
            ? (double)(pool_cpu_ns(w, n, root, NULL) - cpu0) / 1e3 / kernels
            : NAN;
  return 0;
}

/* Stop every worker: they have reported, or the run failed. @return the
 * number that did not exit with 0. */
static int pool_reap(proc_t *w, int n)
{
  int bad = 0;

  for (int i = 0; i < n; i++)
    if (w[i].pid != 0 && proc_wait(&w[i], 30) != 0)
      bad++;
  return bad;
}

/* See hipd_bench.h. */
int hb_share_run(hb_client_t *clients, int n, void (*during)(void *),
                 void *during_arg, double *agg, double *lo, hb_cost_t *cost,
                 long *worker_pids, char *err, size_t errsz)
{
  proc_t *w = calloc((size_t)n, sizeof(*w));
  int rc = -1, started = 0;

  if (w == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  for (; started < n; started++) {
    clients[started].parent = getpid();
    if (proc_fork(&w[started], hipd_worker, &clients[started], -1) != 0) {
      snprintf(err, errsz, "fork: %s", strerror(errno));
      goto out;
    }
  }
  rc = pool_run(w, n, hb.listener_pid > 0 ? hb.listener_pid : 0, agg, lo, cost,
                worker_pids, during, during_arg, err, errsz);
out:
  if (rc != 0)
    for (int i = 0; i < started; i++)
      proc_kill(&w[i]);
  if (pool_reap(w, started) != 0 && rc == 0) {
    snprintf(err, errsz, "a client exited with an error");
    rc = -1;
  }
  free(w);
  return rc;
}

/* Aggregate kernels/s of @p n hipd clients (the bench's own account),
 * client i on devs[i % ndevs], on their rings or (@p socket_only) on the
 * socket alone. */
static int share_hipd(const int *devs, int ndevs, int n, int socket_only,
                      double *agg, double *lo, hb_cost_t *cost, char *err,
                      size_t errsz)
{
  hb_client_t *cl = calloc((size_t)n, sizeof(*cl));
  int rc;

  if (cl == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    cl[i].dev = devs[i % ndevs];
    cl[i].socket_only = socket_only;
  }
  rc = hb_share_run(cl, n, NULL, NULL, agg, lo, cost, NULL, err, errsz);
  free(cl);
  return rc;
}

/* Aggregate kernels/s of @p n direct_hip workers with @p env (MPS). */
static int share_direct(const int *devs, int ndevs, int n,
                        const char *const *env, void (*during)(void *),
                        void *during_arg, double *agg, double *lo,
                        hb_cost_t *cost, char *err, size_t errsz)
{
  proc_t *w = calloc((size_t)n, sizeof(*w));
  char secs[32], elems[32];
  int rc = -1, started = 0;

  if (w == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  snprintf(secs, sizeof(secs), "%g", hb.share_seconds);
  snprintf(elems, sizeof(elems), "%d", hb.share_elems);
  for (; started < n; started++) {
    char ord[16];
    const char *argv[] = {
        hb.direct_bin,
        "worker",
        "--device",
        hb_itoa_tmp(hb.devs[devs[started % ndevs]].hip_ord, ord, sizeof(ord)),
        "--seconds",
        secs,
        "--elems",
        elems,
        NULL};

    if (proc_spawn(&w[started], argv, env, NULL, 0) != 0) {
      snprintf(err, errsz, "cannot run %s: %s", hb.direct_bin, strerror(errno));
      goto out;
    }
  }
  rc = pool_run(w, n, 0, agg, lo, cost, NULL, during, during_arg, err, errsz);
out:
  if (rc != 0)
    for (int i = 0; i < started; i++)
      proc_kill(&w[i]);
  if (pool_reap(w, started) != 0 && rc == 0) {
    snprintf(err, errsz, "a direct_hip worker exited with an error");
    rc = -1;
  }
  free(w);
  return rc;
}

static void devs_str(const int *devs, int ndevs, char *buf, size_t size)
{
  buf[0] = '\0';
  for (int i = 0; i < ndevs; i++)
    snprintf(buf + strlen(buf), size - strlen(buf), "%s%d", i ? "," : "",
             devs[i]);
}

/* A new figure of a sharing run on the devices @p dl (the first
 * @p first). */
static figure_t *share_fig(const char *name, const char *title,
                           const char *unit, int lower_better, const char *dl,
                           int first)
{
  figure_t *f = fig_new(name, title, unit, lower_better);

  snprintf(f->devices, sizeof(f->devices), "%s", dl);
  f->device = first;
  return f;
}

/* The same run as @p f (and its CPU figure @p fc) with every client on
 * the socket alone (HIPD_RING=0): share_sock_n<N> and cpu_sock_n<N>, each
 * against the ring's figure of the same run. */
static void share_socket(const int *devs, int ndevs, int n, const char *suffix,
                         const char *dl, figure_t *f, figure_t *fc)
{
  char name[48], title[96], err[600];
  double agg = NAN, lo = NAN;
  hb_cost_t cost = {NAN, -1};
  figure_t *fs, *fsc;

  snprintf(name, sizeof(name), "share_sock_n%d%s", n, suffix);
  snprintf(title, sizeof(title),
           "sharing: %d client process%s, aggregate, on the socket alone", n,
           n == 1 ? "" : "es");
  fs = share_fig(name, title, "kernels/s", 0, dl, devs[0]);
  snprintf(fs->how, sizeof(fs->how),
           "as %s, with HIPD_RING=0 in each client: no ring, every request "
           "and answer through the socket",
           f->name);
  detail_num(fs, "clients", n);
  snprintf(name, sizeof(name), "cpu_sock_n%d%s", n, suffix);
  snprintf(title, sizeof(title), "CPU time per kernel of %s", fs->name);
  fsc = share_fig(name, title, "us", 1, dl, devs[0]);
  snprintf(fsc->how, sizeof(fsc->how), "as %s, in %s's runs", fc->name,
           fs->name);
  note("sharing: %d hipd client%s on the socket alone", n, n == 1 ? "" : "s");
  if (share_hipd(devs, ndevs, n, 1, &agg, &lo, &cost, err, sizeof(err)) != 0) {
    fig_fail(fs, "%s", err);
    snprintf(fsc->na, sizeof(fsc->na), "%s failed", fs->name);
    return;
  }
  fs->hipd = agg;
  detail_num(fs, "hipd_slowest_client", lo);
  if (cost.threads >= 0)
    detail_num(fs, "hipd_threads", (double)cost.threads);
  fsc->hipd = cost.cpu_us;
  if (isfinite(f->hipd))
    base_set(fs, "ring", "the same clients on their rings", f->hipd);
  if (isfinite(fc->hipd))
    base_set(fsc, "ring", "the same clients on their rings", fc->hipd);
}

/* The sharing figures on @p devs: hipd and independent processes now,
 * MPS later (hb_share_mps), for each client count. */
void hb_sec_share(const int *devs, int ndevs, const char *suffix)
{
  char dl[64];
  const char *why = NULL;
  int direct = 1;

  devs_str(devs, ndevs, dl, sizeof(dl));
  for (int i = 0; i < ndevs && direct; i++)
    direct = hb_direct_ok(devs[i], &why);
  for (int ci = 0; ci < hb.nclients; ci++) {
    int n = hb.clients[ci];
    char name[48], title[96], err[600];
    double agg = NAN, lo = NAN;
    hb_cost_t cost = {NAN, -1};
    figure_t *f, *fc;

    snprintf(name, sizeof(name), "share_n%d%s", n, suffix);
    snprintf(title, sizeof(title),
             "sharing: %d client process%s on device%s %s, aggregate", n,
             n == 1 ? "" : "es", ndevs > 1 ? "s" : "", dl);
    f = share_fig(name, title, "kernels/s", 0, dl, devs[0]);
    snprintf(f->how, sizeof(f->how),
             "%d forked clients, client i on device devs[i mod %d], each "
             "looping {launch a %d-float kernel; wait for it} for %g s, "
             "started together; sum of their rates. Each iteration: %s",
             n, ndevs, hb.share_elems, hb.share_seconds,
             hb_sync_how[hb.sync_mode]);
    detail_num(f, "clients", n);
    snprintf(name, sizeof(name), "cpu_n%d%s", n, suffix);
    snprintf(title, sizeof(title), "CPU time per kernel of %s", f->name);
    fc = share_fig(name, title, "us", 1, dl, devs[0]);
    snprintf(fc->how, sizeof(fc->how),
             "in %s's runs, user + system time (/proc/PID/stat) from the "
             "word go to the last result, of every hipd process (the "
             "listener and all below it) and the clients, over the kernels "
             "they ran; the baselines' of their processes alone",
             f->name);
    note("sharing: %d hipd client%s on device%s %s", n, n == 1 ? "" : "s",
         ndevs > 1 ? "s" : "", dl);
    if (share_hipd(devs, ndevs, n, 0, &agg, &lo, &cost, err, sizeof(err)) ==
        0) {
      f->hipd = agg;
      detail_num(f, "hipd_slowest_client", lo);
      if (cost.threads >= 0)
        detail_num(f, "hipd_threads", (double)cost.threads);
      if (isfinite(cost.cpu_us))
        fc->hipd = cost.cpu_us;
      else
        snprintf(fc->na, sizeof(fc->na), "no kernel ran");
      if (hb.listener_pid <= 0)
        detail_str(fc, "daemon", "not counted: its pid is unknown");
    } else {
      fig_fail(f, "%s", err);
      snprintf(fc->na, sizeof(fc->na), "%s failed", f->name);
    }
    share_socket(devs, ndevs, n, suffix, dl, f, fc);
    if (hb.hipd_only)
      continue; /* --isolation-compare: hipd's figure alone */
    if (direct) {
      note("sharing: %d independent direct-HIP process%s", n,
           n == 1 ? "" : "es");
      if (share_direct(devs, ndevs, n, NULL, NULL, NULL, &agg, &lo, &cost, err,
                       sizeof(err)) == 0) {
        base_set(f, "direct", "independent direct-HIP processes", agg);
        detail_num(f, "direct_slowest_client", lo);
        detail_num(f, "direct_threads", (double)cost.threads);
        base_set(fc, "direct", "independent direct-HIP processes", cost.cpu_us);
      } else {
        base_na(f, "direct", "independent direct-HIP processes",
                "direct_hip workers failed: %s", err);
        base_na(fc, "direct", "independent direct-HIP processes",
                "direct_hip workers failed");
        report_failure();
      }
    } else {
      base_na(f, "direct", "independent direct-HIP processes", "%s", why);
      base_na(fc, "direct", "independent direct-HIP processes", "%s", why);
    }
    if (n == 1 && isfinite(fc->hipd))
      base_target(fc, "direct", "<=", 2.0);
    hb_share_mps_later(f, devs, ndevs, n, NULL);
    if (hb.nshares > 0 && hb.shares[hb.nshares - 1].fig == f)
      hb.shares[hb.nshares - 1].cpu_fig = fc;
    if (n == 16) {
      base_target(f, "direct", ">=", 2.0);
    }
  }
}

/* ----------------------------------------------------------------- idle */

/* The run time (schedstat: nanoseconds, where /proc/PID/stat counts
 * 10 ms ticks, so that one tick would read 0.5 % over 2 s) of hb.listener_pid's
 * tree between two profiles @p a (@p na names) and @p b (@p nb), by
 * thread name; a group that shrank (a worker that exited) counts 0. Its
 * threads into *@p threads. */
static uint64_t daemon_cpu_between(const tprof_t *a, int na, const tprof_t *b,
                                   int nb, long *threads)
{
  static uint64_t delta[PROFILE_MAX];
  uint64_t ns = procs_profile_between(a, na, b, nb, delta, threads);

  /* Who it was, when it was anyone: idle should be nobody. */
  for (int i = 0; i < nb; i++)
    if (delta[i] >= 100000)
      note("idle: %s used %.2f ms", b[i].name, (double)delta[i] / 1e6);
  return ns;
}

/* The same window in a direct-HIP process that holds a context, a stream
 * and a module after one kernel: what the runtime's own threads cost any
 * process that keeps a device open. */
static void idle_direct(figure_t *f, double window, int contexts)
{
  static const char label[] = "a direct HIP process idle with a context";
  char many[96];
  const char *why;
  char ord[16], secs[32];
  const char *args[] = {"idle", "--device", NULL, "--seconds", secs, NULL};
  dout_t *out;
  const char *line;

  if (hb.devs[hb.dev].is_cpu || !hb_direct_ok(hb.dev, &why)) {
    base_na(f, "direct", label, "%s",
            hb.devs[hb.dev].is_cpu ? "the device is the CPU" : why);
    return;
  }
  args[2] = hb_itoa_tmp(hb.devs[hb.dev].hip_ord, ord, sizeof(ord));
  snprintf(secs, sizeof(secs), "%g", window);
  note("idle: a direct HIP process's CPU over %g s", window);
  if ((out = malloc(sizeof(*out))) == NULL) {
    base_na(f, "direct", label, "out of memory");
    return;
  }
  if (hb_direct_run(args, 60, "idle", out) == 0 &&
      (line = hb_dout_find(out, "idle")) != NULL &&
      isfinite(hb_dnum(line, "cpu_pct"))) {
    base_set(f, "direct", label, hb_dnum(line, "cpu_pct"));
    /* hipd's workers linger idle (--worker-linger) with their GPU
     * contexts, each with the runtime's own threads, as that many
     * direct processes would. */
    if (contexts > 1) {
      snprintf(many, sizeof(many),
               "%d direct HIP processes idle with a context each", contexts);
      base_set(f, "direct_contexts", many,
               hb_dnum(line, "cpu_pct") * (double)contexts);
    }
    note("idle: direct HIP: %s", line);
  } else {
    base_na(f, "direct", label, "direct_hip failed: %s",
            out->err[0] ? out->err : "no value");
    report_failure();
  }
  free(out);
}

/* See hipd_bench.h. */
void hb_sec_idle(void)
{
  figure_t *f = fig_new(
      "idle_cpu", "idle: hipd's CPU (% of one core) with no client at work",
      "%", 1);
  double window = hb.share_seconds, t0;
  static tprof_t pa[PROFILE_MAX], pb[PROFILE_MAX];
  pinfo_t *ps;
  long threads;
  int na, nb, np, contexts = 0;

  snprintf(f->how, sizeof(f->how),
           "after the sharing runs, with only the bench's own connection "
           "open and idle: run time (schedstat) of every thread of the "
           "listener and every process below it over %g s, after 1 s to "
           "settle, by thread name (a worker that exits meanwhile is not "
           "counted) (issue 22's goal: 0)",
           window);
  if (hb.listener_pid <= 0) {
    snprintf(f->na, sizeof(f->na), "the daemon's pid is not known");
    return;
  }
  ps = malloc(sizeof(*ps) * PROCS_MAX);
  if (ps == NULL) {
    snprintf(f->na, sizeof(f->na), "out of memory");
    return;
  }
  note("idle: hipd's CPU over %g s", window);
  bu_sleep(1.0);
  t0 = bu_now();
  np = procs_survey(ps, PROCS_MAX);
  na = procs_thread_profile(ps, np, hb.listener_pid, NULL, 0, pa, PROFILE_MAX);
  bu_sleep(window);
  np = procs_survey(ps, PROCS_MAX);
  nb = procs_thread_profile(ps, np, hb.listener_pid, NULL, 0, pb, PROFILE_MAX);
  f->hipd = (double)daemon_cpu_between(pa, na, pb, nb, &threads) / 1e9 /
            (bu_now() - t0) * 100.0;
  detail_num(f, "threads", (double)threads);
  /* The GPU contexts alive: CUDA's event thread, one a context. */
  for (int i = 0; i < nb; i++) {
    const char *slash = strrchr(pb[i].name, '/');

    if (slash != NULL && strcmp(slash + 1, "cuda-EvtHandlr") == 0)
      contexts += pb[i].threads;
  }
  detail_num(f, "gpu_contexts", (double)contexts);
  free(ps);
  idle_direct(f, window, contexts);
}

/* ------------------------------------------------------------------ MPS */

/* While MPS clients run: does the control daemon have a server (are they
 * on MPS at all)? */
static void mps_check(void *arg)
{
  int *seen = arg;

  bu_sleep(hb.share_seconds / 4);
  if (mps_has_server())
    *seen = 1;
}

/* See hipd_bench.h. */
void hb_share_mps_later(figure_t *f, const int *devs, int ndevs, int n,
                        const char *label)
{
  share_run_t *s;

  if (hb.nshares == (int)(sizeof(hb.shares) / sizeof(hb.shares[0]))) {
    base_na(f, "mps", label ? label : "the same processes under NVIDIA MPS",
            "not measured: too many sharing runs");
    return;
  }
  s = &hb.shares[hb.nshares++];
  memset(s, 0, sizeof(*s));
  s->fig = f;
  memcpy(s->devs, devs, sizeof(int) * (size_t)ndevs);
  s->ndevs = ndevs;
  s->n = n;
  snprintf(s->label, sizeof(s->label), "%s",
           label ? label : "the same processes under NVIDIA MPS");
}

/* An earlier run, already measured, of the same clients on the same
 * devices as @p s, or NULL. */
static const share_run_t *share_measured_like(const share_run_t *s)
{
  for (const share_run_t *o = hb.shares; o < s; o++)
    if (o->done && o->n == s->n && o->ndevs == s->ndevs &&
        memcmp(o->devs, s->devs, sizeof(int) * (size_t)s->ndevs) == 0)
      return o;
  return NULL;
}

void hb_share_mps(void)
{
  char na[300] = "", err[600];
  const char *why;

  if (hb.nshares == 0)
    return;
  if (hb.devs[hb.shares[0].devs[0]].is_cpu)
    snprintf(na, sizeof(na), "not applicable on the CPU device");
  else if (strcmp(hb.devs[hb.shares[0].devs[0]].platform, "nvidia") != 0)
    snprintf(na, sizeof(na), "MPS is NVIDIA's; this device is %s",
             hb.devs[hb.shares[0].devs[0]].platform);
  else if (hb.no_mps)
    snprintf(na, sizeof(na), "not measured (--no-mps)");
  else if (mps_find() != 0)
    snprintf(na, sizeof(na),
             "nvidia-cuda-mps-control is not on PATH: MPS not available");
  else if (mps_start(hb.tmp, err, sizeof(err)) != 0)
    snprintf(na, sizeof(na), "MPS did not start: %.250s", err);
  for (int i = 0; i < hb.nshares; i++) {
    share_run_t *s = &hb.shares[i];
    const share_run_t *same = share_measured_like(s);
    hb_cost_t cost = {NAN, -1};
    double agg, lo;
    int direct = 1;

    s->mps = s->mps_lo = s->mps_cpu = NAN;
    for (int j = 0; j < s->ndevs && direct; j++)
      direct = hb_direct_ok(s->devs[j], &why);
    if (na[0] != '\0') {
      snprintf(s->mps_na, sizeof(s->mps_na), "%s", na);
    } else if (!direct) {
      snprintf(s->mps_na, sizeof(s->mps_na), "%s", why);
    } else if (same != NULL) {
      /* The same processes were measured for another figure: reuse. */
      s->mps = same->mps;
      s->mps_lo = same->mps_lo;
      s->mps_seen = same->mps_seen;
      s->mps_cpu = same->mps_cpu;
      snprintf(s->mps_na, sizeof(s->mps_na), "%s", same->mps_na);
      detail_str(s->fig, "mps_measured_for", same->fig->name);
    } else {
      note("sharing: %d direct-HIP process%s under MPS", s->n,
           s->n == 1 ? "" : "es");
      int seen = 0;

      if (share_direct(s->devs, s->ndevs, s->n, mps_env(), mps_check, &seen,
                       &agg, &lo, &cost, err, sizeof(err)) == 0) {
        s->mps_cpu = cost.cpu_us;
        s->mps = agg;
        s->mps_lo = lo;
        s->mps_seen = seen;
        if (!seen)
          note("MPS: get_server_list named no server during the run: the "
               "clients may not have used MPS");
      } else {
        snprintf(s->mps_na, sizeof(s->mps_na),
                 "direct_hip workers under MPS failed: %.190s", err);
        report_failure();
      }
    }
    s->done = 1;
    if (isfinite(s->mps)) {
      base_set(s->fig, "mps", s->label, s->mps);
      detail_num(s->fig, "mps_slowest_client", s->mps_lo);
      detail_str(s->fig, "mps_server_seen", s->mps_seen ? "yes" : "no");
    } else {
      base_na(s->fig, "mps", s->label, "%s", s->mps_na);
    }
    if (s->n == 16 && (strncmp(s->fig->name, "share_", 6) == 0 ||
                       strstr(s->fig->name, "_each") != NULL))
      base_target(s->fig, "mps", ">=", 1.0);
    if (s->cpu_fig != NULL) {
      if (isfinite(s->mps_cpu))
        base_set(s->cpu_fig, "mps", s->label, s->mps_cpu);
      else
        base_na(s->cpu_fig, "mps", s->label, "%s", s->mps_na);
      if (s->n == 16 && isfinite(s->cpu_fig->hipd) && isfinite(s->mps_cpu))
        base_target(s->cpu_fig, "mps", "<=", 2.0);
    }
  }
  if (mps_active())
    mps_stop();
}

/* ------------------------------------------------ 7. GPU-to-GPU copies */

void hb_sec_peer(int a, int b)
{
  char name[64], title[96], label[32];
  figure_t *f;
  hipd_buffer_t src = HIPD_BUFFER_NULL, dst = HIPD_BUFFER_NULL;
  const char *why = NULL;
  uint64_t len = hb.peer_bytes;
  int rc, n = 0;

  bu_size_label(len, label, sizeof(label));
  snprintf(name, sizeof(name), "peer_copy_%d_to_%d_%s", a, b, label);
  snprintf(title, sizeof(title), "device %d -> device %d copy of %s", a, b,
           label);
  f = fig_new(name, title, "GB/s", 0);
  snprintf(f->devices, sizeof(f->devices), "%d,%d", a, b);
  f->device = a;
  snprintf(f->how, sizeof(f->how),
           "synchronous mem.copy between buffers on the two devices, "
           "repeated for at least %g s",
           hb.bw_budget);
  note("peer copy: hipd, device %d -> %d", a, b);
  if ((rc = hipd_mem_alloc(hb.conn, a, len, "byte", &src)) != 0 ||
      (rc = hipd_mem_alloc(hb.conn, b, len, "byte", &dst)) != 0) {
    hb_hfail(f, hb.conn, "mem.alloc", rc);
  } else if ((rc = hipd_mem_memset(hb.conn, src, 0, len, 7)) != 0 ||
             (rc = hipd_mem_copy(hb.conn, dst, 0, src, 0, len)) != 0) {
    hb_hfail(f, hb.conn, "mem.copy", rc);
  } else {
    double t0 = bu_now(), t;

    do {
      if ((rc = hipd_mem_copy(hb.conn, dst, 0, src, 0, len)) != 0) {
        hb_hfail(f, hb.conn, "mem.copy", rc);
        break;
      }
      n++;
      t = bu_now() - t0;
    } while (t < hb.bw_budget || n < 3);
    if (rc == 0)
      f->hipd = (double)len * n / t / 1e9;
  }
  if (hipd_buffer_id(src))
    hipd_mem_free(hb.conn, src);
  if (hipd_buffer_id(dst))
    hipd_mem_free(hb.conn, dst);

  if (hb_direct_ok(a, &why) && hb_direct_ok(b, &why)) {
    char oa[16], ob[16], bytes[32], budget[32];
    const char *args[] = {"peer",
                          "--device",
                          hb_itoa_tmp(hb.devs[a].hip_ord, oa, sizeof(oa)),
                          "--peer",
                          hb_itoa_tmp(hb.devs[b].hip_ord, ob, sizeof(ob)),
                          "--bytes",
                          bytes,
                          "--budget",
                          budget,
                          NULL};
    double access = NAN;

    snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)len);
    snprintf(budget, sizeof(budget), "%g", hb.bw_budget);
    note("peer copy: direct hipMemcpyPeerAsync");
    if (isfinite(hb_direct_baseline(f, "direct",
                                    "direct hipMemcpyPeerAsync + sync", args,
                                    "peer", "gbps", "peer_access", &access)))
      detail_num(f, "direct_peer_access", access);
  } else {
    base_na(f, "direct", "direct hipMemcpyPeerAsync + sync", "%s", why);
  }
}
