/* SPDX-License-Identifier: MIT */
/* bench/procs.c: see procs.h. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "procs.h"

extern char **environ;

/* Children not yet reaped, for procs_kill_all(): a pid, negated for a
 * process group. Written only outside signal handlers, read in them. */
#define MAX_CHILDREN 512
static volatile pid_t children[MAX_CHILDREN];

static void record(pid_t pid, int group)
{
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i] == 0) {
      children[i] = group ? -pid : pid;
      return;
    }
}

static void forget(pid_t pid)
{
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i] == pid || children[i] == -pid)
      children[i] = 0;
}

void procs_kill_all(void)
{
  for (int i = 0; i < MAX_CHILDREN; i++) {
    pid_t pid = children[i];

    if (pid != 0) {
      kill(pid, SIGKILL);
      if (pid < 0)
        kill(-pid, SIGKILL); /* the leader, if it left its group */
    }
  }
}

void procs_reap_killed(int ms)
{
  for (int i = 0; i < ms / 10; i++) {
    struct timespec ts = {0, 10000000};
    pid_t r;

    while ((r = waitpid(-1, NULL, WNOHANG)) > 0)
      ;
    if (r < 0 && errno == ECHILD)
      return;
    nanosleep(&ts, NULL);
  }
}

/* In a new child: die with the bench, default signal handling. */
static void child_setup(pid_t parent, int own_group)
{
  sigset_t none;

  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(127); /* the bench is already gone */
  if (own_group)
    setpgid(0, 0);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGALRM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  alarm(0);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* In a new child: close every descriptor from 3 up but @p keep (-1 for
 * none), so that no pipe or socket of the bench's stays open in it (a
 * pipe the bench closes must reach end of file in its reader). */
static void close_fds(int keep)
{
  int fds[1024], n = 0, dfd;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;

  if (d == NULL) {
    for (int fd = 3; fd < 1024; fd++)
      if (fd != keep)
        close(fd);
    return;
  }
  dfd = dirfd(d);
  while ((e = readdir(d)) != NULL && n < 1024) {
    int fd = atoi(e->d_name);

    if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd >= 3 && fd != dfd &&
        fd != keep)
      fds[n++] = fd;
  }
  closedir(d);
  for (int i = 0; i < n; i++)
    close(fds[i]);
}

/* environ plus @p extra, whose names replace environ's; malloc'd. */
static char **env_merge(const char *const *extra)
{
  size_t n = 0, m = 0, k = 0;
  char **env;

  while (environ[n] != NULL)
    n++;
  while (extra != NULL && extra[m] != NULL)
    m++;
  env = malloc(sizeof(*env) * (n + m + 1));
  if (env == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;

    for (size_t j = 0; j < m; j++) {
      size_t len = strcspn(extra[j], "=");
      if (strncmp(environ[i], extra[j], len) == 0 && environ[i][len] == '=')
        replaced = 1;
    }
    if (!replaced)
      env[k++] = environ[i];
  }
  for (size_t j = 0; j < m; j++)
    env[k++] = (char *)extra[j];
  env[k] = NULL;
  return env;
}

static void proc_reset(proc_t *p)
{
  memset(p, 0, sizeof(*p));
  p->in_fd = -1;
  p->out_fd = -1;
}

int proc_spawn(proc_t *p, const char *const *argv, const char *const *env_extra,
               const char *log_path, int own_group)
{
  int in[2] = {-1, -1}, out[2] = {-1, -1}, e;
  pid_t parent = getpid();
  char **env = env_merge(env_extra);

  proc_reset(p);
  if (env == NULL)
    return -1;
  if (log_path == NULL &&
      (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0))
    goto fail;
  p->pid = fork();
  if (p->pid < 0)
    goto fail;
  if (p->pid == 0) {
    int fd;

    child_setup(parent, own_group);
    if (log_path != NULL) {
      fd = open("/dev/null", O_RDONLY);
      if (fd >= 0 && fd != 0) {
        dup2(fd, 0);
        close(fd);
      }
      fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    } else {
      dup2(in[0], 0);
      dup2(out[1], 1);
    }
    close_fds(-1);
    execve(argv[0], (char *const *)argv, env);
    fprintf(stderr, "hipd_bench: cannot run %s: %s\n", argv[0],
            strerror(errno));
    _exit(127);
  }
  free(env);
  if (own_group)
    setpgid(p->pid, p->pid); /* also here: no race with kill(-pid) */
  p->own_group = own_group;
  record(p->pid, own_group);
  if (log_path == NULL) {
    close(in[0]);
    close(out[1]);
    p->in_fd = in[1];
    p->out_fd = out[0];
  }
  return 0;
fail:
  e = errno;
  free(env);
  for (int i = 0; i < 2; i++) {
    if (in[i] >= 0)
      close(in[i]);
    if (out[i] >= 0)
      close(out[i]);
  }
  p->pid = 0;
  errno = e;
  return -1;
}

int proc_fork(proc_t *p, int (*fn)(void *arg, int in_fd, int out_fd), void *arg,
              int keep_fd)
{
  int in[2], out[2];
  pid_t parent = getpid();

  proc_reset(p);
  if (pipe2(in, O_CLOEXEC) != 0)
    return -1;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return -1;
  }
  fflush(NULL); /* no buffered output printed twice */
  p->pid = fork();
  if (p->pid < 0) {
    int e = errno;
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    p->pid = 0;
    errno = e;
    return -1;
  }
  if (p->pid == 0) {
    child_setup(parent, 0);
    if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
      _exit(127);
    close_fds(keep_fd);
    _exit(fn(arg, 0, 1));
  }
  record(p->pid, 0);
  close(in[0]);
  close(out[1]);
  p->in_fd = in[1];
  p->out_fd = out[0];
  return 0;
}

int proc_readline(proc_t *p, char *line, size_t size, double deadline)
{
  for (;;) {
    char *nl = memchr(p->buf, '\n', p->len);
    struct pollfd pfd;
    double left;
    ssize_t n;
    int r;

    if (nl != NULL || p->len == sizeof(p->buf)) {
      size_t len = nl ? (size_t)(nl - p->buf) : p->len;
      size_t take = len < size - 1 ? len : size - 1;

      memcpy(line, p->buf, take);
      line[take] = '\0';
      len += nl != NULL;
      memmove(p->buf, p->buf + len, p->len - len);
      p->len -= len;
      return 1;
    }
    if (p->out_fd < 0)
      return 0;
    left = deadline - bu_now();
    if (left <= 0)
      return -1;
    pfd.fd = p->out_fd;
    pfd.events = POLLIN;
    r = poll(&pfd, 1, left > 3600 ? 3600000 : (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -1;
    if (r == 0)
      continue; /* the deadline is checked above */
    n = read(p->out_fd, p->buf + p->len, sizeof(p->buf) - p->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      close(p->out_fd);
      p->out_fd = -1;
      if (p->len > 0) { /* a last line without its newline */
        size_t take = p->len < size - 1 ? p->len : size - 1;
        memcpy(line, p->buf, take);
        line[take] = '\0';
        p->len = 0;
        return 1;
      }
      return 0;
    }
    p->len += (size_t)n;
  }
}

int proc_write(proc_t *p, const char *s)
{
  size_t len = strlen(s);

  while (len > 0) {
    ssize_t n;

    if (p->in_fd < 0)
      return -1;
    n = write(p->in_fd, s, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    s += n;
    len -= (size_t)n;
  }
  return 0;
}

void proc_close_pipes(proc_t *p)
{
  if (p->in_fd >= 0)
    close(p->in_fd);
  if (p->out_fd >= 0)
    close(p->out_fd);
  p->in_fd = p->out_fd = -1;
}

/* Reap the child if it has exited (or, with @p block, when it does).
 * @return 1 once reaped, else 0. */
static int reap(proc_t *p, int block)
{
  pid_t r;

  if (p->pid == 0)
    return 1;
  do
    r = waitpid(p->pid, &p->status, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == p->pid || (r < 0 && errno == ECHILD)) {
    forget(p->pid);
    p->pid = 0;
    return 1;
  }
  return 0;
}

static int exit_code(const proc_t *p)
{
  if (WIFEXITED(p->status))
    return WEXITSTATUS(p->status);
  if (WIFSIGNALED(p->status))
    return 128 + WTERMSIG(p->status);
  return -1;
}

int proc_poll(proc_t *p)
{
  return reap(p, 0);
}

void proc_signal(proc_t *p, int sig)
{
  if (p->pid != 0)
    kill(p->own_group ? -p->pid : p->pid, sig);
}

void proc_kill(proc_t *p)
{
  proc_close_pipes(p);
  if (p->pid == 0)
    return;
  proc_signal(p, SIGKILL);
  kill(p->pid, SIGKILL);
  reap(p, 1);
}

int proc_wait(proc_t *p, double timeout)
{
  double deadline = bu_now() + timeout;

  proc_close_pipes(p);
  while (!reap(p, 0)) {
    if (bu_now() >= deadline) {
      proc_kill(p);
      return -1;
    }
    bu_sleep(0.005);
  }
  return exit_code(p);
}

/* Run @p argv with @p envp, stdin from @p input (or /dev/null), and wait
 * up to @p seconds. Async-signal-safe. */
void procs_run_safely(char *const *argv, char *const *envp, const char *input,
                      int seconds)
{
  int fds[2] = {-1, -1};
  pid_t pid;

  if (input != NULL && pipe(fds) != 0)
    return;
  pid = fork();
  if (pid == 0) {
    if (fds[0] >= 0) {
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
    }
    execve(argv[0], argv, envp);
    _exit(127);
  }
  if (fds[0] >= 0) {
    ssize_t r;

    close(fds[0]);
    if (pid > 0)
      r = write(fds[1], input, strlen(input));
    (void)r;
    close(fds[1]);
  }
  if (pid < 0)
    return;
  for (int i = 0; i < seconds * 20; i++) {
    struct timespec ts = {0, 50000000};

    if (waitpid(pid, NULL, WNOHANG) == pid)
      return;
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* --------------------------------------------- the system's processes */

/* See procs.h. */
int procs_survey(pinfo_t *ps, int max)
{
  DIR *d = opendir("/proc");
  long tick = sysconf(_SC_CLK_TCK);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return 0;
  while ((e = readdir(d)) != NULL && n < max) {
    char path[300], buf[1024], *open_paren, *close_paren;
    unsigned long long ut, st;
    FILE *f;
    size_t len;

    if (!isdigit((unsigned char)e->d_name[0]))
      continue;
    snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    if ((f = fopen(path, "r")) == NULL)
      continue;
    len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* pid (comm) state ppid ...: comm may hold spaces and parentheses */
    open_paren = strchr(buf, '(');
    close_paren = strrchr(buf, ')');
    if (open_paren == NULL || close_paren == NULL || close_paren < open_paren ||
        close_paren[1] == '\0')
      continue;
    ps[n].pid = atol(buf);
    snprintf(ps[n].comm, sizeof(ps[n].comm), "%.*s",
             (int)(close_paren - open_paren - 1), open_paren + 1);
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime cutime cstime priority nice num_threads */
    if (sscanf(close_paren + 2,
               "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d "
               "%*d %*d %*d %ld",
               &ps[n].ppid, &ut, &st, &ps[n].threads) != 4)
      continue;
    ps[n].cpu_ns = (uint64_t)((double)(ut + st) * 1e9 / (double)tick);
    n++;
  }
  closedir(d);
  return n;
}

/* See procs.h. */
int procs_under(const pinfo_t *ps, int n, long pid, long root)
{
  for (int depth = 0; depth < 64 && pid > 0; depth++) {
    if (pid == root)
      return 1;
    long parent = -1;
    for (int i = 0; i < n; i++)
      if (ps[i].pid == pid) {
        parent = ps[i].ppid;
        break;
      }
    pid = parent;
  }
  return 0;
}

/* See procs.h. */
void procs_total(const pinfo_t *ps, int n, long root, const pid_t *pids,
                 int npids, uint64_t *cpu_ns, long *threads)
{
  uint64_t sum = 0;
  long nthreads = 0;

  for (int i = 0; i < n; i++) {
    int take = root > 0 && procs_under(ps, n, ps[i].pid, root);

    for (int k = 0; k < npids && !take; k++)
      take = pids[k] > 0 && ps[i].pid == (long)pids[k];
    if (take) {
      sum += ps[i].cpu_ns;
      nthreads += ps[i].threads;
    }
  }
  if (cpu_ns != NULL)
    *cpu_ns = sum;
  if (threads != NULL)
    *threads = nthreads;
}

/* One thread's figures from /proc/PID/task/TID. @return 0, or -1. */
static int thread_read(long pid, const char *tid, char *comm, size_t commsz,
                       uint64_t *cpu_ns, uint64_t *vcsw, uint64_t *ivcsw)
{
  char path[128], buf[4096];
  FILE *f;
  size_t len;

  snprintf(path, sizeof(path), "/proc/%ld/task/%s/comm", pid, tid);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  if (fgets(comm, (int)commsz, f) == NULL)
    comm[0] = '\0';
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  *cpu_ns = 0;
  snprintf(path, sizeof(path), "/proc/%ld/task/%s/schedstat", pid, tid);
  if ((f = fopen(path, "r")) != NULL) {
    unsigned long long ns = 0;
    if (fscanf(f, "%llu", &ns) == 1)
      *cpu_ns = ns;
    fclose(f);
  }
  *vcsw = *ivcsw = 0;
  snprintf(path, sizeof(path), "/proc/%ld/task/%s/status", pid, tid);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  len = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[len] = '\0';
  {
    const char *v = strstr(buf, "voluntary_ctxt_switches:");
    const char *iv = strstr(buf, "nonvoluntary_ctxt_switches:");
    /* "voluntary" is also the tail of "nonvoluntary": take the first. */
    if (v != NULL && (iv == NULL || v < iv))
      *vcsw = strtoull(v + 24, NULL, 10);
    if (iv != NULL)
      *ivcsw = strtoull(iv + 27, NULL, 10);
  }
  return 0;
}

/* See procs.h. */
int procs_thread_profile(const pinfo_t *ps, int n, long root, const pid_t *pids,
                         int npids, tprof_t *out, int max)
{
  int nout = 0;

  for (int i = 0; i < n; i++) {
    int mine = root > 0 && procs_under(ps, n, ps[i].pid, root);
    char path[64];
    DIR *d;
    struct dirent *e;

    for (int k = 0; !mine && k < npids; k++)
      mine = ps[i].pid == pids[k];
    if (!mine)
      continue;
    snprintf(path, sizeof(path), "/proc/%ld/task", ps[i].pid);
    if ((d = opendir(path)) == NULL)
      continue;
    while ((e = readdir(d)) != NULL) {
      char comm[32], name[56];
      uint64_t ns, v, iv;
      int j;

      if (!isdigit((unsigned char)e->d_name[0]) ||
          thread_read(ps[i].pid, e->d_name, comm, sizeof(comm), &ns, &v, &iv) !=
              0)
        continue;
      snprintf(name, sizeof(name), "%s/%s",
               ps[i].pid == root ? "listener" : ps[i].comm, comm);
      for (j = 0; j < nout && strcmp(out[j].name, name) != 0; j++)
        ;
      if (j == nout) {
        if (nout == max)
          continue;
        memset(&out[nout], 0, sizeof(out[nout]));
        snprintf(out[nout].name, sizeof(out[nout].name), "%s", name);
        nout++;
      }
      out[j].threads++;
      out[j].cpu_ns += ns;
      out[j].vcsw += v;
      out[j].ivcsw += iv;
    }
    closedir(d);
  }
  return nout;
}

uint64_t procs_profile_between(const tprof_t *a, int na, const tprof_t *b,
                               int nb, uint64_t *delta, long *threads)
{
  uint64_t ns = 0;

  if (threads != NULL)
    *threads = 0;
  for (int i = 0; i < nb; i++) {
    uint64_t before = 0, d;

    for (int j = 0; j < na; j++)
      if (strcmp(a[j].name, b[i].name) == 0) {
        before = a[j].cpu_ns;
        break;
      }
    d = b[i].cpu_ns > before ? b[i].cpu_ns - before : 0;
    ns += d;
    if (delta != NULL)
      delta[i] = d;
    if (threads != NULL)
      *threads += b[i].threads;
  }
  return ns;
}

int procs_self_profile(const char *self_name, tprof_t *out, int max)
{
  pinfo_t self = {.pid = getpid()};
  pid_t pid = getpid();

  snprintf(self.comm, sizeof(self.comm), "%s", self_name);
  return procs_thread_profile(&self, 1, 0, &pid, 1, out, max);
}
