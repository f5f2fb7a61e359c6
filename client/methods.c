/* SPDX-License-Identifier: MIT */
/* client/methods.c: one wrapper per protocol method (`daemon.info` is
 * hipd_daemon_info). Each packs its params, names the decoder of its result
 * and leaves the rest to the call mechanism of conn.h; the synchronous form
 * is the pipelined form plus hipd_wait(). Keep them this small.
 */
#include "config.h"

#include "conn.h"

/* ----------------------------------------------------------------- hello */

/* Check the identity `hello` returns before keeping it: a peer that is not
 * hipd, or that settled on a protocol this library does not speak, fails
 * the handshake. */
static int hello_decode(hipd_call_t *call, const msgpack_object *result,
                        const conn_outs_t *outs)
{
  const msgpack_object *name = proto_map_get(result, "name");
  const msgpack_object *protocol = proto_map_get(result, "protocol");
  int64_t version;

  if (name == NULL || !proto_obj_streq(name, "hipd"))
    return conn_call_fail(call, HIPD_EPROTO,
                          "hello: the peer did not identify itself as hipd");
  if (protocol == NULL ||
      proto_obj_int(protocol, 1, hipd_protocol_version(), &version) < 0)
    return conn_call_fail(call, HIPD_EVERSION,
                          "hello: the daemon chose a protocol version this "
                          "client (protocol %d) does not speak",
                          hipd_protocol_version());
  return info_decode(call, result, outs);
}

/* hipd_connect() calls this with @p out NULL: the identity is checked, not
 * kept. */
int hipd_hello(hipd_conn_t *conn, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out != NULL)
    *out = NULL;
  err = conn_call_begin(conn, "hello", 2, &c);
  if (err < 0)
    return err;
  msgpack_pack_int(&c->pk, hipd_protocol_version());
  proto_pack_cstr(&c->pk, conn_client_name(conn));
  err = conn_call_send(c, hello_decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

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
