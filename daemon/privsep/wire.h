/* SPDX-License-Identifier: MIT */
/* daemon/privsep/wire.h: the messages of the privsep channels, as one
 * table.
 *
 * Every message a channel (ipc.h) carries is a row of wire.c's table:
 * its method name, its msgpack-rpc type (request or notification), who
 * sends it (a worker, the listener, the metrics process), its params and,
 * for a request answered with an array, the fields of that answer. Each
 * list of fields below is stated once, X(T, name, kind, min, max), and
 * generates both the row's checks and a struct of named values
 * (wire_<message>_t), so that a sender packs the fields in the listed
 * order and a receiver reads them by name.
 *
 * The receiver still checks everything it is sent (the listener trusts no
 * worker): wire_dispatch() finds the row of a message by name, type and
 * sender, checks its params against the row (each kind and bound), and
 * calls that side's handler with the values, or with NULL when they are
 * malformed: what a malformed message costs (an error reply, the worker
 * stopped, a log line) stays the handler's to say. A message that is no
 * row for this sender (unknown, the wrong direction, the wrong type) is
 * refused by the caller, as each side always did. Kinds:
 *   WIRE_UINT   an unsigned integer of at most max;
 *   WIRE_INT    a signed integer in [min, max];
 *   WIRE_BYTES  a string or binary of min to max bytes (p, len; not
 *               copied, not NUL-ended);
 *   WIRE_ARRAY  an array of at most max elements (o);
 *   WIRE_ANY    any value (o), the handler checks it.
 * Params are checked as the channels always read them: the listed ones
 * must be there (extra ones are not read), except in WIRE_EXACT rows
 * (exactly the listed count) and WIRE_LAX rows (params not read at all).
 * Answers are checked with wire_result(): an array of exactly the listed
 * fields.
 *
 * Loop thread only.
 */
#ifndef HIPD_PRIVSEP_WIRE_H
#define HIPD_PRIVSEP_WIRE_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "grants.h"
#include "kernels/cache.h"
#include "log.h"
#include "rpc.h"

/* Who sends a message. */
typedef enum {
  WIRE_FROM_WORKER,
  WIRE_FROM_LISTENER,
  WIRE_FROM_METRICS
} wire_from_t;

typedef enum {
  WIRE_UINT,
  WIRE_INT,
  WIRE_BYTES,
  WIRE_ARRAY,
  WIRE_ANY
} wire_kind_t;

/* A checked value; which fields are set depends on its kind (above);
 * o is the value as decoded, always. */
typedef struct wire_val {
  uint64_t u;
  int64_t i;
  const char *p;
  size_t len;
  const msgpack_object *o;
} wire_val_t;

/* ------------------------------------------------------------ the fields */

/* Worker to listener. */
/* ready [pid]: the worker started. */
#define WIRE_READY_PARAMS(X, T) X(T, pid, WIRE_INT, INT32_MIN, INT32_MAX)
/* closed [session id]: a session of the worker was torn down. */
#define WIRE_CLOSED_PARAMS(X, T) X(T, id, WIRE_UINT, 0, UINT64_MAX)
/* hello [id]: the connection said hello (the listener counts those that
 * have not, per uid: --tenant-max-connecting). */
#define WIRE_HELLO_PARAMS(X, T) X(T, id, WIRE_UINT, 0, UINT64_MAX)
/* compile [driver, arch, source, kernel, [options], refresh]: the
 * listener keys and compiles (or finds) it. */
#define WIRE_COMPILE_PARAMS(X, T)                                              \
  X(T, driver, WIRE_BYTES, 0, 31)                                              \
  X(T, arch, WIRE_BYTES, 0, 63)                                                \
  X(T, source, WIRE_BYTES, 0, (size_t)64 << 20)                                \
  X(T, kernel, WIRE_BYTES, 0, 255)                                             \
  X(T, options, WIRE_ARRAY, 0, 256)                                            \
  X(T, refresh, WIRE_UINT, 0, 1)
/* Its answer: the key is the one the listener computed; then where its
 * time went there (cache_timing_t, in nanoseconds). */
#define WIRE_COMPILE_RESULT(X, T)                                              \
  X(T, status, WIRE_INT, INT32_MIN, 0)                                         \
  X(T, source, WIRE_INT, 0, CACHE_WAITED)                                      \
  X(T, key, WIRE_BYTES, CACHE_KEY_SIZE, CACHE_KEY_SIZE)                        \
  X(T, log, WIRE_BYTES, 0, SIZE_MAX)                                           \
  X(T, image, WIRE_ANY, 0, 0) /* bin when status is 0, else nil */             \
  X(T, wait_ns, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, compile_ns, WIRE_UINT, 0, UINT64_MAX)                                   \
  X(T, helper_ns, WIRE_UINT, 0, UINT64_MAX)                                    \
  X(T, helper_cpu_ns, WIRE_UINT, 0, UINT64_MAX)                                \
  X(T, disk_ns, WIRE_UINT, 0, UINT64_MAX)
/* cache.stats []: the shared cache's counters (cache_stats_t's fields of
 * these names), then its directory. */
#define WIRE_CACHE_STATS_COUNTERS(X, T)                                        \
  X(T, hits_memory, WIRE_UINT, 0, UINT64_MAX)                                  \
  X(T, hits_disk, WIRE_UINT, 0, UINT64_MAX)                                    \
  X(T, misses, WIRE_UINT, 0, UINT64_MAX)                                       \
  X(T, waits, WIRE_UINT, 0, UINT64_MAX)                                        \
  X(T, warmed, WIRE_UINT, 0, UINT64_MAX)                                       \
  X(T, compile_failures, WIRE_UINT, 0, UINT64_MAX)                             \
  X(T, evictions, WIRE_UINT, 0, UINT64_MAX)                                    \
  X(T, corrupt, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, auth_failures, WIRE_UINT, 0, UINT64_MAX)                                \
  X(T, entries, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, bytes, WIRE_UINT, 0, UINT64_MAX)                                        \
  X(T, disk_entries, WIRE_UINT, 0, UINT64_MAX)                                 \
  X(T, disk_bytes, WIRE_UINT, 0, UINT64_MAX)                                   \
  X(T, max_bytes, WIRE_UINT, 0, UINT64_MAX)
#define WIRE_CACHE_STATS_RESULT(X, T)                                          \
  WIRE_CACHE_STATS_COUNTERS(X, T)                                              \
  X(T, dir, WIRE_BYTES, 0, SIZE_MAX)
/* compile.stats []: the compile pool's counters (compile_pool_stats_t's
 * fields of these names), then its sandbox's description. */
#define WIRE_COMPILE_STATS_COUNTERS(X, T)                                      \
  X(T, jobs, WIRE_UINT, 0, UINT64_MAX)                                         \
  X(T, timeout_s, WIRE_UINT, 0, UINT64_MAX)                                    \
  X(T, idle_timeout_s, WIRE_UINT, 0, UINT64_MAX)                               \
  X(T, busy, WIRE_UINT, 0, UINT64_MAX)                                         \
  X(T, queued, WIRE_UINT, 0, UINT64_MAX)                                       \
  X(T, helpers, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, started, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, restarts, WIRE_UINT, 0, UINT64_MAX)                                     \
  X(T, compiles, WIRE_UINT, 0, UINT64_MAX)                                     \
  X(T, timeouts, WIRE_UINT, 0, UINT64_MAX)                                     \
  X(T, crashes, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, tenant_max, WIRE_UINT, 0, UINT64_MAX)                                   \
  X(T, queue_bytes, WIRE_UINT, 0, UINT64_MAX)                                  \
  X(T, held_bytes, WIRE_UINT, 0, UINT64_MAX)                                   \
  X(T, refused, WIRE_UINT, 0, UINT64_MAX)
#define WIRE_COMPILE_STATS_RESULT(X, T)                                        \
  WIRE_COMPILE_STATS_COUNTERS(X, T)                                            \
  X(T, fsview_name, WIRE_BYTES, 0, SIZE_MAX)                                   \
  X(T, uid, WIRE_INT, -1, UINT32_MAX)                                          \
  X(T, sandbox, WIRE_BYTES, 0, SIZE_MAX)
/* cache.clear [peer uid] (answered nil). */
#define WIRE_CACHE_CLEAR_PARAMS(X, T) X(T, uid, WIRE_UINT, 0, UINT32_MAX)
/* cache.touch [key]: a request the worker answered from a module it had
 * loaded (kernels_set_touch): the entry's use, as a hit's. */
#define WIRE_CACHE_TOUCH_PARAMS(X, T)                                          \
  X(T, key, WIRE_BYTES, CACHE_KEY_SIZE, CACHE_KEY_SIZE)
/* admin [op, params]: a client's admin request (admin.h's
 * admin_args_pack()); the listener checks the op here and its values
 * with admin_args_unpack(). */
#define WIRE_ADMIN_PARAMS(X, T)                                                \
  X(T, op, WIRE_BYTES, 0, 31)                                                  \
  X(T, params, WIRE_ARRAY, 0, 4)
#define WIRE_ADMIN_RESULT(X, T)                                                \
  X(T, status, WIRE_INT, INT32_MIN, 0)                                         \
  X(T, message, WIRE_BYTES, 0, SIZE_MAX)                                       \
  X(T, result, WIRE_ANY, 0, 0) /* bin (one packed value) when status is 0 */

/* Listener to worker. */
/* conn [session id, uid, gid, pid], with the client's connection. */
#define WIRE_CONN_PARAMS(X, T)                                                 \
  X(T, id, WIRE_UINT, 0, UINT64_MAX)                                           \
  X(T, uid, WIRE_UINT, 0, UINT32_MAX)                                          \
  X(T, gid, WIRE_UINT, 0, UINT32_MAX)                                          \
  X(T, pid, WIRE_INT, INT32_MIN, INT32_MAX)
/* reload [[arg...]]: the listener's options after a SIGHUP. */
#define WIRE_RELOAD_PARAMS(X, T) X(T, args, WIRE_ARRAY, 0, WIRE_RELOAD_MAX_ARGS)
/* Most options in a reload (hipd has about forty, each may repeat). */
#define WIRE_RELOAD_MAX_ARGS 4096
/* log.level [level]: the listener's new level (HLOG_*). */
#define WIRE_LOG_LEVEL_PARAMS(X, T) X(T, level, WIRE_UINT, 0, HLOG_DEBUG)
/* preload [key, image]: an entry of the worker's uid in the listener's
 * memory, sent to a new worker to load ahead of requests on the devices
 * its sessions may use (kernels_preload). */
#define WIRE_PRELOAD_PARAMS(X, T)                                              \
  X(T, key, WIRE_BYTES, CACHE_KEY_SIZE, CACHE_KEY_SIZE)                        \
  X(T, image, WIRE_BYTES, 1, SIZE_MAX)
/* compiler [driver, id]: the compile helpers' id of the driver's
 * compiler, part of every cache key (compile_pool_set_compiler_id). */
#define WIRE_COMPILER_PARAMS(X, T)                                             \
  X(T, driver, WIRE_BYTES, 1, 31)                                              \
  X(T, id, WIRE_BYTES, 0, 255)
/* kill [session id, who]: close that session, for reason who. */
#define WIRE_KILL_PARAMS(X, T)                                                 \
  X(T, id, WIRE_UINT, 0, UINT64_MAX)                                           \
  X(T, who, WIRE_BYTES, 0, 127)

/* grants [why, by, [[serial, label, devices, quota]...]]: the worker's
 * uid's grants now (grants.h), all of them; the worker closes its sessions
 * under those it no longer has, with why (" (revoked by uid 0 (root))", or
 * "") after the reason; by: the revoker's uid, -1 none
 * (grants_close_revoked()). */
#define WIRE_GRANTS_PARAMS(X, T)                                               \
  X(T, why, WIRE_BYTES, 0, 159)                                                \
  X(T, by, WIRE_INT, -1, UINT32_MAX)                                           \
  X(T, grants, WIRE_ARRAY, 0, GRANTS_MAX)
/* One grant of the list. */
#define WIRE_GRANT_FIELDS(X, T)                                                \
  X(T, serial, WIRE_UINT, 1, UINT64_MAX)                                       \
  X(T, label, WIRE_BYTES, 1, GRANT_LABEL_MAX)                                  \
  X(T, devices, WIRE_UINT, 0, UINT64_MAX)                                      \
  X(T, quota, WIRE_UINT, 0, UINT64_MAX)

/* The structs of named values. */
#define WIRE_FIELD(T, name, kind, min, max) wire_val_t name;
#define WIRE_STRUCT(T, LIST)                                                   \
  typedef struct T {                                                           \
    LIST(WIRE_FIELD, T)                                                        \
  } T##_t
WIRE_STRUCT(wire_ready, WIRE_READY_PARAMS);
WIRE_STRUCT(wire_closed, WIRE_CLOSED_PARAMS);
WIRE_STRUCT(wire_compile, WIRE_COMPILE_PARAMS);
WIRE_STRUCT(wire_compile_result, WIRE_COMPILE_RESULT);
WIRE_STRUCT(wire_cache_stats_result, WIRE_CACHE_STATS_RESULT);
WIRE_STRUCT(wire_compile_stats_result, WIRE_COMPILE_STATS_RESULT);
WIRE_STRUCT(wire_cache_clear, WIRE_CACHE_CLEAR_PARAMS);
WIRE_STRUCT(wire_cache_touch, WIRE_CACHE_TOUCH_PARAMS);
WIRE_STRUCT(wire_preload, WIRE_PRELOAD_PARAMS);
WIRE_STRUCT(wire_compiler, WIRE_COMPILER_PARAMS);
WIRE_STRUCT(wire_admin, WIRE_ADMIN_PARAMS);
WIRE_STRUCT(wire_admin_result, WIRE_ADMIN_RESULT);
WIRE_STRUCT(wire_conn, WIRE_CONN_PARAMS);
WIRE_STRUCT(wire_reload, WIRE_RELOAD_PARAMS);
WIRE_STRUCT(wire_log_level, WIRE_LOG_LEVEL_PARAMS);
WIRE_STRUCT(wire_kill, WIRE_KILL_PARAMS);
WIRE_STRUCT(wire_hello, WIRE_HELLO_PARAMS);
WIRE_STRUCT(wire_grants, WIRE_GRANTS_PARAMS);
WIRE_STRUCT(wire_grant, WIRE_GRANT_FIELDS);

/* ------------------------------------------------------------- the rows */

typedef enum {
  /* worker to listener */
  WIRE_READY,         /* notify ready [pid] */
  WIRE_CLOSED,        /* notify closed [id] */
  WIRE_HELLO,         /* notify hello [id] */
  WIRE_COMPILE,       /* request compile [...] -> [status, ...] */
  WIRE_CACHE_STATS,   /* request cache.stats [] -> [counters..., dir] */
  WIRE_COMPILE_STATS, /* request compile.stats [] -> [counters..., ...] */
  WIRE_CACHE_CLEAR,   /* request cache.clear [uid] -> nil */
  WIRE_ADMIN,         /* request admin [op, params] -> [status, msg, res] */
  WIRE_CACHE_TOUCH,   /* notify cache.touch [key] */
  /* listener to worker */
  WIRE_CONN,          /* notify conn [id, uid, gid, pid] + the connection */
  WIRE_EXIT,          /* notify exit []: idle, stop */
  WIRE_RELOAD,        /* notify reload [[arg...]] */
  WIRE_LOG_LEVEL,     /* notify log.level [level] */
  WIRE_REPORT,        /* request report [] -> a report (admin/report.h) */
  WIRE_KILL,          /* request kill [id, who] -> bool */
  WIRE_GRANTS,        /* notify grants [why, by, [[serial, label, devices,
                         quota]...]] */
  WIRE_PRELOAD,       /* notify preload [key, image] */
  WIRE_CACHE_CLEARED, /* notify cache.cleared [] */
  WIRE_COMPILER,      /* notify compiler [driver, id] */
  /* metrics process to listener */
  WIRE_METRICS_READY, /* notify ready [] */
  WIRE_METRICS,       /* request metrics [] -> str */
  WIRE_NMSG
} wire_msg_id_t;

/* A side's handler of message @p m (its row's id's slot): @p args points
 * to the row's struct of checked values (for a row without params, to
 * nothing), or is NULL when the params are malformed. */
typedef void (*wire_handler_fn)(void *ctx, const proto_msg_t *m,
                                const void *args);

/* Deliver @p m from @p from to its handler in @p handlers (WIRE_NMSG
 * slots, NULL for messages this side does not take). @return 0, or
 * HIPD_EPROTO when @p m is no message this side takes (the caller refuses
 * it). */
int wire_dispatch(const wire_handler_fn *handlers, wire_from_t from,
                  const proto_msg_t *m, void *ctx);

/* Check @p result, the answer to request @p id, against the row's answer
 * fields into @p out (the row's _result_t struct). @return 0 or
 * HIPD_EINVAL. */
int wire_result(wire_msg_id_t id, const msgpack_object *result, void *out);

/* Pack the head of message @p id: a request of msgid @p msgid, or a
 * notification (@p msgid unused), with the row's param count; the caller
 * packs the params, in the row's order. */
void wire_pack_head(msgpack_packer *pk, wire_msg_id_t id, uint32_t msgid);
/* Pack the head of the answer to request @p id: the array of its answer
 * fields (after proto_pack_response()); the caller packs them. */
void wire_pack_result(msgpack_packer *pk, wire_msg_id_t id);

/* The row's method name (for logs). */
const char *wire_name(wire_msg_id_t id);

/* Check one element @p o of a grants message's list (WIRE_GRANT_FIELDS)
 * into @p out. @return 0 or HIPD_EINVAL. */
int wire_grant(const msgpack_object *o, wire_grant_t *out);

#endif
