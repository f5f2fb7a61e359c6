/* daemon/methods/common.c: helpers shared by the method families: the
 * object-state checks that follow dispatch's param checks (a lost device,
 * an object of a reset context, a range against a buffer's size). */
#include "config.h"

#include <stdlib.h>

#include "methods.h"

int default_stream(call_t *c, device_t *dev, stream_t **st, uint64_t *h)
{
  session_t *s = c->s;
  struct default_stream *ds;
  int rc;

  if (s->defaults == NULL) {
    s->defaults = calloc((size_t)devices_count(), sizeof(*s->defaults));
    if (s->defaults == NULL)
      return call_fail(c, HIPD_ENOMEM, "out of memory");
  }
  ds = &s->defaults[dev->id];
  if (dev->lost)
    return check_alive(c, "stream", dev, 0);
  if (ds->st != NULL && ds->st->epoch != device_epoch(dev)) {
    /* The default stream went with a reset context: make a new one. */
    handles_remove(&s->handles, ds->handle, HANDLE_STREAM, NULL);
    stream_unref(ds->st);
    ds->st = NULL;
    s->ndefaults--;
  }
  if (ds->st == NULL) {
    stream_t *n = stream_new(dev);
    if (n == NULL)
      return call_fail(c, HIPD_ENOMEM, "cannot start a stream worker");
    n->is_default = 1;
    rc = handles_add(&s->handles, HANDLE_STREAM, n, &ds->handle);
    if (rc != 0) {
      stream_unref(n);
      return call_fail(c, rc, "cannot add the default stream: %s",
                       hipd_strerror(rc));
    }
    stream_start(n, NULL, 0);
    ds->st = n;
    s->ndefaults++;
  }
  *st = ds->st;
  *h = ds->handle;
  return 0;
}

int check_alive(call_t *c, const char *what, const device_t *dev,
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

int arg_stream(call_t *c, unsigned i, stream_t **st, uint64_t *h)
{
  *st = c->args[i].obj;
  *h = c->args[i].u;
  return check_alive(c, "stream", (*st)->dev, (*st)->epoch);
}

int arg_buffer(call_t *c, unsigned i, buffer_t **b)
{
  *b = c->args[i].obj;
  return check_alive(c, "buffer", (*b)->dev, (*b)->epoch);
}

int check_range(call_t *c, const char *what, const buffer_t *b, uint64_t off,
                uint64_t len)
{
  if (off > b->mem.size || len > b->mem.size - off)
    return call_fail(c, HIPD_ERANGE,
                     "%s: offset %llu + %llu bytes exceeds buffer of %zu "
                     "bytes",
                     what, (unsigned long long)off, (unsigned long long)len,
                     b->mem.size);
  return 0;
}

op_t *op_prepare(call_t *c, op_kind_t kind, stream_t *st, uint64_t sh)
{
  call_t *d = call_defer(c);
  op_t *op;

  if (d == NULL)
    return NULL;
  op = op_new(kind, st, sh, d);
  if (op == NULL) {
    call_fail(d, HIPD_ENOMEM, "out of memory");
    call_finish(d);
    return NULL;
  }
  return op;
}

msgpack_packer *compile_answer(call_t *c, const kernel_result_t *r,
                               uint32_t extra)
{
  static const char *const sources[] = {"miss", "memory", "disk", "waited"};
  session_t *s = c->s;
  char hex[2 * CACHE_KEY_SIZE + 1];
  msgpack_packer *pk;
  uint64_t h = 0;
  int rc;

  if (r->status != 0) {
    call_fail(c, r->status, "%s", r->error);
    return NULL;
  }
  if (r->kernel != NULL) {
    rc = s->closing ? HIPD_ECANCELED
                    : handles_add(&s->handles, HANDLE_KERNEL, r->kernel, &h);
    if (rc != 0) {
      kernel_unref(r->kernel);
      call_fail(c, rc, "cannot keep the kernel: %s", hipd_strerror(rc));
      return NULL;
    }
  }
  cache_key_hex(&r->key, hex);
  pk = call_result(c);
  msgpack_pack_map(pk, 5 + extra);
  proto_pack_cstr(pk, "kernel");
  if (r->kernel != NULL)
    msgpack_pack_uint64(pk, h);
  else
    msgpack_pack_nil(pk);
  proto_pack_cstr(pk, "cache");
  proto_pack_cstr(pk, sources[r->cache]);
  proto_pack_cstr(pk, "key");
  proto_pack_cstr(pk, hex);
  proto_pack_cstr(pk, "bytes");
  msgpack_pack_uint64(pk, r->bytes);
  proto_pack_cstr(pk, "compile_ms");
  msgpack_pack_double(pk, r->compile_ms);
  return pk;
}
