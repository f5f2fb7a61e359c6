/* SPDX-License-Identifier: MIT */
/* daemon/tenants.h: tenants, the accounting unit above a session.
 *
 * A tenant is one peer uid (SO_PEERCRED at accept). Its record sums what
 * all of its sessions hold: sessions open, bytes of buffers counted
 * against the quotas, streams made with stream.create, handles, and the
 * sessions not yet past hello; the per-tenant limits (--tenant-mem-quota,
 * --tenant-max-sessions, --tenant-max-connecting, --tenant-max-handles,
 * --tenant-max-streams) are checked against it by resources.c and the
 * transport's accept.
 *
 * Lifetime: the record is made with the uid's first session and freed
 * when the last session that points to it is freed (not merely closed:
 * an allocation that completes after its session closed still releases
 * its reservation here). `sessions` counts the sessions not yet torn
 * down, `refs` the session structures that point to the record.
 * `connecting` lists the sessions not yet past a successful hello, from
 * accept (tenant_attach) until that hello or their close, whichever comes
 * first (--tenant-max-connecting).
 * With --isolation session each session has a worker of its own, so a
 * record alone would count one session: there the totals are the tenant
 * page's (below), which all of the uid's workers share.
 * Loop thread only (the page's counters are atomic: other processes').
 * Same layer as resources.c: it calls nothing above.
 */
#ifndef HIPD_TENANTS_H
#define HIPD_TENANTS_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "util/err.h"

/* Devices whose bytes are counted per tenant (device.c has at most as
 * many). */
#define TENANT_DEVICES 64

/* Grants one uid may hold at once (a slot of counts each, below). */
#define TENANT_GRANT_SLOTS 8

/* What the limits count (tenant_count_add). */
typedef enum {
  TC_MEM = 0,  /* bytes counted against --tenant-mem-quota */
  TC_STREAMS,  /* streams made with stream.create, held now */
  TC_HANDLES,  /* handles of every type, default streams included */
  TC_SESSIONS, /* sessions open (not yet torn down) */
  TC_DEV0,     /* + a device's global id: its bytes of the uid's buffers
                  (--tenant-device-share) */
  /* + a grant's serial % TENANT_GRANT_SLOTS: the bytes of the sessions
     under that grant of the uid (grants.h: a uid's live grants have
     different slots), so that its quota holds across the uid's workers */
  TC_GRANT0 = TC_DEV0 + TENANT_DEVICES,
  TC_COUNT = TC_GRANT0 + TENANT_GRANT_SLOTS
} tenant_counter_t;

/* The tenant page (--isolation session): one uid's counts across all its
 * workers, a memfd the listener makes per uid and maps into each of the
 * uid's workers. `total` is what the limits are checked against; each
 * worker adds its own changes to it and to its `slot`, so that when a
 * worker dies the listener takes its slot's counts back off the total
 * (privsep/tenant_pages.c). Only counts, no pointers: a worker that
 * writes nonsense there misleads its own uid's limits, nothing else. */
typedef struct {
  _Atomic uint64_t v[TC_COUNT];
} tenant_counts_t;
typedef struct {
  tenant_counts_t total;
  tenant_counts_t slot[]; /* one per worker of the uid */
} tenant_page_t;
#define TENANT_PAGE_SIZE(nslots)                                               \
  (sizeof(tenant_page_t) + (size_t)(nslots) * sizeof(tenant_counts_t))
/* Where a session-mode worker finds its uid's page, and its slot. */
#define TENANT_PAGE_FD 5
#define TENANT_SLOT_ENV "HIPD_TENANT_SLOT"

typedef struct tenant {
  list_node_t node;        /* in d->tenants */
  uid_t uid;               /* the tenant */
  uint32_t refs;           /* sessions pointing here, torn down or not */
  uint64_t here[TC_COUNT]; /* this process's counts (tenant_counter_t) */
  tenant_counts_t *total;  /* the page's totals, NULL: here are the totals */
  tenant_counts_t *mine;   /* this worker's slot of the page */
  /* Its sessions not yet past hello, oldest first (their
   * session_t.connecting_node). */
  list_node_t connecting;
} tenant_t;

/* Add @p delta to counter @p c of @p t (here, and on its page with one);
 * @return the uid's total after it: across all its workers with a page,
 * else this process's. */
uint64_t tenant_count_add(tenant_t *t, tenant_counter_t c, int64_t delta);
/* The uid's total of counter @p c (as tenant_count_add). */
uint64_t tenant_count(const tenant_t *t, tenant_counter_t c);

/* In a session-mode worker, before its session: map the tenant page the
 * listener gave it (TENANT_PAGE_FD, slot in TENANT_SLOT_ENV), if any.
 * @return 0 (no page: counts stay this process's), or an error. */
int tenant_page_attach(hipd_err_t *err);

struct session;

/* --tenant-max-connecting: a connection counts against it once it has
 * gone this long without a successful hello. A burst of clients that all
 * connect at once (a job's ranks) says hello well within it; connections
 * that stay silent accumulate. */
#define TENANT_CONNECTING_GRACE_MS 1000

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

/* Session @p s said a successful hello, or is closing: it no longer counts
 * as connecting. Any number of times; NULL tenant: nothing. */
void tenant_connecting_done(struct session *s);
/* The sessions of @p t that have gone TENANT_CONNECTING_GRACE_MS without
 * a successful hello by @p now_ms. */
uint32_t tenant_connecting_count(const tenant_t *t, uint64_t now_ms);
/* The policy of --tenant-max-connecting, for whoever counts a uid's
 * connections (this process's sessions, or the listener's workers): may
 * uid @p uid, which has @p silent connections past the grace, take another
 * one? @return 0, or HIPD_ETOOMANY with the reason to close the new
 * connection with in @p why ("uid 1001 has 32 connections without...").
 * Never refuses with --tenant-max-connecting 0. */
int tenant_connecting_check(const daemon_config_t *cfg, uid_t uid,
                            uint32_t silent, char *why, size_t whylen);

#endif
