/* SPDX-License-Identifier: MIT */
/* bench/hb_daemon.c: hipd_bench's own daemon (started on a private socket
 * with a private cache, stopped and restarted), its connection, the
 * temporary directory, and the signals that undo all of it.
 */
#include "config.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "mps.h"

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

void hb_signals_setup(void)
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

void hb_tmp_remove(void)
{
  if (hb.tmp[0] != '\0')
    nftw(hb.tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  hb.tmp[0] = '\0';
  E.rm_argv[0] = NULL;
}

int hb_tmp_make(void)
{
  const char *root = getenv("TMPDIR");

  if (root == NULL || root[0] == '\0' || strlen(root) > 64)
    root = "/tmp";
  snprintf(hb.tmp, sizeof(hb.tmp), "%s/hipd-bench-XXXXXX", root);
  if (mkdtemp(hb.tmp) == NULL) {
    note("mkdtemp %s: %s", hb.tmp, strerror(errno));
    hb.tmp[0] = '\0';
    return -1;
  }
  E.rm_argv[0] = "/bin/rm";
  E.rm_argv[1] = "-rf";
  E.rm_argv[2] = hb.tmp;
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

/* Start our daemon on hb.sock with the cache in hb.cache and wait until it
 * accepts connections. With hb.socket_open, other users may connect (the
 * socket's mode 0666, the temporary directory traversable: the tenants
 * figure's clients); hb.isolation_arg, when set, is its --isolation, after
 * the --daemon-arg options. @return 0 or -1 (its log is printed). */
int hb_daemon_start(void)
{
  const char *argv[MAX_DAEMON_ARGS + 12], *env[3];
  int n = 0, nenv = 0;
  double deadline;

  argv[n++] = hb.hipd_bin;
  argv[n++] = "--socket";
  argv[n++] = hb.sock;
  argv[n++] = "--cache-dir";
  argv[n++] = hb.cache;
  if (hb.socket_open) {
    if (chmod(hb.tmp, 0711) != 0) {
      note("chmod %s: %s", hb.tmp, strerror(errno));
      return -1;
    }
    argv[n++] = "--socket-mode";
    argv[n++] = "0666";
  }
  for (int i = 0; i < hb.ndaemon_args; i++)
    argv[n++] = hb.daemon_args[i];
  if (hb.isolation_arg != NULL) {
    argv[n++] = "--isolation";
    argv[n++] = hb.isolation_arg;
  }
  argv[n] = NULL;
  daemon_env(env, &nenv);
  if (proc_spawn(&hb.daemon, argv, env, hb.log, 1) != 0) {
    note("cannot start %s: %s", hb.hipd_bin, strerror(errno));
    return -1;
  }
  deadline = bu_now() + 120;
  while (!socket_answers(hb.sock)) {
    if (proc_poll(&hb.daemon)) {
      note("hipd exited at start; its log:");
      bu_log_tail(hb.log, 40);
      return -1;
    }
    if (bu_now() > deadline) {
      note("hipd accepted no connection within 120 s; its log:");
      bu_log_tail(hb.log, 40);
      proc_kill(&hb.daemon);
      return -1;
    }
    bu_sleep(0.02);
  }
  return 0;
}

/* Stop our daemon as an administrator would (SIGTERM), killing it (and its
 * CPU runner) if it has not exited after 20 s. @return 0 if it exited
 * cleanly. */
int hb_daemon_stop(void)
{
  double deadline = bu_now() + 20;
  int code;

  if (hb.daemon.pid == 0)
    return 0;
  kill(hb.daemon.pid, SIGTERM);
  while (!proc_poll(&hb.daemon)) {
    if (bu_now() > deadline) {
      note("hipd ignored SIGTERM for 20 s: killing it");
      proc_kill(&hb.daemon);
      return -1;
    }
    bu_sleep(0.01);
  }
  code = WIFEXITED(hb.daemon.status) ? WEXITSTATUS(hb.daemon.status) : -1;
  if (code != 0) {
    note("hipd exited with status %d; its log:", code);
    bu_log_tail(hb.log, 40);
    return -1;
  }
  return 0;
}

/* Open hb.conn. @return 0 or -1 (said why). */
int hb_conn_open(void)
{
  int rc = hipd_connect2(hb.sock_path, "hipd_bench", &hb.conn);

  if (rc != 0) {
    note("cannot connect to hipd at %s: %s: %s",
         hb.sock_path ? hb.sock_path : "(default socket)", hipd_err_name(rc),
         hipd_last_error(NULL));
    hb.conn = NULL;
    return -1;
  }
  hipd_set_timeout(hb.conn, CALL_TIMEOUT_MS);
  return 0;
}

void hb_conn_close(void)
{
  if (hb.conn != NULL)
    hipd_close(hb.conn);
  hb.conn = NULL;
}

/* Restart our daemon with the same cache directory (the disk figure).
 * @return 0 or -1. */
int hb_daemon_restart(void)
{
  hb_conn_close();
  if (hb_daemon_stop() != 0)
    return -1;
  if (hb_daemon_start() != 0 || hb_conn_open() != 0)
    return -1;
  /* The listener's pid changed: the CPU figures after this (cpu_n*,
   * --profile) count the process tree under it. */
  hb_isolation_read();
  return 0;
}
