/* SPDX-License-Identifier: MIT */
/* daemon/compile/compile_helper.c: hipd-compile, the sandboxed process in
 * which hipd compiles kernel source (hiprtc/NVRTC in this process, the
 * host C++ compiler as its children).
 *
 *   hipd-compile --fd=N [--user=NAME] [--timeout=S] [--idle-timeout=S]
 *                [--mem=BYTES] [--tmp=DIR] [--fsview=auto|mountns|landlock]
 *                [--gpu-driver]
 *
 * The daemon's compile pool (compile_pool.c) starts one per pool thread
 * and talks to it over the stream socket at fd N (compile_proto.h): one
 * HELLO from here, then COMPILE requests, one at a time, each answered by
 * a RESULT. It runs the drivers' own compile functions (driver.h), with
 * no device: the HIP driver's needs only its runtime compiler, set up by
 * compiler_id() (hip_rtc_setup) before the sandbox closes.
 *
 * Confinement, set up once at start, before any client input is read:
 * - file system: as root, a mount namespace whose root is a small
 *   read-only tmpfs holding read-only binds of the toolchain (/usr, /bin,
 *   /sbin, /lib*, /opt/rocm*, /etc/alternatives, /etc/ld.so.cache), the
 *   CPU device header, /dev/null, zero, random and urandom, a private
 *   /proc and a private /tmp (tmpfs); in its own pid namespace (so that
 *   killing this process ends every compiler it started), network
 *   namespace (no interfaces), IPC and UTS namespaces. `#include
 *   "/etc/shadow"` then fails as "No such file or directory". Without root
 *   (or where namespaces are refused), Landlock allows the same paths
 *   read-only and the daemon's private --tmp directory read-write; other
 *   files fail as "Permission denied". In either view the C++ compiler
 *   ($HIPD_CXX) is visible too where it lies elsewhere (a test's).
 * - identity (as root): --user (default hipd-compile, else nobody), never
 *   root; no capabilities; NO_NEW_PRIVS; not dumpable.
 * - seccomp: the COMPILER profile (sandbox.h): fork/exec of the tools,
 *   AF_UNIX sockets only.
 * - rlimits: CPU seconds (--timeout + 30, per process: each compiler
 *   process has its own), address space (--mem), file size, no core.
 * - a clean environment.
 * With --gpu-driver (the daemon's --compile-gpu-driver, an admin's
 * choice, off by default) the helper may also open the NVIDIA driver:
 * NVRTC reaches the CUDA compute cache only through it, and each compile
 * without it costs some 16 ms more (bench/RESULTS.md). It needs the mount
 * namespace view, which then also holds /dev/nvidia* (read-write) and a
 * sysfs of its own (read-only, none of the host's mounts below it);
 * seccomp is the COMPILER_GPU profile (any ioctl, pinned memory, AF_UNIX
 * sockets, which the namespaces leave nothing to reach, thread
 * placement); the cache is a folder of the private /tmp that outlives a
 * compile by NVRTC (CUDA_CACHE_PATH) but not one that ran a host
 * compiler (its processes could have written it) nor a size of
 * CACHE_MAX; and --mem bounds private writable memory (RLIMIT_DATA)
 * instead of address space, which the CUDA driver reserves by the
 * gigabyte: shared mappings are bounded by the helper's cgroup only.
 * A watchdog thread stops a compile after --timeout seconds: it kills the
 * compilers running (cpu_compile_stop_all), and ends this process if an
 * in-process compile (hiprtc) does not return; the daemon kills the whole
 * process group a little later if this process does not answer. A host
 * compiler whose processes use no CPU time for --idle-timeout seconds is
 * ended sooner (cpu_compile_set_idle_timeout: /proc is opened for it
 * before the sandbox closes); an in-process compile has only --timeout.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compile/compile_proto.h"
#include "drivers/cpu/cpu_compile.h"
#include "drivers/driver.h"
#include "hipd.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sanitize.h"
#include "util/clock.h"

#ifdef HIPD_ASAN
/* leak_check_at_exit=0: LeakSanitizer's check at exit needs a tracer that
 * clones and ptraces this process, which its seccomp profile refuses (and
 * kills): the helper's memory errors are still caught, its leaks not. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return "leak_check_at_exit=0";
}
#endif

#ifndef PKGDATADIR
#define PKGDATADIR "/usr/local/share/hipd"
#endif
#define HEADER_DEFAULT PKGDATADIR "/hipd_cpu_device.h"
#define LOG_MAX (256 * 1024)
/* The helper leaves (and is restarted) once its own CPU time passes this:
 * RLIMIT_CPU counts for the whole life of the process, and in-process
 * compiles (hiprtc) add to it. */
#define SELF_CPU_MAX_S 10

extern char **environ;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
  va_list ap;

  fprintf(stderr, "hipd-compile: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  _exit(2);
}

/* ------------------------------------------------------------- options */

typedef struct {
  int fd;
  const char *user;
  unsigned timeout_s;
  unsigned idle_s; /* --idle-timeout, 0: none */
  uint64_t mem;
  const char *tmp;
  const char *fsview; /* auto, mountns, landlock */
  const char *header; /* the CPU device header (resolved) */
  const char *cxx;    /* the C++ compiler, NULL if none */
  pid_t ppid;         /* the daemon */
  int gpu_driver;     /* --gpu-driver */
} opts_t;

static const char *opt_value(const char *arg, const char *name)
{
  size_t n = strlen(name);

  return strncmp(arg, name, n) == 0 && arg[n] == '=' ? arg + n + 1 : NULL;
}

static uint64_t parse_u64(const char *s, const char *what)
{
  char *end;
  unsigned long long v;

  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    die("invalid %s '%s'", what, s);
  return v;
}

static void parse_args(int argc, char **argv, opts_t *o)
{
  *o = (opts_t){
      .fd = -1, .timeout_s = 120, .mem = (uint64_t)4 << 30, .fsview = "auto"};
  for (int i = 1; i < argc; i++) {
    const char *v;
    if ((v = opt_value(argv[i], "--fd")) != NULL)
      o->fd = (int)parse_u64(v, "--fd");
    else if ((v = opt_value(argv[i], "--user")) != NULL)
      o->user = v;
    else if ((v = opt_value(argv[i], "--timeout")) != NULL)
      o->timeout_s = (unsigned)parse_u64(v, "--timeout");
    else if ((v = opt_value(argv[i], "--idle-timeout")) != NULL)
      o->idle_s = (unsigned)parse_u64(v, "--idle-timeout");
    else if ((v = opt_value(argv[i], "--mem")) != NULL)
      o->mem = parse_u64(v, "--mem");
    else if ((v = opt_value(argv[i], "--tmp")) != NULL)
      o->tmp = v;
    else if ((v = opt_value(argv[i], "--fsview")) != NULL)
      o->fsview = v;
    else if (strcmp(argv[i], "--gpu-driver") == 0)
      o->gpu_driver = 1;
    else
      die("unknown argument '%s' (this program is started by hipd)", argv[i]);
  }
  if (o->fd < 3 || fcntl(o->fd, F_GETFD) < 0)
    die("--fd=N must name the socket hipd passed (this program is started "
        "by hipd)");
  if (o->timeout_s == 0 || o->timeout_s > 86400)
    die("--timeout must be 1..86400 seconds");
  if (o->idle_s > 86400)
    die("--idle-timeout must be 0..86400 seconds");
  if (strcmp(o->fsview, "auto") != 0 && strcmp(o->fsview, "mountns") != 0 &&
      strcmp(o->fsview, "landlock") != 0)
    die("--fsview must be auto, mountns or landlock");
}

/* ------------------------------------------------------------- drivers */

typedef struct {
  driver_t *drv;
  char id[256];
} drv_entry_t;

static drv_entry_t drvs[CP_MAX_DRIVERS];
static unsigned ndrvs;

/* Every compiled-in driver that compiles, with its compiler id. This is
 * where each driver sets up its compiler (hiprtc and comgr loaded, the C++
 * compiler found and asked its version), before the view is limited. */
static void drivers_setup(void)
{
  for (driver_t **d = drivers_compiled(); *d != NULL && ndrvs < CP_MAX_DRIVERS;
       d++) {
    if ((*d)->compile == NULL || (*d)->compiler_id == NULL)
      continue;
    drvs[ndrvs].drv = *d;
    snprintf(drvs[ndrvs].id, sizeof(drvs[ndrvs].id), "%s",
             (*d)->compiler_id(*d));
    ndrvs++;
  }
}

static driver_t *driver_find(const char *name, size_t n)
{
  for (unsigned i = 0; i < ndrvs; i++)
    if (strlen(drvs[i].drv->name) == n &&
        memcmp(drvs[i].drv->name, name, n) == 0)
      return drvs[i].drv;
  return NULL;
}

/* ------------------------------------------------------------ the view */

/* The toolchain, visible read-only: each path that exists (a symbolic
 * link is recreated as one), and each match of the patterns. */
static const char *const view_paths[] = {"/usr",
                                         "/bin",
                                         "/sbin",
                                         "/lib",
                                         "/lib32",
                                         "/lib64",
                                         "/libx32",
                                         "/etc/alternatives",
                                         "/etc/ld.so.cache",
                                         NULL};
static const char *const view_globs[] = {"/opt/rocm*", "/opt/cuda*", NULL};
/* Device nodes the tools open. */
static const char *const view_devs[] = {"/dev/null", "/dev/zero", "/dev/random",
                                        "/dev/urandom", NULL};
/* With --gpu-driver: the NVIDIA driver's nodes (read-write). */
static const char *const gpu_dev_globs[] = {"/dev/nvidia*", NULL};

/* mkdir -p @p path's parents (and @p path itself when @p self), mode 0755. */
static int mkdirs(const char *path, int self)
{
  char buf[PATH_MAX];

  if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
    return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  if (self && mkdir(buf, 0755) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

/* Make @p src (absolute) appear at the same path under @p root: a
 * symbolic link is copied as a link, a directory or file is bound
 * read-only (@p writable: read-write, for device nodes). A missing
 * source is skipped. @return 0 or -1 with errno. */
static int view_add(const char *root, const char *src, int writable)
{
  char dst[PATH_MAX], target[PATH_MAX];
  struct stat st;
  unsigned long ro =
      MS_BIND | MS_REMOUNT | MS_NOSUID | (writable ? 0 : MS_RDONLY | MS_NODEV);
  int fd;

  if (lstat(src, &st) != 0)
    return errno == ENOENT ? 0 : -1;
  if (snprintf(dst, sizeof(dst), "%s%s", root, src) >= (int)sizeof(dst)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  if (mkdirs(dst, 0) != 0)
    return -1;
  if (S_ISLNK(st.st_mode)) {
    ssize_t n = readlink(src, target, sizeof(target) - 1);
    if (n < 0)
      return -1;
    target[n] = '\0';
    return symlink(target, dst) == 0 || errno == EEXIST ? 0 : -1;
  }
  if (S_ISDIR(st.st_mode)) {
    if (mkdir(dst, 0755) != 0 && errno != EEXIST)
      return -1;
  } else {
    fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return -1;
    close(fd);
  }
  if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0 ||
      mount(NULL, dst, NULL, ro, NULL) != 0)
    return -1;
  return 0;
}

/* view_add() of each match of @p pattern (none: nothing). @return 0, or
 * -1 with the failing bind in @p why. */
static int view_add_glob(const char *root, const char *pattern, int writable,
                         char *why, size_t whysz)
{
  glob_t gl;
  int rc = 0;

  if (glob(pattern, 0, NULL, &gl) == 0)
    for (size_t i = 0; i < gl.gl_pathc && rc == 0; i++)
      if ((rc = view_add(root, gl.gl_pathv[i], writable)) != 0)
        snprintf(why, whysz, "bind %s: %s", gl.gl_pathv[i], strerror(errno));
  globfree(&gl);
  return rc;
}

/* Bind the file open at @p fd (O_PATH, opened before /tmp was hidden) at
 * @p path under @p root, read-only. @return 0 or -1 with errno. */
static int view_bind_fd(const char *root, int fd, const char *path)
{
  char dst[PATH_MAX], src[64];
  int f;

  if (snprintf(dst, sizeof(dst), "%s%s", root, path) >= (int)sizeof(dst)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  if (mkdirs(dst, 0) != 0 ||
      (f = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) < 0)
    return -1;
  close(f);
  snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
  if (mount(src, dst, NULL, MS_BIND, NULL) != 0 ||
      mount(NULL, dst, NULL,
            MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
    return -1;
  return 0;
}

/*
 * Enter the namespaces and build the view (as root). This process forks:
 * the parent stays outside, waits for the child and exits with its status
 * (it holds nothing: the socket is closed there); the child, pid 1 of the
 * new pid namespace, returns here to serve. @return 0 in the child, or -1
 * with @p why set (nothing changed yet if unshare failed; after that the
 * caller must exit).
 */
static int view_enter(const opts_t *o, uid_t uid, gid_t gid, char *why,
                      size_t whysz)
{
  static const char root[] = "/tmp";
  char tmpopts[96];
  pid_t pid;
  int status, hfd = -1, cfd = -1;

  if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
              CLONE_NEWUTS) != 0) {
    snprintf(why, whysz, "unshare: %s", strerror(errno));
    return -1;
  }
  pid = fork();
  if (pid < 0) {
    snprintf(why, whysz, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid > 0) {
    /* Outside: wait for the child, which is the helper from now on;
     * confined too (it needs nothing but the wait). */
    sandbox_spec_t spec;
    hipd_err_t err;

    close(o->fd);
    sandbox_spec_init(&spec);
#ifdef HIPD_TSAN
    spec.allow_threads = true; /* ThreadSanitizer's background thread */
#endif
    spec.change_ids = true;
    spec.uid = uid;
    spec.gid = gid;
    spec.no_dumpable = true;
    spec.profile = SANDBOX_PROFILE_COMPILER;
    if (sandbox_enter(&spec, &err) < 0)
      fprintf(stderr, "hipd-compile: sandbox (outer process): %s\n", err.msg);
    /* The id change cleared the parent-death signal. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != o->ppid)
      _exit(0);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);

  /* Nothing mounted here propagates out. The new root is a tmpfs mounted
   * on /tmp (of this namespace only); binds are made before it hides
   * anything they need: the sources are all outside /tmp but the header
   * and the compiler, which are opened first and bound through
   * descriptors. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    goto fail;
  /* The header, and the compiler when it is an absolute path. */
  hfd = open(o->header, O_PATH | O_CLOEXEC);
  if (o->cxx != NULL && o->cxx[0] == '/')
    cfd = open(o->cxx, O_PATH | O_CLOEXEC);
  if (mount("hipd-compile", root, "tmpfs", MS_NOSUID | MS_NODEV,
            "size=16m,mode=0755") != 0)
    goto fail;
  /* The private /tmp first: the header may live under /tmp (a build tree
   * there), and is then bound inside it. */
  snprintf(tmpopts, sizeof(tmpopts), "size=1g,mode=0700,uid=%u,gid=%u",
           (unsigned)uid, (unsigned)gid);
  if (mkdir("/tmp/tmp", 0700) != 0 ||
      mount("hipd-compile-tmp", "/tmp/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
            tmpopts) != 0)
    goto fail;
  if (hfd >= 0) {
    if (view_bind_fd(root, hfd, o->header) != 0)
      goto fail;
    close(hfd);
    hfd = -1;
  }
  for (const char *const *p = view_paths; *p != NULL; p++)
    if (view_add(root, *p, 0) != 0) {
      snprintf(why, whysz, "bind %s: %s", *p, strerror(errno));
      return -1;
    }
  for (const char *const *g = view_globs; *g != NULL; g++)
    if (view_add_glob(root, *g, 0, why, whysz) != 0)
      return -1;
  /* A compiler outside the toolchain's folders ($HIPD_CXX elsewhere, a
   * test's) is bound alone, read-only: whatever else it needs must be in
   * the view already. */
  if (cfd >= 0) {
    char dst[PATH_MAX];
    struct stat st;
    snprintf(dst, sizeof(dst), "%s%s", root, o->cxx);
    if (lstat(dst, &st) != 0 && view_bind_fd(root, cfd, o->cxx) != 0) {
      snprintf(why, whysz, "bind %s: %s", o->cxx, strerror(errno));
      return -1;
    }
    close(cfd);
    cfd = -1;
  }
  if (mkdir("/tmp/dev", 0755) != 0)
    goto fail;
  for (const char *const *p = view_devs; *p != NULL; p++)
    if (view_add(root, *p, 1) != 0) {
      snprintf(why, whysz, "bind %s: %s", *p, strerror(errno));
      return -1;
    }
  if (o->gpu_driver) {
    for (const char *const *g = gpu_dev_globs; *g != NULL; g++)
      if (view_add_glob(root, *g, 1, why, whysz) != 0)
        return -1;
    /* What the driver reads of the system: a sysfs of its own, read-only
     * and without the host's mounts below /sys (cgroup, debugfs, bpf),
     * whose network part is this namespace's (no interfaces). */
    if (mkdir("/tmp/sys", 0555) != 0 ||
        mount("sysfs", "/tmp/sys", "sysfs",
              MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
      snprintf(why, whysz, "mount sysfs: %s", strerror(errno));
      return -1;
    }
  }
  /* A /proc of this pid namespace only: its processes are this one
   * (not dumpable: its files are root's) and its compilers. */
  if (mkdir("/tmp/proc", 0555) != 0 ||
      mount("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            NULL) != 0)
    goto fail;
  if (mount(NULL, root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
            "size=16m,mode=0755") != 0)
    goto fail;
  /* pivot_root(".", "."): the old root ends up on top of the new one, and
   * is detached at once. */
  if (chdir(root) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 ||
      umount2(".", MNT_DETACH) != 0 || chdir("/") != 0)
    goto fail;
  return 0;

fail:
  snprintf(why, whysz, "%s", strerror(errno));
  return -1;
}

/* The Landlock rules of the fallback view. */
static size_t landlock_paths(const opts_t *o, sandbox_path_t *out, size_t max)
{
  size_t n = 0;
  static char globbed[16][PATH_MAX];
  size_t ng = 0;

  for (const char *const *p = view_paths; *p != NULL && n < max; p++)
    out[n++] = (sandbox_path_t){*p, SANDBOX_FS_READ | SANDBOX_FS_EXEC};
  for (const char *const *g = view_globs; *g != NULL; g++) {
    glob_t gl;
    if (glob(*g, 0, NULL, &gl) == 0)
      for (size_t i = 0; i < gl.gl_pathc && ng < 16 && n < max; i++) {
        snprintf(globbed[ng], PATH_MAX, "%s", gl.gl_pathv[i]);
        out[n++] =
            (sandbox_path_t){globbed[ng++], SANDBOX_FS_READ | SANDBOX_FS_EXEC};
      }
    globfree(&gl);
  }
  for (const char *const *p = view_devs; *p != NULL && n < max; p++)
    out[n++] = (sandbox_path_t){*p, SANDBOX_FS_READ | SANDBOX_FS_WRITE};
  if (n < max)
    out[n++] = (sandbox_path_t){o->header, SANDBOX_FS_READ};
  if (o->cxx != NULL && o->cxx[0] == '/' && n < max)
    out[n++] = (sandbox_path_t){o->cxx, SANDBOX_FS_READ | SANDBOX_FS_EXEC};
  if (o->tmp != NULL && n < max)
    out[n++] = (sandbox_path_t){o->tmp, SANDBOX_FS_READ | SANDBOX_FS_WRITE};
  return n;
}

/* ------------------------------------------------------------ watchdog */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t deadline_ms; /* of the compile running, 0 when none */
  int fired;            /* the compile running was stopped */
} watchdog_state = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *watchdog_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&watchdog_state.mu);
  for (;;) {
    uint64_t now = util_now_ms(), abs_ns;
    struct timespec ts;

    if (watchdog_state.deadline_ms == 0) {
      pthread_cond_wait(&watchdog_state.cv, &watchdog_state.mu);
      continue;
    }
    if (now >= watchdog_state.deadline_ms) {
      watchdog_state.fired = 1;
      pthread_mutex_unlock(&watchdog_state.mu);
      cpu_compile_stop_all();
      /* An in-process compile cannot be stopped: end the process; the
       * daemon reports the timeout. */
      sleep(2);
      pthread_mutex_lock(&watchdog_state.mu);
      if (watchdog_state.deadline_ms != 0)
        _exit(3);
      continue;
    }
    /* The condition variable waits on CLOCK_MONOTONIC (watchdog_start). */
    abs_ns = util_now_ns() + (watchdog_state.deadline_ms - now) * 1000000u;
    ts.tv_sec = (time_t)(abs_ns / 1000000000u);
    ts.tv_nsec = (long)(abs_ns % 1000000000u);
    pthread_cond_timedwait(&watchdog_state.cv, &watchdog_state.mu, &ts);
  }
  return NULL;
}

static int watchdog_start(void)
{
  pthread_condattr_t ca;
  pthread_t t;

  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&watchdog_state.cv, &ca);
  pthread_condattr_destroy(&ca);
  return pthread_create(&t, NULL, watchdog_main, NULL) == 0 ? 0 : -1;
}

static void watchdog_arm(uint64_t deadline_ms)
{
  pthread_mutex_lock(&watchdog_state.mu);
  watchdog_state.deadline_ms = deadline_ms;
  pthread_cond_signal(&watchdog_state.cv);
  pthread_mutex_unlock(&watchdog_state.mu);
}

/* ------------------------------------------------------------- serving */

static int self_cpu_s(void)
{
  struct rusage ru;

  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return (int)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec);
}

/* ------------------------------------------------------------- scratch */

/* The compiles' private directory: /tmp in the mount namespace (a tmpfs of
 * its own), else --tmp. What is in it at start (in the mount namespace,
 * the folders that lead to the CPU device header's bind when it lives
 * under /tmp; root's, not the compile user's) is kept; everything else is
 * removed after every compile. */
#define SCRATCH_KEEP_MAX 8
#define SCRATCH_SLACK (1u << 20) /* bytes a tmpfs may still hold */
static struct {
  const char *dir;
  int own_fs; /* a tmpfs of its own: its usage is the compiles' */
  char keep[SCRATCH_KEEP_MAX][256];
  unsigned nkeep;
} scratch;

static int scratch_kept(const char *name)
{
  for (unsigned i = 0; i < scratch.nkeep; i++)
    if (strcmp(scratch.keep[i], name) == 0)
      return 1;
  return 0;
}

/* Call @p fn for each entry of the scratch directory but "." and "..";
 * @return how many, or -1 if it cannot be read. */
static int scratch_each(void (*fn)(const char *name))
{
  DIR *d = opendir(scratch.dir);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    n++;
    if (fn != NULL)
      fn(e->d_name);
  }
  closedir(d);
  return n;
}

static void keep_add(const char *name)
{
  if (scratch.nkeep < SCRATCH_KEEP_MAX)
    snprintf(scratch.keep[scratch.nkeep++], sizeof(scratch.keep[0]), "%s",
             name);
}

/* Before any compile: note what the directory holds already. */
static void scratch_init(const char *dir, int own_fs)
{
  scratch.dir = dir;
  scratch.own_fs = own_fs;
  if (scratch_each(keep_add) > SCRATCH_KEEP_MAX)
    die("%s holds more than %d entries before any compile", dir,
        SCRATCH_KEEP_MAX);
}

static int rm_cb(const char *path, const struct stat *st, int flag,
                 struct FTW *ftw)
{
  (void)st;
  (void)flag;
  if (ftw->level > 0)
    remove(path);
  return 0;
}

static void remove_entry(const char *name)
{
  char path[PATH_MAX];

  if (scratch_kept(name) || snprintf(path, sizeof(path), "%s/%s", scratch.dir,
                                     name) >= (int)sizeof(path))
    return;
  /* The entry itself last (depth first); never across a mount. */
  if (nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0)
    remove(path);
}

/* NVRTC's compute cache (--gpu-driver), a folder of the scratch space
 * kept from compile to compile ("" without it). */
#define CACHE_MAX (256u << 10)
static char nv_cache[PATH_MAX];
static uint64_t nv_cache_bytes;

static int cache_size_cb(const char *path, const struct stat *st, int flag,
                         struct FTW *ftw)
{
  (void)path;
  (void)ftw;
  if (flag == FTW_F)
    nv_cache_bytes += (uint64_t)st->st_blocks * 512;
  return 0;
}

/* After a compile: empty the cache when a host compiler ran (its
 * processes, this helper's user too, could have written what NVRTC reads
 * next, for another tenant) or when it outgrew CACHE_MAX (it counts in
 * the scratch space's slack). */
static void nv_cache_tend(int host_compiler)
{
  if (nv_cache[0] == '\0')
    return;
  nv_cache_bytes = 0;
  if (!host_compiler &&
      nftw(nv_cache, cache_size_cb, 16, FTW_PHYS | FTW_MOUNT) == 0 &&
      nv_cache_bytes <= CACHE_MAX)
    return;
  nftw(nv_cache, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* After a compile: remove whatever it left in the scratch directory (the
 * files of a compiler killed mid-way, or made on purpose to fill it), so
 * that no compile can take space from the next ones. @return 0, or -1
 * when something could not be reclaimed (left behind, or space a tmpfs of
 * its own still holds): the helper then leaves, and the pool starts a
 * fresh one with a fresh directory. */
static int scratch_reset(void)
{
  struct statfs sf;

  if (scratch_each(remove_entry) < 0 ||
      scratch_each(NULL) != (int)scratch.nkeep)
    return -1;
  if (scratch.own_fs && statfs(scratch.dir, &sf) == 0 &&
      (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize >
          SCRATCH_SLACK)
    return -1;
  return 0;
}

/* ------------------------------------------------------------- serving */

/* Answer one COMPILE payload. @return 1 to go on, 0 to leave after the
 * answer (the compile was stopped: compilers can no longer start). */
static int serve_compile(int fd, const unsigned char *p, size_t len,
                         unsigned timeout_s)
{
  cp_rd_t r = {.p = p, .len = len};
  const char *dname, *src;
  char *arch = NULL, **names = NULL, **opts = NULL;
  uint32_t dlen, nnames = 0, nopts = 0, slen;
  const void *sp;
  char *log = calloc(1, LOG_MAX);
  void *image = NULL;
  size_t image_len = 0;
  strbuf_t out = {0};
  driver_t *drv;
  int rc, fired, go_on = 1, clean;
  uint64_t t0 = 0, c0 = 0, wall_ns = 0, cpu_ns = 0;

  if (log == NULL)
    die("out of memory");
  if (cp_get_str(&r, CP_MAX_STR, &dname, &dlen) != 0 ||
      cp_get_strdup(&r, CP_MAX_STR, &arch) != 0 ||
      cp_get_u32(&r, &nnames) != 0 || nnames > CP_MAX_NAMES)
    die("malformed COMPILE request");
  names = calloc(nnames + 1, sizeof(*names));
  if (names == NULL)
    die("out of memory");
  for (uint32_t i = 0; i < nnames; i++)
    if (cp_get_strdup(&r, CP_MAX_STR, &names[i]) != 0)
      die("malformed COMPILE request");
  if (cp_get_u32(&r, &nopts) != 0 || nopts > CP_MAX_OPTS)
    die("malformed COMPILE request");
  opts = calloc(nopts + 1, sizeof(*opts));
  if (opts == NULL)
    die("out of memory");
  for (uint32_t i = 0; i < nopts; i++)
    if (cp_get_strdup(&r, CP_MAX_STR, &opts[i]) != 0)
      die("malformed COMPILE request");
  if (cp_get_blob(&r, CP_MAX_SOURCE, &sp, &slen) != 0 || cp_rd_end(&r) != 0)
    die("malformed COMPILE request");
  src = sp;

  drv = driver_find(dname, dlen);
  if (drv == NULL) {
    snprintf(log, LOG_MAX, "no compiler for driver '%.*s' in hipd-compile",
             (int)(dlen > 64 ? 64 : dlen), dname);
    rc = HIPD_ENOTSUP;
  } else {
    watchdog_state.fired = 0;
    watchdog_arm(util_now_ms() + (uint64_t)timeout_s * 1000);
    t0 = util_now_ns();
    c0 = util_cpu_ns();
    rc = drv->compile(drv, arch, src, slen, (const char *const *)names, nnames,
                      (const char *const *)opts, nopts, &image, &image_len, log,
                      LOG_MAX);
    cpu_ns = util_cpu_ns() - c0;
    wall_ns = util_now_ns() - t0;
    watchdog_arm(0);
    pthread_mutex_lock(&watchdog_state.mu);
    fired = watchdog_state.fired;
    pthread_mutex_unlock(&watchdog_state.mu);
    if (rc != 0 && log[0] == '\0')
      snprintf(log, LOG_MAX, "%s", drv_last_error());
    if (fired) {
      size_t used = strlen(log);
      free(image);
      image = NULL;
      image_len = 0;
      snprintf(log + used, LOG_MAX - used,
               "%scompilation timed out after %u s: the compiler was "
               "stopped\n",
               used && log[used - 1] != '\n' ? "\n" : "", timeout_s);
      rc = HIPD_ECOMPILE;
      go_on = 0;
    }
    if (rc == 0 &&
        (image == NULL || image_len == 0 || image_len > CP_MAX_IMAGE)) {
      snprintf(log, LOG_MAX, "the compiled image has %zu bytes (at most %u)",
               image_len, (unsigned)CP_MAX_IMAGE);
      rc = HIPD_ELIMIT;
    }
  }
  cp_put_str(&out, log);
  cp_put_blob(&out, rc == 0 ? image : NULL, rc == 0 ? image_len : 0);
  /* Before the answer: a compile whose leftovers cannot be reclaimed
   * makes this helper leave, and the daemon knows it at once. */
  nv_cache_tend(drv == NULL || strcmp(drv->name, "hip") != 0);
  clean = scratch_reset() == 0;
  cp_put_u32(&out, (!go_on || !clean || self_cpu_s() > SELF_CPU_MAX_S
                        ? CP_RESULT_LEAVING
                        : 0) |
                       (!go_on ? CP_RESULT_TIMED_OUT : 0) |
                       (!clean ? CP_RESULT_SCRATCH : 0));
  cp_put_u32(&out, cp_us(wall_ns));
  cp_put_u32(&out, cp_us(cpu_ns));
  if (strbuf_failed(&out))
    die("out of memory for the answer");
  if (cp_send(fd, CP_OP_RESULT, rc, out.p, out.len) != 0)
    _exit(0); /* the daemon has gone */
  strbuf_free(&out);
  free(image);
  free(log);
  free(arch);
  for (uint32_t i = 0; i < nnames; i++)
    free(names[i]);
  free(names);
  for (uint32_t i = 0; i < nopts; i++)
    free(opts[i]);
  free(opts);
  return go_on && clean;
}

/* Reap whatever was left to this process (pid 1 of its namespace adopts
 * the orphans of the tools). Between compiles only. */
static void reap_orphans(void)
{
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
}

static void send_hello(int fd, uint32_t fsview, const char *note)
{
  strbuf_t b = {0};

  cp_put_u32(&b, CP_VERSION);
  cp_put_u32(&b, (uint32_t)getuid());
  cp_put_u32(&b, fsview);
  cp_put_str(&b, note);
  cp_put_u32(&b, ndrvs);
  for (unsigned i = 0; i < ndrvs; i++) {
    cp_put_str(&b, drvs[i].drv->name);
    cp_put_str(&b, drvs[i].id);
  }
  if (strbuf_failed(&b) || cp_send(fd, CP_OP_HELLO, 0, b.p, b.len) != 0)
    die("cannot send the hello: %s", strerror(errno));
  strbuf_free(&b);
}

int main(int argc, char **argv)
{
  opts_t o;
  sandbox_spec_t spec;
  sandbox_path_t paths[48];
  hipd_err_t err, idle_err;
  char header[PATH_MAX], why[256] = "", note[HIPD_ERR_MSG_MAX + 300] = "";
  char env_header[PATH_MAX + 32], env_tmp[PATH_MAX + 16];
  char env_cache[PATH_MAX + 32] = "";
  const char *cxx;
  uid_t uid = getuid();
  gid_t gid = getgid();
  uint32_t fsview = CP_FSVIEW_NONE;
  int root = geteuid() == 0, devnull;

  parse_args(argc, argv, &o);
  /* Its cgroup (sandbox/cgroup.h), and before any compiler starts: they
   * inherit both. */
  {
    int ufd, lfd;
    if (cgroup_join(NULL, &ufd, &lfd, &err) != 0)
      fprintf(stderr, "hipd-compile: %s\n", err.msg);
    if (ufd >= 0)
      close(ufd);
    if (lfd >= 0)
      close(lfd);
  }
  if (sandbox_oom_adj(SANDBOX_TENANT_OOM_ADJ, &err) != 0)
    fprintf(stderr, "hipd-compile: %s\n", err.msg);
  fcntl(o.fd, F_SETFD, FD_CLOEXEC); /* never inherited by a compiler */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  o.ppid = getppid();
  if (o.ppid == 1)
    _exit(0); /* the daemon is gone already */
  signal(SIGPIPE, SIG_IGN);

  /* The CPU device header, found as cpu_compile() finds it. */
  {
    const char *h = getenv("HIPD_CPU_HEADER");
    if (h == NULL || h[0] == '\0')
      h = HEADER_DEFAULT;
    if (realpath(h, header) == NULL)
      snprintf(header, sizeof(header), "%s", h);
    o.header = header;
  }
  drivers_setup();
  cxx = cpu_compile_compiler();
  o.cxx = cxx;

  if (root) {
    const char *name = o.user;
    if (name == NULL || name[0] == '\0') {
      name = "hipd-compile";
      if (sandbox_user_lookup(name, &uid, &gid, &err) != 0)
        name = "nobody";
    }
    if (sandbox_user_lookup(name, &uid, &gid, &err) != 0)
      die("compile user: %s", err.msg);
    if (uid == 0)
      die("the compile user '%s' is root: refused", name);
  }

  if (root && strcmp(o.fsview, "landlock") != 0) {
    if (view_enter(&o, uid, gid, why, sizeof(why)) == 0)
      fsview = CP_FSVIEW_MOUNTNS;
    else if (strcmp(o.fsview, "mountns") == 0 || why[0] == '\0' ||
             strncmp(why, "unshare", 7) != 0)
      die("cannot set up the mount namespace: %s", why);
    /* unshare refused (a container): fall back to Landlock below. */
  }
  /* The driver's ioctls and an AF_UNIX socket() (COMPILER_GPU) are
   * confined by the mount, network and IPC namespaces: Landlock alone
   * would leave the host's unix sockets reachable. */
  if (o.gpu_driver && fsview != CP_FSVIEW_MOUNTNS)
    die("--gpu-driver needs the mount namespace view (hipd as root, "
        "namespaces allowed): %s",
        why[0] != '\0' ? why : "not root, or --fsview=landlock");
  if (fsview != CP_FSVIEW_MOUNTNS) {
    if (o.tmp == NULL)
      die("--tmp=DIR is needed without a mount namespace");
    if (root && chown(o.tmp, uid, gid) != 0)
      die("chown %s: %s", o.tmp, strerror(errno));
    fsview = CP_FSVIEW_LANDLOCK;
  }

  sandbox_spec_init(&spec);
#ifdef HIPD_TSAN
  spec.allow_threads = true; /* ThreadSanitizer's background thread */
#endif
  spec.change_ids = root;
  spec.uid = uid;
  spec.gid = gid;
  spec.no_dumpable = true;
  spec.rlim.cpu_s = (rlim_t)o.timeout_s + 30;
#if !defined(HIPD_ASAN) && !defined(HIPD_TSAN)
  if (o.gpu_driver)
    spec.rlim.data = (rlim_t)o.mem;
  else
    spec.rlim.as = (rlim_t)o.mem;
#endif
  spec.rlim.fsize = (rlim_t)256 << 20;
  spec.rlim.nofile = 1024;
  spec.rlim.core = 0;
  spec.profile =
      o.gpu_driver ? SANDBOX_PROFILE_COMPILER_GPU : SANDBOX_PROFILE_COMPILER;
  spec.require = SANDBOX_REQUIRE_SECCOMP;
  if (fsview == CP_FSVIEW_LANDLOCK) {
    spec.landlock = true;
    spec.paths = paths;
    spec.npaths = landlock_paths(&o, paths, sizeof(paths) / sizeof(paths[0]));
    spec.require |= SANDBOX_REQUIRE_LANDLOCK;
  }
  if (chdir(fsview == CP_FSVIEW_MOUNTNS ? "/tmp" : o.tmp) != 0)
    die("chdir: %s", strerror(errno));
  devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  /* /proc, to find a compiler's processes, is opened before Landlock
   * would refuse it (in the mount namespace: the pid namespace's own). */
  err_clear(&idle_err);
  if (o.idle_s > 0)
    cpu_compile_set_idle_timeout(o.idle_s, &idle_err);
  if (sandbox_enter(&spec, &err) < 0)
    die("sandbox: %s", err.msg);
  /* The id change cleared the parent-death signal: set it again (in the
   * pid namespace the parent is the outer process, which has it too). */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (fsview != CP_FSVIEW_MOUNTNS && getppid() != o.ppid)
    _exit(0);
  if (why[0] != '\0')
    snprintf(note, sizeof(note), "no mount namespace (%s); %s", why, err.msg);
  else
    snprintf(note, sizeof(note), "%s", err.msg);
  if (idle_err.msg[0] != '\0') {
    size_t used = strlen(note);
    snprintf(note + used, sizeof(note) - used, "%s%s", used ? "; " : "",
             idle_err.msg);
  }

  /* A clean environment for the tools: what cpu_compile() reads, the
   * private temporary directory, and nothing of the daemon's. */
  snprintf(env_header, sizeof(env_header), "HIPD_CPU_HEADER=%s", header);
  snprintf(env_tmp, sizeof(env_tmp), "TMPDIR=%s",
           fsview == CP_FSVIEW_MOUNTNS ? "/tmp" : o.tmp);
  /* NVRTC's compute cache, made before scratch_init() so that the
   * cleaning after each compile keeps it (nv_cache_tend() looks after
   * it): what it holds is the same for every source (bench/RESULTS.md). */
  if (o.gpu_driver) {
    snprintf(env_cache, sizeof(env_cache), "CUDA_CACHE_PATH=%s/.nv-cache",
             fsview == CP_FSVIEW_MOUNTNS ? "/tmp" : o.tmp);
    snprintf(nv_cache, sizeof(nv_cache), "%s", strchr(env_cache, '=') + 1);
    if (mkdir(nv_cache, 0700) != 0 && errno != EEXIST)
      die("mkdir %s: %s", nv_cache, strerror(errno));
  }
  {
    const char *keep[] = {"LD_LIBRARY_PATH",
                          env_header,
                          env_tmp,
                          "HOME=/nonexistent",
                          "LC_ALL=C",
                          env_cache[0] != '\0' ? env_cache : NULL,
                          NULL};
    char **env = sandbox_clean_env(keep);
    if (env == NULL)
      die("out of memory");
    environ = env;
  }
  /* The device driver, for the compilers that use it, set up once here
   * rather than in every compile. A failure costs time, not compiles: it
   * is said in the hello's note. */
  for (unsigned i = 0; o.gpu_driver && i < ndrvs; i++) {
    driver_t *drv = drvs[i].drv;

    if (drv->compile_driver_open != NULL &&
        drv->compile_driver_open(drv) != 0) {
      size_t used = strlen(note);

      snprintf(note + used, sizeof(note) - used,
               "%s%s: the driver for its compiler: %s", used ? "; " : "",
               drv->name, drv_last_error());
    }
  }
  if (watchdog_start() != 0)
    die("cannot start the watchdog thread");
  scratch_init(fsview == CP_FSVIEW_MOUNTNS ? "/tmp" : o.tmp,
               fsview == CP_FSVIEW_MOUNTNS);

  send_hello(o.fd, fsview, note);
  /* From here on nothing of this process writes to hipd's log: an
   * in-process compiler (hiprtc) that is made to open /proc/self/fd/2
   * must find nothing of it to read, nor write it. The compilers have
   * files of their own (cpu_compile.c); the daemon says when this helper
   * ends and why. */
  if (devnull < 0 || dup2(devnull, STDOUT_FILENO) < 0 ||
      dup2(devnull, STDERR_FILENO) < 0)
    die("cannot put /dev/null on its standard output and error");
  close(devnull);
  for (;;) {
    cp_hdr_t h;
    unsigned char *payload;

    if (cp_recv(o.fd, &h, &payload, 0) != 0) {
      if (errno == ECONNRESET)
        _exit(0); /* the daemon closed its end */
      die("bad request: %s", strerror(errno));
    }
    if (h.op != CP_OP_COMPILE)
      die("unexpected message %u", h.op);
    if (!serve_compile(o.fd, payload, h.len, o.timeout_s))
      _exit(0);
    free(payload);
    if (fsview == CP_FSVIEW_MOUNTNS)
      reap_orphans();
    if (self_cpu_s() > SELF_CPU_MAX_S)
      _exit(0);
  }
}
