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
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "util/err.h"

enum { MPS_AUTO = 0, MPS_ON, MPS_OFF };

/* Start the control daemon if d->cfg.mps asks for it and this build and
 * node can use it, running as @p uid:@p gid (with @p user's groups) when
 * hipd is root; first take d->cfg.mps_tenants (mps_tenants_set()).
 * @return 0 (started, or not wanted, or unavailable under auto:
 * mps_state() says which), or HIPD_ENOTSUP / HIPD_EIO under --mps on when
 * it cannot run, or mps_tenants_set()'s error, with @p err saying why. */
int mps_start(daemon_t *d, const char *user, uid_t uid, gid_t gid,
              hipd_err_t *err);
/* Stop it and remove its directory; forget the --mps-tenants list. */
void mps_stop(void);

/* Add the variables a worker needs to @p env (at most @p max entries,
 * static strings); with @p client 0, the one that says it was kept out
 * (mps_state then says so). @return how many were added. */
size_t mps_worker_env(char **env, size_t max, int client);

/* ---- which tenants are MPS clients (--mps-tenants) ----
 *
 * Under MPS a fatal GPU fault of one client ends every client's contexts
 * on that GPU; outside it, a worker has a context of its own, time-sliced
 * with the others (the MPS server's included), and a fault costs only its
 * own. So which workers are MPS clients is a policy:
 *   auto (the default): the workers of one uid at a time, the first whose
 *     worker starts while no other uid's worker is a client; the others
 *     get contexts of their own until the last client of that uid ends.
 *     One tenant's many processes run concurrently, and a fault never
 *     crosses from one uid to another: a safe default for a node open to
 *     several uids.
 *   all: every worker (tenants run concurrently; a fault costs them all).
 *   LIST: a comma list of users, uids, @groups and @gids: their workers.
 */

/* Check the value of --mps-tenants (its names must exist). @return 0, or
 * HIPD_EINVAL ("--mps-tenants: no user 'bob'") or HIPD_ENOMEM with
 * @p err. */
int mps_tenants_check(const char *value, hipd_err_t *err);
/* Make --mps-tenants @p value (NULL: auto) the one that decides from now
 * on: a list is parsed and its names resolved here, once (mps_start() at
 * start, the reload in the listener), not for each worker. @return 0, or
 * mps_tenants_check()'s error with the running value kept. */
int mps_tenants_set(const char *value, hipd_err_t *err);
/* Is a new worker of @p uid (primary group @p gid) to be an MPS client,
 * by the value mps_tenants_set() took? Under auto it is then counted
 * (*@p counted 1) until mps_tenant_release(). Listener, loop thread. A
 * list that names a group reads @p uid's groups (NSS). */
int mps_tenant_take(uid_t uid, gid_t gid, int *counted);
/* A worker of @p uid that mps_tenant_take() counted ended. */
void mps_tenant_release(uid_t uid);
/* May @p uid's sessions be spread over several workers (--tenant-workers)?
 * Each worker has GPU contexts of its own: on NVIDIA they run at once
 * only as clients of one MPS server, and time-slice the GPU otherwise,
 * far slower than one worker; so there only while the uid's workers are
 * MPS clients. Elsewhere (AMD, no GPU driver) always. */
int mps_tenant_may_spread(const daemon_config_t *cfg, uid_t uid, gid_t gid);
/* For tests (tests/check_config.c): decide as if the control daemon ran
 * (@p on 1), or as it does (0). Nothing is started. */
void mps_pretend_active(int on);

/* ---- each tenant's share of the GPU under MPS ----
 *
 * A worker that is an MPS client gets, in its environment, CUDA's
 * per-client limits: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (the share of the
 * GPU's SMs its kernels may occupy at once, so that one tenant's kernel
 * over the whole GPU leaves room for the others') and, when set,
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (the device memory its contexts may
 * pin on each GPU). Both are read by CUDA when the worker makes its
 * contexts, so a reload changes them for workers started afterwards only.
 * They come from --mps-active-threads and --mps-device-mem, repeatable:
 * each rule "VALUE" (every tenant) or "WHO=VALUE" (WHO a user name, uid,
 * @group name or @gid); a tenant's user rule wins over its groups' rules,
 * which win over the plain one; among rules of one kind, the last. */

typedef struct {
  uint32_t threads; /* percent of the SMs, 1..100 */
  uint64_t mem;     /* bytes per GPU; 0: no limit */
} mps_limits_t;

/* The share of the SMs a tenant gets without a rule. */
#define MPS_DEFAULT_THREADS 50

/* Check rule @p rule of option @p opt (--mps-active-threads when
 * @p is_mem is 0, else --mps-device-mem): its form, its value and that
 * its user or group exists. @return 0 or HIPD_EINVAL with @p err naming
 * the problem. */
int mps_rule_check(const char *opt, const char *rule, int is_mem,
                   hipd_err_t *err);
/* The limits for a worker of @p uid (primary group @p gid) under the
 * rules of @p cfg. May read the user database (NSS). */
void mps_limits_for(const daemon_config_t *cfg, uid_t uid, gid_t gid,
                    mps_limits_t *out);
/* Put the environment entries of @p lim in @p env (at most 2) when the
 * MPS control daemon runs, formatted into @p buf0 and @p buf1 (@p size
 * bytes each); the memory limit names each GPU the workers see (the
 * listener holds no device: /proc/driver/nvidia/gpus, or as many as
 * CUDA_VISIBLE_DEVICES lists). @return how many. */
size_t mps_limits_env(const mps_limits_t *lim, char *buf0, char *buf1,
                      size_t size, char **env);
/* In a worker: the limits its environment gives it. @return 1 if it is an
 * MPS client with limits (then *@p out holds them), else 0. */
int mps_limits_here(mps_limits_t *out);

/* One line for daemon.info and the log: "active (pipe /run/hipd/mps-x)",
 * "off (--mps off)", "unavailable: ...". In a worker, from the
 * environment the listener gave it. */
const char *mps_state(void);
/* Is MPS serving this process's GPU contexts? */
int mps_active(void);

#endif
