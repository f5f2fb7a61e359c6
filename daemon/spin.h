/* SPDX-License-Identifier: MIT */
/* daemon/spin.h: the spin budget: how many threads of one hipd may
 * busy-wait at once, counted across all its processes.
 *
 * Busy-waiting saves the microseconds of a wake-up (a loop polling for the
 * next request or ring submission, an executor for its next task), and
 * costs a core for as long as it lasts. Counted per thread or per process
 * it oversubscribes the cores: at N=16 sessions under --isolation session
 * on the H200, 16 loops and up to 64 executors spinning left hipd at half
 * the kernels per second it reached without spinning (bench/RESULTS.md).
 * So every spinner takes a place from one budget, held in a page that the
 * listener creates (a memfd) and each worker maps at start: at most
 * --spin-cpus places, and fewer when the host has fewer CPUs free (the
 * listener samples the runnable tasks; spin_budget_tune()). A thread that
 * gets no place sleeps at once.
 *
 * Each process counts the places it holds in its own slot of the page, so
 * the listener gives back the places of a worker that died holding them
 * (spin_slot_release()). A process without a budget from a listener (tests,
 * fuzzers) gets a private one at first use.
 */
#ifndef HIPD_SPIN_H
#define HIPD_SPIN_H

#include <stdint.h>
#include <uv.h>

#include "util/err.h"

/* The default --spin-cpus for this host: half the CPUs this process may run
 * on, 1 below 8 (where a spinner would take a core a client needs). Half,
 * measured on the H200 host (16 CPUs, 16 sessions of one uid): 100k
 * kernels/s with 4, 108k with 8, 116k with 14 (bench/RESULTS.md); the
 * budget's tuning gives the cores back while other tasks want them. */
uint32_t spin_default_cpus(void);

/* Create this process's budget of @p cap places with room for @p slots
 * processes (slot 0: this one) and keep it; the listener, or the single
 * process of --isolation none. @return 0 or a HIPD_E* code (err set). */
int spin_budget_create(uint32_t cap, uint32_t slots, hipd_err_t *err);
/* The budget's memfd, for a worker's start (-1 without one). */
int spin_budget_fd(void);
/* A worker: map the budget at @p fd (from the listener) and count this
 * process's places in slot @p slot. @p fd is closed. @return 0 or a HIPD_E*
 * code (err set); on failure the process keeps a private budget of 0
 * places, so that it never spins uncounted. */
int spin_budget_attach(int fd, uint32_t slot, hipd_err_t *err);

/* A worker given no slot: never spin (before any thread could). */
void spin_budget_disable(void);

/* The listener: a free slot for a worker about to start, or -1 when every
 * slot is in use (that worker then gets no budget and never spins). */
int spin_slot_take(void);
/* The listener: the worker of @p slot is gone: give back the places it
 * still held (it may have died spinning) and free the slot. */
void spin_slot_release(int slot);

/* Take one place; 1 when taken (spin, then spin_leave()), 0 when the budget
 * is spent (sleep instead). Any thread. */
int spin_enter(void);
void spin_leave(void);

/* Work came in: a request (socket or ring) or a message from another hipd
 * process (the channels between the listener and its workers). The loop
 * busy-polls only within a spin window of a turn that brought some or
 * found device work in flight (main.c's run_loop): a turn that only a
 * timer woke (housekeeping) long after sleeps again at once, so an idle
 * process spends nothing on polling. Loop thread. */
void spin_note_work(void);
/* How much work was noted so far, to compare. Loop thread. */
uint64_t spin_work_count(void);

/* Sample how many tasks of the host are runnable and set how many places
 * may be taken now: --spin-cpus, less what the other runnable tasks need of
 * the online CPUs. The owner of the budget calls it periodically while
 * sessions are open (spin_tune_set()). */
void spin_budget_tune(void);
/* What spin_budget_tune() does with its sample: @p runnable tasks of the
 * host (this thread among them) on @p online CPUs; averaged with the last
 * samples when @p smooth, else taken alone. Nothing when either is not
 * known (negative). Loop thread of the budget's owner. */
void spin_budget_sample(int runnable, long online, int smooth);
/* Call spin_budget_tune() every 100 ms on @p loop while @p on is set
 * (skipped while nobody polls; after a second of that the timer stops,
 * and this call, made once a second by the housekeeping timer, starts it
 * again when someone polls, or, while fewer places than the cap are
 * allowed, takes one sample itself), and restore the whole budget when it
 * is cleared (no session: nothing to share the CPUs with). Loop thread of
 * the budget's owner. */
void spin_tune_set(uv_loop_t *loop, int on);
/* Close the tuning timer (at shutdown). */
void spin_tune_close(void);

typedef struct {
  uint32_t cap;   /* --spin-cpus */
  uint32_t limit; /* places allowed now (<= cap) */
  uint32_t taken; /* places taken now, host-wide */
  uint32_t mine;  /* of which by this process */
  int shared;     /* 1: the budget comes from a listener or is shared */
} spin_stats_t;
void spin_get_stats(spin_stats_t *out);

#endif
