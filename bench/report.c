/* SPDX-License-Identifier: MIT */
/* bench/report.c: see report.h. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "hipd.h"
#include "report.h"

#define MAX_FIGURES 128
#define MAX_REMARKS 32

static struct {
  figure_t figs[MAX_FIGURES];
  int nfigs;
  char remarks[MAX_REMARKS][400];
  int nremarks;
  int failures;
  int dev; /* of new figures */
  int cpu;
} R;

/* Progress, on stderr: the table and the JSON are the results. */
void note(const char *fmt, ...)
{
  static double start;
  va_list ap;

  if (start == 0)
    start = bu_now();
  va_start(ap, fmt);
  fprintf(stderr, "hipd_bench [%6.1fs]: ", bu_now() - start);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void report_set_device(int dev, int is_cpu)
{
  R.dev = dev;
  R.cpu = is_cpu;
}

figure_t *fig_new(const char *name, const char *title, const char *unit,
                  int lower_better)
{
  figure_t *f;

  if (R.nfigs == MAX_FIGURES) {
    note("too many figures");
    exit(2);
  }
  f = &R.figs[R.nfigs++];
  memset(f, 0, sizeof(*f));
  snprintf(f->name, sizeof(f->name), "%s", name);
  snprintf(f->title, sizeof(f->title), "%s", title);
  snprintf(f->devices, sizeof(f->devices), "%d", R.dev);
  f->device = R.dev;
  f->no_targets = R.cpu;
  f->unit = unit;
  f->lower_better = lower_better;
  f->hipd = NAN;
  return f;
}

void fig_fail(figure_t *f, const char *fmt, ...)
{
  va_list ap;

  if (f->error[0] != '\0')
    return;
  va_start(ap, fmt);
  vsnprintf(f->error, sizeof(f->error), fmt, ap);
  va_end(ap);
  f->hipd = NAN;
  R.failures++;
  note("%s: FAILED: %s", f->name, f->error);
}

int report_failure(void)
{
  return ++R.failures;
}

int report_failures(void)
{
  return R.failures;
}

static baseline_t *fig_base(figure_t *f, const char *name, const char *label)
{
  baseline_t *b;

  for (int i = 0; i < f->nbase; i++)
    if (strcmp(f->base[i].name, name) == 0)
      return &f->base[i];
  if (f->nbase == MAX_BASE) {
    note("%s: too many baselines", f->name);
    exit(2);
  }
  b = &f->base[f->nbase++];
  memset(b, 0, sizeof(*b));
  snprintf(b->name, sizeof(b->name), "%s", name);
  snprintf(b->label, sizeof(b->label), "%s", label);
  b->value = NAN;
  b->ratio = NAN;
  b->target = NAN;
  return b;
}

void base_set(figure_t *f, const char *name, const char *label, double value)
{
  fig_base(f, name, label)->value = value;
}

void base_na(figure_t *f, const char *name, const char *label, const char *fmt,
             ...)
{
  baseline_t *b = fig_base(f, name, label);
  va_list ap;

  b->value = NAN;
  va_start(ap, fmt);
  vsnprintf(b->na, sizeof(b->na), fmt, ap);
  va_end(ap);
}

/* The targets are the issue's, for GPUs: a CPU device gets none. */
void base_target(figure_t *f, const char *name, const char *op, double value)
{
  baseline_t *b = fig_base(f, name, name);

  if (f->no_targets)
    return;
  snprintf(b->op, sizeof(b->op), "%s", op);
  b->target = value;
}

void detail_num(figure_t *f, const char *key, double v)
{
  if (f->ndetail == MAX_DETAILS)
    return;
  snprintf(f->detail[f->ndetail].key, sizeof(f->detail[0].key), "%s", key);
  f->detail[f->ndetail].num = v;
  f->detail[f->ndetail].str[0] = '\0';
  f->ndetail++;
}

void detail_str(figure_t *f, const char *key, const char *s)
{
  if (f->ndetail == MAX_DETAILS)
    return;
  snprintf(f->detail[f->ndetail].key, sizeof(f->detail[0].key), "%s", key);
  f->detail[f->ndetail].num = NAN;
  snprintf(f->detail[f->ndetail].str, sizeof(f->detail[0].str), "%s", s);
  f->ndetail++;
}

int report_count(void)
{
  return R.nfigs;
}

figure_t *report_fig(int i)
{
  return i >= 0 && i < R.nfigs ? &R.figs[i] : NULL;
}

figure_t *report_find(const char *name)
{
  for (int i = 0; i < R.nfigs; i++)
    if (strcmp(R.figs[i].name, name) == 0)
      return &R.figs[i];
  return NULL;
}

void report_truncate(int n)
{
  if (n >= 0 && n < R.nfigs)
    R.nfigs = n;
}

void report_remark(const char *fmt, ...)
{
  va_list ap;

  if (R.nremarks == MAX_REMARKS)
    return;
  va_start(ap, fmt);
  vsnprintf(R.remarks[R.nremarks++], sizeof(R.remarks[0]), fmt, ap);
  va_end(ap);
}

/* Ratios of every baseline, once the figure is complete. */
static void fig_ratios(figure_t *f)
{
  for (int i = 0; i < f->nbase; i++) {
    baseline_t *b = &f->base[i];

    b->ratio = NAN;
    if (isfinite(f->hipd) && isfinite(b->value) && b->value > 0 && f->hipd > 0)
      b->ratio = f->speedup ? b->value / f->hipd : f->hipd / b->value;
  }
}

/* 1 met, 0 not met, -1 no target or nothing to compare. */
static int base_met(const baseline_t *b)
{
  if (b->op[0] == '\0' || !isfinite(b->ratio))
    return -1;
  return strcmp(b->op, ">=") == 0 ? b->ratio >= b->target
                                  : b->ratio <= b->target;
}

static void fmt_value(double v, const char *unit, char *buf, size_t size)
{
  if (!isfinite(v))
    snprintf(buf, size, "n/a");
  else if (strcmp(unit, "launches/s") == 0 || strcmp(unit, "kernels/s") == 0)
    snprintf(buf, size, "%.0f/s", v);
  else if (strcmp(unit, "ms") == 0)
    snprintf(buf, size, v < 1 ? "%.4f ms" : "%.2f ms", v);
  else if (strcmp(unit, "us") == 0)
    snprintf(buf, size, "%.2f us", v);
  else
    snprintf(buf, size, "%.3f %s", v, unit);
}

/* The table: one line per baseline, the figure on the first. Reasons for
 * n/a and failures are numbered under it. */
void report_print(FILE *out)
{
  char notes[64][300];
  int nnotes = 0;

  fprintf(out, "\n%-28s %-14s %-40s %-14s %-9s %-8s %s\n", "figure", "hipd",
          "baseline", "value", "ratio", "target", "met?");
  for (int i = 0; i < R.nfigs; i++) {
    figure_t *f = &R.figs[i];
    char hv[48], bv[48], rv[32], tv[32], ref[16] = "";
    const char *reason = f->error[0] ? f->error : f->na[0] ? f->na : NULL;

    fig_ratios(f);
    if (reason != NULL) {
      int k;
      for (k = 0; k < nnotes && strcmp(notes[k], reason) != 0; k++)
        ;
      if (k == nnotes && nnotes < 64)
        snprintf(notes[nnotes++], sizeof(notes[0]), "%s", reason);
      snprintf(ref, sizeof(ref), " [%d]", k + 1);
    }
    if (f->error[0])
      snprintf(hv, sizeof(hv), "FAILED%s", ref);
    else if (f->na[0])
      snprintf(hv, sizeof(hv), "n/a%s", ref);
    else
      fmt_value(f->hipd, f->unit, hv, sizeof(hv));
    for (int j = 0; j < f->nbase || j == 0; j++) {
      baseline_t *b = j < f->nbase ? &f->base[j] : NULL;
      int met = b ? base_met(b) : -1;

      bv[0] = rv[0] = tv[0] = '\0';
      if (b != NULL) {
        if (isfinite(b->value)) {
          fmt_value(b->value, f->unit, bv, sizeof(bv));
        } else {
          int k;
          for (k = 0; k < nnotes && strcmp(notes[k], b->na) != 0; k++)
            ;
          if (k == nnotes && nnotes < 64)
            snprintf(notes[nnotes++], sizeof(notes[0]), "%s", b->na);
          snprintf(bv, sizeof(bv), "n/a [%d]", k + 1);
        }
        if (isfinite(b->ratio))
          snprintf(rv, sizeof(rv), b->ratio >= 100 ? "%.0fx" : "%.3gx",
                   b->ratio);
        else
          snprintf(rv, sizeof(rv), "-");
        if (b->op[0])
          snprintf(tv, sizeof(tv), "%s %g", b->op, b->target);
      }
      fprintf(out, "%-28s %-14s %-40s %-14s %-9s %-8s %s\n",
              j == 0 ? f->name : "", j == 0 ? hv : "", b ? b->label : "-", bv,
              rv, tv,
              met == 1   ? "yes"
              : met == 0 ? "NO"
                         : "");
    }
  }
  fprintf(out, "\nratio: hipd / baseline (times: lower is better; rates: "
               "higher is better);\n"
               "compile_hit_*: baseline / hipd, how many times faster the "
               "hit is.\n");
  for (int k = 0; k < nnotes; k++)
    fprintf(out, "[%d] %s\n", k + 1, notes[k]);
  if (R.nremarks > 0)
    fputc('\n', out);
  for (int k = 0; k < R.nremarks; k++)
    fprintf(out, "%s\n", R.remarks[k]);
}

static void json_kv_str(FILE *f, const char *key, const char *v, int comma)
{
  fprintf(f, "\"%s\": ", key);
  bu_json_str(f, v);
  if (comma)
    fputs(", ", f);
}

static void json_kv_num(FILE *f, const char *key, double v, int comma)
{
  fprintf(f, "\"%s\": ", key);
  bu_json_num(f, v);
  if (comma)
    fputs(", ", f);
}

static void json_device(FILE *f, const devinfo_t *d)
{
  fputs("{", f);
  json_kv_num(f, "id", d->id, 1);
  json_kv_str(f, "name", d->name, 1);
  json_kv_str(f, "driver", d->driver, 1);
  json_kv_str(f, "platform", d->platform, 1);
  json_kv_str(f, "arch", d->arch, 1);
  fprintf(f, "\"is_cpu\": %s}", d->is_cpu ? "true" : "false");
}

static void json_runtime(FILE *f, const report_meta_t *m)
{
  if (m->platform == NULL || m->platform[0] == '\0') {
    fputs("null", f);
    return;
  }
  fputs("{", f);
  json_kv_str(f, "platform", m->platform, 1);
  json_kv_str(f, "hip_version", m->hip_version, 1);
  json_kv_num(f, "runtime_version", (double)m->runtime_version, 1);
  json_kv_num(f, "driver_version", (double)m->driver_version, 0);
  fputs("}", f);
}

int report_write_json(const char *path, const report_meta_t *m)
{
  FILE *f = fopen(path, "w");

  if (f == NULL) {
    note("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  fputs("{\n  ", f);
  json_kv_str(f, "bench", "hipd_bench", 1);
  json_kv_str(f, "hipd_version", m->hipd_version, 1);
  json_kv_str(f, "libhipd_version", hipd_version(), 1);
  json_kv_str(f, "features", m->features, 1);
  json_kv_str(f, "date", m->date, 1);
  json_kv_str(f, "host", m->host, 1);
  json_kv_str(f, "mode", m->mode, 1);
  json_kv_str(f, "isolation", m->isolation, 1);
  fprintf(f, "\"complete\": %s, ", m->complete ? "true" : "false");
  fprintf(f, "\"own_daemon\": %s,\n  ", m->own_daemon ? "true" : "false");
  fputs("\"device\": ", f);
  json_device(f, &m->devs[m->device]);
  fputs(",\n  \"runtime\": ", f);
  json_runtime(f, m);
  fprintf(f, ",\n  \"failures\": %d,\n  \"figures\": [", R.failures);
  for (int i = 0; i < R.nfigs; i++) {
    figure_t *fg = &R.figs[i];
    int all_met = -1;

    fig_ratios(fg);
    fputs(i ? ",\n    {" : "\n    {", f);
    json_kv_str(f, "name", fg->name, 1);
    json_kv_str(f, "title", fg->title, 1);
    json_kv_str(f, "unit", fg->unit, 1);
    json_kv_str(f, "better", fg->lower_better ? "lower" : "higher", 1);
    json_kv_str(f, "ratio", fg->speedup ? "baseline/hipd" : "hipd/baseline", 1);
    json_kv_num(f, "hipd", fg->hipd, 1);
    json_kv_str(f, "hipd_method", fg->how, 1);
    json_kv_str(f, "error", fg->error[0] ? fg->error : NULL, 1);
    json_kv_str(f, "not_measured", fg->na[0] ? fg->na : NULL, 1);
    fputs("\n     \"baselines\": [", f);
    for (int j = 0; j < fg->nbase; j++) {
      baseline_t *b = &fg->base[j];
      int met = base_met(b);

      if (met == 0 || (met == 1 && all_met == -1))
        all_met = met;
      fputs(j ? ", {" : "{", f);
      json_kv_str(f, "name", b->name, 1);
      json_kv_str(f, "label", b->label, 1);
      json_kv_num(f, "value", b->value, 1);
      json_kv_str(f, "not_applicable", isfinite(b->value) ? NULL : b->na, 1);
      json_kv_num(f, "ratio", b->ratio, 1);
      if (b->op[0]) {
        fputs("\"target\": {", f);
        json_kv_str(f, "op", b->op, 1);
        json_kv_num(f, "value", b->target, 0);
        fputs("}, ", f);
      } else {
        fputs("\"target\": null, ", f);
      }
      fprintf(f, "\"met\": %s}",
              met == 1   ? "true"
              : met == 0 ? "false"
                         : "null");
    }
    fputs("],\n     ", f);
    fprintf(f, "\"met\": %s, ",
            all_met == 1   ? "true"
            : all_met == 0 ? "false"
                           : "null");
    json_kv_str(f, "devices", fg->devices, 1);
    fputs("\"device\": ", f);
    json_device(f, &m->devs[fg->device]);
    fputs(", \"runtime\": ", f);
    json_runtime(f, m);
    fputs(", ", f);
    json_kv_str(f, "date", m->date, 1);
    fputs("\"details\": {", f);
    for (int j = 0; j < fg->ndetail; j++) {
      if (isfinite(fg->detail[j].num))
        json_kv_num(f, fg->detail[j].key, fg->detail[j].num,
                    j + 1 < fg->ndetail);
      else
        json_kv_str(f, fg->detail[j].key,
                    fg->detail[j].str[0] ? fg->detail[j].str : NULL,
                    j + 1 < fg->ndetail);
    }
    fputs("}}", f);
  }
  fputs("\n  ],\n  \"remarks\": [", f);
  for (int k = 0; k < R.nremarks; k++) {
    fputs(k ? ",\n    " : "\n    ", f);
    bu_json_str(f, R.remarks[k]);
  }
  fputs(R.nremarks ? "\n  ]\n}\n" : "]\n}\n", f);
  if (fclose(f) != 0) {
    note("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}
