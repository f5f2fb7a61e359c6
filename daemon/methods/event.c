/* SPDX-License-Identifier: MIT */
/* daemon/methods/event.c: event.create, destroy, record, query,
 * synchronize, elapsed. */
#include "config.h"

#include <stdlib.h>

#include "methods.h"

/* The driver event of an event.create exists, or could not be made. */
static void event_created(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;
  call_t *c = p->call;

  if (r->status != 0) {
    call_fail(c, r->status, "%s", r->err);
    res_event_forget(c->s, p->handle);
  } else {
    msgpack_pack_uint64(call_result(c), p->handle);
  }
  meth_pending_finish(p);
}

/* event.create [device?] -> handle */
int m_event_create(call_t *c, const device_args_t *a)
{
  device_t *dev = a->device.dev;
  event_t *ev;
  meth_pending_t *p;
  int rc;

  ev = event_new(dev);
  if (ev == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  if ((p = meth_pending_new(c)) == NULL) {
    event_discard(ev);
    return HIPD_ENOMEM;
  }
  rc = res_event_add(c->s, ev, &p->handle);
  if (rc != 0) {
    event_discard(ev);
    call_fail(p->call, rc, "cannot add an event handle: %s", hipd_strerror(rc));
    meth_pending_finish(p);
    return 0;
  }
  event_start(ev, (obj_done_t){event_created, p});
  return 0;
}

/* The event of param @p a (an event handle), if alive. */
static int arg_event(call_t *c, const arg_t *a, event_t **ev, uint64_t *h)
{
  *ev = a->obj;
  *h = a->u;
  return meth_check_alive(c, "event", (*ev)->dev, (*ev)->epoch);
}

/* event.destroy [event] */
int m_event_destroy(call_t *c, const event_args_t *a)
{
  event_t *ev = a->event.obj;
  uint64_t h = a->event.u;

  res_event_free(c->s, h, ev);
  msgpack_pack_nil(call_result(c));
  return 0;
}

/* event.record [event, stream?]: the mark is placed on the stream (default:
 * the session's default stream of the event's device). */
int m_event_record(call_t *c, const event_record_args_t *a)
{
  event_t *ev;
  stream_t *st;
  uint64_t h, sh;
  op_t *op;
  int rc;

  if ((rc = arg_event(c, &a->event, &ev, &h)) != 0)
    return rc;
  if (a->stream.present) {
    if ((rc = meth_arg_stream(c, &a->stream, &st, &sh)) != 0)
      return rc;
    if (st->dev != ev->dev)
      return call_fail(c, HIPD_EINVAL,
                       "event 0x%llx is on device %d, stream 0x%llx on "
                       "device %d",
                       (unsigned long long)h, ev->dev->id,
                       (unsigned long long)sh, st->dev->id);
  } else if ((rc = meth_default_stream(c, ev->dev, &st, &sh)) != 0) {
    return rc;
  }
  if ((op = meth_op_prepare(c, OP_RECORD, st, sh)) == NULL)
    return HIPD_ENOMEM;
  op->ev = ev;
  event_ref(ev);
  meth_op_start(op);
  return 0;
}

static int check_recorded(call_t *c, const char *what, const event_t *ev,
                          uint64_t h)
{
  if (ev->state == EVENT_UNRECORDED)
    return call_fail(c, HIPD_ENOTRECORDED,
                     "%s event 0x%llx has never been recorded", what,
                     (unsigned long long)h);
  return 0;
}

/* event.query [event] -> true once the stream has passed the mark. */
int m_event_query(call_t *c, const event_args_t *a)
{
  event_t *ev;
  uint64_t h;
  int rc;

  if ((rc = arg_event(c, &a->event, &ev, &h)) != 0 ||
      (rc = check_recorded(c, "the", ev, h)) != 0)
    return rc;
  if (ev->state == EVENT_COMPLETE && ev->status != 0)
    return call_fail(c, ev->status, "the stream of event 0x%llx failed",
                     (unsigned long long)h);
  msgpack_pack_object(
      call_result(c),
      (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN,
                       .via.boolean = ev->state == EVENT_COMPLETE});
  return 0;
}

/* An event waited for completed: answer with its status. */
static void event_waited(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;

  if (r->status != 0)
    call_fail(p->call, r->status, "%s", r->err);
  else
    msgpack_pack_nil(call_result(p->call));
  meth_pending_finish(p);
}

/* event.synchronize [event]: answered when the mark is passed. */
int m_event_synchronize(call_t *c, const event_args_t *a)
{
  event_t *ev;
  uint64_t h;
  meth_pending_t *p;
  int rc;

  if ((rc = arg_event(c, &a->event, &ev, &h)) != 0 ||
      (rc = check_recorded(c, "the", ev, h)) != 0)
    return rc;
  if ((p = meth_pending_new(c)) == NULL)
    return HIPD_ENOMEM;
  if (event_wait(ev, (obj_done_t){event_waited, p}) != 0)
    meth_pending_fail(p, HIPD_ENOMEM, "out of memory");
  return 0;
}

/* The device measured the time between two events. */
static void elapsed_measured(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;

  if (r->status != 0)
    call_fail(p->call, r->status, "%s", r->err);
  else
    msgpack_pack_float(call_result(p->call), r->device_ms);
  meth_pending_finish(p);
}

/* event.elapsed [start, stop] -> milliseconds (float) between two completed
 * marks of one device. */
int m_event_elapsed(call_t *c, const event_elapsed_args_t *args)
{
  event_t *a, *b;
  uint64_t ha, hb;
  meth_pending_t *p;
  int rc;

  if ((rc = arg_event(c, &args->start, &a, &ha)) != 0 ||
      (rc = arg_event(c, &args->stop, &b, &hb)) != 0 ||
      (rc = check_recorded(c, "start", a, ha)) != 0 ||
      (rc = check_recorded(c, "stop", b, hb)) != 0)
    return rc;
  if (a->dev != b->dev)
    return call_fail(c, HIPD_EINVAL,
                     "start is on device %d and stop on device %d", a->dev->id,
                     b->dev->id);
  if (a->state != EVENT_COMPLETE || b->state != EVENT_COMPLETE)
    return call_fail(c, HIPD_ENOTREADY,
                     "%s event has not completed yet (synchronize it first)",
                     a->state != EVENT_COMPLETE ? "start" : "stop");
  if (a->status != 0 || b->status != 0)
    return call_fail(c, a->status ? a->status : b->status,
                     "the stream of the %s event failed",
                     a->status ? "start" : "stop");
  if ((p = meth_pending_new(c)) == NULL)
    return HIPD_ENOMEM;
  if (event_elapsed(a, b, (obj_done_t){elapsed_measured, p}) != 0)
    meth_pending_fail(p, HIPD_ENOMEM, "out of memory");
  return 0;
}
