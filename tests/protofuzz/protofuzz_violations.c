/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_violations.c: protocol violations on purpose (bad
 * msgids, wrong message shapes, decode limits, truncated frames), stalls and
 * garbage (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

/* ------------------------------------------------- protocol violations */

void pack_head(msgpack_packer *pk, uint32_t msgid, const char *m)
{
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, 0);
  msgpack_pack_uint32(pk, msgid);
  msgpack_pack_str(pk, strlen(m));
  msgpack_pack_str_body(pk, m, strlen(m));
}

/* Send a message that breaks the protocol: the daemon must close the
 * connection. */

void send_violation(conn_t *c)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  char what[96];
  int kind = (int)rnd(16);
  uint8_t raw[16];
  size_t nraw = 0;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  switch (kind) {
  case 0: /* negative msgid */
  case 1: /* msgid above 2^32-1 */
  case 2: /* float, str or nil msgid */
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, 0);
    if (kind == 0)
      msgpack_pack_int64(&pk, -1 - (int64_t)rnd(1000));
    else if (kind == 1)
      msgpack_pack_uint64(&pk, (1ull << 32) + rnd(1000));
    else if (chance(3))
      msgpack_pack_double(&pk, 1.0);
    else if (chance(2))
      msgpack_pack_str_with_body(&pk, "7", 1);
    else
      msgpack_pack_nil(&pk);
    msgpack_pack_str_with_body(&pk, "ping", 4);
    msgpack_pack_array(&pk, 0);
    snprintf(what, sizeof(what), "bad msgid");
    break;
  case 3: /* not an array */
    if (chance(2))
      msgpack_pack_uint32(&pk, rnd64() & 0x7fffffff);
    else {
      msgpack_pack_map(&pk, 1);
      msgpack_pack_nil(&pk);
      msgpack_pack_nil(&pk);
    }
    snprintf(what, sizeof(what), "not an array");
    break;
  case 4: /* a request of 3 or 5 elements, an empty array */
    msgpack_pack_array(&pk, chance(3) ? 0 : (chance(2) ? 3 : 5));
    if (sb.size == 1 && sb.data[0] == (char)0x90)
      ;
    else {
      msgpack_pack_uint8(&pk, 0);
      msgpack_pack_uint32(&pk, 1);
      msgpack_pack_str_with_body(&pk, "ping", 4);
      if (((uint8_t)sb.data[0] & 0x0f) == 5) {
        msgpack_pack_array(&pk, 0);
        msgpack_pack_nil(&pk);
      }
    }
    snprintf(what, sizeof(what), "wrong request arity");
    break;
  case 5: /* a response from the client */
    proto_pack_response(&pk, 1);
    msgpack_pack_nil(&pk);
    snprintf(what, sizeof(what), "response from the client");
    break;
  case 6: /* unknown message type */
    msgpack_pack_array(&pk, 4);
    if (chance(2))
      msgpack_pack_uint8(&pk, 3 + (uint8_t)rnd(200));
    else
      msgpack_pack_int8(&pk, -1);
    msgpack_pack_uint32(&pk, 1);
    msgpack_pack_str_with_body(&pk, "ping", 4);
    msgpack_pack_array(&pk, 0);
    snprintf(what, sizeof(what), "unknown message type");
    break;
  case 7: /* method not a string */
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, 0);
    msgpack_pack_uint32(&pk, 1);
    if (chance(2))
      msgpack_pack_uint8(&pk, 7);
    else
      msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 0);
    snprintf(what, sizeof(what), "method not a string");
    break;
  case 8: /* params not an array */
    pack_head(&pk, 1, "ping");
    if (chance(2))
      msgpack_pack_map(&pk, 0);
    else
      msgpack_pack_nil(&pk);
    snprintf(what, sizeof(what), "params not an array");
    break;
  case 9: { /* nested deeper than --max-depth */
    unsigned depth = 17 + rnd(10);
    pack_head(&pk, 1, "ping");
    for (unsigned i = 0; i < depth; i++)
      msgpack_pack_array(&pk, 1);
    msgpack_pack_nil(&pk);
    snprintf(what, sizeof(what), "nested %u deep", depth);
    break;
  }
  case 10: /* an array or map declared larger than its limit */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 1);
    if (chance(2))
      msgpack_pack_array(&pk, (1u << 20) + 1 + rnd(1000));
    else
      msgpack_pack_map(&pk, (1u << 16) + 1 + rnd(1000));
    snprintf(what, sizeof(what), "container over its limit (header only)");
    break;
  case 11: /* a str or bin declared larger than the message limit */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 1);
    if (chance(2))
      msgpack_pack_str(&pk, (9u << 20) + rnd(1u << 30));
    else
      msgpack_pack_bin(&pk, (9u << 20) + rnd(1u << 30));
    snprintf(what, sizeof(what), "str/bin over the message limit (header)");
    break;
  case 12: /* the byte 0xc1 */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 1);
    raw[nraw++] = 0xc1;
    snprintf(what, sizeof(what), "0xc1");
    break;
  case 13: /* too many values: 4M + 1 nils in five arrays */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 5);
    for (int a = 0; a < 5; a++) {
      uint32_t n = a < 4 ? (1u << 20) - 2 : 100;
      msgpack_pack_array(&pk, n);
      for (uint32_t i = 0; i < n; i++)
        msgpack_pack_nil(&pk);
    }
    snprintf(what, sizeof(what), "too many values");
    break;
  case 14: /* more than 8 descriptors for an incomplete request */
  default: {
    int fds[MAX_FDS], n = 0, want = 9 + (int)rnd(MAX_FDS - 8);
    pack_head(&pk, new_msgid(c), "ping");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_bin(&pk, 64);
    msgpack_pack_bin_body(&pk, bigbuf, 64);
    size_t cut = 1 + rnd((uint32_t)sb.size - 1);
    for (int i = 0; i < want; i++) {
      int k = (int)rnd(FD_NKINDS);
      /* Only kinds the daemon can take, so that the close is the
       * violation and not a refused descriptor (both are fine). */
      if (k == FD_OPATH || k == FD_HIPD_CONN)
        k = FD_EVENTFD;
      int fd = fd_make(k, 4096);
      if (fd >= 0) {
        fds[n++] = fd;
        st.fds_by_kind[k]++;
        st.fds_sent++;
      }
    }
    ring_add(c, 0, "an incomplete request with 9 or more descriptors",
             (const uint8_t *)sb.data, cut);
    wq_push(c, sb.data, cut, fds, n);
    msgpack_sbuffer_destroy(&sb);
    c->doomed = 1;
    c->doomed_at = harness_now_ms();
    c->doom_what = "more than 8 descriptors with an incomplete request";
    st.violations++;
    st.requests++;
    return;
  }
  }
  if (nraw)
    msgpack_sbuffer_write(&sb, (const char *)raw, nraw);
  ring_add(c, 0, what, (const uint8_t *)sb.data, sb.size);
  wq_push(c, sb.data, sb.size, NULL, 0);
  msgpack_sbuffer_destroy(&sb);
  c->doomed = 1;
  c->doomed_at = harness_now_ms();
  c->doom_what = "a protocol violation";
  st.violations++;
  st.requests++;
}

/* Send the first bytes of a request, and no more: the daemon must close
 * the connection (--request-timeout). */

void send_stall(conn_t *c)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  pack_head(&pk, new_msgid(c), "mem.write");
  msgpack_pack_array(&pk, 3);
  msgpack_pack_uint64(&pk, rnd64());
  msgpack_pack_uint8(&pk, 0);
  msgpack_pack_bin(&pk, 4096);
  msgpack_pack_bin_body(&pk, bigbuf, 4096);
  size_t cut = 1 + rnd((uint32_t)sb.size - 1);
  ring_add(c, 0, "truncated, kept open", (const uint8_t *)sb.data, cut);
  wq_push(c, sb.data, cut, NULL, 0);
  msgpack_sbuffer_destroy(&sb);
  c->doomed = 1;
  c->doomed_at = harness_now_ms();
  c->doom_what = "a truncated request";
  st.stalled++;
  st.requests++;
}

/* Send random bytes. */

void send_garbage(conn_t *c)
{
  uint8_t g[64];
  size_t n = 1 + rnd(sizeof(g));

  for (size_t i = 0; i < n; i++)
    g[i] = (uint8_t)rnd64();
  ring_add(c, 0, "garbage", g, n);
  wq_push(c, g, n, NULL, 0);
  c->maybe = 1;
  c->doomed_at = harness_now_ms();
  st.garbage++;
  st.requests++;
}
