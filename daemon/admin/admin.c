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
#include "device.h"
#include "grants.h"
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
    [ADMIN_CACHE_LIST] = "cache.list",
    [ADMIN_GRANT_ADD] = "grant.add",
    [ADMIN_GRANT_REVOKE] = "grant.revoke",
    [ADMIN_GRANT_LIST] = "grant.list"};
static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* The request being answered. */
typedef struct job {
  daemon_t *d;
  uid_t uid;
  uint64_t sid;
  int admin;
  admin_op_t op;
  uint64_t kill_id;
  int level;         /* log.level: the level to set, -1: none */
  admin_args_t args; /* grant.*: the request's values */
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
  if (memchr(a->user, '\0', sizeof(a->user)) == NULL ||
      memchr(a->label, '\0', sizeof(a->label)) == NULL) {
    *msg = "not an admin request";
    return HIPD_EPARAMS;
  }
  if (a->label[0] != '\0' && !grants_label_ok(a->label, strlen(a->label))) {
    *msg = "the label must be 1 to 63 letters, digits or ._:@+-";
    return HIPD_EPARAMS;
  }
  if (a->op == ADMIN_GRANT_ADD && a->user[0] == '\0') {
    *msg = "param 0 (user) must name a user or a uid";
    return HIPD_EPARAMS;
  }
  if (a->op == ADMIN_GRANT_ADD && a->devmask == 0) {
    *msg = "param 1 (devices) must name at least one device";
    return HIPD_EPARAMS;
  }
  if (a->op == ADMIN_GRANT_REVOKE && a->user[0] == '\0' &&
      a->label[0] == '\0') {
    *msg = "give param 0 (label) or param 1 (user): which grants to revoke";
    return HIPD_EPARAMS;
  }
  return 0;
}

#define DEVICES_MSG                                                            \
  "param 1 (devices) must be an array of device ids (unsigned integers "       \
  "below 64)"

int admin_devices_mask(const msgpack_object *o, uint64_t *mask,
                       const char **msg)
{
  *mask = 0;
  if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY ||
      o->via.array.size > GRANT_DEVICES) {
    *msg = DEVICES_MSG;
    return HIPD_EPARAMS;
  }
  for (uint32_t i = 0; i < o->via.array.size; i++) {
    uint64_t id;
    if (proto_obj_uint(&o->via.array.ptr[i], GRANT_DEVICES - 1, &id) != 0) {
      *msg = DEVICES_MSG;
      return HIPD_EPARAMS;
    }
    *mask |= (uint64_t)1 << id;
  }
  return 0;
}

/* A str param @p o (nil or absent: "") into @p out (@p size bytes). */
static int str_param(const msgpack_object *o, char *out, size_t size)
{
  out[0] = '\0';
  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= size ||
      memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL)
    return HIPD_EPARAMS;
  memcpy(out, o->via.str.ptr, o->via.str.size);
  out[o->via.str.size] = '\0';
  return 0;
}

static void pack_devices(msgpack_packer *pk, uint64_t mask)
{
  msgpack_pack_array(pk, (uint32_t)__builtin_popcountll(mask));
  for (int i = 0; i < GRANT_DEVICES; i++)
    if ((mask >> i) & 1)
      msgpack_pack_uint32(pk, (uint32_t)i);
}

static void pack_str_or_nil(msgpack_packer *pk, const char *s)
{
  if (s[0] == '\0')
    msgpack_pack_nil(pk);
  else
    proto_pack_cstr(pk, s);
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
  } else if (a->op == ADMIN_GRANT_ADD) {
    msgpack_pack_array(pk, 4);
    proto_pack_cstr(pk, a->user);
    pack_devices(pk, a->devmask);
    msgpack_pack_uint64(pk, a->quota);
    pack_str_or_nil(pk, a->label);
  } else if (a->op == ADMIN_GRANT_REVOKE) {
    msgpack_pack_array(pk, 2);
    pack_str_or_nil(pk, a->label);
    pack_str_or_nil(pk, a->user);
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
  if (o == ADMIN_SESSION_KILL   ? n != 1
      : o == ADMIN_LOG_LEVEL    ? n > 1
      : o == ADMIN_GRANT_ADD    ? n != 4
      : o == ADMIN_GRANT_REVOKE ? n != 2
                                : n != 0) {
    *msg = o == ADMIN_SESSION_KILL   ? "takes 1 params (id)"
           : o == ADMIN_GRANT_ADD    ? "takes 4 params (user, devices, quota, "
                                       "label)"
           : o == ADMIN_GRANT_REVOKE ? "takes 2 params (label, user)"
                                     : "takes no params";
    return HIPD_EPARAMS;
  }
  if (o == ADMIN_GRANT_ADD) {
    const msgpack_object *p = params->via.array.ptr;
    if (str_param(&p[0], out->user, sizeof(out->user)) != 0 ||
        admin_devices_mask(&p[1], &out->devmask, msg) != 0 ||
        proto_obj_uint(&p[2], UINT64_MAX, &out->quota) != 0 ||
        str_param(&p[3], out->label, sizeof(out->label)) != 0) {
      *msg = "malformed grant.add";
      return HIPD_EPARAMS;
    }
  }
  if (o == ADMIN_GRANT_REVOKE) {
    const msgpack_object *p = params->via.array.ptr;
    if (str_param(&p[0], out->label, sizeof(out->label)) != 0 ||
        str_param(&p[1], out->user, sizeof(out->user)) != 0) {
      *msg = "malformed grant.revoke";
      return HIPD_EPARAMS;
    }
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

void admin_fold(daemon_t *d, const report_t *r)
{
  if (r == NULL)
    return;
  /* What a worker's sessions did under a grant of its uid stays with the
   * grant (its held bytes and sessions went with the worker). */
  for (uint32_t i = 0; i < r->ngrants; i++) {
    const report_grant_t *q = &r->grants[i];
    grant_t *g = grants_find(d, q->serial);
    if (g == NULL || (r->uid >= 0 && (uint64_t)r->uid != g->uid))
      continue;
    g->u.launches += q->launches;
    g->u.busy_ns += q->busy_ns;
    g->u.h2d += q->h2d;
    g->u.d2h += q->d2h;
    if (q->peak > g->u.peak)
      g->u.peak = q->peak;
  }
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

/* The grants @p v's caller may see, with their usage: in the listener
 * what its exited workers left (folded), plus each report's record of
 * the grant where the report is of the grant's uid (a worker's word counts
 * only for its own uid's grants); in one process its report alone. */
static int view_grants(daemon_t *d, const report_set_t *set, view_t *v)
{
  const grants_t *t = &d->grants;

  if (t->n > 0 && (v->gr = calloc(t->n, sizeof(*v->gr))) == NULL)
    return HIPD_ENOMEM;
  for (uint32_t i = 0; i < t->n; i++) {
    const grant_t *g = &t->g[i];
    view_grant_t *vg;
    uint64_t live_peak = 0;
    if (!admin_view_visible(v, g->uid))
      continue;
    vg = &v->gr[v->ngr++];
    vg->g = g;
    if (d->role == ROLE_LISTENER) {
      vg->u = g->u;
      vg->u.held = vg->u.sessions = 0;
    }
    for (uint32_t r = 0; r < set->n; r++) {
      const report_t *rp = set->r[r];
      if (rp->uid >= 0 && (uint64_t)rp->uid != g->uid)
        continue;
      for (uint32_t k = 0; k < rp->ngrants; k++) {
        const report_grant_t *q = &rp->grants[k];
        if (q->serial != g->serial)
          continue;
        vg->u.launches += q->launches;
        vg->u.busy_ns += q->busy_ns;
        vg->u.h2d += q->h2d;
        vg->u.d2h += q->d2h;
        vg->u.held += q->held;
        vg->u.sessions += q->sessions;
        live_peak += q->peak;
      }
    }
    /* Workers' peaks may not have been at once: their sum bounds it. */
    if (live_peak > vg->u.peak)
      vg->u.peak = live_peak;
  }
  return 0;
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
      if (u->mps_threads > t->mps_threads)
        t->mps_threads = u->mps_threads;
      if (u->mps_mem > t->mps_mem)
        t->mps_mem = u->mps_mem;
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
  return view_grants(j->d, set, v);
}

static void view_free(view_t *v)
{
  free(v->sess);
  free(v->ten);
  free(v->req);
  free(v->gr);
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
    {
      const grant_t *g = grants_find(v->d, s->grant);
      pack_kv_str(&m, "grant", g != NULL && g->uid == s->uid ? g->label : "");
    }
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

/* One grant as a map (grant.add, grant.list, grant.revoke). */
static void pack_grant(daemon_t *d, msgpack_packer *pk, const grant_t *g,
                       const grant_usage_t *u)
{
  pack_map_t m;
  char user[64];

  admin_user_name(d, g->uid, user, sizeof(user));
  pack_map_begin(&m, pk);
  pack_kv_str(&m, "label", g->label);
  pack_kv_u64(&m, "uid", g->uid);
  pack_kv_str(&m, "user", user);
  pack_devices(pack_key(&m, "devices"), g->devmask);
  pack_kv_u64(&m, "quota", g->quota);
  pack_kv_u64(&m, "since", g->since);
  pack_kv_u64(&m, "sessions", u->sessions);
  pack_kv_u64(&m, "mem_held", u->held);
  pack_kv_u64(&m, "mem_peak", u->peak);
  pack_kv_u64(&m, "kernels_launched", u->launches);
  pack_kv_u64(&m, "busy_ns", u->busy_ns);
  pack_kv_u64(&m, "bytes_h2d", u->h2d);
  pack_kv_u64(&m, "bytes_d2h", u->d2h);
  pack_map_end(&m);
}

/* Does grant @p g match grant.revoke's selector (label, uid)? */
static int revoke_selects(const job_t *j, const grant_t *g, int64_t uid)
{
  return (j->args.label[0] == '\0' || strcmp(g->label, j->args.label) == 0) &&
         (uid < 0 || g->uid == (uid_t)uid);
}

/* grant.*'s user: a uid (digits) or a user name. @return the uid, or -1
 * with @p msg saying why. */
static int64_t user_uid(const char *user, char *msg, size_t msglen)
{
  account_t a;
  char *end;
  unsigned long v;

  if (user[0] >= '0' && user[0] <= '9') {
    v = strtoul(user, &end, 10);
    if (*end == '\0' && v < (uint32_t)-1)
      return (int64_t)v;
    snprintf(msg, msglen, "'%s' is not a uid", user);
    return -1;
  }
  if (account_by_name(user, &a, NULL) != 0) {
    snprintf(msg, msglen, "no user '%s'", user);
    return -1;
  }
  return (int64_t)a.uid;
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

/* The grants of @p uid changed (added, or @p old's @p nold removed): the
 * sessions under those removed are closed, here or by the uid's workers,
 * with @p why after the reason. */
static void grants_changed(daemon_t *d, uid_t uid, const grant_t *old,
                           uint32_t nold, const char *why, int64_t by)
{
  if (admin_state.listener && d->role == ROLE_LISTENER) {
    if (admin_state.l.grants != NULL)
      admin_state.l.grants(d, uid, why, by);
  } else {
    grants_close_revoked(d, old, nold, why, by);
  }
}

/* grant.revoke, with the view @p v (usage as of now): pack the grants it
 * selects, with their usage, and remove them from the table; *@p out
 * gets them (malloc'd, *@p nout of them) for revoked_close(), once the
 * answer is on its way. */
static void revoke_grants(job_t *j, const view_t *v, msgpack_packer *pk,
                          grant_t **out, uint32_t *nout)
{
  daemon_t *d = j->d;
  int64_t uid = (int64_t)j->kill_id - 1; /* run_job's: -1 none */
  grant_t *old;
  uint32_t n = 0, k = 0;

  for (uint32_t i = 0; i < v->ngr; i++)
    n += revoke_selects(j, v->gr[i].g, uid);
  old = n > 0 ? calloc(n, sizeof(*old)) : NULL;
  msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < v->ngr; i++)
    if (revoke_selects(j, v->gr[i].g, uid)) {
      pack_grant(d, pk, v->gr[i].g, &v->gr[i].u);
      if (old != NULL) {
        old[k] = *v->gr[i].g;
        old[k++].u = v->gr[i].u; /* for the log line */
      }
    }
  /* The view's pointers go stale from here. */
  for (uint32_t i = 0; i < k; i++) {
    log_info(0,
             "grant.revoke: grant '%s' of uid %u (%u session%s under it) "
             "revoked by %s",
             old[i].label, (unsigned)old[i].uid, (unsigned)old[i].u.sessions,
             old[i].u.sessions == 1 ? "" : "s", j->who);
    grants_remove(d, old[i].serial);
  }
  *out = old;
  *nout = k;
}

/* After grant.revoke's answer (so that a caller under a grant it revoked
 * gets it before its session closes, and in worker mode the answer goes
 * down the worker's channel before the grants): the sessions under the
 * @p n grants @p old are closed, @p why after the reason. Frees @p old. */
static void revoked_close(daemon_t *d, grant_t *old, uint32_t n,
                          const char *why, int64_t by)
{
  for (uint32_t i = 0; i < n; i++) {
    int seen = 0;
    for (uint32_t x = 0; x < i; x++)
      seen |= old[x].uid == old[i].uid;
    if (!seen)
      grants_changed(d, old[i].uid, old, n, why, by);
  }
  free(old);
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
  case ADMIN_GRANT_LIST:
    msgpack_pack_array(&pk, v.ngr);
    for (uint32_t i = 0; i < v.ngr; i++)
      pack_grant(j->d, &pk, v.gr[i].g, &v.gr[i].u);
    break;
  case ADMIN_GRANT_REVOKE: {
    int64_t uid = (int64_t)j->kill_id - 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < v.ngr; i++)
      n += revoke_selects(j, v.gr[i].g, uid);
    if (n == 0) {
      /* Revoked by another request meanwhile. */
      view_free(&v);
      msgpack_sbuffer_destroy(&sb);
      answer(j, HIPD_ENOENT, "no such grant (any more)", NULL, 0);
      return;
    }
    {
      daemon_t *d = j->d;
      int64_t by = (int64_t)j->uid;
      grant_t *old = NULL;
      uint32_t nold = 0;
      char why[160];
      snprintf(why, sizeof(why), " (revoked by %s)", j->who);
      revoke_grants(j, &v, &pk, &old, &nold);
      view_free(&v);
      answer_packed(j, &sb); /* frees j */
      revoked_close(d, old, nold, why, by);
      return;
    }
  }
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

/* The devices this hipd serves (the listener: those its probe worker
 * found). */
static int served_devices(const daemon_t *d)
{
  return d->role == ROLE_LISTENER ? d->worker_devices : devices_count();
}

static void grant_add(job_t *j)
{
  daemon_t *d = j->d;
  const admin_args_t *a = &j->args;
  int ndev = served_devices(d);
  const grant_t *g;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  grant_usage_t none = {0};
  hipd_err_t err;
  char msg[192];
  int64_t uid;

  if (!j->admin) {
    refuse_non_admin(d, j, "granting access");
    return;
  }
  if ((uid = user_uid(a->user, msg, sizeof(msg))) < 0) {
    answer(j, HIPD_ENOENT, msg, NULL, 0);
    return;
  }
  if (ndev < GRANT_DEVICES && (a->devmask >> ndev) != 0) {
    snprintf(msg, sizeof(msg),
             "device %d: this daemon serves %d device%s (ids 0 to %d)",
             __builtin_ctzll(a->devmask >> ndev) + ndev, ndev,
             ndev == 1 ? "" : "s", ndev - 1);
    answer(j, HIPD_ENODEV, msg, NULL, 0);
    return;
  }
  if (grants_add(d, (uid_t)uid, a->devmask, a->quota, a->label, &g, &err) !=
      0) {
    answer(j, err.code, err.msg, NULL, 0);
    return;
  }
  log_info(0,
           "grant.add: grant '%s' gives uid %u devices 0x%llx, quota %llu "
           "bytes, by %s",
           g->label, (unsigned)g->uid, (unsigned long long)g->devmask,
           (unsigned long long)g->quota, j->who);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  pack_grant(d, &pk, g, &none);
  grants_changed(d, g->uid, NULL, 0, NULL, -1);
  answer_packed(j, &sb);
}

static void grant_revoke(job_t *j)
{
  daemon_t *d = j->d;
  const admin_args_t *a = &j->args;
  int64_t uid = -1;
  uint32_t n = 0;
  char msg[192];

  if (!j->admin) {
    refuse_non_admin(d, j, "revoking a grant");
    return;
  }
  if (a->user[0] != '\0' && (uid = user_uid(a->user, msg, sizeof(msg))) < 0) {
    answer(j, HIPD_ENOENT, msg, NULL, 0);
    return;
  }
  j->kill_id = (uint64_t)(uid + 1);
  for (uint32_t i = 0; i < d->grants.n; i++)
    n += revoke_selects(j, &d->grants.g[i], uid);
  if (n == 0) {
    if (a->label[0] != '\0' && uid >= 0)
      snprintf(msg, sizeof(msg), "no grant '%s' of user %s", a->label, a->user);
    else if (a->label[0] != '\0')
      snprintf(msg, sizeof(msg), "no grant '%s'", a->label);
    else
      snprintf(msg, sizeof(msg), "user %s has no grant", a->user);
    answer(j, HIPD_ENOENT, msg, NULL, 0);
    return;
  }
  /* The usage first (the reports), then the grants go. */
  gather(j);
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
  case ADMIN_GRANT_ADD:
    grant_add(j);
    return;
  case ADMIN_GRANT_REVOKE:
    grant_revoke(j);
    return;
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
  j->args = *a;
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
