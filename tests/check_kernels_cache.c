/* tests/check_kernels_cache.c: the kernel cache on disk: entries that
 * survive a restart, damaged entries, refreshes, and compiles of one
 * source racing in several sessions. The shared helpers are in
 * tests/kernels_util.h. */
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

/* compile_cached on device 0 and check where the binary came from; the
 * kernel must run. */
static void cached_run(hipd_conn_t *conn, const char *src, int refresh,
                       const char *want)
{
  hipd_kernel_t k = 0;
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
  hipd_info_free(info);
  vecadd_run(conn, dev, k, 1000, 0);
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
  ck_assert_int_ge(stat_of(conn, "disk_entries"), 1);
  hipd_close(conn);
  stop_daemon(d);
  ck_assert_int_eq(cache_entries(dir, entry, sizeof(entry)), 1);

  /* Across a restart, from disk. */
  d = start_with_cache(dir);
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
  hipd_kernel_t k = 0;
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

static Suite *kernels_cache_suite(void)
{
  Suite *s = suite_create("kernels_cache");
  TCase *tc;

  tc = tcase_create("cache");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_cache_persistence);
  tcase_add_test(tc, test_cache_concurrent);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr;
  int failed;

  harness_init("check_kernels_cache");
  {
    const char *root = getenv("HIPD_TEST_TMP");
    snprintf(shared_cache, sizeof(shared_cache), "%s/kcache-XXXXXX",
             root != NULL && root[0] != '\0' ? root : "/tmp");
    if (mkdtemp(shared_cache) == NULL) {
      fprintf(stderr, "mkdtemp %s: %s\n", shared_cache, strerror(errno));
      return EXIT_FAILURE;
    }
  }
  sr = srunner_create(kernels_cache_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cache_dir_remove(shared_cache);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
