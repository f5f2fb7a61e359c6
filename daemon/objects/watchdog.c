/* SPDX-License-Identifier: MIT */
/* daemon/objects/watchdog.c: the GPU kernel time limit (watchdog.h). */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "device.h"
#include "drivers/driver.h"
#include "hipd.h"
#include "objects/watchdog.h"
#include "util/clock.h"

struct watch {
  watch_t *next;
  device_t *device;
  uint32_t epoch; /* its context's (device_epoch) */
  driver_t *drv;
  int dev, local;
  void *stream;
  uint64_t launches; /* queued (atomic) */
  uint64_t sampled;  /* launches when the pending mark was queued */
  uint64_t mark_ns;  /* when the pending mark was queued; 0: none */
  uint32_t limit_ms; /* the limit when it was queued */
  int refs;          /* the list's, and a pending mark's */
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* the thread waits there while nothing is queued */
  pthread_t thread;
  int running;
  int sleeping;        /* atomic: the thread waits on cv (or is about to) */
  uint32_t timeout_ms; /* atomic */
  watchdog_fired_fn fired;
  watch_t *list;
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void watch_put(watch_t *w)
{
  if (--w->refs == 0)
    free(w);
}

/* A mark was reached: the work before it is done. */
static void mark_cb(void *arg, int status)
{
  watch_t *w = arg;

  (void)status;
  pthread_mutex_lock(&wd.mu);
  w->mark_ns = 0;
  watch_put(w);
  pthread_mutex_unlock(&wd.mu);
}

/* Whether a sample could find anything: a limit, and a stream with
 * launches since its last mark or a mark not reached yet. wd.mu held. */
static int watch_busy(void)
{
  if (__atomic_load_n(&wd.timeout_ms, __ATOMIC_SEQ_CST) == 0)
    return 0;
  for (watch_t *w = wd.list; w != NULL; w = w->next) {
    if (device_epoch(w->device) != w->epoch)
      continue;
    if (w->mark_ns != 0 ||
        __atomic_load_n(&w->launches, __ATOMIC_SEQ_CST) != w->sampled)
      return 1;
  }
  return 0;
}

/* Sleep, with no timer, until there is something to watch: an idle worker
 * has no wake-ups of the watchdog's. wd.sleeping goes up before the
 * streams are looked at, and a launch raises launches before it reads
 * wd.sleeping (both sequentially consistent), so either this sees the
 * launch or the launch sees it asleep and signals under wd.mu. */
static void wait_for_work(void)
{
  pthread_mutex_lock(&wd.mu);
  __atomic_store_n(&wd.sleeping, 1, __ATOMIC_SEQ_CST);
  while (!watch_busy())
    pthread_cond_wait(&wd.cv, &wd.mu);
  __atomic_store_n(&wd.sleeping, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&wd.mu);
}

/* Wake the thread if it sleeps. Any thread. */
static void wake(void)
{
  if (!__atomic_load_n(&wd.sleeping, __ATOMIC_SEQ_CST))
    return;
  pthread_mutex_lock(&wd.mu);
  pthread_cond_signal(&wd.cv);
  pthread_mutex_unlock(&wd.mu);
}

static void *watchdog_main(void *arg)
{
  (void)arg;
  for (;;) {
    uint32_t limit, period;
    watch_t *mark[64];
    int nmark = 0, fired_dev = -1;
    uint32_t fired_ms = 0;
    uint64_t now;

    wait_for_work();
    limit = __atomic_load_n(&wd.timeout_ms, __ATOMIC_RELAXED);
    period = limit == 0 ? 250 : limit / 4;
    if (period < 50)
      period = 50;
    if (period > 250)
      period = 250;
    nanosleep(
        &(struct timespec){period / 1000, (long)(period % 1000) * 1000000},
        NULL);
    now = util_now_ns();
    pthread_mutex_lock(&wd.mu);
    for (watch_t *w = wd.list; w != NULL; w = w->next) {
      uint64_t l = __atomic_load_n(&w->launches, __ATOMIC_RELAXED);
      if (device_epoch(w->device) != w->epoch)
        continue; /* its context was reset: its work is gone */
      if (w->mark_ns != 0) {
        if (w->limit_ms != 0 &&
            now - w->mark_ns > (uint64_t)w->limit_ms * 1000000u &&
            fired_dev < 0) {
          fired_dev = w->dev;
          fired_ms = w->limit_ms;
        }
        continue;
      }
      if (limit == 0 || l == w->sampled || nmark == 64)
        continue;
      w->sampled = l;
      w->mark_ns = now;
      w->limit_ms = limit;
      w->refs++;
      mark[nmark++] = w;
    }
    pthread_mutex_unlock(&wd.mu);
    /* Outside the lock: a runtime may run the callback at once. */
    for (int i = 0; i < nmark; i++) {
      watch_t *w = mark[i];
      if (w->drv->bind_thread != NULL)
        w->drv->bind_thread(w->drv, w->local);
      if (w->drv->stream_notify(w->drv, w->stream, mark_cb, w) != 0)
        mark_cb(w, 0); /* not watched this time */
    }
    if (fired_dev >= 0 && wd.fired != NULL) {
      wd.fired(fired_dev, fired_ms);
      return NULL; /* the process ends */
    }
  }
  return NULL;
}

int watchdog_start(uint32_t timeout_ms, watchdog_fired_fn fired)
{
  pthread_attr_t attr;
  int rc;

  if (wd.running)
    return 0;
  wd.fired = fired;
  __atomic_store_n(&wd.timeout_ms, timeout_ms, __ATOMIC_RELAXED);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  rc = pthread_create(&wd.thread, &attr, watchdog_main, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return HIPD_EIO;
  wd.running = 1;
  return 0;
}

void watchdog_set_timeout(uint32_t timeout_ms)
{
  __atomic_store_n(&wd.timeout_ms, timeout_ms, __ATOMIC_SEQ_CST);
  wake();
}

uint32_t watchdog_timeout(void)
{
  return wd.running ? __atomic_load_n(&wd.timeout_ms, __ATOMIC_RELAXED) : 0;
}

watch_t *watch_add(device_t *dev, void *stream)
{
  watch_t *w;

  if (!wd.running || dev->drv->stream_notify == NULL)
    return NULL;
  if ((w = calloc(1, sizeof(*w))) == NULL)
    return NULL;
  w->device = dev;
  w->epoch = device_epoch(dev);
  w->drv = dev->drv;
  w->dev = dev->id;
  w->local = dev->local;
  w->stream = stream;
  w->refs = 1;
  pthread_mutex_lock(&wd.mu);
  w->next = wd.list;
  wd.list = w;
  pthread_mutex_unlock(&wd.mu);
  return w;
}

void watch_launched(watch_t *w)
{
  if (w != NULL) {
    __atomic_add_fetch(&w->launches, 1, __ATOMIC_SEQ_CST);
    wake();
  }
}

void watch_remove(watch_t *w)
{
  if (w == NULL)
    return;
  pthread_mutex_lock(&wd.mu);
  for (watch_t **p = &wd.list; *p != NULL; p = &(*p)->next) {
    if (*p == w) {
      *p = w->next;
      break;
    }
  }
  watch_put(w); /* a pending mark keeps it until its callback */
  pthread_mutex_unlock(&wd.mu);
}
