/* SPDX-License-Identifier: MIT */
/* daemon/methods/admin.c: session.list, session.kill, daemon.stats,
 * metrics, log.level, cache.list (proto/PROTOCOL.md, "Administration").
 *
 * Each handler defers its call and hands the request to admin/ with the
 * peer's uid: in --isolation none admin/ answers from this process's
 * state; in a worker it forwards to the listener, which decides. */
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

static int admin_call(call_t *c)
{
  const msgpack_object *params = c->params;
  call_t *d = call_defer(c);

  if (d == NULL)
    return HIPD_ENOMEM;
  admin_request(c->s->d, c->s->peer_uid, c->s->id, c->name, params, admin_done,
                d);
  return 0;
}

int m_session_list(call_t *c)
{
  return admin_call(c);
}

int m_session_kill(call_t *c)
{
  return admin_call(c);
}

int m_daemon_stats(call_t *c)
{
  return admin_call(c);
}

int m_metrics(call_t *c)
{
  return admin_call(c);
}

int m_log_level(call_t *c)
{
  return admin_call(c);
}

int m_cache_list(call_t *c)
{
  return admin_call(c);
}
