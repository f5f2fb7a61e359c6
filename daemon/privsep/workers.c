/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers.c: the listener starts tenant workers, reaps them and
 * routes their messages (workers.h, workers_pool.h). */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "privsep/ipc.h"
#include "privsep/mps.h"
#include "privsep/tenant_pages.h"
#include "privsep/wire.h"
#include "privsep/worker.h"
#include "privsep/workers.h"
#include "privsep/workers_pool.h"
#include "sandbox/cgroup.h"
#include "spin.h"
#include "tenants.h"
#include "util/account.h"
#include "util/array.h"

extern char **environ;

workers_pool_t workers_pool = {
    /* Empty lists before workers_init() (workers_adopt() needs none). */
    .live = {&workers_pool.live, &workers_pool.live},
    .leaving = {&workers_pool.leaving, &workers_pool.leaving},
    .dead = {&workers_pool.dead, &workers_pool.dead},
    .adopted = {&workers_pool.adopted, &workers_pool.adopted},
    .asks = {&workers_pool.asks, &workers_pool.asks},
};

int workers_init(daemon_t *d, char **argv, hipd_err_t *err)
{
  ssize_t n;

  list_init(&workers_pool.live);
  list_init(&workers_pool.leaving);
  list_init(&workers_pool.dead);
  list_init(&workers_pool.adopted);
  list_init(&workers_pool.asks);
  cache_set_warmed_hook(workers_on_warmed);
  for (workers_pool.argc = 0; argv[workers_pool.argc] != NULL;
       workers_pool.argc++)
    ;
  workers_pool.argv = argv;
  n = readlink("/proc/self/exe", workers_pool.exe,
               sizeof(workers_pool.exe) - 1);
  if (n <= 0)
    return err_set(err, HIPD_EIO,
                   "cannot find this program for its workers: "
                   "readlink /proc/self/exe: %s",
                   strerror(errno));
  workers_pool.exe[n] = '\0';
  if (geteuid() == 0) {
    account_t acct;
    if (account_by_name(d->cfg.worker_user, &acct, NULL) != 0)
      return err_set(err, HIPD_EINVAL,
                     "the worker account '%s' does not exist: create it "
                     "(sysusers.d/hipd.conf, or useradd --system %s) or name "
                     "another with --user",
                     d->cfg.worker_user, d->cfg.worker_user);
    if (acct.uid == 0)
      return err_set(err, HIPD_EINVAL,
                     "--user %s is root: workers must run unprivileged",
                     d->cfg.worker_user);
  }
  return 0;
}

uint32_t workers_count(const daemon_t *d)
{
  (void)d;
  return workers_pool.n;
}

uint64_t workers_started(const daemon_t *d)
{
  (void)d;
  return workers_pool.started;
}

uint32_t workers_sessions(const daemon_t *d)
{
  (void)d;
  return workers_pool.sessions;
}

void workers_signal(daemon_t *d, int signum)
{
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving};

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
  for (workers_pool.argc = 0; argv[workers_pool.argc] != NULL;
       workers_pool.argc++)
    ;
  workers_pool.argv = argv;
}

uint32_t workers_broadcast(const void *data, size_t size)
{
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving};
  uint32_t n = 0;

  for (int i = 0; i < 2; i++)
    for (list_node_t *l = lists[i]->next; l != lists[i]; l = l->next) {
      worker_t *w = list_entry(l, worker_t, node);
      if (!w->exited && !w->ch.broken && ipc_send(&w->ch, data, size) == 0)
        n++;
    }
  return n;
}

void workers_reload(daemon_t *d)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t n;

  (void)d;
  /* A reload sets the file's log level (the listener's and the running
   * workers'): new workers start with it too, not with log.level's. */
  workers_pool.level_arg[0] = '\0';
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_RELOAD, 0);
  msgpack_pack_array(&pk, (uint32_t)workers_pool.argc);
  for (size_t i = 0; i < workers_pool.argc; i++)
    proto_pack_cstr(&pk, workers_pool.argv[i]);
  n = workers_broadcast(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  log_debug(0, "reload sent to %u workers", n);
}

/* ----------------------------------------------------------- lifetime */

static void worker_free_mem(worker_t *w)
{
  free(w->ids.v);
  free(w->connecting.v);
  free(w->answered);
  free(w);
}

void workers_unref(worker_t *w)
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
void workers_ids_add(workers_ids_t *l, uint64_t id, uint64_t at_ms)
{
  if (ARRAY_GROW(l->v, l->n, l->cap, 8) != 0)
    return; /* its session is then not listed, nor killed by id */
  l->v[l->n].id = id;
  l->v[l->n++].at_ms = at_ms;
}

int workers_ids_has(const workers_ids_t *l, uint64_t id)
{
  for (uint32_t i = 0; i < l->n; i++)
    if (l->v[i].id == id)
      return 1;
  return 0;
}

void workers_ids_remove(workers_ids_t *l, uint64_t id)
{
  for (uint32_t i = 0; i < l->n; i++)
    if (l->v[i].id == id) {
      l->v[i] = l->v[--l->n];
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
void workers_leave(worker_t *w)
{
  if (w->leaving)
    return;
  w->leaving = 1;
  list_remove(&w->node);
  list_insert_tail(&workers_pool.leaving, &w->node);
}

const char *workers_tenant_name(const worker_t *w, char *buf, size_t len)
{
  if (w->mode == ISOLATION_SESSION)
    snprintf(buf, len, "session %llu (uid %u)", (unsigned long long)w->seq,
             (unsigned)w->uid);
  else
    snprintf(buf, len, "uid %u", (unsigned)w->uid);
  return buf;
}

static void release_tslot(worker_t *w)
{
  if (w->tslot >= 0)
    tenant_pages_give(w->uid, (uint32_t)w->tslot);
  w->tslot = -1;
}

/* Worker @p w (alive or not) no longer counts as its uid's MPS client
 * (mps_tenant_take()); once only. */
static void mps_release(worker_t *w)
{
  if (w->mps_counted)
    mps_tenant_release(w->uid);
  w->mps_counted = 0;
}

static void exit_cb(uv_process_t *p, int64_t status, int sig)
{
  worker_t *w = p->data;
  cgroup_usage_t cu;
  char t[64];

  workers_tenant_name(w, t, sizeof(t));
  if (sig == SIGKILL && cgroup_tenant_usage(w->uid, &cu) == 0 &&
      cu.oom_kills > w->oom_kills)
    log_error(0,
              "worker of %s (pid %d) was "
              "ended by the OOM killer: the tenant's processes reached "
              "their memory limit of %llu MiB (--tenant-host-mem); its %u "
              "sessions are gone, other tenants are not affected",
              t, (int)w->pid, (unsigned long long)(cu.mem_max >> 20),
              w->sessions);
  else if (sig != 0)
    log_error(0,
              "worker of %s (pid %d) was killed by signal %d (%s); its %u "
              "sessions are gone, other tenants are not affected",
              t, (int)w->pid, sig, strsignal(sig), w->sessions);
  else if (status == WORKER_EXIT_GPU_TIMEOUT)
    log_error(0,
              "worker of %s (pid %d) ended itself: a GPU kernel ran past "
              "--gpu-kernel-timeout; its %u sessions were told why "
              "(ETIMEDOUT), other tenants are not affected",
              t, (int)w->pid, w->sessions);
  else if (status != 0)
    log_warn(0,
             "worker of %s (pid %d) exited with status %lld; its %u "
             "sessions are gone",
             t, (int)w->pid, (long long)status, w->sessions);
  else
    log_info(0, "worker of %s (pid %d) exited", t, (int)w->pid);
  w->exited = 1;
  mps_release(w);
  spin_slot_release(w->spin_slot); /* it may have died spinning */
  release_tslot(w); /* what it held no longer counts for its uid */
  w->spin_slot = -1;
  workers_pool.sessions -=
      w->sessions < workers_pool.sessions ? w->sessions : workers_pool.sessions;
  w->sessions = 0;
  workers_leave(w);
  list_remove(&w->node);
  workers_pool.n--;
  uv_close((uv_handle_t *)&w->proc, proc_closed_cb);
  /* What it wrote before it died is still to be read (its last report):
   * the channel closes at its end of file (ch_broken). */
  if (w->ch.broken) {
    workers_forget(w);
    ipc_close(&w->ch, ch_closed);
  } else {
    /* Housekeeping closes it if its end never comes (a descriptor
     * inherited by a process that outlived the worker). */
    w->exited_ms = uv_now(w->d->loop);
    list_insert_tail(&workers_pool.dead, &w->node);
  }
  workers_unref(w);
}

static void adopted_broken(ipc_chan_t *ch, const char *why);

static void ch_broken(ipc_chan_t *ch, const char *why)
{
  worker_t *w = ch->data;

  if (w->exited) {
    if (w->pid < 0) {
      adopted_broken(ch, why);
    } else {
      list_remove(&w->node); /* from workers_pool.dead */
      workers_forget(w);
      ipc_close(&w->ch, ch_closed);
    }
    return;
  }
  if (w->exit_sent != 0 || workers_pool.stop_sent) {
    /* Told to exit (or to stop): it closes its channel on the way out. */
    log_debug(0, "worker pid %d: channel closed as it exits", (int)w->pid);
    return;
  }
  log_warn(0, "worker pid %d: channel closed (%s); stopping it", (int)w->pid,
           why);
  workers_leave(w);
  uv_process_kill(&w->proc, SIGKILL);
}

/* An adopted channel (workers_adopt) has no process: it just closes. */
static void adopted_broken(ipc_chan_t *ch, const char *why)
{
  worker_t *w = ch->data;

  log_debug(0, "adopted worker channel closed: %s", why);
  list_remove(&w->node); /* from workers_pool.adopted */
  workers_forget(w);
  ipc_close(&w->ch, ch_closed);
  workers_unref(w);
}

void workers_reply_error(worker_t *w, uint32_t msgid, int code, const char *msg)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error_response(&pk, msgid, code, "%s", msg);
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* closed [id]: a session of the worker is gone (a malformed id still
 * counts it, as its session is gone all the same). */
static void on_closed(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_closed_t *a = args;

  (void)m;
  if (a != NULL) {
    workers_ids_remove(&w->ids, a->id.u);
    workers_ids_remove(&w->connecting, a->id.u);
  }
  w->last_ms = 0; /* its sessions changed: its next view asks again */
  if (w->sessions > 0) {
    w->sessions--;
    workers_pool.sessions--;
  }
  if (w->sessions == 0)
    w->idle_since = uv_now(w->d->loop);
}

/* hello [id]: one of its connections is past hello. Only its own ids
 * count: a worker can say nothing of another's. */
static void on_hello(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_hello_t *a = args;

  (void)m;
  if (a != NULL)
    workers_ids_remove(&w->connecting, a->id.u);
}

/* ready [pid]: logged (the pid the listener knows is its own record). */
static void on_ready(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  char t[64];

  (void)m;
  (void)args;
  log_info(0, "worker of %s ready (pid %d)",
           workers_tenant_name(w, t, sizeof(t)), (int)w->pid);
}

/* What the listener takes from a worker (wire.h). */
static const wire_handler_fn from_worker[WIRE_NMSG] = {
    [WIRE_READY] = on_ready,
    [WIRE_CLOSED] = on_closed,
    [WIRE_HELLO] = on_hello,
    [WIRE_COMPILE] = workers_on_compile,
    [WIRE_CACHE_STATS] = workers_on_cache_stats,
    [WIRE_COMPILE_STATS] = workers_on_compile_stats,
    [WIRE_CACHE_CLEAR] = workers_on_cache_clear,
    [WIRE_ADMIN] = workers_on_admin,
    [WIRE_CACHE_TOUCH] = workers_on_cache_touch,
};

static void on_msg(ipc_chan_t *ch, const proto_msg_t *m)
{
  worker_t *w = ch->data;

  if (m->type == PROTO_RESPONSE)
    workers_on_response(w, m);
  else if (wire_dispatch(from_worker, WIRE_FROM_WORKER, m, w) != 0)
    ipc_break(ch, "unknown message");
}

/* ---------------------------------------------------------------- spawning */

/* The command line and environment of a worker with --worker=@p role:
 * the listener's options, its environment without what belongs to it
 * alone (systemd's notify socket and watchdog), with what MPS needs. Both
 * arrays are malloc'd; their strings are not. */
int workers_exec_args(char *role, int mps_client, char ***args_out,
                      char ***env_out)
{
  char **args = calloc(workers_pool.argc + 3, sizeof(char *)), **env;
  size_t nenv = 0, ne = 0;

  for (char **e = environ; *e != NULL; e++)
    nenv++;
  /* Room for mps_worker_env's 3 and workers_spawn's cgroup, tenant slot
   * and 2 MPS limits. */
  env = calloc(nenv + 8, sizeof(char *));
  if (args == NULL || env == NULL) {
    free(args);
    free(env);
    return HIPD_ENOMEM;
  }
  args[0] = workers_pool.exe;
  for (size_t i = 1; i < workers_pool.argc; i++)
    args[i] = workers_pool.argv[i];
  args[workers_pool.argc] = role;
  if (workers_pool.level_arg[0] !=
      '\0') /* log.level since the listener started */
    args[workers_pool.argc + 1] = workers_pool.level_arg;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "CUDA_MPS_", 9) != 0 && strncmp(*e, "HIPD_MPS=", 9) != 0 &&
        strncmp(*e, "NOTIFY_SOCKET=", 14) != 0 &&
        strncmp(*e, "WATCHDOG_", 9) != 0)
      env[ne++] = *e;
  mps_worker_env(env + ne, 3, mps_client);
  *args_out = args;
  *env_out = env;
  return 0;
}

worker_t *workers_spawn(daemon_t *d, int mode, uid_t uid, gid_t gid,
                        uint64_t seq)
{
  worker_t *w = calloc(1, sizeof(*w));
  uv_process_options_t o = {0};
  uv_stdio_container_t io[6];
  char role[112], **args = NULL, **env = NULL;
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
  w->serial = ++workers_pool.serial;
  w->ch.no_handles = 1;
  /* Its spinners count against the budget of all hipd's processes. */
  w->spin_slot = spin_budget_fd() >= 0 ? spin_slot_take() : -1;
  w->tslot = -1;
  snprintf(role, sizeof(role), "--worker=%s:%u:%u:%llu",
           mode == ISOLATION_SESSION ? "session" : "uid", (unsigned)uid,
           (unsigned)gid, (unsigned long long)seq);
  if (w->spin_slot >= 0)
    snprintf(role + strlen(role), sizeof(role) - strlen(role), ":%d",
             w->spin_slot);
  /* An MPS client or not (--mps-tenants), before its environment. */
  w->mps = mps_tenant_take(uid, gid, &w->mps_counted);
  if (workers_exec_args(role, w->mps, &args, &env) != 0)
    goto fail;
  {
    hipd_err_t cerr;
    size_t ne = 0;
    if (cgroup_tenant_prepare(uid, w->cgroup_env, sizeof(w->cgroup_env),
                              &cerr) != 0)
      log_warn(0, "the worker for uid %u has no cgroup: %s", (unsigned)uid,
               cerr.msg);
    cgroup_usage_t cu;
    mps_limits_t lim;
    while (env[ne] != NULL)
      ne++;
    if (w->cgroup_env[0] != '\0')
      env[ne++] = w->cgroup_env;
    /* Its share of the GPUs under MPS (mps.h), by its uid's rules. */
    mps_limits_for(&d->cfg, uid, gid, &lim);
    if (w->mps)
      ne += mps_limits_env(&lim, w->mps_env[0], w->mps_env[1],
                           sizeof(w->mps_env[0]), env + ne);
    if (cgroup_tenant_usage(uid, &cu) == 0)
      w->oom_kills = cu.oom_kills;
    /* A session's worker, or one of several of a uid, counts against its
     * uid's totals on the uid's tenant page (tenant_pages.h). */
    if (mode == ISOLATION_SESSION || d->cfg.tenant_workers > 1) {
      uint32_t slot;
      if (tenant_pages_take(uid, d->cfg.max_sessions + 64, &w->tpage_fd, &slot,
                            &cerr) != 0) {
        log_error(0, "cannot start a worker for uid %u: %s", (unsigned)uid,
                  cerr.msg);
        goto fail;
      }
      w->tslot = (int)slot;
      snprintf(w->tslot_env, sizeof(w->tslot_env), TENANT_SLOT_ENV "=%u", slot);
      env[ne++] = w->tslot_env;
    }
  }
  io[0].flags = UV_IGNORE;
  io[1].flags = UV_INHERIT_FD;
  io[1].data.fd = 1;
  io[2].flags = UV_INHERIT_FD;
  io[2].data.fd = 2;
  io[3].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
  io[3].data.stream = (uv_stream_t *)&w->ch.pipe;
  o.file = workers_pool.exe;
  o.args = args;
  o.env = env;
  io[4].flags = UV_INHERIT_FD; /* WORKER_SPIN_FD */
  io[4].data.fd = spin_budget_fd();
  if (w->spin_slot < 0)
    io[4].flags = UV_IGNORE;
  io[5].flags = UV_INHERIT_FD; /* TENANT_PAGE_FD */
  io[5].data.fd = w->tpage_fd;
  o.stdio = io;
  o.stdio_count = w->tslot >= 0 ? 6 : w->spin_slot >= 0 ? 5 : 4;
  o.exit_cb = exit_cb;
  rc = uv_spawn(d->loop, &w->proc, &o);
  w->handles = 2; /* the process and the channel */
  w->proc.data = w;
  if (rc != 0) {
    log_error(0, "cannot start a worker for uid %u: %s", (unsigned)uid,
              uv_strerror(rc));
    mps_release(w);
    spin_slot_release(w->spin_slot);
    w->spin_slot = -1;
    release_tslot(w);
    uv_close((uv_handle_t *)&w->proc, proc_closed_cb);
    ipc_close(&w->ch, ch_closed);
    w = NULL; /* freed by the close callbacks */
    goto done;
  }
  w->pid = w->proc.pid;
  w->refs = 1;
  workers_pool.n++;
  workers_pool.started++;
  list_insert_tail(&workers_pool.live, &w->node);
  if ((rc = ipc_start(&w->ch, on_msg, ch_broken)) != 0) {
    log_error(0, "worker pid %d: cannot read its channel: %s", (int)w->pid,
              uv_strerror(rc));
    workers_leave(w);
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
  mps_release(w);
  spin_slot_release(w->spin_slot);
  release_tslot(w);
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
  w->serial = ++workers_pool.serial;
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
  list_insert_tail(&workers_pool.adopted, &w->node);
  if (ipc_start(&w->ch, on_msg, adopted_broken) != 0) {
    list_remove(&w->node);
    ipc_close(&w->ch, ch_closed);
    return HIPD_EIO;
  }
  return 0;
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

  for (n = workers_pool.live.next; n != &workers_pool.live; n = next) {
    worker_t *w = list_entry(n, worker_t, node);
    next = n->next;
    if (w->sessions == 0 && now - w->idle_since >= d->cfg.worker_linger_ms) {
      workers_leave(w);
      /* Its final counters first (admin_fold() keeps them): it answers
       * before it reads the exit. */
      workers_ask_report(w);
      send_exit(w);
    }
  }
  for (n = workers_pool.dead.next; n != &workers_pool.dead; n = next) {
    worker_t *w = list_entry(n, worker_t, node);
    next = n->next;
    if (now - w->exited_ms >= 2000) {
      list_remove(&w->node);
      workers_forget(w);
      ipc_close(&w->ch, ch_closed);
    }
  }
  /* A worker that leaves its report request unanswered is left out of
   * views (REPORT_STALE_MS); said once when it has been long. */
  for (int i = 0; i < 2; i++)
    for (n = (i ? &workers_pool.leaving : &workers_pool.live)->next;
         n != (i ? &workers_pool.leaving : &workers_pool.live); n = n->next) {
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
  if (now - workers_pool.last_gather >= 10000) {
    workers_pool.last_gather = now;
    workers_gather(d, NULL, NULL);
  }
  /* A worker told to exit gets its drain (--shutdown-timeout) and a
   * margin, then it is killed. */
  for (n = workers_pool.leaving.next; n != &workers_pool.leaving; n = n->next) {
    worker_t *w = list_entry(n, worker_t, node);
    if (w->exit_sent != 0 && !w->exited &&
        now - w->exit_sent >= (uint64_t)d->cfg.shutdown_ms + 3000) {
      log_warn(0, "worker pid %d did not exit when told to: killed",
               (int)w->pid);
      uv_process_kill(&w->proc, SIGKILL);
      w->exit_sent = now; /* once per period */
    }
  }
}

uint32_t workers_stop(daemon_t *d, int force)
{
  list_node_t *n, *next;

  (void)d;
  while (!list_empty(&workers_pool.live))
    workers_leave(list_entry(workers_pool.live.next, worker_t, node));
  for (n = workers_pool.leaving.next; n != &workers_pool.leaving; n = next) {
    worker_t *w = list_entry(n, worker_t, node);
    next = n->next;
    if (force)
      uv_process_kill(&w->proc, SIGKILL);
    else if (!workers_pool.stop_sent)
      uv_process_kill(&w->proc, SIGTERM);
  }
  workers_pool.stop_sent = 1;
  workers_probe_cancel(); /* a reload's check: no reload */
  return workers_pool.n;
}

void workers_free(daemon_t *d)
{
  (void)d;
}
