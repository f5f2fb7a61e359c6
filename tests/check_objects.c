/* SPDX-License-Identifier: MIT */
/* tests/check_objects.c: the object layer (daemon/objects/) in process,
 * without a socket, a session or dispatch: the real executor bridge on a
 * libuv loop and the real CPU device. Buffers, streams and events are made
 * and ops submitted through the layer's own calls; each completion records
 * what it was given, and the loop runs until the completions arrived. */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bufpool.h"
#include "device.h"
#include "executor.h"
#include "hipd.h"
#include "objects/objects.h"
#include "run.h"
#include "spin.h"

/* What one completion reported. */
typedef struct {
  int called; /* times the completion ran */
  int order;  /* its place among all completions, from 1 */
  int status;
  char err[256];
  void *bytes; /* OP_READ: taken from the result */
  size_t len;
  int idle;
  buffer_t *buffer;
  int timed;
  uint64_t start_ns;
  float device_ms;
} seen_t;

static uv_loop_t *loop;
static device_t *cpu;
static int completions;

static void record_cb(void *ctx, obj_result_t *r)
{
  seen_t *s = ctx;

  s->called++;
  s->order = ++completions;
  s->status = r->status;
  snprintf(s->err, sizeof(s->err), "%s", r->status != 0 ? r->err : "");
  s->bytes = r->bytes;
  s->len = r->len;
  r->bytes = NULL; /* taken */
  s->idle = r->idle;
  s->buffer = r->buffer;
  s->timed = r->timed;
  s->start_ns = r->start_ns;
  s->device_ms = r->device_ms;
}

static obj_done_t to(seen_t *s)
{
  return (obj_done_t){record_cb, s};
}

/* Run the loop until @p s has been called (the test case's timeout bounds
 * a completion that never comes). */
static void wait_for(const seen_t *s)
{
  while (!s->called)
    uv_run(loop, UV_RUN_ONCE);
}

/* Run the loop until no device work is outstanding. */
static void drain(void)
{
  while (exec_outstanding() > 0)
    uv_run(loop, UV_RUN_ONCE);
}

static void setup(void)
{
  hipd_err_t err;

  loop = uv_default_loop();
  ck_assert_int_eq(exec_bridge_init(loop), 0);
  ck_assert_msg(devices_init("cpu", &err) == 0, "devices: %s", err.msg);
  ck_assert_int_ge(devices_count(), 1);
  cpu = device_get(0);
  ck_assert_ptr_nonnull(cpu);
  ck_assert(cpu->caps.is_cpu);
  completions = 0;
}

static void teardown(void)
{
  drain();
  exec_bridge_close();
  uv_run(loop, UV_RUN_DEFAULT);
}

static buffer_t *make_buffer(size_t size)
{
  seen_t s = {0};

  ck_assert_int_eq(buffer_alloc(cpu, size, 1, to(&s)), 0);
  wait_for(&s);
  ck_assert_int_eq(s.status, 0);
  ck_assert_ptr_nonnull(s.buffer);
  ck_assert_uint_eq(s.buffer->mem.size, size);
  return s.buffer;
}

static stream_t *make_stream(void)
{
  seen_t s = {0};
  stream_t *st = stream_new(cpu);

  ck_assert_ptr_nonnull(st);
  stream_start(st, to(&s));
  wait_for(&s);
  ck_assert_int_eq(s.status, 0);
  return st;
}

static event_t *make_event(void)
{
  seen_t s = {0};
  event_t *ev = event_new(cpu);

  ck_assert_ptr_nonnull(ev);
  event_start(ev, to(&s));
  wait_for(&s);
  ck_assert_int_eq(s.status, 0);
  ck_assert_int_eq(ev->state, EVENT_UNRECORDED);
  return ev;
}

/* Ops, filled in as methods/ would: each buffer the op names holds a
 * reference of its own. */
static op_t *op_write(stream_t *st, buffer_t *b, size_t off, const void *src,
                      size_t n, seen_t *s)
{
  op_t *op = op_new(OP_WRITE, st, to(s));

  ck_assert_ptr_nonnull(op);
  op->host = malloc(n);
  memcpy(op->host, src, n);
  op->dst = b;
  buffer_ref(b);
  op->dst_off = off;
  op->n = n;
  return op;
}

static op_t *op_read(stream_t *st, buffer_t *b, size_t off, size_t n, seen_t *s)
{
  op_t *op = op_new(OP_READ, st, to(s));

  ck_assert_ptr_nonnull(op);
  op->host = bufpool_get(n);
  op->src = b;
  buffer_ref(b);
  op->src_off = off;
  op->n = n;
  return op;
}

static op_t *op_memset(stream_t *st, buffer_t *b, size_t off, size_t n,
                       int value, seen_t *s)
{
  op_t *op = op_new(OP_MEMSET, st, to(s));

  ck_assert_ptr_nonnull(op);
  op->dst = b;
  buffer_ref(b);
  op->dst_off = off;
  op->n = n;
  op->value = value;
  return op;
}

static op_t *op_copy(stream_t *st, buffer_t *dst, size_t doff, buffer_t *src,
                     size_t soff, size_t n, seen_t *s)
{
  op_t *op = op_new(OP_COPY, st, to(s));

  ck_assert_ptr_nonnull(op);
  op->dst = dst;
  op->src = src;
  buffer_ref(dst);
  buffer_ref(src);
  op->dst_off = doff;
  op->src_off = soff;
  op->n = n;
  return op;
}

static op_t *op_record(stream_t *st, event_t *ev, seen_t *s)
{
  op_t *op = op_new(OP_RECORD, st, to(s));

  ck_assert_ptr_nonnull(op);
  op->ev = ev;
  event_ref(ev);
  return op;
}

static op_t *op_simple(op_kind_t kind, stream_t *st, seen_t *s)
{
  op_t *op = op_new(kind, st, to(s));

  ck_assert_ptr_nonnull(op);
  return op;
}

START_TEST(test_buffer_accounting)
{
  uint64_t before = cpu->allocated;
  uint32_t nbefore = cpu->buffers;
  buffer_t *b = make_buffer(8192);

  ck_assert_uint_eq(cpu->allocated, before + 8192);
  ck_assert_uint_eq(cpu->buffers, nbefore + 1);
  ck_assert_uint_eq(buffer_quota_bytes(b), 8192);
  ck_assert_uint_eq(b->elem_size, 1);
  /* A reference held elsewhere keeps the memory. */
  buffer_ref(b);
  buffer_unref(b);
  drain();
  ck_assert_uint_eq(cpu->allocated, before + 8192);
  /* The last one frees it, and only then the accounting falls. */
  buffer_unref(b);
  ck_assert_uint_eq(cpu->allocated, before + 8192);
  drain();
  ck_assert_uint_eq(cpu->allocated, before);
  ck_assert_uint_eq(cpu->buffers, nbefore);
}
END_TEST

START_TEST(test_buffer_too_large)
{
  seen_t s = {0};

  /* More than the host can give: the driver refuses, the completion says
   * why and no buffer is made or counted. */
  ck_assert_int_eq(buffer_alloc(cpu, SIZE_MAX / 2, 1, to(&s)), 0);
  wait_for(&s);
  ck_assert_int_ne(s.status, 0);
  ck_assert_ptr_null(s.buffer);
  ck_assert_msg(strstr(s.err, "cannot allocate") != NULL, "err: %s", s.err);
  ck_assert_uint_eq(cpu->buffers, 0);
}
END_TEST

START_TEST(test_write_memset_copy_read)
{
  buffer_t *a = make_buffer(256), *b = make_buffer(256);
  stream_t *st = make_stream();
  unsigned char pattern[256], want[256];
  seen_t w = {0}, m = {0}, c = {0}, r = {0};

  for (int i = 0; i < 256; i++)
    pattern[i] = (unsigned char)i;
  ck_assert_int_eq(op_submit(op_write(st, a, 0, pattern, 256, &w)), 0);
  ck_assert_int_eq(op_submit(op_memset(st, a, 16, 32, 0xab, &m)), 0);
  ck_assert_int_eq(op_submit(op_copy(st, b, 8, a, 0, 200, &c)), 0);
  ck_assert_int_eq(op_submit(op_read(st, b, 0, 256, &r)), 0);
  /* The buffers' handles may go now: the ops hold their own references. */
  buffer_unref(a);
  buffer_unref(b);
  wait_for(&r);
  /* One stream: completed in the order submitted. */
  ck_assert_int_eq(m.order, w.order + 1);
  ck_assert_int_eq(c.order, w.order + 2);
  ck_assert_int_eq(r.order, w.order + 3);
  ck_assert_int_eq(w.status | m.status | c.status | r.status, 0);
  ck_assert_ptr_nonnull(r.bytes);
  ck_assert_uint_eq(r.len, 256);
  memcpy(want, pattern, sizeof(want));
  memset(want + 16, 0xab, 32);
  /* b[8, 208) is a[0, 200); the rest of b is whatever it held. */
  ck_assert_mem_eq((unsigned char *)r.bytes + 8, want, 200);
  bufpool_put(r.bytes);
  stream_unref(st);
}
END_TEST

START_TEST(test_read_left_to_the_op)
{
  buffer_t *a = make_buffer(64);
  stream_t *st = make_stream();
  op_t *op = op_new(OP_READ, st, (obj_done_t){NULL, NULL});
  seen_t s = {0};

  /* A completion that does not take the bytes, and an op nobody waits
   * for: the layer frees what it made. */
  op->host = bufpool_get(64);
  op->src = a;
  buffer_ref(a);
  op->n = 64;
  ck_assert_int_eq(op_submit(op), 0);
  ck_assert_int_eq(op_submit(op_simple(OP_SYNC, st, &s)), 0);
  wait_for(&s);
  ck_assert_int_eq(s.status, 0);
  buffer_unref(a);
  stream_unref(st);
}
END_TEST

START_TEST(test_query_and_sync)
{
  stream_t *st = make_stream();
  seen_t q = {0}, y = {0};

  ck_assert_int_eq(op_submit(op_simple(OP_SYNC, st, &y)), 0);
  wait_for(&y);
  ck_assert_int_eq(y.status, 0);
  ck_assert_uint_eq(stream_pending(st), 0);
  ck_assert_int_eq(op_submit(op_simple(OP_QUERY, st, &q)), 0);
  wait_for(&q);
  ck_assert_int_eq(q.status, 0);
  ck_assert_int_eq(q.idle, 1);
  stream_unref(st);
}
END_TEST

START_TEST(test_event_order)
{
  buffer_t *a = make_buffer(4096);
  stream_t *st = make_stream();
  event_t *e1 = make_event(), *e2 = make_event();
  unsigned char bytes[4096] = {1};
  seen_t w = {0}, r1 = {0}, r2 = {0}, w1 = {0}, w2 = {0}, y = {0}, el = {0};

  ck_assert_int_eq(op_submit(op_record(st, e1, &r1)), 0);
  /* Recorded: pending as soon as it is queued. */
  ck_assert_int_eq(e1->state, EVENT_PENDING);
  ck_assert_int_eq(event_wait(e1, to(&w1)), 0);
  ck_assert_int_eq(op_submit(op_write(st, a, 0, bytes, sizeof(bytes), &w)), 0);
  ck_assert_int_eq(op_submit(op_record(st, e2, &r2)), 0);
  ck_assert_int_eq(event_wait(e2, to(&w2)), 0);
  ck_assert_int_eq(op_submit(op_simple(OP_SYNC, st, &y)), 0);
  wait_for(&y);
  ck_assert_int_eq(r1.status | w.status | r2.status | y.status, 0);
  ck_assert_int_eq(w1.status | w2.status, 0);
  /* The ops complete in stream order, and each event before the op after
   * its mark: e1 before the write, e2 before the sync. */
  ck_assert_int_lt(r1.order, w.order);
  ck_assert_int_lt(w.order, r2.order);
  ck_assert_int_lt(r2.order, y.order);
  ck_assert_int_lt(w1.order, w.order);
  ck_assert_int_lt(w1.order, w2.order);
  ck_assert_int_lt(w2.order, y.order);
  ck_assert_int_eq(e1->state, EVENT_COMPLETE);
  ck_assert_int_eq(e2->state, EVENT_COMPLETE);
  /* A completed event answers a wait at once. */
  seen_t again = {0};
  ck_assert_int_eq(event_wait(e2, to(&again)), 0);
  ck_assert_int_eq(again.called, 1);
  /* The host's clock between the two marks. */
  ck_assert_int_eq(event_elapsed(e1, e2, to(&el)), 0);
  wait_for(&el);
  ck_assert_int_eq(el.status, 0);
  ck_assert(el.device_ms >= 0.0f);
  event_unref(e1);
  event_unref(e2);
  buffer_unref(a);
  stream_unref(st);
}
END_TEST

START_TEST(test_timed_op)
{
  buffer_t *a = make_buffer(1 << 16);
  stream_t *st = make_stream();
  op_t *op;
  seen_t m = {0}, u = {0};
  uint64_t before = exec_now_ns();

  op = op_memset(st, a, 0, 1 << 16, 7, &m);
  op->timed = 1;
  ck_assert_int_eq(op_submit(op), 0);
  ck_assert_int_eq(op_submit(op_memset(st, a, 0, 16, 0, &u)), 0);
  wait_for(&u);
  ck_assert_int_eq(m.status, 0);
  ck_assert_int_eq(m.timed, 1);
  ck_assert_uint_ge(m.start_ns, before);
  ck_assert_uint_le(m.start_ns, exec_now_ns());
  ck_assert(m.device_ms >= 0.0f);
  /* Not asked, not timed. */
  ck_assert_int_eq(u.timed, 0);
  buffer_unref(a);
  stream_unref(st);
}
END_TEST

START_TEST(test_failed_stream)
{
  buffer_t *a = make_buffer(64);
  stream_t *st = make_stream();
  event_t *ev = make_event();
  unsigned char bytes[64] = {0};
  seen_t w = {0}, r = {0}, ew = {0}, y = {0};

  /* As if its driver stream could not be made: every op queued on it
   * fails with the creation's code, and so do the events recorded on it. */
  st->status = HIPD_EDEVICE;
  ck_assert_int_eq(op_submit(op_write(st, a, 0, bytes, sizeof(bytes), &w)), 0);
  ck_assert_int_eq(op_submit(op_record(st, ev, &r)), 0);
  ck_assert_int_eq(event_wait(ev, to(&ew)), 0);
  ck_assert_int_eq(op_submit(op_simple(OP_SYNC, st, &y)), 0);
  wait_for(&y);
  ck_assert_int_eq(w.status, HIPD_EDEVICE);
  ck_assert_str_eq(w.err, "the stream could not be created");
  ck_assert_int_eq(r.status, HIPD_EDEVICE);
  ck_assert_int_eq(y.status, HIPD_EDEVICE);
  wait_for(&ew);
  ck_assert_int_eq(ew.status, HIPD_EDEVICE);
  ck_assert_str_eq(ew.err, "the event's stream failed");
  ck_assert_int_eq(ev->state, EVENT_COMPLETE);
  ck_assert_int_eq(ev->status, HIPD_EDEVICE);
  event_unref(ev);
  buffer_unref(a);
  stream_unref(st);
}
END_TEST

START_TEST(test_discard)
{
  buffer_t *a = make_buffer(64);
  stream_t *st = make_stream();
  event_t *ev = event_new(cpu);
  seen_t s = {0};

  /* Dropped before it was queued: its references go, its completion is
   * never called. */
  op_discard(op_memset(st, a, 0, 64, 1, &s));
  event_discard(ev);
  buffer_unref(a);
  stream_unref(st);
  drain();
  ck_assert_int_eq(s.called, 0);
  ck_assert_uint_eq(cpu->buffers, 0);
}
END_TEST

/* ------------------------------------------------------------ executors */

#define SPIN_EXECUTORS 8

static void count_run(task_t *t)
{
  (void)t;
}

static void count_done(task_t *t)
{
  completions++;
  free(t);
}

/* Run one task on each executor and wait for their completions. */
static void one_task_each(executor_t **ex)
{
  int before = completions;

  for (int i = 0; i < SPIN_EXECUTORS; i++) {
    task_t *t = task_new(sizeof(*t), count_run, count_done);
    ck_assert_ptr_nonnull(t);
    exec_submit(ex[i], t);
  }
  while (completions < before + SPIN_EXECUTORS)
    uv_run(loop, UV_RUN_ONCE);
}

/* Busy polling is bounded by the spin budget, not per thread: 8
 * executors that have just run a task, with a 20 s poll and a budget of 2,
 * spin 2 at once (the others sleep), and a task for a sleeping one still
 * runs. */
START_TEST(test_spin_bounded)
{
  executor_t *ex[SPIN_EXECUTORS];
  const uint32_t cap = 2;
  uint32_t most = 0;
  uint64_t deadline;
  spin_stats_t st;
  hipd_err_t err;

  ck_assert_int_eq(spin_budget_create(cap, 4, &err), 0);
  exec_set_busy_poll(20 * 1000 * 1000);
  loop = uv_default_loop();
  ck_assert_int_eq(exec_bridge_init(loop), 0);
  completions = 0;
  for (int i = 0; i < SPIN_EXECUTORS; i++)
    ck_assert_ptr_nonnull(ex[i] = exec_create("hipd-spin", NULL, NULL));
  for (int round = 0; round < 3; round++) {
    one_task_each(ex);
    /* The executors that got a place spin; the count never passes it. */
    deadline = exec_now_ns() + 10ull * 1000 * 1000 * 1000;
    do {
      spin_get_stats(&st);
      most = st.taken > most ? st.taken : most;
      usleep(1000);
    } while (st.taken < cap && exec_now_ns() < deadline);
    for (int k = 0; k < 100; k++) {
      spin_get_stats(&st);
      most = st.taken > most ? st.taken : most;
      usleep(100);
    }
    ck_assert_msg(most <= cap, "%u executors spun at once, the cap is %u", most,
                  cap);
    spin_get_stats(&st);
    ck_assert_uint_eq(st.taken, cap);
    ck_assert_uint_eq(st.mine, cap);
  }
  ck_assert_int_eq(completions, 3 * SPIN_EXECUTORS);
  for (int i = 0; i < SPIN_EXECUTORS; i++)
    exec_destroy(ex[i]);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.taken, 0);
  exec_bridge_close();
  uv_run(loop, UV_RUN_DEFAULT);
}
END_TEST

/* ----------------------------------------------------------------- pools */

#define POOL_QUEUES 10
#define POOL_TASKS 200 /* per queue, behind its gate */

typedef struct {
  task_t t;
  int q, seq;
} ptask_t;

static atomic_int gate_open, gates_running, gates_most;
static int pool_next[POOL_QUEUES]; /* each queue's: its tasks are serial */
static atomic_int pool_misordered, pool_logged;
static int pool_log[64]; /* which queue ran, in order (pool_logged) */
static int pool_gone;

/* Wait for the gate to open, counting how many gates wait at once. */
static void gate_run(task_t *t)
{
  int now = atomic_fetch_add(&gates_running, 1) + 1;
  int most = atomic_load(&gates_most);

  (void)t;
  while (now > most && !atomic_compare_exchange_weak(&gates_most, &most, now))
    ;
  while (!atomic_load(&gate_open))
    usleep(200);
  atomic_fetch_sub(&gates_running, 1);
}

static void ptask_run(task_t *t)
{
  ptask_t *p = (ptask_t *)t;

  int at;

  if (p->seq != pool_next[p->q])
    atomic_fetch_add(&pool_misordered, 1);
  pool_next[p->q]++;
  at = atomic_fetch_add(&pool_logged, 1);
  if (at < (int)(sizeof(pool_log) / sizeof(pool_log[0])))
    pool_log[at] = p->q;
}

static void pool_queue_gone(void *arg)
{
  (void)arg;
  pool_gone++;
}

static void pool_start(void)
{
  loop = uv_default_loop();
  ck_assert_int_eq(exec_bridge_init(loop), 0);
  exec_set_busy_poll(0); /* whatever an earlier test set (CK_FORK=no) */
  completions = 0;
  pool_gone = 0;
  atomic_store(&pool_logged, 0);
  atomic_store(&pool_misordered, 0);
  memset(pool_next, 0, sizeof(pool_next));
  atomic_store(&gate_open, 0);
  atomic_store(&gates_running, 0);
  atomic_store(&gates_most, 0);
}

static void pool_submit(executor_t *ex, int q, int seq)
{
  ptask_t *p = task_new(sizeof(*p), seq < 0 ? gate_run : ptask_run, count_done);

  ck_assert_ptr_nonnull(p);
  p->q = q;
  p->seq = seq;
  exec_submit(ex, &p->t);
}

/* Every queue of @p pool gone: destroy it (which must succeed) and close
 * the bridge. */
static void pool_end(exec_pool_t *pool)
{
  ck_assert_int_eq(exec_pool_destroy(pool), 0);
  exec_bridge_close();
  uv_run(loop, UV_RUN_DEFAULT);
}

static void pool_wait(int n)
{
  while (completions < n)
    uv_run(loop, UV_RUN_ONCE);
}

/* Until @p what holds or 10 s pass. */
#define POOL_UNTIL(what)                                                       \
  do {                                                                         \
    uint64_t until_ = exec_now_ns() + 10ull * 1000 * 1000 * 1000;              \
    while (!(what) && exec_now_ns() < until_)                                  \
      usleep(1000);                                                            \
  } while (0)

/* Ten streams' queues on a pool of 3 threads: while each queue's first task
 * waits (as a task waits for the device), 3 run and the pool has 3
 * threads, not 10; once they go on, 2,000 tasks complete, each queue's in
 * the order submitted; the queues retire, and the pool is destroyed only
 * once they are gone. */
START_TEST(test_pool_bounded)
{
  executor_t *ex[POOL_QUEUES];
  exec_pool_t *pool;

  pool_start();
  ck_assert_ptr_nonnull(pool = exec_pool_create("hipd-pool", 3, NULL, NULL));
  ck_assert_uint_eq(exec_pool_threads(pool), 1);
  for (int q = 0; q < POOL_QUEUES; q++) {
    ck_assert_ptr_nonnull(ex[q] = exec_create_in(pool));
    pool_submit(ex[q], q, -1);
    for (int i = 0; i < POOL_TASKS; i++)
      pool_submit(ex[q], q, i);
  }
  POOL_UNTIL(atomic_load(&gates_running) == 3);
  usleep(50 * 1000);
  ck_assert_int_eq(atomic_load(&gates_running), 3);
  ck_assert_uint_eq(exec_pool_threads(pool), 3);
  ck_assert_int_eq(exec_pool_destroy(pool), HIPD_EBUSY);
  atomic_store(&gate_open, 1);
  pool_wait(POOL_QUEUES * (POOL_TASKS + 1));
  ck_assert_int_eq(atomic_load(&gates_most), 3);
  ck_assert_int_eq(atomic_load(&pool_misordered), 0);
  for (int q = 0; q < POOL_QUEUES; q++) {
    ck_assert_int_eq(pool_next[q], POOL_TASKS);
    ck_assert_uint_eq(exec_pending(ex[q]), 0);
    exec_retire(ex[q], pool_queue_gone, NULL);
  }
  drain();
  ck_assert_int_eq(pool_gone, POOL_QUEUES);
  pool_end(pool);
}
END_TEST

/* A queue with many tasks does not hold a pool's thread from the others: on
 * one thread, queue 0's 40 tasks and then queue 1's one, submitted while the
 * thread waits in queue 0's first task; queue 1's runs after 16 of queue 0. */
START_TEST(test_pool_fair)
{
  executor_t *a, *b;
  exec_pool_t *pool;
  int at = -1;

  pool_start();
  ck_assert_ptr_nonnull(pool = exec_pool_create("hipd-pool", 1, NULL, NULL));
  ck_assert_ptr_nonnull(a = exec_create_in(pool));
  ck_assert_ptr_nonnull(b = exec_create_in(pool));
  pool_submit(a, 0, -1);
  POOL_UNTIL(atomic_load(&gates_running) == 1);
  for (int i = 0; i < 40; i++)
    pool_submit(a, 0, i);
  pool_submit(b, 1, 0);
  atomic_store(&gate_open, 1);
  pool_wait(42);
  ck_assert_int_eq(atomic_load(&pool_misordered), 0);
  ck_assert_int_eq(atomic_load(&pool_logged), 41);
  for (int i = 0; i < 41; i++)
    if (pool_log[i] == 1)
      at = i;
  /* The gate and 15 tasks of queue 0 (a batch of 16), then queue 1. */
  ck_assert_int_eq(at, 15);
  exec_retire(a, pool_queue_gone, NULL);
  exec_retire(b, pool_queue_gone, NULL);
  drain();
  ck_assert_int_eq(pool_gone, 2);
  pool_end(pool);
}
END_TEST

/* The threads a burst started end after 2 s without work, down to one; a
 * queue retired while it still has work retires once that ran. */
START_TEST(test_pool_idle_threads_end)
{
  executor_t *ex[4];
  exec_pool_t *pool;

  pool_start();
  ck_assert_ptr_nonnull(pool = exec_pool_create("hipd-pool", 4, NULL, NULL));
  for (int q = 0; q < 4; q++) {
    ck_assert_ptr_nonnull(ex[q] = exec_create_in(pool));
    pool_submit(ex[q], q, -1);
    pool_submit(ex[q], q, 0);
  }
  POOL_UNTIL(atomic_load(&gates_running) == 4);
  ck_assert_uint_eq(exec_pool_threads(pool), 4);
  for (int q = 0; q < 4; q++)
    exec_retire(ex[q], pool_queue_gone, NULL);
  atomic_store(&gate_open, 1);
  drain();
  ck_assert_int_eq(completions, 8);
  ck_assert_int_eq(pool_gone, 4);
  for (int q = 0; q < 4; q++)
    ck_assert_int_eq(pool_next[q], 1);
  POOL_UNTIL(exec_pool_threads(pool) == 1);
  ck_assert_uint_eq(exec_pool_threads(pool), 1);
  pool_end(pool);
}
END_TEST

/* A task that waits for the device may wait for work queued behind it on
 * another stream (a kernel spinning on a flag a later copy writes): on a
 * pool of one thread, queue 0's task waits (exec_wait_begin) for a flag
 * that only queue 1's task sets; the pool starts a second thread for it,
 * beyond its bound, and both complete. With the bound counting the waiting
 * thread, queue 1 would wait for ever (here: queue 0 gives up after 10 s
 * and the test fails). */
static atomic_int dep_flag, dep_gave_up;

static void dep_wait_run(task_t *t)
{
  uint64_t until = exec_now_ns() + 10ull * 1000 * 1000 * 1000;

  (void)t;
  exec_wait_begin();
  while (!atomic_load(&dep_flag) && exec_now_ns() < until)
    usleep(200);
  if (!atomic_load(&dep_flag))
    atomic_store(&dep_gave_up, 1);
  exec_wait_end();
}

static void dep_set_run(task_t *t)
{
  (void)t;
  atomic_store(&dep_flag, 1);
}

START_TEST(test_pool_wait_needs_another_queue)
{
  executor_t *a, *b;
  exec_pool_t *pool;
  task_t *t;

  pool_start();
  atomic_store(&dep_flag, 0);
  atomic_store(&dep_gave_up, 0);
  ck_assert_ptr_nonnull(pool = exec_pool_create("hipd-pool", 1, NULL, NULL));
  ck_assert_ptr_nonnull(a = exec_create_in(pool));
  ck_assert_ptr_nonnull(b = exec_create_in(pool));
  ck_assert_ptr_nonnull(t = task_new(sizeof(*t), dep_wait_run, count_done));
  exec_submit(a, t);
  ck_assert_ptr_nonnull(t = task_new(sizeof(*t), dep_set_run, count_done));
  exec_submit(b, t);
  pool_wait(2);
  ck_assert_int_eq(atomic_load(&dep_gave_up), 0);
  ck_assert_uint_eq(exec_pool_threads(pool), 2);
  exec_retire(a, pool_queue_gone, NULL);
  exec_retire(b, pool_queue_gone, NULL);
  drain();
  /* The second ends after 2 s idle: the bound holds again. */
  POOL_UNTIL(exec_pool_threads(pool) == 1);
  ck_assert_uint_eq(exec_pool_threads(pool), 1);
  pool_end(pool);
}
END_TEST

/* A budget of 2 with none taken: two places, then none; given back. */
static void spin_two_places(void)
{
  ck_assert_int_eq(spin_enter(), 1);
  ck_assert_int_eq(spin_enter(), 1);
  ck_assert_int_eq(spin_enter(), 0);
  spin_leave();
  spin_leave();
}

/* The budget is counted across processes: a second process that maps it
 * takes places this one then cannot take; when that process dies holding
 * them, they stay taken until its slot is released, and then come back. */
START_TEST(test_spin_shared_and_reclaimed)
{
  int go[2], slot, rc;
  pid_t pid;
  char c;
  spin_stats_t st;
  hipd_err_t err;

  ck_assert_int_eq(spin_budget_create(2, 3, &err), 0);
  ck_assert_int_ge(spin_budget_fd(), 0);
  slot = spin_slot_take();
  ck_assert_int_eq(slot, 1);
  ck_assert_int_eq(spin_slot_take(), 2);
  ck_assert_int_eq(spin_slot_take(), -1); /* 3 slots, the first ours */
  spin_slot_release(2);
  ck_assert_int_eq(pipe(go), 0);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* A worker: its own mapping, its own slot; it dies holding both. */
    int ok =
        spin_budget_attach(dup(spin_budget_fd()), (uint32_t)slot, &err) == 0 &&
        spin_enter() && spin_enter() && !spin_enter();
    if (write(go[1], ok ? "y" : "n", 1) != 1)
      _exit(2);
    pause();
    _exit(0);
  }
  ck_assert_int_eq(read(go[0], &c, 1), 1);
  ck_assert_int_eq(c, 'y');
  spin_get_stats(&st);
  ck_assert_uint_eq(st.cap, 2);
  ck_assert_uint_eq(st.taken, 2);
  ck_assert_uint_eq(st.mine, 0);
  ck_assert(st.shared);
  ck_assert_int_eq(spin_enter(), 0); /* spent, by the other process */
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, &rc, 0), pid);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.taken, 2); /* the dead hold them */
  spin_slot_release(slot);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.taken, 0);
  spin_two_places();
  /* Tuning never allows more than the cap; without sessions, the whole
   * cap again. */
  spin_budget_tune();
  spin_get_stats(&st);
  ck_assert_uint_le(st.limit, 2);
  loop = uv_default_loop();
  spin_tune_set(loop, 1);
  spin_tune_set(loop, 0);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 2);
  spin_tune_close();
  uv_run(loop, UV_RUN_DEFAULT);
  close(go[0]);
  close(go[1]);
}
END_TEST

/* A worker can write anything into the page it shares with the listener:
 * the listener keeps its own count of slots and its own cap, so a page
 * that claims more slots makes it read nothing past its own (ASan would
 * say so), and a claimed cap of 1000 never lets more than the real cap
 * spin. */
START_TEST(test_spin_page_distrusted)
{
  uint32_t *page;
  spin_stats_t st;
  hipd_err_t err;

  ck_assert_int_eq(spin_budget_create(2, 3, &err), 0);
  page =
      mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, spin_budget_fd(), 0);
  ck_assert(page != MAP_FAILED);
  page[1] = 1u << 30; /* nslots */
  page[2] = 1000;     /* cap */
  page[3] = 1000;     /* limit */
  ck_assert_int_eq(spin_slot_take(), 1);
  ck_assert_int_eq(spin_slot_take(), 2);
  ck_assert_int_eq(spin_slot_take(), -1); /* 3 slots, whatever it says */
  spin_slot_release(5);                   /* not a slot: nothing */
  spin_get_stats(&st);
  ck_assert_uint_eq(st.cap, 2);
  /* The tuning sets the limit from the real cap, and puts it back. */
  spin_budget_tune();
  spin_get_stats(&st);
  ck_assert_uint_le(st.limit, 2);
  loop = uv_default_loop();
  spin_tune_set(loop, 1);
  page[3] = 1000;
  spin_tune_set(loop, 0);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 2);
  spin_two_places();
  spin_tune_close();
  uv_run(loop, UV_RUN_DEFAULT);
  munmap(page, 4096);
}
END_TEST

/* The places allowed follow the host's runnable tasks: none on a full
 * host, all of the cap again once it is idle, however long it was full
 * (the smoothed average comes back to 0, not to a fraction of a task that
 * keeps a place away for good), and at once from a sample taken alone. */
START_TEST(test_spin_limit_follows_the_host)
{
  spin_stats_t st;
  hipd_err_t err;

  ck_assert_int_eq(spin_budget_create(4, 2, &err), 0);
  for (int i = 0; i < 20; i++)
    spin_budget_sample(100, 8, 1);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 0);
  /* This thread alone is runnable: 8 CPUs free, the cap of 4 allowed. */
  for (int i = 0; i < 40; i++)
    spin_budget_sample(1, 8, 1);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 4);
  /* Smoothed: one full sample takes some places, not all. */
  spin_budget_sample(100, 8, 1);
  spin_get_stats(&st);
  ck_assert_uint_lt(st.limit, 4);
  /* Alone, a sample sets the limit by itself. */
  spin_budget_sample(100, 8, 0);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 0);
  spin_budget_sample(6, 8, 0);
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 3); /* 5 others on 8 CPUs */
  spin_budget_sample(-1, 8, 0);   /* not known: unchanged */
  spin_get_stats(&st);
  ck_assert_uint_eq(st.limit, 3);
}
END_TEST

/* A worker handed something that is not the budget never spins. */
START_TEST(test_spin_attach_refused)
{
  int fd = memfd_create("not-the-budget", MFD_CLOEXEC);
  hipd_err_t err;

  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 8192), 0);
  ck_assert_int_eq(spin_budget_attach(fd, 1, &err), HIPD_EINVAL);
  ck_assert_msg(strstr(err.msg, "spin budget") != NULL, "%s", err.msg);
  ck_assert_int_eq(spin_enter(), 0);
}
END_TEST

static Suite *objects_suite(void)
{
  Suite *s = suite_create("objects");
  TCase *tc = tcase_create("buffers");

  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_buffer_accounting);
  tcase_add_test(tc, test_buffer_too_large);
  suite_add_tcase(s, tc);

  tc = tcase_create("ops");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_write_memset_copy_read);
  tcase_add_test(tc, test_read_left_to_the_op);
  tcase_add_test(tc, test_query_and_sync);
  tcase_add_test(tc, test_timed_op);
  tcase_add_test(tc, test_discard);
  suite_add_tcase(s, tc);

  tc = tcase_create("events");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_event_order);
  tcase_add_test(tc, test_failed_stream);
  suite_add_tcase(s, tc);

  tc = tcase_create("executors");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_spin_bounded);
  tcase_add_test(tc, test_spin_shared_and_reclaimed);
  tcase_add_test(tc, test_spin_attach_refused);
  tcase_add_test(tc, test_spin_page_distrusted);
  tcase_add_test(tc, test_spin_limit_follows_the_host);
  tcase_add_test(tc, test_pool_bounded);
  tcase_add_test(tc, test_pool_fair);
  tcase_add_test(tc, test_pool_idle_threads_end);
  tcase_add_test(tc, test_pool_wait_needs_another_queue);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(objects_suite());
}
