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
  msgpack_packer *pk;
  pack_map_t m, rec;

  pack_map_begin(&m, call_result(c));
  pack_kv_bool(&m, "enabled", p != NULL);
  pack_kv_u64(&m, "dropped", p ? p->dropped : 0);
  pk = pack_key(&m, "records");
  msgpack_pack_array(pk, p ? p->count : 0);
  for (uint32_t i = 0; p != NULL && i < p->count; i++) {
    const profile_rec_t *r = &p->recs[i];
    pack_map_begin(&rec, pk);
    pack_kv_str(&rec, "op", r->op);
    pack_kv_u64(&rec, "stream", r->stream);
    pack_kv_u64(&rec, "bytes", r->bytes);
    pack_kv_f64(&rec, "start_ms", r->start_ms);
    pack_kv_f64(&rec, "end_ms", r->end_ms);
    pack_map_end(&rec);
  }
  pack_map_end(&m);
  if (p != NULL && clear) {
    p->count = 0;
    p->dropped = 0;
  }
  return 0;
}
