/* SPDX-License-Identifier: MIT */
/* daemon/methods/common.c: helpers shared by the method families: the
 * object-state checks that follow dispatch's param checks (a lost device,
 * an object of a reset context, a range against a buffer's size). */
#include "config.h"

#include <stdlib.h>

#include "methods.h"
#include "stats.h"
#include "util/clock.h"
#include "util/zalloc.h"

int meth_default_stream(call_t *c, device_t *dev, stream_t **st, uint64_t *h)
{
  hipd_err_t err;
  int rc = res_default_stream(c->s, dev, st, h, &err);

  if (rc == HIPD_EDEVLOST && dev->lost)
    return meth_check_alive(c, "stream", dev, 0);
  if (rc != 0)
    return call_fail(c, rc, "%s", err.msg);
  return 0;
}

int meth_check_alive(call_t *c, const char *what, const device_t *dev,
                     uint32_t epoch)
{
  if (dev->lost)
    return call_fail(c, HIPD_EDEVLOST,
                     dev->unrecoverable
                         ? "device %d lost its context after a kernel fault "
                           "and cannot be reset in this process: it is "
                           "unavailable until hipd restarts"
                         : "device %d lost its context after a kernel fault "
                           "and is being reset; retry shortly",
                     dev->id);
  if (epoch != device_epoch(dev))
    return call_fail(c, HIPD_EDEVLOST,
                     "this %s was lost when device %d's context was reset "
                     "after a kernel fault: free it and make a new one",
                     what, dev->id);
  return 0;
}

int meth_arg_stream(call_t *c, const arg_t *a, stream_t **st, uint64_t *h)
{
  *st = a->obj;
  *h = a->u;
  return meth_check_alive(c, "stream", (*st)->dev, (*st)->epoch);
}

int meth_arg_buffer(call_t *c, const arg_t *a, buffer_t **b)
{
  *b = a->obj;
  return meth_check_alive(c, "buffer", (*b)->dev, (*b)->epoch);
}

unsigned meth_arg_pos(const call_t *c, const arg_t *a)
{
  return (unsigned)(a - c->args);
}

int meth_check_range(call_t *c, const char *what, const buffer_t *b,
                     uint64_t off, uint64_t len)
{
  if (off > b->mem.size || len > b->mem.size - off)
    return call_fail(c, HIPD_ERANGE,
                     "%s: offset %llu + %llu bytes exceeds buffer of %zu "
                     "bytes",
                     what, (unsigned long long)off, (unsigned long long)len,
                     b->mem.size);
  return 0;
}

meth_pending_t *meth_pending_of(call_t *d)
{
  meth_pending_t *p = util_zalloc(sizeof(*p));

  if (p == NULL) {
    call_fail(d, HIPD_ENOMEM, "out of memory");
    call_finish(d);
    return NULL;
  }
  p->call = d;
  return p;
}

meth_pending_t *meth_pending_new(call_t *c)
{
  call_t *d = call_defer(c);

  return d != NULL ? meth_pending_of(d) : NULL;
}

void meth_pending_finish(meth_pending_t *p)
{
  call_finish(p->call);
  free(p);
}

void meth_pending_fail(meth_pending_t *p, int code, const char *msg)
{
  call_fail(p->call, code, "%s", msg);
  meth_pending_finish(p);
}

/* An op completed: answer its call (recording its timing first). */
static void op_answered(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;
  call_t *c = p->call;

  if (r->status != 0) {
    call_fail(c, r->status, "%s", r->err);
  } else {
    if (r->timed && p->op != NULL)
      profile_record(c->s->profile, p->period, p->op, p->handle, p->bytes,
                     r->start_ns, r->device_ms);
    switch (p->reply) {
    case METH_REPLY_BYTES:
      call_result_bin(c, r->bytes, r->len);
      r->bytes = NULL;
      break;
    case METH_REPLY_IDLE:
      msgpack_pack_object(call_result(c),
                          (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN,
                                           .via.boolean = r->idle != 0});
      break;
    default:
      msgpack_pack_nil(call_result(c));
      break;
    }
  }
  stats_op(c->s, p->kind, p->dev, r->status, p->bytes, p->t0_ns, p->end_ns,
           p->waited);
  meth_pending_finish(p);
}

/* On the op's executor thread: answer nil now (objects.h, call.h). */
static void op_answer_early(void *ctx)
{
  meth_pending_t *p = ctx;

  if (call_early_nil(p->call))
    p->end_ns = util_now_ns();
}

op_t *meth_op_prepare_deferred(call_t *d, op_kind_t kind, stream_t *st,
                               uint64_t sh)
{
  meth_pending_t *p = meth_pending_of(d);
  profile_t *prof = d->s->profile;
  op_t *op;

  if (p == NULL)
    return NULL;
  op = op_new(kind, st, (obj_done_t){op_answered, p});
  if (op == NULL) {
    meth_pending_fail(p, HIPD_ENOMEM, "out of memory");
    return NULL;
  }
  p->handle = sh;
  p->kind = (uint8_t)kind;
  p->dev = st->dev->id;
  if (prof != NULL && kind != OP_SYNC && kind != OP_QUERY &&
      kind != OP_RECORD) {
    op->timed = 1;
    p->op = op_name(kind);
    p->period = profile_period(prof);
  }
  return op;
}

op_t *meth_op_prepare(call_t *c, op_kind_t kind, stream_t *st, uint64_t sh)
{
  call_t *d = call_defer(c);

  return d != NULL ? meth_op_prepare_deferred(d, kind, st, sh) : NULL;
}

void meth_op_start(op_t *op)
{
  meth_pending_t *p = op->done.ctx;
  int rc;

  p->bytes = op->n;
  /* What the op's completion shows of the device's work (stats.h): a
   * waiting op's includes it; the CPU device's launch runs to its end. */
  p->waited = op->wait || op->kind == OP_READ || op->kind == OP_SYNC ||
              (op->kind == OP_LAUNCH && op->st->dev->caps.is_cpu);
  p->t0_ns = util_now_ns();
  if (op->kind == OP_READ && op->shm == NULL)
    p->reply = METH_REPLY_BYTES;
  else if (op->kind == OP_QUERY)
    p->reply = METH_REPLY_IDLE;
  /* A launch waited for or a stream's synchronisation, from a ring, not
   * profiled: the thread that sees the device finish answers it (nil), so
   * that its client's wake-up does not wait for the loop's. Not a launch
   * nobody waits for: its answer says only that it was submitted, and a
   * client streaming launches has its answers packed by the loop while
   * the stream's thread launches (on an H100, answering each from that
   * thread cut launch_throughput from 349k/s to 237k/s). */
  if (((op->kind == OP_LAUNCH && op->wait) || op->kind == OP_SYNC) &&
      !op->timed && call_early_enable(p->call))
    op->early = (obj_early_t){op_answer_early, p};
  if ((rc = op_submit(op)) != 0)
    meth_pending_fail(p, rc, "out of memory");
}

int meth_compile_answer(call_t *c, const kernel_result_t *r, pack_map_t *m)
{
  static const char *const sources[] = {"miss", "memory", "disk", "waited"};
  session_t *s = c->s;
  char hex[2 * CACHE_KEY_SIZE + 1];
  uint64_t h = 0;
  int rc;

  if (r->status != 0)
    return call_fail(c, r->status, "%s", r->error);
  if (r->kernel != NULL) {
    rc = res_kernel_add(s, r->kernel, &h);
    if (rc != 0)
      return call_fail(c, rc, "cannot keep the kernel: %s", hipd_strerror(rc));
  }
  cache_key_hex(&r->key, hex);
  pack_map_begin(m, call_result(c));
  if (r->kernel != NULL)
    pack_kv_u64(m, "kernel", h);
  else
    pack_kv_nil(m, "kernel");
  pack_kv_str(m, "cache", sources[r->cache]);
  pack_kv_str(m, "key", hex);
  pack_kv_u64(m, "bytes", r->bytes);
  pack_kv_f64(m, "compile_ms", r->compile_ms);
  {
    pack_map_t t;

    pack_map_begin(&t, pack_key(m, "timing"));
    pack_kv_f64(&t, "wait_ms", r->wait_ms);
    pack_kv_f64(&t, "compiler_ms", r->compiler_ms);
    pack_kv_f64(&t, "helper_ms", r->helper_ms);
    pack_kv_f64(&t, "helper_cpu_ms", r->helper_cpu_ms);
    pack_kv_f64(&t, "disk_ms", r->disk_ms);
    pack_kv_f64(&t, "load_ms", r->load_ms);
    pack_map_end(&t);
  }
  return 0;
}

void meth_pack_strv(msgpack_packer *pk, const char *const *v)
{
  uint32_t n = 0;

  while (v[n] != NULL)
    n++;
  msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < n; i++)
    proto_pack_cstr(pk, v[i]);
}
