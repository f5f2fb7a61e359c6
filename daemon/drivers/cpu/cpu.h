/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu.h: settings of the CPU device driver. */
#ifndef HIPD_DRIVERS_CPU_H
#define HIPD_DRIVERS_CPU_H

/* How many CPU devices to serve (default 1); call before init. Several
 * CPU devices share the host; they exist to exercise multi-device code
 * without GPUs. */
void cpu_driver_set_count(int n);
/* A kernel launch on the CPU device that runs longer than @p ms (0: no
 * limit) is stopped by restarting the kernel runner: it fails with
 * HIPD_ETIMEDOUT and the device goes on. */
void cpu_driver_set_launch_timeout(unsigned ms);

#include <stdint.h>

/* Host memory the CPU device leaves free: an allocation that would leave
 * the host less available memory (MemAvailable) than @p bytes fails with
 * HIPD_ENOMEM, so that buffers (memfd pages, in no process's RSS) cannot
 * push the host into its OOM killer. 0: cpu_driver_default_reserve(). */
void cpu_driver_set_host_reserve(uint64_t bytes);
/* The tenant's cgroup (sandbox/cgroup.h): open descriptors of its memory
 * in use and its limit, or -1. An allocation that would bring its use
 * near the limit fails with HIPD_ENOMEM, before the kernel's OOM killer
 * would end one of the tenant's processes. The driver keeps them. */
void cpu_driver_set_tenant_memory(int usage_fd, int limit_fd);
/* The default reserve: a sixteenth of the host's memory, at least 256 MiB
 * and at most 8 GiB. */
uint64_t cpu_driver_default_reserve(void);

#include <sys/types.h>

/* The account a CPU runner runs client kernels as when hipd is root and
 * starts the runner itself: --isolation none, or no launcher was started
 * (cpu_launcher.h; with one, the runner is the launcher's uid, the
 * tenant's). Default: the account CPU_RUNNER_DEFAULT_USER, looked up when
 * the runner starts; none and no setting means no kernels (HIPD_EPERM).
 * Neither id may be 0. (uid_t)-1 goes back to the default. Takes effect
 * at the next start of the runner; thread-safe. Not root: the runner is
 * hipd's own uid, and this is ignored. */
#define CPU_RUNNER_DEFAULT_USER "nobody"
void cpu_driver_set_runner_user(uid_t uid, gid_t gid);
/* Kill the runner of a CPU launch in flight, if one is (those launches
 * fail; the next request starts a fresh runner): a worker whose last
 * session closed calls it, so that nobody's endless kernel runs on.
 * @return 1 if a runner was killed. Loop thread. */
int cpu_driver_abort_launches(void);
/* Remove the driver's temporary files ($TMPDIR/hipd-modules-XXXXXX) now,
 * for a process about to _exit() or exec() without devices_shutdown()
 * (which removes them too, as does exit()). Thread-safe. */
void cpu_driver_cleanup(void);

#endif
