/* SPDX-License-Identifier: MIT */
/* daemon/objects/objects.h: the object layer: device buffers, streams,
 * events, and the operations queued on streams.
 *
 * What it owns: the lifetime of each object (reference-counted on the
 * loop thread: whoever keeps an object, a session's handle or a task in
 * flight, holds a reference, and the driver object is destroyed on a
 * worker once the last one goes, after the work that uses it), the device
 * accounting of buffers (device_t.allocated and .buffers rise when a
 * buffer is made and fall when its memory is released), and the work done
 * on workers (buffer.c, stream.c, event.c, op.c).
 *
 * Who calls it: methods/ (the handlers) and resources.c (a session's
 * objects and their release); tests/check_objects.c, without a socket.
 *
 * What it never calls: dispatch or sessions. It knows no call_t, no
 * session_t, no handle table and no msgpack: every piece of work that
 * completes later reports through a completion its caller supplies
 * (obj_done_t), called once on the loop thread with a status, a bounded
 * message and the result values; the caller packs the reply.
 */
#ifndef HIPD_OBJECTS_H
#define HIPD_OBJECTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "executor.h"
#include "hipd.h" /* the HIPD_E* codes */
#include "shm.h"

/* ------------------------------------------------------------ completions */

/* What a piece of work reports when it completes. Valid during the
 * completion only, except what the completion takes (see bytes, buffer). */
typedef struct obj_result {
  int status;      /* 0 or a negative HIPD_E* code */
  const char *err; /* when status != 0: what went wrong, NUL-terminated,
                      under 256 bytes */
  /* OP_READ into host memory: the bytes read (a bufpool block of len
   * bytes). The completion may take them, setting bytes to NULL; else they
   * are freed after it returns. NULL for a read into shared memory. */
  void *bytes;
  size_t len;
  int idle;              /* OP_QUERY: the stream had no work left */
  struct buffer *buffer; /* buffer_alloc/buffer_map_shm: the new buffer,
                            holding one reference that passes to the
                            completion; NULL on failure */
  int timed;             /* a timed op (op_t.timed) was measured: */
  uint64_t start_ns;     /* util_now_ns() when submitted to the device */
  float device_ms;       /* the device's time between the two marks */
} obj_result_t;

/* A completion: @p fn(@p ctx, result) runs once, on the loop thread. */
typedef void (*obj_done_fn)(void *ctx, obj_result_t *r);
typedef struct obj_done {
  obj_done_fn fn; /* NULL: nobody waits */
  void *ctx;
} obj_done_t;

/* An op's early answer: @p fn(@p ctx) runs at most once, on the thread of
 * the stream's executor that saw the op end without error (after its
 * wait, for one that waits), as its completion is queued for the loop
 * (executor.h's task_t.early: under the bridge's lock, so keep it short);
 * never for an op the loop made and completes itself (submit.c). It may
 * answer whoever waited (the caller's reply, made there: call.h's early
 * answers). obj_done_t still runs on the loop, as for every op. */
typedef struct obj_early {
  void (*fn)(void *ctx); /* NULL: none */
  void *ctx;
} obj_early_t;

/* A task on an object: creation, destruction, event marks (internal to
 * the object layer; in the structs so that teardown never allocates). */
typedef struct obj_task {
  task_t t;
  void *obj;
  uint32_t seq;
  obj_done_t done;
} obj_task_t;

/* ---------------------------------------------------------------- buffers */

typedef struct buffer {
  device_t *dev;
  drv_mem_t mem;
  size_t elem_size; /* bytes per element (1 for raw byte buffers) */
  uint32_t epoch;   /* the device context it was made in */
  int refs;
  struct shm *shm; /* zero-copy: the client's shared memory it is, holding a
                      reference; NULL for device memory */
  obj_task_t task; /* making it, then freeing it */
} buffer_t;

/* Make a buffer of @p size bytes (@p elem_size bytes per element) on
 * @p dev, on its service worker. @p done gets the buffer (r->buffer) or
 * the error; a driver's EDEVLOST marks the device lost first.
 * @return 0, or HIPD_ENOMEM (@p done is then never called). */
int buffer_alloc(device_t *dev, size_t size, size_t elem_size, obj_done_t done);
/* Make a zero-copy buffer on @p dev that is the shared memory @p m
 * (taking a reference on @p m, which the buffer keeps; on failure it is
 * dropped before @p done runs). @return 0 or HIPD_ENOMEM. */
int buffer_map_shm(device_t *dev, struct shm *m, obj_done_t done);
void buffer_ref(buffer_t *b);
/* Drop a reference; the last one frees the memory on the device's service
 * executor, then lowers the device's accounting. Never fails. */
void buffer_unref(buffer_t *b);

/* Bytes of a buffer that count against a session's quota (zero-copy
 * buffers count as their shared memory, once, at shm.create). */
static inline uint64_t buffer_quota_bytes(const buffer_t *b)
{
  return b->shm != NULL ? 0 : b->mem.size;
}

/* ---------------------------------------------------------------- streams */

typedef struct stream {
  device_t *dev;
  executor_t *ex; /* runs this stream's work in order, on dev->streams */
  void *drv;      /* the driver's stream, once created */
  int status;     /* creation result: later ops fail with it */
  int refs;
  uint32_t epoch;      /* the device context it was made in */
  struct watch *watch; /* its GPU time limit (watchdog.h), or NULL */
  obj_task_t create;   /* its first task */
  obj_task_t destroy;  /* its last task */
  /* Launches the loop thread made itself and waits for (submit.c);
   * loop thread only. */
  struct op *inl_head, *inl_tail; /* waiting for the device, in order */
  struct stream *inl_next;        /* in the loop's list of polled streams */
  int inl_polled;                 /* in that list */
  task_t inl_park;                /* its wait handed to the executor */
  struct op *inl_parked;          /* the launches that wait covers */
  int inl_parking;                /* inl_park is queued */
  uint64_t inl_async_ns; /* when the loop last made an op here that nobody
                            waits for; 0 once one that waited ended: one
                            more soon after goes to the executor
                            (submit.c) */
  int word;              /* its device completion word + 1; 0: none yet */
  int inl_marked;        /* each launch waited for is followed by a mark */
  unsigned inl_misses;   /* looks at the word since the driver was asked */
} stream_t;

/* A new stream on @p dev, served by the device's stream pool, or NULL
 * when out of memory. Its driver stream is created by stream_start(). */
stream_t *stream_new(device_t *dev);
/* Queue the creation of the driver stream as the stream's first task;
 * @p done (fn may be NULL) gets its status. Never fails. */
void stream_start(stream_t *st, obj_done_t done);
void stream_ref(stream_t *st);
/* Drop a reference; the last one destroys the driver stream after the
 * queued work and ends the worker. Never fails. */
void stream_unref(stream_t *st);
/* Work queued or running on the stream's worker. */
uint32_t stream_pending(const stream_t *st);
/* Wait for the device to finish @p st's work (the driver's stream_sync),
 * the thread meanwhile not counted against its pool's bound
 * (exec_wait_begin). @return 0 or the driver's code. On the stream's
 * thread. */
int stream_wait(stream_t *st);

/* ----------------------------------------------------------------- events */

enum { EVENT_UNRECORDED, EVENT_PENDING, EVENT_COMPLETE };

typedef struct event {
  device_t *dev;
  void *drv;    /* the driver's event */
  int state;    /* EVENT_* */
  int status;   /* error of the last record, if it failed */
  uint32_t seq; /* records issued; only the latest completes it */
  int refs;
  struct waiter *waiters; /* event_wait() completions to call */
  uint32_t epoch;         /* the device context it was made in */
  obj_task_t create;      /* making the driver event */
  obj_task_t destroy;     /* its last task */
  /* Stream workers record the driver's event and the service executor
   * reads its time: rec_lock orders them, and rec_seq (the seq of the
   * record the driver's event holds) keeps an earlier record that a
   * stream reaches late from replacing a later one. */
  pthread_mutex_t rec_lock;
  uint32_t rec_seq; /* under rec_lock */
} event_t;

/* A new event on @p dev (one reference), not yet made on the device;
 * NULL when out of memory. */
event_t *event_new(device_t *dev);
/* Create the driver event on the service executor; @p done gets the
 * status. Never fails. */
void event_start(event_t *ev, obj_done_t done);
/* Free an event that was never started (its only reference). */
void event_discard(event_t *ev);
void event_ref(event_t *ev);
void event_unref(event_t *ev);
/* Call @p done when @p ev completes: now if it has, else when the latest
 * record is passed. The status is the event's (message "the event's
 * stream failed"). @return 0, or HIPD_ENOMEM (@p done not called). */
int event_wait(event_t *ev, obj_done_t done);
/* Measure the device time between two completed events of one device, on
 * its service worker: r->device_ms. Takes references on both.
 * @return 0 or HIPD_ENOMEM. */
int event_elapsed(event_t *a, event_t *b, obj_done_t done);

/* ------------------------------------------------------------- stream ops */

typedef enum {
  OP_WRITE,  /* host bytes -> buffer */
  OP_READ,   /* buffer -> host bytes (the result) */
  OP_COPY,   /* buffer -> buffer, possibly across devices */
  OP_MEMSET, /* fill a buffer range */
  OP_SYNC,   /* wait for the stream; complete when done */
  OP_QUERY,  /* report whether the stream is idle */
  OP_RECORD, /* record an event */
  OP_LAUNCH, /* launch a kernel */
} op_kind_t;

struct kernel;

typedef struct op {
  task_t t;
  op_kind_t kind;
  obj_done_t done;   /* called once with the result */
  obj_early_t early; /* the answer from the executor's thread, if any */
  stream_t *st;
  buffer_t *dst, *src;
  size_t dst_off, src_off, n;
  int value;
  void *host;       /* WRITE: staged bytes (owned); READ: result; with shm: a
                       pointer into the shared memory (borrowed) */
  struct shm *shm;  /* the shared memory host points into, holding a ref */
  void *host_block; /* WRITE: the allocation host points into when it is
                       not host itself (a request's input buffer), owned */
  int wait;         /* complete only when the device has finished */
  event_t *ev;
  obj_task_t *mark; /* RECORD: completes the event later */
  int idle;         /* QUERY result */
  int timed;        /* time it between two device events (profiling) */
  int timed_ok;     /* device_ms was measured */
  float device_ms;  /* device time between the timing events */
  void *pev[2];     /* timing events around the operation */
  uint64_t submit_ns;
  /* OP_LAUNCH */
  struct kernel *kernel; /* holds a reference */
  uint32_t grid[3], block[3], shared;
  drv_arg_t *args; /* malloc'd */
  uint32_t nargs;
  buffer_t **bufs; /* buffers passed, each holding a reference */
  uint32_t nbufs;
  drv_output_t *out; /* what the kernel prints: its session's, a reference */
  int polled;        /* launched by the loop thread, which waits for it */
} op_t;

/* A new op of @p kind on @p st reporting to @p done (taking a stream
 * ref), or NULL when out of memory. The caller fills in the kind's fields,
 * holding a reference for each buffer, event, kernel and shm it sets. */
op_t *op_new(op_kind_t kind, stream_t *st, obj_done_t done);
/* Queue @p op on its stream. @return 0, or HIPD_ENOMEM: the op was
 * discarded (its references dropped, @p done never called). */
int op_submit(op_t *op);
/* Launches from the loop thread (submit.c). While the loop busy-polls
 * (main.c), op_submit() makes a launch on an idle GPU stream itself,
 * on the loop thread, instead of handing it to the stream's executor;
 * a launch that waits is completed when op_inline_poll() sees its stream
 * idle. At most @p streams streams are waited for so at once (0: off). */
void op_inline_enable(unsigned streams);
/* Look at the streams that launches from the loop wait for, completing
 * those the device has finished. @return how many streams finished. Loop
 * thread; cheap when none waits. */
int op_inline_poll(void);
/* The loop is about to sleep: hand each stream still waited for to its
 * executor, which waits and completes its launches (through the bridge,
 * which wakes the loop). Loop thread. */
void op_inline_park(void);
/* Whether launches from the loop wait for their device. Loop thread. */
int op_inline_waiting(void);

/* Drop an op that was never submitted, with every reference it holds;
 * its completion is not called. */
void op_discard(op_t *op);
/* The name an op records in profiling: "mem.write"... */
const char *op_name(op_kind_t kind);

#endif
