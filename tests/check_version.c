/* SPDX-License-Identifier: MIT */
/* tests/check_version.c: the version macros of <hipd.h> (generated from
 * configure's version into client/hipd_version.h) agree with each other,
 * with PACKAGE_VERSION and with the library's hipd_version(). No daemon.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipd.h"
#include "run.h"

START_TEST(test_macros_match_runtime)
{
  char want[64];

  snprintf(want, sizeof(want), "%d.%d.%d", HIPD_VERSION_MAJOR,
           HIPD_VERSION_MINOR, HIPD_VERSION_PATCH);
  ck_assert_str_eq(want, HIPD_VERSION_STRING);
  ck_assert_str_eq(HIPD_VERSION_STRING, PACKAGE_VERSION);
  ck_assert_str_eq(hipd_version(), HIPD_VERSION_STRING);
  ck_assert_int_eq(HIPD_VERSION_NUMBER, HIPD_VERSION_MAJOR * 10000 +
                                            HIPD_VERSION_MINOR * 100 +
                                            HIPD_VERSION_PATCH);
  ck_assert_int_lt(HIPD_VERSION_MINOR, 100);
  ck_assert_int_lt(HIPD_VERSION_PATCH, 100);
}
END_TEST

/* Usable in #if, as the header promises. */
START_TEST(test_macros_in_preprocessor)
{
#if HIPD_VERSION_NUMBER >= 100 && HIPD_VERSION_NUMBER < 1000000
  int ok = 1;
#else
  int ok = 0;
#endif
  ck_assert_int_eq(ok, 1);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("version");
  TCase *tc = tcase_create("macros");
  int failed;

  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_macros_match_runtime);
  tcase_add_test(tc, test_macros_in_preprocessor);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
