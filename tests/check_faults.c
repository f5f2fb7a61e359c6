/* SPDX-License-Identifier: MIT */
/* tests/check_faults.c: a kernel fault on a GPU, as the daemon must handle
 * it (see PROTOCOL.md, "Kernel faults"): the launching client gets an
 * error, the daemon stays up, other sessions on that device get a clear
 * error for their objects of the lost context, and once the daemon has
 * reset the device new objects and new sessions work.
 *
 * Only GPU devices fault this way; a daemon without one (CI) runs nothing
 * here and says so. The CPU device's crash containment is tested in
 * check_kernels. */
#include "config.h"

#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "run.h"
#include "testutil.h"
#include "users.h"

static harness_daemon_t *d;

static hipd_conn_t *conn(void)
{
  hipd_conn_t *c = NULL;

  ck_assert_int_eq(hipd_connect(d->socket, &c), 0);
  return c;
}

/* Fill @p n ints of a new buffer on @p dev with v + i and check them. */
static void fill_and_check(hipd_conn_t *c, int dev, int v)
{
  enum { N = 4096 };
  static int out[N];
  hipd_buffer_t b;
  hipd_kernel_t k;
  hipd_args_t *a = hipd_args_new();
  uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};

  ck_assert_int_eq(hipd_mem_alloc(c, dev, N, "int32", &b), 0);
  ck_assert_int_eq(hipd_kernel_compile_cached(c, dev, TESTUTIL_FILL_SRC, "fill",
                                              NULL, &k, NULL),
                   0);
  hipd_args_buffer(a, b, 0);
  hipd_args_i32(a, v);
  hipd_args_i32(a, N);
  ck_assert_int_eq(
      hipd_kernel_launch(c, k, grid, block, 0, HIPD_STREAM_NULL, a), 0);
  ck_assert_int_eq(hipd_mem_read(c, b, 0, out, sizeof(out)), 0);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(out[i], v + i);
  ck_assert_int_eq(hipd_mem_free(c, b), 0);
  ck_assert_int_eq(hipd_kernel_destroy(c, k), 0);
  hipd_args_free(a);
}

START_TEST(test_gpu_fault)
{
  hipd_conn_t *a = conn(), *b = conn(), *c = NULL;
  hipd_info_t *info;
  hipd_buffer_t ba, bb, t;
  hipd_kernel_t kf;
  hipd_stream_t st;
  hipd_args_t *args = hipd_args_new();
  uint32_t one[3] = {1, 1, 1};
  int ndev = 0, gpu = -1, other_gpu = -1, rc, x = 7;
  size_t n = 0;

  ck_assert_int_eq(hipd_device_count(a, &ndev), 0);
  for (int dev = 0; dev < ndev; dev++) {
    int is_cpu = 1;
    ck_assert_int_eq(hipd_device_get(a, dev, &info), 0);
    ck_assert_int_eq(hipd_info_bool(info, "is_cpu", &is_cpu), 0);
    hipd_info_free(info);
    if (!is_cpu && gpu < 0)
      gpu = dev;
    else if (!is_cpu && other_gpu < 0)
      other_gpu = dev;
  }
  if (gpu < 0) {
    printf("check_faults: no GPU device: nothing to fault (CPU-device "
           "crashes are tested in check_kernels)\n");
    goto out;
  }
  /* A works on the GPU; B, a bystander, has a buffer there. */
  fill_and_check(b, gpu, 100);
  ck_assert_int_eq(hipd_mem_alloc(a, gpu, 16, "int32", &ba), 0);
  ck_assert_int_eq(hipd_mem_write(a, ba, 0, &x, sizeof(x)), 0);
  ck_assert_int_eq(hipd_mem_alloc(b, gpu, 16, "int32", &bb), 0);
  ck_assert_int_eq(hipd_mem_write(b, bb, 0, &x, sizeof(x)), 0);

  /* A's kernel faults: A is told, at the launch or at the next
   * synchronisation of its stream. */
  ck_assert_int_eq(
      hipd_kernel_compile(a, gpu, TESTUTIL_FAULT_SRC, "fault", NULL, &kf, NULL),
      0);
  ck_assert_int_eq(hipd_stream_default(a, gpu, &st), 0);
  hipd_args_buffer(args, ba, 0);
  hipd_args_i32(args, 0);
  rc = hipd_kernel_launch(a, kf, one, one, 0, st, args);
  if (rc == 0)
    rc = hipd_stream_synchronize(a, st);
  ck_assert_msg(rc == HIPD_EDEVLOST || rc == HIPD_ELAUNCH,
                "fault reported as %s: %s", hipd_err_name(rc),
                hipd_last_error(a));
  /* The daemon is up; B's objects of the lost context fail clearly. (On
   * NVIDIA the fault poisons the CUDA runtime of the whole process, so
   * other GPUs are lost too: nothing is asserted about them.) */
  ck_assert_int_eq(hipd_ping(b, "x", 1, &x, sizeof(x), &n), 0);
  rc = hipd_mem_read(b, bb, 0, &x, sizeof(x));
  ck_assert_msg(rc == HIPD_EDEVLOST, "bystander read: %s: %s",
                hipd_err_name(rc), hipd_last_error(b));
  ck_assert_ptr_nonnull(strstr(hipd_last_error(b), "device"));
  (void)other_gpu;

  /* The daemon recovers the device (in place when the runtime can reset
   * it, else by restarting itself on the same socket): a new session then
   * works on it. Old sessions are either still connected or were told
   * they were disconnected. */
  for (int tries = 0; tries < 1200; tries++) {
    if (c == NULL && hipd_connect(d->socket, &c) != 0)
      c = NULL;
    rc = c ? hipd_mem_alloc(c, gpu, 16, "int32", &t) : HIPD_ECONNECT;
    if (rc == 0) {
      hipd_mem_free(c, t);
      break;
    }
    ck_assert_msg(rc == HIPD_EDEVLOST || rc == HIPD_EDISCONNECTED ||
                      rc == HIPD_ECONNECT,
                  "alloc after the fault: %s: %s", hipd_err_name(rc),
                  c ? hipd_last_error(c) : hipd_last_error(NULL));
    if (rc == HIPD_EDISCONNECTED) {
      hipd_close(c);
      c = NULL;
    }
    usleep(50 * 1000);
  }
  ck_assert_msg(rc == 0, "no recovery: %s: %s", hipd_err_name(rc),
                c ? hipd_last_error(c) : hipd_last_error(NULL));
  fill_and_check(c, gpu, 1000);
  ck_assert(harness_log_contains(d, "lost its context"));
  rc = hipd_ping(a, "x", 1, &x, sizeof(x), &n);
  if (rc == HIPD_EDISCONNECTED) {
    /* Restarted: the old sessions are gone; new ones work. */
    hipd_close(a);
    hipd_close(b);
    a = conn();
    b = conn();
  } else {
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(hipd_mem_free(b, bb), 0);
    ck_assert_int_eq(hipd_mem_free(a, ba), 0);
    ck_assert_int_eq(hipd_kernel_destroy(a, kf), 0);
  }
  fill_and_check(b, gpu, 2000);
  fill_and_check(a, gpu, 3000);
  hipd_close(c);
out:
  hipd_args_free(args);
  hipd_close(a);
  hipd_close(b);
}
END_TEST

/* ------------------------------------------- another tenant's fault */

#define FAULT_USER "hipd_ft_a"

/* The first GPU device, or -1. */
static int first_gpu(hipd_conn_t *c)
{
  hipd_info_t *info;
  int ndev = 0;

  if (hipd_device_count(c, &ndev) != 0)
    return -1;
  for (int dev = 0; dev < ndev; dev++) {
    int is_cpu = 1;
    if (hipd_device_get(c, dev, &info) != 0)
      continue;
    hipd_info_bool(info, "is_cpu", &is_cpu);
    hipd_info_free(info);
    if (!is_cpu)
      return dev;
  }
  return -1;
}

/* In a child that became FAULT_USER: launch the faulting kernel on @p gpu
 * and exit 0 once the fault was reported. */
static void fault_as_other_uid(const char *socket, int gpu)
{
  hipd_conn_t *a = NULL;
  hipd_buffer_t ba;
  hipd_kernel_t kf;
  hipd_args_t *args;
  uint32_t one[3] = {1, 1, 1};
  int rc;

  if (harness_become(FAULT_USER) != 0)
    _exit(10);
  if (hipd_connect(socket, &a) != 0)
    _exit(11);
  hipd_set_timeout(a, 60000);
  if (hipd_mem_alloc(a, gpu, 16, "int32", &ba) != 0 ||
      hipd_kernel_compile(a, gpu, TESTUTIL_FAULT_SRC, "fault", NULL, &kf,
                          NULL) != 0)
    _exit(12);
  args = hipd_args_new();
  hipd_args_buffer(args, ba, 0);
  hipd_args_i32(args, 0);
  rc = hipd_kernel_launch(a, kf, one, one, 0, HIPD_STREAM_NULL, args);
  if (rc == 0)
    rc = hipd_device_synchronize(a, gpu);
  _exit(rc == HIPD_EDEVLOST || rc == HIPD_ELAUNCH ? 0 : 13);
}

/* Tenant A (another uid) faults the GPU while tenant B (root) has a
 * buffer there and keeps working: B loses nothing, unless both are clients
 * of one MPS server. With --mps @p mps and --mps-tenants @p tenants (auto:
 * B's uid, first, has the MPS server; A's worker a context of its own). */
static void other_tenant_fault(const char *mps, const char *tenants)
{
  const char *args[] = {
      "--cache-dir",   "",      "--socket-mode", "0666",  "--mps", mps,
      "--mps-tenants", tenants, "--log-level",   "debug", NULL};
  int shared = strcmp(mps, "on") == 0 && strcmp(tenants, "all") == 0;
  harness_daemon_t *dd;
  hipd_conn_t *b = NULL;
  hipd_buffer_t bb;
  int gpu, x = 4242, y = 0, status;
  pid_t pid;

  if (geteuid() != 0) {
    printf("check_faults: another tenant's fault: needs root (test user)\n");
    return;
  }
  if (users_make(FAULT_USER, NULL, NULL) != 0) {
    printf("check_faults: cannot create " FAULT_USER "\n");
    return;
  }
  dd = harness_startv(args);
  ck_assert_ptr_nonnull(dd);
  ck_assert_int_eq(harness_share_socket(dd), 0);
  ck_assert_int_eq(hipd_connect(dd->socket, &b), 0);
  hipd_set_timeout(b, 60000);
  if ((gpu = first_gpu(b)) < 0) {
    printf("check_faults: no GPU device: nothing to fault\n");
    goto out;
  }
  if (strcmp(mps, "on") == 0 && !harness_log_contains(dd, "MPS active")) {
    printf("check_faults: --mps on did not start MPS here\n");
  }
  fill_and_check(b, gpu, 10);
  ck_assert_int_eq(hipd_mem_alloc(b, gpu, 16, "int32", &bb), 0);
  ck_assert_int_eq(hipd_mem_write(b, bb, 0, &x, sizeof(x)), 0);
  pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0)
    fault_as_other_uid(dd->socket, gpu);
  /* B works while A faults. */
  for (int i = 0; i < 20; i++)
    fill_and_check(b, gpu, 100 + i);
  ck_assert(waitpid(pid, &status, 0) == pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "tenant A's fault was not reported to A (child status %d)",
                status);
  if (!shared) {
    /* Separate contexts (no MPS, or A outside B's MPS server): B's buffer
     * and context are intact and B keeps working. */
    ck_assert_int_eq(hipd_mem_read(b, bb, 0, &y, sizeof(y)), 0);
    ck_assert_int_eq(y, x);
    fill_and_check(b, gpu, 500);
    ck_assert_int_eq(hipd_mem_free(b, bb), 0);
  } else {
    /* Under MPS a fatal GPU exception of one client reaches every client
     * of that GPU (NVIDIA's MPS error containment, measured on the H200):
     * B is told, clearly, that its context was lost, or it already was,
     * and B's next session, in a fresh worker, works. SECURITY.md says so;
     * --mps off keeps B's context (the test above). */
    int rc = hipd_mem_read(b, bb, 0, &y, sizeof(y));
    hipd_conn_t *b2 = NULL;
    if (rc == 0) {
      ck_assert_int_eq(y, x);
    } else {
      const char *why;
      int code = 0;
      int64_t t0 = harness_now_ms();
      ck_assert_msg(rc == HIPD_EDEVLOST || rc == HIPD_EDISCONNECTED,
                    "B after A's fault under MPS: %s: %s", hipd_err_name(rc),
                    hipd_last_error(b));
      /* Its worker told it why before it ended (session.closed). */
      for (int i = 0;
           i < 100 && (why = hipd_conn_lost_reason(b, &code)) == NULL; i++)
        usleep(10 * 1000);
      printf("check_faults: B's session after A's fault under MPS: %s (%s)\n",
             why != NULL ? why : "(still up)", hipd_err_name(code));
      hipd_close(b);
      b = NULL;
      for (int tries = 0; tries < 200; tries++) {
        int arc;
        hipd_buffer_t t;
        if (b2 == NULL && hipd_connect(dd->socket, &b2) != 0)
          b2 = NULL;
        arc = b2 != NULL ? hipd_mem_alloc(b2, gpu, 16, "int32", &t) : -1;
        if (arc == 0) {
          hipd_mem_free(b2, t);
          break;
        }
        if (b2 != NULL) {
          hipd_close(b2);
          b2 = NULL;
        }
        usleep(100 * 1000);
      }
      ck_assert_msg(b2 != NULL, "B cannot work on the GPU again after A's "
                                "fault under MPS");
      printf("check_faults: B worked on the GPU again %lld ms after it saw "
             "A's fault under MPS\n",
             (long long)(harness_now_ms() - t0));
      fill_and_check(b2, gpu, 700);
      hipd_close(b2);
    }
  }
out:
  if (b != NULL)
    hipd_close(b);
  ck_assert_int_eq(harness_stop(dd), 0);
  harness_free(dd);
}

START_TEST(test_other_tenant_fault)
{
  other_tenant_fault("off", "auto");
}
END_TEST

/* One MPS server for both: A's fault reaches B, which is told and works
 * again in a fresh worker. */
START_TEST(test_other_tenant_fault_mps)
{
  other_tenant_fault("on", "all");
}
END_TEST

/* The default --mps-tenants auto: B's uid has the MPS server, A's worker a
 * context of its own, and A's fault does not reach B. */
START_TEST(test_other_tenant_fault_mps_auto)
{
  other_tenant_fault("on", "auto");
}
END_TEST

/* ------------------------------- another tenant's long and endless kernels */

static const char *spin_src =
    "extern \"C\" __global__ void spin(volatile int *flag, long long cycles)\n"
    "{\n"
    "  long long start = clock64();\n"
    "  while (flag[0] == 0 && (cycles == 0 || clock64() - start < cycles))\n"
    "    ;\n"
    "}\n";

/* In a child that became FAULT_USER: launch spin over the whole of @p gpu
 * (2 blocks of 1024 threads a multiprocessor) for @p seconds (0: for
 * ever), and write to @p fd the monotonic ms when its synchronize returned
 * and the code it returned, then how its connection ended. */
static void spin_as_other_uid(const char *socket, int gpu, int seconds, int fd)
{
  hipd_conn_t *a = NULL;
  hipd_buffer_t flag;
  hipd_kernel_t k;
  hipd_info_t *info;
  hipd_args_t *args;
  int64_t khz = 0, sms = 0, out[3];
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1024, 1, 1};
  const char *why;
  int code = 0, rc;

  if (harness_become(FAULT_USER) != 0)
    _exit(10);
  if (hipd_connect(socket, &a) != 0)
    _exit(11);
  hipd_set_timeout(a, 600000);
  if (hipd_device_get(a, gpu, &info) != 0)
    _exit(12);
  hipd_info_int(info, "clock_rate_khz", &khz);
  hipd_info_int(info, "multiprocessor_count", &sms);
  hipd_info_free(info);
  grid[0] = (uint32_t)(sms > 0 ? 2 * sms : 264);
  if (hipd_mem_alloc(a, gpu, 1, "int32", &flag) != 0 ||
      hipd_mem_memset(a, flag, 0, 4, 0) != 0 ||
      hipd_kernel_compile(a, gpu, spin_src, "spin", NULL, &k, NULL) != 0)
    _exit(13);
  args = hipd_args_new();
  hipd_args_buffer(args, flag, 0);
  hipd_args_i64(args, (int64_t)seconds * (khz > 0 ? khz : 1000000) * 1000);
  rc = hipd_kernel_launch(a, k, grid, block, 0, HIPD_STREAM_NULL, args);
  if (rc == 0)
    rc = hipd_device_synchronize(a, gpu);
  out[0] = harness_now_ms();
  out[1] = rc;
  why = hipd_conn_lost_reason(a, &code);
  out[2] = why != NULL ? code : 0;
  if (write(fd, out, sizeof(out)) != (ssize_t)sizeof(out))
    _exit(14);
  _exit(0);
}

/* A daemon for the tenants' GPU tests with --mps @p mps, --mps-tenants
 * @p tenants (all: one MPS server for both uids, whose shares are then what
 * is tested) and @p extra (NULL ended; at most 4), B's (root's) connection
 * and the GPU; NULL when the test cannot run here (it says why). */
static harness_daemon_t *tenants_daemon(const char *mps, const char *tenants,
                                        const char *const *extra,
                                        hipd_conn_t **b, int *gpu)
{
  const char *args[16] = {"--cache-dir", "",  "--socket-mode", "0666",
                          "--mps",       mps, "--mps-tenants", tenants};
  harness_daemon_t *dd;
  int n = 8;

  for (; extra != NULL && *extra != NULL && n < 14; extra++)
    args[n++] = *extra;
  args[n] = NULL;
  if (geteuid() != 0 || users_make(FAULT_USER, NULL, NULL) != 0) {
    printf("check_faults: another tenant's kernels: needs root\n");
    return NULL;
  }
  dd = harness_startv(args);
  ck_assert_ptr_nonnull(dd);
  ck_assert_int_eq(harness_share_socket(dd), 0);
  ck_assert_int_eq(hipd_connect(dd->socket, b), 0);
  hipd_set_timeout(*b, 60000);
  if ((*gpu = first_gpu(*b)) < 0) {
    printf("check_faults: no GPU device\n");
    hipd_close(*b);
    ck_assert_int_eq(harness_stop(dd), 0);
    harness_free(dd);
    return NULL;
  }
  return dd;
}

/* Tenant A (another uid) spins a kernel over the whole GPU for 8 s, with
 * --mps @p mps and --mps-tenants @p tenants (@p what names them in the
 * line printed) and the default --mps-active-threads: B's one-block
 * kernels still run meanwhile (the first completes before A's spin ends),
 * and the latencies are printed (bench/RESULTS.md and SECURITY.md have the
 * figures). */
static void other_tenant_spin(const char *mps, const char *tenants,
                              const char *what)
{
  hipd_conn_t *b;
  harness_daemon_t *dd;
  int gpu, pfd[2], status, n = 0;
  int64_t res[3], first_done = 0, worst = 0, until;
  pid_t pid;

  if ((dd = tenants_daemon(mps, tenants, NULL, &b, &gpu)) == NULL)
    return;
  fill_and_check(b, gpu, 1); /* compiled and loaded before it starts */
  ck_assert_int_eq(pipe(pfd), 0);
  pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    spin_as_other_uid(dd->socket, gpu, 8, pfd[1]);
  }
  close(pfd[1]);
  usleep(1500 * 1000); /* its compile and launch */
  until = harness_now_ms() + 4000;
  while (harness_now_ms() < until) {
    int64_t t0 = harness_now_ms(), dt;
    fill_and_check(b, gpu, 2 + n);
    dt = harness_now_ms() - t0;
    if (first_done == 0)
      first_done = harness_now_ms();
    if (dt > worst)
      worst = dt;
    n++;
  }
  ck_assert_int_eq(read(pfd[0], res, sizeof(res)), (ssize_t)sizeof(res));
  ck_assert(waitpid(pid, &status, 0) == pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "tenant A's spin failed (child status %d)", status);
  ck_assert_msg(res[1] == 0, "tenant A's spin: %s", hipd_err_name((int)res[1]));
  printf("check_faults: while another uid spun the whole GPU for 8 s (%s): "
         "%d round trips of a one-block kernel in 4 s, worst %lld ms; the "
         "first done %lld ms before its spin ended\n",
         what, n, (long long)worst, (long long)(res[0] - first_done));
  ck_assert_msg(first_done < res[0],
                "B's kernels waited for A's whole-GPU spin to end");
  close(pfd[0]);
  hipd_close(b);
  ck_assert_int_eq(harness_stop(dd), 0);
  harness_free(dd);
}

START_TEST(test_other_tenant_spin_mps)
{
  other_tenant_spin("on", "all", "both uids MPS clients, default shares");
}
END_TEST

START_TEST(test_other_tenant_spin_mps_auto)
{
  other_tenant_spin("on", "auto",
                    "the default --mps-tenants auto: A's uid MPS clients, "
                    "B's a context of its own");
}
END_TEST

START_TEST(test_other_tenant_spin_off)
{
  other_tenant_spin("off", "auto", "--mps off: contexts time-sliced");
}
END_TEST

/* Tenant A's kernel that never ends, with --gpu-kernel-timeout 3000 under
 * MPS: A's worker ends, A's session is told ETIMEDOUT, and B (root, its
 * own worker) keeps its buffer and works on throughout and after: ending
 * one MPS client is no fault for the others. */
START_TEST(test_other_tenant_endless_mps)
{
  static const char *const extra[] = {"--gpu-kernel-timeout", "3000", NULL};
  hipd_conn_t *b;
  harness_daemon_t *dd;
  hipd_buffer_t bb;
  int gpu, pfd[2], status, x = 777, y = 0, rounds = 0;
  int64_t res[3];
  pid_t pid;

  if ((dd = tenants_daemon("on", "all", extra, &b, &gpu)) == NULL)
    return;
  fill_and_check(b, gpu, 1);
  ck_assert_int_eq(hipd_mem_alloc(b, gpu, 1, "int32", &bb), 0);
  ck_assert_int_eq(hipd_mem_write(b, bb, 0, &x, sizeof(x)), 0);
  ck_assert_int_eq(pipe(pfd), 0);
  pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    spin_as_other_uid(dd->socket, gpu, 0, pfd[1]);
  }
  close(pfd[1]);
  /* B works until A's session ends (its read answers then). */
  for (;;) {
    struct timeval tv = {0, 0};
    fd_set set;
    FD_ZERO(&set);
    FD_SET(pfd[0], &set);
    fill_and_check(b, gpu, 10 + rounds++);
    if (select(pfd[0] + 1, &set, NULL, NULL, &tv) == 1 || rounds > 20000)
      break;
  }
  ck_assert_int_eq(read(pfd[0], res, sizeof(res)), (ssize_t)sizeof(res));
  ck_assert(waitpid(pid, &status, 0) == pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "tenant A (child status %d)", status);
  ck_assert_msg(res[1] == HIPD_EDISCONNECTED && res[2] == HIPD_ETIMEDOUT,
                "tenant A's endless kernel: %s, told %s",
                hipd_err_name((int)res[1]), hipd_err_name((int)res[2]));
  ck_assert(harness_log_contains(dd, "ran past --gpu-kernel-timeout"));
  /* B lost nothing. */
  ck_assert_int_eq(hipd_mem_read(b, bb, 0, &y, sizeof(y)), 0);
  ck_assert_int_eq(y, x);
  fill_and_check(b, gpu, 5000);
  printf("check_faults: another uid's endless kernel ended by "
         "--gpu-kernel-timeout 3000 under MPS; %d round trips of ours "
         "meanwhile, our context intact\n",
         rounds);
  close(pfd[0]);
  hipd_close(b);
  ck_assert_int_eq(harness_stop(dd), 0);
  harness_free(dd);
}
END_TEST

static void setup(void)
{
  d = harness_start("--cache-dir", "", "--log-level", "debug", NULL);
  ck_assert_ptr_nonnull(d);
}

static void teardown(void)
{
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

int main(void)
{
  Suite *s = suite_create("faults");
  TCase *tc = tcase_create("gpu");
  int failed;

  harness_init("faults");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_gpu_fault);
  suite_add_tcase(s, tc);
  tc = tcase_create("tenants");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_other_tenant_fault);
  tcase_add_test(tc, test_other_tenant_spin_off);
  if (getenv("HIPD_TEST_MPS") != NULL) {
    tcase_add_test(tc, test_other_tenant_fault_mps);
    tcase_add_test(tc, test_other_tenant_fault_mps_auto);
    tcase_add_test(tc, test_other_tenant_spin_mps);
    tcase_add_test(tc, test_other_tenant_spin_mps_auto);
    tcase_add_test(tc, test_other_tenant_endless_mps);
  }
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
