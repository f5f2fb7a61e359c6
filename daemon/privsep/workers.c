/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers.c: the listener routes connections to tenant
 * workers, starts and reaps them, and answers their requests for compiled
 * kernels from the shared cache (workers.h). */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admin/admin.h"
#include "hipd.h"
#include "kernels/kernels.h"
#include "log.h"
#include "policy.h"
#include "privsep/ipc.h"
#include "privsep/mps.h"
#include "privsep/wire.h"
#include "privsep/workers.h"

extern char **environ;

/* A refused peer has this long to send its first request. */
#define REFUSAL_MAX_MESSAGE 65536

struct ask;

typedef struct worker {
  list_node_t node; /* W.live while it takes connections, else W.leaving */
  daemon_t *d;
  int mode;     /* ISOLATION_UID or ISOLATION_SESSION */
  uid_t uid;    /* the tenant's uid (the peer's) */
  gid_t gid;    /* the first peer's primary gid */
  uint64_t seq; /* session mode: the one connection's id */
  pid_t pid;
  uv_process_t proc; /* proc.data = this */
  ipc_chan_t ch;     /* ch.data = this */
  uint32_t sessions; /* connections handed over, not yet reported closed */
  uint64_t idle_since;
  int leaving;        /* told to exit, or gone: takes no connection */
  uint64_t exit_sent; /* when it was told to exit (uv_now), 0: not yet */
  int exited;         /* its exit was seen (uv_now then: exited_ms) */
  uint64_t exited_ms;
  int handles;         /* libuv handles of this worker still open */
  int refs;            /* compile jobs in flight + 1 while it is listed */
  report_t *last;      /* its last report (admin.h), folded when it exits */
  uint64_t last_ms;    /* uv_now when last came */
  uint64_t serial;     /* W.serial at its start: reports name it by this */
  struct ask *rep;     /* its one report request unanswered, or NULL */
  uint64_t rep_sent;   /* uv_now when rep was sent */
  int rep_waited;      /* the gather in flight waits for rep */
  int rep_warned;      /* rep's 30 s without an answer were logged */
  int rep_again;       /* rep is housekeeping's: a view asks after it */
  int lied;            /* a report with records not its own was logged */
  uint32_t admin_busy; /* its clients' admin requests in flight */
  uint64_t *ids;       /* the connections handed over, not reported closed
                          (the listener's routing: who holds which session) */
  uint32_t nids, capids;
} worker_t;

/* A peer refused by the policy: it reads the rule in the answer to its
 * first request, then the connection closes. */
typedef struct refusal {
  list_node_t node;
  uv_pipe_t pipe; /* pipe.data = this */
  uint64_t id;
  uint64_t opened_ms;
  hipd_err_t why;
  uint8_t buf[REFUSAL_MAX_MESSAGE];
  size_t len;
  int answered;
  uv_write_t wreq;
  msgpack_sbuffer out;
} refusal_t;

static struct {
  char **argv; /* the listener's options, for every worker */
  size_t argc;
  char exe[PATH_MAX];  /* this program */
  list_node_t live;    /* worker_t.node: those taking connections */
  list_node_t leaving; /* told to exit, not yet reaped */
  list_node_t refusals;
  list_node_t dead;    /* exited, their channel still open to read its end */
  list_node_t adopted; /* workers_adopt()'s channels (no process) */
  uint32_t n;          /* in both lists */
  uint64_t started;
  uint32_t sessions; /* connections held by workers, all together */
  int stop_sent;
  list_node_t asks;     /* ask_t.node: requests to workers, unanswered */
  char level_arg[32];   /* "--log-level=debug" after log.level, else "" */
  uint64_t last_gather; /* uv_now of the last periodic gather */
  uint64_t serial;      /* of the last worker made */
  struct gather *g;     /* the gathering in flight, shared, or NULL */
} W = {
    /* Empty lists before workers_init() (workers_adopt() needs none). */
    .live = {&W.live, &W.live},
    .leaving = {&W.leaving, &W.leaving},
    .refusals = {&W.refusals, &W.refusals},
    .dead = {&W.dead, &W.dead},
    .adopted = {&W.adopted, &W.adopted},
    .asks = {&W.asks, &W.asks},
};

/* A report this young is used again rather than asked for. */
#define REPORT_FRESH_MS 1000
/* A worker whose report request is this old is left out of a view... */
#define REPORT_STALE_MS 3000
/* ... and logged once it is this old. */
#define REPORT_LOST_MS 30000
/* A gathering waits this long for the answers it asked for. */
#define GATHER_WAIT_MS 2000
/* Admin requests of one worker's clients in flight, at most. */
#define ADMIN_MAX_INFLIGHT 4

/* A gathering of reports (admin.h's gather hook): one at a time, shared
 * by every view asked for while it runs. */
typedef struct waiter {
  admin_gathered_fn done;
  void *ctx;
} waiter_t;
typedef struct gather {
  waiter_t *wait;
  uint32_t nwait, capwait;
  uint32_t waiting; /* workers with rep_waited */
  uint64_t start;   /* uv_now: a report that was fresh then is used */
  uv_timer_t timer; /* timer.data = this: the wait, then finishing */
} gather_t;

/* A request of the listener to a worker, waiting for its answer. */
enum { ASK_REPORT, ASK_KILL };
typedef struct ask {
  list_node_t node; /* in W.asks */
  worker_t *w;
  uint32_t msgid;
  int kind;
  int view; /* ASK_REPORT: asked by a view (else by housekeeping) */
  void (*killed)(void *ctx, int status); /* ASK_KILL */
  void *ctx;
} ask_t;

static void worker_forget(worker_t *w);

int workers_init(daemon_t *d, char **argv, hipd_err_t *err)
{
  ssize_t n;

  list_init(&W.live);
  list_init(&W.leaving);
  list_init(&W.refusals);
  list_init(&W.dead);
  list_init(&W.adopted);
  list_init(&W.asks);
  for (W.argc = 0; argv[W.argc] != NULL; W.argc++)
    ;
  W.argv = argv;
  n = readlink("/proc/self/exe", W.exe, sizeof(W.exe) - 1);
  if (n <= 0)
    return err_set(err, HIPD_EIO,
                   "cannot find this program for its workers: "
                   "readlink /proc/self/exe: %s",
                   strerror(errno));
  W.exe[n] = '\0';
  if (geteuid() == 0) {
    struct passwd pwb, *pw = NULL;
    char buf[4096];
    if (getpwnam_r(d->cfg.worker_user, &pwb, buf, sizeof(buf), &pw) != 0 ||
        pw == NULL)
      return err_set(err, HIPD_EINVAL,
                     "the worker account '%s' does not exist: create it "
                     "(sysusers.d/hipd.conf, or useradd --system %s) or name "
                     "another with --user",
                     d->cfg.worker_user, d->cfg.worker_user);
    if (pw->pw_uid == 0)
      return err_set(err, HIPD_EINVAL,
                     "--user %s is root: workers must run unprivileged",
                     d->cfg.worker_user);
  }
  return 0;
}

uint32_t workers_count(const daemon_t *d)
{
  (void)d;
  return W.n;
}

uint64_t workers_started(const daemon_t *d)
{
  (void)d;
  return W.started;
}

uint32_t workers_sessions(const daemon_t *d)
{
  (void)d;
  return W.sessions;
}

void workers_signal(daemon_t *d, int signum)
{
  list_node_t *lists[] = {&W.live, &W.leaving};

  (void)d;
  for (int i = 0; i < 2; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      if (!w->exited && w->pid > 0)
        uv_process_kill(&w->proc, signum);
    }
}

void workers_set_args(daemon_t *d, char **argv)
{
  (void)d;
  for (W.argc = 0; argv[W.argc] != NULL; W.argc++)
    ;
  W.argv = argv;
}

void workers_reload(daemon_t *d)
{
  list_node_t *lists[] = {&W.live, &W.leaving};
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t n = 0;

  (void)d;
  /* A reload sets the file's log level (the listener's and the running
   * workers'): new workers start with it too, not with log.level's. */
  W.level_arg[0] = '\0';
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_RELOAD, 0);
  msgpack_pack_array(&pk, (uint32_t)W.argc);
  for (size_t i = 0; i < W.argc; i++)
    proto_pack_cstr(&pk, W.argv[i]);
  for (int i = 0; i < 2; i++)
    for (list_node_t *l = lists[i]->next; l != lists[i]; l = l->next) {
      worker_t *w = list_entry(l, worker_t, node);
      if (!w->exited && !w->ch.broken &&
          ipc_send(&w->ch, sb.data, sb.size) == 0)
        n++;
    }
  msgpack_sbuffer_destroy(&sb);
  log_debug(0, "reload sent to %u workers", n);
}

/* ----------------------------------------------------------- lifetime */

static void worker_free_mem(worker_t *w)
{
  free(w->ids);
  free(w);
}

static void worker_unref(worker_t *w)
{
  if (--w->refs == 0 && w->handles == 0)
    worker_free_mem(w);
}

static void handle_closed(worker_t *w)
{
  if (--w->handles == 0 && w->refs == 0)
    worker_free_mem(w);
}

/* The sessions a worker holds, by the listener's routing. */
static void ids_add(worker_t *w, uint64_t id)
{
  if (w->nids == w->capids) {
    uint32_t cap = w->capids ? w->capids * 2 : 8;
    uint64_t *n = realloc(w->ids, cap * sizeof(*n));
    if (n == NULL)
      return; /* its session is then not listed, nor killed by id */
    w->ids = n;
    w->capids = cap;
  }
  w->ids[w->nids++] = id;
}

static int ids_has(const worker_t *w, uint64_t id)
{
  for (uint32_t i = 0; i < w->nids; i++)
    if (w->ids[i] == id)
      return 1;
  return 0;
}

static void ids_remove(worker_t *w, uint64_t id)
{
  for (uint32_t i = 0; i < w->nids; i++)
    if (w->ids[i] == id) {
      w->ids[i] = w->ids[--w->nids];
      return;
    }
}

static void proc_closed_cb(uv_handle_t *h)
{
  handle_closed(h->data);
}

static void ch_closed(ipc_chan_t *ch)
{
  handle_closed(ch->data);
}

/* Take @p w out of the routing table: no connection goes to it again. */
static void worker_leave(worker_t *w)
{
  if (w->leaving)
    return;
  w->leaving = 1;
  list_remove(&w->node);
  list_insert_tail(&W.leaving, &w->node);
}

static const char *tenant_name(const worker_t *w, char *buf, size_t len)
{
  if (w->mode == ISOLATION_SESSION)
    snprintf(buf, len, "session %llu (uid %u)", (unsigned long long)w->seq,
             (unsigned)w->uid);
  else
    snprintf(buf, len, "uid %u", (unsigned)w->uid);
  return buf;
}

static void exit_cb(uv_process_t *p, int64_t status, int sig)
{
  worker_t *w = p->data;
  char t[64];

  tenant_name(w, t, sizeof(t));
  if (sig != 0)
    log_error(0,
              "worker of %s (pid %d) was killed by signal %d (%s); its %u "
              "sessions are gone, other tenants are not affected",
              t, (int)w->pid, sig, strsignal(sig), w->sessions);
  else if (status != 0)
    log_warn(0,
             "worker of %s (pid %d) exited with status %lld; its %u "
             "sessions are gone",
             t, (int)w->pid, (long long)status, w->sessions);
  else
    log_info(0, "worker of %s (pid %d) exited", t, (int)w->pid);
  w->exited = 1;
  W.sessions -= w->sessions < W.sessions ? w->sessions : W.sessions;
  w->sessions = 0;
  worker_leave(w);
  list_remove(&w->node);
  W.n--;
  uv_close((uv_handle_t *)&w->proc, proc_closed_cb);
  /* What it wrote before it died is still to be read (its last report):
   * the channel closes at its end of file (ch_broken). */
  if (w->ch.broken) {
    worker_forget(w);
    ipc_close(&w->ch, ch_closed);
  } else {
    /* Housekeeping closes it if its end never comes (a descriptor
     * inherited by a process that outlived the worker). */
    w->exited_ms = uv_now(w->d->loop);
    list_insert_tail(&W.dead, &w->node);
  }
  worker_unref(w);
}

static void adopted_broken(ipc_chan_t *ch, const char *why);

static void ch_broken(ipc_chan_t *ch, const char *why)
{
  worker_t *w = ch->data;

  if (w->exited) {
    if (w->pid < 0) {
      adopted_broken(ch, why);
    } else {
      list_remove(&w->node); /* from W.dead */
      worker_forget(w);
      ipc_close(&w->ch, ch_closed);
    }
    return;
  }
  if (w->exit_sent != 0 || W.stop_sent) {
    /* Told to exit (or to stop): it closes its channel on the way out. */
    log_debug(0, "worker pid %d: channel closed as it exits", (int)w->pid);
    return;
  }
  log_warn(0, "worker pid %d: channel closed (%s); stopping it", (int)w->pid,
           why);
  worker_leave(w);
  uv_process_kill(&w->proc, SIGKILL);
}

/* An adopted channel (workers_adopt) has no process: it just closes. */
static void adopted_broken(ipc_chan_t *ch, const char *why)
{
  worker_t *w = ch->data;

  log_debug(0, "adopted worker channel closed: %s", why);
  list_remove(&w->node); /* from W.adopted */
  worker_forget(w);
  ipc_close(&w->ch, ch_closed);
  worker_unref(w);
}

/* --------------------------------------------------------------- compiles */

typedef struct {
  worker_t *w;
  uint32_t msgid;
  const driver_t *drv;
  char arch[64];
  char *name;
  char *source;
  size_t source_len;
  char **opts;
  size_t nopts;
  cache_key_t key;
} cjob_t;

static void cjob_free(cjob_t *j)
{
  free(j->name);
  free(j->source);
  for (size_t i = 0; i < j->nopts; i++)
    free(j->opts[i]);
  free(j->opts);
  free(j);
}

static int cjob_compile_cb(void *arg, void **out, size_t *len, char *log,
                           size_t logsz)
{
  cjob_t *j = arg;
  const char *names[1] = {j->name};

  return kernels_compile(j->drv, j->arch, j->source, j->source_len, names, 1,
                         (const char *const *)j->opts, j->nopts, out, len, log,
                         logsz);
}

/* The answer to "compile": [status, source, key, log, image|nil]. */
static void cjob_done_cb(void *ctx, int status, cache_blob_t *blob,
                         cache_source_t source, const char *log)
{
  cjob_t *j = ctx;
  worker_t *w = j->w;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  /* A worker that exited has its channel closed (broken); an adopted one
   * (workers_adopt) counts as exited from the start but is answered. */
  if (!w->ch.broken) {
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response(&pk, j->msgid);
    wire_pack_result(&pk, WIRE_COMPILE);
    msgpack_pack_int(&pk, status);
    msgpack_pack_int(&pk, (int)source);
    msgpack_pack_bin(&pk, CACHE_KEY_SIZE);
    msgpack_pack_bin_body(&pk, j->key.b, CACHE_KEY_SIZE);
    proto_pack_cstr(&pk, log != NULL ? log : "");
    if (status == 0 && blob != NULL) {
      msgpack_pack_bin(&pk, (uint32_t)blob->len);
      msgpack_pack_bin_body(&pk, blob->data, blob->len);
    } else {
      msgpack_pack_nil(&pk);
    }
    ipc_send(&w->ch, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
  cjob_free(j);
  worker_unref(w);
}

static void reply_error(worker_t *w, uint32_t msgid, int code, const char *msg)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error_response(&pk, msgid, code, "%s", msg);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static char *dup_bytes(const char *p, size_t n)
{
  char *s = malloc(n + 1);

  if (s != NULL) {
    memcpy(s, p, n);
    s[n] = '\0';
  }
  return s;
}

/* compile [driver, arch, source, kernel, [options], refresh]. The key is
 * computed here, from what is compiled: a worker never names the entry
 * its request fills. */
static void on_compile(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_compile_t *a = args;
  const msgpack_object *opts;
  cjob_t *j;
  char dname[32];

  _Static_assert(sizeof(dname) > 31 && sizeof(j->arch) > 63,
                 "the names compile's row bounds fit");
  if (a == NULL) {
    reply_error(w, m->msgid, HIPD_EPARAMS, "compile: malformed request");
    return;
  }
  opts = a->options.o;
  memcpy(dname, a->driver.p, a->driver.len);
  dname[a->driver.len] = '\0';
  if ((j = calloc(1, sizeof(*j))) == NULL) {
    reply_error(w, m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  j->msgid = m->msgid;
  j->drv = kernels_driver_named(dname);
  memcpy(j->arch, a->arch.p, a->arch.len);
  j->arch[a->arch.len] = '\0';
  j->name = dup_bytes(a->kernel.p, a->kernel.len);
  j->source = dup_bytes(a->source.p, a->source.len);
  j->source_len = a->source.len;
  j->opts = calloc(opts->via.array.size + 1, sizeof(char *));
  if (j->name == NULL || j->source == NULL || j->opts == NULL) {
    cjob_free(j);
    reply_error(w, m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  for (uint32_t i = 0; i < opts->via.array.size; i++, j->nopts++) {
    const char *o;
    size_t on;
    if (proto_obj_bytes(&opts->via.array.ptr[i], &o, &on) != 0 || on > 4096 ||
        (j->opts[i] = dup_bytes(o, on)) == NULL) {
      cjob_free(j);
      reply_error(w, m->msgid, HIPD_EPARAMS, "compile: a bad option");
      return;
    }
  }
  /* Whether the compiler takes the architecture is the helper's to say:
   * the listener loads no compiler, not even to ask. */
  if (j->drv == NULL || compile_pool_compiler_id(j->drv->name) == NULL) {
    char msg[160];
    snprintf(msg, sizeof(msg), "no compiler of driver '%s' targets '%s'", dname,
             j->arch);
    cjob_free(j);
    reply_error(w, m->msgid, HIPD_ENOTSUP, msg);
    return;
  }
  {
    kernels_key_in_t in = {
        .source = j->source,
        .source_len = j->source_len,
        .name = j->name,
        .opts = (const char *const *)j->opts,
        .nopts = j->nopts,
        .arch = j->arch,
        .drv = j->drv,
    };
    int rc = kernels_key(&in, &j->key);
    if (rc != 0) {
      cjob_free(j);
      reply_error(w, m->msgid, rc, "cannot compute the kernel's cache key");
      return;
    }
  }
  j->w = w;
  w->refs++;
  cache_get_flags(&j->key, a->refresh.u ? CACHE_REFRESH : 0, cjob_compile_cb, j,
                  cjob_done_cb, j);
}

/* cache.stats []: the shared cache's counters, as an array (see
 * worker.c's reader for the order). */
#define PACK_COUNTER(T, name, kind, min, max) msgpack_pack_uint64(&pk, st.name);

static void on_cache_stats(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  cache_stats_t st;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  (void)args; /* none read (a row of WIRE_LAX) */
  cache_get_stats(&st);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  wire_pack_result(&pk, WIRE_CACHE_STATS);
  WIRE_CACHE_STATS_COUNTERS(PACK_COUNTER, _)
  proto_pack_cstr(&pk, st.dir != NULL ? st.dir : "");
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* compile.stats []: the compile pool's counters, as an array (see
 * worker.c's reader for the order). */
static void on_compile_stats(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  compile_pool_stats_t st;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  (void)args; /* none read (a row of WIRE_LAX) */
  compile_pool_get_stats(&st);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  wire_pack_result(&pk, WIRE_COMPILE_STATS);
  WIRE_COMPILE_STATS_COUNTERS(PACK_COUNTER, _)
  proto_pack_cstr(&pk, st.fsview_name != NULL ? st.fsview_name : "none");
  msgpack_pack_int64(&pk, st.uid);
  proto_pack_cstr(&pk, st.sandbox);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* cache.clear [peer uid]: the worker checked the peer; the listener
 * checks again, as it trusts no worker. */
static void on_cache_clear(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_cache_clear_t *a = args;
  uint64_t uid;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (a == NULL) {
    reply_error(w, m->msgid, HIPD_EPARAMS, "cache.clear: malformed request");
    return;
  }
  uid = a->uid.u;
  /* Every peer of a worker has its tenant's uid: a worker that names
   * another (0 included) is not believed. */
  if (uid != (uint64_t)w->uid) {
    reply_error(w, m->msgid, HIPD_EPERM, "cache.clear: not the peer's uid");
    return;
  }
  if (uid != 0 && uid != (uint64_t)geteuid()) {
    reply_error(w, m->msgid, HIPD_EPERM,
                "only root or the daemon's user may clear the shared kernel "
                "cache");
    return;
  }
  cache_clear();
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  msgpack_pack_nil(&pk);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* ------------------------------------------------------------------ admin */

static void gather_closed_cb(uv_handle_t *h)
{
  gather_t *g = h->data;

  free(g->wait);
  free(g);
}

/* A worker still there to ask. */
static int askable(const worker_t *w)
{
  /* An adopted channel (no process: pid -1, counted as exited) is asked
   * too: the fuzz target answers for it. */
  return !w->ch.broken && (w->pid < 0 || !w->exited);
}

/* The gather's wait is over (its answers came, or its 2 s passed): hand
 * the reports to every waiter. Runs from the gather's timer, never inside
 * another callback of this file. */
static void gather_finish_cb(uv_timer_t *t)
{
  gather_t *g = t->data;
  list_node_t *lists[] = {&W.live, &W.leaving, &W.adopted};
  report_set_t set = {0};
  report_t **r;
  uint32_t cap = 1, k = 0, extra = 0, missing = 0;

  if (W.g == g)
    W.g = NULL; /* a waiter that asks again starts another */
  if (g->waiting > 0)
    log_warn(0, "admin: %u workers did not report within 2 s: left out",
             g->waiting);
  for (int i = 0; i < 3; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next)
      cap++;
  for (list_node_t *n = W.dead.next; n != &W.dead; n = n->next)
    cap++;
  r = calloc(cap, sizeof(*r));
  for (int i = 0; i < 3; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      w->rep_waited = 0;
      w->rep_again = 0;
      if (!askable(w))
        continue;
      if (r == NULL || w->last == NULL ||
          w->last_ms + REPORT_FRESH_MS < g->start) {
        missing++;
        continue;
      }
      r[k++] = report_ref(w->last);
      set.truncated += w->last->truncated != 0;
    }
  /* A worker that exited and is not folded yet (its channel's end is
   * still to come): its counters count, its sessions and gauges do not. */
  for (list_node_t *n = W.dead.next; r != NULL && n != &W.dead; n = n->next) {
    worker_t *w = list_entry(n, worker_t, node);
    report_t *c;
    if (w->last == NULL || (c = calloc(1, sizeof(*c))) == NULL)
      continue;
    c->refs = 1;
    c->ndev = w->last->ndev;
    c->dev = calloc(c->ndev + 1, sizeof(*c->dev));
    c->nreq = w->last->nreq;
    c->req = calloc(c->nreq + 1, sizeof(*c->req));
    if (c->dev == NULL || c->req == NULL) {
      report_free(c);
      continue;
    }
    memcpy(c->dev, w->last->dev, c->ndev * sizeof(*c->dev));
    memcpy(c->req, w->last->req, c->nreq * sizeof(*c->req));
    for (uint32_t i = 0; i < c->ndev; i++)
      c->dev[i].buffers = c->dev[i].held = 0;
    r[k++] = c;
    extra++;
  }
  set.r = r;
  set.n = k;
  set.exited = extra;
  set.missing = missing;
  /* The set holds its own references: a waiter's answer may end a worker
   * (a broken channel), its report stays until the last waiter is done. */
  for (uint32_t i = 0; i < g->nwait; i++)
    g->wait[i].done(g->wait[i].ctx, &set);
  for (uint32_t i = 0; r != NULL && i < k; i++)
    report_free(r[i]);
  free(r);
  uv_close((uv_handle_t *)&g->timer, gather_closed_cb);
}

/* @p w's report request is over (answered or lost). */
static void rep_over(worker_t *w)
{
  w->rep = NULL;
  w->rep_again = 0;
  if (w->rep_waited) {
    w->rep_waited = 0;
    if (W.g != NULL && W.g->waiting > 0 && --W.g->waiting == 0)
      uv_timer_start(&W.g->timer, gather_finish_cb, 0, 0);
  }
}

static void ask_free(ask_t *a)
{
  list_remove(&a->node);
  free(a);
}

/* The worker's answer to an ask is gone for good (it exited, its channel
 * broke): a gathering leaves it out, a kill fails. */
static void ask_lost(ask_t *a)
{
  if (a->kind == ASK_REPORT)
    rep_over(a->w);
  if (a->kind == ASK_KILL && a->killed != NULL)
    a->killed(a->ctx, HIPD_ENOENT);
  ask_free(a);
}

/* @p w is gone: fold its last report into the node-wide totals, give up
 * on its answers. */
static void worker_forget(worker_t *w)
{
  list_node_t mine;

  /* Its asks move to a list of their own first: a kill's callback answers
   * a client, which may break (and forget) another worker, whose asks
   * then leave W.asks while this walks it. */
  list_init(&mine);
  for (list_node_t *n = W.asks.next, *next; n != &W.asks; n = next) {
    ask_t *a = list_entry(n, ask_t, node);
    next = n->next;
    if (a->w == w) {
      list_remove(&a->node);
      list_insert_tail(&mine, &a->node);
    }
  }
  while (!list_empty(&mine))
    ask_lost(list_entry(mine.next, ask_t, node));
  if (w->last != NULL) {
    admin_fold(w->last);
    report_free(w->last);
    w->last = NULL;
  }
  w->nids = 0;
}

static ask_t *ask_send(worker_t *w, int kind, msgpack_sbuffer *sb,
                       uint32_t msgid)
{
  ask_t *a;

  if (w->ch.broken || (a = calloc(1, sizeof(*a))) == NULL)
    return NULL;
  if (ipc_send(&w->ch, sb->data, sb->size) != 0) {
    free(a);
    return NULL;
  }
  a->w = w;
  a->kind = kind;
  a->msgid = msgid;
  list_insert_tail(&W.asks, &a->node);
  return a;
}

/* Ask @p w for its report, unless a request is unanswered: one at most. */
static ask_t *ask_report(worker_t *w)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t id;
  ask_t *a;

  if (w->rep != NULL)
    return w->rep;
  id = w->ch.next_msgid++;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_REPORT, id);
  a = ask_send(w, ASK_REPORT, &sb, id);
  msgpack_sbuffer_destroy(&sb);
  if (a != NULL) {
    a->view = W.g != NULL;
    w->rep = a;
    w->rep_sent = uv_now(w->d->loop);
    w->rep_warned = 0;
  }
  return a;
}

static void gather_reports(daemon_t *d, admin_gathered_fn done, void *ctx)
{
  list_node_t *lists[] = {&W.live, &W.leaving, &W.adopted};
  uint64_t now = uv_now(d->loop);
  report_set_t none = {0};
  gather_t *g = W.g;

  if (done == NULL) {
    /* The periodic one: a fresh report of each, no view. */
    for (int i = 0; i < 3; i++)
      for (list_node_t *n = lists[i]->next, *next; n != lists[i]; n = next) {
        worker_t *w = list_entry(n, worker_t, node);
        next = n->next;
        if (askable(w))
          ask_report(w);
      }
    return;
  }
  if (g == NULL) {
    if ((g = calloc(1, sizeof(*g))) == NULL) {
      done(ctx, &none);
      return;
    }
    uv_timer_init(d->loop, &g->timer);
    g->timer.data = g;
    g->start = now;
    W.g = g;
    for (int i = 0; i < 3; i++)
      for (list_node_t *n = lists[i]->next, *next; n != lists[i]; n = next) {
        worker_t *w = list_entry(n, worker_t, node);
        next = n->next;
        if (!askable(w) ||
            (w->last != NULL && now - w->last_ms < REPORT_FRESH_MS))
          continue; /* gone, or its last report will do */
        if (w->rep != NULL && now - w->rep_sent >= REPORT_STALE_MS)
          continue; /* it does not answer: left out */
        if (ask_report(w) == NULL)
          continue;
        /* Housekeeping's request may predate what this view's caller
         * did: its answer is followed by a request of the view's own. */
        if (!w->rep->view)
          w->rep_again = 1;
        w->rep_waited = 1;
        g->waiting++;
      }
    uv_timer_start(&g->timer, gather_finish_cb,
                   g->waiting > 0 ? GATHER_WAIT_MS : 0, 0);
  }
  if (g->nwait == g->capwait) {
    uint32_t cap = g->capwait ? g->capwait * 2 : 4;
    waiter_t *n = realloc(g->wait, cap * sizeof(*n));
    if (n == NULL) {
      done(ctx, &none);
      return;
    }
    g->wait = n;
    g->capwait = cap;
  }
  g->wait[g->nwait].done = done;
  g->wait[g->nwait++].ctx = ctx;
}

/* Keep of @p r the sessions the listener handed to @p w (its routing, not
 * the worker's word): @return how many were dropped. */
static uint32_t keep_own_sessions(const worker_t *w, report_t *r)
{
  uint32_t k = 0, dropped = 0;

  for (uint32_t i = 0; i < r->nsess; i++) {
    report_sess_t *s = &r->sess[i];
    if (ids_has(w, s->id) &&
        (w->mode != ISOLATION_SESSION || s->id == w->seq)) {
      r->sess[k++] = *s;
    } else {
      free(s->held);
      dropped++;
    }
  }
  r->nsess = k;
  return dropped;
}

static void on_report_answer(ask_t *a, const proto_msg_t *m)
{
  worker_t *w = a->w;
  report_t *r = NULL;
  int view = a->view;
  char t[64];

  if ((m->error == NULL || m->error->type == MSGPACK_OBJECT_NIL) &&
      m->result != NULL)
    r = report_decode_for(m->result, w->uid);
  if (r == NULL) {
    ask_lost(a);
    ipc_break(&w->ch, "a malformed report");
    return;
  }
  ask_free(a);
  r->dropped += keep_own_sessions(w, r);
  tenant_name(w, t, sizeof(t));
  if (r->dropped > 0 && !w->lied) {
    w->lied = 1;
    log_warn(0,
             "worker of %s (pid %d) reported %u records that are not its "
             "own (another uid, or a session it does not hold): ignored "
             "(logged once)",
             t, (int)w->pid, r->dropped);
  }
  snprintf(r->tenant, sizeof(r->tenant), "%s", t);
  r->worker_pid = w->pid;
  r->owner = w->serial;
  /* The worker's last word: views use it while it is fresh, and it is
   * folded if the worker dies. */
  report_free(w->last);
  w->last = r;
  /* Housekeeping's answers are kept (for the fold), not reused by views:
   * a view's report is asked for at most REPORT_FRESH_MS before it. */
  w->last_ms = view ? uv_now(w->d->loop) : 0;
  if (w->rep_again) {
    w->rep_again = 0;
    w->rep = NULL;
    if (w->rep_waited && ask_report(w) != NULL)
      return; /* the view waits for this one */
  }
  rep_over(w);
}

static void on_kill_answer(ask_t *a, const proto_msg_t *m)
{
  int ok = (m->error == NULL || m->error->type == MSGPACK_OBJECT_NIL) &&
           m->result != NULL && m->result->type == MSGPACK_OBJECT_BOOLEAN &&
           m->result->via.boolean;

  a->w->last_ms = 0; /* its sessions changed: its next view asks again */
  if (a->killed != NULL)
    a->killed(a->ctx, ok ? 0 : HIPD_ENOENT);
  ask_free(a);
}

/* A response of a worker: to one of our asks, else a broken channel. */
static void on_worker_response(worker_t *w, const proto_msg_t *m)
{
  for (list_node_t *n = W.asks.next; n != &W.asks; n = n->next) {
    ask_t *a = list_entry(n, ask_t, node);
    if (a->w != w || a->msgid != m->msgid)
      continue;
    if (a->kind == ASK_REPORT)
      on_report_answer(a, m);
    else
      on_kill_answer(a, m);
    return;
  }
  ipc_break(&w->ch, "an answer to nothing asked");
}

static void kill_session(daemon_t *d, uint64_t owner, uint64_t id,
                         const char *who, void (*done)(void *ctx, int status),
                         void *ctx)
{
  list_node_t *lists[] = {&W.live, &W.leaving, &W.adopted};
  worker_t *w = NULL;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t msgid;
  ask_t *a;

  (void)d;
  /* The worker the listener handed the session to (its routing), if it is
   * still the one of the report the view came from. */
  for (int i = 0; i < 3 && w == NULL; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *x = list_entry(n, worker_t, node);
      if (x->serial == owner && ids_has(x, id)) {
        w = x;
        break;
      }
    }
  if (w == NULL || !askable(w)) {
    done(ctx, HIPD_ENOENT);
    return;
  }
  msgid = w->ch.next_msgid++;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_KILL, msgid);
  msgpack_pack_uint64(&pk, id);
  proto_pack_cstr(&pk, who);
  a = ask_send(w, ASK_KILL, &sb, msgid);
  msgpack_sbuffer_destroy(&sb);
  if (a == NULL) {
    done(ctx, HIPD_ENOENT);
    return;
  }
  a->killed = done;
  a->ctx = ctx;
}

static void send_log_level(worker_t *w, int level)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_LOG_LEVEL, 0);
  msgpack_pack_uint32(&pk, (uint32_t)level);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

static void set_log_level(daemon_t *d, int level)
{
  static const char *const names[] = {"error", "warn", "info", "debug"};
  list_node_t *lists[] = {&W.live, &W.leaving, &W.adopted};

  (void)d;
  /* Workers started from now on take it from their command line. */
  snprintf(W.level_arg, sizeof(W.level_arg), "--log-level=%s", names[level]);
  for (int i = 0; i < 3; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      if (askable(w))
        send_log_level(w, level);
    }
}

/* An admin request's answer to its worker: [status, message, result]. */
typedef struct admin_ask {
  worker_t *w;
  uint32_t msgid;
} admin_ask_t;

static void admin_answered(void *ctx, int status, const char *msg,
                           const char *res, size_t len)
{
  admin_ask_t *q = ctx;
  worker_t *w = q->w;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (!w->ch.broken) {
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response(&pk, q->msgid);
    wire_pack_result(&pk, WIRE_ADMIN);
    msgpack_pack_int(&pk, status);
    proto_pack_cstr(&pk, msg != NULL ? msg : "");
    if (status == 0) {
      msgpack_pack_bin(&pk, (uint32_t)len);
      msgpack_pack_bin_body(&pk, res, len);
    } else {
      msgpack_pack_nil(&pk);
    }
    ipc_send(&w->ch, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
  if (w->admin_busy > 0)
    w->admin_busy--;
  free(q);
  worker_unref(w);
}

/* admin [op, params]: a client's admin request, for the worker's uid (the
 * listener's record, never what the worker says). */
static void on_admin(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_admin_t *a = args;
  const msgpack_object *params;
  char name[32];
  admin_ask_t *q;

  if (a == NULL || !admin_is_op(a->op.p, a->op.len)) {
    reply_error(w, m->msgid, HIPD_EPARAMS, "admin: malformed request");
    return;
  }
  params = a->params.o;
  memcpy(name, a->op.p, a->op.len);
  name[a->op.len] = '\0';
  if (w->admin_busy >= ADMIN_MAX_INFLIGHT) {
    /* Each view costs the listener and every worker a report: one
     * tenant's clients do not get to keep them all busy. */
    reply_error(w, m->msgid, HIPD_EBUSY,
                "admin: this tenant already has 4 admin requests in flight "
                "(the limit): wait for their answers");
    return;
  }
  if ((q = calloc(1, sizeof(*q))) == NULL) {
    reply_error(w, m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  q->w = w;
  q->msgid = m->msgid;
  w->refs++;
  w->admin_busy++;
  admin_request(w->d, w->uid, 0, name, params, admin_answered, q);
}

void workers_admin_init(daemon_t *d)
{
  static const admin_listener_t l = {
      .gather = gather_reports,
      .kill = kill_session,
      .log_level = set_log_level,
  };

  (void)d;
  admin_set_listener(&l);
}

/* closed [id]: a session of the worker is gone (a malformed id still
 * counts it, as its session is gone all the same). */
static void on_closed(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_closed_t *a = args;

  (void)m;
  if (a != NULL)
    ids_remove(w, a->id.u);
  w->last_ms = 0; /* its sessions changed: its next view asks again */
  if (w->sessions > 0) {
    w->sessions--;
    W.sessions--;
  }
  if (w->sessions == 0)
    w->idle_since = uv_now(w->d->loop);
}

/* ready [pid]: logged (the pid the listener knows is its own record). */
static void on_ready(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  char t[64];

  (void)m;
  (void)args;
  log_info(0, "worker of %s ready (pid %d)", tenant_name(w, t, sizeof(t)),
           (int)w->pid);
}

/* What the listener takes from a worker (wire.h). */
static const wire_handler_fn from_worker[WIRE_NMSG] = {
    [WIRE_READY] = on_ready,
    [WIRE_CLOSED] = on_closed,
    [WIRE_COMPILE] = on_compile,
    [WIRE_CACHE_STATS] = on_cache_stats,
    [WIRE_COMPILE_STATS] = on_compile_stats,
    [WIRE_CACHE_CLEAR] = on_cache_clear,
    [WIRE_ADMIN] = on_admin,
};

static void on_msg(ipc_chan_t *ch, const proto_msg_t *m)
{
  worker_t *w = ch->data;

  if (m->type == PROTO_RESPONSE)
    on_worker_response(w, m);
  else if (wire_dispatch(from_worker, WIRE_FROM_WORKER, m, w) != 0)
    ipc_break(ch, "unknown message");
}

/* ---------------------------------------------------------------- spawning */

/* The command line and environment of a worker with --worker=@p role:
 * the listener's options, its environment without what belongs to it
 * alone (systemd's notify socket and watchdog), with what MPS needs. Both
 * arrays are malloc'd; their strings are not. */
static int worker_exec_args(char *role, char ***args_out, char ***env_out)
{
  char **args = calloc(W.argc + 3, sizeof(char *)), **env;
  size_t nenv = 0, ne = 0;

  for (char **e = environ; *e != NULL; e++)
    nenv++;
  env = calloc(nenv + 4, sizeof(char *));
  if (args == NULL || env == NULL) {
    free(args);
    free(env);
    return HIPD_ENOMEM;
  }
  args[0] = W.exe;
  for (size_t i = 1; i < W.argc; i++)
    args[i] = W.argv[i];
  args[W.argc] = role;
  if (W.level_arg[0] != '\0') /* log.level since the listener started */
    args[W.argc + 1] = W.level_arg;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "CUDA_MPS_", 9) != 0 && strncmp(*e, "HIPD_MPS=", 9) != 0 &&
        strncmp(*e, "NOTIFY_SOCKET=", 14) != 0 &&
        strncmp(*e, "WATCHDOG_", 9) != 0)
      env[ne++] = *e;
  mps_worker_env(env + ne, 3);
  *args_out = args;
  *env_out = env;
  return 0;
}

int workers_probe(daemon_t *d, hipd_err_t *err)
{
  char role[64] = "--worker=probe:0:0:0", **args, **env;
  int status;
  pid_t pid;

  (void)d;
  if (worker_exec_args(role, &args, &env) != 0)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  pid = fork();
  if (pid == 0) {
    execve(W.exe, args, env);
    _exit(127);
  }
  free(args);
  free(env);
  if (pid < 0)
    return err_set(err, HIPD_EIO, "cannot start a worker: fork: %s",
                   strerror(errno));
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  return err_set(err, HIPD_EINVAL,
                 "a worker could not start with these options (its error "
                 "is above)");
}

/* A check run on the loop (workers_probe_start()). */
#define PROBE_TIMEOUT_MS 30000
static struct probe {
  uv_process_t proc; /* proc.data = this */
  uv_timer_t timer;
  daemon_t *d;
  workers_probe_fn done;
  void *ctx;
  int running; /* started, its handles not closed yet */
  int handles, timed_out;
} P;

static void probe_closed_cb(uv_handle_t *h)
{
  (void)h;
  if (--P.handles == 0)
    P.running = 0;
}

static void probe_exit_cb(uv_process_t *p, int64_t status, int sig)
{
  workers_probe_fn done = P.done;
  int ok = status == 0 && sig == 0 && !P.timed_out;

  (void)p;
  uv_timer_stop(&P.timer);
  uv_close((uv_handle_t *)&P.proc, probe_closed_cb);
  uv_close((uv_handle_t *)&P.timer, probe_closed_cb);
  P.done = NULL;
  if (done != NULL)
    done(P.d, ok, P.ctx);
}

static void probe_timeout_cb(uv_timer_t *t)
{
  (void)t;
  P.timed_out = 1;
  log_error(0, "the worker checking the new options did not finish within "
               "30 s: killed");
  uv_process_kill(&P.proc, SIGKILL);
}

int workers_probe_start(daemon_t *d, workers_probe_fn done, void *ctx,
                        hipd_err_t *err)
{
  char role[64] = "--worker=probe:0:0:0", **args, **env;
  uv_process_options_t o = {0};
  uv_stdio_container_t io[3];
  int rc;

  if (P.running)
    return err_set(err, HIPD_EBUSY, "a worker check is still running");
  if (worker_exec_args(role, &args, &env) != 0)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  for (int i = 0; i < 3; i++) {
    io[i].flags = UV_INHERIT_FD;
    io[i].data.fd = i;
  }
  o.file = W.exe;
  o.args = args;
  o.env = env;
  o.stdio = io;
  o.stdio_count = 3;
  o.exit_cb = probe_exit_cb;
  memset(&P, 0, sizeof(P));
  P.d = d;
  P.done = done;
  P.ctx = ctx;
  rc = uv_spawn(d->loop, &P.proc, &o);
  free(args);
  free(env);
  if (rc != 0) {
    uv_close((uv_handle_t *)&P.proc, NULL);
    return err_set(err, HIPD_EIO, "cannot start a worker: %s", uv_strerror(rc));
  }
  P.running = 1;
  P.handles = 2;
  uv_timer_init(d->loop, &P.timer);
  uv_timer_start(&P.timer, probe_timeout_cb, PROBE_TIMEOUT_MS, 0);
  return 0;
}

static worker_t *worker_spawn(daemon_t *d, int mode, uid_t uid, gid_t gid,
                              uint64_t seq)
{
  worker_t *w = calloc(1, sizeof(*w));
  uv_process_options_t o = {0};
  uv_stdio_container_t io[4];
  char role[96], **args = NULL, **env = NULL;
  int rc;

  if (w == NULL)
    return NULL;
  w->d = d;
  w->mode = mode;
  w->uid = uid;
  w->gid = gid;
  w->seq = seq;
  if (ipc_init(d->loop, &w->ch) != 0) {
    free(w);
    return NULL;
  }
  w->ch.data = w;
  w->serial = ++W.serial;
  w->ch.no_handles = 1;
  snprintf(role, sizeof(role), "--worker=%s:%u:%u:%llu",
           mode == ISOLATION_SESSION ? "session" : "uid", (unsigned)uid,
           (unsigned)gid, (unsigned long long)seq);
  if (worker_exec_args(role, &args, &env) != 0)
    goto fail;
  io[0].flags = UV_IGNORE;
  io[1].flags = UV_INHERIT_FD;
  io[1].data.fd = 1;
  io[2].flags = UV_INHERIT_FD;
  io[2].data.fd = 2;
  io[3].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
  io[3].data.stream = (uv_stream_t *)&w->ch.pipe;
  o.file = W.exe;
  o.args = args;
  o.env = env;
  o.stdio = io;
  o.stdio_count = 4;
  o.exit_cb = exit_cb;
  rc = uv_spawn(d->loop, &w->proc, &o);
  w->handles = 2; /* the process and the channel */
  w->proc.data = w;
  if (rc != 0) {
    log_error(0, "cannot start a worker for uid %u: %s", (unsigned)uid,
              uv_strerror(rc));
    uv_close((uv_handle_t *)&w->proc, proc_closed_cb);
    ipc_close(&w->ch, ch_closed);
    w = NULL; /* freed by the close callbacks */
    goto done;
  }
  w->pid = w->proc.pid;
  w->refs = 1;
  W.n++;
  W.started++;
  list_insert_tail(&W.live, &w->node);
  if ((rc = ipc_start(&w->ch, on_msg, ch_broken)) != 0) {
    log_error(0, "worker pid %d: cannot read its channel: %s", (int)w->pid,
              uv_strerror(rc));
    worker_leave(w);
    uv_process_kill(&w->proc, SIGKILL);
    w = NULL;
  }
done:
  free(args);
  free(env);
  return w;
fail:
  free(args);
  free(env);
  /* Freed by the close callback, once libuv lets go of the pipe. */
  w->handles = 1;
  w->refs = 0;
  ipc_close(&w->ch, ch_closed);
  return NULL;
}

int workers_adopt(daemon_t *d, int fd, uid_t uid)
{
  worker_t *w = calloc(1, sizeof(*w));
  int rc;

  if (w == NULL)
    return HIPD_ENOMEM;
  w->d = d;
  w->mode = ISOLATION_UID;
  w->uid = uid;
  w->gid = (gid_t)uid;
  w->pid = -1;
  w->exited = 1; /* no process to reap or kill */
  rc = ipc_open(d->loop, &w->ch, fd);
  w->ch.data = w;
  w->serial = ++W.serial;
  if (rc != 0) {
    if (rc == HIPD_ENOMEM) { /* nothing was set up */
      free(w);
      return rc;
    }
    w->handles = 1;
    ipc_close(&w->ch, ch_closed); /* frees w */
    return HIPD_EIO;
  }
  w->ch.no_handles = 1;
  w->handles = 1;
  w->refs = 1;
  list_insert_tail(&W.adopted, &w->node);
  if (ipc_start(&w->ch, on_msg, adopted_broken) != 0) {
    list_remove(&w->node);
    ipc_close(&w->ch, ch_closed);
    return HIPD_EIO;
  }
  return 0;
}

/* --------------------------------------------------------------- refusals */

static void refusal_closed_cb(uv_handle_t *h)
{
  refusal_t *r = h->data;

  msgpack_sbuffer_destroy(&r->out);
  free(r);
}

static void refusal_close(refusal_t *r)
{
  if (uv_is_closing((uv_handle_t *)&r->pipe))
    return;
  list_remove(&r->node);
  uv_close((uv_handle_t *)&r->pipe, refusal_closed_cb);
}

static void refusal_written_cb(uv_write_t *req, int status)
{
  refusal_t *r = req->data;

  (void)status;
  /* The reason a session would give (PROTOCOL.md, "Why a session is
   * closed"). */
  log_info(r->id, "session closed: not allowed: %s (1 requests)", r->why.msg);
  refusal_close(r);
}

static void refusal_alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
  refusal_t *r = h->data;

  (void)sz;
  buf->base = (char *)r->buf + r->len;
  buf->len = sizeof(r->buf) - r->len;
}

/* Answer the first request with the rule, as a session would. */
static void refusal_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  refusal_t *r = s->data;
  proto_limits_t lim;
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason;
  size_t need;
  long long len;
  msgpack_packer pk;
  uv_buf_t b;

  (void)buf;
  if (n < 0 || r->answered) {
    refusal_close(r);
    return;
  }
  r->len += (size_t)n;
  proto_limits_default(&lim);
  lim.max_message = sizeof(r->buf);
  len = proto_frame_scan(&lim, r->buf, r->len, &need, &reason);
  if (len == 0 && r->len < sizeof(r->buf))
    return;
  if (len <= 0 || !msgpack_zone_init(&zone, 1024)) {
    refusal_close(r);
    return;
  }
  if (proto_msg_decode(r->buf, (size_t)len, &zone, &msg, &reason) != 0 ||
      msg.type != PROTO_REQUEST) {
    msgpack_zone_destroy(&zone);
    refusal_close(r);
    return;
  }
  r->answered = 1;
  uv_read_stop(s);
  msgpack_packer_init(&pk, &r->out, msgpack_sbuffer_write);
  /* As a session answers: "METHOD: why". */
  proto_pack_error_response(&pk, msg.msgid, r->why.code, "%.*s: %s",
                            (int)(msg.method_len > 64 ? 64 : msg.method_len),
                            msg.method, r->why.msg);
  msgpack_zone_destroy(&zone);
  b = uv_buf_init(r->out.data, (unsigned)r->out.size);
  r->wreq.data = r;
  if (uv_write(&r->wreq, s, &b, 1, refusal_written_cb) != 0)
    refusal_close(r);
}

static void refuse(daemon_t *d, uv_pipe_t *c, uint64_t id, const hipd_err_t *e)
{
  refusal_t *r = calloc(1, sizeof(*r));

  if (r == NULL) {
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  log_info(id, "refused: %s", e->msg);
  /* The accepted handle cannot move: open a new one on its descriptor. */
  {
    uv_os_fd_t fd;
    int nfd = uv_fileno((uv_handle_t *)c, &fd) == 0 ? dup(fd) : -1;
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    uv_pipe_init(d->loop, &r->pipe, 0);
    r->pipe.data = r;
    list_insert_tail(&W.refusals, &r->node);
    if (nfd < 0 || uv_pipe_open(&r->pipe, nfd) != 0) {
      if (nfd >= 0)
        close(nfd);
      refusal_close(r);
      return;
    }
  }
  r->id = id;
  r->why = *e;
  r->opened_ms = uv_now(d->loop);
  msgpack_sbuffer_init(&r->out);
  if (uv_read_start((uv_stream_t *)&r->pipe, refusal_alloc_cb,
                    refusal_read_cb) != 0)
    refusal_close(r);
}

/* ----------------------------------------------------------------- routing */

void workers_accept(daemon_t *d, uv_stream_t *server)
{
  uv_pipe_t *c = malloc(sizeof(*c));
  struct ucred cred = {.pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1};
  socklen_t clen = sizeof(cred);
  worker_t *w = NULL;
  hipd_err_t err;
  uint64_t devmask, id;
  char who[96];
  uv_os_fd_t fd;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  int rc;

  if (c == NULL)
    return;
  uv_pipe_init(d->loop, c, 0);
  if (uv_accept(server, (uv_stream_t *)c) != 0 ||
      uv_fileno((uv_handle_t *)c, &fd) != 0 ||
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  id = ++d->next_session_id;
  d->sessions_total++;
  if (d->stopping || W.sessions >= d->cfg.max_sessions) {
    log_info(id, "connection of uid %u closed: %s", (unsigned)cred.uid,
             d->stopping ? "daemon is shutting down" : "too many sessions");
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  if (policy_check_peer(d, cred.uid, cred.gid, who, sizeof(who), &devmask,
                        &err) != 0) {
    refuse(d, c, id, &err);
    return;
  }
  if (d->cfg.isolation == ISOLATION_UID) {
    for (list_node_t *n = W.live.next; n != &W.live; n = n->next) {
      worker_t *x = list_entry(n, worker_t, node);
      if (x->uid == cred.uid) {
        w = x;
        break;
      }
    }
  }
  if (w == NULL)
    w = worker_spawn(d, d->cfg.isolation, cred.uid, cred.gid, id);
  if (w == NULL) {
    log_error(id, "connection of uid %u closed: no worker could be started",
              (unsigned)cred.uid);
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  /* conn [id, uid, gid, pid], with the connection. */
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_CONN, 0);
  msgpack_pack_uint64(&pk, id);
  msgpack_pack_uint32(&pk, (uint32_t)cred.uid);
  msgpack_pack_uint32(&pk, (uint32_t)cred.gid);
  msgpack_pack_int32(&pk, (int32_t)cred.pid);
  rc = ipc_send_handle(&w->ch, sb.data, sb.size, c);
  msgpack_sbuffer_destroy(&sb);
  if (rc != 0) {
    log_error(id, "cannot hand the connection to worker pid %d: %s",
              (int)w->pid, uv_strerror(rc));
    return; /* ipc_send_handle closed it */
  }
  w->sessions++;
  W.sessions++;
  ids_add(w, id);
  w->last_ms = 0; /* its sessions changed: its next view asks again */
}

/* ------------------------------------------------------------ housekeeping */

static void send_exit(worker_t *w)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_EXIT, 0);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  w->exit_sent = uv_now(w->d->loop);
}

void workers_housekeeping(daemon_t *d)
{
  uint64_t now = uv_now(d->loop);
  list_node_t *n, *next;

  for (n = W.live.next; n != &W.live; n = next) {
    worker_t *w = list_entry(n, worker_t, node);
    next = n->next;
    if (w->sessions == 0 && now - w->idle_since >= d->cfg.worker_linger_ms) {
      worker_leave(w);
      /* Its final counters first (admin_fold() keeps them): it answers
       * before it reads the exit. */
      ask_report(w);
      send_exit(w);
    }
  }
  for (n = W.dead.next; n != &W.dead; n = next) {
    worker_t *w = list_entry(n, worker_t, node);
    next = n->next;
    if (now - w->exited_ms >= 2000) {
      list_remove(&w->node);
      worker_forget(w);
      ipc_close(&w->ch, ch_closed);
    }
  }
  /* A worker that leaves its report request unanswered is left out of
   * views (REPORT_STALE_MS); said once when it has been long. */
  for (int i = 0; i < 2; i++)
    for (n = (i ? &W.leaving : &W.live)->next; n != (i ? &W.leaving : &W.live);
         n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      if (w->rep != NULL && !w->rep_warned &&
          now - w->rep_sent >= REPORT_LOST_MS) {
        w->rep_warned = 1;
        log_warn(0,
                 "worker pid %d has not answered its report request for "
                 "30 s: left out of the admin views until it does",
                 (int)w->pid);
      }
    }
  /* Every 10 s, each worker's report, in case one dies without a word. */
  if (now - W.last_gather >= 10000) {
    W.last_gather = now;
    gather_reports(d, NULL, NULL);
  }
  /* A worker told to exit gets its drain (--shutdown-timeout) and a
   * margin, then it is killed. */
  for (n = W.leaving.next; n != &W.leaving; n = n->next) {
    worker_t *w = list_entry(n, worker_t, node);
    if (w->exit_sent != 0 && !w->exited &&
        now - w->exit_sent >= (uint64_t)d->cfg.shutdown_ms + 3000) {
      log_warn(0, "worker pid %d did not exit when told to: killed",
               (int)w->pid);
      uv_process_kill(&w->proc, SIGKILL);
      w->exit_sent = now; /* once per period */
    }
  }
  for (n = W.refusals.next; n != &W.refusals; n = next) {
    refusal_t *r = list_entry(n, refusal_t, node);
    next = n->next;
    if (!r->answered && d->cfg.hello_timeout_ms != 0 &&
        now - r->opened_ms >= d->cfg.hello_timeout_ms)
      refusal_close(r);
  }
}

uint32_t workers_stop(daemon_t *d, int force)
{
  list_node_t *n, *next;

  (void)d;
  while (!list_empty(&W.live))
    worker_leave(list_entry(W.live.next, worker_t, node));
  for (n = W.leaving.next; n != &W.leaving; n = next) {
    worker_t *w = list_entry(n, worker_t, node);
    next = n->next;
    if (force)
      uv_process_kill(&w->proc, SIGKILL);
    else if (!W.stop_sent)
      uv_process_kill(&w->proc, SIGTERM);
  }
  W.stop_sent = 1;
  if (P.running && P.done != NULL)
    uv_process_kill(&P.proc, SIGKILL); /* a reload's check: no reload */
  for (n = W.refusals.next; n != &W.refusals; n = next) {
    next = n->next;
    refusal_close(list_entry(n, refusal_t, node));
  }
  return W.n;
}

void workers_free(daemon_t *d)
{
  (void)d;
}
