/* SPDX-License-Identifier: MIT */
/* daemon/executor.c: serial task queues served by bounded pools of
 * threads, and the uv_async bridge that runs completions on the loop
 * thread. */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"
#include "hipd.h"
#include "log.h"
#include "spin.h"
#include "util/clock.h"
#include "util/cpus.h"
#include "util/futex.h"

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
  atomic_int waking;   /* threads in uv_async_send() outside mu */
  task_t *abandoned;   /* (mu) completed after exec_bridge_close() */
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

/* After this, completions are set aside, never run (task_complete): a
 * worker still busy when the daemon exits without waiting for it must not
 * wake a loop that is closing or closed (uv_async_send would write to the
 * loop's closed wakeup fd and abort()). */
void exec_bridge_close(void)
{
  int was_ready;

  pthread_mutex_lock(&bridge.mu);
  was_ready = bridge.ready;
  bridge.ready = 0;
  pthread_mutex_unlock(&bridge.mu);
  /* A thread that queued before ready went 0 may still be in its
   * uv_async_send() (task_complete): one write, then it is done. */
  for (unsigned spins = 0;
       atomic_load_explicit(&bridge.waking, memory_order_acquire) != 0;
       spins++) {
    if (spins % 1024 == 1023)
      sched_yield(); /* the sender may have lost its CPU */
    else
      util_cpu_relax();
  }
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
  int wake;

  t->next = NULL;
  pthread_mutex_lock(&bridge.mu);
  if (!bridge.ready) {
    /* The daemon is exiting without waiting for this task: its done()
     * never runs, and what it would have freed goes with the process.
     * It stays linked here, not dropped: a buffer freed by a forced
     * shutdown's session teardown has its free task embedded in it, and
     * dropping the task would leave nothing pointing at the buffer
     * (LeakSanitizer's report in CI, 2026-12-06). */
    t->next = bridge.abandoned;
    bridge.abandoned = t;
    pthread_mutex_unlock(&bridge.mu);
    return;
  }
  if (bridge.tail)
    bridge.tail->next = t;
  else
    bridge.head = t;
  bridge.tail = t;
  atomic_store_explicit(&bridge.queued, 1, memory_order_release);
  /* Decided under the lock, so that a loop that stops watching
   * (exec_bridge_watch(0)) sees this task or is woken, and counted in
   * waking under it, so that exec_bridge_close() cannot close the handle
   * before the wake-up below. An early answer (executor.h) goes out
   * first, under the lock: its client's wake-up starts before the
   * loop's, and the loop cannot run (and free) the task meanwhile. */
  if (t->early != NULL)
    t->early(t);
  wake = !bridge.watched;
  if (wake)
    atomic_fetch_add_explicit(&bridge.waking, 1, memory_order_relaxed);
  pthread_mutex_unlock(&bridge.mu);
  /* The wake-up outside the lock: a loop woken meanwhile (by the client
   * that an early answer woke) takes the lock at once, where it would
   * sleep on it through this write (a futex wait and wake a kernel, seen
   * on every kernel of a worker that sleeps). exec_bridge_close() waits
   * for it before it closes the handle. */
  if (wake) {
    uv_async_send(&bridge.async);
    atomic_fetch_sub_explicit(&bridge.waking, 1, memory_order_release);
  }
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

/* A thread runs at most this many tasks of one queue before it lets the
 * other queues that wait go first. */
#define BATCH 16
/* A thread beyond a pool's first ends after this long without work, so
 * that a worker's threads come back to their count after a burst. */
#define IDLE_EXIT_NS (2ull * 1000 * 1000 * 1000)

enum { Q_IDLE, Q_READY, Q_RUNNING };

/* The pool of the calling thread, NULL outside one (exec_wait_begin). */
static __thread exec_pool_t *cur_pool;
/* A task left the thread's device binding lost (exec_thread_unbound). */
static __thread int cur_unbound;

struct exec_pool {
  pthread_mutex_t mu;
  uint32_t wake_seq;              /* (mu to change) the futex threads sleep
                                   * on: pool_sleep(), pool_wake() */
  unsigned sleeping;              /* (mu) threads in pool_sleep() */
  executor_t *ready, *ready_tail; /* (mu) queues with work, none running;
                                   * ready is also read as a hint */
  unsigned max;                   /* threads at most */
  unsigned nthreads;              /* (mu) started and not leaving */
  unsigned free;                  /* (mu) of those, running no queue */
  unsigned nready;                /* (mu) queues in the ready list */
  unsigned waiting;               /* (mu) threads in exec_wait_begin/end */
  unsigned queues;                /* (mu) executors not gone yet */
  unsigned live; /* (atomic) threads that may still touch the pool */
  int stopping;  /* (mu, atomic) exit when none ready */
  int owned;     /* made by exec_create for one queue */
  int (*bind)(void *);
  void *bind_arg;
  char name[16];
};

struct executor {
  exec_pool_t *pool;
  task_t *head, *tail;    /* (pool->mu) queued, not yet started */
  executor_t *ready_next; /* (pool->mu) in the pool's ready list */
  int state;              /* (pool->mu) Q_* */
  int stopping;           /* (pool->mu) retire once drained */
  uint32_t pending;       /* queued + running (atomic) */
  void (*on_gone)(void *);
  void *gone_arg;
  task_t retire_task; /* posted to the loop when the queue has drained */
};

/* Wait up to busy_poll_ns for a ready queue without sleeping (lock not
 * held). The list is read without the lock as a hint; the caller rechecks
 * it under the lock. */
static void spin_for_work(exec_pool_t *p)
{
  uint64_t until = util_now_ns() + busy_poll_ns;

  while (__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) == NULL &&
         !__atomic_load_n(&p->stopping, __ATOMIC_RELAXED)) {
    for (int i = 0; i < 64; i++)
      util_cpu_relax();
    if (util_now_ns() >= until)
      break;
  }
}

/* Append @p ex to the ready list. (p->mu) */
static void ready_push(exec_pool_t *p, executor_t *ex)
{
  ex->state = Q_READY;
  ex->ready_next = NULL;
  p->nready++;
  if (p->ready_tail != NULL)
    p->ready_tail->ready_next = ex;
  else
    __atomic_store_n(&p->ready, ex, __ATOMIC_RELEASE);
  p->ready_tail = ex;
}

static executor_t *ready_pop(exec_pool_t *p)
{
  executor_t *ex = p->ready;

  p->nready--;
  __atomic_store_n(&p->ready, ex->ready_next, __ATOMIC_RELEASE);
  if (p->ready == NULL)
    p->ready_tail = NULL;
  ex->ready_next = NULL;
  ex->state = Q_RUNNING;
  return ex;
}

static int pool_bind(exec_pool_t *p)
{
  return p->bind != NULL ? p->bind(p->bind_arg) : 0;
}

/* Run up to BATCH tasks of @p ex, in order, then put it back in the ready
 * list if it has more, or post its retirement if it drained while
 * retiring (after which it is not touched: the loop frees it). Entered
 * and left with p->mu held. */
static void run_queue(exec_pool_t *p, executor_t *ex, int *bound)
{
  int retire = 0;

  for (int n = 0; n < BATCH && ex->head != NULL; n++) {
    task_t *t = ex->head;

    ex->head = t->next;
    if (ex->head == NULL)
      ex->tail = NULL;
    pthread_mutex_unlock(&p->mu);
    t->next = NULL;
    t->hold = 0;
    t->early = NULL;
    if (*bound != 0 || cur_unbound) {
      /* Not bound (the thread's first bind failed, or a task left it on
       * another device): bind again before each task, which fails only
       * while that does, whatever stream it is of. */
      cur_unbound = 0;
      *bound = pool_bind(p);
    }
    if (*bound != 0)
      task_fail(t, *bound, "the device could not be bound to its worker");
    else
      t->run(t);
    __atomic_sub_fetch(&ex->pending, 1, __ATOMIC_RELEASE);
    if (!t->hold)
      task_complete(t);
    pthread_mutex_lock(&p->mu);
  }
  if (ex->head != NULL) {
    ready_push(p, ex);
  } else {
    ex->state = Q_IDLE;
    retire = ex->stopping;
  }
  if (retire) {
    pthread_mutex_unlock(&p->mu);
    task_complete(&ex->retire_task);
    pthread_mutex_lock(&p->mu);
  }
}

/* Sleep until pool_wake(), for @p timeout_ns at most (< 0: no limit);
 * it may return early: the caller looks again. Entered and left with
 * p->mu held. The sequence is read under the lock, and every change a
 * waker makes under it too: one that comes between the unlock and the
 * sleep finds another value there, and the sleep returns at once. */
static void pool_sleep(exec_pool_t *p, int64_t timeout_ns)
{
  uint32_t seq = __atomic_load_n(&p->wake_seq, __ATOMIC_RELAXED);

  p->sleeping++;
  pthread_mutex_unlock(&p->mu);
  util_futex_wait(&p->wake_seq, seq, timeout_ns);
  pthread_mutex_lock(&p->mu);
  p->sleeping--;
}

/* Under p->mu: note that @p n sleeping threads must wake. @return what to
 * pass to pool_wake_now() once the lock is left (0: none sleeps). */
static int pool_wake(exec_pool_t *p, int n)
{
  if (p->sleeping == 0)
    return 0;
  __atomic_store_n(&p->wake_seq, p->wake_seq + 1, __ATOMIC_RELEASE);
  return n;
}

/* After the unlock: a thread woken under the lock would wake only to
 * sleep on it (a futex wait and two wakes more a task, and a second sleep
 * of the woken thread). The pool outlives this: its callers, exec_submit()
 * and pool_stop_wait(), run on the loop thread, which alone frees pools.
 * A thread that finds the queue taken meanwhile sleeps again. */
static void pool_wake_now(exec_pool_t *p, int n)
{
  if (n > 0)
    util_futex_wake(&p->wake_seq, n);
}

/* Sleep until a queue is ready or the pool stops, or for IDLE_EXIT_NS
 * without either while other threads remain. @return 1 if this thread
 * should end for idleness. (p->mu) */
static int wait_for_work(exec_pool_t *p)
{
  while (p->ready == NULL && !p->stopping) {
    uint64_t until = util_now_ns() + IDLE_EXIT_NS, now;

    /* The pool's last thread stays: it sleeps without a timer, so an
     * idle process has no wake-ups of its own. */
    if (p->nthreads <= 1) {
      pool_sleep(p, -1);
      continue;
    }
    while (p->ready == NULL && !p->stopping && (now = util_now_ns()) < until)
      pool_sleep(p, (int64_t)(until - now));
    if (p->ready == NULL && !p->stopping && p->nthreads > 1)
      return 1;
  }
  return 0;
}

static void *pool_main(void *arg)
{
  exec_pool_t *p = arg;
  int bound;

  /* By the thread itself: prctl(PR_SET_NAME), which the sandboxed
   * worker's filter allows; another thread's name is a file write in
   * /proc, which Landlock refuses. */
  pthread_setname_np(pthread_self(), p->name);
  cur_pool = p;
  bound = pool_bind(p);
  if (bound != 0)
    log_error(0, "executor %s: cannot bind its device (%d)", p->name, bound);
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (p->ready == NULL && !p->stopping && busy_poll_ns != 0) {
      pthread_mutex_unlock(&p->mu);
      if (spin_enter()) {
        spin_for_work(p);
        spin_leave();
      }
      pthread_mutex_lock(&p->mu);
    }
    if (wait_for_work(p) || p->ready == NULL)
      break; /* idle for long, or stopping with nothing left to run */
    p->free--;
    run_queue(p, ready_pop(p), &bound);
    p->free++;
  }
  p->nthreads--;
  p->free--;
  pthread_mutex_unlock(&p->mu);
  /* The last touch: the pool may be freed from here on. */
  __atomic_sub_fetch(&p->live, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Start one more thread, counted already under the lock (nthreads, free
 * and live). @return 0 or the pthread_create error. Loop thread (or
 * creation). */
static int pool_spawn(exec_pool_t *p)
{
  pthread_attr_t attr;
  pthread_t th;
  int rc;

  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 512 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create(&th, &attr, pool_main, p);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    pthread_mutex_lock(&p->mu);
    p->nthreads--;
    p->free--;
    pthread_mutex_unlock(&p->mu);
    __atomic_sub_fetch(&p->live, 1, __ATOMIC_RELEASE);
  }
  return rc;
}

/* Count one more thread before pool_spawn(). (p->mu) */
static void pool_reserve(exec_pool_t *p)
{
  p->nthreads++;
  p->free++;
  __atomic_add_fetch(&p->live, 1, __ATOMIC_RELAXED);
}

/* Whether another thread should start: more queues ready than threads
 * free to take them, and room under the bound, which counts no thread
 * that waits for the device (exec_wait_begin). (p->mu) */
static int pool_short(const exec_pool_t *p)
{
  return p->nready > p->free && p->nthreads - p->waiting < p->max;
}

/* Start threads while pool_short(), from any thread; a failure is logged
 * at most once a minute and stops the attempt (the next submission or
 * wait tries again). Called without p->mu. */
static void pool_grow(exec_pool_t *p)
{
  static uint64_t warned_ns; /* (atomic) */

  for (;;) {
    int go;

    pthread_mutex_lock(&p->mu);
    if ((go = pool_short(p)))
      pool_reserve(p);
    pthread_mutex_unlock(&p->mu);
    if (!go)
      return;
    if (pool_spawn(p) != 0) {
      uint64_t now = util_now_ns(),
               last = __atomic_load_n(&warned_ns, __ATOMIC_RELAXED);
      if ((last == 0 || now - last > 60ull * 1000 * 1000 * 1000) &&
          __atomic_compare_exchange_n(&warned_ns, &last, now, 0,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        log_warn(0,
                 "executor %s: cannot start another thread; the "
                 "others go on",
                 p->name);
      return;
    }
  }
}

void exec_thread_unbound(void)
{
  cur_unbound = 1;
}

void exec_wait_begin(void)
{
  exec_pool_t *p = cur_pool;

  if (p == NULL)
    return;
  pthread_mutex_lock(&p->mu);
  p->waiting++;
  pthread_mutex_unlock(&p->mu);
  pool_grow(p);
}

void exec_wait_end(void)
{
  exec_pool_t *p = cur_pool;

  if (p == NULL)
    return;
  pthread_mutex_lock(&p->mu);
  p->waiting--;
  pthread_mutex_unlock(&p->mu);
}

static void pool_free(exec_pool_t *p)
{
  pthread_mutex_destroy(&p->mu);
  free(p);
}

exec_pool_t *exec_pool_create(const char *name, unsigned max,
                              int (*bind)(void *), void *bind_arg)
{
  exec_pool_t *p = max != 0 ? calloc(1, sizeof(*p)) : NULL;

  if (p == NULL)
    return NULL;
  pthread_mutex_init(&p->mu, NULL);
  p->max = max;
  p->bind = bind;
  p->bind_arg = bind_arg;
  snprintf(p->name, sizeof(p->name), "%s", name);
  /* One thread from the start, and always: a queue has one to run it. */
  pool_reserve(p);
  if (pool_spawn(p) != 0) {
    pool_free(p);
    return NULL;
  }
  return p;
}

/* Stop @p p's threads once nothing is ready and wait until they are gone
 * (they are detached: they leave at idle times too). */
static void pool_stop_wait(exec_pool_t *p)
{
  int wake;

  pthread_mutex_lock(&p->mu);
  __atomic_store_n(&p->stopping, 1, __ATOMIC_RELAXED);
  wake = pool_wake(p, INT32_MAX);
  pthread_mutex_unlock(&p->mu);
  pool_wake_now(p, wake);
  while (__atomic_load_n(&p->live, __ATOMIC_ACQUIRE) != 0) {
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, NULL);
  }
}

int exec_pool_destroy(exec_pool_t *p)
{
  unsigned queues;

  if (p == NULL)
    return 0;
  pthread_mutex_lock(&p->mu);
  queues = p->queues;
  pthread_mutex_unlock(&p->mu);
  if (queues != 0) {
    /* A queue not retired may have a task stuck in the driver (hipd
     * exiting after its shutdown time): leave the threads to the exit. */
    return HIPD_EBUSY;
  }
  pool_stop_wait(p);
  pool_free(p);
  return 0;
}

unsigned exec_pool_threads(exec_pool_t *p)
{
  unsigned n;

  pthread_mutex_lock(&p->mu);
  n = p->nthreads;
  pthread_mutex_unlock(&p->mu);
  return n;
}

executor_t *exec_create_in(exec_pool_t *p)
{
  executor_t *ex = calloc(1, sizeof(*ex));

  if (ex == NULL)
    return NULL;
  ex->pool = p;
  pthread_mutex_lock(&p->mu);
  p->queues++;
  pthread_mutex_unlock(&p->mu);
  return ex;
}

executor_t *exec_create(const char *name, int (*bind)(void *), void *bind_arg)
{
  exec_pool_t *p = exec_pool_create(name, 1, bind, bind_arg);
  executor_t *ex = p != NULL ? exec_create_in(p) : NULL;

  if (ex == NULL) {
    if (p != NULL) {
      pool_stop_wait(p);
      pool_free(p);
    }
    return NULL;
  }
  p->owned = 1;
  return ex;
}

void exec_submit(executor_t *ex, task_t *t)
{
  exec_pool_t *p = ex->pool;
  int grow = 0, wake = 0;

  t->next = NULL;
  err_clear(&t->err);
  outstanding++;
  __atomic_add_fetch(&ex->pending, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&p->mu);
  if (ex->tail)
    ex->tail->next = t;
  else
    ex->head = t;
  ex->tail = t;
  if (ex->state == Q_IDLE) {
    ready_push(p, ex);
    /* More queues ready than threads free (a task of each busy one may
     * wait for the device): more threads, up to the pool's bound; beyond
     * it the queue waits its turn. */
    grow = pool_short(p);
    wake = pool_wake(p, 1);
  }
  pthread_mutex_unlock(&p->mu);
  pool_wake_now(p, wake);
  if (grow)
    pool_grow(p);
}

uint32_t exec_pending(const executor_t *ex)
{
  return __atomic_load_n(&ex->pending, __ATOMIC_ACQUIRE);
}

/* The queue is gone (loop thread): free it, and its pool if it had its
 * own, whose thread has then ended or is ending. */
static void retire_done(task_t *t)
{
  executor_t *ex =
      (executor_t *)((char *)t - offsetof(executor_t, retire_task));
  exec_pool_t *p = ex->pool;
  void (*fn)(void *) = ex->on_gone;
  void *arg = ex->gone_arg;

  pthread_mutex_lock(&p->mu);
  p->queues--;
  pthread_mutex_unlock(&p->mu);
  if (p->owned) {
    pool_stop_wait(p);
    pool_free(p);
  }
  free(ex);
  fn(arg);
}

void exec_destroy(executor_t *ex)
{
  exec_pool_t *p = ex->pool;

  /* Only an executor with its own thread: that thread runs what is
   * queued, then ends. */
  pool_stop_wait(p);
  pool_free(p);
  free(ex);
}

void exec_retire(executor_t *ex, void (*on_gone)(void *arg), void *arg)
{
  exec_pool_t *p = ex->pool;
  int now;

  ex->on_gone = on_gone;
  ex->gone_arg = arg;
  ex->retire_task.done = retire_done;
  outstanding++;
  pthread_mutex_lock(&p->mu);
  ex->stopping = 1;
  /* Idle: nothing will run it again, so it retires now; otherwise the
   * thread that drains it posts the retirement. */
  now = ex->state == Q_IDLE;
  pthread_mutex_unlock(&p->mu);
  if (now)
    task_complete(&ex->retire_task);
}
