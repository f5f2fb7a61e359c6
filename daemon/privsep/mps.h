/* SPDX-License-Identifier: MIT */
/* daemon/privsep/mps.h: hipd's own NVIDIA MPS control daemon.
 *
 * On NVIDIA, contexts of different processes time-slice the GPU unless
 * they are clients of one MPS server; MPS (Volta and later) gives each
 * client its own GPU address space and runs them concurrently. One MPS
 * server serves one uid, so every GPU worker runs as hipd's worker
 * account. With --mps auto (the default) or on, the listener starts
 * nvidia-cuda-mps-control -d as that account with pipe and log
 * directories of its own (a fresh 0700 directory), never the system's,
 * and stops it (quit) at exit. Nothing here changes the GPU's compute
 * mode. Workers find it through the environment mps_worker_env() gives.
 *
 * Listener only, loop thread (mps_start, mps_stop are blocking but run at
 * start-up and exit only).
 */
#ifndef HIPD_PRIVSEP_MPS_H
#define HIPD_PRIVSEP_MPS_H

#include <stddef.h>
#include <sys/types.h>

#include "daemon.h"
#include "util/err.h"

enum { MPS_AUTO = 0, MPS_ON, MPS_OFF };

/* Start the control daemon if d->cfg.mps asks for it and this build and
 * node can use it, running as @p uid:@p gid (with @p user's groups) when
 * hipd is root. @return 0 (started, or not wanted, or unavailable under
 * auto: mps_state() says which), or HIPD_ENOTSUP / HIPD_EIO under --mps
 * on when it cannot run, with @p err saying why. */
int mps_start(daemon_t *d, const char *user, uid_t uid, gid_t gid,
              hipd_err_t *err);
/* Stop it and remove its directory. */
void mps_stop(void);

/* Add the variables a worker needs to @p env (at most @p max entries,
 * static strings). @return how many were added. */
size_t mps_worker_env(char **env, size_t max);

/* One line for daemon.info and the log: "active (pipe /run/hipd/mps-x)",
 * "off (--mps off)", "unavailable: ...". In a worker, from the
 * environment the listener gave it. */
const char *mps_state(void);
/* Is MPS serving this process's GPU contexts? */
int mps_active(void);

#endif
