/* SPDX-License-Identifier: MIT */
/* tests/check_proto_errors.c: the error table of proto/errors.c: every
 * code, its name and message, and the unknown ones (suite "errors"). The
 * shared helpers are in tests/lib/proto_util.h. */
#include "proto_util.h"
#include "run.h"

/* --------------------------------------------------------- error table */

static const struct {
  const char *name;
  int num;
  int enum_value;
  const char *message;
} error_table[] = {
#define XX(name, num, msg) {#name, num, HIPD_##name, msg},
    HIPD_ERRNO_MAP(XX)
#undef XX
};

#define NERRORS (sizeof(error_table) / sizeof(error_table[0]))

START_TEST(test_errors_table)
{
  ck_assert_uint_ge(NERRORS, 40);
  for (size_t i = 0; i < NERRORS; i++) {
    int num = error_table[i].num;
    ck_assert_int_lt(num, 0);
    ck_assert_int_gt(num, HIPD_ERRNO_MAX_);
    ck_assert_int_eq(error_table[i].enum_value, num);
    for (size_t j = i + 1; j < NERRORS; j++) {
      ck_assert_msg(error_table[j].num != num, "%s and %s share %d",
                    error_table[i].name, error_table[j].name, num);
      ck_assert_str_ne(error_table[j].name, error_table[i].name);
    }
    ck_assert_str_eq(hipd_err_name(num), error_table[i].name);
    ck_assert_int_eq(hipd_err_from_name(error_table[i].name), num);
    ck_assert_int_eq(hipd_err_from_name(hipd_err_name(num)), num);
    ck_assert_str_eq(hipd_strerror(num), error_table[i].message);
    ck_assert_uint_gt(strlen(hipd_strerror(num)), 0);
    ck_assert_str_ne(hipd_strerror(num), "unknown error");
    ck_assert(strncmp(error_table[i].name, "E", 1) == 0);
  }
  /* Stable numbers: the table runs -1, -2, ... without gaps. */
  for (size_t i = 0; i < NERRORS; i++)
    ck_assert_int_eq(error_table[i].num, -(int)(i + 1));
  ck_assert_int_eq(HIPD_EINVAL, -1);
  ck_assert_int_eq(HIPD_EINTERNAL, -40);
}
END_TEST

START_TEST(test_errors_unknown)
{
  static const int unknown[] = {1,     42,      HIPD_ERRNO_MAX_,
                                -1000, INT_MIN, INT_MAX};

  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    ck_assert_str_eq(hipd_err_name(unknown[i]), "UNKNOWN");
    ck_assert_str_eq(hipd_strerror(unknown[i]), "unknown error");
  }
  ck_assert_str_eq(hipd_err_name(0), "OK");
  ck_assert_str_eq(hipd_strerror(0), "success");
  ck_assert_int_eq(hipd_err_from_name("UNKNOWN"), 0);
  ck_assert_int_eq(hipd_err_from_name("OK"), 0);
  ck_assert_int_eq(hipd_err_from_name(""), 0);
  ck_assert_int_eq(hipd_err_from_name("einval"), 0);
  ck_assert_int_eq(hipd_err_from_name("EINVA"), 0);
  ck_assert_int_eq(hipd_err_from_name("EINVALX"), 0);
  ck_assert_int_eq(hipd_err_from_name("HIPD_EINVAL"), 0);
}
END_TEST

static Suite *errors_suite(void)
{
  Suite *s = suite_create("errors");
  TCase *tc = tcase_create("table");

  tcase_set_timeout(tc, 5);
  tcase_add_test(tc, test_errors_table);
  tcase_add_test(tc, test_errors_unknown);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(errors_suite());
}
