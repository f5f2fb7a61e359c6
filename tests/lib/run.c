/* SPDX-License-Identifier: MIT */
/* tests/lib/run.c: running a suite (run.h). */
#include "config.h"

#include <stdlib.h>

#include "run.h"

int test_run(Suite *s)
{
  SRunner *sr = srunner_create(s);
  int failed;

  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed;
}

int test_main(Suite *s)
{
  return test_run(s) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
