/* SPDX-License-Identifier: MIT */
/* bench/hb_bw.c: section 3, bandwidth: host to device and back through
 * hipd's shared buffers and inline payloads, against direct pinned and
 * pageable copies and a bare socket (a memcpy on the CPU device).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "sockbench.h"

/* ------------------------------------------------------- 3. bandwidth */

enum { XFER_SHM, XFER_INLINE, XFER_MEMCPY };

typedef struct {
  hipd_conn_t *c;
  hipd_buffer_t buf;
  hipd_shm_t *shm;
  void *host;  /* the inline payload's memory */
  void *host2; /* memcpy's other side */
  size_t len;
  int mode; /* XFER_* */
  int d2h;
  char err[600];
} xfer_t;

static int xfer_once(xfer_t *x)
{
  int rc;
  const char *what;

  switch (x->mode) {
  case XFER_SHM:
    what = x->d2h ? "mem.read_shm" : "mem.write_shm";
    rc = x->d2h ? hipd_mem_read_shm(x->c, x->buf, 0, x->shm, 0, x->len)
                : hipd_mem_write_shm(x->c, x->buf, 0, x->shm, 0, x->len);
    break;
  case XFER_INLINE:
    what = x->d2h ? "mem.read" : "mem.write";
    rc = x->d2h ? hipd_mem_read(x->c, x->buf, 0, x->host, x->len)
                : hipd_mem_write(x->c, x->buf, 0, x->host, x->len);
    break;
  default:
    memcpy(x->d2h ? x->host : x->host2, x->d2h ? x->host2 : x->host, x->len);
    return 0;
  }
  if (rc != 0)
    snprintf(x->err, sizeof(x->err), "%s of %zu bytes: %s: %s", what, x->len,
             hipd_err_name(rc), hipd_last_error(x->c));
  return rc;
}

/* Transfers repeated for at least hb.bw_budget seconds and 3 times, after
 * one untimed. @return GB/s (10^9 bytes/s), or NAN (x->err says why). */
static double xfer_rate(xfer_t *x)
{
  double t0, t;
  int n = 0;

  if (xfer_once(x) != 0)
    return NAN;
  t0 = bu_now();
  do {
    if (xfer_once(x) != 0)
      return NAN;
    n++;
    t = bu_now() - t0;
  } while (t < hb.bw_budget || n < 3);
  return (double)x->len * n / t / 1e9;
}

/* A pattern through shm into the device and back inline, and the other
 * way: the figures measure real transfers of the right bytes. */
static int xfer_check(xfer_t *x, unsigned char *shm_mem)
{
  unsigned char *host = x->host;
  int rc;

  for (size_t i = 0; i < x->len; i++)
    shm_mem[i] = (unsigned char)(i * 7 + 3);
  memset(host, 0, x->len);
  if ((rc = hipd_mem_write_shm(x->c, x->buf, 0, x->shm, 0, x->len)) != 0 ||
      (rc = hipd_mem_read(x->c, x->buf, 0, host, x->len)) != 0)
    goto fail;
  if (memcmp(host, shm_mem, x->len) != 0) {
    snprintf(x->err, sizeof(x->err),
             "data check: mem.write_shm then mem.read returned other bytes");
    return -1;
  }
  for (size_t i = 0; i < x->len; i++)
    host[i] = (unsigned char)(i * 13 + 5);
  if ((rc = hipd_mem_write(x->c, x->buf, 0, host, x->len)) != 0 ||
      (rc = hipd_mem_read_shm(x->c, x->buf, 0, x->shm, 0, x->len)) != 0)
    goto fail;
  if (memcmp(host, shm_mem, x->len) != 0) {
    snprintf(x->err, sizeof(x->err),
             "data check: mem.write then mem.read_shm returned other bytes");
    return -1;
  }
  return 0;
fail:
  snprintf(x->err, sizeof(x->err), "data check: %s: %s", hipd_err_name(rc),
           hipd_last_error(x->c));
  return -1;
}

void hb_sec_bw(void)
{
  figure_t *figs[MAX_SIZES][2][2]; /* [size][d2h][inline] */
  dout_t *out = NULL;
  const char *why = NULL;
  int cpu = hb.devs[hb.dev].is_cpu;
  int direct = hb_direct_ok(hb.dev, &why), direct_failed = 0;

  if (direct) {
    char ord[16], sizes[256] = "", budget[32];
    const char *args[] = {"bw",  "--device", ord,    "--sizes",
                          sizes, "--budget", budget, NULL};

    hb_itoa_tmp(hb.devs[hb.dev].hip_ord, ord, sizeof(ord));
    for (int i = 0; i < hb.nsizes; i++)
      snprintf(sizes + strlen(sizes), sizeof(sizes) - strlen(sizes), "%s%llu",
               i ? "," : "", (unsigned long long)hb.sizes[i]);
    snprintf(budget, sizeof(budget), "%g", hb.bw_budget);
    note("bandwidth: direct HIP, pinned, pageable and registered");
    out = malloc(sizeof(*out));
    if (out == NULL || hb_direct_run(args, 600, "bw", out) != 0) {
      direct_failed = 1;
      report_failure();
    }
  }
  for (int si = 0; si < hb.nsizes; si++) {
    uint64_t size = hb.sizes[si];
    char label[32], name[48], title[96], shm_err[600] = "";
    xfer_t x;
    int rc, ok = 1, shm_ok = 1;

    bu_size_label(size, label, sizeof(label));
    for (int d2h = 0; d2h < 2; d2h++)
      for (int inl = 0; inl < 2; inl++) {
        figure_t *f;

        snprintf(name, sizeof(name), "%s_%s_%s", d2h ? "d2h" : "h2d",
                 inl ? "inline" : "shm", label);
        snprintf(title, sizeof(title), "%s %s, hipd %s", d2h ? "D2H" : "H2D",
                 label,
                 inl ? (d2h ? "inline payload (mem.read)"
                            : "inline payload (mem.write)")
                     : (d2h ? "shared buffer (mem.read_shm)"
                            : "shared buffer (mem.write_shm)"));
        f = figs[si][d2h][inl] = fig_new(name, title, "GB/s", 0);
        snprintf(f->how, sizeof(f->how),
                 "synchronous %s of %s repeated for at least %g s",
                 inl ? (d2h ? "mem.read" : "mem.write")
                     : (d2h ? "mem.read_shm" : "mem.write_shm"),
                 label, hb.bw_budget);
        detail_num(f, "bytes", (double)size);
      }
    note("bandwidth: hipd at %s", label);
    memset(&x, 0, sizeof(x));
    x.c = hb.conn;
    x.len = (size_t)size;
    x.host = malloc(x.len);
    if (x.host == NULL) {
      snprintf(x.err, sizeof(x.err), "out of memory for %s", label);
      ok = 0;
    } else if ((rc = hipd_mem_alloc(hb.conn, hb.dev, size, "byte", &x.buf))) {
      snprintf(x.err, sizeof(x.err), "mem.alloc of %s: %s: %s", label,
               hipd_err_name(rc), hipd_last_error(hb.conn));
      ok = 0;
    } else if ((rc = hipd_shm_create(hb.conn, x.len, &x.shm)) != 0) {
      snprintf(shm_err, sizeof(shm_err), "shm.create of %s: %s: %s", label,
               hipd_err_name(rc), hipd_last_error(hb.conn));
      shm_ok = 0; /* the inline figures go on */
    } else if (xfer_check(&x, hipd_shm_ptr(x.shm)) != 0) {
      ok = 0;
    }
    for (int d2h = 0; d2h < 2; d2h++)
      for (int inl = 0; inl < 2; inl++) {
        figure_t *f = figs[si][d2h][inl];

        if (!ok || (!inl && !shm_ok)) {
          fig_fail(f, "%s", ok ? shm_err : x.err);
          continue;
        }
        x.mode = inl ? XFER_INLINE : XFER_SHM;
        x.d2h = d2h;
        x.err[0] = '\0';
        if (!isfinite(f->hipd = xfer_rate(&x)))
          fig_fail(f, "%s", x.err);
      }
    if (x.shm != NULL)
      hipd_shm_free(hb.conn, x.shm);
    if (hipd_buffer_id(x.buf) != 0)
      hipd_mem_free(hb.conn, x.buf);

    /* The baselines of this size. */
    double sock = NAN, copy[2] = {NAN, NAN};
    char err[300] = "";

    note("bandwidth: socket and memcpy baselines at %s", label);
    if (sock_bulk(size, hb.bw_budget, &sock, err, sizeof(err)) != 0) {
      sock = NAN;
      report_failure();
    }
    if (cpu && x.host != NULL && (x.host2 = malloc(x.len)) != NULL) {
      memset(x.host2, 1, x.len);
      for (int d2h = 0; d2h < 2; d2h++) {
        x.mode = XFER_MEMCPY;
        x.d2h = d2h;
        copy[d2h] = xfer_rate(&x);
      }
      free(x.host2);
    }
    free(x.host);
    for (int d2h = 0; d2h < 2; d2h++)
      for (int inl = 0; inl < 2; inl++) {
        figure_t *f = figs[si][d2h][inl];
        const char *dir = d2h ? "d2h" : "h2d";
        static const char *const lab[] = {
            "direct HIP, pinned host memory",
            "direct HIP, pageable host memory",
            "direct HIP, registered shared memory"};
        static const char *const key[] = {"pinned", "pageable", "registered"};

        /* The registered baseline (a memfd page-locked as hipd's shared
         * buffers are) only next to the shared-buffer figures. */
        for (int m = 0; m < (inl ? 2 : 3); m++) {
          const char *line;
          double v;

          if (!direct)
            base_na(f, key[m], lab[m], "%s", why);
          else if (direct_failed)
            base_na(f, key[m], lab[m], "direct_hip failed: %s",
                    out ? out->err : "out of memory");
          else {
            line = NULL;
            for (int i = 0; i < out->n && line == NULL; i++) {
              const char *l = out->line[i];
              char mode[16] = "", d[8] = "";

              bu_json_get_str(l, "mode", mode, sizeof(mode));
              bu_json_get_str(l, "dir", d, sizeof(d));
              if (strcmp(mode, key[m]) == 0 && strcmp(d, dir) == 0 &&
                  hb_dnum(l, "bytes") == (double)size)
                line = l;
            }
            if (isfinite(v = hb_dnum(line, "gbps")))
              base_set(f, key[m], lab[m], v);
            else
              base_na(f, key[m], lab[m], "direct_hip printed no figure");
          }
        }
        if (inl) {
          if (isfinite(sock))
            base_set(f, "socket", "bare Unix socket, bulk", sock);
          else
            base_na(f, "socket", "bare Unix socket, bulk", "failed: %s", err);
        }
        if (cpu) {
          if (isfinite(copy[d2h]))
            base_set(f, "memcpy", "memcpy in this process", copy[d2h]);
          else
            base_na(f, "memcpy", "memcpy in this process", "failed");
        }
        if (!inl && size == (uint64_t)256 << 20) {
          base_target(f, "pinned", ">=", 0.9);
          base_target(f, "pageable", ">=", 5.0);
        }
      }
  }
  free(out);
}
