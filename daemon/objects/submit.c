/* SPDX-License-Identifier: MIT */
/* daemon/objects/submit.c: where an op runs: queued on its stream's
 * executor, or, for a kernel launch or a copy to or from a page-locked
 * shared buffer, made by the loop thread itself.
 *
 * A launch normally crosses two threads of the worker: the loop decodes
 * and checks it and queues an op on the stream's executor, whose thread
 * launches, waits for the device and hands the completion back to the
 * loop. While the loop busy-polls (main.c's run_loop), a launch (or a
 * shared-buffer copy, inline_kind()) on a GPU stream with nothing queued
 * is made on the loop thread itself, and one
 * that waits for its kernel is completed when the loop's polling sees the
 * stream idle: no hand-off either way, and no thread blocked per stream.
 * The loop sees it by reading the stream's completion word (device.h),
 * which the device writes after each such op (a mark) when the loop
 * waited for no other stream as the stream's list began (mark()), or
 * else by asking the driver (stream_query). The loop polls for them with a
 * place of the spin budget, or without one for up to --busy-poll (main.c's
 * own_wait()). When the loop is about to sleep,
 * each stream still waited for is handed to its executor (one task that waits,
 * then completes the launches it covers through the bridge, which wakes the
 * loop), so a long kernel costs no polling.
 *
 * A client that streams launches nobody waits for (kernel.launch_begin
 * after kernel.launch_begin, within STREAMED_NS) gets the first made here
 * and the next ones by the executor, which launches while the loop reads
 * on (inl_async_ns).
 *
 * Order: a stream's ops reach the driver in the order they were
 * submitted. A launch is made here only while its stream's executor has
 * nothing queued or running (exec_pending); while a stream is parked, its
 * park task is queued, so later ops queue behind it. Completions of one
 * stream come in launch order.
 *
 * Not taken here: the CPU device (its launch runs the kernel), profiled
 * (timed) ops, kernels that print (their output comes out at a
 * stream_sync), and streams beyond op_inline_enable()'s count.
 */
#include "config.h"

#include <stddef.h>

#include "kernels/kernels.h"
#include "objects/internal.h"
#include "objects/objects.h"

/* A stream whose word says "not yet" this many times is asked the
 * driver once: a fault stops the device before the mark, and only the
 * driver tells. */
#define ASK_EVERY 1024

/* An op nobody waits for that comes within this long of the last one the
 * loop made on its stream is streamed work (inl_async_ns). A client that
 * waits by other means (an event, stream.query) comes back later. */
#define STREAMED_NS 20000

static unsigned max_streams; /* 0: off */
static stream_t *polled;     /* streams waited for; loop thread only */
static unsigned npolled;
/* The link (&polled or a polled stream's inl_next) of the stream
 * op_inline_poll() looks at first next time. */
static stream_t **poll_at = &polled;

void op_inline_enable(unsigned streams)
{
  max_streams = streams;
}

int op_inline_waiting(void)
{
  return polled != NULL;
}

/* Does @p op return at once from the driver, so that the loop may make
 * it: a launch, or a copy between device memory and a shared buffer that
 * the stream's driver page-locked (asynchronous; from pageable memory the
 * runtime would copy before it returns). */
static int inline_kind(const op_t *op)
{
  const shm_t *m = op->shm;

  if (op->kind == OP_LAUNCH)
    return 1;
  return (op->kind == OP_WRITE || op->kind == OP_READ) && m != NULL &&
         m->reg == op->st->dev && m->reg_epoch == device_epoch(m->reg);
}

/* After an op of @p st made here that is waited for (a launch, or a
 * shared-buffer copy): have the device write the stream's word when it
 * gets there. The op that starts the stream's polled list decides whether
 * the list is marked: yes while the loop waits for no other stream, and
 * then its later ops are marked too, whoever joins meanwhile; one mark
 * that fails leaves the list to the driver's answer. Measured on the
 * H200 (bench/RESULTS.md): alone, the word tells the end of a kernel
 * 2.3 us before hipStreamQuery does and one client's kernels go faster
 * (share_n1 0.81x of direct HIP against 0.78x); with sixteen clients, a
 * mark on every launch cost the device more than the queries it saved
 * the loops (455k kernels/s against 513k/s). */
static void mark(stream_t *st)
{
  if (!st->inl_polled) {
    st->inl_marked = 0;
    st->inl_misses = 0;
    if (npolled == 0) {
      if (st->word == 0)
        st->word = device_word_get(st->dev) + 1;
      st->inl_marked = st->word != 0;
    }
  }
  if (!st->inl_marked)
    return;
  if (device_word_mark(st->dev, st->drv, st->word - 1) != 0)
    st->inl_marked = 0;
}

/* Make @p op on the loop thread if it qualifies. @return 1 if it was
 * taken (its completion will come), 0 to queue it as usual. */
static int inline_try(op_t *op)
{
  stream_t *st = op->st;
  device_t *dev = st->dev;
  driver_t *drv = dev->drv;

  if (max_streams == 0 || !inline_kind(op) || op->timed || dev->caps.is_cpu ||
      drv->stream_query == NULL || st->inl_parking || exec_pending(st->ex) != 0)
    return 0;
  if (op->wait && !st->inl_polled && npolled >= max_streams)
    return 0;
  /* A second op in a row that nobody waits for (kernel.launch_begin
   * after kernel.launch_begin), within STREAMED_NS of the first, is a
   * client streaming work: the stream's executor launches it while the
   * loop reads the next, where the loop alone would do both in turn
   * (launch_throughput on an H100: 344k-357k launches/s so against
   * 222k/s; a direct HIP process 335k-385k/s). A launch waited for, or
   * the first after one that was or after a pause, stays here: that is
   * the round trip the loop saves. */
  if (!op->wait && st->inl_async_ns != 0 &&
      util_now_ns() - st->inl_async_ns < STREAMED_NS)
    return 0;
  if (op->kind == OP_LAUNCH && drv->kernel_prints != NULL &&
      drv->kernel_prints(drv, op->kernel->fn))
    return 0;
  if (drv->bind_thread(drv, dev->local) != 0)
    return 0;
  task_expect(&op->t);
  op->polled = 1;
  op_run_task(&op->t);
  if (op->t.err.code != 0 || !op->wait) {
    if (!op->wait)
      st->inl_async_ns = util_now_ns();
    task_complete_here(&op->t);
    return 1;
  }
  mark(st);
  op->t.next = NULL;
  if (st->inl_tail != NULL)
    st->inl_tail->t.next = &op->t;
  else
    st->inl_head = op;
  st->inl_tail = op;
  if (!st->inl_polled) {
    st->inl_polled = 1;
    st->inl_next = polled;
    polled = st;
    npolled++;
  }
  return 1;
}

/* Complete the launches of list @p op (linked by t.next) with @p status
 * and message @p msg (status 0: none). */
static void finish(op_t *op, int status, const char *msg)
{
  while (op != NULL) {
    op_t *next = (op_t *)op->t.next;

    if (status != 0)
      task_fail(&op->t, status, "the stream failed: %s", msg);
    task_complete_here(&op->t);
    op = next;
  }
}

/* Take @p st out of the polled list at @p link; @return its launches. */
static op_t *unlink_stream(stream_t **link, stream_t *st)
{
  op_t *ops = st->inl_head;

  *link = st->inl_next;
  st->inl_next = NULL;
  st->inl_polled = 0;
  st->inl_async_ns = 0;
  st->inl_head = st->inl_tail = NULL;
  npolled--;
  return ops;
}

/* Has the device finished @p st's launches: 0, HIPD_ENOTREADY, or the
 * stream's error. *asked is set when the driver was asked. */
static int finished_yet(stream_t *st, int *asked)
{
  driver_t *drv = st->dev->drv;
  int rc;

  if (st->inl_marked) {
    if (device_word_reached(st->dev, st->word - 1))
      return 0;
    if (++st->inl_misses < ASK_EVERY)
      return HIPD_ENOTREADY;
    st->inl_misses = 0;
  }
  *asked = 1;
  rc = drv->bind_thread(drv, st->dev->local);
  if (rc == 0)
    rc = drv->stream_query(drv, st->drv);
  return rc;
}

/*
 * Asking the driver about a stream the device has not finished costs a
 * call (hipStreamQuery, 16 % of a shared GPU's loop at N=16:
 * bench/RESULTS.md), and while the loop makes it a client's next
 * submission waits. So a call goes round the polled streams from where the
 * last one stopped, completes every finished stream it meets and stops at
 * the first unfinished one it had to ask about: one fruitless query a
 * call, not one for every stream waited for. A stream with a completion
 * word costs a read of memory, and the round goes on past it.
 */
int op_inline_poll(void)
{
  int finished = 0;

  for (unsigned left = npolled; left > 0; left--) {
    if (*poll_at == NULL)
      poll_at = &polled;
    stream_t *st = *poll_at;
    int asked = 0;
    int rc = finished_yet(st, &asked);

    if (rc == HIPD_ENOTREADY) {
      poll_at = &st->inl_next;
      if (asked)
        break;
      continue;
    }
    /* poll_at now links the stream after it. */
    finish(unlink_stream(poll_at, st), rc, rc != 0 ? drv_last_error() : NULL);
    finished++;
  }
  return finished;
}

/* task_t.early of a park task: answer the launches its wait covered
 * (objects.h). The list is the loop's again only in park_done(), which
 * runs after this. */
static void park_answer_early(task_t *t)
{
  stream_t *st = (stream_t *)((char *)t - offsetof(stream_t, inl_park));

  for (op_t *op = st->inl_parked; op != NULL; op = (op_t *)op->t.next)
    if (op->early.fn != NULL)
      op->early.fn(op->early.ctx);
}

/* On the stream's executor: wait for the device. */
static void park_run(task_t *t)
{
  stream_t *st = (stream_t *)((char *)t - offsetof(stream_t, inl_park));
  int rc = stream_wait(st);

  if (rc != 0)
    task_fail(t, rc, "%s", drv_last_error());
  else
    t->early = park_answer_early;
}

/* On the loop: complete what the wait covered. */
static void park_done(task_t *t)
{
  stream_t *st = (stream_t *)((char *)t - offsetof(stream_t, inl_park));
  op_t *ops = st->inl_parked;

  st->inl_parked = NULL;
  st->inl_parking = 0;
  finish(ops, t->err.code, t->err.msg);
}

void op_inline_park(void)
{
  while (polled != NULL) {
    stream_t *st = polled;

    st->inl_parked = unlink_stream(&polled, st);
    st->inl_parking = 1;
    /* Embedded in the stream: parking never fails for memory. */
    exec_submit(st->ex, task_init(&st->inl_park, park_run, park_done));
  }
  poll_at = &polled;
}

int op_submit(op_t *op)
{
  task_init(&op->t, op_run_task, op_done_task);
  if (op->kind == OP_RECORD && (op->mark = event_mark_new(op->ev)) == NULL) {
    op_discard(op);
    return HIPD_ENOMEM;
  }
  if (!inline_try(op))
    exec_submit(op->st->ex, &op->t);
  return 0;
}
