/* SPDX-License-Identifier: MIT */
/* daemon/privsep/mps.c: hipd's private MPS control daemon (mps.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "privsep/mps.h"

#define CONTROL "nvidia-cuda-mps-control"

static struct {
  int active;
  char dir[128];      /* the private directory */
  char pipe_env[192]; /* CUDA_MPS_PIPE_DIRECTORY=... */
  char log_env[192];  /* CUDA_MPS_LOG_DIRECTORY=... */
  char control[4096]; /* the control program */
  char state[448];
  int as_user;
  uid_t uid;
  gid_t gid;
  char user[64];
} mps;

static int find_control(char *out, size_t len)
{
  const char *path = getenv("PATH");
  char buf[4096];

  snprintf(buf, sizeof(buf), "%s:/usr/bin:/usr/local/cuda/bin",
           path != NULL ? path : "");
  for (char *save = NULL, *p = strtok_r(buf, ":", &save); p != NULL;
       p = strtok_r(NULL, ":", &save)) {
    snprintf(out, len, "%s/%s", p, CONTROL);
    if (access(out, X_OK) == 0)
      return 0;
  }
  return HIPD_ENOENT;
}

/* Run the control program (with "-d", or fed @p input) as the worker
 * account; @return its exit status, or -1 (as a shell says of a program
 * that did not exit: not a hipd code). Blocking, bounded by 10 s. */
static int run_control(const char *arg, const char *input)
{
  int in[2] = {-1, -1}, status = 0;
  pid_t pid;

  if (input != NULL && pipe2(in, O_CLOEXEC) != 0)
    return -1;
  pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    char *argv[] = {mps.control, (char *)arg, NULL};
    char *envp[] = {mps.pipe_env, mps.log_env, "PATH=/usr/bin:/bin", NULL};
    int nul = open("/dev/null", O_RDWR);
    if (input != NULL)
      dup2(in[0], 0);
    else if (nul >= 0)
      dup2(nul, 0);
    if (nul >= 0)
      dup2(nul, 1);
    if (mps.as_user && (initgroups(mps.user, mps.gid) != 0 ||
                        setresgid(mps.gid, mps.gid, mps.gid) ||
                        setresuid(mps.uid, mps.uid, mps.uid)))
      _exit(126);
    /* The directory is made by the account that uses it: the listener
     * keeps no CAP_CHOWN (the unit drops it). */
    if (arg != NULL && mkdir(mps.dir, 0700) != 0 && errno != EEXIST)
      _exit(125);
    execve(mps.control, arg != NULL ? argv : (char *[]){mps.control, NULL},
           envp);
    _exit(127);
  }
  if (input != NULL) {
    close(in[0]);
    if (write(in[1], input, strlen(input)) < 0)
      status = -1;
    close(in[1]);
  }
  for (int i = 0; i < 1000; i++) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0)
      return -1;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

static int unavailable(daemon_t *d, hipd_err_t *err, const char *why)
{
  snprintf(mps.state, sizeof(mps.state),
           "unavailable: %s; tenants time-slice the "
           "GPU",
           why);
  if (d->cfg.mps == MPS_ON)
    return err_set(err, HIPD_ENOTSUP, "--mps on: %s", why);
  log_info(0, "MPS %s", mps.state);
  return 0;
}

int mps_start(daemon_t *d, const char *user, uid_t uid, gid_t gid,
              hipd_err_t *err)
{
  const char *base = getenv("RUNTIME_DIRECTORY");
  char ctl[192];

  err_clear(err);
  if (d->cfg.mps == MPS_OFF) {
    snprintf(mps.state, sizeof(mps.state),
             "off (--mps off): tenants time-slice the GPU");
    return 0;
  }
#if !defined(HAVE_HIP) || !defined(HIPD_HIP_PLATFORM)
  (void)user;
  (void)uid;
  (void)gid;
  (void)base;
  (void)ctl;
  return unavailable(d, err, "this build has no NVIDIA GPU support");
#else
  if (strcmp(HIPD_HIP_PLATFORM, "nvidia") != 0) {
    snprintf(mps.state, sizeof(mps.state),
             "not needed: on AMD, processes' queues run concurrently in "
             "separate GPU address spaces");
    return 0;
  }
  if (d->cfg.devices != NULL && strcmp(d->cfg.devices, "cpu") == 0)
    return unavailable(d, err, "--devices cpu: no GPU is served");
  if (find_control(mps.control, sizeof(mps.control)) != 0)
    return unavailable(d, err, CONTROL " is not installed");
  snprintf(mps.dir, sizeof(mps.dir), "%s/hipd-mps-XXXXXX",
           base != NULL && base[0] == '/' ? base : "/tmp");
  if (mkdtemp(mps.dir) == NULL)
    return unavailable(d, err, "cannot create its private directory");
  mps.as_user = geteuid() == 0;
  mps.uid = uid;
  mps.gid = gid;
  snprintf(mps.user, sizeof(mps.user), "%s", user != NULL ? user : "");
  if (mps.as_user && chown(mps.dir, uid, gid) != 0) {
    rmdir(mps.dir);
    return unavailable(d, err,
                       "cannot give its directory to the worker "
                       "account");
  }
  snprintf(mps.pipe_env, sizeof(mps.pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s",
           mps.dir);
  snprintf(mps.log_env, sizeof(mps.log_env), "CUDA_MPS_LOG_DIRECTORY=%s",
           mps.dir);
  if (run_control("-d", NULL) != 0)
    return unavailable(d, err,
                       CONTROL " -d failed (or its directory "
                               "could not be made)");
  /* The control daemon makes its socket once it runs. */
  snprintf(ctl, sizeof(ctl), "%s/control", mps.dir);
  for (int i = 0; i < 200 && access(ctl, F_OK) != 0; i++)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  mps.active = 1;
  snprintf(mps.state, sizeof(mps.state),
           "active (hipd's own control daemon, pipe directory %s): tenants "
           "run concurrently, each in its own GPU address space; a fatal "
           "GPU fault of one tenant also ends the others' contexts on that "
           "GPU (--mps off keeps faults with their tenant, and time-slices)",
           mps.dir);
  log_info(0, "MPS %s", mps.state);
  return 0;
#endif
}

static void remove_tree(const char *dir)
{
  char cmd[256];
  pid_t pid;

  /* The control daemon's logs and sockets: a few plain entries. */
  snprintf(cmd, sizeof(cmd), "%s", dir);
  pid = fork();
  if (pid == 0) {
    execl("/bin/rm", "rm", "-rf", "--", cmd, (char *)NULL);
    _exit(127);
  }
  if (pid > 0)
    waitpid(pid, NULL, 0);
}

void mps_stop(void)
{
  if (!mps.active)
    return;
  mps.active = 0;
  if (run_control(NULL, "quit\n") != 0)
    log_warn(0, "MPS: the control daemon did not acknowledge quit");
  else
    log_info(0, "MPS control daemon stopped");
  if (strcmp(mps.dir, "/run/hipd/mps") != 0)
    remove_tree(mps.dir);
}

size_t mps_worker_env(char **env, size_t max)
{
  static char flag[] = "HIPD_MPS=1";
  size_t n = 0;

  if (!mps.active || max < 3)
    return 0;
  env[n++] = mps.pipe_env;
  env[n++] = mps.log_env;
  env[n++] = flag;
  return n;
}

const char *mps_state(void)
{
  if (mps.state[0] == '\0') {
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    if (getenv("HIPD_MPS") != NULL && dir != NULL)
      snprintf(mps.state, sizeof(mps.state),
               "active (hipd's own control daemon, pipe directory %s): "
               "tenants run concurrently, each in its own GPU address space; "
               "a fatal GPU fault of one tenant also ends the others' "
               "contexts on that GPU (--mps off keeps faults with their "
               "tenant, and time-slices)",
               dir);
    else
      snprintf(mps.state, sizeof(mps.state),
               "not used: tenants time-slice the GPU");
  }
  return mps.state;
}

int mps_active(void)
{
  return mps.active || getenv("HIPD_MPS") != NULL;
}
