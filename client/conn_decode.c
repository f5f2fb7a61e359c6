/* SPDX-License-Identifier: MIT */
/* client/conn_decode.c: the result decoders and parameter helpers that
 * the method wrappers share (conn.h).
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "conn_internal.h"

/* ------------------------------------------------------ common decoders */

int conn_decode_none(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs)
{
  return 0;
}

int conn_decode_bytes(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  const char *p;
  size_t len;

  if (proto_obj_bytes(result, &p, &len) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected bytes in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[1] != NULL)
    *(size_t *)outs->p[1] = len;
  if (len > outs->n)
    return conn_call_fail(call, HIPD_ERANGE,
                          "%s: the reply's %zu bytes do not fit the %zu-byte "
                          "buffer",
                          call->method, len, outs->n);
  if (len > 0)
    memcpy(outs->p[0], p, len);
  return 0;
}

int conn_decode_int(hipd_call_t *call, const msgpack_object *result,
                    const conn_outs_t *outs)
{
  int64_t v;

  if (proto_obj_int(result, INT64_MIN, INT64_MAX, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected an integer in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(int64_t *)outs->p[0] = v;
  return 0;
}

int conn_decode_uint(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs)
{
  uint64_t v;

  if (proto_obj_uint(result, UINT64_MAX, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected an unsigned integer in the reply, got "
                          "%s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(uint64_t *)outs->p[0] = v;
  return 0;
}

int conn_decode_int32(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  int64_t v;

  if (proto_obj_int(result, INT_MIN, INT_MAX, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a small integer in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(int *)outs->p[0] = (int)v;
  return 0;
}

int conn_decode_bool(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs)
{
  if (result->type != MSGPACK_OBJECT_BOOLEAN)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a boolean in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(int *)outs->p[0] = result->via.boolean ? 1 : 0;
  return 0;
}

int conn_decode_float(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs)
{
  double v;

  if (proto_obj_double(result, &v) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a number in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (outs->p[0] != NULL)
    *(float *)outs->p[0] = (float)v;
  return 0;
}

/* ----------------------------------------------------- common parameters */

int conn_check_device(hipd_conn_t *conn, const char *method, int dev)
{
  if (dev < 0 && dev != HIPD_DEVICE_CURRENT)
    return conn_fail(conn, HIPD_ENODEV,
                     "%s: no device %d (a device index, or "
                     "HIPD_DEVICE_CURRENT)",
                     method, dev);
  return 0;
}

void conn_pack_device(msgpack_packer *pk, int dev)
{
  if (dev == HIPD_DEVICE_CURRENT)
    msgpack_pack_nil(pk);
  else
    msgpack_pack_int(pk, dev);
}

int conn_call_handle(hipd_conn_t *conn, const char *method, uint64_t handle,
                     conn_decode_fn decode, conn_outs_t outs, hipd_call_t **out)
{
  hipd_call_t *c;
  int err = conn_call_begin(conn, method, 1, &c);

  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, handle);
  return conn_call_send(c, decode, outs, out);
}
