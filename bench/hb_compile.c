/* SPDX-License-Identifier: MIT */
/* bench/hb_compile.c: section 4, compile times: cold compiles and cache
 * hits (memory, loaded, disk), against a cold hiprtc compile.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "kernels.h"

/* ------------------------------------------------------------ 4. compile */

/* Where a compile's time went, as the daemon's reply says (ms):
 * compile_ms and its timing map (helper_ms and helper_cpu_ms are part of
 * compiler_ms: the compiler's call as its helper timed it). */
enum {
  PART_DAEMON,
  PART_WAIT,
  PART_COMPILER,
  PART_HELPER,
  PART_HELPER_CPU,
  PART_DISK,
  PART_LOAD,
  NPARTS
};
static const char *const part_names[NPARTS] = {
    "compile_ms",       "timing.wait_ms",       "timing.compiler_ms",
    "timing.helper_ms", "timing.helper_cpu_ms", "timing.disk_ms",
    "timing.load_ms"};

/* One compile request on hb.conn, timed from the client. @p cache gets
 * where the binary came from, @p parts (NULL: not wanted) the daemon's
 * parts of it. @return milliseconds, or NAN (f failed). */
static double compile_once_parts(figure_t *f, int cached, const char *src,
                                 const char *name, char *cache, size_t cachesz,
                                 double *parts)
{
  hipd_info_t *info = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  double t0 = bu_now(), ms;
  int rc =
      cached ? hipd_kernel_compile_cached(hb.conn, hb.dev, src, name, NULL, &k,
                                          &info)
             : hipd_kernel_compile(hb.conn, hb.dev, src, name, NULL, &k, &info);

  ms = (bu_now() - t0) * 1e3;
  if (rc != 0) {
    hb_hfail(f, hb.conn, cached ? "kernel.compile_cached" : "kernel.compile",
             rc);
    return NAN;
  }
  hb_info_strcpy(info, "cache", cache, cachesz);
  for (int i = 0; parts != NULL && i < NPARTS; i++)
    if (hipd_info_double(info, part_names[i], &parts[i]) != 0)
      parts[i] = NAN;
  hipd_info_free(info);
  if ((rc = hipd_kernel_destroy(hb.conn, k)) != 0) {
    hb_hfail(f, hb.conn, "kernel.destroy", rc);
    return NAN;
  }
  return ms;
}

static double compile_once(figure_t *f, int cached, const char *src,
                           const char *name, char *cache, size_t cachesz)
{
  return compile_once_parts(f, cached, src, name, cache, cachesz, NULL);
}

/* @p f's details: the median of each part of @p n compiles' time
 * (@p parts, NPARTS a compile), and a remark that splits the median. */
static void parts_report(figure_t *f, double *parts, int n)
{
  double med[NPARTS], *col = malloc(sizeof(double) * (size_t)n);

  if (col == NULL)
    return;
  for (int p = 0; p < NPARTS; p++) {
    for (int i = 0; i < n; i++)
      col[i] = parts[i * NPARTS + p];
    med[p] = bu_median(col, (size_t)n);
    detail_num(f, part_names[p], med[p]);
  }
  free(col);
  report_remark("%s: of the daemon's %.2f ms (medians): waiting for a "
                "helper %.2f, the compile %.2f (in the helper %.2f, its CPU "
                "%.2f), the disk %.2f, loading the module %.2f; the rest (the "
                "way to the cache and back) %.2f",
                f->name, med[PART_DAEMON], med[PART_WAIT], med[PART_COMPILER],
                med[PART_HELPER], med[PART_HELPER_CPU], med[PART_DISK],
                med[PART_LOAD],
                med[PART_DAEMON] - med[PART_WAIT] - med[PART_COMPILER] -
                    med[PART_DISK] - med[PART_LOAD]);
}

/* Time @p n compiles of @p srcs (round robin) into @p f: the median, and
 * how many did not come from @p want (when not NULL), and where the
 * daemon's time went. @return 0 or -1. */
static int compile_series(figure_t *f, int cached, char **srcs, int nsrcs,
                          int n, const char *want)
{
  double *ms = malloc(sizeof(double) * (size_t)n);
  double *parts = malloc(sizeof(double) * (size_t)n * NPARTS);
  int other = 0;
  char cache[32], first_other[32] = "";

  if (ms == NULL || parts == NULL) {
    free(ms);
    free(parts);
    fig_fail(f, "out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    ms[i] = compile_once_parts(f, cached, srcs[i % nsrcs], BENCH_SMALL_NAME,
                               cache, sizeof(cache), &parts[i * NPARTS]);
    if (!isfinite(ms[i])) {
      free(ms);
      free(parts);
      return -1;
    }
    if (want != NULL && strcmp(cache, want) != 0 && other++ == 0)
      snprintf(first_other, sizeof(first_other), "%s", cache);
  }
  if (n <= 32) {
    /* In the order made, before the median sorts them: a first request's
     * cost beside a later one's. */
    char list[32 * 12] = "";
    size_t used = 0;

    for (int i = 0; i < n && used + 12 < sizeof(list); i++)
      used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%.4f",
                               i ? " " : "", ms[i]);
    note("%s: %s ms in order", f->name, list);
  }
  f->hipd = bu_median(ms, (size_t)n);
  detail_num(f, "samples", n);
  detail_num(f, "hipd_min_ms", ms[0]);
  detail_num(f, "hipd_max_ms", ms[n - 1]);
  if (want != NULL) {
    detail_num(f, "not_from_expected_tier", other);
    if (other > 0) {
      note("%s: %d of %d compiles came from '%s', not '%s'", f->name, other, n,
           first_other, want);
      detail_str(f, "unexpected_tier", first_other);
    }
  }
  parts_report(f, parts, n);
  free(ms);
  free(parts);
  return 0;
}

/* cache.stats' @p key, or -1. */
static int64_t cache_stat(const char *key)
{
  hipd_info_t *info = NULL;
  int64_t v = -1;

  if (hipd_cache_stats(hb.conn, &info) != 0 || hipd_info_int(info, key, &v))
    v = -1;
  hipd_info_free(info);
  return v;
}

/* The worker's preloads (cache.stats' preloaded: modules loaded on its
 * GPUs in the background, one at a time per device) until the count has
 * not moved for 0.2 s: the warm start's second half. At most 2 s; the
 * CPU device preloads nothing. */
static void preload_wait(void)
{
  int64_t last = cache_stat("preloaded");
  int still = 0;

  for (int i = 0; i < 200 && still < 20; i++) {
    int64_t now;

    bu_sleep(0.01);
    now = cache_stat("preloaded");
    still = now == last ? still + 1 : 0;
    last = now;
  }
}

/* Wait until the restarted daemon's warm start has loaded at least
 * @p want entries (cache.stats' warmed), or stopped loading, and then for
 * its worker's preloads. @return 0, or -1 after 10 s. */
static int warm_wait(int want)
{
  int64_t warmed = -1, last = -1;
  int still = 0;

  for (int i = 0; i < 1000; i++) {
    warmed = cache_stat("warmed");
    if (warmed >= want) {
      preload_wait();
      return 0;
    }
    /* Fewer entries than asked may fit its budget: stable for 0.2 s. */
    still = warmed == last && warmed > 0 ? still + 1 : 0;
    if (still >= 20) {
      preload_wait();
      return 0;
    }
    last = warmed;
    bu_sleep(0.01);
  }
  return -1;
}

/* The first request of a restarted daemon pays for its first session's
 * set-up, which is not part of figure @p f: one untimed compile of
 * another kernel, then @p n sources, each requested once, expected from
 * tier @p want. Two details place what a first request costs beyond a
 * later one: how many of them the worker answered from a module it had
 * loaded itself (cache.stats' hits_loaded; the others asked the
 * listener's cache), and the median of the same requests made again. */
static void restart_series(figure_t *f, char **srcs, int n, const char *want)
{
  double *again = malloc(sizeof(double) * (size_t)n);
  int64_t loaded;
  char cache[32];

  compile_once(f, 1, BENCH_EMPTY_SOURCE, BENCH_EMPTY_NAME, cache,
               sizeof(cache));
  loaded = cache_stat("hits_loaded");
  if (f->error[0] == '\0')
    compile_series(f, 1, srcs, n, n, want);
  if (f->error[0] == '\0' && loaded >= 0)
    detail_num(f, "from_loaded_module",
               (double)(cache_stat("hits_loaded") - loaded));
  /* A detail: its failure is noted, and the figure stands. */
  for (int i = 0; again != NULL && f->error[0] == '\0' && i < n; i++) {
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    double t0 = bu_now();
    int rc = hipd_kernel_compile_cached(hb.conn, hb.dev, srcs[i],
                                        BENCH_SMALL_NAME, NULL, &k, NULL);

    again[i] = (bu_now() - t0) * 1e3;
    if (rc == 0)
      rc = hipd_kernel_destroy(hb.conn, k);
    if (rc != 0) {
      note("%s: the same request again failed: %s", f->name, hipd_strerror(rc));
      free(again);
      again = NULL;
    }
  }
  if (again != NULL && f->error[0] == '\0')
    detail_num(f, "again_ms", bu_median(again, (size_t)n));
  free(again);
}

void hb_sec_compile(void)
{
  int nv = hb.compile_variants, hits = hb.compile_hits;
  char **srcs = calloc((size_t)nv, sizeof(char *));
  size_t len = strlen(BENCH_SMALL_SOURCE) + 96;
  figure_t *fc, *fm, *fl, *fd, *fw;
  const char *why;
  double hiprtc = NAN;
  char na[300] = "";

  fc = fig_new("compile_cold", "cold compile: hipd kernel.compile (no cache)",
               "ms", 1);
  fm = fig_new("compile_hit_memory",
               "cache hit in memory: kernel.compile_cached, the kernel "
               "destroyed each time",
               "ms", 1);
  fl = fig_new("compile_hit_memory_loaded",
               "cache hit in memory, module already loaded", "ms", 1);
  fw = fig_new("compile_hit_after_restart",
               "first request for a kernel after a daemon restart "
               "(--cache-warm: loaded back into memory at start)",
               "ms", 1);
  fd = fig_new("compile_hit_disk",
               "cache hit from disk after a daemon restart with "
               "--cache-warm 0",
               "ms", 1);
  fm->speedup = fl->speedup = fd->speedup = fw->speedup = 1;
  snprintf(fc->how, sizeof(fc->how),
           "median of %d kernel.compile of new sources (the small kernel and "
           "a distinct comment), client-side time",
           nv);
  snprintf(fm->how, sizeof(fm->how),
           "median of %d kernel.compile_cached of those sources, each kernel "
           "destroyed before the next (its module stays loaded, idle, in the "
           "worker, which answers from it without the cache)",
           hits);
  snprintf(fl->how, sizeof(fl->how),
           "median of %d kernel.compile_cached while this session keeps the "
           "kernel loaded",
           hits);
  snprintf(fw->how, sizeof(fw->how),
           "median of %d kernel.compile_cached of those sources after hipd "
           "was restarted on the same --cache-dir and its warm start ended",
           nv);
  snprintf(fd->how, sizeof(fd->how),
           "median of %d kernel.compile_cached of those sources after hipd "
           "was restarted on the same --cache-dir with --cache-warm 0",
           nv);
  if (srcs == NULL) {
    fig_fail(fc, "out of memory");
    return;
  }
  for (int i = 0; i < nv; i++) {
    if ((srcs[i] = malloc(len)) == NULL) {
      fig_fail(fc, "out of memory");
      goto out;
    }
    snprintf(srcs[i], len, "%s" BENCH_VARIANT_FMT, BENCH_SMALL_SOURCE,
             hb.run_id, i);
  }

  note("compile: hipd cold compiles (%d)", nv);
  if (compile_series(fc, 0, srcs, nv, nv, NULL) != 0) {
    fig_fail(fm, "the cold compiles failed");
    fig_fail(fl, "the cold compiles failed");
    fig_fail(fd, "the cold compiles failed");
    fig_fail(fw, "the cold compiles failed");
    goto baselines;
  }
  note("compile: hipd memory hits (%d)", hits);
  compile_series(fm, 1, srcs, nv, hits, "memory");
  {
    hipd_kernel_t keep = HIPD_KERNEL_NULL;
    int rc = hipd_kernel_compile_cached(hb.conn, hb.dev, srcs[0],
                                        BENCH_SMALL_NAME, NULL, &keep, NULL);
    if (rc != 0)
      hb_hfail(fl, hb.conn, "kernel.compile_cached", rc);
    else
      compile_series(fl, 1, srcs, 1, hits, "memory");
    if (hipd_kernel_id(keep))
      hipd_kernel_destroy(hb.conn, keep);
  }
  if (!hb.own_daemon) {
    snprintf(fd->na, sizeof(fd->na),
             "not measured: the daemon was given with --socket, and this "
             "figure restarts it");
    snprintf(fw->na, sizeof(fw->na), "%s", fd->na);
  } else {
    note("compile: restarting hipd for the first hits after a restart");
    if (hb_daemon_restart() != 0)
      fig_fail(fw, "could not restart hipd (see above)");
    else if (warm_wait(nv) == 0)
      restart_series(fw, srcs, nv, "memory");
    else
      fig_fail(fw, "its warm start did not end within 10 s");
    note("compile: restarting hipd with --cache-warm 0 for the disk hits");
    if (hb.ndaemon_args + 2 > MAX_DAEMON_ARGS) {
      fig_fail(fd, "too many --daemon-arg to add --cache-warm 0");
    } else {
      hb.daemon_args[hb.ndaemon_args++] = "--cache-warm";
      hb.daemon_args[hb.ndaemon_args++] = "0";
      if (hb_daemon_restart() != 0)
        fig_fail(fd, "could not restart hipd (see above)");
      else
        restart_series(fd, srcs, nv, "disk");
      /* The daemon as it was given, for the sections after this one. */
      hb.ndaemon_args -= 2;
      if (hb_daemon_restart() != 0)
        report_failure();
    }
  }

baselines:
  if (hb_direct_ok(hb.dev, &why)) {
    char ord[16], n[16];
    const char *args[] = {
        "compile",
        "--device",
        hb_itoa_tmp(hb.devs[hb.dev].hip_ord, ord, sizeof(ord)),
        "--iters",
        hb_itoa_tmp(nv, n, sizeof(n)),
        NULL};
    dout_t *out = malloc(sizeof(*out));
    const char *line;

    note("compile: direct hiprtc (%d)", nv);
    if (out != NULL && hb_direct_run(args, 600, "compile", out) == 0 &&
        (line = hb_dout_find(out, "compile")) != NULL &&
        isfinite(hiprtc = hb_dnum(line, "ms_median"))) {
      detail_num(fc, "hiprtc_compile_ms", hb_dnum(line, "compile_ms_median"));
      detail_num(fc, "hiprtc_compile_cpu_ms",
                 hb_dnum(line, "compile_cpu_ms_median"));
      detail_num(fc, "hiprtc_load_ms", hb_dnum(line, "load_ms_median"));
      detail_num(fc, "hiprtc_first_in_process_ms", hb_dnum(line, "first_ms"));
    } else {
      snprintf(na, sizeof(na), "direct_hip failed: %.250s",
               out == NULL   ? "out of memory"
               : out->err[0] ? out->err
                             : "no value");
      report_failure();
    }
    free(out);
  } else {
    snprintf(na, sizeof(na), "%s", why);
  }
  {
    figure_t *all[] = {fc, fm, fl, fd, fw};
    const char *lab = "cold hiprtc + module load, direct";

    for (int i = 0; i < 5; i++) {
      if (isfinite(hiprtc))
        base_set(all[i], "hiprtc", lab, hiprtc);
      else
        base_na(all[i], "hiprtc", lab, "%s", na);
      if (i > 0) {
        if (isfinite(fc->hipd))
          base_set(all[i], "hipd_cold", "cold compile through hipd", fc->hipd);
        else
          base_na(all[i], "hipd_cold", "cold compile through hipd",
                  "the cold compile failed");
      }
    }
    base_target(fm, "hiprtc", ">=", 500);
    base_target(fw, "hiprtc", ">=", 500);
  }
out:
  for (int i = 0; i < nv; i++)
    free(srcs[i]);
  free(srcs);
}
