/* SPDX-License-Identifier: MIT */
/* proto/pack.h: msgpack maps that count their own keys.
 *
 * A map's header holds its key count, so a map packed by hand states the
 * count once in msgpack_pack_map() and again in the keys that follow, and
 * the two drift apart. A pack_map_t packs the header last: pack_map_begin()
 * reserves room for it in the packer's buffer, every pack_key() (and the
 * pack_kv_*() shorthands) counts one key, and pack_map_end() writes the
 * count, as a fixmap when it is below 16 (the bytes a literal count would
 * have given) and a map16 otherwise. Maps nest: a value may itself be a
 * map begun after its key.
 *
 * The packer must write into a msgpack_sbuffer (msgpack_sbuffer_write),
 * as every reply and report does (msgpack-c's msgpack_sbuffer_write is
 * static inline, so this cannot be checked at run time).
 * Out of memory, msgpack-c's sbuffer aborts, as on every other pack.
 */
#ifndef HIPD_PROTO_PACK_H
#define HIPD_PROTO_PACK_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pack_map {
  msgpack_packer *pk;  /* the packer the keys and values go to */
  msgpack_sbuffer *sb; /* its buffer, where the header is patched */
  size_t at;           /* offset of the reserved header */
  uint32_t n;          /* keys packed so far */
} pack_map_t;

/* Reserve a map header in @p pk's buffer, a msgpack_sbuffer. */
void pack_map_begin(pack_map_t *m, msgpack_packer *pk);
/* Pack @p key, count it, and return the packer for its one value. */
msgpack_packer *pack_key(pack_map_t *m, const char *key);
/* Write the header with the count of keys packed (at most 65535). */
void pack_map_end(pack_map_t *m);

/* A key and its value in one call. */
void pack_kv_u64(pack_map_t *m, const char *key, uint64_t v);
void pack_kv_i64(pack_map_t *m, const char *key, int64_t v);
void pack_kv_f64(pack_map_t *m, const char *key, double v);
void pack_kv_bool(pack_map_t *m, const char *key, bool v);
void pack_kv_nil(pack_map_t *m, const char *key);
/* @p v NUL-terminated; NULL packs nil. */
void pack_kv_str(pack_map_t *m, const char *key, const char *v);
void pack_kv_strn(pack_map_t *m, const char *key, const char *v, size_t len);
void pack_kv_bin(pack_map_t *m, const char *key, const void *v, size_t len);

#endif
