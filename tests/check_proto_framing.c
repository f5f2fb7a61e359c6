/* SPDX-License-Identifier: MIT */
/* tests/check_proto_framing.c: the frame scanner of proto/: the default
 * limits, every truncation of the samples, need hints, concatenated
 * messages, the message, length, object and depth limits, invalid bytes,
 * and random bytes and mutations (suite "framing"). The shared helpers are
 * in tests/lib/proto_util.h. */
#include "proto_util.h"
#include "run.h"

/* ------------------------------------------------------------- framing */

START_TEST(test_limits_default)
{
  proto_limits_t lim;

  memset(&lim, 0xff, sizeof(lim));
  proto_limits_default(&lim);
  ck_assert_uint_eq(lim.max_message, (size_t)512 << 20);
  ck_assert_uint_eq(lim.max_message, PROTO_DEFAULT_MAX_MESSAGE);
  ck_assert_uint_eq(lim.max_depth, 16);
  ck_assert_uint_le(lim.max_depth, PROTO_DEPTH_CAP);
  ck_assert_uint_eq(lim.max_array, 1u << 20);
  ck_assert_uint_eq(lim.max_map, 1u << 16);
  ck_assert_uint_eq(lim.max_objects, 4u << 20);
}
END_TEST

/* Every sample, fed one byte at a time and cut at every point. */
START_TEST(test_frame_every_truncation)
{
  proto_limits_t lim;
  buf_t b;

  proto_limits_default(&lim);
  buf_init(&b);
  sample_build(_i, &b);
  const uint8_t *msg = (const uint8_t *)b.sb.data;
  size_t len = b.sb.size;

  ck_assert_uint_eq(reference_size(msg, len), len);
  check_prefixes(&lim, msg, len);
  buf_destroy(&b);
}
END_TEST

/* Each sample is a valid message that decodes to its type. */
START_TEST(test_frame_samples_decode)
{
  proto_limits_t lim;
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason = NULL;
  size_t need;

  proto_limits_default(&lim);
  buf_init(&b);
  int type = sample_build(_i, &b);
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   (long long)b.sb.size);
  msgpack_zone_init(&zone, 4096);
  ck_assert_int_eq(proto_msg_decode((const uint8_t *)b.sb.data, b.sb.size,
                                    &zone, &msg, &reason),
                   0);
  ck_assert_int_eq(msg.type, type);
  if (type != PROTO_RESPONSE) {
    ck_assert_ptr_nonnull(msg.method);
    ck_assert_ptr_nonnull(msg.params);
    ck_assert_int_eq(msg.params->type, MSGPACK_OBJECT_ARRAY);
  }
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

/* A reader that sleeps until it has `need` bytes gets the message in a
 * handful of scans, never waiting for more than the message holds. */
START_TEST(test_frame_need_hint)
{
  proto_limits_t lim;
  buf_t b;
  size_t need;
  const char *reason;

  proto_limits_default(&lim);
  for (int i = 0; i < NSAMPLES; i++) {
    buf_init(&b);
    sample_build(i, &b);
    const uint8_t *msg = (const uint8_t *)b.sb.data;
    size_t len = b.sb.size, have = 0;
    unsigned scans = 0;
    for (;;) {
      long long rc = scan(&lim, msg, have, &need, &reason);
      scans++;
      if (rc != 0) {
        ck_assert_int_eq(rc, (long long)len);
        break;
      }
      ck_assert_uint_gt(need, have);
      ck_assert_uint_le(need, len);
      have = need;
    }
    /* Big payloads are skipped, not read a byte at a time. */
    ck_assert_msg(scans <= 200, "sample %d: %u scans for %zu bytes", i, scans,
                  len);
    buf_destroy(&b);
  }
}
END_TEST

/* Once the header of a str/bin/ext is in, the hint is exact. */
START_TEST(test_frame_need_exact_for_payload)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;
  static const size_t sizes[] = {0, 5, 31, 32, 255, 256, 65535, 65536, BIG};

  proto_limits_default(&lim);
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    for (int kind = 0; kind < 3; kind++) {
      buf_t b;
      buf_init(&b);
      if (kind == 0)
        pack_filled_str(&b.pk, sizes[s], 'q');
      else if (kind == 1)
        pack_filled_bin(&b.pk, sizes[s]);
      else
        pack_filled_ext(&b.pk, sizes[s], 9);
      size_t len = b.sb.size;
      /* The header is everything before the payload. */
      size_t head = len - sizes[s];
      for (size_t k = head; k < len; k += 1 + k / 8) {
        ck_assert_int_eq(scan(&lim, b.sb.data, k, &need, &reason), 0);
        ck_assert_uint_eq(need, len);
      }
      ck_assert_int_eq(scan(&lim, b.sb.data, len, &need, &reason),
                       (long long)len);
      buf_destroy(&b);
    }
  }
}
END_TEST

/* Many messages back to back in one buffer, with a partial one at the end. */
START_TEST(test_frame_concatenated)
{
  proto_limits_t lim;
  buf_t b;
  size_t sizes[3 * NSAMPLES + 1], n = 0, need;
  const char *reason;

  proto_limits_default(&lim);
  buf_init(&b);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < NSAMPLES; i++) {
      size_t before = b.sb.size;
      sample_build((i + round) % NSAMPLES, &b);
      sizes[n++] = b.sb.size - before;
    }
  }
  size_t complete = b.sb.size;
  /* Half of the first sample again, cut off. */
  buf_t first;
  buf_init(&first);
  sample_build(1, &first);
  raw(&b, first.sb.data, first.sb.size / 2);

  const uint8_t *p = (const uint8_t *)b.sb.data;
  size_t off = 0;
  for (size_t k = 0; k < n; k++) {
    long long rc = scan(&lim, p + off, b.sb.size - off, &need, &reason);
    ck_assert_int_eq(rc, (long long)sizes[k]);
    ck_assert_uint_eq(reference_size(p + off, b.sb.size - off), sizes[k]);
    off += (size_t)rc;
  }
  ck_assert_uint_eq(off, complete);
  ck_assert_int_eq(scan(&lim, p + off, b.sb.size - off, &need, &reason), 0);
  ck_assert_uint_gt(need, b.sb.size - off);
  ck_assert_uint_le(need, first.sb.size);
  /* Nothing left at all: one byte is the least a message can have. */
  ck_assert_int_eq(scan(&lim, p + complete, 0, &need, &reason), 0);
  ck_assert_uint_eq(need, 1);
  buf_destroy(&first);
  buf_destroy(&b);
}
END_TEST

/* Scalars are messages too as far as framing goes: each has its size. */
START_TEST(test_frame_scalars)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;
  static const struct {
    const char *bytes;
    size_t len;
  } cases[] = {
#define S(lit) {lit, sizeof(lit) - 1}
      S("\x00"),
      S("\x7f"),
      S("\xe0"),
      S("\xff"),
      S("\xc0"),
      S("\xc2"),
      S("\xc3"),
      S("\xcc\x01"),
      S("\xcd\x01\x02"),
      S("\xce\x01\x02\x03\x04"),
      S("\xcf\x01\x02\x03\x04\x05\x06\x07\x08"),
      S("\xd0\x01"),
      S("\xd1\x01\x02"),
      S("\xd2\x01\x02\x03\x04"),
      S("\xd3\x01\x02\x03\x04\x05\x06\x07\x08"),
      S("\xca\x01\x02\x03\x04"),
      S("\xcb\x01\x02\x03\x04\x05\x06\x07\x08"),
      S("\xd4\x01\x02"),
      S("\xd5\x01\x02\x03"),
      S("\xd6\x01\x02\x03\x04\x05"),
      S("\xd7\x01\x02\x03\x04\x05\x06\x07\x08\x09"),
      S("\xd8\x01"
        "0123456789abcdef"),
      S("\xa0"),
      S("\xbf"
        "0123456789abcdef0123456789abcde"),
      S("\x80"),
      S("\x90"),
#undef S
  };

  proto_limits_default(&lim);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ck_assert_uint_eq(reference_size(cases[i].bytes, cases[i].len),
                      cases[i].len);
    check_prefixes(&lim, (const uint8_t *)cases[i].bytes, cases[i].len);
    /* Extra bytes after it are not part of it. */
    char more[64];
    memcpy(more, cases[i].bytes, cases[i].len);
    memset(more + cases[i].len, 0x01, sizeof(more) - cases[i].len);
    ck_assert_int_eq(scan(&lim, more, sizeof(more), &need, &reason),
                     (long long)cases[i].len);
  }
}
END_TEST

/* A message of exactly max_message bytes passes; one byte more does not. */
START_TEST(test_frame_max_message)
{
  proto_limits_t lim;
  buf_t b;
  size_t need;
  const char *reason;

  proto_limits_default(&lim);
  buf_init(&b);
  proto_pack_request(&b.pk, 1, "mem.write", 1);
  pack_filled_bin(&b.pk, 1000);
  lim.max_message = b.sb.size;
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   (long long)b.sb.size);
  lim.max_message = b.sb.size - 1;
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  /* The bin header alone already tells. */
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size - 1000, &need, &reason),
                   HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);

  /* A fixed-size value that crosses the limit, known from its type byte. */
  static const uint8_t tail[] = {0x94, 0x00, 0x01, 0xa1, 'm', 0x91, 0xcf, 1,
                                 2,    3,    4,    5,    6,   7,    8};
  lim.max_message = sizeof(tail);
  ck_assert_int_eq(scan(&lim, tail, sizeof(tail), &need, &reason),
                   (long long)sizeof(tail));
  lim.max_message = sizeof(tail) - 1;
  ck_assert_int_eq(scan(&lim, tail, sizeof(tail), &need, &reason),
                   HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  ck_assert_int_eq(scan(&lim, tail, 7, &need, &reason), HIPD_EMSGSIZE);
  lim.max_message = 8;
  ck_assert_int_eq(scan(&lim, tail + 6, 9, &need, &reason), HIPD_EMSGSIZE);

  /* Many small values: each takes at least a byte, known from the array
   * header. */
  buf_t a;
  buf_init(&a);
  msgpack_pack_array(&a.pk, 200);
  for (int i = 0; i < 200; i++)
    msgpack_pack_int(&a.pk, i);
  lim.max_message = 100;
  ck_assert_int_eq(scan(&lim, a.sb.data, 3, &need, &reason), HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  lim.max_message = a.sb.size;
  ck_assert_int_eq(scan(&lim, a.sb.data, a.sb.size, &need, &reason),
                   (long long)a.sb.size);
  buf_destroy(&a);
  buf_destroy(&b);
}
END_TEST

/* A header claiming 4 GiB is refused before any of the payload arrives. */
/* Counts spread over nesting levels add up: two nested arrays of 40 each
 * need more than 49 bytes although neither does alone, so the second
 * header is refused, not scanned as incomplete with a need past the limit
 * (found by tests/fuzz/fuzz_frame). */
START_TEST(test_frame_nested_counts_add_up)
{
  static const uint8_t two[] = {0xdc, 0x00, 0x28, 0xdc, 0x00, 0x28, 0x01};
  proto_limits_t lim;
  size_t need;
  const char *reason;

  proto_limits_default(&lim);
  lim.max_message = 49;
  ck_assert_int_eq(scan(&lim, two, 3, &need, &reason), 0);
  ck_assert_uint_le(need, lim.max_message);
  ck_assert_int_eq(scan(&lim, two, 6, &need, &reason), HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  ck_assert_int_eq(scan(&lim, two, sizeof(two), &need, &reason), HIPD_EMSGSIZE);
  /* With room for both, it is incomplete and says how much it needs. */
  lim.max_message = 6 + 39 + 40;
  ck_assert_int_eq(scan(&lim, two, 6, &need, &reason), 0);
  ck_assert_uint_eq(need, 6 + 39 + 40);
  /* A payload counts with the values after it: a bin of 40 then 9 more
   * values do not fit in 49 bytes. */
  static const uint8_t bin[] = {0x9a, 0xc4, 0x28};
  lim.max_message = 49;
  ck_assert_int_eq(scan(&lim, bin, sizeof(bin), &need, &reason), HIPD_EMSGSIZE);
  lim.max_message = 1 + 2 + 40 + 9;
  ck_assert_int_eq(scan(&lim, bin, sizeof(bin), &need, &reason), 0);
  ck_assert_uint_eq(need, lim.max_message);
}
END_TEST

START_TEST(test_frame_huge_claims)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;
  static const struct {
    const char *bytes;
    size_t len;
  } cases[] = {
#define S(lit) {lit, sizeof(lit) - 1}
      S("\xc6\xff\xff\xff\xff"),                      /* bin32 */
      S("\xdb\xff\xff\xff\xff"),                      /* str32 */
      S("\xc9\xff\xff\xff\xff\x01"),                  /* ext32 */
      S("\x94\x00\x01\xa1m\x91\xc6\xff\xff\xff\xff"), /* inside a request */
      S("\x94\x00\x01\xa1m\x91\xdb\x20\x00\x00\x01"), /* 512 MiB + 1 */
#undef S
  };

  proto_limits_default(&lim);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    long long rc = scan(&lim, cases[i].bytes, cases[i].len, &need, &reason);
    ck_assert_msg(rc == HIPD_EMSGSIZE, "case %zu: %lld", i, rc);
    ck_assert_ptr_nonnull(reason);
  }

  /* Exactly 512 MiB of message is allowed: str32 header + payload. */
  static const uint8_t ok[] = {0xdb, 0x1f, 0xff, 0xff, 0xfb};
  ck_assert_int_eq(scan(&lim, ok, sizeof(ok), &need, &reason), 0);
  ck_assert_uint_eq(need, PROTO_DEFAULT_MAX_MESSAGE);

  /* With the limit raised, the claim is believed and the hint is exact. */
  if (sizeof(size_t) >= 8) {
    lim.max_message = (size_t)8 << 30;
    ck_assert_int_eq(scan(&lim, cases[0].bytes, cases[0].len, &need, &reason),
                     0);
    ck_assert_uint_eq(need, 5 + (size_t)0xffffffffu);
  }
}
END_TEST

/* Counts are checked from the header, before the elements arrive. */
START_TEST(test_frame_array_map_limits)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;
  buf_t b;

  proto_limits_default(&lim);
  lim.max_array = 10;
  lim.max_map = 4;

  buf_init(&b);
  msgpack_pack_array(&b.pk, 10);
  for (int i = 0; i < 10; i++)
    msgpack_pack_int(&b.pk, i);
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   (long long)b.sb.size);
  buf_destroy(&b);

  buf_init(&b);
  msgpack_pack_array(&b.pk, 11);
  for (int i = 0; i < 11; i++)
    msgpack_pack_int(&b.pk, i);
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  ck_assert_int_eq(scan(&lim, b.sb.data, 1, &need, &reason), HIPD_EMSGSIZE);
  buf_destroy(&b);

  /* Nested inside a request, with array16/32 headers alone. */
  static const uint8_t a16[] = {0x94, 0x00, 0x01, 0xa1, 'm', 0xdc, 0x00, 0x0b};
  static const uint8_t a32[] = {0x94, 0x00, 0x01, 0xa1, 'm',
                                0xdd, 0xff, 0xff, 0xff, 0xff};
  ck_assert_int_eq(scan(&lim, a16, sizeof(a16), &need, &reason), HIPD_EMSGSIZE);
  ck_assert_int_eq(scan(&lim, a32, sizeof(a32), &need, &reason), HIPD_EMSGSIZE);
  proto_limits_t deflim;
  proto_limits_default(&deflim);
  ck_assert_int_eq(scan(&deflim, a32, sizeof(a32), &need, &reason),
                   HIPD_EMSGSIZE);
  /* Even with no count limit, 4G one-byte values exceed 512 MiB. */
  deflim.max_array = UINT32_MAX;
  ck_assert_int_eq(scan(&deflim, a32, sizeof(a32), &need, &reason),
                   HIPD_EMSGSIZE);

  buf_init(&b);
  msgpack_pack_map(&b.pk, 4);
  for (int i = 0; i < 4; i++) {
    msgpack_pack_int(&b.pk, i);
    msgpack_pack_nil(&b.pk);
  }
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   (long long)b.sb.size);
  buf_destroy(&b);

  buf_init(&b);
  msgpack_pack_map(&b.pk, 5);
  for (int i = 0; i < 5; i++) {
    msgpack_pack_int(&b.pk, i);
    msgpack_pack_nil(&b.pk);
  }
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  buf_destroy(&b);

  static const uint8_t m32[] = {0xdf, 0x00, 0x01, 0x00, 0x00};
  ck_assert_int_eq(scan(&lim, m32, sizeof(m32), &need, &reason), HIPD_EMSGSIZE);
  /* The default limit is 64K pairs: 65537 is refused, 65536 awaited. */
  static const uint8_t m32b[] = {0xdf, 0x00, 0x01, 0x00, 0x01};
  ck_assert_int_eq(scan(&deflim, m32b, sizeof(m32b), &need, &reason),
                   HIPD_EMSGSIZE);
  static const uint8_t m32c[] = {0xdf, 0x00, 0x01, 0x00, 0x00};
  ck_assert_int_eq(scan(&deflim, m32c, sizeof(m32c), &need, &reason), 0);
  ck_assert_uint_eq(need, sizeof(m32c) + 2 * 65536);
}
END_TEST

START_TEST(test_frame_max_objects)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;
  buf_t b;

  proto_limits_default(&lim);
  lim.max_objects = 10;

  /* The array and its 9 elements: 10 values. */
  buf_init(&b);
  msgpack_pack_array(&b.pk, 9);
  for (int i = 0; i < 9; i++)
    msgpack_pack_int(&b.pk, i);
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   (long long)b.sb.size);
  buf_destroy(&b);

  buf_init(&b);
  msgpack_pack_array(&b.pk, 10);
  for (int i = 0; i < 10; i++)
    msgpack_pack_int(&b.pk, i);
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   HIPD_EMSGSIZE);
  ck_assert_ptr_nonnull(reason);
  buf_destroy(&b);

  /* Map keys count: 1 map + 2 * 5 pairs = 11. */
  buf_init(&b);
  msgpack_pack_map(&b.pk, 5);
  for (int i = 0; i < 5; i++) {
    msgpack_pack_int(&b.pk, i);
    msgpack_pack_int(&b.pk, i);
  }
  ck_assert_int_eq(scan(&lim, b.sb.data, b.sb.size, &need, &reason),
                   HIPD_EMSGSIZE);
  buf_destroy(&b);

  /* Nested: [[1,2,3],[4,5,6]] is 9 values, [[1,2,3],[4,5,6,7,8]] 11. */
  static const uint8_t n9[] = {0x92, 0x93, 1, 2, 3, 0x93, 4, 5, 6};
  static const uint8_t n11[] = {0x92, 0x93, 1, 2, 3, 0x95, 4, 5, 6, 7, 8};
  ck_assert_int_eq(scan(&lim, n9, sizeof(n9), &need, &reason), sizeof(n9));
  ck_assert_int_eq(scan(&lim, n11, sizeof(n11), &need, &reason), HIPD_EMSGSIZE);
}
END_TEST

/* @p depth nested arrays (a map every third level), the innermost holding
 * one integer, or nothing when @p empty_inner. */
static void build_nested(buf_t *b, unsigned depth, int empty_inner)
{
  for (unsigned d = 0; d < depth; d++) {
    int inner = d + 1 == depth;
    uint32_t n = inner && empty_inner ? 0 : 1;
    if (d % 3 == 2) {
      msgpack_pack_map(&b->pk, n);
      if (n)
        msgpack_pack_int(&b->pk, (int)d);
    } else {
      msgpack_pack_array(&b->pk, n);
    }
  }
  if (!empty_inner)
    msgpack_pack_int(&b->pk, 42);
}

static long long scan_nested(const proto_limits_t *lim, unsigned depth,
                             int empty_inner, size_t *size)
{
  buf_t b;
  size_t need;
  const char *reason;

  buf_init(&b);
  build_nested(&b, depth, empty_inner);
  long long rc = scan(lim, b.sb.data, b.sb.size, &need, &reason);
  if (rc < 0)
    ck_assert_ptr_nonnull(reason);
  *size = b.sb.size;
  buf_destroy(&b);
  return rc;
}

START_TEST(test_frame_depth)
{
  proto_limits_t lim;
  size_t size;

  proto_limits_default(&lim);
  for (unsigned d = 1; d <= lim.max_depth; d++)
    ck_assert_int_eq(scan_nested(&lim, d, 0, &size), (long long)size);
  ck_assert_int_eq(scan_nested(&lim, lim.max_depth + 1, 0, &size), HIPD_EPROTO);
  ck_assert_int_eq(scan_nested(&lim, 100, 0, &size), HIPD_EPROTO);

  lim.max_depth = 3;
  ck_assert_int_eq(scan_nested(&lim, 3, 0, &size), (long long)size);
  ck_assert_int_eq(scan_nested(&lim, 4, 0, &size), HIPD_EPROTO);

  /* The depth is known from the headers alone. */
  static const uint8_t deep[] = {0x91, 0x91, 0x91, 0x91};
  size_t need;
  const char *reason;
  ck_assert_int_eq(scan(&lim, deep, sizeof(deep), &need, &reason), HIPD_EPROTO);

  /* A limit above msgpack-c's own stack is capped to it. */
  lim.max_depth = 1000;
  ck_assert_int_eq(scan_nested(&lim, PROTO_DEPTH_CAP, 0, &size),
                   (long long)size);
  ck_assert_int_eq(scan_nested(&lim, PROTO_DEPTH_CAP + 1, 0, &size),
                   HIPD_EPROTO);
}
END_TEST

/* Empty arrays and maps do not count against the depth (PROTOCOL.md):
 * only containers that hold something are levels of nesting. */
START_TEST(test_frame_depth_empty_not_counted)
{
  proto_limits_t lim;
  size_t size;

  proto_limits_default(&lim);
  ck_assert_int_eq(scan_nested(&lim, lim.max_depth, 1, &size), (long long)size);
  ck_assert_int_eq(scan_nested(&lim, lim.max_depth + 1, 1, &size),
                   (long long)size);
  ck_assert_int_eq(scan_nested(&lim, lim.max_depth + 1, 0, &size), HIPD_EPROTO);
  lim.max_depth = 2;
  ck_assert_int_eq(scan_nested(&lim, 3, 1, &size), (long long)size);
  ck_assert_int_eq(scan_nested(&lim, 3, 0, &size), HIPD_EPROTO);
  ck_assert_int_eq(scan_nested(&lim, 4, 1, &size), HIPD_EPROTO);
  /* Many empty ones side by side at the deepest level. */
  static const uint8_t wide[] = {0x91, 0x94, 0x90, 0x80, 0x90, 0x80};
  size_t need;
  const char *reason;
  ck_assert_int_eq(scan(&lim, wide, sizeof(wide), &need, &reason),
                   (long long)sizeof(wide));
}
END_TEST

/* Whatever the scanner accepts at the deepest depth allowed, msgpack-c
 * decodes: the scan is the only guard in front of it. msgpack-c has no
 * room for even an empty array below PROTO_DEPTH_CAP full ones, so that
 * one is refused as too deep, not left to fail in msgpack-c as "out of
 * memory". */
START_TEST(test_frame_depth_cap_decodes)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;

  proto_limits_default(&lim);
  lim.max_depth = PROTO_DEPTH_CAP;
  for (int empty_inner = 0; empty_inner < 2; empty_inner++) {
    for (unsigned d = PROTO_DEPTH_CAP - 1; d <= PROTO_DEPTH_CAP + 1; d++) {
      buf_t b;
      buf_init(&b);
      /* A request whose params nest to depth d (the message is level 1). */
      proto_pack_request(&b.pk, 1, "m", 1);
      build_nested(&b, d - 2, empty_inner);
      long long rc = scan(&lim, b.sb.data, b.sb.size, &need, &reason);
      if (rc > 0) {
        msgpack_zone zone;
        proto_msg_t msg;
        msgpack_zone_init(&zone, 4096);
        int drc = proto_msg_decode((const uint8_t *)b.sb.data, b.sb.size, &zone,
                                   &msg, &reason);
        ck_assert_msg(drc == 0, "depth %u (empty inner %d): scan ok, decode %d",
                      d, empty_inner, drc);
        msgpack_zone_destroy(&zone);
      } else {
        ck_assert_int_eq(rc, HIPD_EPROTO);
        ck_assert_ptr_nonnull(strstr(reason, "depth"));
      }
      ck_assert_msg((rc > 0) == (d <= PROTO_DEPTH_CAP),
                    "depth %u (empty inner %d): scan %lld", d, empty_inner, rc);
      buf_destroy(&b);
    }
  }
}
END_TEST

START_TEST(test_frame_invalid_byte)
{
  proto_limits_t lim;
  size_t need;
  const char *reason;
  static const struct {
    const char *bytes;
    size_t len;
  } cases[] = {
#define S(lit) {lit, sizeof(lit) - 1}
      S("\xc1"),
      S("\x92\x01\xc1"),
      S("\x92\x01\xc1\x01"), /* followed by more */
      S("\x81\xc1\x01"),     /* as a map key */
      S("\x81\x01\xc1"),     /* as a map value */
      S("\x94\x00\x01\xa1m\x91\x91\xc1"),
#undef S
  };

  proto_limits_default(&lim);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    long long rc = scan(&lim, cases[i].bytes, cases[i].len, &need, &reason);
    ck_assert_msg(rc == HIPD_EPROTO, "case %zu: %lld", i, rc);
    ck_assert_ptr_nonnull(reason);
    ck_assert_ptr_nonnull(strstr(reason, "0xc1"));
  }
  /* 0xc1 inside a payload is just a byte. */
  static const uint8_t inbin[] = {0xc4, 0x02, 0xc1, 0xc1};
  ck_assert_int_eq(scan(&lim, inbin, sizeof(inbin), &need, &reason),
                   sizeof(inbin));
}
END_TEST

/* -------------------------------------------------------------- random */

static uint64_t rng_state;

static uint64_t rng(void)
{
  /* xorshift64*: deterministic across platforms. */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dULL;
}

/* Scan buf[0, len) and, if a size comes back, check msgpack-c agrees and
 * decode it. */
static void fuzz_one(const proto_limits_t *lim, const uint8_t *buf, size_t len)
{
  size_t need = 0;
  const char *reason = NULL;
  long long rc = proto_frame_scan(lim, buf, len, &need, &reason);

  if (rc == 0) {
    CHECK(need > len, "%zu bytes: need %zu", len, need);
    return;
  }
  if (rc < 0) {
    CHECK(rc == HIPD_EPROTO || rc == HIPD_EMSGSIZE, "%zu bytes: scan %lld", len,
          rc);
    CHECK(reason != NULL, "%zu bytes: no reason", len);
    return;
  }
  CHECK((size_t)rc <= len, "scan says %lld of %zu bytes", rc, len);

  msgpack_zone zone;
  msgpack_object obj;
  size_t off = 0;
  msgpack_zone_init(&zone, 1024);
  msgpack_unpack_return ur =
      msgpack_unpack((const char *)buf, (size_t)rc, &off, &zone, &obj);
  CHECK(ur == MSGPACK_UNPACK_SUCCESS && off == (size_t)rc,
        "scan says %lld bytes, msgpack-c says %d after %zu", rc, (int)ur, off);
  msgpack_zone_destroy(&zone);

  proto_msg_t msg;
  msgpack_zone_init(&zone, 1024);
  reason = NULL;
  int drc = proto_msg_decode(buf, (size_t)rc, &zone, &msg, &reason);
  CHECK(drc == 0 || drc == HIPD_EPROTO, "decode %d", drc);
  CHECK(drc == 0 || reason != NULL, "decode %d without a reason", drc);
  msgpack_zone_destroy(&zone);
}

START_TEST(test_random_bytes)
{
  proto_limits_t lim;
  uint8_t buf[64];
  /* Bytes that start containers and length-prefixed values, to get past
   * the first byte more often. */
  static const uint8_t heads[] = {0x91, 0x93, 0x94, 0x81, 0x82, 0xdc, 0xdd,
                                  0xde, 0xdf, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8,
                                  0xc9, 0xd9, 0xda, 0xdb, 0xa3, 0xd4, 0xd8,
                                  0x00, 0x01, 0x02, 0xc0, 0xc1};

  proto_limits_default(&lim);
  rng_state = 0x6869706464ULL; /* fixed seed */
  for (int iter = 0; iter < 30000; iter++) {
    size_t len = (size_t)(rng() % (sizeof(buf) + 1));
    for (size_t i = 0; i < len; i++) {
      uint64_t r = rng();
      buf[i] = (r & 1) ? (uint8_t)(r >> 8) : heads[(r >> 8) % sizeof(heads)];
      if ((r & 0x30) == 0) /* small lengths and counts */
        buf[i] &= 0x03;
    }
    uint8_t *copy = malloc(len ? len : 1);
    CHECK(copy != NULL, "out of memory");
    memcpy(copy, buf, len);
    fuzz_one(&lim, copy, len);
    free(copy);
  }
}
END_TEST

/* Valid samples with a few bytes changed, cut at random points. */
START_TEST(test_random_mutations)
{
  proto_limits_t lim;
  buf_t b;

  proto_limits_default(&lim);
  rng_state = 0x70726f746fULL;
  for (int s = 0; s < NSAMPLES; s++) {
    if (s == 2 || s == 3 || s == 5)
      continue; /* the large ones */
    buf_init(&b);
    sample_build(s, &b);
    size_t len = b.sb.size;
    for (int iter = 0; iter < 3000; iter++) {
      uint8_t *copy = malloc(len);
      CHECK(copy != NULL, "out of memory");
      memcpy(copy, b.sb.data, len);
      unsigned flips = 1 + (unsigned)(rng() % 3);
      for (unsigned f = 0; f < flips; f++) {
        uint64_t r = rng();
        copy[(r >> 16) % len] = (uint8_t)r;
      }
      size_t cut = (size_t)(rng() % (len + 1));
      uint8_t *cutcopy = malloc(cut ? cut : 1);
      CHECK(cutcopy != NULL, "out of memory");
      memcpy(cutcopy, copy, cut);
      fuzz_one(&lim, copy, len);
      fuzz_one(&lim, cutcopy, cut);
      free(cutcopy);
      free(copy);
    }
    buf_destroy(&b);
  }
}
END_TEST

static Suite *framing_suite(void)
{
  Suite *s = suite_create("framing");
  TCase *tc;

  tc = tcase_create("limits");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_limits_default);
  tcase_add_test(tc, test_frame_max_message);
  tcase_add_test(tc, test_frame_huge_claims);
  tcase_add_test(tc, test_frame_nested_counts_add_up);
  tcase_add_test(tc, test_frame_array_map_limits);
  tcase_add_test(tc, test_frame_max_objects);
  tcase_add_test(tc, test_frame_depth);
  tcase_add_test(tc, test_frame_depth_empty_not_counted);
  tcase_add_test(tc, test_frame_depth_cap_decodes);
  tcase_add_test(tc, test_frame_invalid_byte);
  suite_add_tcase(s, tc);

  tc = tcase_create("streams");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_frame_every_truncation, 0, NSAMPLES);
  tcase_add_loop_test(tc, test_frame_samples_decode, 0, NSAMPLES);
  tcase_add_test(tc, test_frame_need_hint);
  tcase_add_test(tc, test_frame_need_exact_for_payload);
  tcase_add_test(tc, test_frame_concatenated);
  tcase_add_test(tc, test_frame_scalars);
  suite_add_tcase(s, tc);

  tc = tcase_create("random");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_random_bytes);
  tcase_add_test(tc, test_random_mutations);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(framing_suite());
}
