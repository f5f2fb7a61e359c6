/* SPDX-License-Identifier: MIT */
/* daemon/grants.h: access granted at run time (issue 25; PROTOCOL.md,
 * "Grants").
 *
 * A grant gives one uid a set of devices, optionally with a quota of
 * device memory, under a label (a batch job's id): `grant.add`, taken
 * back with `grant.revoke`. Grants add to the configured access policy
 * (policy.c consults them in policy_check_peer(), the one check of every
 * connection) and live in memory only: a reload (SIGHUP) rebuilds the
 * policy and leaves them, a restart of hipd forgets them.
 *
 * A session comes under at most one grant: the newest of its uid's at its
 * connect. It may use the devices of the static policy and of that grant;
 * its buffers count against the grant's quota; its launches, busy time and
 * bytes count for the grant's label (the usage reported at revoke and in
 * the metrics). Revoking a grant closes the sessions under it (reason
 * "access revoked: "), which releases their memory.
 *
 * Where the table lives: the listener (or the one process of --isolation
 * none) holds every grant, the only one that adds or removes them. A
 * worker holds a copy of its uid's grants, which the listener sends it
 * (privsep's `grants` message) when it starts and after every change; on
 * each copy the worker closes its sessions whose grant is gone
 * (grants_close_revoked()). The usage of a grant is counted where its
 * sessions run (a worker, or the one process) and reported with the
 * process's report (stats.c); the listener adds up the reports, and folds
 * those of workers that exit into its own record of the grant.
 *
 * Same layer as policy.c and resources.c. Loop thread only.
 */
#ifndef HIPD_GRANTS_H
#define HIPD_GRANTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "util/err.h"

/* Grants at once, and a label's bytes (without its NUL). */
#define GRANTS_MAX 1024
#define GRANT_LABEL_MAX 63
/* Devices a grant can name (global ids below it; policy.c's bound). */
#define GRANT_DEVICES 64

/* What a grant's sessions did: counted in the process that runs them;
 * in the listener, what its exited workers counted (folded). */
typedef struct grant_usage {
  uint64_t launches; /* kernels launched */
  uint64_t busy_ns;  /* device busy time (stats.h's definition) */
  uint64_t busy_end; /* merge watermark (stats.c) */
  uint64_t h2d, d2h; /* bytes moved */
  uint64_t held;     /* bytes of buffers held now */
  uint64_t peak;     /* the most held at once */
  uint64_t sessions; /* sessions under it now (the workers') */
} grant_usage_t;

typedef struct grant {
  uint64_t serial;  /* unique for the listener's life, from 1 */
  uid_t uid;        /* who it is for */
  uint64_t devmask; /* its devices (bit = global id) */
  uint64_t quota;   /* bytes of device memory, 0: no bound of its own */
  uint64_t since;   /* unix seconds when it was added */
  char label[GRANT_LABEL_MAX + 1];
  grant_usage_t u;
} grant_t;

/* Is @p label (@p len bytes) a valid label: 1 to GRANT_LABEL_MAX bytes of
 * letters, digits and ._:@+- ? */
int grants_label_ok(const char *label, size_t len);

/* The listener (or one process): add a grant for @p uid of @p devmask and
 * @p quota under @p label (NULL or "": "grant-SERIAL"). @return 0 with
 * *@p out the new grant (valid until the next change of the table), or
 * HIPD_EEXIST (the label is taken), HIPD_ETOOMANY (GRANTS_MAX), HIPD_ENOMEM,
 * with @p err saying which. */
int grants_add(daemon_t *d, uid_t uid, uint64_t devmask, uint64_t quota,
               const char *label, const grant_t **out, hipd_err_t *err);
/* Remove the grant of serial @p serial; 0 or HIPD_ENOENT. */
int grants_remove(daemon_t *d, uint64_t serial);
/* The grant labelled @p label, or NULL. */
const grant_t *grants_by_label(const daemon_t *d, const char *label);
/* The grant of serial @p serial, or NULL. */
grant_t *grants_find(const daemon_t *d, uint64_t serial);
/* The grant a new session of @p uid comes under: the newest of its uid's,
 * or NULL. */
const grant_t *grants_newest(const daemon_t *d, uid_t uid);

/* A worker: make @p n grants @p in (its uid's, from the listener) the
 * table, keeping the usage of those it had (by serial). @return 0 or
 * HIPD_ENOMEM (the table is unchanged). */
int grants_replace(daemon_t *d, const grant_t *in, uint32_t n);
/* Close every session of this process whose grant is no longer in the
 * table, with the reason "access revoked: grant 'LABEL' ended" and @p why
 * after it (" (revoked by uid 0 (root))"). @p old, @p nold: the table
 * before the change, for the labels. A session of @p by (the revoker's
 * uid, an admin; -1: none) with replies on their way closes once they are
 * written, as a session that kills itself: the revoke's own answer, when
 * an admin revoked a grant its own session came under. Every other one
 * closes at once. @return the sessions closed. */
uint32_t grants_close_revoked(daemon_t *d, const grant_t *old, uint32_t nold,
                              const char *why, int64_t by);

/* Session accounting (resources.c, stats.c). */
struct session;
/* Reserve @p bytes of session @p s's grant's quota. @return 0, or
 * HIPD_EQUOTA with @p err naming the grant and its quota. */
int grants_mem_reserve(struct session *s, uint64_t bytes, hipd_err_t *err);
/* Give back @p bytes reserved by grants_mem_reserve(). */
void grants_mem_release(struct session *s, uint64_t bytes);
/* The usage record of session @p s's grant, or NULL (none, or gone). */
grant_usage_t *grants_usage_of(struct session *s);
/* Session @p s came under grant @p serial (0: none) at its accept; its
 * teardown: it no longer counts (once). */
void grants_session_begin(struct session *s, uint64_t serial);
void grants_session_end(struct session *s);

/* Free the table (at exit). */
void grants_free(daemon_t *d);

#endif
