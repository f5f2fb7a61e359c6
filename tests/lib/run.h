/* SPDX-License-Identifier: MIT */
/* tests/lib/run.h: how a test program runs its suite (libhipdtest_run,
 * linked into every check program). */
#ifndef HIPD_TESTS_RUN_H
#define HIPD_TESTS_RUN_H

#include <check.h>

/* Run @p s (check's default: each test in a process of its own) and free
 * the runner. @return how many tests failed. */
int test_run(Suite *s);
/* The main() of a program of one suite: EXIT_SUCCESS when every test of
 * @p s passes, EXIT_FAILURE otherwise. */
int test_main(Suite *s);

#endif
