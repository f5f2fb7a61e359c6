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
#include "privsep/mps.h"
#include "privsep/wire.h"
#include "privsep/workers.h"
#include "privsep/workers_pool.h"
#include "tenants.h"

/* --------------------------------------------------------------- refusals */

/* A peer the policy refused: told why at once (unless its uid is past its
 * rate, policy.h), then closed; it holds nothing of the listener's. */
static void refuse(daemon_t *d, uv_pipe_t *c, uint64_t id, uid_t uid,
                   const hipd_err_t *e)
{
  char why[HIPD_ERR_MSG_MAX + 96];
  uv_os_fd_t fd;

  if (uv_fileno((uv_handle_t *)c, &fd) == 0)
    policy_refuse(d, fd, uid, e, why, sizeof(why));
  else
    snprintf(why, sizeof(why), "not allowed: %s", e->msg);
  /* As a session's close is logged (PROTOCOL.md, "Why a session is
   * closed"), and limited per uid as those are. */
  log_tenant(HLOG_INFO, id, uid, "session closed: %s (0 requests)", why);
  uv_close((uv_handle_t *)c, (uv_close_cb)free);
}

/* ----------------------------------------------------------------- routing */

/* The connections of @p uid that workers hold (those not yet past hello
 * included): its sessions, whatever the isolation mode; or, with
 * @p connecting, those of them that have gone TENANT_CONNECTING_GRACE_MS
 * (tenants.h) without a hello by @p now_ms. Each worker counts only its
 * own, so with --isolation session (a worker per session) only the
 * listener sees them all. */
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
        n += now_ms - x->connecting.v[k].at_ms >= TENANT_CONNECTING_GRACE_MS;
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
  char who[96], why[160];
  uv_os_fd_t fd;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  int rc, spawned = 0;

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
  if (policy_check_peer(d, cred.uid, cred.gid, who, sizeof(who), &devmask, NULL,
                        &err) != 0) {
    refuse(d, c, id, cred.uid, &err);
    return;
  }
  /* After the policy: a refused peer learns why (its own bound is the
   * rate of answered refusals), and is no session. */
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
   * for up to --hello-timeout: a few silent ones per uid (the policy is
   * tenants.c's; with --isolation none the transport applies it). */
  if (d->cfg.tenant_max_connecting != 0 &&
      tenant_connecting_check(&d->cfg, cred.uid,
                              uid_count(cred.uid, 1, uv_now(d->loop)), why,
                              sizeof(why)) != 0) {
    log_tenant(HLOG_INFO, id, cred.uid, "session closed: %s", why);
    uv_close((uv_handle_t *)c, (uv_close_cb)free);
    return;
  }
  if (d->cfg.isolation == ISOLATION_UID) {
    /* The uid's worker with the fewest sessions; with --tenant-workers,
     * a new one instead while that one has --worker-sessions and the uid
     * has fewer workers than that: its sessions spread over their loops,
     * a few to a loop (the launches a loop makes itself: --loop-launch). */
    uint32_t nw = 0;
    for (list_node_t *n = workers_pool.live.next; n != &workers_pool.live;
         n = n->next) {
      worker_t *x = list_entry(n, worker_t, node);
      if (x->uid != cred.uid)
        continue;
      nw++;
      if (w == NULL || x->sessions < w->sessions)
        w = x;
    }
    if (w != NULL && w->sessions >= d->cfg.worker_sessions &&
        nw < d->cfg.tenant_workers &&
        mps_tenant_may_spread(&d->cfg, cred.uid, cred.gid))
      w = NULL;
  }
  if (w == NULL) {
    w = workers_spawn(d, d->cfg.isolation, cred.uid, cred.gid, id);
    spawned = w != NULL;
    /* Its uid's grants before its first connection (the channel keeps
     * the order): the worker checks the peer with them. */
    if (w != NULL) {
      workers_send_grants(w, NULL, -1);
      workers_send_compilers(w);
    }
  }
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
  /* A tenant's new worker loads what its uid compiled and the cache
   * holds, behind its first connection (a worker of one session does
   * not: it would load them for every session). */
  if (spawned && w->mode == ISOLATION_UID)
    workers_preload(w);
}
