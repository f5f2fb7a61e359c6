/* SPDX-License-Identifier: MIT */
/* tests/check_dispatch.c: the method table of daemon/dispatch.c, its
 * lookup and its agreement with the protocol document (PROTOCOL_MD), which
 * need no socket. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "hipd.h"
#include "ring_layout.h"
#include "run.h"

/* Methods the protocol must have from version 1 on. */
static const char *const required[] = {"hello", "ping", "daemon.info",
                                       "session.info"};

START_TEST(test_table_sorted_unique)
{
  unsigned n = 0;
  const method_t *m = dispatch_methods(&n);

  ck_assert_ptr_nonnull(m);
  ck_assert_uint_ge(n, sizeof(required) / sizeof(required[0]));
  for (unsigned i = 1; i < n; i++)
    ck_assert_msg(strcmp(m[i - 1].name, m[i].name) < 0,
                  "'%s' (row %u) is not before '%s' (row %u)", m[i - 1].name,
                  i - 1, m[i].name, i);
  /* Strictly sorted means unique; check it directly as well. */
  for (unsigned i = 0; i < n; i++)
    for (unsigned j = i + 1; j < n; j++)
      ck_assert_str_ne(m[i].name, m[j].name);
  /* The table is the same each time. */
  unsigned n2 = 0;
  ck_assert_ptr_eq(dispatch_methods(&n2), m);
  ck_assert_uint_eq(n2, n);
}
END_TEST

START_TEST(test_table_rows)
{
  unsigned n = 0;
  const method_t *m = dispatch_methods(&n);

  for (unsigned i = 0; i < n; i++) {
    ck_assert_ptr_nonnull(m[i].name);
    ck_assert_msg(m[i].name[0] != '\0', "row %u has an empty name", i);
    ck_assert_msg(m[i].fn != NULL, "%s has no handler", m[i].name);
    ck_assert_msg(m[i].min_params <= m[i].max_params,
                  "%s: min %u > max %u params", m[i].name, m[i].min_params,
                  m[i].max_params);
    ck_assert_msg((m[i].flags & ~(M_PREHELLO | M_RING)) == 0,
                  "%s: unknown flags 0x%x", m[i].name, m[i].flags);
    /* The ring's methods are proto/ring_layout.h's list, and only those. */
    ck_assert_msg(!(m[i].flags & M_RING) == !proto_ring_method(m[i].name),
                  "%s: M_RING is not PROTO_RING_METHODS", m[i].name);
    ck_assert_msg(m[i].since >= 1, "%s: since %u", m[i].name, m[i].since);
    /* Names are "family.verb" or one word: lower case, digits, '_', '.'. */
    for (const char *p = m[i].name; *p; p++)
      ck_assert_msg((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                        *p == '_' || *p == '.',
                    "%s: bad character '%c'", m[i].name, *p);
    ck_assert_msg(m[i].name[0] != '.' &&
                      m[i].name[strlen(m[i].name) - 1] != '.',
                  "%s: stray dot", m[i].name);
  }
}
END_TEST

/* Each row's signature: known kinds, names, bounds; min/max derived from
 * it. */
START_TEST(test_table_signatures)
{
  unsigned n = 0;
  const method_t *m = dispatch_methods(&n);

  for (unsigned r = 0; r < n; r++) {
    unsigned min = 0, max = m[r].nsig;

    ck_assert_msg(m[r].nsig <= CALL_MAX_ARGS, "%s: %u params", m[r].name,
                  m[r].nsig);
    ck_assert_msg((m[r].nsig == 0) == (m[r].sig == NULL), "%s: sig/nsig",
                  m[r].name);
    for (unsigned i = 0; i < m[r].nsig; i++) {
      const param_t *p = &m[r].sig[i];
      ck_assert_msg(p->name != NULL && p->name[0] != '\0',
                    "%s: param %u has no name", m[r].name, i);
      ck_assert_msg(p->kind >= P_UINT && p->kind <= P_REST,
                    "%s: param %u (%s) kind %u", m[r].name, i, p->name,
                    p->kind);
      ck_assert_str_ne(dispatch_kind_name((param_kind_t)p->kind), "?");
      for (unsigned j = 0; j < i; j++)
        ck_assert_msg(strcmp(m[r].sig[j].name, p->name) != 0,
                      "%s: two params named %s", m[r].name, p->name);
      if (p->kind == P_HANDLE)
        ck_assert_msg(p->htype > HANDLE_ANY && p->htype < HANDLE_TYPE_COUNT,
                      "%s: param %u (%s) handle type %u", m[r].name, i, p->name,
                      p->htype);
      if (p->kind == P_UINT || p->kind == P_STR || p->kind == P_OPTIONS ||
          p->kind == P_NAMES || p->kind == P_BLOCK || p->kind == P_DIMS ||
          p->kind == P_TARGET || p->kind == P_DEVICE || p->kind == P_REST)
        ck_assert_msg(p->max > 0, "%s: param %u (%s) has no bound", m[r].name,
                      i, p->name);
      if (p->kind == P_INT)
        ck_assert_msg(p->min <= (int64_t)p->max, "%s: param %u (%s) bounds",
                      m[r].name, i, p->name);
      if (p->kind == P_REST) {
        ck_assert_msg(i + 1 == m[r].nsig, "%s: rest is not last", m[r].name);
        max = i + (unsigned)p->max;
      } else if (!p->optional) {
        min = i + 1;
      }
    }
    ck_assert_uint_eq(m[r].min_params, min);
    ck_assert_uint_eq(m[r].max_params, max);
  }
  /* Some bounds the protocol promises. */
  const method_t *launch = dispatch_find("kernel.launch", 13);
  ck_assert_ptr_nonnull(launch);
  ck_assert_uint_eq(launch->min_params, 6);
  ck_assert_uint_eq(launch->max_params, 7);
  const method_t *ed = dispatch_find("execute_direct", 14);
  ck_assert_ptr_nonnull(ed);
  ck_assert_uint_eq(ed->min_params, 0);
  ck_assert_uint_eq(ed->max_params, 255);
}
END_TEST

/* ------------------------------------------------- the protocol document */

static char *doc_read(void)
{
  FILE *f = fopen(PROTOCOL_MD, "rb");
  char *buf;
  long len;

  ck_assert_msg(f != NULL, "cannot open %s", PROTOCOL_MD);
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  len = ftell(f);
  ck_assert_int_ge(len, 0);
  rewind(f);
  buf = malloc((size_t)len + 1);
  ck_assert_ptr_nonnull(buf);
  ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = '\0';
  fclose(f);
  return buf;
}

/* Disagreements found, one a line. */
static char problems[16384];
static unsigned nproblems;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
  size_t used = strlen(problems);
  va_list ap;

  nproblems++;
  if (used + 2 >= sizeof(problems))
    return;
  va_start(ap, fmt);
  vsnprintf(problems + used, sizeof(problems) - used - 1, fmt, ap);
  va_end(ap);
  used = strlen(problems);
  problems[used] = '\n';
  problems[used + 1] = '\0';
}

/* The @p k-th cell (0-based) of table row @p line, trimmed, into @p out. */
static int cell(const char *line, unsigned k, char *out, size_t size)
{
  const char *p = line, *end;
  size_t n;

  if (*p != '|')
    return -1;
  for (unsigned i = 0; i <= k; i++) {
    p = strchr(p + 1, '|');
    if (p == NULL)
      return -1;
  }
  /* p is the bar after cell k; find the one before it. */
  end = p;
  p--;
  while (p > line && *p != '|')
    p--;
  p++;
  while (p < end && *p == ' ')
    p++;
  while (end > p && end[-1] == ' ')
    end--;
  n = (size_t)(end - p);
  if (n >= size)
    n = size - 1;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

/* The text of the section "### `name`", up to the next heading. */
static const char *section(const char *doc, const char *name, size_t *len)
{
  char head[160];
  const char *p, *e;

  snprintf(head, sizeof(head), "\n### `%s`\n", name);
  p = strstr(doc, head);
  if (p == NULL)
    return NULL;
  p += strlen(head);
  /* "\n## " or "\n### " ends the section. */
  {
    const char *e2 = strstr(p, "\n## "), *e3 = strstr(p, "\n### ");
    e = e2 && (!e3 || e2 < e3) ? e2 : e3;
  }
  *len = e ? (size_t)(e - p) : strlen(p);
  return p;
}

/* Check method @p m's Params against its section (following one
 * "Params: as `other`" reference, @p depth deep). */
static void check_params(const char *doc, const method_t *m, const char *name,
                         int depth)
{
  size_t len;
  const char *sec = section(doc, name, &len), *p;
  char line[1024], c0[64], c1[160], c3[256];
  unsigned rows = 0;

  if (sec == NULL) {
    problem("%s: no section '### `%s`'", m->name, name);
    return;
  }
  /* The Params line: at the start of a line, within the section. */
  for (p = sec; p < sec + len; p = strchr(p, '\n') + 1) {
    if (strncmp(p, "Params", 6) == 0)
      break;
    if (strchr(p, '\n') == NULL) {
      p = sec + len;
      break;
    }
  }
  if (p >= sec + len) {
    problem("%s: its section has no Params line", m->name);
    return;
  }
  if (strncmp(p, "Params: none.", 13) == 0) {
    if (m->nsig != 0)
      problem("%s: the document says no params, the row has %u", m->name,
              m->nsig);
    return;
  }
  if (strncmp(p, "Params: as `", 12) == 0) {
    const char *q = p + 12, *e = strchr(q, '`');
    char other[128];
    if (e == NULL || (size_t)(e - q) >= sizeof(other) || depth > 2) {
      problem("%s: bad 'Params: as' reference", m->name);
      return;
    }
    memcpy(other, q, (size_t)(e - q));
    other[e - q] = '\0';
    check_params(doc, m, other, depth + 1);
    return;
  }
  if (strncmp(p, "Params: any, up to ", 19) == 0) {
    unsigned long max = strtoul(p + 19, NULL, 10);
    if (m->nsig != 1 || m->sig[0].kind != P_REST || m->sig[0].max != max)
      problem("%s: the document says any params up to %lu; the row does not",
              m->name, max);
    return;
  }
  /* A table: skip to its header, then read the rows. */
  p = strstr(p, "\n| # | Name | Type | Optional | Meaning |");
  if (p == NULL || p > sec + len) {
    problem("%s: no Params table (| # | Name | Type | Optional | Meaning |)",
            m->name);
    return;
  }
  p = strchr(p + 1, '\n');            /* the header's end */
  p = p ? strchr(p + 1, '\n') : NULL; /* the separator's end */
  while (p != NULL && p[1] == '|') {
    const char *e = strchr(p + 1, '\n');
    size_t n = e ? (size_t)(e - p - 1) : strlen(p + 1);
    if (n >= sizeof(line))
      n = sizeof(line) - 1;
    memcpy(line, p + 1, n);
    line[n] = '\0';
    if (cell(line, 0, c0, sizeof(c0)) != 0 ||
        cell(line, 1, c1, sizeof(c1)) != 0 ||
        cell(line, 3, c3, sizeof(c3)) != 0) {
      problem("%s: unreadable Params row '%s'", m->name, line);
    } else {
      unsigned idx = (unsigned)strtoul(c0, NULL, 10);
      size_t l1 = strlen(c1);
      int opt = strncmp(c3, "yes", 3) == 0;
      if (l1 >= 2 && c1[0] == '`' && c1[l1 - 1] == '`') {
        memmove(c1, c1 + 1, l1 - 2);
        c1[l1 - 2] = '\0';
      }
      if (idx != rows)
        problem("%s: Params row %u is numbered %s", m->name, rows, c0);
      if (rows >= m->nsig)
        problem("%s: the document has param %s (%s); the row has %u params",
                m->name, c0, c1, m->nsig);
      else if (strcmp(m->sig[rows].name, c1) != 0)
        problem("%s: param %u is '%s' in the document, '%s' in the row",
                m->name, rows, c1, m->sig[rows].name);
      else if (opt != m->sig[rows].optional)
        problem("%s: param %u (%s) is %s in the document, %s in the row",
                m->name, rows, c1, opt ? "optional" : "required",
                m->sig[rows].optional ? "optional" : "required");
    }
    rows++;
    p = e;
  }
  if (rows < m->nsig)
    problem("%s: the document lists %u params, the row %u", m->name, rows,
            m->nsig);
}

/* The "## Methods" table and each method's Params table agree with the
 * rows: names, param counts, before hello, since, and each param's name
 * and whether it is optional. */
START_TEST(test_protocol_document)
{
  char *doc = doc_read();
  unsigned n = 0, listed = 0;
  const method_t *m = dispatch_methods(&n);
  char *seen = calloc(n, 1);
  const char *p = strstr(doc, "\n## Methods\n");
  char line[1024], c1[64], c2[16], c3[16];

  ck_assert_ptr_nonnull(seen);
  ck_assert_msg(p != NULL, "no '## Methods' section");
  p = strstr(p, "\n| Method | Params | Before `hello` | Since |");
  ck_assert_msg(p != NULL, "no methods table");
  p = strchr(p + 1, '\n');
  p = p ? strchr(p + 1, '\n') : NULL;
  while (p != NULL && p[1] == '|') {
    const char *e = strchr(p + 1, '\n'), *q, *qe;
    size_t len = e ? (size_t)(e - p - 1) : strlen(p + 1);
    char name[128];
    unsigned min, max;
    if (len >= sizeof(line))
      len = sizeof(line) - 1;
    memcpy(line, p + 1, len);
    line[len] = '\0';
    p = e;
    q = strstr(line, "[`");
    qe = q ? strstr(q + 2, "`]") : NULL;
    if (qe == NULL || (size_t)(qe - q - 2) >= sizeof(name) ||
        cell(line, 1, c1, sizeof(c1)) != 0 ||
        cell(line, 2, c2, sizeof(c2)) != 0 ||
        cell(line, 3, c3, sizeof(c3)) != 0) {
      problem("unreadable methods row '%s'", line);
      continue;
    }
    memcpy(name, q + 2, (size_t)(qe - q - 2));
    name[qe - q - 2] = '\0';
    listed++;
    const method_t *r = dispatch_find(name, strlen(name));
    if (r == NULL) {
      problem("%s: in the document's methods table, not in the table", name);
      continue;
    }
    seen[r - m] = 1;
    if (sscanf(c1, "%u to %u", &min, &max) != 2) {
      if (sscanf(c1, "%u", &min) != 1)
        min = 999;
      max = min;
    }
    if (min != r->min_params || max != r->max_params)
      problem("%s: the document says %s params, the row %u to %u", name, c1,
              r->min_params, r->max_params);
    if ((strcmp(c2, "yes") == 0) != ((r->flags & M_PREHELLO) != 0))
      problem("%s: before hello is '%s' in the document", name, c2);
    if ((unsigned)strtoul(c3, NULL, 10) != r->since)
      problem("%s: since %s in the document, %u in the row", name, c3,
              r->since);
    check_params(doc, r, r->name, 0);
  }
  for (unsigned i = 0; i < n; i++)
    if (!seen[i])
      problem("%s: in the table, not in the document's methods table",
              m[i].name);
  ck_assert_msg(nproblems == 0, "%u disagreements with %s:\n%s", nproblems,
                PROTOCOL_MD, problems);
  ck_assert_uint_eq(listed, n);
  free(seen);
  free(doc);
}
END_TEST

/* The rings' section of the document names every method a ring takes,
 * and each is a row of the table. */
START_TEST(test_ring_methods_documented)
{
  unsigned n = 0, rows = 0;
  const method_t *m = dispatch_methods(&n);
  char *doc = doc_read(), *sec, *end;

  sec = strstr(doc, "\n## Rings\n");
  ck_assert_msg(sec != NULL, "%s has no section '## Rings'", PROTOCOL_MD);
  if ((end = strstr(sec + 1, "\n## ")) != NULL)
    *end = '\0';
  for (unsigned i = 0; i < n; i++) {
    char quoted[80];
    if (!(m[i].flags & M_RING))
      continue;
    rows++;
    snprintf(quoted, sizeof(quoted), "`%s`", m[i].name);
    ck_assert_msg(strstr(sec, quoted) != NULL,
                  "%s: a ring takes it, the section '## Rings' does not say so",
                  m[i].name);
  }
#define RING_COUNT(x) +1
  ck_assert_uint_eq(rows, 0 PROTO_RING_METHODS(RING_COUNT));
#undef RING_COUNT
  free(doc);
}
END_TEST

START_TEST(test_required_methods)
{
  for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
    const method_t *m = dispatch_find(required[i], strlen(required[i]));
    ck_assert_msg(m != NULL, "%s missing", required[i]);
    ck_assert_str_eq(m->name, required[i]);
  }
  /* The handshake must be callable before the handshake. */
  const method_t *hello = dispatch_find("hello", 5);
  ck_assert_ptr_nonnull(hello);
  ck_assert(hello->flags & M_PREHELLO);
  ck_assert_uint_eq(hello->min_params, 0);
}
END_TEST

/* Every row is found by its exact name, from a buffer that is not
 * NUL-terminated at the length given. */
START_TEST(test_find_each)
{
  unsigned n = 0;
  const method_t *m = dispatch_methods(&n);

  for (unsigned i = 0; i < n; i++) {
    size_t len = strlen(m[i].name);
    ck_assert_ptr_eq(dispatch_find(m[i].name, len), &m[i]);

    /* An exact-size heap copy without a terminator. */
    char *copy = malloc(len);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, m[i].name, len);
    ck_assert_ptr_eq(dispatch_find(copy, len), &m[i]);
    free(copy);

    /* Followed by more characters that are not part of it. */
    char longer[128];
    ck_assert_uint_lt(len + 4, sizeof(longer));
    memcpy(longer, m[i].name, len);
    memcpy(longer + len, ".xyz", 4);
    ck_assert_ptr_eq(dispatch_find(longer, len), &m[i]);
  }
  /* An empty method name, as msgpack-c decodes it (a NULL pointer): no
   * method, and (under UBSan) no null pointer given to memchr/strncmp. */
  ck_assert_ptr_null(dispatch_find(NULL, 0));
  ck_assert_ptr_null(dispatch_find("", 0));
}
END_TEST

START_TEST(test_find_rejects)
{
  unsigned n = 0;
  const method_t *m = dispatch_methods(&n);
  char buf[160];

  for (unsigned i = 0; i < n; i++) {
    size_t len = strlen(m[i].name);
    ck_assert_uint_lt(len + 8, sizeof(buf));

    /* Every proper prefix. */
    for (size_t k = 0; k < len; k++) {
      const method_t *f = dispatch_find(m[i].name, k);
      ck_assert_msg(f == NULL || strlen(f->name) == k,
                    "prefix %zu of %s found %s", k, m[i].name,
                    f ? f->name : "");
    }
    /* Longer names. */
    static const char *const tails[] = {"x", ".", "s", "\x7f", "\xff", " "};
    for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
      memcpy(buf, m[i].name, len);
      memcpy(buf + len, tails[t], strlen(tails[t]));
      size_t blen = len + strlen(tails[t]);
      const method_t *f = dispatch_find(buf, blen);
      ck_assert_msg(f == NULL || (strlen(f->name) == blen &&
                                  memcmp(f->name, buf, blen) == 0),
                    "%.*s found %s", (int)blen, buf, f ? f->name : "");
    }
    /* Embedded NUL: after the name, in it, or leading. */
    memcpy(buf, m[i].name, len);
    buf[len] = '\0';
    ck_assert_ptr_null(dispatch_find(buf, len + 1));
    memcpy(buf + len + 1, "x", 1);
    ck_assert_ptr_null(dispatch_find(buf, len + 2));
    memcpy(buf, m[i].name, len);
    buf[len / 2] = '\0';
    ck_assert_ptr_null(dispatch_find(buf, len));
    buf[0] = '\0';
    memcpy(buf + 1, m[i].name, len);
    ck_assert_ptr_null(dispatch_find(buf, len + 1));
    /* One character changed, or another case. */
    memcpy(buf, m[i].name, len);
    buf[len - 1] = (char)(buf[len - 1] + 1);
    const method_t *f = dispatch_find(buf, len);
    ck_assert(f == NULL || memcmp(f->name, buf, len) == 0);
    memcpy(buf, m[i].name, len);
    buf[0] = (char)(buf[0] - 'a' + 'A');
    ck_assert_ptr_null(dispatch_find(buf, len));
  }

  /* The empty name, at various addresses. */
  ck_assert_ptr_null(dispatch_find("", 0));
  ck_assert_ptr_null(dispatch_find("hello", 0));
  ck_assert_ptr_null(dispatch_find("\0", 1));
  /* Names that sort before, between and after every row. */
  static const char *const others[] = {
      "",      "a",         "daemon",     "daemon.",     "daemon.infox",
      "hell",  "hello2",    "helloo",     "ping.",       "pin",
      "pingg", "session",   "session.in", "session.inf", "zzz",
      "\x01",  "~",         "mem.alloc",  "HELLO",       "Ping",
      "\xff",  "daemon.inf"};
  for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
    size_t len = strlen(others[i]);
    const method_t *f = dispatch_find(others[i], len);
    /* Some of these may become methods; then they must match exactly. */
    ck_assert_msg(f == NULL || strcmp(f->name, others[i]) == 0,
                  "'%s' found '%s'", others[i], f ? f->name : "");
  }
  ck_assert_ptr_null(dispatch_find("hell", 4));
  ck_assert_ptr_null(dispatch_find("helloo", 6));
  ck_assert_ptr_null(dispatch_find("hello", 4));
  ck_assert_ptr_null(dispatch_find("pingping", 8));
  ck_assert_ptr_null(dispatch_find("ping\0", 5));
  ck_assert_ptr_null(dispatch_find("pi\0ng", 5));
  ck_assert_ptr_nonnull(dispatch_find("pingping", 4));
}
END_TEST

/* Lookup agrees with a linear search over the table for each name with
 * one character inserted or replaced, and for every string of up to three
 * characters of a small alphabet. */
START_TEST(test_find_matches_linear)
{
  unsigned n = 0;
  const method_t *m = dispatch_methods(&n);
  static const char alphabet[] = "adeghilnopsx.";
  char buf[128];

  for (unsigned i = 0; i < n; i++) {
    size_t len = strlen(m[i].name);
    for (size_t pos = 0; pos <= len; pos++) {
      for (size_t c = 0; c < sizeof(alphabet) - 1; c++) {
        /* Insert alphabet[c] at pos, then replace at pos. */
        for (int op = 0; op < 2; op++) {
          size_t blen;
          if (op == 0) {
            memcpy(buf, m[i].name, pos);
            buf[pos] = alphabet[c];
            memcpy(buf + pos + 1, m[i].name + pos, len - pos);
            blen = len + 1;
          } else {
            if (pos == len)
              continue;
            memcpy(buf, m[i].name, len);
            buf[pos] = alphabet[c];
            blen = len;
          }
          const method_t *want = NULL;
          for (unsigned k = 0; k < n; k++)
            if (strlen(m[k].name) == blen && memcmp(m[k].name, buf, blen) == 0)
              want = &m[k];
          ck_assert_ptr_eq(dispatch_find(buf, blen), want);
        }
      }
    }
  }
  /* Every short string of the alphabet. */
  size_t na = sizeof(alphabet) - 1;
  for (size_t len = 1; len <= 3; len++) {
    size_t total = 1;
    for (size_t k = 0; k < len; k++)
      total *= na;
    for (size_t v = 0; v < total; v++) {
      size_t x = v;
      for (size_t k = 0; k < len; k++, x /= na)
        buf[k] = alphabet[x % na];
      const method_t *want = NULL;
      for (unsigned k = 0; k < n; k++)
        if (strlen(m[k].name) == len && memcmp(m[k].name, buf, len) == 0)
          want = &m[k];
      ck_assert_ptr_eq(dispatch_find(buf, len), want);
    }
  }
}
END_TEST

/* ------------------------------------------------ session-free checks */

/* The row of @p method's param @p name. */
static const param_t *row(const char *method, const char *name)
{
  const method_t *m = dispatch_find(method, strlen(method));

  ck_assert_ptr_nonnull(m);
  for (unsigned i = 0; i < m->nsig; i++)
    if (strcmp(m->sig[i].name, name) == 0)
      return &m->sig[i];
  ck_abort_msg("%s has no param %s", method, name);
  return NULL;
}

/* Decode msgpack @p bytes as param @p i by @p p. */
static int decode(const param_t *p, unsigned i, const char *bytes, size_t n,
                  msgpack_zone *z, param_value_t *v, param_fault_t *f)
{
  msgpack_object o;
  size_t off = 0;

  ck_assert_int_eq(msgpack_unpack(bytes, n, &off, z, &o),
                   MSGPACK_UNPACK_SUCCESS);
  memset(v, 0, sizeof(*v));
  return proto_param_decode(p, i, &o, z, v, f);
}

/* A caller that fills the values itself (not msgpack) gets the same checks
 * and messages from the same rows as the socket path. */
START_TEST(test_checks_typed_as_decoded)
{
  const param_t *grid = row("kernel.launch", "grid");
  const param_t *block = row("kernel.compile_ir", "block");
  const param_t *largs = row("kernel.launch", "args");
  const param_t *val = row("mem.memset", "value");
  msgpack_zone z;
  param_value_t v;
  param_fault_t f, g;

  msgpack_zone_init(&z, 1024);
  /* [4, 0]: grid.y is 0 */
  ck_assert_int_eq(decode(grid, 1, "\x92\x04\x00", 3, &z, &v, &f), HIPD_ELIMIT);
  ck_assert_str_eq(f.msg, "grid.y is 0");
  v = (param_value_t){.present = 1, .dims = {4, 0, 1}};
  ck_assert_int_eq(proto_param_check(grid, 1, &v, &g), HIPD_ELIMIT);
  ck_assert_str_eq(g.msg, f.msg);
  /* [32, 32, 2]: 2048 threads, more than the block's 1024 */
  ck_assert_int_eq(decode(block, 1, "\x93\x20\x20\x02", 4, &z, &v, &f),
                   HIPD_ELIMIT);
  ck_assert_int_eq(proto_param_check(block, 1, &v, &g), HIPD_ELIMIT);
  ck_assert_str_eq(g.msg, f.msg);
  /* 256 is above value's 255 */
  ck_assert_int_eq(decode(val, 3, "\xcc\xff", 2, &z, &v, &f), 0);
  ck_assert_int_eq(proto_param_check(val, 3, &v, &g), 0);
  ck_assert_int_eq(decode(val, 3, "\xcd\x01\x00", 3, &z, &v, &f), HIPD_ERANGE);
  v = (param_value_t){.present = 1, .u = 256};
  ck_assert_int_eq(proto_param_check(val, 3, &v, &g), HIPD_ERANGE);
  ck_assert_str_eq(g.msg, f.msg);
  /* [["i32", 7], ["f64", 1.5]] decodes to typed arguments */
  ck_assert_int_eq(decode(largs, 5,
                          "\x92\x92\xa3i32\x07\x92\xa3"
                          "f64\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00",
                          21, &z, &v, &f),
                   0);
  ck_assert_uint_eq(v.n, 2);
  ck_assert_int_eq(v.largs[0].kind, LARG_I32);
  ck_assert_int_eq(v.largs[0].v.i32, 7);
  ck_assert_int_eq(v.largs[1].kind, LARG_F64);
  ck_assert(v.largs[1].v.f64 == 1.5);
  ck_assert_int_eq(proto_param_check(largs, 5, &v, &g), 0);
  /* [["x64", 1]]: an unknown kind, decoded or given */
  ck_assert_int_eq(decode(largs, 5, "\x91\x92\xa3x64\x01", 7, &z, &v, &f),
                   HIPD_EPARAMS);
  ck_assert_str_eq(f.msg, "argument 0: unknown kind (use buf, ptr, i32, i64, "
                          "f32 or f64)");
  {
    param_larg_t bad = {.kind = 99};
    v = (param_value_t){.present = 1, .largs = &bad, .n = 1};
    ck_assert_int_eq(proto_param_check(largs, 5, &v, &g), HIPD_EPARAMS);
    ck_assert_str_eq(g.msg, f.msg);
  }
  /* a required param missing */
  v = (param_value_t){0};
  ck_assert_int_eq(proto_param_check(largs, 5, &v, &g), HIPD_EPARAMS);
  ck_assert_str_eq(g.msg, "param 5 (args) must be an array of [kind, value], "
                          "not missing");
  msgpack_zone_destroy(&z);
}
END_TEST

static Suite *dispatch_suite(void)
{
  Suite *s = suite_create("dispatch");
  TCase *tc;

  tc = tcase_create("table");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_table_sorted_unique);
  tcase_add_test(tc, test_table_rows);
  tcase_add_test(tc, test_required_methods);
  tcase_add_test(tc, test_table_signatures);
  suite_add_tcase(s, tc);

  tc = tcase_create("document");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_protocol_document);
  tcase_add_test(tc, test_ring_methods_documented);
  suite_add_tcase(s, tc);

  tc = tcase_create("find");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_find_each);
  tcase_add_test(tc, test_find_rejects);
  tcase_add_test(tc, test_find_matches_linear);
  suite_add_tcase(s, tc);

  tc = tcase_create("checks");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_checks_typed_as_decoded);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(dispatch_suite());
}
