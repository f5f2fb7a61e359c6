/* SPDX-License-Identifier: MIT */
/* client/methods.c: one wrapper per protocol method (`daemon.info` is
 * hipd_daemon_info). Each packs its params, names the decoder of its result
 * and leaves the rest to the call mechanism of conn.h; the synchronous form
 * is the pipelined form plus hipd_wait(). Keep them this small. `hello` is
 * conn.c's: connecting is its handshake.
 */
#include "config.h"

#include "conn.h"

/* ------------------------------------------------------------------ ping */

int hipd_ping_begin(hipd_conn_t *conn, const void *data, size_t len, void *out,
                    size_t cap, size_t *out_len, hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if ((data == NULL && len > 0) || (out == NULL && cap > 0))
    return conn_fail(conn, HIPD_EINVAL, "ping: NULL buffer with a length");
  err = conn_call_begin(conn, "ping", 1, &c);
  if (err < 0)
    return err;
  msgpack_pack_bin_with_body(&c->pk, data, len);
  return conn_call_send(c, conn_decode_bytes, CONN_OUTS(cap, out, out_len),
                        call);
}

int hipd_ping(hipd_conn_t *conn, const void *data, size_t len, void *out,
              size_t cap, size_t *out_len)
{
  hipd_call_t *call;

  return conn_sync(hipd_ping_begin(conn, data, len, out, cap, out_len, &call),
                   &call);
}

/* ----------------------------------------------------------- daemon.info */

int hipd_daemon_info_begin(hipd_conn_t *conn, hipd_info_t **out,
                           hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "daemon.info: out is NULL");
  *out = NULL;
  err = conn_call_begin(conn, "daemon.info", 0, &c);
  if (err < 0)
    return err;
  return conn_call_send(c, info_decode, CONN_OUTS(0, out), call);
}

int hipd_daemon_info(hipd_conn_t *conn, hipd_info_t **out)
{
  hipd_call_t *call;

  return conn_sync(hipd_daemon_info_begin(conn, out, &call), &call);
}

/* ---------------------------------------------------------- session.info */

int hipd_session_info_begin(hipd_conn_t *conn, hipd_info_t **out,
                            hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "session.info: out is NULL");
  *out = NULL;
  err = conn_call_begin(conn, "session.info", 0, &c);
  if (err < 0)
    return err;
  return conn_call_send(c, info_decode, CONN_OUTS(0, out), call);
}

int hipd_session_info(hipd_conn_t *conn, hipd_info_t **out)
{
  hipd_call_t *call;

  return conn_sync(hipd_session_info_begin(conn, out, &call), &call);
}
