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

/* How many runner processes one cpu_runner_t may run at once. A second
 * starts only when a launch finds every running one busy with a launch of
 * its own, so that a long (or endless) kernel on one stream does not hold
 * up the others; past this many, a launch waits for one to finish. */
#define RUNNER_PROCS_MAX 4

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

/* One runner process. Its lock is held for every exchange with it, a
 * launch included; the runner's lock (r->lock) is taken after it, never
 * before it except by trylock, so that nothing waits for a launch while it
 * holds r->lock. */
typedef struct {
  pthread_mutex_t lock;
  unsigned idx;     /* in r->procs */
  pid_t pid;        /* -1: none running */
  int launched;     /* started by the launcher */
  int sock;         /* -1: none running */
  unsigned workers; /* its worker threads */
  uint64_t applied; /* the last log entry it has (under r->lock too) */
  int stale;        /* missed an entry the log has not: start over */
  uint8_t buf[CPU_PROTO_MAX_MSG]; /* the last response */
} proc_t;

/* A change to the record that a process busy with a launch when it was
 * made applies before its next request. */
typedef struct {
  uint64_t seq;
  uint32_t
      op; /* CPU_OP_MAP, UNMAP, CHUNK, BMAP, BUNMAP, LOAD, UNLOAD, KERNEL */
  union {
    cpu_map_req_t map;
    cpu_chunk_req_t chunk;
    cpu_bmap_req_t bmap;
    cpu_load_req_t load;
    cpu_kernel_req_t kernel;
  } req;
  size_t reqlen;
  void *extra; /* owned: BMAP entries, a module's path, a kernel's name */
  size_t extralen;
  int fd; /* owned duplicate of the caller's descriptor, or -1 */
} logent_t;

/* A buffer unmapped while some process still mapped it: its range goes
 * back to the caller (cpu_runner_reclaim) once every process applied the
 * unmap of entry @p seq. */
typedef struct {
  uint64_t seq;
  uint32_t chunk;
  uint64_t offset;
} release_t;

struct cpu_runner {
  /* The record, the log, the process slots. */
  pthread_mutex_t lock;
  pthread_cond_t idle; /* a process was given back */
  /* cpu_runner_abort() kills the processes running a launch without
   * r->lock: under this lock, taken around launch_pid and the reap, so that
   * a reaped pid is never signalled. */
  pthread_mutex_t abort_lock;
  pid_t launch_pid[RUNNER_PROCS_MAX]; /* running a launch now, else -1 */
  int launch_launched[RUNNER_PROCS_MAX];
  proc_t *procs[RUNNER_PROCS_MAX];
  unsigned nprocs;
  char *path;
  unsigned workers_req;
  unsigned timeout_ms;
  uint64_t reserve_addr, reserve_size;
  int drop_ids;
  uid_t uid;
  gid_t gid;
  unsigned restarts; /* atomic */
  map_rec_t *maps;
  size_t nmaps, capmaps;
  chunk_rec_t *chunks;
  size_t nchunks, capchunks;
  bmap_rec_t *bmaps;
  size_t nbmaps, capbmaps;
  cpu_bmap_ent_t batch[CPU_BMAP_MAX]; /* BMAP entries being replayed */
  mod_rec_t *mods;
  size_t nmods, capmods;
  kern_rec_t *kerns;
  size_t nkerns, capkerns;
  uint32_t next_module, next_kernel;
  logent_t *log;
  size_t nlog, caplog;
  uint64_t seq; /* the last entry made */
  release_t *pending, *released;
  size_t npending, cappending, nreleased, capreleased;
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
static int rpc(proc_t *p, uint32_t op, const void *p1, size_t l1,
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
  while (sendmsg(p->sock, &mh, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR)
      return RPC_DEAD; /* EPIPE, ECONNRESET: it is gone */
  }
  for (;;) {
    struct pollfd pfd = {.fd = p->sock, .events = POLLIN};
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
    n = recv(p->sock, p->buf, sizeof(p->buf), 0);
    if (n < 0 && errno == EINTR)
      continue;
    break;
  }
  if (n <= 0)
    return RPC_DEAD; /* end of file: it exited or was killed */
  memcpy(&resp, p->buf, (size_t)n < sizeof(resp) ? (size_t)n : sizeof(resp));
  if ((size_t)n < sizeof(resp) || resp.op != op ||
      resp.len != (size_t)n - sizeof(resp))
    return RPC_DEAD; /* garbled: treat the runner as broken */
  *status = resp.status;
  *payload = p->buf + sizeof(resp);
  *plen = resp.len;
  return RPC_OK;
}

/* ------------------------------------------------------ process control */

/* Collect process @p p's exit status into @p st, killing it first if
 * @p kill_first or if it does not exit within EXIT_GRACE_MS. */
static void proc_reap_now(proc_t *p, int kill_first, int *st);

static void proc_reap(cpu_runner_t *r, proc_t *p, int kill_first, int *st)
{
  pthread_mutex_lock(&r->abort_lock);
  r->launch_pid[p->idx] = -1; /* no abort once the reap began */
  pthread_mutex_unlock(&r->abort_lock);
  proc_reap_now(p, kill_first, st);
}

static void proc_reap_now(proc_t *p, int kill_first, int *st)
{
  int64_t until = (int64_t)util_now_ms() + EXIT_GRACE_MS;

  if (p->sock >= 0)
    close(p->sock);
  p->sock = -1;
  if (p->pid <= 0)
    return;
  if (p->launched) {
    /* The launcher's child (and maybe another uid): it kills and reaps. */
    hipd_err_t e;
    int rc;
    if (kill_first)
      cpu_launcher_kill(p->pid, SIGKILL, &e);
    rc = cpu_launcher_wait(p->pid, EXIT_GRACE_MS, st, &e);
    if (rc == HIPD_ETIMEDOUT) {
      cpu_launcher_kill(p->pid, SIGKILL, &e);
      rc = cpu_launcher_wait(p->pid, UINT32_MAX, st, &e);
    }
    if (rc != 0)
      *st = SIGKILL; /* the launcher is gone: it killed its runners */
    p->pid = -1;
    p->workers = 0;
    return;
  }
  if (kill_first)
    kill(p->pid, SIGKILL);
  for (;;) {
    pid_t w = waitpid(p->pid, st, WNOHANG);
    if (w == p->pid || (w < 0 && errno != EINTR))
      break;
    if (w == 0 && (int64_t)util_now_ms() >= until) {
      kill(p->pid, SIGKILL);
      while (waitpid(p->pid, st, 0) < 0 && errno == EINTR)
        ;
      break;
    }
    if (w == 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  p->pid = -1;
  p->workers = 0;
}

/* Start a runner process and greet it. */
static int proc_spawn(cpu_runner_t *r, proc_t *p, hipd_err_t *err)
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
  const uint8_t *pl;
  size_t plen;
  pid_t pid;

  p->launched = 0;
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
    p->pid = pid;
    p->sock = sv[0];
    p->launched = 1;
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
  p->pid = pid;
  p->sock = sv[0];

hello:
  e = rpc(p, CPU_OP_HELLO, &hello, sizeof(hello), NULL, 0, -1,
          CONTROL_TIMEOUT_MS, &status, &pl, &plen);
  if (e != RPC_OK) {
    char why[64];
    proc_reap(r, p, e == RPC_TIMEOUT, &st);
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
                     (int)plen, (const char *)pl);
    proc_reap(r, p, 0, &st);
    return rc;
  }
  memcpy(&hresp, pl, sizeof(hresp));
  p->workers = hresp.workers;
  return 0;
}
static int send_map(proc_t *p, const map_rec_t *m, int32_t *status,
                    const uint8_t **pl, size_t *plen)
{
  cpu_map_req_t req = {(uint64_t)(uintptr_t)m->addr, m->size};

  return rpc(p, CPU_OP_MAP, &req, sizeof(req), NULL, 0, m->fd,
             CONTROL_TIMEOUT_MS, status, pl, plen);
}

static int send_chunk(proc_t *p, const chunk_rec_t *c, int32_t *status,
                      const uint8_t **pl, size_t *plen)
{
  cpu_chunk_req_t req = {
      .id = c->id, .addr = (uint64_t)(uintptr_t)c->addr, .size = c->size};

  return rpc(p, CPU_OP_CHUNK, &req, sizeof(req), NULL, 0, c->fd,
             CONTROL_TIMEOUT_MS, status, pl, plen);
}

/* BMAP of the @p n entries in r->batch. */
static int send_batch(cpu_runner_t *r, proc_t *p, uint32_t chunk, size_t n,
                      int32_t *status, const uint8_t **pl, size_t *plen)
{
  cpu_bmap_req_t req = {.chunk = chunk, .count = (uint32_t)n};

  return rpc(p, CPU_OP_BMAP, &req, sizeof(req), r->batch,
             n * sizeof(r->batch[0]), -1, CONTROL_TIMEOUT_MS, status, pl, plen);
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

static int send_load(cpu_runner_t *r, proc_t *p, const mod_rec_t *m, int fd,
                     int32_t *status, const uint8_t **pl, size_t *plen)
{
  cpu_load_req_t req = {.module = m->id};

  return rpc(p, CPU_OP_LOAD, &req, sizeof(req), m->path, strlen(m->path), fd,
             r->timeout_ms, status, pl, plen);
}

static int send_kernel(proc_t *p, uint32_t module, uint32_t id,
                       const char *name, int32_t *status, const uint8_t **pl,
                       size_t *plen)
{
  cpu_kernel_req_t req = {.module = module, .kernel = id};

  return rpc(p, CPU_OP_KERNEL, &req, sizeof(req), name, strlen(name), -1,
             CONTROL_TIMEOUT_MS, status, pl, plen);
}

/* Append "; <what>: <message>" to @p err for a failed replay step. */
static void note_replay(hipd_err_t *err, const char *what, const uint8_t *pl,
                        size_t plen)
{
  err_append(err, "%s%s: %.*s", err->msg[0] ? "; " : "", what, (int)plen,
             (const char *)pl);
}

/*
 * Start process @p p and give it every mapping, module and kernel on
 * record; it is then up to date with the log. Under r->lock and p->lock.
 * @return 0; HIPD_EDEVLOST with @p err describing the first failures if
 * some replay step failed (the process stays up); the spawn error if no
 * process could be started.
 */
static int proc_start(cpu_runner_t *r, proc_t *p, hipd_err_t *err)
{
  int rc = proc_spawn(r, p, err);
  int failed = 0;
  int32_t status;
  const uint8_t *pl;
  size_t plen;
  char what[96];

  if (rc != 0)
    return rc;
  err_clear(err);
  p->applied = r->seq;
  p->stale = 0;
  for (size_t i = 0; i < r->nchunks; i++) {
    const chunk_rec_t *c = &r->chunks[i];
    size_t n = 0;
    if (send_chunk(p, c, &status, &pl, &plen) != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "buffer chunk %" PRIu32, c->id);
      note_replay(err, what, pl, plen);
      failed = 1;
      continue;
    }
    /* Its buffers, as many to a request as fit. */
    for (size_t b = 0; b <= r->nbmaps; b++) {
      if (b < r->nbmaps && r->bmaps[b].chunk == c->id)
        r->batch[n++] = r->bmaps[b].ent;
      if (n == 0 || (n < CPU_BMAP_MAX && b < r->nbmaps))
        continue;
      if (send_batch(r, p, c->id, n, &status, &pl, &plen) != RPC_OK)
        goto dead;
      if (status < 0) {
        snprintf(what, sizeof(what), "buffers of chunk %" PRIu32, c->id);
        note_replay(err, what, pl, plen);
        failed = 1;
      }
      n = 0;
    }
  }
  for (size_t i = 0; i < r->nmaps; i++) {
    if (send_map(p, &r->maps[i], &status, &pl, &plen) != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "buffer %p", r->maps[i].addr);
      note_replay(err, what, pl, plen);
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
    lr = send_load(r, p, &r->mods[i], fd, &status, &pl, &plen);
    close(fd);
    if (lr != RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "module %" PRIu32, r->mods[i].id);
      note_replay(err, what, pl, plen);
      failed = 1;
    }
  }
  for (size_t i = 0; i < r->nkerns; i++) {
    kern_rec_t *k = &r->kerns[i];
    if (send_kernel(p, k->module, k->id, k->name, &status, &pl, &plen) !=
        RPC_OK)
      goto dead;
    if (status < 0) {
      snprintf(what, sizeof(what), "kernel %s", k->name);
      note_replay(err, what, pl, plen);
      failed = 1;
    }
  }
  if (failed)
    return err->code = HIPD_EDEVLOST;
  return 0;

dead : {
  int st = 0;
  char why[64];
  proc_reap(r, p, 1, &st);
  describe_status(st, why, sizeof(why));
  return err_set(err, HIPD_EDEVLOST,
                 "the restarted CPU device runner died (%s)", why);
}
}

/* Process @p p died (or hung) during request @p op: describe why in @p err,
 * reap it and start a new one. Under r->lock and p->lock. @return the code
 * for the failed request. */
static int proc_lost(cpu_runner_t *r, proc_t *p, uint32_t op, int timed_out,
                     const char *detail, hipd_err_t *err)
{
  int code = op != CPU_OP_LAUNCH ? HIPD_EDEVICE
             : timed_out         ? HIPD_ETIMEDOUT
                                 : HIPD_ELAUNCH;
  hipd_err_t restart;
  char why[64];
  int st = 0;

  proc_reap(r, p, timed_out, &st);
  describe_status(st, why, sizeof(why));
  __atomic_add_fetch(&r->restarts, 1, __ATOMIC_RELAXED);
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
  if (proc_start(r, p, &restart) != 0)
    err_append(err, "; restarting the runner failed: %s", restart.msg);
  return code;
}

/* ------------------------------------------------------------- the log */

static void logent_free(logent_t *e)
{
  free(e->extra);
  if (e->fd >= 0)
    close(e->fd);
}

/* Send entry @p e to process @p p. */
static int send_entry(cpu_runner_t *r, proc_t *p, const logent_t *e,
                      int32_t *status, const uint8_t **pl, size_t *plen)
{
  unsigned timeout = e->op == CPU_OP_LOAD ? r->timeout_ms : CONTROL_TIMEOUT_MS;
  hipd_err_t oe;
  int fd = e->fd, rc;

  if (e->op == CPU_OP_LOAD && (fd = module_open(e->extra, &oe)) < 0) {
    *status = oe.code;
    *pl = (const uint8_t *)"the module file is gone";
    *plen = strlen((const char *)*pl);
    return RPC_OK;
  }
  rc = rpc(p, e->op, &e->req, e->reqlen, e->extra, e->extralen, fd, timeout,
           status, pl, plen);
  if (e->op == CPU_OP_LOAD)
    close(fd);
  return rc;
}

/*
 * Bring process @p p up to date with the log: the changes made while it ran
 * a launch. Under r->lock and p->lock. A process that dies or refuses an
 * entry is replaced by a new one given the whole record (proc_start).
 * @return 0, or proc_start's error.
 */
static int proc_sync(cpu_runner_t *r, proc_t *p, hipd_err_t *err)
{
  int32_t status;
  const uint8_t *pl;
  size_t plen;
  int st;

  if (p->stale && p->sock >= 0) {
    proc_reap(r, p, 1, &st);
    return proc_start(r, p, err);
  }
  for (size_t i = 0; i < r->nlog && p->sock >= 0; i++) {
    const logent_t *e = &r->log[i];
    if (e->seq <= p->applied)
      continue;
    if (send_entry(r, p, e, &status, &pl, &plen) != RPC_OK || status < 0) {
      /* Its state is not the record's: start over. */
      proc_reap(r, p, 1, &st);
      __atomic_add_fetch(&r->restarts, 1, __ATOMIC_RELAXED);
      return proc_start(r, p, err);
    }
    p->applied = e->seq;
  }
  if (p->sock < 0)
    return proc_start(r, p, err);
  p->applied = r->seq;
  return 0;
}

/* Drop the entries every running process has, and hand back the buffers
 * no process maps any more. Under r->lock. */
static void log_trim(cpu_runner_t *r)
{
  uint64_t low = r->seq;
  size_t keep = 0;

  for (unsigned i = 0; i < r->nprocs; i++)
    if (r->procs[i]->sock >= 0 && r->procs[i]->applied < low)
      low = r->procs[i]->applied;
  for (size_t i = 0; i < r->nlog; i++) {
    if (r->log[i].seq <= low)
      logent_free(&r->log[i]);
    else
      r->log[keep++] = r->log[i];
  }
  r->nlog = keep;
  keep = 0;
  for (size_t i = 0; i < r->npending; i++) {
    if (r->pending[i].seq <= low &&
        ARRAY_GROW(r->released, r->nreleased, r->capreleased, 8) == 0)
      r->released[r->nreleased++] = r->pending[i];
    else
      r->pending[keep++] = r->pending[i];
  }
  r->npending = keep;
}

/* Is some running process behind the log? Under r->lock. */
static int log_behind(const cpu_runner_t *r)
{
  for (unsigned i = 0; i < r->nprocs; i++)
    if (r->procs[i]->sock >= 0 && r->procs[i]->applied < r->seq)
      return 1;
  return 0;
}

/* Keep entry @p e (numbered, ownership moves here) for the processes
 * behind it; if there is no room, they start over instead. Under r->lock. */
static void log_add(cpu_runner_t *r, logent_t *e)
{
  if (!log_behind(r)) {
    logent_free(e);
    return;
  }
  if (ARRAY_GROW(r->log, r->nlog, r->caplog, 8) != 0) {
    for (unsigned i = 0; i < r->nprocs; i++)
      if (r->procs[i]->sock >= 0 && r->procs[i]->applied < r->seq)
        r->procs[i]->stale = 1;
    logent_free(e);
    return;
  }
  r->log[r->nlog++] = *e;
}

/*
 * Apply change @p e (ownership moves here) to every running process that is
 * not running a launch now, and put it in the log for those that are. Under
 * r->lock. If a process refuses it and @p undo is given, the change is taken
 * back from those that took it and the refusal is returned; without @p undo
 * (removals) a process that refuses is replaced by a fresh one.
 * @return 0 or the refusal's code, with @p err set.
 */
static int broadcast(cpu_runner_t *r, logent_t *e, const logent_t *undo,
                     hipd_err_t *err)
{
  int took[RUNNER_PROCS_MAX] = {0};
  int32_t status;
  const uint8_t *pl;
  size_t plen;
  int rc = 0, st;
  hipd_err_t ignored;

  e->seq = r->seq + 1;
  for (unsigned i = 0; i < r->nprocs && rc == 0; i++) {
    proc_t *p = r->procs[i];
    if (p->sock < 0 || pthread_mutex_trylock(&p->lock) != 0)
      continue; /* not running, or busy: it takes the entry from the log */
    if (p->applied < r->seq)
      proc_sync(r, p, &ignored);
    if (p->sock < 0) {
      pthread_mutex_unlock(&p->lock);
      continue;
    }
    int sr = send_entry(r, p, e, &status, &pl, &plen);
    if (sr != RPC_OK) {
      proc_reap(r, p, 1, &st); /* started again with the record when used */
    } else if (status < 0 && undo != NULL) {
      rc = err_set(err, status, "%.*s", (int)plen, (const char *)pl);
    } else if (status < 0) {
      proc_reap(r, p, 1, &st);
      __atomic_add_fetch(&r->restarts, 1, __ATOMIC_RELAXED);
    } else {
      took[i] = 1;
      p->applied = e->seq;
    }
    pthread_mutex_unlock(&p->lock);
  }
  if (rc != 0) {
    for (unsigned i = 0; i < r->nprocs; i++) {
      proc_t *p = r->procs[i];
      if (!took[i] || pthread_mutex_trylock(&p->lock) != 0)
        continue;
      if (undo->op == 0 ||
          send_entry(r, p, undo, &status, &pl, &plen) != RPC_OK || status < 0)
        proc_reap(r, p, 1, &st);
      p->applied = r->seq;
      pthread_mutex_unlock(&p->lock);
    }
    logent_free(e);
    return rc;
  }
  r->seq = e->seq;
  log_add(r, e);
  return 0;
}

/* A log entry for @p op with request @p req and @p extra (copied), and a
 * duplicate of @p fd. @return 0 or HIPD_ENOMEM/HIPD_EIO with @p err set. */
static int logent_make(logent_t *e, uint32_t op, const void *req, size_t reqlen,
                       const void *extra, size_t extralen, int fd,
                       hipd_err_t *err)
{
  memset(e, 0, sizeof(*e));
  e->op = op;
  e->fd = -1;
  memcpy(&e->req, req, reqlen);
  e->reqlen = reqlen;
  if (extralen > 0) {
    /* One more byte: a path or name is a C string too. */
    if ((e->extra = calloc(1, extralen + 1)) == NULL)
      return err_set(err, HIPD_ENOMEM, "out of memory");
    memcpy(e->extra, extra, extralen);
    e->extralen = extralen;
  }
  if (fd >= 0 && (e->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
    free(e->extra);
    return err_set(err, HIPD_EIO, "cannot duplicate a descriptor: %s",
                   strerror(errno));
  }
  return 0;
}

/* ----------------------------------------------------- process slots */

/*
 * Take a process for a request of its own (a launch, a load, a lookup):
 * the first one not busy, else a new one while there are fewer than
 * RUNNER_PROCS_MAX, else wait for one. It is started and brought up to
 * date. @return 0 with r->lock and (*out)->lock held; or an error with
 * neither held and @p err set.
 */
static int proc_take(cpu_runner_t *r, proc_t **out, hipd_err_t *err)
{
  proc_t *p = NULL;
  int rc = 0;

  pthread_mutex_lock(&r->lock);
  while (p == NULL) {
    for (unsigned i = 0; i < r->nprocs && p == NULL; i++)
      if (pthread_mutex_trylock(&r->procs[i]->lock) == 0)
        p = r->procs[i];
    if (p != NULL)
      break;
    if (r->nprocs < RUNNER_PROCS_MAX) {
      p = calloc(1, sizeof(*p));
      if (p == NULL) {
        pthread_mutex_unlock(&r->lock);
        return err_set(err, HIPD_ENOMEM, "out of memory");
      }
      pthread_mutex_init(&p->lock, NULL);
      /* A try, as every process lock taken under r->lock: nothing ever
       * waits for one while holding r->lock (and it is free: new). */
      if (pthread_mutex_trylock(&p->lock) != 0)
        abort();
      p->idx = r->nprocs;
      p->pid = -1;
      p->sock = -1;
      r->procs[r->nprocs++] = p;
      break;
    }
    pthread_cond_wait(&r->idle, &r->lock);
  }
  err_clear(err);
  if (p->sock < 0)
    rc = proc_start(r, p, err);
  else if (p->applied < r->seq)
    rc = proc_sync(r, p, err);
  if (rc != 0 && p->sock < 0) {
    pthread_mutex_unlock(&p->lock);
    pthread_cond_signal(&r->idle);
    pthread_mutex_unlock(&r->lock);
    return rc;
  }
  err_clear(err); /* replay notes of a process started above */
  *out = p;
  return 0;
}

/* Give back @p p, taken by proc_take(); r->lock is held if @p locked. It
 * first applies what changed while it ran, so that the buffers unmapped
 * meanwhile are out of its reach and their ranges can be reclaimed. */
static void proc_give(cpu_runner_t *r, proc_t *p, int locked)
{
  hipd_err_t ignored;

  if (!locked)
    pthread_mutex_lock(&r->lock);
  if (p->sock >= 0 && p->applied < r->seq)
    proc_sync(r, p, &ignored);
  pthread_mutex_unlock(&p->lock);
  log_trim(r);
  pthread_cond_signal(&r->idle);
  pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------- the API */

int cpu_runner_start(const cpu_runner_cfg_t *cfg, cpu_runner_t **out,
                     hipd_err_t *err)
{
  cpu_runner_cfg_t dflt = {0};
  const char *path;
  cpu_runner_t *r;
  proc_t *p;
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
  p = calloc(1, sizeof(*p));
  if (r == NULL || p == NULL || (r->path = strdup(path)) == NULL) {
    free(r);
    free(p);
    return err_set(err, HIPD_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->idle, NULL);
  pthread_mutex_init(&r->abort_lock, NULL);
  for (unsigned i = 0; i < RUNNER_PROCS_MAX; i++)
    r->launch_pid[i] = -1;
  r->workers_req = cfg->workers;
  r->timeout_ms = cfg->timeout_ms;
  r->reserve_addr = (uint64_t)(uintptr_t)cfg->reserve_addr;
  r->reserve_size = cfg->reserve_size;
  r->drop_ids = cfg->drop_ids;
  r->uid = cfg->uid;
  r->gid = cfg->gid;
  r->next_module = 1;
  r->next_kernel = 1;
  pthread_mutex_init(&p->lock, NULL);
  p->pid = -1;
  p->sock = -1;
  r->procs[0] = p;
  r->nprocs = 1;
  rc = proc_spawn(r, p, err);
  if (rc != 0) {
    pthread_mutex_destroy(&p->lock);
    free(p);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->idle);
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
  for (unsigned i = 0; i < r->nprocs; i++) {
    proc_reap(r, r->procs[i], 0, &st);
    pthread_mutex_destroy(&r->procs[i]->lock);
    free(r->procs[i]);
  }
  for (size_t i = 0; i < r->nmods; i++)
    free(r->mods[i].path);
  for (size_t i = 0; i < r->nkerns; i++)
    free(r->kerns[i].name);
  for (size_t i = 0; i < r->nlog; i++)
    logent_free(&r->log[i]);
  free(r->log);
  free(r->pending);
  free(r->released);
  free(r->maps);
  free(r->chunks);
  free(r->bmaps);
  free(r->mods);
  free(r->kerns);
  free(r->path);
  pthread_mutex_destroy(&r->lock);
  pthread_cond_destroy(&r->idle);
  pthread_mutex_destroy(&r->abort_lock);
  free(r);
}

int cpu_runner_map(cpu_runner_t *r, int fd, void *addr, size_t size,
                   hipd_err_t *err)
{
  cpu_map_req_t req = {(uint64_t)(uintptr_t)addr, size};
  logent_t e, undo;
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
  if ((rc = logent_make(&e, CPU_OP_MAP, &req, sizeof(req), NULL, 0, fd, err)) !=
      0)
    goto out;
  undo = (logent_t){
      .op = CPU_OP_UNMAP, .req.map = req, .reqlen = sizeof(req), .fd = -1};
  rc = broadcast(r, &e, &undo, err);
  if (rc == 0)
    r->maps[r->nmaps++] = (map_rec_t){addr, size, fd};
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_unmap(cpu_runner_t *r, void *addr, hipd_err_t *err)
{
  logent_t e;
  size_t i;
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
  if ((rc = logent_make(&e, CPU_OP_UNMAP, &req, sizeof(req), NULL, 0, -1,
                        err)) == 0)
    rc = broadcast(r, &e, NULL, err);
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_chunk(cpu_runner_t *r, uint32_t id, int fd, void *addr,
                     size_t size, hipd_err_t *err)
{
  cpu_chunk_req_t req = {
      .id = id, .addr = (uint64_t)(uintptr_t)addr, .size = size};
  /* A chunk cannot be taken back: a process that took it before another
   * refused it is started over (op 0). */
  logent_t e, undo = {.op = 0, .fd = -1};
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
  if ((rc = logent_make(&e, CPU_OP_CHUNK, &req, sizeof(req), NULL, 0, fd,
                        err)) != 0)
    goto out;
  rc = broadcast(r, &e, &undo, err);
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
  int rc = 0;
  err_clear(err);

  pthread_mutex_lock(&r->lock);
  if (!chunk_known(r, chunk)) {
    rc = err_set(err, HIPD_ENOENT, "no chunk %" PRIu32 " is known", chunk);
    goto out;
  }
  for (size_t done = 0; done < n && rc == 0;) {
    size_t k = n - done < CPU_BMAP_MAX ? n - done : CPU_BMAP_MAX;
    cpu_bmap_req_t req = {.chunk = chunk, .count = (uint32_t)k};
    logent_t e, undo;
    while (r->nbmaps + k > r->capbmaps) {
      if (ARRAY_GROW(r->bmaps, r->capbmaps, r->capbmaps, 8) != 0) {
        rc = err_set(err, HIPD_ENOMEM, "out of memory");
        goto out;
      }
    }
    if ((rc = logent_make(&e, CPU_OP_BMAP, &req, sizeof(req), ents + done,
                          k * sizeof(*ents), -1, err)) != 0)
      break;
    /* The same entries, unmapped, from those that mapped them. */
    undo = (logent_t){.op = CPU_OP_BUNMAP,
                      .req.bmap = req,
                      .reqlen = sizeof(req),
                      .extra = (void *)(ents + done),
                      .extralen = k * sizeof(*ents),
                      .fd = -1};
    if ((rc = broadcast(r, &e, &undo, err)) != 0)
      break;
    for (size_t i = 0; i < k; i++)
      r->bmaps[r->nbmaps++] = (bmap_rec_t){chunk, ents[done + i]};
    done += k;
  }
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_bunmap(cpu_runner_t *r, uint32_t chunk, uint64_t offset,
                      int *released, hipd_err_t *err)
{
  cpu_bmap_req_t req = {.chunk = chunk, .count = 1};
  logent_t e;
  size_t i;
  int rc = 0;
  err_clear(err);

  *released = 1;
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
  cpu_bmap_ent_t ent = r->bmaps[i].ent;
  r->bmaps[i] = r->bmaps[--r->nbmaps];
  if ((rc = logent_make(&e, CPU_OP_BUNMAP, &req, sizeof(req), &ent, sizeof(ent),
                        -1, err)) != 0)
    goto out;
  broadcast(r, &e, NULL, err);
  err_clear(err);
  /* A process still running a launch maps it until that launch ends: the
   * range must not be reused before then. */
  if (log_behind(r)) {
    if (ARRAY_GROW(r->pending, r->npending, r->cappending, 8) != 0) {
      /* No room to remember it: keep it out of use for good. */
      *released = 0;
      goto out;
    }
    r->pending[r->npending++] = (release_t){r->seq, chunk, offset};
    *released = 0;
  }
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

size_t cpu_runner_reclaim(cpu_runner_t *r, uint32_t chunk, uint64_t *offsets,
                          size_t max)
{
  size_t n = 0, keep = 0;

  pthread_mutex_lock(&r->lock);
  log_trim(r);
  for (size_t i = 0; i < r->nreleased; i++) {
    if (r->released[i].chunk == chunk && n < max)
      offsets[n++] = r->released[i].offset;
    else
      r->released[keep++] = r->released[i];
  }
  r->nreleased = keep;
  pthread_mutex_unlock(&r->lock);
  return n;
}

int cpu_runner_load(cpu_runner_t *r, const char *so_path, uint32_t *module,
                    hipd_err_t *err)
{
  mod_rec_t m;
  logent_t e;
  proc_t *p;
  int32_t status;
  const uint8_t *pl;
  size_t plen;
  int rc, fd, sr;
  err_clear(err);

  if (so_path == NULL || so_path[0] == '\0' || strlen(so_path) > CPU_MAX_PATH) {
    return err_set(err, HIPD_EINVAL, "cpu_runner_load: bad module path");
  }
  if ((fd = module_open(so_path, err)) < 0)
    return err->code;
  if ((rc = proc_take(r, &p, err)) != 0) {
    close(fd);
    return rc;
  }
  if (ARRAY_GROW(r->mods, r->nmods, r->capmods, 8) != 0 ||
      (m.path = strdup(so_path)) == NULL) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    close(fd);
    proc_give(r, p, 1);
    return rc;
  }
  m.id = r->next_module++;
  /* Its constructors run now, for as long as the launch timeout allows:
   * without r->lock, so that allocations go on meanwhile. */
  pthread_mutex_unlock(&r->lock);
  sr = send_load(r, p, &m, fd, &status, &pl, &plen);
  close(fd);
  pthread_mutex_lock(&r->lock);
  if (sr != RPC_OK) {
    rc = proc_lost(r, p, CPU_OP_LOAD, sr == RPC_TIMEOUT, so_path, err);
  } else if (status < 0) {
    rc = err_set(err, status, "%.*s", (int)plen, (const char *)pl);
  } else {
    cpu_load_req_t req = {.module = m.id};
    pid_t pid = p->pid;
    /* It missed what changed meanwhile; the others get the load from the
     * log. If catching up started it over, the new process lacks the
     * module (not on record yet) and takes it from the log too. */
    if (p->applied < r->seq) {
      hipd_err_t ignored;
      proc_sync(r, p, &ignored);
    }
    rc = logent_make(&e, CPU_OP_LOAD, &req, sizeof(req), so_path,
                     strlen(so_path), -1, err);
    if (rc == 0) {
      r->mods[r->nmods++] = m;
      *module = m.id;
      e.seq = ++r->seq;
      if (p->sock >= 0 && p->pid == pid && p->applied == e.seq - 1)
        p->applied = e.seq;
      log_add(r, &e);
      proc_give(r, p, 1);
      return 0;
    }
  }
  free(m.path);
  proc_give(r, p, 1);
  return rc;
}

int cpu_runner_unload(cpu_runner_t *r, uint32_t module, hipd_err_t *err)
{
  cpu_load_req_t req = {.module = module};
  logent_t e;
  size_t i;
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
  /* A process running one of its kernels unloads it once that ends. */
  if ((rc = logent_make(&e, CPU_OP_UNLOAD, &req, sizeof(req), NULL, 0, -1,
                        err)) == 0)
    rc = broadcast(r, &e, NULL, err);
out:
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int cpu_runner_kernel(cpu_runner_t *r, uint32_t module, const char *name,
                      uint32_t *kernel, cpu_kernel_sig_t *sig, hipd_err_t *err)
{
  cpu_kernel_resp_t resp;
  kern_rec_t k;
  logent_t e;
  proc_t *p;
  int32_t status;
  const uint8_t *pl;
  size_t plen, i;
  int rc, sr;
  err_clear(err);

  if (name == NULL || name[0] == '\0' || strlen(name) > CPU_MAX_NAME) {
    return err_set(err, HIPD_EINVAL, "cpu_runner_kernel: bad kernel name");
  }
  pthread_mutex_lock(&r->lock);
  for (i = 0; i < r->nmods && r->mods[i].id != module; i++)
    ;
  if (i == r->nmods) {
    pthread_mutex_unlock(&r->lock);
    return err_set(err, HIPD_ENOENT, "no module %" PRIu32 " is loaded", module);
  }
  for (i = 0; i < r->nkerns; i++) {
    if (r->kerns[i].module == module && strcmp(r->kerns[i].name, name) == 0) {
      *kernel = r->kerns[i].id;
      if (sig != NULL)
        *sig = r->kerns[i].sig;
      pthread_mutex_unlock(&r->lock);
      return 0;
    }
  }
  pthread_mutex_unlock(&r->lock);
  if ((rc = proc_take(r, &p, err)) != 0)
    return rc;
  /* Looked up meanwhile by another thread, or its module unloaded? */
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
  sr = send_kernel(p, module, k.id, name, &status, &pl, &plen);
  if (sr != RPC_OK) {
    rc = proc_lost(r, p, CPU_OP_KERNEL, sr == RPC_TIMEOUT, NULL, err);
    free(k.name);
    goto out;
  }
  if (status < 0) {
    rc = err_set(err, status, "%.*s", (int)plen, (const char *)pl);
    free(k.name);
    goto out;
  }
  memcpy(&resp, pl, plen < sizeof(resp) ? plen : sizeof(resp));
  if (plen < sizeof(resp) || resp.nargs > CPU_MAX_ARGS ||
      plen != sizeof(resp) + resp.nargs) {
    rc = err_set(err, HIPD_EPROTO,
                 "the CPU device runner sent a malformed signature");
    free(k.name);
    goto out;
  }
  memset(&k.sig, 0, sizeof(k.sig));
  k.sig.nargs = resp.nargs;
  memcpy(k.sig.types, pl + sizeof(resp), resp.nargs);
  cpu_kernel_req_t req = {.module = module, .kernel = k.id};
  if ((rc = logent_make(&e, CPU_OP_KERNEL, &req, sizeof(req), name,
                        strlen(name), -1, err)) != 0) {
    free(k.name);
    goto out;
  }
  r->kerns[r->nkerns++] = k;
  *kernel = k.id;
  if (sig != NULL)
    *sig = k.sig;
  e.seq = ++r->seq;
  p->applied = e.seq; /* proc_take brought it up to date, under r->lock */
  log_add(r, &e);
  rc = 0;
out:
  proc_give(r, p, 1);
  return rc;
}

int cpu_runner_launch(cpu_runner_t *r, uint32_t kernel, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t shared,
                      const cpu_arg_t *args, uint32_t nargs, drv_output_t *out,
                      hipd_err_t *err)
{
  cpu_launch_req_t req = {.kernel = kernel, .nargs = nargs, .shared = shared};
  char msg[256];
  int32_t status;
  const uint8_t *pl;
  size_t plen, i;
  proc_t *p;
  int rc, sr;
  err_clear(err);

  rc = cpu_launch_check(grid, block, shared, msg, sizeof(msg));
  if (rc != 0)
    return err_set(err, rc, "%s", msg);
  memcpy(req.grid, grid, sizeof(req.grid));
  memcpy(req.block, block, sizeof(req.block));
  if ((rc = proc_take(r, &p, err)) != 0)
    return rc;
  for (i = 0; i < r->nkerns && r->kerns[i].id != kernel; i++)
    ;
  if (i == r->nkerns) {
    rc =
        err_set(err, HIPD_ENOKERNEL, "no kernel %" PRIu32 " is loaded", kernel);
    proc_give(r, p, 1);
    return rc;
  }
  if (nargs != r->kerns[i].sig.nargs) {
    rc = err_set(err, HIPD_ESIGNATURE,
                 "kernel '%s' takes %" PRIu32 " arguments, the launch passed "
                 "%" PRIu32,
                 r->kerns[i].name, r->kerns[i].sig.nargs, nargs);
    proc_give(r, p, 1);
    return rc;
  }
  pthread_mutex_lock(&r->abort_lock);
  r->launch_pid[p->idx] = p->pid;
  r->launch_launched[p->idx] = p->launched;
  pthread_mutex_unlock(&r->abort_lock);
  /* The launch runs without r->lock: allocations, loads and launches on
   * other processes go on meanwhile. */
  pthread_mutex_unlock(&r->lock);
  sr = rpc(p, CPU_OP_LAUNCH, &req, sizeof(req), args,
           (size_t)nargs * sizeof(cpu_arg_t), -1, r->timeout_ms, &status, &pl,
           &plen);
  pthread_mutex_lock(&r->abort_lock);
  r->launch_pid[p->idx] = -1;
  pthread_mutex_unlock(&r->abort_lock);
  if (sr != RPC_OK) {
    pthread_mutex_lock(&r->lock);
    rc = proc_lost(r, p, CPU_OP_LAUNCH, sr == RPC_TIMEOUT, NULL, err);
    proc_give(r, p, 1);
    return rc;
  }
  if (status < 0) {
    rc = err_set(err, status, "%.*s", (int)plen, (const char *)pl);
  } else if (plen >= sizeof(cpu_launch_resp_t)) {
    cpu_launch_resp_t h;
    memcpy(&h, pl, sizeof(h));
    if (h.len <= plen - sizeof(h))
      drv_output_append(out, pl + sizeof(h), h.len, h.dropped);
  }
  proc_give(r, p, 0);
  return rc;
}

int cpu_runner_abort(cpu_runner_t *r)
{
  hipd_err_t e;
  int killed = 0;

  pthread_mutex_lock(&r->abort_lock);
  for (unsigned i = 0; i < RUNNER_PROCS_MAX; i++) {
    if (r->launch_pid[i] <= 0)
      continue;
    if (r->launch_launched[i])
      killed |= cpu_launcher_kill(r->launch_pid[i], SIGKILL, &e) == 0;
    else
      killed |= kill(r->launch_pid[i], SIGKILL) == 0;
  }
  pthread_mutex_unlock(&r->abort_lock);
  return killed;
}

int cpu_runner_pid(cpu_runner_t *r)
{
  int pid;

  pthread_mutex_lock(&r->lock);
  pid = r->procs[0]->pid;
  pthread_mutex_unlock(&r->lock);
  return pid;
}

unsigned cpu_runner_procs(cpu_runner_t *r)
{
  unsigned n = 0;

  pthread_mutex_lock(&r->lock);
  for (unsigned i = 0; i < r->nprocs; i++)
    n += r->procs[i]->sock >= 0;
  pthread_mutex_unlock(&r->lock);
  return n;
}

unsigned cpu_runner_restarts(cpu_runner_t *r)
{
  return __atomic_load_n(&r->restarts, __ATOMIC_RELAXED);
}

unsigned cpu_runner_workers(cpu_runner_t *r)
{
  unsigned n = 0;

  pthread_mutex_lock(&r->lock);
  for (unsigned i = 0; i < r->nprocs && n == 0; i++)
    n = r->procs[i]->workers;
  pthread_mutex_unlock(&r->lock);
  return n;
}
