/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers_admin.c: the listener's admin side: it gathers its
 * workers' reports for admin/, kills sessions and sets log levels in them, and
 * runs their clients' admin requests (workers.h, admin.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "hipd.h"
#include "log.h"
#include "privsep/ipc.h"
#include "privsep/wire.h"
#include "privsep/workers.h"
#include "privsep/workers_pool.h"
#include "util/array.h"

/* A report this young is used again rather than asked for. */
#define REPORT_FRESH_MS 1000
/* A worker whose report request is this old is left out of a view... */
#define REPORT_STALE_MS 3000
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
  list_node_t node; /* in workers_pool.asks */
  worker_t *w;
  uint32_t msgid;
  int kind;
  int view; /* ASK_REPORT: asked by a view (else by housekeeping) */
  void (*killed)(void *ctx, int status); /* ASK_KILL */
  void *ctx;
} ask_t;

static void gather_closed_cb(uv_handle_t *h)
{
  gather_t *g = h->data;

  free(g->wait);
  free(g);
}

/* A worker still there to ask. */
int workers_askable(const worker_t *w)
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
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving,
                          &workers_pool.adopted};
  report_set_t set = {0};
  report_t **r;
  uint32_t cap = 1, k = 0, extra = 0, missing = 0;

  if (workers_pool.g == g)
    workers_pool.g = NULL; /* a waiter that asks again starts another */
  if (g->waiting > 0)
    log_warn(0, "admin: %u workers did not report within 2 s: left out",
             g->waiting);
  for (int i = 0; i < 3; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next)
      cap++;
  for (list_node_t *n = workers_pool.dead.next; n != &workers_pool.dead;
       n = n->next)
    cap++;
  r = calloc(cap, sizeof(*r));
  for (int i = 0; i < 3; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      w->rep_waited = 0;
      w->rep_again = 0;
      if (!workers_askable(w))
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
  for (list_node_t *n = workers_pool.dead.next;
       r != NULL && n != &workers_pool.dead; n = n->next) {
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
    c->uid = w->last->uid;
    if (w->last->ngrants > 0 &&
        (c->grants = calloc(w->last->ngrants, sizeof(*c->grants))) != NULL) {
      c->ngrants = w->last->ngrants;
      memcpy(c->grants, w->last->grants, c->ngrants * sizeof(*c->grants));
      for (uint32_t i = 0; i < c->ngrants; i++)
        c->grants[i].held = c->grants[i].sessions = 0;
    }
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
    if (workers_pool.g != NULL && workers_pool.g->waiting > 0 &&
        --workers_pool.g->waiting == 0)
      uv_timer_start(&workers_pool.g->timer, gather_finish_cb, 0, 0);
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
void workers_forget(worker_t *w)
{
  list_node_t mine;

  /* Its asks move to a list of their own first: a kill's callback answers
   * a client, which may break (and forget) another worker, whose asks
   * then leave workers_pool.asks while this walks it. */
  list_init(&mine);
  for (list_node_t *n = workers_pool.asks.next, *next; n != &workers_pool.asks;
       n = next) {
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
    admin_fold(w->d, w->last);
    report_free(w->last);
    w->last = NULL;
  }
  w->ids.n = 0;
  w->connecting.n = 0;
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
  list_insert_tail(&workers_pool.asks, &a->node);
  return a;
}

/* Ask @p w for its report, unless a request is unanswered: one at most. */
ask_t *workers_ask_report(worker_t *w)
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
    a->view = workers_pool.g != NULL;
    w->rep = a;
    w->rep_sent = uv_now(w->d->loop);
    w->rep_warned = 0;
  }
  return a;
}

void workers_gather(daemon_t *d, admin_gathered_fn done, void *ctx)
{
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving,
                          &workers_pool.adopted};
  uint64_t now = uv_now(d->loop);
  report_set_t none = {0};
  gather_t *g = workers_pool.g;

  if (done == NULL) {
    /* The periodic one: a fresh report of each, no view. */
    for (int i = 0; i < 3; i++)
      for (list_node_t *n = lists[i]->next, *next; n != lists[i]; n = next) {
        worker_t *w = list_entry(n, worker_t, node);
        next = n->next;
        if (workers_askable(w))
          workers_ask_report(w);
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
    workers_pool.g = g;
    for (int i = 0; i < 3; i++)
      for (list_node_t *n = lists[i]->next, *next; n != lists[i]; n = next) {
        worker_t *w = list_entry(n, worker_t, node);
        next = n->next;
        if (!workers_askable(w) ||
            (w->last != NULL && now - w->last_ms < REPORT_FRESH_MS))
          continue; /* gone, or its last report will do */
        if (w->rep != NULL && now - w->rep_sent >= REPORT_STALE_MS)
          continue; /* it does not answer: left out */
        if (workers_ask_report(w) == NULL)
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
  if (ARRAY_GROW(g->wait, g->nwait, g->capwait, 4) != 0) {
    done(ctx, &none);
    return;
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
    if (workers_ids_has(&w->ids, s->id) &&
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
  workers_tenant_name(w, t, sizeof(t));
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
    if (w->rep_waited && workers_ask_report(w) != NULL)
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
void workers_on_response(worker_t *w, const proto_msg_t *m)
{
  for (list_node_t *n = workers_pool.asks.next; n != &workers_pool.asks;
       n = n->next) {
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
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving,
                          &workers_pool.adopted};
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
      if (x->serial == owner && workers_ids_has(&x->ids, id)) {
        w = x;
        break;
      }
    }
  if (w == NULL || !workers_askable(w)) {
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
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving,
                          &workers_pool.adopted};

  (void)d;
  /* Workers started from now on take it from their command line. */
  snprintf(workers_pool.level_arg, sizeof(workers_pool.level_arg),
           "--log-level=%s", names[level]);
  for (int i = 0; i < 3; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      if (workers_askable(w))
        send_log_level(w, level);
    }
}

void workers_send_grants(worker_t *w, const char *why, int64_t by)
{
  daemon_t *d = w->d;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t n = 0;

  if (!workers_askable(w))
    return;
  for (uint32_t i = 0; i < d->grants.n; i++)
    n += d->grants.g[i].uid == w->uid;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_GRANTS, 0);
  proto_pack_cstr(&pk, why != NULL ? why : "");
  msgpack_pack_int64(&pk, by);
  msgpack_pack_array(&pk, n);
  for (uint32_t i = 0; i < d->grants.n; i++) {
    const grant_t *g = &d->grants.g[i];
    if (g->uid != w->uid)
      continue;
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint64(&pk, g->serial);
    proto_pack_cstr(&pk, g->label);
    msgpack_pack_uint64(&pk, g->devmask);
    msgpack_pack_uint64(&pk, g->quota);
  }
  ipc_send(&w->ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  w->last_ms = 0; /* its sessions may change: its next view asks again */
}

/* The grants of @p uid changed: every worker of the uid gets them. */
static void push_grants(daemon_t *d, uid_t uid, const char *why, int64_t by)
{
  list_node_t *lists[] = {&workers_pool.live, &workers_pool.leaving};

  (void)d;
  for (int i = 0; i < 2; i++)
    for (list_node_t *n = lists[i]->next; n != lists[i]; n = n->next) {
      worker_t *w = list_entry(n, worker_t, node);
      if (w->uid == uid)
        workers_send_grants(w, why, by);
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
  workers_unref(w);
}

/* admin [op, params]: a client's admin request, for the worker's uid (the
 * listener's record, never what the worker says). */
void workers_on_admin(void *ctx, const proto_msg_t *m, const void *args)
{
  worker_t *w = ctx;
  const wire_admin_t *a = args;
  admin_args_t req;
  const char *msg;
  admin_ask_t *q;
  int rc;

  if (a == NULL || !admin_is_op(a->op.p, a->op.len)) {
    workers_reply_error(w, m->msgid, HIPD_EPARAMS, "admin: malformed request");
    return;
  }
  if (w->admin_busy >= ADMIN_MAX_INFLIGHT) {
    /* Each view costs the listener and every worker a report: one
     * tenant's clients do not get to keep them all busy. */
    workers_reply_error(
        w, m->msgid, HIPD_EBUSY,
        "admin: this tenant already has 4 admin requests in flight "
        "(the limit): wait for their answers");
    return;
  }
  if ((q = calloc(1, sizeof(*q))) == NULL) {
    workers_reply_error(w, m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  q->w = w;
  q->msgid = m->msgid;
  w->refs++;
  w->admin_busy++;
  /* The values, checked again as admin/ reads them (after the limit, as
   * ever: a request refused for its values was in flight). */
  if ((rc = admin_args_unpack(a->op.p, a->op.len, a->params.o, &req, &msg)) !=
      0) {
    admin_answered(q, rc, msg, NULL, 0);
    return;
  }
  admin_request(w->d, w->uid, 0, &req, admin_answered, q);
}

void workers_admin_init(daemon_t *d)
{
  static const admin_listener_t l = {
      .gather = workers_gather,
      .kill = kill_session,
      .log_level = set_log_level,
      .grants = push_grants,
  };

  (void)d;
  admin_set_listener(&l);
}
