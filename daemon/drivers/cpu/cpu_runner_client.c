/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_runner_client.c: start, talk to and restart the CPU
 * device's kernel runner. The protocol is in cpu_proto.h, the contract in
 * cpu_runner_client.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_launcher.h"
#include "cpu_runner_client.h"
#include "hipd.h"
#include "rpc.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_spawn.h"
#include "util/array.h"
#include "util/clock.h"

#ifndef LIBEXECDIR
#define LIBEXECDIR "/usr/local/libexec"
#endif

/* How long the runner may take to start, or a request other than LAUNCH
 * and LOAD to complete, before it is considered hung. */
#define CONTROL_TIMEOUT_MS 30000
/* How long it may take to exit once its socket is closed. */
#define EXIT_GRACE_MS 2000

typedef struct {
  void *addr;
  size_t size;
  int fd; /* the caller's */
} map_rec_t;

typedef struct {
  uint32_t id;
  int fd; /* the caller's */
  void *addr;
  size_t size;
} chunk_rec_t;

typedef struct {
  uint32_t chunk;
  cpu_bmap_ent_t ent;
} bmap_rec_t;

typedef struct {
  uint32_t id;
  char *path;
} mod_rec_t;

typedef struct {
  uint32_t id;
  uint32_t module;
  char *name;
  cpu_kernel_sig_t sig;
} kern_rec_t;

struct cpu_runner {
  pthread_mutex_t lock;
  /* cpu_runner_abort() kills the runner of a launch in flight without
   * r->lock (the launch holds it): under this lock, taken around the
   * launch's pid and the reap, so that a reaped pid is never signalled. */
  pthread_mutex_t abort_lock;
  pid_t launch_pid; /* the runner running a launch now, else -1 */
  int launch_launched;
  char *path;
  unsigned workers_req;
  unsigned timeout_ms;
  uint64_t reserve_addr, reserve_size;
  int drop_ids;
  uid_t uid;
  gid_t gid;
  pid_t pid;    /* -1: none running */
  int launched; /* the running one was started by the launcher */
  int sock;     /* -1: none running */
  unsigned workers;
  unsigned restarts;
  map_rec_t *maps;
  size_t nmaps, capmaps;
  chunk_rec_t *chunks;
  size_t nchunks, capchunks;
  bmap_rec_t *bmaps;
  size_t nbmaps, capbmaps;
  cpu_bmap_ent_t batch[CPU_BMAP_MAX]; /* BMAP entries being sent */
  mod_rec_t *mods;
  size_t nmods, capmods;
  kern_rec_t *kerns;
  size_t nkerns, capkerns;
  uint32_t next_module, next_kernel;
  uint8_t buf[CPU_PROTO_MAX_MSG]; /* the last response */
};

/* Outcome of one exchange with the runner. */
enum { RPC_OK = 0, RPC_DEAD, RPC_TIMEOUT };

static void err_append(hipd_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append to @p err's message, as far as it fits. */
static void err_append(hipd_err_t *err, const char *fmt, ...)
{
  size_t used = strlen(err->msg);
  va_list ap;

  if (used + 1 >= sizeof(err->msg))
    return;
  va_start(ap, fmt);
  vsnprintf(err->msg + used, sizeof(err->msg) - used, fmt, ap);
  va_end(ap);
}

/* "SIGSEGV (segmentation fault)" or "exit status 3". */
static void describe_status(int st, char *buf, size_t size)
{
  static const struct {
    int sig;
    const char *name, *what;
  } sigs[] = {
      {SIGSEGV, "SIGSEGV", "segmentation fault"},
      {SIGBUS, "SIGBUS", "bus error"},
      {SIGFPE, "SIGFPE", "arithmetic exception"},
      {SIGILL, "SIGILL", "illegal instruction"},
      {SIGABRT, "SIGABRT", "aborted"},
      {SIGTRAP, "SIGTRAP", "trap"},
      {SIGKILL, "SIGKILL", "killed"},
      {SIGTERM, "SIGTERM", "terminated"},
      {SIGSYS, "SIGSYS", "bad system call"},
      {SIGXCPU, "SIGXCPU", "CPU time limit exceeded"},
      {SIGPIPE, "SIGPIPE", "broken pipe"},
  };

  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
      if (sigs[i].sig == sig) {
        snprintf(buf, size, "%s (%s)", sigs[i].name, sigs[i].what);
        return;
      }
    }
    snprintf(buf, size, "signal %d", sig);
  } else if (WIFEXITED(st)) {
    snprintf(buf, size, "exit status %d", WEXITSTATUS(st));
  } else {
    snprintf(buf, size, "wait status 0x%x", (unsigned)st);
  }
}

/* ------------------------------------------------------- one exchange */

/*
 * Send request @p op (header, then @p p1 and @p p2, and @p fd with
 * SCM_RIGHTS if >= 0) and read its response into r->buf.
 * @return RPC_OK with *status and the payload (*payload, *plen), RPC_DEAD
 *         if the runner is gone, RPC_TIMEOUT if it did not answer within
 *         @p timeout_ms (0: wait for ever).
 */
static int rpc(cpu_runner_t *r, uint32_t op, const void *p1, size_t l1,
               const void *p2, size_t l2, int fd, unsigned timeout_ms,
               int32_t *status, const uint8_t **payload, size_t *plen)
{
  cpu_req_t h = {.op = op, .len = (uint32_t)(l1 + l2)};
  struct iovec iov[3] = {{&h, sizeof(h)}, {(void *)p1, l1}, {(void *)p2, l2}};
  proto_fd_ctl_t cbuf;
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
  int64_t deadline = timeout_ms ? (int64_t)util_now_ms() + timeout_ms : 0;
  cpu_resp_t resp;
  ssize_t n;

  if (fd >= 0)
    proto_msg_attach_fd(&mh, &cbuf, fd);
  while (sendmsg(r->sock, &mh, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR)
      return RPC_DEAD; /* EPIPE, ECONNRESET: it is gone */
  }
  for (;;) {
    struct pollfd pfd = {.fd = r->sock, .events = POLLIN};
    int wait = -1;
    if (deadline != 0) {
      int64_t left = deadline - (int64_t)util_now_ms();
      if (left <= 0)
        return RPC_TIMEOUT;
      wait = left > INT32_MAX ? INT32_MAX : (int)left;
    }
    int pr = poll(&pfd, 1, wait);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0)
      return RPC_DEAD;
    if (pr == 0)
      continue; /* the deadline check above decides */
    n = recv(r->sock, r->buf, sizeof(r->buf), 0);
    if (n < 0 && errno == EINTR)
      continue;
    break;
  }
  if (n <= 0)
    return RPC_DEAD; /* end of file: it exited or was killed */
  memcpy(&resp, r->buf, (size_t)n < sizeof(resp) ? (size_t)n : sizeof(resp));
  if ((size_t)n < sizeof(resp) || resp.op != op ||
      resp.len != (size_t)n - sizeof(resp))
    return RPC_DEAD; /* garbled: treat the runner as broken */
  *status = resp.status;
  *payload = r->buf + sizeof(resp);
  *plen = resp.len;
  return RPC_OK;
}

/* ------------------------------------------------------ process control */

/* Collect the runner's exit status into @p st, killing it first if
 * @p kill_first or if it does not exit within EXIT_GRACE_MS. */
static void runner_reap_now(cpu_runner_t *r, int kill_first, int *st);

static void runner_reap(cpu_runner_t *r, int kill_first, int *st)
{
  pthread_mutex_lock(&r->abort_lock);
  r->launch_pid = -1; /* no abort once the reap began */
  pthread_mutex_unlock(&r->abort_lock);
  runner_reap_now(r, kill_first, st);
}

static void runner_reap_now(cpu_runner_t *r, int kill_first, int *st)
{
  int64_t until = (int64_t)util_now_ms() + EXIT_GRACE_MS;

  if (r->sock >= 0)
    close(r->sock);
  r->sock = -1;
  if (r->pid <= 0)
    return;
  if (r->launched) {
    /* The launcher's child (and maybe another uid): it kills and reaps. */
    hipd_err_t e;
    int rc;
    if (kill_first)
      cpu_launcher_kill(r->pid, SIGKILL, &e);
    rc = cpu_launcher_wait(r->pid, EXIT_GRACE_MS, st, &e);
    if (rc == HIPD_ETIMEDOUT) {
      cpu_launcher_kill(r->pid, SIGKILL, &e);
      rc = cpu_launcher_wait(r->pid, UINT32_MAX, st, &e);
    }
    if (rc != 0)
      *st = SIGKILL; /* the launcher is gone: it killed its runners */
    r->pid = -1;
    r->workers = 0;
    return;
  }
  if (kill_first)
    kill(r->pid, SIGKILL);
  for (;;) {
    pid_t w = waitpid(r->pid, st, WNOHANG);
    if (w == r->pid || (w < 0 && errno != EINTR))
      break;
    if (w == 0 && (int64_t)util_now_ms() >= until) {
      kill(r->pid, SIGKILL);
      while (waitpid(r->pid, st, 0) < 0 && errno == EINTR)
        ;
      break;
    }
    if (w == 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  r->pid = -1;
  r->workers = 0;
}

/* Start a runner process and greet it. */
static int runner_spawn(cpu_runner_t *r, hipd_err_t *err)
{
  sandbox_fd_t fds[1];
  sandbox_spawn_t so;
  hipd_err_t serr;
  char fdarg[32], wkarg[32], rsarg[64], uidarg[32], gidarg[32];
  char *argv[8];
  char **env;
  int argc = 0, sv[2], child_fd, e, st = 0;
  cpu_hello_req_t hello = {.version = CPU_PROTO_VERSION};
  cpu_hello_resp_t hresp;
  int32_t status;
  const uint8_t *p;
  size_t plen;
  pid_t pid;

  r->launched = 0;
  if (cpu_launcher_running()) {
    /* argv without the binary and --fd: the launcher adds both. */
    const char *args[4];
    int n = 0;
    if (r->workers_req != 0) {
      snprintf(wkarg, sizeof(wkarg), "--workers=%u", r->workers_req);
      args[n++] = wkarg;
    }
    if (r->reserve_size != 0) {
      snprintf(rsarg, sizeof(rsarg), "--reserve=0x%" PRIx64 ":%" PRIu64,
               r->reserve_addr, r->reserve_size);
      args[n++] = rsarg;
    }
    args[n] = NULL;
    e = cpu_launcher_spawn(args, &pid, &sv[0], err);
    if (e != 0) {
      char why[HIPD_ERR_MSG_MAX];
      snprintf(why, sizeof(why), "%s", err->msg);
      return err_set(err, e == HIPD_EDISCONNECTED ? HIPD_EIO : e,
                     "cannot start the CPU device runner %s: %s", r->path, why);
    }
    r->pid = pid;
    r->sock = sv[0];
    r->launched = 1;
    goto hello;
  }
  if (access(r->path, X_OK) != 0) {
    e = errno;
    return err_set(err, e == ENOENT ? HIPD_ENOENT : HIPD_EIO,
                   "cannot start the CPU device runner %s: %s", r->path,
                   strerror(e));
  }
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return err_set(err, HIPD_EIO,
                   "cannot start the CPU device runner: socketpair: %s",
                   strerror(errno));
  }
  /* dup2 onto a different number clears close-on-exec in the child. */
  child_fd = sv[1] == 3 ? 4 : 3;
  snprintf(fdarg, sizeof(fdarg), "--fd=%d", child_fd);
  argv[argc++] = r->path;
  argv[argc++] = fdarg;
  if (r->workers_req != 0) {
    snprintf(wkarg, sizeof(wkarg), "--workers=%u", r->workers_req);
    argv[argc++] = wkarg;
  }
  if (r->reserve_size != 0) {
    snprintf(rsarg, sizeof(rsarg), "--reserve=0x%" PRIx64 ":%" PRIu64,
             r->reserve_addr, r->reserve_size);
    argv[argc++] = rsarg;
  }
  if (r->drop_ids && geteuid() == 0) {
    snprintf(uidarg, sizeof(uidarg), "--uid=%u", (unsigned)r->uid);
    snprintf(gidarg, sizeof(gidarg), "--gid=%u", (unsigned)r->gid);
    argv[argc++] = uidarg;
    argv[argc++] = gidarg;
  }
  argv[argc] = NULL;
  /* Nothing of our environment: the runner runs client code. */
  if ((env = sandbox_clean_env(NULL)) == NULL) {
    close(sv[0]);
    close(sv[1]);
    return err_set(err, HIPD_ENOMEM, "out of memory");
  }

  fds[0] = (sandbox_fd_t){sv[1], child_fd};
  /* Its own process group: a terminal's ^C goes to the daemon, which
   * decides; the runner ends when the daemon closes the socket. */
  so = (sandbox_spawn_t){.path = r->path,
                         .argv = argv,
                         .envp = env,
                         .fds = fds,
                         .nfds = 1,
                         .stdin_null = true,
                         .chdir = "/",
                         .close_from = child_fd + 1,
                         .own_group = true};
  e = sandbox_spawn(&so, &pid, &serr);
  sandbox_env_free(env);
  close(sv[1]);
  if (e != 0) {
    close(sv[0]);
    return err_set(err, e, "cannot start the CPU device runner %s: %s", r->path,
                   serr.msg);
  }
  r->pid = pid;
  r->sock = sv[0];

hello:
  e = rpc(r, CPU_OP_HELLO, &hello, sizeof(hello), NULL, 0, -1,
          CONTROL_TIMEOUT_MS, &status, &p, &plen);
  if (e != RPC_OK) {
    char why[64];
    runner_reap(r, e == RPC_TIMEOUT, &st);
    describe_status(st, why, sizeof(why));
    /* 127: the exec failed after the spawn (as under valgrind, where
     * posix_spawn cannot report exec errors). */
    return err_set(err, HIPD_EIO,
                   "the CPU device runner %s did not start: %s%s", r->path,
                   e == RPC_TIMEOUT ? "no answer" : why,
                   e != RPC_TIMEOUT && WIFEXITED(st) && WEXITSTATUS(st) == 127
                       ? " (cannot be executed)"
                       : "");
  }
  if (status < 0 || plen != sizeof(hresp)) {
    int rc = err_set(err, status < 0 ? status : HIPD_EPROTO,
                     "the CPU device runner %s refused to start: %.*s", r->path,
                     (int)plen, (const char *)p);
    runner_reap(r, 0, &st);
    return rc;
  }
  memcpy(&hresp, p, sizeof(hresp));
  r->workers = hresp.workers;
  return 0;
}

static int send_map(cpu_runner_t *r, const map_rec_t *m, int32_t *status,
                    const uint8_t **p, size_t *plen)
{
  cpu_map_req_t req = {(uint64_t)(uintptr_t)m->addr, m->size};

  return rpc(r, CPU_OP_MAP, &req, sizeof(req), NULL, 0, m->fd,
             CONTROL_TIMEOUT_MS, status, p, plen);
}

static int send_chunk(cpu_runner_t *r, const chunk_rec_t *c, int32_t *status,
                      const uint8_t **p, size_t *plen)
{
  cpu_chunk_req_t req = {
      .id = c->id, .addr = (uint64_t)(uintptr_t)c->addr, .size = c->size};

  return rpc(r, CPU_OP_CHUNK, &req, sizeof(req), NULL, 0, c->fd,
             CONTROL_TIMEOUT_MS, status, p, plen);
}

/* BMAP or BUNMAP (@p op) of the @p n entries in r->batch. */
static int send_batch(cpu_runner_t *r, uint32_t op, uint32_t chunk, size_t n,
                      int32_t *status, const uint8_t **p, size_t *plen)
{
  cpu_bmap_req_t req = {.chunk = chunk, .count = (uint32_t)n};

  return rpc(r, op, &req, sizeof(req), r->batch, n * sizeof(r->batch[0]), -1,
             CONTROL_TIMEOUT_MS, status, p, plen);
}

/* The module file, opened for the runner (which opens no file itself).
 * @return the descriptor or -1 with @p err set. */
static int module_open(const char *path, hipd_err_t *err)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    err_set(err, errno == ENOENT ? HIPD_ENOENT : HIPD_EIO,
            "cannot open kernel module %s: %s", path, strerror(errno));
  return fd;
}

static int send_load(cpu_runner_t *r, const mod_rec_t *m, int fd,
                     int32_t *status, const uint8_t **p, size_t *plen)
{
  cpu_load_req_t req = {.module = m->id};

  return rpc(r, CPU_OP_LOAD, &req, sizeof(req), m->path, strlen(m->path), fd,
             r->timeout_ms, status, p, plen);
}

static int send_kernel(cpu_runner_t *r, uint32_t module, uint32_t id,
                       const char *name, int32_t *status, const uint8_t **p,
                       size_t *plen)
{
  cpu_kernel_req_t req = {.module = module, .kernel = id};

  return rpc(r, CPU_OP_KERNEL, &req, sizeof(req), name, strlen(name), -1,
             CONTROL_TIMEOUT_MS, status, p, plen);
}

/* Append "; <what>: <message>" to @p err for a failed replay step. */
static void note_replay(hipd_err_t *err, const char *what, const uint8_t *p,
                        size_t plen)
{
  err_append(err, "%s%s: %.*s", err->msg[0] ? "; " : "", what, (int)plen,
             (const char *)p);
}

/*
 * Start a runner and give it every mapping, module and kernel on record.
 * @return 0; HIPD_EDEVLOST with @p err describing the first failures if
 * some replay step failed (the runner stays up); the spawn error if no
 * runner could be started.
 */
static int runner_start(cpu_runner_t *r, hipd_err_t *err)
{
  int rc = runner_spawn(r, err);
  int failed = 0;
  int32_t status;
  const uint8_t *p;
  size_t plen;
  char what[96];

  if (rc != 0)
    return rc;
  err_clear(err);
  for (size_t i = 0; i < r->nchunks; i++) {
    const chunk_rec_t *c = &r->chunks[i];
    size_t n = 0;
    if (send_chunk(r, c, &status, &p, &plen) != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "buffer chunk %" PRIu32, c->id);
      note_replay(err, what, p, plen);
      failed = 1;
      continue;
    }
    /* Its buffers, as many to a request as fit. */
    for (size_t b = 0; b <= r->nbmaps; b++) {
      if (b < r->nbmaps && r->bmaps[b].chunk == c->id)
        r->batch[n++] = r->bmaps[b].ent;
      if (n == 0 || (n < CPU_BMAP_MAX && b < r->nbmaps))
        continue;
      if (send_batch(r, CPU_OP_BMAP, c->id, n, &status, &p, &plen) != RPC_OK)
        goto dead;
      if (status < 0) {
        snprintf(what, sizeof(what), "buffers of chunk %" PRIu32, c->id);
        note_replay(err, what, p, plen);
        failed = 1;
      }
      n = 0;
    }
  }
  for (size_t i = 0; i < r->nmaps; i++) {
    if (send_map(r, &r->maps[i], &status, &p, &plen) != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "buffer %p", r->maps[i].addr);
      note_replay(err, what, p, plen);
      failed = 1;
    }
  }
  for (size_t i = 0; i < r->nmods; i++) {
    hipd_err_t oe;
    int fd = module_open(r->mods[i].path, &oe), lr;
    if (fd < 0) {
      snprintf(what, sizeof(what), "module %" PRIu32, r->mods[i].id);
      note_replay(err, what, (const uint8_t *)oe.msg, strlen(oe.msg));
      failed = 1;
      continue;
    }
    lr = send_load(r, &r->mods[i], fd, &status, &p, &plen);
    close(fd);
    if (lr != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "module %" PRIu32, r->mods[i].id);
      note_replay(err, what, p, plen);
      failed = 1;
    }
  }
  for (size_t i = 0; i < r->nkerns; i++) {
    kern_rec_t *k = &r->kerns[i];
    if (send_kernel(r, k->module, k->id, k->name, &status, &p, &plen) != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "kernel %s", k->name);
      note_replay(err, what, p, plen);
      failed = 1;
    }
  }
  if (failed)
    return err->code = HIPD_EDEVLOST;
  return 0;

dead : {
  int st = 0;
  char why[64];
  runner_reap(r, 1, &st);
  describe_status(st, why, sizeof(why));
  return err_set(err, HIPD_EDEVLOST,
                 "the restarted CPU device runner died (%s)", why);
}
}

/* The runner died (or hung) during request @p op: describe why in @p err,
 * reap it and start a new one. @return the code for the failed request. */
static int runner_lost(cpu_runner_t *r, uint32_t op, int timed_out,
                       const char *detail, hipd_err_t *err)
{
  int code = op != CPU_OP_LAUNCH ? HIPD_EDEVICE
             : timed_out         ? HIPD_ETIMEDOUT
                                 : HIPD_ELAUNCH;
  hipd_err_t restart;
  char why[64];
  int st = 0;

  runner_reap(r, timed_out, &st);
  describe_status(st, why, sizeof(why));
  r->restarts++;
  if (op == CPU_OP_LAUNCH && timed_out)
    err_set(err, code,
            "kernel did not finish within %u ms on the CPU device; its runner "
            "was stopped",
            r->timeout_ms);
  else if (op == CPU_OP_LAUNCH && WIFSIGNALED(st))
    err_set(err, code, "kernel crashed on the CPU device: %s", why);
  else if (op == CPU_OP_LAUNCH)
    err_set(err, code, "kernel ended the CPU device's runner: %s", why);
  else if (op == CPU_OP_LOAD)
    err_set(err, code,
            "loading kernel module %s %s the CPU device's runner: %s", detail,
            timed_out ? "hung" : "crashed", timed_out ? "timed out" : why);
  else
    err_set(err, code, "the CPU device's runner died: %s", why);
  if (runner_start(r, &restart) != 0)
    err_append(err, "; restarting the runner failed: %s", restart.msg);
  return code;
}

/*
 * One request, with the runner started first if none is running, and the
 * runner replaced if it dies. @return 0 with the response payload in
 * (*p, *plen), or a negative code with @p err set.
 */
static int request(cpu_runner_t *r, uint32_t op, const void *p1, size_t l1,
                   const void *p2, size_t l2, int fd, const char *detail,
                   const uint8_t **p, size_t *plen, hipd_err_t *err)
{
  unsigned timeout = (op == CPU_OP_LAUNCH || op == CPU_OP_LOAD)
                         ? r->timeout_ms
                         : CONTROL_TIMEOUT_MS;
  int32_t status;
  int rc;

  if (r->sock < 0) {
    rc = runner_start(r, err);
    if (rc != 0 && r->sock < 0)
      return rc;
  }
  rc = rpc(r, op, p1, l1, p2, l2, fd, timeout, &status, p, plen);
  if (rc != RPC_OK)
    return runner_lost(r, op, rc == RPC_TIMEOUT, detail, err);
  if (status < 0)
    return err_set(err, status, "%.*s", (int)*plen, (const char *)*p);
  err_clear(err); /* replay notes of a runner started above */
  return 0;
}

/* ------------------------------------------------------------- the API */

int cpu_runner_start(const cpu_runner_cfg_t *cfg, cpu_runner_t **out,
                     hipd_err_t *err)
{
  cpu_runner_cfg_t dflt = {0};
  const char *path;
  cpu_runner_t *r;
  int rc;
  err_clear(err);

  if (cfg == NULL)
    cfg = &dflt;
  path = cfg->path;
  if (path == NULL)
    path = cpu_launcher_runner_path();
  if (cfg->drop_ids && (cfg->uid == 0 || cfg->gid == 0))
    return err_set(err, HIPD_EINVAL,
                   "the CPU device runner must not run as uid 0 or gid 0");
  r = calloc(1, sizeof(*r));
  if (r == NULL || (r->path = strdup(path)) == NULL) {
    free(r);
    return err_set(err, HIPD_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_init(&r->abort_lock, NULL);
  r->launch_pid = -1;
  r->workers_req = cfg->workers;
  r->timeout_ms = cfg->timeout_ms;
  r->reserve_addr = (uint64_t)(uintptr_t)cfg->reserve_addr;
  r->reserve_size = cfg->reserve_size;
  r->drop_ids = cfg->drop_ids;
  r->uid = cfg->uid;
  r->gid = cfg->gid;
  r->pid = -1;
  r->sock = -1;
  r->next_module = 1;
  r->next_kernel = 1;
  rc = runner_spawn(r, err);
  if (rc != 0) {
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->abort_lock);
    free(r->path);
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

void cpu_runner_stop(cpu_runner_t *r)
{
  int st;

  if (r == NULL)
    return;
  runner_reap(r, 0, &st);
  for (size_t i = 0; i < r->nmods; i++)
    free(r->mods[i].path);
  for (size_t i = 0; i < r->nkerns; i++)
    free(r->kerns[i].name);
  free(r->maps);
  free(r->chunks);
  free(r->bmaps);
  free(r->mods);
  free(r->kerns);
  free(r->path);
  pthread_mutex_destroy(&r->lock);
  pthread_mutex_destroy(&r->abort_lock);
  free(r);
}

int cpu_runner_map(cpu_runner_t *r, int fd, void *addr, size_t size,
                   hipd_err_t *err)
{
  cpu_map_req_t req = {(uint64_t)(uintptr_t)addr, size};
  const uint8_t *p;
  size_t plen;
  int rc;
  err_clear(err);

  if (fd < 0 || addr == NULL || size == 0) {
    return err_set(err, HIPD_EINVAL,
                   "cpu_runner_map: bad buffer (fd %d, %p, %zu bytes)", fd,
                   addr, size);
  }
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->nmaps; i++) {
    if (r->maps[i].addr == addr) {
      rc = err_set(err, HIPD_EEXIST, "a buffer is mapped at %p already", addr);
      goto out;
    }
  }
  if (ARRAY_GROW(r->maps, r->nmaps, r->capmaps, 8) != 0) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto out;
  }
  rc = request(r, CPU_OP_MAP, &req, sizeof(req), NULL, 0, fd, NULL, &p, &plen,
               err);
  if (rc == 0)
    r->maps[r->nmaps++] = (map_rec_t){addr, size, fd};
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_unmap(cpu_runner_t *r, void *addr, hipd_err_t *err)
{
  const uint8_t *p;
  size_t plen, i;
  int rc = 0;
  err_clear(err);

  pthread_mutex_lock(&r->lock);
  for (i = 0; i < r->nmaps && r->maps[i].addr != addr; i++)
    ;
  if (i == r->nmaps) {
    rc = err_set(err, HIPD_ENOENT, "no buffer is mapped at %p", addr);
    goto out;
  }
  cpu_map_req_t req = {(uint64_t)(uintptr_t)addr, r->maps[i].size};
  r->maps[i] = r->maps[--r->nmaps];
  /* A runner that is not running has nothing to unmap. */
  if (r->sock >= 0)
    rc = request(r, CPU_OP_UNMAP, &req, sizeof(req), NULL, 0, -1, NULL, &p,
                 &plen, err);
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_chunk(cpu_runner_t *r, uint32_t id, int fd, void *addr,
                     size_t size, hipd_err_t *err)
{
  cpu_chunk_req_t req = {
      .id = id, .addr = (uint64_t)(uintptr_t)addr, .size = size};
  const uint8_t *p;
  size_t plen;
  int rc;
  err_clear(err);

  if (fd < 0 || addr == NULL || size == 0) {
    return err_set(err, HIPD_EINVAL,
                   "cpu_runner_chunk: bad chunk (fd %d, %p, %zu bytes)", fd,
                   addr, size);
  }
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->nchunks; i++) {
    if (r->chunks[i].id == id) {
      rc = err_set(err, HIPD_EEXIST, "chunk %" PRIu32 " is known already", id);
      goto out;
    }
  }
  if (ARRAY_GROW(r->chunks, r->nchunks, r->capchunks, 8) != 0) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto out;
  }
  rc = request(r, CPU_OP_CHUNK, &req, sizeof(req), NULL, 0, fd, NULL, &p, &plen,
               err);
  if (rc == 0)
    r->chunks[r->nchunks++] = (chunk_rec_t){id, fd, addr, size};
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

/* Is @p chunk on record? Under r->lock. */
static int chunk_known(const cpu_runner_t *r, uint32_t chunk)
{
  for (size_t i = 0; i < r->nchunks; i++)
    if (r->chunks[i].id == chunk)
      return 1;
  return 0;
}

int cpu_runner_bmap(cpu_runner_t *r, uint32_t chunk, const cpu_bmap_ent_t *ents,
                    size_t n, hipd_err_t *err)
{
  const uint8_t *p;
  size_t plen;
  int rc = 0;
  err_clear(err);

  pthread_mutex_lock(&r->lock);
  if (!chunk_known(r, chunk)) {
    rc = err_set(err, HIPD_ENOENT, "no chunk %" PRIu32 " is known", chunk);
    goto out;
  }
  for (size_t done = 0; done < n && rc == 0;) {
    size_t k = n - done < CPU_BMAP_MAX ? n - done : CPU_BMAP_MAX;
    while (r->nbmaps + k > r->capbmaps) {
      if (ARRAY_GROW(r->bmaps, r->capbmaps, r->capbmaps, 8) != 0) {
        rc = err_set(err, HIPD_ENOMEM, "out of memory");
        goto out;
      }
    }
    /* Not through r->batch: a runner (re)started by request() replays
     * the record through it first. */
    cpu_bmap_req_t req = {.chunk = chunk, .count = (uint32_t)k};
    rc = request(r, CPU_OP_BMAP, &req, sizeof(req), ents + done,
                 k * sizeof(*ents), -1, NULL, &p, &plen, err);
    if (rc != 0) {
      /* The entries before the failed one are mapped: take them back, so
       * that nothing stays mapped that is not on record. */
      if (r->sock >= 0) {
        hipd_err_t ignored;
        request(r, CPU_OP_BUNMAP, &req, sizeof(req), ents + done,
                k * sizeof(*ents), -1, NULL, &p, &plen, &ignored);
      }
      break;
    }
    for (size_t i = 0; i < k; i++)
      r->bmaps[r->nbmaps++] = (bmap_rec_t){chunk, ents[done + i]};
    done += k;
  }
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_bunmap(cpu_runner_t *r, uint32_t chunk, uint64_t offset,
                      hipd_err_t *err)
{
  const uint8_t *p;
  size_t plen, i;
  int rc = 0;
  err_clear(err);

  pthread_mutex_lock(&r->lock);
  for (i = 0; i < r->nbmaps; i++)
    if (r->bmaps[i].chunk == chunk && r->bmaps[i].ent.offset == offset)
      break;
  if (i == r->nbmaps) {
    rc = err_set(err, HIPD_ENOENT,
                 "no buffer of chunk %" PRIu32 " is mapped at offset %" PRIu64,
                 chunk, offset);
    goto out;
  }
  cpu_bmap_req_t req = {.chunk = chunk, .count = 1};
  cpu_bmap_ent_t ent = r->bmaps[i].ent;
  r->bmaps[i] = r->bmaps[--r->nbmaps];
  /* A runner that is not running has nothing to unmap. */
  if (r->sock >= 0)
    rc = request(r, CPU_OP_BUNMAP, &req, sizeof(req), &ent, sizeof(ent), -1,
                 NULL, &p, &plen, err);
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_load(cpu_runner_t *r, const char *so_path, uint32_t *module,
                    hipd_err_t *err)
{
  mod_rec_t m;
  const uint8_t *p;
  size_t plen;
  int rc;
  err_clear(err);

  if (so_path == NULL || so_path[0] == '\0' || strlen(so_path) > CPU_MAX_PATH) {
    return err_set(err, HIPD_EINVAL, "cpu_runner_load: bad module path");
  }
  pthread_mutex_lock(&r->lock);
  if (ARRAY_GROW(r->mods, r->nmods, r->capmods, 8) != 0 ||
      (m.path = strdup(so_path)) == NULL) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto out;
  }
  int fd = module_open(so_path, err);
  if (fd < 0) {
    rc = err->code;
    free(m.path);
    goto out;
  }
  m.id = r->next_module++;
  cpu_load_req_t req = {.module = m.id};
  rc = request(r, CPU_OP_LOAD, &req, sizeof(req), so_path, strlen(so_path), fd,
               so_path, &p, &plen, err);
  close(fd);
  if (rc != 0) {
    free(m.path);
    goto out;
  }
  r->mods[r->nmods++] = m;
  *module = m.id;
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_unload(cpu_runner_t *r, uint32_t module, hipd_err_t *err)
{
  cpu_load_req_t req = {.module = module};
  const uint8_t *p;
  size_t plen, i;
  int rc = 0;
  err_clear(err);

  pthread_mutex_lock(&r->lock);
  for (i = 0; i < r->nmods && r->mods[i].id != module; i++)
    ;
  if (i == r->nmods) {
    rc = err_set(err, HIPD_ENOENT, "no module %" PRIu32 " is loaded", module);
    goto out;
  }
  free(r->mods[i].path);
  r->mods[i] = r->mods[--r->nmods];
  for (size_t k = 0; k < r->nkerns;) {
    if (r->kerns[k].module == module) {
      free(r->kerns[k].name);
      r->kerns[k] = r->kerns[--r->nkerns];
    } else {
      k++;
    }
  }
  if (r->sock >= 0)
    rc = request(r, CPU_OP_UNLOAD, &req, sizeof(req), NULL, 0, -1, NULL, &p,
                 &plen, err);
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_kernel(cpu_runner_t *r, uint32_t module, const char *name,
                      uint32_t *kernel, cpu_kernel_sig_t *sig, hipd_err_t *err)
{
  cpu_kernel_resp_t resp;
  kern_rec_t k;
  const uint8_t *p;
  size_t plen, i;
  int rc;
  err_clear(err);

  if (name == NULL || name[0] == '\0' || strlen(name) > CPU_MAX_NAME) {
    return err_set(err, HIPD_EINVAL, "cpu_runner_kernel: bad kernel name");
  }
  pthread_mutex_lock(&r->lock);
  for (i = 0; i < r->nmods && r->mods[i].id != module; i++)
    ;
  if (i == r->nmods) {
    rc = err_set(err, HIPD_ENOENT, "no module %" PRIu32 " is loaded", module);
    goto out;
  }
  for (i = 0; i < r->nkerns; i++) {
    if (r->kerns[i].module == module && strcmp(r->kerns[i].name, name) == 0) {
      *kernel = r->kerns[i].id;
      if (sig != NULL)
        *sig = r->kerns[i].sig;
      rc = 0;
      goto out;
    }
  }
  if (ARRAY_GROW(r->kerns, r->nkerns, r->capkerns, 8) != 0 ||
      (k.name = strdup(name)) == NULL) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto out;
  }
  k.id = r->next_kernel++;
  k.module = module;
  cpu_kernel_req_t req = {.module = module, .kernel = k.id};
  rc = request(r, CPU_OP_KERNEL, &req, sizeof(req), name, strlen(name), -1,
               NULL, &p, &plen, err);
  if (rc != 0) {
    free(k.name);
    goto out;
  }
  memcpy(&resp, p, plen < sizeof(resp) ? plen : sizeof(resp));
  if (plen < sizeof(resp) || resp.nargs > CPU_MAX_ARGS ||
      plen != sizeof(resp) + resp.nargs) {
    rc = err_set(err, HIPD_EPROTO,
                 "the CPU device runner sent a malformed signature");
    free(k.name);
    goto out;
  }
  memset(&k.sig, 0, sizeof(k.sig));
  k.sig.nargs = resp.nargs;
  memcpy(k.sig.types, p + sizeof(resp), resp.nargs);
  r->kerns[r->nkerns++] = k;
  *kernel = k.id;
  if (sig != NULL)
    *sig = k.sig;
  rc = 0;
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_launch(cpu_runner_t *r, uint32_t kernel, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t shared,
                      const cpu_arg_t *args, uint32_t nargs, drv_output_t *out,
                      hipd_err_t *err)
{
  cpu_launch_req_t req = {.kernel = kernel, .nargs = nargs, .shared = shared};
  char msg[256];
  const uint8_t *p;
  size_t plen, i;
  int rc;
  err_clear(err);

  rc = cpu_launch_check(grid, block, shared, msg, sizeof(msg));
  if (rc != 0)
    return err_set(err, rc, "%s", msg);
  memcpy(req.grid, grid, sizeof(req.grid));
  memcpy(req.block, block, sizeof(req.block));
  pthread_mutex_lock(&r->lock);
  for (i = 0; i < r->nkerns && r->kerns[i].id != kernel; i++)
    ;
  if (i == r->nkerns) {
    rc =
        err_set(err, HIPD_ENOKERNEL, "no kernel %" PRIu32 " is loaded", kernel);
    goto out;
  }
  if (nargs != r->kerns[i].sig.nargs) {
    rc = err_set(err, HIPD_ESIGNATURE,
                 "kernel '%s' takes %" PRIu32 " arguments, the launch passed "
                 "%" PRIu32,
                 r->kerns[i].name, r->kerns[i].sig.nargs, nargs);
    goto out;
  }
  pthread_mutex_lock(&r->abort_lock);
  r->launch_pid = r->pid;
  r->launch_launched = r->launched;
  pthread_mutex_unlock(&r->abort_lock);
  rc = request(r, CPU_OP_LAUNCH, &req, sizeof(req), args,
               (size_t)nargs * sizeof(cpu_arg_t), -1, NULL, &p, &plen, err);
  if (rc == 0 && plen >= sizeof(cpu_launch_resp_t)) {
    cpu_launch_resp_t h;
    memcpy(&h, p, sizeof(h));
    if (h.len <= plen - sizeof(h))
      drv_output_append(out, p + sizeof(h), h.len, h.dropped);
  }
  pthread_mutex_lock(&r->abort_lock);
  r->launch_pid = -1;
  pthread_mutex_unlock(&r->abort_lock);
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_abort(cpu_runner_t *r)
{
  hipd_err_t e;
  int killed = 0;

  pthread_mutex_lock(&r->abort_lock);
  if (r->launch_pid > 0) {
    if (r->launch_launched)
      killed = cpu_launcher_kill(r->launch_pid, SIGKILL, &e) == 0;
    else
      killed = kill(r->launch_pid, SIGKILL) == 0;
  }
  pthread_mutex_unlock(&r->abort_lock);
  return killed;
}

int cpu_runner_pid(cpu_runner_t *r)
{
  int pid;

  pthread_mutex_lock(&r->lock);
  pid = r->pid;
  pthread_mutex_unlock(&r->lock);
  return pid;
}

unsigned cpu_runner_restarts(cpu_runner_t *r)
{
  unsigned n;

  pthread_mutex_lock(&r->lock);
  n = r->restarts;
  pthread_mutex_unlock(&r->lock);
  return n;
}

unsigned cpu_runner_workers(cpu_runner_t *r)
{
  unsigned n;

  pthread_mutex_lock(&r->lock);
  n = r->workers;
  pthread_mutex_unlock(&r->lock);
  return n;
}
