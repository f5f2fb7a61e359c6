/* SPDX-License-Identifier: MIT */
/* daemon/privsep/workers_route.c: the listener takes each connection: to its
 * tenant's worker, or refused with the access policy's rule (workers.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "policy.h"
#include "privsep/ipc.h"
#include "privsep/wire.h"
#include "privsep/workers.h"
#include "privsep/workers_pool.h"

/* A refused peer's first request may be this long (a hello is far
 * shorter); a longer one is not answered. */
#define REFUSAL_MAX_MESSAGE 4096
/* Refused peers of one uid waiting for their answer at once; one more is
 * closed at once, so that refused connections cannot fill the listener's
 * descriptors and keep admitted users out. */
#define REFUSALS_PER_UID 8

/* A peer refused by the policy: it reads the rule in the answer to its
 * first request, then the connection closes. */
typedef struct refusal {
  list_node_t node;
  uv_pipe_t pipe; /* pipe.data = this */
  uint64_t id;
  uid_t uid; /* the peer's */
  uint64_t opened_ms;
  hipd_err_t why;
  uint8_t buf[REFUSAL_MAX_MESSAGE];
  size_t len;
  int answered;
  uv_write_t wreq;
  msgpack_sbuffer out;
} refusal_t;

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
  log_tenant(HLOG_INFO, r->id, r->uid,
             "session closed: not allowed: %s (1 requests)", r->why.msg);
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

/* Refused peers of @p uid still waiting for their answer. */
static unsigned uid_refusals(uid_t uid)
{
  unsigned n = 0;

  for (const list_node_t *p = workers_pool.refusals.next;
       p != &workers_pool.refusals; p = p->next)
    if (list_entry(p, refusal_t, node)->uid == uid)
      n++;
  return n;
}

static void refuse(daemon_t *d, uv_pipe_t *c, uint64_t id, uid_t uid,
                   const hipd_err_t *e)
{
  refusal_t *r;

  if (uid_refusals(uid) >= REFUSALS_PER_UID) {
    /* Debug only: the peer could otherwise write the log at will. */
    log_debug(id,
              "refused and closed at once: uid %u has %u refused "
              "connections waiting",
              (unsigned)uid, (unsigned)REFUSALS_PER_UID);
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  r = calloc(1, sizeof(*r));
  if (r == NULL) {
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  log_tenant(HLOG_INFO, id, uid, "refused: %s", e->msg);
  /* The accepted handle cannot move: open a new one on its descriptor. */
  {
    uv_os_fd_t fd;
    int nfd = uv_fileno((uv_handle_t *)c, &fd) == 0 ? dup(fd) : -1;
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    uv_pipe_init(d->loop, &r->pipe, 0);
    r->pipe.data = r;
    list_insert_tail(&workers_pool.refusals, &r->node);
    if (nfd < 0 || uv_pipe_open(&r->pipe, nfd) != 0) {
      if (nfd >= 0)
        close(nfd);
      refusal_close(r);
      return;
    }
  }
  r->id = id;
  r->uid = uid;
  r->why = *e;
  r->opened_ms = uv_now(d->loop);
  msgpack_sbuffer_init(&r->out);
  if (uv_read_start((uv_stream_t *)&r->pipe, refusal_alloc_cb,
                    refusal_read_cb) != 0)
    refusal_close(r);
}

/* ----------------------------------------------------------------- routing */

/* A connection counts against --tenant-max-connecting once it has gone
 * this long without a hello: a burst of clients that all connect at once
 * (a job's ranks) says hello well within it; connections that stay silent
 * accumulate. */
#define CONNECTING_GRACE_MS 1000

/* The connections of @p uid that workers hold (those not yet past hello
 * included): its sessions, whatever the isolation mode; or, with
 * @p connecting, those of them that have gone CONNECTING_GRACE_MS without
 * a hello by @p now_ms. Each worker counts only its own, so with
 * --isolation session (a worker per session) only the listener sees them
 * all. */
static uint32_t uid_count(uid_t uid, int connecting, uint64_t now_ms)
{
  const list_node_t *const lists[] = {&workers_pool.live,
                                      &workers_pool.leaving};
  uint32_t n = 0;

  for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
    for (const list_node_t *p = lists[i]->next; p != lists[i]; p = p->next) {
      const worker_t *x = list_entry(p, worker_t, node);
      if (x->uid != uid)
        continue;
      if (!connecting) {
        n += x->sessions;
        continue;
      }
      for (uint32_t k = 0; k < x->connecting.n; k++)
        n += now_ms - x->connecting.v[k].at_ms >= CONNECTING_GRACE_MS;
    }
  return n;
}

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
  if (d->stopping || workers_pool.sessions >= d->cfg.max_sessions) {
    log_tenant(HLOG_INFO, id, cred.uid, "connection of uid %u closed: %s",
               (unsigned)cred.uid,
               d->stopping ? "daemon is shutting down" : "too many sessions");
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  if (policy_check_peer(d, cred.uid, cred.gid, who, sizeof(who), &devmask,
                        &err) != 0) {
    refuse(d, c, id, cred.uid, &err);
    return;
  }
  /* After the policy: a refused peer learns why (its own bound is
   * REFUSALS_PER_UID), and is no session. */
  if (d->cfg.tenant_max_sessions != 0 &&
      uid_count(cred.uid, 0, 0) >= d->cfg.tenant_max_sessions) {
    /* As a worker closes a session over the limit (transport.c). */
    log_tenant(HLOG_INFO, id, cred.uid,
               "session closed: too many sessions for uid %u (limit %u)",
               (unsigned)cred.uid, d->cfg.tenant_max_sessions);
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  /* Connections not yet past hello hold a descriptor and a buffer each
   * for up to --hello-timeout: a few silent ones per uid. */
  if (d->cfg.tenant_max_connecting != 0 &&
      uid_count(cred.uid, 1, uv_now(d->loop)) >= d->cfg.tenant_max_connecting) {
    log_tenant(HLOG_INFO, id, cred.uid,
               "session closed: uid %u has %u connections without a hello "
               "for 1 s or more (--tenant-max-connecting)",
               (unsigned)cred.uid, d->cfg.tenant_max_connecting);
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  if (d->cfg.isolation == ISOLATION_UID) {
    for (list_node_t *n = workers_pool.live.next; n != &workers_pool.live;
         n = n->next) {
      worker_t *x = list_entry(n, worker_t, node);
      if (x->uid == cred.uid) {
        w = x;
        break;
      }
    }
  }
  if (w == NULL)
    w = workers_spawn(d, d->cfg.isolation, cred.uid, cred.gid, id);
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
  workers_pool.sessions++;
  workers_ids_add(&w->ids, id, uv_now(d->loop));
  workers_ids_add(&w->connecting, id, uv_now(d->loop));
  w->last_ms = 0; /* its sessions changed: its next view asks again */
}

/* Housekeeping: give up on refused peers that said nothing for
 * --hello-timeout. */
void workers_refusals_expire(daemon_t *d, uint64_t now)
{
  list_node_t *n, *next;

  for (n = workers_pool.refusals.next; n != &workers_pool.refusals; n = next) {
    refusal_t *r = list_entry(n, refusal_t, node);
    next = n->next;
    if (!r->answered && d->cfg.hello_timeout_ms != 0 &&
        now - r->opened_ms >= d->cfg.hello_timeout_ms)
      refusal_close(r);
  }
}

/* Shutdown: close every refused peer's connection. */
void workers_refusals_close(void)
{
  list_node_t *n, *next;

  for (n = workers_pool.refusals.next; n != &workers_pool.refusals; n = next) {
    next = n->next;
    refusal_close(list_entry(n, refusal_t, node));
  }
}
