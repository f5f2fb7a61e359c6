/* SPDX-License-Identifier: MIT */
/* daemon/objects/buffer.c: device buffers: made on the device's service
 * worker (device memory, or a client's shared memory mapped for the
 * device), freed there after the last reference, with the device's
 * accounting (device_t.allocated, .buffers) raised and lowered here only.
 *
 * Called by methods/ (mem.alloc*, mem.alloc_zero_copy), resources.c and
 * op.c; it reports through obj_done_t and never calls sessions or
 * dispatch (see objects.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "objects/objects.h"

/* Reuse the buffer's embedded task for its next job. */
static task_t *buffer_task(buffer_t *b, void (*run)(task_t *),
                           void (*done)(task_t *))
{
  task_init(&b->task.t, run, done);
  b->task.obj = b;
  return &b->task.t;
}

static buffer_t *buffer_of(task_t *t)
{
  return ((obj_task_t *)t)->obj;
}

static void alloc_run(task_t *t)
{
  buffer_t *b = buffer_of(t);
  driver_t *drv = b->dev->drv;
  size_t size = b->mem.size;
  int rc;

  b->epoch = device_epoch(b->dev);
  rc = drv->mem_alloc(drv, b->dev->local, size, &b->mem);
  if (rc != 0)
    task_fail(t, rc, "cannot allocate %zu bytes on device %d: %s", size,
              b->dev->id, drv_last_error());
}

static void map_run(task_t *t)
{
  buffer_t *b = buffer_of(t);
  driver_t *drv = b->dev->drv;
  shm_t *m = b->shm;
  int rc;

  b->epoch = device_epoch(b->dev);
  rc = drv->host_map(drv, b->dev->local, m->addr, m->size, m->fd, &b->mem);
  if (rc != 0)
    task_fail(t, rc, "device %d cannot use the shared buffer: %s", b->dev->id,
              drv_last_error());
}

/* The buffer exists (or not): count it on its device, report it. */
static void made_done(task_t *t)
{
  buffer_t *b = buffer_of(t);
  obj_done_t done = b->task.done;
  obj_result_t r = {.status = t->err.code, .err = t->err.msg};

  if (t->err.code != 0) {
    if (b->shm == NULL && t->err.code == HIPD_EDEVLOST)
      device_mark_lost(b->dev, t->err.msg);
    if (b->shm != NULL)
      shm_unref(b->shm);
    /* The message lives in the task, which goes with the buffer. */
    char err[sizeof(t->err.msg)];
    memcpy(err, t->err.msg, sizeof(err));
    r.err = err;
    free(b);
    done.fn(done.ctx, &r);
    return;
  }
  b->dev->allocated += buffer_quota_bytes(b);
  b->dev->buffers++;
  r.buffer = b;
  done.fn(done.ctx, &r);
}

static int buffer_make(device_t *dev, size_t size, size_t elem_size, shm_t *m,
                       obj_done_t done)
{
  buffer_t *b = calloc(1, sizeof(*b));

  if (b == NULL)
    return HIPD_ENOMEM;
  b->dev = dev;
  b->elem_size = elem_size;
  b->refs = 1;
  b->mem.size = size; /* the size asked for, until the driver sets it */
  b->shm = m;
  task_t *t = buffer_task(b, m != NULL ? map_run : alloc_run, made_done);
  b->task.done = done;
  exec_submit(dev->service, t);
  return 0;
}

int buffer_alloc(device_t *dev, size_t size, size_t elem_size, obj_done_t done)
{
  return buffer_make(dev, size, elem_size, NULL, done);
}

int buffer_map_shm(device_t *dev, shm_t *m, obj_done_t done)
{
  shm_ref(m);
  int rc = buffer_make(dev, 0, 1, m, done);
  if (rc != 0)
    shm_unref(m);
  return rc;
}

void buffer_ref(buffer_t *b)
{
  b->refs++;
}

static void free_run(task_t *t)
{
  buffer_t *b = buffer_of(t);

  if (b->epoch != device_epoch(b->dev))
    return; /* the memory went with the reset context */
  /* The driver may clear what it is given (HIP zeroes the size); done()
   * still needs the size for the device's accounting. */
  drv_mem_t mem = b->mem;

  if (b->shm != NULL)
    b->dev->drv->host_unmap(b->dev->drv, b->dev->local, &mem);
  else
    b->dev->drv->mem_free(b->dev->drv, b->dev->local, &mem);
}

static void free_done(task_t *t)
{
  buffer_t *b = buffer_of(t);

  b->dev->allocated -= buffer_quota_bytes(b);
  b->dev->buffers--;
  if (b->shm != NULL)
    shm_unref(b->shm);
  free(b);
}

void buffer_unref(buffer_t *b)
{
  if (--b->refs > 0)
    return;
  exec_submit(b->dev->service, buffer_task(b, free_run, free_done));
}
