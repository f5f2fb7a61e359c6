/* SPDX-License-Identifier: MIT */
/* daemon/call.h: one request being answered: the call a handler gets.
 *
 * Dispatch (dispatch.h) makes a call_t for each request, converts its
 * params into c->args by the method's signature and runs the handler with
 * them (a typed view of c->args, methods.h). The
 * handler either answers at once (call_result() then pack one value, or
 * call_fail()) or defers: call_defer() gives a heap copy that outlives the
 * handler, answered later on the loop thread with call_result()/call_fail()
 * and then call_finish(), which hands the answer to the session. Params and
 * typed args are valid only while the handler runs: a deferred call must
 * copy what it needs.
 */
#ifndef HIPD_CALL_H
#define HIPD_CALL_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "handles.h"
#include "params.h"
#include "session.h"

struct device;
struct method;
typedef struct call call_t;

/* The most params a signature declares (dispatch's P_REST aside). */
#define CALL_MAX_ARGS 8

/* A param as dispatch converted it for the handler: proto/params.h's
 * param_value_t, with its handle's object or device bound (see
 * param_kind_t for which fields each kind sets). Valid during the handler
 * only. */
typedef param_value_t arg_t;

struct call {
  session_t *s;
  const struct method *m; /* its row in dispatch's table */
  const char *name;       /* the method's name, for messages */
  uint32_t msgid;
  const msgpack_object *params; /* valid during the handler only */
  msgpack_zone *zone;           /* where params are decoded (the session's
                                   for the socket, the ring's for a ring) */
  uint32_t nparams;
  const arg_t *args;   /* params converted by m->sig (m->nsig entries), valid
                          during the handler only; NULL in a deferred copy */
  msgpack_sbuffer out; /* the reply being built */
  msgpack_packer pk;
  void *tail; /* malloc'd payload sent after the reply, or NULL */
  size_t tail_len;
  int answered; /* call_result() or call_fail() was used */
  int code;     /* the error answered, 0: a result (stats.h) */
  int deferred; /* call_defer() made a copy of this call */
  int via_ring; /* it came from the session's ring */
  int on_cq;    /* its answer goes to the ring's completions (ring.h) */
  struct ring *early_ring; /* a deferred call that may be answered early:
                              a reference on the ring (call_early_enable) */
  int early; /* enum ring_early: what its early answer did (written by
                the thread that sent it, read on the loop after the
                completion that follows) */
};

/* Start the successful reply: pack exactly one value into the returned
 * packer. @return the packer. */
msgpack_packer *call_result(call_t *c);
/* Answer with a bin result whose @p len bytes are @p data (malloc'd; the
 * call takes ownership and the bytes are written without a copy). */
void call_result_bin(call_t *c, void *data, size_t len);
/* Answer with an error; the message names the method and the problem.
 * @return @p code, so handlers can `return call_fail(...)`. */
int call_fail(call_t *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Keep the call after the handler returns. @return the heap copy (owning a
 * session reference), or NULL if out of memory (the call is then answered
 * with HIPD_ENOMEM and the handler must return). The copy has no params or
 * args. */
call_t *call_defer(call_t *c);
/* Send a deferred call's answer and free it (on the loop thread). */
void call_finish(call_t *c);

/* Early answers. A deferred call whose answer would be nil, on a ring
 * whose client sleeps on the futex doorbell, may be answered from the
 * thread that saw its work end (objects.h's obj_early_t), so that the
 * client is woken without waiting for the loop: call_early_enable() on the
 * loop when it is deferred, call_early_nil() on that thread. The loop
 * still finishes the call as usual (its counts, its session's
 * bookkeeping); call_send() then sends nothing. */

/* May deferred call @p d be answered early: it answers on its session's
 * ring (on_cq) and the ring takes early answers (ring_early_ref). @return
 * 1 with a ring reference kept in @p d (dropped by call_send), or 0.
 * Loop thread. */
int call_early_enable(call_t *d);
/* Answer @p d with nil now, from any thread, once. @return 1 if it was
 * answered (call_send() then sends nothing), 0 if not (the loop answers
 * it as usual). */
int call_early_nil(call_t *d);

/* The error answer for a failed handle lookup (handles_get's code), naming
 * the handle @p what: "buffer 0x... was already freed". */
int call_fail_handle(call_t *c, const char *what, uint64_t h,
                     handle_type_t type, int rc);

/* Hand the packed answer (or, if none was packed, an EINTERNAL error) to
 * the session and count the request as answered. Dispatch's, for calls it
 * did not defer; call_finish() does it for deferred ones. */
void call_send(call_t *c);

#endif
