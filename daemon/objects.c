/* daemon/objects.c: lifetime of buffers, streams and events, and the stream
 * ops that run on workers. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bufpool.h"
#include "kernels/kernels.h"
#include "log.h"
#include "objects.h"

#define STAGING_CHUNK ((size_t)64 << 20)

typedef struct waiter {
  call_t *call;
  struct waiter *next;
} waiter_t;

typedef struct op_group {
  call_t *call;
  uint32_t left;
  int status;
  char err[256];
} op_group_t;

/* A task on an object: creation, destruction, event marks. */
typedef struct obj_task {
  task_t t;
  void *obj;
  uint32_t seq;
  uint64_t handle;
  call_t *call;
} obj_task_t;

static uint64_t now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static obj_task_t *obj_task(void (*run)(task_t *), void (*done)(task_t *),
                            void *obj)
{
  obj_task_t *t = calloc(1, sizeof(*t));

  if (t == NULL) {
    /* Running out of memory for a 300-byte task is not survivable in any
     * meaningful way; say so rather than corrupt state. */
    log_error(0, "out of memory for a device task");
    abort();
  }
  t->t.run = run;
  t->t.done = done;
  t->obj = obj;
  return t;
}

static void no_run(task_t *t)
{
  (void)t;
}

static void free_done(task_t *t)
{
  free(t);
}

/* --------------------------------------------------------------- buffers */

void buffer_ref(buffer_t *b)
{
  b->refs++;
}

static void buffer_free_run(task_t *t)
{
  buffer_t *b = ((obj_task_t *)t)->obj;

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

static void buffer_free_done(task_t *t)
{
  buffer_t *b = ((obj_task_t *)t)->obj;

  b->dev->allocated -= buffer_quota_bytes(b);
  b->dev->buffers--;
  if (b->shm != NULL)
    shm_unref(b->shm);
  free(b);
  free(t);
}

void buffer_unref(buffer_t *b)
{
  if (--b->refs > 0)
    return;
  exec_submit(b->dev->service,
              &obj_task(buffer_free_run, buffer_free_done, b)->t);
}

/* --------------------------------------------------------------- streams */

void stream_ref(stream_t *st)
{
  st->refs++;
}

static void stream_create_run(task_t *t)
{
  stream_t *st = ((obj_task_t *)t)->obj;
  driver_t *drv = st->dev->drv;

  st->status = drv->stream_create(drv, st->dev->local, &st->drv);
  if (st->status != 0) {
    st->drv = NULL;
    task_fail(t, st->status, "cannot create a stream on device %d: %s",
              st->dev->id, drv_last_error());
  }
}

static void stream_create_done(task_t *t)
{
  obj_task_t *ot = (obj_task_t *)t;
  call_t *c = ot->call;

  if (c != NULL) {
    if (t->status != 0) {
      call_fail(c, t->status, "%s", t->err);
      if (!c->s->closing) {
        void *obj;
        if (handles_remove(&c->s->handles, ot->handle, HANDLE_STREAM, &obj) ==
            0)
          stream_unref(obj);
      }
    } else {
      msgpack_pack_uint64(call_result(c), ot->handle);
    }
    call_finish(c);
  }
  free(t);
}

static void stream_gone(void *arg)
{
  free(arg);
}

static void stream_destroy_run(task_t *t)
{
  stream_t *st = ((obj_task_t *)t)->obj;

  /* A stream of a reset context is gone already. */
  if (st->drv != NULL && st->epoch == device_epoch(st->dev))
    st->dev->drv->stream_destroy(st->dev->drv, st->dev->local, st->drv);
  st->drv = NULL;
}

stream_t *stream_new(device_t *dev)
{
  stream_t *st = calloc(1, sizeof(*st));
  char name[16];

  if (st == NULL)
    return NULL;
  snprintf(name, sizeof(name), "hipd-st%d", dev->id);
  st->dev = dev;
  st->refs = 1;
  st->epoch = device_epoch(dev);
  st->ex = exec_create(name, device_bind, dev);
  if (st->ex == NULL) {
    free(st);
    return NULL;
  }
  return st;
}

void stream_start(stream_t *st, call_t *c, uint64_t handle)
{
  obj_task_t *t = obj_task(stream_create_run, stream_create_done, st);

  t->call = c;
  t->handle = handle;
  exec_submit(st->ex, &t->t);
}

void stream_unref(stream_t *st)
{
  if (--st->refs > 0)
    return;
  exec_submit(st->ex, &obj_task(stream_destroy_run, free_done, st)->t);
  exec_retire(st->ex, stream_gone, st);
}

/* ---------------------------------------------------------------- events */

void event_ref(event_t *ev)
{
  ev->refs++;
}

static void event_create_run(task_t *t)
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

static void event_create_done(task_t *t)
{
  obj_task_t *ot = (obj_task_t *)t;
  call_t *c = ot->call;

  if (t->status != 0) {
    call_fail(c, t->status, "%s", t->err);
    if (!c->s->closing) {
      void *obj;
      if (handles_remove(&c->s->handles, ot->handle, HANDLE_EVENT, &obj) == 0)
        event_unref(obj);
    }
  } else {
    msgpack_pack_uint64(call_result(c), ot->handle);
  }
  call_finish(c);
  free(t);
}

void event_create_async(event_t *ev, call_t *c, uint64_t handle)
{
  obj_task_t *t = obj_task(event_create_run, event_create_done, ev);

  pthread_mutex_init(&ev->rec_lock, NULL);
  t->call = c;
  t->handle = handle;
  exec_submit(ev->dev->service, &t->t);
}

/* Record the driver's event of @p ev on @p st for record @p seq, unless a
 * later record of the event is there already (another stream reached its
 * mark first): an event follows its latest record (PROTOCOL.md, Events).
 * On the stream's worker. */
static int event_record_drv(event_t *ev, stream_t *st, uint32_t seq)
{
  driver_t *drv = ev->dev->drv;
  int rc = 0;

  pthread_mutex_lock(&ev->rec_lock);
  if ((int32_t)(seq - ev->rec_seq) > 0) {
    rc = drv->event_record(drv, ev->drv, st->drv);
    if (rc == 0)
      ev->rec_seq = seq;
  }
  pthread_mutex_unlock(&ev->rec_lock);
  return rc;
}

int event_elapsed(event_t *a, event_t *b, float *ms)
{
  driver_t *drv = a->dev->drv;
  event_t *first = a < b ? a : b, *second = a < b ? b : a;
  int rc;

  /* Always in address order, so that two calls never wait for each other;
   * once when both are the same event. */
  pthread_mutex_lock(&first->rec_lock);
  if (second != first)
    pthread_mutex_lock(&second->rec_lock);
  rc = drv->event_elapsed(drv, a->drv, b->drv, ms);
  if (second != first)
    pthread_mutex_unlock(&second->rec_lock);
  pthread_mutex_unlock(&first->rec_lock);
  return rc;
}

static void event_destroy_run(task_t *t)
{
  event_t *ev = ((obj_task_t *)t)->obj;

  if (ev->drv != NULL && ev->epoch == device_epoch(ev->dev))
    ev->dev->drv->event_destroy(ev->dev->drv, ev->dev->local, ev->drv);
}

static void event_destroy_done(task_t *t)
{
  event_t *ev = ((obj_task_t *)t)->obj;

  pthread_mutex_destroy(&ev->rec_lock);
  free(ev);
  free(t);
}

void event_unref(event_t *ev)
{
  if (--ev->refs > 0)
    return;
  exec_submit(ev->dev->service,
              &obj_task(event_destroy_run, event_destroy_done, ev)->t);
}

static void event_answer(call_t *c, const event_t *ev)
{
  if (ev->status != 0)
    call_fail(c, ev->status, "the event's stream failed");
  else
    msgpack_pack_nil(call_result(c));
  call_finish(c);
}

void event_wait(event_t *ev, call_t *c)
{
  waiter_t *w;

  if (ev->state == EVENT_COMPLETE) {
    event_answer(c, ev);
    return;
  }
  w = malloc(sizeof(*w));
  if (w == NULL) {
    call_fail(c, HIPD_ENOMEM, "out of memory");
    call_finish(c);
    return;
  }
  event_ref(ev);
  w->call = c;
  w->next = ev->waiters;
  ev->waiters = w;
}

/* The stream reached a record: the event completes if it was not recorded
 * again since. */
static void event_mark_done(task_t *t)
{
  obj_task_t *ot = (obj_task_t *)t;
  event_t *ev = ot->obj;

  if (ot->seq == ev->seq) {
    ev->state = EVENT_COMPLETE;
    ev->status = t->status;
    while (ev->waiters != NULL) {
      waiter_t *w = ev->waiters;
      ev->waiters = w->next;
      event_answer(w->call, ev);
      free(w);
      event_unref(ev);
    }
  }
  event_unref(ev);
  free(t);
}

static void event_mark_notify(void *arg, int status)
{
  task_t *t = arg;

  t->status = status;
  task_complete(t);
}

/* ------------------------------------------------------------------- ops */

op_t *op_new(op_kind_t kind, stream_t *st, uint64_t stream_handle, call_t *c)
{
  op_t *op = calloc(1, sizeof(*op));

  if (op == NULL)
    return NULL;
  op->kind = kind;
  op->st = st;
  op->stream_handle = stream_handle;
  op->call = c;
  stream_ref(st);
  if (c != NULL && c->s->profile != NULL && kind != OP_SYNC &&
      kind != OP_QUERY && kind != OP_RECORD) {
    op->prof = 1;
    op->prof_gen = c->s->profile->gen;
  }
  return op;
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
  home->drv->bind_thread(home->drv, home->local);
  free(staging);
  return rc;
}

/* Free host bytes once a stream has passed the operation reading them. */
static void free_notify(void *arg, int status)
{
  (void)status;
  bufpool_put(arg);
}

static void op_run(task_t *t)
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
    if (op->mark != NULL) {
      op->mark->t.status = HIPD_EDEVLOST;
      task_complete(&op->mark->t);
      op->mark = NULL;
    }
    return;
  }
  if (st->status != 0) {
    task_fail(t, st->status, "the stream could not be created");
    if (op->mark != NULL) {
      op->mark->t.status = st->status;
      task_complete(&op->mark->t);
      op->mark = NULL;
    }
    return;
  }
  drv_set_error("no detail");
  if (op->prof) {
    op->submit_ns = now_ns();
    if (drv->event_create(drv, dev, &op->pev[0]) != 0 ||
        drv->event_create(drv, dev, &op->pev[1]) != 0 ||
        drv->event_record(drv, op->pev[0], st->drv) != 0)
      op->prof = 0; /* time what can be timed; never fail the op */
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
    wait = 1; /* the bytes go into the reply */
    break;
  case OP_COPY:
    if (op->src->dev == op->dst->dev)
      rc = drv->copy_d2d(drv, st->drv, (char *)op->dst->mem.ptr + op->dst_off,
                         (char *)op->src->mem.ptr + op->src_off, op->n);
    else
      rc = copy_across(op);
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
    rc = drv->launch(drv, st->drv, op->kernel->fn, op->grid, op->block,
                     op->shared, op->args, op->nargs);
    break;
  case OP_RECORD: {
    obj_task_t *mark = op->mark;
    op->mark = NULL; /* it completes on its own */
    rc = event_record_drv(op->ev, st, mark->seq);
    if (rc == 0)
      rc = drv->stream_notify(drv, st->drv, event_mark_notify, mark);
    if (rc != 0) {
      mark->t.status = rc;
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
  if (op->prof)
    drv->event_record(drv, op->pev[1], st->drv);
  if (wait && (rc = drv->stream_sync(drv, st->drv)) != 0) {
    task_fail(t, rc, "the stream failed: %s", drv_last_error());
    goto out;
  }
  if (op->prof)
    op->prof_ok =
        drv->event_elapsed(drv, op->pev[0], op->pev[1], &op->prof_ms) == 0;
out:
  for (int i = 0; i < 2; i++)
    if (op->pev[i] != NULL)
      drv->event_destroy(drv, dev, op->pev[i]);
}

static const char *op_name(const op_t *op)
{
  static const char *const names[] = {
      "mem.write", "mem.read", "mem.copy",     "mem.memset",
      "sync",      "query",    "event.record", "kernel.launch"};
  return names[op->kind];
}

static void profile_add(session_t *s, const op_t *op)
{
  profile_t *p = s->profile;
  profile_rec_t *r;

  if (p == NULL || p->gen != op->prof_gen)
    return;
  if (p->count == p->cap) {
    if (p->cap == PROFILE_MAX_RECORDS) {
      p->dropped++;
      return;
    }
    uint32_t ncap = p->cap ? p->cap * 2 : 256;
    profile_rec_t *n = realloc(p->recs, ncap * sizeof(*n));
    if (n == NULL) {
      p->dropped++;
      return;
    }
    p->recs = n;
    p->cap = ncap;
  }
  r = &p->recs[p->count++];
  r->op = op_name(op);
  r->stream = op->stream_handle;
  r->bytes = op->n;
  r->start_ms = (double)(op->submit_ns - p->epoch_ns) / 1e6;
  r->end_ms = r->start_ms + op->prof_ms;
}

static void group_done(op_group_t *g, int status, const char *err)
{
  if (status != 0 && g->status == 0) {
    g->status = status;
    snprintf(g->err, sizeof(g->err), "%s", err);
  }
  if (--g->left > 0)
    return;
  if (g->status != 0)
    call_fail(g->call, g->status, "%s", g->err);
  else
    msgpack_pack_nil(call_result(g->call));
  call_finish(g->call);
  free(g);
}

static void op_done(task_t *t)
{
  op_t *op = (op_t *)t;
  call_t *c = op->call;

  if (t->status == HIPD_EDEVLOST)
    device_mark_lost(op->st->dev, t->err);

  if (c != NULL) {
    if (t->status != 0) {
      call_fail(c, t->status, "%s", t->err);
    } else {
      if (op->prof_ok)
        profile_add(c->s, op);
      switch (op->kind) {
      case OP_READ:
        if (op->shm != NULL) {
          msgpack_pack_nil(call_result(c));
          break;
        }
        call_result_bin(c, op->host, op->n);
        op->host = NULL;
        break;
      case OP_QUERY:
        msgpack_pack_object(call_result(c),
                            (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN,
                                             .via.boolean = op->idle != 0});
        break;
      default:
        msgpack_pack_nil(call_result(c));
        break;
      }
    }
    call_finish(c);
  }
  if (op->group != NULL)
    group_done(op->group, t->status, t->err);
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
  stream_unref(op->st);
  if (op->shm != NULL)
    shm_unref(op->shm);
  else if (op->host_block != NULL)
    bufpool_put(op->host_block);
  else
    bufpool_put(op->host);
  free(op);
}

void op_submit(op_t *op)
{
  op->t.run = op_run;
  op->t.done = op_done;
  if (op->kind == OP_RECORD) {
    /* The mark task that completes the event holds its own reference. */
    op->mark = obj_task(no_run, event_mark_done, op->ev);
    op->mark->seq = ++op->ev->seq;
    task_expect(&op->mark->t);
    event_ref(op->ev);
    op->ev->state = EVENT_PENDING;
    op->ev->status = 0;
  }
  exec_submit(op->st->ex, &op->t);
}

op_group_t *op_group_new(call_t *c, uint32_t n)
{
  op_group_t *g = calloc(1, sizeof(*g));

  if (g == NULL)
    return NULL;
  g->call = c;
  g->left = n;
  return g;
}

/* ---------------------------------------------------------- session end */

static void release_event_cb(void *ctx, uint64_t h, void *obj)
{
  session_t *s = ctx;

  handles_remove(&s->handles, h, HANDLE_EVENT, NULL);
  event_unref(obj);
}

static void release_buffer_cb(void *ctx, uint64_t h, void *obj)
{
  session_t *s = ctx;

  handles_remove(&s->handles, h, HANDLE_BUFFER, NULL);
  s->mem_used -= buffer_quota_bytes(obj);
  buffer_unref(obj);
}

static void release_shm_cb(void *ctx, uint64_t h, void *obj)
{
  session_t *s = ctx;

  handles_remove(&s->handles, h, HANDLE_SHM, NULL);
  s->mem_used -= ((shm_t *)obj)->size;
  shm_unref(obj);
}

static void release_stream_cb(void *ctx, uint64_t h, void *obj)
{
  session_t *s = ctx;

  handles_remove(&s->handles, h, HANDLE_STREAM, NULL);
  stream_unref(obj);
}

static void release_kernel_cb(void *ctx, uint64_t h, void *obj)
{
  session_t *s = ctx;

  handles_remove(&s->handles, h, HANDLE_KERNEL, NULL);
  kernel_unref(obj);
}

void objects_release_session(session_t *s)
{
  /* Events and buffers first, then streams: queued work holds its own
   * references, so each driver object goes after the work that uses it. */
  handles_foreach(&s->handles, HANDLE_KERNEL, release_kernel_cb, s);
  handles_foreach(&s->handles, HANDLE_EVENT, release_event_cb, s);
  handles_foreach(&s->handles, HANDLE_BUFFER, release_buffer_cb, s);
  handles_foreach(&s->handles, HANDLE_SHM, release_shm_cb, s);
  handles_foreach(&s->handles, HANDLE_STREAM, release_stream_cb, s);
  free(s->defaults);
  s->defaults = NULL;
  profile_disable(s);
}

int profile_enable(session_t *s)
{
  if (s->profile != NULL)
    return 0;
  s->profile = calloc(1, sizeof(*s->profile));
  if (s->profile == NULL)
    return HIPD_ENOMEM;
  s->profile->epoch_ns = now_ns();
  s->profile->gen = ++s->profile_gen;
  return 0;
}

void profile_disable(session_t *s)
{
  if (s->profile == NULL)
    return;
  free(s->profile->recs);
  free(s->profile);
  s->profile = NULL;
}
