/* SPDX-License-Identifier: MIT */
/* daemon/kernels/kernels.c: compile through the cache, share loaded
 * modules between sessions, make per-session kernels. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile/compile_pool.h"
#include "hipd.h"
#include "kernels/kernels.h"
#include "kernels/lang.h"
#include "log.h"
#include "util/clock.h"

enum { MOD_LOADING, MOD_READY, MOD_FAILED };

/* Loaded modules nobody uses stay loaded, this many at most (the least
 * recently used go first): a cache hit on one of them costs no load. */
#define MODULES_IDLE_MAX 64

/* A kernel found in a module: the next request for it needs no lookup. */
typedef struct mod_fn {
  char *name;
  void *fn;
  drv_sig_t sig;
  struct mod_fn *next;
} mod_fn_t;

struct module_ref {
  device_t *dev;
  cache_key_t key;
  void *drv;             /* the driver's module once loaded */
  int state;             /* MOD_* */
  hipd_err_t load_err;   /* the load task's error, for every waiter */
  int refs;              /* kernels and builds using it */
  uint32_t epoch;        /* the device context it was loaded in */
  cache_blob_t *blob;    /* the image, held while loading */
  struct build *waiters; /* builds waiting for the load */
  mod_fn_t *fns;         /* kernels looked up in it */
  size_t bytes;          /* its image's */
  /* This process's key of the requests for it, where it differs from the
   * cache's (a worker keys without the compiler's id: kernels_key): known
   * from the first request that fetched it (a preloaded module has none
   * until then). */
  cache_key_t local_key;
  int has_local_key;
  int cache_ok;       /* may answer requests without the cache (0 once
                       * the cache was cleared: kernels_cache_cleared) */
  uint64_t idle_ns;   /* when refs went to 0 (kept loaded, idle) */
  module_ref_t *next; /* in the global list */
};

typedef struct build {
  task_t task; /* load and lookup tasks on the service worker */
  char *source;
  size_t source_len;
  char *name;
  char **opts;
  size_t nopts;
  device_t *dev;
  driver_t *drv;
  char arch[64];
  kernel_done_fn done;
  void *ctx;
  uint64_t start_ns;
  kernel_result_t res;
  module_ref_t *mod;
  void *fn;
  drv_sig_t sig;
  drv_sig_t known;       /* the generator's signature ... */
  int has_known;         /* ... if the request gave one */
  uint32_t max_threads;  /* the request's launch bound */
  uint32_t tenant;       /* the request's */
  uint64_t fetched_ns;   /* the binary came (the load starts) */
  int preload;           /* the load task of kernels_preload() */
  cache_key_t local_key; /* this process's key of the request */
  struct build *next_waiter;
  /* The message of a failed build. A compiler's log can fill it, so it is
   * a buffer of its own, not a hipd_err_t (util/err.h). The last field:
   * kernel_build() clears the others only. */
  char err[16384];
} build_t;

static module_ref_t *modules;  /* loaded (or loading) modules, all devices */
static uint64_t preloaded;     /* modules kernels_preload() loaded */
static uint64_t hits_loaded;   /* requests answered from a loaded module */
static unsigned preloading;    /* preloads loading now */
static uint64_t preload_stamp; /* the idle time the next preload gets */

/* Preloads load one at a time on each device, the others waiting here in
 * the order they came (hottest first): a load runs on the device's
 * service executor, in order with the first sessions' own work there
 * (allocations, streams, their loads), which then waits behind one
 * preload at most, not 32. */
typedef struct preload {
  device_t *dev;
  cache_key_t key;
  cache_blob_t *blob;
  struct preload *next;
} preload_t;
static preload_t *preload_head, **preload_tailp = &preload_head;
static unsigned preload_queued; /* in that list */
static uint64_t preload_busy;   /* devices (bit = id) loading a preload */
static unsigned idle_modules;   /* of them, loaded with refs == 0 */

driver_t *kernels_driver_for_arch(const char *arch)
{
  for (driver_t **d = drivers_compiled(); *d != NULL; d++)
    if ((*d)->arch_supported != NULL && (*d)->arch_supported(*d, arch))
      return *d;
  return NULL;
}

const driver_t *kernels_driver_named(const char *name)
{
  for (driver_t **d = drivers_compiled(); *d != NULL; d++)
    if (strcmp((*d)->name, name) == 0)
      return *d;
  return NULL;
}

static void build_free(build_t *b)
{
  free(b->source);
  free(b->name);
  for (size_t i = 0; i < b->nopts; i++)
    free(b->opts[i]);
  free(b->opts);
  free(b);
}

static void finish(build_t *b, int status)
{
  b->res.status = status;
  b->res.error = status != 0 ? b->err : NULL;
  b->res.compile_ms = (double)(util_now_ns() - b->start_ns) / 1e6;
  if (b->fetched_ns != 0)
    b->res.load_ms = (double)(util_now_ns() - b->fetched_ns) / 1e6;
  b->done(b->ctx, &b->res);
  build_free(b);
}

/* ---------------------------------------------------------------- modules */

static void module_unload_run(task_t *t)
{
  module_ref_t *m = (module_ref_t *)((build_t *)t)->mod;

  if (m->drv != NULL && m->epoch == device_epoch(m->dev))
    m->dev->drv->module_unload(m->dev->drv, m->dev->local, m->drv);
}

static void module_unload_done(task_t *t)
{
  build_t *b = (build_t *)t;

  while (b->mod->fns != NULL) {
    mod_fn_t *f = b->mod->fns;
    b->mod->fns = f->next;
    free(f->name);
    free(f);
  }
  free(b->mod);
  build_free(b);
}

static void module_unload(module_ref_t *m);

/* Unload the least recently used idle module. */
static void evict_idle(void)
{
  module_ref_t *old = NULL;

  /* (A preload still loading has no reference either, and is not idle
   * yet: load_done counts it once loaded.) */
  for (module_ref_t *m = modules; m != NULL; m = m->next)
    if (m->refs == 0 && m->state == MOD_READY &&
        (old == NULL || m->idle_ns < old->idle_ns))
      old = m;
  if (old != NULL) {
    idle_modules--;
    module_unload(old);
  }
}

static void module_unref(module_ref_t *m)
{
  if (--m->refs > 0)
    return;
  if (m->state == MOD_READY && m->epoch == device_epoch(m->dev)) {
    /* Keep it loaded for the next request of the same binary. */
    m->idle_ns = util_now_ns();
    if (++idle_modules > MODULES_IDLE_MAX)
      evict_idle();
    return;
  }
  module_unload(m);
}

/* Take @p m out of the list: no request finds it again. */
static void module_forget(module_ref_t *m)
{
  for (module_ref_t **pp = &modules; *pp != NULL; pp = &(*pp)->next)
    if (*pp == m) {
      *pp = m->next;
      break;
    }
  m->next = NULL;
}

/* Take @p m (no references left) out of the list and unload it. */
static void module_unload(module_ref_t *m)
{
  build_t *b;

  module_forget(m);
  if (m->blob != NULL)
    cache_blob_unref(m->blob);
  m->blob = NULL;
  /* A bare build carries the unload task. */
  b = task_new(sizeof(*b), module_unload_run, module_unload_done);
  if (b == NULL) {
    log_error(0, "out of memory unloading a module; it stays loaded");
    return;
  }
  b->mod = m;
  exec_submit(m->dev->service, &b->task);
}

static void lookup_start(build_t *b);

static void load_run(task_t *t)
{
  module_ref_t *m = ((build_t *)t)->mod;
  driver_t *drv = m->dev->drv;
  int rc;

  m->epoch = device_epoch(m->dev);
  rc = drv->module_load(drv, m->dev->local, m->blob->data, m->blob->len,
                        &m->drv);

  if (rc != 0) {
    m->drv = NULL;
    task_fail(t, rc, "cannot load the kernel on device %d: %s", m->dev->id,
              drv_last_error());
  }
}

static void preload_next(device_t *dev);

static void load_done(task_t *t)
{
  build_t *first = (build_t *)t;
  module_ref_t *m = first->mod;
  build_t *w = m->waiters;

  m->waiters = NULL;
  m->state = t->err.code == 0 ? MOD_READY : MOD_FAILED;
  if (t->err.code == HIPD_EDEVLOST)
    device_mark_lost(m->dev, t->err.msg);
  m->load_err = t->err;
  cache_blob_unref(m->blob);
  m->blob = NULL;
  if (m->state == MOD_FAILED)
    module_forget(m); /* a later request tries again */
  if (first->preload) {
    preloading--;
    preloaded += m->state == MOD_READY;
    preload_busy &= ~((uint64_t)1 << m->dev->id);
    preload_next(m->dev);
  }
  if (first->preload && m->refs == 0) {
    /* Nobody asked for it meanwhile: idle, older than any module a
     * request left idle (the entries come hottest first: each later one
     * is older, so the coldest go first when room is needed), or gone. */
    if (m->state == MOD_READY) {
      m->idle_ns = preload_stamp--;
      if (++idle_modules > MODULES_IDLE_MAX)
        evict_idle();
    } else {
      free(m);
    }
    build_free(first);
    return;
  }
  while (w != NULL) {
    build_t *next = w->next_waiter;
    if (m->state == MOD_READY) {
      lookup_start(w);
    } else {
      snprintf(w->err, sizeof(w->err), "%s", m->load_err.msg);
      w->mod = NULL;
      finish(w, m->load_err.code);
      if (--m->refs == 0)
        free(m);
    }
    w = next;
  }
  build_free(first);
}

/* The module of cache key @p key on @p dev, loaded or loading, or NULL.
 * A module of a reset context is dead: it is not shared again. */
static module_ref_t *module_find(const device_t *dev, const cache_key_t *key)
{
  for (module_ref_t *m = modules; m != NULL; m = m->next)
    if (m->dev == dev && memcmp(m->key.b, key->b, CACHE_KEY_SIZE) == 0 &&
        (m->state == MOD_LOADING || m->epoch == device_epoch(m->dev)))
      return m;
  return NULL;
}

/* Publish a module of @p blob (cache key @p key) on @p dev, no reference
 * yet, and start its load on the device's service executor; @p preload:
 * kernels_preload()'s. Both allocated before the module is published, so
 * that running out fails this one only. @return it, or NULL (out of
 * memory). */
static module_ref_t *module_load_start(device_t *dev, const cache_key_t *key,
                                       cache_blob_t *blob, int preload)
{
  build_t *loader = task_new(sizeof(*loader), load_run, load_done);
  module_ref_t *m = calloc(1, sizeof(*m));

  if (m == NULL || loader == NULL) {
    free(m);
    free(loader);
    return NULL;
  }
  m->dev = dev;
  m->key = *key;
  m->state = MOD_LOADING;
  m->bytes = blob->len;
  m->cache_ok = 1;
  m->blob = blob;
  cache_blob_ref(blob);
  m->next = modules;
  modules = m;
  loader->mod = m;
  loader->preload = preload;
  exec_submit(dev->service, &loader->task);
  return m;
}

/* Get the module of @p blob loaded on the build's device, then look the
 * kernel up in it. */
static void module_acquire(build_t *b, cache_blob_t *blob)
{
  module_ref_t *m = module_find(b->dev, &b->res.key);

  if (m == NULL) {
    /* The build waits for the load it started (the loop runs load_done
     * only after this returns). */
    if ((m = module_load_start(b->dev, &b->res.key, blob, 0)) == NULL) {
      snprintf(b->err, sizeof(b->err), "out of memory");
      finish(b, HIPD_ENOMEM);
      return;
    }
    m->local_key = b->local_key;
    m->has_local_key = 1;
    m->refs = 1;
    b->mod = m;
    m->waiters = b;
    return;
  }
  /* (A preload's module counts as idle once loaded, not while loading.) */
  if (m->refs++ == 0 && m->state == MOD_READY)
    idle_modules--;
  if (!m->has_local_key) {
    m->local_key = b->local_key;
    m->has_local_key = 1;
  }
  m->cache_ok = 1; /* the cache answered for it (again, after a clear) */
  b->mod = m;
  if (m->state == MOD_LOADING) {
    b->next_waiter = m->waiters;
    m->waiters = b;
  } else {
    lookup_start(b);
  }
}

/* ------------------------------------------------- without the cache */

/* The module loaded on @p dev, ready and usable, of the requests this
 * process keys @p local_key, or NULL. */
static module_ref_t *module_loaded(const device_t *dev,
                                   const cache_key_t *local_key)
{
  for (module_ref_t *m = modules; m != NULL; m = m->next)
    if (m->dev == dev && m->state == MOD_READY && m->cache_ok &&
        m->has_local_key && m->epoch == device_epoch(m->dev) &&
        memcmp(m->local_key.b, local_key->b, CACHE_KEY_SIZE) == 0)
      return m;
  return NULL;
}

static void touch_local(const cache_key_t *key)
{
  cache_touch(key);
}

static kernels_touch_fn touch = touch_local;

void kernels_set_touch(kernels_touch_fn fn)
{
  touch = fn != NULL ? fn : touch_local;
}

void kernels_cache_cleared(void)
{
  for (module_ref_t *m = modules; m != NULL; m = m->next)
    m->cache_ok = 0;
}

/* Start preloading @p blob (entry @p key) on @p dev. @return 0 or
 * HIPD_ENOMEM. */
static int preload_start(device_t *dev, const cache_key_t *key,
                         cache_blob_t *blob)
{
  module_ref_t *m = module_load_start(dev, key, blob, 1);

  if (m == NULL)
    return HIPD_ENOMEM;
  /* This process keys its requests as the cache does once it knows the
   * compiler's id: the first request for it is answered here too. */
  if (compile_pool_compiler_id(dev->drv->name) != NULL) {
    m->local_key = *key;
    m->has_local_key = 1;
  }
  if (preload_stamp == 0)
    preload_stamp = util_now_ns();
  preloading++;
  preload_busy |= (uint64_t)1 << dev->id;
  return 0;
}

/* @p dev's preload ended: start its next waiting one that is still
 * wanted (a request may have loaded it meanwhile, or the device gone). */
static void preload_next(device_t *dev)
{
  for (preload_t **pp = &preload_head; *pp != NULL;) {
    preload_t *p = *pp;
    int started = 0;

    if (p->dev != dev) {
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    if (*pp == NULL)
      preload_tailp = pp;
    preload_queued--;
    if (!dev->lost && module_find(dev, &p->key) == NULL)
      started = preload_start(dev, &p->key, p->blob) == 0;
    cache_blob_unref(p->blob);
    free(p);
    if (started)
      return;
  }
}

int kernels_preload(const cache_key_t *key, const void *image, size_t len,
                    uint64_t devmask)
{
  cache_blob_t *blob = NULL;
  int started = 0;

  for (int i = 0; i < devices_count(); i++) {
    device_t *dev = device_get(i);
    uint64_t bit = (uint64_t)1 << (dev->id & 63);

    /* GPUs only: a CPU module would start the device's kernel runner.
     * Half the idle modules at most, on all devices together, so that
     * preloads never evict each other. */
    if (dev->caps.is_cpu || dev->lost || dev->id >= 64 || !(devmask & bit) ||
        idle_modules + preloading + preload_queued >= MODULES_IDLE_MAX / 2)
      continue;
    if (module_find(dev, key) != NULL)
      continue;
    if (blob == NULL && (blob = cache_blob_new(image, len)) == NULL)
      return HIPD_ENOMEM;
    if (preload_busy & bit) {
      preload_t *p = malloc(sizeof(*p));

      if (p == NULL) {
        cache_blob_unref(blob);
        return HIPD_ENOMEM;
      }
      p->dev = dev;
      p->key = *key;
      p->blob = blob;
      cache_blob_ref(blob);
      p->next = NULL;
      *preload_tailp = p;
      preload_tailp = &p->next;
      preload_queued++;
    } else if (preload_start(dev, key, blob) != 0) {
      cache_blob_unref(blob);
      return HIPD_ENOMEM;
    }
    started++;
  }
  if (blob != NULL)
    cache_blob_unref(blob);
  return started;
}

uint64_t kernels_preloaded(void)
{
  return preloaded;
}

uint64_t kernels_hits_loaded(void)
{
  return hits_loaded;
}

/* ---------------------------------------------------------------- lookups */

static void lookup_run(task_t *t)
{
  build_t *b = (build_t *)t;
  driver_t *drv = b->dev->drv;
  int rc = drv->kernel_get(drv, b->mod->drv, b->name, &b->fn, &b->sig);

  if (rc != 0)
    task_fail(t, rc, "kernel '%s' not found: %s", b->name, drv_last_error());
}

/* Do a generated signature and a driver's agree? (Integers of 32 bits
 * and less all take i32 arguments.) */
static int sig_agree(const drv_sig_t *a, const drv_sig_t *b)
{
  if (a->nargs != b->nargs)
    return 0;
  for (uint32_t i = 0; i < a->nargs; i++) {
    uint8_t x = a->types[i], y = b->types[i];
    int xs = x >= DRV_T_I8 && x <= DRV_T_U32,
        ys = y >= DRV_T_I8 && y <= DRV_T_U32;
    if (x == DRV_T_BOOL)
      xs = 1;
    if (y == DRV_T_BOOL)
      ys = 1;
    if (!(x == y || (xs && ys) ||
          ((x == DRV_T_I64 || x == DRV_T_U64) &&
           (y == DRV_T_I64 || y == DRV_T_U64))))
      return 0;
  }
  return 1;
}

/* The build found its kernel (b->fn, b->sig): make the session's kernel,
 * whose signature is the generated one where hipd generated it. */
static void make_kernel(build_t *b)
{
  kernel_t *k;

  if (b->has_known && b->sig.known && !sig_agree(&b->known, &b->sig)) {
    snprintf(b->err, sizeof(b->err),
             "kernel '%s': the generated parameter list (%u) disagrees with "
             "the compiled kernel's (%u): a code generator bug",
             b->name, b->known.nargs, b->sig.nargs);
    module_unref(b->mod);
    finish(b, HIPD_EINTERNAL);
    return;
  }
  k = calloc(1, sizeof(*k));
  if (k == NULL) {
    snprintf(b->err, sizeof(b->err), "out of memory");
    module_unref(b->mod);
    finish(b, HIPD_ENOMEM);
    return;
  }
  k->dev = b->dev;
  k->mod = b->mod; /* the build's module reference passes to the kernel */
  k->fn = b->fn;
  k->sig = b->has_known ? b->known : b->sig;
  k->max_threads = b->max_threads;
  k->refs = 1;
  snprintf(k->name, sizeof(k->name), "%s", b->name);
  b->res.kernel = k;
  finish(b, 0);
}

/* Remember the build's kernel in its module, so that the next request for
 * it is answered from there. */
static void remember(build_t *b)
{
  mod_fn_t *f = calloc(1, sizeof(*f));

  if (f != NULL && (f->name = strdup(b->name)) != NULL) {
    f->fn = b->fn;
    f->sig = b->sig;
    f->next = b->mod->fns;
    b->mod->fns = f;
  } else {
    free(f);
  }
}

static void lookup_done(task_t *t)
{
  build_t *b = (build_t *)t;

  if (t->err.code != 0) {
    snprintf(b->err, sizeof(b->err), "%s", t->err.msg);
    module_unref(b->mod);
    finish(b, t->err.code);
    return;
  }
  remember(b);
  make_kernel(b);
}

static void lookup_start(build_t *b)
{
  driver_t *drv = b->dev->drv;

  for (mod_fn_t *f = b->mod->fns; f != NULL; f = f->next) {
    if (strcmp(f->name, b->name) == 0) {
      b->fn = f->fn;
      b->sig = f->sig;
      make_kernel(b);
      return;
    }
  }
  /* Looked up when the module was loaded: no trip to the service thread. */
  if (drv->kernel_find != NULL &&
      drv->kernel_find(drv, b->mod->drv, b->name, &b->fn, &b->sig) == 0) {
    remember(b);
    make_kernel(b);
    return;
  }
  exec_submit(b->dev->service, task_init(&b->task, lookup_run, lookup_done));
}

/* ------------------------------------------------------------ compiling */

int kernels_compile(const driver_t *drv, const char *arch, const char *src,
                    size_t len, const char *const *names, size_t nnames,
                    const char *const *opts, size_t nopts, void **out,
                    size_t *outlen, char *log, size_t logsz,
                    cache_timing_t *timing)
{
  /* In this thread's sandboxed helper (a compile pool thread). */
  compile_req_t req = {.driver = drv->name,
                       .arch = arch,
                       .source = src,
                       .source_len = len,
                       .names = names,
                       .nnames = nnames,
                       .opts = opts,
                       .nopts = nopts};
  compile_out_t res = {.log = log, .logsz = logsz};
  int rc = compile_run(&req, &res);

  timing->helper_ns = res.helper_ns;
  timing->helper_cpu_ns = res.helper_cpu_ns;
  if (rc == 0) {
    *out = res.image;
    *outlen = res.image_len;
  }
  return rc;
}

static int compile_cb(void *arg, void **out, size_t *len, char *log,
                      size_t logsz, cache_timing_t *timing)
{
  build_t *b = arg;
  const char *names[1] = {b->name};

  return kernels_compile(b->drv, b->arch, b->source, b->source_len, names, 1,
                         (const char *const *)b->opts, b->nopts, out, len, log,
                         logsz, timing);
}

/* A request of this process's admitted to the compile pool: released when
 * the cache answers it. */
typedef struct {
  cache_done_fn done;
  void *ctx;
  uint32_t tenant;
  uint64_t bytes;
} admitted_t;

static void admitted_done_cb(void *ctx, int status, cache_blob_t *blob,
                             cache_source_t source, const char *log)
{
  admitted_t a = *(admitted_t *)ctx;

  free(ctx);
  compile_pool_release(a.tenant, a.bytes);
  a.done(a.ctx, status, blob, source, log);
}

/* The default fetch: this process's cache, admitted as the listener admits
 * its workers' requests (privsep/workers_compile.c). */
static void fetch_local(const kernels_fetch_t *f, cache_done_fn done, void *ctx)
{
  admitted_t *a;
  hipd_err_t err;
  int rc;

  /* A memory hit holds nothing and is answered at once, and a request that
   * waits for a compile of the same key in flight holds no helper: never
   * refused. */
  if (!cache_would_compile(f->key, f->refresh)) {
    cache_get_flags(f->key, 0, f->tenant, compile_cb, ctx, done, ctx);
    return;
  }
  if ((a = malloc(sizeof(*a))) == NULL) {
    done(ctx, HIPD_ENOMEM, NULL, CACHE_MISS, "out of memory");
    return;
  }
  *a = (admitted_t){done, ctx, f->tenant, f->source_len};
  if ((rc = compile_pool_admit(f->tenant, f->source_len, &err)) != 0) {
    free(a);
    done(ctx, rc, NULL, CACHE_MISS, err.msg);
    return;
  }
  cache_get_flags(f->key, f->refresh ? CACHE_REFRESH : 0, f->tenant, compile_cb,
                  ctx, admitted_done_cb, a);
}

static kernels_fetch_fn fetch = fetch_local;
static int per_tenant; /* kernels_set_cache_per_tenant() */

void kernels_set_cache_per_tenant(int on)
{
  per_tenant = on;
}

void kernels_set_fetch(kernels_fetch_fn fn)
{
  fetch = fn != NULL ? fn : fetch_local;
}

static void (*remote_stats)(kernels_stats_done_fn, void *);
static void (*remote_clear)(uid_t, kernels_clear_done_fn, void *);

static void (*remote_cstats)(kernels_cstats_done_fn, void *);

void kernels_set_cache_remote(void (*stats)(kernels_stats_done_fn, void *),
                              void (*clear)(uid_t, kernels_clear_done_fn,
                                            void *),
                              void (*cstats)(kernels_cstats_done_fn, void *))
{
  remote_stats = stats;
  remote_clear = clear;
  remote_cstats = cstats;
}

void kernels_compile_stats(kernels_cstats_done_fn done, void *ctx)
{
  compile_pool_stats_t st;

  if (remote_cstats != NULL) {
    remote_cstats(done, ctx);
    return;
  }
  compile_pool_get_stats(&st);
  done(ctx, 0, &st);
}

void kernels_cache_stats(kernels_stats_done_fn done, void *ctx)
{
  cache_stats_t st;

  if (remote_stats != NULL) {
    remote_stats(done, ctx);
    return;
  }
  cache_get_stats(&st);
  done(ctx, 0, &st);
}

void kernels_cache_clear(uid_t uid, kernels_clear_done_fn done, void *ctx)
{
  if (remote_clear != NULL) {
    remote_clear(uid, done, ctx);
    return;
  }
  cache_clear();
  kernels_cache_cleared();
  done(ctx, 0, "");
}

int kernels_key(const kernels_key_in_t *in, cache_key_t *out)
{
  const char *compiler;
  cache_keyer_t *k;
  int rc = cache_keyer_create(&k);

  if (rc != 0)
    return rc;
  cache_keyer_add(k, "source", in->source, in->source_len);
  cache_keyer_add_str(k, "kernel", in->name);
  for (size_t i = 0; i < in->nopts; i++)
    cache_keyer_add_str(k, "option", in->opts[i]);
  cache_keyer_add_str(k, "arch", in->arch);
  cache_keyer_add_str(k, "driver", in->drv->name);
  cache_keyer_add_str(k, "platform", in->drv->platform);
  /* The id the compile helpers reported: this process never asks a
   * compiler. A worker, which has no helpers, keys with "" and then
   * takes its listener's key (kernels_fetch_t.key). */
  compiler = compile_pool_compiler_id(in->drv->name);
  cache_keyer_add_str(k, "compiler", compiler != NULL ? compiler : "");
  cache_keyer_add_str(k, "prelude", KERNELS_PRELUDE_VERSION);
  /* Only when scoped: the shared keys stay those of earlier releases. */
  if (in->owner >= 0) {
    uint32_t uid = (uint32_t)in->owner;
    cache_keyer_add(k, "tenant", &uid, sizeof(uid));
  }
  cache_keyer_finish(k, out);
  return 0;
}

static void compiled_cb(void *ctx, int status, cache_blob_t *blob,
                        cache_source_t source, const char *log)
{
  build_t *b = ctx;
  const cache_timing_t *t = cache_done_timing();

  b->res.cache = source;
  b->res.wait_ms = (double)t->wait_ns / 1e6;
  b->res.compiler_ms = (double)t->compile_ns / 1e6;
  b->res.helper_ms = (double)t->helper_ns / 1e6;
  b->res.helper_cpu_ms = (double)t->helper_cpu_ns / 1e6;
  b->res.disk_ms = (double)t->disk_ns / 1e6;
  if (status != 0) {
    snprintf(b->err, sizeof(b->err), "%s for %s failed%s%s",
             status == HIPD_ECOMPILE ? "compilation" : "the compiler", b->arch,
             log[0] ? ":\n" : "", log);
    finish(b, status);
    return;
  }
  b->res.bytes = blob->len;
  if (b->dev == NULL) {
    finish(b, 0);
    return;
  }
  b->fetched_ns = util_now_ns();
  module_acquire(b, blob);
}

void kernel_build(const kernel_request_t *req, kernel_done_fn done, void *ctx)
{
  /* Not calloc: it would clear the 16 KiB of err for every request, half
   * of a cache hit's instructions (callgrind, 2026-12-06). */
  build_t *b = malloc(sizeof(*b));
  int fail = 0, rc;

  if (b != NULL) {
    memset(b, 0, offsetof(build_t, err));
    b->err[0] = '\0';
  }
  if (b == NULL) {
    kernel_result_t r = {.status = HIPD_ENOMEM, .error = "out of memory"};
    done(ctx, &r);
    return;
  }
  b->done = done;
  b->ctx = ctx;
  b->start_ns = util_now_ns();
  b->dev = req->dev;
  if (req->sig != NULL) {
    b->known = *req->sig;
    b->has_known = 1;
  }
  b->max_threads = req->max_threads;
  b->tenant = req->tenant;
  b->drv = req->dev ? req->dev->drv : kernels_driver_for_arch(req->arch);
  snprintf(b->arch, sizeof(b->arch), "%s",
           req->dev ? req->dev->caps.arch : req->arch);
  b->source = malloc(req->source_len + 1);
  b->name = strdup(req->name);
  b->opts = calloc(req->nopts + 1, sizeof(char *));
  if (b->source == NULL || b->name == NULL || b->opts == NULL)
    fail = 1;
  else
    memcpy(b->source, req->source, req->source_len);
  for (size_t i = 0; !fail && i < req->nopts; i++, b->nopts++)
    if ((b->opts[i] = strdup(req->opts[i])) == NULL)
      fail = 1;
  if (fail) {
    snprintf(b->err, sizeof(b->err), "out of memory");
    finish(b, HIPD_ENOMEM);
    return;
  }
  b->source[req->source_len] = '\0';
  b->source_len = req->source_len;
  if (b->drv == NULL || b->drv->compile == NULL) {
    snprintf(b->err, sizeof(b->err),
             "no compiler in this build targets architecture '%s'", b->arch);
    finish(b, HIPD_ENOTSUP);
    return;
  }
  /* CUDA source: the platform's prelude in front (part of the key). */
  if (lang_is_cuda(req->lang)) {
    char *cuda;
    size_t cuda_len;

    if (lang_source(b->drv->platform, b->source, b->source_len, &cuda,
                    &cuda_len) != 0) {
      snprintf(b->err, sizeof(b->err), "out of memory");
      finish(b, HIPD_ENOMEM);
      return;
    }
    free(b->source);
    b->source = cuda;
    b->source_len = cuda_len;
  }

  /* The compiler id the helpers reported: the daemon never asks a
   * compiler itself. */
  if (fetch == fetch_local && compile_pool_compiler_id(b->drv->name) == NULL) {
    snprintf(b->err, sizeof(b->err),
             "no compile helper compiles for the %s driver (architecture "
             "'%s')",
             b->drv->name, b->arch);
    finish(b, HIPD_ENOTSUP);
    return;
  }

  /* Everything that changes the binary is in the key. */
  {
    kernels_key_in_t in = {
        .source = b->source,
        .source_len = b->source_len,
        .name = b->name,
        .opts = (const char *const *)b->opts,
        .nopts = b->nopts,
        .arch = b->arch,
        .drv = b->drv,
        .owner = per_tenant ? (int64_t)b->tenant : -1,
    };
    rc = kernels_key(&in, &b->res.key);
  }
  if (rc != 0) {
    snprintf(b->err, sizeof(b->err), "%s",
             rc == HIPD_ENOMEM ? "out of memory"
                               : "cannot start a SHA-256 digest for the "
                                 "kernel cache key");
    finish(b, rc);
    return;
  }
  b->local_key = b->res.key;
  /* The module of that binary is loaded here already: answered from it,
   * and the cache told of the use (kernels_set_touch). */
  if (!req->refresh && b->dev != NULL) {
    module_ref_t *m = module_loaded(b->dev, &b->res.key);

    if (m != NULL) {
      hits_loaded++;
      b->res.cache = CACHE_HIT_MEMORY;
      b->res.key = m->key; /* the cache's, as a fetch's answer has it */
      b->res.bytes = m->bytes;
      b->fetched_ns = util_now_ns();
      if (m->refs++ == 0)
        idle_modules--;
      b->mod = m;
      touch(&m->key);
      lookup_start(b);
      return;
    }
  }
  {
    kernels_fetch_t f = {
        .key = &b->res.key,
        .refresh = req->refresh,
        .drv = b->drv,
        .arch = b->arch,
        .source = b->source,
        .source_len = b->source_len,
        .name = b->name,
        .opts = (const char *const *)b->opts,
        .nopts = b->nopts,
        .tenant = b->tenant,
    };
    fetch(&f, compiled_cb, b);
  }
}

uint32_t kernel_epoch(const kernel_t *k)
{
  return k->mod->epoch;
}

void kernel_ref(kernel_t *k)
{
  k->refs++;
}

void kernel_unref(kernel_t *k)
{
  if (--k->refs > 0)
    return;
  module_unref(k->mod);
  free(k);
}
