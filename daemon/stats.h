/* SPDX-License-Identifier: MIT */
/* daemon/stats.h: accounting of who uses the devices (issue 14).
 *
 * Counters of one process (a tenant worker, or the one process of
 * --isolation none), kept on the loop thread by plain increments where the
 * work is answered: call_send() counts every request by method and code,
 * the methods' op completion counts transfers, launches and device busy
 * time (methods/common.c), and the session's teardown ends its record.
 * Three levels: a session's (for session.list), its uid's (the tenant
 * series, kept for the process's life so that they never go down), and
 * each device's (node-wide totals of this process).
 *
 * Device busy time of a kernel launch is the interval between the launch's
 * submission (op_start() on the loop) and the loop's observation of its
 * completion; a launch that does not wait (an asynchronous GPU launch)
 * stays open until the session's next op on that device that waits (a
 * synchronize, a read, a waiting launch) completes. Intervals are merged
 * (per device, per session, per uid and device) by a watermark, so work
 * that overlaps is counted once at each level. Cost: one clock read per
 * op at submission and one at completion, a few additions; no device call.
 *
 * stats_pack_report() packs everything as a msgpack report, the one form
 * the admin layer (admin/) builds its views from, in every mode. Same layer
 * as resources.c. Loop thread only.
 */
#ifndef HIPD_STATS_H
#define HIPD_STATS_H

#include <msgpack.h>
#include <stdint.h>

#include "daemon.h"

#define STATS_MAX_DEVICES 64
#define STATS_MAX_CODES 64 /* -code indexes; 0 is OK */
/* Sessions a report lists at most: with their fields, a report stays
 * under the wire's limits (ipc_limits()); admin/report.h agrees. */
#define STATS_REPORT_SESSIONS 2048
/* msgpack objects a report packs at most: under the wire's max_objects
 * (ipc.c, 65536) with room for the response around it. Sessions that do
 * not fit are left out and the report says truncated. */
#define STATS_REPORT_OBJECTS 65000
#define STATS_REQ_SLOTS 256 /* methods, at most (the table has ~70) */

/* The per-session record of a report (admin/report.h's "sessions"), one
 * line a field: X(name, kind, min, max). kind U64: an unsigned integer of
 * at most max; I64: a signed one in [min, max]; STR: a string of fewer
 * than max bytes, no NUL. The list generates the record's struct
 * (stats_sess_rec_t, embedded in admin/report.h's report_sess_t), its
 * packer (stats.c) and its reader (admin/report.c): on the wire the
 * record is an array of these fields in this order, then the buffers the
 * session holds per device, [[device, buffers, bytes]...]. Adding a field
 * is one line here (and its value in stats.c's pack_session()). */
#define STATS_SESSION_FIELDS(X)                                                \
  X(id, U64, 0, UINT64_MAX)                                                    \
  X(pid, I64, INT32_MIN, INT32_MAX)                                            \
  X(uid, U64, 0, UINT32_MAX)                                                   \
  X(gid, U64, 0, UINT32_MAX)                                                   \
  X(client, STR, 0, 64)                                                        \
  X(age_ms, U64, 0, UINT64_MAX)                                                \
  X(requests, U64, 0, UINT64_MAX)                                              \
  X(errors, U64, 0, UINT64_MAX)                                                \
  X(streams, U64, 0, UINT64_MAX)                                               \
  X(events, U64, 0, UINT64_MAX)                                                \
  X(kernels_loaded, U64, 0, UINT64_MAX)                                        \
  X(launches, U64, 0, UINT64_MAX)                                              \
  X(busy_ns, U64, 0, UINT64_MAX)                                               \
  X(h2d, U64, 0, UINT64_MAX)                                                   \
  X(d2h, U64, 0, UINT64_MAX)                                                   \
  X(grant, U64, 0, UINT64_MAX)

/* The other records of a report, the same way (kind BOOL: true or
 * false, an int in the struct). Each list generates the record's struct
 * (stats_*_rec_t, embedded in admin/report.h's report_*_t), its packer
 * (stats.c) and its reader (admin/report.c).
 *
 * A device's counters, in the device record and (one per device) in the
 * uid record. */
#define STATS_CTR_FIELDS(X)                                                    \
  X(dev, I64, 0, STATS_MAX_DEVICES - 1)                                        \
  X(launches, U64, 0, UINT64_MAX)                                              \
  X(busy_ns, U64, 0, UINT64_MAX)                                               \
  X(h2d, U64, 0, UINT64_MAX)                                                   \
  X(d2h, U64, 0, UINT64_MAX)                                                   \
  X(faults, U64, 0, UINT64_MAX)
/* A device: these fields, then its counters (a STATS_CTR_FIELDS record of
 * the same device). */
#define STATS_DEVICE_FIELDS(X)                                                 \
  X(id, I64, 0, STATS_MAX_DEVICES - 1)                                         \
  X(name, STR, 0, 256)                                                         \
  X(kind, STR, 0, 8)                                                           \
  X(mem_total, U64, 0, UINT64_MAX)                                             \
  X(buffers, U64, 0, UINT64_MAX)                                               \
  X(held, U64, 0, UINT64_MAX)                                                  \
  X(lost, BOOL, 0, 1)
/* A uid: these fields (quota: its refused allocations), then its counters
 * of each device, in device order. */
#define STATS_UID_FIELDS(X)                                                    \
  X(uid, U64, 0, UINT32_MAX)                                                   \
  X(quota, U64, 0, UINT64_MAX)                                                 \
  X(faults, U64, 0, UINT64_MAX)                                                \
  X(mps_threads, U64, 0, 100)                                                  \
  X(mps_mem, U64, 0, UINT64_MAX)
/* What a session holds on one device (its record's last field, a list). */
#define STATS_HELD_FIELDS(X)                                                   \
  X(dev, I64, 0, STATS_MAX_DEVICES - 1)                                        \
  X(buffers, U64, 0, UINT64_MAX)                                               \
  X(bytes, U64, 0, UINT64_MAX)
/* A grant's usage in this process (grants.h's grant_usage_t), by the
 * grant's serial; the label is the worker's copy's, for logs only. */
#define STATS_GRANT_FIELDS(X)                                                  \
  X(serial, U64, 1, UINT64_MAX)                                                \
  X(label, STR, 0, 64)                                                         \
  X(sessions, U64, 0, UINT64_MAX)                                              \
  X(launches, U64, 0, UINT64_MAX)                                              \
  X(busy_ns, U64, 0, UINT64_MAX)                                               \
  X(h2d, U64, 0, UINT64_MAX)                                                   \
  X(d2h, U64, 0, UINT64_MAX)                                                   \
  X(held, U64, 0, UINT64_MAX)                                                  \
  X(peak, U64, 0, UINT64_MAX)
/* How many requests of a method ended with a code (0: a result). */
#define STATS_REQUEST_FIELDS(X)                                                \
  X(method, STR, 0, 64)                                                        \
  X(code, I64, -(STATS_MAX_CODES - 1), 0)                                      \
  X(n, U64, 0, UINT64_MAX)

#define STATS_FIELD_DECL_U64(name, max) uint64_t name;
#define STATS_FIELD_DECL_I64(name, max) int64_t name;
#define STATS_FIELD_DECL_BOOL(name, max) int name;
#define STATS_FIELD_DECL_STR(name, max) char name[max];
#define STATS_FIELD_DECL(name, kind, min, max)                                 \
  STATS_FIELD_DECL_##kind(name, max)
#define STATS_FIELD_INDEX(name, kind, min, max) STATS_SESS_##name,
#define STATS_FIELD_COUNT(name, kind, min, max) +1
#define STATS_CTR_NFIELDS ((uint32_t)(0 STATS_CTR_FIELDS(STATS_FIELD_COUNT)))
#define STATS_DEVICE_NFIELDS                                                   \
  ((uint32_t)(0 STATS_DEVICE_FIELDS(STATS_FIELD_COUNT)))
#define STATS_UID_NFIELDS ((uint32_t)(0 STATS_UID_FIELDS(STATS_FIELD_COUNT)))
#define STATS_HELD_NFIELDS ((uint32_t)(0 STATS_HELD_FIELDS(STATS_FIELD_COUNT)))
#define STATS_REQUEST_NFIELDS                                                  \
  ((uint32_t)(0 STATS_REQUEST_FIELDS(STATS_FIELD_COUNT)))
#define STATS_GRANT_NFIELDS                                                    \
  ((uint32_t)(0 STATS_GRANT_FIELDS(STATS_FIELD_COUNT)))

/* Each field's place in the record; the held list comes last. */
enum stats_sess_field {
  STATS_SESSION_FIELDS(STATS_FIELD_INDEX) STATS_SESS_HELD
};
/* The parts of a report, in this order (admin/report.h); truncated and
 * grants may be absent (a report of an older worker). */
enum stats_report_part {
  STATS_REPORT_VERSION, /* 1 */
  STATS_REPORT_PID,
  STATS_REPORT_SESSIONS_LIST,
  STATS_REPORT_DEVICES_LIST,
  STATS_REPORT_UIDS_LIST,
  STATS_REPORT_REQUESTS_LIST,
  STATS_REPORT_TRUNCATED,
  STATS_REPORT_GRANTS_LIST,
  STATS_REPORT_PARTS
};
/* The uid record's fields' places (the uid is what the listener keeps
 * a worker's report to). */
#define STATS_UID_INDEX(name, kind, min, max) STATS_UID_##name,
enum stats_uid_field { STATS_UID_FIELDS(STATS_UID_INDEX) STATS_UID_CTRS };
/* The record's fields (without the held list). */
#define STATS_SESSION_NFIELDS ((uint32_t)STATS_SESS_HELD)

typedef struct stats_sess_rec {
  STATS_SESSION_FIELDS(STATS_FIELD_DECL)
} stats_sess_rec_t;
typedef struct stats_ctr_rec {
  STATS_CTR_FIELDS(STATS_FIELD_DECL)
} stats_ctr_rec_t;
typedef struct stats_dev_rec {
  STATS_DEVICE_FIELDS(STATS_FIELD_DECL)
} stats_dev_rec_t;
typedef struct stats_uid_rec {
  STATS_UID_FIELDS(STATS_FIELD_DECL)
} stats_uid_rec_t;
typedef struct stats_held_rec {
  STATS_HELD_FIELDS(STATS_FIELD_DECL)
} stats_held_rec_t;
typedef struct stats_req_rec {
  STATS_REQUEST_FIELDS(STATS_FIELD_DECL)
} stats_req_rec_t;
typedef struct stats_grant_rec {
  STATS_GRANT_FIELDS(STATS_FIELD_DECL)
} stats_grant_rec_t;

struct session;

typedef struct stats_sess {
  uint64_t errors;
  uint64_t launches;
  uint64_t busy_ns;
  uint64_t busy_end; /* merge watermark */
  uint64_t h2d, d2h;
  uint64_t open_since[STATS_MAX_DEVICES]; /* an async launch's start, 0:
                                             none open */
} stats_sess_t;

/* A request was answered with @p code (0: a result): one place, for
 * every method (call_send()). @p method is the name in dispatch's table
 * (a pointer that lives as long as the process), NULL for an unknown
 * method. */
void stats_request(struct session *s, const char *method, int code);
/* An op of kind @p kind (op_kind_t) on device @p dev finished with
 * @p status, having moved @p bytes, submitted at @p t0_ns (util_now_ns),
 * ended at @p end_ns (0: now; an op answered early ended before its
 * completion reached the loop), @p waited: its completion includes the
 * device's work. */
void stats_op(struct session *s, int kind, int dev, int status, uint64_t bytes,
              uint64_t t0_ns, uint64_t end_ns, int waited);
/* The session is torn down (res_release_all): its record goes. */
void stats_session_end(struct session *s);

/* Pack this process's report (see admin/report.h for its layout). */
void stats_pack_report(daemon_t *d, msgpack_packer *pk);

#endif
