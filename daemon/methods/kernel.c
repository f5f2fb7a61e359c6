/* SPDX-License-Identifier: MIT */
/* daemon/methods/kernel.c: kernel.compile, compile_cached, launch, info,
 * destroy; run_source, supported_source_langs, execute_direct; cache.stats
 * and cache.clear. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/lang.h"
#include "methods.h"
#include "policy.h"
#include "util/zalloc.h"

_Static_assert(PARAM_LAUNCH_MAX == DRV_MAX_ARGS,
               "dispatch bounds launch arguments by the driver's maximum");

static const char *type_name(uint8_t t)
{
  static const char *const names[] = {
      "?",      "pointer", "int8",   "uint8", "int16",  "uint16", "int32",
      "uint32", "int64",   "uint64", "float", "double", "bool"};
  return t <= DRV_T_BOOL ? names[t] : "?";
}

static void pack_params(msgpack_packer *pk, const kernel_t *k)
{
  if (k == NULL || !k->sig.known) {
    msgpack_pack_nil(pk);
    return;
  }
  msgpack_pack_array(pk, k->sig.nargs);
  for (uint32_t i = 0; i < k->sig.nargs; i++)
    proto_pack_cstr(pk, type_name(k->sig.types[i]));
}

/* ------------------------------------------------------------ arguments */

/* Launch arguments, parsed and checked, holding buffer references. */
typedef struct {
  drv_arg_t *args;
  uint32_t nargs;
  buffer_t **bufs;
  uint32_t nbufs;
} launch_args_t;

static void args_release(launch_args_t *a)
{
  for (uint32_t i = 0; i < a->nbufs; i++)
    buffer_unref(a->bufs[i]);
  free(a->bufs);
  free(a->args);
  memset(a, 0, sizeof(*a));
}

typedef struct {
  uint64_t addr;
  buffer_t *found;
  device_t *dev;
} ptr_search_t;

static void find_ptr_cb(void *ctx, uint64_t h, void *obj)
{
  ptr_search_t *p = ctx;
  buffer_t *b = obj;
  uint64_t base = (uint64_t)(uintptr_t)b->mem.ptr;

  (void)h;
  /* Strictly inside: one past the end can be the start of another
   * session's buffer (GPU allocations are packed). */
  if (p->found == NULL && b->dev == p->dev && p->addr >= base &&
      p->addr < base + b->mem.size)
    p->found = b;
}

/* The launch arguments dispatch decoded and checked (@p la, a
 * P_LAUNCH_ARGS param: kinds and values), bound for @p dev: each buffer
 * looked up among the session's, alive, on @p dev, with its offset inside
 * it; each raw pointer inside one of the session's buffers on @p dev. The
 * arguments hold references on those buffers. */
static int args_bind(call_t *c, const arg_t *la, device_t *dev,
                     launch_args_t *out)
{
  uint32_t n = la->n;

  memset(out, 0, sizeof(*out));
  out->args = util_zalloc_array(n ? n : 1, sizeof(*out->args));
  out->bufs = util_zalloc_array(n ? n : 1, sizeof(*out->bufs));
  if (out->args == NULL || out->bufs == NULL) {
    args_release(out);
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  }
  out->nargs = n;
  for (uint32_t i = 0; i < n; i++) {
    const param_larg_t *a = &la->largs[i];
    drv_arg_t *d = &out->args[i];
    ptr_search_t ps = {.dev = dev, .addr = a->u};
    buffer_t *b = NULL;
    int rc = 0;

    switch (a->kind) {
    case LARG_BUF:
      rc = handles_get(&c->s->handles, a->u, HANDLE_BUFFER, (void **)&b);
      if (rc != 0) {
        rc = call_fail_handle(c, "buffer argument", a->u, HANDLE_BUFFER, rc);
      } else if (a->off >= b->mem.size) {
        rc = call_fail(c, HIPD_ERANGE,
                       "argument %u: offset %llu is not inside a buffer of "
                       "%zu bytes",
                       i, (unsigned long long)a->off, b->mem.size);
      } else if ((rc = meth_check_alive(c, "buffer", b->dev, b->epoch)) != 0) {
        /* answered */
      } else if (b->dev != dev) {
        rc = call_fail(c, HIPD_EINVAL,
                       "argument %u: the buffer is on device %d, the kernel "
                       "on device %d",
                       i, b->dev->id, dev->id);
      } else {
        d->v.ptr = (char *)b->mem.ptr + a->off;
      }
      break;
    case LARG_PTR:
      handles_foreach(&c->s->handles, HANDLE_BUFFER, find_ptr_cb, &ps);
      if ((b = ps.found) == NULL)
        rc = call_fail(c, HIPD_EPERM,
                       "argument %u: pointer 0x%llx is not inside a buffer "
                       "of this session on device %d",
                       i, (unsigned long long)ps.addr, dev->id);
      else
        rc = meth_check_alive(c, "buffer", b->dev, b->epoch);
      d->v.ptr = (void *)(uintptr_t)ps.addr;
      break;
    case LARG_I32:
      d->kind = KARG_I32;
      d->v.i32 = a->v.i32;
      break;
    case LARG_I64:
      d->kind = KARG_I64;
      d->v.i64 = a->v.i64;
      break;
    case LARG_F32:
      d->kind = KARG_F32;
      d->v.f32 = a->v.f32;
      break;
    default: /* LARG_F64: dispatch checked the kinds */
      d->kind = KARG_F64;
      d->v.f64 = a->v.f64;
      break;
    }
    if (rc != 0) {
      args_release(out);
      return rc;
    }
    if (b != NULL) {
      d->kind = KARG_PTR;
      buffer_ref(b);
      out->bufs[out->nbufs++] = b;
    }
  }
  return 0;
}

/* The kinds a declared parameter type takes. */
static int kind_fits(uint8_t type, uint8_t kind)
{
  switch (type) {
  case DRV_T_PTR:
    return kind == KARG_PTR;
  case DRV_T_I64:
  case DRV_T_U64:
    return kind == KARG_I64;
  case DRV_T_F32:
    return kind == KARG_F32;
  case DRV_T_F64:
    return kind == KARG_F64;
  default: /* 8-, 16-, 32-bit integers and bool */
    return kind == KARG_I32;
  }
}

static const char *kind_name(uint8_t kind)
{
  static const char *const names[] = {"?",   "buf/ptr", "i32",
                                      "i64", "f32",     "f64"};
  return kind <= KARG_F64 ? names[kind] : "?";
}

/* Check the arguments against the kernel's declared parameters, where the
 * driver knows them. */
static int args_check(call_t *c, const kernel_t *k, const launch_args_t *a)
{
  if (!k->sig.known)
    return 0;
  if (a->nargs != k->sig.nargs)
    return call_fail(c, HIPD_ESIGNATURE,
                     "kernel '%s' takes %u arguments, got %u", k->name,
                     k->sig.nargs, a->nargs);
  for (uint32_t i = 0; i < a->nargs; i++)
    if (!kind_fits(k->sig.types[i], a->args[i].kind))
      return call_fail(c, HIPD_ESIGNATURE,
                       "kernel '%s' argument %u is declared %s; a %s was "
                       "given",
                       k->name, i, type_name(k->sig.types[i]),
                       kind_name(a->args[i].kind));
  return 0;
}

/* The launch's geometry against the device's limits. */
static int check_limits(call_t *c, const device_t *dev, const uint32_t g[3],
                        const uint32_t b[3], uint64_t shared)
{
  const dev_caps_t *k = &dev->caps;
  uint64_t threads = (uint64_t)b[0] * b[1] * b[2];

  for (int j = 0; j < 3; j++) {
    if (b[j] > (uint32_t)k->max_block_dims[j])
      return call_fail(c, HIPD_ELIMIT,
                       "block.%c = %u exceeds device %d's maximum of %d",
                       "xyz"[j], b[j], dev -> id, k -> max_block_dims[j]);
    if (g[j] > (uint32_t)k->max_grid_dims[j])
      return call_fail(c, HIPD_ELIMIT,
                       "grid.%c = %u exceeds device %d's maximum of %d",
                       "xyz"[j], g[j], dev -> id, k -> max_grid_dims[j]);
  }
  if (threads > (uint64_t)k->max_threads_per_block)
    return call_fail(c, HIPD_ELIMIT,
                     "a block of %llu threads exceeds device %d's maximum "
                     "of %d",
                     (unsigned long long)threads, dev->id,
                     k->max_threads_per_block);
  if (shared > k->shared_mem_per_block)
    return call_fail(c, HIPD_ELIMIT,
                     "%llu bytes of shared memory exceed device %d's %llu "
                     "per block",
                     (unsigned long long)shared, dev->id,
                     (unsigned long long)k->shared_mem_per_block);
  return 0;
}

/* Queue the launch of @p k as an op on @p st answering deferred call @p d
 * (taking @p a's buffers and a kernel reference). */
static void launch_submit(call_t *d, kernel_t *k, stream_t *st, uint64_t sh,
                          const uint32_t g[3], const uint32_t b[3],
                          uint32_t shared, launch_args_t *a, int wait)
{
  op_t *op = meth_op_prepare_deferred(d, OP_LAUNCH, st, sh);

  if (op == NULL) {
    args_release(a);
    return;
  }
  op->kernel = k;
  kernel_ref(k);
  memcpy(op->grid, g, sizeof(op->grid));
  memcpy(op->block, b, sizeof(op->block));
  op->shared = shared;
  op->args = a->args;
  op->nargs = a->nargs;
  op->bufs = a->bufs;
  op->nbufs = a->nbufs;
  op->wait = wait;
  /* What it prints, for kernel.output: the session's sink, made at its
   * first launch. */
  if (d->s->kernel_out == NULL)
    d->s->kernel_out = drv_output_new(KERNEL_OUTPUT_CAP);
  op->out = d->s->kernel_out;
  drv_output_ref(op->out);
  memset(a, 0, sizeof(*a));
  meth_op_start(op);
}

/* ------------------------------------------------------------- compiling */

typedef struct {
  call_t *call;
  int run;  /* run_source: launch when built */
  int wait; /* run_source: answer once it has run (else once submitted) */
  uint32_t grid[3], block[3], shared;
  launch_args_t args;
} compile_ctx_t;

static void compile_done(void *ctx, const kernel_result_t *r)
{
  compile_ctx_t *cc = ctx;
  call_t *c = cc->call;
  session_t *s = c->s;
  pack_map_t m;

  if (r->status != 0) {
    call_fail(c, r->status, "%s", r->error);
    goto out;
  }
  if (cc->run) {
    stream_t *st;
    uint64_t sh;
    if (s->closing || args_check(c, r->kernel, &cc->args) != 0 ||
        meth_default_stream(c, r->kernel->dev, &st, &sh) != 0) {
      if (s->closing)
        call_fail(c, HIPD_ECANCELED, "the session closed");
      kernel_unref(r->kernel);
      goto out;
    }
    launch_submit(c, r->kernel, st, sh, cc->grid, cc->block, cc->shared,
                  &cc->args, cc->wait);
    kernel_unref(r->kernel); /* the op holds its own reference */
    free(cc);
    return;
  }
  if (meth_compile_answer(c, r, &m) == 0) {
    pack_params(pack_key(&m, "params"), r->kernel);
    pack_map_end(&m);
  }
out:
  args_release(&cc->args);
  call_finish(c);
  free(cc);
}

/* The options param @p a into @p opts, but for hipd's own --lang=L
 * (the source language, kernels/lang.h: "hip" or "cuda"; the last one
 * counts), which goes to *lang and never to a compiler. @return 0 or
 * ELANG (answered). */
static int options_split(call_t *c, const arg_t *a, const char **opts,
                         size_t *nopts, const char **lang)
{
  *nopts = 0;
  *lang = NULL;
  for (uint32_t k = 0; k < a->n; k++) {
    if (strncmp(a->strv[k], "--lang=", 7) != 0) {
      opts[(*nopts)++] = a->strv[k];
      continue;
    }
    if (!lang_known(a->strv[k] + 7))
      return call_fail(c, HIPD_ELANG,
                       "option '%s': unsupported source language '%s' "
                       "(hip or cuda)",
                       a->strv[k], a->strv[k] + 7);
    *lang = a->strv[k] + 7;
  }
  return 0;
}

/* Compile the source, name, options and target of a compile request
 * [source, name, options?, target?]. kernel_build copies what it keeps. */
static int compile_common(call_t *c, const kernel_compile_args_t *a,
                          int refresh)
{
  const arg_t *target = &a->target;
  kernel_request_t req = {0};
  const char *opts[MAX_OPTIONS];
  compile_ctx_t *cc;
  int rc;

  if (a->source.s == NULL || a->name.len == 0)
    return call_fail(c, HIPD_EPARAMS,
                     "the source and the kernel name are "
                     "required");
  if ((rc = options_split(c, &a->options, opts, &req.nopts, &req.lang)) != 0)
    return rc;
  /* The target: a device (the current one if absent) or an architecture. */
  req.dev = target->dev;
  req.arch = target->dev == NULL ? target->s : NULL;
  cc = calloc(1, sizeof(*cc));
  if (cc == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  if ((cc->call = call_defer(c)) == NULL) {
    free(cc);
    return HIPD_ENOMEM;
  }
  req.source = a->source.s;
  req.source_len = a->source.len;
  req.name = a->name.s;
  req.opts = opts;
  req.refresh = refresh;
  req.tenant = (uint32_t)c->s->peer_uid;
  kernel_build(&req, compile_done, cc);
  return 0;
}

/* kernel.compile [source, name, options?, target?]: compile now (the
 * binary replaces any cached one). target: a device id (default: the
 * current device) or an architecture name ("gfx90a", "sm_90") to compile
 * without loading. */
int m_kernel_compile(call_t *c, const kernel_compile_args_t *a)
{
  return compile_common(c, a, 1);
}

/* kernel.compile_cached: the same, through the cache. */
int m_kernel_compile_cached(call_t *c, const kernel_compile_args_t *a)
{
  return compile_common(c, a, 0);
}

/* kernel.destroy [kernel] */
int m_kernel_destroy(call_t *c, const kernel_args_t *a)
{
  kernel_t *k = a->kernel.obj;
  uint64_t h = a->kernel.u;

  res_kernel_free(c->s, h, k);
  msgpack_pack_nil(call_result(c));
  return 0;
}

/* kernel.info [kernel] -> {name, device, params} */
int m_kernel_info(call_t *c, const kernel_args_t *a)
{
  kernel_t *k = a->kernel.obj;
  pack_map_t m;

  pack_map_begin(&m, call_result(c));
  pack_kv_str(&m, "name", k->name);
  pack_kv_i64(&m, "device", k->dev->id);
  pack_params(pack_key(&m, "params"), k);
  pack_map_end(&m);
  return 0;
}

/* kernel.output [max?] -> {output, dropped}: what this session's kernels
 * printed (driver_output.h), the oldest first, at most max bytes, taken. */
int m_kernel_output(call_t *c, const kernel_output_args_t *a)
{
  size_t max = a->max.present ? (size_t)a->max.u : KERNEL_OUTPUT_CAP;
  uint64_t dropped = 0;
  char *buf = max > 0 ? malloc(max) : NULL;
  size_t n;
  pack_map_t m;

  if (max > 0 && buf == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory for %zu bytes", max);
  n = drv_output_take(c->s->kernel_out, buf, max, &dropped);
  pack_map_begin(&m, call_result(c));
  pack_kv_bin(&m, "output", buf, n);
  pack_kv_u64(&m, "dropped", dropped);
  pack_map_end(&m);
  free(buf);
  return 0;
}

/* kernel.launch [kernel, grid, block, shared_mem, stream?, args, wait?]:
 * queue the launch (answered once submitted; errors of the kernel's
 * execution are reported by the stream's next synchronisation, and on the
 * CPU device by this call); with wait true, answered once it has run. */
int m_kernel_launch(call_t *c, const kernel_launch_args_t *p)
{
  kernel_t *k = p->kernel.obj;
  const uint32_t *g = p->grid.dims, *b = p->block.dims;
  uint64_t sh, shared = p->shared_mem.u; /* 0 when nil */
  int wait = p->wait.present && p->wait.b;
  stream_t *st;
  launch_args_t a;
  call_t *d;
  int rc;

  if ((rc = meth_check_alive(c, "kernel", k->dev, kernel_epoch(k))) ||
      (rc = check_limits(c, k->dev, g, b, shared)))
    return rc;
  if (k->max_threads != 0 && (uint64_t)b[0] * b[1] * b[2] > k->max_threads)
    return call_fail(c, HIPD_ELIMIT,
                     "kernel '%s' was generated for blocks of at most %u "
                     "threads (its block param); this block has %llu",
                     k->name, k->max_threads,
                     (unsigned long long)b[0] * b[1] * b[2]);
  if (p->stream.present) {
    if ((rc = meth_arg_stream(c, &p->stream, &st, &sh)) != 0)
      return rc;
    if (st->dev != k->dev)
      return call_fail(c, HIPD_EINVAL,
                       "stream 0x%llx is on device %d; the kernel on device "
                       "%d",
                       (unsigned long long)sh, st->dev->id, k->dev->id);
  } else if ((rc = meth_default_stream(c, k->dev, &st, &sh)) != 0) {
    return rc;
  }
  if ((rc = args_bind(c, &p->args, k->dev, &a)) != 0)
    return rc;
  if ((rc = args_check(c, k, &a)) != 0) {
    args_release(&a);
    return rc;
  }
  if ((d = call_defer(c)) == NULL) {
    args_release(&a);
    return HIPD_ENOMEM;
  }
  launch_submit(d, k, st, sh, g, b, (uint32_t)shared, &a, wait);
  return 0;
}

/* The source languages a device's driver takes: every platform takes HIP
 * and CUDA (kernels/lang.h). */
static const char *const *langs_of(const device_t *dev)
{
  (void)dev;
  return lang_names;
}

/* run_source [source, lang, kernel_name, block, grid, shared_mem, args,
 * wait?]: compile through the cache for the current device and launch on
 * its default stream; answered when the kernel has run, or with wait false
 * once the launch is submitted (as upstream Sarek's run_source). */
int m_run_source(call_t *c, const run_source_args_t *a)
{
  const char *lang = a->lang.s;
  uint64_t shared = a->shared_mem.u; /* 0 when nil */
  device_t *dev = device_get(c->s->device);
  compile_ctx_t *cc;
  kernel_request_t req = {0};
  const char *const *l;
  int rc, ok = 0;

  if (!session_may_use_device(c->s, dev->id)) {
    hipd_err_t err;
    policy_device_refusal(c->s->d, c->s->peer_who, dev, &err);
    return call_fail(c, err.code, "%s", err.msg);
  }
  if (a->source.s == NULL || a->kernel_name.len == 0)
    return call_fail(c, HIPD_EPARAMS,
                     "the source and the kernel name are "
                     "required");
  for (l = langs_of(dev); *l != NULL; l++)
    ok |= strcmp(*l, lang) == 0;
  if (!ok)
    return call_fail(c, HIPD_ELANG,
                     "unsupported source language '%s' on device %d (%s)", lang,
                     dev->id, dev->drv->name);
  cc = calloc(1, sizeof(*cc));
  if (cc == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  cc->run = 1;
  cc->wait = !a->wait.present || a->wait.b;
  memcpy(cc->block, a->block.dims, sizeof(cc->block));
  memcpy(cc->grid, a->grid.dims, sizeof(cc->grid));
  if ((rc = check_limits(c, dev, cc->grid, cc->block, shared)) ||
      (rc = args_bind(c, &a->args, dev, &cc->args))) {
    free(cc);
    return rc;
  }
  cc->shared = (uint32_t)shared;
  if ((cc->call = call_defer(c)) == NULL) {
    args_release(&cc->args);
    free(cc);
    return HIPD_ENOMEM;
  }
  req.source = a->source.s;
  req.source_len = a->source.len;
  req.name = a->kernel_name.s;
  req.dev = dev;
  req.lang = lang;
  req.tenant = (uint32_t)c->s->peer_uid;
  kernel_build(&req, compile_done, cc);
  return 0;
}

/* supported_source_langs [device?] -> ["hip", ...] */
int m_supported_source_langs(call_t *c, const device_args_t *a)
{
  meth_pack_strv(call_result(c), langs_of(a->device.dev));
  return 0;
}

int m_execute_direct(call_t *c)
{
  return call_fail(c, HIPD_ENOTSUP,
                   "hip is a JIT backend: it does not execute directly; "
                   "compile and launch, or use run_source");
}

static void pack_cache_stats(msgpack_packer *pk, const cache_stats_t *st)
{
  pack_map_t m;

  pack_map_begin(&m, pk);
  pack_kv_u64(&m, "hits_memory", st->hits_memory);
  pack_kv_u64(&m, "hits_disk", st->hits_disk);
  pack_kv_u64(&m, "hits", st->hits_memory + st->hits_disk + st->waits);
  pack_kv_u64(&m, "misses", st->misses);
  pack_kv_u64(&m, "waits", st->waits);
  pack_kv_u64(&m, "warmed", st->warmed);
  pack_kv_u64(&m, "compile_failures", st->compile_failures);
  pack_kv_u64(&m, "corrupt", st->corrupt);
  pack_kv_u64(&m, "auth_failures", st->auth_failures);
  pack_kv_u64(&m, "evictions", st->evictions);
  pack_kv_u64(&m, "entries", st->entries);
  pack_kv_u64(&m, "bytes", st->bytes);
  pack_kv_u64(&m, "disk_entries", st->disk_entries);
  pack_kv_u64(&m, "disk_bytes", st->disk_bytes);
  pack_kv_u64(&m, "preloaded", kernels_preloaded());
  pack_kv_u64(&m, "hits_loaded", kernels_hits_loaded());
  pack_map_end(&m);
}

static void cache_stats_done(void *ctx, int status, const cache_stats_t *st)
{
  call_t *c = ctx;

  if (status != 0 || st == NULL)
    call_fail(c, status != 0 ? status : HIPD_EIO,
              "the shared cache's counters are not available");
  else
    pack_cache_stats(call_result(c), st);
  call_finish(c);
}

/* cache.stats: the counters of the cache every session shares (with
 * --isolation uid or session, the listener's). */
int m_cache_stats(call_t *c)
{
  call_t *dc = call_defer(c);

  if (dc == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  kernels_cache_stats(cache_stats_done, dc);
  return 0;
}

static void cache_clear_done(void *ctx, int status, const char *msg)
{
  call_t *c = ctx;

  if (status != 0)
    call_fail(c, status, "%s", msg);
  else
    msgpack_pack_nil(call_result(c));
  call_finish(c);
}

/* cache.clear: only the daemon's own user (or root) may empty the cache
 * every session shares. */
int m_cache_clear(call_t *c)
{
  call_t *dc;

  if (c->s->peer_uid != 0 && c->s->peer_uid != c->s->d->daemon_uid)
    return call_fail(c, HIPD_EPERM,
                     "only root or the daemon's user may clear the shared "
                     "kernel cache");
  if ((dc = call_defer(c)) == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  kernels_cache_clear(c->s->peer_uid, cache_clear_done, dc);
  return 0;
}
