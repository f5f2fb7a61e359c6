/* SPDX-License-Identifier: MIT */
/* daemon/device.c: device enumeration, selection and global ids. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "device.h"
#include "hipd.h"
#include "log.h"
#include "util/cpus.h"

#define MAX_DEVICES 64

static device_t *devices[MAX_DEVICES];
static void (*unrecoverable_fn)(device_t *, void *);
static void *unrecoverable_arg;

void devices_on_unrecoverable(void (*fn)(device_t *dev, void *arg), void *arg)
{
  unrecoverable_fn = fn;
  unrecoverable_arg = arg;
}
static int ndevices;

const char *const *daemon_features(void)
{
  static const char *features[4];

  if (features[0] == NULL) {
    int n = 0;
#ifdef HAVE_HIP
    static char hip[32];
    snprintf(hip, sizeof(hip), "hip-%s", HIPD_HIP_PLATFORM);
    features[n++] = hip;
#endif
    features[n++] = "cpu";
    features[n] = NULL;
  }
  return features;
}

/* Does @p spec select device @p local of driver @p name? */
static int selected(const char *spec, const char *name, int local)
{
  char buf[256], *save = NULL;

  if (spec == NULL || strcmp(spec, "all") == 0)
    return 1;
  snprintf(buf, sizeof(buf), "%s", spec);
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(tok, ':');
    if (colon == NULL) {
      if (strcmp(tok, name) == 0)
        return 1;
    } else {
      *colon = '\0';
      if (strcmp(tok, name) == 0 && atoi(colon + 1) == local)
        return 1;
    }
  }
  return 0;
}

/* Reject words in @p spec that name no compiled-in driver. */
static int check_spec(const char *spec, hipd_err_t *err)
{
  char buf[256], *save = NULL;

  if (spec == NULL || strcmp(spec, "all") == 0)
    return 0;
  if (strlen(spec) >= sizeof(buf)) {
    return err_set(err, HIPD_EINVAL, "--devices: list too long");
  }
  snprintf(buf, sizeof(buf), "%s", spec);
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(tok, ':');
    char *end = NULL;
    int known = 0;
    if (colon != NULL) {
      *colon = '\0';
      long v = strtol(colon + 1, &end, 10);
      if (end == colon + 1 || *end != '\0' || v < 0 || v >= MAX_DEVICES) {
        return err_set(err, HIPD_EINVAL,
                       "--devices: bad device index in '%s:%s'", tok,
                       colon + 1);
      }
    }
    for (driver_t **d = drivers_compiled(); *d != NULL; d++)
      known |= strcmp((*d)->name, tok) == 0;
    if (!known) {
      return err_set(err, HIPD_EINVAL,
                     "--devices: no driver '%s' in this build", tok);
    }
  }
  return 0;
}

int device_bind(void *arg)
{
  device_t *dev = arg;

  return dev->drv->bind_thread(dev->drv, dev->local);
}

static unsigned stream_threads_set; /* 0: the default */

void devices_set_stream_threads(unsigned n)
{
  stream_threads_set = n;
}

/* --stream-threads, or the CPUs this process may run on, 4 to 32: the
 * streams' waits for the device each hold a thread, and a core's worth
 * of them keeps as many kernels in flight as the host can launch. */
static unsigned stream_threads(void)
{
  unsigned n = util_cpus();

  if (stream_threads_set != 0)
    return stream_threads_set;
  return n < 4 ? 4 : n > 32 ? 32 : n;
}

int devices_init(const char *spec, hipd_err_t *err)
{
  int rc;

  err_clear(err);
  if ((rc = check_spec(spec, err)) != 0)
    return rc;
  for (driver_t **dp = drivers_compiled(); *dp != NULL; dp++) {
    driver_t *drv = *dp;
    int count = 0;

    rc = drv->init(drv, &count);
    if (rc != 0) {
      log_warn(0, "driver %s unavailable: %s", drv->name, drv_last_error());
      continue;
    }
    log_info(0, "driver %s (%s): %d device%s", drv->name, drv->platform, count,
             count == 1 ? "" : "s");
    for (int i = 0; i < count && ndevices < MAX_DEVICES; i++) {
      device_t *dev;
      char tname[32];

      if (!selected(spec, drv->name, i))
        continue;
      dev = calloc(1, sizeof(*dev));
      if (dev == NULL)
        return err->code = HIPD_ENOMEM; /* no message */
      dev->drv = drv;
      dev->local = i;
      dev->id = ndevices;
      rc = drv->get_caps(drv, i, &dev->caps);
      if (rc != 0) {
        log_warn(0, "%s:%d skipped: %s", drv->name, i, drv_last_error());
        free(dev);
        continue;
      }
      snprintf(tname, sizeof(tname), "hipd-svc%d", dev->id);
      dev->service = exec_create(tname, device_bind, dev);
      snprintf(tname, sizeof(tname), "hipd-st%d", dev->id);
      if (dev->service != NULL)
        dev->streams =
            exec_pool_create(tname, stream_threads(), device_bind, dev);
      if (dev->streams == NULL) {
        if (dev->service != NULL)
          exec_destroy(dev->service);
        free(dev);
        return err_set(err, HIPD_ENOMEM, "cannot start a worker thread");
      }
      devices[ndevices++] = dev;
      log_info(0, "device %d: %s:%d %s (%s, %llu MiB)", dev->id, drv->name, i,
               dev->caps.name, dev->caps.arch,
               (unsigned long long)(dev->caps.total_global_mem >> 20));
    }
  }
  if (ndevices == 0) {
    return err_set(err, HIPD_ENODEV, "no devices to serve%s%s",
                   spec ? " with --devices " : "", spec ? spec : "");
  }
  return 0;
}

uint32_t device_epoch(const device_t *dev)
{
  return __atomic_load_n(&dev->epoch, __ATOMIC_ACQUIRE);
}

int device_alive(const device_t *dev, uint32_t epoch)
{
  return !dev->lost && device_epoch(dev) == epoch;
}

typedef struct {
  task_t t;
  device_t *dev;
} reset_task_t;

/* After a reset the device may answer "busy" while it cleans up the
 * faulted context: probe it with a small allocation for a while. */
static int probe_device(device_t *dev)
{
  drv_mem_t m;
  int rc = HIPD_EDEVICE;
  for (int i = 0; i < 50; i++) {
    rc = dev->drv->mem_alloc(dev->drv, dev->local, 256, &m);
    if (rc == 0) {
      dev->drv->mem_free(dev->drv, dev->local, &m);
      return 0;
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return rc;
}

static void reset_run(task_t *t)
{
  device_t *dev = ((reset_task_t *)t)->dev;
  int rc = dev->drv->device_reset(dev->drv, dev->local);

  if (rc == 0)
    rc = probe_device(dev);

  /* Whatever the reset said, the old objects are gone: a new generation
   * starts here, before any later task on this worker runs. */
  __atomic_add_fetch(&dev->epoch, 1, __ATOMIC_RELEASE);
  if (rc != 0)
    task_fail(t, rc, "%s", drv_last_error());
}

static void reset_done(task_t *t)
{
  device_t *dev = ((reset_task_t *)t)->dev;
  if (t->err.code != 0) {
    /* CUDA documents a sticky fault as unrecoverable within the process:
     * the device stays lost (its calls fail with EDEVLOST) until hipd is
     * restarted. Other devices are unaffected. */
    log_emit(HLOG_ERROR, &(log_ctx_t){.uid = -1, .device = dev->id},
             "device %d could not be recovered in this process (%s): it "
             "stays unavailable until hipd restarts",
             dev->id, t->err.msg);
    dev->unrecoverable = 1;
    if (unrecoverable_fn != NULL)
      unrecoverable_fn(dev, unrecoverable_arg);
  } else {
    dev->lost = 0;
  }
  if (t->err.code == 0)
    log_emit(HLOG_INFO, &(log_ctx_t){.uid = -1, .device = dev->id},
             "device %d: context reset; new objects work again", dev->id);
  free(t);
}

void device_mark_lost(device_t *dev, const char *why)
{
  reset_task_t *t;

  if (dev->lost || dev->drv->device_reset == NULL)
    return;
  dev->lost = 1;
  log_emit(HLOG_ERROR, &(log_ctx_t){.uid = -1, .device = dev->id},
           "device %d lost its context (%s): its objects are now invalid; "
           "resetting it",
           dev->id, why);
  t = task_new(sizeof(*t), reset_run, reset_done);
  if (t == NULL) {
    dev->lost = 0;
    return;
  }
  t->dev = dev;
  exec_submit(dev->service, &t->t);
}

/* ---------------------------------------------------- completion words */

struct dev_words {
  uint32_t *host; /* DEVICE_WORDS words, page-aligned */
  char *dev;      /* the device's address of host[0]; NULL: unregistered */
  uint32_t epoch; /* the context the registration belongs to */
  unsigned nfree;
  uint16_t free[DEVICE_WORDS]; /* a stack of free words */
  uint32_t seq[DEVICE_WORDS];  /* each word's last value marked */
};

#define WORDS_BYTES (DEVICE_WORDS * sizeof(uint32_t))

static int words_off(device_t *dev, const char *why)
{
  dev->words_off = 1;
  log_info(0,
           "device %d: launches are seen to end by asking the driver, not "
           "by a word the device writes (%s)",
           dev->id, why);
  return -1;
}

/* Words registered in the device's current context: the first time, and
 * again after a reset (a new context forgot the registration). */
static int words_ready(device_t *dev)
{
  struct dev_words *w = dev->words;
  driver_t *drv = dev->drv;
  uint32_t epoch = device_epoch(dev);
  drv_mem_t mem;

  if (dev->words_off)
    return -1;
  if (w != NULL && w->dev != NULL && w->epoch == epoch)
    return 0;
  if (dev->caps.is_cpu || drv->stream_mark == NULL ||
      drv->host_register == NULL || drv->host_map == NULL)
    return words_off(dev, "the driver writes none");
  if (w == NULL) {
    /* Shared: a fork (the CPU launcher, MPS) never copies the page away
     * from the one the device writes. */
    void *host = mmap(NULL, WORDS_BYTES, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (host == MAP_FAILED)
      return -1; /* no memory now: tried again next time */
    if ((w = calloc(1, sizeof(*w))) == NULL) {
      munmap(host, WORDS_BYTES);
      return -1;
    }
    w->host = host;
    for (unsigned i = 0; i < DEVICE_WORDS; i++)
      w->free[i] = (uint16_t)(DEVICE_WORDS - 1 - i);
    w->nfree = DEVICE_WORDS;
    dev->words = w;
  }
  w->dev = NULL;
  if (drv->host_register(drv, w->host, WORDS_BYTES) != 0 ||
      drv->host_map(drv, dev->local, w->host, WORDS_BYTES, -1, &mem) != 0)
    return words_off(dev, drv_last_error());
  w->dev = mem.ptr;
  w->epoch = epoch;
  return 0;
}

int device_word_get(device_t *dev)
{
  struct dev_words *w;

  if (words_ready(dev) != 0 || (w = dev->words)->nfree == 0)
    return -1;
  return w->free[--w->nfree];
}

void device_word_put(device_t *dev, int word)
{
  struct dev_words *w = dev->words;

  if (w != NULL && word >= 0 && word < DEVICE_WORDS)
    w->free[w->nfree++] = (uint16_t)word;
}

int device_word_mark(device_t *dev, void *stream, int word)
{
  struct dev_words *w = dev->words;
  int rc;

  if (words_ready(dev) != 0) {
    drv_set_error("device %d writes no completion words", dev->id);
    return HIPD_ENOTSUP;
  }
  /* Moved on even if the mark fails: no value is ever waited for twice. */
  w->seq[word] = w->seq[word] % 0x7ffffffeu + 1;
  rc = dev->drv->stream_mark(
      dev->drv, stream, w->dev + (size_t)word * sizeof(uint32_t), w->seq[word]);
  if (rc == HIPD_ENOTSUP)
    words_off(dev, drv_last_error());
  return rc;
}

int device_word_reached(const device_t *dev, int word)
{
  const struct dev_words *w = dev->words;

  return __atomic_load_n(&w->host[word], __ATOMIC_ACQUIRE) == w->seq[word];
}

static void words_free(device_t *dev)
{
  struct dev_words *w = dev->words;

  if (w == NULL)
    return;
  if (w->dev != NULL && w->epoch == device_epoch(dev))
    dev->drv->host_unregister(dev->drv, w->host);
  munmap(w->host, WORDS_BYTES);
  free(w);
  dev->words = NULL;
}

void devices_shutdown(void)
{
  for (int i = 0; i < ndevices; i++) {
    /* Busy: a stream's task stuck in the driver past the shutdown time;
     * its threads end with the process. */
    if (exec_pool_destroy(devices[i]->streams) != 0)
      log_warn(0, "device %d: a stream's work still runs at exit", i);
    exec_destroy(devices[i]->service);
    words_free(devices[i]);
    free(devices[i]);
    devices[i] = NULL;
  }
  ndevices = 0;
  for (driver_t **dp = drivers_compiled(); *dp != NULL; dp++)
    (*dp)->shutdown(*dp);
}

int devices_count(void)
{
  return ndevices;
}

device_t *device_get(int id)
{
  return id >= 0 && id < ndevices ? devices[id] : NULL;
}
