/* SPDX-License-Identifier: MIT */
/* bench/hb_direct.c: the direct_hip runs that give the direct-HIP
 * baselines, and the discovery of the daemon's devices (and the HIP
 * ordinal of each).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "hipd_bench.h"

/* ---------------------------------------------------------- direct_hip */

/* Run direct_hip with @p args (the mode first; NULL-ended), collecting its
 * JSON lines, for @p timeout seconds at most; a line of kind @p want must
 * be among them. @return 0, or -1 with the reason in out->err. */
int hb_direct_run(const char *const *args, double timeout, const char *want,
                  dout_t *out)
{
  const char *argv[32];
  char line[512];
  double deadline = bu_now() + timeout;
  proc_t p;
  int n = 0, r, code;

  memset(out, 0, sizeof(*out));
  argv[n++] = hb.direct_bin;
  for (int i = 0; args[i] != NULL && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  if (proc_spawn(&p, argv, NULL, NULL, 0) != 0) {
    snprintf(out->err, sizeof(out->err), "cannot run %s: %s", hb.direct_bin,
             strerror(errno));
    return -1;
  }
  close(p.in_fd); /* only the worker mode reads its stdin */
  p.in_fd = -1;
  while ((r = proc_readline(&p, line, sizeof(line), deadline)) == 1) {
    char kind[32];

    if (bu_json_get_str(line, "kind", kind, sizeof(kind)) != 0)
      continue; /* not one of ours */
    if (out->n < DIRECT_LINES)
      snprintf(out->line[out->n++], sizeof(out->line[0]), "%s", line);
    if (strcmp(kind, "error") == 0)
      bu_json_get_str(line, "message", out->err, sizeof(out->err));
  }
  if (r < 0) {
    proc_kill(&p);
    snprintf(out->err, sizeof(out->err),
             "direct_hip %s gave no result within %.0f s (killed)", args[0],
             timeout);
    return -1;
  }
  code = proc_wait(&p, 15);
  if (code != 0) {
    if (out->err[0] == '\0')
      snprintf(out->err, sizeof(out->err), "direct_hip %s: exit status %d",
               args[0], code);
    return -1;
  }
  if (hb_dout_find(out, want) == NULL) {
    snprintf(out->err, sizeof(out->err), "direct_hip %s printed no %s result",
             args[0], want);
    return -1;
  }
  return 0;
}

/* The first line of @p kind in @p out, or NULL. */
const char *hb_dout_find(const dout_t *out, const char *kind)
{
  char buf[64];

  for (int i = 0; i < out->n; i++)
    if (bu_json_get_str(out->line[i], "kind", buf, sizeof(buf)) == 0 &&
        strcmp(buf, kind) == 0)
      return out->line[i];
  return NULL;
}

double hb_dnum(const char *line, const char *key)
{
  double v = NAN;

  if (line == NULL || bu_json_get_num(line, key, &v) != 0)
    return NAN;
  return v;
}

/*
 * Run direct_hip with @p args for the line of kind @p kind and make its
 * number @p field baseline @p id (@p label) of @p f. A failure marks the
 * baseline n/a with the reason and counts as a failed measurement. With
 * @p field2, *@p v2 gets that number of the same line. @return the value,
 * or NAN.
 */
double hb_direct_baseline(figure_t *f, const char *id, const char *label,
                          const char *const *args, const char *kind,
                          const char *field, const char *field2, double *v2)
{
  dout_t *out = malloc(sizeof(*out));
  const char *line = NULL;
  double v = NAN;

  if (out != NULL && hb_direct_run(args, 300, kind, out) == 0 &&
      (line = hb_dout_find(out, kind)) != NULL &&
      isfinite(v = hb_dnum(line, field))) {
    base_set(f, id, label, v);
    if (field2 != NULL)
      *v2 = hb_dnum(line, field2);
  } else {
    v = NAN;
    base_na(f, id, label, "direct_hip failed: %s",
            out == NULL   ? "out of memory"
            : out->err[0] ? out->err
                          : "no value");
    report_failure();
  }
  free(out);
  return v;
}

/* An integer field of a direct_hip line, or @p def. */
static int dint(const char *line, const char *key, int def)
{
  double v = hb_dnum(line, key);

  return isfinite(v) && v >= -2e9 && v <= 2e9 ? (int)v : def;
}

/* Is there a direct baseline on hipd device @p dev? If not, why not goes
 * to @p why. */
int hb_direct_ok(int dev, const char **why)
{
  if (dev < 0 || dev >= hb.ndevs) {
    *why = "no such device";
    return 0;
  }
  if (hb.devs[dev].hip_ord < 0) {
    *why = hb.devs[dev].na;
    return 0;
  }
  return 1;
}

const char *hb_itoa_tmp(int v, char *buf, size_t size)
{
  snprintf(buf, size, "%d", v);
  return buf;
}

/* ------------------------------------------------------------- discovery */

void hb_info_strcpy(const hipd_info_t *info, const char *path, char *out,
                    size_t size)
{
  const char *s = NULL;
  size_t len = 0;

  if (hipd_info_str(info, path, &s, &len) == 0)
    snprintf(out, size, "%.*s", (int)len, s);
  else
    snprintf(out, size, "?");
}

/* The daemon's identity and devices, then which HIP ordinal each of its
 * HIP devices is for direct_hip. @return 0 or -1. */
int hb_discover(void)
{
  hipd_info_t *info = NULL;
  dout_t *out;
  int rc, n, nhip = 0;

  if ((rc = hipd_hello(hb.conn, &info)) != 0) {
    note("hello: %s: %s", hipd_err_name(rc), hipd_last_error(hb.conn));
    return -1;
  }
  hb_info_strcpy(info, "version", hb.hipd_version, sizeof(hb.hipd_version));
  hb.features[0] = '\0';
  n = hipd_info_len(info, "features");
  for (int i = 0; i < n; i++) {
    char path[32], feat[32];

    snprintf(path, sizeof(path), "features.%d", i);
    hb_info_strcpy(info, path, feat, sizeof(feat));
    snprintf(hb.features + strlen(hb.features),
             sizeof(hb.features) - strlen(hb.features), "%s%s", i ? "," : "",
             feat);
  }
  hipd_info_free(info);

  if ((rc = hipd_device_list(hb.conn, &info)) != 0) {
    note("device.list: %s: %s", hipd_err_name(rc), hipd_last_error(hb.conn));
    return -1;
  }
  n = hipd_info_len(info, "");
  hb.ndevs = 0;
  for (int i = 0; i < n && i < MAX_DEVICES; i++) {
    devinfo_t *d = &hb.devs[hb.ndevs++];
    char path[64];
    int64_t v = -1;
    int b = 0;

    memset(d, 0, sizeof(*d));
    snprintf(path, sizeof(path), "%d.id", i);
    hipd_info_int(info, path, &v);
    d->id = (int)v;
    snprintf(path, sizeof(path), "%d.name", i);
    hb_info_strcpy(info, path, d->name, sizeof(d->name));
    snprintf(path, sizeof(path), "%d.driver", i);
    hb_info_strcpy(info, path, d->driver, sizeof(d->driver));
    snprintf(path, sizeof(path), "%d.platform", i);
    hb_info_strcpy(info, path, d->platform, sizeof(d->platform));
    snprintf(path, sizeof(path), "%d.arch", i);
    hb_info_strcpy(info, path, d->arch, sizeof(d->arch));
    snprintf(path, sizeof(path), "%d.is_cpu", i);
    hipd_info_bool(info, path, &b);
    d->is_cpu = b;
    snprintf(path, sizeof(path), "%d.capabilities.pci_bus_id", i);
    v = -1;
    hipd_info_int(info, path, &v);
    d->pci_bus = v;
    d->hip_ord = -1;
    if (d->is_cpu)
      snprintf(d->na, sizeof(d->na),
               "not applicable: the CPU device is hipd's own, there is no "
               "direct HIP on it");
    else if (strcmp(d->driver, "hip") != 0)
      snprintf(d->na, sizeof(d->na), "no direct baseline for driver '%.15s'",
               hb.devs[i].driver);
    else
      nhip++;
    if (d->id != i) {
      note("device.list: device %d has id %d", i, d->id);
      hipd_info_free(info);
      return -1;
    }
  }
  hipd_info_free(info);

  if (nhip == 0)
    return 0;
  if (hb.direct_bin[0] == '\0' || access(hb.direct_bin, X_OK) != 0) {
    snprintf(hb.direct_na, sizeof(hb.direct_na),
             "bench/direct_hip was not built (configure found no HIP)%s%.180s",
             hb.direct_bin[0] ? ": " : "", hb.direct_bin);
  } else {
    const char *args[] = {"info", NULL};
    const char *line;

    out = malloc(sizeof(*out));
    if (out == NULL)
      return -1;
    if (hb_direct_run(args, 120, "info", out) != 0) {
      snprintf(hb.direct_na, sizeof(hb.direct_na),
               "direct_hip info failed: %.200s", out->err);
    } else if ((line = hb_dout_find(out, "info")) != NULL) {
      char err[200] = "";
      int count = dint(line, "count", 0);

      bu_json_get_str(line, "platform", hb.platform, sizeof(hb.platform));
      bu_json_get_str(line, "hip_version", hb.hip_version,
                      sizeof(hb.hip_version));
      hb.runtime_version = (long long)hb_dnum(line, "runtime_version");
      hb.driver_version = (long long)hb_dnum(line, "driver_version");
      bu_json_get_str(line, "error", err, sizeof(err));
      if (count <= 0)
        snprintf(hb.direct_na, sizeof(hb.direct_na),
                 "direct HIP sees no device%s%s", err[0] ? ": " : "", err);
      else
        hb.have_direct = 1;
      /* Map by PCI bus, else by order among the HIP devices. */
      int used[MAX_DEVICES] = {0}, k = 0;
      for (int i = 0; hb.have_direct && i < hb.ndevs; i++) {
        devinfo_t *d = &hb.devs[i];

        if (d->is_cpu || strcmp(d->driver, "hip") != 0)
          continue;
        if (strcmp(d->platform, hb.platform) != 0) {
          snprintf(d->na, sizeof(d->na),
                   "direct_hip was built for %s, the device is %s", hb.platform,
                   d->platform);
          k++;
          continue;
        }
        for (int j = 0; j < out->n; j++) {
          const char *dl = out->line[j];
          int ord = dint(dl, "ordinal", -1);

          if (strstr(dl, "\"kind\":\"device\"") == NULL || ord < 0 ||
              ord >= MAX_DEVICES || used[ord] ||
              dint(dl, "pci_bus_id", -2) != d->pci_bus)
            continue;
          d->hip_ord = ord;
          used[ord] = 1;
          break;
        }
        if (d->hip_ord < 0 && k < count && !used[k]) {
          d->hip_ord = k;
          used[k] = 1;
        }
        if (d->hip_ord < 0)
          snprintf(d->na, sizeof(d->na),
                   "no HIP device of direct_hip matches hipd's device %d", i);
        k++;
      }
    } else {
      snprintf(hb.direct_na, sizeof(hb.direct_na),
               "direct_hip info printed no result");
    }
    free(out);
  }
  for (int i = 0; i < hb.ndevs; i++)
    if (!hb.devs[i].is_cpu && hb.devs[i].hip_ord < 0 &&
        hb.devs[i].na[0] == '\0')
      snprintf(hb.devs[i].na, sizeof(hb.devs[i].na), "%s", hb.direct_na);
  return 0;
}
