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

/* An answer: @p status 0 with @p result (@p len bytes of one packed msgpack
 * value, owned by the caller of the callback), or a negative code with
 * @p msg (without the method's name). */
typedef void (*admin_done_fn)(void *ctx, int status, const char *msg,
                              const char *result, size_t len);

/* The ops, as their method names. @return 1 if @p op is one. */
int admin_is_op(const char *op, size_t len);

/* Run admin op @p op with @p params (an array, checked here again) for a
 * caller of uid @p uid whose own session is @p sid (0: none, the listener's
 * own callers). @p done runs once, maybe before this returns. */
void admin_request(daemon_t *d, uid_t uid, uint64_t sid, const char *op,
                   const msgpack_object *params, admin_done_fn done, void *ctx);

/* Resolve --admin-group (a warning if it does not exist) and forget the
 * cached names and admin bits: at start and after each reload. */
void admin_configure(daemon_t *d);

/* Is @p uid an admin (root, or a member of --admin-group)? The answer,
 * and the user names views show, are cached per uid for 60 s. */
int admin_is_admin(daemon_t *d, uid_t uid);

/* ---- hooks ---- */
/* A worker: send every request to the listener instead. */
typedef void (*admin_forward_fn)(daemon_t *d, const char *op,
                                 const msgpack_object *params,
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
} admin_listener_t;
void admin_set_listener(const admin_listener_t *l);

/* Close session @p id of this process with reason @p who ("killed by uid
 * 0 (root)"); the caller's own session @p self is closed once its answer
 * is written. @return 0 or HIPD_ENOENT. */
int admin_kill_local(daemon_t *d, uint64_t id, const char *who, uint64_t self);

/* What a worker that exits leaves: fold its last report's counters into
 * the node-wide totals that admin views add to the live workers'. */
void admin_fold(const report_t *r);

/* For the HTTP metrics process (branch metricsd), in the listener: the
 * metrics text of an admin view (every series), malloc'd, handed to
 * @p done on the loop thread (the callee frees it), or a negative code. */
typedef void (*admin_text_fn)(void *ctx, int status, char *text, size_t len);
void admin_metrics_text(daemon_t *d, admin_text_fn done, void *ctx);

/* Release what is held (at exit). */
void admin_free(void);

#endif
