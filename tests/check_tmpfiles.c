/* SPDX-License-Identifier: MIT */
/* tests/check_tmpfiles.c: what a hipd run leaves in $TMPDIR. The CPU
 * device writes each compiled module into a private directory
 * ($TMPDIR/hipd-modules-XXXXXX) for its kernel runner; with worker
 * processes (--isolation uid, the default) every worker makes its own.
 * Every process that makes one must remove it when it ends, a stop by
 * SIGTERM included: here a daemon gets a TMPDIR of its own, compiles and
 * launches a kernel on the CPU device in a worker, is stopped, and the
 * directory must be empty of hipd-modules-* afterwards.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <check.h>
#include <dirent.h>
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

static const char add1_src[] =
    "extern \"C\" __global__ void add1(int *p, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += 1;\n"
    "}\n";

/* The number of hipd-modules-* entries in @p dir, their names in @p names
 * (truncated to @p size). */
static int count_moddirs(const char *dir, char *names, size_t size)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  size_t used = 0;

  ck_assert_msg(d != NULL, "opendir %s", dir);
  names[0] = '\0';
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "hipd-modules-", 13) != 0)
      continue;
    n++;
    if (used < size)
      used += (size_t)snprintf(names + used, size - used, " %s", e->d_name);
  }
  closedir(d);
  return n;
}

/* Compile and run add1 on the daemon's CPU device and check its result. */
static void run_kernel(harness_daemon_t *d)
{
  hipd_conn_t *conn = connect_named(d, "check_tmpfiles", 120000);
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
  int32_t host[64];
  hipd_buffer_t buf = HIPD_BUFFER_NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  hipd_args_t *args = args_new();
  int dev = 0;

  for (int i = 0; i < 64; i++)
    host[i] = i;
  OK(conn, hipd_mem_alloc(conn, dev, 64, "int32", &buf));
  OK(conn, hipd_mem_write(conn, buf, 0, host, sizeof(host)));
  OK(conn, hipd_kernel_compile(conn, dev, add1_src, "add1", NULL, &k, NULL));
  OK(conn, hipd_args_buffer(args, buf, 0));
  OK(conn, hipd_args_i32(args, 64));
  OK(conn, hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_mem_read(conn, buf, 0, host, sizeof(host)));
  for (int i = 0; i < 64; i++)
    ck_assert_int_eq(host[i], i + 1);
  hipd_args_free(args);
  /* The kernel and the buffer are left to the session's end, and the
   * session to the daemon's stop: nothing is unloaded by hand. */
  hipd_close(conn);
}

static void check_clean_after(const char *isolation, int keep_session)
{
  char tmpl[] = "/tmp/hipd-tmpfiles-XXXXXX", names[1024];
  const char *old = getenv("TMPDIR");
  char *saved = old ? strdup(old) : NULL;
  harness_daemon_t *d;
  int n;

  ck_assert_ptr_nonnull(mkdtemp(tmpl));
  /* Like /tmp: the worker and compile-helper accounts write there too. */
  ck_assert_int_eq(chmod(tmpl, 01777), 0);
  setenv("TMPDIR", tmpl, 1);
  d = harness_start("--devices", "cpu", "--isolation", isolation, NULL);
  if (saved != NULL)
    setenv("TMPDIR", saved, 1);
  else
    unsetenv("TMPDIR");
  free(saved);
  ck_assert_ptr_nonnull(d);
  if (keep_session) {
    /* Stopped with a session still open and its kernel loaded. */
    hipd_conn_t *conn = connect_named(d, "check_tmpfiles-open", 120000);
    run_kernel(d);
    ping_ok(conn);
    /* The module directory exists while a kernel may still be loaded:
     * this test would pass vacuously if it were made elsewhere. */
    ck_assert_int_ge(count_moddirs(tmpl, names, sizeof(names)), 1);
    stop_checked(&d);
    hipd_close(conn);
  } else {
    run_kernel(d);
    ck_assert_int_ge(count_moddirs(tmpl, names, sizeof(names)), 1);
    stop_checked(&d);
  }
  n = count_moddirs(tmpl, names, sizeof(names));
  ck_assert_msg(n == 0, "left in %s:%s", tmpl, names);
  ck_assert_msg(rmdir(tmpl) == 0, "%s is not empty", tmpl);
}

START_TEST(test_uid_isolation_clean)
{
  check_clean_after("uid", 0);
}
END_TEST

START_TEST(test_uid_isolation_stop_with_session)
{
  check_clean_after("uid", 1);
}
END_TEST

START_TEST(test_single_process_clean)
{
  check_clean_after("none", 1);
}
END_TEST

static Suite *tmpfiles_suite(void)
{
  Suite *s = suite_create("tmpfiles");
  TCase *tc = tcase_create("moddir");

  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_uid_isolation_clean);
  tcase_add_test(tc, test_uid_isolation_stop_with_session);
  tcase_add_test(tc, test_single_process_clean);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_tmpfiles");
  failed = test_run(tmpfiles_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
