/* SPDX-License-Identifier: MIT */
/* daemon/methods/admin.c: session.list, session.kill, daemon.stats,
 * metrics, log.level, cache.list (proto/PROTOCOL.md, "Administration").
 *
 * Each handler reads its typed params (methods.h) into admin/'s request
 * (admin_args_t), defers its call and hands the request to admin/ with
 * the peer's uid: in --isolation none admin/ answers from this process's
 * state; in a worker it forwards the values to the listener, which checks
 * them again and decides. */
#include "config.h"

#include "admin/admin.h"
#include "methods.h"

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

/* Hand the request @p a (its op and typed values, read from the checked
 * params by the handler) to admin/. */
static int admin_call(call_t *c, const admin_args_t *a)
{
  call_t *d;

  if ((d = call_defer(c)) == NULL)
    return HIPD_ENOMEM;
  admin_request(c->s->d, c->s->peer_uid, c->s->id, a, admin_done, d);
  return 0;
}

/* A request without params. */
static int admin_plain(call_t *c, admin_op_t op)
{
  admin_args_t a = {.op = op, .id = 0, .level = -1};

  return admin_call(c, &a);
}

int m_session_list(call_t *c)
{
  return admin_plain(c, ADMIN_SESSION_LIST);
}

int m_session_kill(call_t *c, const session_kill_args_t *p)
{
  admin_args_t a = {.op = ADMIN_SESSION_KILL, .id = p->id.u, .level = -1};

  return admin_call(c, &a);
}

int m_daemon_stats(call_t *c)
{
  return admin_plain(c, ADMIN_DAEMON_STATS);
}

int m_metrics(call_t *c)
{
  return admin_plain(c, ADMIN_METRICS);
}

int m_log_level(call_t *c, const log_level_args_t *p)
{
  admin_args_t a = {.op = ADMIN_LOG_LEVEL, .id = 0, .level = -1};
  const char *msg;
  int rc;

  if (p->level.present &&
      (rc = admin_level_named(p->level.s, p->level.len, &a.level, &msg)) != 0)
    return call_fail(c, rc, "%s", msg);
  return admin_call(c, &a);
}

int m_cache_list(call_t *c)
{
  return admin_plain(c, ADMIN_CACHE_LIST);
}
