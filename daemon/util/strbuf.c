/* SPDX-License-Identifier: MIT */
/* daemon/util/strbuf.c: the string builder (strbuf.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

void strbuf_init(strbuf_t *b, size_t limit)
{
  memset(b, 0, sizeof(*b));
  b->limit = limit;
}

void strbuf_free(strbuf_t *b)
{
  free(b->p);
  memset(b, 0, sizeof(*b));
}

static int reserve(strbuf_t *b, size_t n)
{
  size_t need, cap;
  char *p;

  if (b->oom || b->over)
    return -1;
  need = b->len + n + 1;
  if (b->limit != 0 && b->len + n > b->limit) {
    b->over = 1;
    return -1;
  }
  if (need <= b->cap)
    return 0;
  cap = b->cap ? b->cap : 256;
  while (cap < need)
    cap *= 2;
  p = realloc(b->p, cap);
  if (p == NULL) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void strbuf_addn(strbuf_t *b, const char *s, size_t n)
{
  if (reserve(b, n) != 0)
    return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void strbuf_add(strbuf_t *b, const char *s)
{
  strbuf_addn(b, s, strlen(s));
}

void strbuf_addc(strbuf_t *b, char c)
{
  strbuf_addn(b, &c, 1);
}

void strbuf_printf(strbuf_t *b, const char *fmt, ...)
{
  va_list ap;
  char small[256];
  int n;

  va_start(ap, fmt);
  n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  if ((size_t)n < sizeof(small)) {
    strbuf_addn(b, small, (size_t)n);
    return;
  }
  if (reserve(b, (size_t)n) != 0)
    return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *strbuf_take(strbuf_t *b, size_t *len)
{
  char *p;

  if (strbuf_failed(b)) {
    strbuf_free(b);
    return NULL;
  }
  if (b->p == NULL && reserve(b, 0) != 0)
    return NULL;
  if (b->len == 0)
    b->p[0] = '\0';
  p = b->p;
  if (len != NULL)
    *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}
