/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_sandbox.c: the CPU device's runner runs client kernels
 * sandboxed (daemon/drivers/cpu/cpu_runner.c, cpu_launcher.c).
 *
 * Against a real hipd (tests/lib/harness.c), started with a secret in its
 * environment: kernels compiled by kernel.compile on the CPU device try to
 * open /etc/shadow, the daemon's /proc/PID/mem and environ, read the
 * secret, popen/system/execve, create sockets, fork, signal the daemon,
 * read /proc/self/maps, write or list /tmp. Each attempt writes its result
 * and errno into a device buffer that the test reads back: the seccomp
 * profile refuses with EPERM (processes, sockets, signals to others),
 * Landlock with EACCES (files). ptrace is on the kill list: that launch
 * fails with HIPD_ELAUNCH naming SIGSYS, and the next launch works. An
 * ordinary kernel of the same test computes correct results, and a
 * module's constructor that tries to create a file in /root leaves none.
 * As root the daemon's runner is not root (hipd runs it as "nobody" when
 * nobody says otherwise).
 *
 * In process (libhipdcore), as root: the launcher started for a test user
 * starts runners as that user; a crash and a seccomp kill are still named
 * by their signals; the launcher refuses to signal a process that is not
 * its runner. Without root those tests are skipped and say so. */
#include "config.h"

#include <pwd.h>
#include <sys/mman.h>

/* Before kernels_util.h, whose globals would shadow their parameters. */
#include "drivers/cpu/cpu_compile.h"
#include "drivers/cpu/cpu_launcher.h"
#include "drivers/cpu/cpu_runner_client.h"

#include "kernels_util.h"
#include "users.h"

#define TEST_USER "hipd_sb_user"
#define SECRET "hipd-sandbox-secret-4711"

static uid_t test_uid, nobody_uid;
static gid_t test_gid;

/* The probes: out[2*i] the result, out[2*i+1] errno. */
enum {
  P_SHADOW,
  P_DAEMON_MEM,
  P_DAEMON_ENVIRON,
  P_SECRET,
  P_POPEN,
  P_SYSTEM,
  P_EXECVE,
  P_SOCKET_INET,
  P_SOCKET_UNIX,
  P_FORK,
  P_MAPS,
  P_KILL_DAEMON,
  P_CREATE_TMP,
  P_LIST_TMP,
  P_UID,
  P_LDCACHE,
  P_DUMPABLE,
  P_NNP,
  P_CAP_SYS_ADMIN,
  P_ROOT_FILE,
  NPROBES
};

static const char PROBE_SRC[] =
    "#include <hip/hip_runtime.h>\n"
    "#include <dirent.h>\n"
    "#include <errno.h>\n"
    "#include <fcntl.h>\n"
    "#include <signal.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "#include <sys/prctl.h>\n"
    "#include <sys/ptrace.h>\n"
    "#include <sys/socket.h>\n"
    "#include <unistd.h>\n"
    "#define TRY(i, expr) do { errno = 0; long long r_ = (long long)(expr);\\\n"
    "  out[2 * (i)] = r_; out[2 * (i) + 1] = errno; } while (0)\n"
    "\n"
    "static long long fork_once(void)\n"
    "{\n"
    "  pid_t p = fork();\n"
    "  if (p == 0)\n"
    "    _exit(0);\n"
    "  return p;\n"
    "}\n"
    "\n"
    "static long long popen_once(void)\n"
    "{\n"
    "  FILE *f = popen(\"id\", \"r\");\n"
    "  if (f == NULL)\n"
    "    return -1;\n"
    "  pclose(f);\n"
    "  return 0;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void probe(long long *out, int daemon)\n"
    "{\n"
    "  char path[64];\n"
    "  char *argv[] = {(char *)\"/bin/sh\", (char *)\"-c\", (char *)\"id\",\n"
    "                  NULL};\n"
    "  if (blockIdx.x != 0 || threadIdx.x != 0)\n"
    "    return;\n"
    "  TRY(0, open(\"/etc/shadow\", O_RDONLY));\n"
    "  snprintf(path, sizeof(path), \"/proc/%d/mem\", daemon);\n"
    "  TRY(1, open(path, O_RDWR));\n"
    "  snprintf(path, sizeof(path), \"/proc/%d/environ\", daemon);\n"
    "  TRY(2, open(path, O_RDONLY));\n"
    "  TRY(3, getenv(\"HIPD_SB_SECRET\") != NULL);\n"
    "  TRY(4, popen_once());\n"
    "  TRY(5, system(\"id\"));\n"
    "  TRY(6, execve(argv[0], argv, NULL));\n"
    "  TRY(7, socket(AF_INET, SOCK_STREAM, 0));\n"
    "  TRY(8, socket(AF_UNIX, SOCK_STREAM, 0));\n"
    "  TRY(9, fork_once());\n"
    "  TRY(10, open(\"/proc/self/maps\", O_RDONLY));\n"
    "  TRY(11, kill(daemon, 0));\n"
    "  TRY(12, open(\"/tmp/hipd-sb-probe\", O_WRONLY | O_CREAT, 0600));\n"
    "  TRY(13, opendir(\"/tmp\") == NULL ? -1 : 0);\n"
    "  TRY(14, getuid());\n"
    "  TRY(15, open(\"/etc/ld.so.cache\", O_RDONLY));\n"
    "  TRY(16, prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));\n"
    "  TRY(17, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));\n"
    "  TRY(18, prctl(PR_CAPBSET_READ, 21 /* CAP_SYS_ADMIN */, 0, 0, 0));\n"
    "  TRY(19, access(\"/root/hipd-sb-ctor\", F_OK));\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void attach(int daemon)\n"
    "{\n"
    "  ptrace(PTRACE_ATTACH, daemon, NULL, NULL);\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void ids(long long *out)\n"
    "{\n"
    "  out[0] = getuid();\n"
    "  out[1] = getgid();\n"
    "  out[2] = geteuid();\n"
    "  out[3] = getppid();\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void segv(int *p)\n"
    "{\n"
    "  *(volatile int *)0 = *p;\n"
    "}\n";

/* A module whose constructor, run when the runner loads it, tries to
 * leave a file in /root (and in /tmp). */
static const char CTOR_SRC[] =
    "#include <hip/hip_runtime.h>\n"
    "#include <fcntl.h>\n"
    "#include <unistd.h>\n"
    "__attribute__((constructor)) static void evil(void)\n"
    "{\n"
    "  int fd = open(\"/root/hipd-sb-ctor\", O_WRONLY | O_CREAT, 0644);\n"
    "  if (fd >= 0)\n"
    "    close(fd);\n"
    "  fd = open(\"/tmp/hipd-sb-ctor\", O_WRONLY | O_CREAT, 0644);\n"
    "  if (fd >= 0)\n"
    "    close(fd);\n"
    "}\n"
    "extern \"C\" __global__ void ctor_k(int *out) { out[0] = 5; }\n";

/* A kernel that goes for the device's buffers under the worker: the
 * runner's largest regular file is the arena's memfd (the module's is a
 * few KiB, the test's buffer a MiB); it tries to cut it to one page, which
 * would fault the worker's next access to a buffer, and to grow it. */
static const char SHRINK_SRC[] =
    "#include <hip/hip_runtime.h>\n"
    "#include <errno.h>\n"
    "#include <sys/stat.h>\n"
    "#include <unistd.h>\n"
    "extern \"C\" __global__ void shrink(long long *out)\n"
    "{\n"
    "  struct stat st;\n"
    "  long long size = 0;\n"
    "  int best = -1;\n"
    "  if (blockIdx.x != 0 || threadIdx.x != 0)\n"
    "    return;\n"
    "  for (int fd = 3; fd < 1024; fd++)\n"
    "    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&\n"
    "        st.st_size > size) {\n"
    "      size = st.st_size;\n"
    "      best = fd;\n"
    "    }\n"
    "  long long r1, e1, r2, e2;\n"
    "  errno = 0;\n"
    "  r1 = ftruncate(best, 4096);\n"
    "  e1 = errno;\n"
    "  errno = 0;\n"
    "  r2 = ftruncate(best, size + 4096);\n"
    "  e2 = errno;\n"
    "  out[0] = best; out[1] = size;\n"
    "  out[2] = r1; out[3] = e1; out[4] = r2; out[5] = e2;\n"
    "}\n";

static const char *probe_name(int i)
{
  static const char *const names[NPROBES] = {"open /etc/shadow",
                                             "open /proc/<hipd>/mem",
                                             "open /proc/<hipd>/environ",
                                             "getenv secret",
                                             "popen",
                                             "system",
                                             "execve",
                                             "socket(AF_INET)",
                                             "socket(AF_UNIX)",
                                             "fork",
                                             "open /proc/self/maps",
                                             "kill(hipd, 0)",
                                             "create in /tmp",
                                             "opendir /tmp",
                                             "getuid",
                                             "open /etc/ld.so.cache",
                                             "PR_GET_DUMPABLE",
                                             "PR_GET_NO_NEW_PRIVS",
                                             "PR_CAPBSET_READ",
                                             "access /root/hipd-sb-ctor"};
  return names[i];
}

/* A daemon with the secret in its environment and CPU devices only. */
static harness_daemon_t *start_secret_daemon(void)
{
  harness_daemon_t *d;

  setenv("HIPD_SB_SECRET", SECRET, 1);
  d = harness_start("--devices", "cpu", "--cpu-devices", "2", "--cache-dir",
                    shared_cache, NULL);
  unsetenv("HIPD_SB_SECRET");
  ck_assert_msg(d != NULL, "the daemon did not start");
  return d;
}

/* Compile @p name of @p src on the CPU device 0 (no cache entry shared
 * with other programs: each daemon of this program uses shared_cache). */
static hipd_kernel_t cpu_kernel(hipd_conn_t *conn, const char *src,
                                const char *name)
{
  int dev = first_cpu_device(conn);

  ck_assert_int_ge(dev, 0);
  return compile(conn, dev, src, name, NULL);
}

/* The probes, run once on the CPU device; @p out gets them. */
static void run_probes(hipd_conn_t *conn, hipd_kernel_t k, pid_t daemon,
                       long long out[2 * NPROBES])
{
  int dev = first_cpu_device(conn);
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_args_t *args = args_new();

  OK(conn, hipd_mem_alloc(conn, dev, 2 * NPROBES, "int64", &b));
  hipd_args_buffer(args, b, 0);
  hipd_args_i32(args, (int32_t)daemon);
  OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_mem_read(conn, b, 0, out, 2 * NPROBES * sizeof(long long)));
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, b));
}

/* Probe @p i failed with -1 and errno @p e. */
static void refused(const long long *out, int i, int e)
{
  ck_assert_msg(out[2 * i] == -1 && out[2 * i + 1] == e,
                "%s: returned %lld with errno %lld (%s), expected -1 with %s",
                probe_name(i), out[2 * i], out[2 * i + 1],
                strerror((int)out[2 * i + 1]), strerror(e));
}

START_TEST(test_probes)
{
  harness_daemon_t *d = start_secret_daemon();
  hipd_conn_t *conn = connect_to(d);
  hipd_kernel_t kp = cpu_kernel(conn, PROBE_SRC, "probe");
  hipd_kernel_t kv = cpu_kernel(conn, VECADD_SRC, "vecadd");
  long long out[2 * NPROBES];

  run_probes(conn, kp, d->pid, out);
  /* Files outside its view: Landlock. */
  refused(out, P_SHADOW, EACCES);
  refused(out, P_DAEMON_MEM, EACCES);
  refused(out, P_DAEMON_ENVIRON, EACCES);
  refused(out, P_MAPS, EACCES);
  refused(out, P_CREATE_TMP, EACCES);
  refused(out, P_LIST_TMP, EACCES);
  /* Nothing of the daemon's environment. */
  ck_assert_msg(out[2 * P_SECRET] == 0, "the runner sees the daemon's secret");
  /* No processes, programs, sockets, signals to others: seccomp. */
  /* popen's errno is glibc's choice (ENOMEM once its spawn failed). */
  ck_assert_msg(out[2 * P_POPEN] == -1, "popen ran a shell");
  ck_assert_msg(out[2 * P_SYSTEM] != 0, "system() ran a shell");
  refused(out, P_EXECVE, EPERM);
  refused(out, P_SOCKET_INET, EPERM);
  refused(out, P_SOCKET_UNIX, EPERM);
  refused(out, P_FORK, EPERM);
  refused(out, P_KILL_DAEMON, EPERM);
  /* What it may do, and what it is. */
  ck_assert_msg(out[2 * P_LDCACHE] >= 0, "the system libraries are hidden");
  ck_assert_int_eq(out[2 * P_DUMPABLE], 0);
  ck_assert_int_eq(out[2 * P_NNP], 1);
  ck_assert_int_eq(out[2 * P_CAP_SYS_ADMIN], 0);
  if (geteuid() == 0)
    ck_assert_msg(out[2 * P_UID] == (long long)nobody_uid,
                  "the runner of a root hipd runs as uid %lld, not nobody",
                  out[2 * P_UID]);
  else
    ck_assert_int_eq(out[2 * P_UID], (long long)geteuid());
  /* The same session still computes. */
  vecadd_run(conn, first_cpu_device(conn), kv, 1000, HIPD_STREAM_NULL);
  hipd_close(conn);
  stop_daemon(d);
}
END_TEST

/* The arena's memfd is sealed: a kernel cannot shrink it (which would
 * fault the worker when it next touches a buffer) nor grow it; the worker
 * reads the buffers, the session computes. */
START_TEST(test_arena_sealed)
{
  harness_daemon_t *d = start_secret_daemon();
  hipd_conn_t *conn = connect_to(d);
  int dev = first_cpu_device(conn);
  hipd_kernel_t ks = cpu_kernel(conn, SHRINK_SRC, "shrink");
  hipd_kernel_t kv = cpu_kernel(conn, VECADD_SRC, "vecadd");
  hipd_buffer_t b = HIPD_BUFFER_NULL, big = HIPD_BUFFER_NULL;
  hipd_args_t *args = args_new();
  long long out[6];
  uint8_t back[4096];

  OK(conn, hipd_mem_alloc(conn, dev, 1 << 20, "byte", &big));
  OK(conn, hipd_mem_memset(conn, big, 0, 1 << 20, 0x6b));
  OK(conn, hipd_mem_alloc(conn, dev, 6, "int64", &b));
  hipd_args_buffer(args, b, 0);
  OK(conn, hipd_kernel_launch(conn, ks, ONE, ONE, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_mem_read(conn, b, 0, out, sizeof(out)));
  ck_assert_msg(out[0] >= 3 && out[1] >= (1 << 20),
                "the kernel found no arena (fd %lld, %lld bytes)", out[0],
                out[1]);
  ck_assert_msg(out[2] == -1 && out[3] == EPERM,
                "shrinking the arena (fd %lld, %lld bytes): returned %lld, "
                "errno %lld (%s)",
                out[0], out[1], out[2], out[3], strerror((int)out[3]));
  ck_assert_msg(out[4] == -1 && out[5] == EPERM,
                "growing the arena: returned %lld, errno %lld (%s)", out[4],
                out[5], strerror((int)out[5]));
  /* The worker still reads the buffer far into the arena. */
  OK(conn,
     hipd_mem_read(conn, big, (1 << 20) - sizeof(back), back, sizeof(back)));
  for (size_t i = 0; i < sizeof(back); i++)
    ck_assert_uint_eq(back[i], 0x6b);
  vecadd_run(conn, dev, kv, 1000, HIPD_STREAM_NULL);
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, b));
  OK(conn, hipd_mem_free(conn, big));
  hipd_close(conn);
  stop_daemon(d);
}
END_TEST

/* ptrace is on the kill list: the launch fails naming SIGSYS, the device
 * goes on with a new runner. */
START_TEST(test_ptrace_killed)
{
  harness_daemon_t *d = start_secret_daemon();
  hipd_conn_t *conn = connect_to(d);
  hipd_kernel_t ka = cpu_kernel(conn, PROBE_SRC, "attach");
  hipd_kernel_t kv = cpu_kernel(conn, VECADD_SRC, "vecadd");
  hipd_args_t *args = args_new();
  int rc;

  hipd_args_i32(args, (int32_t)d->pid);
  rc = hipd_kernel_launch(conn, ka, ONE, ONE, 0, HIPD_STREAM_NULL, args);
  if (rc == 0)
    rc = hipd_device_synchronize(conn, first_cpu_device(conn));
  ck_assert_msg(rc == HIPD_ELAUNCH, "ptrace launch: %s (%s)", hipd_err_name(rc),
                hipd_last_error(conn));
  ck_assert_msg(strstr(hipd_last_error(conn), "SIGSYS") != NULL,
                "the kill is not named: %s", hipd_last_error(conn));
  hipd_args_free(args);
  vecadd_run(conn, first_cpu_device(conn), kv, 500, HIPD_STREAM_NULL);
  hipd_close(conn);
  ck_assert_msg(kill(d->pid, 0) == 0, "the daemon is gone");
  stop_daemon(d);
}
END_TEST

/* A module's constructor runs sandboxed: no file in /root or /tmp. */
START_TEST(test_constructor)
{
  harness_daemon_t *d;
  hipd_conn_t *conn;
  hipd_kernel_t k;
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_args_t *args = args_new();
  int v = 0, dev;

  unlink("/root/hipd-sb-ctor");
  unlink("/tmp/hipd-sb-ctor");
  d = start_secret_daemon();
  conn = connect_to(d);
  k = cpu_kernel(conn, CTOR_SRC, "ctor_k");
  dev = first_cpu_device(conn);
  OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &b));
  hipd_args_buffer(args, b, 0);
  OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_mem_read(conn, b, 0, &v, sizeof(v)));
  ck_assert_int_eq(v, 5); /* the module was loaded and ran */
  ck_assert_msg(access("/root/hipd-sb-ctor", F_OK) != 0,
                "the constructor created /root/hipd-sb-ctor");
  ck_assert_msg(access("/tmp/hipd-sb-ctor", F_OK) != 0,
                "the constructor created /tmp/hipd-sb-ctor");
  hipd_args_free(args);
  hipd_close(conn);
  stop_daemon(d);
}
END_TEST

/* The runner process itself: not root, no capabilities, not dumpable. */
START_TEST(test_runner_process)
{
  harness_daemon_t *d = start_secret_daemon();
  hipd_conn_t *conn = connect_to(d);
  hipd_kernel_t kv = cpu_kernel(conn, VECADD_SRC, "vecadd");
  char path[64], line[256], cmd[128];
  int found = 0;
  FILE *f;

  vecadd_run(conn, first_cpu_device(conn), kv, 10, HIPD_STREAM_NULL);
  /* The runner descends from the daemon (with --isolation uid, through
   * the tenant's worker and its launcher). */
  int rpid = 0;
  snprintf(cmd, sizeof(cmd), "pgrep -f hipd-cpu-runner");
  f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  for (int cand; rpid == 0 && fscanf(f, "%d", &cand) == 1;)
    if (cand != d->pid && proc_in_tree(cand, d->pid))
      rpid = cand;
  pclose(f);
  ck_assert_msg(rpid > 0, "no hipd-cpu-runner under hipd pid %d", (int)d->pid);
  snprintf(path, sizeof(path), "/proc/%d/status", rpid);
  f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long long caps;
    unsigned r, e;
    if (sscanf(line, "Uid: %u %u", &r, &e) == 2) {
      ck_assert_uint_ne(r, 0);
      ck_assert_uint_ne(e, 0);
      found++;
    } else if (sscanf(line, "CapEff: %llx", &caps) == 1 ||
               sscanf(line, "CapPrm: %llx", &caps) == 1 ||
               sscanf(line, "CapBnd: %llx", &caps) == 1) {
      ck_assert_msg(caps == 0, "runner capabilities: %s", line);
      found++;
    } else if (strncmp(line, "NoNewPrivs:", 11) == 0) {
      ck_assert_int_eq(atoi(line + 11), 1);
      found++;
    } else if (strncmp(line, "Seccomp:", 8) == 0) {
      ck_assert_int_eq(atoi(line + 8), 2);
      found++;
    }
  }
  fclose(f);
  ck_assert_int_eq(found, 6);
  /* Its environment is the clean one. */
  snprintf(path, sizeof(path), "/proc/%d/environ", rpid);
  f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  {
    char env[8192];
    size_t n = fread(env, 1, sizeof(env) - 1, f);
    env[n] = '\0';
    for (size_t i = 0; i < n; i++)
      if (env[i] == '\0')
        env[i] = '\n';
    ck_assert_msg(strstr(env, SECRET) == NULL, "the runner's env: %s", env);
    ck_assert_msg(strstr(env, "PATH=/usr/bin:/bin") != NULL, "env: %s", env);
  }
  fclose(f);
  hipd_close(conn);
  stop_daemon(d);
}
END_TEST

/* ------------------------------------------------- the launcher, as root */

static void buf_map(cpu_runner_t *r, size_t size, int *fd, void **p)
{
  hipd_err_t err;

  *fd = memfd_create("t", MFD_CLOEXEC);
  ck_assert_int_ge(*fd, 0);
  ck_assert_int_eq(ftruncate(*fd, (off_t)size), 0);
  *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  ck_assert_ptr_ne(*p, MAP_FAILED);
  ck_assert_msg(cpu_runner_map(r, *fd, *p, size, &err) == 0, "map: %s",
                err.msg);
}

START_TEST(test_launcher_tenant)
{
  static const char *const names[] = {"ids", "segv", "attach"};
  static char log[16384];
  char *so = NULL;
  cpu_runner_t *r = NULL;
  hipd_err_t err;
  uint32_t mod, kid, ksegv, katt;
  cpu_arg_t arg;
  long long *out;
  void *p;
  int fd, rc, st;
  pid_t rpid;

  if (geteuid() != 0) {
    fprintf(stderr, "check_cpu_sandbox: not root: launcher test skipped\n");
    return;
  }
  rc = cpu_compile(NULL, PROBE_SRC, strlen(PROBE_SRC), names, 3, NULL, 0, &so,
                   log, sizeof(log));
  ck_assert_msg(rc == 0, "compile: %s", log);
  /* Never root, and the launcher for the test user. */
  ck_assert_int_eq(cpu_launcher_start(0, 0, &err), HIPD_EINVAL);
  rc = cpu_launcher_start(test_uid, test_gid, &err);
  ck_assert_msg(rc == 0, "cpu_launcher_start: %s", err.msg);
  ck_assert(cpu_launcher_running());
  ck_assert_int_eq(cpu_launcher_start(test_uid, test_gid, &err), HIPD_EBUSY);
  rc = cpu_runner_start(NULL, &r, &err);
  ck_assert_msg(rc == 0, "cpu_runner_start: %s", err.msg);
  rpid = cpu_runner_pid(r);
  ck_assert_int_gt(rpid, 0);
  rc = cpu_runner_load(r, so, &mod, &err);
  ck_assert_msg(rc == 0, "load: %s", err.msg);
  ck_assert_int_eq(cpu_runner_kernel(r, mod, "ids", &kid, NULL, &err), 0);
  ck_assert_int_eq(cpu_runner_kernel(r, mod, "segv", &ksegv, NULL, &err), 0);
  ck_assert_int_eq(cpu_runner_kernel(r, mod, "attach", &katt, NULL, &err), 0);
  buf_map(r, 4096, &fd, &p);
  out = p;
  arg.ptr = (uint64_t)(uintptr_t)p;
  rc = cpu_runner_launch(r, kid, ONE, ONE, 0, &arg, 1, NULL, &err);
  ck_assert_msg(rc == 0, "launch: %s", err.msg);
  ck_assert_int_eq(out[0], (long long)test_uid);
  ck_assert_int_eq(out[1], (long long)test_gid);
  ck_assert_int_eq(out[2], (long long)test_uid);
  ck_assert_int_eq(out[3], (long long)cpu_launcher_pid()); /* its parent */
  /* Not ours to signal: only the launcher's runners. */
  ck_assert_int_eq(cpu_launcher_kill(getpid(), 0, &err), HIPD_ENOENT);
  ck_assert_int_eq(cpu_launcher_wait(getpid(), 0, &st, &err), HIPD_ENOENT);
  /* A crash and a seccomp kill are still named by their signals. */
  arg.ptr = (uint64_t)(uintptr_t)p;
  rc = cpu_runner_launch(r, ksegv, ONE, ONE, 0, &arg, 1, NULL, &err);
  ck_assert_int_eq(rc, HIPD_ELAUNCH);
  ck_assert_msg(strstr(err.msg, "SIGSEGV") != NULL, "%s", err.msg);
  arg.i = getpid();
  rc = cpu_runner_launch(r, katt, ONE, ONE, 0, &arg, 1, NULL, &err);
  ck_assert_int_eq(rc, HIPD_ELAUNCH);
  ck_assert_msg(strstr(err.msg, "SIGSYS") != NULL, "%s", err.msg);
  /* The restarted runner is the test user's again. */
  ck_assert_int_ne(cpu_runner_pid(r), rpid);
  memset(out, 0, 32);
  arg.ptr = (uint64_t)(uintptr_t)p;
  ck_assert_int_eq(cpu_runner_launch(r, kid, ONE, ONE, 0, &arg, 1, NULL, &err),
                   0);
  ck_assert_int_eq(out[0], (long long)test_uid);
  cpu_runner_stop(r);
  cpu_launcher_stop();
  ck_assert(!cpu_launcher_running());
  /* Without the launcher, runners are started directly again. */
  rc = cpu_runner_start(NULL, &r, &err);
  ck_assert_msg(rc == 0, "cpu_runner_start: %s", err.msg);
  cpu_runner_stop(r);
  munmap(p, 4096);
  close(fd);
  cpu_compile_free(so);
}
END_TEST

static Suite *cpu_sandbox_suite(void)
{
  Suite *s = suite_create("cpu_sandbox");
  TCase *tc = tcase_create("daemon");

  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_probes);
  tcase_add_test(tc, test_ptrace_killed);
  tcase_add_test(tc, test_arena_sealed);
  tcase_add_test(tc, test_constructor);
  tcase_add_test(tc, test_runner_process);
  suite_add_tcase(s, tc);
  tc = tcase_create("launcher");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_launcher_tenant);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  if (geteuid() == 0) {
    struct passwd *pw;

    if (users_make(TEST_USER, &test_uid, &test_gid) != 0) {
      fprintf(stderr, "check_cpu_sandbox: cannot create " TEST_USER "\n");
      return 1;
    }
    pw = getpwnam("nobody");
    if (pw == NULL) {
      fprintf(stderr, "check_cpu_sandbox: no account nobody\n");
      return 1;
    }
    nobody_uid = pw->pw_uid;
  }
  return kernels_main("check_cpu_sandbox", cpu_sandbox_suite);
}
