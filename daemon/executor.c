/* SPDX-License-Identifier: MIT */
/* daemon/executor.c: serial task queues on worker threads, and the uv_async
 * bridge that runs completions on the loop thread. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"
#include "log.h"
#include "spin.h"
#include "util/clock.h"

struct executor {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  task_t *head, *tail; /* queued, not yet started */
  uint32_t pending;    /* queued + running; read on the loop thread */
  int stopping;        /* no more tasks after the queue drains */
  int (*bind)(void *);
  void *bind_arg;
  char name[32];
  void (*on_gone)(void *);
  void *gone_arg;
  task_t retire_task; /* posted to the loop when the thread has ended */
};

/* ---------------------------------------------------------------- bridge */

static uint32_t outstanding; /* loop thread only */

uint32_t exec_outstanding(void)
{
  return outstanding;
}

static struct {
  uv_async_t async;
  uv_idle_t idle;            /* runs the loop's own completions */
  task_t *local, *local_end; /* completed on the loop thread itself */
  pthread_mutex_t mu;
  task_t *head, *tail; /* (mu) */
  int ready;           /* (mu) */
  int watched;         /* (mu) the loop looks at head itself: no wake-up */
  atomic_int queued;   /* head != NULL, for exec_bridge_pending() */
} bridge = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The tasks the loop thread completed itself (task_complete_here), in
 * order; a done() may add more. Loop thread. */
static void local_run(void)
{
  while (bridge.local != NULL) {
    task_t *t = bridge.local;

    bridge.local = t->next;
    if (bridge.local == NULL)
      bridge.local_end = NULL;
    t->next = NULL;
    outstanding--;
    t->done(t);
  }
  uv_idle_stop(&bridge.idle);
}

static void local_idle_cb(uv_idle_t *h)
{
  (void)h;
  local_run();
}

static void bridge_cb(uv_async_t *a)
{
  task_t *list;

  (void)a;
  local_run();
  pthread_mutex_lock(&bridge.mu);
  list = bridge.head;
  bridge.head = bridge.tail = NULL;
  atomic_store_explicit(&bridge.queued, 0, memory_order_relaxed);
  pthread_mutex_unlock(&bridge.mu);
  while (list != NULL) {
    task_t *t = list;
    list = t->next;
    t->next = NULL;
    outstanding--;
    t->done(t);
  }
}

int exec_bridge_watch(int on)
{
  int waiting;

  pthread_mutex_lock(&bridge.mu);
  bridge.watched = on;
  waiting = bridge.head != NULL;
  pthread_mutex_unlock(&bridge.mu);
  return waiting;
}

int exec_bridge_pending(void)
{
  return bridge.local != NULL ||
         atomic_load_explicit(&bridge.queued, memory_order_acquire);
}

void exec_bridge_run(void)
{
  if (exec_bridge_pending())
    bridge_cb(NULL);
}

int exec_bridge_init(uv_loop_t *loop)
{
  int rc = uv_async_init(loop, &bridge.async, bridge_cb);

  if (rc == 0 && (rc = uv_idle_init(loop, &bridge.idle)) != 0)
    uv_close((uv_handle_t *)&bridge.async, NULL);
  if (rc == 0)
    bridge.ready = 1;
  return rc;
}

/* After this, completions are dropped: a worker still busy when the daemon
 * exits without waiting for it must not wake a loop that is closing or
 * closed (uv_async_send would write to the loop's closed wakeup fd and
 * abort()). */
void exec_bridge_close(void)
{
  int was_ready;

  pthread_mutex_lock(&bridge.mu);
  was_ready = bridge.ready;
  bridge.ready = 0;
  pthread_mutex_unlock(&bridge.mu);
  if (was_ready) {
    uv_close((uv_handle_t *)&bridge.async, NULL);
    uv_close((uv_handle_t *)&bridge.idle, NULL);
  }
}

void task_expect(task_t *t)
{
  (void)t;
  outstanding++;
}

void task_complete(task_t *t)
{
  t->next = NULL;
  pthread_mutex_lock(&bridge.mu);
  if (!bridge.ready) {
    /* The daemon is exiting without waiting for this task. */
    pthread_mutex_unlock(&bridge.mu);
    return;
  }
  if (bridge.tail)
    bridge.tail->next = t;
  else
    bridge.head = t;
  bridge.tail = t;
  atomic_store_explicit(&bridge.queued, 1, memory_order_release);
  /* Under the lock, so that exec_bridge_close() cannot close the handle
   * between the check above and the wake-up, and so that a loop that
   * stops watching (exec_bridge_watch(0)) sees this task or was woken. */
  if (!bridge.watched)
    uv_async_send(&bridge.async);
  pthread_mutex_unlock(&bridge.mu);
}

void task_complete_here(task_t *t)
{
  t->next = NULL;
  if (bridge.local_end != NULL)
    bridge.local_end->next = t;
  else
    bridge.local = t;
  bridge.local_end = t;
  /* An active idle handle keeps the loop from blocking until it ran. */
  if (bridge.ready)
    uv_idle_start(&bridge.idle, local_idle_cb);
}

task_t *task_init(task_t *t, void (*run)(task_t *), void (*done)(task_t *))
{
  memset(t, 0, sizeof(*t));
  t->run = run;
  t->done = done;
  return t;
}

void *task_new(size_t size, void (*run)(task_t *), void (*done)(task_t *))
{
  task_t *t = size >= sizeof(*t) ? calloc(1, size) : NULL;

  if (t != NULL) {
    t->run = run;
    t->done = done;
  }
  return t;
}

void task_fail(task_t *t, int status, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  err_setv(&t->err, status, fmt, ap);
  va_end(ap);
}

/* -------------------------------------------------------------- executors */

/* How long a worker polls its queue before it sleeps; each poll takes a
 * place of the spin budget (spin.h), so polling is bounded by the cores
 * across hipd's processes, not per thread. */
static uint64_t busy_poll_ns;

void exec_set_busy_poll(uint32_t us)
{
  busy_poll_ns = (uint64_t)us * 1000;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Wait up to busy_poll_ns for work without sleeping (lock not held). The
 * queue head is read without the lock as a hint; the caller rechecks it
 * under the lock. */
static void spin_for_work(executor_t *ex)
{
  uint64_t until = util_now_ns() + busy_poll_ns;

  while (__atomic_load_n(&ex->head, __ATOMIC_ACQUIRE) == NULL &&
         !__atomic_load_n(&ex->stopping, __ATOMIC_RELAXED)) {
    for (int i = 0; i < 64; i++)
      cpu_relax();
    if (util_now_ns() >= until)
      break;
  }
}

static void *worker_main(void *arg)
{
  executor_t *ex = arg;
  int bound;

  /* By the thread itself: prctl(PR_SET_NAME), which the sandboxed
   * worker's filter allows; another thread's name is a file write in
   * /proc, which Landlock refuses. */
  pthread_setname_np(pthread_self(), ex->name);
  bound = ex->bind ? ex->bind(ex->bind_arg) : 0;
  if (bound != 0)
    log_error(0, "executor %s: cannot bind its device (%d)", ex->name, bound);
  for (;;) {
    task_t *t;

    if (busy_poll_ns != 0 &&
        __atomic_load_n(&ex->head, __ATOMIC_ACQUIRE) == NULL && spin_enter()) {
      spin_for_work(ex);
      spin_leave();
    }
    pthread_mutex_lock(&ex->mu);
    while (ex->head == NULL && !ex->stopping)
      pthread_cond_wait(&ex->cv, &ex->mu);
    t = ex->head;
    if (t == NULL) {
      pthread_mutex_unlock(&ex->mu);
      break;
    }
    ex->head = t->next;
    if (ex->head == NULL)
      ex->tail = NULL;
    pthread_mutex_unlock(&ex->mu);

    t->next = NULL;
    t->hold = 0;
    if (bound != 0)
      task_fail(t, bound, "the device could not be bound to its worker");
    else
      t->run(t);
    __atomic_sub_fetch(&ex->pending, 1, __ATOMIC_RELEASE);
    if (!t->hold)
      task_complete(t);
  }
  if (ex->on_gone != NULL)
    task_complete(&ex->retire_task);
  return NULL;
}

static void retire_done(task_t *t)
{
  executor_t *ex =
      (executor_t *)((char *)t - offsetof(executor_t, retire_task));
  void (*fn)(void *) = ex->on_gone;
  void *arg = ex->gone_arg;

  pthread_join(ex->thread, NULL);
  pthread_mutex_destroy(&ex->mu);
  pthread_cond_destroy(&ex->cv);
  free(ex);
  fn(arg);
}

executor_t *exec_create(const char *name, int (*bind)(void *), void *bind_arg)
{
  executor_t *ex = calloc(1, sizeof(*ex));
  pthread_attr_t attr;
  int rc;

  if (ex == NULL)
    return NULL;
  pthread_mutex_init(&ex->mu, NULL);
  pthread_cond_init(&ex->cv, NULL);
  ex->bind = bind;
  ex->bind_arg = bind_arg;
  snprintf(ex->name, sizeof(ex->name), "%s", name);
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 512 * 1024);
  rc = pthread_create(&ex->thread, &attr, worker_main, ex);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    free(ex);
    return NULL;
  }
  return ex;
}

void exec_submit(executor_t *ex, task_t *t)
{
  t->next = NULL;
  err_clear(&t->err);
  outstanding++;
  __atomic_add_fetch(&ex->pending, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&ex->mu);
  if (ex->tail)
    ex->tail->next = t;
  else
    __atomic_store_n(&ex->head, t, __ATOMIC_RELEASE);
  ex->tail = t;
  pthread_cond_signal(&ex->cv);
  pthread_mutex_unlock(&ex->mu);
}

uint32_t exec_pending(const executor_t *ex)
{
  return __atomic_load_n(&ex->pending, __ATOMIC_ACQUIRE);
}

static void exec_stop(executor_t *ex)
{
  pthread_mutex_lock(&ex->mu);
  /* Atomic: spin_for_work() reads it without the lock. */
  __atomic_store_n(&ex->stopping, 1, __ATOMIC_RELAXED);
  pthread_cond_signal(&ex->cv);
  pthread_mutex_unlock(&ex->mu);
}

void exec_destroy(executor_t *ex)
{
  exec_stop(ex);
  pthread_join(ex->thread, NULL);
  pthread_mutex_destroy(&ex->mu);
  pthread_cond_destroy(&ex->cv);
  free(ex);
}

void exec_retire(executor_t *ex, void (*on_gone)(void *arg), void *arg)
{
  ex->on_gone = on_gone;
  ex->gone_arg = arg;
  ex->retire_task.done = retire_done;
  outstanding++;
  exec_stop(ex);
}
