/* SPDX-License-Identifier: MIT */
/* tests/lib/users.h: the test users, and daemons they can reach, for the
 * programs that run clients as real other uids (check_policy, check_privsep,
 * check_admin, check_isolation, check_faults, check_sandbox,
 * check_cpu_sandbox). Compiled once in tests/lib/users.c (libhipdtest).
 *
 * The users are made as root with useradd (no home, no user group, no
 * login shell) the first time a program needs them and kept for the next
 * run; tests/README.md lists them. */
#ifndef HIPD_TESTS_USERS_H
#define HIPD_TESTS_USERS_H

#include <stdio.h>
#include <sys/types.h>

#include "harness.h"

/* In a child run by harness_run_as() (its `msg` and `msglen` in scope):
 * unless @p cond holds, say why in msg and fail (return -1). */
#define REQUIRE(cond, ...)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      snprintf(msg, msglen, __VA_ARGS__);                                      \
      return -1;                                                               \
    }                                                                          \
  } while (0)

/* Make user @p name unless it exists (useradd -M -N -s /usr/sbin/nologin);
 * its uid and primary gid go to *@p uid and *@p gid (either may be NULL).
 * @return 0 or -1. */
int users_make(const char *name, uid_t *uid, gid_t *gid);
/* Make group @p group unless it exists, with @p member in it
 * (supplementary) and @p not_member (may be NULL) taken out of it.
 * @return 0 or -1. */
int users_make_group(const char *group, const char *member,
                     const char *not_member);

/* Start a daemon that the test users can reach (--socket-mode 0666, its
 * directories searchable: harness_share_socket()) on the CPU devices only
 * (--devices cpu: device counts and ids do not depend on the host's GPUs),
 * with the NULL-terminated extra options; it must start. */
harness_daemon_t *users_start_shared(const char *arg, ...);
/* The same on the devices @p devices (--devices), with the options of the
 * NULL-terminated array @p extra (may be NULL). */
harness_daemon_t *users_start_sharedv(const char *devices,
                                      const char *const *extra);

/* Run @p fn as @p user (harness_run_as()); fail the test with its message
 * unless it returned 0. */
void users_as(const char *user, int (*fn)(void *, char *, size_t), void *arg);

#endif
