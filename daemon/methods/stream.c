/* daemon/methods/stream.c: stream.create, destroy, synchronize, query,
 * default. */
#include "config.h"

#include "methods.h"

/* stream.create [device?] -> handle, once the driver stream exists. */
int m_stream_create(call_t *c)
{
  session_t *s = c->s;
  device_t *dev = c->args[0].dev;
  stream_t *st;
  call_t *d;
  uint64_t h;
  int rc;

  /* Default streams do not count: the limit is on streams made here. */
  if (s->handles.count[HANDLE_STREAM] - s->ndefaults >= s->d->cfg.max_streams)
    return call_fail(c, HIPD_ETOOMANY,
                     "this session already has %u streams (the limit)",
                     s->handles.count[HANDLE_STREAM] - s->ndefaults);
  st = stream_new(dev);
  if (st == NULL)
    return call_fail(c, HIPD_ENOMEM, "cannot start a stream worker");
  rc = handles_add(&s->handles, HANDLE_STREAM, st, &h);
  if (rc != 0) {
    stream_unref(st);
    return call_fail(c, rc, "cannot add a stream handle: %s",
                     hipd_strerror(rc));
  }
  if ((d = call_defer(c)) == NULL) {
    handles_remove(&s->handles, h, HANDLE_STREAM, NULL);
    stream_unref(st);
    return HIPD_ENOMEM;
  }
  stream_start(st, d, h);
  return 0;
}

/* stream.destroy [stream] */
int m_stream_destroy(call_t *c)
{
  stream_t *st = c->args[0].obj;
  uint64_t h = c->args[0].u;

  if (st->is_default)
    return call_fail(c, HIPD_EPERM,
                     "stream 0x%llx is the session's default stream of "
                     "device %d; it lives as long as the session",
                     (unsigned long long)h, st->dev->id);
  handles_remove(&c->s->handles, h, HANDLE_STREAM, NULL);
  /* Queued work finishes first; the driver stream goes after it. */
  stream_unref(st);
  msgpack_pack_nil(call_result(c));
  return 0;
}

static int stream_op(call_t *c, op_kind_t kind)
{
  stream_t *st;
  uint64_t h;
  op_t *op;
  int rc;

  if ((rc = arg_stream(c, 0, &st, &h)) != 0)
    return rc;
  if ((op = op_prepare(c, kind, st, h)) == NULL)
    return HIPD_ENOMEM;
  op_submit(op);
  return 0;
}

/* stream.synchronize [stream]: answered when the stream's work is done. */
int m_stream_synchronize(call_t *c)
{
  return stream_op(c, OP_SYNC);
}

/* stream.query [stream] -> true when all its work has completed. It never
 * waits: while the stream's worker still has ops (queued or running; on the
 * CPU device an op runs to completion there) the answer is false at once.
 * Only an idle worker asks the driver about work left on the device. */
int m_stream_query(call_t *c)
{
  stream_t *st;
  uint64_t h;
  int rc;

  if ((rc = arg_stream(c, 0, &st, &h)) != 0)
    return rc;
  if (exec_pending(st->ex) > 0) {
    msgpack_pack_false(call_result(c));
    return 0;
  }
  return stream_op(c, OP_QUERY);
}

/* stream.default [device?] -> the session's default stream handle. */
int m_stream_default(call_t *c)
{
  stream_t *st;
  uint64_t h;
  int rc;

  if ((rc = default_stream(c, c->args[0].dev, &st, &h)) != 0)
    return rc;
  msgpack_pack_uint64(call_result(c), h);
  return 0;
}
