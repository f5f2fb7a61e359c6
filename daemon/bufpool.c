/* SPDX-License-Identifier: MIT */
/* daemon/bufpool.c: a small cache of large host buffers. See bufpool.h. */
#include "config.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "bufpool.h"
#include "util/clock.h"

#define POOL_SLOTS 8
#define POOL_MAX_BYTES ((size_t)1 << 30) /* cached at most */

static struct {
  pthread_mutex_t mu;
  struct {
    void *p;
    size_t size; /* usable bytes */
    uint64_t put_ms;
  } slot[POOL_SLOTS];
  size_t bytes; /* written under mu, read without (bufpool_trim_due) */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

void *bufpool_get(size_t n)
{
  void *p;

  if (n < BUFPOOL_MIN)
    return malloc(n ? n : 1);
  p = bufpool_take(n);
  return p != NULL ? p : malloc(n);
}

void *bufpool_take(size_t n)
{
  int best = -1;
  void *p;

  if (n < BUFPOOL_MIN)
    return NULL;
  pthread_mutex_lock(&pool.mu);
  /* The smallest block that fits, but not one so large that a small
   * transfer would hold it. */
  for (int i = 0; i < POOL_SLOTS; i++)
    if (pool.slot[i].p != NULL && pool.slot[i].size >= n &&
        pool.slot[i].size / 2 <= n &&
        (best < 0 || pool.slot[i].size < pool.slot[best].size))
      best = i;
  if (best >= 0) {
    p = pool.slot[best].p;
    __atomic_store_n(&pool.bytes, pool.bytes - pool.slot[best].size,
                     __ATOMIC_RELAXED);
    pool.slot[best].p = NULL;
    pthread_mutex_unlock(&pool.mu);
    return p;
  }
  pthread_mutex_unlock(&pool.mu);
  return NULL;
}

void bufpool_put(void *p)
{
  size_t size;
  int free_slot = -1;

  if (p == NULL)
    return;
  size = malloc_usable_size(p);
  if (size < BUFPOOL_MIN || size > POOL_MAX_BYTES) {
    free(p);
    return;
  }
  pthread_mutex_lock(&pool.mu);
  for (int i = 0; i < POOL_SLOTS && free_slot < 0; i++)
    if (pool.slot[i].p == NULL)
      free_slot = i;
  if (free_slot >= 0 && pool.bytes + size <= POOL_MAX_BYTES) {
    pool.slot[free_slot].p = p;
    pool.slot[free_slot].size = size;
    pool.slot[free_slot].put_ms = util_now_ms();
    __atomic_store_n(&pool.bytes, pool.bytes + size, __ATOMIC_RELAXED);
    p = NULL;
  }
  pthread_mutex_unlock(&pool.mu);
  free(p);
}

int bufpool_trim_due(unsigned idle_ms)
{
  uint64_t now = util_now_ms();
  int due = 0;

  if (__atomic_load_n(&pool.bytes, __ATOMIC_RELAXED) == 0)
    return 0;
  pthread_mutex_lock(&pool.mu);
  for (int i = 0; i < POOL_SLOTS && !due; i++)
    due = pool.slot[i].p != NULL && now - pool.slot[i].put_ms >= idle_ms;
  pthread_mutex_unlock(&pool.mu);
  return due;
}

void bufpool_trim(unsigned idle_ms)
{
  void *drop[POOL_SLOTS];
  int n = 0;
  uint64_t now = util_now_ms();

  pthread_mutex_lock(&pool.mu);
  for (int i = 0; i < POOL_SLOTS; i++) {
    if (pool.slot[i].p != NULL && now - pool.slot[i].put_ms >= idle_ms) {
      drop[n++] = pool.slot[i].p;
      __atomic_store_n(&pool.bytes, pool.bytes - pool.slot[i].size,
                       __ATOMIC_RELAXED);
      pool.slot[i].p = NULL;
    }
  }
  pthread_mutex_unlock(&pool.mu);
  /* Freeing (munmap) 1 GiB takes a while: not under the lock. */
  for (int i = 0; i < n; i++)
    free(drop[i]);
}
