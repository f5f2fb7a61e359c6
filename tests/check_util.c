/* SPDX-License-Identifier: MIT */
/* tests/check_util.c: the utilities of daemon/util/ (one of each): option
 * sizes (parse.c), the string builder (strbuf.c), the growable-array
 * macro (array.h), the clock (clock.h), the error carrier (err.h), the
 * account lookup (account.c), lists of users and groups (who_list.c) and
 * the rate limiter (ratelimit.c). */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "util/account.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/parse.h"
#include "util/ratelimit.h"
#include "util/strbuf.h"
#include "util/who_list.h"

/* ------------------------------------------------------------ parse_size */

static int psize(const char *s, uint64_t *v)
{
  return util_parse_size(s, 0, UINT64_MAX, v);
}

START_TEST(test_size_plain)
{
  uint64_t v = 0;

  ck_assert_int_eq(psize("0", &v), 0);
  ck_assert_uint_eq(v, 0);
  ck_assert_int_eq(psize("4096", &v), 0);
  ck_assert_uint_eq(v, 4096);
  ck_assert_int_eq(psize("0x1000", &v), 0);
  ck_assert_uint_eq(v, 4096);
  ck_assert_int_eq(psize("010", &v), 0); /* decimal, never octal */
  ck_assert_uint_eq(v, 10);
  ck_assert_int_eq(psize("18446744073709551615", &v), 0);
  ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

START_TEST(test_size_suffixes)
{
  uint64_t v = 0;

  ck_assert_int_eq(psize("1K", &v), 0);
  ck_assert_uint_eq(v, 1024);
  ck_assert_int_eq(psize("1k", &v), 0);
  ck_assert_uint_eq(v, 1024);
  ck_assert_int_eq(psize("3M", &v), 0);
  ck_assert_uint_eq(v, 3u << 20);
  ck_assert_int_eq(psize("2g", &v), 0);
  ck_assert_uint_eq(v, 2ull << 30);
  ck_assert_int_eq(psize("64KiB", &v), 0);
  ck_assert_uint_eq(v, 64 << 10);
  ck_assert_int_eq(psize("64KB", &v), 0);
  ck_assert_uint_eq(v, 64 << 10);
  ck_assert_int_eq(psize("100B", &v), 0);
  ck_assert_uint_eq(v, 100);
  ck_assert_int_eq(psize("0x10K", &v), 0);
  ck_assert_uint_eq(v, 16 << 10);
}
END_TEST

START_TEST(test_size_junk)
{
  uint64_t v = 77;
  static const char *const bad[] = {
      "",    " 1",  "+1",   "-1", "K",   "x",   "1T", "1KK", "1 K",
      "1K ", "1Kb", "1.5M", "0x", "0xg", "1,2", "iB", "1Bi",
  };

  ck_assert_int_eq(util_parse_size(NULL, 0, 10, &v), -EINVAL);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ck_assert_msg(psize(bad[i], &v) == -EINVAL, "\"%s\" was taken", bad[i]);
  ck_assert_uint_eq(v, 77); /* untouched on error */
}
END_TEST

START_TEST(test_size_overflow)
{
  uint64_t v = 77;

  ck_assert_int_eq(psize("18446744073709551616", &v), -ERANGE);
  ck_assert_int_eq(psize("99999999999999999999999", &v), -ERANGE);
  ck_assert_int_eq(psize("17179869184G", &v), -ERANGE); /* 2^34 G = 2^64 */
  ck_assert_int_eq(psize("17179869183G", &v), 0);
  ck_assert_uint_eq(v, 17179869183ull << 30);
  ck_assert_int_eq(psize("17592186044416M", &v), -ERANGE);    /* 2^44 M */
  ck_assert_int_eq(psize("18014398509481984K", &v), -ERANGE); /* 2^54 K */
  ck_assert_int_eq(psize("0x10000000000000000", &v), -ERANGE);
}
END_TEST

START_TEST(test_size_bounds)
{
  uint64_t v = 77;

  ck_assert_int_eq(util_parse_size("1023", 1024, 4096, &v), -ERANGE);
  ck_assert_int_eq(util_parse_size("4097", 1024, 4096, &v), -ERANGE);
  ck_assert_uint_eq(v, 77);
  ck_assert_int_eq(util_parse_size("1K", 1024, 4096, &v), 0);
  ck_assert_uint_eq(v, 1024);
  ck_assert_int_eq(util_parse_size("4K", 1024, 4096, &v), 0);
  ck_assert_uint_eq(v, 4096);
  ck_assert_int_eq(util_parse_size("0", 1, 10, &v), -ERANGE);
}
END_TEST

/* ---------------------------------------------------------------- strbuf */

START_TEST(test_strbuf_build)
{
  strbuf_t b = {0};
  char big[3000];
  size_t len = 0;
  char *s;

  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  strbuf_add(&b, "ab");
  strbuf_addc(&b, 'c');
  strbuf_addn(&b, "defgh", 2);
  strbuf_printf(&b, "-%d-%s", 42, "z");
  ck_assert_str_eq(b.p, "abcde-42-z");
  strbuf_printf(&b, "%s", big); /* past the printf's small buffer */
  ck_assert_uint_eq(b.len, 10 + sizeof(big) - 1);
  ck_assert(!strbuf_failed(&b));
  s = strbuf_take(&b, &len);
  ck_assert_ptr_nonnull(s);
  ck_assert_uint_eq(len, strlen(s));
  ck_assert_ptr_null(b.p);
  free(s);
  s = strbuf_take(&b, &len); /* empty: "" */
  ck_assert_str_eq(s, "");
  ck_assert_uint_eq(len, 0);
  free(s);
}
END_TEST

START_TEST(test_strbuf_limit)
{
  strbuf_t b;

  strbuf_init(&b, 4);
  strbuf_add(&b, "abcd");
  ck_assert(!strbuf_failed(&b));
  strbuf_addc(&b, 'e');
  ck_assert(b.over);
  ck_assert(strbuf_failed(&b));
  strbuf_add(&b, ""); /* sticky: nothing more is added */
  ck_assert_str_eq(b.p, "abcd");
  ck_assert_ptr_null(strbuf_take(&b, NULL));
  ck_assert_ptr_null(b.p);
  strbuf_free(&b);
}
END_TEST

/* ----------------------------------------------------------------- array */

START_TEST(test_array_grow)
{
  int *a = NULL;
  uint32_t n = 0, cap = 0;

  for (int i = 0; i < 100; i++) {
    ck_assert_int_eq(ARRAY_GROW(a, n, cap, 8), 0);
    a[n++] = i;
  }
  ck_assert_uint_eq(cap, 128);
  for (int i = 0; i < 100; i++)
    ck_assert_int_eq(a[i], i);
  free(a);

  /* A capacity that would overflow its type leaves the array as it is. */
  unsigned char *c = malloc(200), m = 200, mc = 200;
  ck_assert_int_eq(ARRAY_GROW(c, m, mc, 8), HIPD_ENOMEM);
  ck_assert_uint_eq(mc, 200);
  free(c);
}
END_TEST

START_TEST(test_clock)
{
  uint64_t a = util_now_ns(), ms = util_now_ms(), b = util_now_ns();

  ck_assert_uint_le(a, b);
  ck_assert_uint_le(a / 1000000u, ms);
  ck_assert_uint_le(ms, b / 1000000u);
}
END_TEST

START_TEST(test_err)
{
  hipd_err_t e;
  char big[600];

  memset(big, 'y', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  ck_assert_int_eq(err_set(&e, -22, "bad %s %d", "value", 7), -22);
  ck_assert_int_eq(e.code, -22);
  ck_assert_str_eq(e.msg, "bad value 7");
  err_set(&e, -1, "%s", big); /* truncated, still terminated */
  ck_assert_uint_eq(strlen(e.msg), HIPD_ERR_MSG_MAX - 1);
  err_clear(&e);
  ck_assert_int_eq(e.code, 0);
  ck_assert_str_eq(e.msg, "");
}
END_TEST

/* A burst, then the rate; keys apart; the least recently used slot goes
 * to a new key, full. */
START_TEST(test_ratelimit)
{
  static ratelimit_t rl; /* zeroed: empty */
  const uint64_t s = 1000000000u;
  uint64_t denied = 99;
  int n = 0;

  for (int i = 0; i < 20; i++)
    n += ratelimit_take(&rl, 7, 10 * s, 4, 8, NULL);
  ck_assert_int_eq(n, 8);
  /* Another key has its own bucket. */
  ck_assert_int_eq(ratelimit_take(&rl, 8, 10 * s, 4, 8, &denied), 1);
  ck_assert_uint_eq(denied, 0);
  /* A quarter of a second later, one more for key 7, with the 12 it was
   * refused. */
  ck_assert_int_eq(ratelimit_take(&rl, 7, 10 * s + s / 4, 4, 8, &denied), 1);
  ck_assert_uint_eq(denied, 12);
  ck_assert_int_eq(ratelimit_take(&rl, 7, 10 * s + s / 4, 4, 8, NULL), 0);
  /* Refilled up to the burst, not beyond. */
  n = 0;
  for (int i = 0; i < 20; i++)
    n += ratelimit_take(&rl, 7, 100 * s, 4, 8, NULL);
  ck_assert_int_eq(n, 8);
  /* RATELIMIT_SLOTS other keys later, key 7's slot was reused: full again. */
  for (int k = 0; k < RATELIMIT_SLOTS; k++)
    ratelimit_take(&rl, 1000 + k, 101 * s, 4, 8, NULL);
  n = 0;
  for (int i = 0; i < 20; i++)
    n += ratelimit_take(&rl, 7, 101 * s, 4, 8, NULL);
  ck_assert_int_eq(n, 8);
}
END_TEST

/* ---------------------------------------------------------------- main */

/* The account lookup: root by name and by uid, its groups, a missing
 * account and group as ENOENT with a message naming them. */
START_TEST(test_account)
{
  account_t a;
  hipd_err_t err;
  gid_t *gids = NULL, g = 1;
  char name[64];
  int n = 0;

  ck_assert_int_eq(account_by_name("root", &a, &err), 0);
  ck_assert_uint_eq(a.uid, 0);
  ck_assert_str_eq(a.name, "root");
  memset(&a, 0xff, sizeof(a));
  ck_assert_int_eq(account_by_uid(0, &a, &err), 0);
  ck_assert_str_eq(a.name, "root");
  ck_assert_uint_eq(a.gid, 0);
  ck_assert_int_eq(account_groups(&a, &gids, &n, &err), 0);
  ck_assert_int_ge(n, 1);
  ck_assert_uint_eq(gids[0], 0);
  free(gids);
  ck_assert_int_eq(account_group_by_name("root", &g, &err), 0);
  ck_assert_uint_eq(g, 0);
  ck_assert_int_eq(account_group_name(0, name, sizeof(name), &err), 0);
  ck_assert_str_eq(name, "root");
  ck_assert_int_eq(account_by_name("hipd-no-such-user", &a, &err), HIPD_ENOENT);
  ck_assert_str_eq(err.msg, "no account 'hipd-no-such-user'");
  ck_assert_int_eq(account_group_by_name("hipd-no-such-group", &g, &err),
                   HIPD_ENOENT);
  ck_assert_str_eq(err.msg, "no group 'hipd-no-such-group'");
  ck_assert_int_eq(account_by_name("", &a, NULL), HIPD_EINVAL);
}
END_TEST

/* Lists of users and groups: in a mixed list a user, a uid, an @group and
 * an @gid, each matching its uid or a group among the peer's; a list of
 * users takes "@" as part of a name, one of groups takes every word as a
 * group; a list parsed into again grows; an unknown name and an empty
 * list are refused with a message naming the option and the word. */
START_TEST(test_who_list)
{
  who_list_t l = {0};
  hipd_err_t err;

  ck_assert_int_eq(
      who_list_parse(&l, "--x", "root,1000,@root,@100", WHO_MIXED, &err), 0);
  ck_assert_uint_eq(l.n, 4);
  ck_assert_int_eq(l.groups, 1);
  ck_assert_int_eq(who_list_match(&l, 0, NULL, 0), 1);
  ck_assert_int_eq(who_list_match(&l, 1000, NULL, 0), 1);
  ck_assert_int_eq(who_list_match(&l, 1001, (gid_t[]){0}, 1), 1);
  ck_assert_int_eq(who_list_match(&l, 1001, (gid_t[]){65534, 100}, 2), 1);
  ck_assert_int_eq(who_list_match(&l, 1001, (gid_t[]){65534, 7}, 2), 0);
  ck_assert_int_eq(who_list_match(&l, 100, (gid_t[]){1000}, 1), 0);
  who_list_free(&l);
  ck_assert_uint_eq(l.n, 0);
  ck_assert_int_eq(who_list_match(&l, 0, (gid_t[]){0}, 1), 0);

  ck_assert_int_eq(who_list_parse(&l, "--u", "root,65534", WHO_USERS, &err), 0);
  ck_assert_int_eq(l.groups, 0);
  ck_assert_int_eq(who_list_match(&l, 65534, NULL, 0), 1);
  ck_assert_int_eq(who_list_match(&l, 7, (gid_t[]){0}, 1), 0);
  ck_assert_int_eq(who_list_parse(&l, "--u", "@100", WHO_USERS, &err),
                   HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--u: no user '@100'");
  who_list_free(&l);

  ck_assert_int_eq(who_list_parse(&l, "--g", "root,@100", WHO_GROUPS, &err), 0);
  ck_assert_int_eq(who_list_match(&l, 7, (gid_t[]){0}, 1), 1);
  ck_assert_int_eq(who_list_match(&l, 7, (gid_t[]){7, 100}, 2), 1);
  ck_assert_int_eq(who_list_match(&l, 0, (gid_t[]){7}, 1), 0);
  /* Appended: the union of both. */
  ck_assert_int_eq(who_list_parse(&l, "--g", "7", WHO_MIXED, &err), 0);
  ck_assert_uint_eq(l.n, 3);
  ck_assert_int_eq(who_list_match(&l, 7, NULL, 0), 1);
  who_list_free(&l);

  ck_assert_int_eq(who_list_parse(&l, "--mps-tenants",
                                  "root,bob-no-such-hipd-user", WHO_MIXED,
                                  &err),
                   HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: no user 'bob-no-such-hipd-user'");
  who_list_free(&l);
  ck_assert_int_eq(who_list_parse(&l, "--mps-tenants", "@x-no-such-hipd-group",
                                  WHO_MIXED, &err),
                   HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: no group 'x-no-such-hipd-group'");
  who_list_free(&l);
  ck_assert_int_eq(who_list_parse(&l, "--mps-tenants", "", WHO_MIXED, &err),
                   HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: an empty list");
  who_list_free(&l);
}
END_TEST

static Suite *util_suite(void)
{
  Suite *s = suite_create("util");
  TCase *tc = tcase_create("parse_size");

  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_size_plain);
  tcase_add_test(tc, test_size_suffixes);
  tcase_add_test(tc, test_size_junk);
  tcase_add_test(tc, test_size_overflow);
  tcase_add_test(tc, test_size_bounds);
  suite_add_tcase(s, tc);
  tc = tcase_create("strbuf");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_strbuf_build);
  tcase_add_test(tc, test_strbuf_limit);
  suite_add_tcase(s, tc);
  tc = tcase_create("array_clock_err");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_array_grow);
  tcase_add_test(tc, test_clock);
  tcase_add_test(tc, test_err);
  tcase_add_test(tc, test_account);
  tcase_add_test(tc, test_who_list);
  tcase_add_test(tc, test_ratelimit);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(util_suite());
}
