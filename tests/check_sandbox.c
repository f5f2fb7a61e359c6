/* SPDX-License-Identifier: MIT */
/* tests/check_sandbox.c: the sandbox primitives (daemon/sandbox/), each in
 * a real forked child that confines itself and then tries what the profile
 * must refuse and what it must allow.
 *
 * A child reports through its exit: 0 when every expectation held, 1 with
 * a message on a pipe when one did not; a child the filter kills ends with
 * SIGSYS, which the test asserts where the kill list applies. As root the
 * identity tests use a user of their own (hipd_sb_user, made with useradd
 * and kept); without root they are skipped and say so. sandbox_spawn's
 * steps are checked in the processes it starts. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "hipd.h"
#include "run.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_spawn.h"
#include "users.h"

#define TEST_USER "hipd_sb_user"

static int msg_fd = -1; /* in a child: where child_fail() writes */

/* In a child: report and leave. */
static void child_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void child_fail(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0)
    (void)!write(msg_fd, buf,
                 (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf));
  _exit(1);
}

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      child_fail(__VA_ARGS__);                                                 \
  } while (0)

/* Run @p fn in a forked child; @return its wait status, with what it
 * wrote in @p msg. */
static int in_child(void (*fn)(void *), void *arg, char *msg, size_t msglen)
{
  int p[2], st = 0;
  ssize_t n;
  pid_t pid;

  ck_assert_int_eq(pipe(p), 0);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(p[0]);
    msg_fd = p[1];
    fn(arg);
    _exit(0);
  }
  close(p[1]);
  n = read(p[0], msg, msglen - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(p[0]);
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  return st;
}

/* The child passed (exit 0). */
static void run_ok(void (*fn)(void *), void *arg)
{
  char msg[512];
  int st = in_child(fn, arg, msg, sizeof(msg));

  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "child failed (status 0x%x): %s", (unsigned)st, msg);
}

/* The child was killed by the seccomp filter. */
static void run_sigsys(void (*fn)(void *), void *arg)
{
  char msg[512];
  int st = in_child(fn, arg, msg, sizeof(msg));

  ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
                "expected SIGSYS, got status 0x%x: %s", (unsigned)st, msg);
}

/* In a child: enter @p profile with no Landlock; fail on error. */
static void enter_profile(sandbox_profile_t profile)
{
  sandbox_spec_t spec;
  hipd_err_t err;

  sandbox_spec_init(&spec);
  spec.profile = profile;
  spec.require = SANDBOX_REQUIRE_SECCOMP;
  if (sandbox_enter(&spec, &err) != 0)
    child_fail("sandbox_enter(%s): %s", sandbox_profile_name(profile), err.msg);
}

/* -1 with errno @p e expected from @p r. */
#define EXPECT_ERRNO(r, e, what)                                               \
  do {                                                                         \
    errno = 0;                                                                 \
    long r_ = (long)(r);                                                       \
    EXPECT(r_ == -1 && errno == (e), "%s: got %ld errno %d (%s), want %s",     \
           what, r_, errno, strerror(errno), strerror(e));                     \
  } while (0)

static void *thread_fn(void *arg)
{
  *(int *)arg = 42;
  return NULL;
}

/* Which exit status a fork()ed child had; -1 if fork failed. */
static int fork_status(void)
{
  int st;
  pid_t pid = fork();

  if (pid < 0)
    return -1;
  if (pid == 0)
    _exit(7);
  waitpid(pid, &st, 0);
  return st;
}

/* ------------------------------------------------------------ runner */

static void runner_blocks(void *arg)
{
  char *const argv[] = {"/bin/true", NULL};
  pthread_t t;
  int v = 0, fd;

  (void)arg;
  enter_profile(SANDBOX_PROFILE_RUNNER);
  /* Refused: sockets, processes, execve, signals to others. */
  EXPECT_ERRNO(socket(AF_UNIX, SOCK_STREAM, 0), EPERM, "socket(AF_UNIX)");
  EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM, "socket(AF_INET)");
  int sv[2];
  EXPECT_ERRNO(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), EPERM, "socketpair");
  EXPECT_ERRNO(fork(), EPERM, "fork");
  EXPECT_ERRNO(syscall(SYS_vfork), EPERM, "vfork");
  EXPECT_ERRNO(execve(argv[0], argv, NULL), EPERM, "execve");
  EXPECT(system("true") != 0, "system() ran a shell");
  EXPECT_ERRNO(kill(getppid(), 0), EPERM, "kill(parent)");
  EXPECT_ERRNO(syscall(SYS_clone3, NULL, 0), ENOSYS, "clone3");
  EXPECT_ERRNO(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), EPERM, "PR_SET_DUMPABLE 1");
  EXPECT_ERRNO(ioctl(0, TIOCSTI, "x"), EPERM, "ioctl(TIOCSTI)");
  EXPECT_ERRNO(setsid(), EPERM, "setsid");
  /* Allowed: threads, signals to itself, files (no Landlock here). */
  EXPECT(pthread_create(&t, NULL, thread_fn, &v) == 0, "pthread_create");
  pthread_join(t, NULL);
  EXPECT(v == 42, "the thread did not run");
  EXPECT(kill(getpid(), 0) == 0, "kill(self, 0): %s", strerror(errno));
  EXPECT(raise(SIGWINCH) == 0, "raise: %s", strerror(errno));
  fd = open("/proc/self/status", O_RDONLY);
  EXPECT(fd >= 0, "open without Landlock: %s", strerror(errno));
  close(fd);
  fd = memfd_create("t", MFD_CLOEXEC);
  EXPECT(fd >= 0, "memfd_create: %s", strerror(errno));
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT(p != MAP_FAILED, "mmap: %s", strerror(errno));
  EXPECT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, "no NO_NEW_PRIVS");
}

static void runner_ptrace(void *arg)
{
  (void)arg;
  enter_profile(SANDBOX_PROFILE_RUNNER);
  ptrace(PTRACE_TRACEME, 0, NULL, NULL);
  child_fail("ptrace returned");
}

static void runner_process_vm(void *arg)
{
  char buf[8];
  struct iovec l = {buf, sizeof(buf)}, r = {buf, sizeof(buf)};

  (void)arg;
  enter_profile(SANDBOX_PROFILE_RUNNER);
  syscall(SYS_process_vm_readv, getppid(), &l, 1, &r, 1, 0);
  child_fail("process_vm_readv returned");
}

START_TEST(test_runner_profile)
{
  run_ok(runner_blocks, NULL);
  run_sigsys(runner_ptrace, NULL);
  run_sigsys(runner_process_vm, NULL);
}
END_TEST

/* ------------------------------------------------------------ worker */

static void worker_profile(void *arg)
{
  char *const argv[] = {"/bin/true", NULL};
  pthread_t t;
  int v = 0, fd, pv[2], n = 0;

  (void)arg;
  enter_profile(SANDBOX_PROFILE_WORKER);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT(fd >= 0, "socket(AF_UNIX): %s", strerror(errno));
  close(fd);
  EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM, "socket(AF_INET)");
  EXPECT_ERRNO(socket(AF_INET6, SOCK_DGRAM, 0), EPERM, "socket(AF_INET6)");
  EXPECT_ERRNO(socket(AF_NETLINK, SOCK_RAW, 0), EPERM, "socket(AF_NETLINK)");
  EXPECT_ERRNO(fork(), EPERM, "fork");
  EXPECT_ERRNO(execve(argv[0], argv, NULL), EPERM, "execve");
  EXPECT(pthread_create(&t, NULL, thread_fn, &v) == 0, "pthread_create");
  pthread_join(t, NULL);
  EXPECT(v == 42, "the thread did not run");
  EXPECT(pipe(pv) == 0, "pipe: %s", strerror(errno));
  EXPECT(ioctl(pv[0], FIONREAD, &n) == 0, "ioctl: %s", strerror(errno));
  fd = syscall(SYS_epoll_create1, 0);
  EXPECT(fd >= 0, "epoll_create1: %s", strerror(errno));
}

static void worker_ptrace(void *arg)
{
  (void)arg;
  enter_profile(SANDBOX_PROFILE_WORKER);
  ptrace(PTRACE_TRACEME, 0, NULL, NULL);
  child_fail("ptrace returned");
}

START_TEST(test_worker_profile)
{
  run_ok(worker_profile, NULL);
  run_sigsys(worker_ptrace, NULL);
}
END_TEST

/* ----------------------------------------------------------- metrics */

/* The metrics process: accept and I/O on a listening TCP socket it was
 * given, threads, its loop; no new socket of any family, no process, no
 * file. */
static void metrics_profile(void *arg)
{
  char *const argv[] = {"/bin/true", NULL};
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t alen = sizeof(a);
  pthread_t t;
  int v = 0, ls, cs, as, one = 1, pv[2], n = 0;
  char c = 0;

  (void)arg;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ls = socket(AF_INET, SOCK_STREAM, 0);
  cs = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT(ls >= 0 && cs >= 0, "socket: %s", strerror(errno));
  EXPECT(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 4) == 0,
         "bind/listen: %s", strerror(errno));
  EXPECT(getsockname(ls, (struct sockaddr *)&a, &alen) == 0, "getsockname");
  EXPECT(connect(cs, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s",
         strerror(errno));
  enter_profile(SANDBOX_PROFILE_METRICS);
  as = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
  EXPECT(as >= 0, "accept4: %s", strerror(errno));
  EXPECT(setsockopt(as, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == 0,
         "setsockopt: %s", strerror(errno));
  EXPECT(write(cs, "x", 1) == 1 && recv(as, &c, 1, 0) == 1 && c == 'x',
         "I/O on the accepted connection: %s", strerror(errno));
  EXPECT(send(as, "y", 1, MSG_NOSIGNAL) == 1, "send: %s", strerror(errno));
  EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM, "socket(AF_INET)");
  EXPECT_ERRNO(socket(AF_INET6, SOCK_STREAM, 0), EPERM, "socket(AF_INET6)");
  EXPECT_ERRNO(socket(AF_UNIX, SOCK_STREAM, 0), EPERM, "socket(AF_UNIX)");
  EXPECT_ERRNO(socketpair(AF_UNIX, SOCK_STREAM, 0, pv), EPERM, "socketpair");
  EXPECT_ERRNO(bind(ls, (struct sockaddr *)&a, sizeof(a)), EPERM, "bind");
  EXPECT_ERRNO(listen(ls, 8), EPERM, "listen");
  EXPECT_ERRNO(connect(cs, (struct sockaddr *)&a, sizeof(a)), EPERM, "connect");
  EXPECT_ERRNO(open("/etc/passwd", O_RDONLY), EPERM, "open");
  EXPECT_ERRNO(openat(AT_FDCWD, "/etc/passwd", O_RDONLY), EPERM, "openat");
  EXPECT_ERRNO(fork(), EPERM, "fork");
  EXPECT_ERRNO(execve(argv[0], argv, NULL), EPERM, "execve");
  EXPECT(pthread_create(&t, NULL, thread_fn, &v) == 0, "pthread_create");
  pthread_join(t, NULL);
  EXPECT(v == 42, "the thread did not run");
  EXPECT(pipe(pv) == 0, "pipe: %s", strerror(errno));
  EXPECT(ioctl(pv[0], FIONREAD, &n) == 0, "ioctl: %s", strerror(errno));
  EXPECT(syscall(SYS_epoll_create1, 0) >= 0, "epoll_create1: %s",
         strerror(errno));
  EXPECT(syscall(SYS_eventfd2, 0, 0) >= 0, "eventfd2: %s", strerror(errno));
}

static void metrics_ptrace(void *arg)
{
  (void)arg;
  enter_profile(SANDBOX_PROFILE_METRICS);
  ptrace(PTRACE_TRACEME, 0, NULL, NULL);
  child_fail("ptrace returned");
}

START_TEST(test_metrics_profile)
{
  run_ok(metrics_profile, NULL);
  run_sigsys(metrics_ptrace, NULL);
}
END_TEST

/* ---------------------------------------------------------- compiler */

/* fork and exec of /bin/sh, its status waited for: what a compiler's
 * driver does with its tools. */
static void runs_a_program(void)
{
  int st;
  pid_t pid = fork();

  EXPECT(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", "exit 3", (char *)NULL);
    _exit(99);
  }
  EXPECT(waitpid(pid, &st, 0) == pid, "waitpid");
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 3, "sh -c 'exit 3': 0x%x",
         (unsigned)st);
}

/* An ioctl request of the NVIDIA driver's kind ('F', read-write, 16
 * bytes): refused by seccomp (EPERM) where device ioctls are not allowed,
 * or passed to the kernel, which says ENOTTY for a pipe. */
#define DEVICE_IOCTL _IOWR('F', 0x2a, char[16])

static void compiler_profile(void *arg)
{
  int sv[2], pv[2], n = 0;
  char buf[16] = {0};

  (void)arg;
  enter_profile(SANDBOX_PROFILE_COMPILER);
  /* Processes and programs: yes (the compiler's tools). */
  runs_a_program();
  /* No sockets but unconnected pairs. */
  EXPECT_ERRNO(socket(AF_UNIX, SOCK_STREAM, 0), EPERM, "socket(AF_UNIX)");
  EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM, "socket(AF_INET)");
  EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %s",
         strerror(errno));
  /* Terminal ioctls only: no device's. */
  EXPECT(pipe(pv) == 0, "pipe: %s", strerror(errno));
  EXPECT(ioctl(pv[0], FIONREAD, &n) == 0, "ioctl: %s", strerror(errno));
  EXPECT_ERRNO(ioctl(pv[0], DEVICE_IOCTL, buf), EPERM, "a device's ioctl");
}

/* The host compiler runs under the profile (as the compile helpers will
 * run it): a shared object from source, in a directory of its own. */
static char cc_dir[256];

static void compiler_builds(void *arg)
{
  char cmd[1024], path[320];
  int st;

  (void)arg;
  enter_profile(SANDBOX_PROFILE_COMPILER);
  snprintf(cmd, sizeof(cmd),
           "cd %s && printf 'extern \"C\" int f(int x) { return x + 1; }\\n'"
           " > k.cc && c++ -O1 -shared -fPIC -o k.so k.cc 2> log",
           cc_dir);
  st = system(cmd);
  if (st != 0) {
    char log[400] = "";
    FILE *f;
    snprintf(path, sizeof(path), "%s/log", cc_dir);
    if ((f = fopen(path, "r")) != NULL) {
      size_t n = fread(log, 1, sizeof(log) - 1, f);
      log[n] = '\0';
      fclose(f);
    }
    child_fail("c++ under the compiler profile: status 0x%x: %s", (unsigned)st,
               log);
  }
  snprintf(path, sizeof(path), "%s/k.so", cc_dir);
  EXPECT(access(path, R_OK) == 0, "no k.so");
}

/* With the GPU driver (--compile-gpu-driver): the compiler's calls, and
 * what the CUDA driver makes (device ioctls, a bound AF_UNIX socket), and
 * still no network and no mount. */
static void compiler_gpu_profile(void *arg)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd, pv[2], n = 0;
  char buf[16] = {0};

  (void)arg;
  enter_profile(SANDBOX_PROFILE_COMPILER_GPU);
  runs_a_program();
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT(fd >= 0, "socket(AF_UNIX): %s", strerror(errno));
  /* An abstract name: nothing on disk. */
  snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "hipd-sb-%d",
           (int)getpid());
  EXPECT(bind(fd, (struct sockaddr *)&sa,
              offsetof(struct sockaddr_un, sun_path) + 1 +
                  strlen(sa.sun_path + 1)) == 0,
         "bind(AF_UNIX): %s", strerror(errno));
  close(fd);
  EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM, "socket(AF_INET)");
  EXPECT_ERRNO(socket(AF_INET6, SOCK_DGRAM, 0), EPERM, "socket(AF_INET6)");
  EXPECT(pipe(pv) == 0, "pipe: %s", strerror(errno));
  EXPECT(ioctl(pv[0], FIONREAD, &n) == 0, "ioctl: %s", strerror(errno));
  /* Any ioctl reaches the kernel (the driver's own, here on a pipe). */
  EXPECT_ERRNO(ioctl(pv[0], DEVICE_IOCTL, buf), ENOTTY, "a device's ioctl");
}

static void compiler_gpu_mount(void *arg)
{
  (void)arg;
  enter_profile(SANDBOX_PROFILE_COMPILER_GPU);
  syscall(SYS_unshare, 0);
  child_fail("unshare returned");
}

static void compiler_mount(void *arg)
{
  (void)arg;
  enter_profile(SANDBOX_PROFILE_COMPILER);
  syscall(SYS_unshare, 0);
  child_fail("unshare returned");
}

START_TEST(test_compiler_profile)
{
  char tmpl[] = "/tmp/hipd-sb-cc-XXXXXX";

  run_ok(compiler_profile, NULL);
  run_sigsys(compiler_mount, NULL);
  run_ok(compiler_gpu_profile, NULL);
  run_sigsys(compiler_gpu_mount, NULL);
  if (system("command -v c++ >/dev/null 2>&1") != 0) {
    fprintf(stderr, "check_sandbox: no c++: compiler run skipped\n");
    return;
  }
  ck_assert_ptr_nonnull(mkdtemp(tmpl));
  snprintf(cc_dir, sizeof(cc_dir), "%s", tmpl);
  run_ok(compiler_builds, NULL);
  snprintf(cc_dir, sizeof(cc_dir), "rm -rf %s", tmpl);
  (void)!system(cc_dir);
}
END_TEST

/* ---------------------------------------------------------- launcher */

static void launcher_profile(void *arg)
{
  int st;

  (void)arg;
  enter_profile(SANDBOX_PROFILE_LAUNCHER);
  st = fork_status();
  EXPECT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 7, "fork: %s",
         strerror(errno));
  EXPECT_ERRNO(socket(AF_UNIX, SOCK_STREAM, 0), EPERM, "socket(AF_UNIX)");
  EXPECT_ERRNO(socket(AF_INET, SOCK_STREAM, 0), EPERM, "socket(AF_INET)");
}

START_TEST(test_launcher_profile)
{
  run_ok(launcher_profile, NULL);
}
END_TEST

/* ------------------------------------------------------------ layering */

/* A runner filter on top of a launcher filter: the stricter wins. */
static void stacked(void *arg)
{
  (void)arg;
  enter_profile(SANDBOX_PROFILE_LAUNCHER);
  enter_profile(SANDBOX_PROFILE_RUNNER);
  EXPECT(fork_status() == -1 && errno == EPERM, "fork under both filters");
}

START_TEST(test_stacked_profiles)
{
  run_ok(stacked, NULL);
}
END_TEST

/* ------------------------------------------------------------ landlock */

static char ll_dir[256];

static void landlock_child(void *arg)
{
  sandbox_path_t paths[] = {{"/usr", SANDBOX_FS_READ},
                            {"/lib", SANDBOX_FS_READ},
                            {ll_dir, SANDBOX_FS_READ | SANDBOX_FS_WRITE},
                            {"/no/such/dir", SANDBOX_FS_READ}};
  char path[320];
  sandbox_spec_t spec;
  hipd_err_t err;
  int fd;

  (void)arg;
  sandbox_spec_init(&spec);
  spec.landlock = true;
  spec.paths = paths;
  spec.npaths = sizeof(paths) / sizeof(paths[0]);
  spec.require = SANDBOX_REQUIRE_LANDLOCK;
  if (sandbox_enter(&spec, &err) != 0)
    child_fail("sandbox_enter: %s", err.msg);
  EXPECT(err.msg[0] == '\0', "something was not applied: %s", err.msg);
  /* Outside the rules: denied, even for root. */
  EXPECT_ERRNO(open("/etc/passwd", O_RDONLY), EACCES, "open /etc/passwd");
  EXPECT_ERRNO(open("/proc/self/maps", O_RDONLY), EACCES,
               "open /proc/self/maps");
  EXPECT_ERRNO(open("/tmp/hipd-sb-nope", O_WRONLY | O_CREAT, 0600), EACCES,
               "create in /tmp");
  /* Read-only beneath /usr. */
  fd = open("/usr/include/stdio.h", O_RDONLY);
  EXPECT(fd >= 0, "read beneath /usr: %s", strerror(errno));
  close(fd);
  EXPECT_ERRNO(open("/usr/include/stdio.h", O_WRONLY), EACCES,
               "write beneath /usr");
  /* Read-write in its own directory. */
  snprintf(path, sizeof(path), "%s/made", ll_dir);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT(fd >= 0, "create in its directory: %s", strerror(errno));
  EXPECT(write(fd, "x", 1) == 1, "write");
  close(fd);
  EXPECT(unlink(path) == 0, "unlink in its directory: %s", strerror(errno));
  /* memfds are not on the file system: still usable. */
  fd = memfd_create("m", MFD_CLOEXEC);
  EXPECT(fd >= 0, "memfd_create: %s", strerror(errno));
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  int fd2 = open(path, O_RDONLY);
  EXPECT(fd2 >= 0, "reopen a memfd through /proc/self/fd: %s", strerror(errno));
}

START_TEST(test_landlock)
{
  sandbox_support_t s;
  char tmpl[] = "/tmp/hipd-sb-XXXXXX";

  sandbox_probe(&s);
  if (s.landlock_abi == 0) {
    fprintf(stderr, "check_sandbox: no Landlock in this kernel: skipped\n");
    return;
  }
  ck_assert_ptr_nonnull(mkdtemp(tmpl));
  snprintf(ll_dir, sizeof(ll_dir), "%s", tmpl);
  run_ok(landlock_child, NULL);
  rmdir(tmpl);
}
END_TEST

/* ------------------------------------------------- capabilities, rlimits */

static void caps_child(void *arg)
{
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  sandbox_spec_t spec;
  hipd_err_t err;
  struct rlimit rl;

  (void)arg;
  sandbox_spec_init(&spec);
  spec.no_dumpable = true;
  spec.rlim.nofile = 32;
  spec.rlim.fsize = 1 << 20;
  if (sandbox_enter(&spec, &err) != 0)
    child_fail("sandbox_enter: %s", err.msg);
  memset(d, 0, sizeof(d));
  EXPECT(syscall(SYS_capget, &h, d) == 0, "capget");
  EXPECT(d[0].effective == 0 && d[0].permitted == 0 && d[1].effective == 0 &&
             d[1].permitted == 0 && d[0].inheritable == 0,
         "capabilities remain: %x %x", d[0].effective, d[0].permitted);
  if (geteuid() == 0)
    EXPECT(prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) == 0,
           "CAP_SYS_ADMIN still in the bounding set");
  EXPECT(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, "no NO_NEW_PRIVS");
  EXPECT(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, "still dumpable");
  EXPECT(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == 32 &&
             rl.rlim_max == 32,
         "RLIMIT_NOFILE %llu", (unsigned long long)rl.rlim_cur);
  EXPECT(getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_max == 0, "core");
  EXPECT(getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_max == 1 << 20, "fsize");
}

START_TEST(test_caps_rlimits)
{
  run_ok(caps_child, NULL);
}
END_TEST

static void *pause_fn(void *arg)
{
  (void)arg;
  for (;;)
    pause();
  return NULL;
}

static void threads_child(void *arg)
{
  pthread_t t;
  sandbox_spec_t spec;
  hipd_err_t err;

  (void)arg;
  EXPECT(pthread_create(&t, NULL, pause_fn, NULL) == 0, "pthread_create");
  sandbox_spec_init(&spec);
  EXPECT(sandbox_enter(&spec, &err) == HIPD_EINVAL, "entered with 2 threads");
  EXPECT(strstr(err.msg, "threads") != NULL, "message: %s", err.msg);
}

START_TEST(test_threads_refused)
{
  run_ok(threads_child, NULL);
}
END_TEST

/* ------------------------------------------------------------ identity */

static uid_t test_uid;
static gid_t test_gid;

static void drop_child(void *arg)
{
  sandbox_spec_t spec;
  hipd_err_t err;
  gid_t groups[4];

  (void)arg;
  sandbox_spec_init(&spec);
  spec.change_ids = true;
  spec.uid = test_uid;
  spec.gid = test_gid;
  spec.profile = SANDBOX_PROFILE_RUNNER;
  if (sandbox_enter(&spec, &err) != 0)
    child_fail("sandbox_enter: %s", err.msg);
  EXPECT(getuid() == test_uid && geteuid() == test_uid, "uid %u",
         (unsigned)getuid());
  EXPECT(getgid() == test_gid && getegid() == test_gid, "gid %u",
         (unsigned)getgid());
  EXPECT(getgroups(4, groups) == 1 && groups[0] == test_gid, "groups");
  EXPECT(setuid(0) != 0, "setuid(0) succeeded");
  EXPECT(setresuid(-1, 0, -1) != 0, "seteuid(0) succeeded");
  EXPECT(setgid(0) != 0, "setgid(0) succeeded");
  EXPECT_ERRNO(open("/etc/shadow", O_RDONLY), EACCES, "open /etc/shadow");
}

START_TEST(test_drop_ids)
{
  hipd_err_t err;

  if (geteuid() != 0) {
    /* Not root: another id is refused, the same ids are a no-op. */
    ck_assert_int_eq(sandbox_drop_ids(getuid() + 1, getgid(), &err),
                     HIPD_EPERM);
    ck_assert_ptr_nonnull(strstr(err.msg, "not running as root"));
    fprintf(stderr, "check_sandbox: not root: id changes skipped\n");
    return;
  }
  ck_assert_int_eq(sandbox_drop_ids(0, 0, &err), HIPD_EINVAL);
  run_ok(drop_child, NULL);
}
END_TEST

START_TEST(test_user_lookup)
{
  hipd_err_t err;
  uid_t uid;
  gid_t gid;

  ck_assert_int_eq(sandbox_user_lookup("root", &uid, &gid, &err), 0);
  ck_assert_int_eq(uid, 0);
  ck_assert_int_eq(sandbox_user_lookup("hipd-no-such-user-x", &uid, &gid, &err),
                   HIPD_ENOENT);
  ck_assert_msg(strstr(err.msg, "'hipd-no-such-user-x'") != NULL, "%s",
                err.msg);
}
END_TEST

/* ------------------------------------------------------ probe and env */

START_TEST(test_probe)
{
  sandbox_support_t s;
  char line[256];

  sandbox_probe(&s);
  ck_assert_int_eq(s.root, geteuid() == 0);
  ck_assert(s.seccomp);
  ck_assert(!s.seccomp_on);
  ck_assert_int_gt(sandbox_support_format(&s, line, sizeof(line)), 0);
  ck_assert_ptr_nonnull(strstr(line, "seccomp"));
  fprintf(stderr, "check_sandbox: %s\n", line);
}
END_TEST

START_TEST(test_clean_env)
{
  const char *const keep[] = {"HIPD_SB_KEEP", "HIPD_SB_SET=1", "HIPD_SB_UNSET",
                              NULL};
  char **env;
  int path = 0, lang = 0, kept = 0, set = 0, n = 0;

  setenv("HIPD_SB_SECRET", "s3cret", 1);
  setenv("HIPD_SB_KEEP", "kept", 1);
  unsetenv("HIPD_SB_UNSET");
  env = sandbox_clean_env(keep);
  ck_assert_ptr_nonnull(env);
  for (char **e = env; *e != NULL; e++, n++) {
    ck_assert_msg(strstr(*e, "s3cret") == NULL, "leaked %s", *e);
    path += strcmp(*e, "PATH=/usr/bin:/bin") == 0;
    lang += strcmp(*e, "LANG=C") == 0;
    kept += strcmp(*e, "HIPD_SB_KEEP=kept") == 0;
    set += strcmp(*e, "HIPD_SB_SET=1") == 0;
    ck_assert_msg(strncmp(*e, "HIPD_SB_UNSET", 13) != 0, "%s", *e);
  }
  ck_assert(path == 1 && lang == 1 && kept == 1 && set == 1);
  sandbox_env_free(env);
}
END_TEST

/* ------------------------------------------------------------- spawn */

/* Run @p o with stdout into a pipe; @return what it wrote (static). */
static const char *spawn_output(sandbox_spawn_t *o, sandbox_fd_t *fds,
                                pid_t *pid)
{
  static char out[8192];
  hipd_err_t err;
  size_t len = 0;
  ssize_t n;
  int p[2], st;

  ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
  fds[0] = (sandbox_fd_t){p[1], STDOUT_FILENO};
  ck_assert_msg(sandbox_spawn(o, pid, &err) == 0, "%s", err.msg);
  close(p[1]);
  /* Its own process group, while it is not reaped. */
  ck_assert_int_eq(getpgid(*pid), *pid);
  while ((n = read(p[0], out + len, sizeof(out) - 1 - len)) > 0)
    len += (size_t)n;
  out[len] = '\0';
  close(p[0]);
  ck_assert_int_eq(waitpid(*pid, &st, 0), *pid);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
  return out;
}

/* The parent's ignored and blocked signals and its open descriptors do not
 * reach the child; the descriptors asked for do, and the directory. */
START_TEST(test_spawn_exec)
{
  char *status_argv[] = {"/bin/grep", "-E", "^Sig(Ign|Blk)",
                         "/proc/self/status", NULL};
  char *fd_argv[] = {"/bin/ls", "/proc/self/fd", NULL};
  char *pwd_argv[] = {"/bin/sh", "-c", "pwd", NULL};
  char *envp[] = {"PATH=/usr/bin:/bin", NULL};
  sandbox_fd_t fds[2];
  sandbox_spawn_t o = {.argv = status_argv,
                       .envp = envp,
                       .fds = fds,
                       .nfds = 1,
                       .stdin_null = true,
                       .close_from = 10,
                       .own_group = true};
  const char *out, *ign;
  sigset_t block;
  pid_t pid;
  int keep, stray;

  signal(SIGPIPE, SIG_IGN);
  signal(SIGUSR1, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGUSR2);
  ck_assert_int_eq(sigprocmask(SIG_BLOCK, &block, NULL), 0);
  o.path = status_argv[0];
  out = spawn_output(&o, fds, &pid);
  ck_assert_msg(strstr(out, "SigBlk:\t0000000000000000") != NULL, "%s", out);
  /* The standard signals; glibc's posix_spawn ignores its own two real-time
   * signals (32, 33) in the child, as it always did. */
  ck_assert_ptr_nonnull((ign = strstr(out, "SigIgn:\t")));
  ck_assert_msg((strtoull(ign + 8, NULL, 16) & 0x7fffffffull) == 0, "%s", out);

  /* At 9 as asked; at 20 (open, not close-on-exec) closed. */
  keep = open("/dev/null", O_RDONLY | O_CLOEXEC);
  stray = fcntl(open("/dev/null", O_RDONLY), F_DUPFD, 20);
  ck_assert_int_ge(keep, 0);
  ck_assert_int_ge(stray, 20);
  fds[1] = (sandbox_fd_t){keep, 9};
  o.nfds = 2;
  o.path = fd_argv[0];
  o.argv = fd_argv;
  out = spawn_output(&o, fds, &pid);
  ck_assert_msg(strstr(out, "\n9\n") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "20") == NULL, "%s", out);

  o.path = pwd_argv[0];
  o.argv = pwd_argv;
  o.chdir = "/";
  ck_assert_int_eq(chdir("/tmp"), 0);
  out = spawn_output(&o, fds, &pid);
  ck_assert_str_eq(out, "/\n");
  close(keep);
  close(stray);
}
END_TEST

/* Errors before the exec come back as codes with the system's reason. */
START_TEST(test_spawn_errors)
{
  char *argv[] = {"/nonexistent/hipd-prog", NULL};
  char *envp[] = {NULL};
  sandbox_fd_t bad[] = {{999, 3}};
  sandbox_spawn_t o = {.path = argv[0], .argv = argv, .envp = envp};
  hipd_err_t err;
  pid_t pid = -1;

  ck_assert_int_eq(sandbox_spawn(&o, &pid, &err), HIPD_ENOENT);
  ck_assert_str_eq(err.msg, strerror(ENOENT));
  o.fds = bad;
  o.nfds = 1;
  o.path = "/bin/true";
  ck_assert_int_eq(sandbox_spawn(&o, &pid, &err), HIPD_EIO);
  ck_assert_str_eq(err.msg, strerror(EBADF));
  o.path = NULL;
  ck_assert_int_eq(sandbox_spawn(&o, &pid, &err), HIPD_EINVAL);
}
END_TEST

/* A forked function: the same steps, a failed one reported through the
 * pipe, and the function's own exit. */
static void spawn_child_check(void *arg)
{
  struct sigaction sa;
  sigset_t mask;

  (void)arg;
  if (sigaction(SIGUSR1, NULL, &sa) != 0 || sa.sa_handler != SIG_DFL)
    _exit(2);
  if (sigprocmask(SIG_SETMASK, NULL, &mask) != 0 || sigismember(&mask, SIGTERM))
    _exit(3);
  if (fcntl(20, F_GETFD) != -1 || fcntl(3, F_GETFD) < 0)
    _exit(4);
  if (getpgid(0) != getpid())
    _exit(5);
  _exit(42);
}

START_TEST(test_spawn_fork)
{
  sandbox_fd_t fds[] = {{-1, 3}};
  sandbox_spawn_t o = {.fds = fds,
                       .nfds = 1,
                       .close_from = 4,
                       .own_group = true,
                       .child = spawn_child_check};
  hipd_err_t err;
  sigset_t block;
  pid_t pid;
  int st, stray;

  signal(SIGUSR1, SIG_IGN);
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ck_assert_int_eq(sigprocmask(SIG_BLOCK, &block, NULL), 0);
  fds[0].from = open("/dev/null", O_RDONLY | O_CLOEXEC);
  stray = fcntl(open("/dev/null", O_RDONLY), F_DUPFD, 20);
  ck_assert_int_ge(stray, 20);
  ck_assert_msg(sandbox_spawn(&o, &pid, &err) == 0, "%s", err.msg);
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 42, "status %d", st);
  fds[0].from = 999;
  ck_assert_int_eq(sandbox_spawn(&o, &pid, &err), HIPD_EIO);
  ck_assert_str_eq(err.msg, strerror(EBADF));
}
END_TEST

static Suite *sandbox_suite(void)
{
  Suite *s = suite_create("sandbox");
  TCase *tc = tcase_create("profiles");

  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_runner_profile);
  tcase_add_test(tc, test_worker_profile);
  tcase_add_test(tc, test_metrics_profile);
  tcase_add_test(tc, test_compiler_profile);
  tcase_add_test(tc, test_launcher_profile);
  tcase_add_test(tc, test_stacked_profiles);
  suite_add_tcase(s, tc);
  tc = tcase_create("confinement");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_landlock);
  tcase_add_test(tc, test_caps_rlimits);
  tcase_add_test(tc, test_threads_refused);
  tcase_add_test(tc, test_drop_ids);
  tcase_add_test(tc, test_user_lookup);
  tcase_add_test(tc, test_probe);
  tcase_add_test(tc, test_clean_env);
  suite_add_tcase(s, tc);
  tc = tcase_create("spawn");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_spawn_exec);
  tcase_add_test(tc, test_spawn_errors);
  tcase_add_test(tc, test_spawn_fork);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  if (geteuid() == 0) {
    if (users_make(TEST_USER, &test_uid, &test_gid) != 0) {
      fprintf(stderr, "check_sandbox: cannot create user " TEST_USER "\n");
      return 1;
    }
  }
  failed = test_run(sandbox_suite());
  return failed == 0 ? 0 : 1;
}
