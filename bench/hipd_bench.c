/* bench/hipd_bench.c: hipd's benchmarks (bench/README.md).
 *
 * Measures what a client gets through hipd next to what it would get
 * without it, in the same run, on the same device, and prints each figure
 * as a ratio against its baselines, with the target where the issue sets
 * one; the same figures go to a JSON file.
 *
 *   hipd_bench [--socket PATH] [--device N|cpu] [--smoke] [--json FILE]
 *              [--only LIST] [--clients LIST] [--spread[=LIST]] ...
 *
 * By default the bench starts its own hipd (the one built in this tree, or
 * $HIPD_BIN) on a private socket with a private cache directory, and stops
 * it at the end; the disk-cache figure restarts it. The direct-HIP
 * baselines are bench/direct_hip runs (child processes, so that no HIP
 * runtime lives in this process, which forks clients); the socket
 * baselines are bench/sockbench.c. Nothing is left behind: every child is
 * killed if the bench is interrupted or runs past --timeout.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "hipd.h"
#include "kernels.h"
#include "mps.h"
#include "procs.h"
#include "report.h"
#include "sockbench.h"

#ifndef BENCH_BUILDDIR
#define BENCH_BUILDDIR "."
#endif
#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

#define MAX_DEVICES 64
#define MAX_CLIENTS 8
#define MAX_SIZES 8
#define MAX_WORKERS 128 /* clients of one sharing run */
#define MAX_DAEMON_ARGS 16
#define CALL_TIMEOUT_MS 120000 /* any one hipd call */
#define READY_TIMEOUT 180.0    /* seconds for workers to set up */
#define LAUNCH_WINDOW 128      /* launches in flight (hipd_bench's own cap) */

enum {
  SEC_RTT = 1 << 0,
  SEC_LAUNCH = 1 << 1,
  SEC_BW = 1 << 2,
  SEC_COMPILE = 1 << 3,
  SEC_SHARE = 1 << 4,
  SEC_SPREAD = 1 << 5,
  SEC_PEER = 1 << 6,
  SEC_ALL = (1 << 7) - 1,
};

static const struct {
  const char *name;
  unsigned bit;
} sections[] = {
    {"rtt", SEC_RTT},         {"launch", SEC_LAUNCH}, {"bw", SEC_BW},
    {"compile", SEC_COMPILE}, {"share", SEC_SHARE},   {"spread", SEC_SPREAD},
    {"peer", SEC_PEER},
};

/* How a client launches a kernel and waits for it (--sync). */
enum { SYNC_RUN, SYNC_CORKED, SYNC_CALLS, SYNC_MODES };
static const char *const sync_names[SYNC_MODES] = {"run", "corked", "calls"};
static const char *const sync_how[SYNC_MODES] = {
    "kernel.launch with wait (hipd_kernel_run): one request, answered once "
    "the kernel has run",
    "kernel.launch_begin + stream.synchronize_begin, corked (one write), "
    "both replies waited for",
    "kernel.launch then stream.synchronize: two calls, two round trips",
};

/* A sharing run whose MPS baseline is measured after all the others. */
typedef struct {
  figure_t *fig;
  int devs[MAX_DEVICES];
  int ndevs;
  int n;
} share_run_t;

static struct {
  /* options */
  const char *socket;  /* a running daemon, or NULL: start our own */
  const char *dev_arg; /* --device */
  int smoke;
  const char *json_path;
  unsigned only;
  int clients[MAX_CLIENTS], nclients;
  int spread_devs[MAX_DEVICES], nspread; /* --spread=LIST */
  int spread_forced;                     /* --spread given */
  int peer_devs[2], npeer;               /* --peer A,B */
  uint64_t sizes[MAX_SIZES];
  int nsizes;
  const char *daemon_args[MAX_DAEMON_ARGS];
  int ndaemon_args;
  double timeout;
  double share_seconds;
  int share_elems;
  int no_mps;
  int sync_mode; /* SYNC_* */
  /* iteration counts, from --smoke */
  int rtt_iters, rtt_warmup, launch_iters, compile_variants, compile_hits;
  double bw_budget;
  uint64_t peer_bytes;
  /* programs */
  char hipd_bin[512], direct_bin[512];
  /* the run */
  char tmp[256], sock[320], cache[320], log[320];
  proc_t daemon;
  int own_daemon;
  const char *sock_path; /* what clients connect to (NULL: the default) */
  hipd_conn_t *conn;
  devinfo_t devs[MAX_DEVICES];
  int ndevs, dev;
  char hipd_version[32], features[128], date[40], host[128];
  /* the direct-HIP runtime, from direct_hip info */
  int have_direct;
  char direct_na[240];
  char platform[16], hip_version[32];
  long long runtime_version, driver_version;
  share_run_t shares[2 * MAX_CLIENTS];
  int nshares;
  unsigned long long run_id;
} B = {
    .only = SEC_ALL,
    .timeout = 0,
};

/* A failed hipd call: its name, the code and the daemon's message. */
static int hfail(figure_t *f, hipd_conn_t *c, const char *what, int rc)
{
  fig_fail(f, "%s: %s: %s", what, hipd_err_name(rc), hipd_last_error(c));
  return rc;
}

/* ------------------------------------------------------ cleanup, signals */

/* What an interrupted bench must still undo, prepared beforehand so that
 * the signal handler only calls async-signal-safe functions. */
static struct {
  char *rm_argv[4]; /* rm -rf the temporary directory */
} E;

static void write_err(const char *s)
{
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}

static void on_signal(int sig)
{
  extern char **environ;

  write_err(sig == SIGALRM
                ? "\nhipd_bench: --timeout reached: stopping everything\n"
                : "\nhipd_bench: interrupted: stopping everything\n");
  procs_kill_all();
  procs_reap_killed(2000);
  mps_quit_now();
  if (E.rm_argv[0] != NULL)
    procs_run_safely(E.rm_argv, environ, NULL, 30);
  _exit(sig == SIGALRM ? 3 : 128 + sig);
}

static void signals_setup(void)
{
  struct sigaction sa;

  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGALRM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
  (void)st;
  (void)ftw;
  if (flag == FTW_DP)
    rmdir(path);
  else
    unlink(path);
  return 0;
}

static void tmp_remove(void)
{
  if (B.tmp[0] != '\0')
    nftw(B.tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  B.tmp[0] = '\0';
  E.rm_argv[0] = NULL;
}

static int tmp_make(void)
{
  const char *root = getenv("TMPDIR");

  if (root == NULL || root[0] == '\0' || strlen(root) > 64)
    root = "/tmp";
  snprintf(B.tmp, sizeof(B.tmp), "%s/hipd-bench-XXXXXX", root);
  if (mkdtemp(B.tmp) == NULL) {
    note("mkdtemp %s: %s", B.tmp, strerror(errno));
    B.tmp[0] = '\0';
    return -1;
  }
  E.rm_argv[0] = "/bin/rm";
  E.rm_argv[1] = "-rf";
  E.rm_argv[2] = B.tmp;
  E.rm_argv[3] = NULL;
  if (access(E.rm_argv[0], X_OK) != 0)
    E.rm_argv[0] = NULL;
  return 0;
}

/* ---------------------------------------------------------------- daemon */

/* Can a client connect to @p path now? */
static int socket_answers(const char *path)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd, ok;

  if (strlen(path) >= sizeof(sa.sun_path))
    return 0;
  strcpy(sa.sun_path, path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
  close(fd);
  return ok;
}

/* The CPU device's runner and header of this build tree, for a daemon that
 * is not installed, unless the environment already names them. */
static void daemon_env(const char **env, int *n)
{
  static char runner[600], header[600];

  if (getenv("HIPD_CPU_RUNNER") == NULL) {
    snprintf(runner, sizeof(runner), "HIPD_CPU_RUNNER=%s/hipd-cpu-runner",
             BENCH_BUILDDIR);
    if (access(runner + strlen("HIPD_CPU_RUNNER="), X_OK) == 0)
      env[(*n)++] = runner;
  }
  if (getenv("HIPD_CPU_HEADER") == NULL) {
    snprintf(header, sizeof(header),
             "HIPD_CPU_HEADER=%s/daemon/drivers/cpu/hipd_cpu_device.h",
             BENCH_SRCDIR);
    if (access(header + strlen("HIPD_CPU_HEADER="), R_OK) == 0)
      env[(*n)++] = header;
  }
  env[*n] = NULL;
}

/* Start our daemon on B.sock with the cache in B.cache and wait until it
 * accepts connections. @return 0 or -1 (its log is printed). */
static int daemon_start(void)
{
  const char *argv[MAX_DAEMON_ARGS + 8], *env[3];
  int n = 0, nenv = 0;
  double deadline;

  argv[n++] = B.hipd_bin;
  argv[n++] = "--socket";
  argv[n++] = B.sock;
  argv[n++] = "--cache-dir";
  argv[n++] = B.cache;
  for (int i = 0; i < B.ndaemon_args; i++)
    argv[n++] = B.daemon_args[i];
  argv[n] = NULL;
  daemon_env(env, &nenv);
  if (proc_spawn(&B.daemon, argv, env, B.log, 1) != 0) {
    note("cannot start %s: %s", B.hipd_bin, strerror(errno));
    return -1;
  }
  deadline = bu_now() + 120;
  while (!socket_answers(B.sock)) {
    if (proc_poll(&B.daemon)) {
      note("hipd exited at start; its log:");
      bu_log_tail(B.log, 40);
      return -1;
    }
    if (bu_now() > deadline) {
      note("hipd accepted no connection within 120 s; its log:");
      bu_log_tail(B.log, 40);
      proc_kill(&B.daemon);
      return -1;
    }
    bu_sleep(0.02);
  }
  return 0;
}

/* Stop our daemon as an administrator would (SIGTERM), killing it (and its
 * CPU runner) if it has not exited after 20 s. @return 0 if it exited
 * cleanly. */
static int daemon_stop(void)
{
  double deadline = bu_now() + 20;
  int code;

  if (B.daemon.pid == 0)
    return 0;
  kill(B.daemon.pid, SIGTERM);
  while (!proc_poll(&B.daemon)) {
    if (bu_now() > deadline) {
      note("hipd ignored SIGTERM for 20 s: killing it");
      proc_kill(&B.daemon);
      return -1;
    }
    bu_sleep(0.01);
  }
  code = WIFEXITED(B.daemon.status) ? WEXITSTATUS(B.daemon.status) : -1;
  if (code != 0) {
    note("hipd exited with status %d; its log:", code);
    bu_log_tail(B.log, 40);
    return -1;
  }
  return 0;
}

/* Open B.conn. @return 0 or -1 (said why). */
static int conn_open(void)
{
  int rc = hipd_connect2(B.sock_path, "hipd_bench", &B.conn);

  if (rc != 0) {
    note("cannot connect to hipd at %s: %s: %s",
         B.sock_path ? B.sock_path : "(default socket)", hipd_err_name(rc),
         hipd_last_error(NULL));
    B.conn = NULL;
    return -1;
  }
  hipd_set_timeout(B.conn, CALL_TIMEOUT_MS);
  return 0;
}

static void conn_close(void)
{
  if (B.conn != NULL)
    hipd_close(B.conn);
  B.conn = NULL;
}

/* Restart our daemon with the same cache directory (the disk figure).
 * @return 0 or -1. */
static int daemon_restart(void)
{
  conn_close();
  if (daemon_stop() != 0)
    return -1;
  if (daemon_start() != 0)
    return -1;
  return conn_open();
}

/* ---------------------------------------------------------- direct_hip */

#define DIRECT_LINES 64
typedef struct {
  char line[DIRECT_LINES][512];
  int n;
  char err[600];
} dout_t;

static const char *dout_find(const dout_t *out, const char *kind);

/* Run direct_hip with @p args (the mode first; NULL-ended), collecting its
 * JSON lines, for @p timeout seconds at most; a line of kind @p want must
 * be among them. @return 0, or -1 with the reason in out->err. */
static int direct_run(const char *const *args, double timeout, const char *want,
                      dout_t *out)
{
  const char *argv[32];
  char line[512];
  double deadline = bu_now() + timeout;
  proc_t p;
  int n = 0, r, code;

  memset(out, 0, sizeof(*out));
  argv[n++] = B.direct_bin;
  for (int i = 0; args[i] != NULL && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  if (proc_spawn(&p, argv, NULL, NULL, 0) != 0) {
    snprintf(out->err, sizeof(out->err), "cannot run %s: %s", B.direct_bin,
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
  if (dout_find(out, want) == NULL) {
    snprintf(out->err, sizeof(out->err), "direct_hip %s printed no %s result",
             args[0], want);
    return -1;
  }
  return 0;
}

/* The first line of @p kind in @p out, or NULL. */
static const char *dout_find(const dout_t *out, const char *kind)
{
  char buf[64];

  for (int i = 0; i < out->n; i++)
    if (bu_json_get_str(out->line[i], "kind", buf, sizeof(buf)) == 0 &&
        strcmp(buf, kind) == 0)
      return out->line[i];
  return NULL;
}

static double dnum(const char *line, const char *key)
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
static double direct_baseline(figure_t *f, const char *id, const char *label,
                              const char *const *args, const char *kind,
                              const char *field, const char *field2, double *v2)
{
  dout_t *out = malloc(sizeof(*out));
  const char *line = NULL;
  double v = NAN;

  if (out != NULL && direct_run(args, 300, kind, out) == 0 &&
      (line = dout_find(out, kind)) != NULL &&
      isfinite(v = dnum(line, field))) {
    base_set(f, id, label, v);
    if (field2 != NULL)
      *v2 = dnum(line, field2);
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
  double v = dnum(line, key);

  return isfinite(v) && v >= -2e9 && v <= 2e9 ? (int)v : def;
}

/* Is there a direct baseline on hipd device @p dev? If not, why not goes
 * to @p why. */
static int direct_ok(int dev, const char **why)
{
  if (dev < 0 || dev >= B.ndevs) {
    *why = "no such device";
    return 0;
  }
  if (B.devs[dev].hip_ord < 0) {
    *why = B.devs[dev].na;
    return 0;
  }
  return 1;
}

static const char *itoa_tmp(int v, char *buf, size_t size)
{
  snprintf(buf, size, "%d", v);
  return buf;
}

/* ------------------------------------------------------------- discovery */

static void info_strcpy(const hipd_info_t *info, const char *path, char *out,
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
static int discover(void)
{
  hipd_info_t *info = NULL;
  dout_t *out;
  int rc, n, nhip = 0;

  if ((rc = hipd_hello(B.conn, &info)) != 0) {
    note("hello: %s: %s", hipd_err_name(rc), hipd_last_error(B.conn));
    return -1;
  }
  info_strcpy(info, "version", B.hipd_version, sizeof(B.hipd_version));
  B.features[0] = '\0';
  n = hipd_info_len(info, "features");
  for (int i = 0; i < n; i++) {
    char path[32], feat[32];

    snprintf(path, sizeof(path), "features.%d", i);
    info_strcpy(info, path, feat, sizeof(feat));
    snprintf(B.features + strlen(B.features),
             sizeof(B.features) - strlen(B.features), "%s%s", i ? "," : "",
             feat);
  }
  hipd_info_free(info);

  if ((rc = hipd_device_list(B.conn, &info)) != 0) {
    note("device.list: %s: %s", hipd_err_name(rc), hipd_last_error(B.conn));
    return -1;
  }
  n = hipd_info_len(info, "");
  B.ndevs = 0;
  for (int i = 0; i < n && i < MAX_DEVICES; i++) {
    devinfo_t *d = &B.devs[B.ndevs++];
    char path[64];
    int64_t v = -1;
    int b = 0;

    memset(d, 0, sizeof(*d));
    snprintf(path, sizeof(path), "%d.id", i);
    hipd_info_int(info, path, &v);
    d->id = (int)v;
    snprintf(path, sizeof(path), "%d.name", i);
    info_strcpy(info, path, d->name, sizeof(d->name));
    snprintf(path, sizeof(path), "%d.driver", i);
    info_strcpy(info, path, d->driver, sizeof(d->driver));
    snprintf(path, sizeof(path), "%d.platform", i);
    info_strcpy(info, path, d->platform, sizeof(d->platform));
    snprintf(path, sizeof(path), "%d.arch", i);
    info_strcpy(info, path, d->arch, sizeof(d->arch));
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
               B.devs[i].driver);
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
  if (B.direct_bin[0] == '\0' || access(B.direct_bin, X_OK) != 0) {
    snprintf(B.direct_na, sizeof(B.direct_na),
             "bench/direct_hip was not built (configure found no HIP)%s%.180s",
             B.direct_bin[0] ? ": " : "", B.direct_bin);
  } else {
    const char *args[] = {"info", NULL};
    const char *line;

    out = malloc(sizeof(*out));
    if (out == NULL)
      return -1;
    if (direct_run(args, 120, "info", out) != 0) {
      snprintf(B.direct_na, sizeof(B.direct_na),
               "direct_hip info failed: %.200s", out->err);
    } else if ((line = dout_find(out, "info")) != NULL) {
      char err[200] = "";
      int count = dint(line, "count", 0);

      bu_json_get_str(line, "platform", B.platform, sizeof(B.platform));
      bu_json_get_str(line, "hip_version", B.hip_version,
                      sizeof(B.hip_version));
      B.runtime_version = (long long)dnum(line, "runtime_version");
      B.driver_version = (long long)dnum(line, "driver_version");
      bu_json_get_str(line, "error", err, sizeof(err));
      if (count <= 0)
        snprintf(B.direct_na, sizeof(B.direct_na),
                 "direct HIP sees no device%s%s", err[0] ? ": " : "", err);
      else
        B.have_direct = 1;
      /* Map by PCI bus, else by order among the HIP devices. */
      int used[MAX_DEVICES] = {0}, k = 0;
      for (int i = 0; B.have_direct && i < B.ndevs; i++) {
        devinfo_t *d = &B.devs[i];

        if (d->is_cpu || strcmp(d->driver, "hip") != 0)
          continue;
        if (strcmp(d->platform, B.platform) != 0) {
          snprintf(d->na, sizeof(d->na),
                   "direct_hip was built for %s, the device is %s", B.platform,
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
      snprintf(B.direct_na, sizeof(B.direct_na),
               "direct_hip info printed no result");
    }
    free(out);
  }
  for (int i = 0; i < B.ndevs; i++)
    if (!B.devs[i].is_cpu && B.devs[i].hip_ord < 0 && B.devs[i].na[0] == '\0')
      snprintf(B.devs[i].na, sizeof(B.devs[i].na), "%s", B.direct_na);
  return 0;
}

/* ------------------------------------------------------- hipd, the client */

/* What a section needs on the daemon: a kernel, a stream, its arguments
 * and, for the small kernel, its buffer. */
typedef struct {
  hipd_conn_t *c;
  hipd_kernel_t k;
  hipd_stream_t s;
  hipd_args_t *args;
  hipd_buffer_t buf;
  uint32_t grid[3], block[3];
  char err[600]; /* the failure, when a call returned one */
} hk_t;

static int hk_fail(hk_t *h, const char *what, int rc)
{
  if (h->err[0] == '\0')
    snprintf(h->err, sizeof(h->err), "%s: %s: %s", what, hipd_err_name(rc),
             hipd_last_error(h->c));
  return rc;
}

/* Compile (through the cache) and set up the empty kernel, or with
 * @p elems > 0 the small one over that many floats, on @p dev. */
static int hk_open(hk_t *h, hipd_conn_t *c, int dev, int elems)
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

static void hk_close(hk_t *h)
{
  if (h->s)
    hipd_stream_destroy(h->c, h->s);
  if (h->buf)
    hipd_mem_free(h->c, h->buf);
  if (h->k)
    hipd_kernel_destroy(h->c, h->k);
  hipd_args_free(h->args);
  h->s = h->buf = h->k = 0;
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
static int hk_launch_sync(hk_t *h, int mode)
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

static void sec_rtt(void)
{
  figure_t *f =
      fig_new("sync_rtt", "sync round trip: empty kernel launch + synchronize",
              "us", 1);
  int iters = B.rtt_iters, warm = B.rtt_warmup, iters2 = iters / 4 + 1;
  double *us = malloc(sizeof(double) * (size_t)iters);
  double sock_med = NAN, sock_mean, direct = NAN;
  const char *why;
  char err[300];
  hk_t h;

  snprintf(f->how, sizeof(f->how), "median of %d: %s", iters,
           sync_how[B.sync_mode]);
  if (us == NULL) {
    fig_fail(f, "out of memory");
    return;
  }
  note("sync round trip: hipd (%d iterations)", iters);
  if (hk_open(&h, B.conn, B.dev, 0) != 0) {
    fig_fail(f, "%s", h.err);
  } else {
    int rc = 0;

    for (int i = 0; i < warm && rc == 0; i++)
      rc = hk_launch_sync(&h, B.sync_mode);
    for (int i = 0; i < iters && rc == 0; i++) {
      double t0 = bu_now();

      rc = hk_launch_sync(&h, B.sync_mode);
      us[i] = (bu_now() - t0) * 1e6;
    }
    if (rc == 0) {
      detail_num(f, "hipd_mean_us", bu_mean(us, (size_t)iters));
      f->hipd = bu_median(us, (size_t)iters);
      detail_num(f, "hipd_p10_us", bu_quantile(us, (size_t)iters, 0.1));
      detail_num(f, "hipd_p90_us", bu_quantile(us, (size_t)iters, 0.9));
      detail_str(f, "hipd_sync", sync_names[B.sync_mode]);
    }
    /* For reference: the other ways to wait for a kernel, and hipd's
     * ping, each the median of a quarter as many. */
    for (int m = 0; m < SYNC_MODES && rc == 0; m++) {
      char key[40];

      if (m == B.sync_mode)
        continue;
      for (int i = 0; i < iters2 && rc == 0; i++) {
        double t0 = bu_now();

        rc = hk_launch_sync(&h, m);
        us[i] = (bu_now() - t0) * 1e6;
      }
      snprintf(key, sizeof(key), "hipd_%s_us", sync_names[m]);
      if (rc == 0)
        detail_num(f, key, bu_median(us, (size_t)iters2));
    }
    for (int i = 0; i < iters2 && rc == 0; i++) {
      char echo[64] = {0};
      size_t len;
      double t0 = bu_now();

      if ((rc = hipd_ping(B.conn, echo, 64, echo, sizeof(echo), &len)) != 0)
        hk_fail(&h, "ping", rc);
      us[i] = (bu_now() - t0) * 1e6;
    }
    if (rc == 0)
      detail_num(f, "hipd_ping_64B_us", bu_median(us, (size_t)iters2));
    if (rc != 0)
      fig_fail(f, "%s", h.err);
  }
  hk_close(&h);

  note("sync round trip: bare socket ping-pong");
  if (sock_pingpong(64, iters, warm, &sock_med, &sock_mean, err, sizeof(err)) ==
      0)
    base_set(f, "socket", "bare Unix socket ping-pong, 64 B", sock_med);
  else if (report_failure())
    base_na(f, "socket", "bare Unix socket ping-pong, 64 B", "failed: %s", err);

  if (direct_ok(B.dev, &why)) {
    char ord[16], n[16], w[16];
    const char *args[] = {"rtt",
                          "--device",
                          itoa_tmp(B.devs[B.dev].hip_ord, ord, sizeof(ord)),
                          "--iters",
                          itoa_tmp(iters, n, sizeof(n)),
                          "--warmup",
                          itoa_tmp(warm, w, sizeof(w)),
                          NULL};

    note("sync round trip: direct HIP");
    direct =
        direct_baseline(f, "direct", "direct HIP (same kernel, same device)",
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

static void sec_launch(void)
{
  figure_t *f =
      fig_new("launch_throughput", "async launch throughput, empty kernel",
              "launches/s", 0);
  int n = B.launch_iters;
  double rate[3];
  const char *why;
  hk_t h;

  snprintf(f->how, sizeof(f->how),
           "median of 3 batches of %d kernel.launch_begin (at most %d in "
           "flight, corked) + one stream.synchronize",
           n, LAUNCH_WINDOW);
  note("launch throughput: hipd (3 x %d launches)", n);
  if (hk_open(&h, B.conn, B.dev, 0) != 0) {
    fig_fail(f, "%s", h.err);
  } else if (hk_launch_many(&h, B.rtt_warmup) != 0) {
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
  hk_close(&h);

  if (direct_ok(B.dev, &why)) {
    char ord[16], s[16], w[16];
    const char *args[] = {"launch",
                          "--device",
                          itoa_tmp(B.devs[B.dev].hip_ord, ord, sizeof(ord)),
                          "--iters",
                          itoa_tmp(n, s, sizeof(s)),
                          "--warmup",
                          itoa_tmp(B.rtt_warmup, w, sizeof(w)),
                          NULL};

    note("launch throughput: direct HIP");
    direct_baseline(f, "direct", "direct HIP (same kernel, same device)", args,
                    "launch", "per_s", NULL, NULL);
  } else {
    base_na(f, "direct", "direct HIP (same kernel, same device)", "%s", why);
  }
  base_target(f, "direct", ">=", 0.75);
}

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

/* Transfers repeated for at least B.bw_budget seconds and 3 times, after
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
  } while (t < B.bw_budget || n < 3);
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

static void sec_bw(void)
{
  figure_t *figs[MAX_SIZES][2][2]; /* [size][d2h][inline] */
  dout_t *out = NULL;
  const char *why = NULL;
  int cpu = B.devs[B.dev].is_cpu;
  int direct = direct_ok(B.dev, &why), direct_failed = 0;

  if (direct) {
    char ord[16], sizes[256] = "", budget[32];
    const char *args[] = {"bw",  "--device", ord,    "--sizes",
                          sizes, "--budget", budget, NULL};

    itoa_tmp(B.devs[B.dev].hip_ord, ord, sizeof(ord));
    for (int i = 0; i < B.nsizes; i++)
      snprintf(sizes + strlen(sizes), sizeof(sizes) - strlen(sizes), "%s%llu",
               i ? "," : "", (unsigned long long)B.sizes[i]);
    snprintf(budget, sizeof(budget), "%g", B.bw_budget);
    note("bandwidth: direct HIP, pinned and pageable");
    out = malloc(sizeof(*out));
    if (out == NULL || direct_run(args, 600, "bw", out) != 0) {
      direct_failed = 1;
      report_failure();
    }
  }
  for (int si = 0; si < B.nsizes; si++) {
    uint64_t size = B.sizes[si];
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
                 label, B.bw_budget);
        detail_num(f, "bytes", (double)size);
      }
    note("bandwidth: hipd at %s", label);
    memset(&x, 0, sizeof(x));
    x.c = B.conn;
    x.len = (size_t)size;
    x.host = malloc(x.len);
    if (x.host == NULL) {
      snprintf(x.err, sizeof(x.err), "out of memory for %s", label);
      ok = 0;
    } else if ((rc = hipd_mem_alloc(B.conn, B.dev, size, "byte", &x.buf))) {
      snprintf(x.err, sizeof(x.err), "mem.alloc of %s: %s: %s", label,
               hipd_err_name(rc), hipd_last_error(B.conn));
      ok = 0;
    } else if ((rc = hipd_shm_create(B.conn, x.len, &x.shm)) != 0) {
      snprintf(shm_err, sizeof(shm_err), "shm.create of %s: %s: %s", label,
               hipd_err_name(rc), hipd_last_error(B.conn));
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
      hipd_shm_free(B.conn, x.shm);
    if (x.buf != 0)
      hipd_mem_free(B.conn, x.buf);

    /* The baselines of this size. */
    double sock = NAN, copy[2] = {NAN, NAN};
    char err[300] = "";

    note("bandwidth: socket and memcpy baselines at %s", label);
    if (sock_bulk(size, B.bw_budget, &sock, err, sizeof(err)) != 0) {
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
        static const char *const lab[] = {"direct HIP, pinned host memory",
                                          "direct HIP, pageable host memory"};
        static const char *const key[] = {"pinned", "pageable"};

        for (int m = 0; m < 2; m++) {
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
                  dnum(l, "bytes") == (double)size)
                line = l;
            }
            if (isfinite(v = dnum(line, "gbps")))
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

/* ------------------------------------------------------------ 4. compile */

/* One compile request on B.conn, timed from the client. @p cache gets
 * where the binary came from. @return milliseconds, or NAN (f failed). */
static double compile_once(figure_t *f, int cached, const char *src,
                           const char *name, char *cache, size_t cachesz)
{
  hipd_info_t *info = NULL;
  hipd_kernel_t k = 0;
  double t0 = bu_now(), ms;
  int rc = cached
               ? hipd_kernel_compile_cached(B.conn, B.dev, src, name, NULL, &k,
                                            &info)
               : hipd_kernel_compile(B.conn, B.dev, src, name, NULL, &k, &info);

  ms = (bu_now() - t0) * 1e3;
  if (rc != 0) {
    hfail(f, B.conn, cached ? "kernel.compile_cached" : "kernel.compile", rc);
    return NAN;
  }
  info_strcpy(info, "cache", cache, cachesz);
  hipd_info_free(info);
  if ((rc = hipd_kernel_destroy(B.conn, k)) != 0) {
    hfail(f, B.conn, "kernel.destroy", rc);
    return NAN;
  }
  return ms;
}

/* Time @p n compiles of @p srcs (round robin) into @p f: the median, and
 * how many did not come from @p want (when not NULL). @return 0 or -1. */
static int compile_series(figure_t *f, int cached, char **srcs, int nsrcs,
                          int n, const char *want)
{
  double *ms = malloc(sizeof(double) * (size_t)n);
  int other = 0;
  char cache[32], first_other[32] = "";

  if (ms == NULL) {
    fig_fail(f, "out of memory");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    ms[i] = compile_once(f, cached, srcs[i % nsrcs], BENCH_SMALL_NAME, cache,
                         sizeof(cache));
    if (!isfinite(ms[i])) {
      free(ms);
      return -1;
    }
    if (want != NULL && strcmp(cache, want) != 0 && other++ == 0)
      snprintf(first_other, sizeof(first_other), "%s", cache);
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
  free(ms);
  return 0;
}

static void sec_compile(void)
{
  int nv = B.compile_variants, hits = B.compile_hits;
  char **srcs = calloc((size_t)nv, sizeof(char *));
  size_t len = strlen(BENCH_SMALL_SOURCE) + 96;
  figure_t *fc, *fm, *fl, *fd;
  const char *why;
  double hiprtc = NAN;
  char na[300] = "";

  fc = fig_new("compile_cold", "cold compile: hipd kernel.compile (no cache)",
               "ms", 1);
  fm = fig_new("compile_hit_memory",
               "cache hit in memory: kernel.compile_cached, module loaded anew",
               "ms", 1);
  fl = fig_new("compile_hit_memory_loaded",
               "cache hit in memory, module already loaded", "ms", 1);
  fd = fig_new("compile_hit_disk", "cache hit from disk after a daemon restart",
               "ms", 1);
  fm->speedup = fl->speedup = fd->speedup = 1;
  snprintf(fc->how, sizeof(fc->how),
           "median of %d kernel.compile of new sources (the small kernel and "
           "a distinct comment), client-side time",
           nv);
  snprintf(fm->how, sizeof(fm->how),
           "median of %d kernel.compile_cached of those sources, each kernel "
           "destroyed before the next (its module unloaded)",
           hits);
  snprintf(fl->how, sizeof(fl->how),
           "median of %d kernel.compile_cached while this session keeps the "
           "kernel loaded",
           hits);
  snprintf(fd->how, sizeof(fd->how),
           "median of %d kernel.compile_cached of those sources after hipd "
           "was restarted on the same --cache-dir",
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
    snprintf(srcs[i], len, "%s" BENCH_VARIANT_FMT, BENCH_SMALL_SOURCE, B.run_id,
             i);
  }

  note("compile: hipd cold compiles (%d)", nv);
  if (compile_series(fc, 0, srcs, nv, nv, NULL) != 0) {
    fig_fail(fm, "the cold compiles failed");
    fig_fail(fl, "the cold compiles failed");
    fig_fail(fd, "the cold compiles failed");
    goto baselines;
  }
  note("compile: hipd memory hits (%d)", hits);
  compile_series(fm, 1, srcs, nv, hits, "memory");
  {
    hipd_kernel_t keep = 0;
    int rc = hipd_kernel_compile_cached(B.conn, B.dev, srcs[0],
                                        BENCH_SMALL_NAME, NULL, &keep, NULL);
    if (rc != 0)
      hfail(fl, B.conn, "kernel.compile_cached", rc);
    else
      compile_series(fl, 1, srcs, 1, hits, "memory");
    if (keep)
      hipd_kernel_destroy(B.conn, keep);
  }
  if (!B.own_daemon) {
    snprintf(fd->na, sizeof(fd->na),
             "not measured: the daemon was given with --socket, and this "
             "figure restarts it");
  } else {
    char cache[32];

    note("compile: restarting hipd for the disk hits");
    if (daemon_restart() != 0) {
      fig_fail(fd, "could not restart hipd (see above)");
    } else {
      /* The first request of a new daemon pays for its first session's
       * set-up; it is not part of the figure. */
      compile_once(fd, 1, BENCH_EMPTY_SOURCE, BENCH_EMPTY_NAME, cache,
                   sizeof(cache));
      if (fd->error[0] == '\0')
        compile_series(fd, 1, srcs, nv, nv, "disk");
    }
  }

baselines:
  if (direct_ok(B.dev, &why)) {
    char ord[16], n[16];
    const char *args[] = {"compile",
                          "--device",
                          itoa_tmp(B.devs[B.dev].hip_ord, ord, sizeof(ord)),
                          "--iters",
                          itoa_tmp(nv, n, sizeof(n)),
                          NULL};
    dout_t *out = malloc(sizeof(*out));
    const char *line;

    note("compile: direct hiprtc (%d)", nv);
    if (out != NULL && direct_run(args, 600, "compile", out) == 0 &&
        (line = dout_find(out, "compile")) != NULL &&
        isfinite(hiprtc = dnum(line, "ms_median"))) {
      detail_num(fc, "hiprtc_compile_ms", dnum(line, "compile_ms_median"));
      detail_num(fc, "hiprtc_load_ms", dnum(line, "load_ms_median"));
      detail_num(fc, "hiprtc_first_in_process_ms", dnum(line, "first_ms"));
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
    figure_t *all[] = {fc, fm, fl, fd};
    const char *lab = "cold hiprtc + module load, direct";

    for (int i = 0; i < 4; i++) {
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
    base_target(fd, "hiprtc", ">=", 500);
  }
out:
  for (int i = 0; i < nv; i++)
    free(srcs[i]);
  free(srcs);
}

/* ---------------------------------------------------- 5. sharing a GPU */

/* A forked hipd client of the sharing figure: connect, set up, say
 * ready, wait for the word, loop { launch the small kernel; synchronize }
 * for B.share_seconds and report. Its own connection: nothing of the
 * parent's is used. */
typedef struct {
  int dev;
} hw_arg_t;

static void worker_error(FILE *out, const char *msg)
{
  fputs("{\"kind\":\"error\",\"message\":", out);
  bu_json_str(out, msg);
  fputs("}\n", out);
  fflush(out);
}

static int hipd_worker(void *arg, int in_fd, int out_fd)
{
  hw_arg_t *w = arg;
  FILE *out = fdopen(out_fd, "w");
  hipd_conn_t *c = NULL;
  long long count = 0;
  char go[16];
  double t0, t;
  hk_t h;
  int rc;

  if (out == NULL)
    return 1;
  if ((rc = hipd_connect2(B.sock_path, "hipd_bench worker", &c)) != 0) {
    char msg[600];

    snprintf(msg, sizeof(msg), "connect: %s: %s", hipd_err_name(rc),
             hipd_last_error(NULL));
    worker_error(out, msg);
    return 1;
  }
  hipd_set_timeout(c, CALL_TIMEOUT_MS);
  if (hk_open(&h, c, w->dev, B.share_elems) != 0) {
    worker_error(out, h.err);
    return 1;
  }
  for (int i = 0; i < 10; i++)
    if (hk_launch_sync(&h, B.sync_mode) != 0) {
      worker_error(out, h.err);
      return 1;
    }
  fputs("{\"kind\":\"ready\"}\n", out);
  fflush(out);
  if (read(in_fd, go, sizeof(go)) <= 0)
    return 0; /* the bench gave up */
  t0 = bu_now();
  do {
    if (hk_launch_sync(&h, B.sync_mode) != 0) {
      worker_error(out, h.err);
      return 1;
    }
    count++;
    t = bu_now() - t0;
  } while (t < B.share_seconds);
  fprintf(out, "{\"kind\":\"worker\",\"kernels\":%lld,\"seconds\":%.6f}\n",
          count, t);
  fflush(out);
  hk_close(&h);
  hipd_close(c);
  return 0;
}

/* Run the @p n started workers as one: wait until every one is ready,
 * tell them all to go at once, collect their counts. *@p agg gets the sum
 * of their rates (kernels/s). @p during, if not NULL, runs once they have
 * all started. @return 0, or -1 with the reason in @p err. */
static int pool_run(proc_t *w, int n, double *agg, double *min_rate,
                    void (*during)(void *), void *arg, char *err, size_t errsz)
{
  char line[512];
  double deadline = bu_now() + READY_TIMEOUT, sum = 0, lo = INFINITY;

  for (int i = 0; i < n; i++) {
    int r = proc_readline(&w[i], line, sizeof(line), deadline);

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
  }
  for (int i = 0; i < n; i++)
    if (proc_write(&w[i], "go\n") != 0) {
      snprintf(err, errsz, "client %d of %d went away", i, n);
      return -1;
    }
  if (during != NULL)
    during(arg);
  deadline = bu_now() + B.share_seconds + 120;
  for (int i = 0; i < n; i++) {
    int r = proc_readline(&w[i], line, sizeof(line), deadline);
    double k = NAN, s = NAN;

    if (r == 1 && strstr(line, "\"worker\"") != NULL &&
        bu_json_get_num(line, "kernels", &k) == 0 &&
        bu_json_get_num(line, "seconds", &s) == 0 && s > 0) {
      sum += k / s;
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

/* Aggregate kernels/s of @p n hipd clients, client i on devs[i % ndevs]. */
static int share_hipd(const int *devs, int ndevs, int n, double *agg,
                      double *lo, char *err, size_t errsz)
{
  proc_t *w = calloc((size_t)n, sizeof(*w));
  hw_arg_t *args = calloc((size_t)n, sizeof(*args));
  int rc = -1, started = 0;

  if (w == NULL || args == NULL) {
    snprintf(err, errsz, "out of memory");
    goto out;
  }
  for (; started < n; started++) {
    args[started].dev = devs[started % ndevs];
    if (proc_fork(&w[started], hipd_worker, &args[started], -1) != 0) {
      snprintf(err, errsz, "fork: %s", strerror(errno));
      goto out;
    }
  }
  rc = pool_run(w, n, agg, lo, NULL, NULL, err, errsz);
out:
  if (w != NULL) {
    if (rc != 0)
      for (int i = 0; i < started; i++)
        proc_kill(&w[i]);
    if (pool_reap(w, started) != 0 && rc == 0) {
      snprintf(err, errsz, "a client exited with an error");
      rc = -1;
    }
  }
  free(w);
  free(args);
  return rc;
}

/* Aggregate kernels/s of @p n direct_hip workers with @p env (MPS). */
static int share_direct(const int *devs, int ndevs, int n,
                        const char *const *env, void (*during)(void *),
                        void *during_arg, double *agg, double *lo, char *err,
                        size_t errsz)
{
  proc_t *w = calloc((size_t)n, sizeof(*w));
  char secs[32], elems[32];
  int rc = -1, started = 0;

  if (w == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  snprintf(secs, sizeof(secs), "%g", B.share_seconds);
  snprintf(elems, sizeof(elems), "%d", B.share_elems);
  for (; started < n; started++) {
    char ord[16];
    const char *argv[] = {
        B.direct_bin,
        "worker",
        "--device",
        itoa_tmp(B.devs[devs[started % ndevs]].hip_ord, ord, sizeof(ord)),
        "--seconds",
        secs,
        "--elems",
        elems,
        NULL};

    if (proc_spawn(&w[started], argv, env, NULL, 0) != 0) {
      snprintf(err, errsz, "cannot run %s: %s", B.direct_bin, strerror(errno));
      goto out;
    }
  }
  rc = pool_run(w, n, agg, lo, during, during_arg, err, errsz);
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

/* The sharing figures on @p devs: hipd and independent processes now,
 * MPS later (share_mps), for each client count. */
static void sec_share(const int *devs, int ndevs, const char *suffix)
{
  char dl[64];
  const char *why = NULL;
  int direct = 1;

  devs_str(devs, ndevs, dl, sizeof(dl));
  for (int i = 0; i < ndevs && direct; i++)
    direct = direct_ok(devs[i], &why);
  for (int ci = 0; ci < B.nclients; ci++) {
    int n = B.clients[ci];
    char name[48], title[96], err[600];
    double agg = NAN, lo = NAN;
    figure_t *f;

    snprintf(name, sizeof(name), "share_n%d%s", n, suffix);
    snprintf(title, sizeof(title),
             "sharing: %d client process%s on device%s %s, aggregate", n,
             n == 1 ? "" : "es", ndevs > 1 ? "s" : "", dl);
    f = fig_new(name, title, "kernels/s", 0);
    snprintf(f->devices, sizeof(f->devices), "%s", dl);
    f->device = devs[0];
    snprintf(f->how, sizeof(f->how),
             "%d forked clients, client i on device devs[i mod %d], each "
             "looping {launch a %d-float kernel; wait for it} for %g s, "
             "started together; sum of their rates. Each iteration: %s",
             n, ndevs, B.share_elems, B.share_seconds, sync_how[B.sync_mode]);
    detail_num(f, "clients", n);
    note("sharing: %d hipd client%s on device%s %s", n, n == 1 ? "" : "s",
         ndevs > 1 ? "s" : "", dl);
    if (share_hipd(devs, ndevs, n, &agg, &lo, err, sizeof(err)) == 0) {
      f->hipd = agg;
      detail_num(f, "hipd_slowest_client", lo);
    } else {
      fig_fail(f, "%s", err);
    }
    if (direct) {
      note("sharing: %d independent direct-HIP process%s", n,
           n == 1 ? "" : "es");
      if (share_direct(devs, ndevs, n, NULL, NULL, NULL, &agg, &lo, err,
                       sizeof(err)) == 0) {
        base_set(f, "direct", "independent direct-HIP processes", agg);
        detail_num(f, "direct_slowest_client", lo);
      } else {
        base_na(f, "direct", "independent direct-HIP processes",
                "direct_hip workers failed: %s", err);
        report_failure();
      }
    } else {
      base_na(f, "direct", "independent direct-HIP processes", "%s", why);
    }
    if (B.nshares < (int)(sizeof(B.shares) / sizeof(B.shares[0]))) {
      share_run_t *s = &B.shares[B.nshares++];

      s->fig = f;
      memcpy(s->devs, devs, sizeof(int) * (size_t)ndevs);
      s->ndevs = ndevs;
      s->n = n;
    }
    if (n == 16) {
      base_target(f, "direct", ">=", 2.0);
    }
  }
}

/* ------------------------------------------------------------------ MPS */

/* While MPS clients run: does the control daemon have a server (are they
 * on MPS at all)? */
static void mps_check(void *arg)
{
  int *seen = arg;

  bu_sleep(B.share_seconds / 4);
  if (mps_has_server())
    *seen = 1;
}

static void share_mps(void)
{
  char na[300] = "", err[600];
  const char *why;

  if (B.nshares == 0)
    return;
  if (B.devs[B.shares[0].devs[0]].is_cpu)
    snprintf(na, sizeof(na), "not applicable on the CPU device");
  else if (strcmp(B.devs[B.shares[0].devs[0]].platform, "nvidia") != 0)
    snprintf(na, sizeof(na), "MPS is NVIDIA's; this device is %s",
             B.devs[B.shares[0].devs[0]].platform);
  else if (B.no_mps)
    snprintf(na, sizeof(na), "not measured (--no-mps)");
  else if (mps_find() != 0)
    snprintf(na, sizeof(na),
             "nvidia-cuda-mps-control is not on PATH: MPS not available");
  else if (mps_start(B.tmp, err, sizeof(err)) != 0)
    snprintf(na, sizeof(na), "MPS did not start: %.250s", err);
  for (int i = 0; i < B.nshares; i++) {
    share_run_t *s = &B.shares[i];
    const char *label = "the same processes under NVIDIA MPS";
    double agg, lo;
    int direct = 1;

    for (int j = 0; j < s->ndevs && direct; j++)
      direct = direct_ok(s->devs[j], &why);
    if (na[0] != '\0') {
      base_na(s->fig, "mps", label, "%s", na);
    } else if (!direct) {
      base_na(s->fig, "mps", label, "%s", why);
    } else {
      note("sharing: %d direct-HIP process%s under MPS", s->n,
           s->n == 1 ? "" : "es");
      int seen = 0;

      if (share_direct(s->devs, s->ndevs, s->n, mps_env(), mps_check, &seen,
                       &agg, &lo, err, sizeof(err)) == 0) {
        base_set(s->fig, "mps", label, agg);
        detail_num(s->fig, "mps_slowest_client", lo);
        detail_str(s->fig, "mps_server_seen", seen ? "yes" : "no");
        if (!seen)
          note("MPS: get_server_list named no server during the run: the "
               "clients may not have used MPS");
      } else {
        base_na(s->fig, "mps", label, "direct_hip workers under MPS failed: %s",
                err);
        report_failure();
      }
    }
    if (s->n == 16)
      base_target(s->fig, "mps", ">=", 1.0);
  }
  if (mps_active())
    mps_stop();
}

/* ------------------------------------------------ 7. GPU-to-GPU copies */

static void sec_peer(int a, int b)
{
  char name[64], title[96], label[32];
  figure_t *f;
  hipd_buffer_t src = 0, dst = 0;
  const char *why = NULL;
  uint64_t len = B.peer_bytes;
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
           B.bw_budget);
  note("peer copy: hipd, device %d -> %d", a, b);
  if ((rc = hipd_mem_alloc(B.conn, a, len, "byte", &src)) != 0 ||
      (rc = hipd_mem_alloc(B.conn, b, len, "byte", &dst)) != 0) {
    hfail(f, B.conn, "mem.alloc", rc);
  } else if ((rc = hipd_mem_memset(B.conn, src, 0, len, 7)) != 0 ||
             (rc = hipd_mem_copy(B.conn, dst, 0, src, 0, len)) != 0) {
    hfail(f, B.conn, "mem.copy", rc);
  } else {
    double t0 = bu_now(), t;

    do {
      if ((rc = hipd_mem_copy(B.conn, dst, 0, src, 0, len)) != 0) {
        hfail(f, B.conn, "mem.copy", rc);
        break;
      }
      n++;
      t = bu_now() - t0;
    } while (t < B.bw_budget || n < 3);
    if (rc == 0)
      f->hipd = (double)len * n / t / 1e9;
  }
  if (src)
    hipd_mem_free(B.conn, src);
  if (dst)
    hipd_mem_free(B.conn, dst);

  if (direct_ok(a, &why) && direct_ok(b, &why)) {
    char oa[16], ob[16], bytes[32], budget[32];
    const char *args[] = {"peer",
                          "--device",
                          itoa_tmp(B.devs[a].hip_ord, oa, sizeof(oa)),
                          "--peer",
                          itoa_tmp(B.devs[b].hip_ord, ob, sizeof(ob)),
                          "--bytes",
                          bytes,
                          "--budget",
                          budget,
                          NULL};
    double access = NAN;

    snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)len);
    snprintf(budget, sizeof(budget), "%g", B.bw_budget);
    note("peer copy: direct hipMemcpyPeerAsync");
    if (isfinite(direct_baseline(f, "direct",
                                 "direct hipMemcpyPeerAsync + sync", args,
                                 "peer", "gbps", "peer_access", &access)))
      detail_num(f, "direct_peer_access", access);
  } else {
    base_na(f, "direct", "direct hipMemcpyPeerAsync + sync", "%s", why);
  }
}

/* ----------------------------------------------------------------- output */

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
  fprintf(
      f,
      "Usage: hipd_bench [OPTION]...\n"
      "hipd's benchmarks: each figure next to its baselines, measured in\n"
      "the same run on the same device (bench/README.md).\n"
      "\n"
      "  --socket PATH      use the hipd listening there (default: start\n"
      "                     our own, $HIPD_BIN or this tree's, on a private\n"
      "                     socket and cache directory)\n"
      "  --daemon-arg ARG   pass ARG to the hipd we start (repeatable)\n"
      "  --device N|cpu|gpu hipd device to measure (default: 0)\n"
      "  --smoke            tiny counts: seconds, for make check\n"
      "  --json FILE        write the figures as JSON to FILE\n"
      "  --only LIST        sections: rtt,launch,bw,compile,share,spread,peer\n"
      "                     (default: all; spread and peer need 2 devices)\n"
      "  --clients LIST     sharing: client counts (1,4,16; smoke 1,4)\n"
      "  --spread[=LIST]    sharing also over the devices of LIST, client i\n"
      "                     on device i mod n (default: every GPU; runs by\n"
      "                     itself when hipd serves 2 or more GPUs)\n"
      "  --peer A,B         device pair of the copy figure (default: the\n"
      "                     first two GPUs, when there are 2)\n"
      "  --sizes LIST       bandwidth sizes, K/M/G suffixes (1K,1M,256M;\n"
      "                     smoke 1K,1M)\n"
      "  --seconds S        sharing: length of each run (3; smoke 0.3)\n"
      "  --elems N          sharing: floats per small kernel (65536; smoke "
      "1024)\n"
      "  --no-mps           skip the MPS baseline\n"
      "  --sync MODE        how clients wait for a kernel: run (one request,\n"
      "                     the default), corked (launch + synchronize\n"
      "                     written together) or calls (two round trips)\n"
      "  --timeout S        stop everything after S seconds (900; smoke 300)\n"
      "  -h, --help         this help\n"
      "\n"
      "Environment: HIPD_BIN (the daemon), HIPD_BENCH_DIRECT (direct_hip).\n");
}

static int parse_args(int argc, char **argv)
{
  enum {
    OPT_SOCKET = 256,
    OPT_DAEMON_ARG,
    OPT_DEVICE,
    OPT_SMOKE,
    OPT_JSON,
    OPT_ONLY,
    OPT_CLIENTS,
    OPT_SPREAD,
    OPT_PEER,
    OPT_SIZES,
    OPT_SECONDS,
    OPT_ELEMS,
    OPT_NO_MPS,
    OPT_SYNC,
    OPT_TIMEOUT,
  };
  static const struct option longopts[] = {
      {"socket", required_argument, NULL, OPT_SOCKET},
      {"daemon-arg", required_argument, NULL, OPT_DAEMON_ARG},
      {"device", required_argument, NULL, OPT_DEVICE},
      {"smoke", no_argument, NULL, OPT_SMOKE},
      {"json", required_argument, NULL, OPT_JSON},
      {"only", required_argument, NULL, OPT_ONLY},
      {"clients", required_argument, NULL, OPT_CLIENTS},
      {"spread", optional_argument, NULL, OPT_SPREAD},
      {"peer", required_argument, NULL, OPT_PEER},
      {"sizes", required_argument, NULL, OPT_SIZES},
      {"seconds", required_argument, NULL, OPT_SECONDS},
      {"elems", required_argument, NULL, OPT_ELEMS},
      {"no-mps", no_argument, NULL, OPT_NO_MPS},
      {"sync", required_argument, NULL, OPT_SYNC},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c, nclients = -1, nsizes = -1;
  double seconds = -1, timeout = -1;
  long elems = -1;

  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
    case OPT_SOCKET:
      B.socket = optarg;
      break;
    case OPT_DAEMON_ARG:
      if (B.ndaemon_args == MAX_DAEMON_ARGS) {
        note("too many --daemon-arg");
        return -1;
      }
      B.daemon_args[B.ndaemon_args++] = optarg;
      break;
    case OPT_DEVICE:
      B.dev_arg = optarg;
      break;
    case OPT_SMOKE:
      B.smoke = 1;
      break;
    case OPT_JSON:
      B.json_path = optarg;
      break;
    case OPT_ONLY: {
      char buf[256], *save = NULL, *tok;

      snprintf(buf, sizeof(buf), "%s", optarg);
      B.only = 0;
      for (tok = strtok_r(buf, ",", &save); tok != NULL;
           tok = strtok_r(NULL, ",", &save)) {
        size_t i;

        for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
          if (strcmp(tok, sections[i].name) == 0)
            break;
        if (i == sizeof(sections) / sizeof(sections[0])) {
          note("--only: unknown section '%s'", tok);
          return -1;
        }
        B.only |= sections[i].bit;
      }
      break;
    }
    case OPT_CLIENTS:
      nclients = bu_parse_int_list(optarg, B.clients, MAX_CLIENTS);
      for (int i = 0; i < nclients; i++)
        if (B.clients[i] < 1 || B.clients[i] > MAX_WORKERS)
          nclients = -2;
      if (nclients < 0) {
        note("--clients: a comma list of 1 to %d", MAX_WORKERS);
        return -1;
      }
      B.nclients = nclients;
      break;
    case OPT_SPREAD:
      B.spread_forced = 1;
      if (optarg != NULL && (B.nspread = bu_parse_int_list(
                                 optarg, B.spread_devs, MAX_DEVICES)) < 1) {
        note("--spread: a comma list of device ids");
        return -1;
      }
      break;
    case OPT_PEER:
      if (bu_parse_int_list(optarg, B.peer_devs, 2) != 2 ||
          B.peer_devs[0] == B.peer_devs[1]) {
        note("--peer: two different device ids, A,B");
        return -1;
      }
      B.npeer = 2;
      break;
    case OPT_SIZES:
      nsizes = bu_parse_size_list(optarg, B.sizes, MAX_SIZES);
      if (nsizes < 0) {
        note("--sizes: a comma list of sizes such as 1K,1M,256M");
        return -1;
      }
      B.nsizes = nsizes;
      break;
    case OPT_SECONDS:
      seconds = atof(optarg);
      if (!(seconds > 0 && seconds < 3600)) {
        note("--seconds: between 0 and 3600");
        return -1;
      }
      break;
    case OPT_ELEMS:
      elems = atol(optarg);
      if (elems < 1 || elems > 1 << 28) {
        note("--elems: 1 to 2^28");
        return -1;
      }
      break;
    case OPT_NO_MPS:
      B.no_mps = 1;
      break;
    case OPT_SYNC:
      for (B.sync_mode = 0; B.sync_mode < SYNC_MODES; B.sync_mode++)
        if (strcmp(optarg, sync_names[B.sync_mode]) == 0)
          break;
      if (B.sync_mode == SYNC_MODES) {
        note("--sync: run, corked or calls");
        return -1;
      }
      break;
    case OPT_TIMEOUT:
      timeout = atof(optarg);
      if (!(timeout >= 1)) {
        note("--timeout: at least 1 second");
        return -1;
      }
      break;
    case 'h':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      return -1;
    }
  }
  if (optind != argc) {
    usage(stderr);
    return -1;
  }
  /* Counts: full, or a few seconds in all for --smoke. */
  B.rtt_iters = B.smoke ? 200 : 20000;
  B.rtt_warmup = B.smoke ? 20 : 1000;
  B.launch_iters = B.smoke ? 300 : 50000;
  B.compile_variants = B.smoke ? 1 : 5;
  B.compile_hits = B.smoke ? 10 : 200;
  B.bw_budget = B.smoke ? 0.02 : 0.3;
  B.peer_bytes = B.smoke ? (uint64_t)1 << 20 : (uint64_t)256 << 20;
  B.share_seconds = seconds > 0 ? seconds : B.smoke ? 0.3 : 3;
  B.share_elems = elems > 0 ? (int)elems : B.smoke ? 1024 : 65536;
  B.timeout = timeout > 0 ? timeout : B.smoke ? 300 : 900;
  if (nclients < 0) {
    static const int full[] = {1, 4, 16}, smoke[] = {1, 4};

    B.nclients = B.smoke ? 2 : 3;
    memcpy(B.clients, B.smoke ? smoke : full, sizeof(int) * (size_t)B.nclients);
  }
  if (nsizes < 0) {
    B.nsizes = B.smoke ? 2 : 3;
    B.sizes[0] = 1024;
    B.sizes[1] = 1 << 20;
    B.sizes[2] = (uint64_t)256 << 20;
  }
  return 0;
}

/* The device --device names, once the daemon's devices are known. */
static int pick_device(void)
{
  const char *a = B.dev_arg ? B.dev_arg : "0";

  if (strcmp(a, "cpu") == 0 || strcmp(a, "gpu") == 0) {
    for (int i = 0; i < B.ndevs; i++)
      if (B.devs[i].is_cpu == (a[0] == 'c'))
        return B.dev = i;
    note("--device %s: the daemon serves no %s device", a,
         a[0] == 'c' ? "CPU" : "GPU");
    return -1;
  }
  char *end;
  long v = strtol(a, &end, 10);
  if (end == a || *end != '\0' || v < 0 || v >= B.ndevs) {
    note("--device %s: the daemon serves devices 0 to %d", a, B.ndevs - 1);
    return -1;
  }
  return B.dev = (int)v;
}

static void programs_find(void)
{
  const char *env = getenv("HIPD_BIN");

  if (env != NULL && env[0] != '\0')
    snprintf(B.hipd_bin, sizeof(B.hipd_bin), "%s", env);
  else
    snprintf(B.hipd_bin, sizeof(B.hipd_bin), "%s/hipd", BENCH_BUILDDIR);
  env = getenv("HIPD_BENCH_DIRECT");
  if (env != NULL)
    snprintf(B.direct_bin, sizeof(B.direct_bin), "%s", env);
#ifdef HAVE_HIP
  else
    snprintf(B.direct_bin, sizeof(B.direct_bin), "%s/bench/direct_hip",
             BENCH_BUILDDIR);
#endif
}

/* ------------------------------------------------------------------- main */

/* Write the JSON file, if one was asked for: after each section (so that
 * an interrupted run leaves what it measured) and, @p complete, at the
 * end. @return 0 or -1. */
static int json_save(int complete)
{
  report_meta_t meta = {
      .hipd_version = B.hipd_version,
      .features = B.features,
      .date = B.date,
      .host = B.host,
      .mode = B.smoke ? "smoke" : "full",
      .complete = complete,
      .own_daemon = B.own_daemon,
      .devs = B.devs,
      .ndevs = B.ndevs,
      .device = B.dev,
      .platform = B.platform,
      .hip_version = B.hip_version,
      .runtime_version = B.runtime_version,
      .driver_version = B.driver_version,
  };

  return B.json_path != NULL ? report_write_json(B.json_path, &meta) : 0;
}

static int cleanup(void)
{
  int rc = 0;

  if (mps_active())
    mps_stop();
  conn_close();
  if (B.own_daemon && daemon_stop() != 0)
    rc = -1;
  tmp_remove();
  return rc;
}

int main(int argc, char **argv)
{
  time_t now = time(NULL);
  struct tm tm;
  int rc = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (parse_args(argc, argv) != 0)
    return 2;
  programs_find();
  signals_setup();
  alarm((unsigned)B.timeout);
  gmtime_r(&now, &tm);
  strftime(B.date, sizeof(B.date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  gethostname(B.host, sizeof(B.host) - 1);
  B.run_id = (unsigned long long)now << 20 ^ (unsigned long long)getpid();
  if (tmp_make() != 0)
    return 2;

  if (B.socket != NULL) {
    B.sock_path = B.socket;
  } else {
    snprintf(B.sock, sizeof(B.sock), "%s/hipd.sock", B.tmp);
    snprintf(B.cache, sizeof(B.cache), "%s/cache", B.tmp);
    snprintf(B.log, sizeof(B.log), "%s/hipd.log", B.tmp);
    B.sock_path = B.sock;
    note("starting %s", B.hipd_bin);
    if (daemon_start() != 0) {
      cleanup();
      return 2;
    }
    B.own_daemon = 1;
  }
  if (conn_open() != 0 || discover() != 0 || pick_device() < 0) {
    cleanup();
    return 2;
  }
  report_set_device(B.dev, B.devs[B.dev].is_cpu);
  note("hipd %s (%s), device %d: %s (%s, %s)", B.hipd_version, B.features,
       B.dev, B.devs[B.dev].name, B.devs[B.dev].driver, B.devs[B.dev].arch);
  if (B.devs[B.dev].hip_ord >= 0)
    note("direct HIP baselines on HIP device %d (HIP %s, runtime %lld, "
         "driver %lld)",
         B.devs[B.dev].hip_ord, B.hip_version, B.runtime_version,
         B.driver_version);
  else
    note("no direct HIP baselines: %s", B.devs[B.dev].na);

  if (B.only & SEC_RTT)
    sec_rtt(), json_save(0);
  if (B.only & SEC_LAUNCH)
    sec_launch(), json_save(0);
  if (B.only & SEC_BW)
    sec_bw(), json_save(0);
  if (B.only & SEC_COMPILE)
    sec_compile(), json_save(0);
  if (B.only & SEC_PEER) {
    int a = -1, b = -1;

    if (B.npeer == 2) {
      a = B.peer_devs[0];
      b = B.peer_devs[1];
      if (a >= B.ndevs || b >= B.ndevs) {
        note("--peer %d,%d: the daemon serves devices 0 to %d", a, b,
             B.ndevs - 1);
        a = b = -1;
        report_failure();
      }
    } else {
      for (int i = 0; i < B.ndevs && b < 0; i++) {
        if (B.devs[i].is_cpu)
          continue;
        if (a < 0)
          a = i;
        else
          b = i;
      }
    }
    if (a >= 0 && b >= 0)
      sec_peer(a, b), json_save(0);
  }
  if (B.only & SEC_SHARE)
    sec_share(&B.dev, 1, ""), json_save(0);
  if (B.only & SEC_SPREAD) {
    int devs[MAX_DEVICES], n = 0;

    if (B.nspread > 0) {
      for (int i = 0; i < B.nspread; i++) {
        if (B.spread_devs[i] >= B.ndevs) {
          note("--spread: no device %d", B.spread_devs[i]);
          report_failure();
          n = 0;
          break;
        }
        devs[n++] = B.spread_devs[i];
      }
    } else {
      for (int i = 0; i < B.ndevs; i++)
        if (!B.devs[i].is_cpu)
          devs[n++] = i;
    }
    if (n >= 2 || (B.spread_forced && n >= 1))
      sec_share(devs, n, "_spread"), json_save(0);
    else if (B.spread_forced)
      note("--spread: the daemon serves %d GPU(s); give --spread=LIST", n);
  }
  if (B.only & (SEC_SHARE | SEC_SPREAD)) {
    /* hipd has nothing left to measure: the MPS server gets a GPU that no
     * context of ours shares with it. */
    if (B.own_daemon && B.nshares > 0 && !B.devs[B.dev].is_cpu) {
      conn_close();
      if (daemon_stop() != 0)
        report_failure();
    }
    share_mps();
  }

  report_print(stdout);
  rc = json_save(1);
  if (B.json_path != NULL && rc == 0)
    note("figures written to %s", B.json_path);
  if (cleanup() != 0)
    rc = -1;
  if (report_failures() > 0)
    note("%d figure(s) or baseline(s) failed: see above", report_failures());
  return rc != 0 || report_failures() > 0 ? 1 : 0;
}
