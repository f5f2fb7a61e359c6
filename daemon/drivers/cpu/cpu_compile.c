/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_compile.c: HIP kernel source to a host shared object,
 * for the CPU device. The contract is in cpu_compile.h. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_compile.h"
#include "cpu_proto.h"
#include "cpu_source.h"
#include "hipd.h"
#include "sandbox/sandbox_spawn.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/strbuf.h"

#ifndef PKGDATADIR
#define PKGDATADIR "/usr/local/share/hipd"
#endif
#define HEADER_DEFAULT PKGDATADIR "/hipd_cpu_device.h"
#define DEFAULT_TIMEOUT_S 60
/* Diagnostics kept from the compiler (the rest is read and dropped). */
#define MAX_CAPTURE (256 * 1024)
#define SO_NAME "kernel.so"
/* How often a compiler's CPU time is looked at (--compile-idle-timeout). */
#define IDLE_LOOK_MS 500

extern char **environ;

/* ------------------------------------------------------------ compiler */

static char *found_cxx;
static pthread_once_t find_once = PTHREAD_ONCE_INIT;

/* @p name if it names an executable (with a '/'), else its first match on
 * $PATH; malloc'ed, or NULL. */
static char *which(const char *name)
{
  const char *path = getenv("PATH");
  size_t nlen = strlen(name);

  if (strchr(name, '/') != NULL)
    return access(name, X_OK) == 0 ? strdup(name) : NULL;
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path != '\0') {
    const char *end = strchr(path, ':');
    size_t dlen = end ? (size_t)(end - path) : strlen(path);
    char *cand = malloc(dlen + nlen + 3);
    if (cand == NULL)
      return NULL;
    if (dlen == 0)
      snprintf(cand, dlen + nlen + 3, "./%s", name);
    else
      snprintf(cand, dlen + nlen + 3, "%.*s/%s", (int)dlen, path, name);
    struct stat st;
    if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
      return cand;
    free(cand);
    path += dlen;
    if (*path == ':')
      path++;
  }
  return NULL;
}

static void find_cxx(void)
{
  static const char *const names[] = {"c++", "g++", "clang++"};
  const char *env = getenv("HIPD_CXX");

  if (env != NULL && env[0] != '\0') {
    found_cxx = which(env); /* set explicitly: no fallback */
    return;
  }
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if ((found_cxx = which(names[i])) != NULL)
      return;
}

const char *cpu_compile_compiler(void)
{
  pthread_once(&find_once, find_cxx);
  return found_cxx;
}

/* ---------------------------------------------------- names and options */

/* A kernel name as written in C++: identifiers joined by "::", with
 * optional template arguments made of names, numbers, ',', '*', '&' and
 * spaces. It is pasted into the module's source, so nothing else goes. */
static int name_ok(const char *n)
{
  int depth = 0;
  size_t len = strlen(n);

  if (len == 0 || len > CPU_MAX_NAME)
    return 0;
  if (!(isalpha((unsigned char)n[0]) || n[0] == '_' || n[0] == ':'))
    return 0;
  for (const char *p = n; *p != '\0'; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '<') {
      depth++;
    } else if (c == '>') {
      if (--depth < 0)
        return 0;
    } else if (!(isalnum(c) || c == '_' || c == ':' ||
                 (depth > 0 && strchr(", *&-.", c) != NULL))) {
      return 0;
    }
  }
  return depth == 0;
}

/*
 * Check one client option. @return 1 to pass *use (an option of ours: the
 * same string or a mapped one) to the compiler, 0 to drop it (meaningless
 * on the host), -1 to refuse it.
 */
static int option_check(const char *o, const char **use)
{
  static const char *const exact[] = {"-O0",
                                      "-O1",
                                      "-O2",
                                      "-O3",
                                      "-Os",
                                      "-Ofast",
                                      "-O",
                                      "-ffast-math",
                                      "-fno-fast-math",
                                      "-fno-math-errno",
                                      "-funroll-loops",
                                      "-fno-unroll-loops",
                                      "-ffp-contract=off",
                                      "-ffp-contract=on",
                                      "-ffp-contract=fast",
                                      "-g",
                                      "-g0",
                                      "-w",
                                      "-Wall",
                                      "-Wextra",
                                      "-Werror",
                                      "-march=native",
                                      "-mtune=native"};
  static const char *const stds[] = {"c++17", "gnu++17", "c++20", "gnu++20",
                                     "c++2a", "gnu++2a", "c++23", "gnu++23",
                                     "c++2b", "gnu++2b"};
  static const char *const ignored_prefix[] = {"--gpu-architecture=",
                                               "-arch=",
                                               "--offload-arch=",
                                               "-rdc=",
                                               "--relocatable-device-code=",
                                               "--gpu-max-threads-per-block=",
                                               "-maxrregcount=",
                                               "--maxrregcount="};
  static const char *const ignored[] = {"-lineinfo",
                                        "--generate-line-info",
                                        "-fgpu-rdc",
                                        "-fno-gpu-rdc",
                                        "-G",
                                        "--device-debug",
                                        "-default-device",
                                        "--device-as-default-execution-space",
                                        "-dopt=on",
                                        "--extra-device-vectorization"};

  *use = o;
  for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
    if (strcmp(o, exact[i]) == 0)
      return 1;
  if (strcmp(o, "--use_fast_math") == 0 || strcmp(o, "-use_fast_math") == 0 ||
      strcmp(o, "--use-fast-math") == 0) {
    *use = "-ffast-math";
    return 1;
  }
  /* NVRTC's spelling, which hipd takes on every device (kernel.compile_ir
   * passes --fmad=false by default). */
  if (strcmp(o, "--fmad=true") == 0) {
    *use = "-ffp-contract=fast";
    return 1;
  }
  if (strcmp(o, "--fmad=false") == 0) {
    *use = "-ffp-contract=off";
    return 1;
  }
  if (strncmp(o, "-D", 2) == 0 || strncmp(o, "-U", 2) == 0) {
    const char *eq = strchr(o + 2, '=');
    size_t n = eq ? (size_t)(eq - (o + 2)) : strlen(o + 2);
    if (o[1] == 'U' && eq != NULL)
      return -1;
    return cpu_ident_ok(o + 2, n) ? 1 : -1;
  }
  if (strncmp(o, "-std=", 5) == 0 || strncmp(o, "--std=", 6) == 0) {
    const char *v = o + (o[1] == '-' ? 6 : 5);
    for (size_t i = 0; i < sizeof(stds) / sizeof(stds[0]); i++) {
      if (strcmp(v, stds[i]) == 0) {
        *use = o[1] == '-' ? o + 1 : o; /* "--std=c++17" -> "-std=c++17" */
        return 1;
      }
    }
    return -1;
  }
  for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
    if (strcmp(o, ignored[i]) == 0)
      return 0;
  for (size_t i = 0; i < sizeof(ignored_prefix) / sizeof(ignored_prefix[0]);
       i++)
    if (strncmp(o, ignored_prefix[i], strlen(ignored_prefix[i])) == 0)
      return 0;
  return -1;
}

/* ------------------------------------------------------------- running */

static int write_file(const char *path, const char *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

  if (fd < 0)
    return -1;
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      close(fd);
      return -1;
    }
    data += w;
    len -= (size_t)w;
  }
  return close(fd);
}

/* The environment for the compiler: ours with messages in English, so that
 * diagnostics read the same everywhere. */
static char **child_env(void)
{
  size_t n = 0, k = 0;
  char **env;

  while (environ[n] != NULL)
    n++;
  env = calloc(n + 2, sizeof(*env));
  if (env == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LC_", 3) != 0 &&
        strncmp(environ[i], "LANG=", 5) != 0 &&
        strncmp(environ[i], "LANGUAGE=", 9) != 0)
      env[k++] = environ[i];
  env[k++] = "LC_ALL=C";
  env[k] = NULL;
  return env;
}

/* The compilers running now, by process group, so that a shutdown can
 * stop them (cpu_compile_stop_all); compiles run on libuv's pool. */
static struct {
  pthread_mutex_t lock;
  pid_t *groups;
  unsigned n, cap;
  int stopped; /* no compiler starts any more */
} running = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Record compiler group @p pid. @return 0, or HIPD_ESHUTDOWN (the group
 * was killed: hipd is stopping) or HIPD_ENOMEM. */
static int running_add(pid_t pid)
{
  int rc = 0;

  pthread_mutex_lock(&running.lock);
  if (running.stopped) {
    kill(-pid, SIGKILL);
    rc = HIPD_ESHUTDOWN;
  } else if (ARRAY_GROW(running.groups, running.n, running.cap, 8) != 0) {
    kill(-pid, SIGKILL);
    rc = HIPD_ENOMEM;
  }
  if (rc == 0)
    running.groups[running.n++] = pid;
  pthread_mutex_unlock(&running.lock);
  return rc;
}

static void running_remove(pid_t pid)
{
  pthread_mutex_lock(&running.lock);
  for (unsigned i = 0; i < running.n; i++)
    if (running.groups[i] == pid) {
      running.groups[i] = running.groups[--running.n];
      break;
    }
  pthread_mutex_unlock(&running.lock);
}

unsigned cpu_compile_stop_all(void)
{
  unsigned n;

  pthread_mutex_lock(&running.lock);
  running.stopped = 1;
  n = running.n;
  for (unsigned i = 0; i < running.n; i++)
    kill(-running.groups[i], SIGKILL);
  pthread_mutex_unlock(&running.lock);
  return n;
}

/* ------------------------------------------------------------ progress */

/* cpu_compile_set_idle_timeout(): /proc, listed to find a compiler's
 * processes, and the seconds without CPU time after which it is ended. */
static struct {
  pthread_mutex_t lock; /* proc's position is shared by the compiles */
  DIR *proc;
  unsigned idle_s; /* 0: never */
} idle = {.lock = PTHREAD_MUTEX_INITIALIZER};

int cpu_compile_set_idle_timeout(unsigned idle_s, hipd_err_t *err)
{
  int fd = -1, e, rc = 0;

  if (err != NULL)
    err_clear(err);
  pthread_mutex_lock(&idle.lock);
  idle.idle_s = 0;
  if (idle_s > 0 && idle.proc == NULL) {
    fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    idle.proc = fd >= 0 ? fdopendir(fd) : NULL;
    if (idle.proc == NULL) {
      e = errno;
      if (fd >= 0)
        close(fd);
      rc = err_set(err, HIPD_EIO,
                   "no compile idle timeout: cannot open /proc: %s",
                   strerror(e));
    }
  }
  if (rc == 0)
    idle.idle_s = idle_s;
  pthread_mutex_unlock(&idle.lock);
  return rc;
}

/*
 * The CPU time the processes of group @p pgid have used, in nanoseconds,
 * and in *n how many they are (0 when /proc could not be read: the group's
 * leader, not reaped yet, is always one of them). Each process's own clock
 * (clock_getcpuclockid) is read, not /proc/PID/stat: it needs no file
 * opened, so Landlock does not stand in the way, and it counts in
 * nanoseconds. A process that ends takes its time out of the sum: any
 * change, not only growth, is progress.
 */
static uint64_t group_cpu_ns(pid_t pgid, unsigned *n)
{
  struct dirent *de;
  uint64_t sum = 0;

  *n = 0;
  pthread_mutex_lock(&idle.lock);
  if (idle.proc != NULL) {
    rewinddir(idle.proc);
    while ((de = readdir(idle.proc)) != NULL) {
      char *end;
      long v;
      clockid_t clk;
      struct timespec ts;

      if (de->d_name[0] < '1' || de->d_name[0] > '9')
        continue;
      v = strtol(de->d_name, &end, 10);
      if (*end != '\0' || v > INT_MAX || getpgid((pid_t)v) != pgid)
        continue;
      (*n)++;
      if (clock_getcpuclockid((pid_t)v, &clk) == 0 &&
          clock_gettime(clk, &ts) == 0)
        sum += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
  }
  pthread_mutex_unlock(&idle.lock);
  return sum;
}

/* Read what the compiler wrote into @p fd (from its start) into @p outbuf,
 * MAX_CAPTURE bytes at most. */
static void read_output(int fd, strbuf_t *outbuf)
{
  char buf[4096];
  off_t at = 0;

  while (outbuf->len < MAX_CAPTURE) {
    ssize_t n = pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    strbuf_addn(outbuf, buf, (size_t)n);
    at += n;
  }
}

/*
 * Run @p argv with stdout and stderr into a file of its own in @p dir (the
 * compile's private directory), for at most @p timeout_s seconds, and
 * while its processes use CPU time (@p idle_s seconds without any: 0 for
 * no such limit); then its whole process group is killed. What it wrote
 * goes into @p outbuf. A file, not a pipe: a source that includes
 * /proc/self/fd/1 or 2 reads back what the compiler wrote so far and goes
 * on, where with a pipe it would wait on its own output, holding the
 * compile slot until the timeout. The file is unlinked at once, so
 * nothing of it outlives the compile.
 * @return 0 and the wait status in *status, 1 if it timed out, 2 if it
 *         was ended for making no progress, or a negative code if it could
 *         not be started (@p log says why).
 */
static int run_compiler(char *const *argv, const char *dir, unsigned timeout_s,
                        unsigned idle_s, strbuf_t *outbuf, int *status,
                        char *log, size_t logsz)
{
  sandbox_fd_t fds[2];
  sandbox_spawn_t so;
  hipd_err_t serr;
  char path[PATH_MAX];
  int ofd, e, stopped = 0; /* 1: timed out, 2: no progress */
  char **env;
  pid_t pid;
  int64_t start = (int64_t)util_now_ms();
  int64_t deadline = start + (int64_t)timeout_s * 1000;
  /* The group's CPU time at the last look, and since when it is so. */
  int64_t next_look = start + IDLE_LOOK_MS, still_since = start;
  uint64_t cpu_ns = 0;
  unsigned nprocs = 0;

  ofd = -1;
  errno = ENAMETOOLONG;
  if (snprintf(path, sizeof(path), "%s/output-XXXXXX", dir) < (int)sizeof(path))
    ofd = mkostemp(path, O_CLOEXEC);
  if (ofd < 0) {
    cpu_log_set(log, logsz, "cannot run the C++ compiler: %s: %s", path,
                strerror(errno));
    return HIPD_EIO;
  }
  unlink(path);
  env = child_env();
  if (env == NULL) {
    close(ofd);
    cpu_log_set(log, logsz, "out of memory");
    return HIPD_ENOMEM;
  }
  fds[0] = (sandbox_fd_t){ofd, STDOUT_FILENO};
  fds[1] = (sandbox_fd_t){ofd, STDERR_FILENO};
  so = (sandbox_spawn_t){.path = argv[0],
                         .argv = argv,
                         .envp = env,
                         .fds = fds,
                         .nfds = 2,
                         .stdin_null = true,
                         .own_group = true}; /* to kill cc1plus, as, ld too */
  e = sandbox_spawn(&so, &pid, &serr);
  free(env);
  if (e != 0) {
    close(ofd);
    cpu_log_set(log, logsz, "cannot run the C++ compiler %s: %s", argv[0],
                serr.msg);
    return HIPD_EIO;
  }
  if ((e = running_add(pid)) != 0) {
    close(ofd);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
      ;
    cpu_log_set(log, logsz, "%s",
                e == HIPD_ESHUTDOWN ? "hipd is stopping" : "out of memory");
    return e;
  }

  /* Wait for it without reaping it (WNOWAIT): until it is reaped its pid
   * cannot name another process group, so cpu_compile_stop_all() may kill
   * it meanwhile; it leaves the registry before the reap. The look is
   * 1 ms after the start, doubling to 20 ms: a short compile is seen
   * soon, a long one costs few wake-ups. Every IDLE_LOOK_MS its group's
   * CPU time is looked at: a group whose time has not changed for idle_s
   * seconds waits on something that does not come (a sleep, a read that
   * blocks), and is ended rather than hold its compile slot until the
   * timeout. */
  for (long nap_us = 1000;;) {
    siginfo_t si = {0};
    int w = waitid(P_PID, (id_t)pid, &si,
                   WEXITED | WNOWAIT | (stopped ? 0 : WNOHANG));
    if ((w == 0 && si.si_pid == pid) || (w < 0 && errno != EINTR))
      break;
    if (w == 0) {
      int64_t now = (int64_t)util_now_ms();
      if (now >= deadline) {
        stopped = 1;
        kill(-pid, SIGKILL);
        continue;
      }
      if (idle_s > 0 && now >= next_look) {
        unsigned n;
        uint64_t ns = group_cpu_ns(pid, &n);
        next_look = now + IDLE_LOOK_MS;
        if (n == 0 || ns != cpu_ns || n != nprocs) {
          cpu_ns = ns; /* progress, or nothing known */
          nprocs = n;
          still_since = now;
        } else if (now - still_since >= (int64_t)idle_s * 1000) {
          stopped = 2;
          kill(-pid, SIGKILL);
          continue;
        }
      }
      struct timespec ts = {0, nap_us * 1000};
      nanosleep(&ts, NULL);
      if (nap_us < 20000)
        nap_us *= 2;
    }
  }
  /* Any process of its group still running (one that left the compiler's
   * wait) writes no more of it: killed while the unreaped leader still
   * holds the group's id. */
  kill(-pid, SIGKILL);
  running_remove(pid);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR)
    ;
  read_output(ofd, outbuf);
  close(ofd);
  return stopped;
}

/* Copy the compiler's output to @p log without the private directory's
 * name, so that diagnostics read "kernel.hip:3:5: error: ...". */
static void log_output(const strbuf_t *o, const char *dir, char *log,
                       size_t logsz)
{
  size_t dl = strlen(dir), used = 0;
  const char *p = o->p ? o->p : "";

  if (log == NULL || logsz == 0)
    return;
  while (*p != '\0' && used + 1 < logsz) {
    if (strncmp(p, dir, dl) == 0 && p[dl] == '/') {
      p += dl + 1;
      continue;
    }
    log[used++] = *p++;
  }
  log[used] = '\0';
  if (*p != '\0' && logsz > 5)
    memcpy(log + logsz - 5, "...\n", 5); /* truncated */
}

static void remove_dir(const char *dir)
{
  char path[PATH_MAX];

  snprintf(path, sizeof(path), "%s/" SRC_NAME, dir);
  unlink(path);
  snprintf(path, sizeof(path), "%s/" SO_NAME, dir);
  unlink(path);
  rmdir(dir);
}

int cpu_compile(const cpu_compile_cfg_t *cfg, const char *source, size_t len,
                const char *const *kernel_names, size_t nkernels,
                const char *const *options, size_t nopts, char **so_path_out,
                char *log, size_t logsz)
{
  cpu_compile_cfg_t dflt = {0};
  const char *cxx, *header, *tmpdir;
  strbuf_t src = {0}, out = {0};
  char dir[PATH_MAX], srcpath[PATH_MAX + 16], sopath[PATH_MAX + 16];
  const char **argv = NULL;
  size_t argc = 0;
  int rc, st = 0, have_dir = 0;
  unsigned timeout_s, idle_s;

  if (log != NULL && logsz > 0)
    log[0] = '\0';
  if (cfg == NULL)
    cfg = &dflt;
  if (source == NULL || memchr(source, '\0', len) != NULL) {
    cpu_log_set(log, logsz, "the kernel source contains a NUL byte");
    return HIPD_EINVAL;
  }
  if (nkernels == 0) {
    cpu_log_set(log, logsz, "no kernel names given");
    return HIPD_EINVAL;
  }
  for (size_t i = 0; i < nkernels; i++) {
    if (kernel_names[i] == NULL || !name_ok(kernel_names[i])) {
      cpu_log_set(log, logsz,
                  "'%s' is not a kernel name (a C++ function name, optionally "
                  "qualified or with template arguments)",
                  kernel_names[i] ? kernel_names[i] : "(null)");
      return HIPD_EINVAL;
    }
  }
  argv = calloc(nopts + 24, sizeof(*argv));
  if (argv == NULL) {
    cpu_log_set(log, logsz, "out of memory");
    return HIPD_ENOMEM;
  }

  cxx = cfg->cxx != NULL ? cfg->cxx : cpu_compile_compiler();
  if (cxx == NULL || (cfg->cxx != NULL && access(cxx, X_OK) != 0)) {
    cpu_log_set(
        log, logsz,
        "no C++ compiler for the CPU device (tried %s): kernels cannot be "
        "compiled on it; install g++ or set HIPD_CXX",
        cfg->cxx ? cfg->cxx
        : getenv("HIPD_CXX") && getenv("HIPD_CXX")[0]
            ? "$HIPD_CXX"
            : "c++, g++, clang++ on $PATH");
    rc = HIPD_ENOTSUP;
    goto fail;
  }
  header = cfg->header;
  if (header == NULL && (header = getenv("HIPD_CPU_HEADER")) != NULL &&
      header[0] == '\0')
    header = NULL;
  if (header == NULL)
    header = HEADER_DEFAULT;
  if (access(header, R_OK) != 0) {
    cpu_log_set(log, logsz, "the CPU device header %s is missing: %s", header,
                strerror(errno));
    rc = HIPD_ENOENT;
    goto fail;
  }
  tmpdir = cfg->tmpdir;
  if (tmpdir == NULL &&
      ((tmpdir = getenv("TMPDIR")) == NULL || tmpdir[0] != '/'))
    tmpdir = "/tmp";
  timeout_s = cfg->timeout_s ? cfg->timeout_s : DEFAULT_TIMEOUT_S;

  argv[argc++] = cxx;
  argv[argc++] = "-std=c++17";
  argv[argc++] = "-O2";
  argv[argc++] = "-fPIC";
  argv[argc++] = "-shared";
  argv[argc++] = "-fvisibility=hidden";
  argv[argc++] = "-include";
  argv[argc++] = header;
  for (size_t i = 0; i < nopts; i++) {
    const char *use;
    int ok = options[i] ? option_check(options[i], &use) : -1;
    if (ok < 0) {
      cpu_log_set(log, logsz,
                  "compiler option '%s' is not allowed on the CPU device "
                  "(allowed: -D, -U, -O0..-O3, -Os, -Ofast, -ffast-math, "
                  "-ffp-contract=off|on|fast, --fmad=true|false, "
                  "-std=c++17 or later, -g, -w, -Wall, -Wextra, -Werror, "
                  "-march=native; see cpu_compile.h)",
                  options[i] ? options[i] : "(null)");
      rc = HIPD_EINVAL;
      goto fail;
    }
    if (ok > 0)
      argv[argc++] = use;
  }

  rc = cpu_source_transform(source, len, &src, log, logsz);
  if (rc != 0)
    goto fail;
  cpu_source_tail(&src, kernel_names, nkernels);
  if (src.oom) {
    cpu_log_set(log, logsz, "out of memory");
    rc = HIPD_ENOMEM;
    goto fail;
  }

  if (snprintf(dir, sizeof(dir), "%s/hipd-cpu-XXXXXX", tmpdir) >=
          (int)sizeof(dir) ||
      mkdtemp(dir) == NULL) {
    cpu_log_set(log, logsz, "cannot create a directory in %s: %s", tmpdir,
                strerror(errno));
    rc = HIPD_EIO;
    goto fail;
  }
  have_dir = 1;
  snprintf(srcpath, sizeof(srcpath), "%s/" SRC_NAME, dir);
  snprintf(sopath, sizeof(sopath), "%s/" SO_NAME, dir);
  if (write_file(srcpath, src.p, src.len) != 0) {
    cpu_log_set(log, logsz, "cannot write %s: %s", srcpath, strerror(errno));
    rc = HIPD_EIO;
    goto fail;
  }
  argv[argc++] = "-Wl,-z,defs"; /* undefined symbols fail here, not later */
  argv[argc++] = "-x";
  argv[argc++] = "c++";
  argv[argc++] = srcpath;
  argv[argc++] = "-o";
  argv[argc++] = sopath;
  argv[argc] = NULL;

  pthread_mutex_lock(&idle.lock);
  idle_s = idle.idle_s;
  pthread_mutex_unlock(&idle.lock);
  rc = run_compiler((char *const *)argv, dir, timeout_s, idle_s, &out, &st, log,
                    logsz);
  if (rc < 0)
    goto fail;
  log_output(&out, dir, log, logsz);
  if (rc > 0) {
    size_t used = log ? strlen(log) : 0;
    const char *nl = used && log[used - 1] != '\n' ? "\n" : "";
    if (log != NULL && used + 1 < logsz && rc == 1)
      snprintf(log + used, logsz - used, "%scompilation timed out after %u s\n",
               nl, timeout_s);
    else if (log != NULL && used + 1 < logsz)
      snprintf(log + used, logsz - used,
               "%scompile made no progress for %u s (no CPU time used): "
               "ended (--compile-idle-timeout)\n",
               nl, idle_s);
    rc = HIPD_ECOMPILE;
    goto fail;
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || access(sopath, R_OK) != 0) {
    if (log != NULL && log[0] == '\0') {
      if (WIFSIGNALED(st))
        cpu_log_set(log, logsz, "the C++ compiler was killed by signal %d",
                    WTERMSIG(st));
      else
        cpu_log_set(log, logsz, "the C++ compiler failed (exit status %d)",
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    rc = HIPD_ECOMPILE;
    goto fail;
  }
  unlink(srcpath);
  *so_path_out = strdup(sopath);
  if (*so_path_out == NULL) {
    cpu_log_set(log, logsz, "out of memory");
    rc = HIPD_ENOMEM;
    goto fail;
  }
  free(src.p);
  free(out.p);
  free(argv);
  return 0;

fail:
  if (have_dir)
    remove_dir(dir);
  free(src.p);
  free(out.p);
  free(argv);
  return rc;
}

void cpu_compile_free(char *so_path)
{
  char *slash;

  if (so_path == NULL)
    return;
  unlink(so_path);
  slash = strrchr(so_path, '/');
  if (slash != NULL) {
    *slash = '\0';
    rmdir(so_path);
  }
  free(so_path);
}
