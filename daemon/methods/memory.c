/* SPDX-License-Identifier: MIT */
/* daemon/methods/memory.c: device memory: alloc, free, transfers, info. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "bufpool.h"
#include "methods.h"
#include "session.h"

/* Writes this large take the request's input buffer rather than a copy. */
#define WRITE_STEAL_MIN ((size_t)256 << 10)

/* Element kinds of mem.alloc and their sizes. */
static const struct {
  const char *name;
  size_t size;
} kinds[] = {
    {"int8", 1},
    {"uint8", 1},
    {"int16", 2},
    {"uint16", 2},
    {"float16", 2},
    {"int32", 4},
    {"uint32", 4},
    {"float32", 4},
    {"int64", 8},
    {"uint64", 8},
    {"float64", 8},
    {"byte", 1},
    /* Bigarray's other kinds: complex32/64 (re, im), char */
    {"complex32", 8},
    {"complex64", 16},
    {"char", 1},
};

/* A mem.alloc* buffer was made, or not: keep it under a handle. */
static void allocated(void *ctx, obj_result_t *r)
{
  meth_pending_t *p = ctx;
  call_t *c = p->call;
  uint64_t h;
  int rc;

  if (r->status != 0) {
    res_mem_release(c->s, p->dev, p->bytes);
    call_fail(c, r->status, "%s", r->err);
  } else if ((rc = res_buffer_add(c->s, r->buffer, p->bytes, &h)) != 0) {
    call_fail(c, rc, "cannot keep the allocation: %s", hipd_strerror(rc));
  } else {
    msgpack_pack_uint64(call_result(c), h);
  }
  meth_pending_finish(p);
}

/* Allocate @p count elements of @p elem_size bytes on @p dev. */
static int alloc_common(call_t *c, device_t *dev, uint64_t count,
                        uint64_t elem_size)
{
  hipd_err_t err;
  meth_pending_t *p;
  uint64_t size;
  int rc;

  if (count == 0 || elem_size == 0)
    return call_fail(c, HIPD_EINVAL, "cannot allocate 0 bytes");
  if (count > SIZE_MAX / elem_size)
    return call_fail(c, HIPD_ENOMEM, "%llu elements of %llu bytes overflow",
                     (unsigned long long)count, (unsigned long long)elem_size);
  size = count * elem_size;
  if (size > dev->caps.total_global_mem)
    return call_fail(c, HIPD_ENOMEM,
                     "%llu bytes exceed device %d's %llu bytes of memory",
                     (unsigned long long)size, dev->id,
                     (unsigned long long)dev->caps.total_global_mem);
  /* Reserved now so that concurrent allocations cannot pass the quota. */
  if ((rc = res_mem_reserve(c->s, dev, size, &err)) != 0)
    return call_fail(c, rc, "%s", err.msg);
  if ((p = meth_pending_new(c)) == NULL) {
    res_mem_release(c->s, dev->id, size);
    return HIPD_ENOMEM;
  }
  p->bytes = size;
  p->dev = dev->id;
  if (buffer_alloc(dev, (size_t)size, (size_t)elem_size,
                   (obj_done_t){allocated, p}) != 0) {
    res_mem_release(c->s, dev->id, size);
    meth_pending_fail(p, HIPD_ENOMEM, "out of memory");
  }
  return 0;
}

/* mem.alloc [count, kind, device?] -> buffer handle */
int m_mem_alloc(call_t *c, const mem_alloc_args_t *a)
{
  uint64_t count = a->count.u;
  const char *kind = a->kind.s;
  device_t *dev = a->device.dev;

  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (strcmp(kinds[i].name, kind) == 0)
      return alloc_common(c, dev, count, kinds[i].size);
  return call_fail(c, HIPD_EINVAL,
                   "unknown element kind '%s' (int8, uint8, int16, uint16, "
                   "float16, int32, uint32, float32, int64, uint64, float64, "
                   "byte, complex32, complex64, char)",
                   kind);
}

/* mem.alloc_custom [size, elem_size, device?] -> buffer handle: @p size
 * elements of @p elem_size bytes (a record type's size). */
int m_mem_alloc_custom(call_t *c, const mem_alloc_custom_args_t *a)
{
  return alloc_common(c, a->device.dev, a->size.u, a->elem_size.u);
}

/* mem.free [buffer]: the handle goes now; the memory after the work
 * queued on it. */
int m_mem_free(call_t *c, const buffer_args_t *a)
{
  buffer_t *b = a->buffer.obj;
  uint64_t h = a->buffer.u;

  res_buffer_free(c->s, h, b);
  msgpack_pack_nil(call_result(c));
  return 0;
}

/* The stream for a transfer on @p dev: param @p stream if given (it must
 * be on one of the devices involved), else (NULL) the session's default
 * stream of @p dev. */
static int op_stream(call_t *c, const arg_t *stream, device_t *dev,
                     device_t *other, stream_t **st, uint64_t *h)
{
  int rc;

  if (stream == NULL)
    return meth_default_stream(c, dev, st, h);
  if ((rc = meth_arg_stream(c, stream, st, h)) != 0)
    return rc;
  if ((*st)->dev != dev && (*st)->dev != other)
    return call_fail(c, HIPD_EINVAL,
                     "stream 0x%llx is on device %d; the buffer is on "
                     "device %d",
                     (unsigned long long)*h, (*st)->dev->id, dev->id);
  return 0;
}

/* mem.write[_async] [buffer, offset, data, stream]; @p stream NULL for
 * mem.write. */
static int write_common(call_t *c, const mem_write_args_t *a,
                        const arg_t *stream)
{
  buffer_t *b;
  stream_t *st;
  const char *data = a->data.s;
  size_t len = a->data.len;
  uint64_t off = a->offset.u, sh;
  op_t *op;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->buffer, &b)) != 0 ||
      (rc = meth_check_range(c, "write", b, off, len)) != 0 ||
      (rc = op_stream(c, stream, b->dev, NULL, &st, &sh)) != 0)
    return rc;
  /* The request's bytes go when the handler returns. A large write takes
   * the session's whole input buffer instead (no copy on the loop); a
   * small one stages a copy. */
  void *block = NULL, *copy;
  if (len >= WRITE_STEAL_MIN &&
      (block = session_steal_input(c->s, data, len)) != NULL) {
    copy = (void *)data;
  } else {
    copy = malloc(len ? len : 1);
    if (copy == NULL)
      return call_fail(c, HIPD_ENOMEM, "out of memory staging %zu bytes", len);
    memcpy(copy, data, len);
  }
  if ((op = meth_op_prepare(c, OP_WRITE, st, sh)) == NULL) {
    bufpool_put(block ? block : copy);
    return HIPD_ENOMEM;
  }
  op->host = copy;
  op->host_block = block;
  op->dst = b;
  buffer_ref(b);
  op->dst_off = off;
  op->n = len;
  op->wait = stream == NULL;
  meth_op_start(op);
  return 0;
}

int m_mem_write(call_t *c, const mem_write_args_t *a)
{
  return write_common(c, a, NULL);
}

int m_mem_write_async(call_t *c, const mem_write_async_args_t *a)
{
  const mem_write_args_t w = {a->buffer, a->offset, a->data};

  return write_common(c, &w, &a->stream);
}

/* mem.read[_async] [buffer, offset, length, stream] -> bin; @p stream
 * NULL for mem.read. */
static int read_common(call_t *c, const mem_read_args_t *a, const arg_t *stream)
{
  buffer_t *b;
  stream_t *st;
  uint64_t off = a->offset.u, len = a->length.u, sh;
  /* The reply must fit the daemon's message limit and the client
   * library's (the default), with room for its head. */
  size_t max = c->s->d->cfg.limits.max_message < PROTO_DEFAULT_MAX_MESSAGE
                   ? c->s->d->cfg.limits.max_message
                   : PROTO_DEFAULT_MAX_MESSAGE;
  max -= 64;
  op_t *op;
  void *host;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->buffer, &b)) != 0 ||
      (rc = meth_check_range(c, "read", b, off, len)) != 0)
    return rc;
  if (len > max)
    return call_fail(c, HIPD_EMSGSIZE,
                     "%llu bytes do not fit in one reply (max message %zu): "
                     "read in parts",
                     (unsigned long long)len, max);
  if ((rc = op_stream(c, stream, b->dev, NULL, &st, &sh)) != 0)
    return rc;
  host = bufpool_get(len);
  if (host == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory for %llu bytes",
                     (unsigned long long)len);
  if ((op = meth_op_prepare(c, OP_READ, st, sh)) == NULL) {
    bufpool_put(host);
    return HIPD_ENOMEM;
  }
  op->host = host;
  op->src = b;
  buffer_ref(b);
  op->src_off = off;
  op->n = len;
  meth_op_start(op);
  return 0;
}

int m_mem_read(call_t *c, const mem_read_args_t *a)
{
  return read_common(c, a, NULL);
}

int m_mem_read_async(call_t *c, const mem_read_async_args_t *a)
{
  const mem_read_args_t r = {a->buffer, a->offset, a->length};

  return read_common(c, &r, &a->stream);
}

/* mem.copy[_async] [dst, dst_offset, src, src_offset, length, stream];
 * @p stream NULL for mem.copy. */
static int copy_common(call_t *c, const mem_copy_args_t *a, const arg_t *stream)
{
  buffer_t *dst, *src;
  stream_t *st;
  uint64_t doff = a->dst_offset.u, soff = a->src_offset.u, len = a->length.u;
  uint64_t sh;
  op_t *op;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->dst, &dst)) != 0 ||
      (rc = meth_arg_buffer(c, &a->src, &src)) != 0 ||
      (rc = meth_check_range(c, "copy destination", dst, doff, len)) != 0 ||
      (rc = meth_check_range(c, "copy source", src, soff, len)) != 0 ||
      (rc = op_stream(c, stream, dst->dev, src->dev, &st, &sh)) != 0)
    return rc;
  if ((op = meth_op_prepare(c, OP_COPY, st, sh)) == NULL)
    return HIPD_ENOMEM;
  op->dst = dst;
  op->src = src;
  buffer_ref(dst);
  buffer_ref(src);
  op->dst_off = doff;
  op->src_off = soff;
  op->n = len;
  op->wait = stream == NULL;
  meth_op_start(op);
  return 0;
}

int m_mem_copy(call_t *c, const mem_copy_args_t *a)
{
  return copy_common(c, a, NULL);
}

int m_mem_copy_async(call_t *c, const mem_copy_async_args_t *a)
{
  const mem_copy_args_t m = {a->dst, a->dst_offset, a->src, a->src_offset,
                             a->length};

  return copy_common(c, &m, &a->stream);
}

/* mem.memset[_async] [buffer, offset, length, value, stream]; @p stream
 * NULL for mem.memset. */
static int memset_common(call_t *c, const mem_memset_args_t *a,
                         const arg_t *stream)
{
  buffer_t *b;
  stream_t *st;
  uint64_t off = a->offset.u, len = a->length.u, value = a->value.u, sh;
  op_t *op;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->buffer, &b)) != 0 ||
      (rc = meth_check_range(c, "memset", b, off, len)) != 0 ||
      (rc = op_stream(c, stream, b->dev, NULL, &st, &sh)) != 0)
    return rc;
  if ((op = meth_op_prepare(c, OP_MEMSET, st, sh)) == NULL)
    return HIPD_ENOMEM;
  op->dst = b;
  buffer_ref(b);
  op->dst_off = off;
  op->n = len;
  op->value = (int)value;
  op->wait = stream == NULL;
  meth_op_start(op);
  return 0;
}

int m_mem_memset(call_t *c, const mem_memset_args_t *a)
{
  return memset_common(c, a, NULL);
}

int m_mem_memset_async(call_t *c, const mem_memset_async_args_t *a)
{
  const mem_memset_args_t m = {a->buffer, a->offset, a->length, a->value};

  return memset_common(c, &m, &a->stream);
}

int m_mem_size(call_t *c, const buffer_args_t *a)
{
  buffer_t *b;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->buffer, &b)) != 0)
    return rc;
  msgpack_pack_uint64(call_result(c), b->mem.size);
  return 0;
}

/* mem.info [buffer] -> {size, elem_size, count, device, device_ptr,
 * zero_copy} */
int m_mem_info(call_t *c, const buffer_args_t *a)
{
  buffer_t *b;
  pack_map_t m;
  int rc;

  if ((rc = meth_arg_buffer(c, &a->buffer, &b)) != 0)
    return rc;
  pack_map_begin(&m, call_result(c));
  pack_kv_u64(&m, "size", b->mem.size);
  pack_kv_u64(&m, "elem_size", b->elem_size);
  pack_kv_u64(&m, "count", b->mem.size / b->elem_size);
  pack_kv_i64(&m, "device", b->dev->id);
  pack_kv_u64(&m, "device_ptr", (uint64_t)(uintptr_t)b->mem.ptr);
  pack_kv_bool(&m, "zero_copy", b->shm != NULL);
  pack_map_end(&m);
  return 0;
}
