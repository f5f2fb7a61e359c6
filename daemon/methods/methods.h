/* SPDX-License-Identifier: MIT */
/* daemon/methods/methods.h: the handlers, one file per method family, and
 * the argument helpers they share. The table that names them is in
 * dispatch.c. */
#ifndef HIPD_METHODS_H
#define HIPD_METHODS_H

#include "device.h"
#include "call.h"
#include "kernels/kernels.h"
#include "objects/objects.h"
#include "profile.h"
#include "resources.h"

/* Bounds the method table declares and the handlers size arrays by. */
#define MAX_OPTIONS 64         /* compiler options of a compile */
#define MAX_SOA 256            /* soa_params of a code generation */
#define MAX_BLOCK_THREADS 1024 /* a code generation's block */

/* core.c: handshake and daemon/session introspection */
int m_hello(call_t *c);
int m_ping(call_t *c);
int m_daemon_info(call_t *c);
int m_session_info(call_t *c);

/* admin.c: the admin methods (admin/admin.h) */
int m_session_list(call_t *c);
int m_session_kill(call_t *c);
int m_daemon_stats(call_t *c);
int m_metrics(call_t *c);
int m_log_level(call_t *c);
int m_cache_list(call_t *c);

/* device.c: backend identity and devices */
int m_backend_info(call_t *c);
int m_device_count(call_t *c);
int m_device_list(call_t *c);
int m_device_get(call_t *c);
int m_device_set_current(call_t *c);
int m_device_current(call_t *c);
int m_device_synchronize(call_t *c);

/* stream.c */
int m_stream_create(call_t *c);
int m_stream_destroy(call_t *c);
int m_stream_synchronize(call_t *c);
int m_stream_query(call_t *c);
int m_stream_default(call_t *c);

/* memory.c */
int m_mem_alloc(call_t *c);
int m_mem_alloc_custom(call_t *c);
int m_mem_free(call_t *c);
int m_mem_write(call_t *c);
int m_mem_write_async(call_t *c);
int m_mem_read(call_t *c);
int m_mem_read_async(call_t *c);
int m_mem_copy(call_t *c);
int m_mem_copy_async(call_t *c);
int m_mem_memset(call_t *c);
int m_mem_memset_async(call_t *c);
int m_mem_size(call_t *c);
int m_mem_info(call_t *c);

/* shm.c: shared host buffers */
int m_shm_create(call_t *c);
int m_shm_free(call_t *c);
int m_mem_write_shm(call_t *c);
int m_mem_write_shm_async(call_t *c);
int m_mem_read_shm(call_t *c);
int m_mem_read_shm_async(call_t *c);
int m_mem_alloc_zero_copy(call_t *c);

/* event.c */
int m_event_create(call_t *c);
int m_event_destroy(call_t *c);
int m_event_record(call_t *c);
int m_event_query(call_t *c);
int m_event_synchronize(call_t *c);
int m_event_elapsed(call_t *c);

/* profile.c */
int m_profile_enable(call_t *c);
int m_profile_disable(call_t *c);
int m_session_profile(call_t *c);

/* kernel.c */
int m_kernel_compile(call_t *c);
int m_kernel_compile_cached(call_t *c);
int m_kernel_destroy(call_t *c);
int m_kernel_info(call_t *c);
int m_kernel_launch(call_t *c);
int m_run_source(call_t *c);
int m_supported_source_langs(call_t *c);
int m_execute_direct(call_t *c);
int m_cache_stats(call_t *c);
int m_cache_clear(call_t *c);

/* codegen.c: code generation from the Sarek IR */
int m_kernel_generate_source(call_t *c);
int m_kernel_compile_ir(call_t *c);
int m_intrinsics_list(call_t *c);
int m_intrinsics_find(call_t *c);
int m_intrinsics_register(call_t *c);

/* ---- helpers (common.c) ----
 *
 * Dispatch has checked and converted every param (c->args) before a
 * handler runs; what is left to the handlers and these helpers is the
 * state of the objects the params name. */

/* The session's default stream on @p dev, created on first use. */
int default_stream(call_t *c, device_t *dev, stream_t **st, uint64_t *h);
/* HIPD_EDEVLOST (answered) if @p dev is being reset or an object made in
 * context generation @p epoch is gone with an earlier context. */
int check_alive(call_t *c, const char *what, const device_t *dev,
                uint32_t epoch);
/* The stream of param @p i (a P_HANDLE of HANDLE_STREAM), and its handle,
 * if it is alive (else EDEVLOST, answered). */
int arg_stream(call_t *c, unsigned i, stream_t **st, uint64_t *h);
/* The buffer of param @p i (a P_HANDLE of HANDLE_BUFFER), if alive. */
int arg_buffer(call_t *c, unsigned i, buffer_t **b);
/* Check that [off, off + len) lies inside @p b; the error names both
 * numbers and the buffer size. */
int check_range(call_t *c, const char *what, const buffer_t *b, uint64_t off,
                uint64_t len);
/* A deferred call waiting for the object layer: the context of the
 * completions (obj_done_t) of creations and stream ops, which answer it. */
typedef enum {
  REPLY_NIL,   /* an op answers nil */
  REPLY_BYTES, /* the bytes read, as bin */
  REPLY_IDLE,  /* the query's idle flag, as bool */
} reply_kind_t;

typedef struct pending {
  call_t *call;    /* the deferred call it answers */
  uint64_t handle; /* the handle made for it; an op's stream handle */
  uint64_t bytes;  /* mem.alloc: the quota bytes reserved; an op: the
                      bytes it moves (its profiling record) */
  const char *op;  /* a timed op's profiling name; NULL: not timed */
  uint32_t period; /* the profiling period it was requested in */
  uint8_t reply;   /* REPLY_*: what a successful op answers */
  uint8_t kind;    /* an op: its op_kind_t (stats.h) */
  uint8_t waited;  /* an op: it waits for the device */
  int dev;         /* an op: its stream's device */
  uint64_t t0_ns;  /* an op: when it was submitted */
} pending_t;

/* Defer @p c and wrap it. @return NULL when out of memory (@p c is then
 * answered: return HIPD_ENOMEM). */
pending_t *pending_new(call_t *c);
/* Wrap the already deferred call @p d. @return NULL when out of memory
 * (@p d is then answered and finished). */
pending_t *pending_of(call_t *d);
/* Send the answer of @p p's call and free @p p. */
void pending_finish(pending_t *p);
/* Answer @p p's call with error @p code and @p msg, and free @p p. */
void pending_fail(pending_t *p, int code, const char *msg);

/* Defer @p c for an op of @p kind on @p st (handle @p sh), timed when the
 * session profiles, answered by its completion; NULL (call answered) when
 * out of memory. op_prepare_deferred() is the same for a deferred call
 * (on failure @p d is answered and finished). */
op_t *op_prepare(call_t *c, op_kind_t kind, stream_t *st, uint64_t sh);
op_t *op_prepare_deferred(call_t *d, op_kind_t kind, stream_t *st, uint64_t sh);
/* Submit an op from op_prepare*(), its fields filled in; if it cannot be
 * queued its call is answered (ENOMEM). The handler returns 0 either
 * way. */
void op_start(op_t *op);

/* Start the answer to a compile (kernel.compile*, kernel.compile_ir): on
 * failure answer with its error; else keep the kernel (if any) under a
 * handle, open a map of 5 + @p extra keys and pack the 5 every compile
 * answers (kernel, cache, key, bytes, compile_ms). @return the packer for
 * the caller's @p extra keys, or NULL when @p c was answered with an error
 * (the kernel's reference then dropped). */
msgpack_packer *compile_answer(call_t *c, const kernel_result_t *r,
                               uint32_t extra);

#endif
