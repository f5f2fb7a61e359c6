/* SPDX-License-Identifier: MIT */
/* daemon/methods/admin.c: session.list, session.kill, daemon.stats,
 * metrics, log.level, cache.list (proto/PROTOCOL.md, "Administration").
 *
 * Each handler reads its checked args into admin/'s typed request
 * (admin_args_t), defers its call and hands the request to admin/ with
 * the peer's uid: in --isolation none admin/ answers from this process's
 * state; in a worker it forwards the values to the listener, which checks
 * them again and decides. */
#include "config.h"

#include "admin/admin.h"
#include "methods.h"

/* Where the rows of dispatch.c put the admin methods' params: read here
 * only. */
enum {
  KILL_ARG_ID = 0,    /* session.kill: U64("id") */
  LEVEL_ARG_LEVEL = 0 /* log.level: OPT(STR, "level", 15) */
};

/* The answer, packed by admin/: written into the reply as it is. */
static void admin_done(void *ctx, int status, const char *msg,
                       const char *result, size_t len)
{
  call_t *d = ctx;

  if (status != 0) {
    call_fail(d, status, "%s",
              msg != NULL && msg[0] ? msg : hipd_strerror(status));
  } else {
    msgpack_packer *pk = call_result(d);
    pk->callback(pk->data, result, len);
  }
  call_finish(d);
}

/* Op @p op's typed values from @p c's args. @return 0, or HIPD_EPARAMS
 * with *@p msg (a level that is none). */
static int admin_args_read(const call_t *c, admin_op_t op, admin_args_t *a,
                           const char **msg)
{
  a->op = op;
  a->id = 0;
  a->level = -1;
  if (op == ADMIN_SESSION_KILL)
    a->id = c->args[KILL_ARG_ID].u;
  if (op == ADMIN_LOG_LEVEL && c->args[LEVEL_ARG_LEVEL].present)
    return admin_level_named(c->args[LEVEL_ARG_LEVEL].s,
                             c->args[LEVEL_ARG_LEVEL].len, &a->level, msg);
  return 0;
}

static int admin_call(call_t *c, admin_op_t op)
{
  admin_args_t a;
  const char *msg;
  call_t *d;
  int rc;

  if ((rc = admin_args_read(c, op, &a, &msg)) != 0)
    return call_fail(c, rc, "%s", msg);
  if ((d = call_defer(c)) == NULL)
    return HIPD_ENOMEM;
  admin_request(c->s->d, c->s->peer_uid, c->s->id, &a, admin_done, d);
  return 0;
}

int m_session_list(call_t *c)
{
  return admin_call(c, ADMIN_SESSION_LIST);
}

int m_session_kill(call_t *c)
{
  return admin_call(c, ADMIN_SESSION_KILL);
}

int m_daemon_stats(call_t *c)
{
  return admin_call(c, ADMIN_DAEMON_STATS);
}

int m_metrics(call_t *c)
{
  return admin_call(c, ADMIN_METRICS);
}

int m_log_level(call_t *c)
{
  return admin_call(c, ADMIN_LOG_LEVEL);
}

int m_cache_list(call_t *c)
{
  return admin_call(c, ADMIN_CACHE_LIST);
}
