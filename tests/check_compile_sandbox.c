/* SPDX-License-Identifier: MIT */
/* tests/check_compile_sandbox.c: compiles run in sandboxed helpers
 * (daemon/compile/): what a kernel source can make the compiler read,
 * write or hold, on a real hipd with the real host compiler (CPU device).
 *
 * - `#include` and `.incbin` of /etc/shadow, /etc/passwd and a root-only
 *   file this test writes (with a unique marker) fail as not found (mount
 *   namespace) or permission denied (Landlock), and no log carries the
 *   file's bytes;
 * - a constructor in a kernel does not run at compile time, and options
 *   that would write files are refused;
 * - an `#include` of a FIFO fails at once, and four such compiles at a
 *   time stop neither an ordinary compile nor an allocation;
 * - a compile that runs past --compile-timeout fails alone, with a message
 *   that says so, and the next compile works;
 * - a compile whose compiler uses no CPU time (a $HIPD_CXX that sleeps)
 *   is ended after --compile-idle-timeout, with a message that says so,
 *   while other compiles go on, and a compile that keeps the CPU busy for
 *   longer is not, in both views;
 * - the helpers run as the compile user, never root (as root);
 * - a compiler that includes its own standard output or error does not
 *   wait on it (they are files of the compile's own, not pipes);
 * - what a compile leaves in the helper's scratch directory is removed
 *   before its answer, and a helper that cannot remove it is replaced
 *   (as root, in both views);
 * - tenants take turns for the helpers: another uid's slow compiles hold
 *   one helper at most while root compiles, and requests over
 *   --tenant-max-compiles or a uid's half of --compile-queue-bytes get
 *   EBUSY at once;
 * - hipd's own CPU device header still resolves (kernels compile and run),
 *   in both views (HIPD_COMPILE_FSVIEW=landlock forces the fallback).
 */
#include "config.h"

#include "kernels_util.h"
#include "sanitize.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "users.h"

/* The other tenant of the fairness test (tests/README.md). */
#define USER_B "hipd_cs_b"

static const char MARK_KERNEL[] =
    "extern \"C\" __global__ void k(int *p) { p[0] = 1; }\n";

/* A secret file of root's (mode 0600) with a unique marker. */
static char secret_path[256], secret_mark[64];

static void secret_make(void)
{
  const char *home = geteuid() == 0 ? "/root" : getenv("HOME");
  FILE *f;

  snprintf(secret_mark, sizeof(secret_mark), "HIPD-SECRET-%d-%ld",
           (int)getpid(), (long)time(NULL));
  snprintf(secret_path, sizeof(secret_path), "%s/hipd-compile-secret-%d",
           home ? home : "/tmp", (int)getpid());
  f = fopen(secret_path, "w");
  ck_assert_msg(f != NULL, "cannot write %s: %s", secret_path, strerror(errno));
  fprintf(f, "int %s = 1;\n%s\n", secret_mark, secret_mark);
  fclose(f);
  chmod(secret_path, 0600);
}

static void secret_remove(void)
{
  if (secret_path[0] != '\0')
    unlink(secret_path);
}

/* The daemon's compile.fsview ("mount namespace" or "landlock"). */
static void fsview_of(hipd_conn_t *conn, char *out, size_t n)
{
  hipd_info_t *info = NULL;
  int dev = -1;

  OK(conn, hipd_daemon_info(conn, &info));
  snprintf(out, n, "%s", info_str(info, "compile.fsview"));
  hipd_info_free(info);
}

/* The message of a refused open, for the view in force. */
static int refused(const char *msg, const char *fsview)
{
  if (strcmp(fsview, "landlock") == 0)
    return strstr(msg, "Permission denied") != NULL;
  return strstr(msg, "No such file or directory") != NULL;
}

/* hiprtc (clang) and NVRTC say it their own ways, the same in either
 * view: "'/etc/shadow' file not found", "cannot open file '/etc/shadow':
 * Permission denied", "cannot open source file". */
static int rtc_refused(const char *msg)
{
  return strstr(msg, "file not found") != NULL ||
         strstr(msg, "Permission denied") != NULL ||
         strstr(msg, "cannot open source file") != NULL;
}

/* Compile @p src on @p dev: it must fail to compile; return the log. */
static char *compile_fails(hipd_conn_t *conn, int dev, const char *src)
{
  hipd_kernel_t k = HIPD_KERNEL_NULL;

  EXPECT(conn, hipd_kernel_compile(conn, dev, src, "k", NULL, &k, NULL),
         HIPD_ECOMPILE);
  return strdup(hipd_last_error(conn));
}

/* No secret of @p path's in @p log. */
static void no_leak(const char *log, const char *path)
{
  ck_assert_msg(strstr(log, secret_mark) == NULL,
                "the log of an include of %s has the marker: %s", path, log);
  ck_assert_msg(strstr(log, "root:") == NULL,
                "the log of an include of %s has an account line: %s", path,
                log);
}

static void check_reads_blocked(harness_daemon_t *d)
{
  hipd_conn_t *conn = connect_to(d);
  int dev = first_cpu_device(conn);
  const char *paths[] = {"/etc/shadow", "/etc/passwd", secret_path};
  char fsview[64], src[1024];

  ck_assert_int_ge(dev, 0);
  fsview_of(conn, fsview, sizeof(fsview));
  ck_assert_msg(strcmp(fsview, "mount namespace") == 0 ||
                    strcmp(fsview, "landlock") == 0,
                "compile.fsview is '%s'", fsview);
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    char *log;

    snprintf(src, sizeof(src), "#include \"%s\"\n%s", paths[i], MARK_KERNEL);
    log = compile_fails(conn, dev, src);
    ck_assert_msg(refused(log, fsview),
                  "%s: an include of %s is not refused as it should be: %s",
                  fsview, paths[i], log);
    no_leak(log, paths[i]);
    free(log);

    /* The assembler reads .incbin files: it says "file not found" for
     * both kinds of refusal. */
    snprintf(src, sizeof(src), "asm(\".incbin \\\"%s\\\"\");\n%s", paths[i],
             MARK_KERNEL);
    log = compile_fails(conn, dev, src);
    ck_assert_msg(strstr(log, "file not found") != NULL,
                  "%s: an .incbin of %s is not refused as it should be: %s",
                  fsview, paths[i], log);
    no_leak(log, paths[i]);
    free(log);
  }
  /* hiprtc / NVRTC, in the helper too, where this hipd has them: no GPU
   * is needed to compile for one. */
  {
    const char *platform = testutil_hip_platform(conn);
    const char *arch = NULL;

    if (platform != NULL)
      arch = strcmp(platform, "amd") == 0 ? "gfx90a" : "sm_90";
    for (size_t i = 0; arch != NULL && i < sizeof(paths) / sizeof(paths[0]);
         i++) {
      const char *msg;

      snprintf(src, sizeof(src), "#include \"%s\"\n%s", paths[i], MARK_KERNEL);
      EXPECT(conn, hipd_kernel_compile_for(conn, arch, src, "k", NULL, 0, NULL),
             HIPD_ECOMPILE);
      msg = hipd_last_error(conn);
      ck_assert_msg(rtc_refused(msg),
                    "%s: %s: an include of %s is not refused: %s", fsview, arch,
                    paths[i], msg);
      no_leak(msg, paths[i]);
      /* In device code the assembler would read it. */
      snprintf(src, sizeof(src),
               "extern \"C\" __global__ void k(int *p)\n"
               "{\n  asm volatile(\".incbin \\\"%s\\\"\");\n"
               "  p[0] = 1;\n}\n",
               paths[i]);
      EXPECT(conn, hipd_kernel_compile_for(conn, arch, src, "k", NULL, 0, NULL),
             HIPD_ECOMPILE);
      no_leak(hipd_last_error(conn), paths[i]);
    }
    if (arch == NULL)
      printf("check_compile_sandbox: no HIP driver in this hipd: hiprtc "
             "reads not tested\n");
  }
  /* hipd's header still resolves: a kernel compiles and runs. */
  {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    vecadd_run(conn, dev, k, 1000, HIPD_STREAM_NULL);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}

static harness_daemon_t *start_daemon(const char *timeout, const char *jobs)
{
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--cache-dir", "",
                    "--compile-timeout", timeout, "--compile-jobs", jobs, NULL);

  ck_assert_msg(d != NULL, "hipd did not start");
  return d;
}

/* ----------------------------------------------------------- the tests */

/* check_reads_blocked() around a secret of its own, in @p d's helpers,
 * whose view must be @p fsview (NULL: whichever they have). */
static void reads_blocked_in(harness_daemon_t *d, const char *fsview)
{
  if (fsview != NULL) {
    hipd_conn_t *conn = connect_to(d);
    char got[64];

    fsview_of(conn, got, sizeof(got));
    ck_assert_str_eq(got, fsview);
    hipd_close(conn);
  }
  secret_make();
  check_reads_blocked(d);
  secret_remove();
}

START_TEST(test_reads_blocked)
{
  harness_daemon_t *d = start_daemon("120", "2");

  reads_blocked_in(d, NULL);
  stop_checked(&d);
}
END_TEST

/* The Landlock view (what runs where namespaces are refused), forced. */
START_TEST(test_reads_blocked_landlock)
{
  harness_daemon_t *d;

  setenv("HIPD_COMPILE_FSVIEW", "landlock", 1);
  d = start_daemon("120", "2");
  unsetenv("HIPD_COMPILE_FSVIEW");
  reads_blocked_in(d, "landlock");
  stop_checked(&d);
}
END_TEST

/* Nothing of a kernel runs at compile time, and what would make the
 * compiler write a file is refused. */
START_TEST(test_no_code_at_compile)
{
  harness_daemon_t *d = start_daemon("120", "2");
  hipd_conn_t *conn = connect_to(d);
  int dev = first_cpu_device(conn);
  char path[300], src[2048], arch[64], opt[320];
  hipd_info_t *info = NULL;
  struct stat st;
  const char *root = getenv("HIPD_TEST_TMP");

  snprintf(path, sizeof(path), "%s/ctor-%d",
           root != NULL && root[0] ? root : "/tmp", (int)getpid());
  unlink(path);
  OK(conn, hipd_device_get(conn, dev, &info));
  snprintf(arch, sizeof(arch), "%s", info_str(info, "capabilities.arch"));
  hipd_info_free(info);
  snprintf(src, sizeof(src),
           "#include <stdio.h>\n"
           "__attribute__((constructor)) static void at_load(void)\n"
           "{\n"
           "  FILE *f = fopen(\"%s\", \"w\");\n"
           "  if (f) fclose(f);\n"
           "}\n"
           "#pragma GCC diagnostic push\n"
           "#pragma message(\"compile-time message only\")\n"
           "#pragma GCC diagnostic pop\n"
           "%s",
           path, MARK_KERNEL);
  OK(conn, hipd_kernel_compile_for(conn, arch, src, "k", NULL, 0, NULL));
  ck_assert_msg(stat(path, &st) != 0 && errno == ENOENT,
                "a constructor ran at compile time: %s exists", path);
  /* Options that would write a file are refused before any compile. */
  snprintf(opt, sizeof(opt), "-o%s", path);
  {
    const char *opts[][2] = {{opt, NULL},
                             {"-save-temps", NULL},
                             {"-Wl,-o,/tmp/hipd-evil", NULL},
                             {"-MF/tmp/hipd-evil", NULL}};
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
      EXPECT(conn,
             hipd_kernel_compile_for(conn, arch, MARK_KERNEL, "k", opts[i], 0,
                                     NULL),
             HIPD_EINVAL);
  }
  ck_assert(stat(path, &st) != 0 && errno == ENOENT);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

/* ------------------------------------------------------------ the FIFO */

typedef struct {
  const harness_daemon_t *d;
  const char *fifo;
  int dev;
  int index;
  int rc;
  char log[1024];
} fifo_job_t;

static void *fifo_compile(void *arg)
{
  fifo_job_t *j = arg;
  hipd_conn_t *conn = NULL;
  char src[512];
  hipd_kernel_t k = HIPD_KERNEL_NULL;

  j->rc = hipd_connect2(j->d->socket, "fifo", &conn);
  if (j->rc != 0)
    return NULL;
  hipd_set_timeout(conn, 120000);
  snprintf(src, sizeof(src), "// %d\n#include \"%s\"\n%s", j->index, j->fifo,
           MARK_KERNEL);
  j->rc = hipd_kernel_compile(conn, j->dev, src, "k", NULL, &k, NULL);
  snprintf(j->log, sizeof(j->log), "%s", hipd_last_error(conn));
  hipd_close(conn);
  return NULL;
}

START_TEST(test_fifo)
{
  harness_daemon_t *d = start_daemon("120", "2");
  hipd_conn_t *conn;
  fifo_job_t jobs[4];
  pthread_t t[4];
  char fifo[300], fsview[64], src[512];
  const char *root = getenv("HIPD_TEST_TMP");
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_kernel_t k;
  int dev;

  snprintf(fifo, sizeof(fifo), "%s/fifo-%d",
           root != NULL && root[0] ? root : "/tmp", (int)getpid());
  unlink(fifo);
  ck_assert_int_eq(mkfifo(fifo, 0666), 0);
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  fsview_of(conn, fsview, sizeof(fsview));
  for (int i = 0; i < 4; i++) {
    jobs[i] = (fifo_job_t){.d = d, .fifo = fifo, .dev = dev, .index = i};
    ck_assert_int_eq(pthread_create(&t[i], NULL, fifo_compile, &jobs[i]), 0);
  }
  /* Meanwhile an allocation and an ordinary compile are served. */
  OK(conn, hipd_mem_alloc(conn, dev, 4096, "float32", &b));
  snprintf(src, sizeof(src), "// fifo test %d\n%s", (int)getpid(), VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  vecadd_run(conn, dev, k, 256, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  OK(conn, hipd_mem_free(conn, b));
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    ck_assert_msg(jobs[i].rc == HIPD_ECOMPILE, "an include of a FIFO: %s (%s)",
                  hipd_err_name(jobs[i].rc), jobs[i].log);
    ck_assert_msg(refused(jobs[i].log, fsview),
                  "%s: an include of a FIFO is not refused: %s", fsview,
                  jobs[i].log);
  }
  unlink(fifo);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

/* ---------------------------------------------------------- the timeout */

/* Each constant stays under GCC's constexpr operation limit and takes
 * seconds; a thousand of them take far longer than the timeout. */
static const char SLOW_SRC[] =
    "constexpr long spin(long n, long s)\n"
    "{\n"
    "  long x = s;\n"
    "  for (long i = 0; i < n; i++)\n"
    "    for (long j = 0; j < n; j++)\n"
    "      for (long k = 0; k < n; k++)\n"
    "        x += i ^ j ^ k;\n"
    "  return x;\n"
    "}\n"
    "#define R(x) constexpr long v##x = spin(200, x);\n"
    "#define R10(x) R(x##0) R(x##1) R(x##2) R(x##3) R(x##4) R(x##5) "
    "R(x##6) R(x##7) R(x##8) R(x##9)\n"
    "#define R100(x) R10(x##0) R10(x##1) R10(x##2) R10(x##3) R10(x##4) "
    "R10(x##5) R10(x##6) R10(x##7) R10(x##8) R10(x##9)\n"
    "R100(1) R100(2) R100(3) R100(4) R100(5) R100(6) R100(7) R100(8)\n"
    "extern \"C\" __global__ void k(long *p) { p[0] = v1000 + v8999; }\n";

START_TEST(test_timeout)
{
  harness_daemon_t *d = start_daemon("2", "1");
  hipd_conn_t *conn = connect_to(d);
  int dev = first_cpu_device(conn);
  hipd_info_t *info = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  const char *msg;

  EXPECT(conn, hipd_kernel_compile(conn, dev, SLOW_SRC, "k", NULL, &k, NULL),
         HIPD_ECOMPILE);
  msg = hipd_last_error(conn);
  ck_assert_msg(strstr(msg, "timed out after 2 s") != NULL,
                "a compile past the timeout: %s", msg);
  /* Only that compile failed: the next one (a fresh helper) works. On a
   * loaded machine (make check -j, a sanitizer build) a fresh helper's
   * first compile may need the 2 s too (seen in a CI rehearsal with other
   * jobs running): a timeout there is retried, twice at most; what this
   * checks is that compiles work again, not how fast. */
  for (int tries = 0;; tries++) {
    int rc = hipd_kernel_compile_cached(conn, dev, VECADD_SRC, "vecadd", NULL,
                                        &k, NULL);
    if (rc == 0)
      break;
    msg = hipd_last_error(conn);
    ck_assert_msg(rc == HIPD_ECOMPILE && strstr(msg, "timed out") != NULL &&
                      tries < 2,
                  "the compile after a timeout (try %d): %s (%s)", tries + 1,
                  hipd_err_name(rc), msg);
  }
  vecadd_run(conn, dev, k, 500, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  OK(conn, hipd_daemon_info(conn, &info));
  ck_assert_int_ge(info_int(info, "compile.timeouts"), 1);
  ck_assert_int_ge(info_int(info, "compile.restarts"), 1);
  hipd_info_free(info);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

/* ------------------------------------------------------- no progress */

/* Compiles while its compiler works: four constants that each keep GCC's
 * constexpr evaluator busy for most of a second (under its operation
 * limit), longer together than the idle timeout of the test below. */
static const char BUSY_SRC[] =
    "constexpr long spin(long n, long s)\n"
    "{\n"
    "  long x = s;\n"
    "  for (long i = 0; i < n; i++)\n"
    "    for (long j = 0; j < n; j++)\n"
    "      for (long k = 0; k < n; k++)\n"
    "        x += i ^ j ^ k;\n"
    "  return x;\n"
    "}\n"
    "constexpr long v1 = spin(100, 1), v2 = spin(100, 2);\n"
    "constexpr long v3 = spin(100, 3), v4 = spin(100, 4);\n"
    "extern \"C\" __global__ void k(long *p) { p[0] = v1 + v2 + v3 + v4; }\n";

/* The compiler of the idle test ($HIPD_CXX): on a source that defines
 * HIPD_TEST_SLEEPS it sleeps, using no CPU time, as a compiler blocked on
 * something that never comes would; anything else it hands to the host's
 * compiler. In a folder of its own under /tmp that the compile user can
 * reach (the helper makes it visible in its view), made and removed by
 * the idle TCase's unchecked fixture (in the runner's process, so that a
 * failed test leaves nothing). */
static char idle_dir[64], idle_cxx[96];

static void idle_cxx_make(void)
{
  static const char *const cands[] = {"/usr/bin/c++", "/usr/bin/g++",
                                      "/usr/bin/clang++"};
  const char *real = getenv("HIPD_CXX");
  FILE *f;

  for (size_t i = 0;
       (real == NULL || real[0] != '/') && i < sizeof(cands) / sizeof(cands[0]);
       i++)
    if (access(cands[i], X_OK) == 0)
      real = cands[i];
  ck_assert_msg(real != NULL && real[0] == '/', "no host C++ compiler");
  snprintf(idle_dir, sizeof(idle_dir), "/tmp/hipd-idle-cxx-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(idle_dir));
  ck_assert_int_eq(chmod(idle_dir, 0755), 0);
  snprintf(idle_cxx, sizeof(idle_cxx), "%s/cxx", idle_dir);
  f = fopen(idle_cxx, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "#!/bin/sh\n"
          "for a in \"$@\"; do\n"
          "  case \"$a\" in\n"
          "  *.hip) if grep -q HIPD_TEST_SLEEPS \"$a\"; then exec sleep 300; "
          "fi ;;\n"
          "  esac\n"
          "done\n"
          "exec '%s' \"$@\"\n",
          real);
  ck_assert_int_eq(fclose(f), 0);
  ck_assert_int_eq(chmod(idle_cxx, 0755), 0);
}

static void idle_cxx_remove(void)
{
  unlink(idle_cxx);
  rmdir(idle_dir);
}

typedef struct {
  const harness_daemon_t *d;
  int dev, rc;
  int64_t ms; /* how long it took */
  char msg[1024];
} idle_job_t;

static void *idle_compile(void *arg)
{
  idle_job_t *j = arg;
  hipd_conn_t *conn = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  char src[512];
  int64_t t0 = harness_now_ms();

  j->rc = hipd_connect2(j->d->socket, "idle", &conn);
  if (j->rc != 0)
    return NULL;
  hipd_set_timeout(conn, 120000);
  snprintf(src, sizeof(src), "#define HIPD_TEST_SLEEPS %d\n%s", (int)getpid(),
           MARK_KERNEL);
  j->rc = hipd_kernel_compile(conn, j->dev, src, "k", NULL, &k, NULL);
  j->ms = harness_now_ms() - t0;
  snprintf(j->msg, sizeof(j->msg), "%s", hipd_last_error(conn));
  hipd_close(conn);
  return NULL;
}

/* A compile whose compiler makes no progress (it sleeps: no CPU time) is
 * ended after --compile-idle-timeout (2 s), not --compile-timeout (30 s),
 * and says why; meanwhile another compile is served, and after it the
 * same helper compiles again. A compile that keeps the compiler busy for
 * longer than 2 s is not ended. _i 1: the Landlock view. */
START_TEST(test_idle_ended)
{
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;
  hipd_kernel_t k;
  idle_job_t job;
  pthread_t t;
  char fsview[64], src[sizeof(BUSY_SRC) + 64];
  int dev;

  setenv("HIPD_CXX", idle_cxx, 1);
  if (_i == 1)
    setenv("HIPD_COMPILE_FSVIEW", "landlock", 1);
  d = harness_start("--cpu-devices", "2", "--cache-dir", "",
                    "--compile-timeout", "30", "--compile-jobs", "2",
                    "--compile-idle-timeout", "2", NULL);
  unsetenv("HIPD_COMPILE_FSVIEW");
  unsetenv("HIPD_CXX");
  ck_assert_msg(d != NULL, "hipd did not start");
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  fsview_of(conn, fsview, sizeof(fsview));
  if (_i == 1)
    ck_assert_str_eq(fsview, "landlock");
  OK(conn, hipd_daemon_info(conn, &info));
  ck_assert_int_eq(info_int(info, "compile.idle_timeout_s"), 2);
  ck_assert_msg(strstr(info_str(info, "compile.not_applied"), "idle") == NULL,
                "%s", info_str(info, "compile.not_applied"));
  hipd_info_free(info);

  job = (idle_job_t){.d = d, .dev = dev};
  ck_assert_int_eq(pthread_create(&t, NULL, idle_compile, &job), 0);
  /* Meanwhile the other helper compiles. */
  snprintf(src, sizeof(src), "// idle test %d\n%s", (int)getpid(), VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  vecadd_run(conn, dev, k, 256, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  pthread_join(t, NULL);
  ck_assert_msg(job.rc == HIPD_ECOMPILE, "%s: a compiler that sleeps: %s (%s)",
                fsview, hipd_err_name(job.rc), job.msg);
  ck_assert_msg(strstr(job.msg, "compile made no progress for 2 s (no CPU "
                                "time used): ended") != NULL,
                "%s: a compiler that sleeps: %s", fsview, job.msg);
  ck_assert_msg(job.ms >= 1900 && job.ms < 15000,
                "%s: a compiler that sleeps was ended after %lld ms, not "
                "about 2 s",
                fsview, (long long)job.ms);
  /* A compiler busy for longer than 2 s goes on to the end. */
  snprintf(src, sizeof(src), "// busy %d\n%s", (int)getpid(), BUSY_SRC);
  k = compile(conn, dev, src, "k", NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  /* The helpers went on: no restart, no timeout. */
  OK(conn, hipd_daemon_info(conn, &info));
  ck_assert_int_eq(info_int(info, "compile.timeouts"), 0);
  ck_assert_int_eq(info_int(info, "compile.restarts"), 0);
  hipd_info_free(info);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

/* ----------------------------------------------------- the compile queue */

/* What one of tenant B's compiles ended with, sent through a pipe. */
typedef struct {
  int index, rc;
  char msg[200];
} b_result_t;

typedef struct {
  const char *socket;
  int index, fd;
} b_job_t;

static void *b_compile_main(void *arg)
{
  b_job_t *j = arg;
  hipd_conn_t *c = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  b_result_t r = {.index = j->index};
  char src[sizeof(SLOW_SRC) + 64];

  r.rc = hipd_connect2(j->socket, "tenant-b", &c);
  if (r.rc == 0) {
    hipd_set_timeout(c, 120000);
    snprintf(src, sizeof(src), "// tenant b %d %d\n%s", (int)getpid(), j->index,
             SLOW_SRC);
    r.rc = hipd_kernel_compile(c, 0, src, "k", NULL, &k, NULL);
    snprintf(r.msg, sizeof(r.msg), "%s", hipd_last_error(c));
  }
  if (write(j->fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
    _exit(3);
  /* The connection stays open: the parent ends this process. */
  pause();
  return NULL;
}

/* Tenant B (another uid) asks for more slow compiles than it may: the one
 * over --tenant-max-compiles gets EBUSY at once; of the others one runs
 * and the rest wait, while the second helper stays free for another
 * tenant. Root's trivial compile then runs beside B's, answered before any
 * of B's has reached its timeout (first come, first served had it wait
 * for two of them). A source over a tenant's half of
 * --compile-queue-bytes gets EBUSY too. */
START_TEST(test_compile_turns)
{
  enum { B_JOBS = 4, B_MAX = 3 };
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  b_result_t r;
  int fds[2], dev = -1, busy = 0, queued = 0;
  long long deadline;
  pid_t pid;
  char *big;

  if (geteuid() != 0) {
    fprintf(stderr, "test_compile_turns: skipped (needs root: a second "
                    "uid)\n");
    return;
  }
  ck_assert_int_eq(users_make(USER_B, NULL, NULL), 0);
  d = users_start_shared("--cpu-devices", "2", "--cache-dir", "",
                         "--compile-jobs", "2", "--compile-timeout", "8",
                         "--tenant-max-compiles", "3", "--compile-queue-bytes",
                         "1M", NULL);
  ck_assert_int_eq(pipe(fds), 0);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    static b_job_t jobs[B_JOBS];
    pthread_t t;

    close(fds[0]);
    if (harness_become(USER_B) != 0)
      _exit(2);
    for (int i = 0; i < B_JOBS; i++) {
      jobs[i] = (b_job_t){.socket = d->socket, .index = i, .fd = fds[1]};
      if (pthread_create(&t, NULL, b_compile_main, &jobs[i]) != 0)
        _exit(2);
    }
    pause();
    _exit(0);
  }
  close(fds[1]);
  /* The one over the limit is answered at once. */
  ck_assert_int_eq(read(fds[0], &r, sizeof(r)), (ssize_t)sizeof(r));
  ck_assert_msg(r.rc == HIPD_EBUSY &&
                    strstr(r.msg, "--tenant-max-compiles 3") != NULL,
                "tenant B's compile %d over the limit: %s (%s)", r.index,
                hipd_err_name(r.rc), r.msg);
  /* B's three: one running, two waiting, the second helper free. */
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  deadline = harness_now_ms() + 60000;
  while (busy != 1 || queued != 2) {
    ck_assert_msg(harness_now_ms() < deadline,
                  "tenant B's compiles: %d running and %d waiting, not 1 "
                  "and 2",
                  busy, queued);
    OK(conn, hipd_daemon_info(conn, &info));
    busy = (int)info_int(info, "compile.busy");
    queued = (int)info_int(info, "compile.queued");
    ck_assert_int_eq(info_int(info, "compile.timeouts"), 0);
    hipd_info_free(info);
    harness_sleep_ms(20);
  }
  /* Root's compile takes the free helper. */
  k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
  vecadd_run(conn, dev, k, 100, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  OK(conn, hipd_daemon_info(conn, &info));
  ck_assert_msg(info_int(info, "compile.timeouts") == 0,
                "root's compile was answered after %lld of tenant B's "
                "compiles timed out: it waited for them",
                (long long)info_int(info, "compile.timeouts"));
  ck_assert_int_ge(info_int(info, "compile.refused"), 1);
  ck_assert_int_eq(info_int(info, "compile.tenant_max"), 3);
  ck_assert_int_eq(info_int(info, "compile.queue_bytes"), 1 << 20);
  ck_assert_int_gt(info_int(info, "compile.held_bytes"), 0);
  hipd_info_free(info);
  /* A source over root's half of the 1 MiB is refused, not held. */
  big = malloc(600 << 10);
  ck_assert_ptr_nonnull(big);
  memset(big, ' ', 600 << 10);
  memcpy(big, "// big\n", 7);
  snprintf(big + (600 << 10) - sizeof(MARK_KERNEL), sizeof(MARK_KERNEL), "%s",
           MARK_KERNEL);
  EXPECT(conn, hipd_kernel_compile(conn, dev, big, "k", NULL, &k, NULL),
         HIPD_EBUSY);
  ck_assert_msg(strstr(hipd_last_error(conn), "--compile-queue-bytes") != NULL,
                "%s", hipd_last_error(conn));
  free(big);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  close(fds[0]);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

/* -------------------------------------------------------- the identity */

/* Does @p pid descend from @p ancestor (and is not it)? */
static int descends_from(pid_t pid, pid_t ancestor)
{
  return pid != ancestor && proc_in_tree(pid, ancestor);
}

/* -------------------------------------------------- the compiler's output */

/* A compiler that includes its own standard output or error once found a
 * pipe there and waited on it, holding its compile slot until the timeout
 * (and `as` did the same with `.include`). They are files of the compile's
 * own now: the include reads what was written so far and the compile ends
 * at once, whatever it makes of it. */
START_TEST(test_output_readback)
{
  harness_daemon_t *d = start_daemon("60", "1");
  hipd_conn_t *conn = connect_to(d);
  int dev = first_cpu_device(conn);
  static const char *const srcs[] = {
      "#include \"/proc/self/fd/1\"\n",
      "#include \"/proc/self/fd/2\"\n",
      "#include \"/dev/stdout\"\n",
      "asm(\".include \\\"/proc/self/fd/1\\\"\");\n",
  };
  char src[512];

  for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]); i++) {
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    int rc;

    snprintf(src, sizeof(src), "// readback %d %zu\n%s%s", (int)getpid(), i,
             srcs[i], MARK_KERNEL);
    rc = hipd_kernel_compile(conn, dev, src, "k", NULL, &k, NULL);
    ck_assert_msg(rc == 0 || rc == HIPD_ECOMPILE, "source %zu: %s (%s)", i,
                  hipd_err_name(rc), hipd_last_error(conn));
    if (rc == 0)
      OK(conn, hipd_kernel_destroy(conn, k));
    else
      ck_assert_msg(strstr(hipd_last_error(conn), "timed out") == NULL,
                    "source %zu waited on its own output: %s", i,
                    hipd_last_error(conn));
  }
  /* And the one slot is free for the next compile. */
  {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    vecadd_run(conn, dev, k, 100, HIPD_STREAM_NULL);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

/* ------------------------------------------------------- the scratch space */

/* The scratch directory of @p d's one compile helper as this process sees
 * it: the helper proper's /tmp (a tmpfs in its mount namespace, reached
 * through /proc/PID/root) or its --tmp directory (Landlock). */
static void helper_scratch(const harness_daemon_t *d, int mountns, char *out,
                           size_t n, pid_t *helper)
{
  DIR *dir = opendir("/proc");
  struct dirent *e;

  out[0] = '\0';
  ck_assert_ptr_nonnull(dir);
  while ((e = readdir(dir)) != NULL && out[0] == '\0') {
    pid_t pid = (pid_t)atoi(e->d_name);
    proc_stat_t st, parent;
    char path[64], args[4096];
    FILE *f;
    size_t len;

    if (pid <= 0 || proc_stat_read(pid, &st) != 0 ||
        strcmp(st.comm, "hipd-compile") != 0 || !descends_from(pid, d->pid) ||
        proc_stat_read(st.ppid, &parent) != 0)
      continue;
    if (mountns) {
      /* The helper proper, below its outer process. */
      if (strcmp(parent.comm, "hipd-compile") == 0) {
        snprintf(out, n, "/proc/%d/root/tmp", (int)pid);
        if (helper != NULL)
          *helper = pid;
      }
      continue;
    }
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
      continue;
    len = fread(args, 1, sizeof(args) - 1, f);
    fclose(f);
    args[len] = '\0';
    for (size_t at = 0; at < len; at += strlen(args + at) + 1)
      if (strncmp(args + at, "--tmp=", 6) == 0) {
        snprintf(out, n, "%s", args + at + 6);
        if (helper != NULL)
          *helper = pid;
      }
  }
  closedir(dir);
  ck_assert_msg(out[0] != '\0', "no compile helper of hipd %d found",
                (int)d->pid);
}

static void write_junk(const char *path, size_t bytes, uid_t uid)
{
  FILE *f = fopen(path, "w");
  static char chunk[65536];

  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  for (size_t i = 0; i < bytes; i += sizeof(chunk))
    ck_assert_uint_eq(fwrite(chunk, 1, sizeof(chunk), f), sizeof(chunk));
  fclose(f);
  ck_assert_int_eq(chown(path, uid, (gid_t)-1), 0);
}

static int exists(const char *dir, const char *name)
{
  char path[PATH_MAX];
  struct stat st;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return lstat(path, &st) == 0;
}

static int64_t restarts_of(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t n;
  int dev = -1; /* info_int()'s message names it */

  OK(conn, hipd_daemon_info(conn, &info));
  n = info_int(info, "compile.restarts");
  hipd_info_free(info);
  return n;
}

/* What a compile leaves in the helper's scratch directory (the files of a
 * compiler killed mid-way, here planted by the test as the compile user)
 * is removed before its answer; what the helper cannot remove makes it
 * leave, and a fresh helper with a fresh directory serves the next
 * compile. Once for each view. */
static void check_scratch(int mountns)
{
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;
  hipd_kernel_t k;
  char scratch[PATH_MAX], path[PATH_MAX + 32], src[4096], fsview[64];
  uid_t cuid;
  int dev;
  int64_t restarts;

  if (geteuid() != 0) {
    fprintf(stderr, "check_scratch: skipped (needs root: to plant files as "
                    "the compile user, and to see into the helper)\n");
    return;
  }
  if (!mountns)
    setenv("HIPD_COMPILE_FSVIEW", "landlock", 1);
  d = start_daemon("60", "1");
  unsetenv("HIPD_COMPILE_FSVIEW");
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  fsview_of(conn, fsview, sizeof(fsview));
  if (mountns && strcmp(fsview, "mount namespace") != 0) {
    fprintf(stderr,
            "check_scratch: no mount namespace here (%s): that view "
            "not tested\n",
            fsview);
    hipd_close(conn);
    stop_checked(&d);
    return;
  }
  OK(conn, hipd_daemon_info(conn, &info));
  cuid = (uid_t)info_int(info, "compile.uid");
  hipd_info_free(info);
  /* The helper starts with the first compile. */
  snprintf(src, sizeof(src), "// scratch %d %d a\n%s", (int)getpid(), mountns,
           VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  helper_scratch(d, mountns, scratch, sizeof(scratch), NULL);
  restarts = restarts_of(conn);

  /* Leftovers the helper can remove: gone after the next compile. */
  snprintf(path, sizeof(path), "%s/ccJunk.s", scratch);
  write_junk(path, 8 << 20, cuid);
  snprintf(path, sizeof(path), "%s/hipd-cpu-junk", scratch);
  ck_assert_int_eq(mkdir(path, 0700), 0);
  ck_assert_int_eq(chown(path, cuid, (gid_t)-1), 0);
  snprintf(path, sizeof(path), "%s/hipd-cpu-junk/kernel.s", scratch);
  write_junk(path, 1 << 20, cuid);
  snprintf(src, sizeof(src), "// scratch %d %d b\n%s", (int)getpid(), mountns,
           VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  ck_assert_msg(!exists(scratch, "ccJunk.s") &&
                    !exists(scratch, "hipd-cpu-junk"),
                "%s: the leftovers in %s are still there after a compile",
                fsview, scratch);
  ck_assert_int_eq(restarts_of(conn), restarts);

  /* A leftover it cannot remove (root's): the helper leaves, the next
   * compile gets a fresh one. */
  snprintf(path, sizeof(path), "%s/stuck", scratch);
  ck_assert_int_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof(path), "%s/stuck/file", scratch);
  write_junk(path, 65536, 0);
  snprintf(src, sizeof(src), "// scratch %d %d c\n%s", (int)getpid(), mountns,
           VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  if (!mountns)
    ck_assert_msg(access(scratch, F_OK) != 0,
                  "the replaced helper's directory %s is still there", scratch);
  snprintf(src, sizeof(src), "// scratch %d %d d\n%s", (int)getpid(), mountns,
           VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  vecadd_run(conn, dev, k, 100, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  /* Counted when the fresh one starts. */
  ck_assert_int_eq(restarts_of(conn), restarts + 1);
  hipd_close(conn);
  stop_checked(&d);
}

START_TEST(test_scratch_emptied)
{
  check_scratch(1);
}
END_TEST

START_TEST(test_scratch_emptied_landlock)
{
  check_scratch(0);
}
END_TEST

/* The line of /proc/PID/limits that starts with @p name: its soft limit
 * ("unlimited" or a number), into @p out. */
static void limit_of(pid_t pid, const char *name, char *out, size_t n)
{
  char path[64], line[256];
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
  f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  out[0] = '\0';
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, name, strlen(name)) == 0)
      sscanf(line + strlen(name), "%63s", out);
  fclose(f);
  ck_assert_msg(out[0] != '\0', "%s has no '%s'", path, name);
}

/* /proc/PID/mountinfo of @p pid: does it mount a read-only sysfs at /sys
 * with nothing mounted below it? */
static void sys_mount_checked(pid_t pid)
{
  char path[64], line[1024];
  FILE *f;
  int sys = 0;

  snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
  f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  while (fgets(line, sizeof(line), f) != NULL) {
    char mnt[512], opts[256];

    /* id parent major:minor root mount-point options ... */
    if (sscanf(line, "%*s %*s %*s %*s %511s %255s", mnt, opts) != 2)
      continue;
    ck_assert_msg(strncmp(mnt, "/sys/", 5) != 0,
                  "the helper sees a mount below /sys: %s", line);
    if (strcmp(mnt, "/sys") == 0) {
      ck_assert_msg(strncmp(opts, "ro,", 3) == 0 || strcmp(opts, "ro") == 0,
                    "the helper's /sys is not read-only: %s", line);
      ck_assert_msg(strstr(line, " - sysfs ") != NULL,
                    "the helper's /sys is not a sysfs: %s", line);
      sys++;
    }
  }
  fclose(f);
  ck_assert_msg(sys == 1, "the helper has %d mounts at /sys, not 1", sys);
}

/* --compile-gpu-driver (an admin's choice) needs the mount namespace
 * view: with Landlock (forced here) the helper does not start, and
 * neither does hipd. In that view the helper keeps its protections (no
 * file of the host but the toolchain's, the NVIDIA nodes where there are,
 * a read-only sysfs of its own with nothing below it), bounds private
 * writable memory instead of address space, and keeps NVRTC's cache
 * folder, which a compile that ran a host compiler empties. */
START_TEST(test_gpu_driver)
{
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_kernel_t k;
  char scratch[PATH_MAX], path[PATH_MAX + 32], src[4096], fsview[64], v[64];
  struct stat st;
  pid_t helper = -1;
  int dev;
  int64_t restarts;
  uid_t cuid;
  hipd_info_t *info = NULL;

  setenv("HIPD_COMPILE_FSVIEW", "landlock", 1);
  d = harness_start("--cpu-devices", "1", "--cache-dir", "", "--compile-jobs",
                    "1", "--compile-gpu-driver", NULL);
  unsetenv("HIPD_COMPILE_FSVIEW");
  ck_assert_msg(d == NULL,
                "hipd --compile-gpu-driver started with the Landlock view");

  d = harness_start("--cpu-devices", "2", "--cache-dir", "",
                    "--compile-timeout", "60", "--compile-jobs", "1",
                    "--compile-mem", "3G", "--compile-gpu-driver", NULL);
  if (d == NULL) {
    /* Fine where the helpers cannot have a mount namespace: */
    d = start_daemon("60", "1");
    conn = connect_to(d);
    fsview_of(conn, fsview, sizeof(fsview));
    hipd_close(conn);
    stop_checked(&d);
    ck_assert_msg(strcmp(fsview, "mount namespace") != 0,
                  "hipd --compile-gpu-driver did not start, though its "
                  "helpers get a mount namespace");
    fprintf(stderr,
            "test_gpu_driver: no mount namespace here (%s): "
            "--compile-gpu-driver refused, as it should be\n",
            fsview);
    return;
  }
  reads_blocked_in(d, "mount namespace");
  conn = connect_to(d);
  dev = first_cpu_device(conn);
  OK(conn, hipd_daemon_info(conn, &info));
  cuid = (uid_t)info_int(info, "compile.uid");
  hipd_info_free(info);
  snprintf(src, sizeof(src), "// gpu-driver %d a\n%s", (int)getpid(),
           VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  /* Where there is an NVIDIA driver, the helper set it up for NVRTC
   * (cuInit) without an error in its hello. */
  if (access("/dev/nvidiactl", F_OK) == 0) {
    OK(conn, hipd_daemon_info(conn, &info));
    ck_assert_msg(strstr(info_str(info, "compile.not_applied"),
                         "the driver for its compiler") == NULL,
                  "the helper says: %s", info_str(info, "compile.not_applied"));
    hipd_info_free(info);
  }
  helper_scratch(d, 1, scratch, sizeof(scratch), &helper);
  restarts = restarts_of(conn);
  sys_mount_checked(helper);
#if !defined(HIPD_ASAN) && !defined(HIPD_TSAN)
  /* (A sanitizer's build sets no memory limit: its shadow memory.) */
  limit_of(helper, "Max data size", v, sizeof(v));
  ck_assert_str_eq(v, "3221225472");
  limit_of(helper, "Max address space", v, sizeof(v));
  ck_assert_str_eq(v, "unlimited");
#else
  (void)v;
#endif
  snprintf(path, sizeof(path), "%s/.nv-cache", scratch);
  ck_assert_msg(stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
                    st.st_uid == cuid,
                "no NVRTC cache folder %s of the compile user", path);
  /* What a host compiler's process could have left there is gone after
   * its compile; the folder stays. */
  snprintf(path, sizeof(path), "%s/.nv-cache/planted", scratch);
  write_junk(path, 4096, cuid);
  snprintf(src, sizeof(src), "// gpu-driver %d b\n%s", (int)getpid(),
           VECADD_SRC);
  k = compile(conn, dev, src, "vecadd", NULL);
  vecadd_run(conn, dev, k, 100, HIPD_STREAM_NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  ck_assert_msg(access(path, F_OK) != 0,
                "%s is still there after a host compiler's compile", path);
  snprintf(path, sizeof(path), "%s/.nv-cache", scratch);
  ck_assert_msg(stat(path, &st) == 0 && S_ISDIR(st.st_mode),
                "%s is gone after a compile", path);
  ck_assert_int_eq(restarts_of(conn), restarts);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

START_TEST(test_helper_identity)
{
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;
  DIR *dir;
  struct dirent *e;
  int64_t uid;
  int found = 0, dev = -1;

  if (geteuid() != 0) {
    fprintf(stderr, "test_helper_identity: skipped (needs root: helpers "
                    "change uid only when hipd is root)\n");
    return;
  }
  d = start_daemon("120", "2");
  conn = connect_to(d);
  OK(conn, hipd_daemon_info(conn, &info));
  uid = info_int(info, "compile.uid");
  hipd_info_free(info);
  ck_assert_int_gt(uid, 0);
  dir = opendir("/proc");
  ck_assert_ptr_nonnull(dir);
  while ((e = readdir(dir)) != NULL) {
    pid_t pid = (pid_t)atoi(e->d_name);
    char path[64], line[256];
    proc_stat_t st;
    FILE *f;

    if (pid <= 0 || proc_stat_read(pid, &st) != 0 ||
        strcmp(st.comm, "hipd-compile") != 0 || !descends_from(pid, d->pid))
      continue;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
      continue;
    while (fgets(line, sizeof(line), f) != NULL) {
      unsigned r, ef, s, fs;
      if (sscanf(line, "Uid: %u %u %u %u", &r, &ef, &s, &fs) == 4) {
        ck_assert_msg(r != 0 && ef != 0 && s != 0 && fs != 0,
                      "hipd-compile %d runs as root: %s", (int)pid, line);
        ck_assert_msg(r == (unsigned)uid && ef == (unsigned)uid,
                      "hipd-compile %d: %s, daemon.info says uid %lld",
                      (int)pid, line, (long long)uid);
        found++;
      }
    }
    fclose(f);
  }
  closedir(dir);
  ck_assert_msg(found > 0, "no hipd-compile process of hipd %d", (int)d->pid);
  hipd_close(conn);
  stop_checked(&d);
}
END_TEST

static Suite *compile_sandbox_suite(void)
{
  Suite *s = suite_create("compile_sandbox");
  TCase *tc = tcase_create("sandbox");

  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_reads_blocked);
  tcase_add_test(tc, test_reads_blocked_landlock);
  tcase_add_test(tc, test_no_code_at_compile);
  tcase_add_test(tc, test_fifo);
  tcase_add_test(tc, test_timeout);
  tcase_add_test(tc, test_helper_identity);
  tcase_add_test(tc, test_output_readback);
  tcase_add_test(tc, test_scratch_emptied);
  tcase_add_test(tc, test_scratch_emptied_landlock);
  tcase_add_test(tc, test_gpu_driver);
  tcase_add_test(tc, test_compile_turns);
  suite_add_tcase(s, tc);
  tc = tcase_create("idle");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, idle_cxx_make, idle_cxx_remove);
  tcase_add_loop_test(tc, test_idle_ended, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return kernels_main("check_compile_sandbox", compile_sandbox_suite);
}
