/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers_pool.h: what the files of the listener's side
 * share (private to workers*.c): a worker's record, the pool of them, and
 * the functions each file offers the others.
 *
 *   workers.c          the workers' lifecycle (start, adopt, reap, idle
 *                      exit, stop) and the routing of their messages
 *                      (wire.h's rows a worker sends);
 *   workers_route.c    taking connections: to a tenant's worker, or a
 *                      refusal answered by the listener itself;
 *   workers_probe.c    running a worker once to check the options;
 *   workers_compile.c  the compile and cache service (compile,
 *                      cache.stats, compile.stats, cache.clear);
 *   workers_admin.c    admin: gathering reports, session kills, log
 *                      levels, and the workers' clients' admin requests.
 *
 * Loop thread only.
 */
#ifndef HIPD_PRIVSEP_WORKERS_POOL_H
#define HIPD_PRIVSEP_WORKERS_POOL_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "admin/admin.h"
#include "daemon.h"
#include "kernels/cache.h"
#include "privsep/ipc.h"
#include "rpc.h"

struct ask;
struct gather;

/* A set of connection ids (few: a worker's sessions), each with when it
 * was handed over (uv_now). */
typedef struct {
  struct {
    uint64_t id, at_ms;
  } * v;
  uint32_t n, cap;
} workers_ids_t;

typedef struct worker {
  list_node_t node; /* workers_pool.live while it takes connections, else
                       workers_pool.leaving */
  daemon_t *d;
  int mode;               /* ISOLATION_UID or ISOLATION_SESSION */
  uid_t uid;              /* the tenant's uid (the peer's) */
  gid_t gid;              /* the first peer's primary gid */
  uint64_t seq;           /* session mode: the one connection's id */
  int spin_slot;          /* its slot of the spin budget (spin.h), or -1 */
  int preload;            /* it takes preloads (workers_preload) */
  uint32_t preloads;      /* cache entries sent it to preload */
  uint64_t preload_bytes; /* and their bytes */
  /* The keys of the last entries it was answered or sent to preload
   * (a ring): the only ones its cache.touch may name. */
  cache_key_t *answered;
  uint32_t answered_next;
  pid_t pid;
  uv_process_t proc; /* proc.data = this */
  ipc_chan_t ch;     /* ch.data = this */
  uint32_t sessions; /* connections handed over, not yet reported closed */
  uint64_t idle_since;
  int leaving;        /* told to exit, or gone: takes no connection */
  uint64_t exit_sent; /* when it was told to exit (uv_now), 0: not yet */
  int exited;         /* its exit was seen (uv_now then: exited_ms) */
  uint64_t exited_ms;
  int handles;      /* libuv handles of this worker still open */
  int refs;         /* compile jobs in flight + 1 while it is listed */
  report_t *last;   /* its last report (admin.h), folded when it exits */
  uint64_t last_ms; /* uv_now when last came */
  uint64_t
      serial; /* workers_pool.serial at its start: reports name it by this */
  struct ask *rep;     /* its one report request unanswered, or NULL */
  uint64_t rep_sent;   /* uv_now when rep was sent */
  int rep_waited;      /* the gather in flight waits for rep */
  int rep_warned;      /* rep's 30 s without an answer were logged */
  int rep_again;       /* rep is housekeeping's: a view asks after it */
  int lied;            /* a report with records not its own was logged */
  uint32_t admin_busy; /* its clients' admin requests in flight */
  /* The connections handed over, not reported closed (the listener's
   * routing: who holds which session), and of them those not yet reported
   * past hello (--tenant-max-connecting). */
  workers_ids_t ids, connecting;
  char cgroup_env[1024]; /* HIPD_CGROUP=... in its environment, or "" */
  uint64_t oom_kills;    /* its tenant's cgroup's OOM kills at its start */
  int tslot;             /* session mode: its slot of its uid's tenant page
                            (tenant_pages.h), or -1 */
  int tpage_fd;          /* that page's memfd (the page's, not its own) */
  char tslot_env[48];    /* TENANT_SLOT_ENV=N in its environment */
  char mps_env[2][192];  /* its MPS limits (mps_limits_env) */
  int mps;               /* an MPS client (--mps-tenants) */
  int mps_counted;       /* and counted by mps_tenant_take() (auto) */
} worker_t;

typedef struct workers_pool {
  char **argv; /* the listener's options, for every worker */
  size_t argc;
  char exe[PATH_MAX];  /* this program */
  list_node_t live;    /* worker_t.node: those taking connections */
  list_node_t leaving; /* told to exit, not yet reaped */
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
} workers_pool_t;

extern workers_pool_t workers_pool;

/* A worker whose report request is this old is logged, once. */
#define REPORT_LOST_MS 30000

/* workers.c */
void workers_unref(worker_t *w);
/* The sessions a worker holds, by the listener's routing. */
void workers_ids_add(workers_ids_t *l, uint64_t id, uint64_t at_ms);
int workers_ids_has(const workers_ids_t *l, uint64_t id);
void workers_ids_remove(workers_ids_t *l, uint64_t id);
/* "uid 1001", "session 7 (uid 1001)" into @p buf. @return buf. */
const char *workers_tenant_name(const worker_t *w, char *buf, size_t len);
/* Take @p w out of the routing table: no connection goes to it again. */
void workers_leave(worker_t *w);
/* Answer request @p msgid of @p w with an error. */
void workers_reply_error(worker_t *w, uint32_t msgid, int code,
                         const char *msg);
/* The command line and environment of a worker with --worker=@p role. */
int workers_exec_args(char *role, int mps_client, char ***args_out,
                      char ***env_out);
/* Start a worker for a tenant. @return it, or NULL (logged). */
worker_t *workers_spawn(daemon_t *d, int mode, uid_t uid, gid_t gid,
                        uint64_t seq);

/* workers_probe.c */
void workers_probe_cancel(void);

/* workers_compile.c: handlers of wire.h's rows (ctx: the worker_t). */
void workers_on_compile(void *ctx, const proto_msg_t *m, const void *args);
void workers_on_cache_stats(void *ctx, const proto_msg_t *m, const void *args);
void workers_on_compile_stats(void *ctx, const proto_msg_t *m,
                              const void *args);
void workers_on_cache_clear(void *ctx, const proto_msg_t *m, const void *args);
void workers_on_cache_touch(void *ctx, const proto_msg_t *m, const void *args);
/* Send @p w, a new worker (after its first connection), the entries in
 * memory its uid's compiles made, to load ahead of its requests, and
 * those a warm start loads later (cache_set_warmed_hook: workers_init
 * sets workers_on_warmed), 32 entries and 32 MiB at most. */
void workers_preload(worker_t *w);
/* Send @p w, a new worker, the compile helpers' compiler ids, so that it
 * keys requests as the cache does (compile_pool_set_compiler_id). */
void workers_send_compilers(worker_t *w);
void workers_on_warmed(const cache_key_t *key, const cache_blob_t *blob,
                       uint32_t tenant);
/* Send every worker @p data (a packed notification). @return how many
 * took it. */
uint32_t workers_broadcast(const void *data, size_t size);

/* workers_admin.c */
void workers_on_admin(void *ctx, const proto_msg_t *m, const void *args);
/* A response of @p w: to one of the listener's asks, else it breaks. */
void workers_on_response(worker_t *w, const proto_msg_t *m);
/* A worker still there to ask. */
int workers_askable(const worker_t *w);
/* Ask @p w for its report, unless a request is unanswered. */
struct ask *workers_ask_report(worker_t *w);
/* Gather every worker's report for @p done (NULL: housekeeping's, for
 * the fold only). */
void workers_gather(daemon_t *d, admin_gathered_fn done, void *ctx);
/* @p w is gone: fold its last report, give up on its answers. */
void workers_forget(worker_t *w);
/* Send @p w its uid's grants (grants.h), all of them; @p why (may be NULL)
 * goes after the close reason of its sessions under grants gone; @p by:
 * the revoker's uid, or -1 (grants_close_revoked()). */
void workers_send_grants(worker_t *w, const char *why, int64_t by);

#endif
