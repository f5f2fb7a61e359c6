/* SPDX-License-Identifier: MIT */
/* daemon/admin/admin.h: the admin methods' daemon side (issue 14,
 * /work/notes/admin-spec.md, proto/PROTOCOL.md "Administration").
 *
 * Views are built from reports (report.h): msgpack snapshots of a
 * process's sessions and counters (stats_pack_report()). In --isolation
 * none the one process reports to itself; in worker mode the listener
 * gathers a report from every worker (a worker that does not answer
 * within 2 s is left out), adds the totals it folded from workers that
 * exited, filters by the caller's visibility and answers. A worker runs
 * none of this: it forwards each admin request to its listener (the
 * forward hook, set by privsep/worker.c), which decides who the caller is
 * from the worker's uid, never from what the worker says.
 *
 * The listener's process sets the listener hooks (privsep/workers.c):
 * admin/ never calls up into the privsep layer. Loop thread only.
 */
#ifndef HIPD_ADMIN_H
#define HIPD_ADMIN_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "admin/report.h"
#include "daemon.h"
#include "grants.h"

/* An answer: @p status 0 with @p result (@p len bytes of one packed msgpack
 * value, owned by the caller of the callback), or a negative code with
 * @p msg (without the method's name). */
typedef void (*admin_done_fn)(void *ctx, int status, const char *msg,
                              const char *result, size_t len);

/* The ops, by their method names. */
typedef enum {
  ADMIN_SESSION_LIST,
  ADMIN_SESSION_KILL,
  ADMIN_DAEMON_STATS,
  ADMIN_METRICS,
  ADMIN_LOG_LEVEL,
  ADMIN_CACHE_LIST,
  ADMIN_GRANT_ADD,
  ADMIN_GRANT_REVOKE,
  ADMIN_GRANT_LIST,
  ADMIN_NOPS
} admin_op_t;

/* grant.add's and grant.revoke's user: a name or a uid, this long at
 * most. */
#define ADMIN_USER_MAX 64

/* An admin request's values, typed: what the client's method was given
 * (dispatch checked its params; methods/admin.c reads them). */
typedef struct admin_args {
  admin_op_t op;
  uint64_t id;                     /* session.kill: the session to close */
  int level;                       /* log.level: HLOG_* to set, or -1: only
                                      ask */
  char user[ADMIN_USER_MAX + 1];   /* grant.*: a name or a uid, "": none */
  uint64_t devmask;                /* grant.add: its devices */
  uint64_t quota;                  /* grant.add: bytes, 0: none */
  char label[GRANT_LABEL_MAX + 1]; /* grant.*: "": none */
} admin_args_t;

/* grant.add's devices param (an array of device ids, @p o) as a mask into
 * *@p mask. @return 0, or HIPD_EPARAMS with *@p msg (static). */
int admin_devices_mask(const msgpack_object *o, uint64_t *mask,
                       const char **msg);

/* @return 1 if @p op (@p len bytes) names an op. */
int admin_is_op(const char *op, size_t len);
/* The method name of @p op. */
const char *admin_op_name(admin_op_t op);

/* The one check of an admin request's values, wherever they were read
 * (the client's process, the listener): the op is one, the level a
 * level. @return 0, or HIPD_EPARAMS with *@p msg (static) saying what
 * the client is told. */
int admin_args_check(const admin_args_t *a, const char **msg);
/* log.level's param: the level named @p name (@p len bytes) into
 * *@p level; HIPD_EPARAMS with *@p msg otherwise. */
int admin_level_named(const char *name, size_t len, int *level,
                      const char **msg);
/* The values' form on the privsep wire (privsep/wire.h's admin [op,
 * params]): the op's name, then its params as the client's method takes
 * them ([id], [level name] or []). */
void admin_args_pack(msgpack_packer *pk, const admin_args_t *a);
/* Read them back, checking everything (a worker is not trusted): the op
 * named by @p op (@p oplen bytes), its params @p params. @return 0, or
 * HIPD_EPARAMS with *@p msg as a client would be told. */
int admin_args_unpack(const char *op, size_t oplen,
                      const msgpack_object *params, admin_args_t *out,
                      const char **msg);

/* Run admin request @p a (checked here again with admin_args_check()) for
 * a caller of uid @p uid whose own session is @p sid (0: none, the
 * listener's own callers). @p done runs once, maybe before this
 * returns. */
void admin_request(daemon_t *d, uid_t uid, uint64_t sid, const admin_args_t *a,
                   admin_done_fn done, void *ctx);

/* admin_configure() and admin_is_admin(): admin/who.h. */
#include "admin/who.h"

/* ---- hooks ---- */
/* A worker: send every request to the listener instead. */
typedef void (*admin_forward_fn)(daemon_t *d, const admin_args_t *a,
                                 admin_done_fn done, void *ctx);
void admin_set_forward(admin_forward_fn fn);

/* The listener: gather every worker's report; @p done gets the set
 * (owned by the callee until done returns) and how many workers were left
 * out. */
typedef void (*admin_gathered_fn)(void *ctx, report_set_t *set);
typedef struct admin_listener {
  void (*gather)(daemon_t *d, admin_gathered_fn done, void *ctx);
  /* Close session @p id in the worker whose report's owner (serial) is
   * @p owner, if the listener handed it that session; @p done gets 0 or
   * HIPD_ENOENT. */
  void (*kill)(daemon_t *d, uint64_t owner, uint64_t id, const char *who,
               void (*done)(void *ctx, int status), void *ctx);
  /* Tell every worker (and those started later) the new log level. */
  void (*log_level)(daemon_t *d, int level);
  /* The grants of @p uid changed: send them to its workers, which close
   * the sessions under those gone, giving @p why in the reason; @p by: the
   * revoker's uid, or -1 (grants_close_revoked()). */
  void (*grants)(daemon_t *d, uid_t uid, const char *why, int64_t by);
} admin_listener_t;
void admin_set_listener(const admin_listener_t *l);

/* Close session @p id of this process with reason @p who ("killed by uid
 * 0 (root)"); the caller's own session @p self is closed once its answer
 * is written. @return 0 or HIPD_ENOENT. */
int admin_kill_local(daemon_t *d, uint64_t id, const char *who, uint64_t self);

/* What a worker that exits leaves: fold its last report's counters into
 * the node-wide totals that admin views add to the live workers'. */
void admin_fold(daemon_t *d, const report_t *r);

/* For the HTTP metrics process (branch metricsd), in the listener: the
 * metrics text of an admin view (every series), malloc'd, handed to
 * @p done on the loop thread (the callee frees it), or a negative code. */
typedef void (*admin_text_fn)(void *ctx, int status, char *text, size_t len);
void admin_metrics_text(daemon_t *d, admin_text_fn done, void *ctx);

/* Release what is held (at exit). */
void admin_free(void);

#endif
