/* SPDX-License-Identifier: MIT */
/* daemon/admin/admin.c: admin requests, views and their answers
 * (admin.h). */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/admin.h"
#include "admin/prom.h"
#include "compile/compile_pool.h"
#include "hipd.h"
#include "kernels/cache.h"
#include "log.h"
#include "session.h"
#include "stats.h"

enum { OP_LIST, OP_KILL, OP_STATS, OP_METRICS, OP_LEVEL, OP_CACHE, NOPS };
static const char *const op_names[NOPS] = {"session.list", "session.kill",
                                           "daemon.stats", "metrics",
                                           "log.level",    "cache.list"};
static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* The request being answered. */
typedef struct job {
  daemon_t *d;
  uid_t uid;
  uint64_t sid;
  int admin;
  int op;
  uint64_t kill_id;
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
  /* --admin-group, resolved at start and at each reload */
  char group[256]; /* the name resolved, "" none */
  int group_ok;
  gid_t group_gid;
  /* Who is who, per uid: the loop does not wait for NSS each request. */
  struct who_cache {
    uid_t uid;
    int used, admin;
    uint64_t until_ms;
    char name[64];
  } who[64];
} A;

/* A cached name and admin bit lasts this long. */
#define WHO_CACHE_MS 60000

void admin_set_forward(admin_forward_fn fn)
{
  A.forward = fn;
}

void admin_set_listener(const admin_listener_t *l)
{
  A.l = *l;
  A.listener = 1;
}

int admin_is_op(const char *op, size_t len)
{
  for (int i = 0; i < NOPS; i++)
    if (strlen(op_names[i]) == len && memcmp(op_names[i], op, len) == 0)
      return 1;
  return 0;
}

static int op_of(const char *op, size_t len)
{
  for (int i = 0; i < NOPS; i++)
    if (strlen(op_names[i]) == len && memcmp(op_names[i], op, len) == 0)
      return i;
  return -1;
}

/* getpwuid_r / getgrnam_r with a buffer that grows on ERANGE (a big
 * group's member list does not fit 8 KiB). @return the malloc'd buffer
 * (the caller frees it) with *@p out set, or NULL. */
static char *pw_lookup(uid_t uid, struct passwd *pwb, struct passwd **out)
{
  size_t size = 4096;
  char *buf = NULL;
  int rc;

  *out = NULL;
  do {
    char *n = realloc(buf, size);
    if (n == NULL)
      break;
    buf = n;
    rc = getpwuid_r(uid, pwb, buf, size, out);
    size *= 2;
  } while (rc == ERANGE && size <= (1u << 22));
  if (*out == NULL) {
    free(buf);
    return NULL;
  }
  return buf;
}

static char *gr_lookup(const char *name, struct group *grb, struct group **out)
{
  size_t size = 8192;
  char *buf = NULL;
  int rc;

  *out = NULL;
  do {
    char *n = realloc(buf, size);
    if (n == NULL)
      break;
    buf = n;
    rc = getgrnam_r(name, grb, buf, size, out);
    size *= 2;
  } while (rc == ERANGE && size <= (1u << 24));
  if (*out == NULL) {
    free(buf);
    return NULL;
  }
  return buf;
}

void admin_configure(daemon_t *d)
{
  const char *g = d->cfg.admin_group != NULL ? d->cfg.admin_group : "";
  struct group grb, *gr = NULL;
  char *buf;

  memset(A.who, 0, sizeof(A.who)); /* the group may have changed */
  snprintf(A.group, sizeof(A.group), "%s", g);
  A.group_ok = 0;
  if (g[0] == '\0')
    return;
  if ((buf = gr_lookup(g, &grb, &gr)) == NULL) {
    log_warn(0,
             "--admin-group %s: no such group: only root is an admin until "
             "it exists and hipd is reloaded",
             g);
    return;
  }
  A.group_gid = gr->gr_gid;
  A.group_ok = 1;
  free(buf);
}

/* The cached record of @p uid, filled now if it is missing or old. */
static struct who_cache *who_of(daemon_t *d, uid_t uid)
{
  uint64_t now = uv_now(d->loop);
  struct who_cache *c = NULL, *oldest = &A.who[0];
  struct passwd pwb, *pw = NULL;
  char *buf;

  if (strcmp(A.group, d->cfg.admin_group != NULL ? d->cfg.admin_group : "") !=
      0)
    admin_configure(d); /* the option changed without admin_configure() */
  for (int i = 0; i < (int)(sizeof(A.who) / sizeof(A.who[0])); i++) {
    if (A.who[i].used && A.who[i].uid == uid) {
      c = &A.who[i];
      break;
    }
    if (!A.who[i].used || A.who[i].until_ms < oldest->until_ms)
      oldest = &A.who[i];
  }
  if (c != NULL && now < c->until_ms)
    return c;
  if (c == NULL)
    c = oldest;
  memset(c, 0, sizeof(*c));
  c->used = 1;
  c->uid = uid;
  c->until_ms = now + WHO_CACHE_MS;
  c->admin = uid == 0;
  if ((buf = pw_lookup(uid, &pwb, &pw)) == NULL)
    return c;
  snprintf(c->name, sizeof(c->name), "%s", pw->pw_name);
  if (!c->admin && A.group_ok) {
    int n = 64;
    gid_t *groups = NULL;
    for (int tries = 0; tries < 8; tries++) {
      gid_t *g = realloc(groups, (size_t)n * sizeof(*g));
      int want = n;
      if (g == NULL)
        break;
      groups = g;
      if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &want) >= 0) {
        n = want;
        for (int i = 0; i < n; i++)
          if (groups[i] == A.group_gid)
            c->admin = 1;
        break;
      }
      n = want > n ? want : n * 2;
    }
    free(groups);
  }
  free(buf);
  return c;
}

int admin_is_admin(daemon_t *d, uid_t uid)
{
  if (uid == 0)
    return 1;
  if (d->cfg.admin_group == NULL || d->cfg.admin_group[0] == '\0')
    return 0;
  return who_of(d, uid)->admin;
}

/* "uid 0 (root)" */
static void uid_who(daemon_t *d, uid_t uid, char *out, size_t size)
{
  const char *name = who_of(d, uid)->name;

  if (name[0] != '\0')
    snprintf(out, size, "uid %u (%s)", (unsigned)uid, name);
  else
    snprintf(out, size, "uid %u", (unsigned)uid);
}

static void user_name(daemon_t *d, uint64_t uid, char *out, size_t size)
{
  out[0] = '\0';
  if (uid <= UINT32_MAX)
    snprintf(out, size, "%s", who_of(d, (uid_t)uid)->name);
}

/* ---------------------------------------------------------------- folding */

static void fold_req(const report_req_t *q)
{
  for (uint32_t i = 0; i < A.nfold_req; i++)
    if (A.fold_req[i].code == q->code &&
        strcmp(A.fold_req[i].method, q->method) == 0) {
      A.fold_req[i].n += q->n;
      return;
    }
  if (A.nfold_req == A.fold_cap) {
    uint32_t cap = A.fold_cap ? A.fold_cap * 2 : 64;
    report_req_t *n = realloc(A.fold_req, cap * sizeof(*n));
    if (n == NULL)
      return;
    A.fold_req = n;
    A.fold_cap = cap;
  }
  A.fold_req[A.nfold_req++] = *q;
}

void admin_fold(const report_t *r)
{
  if (r == NULL)
    return;
  for (uint32_t i = 0; i < r->ndev; i++) {
    report_ctr_t *f = &A.fold_dev[r->dev[i].id];
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
  free(A.fold_req);
  A.fold_req = NULL;
  A.nfold_req = A.fold_cap = 0;
}

/* ------------------------------------------------------------------ views */

/* A merged view: what the caller may see. */
typedef struct view_dev {
  int present;       /* a report or a fold knows it */
  int info;          /* name, kind, total from a report */
  report_dev_t d;    /* summed */
  uint64_t sessions; /* visible or not: node-wide */
} view_dev_t;

typedef struct view_tenant {
  uint64_t uid;
  uint64_t sessions, quota, faults;
  uint64_t buffers[REPORT_MAX_DEVICES], held[REPORT_MAX_DEVICES];
  report_ctr_t c[REPORT_MAX_DEVICES];
  uint32_t ndev;
} view_tenant_t;

typedef struct view_sess {
  const report_sess_t *s;
  const report_t *of; /* the report it came in */
} view_sess_t;

typedef struct view {
  daemon_t *d;
  view_sess_t *sess; /* visible, by id */
  uint32_t nsess;
  uint64_t sessions_all;
  view_dev_t dev[REPORT_MAX_DEVICES];
  int ndev;
  view_tenant_t *ten;
  uint32_t nten;
  uint32_t capten;
  report_req_t *req;
  uint32_t nreq, capreq;
  uint32_t last_ten;  /* tenant_of()'s last answer: a report's sessions
                         mostly share their uid */
  uint32_t truncated; /* reports that left sessions out */
} view_t;

static int visible(const job_t *j, uint64_t uid)
{
  return j->admin || uid == (uint64_t)j->uid;
}

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
  if (v->nten == v->capten) {
    uint32_t cap = v->capten ? v->capten * 2 : 8;
    if ((t = realloc(v->ten, cap * sizeof(*t))) == NULL)
      return NULL;
    v->ten = t;
    v->capten = cap;
  }
  v->last_ten = v->nten;
  t = &v->ten[v->nten++];
  memset(t, 0, sizeof(*t));
  t->uid = uid;
  return t;
}

static void view_req_add(view_t *v, const report_req_t *q)
{
  report_req_t *n;

  for (uint32_t i = 0; i < v->nreq; i++)
    if (v->req[i].code == q->code && strcmp(v->req[i].method, q->method) == 0) {
      v->req[i].n += q->n;
      return;
    }
  if (v->nreq == v->capreq) {
    uint32_t cap = v->capreq ? v->capreq * 2 : 64;
    if ((n = realloc(v->req, cap * sizeof(*n))) == NULL)
      return;
    v->req = n;
    v->capreq = cap;
  }
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
      if (visible(j, s->uid)) {
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
    const report_ctr_t *f = &A.fold_dev[i];
    if (f->launches || f->busy_ns || f->h2d || f->d2h || f->faults) {
      v->dev[i].present = 1;
      v->dev[i].d.id = i;
      ctr_add(&v->dev[i].d.c, f);
    }
    if (v->dev[i].present)
      v->ndev = i + 1;
  }
  for (uint32_t i = 0; i < A.nfold_req; i++)
    view_req_add(v, &A.fold_req[i]);
  return 0;
}

static void view_free(view_t *v)
{
  free(v->sess);
  free(v->ten);
  free(v->req);
}

/* ----------------------------------------------------------------- packing */

static void kv_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
  proto_pack_cstr(pk, k);
  msgpack_pack_uint64(pk, v);
}

static void kv_i64(msgpack_packer *pk, const char *k, int64_t v)
{
  proto_pack_cstr(pk, k);
  msgpack_pack_int64(pk, v);
}

static void kv_str(msgpack_packer *pk, const char *k, const char *v)
{
  proto_pack_cstr(pk, k);
  proto_pack_cstr(pk, v);
}

static void pack_list(const view_t *v, msgpack_packer *pk)
{
  msgpack_pack_array(pk, v->nsess);
  for (uint32_t i = 0; i < v->nsess; i++) {
    const report_sess_t *s = v->sess[i].s;
    const report_t *r = v->sess[i].of;
    char user[64];
    user_name(v->d, s->uid, user, sizeof(user));
    msgpack_pack_map(pk, 19);
    kv_u64(pk, "id", s->id);
    kv_i64(pk, "pid", s->pid);
    kv_u64(pk, "uid", s->uid);
    kv_u64(pk, "gid", s->gid);
    kv_str(pk, "user", user);
    kv_str(pk, "client", s->client);
    kv_str(pk, "tenant", r != NULL ? r->tenant : "");
    kv_i64(pk, "worker_pid", r != NULL ? r->worker_pid : 0);
    kv_u64(pk, "age_ms", s->age_ms);
    kv_u64(pk, "requests", s->requests);
    kv_u64(pk, "errors", s->errors);
    kv_u64(pk, "streams", s->streams);
    kv_u64(pk, "events", s->events);
    kv_u64(pk, "kernels_loaded", s->kernels_loaded);
    kv_u64(pk, "kernels_launched", s->launches);
    kv_u64(pk, "busy_ns", s->busy_ns);
    kv_u64(pk, "bytes_h2d", s->h2d);
    kv_u64(pk, "bytes_d2h", s->d2h);
    proto_pack_cstr(pk, "devices");
    msgpack_pack_array(pk, s->nheld);
    for (uint32_t h = 0; h < s->nheld; h++) {
      msgpack_pack_map(pk, 3);
      kv_i64(pk, "device", s->held[h].dev);
      kv_u64(pk, "buffers", s->held[h].buffers);
      kv_u64(pk, "bytes", s->held[h].bytes);
    }
  }
}

static const char *isolation_name(const daemon_t *d)
{
  return d->cfg.isolation == ISOLATION_NONE      ? "none"
         : d->cfg.isolation == ISOLATION_SESSION ? "session"
                                                 : "uid";
}

static void pack_stats(const job_t *j, const report_set_t *set, const view_t *v,
                       msgpack_packer *pk)
{
  daemon_t *d = j->d;
  cache_stats_t cs;
  compile_pool_stats_t ps;
  uint32_t ndev = 0;

  cache_get_stats(&cs);
  compile_pool_get_stats(&ps);
  msgpack_pack_map(pk, 9);
  kv_u64(pk, "uptime_ms", uv_now(d->loop) - d->start_ms);
  /* A process left sessions out of its report (the wire's limits):
   * sessions and per-session sums are short. */
  proto_pack_cstr(pk, "truncated");
  if (v->truncated)
    msgpack_pack_true(pk);
  else
    msgpack_pack_false(pk);
  kv_u64(pk, "sessions", v->nsess);
  kv_u64(pk, "sessions_total", d->sessions_total);
  kv_u64(pk, "tenants",
         d->role == ROLE_LISTENER
             ? (uint64_t)set->n - set->exited + set->missing
             : 0);
  kv_str(pk, "isolation", isolation_name(d));
  for (int i = 0; i < v->ndev; i++)
    ndev += v->dev[i].present;
  proto_pack_cstr(pk, "devices");
  msgpack_pack_array(pk, ndev);
  for (int i = 0; i < v->ndev; i++) {
    const view_dev_t *vd = &v->dev[i];
    if (!vd->present)
      continue;
    msgpack_pack_map(pk, 14);
    kv_i64(pk, "device", i);
    kv_str(pk, "name", vd->d.name);
    kv_str(pk, "kind", vd->info ? vd->d.kind : "");
    proto_pack_cstr(pk, "lost");
    if (vd->d.lost)
      msgpack_pack_true(pk);
    else
      msgpack_pack_false(pk);
    kv_u64(pk, "mem_total", vd->d.mem_total);
    kv_u64(pk, "mem_free", 0);
    kv_u64(pk, "mem_held", vd->d.held);
    kv_u64(pk, "buffers", vd->d.buffers);
    kv_u64(pk, "sessions", vd->sessions);
    kv_u64(pk, "kernels_launched", vd->d.c.launches);
    kv_u64(pk, "busy_ns", vd->d.c.busy_ns);
    kv_u64(pk, "bytes_h2d", vd->d.c.h2d);
    kv_u64(pk, "bytes_d2h", vd->d.c.d2h);
    kv_u64(pk, "faults", vd->d.c.faults);
  }
  proto_pack_cstr(pk, "cache");
  msgpack_pack_map(pk, 4);
  kv_u64(pk, "entries", cs.entries);
  kv_u64(pk, "bytes", cs.bytes);
  kv_u64(pk, "hits", cs.hits_memory + cs.hits_disk + cs.waits);
  kv_u64(pk, "misses", cs.misses);
  proto_pack_cstr(pk, "compiles");
  msgpack_pack_map(pk, 4);
  kv_u64(pk, "done", ps.compiles);
  kv_u64(pk, "failed", cs.compile_failures);
  kv_u64(pk, "running", ps.busy);
  kv_u64(pk, "queued", ps.queued);
}

/* ----------------------------------------------------------------- metrics */

static void dev_label(strbuf_t *lb, int id)
{
  prom_label_u64(lb, "device", (uint64_t)id);
}

static void tenant_labels(const view_t *v, strbuf_t *lb, uint64_t uid)
{
  char user[64];

  user_name(v->d, uid, user, sizeof(user));
  prom_label_u64(lb, "uid", uid);
  prom_label(lb, "user", user);
}

/* Per device family: one sample per known device. */
#define DEV_FAMILY(name, type, help, expr)                                     \
  do {                                                                         \
    prom_family(b, name, type, help);                                          \
    for (int i = 0; i < v->ndev; i++) {                                        \
      const view_dev_t *vd = &v->dev[i];                                       \
      if (!vd->present)                                                        \
        continue;                                                              \
      dev_label(&lb, i);                                                       \
      prom_sample_u64(b, name, &lb, (expr));                                   \
    }                                                                          \
  } while (0)

/* Per tenant and device family, for the tenants the caller may see. */
#define TEN_DEV_FAMILY(name, type, help, expr)                                 \
  do {                                                                         \
    prom_family(b, name, type, help);                                          \
    for (uint32_t t = 0; t < v->nten; t++) {                                   \
      const view_tenant_t *tn = &v->ten[t];                                    \
      if (!visible(j, tn->uid))                                                \
        continue;                                                              \
      for (uint32_t i = 0; i < tn->ndev; i++) {                                \
        tenant_labels(v, &lb, tn->uid);                                        \
        dev_label(&lb, (int)i);                                                \
        prom_sample_u64(b, name, &lb, (expr));                                 \
      }                                                                        \
    }                                                                          \
  } while (0)

static void render_metrics(const job_t *j, const report_set_t *set,
                           const view_t *v, strbuf_t *b)
{
  daemon_t *d = j->d;
  strbuf_t lb = {0};
  cache_stats_t cs;
  compile_pool_stats_t ps;
  static const char *const dirs[2] = {"h2d", "d2h"};

  cache_get_stats(&cs);
  compile_pool_get_stats(&ps);
  prom_family(b, "hipd_build_info", "gauge", "hipd's version and isolation");
  prom_label(&lb, "version", PACKAGE_VERSION);
  prom_label(&lb, "isolation", isolation_name(d));
  prom_sample_u64(b, "hipd_build_info", &lb, 1);
  prom_family(b, "hipd_uptime_seconds", "gauge", "seconds since hipd started");
  prom_sample_f(b, "hipd_uptime_seconds", NULL,
                (double)(uv_now(d->loop) - d->start_ms) / 1000.0);
  prom_family(b, "hipd_sessions", "gauge", "sessions open (visible)");
  prom_sample_u64(b, "hipd_sessions", NULL, v->nsess);
  prom_family(b, "hipd_tenants", "gauge", "tenant workers running");
  prom_sample_u64(b, "hipd_tenants", NULL,
                  d->role == ROLE_LISTENER
                      ? (uint64_t)set->n - set->exited + set->missing
                      : 0);
  prom_family(b, "hipd_scrape_errors_total", "counter",
              "workers left out of a view (no answer within 2 s)");
  prom_sample_u64(b, "hipd_scrape_errors_total", NULL, A.scrape_errors);

  prom_family(b, "hipd_device_info", "gauge", "a device hipd serves");
  for (int i = 0; i < v->ndev; i++) {
    if (!v->dev[i].present)
      continue;
    dev_label(&lb, i);
    prom_label(&lb, "device_name", v->dev[i].d.name);
    prom_label(&lb, "kind", v->dev[i].info ? v->dev[i].d.kind : "");
    prom_sample_u64(b, "hipd_device_info", &lb, 1);
  }
  DEV_FAMILY("hipd_device_memory_total_bytes", "gauge",
             "device memory, as the driver says", vd->d.mem_total);
  DEV_FAMILY("hipd_device_memory_held_bytes", "gauge",
             "device memory held by hipd's sessions", vd->d.held);
  DEV_FAMILY("hipd_device_buffers", "gauge", "buffers held on the device",
             vd->d.buffers);
  DEV_FAMILY("hipd_device_kernels_launched_total", "counter",
             "kernel launches completed", vd->d.c.launches);
  prom_family(b, "hipd_device_busy_seconds_total", "counter",
              "device busy time: kernel submission to observed completion, "
              "overlaps merged within a tenant");
  for (int i = 0; i < v->ndev; i++) {
    if (!v->dev[i].present)
      continue;
    dev_label(&lb, i);
    prom_sample_f(b, "hipd_device_busy_seconds_total", &lb,
                  (double)v->dev[i].d.c.busy_ns / 1e9);
  }
  prom_family(b, "hipd_device_transfer_bytes_total", "counter",
              "bytes copied between host and device");
  for (int i = 0; i < v->ndev; i++)
    for (int k = 0; k < 2 && v->dev[i].present; k++) {
      dev_label(&lb, i);
      prom_label(&lb, "direction", dirs[k]);
      prom_sample_u64(b, "hipd_device_transfer_bytes_total", &lb,
                      k == 0 ? v->dev[i].d.c.h2d : v->dev[i].d.c.d2h);
    }
  DEV_FAMILY("hipd_device_faults_total", "counter",
             "operations that failed with a lost device or a device error",
             vd->d.c.faults);
  DEV_FAMILY("hipd_device_lost", "gauge", "1 while the device is lost",
             (uint64_t)(vd->d.lost != 0));

  prom_family(b, "hipd_tenant_sessions", "gauge", "sessions of the tenant");
  for (uint32_t t = 0; t < v->nten; t++)
    if (visible(j, v->ten[t].uid)) {
      tenant_labels(v, &lb, v->ten[t].uid);
      prom_sample_u64(b, "hipd_tenant_sessions", &lb, v->ten[t].sessions);
    }
  TEN_DEV_FAMILY("hipd_tenant_memory_held_bytes", "gauge",
                 "device memory held by the tenant's sessions", tn->held[i]);
  TEN_DEV_FAMILY("hipd_tenant_buffers", "gauge",
                 "buffers held by the tenant's sessions", tn->buffers[i]);
  TEN_DEV_FAMILY("hipd_tenant_kernels_launched_total", "counter",
                 "kernel launches of the tenant", tn->c[i].launches);
  prom_family(b, "hipd_tenant_busy_seconds_total", "counter",
              "device busy time of the tenant's work");
  for (uint32_t t = 0; t < v->nten; t++)
    for (uint32_t i = 0; visible(j, v->ten[t].uid) && i < v->ten[t].ndev; i++) {
      tenant_labels(v, &lb, v->ten[t].uid);
      dev_label(&lb, (int)i);
      prom_sample_f(b, "hipd_tenant_busy_seconds_total", &lb,
                    (double)v->ten[t].c[i].busy_ns / 1e9);
    }
  prom_family(b, "hipd_tenant_transfer_bytes_total", "counter",
              "bytes the tenant copied between host and device");
  for (uint32_t t = 0; t < v->nten; t++)
    for (uint32_t i = 0; visible(j, v->ten[t].uid) && i < v->ten[t].ndev; i++)
      for (int k = 0; k < 2; k++) {
        tenant_labels(v, &lb, v->ten[t].uid);
        dev_label(&lb, (int)i);
        prom_label(&lb, "direction", dirs[k]);
        prom_sample_u64(b, "hipd_tenant_transfer_bytes_total", &lb,
                        k == 0 ? v->ten[t].c[i].h2d : v->ten[t].c[i].d2h);
      }
  prom_family(b, "hipd_tenant_quota_refusals_total", "counter",
              "requests refused by a quota or tenant limit");
  for (uint32_t t = 0; t < v->nten; t++)
    if (visible(j, v->ten[t].uid)) {
      tenant_labels(v, &lb, v->ten[t].uid);
      prom_sample_u64(b, "hipd_tenant_quota_refusals_total", &lb,
                      v->ten[t].quota);
    }
  prom_family(b, "hipd_tenant_faults_total", "counter",
              "requests of the tenant that failed with a lost device or a "
              "device error");
  for (uint32_t t = 0; t < v->nten; t++)
    if (visible(j, v->ten[t].uid)) {
      tenant_labels(v, &lb, v->ten[t].uid);
      prom_sample_u64(b, "hipd_tenant_faults_total", &lb, v->ten[t].faults);
    }

  prom_family(b, "hipd_requests_total", "counter",
              "requests answered, by method and code");
  for (uint32_t i = 0; i < v->nreq; i++) {
    prom_label(&lb, "method", v->req[i].method);
    prom_label(&lb, "code",
               v->req[i].code == 0 ? "OK" : hipd_err_name(v->req[i].code));
    prom_sample_u64(b, "hipd_requests_total", &lb, v->req[i].n);
  }
  prom_family(b, "hipd_compiles_total", "counter",
              "kernel compiles, by result");
  prom_label(&lb, "result", "ok");
  prom_sample_u64(b, "hipd_compiles_total", &lb,
                  ps.compiles > cs.compile_failures
                      ? ps.compiles - cs.compile_failures
                      : 0);
  prom_label(&lb, "result", "failed");
  prom_sample_u64(b, "hipd_compiles_total", &lb, cs.compile_failures);
  prom_label(&lb, "result", "timeout");
  prom_sample_u64(b, "hipd_compiles_total", &lb, ps.timeouts);
  prom_family(b, "hipd_cache_hits_total", "counter",
              "compiles answered from the kernel cache");
  prom_sample_u64(b, "hipd_cache_hits_total", NULL,
                  cs.hits_memory + cs.hits_disk + cs.waits);
  prom_family(b, "hipd_cache_misses_total", "counter",
              "compiles the kernel cache did not hold");
  prom_sample_u64(b, "hipd_cache_misses_total", NULL, cs.misses);
  prom_family(b, "hipd_cache_entries", "gauge",
              "kernel cache entries in memory");
  prom_sample_u64(b, "hipd_cache_entries", NULL, cs.entries);
  prom_family(b, "hipd_cache_bytes", "gauge", "kernel cache bytes in memory");
  prom_sample_u64(b, "hipd_cache_bytes", NULL, cs.bytes);
  strbuf_free(&lb);
}

/* -------------------------------------------------------------- answering */

static void cache_entry_cb(void *ctx, const cache_key_t *key, uint64_t bytes,
                           uint64_t atime)
{
  msgpack_packer *pk = ctx;
  char hex[2 * CACHE_KEY_SIZE + 1];

  cache_key_hex(key, hex);
  /* No target: the cache keeps hashes, and what an entry was compiled
   * for is folded into its key, not kept beside it. */
  msgpack_pack_map(pk, 3);
  kv_str(pk, "key", hex);
  kv_u64(pk, "bytes", bytes);
  kv_u64(pk, "atime", atime);
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
      session_close(s, who);
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

  A.scrape_errors += set->missing;
  if (view_build(j, set, &v) != 0) {
    view_free(&v);
    answer(j, HIPD_ENOMEM, "out of memory", NULL, 0);
    return;
  }
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  switch (j->op) {
  case OP_LIST:
    pack_list(&v, &pk);
    break;
  case OP_STATS:
    pack_stats(j, set, &v, &pk);
    break;
  case OP_METRICS:
    render_metrics(j, set, &v, &b);
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
  case OP_KILL: {
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
      if (owner->owner != 0 && A.listener)
        A.l.kill(j->d, owner->owner, j->kill_id, who, killed_cb, j);
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
  if (A.listener && j->d->role == ROLE_LISTENER)
    A.l.gather(j->d, gathered, j);
  else
    gather_local(j);
}

static void run_job(job_t *j, const msgpack_object *params)
{
  daemon_t *d = j->d;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  switch (j->op) {
  case OP_LEVEL: {
    int lvl = log_get_level();
    if (params->via.array.size == 1 &&
        params->via.array.ptr[0].type != MSGPACK_OBJECT_NIL) {
      char name[16];
      const msgpack_object *o = &params->via.array.ptr[0];
      if (o->type != MSGPACK_OBJECT_STR || o->via.str.size >= sizeof(name)) {
        answer(j, HIPD_EPARAMS,
               "param 0 (level) must be error, warn, info or debug", NULL, 0);
        return;
      }
      memcpy(name, o->via.str.ptr, o->via.str.size);
      name[o->via.str.size] = '\0';
      if ((lvl = log_level_parse(name)) < 0) {
        answer(j, HIPD_EPARAMS,
               "param 0 (level) must be error, warn, info or debug", NULL, 0);
        return;
      }
      if (!j->admin) {
        refuse_non_admin(d, j, "setting the level");
        return;
      }
      log_set_level(lvl);
      log_info(0, "log level set to %s by %s", level_names[lvl], j->who);
      if (A.listener && d->role == ROLE_LISTENER && A.l.log_level != NULL)
        A.l.log_level(d, lvl);
    }
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_cstr(&pk, level_names[lvl]);
    answer_packed(j, &sb);
    return;
  }
  case OP_CACHE: {
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

void admin_request(daemon_t *d, uid_t uid, uint64_t sid, const char *op,
                   const msgpack_object *params, admin_done_fn done, void *ctx)
{
  job_t *j;
  int o = op_of(op, strlen(op));
  uint32_t n = params != NULL && params->type == MSGPACK_OBJECT_ARRAY
                   ? params->via.array.size
                   : UINT32_MAX;

  if (o < 0 || n == UINT32_MAX) {
    done(ctx, HIPD_EPARAMS, "not an admin request", NULL, 0);
    return;
  }
  if (o == OP_KILL ? n != 1 : o == OP_LEVEL ? n > 1 : n != 0) {
    done(ctx, HIPD_EPARAMS,
         o == OP_KILL ? "takes 1 params (id)" : "takes no params", NULL, 0);
    return;
  }
  if ((j = calloc(1, sizeof(*j))) == NULL) {
    done(ctx, HIPD_ENOMEM, "out of memory", NULL, 0);
    return;
  }
  j->d = d;
  j->uid = uid;
  j->sid = sid;
  j->op = o;
  j->done = done;
  j->ctx = ctx;
  uid_who(d, uid, j->who, sizeof(j->who));
  if (o == OP_KILL &&
      proto_obj_uint(&params->via.array.ptr[0], UINT64_MAX, &j->kill_id) != 0) {
    answer(j, HIPD_EPARAMS, "param 0 (id) must be an unsigned integer", NULL,
           0);
    return;
  }
  if (A.forward != NULL && d->role == ROLE_WORKER) {
    /* A worker: its own session it closes itself (the caller sees it);
     * everything else is the listener's to decide. */
    if (o == OP_KILL && sid != 0 && j->kill_id == sid) {
      char who[160];
      snprintf(who, sizeof(who), "killed by %s", j->who);
      killed_cb(j, admin_kill_local(d, sid, who, sid));
      return;
    }
    free(j);
    A.forward(d, op, params, done, ctx);
    return;
  }
  j->admin = admin_is_admin(d, uid);
  log_debug(0, "admin: %s for %s%s (session %llu)", op, j->who,
            j->admin ? ", an admin" : "", (unsigned long long)sid);
  run_job(j, params);
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
  j->op = OP_METRICS;
  j->text_done = done;
  j->ctx = ctx;
  snprintf(j->who, sizeof(j->who), "the metrics listener");
  gather(j);
}
