/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers_probe.c: a worker run once to check the options, at
 * start (blocking) or for a reload (on the loop) (workers.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "privsep/workers.h"
#include "privsep/workers_pool.h"

int workers_probe(daemon_t *d, hipd_err_t *err)
{
  char role[64] = "--worker=probe:0:0:0", **args, **env;
  char count[32] = "", fdvar[] = WORKER_PROBE_FD_ENV "=3";
  int status, pfd[2] = {-1, -1};
  size_t ne = 0;
  ssize_t n;
  pid_t pid;

  if (workers_exec_args(role, 1, &args, &env) != 0)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  /* The probe writes how many devices it found to descriptor 3 (grant.add
   * checks device ids against it: the listener opens none). */
  if (pipe2(pfd, O_CLOEXEC) == 0) {
    while (env[ne] != NULL)
      ne++;
    env[ne] = fdvar;
  }
  pid = fork();
  if (pid == 0) {
    if (pfd[1] >= 0 && dup2(pfd[1], 3) < 0)
      _exit(127);
    execve(workers_pool.exe, args, env);
    _exit(127);
  }
  free(args);
  free(env);
  if (pfd[1] >= 0)
    close(pfd[1]);
  if (pid < 0) {
    if (pfd[0] >= 0)
      close(pfd[0]);
    return err_set(err, HIPD_EIO, "cannot start a worker: fork: %s",
                   strerror(errno));
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (pfd[0] >= 0) {
    do
      n = read(pfd[0], count, sizeof(count) - 1);
    while (n < 0 && errno == EINTR);
    count[n > 0 ? n : 0] = '\0';
    close(pfd[0]);
    d->worker_devices = atoi(count);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  return err_set(err, HIPD_EINVAL,
                 "a worker could not start with these options (its error "
                 "is above)");
}

/* A check run on the loop (workers_probe_start()). */
#define PROBE_TIMEOUT_MS 30000
static struct probe {
  uv_process_t proc; /* proc.data = this */
  uv_timer_t timer;
  daemon_t *d;
  workers_probe_fn done;
  void *ctx;
  int running; /* started, its handles not closed yet */
  int handles, timed_out;
} probe_run;

static void probe_closed_cb(uv_handle_t *h)
{
  (void)h;
  if (--probe_run.handles == 0)
    probe_run.running = 0;
}

static void probe_exit_cb(uv_process_t *p, int64_t status, int sig)
{
  workers_probe_fn done = probe_run.done;
  int ok = status == 0 && sig == 0 && !probe_run.timed_out;

  (void)p;
  uv_timer_stop(&probe_run.timer);
  uv_close((uv_handle_t *)&probe_run.proc, probe_closed_cb);
  uv_close((uv_handle_t *)&probe_run.timer, probe_closed_cb);
  probe_run.done = NULL;
  if (done != NULL)
    done(probe_run.d, ok, probe_run.ctx);
}

static void probe_timeout_cb(uv_timer_t *t)
{
  (void)t;
  probe_run.timed_out = 1;
  log_error(0, "the worker checking the new options did not finish within "
               "30 s: killed");
  uv_process_kill(&probe_run.proc, SIGKILL);
}

int workers_probe_start(daemon_t *d, workers_probe_fn done, void *ctx,
                        hipd_err_t *err)
{
  char role[64] = "--worker=probe:0:0:0", **args, **env;
  uv_process_options_t o = {0};
  uv_stdio_container_t io[3];
  int rc;

  if (probe_run.running)
    return err_set(err, HIPD_EBUSY, "a worker check is still running");
  if (workers_exec_args(role, 1, &args, &env) != 0)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  for (int i = 0; i < 3; i++) {
    io[i].flags = UV_INHERIT_FD;
    io[i].data.fd = i;
  }
  o.file = workers_pool.exe;
  o.args = args;
  o.env = env;
  o.stdio = io;
  o.stdio_count = 3;
  o.exit_cb = probe_exit_cb;
  memset(&probe_run, 0, sizeof(probe_run));
  probe_run.d = d;
  probe_run.done = done;
  probe_run.ctx = ctx;
  rc = uv_spawn(d->loop, &probe_run.proc, &o);
  free(args);
  free(env);
  if (rc != 0) {
    uv_close((uv_handle_t *)&probe_run.proc, NULL);
    return err_set(err, HIPD_EIO, "cannot start a worker: %s", uv_strerror(rc));
  }
  probe_run.running = 1;
  probe_run.handles = 2;
  uv_timer_init(d->loop, &probe_run.timer);
  uv_timer_start(&probe_run.timer, probe_timeout_cb, PROBE_TIMEOUT_MS, 0);
  return 0;
}

/* Shutdown: a reload's check still running is killed (no reload). */
void workers_probe_cancel(void)
{
  if (probe_run.running && probe_run.done != NULL)
    uv_process_kill(&probe_run.proc, SIGKILL);
}
