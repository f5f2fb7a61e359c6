/* SPDX-License-Identifier: MIT */
/* tests/lib/proto_util.h: what the check_proto_* programs share: buffers, the
 * packers of filled strings, bins and exts, the reference scanner, and the
 * sample messages every framing and decoding test goes through.
 *
 * Those programs test the wire code of proto/ on real bytes, with
 * msgpack-c as the reference decoder:
 *   check_proto_framing.c  the frame scanner: limits, truncated and
 *                          concatenated streams, random bytes and mutations;
 *   check_proto_codec.c    decoding and encoding messages, and the object
 *                          readers;
 *   check_proto_errors.c   the error table of proto/errors.c.
 * Compiled once in tests/lib/proto_util.c (libhipdtest_proto).
 */
#ifndef HIPD_TESTS_PROTO_UTIL_H
#define HIPD_TESTS_PROTO_UTIL_H

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

void buf_init(buf_t *b);
void buf_destroy(buf_t *b);
/* Append raw bytes, for encodings the packer never produces. */
void raw(buf_t *b, const void *p, size_t n);

void pack_str(msgpack_packer *pk, const char *s);
/* A str of @p n bytes @p c, a bin of @p n bytes (i * 7), an ext of @p n
 * bytes 0x5a. */
void pack_filled_str(msgpack_packer *pk, size_t n, char c);
void pack_filled_bin(msgpack_packer *pk, size_t n);
void pack_filled_ext(msgpack_packer *pk, size_t n, int8_t type);

/* proto_frame_scan() with *@p need and *@p reason reset first. */
long long scan(const proto_limits_t *lim, const void *p, size_t len,
               size_t *need, const char **reason);

/* msgpack-c's idea of the size of the first object of buf[0, len). */
size_t reference_size(const void *p, size_t len);

/* Every proper prefix of the complete message buf[0, len) asks for more
 * bytes, with a hint in (prefix, len]; the whole returns exactly len. */
void check_prefixes(const proto_limits_t *lim, const uint8_t *msg, size_t len);

/* ---------------------------------------------------- sample messages */

enum { NSAMPLES = 11 };

/* Build sample message @p i: valid msgpack-rpc messages that together use
 * every msgpack type and every length encoding. @return its type. */
int sample_build(int i, buf_t *b);

#endif
