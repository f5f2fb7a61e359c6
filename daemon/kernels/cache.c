/* SPDX-License-Identifier: MIT */
/* daemon/kernels/cache.c: the compiled-kernel cache (see cache.h): keys,
 * the memory tier and the requests in flight; the disk tier is in
 * cache_disk.c. */
#include "config.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "cache_disk.h"
#include "compile/compile_pool.h"
#include "hipd.h"
#include "log.h"
#include "util/array.h"
#include "util/clock.h"

#define LOG_SIZE 16384

static cache_warmed_fn warmed_hook; /* cache_set_warmed_hook() */

typedef struct mem_entry {
  cache_key_t key;
  cache_blob_t *blob;
  uint32_t tenant; /* whose compile made it: its bytes count against it */
  struct mem_entry *hnext;
  struct mem_entry *older, *newer; /* LRU list */
} mem_entry_t;

/* The bytes each tenant's entries hold in memory. */
typedef struct {
  uint32_t tenant;
  uint32_t entries;
  uint64_t bytes;
} tenant_bytes_t;

typedef struct waiter {
  cache_done_fn done;
  void *ctx;
  struct waiter *next;
} waiter_t;

/* A request in flight for one key: a disk load, then perhaps a compile;
 * every request for the key meanwhile waits on it. */
typedef struct inflight {
  uv_work_t work;    /* the disk load, on libuv's pool */
  compile_job_t job; /* a miss, on the compile pool */
  cache_key_t key;
  cache_compile_fn fn;
  void *arg;
  waiter_t *waiters; /* the first one is the requester */
  int refresh;       /* skip the disk: compile anew */
  struct inflight *hnext;
  /* results of the pool thread */
  int status;
  void *data;
  size_t len;
  cache_source_t source;
  int corrupt; /* CACHE_DISK_CORRUPT or _UNAUTHENTICATED: an entry removed */
  uint32_t disk_owner;     /* a disk hit's owner, as its header says */
  int warm;                /* a warm start's load nobody asked for (yet) */
  uint64_t disk_ns;        /* its disk read took (a pool thread) */
  uint64_t queued_ns;      /* given to the compile pool (loop) */
  uint64_t run_ns, ran_ns; /* its compile (a compile pool thread) */
  cache_timing_t helper;   /* the compile function's helper_ns, _cpu_ns */
  int warm_step;           /* the warm start's current load */
  char log[LOG_SIZE];
} inflight_t;

/* A key's parts are framed ([label length, label, data length, data], the
 * lengths as host uint64) and hashed as one stream. They are gathered in
 * buf and hashed at once when they fit (a kernel's source, its name, its
 * options...), else streamed through md: one digest call instead of four
 * a part, and SHA-256 fetched once (the keying was a third of a cache
 * hit's instructions, callgrind, 2026-12-06). The digest is the same
 * either way. */
#define KEYER_BUF 2048
struct cache_keyer {
  EVP_MD_CTX *md; /* NULL while everything fits in buf */
  size_t len;     /* bytes in buf */
  int failed;     /* a digest call failed: the key is random */
  unsigned char buf[KEYER_BUF];
};

static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md; /* fetched once; NULL: EVP_sha256() */

static void sha256_fetch(void)
{
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256(void)
{
  pthread_once(&sha256_once, sha256_fetch);
  return sha256_md != NULL ? sha256_md : EVP_sha256();
}

/* Stream @p k's gathered bytes into its digest, made now. */
static void keyer_spill(cache_keyer_t *k)
{
  if (k->md == NULL) {
    k->md = EVP_MD_CTX_new();
    if (k->md == NULL || EVP_DigestInit_ex(k->md, sha256(), NULL) != 1) {
      k->failed = 1;
      return;
    }
  }
  if (k->len > 0 && EVP_DigestUpdate(k->md, k->buf, k->len) != 1)
    k->failed = 1;
  k->len = 0;
}

static void keyer_put(cache_keyer_t *k, const void *data, size_t len)
{
  if (k->failed || len == 0)
    return;
  if (k->md == NULL && len <= KEYER_BUF - k->len) {
    memcpy(k->buf + k->len, data, len);
    k->len += len;
    return;
  }
  keyer_spill(k);
  if (!k->failed && EVP_DigestUpdate(k->md, data, len) != 1)
    k->failed = 1;
}

static struct {
  uv_loop_t *loop;
  uint64_t max_bytes;
  mem_entry_t *mem[CACHE_NBUCKETS];
  mem_entry_t *oldest, *newest;
  inflight_t *inflight[CACHE_NBUCKETS];
  unsigned ninflight; /* entries of inflight[] */
  unsigned nstores;   /* compiles' results being written to disk */
  cache_stats_t st;
  tenant_bytes_t *tenants; /* the memory tier's bytes per tenant */
  size_t ntenants, tenants_cap;
  struct {
    cache_key_t *keys; /* the disk's entries, most recently used first */
    uint64_t *lens;
    size_t n, next;
    uint64_t budget, loaded; /* bytes */
  } warm;
} cache = {0};

/* ------------------------------------------------------------------- keys */

int cache_keyer_create(cache_keyer_t **out)
{
  cache_keyer_t *k = malloc(sizeof(*k));

  *out = NULL;
  if (k == NULL)
    return HIPD_ENOMEM;
  /* SHA-256 is in every libcrypto, but a provider configuration (FIPS
   * without it) can still refuse it: asked here, once for the process. */
  if (EVP_MD_get_size(sha256()) != CACHE_KEY_SIZE) {
    free(k);
    return HIPD_EINTERNAL;
  }
  k->md = NULL;
  k->len = 0;
  k->failed = 0;
  *out = k;
  return 0;
}

cache_keyer_t *cache_keyer_new(void)
{
  cache_keyer_t *k;

  return cache_keyer_create(&k) == 0 ? k : NULL;
}

void cache_keyer_add(cache_keyer_t *k, const char *label, const void *data,
                     size_t len)
{
  uint64_t n = strlen(label), m = len;

  keyer_put(k, &n, sizeof(n));
  keyer_put(k, label, n);
  keyer_put(k, &m, sizeof(m));
  keyer_put(k, data, len);
}

void cache_keyer_add_str(cache_keyer_t *k, const char *label, const char *s)
{
  cache_keyer_add(k, label, s ? s : "", s ? strlen(s) : 0);
}

void cache_keyer_finish(cache_keyer_t *k, cache_key_t *out)
{
  unsigned n = 0;
  int ok;

  if (k->md == NULL && !k->failed)
    ok = EVP_Digest(k->buf, k->len, out->b, &n, sha256(), NULL) == 1;
  else {
    keyer_spill(k);
    ok = !k->failed && EVP_DigestFinal_ex(k->md, out->b, &n) == 1;
  }
  /* A digest that failed (libcrypto refusing a call mid-way: not seen)
   * must not make a key that another request's failure could match, and
   * so serve it someone else's binary: a random key only ever misses. */
  if (!ok || n != CACHE_KEY_SIZE)
    arc4random_buf(out->b, CACHE_KEY_SIZE);
  EVP_MD_CTX_free(k->md);
  free(k);
}

/* The default directory (cache.h): a path, not the disk tier. */
char *cache_default_dir(void)
{
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  char buf[4096];

  if (geteuid() == 0)
    return strdup("/var/cache/hipd");
  if (xdg != NULL && xdg[0] == '/')
    snprintf(buf, sizeof(buf), "%s/hipd", xdg);
  else if (home != NULL && home[0] == '/')
    snprintf(buf, sizeof(buf), "%s/.cache/hipd", home);
  else
    return NULL;
  return strdup(buf);
}

/* ------------------------------------------------------------------ blobs */

void cache_blob_ref(cache_blob_t *b)
{
  b->refs++;
}

cache_blob_t *cache_blob_new(const void *data, size_t len)
{
  cache_blob_t *b = malloc(sizeof(*b) + len);

  if (b == NULL)
    return NULL;
  b->refs = 1;
  b->len = len;
  memcpy(b->data, data, len);
  return b;
}

void cache_blob_unref(cache_blob_t *b)
{
  if (--b->refs == 0)
    free(b);
}

/* ------------------------------------------------------------ memory tier */

static mem_entry_t *mem_find(const cache_key_t *key)
{
  for (mem_entry_t *e = cache.mem[cache_key_bucket(key)]; e != NULL;
       e = e->hnext)
    if (cache_key_eq(&e->key, key))
      return e;
  return NULL;
}

static void lru_unlink(mem_entry_t *e)
{
  if (e->older)
    e->older->newer = e->newer;
  else
    cache.oldest = e->newer;
  if (e->newer)
    e->newer->older = e->older;
  else
    cache.newest = e->older;
  e->older = e->newer = NULL;
}

static void lru_push(mem_entry_t *e)
{
  e->older = cache.newest;
  e->newer = NULL;
  if (cache.newest)
    cache.newest->newer = e;
  else
    cache.oldest = e;
  cache.newest = e;
}

static tenant_bytes_t *tenant_bytes(uint32_t tenant, int make)
{
  for (size_t i = 0; i < cache.ntenants; i++)
    if (cache.tenants[i].tenant == tenant)
      return &cache.tenants[i];
  if (!make ||
      ARRAY_GROW(cache.tenants, cache.ntenants, cache.tenants_cap, 8) != 0)
    return NULL;
  cache.tenants[cache.ntenants] = (tenant_bytes_t){.tenant = tenant};
  return &cache.tenants[cache.ntenants++];
}

/* @p e's bytes count for its tenant (@p sign 1) or no longer (-1). */
static void tenant_count(const mem_entry_t *e, int sign)
{
  tenant_bytes_t *t = tenant_bytes(e->tenant, sign > 0);

  if (t == NULL)
    return; /* no memory for the record: the entry counts for nobody */
  if (sign > 0) {
    t->entries++;
    t->bytes += e->blob->len;
    return;
  }
  t->entries--;
  t->bytes -= e->blob->len < t->bytes ? e->blob->len : t->bytes;
  if (t->entries == 0)
    *t = cache.tenants[--cache.ntenants];
}

static void mem_remove(mem_entry_t *e)
{
  mem_entry_t **pp = &cache.mem[cache_key_bucket(&e->key)];

  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  lru_unlink(e);
  tenant_count(e, -1);
  cache.st.entries--;
  cache.st.bytes -= e->blob->len;
  cache_blob_unref(e->blob);
  free(e);
}

/* The entry to evict for room: the least recently used of the tenant that
 * holds the most bytes in memory, so that one tenant's large kernels push
 * out its own entries before anyone else's; never @p keep (the entry just
 * made). NULL if only @p keep is left. */
static mem_entry_t *mem_victim(const mem_entry_t *keep)
{
  const tenant_bytes_t *most = NULL;

  for (size_t i = 0; i < cache.ntenants; i++) {
    const tenant_bytes_t *t = &cache.tenants[i];
    /* keep's own tenant counts without it */
    uint64_t b = t->bytes - (t->tenant == keep->tenant ? keep->blob->len : 0);
    uint64_t mb =
        most == NULL ? 0
                     : most->bytes -
                           (most->tenant == keep->tenant ? keep->blob->len : 0);
    if (b > 0 && (most == NULL || b > mb))
      most = t;
  }
  for (mem_entry_t *e = cache.oldest; most != NULL && e != NULL; e = e->newer)
    if (e != keep && e->tenant == most->tenant)
      return e;
  /* Entries of a tenant without a record (out of memory): plain LRU. */
  return cache.oldest != keep ? cache.oldest : NULL;
}

static void mem_insert(const cache_key_t *key, cache_blob_t *blob,
                       uint32_t tenant)
{
  mem_entry_t *e = calloc(1, sizeof(*e)), *victim;

  if (e == NULL)
    return; /* the cache is an optimisation: carry on without the entry */
  e->key = *key;
  e->blob = blob;
  e->tenant = tenant;
  cache_blob_ref(blob);
  e->hnext = cache.mem[cache_key_bucket(key)];
  cache.mem[cache_key_bucket(key)] = e;
  lru_push(e);
  tenant_count(e, 1);
  cache.st.entries++;
  cache.st.bytes += blob->len;
  while (cache.st.bytes > cache.max_bytes && (victim = mem_victim(e)) != NULL) {
    mem_remove(victim);
    cache.st.evictions++;
  }
}

/* ---------------------------------------------------------------- request */

static void warm_next(void);

static cache_timing_t done_timing; /* cache_done_timing() */

const cache_timing_t *cache_done_timing(void)
{
  return &done_timing;
}

void cache_set_done_timing(const cache_timing_t *t)
{
  done_timing = t != NULL ? *t : (cache_timing_t){0};
}

/* Answer a request at once, with nothing timed (a memory hit, or a
 * failure before anything ran); from within another answer (a request
 * made by its callback), whose timing stays as it was. */
static void answer_at_once(cache_done_fn done, void *ctx, int status,
                           cache_blob_t *blob, cache_source_t source,
                           const char *log)
{
  cache_timing_t outer = done_timing;

  done_timing = (cache_timing_t){0};
  done(ctx, status, blob, source, log);
  done_timing = outer;
}

static inflight_t *inflight_find(const cache_key_t *key)
{
  for (inflight_t *p = cache.inflight[cache_key_bucket(key)]; p != NULL;
       p = p->hnext)
    if (cache_key_eq(&p->key, key))
      return p;
  return NULL;
}

static void inflight_remove(inflight_t *p)
{
  inflight_t **pp = &cache.inflight[cache_key_bucket(&p->key)];

  while (*pp != p)
    pp = &(*pp)->hnext;
  *pp = p->hnext;
  cache.ninflight--;
}

unsigned cache_pending(void)
{
  return cache.ninflight + cache.nstores;
}

/* libuv's pool: look for the entry on disk. A miss is compiled on the
 * compile pool next (load_after). */
static void load_work(uv_work_t *w)
{
  inflight_t *p = (inflight_t *)w;
  int why = CACHE_DISK_OK, rc;
  uint64_t t0 = util_now_ns();

  p->log[0] = '\0';
  rc = cache_disk_load(&p->key, &p->data, &p->len, &p->disk_owner, !p->warm,
                       &why);
  p->disk_ns = util_now_ns() - t0;
  if (rc == 0) {
    p->source = CACHE_HIT_DISK;
    return;
  }
  p->corrupt = why;
  p->source = CACHE_MISS;
}

/* A compile pool thread: compile. (The result goes to disk after the
 * answer: store_start.) */
static void compile_job_run(compile_job_t *job)
{
  inflight_t *p = (inflight_t *)((char *)job - offsetof(inflight_t, job));

  p->log[0] = '\0';
  p->source = CACHE_MISS;
  p->run_ns = util_now_ns();
  p->helper = (cache_timing_t){0};
  p->status =
      p->fn(p->arg, &p->data, &p->len, p->log, sizeof(p->log), &p->helper);
  p->ran_ns = util_now_ns();
}

/* A compile's result written to disk on libuv's pool, after its requests
 * were answered: the write and its two fsyncs are no part of a reply. */
typedef struct {
  uv_work_t work;
  cache_key_t key;
  cache_blob_t *blob; /* a reference, dropped on the loop */
  uint32_t owner;
  int ok;
} store_t;

static void store_work(uv_work_t *w)
{
  store_t *st = (store_t *)w;

  st->ok =
      cache_disk_store(&st->key, st->blob->data, st->blob->len, st->owner) == 0;
}

static void store_after(uv_work_t *w, int status)
{
  store_t *st = (store_t *)w;

  cache.nstores--;
  if (status == 0 && st->ok && cache_disk_dir() != NULL) {
    /* On disk too, the compile's tenant holds its bytes. */
    cache_disk_add(&st->key, st->blob->len, st->owner);
    cache_disk_evict(&st->key);
  }
  cache_blob_unref(st->blob);
  free(st);
}

static void store_start(const cache_key_t *key, cache_blob_t *blob,
                        uint32_t owner)
{
  store_t *st = calloc(1, sizeof(*st));

  if (st == NULL)
    return; /* memory only: it is compiled again after a restart */
  st->key = *key;
  st->blob = blob;
  cache_blob_ref(blob);
  st->owner = owner;
  cache.nstores++;
  uv_queue_work(cache.loop, &st->work, store_work, store_after);
}

/* The request is over (loop thread): record it, answer every waiter. */
static void inflight_finish(inflight_t *p)
{
  cache_timing_t timing;
  cache_blob_t *blob = NULL;
  int first = 1;

  inflight_remove(p);
  if (p->corrupt) {
    char hex[2 * CACHE_KEY_SIZE + 1];
    cache_disk_forget(&p->key);
    cache_key_hex(&p->key, hex);
    cache.st.corrupt++;
    if (p->corrupt == CACHE_DISK_UNAUTHENTICATED)
      cache.st.auth_failures++;
    log_warn(0, "kernel cache: entry %.16s... %s: discarded", hex,
             p->corrupt == CACHE_DISK_UNAUTHENTICATED ? "failed authentication"
                                                      : "is truncated");
  }
  if (p->status == 0) {
    blob = malloc(sizeof(*blob) + p->len);
    if (blob == NULL) {
      p->status = HIPD_ENOMEM;
    } else {
      blob->refs = 1;
      blob->len = p->len;
      memcpy(blob->data, p->data, p->len);
      mem_insert(&p->key, blob, p->job.tenant);
    }
  }
  free(p->data);
  if (p->warm) {
    /* Loaded ahead of any request: no hit yet, nor a use. */
    if (p->status == 0) {
      cache.st.warmed++;
      cache.warm.loaded += p->len;
      if (warmed_hook != NULL && blob != NULL)
        warmed_hook(&p->key, blob, p->job.tenant);
    }
  } else if (p->source == CACHE_HIT_DISK) {
    cache.st.hits_disk++;
  } else if (p->status == 0) {
    cache.st.misses++;
  } else {
    cache.st.compile_failures++;
  }
  if (p->source == CACHE_HIT_DISK && !p->warm)
    cache_disk_add(&p->key, p->len, p->disk_owner);
  timing = (cache_timing_t){
      .wait_ns = p->run_ns > p->queued_ns ? p->run_ns - p->queued_ns : 0,
      .compile_ns = p->ran_ns > p->run_ns ? p->ran_ns - p->run_ns : 0,
      .helper_ns = p->helper.helper_ns,
      .helper_cpu_ns = p->helper.helper_cpu_ns,
      .disk_ns = p->disk_ns};
  while (p->waiters != NULL) {
    waiter_t *wt = p->waiters;
    p->waiters = wt->next;
    if (!first)
      cache.st.waits++;
    done_timing = timing; /* a callback's request may have changed it */
    wt->done(wt->ctx, p->status, blob, first ? p->source : CACHE_WAITED,
             p->log);
    first = 0;
    free(wt);
  }
  done_timing = (cache_timing_t){0}; /* never read by an answer not ours */
  if (blob != NULL && p->source == CACHE_MISS && cache_disk_dir() != NULL)
    store_start(&p->key, blob, p->job.tenant);
  if (blob != NULL)
    cache_blob_unref(blob);
  if (p->warm_step)
    warm_next();
  free(p);
}

static void compile_job_done(compile_job_t *job)
{
  inflight_finish((inflight_t *)((char *)job - offsetof(inflight_t, job)));
}

/* Compile @p p on the compile pool (loop thread). */
static void compile_start(inflight_t *p)
{
  int rc;

  p->job.run = compile_job_run;
  p->job.done = compile_job_done;
  p->queued_ns = util_now_ns();
  rc = compile_pool_submit(&p->job);
  if (rc != 0) {
    p->status = rc;
    snprintf(p->log, sizeof(p->log), "%s",
             rc == HIPD_ESHUTDOWN ? "hipd is stopping: no compile starts"
                                  : "the compile pool refused the compile");
    inflight_finish(p);
  }
}

static void load_after(uv_work_t *w, int status)
{
  inflight_t *p = (inflight_t *)w;

  if (status != 0) {
    p->status = HIPD_ECANCELED;
    snprintf(p->log, sizeof(p->log), "canceled");
    inflight_finish(p);
    return;
  }
  if (p->source == CACHE_HIT_DISK) {
    if (p->warm)
      p->job.tenant = p->disk_owner; /* its bytes count against that uid */
    inflight_finish(p);
    return;
  }
  if (p->warm) {
    /* Gone meanwhile, or bad (then removed): nothing to warm. */
    p->status = HIPD_ENOENT;
    inflight_finish(p);
    return;
  }
  compile_start(p);
}

/* The warm start is over (or stopped): its list goes. */
static void warm_end(void)
{
  free(cache.warm.keys);
  free(cache.warm.lens);
  cache.warm.keys = NULL;
  cache.warm.lens = NULL;
  cache.warm.n = cache.warm.next = 0;
}

/* The warm start's next load: the most recently used entry left that fits
 * the budget and is not in memory or in flight. One at a time, so that the
 * pool stays free for requests. */
static void warm_next(void)
{
  while (cache.warm.next < cache.warm.n) {
    size_t i = cache.warm.next++;
    const cache_key_t *key = &cache.warm.keys[i];
    inflight_t *p;

    if (cache.warm.loaded + cache.warm.lens[i] > cache.warm.budget ||
        mem_find(key) != NULL || inflight_find(key) != NULL ||
        !cache_disk_known(key))
      continue;
    if ((p = calloc(1, sizeof(*p))) == NULL)
      break;
    p->key = *key;
    p->warm = p->warm_step = 1;
    p->hnext = cache.inflight[cache_key_bucket(key)];
    cache.inflight[cache_key_bucket(key)] = p;
    cache.ninflight++;
    uv_queue_work(cache.loop, &p->work, load_work, load_after);
    return;
  }
  warm_end();
}

void cache_warm(uint64_t budget)
{
  if (cache_disk_dir() == NULL || budget == 0 || cache.warm.keys != NULL)
    return;
  if (budget > cache.max_bytes)
    budget = cache.max_bytes;
  cache.warm.budget = budget;
  cache.warm.loaded = 0;
  if (cache_disk_recent(&cache.warm.keys, &cache.warm.lens, &cache.warm.n) != 0)
    return;
  cache.warm.next = 0;
  warm_next();
}

void cache_set_warmed_hook(cache_warmed_fn fn)
{
  warmed_hook = fn;
}

/* A use of @p key, whose memory entry is @p e (NULL: none). */
static void entry_touch(const cache_key_t *key, mem_entry_t *e)
{
  if (e != NULL) {
    lru_unlink(e);
    lru_push(e);
  }
  if (e != NULL || cache_disk_known(key))
    cache.st.hits_memory++;
  cache_disk_touch(key);
}

void cache_touch(const cache_key_t *key)
{
  entry_touch(key, mem_find(key));
}

void cache_each_recent(uint32_t tenant, size_t max_entries, uint64_t max_bytes,
                       void (*fn)(void *ctx, const cache_key_t *key,
                                  const cache_blob_t *blob),
                       void *ctx)
{
  uint64_t bytes = 0;
  size_t n = 0;

  for (mem_entry_t *e = cache.newest; e != NULL && n < max_entries;
       e = e->older) {
    if (e->tenant != tenant || bytes + e->blob->len > max_bytes)
      continue;
    bytes += e->blob->len;
    n++;
    fn(ctx, &e->key, e->blob);
  }
}

void cache_get(const cache_key_t *key, cache_compile_fn fn, void *arg,
               cache_done_fn done, void *ctx)
{
  cache_get_flags(key, 0, 0, fn, arg, done, ctx);
}

void cache_get_flags(const cache_key_t *key, int flags, uint32_t tenant,
                     cache_compile_fn fn, void *arg, cache_done_fn done,
                     void *ctx)
{
  mem_entry_t *e = mem_find(key);
  inflight_t *p;
  waiter_t *w;

  if (e != NULL && (flags & CACHE_REFRESH) && inflight_find(key) == NULL) {
    mem_remove(e); /* replaced by the fresh compile */
    e = NULL;
  }
  if (e != NULL) {
    entry_touch(key, e);
    answer_at_once(done, ctx, 0, e->blob, CACHE_HIT_MEMORY, "");
    return;
  }
  w = malloc(sizeof(*w));
  if (w == NULL) {
    answer_at_once(done, ctx, HIPD_ENOMEM, NULL, CACHE_MISS, "out of memory");
    return;
  }
  w->done = done;
  w->ctx = ctx;
  w->next = NULL;
  p = inflight_find(key);
  if (p != NULL && p->warm) {
    /* A warm start's load: the request takes it over, and compiles
     * should the entry not load. */
    p->warm = 0;
    p->fn = fn;
    p->arg = arg;
    p->job.tenant = tenant;
  }
  if (p != NULL) {
    /* Someone is compiling or loading it already: wait for that. */
    waiter_t **pp = &p->waiters;
    while (*pp != NULL)
      pp = &(*pp)->next;
    *pp = w;
    return;
  }
  p = calloc(1, sizeof(*p));
  if (p == NULL) {
    free(w);
    answer_at_once(done, ctx, HIPD_ENOMEM, NULL, CACHE_MISS, "out of memory");
    return;
  }
  p->key = *key;
  p->fn = fn;
  p->arg = arg;
  p->job.tenant = tenant; /* the first requester's turn compiles it */
  /* Only entries the index knows are read from disk: one cache_clear()
   * forgot may not be unlinked yet. */
  p->refresh = (flags & CACHE_REFRESH) != 0 || !cache_disk_known(key);
  p->waiters = w;
  p->hnext = cache.inflight[cache_key_bucket(key)];
  cache.inflight[cache_key_bucket(key)] = p;
  cache.ninflight++;
  if (cache_disk_dir() == NULL || p->refresh)
    compile_start(p);
  else
    uv_queue_work(cache.loop, &p->work, load_work, load_after);
}

int cache_has(const cache_key_t *key)
{
  return mem_find(key) != NULL;
}

int cache_inflight(const cache_key_t *key)
{
  return inflight_find(key) != NULL;
}

int cache_would_compile(const cache_key_t *key, int refresh)
{
  const inflight_t *p;

  if (refresh)
    return 1;
  if (cache_has(key))
    return 0;
  /* A warm start's load nobody asked for: the request takes it over
   * (cache_get_flags) and compiles should it fail, so it is admitted as a
   * compile, and keeps its source for that. */
  p = inflight_find(key);
  return p == NULL || p->warm;
}

void cache_get_stats(cache_stats_t *st)
{
  uint64_t evictions;

  *st = cache.st;
  cache_disk_stats(&st->disk_entries, &st->disk_bytes, &evictions);
  st->evictions += evictions;
  st->max_bytes = cache.max_bytes;
  st->dir = cache_disk_dir();
}

void cache_list(void (*fn)(void *ctx, const cache_key_t *key, uint64_t bytes,
                           uint64_t atime_s),
                void *ctx)
{
  /* Disk entries with their last use; memory entries not on disk. */
  cache_disk_list(fn, ctx);
  for (mem_entry_t *m = cache.oldest; m != NULL; m = m->newer)
    if (!cache_disk_known(&m->key))
      fn(ctx, &m->key, m->blob != NULL ? m->blob->len : 0, 0);
}

void cache_clear(void)
{
  while (cache.oldest != NULL)
    mem_remove(cache.oldest);
  cache_disk_clear();
}

int cache_init(uv_loop_t *loop, const char *dir, uint64_t max_bytes,
               hipd_err_t *err)
{
  int rc;

  err_clear(err);
  cache.loop = loop;
  cache.max_bytes = max_bytes;
  if (dir == NULL || dir[0] == '\0')
    return 0;
  if ((rc = cache_disk_open(loop, dir, max_bytes, err)) != 0)
    cache_shutdown();
  return rc;
}

void cache_shutdown(void)
{
  /* A compile's disk write runs on libuv's pool with the disk's state
   * (store_work): let it end first. The daemon's loop has drained by now
   * (none is left); a caller that stops its loop earlier waits here. */
  while (cache.nstores > 0)
    uv_run(cache.loop, UV_RUN_ONCE);
  /* No further warm load starts (one on the pool ends as any load). */
  warm_end();
  while (cache.oldest != NULL)
    mem_remove(cache.oldest);
  free(cache.tenants);
  cache.tenants = NULL;
  cache.ntenants = cache.tenants_cap = 0;
  cache_disk_close();
}
