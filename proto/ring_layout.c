/* SPDX-License-Identifier: MIT */
/* proto/ring_layout.c: the methods a ring takes and its futex doorbell.
 * See ring_layout.h. */
#include "config.h"

#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ring_layout.h"

#define RING_NAME(n) n,

int proto_ring_method(const char *method)
{
  static const char *const names[] = {PROTO_RING_METHODS(RING_NAME)};

  if (method == NULL)
    return 0;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(names[i], method) == 0)
      return 1;
  return 0;
}

/* Not FUTEX_PRIVATE_FLAG: the word is in a memfd both processes map, so
 * the kernel keys it by the page, not by the address space. */
static void futex_wake_all(_Atomic uint32_t *word)
{
  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL,
                0);
}

/* In both, the load first spares the cache line a locked write when
 * nobody sleeps. */
int proto_ring_wake_sleeper(_Atomic uint32_t *cq_wait, int futex)
{
  uint32_t v = atomic_load_explicit(cq_wait, memory_order_seq_cst);

  if ((v != RING_ASLEEP && v != RING_ASLEEP_SOCKET) ||
      !atomic_compare_exchange_strong(cq_wait, &v, RING_WOKEN))
    return 0;
  if (futex && v == RING_ASLEEP) {
    futex_wake_all(cq_wait);
    return 0;
  }
  return 1;
}

void proto_ring_wake_futex(_Atomic uint32_t *cq_wait)
{
  uint32_t v = atomic_load_explicit(cq_wait, memory_order_seq_cst);

  if (v == RING_ASLEEP &&
      atomic_compare_exchange_strong(cq_wait, &v, RING_WOKEN))
    futex_wake_all(cq_wait);
}

void proto_ring_futex_wait(_Atomic uint32_t *word, uint32_t val, int timeout_ms)
{
  struct timespec ts = {.tv_sec = timeout_ms / 1000,
                        .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};

  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val,
                timeout_ms >= 0 ? &ts : NULL, NULL, 0);
}
