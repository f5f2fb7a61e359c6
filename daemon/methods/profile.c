/* SPDX-License-Identifier: MIT */
/* daemon/methods/profile.c: per-session profiling of transfers and
 * launches. */
#include "config.h"

#include "methods.h"

int m_profile_enable(call_t *c)
{
  int rc = profile_enable(&c->s->profile, &c->s->profile_gen);

  if (rc != 0)
    return call_fail(c, rc, "cannot start profiling");
  msgpack_pack_nil(call_result(c));
  return 0;
}

int m_profile_disable(call_t *c)
{
  profile_disable(&c->s->profile);
  msgpack_pack_nil(call_result(c));
  return 0;
}

/* session.profile [clear?] -> {enabled, dropped, records: [{op, stream,
 * bytes, start_ms, end_ms}]}; clear (default false) empties the list. */
int m_session_profile(call_t *c, const session_profile_args_t *a)
{
  profile_t *p = c->s->profile;
  int clear = a->clear.present && a->clear.b;
  msgpack_packer *pk = call_result(c);

  msgpack_pack_map(pk, 3);
  proto_pack_cstr(pk, "enabled");
  if (p != NULL)
    msgpack_pack_true(pk);
  else
    msgpack_pack_false(pk);
  proto_pack_cstr(pk, "dropped");
  msgpack_pack_uint64(pk, p ? p->dropped : 0);
  proto_pack_cstr(pk, "records");
  msgpack_pack_array(pk, p ? p->count : 0);
  for (uint32_t i = 0; p != NULL && i < p->count; i++) {
    const profile_rec_t *r = &p->recs[i];
    msgpack_pack_map(pk, 5);
    proto_pack_cstr(pk, "op");
    proto_pack_cstr(pk, r->op);
    proto_pack_cstr(pk, "stream");
    msgpack_pack_uint64(pk, r->stream);
    proto_pack_cstr(pk, "bytes");
    msgpack_pack_uint64(pk, r->bytes);
    proto_pack_cstr(pk, "start_ms");
    msgpack_pack_double(pk, r->start_ms);
    proto_pack_cstr(pk, "end_ms");
    msgpack_pack_double(pk, r->end_ms);
  }
  if (p != NULL && clear) {
    p->count = 0;
    p->dropped = 0;
  }
  return 0;
}
