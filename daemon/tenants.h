/* SPDX-License-Identifier: MIT */
/* daemon/tenants.h: tenants, the accounting unit above a session.
 *
 * A tenant is one peer uid (SO_PEERCRED at accept). Its record sums what
 * all of its sessions hold: sessions open, bytes of buffers counted
 * against the quotas, streams made with stream.create, and handles; the
 * per-tenant limits (--tenant-mem-quota, --tenant-max-sessions,
 * --tenant-max-handles, --tenant-max-streams) are checked against it by
 * resources.c and the transport's accept.
 *
 * Lifetime: the record is made with the uid's first session and freed
 * when the last session that points to it is freed (not merely closed:
 * an allocation that completes after its session closed still releases
 * its reservation here). `sessions` counts the sessions not yet torn
 * down, `refs` the session structures that point to the record.
 * Loop thread only. Same layer as resources.c: it calls nothing above.
 */
#ifndef HIPD_TENANTS_H
#define HIPD_TENANTS_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"

typedef struct tenant {
  list_node_t node;  /* in d->tenants */
  uid_t uid;         /* the tenant */
  uint32_t refs;     /* sessions pointing here, torn down or not */
  uint32_t sessions; /* sessions open (not yet torn down) */
  uint64_t mem_used; /* bytes counted against --tenant-mem-quota */
  uint32_t streams;  /* streams made with stream.create, held now */
  uint32_t handles;  /* handles of every type, default streams included */
} tenant_t;

struct session;

/* Attach session @p s to the tenant of s->peer_uid, making the record on
 * its first session. @return 0, or HIPD_ENOMEM (s->tenant stays NULL). */
int tenant_attach(struct session *s);
/* The session is torn down: it no longer counts as open. Once. */
void tenant_session_closed(struct session *s);
/* The session's memory goes: drop its reference to the record (freed
 * with the last). NULL tenant: nothing. */
void tenant_put(struct session *s);
/* The record of @p uid, or NULL when it has no session. */
tenant_t *tenant_find(daemon_t *d, uid_t uid);

#endif
