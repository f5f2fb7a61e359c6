/* SPDX-License-Identifier: MIT */
/* daemon/kernels/cache_disk.c: the kernel cache's disk tier: the checked
 * directory, the authentication key, the index of the entries on disk and
 * the entry format (the contract is in cache_disk.h). */
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

#include "cache_disk.h"
#include "hipd.h"
#include "log.h"
#include "util/array.h"

/* Version 2 of the format: entries carry an HMAC instead of version 1's
 * bare SHA-256, so that an entry hipd did not write is never loaded. */
#define MAGIC "HIPDKC\0\2"
#define SUFFIX ".hkc"
#define KEY_FILE ".hmac-key"
#define MAC_KEY_SIZE 32
#define MAC_SIZE 32

/* On-disk entry: this header, then the payload. The MAC is HMAC-SHA-256,
 * with the key of KEY_FILE, over the header up to the MAC (magic, sizes,
 * the owner, the entry's key, the payload length) and then the payload.
 * The owner is the uid whose compile wrote the entry, which its bytes
 * count against (eviction); entries of hipd versions that did not record
 * it have 0 there (a field that was reserved, and zero): they count as
 * root's. */
typedef struct {
  char magic[8];
  uint32_t header_size;
  uint32_t owner;
  uint8_t key[CACHE_KEY_SIZE];
  uint64_t payload_len;
  uint8_t mac[MAC_SIZE]; /* HMAC-SHA-256 of all of the above + payload */
} disk_header_t;

_Static_assert(offsetof(disk_header_t, mac) == 56 &&
                   sizeof(disk_header_t) == 88,
               "the header has no padding: its bytes are what the MAC covers");

typedef struct disk_entry {
  cache_key_t key;
  uint64_t size;
  uint64_t last_use; /* ns since the epoch (file mtime across restarts) */
  uint32_t owner;    /* whose compile wrote it (disk_header_t) */
  int used;          /* last_use moved past its file's mtime (touch) */
  struct disk_entry *hnext;
  struct disk_entry *older, *newer; /* its owner's entries, by last use */
} disk_entry_t;

/* The entries one uid owns, least recently used first, and their bytes:
 * eviction takes from the owner that holds the most. */
typedef struct {
  uint32_t owner;
  uint64_t bytes;
  disk_entry_t *oldest, *newest;
} disk_owner_t;

static struct {
  uv_loop_t *loop;
  char *dir;
  int dfd;                       /* dir, opened and checked at start */
  EVP_MAC *hmac;                 /* fetched once, shared by threads */
  uint8_t mac_key[MAC_KEY_SIZE]; /* the contents of KEY_FILE */
  uint64_t max_bytes;
  disk_entry_t *index[CACHE_NBUCKETS];
  uint64_t entries, bytes, evictions;
  disk_owner_t *owners; /* each uid with entries on disk */
  size_t nowners, owners_cap;
  uint64_t last_stamp; /* the latest last_use given (use_stamp) or read */
} disk = {.dfd = -1};

static int key_from_hex(const char *s, cache_key_t *key)
{
  for (int i = 0; i < CACHE_KEY_SIZE; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1)
      return HIPD_EINVAL;
    key->b[i] = (uint8_t)v;
  }
  return 0;
}

/* Strictly increasing wall-clock nanoseconds, past every entry's last use
 * so far (mtimes read at start included): entries made within one clock
 * tick still have an order, and an entry used now is its owner's newest. */
static uint64_t use_stamp(void)
{
  struct timespec ts;
  uint64_t now;

  clock_gettime(CLOCK_REALTIME, &ts);
  now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  disk.last_stamp = now > disk.last_stamp ? now : disk.last_stamp + 1;
  return disk.last_stamp;
}

/* The authenticator of an entry: HMAC-SHA-256 with disk.mac_key over @p h
 * up to its mac field, then the payload. Any thread. @return 0, or
 * HIPD_EINTERNAL if libcrypto failed (the entry is then neither written
 * nor trusted). */
static int entry_mac(const disk_header_t *h, const void *data, size_t len,
                     uint8_t out[MAC_SIZE])
{
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
      OSSL_PARAM_construct_end(),
  };
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(disk.hmac);
  size_t n = 0;
  int ok;

  ok = ctx != NULL &&
       EVP_MAC_init(ctx, disk.mac_key, sizeof(disk.mac_key), params) == 1 &&
       EVP_MAC_update(ctx, (const unsigned char *)h,
                      offsetof(disk_header_t, mac)) == 1 &&
       EVP_MAC_update(ctx, data, len) == 1 &&
       EVP_MAC_final(ctx, out, &n, MAC_SIZE) == 1 && n == MAC_SIZE;
  EVP_MAC_CTX_free(ctx);
  return ok ? 0 : HIPD_EINTERNAL;
}

/* ------------------------------------------------------------- entries */

/* An entry's file name, relative to disk.dfd. */
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
  for (disk_entry_t *e = disk.index[cache_key_bucket(key)]; e != NULL;
       e = e->hnext)
    if (cache_key_eq(&e->key, key))
      return e;
  return NULL;
}

/* The record of @p owner, made when @p make; NULL if none (or no memory).
 * The pointer is good until the next owner is made or dropped. */
static disk_owner_t *owner_of(uint32_t owner, int make)
{
  for (size_t i = 0; i < disk.nowners; i++)
    if (disk.owners[i].owner == owner)
      return &disk.owners[i];
  if (!make || ARRAY_GROW(disk.owners, disk.nowners, disk.owners_cap, 8) != 0)
    return NULL;
  disk.owners[disk.nowners] = (disk_owner_t){.owner = owner};
  return &disk.owners[disk.nowners++];
}

/* Put @p e in @p o's list, in order of last use: from the newest end, so
 * at once for an entry used now (and dir_scan() adds them oldest first). */
static void list_insert(disk_owner_t *o, disk_entry_t *e)
{
  disk_entry_t *after = o->newest;

  while (after != NULL && after->last_use > e->last_use)
    after = after->older;
  e->older = after;
  e->newer = after != NULL ? after->newer : o->oldest;
  if (e->newer != NULL)
    e->newer->older = e;
  else
    o->newest = e;
  if (after != NULL)
    after->newer = e;
  else
    o->oldest = e;
}

static void list_remove(disk_owner_t *o, disk_entry_t *e)
{
  if (e->older != NULL)
    e->older->newer = e->newer;
  else
    o->oldest = e->newer;
  if (e->newer != NULL)
    e->newer->older = e->older;
  else
    o->newest = e->older;
  e->older = e->newer = NULL;
}

/* Put @p e in its owner's list and count its bytes there. @return 0, or
 * HIPD_ENOMEM (no record for the owner: @p e is in no list). */
static int owner_link(disk_entry_t *e)
{
  disk_owner_t *o = owner_of(e->owner, 1);

  if (o == NULL)
    return HIPD_ENOMEM;
  list_insert(o, e);
  o->bytes += e->size;
  return 0;
}

/* Take @p e out of its owner's list and bytes; an owner left with no
 * entry is dropped. */
static void owner_unlink(disk_entry_t *e)
{
  disk_owner_t *o = owner_of(e->owner, 0);

  if (o == NULL)
    return;
  list_remove(o, e);
  o->bytes -= e->size < o->bytes ? e->size : o->bytes;
  if (o->oldest == NULL)
    *o = disk.owners[--disk.nowners];
}

/* Remove @p e from the hash index (not from its owner's list). */
static void index_remove(disk_entry_t *e)
{
  disk_entry_t **pp = &disk.index[cache_key_bucket(&e->key)];

  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  disk.entries--;
  disk.bytes -= e->size;
}

/* Index @p key as on disk, @p size bytes, last used at @p when, written
 * by @p owner's compile. Without memory for it the entry stays unindexed
 * (its file is not read, and is replaced at its next compile). */
static void disk_add(const cache_key_t *key, uint64_t size, uint64_t when,
                     uint32_t owner)
{
  disk_entry_t *e = disk_find(key);

  if (e != NULL) {
    owner_unlink(e);
    disk.bytes -= e->size;
  } else {
    e = calloc(1, sizeof(*e));
    if (e == NULL)
      return;
    e->key = *key;
    e->hnext = disk.index[cache_key_bucket(key)];
    disk.index[cache_key_bucket(key)] = e;
    disk.entries++;
  }
  e->size = size;
  e->last_use = when;
  e->owner = owner;
  disk.bytes += size;
  if (when > disk.last_stamp)
    disk.last_stamp = when;
  if (owner_link(e) != 0) {
    index_remove(e);
    free(e);
  }
}

static void disk_forget(disk_entry_t *e)
{
  owner_unlink(e);
  index_remove(e);
  free(e);
}

/* A removal on the pool holds its own descriptor of the directory: it
 * may run after cache_shutdown() closed disk.dfd. */
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
  j->dfd = fcntl(disk.dfd, F_DUPFD_CLOEXEC, 0);
  if (j->dfd < 0) {
    free(j);
    return;
  }
  j->name = entry_name(key);
  uv_queue_work(disk.loop, &j->work, unlink_work, unlink_after);
}

/* The entry to evict for room: the least recently used of the owner that
 * holds the most bytes on disk, so that one tenant's large kernels push
 * its own entries off the disk before anyone else's; never @p keep (the
 * entry just written: its owner's bytes count without it). NULL if only
 * @p keep is left. O(owners). */
static disk_entry_t *disk_victim(const disk_entry_t *keep)
{
  const disk_owner_t *most = NULL;
  uint64_t most_bytes = 0;
  disk_entry_t *e;

  for (size_t i = 0; i < disk.nowners; i++) {
    const disk_owner_t *o = &disk.owners[i];
    uint64_t b = o->bytes;
    if (keep != NULL && keep->owner == o->owner)
      b -= keep->size < b ? keep->size : b;
    if (b > 0 && (most == NULL || b > most_bytes)) {
      most = o;
      most_bytes = b;
    }
  }
  if (most == NULL)
    return NULL;
  e = most->oldest;
  return e != keep ? e : e->newer;
}

void cache_disk_evict(const cache_key_t *keep)
{
  const disk_entry_t *k = keep != NULL ? disk_find(keep) : NULL;

  while (disk.bytes > disk.max_bytes && disk.entries > 1) {
    disk_entry_t *victim = disk_victim(k);
    if (victim == NULL)
      break;
    unlink_async(&victim->key);
    disk_forget(victim);
    disk.evictions++;
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
 * file, synced, renamed into place). @return 0 or HIPD_EIO. */
int cache_disk_store(const cache_key_t *key, const void *data, size_t len,
                     uint32_t owner)
{
  entry_name_t name = entry_name(key);
  char tmp[64];
  disk_header_t h = {0};
  int fd;

  snprintf(tmp, sizeof(tmp), ".tmp-%d-%lx", (int)getpid(),
           (unsigned long)(uintptr_t)data ^ (unsigned long)time(NULL));
  memcpy(h.magic, MAGIC, 8);
  h.header_size = sizeof(h);
  h.owner = owner;
  memcpy(h.key, key->b, CACHE_KEY_SIZE);
  h.payload_len = len;
  if (entry_mac(&h, data, len, h.mac) != 0)
    return HIPD_EIO;
  fd = openat(disk.dfd, tmp,
              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return HIPD_EIO;
  if (write_all(fd, &h, sizeof(h)) != 0 || write_all(fd, data, len) != 0 ||
      fsync(fd) != 0) {
    close(fd);
    unlinkat(disk.dfd, tmp, 0);
    return HIPD_EIO;
  }
  close(fd);
  if (renameat(disk.dfd, tmp, disk.dfd, name.s) != 0) {
    unlinkat(disk.dfd, tmp, 0);
    return HIPD_EIO;
  }
  fsync(disk.dfd);
  return 0;
}

/* Pool thread: load and verify an entry. @return 0 with *data; HIPD_ENOENT
 * when there is none; HIPD_EIO when it was bad and is now removed, with
 * *why CACHE_DISK_CORRUPT (truncated, sizes that disagree) or
 * CACHE_DISK_UNAUTHENTICATED (not a regular file of ours, another format
 * version, another key in the header, or a MAC that does not verify:
 * planted, changed, or written with another key). */
int cache_disk_load(const cache_key_t *key, void **data, size_t *len,
                    uint32_t *owner, int mark_used, int *why_out)
{
  entry_name_t name = entry_name(key);
  disk_header_t h;
  struct stat st;
  uint8_t mac[MAC_SIZE];
  void *buf = NULL;
  int fd, why = CACHE_DISK_UNAUTHENTICATED;

  fd = openat(disk.dfd, name.s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return HIPD_ENOENT;
  if (fd < 0) { /* e.g. ELOOP: a symbolic link */
    unlinkat(disk.dfd, name.s, 0);
    *why_out = CACHE_DISK_UNAUTHENTICATED;
    return HIPD_EIO;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022) != 0)
    goto bad;
  why = CACHE_DISK_CORRUPT;
  if (read_all(fd, &h, sizeof(h)) != 0)
    goto bad;
  why = CACHE_DISK_UNAUTHENTICATED;
  if (memcmp(h.magic, MAGIC, 8) != 0 || h.header_size != sizeof(h) ||
      memcmp(h.key, key->b, CACHE_KEY_SIZE) != 0)
    goto bad;
  why = CACHE_DISK_CORRUPT;
  if (h.payload_len != (uint64_t)st.st_size - sizeof(h))
    goto bad;
  buf = malloc(h.payload_len ? h.payload_len : 1);
  if (buf == NULL || read_all(fd, buf, h.payload_len) != 0)
    goto bad;
  why = CACHE_DISK_UNAUTHENTICATED;
  if (entry_mac(&h, buf, h.payload_len, mac) != 0 ||
      CRYPTO_memcmp(mac, h.mac, MAC_SIZE) != 0)
    goto bad;
  /* Mark it used, for LRU eviction across restarts; a warm start's load
   * is no use. */
  if (mark_used)
    futimens(fd, NULL);
  close(fd);
  *data = buf;
  *len = h.payload_len;
  *owner = h.owner;
  return 0;

bad:
  free(buf);
  close(fd);
  unlinkat(disk.dfd, name.s, 0);
  *why_out = why;
  return HIPD_EIO;
}

/* ------------------------------------------------------------ start, stop */

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
  unlinkat(disk.dfd, tmp, 0); /* ours from a run that died here */
  fd = openat(disk.dfd, tmp,
              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || fchmod(fd, 0600) != 0 || write_all(fd, k, sizeof(k)) != 0 ||
      fsync(fd) != 0 ||
      (linkat(disk.dfd, tmp, disk.dfd, KEY_FILE, 0) != 0 && errno != EEXIST)) {
    rc = err_set(err, HIPD_EIO, "cannot create the cache key file %s/%s: %s",
                 disk.dir, KEY_FILE, strerror(errno));
  } else {
    fsync(disk.dfd);
    log_info(0, "kernel cache: created the authentication key %s/%s", disk.dir,
             KEY_FILE);
  }
  if (fd >= 0)
    close(fd);
  unlinkat(disk.dfd, tmp, 0);
  OPENSSL_cleanse(k, sizeof(k));
  return rc;
}

/* Read KEY_FILE into disk.mac_key, creating it at first start. Refuses a key
 * that is not a regular file of hipd's euid, exactly MAC_KEY_SIZE bytes,
 * with no permission for group or others. @return 0 or a negative code. */
static int key_load(hipd_err_t *err)
{
  char path[4200];
  struct stat st;
  int fd, rc;

  snprintf(path, sizeof(path), "%s/%s", disk.dir, KEY_FILE);
  fd = openat(disk.dfd, KEY_FILE,
              O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    if ((rc = key_create(err)) != 0)
      return rc;
    fd = openat(disk.dfd, KEY_FILE,
                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
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
  } else if (read_all(fd, disk.mac_key, sizeof(disk.mac_key)) != 0) {
    rc = err_set(err, HIPD_EIO, "cannot read the cache key file %s", path);
  } else {
    rc = 0;
  }
  close(fd);
  return rc;
}

/* Open @p dir (no trailing slash) as disk.dfd: a real directory, not a
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
  disk.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (disk.dfd < 0 || fstat(disk.dfd, &st) != 0) {
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

/* The owner the header of entry file @p name names, or 0 when it cannot
 * be read. Not authenticated here (that would read every payload): it
 * only orders eviction, and the entry's load checks it with the rest. */
static uint32_t header_owner(const char *name)
{
  disk_header_t h;
  uint32_t owner = 0;
  int fd =
      openat(disk.dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

  if (fd < 0)
    return 0;
  if (read_all(fd, &h, sizeof(h)) == 0 && memcmp(h.magic, MAGIC, 8) == 0 &&
      h.header_size == sizeof(h))
    owner = h.owner;
  close(fd);
  return owner;
}

/* An entry found by dir_scan(), indexed once all are known. */
typedef struct {
  cache_key_t key;
  uint64_t size, when;
  uint32_t owner;
} scanned_t;

static int scanned_cmp(const void *a, const void *b)
{
  uint64_t x = ((const scanned_t *)a)->when, y = ((const scanned_t *)b)->when;

  return x < y ? -1 : x > y;
}

/* How old a temporary file must be for the scan to take it for an
 * interrupted write. Another hipd may share the directory (two daemons
 * started on one cache, a restart beside a running test daemon): its
 * writes in progress are temporary files too, and removing one between
 * its creation and its rename or link fails that write, or that daemon's
 * start when the file is its first key. A live write takes seconds. */
#define TMP_STALE_SECONDS 600

/* Remove the temporary file @p name if it is an interrupted write: its
 * last change more than TMP_STALE_SECONDS away from now. */
static void tmp_remove_stale(const char *name)
{
  struct stat st;
  time_t now = time(NULL);

  if (fstatat(disk.dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return;
  if (st.st_mtime + TMP_STALE_SECONDS < now ||
      st.st_mtime > now + TMP_STALE_SECONDS)
    unlinkat(disk.dfd, name, 0);
}

/* Index the entries on disk, each with its owner (from its header) and
 * its last use (its mtime), oldest first: each owner's list is then built
 * in order, in O(n log n). An entry file that is a symbolic link, not a
 * regular file, not hipd's, or writable by others stops the start: it
 * means someone else has had the directory. */
static int dir_scan(hipd_err_t *err)
{
  int fd = fcntl(disk.dfd, F_DUPFD_CLOEXEC, 0);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *de;
  scanned_t *found = NULL;
  size_t nfound = 0, cap = 0;
  int rc = 0;

  if (d == NULL) {
    if (fd >= 0)
      close(fd);
    return err_set(err, HIPD_EIO, "cannot read the cache directory %s: %s",
                   disk.dir, strerror(errno));
  }
  while (rc == 0 && (de = readdir(d)) != NULL) {
    char path[4200];
    struct stat st;
    cache_key_t key;
    size_t n = strlen(de->d_name);

    if (strncmp(de->d_name, ".tmp-", 5) == 0) {
      tmp_remove_stale(de->d_name);
      continue;
    }
    if (n != 2 * CACHE_KEY_SIZE + strlen(SUFFIX) ||
        strcmp(de->d_name + 2 * CACHE_KEY_SIZE, SUFFIX) != 0 ||
        key_from_hex(de->d_name, &key) != 0 ||
        fstatat(disk.dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    snprintf(path, sizeof(path), "%s/%s", disk.dir, de->d_name);
    if (S_ISLNK(st.st_mode)) {
      rc = err_set(err, HIPD_EPERM, "cache entry %s is a symbolic link", path);
    } else if (!S_ISREG(st.st_mode)) {
      rc = err_set(err, HIPD_EPERM, "cache entry %s is not a regular file",
                   path);
    } else if (check_owner("cache entry", path, &st, 022, err) != 0) {
      rc = HIPD_EPERM;
    } else if (ARRAY_GROW(found, nfound, cap, 64) == 0) {
      found[nfound++] =
          (scanned_t){.key = key,
                      .size = (uint64_t)st.st_size,
                      .when = (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                              (uint64_t)st.st_mtim.tv_nsec,
                      .owner = header_owner(de->d_name)};
    } /* else no memory: that entry stays unindexed */
  }
  closedir(d);
  if (rc == 0 && nfound > 0) {
    qsort(found, nfound, sizeof(*found), scanned_cmp);
    for (size_t i = 0; i < nfound; i++)
      disk_add(&found[i].key, found[i].size, found[i].when, found[i].owner);
  }
  free(found);
  return rc;
}

int cache_disk_open(uv_loop_t *loop, const char *dir, uint64_t max_bytes,
                    hipd_err_t *err)
{
  size_t n;
  int rc;

  disk.loop = loop;
  disk.max_bytes = max_bytes;
  if (mkdir_p(dir, 0700) != 0) {
    return err_set(err, HIPD_EIO, "cannot create the cache directory %s: %s",
                   dir, strerror(errno));
  }
  disk.dir = strdup(dir);
  if (disk.dir == NULL) {
    return err_set(err, HIPD_ENOMEM, "out of memory");
  }
  /* "DIR/" would make lstat() and O_NOFOLLOW follow a link named DIR. */
  n = strlen(disk.dir);
  while (n > 1 && disk.dir[n - 1] == '/')
    disk.dir[--n] = '\0';
  if ((rc = dir_open(disk.dir, err)) != 0)
    return rc;
  disk.hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  if (disk.hmac == NULL) {
    return err_set(err, HIPD_EINTERNAL,
                   "cannot authenticate cache entries: libcrypto has "
                   "no HMAC");
  }
  if ((rc = key_load(err)) != 0 || (rc = dir_scan(err)) != 0)
    return rc;
  cache_disk_evict(NULL);
  log_info(0, "kernel cache: %s (%llu entries, %llu bytes, cap %llu)", disk.dir,
           (unsigned long long)disk.entries, (unsigned long long)disk.bytes,
           (unsigned long long)max_bytes);
  return 0;
}

static void save_uses(void);

void cache_disk_close(void)
{
  if (disk.dfd >= 0)
    save_uses();
  for (int b = 0; b < CACHE_NBUCKETS; b++)
    while (disk.index[b] != NULL)
      disk_forget(disk.index[b]);
  free(disk.owners);
  disk.owners = NULL;
  disk.nowners = disk.owners_cap = 0;
  disk.last_stamp = 0;
  free(disk.dir);
  disk.dir = NULL;
  if (disk.dfd >= 0)
    close(disk.dfd);
  disk.dfd = -1;
  EVP_MAC_free(disk.hmac);
  disk.hmac = NULL;
  OPENSSL_cleanse(disk.mac_key, sizeof(disk.mac_key));
}

const char *cache_disk_dir(void)
{
  return disk.dir;
}

void cache_disk_stats(uint64_t *entries, uint64_t *bytes, uint64_t *evictions)
{
  *entries = disk.entries;
  *bytes = disk.bytes;
  *evictions = disk.evictions;
}

/* ---------------------------------------------------------------- index */

bool cache_disk_known(const cache_key_t *key)
{
  return disk_find(key) != NULL;
}

void cache_disk_touch(const cache_key_t *key)
{
  disk_entry_t *d = disk_find(key);
  disk_owner_t *o = d != NULL ? owner_of(d->owner, 0) : NULL;

  if (o == NULL)
    return;
  /* Now its owner's newest. */
  list_remove(o, d);
  d->last_use = use_stamp();
  d->used = 1; /* its mtime says so at close (cache_disk_close) */
  list_insert(o, d);
}

/* Write the last use of every entry touched since start into its file's
 * mtime, which the next start reads: the order of a warm start
 * (cache_disk_recent) is then the order of use, memory hits included. */
static void save_uses(void)
{
  for (int b = 0; b < CACHE_NBUCKETS; b++)
    for (disk_entry_t *e = disk.index[b]; e != NULL; e = e->hnext) {
      struct timespec ts[2];
      entry_name_t n;

      if (!e->used)
        continue;
      n = entry_name(&e->key);
      ts[0].tv_sec = ts[1].tv_sec = (time_t)(e->last_use / 1000000000u);
      ts[0].tv_nsec = ts[1].tv_nsec = (long)(e->last_use % 1000000000u);
      utimensat(disk.dfd, n.s, ts, AT_SYMLINK_NOFOLLOW);
      e->used = 0;
    }
}

static int by_use_desc(const void *a, const void *b)
{
  const disk_entry_t *x = *(disk_entry_t *const *)a;
  const disk_entry_t *y = *(disk_entry_t *const *)b;

  return x->last_use < y->last_use ? 1 : x->last_use > y->last_use ? -1 : 0;
}

int cache_disk_recent(cache_key_t **keys, uint64_t **lens, size_t *n)
{
  disk_entry_t **all;
  size_t count = 0;

  *keys = NULL;
  *lens = NULL;
  *n = 0;
  for (int b = 0; b < CACHE_NBUCKETS; b++)
    for (disk_entry_t *e = disk.index[b]; e != NULL; e = e->hnext)
      count++;
  if (count == 0)
    return 0;
  all = malloc(count * sizeof(*all));
  *keys = malloc(count * sizeof(**keys));
  *lens = malloc(count * sizeof(**lens));
  if (all == NULL || *keys == NULL || *lens == NULL) {
    free(all);
    free(*keys);
    free(*lens);
    *keys = NULL;
    *lens = NULL;
    return HIPD_ENOMEM;
  }
  count = 0;
  for (int b = 0; b < CACHE_NBUCKETS; b++)
    for (disk_entry_t *e = disk.index[b]; e != NULL; e = e->hnext)
      all[count++] = e;
  qsort(all, count, sizeof(*all), by_use_desc);
  for (size_t i = 0; i < count; i++) {
    (*keys)[i] = all[i]->key;
    (*lens)[i] = all[i]->size > sizeof(disk_header_t)
                     ? all[i]->size - sizeof(disk_header_t)
                     : 0;
  }
  free(all);
  *n = count;
  return 0;
}

void cache_disk_add(const cache_key_t *key, size_t len, uint32_t owner)
{
  disk_add(key, len + sizeof(disk_header_t), use_stamp(), owner);
}

void cache_disk_forget(const cache_key_t *key)
{
  disk_entry_t *e = disk_find(key);

  if (e != NULL)
    disk_forget(e);
}

void cache_disk_clear(void)
{
  for (int b = 0; b < CACHE_NBUCKETS; b++)
    while (disk.index[b] != NULL) {
      unlink_async(&disk.index[b]->key);
      disk_forget(disk.index[b]);
    }
}

void cache_disk_list(void (*fn)(void *ctx, const cache_key_t *key,
                                uint64_t bytes, uint64_t atime_s),
                     void *ctx)
{
  for (int b = 0; b < CACHE_NBUCKETS; b++)
    for (disk_entry_t *e = disk.index[b]; e != NULL; e = e->hnext)
      fn(ctx, &e->key, e->size, e->last_use / 1000000000u);
}
