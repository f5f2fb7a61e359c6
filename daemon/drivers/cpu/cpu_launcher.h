/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_launcher.h: the CPU runner's launcher.
 *
 * A device worker runs as hipd's unprivileged account, yet its CPU runner
 * must run as the tenant's uid/gid. So the worker, while it is still root,
 * starts a launcher: a small process forked from it that at once becomes
 * the tenant (sandbox_drop_ids), drops every capability, sets
 * NO_NEW_PRIVS, is not dumpable, and confines itself (Landlock: read and
 * execute the runner binary and the system libraries only, signals only to
 * its own children; seccomp LAUNCHER profile). From then on, every runner
 * of the process is started by the launcher, on request over a
 * SOCK_SEQPACKET socketpair:
 *   SPAWN  the runner's arguments -> its pid, and the daemon's end of the
 *          runner's socketpair (SCM_RIGHTS); the binary is the one fixed at
 *          cpu_launcher_start, never one named by a request;
 *   KILL   (pid, signal), only for its own children;
 *   WAIT   (pid, timeout) -> the wait status, so that a launch error still
 *          names the signal that killed a crashing kernel.
 * The runners are the launcher's children, so they are the tenant's, and
 * a runner that is killed or crashes is reaped by the launcher.
 *
 * cpu_runner_client.c uses the launcher when one is running and spawns the
 * runner itself otherwise (not root, --isolation none, or never started).
 * A process that will enter the WORKER seccomp profile (no fork, no
 * execve) must start a launcher first even when it is not root: then with
 * its own ids (cpu_launcher_start(getuid(), getgid())), so that runners
 * can still be started. Once a launcher has been started, runners are only
 * ever started through it: if it dies, starting a runner fails (there is
 * no fallback to a runner of the caller's uid).
 * When the launcher's socket closes (cpu_launcher_stop, or this process
 * exits), it kills its runners and exits; it also dies with its parent.
 *
 * Thread safety: one launcher per process; the functions may be called
 * from any thread (requests are serialized under a mutex).
 */
#ifndef HIPD_DRIVERS_CPU_LAUNCHER_H
#define HIPD_DRIVERS_CPU_LAUNCHER_H

#include <stdbool.h>
#include <sys/types.h>

#include "util/err.h"

/**
 * Fork the launcher, which becomes @p uid / @p gid for good.
 * Call as root (or with the current ids, for tests); before the caller
 * drops its own privileges. Threads of the caller are not copied into the
 * launcher (fork), so it may be called with threads running, but early is
 * best. The runner binary is fixed now: $HIPD_CPU_RUNNER, else the
 * installed $(libexecdir)/hipd-cpu-runner.
 * @return 0 once the launcher reported that it is confined (err->msg then
 *         names what of the sandbox the kernel lacked, "" if nothing, for
 *         the log); HIPD_EBUSY (a
 *         launcher runs already), HIPD_EINVAL (uid or gid 0), HIPD_EPERM
 *         (the ids cannot be taken: not root), HIPD_EIO (fork, socket, or
 *         the launcher failed to confine itself: its message).
 */
int cpu_launcher_start(uid_t uid, gid_t gid, hipd_err_t *err);

/** The runner binary, decided here for the launcher and for a runner
 *  started without it (cpu_runner_client.c, cfg.path NULL):
 *  $HIPD_CPU_RUNNER if set and not empty, else
 *  $(libexecdir)/hipd-cpu-runner. */
const char *cpu_launcher_runner_path(void);

/** Stop the launcher: it kills the runners it started and exits; reaped
 *  here (for up to 2 s). A no-op when none runs. */
void cpu_launcher_stop(void);

/** Whether a launcher is running (then runners are started through it). */
bool cpu_launcher_running(void);

/** The launcher's pid, -1 when none runs. */
pid_t cpu_launcher_pid(void);

/* ------------------------------------------ for cpu_runner_client.c */

/**
 * Start a runner with arguments @p args (NULL-terminated, without argv[0]
 * and without --fd=, which the launcher adds).
 * @param pid receives the runner's pid (in the launcher's namespace: ours).
 * @param sock receives our end of the runner's socket (close-on-exec).
 * @return 0, HIPD_EIO (the launcher could not start it: its message),
 *         HIPD_EDISCONNECTED (no launcher, or it is gone).
 */
int cpu_launcher_spawn(const char *const *args, pid_t *pid, int *sock,
                       hipd_err_t *err);

/** Send @p sig to runner @p pid. @return 0, HIPD_ENOENT (not a runner of
 *  the launcher), HIPD_EDISCONNECTED. */
int cpu_launcher_kill(pid_t pid, int sig, hipd_err_t *err);

/**
 * Wait up to @p timeout_ms (0: do not wait; UINT32_MAX: until it ends) for
 * runner @p pid to end, and reap it.
 * @return 0 with its wait status in *status; HIPD_ETIMEDOUT (still
 *         running); HIPD_ENOENT; HIPD_EDISCONNECTED (the launcher is gone:
 *         it killed its runners when it went).
 */
int cpu_launcher_wait(pid_t pid, unsigned timeout_ms, int *status,
                      hipd_err_t *err);

#endif
