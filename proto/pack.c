/* SPDX-License-Identifier: MIT */
/* proto/pack.c: msgpack maps that count their own keys (pack.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "rpc.h"

enum { MAP16_HEAD = 3 }; /* 0xde and a big-endian 16-bit count */

void pack_map_begin(pack_map_t *m, msgpack_packer *pk)
{
  static const char head[MAP16_HEAD] = {(char)0xde, 0, 0};

  m->pk = pk;
  m->sb = pk->data;
  m->n = 0;
  m->at = m->sb->size;
  msgpack_sbuffer_write(m->sb, head, sizeof(head));
}

msgpack_packer *pack_key(pack_map_t *m, const char *key)
{
  m->n++;
  proto_pack_cstr(m->pk, key);
  return m->pk;
}

void pack_map_end(pack_map_t *m)
{
  char *h = m->sb->data + m->at;

  if (m->n > UINT16_MAX)
    abort(); /* no reply or report has that many keys */
  if (m->n < 16) {
    /* A fixmap, as msgpack_pack_map() would have packed it: move the body
     * back over the two count bytes. */
    size_t body = m->sb->size - m->at - MAP16_HEAD;
    h[0] = (char)(0x80 | m->n);
    memmove(h + 1, h + MAP16_HEAD, body);
    m->sb->size -= MAP16_HEAD - 1;
  } else {
    h[1] = (char)(m->n >> 8);
    h[2] = (char)(m->n & 0xff);
  }
}

void pack_kv_u64(pack_map_t *m, const char *key, uint64_t v)
{
  msgpack_pack_uint64(pack_key(m, key), v);
}

void pack_kv_i64(pack_map_t *m, const char *key, int64_t v)
{
  msgpack_pack_int64(pack_key(m, key), v);
}

void pack_kv_f64(pack_map_t *m, const char *key, double v)
{
  msgpack_pack_double(pack_key(m, key), v);
}

void pack_kv_bool(pack_map_t *m, const char *key, bool v)
{
  msgpack_packer *pk = pack_key(m, key);

  if (v)
    msgpack_pack_true(pk);
  else
    msgpack_pack_false(pk);
}

void pack_kv_nil(pack_map_t *m, const char *key)
{
  msgpack_pack_nil(pack_key(m, key));
}

void pack_kv_str(pack_map_t *m, const char *key, const char *v)
{
  if (v == NULL)
    pack_kv_nil(m, key);
  else
    pack_kv_strn(m, key, v, strlen(v));
}

void pack_kv_strn(pack_map_t *m, const char *key, const char *v, size_t len)
{
  msgpack_packer *pk = pack_key(m, key);

  msgpack_pack_str(pk, len);
  msgpack_pack_str_body(pk, v, len);
}

void pack_kv_bin(pack_map_t *m, const char *key, const void *v, size_t len)
{
  msgpack_packer *pk = pack_key(m, key);

  msgpack_pack_bin(pk, len);
  msgpack_pack_bin_body(pk, v, len);
}
