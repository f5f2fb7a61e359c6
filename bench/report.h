/* SPDX-License-Identifier: MIT */
/* bench/report.h: the figures of hipd_bench and how they are reported.
 *
 * A figure is one thing hipd does, measured (the "hipd" value), next to
 * its baselines measured in the same run on the same device; each baseline
 * gets a ratio and, where the issue sets one, a target. A value that could
 * not be measured is NAN with the reason: a failure (counted, the bench
 * exits 1) or "not applicable" (a baseline that does not exist there).
 * The table goes to stdout, the same figures as JSON to a file.
 */
#ifndef HIPD_BENCH_REPORT_H
#define HIPD_BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#define MAX_BASE 6
#define MAX_DETAILS 32

typedef struct {
  char name[32];  /* "direct", "socket", "mps"... */
  char label[64]; /* for people */
  double value;   /* NAN: not measured */
  char na[240];   /* why not, when value is NAN */
  double ratio;   /* hipd / value (or value / hipd for a speedup figure) */
  char op[3];     /* the target's comparison, "" when none */
  double target;
} baseline_t;

typedef struct {
  char name[64];    /* stable identifier, the JSON key */
  char title[96];   /* for people */
  const char *unit; /* "us", "launches/s", "GB/s", "ms", "kernels/s" */
  int lower_better; /* a time */
  int speedup;      /* ratio = baseline / hipd ("times faster") */
  int no_targets;   /* on a CPU device: the targets are the GPU's */
  double hipd;      /* NAN: not measured */
  char how[400];    /* how the hipd figure was measured */
  char error[400];  /* the hipd figure failed: why */
  char na[240];     /* the hipd figure was not measured (not a failure) */
  char devices[64]; /* hipd device ids, "0" or "0,1" */
  int device;       /* the first of them */
  baseline_t base[MAX_BASE];
  int nbase;
  struct {
    char key[40];
    double num;    /* NAN when a string */
    char str[200]; /* used when num is NAN */
  } detail[MAX_DETAILS];
  int ndetail;
} figure_t;

/* A device of the daemon, as device.list describes it. */
typedef struct {
  int id;
  char name[128];
  char driver[16];   /* "hip", "cpu" */
  char platform[16]; /* "nvidia", "amd", "host" */
  char arch[32];
  int is_cpu;
  int64_t pci_bus;
  int hip_ord;  /* the HIP ordinal for direct_hip, or -1 */
  char na[240]; /* why there is no direct baseline on it */
} devinfo_t;

/* What the JSON file says about the run. */
typedef struct {
  const char *hipd_version, *features, *date, *host, *mode;
  const char *isolation; /* daemon.info isolation.mode of the daemon */
  int complete;          /* 0 while the run goes on */
  int own_daemon;
  const devinfo_t *devs; /* the daemon's devices */
  int ndevs;
  int device; /* the one measured */
  /* the HIP runtime of the direct baselines; platform "" when none */
  const char *platform, *hip_version;
  long long runtime_version, driver_version;
} report_meta_t;

/* Progress on stderr, with the seconds since the first note. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The device new figures are measured on (their "devices" field; a CPU
 * device's figures get no targets). */
void report_set_device(int dev, int is_cpu);
/* A new figure, its value not measured yet. Exits at MAX_FIGURES. */
figure_t *fig_new(const char *name, const char *title, const char *unit,
                  int lower_better);
/* The hipd figure failed (a failure is counted); the first reason stays. */
void fig_fail(figure_t *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A baseline's value, or why it has none. Created on first use. */
void base_set(figure_t *f, const char *name, const char *label, double value);
void base_na(figure_t *f, const char *name, const char *label, const char *fmt,
             ...) __attribute__((format(printf, 4, 5)));
/* Target of baseline @p name (already set): ratio @p op ("<=", ">=")
 * @p value. Ignored for a figure with no_targets. */
void base_target(figure_t *f, const char *name, const char *op, double value);
/* Extra numbers and words of a figure, for the JSON file. */
void detail_num(figure_t *f, const char *key, double v);
void detail_str(figure_t *f, const char *key, const char *s);

/* Count a failure that belongs to no hipd figure (a baseline that broke).
 * @return the failures so far. */
int report_failure(void);
int report_failures(void);

/* The figures so far: how many, and the @p i th (0 <= i < count). */
int report_count(void);
figure_t *report_fig(int i);
/* The figure named @p name, or NULL. */
figure_t *report_find(const char *name);
/* Forget the figures from the @p n th on: they were measured for another
 * figure's sake (hipd_bench's --isolation-compare). Failures they counted
 * stay counted. */
void report_truncate(int n);
/* A line printed under the table (what a figure found out besides its
 * numbers: processes, memory). */
void report_remark(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The table of every figure, with numbered notes for n/a and failures,
 * then the remarks. */
void report_print(FILE *out);
/* Every figure as JSON. @return 0 or -1 (said why). */
int report_write_json(const char *path, const report_meta_t *meta);

#endif
