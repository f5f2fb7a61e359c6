/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers.h: the listener's side of privilege separation.
 *
 * With --isolation uid or session, hipd's main process (the listener)
 * serves no session itself: it takes each connection, decides its tenant
 * (the peer's uid, or the connection alone), and hands the connection to
 * that tenant's worker process over the worker's channel (ipc.h),
 * starting the worker first if it has none. A worker is this same program
 * run again with --worker (main.c); it serves its tenant's sessions with
 * the whole request stack and asks the listener for compiled kernels
 * ("compile"), which the listener answers from the shared cache or through
 * the compile helpers. A worker whose last session closed is told to exit
 * after --worker-linger. A worker that dies costs its own sessions only.
 *
 * A peer that the access policy refuses gets the rule in the answer to its
 * first request from the listener itself (a bounded read of one message,
 * no session state) and is never given a worker.
 *
 * Loop thread only.
 */
#ifndef HIPD_PRIVSEP_WORKERS_H
#define HIPD_PRIVSEP_WORKERS_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon.h"
#include "util/err.h"

/* Prepare the listener: remember @p argv for starting workers, look up the
 * worker account (d->cfg.worker_user) when running as root. @return 0, or
 * a negative code with @p err naming the problem. */
int workers_init(daemon_t *d, char **argv, hipd_err_t *err);

/* Before listening: run a worker once with the listener's options (as
 * the workers' account), so that options only a worker can check (the
 * devices, --device-allow) stop hipd at start, not at a client's first
 * connection. It tells how many devices it found (d->worker_devices) on
 * the descriptor WORKER_PROBE_FD_ENV names. Blocking. @return 0, or
 * HIPD_EINVAL (the worker logged why). */
#define WORKER_PROBE_FD_ENV "HIPD_PROBE_FD"
int workers_probe(daemon_t *d, hipd_err_t *err);

/* As workers_probe(), without blocking the loop (a reload): @p done runs
 * once on the loop, @p ok 1 if the worker accepted the options, 0 if it
 * did not (it logged why) or did not finish within 30 s (killed).
 * @return 0, or a negative code with @p err (then @p done never runs; one
 * check at a time: HIPD_EBUSY). */
typedef void (*workers_probe_fn)(daemon_t *d, int ok, void *ctx);
int workers_probe_start(daemon_t *d, workers_probe_fn done, void *ctx,
                        hipd_err_t *err);

/* Take a new connection from @p server (the listening socket). */
void workers_accept(daemon_t *d, uv_stream_t *server);

/* From the housekeeping timer: tell workers idle for --worker-linger to
 * exit, and give up on refused peers that said nothing. */
void workers_housekeeping(daemon_t *d);

/* Shutdown: ask every worker to stop (SIGTERM) on the first call, kill
 * those left when @p force. @return workers still running. */
uint32_t workers_stop(daemon_t *d, int force);

/* Serve the worker side of a channel at @p fd (one end of a socket pair)
 * as if it were the worker of @p uid, without a process: for the wire's
 * fuzz target and tests, which play the worker. The channel closes on
 * EOF or on a malformed message. @return 0 or a negative code. */
int workers_adopt(daemon_t *d, int fd, uid_t uid);

/* In the listener: answer the admin requests of workers and gather their
 * reports for admin/ (admin_set_listener()). */
void workers_admin_init(daemon_t *d);

/* Release what is left (after the loop's last run). */
void workers_free(daemon_t *d);

/* Send @p signum to every worker still running. */
void workers_signal(daemon_t *d, int signum);
/* The options workers are started with from now on (argv[0] first,
 * NULL-terminated; the caller keeps it alive until the next call). */
void workers_set_args(daemon_t *d, char **argv);
/* Tell every worker running to reload (after a SIGHUP): "reload" with the
 * options of workers_set_args(). */
void workers_reload(daemon_t *d);
/* Connections held by the workers now, all together. */
uint32_t workers_sessions(const daemon_t *d);

/* Workers running now, and started since the listener started. */
uint32_t workers_count(const daemon_t *d);
uint64_t workers_started(const daemon_t *d);

#endif
