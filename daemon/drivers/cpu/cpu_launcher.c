/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_launcher.c: the launcher of the CPU runners (the
 * contract is in cpu_launcher.h).
 *
 * The wire, one request and one response at a time over SOCK_SEQPACKET:
 *   request:  launch_req_t + (SPAWN) the arguments, each NUL-terminated
 *   response: launch_resp_t (+ for SPAWN the runner's socket, SCM_RIGHTS)
 * and, once at start, an unsolicited READY response: status 0 when the
 * launcher is confined, else the reason (it then exits).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_launcher.h"
#include "hipd.h"
#include "rpc.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_spawn.h"
#include "sanitize.h"
#include "util/clock.h"

enum { LOP_READY = 0, LOP_SPAWN, LOP_KILL, LOP_WAIT };

#define LAUNCH_MAX_ARGS 16
#define LAUNCH_MAX_CHILDREN 64
/* How long the launcher may take to confine itself and say so. */
#define READY_TIMEOUT_MS 10000
/* How long a request may take (a WAIT: its own timeout on top). */
#define REQUEST_TIMEOUT_MS 10000

typedef struct {
  uint32_t op;
  int32_t pid;
  int32_t sig;
  uint32_t timeout_ms;
  uint32_t len; /* bytes of arguments that follow */
  uint32_t pad_;
} launch_req_t;

typedef struct {
  int32_t status; /* 0 or a negative HIPD_E* code */
  int32_t pid;
  int32_t wstatus;
  uint32_t reaped;
  char msg[HIPD_ERR_MSG_MAX];
} launch_resp_t;

static struct {
  pthread_mutex_t mu;
  int fd;    /* our end of the launcher's socket, -1: none */
  pid_t pid; /* the launcher, -1: none */
} launcher_conn = {PTHREAD_MUTEX_INITIALIZER, -1, -1};

extern char **environ;

#define RUNNER_DEFAULT LIBEXECDIR "/hipd-cpu-runner"

const char *cpu_launcher_runner_path(void)
{
  const char *path = getenv("HIPD_CPU_RUNNER");

  return path != NULL && path[0] != '\0' ? path : RUNNER_DEFAULT;
}

/* ================================================== the launcher itself */

typedef struct {
  int ctl;
  const char *runner;   /* its path, for messages and argv[0] ... */
  char exec_path[4096]; /* ... and what is executed: /proc/self/fd/4, the
                         * runner opened while the launcher could still
                         * reach it (a build tree under a private home),
                         * else the path */
  char **env;
  pid_t kids[LAUNCH_MAX_CHILDREN];
  unsigned nkids;
} launcher_t;

static void resp_send(int fd, const launch_resp_t *r, int attach)
{
  struct iovec iov = {(void *)r, sizeof(*r)};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  proto_fd_ctl_t cbuf;

  if (attach >= 0)
    proto_msg_attach_fd(&mh, &cbuf, attach);
  while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
    ;
}

static void resp_error(launch_resp_t *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void resp_error(launch_resp_t *r, int code, const char *fmt, ...)
{
  va_list ap;

  r->status = code;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
  va_end(ap);
}

static int kid_index(const launcher_t *l, pid_t pid)
{
  for (unsigned i = 0; i < l->nkids; i++)
    if (l->kids[i] == pid)
      return (int)i;
  return -1;
}

static void do_spawn(launcher_t *l, const char *p, size_t len, launch_resp_t *r,
                     int *attach)
{
  char *argv[LAUNCH_MAX_ARGS + 3];
  char args[4096];
  sandbox_fd_t fds[2];
  sandbox_spawn_t so;
  hipd_err_t serr;
  int argc = 0, sv[2], e;
  pid_t pid;

  if (l->nkids >= LAUNCH_MAX_CHILDREN) {
    resp_error(r, HIPD_ETOOMANY, "the launcher runs %u runners already",
               l->nkids);
    return;
  }
  if (len >= sizeof(args) || (len > 0 && p[len - 1] != '\0')) {
    resp_error(r, HIPD_EPROTO, "SPAWN: malformed arguments");
    return;
  }
  memcpy(args, p, len);
  argv[argc++] = (char *)l->runner;
  argv[argc++] = "--fd=3"; /* dup2'd there below */
  for (size_t off = 0; off < len; off += strlen(args + off) + 1) {
    if (argc >= LAUNCH_MAX_ARGS + 2 || strncmp(args + off, "--fd=", 5) == 0) {
      resp_error(r, HIPD_EPROTO, "SPAWN: bad arguments");
      return;
    }
    argv[argc++] = args + off;
  }
  argv[argc] = NULL;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    resp_error(r, HIPD_EIO, "launcher: socketpair: %s", strerror(errno));
    return;
  }
  /* sv[1] is not 3 (the control socket is), so dup2 clears close-on-exec.
   * The runner's own file stays open at 4 across the exec of
   * /proc/self/fd/4 (dup2 onto itself clears close-on-exec). */
  fds[0] = (sandbox_fd_t){sv[1], 3};
  fds[1] = (sandbox_fd_t){4, 4};
  so =
      (sandbox_spawn_t){.path = l->exec_path,
                        .argv = argv,
                        .envp = l->env,
                        .fds = fds,
                        .nfds = strncmp(l->exec_path, "/proc/", 6) == 0 ? 2 : 1,
                        .stdin_null = true,
                        .chdir = "/",
                        .close_from = 5,
                        .own_group = true};
  e = sandbox_spawn(&so, &pid, &serr);
  close(sv[1]);
  if (e != 0) {
    close(sv[0]);
    resp_error(r, HIPD_EIO, "launcher: cannot start %s: %s", l->runner,
               serr.msg);
    return;
  }
  l->kids[l->nkids++] = pid;
  r->pid = pid;
  *attach = sv[0];
}

static void do_kill(launcher_t *l, const launch_req_t *q, launch_resp_t *r)
{
  if (q->pid <= 0 || kid_index(l, q->pid) < 0) {
    resp_error(r, HIPD_ENOENT, "launcher: %d is not a runner of mine",
               (int)q->pid);
    return;
  }
  if (kill(q->pid, q->sig) != 0)
    resp_error(r, HIPD_EIO, "launcher: kill(%d, %d): %s", (int)q->pid,
               (int)q->sig, strerror(errno));
}

static void do_wait(launcher_t *l, const launch_req_t *q, launch_resp_t *r)
{
  int64_t until = (int64_t)util_now_ms() + q->timeout_ms;
  int i = q->pid > 0 ? kid_index(l, q->pid) : -1;

  if (i < 0) {
    resp_error(r, HIPD_ENOENT, "launcher: %d is not a runner of mine",
               (int)q->pid);
    return;
  }
  for (;;) {
    int st = 0;
    pid_t w = waitpid(q->pid, &st, WNOHANG);
    if (w == q->pid || (w < 0 && errno != EINTR)) {
      r->reaped = 1;
      r->wstatus = w == q->pid ? st : 0;
      l->kids[i] = l->kids[--l->nkids];
      return;
    }
    if (w == 0 && q->timeout_ms != UINT32_MAX &&
        (int64_t)util_now_ms() >= until) {
      resp_error(r, HIPD_ETIMEDOUT, "launcher: runner %d still runs",
                 (int)q->pid);
      return;
    }
    if (w == 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
}

/* Serve until the control socket closes; then end the runners. */
static void launcher_serve(launcher_t *l)
{
  for (;;) {
    char buf[sizeof(launch_req_t) + 4096];
    launch_resp_t r;
    launch_req_t q;
    int attach = -1;
    ssize_t n = recv(l->ctl, buf, sizeof(buf), 0);

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    memset(&r, 0, sizeof(r));
    if ((size_t)n < sizeof(q)) {
      resp_error(&r, HIPD_EPROTO, "launcher: malformed request");
      resp_send(l->ctl, &r, -1);
      continue;
    }
    memcpy(&q, buf, sizeof(q));
    if (q.len != (size_t)n - sizeof(q))
      resp_error(&r, HIPD_EPROTO, "launcher: request length");
    else if (q.op == LOP_SPAWN)
      do_spawn(l, buf + sizeof(q), q.len, &r, &attach);
    else if (q.op == LOP_KILL)
      do_kill(l, &q, &r);
    else if (q.op == LOP_WAIT)
      do_wait(l, &q, &r);
    else
      resp_error(&r, HIPD_EPROTO, "launcher: unknown request %" PRIu32, q.op);
    resp_send(l->ctl, &r, attach);
    if (attach >= 0)
      close(attach);
  }
  for (unsigned i = 0; i < l->nkids; i++)
    kill(l->kids[i], SIGKILL);
  for (unsigned i = 0; i < l->nkids; i++)
    while (waitpid(l->kids[i], NULL, 0) < 0 && errno == EINTR)
      ;
}

/* Confine the launcher (see cpu_launcher.h). @return 0 or a code, with
 * @p err set. */
static int launcher_confine(launcher_t *l, uid_t uid, gid_t gid,
                            hipd_err_t *err)
{
  static const char *const sysdirs[] = {"/usr/lib", "/usr/lib64", "/lib",
                                        "/lib64", "/usr/local/lib"};
  sandbox_path_t paths[24];
  char sanbuf[1024];
  size_t n = 0;
  sandbox_spec_t spec;

  for (size_t i = 0; i < sizeof(sysdirs) / sizeof(sysdirs[0]); i++)
    paths[n++] =
        (sandbox_path_t){sysdirs[i], SANDBOX_FS_READ | SANDBOX_FS_EXEC};
  paths[n++] = (sandbox_path_t){"/etc/ld.so.cache", SANDBOX_FS_READ};
  paths[n++] = (sandbox_path_t){"/dev/null", SANDBOX_FS_READ};
  paths[n++] =
      (sandbox_path_t){l->exec_path, SANDBOX_FS_READ | SANDBOX_FS_EXEC};
#if defined(HIPD_ASAN) || defined(HIPD_TSAN)
  /* A sanitizer's runtime reads /proc/self/maps, its suppressions and
   * more while the runner starts, before the runner's own sandbox. */
  paths[n++] = (sandbox_path_t){"/", SANDBOX_FS_READ};
#endif
  sandbox_sanitizer_paths(paths, &n, sizeof(paths) / sizeof(paths[0]), sanbuf,
                          sizeof(sanbuf));
  sandbox_spec_init(&spec);
  spec.change_ids = true;
  spec.uid = uid;
  spec.gid = gid;
  spec.no_dumpable = true;
  spec.rlim.core = 0;
  spec.landlock = true;
  spec.landlock_scope = true; /* kill() reaches its own children only */
  spec.paths = paths;
  spec.npaths = n;
  spec.profile = SANDBOX_PROFILE_LAUNCHER;
  spec.require = SANDBOX_REQUIRE_SECCOMP;
#ifdef HIPD_TSAN
  spec.allow_threads = true; /* TSan restarts its background thread */
#endif
  return sandbox_enter(&spec, err);
}

/* What the launcher's child gets from cpu_launcher_start(). */
typedef struct {
  int peer; /* the daemon's end of the control socket */
  const char *runner;
  uid_t uid;
  gid_t gid;
  pid_t parent;
} launcher_args_t;

/* The child side of cpu_launcher_start(), after sandbox_spawn's steps:
 * only the control socket (at 3) and stdio are open, nothing of the
 * parent's clients or listeners; every signal is at its default and
 * unblocked; the launcher has a process group of its own (a terminal's ^C
 * is for the daemon, which decides). Never returns. */
static void launcher_main(void *arg)
{
  const launcher_args_t *a = arg;
  const char *runner = a->runner;
  uid_t uid = a->uid;
  gid_t gid = a->gid;
  pid_t parent = a->parent;
  launcher_t l = {.ctl = 3, .runner = runner};
  launch_resp_t r;
  hipd_err_t err;
  int rc;

  if (a->peer < 3)
    close(a->peer); /* above 3: closed already */
  /* While root: the tenant's runners' share of its processes (its worker
   * keeps the rest). */
  if (cgroup_enter_runners() != 0) {
    memset(&r, 0, sizeof(r));
    resp_error(&r, HIPD_EIO, "launcher: cannot join the runners' cgroup");
    resp_send(3, &r, -1);
    _exit(1);
  }
  fcntl(3, F_SETFD, FD_CLOEXEC);
  /* Opened now, as the caller: after the id change the launcher may not
   * be able to reach the runner's directory (a build tree under /root),
   * while its own descriptor still reaches the file. At 4: the next
   * free number. */
  if (open(runner, O_PATH | O_CLOEXEC) == 4)
    snprintf(l.exec_path, sizeof(l.exec_path), "/proc/self/fd/4");
  else
    snprintf(l.exec_path, sizeof(l.exec_path), "%s", runner);
  signal(SIGPIPE, SIG_IGN);
  memset(&r, 0, sizeof(r));
  l.env = sandbox_clean_env(NULL);
  if (l.env == NULL) {
    resp_error(&r, HIPD_ENOMEM, "launcher: out of memory");
    resp_send(3, &r, -1);
    _exit(1);
  }
  rc = launcher_confine(&l, uid, gid, &err);
  if (rc != 0) {
    resp_error(&r, rc, "the CPU runner's launcher cannot confine itself: %s",
               err.msg);
    resp_send(3, &r, -1);
    _exit(1);
  }
  /* After the id change, which clears it; the parent may be gone already. */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != parent)
    _exit(0);
  r.pid = getpid();
  if (err.msg[0] != '\0')
    snprintf(r.msg, sizeof(r.msg), "%s", err.msg);
  resp_send(3, &r, -1);
  launcher_serve(&l);
  /* _exit: no atexit handlers of the parent's (nor LeakSanitizer's, whose
   * tracer the sandbox refuses). */
  _exit(0);
}

/* ============================================ the client (our side) */

/* One exchange under launcher_conn.mu. @return 0 with @p r filled (r->status
 * may be negative), HIPD_EDISCONNECTED when the launcher is gone. */
static int exchange(const launch_req_t *q, const char *args, int *fd_out,
                    unsigned extra_ms, launch_resp_t *r)
{
  struct iovec iov[2] = {{(void *)q, sizeof(*q)}, {(void *)args, q->len}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = q->len ? 2 : 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } cbuf;
  struct iovec riov = {r, sizeof(*r)};
  struct msghdr rm = {.msg_iov = &riov,
                      .msg_iovlen = 1,
                      .msg_control = cbuf.buf,
                      .msg_controllen = sizeof(cbuf.buf)};
  int64_t deadline =
      (int64_t)util_now_ms() + REQUEST_TIMEOUT_MS + (int64_t)extra_ms;
  ssize_t n;

  if (launcher_conn.fd < 0)
    return HIPD_EDISCONNECTED;
  while (sendmsg(launcher_conn.fd, &mh, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR)
      return HIPD_EDISCONNECTED;
  }
  for (;;) {
    struct pollfd pfd = {.fd = launcher_conn.fd, .events = POLLIN};
    int64_t left = deadline - (int64_t)util_now_ms();
    int pr;
    if (extra_ms == UINT32_MAX)
      left = -1;
    else if (left <= 0)
      return HIPD_EDISCONNECTED; /* a launcher that hangs is of no use */
    pr = poll(&pfd, 1,
              left < 0 ? -1 : (left > INT32_MAX ? INT32_MAX : (int)left));
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0)
      continue;
    n = recvmsg(launcher_conn.fd, &rm, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR)
      continue;
    break;
  }
  if (n != (ssize_t)sizeof(*r))
    return HIPD_EDISCONNECTED;
  r->msg[sizeof(r->msg) - 1] = '\0';
  if (fd_out != NULL) {
    *fd_out = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&rm); c != NULL;
         c = CMSG_NXTHDR(&rm, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        memcpy(fd_out, CMSG_DATA(c), sizeof(int));
  }
  return 0;
}

static void launcher_reap(pid_t pid)
{
  int64_t until = (int64_t)util_now_ms() + 2000;

  while ((int64_t)util_now_ms() < until) {
    pid_t w = waitpid(pid, NULL, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR))
      return;
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

int cpu_launcher_start(uid_t uid, gid_t gid, hipd_err_t *err)
{
  const char *runner = cpu_launcher_runner_path();
  launch_resp_t r;
  int sv[2], rc;
  pid_t pid, parent = getpid();

  err_clear(err);
  if (uid == 0 || gid == 0)
    return err_set(err, HIPD_EINVAL,
                   "the CPU runner's launcher must not run as root (uid %u "
                   "gid %u)",
                   (unsigned)uid, (unsigned)gid);
  if (geteuid() != 0 && (uid != getuid() || gid != getgid()))
    return err_set(err, HIPD_EPERM,
                   "cannot start the CPU runner's launcher as uid %u gid %u: "
                   "not running as root",
                   (unsigned)uid, (unsigned)gid);
  pthread_mutex_lock(&launcher_conn.mu);
  if (launcher_conn.pid > 0) {
    rc = err_set(err, HIPD_EBUSY, "the CPU runner's launcher runs already");
    goto out;
  }
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    rc = err_set(err, HIPD_EIO, "launcher: socketpair: %s", strerror(errno));
    goto out;
  }
  {
    launcher_args_t a = {sv[0], runner, uid, gid, parent};
    sandbox_fd_t fds[1] = {{sv[1], 3}};
    sandbox_spawn_t so = {.fds = fds,
                          .nfds = 1,
                          .close_from = 4,
                          .own_group = true,
                          .child = launcher_main,
                          .arg = &a};
    hipd_err_t serr;

    if (sandbox_spawn(&so, &pid, &serr) != 0) {
      rc = err_set(err, HIPD_EIO, "launcher: fork: %s", serr.msg);
      close(sv[0]);
      close(sv[1]);
      goto out;
    }
  }
  close(sv[1]);
  launcher_conn.fd = sv[0];
  launcher_conn.pid = pid;
  {
    struct pollfd pfd = {.fd = launcher_conn.fd, .events = POLLIN};
    int pr;
    ssize_t n = -1;
    do
      pr = poll(&pfd, 1, READY_TIMEOUT_MS);
    while (pr < 0 && errno == EINTR);
    if (pr > 0)
      n = recv(launcher_conn.fd, &r, sizeof(r), 0);
    if (n != (ssize_t)sizeof(r) || r.status != 0) {
      if (n == (ssize_t)sizeof(r)) {
        r.msg[sizeof(r.msg) - 1] = '\0';
        rc = err_set(err, HIPD_EIO, "%s", r.msg);
      } else {
        rc = err_set(err, HIPD_EIO,
                     "the CPU runner's launcher did not start (%s)",
                     pr == 0 ? "no answer" : "it exited");
      }
      close(launcher_conn.fd);
      launcher_conn.fd = -1;
      if (pr == 0)
        kill(pid, SIGKILL); /* still ours: it did not drop its ids */
      launcher_reap(pid);
      launcher_conn.pid = -1;
      goto out;
    }
    /* Confined, perhaps not fully (no Landlock): say what is missing. */
    r.msg[sizeof(r.msg) - 1] = '\0';
    snprintf(err->msg, sizeof(err->msg), "%s", r.msg);
  }
  rc = 0;
out:
  pthread_mutex_unlock(&launcher_conn.mu);
  return rc;
}

void cpu_launcher_stop(void)
{
  pid_t pid;

  pthread_mutex_lock(&launcher_conn.mu);
  pid = launcher_conn.pid;
  if (launcher_conn.fd >= 0)
    close(launcher_conn.fd);
  launcher_conn.fd = -1;
  launcher_conn.pid = -1;
  pthread_mutex_unlock(&launcher_conn.mu);
  if (pid > 0)
    launcher_reap(pid);
}

bool cpu_launcher_running(void)
{
  bool on;

  pthread_mutex_lock(&launcher_conn.mu);
  on = launcher_conn.fd >= 0;
  pthread_mutex_unlock(&launcher_conn.mu);
  return on;
}

pid_t cpu_launcher_pid(void)
{
  pid_t pid;

  pthread_mutex_lock(&launcher_conn.mu);
  pid = launcher_conn.pid;
  pthread_mutex_unlock(&launcher_conn.mu);
  return pid;
}

int cpu_launcher_spawn(const char *const *args, pid_t *pid, int *sock,
                       hipd_err_t *err)
{
  char buf[4096];
  size_t len = 0;
  launch_req_t q = {.op = LOP_SPAWN};
  launch_resp_t r;
  int fd = -1, rc;

  err_clear(err);
  for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
    size_t l = strlen(args[i]) + 1;
    if (len + l > sizeof(buf))
      return err_set(err, HIPD_EINVAL, "launcher: arguments too long");
    memcpy(buf + len, args[i], l);
    len += l;
  }
  q.len = (uint32_t)len;
  pthread_mutex_lock(&launcher_conn.mu);
  rc = exchange(&q, buf, &fd, 0, &r);
  pthread_mutex_unlock(&launcher_conn.mu);
  if (rc != 0)
    return err_set(err, rc, "the CPU runner's launcher is gone");
  if (r.status != 0) {
    if (fd >= 0)
      close(fd);
    return err_set(err, r.status, "%s", r.msg);
  }
  if (fd < 0)
    return err_set(err, HIPD_EPROTO, "launcher: no socket for the runner");
  *pid = r.pid;
  *sock = fd;
  return 0;
}

int cpu_launcher_kill(pid_t pid, int sig, hipd_err_t *err)
{
  launch_req_t q = {.op = LOP_KILL, .pid = pid, .sig = sig};
  launch_resp_t r;
  int rc;

  err_clear(err);
  pthread_mutex_lock(&launcher_conn.mu);
  rc = exchange(&q, NULL, NULL, 0, &r);
  pthread_mutex_unlock(&launcher_conn.mu);
  if (rc != 0)
    return err_set(err, rc, "the CPU runner's launcher is gone");
  if (r.status != 0)
    return err_set(err, r.status, "%s", r.msg);
  return 0;
}

int cpu_launcher_wait(pid_t pid, unsigned timeout_ms, int *status,
                      hipd_err_t *err)
{
  launch_req_t q = {.op = LOP_WAIT, .pid = pid, .timeout_ms = timeout_ms};
  launch_resp_t r;
  int rc;

  err_clear(err);
  pthread_mutex_lock(&launcher_conn.mu);
  rc = exchange(&q, NULL, NULL, timeout_ms, &r);
  pthread_mutex_unlock(&launcher_conn.mu);
  if (rc != 0)
    return err_set(err, rc, "the CPU runner's launcher is gone");
  if (r.status != 0)
    return err_set(err, r.status, "%s", r.msg);
  *status = r.wstatus;
  return 0;
}
