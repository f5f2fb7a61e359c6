/* SPDX-License-Identifier: MIT */
/* tests/lib/proto_util.c: the packers, the scanner and the sample messages
 * of tests/lib/proto_util.h. */
#include "config.h"

#include "proto_util.h"

void buf_init(buf_t *b)
{
  msgpack_sbuffer_init(&b->sb);
  msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

void buf_destroy(buf_t *b)
{
  msgpack_sbuffer_destroy(&b->sb);
}

/* Append raw bytes, for encodings the packer never produces. */
void raw(buf_t *b, const void *p, size_t n)
{
  msgpack_sbuffer_write(&b->sb, p, n);
}

void pack_str(msgpack_packer *pk, const char *s)
{
  proto_pack_cstr(pk, s);
}

void pack_filled_str(msgpack_packer *pk, size_t n, char c)
{
  char *p = malloc(n ? n : 1);

  ck_assert_ptr_nonnull(p);
  memset(p, c, n);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, p, n);
  free(p);
}

void pack_filled_bin(msgpack_packer *pk, size_t n)
{
  uint8_t *p = malloc(n ? n : 1);

  ck_assert_ptr_nonnull(p);
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 7);
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
  free(p);
}

void pack_filled_ext(msgpack_packer *pk, size_t n, int8_t type)
{
  uint8_t *p = malloc(n ? n : 1);

  ck_assert_ptr_nonnull(p);
  memset(p, 0x5a, n);
  msgpack_pack_ext(pk, n, type);
  msgpack_pack_ext_body(pk, p, n);
  free(p);
}

long long scan(const proto_limits_t *lim, const void *p, size_t len,
               size_t *need, const char **reason)
{
  *need = (size_t)-1;
  *reason = NULL;
  return proto_frame_scan(lim, p, len, need, reason);
}

/* msgpack-c's idea of the size of the first object of buf[0, len). */
size_t reference_size(const void *p, size_t len)
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
void check_prefixes(const proto_limits_t *lim, const uint8_t *msg, size_t len)
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

/* Build sample message @p i: valid msgpack-rpc messages that together use
 * every msgpack type and every length encoding. @return its type. */
int sample_build(int i, buf_t *b)
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
