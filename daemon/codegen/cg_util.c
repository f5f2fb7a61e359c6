/* SPDX-License-Identifier: MIT */
/* daemon/codegen/cg_util.c: hash maps. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_util.h"

/* ------------------------------------------------------------ strmap */

static uint64_t str_hash(const char *s)
{
  uint64_t h = 1469598103934665603ull; /* FNV-1a */

  while (*s != '\0') {
    h ^= (unsigned char)*s++;
    h *= 1099511628211ull;
  }
  return h;
}

void strmap_init(strmap_t *m)
{
  memset(m, 0, sizeof(*m));
}

void strmap_free(strmap_t *m)
{
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof(*m));
}

static size_t strmap_find(const strmap_t *m, const char *key)
{
  size_t i = (size_t)str_hash(key) & (m->cap - 1);

  while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
    i = (i + 1) & (m->cap - 1);
  return i;
}

static int strmap_grow(strmap_t *m)
{
  size_t cap = m->cap ? m->cap * 2 : 64;
  strmap_t n = {calloc(cap, sizeof(char *)), calloc(cap, sizeof(void *)), 0,
                cap};

  if (n.keys == NULL || n.vals == NULL) {
    free(n.keys);
    free(n.vals);
    return -1;
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i] != NULL) {
      size_t j = strmap_find(&n, m->keys[i]);
      n.keys[j] = m->keys[i];
      n.vals[j] = m->vals[i];
      n.n++;
    }
  free(m->keys);
  free(m->vals);
  *m = n;
  return 0;
}

void **strmap_slot(strmap_t *m, const char *key)
{
  size_t i;

  if ((m->n + 1) * 2 > m->cap && strmap_grow(m) != 0)
    return NULL;
  i = strmap_find(m, key);
  if (m->keys[i] == NULL) {
    m->keys[i] = key;
    m->vals[i] = NULL;
    m->n++;
  }
  return &m->vals[i];
}

void *strmap_get(const strmap_t *m, const char *key)
{
  size_t i;

  if (m->cap == 0)
    return NULL;
  i = strmap_find(m, key);
  return m->keys[i] != NULL ? m->vals[i] : NULL;
}

/* ------------------------------------------------------------ u64map */

static size_t u64_hash(uint64_t k)
{
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k;
}

void u64map_init(u64map_t *m)
{
  memset(m, 0, sizeof(*m));
}

void u64map_free(u64map_t *m)
{
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof(*m));
}

void u64map_clear(u64map_t *m)
{
  if (m->cap != 0)
    memset(m->vals, 0, m->cap * sizeof(void *));
  m->n = 0;
}

static size_t u64map_find(const u64map_t *m, uint64_t key)
{
  size_t i = u64_hash(key) & (m->cap - 1);

  while (m->vals[i] != NULL && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  return i;
}

int u64map_put(u64map_t *m, uint64_t key, void *val)
{
  size_t i;

  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    u64map_t n = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(void *)), 0,
                  cap};
    if (n.keys == NULL || n.vals == NULL) {
      free(n.keys);
      free(n.vals);
      return -1;
    }
    for (size_t j = 0; j < m->cap; j++)
      if (m->vals[j] != NULL) {
        size_t k = u64map_find(&n, m->keys[j]);
        n.keys[k] = m->keys[j];
        n.vals[k] = m->vals[j];
        n.n++;
      }
    free(m->keys);
    free(m->vals);
    *m = n;
  }
  i = u64map_find(m, key);
  if (m->vals[i] == NULL)
    m->n++;
  m->keys[i] = key;
  m->vals[i] = val;
  return 0;
}

void *u64map_get(const u64map_t *m, uint64_t key)
{
  if (m->cap == 0)
    return NULL;
  return m->vals[u64map_find(m, key)];
}

int cg_word_ok(const char *s, size_t n)
{
  if (n == 0)
    return 0;
  if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') ||
        (s[0] >= 'a' && s[0] <= 'z')))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
      return 0;
  return 1;
}

/* ---------------------------------------------------------- binary16 */

static uint32_t f_bits(float f)
{
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  return x;
}

static float bits_f(uint32_t x)
{
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

uint16_t cg_f2h(float f)
{
  uint32_t x = f_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu, r, rem, half;

  if (a >= 0x7f800000u)
    return (uint16_t)(sign | 0x7c00u |
                      (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  if (a >= 0x477ff000u) /* 65520 and above round to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
    if (a < 0x33000000u)
      return (uint16_t)sign;
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)e;
    r = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
  } else {
    r = (a - 0x38000000u) >> 13;
    rem = a & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (r & 1u)))
    r++;
  return (uint16_t)(sign | r);
}

float cg_h2f(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
           m = h & 0x3ffu;

  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31)
    return bits_f(sign | 0x7f800000u | (m << 13));
  return bits_f(sign | ((e + 112u) << 23) | (m << 13));
}
