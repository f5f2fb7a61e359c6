/* SPDX-License-Identifier: MIT */
/* bench/mps.c: see mps.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "mps.h"
#include "procs.h"
#include "report.h"

static struct {
  char ctl[512]; /* nvidia-cuda-mps-control */
  char pipe[300], logdir[300];
  char env_pipe[340], env_log[340];
  const char *env[3];
  /* for mps_quit_now(), set before the daemon starts */
  char *argv[2];
  char *envp[3];
  volatile sig_atomic_t active;
} M;

int mps_find(void)
{
  const char *path = getenv("PATH");
  char dir[480];

  while (path != NULL && *path != '\0') {
    size_t n = strcspn(path, ":");

    snprintf(dir, sizeof(dir), "%.*s", (int)n, path);
    snprintf(M.ctl, sizeof(M.ctl), "%s/nvidia-cuda-mps-control",
             dir[0] ? dir : ".");
    if (access(M.ctl, X_OK) == 0)
      return 0;
    path += n + (path[n] == ':');
  }
  M.ctl[0] = '\0';
  return -1;
}

/* Run the control program with @p input on its stdin; its output (cut to
 * @p size) into @p outbuf. @return its exit code, or -1. */
static int mps_ctl(const char *input, char *outbuf, size_t size)
{
  const char *argv[] = {M.ctl, NULL};
  char line[256];
  proc_t p;
  double deadline = bu_now() + 30;

  if (outbuf != NULL && size > 0)
    outbuf[0] = '\0';
  if (proc_spawn(&p, argv, M.env, NULL, 0) != 0)
    return -1;
  proc_write(&p, input);
  close(p.in_fd);
  p.in_fd = -1;
  while (proc_readline(&p, line, sizeof(line), deadline) == 1)
    if (outbuf != NULL)
      snprintf(outbuf + strlen(outbuf), size - strlen(outbuf), "%s\n", line);
  return proc_wait(&p, 10);
}

/* The pids of MPS processes that run on our pipe directory (their
 * environment names it). @return how many, at most @p max. */
static int mps_pids(pid_t *pids, int max)
{
  char want[360], path[300], buf[65536];
  DIR *d = opendir("/proc");
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return 0;
  snprintf(want, sizeof(want), "CUDA_MPS_PIPE_DIRECTORY=%s", M.pipe);
  while ((e = readdir(d)) != NULL && n < max) {
    ssize_t len;
    int fd;

    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
    if ((fd = open(path, O_RDONLY)) < 0)
      continue;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0 || strncmp(buf, "nvidia-cuda-mps", 15) != 0)
      continue;
    snprintf(path, sizeof(path), "/proc/%s/environ", e->d_name);
    if ((fd = open(path, O_RDONLY)) < 0)
      continue;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    for (ssize_t i = 0; len > 0 && i < len; i += (ssize_t)strlen(buf + i) + 1)
      if (strcmp(buf + i, want) == 0) {
        pids[n++] = (pid_t)atoi(e->d_name);
        break;
      }
  }
  closedir(d);
  return n;
}

void mps_quit_now(void)
{
  if (M.active)
    procs_run_safely(M.argv, M.envp, "quit\n", 20);
}

int mps_start(const char *dir, char *err, size_t errsz)
{
  const char *argv[] = {M.ctl, "-d", NULL};
  char log[340], ctl_pipe[340];
  proc_t p;
  int code;

  snprintf(M.pipe, sizeof(M.pipe), "%s/mps-pipe", dir);
  snprintf(M.logdir, sizeof(M.logdir), "%s/mps-log", dir);
  if ((mkdir(M.pipe, 0700) != 0 && errno != EEXIST) ||
      (mkdir(M.logdir, 0700) != 0 && errno != EEXIST)) {
    snprintf(err, errsz, "mkdir %s: %s", M.pipe, strerror(errno));
    return -1;
  }
  snprintf(M.env_pipe, sizeof(M.env_pipe), "CUDA_MPS_PIPE_DIRECTORY=%s",
           M.pipe);
  snprintf(M.env_log, sizeof(M.env_log), "CUDA_MPS_LOG_DIRECTORY=%s", M.logdir);
  M.env[0] = M.env_pipe;
  M.env[1] = M.env_log;
  M.env[2] = NULL;
  M.argv[0] = M.ctl;
  M.argv[1] = NULL;
  M.envp[0] = M.env_pipe;
  M.envp[1] = M.env_log;
  M.envp[2] = NULL;
  M.active = 1;
  snprintf(log, sizeof(log), "%s/mps-start.log", dir);
  if (proc_spawn(&p, argv, M.env, log, 0) != 0) {
    snprintf(err, errsz, "cannot run %s: %s", M.ctl, strerror(errno));
    M.active = 0;
    return -1;
  }
  code = proc_wait(&p, 30);
  if (code != 0) {
    snprintf(err, errsz,
             "%.200s -d exited with status %d (see %.200s/control.log)", M.ctl,
             code, M.logdir);
    bu_log_tail(log, 10);
    return -1;
  }
  snprintf(ctl_pipe, sizeof(ctl_pipe), "%s/control", M.pipe);
  for (double deadline = bu_now() + 15; access(ctl_pipe, F_OK) != 0;) {
    if (bu_now() > deadline) {
      snprintf(err, errsz, "the MPS control daemon made no %s within 15 s",
               ctl_pipe);
      return -1;
    }
    bu_sleep(0.05);
  }
  return 0;
}

void mps_stop(void)
{
  pid_t pids[16];
  int n;
  double deadline = bu_now() + 30;

  if (!M.active)
    return;
  if (mps_ctl("quit\n", NULL, 0) != 0)
    note("MPS: 'quit' failed; ending the MPS processes of %s", M.pipe);
  while ((n = mps_pids(pids, 16)) > 0 && bu_now() < deadline)
    bu_sleep(0.1);
  if (n > 0) {
    note("MPS: %d process(es) still running after quit: SIGTERM", n);
    for (int i = 0; i < n; i++)
      kill(pids[i], SIGTERM);
    bu_sleep(2);
    n = mps_pids(pids, 16);
    for (int i = 0; i < n; i++)
      kill(pids[i], SIGKILL);
  }
  M.active = 0;
}

const char *const *mps_env(void)
{
  return M.env;
}

int mps_has_server(void)
{
  char out[512];

  return mps_ctl("get_server_list\n", out, sizeof(out)) == 0 &&
         strpbrk(out, "0123456789") != NULL;
}

int mps_active(void)
{
  return M.active;
}
