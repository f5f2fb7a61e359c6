/* SPDX-License-Identifier: MIT */
/* daemon/compile/compile_pool.c: the daemon's pool of compile threads and
 * their hipd-compile helpers (see compile_pool.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/compile_pool.h"
#include "compile/compile_proto.h"
#include "hipd.h"
#include "log.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox_spawn.h"
#include "util/array.h"
#include "util/clock.h"

#ifndef LIBEXECDIR
#define LIBEXECDIR "/usr/local/libexec"
#endif
#define HELPER_NAME "hipd-compile"
#define DEFAULT_TIMEOUT_S 120
#define DEFAULT_MEM ((uint64_t)4 << 30)
/* How long a helper may take to say hello (AMD: hiprtc loads comgr and
 * LLVM first). */
#define HELLO_TIMEOUT_MS 30000
/* A helper's cgroup: its compiles' memory (--compile-mem) and its 1 GiB
 * scratch tmpfs; the compiler driver's processes and threads. */
#define HELPER_CGROUP_SLACK ((uint64_t)1 << 30)
#define HELPER_CGROUP_PIDS 128
/* After --compile-timeout the helper stops the compile itself and
 * answers; this much later the daemon kills it regardless. */
#define KILL_GRACE_MS 3000
#define MAX_JOBS 256

extern char **environ;

/* One helper process, owned by one pool thread. pid is also read by
 * compile_pool_stop_all() (any thread): it changes under pool_state.mu only. */
typedef struct {
  pid_t pid;          /* 0: none running */
  int fd;             /* the daemon's end of its socket */
  char tmp[PATH_MAX]; /* its private directory (Landlock view), "" if none */
  int died;           /* one ran on this thread before and died */
} helper_t;

typedef struct {
  char name[32];
  char id[256];
} drv_id_t;

/* A tenant's queue (pool_state.mu). */
typedef struct {
  uint32_t tenant;
  compile_job_t *head, *last; /* waiting for a thread, oldest first */
  unsigned running;           /* its jobs on a thread now */
} tenant_queue_t;

/* A tenant's admitted requests (loop thread). */
typedef struct {
  uint32_t tenant;
  unsigned requests;
  uint64_t bytes;
} tenant_admit_t;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running;  /* init done, shutdown not */
  int stopping; /* compile_pool_stop_all(): no helper starts */
  int quit;     /* the threads leave */
  unsigned jobs, timeout_s;
  unsigned idle_s; /* --compile-idle-timeout, 0: none */
  uint64_t mem;
  int gpu_driver; /* --compile-gpu-driver */
  char helper[PATH_MAX];
  char user[64];
  uv_loop_t *loop;
  uv_async_t async;
  unsigned inflight;      /* loop thread only */
  tenant_queue_t *queues; /* tenants with jobs waiting or running */
  size_t nqueues, queues_cap;
  size_t turn; /* the tenant whose turn is next */
  /* Admission (loop thread). */
  tenant_admit_t *admits;
  size_t nadmits, admits_cap;
  unsigned tenant_max;
  uint64_t queue_bytes, held_bytes, refused;
  compile_job_t *done, **done_tail; /* run, done not called yet */
  pthread_t *threads;
  helper_t *helpers;
  unsigned nthreads;
  unsigned idle_live; /* (mu) threads waiting whose helper runs */
  /* compiler ids from the first hello */
  drv_id_t ids[CP_MAX_DRIVERS];
  unsigned nids;
  compile_pool_stats_t st;
} pool_state = {.mu = PTHREAD_MUTEX_INITIALIZER,
                .cv = PTHREAD_COND_INITIALIZER};

static __thread helper_t *self_helper;

/* ------------------------------------------------------------- helpers */

static int rm_cb(const char *path, const struct stat *st, int flag,
                 struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void tmp_remove(helper_t *h)
{
  if (h->tmp[0] != '\0')
    nftw(h->tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  h->tmp[0] = '\0';
}

/* "exit status 2", "killed by signal 9 (SIGKILL)" for the helper's wait
 * status. Its outer process (mount namespace mode) exits 128 + N when the
 * helper proper died of signal N. */
static void describe_status(int st, char *buf, size_t n)
{
  int sig = 0;

  if (WIFSIGNALED(st))
    sig = WTERMSIG(st);
  else if (WIFEXITED(st) && WEXITSTATUS(st) > 128)
    sig = WEXITSTATUS(st) - 128;
  if (sig != 0)
    snprintf(buf, n, "killed by signal %d (%s)%s", sig, strsignal(sig),
             sig == SIGXCPU  ? ": its CPU time limit"
             : sig == SIGSYS ? ": a system call its sandbox forbids"
                             : "");
  else if (WIFEXITED(st))
    snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
  else
    snprintf(buf, n, "wait status %d", st);
}

/* Kill @p h's process group (when @p kill_it) and reap it. @return its
 * wait status. */
static int helper_reap(helper_t *h, int kill_it)
{
  pid_t pid;
  int st = 0;

  pthread_mutex_lock(&pool_state.mu);
  pid = h->pid;
  if (pid > 0 && kill_it)
    kill(-pid, SIGKILL);
  /* Unregistered before the reap: a pid stop_all may kill is never one
   * the system has given to another process. */
  h->pid = 0;
  if (pid > 0 && pool_state.st.helpers > 0)
    pool_state.st.helpers--;
  pthread_mutex_unlock(&pool_state.mu);
  if (h->fd >= 0)
    close(h->fd);
  h->fd = -1;
  if (pid > 0)
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
  tmp_remove(h);
  h->died = 1;
  return st;
}

/* Parse a hello payload into the pool's record. @return 0 or HIPD_EPROTO
 * with @p why. */
static int hello_parse(const unsigned char *p, size_t len, char *why,
                       size_t whysz)
{
  cp_rd_t r = {.p = p, .len = len};
  uint32_t version, uid, fsview, n;
  const char *note;
  uint32_t note_len;
  drv_id_t ids[CP_MAX_DRIVERS];

  if (cp_get_u32(&r, &version) != 0 || version != CP_VERSION) {
    snprintf(why, whysz, "protocol version %u, not %u", version, CP_VERSION);
    return HIPD_EPROTO;
  }
  if (cp_get_u32(&r, &uid) != 0 || cp_get_u32(&r, &fsview) != 0 ||
      cp_get_str(&r, CP_MAX_STR, &note, &note_len) != 0 ||
      cp_get_u32(&r, &n) != 0 || n > CP_MAX_DRIVERS)
    goto bad;
  for (uint32_t i = 0; i < n; i++) {
    const char *s;
    uint32_t sl;
    if (cp_get_str(&r, sizeof(ids[i].name) - 1, &s, &sl) != 0)
      goto bad;
    memcpy(ids[i].name, s, sl);
    ids[i].name[sl] = '\0';
    if (cp_get_str(&r, sizeof(ids[i].id) - 1, &s, &sl) != 0)
      goto bad;
    memcpy(ids[i].id, s, sl);
    ids[i].id[sl] = '\0';
  }
  if (cp_rd_end(&r) != 0 || fsview > CP_FSVIEW_LANDLOCK)
    goto bad;
  pthread_mutex_lock(&pool_state.mu);
  if (pool_state.nids == 0) {
    memcpy(pool_state.ids, ids, n * sizeof(ids[0]));
    pool_state.nids = n;
  }
  pool_state.st.fsview = fsview;
  pool_state.st.fsview_name = cp_fsview_name(fsview);
  pool_state.st.uid = uid;
  snprintf(pool_state.st.sandbox, sizeof(pool_state.st.sandbox), "%.*s",
           (int)note_len, note);
  pthread_mutex_unlock(&pool_state.mu);
  return 0;
bad:
  snprintf(why, whysz, "a malformed hello");
  return HIPD_EPROTO;
}

/* Start a helper for @p h and read its hello. Blocking. @return 0 or a
 * negative code with @p err. */
static int helper_spawn(helper_t *h, hipd_err_t *err)
{
  static const char *const pass_env[] = {"PATH",
                                         "HIPD_CXX",
                                         "HIPD_CPU_HEADER",
                                         "LD_LIBRARY_PATH",
                                         "ASAN_OPTIONS",
                                         "UBSAN_OPTIONS",
                                         "TSAN_OPTIONS",
                                         "LSAN_OPTIONS",
                                         NULL};
  sandbox_fd_t fds[1];
  sandbox_spawn_t so;
  hipd_err_t serr;
  char fdarg[32], toarg[32], idlearg[40], memarg[48], tmparg[PATH_MAX + 8],
      userarg[80], viewarg[48], why[128];
  char *argv[12], *envp[16];
  const char *tmpdir = getenv("TMPDIR"), *view = getenv("HIPD_COMPILE_FSVIEW");
  char envbuf[8][PATH_MAX + 32];
  char cgenv[1024];
  int argc = 0, envc = 0, sv[2], e, st, rc, child_fd;
  cp_hdr_t hdr;
  unsigned char *payload = NULL;
  pid_t pid;

  h->fd = -1;
  snprintf(h->tmp, sizeof(h->tmp), "%s/hipd-compile-XXXXXX",
           tmpdir != NULL && tmpdir[0] == '/' ? tmpdir : "/tmp");
  if (mkdtemp(h->tmp) == NULL) {
    e = errno;
    h->tmp[0] = '\0';
    return err_set(err, HIPD_EIO,
                   "cannot start a compile helper: no private directory "
                   "in %s: %s",
                   tmpdir ? tmpdir : "/tmp", strerror(e));
  }
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    tmp_remove(h);
    return err_set(err, HIPD_EIO, "cannot start a compile helper: %s",
                   strerror(errno));
  }
  /* dup2 onto a different number clears close-on-exec in the child. */
  child_fd = sv[1] == 3 ? 4 : 3;
  snprintf(fdarg, sizeof(fdarg), "--fd=%d", child_fd);
  snprintf(toarg, sizeof(toarg), "--timeout=%u", pool_state.timeout_s);
  snprintf(memarg, sizeof(memarg), "--mem=%llu",
           (unsigned long long)pool_state.mem);
  snprintf(tmparg, sizeof(tmparg), "--tmp=%s", h->tmp);
  argv[argc++] = pool_state.helper;
  argv[argc++] = fdarg;
  argv[argc++] = toarg;
  if (pool_state.idle_s > 0) {
    snprintf(idlearg, sizeof(idlearg), "--idle-timeout=%u", pool_state.idle_s);
    argv[argc++] = idlearg;
  }
  argv[argc++] = memarg;
  argv[argc++] = tmparg;
  if (pool_state.gpu_driver)
    argv[argc++] = "--gpu-driver";
  if (pool_state.user[0] != '\0') {
    snprintf(userarg, sizeof(userarg), "--user=%s", pool_state.user);
    argv[argc++] = userarg;
  }
  /* HIPD_COMPILE_FSVIEW=landlock: the fallback view even as root (tests). */
  if (view != NULL && view[0] != '\0') {
    snprintf(viewarg, sizeof(viewarg), "--fsview=%.32s", view);
    argv[argc++] = viewarg;
  }
  argv[argc] = NULL;
  /* Only what the compile step reads of the daemon's environment. */
  for (int i = 0; pass_env[i] != NULL && envc < 8; i++) {
    const char *v = getenv(pass_env[i]);
    if (v == NULL)
      continue;
    snprintf(envbuf[envc], sizeof(envbuf[envc]), "%s=%s", pass_env[i], v);
    envp[envc] = envbuf[envc];
    envc++;
  }
  envp[envc++] = "LC_ALL=C";
  /* Its memory (its scratch tmpfs's pages included) and processes counted
   * apart from the listener's and the tenants': it joins this group
   * before it starts anything. Under the pool's lock: helpers start from
   * several threads. */
  pthread_mutex_lock(&pool_state.mu);
  e = cgroup_helper_prepare((unsigned)(h - pool_state.helpers),
                            pool_state.mem + HELPER_CGROUP_SLACK,
                            HELPER_CGROUP_PIDS, cgenv, sizeof(cgenv), &serr);
  pthread_mutex_unlock(&pool_state.mu);
  if (e != 0)
    log_warn(0, "compile helper %u has no cgroup: %s",
             (unsigned)(h - pool_state.helpers), serr.msg);
  else if (cgenv[0] != '\0')
    envp[envc++] = cgenv;
  envp[envc] = NULL;

  fds[0] = (sandbox_fd_t){sv[1], child_fd};
  /* Its own process group: a timeout kills the group. */
  so = (sandbox_spawn_t){.path = pool_state.helper,
                         .argv = argv,
                         .envp = envp,
                         .fds = fds,
                         .nfds = 1,
                         .stdin_null = true,
                         .close_from = child_fd + 1,
                         .own_group = true};
  pthread_mutex_lock(&pool_state.mu);
  if (pool_state.stopping) {
    pthread_mutex_unlock(&pool_state.mu);
    e = HIPD_ESHUTDOWN; /* not started */
  } else {
    e = sandbox_spawn(&so, &pid, &serr);
    if (e == 0) {
      h->pid = pid;
      pool_state.st.helpers++;
      pool_state.st.started++;
      if (h->died)
        pool_state.st.restarts++;
    }
    pthread_mutex_unlock(&pool_state.mu);
  }
  close(sv[1]);
  if (e != 0) {
    close(sv[0]);
    tmp_remove(h);
    if (e == HIPD_ESHUTDOWN)
      return err_set(err, e, "hipd is stopping");
    return err_set(err, e, "cannot start the compile helper %s: %s",
                   pool_state.helper, serr.msg);
  }
  h->fd = sv[0];

  if (cp_recv(h->fd, &hdr, &payload, util_now_ms() + HELLO_TIMEOUT_MS) != 0) {
    int timed_out = errno == ETIMEDOUT;
    st = helper_reap(h, 1);
    describe_status(st, why, sizeof(why));
    return err_set(err, HIPD_EIO, "the compile helper %s did not start: %s%s",
                   pool_state.helper, timed_out ? "no hello" : why,
                   !timed_out && WIFEXITED(st) && WEXITSTATUS(st) == 127
                       ? " (cannot be executed)"
                       : " (its messages are in hipd's log)");
  }
  rc = hdr.op == CP_OP_HELLO && hdr.status == 0
           ? hello_parse(payload, hdr.len, why, sizeof(why))
           : (snprintf(why, sizeof(why), "no hello"), HIPD_EPROTO);
  free(payload);
  if (rc != 0) {
    helper_reap(h, 1);
    return err_set(err, HIPD_EIO, "the compile helper %s: %s",
                   pool_state.helper, why);
  }
  /* In its own mount namespace the helper has a private /tmp. */
  if (pool_state.st.fsview == CP_FSVIEW_MOUNTNS)
    tmp_remove(h);
  return 0;
}

/* ------------------------------------------------------------ compiling */

static void out_log(compile_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void out_log(compile_out_t *out, const char *fmt, ...)
{
  va_list ap;

  if (out->log == NULL || out->logsz == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(out->log, out->logsz, fmt, ap);
  va_end(ap);
}

/* A code a helper may answer with; anything else reads as ECOMPILE (the
 * helper is not trusted to pick the daemon's codes). */
static int status_ok(int32_t s)
{
  static const int allowed[] = {HIPD_ECOMPILE,  HIPD_EINVAL,   HIPD_ENOTSUP,
                                HIPD_ENOKERNEL, HIPD_ENOMEM,   HIPD_ELIMIT,
                                HIPD_EIO,       HIPD_ENOENT,   HIPD_EDEVICE,
                                HIPD_ESHUTDOWN, HIPD_EINTERNAL};

  for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
    if (s == allowed[i])
      return 1;
  return 0;
}

static int request_build(const compile_req_t *req, strbuf_t *b,
                         compile_out_t *out)
{
  if (req->source_len > CP_MAX_SOURCE) {
    out_log(out, "the kernel source has %zu bytes (at most %u)",
            req->source_len, (unsigned)CP_MAX_SOURCE);
    return HIPD_ELIMIT;
  }
  if (req->nnames > CP_MAX_NAMES || req->nopts > CP_MAX_OPTS) {
    out_log(out, "%zu kernel names and %zu options (at most %u and %u)",
            req->nnames, req->nopts, CP_MAX_NAMES, CP_MAX_OPTS);
    return HIPD_EINVAL;
  }
  cp_put_str(b, req->driver);
  cp_put_str(b, req->arch);
  cp_put_u32(b, (uint32_t)req->nnames);
  for (size_t i = 0; i < req->nnames; i++) {
    if (req->names[i] == NULL || strlen(req->names[i]) > CP_MAX_STR) {
      out_log(out, "kernel name %zu is missing or longer than %u bytes", i,
              CP_MAX_STR);
      return HIPD_EINVAL;
    }
    cp_put_str(b, req->names[i]);
  }
  cp_put_u32(b, (uint32_t)req->nopts);
  for (size_t i = 0; i < req->nopts; i++) {
    if (req->opts[i] == NULL || strlen(req->opts[i]) > CP_MAX_STR) {
      out_log(out, "option %zu is missing or longer than %u bytes", i,
              CP_MAX_STR);
      return HIPD_EINVAL;
    }
    cp_put_str(b, req->opts[i]);
  }
  cp_put_blob(b, req->source, req->source_len);
  if (strbuf_failed(b)) {
    out_log(out, "out of memory");
    return HIPD_ENOMEM;
  }
  return 0;
}

/* The helper failed this compile (died, hung, or said something
 * malformed): kill and reap it, and explain in @p out. */
static int helper_failed(helper_t *h, compile_out_t *out, int timed_out,
                         const char *what)
{
  char why[160];
  int st = helper_reap(h, 1), stopping;

  pthread_mutex_lock(&pool_state.mu);
  stopping = pool_state.stopping;
  if (timed_out)
    pool_state.st.timeouts++;
  else if (!stopping)
    pool_state.st.crashes++;
  pthread_mutex_unlock(&pool_state.mu);
  if (stopping) {
    out_log(out, "hipd is stopping: the compile was stopped");
    return out->status = HIPD_ESHUTDOWN;
  }
  if (timed_out) {
    out_log(out,
            "compilation timed out after %u s (--compile-timeout): the "
            "compiler was killed",
            pool_state.timeout_s);
    log_warn(0, "compile helper: a compile timed out after %u s: killed",
             pool_state.timeout_s);
    return out->status = HIPD_ECOMPILE;
  }
  describe_status(st, why, sizeof(why));
  out_log(out, "the compiler crashed: hipd-compile %s, %s", what, why);
  log_warn(0,
           "compile helper: %s (%s); a new one starts for the next "
           "compile",
           what, why);
  return out->status = HIPD_ECOMPILE;
}

int compile_run(const compile_req_t *req, compile_out_t *out)
{
  helper_t *h = self_helper;
  strbuf_t b = {0};
  cp_hdr_t hdr;
  unsigned char *payload = NULL;
  hipd_err_t err;
  int rc;

  out->image = NULL;
  out->image_len = 0;
  if (out->log != NULL && out->logsz > 0)
    out->log[0] = '\0';
  if (h == NULL) {
    out_log(out, "compile_run outside the compile pool");
    return out->status = HIPD_EINTERNAL;
  }
  if ((rc = request_build(req, &b, out)) != 0) {
    strbuf_free(&b);
    return out->status = rc;
  }
  if (h->pid == 0 && (rc = helper_spawn(h, &err)) != 0) {
    strbuf_free(&b);
    out_log(out, "%s", err.msg);
    return out->status = rc;
  }
  pthread_mutex_lock(&pool_state.mu);
  pool_state.st.compiles++;
  pthread_mutex_unlock(&pool_state.mu);
  if (cp_send(h->fd, CP_OP_COMPILE, 0, b.p, b.len) != 0) {
    strbuf_free(&b);
    return helper_failed(h, out, 0, "could not be sent the source");
  }
  strbuf_free(&b);
  if (cp_recv(h->fd, &hdr, &payload,
              util_now_ms() + (uint64_t)pool_state.timeout_s * 1000 +
                  KILL_GRACE_MS) != 0)
    return helper_failed(h, out, errno == ETIMEDOUT,
                         errno == EPROTO ? "sent a malformed answer"
                                         : "ended during the compile");
  {
    cp_rd_t r = {.p = payload, .len = hdr.len};
    const char *log;
    const void *image;
    uint32_t log_len, image_len, flags, wall_us, cpu_us;

    if (hdr.op != CP_OP_RESULT || hdr.status > 0 ||
        (hdr.status != 0 && !status_ok(hdr.status)) ||
        cp_get_str(&r, CP_MAX_LOG, &log, &log_len) != 0 ||
        cp_get_blob(&r, CP_MAX_IMAGE, &image, &image_len) != 0 ||
        cp_get_u32(&r, &flags) != 0 || cp_get_u32(&r, &wall_us) != 0 ||
        cp_get_u32(&r, &cpu_us) != 0 || cp_rd_end(&r) != 0 ||
        (flags & ~(uint32_t)(CP_RESULT_LEAVING | CP_RESULT_TIMED_OUT |
                             CP_RESULT_SCRATCH)) != 0 ||
        (hdr.status == 0) != (image_len > 0)) {
      free(payload);
      return helper_failed(h, out, 0, "sent a malformed answer");
    }
    if (out->log != NULL && out->logsz > 0) {
      size_t n = log_len < out->logsz ? log_len : out->logsz - 1;
      memcpy(out->log, log, n);
      out->log[n] = '\0';
    }
    out->status = hdr.status;
    out->helper_ns = (uint64_t)wall_us * 1000;
    out->helper_cpu_ns = (uint64_t)cpu_us * 1000;
    if (hdr.status == 0) {
      out->image = malloc(image_len);
      if (out->image == NULL) {
        out_log(out, "out of memory for an image of %u bytes", image_len);
        out->status = HIPD_ENOMEM;
      } else {
        memcpy(out->image, image, image_len);
        out->image_len = image_len;
      }
    }
    free(payload);
    if (flags & CP_RESULT_TIMED_OUT) {
      pthread_mutex_lock(&pool_state.mu);
      pool_state.st.timeouts++;
      pthread_mutex_unlock(&pool_state.mu);
      log_warn(0, "compile helper: a compile timed out after %u s: stopped",
               pool_state.timeout_s);
    }
    if (flags & CP_RESULT_SCRATCH)
      log_warn(0, "compile helper: what a compile left in its scratch "
                  "directory could not be removed: replaced");
    if (flags & (CP_RESULT_LEAVING | CP_RESULT_TIMED_OUT | CP_RESULT_SCRATCH)) {
      helper_reap(h, 0);
      /* A planned exit is no restart; one after a timeout or with its
       * scratch space lost is. */
      h->died = (flags & (CP_RESULT_TIMED_OUT | CP_RESULT_SCRATCH)) != 0;
    }
  }
  return out->status;
}

int compile_pool_set_compiler_id(const char *driver, const char *id)
{
  int rc = 0;
  unsigned i;

  if (strlen(driver) >= sizeof(pool_state.ids[0].name) ||
      strlen(id) >= sizeof(pool_state.ids[0].id))
    return HIPD_EINVAL;
  pthread_mutex_lock(&pool_state.mu);
  for (i = 0; i < pool_state.nids; i++)
    if (strcmp(pool_state.ids[i].name, driver) == 0)
      break; /* the first id said stays */
  if (i == pool_state.nids) {
    if (i == CP_MAX_DRIVERS) {
      rc = HIPD_ELIMIT;
    } else {
      snprintf(pool_state.ids[i].name, sizeof(pool_state.ids[i].name), "%s",
               driver);
      snprintf(pool_state.ids[i].id, sizeof(pool_state.ids[i].id), "%s", id);
      pool_state.nids++;
    }
  }
  pthread_mutex_unlock(&pool_state.mu);
  return rc;
}

const char *compile_pool_compiler_id(const char *driver)
{
  const char *id = NULL;

  pthread_mutex_lock(&pool_state.mu);
  for (unsigned i = 0; i < pool_state.nids; i++)
    if (strcmp(pool_state.ids[i].name, driver) == 0)
      id = pool_state.ids[i].id;
  pthread_mutex_unlock(&pool_state.mu);
  return id;
}

/* ---------------------------------------------------------------- queue */

/* The queue of @p tenant, made when @p make; NULL if none (or no memory).
 * pool_state.mu held. */
static tenant_queue_t *queue_of(uint32_t tenant, int make)
{
  tenant_queue_t *q;

  for (size_t i = 0; i < pool_state.nqueues; i++)
    if (pool_state.queues[i].tenant == tenant)
      return &pool_state.queues[i];
  if (!make || ARRAY_GROW(pool_state.queues, pool_state.nqueues,
                          pool_state.queues_cap, 8) != 0)
    return NULL;
  q = &pool_state.queues[pool_state.nqueues++];
  *q = (tenant_queue_t){.tenant = tenant};
  return q;
}

/* Forget @p q once it has nothing waiting nor running. mu held. */
static void queue_drop_if_idle(tenant_queue_t *q)
{
  size_t i = (size_t)(q - pool_state.queues), last = pool_state.nqueues - 1;

  if (q->head != NULL || q->running > 0)
    return;
  if (i != last)
    *q = pool_state.queues[last];
  pool_state.nqueues--;
  if (pool_state.turn > i && pool_state.turn > 0)
    pool_state.turn--;
}

/* The next job a free thread runs: the oldest of the next tenant in turn
 * that may take a helper: one with none running, or any while more than
 * one helper is free. NULL if none may. mu held. */
static compile_job_t *queue_take(void)
{
  size_t n = pool_state.nqueues;
  int spare = pool_state.st.busy + 1 < pool_state.jobs;

  for (size_t k = 0; k < n; k++) {
    size_t i = (pool_state.turn + k) % n;
    tenant_queue_t *q = &pool_state.queues[i];
    compile_job_t *job = q->head;

    if (job == NULL || (q->running > 0 && !spare))
      continue;
    q->head = job->next;
    if (q->head == NULL)
      q->last = NULL;
    q->running++;
    pool_state.turn = (i + 1) % n;
    return job;
  }
  return NULL;
}

/* A job of @p tenant has run. mu held. */
static void queue_finished(uint32_t tenant)
{
  tenant_queue_t *q = queue_of(tenant, 0);

  if (q != NULL) {
    q->running--;
    queue_drop_if_idle(q);
  }
}

/* ------------------------------------------------------------ admission */

static tenant_admit_t *admit_of(uint32_t tenant)
{
  for (size_t i = 0; i < pool_state.nadmits; i++)
    if (pool_state.admits[i].tenant == tenant)
      return &pool_state.admits[i];
  return NULL;
}

int compile_pool_admit(uint32_t tenant, uint64_t bytes, hipd_err_t *err)
{
  tenant_admit_t *a = admit_of(tenant);
  uint64_t share = pool_state.queue_bytes / 2;
  int rc = 0;

  if (a != NULL && a->requests >= pool_state.tenant_max)
    rc = err_set(err, HIPD_EBUSY,
                 "uid %u has %u compiles waiting or running, the most one "
                 "uid may (--tenant-max-compiles %u): try again when one is "
                 "done",
                 (unsigned)tenant, a->requests, pool_state.tenant_max);
  else if ((a != NULL ? a->bytes : 0) + bytes > share)
    rc = err_set(err, HIPD_EBUSY,
                 "uid %u's compiles would hold %llu bytes of source, more "
                 "than its half of --compile-queue-bytes %llu",
                 (unsigned)tenant,
                 (unsigned long long)((a != NULL ? a->bytes : 0) + bytes),
                 (unsigned long long)pool_state.queue_bytes);
  else if (pool_state.held_bytes + bytes > pool_state.queue_bytes)
    rc = err_set(err, HIPD_EBUSY,
                 "the compiles waiting and running hold %llu bytes of "
                 "source: %llu more would pass --compile-queue-bytes %llu; "
                 "try again when some are done",
                 (unsigned long long)pool_state.held_bytes,
                 (unsigned long long)bytes,
                 (unsigned long long)pool_state.queue_bytes);
  else if (a == NULL) {
    if (ARRAY_GROW(pool_state.admits, pool_state.nadmits, pool_state.admits_cap,
                   8) != 0)
      return err_set(err, HIPD_ENOMEM, "out of memory");
    a = &pool_state.admits[pool_state.nadmits++];
    *a = (tenant_admit_t){.tenant = tenant};
  }
  if (rc != 0) {
    pool_state.refused++;
    return rc;
  }
  a->requests++;
  a->bytes += bytes;
  pool_state.held_bytes += bytes;
  return 0;
}

void compile_pool_release(uint32_t tenant, uint64_t bytes)
{
  tenant_admit_t *a = admit_of(tenant);

  if (a == NULL)
    return;
  a->requests--;
  a->bytes -= bytes < a->bytes ? bytes : a->bytes;
  pool_state.held_bytes -=
      bytes < pool_state.held_bytes ? bytes : pool_state.held_bytes;
  if (a->requests == 0)
    *a = pool_state.admits[--pool_state.nadmits];
}

/* -------------------------------------------------------------- threads */

static void *thread_main(void *arg)
{
  helper_t *h = arg;

  self_helper = h;
  pthread_mutex_lock(&pool_state.mu);
  for (;;) {
    compile_job_t *job = NULL;
    unsigned live;

    while (!pool_state.quit) {
      /* A thread whose helper is not running leaves a waiting job to an
       * idle thread whose helper is: that helper's compiler is loaded and
       * warm, while a new helper would start a process and load its
       * compiler (NVRTC's first compile in a process is the slow one) on
       * the job's path. New helpers start only when the running ones are
       * all busy. (h->pid is this thread's own.) */
      if (h->pid == 0 && pool_state.idle_live > 0 && pool_state.st.queued > 0) {
        pthread_cond_broadcast(&pool_state.cv);
        pthread_cond_wait(&pool_state.cv, &pool_state.mu);
        continue;
      }
      if ((job = queue_take()) != NULL)
        break;
      live = h->pid != 0;
      pool_state.idle_live += live;
      pthread_cond_wait(&pool_state.cv, &pool_state.mu);
      pool_state.idle_live -= live;
    }
    if (job == NULL)
      break;
    pool_state.st.queued--;
    pool_state.st.busy++;
    pthread_mutex_unlock(&pool_state.mu);

    job->run(job);

    pthread_mutex_lock(&pool_state.mu);
    pool_state.st.busy--;
    queue_finished(job->tenant);
    /* A tenant held back (its last-helper rule) may go now. */
    if (pool_state.st.queued > 0)
      pthread_cond_broadcast(&pool_state.cv);
    job->next = NULL;
    *pool_state.done_tail = job;
    pool_state.done_tail = &job->next;
    pthread_mutex_unlock(&pool_state.mu);
    uv_async_send(&pool_state.async);
    pthread_mutex_lock(&pool_state.mu);
  }
  pthread_mutex_unlock(&pool_state.mu);
  if (h->pid != 0)
    helper_reap(h, 1);
  return NULL;
}

static void async_cb(uv_async_t *a)
{
  compile_job_t *list;

  (void)a;
  pthread_mutex_lock(&pool_state.mu);
  list = pool_state.done;
  pool_state.done = NULL;
  pool_state.done_tail = &pool_state.done;
  pthread_mutex_unlock(&pool_state.mu);
  while (list != NULL) {
    compile_job_t *job = list;
    list = job->next;
    if (--pool_state.inflight == 0)
      uv_unref((uv_handle_t *)&pool_state.async);
    job->done(job);
  }
}

int compile_pool_submit(compile_job_t *job)
{
  tenant_queue_t *q;

  if (!pool_state.running)
    return HIPD_ESHUTDOWN;
  pthread_mutex_lock(&pool_state.mu);
  if (pool_state.quit) {
    pthread_mutex_unlock(&pool_state.mu);
    return HIPD_ESHUTDOWN;
  }
  q = queue_of(job->tenant, 1);
  if (q == NULL) {
    pthread_mutex_unlock(&pool_state.mu);
    return HIPD_ENOMEM;
  }
  job->next = NULL;
  if (q->last != NULL)
    q->last->next = job;
  else
    q->head = job;
  q->last = job;
  pool_state.st.queued++;
  /* Any thread may be the one free to take it. */
  pthread_cond_broadcast(&pool_state.cv);
  pthread_mutex_unlock(&pool_state.mu);
  /* Work in flight keeps the loop alive, as libuv's own work does. */
  if (pool_state.inflight++ == 0)
    uv_ref((uv_handle_t *)&pool_state.async);
  return 0;
}

unsigned compile_pool_inflight(void)
{
  return pool_state.inflight;
}

/* The helper program: cfg, $HIPD_COMPILE_HELPER, next to our executable,
 * the installed one. */
static void helper_path(const char *cfg, char *out, size_t n)
{
  const char *env = getenv("HIPD_COMPILE_HELPER");
  char self[PATH_MAX];
  ssize_t len;

  if (cfg != NULL && cfg[0] != '\0') {
    snprintf(out, n, "%s", cfg);
    return;
  }
  if (env != NULL && env[0] != '\0') {
    snprintf(out, n, "%s", env);
    return;
  }
  len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len > 0) {
    char *slash;
    self[len] = '\0';
    slash = strrchr(self, '/');
    if (slash != NULL) {
      *slash = '\0';
      if (snprintf(out, n, "%s/" HELPER_NAME, self) < (int)n &&
          access(out, X_OK) == 0)
        return;
    }
  }
  snprintf(out, n, "%s/" HELPER_NAME, LIBEXECDIR);
}

int compile_pool_init(const compile_pool_cfg_t *cfg, uv_loop_t *loop,
                      hipd_err_t *err)
{
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int rc;

  err_clear(err);
  if (pool_state.running)
    return err_set(err, HIPD_EINVAL, "the compile pool is running already");
  pool_state.jobs =
      cfg->jobs ? cfg->jobs : (ncpu > 0 && ncpu < 4 ? (unsigned)ncpu : 4);
  if (pool_state.jobs > MAX_JOBS)
    pool_state.jobs = MAX_JOBS;
  pool_state.timeout_s = cfg->timeout_s ? cfg->timeout_s : DEFAULT_TIMEOUT_S;
  pool_state.idle_s = cfg->idle_timeout_s;
  pool_state.mem = cfg->mem_limit ? cfg->mem_limit : DEFAULT_MEM;
  pool_state.gpu_driver = cfg->gpu_driver;
  helper_path(cfg->helper, pool_state.helper, sizeof(pool_state.helper));
  snprintf(pool_state.user, sizeof(pool_state.user), "%s",
           cfg->user ? cfg->user : "");
  pool_state.loop = loop;
  pool_state.tenant_max = cfg->tenant_max ? cfg->tenant_max : 8;
  pool_state.queue_bytes =
      cfg->queue_bytes ? cfg->queue_bytes : (uint64_t)256 << 20;
  pool_state.held_bytes = pool_state.refused = 0;
  pool_state.nqueues = pool_state.nadmits = pool_state.turn = 0;
  pool_state.done = NULL;
  pool_state.done_tail = &pool_state.done;
  pool_state.inflight = 0;
  pool_state.stopping = pool_state.quit = 0;
  pool_state.nids = 0;
  memset(&pool_state.st, 0, sizeof(pool_state.st));
  pool_state.st.uid = -1;
  pool_state.st.fsview_name = cp_fsview_name(CP_FSVIEW_NONE);
  pool_state.helpers = calloc(pool_state.jobs, sizeof(*pool_state.helpers));
  pool_state.threads = calloc(pool_state.jobs, sizeof(*pool_state.threads));
  if (pool_state.helpers == NULL || pool_state.threads == NULL) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto fail;
  }
  for (unsigned i = 0; i < pool_state.jobs; i++)
    pool_state.helpers[i].fd = -1;
  if (cfg->probe && access(pool_state.helper, X_OK) != 0) {
    rc = err_set(err, HIPD_ENOENT,
                 "the compile helper %s cannot be run: %s (set "
                 "$HIPD_COMPILE_HELPER or install hipd)",
                 pool_state.helper, strerror(errno));
    goto fail;
  }
  if (cfg->probe && (rc = helper_spawn(&pool_state.helpers[0], err)) != 0)
    goto fail;
  if (uv_async_init(loop, &pool_state.async, async_cb) != 0) {
    rc = err_set(err, HIPD_EIO, "cannot start the compile pool");
    goto fail;
  }
  uv_unref((uv_handle_t *)&pool_state.async);
  for (pool_state.nthreads = 0; pool_state.nthreads < pool_state.jobs;
       pool_state.nthreads++)
    if (pthread_create(&pool_state.threads[pool_state.nthreads], NULL,
                       thread_main,
                       &pool_state.helpers[pool_state.nthreads]) != 0)
      break;
  if (pool_state.nthreads == 0) {
    uv_close((uv_handle_t *)&pool_state.async, NULL);
    rc = err_set(err, HIPD_EIO, "cannot start the compile threads");
    goto fail;
  }
  pool_state.running = 1;
  return 0;

fail:
  if (pool_state.helpers != NULL && pool_state.helpers[0].pid != 0)
    helper_reap(&pool_state.helpers[0], 1);
  free(pool_state.helpers);
  free(pool_state.threads);
  pool_state.helpers = NULL;
  pool_state.threads = NULL;
  return rc;
}

unsigned compile_pool_stop_all(void)
{
  unsigned n = 0;

  pthread_mutex_lock(&pool_state.mu);
  pool_state.stopping = 1;
  for (unsigned i = 0; pool_state.helpers != NULL && i < pool_state.jobs; i++)
    if (pool_state.helpers[i].pid > 0) {
      kill(-pool_state.helpers[i].pid, SIGKILL);
      n++;
    }
  pthread_mutex_unlock(&pool_state.mu);
  return n;
}

void compile_pool_shutdown(void)
{
  if (!pool_state.running)
    return;
  compile_pool_stop_all();
  pthread_mutex_lock(&pool_state.mu);
  pool_state.quit = 1;
  /* Jobs not started are dropped with the pool. */
  free(pool_state.queues);
  pool_state.queues = NULL;
  pool_state.nqueues = pool_state.queues_cap = 0;
  free(pool_state.admits);
  pool_state.admits = NULL;
  pool_state.nadmits = pool_state.admits_cap = 0;
  pthread_cond_broadcast(&pool_state.cv);
  pthread_mutex_unlock(&pool_state.mu);
  for (unsigned i = 0; i < pool_state.nthreads; i++)
    pthread_join(pool_state.threads[i], NULL);
  if (!uv_is_closing((uv_handle_t *)&pool_state.async))
    uv_close((uv_handle_t *)&pool_state.async, NULL);
  free(pool_state.threads);
  free(pool_state.helpers);
  pool_state.threads = NULL;
  pool_state.helpers = NULL;
  pool_state.nthreads = 0;
  pool_state.running = 0;
}

void compile_pool_get_stats(compile_pool_stats_t *st)
{
  pthread_mutex_lock(&pool_state.mu);
  *st = pool_state.st;
  pthread_mutex_unlock(&pool_state.mu);
  st->jobs = pool_state.jobs;
  st->timeout_s = pool_state.timeout_s;
  st->idle_timeout_s = pool_state.idle_s;
  /* The loop thread's own (admission). */
  st->tenant_max = pool_state.tenant_max;
  st->queue_bytes = pool_state.queue_bytes;
  st->held_bytes = pool_state.held_bytes;
  st->refused = pool_state.refused;
}
