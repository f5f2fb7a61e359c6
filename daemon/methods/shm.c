/* SPDX-License-Identifier: MIT */
/* daemon/methods/shm.c: shared host buffers: registering a client's memfd,
 * transfers between it and device memory, zero-copy buffers on it. */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "methods.h"
#include "session.h"

typedef struct {
  task_t t;
  call_t *call;
  shm_t *m;
} shm_reg_t;

static void register_done(task_t *t)
{
  shm_reg_t *r = (shm_reg_t *)t;
  call_t *c = r->call;
  session_t *s = c->s;
  pack_map_t m;
  uint64_t h;
  int rc;

  rc = res_shm_add(s, r->m, &h);
  if (rc != 0) {
    call_fail(c, rc, "cannot keep the shared buffer: %s", hipd_strerror(rc));
  } else {
    pack_map_begin(&m, call_result(c));
    pack_kv_u64(&m, "handle", h);
    pack_kv_u64(&m, "size", r->m->size);
    pack_kv_bool(&m, "registered", r->m->reg != NULL);
    pack_map_end(&m);
  }
  call_finish(c);
  free(r);
}

/* shm.create [size] -> {handle, size, registered}: the memfd came with
 * this request's bytes (SCM_RIGHTS). */
int m_shm_create(call_t *c, const shm_create_args_t *a)
{
  session_t *s = c->s;
  uint64_t size = a->size.u;
  /* Claimed first, so that a bad request cannot leave it to the next. */
  int fd = session_take_fd(s);
  hipd_err_t err;
  shm_reg_t *r;
  shm_t *m;
  int rc;

  if (fd < 0)
    return call_fail(c, HIPD_EINVAL,
                     "no file descriptor came with the request "
                     "(send the memfd with SCM_RIGHTS on its bytes)");
  if ((rc = res_mem_reserve(s, NULL, size, &err)) != 0) {
    close(fd);
    return call_fail(c, rc, "%s", err.msg);
  }
  if ((rc = shm_open_fd(fd, size, s->peer_uid, &m, &err)) != 0) {
    res_mem_release(s, -1, size);
    return call_fail(c, rc, "%s", err.msg);
  }
  if ((r = calloc(1, sizeof(*r))) == NULL ||
      (r->call = call_defer(c)) == NULL) {
    free(r);
    shm_unref(m);
    res_mem_release(s, -1, size);
    return r == NULL ? call_fail(c, HIPD_ENOMEM, "out of memory") : HIPD_ENOMEM;
  }
  r->m = m; /* of size bytes, reserved above */
  shm_register(m, &r->t, register_done);
  return 0;
}

/* shm.free [shm]: the handle goes now; the mapping after the transfers and
 * zero-copy buffers that use it. */
int m_shm_free(call_t *c, const shm_args_t *a)
{
  shm_t *m = a->shm.obj;
  uint64_t h = a->shm.u;

  res_shm_free(c->s, h, m);
  msgpack_pack_nil(call_result(c));
  return 0;
}

/* mem.{write,read}_shm[_async] [buffer, offset, shm, shm_offset, length,
 * stream]; @p stream NULL for the synchronous ones. */
static int xfer_common(call_t *c, int write, const mem_shm_args_t *a,
                       const arg_t *stream)
{
  const char *what = write ? "write" : "read";
  uint64_t off = a->offset.u, moff = a->shm_offset.u, len = a->length.u, sh;
  shm_t *m = a->shm.obj;
  buffer_t *b;
  stream_t *st;
  op_t *op;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->buffer, &b)) != 0 ||
      (rc = meth_check_range(c, what, b, off, len)) != 0)
    return rc;
  if (!shm_range_ok(m, moff, len))
    return call_fail(c, HIPD_ERANGE,
                     "%s: shm offset %llu + %llu bytes exceeds the shared "
                     "buffer of %zu bytes",
                     what, (unsigned long long)moff, (unsigned long long)len,
                     m->size);
  if (stream == NULL)
    rc = meth_default_stream(c, b->dev, &st, &sh);
  else if ((rc = meth_arg_stream(c, stream, &st, &sh)) == 0 &&
           st->dev != b->dev)
    rc = call_fail(c, HIPD_EINVAL,
                   "stream 0x%llx is on device %d; the buffer is on device %d",
                   (unsigned long long)sh, st->dev->id, b->dev->id);
  if (rc != 0)
    return rc;
  if ((op = meth_op_prepare(c, write ? OP_WRITE : OP_READ, st, sh)) == NULL)
    return HIPD_ENOMEM;
  op->shm = m;
  shm_ref(m);
  op->host = (char *)m->addr + moff;
  if (write) {
    op->dst = b;
    op->dst_off = off;
  } else {
    op->src = b;
    op->src_off = off;
  }
  buffer_ref(b);
  op->n = len;
  /* The op (and its reference on the mapping) ends only once the device
   * has finished with the shared bytes. */
  op->wait = 1;
  meth_op_start(op);
  return 0;
}

/* The synchronous view of an _async request's params. */
static mem_shm_args_t sync_view(const mem_shm_async_args_t *a)
{
  return (mem_shm_args_t){a->buffer, a->offset, a->shm, a->shm_offset,
                          a->length};
}

int m_mem_write_shm(call_t *c, const mem_shm_args_t *a)
{
  return xfer_common(c, 1, a, NULL);
}

int m_mem_write_shm_async(call_t *c, const mem_shm_async_args_t *a)
{
  const mem_shm_args_t s = sync_view(a);

  return xfer_common(c, 1, &s, &a->stream);
}

int m_mem_read_shm(call_t *c, const mem_shm_args_t *a)
{
  return xfer_common(c, 0, a, NULL);
}

int m_mem_read_shm_async(call_t *c, const mem_shm_async_args_t *a)
{
  const mem_shm_args_t s = sync_view(a);

  return xfer_common(c, 0, &s, &a->stream);
}

/* The zero-copy buffer was made, or not: keep it under a handle. */
static void zero_copy_made(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;
  call_t *c = p->call;
  uint64_t h;
  int rc;

  if (r->status != 0)
    call_fail(c, r->status, "%s", r->err);
  else if ((rc = res_buffer_add(c->s, r->buffer, 0, &h)) != 0)
    call_fail(c, rc, "cannot keep the buffer: %s", hipd_strerror(rc));
  else
    msgpack_pack_uint64(call_result(c), h);
  meth_pending_finish(p);
}

/* mem.alloc_zero_copy [shm, device?] -> buffer handle */
int m_mem_alloc_zero_copy(call_t *c, const mem_alloc_zero_copy_args_t *a)
{
  shm_t *m = a->shm.obj;
  uint64_t mh = a->shm.u;
  device_t *dev = a->device.dev;
  meth_pending_t *p;
  int rc;

  if ((rc = meth_check_alive(c, "device", dev, device_epoch(dev))) != 0)
    return rc;
  if (dev->drv->host_map == NULL)
    return call_fail(c, HIPD_ENOTSUP,
                     "device %d (%s) cannot use host "
                     "memory directly",
                     dev->id, dev->drv->name);
  /* A GPU reaches host memory only through the registration. */
  if (dev->drv->host_register != NULL && m->reg == NULL)
    return call_fail(c, HIPD_ENOTSUP,
                     "shared buffer 0x%llx could not be "
                     "page-locked, so device %d cannot map it",
                     (unsigned long long)mh, dev->id);
  if ((p = meth_pending_new(c)) == NULL)
    return HIPD_ENOMEM;
  if (buffer_map_shm(dev, m, (obj_done_t){zero_copy_made, p}) != 0)
    meth_pending_fail(p, HIPD_ENOMEM, "out of memory");
  return 0;
}
