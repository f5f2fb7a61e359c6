/* SPDX-License-Identifier: MIT */
/* tools/hipctl/out.c: hipctl's output: human sizes and durations, aligned
 * tables, JSON on stdout, and record fields with defaults.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipctl.h"
#include "util/array.h"

/* ---------------------------------------------------- sizes and times */

void out_size(char *buf, size_t cap, uint64_t bytes)
{
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  int u = -1;

  if (bytes < 1024) {
    snprintf(buf, cap, "%" PRIu64 " B", bytes);
    return;
  }
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, cap, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

void out_duration_ms(char *buf, size_t cap, double ms)
{
  uint64_t s;

  if (!(ms > 0)) {
    snprintf(buf, cap, "0 s");
    return;
  }
  if (ms < 1000) {
    snprintf(buf, cap, ms < 10 ? "%.1f ms" : "%.0f ms", ms);
    return;
  }
  if (ms < 60000) {
    snprintf(buf, cap, "%.1f s", ms / 1000);
    return;
  }
  s = (uint64_t)(ms / 1000);
  if (s < 3600)
    snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
  else if (s < 86400)
    snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
  else
    snprintf(buf, cap, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
}

/* --------------------------------------------------------------- tables */

struct out_table {
  size_t ncol;
  const char *align; /* per column: 'l' or 'r' */
  char **cells;      /* row-major, header first */
  size_t n, cap;
};

out_table_t *out_table_new(const char *const *header, const char *align)
{
  out_table_t *t = calloc(1, sizeof(*t));

  if (t == NULL)
    return NULL;
  while (header[t->ncol] != NULL)
    t->ncol++;
  t->align = align;
  for (size_t i = 0; i < t->ncol; i++)
    out_table_cell(t, "%s", header[i]);
  return t;
}

void out_table_cell(out_table_t *t, const char *fmt, ...)
{
  va_list ap;
  char *s = NULL;

  if (t == NULL)
    return;
  if (ARRAY_GROW(t->cells, t->n, t->cap, 64) != 0)
    return;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  t->cells[t->n++] = s;
}

void out_table_print(out_table_t *t, FILE *f)
{
  size_t *w;

  if (t == NULL || (w = calloc(t->ncol, sizeof(*w))) == NULL)
    return;
  for (size_t i = 0; i < t->n; i++) {
    size_t len = t->cells[i] ? strlen(t->cells[i]) : 0;
    if (len > w[i % t->ncol])
      w[i % t->ncol] = len;
  }
  for (size_t i = 0; i < t->n; i++) {
    size_t c = i % t->ncol;
    const char *s = t->cells[i] ? t->cells[i] : "";
    int last = c == t->ncol - 1;
    /* The header is left-aligned over text, right over numbers. */
    if (t->align != NULL && t->align[c] == 'r')
      fprintf(f, "%*s", (int)w[c], s);
    else if (last)
      fputs(s, f);
    else
      fprintf(f, "%-*s", (int)w[c], s);
    fputs(last ? "\n" : "  ", f);
  }
  free(w);
}

void out_table_free(out_table_t *t)
{
  if (t == NULL)
    return;
  for (size_t i = 0; i < t->n; i++)
    free(t->cells[i]);
  free(t->cells);
  free(t);
}

/* ----------------------------------------------------------------- JSON */

/* One level per open object or array: has it a member yet? */
static int js_first[64] = {1};
static int js_depth;
static int js_after_key;

/* Before a value: the comma, unless it follows a key or comes first. */
static void js_sep(void)
{
  if (js_after_key) {
    js_after_key = 0;
    return;
  }
  if (js_depth > 0 && !js_first[js_depth])
    fputs(", ", stdout);
  js_first[js_depth] = 0;
}

static void js_open(char c)
{
  js_sep();
  putchar(c);
  if (js_depth < 63)
    js_depth++;
  js_first[js_depth] = 1;
}

void js_obj_begin(void)
{
  js_open('{');
}

void js_arr_begin(void)
{
  js_open('[');
}

void js_obj_end(void)
{
  putchar('}');
  if (js_depth > 0)
    js_depth--;
}

void js_arr_end(void)
{
  putchar(']');
  if (js_depth > 0)
    js_depth--;
}

void js_key(const char *key)
{
  js_sep();
  js_strn(key, strlen(key));
  fputs(": ", stdout);
  js_after_key = 1;
}

void js_strn(const char *s, size_t n)
{
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c == '\n')
      fputs("\\n", stdout);
    else if (c == '\t')
      fputs("\\t", stdout);
    else if (c < 0x20 || c == 0x7f)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

void js_bytes(const char *s, size_t n)
{
  js_sep();
  js_strn(s, n);
}

void js_str(const char *s)
{
  js_sep();
  if (s == NULL)
    fputs("null", stdout);
  else
    js_strn(s, strlen(s));
}

void js_int(int64_t v)
{
  js_sep();
  printf("%" PRId64, v);
}

void js_uint(uint64_t v)
{
  js_sep();
  printf("%" PRIu64, v);
}

void js_double(double v)
{
  js_sep();
  if (!isfinite(v))
    fputs("null", stdout);
  else
    printf("%.17g", v);
}

void js_bool(int v)
{
  js_sep();
  fputs(v ? "true" : "false", stdout);
}

void js_null(void)
{
  js_sep();
  fputs("null", stdout);
}

void js_info(const hipd_info_t *info)
{
  int n;
  char *buf;

  js_sep();
  if (info == NULL || (n = hipd_info_format(info, NULL, 0)) < 0 ||
      (buf = malloc((size_t)n + 1)) == NULL) {
    fputs("null", stdout);
    return;
  }
  hipd_info_format(info, buf, (size_t)n + 1);
  fputs(buf, stdout);
  free(buf);
}

void js_end(void)
{
  putchar('\n');
}

/* -------------------------------------------------------------- fields */

#define PATH_OF(fmt)                                                           \
  char path[256];                                                              \
  va_list ap;                                                                  \
  va_start(ap, fmt);                                                           \
  vsnprintf(path, sizeof(path), fmt, ap);                                      \
  va_end(ap)

uint64_t info_u64(const hipd_info_t *info, const char *fmt, ...)
{
  uint64_t v = 0;
  double d;
  PATH_OF(fmt);

  if (hipd_info_uint(info, path, &v) == 0)
    return v;
  if (hipd_info_double(info, path, &d) == 0 && d >= 0)
    return (uint64_t)d;
  return 0;
}

int64_t info_i64(const hipd_info_t *info, const char *fmt, ...)
{
  int64_t v = 0;
  PATH_OF(fmt);

  return hipd_info_int(info, path, &v) == 0 ? v : 0;
}

double info_dbl(const hipd_info_t *info, const char *fmt, ...)
{
  double v = 0;
  int64_t i;
  PATH_OF(fmt);

  if (hipd_info_double(info, path, &v) == 0)
    return v;
  if (hipd_info_int(info, path, &i) == 0)
    return (double)i;
  return (double)info_u64(info, "%s", path);
}

const char *info_s(const hipd_info_t *info, const char *fmt, ...)
{
  const char *s = NULL;
  PATH_OF(fmt);

  return hipd_info_str(info, path, &s, NULL) == 0 && s ? s : "";
}

int info_n(const hipd_info_t *info, const char *fmt, ...)
{
  int n;
  PATH_OF(fmt);

  n = hipd_info_len(info, path);
  return n > 0 ? n : 0;
}

int info_has(const hipd_info_t *info, const char *fmt, ...)
{
  int64_t i;
  PATH_OF(fmt);

  /* Absent is ENOENT; a field of another type answers otherwise. */
  return hipd_info_int(info, path, &i) != HIPD_ENOENT;
}

int info_b(const hipd_info_t *info, const char *fmt, ...)
{
  int b = 0;
  PATH_OF(fmt);

  return hipd_info_bool(info, path, &b) == 0 && b;
}
