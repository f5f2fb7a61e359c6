/* SPDX-License-Identifier: MIT */
/* daemon/resources.c: what a session owns: its objects under handles, its
 * memory quota, its default streams, and their release at close.
 *
 * Called by methods/ and by session.c's teardown; calls the object layer
 * (objects/), the handle table and profile.c. It never answers a call or
 * touches the connection: errors come back as a code and a message
 * (resources.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "device.h"
#include "grants.h"
#include "kernels/kernels.h"
#include "objects/objects.h"
#include "profile.h"
#include "resources.h"
#include "session.h"
#include "stats.h"
#include "tenants.h"

/* ------------------------------------------------------------------ quota */

int res_mem_reserve(session_t *s, const device_t *dev, uint64_t bytes,
                    hipd_err_t *err)
{
  uint64_t quota = s->d->cfg.mem_quota, used = s->res.mem_used;
  tenant_t *t = s->tenant;

  err_clear(err);
  if (quota != 0 && bytes > quota - (used < quota ? used : quota)) {
    return err_set(err, HIPD_EQUOTA,
                   "%llu bytes would exceed this session's quota of %llu bytes "
                   "(%llu in use)",
                   (unsigned long long)bytes, (unsigned long long)quota,
                   (unsigned long long)used);
  }
  /* The sessions under its grant together (grants.h). */
  if (grants_mem_reserve(s, bytes, err) != 0)
    return err->code;
  /* All the uid's sessions together (--tenant-mem-quota), in every worker
   * of the uid (tenants.h): reserved first, then checked, so that two
   * workers reserving at once cannot both pass. */
  quota = s->d->cfg.tenant_mem_quota;
  if (t != NULL) {
    uint64_t total = tenant_count_add(t, TC_MEM, (int64_t)bytes);
    if (quota != 0 && total > quota) {
      tenant_count_add(t, TC_MEM, -(int64_t)bytes);
      grants_mem_release(s, bytes);
      return err_set(
          err, HIPD_EQUOTA,
          "%llu bytes would exceed tenant uid %u's quota of %llu bytes "
          "(%llu in use by its %llu session%s)",
          (unsigned long long)bytes, (unsigned)t->uid,
          (unsigned long long)quota, (unsigned long long)(total - bytes),
          (unsigned long long)tenant_count(t, TC_SESSIONS),
          tenant_count(t, TC_SESSIONS) == 1 ? "" : "s");
    }
    /* And of one device, at most --tenant-device-share of its memory. */
    if (dev != NULL && dev->id >= 0 && dev->id < TENANT_DEVICES) {
      uint32_t share = s->d->cfg.tenant_device_share;
      uint64_t cap = dev->caps.total_global_mem / 100 * share;
      uint64_t on = tenant_count_add(t, TC_DEV0 + dev->id, (int64_t)bytes);
      if (share != 0 && on > cap) {
        tenant_count_add(t, TC_DEV0 + dev->id, -(int64_t)bytes);
        tenant_count_add(t, TC_MEM, -(int64_t)bytes);
        grants_mem_release(s, bytes);
        return err_set(err, HIPD_EQUOTA,
                       "%llu bytes would bring tenant uid %u's buffers on "
                       "device %d to %llu bytes, more than its share of "
                       "%u%% of the device's %llu (--tenant-device-share)",
                       (unsigned long long)bytes, (unsigned)t->uid, dev->id,
                       (unsigned long long)on, share,
                       (unsigned long long)dev->caps.total_global_mem);
      }
    }
  }
  s->res.mem_used += bytes;
  return 0;
}

void res_mem_release(session_t *s, int dev, uint64_t bytes)
{
  s->res.mem_used -= bytes;
  grants_mem_release(s, bytes);
  if (s->tenant == NULL)
    return;
  tenant_count_add(s->tenant, TC_MEM, -(int64_t)bytes);
  if (dev >= 0 && dev < TENANT_DEVICES)
    tenant_count_add(s->tenant, TC_DEV0 + dev, -(int64_t)bytes);
}

/* ---------------------------------------------------------------- handles */

/* Every handle of a session is added and removed here, so that its
 * tenant's count (--tenant-max-handles) stays the sum of its sessions'. */
static int handle_add(session_t *s, handle_type_t type, void *obj, uint64_t *h)
{
  tenant_t *t = s->tenant;
  uint32_t max = s->d->cfg.tenant_max_handles;
  int rc;

  if (t != NULL && tenant_count_add(t, TC_HANDLES, 1) > max && max != 0) {
    tenant_count_add(t, TC_HANDLES, -1);
    return HIPD_ETOOMANY;
  }
  rc = handles_add(&s->handles, type, obj, h);
  if (rc != 0 && t != NULL)
    tenant_count_add(t, TC_HANDLES, -1);
  return rc;
}

static int handle_remove(session_t *s, uint64_t h, handle_type_t type,
                         void **obj)
{
  int rc = handles_remove(&s->handles, h, type, obj);

  if (rc == 0 && s->tenant != NULL)
    tenant_count_add(s->tenant, TC_HANDLES, -1);
  return rc;
}

static int keep(session_t *s, handle_type_t type, void *obj, uint64_t *h)
{
  return s->closing ? HIPD_ECANCELED : handle_add(s, type, obj, h);
}

int res_buffer_add(session_t *s, buffer_t *b, uint64_t reserved, uint64_t *h)
{
  int rc = keep(s, HANDLE_BUFFER, b, h);

  if (rc != 0) {
    res_mem_release(s, b->dev->id, reserved);
    buffer_unref(b); /* frees on the service worker */
  }
  return rc;
}

void res_buffer_free(session_t *s, uint64_t h, buffer_t *b)
{
  handle_remove(s, h, HANDLE_BUFFER, NULL);
  res_mem_release(s, b->dev->id, buffer_quota_bytes(b));
  buffer_unref(b);
}

int res_shm_add(session_t *s, shm_t *m, uint64_t *h)
{
  int rc = keep(s, HANDLE_SHM, m, h);

  if (rc != 0) {
    res_mem_release(s, -1, m->size);
    shm_unref(m);
  }
  return rc;
}

void res_shm_free(session_t *s, uint64_t h, shm_t *m)
{
  handle_remove(s, h, HANDLE_SHM, NULL);
  res_mem_release(s, -1, m->size);
  shm_unref(m);
}

int res_kernel_add(session_t *s, kernel_t *k, uint64_t *h)
{
  int rc = keep(s, HANDLE_KERNEL, k, h);

  if (rc != 0)
    kernel_unref(k);
  return rc;
}

void res_kernel_free(session_t *s, uint64_t h, kernel_t *k)
{
  handle_remove(s, h, HANDLE_KERNEL, NULL);
  kernel_unref(k);
}

int res_stream_add(session_t *s, stream_t *st, uint64_t *h)
{
  int rc = handle_add(s, HANDLE_STREAM, st, h);

  if (rc == 0 && s->tenant != NULL)
    tenant_count_add(s->tenant, TC_STREAMS, 1);
  return rc;
}

int res_event_add(session_t *s, event_t *ev, uint64_t *h)
{
  return handle_add(s, HANDLE_EVENT, ev, h);
}

void res_stream_free(session_t *s, uint64_t h, stream_t *st)
{
  if (!res_stream_is_default(s, st) && s->tenant != NULL)
    tenant_count_add(s->tenant, TC_STREAMS, -1);
  handle_remove(s, h, HANDLE_STREAM, NULL);
  /* Queued work finishes first; the driver stream goes after it. */
  stream_unref(st);
}

void res_event_free(session_t *s, uint64_t h, event_t *ev)
{
  handle_remove(s, h, HANDLE_EVENT, NULL);
  event_unref(ev);
}

void res_stream_forget(session_t *s, uint64_t h)
{
  void *obj;

  if (!s->closing && handle_remove(s, h, HANDLE_STREAM, &obj) == 0) {
    if (s->tenant != NULL)
      tenant_count_add(s->tenant, TC_STREAMS, -1);
    stream_unref(obj);
  }
}

void res_event_forget(session_t *s, uint64_t h)
{
  void *obj;

  if (!s->closing && handle_remove(s, h, HANDLE_EVENT, &obj) == 0)
    event_unref(obj);
}

/* ---------------------------------------------------------------- streams */

uint32_t res_streams_created(const session_t *s)
{
  return s->handles.count[HANDLE_STREAM] - s->res.ndefaults;
}

int res_stream_admit(const session_t *s, hipd_err_t *err)
{
  const tenant_t *t = s->tenant;
  uint32_t max = s->d->cfg.tenant_max_streams;

  err_clear(err);
  if (res_streams_created(s) >= s->d->cfg.max_streams) {
    return err_set(err, HIPD_ETOOMANY,
                   "this session already has %u streams (the limit)",
                   res_streams_created(s));
  }
  if (t != NULL && max != 0 && tenant_count(t, TC_STREAMS) >= max) {
    return err_set(err, HIPD_ETOOMANY,
                   "tenant uid %u already has %llu streams in its %llu "
                   "session%s (the tenant limit)",
                   (unsigned)t->uid,
                   (unsigned long long)tenant_count(t, TC_STREAMS),
                   (unsigned long long)tenant_count(t, TC_SESSIONS),
                   tenant_count(t, TC_SESSIONS) == 1 ? "" : "s");
  }
  return 0;
}

int res_default_stream(session_t *s, device_t *dev, stream_t **st, uint64_t *h,
                       hipd_err_t *err)
{
  res_t *r = &s->res;
  struct res_default *ds;
  int rc;

  err_clear(err);
  if (r->defaults == NULL) {
    r->defaults = calloc((size_t)devices_count(), sizeof(*r->defaults));
    if (r->defaults == NULL) {
      return err_set(err, HIPD_ENOMEM, "out of memory");
    }
  }
  ds = &r->defaults[dev->id];
  if (dev->lost) {
    return err_set(err, HIPD_EDEVLOST, "%s", "");
  }
  if (ds->st != NULL && ds->st->epoch != device_epoch(dev)) {
    /* The default stream went with a reset context: make a new one. */
    handle_remove(s, ds->handle, HANDLE_STREAM, NULL);
    stream_unref(ds->st);
    ds->st = NULL;
    r->ndefaults--;
  }
  if (ds->st == NULL) {
    stream_t *n = stream_new(dev);
    if (n == NULL) {
      return err_set(err, HIPD_ENOMEM, "cannot start a stream worker");
    }
    rc = handle_add(s, HANDLE_STREAM, n, &ds->handle);
    if (rc != 0) {
      stream_unref(n);
      return err_set(err, rc, "cannot add the default stream: %s",
                     hipd_strerror(rc));
    }
    stream_start(n, (obj_done_t){NULL, NULL});
    ds->st = n;
    r->ndefaults++;
  }
  *st = ds->st;
  *h = ds->handle;
  return 0;
}

int res_stream_is_default(const session_t *s, const stream_t *st)
{
  return s->res.defaults != NULL && s->res.defaults[st->dev->id].st == st;
}

/* ----------------------------------------------------------------- counts */

uint32_t res_count(const session_t *s, handle_type_t type)
{
  return type == HANDLE_ANY ? s->handles.used : s->handles.count[type];
}

/* ---------------------------------------------------------------- release */

static void release_event_cb(void *ctx, uint64_t h, void *obj)
{
  res_event_free(ctx, h, obj);
}

static void release_buffer_cb(void *ctx, uint64_t h, void *obj)
{
  res_buffer_free(ctx, h, obj);
}

static void release_shm_cb(void *ctx, uint64_t h, void *obj)
{
  res_shm_free(ctx, h, obj);
}

static void release_stream_cb(void *ctx, uint64_t h, void *obj)
{
  res_stream_free(ctx, h, obj);
}

static void release_kernel_cb(void *ctx, uint64_t h, void *obj)
{
  res_kernel_free(ctx, h, obj);
}

void res_release_all(session_t *s)
{
  stats_session_end(s);
  /* Events and buffers first, then streams: queued work holds its own
   * references, so each driver object goes after the work that uses it. */
  handles_foreach(&s->handles, HANDLE_KERNEL, release_kernel_cb, s);
  handles_foreach(&s->handles, HANDLE_EVENT, release_event_cb, s);
  handles_foreach(&s->handles, HANDLE_BUFFER, release_buffer_cb, s);
  handles_foreach(&s->handles, HANDLE_SHM, release_shm_cb, s);
  handles_foreach(&s->handles, HANDLE_STREAM, release_stream_cb, s);
  free(s->res.defaults);
  s->res.defaults = NULL;
  s->res.ndefaults = 0;
  profile_disable(&s->profile);
  /* Its reservations still in flight go back to the tenant when they
   * complete (the record lives as long as the session's memory). */
  tenant_session_closed(s);
  grants_session_end(s);
}
