/* SPDX-License-Identifier: MIT */
/* daemon/admin/report.h: a process's report (stats_pack_report()),
 * decoded and checked.
 *
 * Layout (msgpack, version 1; each record an array of the fields of its
 * list in stats.h, in that order):
 *   [1, pid, sessions, devices, uids, requests(, truncated)]
 *   sessions: [[STATS_SESSION_FIELDS..., [[STATS_HELD_FIELDS...]...]]...]
 *   devices:  [[STATS_DEVICE_FIELDS..., [STATS_CTR_FIELDS...]]...]
 *   uids:     [[STATS_UID_FIELDS..., [[STATS_CTR_FIELDS...]...]]...]
 *   requests: [[STATS_REQUEST_FIELDS...]...]
 *   truncated: optional bool, true when the process left sessions out
 *              to keep the report under the wire's limits (ipc_limits())
 *   grants:   optional (after truncated), [[STATS_GRANT_FIELDS...]...]:
 *             the usage of each grant the process holds (grants.h)
 * A report comes from a worker, which the listener does not trust:
 * report_decode() checks every field and bound, report_decode_for() also
 * keeps only what is the worker's uid's.
 */
#ifndef HIPD_ADMIN_REPORT_H
#define HIPD_ADMIN_REPORT_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

#define REPORT_MAX_DEVICES 64
#define REPORT_MAX_SESSIONS                                                    \
  2048 /* a report lists at most this many; the worker also keeps what it      \
          packs under ipc_limits()' object count (stats_pack_report()) */
#define REPORT_MAX_UIDS 4096
#define REPORT_MAX_REQUESTS 4096

/* Each record's fields, by name (stats.h's lists). */
typedef struct report_ctr {
  STATS_CTR_FIELDS(STATS_FIELD_DECL)
} report_ctr_t;

typedef struct report_held {
  STATS_HELD_FIELDS(STATS_FIELD_DECL)
} report_held_t;

typedef struct report_sess {
  struct {
    STATS_SESSION_FIELDS(STATS_FIELD_DECL)
  };
  report_held_t *held;
  uint32_t nheld;
} report_sess_t;

typedef struct report_dev {
  struct {
    STATS_DEVICE_FIELDS(STATS_FIELD_DECL)
  };
  report_ctr_t c;
} report_dev_t;

typedef struct report_uid {
  struct {
    STATS_UID_FIELDS(STATS_FIELD_DECL)
  };
  report_ctr_t dev[REPORT_MAX_DEVICES];
  uint32_t ndev;
} report_uid_t;

typedef struct report_req {
  STATS_REQUEST_FIELDS(STATS_FIELD_DECL)
} report_req_t;

typedef struct report_grant {
  STATS_GRANT_FIELDS(STATS_FIELD_DECL)
} report_grant_t;
#define REPORT_MAX_GRANTS 1024 /* grants.h's GRANTS_MAX */

typedef struct report {
  int64_t pid;
  char tenant[64];    /* set by the listener: "uid 1001", "none"... */
  int64_t worker_pid; /* 0 in --isolation none */
  uint64_t owner;     /* the listener's worker's serial, 0: this process */
  int truncated;      /* the process left sessions out (wire limits) */
  uint32_t dropped;   /* records the listener did not accept (not the
                         worker's uid, or a session it did not hand over) */
  uint32_t refs;      /* report_ref(); report_free() drops one */
  report_sess_t *sess;
  uint32_t nsess;
  report_dev_t *dev;
  uint32_t ndev;
  report_uid_t *uids;
  uint32_t nuids;
  report_req_t *req;
  uint32_t nreq;
  report_grant_t *grants;
  uint32_t ngrants;
  int64_t uid; /* report_decode_for()'s uid, -1: every uid's */
} report_t;

/* The reports an admin view is built from. */
typedef struct report_set {
  report_t **r;
  uint32_t n;
  uint32_t missing;   /* workers left out (no answer within 2 s) */
  uint32_t truncated; /* of r, reports that left sessions out */
  uint32_t exited;    /* of r, the last reports of workers that exited, not
                         folded yet: counters only */
} report_set_t;

/* Decode @p o into a new report. @return it, or NULL (malformed, or out
 * of memory). */
report_t *report_decode(const msgpack_object *o);
/* As report_decode(), for a worker that serves uid @p uid alone: session
 * records of another uid and uid records but the first of @p uid are
 * dropped (counted in dropped), not decoded. */
report_t *report_decode_for(const msgpack_object *o, uint64_t uid);
/* Decode @p len bytes of packed msgpack. */
report_t *report_decode_bytes(const char *data, size_t len);
/* Another reference to @p r: report_free() frees it at the last. */
report_t *report_ref(report_t *r);
void report_free(report_t *r);

#endif
