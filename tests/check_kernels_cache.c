/* SPDX-License-Identifier: MIT */
/* tests/check_kernels_cache.c: the kernel cache on disk: entries that
 * survive a restart, damaged entries, refreshes, and compiles of one
 * source racing in several sessions. The shared helpers are in
 * tests/lib/kernels_util.h. */
#include "config.h"

#include "kernels_util.h"

/* ------------------------------------------------------------------ cache */

/* A source no cache has seen: @p base with a unique comment. */
static char *fresh_source(const char *base, const char *tag)
{
  struct timespec ts;
  char *s;

  clock_gettime(CLOCK_REALTIME, &ts);
  ck_assert_int_gt(asprintf(&s, "%s// %s %d %lld.%09ld\n", base, tag,
                            (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec),
                   0);
  return s;
}

/* The cache.stats counter @p name. */
static int64_t stat_of(hipd_conn_t *conn, const char *name)
{
  hipd_info_t *info = NULL;
  int dev = -1;
  int64_t v;

  OK(conn, hipd_cache_stats(conn, &info));
  v = info_int(info, name);
  hipd_info_free(info);
  return v;
}

/* The cache.stats counter @p name once it reaches @p want (a compile's
 * result is written to disk after its answer; a warm start loads in the
 * background), or after 10 s. */
static int64_t stat_reach(hipd_conn_t *conn, const char *name, int64_t want)
{
  int64_t v = stat_of(conn, name);

  for (int i = 0; i < 1000 && v < want; i++) {
    usleep(10 * 1000);
    v = stat_of(conn, name);
  }
  return v;
}

/* The reply's timing.NAME (ms). */
static double timing_of(const hipd_info_t *info, const char *name)
{
  char path[64];
  double v = -1;

  snprintf(path, sizeof(path), "timing.%s", name);
  ck_assert_msg(hipd_info_double(info, path, &v) == 0, "no %s", path);
  ck_assert(v >= 0);
  return v;
}

/* compile_cached on device 0 and check where the binary came from, and
 * that its timing says so (the compiler ran for a miss only, the disk was
 * read for a disk hit only); the kernel must run. */
static void cached_run(hipd_conn_t *conn, const char *src, int refresh,
                       const char *want)
{
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  hipd_info_t *info = NULL;
  int dev = 0;

  if (refresh)
    OK(conn, hipd_kernel_compile(conn, dev, src, "vecadd", NULL, &k, &info));
  else
    OK(conn,
       hipd_kernel_compile_cached(conn, dev, src, "vecadd", NULL, &k, &info));
  ck_assert_msg(strcmp(info_str(info, "cache"), want) == 0,
                "cache says %s, expected %s", info_str(info, "cache"), want);
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  if (strcmp(want, "miss") == 0) {
    ck_assert_msg(timing_of(info, "compiler_ms") > 0, "a miss, not compiled");
    /* The helper's own timing of its compiler's call: within the round
     * trip, and with CPU time (the fork and exec of a host compiler, or
     * hiprtc in the helper). */
    ck_assert_msg(timing_of(info, "helper_ms") > 0 &&
                      timing_of(info, "helper_ms") <=
                          timing_of(info, "compiler_ms"),
                  "helper_ms %.4f, compiler_ms %.4f",
                  timing_of(info, "helper_ms"), timing_of(info, "compiler_ms"));
    ck_assert_msg(timing_of(info, "helper_cpu_ms") > 0, "no helper CPU time");
  } else {
    ck_assert_msg(timing_of(info, "compiler_ms") == 0,
                  "a %s hit with compiler time", want);
    ck_assert(timing_of(info, "helper_ms") == 0 &&
              timing_of(info, "helper_cpu_ms") == 0);
    ck_assert(timing_of(info, "wait_ms") == 0);
  }
  if (strcmp(want, "disk") == 0)
    ck_assert_msg(timing_of(info, "disk_ms") > 0, "a disk hit, no disk read");
  if (strcmp(want, "memory") == 0)
    ck_assert(timing_of(info, "disk_ms") == 0);
  ck_assert(timing_of(info, "load_ms") <= info_double(info, "compile_ms"));
  hipd_info_free(info);
  vecadd_run(conn, dev, k, 1000, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
}

/* Memory, then disk across a restart; a corrupted entry is detected,
 * dropped and rebuilt; kernel.compile replaces; cache.clear empties. */
START_TEST(test_cache_persistence)
{
  char dir[256], entry[512];
  char *src = fresh_source(VECADD_SRC, "persistence");
  harness_daemon_t *d;
  hipd_conn_t *conn;
  int64_t misses;
  int dev = 0;

  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  cached_run(conn, src, 0, "miss");
  cached_run(conn, src, 0, "memory");
  ck_assert_int_eq(stat_of(conn, "misses"), 1);
  ck_assert_int_ge(stat_of(conn, "hits_memory"), 1);
  ck_assert_int_ge(stat_reach(conn, "disk_entries", 1), 1);
  hipd_close(conn);
  stop_daemon(d);
  ck_assert_int_eq(cache_entries(dir, entry, sizeof(entry)), 1);

  /* Across a restart, from disk (no warm start: test_cache_warm_start). */
  d = start_with_cache_warm(dir, "0");
  conn = connect_to(d);
  cached_run(conn, src, 0, "disk");
  ck_assert_int_ge(stat_of(conn, "hits_disk"), 1);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  hipd_close(conn);
  stop_daemon(d);

  /* A flipped byte in the middle of the entry. */
  {
    int fd = open(entry, O_RDWR);
    struct stat st;
    unsigned char c;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_eq(pread(fd, &c, 1, st.st_size / 2), 1);
    c ^= 0x5a;
    ck_assert_int_eq(pwrite(fd, &c, 1, st.st_size / 2), 1);
    close(fd);
  }
  d = start_with_cache(dir);
  conn = connect_to(d);
  cached_run(conn, src, 0, "miss");
  ck_assert_int_ge(stat_of(conn, "corrupt"), 1);
  ck_assert_int_eq(stat_of(conn, "misses"), 1);
  cached_run(conn, src, 0, "memory");

  /* kernel.compile compiles anew even when cached. */
  cached_run(conn, src, 1, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), 2);
  cached_run(conn, src, 0, "memory");

  /* cache.clear empties it. */
  OK(conn, hipd_cache_clear(conn));
  ck_assert_int_eq(stat_of(conn, "entries"), 0);
  misses = stat_of(conn, "misses");
  cached_run(conn, src, 0, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), misses + 1);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

typedef struct {
  const char *socket;
  const char *src;
  pthread_barrier_t *go;
  int rc;
  char cache[16];
  char error[512];
} racer_t;

static void *racer_main(void *arg)
{
  racer_t *r = arg;
  hipd_conn_t *conn = NULL;
  hipd_info_t *info = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  const char *s = NULL;

  r->rc = hipd_connect(r->socket, &conn);
  pthread_barrier_wait(r->go);
  if (r->rc != 0) {
    snprintf(r->error, sizeof(r->error), "%s", hipd_last_error(NULL));
    return NULL;
  }
  hipd_set_timeout(conn, 120000);
  r->rc =
      hipd_kernel_compile_cached(conn, 0, r->src, "vecadd", NULL, &k, &info);
  if (r->rc != 0)
    snprintf(r->error, sizeof(r->error), "%s", hipd_last_error(conn));
  else if (hipd_info_str(info, "cache", &s, NULL) == 0)
    snprintf(r->cache, sizeof(r->cache), "%s", s);
  hipd_info_free(info);
  hipd_close(conn);
  return NULL;
}

/* Two sessions compile one new source at once: it is compiled once. */
/* A warm start: what was used last before the restart is loaded back into
 * memory ahead of any request, memory hits counting as uses. A, B and C
 * are compiled in that order, then A is hit in memory; after a restart
 * with room for one entry, A (not C, the newest on disk by its write) is
 * the one loaded, and its first request is a memory hit; B is read from
 * disk. With the default budget, all three are loaded. */
START_TEST(test_cache_warm_start)
{
  char dir[256], room[32];
  char *a = fresh_source(VECADD_SRC, "warm-a"), *b, *c;
  harness_daemon_t *d;
  hipd_conn_t *conn;
  int64_t disk_bytes, entries;

  b = fresh_source(VECADD_SRC, "warm-b");
  c = fresh_source(VECADD_SRC, "warm-c");
  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  cached_run(conn, a, 0, "miss");
  usleep(20 * 1000); /* distinct write times */
  cached_run(conn, b, 0, "miss");
  usleep(20 * 1000);
  cached_run(conn, c, 0, "miss");
  usleep(20 * 1000);
  cached_run(conn, a, 0, "memory"); /* A is now the most recently used */
  entries = stat_reach(conn, "disk_entries", 3);
  ck_assert_int_eq(entries, 3);
  disk_bytes = stat_of(conn, "disk_bytes");
  hipd_close(conn);
  stop_daemon(d);

  /* Room for one entry: the largest file holds one payload, and two
   * payloads are more than it. */
  snprintf(room, sizeof(room), "%lld", (long long)(disk_bytes / entries + 64));
  d = start_with_cache_warm(dir, room);
  conn = connect_to(d);
  ck_assert_int_eq(stat_reach(conn, "warmed", 1), 1);
  ck_assert_int_eq(stat_of(conn, "hits_disk"), 0);
  cached_run(conn, a, 0, "memory");
  cached_run(conn, b, 0, "disk");
  ck_assert_int_eq(stat_of(conn, "warmed"), 1);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  hipd_close(conn);
  stop_daemon(d);

  /* The default budget: all three. */
  d = start_with_cache(dir);
  conn = connect_to(d);
  ck_assert_int_eq(stat_reach(conn, "warmed", 3), 3);
  cached_run(conn, c, 0, "memory");
  cached_run(conn, b, 0, "memory");
  ck_assert_int_eq(stat_of(conn, "hits_disk"), 0);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(a);
  free(b);
  free(c);
}
END_TEST

/* A kernel whose module the session's worker still has loaded is answered
 * from it without the cache: here the cache (room for one entry) evicted
 * A from memory when B was compiled, and A's next request is still a
 * memory hit, no compile. After cache.clear such a module answers
 * nothing: A is compiled again. With workers (--isolation uid) and
 * without (none). */
static void check_loaded_module(const char *isolation)
{
  char dir[256], room[32];
  char *a = fresh_source(VECADD_SRC, "loaded-a");
  char *b = fresh_source(VECADD_SRC, "loaded-b");
  harness_daemon_t *d;
  hipd_conn_t *conn;
  int64_t bytes, misses, loaded;
  int dev = 0; /* OK()'s message names it */

  /* One entry's size, in a cache of its own. */
  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  cached_run(conn, a, 0, "miss");
  bytes = stat_of(conn, "bytes");
  ck_assert_int_gt(bytes, 0);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);

  cache_dir_make(dir, sizeof(dir));
  snprintf(room, sizeof(room), "%lld", (long long)(bytes + bytes / 2));
  d = harness_start("--cpu-devices", "2", "--cache-dir", dir, "--cache-size",
                    room, "--isolation", isolation, NULL);
  ck_assert_msg(d != NULL, "hipd did not start");
  conn = connect_to(d);
  cached_run(conn, a, 0, "miss");
  cached_run(conn, b, 0, "miss");
  ck_assert_int_ge(stat_of(conn, "evictions"), 1);
  ck_assert_int_eq(stat_of(conn, "entries"), 1);
  misses = stat_of(conn, "misses");
  loaded = stat_of(conn, "hits_loaded");
  cached_run(conn, a, 0, "memory");
  ck_assert_int_eq(stat_of(conn, "misses"), misses);
  ck_assert_int_eq(stat_of(conn, "hits_loaded"), loaded + 1);

  OK(conn, hipd_cache_clear(conn));
  cached_run(conn, a, 0, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), misses + 1);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(a);
  free(b);
}

START_TEST(test_cache_loaded_module)
{
  check_loaded_module("uid");
  check_loaded_module("none");
}
END_TEST

/* After a restart, a tenant's worker loads the GPU modules of what its
 * uid compiled before, as the warm start brings the entries back, ahead
 * of any request (cache.stats preloaded); the first request for the
 * kernel then finds it loaded. The CPU device's modules are never loaded
 * ahead (its kernel runner would start for them). */
START_TEST(test_cache_preload)
{
  enum { NSRC = 3 };
  char dir[256];
  char *src[NSRC];
  harness_daemon_t *d;
  hipd_conn_t *conn;
  int gpu;

  for (int i = 0; i < NSRC; i++) {
    char tag[32];
    snprintf(tag, sizeof(tag), "preload-%d", i);
    src[i] = fresh_source(VECADD_SRC, tag);
  }
  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  gpu = !device_is_cpu(conn, 0);
  for (int i = 0; i < NSRC; i++)
    cached_run(conn, src[i], 0, "miss");
  ck_assert_int_eq(stat_reach(conn, "disk_entries", NSRC), NSRC);
  ck_assert_int_eq(stat_of(conn, "preloaded"), 0); /* nothing was there */
  hipd_close(conn);
  stop_daemon(d);

  d = start_with_cache(dir);
  conn = connect_to(d);
  ck_assert_int_eq(stat_reach(conn, "warmed", NSRC), NSRC);
  if (gpu) {
    /* One preload loads at a time on the device, the others after it
     * (kernels.c): every one of them gets its turn. */
    ck_assert_int_eq(stat_reach(conn, "preloaded", NSRC), NSRC);
  } else {
    usleep(200 * 1000); /* a preload would have been sent by now */
    ck_assert_int_eq(stat_of(conn, "preloaded"), 0);
  }
  /* A preloaded module answers the first request itself: the worker
   * keys it as the cache does (the listener told it the compiler's id). */
  for (int i = 0; i < NSRC; i++)
    cached_run(conn, src[i], 0, "memory");
  ck_assert_int_eq(stat_of(conn, "hits_loaded"), gpu ? NSRC : 0);
  ck_assert_int_eq(stat_of(conn, "misses"), 0);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  for (int i = 0; i < NSRC; i++)
    free(src[i]);
}
END_TEST

/* Compiles one after another go to the helper that runs already: its
 * compiler is loaded (a new helper is a process start and a compiler's
 * first compile on the request's path). Six in a row with four helpers
 * allowed start none besides the first. */
START_TEST(test_compiles_reuse_helper)
{
  harness_daemon_t *d = harness_start("--cpu-devices", "1", "--cache-dir", "",
                                      "--compile-jobs", "4", NULL);
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;
  int64_t started = -1;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  for (int i = 0; i < 6; i++) {
    char tag[32];
    char *src;

    snprintf(tag, sizeof(tag), "reuse-%d", i);
    src = fresh_source(VECADD_SRC, tag);
    cached_run(conn, src, 1, "miss");
    free(src);
  }
  ck_assert_int_eq(hipd_daemon_info(conn, &info), 0);
  ck_assert_int_eq(hipd_info_int(info, "compile.started", &started), 0);
  hipd_info_free(info);
  ck_assert_msg(started == 1,
                "%lld helpers started for compiles one after another",
                (long long)started);
  hipd_close(conn);
  stop_daemon(d);
}
END_TEST

START_TEST(test_cache_concurrent)
{
  char dir[256];
  char *src = fresh_source(VECADD_SRC, "concurrent");
  harness_daemon_t *d;
  hipd_conn_t *conn;
  pthread_barrier_t go;
  racer_t r[2];
  pthread_t t[2];
  int64_t misses, waits;
  int miss = 0;

  cache_dir_make(dir, sizeof(dir));
  d = start_with_cache(dir);
  conn = connect_to(d);
  misses = stat_of(conn, "misses");
  waits = stat_of(conn, "waits");
  pthread_barrier_init(&go, NULL, 2);
  for (int i = 0; i < 2; i++) {
    r[i] = (racer_t){.socket = d->socket, .src = src, .go = &go};
    ck_assert_int_eq(pthread_create(&t[i], NULL, racer_main, &r[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_msg(r[i].rc == 0, "racer %d: %s: %s", i, hipd_err_name(r[i].rc),
                  r[i].error);
    if (strcmp(r[i].cache, "miss") == 0)
      miss++;
    else
      ck_assert_msg(strcmp(r[i].cache, "waited") == 0 ||
                        strcmp(r[i].cache, "memory") == 0,
                    "racer %d: cache %s", i, r[i].cache);
  }
  pthread_barrier_destroy(&go);
  ck_assert_int_eq(miss, 1);
  ck_assert_int_eq(stat_of(conn, "misses"), misses + 1);
  if (strcmp(r[0].cache, "waited") == 0 || strcmp(r[1].cache, "waited") == 0)
    ck_assert_int_eq(stat_of(conn, "waits"), waits + 1);
  cached_run(conn, src, 0, "memory");
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* Twelve sessions of one uid compile one new source at once with
 * --tenant-max-compiles 2: those that wait for the compile in flight hold
 * no helper and are not refused; it is compiled once. (Sixteen clients of
 * a program starting together met EBUSY before.) */
START_TEST(test_cache_concurrent_many)
{
  enum { N = 12 };
  char dir[256];
  char *src = fresh_source(VECADD_SRC, "many");
  harness_daemon_t *d;
  pthread_barrier_t go;
  racer_t r[N];
  pthread_t t[N];
  int miss = 0;

  cache_dir_make(dir, sizeof(dir));
  d = harness_start("--cache-dir", dir, "--tenant-max-compiles", "2", NULL);
  ck_assert_ptr_nonnull(d);
  pthread_barrier_init(&go, NULL, N);
  for (int i = 0; i < N; i++) {
    r[i] = (racer_t){.socket = d->socket, .src = src, .go = &go};
    ck_assert_int_eq(pthread_create(&t[i], NULL, racer_main, &r[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_msg(r[i].rc == 0, "racer %d: %s: %s", i, hipd_err_name(r[i].rc),
                  r[i].error);
    miss += strcmp(r[i].cache, "miss") == 0;
  }
  pthread_barrier_destroy(&go);
  ck_assert_int_eq(miss, 1);
  stop_daemon(d);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* ------------------------------------------------- cache authentication */

/* A kernel an attacker would like to see run as vecadd: it subtracts. */
static const char EVIL_SRC[] =
    "extern \"C\" __global__ void vecadd(const float *a, const float *b,\n"
    "                                    float *c, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    c[i] = a[i] - b[i];\n"
    "}\n";

enum { ENTRY_HEADER = 88 }; /* the documented header before the payload */

static unsigned char *file_read(const char *path, size_t *len)
{
  struct stat st;
  unsigned char *buf;
  int fd = open(path, O_RDONLY);

  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(fstat(fd, &st), 0);
  buf = xmalloc((size_t)st.st_size + 1);
  ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
  *len = (size_t)st.st_size;
  return buf;
}

static void file_write(const char *path, const void *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

/* SHA-256 of @p len bytes, by sha256sum(1) (this program does not link
 * libcrypto). */
static void sha256_of(const void *data, size_t len, unsigned char out[32])
{
  const char *tmp = harness_temp_path("payload");
  char cmd[400], hex[65] = "";
  FILE *f;

  file_write(tmp, data, len);
  snprintf(cmd, sizeof(cmd), "sha256sum < '%s'", tmp);
  f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fscanf(f, "%64s", hex), 1);
  pclose(f);
  for (int i = 0; i < 32; i++)
    ck_assert_int_eq(sscanf(hex + 2 * i, "%2hhx", &out[i]), 1);
  unlink(tmp);
}

/* Compile @p src through the cache of a daemon on @p dir and stop it;
 * @return the one entry it wrote, in @p entry. */
static void cache_one(const char *dir, const char *src, char *entry,
                      size_t size)
{
  harness_daemon_t *d = start_with_cache(dir);
  hipd_conn_t *conn = connect_to(d);
  int dev = 0;
  hipd_kernel_t k = compile(conn, dev, src, "vecadd", NULL);

  OK(conn, hipd_kernel_destroy(conn, k));
  hipd_close(conn);
  stop_daemon(d);
  ck_assert_int_eq(cache_entries(dir, entry, size), 1);
}

/* A restarted daemon on @p dir: compile_cached of @p src must compile
 * anew (cache "miss"), run correctly, and log and count the entry it
 * found as failing authentication. */
static void expect_discarded(const char *dir, const char *src)
{
  harness_daemon_t *d = start_with_cache(dir);
  hipd_conn_t *conn = connect_to(d);

  cached_run(conn, src, 0, "miss");
  ck_assert_int_eq(stat_of(conn, "misses"), 1);
  ck_assert_int_eq(stat_of(conn, "hits_disk"), 0);
  ck_assert_int_eq(stat_of(conn, "corrupt"), 1);
  ck_assert_int_eq(stat_of(conn, "auth_failures"), 1);
  ck_assert_msg(harness_log_wait(d, "failed authentication: discarded", 5000),
                "the log does not say the entry failed authentication");
  hipd_close(conn);
  stop_daemon(d);
}

/* A binary planted at the path of vecadd's entry, behind a well-formed
 * version-1 header with a valid checksum (all an attacker who could write
 * the directory needs for the old format), is never run: the daemon
 * compiles vecadd again and the launch adds. */
START_TEST(test_cache_planted_entry)
{
  char dir[256], evil_dir[256], entry[512], evil[512];
  char *src = fresh_source(VECADD_SRC, "planted");
  char *bad = fresh_source(EVIL_SRC, "planted");
  unsigned char *genuine, *payload, *file;
  size_t glen, plen;
  uint32_t hsize = ENTRY_HEADER, reserved = 0;
  uint64_t len64;

  cache_dir_make(dir, sizeof(dir));
  cache_dir_make(evil_dir, sizeof(evil_dir));
  cache_one(evil_dir, bad, evil, sizeof(evil));
  cache_one(dir, src, entry, sizeof(entry));
  genuine = file_read(entry, &glen);
  payload = file_read(evil, &plen);
  ck_assert_uint_gt(plen, ENTRY_HEADER);
  plen -= ENTRY_HEADER;
  len64 = plen;
  file = xmalloc(ENTRY_HEADER + plen);
  memcpy(file, "HIPDKC\0\1", 8);
  memcpy(file + 8, &hsize, 4);
  memcpy(file + 12, &reserved, 4);
  memcpy(file + 16, genuine + 16, 32); /* vecadd's key */
  memcpy(file + 48, &len64, 8);
  memcpy(file + ENTRY_HEADER, payload + ENTRY_HEADER, plen);
  sha256_of(file + ENTRY_HEADER, plen, file + 56);
  file_write(entry, file, ENTRY_HEADER + plen);
  expect_discarded(dir, src);
  free(file);
  free(payload);
  free(genuine);
  cache_dir_remove(evil_dir);
  cache_dir_remove(dir);
  free(bad);
  free(src);
}
END_TEST

/* A genuine entry with one payload byte changed is discarded. */
START_TEST(test_cache_changed_entry)
{
  char dir[256], entry[512];
  char *src = fresh_source(VECADD_SRC, "changed");
  unsigned char *file;
  size_t len;

  cache_dir_make(dir, sizeof(dir));
  cache_one(dir, src, entry, sizeof(entry));
  file = file_read(entry, &len);
  ck_assert_uint_gt(len, ENTRY_HEADER + 16);
  file[ENTRY_HEADER + (len - ENTRY_HEADER) / 2] ^= 0x01;
  /* What version 1 would have accepted: the checksum made to match. */
  sha256_of(file + ENTRY_HEADER, len - ENTRY_HEADER, file + 56);
  file_write(entry, file, len);
  free(file);
  expect_discarded(dir, src);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* An entry copied from the cache of a daemon with another key (another
 * directory) is discarded. */
START_TEST(test_cache_other_key)
{
  char dir[256], other[256], entry[512], there[512];
  char *src = fresh_source(VECADD_SRC, "other-key");
  unsigned char *file;
  const char *name;
  size_t len;

  cache_dir_make(dir, sizeof(dir));
  cache_dir_make(other, sizeof(other));
  cache_one(other, src, there, sizeof(there));
  /* The first daemon's own key, then the foreign entry beside it. */
  stop_daemon(start_with_cache(dir));
  file = file_read(there, &len);
  name = strrchr(there, '/') + 1;
  snprintf(entry, sizeof(entry), "%s/%s", dir, name);
  file_write(entry, file, len);
  free(file);
  expect_discarded(dir, src);
  cache_dir_remove(other);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* The key is made at first start, 0600 and hipd's, and is the same after
 * a restart, where the entry is a disk hit. */
START_TEST(test_cache_key_reused)
{
  char dir[256], entry[512], key[300];
  char *src = fresh_source(VECADD_SRC, "key");
  unsigned char *k1, *k2;
  size_t n1, n2;
  harness_daemon_t *d;
  hipd_conn_t *conn;
  struct stat st;

  cache_dir_make(dir, sizeof(dir));
  cache_one(dir, src, entry, sizeof(entry));
  snprintf(key, sizeof(key), "%s/.hmac-key", dir);
  ck_assert_msg(lstat(key, &st) == 0, "%s: %s", key, strerror(errno));
  ck_assert(S_ISREG(st.st_mode));
  ck_assert_uint_eq(st.st_mode & 07777, 0600);
  ck_assert_uint_eq(st.st_uid, geteuid());
  ck_assert_int_eq(st.st_size, 32);
  k1 = file_read(key, &n1);
  d = start_with_cache_warm(dir, "0");
  conn = connect_to(d);
  cached_run(conn, src, 0, "disk");
  ck_assert_int_eq(stat_of(conn, "hits_disk"), 1);
  ck_assert_int_eq(stat_of(conn, "auth_failures"), 0);
  hipd_close(conn);
  stop_daemon(d);
  k2 = file_read(key, &n2);
  ck_assert_mem_eq(k1, k2, 32);
  free(k1);
  free(k2);
  cache_dir_remove(dir);
  free(src);
}
END_TEST

/* A temporary file in the directory is another hipd's write in progress
 * until it is old: a daemon starting beside it leaves it (removing it
 * failed that write, or that daemon's start when it was its first key)
 * and removes only those too old to be live. Then several daemons
 * started at once on a fresh directory all start, with one key. */
START_TEST(test_cache_temporary_files)
{
  static const char *const fresh[] = {".tmp-4242-beef", ".tmp-key-4243"};
  char dir[256], path[400], key[300];
  struct timespec old[2] = {{.tv_sec = time(NULL) - 3600},
                            {.tv_sec = time(NULL) - 3600}};
  harness_daemon_t *ds[3];
  struct stat st;

  cache_dir_make(dir, sizeof(dir));
  stop_daemon(start_with_cache(dir)); /* makes the key */
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, fresh[i]);
    file_write(path, "partial", 7);
  }
  snprintf(path, sizeof(path), "%s/.tmp-4244-dead", dir);
  file_write(path, "interrupted", 11);
  ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
  stop_daemon(start_with_cache(dir));
  ck_assert_msg(lstat(path, &st) != 0 && errno == ENOENT,
                "%s, an hour old, was not removed", path);
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, fresh[i]);
    ck_assert_msg(lstat(path, &st) == 0,
                  "%s, a write that may be in progress, was removed", path);
    unlink(path);
  }
  cache_dir_remove(dir);

  cache_dir_make(dir, sizeof(dir));
  for (size_t i = 0; i < 3; i++) {
    const char *args[] = {"--cpu-devices", "1", "--cache-dir", dir, NULL};

    ds[i] = harness_spawn(NULL, args);
    ck_assert_ptr_nonnull(ds[i]);
  }
  for (size_t i = 0; i < 3; i++) {
    int ready = harness_wait_ready(ds[i], 20000);

    if (ready != 0)
      harness_log_dump(ds[i]);
    ck_assert_msg(ready == 0, "daemon %zu of 3 on %s did not start", i, dir);
  }
  for (size_t i = 0; i < 3; i++)
    stop_daemon(ds[i]);
  snprintf(key, sizeof(key), "%s/.hmac-key", dir);
  ck_assert_int_eq(lstat(key, &st), 0);
  ck_assert_int_eq(st.st_size, 32);
  cache_dir_remove(dir);
}
END_TEST

/* hipd on @p dir must refuse to start and say @p want. */
static void start_refused(const char *dir, const char *want)
{
  const char *args[] = {"--cpu-devices", "2", "--cache-dir", dir, NULL};
  harness_daemon_t *d = harness_spawn(NULL, args);
  int code;

  ck_assert_ptr_nonnull(d);
  code = harness_wait_exit(d, 20000);
  if (code == -1 || !harness_log_contains(d, want))
    harness_log_dump(d);
  ck_assert_msg(code > 0, "hipd on %s: exit %d, expected a refusal", dir, code);
  ck_assert_msg(harness_log_contains(d, want), "the log does not say \"%s\"",
                want);
  harness_free(d);
}

/* A cache directory someone else could have written makes hipd refuse to
 * start, and say why. */
START_TEST(test_cache_dir_refused)
{
  char dir[256], link[300], want[600], key[300];

  cache_dir_make(dir, sizeof(dir));
  ck_assert_int_eq(chmod(dir, 0777), 0);
  snprintf(want, sizeof(want),
           "cache directory %s is writable by its group or others (mode 0777)",
           dir);
  start_refused(dir, want);
  ck_assert_int_eq(chmod(dir, 0700), 0);

  snprintf(link, sizeof(link), "%s-link", dir);
  ck_assert_int_eq(symlink(dir, link), 0);
  snprintf(want, sizeof(want), "cache directory %s is a symbolic link", link);
  start_refused(link, want);
  unlink(link);

  stop_daemon(start_with_cache(dir)); /* makes the key */
  snprintf(key, sizeof(key), "%s/.hmac-key", dir);
  ck_assert_int_eq(chmod(key, 0644), 0);
  snprintf(want, sizeof(want),
           "cache key file %s is readable or writable by its group or others "
           "(mode 0644)",
           key);
  start_refused(dir, want);
  ck_assert_int_eq(chmod(key, 0600), 0);

  if (geteuid() == 0) {
    ck_assert_int_eq(chown(dir, 4242, (gid_t)-1), 0);
    snprintf(want, sizeof(want),
             "cache directory %s is owned by uid 4242, not hipd's uid 0", dir);
    start_refused(dir, want);
    ck_assert_int_eq(chown(dir, 0, (gid_t)-1), 0);
  } else {
    fprintf(stderr, "check_kernels: not root: a cache directory of another "
                    "uid is not tested\n");
  }
  stop_daemon(start_with_cache(dir)); /* all is well again */
  cache_dir_remove(dir);
}
END_TEST

static Suite *kernels_cache_suite(void)
{
  Suite *s = suite_create("kernels_cache");
  TCase *tc;

  tc = tcase_create("cache");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_cache_persistence);
  tcase_add_test(tc, test_cache_warm_start);
  tcase_add_test(tc, test_cache_loaded_module);
  tcase_add_test(tc, test_cache_preload);
  tcase_add_test(tc, test_compiles_reuse_helper);
  tcase_add_test(tc, test_cache_concurrent);
  tcase_add_test(tc, test_cache_concurrent_many);
  suite_add_tcase(s, tc);

  tc = tcase_create("cache_authentication");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_cache_planted_entry);
  tcase_add_test(tc, test_cache_changed_entry);
  tcase_add_test(tc, test_cache_other_key);
  tcase_add_test(tc, test_cache_key_reused);
  tcase_add_test(tc, test_cache_dir_refused);
  tcase_add_test(tc, test_cache_temporary_files);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return kernels_main("check_kernels_cache", kernels_cache_suite);
}
