/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox_internal.h: what sandbox.c calls in
 * sandbox_landlock.c and sandbox_seccomp.c. */
#ifndef HIPD_SANDBOX_INTERNAL_H
#define HIPD_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox.h"

/* The kernel's Landlock ABI version, 0 if none or disabled. */
int sandbox_landlock_abi(void);
/* Restrict the calling thread to spec->paths (sandbox.h). @return 0 when
 * applied (@p why may then name skipped paths), 1 when the kernel has no
 * Landlock (@p why says so), or a negative code with @p err set. */
int sandbox_landlock_apply(const sandbox_spec_t *spec, char *why, size_t whysz,
                           hipd_err_t *err);

/* Whether seccomp filters can be installed. */
bool sandbox_seccomp_available(void);
/* Install the filter of @p profile on every thread (TSYNC). */
int sandbox_seccomp_apply(sandbox_profile_t profile, hipd_err_t *err);
/* The same with another action than EPERM for what no row allows: for
 * finding what a profile lacks (SCMP_ACT_TRAP or SCMP_ACT_LOG). */
int sandbox_seccomp_apply_default(sandbox_profile_t profile,
                                  uint32_t default_action, hipd_err_t *err);

#endif
