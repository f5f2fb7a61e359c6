/* SPDX-License-Identifier: MIT */
/* daemon/kernels/cache.c: the compiled-kernel cache (see cache.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "compile/compile_pool.h"
#include "hipd.h"
#include "log.h"

#define NBUCKETS 4096
#define LOG_SIZE 16384
/* Version 2 of the format: entries carry an HMAC instead of version 1's
 * bare SHA-256, so that an entry hipd did not write is never loaded. */
#define MAGIC "HIPDKC\0\2"
#define SUFFIX ".hkc"
#define KEY_FILE ".hmac-key"
#define MAC_KEY_SIZE 32
#define MAC_SIZE 32

/* On-disk entry: this header, then the payload. The MAC is HMAC-SHA-256,
 * with the key of KEY_FILE, over the header up to the MAC (magic, sizes,
 * the entry's key, the payload length) and then the payload. */
typedef struct {
  char magic[8];
  uint32_t header_size;
  uint32_t reserved;
  uint8_t key[CACHE_KEY_SIZE];
  uint64_t payload_len;
  uint8_t mac[MAC_SIZE]; /* HMAC-SHA-256 of all of the above + payload */
} disk_header_t;

_Static_assert(offsetof(disk_header_t, mac) == 56 &&
                   sizeof(disk_header_t) == 88,
               "the header has no padding: its bytes are what the MAC covers");

/* Why a disk entry was discarded (pending_t.corrupt). */
enum { DISK_OK = 0, DISK_CORRUPT, DISK_UNAUTHENTICATED };

typedef struct mem_entry {
  cache_key_t key;
  cache_blob_t *blob;
  struct mem_entry *hnext;
  struct mem_entry *older, *newer; /* LRU list */
} mem_entry_t;

typedef struct disk_entry {
  cache_key_t key;
  uint64_t size;
  uint64_t last_use; /* ns since the epoch (file mtime across restarts) */
  struct disk_entry *hnext;
} disk_entry_t;

typedef struct waiter {
  cache_done_fn done;
  void *ctx;
  struct waiter *next;
} waiter_t;

typedef struct pending {
  uv_work_t work;    /* the disk load, on libuv's pool */
  compile_job_t job; /* a miss, on the compile pool */
  cache_key_t key;
  cache_compile_fn fn;
  void *arg;
  waiter_t *waiters; /* the first one is the requester */
  int refresh;       /* skip the disk: compile anew */
  struct pending *hnext;
  /* results of the pool thread */
  int status;
  void *data;
  size_t len;
  cache_source_t source;
  int corrupt; /* DISK_CORRUPT or DISK_UNAUTHENTICATED: an entry removed */
  int stored;  /* written to disk */
  uint64_t disk_size;
  char log[LOG_SIZE];
} pending_t;

struct cache_keyer {
  EVP_MD_CTX *md;
};

static struct {
  uv_loop_t *loop;
  char *dir;
  int dfd;                       /* dir, opened and checked at start */
  EVP_MAC *hmac;                 /* fetched once, shared by threads */
  uint8_t mac_key[MAC_KEY_SIZE]; /* the contents of KEY_FILE */
  uint64_t max_bytes;
  mem_entry_t *mem[NBUCKETS];
  mem_entry_t *oldest, *newest;
  disk_entry_t *disk[NBUCKETS];
  pending_t *pending[NBUCKETS];
  unsigned npending; /* entries of pending[] */
  cache_stats_t st;
} C = {.dfd = -1};

/* ------------------------------------------------------------------- keys */

int cache_keyer_create(cache_keyer_t **out)
{
  cache_keyer_t *k = malloc(sizeof(*k));

  *out = NULL;
  if (k == NULL)
    return HIPD_ENOMEM;
  k->md = EVP_MD_CTX_new();
  if (k->md == NULL) {
    free(k);
    return HIPD_ENOMEM;
  }
  /* SHA-256 is in every libcrypto, but a provider configuration (FIPS
   * without it) can still refuse it. */
  if (EVP_DigestInit_ex(k->md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(k->md);
    free(k);
    return HIPD_EINTERNAL;
  }
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

  EVP_DigestUpdate(k->md, &n, sizeof(n));
  EVP_DigestUpdate(k->md, label, n);
  EVP_DigestUpdate(k->md, &m, sizeof(m));
  EVP_DigestUpdate(k->md, data, len);
}

void cache_keyer_add_str(cache_keyer_t *k, const char *label, const char *s)
{
  cache_keyer_add(k, label, s ? s : "", s ? strlen(s) : 0);
}

void cache_keyer_finish(cache_keyer_t *k, cache_key_t *out)
{
  unsigned n = 0;

  EVP_DigestFinal_ex(k->md, out->b, &n);
  EVP_MD_CTX_free(k->md);
  free(k);
}

void cache_key_hex(const cache_key_t *key, char out[2 * CACHE_KEY_SIZE + 1])
{
  static const char hex[] = "0123456789abcdef";

  for (int i = 0; i < CACHE_KEY_SIZE; i++) {
    out[2 * i] = hex[key->b[i] >> 4];
    out[2 * i + 1] = hex[key->b[i] & 15];
  }
  out[2 * CACHE_KEY_SIZE] = '\0';
}

static int key_from_hex(const char *s, cache_key_t *key)
{
  for (int i = 0; i < CACHE_KEY_SIZE; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1)
      return -1;
    key->b[i] = (uint8_t)v;
  }
  return 0;
}

static unsigned bucket(const cache_key_t *key)
{
  return ((unsigned)key->b[0] | (unsigned)key->b[1] << 8) % NBUCKETS;
}

static int key_eq(const cache_key_t *a, const cache_key_t *b)
{
  return memcmp(a->b, b->b, CACHE_KEY_SIZE) == 0;
}

/* Strictly increasing wall-clock nanoseconds: entries made within one clock
 * tick still have an order. */
static uint64_t use_stamp(void)
{
  static uint64_t last;
  struct timespec ts;
  uint64_t now;

  clock_gettime(CLOCK_REALTIME, &ts);
  now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  last = now > last ? now : last + 1;
  return last;
}

/* The authenticator of an entry: HMAC-SHA-256 with C.mac_key over @p h
 * up to its mac field, then the payload. Any thread. @return 0, or -1 if
 * libcrypto failed (the entry is then neither written nor trusted). */
static int entry_mac(const disk_header_t *h, const void *data, size_t len,
                     uint8_t out[MAC_SIZE])
{
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
      OSSL_PARAM_construct_end(),
  };
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(C.hmac);
  size_t n = 0;
  int ok;

  ok = ctx != NULL &&
       EVP_MAC_init(ctx, C.mac_key, sizeof(C.mac_key), params) == 1 &&
       EVP_MAC_update(ctx, (const unsigned char *)h,
                      offsetof(disk_header_t, mac)) == 1 &&
       EVP_MAC_update(ctx, data, len) == 1 &&
       EVP_MAC_final(ctx, out, &n, MAC_SIZE) == 1 && n == MAC_SIZE;
  EVP_MAC_CTX_free(ctx);
  return ok ? 0 : -1;
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
  for (mem_entry_t *e = C.mem[bucket(key)]; e != NULL; e = e->hnext)
    if (key_eq(&e->key, key))
      return e;
  return NULL;
}

static void lru_unlink(mem_entry_t *e)
{
  if (e->older)
    e->older->newer = e->newer;
  else
    C.oldest = e->newer;
  if (e->newer)
    e->newer->older = e->older;
  else
    C.newest = e->older;
  e->older = e->newer = NULL;
}

static void lru_push(mem_entry_t *e)
{
  e->older = C.newest;
  e->newer = NULL;
  if (C.newest)
    C.newest->newer = e;
  else
    C.oldest = e;
  C.newest = e;
}

static void mem_remove(mem_entry_t *e)
{
  mem_entry_t **pp = &C.mem[bucket(&e->key)];

  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  lru_unlink(e);
  C.st.entries--;
  C.st.bytes -= e->blob->len;
  cache_blob_unref(e->blob);
  free(e);
}

static void mem_insert(const cache_key_t *key, cache_blob_t *blob)
{
  mem_entry_t *e = calloc(1, sizeof(*e));

  if (e == NULL)
    return; /* the cache is an optimisation: carry on without the entry */
  e->key = *key;
  e->blob = blob;
  cache_blob_ref(blob);
  e->hnext = C.mem[bucket(key)];
  C.mem[bucket(key)] = e;
  lru_push(e);
  C.st.entries++;
  C.st.bytes += blob->len;
  while (C.st.bytes > C.max_bytes && C.oldest != NULL && C.oldest != e) {
    mem_remove(C.oldest);
    C.st.evictions++;
  }
}

/* -------------------------------------------------------------- disk tier */

/* An entry's file name, relative to C.dfd. */
typedef struct {
  char s[2 * CACHE_KEY_SIZE + sizeof(SUFFIX)];
} entry_name_t;

static entry_name_t entry_name(const cache_key_t *key)
{
  entry_name_t n;

  cache_key_hex(key, n.s);
  memcpy(n.s + 2 * CACHE_KEY_SIZE, SUFFIX, sizeof(SUFFIX));
  return n;
}

static disk_entry_t *disk_find(const cache_key_t *key)
{
  for (disk_entry_t *e = C.disk[bucket(key)]; e != NULL; e = e->hnext)
    if (key_eq(&e->key, key))
      return e;
  return NULL;
}

static void disk_add(const cache_key_t *key, uint64_t size, uint64_t when)
{
  disk_entry_t *e = disk_find(key);

  if (e != NULL) {
    C.st.disk_bytes -= e->size;
  } else {
    e = calloc(1, sizeof(*e));
    if (e == NULL)
      return;
    e->key = *key;
    e->hnext = C.disk[bucket(key)];
    C.disk[bucket(key)] = e;
    C.st.disk_entries++;
  }
  e->size = size;
  e->last_use = when;
  C.st.disk_bytes += size;
}

static void disk_forget(disk_entry_t *e)
{
  disk_entry_t **pp = &C.disk[bucket(&e->key)];

  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  C.st.disk_entries--;
  C.st.disk_bytes -= e->size;
  free(e);
}

/* A removal on the pool holds its own descriptor of the directory: it
 * may run after cache_shutdown() closed C.dfd. */
typedef struct {
  uv_work_t work;
  int dfd;
  entry_name_t name;
} unlink_job_t;

static void unlink_work(uv_work_t *w)
{
  unlink_job_t *j = (unlink_job_t *)w;

  unlinkat(j->dfd, j->name.s, 0);
}

static void unlink_after(uv_work_t *w, int status)
{
  unlink_job_t *j = (unlink_job_t *)w;

  (void)status;
  close(j->dfd);
  free(j);
}

static void unlink_async(const cache_key_t *key)
{
  unlink_job_t *j = malloc(sizeof(*j));

  if (j == NULL)
    return;
  j->dfd = fcntl(C.dfd, F_DUPFD_CLOEXEC, 0);
  if (j->dfd < 0) {
    free(j);
    return;
  }
  j->name = entry_name(key);
  uv_queue_work(C.loop, &j->work, unlink_work, unlink_after);
}

/* Remove least recently used disk entries until under the cap. */
static void disk_evict(void)
{
  while (C.st.disk_bytes > C.max_bytes && C.st.disk_entries > 1) {
    disk_entry_t *oldest = NULL;
    for (int b = 0; b < NBUCKETS; b++)
      for (disk_entry_t *e = C.disk[b]; e != NULL; e = e->hnext)
        if (oldest == NULL || e->last_use < oldest->last_use)
          oldest = e;
    if (oldest == NULL)
      break;
    unlink_async(&oldest->key);
    disk_forget(oldest);
    C.st.evictions++;
  }
}

static int write_all(int fd, const void *p, size_t n)
{
  const char *c = p;

  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n)
{
  char *c = p;

  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Pool thread: write an authenticated entry atomically (a 0600 temporary
 * file, synced, renamed into place). @return 0 or -1. */
static int disk_store(const cache_key_t *key, const void *data, size_t len)
{
  entry_name_t name = entry_name(key);
  char tmp[64];
  disk_header_t h = {0};
  int fd;

  snprintf(tmp, sizeof(tmp), ".tmp-%d-%lx", (int)getpid(),
           (unsigned long)(uintptr_t)data ^ (unsigned long)time(NULL));
  memcpy(h.magic, MAGIC, 8);
  h.header_size = sizeof(h);
  memcpy(h.key, key->b, CACHE_KEY_SIZE);
  h.payload_len = len;
  if (entry_mac(&h, data, len, h.mac) != 0)
    return -1;
  fd = openat(C.dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
              0600);
  if (fd < 0)
    return -1;
  if (write_all(fd, &h, sizeof(h)) != 0 || write_all(fd, data, len) != 0 ||
      fsync(fd) != 0) {
    close(fd);
    unlinkat(C.dfd, tmp, 0);
    return -1;
  }
  close(fd);
  if (renameat(C.dfd, tmp, C.dfd, name.s) != 0) {
    unlinkat(C.dfd, tmp, 0);
    return -1;
  }
  fsync(C.dfd);
  return 0;
}

/* Pool thread: load and verify an entry. @return 0 with *data; -ENOENT
 * when there is none; -EBADMSG when it was bad and is now removed, with
 * *why DISK_CORRUPT (truncated, sizes that disagree) or
 * DISK_UNAUTHENTICATED (not a regular file of ours, another format
 * version, another key in the header, or a MAC that does not verify:
 * planted, changed, or written with another key). */
static int disk_load(const cache_key_t *key, void **data, size_t *len,
                     int *why_out)
{
  entry_name_t name = entry_name(key);
  disk_header_t h;
  struct stat st;
  uint8_t mac[MAC_SIZE];
  void *buf = NULL;
  int fd, why = DISK_UNAUTHENTICATED;

  fd = openat(C.dfd, name.s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return -ENOENT;
  if (fd < 0) { /* e.g. ELOOP: a symbolic link */
    unlinkat(C.dfd, name.s, 0);
    *why_out = DISK_UNAUTHENTICATED;
    return -EBADMSG;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022) != 0)
    goto bad;
  why = DISK_CORRUPT;
  if (read_all(fd, &h, sizeof(h)) != 0)
    goto bad;
  why = DISK_UNAUTHENTICATED;
  if (memcmp(h.magic, MAGIC, 8) != 0 || h.header_size != sizeof(h) ||
      memcmp(h.key, key->b, CACHE_KEY_SIZE) != 0)
    goto bad;
  why = DISK_CORRUPT;
  if (h.payload_len != (uint64_t)st.st_size - sizeof(h))
    goto bad;
  buf = malloc(h.payload_len ? h.payload_len : 1);
  if (buf == NULL || read_all(fd, buf, h.payload_len) != 0)
    goto bad;
  why = DISK_UNAUTHENTICATED;
  if (entry_mac(&h, buf, h.payload_len, mac) != 0 ||
      CRYPTO_memcmp(mac, h.mac, MAC_SIZE) != 0)
    goto bad;
  /* Mark it used, for LRU eviction across restarts. */
  futimens(fd, NULL);
  close(fd);
  *data = buf;
  *len = h.payload_len;
  return 0;

bad:
  free(buf);
  close(fd);
  unlinkat(C.dfd, name.s, 0);
  *why_out = why;
  return -EBADMSG;
}

/* ---------------------------------------------------------------- request */

static pending_t *pending_find(const cache_key_t *key)
{
  for (pending_t *p = C.pending[bucket(key)]; p != NULL; p = p->hnext)
    if (key_eq(&p->key, key))
      return p;
  return NULL;
}

static void pending_remove(pending_t *p)
{
  pending_t **pp = &C.pending[bucket(&p->key)];

  while (*pp != p)
    pp = &(*pp)->hnext;
  *pp = p->hnext;
  C.npending--;
}

unsigned cache_pending(void)
{
  return C.npending;
}

/* libuv's pool: look for the entry on disk. A miss is compiled on the
 * compile pool next (load_after). */
static void load_work(uv_work_t *w)
{
  pending_t *p = (pending_t *)w;
  int why = DISK_OK;

  p->log[0] = '\0';
  if (disk_load(&p->key, &p->data, &p->len, &why) == 0) {
    p->source = CACHE_HIT_DISK;
    return;
  }
  p->corrupt = why;
  p->source = CACHE_MISS;
}

/* A compile pool thread: compile, and store the result on disk. */
static void compile_job_run(compile_job_t *job)
{
  pending_t *p = (pending_t *)((char *)job - offsetof(pending_t, job));

  p->log[0] = '\0';
  p->source = CACHE_MISS;
  p->status = p->fn(p->arg, &p->data, &p->len, p->log, sizeof(p->log));
  if (p->status == 0 && C.dir != NULL &&
      disk_store(&p->key, p->data, p->len) == 0) {
    p->stored = 1;
    p->disk_size = p->len + sizeof(disk_header_t);
  }
}

/* The request is over (loop thread): record it, answer every waiter. */
static void pending_finish(pending_t *p)
{
  cache_blob_t *blob = NULL;
  int first = 1;

  pending_remove(p);
  if (p->corrupt) {
    char hex[2 * CACHE_KEY_SIZE + 1];
    disk_entry_t *e = disk_find(&p->key);
    if (e != NULL)
      disk_forget(e);
    cache_key_hex(&p->key, hex);
    C.st.corrupt++;
    if (p->corrupt == DISK_UNAUTHENTICATED)
      C.st.auth_failures++;
    log_warn(0, "kernel cache: entry %.16s... %s: discarded", hex,
             p->corrupt == DISK_UNAUTHENTICATED ? "failed authentication"
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
      mem_insert(&p->key, blob);
    }
  }
  free(p->data);
  if (p->source == CACHE_HIT_DISK)
    C.st.hits_disk++;
  else if (p->status == 0)
    C.st.misses++;
  else
    C.st.compile_failures++;
  if (p->source == CACHE_HIT_DISK)
    disk_add(&p->key, p->len + sizeof(disk_header_t), use_stamp());
  if (p->stored) {
    disk_add(&p->key, p->disk_size, use_stamp());
    disk_evict();
  }
  while (p->waiters != NULL) {
    waiter_t *wt = p->waiters;
    p->waiters = wt->next;
    if (!first)
      C.st.waits++;
    wt->done(wt->ctx, p->status, blob, first ? p->source : CACHE_WAITED,
             p->log);
    first = 0;
    free(wt);
  }
  if (blob != NULL)
    cache_blob_unref(blob);
  free(p);
}

static void compile_job_done(compile_job_t *job)
{
  pending_finish((pending_t *)((char *)job - offsetof(pending_t, job)));
}

/* Compile @p p on the compile pool (loop thread). */
static void compile_start(pending_t *p)
{
  int rc;

  p->job.run = compile_job_run;
  p->job.done = compile_job_done;
  rc = compile_pool_submit(&p->job);
  if (rc != 0) {
    p->status = rc;
    snprintf(p->log, sizeof(p->log), "%s",
             rc == HIPD_ESHUTDOWN ? "hipd is stopping: no compile starts"
                                  : "the compile pool refused the compile");
    pending_finish(p);
  }
}

static void load_after(uv_work_t *w, int status)
{
  pending_t *p = (pending_t *)w;

  if (status != 0) {
    p->status = HIPD_ECANCELED;
    snprintf(p->log, sizeof(p->log), "canceled");
    pending_finish(p);
    return;
  }
  if (p->source == CACHE_HIT_DISK) {
    pending_finish(p);
    return;
  }
  compile_start(p);
}

void cache_get(const cache_key_t *key, cache_compile_fn fn, void *arg,
               cache_done_fn done, void *ctx)
{
  cache_get_flags(key, 0, fn, arg, done, ctx);
}

void cache_get_flags(const cache_key_t *key, int flags, cache_compile_fn fn,
                     void *arg, cache_done_fn done, void *ctx)
{
  mem_entry_t *e = mem_find(key);
  pending_t *p;
  waiter_t *w;

  if (e != NULL && (flags & CACHE_REFRESH) && pending_find(key) == NULL) {
    mem_remove(e); /* replaced by the fresh compile */
    e = NULL;
  }
  if (e != NULL) {
    lru_unlink(e);
    lru_push(e);
    C.st.hits_memory++;
    disk_entry_t *d = disk_find(key);
    if (d != NULL)
      d->last_use = use_stamp();
    done(ctx, 0, e->blob, CACHE_HIT_MEMORY, "");
    return;
  }
  w = malloc(sizeof(*w));
  if (w == NULL) {
    done(ctx, HIPD_ENOMEM, NULL, CACHE_MISS, "out of memory");
    return;
  }
  w->done = done;
  w->ctx = ctx;
  w->next = NULL;
  p = pending_find(key);
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
    done(ctx, HIPD_ENOMEM, NULL, CACHE_MISS, "out of memory");
    return;
  }
  p->key = *key;
  p->fn = fn;
  p->arg = arg;
  /* Only entries the index knows are read from disk: one cache_clear()
   * forgot may not be unlinked yet. */
  p->refresh = (flags & CACHE_REFRESH) != 0 || disk_find(key) == NULL;
  p->waiters = w;
  p->hnext = C.pending[bucket(key)];
  C.pending[bucket(key)] = p;
  C.npending++;
  if (C.dir == NULL || p->refresh)
    compile_start(p);
  else
    uv_queue_work(C.loop, &p->work, load_work, load_after);
}

int cache_has(const cache_key_t *key)
{
  return mem_find(key) != NULL;
}

void cache_get_stats(cache_stats_t *st)
{
  *st = C.st;
  st->max_bytes = C.max_bytes;
  st->dir = C.dir;
}

void cache_list(void (*fn)(void *ctx, const cache_key_t *key, uint64_t bytes,
                           uint64_t atime_s),
                void *ctx)
{
  /* Disk entries with their last use; memory entries not on disk. */
  for (int b = 0; b < NBUCKETS; b++)
    for (disk_entry_t *e = C.disk[b]; e != NULL; e = e->hnext)
      fn(ctx, &e->key, e->size, e->last_use / 1000000000u);
  for (mem_entry_t *m = C.oldest; m != NULL; m = m->newer) {
    int on_disk = 0;
    for (disk_entry_t *e = C.disk[bucket(&m->key)]; e != NULL && !on_disk;
         e = e->hnext)
      on_disk = memcmp(e->key.b, m->key.b, CACHE_KEY_SIZE) == 0;
    if (!on_disk)
      fn(ctx, &m->key, m->blob != NULL ? m->blob->len : 0, 0);
  }
}

void cache_clear(void)
{
  while (C.oldest != NULL)
    mem_remove(C.oldest);
  for (int b = 0; b < NBUCKETS; b++)
    while (C.disk[b] != NULL) {
      unlink_async(&C.disk[b]->key);
      disk_forget(C.disk[b]);
    }
}

/* ------------------------------------------------------------ start, stop */

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

static int mkdir_p(const char *path, mode_t mode)
{
  char buf[4096];

  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  }
  return mkdir(buf, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* What hipd asks of everything in the cache directory: its own, and
 * writable by nobody else (@p forbidden: the mode bits that must be
 * clear). @return 0, or HIPD_EPERM with the reason in @p err. */
static int check_owner(const char *what, const char *path,
                       const struct stat *st, mode_t forbidden, hipd_err_t *err)
{
  if (st->st_uid != geteuid()) {
    return err_set(err, HIPD_EPERM,
                   "%s %s is owned by uid %u, not hipd's uid %u", what, path,
                   (unsigned)st->st_uid, (unsigned)geteuid());
  }
  if ((st->st_mode & forbidden) != 0) {
    return err_set(err, HIPD_EPERM,
                   "%s %s is %s by its group or others (mode %04o)", what, path,
                   forbidden & 044 ? "readable or writable" : "writable",
                   (unsigned)(st->st_mode & 07777));
  }
  return 0;
}

/* Create KEY_FILE with fresh random bytes: written to a temporary file
 * (O_EXCL, O_NOFOLLOW, 0600) and linked into place, so that no reader
 * ever sees a partial key; if another hipd linked its key first, that one
 * stays. @return 0 or a negative code with @p err. */
static int key_create(hipd_err_t *err)
{
  uint8_t k[MAC_KEY_SIZE];
  char tmp[64];
  int fd, rc = 0;

  if (RAND_bytes(k, sizeof(k)) != 1) {
    return err_set(err, HIPD_EIO,
                   "cannot make the cache's authentication key: the "
                   "random generator failed");
  }
  snprintf(tmp, sizeof(tmp), ".tmp-key-%d", (int)getpid());
  unlinkat(C.dfd, tmp, 0); /* ours from a run that died here */
  fd = openat(C.dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
              0600);
  if (fd < 0 || fchmod(fd, 0600) != 0 || write_all(fd, k, sizeof(k)) != 0 ||
      fsync(fd) != 0 ||
      (linkat(C.dfd, tmp, C.dfd, KEY_FILE, 0) != 0 && errno != EEXIST)) {
    rc = err_set(err, HIPD_EIO, "cannot create the cache key file %s/%s: %s",
                 C.dir, KEY_FILE, strerror(errno));
  } else {
    fsync(C.dfd);
    log_info(0, "kernel cache: created the authentication key %s/%s", C.dir,
             KEY_FILE);
  }
  if (fd >= 0)
    close(fd);
  unlinkat(C.dfd, tmp, 0);
  OPENSSL_cleanse(k, sizeof(k));
  return rc;
}

/* Read KEY_FILE into C.mac_key, creating it at first start. Refuses a key
 * that is not a regular file of hipd's euid, exactly MAC_KEY_SIZE bytes,
 * with no permission for group or others. @return 0 or a negative code. */
static int key_load(hipd_err_t *err)
{
  char path[4200];
  struct stat st;
  int fd, rc;

  snprintf(path, sizeof(path), "%s/%s", C.dir, KEY_FILE);
  fd = openat(C.dfd, KEY_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    if ((rc = key_create(err)) != 0)
      return rc;
    fd =
        openat(C.dfd, KEY_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  }
  if (fd < 0) {
    if (errno == ELOOP)
      return err_set(err, HIPD_EPERM, "cache key file %s is a symbolic link",
                     path);
    return err_set(err, HIPD_EIO, "cannot open the cache key file %s: %s", path,
                   strerror(errno));
  }
  rc = HIPD_EPERM;
  if (fstat(fd, &st) != 0) {
    rc = err_set(err, HIPD_EIO, "cannot stat the cache key file %s: %s", path,
                 strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    err_set(err, rc, "cache key file %s is not a regular file", path);
  } else if (check_owner("cache key file", path, &st, 077, err) != 0) {
    /* err says why */
  } else if (st.st_size != MAC_KEY_SIZE) {
    err_set(err, rc, "cache key file %s has %lld bytes, not %d", path,
            (long long)st.st_size, MAC_KEY_SIZE);
  } else if (read_all(fd, C.mac_key, sizeof(C.mac_key)) != 0) {
    rc = err_set(err, HIPD_EIO, "cannot read the cache key file %s", path);
  } else {
    rc = 0;
  }
  close(fd);
  return rc;
}

/* Open @p dir (no trailing slash) as C.dfd: a real directory, not a
 * symbolic link, of hipd's euid, writable by nobody else. The checks are
 * made on the descriptor that is kept, and compared with lstat(), so that
 * what was checked is what is used. */
static int dir_open(const char *dir, hipd_err_t *err)
{
  struct stat lst, st;
  int rc;

  if (lstat(dir, &lst) != 0) {
    return err_set(err, HIPD_EIO, "cannot open the cache directory %s: %s", dir,
                   strerror(errno));
  }
  if (S_ISLNK(lst.st_mode)) {
    return err_set(err, HIPD_EPERM, "cache directory %s is a symbolic link",
                   dir);
  }
  if (!S_ISDIR(lst.st_mode)) {
    return err_set(err, HIPD_EPERM, "cache directory %s is not a directory",
                   dir);
  }
  C.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (C.dfd < 0 || fstat(C.dfd, &st) != 0) {
    return err_set(err, HIPD_EIO, "cannot open the cache directory %s: %s", dir,
                   strerror(errno));
  }
  if (st.st_dev != lst.st_dev || st.st_ino != lst.st_ino) {
    return err_set(err, HIPD_EPERM,
                   "cache directory %s changed while it was opened", dir);
  }
  if ((rc = check_owner("cache directory", dir, &st, 022, err)) != 0)
    return rc;
  return 0;
}

/* Index the entries on disk. An entry file that is a symbolic link, not a
 * regular file, not hipd's, or writable by others stops the start: it
 * means someone else has had the directory. */
static int dir_scan(hipd_err_t *err)
{
  int fd = fcntl(C.dfd, F_DUPFD_CLOEXEC, 0);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *de;
  int rc = 0;

  if (d == NULL) {
    if (fd >= 0)
      close(fd);
    return err_set(err, HIPD_EIO, "cannot read the cache directory %s: %s",
                   C.dir, strerror(errno));
  }
  while (rc == 0 && (de = readdir(d)) != NULL) {
    char path[4200];
    struct stat st;
    cache_key_t key;
    size_t n = strlen(de->d_name);

    if (strncmp(de->d_name, ".tmp-", 5) == 0) {
      unlinkat(C.dfd, de->d_name, 0); /* an interrupted write */
      continue;
    }
    if (n != 2 * CACHE_KEY_SIZE + strlen(SUFFIX) ||
        strcmp(de->d_name + 2 * CACHE_KEY_SIZE, SUFFIX) != 0 ||
        key_from_hex(de->d_name, &key) != 0 ||
        fstatat(C.dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    snprintf(path, sizeof(path), "%s/%s", C.dir, de->d_name);
    if (S_ISLNK(st.st_mode)) {
      rc = err_set(err, HIPD_EPERM, "cache entry %s is a symbolic link", path);
    } else if (!S_ISREG(st.st_mode)) {
      rc = err_set(err, HIPD_EPERM, "cache entry %s is not a regular file",
                   path);
    } else if (check_owner("cache entry", path, &st, 022, err) != 0) {
      rc = HIPD_EPERM;
    } else {
      disk_add(&key, (uint64_t)st.st_size,
               (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                   (uint64_t)st.st_mtim.tv_nsec);
    }
  }
  closedir(d);
  return rc;
}

int cache_init(uv_loop_t *loop, const char *dir, uint64_t max_bytes,
               hipd_err_t *err)
{
  size_t n;
  int rc;

  err_clear(err);
  C.loop = loop;
  C.max_bytes = max_bytes;
  if (dir == NULL || dir[0] == '\0')
    return 0;
  if (mkdir_p(dir, 0700) != 0) {
    return err_set(err, HIPD_EIO, "cannot create the cache directory %s: %s",
                   dir, strerror(errno));
  }
  C.dir = strdup(dir);
  if (C.dir == NULL) {
    return err_set(err, HIPD_ENOMEM, "out of memory");
  }
  /* "DIR/" would make lstat() and O_NOFOLLOW follow a link named DIR. */
  n = strlen(C.dir);
  while (n > 1 && C.dir[n - 1] == '/')
    C.dir[--n] = '\0';
  if ((rc = dir_open(C.dir, err)) != 0)
    goto fail;
  C.hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  if (C.hmac == NULL) {
    rc = err_set(err, HIPD_EINTERNAL,
                 "cannot authenticate cache entries: libcrypto has "
                 "no HMAC");
    goto fail;
  }
  if ((rc = key_load(err)) != 0 || (rc = dir_scan(err)) != 0)
    goto fail;
  disk_evict();
  log_info(0, "kernel cache: %s (%llu entries, %llu bytes, cap %llu)", C.dir,
           (unsigned long long)C.st.disk_entries,
           (unsigned long long)C.st.disk_bytes, (unsigned long long)max_bytes);
  return 0;

fail:
  cache_shutdown();
  return rc;
}

void cache_shutdown(void)
{
  while (C.oldest != NULL)
    mem_remove(C.oldest);
  for (int b = 0; b < NBUCKETS; b++)
    while (C.disk[b] != NULL)
      disk_forget(C.disk[b]);
  free(C.dir);
  C.dir = NULL;
  if (C.dfd >= 0)
    close(C.dfd);
  C.dfd = -1;
  EVP_MAC_free(C.hmac);
  C.hmac = NULL;
  OPENSSL_cleanse(C.mac_key, sizeof(C.mac_key));
}
