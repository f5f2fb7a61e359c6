/* SPDX-License-Identifier: MIT */
/* bench/bench_util.c: see bench_util.h. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "util/clock.h"
#include "util/parse.h"

void bu_log_tail(const char *path, int lines)
{
  FILE *f = fopen(path, "r");
  char *text = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[4096];

  if (f == NULL)
    return;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    if (len + n + 1 > cap) {
      char *t = realloc(text, (cap = (len + n + 1) * 2));
      if (t == NULL)
        break;
      text = t;
    }
    memcpy(text + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (text == NULL)
    return;
  text[len] = '\0';
  size_t start = len;
  for (int seen = 0; start > 0; start--)
    if (text[start - 1] == '\n' && ++seen > lines)
      break;
  fprintf(stderr, "----- %s (last %d lines) -----\n%s----- end -----\n", path,
          lines, text + start);
  free(text);
}

double bu_now(void)
{
  return (double)util_now_ns() / 1e9;
}

void bu_sleep(double seconds)
{
  struct timespec ts;

  if (seconds <= 0)
    return;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return x < y ? -1 : x > y;
}

double bu_quantile(const double *sorted, size_t n, double q)
{
  double pos, frac;
  size_t i;

  if (n == 0)
    return NAN;
  pos = q * (double)(n - 1);
  i = (size_t)pos;
  frac = pos - (double)i;
  if (i + 1 >= n)
    return sorted[n - 1];
  return sorted[i] + frac * (sorted[i + 1] - sorted[i]);
}

double bu_median(double *v, size_t n)
{
  if (n == 0)
    return NAN;
  qsort(v, n, sizeof(*v), cmp_double);
  return bu_quantile(v, n, 0.5);
}

double bu_mean(const double *v, size_t n)
{
  double sum = 0;

  if (n == 0)
    return NAN;
  for (size_t i = 0; i < n; i++)
    sum += v[i];
  return sum / (double)n;
}

int bu_parse_size_list(const char *s, uint64_t *out, int max)
{
  char buf[512], *save = NULL, *tok;
  int n = 0;

  if (s == NULL || strlen(s) >= sizeof(buf))
    return -1;
  strcpy(buf, s);
  for (tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    if (n == max || util_parse_size(tok, 1, UINT64_MAX, &out[n]) != 0)
      return -1;
    n++;
  }
  return n > 0 ? n : -1;
}

int bu_parse_int_list(const char *s, int *out, int max)
{
  char buf[512], *save = NULL, *tok, *end;
  int n = 0;

  if (s == NULL || strlen(s) >= sizeof(buf))
    return -1;
  strcpy(buf, s);
  for (tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    long v;

    errno = 0;
    v = strtol(tok, &end, 10);
    if (n == max || errno != 0 || *end != '\0' || end == tok || v < 0 ||
        v > 1 << 20)
      return -1;
    out[n++] = (int)v;
  }
  return n > 0 ? n : -1;
}

const char *bu_size_label(uint64_t bytes, char *buf, size_t size)
{
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  uint64_t v = bytes;

  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  snprintf(buf, size, "%llu%s", (unsigned long long)v, unit[u]);
  return buf;
}

void bu_json_str(FILE *f, const char *s)
{
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;

    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void bu_json_num(FILE *f, double v)
{
  if (!isfinite(v))
    fputs("null", f);
  else if (v == floor(v) && fabs(v) < 1e15)
    fprintf(f, "%.0f", v);
  else
    fprintf(f, "%.6g", v);
}

/* The character after "key": (and any blanks), or NULL. */
static const char *json_value(const char *line, const char *key)
{
  size_t klen = strlen(key);
  const char *p = line;

  while ((p = strchr(p, '"')) != NULL) {
    if (strncmp(p + 1, key, klen) == 0 && p[1 + klen] == '"') {
      const char *q = p + 2 + klen;

      while (*q == ' ')
        q++;
      if (*q == ':') {
        q++;
        while (*q == ' ')
          q++;
        return q;
      }
    }
    p++;
  }
  return NULL;
}

int bu_json_get_num(const char *line, const char *key, double *out)
{
  const char *v = json_value(line, key);
  char *end;
  double d;

  if (v == NULL)
    return -1;
  if (strncmp(v, "null", 4) == 0) {
    *out = NAN;
    return 0;
  }
  d = strtod(v, &end);
  if (end == v)
    return -1;
  *out = d;
  return 0;
}

int bu_json_get_str(const char *line, const char *key, char *out, size_t size)
{
  const char *v = json_value(line, key);
  size_t n = 0;

  if (v == NULL || *v != '"' || size == 0)
    return -1;
  for (v++; *v && *v != '"'; v++) {
    if (*v == '\\' && (v[1] == '"' || v[1] == '\\'))
      v++;
    if (n + 1 < size)
      out[n++] = *v;
  }
  out[n] = '\0';
  return *v == '"' ? 0 : -1;
}
