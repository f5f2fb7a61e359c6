/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_sched.c: blocks on worker threads, GPU threads as
 * fibers, for hipd-cpu-runner.
 *
 * Blocks. A launch's blocks are numbered x fastest; workers take them in
 * chunks from one atomic counter until none are left. A worker runs one
 * block at a time, so `static thread_local` (__shared__) storage and the
 * worker's dynamic shared buffer belong to that block while it runs.
 *
 * Fibers. A block's GPU threads run on fibers of the worker. Each fiber has
 * a 128 KiB mmap'ed stack with a guard page below it; stacks are created
 * when first needed and reused by later blocks and launches, up to 1024 per
 * worker. On x86-64 a fiber switch is a few instructions of our own (the
 * callee-saved registers, MXCSR and the x87 control word); elsewhere it is
 * ucontext's swapcontext(), which also saves the signal mask with a system
 * call on every switch (about 1 us: 50 times slower at barriers). A fiber runs
 * GPU threads one after the other: it takes the next thread that has not
 * started, sets its threadIdx in the fiber's context, calls the kernel
 * (ffi_call) and, when the kernel returns, takes the next thread.
 *
 * Barriers, and the rule for the no-barrier fast path. A block starts with
 * one fiber, so a kernel that never reaches __syncthreads() runs all the
 * threads of the block as a plain loop on that fiber: two context switches
 * per block, none per thread. When a thread reaches a barrier, its fiber
 * waits there and, while threads of the block have not started yet, a new
 * fiber is created to run them; so every thread has either finished or is
 * waiting at the barrier before the barrier opens. The barrier opens when
 * all threads that have started and not finished wait at it (threads that
 * returned early do not hold it, as on current GPUs); waiting fibers then
 * run again in turn, switching fiber to fiber (no trip through a scheduler
 * context) at each later barrier. No thread starts after the first barrier
 * has opened, so a block never needs more fibers than threads (1024).
 *
 * The running fiber's context is published through the module's
 * thread-local hipd_cpu_cur (the address that the module's
 * hipd_cpu_tls_slot() returns on this worker), updated at every switch.
 *
 * Sanitizers. A switch that ASan or TSan does not know about looks to them
 * like a stack pointer jumping into foreign memory, so under either one
 * every switch is announced (the fsan_* functions below): ASan is told the
 * bounds of the stack switched to and keeps one fake stack per context,
 * TSan gets a fiber of its own per context. A fiber's stack is unpoisoned
 * when it is re-targeted, since frames of a fiber that was left for good
 * (fctx_jump) never returned and so never cleared their redzones.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND_H 1
#endif
#endif

#include "cpu_proto.h"
#include "cpu_sched.h"
#include "hipd.h"
#include "sanitize.h"
#include "util/cpus.h"

#ifdef HIPD_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef HIPD_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* What the sanitizers need to know of one context (empty without them). */
typedef struct {
#ifdef HIPD_ASAN
  const void *stack_lo; /* the context's stack, for ASan */
  size_t stack_size;
  void *fake_stack; /* ASan's fake stack while the context is switched out */
#endif
#ifdef HIPD_TSAN
  void *tsan_fiber; /* TSan's fiber for the context */
#endif
  char unused; /* keeps the struct non-empty without sanitizers */
} fsan_t;

/* Before switching from the current context (whose sanitizer state is
 * @p from, or NULL if it is left for good) to @p to. Always inlined, as is
 * fsan_switched_in(): TSan's switch must happen in the frame that makes
 * the real one, or the return from a helper after __tsan_switch_to_fiber
 * pops a frame off the new fiber's shadow call stack (and leaves one on
 * the old): a fresh fiber's then underflows, and TSan crashed reading it
 * (SEGV in StackDepotBase::Put from __tsan_create_fiber). */
static inline __attribute__((always_inline)) void fsan_switch_out(fsan_t *from,
                                                                  fsan_t *to)
{
#ifdef HIPD_ASAN
  __sanitizer_start_switch_fiber(from != NULL ? &from->fake_stack : NULL,
                                 to->stack_lo, to->stack_size);
#endif
#ifdef HIPD_TSAN
  __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
  (void)from;
  (void)to;
}

/* First thing in a context that was switched to: @p self is its state, or
 * NULL for a context that starts afresh. */
static inline __attribute__((always_inline)) void fsan_switched_in(fsan_t *self)
{
#ifdef HIPD_ASAN
  __sanitizer_finish_switch_fiber(self != NULL ? self->fake_stack : NULL, NULL,
                                  NULL);
#endif
  (void)self;
}

/* A context that will run from the start of the stack [@p stack, @p stack +
 * @p size): forget what an earlier use of that stack left behind. */
static void fsan_make(fsan_t *c, char *stack, size_t size)
{
#ifdef HIPD_ASAN
  __asan_unpoison_memory_region(stack, size);
  c->stack_lo = stack;
  c->stack_size = size;
  c->fake_stack = NULL;
#endif
#ifdef HIPD_TSAN
  /* A fresh TSan fiber each time: the old one's shadow call stack still
   * holds the frames of the run that never returned. */
  if (c->tsan_fiber != NULL)
    __tsan_destroy_fiber(c->tsan_fiber);
  c->tsan_fiber = __tsan_create_fiber(0);
#endif
  (void)c;
  (void)stack;
  (void)size;
}

/* The state of the calling thread's own context (its own stack). */
static void fsan_init_thread(fsan_t *c)
{
#ifdef HIPD_ASAN
  pthread_attr_t attr;
  void *lo = NULL;
  size_t size = 0;

  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
  }
  c->stack_lo = lo;
  c->stack_size = size;
  c->fake_stack = NULL;
#endif
#ifdef HIPD_TSAN
  c->tsan_fiber = __tsan_get_current_fiber();
#endif
  (void)c;
}

/* Release what fsan_make() created for @p c. */
static void fsan_free(fsan_t *c)
{
#ifdef HIPD_TSAN
  if (c->tsan_fiber != NULL)
    __tsan_destroy_fiber(c->tsan_fiber);
  c->tsan_fiber = NULL;
#endif
  (void)c;
}

#if defined(__x86_64__) && !defined(HIPD_CPU_UCONTEXT)
/* A saved context is the stack pointer of a stack holding the callee-saved
 * registers, MXCSR and the x87 control word, and the return address. */
typedef struct {
  void *sp;
  fsan_t san;
} fctx_t;

void hipd_fiber_switch(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl hipd_fiber_switch\n"
        ".hidden hipd_fiber_switch\n"
        ".type hipd_fiber_switch, @function\n"
        "hipd_fiber_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size hipd_fiber_switch, .-hipd_fiber_switch\n");

/* Prepare @p c to start @p fn (which must never return) on the stack
 * [@p stack, @p stack + @p size). */
static void fctx_make(fctx_t *c, char *stack, size_t size, void (*fn)(void))
{
  uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
  uint64_t *f = (uint64_t *)(top - 72); /* fn is entered as if called */
  uint32_t mxcsr;
  uint16_t fpucw;

  fsan_make(&c->san, stack, size);
  __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
  __asm__ __volatile__("fnstcw %0" : "=m"(fpucw));
  f[0] = mxcsr | ((uint64_t)fpucw << 32);
  for (int i = 1; i <= 6; i++)
    f[i] = 0; /* r15, r14, r13, r12, rbx, rbp */
  f[7] = (uint64_t)(uintptr_t)fn;
  f[8] = 0; /* fn's return address: none */
  c->sp = f;
}

static void fctx_switch(fctx_t *from, fctx_t *to)
{
  fsan_switch_out(&from->san, &to->san);
  hipd_fiber_switch(&from->sp, to->sp);
  fsan_switched_in(&from->san);
}

/* Where fctx_jump() saves the stack pointer it never resumes. Not a local:
 * under ASan's stack-use-after-return detection a local whose address is
 * taken lives on the fake stack, which the switch out of a context left
 * for good (fsan_switch_out(NULL, ...)) has just destroyed. */
static __thread void *discarded_sp;

/* Switch to @p to for good: the current context is not resumed. */
static void fctx_jump(fctx_t *to)
{
  fsan_switch_out(NULL, &to->san);
  hipd_fiber_switch(&discarded_sp, to->sp);
  __builtin_unreachable();
}

static int fctx_init(fctx_t *c)
{
  (void)c;
  return 0;
}
#else
#include <ucontext.h>

typedef struct {
  ucontext_t uc;
  fsan_t san;
} fctx_t;

static void fctx_make(fctx_t *c, char *stack, size_t size, void (*fn)(void))
{
  fsan_make(&c->san, stack, size);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = NULL; /* fn never returns */
  makecontext(&c->uc, fn, 0);
}

static void fctx_switch(fctx_t *from, fctx_t *to)
{
  fsan_switch_out(&from->san, &to->san);
  swapcontext(&from->uc, &to->uc);
  fsan_switched_in(&from->san);
}

static void fctx_jump(fctx_t *to)
{
  fsan_switch_out(NULL, &to->san);
  setcontext(&to->uc);
  /* setcontext() returns only for a context that getcontext() and
   * makecontext() did not make; every fctx_t here is made by them. A true
   * assertion: no caller could go on from here. */
  abort();
}

/* Once per fiber: makecontext() needs a context from getcontext(). */
static int fctx_init(fctx_t *c)
{
  return getcontext(&c->uc);
}
#endif

#define STACK_BYTES ((size_t)128 * 1024)
#define MAX_FIBERS CPU_MAX_THREADS_PER_BLOCK

enum { F_RUNNABLE, F_RUNNING, F_WAITING, F_DONE };

typedef struct worker worker_t;

typedef struct {
  fctx_t fc;          /* its machine context while it is not running */
  hipd_cpu_ctx_t ctx; /* the context of the GPU thread it runs */
  worker_t *w;
  unsigned index; /* in worker.fibers */
  int state;      /* F_* */
} fiber_t;

struct worker {
  sched_t *s;
  pthread_t thread;
  fiber_t *fibers;  /* MAX_FIBERS */
  char **stacks;    /* usable stack of each fiber created so far */
  unsigned nstacks; /* stacks (and fiber contexts) created so far */
#ifdef HAVE_VALGRIND_H
  unsigned *vg_ids;
#endif
  void *dyn_shared;      /* CPU_MAX_SHARED_BYTES, fixed for the worker's life */
  fctx_t main_fc;        /* the worker's own stack, while a block runs */
  hipd_cpu_ctx_t **slot; /* the module's hipd_cpu_cur on this worker */
  const sched_launch_t *launch;
  /* the block in progress */
  hipd_cpu_uint3_t bidx;
  unsigned nthreads;    /* of the block */
  unsigned next_thread; /* first thread not started yet */
  unsigned live;        /* threads started and not finished */
  unsigned arrived;     /* threads waiting at the barrier */
  unsigned nfib;        /* fibers in use by this block */
  fiber_t *cur;         /* the running fiber */
  int pred_count;       /* barrier predicates so far */
  int res_count, res_n; /* of the last opened barrier */
  int failed;           /* HIPD_E* code if the block was abandoned */
};

struct sched {
  pthread_mutex_t lock;
  pthread_cond_t go;   /* workers wait for a launch */
  pthread_cond_t done; /* run() waits for the workers */
  uint64_t gen;        /* launches started */
  int quit;
  unsigned active; /* workers still busy with the launch */
  const sched_launch_t *launch;
  _Atomic uint64_t next_block;
  uint64_t nblocks;
  uint64_t chunk;
  int error; /* first failure of the launch */
  char errmsg[256];
  unsigned nworkers;
  worker_t *workers;
};

static _Thread_local worker_t *cur_worker;

static void fiber_main(void);
static int fiber_sync(hipd_cpu_ctx_t *ctx, int op, int pred);

/* ------------------------------------------------------------- fibers */

/* Map the stack of fiber @p i (with a guard page below) and prepare its
 * context once; later blocks only re-target it with fctx_make(). */
static int stack_create(worker_t *w, unsigned i)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *base =
      mmap(NULL, STACK_BYTES + page, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);

  if (base == MAP_FAILED)
    return HIPD_ENOMEM;
  if (mprotect(base, page, PROT_NONE) != 0) {
    munmap(base, STACK_BYTES + page);
    return HIPD_ENOMEM;
  }
  w->stacks[i] = base + page;
#ifdef HAVE_VALGRIND_H
  w->vg_ids[i] =
      VALGRIND_STACK_REGISTER(w->stacks[i], w->stacks[i] + STACK_BYTES);
#endif
  if (fctx_init(&w->fibers[i].fc) != 0) {
    munmap(base, STACK_BYTES + page);
    return HIPD_EINTERNAL;
  }
  return 0;
}

/* A fresh fiber of the current block, ready to run fiber_main(); NULL if
 * its stack cannot be created. */
static fiber_t *fiber_new(worker_t *w)
{
  unsigned i = w->nfib;
  const sched_launch_t *l = w->launch;
  fiber_t *f;

  if (i >= MAX_FIBERS)
    return NULL; /* cannot happen: one fiber per started thread at most */
  if (i == w->nstacks) {
    if (stack_create(w, i) != 0)
      return NULL;
    w->nstacks++;
  }
  f = &w->fibers[i];
  fctx_make(&f->fc, w->stacks[i], STACK_BYTES, fiber_main);
  f->w = w;
  f->index = i;
  f->state = F_RUNNABLE;
  f->ctx.block_idx = w->bidx;
  f->ctx.block_dim = (hipd_cpu_uint3_t){l->block[0], l->block[1], l->block[2]};
  f->ctx.grid_dim = (hipd_cpu_uint3_t){l->grid[0], l->grid[1], l->grid[2]};
  f->ctx.dyn_shared = w->dyn_shared;
  f->ctx.dyn_shared_bytes = l->shared;
  f->ctx.sync = fiber_sync;
  f->ctx.rt = f;
  w->nfib++;
  return f;
}

/* The next fiber after @p f (round robin) that may run. One exists whenever
 * a started thread is neither finished nor waiting at the barrier; when the
 * invariants break anyway, NULL: the caller abandons the block and the
 * launch fails with HIPD_EINTERNAL (a hang would be worse). */
static fiber_t *next_runnable(worker_t *w, fiber_t *f)
{
  for (unsigned k = 1; k <= w->nfib; k++) {
    fiber_t *n = &w->fibers[(f->index + k) % w->nfib];
    if (n->state == F_RUNNABLE)
      return n;
  }
  return NULL;
}

/* Leave the block for good with @p rc: back to the worker's loop. */
static void block_abandon(worker_t *w, int rc)
{
  w->failed = rc;
  fctx_jump(&w->main_fc);
}

static void publish(worker_t *w, fiber_t *to)
{
  w->cur = to;
  to->state = F_RUNNING;
  *w->slot = &to->ctx;
}

static void switch_to(worker_t *w, fiber_t *from, fiber_t *to)
{
  publish(w, to);
  fctx_switch(&from->fc, &to->fc);
}

/* Every thread that has started and not finished waits: open the barrier. */
static void barrier_open(worker_t *w)
{
  w->res_count = w->pred_count;
  w->res_n = (int)w->arrived;
  w->pred_count = 0;
  w->arrived = 0;
  for (unsigned i = 0; i < w->nfib; i++)
    if (w->fibers[i].state == F_WAITING)
      w->fibers[i].state = F_RUNNABLE;
}

/* ctx->sync of every fiber: __syncthreads() and its variants. */
static int fiber_sync(hipd_cpu_ctx_t *ctx, int op, int pred)
{
  fiber_t *f = ctx->rt;
  worker_t *w = f->w;

  f->state = F_WAITING;
  w->arrived++;
  if (pred)
    w->pred_count++;
  if (w->next_thread < w->nthreads) {
    /* Threads that have not started must reach the barrier too. */
    fiber_t *n = fiber_new(w);
    if (n == NULL)
      block_abandon(w, HIPD_ENOMEM);
    switch_to(w, f, n);
  } else if (w->arrived == w->live) {
    barrier_open(w);
    publish(w, f);
  } else {
    fiber_t *n = next_runnable(w, f);
    if (n == NULL)
      block_abandon(w, HIPD_EINTERNAL);
    switch_to(w, f, n);
  }
  /* Here the barrier has opened. Until it opens again every thread that
   * waited has read its result: res_* stay valid for us. */
  switch (op) {
  case HIPD_CPU_SYNC_COUNT:
    return w->res_count;
  case HIPD_CPU_SYNC_AND:
    return w->res_count == w->res_n;
  case HIPD_CPU_SYNC_OR:
    return w->res_count > 0;
  default:
    return 0;
  }
}

/* The body of every fiber: run threads that have not started until none
 * is left, then hand over to another fiber or end the block. */
static void fiber_main(void)
{
  worker_t *w;
  fiber_t *f;
  const sched_launch_t *l;
  unsigned bx, bxy;

  fsan_switched_in(NULL);
  w = cur_worker;
  f = w->cur;
  l = w->launch;
  bx = l->block[0];
  bxy = l->block[0] * l->block[1];
  while (w->next_thread < w->nthreads) {
    unsigned t = w->next_thread++;
    w->live++;
    f->ctx.thread_idx.x = t % bx;
    f->ctx.thread_idx.y = (t % bxy) / bx;
    f->ctx.thread_idx.z = t / bxy;
    ffi_call(l->cif, l->entry, NULL, l->avalues);
    w->live--;
  }
  f->state = F_DONE;
  if (w->live == 0)
    fctx_jump(&w->main_fc); /* the block is complete */
  if (w->arrived == w->live)
    barrier_open(w); /* the others only waited for this thread */
  fiber_t *n = next_runnable(w, f);
  if (n == NULL)
    block_abandon(w, HIPD_EINTERNAL);
  publish(w, n);
  fctx_jump(&n->fc);
}

/* ------------------------------------------------------------- blocks */

static int block_run(worker_t *w, uint64_t b)
{
  const sched_launch_t *l = w->launch;
  uint64_t gx = l->grid[0], gxy = (uint64_t)l->grid[0] * l->grid[1];
  fiber_t *f;

  w->bidx.x = (unsigned)(b % gx);
  w->bidx.y = (unsigned)((b % gxy) / gx);
  w->bidx.z = (unsigned)(b / gxy);
  w->nthreads = l->block[0] * l->block[1] * l->block[2];
  w->next_thread = 0;
  w->live = 0;
  w->arrived = 0;
  w->nfib = 0;
  w->pred_count = 0;
  w->failed = 0;
  f = fiber_new(w);
  if (f == NULL)
    return HIPD_ENOMEM;
  publish(w, f);
  fctx_switch(&w->main_fc, &f->fc);
  *w->slot = NULL;
  return w->failed;
}

static void worker_run(worker_t *w, const sched_launch_t *l)
{
  sched_t *s = w->s;

  w->launch = l;
  w->slot = l->tls_slot();
  for (;;) {
    uint64_t b = atomic_fetch_add(&s->next_block, s->chunk);
    uint64_t end = b + s->chunk < s->nblocks ? b + s->chunk : s->nblocks;

    if (b >= s->nblocks)
      break;
    for (; b < end; b++) {
      int rc = block_run(w, b);
      if (rc != 0) {
        pthread_mutex_lock(&s->lock);
        if (s->error == 0) {
          s->error = rc;
          if (rc == HIPD_ENOMEM)
            snprintf(s->errmsg, sizeof(s->errmsg),
                     "cannot allocate a %zu KiB fiber stack for a GPU thread "
                     "of block %" PRIu64 " on the CPU device",
                     STACK_BYTES / 1024, b);
          else
            snprintf(s->errmsg, sizeof(s->errmsg),
                     "internal error: no GPU thread of block %" PRIu64
                     " can run on the CPU device",
                     b);
        }
        pthread_mutex_unlock(&s->lock);
        atomic_store(&s->next_block, s->nblocks); /* stop the others */
        return;
      }
    }
  }
}

static void *worker_main(void *arg)
{
  worker_t *w = arg;
  sched_t *s = w->s;
  uint64_t seen = 0;

  cur_worker = w;
  fsan_init_thread(&w->main_fc.san);
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->gen == seen && !s->quit)
      pthread_cond_wait(&s->go, &s->lock);
    if (s->quit)
      break;
    seen = s->gen;
    const sched_launch_t *l = s->launch;
    pthread_mutex_unlock(&s->lock);
    worker_run(w, l);
    pthread_mutex_lock(&s->lock);
    if (--s->active == 0)
      pthread_cond_signal(&s->done);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ----------------------------------------------------------- the pool */

static void worker_free(worker_t *w)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  for (unsigned i = 0; i < w->nstacks; i++) {
#ifdef HAVE_VALGRIND_H
    VALGRIND_STACK_DEREGISTER(w->vg_ids[i]);
#endif
    fsan_free(&w->fibers[i].fc.san);
    munmap(w->stacks[i] - page, STACK_BYTES + page);
  }
#ifdef HAVE_VALGRIND_H
  free(w->vg_ids);
#endif
  if (w->dyn_shared != NULL)
    munmap(w->dyn_shared, CPU_MAX_SHARED_BYTES);
  free(w->stacks);
  free(w->fibers);
}

int sched_create(unsigned nworkers, sched_t **out, char *err, size_t errsz)
{
  sched_t *s = calloc(1, sizeof(*s));
  unsigned started = 0;
  int rc = HIPD_ENOMEM;

  if (nworkers == 0)
    nworkers = util_cpus();
  if (s == NULL)
    goto fail;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->go, NULL);
  pthread_cond_init(&s->done, NULL);
  s->nworkers = nworkers;
  s->workers = calloc(nworkers, sizeof(*s->workers));
  if (s->workers == NULL)
    goto fail;
  for (unsigned i = 0; i < nworkers; i++) {
    worker_t *w = &s->workers[i];
    w->s = s;
    w->fibers = calloc(MAX_FIBERS, sizeof(*w->fibers));
    w->stacks = calloc(MAX_FIBERS, sizeof(*w->stacks));
#ifdef HAVE_VALGRIND_H
    w->vg_ids = calloc(MAX_FIBERS, sizeof(*w->vg_ids));
    if (w->vg_ids == NULL)
      goto fail;
#endif
    w->dyn_shared = mmap(NULL, CPU_MAX_SHARED_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w->dyn_shared == MAP_FAILED)
      w->dyn_shared = NULL;
    if (w->fibers == NULL || w->stacks == NULL || w->dyn_shared == NULL)
      goto fail;
  }
  for (; started < nworkers; started++) {
    int e = pthread_create(&s->workers[started].thread, NULL, worker_main,
                           &s->workers[started]);
    if (e != 0) {
      rc = HIPD_ENOMEM;
      snprintf(err, errsz, "cannot start CPU device worker thread %u: %s",
               started, strerror(e));
      goto fail;
    }
  }
  *out = s;
  return 0;

fail:
  if (rc == HIPD_ENOMEM && started == 0)
    snprintf(err, errsz, "out of memory starting %u CPU device workers",
             nworkers);
  if (s != NULL) {
    pthread_mutex_lock(&s->lock);
    s->quit = 1;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 0; i < started; i++)
      pthread_join(s->workers[i].thread, NULL);
    if (s->workers != NULL)
      for (unsigned i = 0; i < nworkers; i++)
        worker_free(&s->workers[i]);
    free(s->workers);
    pthread_cond_destroy(&s->go);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->lock);
    free(s);
  }
  return rc;
}

void sched_destroy(sched_t *s)
{
  if (s == NULL)
    return;
  pthread_mutex_lock(&s->lock);
  s->quit = 1;
  pthread_cond_broadcast(&s->go);
  pthread_mutex_unlock(&s->lock);
  for (unsigned i = 0; i < s->nworkers; i++) {
    pthread_join(s->workers[i].thread, NULL);
    worker_free(&s->workers[i]);
  }
  free(s->workers);
  pthread_cond_destroy(&s->go);
  pthread_cond_destroy(&s->done);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

unsigned sched_workers(const sched_t *s)
{
  return s->nworkers;
}

int sched_run(sched_t *s, const sched_launch_t *l, int watch_fd, char *err,
              size_t errsz)
{
  uint64_t nblocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
  uint64_t chunk = nblocks / ((uint64_t)s->nworkers * 16);
  int rc;

  pthread_mutex_lock(&s->lock);
  s->launch = l;
  s->nblocks = nblocks;
  s->chunk = chunk < 1 ? 1 : (chunk > 1024 ? 1024 : chunk);
  atomic_store(&s->next_block, 0);
  s->error = 0;
  s->errmsg[0] = '\0';
  s->active = s->nworkers;
  s->gen++;
  pthread_cond_broadcast(&s->go);
  while (s->active > 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    if (pthread_cond_timedwait(&s->done, &s->lock, &ts) == ETIMEDOUT &&
        watch_fd >= 0) {
      /* A kernel may run for long: give up if the daemon is gone. */
      struct pollfd p = {.fd = watch_fd, .events = 0};
      if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
        _exit(3);
    }
  }
  rc = s->error;
  if (rc != 0)
    snprintf(err, errsz, "%s", s->errmsg);
  s->launch = NULL;
  pthread_mutex_unlock(&s->lock);
  return rc;
}
