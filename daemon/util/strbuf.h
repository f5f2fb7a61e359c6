/* SPDX-License-Identifier: MIT */
/* daemon/util/strbuf.h: the one string builder (malloc'd; one owner, not
 * thread-safe). Used by the code generator and the CPU compile step; no
 * libuv, linked into libhipdcodegen and libhipdcore through libhipdutil. */
#ifndef HIPD_UTIL_STRBUF_H
#define HIPD_UTIL_STRBUF_H

#include <stddef.h>

/* A growing string, NUL-terminated once anything was added, with an
 * optional cap. An append that fails (allocation, or past the cap) sets
 * a flag, and every later append does nothing: build, then check once.
 * All-zero ({0}) is a valid empty builder with no cap. */
typedef struct {
  char *p;      /* the string; NULL until the first append */
  size_t len;   /* bytes in p, not counting the NUL */
  size_t cap;   /* bytes allocated */
  size_t limit; /* most bytes allowed; 0: none */
  int oom;      /* an allocation failed */
  int over;     /* the limit was reached */
} strbuf_t;

/* An empty builder holding at most @p limit bytes (0: no limit). */
void strbuf_init(strbuf_t *b, size_t limit);
/* Free the string and reset @p b to empty (the limit is kept at 0). */
void strbuf_free(strbuf_t *b);
void strbuf_addn(strbuf_t *b, const char *s, size_t n);
void strbuf_add(strbuf_t *b, const char *s);
void strbuf_addc(strbuf_t *b, char c);
void strbuf_printf(strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Take the string (malloc'd, NUL-terminated, "" if empty; the caller frees
 * it) and reset @p b; *@p len (if not NULL) gets its length. NULL after a
 * failure, when @p b is freed instead. */
char *strbuf_take(strbuf_t *b, size_t *len);
/* Was anything lost (out of memory, or over the limit)? */
static inline int strbuf_failed(const strbuf_t *b)
{
  return b->oom || b->over;
}

#endif
