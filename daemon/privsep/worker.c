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
#include "drivers/cpu/cpu.h"
#include "hipd.h"
#include "kernels/kernels.h"
#include "log.h"
#include "privsep/ipc.h"
#include "privsep/worker.h"
#include "stats.h"
#include "transport.h"

enum { REQ_COMPILE, REQ_STATS, REQ_CLEAR, REQ_CSTATS, REQ_ADMIN };

/* A request to the listener, waiting for its answer. */
typedef struct pending {
  struct pending *next;
  uint32_t msgid;
  int kind;
  cache_done_fn compiled; /* REQ_COMPILE */
  void (*stats)(void *ctx, int status, const cache_stats_t *st);
  void (*cleared)(void *ctx, int status, const char *msg);
  kernels_cstats_done_fn cstats;
  admin_done_fn admin; /* REQ_ADMIN */
  cache_key_t *key;    /* REQ_COMPILE: gets the listener's key */
  void *ctx;
} pending_t;

static struct {
  daemon_t *d;
  worker_role_t role;
  ipc_chan_t ch;
  int open;
  pending_t *pending;
  void (*stop)(daemon_t *d, const char *why);
  int stop_called;
  char dir[256]; /* the listener's cache directory, for cache.stats */
  void (*reload)(daemon_t *d, int argc, char **argv);
} K;

int worker_role_parse(const char *arg, worker_role_t *out)
{
  char mode[16];
  unsigned uid, gid;
  unsigned long long id;
  int end = 0;

  if (sscanf(arg, "%15[a-z]:%u:%u:%llu%n", mode, &uid, &gid, &id, &end) != 4 ||
      arg[end] != '\0')
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
  if (K.stop_called)
    return;
  K.stop_called = 1;
  K.stop(K.d, why);
}

static pending_t *pending_take(uint32_t msgid)
{
  for (pending_t **pp = &K.pending; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->msgid == msgid) {
      pending_t *p = *pp;
      *pp = p->next;
      return p;
    }
  return NULL;
}

static void pending_fail(pending_t *p, int code, const char *msg)
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
  while (K.pending != NULL) {
    pending_t *p = K.pending;
    K.pending = p->next;
    pending_fail(p, HIPD_EIO, why);
  }
}

/* Send the request packed in @p sb (its msgid is K.ch.next_msgid - 1)
 * and wait for its answer through @p p. */
static void send_request(msgpack_sbuffer *sb, pending_t *p)
{
  if (!K.open || ipc_send(&K.ch, sb->data, sb->size) != 0) {
    pending_fail(p, HIPD_EIO, "the listener is gone");
    return;
  }
  p->next = K.pending;
  K.pending = p;
}

/* ------------------------------------------------------------- answers */

static void on_compiled(pending_t *p, const proto_msg_t *m)
{
  const msgpack_object *r = m->result;
  int64_t status, source;
  const char *log = "", *img = NULL;
  size_t loglen = 0, imglen = 0;
  char *logz;
  cache_blob_t *blob = NULL;

  if (r == NULL || r->type != MSGPACK_OBJECT_ARRAY || r->via.array.size != 5 ||
      proto_obj_int(&r->via.array.ptr[0], INT32_MIN, 0, &status) != 0 ||
      proto_obj_int(&r->via.array.ptr[1], 0, CACHE_WAITED, &source) != 0 ||
      proto_obj_bytes(&r->via.array.ptr[3], &log, &loglen) != 0 ||
      (status == 0 &&
       proto_obj_bytes(&r->via.array.ptr[4], &img, &imglen) != 0)) {
    pending_fail(p, HIPD_EIO, "the listener's answer to compile is malformed");
    return;
  }
  {
    const char *key;
    size_t keylen;
    if (proto_obj_bytes(&r->via.array.ptr[2], &key, &keylen) != 0 ||
        keylen != CACHE_KEY_SIZE) {
      pending_fail(p, HIPD_EIO,
                   "the listener's answer to compile is "
                   "malformed");
      return;
    }
    memcpy(p->key->b, key, CACHE_KEY_SIZE);
  }
  if ((logz = malloc(loglen + 1)) == NULL) {
    pending_fail(p, HIPD_ENOMEM, "out of memory");
    return;
  }
  memcpy(logz, log, loglen);
  logz[loglen] = '\0';
  if (status == 0 && (blob = cache_blob_new(img, imglen)) == NULL) {
    free(logz);
    pending_fail(p, HIPD_ENOMEM, "out of memory");
    return;
  }
  p->compiled(p->ctx, (int)status, blob, (cache_source_t)source, logz);
  if (blob != NULL)
    cache_blob_unref(blob);
  free(logz);
  free(p);
}

static void on_stats(pending_t *p, const proto_msg_t *m)
{
  const msgpack_object *r = m->result;
  uint64_t v[13];
  cache_stats_t st = {0};
  const char *dir;
  size_t dirlen;

  if (r == NULL || r->type != MSGPACK_OBJECT_ARRAY || r->via.array.size != 14 ||
      proto_obj_bytes(&r->via.array.ptr[13], &dir, &dirlen) != 0) {
    pending_fail(p, HIPD_EIO, "malformed cache.stats answer");
    return;
  }
  for (int i = 0; i < 13; i++)
    if (proto_obj_uint(&r->via.array.ptr[i], UINT64_MAX, &v[i]) != 0) {
      pending_fail(p, HIPD_EIO, "malformed cache.stats answer");
      return;
    }
  st.hits_memory = v[0];
  st.hits_disk = v[1];
  st.misses = v[2];
  st.waits = v[3];
  st.compile_failures = v[4];
  st.evictions = v[5];
  st.corrupt = v[6];
  st.auth_failures = v[7];
  st.entries = v[8];
  st.bytes = v[9];
  st.disk_entries = v[10];
  st.disk_bytes = v[11];
  st.max_bytes = v[12];
  snprintf(K.dir, sizeof(K.dir), "%.*s", (int)dirlen, dir);
  st.dir = K.dir[0] ? K.dir : NULL;
  p->stats(p->ctx, 0, &st);
  free(p);
}

static void on_cstats(pending_t *p, const proto_msg_t *m)
{
  const msgpack_object *r = m->result;
  compile_pool_stats_t st = {0};
  uint64_t v[10];
  int64_t uid;
  const char *fs, *na;
  size_t fslen, nalen;
  static char fsname[32];

  if (r == NULL || r->type != MSGPACK_OBJECT_ARRAY || r->via.array.size != 13 ||
      proto_obj_bytes(&r->via.array.ptr[10], &fs, &fslen) != 0 ||
      proto_obj_int(&r->via.array.ptr[11], -1, UINT32_MAX, &uid) != 0 ||
      proto_obj_bytes(&r->via.array.ptr[12], &na, &nalen) != 0) {
    pending_fail(p, HIPD_EIO, "malformed compile.stats answer");
    return;
  }
  for (int i = 0; i < 10; i++)
    if (proto_obj_uint(&r->via.array.ptr[i], UINT64_MAX, &v[i]) != 0) {
      pending_fail(p, HIPD_EIO, "malformed compile.stats answer");
      return;
    }
  st.jobs = (unsigned)v[0];
  st.timeout_s = (unsigned)v[1];
  st.busy = (unsigned)v[2];
  st.queued = (unsigned)v[3];
  st.helpers = (unsigned)v[4];
  st.started = v[5];
  st.restarts = v[6];
  st.compiles = v[7];
  st.timeouts = v[8];
  st.crashes = v[9];
  snprintf(fsname, sizeof(fsname), "%.*s", (int)fslen, fs);
  st.fsview_name = fsname;
  st.uid = uid;
  snprintf(st.sandbox, sizeof(st.sandbox), "%.*s", (int)nalen, na);
  p->cstats(p->ctx, 0, &st);
  free(p);
}

/* The answer to admin: [status, message, result (packed msgpack) | nil]. */
static void on_admin(pending_t *p, const proto_msg_t *m)
{
  const msgpack_object *r = m->result;
  int64_t status;
  const char *msg = NULL, *res = NULL;
  size_t mlen = 0, rlen = 0;
  char buf[256];

  if (r == NULL || r->type != MSGPACK_OBJECT_ARRAY || r->via.array.size != 3 ||
      proto_obj_int(&r->via.array.ptr[0], INT32_MIN, 0, &status) != 0 ||
      proto_obj_bytes(&r->via.array.ptr[1], &msg, &mlen) != 0 ||
      (status == 0 &&
       (proto_obj_bytes(&r->via.array.ptr[2], &res, &rlen) != 0 ||
        rlen == 0))) {
    /* A success carries its result: empty bytes would become a reply
     * without one. */
    pending_fail(p, HIPD_EIO, "the listener's answer to admin is malformed");
    return;
  }
  snprintf(buf, sizeof(buf), "%.*s", (int)mlen, msg);
  p->admin(p->ctx, (int)status, buf, res, rlen);
  free(p);
}

static void on_response(const proto_msg_t *m)
{
  pending_t *p = pending_take(m->msgid);
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
    pending_fail(p, code, buf);
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
static void on_conn(const proto_msg_t *m)
{
  uint64_t id, uid;

  if (ipc_param_uint(m, 0, UINT64_MAX, &id) != 0 ||
      ipc_param_uint(m, 1, UINT32_MAX, &uid) != 0) {
    stop_once("a malformed conn message from the listener");
    return;
  }
  /* What ipc_accept() checks: without it transport_accept() fails its
   * uv_accept (and its session's teardown then crashed), or opens a
   * descriptor that is no socket as one. */
  if (uv_pipe_pending_count(&K.ch.pipe) <= 0 ||
      uv_pipe_pending_type(&K.ch.pipe) != UV_NAMED_PIPE) {
    stop_once("a conn message from the listener without its connection");
    return;
  }
  /* The session takes the listener's id, so that both logs agree. */
  K.d->next_session_id = id - 1;
  transport_accept(K.d, (uv_stream_t *)&K.ch.pipe);
}

/* Most options in a reload (hipd has about forty, each may repeat). */
#define RELOAD_MAX_ARGS 4096

/* reload [[arg...]]: the listener's options after a SIGHUP (argv[0]
 * first), for K.reload. A malformed one is logged and ignored: the
 * worker keeps its configuration. */
static void on_reload(const proto_msg_t *m)
{
  const msgpack_object *a;
  char **argv = NULL;
  uint32_t n = 0;

  if (ipc_param_array(m, 0, RELOAD_MAX_ARGS, &a) != 0 ||
      a->via.array.size == 0 ||
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
  else if (K.reload != NULL)
    K.reload(K.d, (int)n, argv);
  for (uint32_t i = 0; i < n; i++)
    free(argv[i]);
  free(argv);
}

void worker_on_reload(void (*reload)(daemon_t *d, int argc, char **argv))
{
  K.reload = reload;
}

/* report []: this worker's sessions and counters (stats_pack_report). */
static void on_report(const proto_msg_t *m)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (m->params == NULL || m->params->type != MSGPACK_OBJECT_ARRAY ||
      m->params->via.array.size != 0) {
    stop_once("a malformed report message from the listener");
    return;
  }
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  stats_pack_report(K.d, &pk);
  ipc_send(&K.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* kill [session id, who]: close that session with reason @p who. */
static void on_kill(const proto_msg_t *m)
{
  uint64_t id;
  const char *who;
  size_t n;
  char why[128];
  msgpack_sbuffer sb;
  msgpack_packer pk;
  int rc;

  if (ipc_param_uint(m, 0, UINT64_MAX, &id) != 0 ||
      ipc_param_bytes(m, 1, sizeof(why) - 1, &who, &n) != 0) {
    stop_once("a malformed kill message from the listener");
    return;
  }
  snprintf(why, sizeof(why), "%.*s", (int)n, who);
  rc = admin_kill_local(K.d, id, why, 0);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_response(&pk, m->msgid);
  if (rc == 0)
    msgpack_pack_true(&pk);
  else
    msgpack_pack_false(&pk);
  ipc_send(&K.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* log.level [level]: the listener's new level. */
static void on_log_level(const proto_msg_t *m)
{
  uint64_t lvl;

  if (ipc_param_uint(m, 0, HLOG_DEBUG, &lvl) != 0) {
    stop_once("a malformed log.level message from the listener");
    return;
  }
  log_set_level((int)lvl);
  log_info(0, "log level set to %s by the listener",
           (const char *[]){"error", "warn", "info", "debug"}[lvl]);
}

static void on_msg(ipc_chan_t *ch, const proto_msg_t *m)
{
  (void)ch;
  if (m->type == PROTO_RESPONSE)
    on_response(m);
  else if (m->type == PROTO_REQUEST && ipc_is(m, "report"))
    on_report(m);
  else if (m->type == PROTO_REQUEST && ipc_is(m, "kill"))
    on_kill(m);
  else if (m->type == PROTO_NOTIFY && ipc_is(m, "log.level"))
    on_log_level(m);
  else if (m->type == PROTO_NOTIFY && ipc_is(m, "conn"))
    on_conn(m);
  else if (m->type == PROTO_NOTIFY && ipc_is(m, "exit"))
    stop_once("idle: the listener ended this worker");
  else if (m->type == PROTO_NOTIFY && ipc_is(m, "reload"))
    on_reload(m);
  else
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

/* Pack the head of request @p method (with @p nparams params) for @p p,
 * which gets its msgid; the caller packs the params, then request_end()
 * sends it and waits for the answer through @p p. */
static void request_begin(pending_t *p, msgpack_sbuffer *sb, msgpack_packer *pk,
                          const char *method, uint32_t nparams)
{
  p->msgid = K.ch.next_msgid++;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
  proto_pack_request(pk, p->msgid, method, nparams);
}

static void request_end(msgpack_sbuffer *sb, pending_t *p)
{
  send_request(sb, p);
  msgpack_sbuffer_destroy(sb);
}

static void fetch_remote(const kernels_fetch_t *f, cache_done_fn done,
                         void *ctx)
{
  pending_t *p = calloc(1, sizeof(*p));
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
  request_begin(p, &sb, &pk, "compile", 6);
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
  pending_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, NULL);
    return;
  }
  p->kind = REQ_STATS;
  p->stats = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, "cache.stats", 0);
  request_end(&sb, p);
}

static void worker_compile_stats(kernels_cstats_done_fn done, void *ctx)
{
  pending_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, NULL);
    return;
  }
  p->kind = REQ_CSTATS;
  p->cstats = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, "compile.stats", 0);
  request_end(&sb, p);
}

/* An admin request of a client: the listener decides and answers. */
static void forward_admin(daemon_t *d, const char *op,
                          const msgpack_object *params, admin_done_fn done,
                          void *ctx)
{
  pending_t *p = calloc(1, sizeof(*p));
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
  request_begin(p, &sb, &pk, "admin", 2);
  proto_pack_cstr(&pk, op);
  msgpack_pack_object(&pk, *params);
  request_end(&sb, p);
}

void worker_cache_clear(uid_t uid, kernels_clear_done_fn done, void *ctx)
{
  pending_t *p = calloc(1, sizeof(*p));
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (p == NULL) {
    done(ctx, HIPD_ENOMEM, "out of memory");
    return;
  }
  p->kind = REQ_CLEAR;
  p->cleared = done;
  p->ctx = ctx;
  request_begin(p, &sb, &pk, "cache.clear", 1);
  msgpack_pack_uint32(&pk, (uint32_t)uid);
  request_end(&sb, p);
}

/* -------------------------------------------------------------- lifetime */

int worker_start(daemon_t *d, const worker_role_t *role, int fd,
                 void (*stop)(daemon_t *d, const char *why), hipd_err_t *err)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  int rc;

  K.d = d;
  K.role = *role;
  K.stop = stop;
  /* Afresh: a process may start a channel again after worker_close()
   * (tests/fuzz/fuzz_ipc.c does, once per input). */
  K.stop_called = 0;
  K.pending = NULL;
  if ((rc = ipc_open(d->loop, &K.ch, fd)) != 0)
    return err_set(err, HIPD_EIO, "cannot open the listener's channel: %s",
                   uv_strerror(rc));
  K.open = 1;
  if ((rc = ipc_start(&K.ch, on_msg, on_broken)) != 0)
    return err_set(err, HIPD_EIO, "cannot read the listener's channel: %s",
                   uv_strerror(rc));
  kernels_set_fetch(fetch_remote);
  admin_set_forward(forward_admin);
  kernels_set_cache_remote(worker_cache_stats, worker_cache_clear,
                           worker_compile_stats);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_notify(&pk, "ready", 1);
  msgpack_pack_int32(&pk, (int32_t)getpid());
  ipc_send(&K.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return 0;
}

void worker_session_closed(daemon_t *d, uint64_t id)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  /* The tenant has no session left: whatever CPU kernel still runs was
   * launched for nobody. */
  if (d->nsessions == 0 && cpu_driver_abort_launches())
    log_info(id, "the tenant's last session closed: its running CPU kernels "
                 "were stopped");
  if (!K.open || K.ch.broken)
    return;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_notify(&pk, "closed", 1);
  msgpack_pack_uint64(&pk, id);
  ipc_send(&K.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

void worker_close(daemon_t *d)
{
  (void)d;
  if (!K.open)
    return;
  K.open = 0;
  fail_all("the worker is stopping");
  ipc_close(&K.ch, NULL);
}
