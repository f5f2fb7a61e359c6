/* SPDX-License-Identifier: MIT */
/* daemon/kernels/cache_key.h: the kernel cache's key, as both tiers use
 * it: its bytes, its hex name (the disk entry's file name, and what
 * cache.list shows), its hash bucket and equality. Below cache.c (the
 * memory tier and the requests) and cache_disk.c (the disk tier), so that
 * neither needs the other for a key. */
#ifndef HIPD_KERNELS_CACHE_KEY_H
#define HIPD_KERNELS_CACHE_KEY_H

#include <stdint.h>
#include <string.h>

#define CACHE_KEY_SIZE 32
#define CACHE_NBUCKETS 4096 /* buckets of each tier's hash index */

typedef struct {
  uint8_t b[CACHE_KEY_SIZE];
} cache_key_t;

/* 64 hex digits + NUL. */
static inline void cache_key_hex(const cache_key_t *key,
                                 char out[2 * CACHE_KEY_SIZE + 1])
{
  static const char hex[] = "0123456789abcdef";

  for (int i = 0; i < CACHE_KEY_SIZE; i++) {
    out[2 * i] = hex[key->b[i] >> 4];
    out[2 * i + 1] = hex[key->b[i] & 15];
  }
  out[2 * CACHE_KEY_SIZE] = '\0';
}

static inline unsigned cache_key_bucket(const cache_key_t *key)
{
  return ((unsigned)key->b[0] | (unsigned)key->b[1] << 8) % CACHE_NBUCKETS;
}

static inline int cache_key_eq(const cache_key_t *a, const cache_key_t *b)
{
  return memcmp(a->b, b->b, CACHE_KEY_SIZE) == 0;
}

#endif
