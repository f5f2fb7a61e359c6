/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox_spawn.c: starting a process (the contract is in
 * sandbox_spawn.h). A program is started with posix_spawn, whose child
 * reports a failed step or exec as its return value; a function (the
 * CPU runner's launcher) in a fork, whose steps report through a
 * close-on-exec pipe before the function runs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hipd.h"
#include "sandbox_spawn.h"

void sandbox_spawn_signals(sigset_t *set)
{
  sigfillset(set);
  sigdelset(set, SIGKILL);
  sigdelset(set, SIGSTOP);
}

static int spawn_fail(hipd_err_t *err, int e)
{
  return err_set(err, e == ENOENT ? HIPD_ENOENT : HIPD_EIO, "%s", strerror(e));
}

static int spawn_exec(const sandbox_spawn_t *o, pid_t *pid, hipd_err_t *err)
{
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, dflt;
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  int e;

  posix_spawn_file_actions_init(&fa);
  for (size_t i = 0; i < o->nfds; i++)
    posix_spawn_file_actions_adddup2(&fa, o->fds[i].from, o->fds[i].to);
  if (o->stdin_null)
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY,
                                     0);
  if (o->chdir != NULL)
    posix_spawn_file_actions_addchdir_np(&fa, o->chdir);
#ifdef HAVE_POSIX_SPAWN_FILE_ACTIONS_ADDCLOSEFROM_NP
  if (o->close_from > 0)
    posix_spawn_file_actions_addclosefrom_np(&fa, o->close_from);
#endif
  posix_spawnattr_init(&attr);
  sigemptyset(&none);
  sandbox_spawn_signals(&dflt);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dflt);
  if (o->own_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  e = posix_spawn(pid, o->path, &fa, &attr, o->argv, o->envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return e != 0 ? spawn_fail(err, e) : 0;
}

/* The steps of a forked child; @return 0 or the errno of the one that
 * failed. System calls only (async-signal-safe). */
static int child_steps(const sandbox_spawn_t *o)
{
  sigset_t all, none;

  for (size_t i = 0; i < o->nfds; i++) {
    int from = o->fds[i].from, to = o->fds[i].to;
    if ((from == to ? fcntl(from, F_SETFD, 0) : dup2(from, to)) < 0)
      return errno;
  }
  if (o->stdin_null) {
    int fd = open("/dev/null", O_RDONLY);
    if (fd < 0)
      return errno;
    if (fd != STDIN_FILENO) {
      if (dup2(fd, STDIN_FILENO) < 0)
        return errno;
      close(fd);
    }
  }
  if (o->chdir != NULL && chdir(o->chdir) != 0)
    return errno;
  sandbox_spawn_signals(&all);
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&all, sig) == 1)
      signal(sig, SIG_DFL);
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, NULL) != 0)
    return errno;
  if (o->own_group && setpgid(0, 0) != 0)
    return errno;
  return 0;
}

static int spawn_fork(const sandbox_spawn_t *o, pid_t *pid, hipd_err_t *err)
{
  int pfd[2], e = 0, top = 2;
  ssize_t n;
  pid_t child;

  for (size_t i = 0; i < o->nfds; i++)
    if (o->fds[i].to > top)
      top = o->fds[i].to;
  if (pipe2(pfd, O_CLOEXEC) != 0)
    return spawn_fail(err, errno);
  child = fork();
  if (child < 0) {
    e = errno;
    close(pfd[0]);
    close(pfd[1]);
    return spawn_fail(err, e);
  }
  if (child == 0) {
    /* The pipe above every target, so that no dup2 replaces it. */
    int w = fcntl(pfd[1], F_DUPFD_CLOEXEC, top + 1);
    close(pfd[0]);
    if (w < 0) {
      e = errno;
      w = pfd[1];
    } else {
      close(pfd[1]);
      e = child_steps(o);
    }
    if (e != 0) {
      while (write(w, &e, sizeof(e)) < 0 && errno == EINTR)
        ;
      _exit(127);
    }
    close(w);
    if (o->close_from > 0)
      close_range((unsigned)o->close_from, ~0u, 0);
    o->child(o->arg);
    _exit(0);
  }
  close(pfd[1]);
  do
    n = read(pfd[0], &e, sizeof(e));
  while (n < 0 && errno == EINTR);
  close(pfd[0]);
  if (n == (ssize_t)sizeof(e)) {
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
      ;
    return spawn_fail(err, e);
  }
  *pid = child;
  return 0;
}

int sandbox_spawn(const sandbox_spawn_t *o, pid_t *pid, hipd_err_t *err)
{
  if (o == NULL || (o->path == NULL) == (o->child == NULL) ||
      (o->path != NULL && o->argv == NULL))
    return err_set(err, HIPD_EINVAL, "nothing to start");
  if (err != NULL)
    err_clear(err);
  return o->path != NULL ? spawn_exec(o, pid, err) : spawn_fork(o, pid, err);
}
