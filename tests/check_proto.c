/* tests/check_proto.c: the wire code of proto/ (framing, decoding, encoding,
 * object readers) and the error table of proto/errors.c, tested on real
 * bytes with msgpack-c as the reference decoder. */
#include <check.h>
#include <limits.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hipd.h"
#include "rpc.h"

/* Above this size a truncated message is scanned in place instead of from
 * an exact-size heap copy (the copy lets valgrind catch reads past len). */
#define COPY_LIMIT 4096
#define BIG 70000 /* payload that needs a 32-bit length */

/* ------------------------------------------------------------- helpers */

/* check records the place of every ck_assert that passes (one write
 * each), which makes loops of a million assertions slow; CHECK reports
 * only failures, at the line that uses it. */
#define CHECK(expr, ...)                                                       \
  do {                                                                         \
    if (!(expr))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} buf_t;

static void buf_init(buf_t *b)
{
  msgpack_sbuffer_init(&b->sb);
  msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

static void buf_destroy(buf_t *b)
{
  msgpack_sbuffer_destroy(&b->sb);
}

/* Append raw bytes, for encodings the packer never produces. */
static void raw(buf_t *b, const void *p, size_t n)
{
  msgpack_sbuffer_write(&b->sb, p, n);
}

static void pack_str(msgpack_packer *pk, const char *s)
{
  proto_pack_cstr(pk, s);
}

static void pack_filled_str(msgpack_packer *pk, size_t n, char c)
{
  char *p = malloc(n ? n : 1);

  ck_assert_ptr_nonnull(p);
  memset(p, c, n);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, p, n);
  free(p);
}

static void pack_filled_bin(msgpack_packer *pk, size_t n)
{
  uint8_t *p = malloc(n ? n : 1);

  ck_assert_ptr_nonnull(p);
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 7);
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
  free(p);
}

static void pack_filled_ext(msgpack_packer *pk, size_t n, int8_t type)
{
  uint8_t *p = malloc(n ? n : 1);

  ck_assert_ptr_nonnull(p);
  memset(p, 0x5a, n);
  msgpack_pack_ext(pk, n, type);
  msgpack_pack_ext_body(pk, p, n);
  free(p);
}

static long long scan(const proto_limits_t *lim, const void *p, size_t len,
                      size_t *need, const char **reason)
{
  *need = (size_t)-1;
  *reason = NULL;
  return proto_frame_scan(lim, p, len, need, reason);
}

/* msgpack-c's idea of the size of the first object of buf[0, len). */
static size_t reference_size(const void *p, size_t len)
{
  msgpack_zone zone;
  msgpack_object obj;
  size_t off = 0;

  msgpack_zone_init(&zone, 1024);
  msgpack_unpack_return r = msgpack_unpack(p, len, &off, &zone, &obj);
  msgpack_zone_destroy(&zone);
  ck_assert_msg(r == MSGPACK_UNPACK_SUCCESS || r == MSGPACK_UNPACK_EXTRA_BYTES,
                "msgpack-c cannot decode the sample (%d)", (int)r);
  return off;
}

/* Every proper prefix of the complete message buf[0, len) asks for more
 * bytes, with a hint in (prefix, len]; the whole returns exactly len. */
static void check_prefixes(const proto_limits_t *lim, const uint8_t *msg,
                           size_t len)
{
  size_t need;
  const char *reason;

  for (size_t k = 0; k < len; k++) {
    const uint8_t *p = msg;
    uint8_t *copy = NULL;
    if (len <= COPY_LIMIT) {
      copy = malloc(k ? k : 1);
      CHECK(copy != NULL, "out of memory");
      memcpy(copy, msg, k);
      p = copy;
    }
    long long rc = scan(lim, p, k, &need, &reason);
    free(copy);
    CHECK(rc == 0, "prefix %zu of %zu: scan returned %lld (%s)", k, len, rc,
          reason ? reason : "-");
    CHECK(need > k && need <= len,
          "prefix %zu of %zu: need %zu is not in (%zu, %zu]", k, len, need, k,
          len);
  }
  ck_assert_int_eq(scan(lim, msg, len, &need, &reason), (long long)len);
}

/* ---------------------------------------------------- sample messages */

enum { NSAMPLES = 11 };

/* Build sample message @p i: valid msgpack-rpc messages that together use
 * every msgpack type and every length encoding. @return its type. */
static int sample_build(int i, buf_t *b)
{
  msgpack_packer *pk = &b->pk;

  switch (i) {
  case 0:
    proto_pack_request(pk, 1, "ping", 0);
    return PROTO_REQUEST;
  case 1: /* nested params, floats, every integer width */
    proto_pack_request(pk, 7, "kernel.launch", 4);
    msgpack_pack_map(pk, 2);
    pack_str(pk, "grid");
    msgpack_pack_array(pk, 3);
    msgpack_pack_int(pk, 1);
    msgpack_pack_int(pk, 2);
    msgpack_pack_int(pk, 3);
    pack_str(pk, "opts");
    msgpack_pack_map(pk, 1);
    pack_str(pk, "deep");
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 2);
    msgpack_pack_nil(pk);
    msgpack_pack_map(pk, 0);
    msgpack_pack_array(pk, 4);
    msgpack_pack_float(pk, 1.5f);
    msgpack_pack_double(pk, -2.25);
    msgpack_pack_true(pk);
    msgpack_pack_false(pk);
    msgpack_pack_array(pk, 10);
    msgpack_pack_fix_uint8(pk, 200);
    msgpack_pack_fix_uint16(pk, 60000);
    msgpack_pack_fix_uint32(pk, 4000000000u);
    msgpack_pack_fix_uint64(pk, UINT64_MAX);
    msgpack_pack_fix_int8(pk, -100);
    msgpack_pack_fix_int16(pk, -30000);
    msgpack_pack_fix_int32(pk, INT32_MIN);
    msgpack_pack_fix_int64(pk, INT64_MIN);
    msgpack_pack_int(pk, -1);
    msgpack_pack_int(pk, 127);
    msgpack_pack_array(pk, 0);
    return PROTO_REQUEST;
  case 2: /* bin 8/16/32 */
    proto_pack_request(pk, 2, "mem.write", 4);
    pack_filled_bin(pk, 200);
    pack_filled_bin(pk, 300);
    pack_filled_bin(pk, BIG);
    pack_filled_bin(pk, 0);
    return PROTO_REQUEST;
  case 3: /* str 8/16/32 */
    proto_pack_request(pk, 3, "strings", 5);
    pack_str(pk, "abc");
    pack_filled_str(pk, 40, 'a');
    pack_filled_str(pk, 300, 'b');
    pack_filled_str(pk, BIG, 'c');
    pack_str(pk, "");
    return PROTO_REQUEST;
  case 4: /* array 16 and map 16 */
    proto_pack_request(pk, 4, "containers", 2);
    msgpack_pack_array(pk, 20);
    for (int k = 0; k < 20; k++)
      msgpack_pack_int(pk, k);
    msgpack_pack_map(pk, 17);
    for (int k = 0; k < 17; k++) {
      msgpack_pack_int(pk, k);
      msgpack_pack_array(pk, 1);
      msgpack_pack_int(pk, -k);
    }
    return PROTO_REQUEST;
  case 5: /* fixext and ext 8/16/32 */
    proto_pack_request(pk, 5, "ext", 8);
    pack_filled_ext(pk, 1, 1);
    pack_filled_ext(pk, 2, 2);
    pack_filled_ext(pk, 4, 3);
    pack_filled_ext(pk, 8, -4);
    pack_filled_ext(pk, 16, 5);
    pack_filled_ext(pk, 3, 6);
    pack_filled_ext(pk, 300, 7);
    pack_filled_ext(pk, BIG, 8);
    return PROTO_REQUEST;
  case 6: { /* non-minimal encodings, which are valid msgpack */
    static const uint8_t head[] = {0x94, 0x00, 0xce, 0x00, 0x00, 0x00, 0x09,
                                   /* method: str32 "ping" */
                                   0xdb, 0x00, 0x00, 0x00, 0x04, 'p', 'i', 'n',
                                   'g',
                                   /* params: array32 of 14 */
                                   0xdd, 0x00, 0x00, 0x00, 0x0e};
    static const uint8_t params[] = {
        0xd9, 0x01, 'x',                                   /* str8 */
        0xda, 0x00, 0x01, 'y',                             /* str16 */
        0xc4, 0x01, 0xaa,                                  /* bin8 */
        0xc5, 0x00, 0x01, 0xbb,                            /* bin16 */
        0xc6, 0x00, 0x00, 0x00, 0x01, 0xcc,                /* bin32 */
        0xdc, 0x00, 0x02, 0x01, 0x02,                      /* array16 */
        0xde, 0x00, 0x01, 0xa1, 'k',  0x01,                /* map16 */
        0xdf, 0x00, 0x00, 0x00, 0x02, 0xa1, 'a',           /* map32 */
        0xc0, 0xa1, 'b',  0xc3,                            /* ... */
        0xc7, 0x00, 0x05,                                  /* ext8, empty */
        0xc8, 0x00, 0x01, 0x05, 0xaa,                      /* ext16 */
        0xc9, 0x00, 0x00, 0x00, 0x01, 0x05, 0xaa,          /* ext32 */
        0xca, 0x3f, 0xc0, 0x00, 0x00,                      /* float32 1.5 */
        0xcb, 0x3f, 0xf8, 0,    0,    0,    0,    0, 0,    /* float64 1.5 */
        0xd3, 0,    0,    0,    0,    0,    0,    0, 0x05, /* int64 5 */
    };
    raw(b, head, sizeof(head));
    raw(b, params, sizeof(params));
    return PROTO_REQUEST;
  }
  case 7: /* response with a result */
    proto_pack_response(pk, 6);
    msgpack_pack_map(pk, 2);
    pack_str(pk, "a");
    msgpack_pack_array(pk, 2);
    msgpack_pack_float(pk, 1.5f);
    msgpack_pack_double(pk, 2.25);
    pack_str(pk, "b");
    msgpack_pack_int(pk, -1);
    return PROTO_RESPONSE;
  case 8:
    proto_pack_error_response(pk, 8, HIPD_ESTALE, "buffer %d was freed", 3);
    return PROTO_RESPONSE;
  case 9:
    proto_pack_notify(pk, "log", 2);
    pack_str(pk, "hello");
    msgpack_pack_int(pk, 1);
    return PROTO_NOTIFY;
  default: /* 16- and 32-bit lengths of the message array itself */
    raw(b, "\xdc\x00\x04\x00\x0a", 5);
    raw(b, "\xa1m", 2);
    raw(b, "\xdd\x00\x00\x00\x01\x90", 6);
    return PROTO_REQUEST;
  }
}

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

/* ------------------------------------------------------------ decoding */

START_TEST(test_decode_request)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason = NULL;

  buf_init(&b);
  proto_pack_request(&b.pk, UINT32_MAX, "mem.alloc", 3);
  msgpack_pack_bin(&b.pk, 3);
  msgpack_pack_bin_body(&b.pk, "abc", 3);
  pack_str(&b.pk, "xyz");
  msgpack_pack_uint64(&b.pk, 4096);
  msgpack_zone_init(&zone, 1024);
  const uint8_t *p = (const uint8_t *)b.sb.data;
  ck_assert_int_eq(proto_msg_decode(p, b.sb.size, &zone, &msg, &reason), 0);
  ck_assert_int_eq(msg.type, PROTO_REQUEST);
  ck_assert_uint_eq(msg.msgid, UINT32_MAX);
  ck_assert_uint_eq(msg.method_len, 9);
  ck_assert_int_eq(memcmp(msg.method, "mem.alloc", 9), 0);
  ck_assert_ptr_null(msg.error);
  ck_assert_ptr_null(msg.result);
  ck_assert_uint_eq(msg.params->via.array.size, 3);
  const msgpack_object *a = msg.params->via.array.ptr;
  ck_assert_int_eq(a[0].type, MSGPACK_OBJECT_BIN);
  ck_assert_int_eq(a[1].type, MSGPACK_OBJECT_STR);
  ck_assert_uint_eq(a[2].via.u64, 4096);

  /* Zero copy: strings and binaries point into the input bytes. */
  const uint8_t *end = p + b.sb.size;
  ck_assert((const uint8_t *)msg.method > p);
  ck_assert((const uint8_t *)msg.method + msg.method_len <= end);
  ck_assert((const uint8_t *)a[0].via.bin.ptr > p);
  ck_assert((const uint8_t *)a[0].via.bin.ptr + 3 <= end);
  ck_assert_int_eq(memcmp(a[0].via.bin.ptr, "abc", 3), 0);
  ck_assert((const uint8_t *)a[1].via.str.ptr > p);
  ck_assert((const uint8_t *)a[1].via.str.ptr + 3 <= end);
  ck_assert_int_eq(memcmp(a[1].via.str.ptr, "xyz", 3), 0);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_decode_response_and_notify)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason = NULL;

  buf_init(&b);
  proto_pack_response(&b.pk, 0);
  msgpack_pack_map(&b.pk, 1);
  pack_str(&b.pk, "a");
  msgpack_pack_int(&b.pk, 1);
  msgpack_zone_init(&zone, 1024);
  ck_assert_int_eq(proto_msg_decode((const uint8_t *)b.sb.data, b.sb.size,
                                    &zone, &msg, &reason),
                   0);
  ck_assert_int_eq(msg.type, PROTO_RESPONSE);
  ck_assert_uint_eq(msg.msgid, 0);
  ck_assert_ptr_nonnull(msg.error);
  ck_assert_int_eq(msg.error->type, MSGPACK_OBJECT_NIL);
  ck_assert_int_eq(msg.result->type, MSGPACK_OBJECT_MAP);
  ck_assert_ptr_null(msg.method);
  ck_assert_ptr_null(msg.params);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);

  buf_init(&b);
  proto_pack_notify(&b.pk, "event.done", 1);
  msgpack_pack_uint64(&b.pk, 12);
  msgpack_zone_init(&zone, 1024);
  ck_assert_int_eq(proto_msg_decode((const uint8_t *)b.sb.data, b.sb.size,
                                    &zone, &msg, &reason),
                   0);
  ck_assert_int_eq(msg.type, PROTO_NOTIFY);
  ck_assert_uint_eq(msg.msgid, 0);
  ck_assert_uint_eq(msg.method_len, 10);
  ck_assert_int_eq(memcmp(msg.method, "event.done", 10), 0);
  ck_assert_uint_eq(msg.params->via.array.size, 1);
  ck_assert_uint_eq(msg.params->via.array.ptr[0].via.u64, 12);
  ck_assert_ptr_null(msg.error);
  ck_assert_ptr_null(msg.result);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

static const struct {
  const char *what;
  const char *bytes;
  size_t len;
  const char *reason; /* a word the reason must contain */
} bad_messages[] = {
#define B(what, lit, why)                                                      \
  {                                                                            \
    what, lit, sizeof(lit) - 1, why                                            \
  }
    B("map", "\x80", "array"),
    B("integer", "\x01", "array"),
    B("string",
      "\xa1"
      "x",
      "array"),
    B("nil", "\xc0", "array"),
    B("empty array", "\x90", "non-empty"),
    B("type 3", "\x94\x03\x01\xa1m\x90", "type"),
    B("type 255", "\x94\xcc\xff\x01\xa1m\x90", "type"),
    B("type as string",
      "\x94\xa1"
      "0"
      "\x01\xa1m\x90",
      "type"),
    B("type negative", "\x94\xff\x01\xa1m\x90", "type"),
    B("type float", "\x94\xca\x00\x00\x00\x00\x01\xa1m\x90", "type"),
    B("type nil", "\x94\xc0\x01\xa1m\x90", "type"),
    B("request with 3", "\x93\x00\x01\xa1m", "4 elements"),
    B("request with 5", "\x95\x00\x01\xa1m\x90\xc0", "4 elements"),
    B("request with 1", "\x91\x00", "4 elements"),
    B("msgid negative", "\x94\x00\xff\xa1m\x90", "msgid"),
    B("msgid int8 -1", "\x94\x00\xd0\xff\xa1m\x90", "msgid"),
    B("msgid 2^32", "\x94\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xa1m\x90",
      "msgid"),
    B("msgid string",
      "\x94\x00\xa1"
      "1"
      "\xa1m\x90",
      "msgid"),
    B("msgid nil", "\x94\x00\xc0\xa1m\x90", "msgid"),
    B("msgid float", "\x94\x00\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\xa1m\x90",
      "msgid"),
    B("method integer", "\x94\x00\x01\x05\x90", "method"),
    B("method nil", "\x94\x00\x01\xc0\x90", "method"),
    B("method array", "\x94\x00\x01\x91\xa1m\x90", "method"),
    B("params map", "\x94\x00\x01\xa1m\x80", "params"),
    B("params nil", "\x94\x00\x01\xa1m\xc0", "params"),
    B("params string", "\x94\x00\x01\xa1m\xa1m", "params"),
    B("notification with 4", "\x94\x02\xa1m\x90\xc0", "notification"),
    B("notification with 2", "\x92\x02\xa1m", "notification"),
    B("notification method integer", "\x93\x02\x01\x90", "method"),
    B("notification params nil", "\x93\x02\xa1m\xc0", "params"),
    B("response with 3", "\x93\x01\x01\xc0", "response"),
    B("response with 5", "\x95\x01\x01\xc0\xc0\xc0", "response"),
    B("response msgid negative", "\x94\x01\xff\xc0\xc0", "msgid"),
    B("trailing bytes", "\x94\x00\x01\xa1m\x90\x00", "after"),
    B("truncated", "\x94\x00\x01\xa1m", "malformed"),
    B("invalid byte", "\x94\x00\x01\xa1m\xc1", "malformed"),
#undef B
};

START_TEST(test_decode_invalid)
{
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason = NULL;
  int i = _i;

  msgpack_zone_init(&zone, 1024);
  int rc = proto_msg_decode((const uint8_t *)bad_messages[i].bytes,
                            bad_messages[i].len, &zone, &msg, &reason);
  ck_assert_msg(rc == HIPD_EPROTO, "%s: got %d", bad_messages[i].what, rc);
  ck_assert_msg(reason != NULL && reason[0] != '\0', "%s: no reason",
                bad_messages[i].what);
  ck_assert_msg(strstr(reason, bad_messages[i].reason) != NULL,
                "%s: reason '%s' does not mention '%s'", bad_messages[i].what,
                reason, bad_messages[i].reason);
  msgpack_zone_destroy(&zone);
}
END_TEST

/* The boundary values that are valid. */
START_TEST(test_decode_boundaries)
{
  static const struct {
    const char *bytes;
    size_t len;
    int type;
    uint32_t msgid;
  } ok[] = {
#define B(lit, type, id) {lit, sizeof(lit) - 1, type, id}
      B("\x94\x00\xce\xff\xff\xff\xff\xa1m\x90", PROTO_REQUEST, UINT32_MAX),
      B("\x94\x00\xcf\x00\x00\x00\x00\xff\xff\xff\xff\xa1m\x90", PROTO_REQUEST,
        UINT32_MAX),
      B("\x94\x00\x00\xa0\x90", PROTO_REQUEST, 0),
      B("\x94\x01\x05\xc0\xc0", PROTO_RESPONSE, 5),
      B("\x94\x01\x05\x81\xa1"
        "a"
        "\x01\xc0",
        PROTO_RESPONSE, 5),
      B("\x93\x02\xa1m\x90", PROTO_NOTIFY, 0),
      B("\x94\xd0\x00\x01\xa1m\x90", PROTO_REQUEST, 1), /* type as int8 */
#undef B
  };

  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    msgpack_zone zone;
    proto_msg_t msg;
    const char *reason = NULL;
    msgpack_zone_init(&zone, 1024);
    int rc = proto_msg_decode((const uint8_t *)ok[i].bytes, ok[i].len, &zone,
                              &msg, &reason);
    ck_assert_msg(rc == 0, "case %zu: %d (%s)", i, rc, reason);
    ck_assert_int_eq(msg.type, ok[i].type);
    ck_assert_uint_eq(msg.msgid, ok[i].msgid);
    msgpack_zone_destroy(&zone);
  }
}
END_TEST

/* ------------------------------------------------------------ encoding */

static void decode_buf(buf_t *b, msgpack_zone *zone, proto_msg_t *msg)
{
  proto_limits_t lim;
  size_t need;
  const char *reason = NULL;

  proto_limits_default(&lim);
  ck_assert_int_eq(scan(&lim, b->sb.data, b->sb.size, &need, &reason),
                   (long long)b->sb.size);
  msgpack_zone_init(zone, 1024);
  ck_assert_int_eq(proto_msg_decode((const uint8_t *)b->sb.data, b->sb.size,
                                    zone, msg, &reason),
                   0);
}

START_TEST(test_pack_request)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;
  static const uint32_t ids[] = {0, 1, 127, 128, 65535, 65536, UINT32_MAX};

  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    buf_init(&b);
    proto_pack_request(&b.pk, ids[i], "stream.create", 2);
    msgpack_pack_int(&b.pk, -3);
    msgpack_pack_nil(&b.pk);
    decode_buf(&b, &zone, &msg);
    ck_assert_int_eq(msg.type, PROTO_REQUEST);
    ck_assert_uint_eq(msg.msgid, ids[i]);
    ck_assert_uint_eq(msg.method_len, strlen("stream.create"));
    ck_assert_int_eq(memcmp(msg.method, "stream.create", msg.method_len), 0);
    ck_assert_uint_eq(msg.params->via.array.size, 2);
    ck_assert_int_eq(msg.params->via.array.ptr[0].via.i64, -3);
    ck_assert_int_eq(msg.params->via.array.ptr[1].type, MSGPACK_OBJECT_NIL);
    msgpack_zone_destroy(&zone);
    buf_destroy(&b);
  }

  /* No params. */
  buf_init(&b);
  proto_pack_request(&b.pk, 9, "ping", 0);
  decode_buf(&b, &zone, &msg);
  ck_assert_uint_eq(msg.params->via.array.size, 0);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_pack_response)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;

  buf_init(&b);
  proto_pack_response(&b.pk, 4000000000u);
  msgpack_pack_array(&b.pk, 2);
  msgpack_pack_uint64(&b.pk, UINT64_MAX);
  pack_str(&b.pk, "ok");
  decode_buf(&b, &zone, &msg);
  ck_assert_int_eq(msg.type, PROTO_RESPONSE);
  ck_assert_uint_eq(msg.msgid, 4000000000u);
  ck_assert_int_eq(msg.error->type, MSGPACK_OBJECT_NIL);
  ck_assert_int_eq(msg.result->type, MSGPACK_OBJECT_ARRAY);
  ck_assert_uint_eq(msg.result->via.array.ptr[0].via.u64, UINT64_MAX);
  ck_assert(proto_obj_streq(&msg.result->via.array.ptr[1], "ok"));
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

/* The error object is {code, name, message}, in that order. */
static void check_error_object(const msgpack_object *e, int code,
                               const char *text)
{
  int64_t v;
  int dcode = 0;
  const char *dmsg = NULL;
  size_t dlen = 0;

  ck_assert_int_eq(e->type, MSGPACK_OBJECT_MAP);
  ck_assert_uint_eq(e->via.map.size, 3);
  ck_assert(proto_obj_streq(&e->via.map.ptr[0].key, "code"));
  ck_assert(proto_obj_streq(&e->via.map.ptr[1].key, "name"));
  ck_assert(proto_obj_streq(&e->via.map.ptr[2].key, "message"));
  ck_assert_int_eq(
      proto_obj_int(proto_map_get(e, "code"), INT32_MIN, INT32_MAX, &v), 0);
  ck_assert_int_eq(v, code);
  ck_assert(proto_obj_streq(proto_map_get(e, "name"), hipd_err_name(code)));
  ck_assert(proto_obj_streq(proto_map_get(e, "message"), text));

  ck_assert_int_eq(proto_error_decode(e, &dcode, &dmsg, &dlen), 0);
  ck_assert_int_eq(dcode, code);
  ck_assert_uint_eq(dlen, strlen(text));
  ck_assert_int_eq(memcmp(dmsg, text, dlen), 0);
}

START_TEST(test_pack_error_response)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;

  buf_init(&b);
  proto_pack_error_response(&b.pk, 77, HIPD_ESTALE,
                            "mem.free: buffer 0x%llx was already freed",
                            0x1234ULL);
  decode_buf(&b, &zone, &msg);
  ck_assert_int_eq(msg.type, PROTO_RESPONSE);
  ck_assert_uint_eq(msg.msgid, 77);
  ck_assert_int_eq(msg.result->type, MSGPACK_OBJECT_NIL);
  check_error_object(msg.error, HIPD_ESTALE,
                     "mem.free: buffer 0x1234 was already freed");
  ck_assert(proto_obj_streq(proto_map_get(msg.error, "name"), "ESTALE"));
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);

  /* Every code of the table, and one the table does not have. */
#define XX(name, num, text)                                                    \
  buf_init(&b);                                                                \
  proto_pack_error_response(&b.pk, (uint32_t) - (num), num, "%s", text);       \
  decode_buf(&b, &zone, &msg);                                                 \
  ck_assert_uint_eq(msg.msgid, (uint32_t) - (num));                            \
  check_error_object(msg.error, num, text);                                    \
  ck_assert(proto_obj_streq(proto_map_get(msg.error, "name"), #name));         \
  msgpack_zone_destroy(&zone);                                                 \
  buf_destroy(&b);
  HIPD_ERRNO_MAP(XX)
#undef XX

  buf_init(&b);
  proto_pack_error_response(&b.pk, 1, -1000, "custom %d", 5);
  decode_buf(&b, &zone, &msg);
  check_error_object(msg.error, -1000, "custom 5");
  ck_assert(proto_obj_streq(proto_map_get(msg.error, "name"), "UNKNOWN"));
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

/* A message longer than the formatting buffer is cut, not overflowed. */
START_TEST(test_pack_error_response_long)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;
  char big[40000]; /* past the 16 KiB formatting buffer */
  const char *m;
  size_t len;

  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  buf_init(&b);
  proto_pack_error_response(&b.pk, 2, HIPD_EINVAL, "%s", big);
  decode_buf(&b, &zone, &msg);
  ck_assert_int_eq(
      proto_obj_bytes(proto_map_get(msg.error, "message"), &m, &len), 0);
  ck_assert_uint_gt(len, 0);
  ck_assert_uint_lt(len, sizeof(big) - 1);
  for (size_t i = 0; i < len; i++)
    ck_assert_int_eq(m[i], 'x');
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_pack_error_default_message)
{
  buf_t b;
  msgpack_zone zone;
  msgpack_object o;
  size_t off = 0;

  buf_init(&b);
  proto_pack_error(&b.pk, HIPD_ENODEV, NULL);
  msgpack_zone_init(&zone, 1024);
  ck_assert_int_eq(msgpack_unpack(b.sb.data, b.sb.size, &off, &zone, &o),
                   MSGPACK_UNPACK_SUCCESS);
  check_error_object(&o, HIPD_ENODEV, hipd_strerror(HIPD_ENODEV));
  ck_assert(proto_obj_streq(proto_map_get(&o, "message"), "no such device"));
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_pack_notify)
{
  buf_t b;
  msgpack_zone zone;
  proto_msg_t msg;

  buf_init(&b);
  proto_pack_notify(&b.pk, "log", 2);
  pack_str(&b.pk, "warn");
  msgpack_pack_double(&b.pk, 0.5);
  decode_buf(&b, &zone, &msg);
  ck_assert_int_eq(msg.type, PROTO_NOTIFY);
  ck_assert_uint_eq(msg.method_len, 3);
  ck_assert_int_eq(memcmp(msg.method, "log", 3), 0);
  ck_assert_uint_eq(msg.params->via.array.size, 2);
  ck_assert(proto_obj_streq(&msg.params->via.array.ptr[0], "warn"));
  ck_assert_double_eq(msg.params->via.array.ptr[1].via.f64, 0.5);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_pack_cstr)
{
  buf_t b;

  buf_init(&b);
  proto_pack_cstr(&b.pk, NULL);
  proto_pack_cstr(&b.pk, "");
  proto_pack_cstr(&b.pk, "ab");
  ck_assert_uint_eq(b.sb.size, 1 + 1 + 3);
  ck_assert_int_eq(memcmp(b.sb.data,
                          "\xc0\xa0\xa2"
                          "ab",
                          5),
                   0);
  buf_destroy(&b);
}
END_TEST

/* Decode the single object packed in @p b into @p o. */
static void unpack_one(buf_t *b, msgpack_zone *zone, msgpack_object *o)
{
  size_t off = 0;

  msgpack_zone_init(zone, 1024);
  ck_assert_int_eq(msgpack_unpack(b->sb.data, b->sb.size, &off, zone, o),
                   MSGPACK_UNPACK_SUCCESS);
}

START_TEST(test_error_decode_malformed)
{
  buf_t b;
  msgpack_zone zone;
  msgpack_object o;
  int code = 12345;
  const char *m = NULL;
  size_t len = 99;

  /* Not a map. */
  buf_init(&b);
  msgpack_pack_array(&b.pk, 0);
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(proto_error_decode(&o, &code, &m, &len), HIPD_EPROTO);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);

  /* No code. */
  buf_init(&b);
  msgpack_pack_map(&b.pk, 1);
  pack_str(&b.pk, "message");
  pack_str(&b.pk, "x");
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(proto_error_decode(&o, &code, &m, &len), HIPD_EPROTO);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);

  /* Code not an integer, or out of int range. */
  buf_init(&b);
  msgpack_pack_map(&b.pk, 1);
  pack_str(&b.pk, "code");
  pack_str(&b.pk, "EINVAL");
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(proto_error_decode(&o, &code, &m, &len), HIPD_EPROTO);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);

  buf_init(&b);
  msgpack_pack_map(&b.pk, 1);
  pack_str(&b.pk, "code");
  msgpack_pack_int64(&b.pk, (int64_t)INT32_MIN - 1);
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(proto_error_decode(&o, &code, &m, &len), HIPD_EPROTO);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
  ck_assert_int_eq(code, 12345);

  /* A code without a message: the message is empty. */
  buf_init(&b);
  msgpack_pack_map(&b.pk, 2);
  pack_str(&b.pk, "code");
  msgpack_pack_int(&b.pk, HIPD_EIO);
  pack_str(&b.pk, "message");
  msgpack_pack_int(&b.pk, 5);
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(proto_error_decode(&o, &code, &m, &len), 0);
  ck_assert_int_eq(code, HIPD_EIO);
  ck_assert_ptr_nonnull(m);
  ck_assert_uint_eq(len, 0);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);

  /* A code the client does not know passes through; the name is ignored. */
  buf_init(&b);
  msgpack_pack_map(&b.pk, 3);
  pack_str(&b.pk, "name");
  pack_str(&b.pk, "EINVAL");
  pack_str(&b.pk, "code");
  msgpack_pack_int(&b.pk, -999);
  pack_str(&b.pk, "message");
  pack_str(&b.pk, "new");
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(proto_error_decode(&o, &code, &m, &len), 0);
  ck_assert_int_eq(code, -999);
  ck_assert_uint_eq(len, 3);
  ck_assert_int_eq(memcmp(m, "new", 3), 0);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

/* ------------------------------------------------------------- readers */

static msgpack_object obj_uint(uint64_t v)
{
  msgpack_object o = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER};
  o.via.u64 = v;
  return o;
}

static msgpack_object obj_int(int64_t v)
{
  msgpack_object o = {.type = MSGPACK_OBJECT_NEGATIVE_INTEGER};
  o.via.i64 = v;
  return o;
}

static msgpack_object obj_float(double v, int is64)
{
  msgpack_object o = {.type = is64 ? MSGPACK_OBJECT_FLOAT64
                                   : MSGPACK_OBJECT_FLOAT32};
  o.via.f64 = v;
  return o;
}

static msgpack_object obj_str(const char *s, size_t n, int bin)
{
  msgpack_object o = {.type = bin ? MSGPACK_OBJECT_BIN : MSGPACK_OBJECT_STR};
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)n;
  return o;
}

START_TEST(test_obj_int)
{
  msgpack_object o;
  int64_t v;

  o = obj_uint(5);
  v = 0;
  ck_assert_int_eq(proto_obj_int(&o, 0, 10, &v), 0);
  ck_assert_int_eq(v, 5);
  ck_assert_int_eq(proto_obj_int(&o, 5, 5, &v), 0);
  v = 77;
  ck_assert_int_eq(proto_obj_int(&o, 6, 10, &v), HIPD_ERANGE);
  ck_assert_int_eq(proto_obj_int(&o, 0, 4, &v), HIPD_ERANGE);
  ck_assert_int_eq(v, 77); /* untouched on failure */

  o = obj_uint((uint64_t)INT64_MAX);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), 0);
  ck_assert_int_eq(v, INT64_MAX);
  o = obj_uint((uint64_t)INT64_MAX + 1);
  v = 77;
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_ERANGE);
  o = obj_uint(UINT64_MAX); /* would be -1 if cast */
  ck_assert_int_eq(proto_obj_int(&o, -1, 0, &v), HIPD_ERANGE);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_ERANGE);
  ck_assert_int_eq(v, 77);

  o = obj_int(-5);
  ck_assert_int_eq(proto_obj_int(&o, -10, 10, &v), 0);
  ck_assert_int_eq(v, -5);
  ck_assert_int_eq(proto_obj_int(&o, -5, -5, &v), 0);
  ck_assert_int_eq(proto_obj_int(&o, -4, 10, &v), HIPD_ERANGE);
  ck_assert_int_eq(proto_obj_int(&o, 0, 10, &v), HIPD_ERANGE);
  ck_assert_int_eq(proto_obj_int(&o, -10, -6, &v), HIPD_ERANGE);
  o = obj_int(INT64_MIN);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, 0, &v), 0);
  ck_assert_int_eq(v, INT64_MIN);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN + 1, 0, &v), HIPD_ERANGE);

  v = 77;
  o = obj_float(1.0, 1);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_EPARAMS);
  o = obj_float(1.0, 0);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_EPARAMS);
  o = obj_str("1", 1, 0);
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_NIL};
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN};
  o.via.boolean = true;
  ck_assert_int_eq(proto_obj_int(&o, INT64_MIN, INT64_MAX, &v), HIPD_EPARAMS);
  ck_assert_int_eq(v, 77);
}
END_TEST

/* The same checks on integers that came off the wire in every width. */
START_TEST(test_obj_int_wire)
{
  buf_t b;
  msgpack_zone zone;
  msgpack_object o;
  int64_t v;

  buf_init(&b);
  msgpack_pack_array(&b.pk, 6);
  msgpack_pack_fix_int8(&b.pk, 5);   /* positive in a signed encoding */
  msgpack_pack_fix_int64(&b.pk, -7); /* negative */
  msgpack_pack_fix_uint64(&b.pk, (uint64_t)INT64_MAX + 1);
  msgpack_pack_fix_uint8(&b.pk, 255);
  msgpack_pack_float(&b.pk, 2.0f);
  msgpack_pack_fix_int32(&b.pk, INT32_MIN);
  unpack_one(&b, &zone, &o);
  const msgpack_object *a = o.via.array.ptr;
  ck_assert_int_eq(proto_obj_int(&a[0], 0, 5, &v), 0);
  ck_assert_int_eq(v, 5);
  ck_assert_int_eq(proto_obj_int(&a[1], -7, 0, &v), 0);
  ck_assert_int_eq(v, -7);
  ck_assert_int_eq(proto_obj_int(&a[2], 0, INT64_MAX, &v), HIPD_ERANGE);
  ck_assert_int_eq(proto_obj_int(&a[3], 0, 254, &v), HIPD_ERANGE);
  ck_assert_int_eq(proto_obj_int(&a[4], 0, 10, &v), HIPD_EPARAMS);
  ck_assert_int_eq(proto_obj_int(&a[5], INT32_MIN, INT32_MAX, &v), 0);
  ck_assert_int_eq(v, INT32_MIN);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_obj_uint)
{
  msgpack_object o;
  uint64_t v;

  o = obj_uint(10);
  v = 0;
  ck_assert_int_eq(proto_obj_uint(&o, 10, &v), 0);
  ck_assert_uint_eq(v, 10);
  v = 77;
  ck_assert_int_eq(proto_obj_uint(&o, 9, &v), HIPD_ERANGE);
  ck_assert_uint_eq(v, 77);
  o = obj_uint(UINT64_MAX);
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX, &v), 0);
  ck_assert_uint_eq(v, UINT64_MAX);
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX - 1, &v), HIPD_ERANGE);
  o = obj_uint(0);
  ck_assert_int_eq(proto_obj_uint(&o, 0, &v), 0);
  ck_assert_uint_eq(v, 0);

  v = 77;
  o = obj_int(-1);
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX, &v), HIPD_ERANGE);
  o = obj_int(INT64_MIN);
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX, &v), HIPD_ERANGE);
  o = obj_float(3.0, 1);
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX, &v), HIPD_EPARAMS);
  o = obj_str("3", 1, 0);
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX, &v), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_NIL};
  ck_assert_int_eq(proto_obj_uint(&o, UINT64_MAX, &v), HIPD_EPARAMS);
  ck_assert_uint_eq(v, 77);
}
END_TEST

START_TEST(test_obj_double)
{
  msgpack_object o;
  double d;

  o = obj_float(1.5, 0);
  ck_assert_int_eq(proto_obj_double(&o, &d), 0);
  ck_assert_double_eq(d, 1.5);
  o = obj_float(-2.25e300, 1);
  ck_assert_int_eq(proto_obj_double(&o, &d), 0);
  ck_assert_double_eq(d, -2.25e300);
  o = obj_uint(1ULL << 53);
  ck_assert_int_eq(proto_obj_double(&o, &d), 0);
  ck_assert_double_eq(d, 9007199254740992.0);
  o = obj_int(-3);
  ck_assert_int_eq(proto_obj_double(&o, &d), 0);
  ck_assert_double_eq(d, -3.0);
  d = 7.0;
  o = obj_str("1.0", 3, 0);
  ck_assert_int_eq(proto_obj_double(&o, &d), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_BOOLEAN};
  ck_assert_int_eq(proto_obj_double(&o, &d), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_NIL};
  ck_assert_int_eq(proto_obj_double(&o, &d), HIPD_EPARAMS);
  ck_assert_double_eq(d, 7.0);

  /* A float32 off the wire. */
  buf_t b;
  msgpack_zone zone;
  buf_init(&b);
  msgpack_pack_float(&b.pk, 0.25f);
  unpack_one(&b, &zone, &o);
  ck_assert_int_eq(o.type, MSGPACK_OBJECT_FLOAT32);
  ck_assert_int_eq(proto_obj_double(&o, &d), 0);
  ck_assert_double_eq(d, 0.25);
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_obj_bytes)
{
  msgpack_object o;
  const char *p = NULL;
  size_t n = 99;
  static const char data[] = "a\0b";

  o = obj_str(data, 3, 0);
  ck_assert_int_eq(proto_obj_bytes(&o, &p, &n), 0);
  ck_assert_ptr_eq(p, data);
  ck_assert_uint_eq(n, 3);
  o = obj_str(data, 2, 1);
  ck_assert_int_eq(proto_obj_bytes(&o, &p, &n), 0);
  ck_assert_ptr_eq(p, data);
  ck_assert_uint_eq(n, 2);
  o = obj_str(data, 0, 1);
  ck_assert_int_eq(proto_obj_bytes(&o, &p, &n), 0);
  ck_assert_uint_eq(n, 0);

  p = NULL;
  n = 99;
  o = obj_uint(1);
  ck_assert_int_eq(proto_obj_bytes(&o, &p, &n), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_EXT};
  ck_assert_int_eq(proto_obj_bytes(&o, &p, &n), HIPD_EPARAMS);
  o = (msgpack_object){.type = MSGPACK_OBJECT_ARRAY};
  ck_assert_int_eq(proto_obj_bytes(&o, &p, &n), HIPD_EPARAMS);
  ck_assert_ptr_null(p);
  ck_assert_uint_eq(n, 99);
}
END_TEST

START_TEST(test_obj_streq)
{
  msgpack_object o;

  o = obj_str("code", 4, 0);
  ck_assert(proto_obj_streq(&o, "code"));
  ck_assert(!proto_obj_streq(&o, "cod"));
  ck_assert(!proto_obj_streq(&o, "codes"));
  ck_assert(!proto_obj_streq(&o, "Code"));
  ck_assert(!proto_obj_streq(&o, ""));
  o = obj_str("code", 4, 1);
  ck_assert(proto_obj_streq(&o, "code"));
  o = obj_str("codex", 4, 0); /* not NUL-terminated at its size */
  ck_assert(proto_obj_streq(&o, "code"));
  o = obj_str("co\0de", 5, 0); /* embedded NUL */
  ck_assert(!proto_obj_streq(&o, "co"));
  o = obj_str("", 0, 0);
  ck_assert(proto_obj_streq(&o, ""));
  o = obj_uint(0);
  ck_assert(!proto_obj_streq(&o, ""));
  o = (msgpack_object){.type = MSGPACK_OBJECT_NIL};
  ck_assert(!proto_obj_streq(&o, ""));
}
END_TEST

START_TEST(test_map_get)
{
  buf_t b;
  msgpack_zone zone;
  msgpack_object o;

  buf_init(&b);
  msgpack_pack_map(&b.pk, 5);
  msgpack_pack_int(&b.pk, 1); /* a non-string key is skipped */
  msgpack_pack_int(&b.pk, 100);
  pack_str(&b.pk, "code");
  msgpack_pack_int(&b.pk, -3);
  msgpack_pack_bin(&b.pk, 4); /* bin keys count as strings */
  msgpack_pack_bin_body(&b.pk, "size", 4);
  msgpack_pack_int(&b.pk, 4096);
  pack_str(&b.pk, "code"); /* a duplicate: the first wins */
  msgpack_pack_int(&b.pk, -4);
  pack_str(&b.pk, "");
  pack_str(&b.pk, "empty key");
  unpack_one(&b, &zone, &o);

  const msgpack_object *v = proto_map_get(&o, "code");
  ck_assert_ptr_nonnull(v);
  ck_assert_int_eq(v->via.i64, -3);
  v = proto_map_get(&o, "size");
  ck_assert_ptr_nonnull(v);
  ck_assert_uint_eq(v->via.u64, 4096);
  v = proto_map_get(&o, "");
  ck_assert_ptr_nonnull(v);
  ck_assert(proto_obj_streq(v, "empty key"));
  ck_assert_ptr_null(proto_map_get(&o, "cod"));
  ck_assert_ptr_null(proto_map_get(&o, "codes"));
  ck_assert_ptr_null(proto_map_get(&o, "1"));
  ck_assert_ptr_null(proto_map_get(NULL, "code"));
  msgpack_object arr = {.type = MSGPACK_OBJECT_ARRAY};
  ck_assert_ptr_null(proto_map_get(&arr, "code"));
  msgpack_object empty = {.type = MSGPACK_OBJECT_MAP};
  ck_assert_ptr_null(proto_map_get(&empty, "code"));
  msgpack_zone_destroy(&zone);
  buf_destroy(&b);
}
END_TEST

START_TEST(test_obj_type_name)
{
  static const struct {
    msgpack_object_type type;
    const char *name;
  } cases[] = {
      {MSGPACK_OBJECT_NIL, "nil"},
      {MSGPACK_OBJECT_BOOLEAN, "bool"},
      {MSGPACK_OBJECT_POSITIVE_INTEGER, "int"},
      {MSGPACK_OBJECT_NEGATIVE_INTEGER, "int"},
      {MSGPACK_OBJECT_FLOAT32, "float"},
      {MSGPACK_OBJECT_FLOAT64, "float"},
      {MSGPACK_OBJECT_STR, "str"},
      {MSGPACK_OBJECT_BIN, "bin"},
      {MSGPACK_OBJECT_ARRAY, "array"},
      {MSGPACK_OBJECT_MAP, "map"},
      {MSGPACK_OBJECT_EXT, "ext"},
      {(msgpack_object_type)0x7f, "unknown"},
  };

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    msgpack_object o = {.type = cases[i].type};
    ck_assert_str_eq(proto_obj_type_name(&o), cases[i].name);
  }
}
END_TEST

/* --------------------------------------------------------- error table */

static const struct {
  const char *name;
  int num;
  int enum_value;
  const char *message;
} error_table[] = {
#define XX(name, num, msg) {#name, num, HIPD_##name, msg},
    HIPD_ERRNO_MAP(XX)
#undef XX
};

#define NERRORS (sizeof(error_table) / sizeof(error_table[0]))

START_TEST(test_errors_table)
{
  ck_assert_uint_ge(NERRORS, 40);
  for (size_t i = 0; i < NERRORS; i++) {
    int num = error_table[i].num;
    ck_assert_int_lt(num, 0);
    ck_assert_int_gt(num, HIPD_ERRNO_MAX_);
    ck_assert_int_eq(error_table[i].enum_value, num);
    for (size_t j = i + 1; j < NERRORS; j++) {
      ck_assert_msg(error_table[j].num != num, "%s and %s share %d",
                    error_table[i].name, error_table[j].name, num);
      ck_assert_str_ne(error_table[j].name, error_table[i].name);
    }
    ck_assert_str_eq(hipd_err_name(num), error_table[i].name);
    ck_assert_int_eq(hipd_err_from_name(error_table[i].name), num);
    ck_assert_int_eq(hipd_err_from_name(hipd_err_name(num)), num);
    ck_assert_str_eq(hipd_strerror(num), error_table[i].message);
    ck_assert_uint_gt(strlen(hipd_strerror(num)), 0);
    ck_assert_str_ne(hipd_strerror(num), "unknown error");
    ck_assert(strncmp(error_table[i].name, "E", 1) == 0);
  }
  /* Stable numbers: the table runs -1, -2, ... without gaps. */
  for (size_t i = 0; i < NERRORS; i++)
    ck_assert_int_eq(error_table[i].num, -(int)(i + 1));
  ck_assert_int_eq(HIPD_EINVAL, -1);
  ck_assert_int_eq(HIPD_EINTERNAL, -40);
}
END_TEST

START_TEST(test_errors_unknown)
{
  static const int unknown[] = {1,     42,      HIPD_ERRNO_MAX_,
                                -1000, INT_MIN, INT_MAX};

  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    ck_assert_str_eq(hipd_err_name(unknown[i]), "UNKNOWN");
    ck_assert_str_eq(hipd_strerror(unknown[i]), "unknown error");
  }
  ck_assert_str_eq(hipd_err_name(0), "OK");
  ck_assert_str_eq(hipd_strerror(0), "success");
  ck_assert_int_eq(hipd_err_from_name("UNKNOWN"), 0);
  ck_assert_int_eq(hipd_err_from_name("OK"), 0);
  ck_assert_int_eq(hipd_err_from_name(""), 0);
  ck_assert_int_eq(hipd_err_from_name("einval"), 0);
  ck_assert_int_eq(hipd_err_from_name("EINVA"), 0);
  ck_assert_int_eq(hipd_err_from_name("EINVALX"), 0);
  ck_assert_int_eq(hipd_err_from_name("HIPD_EINVAL"), 0);
}
END_TEST

/* ---------------------------------------------------------------- main */

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

static Suite *codec_suite(void)
{
  Suite *s = suite_create("codec");
  TCase *tc;

  tc = tcase_create("decode");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_decode_request);
  tcase_add_test(tc, test_decode_response_and_notify);
  tcase_add_loop_test(tc, test_decode_invalid, 0,
                      (int)(sizeof(bad_messages) / sizeof(bad_messages[0])));
  tcase_add_test(tc, test_decode_boundaries);
  suite_add_tcase(s, tc);

  tc = tcase_create("encode");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_pack_request);
  tcase_add_test(tc, test_pack_response);
  tcase_add_test(tc, test_pack_error_response);
  tcase_add_test(tc, test_pack_error_response_long);
  tcase_add_test(tc, test_pack_error_default_message);
  tcase_add_test(tc, test_pack_notify);
  tcase_add_test(tc, test_pack_cstr);
  tcase_add_test(tc, test_error_decode_malformed);
  suite_add_tcase(s, tc);

  tc = tcase_create("readers");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_obj_int);
  tcase_add_test(tc, test_obj_int_wire);
  tcase_add_test(tc, test_obj_uint);
  tcase_add_test(tc, test_obj_double);
  tcase_add_test(tc, test_obj_bytes);
  tcase_add_test(tc, test_obj_streq);
  tcase_add_test(tc, test_map_get);
  tcase_add_test(tc, test_obj_type_name);
  suite_add_tcase(s, tc);
  return s;
}

static Suite *errors_suite(void)
{
  Suite *s = suite_create("errors");
  TCase *tc = tcase_create("table");

  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_errors_table);
  tcase_add_test(tc, test_errors_unknown);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr = srunner_create(framing_suite());
  int failed;

  srunner_add_suite(sr, codec_suite());
  srunner_add_suite(sr, errors_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
