/* SPDX-License-Identifier: MIT */
/* client/admin.c: the admin methods (`session.list`, `session.kill`,
 * `daemon.stats`, `metrics`, `log.level`, `cache.list`, `grant.add`,
 * `grant.revoke`, `grant.list`). Same shape as
 * methods.c: pack the params, name the decoder, let conn.c do the rest.
 * Who may call what is the daemon's business (PROTOCOL.md: admins see
 * every session, others their own uid's).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* A method without params whose result goes to @p out through @p decode. */
static int call_plain(hipd_conn_t *conn, const char *method, void *out,
                      conn_decode_fn decode)
{
  hipd_call_t *c, *call;
  int err;

  if ((err = conn_call_begin(conn, method, 0, &c)) < 0)
    return err;
  err = conn_call_send(c, decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

/* A str (or bin) result copied into a malloc'd NUL-terminated string at
 * (char **)p[0], its length at (size_t *)p[1] if not NULL. */
static int decode_strdup(hipd_call_t *call, const msgpack_object *result,
                         const conn_outs_t *outs)
{
  const char *p;
  char *s;
  size_t len;

  if (proto_obj_bytes(result, &p, &len) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a string in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if ((s = malloc(len + 1)) == NULL)
    return conn_call_fail(call, HIPD_ENOMEM,
                          "%s: out of memory copying the reply", call->method);
  if (len > 0)
    memcpy(s, p, len);
  s[len] = '\0';
  *(char **)outs->p[0] = s;
  if (outs->p[1] != NULL)
    *(size_t *)outs->p[1] = len;
  return 0;
}

/* A str result into the caller's buffer p[0] of outs->n bytes, with a NUL
 * (HIPD_ERANGE when it does not fit). */
static int decode_cstr(hipd_call_t *call, const msgpack_object *result,
                       const conn_outs_t *outs)
{
  const char *p;
  size_t len;

  if (proto_obj_bytes(result, &p, &len) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a string in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (len >= outs->n)
    return conn_call_fail(call, HIPD_ERANGE,
                          "%s: the reply's %zu bytes do not fit the %zu-byte "
                          "buffer",
                          call->method, len, outs->n);
  memcpy(outs->p[0], p, len);
  ((char *)outs->p[0])[len] = '\0';
  return 0;
}

int hipd_session_list(hipd_conn_t *conn, hipd_info_t **out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "session.list: out is NULL");
  *out = NULL;
  return call_plain(conn, "session.list", out, info_decode_array);
}

int hipd_session_kill(hipd_conn_t *conn, uint64_t session)
{
  hipd_call_t *c, *call;
  int err;

  if ((err = conn_call_begin(conn, "session.kill", 1, &c)) < 0)
    return err;
  msgpack_pack_uint64(&c->pk, session);
  err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}

int hipd_daemon_stats(hipd_conn_t *conn, hipd_info_t **out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "daemon.stats: out is NULL");
  *out = NULL;
  return call_plain(conn, "daemon.stats", out, info_decode);
}

int hipd_metrics(hipd_conn_t *conn, char **text, size_t *len)
{
  hipd_call_t *c, *call;
  int err;

  if (text == NULL)
    return conn_fail(conn, HIPD_EINVAL, "metrics: text is NULL");
  *text = NULL;
  if (len != NULL)
    *len = 0;
  if ((err = conn_call_begin(conn, "metrics", 0, &c)) < 0)
    return err;
  err = conn_call_send(c, decode_strdup, CONN_OUTS(0, text, len), &call);
  return conn_sync(err, &call);
}

int hipd_log_level(hipd_conn_t *conn, const char *level, char *out, size_t cap)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL || cap == 0)
    return conn_fail(conn, HIPD_EINVAL, "log.level: no buffer for the level");
  out[0] = '\0';
  if ((err = conn_call_begin(conn, "log.level", level != NULL, &c)) < 0)
    return err;
  if (level != NULL)
    proto_pack_cstr(&c->pk, level);
  err = conn_call_send(c, decode_cstr, CONN_OUTS(cap, out), &call);
  return conn_sync(err, &call);
}

int hipd_cache_list(hipd_conn_t *conn, hipd_info_t **out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "cache.list: out is NULL");
  *out = NULL;
  return call_plain(conn, "cache.list", out, info_decode_array);
}

int hipd_grant_add(hipd_conn_t *conn, const char *user, const int *devices,
                   size_t ndevices, uint64_t quota, const char *label,
                   hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out != NULL)
    *out = NULL;
  if (user == NULL || (devices == NULL && ndevices > 0))
    return conn_fail(conn, HIPD_EINVAL, "grant.add: user or devices is NULL");
  if ((err = conn_call_begin(conn, "grant.add", 4, &c)) < 0)
    return err;
  proto_pack_cstr(&c->pk, user);
  msgpack_pack_array(&c->pk, (uint32_t)ndevices);
  for (size_t i = 0; i < ndevices; i++)
    msgpack_pack_int(&c->pk, devices[i]);
  msgpack_pack_uint64(&c->pk, quota);
  if (label != NULL && label[0] != '\0')
    proto_pack_cstr(&c->pk, label);
  else
    msgpack_pack_nil(&c->pk);
  if (out != NULL)
    err = conn_call_send(c, info_decode, CONN_OUTS(0, out), &call);
  else
    err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}

int hipd_grant_revoke(hipd_conn_t *conn, const char *label, const char *user,
                      hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out != NULL)
    *out = NULL;
  if ((err = conn_call_begin(conn, "grant.revoke", 2, &c)) < 0)
    return err;
  if (label != NULL && label[0] != '\0')
    proto_pack_cstr(&c->pk, label);
  else
    msgpack_pack_nil(&c->pk);
  if (user != NULL && user[0] != '\0')
    proto_pack_cstr(&c->pk, user);
  else
    msgpack_pack_nil(&c->pk);
  if (out != NULL)
    err = conn_call_send(c, info_decode_array, CONN_OUTS(0, out), &call);
  else
    err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}

int hipd_grant_list(hipd_conn_t *conn, hipd_info_t **out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "grant.list: out is NULL");
  *out = NULL;
  return call_plain(conn, "grant.list", out, info_decode_array);
}
