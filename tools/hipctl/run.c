/* SPDX-License-Identifier: MIT */
/* tools/hipctl/run.c: `run FILE.hip KERNEL [OPTIONS] ARG...`: compile a
 * kernel from a file through the cache and launch it once, for a smoke
 * test on a node; and the launch half that `ir --run` shares.
 *
 * The argument syntax (hipctl(1), RUN ARGUMENTS), one word per kernel
 * parameter, in order:
 *   i32:V u32:V i64:V u64:V f32:V f64:V   a scalar
 *   buf:TYPE:COUNT[=INIT]                 a new buffer of COUNT elements of
 *       TYPE (i8 u8 i16 u16 i32 u32 i64 u64 f32 f64), filled with INIT:
 *       V (every element), iota (0, 1, 2...), or V1,V2,... (the rest 0);
 *       zeros without INIT.
 * --print N[:COUNT] prints buffer argument N (1-based) after the run,
 * --expect N=V1,V2,... compares its first elements (exit status 5).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hipctl.h"

/* ------------------------------------------------------------- types */

typedef struct {
  const char *name; /* in the syntax: "f32" */
  const char *kind; /* mem.alloc's kind: "float32" */
  unsigned size;    /* bytes */
  char cls;         /* 'i' signed, 'u' unsigned, 'f' float */
} elem_t;

static const elem_t elems[] = {
    {"i8", "int8", 1, 'i'},     {"u8", "uint8", 1, 'u'},
    {"i16", "int16", 2, 'i'},   {"u16", "uint16", 2, 'u'},
    {"i32", "int32", 4, 'i'},   {"u32", "uint32", 4, 'u'},
    {"i64", "int64", 8, 'i'},   {"u64", "uint64", 8, 'u'},
    {"f32", "float32", 4, 'f'}, {"f64", "float64", 8, 'f'},
};
#define NELEMS (sizeof(elems) / sizeof(elems[0]))

static const elem_t *elem_find(const char *name, size_t n)
{
  for (size_t i = 0; i < NELEMS; i++)
    if (strlen(elems[i].name) == n && memcmp(elems[i].name, name, n) == 0)
      return &elems[i];
  return NULL;
}

/* A number of type @p e, kept as the widest of its class. */
typedef union {
  int64_t i;
  uint64_t u;
  double f;
} num_t;

/* Parse @p s[0, n) as a number of @p e's class. @return 0 or -1. */
static int num_parse(const elem_t *e, const char *s, size_t n, num_t *out)
{
  char tmp[64], *end;

  if (n == 0 || n >= sizeof(tmp))
    return -1;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  errno = 0;
  if (e->cls == 'f')
    out->f = strtod(tmp, &end);
  else if (e->cls == 'i')
    out->i = strtoll(tmp, &end, 0);
  else if (tmp[0] == '-')
    return -1;
  else
    out->u = strtoull(tmp, &end, 0);
  if (*end != '\0' || errno != 0)
    return -1;
  /* In range of the element type. */
  if (e->cls == 'i' && e->size < 8) {
    int64_t lim = (int64_t)1 << (e->size * 8 - 1);
    if (out->i < -lim || out->i >= lim)
      return -1;
  }
  if (e->cls == 'u' && e->size < 8 && out->u >> (e->size * 8) != 0)
    return -1;
  return 0;
}

/* Element @p i of @p count as a number: iota gives i. */
static num_t num_of_index(const elem_t *e, uint64_t i)
{
  num_t v;

  if (e->cls == 'f')
    v.f = (double)i;
  else if (e->cls == 'i')
    v.i = (int64_t)i;
  else
    v.u = i;
  return v;
}

static void num_store(const elem_t *e, num_t v, void *p)
{
  switch (e->cls) {
  case 'f':
    if (e->size == 4) {
      float f = (float)v.f;
      memcpy(p, &f, 4);
    } else {
      memcpy(p, &v.f, 8);
    }
    break;
  default: {
    /* Little-endian truncation of the 64-bit value. */
    uint64_t u = v.u;
    for (unsigned k = 0; k < e->size; k++)
      ((unsigned char *)p)[k] = (unsigned char)(u >> (8 * k));
    break;
  }
  }
}

static num_t num_load(const elem_t *e, const void *p)
{
  num_t v = {0};

  if (e->cls == 'f') {
    if (e->size == 4) {
      float f;
      memcpy(&f, p, 4);
      v.f = f;
    } else {
      memcpy(&v.f, p, 8);
    }
    return v;
  }
  for (unsigned k = 0; k < e->size; k++)
    v.u |= (uint64_t)((const unsigned char *)p)[k] << (8 * k);
  if (e->cls == 'i' && e->size < 8 && (v.u >> (e->size * 8 - 1)) & 1)
    v.u |= ~(uint64_t)0 << (e->size * 8); /* sign-extend */
  return v;
}

static void num_print(const elem_t *e, num_t v, FILE *f)
{
  if (e->cls == 'f')
    fprintf(f, "%.*g", e->size == 4 ? 9 : 17, v.f);
  else if (e->cls == 'i')
    fprintf(f, "%" PRId64, v.i);
  else
    fprintf(f, "%" PRIu64, v.u);
}

static void num_json(const elem_t *e, num_t v)
{
  if (e->cls == 'f')
    js_double(e->size == 4 ? (double)(float)v.f : v.f);
  else if (e->cls == 'i')
    js_int(v.i);
  else
    js_uint(v.u);
}

/* Do @p a and @p b agree (floats within a relative 1e-6, f32's rounding)? */
static int num_eq(const elem_t *e, num_t a, num_t b)
{
  if (e->cls != 'f')
    return a.u == b.u;
  if (e->size == 4)
    b.f = (float)b.f;
  return a.f == b.f || fabs(a.f - b.f) <= 1e-6 * fmax(fabs(a.f), fabs(b.f));
}

/* ------------------------------------------------------------- the spec */

typedef struct {
  const char *text; /* as given */
  const elem_t *e;
  int buffer;       /* buf:..., else a scalar */
  uint64_t count;   /* elements (buffers) */
  int init;         /* 0 zeros, 'c' constant, 'i' iota, 'l' list */
  num_t value;      /* the scalar, or the constant */
  const char *list; /* 'l': the text after '=' */
  hipd_buffer_t buf;
  int allocated;
  size_t print;       /* --print: elements to print (0: not printed) */
  const char *expect; /* --expect's list, or NULL */
  int index;          /* the user's argument number (from 1), 0: implicit */
} arg_t;

struct run_spec {
  int device;
  uint32_t grid[3], block[3], shared;
  int grid_set;
  const char *lang;
  char *opt_text;    /* --options, split in place into opts */
  const char **opts; /* NULL-ended, or NULL */
  arg_t *args;
  int nargs;
};

void run_spec_free(run_spec_t *s)
{
  if (s == NULL)
    return;
  free(s->opt_text);
  free(s->opts);
  free(s->args);
  free(s);
}

int run_device(const run_spec_t *s)
{
  return s->device;
}

const char *const *run_options(const run_spec_t *s)
{
  return s->opts;
}

const char *run_lang(const run_spec_t *s)
{
  return s->lang;
}

/* Parse "X[,Y[,Z]]", each 1 to 2^31-1. @return 0 or -1. */
static int parse_dims(const char *s, uint32_t out[3])
{
  char *end;

  out[0] = out[1] = out[2] = 1;
  for (int i = 0; i < 3; i++) {
    unsigned long v;
    errno = 0;
    if (*s < '0' || *s > '9')
      return -1;
    v = strtoul(s, &end, 10);
    if (errno || v == 0 || v > 0x7fffffffUL)
      return -1;
    out[i] = (uint32_t)v;
    if (*end == '\0')
      return 0;
    if (*end != ',')
      return -1;
    s = end + 1;
  }
  return -1;
}

/* Parse one ARG word into @p a. @return 0, or -1 with @p why set. */
static int parse_arg(const char *text, arg_t *a, const char **why)
{
  const char *colon = strchr(text, ':');

  memset(a, 0, sizeof(*a));
  a->text = text;
  if (colon == NULL) {
    *why = "an argument is TYPE:VALUE or buf:TYPE:COUNT[=INIT]";
    return -1;
  }
  if (colon - text == 3 && memcmp(text, "buf", 3) == 0) {
    const char *t = colon + 1, *c2 = strchr(t, ':'), *eq;
    char *end;
    if (c2 == NULL || (a->e = elem_find(t, (size_t)(c2 - t))) == NULL) {
      *why = "a buffer is buf:TYPE:COUNT[=INIT], TYPE one of i8 u8 i16 u16 "
             "i32 u32 i64 u64 f32 f64";
      return -1;
    }
    a->buffer = 1;
    errno = 0;
    if (c2[1] < '0' || c2[1] > '9' ||
        (a->count = strtoull(c2 + 1, &end, 10)) == 0 || errno ||
        a->count > ((uint64_t)1 << 40) / a->e->size ||
        (*end != '\0' && *end != '=')) {
      *why = "a buffer's COUNT is a positive number of elements (at most "
             "1 TiB in all)";
      return -1;
    }
    if (*end == '\0')
      return 0;
    eq = end + 1;
    if (strcmp(eq, "iota") == 0)
      a->init = 'i';
    else if (strchr(eq, ',') != NULL) {
      a->init = 'l';
      a->list = eq;
    } else if (num_parse(a->e, eq, strlen(eq), &a->value) == 0) {
      a->init = 'c';
    } else {
      *why = "a buffer's INIT is a number of its type, iota, or a list "
             "V1,V2,...";
      return -1;
    }
    return 0;
  }
  if ((a->e = elem_find(text, (size_t)(colon - text))) == NULL ||
      (a->e->size != 4 && a->e->size != 8)) {
    *why = "a scalar is i32:V, u32:V, i64:V, u64:V, f32:V or f64:V";
    return -1;
  }
  if (num_parse(a->e, colon + 1, strlen(colon + 1), &a->value) != 0) {
    *why = "the value does not parse as a number of that type (or is out "
           "of its range)";
    return -1;
  }
  return 0;
}

/* Check a list of values (V1,V2,...) of @p e. @return its length or -1. */
static long list_check(const elem_t *e, const char *list)
{
  long n = 0;
  num_t v;

  for (const char *p = list;; n++) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    if (num_parse(e, p, len, &v) != 0)
      return -1;
    if (c == NULL)
      return n + 1;
    p = c + 1;
  }
}

/* Value @p i of a checked list. */
static num_t list_get(const elem_t *e, const char *list, long i)
{
  num_t v = {0};
  const char *p = list;

  while (i-- > 0 && p != NULL)
    p = (p = strchr(p, ',')) ? p + 1 : NULL;
  if (p != NULL) {
    const char *c = strchr(p, ',');
    num_parse(e, p, c ? (size_t)(c - p) : strlen(p), &v);
  }
  return v;
}

run_spec_t *run_parse(hipctl_t *h, int argc, char **argv, int *status)
{
  run_spec_t *s = calloc(1, sizeof(*s));
  /* --print and --expect before the args they name are parsed. */
  struct {
    long arg;
    size_t count;
    const char *expect;
  } *marks = calloc((size_t)argc + 1, sizeof(*marks));
  int nmarks = 0;

  *status = HIPCTL_EXIT_USAGE;
  if (s == NULL || marks == NULL ||
      (s->args = calloc((size_t)argc + 1, sizeof(*s->args))) == NULL) {
    *status = hipctl_fail(h, NULL, HIPD_ENOMEM);
    goto fail;
  }
  s->block[0] = 64;
  s->block[1] = s->block[2] = 1;
  s->grid[0] = s->grid[1] = s->grid[2] = 1;
  s->lang = "hip";
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    const char *why;
    char *end;
    int opt = strncmp(a, "--", 2) == 0 && a[2] != '\0';

    if (!opt) {
      if (parse_arg(a, &s->args[s->nargs], &why) != 0) {
        hipctl_usage(h, "argument %d '%s': %s", s->nargs + 1, a, why);
        goto fail;
      }
      s->args[s->nargs].index = s->nargs + 1;
      s->nargs++;
      continue;
    }
    if (v == NULL) {
      hipctl_usage(h, "%s needs a value", a);
      goto fail;
    }
    i++;
    if (strcmp(a, "--device") == 0) {
      long d;
      errno = 0;
      d = strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || errno || d < 0 || d > 0x7fffffff) {
        hipctl_usage(h, "--device takes a device id, not '%s'", v);
        goto fail;
      }
      s->device = (int)d;
    } else if (strcmp(a, "--grid") == 0 || strcmp(a, "--block") == 0) {
      if (parse_dims(v, a[2] == 'g' ? s->grid : s->block) != 0) {
        hipctl_usage(h, "%s takes X[,Y[,Z]], each 1 to 2147483647, not '%s'", a,
                     v);
        goto fail;
      }
      s->grid_set |= a[2] == 'g';
    } else if (strcmp(a, "--shared") == 0) {
      unsigned long b;
      errno = 0;
      b = strtoul(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || errno || b > 0xffffffffUL) {
        hipctl_usage(h, "--shared takes bytes, not '%s'", v);
        goto fail;
      }
      s->shared = (uint32_t)b;
    } else if (strcmp(a, "--lang") == 0) {
      s->lang = v;
    } else if (strcmp(a, "--options") == 0) {
      size_t n = 0;
      char *save = NULL;
      free(s->opt_text);
      free(s->opts);
      s->opt_text = strdup(v);
      s->opts = calloc(strlen(v) / 2 + 2, sizeof(*s->opts));
      if (s->opt_text == NULL || s->opts == NULL) {
        *status = hipctl_fail(h, NULL, HIPD_ENOMEM);
        goto fail;
      }
      for (char *w = strtok_r(s->opt_text, " \t", &save); w != NULL;
           w = strtok_r(NULL, " \t", &save))
        s->opts[n++] = w;
    } else if (strcmp(a, "--print") == 0 || strcmp(a, "--expect") == 0) {
      int print = a[2] == 'p';
      errno = 0;
      marks[nmarks].arg = strtol(v, &end, 10);
      marks[nmarks].count = 16;
      if (print && *end == ':') {
        char *e2;
        unsigned long c = strtoul(end + 1, &e2, 10);
        if (end[1] < '0' || end[1] > '9' || *e2 != '\0' || c == 0) {
          hipctl_usage(h, "--print takes N[:COUNT], not '%s'", v);
          goto fail;
        }
        marks[nmarks].count = c;
        end = e2;
      }
      if (!print && *end == '=' && end[1] != '\0') {
        marks[nmarks].expect = end + 1;
        end += strlen(end);
      }
      if (*v < '1' || *v > '9' || *end != '\0' || errno) {
        hipctl_usage(h,
                     print ? "--print takes N[:COUNT] (N: an argument, "
                             "from 1), not '%s'"
                           : "--expect takes N=V1,V2,... (N: an "
                             "argument, from 1), not '%s'",
                     v);
        goto fail;
      }
      nmarks++;
    } else {
      hipctl_usage(h, "unknown option '%s'", a);
      goto fail;
    }
  }
  for (int m = 0; m < nmarks; m++) {
    arg_t *a;
    if (marks[m].arg > s->nargs || !s->args[marks[m].arg - 1].buffer) {
      hipctl_usage(h, "--%s %ld: argument %ld is not a buffer",
                   marks[m].expect ? "expect" : "print", marks[m].arg,
                   marks[m].arg);
      goto fail;
    }
    a = &s->args[marks[m].arg - 1];
    if (marks[m].expect != NULL) {
      long n = list_check(a->e, marks[m].expect);
      if (n < 0 || (uint64_t)n > a->count) {
        hipctl_usage(h,
                     "--expect %ld: '%s' is not a list of at most %" PRIu64
                     " %s values",
                     marks[m].arg, marks[m].expect, a->count, a->e->name);
        goto fail;
      }
      a->expect = marks[m].expect;
    } else {
      a->print = marks[m].count;
    }
  }
  for (int i = 0; i < s->nargs; i++) {
    arg_t *a = &s->args[i];
    if (a->init == 'l') {
      long n = list_check(a->e, a->list);
      if (n < 0 || (uint64_t)n > a->count) {
        hipctl_usage(h,
                     "argument %d '%s': the list has more values than the "
                     "buffer, or one that is not a %s",
                     i + 1, a->text, a->e->name);
        goto fail;
      }
    }
    /* Without --grid, enough blocks for the largest buffer. */
    if (!s->grid_set && a->buffer) {
      uint64_t g = (a->count + s->block[0] - 1) / s->block[0];
      if (g > s->grid[0])
        s->grid[0] = g > 0x7fffffff ? 0x7fffffff : (uint32_t)g;
    }
  }
  free(marks);
  *status = 0;
  return s;
fail:
  free(marks);
  run_spec_free(s);
  return NULL;
}

/* --------------------------------------------------------------- files */

char *hipctl_read_file(hipctl_t *h, const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t n = 0, cap = 0;

  if (f == NULL) {
    fprintf(stderr, "hipctl: %s: %s: %s\n", h->cmd, path, strerror(errno));
    return NULL;
  }
  for (;;) {
    if (cap - n < 4096) {
      char *p = realloc(buf, cap = cap ? cap * 2 : 65536);
      if (p == NULL)
        break;
      buf = p;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0)
      break;
  }
  if (ferror(f) || buf == NULL) {
    fprintf(stderr, "hipctl: %s: %s: cannot read it\n", h->cmd, path);
    fclose(f);
    free(buf);
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  if (len != NULL)
    *len = n;
  return buf;
}

/* -------------------------------------------------------------- launch */

int run_check_lang(hipctl_t *h, int dev, const char *lang)
{
  hipd_info_t *langs = NULL;
  int err, found = 0, n;

  if ((err = hipd_supported_source_langs(h->conn, dev, &langs)) < 0)
    return hipctl_fail(h, "supported_source_langs", err);
  n = info_n(langs, "%s", "");
  for (int i = 0; i < n; i++)
    found |= strcmp(info_s(langs, "%d", i), lang) == 0;
  if (!found) {
    fprintf(stderr,
            "hipctl: %s: ELANG: device %d does not take language '%s' "
            "(it takes:",
            h->cmd, dev, lang);
    for (int i = 0; i < n; i++)
      fprintf(stderr, " %s", info_s(langs, "%d", i));
    fprintf(stderr, ")\n");
  }
  hipd_info_free(langs);
  return found ? 0 : HIPCTL_EXIT_ERROR;
}

/* Fill a new buffer's host copy as its INIT says. */
static void fill(const arg_t *a, unsigned char *host)
{
  for (uint64_t i = 0; i < a->count; i++) {
    num_t v = {0};
    if (a->init == 'c')
      v = a->value;
    else if (a->init == 'i')
      v = num_of_index(a->e, i);
    else if (a->init == 'l')
      v = list_get(a->e, a->list, (long)i);
    num_store(a->e, v, host + i * a->e->size);
  }
}

/* Read back buffer @p a, print its first elements and check --expect.
 * @return 0, HIPCTL_EXIT_CHECK, or an exit status for a failed read. */
static int output(hipctl_t *h, arg_t *a, int index)
{
  size_t n = a->print, ne = 0;
  unsigned char *host;
  int err, bad = -1;

  if (a->expect != NULL) {
    ne = (size_t)list_check(a->e, a->expect);
    if (ne > n)
      n = ne;
  }
  if (n > a->count)
    n = (size_t)a->count;
  if ((host = malloc(n * a->e->size + 1)) == NULL)
    return hipctl_fail(h, NULL, HIPD_ENOMEM);
  if ((err = hipd_mem_read(h->conn, a->buf, 0, host, n * a->e->size)) < 0) {
    free(host);
    return hipctl_fail(h, "mem.read", err);
  }
  for (size_t i = 0; i < ne && bad < 0; i++)
    if (!num_eq(a->e, num_load(a->e, host + i * a->e->size),
                list_get(a->e, a->expect, (long)i)))
      bad = (int)i;
  if (h->json) {
    js_obj_begin();
    js_key("arg");
    js_int(index);
    js_key("type");
    js_str(a->e->name);
    js_key("count");
    js_uint(a->count);
    js_key("values");
    js_arr_begin();
    for (size_t i = 0; i < (a->print ? n : 0); i++)
      num_json(a->e, num_load(a->e, host + i * a->e->size));
    js_arr_end();
    js_key("expect");
    if (a->expect == NULL)
      js_null();
    else {
      js_obj_begin();
      js_key("ok");
      js_bool(bad < 0);
      js_key("first_mismatch");
      if (bad < 0)
        js_null();
      else
        js_int(bad);
      js_obj_end();
    }
    js_obj_end();
  } else {
    if (a->print) {
      printf("arg %d (%s):", index, a->text);
      for (size_t i = 0; i < a->print && i < n; i++) {
        putchar(' ');
        num_print(a->e, num_load(a->e, host + i * a->e->size), stdout);
      }
      if (n < a->count)
        printf(" ... (%zu of %" PRIu64 ")", n, a->count);
      putchar('\n');
    }
    if (a->expect != NULL && bad < 0)
      printf("arg %d: the first %zu values are as expected\n", index, ne);
  }
  if (bad >= 0) {
    fprintf(stderr, "hipctl: %s: arg %d: element %d is ", h->cmd, index, bad);
    num_print(a->e, num_load(a->e, host + (size_t)bad * a->e->size), stderr);
    fprintf(stderr, ", expected ");
    num_print(a->e, list_get(a->e, a->expect, bad), stderr);
    fputc('\n', stderr);
  }
  free(host);
  return bad >= 0 ? HIPCTL_EXIT_CHECK : 0;
}

int run_launch(hipctl_t *h, run_spec_t *s, hipd_kernel_t kernel)
{
  hipd_args_t *args = hipd_args_new();
  int err = 0, rc = HIPCTL_EXIT_OK;

  if (args == NULL)
    return hipctl_fail(h, NULL, HIPD_ENOMEM);
  for (int i = 0; i < s->nargs && rc == 0; i++) {
    arg_t *a = &s->args[i];
    if (!a->buffer) {
      switch (a->e->size == 4 ? (a->e->cls == 'f' ? 'f' : 'i')
                              : (a->e->cls == 'f' ? 'F' : 'I')) {
      case 'f':
        err = hipd_args_f32(args, (float)a->value.f);
        break;
      case 'F':
        err = hipd_args_f64(args, a->value.f);
        break;
      case 'i':
        err = hipd_args_i32(args, (int32_t)(uint32_t)a->value.u);
        break;
      default:
        err = hipd_args_i64(args, (int64_t)a->value.u);
        break;
      }
      if (err < 0)
        rc = hipctl_fail(h, a->text, err);
      continue;
    }
    unsigned char *host = malloc((size_t)(a->count * a->e->size));
    if (host == NULL) {
      rc = hipctl_fail(h, a->text, HIPD_ENOMEM);
      break;
    }
    fill(a, host);
    if ((err = hipd_mem_alloc(h->conn, s->device, a->count, a->e->kind,
                              &a->buf)) < 0)
      rc = hipctl_fail(h, "mem.alloc", err);
    else if ((a->allocated = 1,
              err = hipd_mem_write(h->conn, a->buf, 0, host,
                                   (size_t)(a->count * a->e->size))) < 0)
      rc = hipctl_fail(h, "mem.write", err);
    else if ((err = hipd_args_buffer(args, a->buf, 0)) < 0)
      rc = hipctl_fail(h, a->text, err);
    free(host);
  }
  if (rc == 0 && (err = hipd_kernel_run(h->conn, kernel, s->grid, s->block,
                                        s->shared, HIPD_STREAM_NULL, args)) < 0)
    rc = hipctl_fail(h, "kernel.launch", err);
  hipd_args_free(args);
  if (rc != 0)
    return rc;
  /* What the kernel printed: the daemon keeps it for this session. */
  {
    hipd_info_t *out = NULL;
    const char *text = NULL;
    size_t len = 0;
    uint64_t dropped = 0;
    if ((err = hipd_kernel_output(h->conn, 0, &out)) < 0)
      return hipctl_fail(h, "kernel.output", err);
    (void)hipd_info_str(out, "output", &text, &len);
    (void)hipd_info_uint(out, "dropped", &dropped);
    if (h->json) {
      js_key("printed");
      js_bytes(text != NULL ? text : "", len);
      js_key("printed_dropped");
      js_uint(dropped);
    } else if (len > 0 || dropped > 0) {
      fwrite(text, 1, len, stdout);
      if (len > 0 && text[len - 1] != '\n')
        putchar('\n');
      if (dropped > 0)
        printf("(%llu more bytes printed by the kernel were dropped)\n",
               (unsigned long long)dropped);
    }
    hipd_info_free(out);
  }
  if (h->json) {
    js_key("grid");
    js_arr_begin();
    for (int i = 0; i < 3; i++)
      js_uint(s->grid[i]);
    js_arr_end();
    js_key("block");
    js_arr_begin();
    for (int i = 0; i < 3; i++)
      js_uint(s->block[i]);
    js_arr_end();
    js_key("outputs");
    js_arr_begin();
  } else {
    printf("ran on device %d: grid %u,%u,%u block %u,%u,%u\n", s->device,
           s->grid[0], s->grid[1], s->grid[2], s->block[0], s->block[1],
           s->block[2]);
  }
  for (int i = 0; i < s->nargs; i++) {
    arg_t *a = &s->args[i];
    if (a->buffer && (a->print || a->expect)) {
      int r = output(h, a, a->index);
      if (r == HIPCTL_EXIT_CHECK && rc == 0)
        rc = r;
      else if (r != 0) {
        rc = r;
        break;
      }
    }
  }
  if (h->json)
    js_arr_end();
  for (int i = 0; i < s->nargs; i++)
    if (s->args[i].allocated)
      hipd_mem_free(h->conn, s->args[i].buf);
  return rc;
}

int run_expand_ir(hipctl_t *h, run_spec_t *s, const hipd_info_t *info)
{
  int n = info_n(info, "arguments"), next = 0, k = 0;
  arg_t *args = calloc((size_t)n + 1, sizeof(*args));

  if (args == NULL)
    return hipctl_fail(h, NULL, HIPD_ENOMEM);
  for (int i = 0; i < n; i++) {
    const char *role = info_s(info, "arguments.%d.role", i);
    const char *param = info_s(info, "arguments.%d.param", i);
    if (strcmp(role, "length") == 0) {
      /* The length of the vec param just passed: its buffer's count. */
      args[k].e = elem_find("i32", 3);
      args[k].text = "(length)";
      for (int j = k - 1; j >= 0; j--)
        if (args[j].buffer) {
          args[k].value.i = (int64_t)args[j].count;
          break;
        }
      k++;
      continue;
    }
    if (strcmp(role, "leaf") == 0) {
      free(args);
      fprintf(stderr,
              "hipctl: %s: param '%s' is lowered as SoA: ir --run passes "
              "vec and scalar params only\n",
              h->cmd, param);
      return HIPCTL_EXIT_USAGE;
    }
    if (next >= s->nargs) {
      free(args);
      return hipctl_usage(h,
                          "the kernel takes more arguments: param '%s' "
                          "has none",
                          param);
    }
    if ((strcmp(role, "array") == 0) != s->args[next].buffer) {
      free(args);
      return hipctl_usage(h, "argument %d '%s': param '%s' takes %s", next + 1,
                          s->args[next].text, param,
                          strcmp(role, "array") == 0 ? "a buffer" : "a scalar");
    }
    args[k++] = s->args[next++];
  }
  if (next < s->nargs) {
    free(args);
    return hipctl_usage(h, "argument %d '%s': the kernel takes no more",
                        next + 1, s->args[next].text);
  }
  free(s->args);
  s->args = args;
  s->nargs = k;
  return 0;
}

/* ------------------------------------------------------------------ run */

static const char run_help[] =
    "usage: hipctl run FILE.hip KERNEL [OPTIONS] ARG...\n\n"
    "Compile KERNEL from FILE through the cache for a device, launch it once\n"
    "with ARG... and wait for it.\n\n"
    "options:\n"
    "  --device N         the device (default 0)\n"
    "  --grid X[,Y,Z]     blocks (default: enough blocks of --block's X for\n"
    "                     the largest buffer, else 1)\n"
    "  --block X[,Y,Z]    threads per block (default 64)\n"
    "  --shared BYTES     dynamic shared memory per block\n"
    "  --lang L           the source language (default hip; cuda on NVIDIA)\n"
    "  --options \"...\"    compiler options, split at spaces\n"
    "  --print N[:COUNT]  after the run, print the first COUNT (default 16)\n"
    "                     elements of buffer argument N (from 1)\n"
    "  --expect N=V,...   check the first elements of buffer argument N;\n"
    "                     a difference is exit status 5\n\n"
    "arguments, one per kernel parameter:\n"
    "  i32:V u32:V i64:V u64:V f32:V f64:V   a scalar\n"
    "  buf:TYPE:COUNT[=INIT]   a new buffer of COUNT elements of TYPE (i8 u8\n"
    "                     i16 u16 i32 u32 i64 u64 f32 f64), zeros, or INIT:\n"
    "                     V (every element), iota (0, 1, 2...), V1,V2,...\n\n"
    "example: hipctl run vecadd.hip vecadd buf:f32:1024=iota buf:f32:1024=1 "
    "\\\n    buf:f32:1024 i32:1024 --print 3:4 --expect 3=1,2,3,4\n";

int cmd_run(hipctl_t *h, int argc, char **argv)
{
  run_spec_t *s = NULL;
  hipd_info_t *info = NULL;
  hipd_kernel_t kernel;
  char *src = NULL;
  const char *file, *name;
  int rc, err;

  if (argc > 1 && hipctl_help(argv[1], run_help))
    return HIPCTL_EXIT_OK;
  if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-')
    return hipctl_usage(h, "run FILE.hip KERNEL [OPTIONS] ARG...");
  file = argv[1];
  name = argv[2];
  if ((s = run_parse(h, argc - 3, argv + 3, &rc)) == NULL)
    return rc;
  if ((src = hipctl_read_file(h, file, NULL)) == NULL) {
    rc = HIPCTL_EXIT_USAGE;
    goto done;
  }
  if ((rc = hipctl_connect(h)) != 0 ||
      (rc = run_check_lang(h, s->device, s->lang)) != 0)
    goto done;
  err = hipd_kernel_compile_cached(h->conn, s->device, src, name, s->opts,
                                   &kernel, &info);
  if (err < 0) {
    rc = hipctl_fail(h, name, err);
    goto done;
  }
  if (h->json) {
    js_obj_begin();
    js_key("kernel");
    js_str(name);
    js_key("device");
    js_int(s->device);
    js_key("compile");
    js_info(info);
  } else {
    printf("compiled %s for device %d (cache %s, %.1f ms)\n", name, s->device,
           info_s(info, "cache"), info_dbl(info, "compile_ms"));
  }
  rc = run_launch(h, s, kernel);
  if (h->json) {
    js_key("status");
    js_int(rc);
    js_obj_end();
    js_end();
  }
done:
  hipd_info_free(info);
  free(src);
  run_spec_free(s);
  return rc;
}
