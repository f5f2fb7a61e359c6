/* tests/check_cache.c: the compiled-kernel cache with a real loop, real
 * thread pool and a real directory: misses, memory and disk hits, restart,
 * corruption, single-flight compilation, eviction, clear. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "hipd.h"
#include "kernels/cache.h"

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

static result_t get(const char *src)
{
  result_t r = {0};
  cache_key_t key;

  key_of(src, &key);
  cache_get(&key, compile_cb, (void *)src, done_cb, &r);
  while (!r.done)
    uv_run(&loop, UV_RUN_ONCE);
  return r;
}

static void start(uint64_t cap)
{
  char err[256];

  ck_assert_int_eq(cache_init(&loop, dir, cap, err, sizeof(err)), 0);
}

static void setup(void)
{
  const char *base = getenv("HIPD_TEST_TMP");

  snprintf(dir, sizeof(dir), "%s/cache-XXXXXX", base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  uv_loop_init(&loop);
  compiles = 0;
  compile_delay_ms = 0;
}

static void teardown(void)
{
  char cmd[300];

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

static Suite *cache_suite(void)
{
  Suite *s = suite_create("cache");
  TCase *tc = tcase_create("cache");

  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_keys);
  tcase_add_test(tc, test_miss_then_memory_hit);
  tcase_add_test(tc, test_restart_disk_hit);
  tcase_add_loop_test(tc, test_corrupt_entry_recompiled, 0, 2);
  tcase_add_test(tc, test_compile_error_not_cached);
  tcase_add_test(tc, test_concurrent_single_compile);
  tcase_add_test(tc, test_eviction_lru);
  tcase_add_test(tc, test_clear);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr = srunner_create(cache_suite());
  int failed;

  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
