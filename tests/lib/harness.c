/* SPDX-License-Identifier: MIT */
/* tests/lib/harness.c: start, probe and stop real hipd daemons for the
 * integration tests (see harness.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util/clock.h"

#define MAX_ARGS 64
#define READY_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS 15000
#define LOG_TAIL 8192

int harness_journal_stream;
static harness_daemon_t *running; /* started and not yet freed */
static int atexit_set;
static char base_dir[160]; /* harness_init()'s directory, or "" */
static pid_t base_owner;

/* Directories made by harness_temp_path(), removed at exit. */
#define TEMP_PATHS 16
static struct {
  pid_t owner;
  char dir[256];
  char path[300];
} temps[TEMP_PATHS];

long long harness_now_ms(void)
{
  return (long long)util_now_ms();
}

void harness_sleep_ms(int ms)
{
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Kill what this process started and did not stop: the test failed (check
 * runs a failing test's child to exit()) or forgot. The log goes to stderr,
 * which the test's own log keeps, and the files go. Daemons of another
 * process (a fixture of check's runner, a forked client's parent) are left
 * to it. */
static void cleanup_at_exit(void)
{
  pid_t me = getpid();
  harness_daemon_t *d = running, *next;

  for (; d != NULL; d = next) {
    next = d->next;
    if (d->owner != me)
      continue;
    if (d->pid != 0) {
      fprintf(stderr, "harness: killing hipd (pid %d), left running\n",
              (int)d->pid);
      harness_log_dump(d);
    }
    harness_free(d);
  }
  for (int i = 0; i < TEMP_PATHS; i++) {
    if (temps[i].owner != me)
      continue;
    unlink(temps[i].path);
    rmdir(temps[i].dir);
    temps[i].owner = 0;
  }
}

static void ensure_atexit(void)
{
  if (!atexit_set) {
    atexit(cleanup_at_exit);
    atexit_set = 1;
  }
}

/* The directory temporary files go under: $HIPD_TEST_TMP, unless it is
 * too long for socket paths (sun_path holds 108 bytes), else /tmp. */
static const char *tmp_root(void)
{
  const char *root = getenv("HIPD_TEST_TMP");

  return root != NULL && root[0] != '\0' && strlen(root) <= 48 ? root : "/tmp";
}

/* Make a private directory for a daemon or a test socket, inside
 * harness_init()'s directory if there is one. */
static int make_dir(char *dir, size_t size)
{
  if (base_dir[0] != '\0')
    snprintf(dir, size, "%s/d-XXXXXX", base_dir);
  else
    snprintf(dir, size, "%s/hipd-XXXXXX", tmp_root());
  if (mkdtemp(dir) != NULL)
    return 0;
  fprintf(stderr, "harness: mkdtemp %s: %s\n", dir, strerror(errno));
  return -1;
}

int harness_init(const char *name)
{
  /* As root, hipd's workers run as its own account (--user, "hipd"):
   * make it on a machine that has none yet, as the packages would. */
  if (geteuid() == 0 && getpwnam("hipd") == NULL &&
      system("useradd --system -M -N -s /usr/sbin/nologin hipd "
             ">/dev/null 2>&1") != 0)
    fprintf(stderr, "harness: cannot create the account hipd (useradd)\n");
  snprintf(base_dir, sizeof(base_dir), "%s/%s-XXXXXX", tmp_root(), name);
  if (mkdtemp(base_dir) == NULL) {
    fprintf(stderr, "harness: mkdtemp %s: %s\n", base_dir, strerror(errno));
    base_dir[0] = '\0';
    return -1;
  }
  base_owner = getpid();
  return 0;
}

static void dump_file(const char *path);

/* Dump the log of a daemon directory left behind, then remove it. */
static void fini_dir(const char *dir)
{
  char path[512];
  DIR *dh = opendir(dir);
  struct dirent *e;

  if (dh == NULL)
    return;
  while ((e = readdir(dh)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
        (int)sizeof(path))
      continue;
    if (strcmp(e->d_name, "hipd.log") == 0) {
      fprintf(stderr, "harness: the log of a daemon a failed test left:\n");
      dump_file(path);
    }
    unlink(path);
  }
  closedir(dh);
  rmdir(dir);
}

void harness_fini(void)
{
  char path[512];
  struct dirent *e;
  DIR *dh;

  if (base_dir[0] == '\0' || base_owner != getpid())
    return;
  cleanup_at_exit();
  dh = opendir(base_dir);
  if (dh != NULL) {
    while ((e = readdir(dh)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      if (snprintf(path, sizeof(path), "%s/%s", base_dir, e->d_name) <
          (int)sizeof(path))
        fini_dir(path);
    }
    closedir(dh);
  }
  rmdir(base_dir);
  base_dir[0] = '\0';
}

const char *harness_temp_path(const char *name)
{
  for (int i = 0; i < TEMP_PATHS; i++) {
    if (temps[i].owner != 0)
      continue;
    char dir[sizeof(temps[i].dir)];
    if (make_dir(dir, sizeof(dir)) != 0)
      return NULL;
    memcpy(temps[i].dir, dir, sizeof(dir));
    snprintf(temps[i].path, sizeof(temps[i].path), "%s/%s", dir, name);
    temps[i].owner = getpid();
    ensure_atexit();
    return temps[i].path;
  }
  fprintf(stderr, "harness: too many temporary paths\n");
  return NULL;
}

static const char *hipd_bin(void)
{
  const char *bin = getenv("HIPD_BIN");

  return bin != NULL && bin[0] != '\0' ? bin : "./hipd";
}

/* In the child between fork and exec: die with the parent, log to the
 * file, default signals, no inherited descriptors. Never returns. */
static void child_exec(const harness_daemon_t *d, pid_t parent,
                       const char *const *argv)
{
  sigset_t none;
  int fd;

  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(127); /* the parent is already gone */
  fd = open("/dev/null", O_RDONLY);
  if (fd >= 0) {
    dup2(fd, 0);
    close(fd);
  }
  fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  if (harness_journal_stream) {
    struct stat st;
    char v[64];
    if (fstat(2, &st) == 0) {
      snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
               (unsigned long long)st.st_ino);
      setenv("JOURNAL_STREAM", v, 1);
    }
  }
  /* HIPD_TEST_CGROUP=DIR: start the daemon alone in that cgroup2 group,
   * as systemd's Delegate= would (check_privsep's cgroup tests). */
  {
    const char *cg = getenv("HIPD_TEST_CGROUP");
    char procs[4200];
    if (cg != NULL && cg[0] != '\0' &&
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg) <
            (int)sizeof(procs) &&
        (fd = open(procs, O_WRONLY)) >= 0) {
      if (write(fd, "0", 1) != 1)
        _exit(126);
      close(fd);
    }
  }
  for (int i = 3; i < 1024; i++)
    close(i);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execv(argv[0], (char *const *)argv);
  fprintf(stderr, "harness: exec %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

/* Whether @p args name a cache directory. */
static int has_cache_dir(const char *const *args)
{
  for (int i = 0; args != NULL && args[i] != NULL; i++)
    if (strcmp(args[i], "--cache-dir") == 0 ||
        strncmp(args[i], "--cache-dir=", 12) == 0)
      return 1;
  return 0;
}

harness_daemon_t *harness_spawn(const char *socket_path,
                                const char *const *args)
{
  const char *argv[MAX_ARGS + 7];
  harness_daemon_t *d = calloc(1, sizeof(*d));
  pid_t parent = getpid();
  int n = 0;

  if (d == NULL)
    return NULL;
  if (make_dir(d->dir, sizeof(d->dir)) != 0) {
    free(d);
    return NULL;
  }
  snprintf(d->log, sizeof(d->log), "%s/hipd.log", d->dir);
  if (socket_path != NULL)
    snprintf(d->socket, sizeof(d->socket), "%s", socket_path);
  else
    snprintf(d->socket, sizeof(d->socket), "%s/hipd.sock", d->dir);
  argv[n++] = hipd_bin();
  argv[n++] = "--socket";
  argv[n++] = d->socket;
  /* No hipd.conf of the machine's: a test that wants a file gives
   * --config FILE, which comes after and wins. */
  argv[n++] = "--no-config";
  /* Never the machine's kernel cache (/var/cache/hipd as root): a test
   * that wants a disk cache names a directory of its own. */
  if (!has_cache_dir(args)) {
    argv[n++] = "--cache-dir";
    argv[n++] = "";
  }
  for (int i = 0; args != NULL && args[i] != NULL && i < MAX_ARGS; i++)
    argv[n++] = args[i];
  argv[n] = NULL;

  ensure_atexit();
  d->owner = parent;
  d->pid = fork();
  if (d->pid < 0) {
    fprintf(stderr, "harness: fork: %s\n", strerror(errno));
    rmdir(d->dir);
    free(d);
    return NULL;
  }
  if (d->pid == 0)
    child_exec(d, parent, argv);
  d->next = running;
  running = d;
  return d;
}

/* Reap @p d if it has exited; with @p block, wait for it. @return 1 once
 * reaped (now or before), else 0. */
static int reap(harness_daemon_t *d, int block)
{
  pid_t r;

  if (d->pid == 0)
    return 1;
  do
    r = waitpid(d->pid, &d->status, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == d->pid || (r < 0 && errno == ECHILD)) {
    d->pid = 0;
    return 1;
  }
  return 0;
}

static int exit_code(const harness_daemon_t *d)
{
  if (WIFEXITED(d->status))
    return WEXITSTATUS(d->status);
  if (WIFSIGNALED(d->status))
    return 128 + WTERMSIG(d->status);
  return -1;
}

int harness_wait_ready(harness_daemon_t *d, int timeout_ms)
{
  long long deadline = harness_now_ms() + timeout_ms;

  for (;;) {
    int fd;

    if (reap(d, 0))
      return -1;
    fd = harness_raw_connect(d->socket);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    if (harness_now_ms() >= deadline)
      return -1;
    harness_sleep_ms(10);
  }
}

int harness_wait_exit(harness_daemon_t *d, int timeout_ms)
{
  long long deadline = harness_now_ms() + timeout_ms;

  while (!reap(d, 0)) {
    if (harness_now_ms() >= deadline)
      return -1;
    harness_sleep_ms(10);
  }
  return exit_code(d);
}

harness_daemon_t *harness_startv(const char *const *args)
{
  harness_daemon_t *d = harness_spawn(NULL, args);

  if (d == NULL)
    return NULL;
  if (harness_wait_ready(d, READY_TIMEOUT_MS) != 0) {
    fprintf(stderr, "harness: hipd did not start (%s); its log:\n",
            d->pid == 0 ? "it exited" : "no connection accepted");
    harness_log_dump(d);
    harness_free(d);
    return NULL;
  }
  return d;
}

harness_daemon_t *harness_start(const char *arg, ...)
{
  const char *args[MAX_ARGS + 1];
  va_list ap;
  int n = 0;

  va_start(ap, arg);
  for (const char *a = arg; a != NULL && n < MAX_ARGS; a = va_arg(ap, char *))
    args[n++] = a;
  va_end(ap);
  args[n] = NULL;
  return harness_startv(args);
}

int harness_stop(harness_daemon_t *d)
{
  int code;

  if (d->pid == 0)
    return exit_code(d);
  kill(d->pid, SIGTERM);
  code = harness_wait_exit(d, STOP_TIMEOUT_MS);
  if (code == -1) {
    fprintf(stderr, "harness: hipd (pid %d) ignored SIGTERM; killing it\n",
            (int)d->pid);
    harness_log_dump(d);
    harness_kill(d);
    return -1;
  }
  return code;
}

void harness_kill(harness_daemon_t *d)
{
  if (d->pid == 0)
    return;
  kill(d->pid, SIGKILL);
  reap(d, 1);
}

void harness_free(harness_daemon_t *d)
{
  harness_daemon_t **p;

  if (d == NULL)
    return;
  harness_kill(d);
  for (p = &running; *p != NULL; p = &(*p)->next) {
    if (*p == d) {
      *p = d->next;
      break;
    }
  }
  unlink(d->log);
  if (strncmp(d->socket, d->dir, strlen(d->dir)) == 0)
    unlink(d->socket);
  rmdir(d->dir);
  free(d);
}

/* ------------------------------------------------------------------ logs */

/* The whole file, malloc'd and NUL-terminated, or NULL. */
static char *file_read(const char *path, size_t *len)
{
  FILE *f = fopen(path, "r");
  char *buf = NULL;
  size_t cap = 0, n = 0;

  if (f == NULL)
    return NULL;
  for (;;) {
    if (cap - n < 4096) {
      char *nb = realloc(buf, cap + 65536);
      if (nb == NULL)
        break;
      buf = nb;
      cap += 65536;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    if (r == 0)
      break;
    n += r;
  }
  fclose(f);
  if (buf != NULL)
    buf[n] = '\0';
  *len = n;
  return buf;
}

int harness_log_contains(const harness_daemon_t *d, const char *needle)
{
  size_t len = 0;
  char *text = file_read(d->log, &len);
  int found = text != NULL && strstr(text, needle) != NULL;

  free(text);
  return found;
}

int harness_log_count(const harness_daemon_t *d, const char *needle)
{
  size_t len = 0;
  char *text = file_read(d->log, &len);
  int n = 0;

  for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL;
       p += strlen(needle))
    n++;
  free(text);
  return n;
}

int harness_log_wait(const harness_daemon_t *d, const char *needle,
                     int timeout_ms)
{
  long long deadline = harness_now_ms() + timeout_ms;

  while (!harness_log_contains(d, needle)) {
    if (harness_now_ms() >= deadline)
      return 0;
    harness_sleep_ms(20);
  }
  return 1;
}

/* Print the file at @p path (its tail if long) to stderr. */
static void dump_file(const char *path)
{
  size_t len = 0;
  char *text = file_read(path, &len);

  if (text == NULL)
    return;
  fprintf(stderr, "----- %s%s -----\n%s----- end of log -----\n", path,
          len > LOG_TAIL ? " (tail)" : "",
          len > LOG_TAIL ? text + len - LOG_TAIL : text);
  free(text);
}

void harness_log_dump(const harness_daemon_t *d)
{
  dump_file(d->log);
}

/* ---------------------------------------------------------- raw sockets */

int harness_raw_connect(const char *path)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd;

  if (strlen(path) >= sizeof(sa.sun_path))
    return -1;
  strcpy(sa.sun_path, path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int harness_raw_send(int fd, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int harness_raw_wait_closed(int fd, int timeout_ms)
{
  long long deadline = harness_now_ms() + timeout_ms;
  char buf[65536];

  for (;;) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    long long left = deadline - harness_now_ms();
    int n;

    if (left <= 0)
      return 0;
    n = poll(&pfd, 1, (int)left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return 0;
    ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
      return 1;
  }
}

/* ------------------------------------------------------------ other users */

int harness_share_socket(const harness_daemon_t *d)
{
  if (base_dir[0] != '\0' && chmod(base_dir, 0711) != 0)
    return -1;
  return chmod(d->dir, 0711);
}

int harness_become(const char *user)
{
  struct passwd *pw = getpwnam(user);

  if (pw == NULL) {
    errno = ENOENT;
    return -1;
  }
  if (initgroups(user, pw->pw_gid) != 0 ||
      setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
      setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0 ||
      getuid() != pw->pw_uid)
    return -1;
  return 0;
}

typedef struct {
  int rc;
  char msg[1024];
} run_as_result_t;

int harness_run_as(const char *user,
                   int (*fn)(void *arg, char *msg, size_t msglen), void *arg,
                   char *msg, size_t msglen)
{
  run_as_result_t r = {.rc = -1};
  struct passwd *pw = getpwnam(user);
  int p[2], status;
  ssize_t n, got = 0;
  pid_t pid;

  snprintf(msg, msglen, "%s", "");
  if (pw == NULL) {
    snprintf(msg, msglen, "no user %s", user);
    return -1;
  }
  if (pipe(p) != 0) {
    snprintf(msg, msglen, "pipe: %s", strerror(errno));
    return -1;
  }
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    snprintf(msg, msglen, "fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[0]);
    if (harness_become(user) != 0) {
      snprintf(r.msg, sizeof(r.msg), "cannot become %s: %s", user,
               strerror(errno));
      r.rc = -1;
    } else {
      r.rc = fn(arg, r.msg, sizeof(r.msg));
    }
    if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
      _exit(2);
    /* _exit: the child must not run the harness's atexit handler, which
     * would kill the daemons its parent started. */
    _exit(0);
  }
  close(p[1]);
  while (got < (ssize_t)sizeof(r) &&
         ((n = read(p[0], (char *)&r + got, sizeof(r) - (size_t)got)) > 0 ||
          (n < 0 && errno == EINTR)))
    got += n > 0 ? n : 0;
  close(p[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (got != (ssize_t)sizeof(r)) {
    snprintf(msg, msglen, "the child running as %s died (status 0x%x)", user,
             status);
    return -1;
  }
  snprintf(msg, msglen, "%s", r.msg);
  return r.rc;
}
