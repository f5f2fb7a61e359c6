/* daemon/codegen/cg_util.h: a string builder and two small hash maps for
 * the code generator and the IR decoder (malloc'd; not thread-safe). */
#ifndef HIPD_CODEGEN_CG_UTIL_H
#define HIPD_CODEGEN_CG_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ sbuf */

/* A growing string, NUL-terminated, with a cap: an append past the cap or
 * an allocation failure sets a flag and appends nothing more. */
typedef struct {
  char *p;
  size_t len, cap;
  size_t limit; /* 0: none */
  int oom;      /* an allocation failed */
  int over;     /* the limit was reached */
} sbuf_t;

void sb_init(sbuf_t *b, size_t limit);
void sb_free(sbuf_t *b);
void sb_addn(sbuf_t *b, const char *s, size_t n);
void sb_add(sbuf_t *b, const char *s);
void sb_addc(sbuf_t *b, char c);
void sb_printf(sbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Take the string (malloc'd, NUL-terminated; "" if empty) and reset @p b.
 * NULL after a failure. */
char *sb_take(sbuf_t *b, size_t *len);
/* Was anything lost (oom or over the limit)? */
static inline int sb_failed(const sbuf_t *b)
{
  return b->oom || b->over;
}

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

#endif
