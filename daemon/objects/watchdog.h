/* SPDX-License-Identifier: MIT */
/* daemon/objects/watchdog.h: the GPU kernel time limit
 * (--gpu-kernel-timeout).
 *
 * A GPU kernel cannot be stopped on its own: only ending its context (its
 * process) does. So a worker watches its GPU streams from a thread of its
 * own: each stream that got launches since it was last seen idle gets a
 * mark (drv->stream_notify) behind them; a mark still unreached the time
 * limit after it was queued means that the work queued before it has run
 * for longer than that, and the watchdog calls the worker's handler, which
 * tells every session why and ends the process. The cost is one atomic
 * increment (and the read of a flag) a launch and a host callback a stream
 * at most every sample period (a quarter of the limit, 50 to 250 ms), none
 * on idle streams; while no stream has work unmarked or a mark unreached
 * the thread sleeps without a timer, woken by the next launch.
 *
 * What it measures is the work one mark follows: the launches queued on a
 * stream between two samples, run one after the other; a stream that waits
 * on an event never recorded counts the same. CPU-device streams are not
 * watched (--cpu-kernel-timeout stops their kernels in the runner).
 *
 * Thread safety: watchdog_start/set_timeout on the loop thread;
 * watch_add/watch_remove on a stream's executor; watch_launched from any
 * thread.
 */
#ifndef HIPD_OBJECTS_WATCHDOG_H
#define HIPD_OBJECTS_WATCHDOG_H

#include <stdint.h>

struct device;
typedef struct watch watch_t;

/* Called on the watchdog's thread when a stream of device @p dev (its
 * global id) has work queued more than @p timeout_ms ago unfinished. */
typedef void (*watchdog_fired_fn)(int dev, uint32_t timeout_ms);

/* Start watching with limit @p timeout_ms (0: none; the thread still
 * starts, so that a reload can set one). @return 0, or HIPD_ENOMEM /
 * HIPD_EIO if the thread cannot start. */
int watchdog_start(uint32_t timeout_ms, watchdog_fired_fn fired);
/* A new limit (a reload), for the marks queued from then on. */
void watchdog_set_timeout(uint32_t timeout_ms);
/* The limit in force (0: none, or not started). */
uint32_t watchdog_timeout(void);

/* Watch driver stream @p stream of device @p dev, in its current context
 * (a stream of a context since reset is no longer watched); NULL when the
 * watchdog is not running or out of memory (the stream is then not
 * watched). */
watch_t *watch_add(struct device *dev, void *stream);
/* A launch was queued on the watched stream (NULL: a no-op). */
void watch_launched(watch_t *w);
/* Stop watching (before the driver stream is destroyed). NULL: a no-op. */
void watch_remove(watch_t *w);

#endif
