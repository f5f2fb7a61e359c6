/* daemon/methods/event.c: event.create, destroy, record, query,
 * synchronize, elapsed. */
#include "config.h"

#include <stdlib.h>

#include "methods.h"

/* event.create [device?] -> handle */
int m_event_create(call_t *c)
{
  session_t *s = c->s;
  device_t *dev = c->args[0].dev;
  event_t *ev;
  call_t *d;
  uint64_t h;
  int rc;

  ev = calloc(1, sizeof(*ev));
  if (ev == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  ev->dev = dev;
  ev->refs = 1;
  rc = handles_add(&s->handles, HANDLE_EVENT, ev, &h);
  if (rc != 0) {
    free(ev);
    return call_fail(c, rc, "cannot add an event handle: %s",
                     hipd_strerror(rc));
  }
  if ((d = call_defer(c)) == NULL) {
    handles_remove(&s->handles, h, HANDLE_EVENT, NULL);
    free(ev);
    return HIPD_ENOMEM;
  }
  event_create_async(ev, d, h);
  return 0;
}

/* The event of param @p i (an event handle), if alive. */
static int arg_event(call_t *c, unsigned i, event_t **ev, uint64_t *h)
{
  *ev = c->args[i].obj;
  *h = c->args[i].u;
  return check_alive(c, "event", (*ev)->dev, (*ev)->epoch);
}

/* event.destroy [event] */
int m_event_destroy(call_t *c)
{
  event_t *ev = c->args[0].obj;
  uint64_t h = c->args[0].u;

  handles_remove(&c->s->handles, h, HANDLE_EVENT, NULL);
  event_unref(ev);
  msgpack_pack_nil(call_result(c));
  return 0;
}

/* event.record [event, stream?]: the mark is placed on the stream (default:
 * the session's default stream of the event's device). */
int m_event_record(call_t *c)
{
  event_t *ev;
  stream_t *st;
  uint64_t h, sh;
  op_t *op;
  int rc;

  if ((rc = arg_event(c, 0, &ev, &h)) != 0)
    return rc;
  if (c->args[1].present) {
    if ((rc = arg_stream(c, 1, &st, &sh)) != 0)
      return rc;
    if (st->dev != ev->dev)
      return call_fail(c, HIPD_EINVAL,
                       "event 0x%llx is on device %d, stream 0x%llx on "
                       "device %d",
                       (unsigned long long)h, ev->dev->id,
                       (unsigned long long)sh, st->dev->id);
  } else if ((rc = default_stream(c, ev->dev, &st, &sh)) != 0) {
    return rc;
  }
  if ((op = op_prepare(c, OP_RECORD, st, sh)) == NULL)
    return HIPD_ENOMEM;
  op->ev = ev;
  event_ref(ev);
  op_submit(op);
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
int m_event_query(call_t *c)
{
  event_t *ev;
  uint64_t h;
  int rc;

  if ((rc = arg_event(c, 0, &ev, &h)) != 0 ||
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

/* event.synchronize [event]: answered when the mark is passed. */
int m_event_synchronize(call_t *c)
{
  event_t *ev;
  uint64_t h;
  call_t *d;
  int rc;

  if ((rc = arg_event(c, 0, &ev, &h)) != 0 ||
      (rc = check_recorded(c, "the", ev, h)) != 0)
    return rc;
  if ((d = call_defer(c)) == NULL)
    return HIPD_ENOMEM;
  event_wait(ev, d);
  return 0;
}

typedef struct {
  task_t t;
  call_t *call;
  event_t *a, *b;
  float ms;
} elapsed_task_t;

static void elapsed_run(task_t *t)
{
  elapsed_task_t *e = (elapsed_task_t *)t;
  int rc = event_elapsed(e->a, e->b, &e->ms);

  if (rc != 0)
    task_fail(t, rc, "%s", drv_last_error());
}

static void elapsed_done(task_t *t)
{
  elapsed_task_t *e = (elapsed_task_t *)t;

  if (t->status != 0)
    call_fail(e->call, t->status, "%s", t->err);
  else
    msgpack_pack_float(call_result(e->call), e->ms);
  call_finish(e->call);
  event_unref(e->a);
  event_unref(e->b);
  free(e);
}

/* event.elapsed [start, stop] -> milliseconds (float) between two completed
 * marks of one device. */
int m_event_elapsed(call_t *c)
{
  event_t *a, *b;
  uint64_t ha, hb;
  elapsed_task_t *e;
  int rc;

  if ((rc = arg_event(c, 0, &a, &ha)) != 0 ||
      (rc = arg_event(c, 1, &b, &hb)) != 0 ||
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
  e = calloc(1, sizeof(*e));
  if (e == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  if ((e->call = call_defer(c)) == NULL) {
    free(e);
    return HIPD_ENOMEM;
  }
  e->a = a;
  e->b = b;
  event_ref(a);
  event_ref(b);
  e->t.run = elapsed_run;
  e->t.done = elapsed_done;
  exec_submit(a->dev->service, &e->t);
  return 0;
}
