/* tests/check_dispatch.c: the method table of daemon/dispatch.c and its
 * lookup, which need no socket. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "hipd.h"

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
    ck_assert_msg((m[i].flags & ~M_PREHELLO) == 0, "%s: unknown flags 0x%x",
                  m[i].name, m[i].flags);
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

static Suite *dispatch_suite(void)
{
  Suite *s = suite_create("dispatch");
  TCase *tc;

  tc = tcase_create("table");
  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_table_sorted_unique);
  tcase_add_test(tc, test_table_rows);
  tcase_add_test(tc, test_required_methods);
  suite_add_tcase(s, tc);

  tc = tcase_create("find");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_find_each);
  tcase_add_test(tc, test_find_rejects);
  tcase_add_test(tc, test_find_matches_linear);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr = srunner_create(dispatch_suite());
  int failed;

  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
