/* SPDX-License-Identifier: MIT */
/* client/conn.h: the internals of libhipd shared by its files.
 *
 * conn.c owns the connection: the socket, the table of pending calls and the
 * thread that happens to do socket I/O (with conn_error.c, conn_call.c,
 * conn_recv.c, conn_send.c and conn_decode.c, behind conn_internal.h). Every
 * method wrapper (methods.c) is a few lines on top of the call mechanism below:
 *
 *   int hipd_ping_begin(hipd_conn_t *conn, ..., hipd_call_t **out)
 *   {
 *     hipd_call_t *call;
 *     int err = conn_call_begin(conn, "ping", 1, &call);
 *     if (err < 0)
 *       return err;
 *     msgpack_pack_bin_with_body(&call->pk, data, len);
 *     return conn_call_send(call, conn_decode_bytes,
 *                           CONN_OUTS(cap, buf, out_len), out);
 *   }
 *
 *   int hipd_ping(hipd_conn_t *conn, ...)
 *   {
 *     hipd_call_t *call;
 *     return conn_sync(hipd_ping_begin(conn, ..., &call), &call);
 *   }
 *
 * A call is sent at once; its reply is decoded later, by whichever thread
 * reads it, into the out-pointers recorded with the call.
 */
#ifndef HIPD_CLIENT_CONN_H
#define HIPD_CLIENT_CONN_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "hipd.h"
#include "rpc.h"

/* The longest method name a request may carry. */
#define CONN_METHOD_MAX 255

/* Where a reply's result goes: the out-pointers the caller gave the method
 * wrapper, in the wrapper's order, and one size (a buffer's capacity, an
 * element count) for methods that have one. The pointers must stay valid
 * until the call is waited for; a decoder never runs after that. */
#define CONN_MAX_OUTS 4
typedef struct {
  void *p[CONN_MAX_OUTS];
  size_t n;
} conn_outs_t;

/* Build a conn_outs_t in place: CONN_OUTS(cap, buf, &len). */
#define CONN_OUTS(n_, ...) ((conn_outs_t){.p = {__VA_ARGS__}, .n = (n_)})

/*
 * A result decoder: turns the `result` of a successful response into the
 * method's outputs. It runs once, with the connection's lock held, on the
 * thread that read the reply (not necessarily the caller's), and only while
 * the caller still waits for the call (never for an abandoned one). @p result
 * lives in the receive buffer: copy what must outlive the decoder.
 * @return 0, or a negative code; a decoder that fails sets the call's message
 * with conn_call_fail() and leaves nothing allocated behind.
 */
typedef int (*conn_decode_fn)(hipd_call_t *call, const msgpack_object *result,
                              const conn_outs_t *outs);

/* The params a call packs without an allocation (a ring slot's worth). */
#define CONN_SMALL_BODY 496

/* One request: built by a method wrapper, sent, then pending in the
 * connection's table until its reply comes, the call is abandoned (timed out)
 * or the connection breaks. */
struct hipd_call {
  hipd_conn_t *conn;     /* holds a reference on conn while the user owns it */
  const char *method;    /* static string, for messages */
  uint32_t nparams;      /* count given to conn_call_begin */
  uint32_t msgid;        /* valid once sent */
  int state;             /* CALL_BUILDING, _PENDING, _DONE, _ABANDONED */
  int result;            /* once done: 0 or a negative code */
  char *error;           /* once failed: malloc'd message, or NULL */
  conn_decode_fn decode; /* NULL: the result is ignored */
  conn_outs_t outs;      /* what decode fills */
  msgpack_packer pk;     /* the wrapper packs the params with this */
  /* The packed params: in small while they fit (every request of the hot
   * path: a launch, a wait, a copy to a shared buffer), else in body,
   * made then (large ones by reference). */
  msgpack_vrefbuffer body;
  int spilled;     /* body holds them (and is to be destroyed) */
  int pack_failed; /* packing ran out of memory */
  size_t small_len;
  int send_fd;        /* a descriptor sent with the request (SCM_RIGHTS), or -1;
                         the caller's, not closed */
  void *direct_dst;   /* a reply that is one bin of direct_len bytes may be */
  size_t direct_len;  /* received straight into here (mem.read); or NULL */
  hipd_call_t *hnext; /* next in the pending table's bucket */
  int on_socket;      /* in the table, its answer due on the socket */
  /* The answer is expected this much later than a round trip's (a copy's
   * own time): a wait for it spins that much longer before it sleeps. */
  uint32_t spin_extra_us;
  /* Last, not cleared when the call is made (conn_call_begin()). */
  char small[CONN_SMALL_BODY];
};

enum {
  CALL_BUILDING = 0, /* params being packed, not yet in the table */
  CALL_PENDING,      /* sent (or being sent), in the table */
  CALL_DONE,         /* result and error are final; out of the table */
  CALL_ABANDONED,    /* the user gave up (timeout): the connection frees it */
};

/* ------------------------------------------------------------ the calls */

/*
 * Start the request @p method (a static string) with @p nparams parameters.
 * The caller then packs exactly @p nparams values with (*out)->pk and ends
 * with conn_call_send() or conn_call_abort(). Packing never fails visibly: an
 * allocation failure is remembered and reported by conn_call_send().
 * Bytes of 4 KiB and more are packed by reference, not copied: they must stay
 * valid until conn_call_send() returns (the caller's own arguments are).
 * @return 0, HIPD_EINVAL (no conn) or HIPD_ENOMEM, with the thread's
 *         last error set.
 */
int conn_call_begin(hipd_conn_t *conn, const char *method, uint32_t nparams,
                    hipd_call_t **out);

/*
 * Send the request built in @p call and register @p decode, which fills
 * @p outs from the result when the reply comes. Blocks until the whole
 * request is written (reading replies meanwhile), at most the connection's
 * timeout.
 * @return 0 with *@p out = @p call, which the user now owns (hipd_wait frees
 *         it); or a negative code (HIPD_EDISCONNECTED, HIPD_ETIMEDOUT,
 *         HIPD_EMSGSIZE, HIPD_ENOMEM, HIPD_EINVAL when @p out is NULL) with
 *         the call freed, *@p out = NULL and the thread's last error set.
 */
int conn_call_send(hipd_call_t *call, conn_decode_fn decode, conn_outs_t outs,
                   hipd_call_t **out);

/* Drop a call that was begun but not sent (say, a parameter turned out to
 * be invalid while packing). Sets the thread's last error on the connection
 * from the printf-style message. @return @p code. */
int conn_call_abort(hipd_call_t *call, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* For decoders: fail @p call with @p code and a printf-style message.
 * @return @p code. */
int conn_call_fail(hipd_call_t *call, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The synchronous form of a method: @p err is what its pipelined form returned
 * and *@p call the call it made. @return @p err if negative, else the result
 * of hipd_wait(*call). */
int conn_sync(int err, hipd_call_t **call);

/* Fail a method before any call exists (bad arguments): sets the calling
 * thread's last error for @p conn (may be NULL) from the printf-style message.
 * @return @p code. */
int conn_fail(hipd_conn_t *conn, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --------------------------------------------------- common decoders */

/* Ignore the result (methods that return nil). */
int conn_decode_none(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs);
/* A bin or str result copied into p[0] (capacity n); its length into
 * (size_t *)p[1] if not NULL, even when it does not fit (HIPD_ERANGE). */
int conn_decode_bytes(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs);
/* An integer result into (int64_t *)p[0] or (uint64_t *)p[0]. */
int conn_decode_int(hipd_call_t *call, const msgpack_object *result,
                    const conn_outs_t *outs);
int conn_decode_uint(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs);

/* An integer result that fits an int into (int *)p[0] (a device id or
 * count). */
int conn_decode_int32(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs);
/* A boolean result into (int *)p[0] as 0 or 1. */
int conn_decode_bool(hipd_call_t *call, const msgpack_object *result,
                     const conn_outs_t *outs);
/* A number (float or integer) result into (float *)p[0]. */
int conn_decode_float(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs);

/* The answer to a compile (kernel.compile*, kernel.compile_ir; kernel.c):
 * the handle into (hipd_kernel_t *)p[0] if not NULL (the reply must then
 * have one), the whole record into (hipd_info_t **)p[1] if not NULL. */
int conn_decode_compiled(hipd_call_t *call, const msgpack_object *result,
                         const conn_outs_t *outs);

/* ------------------------------------------------ common parameters */

/* Check a device id given to a method: a device index (>= 0) or
 * HIPD_DEVICE_CURRENT. @return 0, or HIPD_ENODEV with the thread's last
 * error set. */
int conn_check_device(hipd_conn_t *conn, const char *method, int dev);
/* Pack a device id checked by conn_check_device(): HIPD_DEVICE_CURRENT
 * travels as nil, which the daemon reads as the session's current device. */
void conn_pack_device(msgpack_packer *pk, int dev);

/*
 * The whole of a method whose one param is a handle: begin @p method, pack
 * @p handle, send with @p decode and @p outs. @return as conn_call_send().
 */
int conn_call_handle(hipd_conn_t *conn, const char *method, uint64_t handle,
                     conn_decode_fn decode, conn_outs_t outs,
                     hipd_call_t **out);

/* ------------------------------------------------------------- info.c */

/* Deep-copy @p o into a new info record (strings and binaries are copied and
 * NUL-terminated). @return 0 or HIPD_ENOMEM. */
int info_create(const msgpack_object *o, hipd_info_t **out);

/* A decoder for methods returning a record: a map result copied into
 * (hipd_info_t **)p[0]; with p[0] NULL the result is checked and dropped. */
int info_decode(hipd_call_t *call, const msgpack_object *result,
                const conn_outs_t *outs);
/* The same for methods returning an array (`device.list`). */
int info_decode_array(hipd_call_t *call, const msgpack_object *result,
                      const conn_outs_t *outs);

#endif /* HIPD_CLIENT_CONN_H */
