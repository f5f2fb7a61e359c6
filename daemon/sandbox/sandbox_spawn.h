/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox_spawn.h: the one way hipd starts a process (the
 * compile helpers, the CPU runner's launcher and its runners, the C++
 * compiler of the CPU driver).
 *
 *   char *argv[] = {path, "--fd=3", NULL};
 *   sandbox_fd_t fds[] = {{sock, 3}};
 *   sandbox_spawn_t o = {.path = path, .argv = argv, .envp = env,
 *                        .fds = fds, .nfds = 1, .stdin_null = true,
 *                        .chdir = "/", .close_from = 4,
 *                        .own_group = true};
 *   if (sandbox_spawn(&o, &pid, &err) != 0) ... err.msg says why
 *
 * In the child, in this order: each dup2 of @c fds, stdin from /dev/null,
 * the working directory, every descriptor from @c close_from up closed,
 * every signal restored to its default action and unblocked (one list:
 * sandbox_spawn_signals), a process group of its own; then the exec (or,
 * without @c path, the function @c child). What confines the child
 * (sandbox_enter: ids, rlimits, NO_NEW_PRIVS, Landlock, seccomp) is
 * applied by the program itself after the exec, or by @c child, which
 * knows its own paths; the environment given is the one it gets (build
 * it with sandbox_clean_env when the child runs untrusted code).
 */
#ifndef HIPD_SANDBOX_SPAWN_H
#define HIPD_SANDBOX_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

/* dup2(from, to) in the child; from == to keeps @c from open across the
 * exec (its close-on-exec flag is cleared). */
typedef struct {
  int from;
  int to;
} sandbox_fd_t;

typedef struct {
  const char *path;        /* what is executed; NULL: run @c child instead */
  char *const *argv;       /* NULL-terminated, argv[0] included */
  char *const *envp;       /* NULL-terminated, the whole environment */
  const sandbox_fd_t *fds; /* applied in order, before anything else */
  size_t nfds;
  bool stdin_null;   /* stdin opened on /dev/null */
  const char *chdir; /* working directory, NULL: kept */
  int close_from;    /* > 0: every descriptor from this one up closed */
  bool own_group;    /* setpgid(0, 0): a timeout or ^C kills the group */
  /* Without @c path: a fork that runs @c child(@c arg) after the steps
   * above, and _exit(0)s if it returns. The steps are async-signal-safe
   * system calls only; @c child runs in a copy of a possibly threaded
   * process (start it before other threads, or keep it to such calls). */
  void (*child)(void *arg);
  void *arg;
} sandbox_spawn_t;

/* The signals restored to default and unblocked in every child: all that
 * can be caught (so nothing the parent ignores or handles stays so). */
void sandbox_spawn_signals(sigset_t *set);

/* Start a process as @p o says. @return 0 with *@p pid set; else
 * HIPD_ENOENT (the program does not exist), HIPD_EINVAL (@p o is not
 * valid) or HIPD_EIO, with err->msg the system's reason alone (e.g.
 * "Permission denied"): the caller names what it started. A step that
 * fails in the child before the exec is reported too (posix_spawn's, or
 * the fork's close-on-exec pipe); a child that fails after it exits 127. */
int sandbox_spawn(const sandbox_spawn_t *o, pid_t *pid, hipd_err_t *err);

#endif
