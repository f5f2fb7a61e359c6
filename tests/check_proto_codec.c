/* SPDX-License-Identifier: MIT */
/* tests/check_proto_codec.c: decoding and encoding of proto/: requests,
 * responses and notifications, invalid messages and boundaries, the
 * packers of requests, responses, errors and notifications, and the object
 * readers (suite "codec"). The shared helpers are in tests/lib/proto_util.h. */
#include "proto_util.h"

#include <stdio.h>

#include "pack.h"
#include "run.h"

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

/* A pack_map_t counts its keys: a fixmap below 16 keys (the bytes
 * msgpack_pack_map() gives), a map16 from 16, nested maps, and the bytes
 * before the map kept. */
static void check_counted_map(unsigned nkeys)
{
  msgpack_sbuffer ref, got;
  msgpack_packer rp, gp;
  pack_map_t m, inner;
  char key[16];

  msgpack_sbuffer_init(&ref);
  msgpack_sbuffer_init(&got);
  msgpack_packer_init(&rp, &ref, msgpack_sbuffer_write);
  msgpack_packer_init(&gp, &got, msgpack_sbuffer_write);
  msgpack_pack_array(&rp, 2);
  msgpack_pack_array(&gp, 2);
  msgpack_pack_map(&rp, nkeys + 1);
  pack_map_begin(&m, &gp);
  for (unsigned i = 0; i < nkeys; i++) {
    snprintf(key, sizeof(key), "k%u", i);
    proto_pack_cstr(&rp, key);
    msgpack_pack_uint64(&rp, i);
    pack_kv_u64(&m, key, i);
  }
  proto_pack_cstr(&rp, "inner");
  msgpack_pack_map(&rp, 2);
  proto_pack_cstr(&rp, "s");
  proto_pack_cstr(&rp, "x");
  proto_pack_cstr(&rp, "n");
  msgpack_pack_nil(&rp);
  pack_map_begin(&inner, pack_key(&m, "inner"));
  pack_kv_str(&inner, "s", "x");
  pack_kv_str(&inner, "n", NULL);
  pack_map_end(&inner);
  pack_map_end(&m);
  msgpack_pack_true(&rp);
  msgpack_pack_true(&gp);
  ck_assert_uint_eq(m.n, nkeys + 1);
  ck_assert_uint_eq(got.size, ref.size);
  ck_assert_int_eq(memcmp(got.data, ref.data, ref.size), 0);
  msgpack_sbuffer_destroy(&ref);
  msgpack_sbuffer_destroy(&got);
}

START_TEST(test_pack_map_counts)
{
  check_counted_map(0);
  check_counted_map(3);
  check_counted_map(14); /* 15 keys with "inner": the last fixmap */
  check_counted_map(15); /* 16: the first map16 */
  check_counted_map(300);
}
END_TEST

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
  tcase_add_test(tc, test_pack_map_counts);
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

int main(void)
{
  return test_main(codec_suite());
}
