/* SPDX-License-Identifier: MIT */
/* daemon/executor.h: worker threads that run device work in order, and the
 * bridge that brings their results back to the loop thread.
 *
 * An executor is one serial queue. Its tasks run in order on a thread of
 * its pool, one task of it at a time; each task's done() then runs on the
 * loop thread, in the order the tasks completed. The loop thread submits
 * tasks and never waits on a worker.
 *
 * Each device has a pool for its streams' executors, of at most
 * --stream-threads threads besides those waiting for the device
 * (exec_wait_begin), started as queues need them: streams overlap (a task
 * that waits for the device holds its thread, and the other streams' tasks
 * go to the others), and 256 sessions with 4 streams each make that many
 * threads plus those in a device wait, not a thousand. Past the bound a
 * stream's work waits for a thread to come free, in the order the streams
 * became ready; a thread runs at most 16 tasks of one stream before the
 * streams that wait go first. Each device also has an executor with its own
 * thread (exec_create) for blocking housekeeping (allocation, frees,
 * creating streams and events, resets).
 */
#ifndef HIPD_EXECUTOR_H
#define HIPD_EXECUTOR_H

#include <stdint.h>
#include <uv.h>

#include "util/clock.h"
#include "util/err.h"

typedef struct task task_t;
typedef struct executor executor_t;
typedef struct exec_pool exec_pool_t;

struct task {
  /* Runs on the worker. It may set t->hold to keep the task from
   * completing when run() returns; it must then call task_complete()
   * exactly once later (from any thread). */
  void (*run)(task_t *t);
  /* Runs on the loop thread after completion. Owns the task's memory. */
  void (*done)(task_t *t);
  task_t *next; /* queue link */
  int hold;     /* see run() */
  /* Set by run(), or NULL: the task's early answer. task_complete()
   * calls it once the task is queued for the loop, under the bridge's
   * lock, on the completing thread, before it wakes the loop: whoever
   * waited for the work (objects.h's early answers) is told without
   * waiting for the loop's wake-up, and the loop, which takes the queue
   * under that lock, sees the task queued before anything that follows
   * the answer (exec_bridge_run() before a session's next request runs
   * its done() first). */
  void (*early)(task_t *t);
  hipd_err_t err; /* err.code: 0 or a negative HIPD_E* code, set by run()
                   * (task_fail); err.msg: the message of a failure */
};

/* Workers poll their queue for @p us microseconds after each task before
 * they sleep (0: never), each while it holds a place of the spin budget
 * (spin.h): one that gets none sleeps at once. Set once, before executors
 * start. */
void exec_set_busy_poll(uint32_t us);
/* CLOCK_MONOTONIC in nanoseconds: util_now_ns() (util/clock.h), the old
 * name kept for tests/check_objects.c. */
#define exec_now_ns util_now_ns

/* Start the loop bridge (once, on the loop thread). */
int exec_bridge_init(uv_loop_t *loop);
/* Close the bridge's async handle (at shutdown). Tasks completed after
 * this are kept, their done() never run: the daemon exits without them. */
void exec_bridge_close(void);
/* While the loop thread busy-polls (main.c's run_loop) it watches the
 * bridge itself: completions then come without the async handle's
 * wake-up (a write to an eventfd, and its read on the loop: two system
 * calls a completion). exec_bridge_watch(1) starts that;
 * exec_bridge_watch(0) ends it, and @return whether completions wait
 * (from then on they wake the loop again). Loop thread. */
int exec_bridge_watch(int on);
/* Whether completions wait for the loop (a hint: one atomic load). */
int exec_bridge_pending(void);
/* Run the completions that wait. Loop thread. */
void exec_bridge_run(void);

/* A pool of at most @p max threads (at least 1), each of which first
 * calls @p bind(bind_arg) (for example to make a device current on the
 * thread); @p name names them. One starts now and stays; the others start
 * when a queue is ready and every thread is busy, and end after 2 s
 * without work. @return NULL if no thread can be started or out of
 * memory. Loop thread. */
exec_pool_t *exec_pool_create(const char *name, unsigned max,
                              int (*bind)(void *), void *bind_arg);
/* A task about to wait for the device, for as long as that takes (a
 * stream synchronisation, a kernel on the CPU device): until
 * exec_wait_end() its thread does not count against its pool's bound, and
 * the pool starts another if queues wait for one. A wait may depend on
 * work queued behind it on another stream (a kernel that spins on a flag
 * a later copy writes), which must still get a thread, as it did when
 * each stream had its own. No-op outside a pool's thread. */
void exec_wait_begin(void);
void exec_wait_end(void);
/* A task left its thread bound to another device than its pool's (and
 * could not bind it back): the thread binds again (the pool's bind())
 * before its next task, which must not run on that device; while that
 * fails, its tasks fail. No-op outside a pool's thread. */
void exec_thread_unbound(void);
/* Threads the pool has now. */
unsigned exec_pool_threads(exec_pool_t *p);
/* Stop and join the pool's threads and free it (blocking; at exit), once
 * every executor of it is gone. @return 0, or HIPD_EBUSY when some is not
 * (a task may be stuck in the driver): the pool is then left to the
 * process's exit. NULL is a no-op. */
int exec_pool_destroy(exec_pool_t *p);
/* A new executor (serial queue) served by pool @p p, or NULL when out of
 * memory. End it with exec_retire(). Loop thread. */
executor_t *exec_create_in(exec_pool_t *p);
/* An executor with a pool of its own, of one thread, started now (see
 * exec_pool_create). @return NULL if the thread cannot be started. */
executor_t *exec_create(const char *name, int (*bind)(void *), void *bind_arg);
/* Queue @p t to run after every task submitted before it. Loop thread. */
void exec_submit(executor_t *ex, task_t *t);
/* Finish the queue, stop and join the thread, free the executor: one from
 * exec_create() only. Tasks already queued run first. Blocking: only at
 * shutdown or from a worker. */
void exec_destroy(executor_t *ex);
/* Stop after the queued tasks, from the loop thread, without blocking:
 * once they ran (and an own thread exited and was joined), the executor is
 * freed and @p on_gone runs on the loop thread. No task may be submitted
 * to it after this. */
void exec_retire(executor_t *ex, void (*on_gone)(void *arg), void *arg);
/* Tasks submitted whose done() has not run yet, plus executors retiring:
 * the daemon exits only when this is 0 (or its shutdown time is up). */
uint32_t exec_outstanding(void);
/* Tasks queued or running. */
uint32_t exec_pending(const executor_t *ex);

/* Count @p t as outstanding although it is never submitted: it will be
 * completed with task_complete() by a driver callback. Loop thread. */
void task_expect(task_t *t);
/* Complete a held task (any thread): its done() will run on the loop. */
void task_complete(task_t *t);
/* Complete @p t, counted with task_expect() and run by the loop thread
 * itself (objects/submit.c): its done() runs from the loop soon, after
 * the completions before it, never from inside this call. Loop thread. */
void task_complete_here(task_t *t);
/* The one way to set up device work. Zero @p t and set its run and done
 * (a task embedded in an object and reused for its next job). @return t. */
task_t *task_init(task_t *t, void (*run)(task_t *), void (*done)(task_t *));
/* Allocate a zeroed task struct of @p size bytes, whose first member is the
 * task_t, with run and done set: `r = task_new(sizeof(*r), x_run, x_done)`.
 * @return it (done() owns and frees it), or NULL when out of memory. */
void *task_new(size_t size, void (*run)(task_t *), void (*done)(task_t *));

/* Fail a task from run(): set err's code and a printf-formatted message. */
void task_fail(task_t *t, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
