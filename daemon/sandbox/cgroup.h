/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/cgroup.h: memory and process limits per tenant and per
 * compile helper, in control groups of hipd's own.
 *
 * The listener, as root and before it starts any process, finds where it
 * may make groups (cgroup_setup):
 *   - cgroup2 (systemd with Delegate=yes): its own group, if it is alone
 *     there. It moves itself into a leaf "hipd-listener" and enables the
 *     memory and pids controllers for the others;
 *   - the v1 memory and pids hierarchies: a group "hipd-PID" under its own
 *     in each;
 *   - otherwise none, and cgroup_state() says why.
 * Under that base: "tenant-UID" for all of one uid's processes, with
 * memory.max and pids.max, its workers in its leaf "worker" and their CPU
 * runners' launchers (and so the runners) in its leaf "runners", which
 * has a pids.max of its own a little below the tenant's; and "compile-N"
 * for each compile helper. A worker joins its tenant's group
 * itself, first thing, while it is still root (cgroup_join), so that
 * nothing it or its runners allocate is charged elsewhere; so does a
 * compile helper, before it starts a compiler.
 *
 * Not thread-safe: the listener calls it from its loop thread, a worker
 * once at start.
 */
#ifndef HIPD_SANDBOX_CGROUP_H
#define HIPD_SANDBOX_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* The environment variable through which a worker learns its group. */
#define CGROUP_ENV "HIPD_CGROUP"

typedef enum {
  CGROUP_NONE = 0, /* no groups: cgroup_state() says why */
  CGROUP_V1 = 1,   /* the v1 memory and pids hierarchies */
  CGROUP_V2 = 2,   /* a delegated cgroup2 subtree */
} cgroup_mode_t;

/* Find and prepare the base (above), if @p enabled and root; otherwise,
 * and where no base is usable, the mode is CGROUP_NONE with the reason.
 * Never fails: hipd runs without groups, and says so. */
void cgroup_setup(bool enabled);

cgroup_mode_t cgroup_mode(void);

/* "v1 memory:/path pids:/path", "v2 /path", or "none: why". */
const char *cgroup_state(void);

/* The limits of every tenant's group: @p mem_max bytes of memory (0: no
 * limit), @p pids_max processes and threads (0: no limit). Applied to the
 * groups that exist now and to those made later. */
void cgroup_set_tenant_limits(uint64_t mem_max, uint32_t pids_max);

/* The default of --tenant-host-mem: half of the host's memory. */
uint64_t cgroup_default_tenant_mem(void);

/* Make (or keep) uid @p uid's group with the tenant limits, and write
 * "HIPD_CGROUP=..." for the worker's environment into @p env (@p cap
 * bytes). @return 0, or an error (the worker is started without a group:
 * the caller logs it). */
int cgroup_tenant_prepare(uid_t uid, char *env, size_t cap, hipd_err_t *err);

/* Make (or keep) compile helper @p index's group, with @p mem_max bytes
 * and @p pids_max processes, and write "HIPD_CGROUP=..." for its
 * environment into @p env: it joins with cgroup_join() before it starts
 * anything. @return 0 or an error. */
int cgroup_helper_prepare(unsigned index, uint64_t mem_max, uint32_t pids_max,
                          char *env, size_t cap, hipd_err_t *err);

/* uid @p uid's group's memory in use, its limit (UINT64_MAX: none), its
 * OOM kills, its processes now and their limit (UINT32_MAX: none).
 * @return 0, or HIPD_ENOENT without a group. */
typedef struct {
  uint64_t mem_current;
  uint64_t mem_max;
  uint64_t oom_kills;
  uint32_t pids_current;
  uint32_t pids_max;
} cgroup_usage_t;
int cgroup_tenant_usage(uid_t uid, cgroup_usage_t *out);

/* Remove every group made (those still holding processes stay). */
void cgroup_teardown(void);

/* In a worker or compile helper, as root, before anything else: join
 * the group named by CGROUP_ENV (its @p leaf, unless NULL) and remove the
 * variable. @p usage_fd and @p limit_fd get open descriptors of the
 * group's memory in use and limit (-1 without a group); read them with
 * cgroup_read_u64(). @return 0 (no variable: no group), or an error. */
int cgroup_join(const char *leaf, int *usage_fd, int *limit_fd,
                hipd_err_t *err);

/* In the CPU runners' launcher, forked by a worker that joined its leaf
 * "worker", before it gives up root: move into the tenant's leaf
 * "runners" (its own share of the tenant's processes). Async-signal-safe.
 * @return 0 (nothing to do included), or -1. */
int cgroup_enter_runners(void);

/* A number read from an open cgroup file (pread at 0): "max" is
 * UINT64_MAX. @return 0, or -1. */
int cgroup_read_u64(int fd, uint64_t *out);

#endif
