/* SPDX-License-Identifier: MIT */
/* daemon/device.h: the devices hipd serves, with global ids.
 *
 * At start every device of every compiled-in driver is enumerated (HIP
 * devices first, then the CPU device) and, after --devices filtering,
 * numbered from 0. Each device has a service executor for blocking
 * housekeeping (allocation, frees, creating streams and events).
 */
#ifndef HIPD_DEVICE_H
#define HIPD_DEVICE_H

#include <stdint.h>

#include "drivers/driver.h"
#include "executor.h"
#include "util/err.h"

typedef struct device {
  int id; /* global id */
  driver_t *drv;
  int local; /* index within the driver */
  dev_caps_t caps;
  executor_t *service;     /* blocking housekeeping for this device */
  exec_pool_t *streams;    /* the threads its streams' work runs on */
  uint64_t allocated;      /* bytes hipd holds on it (loop thread) */
  uint32_t buffers;        /* live allocations (loop thread) */
  uint32_t epoch;          /* context generation; objects made in an older one
                              are dead (atomic: workers read it) */
  int lost;                /* the context is lost; a reset is under way */
  int unrecoverable;       /* the reset failed: lost until hipd restarts */
  struct dev_words *words; /* completion words, once used (loop thread) */
  int words_off;           /* the device has none (loop thread) */
} device_t;

/* Enumerate and select devices. @p spec is NULL or "all", or a comma list
 * of "hip", "cpu", "hip:N", "cpu:N" (N: the driver's own index).
 * @return 0 or a negative code, which @p err also holds, with a message
 * (none for HIPD_ENOMEM). A driver or device that cannot be used is logged
 * (with its drv_last_error()) and skipped. */
int devices_init(const char *spec, hipd_err_t *err);
/* Threads of each device's stream pool (--stream-threads; 0: the
 * default, the CPUs this process may run on, 4 to 32). Before
 * devices_init(). */
void devices_set_stream_threads(unsigned n);
/* Stop the service executors and the stream pools (blocking; at exit). */
void devices_shutdown(void);
int devices_count(void);
/* The device with global id @p id, or NULL. */
device_t *device_get(int id);

/* Bind the calling worker thread to device @p dev (a device_t *): the
 * executor bind hook. */
int device_bind(void *dev);

/* The device's context generation (any thread). */
uint32_t device_epoch(const device_t *dev);
/* Is an object made in context generation @p epoch still usable? */
int device_alive(const device_t *dev, uint32_t epoch);
/* A driver call on @p dev failed with HIPD_EDEVLOST: fail every object of
 * the lost context from now on, and reset the device on its service worker
 * so that new objects work again. Loop thread; idempotent while lost. */
void device_mark_lost(device_t *dev, const char *why);
/* Called (loop thread) when a lost device cannot be reset in this process:
 * the daemon then restarts itself to get a fresh runtime. */
void devices_on_unrecoverable(void (*fn)(device_t *dev, void *arg), void *arg);

/*
 * Completion words: 32-bit words of page-locked host memory that the
 * device writes when a stream reaches them (driver.h's stream_mark), so
 * that the loop sees a launch end by reading memory, not by asking the
 * driver (submit.c). A device has DEVICE_WORDS of them; loop thread only,
 * on a thread bound to the device.
 */
#define DEVICE_WORDS 4096
/* A free word, or -1 when none is left or the device has none (a driver
 * without stream_mark, the CPU device, or registering the memory failed:
 * then it is off for good and logged once). */
int device_word_get(device_t *dev);
void device_word_put(device_t *dev, int word);
/* Enqueue on driver stream @p stream a write to word @p word of the
 * word's next value (1 to 2^31 - 2, round again; a word's values go on
 * from owner to owner, so that a previous owner's late write never equals
 * one the next owner waits for). 0 or a negative code (drv_last_error());
 * HIPD_ENOTSUP (the driver cannot) turns the device's words off. */
int device_word_mark(device_t *dev, void *stream, int word);
/* Has the device written word @p word's last value marked? */
int device_word_reached(const device_t *dev, int word);

/* "cpu", "hip-amd", "hip-nvidia": the compiled-in drivers, NULL-ended. */
const char *const *daemon_features(void);

#endif
