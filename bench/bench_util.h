/* SPDX-License-Identifier: MIT */
/* bench/bench_util.h: small helpers shared by the benchmark programs
 * (hipd_bench and direct_hip): clocks, statistics, option lists and the
 * JSON lines the programs exchange. Nothing here knows hipd or HIP. */
#ifndef HIPD_BENCH_UTIL_H
#define HIPD_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Seconds of CLOCK_MONOTONIC. */
double bu_now(void);
/* Sleep @p seconds (restarted after signals). */
void bu_sleep(double seconds);

/* Print the last @p lines lines of the file at @p path to stderr (a log
 * of a child that failed). */
void bu_log_tail(const char *path, int lines);

/* Sort @p v (n values) and return its median; NAN if n is 0. */
double bu_median(double *v, size_t n);
/* The @p q quantile (0..1) of an already sorted array; NAN if n is 0. */
double bu_quantile(const double *sorted, size_t n, double q);
double bu_mean(const double *v, size_t n);

/* Parse a comma list of sizes (util_parse_size, util/parse.h: K, M or G,
 * at least 1) into @p out (at most @p max
 * entries). @return the number parsed, or -1. */
int bu_parse_size_list(const char *s, uint64_t *out, int max);
/* Parse a comma list of non-negative ints. @return the count, or -1. */
int bu_parse_int_list(const char *s, int *out, int max);
/* "1KiB", "256MiB", "1.5GiB", "100B": the label of a byte count, into
 * @p buf. @return buf. */
const char *bu_size_label(uint64_t bytes, char *buf, size_t size);

/* Write @p s as a JSON string (quotes included) to @p f. NULL is null. */
void bu_json_str(FILE *f, const char *s);
/* Write a number, or null when it is not finite. */
void bu_json_num(FILE *f, double v);

/* Fields of one flat JSON object on one line, as the benchmark programs
 * print them ({"kind":"rtt","us_median":8.9}). Nested values are not
 * understood; keys are found by their quoted name followed by ':'.
 * @return 0, or -1 when the key is absent or of another type. */
int bu_json_get_num(const char *line, const char *key, double *out);
/* Copy a string field (escapes other than \" and \\ are kept as is). */
int bu_json_get_str(const char *line, const char *key, char *out, size_t size);

#endif
