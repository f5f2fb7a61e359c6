/* SPDX-License-Identifier: MIT */
/* daemon/util/parse.h: parsing of option values shared by the daemon
 * (config/options.c) and the benchmarks (bench/bench_util.c). */
#ifndef HIPD_UTIL_PARSE_H
#define HIPD_UTIL_PARSE_H

#include <stdint.h>

/* Parse a byte count or a plain number: decimal digits, or hexadecimal
 * after 0x, then an optional binary suffix K, M or G (either case), then an
 * optional "B" or "iB" (bench/ has always taken both) ("64K", "64KiB", "1M",
 * "4096", "0x1000"). No sign, no space. The value must lie in [@p min, @p max].
 * @return 0 with *@p out set, -EINVAL (empty, junk, no digits) or -ERANGE
 * (overflow, out of bounds); *@p out is untouched on error. */
int util_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* A uid or gid written as a number: decimal digits only, below
 * (uint32_t)-1 (which is no id). @return 1 with *@p out set, else 0 (a
 * name, or junk). */
int util_parse_id(const char *s, uint32_t *out);

#endif
