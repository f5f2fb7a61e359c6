/* SPDX-License-Identifier: MIT */
/* daemon/methods/admin.c: session.list, session.kill, daemon.stats,
 * metrics, log.level, cache.list, grant.add, grant.revoke, grant.list
 * (proto/PROTOCOL.md, "Administration" and "Grants").
 *
 * Each handler reads its typed params (methods.h) into admin/'s request
 * (admin_args_t), defers its call and hands the request to admin/ with
 * the peer's uid: in --isolation none admin/ answers from this process's
 * state; in a worker it forwards the values to the listener, which checks
 * them again and decides. */
#include "config.h"

#include <string.h>

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

/* A str param into @p out (absent: ""); dispatch checked its bound. */
static void str_arg(const arg_t *p, char *out, size_t size)
{
  out[0] = '\0';
  if (p->present && p->len < size) {
    memcpy(out, p->s, p->len);
    out[p->len] = '\0';
  }
}

int m_grant_add(call_t *c, const grant_add_args_t *p)
{
  admin_args_t a = {.op = ADMIN_GRANT_ADD, .level = -1};
  const char *msg;
  int rc;

  str_arg(&p->user, a.user, sizeof(a.user));
  str_arg(&p->label, a.label, sizeof(a.label));
  a.quota = p->quota.present ? p->quota.u : 0;
  if ((rc = admin_devices_mask(p->devices.o, &a.devmask, &msg)) != 0)
    return call_fail(c, rc, "%s", msg);
  if ((rc = admin_args_check(&a, &msg)) != 0)
    return call_fail(c, rc, "%s", msg);
  return admin_call(c, &a);
}

int m_grant_revoke(call_t *c, const grant_revoke_args_t *p)
{
  admin_args_t a = {.op = ADMIN_GRANT_REVOKE, .level = -1};
  const char *msg;
  int rc;

  str_arg(&p->label, a.label, sizeof(a.label));
  str_arg(&p->user, a.user, sizeof(a.user));
  if ((rc = admin_args_check(&a, &msg)) != 0)
    return call_fail(c, rc, "%s", msg);
  return admin_call(c, &a);
}

int m_grant_list(call_t *c)
{
  return admin_plain(c, ADMIN_GRANT_LIST);
}
