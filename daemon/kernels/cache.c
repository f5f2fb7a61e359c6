/* daemon/kernels/cache.c: the compiled-kernel cache (see cache.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "hipd.h"
#include "log.h"

#define NBUCKETS 4096
#define LOG_SIZE 16384
#define MAGIC "HIPDKC\0\1"
#define SUFFIX ".hkc"

/* On-disk entry: this header, then the payload. */
typedef struct {
  char magic[8];
  uint32_t header_size;
  uint32_t reserved;
  uint8_t key[CACHE_KEY_SIZE];
  uint64_t payload_len;
  uint8_t checksum[CACHE_KEY_SIZE]; /* SHA-256 of the payload */
} disk_header_t;

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
  uv_work_t work;
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
  int corrupt; /* a bad disk entry was removed */
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
  uint64_t max_bytes;
  mem_entry_t *mem[NBUCKETS];
  mem_entry_t *oldest, *newest;
  disk_entry_t *disk[NBUCKETS];
  pending_t *pending[NBUCKETS];
  unsigned npending; /* entries of pending[] */
  cache_stats_t st;
} C;

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

static void sha256(const void *data, size_t len, uint8_t out[32])
{
  unsigned n = 0;

  EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

/* ------------------------------------------------------------------ blobs */

void cache_blob_ref(cache_blob_t *b)
{
  b->refs++;
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

static void entry_path(const cache_key_t *key, char *buf, size_t size)
{
  char hex[2 * CACHE_KEY_SIZE + 1];

  cache_key_hex(key, hex);
  snprintf(buf, size, "%s/%s%s", C.dir, hex, SUFFIX);
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

typedef struct {
  uv_work_t work;
  char path[4096];
} unlink_job_t;

static void unlink_work(uv_work_t *w)
{
  unlink(((unlink_job_t *)w)->path);
}

static void unlink_after(uv_work_t *w, int status)
{
  (void)status;
  free(w);
}

static void unlink_async(const cache_key_t *key)
{
  unlink_job_t *j = malloc(sizeof(*j));

  if (j == NULL)
    return;
  entry_path(key, j->path, sizeof(j->path));
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

/* Pool thread: write an entry atomically. */
static int disk_store(const cache_key_t *key, const void *data, size_t len)
{
  char path[4096], tmp[4200];
  disk_header_t h = {0};
  int fd, dfd;

  entry_path(key, path, sizeof(path));
  snprintf(tmp, sizeof(tmp), "%s/.tmp-%d-%lx", C.dir, (int)getpid(),
           (unsigned long)(uintptr_t)data ^ (unsigned long)time(NULL));
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  memcpy(h.magic, MAGIC, 8);
  h.header_size = sizeof(h);
  memcpy(h.key, key->b, CACHE_KEY_SIZE);
  h.payload_len = len;
  sha256(data, len, h.checksum);
  if (write_all(fd, &h, sizeof(h)) != 0 || write_all(fd, data, len) != 0 ||
      fsync(fd) != 0) {
    close(fd);
    unlink(tmp);
    return -1;
  }
  close(fd);
  if (rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  dfd = open(C.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return 0;
}

/* Pool thread: load and verify an entry. @return 0 with *data, -ENOENT
 * when there is none, -EBADMSG when it was corrupt (and is now removed). */
static int disk_load(const cache_key_t *key, void **data, size_t *len)
{
  char path[4096];
  disk_header_t h;
  struct stat st;
  uint8_t sum[32];
  void *buf = NULL;
  int fd;

  entry_path(key, path, sizeof(path));
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -ENOENT;
  if (fstat(fd, &st) != 0 || read_all(fd, &h, sizeof(h)) != 0 ||
      memcmp(h.magic, MAGIC, 8) != 0 || h.header_size != sizeof(h) ||
      memcmp(h.key, key->b, CACHE_KEY_SIZE) != 0 ||
      h.payload_len != (uint64_t)st.st_size - sizeof(h))
    goto corrupt;
  buf = malloc(h.payload_len ? h.payload_len : 1);
  if (buf == NULL || read_all(fd, buf, h.payload_len) != 0)
    goto corrupt;
  sha256(buf, h.payload_len, sum);
  if (memcmp(sum, h.checksum, 32) != 0)
    goto corrupt;
  close(fd);
  /* Mark it used, for LRU eviction across restarts. */
  utimensat(AT_FDCWD, path, NULL, 0);
  *data = buf;
  *len = h.payload_len;
  return 0;

corrupt:
  free(buf);
  close(fd);
  unlink(path);
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

static void get_work(uv_work_t *w)
{
  pending_t *p = (pending_t *)w;

  p->log[0] = '\0';
  if (C.dir != NULL && !p->refresh) {
    int rc = disk_load(&p->key, &p->data, &p->len);
    if (rc == 0) {
      p->source = CACHE_HIT_DISK;
      return;
    }
    p->corrupt = rc == -EBADMSG;
  }
  p->source = CACHE_MISS;
  p->status = p->fn(p->arg, &p->data, &p->len, p->log, sizeof(p->log));
  if (p->status == 0 && C.dir != NULL &&
      disk_store(&p->key, p->data, p->len) == 0) {
    p->stored = 1;
    p->disk_size = p->len + sizeof(disk_header_t);
  }
}

static void get_after(uv_work_t *w, int status)
{
  pending_t *p = (pending_t *)w;
  cache_blob_t *blob = NULL;
  int first = 1;

  pending_remove(p);
  if (status != 0 && p->status == 0)
    p->status = HIPD_ECANCELED;
  if (p->corrupt) {
    C.st.corrupt++;
    disk_entry_t *e = disk_find(&p->key);
    if (e != NULL)
      disk_forget(e);
    log_warn(0, "kernel cache: a corrupt entry was discarded");
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
  uv_queue_work(C.loop, &p->work, get_work, get_after);
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

int cache_init(uv_loop_t *loop, const char *dir, uint64_t max_bytes, char *err,
               size_t errlen)
{
  DIR *d;
  struct dirent *de;

  C.loop = loop;
  C.max_bytes = max_bytes;
  if (dir == NULL || dir[0] == '\0')
    return 0;
  if (mkdir_p(dir, 0700) != 0) {
    snprintf(err, errlen, "cannot create the cache directory %s: %s", dir,
             strerror(errno));
    return HIPD_EIO;
  }
  d = opendir(dir);
  if (d == NULL) {
    snprintf(err, errlen, "cannot open the cache directory %s: %s", dir,
             strerror(errno));
    return HIPD_EIO;
  }
  C.dir = strdup(dir);
  while ((de = readdir(d)) != NULL) {
    char path[4096];
    struct stat st;
    cache_key_t key;
    size_t n = strlen(de->d_name);

    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    if (strncmp(de->d_name, ".tmp-", 5) == 0) {
      unlink(path); /* an interrupted write */
      continue;
    }
    if (n != 2 * CACHE_KEY_SIZE + strlen(SUFFIX) ||
        strcmp(de->d_name + 2 * CACHE_KEY_SIZE, SUFFIX) != 0 ||
        key_from_hex(de->d_name, &key) != 0 || stat(path, &st) != 0)
      continue;
    disk_add(&key, (uint64_t)st.st_size,
             (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                 (uint64_t)st.st_mtim.tv_nsec);
  }
  closedir(d);
  disk_evict();
  log_info(0, "kernel cache: %s (%llu entries, %llu bytes, cap %llu)", dir,
           (unsigned long long)C.st.disk_entries,
           (unsigned long long)C.st.disk_bytes, (unsigned long long)max_bytes);
  return 0;
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
}
