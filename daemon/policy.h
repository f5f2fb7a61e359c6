/* SPDX-License-Identifier: MIT */
/* daemon/policy.h: who may connect, and which devices each peer may use.
 *
 * The rules come from the command line: --allow-users LIST (user names or
 * uids), --allow-groups LIST (group names or gids, matched against the
 * peer's primary gid from SO_PEERCRED and the supplementary groups of its
 * user from getgrouplist()), and --device-allow DEV=LIST, repeatable (DEV
 * a global id, a driver, or driver:N as in --devices; LIST user names,
 * uids, and @group names or @gids). Without --strict-allow, root and
 * hipd's own uid are allowed by every rule. Names are resolved once, at
 * start; a name that does not exist stops hipd.
 *
 * Grants (grants.h) add to these rules at run time: policy_check_peer()
 * reads them as it reads the rules, in the listener and in the worker.
 *
 * Who calls it: main.c (policy_init, at start, after the devices are
 * known), the listener's and the transport's accept (policy_check_peer,
 * policy_refuse) and every place a
 * device is addressed (dispatch's device params, methods/device.c),
 * through session_may_use_device() and policy_device_refusal(). Same
 * layer as sessions and resources; calls only the devices and the user
 * database, and writes a refused peer its one message. Loop thread.
 */
#ifndef HIPD_POLICY_H
#define HIPD_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "util/err.h"

struct device;

/* Parse the rules of d->cfg into d->policy (NULL when there are none).
 * @return 0, or HIPD_EINVAL with @p err naming the bad word (or HIPD_ENOMEM,
 * its message empty); @p err holds the returned code. */
int policy_init(daemon_t *d, hipd_err_t *err);
void policy_free(daemon_t *d);

/* Decide for a peer with @p uid and primary @p gid: fill @p who with
 * "uid 1001 (bob)" (for messages), @p devmask with the devices it may
 * use (bit = global id) and @p grant (may be NULL) with the serial of the
 * grant it comes under (grants.h: the newest of its uid's; 0: none). The
 * rules and the grants together: a peer the rules refuse is admitted when
 * its uid has a grant, to that grant's devices alone; one they admit gets
 * its grant's devices added to theirs. @return 0, or HIPD_EPERM when it
 * may not connect, with @p err naming the rule ("uid 1001 (bob) is not
 * allowed by --allow-users alice,1002"). May read the user database
 * (NSS). */
int policy_check_peer(const daemon_t *d, uid_t uid, gid_t gid, char *who,
                      size_t wholen, uint64_t *devmask, uint64_t *grant,
                      hipd_err_t *err);

/* Answered refusals: a uid's refused connections are told why
 * (session.refused) REFUSAL_BURST at once, then REFUSAL_RATE a second;
 * those beyond are closed without a word. */
#define REFUSAL_BURST 8
#define REFUSAL_RATE 4

/* Tell the peer on connected socket @p fd, of @p uid, that
 * policy_check_peer() refused it: session.refused with @p err, in one
 * non-blocking send (nothing is kept: a socket that cannot take it at once
 * gets nothing), unless @p uid is past its answered refusals. The caller
 * closes the connection at once; @p why gets its close reason, "not
 * allowed: " and the rule (PROTOCOL.md, "Why a session is closed"), with
 * "(not told: ...)" when the peer was not. @return 1 if the peer was told,
 * else 0. The rate limit of each uid lives in d->policy (a reload starts
 * it afresh). */
int policy_refuse(daemon_t *d, int fd, uid_t uid, const hipd_err_t *err,
                  char *why, size_t whylen);

/* HIPD_EPERM in @p err with the message for a device the peer @p who may
 * not use: "device 1 (cpu:1) is not allowed for uid 1001 (bob) by
 * --device-allow cpu:1=alice". */
void policy_device_refusal(const daemon_t *d, const char *who,
                           const struct device *dev, hipd_err_t *err);

#endif
