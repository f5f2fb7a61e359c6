/* SPDX-License-Identifier: MIT */
/* tests/check_cache.c: the compiled-kernel cache with a real loop, real
 * thread pool and a real directory: misses, memory and disk hits, restart,
 * corruption, single-flight compilation, eviction, clear; authenticated
 * entries (planted, changed, another key's) and the checks of the
 * directory, its key and its entries at start. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "compile/compile_pool.h"
#include "hipd.h"
#include "kernels/cache.h"
#include "run.h"

static uv_loop_t loop;
static char dir[256];
static int compiles;         /* how often the compile function ran */
static int compile_delay_ms; /* make compiles slow enough to overlap */

typedef struct {
  int done;
  int status;
  cache_source_t source;
  char data[64];
  size_t len;
  char log[128];
} result_t;

static int compile_cb(void *arg, void **out, size_t *len, char *log,
                      size_t logsz)
{
  const char *src = arg;

  __atomic_add_fetch(&compiles, 1, __ATOMIC_SEQ_CST);
  if (compile_delay_ms)
    usleep((useconds_t)compile_delay_ms * 1000);
  if (strstr(src, "error") != NULL) {
    snprintf(log, logsz, "src:1: error: bad source");
    return HIPD_ECOMPILE;
  }
  *len = strlen(src) + 8;
  *out = malloc(*len);
  snprintf(*out, *len, "BIN[%s]", src);
  *len = strlen(*out);
  return 0;
}

static void done_cb(void *ctx, int status, cache_blob_t *blob,
                    cache_source_t source, const char *log)
{
  result_t *r = ctx;

  r->done = 1;
  r->status = status;
  r->source = source;
  snprintf(r->log, sizeof(r->log), "%s", log);
  if (blob != NULL) {
    r->len = blob->len;
    memcpy(r->data, blob->data, blob->len < 63 ? blob->len : 63);
  }
}

static void key_of(const char *src, cache_key_t *key)
{
  cache_keyer_t *k = cache_keyer_new();

  cache_keyer_add_str(k, "source", src);
  cache_keyer_add_str(k, "arch", "test");
  cache_keyer_finish(k, key);
}

/* Ask the cache for @p src as tenant @p tenant and run the loop until it
 * answers, and until the disk write of a compile's result, which comes
 * after the answer, is done. */
static result_t get_for(const char *src, uint32_t tenant)
{
  result_t r = {0};
  cache_key_t key;

  key_of(src, &key);
  cache_get_flags(&key, 0, tenant, compile_cb, (void *)src, done_cb, &r);
  while (!r.done)
    uv_run(&loop, UV_RUN_ONCE);
  while (cache_pending() > 0)
    uv_run(&loop, UV_RUN_ONCE);
  return r;
}

static result_t get(const char *src)
{
  return get_for(src, 0);
}

static void start(uint64_t cap)
{
  hipd_err_t err;

  ck_assert_msg(cache_init(&loop, dir, cap, &err) == 0, "%s", err.msg);
}

static void setup(void)
{
  const char *base = getenv("HIPD_TEST_TMP");

  snprintf(dir, sizeof(dir), "%s/cache-XXXXXX", base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  uv_loop_init(&loop);
  /* Misses run on the compile pool's threads (no helper is started: the
   * compile functions here run in the test). */
  {
    compile_pool_cfg_t cfg = {.jobs = 4};
    hipd_err_t err;
    ck_assert_msg(compile_pool_init(&cfg, &loop, &err) == 0, "%s", err.msg);
  }
  compiles = 0;
  compile_delay_ms = 0;
}

static void teardown(void)
{
  char cmd[300];

  compile_pool_shutdown();
  cache_shutdown();
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_keys)
{
  cache_key_t a, b, c;
  cache_keyer_t *k;
  char hex[65];

  key_of("x", &a);
  key_of("x", &b);
  ck_assert_mem_eq(a.b, b.b, CACHE_KEY_SIZE);
  key_of("y", &c);
  ck_assert(memcmp(a.b, c.b, CACHE_KEY_SIZE) != 0);
  /* Parts are length-prefixed: ("ab","c") differs from ("a","bc"). */
  k = cache_keyer_new();
  cache_keyer_add_str(k, "p", "ab");
  cache_keyer_add_str(k, "q", "c");
  cache_keyer_finish(k, &a);
  k = cache_keyer_new();
  cache_keyer_add_str(k, "p", "a");
  cache_keyer_add_str(k, "q", "bc");
  cache_keyer_finish(k, &b);
  ck_assert(memcmp(a.b, b.b, CACHE_KEY_SIZE) != 0);
  cache_key_hex(&a, hex);
  ck_assert_uint_eq(strlen(hex), 64);
}
END_TEST

/* Append one framed part ([label length, label, data length, data], the
 * lengths as host uint64) to @p buf at *@p len. */
static void frame(unsigned char *buf, size_t *len, const char *label,
                  const void *data, size_t dlen)
{
  uint64_t n = strlen(label), m = dlen;

  memcpy(buf + *len, &n, sizeof(n));
  *len += sizeof(n);
  memcpy(buf + *len, label, n);
  *len += n;
  memcpy(buf + *len, &m, sizeof(m));
  *len += sizeof(m);
  memcpy(buf + *len, data, dlen);
  *len += dlen;
}

/* The key is SHA-256 of the framed parts in order, whether the keyer
 * gathers them (small) or streams them (past its 2 KiB buffer): keys on
 * disk from earlier releases stay valid. */
START_TEST(test_key_format)
{
  static unsigned char big[3 * 4096], want_in[4 * 4096];
  static const size_t sizes[] = {0, 1, 100, 2000, 2048, 5000, sizeof(big)};

  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (unsigned char)(i * 31 + 7);
  for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
    cache_keyer_t *k = cache_keyer_new();
    cache_key_t got, want;
    unsigned wn = 0;
    size_t len = 0;

    ck_assert_ptr_nonnull(k);
    cache_keyer_add_str(k, "kernel", "vecadd");
    cache_keyer_add(k, "source", big, sizes[t]);
    cache_keyer_add_str(k, "arch", "sm_90");
    cache_keyer_finish(k, &got);
    frame(want_in, &len, "kernel", "vecadd", 6);
    frame(want_in, &len, "source", big, sizes[t]);
    frame(want_in, &len, "arch", "sm_90", 5);
    ck_assert_int_eq(EVP_Digest(want_in, len, want.b, &wn, EVP_sha256(), NULL),
                     1);
    ck_assert_uint_eq(wn, CACHE_KEY_SIZE);
    ck_assert_msg(memcmp(got.b, want.b, CACHE_KEY_SIZE) == 0,
                  "the key of a %zu-byte source is not SHA-256 of its parts",
                  sizes[t]);
  }
}
END_TEST

START_TEST(test_miss_then_memory_hit)
{
  result_t r;
  cache_stats_t st;

  start(1 << 20);
  r = get("kernel-a");
  ck_assert_int_eq(r.status, 0);
  ck_assert_int_eq(r.source, CACHE_MISS);
  ck_assert_str_eq(r.data, "BIN[kernel-a]");
  r = get("kernel-a");
  ck_assert_int_eq(r.source, CACHE_HIT_MEMORY);
  ck_assert_str_eq(r.data, "BIN[kernel-a]");
  ck_assert_int_eq(compiles, 1);
  cache_get_stats(&st);
  ck_assert_uint_eq(st.misses, 1);
  ck_assert_uint_eq(st.hits_memory, 1);
  ck_assert_uint_eq(st.entries, 1);
  ck_assert_uint_eq(st.disk_entries, 1);
}
END_TEST

START_TEST(test_restart_disk_hit)
{
  result_t r;

  start(1 << 20);
  get("kernel-b");
  cache_shutdown();
  start(1 << 20); /* as after a daemon restart */
  r = get("kernel-b");
  ck_assert_int_eq(r.status, 0);
  ck_assert_int_eq(r.source, CACHE_HIT_DISK);
  ck_assert_str_eq(r.data, "BIN[kernel-b]");
  ck_assert_int_eq(compiles, 1);
}
END_TEST

/* Damage the one entry file in the directory: flip a payload byte, or cut
 * it short. */
static void damage(int truncate_it)
{
  char cmd[400], path[512] = "";
  FILE *f;

  snprintf(cmd, sizeof(cmd), "ls '%s'/*.hkc", dir);
  f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(fgets(path, sizeof(path), f));
  pclose(f);
  path[strcspn(path, "\n")] = '\0';
  if (truncate_it) {
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size - 3), 0);
  } else {
    f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -2, SEEK_END);
    fputc('#', f);
    fclose(f);
  }
}

START_TEST(test_corrupt_entry_recompiled)
{
  result_t r;
  cache_stats_t st;

  start(1 << 20);
  get("kernel-c");
  cache_shutdown();
  damage(_i == 1);
  start(1 << 20);
  r = get("kernel-c");
  ck_assert_int_eq(r.status, 0);
  ck_assert_int_eq(r.source, CACHE_MISS); /* never loaded */
  ck_assert_str_eq(r.data, "BIN[kernel-c]");
  ck_assert_int_eq(compiles, 2);
  cache_get_stats(&st);
  ck_assert_uint_eq(st.corrupt, 1);
  /* The fresh entry is good again. */
  cache_shutdown();
  start(1 << 20);
  r = get("kernel-c");
  ck_assert_int_eq(r.source, CACHE_HIT_DISK);
}
END_TEST

/* A request that joins a warm start's load (nobody asked for it yet) is
 * counted as a compile, since it takes the load over and compiles should
 * the entry not load (_i 1: damaged); a second request then only waits.
 * Either way the first request gets its kernel. */
START_TEST(test_warm_load_taken_over)
{
  result_t r = {0};
  cache_key_t key;

  start(1 << 20);
  get("kernel-w");
  cache_shutdown();
  if (_i == 1)
    damage(0);
  start(1 << 20);
  key_of("kernel-w", &key);
  /* The warm start's load is on libuv's pool; its end waits for the loop,
   * which does not run until the request is in. */
  cache_warm(1 << 20);
  ck_assert(cache_inflight(&key));
  ck_assert_int_eq(cache_would_compile(&key, 0), 1);
  cache_get_flags(&key, 0, 7, compile_cb, (void *)"kernel-w", done_cb, &r);
  ck_assert_int_eq(cache_would_compile(&key, 0), 0);
  while (!r.done)
    uv_run(&loop, UV_RUN_ONCE);
  while (cache_pending() > 0)
    uv_run(&loop, UV_RUN_ONCE);
  ck_assert_int_eq(r.status, 0);
  ck_assert_str_eq(r.data, "BIN[kernel-w]");
  ck_assert_int_eq(r.source, _i == 1 ? CACHE_MISS : CACHE_HIT_DISK);
  ck_assert_int_eq(compiles, _i == 1 ? 2 : 1);
}
END_TEST

START_TEST(test_compile_error_not_cached)
{
  result_t r;

  start(1 << 20);
  r = get("an error here");
  ck_assert_int_eq(r.status, HIPD_ECOMPILE);
  ck_assert_ptr_nonnull(strstr(r.log, "bad source"));
  r = get("an error here");
  ck_assert_int_eq(r.status, HIPD_ECOMPILE);
  ck_assert_int_eq(compiles, 2);
}
END_TEST

START_TEST(test_concurrent_single_compile)
{
  result_t r[4] = {{0}};
  cache_key_t key;
  const char *src = "kernel-d";

  start(1 << 20);
  compile_delay_ms = 200;
  key_of(src, &key);
  for (int i = 0; i < 4; i++)
    cache_get(&key, compile_cb, (void *)src, done_cb, &r[i]);
  while (!(r[0].done && r[1].done && r[2].done && r[3].done))
    uv_run(&loop, UV_RUN_ONCE);
  ck_assert_int_eq(compiles, 1);
  ck_assert_int_eq(r[0].source, CACHE_MISS);
  for (int i = 1; i < 4; i++) {
    ck_assert_int_eq(r[i].status, 0);
    ck_assert_int_eq(r[i].source, CACHE_WAITED);
    ck_assert_str_eq(r[i].data, "BIN[kernel-d]");
  }
}
END_TEST

START_TEST(test_eviction_lru)
{
  cache_stats_t st;
  char src[32];

  /* Each disk entry is the header (~96 bytes) plus ~15 payload bytes. */
  start(600);
  for (int i = 0; i < 20; i++) {
    snprintf(src, sizeof(src), "kern-%02d", i);
    get(src);
  }
  cache_get_stats(&st);
  ck_assert_uint_le(st.disk_bytes, 600);
  ck_assert_uint_le(st.bytes, 600);
  ck_assert_uint_gt(st.evictions, 0);
  /* On disk the newest is still there and the oldest was evicted. */
  cache_shutdown();
  start(600);
  ck_assert_int_eq(get("kern-19").source, CACHE_HIT_DISK);
  ck_assert_int_eq(get("kern-00").source, CACHE_MISS);
}
END_TEST

/* Is @p src in the memory tier? */
static int in_memory(const char *src)
{
  cache_key_t key;

  key_of(src, &key);
  return cache_has(&key);
}

/* Memory holds the entries of tenants fairly: tenant 1002 compiling many
 * kernels evicts its own least recently used entries, never tenant 1001's
 * few, which are older (plain LRU took those first). */
START_TEST(test_eviction_fair)
{
  cache_stats_t st;
  char src[32];

  /* About 15 bytes an entry in memory: 40 of them do not fit in 300. */
  start(300);
  for (int i = 0; i < 4; i++) {
    snprintf(src, sizeof(src), "a-kern-%02d", i);
    ck_assert_int_eq(get_for(src, 1001).status, 0);
  }
  for (int i = 0; i < 40; i++) {
    snprintf(src, sizeof(src), "b-kern-%02d", i);
    ck_assert_int_eq(get_for(src, 1002).status, 0);
  }
  cache_get_stats(&st);
  ck_assert_uint_le(st.bytes, 300);
  ck_assert_uint_gt(st.evictions, 0);
  for (int i = 0; i < 4; i++) {
    snprintf(src, sizeof(src), "a-kern-%02d", i);
    ck_assert_msg(in_memory(src), "tenant 1001's %s was evicted by 1002's",
                  src);
  }
  ck_assert(in_memory("b-kern-39"));
  ck_assert(!in_memory("b-kern-00"));
}
END_TEST

/* The disk holds the entries of tenants fairly too, across a restart:
 * tenant 1002 compiling many kernels evicts its own least recently used
 * entries from the disk, never tenant 1001's few, which are older (plain
 * LRU took those first). After the restart (memory empty, the index
 * rebuilt from the files: each one's owner from its header) 1001's are
 * disk hits, and the eviction at start is fair as well. */
START_TEST(test_disk_eviction_fair)
{
  cache_stats_t st;
  char src[32];

  /* About 100 bytes an entry on disk (the header and the payload): 44 of
   * them do not fit in 1500; in memory (15 bytes each) they all do. */
  start(1500);
  for (int i = 0; i < 4; i++) {
    snprintf(src, sizeof(src), "a-kern-%02d", i);
    ck_assert_int_eq(get_for(src, 1001).status, 0);
  }
  for (int i = 0; i < 40; i++) {
    snprintf(src, sizeof(src), "b-kern-%02d", i);
    ck_assert_int_eq(get_for(src, 1002).status, 0);
  }
  cache_get_stats(&st);
  ck_assert_uint_le(st.disk_bytes, 1500);
  ck_assert_uint_gt(st.evictions, 0);
  cache_shutdown();
  /* A smaller cap at start: room is made from 1002 again. */
  start(1000);
  cache_get_stats(&st);
  ck_assert_uint_le(st.disk_bytes, 1000);
  for (int i = 0; i < 4; i++) {
    snprintf(src, sizeof(src), "a-kern-%02d", i);
    ck_assert_msg(get_for(src, 1001).source == CACHE_HIT_DISK,
                  "tenant 1001's %s was evicted from the disk by 1002's", src);
  }
  ck_assert_int_eq(get_for("b-kern-39", 1002).source, CACHE_HIT_DISK);
  ck_assert_int_eq(get_for("b-kern-00", 1002).source, CACHE_MISS);
}
END_TEST

START_TEST(test_clear)
{
  cache_stats_t st;

  start(1 << 20);
  get("kernel-e");
  cache_clear();
  uv_run(&loop, UV_RUN_DEFAULT); /* let the unlinks run */
  cache_get_stats(&st);
  ck_assert_uint_eq(st.entries, 0);
  ck_assert_uint_eq(st.disk_entries, 0);
  cache_shutdown();
  start(1 << 20);
  ck_assert_int_eq(get("kernel-e").source, CACHE_MISS);
}
END_TEST

/* ------------------------------------------------------- authentication */

/* The path of the entry for @p src in @p d. */
static void entry_file(const char *d, const char *src, char *buf, size_t size)
{
  cache_key_t key;
  char hex[2 * CACHE_KEY_SIZE + 1];

  key_of(src, &key);
  cache_key_hex(&key, hex);
  snprintf(buf, size, "%s/%s.hkc", d, hex);
}

static void write_file(const char *path, const void *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

/* The whole file at @p path (malloc'd; its size in *len). */
static unsigned char *read_file(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  unsigned char *buf;
  long n;

  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = malloc((size_t)n + 1);
  ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* What an attacker who can write the directory writes at the path of the
 * entry for @p src: a binary of their own behind a well-formed header,
 * version 1 (with a valid SHA-256 of the payload where version 2 has its
 * MAC) or version 2 (with that SHA-256 as a guessed MAC). The layout is
 * the documented one: magic, header size, owner (0, as in entries of
 * versions that left it reserved), key, payload length, 32 bytes of
 * checksum or MAC. */
static void plant(const char *src, int version, const char *payload)
{
  unsigned char file[512];
  uint32_t hsize = 88, owner = 0;
  uint64_t plen = strlen(payload);
  cache_key_t key;
  char path[512];
  unsigned n = 0;

  key_of(src, &key);
  memcpy(file, version == 1 ? "HIPDKC\0\1" : "HIPDKC\0\2", 8);
  memcpy(file + 8, &hsize, 4);
  memcpy(file + 12, &owner, 4);
  memcpy(file + 16, key.b, CACHE_KEY_SIZE);
  memcpy(file + 48, &plen, 8);
  EVP_Digest(payload, plen, file + 56, &n, EVP_sha256(), NULL);
  memcpy(file + 88, payload, plen);
  entry_file(dir, src, path, sizeof(path));
  write_file(path, file, 88 + plen);
}

/* A planted entry, old format or new, is never loaded: the kernel is
 * compiled again and the entry counted as failing authentication. */
START_TEST(test_planted_entry_discarded)
{
  cache_stats_t st;
  result_t r;

  start(1 << 20); /* makes the directory's key */
  cache_shutdown();
  plant("kernel-p", _i == 0 ? 1 : 2, "EVIL");
  start(1 << 20);
  cache_get_stats(&st);
  ck_assert_uint_eq(st.disk_entries, 1); /* indexed, not yet read */
  r = get("kernel-p");
  ck_assert_int_eq(r.status, 0);
  ck_assert_int_eq(r.source, CACHE_MISS);
  ck_assert_str_eq(r.data, "BIN[kernel-p]");
  ck_assert_int_eq(compiles, 1);
  cache_get_stats(&st);
  ck_assert_uint_eq(st.corrupt, 1);
  ck_assert_uint_eq(st.auth_failures, 1);
  /* The entry written in its place authenticates. */
  cache_shutdown();
  start(1 << 20);
  ck_assert_int_eq(get("kernel-p").source, CACHE_HIT_DISK);
}
END_TEST

/* A genuine entry whose payload was changed, with the SHA-256 of the new
 * payload written where version 1 kept its checksum (all an attacker
 * without the key can do), is discarded. */
START_TEST(test_changed_payload_discarded)
{
  cache_stats_t st;
  unsigned char *file;
  char path[512];
  size_t len;
  unsigned n = 0;
  result_t r;

  start(1 << 20);
  get("kernel-q");
  cache_shutdown();
  entry_file(dir, "kernel-q", path, sizeof(path));
  file = read_file(path, &len);
  ck_assert_uint_gt(len, 88);
  file[88] ^= 0x20; /* "BIN[" becomes "bIN[" */
  EVP_Digest(file + 88, len - 88, file + 56, &n, EVP_sha256(), NULL);
  write_file(path, file, len);
  free(file);
  start(1 << 20);
  r = get("kernel-q");
  ck_assert_int_eq(r.source, CACHE_MISS);
  ck_assert_str_eq(r.data, "BIN[kernel-q]");
  cache_get_stats(&st);
  ck_assert_uint_eq(st.auth_failures, 1);
}
END_TEST

/* An entry written under another directory's key (copied between two
 * caches) is discarded. */
START_TEST(test_other_key_discarded)
{
  char other[300], from[512], to[512], cmd[400];
  cache_stats_t st;
  unsigned char *file;
  size_t len;
  result_t r;

  snprintf(other, sizeof(other), "%s-other", dir);
  ck_assert_int_eq(mkdir(other, 0700), 0);
  ck_assert_int_eq(cache_init(&loop, other, 1 << 20, &(hipd_err_t){0}), 0);
  get("kernel-k");
  cache_shutdown();
  start(1 << 20); /* this directory gets a key of its own */
  cache_shutdown();
  entry_file(other, "kernel-k", from, sizeof(from));
  entry_file(dir, "kernel-k", to, sizeof(to));
  file = read_file(from, &len);
  write_file(to, file, len);
  free(file);
  start(1 << 20);
  r = get("kernel-k");
  ck_assert_int_eq(r.source, CACHE_MISS);
  ck_assert_int_eq(compiles, 2);
  cache_get_stats(&st);
  ck_assert_uint_eq(st.auth_failures, 1);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", other);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The key is made at first start, 0600, 32 bytes, hipd's, in a directory
 * made 0700 whatever the umask; it is reused by the next start, so that
 * entries stay valid across restarts. */
START_TEST(test_key_file)
{
  char sub[300], keypath[320];
  unsigned char *k1, *k2;
  size_t n1, n2;
  struct stat st;
  mode_t old = umask(0);
  hipd_err_t err;

  snprintf(sub, sizeof(sub), "%s/made", dir);
  ck_assert_int_eq(cache_init(&loop, sub, 1 << 20, &err), 0);
  umask(old);
  ck_assert_int_eq(lstat(sub, &st), 0);
  ck_assert_uint_eq(st.st_mode & 07777, 0700);
  snprintf(keypath, sizeof(keypath), "%s/.hmac-key", sub);
  ck_assert_msg(lstat(keypath, &st) == 0, "%s: %s", keypath, strerror(errno));
  ck_assert(S_ISREG(st.st_mode));
  ck_assert_uint_eq(st.st_mode & 07777, 0600);
  ck_assert_uint_eq(st.st_uid, geteuid());
  ck_assert_int_eq(st.st_size, 32);
  k1 = read_file(keypath, &n1);
  ck_assert_int_eq(get("kernel-r").source, CACHE_MISS);
  cache_shutdown();
  ck_assert_int_eq(cache_init(&loop, sub, 1 << 20, &err), 0);
  k2 = read_file(keypath, &n2);
  ck_assert_mem_eq(k1, k2, 32);
  ck_assert_int_eq(get("kernel-r").source, CACHE_HIT_DISK);
  ck_assert_int_eq(compiles, 1);
  free(k1);
  free(k2);
}
END_TEST

/* What cache_init refuses, and the message that says why. */
static void refused(const char *path, const char *want)
{
  hipd_err_t err;
  int rc = cache_init(&loop, path, 1 << 20, &err);

  if (rc == 0)
    cache_shutdown();
  ck_assert_msg(rc == HIPD_EPERM, "%s: started (%d: %s), expected \"%s\"", path,
                rc, err.msg, want);
  ck_assert_int_eq(err.code, rc);
  ck_assert_msg(strstr(err.msg, want) != NULL, "\"%s\" does not say \"%s\"",
                err.msg, want);
}

START_TEST(test_directory_refused)
{
  char path[400], want[700], entry[512];

  /* Group- or world-writable. */
  ck_assert_int_eq(chmod(dir, 0777), 0);
  snprintf(want, sizeof(want),
           "cache directory %s is writable by its group or others (mode 0777)",
           dir);
  refused(dir, want);
  ck_assert_int_eq(chmod(dir, 0770), 0);
  refused(dir, "is writable by its group or others (mode 0770)");
  ck_assert_int_eq(chmod(dir, 0700), 0);

  /* A symbolic link to a good directory, with or without a slash. */
  snprintf(path, sizeof(path), "%s-link", dir);
  ck_assert_int_eq(symlink(dir, path), 0);
  snprintf(want, sizeof(want), "cache directory %s is a symbolic link", path);
  refused(path, want);
  strcat(path, "/");
  refused(path, "is a symbolic link");
  path[strlen(path) - 1] = '\0';
  unlink(path);

  /* The key: readable by others, the wrong size, a link. */
  start(1 << 20);
  cache_shutdown();
  snprintf(path, sizeof(path), "%s/.hmac-key", dir);
  ck_assert_int_eq(chmod(path, 0640), 0);
  refused(dir, "is readable or writable by its group or others (mode 0640)");
  ck_assert_int_eq(chmod(path, 0600), 0);
  ck_assert_int_eq(truncate(path, 16), 0);
  refused(dir, "has 16 bytes, not 32");
  unlink(path);
  ck_assert_int_eq(symlink("/dev/null", path), 0);
  refused(dir, "is a symbolic link");
  unlink(path);

  /* An entry file writable by others, or a link. */
  start(1 << 20);
  get("kernel-s");
  cache_shutdown();
  entry_file(dir, "kernel-s", entry, sizeof(entry));
  ck_assert_int_eq(chmod(entry, 0666), 0);
  snprintf(want, sizeof(want),
           "cache entry %s is writable by its group or others (mode 0666)",
           entry);
  refused(dir, want);
  unlink(entry);
  ck_assert_int_eq(symlink(path, entry), 0);
  refused(dir, "is a symbolic link");
  unlink(entry);
  start(1 << 20); /* all is well again */
}
END_TEST

/* Owned by another uid: the directory, the key, an entry. Needs root to
 * give a file away. */
START_TEST(test_owner_refused)
{
  char path[400], want[512];

  if (geteuid() != 0) {
    fprintf(stderr, "check_cache: not root: the ownership checks are not "
                    "tested\n");
    return;
  }
  start(1 << 20);
  get("kernel-o");
  cache_shutdown();
  ck_assert_int_eq(chown(dir, 4242, (gid_t)-1), 0);
  snprintf(want, sizeof(want),
           "cache directory %s is owned by uid 4242, not hipd's uid 0", dir);
  refused(dir, want);
  ck_assert_int_eq(chown(dir, 0, (gid_t)-1), 0);
  snprintf(path, sizeof(path), "%s/.hmac-key", dir);
  ck_assert_int_eq(chown(path, 4242, (gid_t)-1), 0);
  refused(dir, "hmac-key is owned by uid 4242, not hipd's uid 0");
  ck_assert_int_eq(chown(path, 0, (gid_t)-1), 0);
  entry_file(dir, "kernel-o", path, sizeof(path));
  ck_assert_int_eq(chown(path, 4242, (gid_t)-1), 0);
  refused(dir, ".hkc is owned by uid 4242, not hipd's uid 0");
}
END_TEST

static Suite *cache_suite(void)
{
  Suite *s = suite_create("cache");
  TCase *tc = tcase_create("cache");

  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_keys);
  tcase_add_test(tc, test_key_format);
  tcase_add_test(tc, test_miss_then_memory_hit);
  tcase_add_test(tc, test_restart_disk_hit);
  tcase_add_loop_test(tc, test_corrupt_entry_recompiled, 0, 2);
  tcase_add_loop_test(tc, test_warm_load_taken_over, 0, 2);
  tcase_add_test(tc, test_compile_error_not_cached);
  tcase_add_test(tc, test_concurrent_single_compile);
  tcase_add_test(tc, test_eviction_lru);
  tcase_add_test(tc, test_eviction_fair);
  tcase_add_test(tc, test_disk_eviction_fair);
  tcase_add_test(tc, test_clear);
  suite_add_tcase(s, tc);

  tc = tcase_create("authentication");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_loop_test(tc, test_planted_entry_discarded, 0, 2);
  tcase_add_test(tc, test_changed_payload_discarded);
  tcase_add_test(tc, test_other_key_discarded);
  tcase_add_test(tc, test_key_file);
  tcase_add_test(tc, test_directory_refused);
  tcase_add_test(tc, test_owner_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(cache_suite());
}
