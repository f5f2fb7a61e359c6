/* SPDX-License-Identifier: MIT */
/* tests/lib/testutil.c: the helpers of tests/lib/testutil.h. */
#define _GNU_SOURCE 1
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "run.h"
#include "testutil.h"

/* Connect to daemon @p d as @p name; a hung daemon fails the test after
 * @p timeout_ms instead of hanging it. */
hipd_conn_t *connect_named(const harness_daemon_t *d, const char *name,
                           int timeout_ms)
{
  hipd_conn_t *conn = NULL;
  int rc;

  ck_assert_msg(d != NULL, "no daemon");
  rc = hipd_connect2(d->socket, name, &conn);
  ck_assert_msg(rc == 0, "connect to %s: %s (%s)", d->socket, hipd_err_name(rc),
                hipd_last_error(NULL));
  hipd_set_timeout(conn, timeout_ms);
  return conn;
}

/* A ping with a 6-byte payload, which must come back unchanged. */
void ping_ok(hipd_conn_t *conn)
{
  char out[16];
  size_t n = 0;
  int rc = hipd_ping(conn, "alive?", 6, out, sizeof(out), &n);

  ck_assert_msg(rc == 0, "ping: %s (%s)", hipd_err_name(rc),
                hipd_last_error(conn));
  ck_assert_uint_eq(n, 6);
  ck_assert_int_eq(memcmp(out, "alive?", 6), 0);
}

/* Stop daemon *@p d (if any) and free it; its log is printed if it exited
 * with an error, and the test then fails. */
void stop_checked(harness_daemon_t **d)
{
  int code;

  if (*d == NULL)
    return;
  code = harness_stop(*d);
  if (code != 0)
    harness_log_dump(*d);
  harness_free(*d);
  *d = NULL;
  ck_assert_msg(code == 0, "hipd exited with %d", code);
}

/* The daemon's device count, which these suites need to be at least 2. */
int device_count_min2(hipd_conn_t *conn)
{
  int n = -1, dev = -1;

  OK(conn, hipd_device_count(conn, &n));
  ck_assert_int_ge(n, 2);
  return n;
}

/* calloc() that fails the test instead of returning NULL (0 bytes: 1). */
void *xmalloc(size_t n)
{
  void *p = calloc(1, n ? n : 1);

  ck_assert_ptr_nonnull(p);
  return p;
}

/* A new kernel argument list. */
hipd_args_t *args_new(void)
{
  hipd_args_t *a = hipd_args_new();

  ck_assert_ptr_nonnull(a);
  return a;
}

/* Fields of a device.get, daemon.info... record; a missing field or one of
 * another type fails the test. */
int64_t info_int(const hipd_info_t *info, const char *path)
{
  int64_t v = 0;
  int rc = hipd_info_int(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

uint64_t info_uint(const hipd_info_t *info, const char *path)
{
  uint64_t v = 0;
  int rc = hipd_info_uint(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

double info_double(const hipd_info_t *info, const char *path)
{
  double v = 0;
  int rc = hipd_info_double(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

int info_bool(const hipd_info_t *info, const char *path)
{
  int v = 0;
  int rc = hipd_info_bool(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

const char *info_str(const hipd_info_t *info, const char *path)
{
  const char *s = NULL;
  size_t len = 0;
  int rc = hipd_info_str(info, path, &s, &len);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return s;
}

/* Is @p s one of the strings of the array at @p path? */
int info_has_str(const hipd_info_t *info, const char *path, const char *s)
{
  int n = hipd_info_len(info, path);

  for (int i = 0; i < n; i++) {
    char p[128];
    const char *v = NULL;
    snprintf(p, sizeof(p), "%s%s%d", path, path[0] ? "." : "", i);
    if (hipd_info_str(info, p, &v, NULL) == 0 && strcmp(v, s) == 0)
      return 1;
  }
  return 0;
}

/* Is device @p dev the host (a CPU device)? */
int device_is_cpu(hipd_conn_t *conn, int dev)
{
  hipd_info_t *info = NULL;
  int cpu;

  int rc = hipd_device_get(conn, dev, &info);

  ck_assert_msg(rc == 0, "device.get %d: %s", dev, hipd_last_error(conn));
  cpu = info_bool(info, "is_cpu");
  hipd_info_free(info);
  return cpu;
}

int64_t info_get(const hipd_info_t *info, const char *path)
{
  int64_t v = -1;

  (void)hipd_info_int(info, path, &v);
  return v;
}

/* ------------------------------------------------------------ GPU targets */

const char *testutil_hip_platform(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  const char *platform = NULL;
  int dev = -1; /* for OK's message */

  OK(conn, hipd_daemon_info(conn, &info));
  if (info_has_str(info, "features", "hip-amd"))
    platform = "amd";
  else if (info_has_str(info, "features", "hip-nvidia"))
    platform = "nvidia";
  hipd_info_free(info);
  return platform;
}

void testutil_gpu_arch(hipd_conn_t *conn, char *arch, size_t size)
{
  const char *platform = testutil_hip_platform(conn);
  int dev = 0; /* for OK's message */

  snprintf(arch, size, "%s", "");
  if (platform != NULL && strcmp(platform, "amd") == 0) {
    snprintf(arch, size, "gfx90a");
  } else if (platform != NULL) {
    hipd_info_t *d = NULL;
    OK(conn, hipd_device_get(conn, dev, &d));
    if (!info_bool(d, "is_cpu"))
      snprintf(arch, size, "%s", info_str(d, "arch"));
    hipd_info_free(d);
  }
}

/* ------------------------------------------------------ bytes and files */

const char TESTUTIL_FILL_SRC[] =
    "extern \"C\" __global__ void fill(int *p, int v, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] = v + i;\n"
    "}\n";

const char TESTUTIL_FAULT_SRC[] =
    "extern \"C\" __global__ void fault(int *p, int n)\n"
    "{\n"
    "  /* An address no allocation has: an illegal address. */\n"
    "  volatile int *bad = (volatile int *)(0x8ull + (unsigned long long)n);\n"
    "  *bad = p[0];\n"
    "}\n";

void testutil_fill_xorshift(void *buf, size_t n, uint32_t x, int shift)
{
  uint8_t *p = buf;

  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)(x >> shift);
  }
}

int testutil_tmpdir(char *buf, size_t size, const char *prefix)
{
  const char *root = getenv("HIPD_TEST_TMP");

  snprintf(buf, size, "%s/%s-XXXXXX",
           root != NULL && root[0] != '\0' ? root : "/tmp", prefix);
  return mkdtemp(buf) != NULL ? 0 : -1;
}

static int remove_cb(const char *path, const struct stat *st, int flag,
                     struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void testutil_rmtree(const char *dir)
{
  if (dir[0] != '\0')
    nftw(dir, remove_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------- programs */

harness_daemon_t *testutil_start_cached(const char *cache_dir)
{
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--cache-dir", cache_dir, NULL);

  ck_assert_msg(d != NULL, "hipd did not start");
  return d;
}

int testutil_main_cached(const char *name, const char *prefix, char *cache,
                         size_t size, Suite *(*make_suite)(void))
{
  int failed;

  harness_init(name);
  if (testutil_tmpdir(cache, size, prefix) != 0) {
    fprintf(stderr, "mkdtemp %s: %s\n", cache, strerror(errno));
    return EXIT_FAILURE;
  }
  failed = test_run(make_suite());
  testutil_rmtree(cache);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int proc_open_fds(pid_t pid)
{
  char path[64];
  struct dirent *e;
  DIR *dh;
  int n = 0;

  snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
  if ((dh = opendir(path)) == NULL)
    return -1;
  while ((e = readdir(dh)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(dh);
  return n;
}

int proc_open_fds_settled(pid_t pid, int max_ms)
{
  int n = proc_open_fds(pid);

  for (int waited = 0; waited < max_ms; waited += 200) {
    int now;

    usleep(200 * 1000);
    if ((now = proc_open_fds(pid)) == n)
      break;
    n = now;
  }
  return n;
}

int proc_stat_read(pid_t pid, proc_stat_t *st)
{
  char path[64], buf[1024], *open, *close;
  size_t n;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  if (pid <= 0 || (f = fopen(path, "r")) == NULL)
    return -1;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* "pid (comm) state ppid ...": comm may hold spaces and parentheses,
   * the last ')' ends it; utime and stime are fields 14 and 15. */
  open = strchr(buf, '(');
  close = strrchr(buf, ')');
  if (open == NULL || close == NULL || close < open || close[1] != ' ')
    return -1;
  memset(st, 0, sizeof(*st));
  snprintf(st->comm, sizeof(st->comm), "%.*s", (int)(close - open - 1),
           open + 1);
  if (sscanf(close + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld",
             &st->state, &st->ppid, &st->utime, &st->stime) != 4)
    return -1;
  return 0;
}

int proc_in_tree(pid_t pid, pid_t ancestor)
{
  proc_stat_t st;

  for (int depth = 0; depth < 32 && pid > 0; depth++) {
    if (pid == ancestor)
      return 1;
    if (proc_stat_read(pid, &st) != 0)
      return 0;
    pid = st.ppid;
  }
  return 0;
}

long long proc_status_value(pid_t pid, const char *key)
{
  char path[64], line[256];
  size_t klen = strlen(key);
  long long v = -1;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  while (v < 0 && fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, key, klen) == 0 && line[klen] == ':')
      v = strtoll(line + klen + 1, NULL, 10);
  fclose(f);
  return v;
}

/* @p pid's threads, appended to @p out from @p n. @return the new count. */
static int proc_threads_of(pid_t pid, proc_thread_t *out, int n, int max)
{
  char path[320], line[256], comm[32] = "";
  struct dirent *e;
  DIR *dh;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
  if ((f = fopen(path, "r")) != NULL) {
    if (fgets(comm, sizeof(comm), f) != NULL)
      comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
  }
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  if ((dh = opendir(path)) == NULL)
    return n;
  while (n < max && (e = readdir(dh)) != NULL) {
    proc_thread_t *t = &out[n];

    if (e->d_name[0] == '.')
      continue;
    memset(t, 0, sizeof(*t));
    t->pid = pid;
    t->tid = (pid_t)atoi(e->d_name);
    snprintf(t->comm, sizeof(t->comm), "%s", comm);
    snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid,
             e->d_name);
    if ((f = fopen(path, "r")) == NULL)
      continue;
    while (fgets(line, sizeof(line), f) != NULL) {
      if (strncmp(line, "Name:", 5) == 0) {
        char *v = line + 5 + strspn(line + 5, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(t->name, sizeof(t->name), "%s", v);
      } else if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0) {
        t->waits = atoll(line + 24);
      } else if (strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0) {
        t->preempted = atoll(line + 27);
      }
    }
    fclose(f);
    n++;
  }
  closedir(dh);
  return n;
}

int proc_threads(pid_t pid, proc_thread_t *out, int max)
{
  proc_stat_t st;

  if (proc_stat_read(pid, &st) != 0)
    return -1;
  return proc_threads_of(pid, out, 0, max);
}

int proc_tree_threads(pid_t root, proc_thread_t *out, int max)
{
  pid_t tree[256];
  int ntree = 1, n;
  struct dirent *e;
  DIR *dh;
  proc_stat_t st;

  if (proc_stat_read(root, &st) != 0)
    return -1;
  tree[0] = root;
  /* Below root, to any depth: a process whose parent is in the tree
   * joins it; again until the tree stops growing. */
  for (int grew = 1; grew && ntree < 256;) {
    grew = 0;
    if ((dh = opendir("/proc")) == NULL)
      return -1;
    while ((e = readdir(dh)) != NULL && ntree < 256) {
      pid_t pid = (pid_t)atoi(e->d_name);
      int in = 0;

      if (pid <= 0)
        continue;
      for (int i = 0; i < ntree && !in; i++)
        in = tree[i] == pid;
      if (in || proc_stat_read(pid, &st) != 0 || st.ppid <= 0)
        continue;
      for (int i = 0; i < ntree; i++)
        if (tree[i] == st.ppid) {
          tree[ntree++] = pid;
          grew = 1;
          break;
        }
    }
    closedir(dh);
  }
  n = 0;
  for (int i = 0; i < ntree; i++)
    n = proc_threads_of(tree[i], out, n, max);
  return n;
}
