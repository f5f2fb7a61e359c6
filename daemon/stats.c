/* SPDX-License-Identifier: MIT */
/* daemon/stats.c: the accounting of one process (stats.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "grants.h"
#include "hipd.h"
#include "objects/objects.h"
#include "session.h"
#include "stats.h"
#include "util/clock.h"

/* One device's counters, at the process's and at a uid's level. */
typedef struct dev_ctr {
  uint64_t launches, busy_ns, busy_end, h2d, d2h, faults;
} dev_ctr_t;

/* A uid's counters, kept for the process's life. */
typedef struct uid_ctr {
  struct uid_ctr *next;
  uid_t uid;
  uint64_t quota, faults;
  dev_ctr_t dev[STATS_MAX_DEVICES];
} uid_ctr_t;

static struct {
  dev_ctr_t dev[STATS_MAX_DEVICES];
  uid_ctr_t *uids;
  /* Requests by method and code: keyed by the method's name, a pointer
   * into dispatch's table (NULL: an unknown method), open addressing. */
  struct req_row {
    const char *name;
    int used;
    uint64_t n[STATS_MAX_CODES]; /* [-code] */
  } req[STATS_REQ_SLOTS];
} counters;

static struct req_row *req_row(const char *name)
{
  size_t i = ((uintptr_t)name >> 3) % STATS_REQ_SLOTS;

  for (size_t k = 0; k < STATS_REQ_SLOTS; k++, i = (i + 1) % STATS_REQ_SLOTS) {
    if (counters.req[i].used && counters.req[i].name == name)
      return &counters.req[i];
    if (!counters.req[i].used) {
      counters.req[i].used = 1;
      counters.req[i].name = name;
      return &counters.req[i];
    }
  }
  return NULL;
}

static uid_ctr_t *uid_of(uid_t uid)
{
  uid_ctr_t *u;

  for (u = counters.uids; u != NULL; u = u->next)
    if (u->uid == uid)
      return u;
  if ((u = calloc(1, sizeof(*u))) == NULL)
    return NULL;
  u->uid = uid;
  u->next = counters.uids;
  counters.uids = u;
  return u;
}

static stats_sess_t *sess_of(session_t *s)
{
  if (s->stats == NULL && !s->closing)
    s->stats = calloc(1, sizeof(*s->stats));
  return s->stats;
}

static unsigned code_index(int code)
{
  return code < 0 && -code < STATS_MAX_CODES
             ? (unsigned)-code
             : (code == 0 ? 0 : STATS_MAX_CODES - 1);
}

void stats_request(session_t *s, const char *method, int code)
{
  unsigned ci = code_index(code);
  stats_sess_t *ss = sess_of(s);
  struct req_row *r = req_row(method);

  if (r != NULL)
    r->n[ci]++;
  if (code == 0)
    return;
  if (ss != NULL)
    ss->errors++;
  if (code == HIPD_EQUOTA || code == HIPD_ETOOMANY || code == HIPD_EDEVLOST ||
      code == HIPD_EDEVICE) {
    uid_ctr_t *u = uid_of(s->peer_uid);
    if (u != NULL && (code == HIPD_EDEVLOST || code == HIPD_EDEVICE))
      u->faults++;
    else if (u != NULL)
      u->quota++;
  }
}

/* Add [t0, t1) to a merged total: what lies before the watermark was
 * counted already (completions are seen in order of t1). */
static void busy_add(uint64_t *total, uint64_t *end, uint64_t t0, uint64_t t1)
{
  if (t0 < *end)
    t0 = *end;
  if (t1 > t0)
    *total += t1 - t0;
  if (t1 > *end)
    *end = t1;
}

void stats_op(session_t *s, int kind, int dev, int status, uint64_t bytes,
              uint64_t t0, uint64_t end, int waited)
{
  stats_sess_t *ss = sess_of(s);
  grant_usage_t *gu = grants_usage_of(s);
  uid_ctr_t *u;
  dev_ctr_t *dc, *uc;
  uint64_t now;

  if (dev < 0 || dev >= STATS_MAX_DEVICES || (u = uid_of(s->peer_uid)) == NULL)
    return;
  dc = &counters.dev[dev];
  uc = &u->dev[dev];
  if (status == HIPD_EDEVLOST || status == HIPD_EDEVICE) {
    dc->faults++;
    uc->faults++;
  }
  if (status != 0)
    return;
  switch (kind) {
  case OP_WRITE:
    dc->h2d += bytes;
    uc->h2d += bytes;
    if (ss != NULL)
      ss->h2d += bytes;
    if (gu != NULL)
      gu->h2d += bytes;
    break;
  case OP_READ:
    dc->d2h += bytes;
    uc->d2h += bytes;
    if (ss != NULL)
      ss->d2h += bytes;
    if (gu != NULL)
      gu->d2h += bytes;
    break;
  case OP_LAUNCH:
    dc->launches++;
    uc->launches++;
    if (ss != NULL)
      ss->launches++;
    if (gu != NULL)
      gu->launches++;
    break;
  default:
    break;
  }
  /* Busy time: a launch opens an interval; it closes when an op that
   * waited for the device completes (the launch itself if it waited). */
  if (ss == NULL)
    return;
  if (kind == OP_LAUNCH &&
      (ss->open_since[dev] == 0 || t0 < ss->open_since[dev]))
    ss->open_since[dev] = t0;
  if (!waited || ss->open_since[dev] == 0)
    return;
  now = end != 0 ? end : util_now_ns();
  t0 = ss->open_since[dev];
  ss->open_since[dev] = 0;
  busy_add(&dc->busy_ns, &dc->busy_end, t0, now);
  busy_add(&uc->busy_ns, &uc->busy_end, t0, now);
  busy_add(&ss->busy_ns, &ss->busy_end, t0, now);
  if (gu != NULL)
    busy_add(&gu->busy_ns, &gu->busy_end, t0, now);
}

void stats_session_end(session_t *s)
{
  free(s->stats);
  s->stats = NULL;
}

/* ----------------------------------------------------------------- report */

typedef struct {
  uint64_t buffers[STATS_MAX_DEVICES], bytes[STATS_MAX_DEVICES];
} held_t;

static void held_cb(void *ctx, uint64_t h, void *obj)
{
  held_t *hd = ctx;
  buffer_t *b = obj;

  (void)h;
  if (b->dev != NULL && b->dev->id >= 0 && b->dev->id < STATS_MAX_DEVICES) {
    hd->buffers[b->dev->id]++;
    hd->bytes[b->dev->id] += b->mem.size;
  }
}

#define PACK_FIELD_U64(pk, v) msgpack_pack_uint64((pk), (v))
#define PACK_FIELD_I64(pk, v) msgpack_pack_int64((pk), (v))
#define PACK_FIELD_BOOL(pk, v)                                                 \
  ((v) ? msgpack_pack_true(pk) : msgpack_pack_false(pk))
#define PACK_FIELD_STR(pk, v) proto_pack_cstr((pk), (v))
#define PACK_FIELD(name, kind, min, max) PACK_FIELD_##kind(pk, rec.name);

static void pack_held(msgpack_packer *pk, int dev, uint64_t buffers,
                      uint64_t bytes)
{
  stats_held_rec_t rec = {.dev = dev, .buffers = buffers, .bytes = bytes};

  msgpack_pack_array(pk, STATS_HELD_NFIELDS);
  STATS_HELD_FIELDS(PACK_FIELD)
}

/* @return the msgpack objects packed. */
static uint32_t pack_session(daemon_t *d, session_t *s, msgpack_packer *pk)
{
  static const stats_sess_t zero;
  const stats_sess_t *ss = s->stats != NULL ? s->stats : &zero;
  stats_sess_rec_t rec = {
      .id = s->id,
      .pid = s->peer_pid,
      .uid = s->peer_uid,
      .gid = s->peer_gid,
      .age_ms = uv_now(d->loop) - s->opened_ms,
      .requests = s->requests,
      .errors = ss->errors,
      .streams = s->handles.count[HANDLE_STREAM],
      .events = s->handles.count[HANDLE_EVENT],
      .kernels_loaded = s->handles.count[HANDLE_KERNEL],
      .launches = ss->launches,
      .busy_ns = ss->busy_ns,
      .h2d = ss->h2d,
      .d2h = ss->d2h,
      .grant = s->grant,
  };
  held_t hd;
  uint32_t n = 0;

  _Static_assert(sizeof(rec.client) == sizeof(s->client),
                 "a session's client name fits its record");
  memcpy(rec.client, s->client, sizeof(rec.client));
  memset(&hd, 0, sizeof(hd));
  handles_foreach(&s->handles, HANDLE_BUFFER, held_cb, &hd);
  msgpack_pack_array(pk, STATS_SESSION_NFIELDS + 1);
  STATS_SESSION_FIELDS(PACK_FIELD)
  for (int i = 0; i < STATS_MAX_DEVICES; i++)
    n += hd.buffers[i] != 0;
  msgpack_pack_array(pk, n);
  for (int i = 0; i < STATS_MAX_DEVICES; i++)
    if (hd.buffers[i] != 0)
      pack_held(pk, i, hd.buffers[i], hd.bytes[i]);
  return 3 + STATS_SESSION_NFIELDS + (1 + STATS_HELD_NFIELDS) * n;
}

static void pack_dev_ctr(msgpack_packer *pk, int id, const dev_ctr_t *c)
{
  stats_ctr_rec_t rec = {
      .dev = id,
      .launches = c->launches,
      .busy_ns = c->busy_ns,
      .h2d = c->h2d,
      .d2h = c->d2h,
      .faults = c->faults,
  };

  msgpack_pack_array(pk, STATS_CTR_NFIELDS);
  STATS_CTR_FIELDS(PACK_FIELD)
}

static void pack_device(msgpack_packer *pk, int i)
{
  device_t *dev = device_get(i);
  stats_dev_rec_t rec = {
      .id = i,
      .mem_total = dev->caps.total_global_mem,
      .buffers = dev->buffers,
      .held = dev->allocated,
      .lost = dev->lost != 0,
  };

  _Static_assert(sizeof(rec.name) == sizeof(dev->caps.name),
                 "a device's name fits its record");
  memcpy(rec.name, dev->caps.name, sizeof(rec.name));
  snprintf(rec.kind, sizeof(rec.kind), "%s", dev->caps.is_cpu ? "cpu" : "gpu");
  msgpack_pack_array(pk, STATS_DEVICE_NFIELDS + 1);
  STATS_DEVICE_FIELDS(PACK_FIELD)
  pack_dev_ctr(pk, i, &counters.dev[i]);
}

/* A uid's record; its MPS share is this process's (a worker is one
 * tenant's: privsep/mps.h), 0 where it is no MPS client. */
static void pack_uid(msgpack_packer *pk, const daemon_t *d, const uid_ctr_t *u,
                     int ndev)
{
  stats_uid_rec_t rec = {.uid = u->uid,
                         .quota = u->quota,
                         .faults = u->faults,
                         .mps_threads = d->mps_threads,
                         .mps_mem = d->mps_mem};

  msgpack_pack_array(pk, STATS_UID_NFIELDS + 1);
  STATS_UID_FIELDS(PACK_FIELD)
  msgpack_pack_array(pk, (uint32_t)ndev);
  for (int i = 0; i < ndev; i++)
    pack_dev_ctr(pk, i, &u->dev[i]);
}

static void pack_grant(msgpack_packer *pk, const grant_t *g)
{
  stats_grant_rec_t rec = {
      .serial = g->serial,
      .sessions = g->u.sessions,
      .launches = g->u.launches,
      .busy_ns = g->u.busy_ns,
      .h2d = g->u.h2d,
      .d2h = g->u.d2h,
      .held = g->u.held,
      .peak = g->u.peak,
  };

  _Static_assert(sizeof(rec.label) == sizeof(g->label),
                 "a grant's label fits its record");
  memcpy(rec.label, g->label, sizeof(rec.label));
  msgpack_pack_array(pk, STATS_GRANT_NFIELDS);
  STATS_GRANT_FIELDS(PACK_FIELD)
}

static void pack_request(msgpack_packer *pk, const char *method, unsigned c,
                         uint64_t n)
{
  stats_req_rec_t rec = {.code = -(int64_t)c, .n = n};

  snprintf(rec.method, sizeof(rec.method), "%s",
           method != NULL ? method : "(unknown)");
  msgpack_pack_array(pk, STATS_REQUEST_NFIELDS);
  STATS_REQUEST_FIELDS(PACK_FIELD)
}

void stats_pack_report(daemon_t *d, msgpack_packer *pk)
{
  int ndev = devices_count();
  uint32_t n = 0, nuids = 0, nreq = 0;
  uint64_t fixed, budget;
  msgpack_sbuffer ss;
  msgpack_packer sp;
  int truncated;

  if (ndev > STATS_MAX_DEVICES)
    ndev = STATS_MAX_DEVICES;
  for (uid_ctr_t *u = counters.uids; u != NULL; u = u->next)
    nuids++;
  for (size_t r = 0; r < STATS_REQ_SLOTS; r++)
    for (unsigned c = 0; counters.req[r].used && c < STATS_MAX_CODES; c++)
      nreq += counters.req[r].n[c] != 0;
  /* The object budget (STATS_REPORT_OBJECTS): what is not sessions, then
   * sessions while they fit (packed aside first, to count them). */
  fixed = 8 + (uint64_t)ndev * (2 + STATS_DEVICE_NFIELDS + STATS_CTR_NFIELDS) +
          nuids * (2 + STATS_UID_NFIELDS +
                   (1 + STATS_CTR_NFIELDS) * (uint64_t)ndev) +
          (1 + STATS_REQUEST_NFIELDS) * (uint64_t)nreq +
          (1 + STATS_GRANT_NFIELDS) * (uint64_t)d->grants.n;
  budget = fixed < STATS_REPORT_OBJECTS ? STATS_REPORT_OBJECTS - fixed : 0;
  msgpack_sbuffer_init(&ss);
  msgpack_packer_init(&sp, &ss, msgpack_sbuffer_write);
  /* sessions, by id: at most STATS_REPORT_SESSIONS and what fits */
  for (list_node_t *it = d->sessions.next;
       it != &d->sessions && n < STATS_REPORT_SESSIONS; it = it->next) {
    size_t before = ss.size;
    uint32_t cost = pack_session(d, list_entry(it, session_t, node), &sp);
    if (cost > budget) {
      ss.size = before; /* it does not fit: neither do those after */
      break;
    }
    budget -= cost;
    n++;
  }
  truncated = n < d->nsessions;
  /* stats.h's stats_report_part order */
  msgpack_pack_array(pk, STATS_REPORT_PARTS);
  msgpack_pack_uint32(pk, 1); /* the layout's version */
  msgpack_pack_int64(pk, getpid());
  msgpack_pack_array(pk, n);
  if (ss.size > 0)
    pk->callback(pk->data, ss.data, ss.size);
  msgpack_sbuffer_destroy(&ss);
  /* devices, uids, and requests where n > 0 (stats.h's lists) */
  msgpack_pack_array(pk, (uint32_t)ndev);
  for (int i = 0; i < ndev; i++)
    pack_device(pk, i);
  msgpack_pack_array(pk, nuids);
  for (uid_ctr_t *u = counters.uids; u != NULL; u = u->next)
    pack_uid(pk, d, u, ndev);
  msgpack_pack_array(pk, nreq);
  for (size_t r = 0; r < STATS_REQ_SLOTS; r++)
    for (unsigned c = 0; counters.req[r].used && c < STATS_MAX_CODES; c++)
      if (counters.req[r].n[c] != 0)
        pack_request(pk, counters.req[r].name, c, counters.req[r].n[c]);
  /* truncated: sessions were left out */
  if (truncated)
    msgpack_pack_true(pk);
  else
    msgpack_pack_false(pk);
  /* grants: the usage of each of this process's */
  msgpack_pack_array(pk, d->grants.n);
  for (uint32_t i = 0; i < d->grants.n; i++)
    pack_grant(pk, &d->grants.g[i]);
}
