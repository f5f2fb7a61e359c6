/* SPDX-License-Identifier: MIT */
/* daemon/methods/methods.h: the handlers, one file per method family, and
 * the argument helpers they share. The table that names them is in
 * dispatch.c. */
#ifndef HIPD_METHODS_H
#define HIPD_METHODS_H

#include "call.h"
#include "device.h"
#include "kernels/kernels.h"
#include "objects/objects.h"
#include "pack.h"
#include "profile.h"
#include "resources.h"
#include "ring_layout.h"

/* Bounds the method table declares and the handlers size arrays by. */
#define MAX_OPTIONS 64         /* compiler options of a compile */
#define MAX_SOA 256            /* soa_params of a code generation */
#define MAX_BLOCK_THREADS 1024 /* a code generation's block */
#define ARCH_MAX 63 /* an architecture name's bytes ("gfx90a", "sm_90") */
/* What a session's kernels printed, kept for kernel.output: past this,
 * bytes are counted as dropped. */
#define KERNEL_OUTPUT_CAP (1u << 20)
#define SYMBOL_MAX 255 /* a kernel or intrinsic name's bytes */
#define CLIENT_NAME_MAX (sizeof(((session_t *)0)->client) - 1)

/* ---- signatures ----
 *
 * Each signature is stated once, as a list of its params in order:
 * R(name, KIND) for a required param, O(name, KIND) for an optional one.
 * The KINDs (BUF, U64, STR(max), DIMS, LAUNCH_ARGS...) are dispatch.c's
 * row fragments (proto/params.h's param kinds with their bounds). The same
 * list gives dispatch's row (the param_t array, named by the stringified
 * names) and the handler's typed view, NAME_args_t below: one arg_t per
 * param, laid out as dispatch's args array, read by name (a->offset.u).
 * Several methods may share one signature. */
#define PARAMS_device(R, O) O(device, DEVICE)
#define PARAMS_set_device(R, O) R(device, DEVICE)
#define PARAMS_target(R, O) O(target, TARGET(ARCH_MAX))
#define PARAMS_buffer(R, O) R(buffer, BUF)
#define PARAMS_stream(R, O) R(stream, STREAM)
#define PARAMS_event(R, O) R(event, EVENT)
#define PARAMS_kernel(R, O) R(kernel, KERNEL)
#define PARAMS_shm(R, O) R(shm, SHM)
#define PARAMS_rest(R, O) R(params, REST(255))
#define PARAMS_hello(R, O)                                                     \
  O(protocol, INT(0, INT32_MAX)) O(client_name, STR(CLIENT_NAME_MAX))
#define PARAMS_ping(R, O) O(payload, BYTES)
#define PARAMS_log_level(R, O) O(level, STR(15))
#define PARAMS_session_kill(R, O) R(id, U64)
#define PARAMS_grant_add(R, O)                                                 \
  R(user, STR(64)) R(devices, ANY) O(quota, U64) O(label, STR(63))
#define PARAMS_grant_revoke(R, O) O(label, STR(63)) O(user, STR(64))
#define PARAMS_session_profile(R, O) O(clear, BOOL)
#define PARAMS_kernel_output(R, O) O(max, UINT(KERNEL_OUTPUT_CAP))
#define PARAMS_event_elapsed(R, O) R(start, EVENT) R(stop, EVENT)
#define PARAMS_event_record(R, O) R(event, EVENT) O(stream, STREAM)
#define PARAMS_mem_alloc(R, O) R(count, U64) R(kind, STR(15)) O(device, DEVICE)
#define PARAMS_mem_alloc_custom(R, O)                                          \
  R(size, U64) R(elem_size, UINT(UINT32_MAX)) O(device, DEVICE)
#define PARAMS_mem_alloc_zero_copy(R, O) R(shm, SHM) O(device, DEVICE)
#define PARAMS_mem_write(R, O) R(buffer, BUF) R(offset, U64) R(data, BYTES)
#define PARAMS_mem_write_async(R, O) PARAMS_mem_write(R, O) R(stream, STREAM)
#define PARAMS_mem_read(R, O) R(buffer, BUF) R(offset, U64) R(length, U64)
#define PARAMS_mem_read_async(R, O) PARAMS_mem_read(R, O) R(stream, STREAM)
#define PARAMS_mem_copy(R, O)                                                  \
  R(dst, BUF) R(dst_offset, U64) R(src, BUF) R(src_offset, U64) R(length, U64)
#define PARAMS_mem_copy_async(R, O) PARAMS_mem_copy(R, O) R(stream, STREAM)
#define PARAMS_mem_memset(R, O)                                                \
  R(buffer, BUF) R(offset, U64) R(length, U64) R(value, UINT(255))
#define PARAMS_mem_memset_async(R, O) PARAMS_mem_memset(R, O) R(stream, STREAM)
#define PARAMS_mem_shm(R, O)                                                   \
  R(buffer, BUF) R(offset, U64) R(shm, SHM) R(shm_offset, U64) R(length, U64)
#define PARAMS_mem_shm_async(R, O) PARAMS_mem_shm(R, O) R(stream, STREAM)
#define PARAMS_shm_create(R, O) R(size, U64)
#define PARAMS_ring_open(R, O)                                                 \
  O(entries, UINT(RING_MAX_ENTRIES)) O(doorbell, STR(15))
#define PARAMS_kernel_compile(R, O)                                            \
  R(source, BYTES)                                                             \
  R(name, STR(SYMBOL_MAX))                                                     \
  O(options, OPTIONS(MAX_OPTIONS)) O(target, TARGET(ARCH_MAX))
#define PARAMS_kernel_launch(R, O)                                             \
  R(kernel, KERNEL)                                                            \
  R(grid, DIMS)                                                                \
  R(block, DIMS)                                                               \
  O(shared_mem, UINT(UINT32_MAX))                                              \
  O(stream, STREAM) R(args, LAUNCH_ARGS) O(wait, BOOL)
#define PARAMS_run_source(R, O)                                                \
  R(source, BYTES)                                                             \
  R(lang, STR(ARCH_MAX))                                                       \
  R(kernel_name, STR(SYMBOL_MAX))                                              \
  R(block, DIMS)                                                               \
  R(grid, DIMS)                                                                \
  O(shared_mem, UINT(UINT32_MAX)) R(args, LAUNCH_ARGS) O(wait, BOOL)
#define PARAMS_kernel_generate_source(R, O)                                    \
  R(ir, IR)                                                                    \
  O(block, BLOCK(MAX_BLOCK_THREADS))                                           \
  O(soa_params, NAMES(MAX_SOA)) O(target, TARGET(ARCH_MAX))
#define PARAMS_kernel_compile_ir(R, O)                                         \
  R(ir, IR)                                                                    \
  O(block, BLOCK(MAX_BLOCK_THREADS))                                           \
  O(soa_params, NAMES(MAX_SOA))                                                \
  O(options, OPTIONS(MAX_OPTIONS)) O(target, TARGET(ARCH_MAX))
#define PARAMS_intrinsics_find(R, O)                                           \
  R(name, STR(SYMBOL_MAX)) O(target, TARGET(ARCH_MAX))
#define PARAMS_intrinsics_register(R, O)                                       \
  R(name, STR(SYMBOL_MAX))                                                     \
  R(code, STR(INTR_CODE_MAX)) R(convergence, STR(15)) O(arity, INT(0, 64))

/* The typed views: NAME_args_t for each signature above. */
#define METH_ARG_FIELD(name, kind) arg_t name;
#define METH_ARGS(sig)                                                         \
  typedef struct sig##_args {                                                  \
    PARAMS_##sig(METH_ARG_FIELD, METH_ARG_FIELD)                               \
  } sig##_args_t;
#define METH_SIGNATURES(X)                                                     \
  X(device)                                                                    \
  X(set_device)                                                                \
  X(target)                                                                    \
  X(buffer)                                                                    \
  X(stream)                                                                    \
  X(event)                                                                     \
  X(kernel)                                                                    \
  X(shm) X(rest) X(hello) X(ping) X(log_level) X(session_kill) X(grant_add)    \
      X(grant_revoke) X(session_profile) X(event_elapsed) X(event_record)      \
          X(mem_alloc) X(mem_alloc_custom) X(mem_alloc_zero_copy) X(mem_write) \
              X(mem_write_async) X(mem_read) X(mem_read_async) X(mem_copy)     \
                  X(mem_copy_async) X(mem_memset) X(mem_memset_async)          \
                      X(mem_shm) X(mem_shm_async) X(shm_create) X(ring_open)   \
                          X(kernel_compile) X(kernel_launch) X(kernel_output)  \
                              X(run_source) X(kernel_generate_source)          \
                                  X(kernel_compile_ir) X(intrinsics_find)      \
                                      X(intrinsics_register)
METH_SIGNATURES(METH_ARGS)

/* ---- handlers ----
 *
 * A handler of a method with params gets its typed view (dispatch's row
 * names the signature; a view of another signature does not compile
 * without a diagnostic); one without params, or one that takes any
 * params unread (execute_direct), gets the call only. */

/* core.c: handshake and daemon/session introspection */
int m_hello(call_t *c, const hello_args_t *a);
int m_ping(call_t *c, const ping_args_t *a);
int m_daemon_info(call_t *c);
int m_session_info(call_t *c);

/* admin.c: the admin methods (admin/admin.h) */
int m_session_list(call_t *c);
int m_session_kill(call_t *c, const session_kill_args_t *a);
int m_daemon_stats(call_t *c);
int m_metrics(call_t *c);
int m_log_level(call_t *c, const log_level_args_t *a);
int m_cache_list(call_t *c);
int m_grant_add(call_t *c, const grant_add_args_t *a);
int m_grant_revoke(call_t *c, const grant_revoke_args_t *a);
int m_grant_list(call_t *c);

/* device.c: backend identity and devices */
int m_backend_info(call_t *c);
int m_device_count(call_t *c);
int m_device_list(call_t *c);
int m_device_get(call_t *c, const device_args_t *a);
int m_device_set_current(call_t *c, const set_device_args_t *a);
int m_device_current(call_t *c);
int m_device_synchronize(call_t *c, const device_args_t *a);

/* stream.c */
int m_stream_create(call_t *c, const device_args_t *a);
int m_stream_destroy(call_t *c, const stream_args_t *a);
int m_stream_synchronize(call_t *c, const stream_args_t *a);
int m_stream_query(call_t *c, const stream_args_t *a);
int m_stream_default(call_t *c, const device_args_t *a);

/* memory.c */
int m_mem_alloc(call_t *c, const mem_alloc_args_t *a);
int m_mem_alloc_custom(call_t *c, const mem_alloc_custom_args_t *a);
int m_mem_free(call_t *c, const buffer_args_t *a);
int m_mem_write(call_t *c, const mem_write_args_t *a);
int m_mem_write_async(call_t *c, const mem_write_async_args_t *a);
int m_mem_read(call_t *c, const mem_read_args_t *a);
int m_mem_read_async(call_t *c, const mem_read_async_args_t *a);
int m_mem_copy(call_t *c, const mem_copy_args_t *a);
int m_mem_copy_async(call_t *c, const mem_copy_async_args_t *a);
int m_mem_memset(call_t *c, const mem_memset_args_t *a);
int m_mem_memset_async(call_t *c, const mem_memset_async_args_t *a);
int m_mem_size(call_t *c, const buffer_args_t *a);
int m_mem_info(call_t *c, const buffer_args_t *a);

/* shm.c: shared host buffers */
int m_shm_create(call_t *c, const shm_create_args_t *a);
int m_shm_free(call_t *c, const shm_args_t *a);
int m_mem_write_shm(call_t *c, const mem_shm_args_t *a);
int m_mem_write_shm_async(call_t *c, const mem_shm_async_args_t *a);
int m_mem_read_shm(call_t *c, const mem_shm_args_t *a);
int m_mem_read_shm_async(call_t *c, const mem_shm_async_args_t *a);
int m_mem_alloc_zero_copy(call_t *c, const mem_alloc_zero_copy_args_t *a);

/* ring.c: the session's shared-memory queues */
int m_ring_open(call_t *c, const ring_open_args_t *a);

/* event.c */
int m_event_create(call_t *c, const device_args_t *a);
int m_event_destroy(call_t *c, const event_args_t *a);
int m_event_record(call_t *c, const event_record_args_t *a);
int m_event_query(call_t *c, const event_args_t *a);
int m_event_synchronize(call_t *c, const event_args_t *a);
int m_event_elapsed(call_t *c, const event_elapsed_args_t *a);

/* profile.c */
int m_profile_enable(call_t *c);
int m_profile_disable(call_t *c);
int m_session_profile(call_t *c, const session_profile_args_t *a);

/* kernel.c */
int m_kernel_compile(call_t *c, const kernel_compile_args_t *a);
int m_kernel_compile_cached(call_t *c, const kernel_compile_args_t *a);
int m_kernel_destroy(call_t *c, const kernel_args_t *a);
int m_kernel_info(call_t *c, const kernel_args_t *a);
int m_kernel_launch(call_t *c, const kernel_launch_args_t *a);
int m_kernel_output(call_t *c, const kernel_output_args_t *a);
int m_run_source(call_t *c, const run_source_args_t *a);
int m_supported_source_langs(call_t *c, const device_args_t *a);
int m_execute_direct(call_t *c);
int m_cache_stats(call_t *c);
int m_cache_clear(call_t *c);

/* codegen.c: code generation from the Sarek IR */
int m_kernel_generate_source(call_t *c, const kernel_generate_source_args_t *a);
int m_kernel_compile_ir(call_t *c, const kernel_compile_ir_args_t *a);
int m_intrinsics_list(call_t *c, const target_args_t *a);
int m_intrinsics_find(call_t *c, const intrinsics_find_args_t *a);
int m_intrinsics_register(call_t *c, const intrinsics_register_args_t *a);

/* ---- helpers (common.c) ----
 *
 * Dispatch has checked and converted every param (c->args) before a
 * handler runs; what is left to the handlers and these helpers is the
 * state of the objects the params name. */

/* The session's default stream on @p dev, created on first use. */
int meth_default_stream(call_t *c, device_t *dev, stream_t **st, uint64_t *h);
/* HIPD_EDEVLOST (answered) if @p dev is being reset or an object made in
 * context generation @p epoch is gone with an earlier context. */
int meth_check_alive(call_t *c, const char *what, const device_t *dev,
                     uint32_t epoch);
/* The stream of param @p a (a P_HANDLE of HANDLE_STREAM), and its handle,
 * if it is alive (else EDEVLOST, answered). */
int meth_arg_stream(call_t *c, const arg_t *a, stream_t **st, uint64_t *h);
/* The buffer of param @p a (a P_HANDLE of HANDLE_BUFFER), if alive. */
int meth_arg_buffer(call_t *c, const arg_t *a, buffer_t **b);
/* The position of param @p a among @p c's params, for messages that name
 * it ("param 3 (target): ..."). */
unsigned meth_arg_pos(const call_t *c, const arg_t *a);
/* Check that [off, off + len) lies inside @p b; the error names both
 * numbers and the buffer size. */
int meth_check_range(call_t *c, const char *what, const buffer_t *b,
                     uint64_t off, uint64_t len);
/* A deferred call waiting for the object layer: the context of the
 * completions (obj_done_t) of creations and stream ops, which answer it. */
typedef enum {
  METH_REPLY_NIL,   /* an op answers nil */
  METH_REPLY_BYTES, /* the bytes read, as bin */
  METH_REPLY_IDLE,  /* the query's idle flag, as bool */
} meth_reply_kind_t;

typedef struct meth_pending {
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
  uint64_t end_ns; /* an op answered early: when (its thread's clock) */
} meth_pending_t;

/* Defer @p c and wrap it. @return NULL when out of memory (@p c is then
 * answered: return HIPD_ENOMEM). */
meth_pending_t *meth_pending_new(call_t *c);
/* Wrap the already deferred call @p d. @return NULL when out of memory
 * (@p d is then answered and finished). */
meth_pending_t *meth_pending_of(call_t *d);
/* Send the answer of @p p's call and free @p p. */
void meth_pending_finish(meth_pending_t *p);
/* Answer @p p's call with error @p code and @p msg, and free @p p. */
void meth_pending_fail(meth_pending_t *p, int code, const char *msg);

/* Defer @p c for an op of @p kind on @p st (handle @p sh), timed when the
 * session profiles, answered by its completion; NULL (call answered) when
 * out of memory. meth_op_prepare_deferred() is the same for a deferred call
 * (on failure @p d is answered and finished). */
op_t *meth_op_prepare(call_t *c, op_kind_t kind, stream_t *st, uint64_t sh);
op_t *meth_op_prepare_deferred(call_t *d, op_kind_t kind, stream_t *st,
                               uint64_t sh);
/* Submit an op from meth_op_prepare*(), its fields filled in; if it cannot be
 * queued its call is answered (ENOMEM). The handler returns 0 either
 * way. */
void meth_op_start(op_t *op);

/* Start the answer to a compile (kernel.compile*, kernel.compile_ir): on
 * failure answer with its error; else keep the kernel (if any) under a
 * handle, begin the answer's map @p m and pack the 5 keys every compile
 * answers (kernel, cache, key, bytes, compile_ms); the caller packs its own
 * keys and ends @p m. @return 0, or the code @p c was answered with (the
 * kernel's reference then dropped). */
int meth_compile_answer(call_t *c, const kernel_result_t *r, pack_map_t *m);

/* Pack the NULL-terminated list of strings @p v as an array. */
void meth_pack_strv(msgpack_packer *pk, const char *const *v);

#endif
