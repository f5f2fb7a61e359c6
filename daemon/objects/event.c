/* SPDX-License-Identifier: MIT */
/* daemon/objects/event.c: events: the driver event (made and destroyed on
 * the device's service worker), its state as records are placed and
 * passed, the completions waiting for it, and the time between two.
 *
 * Called by methods/, resources.c and op.c (records); it reports through
 * obj_done_t and never calls sessions or dispatch (objects.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "objects/internal.h"
#include "objects/objects.h"

typedef struct waiter {
  obj_done_t done;
  struct waiter *next;
} waiter_t;

static void task_reset(obj_task_t *t, void *obj, void (*run)(task_t *),
                       void (*done)(task_t *))
{
  task_init(&t->t, run, done);
  t->obj = obj;
}

event_t *event_new(device_t *dev)
{
  event_t *ev = calloc(1, sizeof(*ev));

  if (ev == NULL)
    return NULL;
  ev->dev = dev;
  ev->refs = 1;
  pthread_mutex_init(&ev->rec_lock, NULL);
  return ev;
}

void event_discard(event_t *ev)
{
  pthread_mutex_destroy(&ev->rec_lock);
  free(ev);
}

void event_ref(event_t *ev)
{
  ev->refs++;
}

static void create_run(task_t *t)
{
  event_t *ev = ((obj_task_t *)t)->obj;

  ev->epoch = device_epoch(ev->dev);
  driver_t *drv = ev->dev->drv;
  int rc = drv->event_create(drv, ev->dev->local, &ev->drv);

  if (rc != 0) {
    ev->drv = NULL;
    task_fail(t, rc, "cannot create an event on device %d: %s", ev->dev->id,
              drv_last_error());
  }
}

static void create_done(task_t *t)
{
  obj_task_t *ot = (obj_task_t *)t;
  obj_result_t r = {.status = t->err.code, .err = t->err.msg};

  ot->done.fn(ot->done.ctx, &r);
}

void event_start(event_t *ev, obj_done_t done)
{
  task_reset(&ev->create, ev, create_run, create_done);
  ev->create.done = done;
  exec_submit(ev->dev->service, &ev->create.t);
}

static void destroy_run(task_t *t)
{
  event_t *ev = ((obj_task_t *)t)->obj;

  if (ev->drv != NULL && ev->epoch == device_epoch(ev->dev))
    ev->dev->drv->event_destroy(ev->dev->drv, ev->dev->local, ev->drv);
}

static void destroy_done(task_t *t)
{
  event_discard(((obj_task_t *)t)->obj);
}

void event_unref(event_t *ev)
{
  if (--ev->refs > 0)
    return;
  task_reset(&ev->destroy, ev, destroy_run, destroy_done);
  exec_submit(ev->dev->service, &ev->destroy.t);
}

static void event_report(obj_done_t done, const event_t *ev)
{
  obj_result_t r = {.status = ev->status,
                    .err = ev->status != 0 ? "the event's stream failed" : ""};

  done.fn(done.ctx, &r);
}

int event_wait(event_t *ev, obj_done_t done)
{
  waiter_t *w;

  if (ev->state == EVENT_COMPLETE) {
    event_report(done, ev);
    return 0;
  }
  w = malloc(sizeof(*w));
  if (w == NULL)
    return HIPD_ENOMEM;
  event_ref(ev);
  w->done = done;
  w->next = ev->waiters;
  ev->waiters = w;
  return 0;
}

/* The stream reached a record: the event completes if it was not recorded
 * again since. */
static void mark_done(task_t *t)
{
  obj_task_t *ot = (obj_task_t *)t;
  event_t *ev = ot->obj;

  if (ot->seq == ev->seq) {
    ev->state = EVENT_COMPLETE;
    ev->status = t->err.code;
    while (ev->waiters != NULL) {
      waiter_t *w = ev->waiters;
      ev->waiters = w->next;
      event_report(w->done, ev);
      free(w);
      event_unref(ev);
    }
  }
  event_unref(ev);
  free(t);
}

static void no_run(task_t *t)
{
  (void)t;
}

obj_task_t *event_mark_new(event_t *ev)
{
  obj_task_t *mark = task_new(sizeof(*mark), no_run, mark_done);

  if (mark == NULL)
    return NULL;
  mark->obj = ev;
  /* The mark that completes the event holds its own reference. */
  mark->seq = ++ev->seq;
  task_expect(&mark->t);
  event_ref(ev);
  ev->state = EVENT_PENDING;
  ev->status = 0;
  return mark;
}

void event_mark_reached(void *arg, int status)
{
  task_t *t = arg;

  t->err.code = status;
  task_complete(t);
}

typedef struct {
  task_t t;
  obj_done_t done;
  event_t *a, *b;
  float ms;
} elapsed_task_t;

int event_record_drv(event_t *ev, void *drv_stream, uint32_t seq)
{
  driver_t *drv = ev->dev->drv;
  int rc = 0;

  pthread_mutex_lock(&ev->rec_lock);
  if ((int32_t)(seq - ev->rec_seq) > 0) {
    rc = drv->event_record(drv, ev->drv, drv_stream);
    if (rc == 0)
      ev->rec_seq = seq;
  }
  pthread_mutex_unlock(&ev->rec_lock);
  return rc;
}

static void elapsed_run(task_t *t)
{
  elapsed_task_t *e = (elapsed_task_t *)t;
  event_t *a = e->a, *b = e->b;
  event_t *first = a < b ? a : b, *second = a < b ? b : a;
  driver_t *drv = a->dev->drv;
  int rc;

  /* The driver's events are read under their record locks, always taken
   * in address order so that two elapsed tasks never wait for each
   * other; once when both are the same event. */
  pthread_mutex_lock(&first->rec_lock);
  if (second != first)
    pthread_mutex_lock(&second->rec_lock);
  rc = drv->event_elapsed(drv, a->drv, b->drv, &e->ms);
  if (second != first)
    pthread_mutex_unlock(&second->rec_lock);
  pthread_mutex_unlock(&first->rec_lock);

  if (rc != 0)
    task_fail(t, rc, "%s", drv_last_error());
}

static void elapsed_done(task_t *t)
{
  elapsed_task_t *e = (elapsed_task_t *)t;
  obj_result_t r = {
      .status = t->err.code, .err = t->err.msg, .device_ms = e->ms};

  e->done.fn(e->done.ctx, &r);
  event_unref(e->a);
  event_unref(e->b);
  free(e);
}

int event_elapsed(event_t *a, event_t *b, obj_done_t done)
{
  elapsed_task_t *e = task_new(sizeof(*e), elapsed_run, elapsed_done);

  if (e == NULL)
    return HIPD_ENOMEM;
  e->done = done;
  e->a = a;
  e->b = b;
  event_ref(a);
  event_ref(b);
  exec_submit(a->dev->service, &e->t);
  return 0;
}
