/* SPDX-License-Identifier: MIT */
/* daemon/spin.c: the spin budget shared by a listener and its workers
 * (spin.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hipd.h"
#include "spin.h"
#include "util/cpus.h"

#define SPIN_MAGIC 0x4e495053u /* "SPIN" */
#define TUNE_MS 100
#define SLOT_STRIDE 16 /* uint32_t per slot: a cache line */
#define SLOT(p, i) ((p)->slot[(size_t)(i)*SLOT_STRIDE])

/* The shared page. The listener writes magic, nslots, cap and limit;
 * every process takes and gives back places in taken and in its slot.
 * A worker can write any of it: the listener reads back only what it
 * cannot keep itself (taken, a dead worker's slot), and keeps its own
 * nslots, cap and limit (spin.nslots, spin.cap, spin.limit).
 * taken has a cache line of its own: it is the one written at every spin. */
typedef struct {
  uint32_t magic;
  uint32_t nslots; /* slot[] entries */
  uint32_t cap;    /* --spin-cpus */
  uint32_t limit;  /* places allowed now (spin_budget_tune) */
  char pad0[64 - 4 * sizeof(uint32_t)];
  uint32_t taken;   /* places taken now, host-wide */
  uint32_t entered; /* places ever taken (wraps): has anyone polled? */
  char pad1[64 - 2 * sizeof(uint32_t)];
  /* Places held by each process, one cache line each (SLOT(p, i)); slot
   * 0: the owner. */
  uint32_t slot[];
} spin_page_t;

static struct {
  spin_page_t *page; /* NULL until created, attached or first used */
  size_t size;       /* of the mapping; 0: a private page (calloc) */
  uint32_t mine;     /* this process's slot */
  int fd;            /* the owner's memfd, for its workers; else -1 */
  uint8_t *used;     /* the owner's slots in use */
  uint32_t nslots;   /* the owner's: entries of used[] and of the page */
  uint32_t cap;      /* the owner's: --spin-cpus */
  int shared;
  uv_timer_t timer; /* spin_tune_set */
  int timer_init, timer_on;
  int32_t avg16;         /* other runnable tasks, a moving average x 16 */
  uint32_t entered_seen; /* page->entered at the last sample */
  uint32_t idle_ticks;   /* samples in a row that found nobody polling */
  uint32_t limit;        /* the owner's: the limit it last set */
} spin = {.fd = -1};

static pthread_once_t private_once = PTHREAD_ONCE_INIT;

uint32_t spin_default_cpus(void)
{
  unsigned n = util_cpus();

  return n >= 8 ? (uint32_t)(n / 2) : 1;
}

static size_t page_bytes(uint32_t slots)
{
  size_t n =
      sizeof(spin_page_t) + (size_t)slots * SLOT_STRIDE * sizeof(uint32_t);
  long pg = sysconf(_SC_PAGESIZE);

  return (n + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
}

/* A process that was given no budget counts its own places. */
static void private_init(void)
{
  spin_page_t *p;

  if (spin.page != NULL)
    return;
  p = calloc(1, sizeof(*p) + SLOT_STRIDE * sizeof(uint32_t));
  if (p == NULL)
    return; /* spin_enter() refuses: no spinning without a count */
  p->magic = SPIN_MAGIC;
  p->nslots = 1;
  p->cap = p->limit = spin_default_cpus();
  __atomic_store_n(&spin.page, p, __ATOMIC_RELEASE);
}

static spin_page_t *page_get(void)
{
  spin_page_t *p = __atomic_load_n(&spin.page, __ATOMIC_ACQUIRE);

  if (p != NULL)
    return p;
  pthread_once(&private_once, private_init);
  return __atomic_load_n(&spin.page, __ATOMIC_ACQUIRE);
}

int spin_budget_create(uint32_t cap, uint32_t slots, hipd_err_t *err)
{
  size_t size;
  spin_page_t *p;
  int fd;

  if (slots < 1)
    slots = 1;
  size = page_bytes(slots);
  fd = memfd_create("hipd-spin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return err_set(err, HIPD_ENOMEM, "spin budget: memfd_create: %s",
                   strerror(errno));
  if (ftruncate(fd, (off_t)size) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int e = errno;
    close(fd);
    return err_set(err, HIPD_ENOMEM, "spin budget: %s", strerror(e));
  }
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return err_set(err, HIPD_ENOMEM, "spin budget: mmap: %s", strerror(e));
  }
  spin.used = calloc(slots, 1);
  if (spin.used == NULL) {
    munmap(p, size);
    close(fd);
    return err_set(err, HIPD_ENOMEM, "spin budget: out of memory");
  }
  p->nslots = slots;
  p->cap = p->limit = cap;
  p->magic = SPIN_MAGIC;
  spin.limit = cap;
  spin.used[0] = 1;
  spin.nslots = slots;
  spin.cap = cap;
  spin.mine = 0;
  spin.fd = fd;
  spin.size = size;
  spin.shared = 1;
  __atomic_store_n(&spin.page, p, __ATOMIC_RELEASE);
  return 0;
}

int spin_budget_fd(void)
{
  return spin.fd;
}

/* No places: a process that must not spin uncounted. */
static spin_page_t none = {.magic = SPIN_MAGIC, .nslots = 0};

void spin_budget_disable(void)
{
  if (spin.page == NULL)
    spin.page = &none;
}

int spin_budget_attach(int fd, uint32_t slot, hipd_err_t *err)
{
  struct stat st;
  spin_page_t *p = MAP_FAILED;
  int rc = 0;

  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(spin_page_t)) {
    rc = err_set(err, HIPD_EINVAL, "spin budget: fd %d is not the budget", fd);
    goto out;
  }
  p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    rc = err_set(err, HIPD_ENOMEM, "spin budget: mmap: %s", strerror(errno));
    goto out;
  }
  if (p->magic != SPIN_MAGIC || slot >= p->nslots ||
      page_bytes(p->nslots) > (size_t)st.st_size) {
    munmap(p, (size_t)st.st_size);
    rc = err_set(err, HIPD_EINVAL, "spin budget: slot %u is not in it", slot);
    goto out;
  }
  spin.mine = slot;
  spin.size = (size_t)st.st_size;
  spin.shared = 1;
  __atomic_store_n(&spin.page, p, __ATOMIC_RELEASE);
out:
  close(fd);
  if (rc != 0)
    spin_budget_disable();
  return rc;
}

int spin_slot_take(void)
{
  spin_page_t *p = spin.page;

  if (spin.used == NULL || p == NULL)
    return -1;
  for (uint32_t i = 1; i < spin.nslots; i++)
    if (!spin.used[i]) {
      spin.used[i] = 1;
      __atomic_store_n(&SLOT(p, i), 0, __ATOMIC_RELAXED);
      return (int)i;
    }
  return -1;
}

void spin_slot_release(int slot)
{
  spin_page_t *p = spin.page;
  uint32_t held, t;

  if (spin.used == NULL || p == NULL || slot <= 0 ||
      (uint32_t)slot >= spin.nslots || !spin.used[slot])
    return;
  /* The worker is gone: its slot no longer changes. What it says it held
   * is not trusted beyond what is taken. */
  held = __atomic_exchange_n(&SLOT(p, slot), 0, __ATOMIC_ACQ_REL);
  t = __atomic_load_n(&p->taken, __ATOMIC_ACQUIRE);
  while (held > 0 &&
         !__atomic_compare_exchange_n(&p->taken, &t, t > held ? t - held : 0, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
  spin.used[slot] = 0;
}

static uint64_t work_noted; /* loop thread only */

void spin_note_work(void)
{
  work_noted++;
}

uint64_t spin_work_count(void)
{
  return work_noted;
}

int spin_enter(void)
{
  spin_page_t *p = page_get();
  uint32_t t, lim;

  if (p == NULL || p->nslots == 0)
    return 0;
  lim = __atomic_load_n(&p->limit, __ATOMIC_RELAXED);
  t = __atomic_load_n(&p->taken, __ATOMIC_RELAXED);
  if (t >= lim)
    return 0; /* the common refusal touches nothing */
  /* The slot first: a process killed between the two steps leaves its
   * slot counting a place that taken does not, which the release clamps
   * (one spinner too many for a while, never a place lost for good). */
  __atomic_add_fetch(&SLOT(p, spin.mine), 1, __ATOMIC_RELAXED);
  do {
    if (t >= lim) {
      __atomic_sub_fetch(&SLOT(p, spin.mine), 1, __ATOMIC_RELAXED);
      return 0;
    }
  } while (!__atomic_compare_exchange_n(&p->taken, &t, t + 1, 1,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
  /* The same cache line as taken, which this spin wrote already. */
  __atomic_add_fetch(&p->entered, 1, __ATOMIC_RELAXED);
  return 1;
}

void spin_leave(void)
{
  spin_page_t *p = spin.page;

  __atomic_sub_fetch(&SLOT(p, spin.mine), 1, __ATOMIC_RELAXED);
  __atomic_sub_fetch(&p->taken, 1, __ATOMIC_RELEASE);
}

/* The host's runnable tasks now (/proc/loadavg's 4th field), -1 if not
 * known. */
static int runnable_now(void)
{
  char buf[128];
  unsigned running = 0, total = 0;
  ssize_t n;
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return -1;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  if (sscanf(buf, "%*f %*f %*f %u/%u", &running, &total) != 2)
    return -1;
  return (int)running;
}

void spin_budget_sample(int runnable, long online, int smooth)
{
  spin_page_t *p = spin.page;
  uint32_t taken, others, limit;
  int32_t d;
  long free;

  if (p == NULL || spin.used == NULL || runnable < 0 || online <= 0)
    return;
  taken = __atomic_load_n(&p->taken, __ATOMIC_RELAXED);
  /* The runnable tasks that are not spinning, this thread excepted. */
  others = (uint32_t)runnable > taken + 1 ? (uint32_t)runnable - taken - 1 : 0;
  /* Smoothed over about 4 samples: one sample sees an instant. A step
   * too small to move the average by a quarter takes it all the way: the
   * average of an idle host comes back to 0, not to 3/16 of a task, which
   * would keep one place from the budget for good. */
  d = (int32_t)others * 16 - spin.avg16;
  spin.avg16 = smooth && d / 4 != 0 ? spin.avg16 + d / 4 : (int32_t)others * 16;
  free = online - (long)((spin.avg16 + 15) / 16);
  limit = free <= 0 ? 0 : (uint32_t)free < spin.cap ? (uint32_t)free : spin.cap;
  spin.limit = limit;
  __atomic_store_n(&p->limit, limit, __ATOMIC_RELAXED);
}

void spin_budget_tune(void)
{
  spin_budget_sample(runnable_now(), sysconf(_SC_NPROCESSORS_ONLN), 1);
}

/* Has someone polled since the last sample, or polls now? *@p entered:
 * the page's count of entries. */
static int polled_since(const spin_page_t *p, uint32_t *entered)
{
  *entered = __atomic_load_n(&p->entered, __ATOMIC_RELAXED);
  return *entered != spin.entered_seen ||
         __atomic_load_n(&p->taken, __ATOMIC_RELAXED) != 0;
}

static void tune_cb(uv_timer_t *t)
{
  uint32_t entered;

  (void)t;
  /* Nobody polled since the last sample, and nobody polls now: the host's
   * load matters to no one, and idle sessions cost the listener nothing
   * but this look (reading /proc is most of a sample's cost). The limit
   * stays as it was until the next sample after polling resumes. */
  if (!polled_since(spin.page, &entered)) {
    /* A second of that: the timer stops, and the housekeeping timer's
     * call of spin_tune_set() looks once a second, until polling resumes
     * (whose first second then runs on the limit of the last sample): a
     * timer of its own woke the idle listener a second time each second
     * (test_idle_sleeps, on an H100). */
    if (++spin.idle_ticks == 1000 / TUNE_MS)
      uv_timer_stop(&spin.timer);
    return;
  }
  spin.idle_ticks = 0;
  spin.entered_seen = entered;
  spin_budget_tune();
}

void spin_tune_set(uv_loop_t *loop, int on)
{
  spin_page_t *p = spin.page;
  uint32_t entered;

  if (spin.used == NULL || p == NULL)
    return;
  if (on == spin.timer_on) {
    /* Stopped while nobody polls (tune_cb): started again once someone
     * does. */
    if (!on || uv_is_active((uv_handle_t *)&spin.timer))
      return;
    if (polled_since(p, &entered)) {
      spin.idle_ticks = 0;
      uv_timer_start(&spin.timer, tune_cb, 0, TUNE_MS);
    } else if (spin.limit < spin.cap) {
      /* Nobody polls, perhaps because the host was full when the timer
       * stopped: at 0 places nobody can poll, and nobody would ever start
       * the timer again. One look a second, taken as it is (a second is
       * longer than the smoothing's window), gives the places back once
       * the host has CPUs free again, without a wake of its own. */
      spin_budget_sample(runnable_now(), sysconf(_SC_NPROCESSORS_ONLN), 0);
    }
    return;
  }
  if (!spin.timer_init) {
    if (uv_timer_init(loop, &spin.timer) != 0)
      return;
    uv_unref((uv_handle_t *)&spin.timer);
    spin.timer_init = 1;
  }
  spin.timer_on = on;
  if (on) {
    spin.idle_ticks = 0;
    uv_timer_start(&spin.timer, tune_cb, 0, TUNE_MS);
    return;
  }
  uv_timer_stop(&spin.timer);
  spin.avg16 = 0;
  spin.limit = spin.cap;
  __atomic_store_n(&p->limit, spin.cap, __ATOMIC_RELAXED);
}

void spin_tune_close(void)
{
  if (spin.timer_init && !uv_is_closing((uv_handle_t *)&spin.timer))
    uv_close((uv_handle_t *)&spin.timer, NULL);
  spin.timer_on = 0;
}

void spin_get_stats(spin_stats_t *out)
{
  spin_page_t *p = page_get();

  memset(out, 0, sizeof(*out));
  if (p == NULL)
    return;
  out->cap = spin.used != NULL ? spin.cap : p->cap; /* the owner's own */
  out->limit = __atomic_load_n(&p->limit, __ATOMIC_RELAXED);
  out->taken = __atomic_load_n(&p->taken, __ATOMIC_RELAXED);
  out->mine = p->nslots > 0
                  ? __atomic_load_n(&SLOT(p, spin.mine), __ATOMIC_RELAXED)
                  : 0;
  out->shared = spin.shared;
}
