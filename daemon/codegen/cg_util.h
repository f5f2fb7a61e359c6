/* SPDX-License-Identifier: MIT */
/* daemon/codegen/cg_util.h: two small hash maps for the code generator and
 * the IR decoder (malloc'd; not thread-safe). */
#ifndef HIPD_CODEGEN_CG_UTIL_H
#define HIPD_CODEGEN_CG_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

/* The string builder is daemon/util/strbuf.h. The old names stay for the
 * callers not yet renamed (tests/check_codegen.c). */
typedef strbuf_t sbuf_t;
#define sb_init strbuf_init
#define sb_free strbuf_free
#define sb_take strbuf_take

/* ------------------------------------------------------------ strmap */

/* A map from strings (not copied: they must outlive the map) to pointers.
 * Entries are never removed; a value may be set to NULL. */
typedef struct {
  const char **keys;
  void **vals;
  size_t n, cap;
} strmap_t;

void strmap_init(strmap_t *m);
void strmap_free(strmap_t *m);
/* The slot of @p key, created (value NULL) if absent; NULL when out of
 * memory. */
void **strmap_slot(strmap_t *m, const char *key);
/* The value of @p key, NULL if absent. */
void *strmap_get(const strmap_t *m, const char *key);

/* ------------------------------------------------------------ u64map */

/* A map from 64-bit ids to pointers. */
typedef struct {
  uint64_t *keys;
  void **vals; /* NULL: empty slot */
  size_t n, cap;
} u64map_t;

void u64map_init(u64map_t *m);
void u64map_free(u64map_t *m);
void u64map_clear(u64map_t *m);
/* Insert @p key -> @p val (val not NULL). @return 0, or -1 out of memory. */
int u64map_put(u64map_t *m, uint64_t key, void *val);
void *u64map_get(const u64map_t *m, uint64_t key);

/* Is [s, s + n) a C identifier ([A-Za-z_][A-Za-z0-9_]*, not empty)? */
int cg_word_ok(const char *s, size_t n);

/* IEEE binary16 bits of @p f, rounded to nearest, ties to even (overflow
 * to infinity, NaN kept quiet); and back (exact). */
uint16_t cg_f2h(float f);
float cg_h2f(uint16_t h);

#endif
