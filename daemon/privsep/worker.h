/* SPDX-License-Identifier: MIT */
/* daemon/privsep/worker.h: a tenant worker's side of privilege separation.
 *
 * A worker is hipd started by its listener with --worker=MODE:UID:GID:ID
 * and its channel (ipc.h) at descriptor 3. It serves the sessions of one
 * tenant (MODE uid: every connection of peer uid UID; session: the one
 * connection ID) with the whole request stack, and nothing else: it
 * listens on no socket, holds no cache on disk and runs no compiler. The
 * listener hands it connections ("conn", with the descriptor); the worker
 * tells it when each closes ("closed") and asks it for compiled kernels
 * ("compile", installed as the kernels' fetch) and for the shared cache's
 * counters. When the channel breaks (the listener is gone) or the
 * listener says "exit", the worker stops as on SIGTERM.
 *
 * Loop thread only.
 */
#ifndef HIPD_PRIVSEP_WORKER_H
#define HIPD_PRIVSEP_WORKER_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "kernels/kernels.h"
#include "util/err.h"

/* --worker=probe: check the options as a worker would, then exit. */
#define WORKER_PROBE (-1)

/* What --worker=MODE:UID:GID:ID[:SLOT] said. */
typedef struct {
  int mode; /* ISOLATION_UID, ISOLATION_SESSION or WORKER_PROBE */
  uid_t uid;
  gid_t gid;
  uint64_t id;   /* the first connection's id */
  int spin_slot; /* its slot of the spin budget at fd 4, or -1 (spin.h) */
} worker_role_t;

/* The descriptor a worker finds the spin budget at, when its role names a
 * slot. */
#define WORKER_SPIN_FD 4

/* A worker's exit status when a GPU kernel ran past --gpu-kernel-timeout
 * (objects/watchdog.h): it told its sessions and ended. */
#define WORKER_EXIT_GPU_TIMEOUT 75

/* Parse @p arg ("uid:1001:1001:7" or "uid:1001:1001:7:3"). @return 0 or
 * HIPD_EINVAL. */
int worker_role_parse(const char *arg, worker_role_t *out);

/* Become the worker of @p role on the channel at @p fd: read connections
 * and answers from the listener. @p stop is called (once) when the worker
 * must stop, with the reason. @return 0 or a negative code. */
int worker_start(daemon_t *d, const worker_role_t *role, int fd,
                 void (*stop)(daemon_t *d, const char *why), hipd_err_t *err);

/* On the listener's "reload" (after a SIGHUP), call @p reload with its
 * options (argv[0] first, NULL-terminated; valid during the call): the
 * worker applies what can change at run time (config/reload.c). */
void worker_on_reload(void (*reload)(daemon_t *d, int argc, char **argv));

/* A session of this worker was torn down (transport): tell the listener. */
void worker_session_closed(daemon_t *d, uint64_t id);
/* A session of this worker said hello: tell the listener. */
void worker_session_hello(daemon_t *d, uint64_t id);

/* The shared cache's counters, from the listener: @p done(ctx, status,
 * stats) on the loop thread (stats NULL on failure). */
void worker_cache_stats(kernels_stats_done_fn done, void *ctx);
/* Clear the shared cache for a peer of uid @p uid (the listener checks
 * it): @p done(ctx, status, message). */
void worker_cache_clear(uid_t uid, kernels_clear_done_fn done, void *ctx);

/* Close the channel (at shutdown, once the sessions are gone). */
void worker_close(daemon_t *d);

#endif
