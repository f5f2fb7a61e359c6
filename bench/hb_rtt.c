/* SPDX-License-Identifier: MIT */
/* bench/hb_rtt.c: the kernels a client runs through hipd (hk_t), and
 * sections 1 (the synchronous round trip) and 2 (async launch
 * throughput).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "kernels.h"
#include "sockbench.h"

#define LAUNCH_WINDOW 128 /* launches in flight (hipd_bench's own cap) */

/* ------------------------------------------------------- hipd, the client */

static int hk_fail(hk_t *h, const char *what, int rc)
{
  if (h->err[0] == '\0')
    snprintf(h->err, sizeof(h->err), "%s: %s: %s", what, hipd_err_name(rc),
             hipd_last_error(h->c));
  return rc;
}

/* Compile (through the cache) and set up the empty kernel, or with
 * @p elems > 0 the small one over that many floats, on @p dev. */
int hb_hk_open(hk_t *h, hipd_conn_t *c, int dev, int elems)
{
  int rc;

  memset(h, 0, sizeof(*h));
  h->c = c;
  h->grid[0] = h->grid[1] = h->grid[2] = 1;
  h->block[0] = h->block[1] = h->block[2] = 1;
  if ((h->args = hipd_args_new()) == NULL)
    return hk_fail(h, "hipd_args_new", HIPD_ENOMEM);
  if (elems > 0) {
    rc = hipd_kernel_compile_cached(c, dev, BENCH_SMALL_SOURCE,
                                    BENCH_SMALL_NAME, NULL, &h->k, NULL);
    if (rc != 0)
      return hk_fail(h, "kernel.compile_cached (small kernel)", rc);
    if ((rc = hipd_mem_alloc(c, dev, (uint64_t)elems, "float32", &h->buf)))
      return hk_fail(h, "mem.alloc", rc);
    if ((rc = hipd_mem_memset(c, h->buf, 0, sizeof(float) * (size_t)elems, 0)))
      return hk_fail(h, "mem.memset", rc);
    hipd_args_buffer(h->args, h->buf, 0);
    hipd_args_i32(h->args, elems);
    h->grid[0] =
        (uint32_t)((elems + BENCH_SMALL_BLOCK - 1) / BENCH_SMALL_BLOCK);
    h->block[0] = BENCH_SMALL_BLOCK;
  } else {
    rc = hipd_kernel_compile_cached(c, dev, BENCH_EMPTY_SOURCE,
                                    BENCH_EMPTY_NAME, NULL, &h->k, NULL);
    if (rc != 0)
      return hk_fail(h, "kernel.compile_cached (empty kernel)", rc);
  }
  if ((rc = hipd_stream_create(c, dev, &h->s)) != 0)
    return hk_fail(h, "stream.create", rc);
  return 0;
}

void hb_hk_close(hk_t *h)
{
  if (hipd_stream_id(h->s))
    hipd_stream_destroy(h->c, h->s);
  if (hipd_buffer_id(h->buf))
    hipd_mem_free(h->c, h->buf);
  if (hipd_kernel_id(h->k))
    hipd_kernel_destroy(h->c, h->k);
  hipd_args_free(h->args);
  h->s = HIPD_STREAM_NULL;
  h->buf = HIPD_BUFFER_NULL;
  h->k = HIPD_KERNEL_NULL;
  h->args = NULL;
}

/* Wait for @p call (if any); the first failure is kept in h->err. */
static int hk_wait(hk_t *h, hipd_call_t *call, const char *what, int rc)
{
  int r;

  if (call == NULL)
    return rc;
  r = hipd_wait(call);
  if (r != 0 && rc == 0)
    rc = hk_fail(h, what, r);
  return rc;
}

/* Launch and synchronize as two pipelined requests written at once
 * (corked), their replies waited for together: one round trip.
 * @return 0 or a hipd code (h->err). */
static int hk_sync_corked(hk_t *h)
{
  hipd_call_t *lc = NULL, *sc = NULL;
  int rc, rc2;

  hipd_cork(h->c);
  rc = hipd_kernel_launch_begin(h->c, h->k, h->grid, h->block, 0, h->s, h->args,
                                &lc);
  if (rc != 0)
    hk_fail(h, "kernel.launch", rc);
  else if ((rc = hipd_stream_synchronize_begin(h->c, h->s, &sc)) != 0)
    hk_fail(h, "stream.synchronize", rc);
  rc2 = hipd_uncork(h->c);
  if (rc2 != 0 && rc == 0)
    rc = hk_fail(h, "uncork", rc2);
  rc = hk_wait(h, lc, "kernel.launch", rc);
  return hk_wait(h, sc, "stream.synchronize", rc);
}

/* The same as two plain calls: two round trips. */
static int hk_sync_calls(hk_t *h)
{
  int rc = hipd_kernel_launch(h->c, h->k, h->grid, h->block, 0, h->s, h->args);

  if (rc != 0)
    return hk_fail(h, "kernel.launch", rc);
  if ((rc = hipd_stream_synchronize(h->c, h->s)) != 0)
    return hk_fail(h, "stream.synchronize", rc);
  return 0;
}

/* Launch the kernel and wait until it has run, the @p mode way (SYNC_*).
 * @return 0 or a hipd code (h->err). */
int hb_hk_launch_sync(hk_t *h, int mode)
{
  int rc;

  switch (mode) {
  case SYNC_CORKED:
    return hk_sync_corked(h);
  case SYNC_CALLS:
    return hk_sync_calls(h);
  default:
    rc = hipd_kernel_run(h->c, h->k, h->grid, h->block, 0, h->s, h->args);
    return rc != 0 ? hk_fail(h, "kernel.launch (wait)", rc) : 0;
  }
}

/* @p n launches with up to LAUNCH_WINDOW in flight, corked so that they
 * leave in batches, then one synchronize. @return 0 or a hipd code. */
static int hk_launch_many(hk_t *h, int n)
{
  hipd_call_t *ring[LAUNCH_WINDOW] = {0};
  int rc = 0, rc2;

  hipd_cork(h->c);
  for (int i = 0; i < n && rc == 0; i++) {
    hipd_call_t **slot = &ring[i % LAUNCH_WINDOW];

    rc = hk_wait(h, *slot, "kernel.launch", rc);
    *slot = NULL;
    if (rc == 0 && (rc = hipd_kernel_launch_begin(h->c, h->k, h->grid, h->block,
                                                  0, h->s, h->args, slot)) != 0)
      hk_fail(h, "kernel.launch", rc);
  }
  rc2 = hipd_uncork(h->c);
  if (rc2 != 0 && rc == 0)
    rc = hk_fail(h, "uncork", rc2);
  for (int i = 0; i < LAUNCH_WINDOW; i++)
    rc = hk_wait(h, ring[i], "kernel.launch", rc);
  if (rc == 0 && (rc = hipd_stream_synchronize(h->c, h->s)) != 0)
    hk_fail(h, "stream.synchronize", rc);
  return rc;
}

/* ---------------------------------------------------- 1. sync round trip */

void hb_sec_rtt(void)
{
  figure_t *f =
      fig_new("sync_rtt", "sync round trip: empty kernel launch + synchronize",
              "us", 1);
  int iters = hb.rtt_iters, warm = hb.rtt_warmup, iters2 = iters / 4 + 1;
  double *us = malloc(sizeof(double) * (size_t)iters);
  double sock_med = NAN, sock_mean, direct = NAN;
  const char *why;
  char err[300];
  hk_t h;

  snprintf(f->how, sizeof(f->how), "median of %d: %s", iters,
           hb_sync_how[hb.sync_mode]);
  if (us == NULL) {
    fig_fail(f, "out of memory");
    return;
  }
  note("sync round trip: hipd (%d iterations)", iters);
  if (hb_hk_open(&h, hb.conn, hb.dev, 0) != 0) {
    fig_fail(f, "%s", h.err);
  } else {
    int rc = 0;

    for (int i = 0; i < warm && rc == 0; i++)
      rc = hb_hk_launch_sync(&h, hb.sync_mode);
    for (int i = 0; i < iters && rc == 0; i++) {
      double t0 = bu_now();

      rc = hb_hk_launch_sync(&h, hb.sync_mode);
      us[i] = (bu_now() - t0) * 1e6;
    }
    if (rc == 0) {
      detail_num(f, "hipd_mean_us", bu_mean(us, (size_t)iters));
      f->hipd = bu_median(us, (size_t)iters);
      detail_num(f, "hipd_p10_us", bu_quantile(us, (size_t)iters, 0.1));
      detail_num(f, "hipd_p90_us", bu_quantile(us, (size_t)iters, 0.9));
      detail_str(f, "hipd_sync", hb_sync_names[hb.sync_mode]);
    }
    /* For reference: the other ways to wait for a kernel, and hipd's
     * ping, each the median of a quarter as many. */
    for (int m = 0; m < SYNC_MODES && rc == 0; m++) {
      char key[40];

      if (m == hb.sync_mode)
        continue;
      for (int i = 0; i < iters2 && rc == 0; i++) {
        double t0 = bu_now();

        rc = hb_hk_launch_sync(&h, m);
        us[i] = (bu_now() - t0) * 1e6;
      }
      snprintf(key, sizeof(key), "hipd_%s_us", hb_sync_names[m]);
      if (rc == 0)
        detail_num(f, key, bu_median(us, (size_t)iters2));
    }
    for (int i = 0; i < iters2 && rc == 0; i++) {
      char echo[64] = {0};
      size_t len;
      double t0 = bu_now();

      if ((rc = hipd_ping(hb.conn, echo, 64, echo, sizeof(echo), &len)) != 0)
        hk_fail(&h, "ping", rc);
      us[i] = (bu_now() - t0) * 1e6;
    }
    if (rc == 0)
      detail_num(f, "hipd_ping_64B_us", bu_median(us, (size_t)iters2));
    if (rc != 0)
      fig_fail(f, "%s", h.err);
  }
  hb_hk_close(&h);
  if (hb.hipd_only) { /* --isolation-compare: hipd's figure alone */
    free(us);
    return;
  }

  note("sync round trip: bare socket ping-pong");
  if (sock_pingpong(64, iters, warm, &sock_med, &sock_mean, err, sizeof(err)) ==
      0)
    base_set(f, "socket", "bare Unix socket ping-pong, 64 B", sock_med);
  else if (report_failure())
    base_na(f, "socket", "bare Unix socket ping-pong, 64 B", "failed: %s", err);

  if (hb_direct_ok(hb.dev, &why)) {
    char ord[16], n[16], w[16];
    const char *args[] = {
        "rtt",
        "--device",
        hb_itoa_tmp(hb.devs[hb.dev].hip_ord, ord, sizeof(ord)),
        "--iters",
        hb_itoa_tmp(iters, n, sizeof(n)),
        "--warmup",
        hb_itoa_tmp(warm, w, sizeof(w)),
        NULL};

    note("sync round trip: direct HIP");
    direct =
        hb_direct_baseline(f, "direct", "direct HIP (same kernel, same device)",
                           args, "rtt", "us_median", NULL, NULL);
  } else {
    base_na(f, "direct", "direct HIP (same kernel, same device)", "%s", why);
  }
  if (isfinite(direct) && isfinite(sock_med))
    base_set(f, "direct+socket", "direct HIP + socket ping-pong",
             direct + sock_med);
  else
    base_na(f, "direct+socket", "direct HIP + socket ping-pong",
            "needs both the direct and the socket baseline");
  base_target(f, "direct+socket", "<=", 1.3);
  free(us);
}

/* ------------------------------------------- 2. async launch throughput */

void hb_sec_launch(void)
{
  figure_t *f =
      fig_new("launch_throughput", "async launch throughput, empty kernel",
              "launches/s", 0);
  int n = hb.launch_iters;
  double rate[3];
  const char *why;
  hk_t h;

  snprintf(f->how, sizeof(f->how),
           "median of 3 batches of %d kernel.launch_begin (at most %d in "
           "flight, corked) + one stream.synchronize",
           n, LAUNCH_WINDOW);
  note("launch throughput: hipd (3 x %d launches)", n);
  if (hb_hk_open(&h, hb.conn, hb.dev, 0) != 0) {
    fig_fail(f, "%s", h.err);
  } else if (hk_launch_many(&h, hb.rtt_warmup) != 0) {
    fig_fail(f, "%s", h.err);
  } else {
    int r;

    for (r = 0; r < 3; r++) {
      double t0 = bu_now();

      if (hk_launch_many(&h, n) != 0) {
        fig_fail(f, "%s", h.err);
        break;
      }
      rate[r] = n / (bu_now() - t0);
    }
    if (r == 3)
      f->hipd = bu_median(rate, 3);
  }
  hb_hk_close(&h);
  if (hb.hipd_only)
    return; /* --isolation-compare: hipd's figure alone */

  if (hb_direct_ok(hb.dev, &why)) {
    char ord[16], s[16], w[16];
    const char *args[] = {
        "launch",
        "--device",
        hb_itoa_tmp(hb.devs[hb.dev].hip_ord, ord, sizeof(ord)),
        "--iters",
        hb_itoa_tmp(n, s, sizeof(s)),
        "--warmup",
        hb_itoa_tmp(hb.rtt_warmup, w, sizeof(w)),
        NULL};

    note("launch throughput: direct HIP");
    hb_direct_baseline(f, "direct", "direct HIP (same kernel, same device)",
                       args, "launch", "per_s", NULL, NULL);
  } else {
    base_na(f, "direct", "direct HIP (same kernel, same device)", "%s", why);
  }
  base_target(f, "direct", ">=", 0.75);
}
