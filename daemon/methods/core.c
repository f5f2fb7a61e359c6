/* SPDX-License-Identifier: MIT */
/* daemon/methods/core.c: hello, ping, daemon.info, session.info. */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "compile/compile_pool.h"
#include "device.h"
#include "kernels/kernels.h"
#include "log.h"
#include "methods.h"
#include "ring.h"
#include "sandbox/cgroup.h"
#include "spin.h"
#include "tenants.h"

#define MIN_PROTOCOL 1

/* hello [protocol?, client_name?] -> identity. The session speaks the lower
 * of the two versions; a client below MIN_PROTOCOL is refused. */
int m_hello(call_t *c, const hello_args_t *a)
{
  session_t *s = c->s;
  int64_t proto = a->protocol.present ? a->protocol.i : HIPD_PROTOCOL_VERSION;
  const arg_t *name = &a->client_name; /* at most 63 bytes (the row says) */
  pack_map_t m;

  int first = s->protocol == 0;

  if (proto < MIN_PROTOCOL)
    return call_fail(c, HIPD_EVERSION,
                     "client speaks protocol %lld; this daemon speaks %d to "
                     "%d",
                     (long long)proto, MIN_PROTOCOL, HIPD_PROTOCOL_VERSION);
  s->protocol =
      proto < HIPD_PROTOCOL_VERSION ? (int)proto : HIPD_PROTOCOL_VERSION;
  if (name->present && name->len > 0 && name->len < sizeof(s->client)) {
    memcpy(s->client, name->s, name->len + 1);
    /* The name reaches the log and admins' terminals (session.list,
     * hipctl sessions): no control characters, so a client can neither
     * forge log lines nor send escape sequences. */
    for (char *p = s->client; *p != '\0'; p++)
      if ((unsigned char)*p < 0x20 || *p == 0x7f)
        *p = '?';
  }
  sess_log(HLOG_INFO, s, "hello from '%s' (pid %d), protocol %d", s->client,
           (int)s->peer_pid, s->protocol);
  tenant_connecting_done(s); /* --tenant-max-connecting */
  if (first && s->d->session_hello != NULL)
    s->d->session_hello(s->d, s->id);

  pack_map_begin(&m, call_result(c));
  pack_kv_str(&m, "name", PACKAGE_NAME);
  pack_kv_str(&m, "version", PACKAGE_VERSION);
  pack_kv_i64(&m, "protocol", s->protocol);
  meth_pack_strv(pack_key(&m, "features"), daemon_features());
  pack_kv_u64(&m, "session", s->id);
  pack_kv_i64(&m, "pid", (int)c->s->d->daemon_pid);
  pack_map_end(&m);
  return 0;
}

/* ping [payload?] -> payload, as bin. */
int m_ping(call_t *c, const ping_args_t *a)
{
  const arg_t *p = &a->payload; /* absent: no bytes */
  msgpack_packer *pk = call_result(c);

  msgpack_pack_bin(pk, p->len);
  msgpack_pack_bin_body(pk, p->s, p->len);
  return 0;
}

/* daemon.info's "isolation": what this session's process is and what
 * keeps tenants apart. */
static void pack_isolation(msgpack_packer *pk, const daemon_t *d)
{
  static const char *const modes[] = {"uid", "session", "none"};
  pack_map_t m;

  pack_map_begin(&m, pk);
  pack_kv_str(&m, "mode", modes[d->cfg.isolation]);
  pack_kv_str(&m, "process", d->role == ROLE_WORKER ? "worker" : "single");
  pack_kv_i64(&m, "pid", (int)getpid());
  pack_kv_u64(&m, "uid", (uint32_t)geteuid());
  if (d->role == ROLE_WORKER)
    pack_kv_u64(&m, "tenant", (uint32_t)d->tenant_uid);
  else
    pack_kv_nil(&m, "tenant");
  pack_kv_str(&m, "mps", d->gpu_sharing != NULL ? d->gpu_sharing : "");
  if (d->mps_threads != 0) {
    pack_map_t l;
    pack_map_begin(&l, pack_key(&m, "mps_limits"));
    pack_kv_u64(&l, "active_threads", d->mps_threads);
    pack_kv_u64(&l, "device_mem", d->mps_mem);
    pack_map_end(&l);
  } else {
    pack_kv_nil(&m, "mps_limits");
  }
  pack_kv_str(&m, "cache_scope",
              d->cfg.cache_scope == CACHE_SCOPE_TENANT ? "tenant" : "shared");
  pack_kv_str(&m, "cgroups", cgroup_state());
  pack_map_end(&m);
}

/* The spin budget of all hipd's processes (spin.h), as this one sees it. */
static void pack_spin(msgpack_packer *pk, const daemon_t *d)
{
  spin_stats_t st;
  pack_map_t m;

  spin_get_stats(&st);
  pack_map_begin(&m, pk);
  pack_kv_u64(&m, "busy_poll_us", (uint32_t)d->cfg.busy_poll_us);
  pack_kv_u64(&m, "cpus", st.cap);
  pack_kv_u64(&m, "allowed", st.limit);
  pack_kv_u64(&m, "polling", st.taken);
  pack_kv_u64(&m, "polling_here", st.mine);
  pack_kv_bool(&m, "shared", st.shared);
  pack_map_end(&m);
}

/* The compile pool and the protections of its helpers. */
static void pack_compile(msgpack_packer *pk, const compile_pool_stats_t *st)
{
  pack_map_t m;

  pack_map_begin(&m, pk);
  pack_kv_u64(&m, "jobs", st->jobs);
  pack_kv_u64(&m, "timeout_s", st->timeout_s);
  pack_kv_u64(&m, "idle_timeout_s", st->idle_timeout_s);
  pack_kv_u64(&m, "busy", st->busy);
  pack_kv_u64(&m, "queued", st->queued);
  pack_kv_u64(&m, "helpers", st->helpers);
  pack_kv_u64(&m, "started", st->started);
  pack_kv_u64(&m, "restarts", st->restarts);
  pack_kv_u64(&m, "compiles", st->compiles);
  pack_kv_u64(&m, "timeouts", st->timeouts);
  pack_kv_u64(&m, "crashes", st->crashes);
  pack_kv_u64(&m, "tenant_max", st->tenant_max);
  pack_kv_u64(&m, "queue_bytes", st->queue_bytes);
  pack_kv_u64(&m, "held_bytes", st->held_bytes);
  pack_kv_u64(&m, "refused", st->refused);
  pack_kv_str(&m, "fsview", st->fsview_name ? st->fsview_name : "none");
  pack_kv_i64(&m, "uid", st->uid);
  pack_kv_str(&m, "not_applied", st->sandbox);
  pack_map_end(&m);
}

/* The daemon's limits, as configured. */
static void pack_limits(msgpack_packer *pk, const daemon_t *d)
{
  pack_map_t m;

  pack_map_begin(&m, pk);
  pack_kv_u64(&m, "max_message", d->cfg.limits.max_message);
  pack_kv_u64(&m, "max_depth", d->cfg.limits.max_depth);
  pack_kv_u64(&m, "max_inflight", d->cfg.max_inflight);
  pack_kv_u64(&m, "output_cap", d->cfg.output_cap);
  pack_kv_u64(&m, "max_input_bytes", d->cfg.max_input_bytes);
  pack_kv_u64(&m, "max_sessions", d->cfg.max_sessions);
  pack_kv_u64(&m, "max_handles", d->cfg.max_handles);
  pack_kv_u64(&m, "max_streams", d->cfg.max_streams);
  pack_kv_u64(&m, "mem_quota", d->cfg.mem_quota);
  pack_kv_u64(&m, "write_timeout_ms", d->cfg.write_timeout_ms);
  pack_kv_u64(&m, "hello_timeout_ms", d->cfg.hello_timeout_ms);
  pack_kv_u64(&m, "request_timeout_ms", d->cfg.request_timeout_ms);
  pack_kv_u64(&m, "shutdown_timeout_ms", d->cfg.shutdown_ms);
  pack_kv_u64(&m, "tenant_mem_quota", d->cfg.tenant_mem_quota);
  pack_kv_u64(&m, "tenant_max_sessions", d->cfg.tenant_max_sessions);
  pack_kv_u64(&m, "tenant_max_connecting", d->cfg.tenant_max_connecting);
  pack_kv_u64(&m, "tenant_max_handles", d->cfg.tenant_max_handles);
  pack_kv_u64(&m, "tenant_max_streams", d->cfg.tenant_max_streams);
  pack_kv_u64(&m, "host_mem_reserve", d->cfg.host_mem_reserve);
  pack_kv_u64(&m, "tenant_device_share", d->cfg.tenant_device_share);
  pack_kv_u64(&m, "tenant_host_mem", d->cfg.tenant_host_mem);
  pack_kv_u64(&m, "tenant_max_pids", d->cfg.tenant_max_pids);
  pack_map_end(&m);
}

static void daemon_info_pack(call_t *c, const compile_pool_stats_t *cst)
{
  daemon_t *d = c->s->d;
  pack_map_t m;

  pack_map_begin(&m, call_result(c));
  pack_kv_str(&m, "name", PACKAGE_NAME);
  pack_kv_str(&m, "version", PACKAGE_VERSION);
  pack_kv_i64(&m, "protocol", HIPD_PROTOCOL_VERSION);
  pack_kv_i64(&m, "pid", (int)d->daemon_pid);
  pack_isolation(pack_key(&m, "isolation"), d);
  pack_kv_u64(&m, "uptime_ms", uv_now(d->loop) - d->start_ms);
  pack_kv_u64(&m, "sessions", d->nsessions);
  pack_kv_u64(&m, "sessions_total", d->sessions_total);
  meth_pack_strv(pack_key(&m, "features"), daemon_features());
  pack_kv_str(&m, "socket", d->cfg.socket_path);
  pack_compile(pack_key(&m, "compile"), cst);
  pack_limits(pack_key(&m, "limits"), d);
  pack_spin(pack_key(&m, "spin"), d);
  pack_map_end(&m);
}

static void daemon_info_done(void *ctx, int status,
                             const compile_pool_stats_t *st)
{
  call_t *c = ctx;

  if (status != 0 || st == NULL)
    call_fail(c, status != 0 ? status : HIPD_EIO,
              "the compile pool's counters are not available");
  else
    daemon_info_pack(c, st);
  call_finish(c);
}

/* daemon.info: deferred, as the compile pool may be the listener's. */
int m_daemon_info(call_t *c)
{
  call_t *dc = call_defer(c);

  if (dc == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  kernels_compile_stats(daemon_info_done, dc);
  return 0;
}

int m_session_info(call_t *c)
{
  static const char *const keys[] = {"",        "streams", "events",
                                     "buffers", "kernels", "shared_buffers"};
  session_t *s = c->s;
  const tenant_t *t = s->tenant;
  ring_counts_t rc;
  pack_map_t m, sub;

  pack_map_begin(&m, call_result(c));
  pack_kv_u64(&m, "id", s->id);
  pack_kv_str(&m, "client", s->client);
  pack_kv_i64(&m, "protocol", s->protocol);
  pack_map_begin(&sub, pack_key(&m, "peer"));
  pack_kv_i64(&sub, "pid", s->peer_pid);
  pack_kv_i64(&sub, "uid", (int64_t)(int)s->peer_uid);
  pack_kv_i64(&sub, "gid", (int64_t)(int)s->peer_gid);
  pack_map_end(&sub);
  pack_kv_u64(&m, "requests", s->requests);
  pack_kv_u64(&m, "inflight", s->inflight);
  /* Its ring (ring.open): slots per queue, submissions run, completions. */
  ring_counts(s, &rc);
  pack_map_begin(&sub, pack_key(&m, "ring"));
  pack_kv_u64(&sub, "entries", rc.entries);
  pack_kv_u64(&sub, "requests", rc.taken);
  pack_kv_u64(&sub, "completions", rc.completed);
  pack_kv_u64(&sub, "answered_on_socket", rc.overflowed);
  pack_kv_u64(&sub, "answered_early", rc.early);
  pack_kv_u64(&sub, "kicks", rc.kicks);
  pack_map_end(&sub);
  pack_map_begin(&sub, pack_key(&m, "resources"));
  pack_kv_u64(&sub, "handles", res_count(s, HANDLE_ANY));
  for (int h = HANDLE_STREAM; h < HANDLE_TYPE_COUNT; h++)
    pack_kv_u64(&sub, keys[h], res_count(s, (handle_type_t)h));
  pack_map_end(&sub);
  /* What all the sessions of its uid hold (the tenant's limits). */
  pack_map_begin(&sub, pack_key(&m, "tenant"));
  pack_kv_i64(&sub, "uid", (int64_t)(int)s->peer_uid);
  pack_kv_u64(&sub, "sessions", t != NULL ? tenant_count(t, TC_SESSIONS) : 0);
  pack_kv_u64(&sub, "mem_used", t != NULL ? tenant_count(t, TC_MEM) : 0);
  pack_kv_u64(&sub, "streams", t != NULL ? tenant_count(t, TC_STREAMS) : 0);
  pack_kv_u64(&sub, "handles", t != NULL ? tenant_count(t, TC_HANDLES) : 0);
  pack_map_end(&sub);
  pack_map_end(&m);
  return 0;
}
