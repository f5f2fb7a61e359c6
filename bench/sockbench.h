/* SPDX-License-Identifier: MIT */
/* bench/sockbench.h: the bare Unix-socket baselines of hipd_bench.
 *
 * Two processes (the bench and a forked peer) on a connected pair of Unix
 * stream sockets, with blocking reads and writes and nothing else: the
 * least any request/reply protocol over a Unix socket costs on this host.
 */
#ifndef HIPD_BENCH_SOCKBENCH_H
#define HIPD_BENCH_SOCKBENCH_H

#include <stddef.h>
#include <stdint.h>

/* Ping-pong: send @p msg bytes, the peer echoes them; @p warmup untimed
 * round trips, then @p iters timed one by one. *@p us_median and
 * *@p us_mean get the round trip in microseconds. @return 0, or -1 with
 * the reason in @p err. */
int sock_pingpong(size_t msg, int iters, int warmup, double *us_median,
                  double *us_mean, char *err, size_t errsz);

/* Bulk: send @p bytes to the peer, which reads them all and answers one
 * byte; repeated for at least @p budget seconds and 3 times after one
 * untimed transfer. *@p gbps gets bytes over time (10^9 bytes/s).
 * @return 0, or -1 with the reason in @p err. */
int sock_bulk(uint64_t bytes, double budget, double *gbps, char *err,
              size_t errsz);

#endif
