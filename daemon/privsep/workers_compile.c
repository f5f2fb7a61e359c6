/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers_compile.c: the listener's compile and cache service
 * for its workers: compile (keyed here, from what is compiled), cache.stats,
 * compile.stats, cache.clear (wire.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/compile_pool.h"
#include "hipd.h"
#include "kernels/kernels.h"
#include "privsep/ipc.h"
#include "privsep/wire.h"
#include "privsep/workers_pool.h"

typedef struct {
  worker_t *w;
  uint32_t msgid;
  const driver_t *drv;
  char arch[64];
  char *name;
  char *source;
  size_t source_len;
  char **opts;
  size_t nopts;
  cache_key_t key;
  int admitted; /* compile_pool_admit()ted: released when answered */
} cjob_t;

static void cjob_free(cjob_t *j)
{
  free(j->name);
  free(j->source);
  for (size_t i = 0; i < j->nopts; i++)
    free(j->opts[i]);
  free(j->opts);
  free(j);
}

/* Keys a worker's cache.touch may name: those of the entries it was
 * answered or sent to preload lately. */
#define ANSWERED_KEYS 256

static void answered_add(worker_t *w, const cache_key_t *key)
{
  if (w->answered == NULL &&
      (w->answered = calloc(ANSWERED_KEYS, sizeof(*w->answered))) == NULL)
    return; /* its touches are not believed: hits go uncounted */
  w->answered[w->answered_next++ % ANSWERED_KEYS] = *key;
}

static int answered_has(const worker_t *w, const cache_key_t *key)
{
  if (w->answered == NULL)
    return 0;
  for (uint32_t i = 0; i < ANSWERED_KEYS && i < w->answered_next; i++)
    if (memcmp(w->answered[i].b, key->b, CACHE_KEY_SIZE) == 0)
      return 1;
  return 0;
}

static int cjob_compile_cb(void *arg, void **out, size_t *len, char *log,
                           size_t logsz, cache_timing_t *timing)
{
  cjob_t *j = arg;
  const char *names[1] = {j->name};

  if (j->source == NULL) { /* a waiter's: it never compiles */
    snprintf(log, logsz, "no source to compile");
    return HIPD_EINVAL;
  }
  return kernels_compile(j->drv, j->arch, j->source, j->source_len, names, 1,
                         (const char *const *)j->opts, j->nopts, out, len, log,
                         logsz, timing);
}

/* The answer to "compile": [status, source, key, log, image|nil, wait_ns,
 * compile_ns, helper_ns, helper_cpu_ns, disk_ns]. */
static void cjob_done_cb(void *ctx, int status, cache_blob_t *blob,
                         cache_source_t source, const char *log)
{
  cjob_t *j = ctx;
  worker_t *w = j->w;
  const cache_timing_t *t = cache_done_timing();
  msgpack_sbuffer sb;
  msgpack_packer pk;

  /* A worker that exited has its channel closed (broken); an adopted one
   * (workers_adopt) counts as exited from the start but is answered. */
  if (!w->ch.broken) {
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response(&pk, j->msgid);
    wire_pack_result(&pk, WIRE_COMPILE);
    msgpack_pack_int(&pk, status);
    msgpack_pack_int(&pk, (int)source);
    msgpack_pack_bin(&pk, CACHE_KEY_SIZE);
    msgpack_pack_bin_body(&pk, j->key.b, CACHE_KEY_SIZE);
    proto_pack_cstr(&pk, log != NULL ? log : "");
    if (status == 0 && blob != NULL) {
      msgpack_pack_bin(&pk, (uint32_t)blob->len);
      msgpack_pack_bin_body(&pk, blob->data, blob->len);
      answered_add(w, &j->key);
    } else {
      msgpack_pack_nil(&pk);
    }
    msgpack_pack_uint64(&pk, t->wait_ns);
    msgpack_pack_uint64(&pk, t->compile_ns);
    msgpack_pack_uint64(&pk, t->helper_ns);
    msgpack_pack_uint64(&pk, t->helper_cpu_ns);
    msgpack_pack_uint64(&pk, t->disk_ns);
    ipc_send(&w->ch, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
  if (j->admitted)
    compile_pool_release((uint32_t)w->uid, j->source_len);
  cjob_free(j);
  workers_unref(w);
}

static char *dup_bytes(const char *p, size_t n)
{
  char *s = malloc(n + 1);

  if (s != NULL) {
    memcpy(s, p, n);
    s[n] = '\0';
  }
  return s;
}

/* compile [driver, arch, source, kernel, [options], refresh]. The key is
 * computed here, from what is compiled: a worker never names the entry
 * its request fills. */
void workers_on_compile(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_compile_t *a = args;
  const msgpack_object *opts;
  cjob_t *j;
  char dname[32];

  _Static_assert(sizeof(dname) > 31 && sizeof(j->arch) > 63,
                 "the names compile's row bounds fit");
  if (a == NULL) {
    workers_reply_error(w, m->msgid, HIPD_EPARAMS,
                        "compile: malformed request");
    return;
  }
  opts = a->options.o;
  memcpy(dname, a->driver.p, a->driver.len);
  dname[a->driver.len] = '\0';
  if ((j = calloc(1, sizeof(*j))) == NULL) {
    workers_reply_error(w, m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  j->msgid = m->msgid;
  j->drv = kernels_driver_named(dname);
  memcpy(j->arch, a->arch.p, a->arch.len);
  j->arch[a->arch.len] = '\0';
  j->name = dup_bytes(a->kernel.p, a->kernel.len);
  j->source = dup_bytes(a->source.p, a->source.len);
  j->source_len = a->source.len;
  j->opts = calloc(opts->via.array.size + 1, sizeof(char *));
  if (j->name == NULL || j->source == NULL || j->opts == NULL) {
    cjob_free(j);
    workers_reply_error(w, m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  for (uint32_t i = 0; i < opts->via.array.size; i++, j->nopts++) {
    const char *o;
    size_t on;
    if (proto_obj_bytes(&opts->via.array.ptr[i], &o, &on) != 0 || on > 4096 ||
        (j->opts[i] = dup_bytes(o, on)) == NULL) {
      cjob_free(j);
      workers_reply_error(w, m->msgid, HIPD_EPARAMS, "compile: a bad option");
      return;
    }
  }
  /* Whether the compiler takes the architecture is the helper's to say:
   * the listener loads no compiler, not even to ask. */
  if (j->drv == NULL || compile_pool_compiler_id(j->drv->name) == NULL) {
    char msg[160];
    snprintf(msg, sizeof(msg), "no compiler of driver '%s' targets '%s'", dname,
             j->arch);
    cjob_free(j);
    workers_reply_error(w, m->msgid, HIPD_ENOTSUP, msg);
    return;
  }
  {
    kernels_key_in_t in = {
        .source = j->source,
        .source_len = j->source_len,
        .name = j->name,
        .opts = (const char *const *)j->opts,
        .nopts = j->nopts,
        .arch = j->arch,
        .drv = j->drv,
        /* The worker's uid, never one it names. */
        .owner =
            w->d->cfg.cache_scope == CACHE_SCOPE_TENANT ? (int64_t)w->uid : -1,
    };
    int rc = kernels_key(&in, &j->key);
    if (rc != 0) {
      cjob_free(j);
      workers_reply_error(w, m->msgid, rc,
                          "cannot compute the kernel's cache key");
      return;
    }
  }
  /* Held from here until answered, bounded per uid (compile_pool.h); a
   * memory hit holds nothing and is answered at once, and a request for a
   * key already being loaded or compiled for someone waits for that one,
   * holding no helper and (its source dropped) no bytes: never refused.
   * One that joins a warm start's load is admitted and keeps its source
   * (cache_would_compile): it compiles should the entry not load. Sixteen
   * processes of one uid starting the same program at once all get its
   * kernel. */
  if (!cache_would_compile(&j->key, (int)a->refresh.u)) {
    if (!cache_has(&j->key)) { /* it waits: its source is not needed */
      free(j->source);
      j->source = NULL;
      j->source_len = 0;
    }
  } else {
    hipd_err_t err;
    int rc = compile_pool_admit((uint32_t)w->uid, j->source_len, &err);
    if (rc != 0) {
      cjob_free(j);
      workers_reply_error(w, m->msgid, rc, err.msg);
      return;
    }
    j->admitted = 1;
  }
  j->w = w;
  w->refs++;
  cache_get_flags(&j->key, a->refresh.u ? CACHE_REFRESH : 0, (uint32_t)w->uid,
                  cjob_compile_cb, j, cjob_done_cb, j);
}

/* cache.stats []: the shared cache's counters, as an array (see
 * worker.c's reader for the order). */
#define PACK_COUNTER(T, name, kind, min, max) msgpack_pack_uint64(&pk, st.name);

void workers_on_cache_stats(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  cache_stats_t st;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  (void)args; /* none read (a row of WIRE_LAX) */
  cache_get_stats(&st);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  wire_pack_result(&pk, WIRE_CACHE_STATS);
  WIRE_CACHE_STATS_COUNTERS(PACK_COUNTER, _)
  proto_pack_cstr(&pk, st.dir != NULL ? st.dir : "");
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* compile.stats []: the compile pool's counters, as an array (see
 * worker.c's reader for the order). */
void workers_on_compile_stats(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  compile_pool_stats_t st;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  (void)args; /* none read (a row of WIRE_LAX) */
  compile_pool_get_stats(&st);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  wire_pack_result(&pk, WIRE_COMPILE_STATS);
  WIRE_COMPILE_STATS_COUNTERS(PACK_COUNTER, _)
  proto_pack_cstr(&pk, st.fsview_name != NULL ? st.fsview_name : "none");
  msgpack_pack_int64(&pk, st.uid);
  proto_pack_cstr(&pk, st.sandbox);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* cache.clear [peer uid]: the worker checked the peer; the listener
 * checks again, as it trusts no worker. */
void workers_on_cache_clear(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_cache_clear_t *a = args;
  uint64_t uid;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (a == NULL) {
    workers_reply_error(w, m->msgid, HIPD_EPARAMS,
                        "cache.clear: malformed request");
    return;
  }
  uid = a->uid.u;
  /* Every peer of a worker has its tenant's uid: a worker that names
   * another (0 included) is not believed. */
  if (uid != (uint64_t)w->uid) {
    workers_reply_error(w, m->msgid, HIPD_EPERM,
                        "cache.clear: not the peer's uid");
    return;
  }
  if (uid != 0 && uid != (uint64_t)geteuid()) {
    workers_reply_error(
        w, m->msgid, HIPD_EPERM,
        "only root or the daemon's user may clear the shared kernel "
        "cache");
    return;
  }
  cache_clear();
  /* Every worker's loaded modules answer no request without the cache
   * again; this one hears it before its answer (the channel keeps the
   * order). */
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_CACHE_CLEARED, 0);
  workers_broadcast(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  msgpack_pack_nil(&pk);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* cache.touch [key]: a worker answered a request from a module it had
 * loaded. A touch moves nothing but an entry's place in the LRU order and
 * the hit count, and only for a key the worker was answered or sent
 * lately (the listener trusts no worker: another's keys are not its to
 * move). */
void workers_on_cache_touch(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_cache_touch_t *a = args;
  worker_t *w = ctx;
  cache_key_t key;

  (void)m;
  if (a == NULL)
    return;
  memcpy(key.b, a->key.p, CACHE_KEY_SIZE);
  if (answered_has(w, &key))
    cache_touch(&key);
}

/* Most entries and bytes a worker is sent to preload (its idle modules
 * are 64 at most: kernels.h). */
#define PRELOAD_MAX_ENTRIES 32
#define PRELOAD_MAX_BYTES ((uint64_t)32 << 20)

/* Send worker @p ctx entry @p key to preload (a cache_each_recent()
 * callback, and the warm start's). */
static void preload_send(void *ctx, const cache_key_t *key,
                         const cache_blob_t *blob)
{
  worker_t *w = ctx;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_PRELOAD, 0);
  msgpack_pack_bin(&pk, CACHE_KEY_SIZE);
  msgpack_pack_bin_body(&pk, key->b, CACHE_KEY_SIZE);
  msgpack_pack_bin(&pk, (uint32_t)blob->len);
  msgpack_pack_bin_body(&pk, blob->data, blob->len);
  if (ipc_send(&w->ch, sb.data, sb.size) == 0) {
    w->preloads++;
    w->preload_bytes += blob->len;
    answered_add(w, key);
  }
  msgpack_sbuffer_destroy(&sb);
}

void workers_preload(worker_t *w)
{
  w->preload = 1;
  if (w->ch.broken)
    return;
  cache_each_recent((uint32_t)w->uid, PRELOAD_MAX_ENTRIES, PRELOAD_MAX_BYTES,
                    preload_send, w);
}

/* A warm start loaded an entry of @p tenant: its workers that were
 * started before (and so were sent what the cache held then) get it
 * too, while they have room. */
void workers_on_warmed(const cache_key_t *key, const cache_blob_t *blob,
                       uint32_t tenant)
{
  for (list_node_t *n = workers_pool.live.next; n != &workers_pool.live;
       n = n->next) {
    worker_t *w = list_entry(n, worker_t, node);

    if (w->uid == (uid_t)tenant && w->preload && !w->ch.broken &&
        w->preloads < PRELOAD_MAX_ENTRIES &&
        w->preload_bytes + blob->len <= PRELOAD_MAX_BYTES)
      preload_send(w, key, blob);
  }
}

void workers_send_compilers(worker_t *w)
{
  for (driver_t **dp = drivers_compiled(); *dp != NULL; dp++) {
    const char *id = compile_pool_compiler_id((*dp)->name);
    msgpack_sbuffer sb;
    msgpack_packer pk;

    if (id == NULL || strlen((*dp)->name) > 31 || strlen(id) > 255)
      continue;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    wire_pack_head(&pk, WIRE_COMPILER, 0);
    proto_pack_cstr(&pk, (*dp)->name);
    proto_pack_cstr(&pk, id);
    ipc_send(&w->ch, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
}
