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
#include "tenants.h"

#define MIN_PROTOCOL 1

static void pack_features(msgpack_packer *pk)
{
  const char *const *f = daemon_features();
  uint32_t n = 0;

  while (f[n] != NULL)
    n++;
  msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < n; i++)
    proto_pack_cstr(pk, f[i]);
}

/* hello [protocol?, client_name?] -> identity. The session speaks the lower
 * of the two versions; a client below MIN_PROTOCOL is refused. */
int m_hello(call_t *c, const hello_args_t *a)
{
  session_t *s = c->s;
  int64_t proto = a->protocol.present ? a->protocol.i : HIPD_PROTOCOL_VERSION;
  const arg_t *name = &a->client_name; /* at most 63 bytes (the row says) */
  msgpack_packer *pk;

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
  log_info(s->id, "hello from '%s' (pid %d), protocol %d", s->client,
           (int)s->peer_pid, s->protocol);

  pk = call_result(c);
  msgpack_pack_map(pk, 6);
  proto_pack_cstr(pk, "name");
  proto_pack_cstr(pk, PACKAGE_NAME);
  proto_pack_cstr(pk, "version");
  proto_pack_cstr(pk, PACKAGE_VERSION);
  proto_pack_cstr(pk, "protocol");
  msgpack_pack_int(pk, s->protocol);
  proto_pack_cstr(pk, "features");
  pack_features(pk);
  proto_pack_cstr(pk, "session");
  msgpack_pack_uint64(pk, s->id);
  proto_pack_cstr(pk, "pid");
  msgpack_pack_int(pk, (int)c->s->d->daemon_pid);
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

  msgpack_pack_map(pk, 6);
  proto_pack_cstr(pk, "mode");
  proto_pack_cstr(pk, modes[d->cfg.isolation]);
  proto_pack_cstr(pk, "process");
  proto_pack_cstr(pk, d->role == ROLE_WORKER ? "worker" : "single");
  proto_pack_cstr(pk, "pid");
  msgpack_pack_int(pk, (int)getpid());
  proto_pack_cstr(pk, "uid");
  msgpack_pack_uint32(pk, (uint32_t)geteuid());
  proto_pack_cstr(pk, "tenant");
  if (d->role == ROLE_WORKER)
    msgpack_pack_uint32(pk, (uint32_t)d->tenant_uid);
  else
    msgpack_pack_nil(pk);
  proto_pack_cstr(pk, "mps");
  proto_pack_cstr(pk, d->gpu_sharing != NULL ? d->gpu_sharing : "");
}

/* The compile pool and the protections of its helpers. */
static void pack_compile(msgpack_packer *pk, const compile_pool_stats_t *stp)
{
  compile_pool_stats_t st = *stp;

  msgpack_pack_map(pk, 13);
  proto_pack_cstr(pk, "jobs");
  msgpack_pack_uint32(pk, st.jobs);
  proto_pack_cstr(pk, "timeout_s");
  msgpack_pack_uint32(pk, st.timeout_s);
  proto_pack_cstr(pk, "busy");
  msgpack_pack_uint32(pk, st.busy);
  proto_pack_cstr(pk, "queued");
  msgpack_pack_uint32(pk, st.queued);
  proto_pack_cstr(pk, "helpers");
  msgpack_pack_uint32(pk, st.helpers);
  proto_pack_cstr(pk, "started");
  msgpack_pack_uint64(pk, st.started);
  proto_pack_cstr(pk, "restarts");
  msgpack_pack_uint64(pk, st.restarts);
  proto_pack_cstr(pk, "compiles");
  msgpack_pack_uint64(pk, st.compiles);
  proto_pack_cstr(pk, "timeouts");
  msgpack_pack_uint64(pk, st.timeouts);
  proto_pack_cstr(pk, "crashes");
  msgpack_pack_uint64(pk, st.crashes);
  proto_pack_cstr(pk, "fsview");
  proto_pack_cstr(pk, st.fsview_name ? st.fsview_name : "none");
  proto_pack_cstr(pk, "uid");
  msgpack_pack_int64(pk, st.uid);
  proto_pack_cstr(pk, "not_applied");
  proto_pack_cstr(pk, st.sandbox);
}

static void daemon_info_pack(call_t *c, const compile_pool_stats_t *cst)
{
  daemon_t *d = c->s->d;
  msgpack_packer *pk = call_result(c);

  msgpack_pack_map(pk, 12);
  proto_pack_cstr(pk, "name");
  proto_pack_cstr(pk, PACKAGE_NAME);
  proto_pack_cstr(pk, "version");
  proto_pack_cstr(pk, PACKAGE_VERSION);
  proto_pack_cstr(pk, "protocol");
  msgpack_pack_int(pk, HIPD_PROTOCOL_VERSION);
  proto_pack_cstr(pk, "pid");
  msgpack_pack_int(pk, (int)d->daemon_pid);
  proto_pack_cstr(pk, "isolation");
  pack_isolation(pk, d);
  proto_pack_cstr(pk, "uptime_ms");
  msgpack_pack_uint64(pk, uv_now(d->loop) - d->start_ms);
  proto_pack_cstr(pk, "sessions");
  msgpack_pack_uint32(pk, d->nsessions);
  proto_pack_cstr(pk, "sessions_total");
  msgpack_pack_uint64(pk, d->sessions_total);
  proto_pack_cstr(pk, "features");
  pack_features(pk);
  proto_pack_cstr(pk, "socket");
  proto_pack_cstr(pk, d->cfg.socket_path);
  proto_pack_cstr(pk, "compile");
  pack_compile(pk, cst);
  proto_pack_cstr(pk, "limits");
  msgpack_pack_map(pk, 17);
  proto_pack_cstr(pk, "max_message");
  msgpack_pack_uint64(pk, d->cfg.limits.max_message);
  proto_pack_cstr(pk, "max_depth");
  msgpack_pack_uint32(pk, d->cfg.limits.max_depth);
  proto_pack_cstr(pk, "max_inflight");
  msgpack_pack_uint32(pk, d->cfg.max_inflight);
  proto_pack_cstr(pk, "output_cap");
  msgpack_pack_uint64(pk, d->cfg.output_cap);
  proto_pack_cstr(pk, "max_input_bytes");
  msgpack_pack_uint64(pk, d->cfg.max_input_bytes);
  proto_pack_cstr(pk, "max_sessions");
  msgpack_pack_uint32(pk, d->cfg.max_sessions);
  proto_pack_cstr(pk, "max_handles");
  msgpack_pack_uint32(pk, d->cfg.max_handles);
  proto_pack_cstr(pk, "max_streams");
  msgpack_pack_uint32(pk, d->cfg.max_streams);
  proto_pack_cstr(pk, "mem_quota");
  msgpack_pack_uint64(pk, d->cfg.mem_quota);
  proto_pack_cstr(pk, "write_timeout_ms");
  msgpack_pack_uint32(pk, d->cfg.write_timeout_ms);
  proto_pack_cstr(pk, "hello_timeout_ms");
  msgpack_pack_uint32(pk, d->cfg.hello_timeout_ms);
  proto_pack_cstr(pk, "request_timeout_ms");
  msgpack_pack_uint32(pk, d->cfg.request_timeout_ms);
  proto_pack_cstr(pk, "shutdown_timeout_ms");
  msgpack_pack_uint32(pk, d->cfg.shutdown_ms);
  proto_pack_cstr(pk, "tenant_mem_quota");
  msgpack_pack_uint64(pk, d->cfg.tenant_mem_quota);
  proto_pack_cstr(pk, "tenant_max_sessions");
  msgpack_pack_uint32(pk, d->cfg.tenant_max_sessions);
  proto_pack_cstr(pk, "tenant_max_handles");
  msgpack_pack_uint32(pk, d->cfg.tenant_max_handles);
  proto_pack_cstr(pk, "tenant_max_streams");
  msgpack_pack_uint32(pk, d->cfg.tenant_max_streams);
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
  session_t *s = c->s;
  msgpack_packer *pk = call_result(c);

  msgpack_pack_map(pk, 8);
  proto_pack_cstr(pk, "id");
  msgpack_pack_uint64(pk, s->id);
  proto_pack_cstr(pk, "client");
  proto_pack_cstr(pk, s->client);
  proto_pack_cstr(pk, "protocol");
  msgpack_pack_int(pk, s->protocol);
  proto_pack_cstr(pk, "peer");
  msgpack_pack_map(pk, 3);
  proto_pack_cstr(pk, "pid");
  msgpack_pack_int64(pk, s->peer_pid);
  proto_pack_cstr(pk, "uid");
  msgpack_pack_int64(pk, (int64_t)(int)s->peer_uid);
  proto_pack_cstr(pk, "gid");
  msgpack_pack_int64(pk, (int64_t)(int)s->peer_gid);
  proto_pack_cstr(pk, "requests");
  msgpack_pack_uint64(pk, s->requests);
  proto_pack_cstr(pk, "inflight");
  msgpack_pack_uint32(pk, s->inflight);
  proto_pack_cstr(pk, "resources");
  msgpack_pack_map(pk, HANDLE_TYPE_COUNT);
  proto_pack_cstr(pk, "handles");
  msgpack_pack_uint32(pk, res_count(s, HANDLE_ANY));
  for (int t = HANDLE_STREAM; t < HANDLE_TYPE_COUNT; t++) {
    static const char *const keys[] = {"",        "streams", "events",
                                       "buffers", "kernels", "shared_buffers"};
    proto_pack_cstr(pk, keys[t]);
    msgpack_pack_uint32(pk, res_count(s, (handle_type_t)t));
  }
  /* What all the sessions of its uid hold (the tenant's limits). */
  proto_pack_cstr(pk, "tenant");
  msgpack_pack_map(pk, 5);
  proto_pack_cstr(pk, "uid");
  msgpack_pack_int64(pk, (int64_t)(int)s->peer_uid);
  proto_pack_cstr(pk, "sessions");
  msgpack_pack_uint32(pk, s->tenant != NULL ? s->tenant->sessions : 0);
  proto_pack_cstr(pk, "mem_used");
  msgpack_pack_uint64(pk, s->tenant != NULL ? s->tenant->mem_used : 0);
  proto_pack_cstr(pk, "streams");
  msgpack_pack_uint32(pk, s->tenant != NULL ? s->tenant->streams : 0);
  proto_pack_cstr(pk, "handles");
  msgpack_pack_uint32(pk, s->tenant != NULL ? s->tenant->handles : 0);
  return 0;
}
