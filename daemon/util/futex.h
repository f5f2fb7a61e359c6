/* SPDX-License-Identifier: MIT */
/* daemon/util/futex.h: a word to sleep on and wake, within one process.
 *
 * Header-only, like clock.h. The executors' threads sleep on one (the
 * pool's wake sequence) instead of a condition variable: glibc relocks a
 * condition variable's mutex as contended after every wake-up, so each
 * task a sleeping thread took cost a futex wake with nobody to wake at its
 * next unlock. The word is private (FUTEX_PRIVATE_FLAG): the ring's
 * doorbell, a word two processes share, has its own (proto/ring_layout.h).
 */
#ifndef HIPD_UTIL_FUTEX_H
#define HIPD_UTIL_FUTEX_H

#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleep while *@p word holds @p val, at most @p timeout_ns (< 0: no
 * limit). It returns when woken, when the word did not hold val, on the
 * timeout or on a signal: the caller looks again in every case. */
static inline void util_futex_wait(uint32_t *word, uint32_t val,
                                   int64_t timeout_ns)
{
  struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000),
                        .tv_nsec = (long)(timeout_ns % 1000000000)};

  (void)syscall(SYS_futex, word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, val,
                timeout_ns >= 0 ? &ts : NULL, NULL, 0);
}

/* Wake up to @p n threads asleep on @p word. */
static inline void util_futex_wake(uint32_t *word, int n)
{
  (void)syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, NULL, NULL,
                0);
}

#endif
