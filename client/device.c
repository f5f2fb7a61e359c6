/* SPDX-License-Identifier: MIT */
/* client/device.c: the backend, devices and streams (`backend.info`,
 * `device.*`, `stream.*`). Same shape as methods.c: pack the params, name
 * the decoder, let conn.c do the rest. A device id of HIPD_DEVICE_CURRENT
 * travels as nil, the session's current device.
 */
#include "config.h"

#include "conn.h"

/* A method without params whose result goes to @p out through @p decode. */
static int call_plain(hipd_conn_t *conn, const char *method, void *out,
                      conn_decode_fn decode)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "%s: out is NULL", method);
  err = conn_call_begin(conn, method, 0, &c);
  if (err < 0)
    return err;
  err = conn_call_send(c, decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

/* A method whose one param is a device id. */
static int call_device(hipd_conn_t *conn, const char *method, int dev,
                       void *out, conn_decode_fn decode)
{
  hipd_call_t *c, *call;
  int err;

  if ((err = conn_check_device(conn, method, dev)) < 0 ||
      (err = conn_call_begin(conn, method, 1, &c)) < 0)
    return err;
  conn_pack_device(&c->pk, dev);
  err = conn_call_send(c, decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

/* ------------------------------------------------------------- backend */

int hipd_backend_info(hipd_conn_t *conn, hipd_info_t **out)
{
  if (out != NULL)
    *out = NULL;
  return call_plain(conn, "backend.info", out, info_decode);
}

/* ------------------------------------------------------------- devices */

int hipd_device_count(hipd_conn_t *conn, int *count)
{
  return call_plain(conn, "device.count", count, conn_decode_int32);
}

int hipd_device_list(hipd_conn_t *conn, hipd_info_t **out)
{
  if (out != NULL)
    *out = NULL;
  return call_plain(conn, "device.list", out, info_decode_array);
}

int hipd_device_get(hipd_conn_t *conn, int dev, hipd_info_t **out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "device.get: out is NULL");
  *out = NULL;
  return call_device(conn, "device.get", dev, out, info_decode);
}

int hipd_device_set_current(hipd_conn_t *conn, int dev)
{
  /* The daemon needs an actual id here: "the current device" is no
   * choice. */
  if (dev == HIPD_DEVICE_CURRENT)
    return conn_fail(conn, HIPD_EINVAL,
                     "device.set_current: HIPD_DEVICE_CURRENT is not a "
                     "device");
  return call_device(conn, "device.set_current", dev, NULL, conn_decode_none);
}

int hipd_device_current(hipd_conn_t *conn, int *dev)
{
  return call_plain(conn, "device.current", dev, conn_decode_int32);
}

int hipd_device_synchronize(hipd_conn_t *conn, int dev)
{
  return call_device(conn, "device.synchronize", dev, NULL, conn_decode_none);
}

/* ------------------------------------------------------------- streams */

int hipd_stream_create(hipd_conn_t *conn, int dev, hipd_stream_t *out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "stream.create: out is NULL");
  *out = HIPD_STREAM_NULL;
  return call_device(conn, "stream.create", dev, &out->id_, conn_decode_uint);
}

int hipd_stream_destroy(hipd_conn_t *conn, hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(conn_call_handle(conn, "stream.destroy",
                                    hipd_stream_id(stream), conn_decode_none,
                                    CONN_OUTS(0, NULL), &call),
                   &call);
}

int hipd_stream_synchronize_begin(hipd_conn_t *conn, hipd_stream_t stream,
                                  hipd_call_t **call)
{
  return conn_call_handle(conn, "stream.synchronize", hipd_stream_id(stream),
                          conn_decode_none, CONN_OUTS(0, NULL), call);
}

int hipd_stream_synchronize(hipd_conn_t *conn, hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(hipd_stream_synchronize_begin(conn, stream, &call), &call);
}

int hipd_stream_query(hipd_conn_t *conn, hipd_stream_t stream, int *idle)
{
  hipd_call_t *call;

  if (idle == NULL)
    return conn_fail(conn, HIPD_EINVAL, "stream.query: idle is NULL");
  return conn_sync(conn_call_handle(conn, "stream.query",
                                    hipd_stream_id(stream), conn_decode_bool,
                                    CONN_OUTS(0, idle), &call),
                   &call);
}

int hipd_stream_default(hipd_conn_t *conn, int dev, hipd_stream_t *out)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "stream.default: out is NULL");
  *out = HIPD_STREAM_NULL;
  return call_device(conn, "stream.default", dev, &out->id_, conn_decode_uint);
}
