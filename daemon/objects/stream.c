/* SPDX-License-Identifier: MIT */
/* daemon/objects/stream.c: streams: a serial queue (an executor) on its
 * device's pool of stream threads and a driver stream each, created as
 * the stream's first task and destroyed as its last, once the last
 * reference is gone.
 *
 * Called by methods/, resources.c (default streams) and op.c; it reports
 * through obj_done_t and never calls sessions or dispatch (objects.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objects/objects.h"
#include "objects/watchdog.h"

static void task_reset(obj_task_t *t, void *obj, void (*run)(task_t *),
                       void (*done)(task_t *))
{
  task_init(&t->t, run, done);
  t->obj = obj;
}

void stream_ref(stream_t *st)
{
  st->refs++;
}

static void create_run(task_t *t)
{
  stream_t *st = ((obj_task_t *)t)->obj;
  driver_t *drv = st->dev->drv;

  st->status = drv->stream_create(drv, st->dev->local, &st->drv);
  if (st->status != 0) {
    st->drv = NULL;
    task_fail(t, st->status, "cannot create a stream on device %d: %s",
              st->dev->id, drv_last_error());
  } else if (!st->dev->caps.is_cpu) {
    st->watch = watch_add(st->dev, st->drv);
  }
}

static void create_done(task_t *t)
{
  obj_task_t *ot = (obj_task_t *)t;
  obj_result_t r = {.status = t->err.code, .err = t->err.msg};

  if (ot->done.fn != NULL)
    ot->done.fn(ot->done.ctx, &r);
}

static void destroy_run(task_t *t)
{
  stream_t *st = ((obj_task_t *)t)->obj;

  watch_remove(st->watch);
  st->watch = NULL;
  /* A stream of a reset context is gone already. */
  if (st->drv != NULL && st->epoch == device_epoch(st->dev))
    st->dev->drv->stream_destroy(st->dev->drv, st->dev->local, st->drv);
  st->drv = NULL;
}

/* The stream lives until its worker is gone, which comes after this
 * (completions reach the loop in the order they happened). */
static void destroy_done(task_t *t)
{
  (void)t;
}

static void stream_gone(void *arg)
{
  free(arg);
}

stream_t *stream_new(device_t *dev)
{
  stream_t *st = calloc(1, sizeof(*st));

  if (st == NULL)
    return NULL;
  st->dev = dev;
  st->refs = 1;
  st->epoch = device_epoch(dev);
  st->ex = exec_create_in(dev->streams);
  if (st->ex == NULL) {
    free(st);
    return NULL;
  }
  return st;
}

void stream_start(stream_t *st, obj_done_t done)
{
  task_reset(&st->create, st, create_run, create_done);
  st->create.done = done;
  exec_submit(st->ex, &st->create.t);
}

void stream_unref(stream_t *st)
{
  if (--st->refs > 0)
    return;
  /* No op holds it: no mark of it is left on the device. */
  if (st->word != 0)
    device_word_put(st->dev, st->word - 1);
  st->word = 0;
  task_reset(&st->destroy, st, destroy_run, destroy_done);
  exec_submit(st->ex, &st->destroy.t);
  exec_retire(st->ex, stream_gone, st);
}

int stream_wait(stream_t *st)
{
  int rc;

  exec_wait_begin();
  rc = st->dev->drv->stream_sync(st->dev->drv, st->drv);
  exec_wait_end();
  return rc;
}

uint32_t stream_pending(const stream_t *st)
{
  return exec_pending(st->ex);
}
