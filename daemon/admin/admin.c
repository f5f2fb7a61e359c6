/* SPDX-License-Identifier: MIT */
/* daemon/admin/admin.c: admin requests, views and their answers
 * (admin.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/admin.h"
#include "admin/view.h"
#include "admin/who.h"
#include "compile/compile_pool.h"
#include "hipd.h"
#include "kernels/cache.h"
#include "log.h"
#include "pack.h"
#include "session.h"
#include "stats.h"
#include "util/account.h"
#include "util/array.h"

static const char *const op_names[ADMIN_NOPS] = {
    [ADMIN_SESSION_LIST] = "session.list",
    [ADMIN_SESSION_KILL] = "session.kill",
    [ADMIN_DAEMON_STATS] = "daemon.stats",
    [ADMIN_METRICS] = "metrics",
    [ADMIN_LOG_LEVEL] = "log.level",
    [ADMIN_CACHE_LIST] = "cache.list"};
static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* The request being answered. */
typedef struct job {
  daemon_t *d;
  uid_t uid;
  uint64_t sid;
  int admin;
  admin_op_t op;
  uint64_t kill_id;
  int level; /* log.level: the level to set, -1: none */
  char who[128];
  admin_done_fn done;
  void *ctx;
  admin_text_fn text_done; /* admin_metrics_text() */
} job_t;

static struct {
  admin_forward_fn forward;
  admin_listener_t l;
  int listener;
  /* Node-wide totals of the workers that exited. */
  report_ctr_t fold_dev[REPORT_MAX_DEVICES];
  report_req_t *fold_req;
  uint32_t nfold_req, fold_cap;
  uint64_t scrape_errors;
} admin_state;

void admin_set_forward(admin_forward_fn fn)
{
  admin_state.forward = fn;
}

void admin_set_listener(const admin_listener_t *l)
{
  admin_state.l = *l;
  admin_state.listener = 1;
}

static int op_of(const char *op, size_t len)
{
  for (int i = 0; i < ADMIN_NOPS; i++)
    if (strlen(op_names[i]) == len && memcmp(op_names[i], op, len) == 0)
      return i;
  return -1;
}

int admin_is_op(const char *op, size_t len)
{
  return op_of(op, len) >= 0;
}

const char *admin_op_name(admin_op_t op)
{
  return op >= 0 && op < ADMIN_NOPS ? op_names[op] : "?";
}

/* ------------------------------------------------------------- the args */

#define LEVEL_MSG "param 0 (level) must be error, warn, info or debug"

int admin_level_named(const char *name, size_t len, int *level,
                      const char **msg)
{
  char buf[16];

  if (len >= sizeof(buf)) {
    *msg = LEVEL_MSG;
    return HIPD_EPARAMS;
  }
  memcpy(buf, name, len);
  buf[len] = '\0';
  if ((*level = log_level_parse(buf)) < 0) {
    *msg = LEVEL_MSG;
    return HIPD_EPARAMS;
  }
  return 0;
}

int admin_args_check(const admin_args_t *a, const char **msg)
{
  if (a->op < 0 || a->op >= ADMIN_NOPS) {
    *msg = "not an admin request";
    return HIPD_EPARAMS;
  }
  if (a->op == ADMIN_LOG_LEVEL && (a->level < -1 || a->level > HLOG_DEBUG)) {
    *msg = LEVEL_MSG;
    return HIPD_EPARAMS;
  }
  return 0;
}

void admin_args_pack(msgpack_packer *pk, const admin_args_t *a)
{
  proto_pack_cstr(pk, admin_op_name(a->op));
  if (a->op == ADMIN_SESSION_KILL) {
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, a->id);
  } else if (a->op == ADMIN_LOG_LEVEL && a->level >= 0) {
    msgpack_pack_array(pk, 1);
    proto_pack_cstr(pk, level_names[a->level]);
  } else {
    msgpack_pack_array(pk, 0);
  }
}

int admin_args_unpack(const char *op, size_t oplen,
                      const msgpack_object *params, admin_args_t *out,
                      const char **msg)
{
  int o = op_of(op, oplen);
  uint32_t n = params != NULL && params->type == MSGPACK_OBJECT_ARRAY
                   ? params->via.array.size
                   : UINT32_MAX;
  const msgpack_object *p0 =
      n >= 1 && n != UINT32_MAX ? &params->via.array.ptr[0] : NULL;

  memset(out, 0, sizeof(*out));
  out->level = -1;
  if (o < 0 || n == UINT32_MAX) {
    *msg = "not an admin request";
    return HIPD_EPARAMS;
  }
  out->op = (admin_op_t)o;
  if (o == ADMIN_SESSION_KILL ? n != 1
      : o == ADMIN_LOG_LEVEL  ? n > 1
                              : n != 0) {
    *msg = o == ADMIN_SESSION_KILL ? "takes 1 params (id)" : "takes no params";
    return HIPD_EPARAMS;
  }
  if (o == ADMIN_SESSION_KILL &&
      proto_obj_uint(p0, UINT64_MAX, &out->id) != 0) {
    *msg = "param 0 (id) must be an unsigned integer";
    return HIPD_EPARAMS;
  }
  if (o == ADMIN_LOG_LEVEL && p0 != NULL && p0->type != MSGPACK_OBJECT_NIL) {
    if (p0->type != MSGPACK_OBJECT_STR) {
      *msg = LEVEL_MSG;
      return HIPD_EPARAMS;
    }
    if (admin_level_named(p0->via.str.ptr, p0->via.str.size, &out->level,
                          msg) != 0)
      return HIPD_EPARAMS;
  }
  return admin_args_check(out, msg);
}

/* ---------------------------------------------------------------- folding */

static void fold_req(const report_req_t *q)
{
  for (uint32_t i = 0; i < admin_state.nfold_req; i++)
    if (admin_state.fold_req[i].code == q->code &&
        strcmp(admin_state.fold_req[i].method, q->method) == 0) {
      admin_state.fold_req[i].n += q->n;
      return;
    }
  if (ARRAY_GROW(admin_state.fold_req, admin_state.nfold_req,
                 admin_state.fold_cap, 64) != 0)
    return;
  admin_state.fold_req[admin_state.nfold_req++] = *q;
}

void admin_fold(const report_t *r)
{
  if (r == NULL)
    return;
  for (uint32_t i = 0; i < r->ndev; i++) {
    report_ctr_t *f = &admin_state.fold_dev[r->dev[i].id];
    f->launches += r->dev[i].c.launches;
    f->busy_ns += r->dev[i].c.busy_ns;
    f->h2d += r->dev[i].c.h2d;
    f->d2h += r->dev[i].c.d2h;
    f->faults += r->dev[i].c.faults;
  }
  for (uint32_t i = 0; i < r->nreq; i++)
    fold_req(&r->req[i]);
}

void admin_free(void)
{
  free(admin_state.fold_req);
  admin_state.fold_req = NULL;
  admin_state.nfold_req = admin_state.fold_cap = 0;
}

/* ------------------------------------------------------------------ views */

static view_tenant_t *tenant_of(view_t *v, uint64_t uid)
{
  view_tenant_t *t;

  if (v->last_ten < v->nten && v->ten[v->last_ten].uid == uid)
    return &v->ten[v->last_ten];
  for (uint32_t i = 0; i < v->nten; i++)
    if (v->ten[i].uid == uid) {
      v->last_ten = i;
      return &v->ten[i];
    }
  if (ARRAY_GROW(v->ten, v->nten, v->capten, 8) != 0)
    return NULL;
  v->last_ten = v->nten;
  t = &v->ten[v->nten++];
  memset(t, 0, sizeof(*t));
  t->uid = uid;
  return t;
}

static void view_req_add(view_t *v, const report_req_t *q)
{
  for (uint32_t i = 0; i < v->nreq; i++)
    if (v->req[i].code == q->code && strcmp(v->req[i].method, q->method) == 0) {
      v->req[i].n += q->n;
      return;
    }
  if (ARRAY_GROW(v->req, v->nreq, v->capreq, 64) != 0)
    return;
  v->req[v->nreq++] = *q;
}

static int sess_cmp(const void *a, const void *b)
{
  uint64_t x = ((const view_sess_t *)a)->s->id;
  uint64_t y = ((const view_sess_t *)b)->s->id;

  return x < y ? -1 : x > y;
}

static void ctr_add(report_ctr_t *a, const report_ctr_t *b)
{
  a->launches += b->launches;
  a->busy_ns += b->busy_ns;
  a->h2d += b->h2d;
  a->d2h += b->d2h;
  a->faults += b->faults;
}

static int view_build(const job_t *j, const report_set_t *set, view_t *v)
{
  uint32_t total = 0, k = 0;

  memset(v, 0, sizeof(*v));
  v->d = j->d;
  v->uid = j->uid;
  v->admin = j->admin;
  v->truncated = set->truncated;
  for (uint32_t r = 0; r < set->n; r++)
    total += set->r[r]->nsess;
  if (total && (v->sess = calloc(total, sizeof(*v->sess))) == NULL)
    return HIPD_ENOMEM;
  for (uint32_t r = 0; r < set->n; r++) {
    const report_t *rp = set->r[r];
    for (uint32_t i = 0; i < rp->nsess; i++) {
      const report_sess_t *s = &rp->sess[i];
      view_tenant_t *t = tenant_of(v, s->uid);
      v->sessions_all++;
      if (t != NULL)
        t->sessions++;
      for (uint32_t h = 0; h < s->nheld; h++) {
        int id = s->held[h].dev;
        v->dev[id].sessions++;
        if (t != NULL) {
          t->buffers[id] += s->held[h].buffers;
          t->held[id] += s->held[h].bytes;
          if ((uint32_t)id + 1 > t->ndev)
            t->ndev = (uint32_t)id + 1;
        }
      }
      if (admin_view_visible(v, s->uid)) {
        v->sess[k].s = s;
        v->sess[k++].of = rp;
      }
    }
    for (uint32_t i = 0; i < rp->ndev; i++) {
      const report_dev_t *d = &rp->dev[i];
      view_dev_t *vd = &v->dev[d->id];
      if (!vd->info) {
        vd->info = 1;
        memcpy(vd->d.name, d->name, sizeof(vd->d.name));
        memcpy(vd->d.kind, d->kind, sizeof(vd->d.kind));
        vd->d.mem_total = d->mem_total;
      }
      vd->present = 1;
      vd->d.id = d->id;
      vd->d.buffers += d->buffers;
      vd->d.held += d->held;
      vd->d.lost |= d->lost;
      ctr_add(&vd->d.c, &d->c);
    }
    for (uint32_t i = 0; i < rp->nuids; i++) {
      const report_uid_t *u = &rp->uids[i];
      view_tenant_t *t = tenant_of(v, u->uid);
      if (t == NULL)
        continue;
      t->quota += u->quota;
      t->faults += u->faults;
      for (uint32_t x = 0; x < u->ndev; x++)
        ctr_add(&t->c[x], &u->dev[x]);
      if (u->ndev > t->ndev)
        t->ndev = u->ndev;
    }
    for (uint32_t i = 0; i < rp->nreq; i++)
      view_req_add(v, &rp->req[i]);
  }
  v->nsess = k;
  if (k > 1)
    qsort(v->sess, k, sizeof(*v->sess), sess_cmp);
  /* One id, one session: the listener keeps only the sessions it handed
   * each worker, so a second is a bug; listed once all the same. */
  if (k > 1) {
    uint32_t o = 1;
    for (uint32_t i = 1; i < k; i++)
      if (v->sess[i].s->id != v->sess[o - 1].s->id)
        v->sess[o++] = v->sess[i];
    v->nsess = o;
  }
  for (int i = 0; i < REPORT_MAX_DEVICES; i++) {
    const report_ctr_t *f = &admin_state.fold_dev[i];
    if (f->launches || f->busy_ns || f->h2d || f->d2h || f->faults) {
      v->dev[i].present = 1;
      v->dev[i].d.id = i;
      ctr_add(&v->dev[i].d.c, f);
    }
    if (v->dev[i].present)
      v->ndev = i + 1;
  }
  for (uint32_t i = 0; i < admin_state.nfold_req; i++)
    view_req_add(v, &admin_state.fold_req[i]);
  return 0;
}

static void view_free(view_t *v)
{
  free(v->sess);
  free(v->ten);
  free(v->req);
}

/* ----------------------------------------------------------------- packing */

static void pack_list(const view_t *v, msgpack_packer *pk)
{
  msgpack_pack_array(pk, v->nsess);
  for (uint32_t i = 0; i < v->nsess; i++) {
    const report_sess_t *s = v->sess[i].s;
    const report_t *r = v->sess[i].of;
    msgpack_packer *devs;
    pack_map_t m;
    char user[64];
    admin_user_name(v->d, s->uid, user, sizeof(user));
    pack_map_begin(&m, pk);
    pack_kv_u64(&m, "id", s->id);
    pack_kv_i64(&m, "pid", s->pid);
    pack_kv_u64(&m, "uid", s->uid);
    pack_kv_u64(&m, "gid", s->gid);
    pack_kv_str(&m, "user", user);
    pack_kv_str(&m, "client", s->client);
    pack_kv_str(&m, "tenant", r != NULL ? r->tenant : "");
    pack_kv_i64(&m, "worker_pid", r != NULL ? r->worker_pid : 0);
    pack_kv_u64(&m, "age_ms", s->age_ms);
    pack_kv_u64(&m, "requests", s->requests);
    pack_kv_u64(&m, "errors", s->errors);
    pack_kv_u64(&m, "streams", s->streams);
    pack_kv_u64(&m, "events", s->events);
    pack_kv_u64(&m, "kernels_loaded", s->kernels_loaded);
    pack_kv_u64(&m, "kernels_launched", s->launches);
    pack_kv_u64(&m, "busy_ns", s->busy_ns);
    pack_kv_u64(&m, "bytes_h2d", s->h2d);
    pack_kv_u64(&m, "bytes_d2h", s->d2h);
    devs = pack_key(&m, "devices");
    msgpack_pack_array(devs, s->nheld);
    for (uint32_t h = 0; h < s->nheld; h++) {
      pack_map_t dm;
      pack_map_begin(&dm, devs);
      pack_kv_i64(&dm, "device", s->held[h].dev);
      pack_kv_u64(&dm, "buffers", s->held[h].buffers);
      pack_kv_u64(&dm, "bytes", s->held[h].bytes);
      pack_map_end(&dm);
    }
    pack_map_end(&m);
  }
}

static void pack_stats(const job_t *j, const report_set_t *set, const view_t *v,
                       msgpack_packer *pk)
{
  daemon_t *d = j->d;
  cache_stats_t cs;
  compile_pool_stats_t ps;
  msgpack_packer *devs;
  pack_map_t m, sub;
  uint32_t ndev = 0;

  cache_get_stats(&cs);
  compile_pool_get_stats(&ps);
  pack_map_begin(&m, pk);
  pack_kv_u64(&m, "uptime_ms", uv_now(d->loop) - d->start_ms);
  /* A process left sessions out of its report (the wire's limits):
   * sessions and per-session sums are short. */
  pack_kv_bool(&m, "truncated", v->truncated != 0);
  pack_kv_u64(&m, "sessions", v->nsess);
  pack_kv_u64(&m, "sessions_total", d->sessions_total);
  pack_kv_u64(&m, "tenants",
              d->role == ROLE_LISTENER
                  ? (uint64_t)set->n - set->exited + set->missing
                  : 0);
  pack_kv_str(&m, "isolation", admin_isolation_name(d));
  for (int i = 0; i < v->ndev; i++)
    ndev += v->dev[i].present;
  devs = pack_key(&m, "devices");
  msgpack_pack_array(devs, ndev);
  for (int i = 0; i < v->ndev; i++) {
    const view_dev_t *vd = &v->dev[i];
    if (!vd->present)
      continue;
    pack_map_begin(&sub, devs);
    pack_kv_i64(&sub, "device", i);
    pack_kv_str(&sub, "name", vd->d.name);
    pack_kv_str(&sub, "kind", vd->info ? vd->d.kind : "");
    pack_kv_bool(&sub, "lost", vd->d.lost != 0);
    pack_kv_u64(&sub, "mem_total", vd->d.mem_total);
    pack_kv_u64(&sub, "mem_free", 0);
    pack_kv_u64(&sub, "mem_held", vd->d.held);
    pack_kv_u64(&sub, "buffers", vd->d.buffers);
    pack_kv_u64(&sub, "sessions", vd->sessions);
    pack_kv_u64(&sub, "kernels_launched", vd->d.c.launches);
    pack_kv_u64(&sub, "busy_ns", vd->d.c.busy_ns);
    pack_kv_u64(&sub, "bytes_h2d", vd->d.c.h2d);
    pack_kv_u64(&sub, "bytes_d2h", vd->d.c.d2h);
    pack_kv_u64(&sub, "faults", vd->d.c.faults);
    pack_map_end(&sub);
  }
  pack_map_begin(&sub, pack_key(&m, "cache"));
  pack_kv_u64(&sub, "entries", cs.entries);
  pack_kv_u64(&sub, "bytes", cs.bytes);
  pack_kv_u64(&sub, "hits", cs.hits_memory + cs.hits_disk + cs.waits);
  pack_kv_u64(&sub, "misses", cs.misses);
  pack_map_end(&sub);
  pack_map_begin(&sub, pack_key(&m, "compiles"));
  pack_kv_u64(&sub, "done", ps.compiles);
  pack_kv_u64(&sub, "failed", cs.compile_failures);
  pack_kv_u64(&sub, "running", ps.busy);
  pack_kv_u64(&sub, "queued", ps.queued);
  pack_map_end(&sub);
  pack_map_end(&m);
}

/* -------------------------------------------------------------- answering */

static void cache_entry_cb(void *ctx, const cache_key_t *key, uint64_t bytes,
                           uint64_t atime)
{
  msgpack_packer *pk = ctx;
  char hex[2 * CACHE_KEY_SIZE + 1];
  pack_map_t m;

  cache_key_hex(key, hex);
  /* No target: the cache keeps hashes, and what an entry was compiled
   * for is folded into its key, not kept beside it. */
  pack_map_begin(&m, pk);
  pack_kv_str(&m, "key", hex);
  pack_kv_u64(&m, "bytes", bytes);
  pack_kv_u64(&m, "atime", atime);
  pack_map_end(&m);
}

static void count_cb(void *ctx, const cache_key_t *key, uint64_t bytes,
                     uint64_t atime)
{
  (void)key;
  (void)bytes;
  (void)atime;
  (*(uint32_t *)ctx)++;
}

static void answer(job_t *j, int status, const char *msg, const char *res,
                   size_t len)
{
  if (j->text_done != NULL) {
    char *t = NULL;
    if (status == 0 && (t = malloc(len + 1)) != NULL) {
      memcpy(t, res, len);
      t[len] = '\0';
    }
    j->text_done(j->ctx, t != NULL ? 0 : (status ? status : HIPD_ENOMEM), t,
                 t != NULL ? len : 0);
  } else {
    j->done(j->ctx, status, msg, res, len);
  }
  free(j);
}

/* Answer @p j with EPERM: @p what needs an admin (root or the admin
 * group). */
static void refuse_non_admin(daemon_t *d, job_t *j, const char *what)
{
  char msg[192];

  if (d->cfg.admin_group != NULL && d->cfg.admin_group[0] != '\0')
    snprintf(msg, sizeof(msg), "%s needs root or group %s", what,
             d->cfg.admin_group);
  else
    snprintf(msg, sizeof(msg), "%s needs root", what);
  answer(j, HIPD_EPERM, msg, NULL, 0);
}

static void answer_packed(job_t *j, msgpack_sbuffer *sb)
{
  answer(j, 0, NULL, sb->data, sb->size);
  msgpack_sbuffer_destroy(sb);
}

static void answer_true(job_t *j)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_true(&pk);
  answer_packed(j, &sb);
}

int admin_kill_local(daemon_t *d, uint64_t id, const char *who, uint64_t self)
{
  for (list_node_t *n = d->sessions.next; n != &d->sessions; n = n->next) {
    session_t *s = list_entry(n, session_t, node);
    if (s->id != id || s->closing)
      continue;
    if (id == self) {
      /* Its answer is written first, then it closes. */
      snprintf(s->kill_why, sizeof(s->kill_why), "%s", who);
      s->close_flushed = 1;
    } else {
      session_close_told(s, HIPD_ECANCELED, who);
    }
    return 0;
  }
  return HIPD_ENOENT;
}

static void killed_cb(void *ctx, int status)
{
  job_t *j = ctx;
  char msg[64];

  if (status == 0) {
    answer_true(j);
    return;
  }
  snprintf(msg, sizeof(msg), "no session %llu", (unsigned long long)j->kill_id);
  answer(j, HIPD_ENOENT, msg, NULL, 0);
}

static void gathered(void *ctx, report_set_t *set)
{
  job_t *j = ctx;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  view_t v;
  strbuf_t b = {0};
  char *text;
  size_t len;

  admin_state.scrape_errors += set->missing;
  if (view_build(j, set, &v) != 0) {
    view_free(&v);
    answer(j, HIPD_ENOMEM, "out of memory", NULL, 0);
    return;
  }
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  switch (j->op) {
  case ADMIN_SESSION_LIST:
    pack_list(&v, &pk);
    break;
  case ADMIN_DAEMON_STATS:
    pack_stats(j, set, &v, &pk);
    break;
  case ADMIN_METRICS:
    admin_metrics_render(&v, set, admin_state.scrape_errors, &b);
    if ((text = strbuf_take(&b, &len)) == NULL) {
      view_free(&v);
      msgpack_sbuffer_destroy(&sb);
      answer(j, HIPD_ENOMEM, "out of memory", NULL, 0);
      return;
    }
    if (j->text_done != NULL) {
      view_free(&v);
      msgpack_sbuffer_destroy(&sb);
      j->text_done(j->ctx, 0, text, len);
      free(j);
      return;
    }
    msgpack_pack_str(&pk, len);
    msgpack_pack_str_body(&pk, text, len);
    free(text);
    break;
  case ADMIN_SESSION_KILL: {
    const report_t *owner = NULL;
    int found = 0;
    for (uint32_t i = 0; i < v.nsess && !found; i++)
      if (v.sess[i].s->id == j->kill_id) {
        found = 1;
        owner = v.sess[i].of;
      }
    view_free(&v);
    msgpack_sbuffer_destroy(&sb);
    if (!found) {
      killed_cb(j, HIPD_ENOENT);
      return;
    }
    log_info(0, "session.kill: session %llu, by %s",
             (unsigned long long)j->kill_id, j->who);
    {
      char who[160];
      snprintf(who, sizeof(who), "killed by %s", j->who);
      if (owner->owner != 0 && admin_state.listener)
        admin_state.l.kill(j->d, owner->owner, j->kill_id, who, killed_cb, j);
      else
        killed_cb(j, admin_kill_local(j->d, j->kill_id, who, j->sid));
    }
    return;
  }
  default:
    break;
  }
  view_free(&v);
  answer_packed(j, &sb);
}

static void gather_local(job_t *j)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  report_t *r;
  report_set_t set = {0};

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  stats_pack_report(j->d, &pk);
  r = report_decode_bytes(sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  if (r == NULL) {
    answer(j, HIPD_EINTERNAL, "this process's report does not decode", NULL, 0);
    return;
  }
  snprintf(r->tenant, sizeof(r->tenant), "none");
  set.r = &r;
  set.n = 1;
  set.truncated = r->truncated != 0;
  gathered(j, &set);
  report_free(r);
}

static void gather(job_t *j)
{
  if (admin_state.listener && j->d->role == ROLE_LISTENER)
    admin_state.l.gather(j->d, gathered, j);
  else
    gather_local(j);
}

static void run_job(job_t *j)
{
  daemon_t *d = j->d;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  switch (j->op) {
  case ADMIN_LOG_LEVEL: {
    int lvl = log_get_level();
    if (j->level >= 0) {
      if (!j->admin) {
        refuse_non_admin(d, j, "setting the level");
        return;
      }
      lvl = j->level;
      log_set_level(lvl);
      log_info(0, "log level set to %s by %s", level_names[lvl], j->who);
      if (admin_state.listener && d->role == ROLE_LISTENER &&
          admin_state.l.log_level != NULL)
        admin_state.l.log_level(d, lvl);
    }
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_cstr(&pk, level_names[lvl]);
    answer_packed(j, &sb);
    return;
  }
  case ADMIN_CACHE_LIST: {
    uint32_t n = 0;
    /* Admins only: the keys are unkeyed hashes of source, target and
     * options, so a tenant who guesses a source could learn whether (and,
     * from atime, when) another tenant compiled it. */
    if (!j->admin) {
      refuse_non_admin(d, j, "listing the shared kernel cache");
      return;
    }
    cache_list(count_cb, &n);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, n);
    cache_list(cache_entry_cb, &pk);
    answer_packed(j, &sb);
    return;
  }
  default:
    gather(j);
  }
}

void admin_request(daemon_t *d, uid_t uid, uint64_t sid, const admin_args_t *a,
                   admin_done_fn done, void *ctx)
{
  const char *msg;
  job_t *j;

  /* Checked where they were read (methods/admin.c, or the listener's
   * admin_args_unpack()), and once more here. */
  if (admin_args_check(a, &msg) != 0) {
    done(ctx, HIPD_EPARAMS, msg, NULL, 0);
    return;
  }
  if ((j = calloc(1, sizeof(*j))) == NULL) {
    done(ctx, HIPD_ENOMEM, "out of memory", NULL, 0);
    return;
  }
  j->d = d;
  j->uid = uid;
  j->sid = sid;
  j->op = a->op;
  j->kill_id = a->id;
  j->level = a->op == ADMIN_LOG_LEVEL ? a->level : -1;
  j->done = done;
  j->ctx = ctx;
  admin_uid_who(d, uid, j->who, sizeof(j->who));
  if (admin_state.forward != NULL && d->role == ROLE_WORKER) {
    /* A worker: its own session it closes itself (the caller sees it);
     * everything else is the listener's to decide. */
    if (a->op == ADMIN_SESSION_KILL && sid != 0 && j->kill_id == sid) {
      char who[160];
      snprintf(who, sizeof(who), "killed by %s", j->who);
      killed_cb(j, admin_kill_local(d, sid, who, sid));
      return;
    }
    free(j);
    admin_state.forward(d, a, done, ctx);
    return;
  }
  j->admin = admin_is_admin(d, uid);
  log_debug(0, "admin: %s for %s%s (session %llu)", admin_op_name(a->op),
            j->who, j->admin ? ", an admin" : "", (unsigned long long)sid);
  run_job(j);
}

void admin_metrics_text(daemon_t *d, admin_text_fn done, void *ctx)
{
  job_t *j = calloc(1, sizeof(*j));

  if (j == NULL) {
    done(ctx, HIPD_ENOMEM, NULL, 0);
    return;
  }
  j->d = d;
  j->uid = 0;
  j->admin = 1;
  j->op = ADMIN_METRICS;
  j->text_done = done;
  j->ctx = ctx;
  snprintf(j->who, sizeof(j->who), "the metrics listener");
  gather(j);
}
