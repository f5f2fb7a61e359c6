/* SPDX-License-Identifier: MIT */
/* daemon/admin/report.c: decoding and checking a report (report.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "admin/report.h"
#include "hipd.h"
#include "rpc.h"
#include "stats.h"

_Static_assert(REPORT_MAX_SESSIONS == STATS_REPORT_SESSIONS,
               "the reader accepts as many sessions as a report lists (what "
               "fits on the wire is stats_pack_report()'s object budget, "
               "STATS_REPORT_OBJECTS)");

static const msgpack_object *arr(const msgpack_object *o, uint32_t n,
                                 uint32_t max)
{
  if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY ||
      (n != 0 && o->via.array.size != n) || o->via.array.size > max)
    return NULL;
  return o;
}

#define AT(o, i) (&(o)->via.array.ptr[(i)])

static int str(const msgpack_object *o, char *out, size_t size)
{
  const char *p;
  size_t n;

  if (o->type != MSGPACK_OBJECT_STR)
    return HIPD_EINVAL;
  p = o->via.str.ptr;
  n = o->via.str.size;
  if (n >= size || memchr(p, '\0', n) != NULL)
    return HIPD_EINVAL;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

/* One field of a record (stats.h's lists). */
static int field_u64(const msgpack_object *o, uint64_t *out, int64_t min,
                     uint64_t max)
{
  (void)min;
  return proto_obj_uint(o, max, out);
}

static int field_i64(const msgpack_object *o, int64_t *out, int64_t min,
                     int64_t max)
{
  return proto_obj_int(o, min, max, out);
}

static int field_str(const msgpack_object *o, char *out, int64_t min,
                     size_t size)
{
  (void)min;
  return str(o, out, size);
}

static int field_bool(const msgpack_object *o, int *out, int64_t min,
                      int64_t max)
{
  (void)min;
  (void)max;
  if (o->type != MSGPACK_OBJECT_BOOLEAN)
    return HIPD_EINVAL;
  *out = o->via.boolean;
  return 0;
}

#define FIELD_READ_U64 field_u64
#define FIELD_READ_I64 field_i64
#define FIELD_READ_BOOL field_bool
#define FIELD_READ_STR field_str
/* Field i of the record at @p o into s->name (s->name decays for STR). */
#define FIELD_READ(name, kind, min, max)                                       \
  if (FIELD_READ_##kind(AT(o, i), FIELD_PTR_##kind(s->name), (min), (max)))    \
    return HIPD_EINVAL;                                                        \
  i++;
#define FIELD_PTR_U64(f) &(f)
#define FIELD_PTR_I64(f) &(f)
#define FIELD_PTR_BOOL(f) &(f)
#define FIELD_PTR_STR(f) (f)

/* A record of exactly @p nfields at @p o, read into *s by @p fields; then
 * field i is the next (if any). */
#define RECORD_READ(o, extra, nfields, fields)                                 \
  uint32_t i = 0;                                                              \
  if (((o) = arr((o), (nfields) + (extra), (nfields) + (extra))) == NULL)      \
    return HIPD_EINVAL;                                                        \
  fields(FIELD_READ)

static int held(const msgpack_object *o, report_held_t *s)
{
  RECORD_READ(o, 0, STATS_HELD_NFIELDS, STATS_HELD_FIELDS)
  return 0;
}

/* A device's counters, which must be device @p dev's. */
static int ctr(const msgpack_object *o, report_ctr_t *s, int64_t dev)
{
  RECORD_READ(o, 0, STATS_CTR_NFIELDS, STATS_CTR_FIELDS)
  return s->dev == dev ? 0 : HIPD_EINVAL;
}

static int sess(const msgpack_object *o, report_sess_t *s)
{
  const msgpack_object *h;

  RECORD_READ(o, 1, STATS_SESSION_NFIELDS, STATS_SESSION_FIELDS)
  if ((h = arr(AT(o, i), 0, REPORT_MAX_DEVICES)) == NULL)
    return HIPD_EINVAL;
  s->nheld = h->via.array.size;
  if (s->nheld && (s->held = calloc(s->nheld, sizeof(*s->held))) == NULL)
    return HIPD_EINVAL;
  for (uint32_t k = 0; k < s->nheld; k++)
    if (held(AT(h, k), &s->held[k]))
      return HIPD_EINVAL;
  return 0;
}

static int dev(const msgpack_object *o, report_dev_t *s)
{
  RECORD_READ(o, 1, STATS_DEVICE_NFIELDS, STATS_DEVICE_FIELDS)
  return ctr(AT(o, i), &s->c, s->id);
}

static int uidrec(const msgpack_object *o, report_uid_t *s)
{
  const msgpack_object *c;

  RECORD_READ(o, 1, STATS_UID_NFIELDS, STATS_UID_FIELDS)
  if ((c = arr(AT(o, i), 0, REPORT_MAX_DEVICES)) == NULL)
    return HIPD_EINVAL;
  s->ndev = c->via.array.size;
  for (uint32_t k = 0; k < s->ndev; k++)
    if (ctr(AT(c, k), &s->dev[k], k))
      return HIPD_EINVAL;
  return 0;
}

static int req(const msgpack_object *o, report_req_t *s)
{
  RECORD_READ(o, 0, STATS_REQUEST_NFIELDS, STATS_REQUEST_FIELDS)
  return 0;
}

static int grantrec(const msgpack_object *o, report_grant_t *s)
{
  RECORD_READ(o, 0, STATS_GRANT_NFIELDS, STATS_GRANT_FIELDS)
  return s->serial != 0 ? 0 : HIPD_EINVAL;
}

/* Allocate @p n elements of @p size for the array @p o at *@p out. */
static int alloc_of(const msgpack_object *o, size_t size, void **out,
                    uint32_t *n)
{
  *n = o->via.array.size;
  *out = NULL;
  if (*n == 0)
    return 0;
  return (*out = calloc(*n, size)) != NULL ? 0 : HIPD_ENOMEM;
}

/* The uid of a session or uid record, or UINT64_MAX (malformed: the
 * decoder says so). */
static uint64_t uid_at(const msgpack_object *o, uint32_t at)
{
  uint64_t u;

  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size <= at ||
      proto_obj_uint(AT(o, at), UINT32_MAX, &u) != 0)
    return UINT64_MAX;
  return u;
}

/* Decode @p o; @p only >= 0: keep @p only's records alone. */
static report_t *decode(const msgpack_object *o, int64_t only)
{
  report_t *r = calloc(1, sizeof(*r));
  const msgpack_object *ss, *ds, *us, *rs, *gs = NULL;
  uint64_t ver;
  uint32_t k;

  if (r == NULL)
    return NULL;
  r->refs = 1;
  r->uid = only;
  if ((o = arr(o, 0, STATS_REPORT_PARTS)) == NULL ||
      o->via.array.size < STATS_REPORT_TRUNCATED ||
      (o->via.array.size > STATS_REPORT_TRUNCATED &&
       AT(o, STATS_REPORT_TRUNCATED)->type != MSGPACK_OBJECT_BOOLEAN) ||
      (o->via.array.size > STATS_REPORT_GRANTS_LIST &&
       (gs = arr(AT(o, STATS_REPORT_GRANTS_LIST), 0, REPORT_MAX_GRANTS)) ==
           NULL) ||
      proto_obj_uint(AT(o, STATS_REPORT_VERSION), 1, &ver) || ver != 1 ||
      proto_obj_int(AT(o, STATS_REPORT_PID), 0, INT32_MAX, &r->pid) ||
      (ss = arr(AT(o, STATS_REPORT_SESSIONS_LIST), 0, REPORT_MAX_SESSIONS)) ==
          NULL ||
      (ds = arr(AT(o, STATS_REPORT_DEVICES_LIST), 0, REPORT_MAX_DEVICES)) ==
          NULL ||
      (us = arr(AT(o, STATS_REPORT_UIDS_LIST), 0, REPORT_MAX_UIDS)) == NULL ||
      (rs = arr(AT(o, STATS_REPORT_REQUESTS_LIST), 0, REPORT_MAX_REQUESTS)) ==
          NULL)
    goto fail;
  r->truncated = o->via.array.size > STATS_REPORT_TRUNCATED &&
                 AT(o, STATS_REPORT_TRUNCATED)->via.boolean;
  if (alloc_of(ss, sizeof(*r->sess), (void **)&r->sess, &r->nsess) ||
      alloc_of(ds, sizeof(*r->dev), (void **)&r->dev, &r->ndev) ||
      alloc_of(us, only >= 0 ? 1 : sizeof(*r->uids), (void **)&r->uids,
               &r->nuids) ||
      alloc_of(rs, sizeof(*r->req), (void **)&r->req, &r->nreq))
    goto fail;
  k = 0;
  for (uint32_t i = 0; i < ss->via.array.size; i++) {
    if (only >= 0 && uid_at(AT(ss, i), STATS_SESS_uid) != (uint64_t)only) {
      r->dropped++;
      continue;
    }
    if (sess(AT(ss, i), &r->sess[k++]))
      goto fail;
  }
  r->nsess = k;
  for (uint32_t i = 0; i < r->ndev; i++)
    if (dev(AT(ds, i), &r->dev[i]) || r->dev[i].id != (int64_t)i)
      goto fail;
  if (only >= 0 && r->nuids > 0) {
    /* One record at most: the worker's uid's. */
    free(r->uids);
    if ((r->uids = calloc(1, sizeof(*r->uids))) == NULL)
      goto fail;
  }
  k = 0;
  for (uint32_t i = 0; i < us->via.array.size; i++) {
    if (only >= 0 &&
        (k > 0 || uid_at(AT(us, i), STATS_UID_uid) != (uint64_t)only)) {
      r->dropped++;
      continue;
    }
    if (uidrec(AT(us, i), &r->uids[k++]))
      goto fail;
  }
  r->nuids = k;
  for (uint32_t i = 0; i < r->nreq; i++)
    if (req(AT(rs, i), &r->req[i]))
      goto fail;
  /* Whose grants they are the listener checks (admin.c): a worker's
   * records count only for grants of its uid. */
  if (gs != NULL &&
      alloc_of(gs, sizeof(*r->grants), (void **)&r->grants, &r->ngrants))
    goto fail;
  for (uint32_t i = 0; i < r->ngrants; i++)
    if (grantrec(AT(gs, i), &r->grants[i]))
      goto fail;
  return r;
fail:
  report_free(r);
  return NULL;
}

report_t *report_decode(const msgpack_object *o)
{
  return decode(o, -1);
}

report_t *report_decode_for(const msgpack_object *o, uint64_t uid)
{
  return decode(o, (int64_t)uid);
}

report_t *report_decode_bytes(const char *data, size_t len)
{
  msgpack_unpacked u;
  size_t off = 0;
  report_t *r = NULL;

  msgpack_unpacked_init(&u);
  if (msgpack_unpack_next(&u, data, len, &off) == MSGPACK_UNPACK_SUCCESS &&
      off == len)
    r = report_decode(&u.data);
  msgpack_unpacked_destroy(&u);
  return r;
}

report_t *report_ref(report_t *r)
{
  r->refs++;
  return r;
}

void report_free(report_t *r)
{
  if (r == NULL || --r->refs > 0)
    return;
  for (uint32_t i = 0; i < r->nsess; i++)
    free(r->sess[i].held);
  free(r->sess);
  free(r->dev);
  free(r->uids);
  free(r->req);
  free(r->grants);
  free(r);
}
