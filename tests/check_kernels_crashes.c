/* SPDX-License-Identifier: MIT */
/* tests/check_kernels_crashes.c: kernels that crash a CPU device's
 * runner, sessions killed during a launch, and CPU kernels stopped at
 * --cpu-kernel-timeout; the device and the other sessions go on. The
 * shared helpers are in tests/lib/kernels_util.h. */
#include "config.h"

#include "kernels_util.h"

/* ---------------------------------------------------------------- crashes */

/* A second session working on the same device meanwhile. */
typedef struct {
  const char *socket;
  int dev;
  atomic_int stop;
  int rounds;
  int failures;
  char error[512];
} bystander_t;

static void *bystander_main(void *arg)
{
  bystander_t *b = arg;
  hipd_conn_t *conn = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  enum { N = 512 };
  float a[N], out[N];
  hipd_buffer_t ba = HIPD_BUFFER_NULL, bc = HIPD_BUFFER_NULL;
  hipd_args_t *args = hipd_args_new();
  uint32_t grid[3] = {N / 64, 1, 1}, block[3] = {64, 1, 1};
  int rc;

  for (int i = 0; i < N; i++)
    a[i] = (float)i;
  if ((rc = hipd_connect(b->socket, &conn)) != 0 ||
      (rc = hipd_kernel_compile_cached(conn, b->dev, VECADD_SRC, "vecadd", NULL,
                                       &k, NULL)) != 0 ||
      (rc = hipd_mem_alloc(conn, b->dev, N, "float32", &ba)) != 0 ||
      (rc = hipd_mem_alloc(conn, b->dev, N, "float32", &bc)) != 0 ||
      (rc = hipd_mem_write(conn, ba, 0, a, sizeof(a))) != 0) {
    b->failures++;
    snprintf(b->error, sizeof(b->error), "set-up: %s: %s", hipd_err_name(rc),
             conn ? hipd_last_error(conn) : hipd_last_error(NULL));
    goto out;
  }
  hipd_set_timeout(conn, 120000);
  hipd_args_buffer(args, ba, 0);
  hipd_args_buffer(args, ba, 0);
  hipd_args_buffer(args, bc, 0);
  hipd_args_i32(args, N);
  /* At least a few rounds, and on until told to stop. */
  while (b->rounds < 3 || !atomic_load(&b->stop)) {
    memset(out, 0, sizeof(out));
    if ((rc = hipd_mem_memset(conn, bc, 0, sizeof(out), 0)) != 0 ||
        (rc = hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL,
                                 args)) != 0 ||
        (rc = hipd_mem_read(conn, bc, 0, out, sizeof(out))) != 0) {
      b->failures++;
      snprintf(b->error, sizeof(b->error), "round %d: %s: %s", b->rounds,
               hipd_err_name(rc), hipd_last_error(conn));
      break;
    }
    for (int i = 0; i < N; i++)
      if (out[i] != 2.0f * a[i]) {
        b->failures++;
        snprintf(b->error, sizeof(b->error), "round %d: out[%d] = %g",
                 b->rounds, i, out[i]);
        break;
      }
    b->rounds++;
  }
out:
  hipd_args_free(args);
  hipd_close(conn);
  return NULL;
}

/* A kernel that writes through NULL on the CPU device: its launch fails
 * with HIPD_ELAUNCH naming SIGSEGV; the session's buffers and kernels go
 * on working, and another session working meanwhile sees nothing. GPU
 * devices are skipped: a fault there poisons the device context, which is
 * a test of its own. */
START_TEST(test_crash_cpu)
{
  enum { N = 256 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev, tested = 0;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t kc, kv;
    hipd_buffer_t bp, keep;
    int p[N];
    float kept[64], back[64];
    uint32_t grid[3] = {N / 64, 1, 1}, block[3] = {64, 1, 1};
    hipd_args_t *args = args_new();
    bystander_t by = {.socket = shared->socket, .dev = dev};
    pthread_t thread;

    if (!device_is_cpu(conn, dev)) {
      hipd_args_free(args);
      continue;
    }
    tested++;
    kc = compile(conn, dev, CRASH_SRC, "crash", NULL);
    kv = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    for (int i = 0; i < 64; i++)
      kept[i] = (float)i * 3.0f;
    keep = float_buffer(conn, dev, 64, kept);
    OK(conn, hipd_mem_alloc(conn, dev, N, "int32", &bp));
    OK(conn, hipd_mem_memset(conn, bp, 0, sizeof(p), 0));
    /* Harmless first: no thread is chosen. */
    hipd_args_buffer(args, bp, 0);
    hipd_args_i32(args, -1);
    hipd_args_i64(args, 0);
    OK(conn,
       hipd_kernel_launch(conn, kc, grid, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bp, 0, p, sizeof(p)));
    for (int i = 0; i < N; i++)
      ck_assert_int_eq(p[i], 1);

    ck_assert_int_eq(pthread_create(&thread, NULL, bystander_main, &by), 0);
    for (int round = 0; round < 2; round++) {
      hipd_args_clear(args);
      hipd_args_buffer(args, bp, 0);
      hipd_args_i32(args, 100 + round);
      hipd_args_i64(args, 0);
      EXPECT(
          conn,
          hipd_kernel_launch(conn, kc, grid, block, 0, HIPD_STREAM_NULL, args),
          HIPD_ELAUNCH);
      ck_assert_msg(strstr(hipd_last_error(conn), "SIGSEGV") != NULL,
                    "device %d: the crash is not named: %s", dev,
                    hipd_last_error(conn));
      /* The same session goes on: its buffers kept their contents, its
       * kernels run. */
      OK(conn, hipd_device_synchronize(conn, dev));
      OK(conn, hipd_mem_read(conn, keep, 0, back, sizeof(back)));
      ck_assert(memcmp(back, kept, sizeof(back)) == 0);
      vecadd_run(conn, dev, kv, 300, HIPD_STREAM_NULL);
      OK(conn, hipd_mem_memset(conn, bp, 0, sizeof(p), 0));
      hipd_args_clear(args);
      hipd_args_buffer(args, bp, 0);
      hipd_args_i32(args, -1);
      hipd_args_i64(args, 0);
      OK(conn,
         hipd_kernel_launch(conn, kc, grid, block, 0, HIPD_STREAM_NULL, args));
      OK(conn, hipd_mem_read(conn, bp, 0, p, sizeof(p)));
      for (int i = 0; i < N; i++)
        ck_assert_int_eq(p[i], 1);
    }
    atomic_store(&by.stop, 1);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    ck_assert_msg(by.failures == 0, "device %d: the other session failed: %s",
                  dev, by.error);
    ck_assert_int_ge(by.rounds, 3);

    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bp));
    OK(conn, hipd_mem_free(conn, keep));
    OK(conn, hipd_kernel_destroy(conn, kc));
    OK(conn, hipd_kernel_destroy(conn, kv));
  }
  ck_assert_int_ge(tested, 2);
  hipd_close(conn);
}
END_TEST

/* The forked client: kernels and buffers on every device and launches in
 * flight, then it says so on @p fd and waits to be killed. Never returns;
 * no check calls here. */
static void killed_child(const char *path, int fd)
{
  hipd_conn_t *conn = NULL;
  hipd_args_t *args = hipd_args_new();
  char ok = 'R';
  int n = 0;

  if (args == NULL || hipd_connect(path, &conn) != 0 ||
      hipd_device_count(conn, &n) != 0)
    ok = 'E';
  for (int dev = 0; ok == 'R' && dev < n; dev++) {
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    hipd_buffer_t b = HIPD_BUFFER_NULL;
    hipd_call_t *call = NULL;
    uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
    if (hipd_kernel_compile_cached(conn, dev, VECADD_SRC, "vecadd", NULL, &k,
                                   NULL) != 0 ||
        hipd_mem_alloc(conn, dev, 64 * 256, "float32", &b) != 0) {
      ok = 'E';
      break;
    }
    hipd_args_clear(args);
    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_i32(args, 64 * 256);
    /* Left in flight as it dies. */
    for (int i = 0; i < 8; i++)
      if (hipd_kernel_launch_begin(conn, k, grid, block, 0, HIPD_STREAM_NULL,
                                   args, &call) != 0)
        ok = 'E';
  }
  if (write(fd, &ok, 1) != 1)
    _exit(2);
  for (;;)
    pause();
}

/* A client killed with SIGKILL while holding kernels: the daemon cleans up
 * and serves on. */
START_TEST(test_killed_session)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev = -1, fds[2], status;
  struct pollfd pfd;
  char ready = 0;
  pid_t child;
  int64_t sessions = -1;
  long long deadline;

  ck_assert_int_eq(pipe(fds), 0);
  child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    close(fds[0]);
    killed_child(shared->socket, fds[1]);
  }
  close(fds[1]);
  pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
  ck_assert_msg(poll(&pfd, 1, 120000) == 1, "the client never got ready");
  ck_assert_int_eq(read(fds[0], &ready, 1), 1);
  close(fds[0]);
  ck_assert_int_eq(kill(child, SIGKILL), 0);
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(ready == 'R', "the client failed to set up");

  deadline = harness_now_ms() + 20000;
  for (;;) {
    hipd_info_t *info = NULL;
    OK(conn, hipd_daemon_info(conn, &info));
    sessions = info_int(info, "sessions");
    hipd_info_free(info);
    if (sessions == 1 || harness_now_ms() > deadline)
      break;
    harness_sleep_ms(10);
  }
  ck_assert_int_eq(sessions, 1);
  ck_assert_int_eq(kill(shared->pid, 0), 0);
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    vecadd_run(conn, dev, k, 2000, HIPD_STREAM_NULL);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* A CPU-device kernel that never ends is stopped at --cpu-kernel-timeout:
 * the launch fails with ETIMEDOUT and the device goes on. */
static const char *SPIN_SRC =
    "extern \"C\" __global__ void spin(volatile int *flag, int *out)\n"
    "{\n"
    "  long long n = 0;\n"
    "  while (*flag)\n"
    "    n++;\n"
    "  out[0] = (int)n;\n"
    "}\n";

START_TEST(test_cpu_kernel_timeout)
{
  char dir[256];
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_buffer_t flag, out;
  hipd_kernel_t k;
  hipd_args_t *args = args_new();
  uint32_t one[3] = {1, 1, 1};
  int dev, on = 1, rc;

  cache_dir_make(dir, sizeof(dir));
  d = harness_start("--cpu-devices", "2", "--cache-dir", dir,
                    "--cpu-kernel-timeout", "700", NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  k = compile(conn, dev, SPIN_SRC, "spin", NULL);
  OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &flag));
  OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &out));
  OK(conn, hipd_mem_write(conn, flag, 0, &on, sizeof(on)));
  hipd_args_buffer(args, flag, 0);
  hipd_args_buffer(args, out, 0);
  rc = hipd_kernel_launch(conn, k, one, one, 0, HIPD_STREAM_NULL, args);
  if (rc == 0)
    rc = hipd_device_synchronize(conn, dev);
  ck_assert_msg(rc == HIPD_ETIMEDOUT, "spinning kernel: %s (%s)",
                hipd_err_name(rc), hipd_last_error(conn));
  /* The device goes on: the same buffers, a launch that ends. */
  on = 0;
  OK(conn, hipd_mem_write(conn, flag, 0, &on, sizeof(on)));
  OK(conn, hipd_kernel_launch(conn, k, one, one, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_device_synchronize(conn, dev));
  hipd_args_free(args);
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
}
END_TEST

/* Within one tenant (every connection here is the test's uid, so one
 * worker), a kernel that runs on stops none of the tenant's other sessions:
 * while it spins until its session lets it end (its flag is that client's
 * own memory, a zero-copy buffer), another session compiles, allocates,
 * writes, launches and reads back, and a new session's first allocation is
 * answered; the spinning kernel is still running after all of that. */
static const char *SPIN_FLAG_SRC =
    "extern \"C\" __global__ void spin_flag(volatile int *flag, int *out)\n"
    "{\n"
    "  long long n = 0;\n"
    "  flag[1] = 1;\n"
    "  while (flag[0])\n"
    "    n++;\n"
    "  out[0] = n > 0 ? 1 : 2;\n"
    "}\n";

START_TEST(test_long_kernel_blocks_nothing)
{
  char dir[256];
  harness_daemon_t *d;
  hipd_conn_t *conn, *late;
  hipd_shm_t *shm;
  hipd_buffer_t flag, out, late_buf;
  hipd_stream_t st;
  hipd_kernel_t k;
  hipd_call_t *call;
  hipd_args_t *args = args_new();
  uint32_t one[3] = {1, 1, 1};
  volatile int *fp;
  int dev, idle = 1, result = 0;
  int64_t deadline;
  bystander_t by;

  cache_dir_make(dir, sizeof(dir));
  d = harness_start("--cpu-devices", "2", "--cache-dir", dir, NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  k = compile(conn, dev, SPIN_FLAG_SRC, "spin_flag", NULL);
  OK(conn, hipd_shm_create(conn, 4096, &shm));
  fp = hipd_shm_ptr(shm);
  fp[0] = 1;
  OK(conn, hipd_mem_alloc_zero_copy(conn, dev, shm, &flag));
  OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &out));
  OK(conn, hipd_stream_create(conn, dev, &st));
  hipd_args_buffer(args, flag, 0);
  hipd_args_buffer(args, out, 0);
  /* Pipelined: a CPU-device launch is answered once the driver's launch
   * call returns, which is when the kernel has run. */
  OK(conn, hipd_kernel_launch_begin(conn, k, one, one, 0, st, args, &call));
  deadline = harness_now_ms() + 60000;
  while (fp[1] != 1 && harness_now_ms() < deadline)
    harness_sleep_ms(1);
  ck_assert_msg(fp[1] == 1, "the spinning kernel did not start");

  /* Another session's whole round trip, three times. */
  by = (bystander_t){.socket = d->socket, .dev = dev};
  atomic_store(&by.stop, 1);
  bystander_main(&by);
  ck_assert_msg(by.failures == 0, "the other session: %s", by.error);
  ck_assert_int_ge(by.rounds, 3);
  /* A new session's first allocation. */
  late = connect_to(d);
  OK(late, hipd_mem_alloc(late, dev, 1024, "float32", &late_buf));
  OK(late, hipd_mem_free(late, late_buf));
  hipd_close(late);

  OK(conn, hipd_stream_query(conn, st, &idle));
  ck_assert_msg(idle == 0, "the spinning kernel ended before it was let go");
  fp[0] = 0;
  OK(conn, hipd_wait(call));
  OK(conn, hipd_stream_synchronize(conn, st));
  OK(conn, hipd_mem_read(conn, out, 0, &result, sizeof(result)));
  ck_assert_int_eq(result, 1);
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, flag));
  OK(conn, hipd_shm_free(conn, shm));
  hipd_close(conn);
  stop_daemon(d);
  cache_dir_remove(dir);
}
END_TEST

static Suite *kernels_crashes_suite(void)
{
  Suite *s = suite_create("kernels_crashes");
  TCase *tc;

  tc = tcase_create("crashes");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_crash_cpu);
  tcase_add_test(tc, test_killed_session);
  tcase_add_test(tc, test_cpu_kernel_timeout);
  tcase_add_test(tc, test_long_kernel_blocks_nothing);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return kernels_main("check_kernels_crashes", kernels_crashes_suite);
}
