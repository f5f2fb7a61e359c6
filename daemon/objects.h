/* daemon/objects.h: the device objects clients own, and the work they do.
 *
 * Buffers, streams and events are reference-counted on the loop thread:
 * a session's handle holds one reference and every task in flight that
 * uses the object holds one more, so freeing a handle (or closing the
 * session) never pulls memory from under queued device work: the driver
 * object is destroyed, on a worker, once the last task is done.
 *
 * Stream work (copies, memsets, event records, synchronisation) is an op:
 * a task on the stream's executor whose done() answers the client's call.
 */
#ifndef HIPD_OBJECTS_H
#define HIPD_OBJECTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "dispatch.h"
#include "executor.h"
#include "shm.h"

typedef struct buffer {
  device_t *dev;
  drv_mem_t mem;
  size_t elem_size; /* bytes per element (1 for raw byte buffers) */
  uint32_t epoch;   /* the device context it was made in */
  int refs;
  struct shm *shm; /* zero-copy: the client's shared memory it is, holding a
                      reference; NULL for device memory */
} buffer_t;

typedef struct stream {
  device_t *dev;
  executor_t *ex; /* runs this stream's work in order */
  void *drv;      /* the driver's stream, once created */
  int status;     /* creation result: later ops fail with it */
  int refs;
  int is_default; /* a session's default stream for its device */
  uint32_t epoch; /* the device context it was made in */
} stream_t;

enum { EVENT_UNRECORDED, EVENT_PENDING, EVENT_COMPLETE };

typedef struct event {
  device_t *dev;
  void *drv;    /* the driver's event */
  int state;    /* EVENT_* */
  int status;   /* error of the last record, if it failed */
  uint32_t seq; /* records issued; only the latest completes it */
  int refs;
  struct waiter *waiters; /* event.synchronize calls to answer */
  uint32_t epoch;         /* the device context it was made in */
  /* Stream workers record the driver's event and the service executor
   * reads its time: rec_lock orders them, and rec_seq (the seq of the
   * record the driver's event holds) keeps an earlier record that a
   * stream reaches late from replacing a later one. */
  pthread_mutex_t rec_lock;
  uint32_t rec_seq; /* under rec_lock */
} event_t;

/* Profiling records of a session. */
typedef struct profile_rec {
  const char *op;  /* static name: "mem.write", "mem.read"... */
  uint64_t stream; /* stream handle */
  uint64_t bytes;
  double start_ms; /* since profiling was enabled */
  double end_ms;
} profile_rec_t;

typedef struct profile {
  uint64_t epoch_ns; /* monotonic time profiling was enabled */
  uint32_t gen;      /* which enable this is (ops from earlier ones are
                        not recorded) */
  profile_rec_t *recs;
  uint32_t count, cap;
  uint64_t dropped; /* records past the cap */
} profile_t;

#define PROFILE_MAX_RECORDS (1u << 20)

/* ---- buffers ---- */
void buffer_ref(buffer_t *b);
/* Drop a reference; the last one frees the memory on the device's service
 * executor and updates the device's accounting. */
void buffer_unref(buffer_t *b);

/* ---- streams ---- */
/* A new stream on @p dev with its own worker, or NULL if no thread could
 * start. Its driver stream is created by stream_start(). */
stream_t *stream_new(device_t *dev);
/* Queue the creation of the driver stream as the stream's first task. @p c,
 * if not NULL, is a deferred call answered with @p handle once it is done
 * (or with the error, the handle then being removed). */
void stream_start(stream_t *st, call_t *c, uint64_t handle);
void stream_ref(stream_t *st);
/* Drop a reference; the last one destroys the driver stream after the
 * queued work and ends the worker. */
void stream_unref(stream_t *st);

/* ---- events ---- */
/* Create the driver event on the service executor; answer deferred call
 * @p c with @p handle (or the error, dropping the event). */
void event_create_async(event_t *ev, call_t *c, uint64_t handle);
/* Milliseconds between the driver's records of @p a and @p b (events of one
 * device, both complete). On the device's service executor. */
int event_elapsed(event_t *a, event_t *b, float *ms);
void event_ref(event_t *ev);
void event_unref(event_t *ev);
/* Answer deferred call @p c when @p ev completes (now if it has). */
void event_wait(event_t *ev, call_t *c);

/* ---- stream ops ---- */
typedef enum {
  OP_WRITE,  /* host bytes -> buffer */
  OP_READ,   /* buffer -> host bytes (the reply) */
  OP_COPY,   /* buffer -> buffer, possibly across devices */
  OP_MEMSET, /* fill a buffer range */
  OP_SYNC,   /* wait for the stream; answer when done */
  OP_QUERY,  /* answer whether the stream is idle */
  OP_RECORD, /* record an event */
  OP_LAUNCH, /* launch a kernel */
} op_kind_t;

struct kernel;

typedef struct op {
  task_t t;
  op_kind_t kind;
  call_t *call;           /* the deferred call to answer, or NULL */
  struct op_group *group; /* several ops answering one call */
  stream_t *st;
  uint64_t stream_handle; /* for profiling records */
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
  struct obj_task *mark; /* RECORD: completes the event later */
  int idle;              /* QUERY result */
  int prof;              /* time it: the session profiles */
  uint32_t prof_gen;     /* the session's profiling period it belongs to */
  int prof_ok;           /* prof_ms was measured */
  float prof_ms;         /* device time between the profiling events */
  void *pev[2];          /* profiling events around the operation */
  uint64_t submit_ns;
  /* OP_LAUNCH */
  struct kernel *kernel; /* holds a reference */
  uint32_t grid[3], block[3], shared;
  drv_arg_t *args; /* malloc'd */
  uint32_t nargs;
  buffer_t **bufs; /* buffers passed, each holding a reference */
  uint32_t nbufs;
} op_t;

/* A new op of @p kind on @p st answering @p c (taking a stream ref). */
op_t *op_new(op_kind_t kind, stream_t *st, uint64_t stream_handle, call_t *c);
/* Queue @p op on its stream. Buffer and event refs must already be held
 * by the op (op_new callers set dst/src/ev with buffer_ref/event_ref). */
void op_submit(op_t *op);

/* Answer @p c after every op in a group of @p n (device.synchronize). */
struct op_group *op_group_new(call_t *c, uint32_t n);

/* Bytes of a buffer that count against the session's quota (zero-copy
 * buffers count as their shared memory, once, at shm.create). */
static inline uint64_t buffer_quota_bytes(const buffer_t *b)
{
  return b->shm != NULL ? 0 : b->mem.size;
}

/* Release everything a closing session owns, in dependency order. */
void objects_release_session(session_t *s);

/* Profiling: turn on/off for a session. */
int profile_enable(session_t *s);
void profile_disable(session_t *s);

#endif
