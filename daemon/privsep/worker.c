/* SPDX-License-Identifier: MIT */
/* daemon/privsep/worker.c: a tenant worker's channel to its listener
 * (worker.h). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/admin.h"
#include "device.h"
#include "drivers/cpu/cpu.h"
#include "executor.h"
#include "grants.h"
#include "hipd.h"
#include "kernels/kernels.h"
#include "log.h"
#include "objects/watchdog.h"
#include "privsep/ipc.h"
#include "privsep/wire.h"
#include "privsep/worker.h"
#include "session.h"
#include "stats.h"
#include "transport.h"

enum { REQ_COMPILE, REQ_STATS, REQ_CLEAR, REQ_CSTATS, REQ_ADMIN };

/* A request to the listener, waiting for its answer. */
typedef struct listener_req {
  struct listener_req *next;
  uint32_t msgid;
  int kind;
  cache_done_fn compiled; /* REQ_COMPILE */
  void (*stats)(void *ctx, int status, const cache_stats_t *st);
  void (*cleared)(void *ctx, int status, const char *msg);
  kernels_cstats_done_fn cstats;
  admin_done_fn admin; /* REQ_ADMIN */
  cache_key_t *key;    /* REQ_COMPILE: gets the listener's key */
  void *ctx;
} listener_req_t;

static struct {
  daemon_t *d;
  worker_role_t role;
  ipc_chan_t ch;
  int open;
  listener_req_t *reqs; /* waiting for their answers */
  void (*stop)(daemon_t *d, const char *why);
  int stop_called;
  char dir[256]; /* the listener's cache directory, for cache.stats */
  void (*reload)(daemon_t *d, int argc, char **argv);
  uv_async_t gpu_timeout;  /* the watchdog fired (watchdog.h) */
  int gpu_dev;             /* the device of the stream past its limit */
  uint32_t gpu_timeout_ms; /* the limit */
} this_worker;

int worker_role_parse(const char *arg, worker_role_t *out)
{
  char mode[16];
  unsigned uid, gid;
  unsigned long long id;
  unsigned slot;
  int end = 0, more = 0;

  if (sscanf(arg, "%15[a-z]:%u:%u:%llu%n", mode, &uid, &gid, &id, &end) != 4)
    return HIPD_EINVAL;
  out->spin_slot = -1;
  if (arg[end] == ':') {
    if (sscanf(arg + end, ":%u%n", &slot, &more) != 1 || slot > INT32_MAX)
      return HIPD_EINVAL;
    out->spin_slot = (int)slot;
    end += more;
  }
  if (arg[end] != '\0')
    return HIPD_EINVAL;
  if (strcmp(mode, "uid") == 0)
    out->mode = ISOLATION_UID;
  else if (strcmp(mode, "session") == 0)
    out->mode = ISOLATION_SESSION;
  else if (strcmp(mode, "probe") == 0)
    out->mode = WORKER_PROBE;
  else
    return HIPD_EINVAL;
  out->uid = (uid_t)uid;
  out->gid = (gid_t)gid;
  out->id = id;
  return 0;
}

static void stop_once(const char *why)
{
  if (this_worker.stop_called)
    return;
  this_worker.stop_called = 1;
  this_worker.stop(this_worker.d, why);
}

static listener_req_t *req_take(uint32_t msgid)
{
  for (listener_req_t **pp = &this_worker.reqs; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->msgid == msgid) {
      listener_req_t *p = *pp;
      *pp = p->next;
      return p;
    }
  return NULL;
}

static void req_fail(listener_req_t *p, int code, const char *msg)
{
  if (p->kind == REQ_COMPILE)
    p->compiled(p->ctx, code, NULL, CACHE_MISS, msg);
  else if (p->kind == REQ_STATS)
    p->stats(p->ctx, code, NULL);
  else if (p->kind == REQ_CSTATS)
    p->cstats(p->ctx, code, NULL);
  else if (p->kind == REQ_ADMIN)
    p->admin(p->ctx, code, msg, NULL, 0);
  else
    p->cleared(p->ctx, code, msg);
  free(p);
}

static void fail_all(const char *why)
{
  while (this_worker.reqs != NULL) {
    listener_req_t *p = this_worker.reqs;
    this_worker.reqs = p->next;
    req_fail(p, HIPD_EIO, why);
  }
}

/* Send the request packed in @p sb (its msgid is this_worker.ch.next_msgid - 1)
 * and wait for its answer through @p p. */
static void send_request(msgpack_sbuffer *sb, listener_req_t *p)
{
  if (!this_worker.open || ipc_send(&this_worker.ch, sb->data, sb->size) != 0) {
    req_fail(p, HIPD_EIO, "the listener is gone");
    return;
  }
  p->next = this_worker.reqs;
  this_worker.reqs = p;
}

/* ------------------------------------------------------------- answers */

static void on_compiled(listener_req_t *p, const proto_msg_t *m)
{
  wire_compile_result_t r;
  const char *img = NULL;
  size_t imglen = 0;
  char *logz;
  cache_blob_t *blob = NULL;

  if (wire_result(WIRE_COMPILE, m->result, &r) != 0 ||
      (r.status.i == 0 && proto_obj_bytes(r.image.o, &img, &imglen) != 0)) {
    req_fail(p, HIPD_EIO, "the listener's answer to compile is malformed");
    return;
  }
  memcpy(p->key->b, r.key.p, CACHE_KEY_SIZE);
  if ((logz = malloc(r.log.len + 1)) == NULL) {
    req_fail(p, HIPD_ENOMEM, "out of memory");
    return;
  }
  memcpy(logz, r.log.p, r.log.len);
  logz[r.log.len] = '\0';
  if (r.status.i == 0 && (blob = cache_blob_new(img, imglen)) == NULL) {
    free(logz);
    req_fail(p, HIPD_ENOMEM, "out of memory");
    return;
  }
  /* Where the listener's time went, for the kernel's reply (kernels.c). */
  cache_set_done_timing(&(cache_timing_t){.wait_ns = r.wait_ns.u,
                                          .compile_ns = r.compile_ns.u,
                                          .helper_ns = r.helper_ns.u,
                                          .helper_cpu_ns = r.helper_cpu_ns.u,
                                          .disk_ns = r.disk_ns.u});
  p->compiled(p->ctx, (int)r.status.i, blob, (cache_source_t)r.source.i, logz);
  cache_set_done_timing(NULL);
  if (blob != NULL)
    cache_blob_unref(blob);
  free(logz);
  free(p);
}

#define COPY_COUNTER(T, name, kind, min, max) st.name = r.name.u;

static void on_stats(listener_req_t *p, const proto_msg_t *m)
{
  wire_cache_stats_result_t r;
  cache_stats_t st = {0};

  if (wire_result(WIRE_CACHE_STATS, m->result, &r) != 0) {
    req_fail(p, HIPD_EIO, "malformed cache.stats answer");
    return;
  }
  WIRE_CACHE_STATS_COUNTERS(COPY_COUNTER, _)
  snprintf(this_worker.dir, sizeof(this_worker.dir), "%.*s", (int)r.dir.len,
           r.dir.p);
  st.dir = this_worker.dir[0] ? this_worker.dir : NULL;
  p->stats(p->ctx, 0, &st);
  free(p);
}

static void on_cstats(listener_req_t *p, const proto_msg_t *m)
{
  wire_compile_stats_result_t r;
  compile_pool_stats_t st = {0};
  static char fsname[32];

  if (wire_result(WIRE_COMPILE_STATS, m->result, &r) != 0) {
    req_fail(p, HIPD_EIO, "malformed compile.stats answer");
    return;
  }
  WIRE_COMPILE_STATS_COUNTERS(COPY_COUNTER, _)
  snprintf(fsname, sizeof(fsname), "%.*s", (int)r.fsview_name.len,
           r.fsview_name.p);
  st.fsview_name = fsname;
  st.uid = r.uid.i;
  snprintf(st.sandbox, sizeof(st.sandbox), "%.*s", (int)r.sandbox.len,
           r.sandbox.p);
  p->cstats(p->ctx, 0, &st);
  free(p);
}

/* The answer to admin: [status, message, result (packed msgpack) | nil]. */
static void on_admin(listener_req_t *p, const proto_msg_t *m)
{
  wire_admin_result_t r;
  const char *res = NULL;
  size_t rlen = 0;
  char buf[256];

  if (wire_result(WIRE_ADMIN, m->result, &r) != 0 ||
      (r.status.i == 0 &&
       (proto_obj_bytes(r.result.o, &res, &rlen) != 0 || rlen == 0))) {
    /* A success carries its result: empty bytes would become a reply
     * without one. */
    req_fail(p, HIPD_EIO, "the listener's answer to admin is malformed");
    return;
  }
  snprintf(buf, sizeof(buf), "%.*s", (int)r.message.len, r.message.p);
  p->admin(p->ctx, (int)r.status.i, buf, res, rlen);
  free(p);
}

static void on_response(const proto_msg_t *m)
{
  listener_req_t *p = req_take(m->msgid);
  int code;
  const char *msg;
  size_t mlen;

  if (p == NULL) {
    log_warn(0, "the listener answered request %u, which is not pending",
             m->msgid);
    return;
  }
  if (m->error != NULL && m->error->type != MSGPACK_OBJECT_NIL) {
    char buf[512];
    /* A code that is not negative would pass for a success (a compile's
     * without its binary). */
    if (proto_error_decode(m->error, &code, &msg, &mlen) != 0 || code >= 0) {
      code = HIPD_EIO;
      msg = "malformed error";
      mlen = strlen(msg);
    }
    snprintf(buf, sizeof(buf), "%.*s", (int)mlen, msg);
    req_fail(p, code, buf);
    return;
  }
  if (p->kind == REQ_COMPILE)
    on_compiled(p, m);
  else if (p->kind == REQ_STATS)
    on_stats(p, m);
  else if (p->kind == REQ_CSTATS)
    on_cstats(p, m);
  else if (p->kind == REQ_ADMIN)
    on_admin(p, m);
  else {
    p->cleared(p->ctx, 0, "");
    free(p);
  }
}

/* conn [id, uid, gid, pid] with the connection. */
static void on_conn(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_conn_t *a = args;

  (void)ctx;
  (void)m;
  if (a == NULL) {
    stop_once("a malformed conn message from the listener");
    return;
  }
  /* What ipc_accept() checks: without it transport_accept() fails its
   * uv_accept (and its session's teardown then crashed), or opens a
   * descriptor that is no socket as one. */
  if (uv_pipe_pending_count(&this_worker.ch.pipe) <= 0 ||
      uv_pipe_pending_type(&this_worker.ch.pipe) != UV_NAMED_PIPE) {
    stop_once("a conn message from the listener without its connection");
    return;
  }
  /* The session takes the listener's id, so that both logs agree. */
  this_worker.d->next_session_id = a->id.u - 1;
  transport_accept(this_worker.d, (uv_stream_t *)&this_worker.ch.pipe);
}

/* reload [[arg...]]: the listener's options after a SIGHUP (argv[0]
 * first), for this_worker.reload. A malformed one is logged and ignored: the
 * worker keeps its configuration. */
static void on_reload(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_reload_t *r = args;
  const msgpack_object *a;
  char **argv = NULL;
  uint32_t n = 0;

  (void)ctx;
  (void)m;
  if (r == NULL || (a = r->args.o)->via.array.size == 0 ||
      (argv = calloc(a->via.array.size + 1, sizeof(*argv))) == NULL) {
    log_error(0, "a malformed reload from the listener: ignored");
    return;
  }
  for (; n < a->via.array.size; n++) {
    const char *p;
    size_t len;
    if (proto_obj_bytes(&a->via.array.ptr[n], &p, &len) != 0 ||
        memchr(p, '\0', len) != NULL || (argv[n] = malloc(len + 1)) == NULL)
      break;
    memcpy(argv[n], p, len);
    argv[n][len] = '\0';
  }
  if (n < a->via.array.size)
    log_error(0, "a malformed reload from the listener: ignored");
  else if (this_worker.reload != NULL)
    this_worker.reload(this_worker.d, (int)n, argv);
  for (uint32_t i = 0; i < n; i++)
    free(argv[i]);
  free(argv);
}

void worker_on_reload(void (*reload)(daemon_t *d, int argc, char **argv))
{
  this_worker.reload = reload;
}

/* report []: this worker's sessions and counters (stats_pack_report). */
static void on_report(void *ctx, const proto_msg_t *m, const void *args)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  (void)ctx;
  if (args == NULL) {
    stop_once("a malformed report message from the listener");
    return;
  }
  /* What its sessions were answered early (call.h) is counted before
   * the listener sees this worker's figures. */
  exec_bridge_run();
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  stats_pack_report(this_worker.d, &pk);
  ipc_send(&this_worker.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* kill [session id, who]: close that session with reason who. */
static void on_kill(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_kill_t *a = args;
  char why[128];
  msgpack_sbuffer sb;
  msgpack_packer pk;
  int rc;

  (void)ctx;
  if (a == NULL) {
    stop_once("a malformed kill message from the listener");
    return;
  }
  snprintf(why, sizeof(why), "%.*s", (int)a->who.len, a->who.p);
  rc = admin_kill_local(this_worker.d, a->id.u, why, 0);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  if (rc == 0)
    msgpack_pack_true(&pk);
  else
    msgpack_pack_false(&pk);
  ipc_send(&this_worker.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* log.level [level]: the listener's new level. */
static void on_log_level(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_log_level_t *a = args;

  (void)ctx;
  (void)m;
  if (a == NULL) {
    stop_once("a malformed log.level message from the listener");
    return;
  }
  log_set_level((int)a->level.u);
  log_info(0, "log level set to %s by the listener",
           (const char *[]){"error", "warn", "info", "debug"}[a->level.u]);
}

/* grants [why, by, [[serial, label, devices, quota]...]]: this worker's uid's
 * grants now; the sessions under those gone are closed (grants.h). */
static void on_grants(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_grants_t *a = args;
  daemon_t *d = this_worker.d;
  grant_t *in = NULL, *old = NULL;
  uint32_t n = 0, nold = d->grants.n;
  char why[160];

  (void)ctx;
  (void)m;
  if (a == NULL) {
    stop_once("a malformed grants message from the listener");
    return;
  }
  n = a->grants.o->via.array.size;
  if ((n > 0 && (in = calloc(n, sizeof(*in))) == NULL) ||
      (nold > 0 && (old = calloc(nold, sizeof(*old))) == NULL)) {
    /* Without the new table no session may keep a revoked grant's
     * devices: the worker stops (its sessions with it). */
    free(in);
    stop_once("out of memory for the listener's grants");
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    wire_grant_t g;
    if (wire_grant(&a->grants.o->via.array.ptr[i], &g) != 0 ||
        !grants_label_ok(g.label.p, g.label.len)) {
      free(in);
      free(old);
      stop_once("a malformed grants message from the listener");
      return;
    }
    in[i].serial = g.serial.u;
    in[i].uid = d->tenant_uid;
    in[i].devmask = g.devices.u;
    in[i].quota = g.quota.u;
    memcpy(in[i].label, g.label.p, g.label.len);
  }
  if (nold > 0)
    memcpy(old, d->grants.g, nold * sizeof(*old));
  if (grants_replace(d, in, n) != 0) {
    free(in);
    free(old);
    stop_once("out of memory for the listener's grants");
    return;
  }
  snprintf(why, sizeof(why), "%.*s", (int)a->why.len, a->why.p);
  grants_close_revoked(d, old, nold, why, a->by.i);
  free(in);
  free(old);
}

/* exit []: the listener ended this worker (idle). */
static void on_exit_msg(void *ctx, const proto_msg_t *m, const void *args)
{
  (void)ctx;
  (void)m;
  (void)args;
  stop_once("idle: the listener ended this worker");
}

/* preload [key, image]: load it ahead of the requests for it, on the
 * devices this worker's sessions may use (the listener sends it after
 * the worker's first connection). */
static void on_preload(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_preload_t *a = args;
  daemon_t *d = this_worker.d;
  uint64_t devmask = 0;
  cache_key_t key;

  (void)ctx;
  (void)m;
  if (a == NULL) {
    log_warn(0, "a malformed preload message from the listener: ignored");
    return;
  }
  for (list_node_t *n = d->sessions.next; n != &d->sessions; n = n->next)
    devmask |= list_entry(n, session_t, node)->devmask;
  memcpy(key.b, a->key.p, CACHE_KEY_SIZE);
  if (kernels_preload(&key, a->image.p, a->image.len, devmask) < 0)
    log_warn(0, "out of memory preloading a kernel: it loads when asked for");
}

/* compiler [driver, id]: key requests as the listener does. */
static void on_compiler(void *ctx, const proto_msg_t *m, const void *args)
{
  const wire_compiler_t *a = args;
  char driver[32], id[256];

  (void)ctx;
  (void)m;
  if (a == NULL) {
    log_warn(0, "a malformed compiler message from the listener: ignored");
    return;
  }
  snprintf(driver, sizeof(driver), "%.*s", (int)a->driver.len, a->driver.p);
  snprintf(id, sizeof(id), "%.*s", (int)a->id.len, a->id.p);
  if (compile_pool_set_compiler_id(driver, id) != 0)
    log_warn(0, "the listener's compiler id for driver %s: ignored", driver);
}

/* cache.cleared []: the modules loaded so far answer no request without
 * the cache again. */
static void on_cache_cleared(void *ctx, const proto_msg_t *m, const void *args)
{
  (void)ctx;
  (void)m;
  (void)args;
  kernels_cache_cleared();
}

/* What a worker takes from its listener (wire.h). */
static const wire_handler_fn from_listener[WIRE_NMSG] = {
    [WIRE_CONN] = on_conn,
    [WIRE_EXIT] = on_exit_msg,
    [WIRE_RELOAD] = on_reload,
    [WIRE_LOG_LEVEL] = on_log_level,
    [WIRE_REPORT] = on_report,
    [WIRE_KILL] = on_kill,
    [WIRE_GRANTS] = on_grants,
    [WIRE_PRELOAD] = on_preload,
    [WIRE_CACHE_CLEARED] = on_cache_cleared,
    [WIRE_COMPILER] = on_compiler,
};

static void on_msg(ipc_chan_t *ch, const proto_msg_t *m)
{
  (void)ch;
  if (m->type == PROTO_RESPONSE)
    on_response(m);
  else if (this_worker.stop_called)
    ; /* stopping: what the listener sent after the stop (in the same read)
       * is not served, as the stop said */
  else if (wire_dispatch(from_listener, WIRE_FROM_LISTENER, m, NULL) != 0)
    log_warn(0, "unknown message from the listener: ignored");
}

static void on_broken(ipc_chan_t *ch, const char *why)
{
  char buf[192];

  (void)ch;
  fail_all("the listener is gone");
  snprintf(buf, sizeof(buf), "the listener's channel closed (%s)", why);
  stop_once(buf);
}

/* --------------------------------------------------------------- fetch */

/* Pack the head of request @p id (wire.h) for @p p,
 * which gets its msgid; the caller packs the params, then request_end()
 * sends it and waits for the answer through @p p. */
static void request_begin(listener_req_t *p, msgpack_sbuffer *sb,
                          msgpack_packer *pk, wire_msg_id_t id)
{
  p->msgid = this_worker.ch.next_msgid++;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
  wire_pack_head(pk, id, p->msgid);
}

static void request_end(msgpack_sbuffer *sb, listener_req_t *p)
{
  send_request(sb, p);
  msgpack_sbuffer_destroy(sb);
}

static void touch_remote(const cache_key_t *key);

static void fetch_remote(const kernels_fetch_t *f, cache_done_fn done,
                         void *ctx)
{
  listener_req_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, NULL, CACHE_MISS, "out of memory");
    return;
  }
  p->kind = REQ_COMPILE;
  p->key = f->key;
  p->compiled = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, WIRE_COMPILE);
  proto_pack_cstr(&pk, f->drv->name);
  proto_pack_cstr(&pk, f->arch);
  msgpack_pack_bin(&pk, (uint32_t)f->source_len);
  msgpack_pack_bin_body(&pk, f->source, f->source_len);
  proto_pack_cstr(&pk, f->name);
  msgpack_pack_array(&pk, (uint32_t)f->nopts);
  for (size_t i = 0; i < f->nopts; i++)
    proto_pack_cstr(&pk, f->opts[i]);
  msgpack_pack_uint32(&pk, f->refresh ? 1 : 0);
  request_end(&sb, p);
}

void worker_cache_stats(kernels_stats_done_fn done, void *ctx)
{
  listener_req_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, NULL);
    return;
  }
  p->kind = REQ_STATS;
  p->stats = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, WIRE_CACHE_STATS);
  request_end(&sb, p);
}

static void worker_compile_stats(kernels_cstats_done_fn done, void *ctx)
{
  listener_req_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, NULL);
    return;
  }
  p->kind = REQ_CSTATS;
  p->cstats = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, WIRE_COMPILE_STATS);
  request_end(&sb, p);
}

/* An admin request of a client: the listener decides and answers. */
static void forward_admin(daemon_t *d, const admin_args_t *a,
                          admin_done_fn done, void *ctx)
{
  listener_req_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  (void)d;
  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, "out of memory", NULL, 0);
    return;
  }
  p->kind = REQ_ADMIN;
  p->admin = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, WIRE_ADMIN);
  admin_args_pack(&pk, a); /* op, params: wire.h's admin row */
  request_end(&sb, p);
}

void worker_cache_clear(uid_t uid, kernels_clear_done_fn done, void *ctx)
{
  listener_req_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, "out of memory");
    return;
  }
  p->kind = REQ_CLEAR;
  p->cleared = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, WIRE_CACHE_CLEAR);
  msgpack_pack_uint32(&pk, (uint32_t)uid);
  request_end(&sb, p);
}

/* -------------------------------------------------------------- lifetime */

static int gpu_count(void)
{
  int n = 0;

  for (int i = 0; i < devices_count(); i++)
    n += !device_get(i)->caps.is_cpu;
  return n;
}

/* On the loop thread, after the watchdog fired: tell every session why and
 * end this process (the only way to stop a GPU kernel is to end its
 * context). Nothing is torn down: the GPU calls of a teardown could wait
 * for the very kernel that does not end. */
static void gpu_timeout_cb(uv_async_t *a)
{
  daemon_t *d = this_worker.d;
  char why[256];
  uint32_t n = 0;

  (void)a;
  snprintf(why, sizeof(why),
           "a kernel of uid %u ran past --gpu-kernel-timeout (%u ms) on "
           "device %d; its worker was ended to stop it",
           (unsigned)this_worker.role.uid, (unsigned)this_worker.gpu_timeout_ms,
           this_worker.gpu_dev);
  for (list_node_t *nd = d->sessions.next; nd != &d->sessions;) {
    session_t *s = list_entry(nd, session_t, node);
    nd = nd->next;
    session_close_told(s, HIPD_ETIMEDOUT, why);
    n++;
  }
  log_error(0, "%s: its %u sessions were closed", why, (unsigned)n);
  _exit(WORKER_EXIT_GPU_TIMEOUT);
}

/* The watchdog's thread: hand over to the loop; end the process if the
 * loop does not within 5 s. */
static void gpu_timeout_fired(int dev, uint32_t timeout_ms)
{
  this_worker.gpu_dev = dev;
  this_worker.gpu_timeout_ms = timeout_ms;
  uv_async_send(&this_worker.gpu_timeout);
  sleep(5);
  log_error(0,
            "a kernel ran past --gpu-kernel-timeout (%u ms) on device %d "
            "and the worker's loop did not answer: ending it",
            (unsigned)timeout_ms, dev);
  _exit(WORKER_EXIT_GPU_TIMEOUT);
}

int worker_start(daemon_t *d, const worker_role_t *role, int fd,
                 void (*stop)(daemon_t *d, const char *why), hipd_err_t *err)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  int rc;

  this_worker.d = d;
  this_worker.role = *role;
  this_worker.stop = stop;
  /* Afresh: a process may start a channel again after worker_close()
   * (tests/fuzz/fuzz_ipc.c does, once per input). */
  this_worker.stop_called = 0;
  this_worker.reqs = NULL;
  if ((rc = ipc_open(d->loop, &this_worker.ch, fd)) != 0)
    return err_set(err, HIPD_EIO, "cannot open the listener's channel: %s",
                   uv_strerror(rc));
  this_worker.open = 1;
  if ((rc = ipc_start(&this_worker.ch, on_msg, on_broken)) != 0)
    return err_set(err, HIPD_EIO, "cannot read the listener's channel: %s",
                   uv_strerror(rc));
  /* The GPU kernel time limit, where there is a GPU. */
  if (role->mode != WORKER_PROBE && gpu_count() > 0) {
    if ((rc = uv_async_init(d->loop, &this_worker.gpu_timeout,
                            gpu_timeout_cb)) != 0)
      return err_set(err, HIPD_EIO, "cannot start the GPU kernel watchdog: %s",
                     uv_strerror(rc));
    uv_unref((uv_handle_t *)&this_worker.gpu_timeout);
    if (watchdog_start(d->cfg.gpu_kernel_timeout_ms, gpu_timeout_fired) != 0)
      return err_set(err, HIPD_EIO,
                     "cannot start the GPU kernel watchdog's thread");
  }
  kernels_set_fetch(fetch_remote);
  kernels_set_touch(touch_remote);
  admin_set_forward(forward_admin);
  kernels_set_cache_remote(worker_cache_stats, worker_cache_clear,
                           worker_compile_stats);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_READY, 0);
  msgpack_pack_int32(&pk, (int32_t)getpid());
  ipc_send(&this_worker.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return 0;
}

/* A notification to the listener: its head packed into @p sb, the caller
 * packs the params, notify_end() sends it. @return 0, or -1 when the
 * channel is gone (nothing to send). */
static int notify_begin(msgpack_sbuffer *sb, msgpack_packer *pk, int row)
{
  if (!this_worker.open || this_worker.ch.broken)
    return -1;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
  wire_pack_head(pk, row, 0);
  return 0;
}

static void notify_end(msgpack_sbuffer *sb)
{
  ipc_send(&this_worker.ch, sb->data, sb->size);
  msgpack_sbuffer_destroy(sb);
}

/* Notify the listener: @p row [@p id]. */
static void tell_listener(int row, uint64_t id)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (notify_begin(&sb, &pk, row) != 0)
    return;
  msgpack_pack_uint64(&pk, id);
  notify_end(&sb);
}

/* cache.touch [key]: a request answered from a module loaded here. */
static void touch_remote(const cache_key_t *key)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (notify_begin(&sb, &pk, WIRE_CACHE_TOUCH) != 0)
    return;
  msgpack_pack_bin(&pk, CACHE_KEY_SIZE);
  msgpack_pack_bin_body(&pk, key->b, CACHE_KEY_SIZE);
  notify_end(&sb);
}

void worker_session_hello(daemon_t *d, uint64_t id)
{
  (void)d;
  tell_listener(WIRE_HELLO, id);
}

void worker_session_closed(daemon_t *d, uint64_t id)
{
  /* This worker has no session left: whatever CPU kernel still runs in
   * its runner was launched for nobody. (Not "session closed: ", which
   * starts the close lines the log's readers count.) */
  if (d->nsessions == 0 && cpu_driver_abort_launches())
    log_info(id, "no session left in this worker: its running CPU kernels "
                 "were stopped");
  tell_listener(WIRE_CLOSED, id);
}

void worker_close(daemon_t *d)
{
  (void)d;
  if (!this_worker.open)
    return;
  this_worker.open = 0;
  fail_all("the worker is stopping");
  ipc_close(&this_worker.ch, NULL);
}
