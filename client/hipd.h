/* SPDX-License-Identifier: MIT */
/* hipd.h: the client library of hipd, a GPU execution daemon.
 *
 * A client connects to hipd's Unix socket and calls methods; every call maps
 * to one msgpack-rpc method documented in proto/PROTOCOL.md (`mem.alloc` is
 * hipd_mem_alloc). All types are opaque so that the ABI can grow; the
 * handles of daemon objects are one-member structs (see hipd_buffer_t), so
 * that each kind is a type of its own.
 *
 * Errors: every function returns 0 (or a non-negative count where it says
 * so) or a negative HIPD_E* code. hipd_strerror() and hipd_err_name() describe
 * a code; hipd_last_error() returns the daemon's message for the last failed
 * call of the calling thread on a connection.
 *
 * Threads: a connection may be used from several threads at once. Calls from
 * different threads are pipelined on the one socket. A hipd_call_t is
 * waited for by one thread, once. A hipd_info_t is not changed by its
 * getters: several threads may read one record, none while another frees
 * it. A hipd_args_t is one thread's at a time. A hipd_shm_t may be used in
 * transfers from several threads; hipd_shm_free() only once none uses it.
 *
 * Ownership: every object a function hands back belongs to the caller,
 * who releases it with its one release function: hipd_conn_t with
 * hipd_close(), hipd_call_t with hipd_wait(), hipd_info_t with
 * hipd_info_free(), hipd_shm_t with hipd_shm_free(), hipd_args_t with
 * hipd_args_free(). A function that fails hands back nothing to release
 * (its out-pointers are NULL or 0, or as they were). Daemon objects
 * (hipd_buffer_t, hipd_stream_t, hipd_event_t, hipd_kernel_t) are handles,
 * not memory: they belong to the session and are released by their free or
 * destroy method or when the connection closes. Strings returned as
 * `const char *` are never freed by the caller: static ones (hipd_strerror,
 * hipd_err_name, hipd_version) live forever, the others as long as the
 * object they were read from, as stated at each function.
 */
#ifndef HIPD_H
#define HIPD_H

#include <stddef.h>
#include <stdint.h>

#include "hipd_version.h" /* HIPD_VERSION_MAJOR ... HIPD_VERSION_NUMBER */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define HIPD_EXTERN __attribute__((visibility("default")))
#else
#define HIPD_EXTERN
#endif

/* The error table, shared by daemon and client. The numbers are stable:
 * they travel on the wire and a number, once published, never changes
 * meaning. New codes are appended. XX(name, number, message). */
#define HIPD_ERRNO_MAP(XX)                                                     \
  XX(EINVAL, -1, "invalid argument")                                           \
  XX(ENOMEM, -2, "out of memory")                                              \
  XX(EPROTO, -3, "protocol error")                                             \
  XX(EMSGSIZE, -4, "message too large")                                        \
  XX(ENOMETHOD, -5, "unknown method")                                          \
  XX(EPARAMS, -6, "bad parameters")                                            \
  XX(EHANDLE, -7, "invalid handle")                                            \
  XX(ESTALE, -8, "stale handle (already freed)")                               \
  XX(EFOREIGN, -9, "handle belongs to another session")                        \
  XX(EHANDLETYPE, -10, "handle of the wrong type")                             \
  XX(EDISCONNECTED, -11, "disconnected from the daemon")                       \
  XX(ECONNECT, -12, "cannot connect to the daemon")                            \
  XX(ETIMEDOUT, -13, "timed out")                                              \
  XX(EVERSION, -14, "protocol version not supported")                          \
  XX(EHELLO, -15, "handshake (hello) required first")                          \
  XX(ESHUTDOWN, -16, "daemon is shutting down")                                \
  XX(EIO, -17, "input/output error")                                           \
  XX(ENODEV, -18, "no such device")                                            \
  XX(ERANGE, -19, "out of range")                                              \
  XX(EQUOTA, -20, "quota exceeded")                                            \
  XX(EDEVICE, -21, "device error")                                             \
  XX(ENOTSUP, -22, "not supported")                                            \
  XX(ENOTREADY, -23, "not complete yet")                                       \
  XX(ENOTRECORDED, -24, "event not recorded")                                  \
  XX(ECOMPILE, -25, "compilation failed")                                      \
  XX(ENOKERNEL, -26, "kernel not found")                                       \
  XX(ELAUNCH, -27, "kernel launch failed")                                     \
  XX(ELIMIT, -28, "exceeds a device limit")                                    \
  XX(EDEVLOST, -29, "device context lost")                                     \
  XX(ELANG, -30, "unsupported source language")                                \
  XX(EIR, -31, "malformed IR")                                                 \
  XX(EINTRINSIC, -32, "unknown intrinsic")                                     \
  XX(ESIGNATURE, -33, "arguments do not match the kernel signature")           \
  XX(ETOOMANY, -34, "too many objects")                                        \
  XX(EBUSY, -35, "resource busy")                                              \
  XX(ECANCELED, -36, "operation canceled")                                     \
  XX(EEXIST, -37, "already exists")                                            \
  XX(ENOENT, -38, "no such entry")                                             \
  XX(EPERM, -39, "operation not permitted")                                    \
  XX(EINTERNAL, -40, "internal daemon error")

typedef enum {
#define HIPD_ERR_ENUM_(name, num, msg) HIPD_##name = num,
  HIPD_ERRNO_MAP(HIPD_ERR_ENUM_)
#undef HIPD_ERR_ENUM_
      HIPD_ERRNO_MAX_ = -41
} hipd_errno_t;

/** @return a static description of @p err ("unknown error" if unknown). */
HIPD_EXTERN const char *hipd_strerror(int err);
/** @return the static symbolic name of @p err ("EINVAL"), or "UNKNOWN". */
HIPD_EXTERN const char *hipd_err_name(int err);
/** @return the error number for a symbolic name, or 0 if none has it. */
HIPD_EXTERN int hipd_err_from_name(const char *name);

/** The version of the client library the program runs with ("0.1.0"; a
 *  static string, not freed), and the protocol version it speaks.
 * HIPD_VERSION_STRING is the version it was compiled against. */
HIPD_EXTERN const char *hipd_version(void);
HIPD_EXTERN int hipd_protocol_version(void);

/* ------------------------------------------------------------------ types */

typedef struct hipd_conn hipd_conn_t; /* one connection (session) */
typedef struct hipd_call hipd_call_t; /* one request in flight */
typedef struct hipd_info hipd_info_t; /* a structured result (a record):
                                         the caller's, hipd_info_free(); a
                                         copy, valid after hipd_close() */

/* ------------------------------------------------------------ connection */

/**
 * Connect to hipd and perform the `hello` handshake.
 * @param path socket path, or NULL for $HIPD_SOCKET, else /run/hipd/hipd.sock
 *        for root or $XDG_RUNTIME_DIR/hipd.sock otherwise; with NULL, a
 *        non-root caller whose own socket file does not exist (and no
 *        $HIPD_SOCKET) falls back to /run/hipd/hipd.sock, the system
 *        daemon's (PROTOCOL.md, "Socket path").
 * @param out the new connection; the caller releases it with hipd_close().
 * @return 0, HIPD_ECONNECT (nobody listens), HIPD_EVERSION, HIPD_ENOMEM...
 */
HIPD_EXTERN int hipd_connect(const char *path, hipd_conn_t **out);
/** Like hipd_connect() with the client name sent in `hello` (default: the
 *  program's name). */
HIPD_EXTERN int hipd_connect2(const char *path, const char *client_name,
                              hipd_conn_t **out);
/** Close the connection. Calls still pending fail with HIPD_EDISCONNECTED;
 *  their hipd_call_t must still be waited for (hipd_wait() frees it). No
 *  other thread may use @p conn once this is called. */
HIPD_EXTERN void hipd_close(hipd_conn_t *conn);
/** The daemon's message for the last call that failed on this connection in
 *  the calling thread ("" if none). Valid until that thread's next call.
 *  With @p conn NULL: the message of the calling thread's last failed
 *  hipd_connect(). */
HIPD_EXTERN const char *hipd_last_error(hipd_conn_t *conn);
/** Why the connection ended, read without waiting (what has arrived is
 *  read first): NULL while it is up; else the reason, valid until
 *  hipd_close(), with its code in *@p code (if not NULL). When hipd closed
 *  the session for a reason of its own it says so last (`session.closed`),
 *  and the code is hipd's: HIPD_ECANCELED (an admin's session.kill),
 *  HIPD_ESHUTDOWN (hipd stops or restarts), HIPD_EDEVLOST (the device
 *  was lost to a fault, its own or, under MPS, another tenant's),
 *  HIPD_ETIMEDOUT (a kernel of this uid ran past --gpu-kernel-timeout);
 *  the reason is "hipd closed this session: " and hipd's words, which the
 *  calls pending then (and hipd_last_error()) also carry; they fail with
 *  HIPD_EDISCONNECTED as at any connection end. Otherwise
 *  HIPD_EDISCONNECTED (it ended without a word) or the error that broke it.
 *  After any of them a client connects again and resubmits. Thread-safe. */
HIPD_EXTERN const char *hipd_conn_lost_reason(hipd_conn_t *conn, int *code);
/** The socket's file descriptor (for poll-based event loops), or -1. */
HIPD_EXTERN int hipd_fileno(hipd_conn_t *conn);
/** Per-call timeout in milliseconds for waits on this connection (0: none,
 *  the default). A call past it returns HIPD_ETIMEDOUT. */
HIPD_EXTERN void hipd_set_timeout(hipd_conn_t *conn, int timeout_ms);
/** While waiting for a reply, poll the socket without sleeping for up to
 *  @p us microseconds first (0: sleep at once): a reply that comes within
 *  that time is read without a thread wake-up's latency, for the CPU time
 *  of the spin. Default: $HIPD_BUSY_POLL_US, else 20 on machines with 8 or
 *  more CPUs, else 0. After 8 spins in a row that found nothing, the
 *  connection spins for one wait in 16 only, until a spin finds its
 *  answer again: waits longer than the spin cost no CPU. A wait for a
 *  copy between a shared buffer and device memory spins longer, by the
 *  time the copy should take at the rate the connection's synchronous
 *  copies of 64 KiB or more reached (at most 200 microseconds more). */
HIPD_EXTERN void hipd_set_busy_poll(hipd_conn_t *conn, int us);

/* ------------------------------------------------------------ pipelining */

/**
 * Every method has a synchronous form, hipd_X(conn, ...); those a client
 * pipelines (ping, info, transfers, synchronisation, launches) also have a
 * pipelined form, hipd_X_begin(conn, ..., &call), declared below, that
 * sends the request and returns without waiting for the reply. Sending
 * writes the whole request to the socket (or, corked, copies it into the
 * connection: hipd_cork), so it may wait while the socket is full, for
 * at most the connection's timeout (hipd_set_timeout); the bytes passed in
 * (ping's and mem.write's data) may be reused as soon as the _begin
 * function returns. The result pointers given to the pipelined form are
 * filled when the reply arrives; they must stay valid until hipd_wait() on
 * the call returns. Replies may arrive in any order; calls may be waited
 * for in any order. A _begin function that fails hands back no call
 * (whatever *call holds then is not to be waited for).
 *
 * Not to be confused with the stream-ordered device operations whose names
 * end in _async, as in HIP (hipd_mem_write_async: `mem.write_async`): those
 * are methods of their own, and have _begin forms too where listed.
 */
/** Wait for @p call to complete and free it (a call is always released
 *  this way, whether it succeeded or not). @return the call's result. */
HIPD_EXTERN int hipd_wait(hipd_call_t *call);
/** @return 1 if @p call has completed (hipd_wait will not block), else 0.
 *  Reads whatever replies have arrived without blocking. */
HIPD_EXTERN int hipd_call_done(hipd_call_t *call);
/** The daemon's error message for a completed, failed call ("" if none).
 *  Valid until hipd_wait() frees the call. */
HIPD_EXTERN const char *hipd_call_error(hipd_call_t *call);

/* ---------------------------------------------------------- info records */

/**
 * A structured result (daemon identity, session details, device record...).
 * Fields are reached by a dotted path: "version", "peer.pid", "features.0".
 * The getters return 0, HIPD_ENOENT (no such field) or HIPD_EHANDLETYPE (the
 * field has another type).
 */
HIPD_EXTERN int hipd_info_int(const hipd_info_t *info, const char *path,
                              int64_t *out);
/** An unsigned integer field, all 64 bits of it (handles: session tags set
 *  the top bit, which hipd_info_int() reports as HIPD_ERANGE). A negative
 *  value is HIPD_ERANGE. */
HIPD_EXTERN int hipd_info_uint(const hipd_info_t *info, const char *path,
                               uint64_t *out);
HIPD_EXTERN int hipd_info_double(const hipd_info_t *info, const char *path,
                                 double *out);
HIPD_EXTERN int hipd_info_bool(const hipd_info_t *info, const char *path,
                               int *out);
/** @p out points into @p info and lives as long as it. Not NUL-safe for
 *  binary strings: use @p len. */
HIPD_EXTERN int hipd_info_str(const hipd_info_t *info, const char *path,
                              const char **out, size_t *len);
/** @return the number of elements of an array or map field, or an error. */
HIPD_EXTERN int hipd_info_len(const hipd_info_t *info, const char *path);
/** Write @p info as JSON-like text into @p buf (truncated to @p size).
 *  @return the length the full text needs (excluding the NUL). */
HIPD_EXTERN int hipd_info_format(const hipd_info_t *info, char *buf,
                                 size_t size);
/** Free a record that a function returned (NULL is ignored). Strings read
 *  from it with hipd_info_str() go with it. Every hipd_info_t ** out
 *  parameter below hands the caller a record to free with this. */
HIPD_EXTERN void hipd_info_free(hipd_info_t *info);

/* --------------------------------------------------------------- methods */

/** `hello`: repeat the handshake; @p out gets the daemon's identity
 *  (name, version, protocol, features, session). */
HIPD_EXTERN int hipd_hello(hipd_conn_t *conn, hipd_info_t **out);

/** `ping`: the daemon echoes @p len bytes of @p data into @p out (capacity
 *  @p cap; *@p out_len gets the length). HIPD_ERANGE if @p cap is too small. */
HIPD_EXTERN int hipd_ping(hipd_conn_t *conn, const void *data, size_t len,
                          void *out, size_t cap, size_t *out_len);
HIPD_EXTERN int hipd_ping_begin(hipd_conn_t *conn, const void *data, size_t len,
                                void *out, size_t cap, size_t *out_len,
                                hipd_call_t **call);

/** `daemon.info`: version, uptime, sessions, build features. */
HIPD_EXTERN int hipd_daemon_info(hipd_conn_t *conn, hipd_info_t **out);
HIPD_EXTERN int hipd_daemon_info_begin(hipd_conn_t *conn, hipd_info_t **out,
                                       hipd_call_t **call);

/** `session.info`: this session's id, peer credentials, resource counts. */
HIPD_EXTERN int hipd_session_info(hipd_conn_t *conn, hipd_info_t **out);
HIPD_EXTERN int hipd_session_info_begin(hipd_conn_t *conn, hipd_info_t **out,
                                        hipd_call_t **call);

/* ---------------------------------------------------- backend and devices */

/**
 * Handles of daemon objects: valid only on the connection (session) that
 * created them. Each kind is a type of its own, so that passing a stream
 * where a buffer is needed does not compile: a struct of one 64-bit member,
 * passed and stored by value like the integer it wraps (in one register on
 * x86-64 and aarch64). The member is not for callers:
 * - hipd_X_id(h): the handle as the daemon knows it (print it with PRIu64;
 *   the number records such as hipd_session_info()'s report);
 * - hipd_X_from_id(n): a handle from such a number;
 * - HIPD_X_NULL: the zero handle, never a valid object (HIPD_EHANDLE). A
 *   failed create or alloc leaves HIPD_X_NULL in its out-pointer. Test
 *   with hipd_X_id(h) == 0. As the stream of hipd_kernel_launch(),
 *   hipd_kernel_run() and hipd_event_record(), HIPD_STREAM_NULL means the
 *   session's default stream of the kernel's or event's device (as stream
 *   0 in HIP); the _async memory functions need a stream
 *   (hipd_stream_default() gives the default one).
 * The kernel handle, hipd_kernel_t, is declared with the kernels below.
 * ABI: in 0.1.0 these were plain uint64_t (source using them as integers
 * now goes through the functions above); a struct of one uint64_t is
 * passed as a uint64_t is (x86-64 SysV, AAPCS64, and on the stack on
 * i386), and the library returns none by value, so calls compiled against
 * the integers still link and work. The one-member layout is fixed ABI.
 */
typedef struct hipd_stream {
  uint64_t id_; /* private: use hipd_stream_id() */
} hipd_stream_t;
typedef struct hipd_buffer {
  uint64_t id_; /* private: use hipd_buffer_id() */
} hipd_buffer_t;
typedef struct hipd_event {
  uint64_t id_; /* private: use hipd_event_id() */
} hipd_event_t;

static inline uint64_t hipd_stream_id(hipd_stream_t h)
{
  return h.id_;
}
static inline hipd_stream_t hipd_stream_from_id(uint64_t id)
{
  hipd_stream_t h;
  h.id_ = id;
  return h;
}
static inline uint64_t hipd_buffer_id(hipd_buffer_t h)
{
  return h.id_;
}
static inline hipd_buffer_t hipd_buffer_from_id(uint64_t id)
{
  hipd_buffer_t h;
  h.id_ = id;
  return h;
}
static inline uint64_t hipd_event_id(hipd_event_t h)
{
  return h.id_;
}
static inline hipd_event_t hipd_event_from_id(uint64_t id)
{
  hipd_event_t h;
  h.id_ = id;
  return h;
}
#define HIPD_STREAM_NULL (hipd_stream_from_id(0))
#define HIPD_BUFFER_NULL (hipd_buffer_from_id(0))
#define HIPD_EVENT_NULL (hipd_event_from_id(0))

/** Pass as a device id to mean the session's current device. */
#define HIPD_DEVICE_CURRENT (-1)

/** `backend.info`: {name "hip", version [major, minor, patch], available,
 *  execution_model "jit", drivers [...], ir_versions [...], source_langs
 *  ["hip", "cuda"]}. */
HIPD_EXTERN int hipd_backend_info(hipd_conn_t *conn, hipd_info_t **out);
/** `device.count`: how many devices the daemon serves. */
HIPD_EXTERN int hipd_device_count(hipd_conn_t *conn, int *count);
/** `device.list`: an array of device records (without live memory). */
HIPD_EXTERN int hipd_device_list(hipd_conn_t *conn, hipd_info_t **out);
/** `device.get`: the record of device @p dev: id, name, driver, platform,
 *  arch, is_cpu, capabilities {...}, memory {free, total, hipd_allocated,
 *  hipd_buffers}. */
HIPD_EXTERN int hipd_device_get(hipd_conn_t *conn, int dev, hipd_info_t **out);
/** `device.set_current` / `device.current`: the session's current device,
 *  used where a call takes HIPD_DEVICE_CURRENT (initially 0). */
HIPD_EXTERN int hipd_device_set_current(hipd_conn_t *conn, int dev);
HIPD_EXTERN int hipd_device_current(hipd_conn_t *conn, int *dev);
/** `device.synchronize`: wait for all of this session's streams on @p dev
 *  (other sessions' work is not waited for). */
HIPD_EXTERN int hipd_device_synchronize(hipd_conn_t *conn, int dev);

/* ---------------------------------------------------------------- streams */

/** `stream.create`: a new stream on @p dev; work on different streams may
 *  overlap, work on one stream runs in order. */
HIPD_EXTERN int hipd_stream_create(hipd_conn_t *conn, int dev,
                                   hipd_stream_t *out);
/** `stream.destroy`: queued work finishes first. The default stream cannot
 *  be destroyed (HIPD_EPERM). */
HIPD_EXTERN int hipd_stream_destroy(hipd_conn_t *conn, hipd_stream_t stream);
/** `stream.synchronize`: returns when all work queued on @p stream is done. */
HIPD_EXTERN int hipd_stream_synchronize(hipd_conn_t *conn,
                                        hipd_stream_t stream);
HIPD_EXTERN int hipd_stream_synchronize_begin(hipd_conn_t *conn,
                                              hipd_stream_t stream,
                                              hipd_call_t **call);
/** `stream.query`: *@p idle = 1 when all its work has completed. */
HIPD_EXTERN int hipd_stream_query(hipd_conn_t *conn, hipd_stream_t stream,
                                  int *idle);
/** `stream.default`: the session's default stream of @p dev. */
HIPD_EXTERN int hipd_stream_default(hipd_conn_t *conn, int dev,
                                    hipd_stream_t *out);

/* ----------------------------------------------------------------- memory */

/** `mem.alloc`: @p count elements of @p kind ("int8", "uint8", "int16",
 *  "uint16", "float16", "int32", "uint32", "float32", "int64", "uint64",
 *  "float64", "byte", "complex32", "complex64", "char") on @p dev. Zero sizes
 * are HIPD_EINVAL; past the device's memory HIPD_ENOMEM; past the session quota
 * HIPD_EQUOTA. */
HIPD_EXTERN int hipd_mem_alloc(hipd_conn_t *conn, int dev, uint64_t count,
                               const char *kind, hipd_buffer_t *out);
/** `mem.alloc_custom`: @p count elements of @p elem_size bytes. */
HIPD_EXTERN int hipd_mem_alloc_custom(hipd_conn_t *conn, int dev,
                                      uint64_t count, uint64_t elem_size,
                                      hipd_buffer_t *out);
/** `mem.free`: the handle is gone at once; the memory after the work
 *  queued on it. */
HIPD_EXTERN int hipd_mem_free(hipd_conn_t *conn, hipd_buffer_t buf);
/** `mem.write`: copy @p len bytes from @p data to @p buf at @p offset;
 *  complete on the device when it returns. */
HIPD_EXTERN int hipd_mem_write(hipd_conn_t *conn, hipd_buffer_t buf,
                               uint64_t offset, const void *data, size_t len);
/** `mem.write_async`: ordered on @p stream; answered once the copy is
 *  queued on the stream (the daemon holds a copy of the bytes), not when it
 *  has run: errors of the copy come from the next synchronisation. @p data
 *  may be reused when this, or the _begin form, returns. */
HIPD_EXTERN int hipd_mem_write_async(hipd_conn_t *conn, hipd_buffer_t buf,
                                     uint64_t offset, const void *data,
                                     size_t len, hipd_stream_t stream);
HIPD_EXTERN int hipd_mem_write_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                                           uint64_t offset, const void *data,
                                           size_t len, hipd_stream_t stream,
                                           hipd_call_t **call);
/** `mem.read`: copy @p len bytes at @p offset of @p buf into @p out. */
HIPD_EXTERN int hipd_mem_read(hipd_conn_t *conn, hipd_buffer_t buf,
                              uint64_t offset, void *out, size_t len);
/** `mem.read_async`: the same, ordered on @p stream (after the work queued
 *  on it before). The reply carries the bytes, so it comes once the copy
 *  has run: @p out holds them when this returns, or when the _begin form's
 *  call completes; until then @p out must stay valid. */
HIPD_EXTERN int hipd_mem_read_async(hipd_conn_t *conn, hipd_buffer_t buf,
                                    uint64_t offset, void *out, size_t len,
                                    hipd_stream_t stream);
HIPD_EXTERN int hipd_mem_read_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                                          uint64_t offset, void *out,
                                          size_t len, hipd_stream_t stream,
                                          hipd_call_t **call);
/** `mem.copy`: device to device, also across devices. */
HIPD_EXTERN int hipd_mem_copy(hipd_conn_t *conn, hipd_buffer_t dst,
                              uint64_t dst_offset, hipd_buffer_t src,
                              uint64_t src_offset, size_t len);
HIPD_EXTERN int hipd_mem_copy_async(hipd_conn_t *conn, hipd_buffer_t dst,
                                    uint64_t dst_offset, hipd_buffer_t src,
                                    uint64_t src_offset, size_t len,
                                    hipd_stream_t stream);
HIPD_EXTERN int hipd_mem_copy_async_begin(hipd_conn_t *conn, hipd_buffer_t dst,
                                          uint64_t dst_offset,
                                          hipd_buffer_t src,
                                          uint64_t src_offset, size_t len,
                                          hipd_stream_t stream,
                                          hipd_call_t **call);
/** `mem.memset`: set @p len bytes at @p offset to the byte @p value. */
HIPD_EXTERN int hipd_mem_memset(hipd_conn_t *conn, hipd_buffer_t buf,
                                uint64_t offset, size_t len, int value);
HIPD_EXTERN int hipd_mem_memset_async(hipd_conn_t *conn, hipd_buffer_t buf,
                                      uint64_t offset, size_t len, int value,
                                      hipd_stream_t stream);
HIPD_EXTERN int hipd_mem_memset_async_begin(hipd_conn_t *conn,
                                            hipd_buffer_t buf, uint64_t offset,
                                            size_t len, int value,
                                            hipd_stream_t stream,
                                            hipd_call_t **call);
/** `mem.size`: the buffer's size in bytes. */
HIPD_EXTERN int hipd_mem_size(hipd_conn_t *conn, hipd_buffer_t buf,
                              uint64_t *size);
/** `mem.info`: {size, elem_size, count, device, device_ptr, zero_copy}. */
HIPD_EXTERN int hipd_mem_info(hipd_conn_t *conn, hipd_buffer_t buf,
                              hipd_info_t **out);

/* ------------------------------------------------- shared host memory */

/**
 * A shared host buffer: memory of this process that the daemon maps too, so
 * transfers between it and device memory move no bytes through the socket.
 * hipd_shm_create() makes a memfd, seals it against shrinking (the daemon
 * never faults on a truncated file), maps it here and passes it to the
 * daemon over the socket (SCM_RIGHTS); the daemon maps it and registers it
 * with its GPUs (page-locked), so copies run at pinned-memory speed.
 * A shared buffer belongs to the session that created it; it is unmapped in
 * the daemon when freed or when the session ends.
 */
typedef struct hipd_shm hipd_shm_t;

/** `shm.create`: create a shared buffer of @p size bytes (rounded up to
 *  the page size), zero-filled. HIPD_ENOTSUP where the daemon cannot take
 *  descriptors (not a local Unix socket). *@p out is the caller's, to
 *  release with hipd_shm_free() (also after hipd_close()). */
HIPD_EXTERN int hipd_shm_create(hipd_conn_t *conn, size_t size,
                                hipd_shm_t **out);
/** The buffer's memory in this process, valid until hipd_shm_free(). */
HIPD_EXTERN void *hipd_shm_ptr(const hipd_shm_t *shm);
/** Its size in bytes (the page-rounded size). */
HIPD_EXTERN size_t hipd_shm_size(const hipd_shm_t *shm);
/** Its handle in the daemon (for messages and hipd_session_info). */
HIPD_EXTERN uint64_t hipd_shm_handle(const hipd_shm_t *shm);
/** `shm.free`, then unmap it here. Transfers queued on it finish first;
 *  zero-copy buffers made from it keep the daemon's mapping until they are
 *  freed. @p shm is freed even when the call fails. @p conn is the
 *  connection that created @p shm (or NULL for it). It may already be
 *  closed: a shared buffer keeps its connection's memory until it is freed,
 *  and after hipd_close() this only unmaps @p shm here and returns
 *  HIPD_EDISCONNECTED (the daemon released it with the session).
 *  HIPD_EINVAL for @p shm NULL, HIPD_EFOREIGN for another connection's
 *  buffer (not freed then). */
HIPD_EXTERN int hipd_shm_free(hipd_conn_t *conn, hipd_shm_t *shm);

/** `mem.write_shm`: copy @p len bytes at @p shm_offset of @p shm into
 *  @p buf at @p offset; complete when it returns. */
HIPD_EXTERN int hipd_mem_write_shm(hipd_conn_t *conn, hipd_buffer_t buf,
                                   uint64_t offset, const hipd_shm_t *shm,
                                   uint64_t shm_offset, size_t len);
/** `mem.write_shm_async`: the same, ordered on @p stream, a stream of the
 *  buffer's device (HIPD_STREAM_NULL is HIPD_EHANDLE, as in every _async
 *  memory function): the copy runs after the work queued on
 *  @p stream before it. The reply comes once the copy has completed on the
 *  stream, so this returns (and the _begin form's call completes) only
 *  then; the shared bytes must not change before that. To go on while the
 *  stream works, use hipd_mem_write_shm_async_begin() and hipd_wait() the
 *  call later. */
HIPD_EXTERN int hipd_mem_write_shm_async(hipd_conn_t *conn, hipd_buffer_t buf,
                                         uint64_t offset, const hipd_shm_t *shm,
                                         uint64_t shm_offset, size_t len,
                                         hipd_stream_t stream);
HIPD_EXTERN int
hipd_mem_write_shm_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                               uint64_t offset, const hipd_shm_t *shm,
                               uint64_t shm_offset, size_t len,
                               hipd_stream_t stream, hipd_call_t **call);
/** `mem.read_shm`: copy @p len bytes at @p offset of @p buf into @p shm at
 *  @p shm_offset; the bytes are there when it returns. */
HIPD_EXTERN int hipd_mem_read_shm(hipd_conn_t *conn, hipd_buffer_t buf,
                                  uint64_t offset, const hipd_shm_t *shm,
                                  uint64_t shm_offset, size_t len);
/** `mem.read_shm_async`: ordered on @p stream (after the work queued on it
 *  before); like hipd_mem_write_shm_async(), the reply comes once the copy
 *  has completed on the stream: the bytes are in @p shm when this returns,
 *  or when the _begin form's call completes. */
HIPD_EXTERN int hipd_mem_read_shm_async(hipd_conn_t *conn, hipd_buffer_t buf,
                                        uint64_t offset, const hipd_shm_t *shm,
                                        uint64_t shm_offset, size_t len,
                                        hipd_stream_t stream);
HIPD_EXTERN int
hipd_mem_read_shm_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                              uint64_t offset, const hipd_shm_t *shm,
                              uint64_t shm_offset, size_t len,
                              hipd_stream_t stream, hipd_call_t **call);
/** `mem.alloc_zero_copy`: a buffer on @p dev whose memory is @p shm itself
 *  (the Backend API's alloc_zero_copy). On the CPU device kernels use the
 *  shared pages directly; on a GPU they reach them as mapped host memory
 *  over the bus (HIPD_ENOTSUP where the device cannot map host memory).
 *  The buffer reports zero_copy in hipd_mem_info(). */
HIPD_EXTERN int hipd_mem_alloc_zero_copy(hipd_conn_t *conn, int dev,
                                         const hipd_shm_t *shm,
                                         hipd_buffer_t *out);

/* ------------------------------------------------- batched submission */

/**
 * Cork the connection: requests are kept in this process and written
 * together (one system call for many) when the connection is uncorked, when
 * the calling thread waits for any call, or when 64 KiB are pending. Use it
 * around a run of _begin calls (launches, async copies, event records).
 * Replies and errors still come to each call. Thread-safe; corks nest.
 */
HIPD_EXTERN void hipd_cork(hipd_conn_t *conn);
/** Undo one hipd_cork(); the last one sends what is pending.
 *  @return 0 or the code the connection broke with. */
HIPD_EXTERN int hipd_uncork(hipd_conn_t *conn);

/* ----------------------------------------------------------------- events */

HIPD_EXTERN int hipd_event_create(hipd_conn_t *conn, int dev,
                                  hipd_event_t *out);
HIPD_EXTERN int hipd_event_destroy(hipd_conn_t *conn, hipd_event_t event);
/** `event.record`: mark @p stream's current position (HIPD_STREAM_NULL:
 *  the session's default stream of the event's device). */
HIPD_EXTERN int hipd_event_record(hipd_conn_t *conn, hipd_event_t event,
                                  hipd_stream_t stream);
HIPD_EXTERN int hipd_event_record_begin(hipd_conn_t *conn, hipd_event_t event,
                                        hipd_stream_t stream,
                                        hipd_call_t **call);
/** `event.query`: *@p done = 1 once the stream has passed the mark;
 *  HIPD_ENOTRECORDED if it was never recorded. */
HIPD_EXTERN int hipd_event_query(hipd_conn_t *conn, hipd_event_t event,
                                 int *done);
HIPD_EXTERN int hipd_event_synchronize(hipd_conn_t *conn, hipd_event_t event);
/** `event.elapsed`: milliseconds between two completed marks;
 *  HIPD_ENOTRECORDED or HIPD_ENOTREADY otherwise. */
HIPD_EXTERN int hipd_event_elapsed(hipd_conn_t *conn, hipd_event_t start,
                                   hipd_event_t stop, float *ms);

/* -------------------------------------------------------------- profiling */

/** `profile.enable` / `profile.disable`: while on, every transfer and
 *  launch of the session is timed on the device, and so waits for it: the
 *  _async calls and hipd_kernel_launch() are then answered once their work
 *  has run, like the synchronous ones. Disabling discards the records: read
 *  them with hipd_session_profile() first. */
HIPD_EXTERN int hipd_profile_enable(hipd_conn_t *conn);
HIPD_EXTERN int hipd_profile_disable(hipd_conn_t *conn);
/** `session.profile`: {enabled, dropped, records [{op, stream, bytes,
 *  start_ms, end_ms}]}; @p clear empties the records. A record's stream is
 *  the number hipd_stream_id() gives. */
HIPD_EXTERN int hipd_session_profile(hipd_conn_t *conn, int clear,
                                     hipd_info_t **out);

/* ---------------------------------------------------------------- kernels */

/** A loaded kernel: a handle like hipd_buffer_t (see there). */
typedef struct hipd_kernel {
  uint64_t id_; /* private: use hipd_kernel_id() */
} hipd_kernel_t;
static inline uint64_t hipd_kernel_id(hipd_kernel_t h)
{
  return h.id_;
}
static inline hipd_kernel_t hipd_kernel_from_id(uint64_t id)
{
  hipd_kernel_t h;
  h.id_ = id;
  return h;
}
#define HIPD_KERNEL_NULL (hipd_kernel_from_id(0))

/** Kernel launch arguments, by position, each of a stated kind. Build one
 *  with hipd_args_new() and the adders; reuse it across launches with
 *  hipd_args_clear(). Not thread-safe. */
typedef struct hipd_args hipd_args_t;
/** @return a new, empty argument list, the caller's to free with
 *  hipd_args_free(); NULL when out of memory. */
HIPD_EXTERN hipd_args_t *hipd_args_new(void);
/** Free @p args (NULL is ignored). A launch takes no reference: @p args
 *  may be freed or changed as soon as the launch function returns. */
HIPD_EXTERN void hipd_args_free(hipd_args_t *args);
HIPD_EXTERN void hipd_args_clear(hipd_args_t *args);
/** A buffer of this session, at a byte offset: the kernel gets its device
 *  address. */
HIPD_EXTERN int hipd_args_buffer(hipd_args_t *args, hipd_buffer_t buf,
                                 uint64_t offset);
/** A raw device address; the daemon accepts it only inside a buffer of
 *  this session on the kernel's device. */
HIPD_EXTERN int hipd_args_ptr(hipd_args_t *args, uint64_t device_ptr);
HIPD_EXTERN int hipd_args_i32(hipd_args_t *args, int32_t v);
HIPD_EXTERN int hipd_args_i64(hipd_args_t *args, int64_t v);
HIPD_EXTERN int hipd_args_f32(hipd_args_t *args, float v);
HIPD_EXTERN int hipd_args_f64(hipd_args_t *args, double v);

/** `kernel.compile`: compile @p source (HIP C++) and load kernel @p name on
 *  device @p dev (HIPD_DEVICE_CURRENT for the current one); the binary
 *  replaces any cached one. @p options (NULL-ended, may be NULL) are
 *  compiler options such as "-DN=4". A compile error is HIPD_ECOMPILE with
 *  the compiler's log in hipd_last_error(). @p info, if not NULL, gets
 *  {kernel, cache, key, bytes, compile_ms, timing, params}. */
HIPD_EXTERN int hipd_kernel_compile(hipd_conn_t *conn, int dev,
                                    const char *source, const char *name,
                                    const char *const *options,
                                    hipd_kernel_t *out, hipd_info_t **info);
/** `kernel.compile_cached`: the same through the compiled-kernel cache. */
HIPD_EXTERN int hipd_kernel_compile_cached(hipd_conn_t *conn, int dev,
                                           const char *source, const char *name,
                                           const char *const *options,
                                           hipd_kernel_t *out,
                                           hipd_info_t **info);
/** Compile for a target architecture ("gfx90a", "sm_90", "host-x86_64")
 *  without a device: checks the source and fills the cache. @p info gets
 *  {kernel: nil, cache, key, bytes, compile_ms, timing, params}. */
HIPD_EXTERN int hipd_kernel_compile_for(hipd_conn_t *conn, const char *arch,
                                        const char *source, const char *name,
                                        const char *const *options, int cached,
                                        hipd_info_t **info);
/** `kernel.info`: {name, device, params (declared types, or nil)}. */
HIPD_EXTERN int hipd_kernel_info(hipd_conn_t *conn, hipd_kernel_t kernel,
                                 hipd_info_t **out);
HIPD_EXTERN int hipd_kernel_destroy(hipd_conn_t *conn, hipd_kernel_t kernel);
/** `kernel.output`: what this session's kernels printed (their `printf`,
 *  standard output and error), the oldest first, and taken: at most
 *  @p max bytes (0: all the daemon keeps, up to 1 MiB). @p out gets
 *  {output (bytes: hipd_info_str()), dropped (bytes lost since the last
 *  call, past the daemon's 1 MiB per session or a launch's 32 KiB on the
 *  CPU device)}. Kernel output never goes to the daemon's log. */
HIPD_EXTERN int hipd_kernel_output(hipd_conn_t *conn, uint32_t max,
                                   hipd_info_t **out);
/** `kernel.launch`: queue @p kernel over @p grid blocks of @p block threads
 *  (3-D) with @p shared bytes of dynamic shared memory on @p stream
 *  (HIPD_STREAM_NULL: the default stream of the kernel's device). Returns
 *  once queued (while profiling: once run); errors of the kernel's run come
 *  from the next synchronisation. @p args may be freed or reused when this,
 *  or the _begin form, returns. Limits are checked
 *  first (HIPD_ELIMIT); where the kernel's declaration is known the
 *  arguments are checked against it (HIPD_ESIGNATURE). */
HIPD_EXTERN int hipd_kernel_launch(hipd_conn_t *conn, hipd_kernel_t kernel,
                                   const uint32_t grid[3],
                                   const uint32_t block[3], uint32_t shared,
                                   hipd_stream_t stream,
                                   const hipd_args_t *args);
HIPD_EXTERN int
hipd_kernel_launch_begin(hipd_conn_t *conn, hipd_kernel_t kernel,
                         const uint32_t grid[3], const uint32_t block[3],
                         uint32_t shared, hipd_stream_t stream,
                         const hipd_args_t *args, hipd_call_t **call);
/** `kernel.launch` with `wait`: the same, answered once the kernel has run
 *  on @p stream (after the work queued before it): one request for a launch
 *  and its synchronisation, with the errors of the kernel's run. */
HIPD_EXTERN int hipd_kernel_run(hipd_conn_t *conn, hipd_kernel_t kernel,
                                const uint32_t grid[3], const uint32_t block[3],
                                uint32_t shared, hipd_stream_t stream,
                                const hipd_args_t *args);
HIPD_EXTERN int hipd_kernel_run_begin(hipd_conn_t *conn, hipd_kernel_t kernel,
                                      const uint32_t grid[3],
                                      const uint32_t block[3], uint32_t shared,
                                      hipd_stream_t stream,
                                      const hipd_args_t *args,
                                      hipd_call_t **call);
/** `run_source`: compile through the cache for the current device, launch
 *  over @p grid blocks of @p block threads on its default stream and
 *  return when the kernel has run. @p lang is one of
 *  hipd_supported_source_langs(); others are HIPD_ELANG. @p grid comes
 *  before @p block, as in hipd_kernel_launch() and every launch of this
 *  API (the protocol's `run_source` sends block first, as upstream Sarek's
 *  Backend API does; the library swaps them; until 0.1.0 this function took
 *  block first too). No kernel handle is kept. */
HIPD_EXTERN int hipd_run_source(hipd_conn_t *conn, const char *source,
                                const char *lang, const char *kernel_name,
                                const uint32_t grid[3], const uint32_t block[3],
                                uint32_t shared, const hipd_args_t *args);
/** `run_source` with `wait` false, as upstream Sarek's run_source: the
 *  same, but returns once the launch is submitted on the current device's
 *  default stream (on the CPU device, and while profiling, once it has
 *  run). The kernel's results, and the errors of its run, are seen by the
 *  next operation that waits for that stream: hipd_stream_synchronize()
 *  of hipd_stream_default(), or a synchronous hipd_mem_read(). */
HIPD_EXTERN int hipd_run_source_async(hipd_conn_t *conn, const char *source,
                                      const char *lang, const char *kernel_name,
                                      const uint32_t grid[3],
                                      const uint32_t block[3], uint32_t shared,
                                      const hipd_args_t *args);
/** `supported_source_langs`: the languages device @p dev takes, as an
 *  info array ("hip" and "cuda" on every device). */
HIPD_EXTERN int hipd_supported_source_langs(hipd_conn_t *conn, int dev,
                                            hipd_info_t **out);
/** `execute_direct`: always HIPD_ENOTSUP (hip is a JIT backend). */
HIPD_EXTERN int hipd_execute_direct(hipd_conn_t *conn);
/** `cache.stats`: {hits, hits_memory, hits_disk, misses, waits, warmed,
 *  compile_failures, corrupt, auth_failures, evictions, entries, bytes,
 *  disk_entries, disk_bytes, preloaded, hits_loaded}. */
HIPD_EXTERN int hipd_cache_stats(hipd_conn_t *conn, hipd_info_t **out);
/** `cache.clear`: empty the shared cache (root or the daemon's user). */
HIPD_EXTERN int hipd_cache_clear(hipd_conn_t *conn);

/* ------------------------------------------------------------------ admin */

/**
 * The admin methods (PROTOCOL.md, "Administration"). An admin (root, or a
 * member of the daemon's --admin-group) sees and acts on every session;
 * any other caller only on the sessions of its own uid. Device figures are
 * node-wide for every caller.
 */
/** `session.list`: an array of session records ordered by id: {id, pid,
 *  uid, gid, user, client, tenant, worker_pid, age_ms, requests, errors,
 *  streams, events, kernels_loaded, kernels_launched, busy_ns, bytes_h2d,
 *  bytes_d2h, devices [{device, buffers, bytes}]}. */
HIPD_EXTERN int hipd_session_list(hipd_conn_t *conn, hipd_info_t **out);
/** `session.kill`: close session @p session (close reason "killed").
 *  HIPD_ENOENT when there is none the caller may see. */
HIPD_EXTERN int hipd_session_kill(hipd_conn_t *conn, uint64_t session);
/** `daemon.stats`: {uptime_ms, sessions, sessions_total, tenants,
 *  isolation, devices [{device, name, kind, lost, mem_total, mem_free,
 *  mem_held, buffers, sessions, kernels_launched, busy_ns, bytes_h2d,
 *  bytes_d2h, faults}], cache {entries, bytes, hits, misses}, compiles
 *  {done, failed, running, queued}}. */
HIPD_EXTERN int hipd_daemon_stats(hipd_conn_t *conn, hipd_info_t **out);
/** `metrics`: the Prometheus text exposition (format 0.0.4). *@p text is
 *  malloc'd and NUL-terminated: the caller frees it with free(). @p len,
 *  if not NULL, gets its length. */
HIPD_EXTERN int hipd_metrics(hipd_conn_t *conn, char **text, size_t *len);
/** `log.level`: with @p level NULL, read the daemon's log level; else set
 *  it ("error", "warn", "info", "debug"; admins only, HIPD_EPERM
 *  otherwise). @p out (capacity @p cap, 16 is enough) gets the level now
 *  in force, NUL-terminated. */
HIPD_EXTERN int hipd_log_level(hipd_conn_t *conn, const char *level, char *out,
                               size_t cap);
/** `cache.list`: an array of the compiled-kernel cache's entries: {key,
 *  bytes, atime} (atime: unix seconds, 0 for an entry in memory only). */
HIPD_EXTERN int hipd_cache_list(hipd_conn_t *conn, hipd_info_t **out);

/**
 * Grants (PROTOCOL.md, "Grants"): access to devices given to a user at run
 * time, on top of the daemon's configured access rules, as a batch
 * scheduler does for a job. Only admins may add or revoke one; anyone may
 * list (a non-admin sees its own uid's). A grant record is {label, uid,
 * user, devices [ids], quota, since (unix seconds), sessions, mem_held,
 * mem_peak, kernels_launched, busy_ns, bytes_h2d, bytes_d2h}: the usage is
 * that of the sessions under the grant (a session comes under its uid's
 * newest grant when it connects).
 */
/** `grant.add`: give @p user (a name, or a uid in decimal) the @p ndevices
 *  devices of global ids @p devices, with a quota of @p quota bytes of
 *  device memory for the sessions under it (0: none of its own), labelled
 *  @p label (NULL or "": "grant-N"; 1 to 63 letters, digits or ._:@+-).
 *  @p out (may be NULL) gets the new grant's record. Errors: HIPD_EPERM
 *  (not an admin), HIPD_ENOENT (no such user), HIPD_ENODEV (a device this
 *  daemon does not serve), HIPD_EEXIST (the label is taken), HIPD_EPARAMS.
 *  Thread safety as every call on @p conn. */
HIPD_EXTERN int hipd_grant_add(hipd_conn_t *conn, const char *user,
                               const int *devices, size_t ndevices,
                               uint64_t quota, const char *label,
                               hipd_info_t **out);
/** `grant.revoke`: take back the grant labelled @p label, or (@p label
 *  NULL) every grant of @p user, or the grant @p label only if it is
 *  @p user's. The sessions under them are closed (close reason "access
 *  revoked: "), which frees their memory. @p out (may be NULL) gets an
 *  array of the revoked grants' records, with their final usage.
 *  HIPD_ENOENT when nothing matches, HIPD_EPERM for a non-admin. */
HIPD_EXTERN int hipd_grant_revoke(hipd_conn_t *conn, const char *label,
                                  const char *user, hipd_info_t **out);
/** `grant.list`: an array of grant records (an admin sees all, any other
 *  caller its own uid's), each with its usage so far. */
HIPD_EXTERN int hipd_grant_list(hipd_conn_t *conn, hipd_info_t **out);

/* -------------------------------------------------------- code generation */

/**
 * Kernels from the Sarek IR (proto/IR.md): the IR travels as the msgpack
 * bytes of an IR document (@p ir, @p ir_len); `hipd-ir pack` makes them
 * from the document's JSON form. Malformed IR is HIPD_EIR, an intrinsic
 * neither built in nor registered HIPD_EINTRINSIC; hipd_last_error() then
 * says where in the document ("kernel.body[3].then: unknown stmt tag
 * 'iff'"). Common parameters:
 * @param block NULL, or the block dimensions the kernel will be launched
 *        with at most: the kernel gets __launch_bounds__(x*y*z) and a
 *        larger launch is HIPD_ELIMIT.
 * @param soa_params NULL-ended names of vec-of-record params to lower as
 *        Structure-of-Arrays (one pointer per leaf field and one length),
 *        or NULL.
 */

/** `kernel.generate_source`: the HIP source for device @p dev
 *  (HIPD_DEVICE_CURRENT: the current one) or, when @p arch is not NULL, for
 *  that architecture ("gfx90a", "sm_90", "host-x86_64"; @p dev is then
 *  ignored). @p out gets {source, name, platform, arguments [{name, type,
 *  role, param, field?}], max_threads?}: `arguments` is the kernel's
 *  parameter list, what a launch passes, in order. */
HIPD_EXTERN int hipd_kernel_generate_source(
    hipd_conn_t *conn, int dev, const char *arch, const void *ir, size_t ir_len,
    const uint32_t block[3], const char *const *soa_params, hipd_info_t **out);
/** `kernel.compile_ir`: generate, compile through the cache (keyed by the
 *  generated source) and load on device @p dev. The kernel's parameter
 *  list is known, so every launch of it is checked (HIPD_ESIGNATURE names
 *  the argument and both kinds). @p options: as hipd_kernel_compile().
 *  @p info, if not NULL, gets {kernel, name, platform, cache, key, bytes,
 *  compile_ms, timing, params, arguments}. */
HIPD_EXTERN int hipd_kernel_compile_ir(hipd_conn_t *conn, int dev,
                                       const void *ir, size_t ir_len,
                                       const uint32_t block[3],
                                       const char *const *soa_params,
                                       const char *const *options,
                                       hipd_kernel_t *out, hipd_info_t **info);
/** The same for architecture @p arch without a device (checks the IR and
 *  the generated source, fills the cache); {kernel: nil, ...}. */
HIPD_EXTERN int hipd_kernel_compile_ir_for(hipd_conn_t *conn, const char *arch,
                                           const void *ir, size_t ir_len,
                                           const uint32_t block[3],
                                           const char *const *soa_params,
                                           const char *const *options,
                                           hipd_info_t **info);

/** The convergence class of an intrinsic: uniform (the same for every
 *  thread of a block), divergent (per thread), sync (every thread must
 *  reach it: barriers). */
typedef enum {
  HIPD_CONV_UNIFORM = 0,
  HIPD_CONV_DIVERGENT,
  HIPD_CONV_SYNC
} hipd_convergence_t;

/** `intrinsics.list`: an array of {name, code, arity (nil: any),
 *  convergence, builtin}: the built-ins as generated for @p dev or @p arch
 *  (see hipd_kernel_generate_source), then this session's registrations. */
HIPD_EXTERN int hipd_intrinsics_list(hipd_conn_t *conn, int dev,
                                     const char *arch, hipd_info_t **out);
/** `intrinsics.find`: the forms a call of @p name ("sin",
 *  "Float32.sqrt") uses, as an array like hipd_intrinsics_list()'s;
 *  HIPD_ENOENT if none. */
HIPD_EXTERN int hipd_intrinsics_find(hipd_conn_t *conn, const char *name,
                                     int dev, const char *arch,
                                     hipd_info_t **out);
/** `intrinsics.register`: make intrinsic @p name (a dotted name,
 *  "Gpu.float") generate @p code in this session's kernels only. @p code
 *  is one C expression: %s placeholders take the arguments in order
 *  ("atomicExch(&%s, %s)"); without placeholders it is applied to the
 *  arguments ("sinf": "sinf(x)", "(float)": "(float)(x)") or stands alone
 *  when there are none ("warpSize"). @p arity: the number of arguments, or
 *  -1 for any (a template's is its placeholder count). A built-in name is
 *  HIPD_EEXIST; registering a name again replaces it. */
HIPD_EXTERN int hipd_intrinsics_register(hipd_conn_t *conn, const char *name,
                                         const char *code,
                                         hipd_convergence_t conv, int arity);

#ifdef __cplusplus
}
#endif
#endif /* HIPD_H */
