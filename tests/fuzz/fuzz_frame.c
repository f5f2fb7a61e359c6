/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_frame.c: the frame scanner and the message decoder of
 * proto/rpc.c (proto_frame_scan, proto_msg_decode).
 *
 * Input: 5 bytes that choose decode limits (depth, array length, map size,
 * values, message size; small, so that each limit is reachable), then the
 * bytes of a stream. The stream is checked under those limits and under the
 * defaults. Properties, beyond "no crash, no read past the buffer":
 *
 *  - a frame the scanner accepts has a size <= the bytes given; every
 *    strict prefix of it scans as incomplete, with a `need` above the
 *    prefix and at most the frame's size; followed by any bytes it scans to
 *    the same size; msgpack-c decodes exactly those bytes as one object;
 *  - an incomplete scan asks for more than it was given and for no more
 *    than the maximum message size (a message that must be larger is
 *    refused as soon as its headers say so: PROTOCOL.md, decode limits);
 *  - a refusal is EPROTO or EMSGSIZE with a reason, and stays a refusal
 *    whatever follows;
 *  - the limits are exactly those of PROTOCOL.md: a complete object is
 *    accepted if and only if its size, nesting (non-empty containers; empty
 *    ones up to PROTO_DEPTH_CAP), array lengths, map sizes and value count
 *    are within them;
 *  - proto_msg_decode accepts only bytes that are exactly one frame, and
 *    what it returns points into them.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "rpc.h"

/* What a decoded object holds, measured as PROTOCOL.md counts it. */
typedef struct {
  uint64_t objects;
  uint32_t max_array, max_map;
  unsigned level_full;  /* deepest non-empty container, the root at 1 */
  unsigned level_empty; /* deepest empty container */
} shape_t;

static void measure(const msgpack_object *o, unsigned level, shape_t *sh)
{
  sh->objects++;
  if (o->type == MSGPACK_OBJECT_ARRAY) {
    uint32_t n = o->via.array.size;
    if (n > sh->max_array)
      sh->max_array = n;
    if (n == 0 && level > sh->level_empty)
      sh->level_empty = level;
    if (n > 0 && level > sh->level_full)
      sh->level_full = level;
    for (uint32_t i = 0; i < n; i++)
      measure(&o->via.array.ptr[i], level + 1, sh);
  } else if (o->type == MSGPACK_OBJECT_MAP) {
    uint32_t n = o->via.map.size;
    if (n > sh->max_map)
      sh->max_map = n;
    if (n == 0 && level > sh->level_empty)
      sh->level_empty = level;
    if (n > 0 && level > sh->level_full)
      sh->level_full = level;
    for (uint32_t i = 0; i < n; i++) {
      measure(&o->via.map.ptr[i].key, level + 1, sh);
      measure(&o->via.map.ptr[i].val, level + 1, sh);
    }
  }
}

static int shape_within(const shape_t *sh, size_t size,
                        const proto_limits_t *lim)
{
  unsigned depth =
      lim->max_depth < PROTO_DEPTH_CAP ? lim->max_depth : PROTO_DEPTH_CAP;

  return size <= lim->max_message && sh->objects <= lim->max_objects &&
         sh->max_array <= lim->max_array && sh->max_map <= lim->max_map &&
         sh->level_full <= depth && sh->level_empty <= PROTO_DEPTH_CAP;
}

static long long scan(const proto_limits_t *lim, const uint8_t *p, size_t len,
                      size_t *need)
{
  const char *reason = NULL;
  long long r;

  *need = 0;
  r = proto_frame_scan(lim, p, len, need, &reason);
  if (r < 0)
    FUZZ_CHECK((r == HIPD_EPROTO || r == HIPD_EMSGSIZE) && reason != NULL,
               "refusal %lld (%s)", r, reason ? reason : "no reason");
  return r;
}

static uint8_t *copy(const uint8_t *p, size_t len, size_t extra)
{
  uint8_t *c = malloc(len + extra ? len + extra : 1);

  FUZZ_CHECK(c != NULL, "out of memory");
  if (len > 0)
    memcpy(c, p, len);
  return c;
}

/* proto_msg_decode of the exact bytes [p, p + len); checks what it returns.
 * @return its result. */
static int decode(const uint8_t *p, size_t len)
{
  uint8_t *c = copy(p, len, 0); /* exact: a read past it is an ASan error */
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = NULL;
  int rc;

  FUZZ_CHECK(msgpack_zone_init(&zone, 1024), "out of memory");
  rc = proto_msg_decode(c, len, &zone, &m, &reason);
  if (rc != 0) {
    FUZZ_CHECK((rc == HIPD_EPROTO || rc == HIPD_ENOMEM) && reason != NULL,
               "decode failed with %d", rc);
  } else {
    FUZZ_CHECK(m.type >= PROTO_REQUEST && m.type <= PROTO_NOTIFY, "type %d",
               m.type);
    if (m.type == PROTO_RESPONSE) {
      FUZZ_CHECK(m.error != NULL && m.result != NULL, "response parts");
    } else {
      const uint8_t *s = (const uint8_t *)m.method;
      FUZZ_CHECK(m.params != NULL && m.params->type == MSGPACK_OBJECT_ARRAY,
                 "params not an array");
      FUZZ_CHECK(m.method_len == 0 || (s >= c && s + m.method_len <= c + len),
                 "method name outside the message");
    }
  }
  msgpack_zone_destroy(&zone);
  free(c);
  return rc;
}

/* The properties of one stream under one set of limits. */
static void check_stream(const proto_limits_t *lim, const uint8_t *p,
                         size_t len)
{
  size_t need;
  long long r = scan(lim, p, len, &need);

  if (r > 0) {
    size_t n = (size_t)r;
    FUZZ_CHECK(n <= len, "frame of %zu bytes in %zu", n, len);
    /* Every strict prefix (sampled on long frames) is incomplete. */
    for (size_t k = 0; k < n; k++) {
      if (n > 512 && k > 64 && k < n - 64 && k % 61 != 0)
        continue;
      uint8_t *c = copy(p, k, 0);
      size_t kneed;
      long long kr = scan(lim, c, k, &kneed);
      free(c);
      FUZZ_CHECK(kr == 0, "prefix %zu of a %zu-byte frame scans as %lld", k, n,
                 kr);
      FUZZ_CHECK(kneed > k && kneed <= n,
                 "prefix %zu of a %zu-byte frame: need %zu", k, n, kneed);
    }
    /* The exact bytes, and the bytes followed by garbage. */
    uint8_t *c = copy(p, n, 16);
    size_t xneed;
    FUZZ_CHECK(scan(lim, c, n, &xneed) == r, "exact copy scans differently");
    memset(c + n, 0xc1, 16);
    FUZZ_CHECK(scan(lim, c, n + 16, &xneed) == r, "garbage after the frame");
    memset(c + n, 0xdd, 16);
    FUZZ_CHECK(scan(lim, c, n + 16, &xneed) == r, "a header after the frame");
    free(c);
    /* msgpack-c reads the same frame, and the limits held. */
    msgpack_zone zone;
    msgpack_object o;
    size_t off = 0;
    shape_t sh = {0};
    c = copy(p, n, 0);
    FUZZ_CHECK(msgpack_zone_init(&zone, 1024), "out of memory");
    int u = msgpack_unpack((const char *)c, n, &off, &zone, &o);
    FUZZ_CHECK(u == MSGPACK_UNPACK_SUCCESS && off == n,
               "msgpack-c: %d at %zu of a %zu-byte frame", u, off, n);
    measure(&o, 1, &sh);
    FUZZ_CHECK(shape_within(&sh, n, lim),
               "accepted a frame beyond the limits (%zu bytes, %llu values, "
               "array %u, map %u, depth %u/%u)",
               n, (unsigned long long)sh.objects, sh.max_array, sh.max_map,
               sh.level_full, sh.level_empty);
    msgpack_zone_destroy(&zone);
    free(c);
    decode(p, n);
    if (n < len)
      FUZZ_CHECK(decode(p, len) != 0,
                 "decoded %zu bytes holding a %zu-byte "
                 "frame",
                 len, n);
  } else if (r == 0) {
    FUZZ_CHECK(need > len, "incomplete at %zu bytes but need %zu", len, need);
    FUZZ_CHECK(need <= lim->max_message,
               "need %zu bytes, more than the maximum message (%zu): the "
               "message cannot fit and should be refused",
               need, lim->max_message);
  } else {
    /* A refusal is final, whatever follows. */
    uint8_t *c = copy(p, len, 16);
    size_t xneed;
    memset(c + len, 0x00, 16);
    FUZZ_CHECK(scan(lim, c, len + 16, &xneed) == r,
               "refusal %lld changed by more bytes", r);
    free(c);
  }
}

/* Limits exact, not too strict: measure the first object (framed under
 * limits that refuse only what cannot be complete in @p len bytes) and
 * compare with what the scanner says under @p lim. */
static void check_exact(const proto_limits_t *lim, const uint8_t *p, size_t len)
{
  proto_limits_t open = {.max_message = len,
                         .max_depth = PROTO_DEPTH_CAP,
                         .max_array = UINT32_MAX,
                         .max_map = UINT32_MAX,
                         .max_objects = UINT32_MAX};
  size_t need;
  long long ro = scan(&open, p, len, &need), r;

  if (ro == HIPD_EMSGSIZE)
    return; /* headers claim more than there is: msgpack-c would allocate */
  if (ro <= 0) {
    /* Not one object in these bytes: the decoder must refuse them too. */
    FUZZ_CHECK(decode(p, len) != 0, "decoded what the scanner refused (%lld)",
               ro);
    return;
  }
  if ((size_t)ro != len)
    FUZZ_CHECK(decode(p, len) != 0, "decoded bytes after the frame");

  uint8_t *c = copy(p, (size_t)ro, 0);
  msgpack_zone zone;
  msgpack_object o;
  size_t off = 0;
  shape_t sh = {0};
  FUZZ_CHECK(msgpack_zone_init(&zone, 1024), "out of memory");
  FUZZ_CHECK(msgpack_unpack((const char *)c, (size_t)ro, &off, &zone, &o) ==
                     MSGPACK_UNPACK_SUCCESS &&
                 off == (size_t)ro,
             "msgpack-c disagrees on a %lld-byte frame", ro);
  measure(&o, 1, &sh);
  msgpack_zone_destroy(&zone);
  free(c);
  r = scan(lim, p, len, &need);
  if (shape_within(&sh, (size_t)ro, lim))
    FUZZ_CHECK(r == ro, "a %lld-byte object within the limits scans as %lld",
               ro, r);
  else
    FUZZ_CHECK(r < 0, "a %lld-byte object beyond the limits scans as %lld", ro,
               r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  proto_limits_t def, lim;

  proto_limits_default(&def);
  if (size < 5) {
    check_stream(&def, data, size);
    return 0;
  }
  lim.max_depth = data[0] % (PROTO_DEPTH_CAP + 2); /* 0 to 33: capped */
  /* Small counts, or the defaults: a message size limit below what the
   * counts allow is where a scanner can miss a message too large to fit. */
  lim.max_array = data[1] < 128 ? data[1] % 32 : def.max_array;
  lim.max_map = data[2] < 128 ? data[2] % 16 : def.max_map;
  lim.max_objects = 1 + data[3];
  lim.max_message = 1 + (size_t)data[4] * 16;
  data += 5;
  size -= 5;
  check_stream(&lim, data, size);
  check_stream(&def, data, size);
  check_exact(&lim, data, size);
  check_exact(&def, data, size);
  return 0;
}
