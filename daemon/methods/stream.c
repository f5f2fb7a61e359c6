/* SPDX-License-Identifier: MIT */
/* daemon/methods/stream.c: stream.create, destroy, synchronize, query,
 * default. */
#include "config.h"

#include <stdlib.h>

#include "methods.h"

/* The driver stream of a stream.create exists, or could not be made. */
static void stream_created(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;
  call_t *c = p->call;

  if (r->status != 0) {
    call_fail(c, r->status, "%s", r->err);
    res_stream_forget(c->s, p->handle);
  } else {
    msgpack_pack_uint64(call_result(c), p->handle);
  }
  meth_pending_finish(p);
}

/* stream.create [device?] -> handle, once the driver stream exists. */
int m_stream_create(call_t *c, const device_args_t *a)
{
  session_t *s = c->s;
  device_t *dev = a->device.dev;
  stream_t *st;
  meth_pending_t *p;
  hipd_err_t err;
  int rc;

  /* Default streams do not count: the limits are on streams made here. */
  if ((rc = res_stream_admit(s, &err)) != 0)
    return call_fail(c, rc, "%s", err.msg);
  st = stream_new(dev);
  if (st == NULL)
    return call_fail(c, HIPD_ENOMEM, "cannot start a stream worker");
  if ((p = meth_pending_new(c)) == NULL) {
    stream_unref(st);
    return HIPD_ENOMEM;
  }
  rc = res_stream_add(s, st, &p->handle);
  if (rc != 0) {
    stream_unref(st);
    call_fail(p->call, rc, "cannot add a stream handle: %s", hipd_strerror(rc));
    meth_pending_finish(p);
    return 0;
  }
  stream_start(st, (obj_done_t){stream_created, p});
  return 0;
}

/* stream.destroy [stream] */
int m_stream_destroy(call_t *c, const stream_args_t *a)
{
  stream_t *st = a->stream.obj;
  uint64_t h = a->stream.u;

  if (res_stream_is_default(c->s, st))
    return call_fail(c, HIPD_EPERM,
                     "stream 0x%llx is the session's default stream of "
                     "device %d; it lives as long as the session",
                     (unsigned long long)h, st->dev->id);
  res_stream_free(c->s, h, st);
  msgpack_pack_nil(call_result(c));
  return 0;
}

static int stream_op(call_t *c, const stream_args_t *a, op_kind_t kind)
{
  stream_t *st;
  uint64_t h;
  op_t *op;
  int rc;

  if ((rc = meth_arg_stream(c, &a->stream, &st, &h)) != 0)
    return rc;
  if ((op = meth_op_prepare(c, kind, st, h)) == NULL)
    return HIPD_ENOMEM;
  meth_op_start(op);
  return 0;
}

/* stream.synchronize [stream]: answered when the stream's work is done. */
int m_stream_synchronize(call_t *c, const stream_args_t *a)
{
  return stream_op(c, a, OP_SYNC);
}

/* stream.query [stream] -> true when all its work has completed. It never
 * waits: while the stream's worker still has ops (queued or running; on the
 * CPU device an op runs to completion there) the answer is false at once.
 * Only an idle worker asks the driver about work left on the device. */
int m_stream_query(call_t *c, const stream_args_t *a)
{
  stream_t *st;
  uint64_t h;
  int rc;

  if ((rc = meth_arg_stream(c, &a->stream, &st, &h)) != 0)
    return rc;
  if (stream_pending(st) > 0) {
    msgpack_pack_false(call_result(c));
    return 0;
  }
  return stream_op(c, a, OP_QUERY);
}

/* stream.default [device?] -> the session's default stream handle. */
int m_stream_default(call_t *c, const device_args_t *a)
{
  stream_t *st;
  uint64_t h;
  int rc;

  if ((rc = meth_default_stream(c, a->device.dev, &st, &h)) != 0)
    return rc;
  msgpack_pack_uint64(call_result(c), h);
  return 0;
}
