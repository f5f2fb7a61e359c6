/* daemon/methods/common.c: argument helpers shared by the method families. */
#include "config.h"

#include <stdlib.h>

#include "methods.h"

int arg_device(call_t *c, unsigned i, device_t **dev)
{
  uint64_t id = (uint64_t)c->s->device;
  int rc = call_arg_uint(c, i, "device", UINT32_MAX, &id);

  if (rc != 0)
    return rc;
  *dev = device_get((int)id);
  if (*dev == NULL)
    return call_fail(c, HIPD_ENODEV, "no device %llu (this daemon serves %d)",
                     (unsigned long long)id, devices_count());
  if ((*dev)->lost)
    return check_alive(c, "device", *dev, 0);
  return 0;
}

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
  int rc = call_arg_handle(c, i, "stream", HANDLE_STREAM, h, (void **)st);

  return rc != 0 ? rc : check_alive(c, "stream", (*st)->dev, (*st)->epoch);
}

int arg_buffer(call_t *c, unsigned i, const char *what, buffer_t **b)
{
  uint64_t h;
  int rc = call_arg_handle(c, i, what, HANDLE_BUFFER, &h, (void **)b);

  return rc != 0 ? rc : check_alive(c, "buffer", (*b)->dev, (*b)->epoch);
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
