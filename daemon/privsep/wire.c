/* SPDX-License-Identifier: MIT */
/* daemon/privsep/wire.c: the table of the privsep channels' messages
 * (wire.h). */
#include "config.h"

#include <string.h>

#include "hipd.h"
#include "privsep/wire.h"

/* One field of a row: where its checked value goes in the row's struct. */
typedef struct wire_param {
  const char *name;
  wire_kind_t kind;
  int64_t min;
  uint64_t max;
  size_t off; /* of its wire_val_t in the row's struct */
} wire_param_t;

enum {
  WIRE_EXACT = 1, /* exactly the listed params */
  WIRE_LAX = 2,   /* params not read */
};

typedef struct wire_msg {
  const char *name;
  int type; /* PROTO_REQUEST or PROTO_NOTIFY */
  wire_from_t from;
  int flags;
  const wire_param_t *params;
  uint32_t nparams;
  const wire_param_t *result; /* an answer that is an array, else NULL */
  uint32_t nresult;
} wire_msg_t;

/* (clang-format would spread each row over many lines.) */
/* clang-format off */
#define SPEC(T, n, k, mn, mx)                                                  \
  {#n, (k), (int64_t)(mn), (uint64_t)(mx), offsetof(T##_t, n)},
#define LIST_(T, LIST) ((const wire_param_t[]){LIST(SPEC, T)})
#define COUNT_(T, LIST) (uint32_t)(sizeof(LIST_(T, LIST)) / sizeof(wire_param_t))
#define PARAMS(T, LIST) .params = LIST_(T, LIST), .nparams = COUNT_(T, LIST)
#define RESULT(T, LIST) .result = LIST_(T, LIST), .nresult = COUNT_(T, LIST)
#define NO_PARAMS .params = NULL, .nparams = 0

static const wire_msg_t rows[WIRE_NMSG] = {
    [WIRE_READY] = {"ready", PROTO_NOTIFY, WIRE_FROM_WORKER, 0,
                    PARAMS(wire_ready, WIRE_READY_PARAMS)},
    [WIRE_CLOSED] = {"closed", PROTO_NOTIFY, WIRE_FROM_WORKER, 0,
                     PARAMS(wire_closed, WIRE_CLOSED_PARAMS)},
    [WIRE_HELLO] = {"hello", PROTO_NOTIFY, WIRE_FROM_WORKER, 0,
                    PARAMS(wire_hello, WIRE_HELLO_PARAMS)},
    [WIRE_COMPILE] = {"compile", PROTO_REQUEST, WIRE_FROM_WORKER, 0,
                      PARAMS(wire_compile, WIRE_COMPILE_PARAMS),
                      RESULT(wire_compile_result, WIRE_COMPILE_RESULT)},
    [WIRE_CACHE_STATS] = {"cache.stats", PROTO_REQUEST, WIRE_FROM_WORKER,
                          WIRE_LAX, NO_PARAMS,
                          RESULT(wire_cache_stats_result,
                                 WIRE_CACHE_STATS_RESULT)},
    [WIRE_COMPILE_STATS] = {"compile.stats", PROTO_REQUEST, WIRE_FROM_WORKER,
                            WIRE_LAX, NO_PARAMS,
                            RESULT(wire_compile_stats_result,
                                   WIRE_COMPILE_STATS_RESULT)},
    [WIRE_CACHE_CLEAR] = {"cache.clear", PROTO_REQUEST, WIRE_FROM_WORKER, 0,
                          PARAMS(wire_cache_clear, WIRE_CACHE_CLEAR_PARAMS)},
    [WIRE_ADMIN] = {"admin", PROTO_REQUEST, WIRE_FROM_WORKER, 0,
                    PARAMS(wire_admin, WIRE_ADMIN_PARAMS),
                    RESULT(wire_admin_result, WIRE_ADMIN_RESULT)},
    [WIRE_CACHE_TOUCH] = {"cache.touch", PROTO_NOTIFY, WIRE_FROM_WORKER,
                          WIRE_EXACT,
                          PARAMS(wire_cache_touch, WIRE_CACHE_TOUCH_PARAMS)},
    [WIRE_CONN] = {"conn", PROTO_NOTIFY, WIRE_FROM_LISTENER, 0,
                   PARAMS(wire_conn, WIRE_CONN_PARAMS)},
    [WIRE_EXIT] = {"exit", PROTO_NOTIFY, WIRE_FROM_LISTENER, WIRE_LAX,
                   NO_PARAMS},
    [WIRE_RELOAD] = {"reload", PROTO_NOTIFY, WIRE_FROM_LISTENER, 0,
                     PARAMS(wire_reload, WIRE_RELOAD_PARAMS)},
    [WIRE_LOG_LEVEL] = {"log.level", PROTO_NOTIFY, WIRE_FROM_LISTENER, 0,
                        PARAMS(wire_log_level, WIRE_LOG_LEVEL_PARAMS)},
    [WIRE_REPORT] = {"report", PROTO_REQUEST, WIRE_FROM_LISTENER, WIRE_EXACT,
                     NO_PARAMS},
    [WIRE_KILL] = {"kill", PROTO_REQUEST, WIRE_FROM_LISTENER, 0,
                   PARAMS(wire_kill, WIRE_KILL_PARAMS)},
    [WIRE_GRANTS] = {"grants", PROTO_NOTIFY, WIRE_FROM_LISTENER, WIRE_EXACT,
                     PARAMS(wire_grants, WIRE_GRANTS_PARAMS)},
    [WIRE_PRELOAD] = {"preload", PROTO_NOTIFY, WIRE_FROM_LISTENER, WIRE_EXACT,
                      PARAMS(wire_preload, WIRE_PRELOAD_PARAMS)},
    [WIRE_CACHE_CLEARED] = {"cache.cleared", PROTO_NOTIFY, WIRE_FROM_LISTENER,
                            WIRE_LAX, NO_PARAMS},
    [WIRE_COMPILER] = {"compiler", PROTO_NOTIFY, WIRE_FROM_LISTENER,
                       WIRE_EXACT, PARAMS(wire_compiler, WIRE_COMPILER_PARAMS)},
    [WIRE_METRICS_READY] = {"ready", PROTO_NOTIFY, WIRE_FROM_METRICS,
                            WIRE_EXACT, NO_PARAMS},
    [WIRE_METRICS] = {"metrics", PROTO_REQUEST, WIRE_FROM_METRICS, WIRE_EXACT,
                      NO_PARAMS},
};
/* clang-format on */

/* The largest struct of named values. */
#define MAX_FIELDS 24
#define FITS_(T)                                                               \
  _Static_assert(sizeof(T) <= MAX_FIELDS * sizeof(wire_val_t), #T);
FITS_(wire_compile_t)
FITS_(wire_conn_t)
FITS_(wire_cache_stats_result_t)
FITS_(wire_compile_stats_result_t)

static int check_one(const wire_param_t *p, const msgpack_object *o,
                     wire_val_t *v)
{
  memset(v, 0, sizeof(*v));
  v->o = o;
  switch (p->kind) {
  case WIRE_UINT:
    return proto_obj_uint(o, p->max, &v->u) == 0 ? 0 : HIPD_EINVAL;
  case WIRE_INT:
    return proto_obj_int(o, p->min, (int64_t)p->max, &v->i) == 0 ? 0
                                                                 : HIPD_EINVAL;
  case WIRE_BYTES:
    if (proto_obj_bytes(o, &v->p, &v->len) != 0 || v->len < (uint64_t)p->min ||
        v->len > p->max)
      return HIPD_EINVAL;
    return 0;
  case WIRE_ARRAY:
    return o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size <= p->max
               ? 0
               : HIPD_EINVAL;
  case WIRE_ANY:
    return 0;
  }
  return HIPD_EINVAL;
}

/* Check the first @p n elements of the array @p a against @p spec into
 * @p out. */
static int check_fields(const wire_param_t *spec, uint32_t n,
                        const msgpack_object *a, void *out)
{
  for (uint32_t i = 0; i < n; i++)
    if (check_one(&spec[i], &a->via.array.ptr[i],
                  (wire_val_t *)((char *)out + spec[i].off)) != 0)
      return HIPD_EINVAL;
  return 0;
}

static int check_params(const wire_msg_t *row, const proto_msg_t *m, void *out)
{
  const msgpack_object *a = m->params;

  if (row->flags & WIRE_LAX)
    return 0;
  if (a == NULL || a->type != MSGPACK_OBJECT_ARRAY ||
      a->via.array.size < row->nparams ||
      ((row->flags & WIRE_EXACT) && a->via.array.size != row->nparams))
    return HIPD_EINVAL;
  return check_fields(row->params, row->nparams, a, out);
}

static int named(const wire_msg_t *row, const proto_msg_t *m)
{
  size_t n = strlen(row->name);

  return m->method != NULL && m->method_len == n &&
         memcmp(m->method, row->name, n) == 0;
}

int wire_dispatch(const wire_handler_fn *handlers, wire_from_t from,
                  const proto_msg_t *m, void *ctx)
{
  wire_val_t vals[MAX_FIELDS];

  for (int id = 0; id < WIRE_NMSG; id++) {
    const wire_msg_t *row = &rows[id];
    if (row->from != from || row->type != m->type || !named(row, m))
      continue;
    if (handlers[id] == NULL)
      return HIPD_EPROTO;
    handlers[id](ctx, m, check_params(row, m, vals) == 0 ? vals : NULL);
    return 0;
  }
  return HIPD_EPROTO;
}

int wire_result(wire_msg_id_t id, const msgpack_object *result, void *out)
{
  const wire_msg_t *row = &rows[id];

  if (row->result == NULL || result == NULL ||
      result->type != MSGPACK_OBJECT_ARRAY ||
      result->via.array.size != row->nresult)
    return HIPD_EINVAL;
  return check_fields(row->result, row->nresult, result, out);
}

void wire_pack_head(msgpack_packer *pk, wire_msg_id_t id, uint32_t msgid)
{
  const wire_msg_t *row = &rows[id];

  if (row->type == PROTO_REQUEST)
    proto_pack_request(pk, msgid, row->name, row->nparams);
  else
    proto_pack_notify(pk, row->name, row->nparams);
}

void wire_pack_result(msgpack_packer *pk, wire_msg_id_t id)
{
  msgpack_pack_array(pk, rows[id].nresult);
}

const char *wire_name(wire_msg_id_t id)
{
  return rows[id].name;
}

int wire_grant(const msgpack_object *o, wire_grant_t *out)
{
  static const wire_param_t spec[] = {WIRE_GRANT_FIELDS(SPEC, wire_grant)};
  const uint32_t n = sizeof(spec) / sizeof(spec[0]);

  if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
    return HIPD_EINVAL;
  return check_fields(spec, n, o, out);
}
