/* SPDX-License-Identifier: MIT */
/* client/event.c: events (`event.*`) and profiling (`profile.*`,
 * `session.profile`). */
#include "config.h"

#include "conn.h"

/* ----------------------------------------------------------------- events */

int hipd_event_create(hipd_conn_t *conn, int dev, hipd_event_t *out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "event.create: out is NULL");
  *out = HIPD_EVENT_NULL;
  if ((err = conn_check_device(conn, "event.create", dev)) < 0 ||
      (err = conn_call_begin(conn, "event.create", 1, &c)) < 0)
    return err;
  conn_pack_device(&c->pk, dev);
  err = conn_call_send(c, conn_decode_uint, CONN_OUTS(0, &out->id_), &call);
  return conn_sync(err, &call);
}

int hipd_event_destroy(hipd_conn_t *conn, hipd_event_t event)
{
  hipd_call_t *call;

  return conn_sync(conn_call_handle(conn, "event.destroy", hipd_event_id(event),
                                    conn_decode_none, CONN_OUTS(0, NULL),
                                    &call),
                   &call);
}

/* Stream 0 is left out: the daemon then records on the session's default
 * stream of the event's device. */
int hipd_event_record_begin(hipd_conn_t *conn, hipd_event_t event,
                            hipd_stream_t stream, hipd_call_t **call)
{
  hipd_call_t *c;
  int err =
      conn_call_begin(conn, "event.record", hipd_stream_id(stream) ? 2 : 1, &c);

  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_event_id(event));
  if (hipd_stream_id(stream) != 0)
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  return conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), call);
}

int hipd_event_record(hipd_conn_t *conn, hipd_event_t event,
                      hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(hipd_event_record_begin(conn, event, stream, &call), &call);
}

int hipd_event_query(hipd_conn_t *conn, hipd_event_t event, int *done)
{
  hipd_call_t *call;

  if (done == NULL)
    return conn_fail(conn, HIPD_EINVAL, "event.query: done is NULL");
  return conn_sync(conn_call_handle(conn, "event.query", hipd_event_id(event),
                                    conn_decode_bool, CONN_OUTS(0, done),
                                    &call),
                   &call);
}

int hipd_event_synchronize(hipd_conn_t *conn, hipd_event_t event)
{
  hipd_call_t *call;

  return conn_sync(conn_call_handle(conn, "event.synchronize",
                                    hipd_event_id(event), conn_decode_none,
                                    CONN_OUTS(0, NULL), &call),
                   &call);
}

int hipd_event_elapsed(hipd_conn_t *conn, hipd_event_t start, hipd_event_t stop,
                       float *ms)
{
  hipd_call_t *c, *call;
  int err;

  if (ms == NULL)
    return conn_fail(conn, HIPD_EINVAL, "event.elapsed: ms is NULL");
  err = conn_call_begin(conn, "event.elapsed", 2, &c);
  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_event_id(start));
  msgpack_pack_uint64(&c->pk, hipd_event_id(stop));
  err = conn_call_send(c, conn_decode_float, CONN_OUTS(0, ms), &call);
  return conn_sync(err, &call);
}

/* -------------------------------------------------------------- profiling */

static int profile_switch(hipd_conn_t *conn, const char *method)
{
  hipd_call_t *c, *call;
  int err = conn_call_begin(conn, method, 0, &c);

  if (err < 0)
    return err;
  err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}

int hipd_profile_enable(hipd_conn_t *conn)
{
  return profile_switch(conn, "profile.enable");
}

int hipd_profile_disable(hipd_conn_t *conn)
{
  return profile_switch(conn, "profile.disable");
}

int hipd_session_profile(hipd_conn_t *conn, int clear, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "session.profile: out is NULL");
  *out = NULL;
  err = conn_call_begin(conn, "session.profile", 1, &c);
  if (err < 0)
    return err;
  if (clear)
    msgpack_pack_true(&c->pk);
  else
    msgpack_pack_false(&c->pk);
  err = conn_call_send(c, info_decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}
