/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver_output.c: kernels' printed output per session
 * (driver_output.h). */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "driver_output.h"

struct drv_output {
  pthread_mutex_t mu;
  atomic_int refs;
  char *buf;        /* (mu) malloc'd as it grows, up to cap */
  size_t len;       /* (mu) bytes kept */
  size_t alloc;     /* (mu) bytes of buf */
  size_t cap;       /* the most kept */
  uint64_t dropped; /* (mu) since the last complete take */
};

drv_output_t *drv_output_new(size_t cap)
{
  drv_output_t *o = calloc(1, sizeof(*o));

  if (o == NULL)
    return NULL;
  pthread_mutex_init(&o->mu, NULL);
  atomic_init(&o->refs, 1);
  o->cap = cap;
  return o;
}

void drv_output_ref(drv_output_t *o)
{
  if (o != NULL)
    atomic_fetch_add(&o->refs, 1);
}

void drv_output_unref(drv_output_t *o)
{
  if (o == NULL || atomic_fetch_sub(&o->refs, 1) != 1)
    return;
  pthread_mutex_destroy(&o->mu);
  free(o->buf);
  free(o);
}

void drv_output_append(drv_output_t *o, const void *p, size_t n,
                       uint64_t dropped)
{
  size_t fit;

  if (o == NULL || (n == 0 && dropped == 0))
    return;
  pthread_mutex_lock(&o->mu);
  fit = o->cap - o->len < n ? o->cap - o->len : n;
  if (fit > 0 && o->len + fit > o->alloc) {
    size_t want = o->alloc ? o->alloc : 4096;
    char *nb;
    while (want < o->len + fit)
      want *= 2;
    if (want > o->cap)
      want = o->cap;
    if ((nb = realloc(o->buf, want)) == NULL) {
      fit = 0;
    } else {
      o->buf = nb;
      o->alloc = want;
    }
  }
  if (fit > 0) {
    memcpy(o->buf + o->len, p, fit);
    o->len += fit;
  }
  o->dropped += dropped + (n - fit);
  pthread_mutex_unlock(&o->mu);
}

size_t drv_output_take(drv_output_t *o, void *dst, size_t cap,
                       uint64_t *dropped)
{
  size_t n;

  *dropped = 0;
  if (o == NULL)
    return 0;
  pthread_mutex_lock(&o->mu);
  n = o->len < cap ? o->len : cap;
  if (n > 0)
    memcpy(dst, o->buf, n);
  if (n > 0 && o->len > n)
    memmove(o->buf, o->buf + n, o->len - n);
  o->len -= n;
  *dropped = o->dropped;
  if (o->len == 0) {
    o->dropped = 0;
    free(o->buf); /* most sessions print nothing again */
    o->buf = NULL;
    o->alloc = 0;
  }
  pthread_mutex_unlock(&o->mu);
  return n;
}
