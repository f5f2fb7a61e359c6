/* SPDX-License-Identifier: MIT */
/* daemon/objects/op.c: stream operations: a task on the stream's worker
 * that copies, sets, records, synchronises, queries or launches, timed
 * between two device events when asked, and reports its result through
 * its obj_done_t on the loop thread.
 *
 * Called by methods/ (and tests); it never calls sessions or dispatch
 * (objects.h): what the result means for a reply is the caller's. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bufpool.h"
#include "kernels/kernels.h"
#include "objects/internal.h"
#include "objects/objects.h"
#include "objects/watchdog.h"
#include "util/clock.h"
#include "util/zalloc.h"

#define STAGING_CHUNK ((size_t)64 << 20)

op_t *op_new(op_kind_t kind, stream_t *st, obj_done_t done)
{
  op_t *op = util_zalloc(sizeof(*op));

  if (op == NULL)
    return NULL;
  op->kind = kind;
  op->st = st;
  op->done = done;
  stream_ref(st);
  return op;
}

const char *op_name(op_kind_t kind)
{
  static const char *const names[] = {
      "mem.write", "mem.read", "mem.copy",     "mem.memset",
      "sync",      "query",    "event.record", "kernel.launch"};
  return names[kind];
}

/* Copy between devices without peer access: through host memory. The
 * worker is bound to the op's stream's device and is bound back after. */
static int copy_across(op_t *op)
{
  device_t *home = op->st->dev;
  device_t *sd = op->src->dev, *dd = op->dst->dev;
  char *src = (char *)op->src->mem.ptr + op->src_off;
  char *dst = (char *)op->dst->mem.ptr + op->dst_off;
  char *staging = NULL;
  int rc = 0;

  if (sd->caps.is_cpu && dd->caps.is_cpu) {
    memmove(dst, src, op->n);
    return 0;
  }
  if (sd->drv == dd->drv && sd->drv->copy_peer != NULL) {
    /* Two GPUs of one runtime: peer to peer on the op's stream. */
    return sd->drv->copy_peer(sd->drv, op->st->drv, dst, dd->local, src,
                              sd->local, op->n);
  }
  if (!sd->caps.is_cpu && !dd->caps.is_cpu) {
    staging = malloc(op->n < STAGING_CHUNK ? op->n : STAGING_CHUNK);
    if (staging == NULL) {
      drv_set_error("out of memory for a staging buffer");
      return HIPD_ENOMEM;
    }
  }
  for (size_t done = 0; done < op->n && rc == 0;) {
    size_t n = op->n - done;
    const char *from = src + done;
    if (staging != NULL && n > STAGING_CHUNK)
      n = STAGING_CHUNK;
    /* Device to host (or straight into a CPU-device buffer). */
    if (!sd->caps.is_cpu) {
      char *to = staging ? staging : dst + done;
      void *s = sd == home ? op->st->drv : NULL;
      if ((rc = sd->drv->bind_thread(sd->drv, sd->local)) == 0 &&
          (rc = sd->drv->copy_d2h(sd->drv, s, to, from, n)) == 0)
        rc = sd->drv->stream_sync(sd->drv, s);
      from = to;
    }
    /* Host to device. */
    if (rc == 0 && !dd->caps.is_cpu) {
      void *s = dd == home ? op->st->drv : NULL;
      if ((rc = dd->drv->bind_thread(dd->drv, dd->local)) == 0 &&
          (rc = dd->drv->copy_h2d(dd->drv, s, dst + done, from, n)) == 0)
        rc = dd->drv->stream_sync(dd->drv, s);
    }
    done += n;
  }
  /* The thread serves other streams of home next (executor.h). */
  if (home->drv->bind_thread(home->drv, home->local) != 0) {
    exec_thread_unbound();
    if (rc == 0) {
      drv_set_error("cannot bind the stream's device %d again after the "
                    "copy",
                    home->id);
      rc = HIPD_EDEVICE;
    }
  }
  free(staging);
  return rc;
}

/* Free host bytes once a stream has passed the operation reading them. */
static void free_notify(void *arg, int status)
{
  (void)status;
  bufpool_put(arg);
}

/* The op cannot run: fail it, and the event mark it carries. */
static void op_refuse(op_t *op, int status)
{
  if (op->mark != NULL) {
    op->mark->t.err.code = status;
    task_complete(&op->mark->t);
    op->mark = NULL;
  }
}

/* task_t.early of an op run by its executor. */
static void op_answer_early(task_t *t)
{
  op_t *op = (op_t *)t;

  op->early.fn(op->early.ctx);
}

void op_run_task(task_t *t)
{
  op_t *op = (op_t *)t;
  stream_t *st = op->st;
  driver_t *drv = st->dev->drv;
  int dev = st->dev->local;
  int rc = 0, wait = op->wait;

  if (st->epoch != device_epoch(st->dev)) {
    task_fail(t, HIPD_EDEVLOST,
              "device %d lost its context (a kernel fault): this stream "
              "and the objects made with it are gone",
              st->dev->id);
    op_refuse(op, HIPD_EDEVLOST);
    return;
  }
  if (st->status != 0) {
    task_fail(t, st->status, "the stream could not be created");
    op_refuse(op, st->status);
    return;
  }
  drv_set_error("no detail");
  if (op->timed) {
    op->submit_ns = util_now_ns();
    if (drv->event_create(drv, dev, &op->pev[0]) != 0 ||
        drv->event_create(drv, dev, &op->pev[1]) != 0 ||
        drv->event_record(drv, op->pev[0], st->drv) != 0)
      op->timed = 0; /* time what can be timed; never fail the op */
    wait = 1;
  }
  switch (op->kind) {
  case OP_WRITE:
    rc = drv->copy_h2d(drv, st->drv, (char *)op->dst->mem.ptr + op->dst_off,
                       op->host, op->n);
    break;
  case OP_READ:
    rc = drv->copy_d2h(drv, st->drv, op->host,
                       (char *)op->src->mem.ptr + op->src_off, op->n);
    wait = 1; /* the bytes are the result */
    break;
  case OP_COPY:
    if (op->src->dev == op->dst->dev) {
      rc = drv->copy_d2d(drv, st->drv, (char *)op->dst->mem.ptr + op->dst_off,
                         (char *)op->src->mem.ptr + op->src_off, op->n);
    } else {
      exec_wait_begin(); /* it synchronises the devices */
      rc = copy_across(op);
      exec_wait_end();
    }
    break;
  case OP_MEMSET:
    rc = drv->memset(drv, st->drv, (char *)op->dst->mem.ptr + op->dst_off,
                     op->value, op->n);
    break;
  case OP_SYNC:
    wait = 1;
    break;
  case OP_QUERY:
    rc = drv->stream_query(drv, st->drv);
    op->idle = rc == 0;
    if (rc == HIPD_ENOTREADY)
      rc = 0;
    break;
  case OP_LAUNCH:
    /* On the CPU device the launch runs the kernel. */
    if (st->dev->caps.is_cpu)
      exec_wait_begin();
    rc = drv->launch(drv, st->drv, op->kernel->fn, op->grid, op->block,
                     op->shared, op->args, op->nargs, op->out);
    if (st->dev->caps.is_cpu)
      exec_wait_end();
    if (rc == 0)
      watch_launched(st->watch);
    break;
  case OP_RECORD: {
    obj_task_t *mark = op->mark;
    op->mark = NULL; /* it completes on its own */
    rc = event_record_drv(op->ev, st->drv, mark->seq);
    if (rc == 0)
      rc = drv->stream_notify(drv, st->drv, event_mark_reached, mark);
    if (rc != 0) {
      mark->t.err.code = rc;
      task_complete(&mark->t);
    }
    break;
  }
  }
  if (rc != 0) {
    task_fail(t, rc, "%s", drv_last_error());
    goto out;
  }
  if (op->kind == OP_WRITE && !wait && op->shm == NULL &&
      drv->stream_notify(drv, st->drv, free_notify,
                         op->host_block ? op->host_block : op->host) == 0) {
    /* The device may read the staged bytes after this returns: they are
     * freed when the stream has passed the copy. */
    op->host = op->host_block = NULL;
  }
  if (op->timed)
    drv->event_record(drv, op->pev[1], st->drv);
  /* A launch from the loop: the loop's polling waits (submit.c). */
  if (wait && !op->polled && (rc = stream_wait(st)) != 0) {
    task_fail(t, rc, "the stream failed: %s", drv_last_error());
    goto out;
  }
  if (op->timed)
    op->timed_ok =
        drv->event_elapsed(drv, op->pev[0], op->pev[1], &op->device_ms) == 0;
out:
  for (int i = 0; i < 2; i++)
    if (op->pev[i] != NULL)
      drv->event_destroy(drv, dev, op->pev[i]);
  /* On the stream's executor (not the loop: op->polled), a success is
   * answered as it completes, without waiting for the loop (objects.h). */
  if (rc == 0 && t->err.code == 0 && !op->polled && op->early.fn != NULL)
    t->early = op_answer_early;
}

void op_discard(op_t *op)
{
  if (op->dst)
    buffer_unref(op->dst);
  if (op->src)
    buffer_unref(op->src);
  if (op->ev)
    event_unref(op->ev);
  if (op->kernel)
    kernel_unref(op->kernel);
  for (uint32_t i = 0; i < op->nbufs; i++)
    buffer_unref(op->bufs[i]);
  free(op->bufs);
  free(op->args);
  drv_output_unref(op->out);
  stream_unref(op->st);
  if (op->shm != NULL)
    shm_unref(op->shm);
  else if (op->host_block != NULL)
    bufpool_put(op->host_block);
  else
    bufpool_put(op->host);
  free(op);
}

void op_done_task(task_t *t)
{
  op_t *op = (op_t *)t;
  obj_result_t r = {.status = t->err.code, .err = t->err.msg};

  if (t->err.code == HIPD_EDEVLOST)
    device_mark_lost(op->st->dev, t->err.msg);
  if (t->err.code == 0) {
    r.idle = op->idle;
    r.timed = op->timed_ok;
    r.start_ns = op->submit_ns;
    r.device_ms = op->device_ms;
    if (op->kind == OP_READ && op->shm == NULL) {
      r.bytes = op->host;
      r.len = op->n;
    }
  }
  /* It waited for its stream: what came before it has ended, and the
   * loop may make the next op itself again (submit.c). (A read made by
   * the loop without a wait has not waited: it does not count.) */
  if (op->wait || op->kind == OP_SYNC || (op->kind == OP_READ && !op->polled))
    op->st->inl_async_ns = 0;
  if (op->done.fn != NULL)
    op->done.fn(op->done.ctx, &r);
  if (op->kind == OP_READ && op->shm == NULL)
    op->host = r.bytes; /* NULL if the completion took them */
  op_discard(op);
}
