/* SPDX-License-Identifier: MIT */
/* daemon/methods/device.c: backend identity and devices. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "codegen/ir.h"
#include "kernels/lang.h"
#include "methods.h"
#include "session.h"
#include "util/array.h"

/* The devices the session may use (the policy hides the others; ids do
 * not change). */
static int usable_count(const session_t *s)
{
  int n = 0;

  for (int i = 0; i < devices_count(); i++)
    n += session_may_use_device(s, i);
  return n;
}

/* The Backend API's identity: a JIT backend named "hip". */
int m_backend_info(call_t *c)
{
  int major = 0, minor = 0, patch = 0;
  msgpack_packer *pk;
  pack_map_t m;

  sscanf(PACKAGE_VERSION, "%d.%d.%d", &major, &minor, &patch);
  pack_map_begin(&m, call_result(c));
  pack_kv_str(&m, "name", "hip");
  pk = pack_key(&m, "version");
  msgpack_pack_array(pk, 3);
  msgpack_pack_int(pk, major);
  msgpack_pack_int(pk, minor);
  msgpack_pack_int(pk, patch);
  pack_kv_bool(&m, "available", usable_count(c->s) > 0);
  pack_kv_str(&m, "execution_model", "jit");
  meth_pack_strv(pack_key(&m, "drivers"), daemon_features());
  /* the Sarek IR versions kernel.generate_source and compile_ir read */
  pk = pack_key(&m, "ir_versions");
  msgpack_pack_array(pk, IR_VERSION_MAX - IR_VERSION_MIN + 1);
  for (int v = IR_VERSION_MIN; v <= IR_VERSION_MAX; v++)
    msgpack_pack_int(pk, v);
  /* the source languages every device takes (supported_source_langs) */
  meth_pack_strv(pack_key(&m, "source_langs"), lang_names);
  pack_map_end(&m);
  return 0;
}

int m_device_count(call_t *c)
{
  msgpack_pack_int(call_result(c), usable_count(c->s));
  return 0;
}

static void pack_kv_dims(pack_map_t *m, const char *key, const int *d)
{
  msgpack_packer *pk = pack_key(m, key);

  msgpack_pack_array(pk, 3);
  for (int i = 0; i < 3; i++)
    msgpack_pack_int(pk, d[i]);
}

/* The device's capabilities. */
static void pack_caps(msgpack_packer *pk, const dev_caps_t *k)
{
  pack_map_t m;

  pack_map_begin(&m, pk);
  pack_kv_i64(&m, "max_threads_per_block", k->max_threads_per_block);
  pack_kv_dims(&m, "max_block_dims", k->max_block_dims);
  pack_kv_dims(&m, "max_grid_dims", k->max_grid_dims);
  pack_kv_i64(&m, "shared_mem_per_block", (int64_t)k->shared_mem_per_block);
  pack_kv_i64(&m, "total_global_mem", (int64_t)k->total_global_mem);
  pk = pack_key(&m, "compute_capability");
  msgpack_pack_array(pk, 2);
  msgpack_pack_int(pk, k->cc_major);
  msgpack_pack_int(pk, k->cc_minor);
  pack_kv_bool(&m, "supports_fp64", k->supports_fp64);
  pack_kv_bool(&m, "supports_atomics", k->supports_atomics);
  pack_kv_i64(&m, "warp_size", k->warp_size);
  pack_kv_i64(&m, "max_registers_per_block", k->max_registers_per_block);
  pack_kv_i64(&m, "clock_rate_khz", k->clock_rate_khz);
  pack_kv_i64(&m, "multiprocessor_count", k->multiprocessor_count);
  pack_kv_bool(&m, "is_cpu", k->is_cpu);
  pack_kv_i64(&m, "pci_bus_id", k->pci_bus_id);
  pack_kv_str(&m, "arch", k->arch);
  pack_map_end(&m);
}

/* The device record; with memory figures when @p free_b is not NULL. */
static void pack_device(msgpack_packer *pk, const device_t *dev,
                        const uint64_t *free_b, const uint64_t *total)
{
  const dev_caps_t *k = &dev->caps;
  pack_map_t m, mem;

  pack_map_begin(&m, pk);
  pack_kv_i64(&m, "id", dev->id);
  pack_kv_str(&m, "name", k->name);
  pack_kv_str(&m, "driver", dev->drv->name);
  pack_kv_str(&m, "platform", dev->drv->platform);
  pack_kv_str(&m, "arch", k->arch);
  pack_kv_bool(&m, "is_cpu", k->is_cpu);
  pack_caps(pack_key(&m, "capabilities"), k);
  if (free_b != NULL) {
    pack_map_begin(&mem, pack_key(&m, "memory"));
    pack_kv_i64(&mem, "free", (int64_t)*free_b);
    pack_kv_i64(&mem, "total", (int64_t)*total);
    pack_kv_i64(&mem, "hipd_allocated", (int64_t)dev->allocated);
    pack_kv_i64(&mem, "hipd_buffers", dev->buffers);
    pack_map_end(&mem);
  }
  pack_map_end(&m);
}

int m_device_list(call_t *c)
{
  msgpack_packer *pk = call_result(c);
  int n = devices_count();

  msgpack_pack_array(pk, (uint32_t)usable_count(c->s));
  for (int i = 0; i < n; i++)
    if (session_may_use_device(c->s, i))
      pack_device(pk, device_get(i), NULL, NULL);
  return 0;
}

typedef struct {
  task_t t;
  device_t *dev;
  call_t *call;
  uint64_t free_b, total;
} meminfo_task_t;

static void meminfo_run(task_t *t)
{
  meminfo_task_t *m = (meminfo_task_t *)t;
  driver_t *drv = m->dev->drv;
  int rc = drv->mem_info(drv, m->dev->local, &m->free_b, &m->total);

  if (rc != 0)
    task_fail(t, rc, "cannot read the memory of device %d: %s", m->dev->id,
              drv_last_error());
}

static void meminfo_done(task_t *t)
{
  meminfo_task_t *m = (meminfo_task_t *)t;

  if (t->err.code != 0)
    call_fail(m->call, t->err.code, "%s", t->err.msg);
  else
    pack_device(call_result(m->call), m->dev, &m->free_b, &m->total);
  call_finish(m->call);
  free(m);
}

/* device.get [device?]: the record with live memory figures, read on the
 * device's service worker (the query may block). */
int m_device_get(call_t *c, const device_args_t *a)
{
  device_t *dev = a->device.dev;
  meminfo_task_t *m = task_new(sizeof(*m), meminfo_run, meminfo_done);

  if (m == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  m->call = call_defer(c);
  if (m->call == NULL) {
    free(m);
    return HIPD_ENOMEM;
  }
  m->dev = dev;
  exec_submit(dev->service, &m->t);
  return 0;
}

/* device.set_current [device] */
int m_device_set_current(call_t *c, const set_device_args_t *a)
{
  c->s->device = a->device.dev->id;
  msgpack_pack_nil(call_result(c));
  return 0;
}

int m_device_current(call_t *c)
{
  msgpack_pack_int(call_result(c), c->s->device);
  return 0;
}

/* The session's streams on one device. */
typedef struct {
  device_t *dev;
  stream_t **st;
  uint32_t n, cap;
  int nomem;
} stream_list_t;

static void collect_stream_cb(void *ctx, uint64_t h, void *obj)
{
  stream_list_t *l = ctx;
  stream_t *st = obj;

  (void)h;
  if (st->dev != l->dev || l->nomem)
    return;
  if (ARRAY_GROW(l->st, l->n, l->cap, 8) != 0) {
    l->nomem = 1;
    return;
  }
  l->st[l->n++] = st;
}

/* The ops of one device.synchronize: its call is answered when the last
 * completes, with the first error if any. */
typedef struct {
  call_t *call;
  uint32_t left;
  int status;
  char err[256];
} sync_group_t;

static void group_op_done(void *ctx, obj_result_t *r)
{
  sync_group_t *g = ctx;

  if (r->status != 0 && g->status == 0) {
    g->status = r->status;
    snprintf(g->err, sizeof(g->err), "%s", r->err);
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

/* device.synchronize [device?]: wait for every stream this session has on
 * the device. Other sessions' work is not waited for. */
int m_device_synchronize(call_t *c, const device_args_t *a)
{
  stream_list_t l = {.dev = a->device.dev};
  op_t **ops = NULL;
  sync_group_t *g = NULL;
  uint32_t made = 0;

  handles_foreach(&c->s->handles, HANDLE_STREAM, collect_stream_cb, &l);
  if (l.nomem)
    goto nomem;
  if (l.n == 0) {
    msgpack_pack_nil(call_result(c));
    goto out;
  }
  ops = calloc(l.n, sizeof(*ops));
  g = calloc(1, sizeof(*g));
  if (ops == NULL || g == NULL)
    goto nomem;
  for (; made < l.n; made++)
    if ((ops[made] = op_new(OP_SYNC, l.st[made],
                            (obj_done_t){group_op_done, g})) == NULL)
      goto nomem;
  if ((g->call = call_defer(c)) == NULL)
    goto fail; /* answered */
  g->left = l.n;
  for (uint32_t i = 0; i < l.n; i++)
    (void)op_submit(ops[i]); /* a sync op is always queued */
  goto out;

nomem:
  call_fail(c, HIPD_ENOMEM, "out of memory");
fail:
  for (uint32_t i = 0; i < made; i++)
    op_discard(ops[i]);
  free(g);
out:
  free(ops);
  free(l.st);
  return 0;
}
