/* SPDX-License-Identifier: MIT */
/* daemon/dispatch.h: the method table and the life of one request.
 *
 * Each row of the table names a method, its handler and the signature of
 * its params: one param_t per position (sd-bus's vtable signature, spelled
 * out). A request becomes a call_t; dispatch checks the param count the
 * signature allows, then checks and converts every param in order, with
 * the messages PROTOCOL.md documents, and only then runs the handler with
 * the typed values: its signature's view (methods.h), read by name. The handler
 * either answers at once (call_result() then pack one value, or call_fail()) or
 * defers: call_defer() gives a heap copy that outlives the handler, to be
 * answered later on the loop thread with call_result()/call_fail() and then
 * call_finish(). Params and typed args are valid only while the handler
 * runs: a deferred call must copy what it needs.
 *
 * A handler returns 0 (it answered or deferred) or a negative code. If it
 * returns a code without having answered or deferred, dispatch answers
 * with that code and hipd_strerror()'s message.
 */
#ifndef HIPD_DISPATCH_H
#define HIPD_DISPATCH_H

#include <msgpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "call.h"
#include "params.h"
#include "session.h"

typedef int (*method_fn)(call_t *c);

enum {
  M_PREHELLO = 1 << 0, /* allowed before the hello handshake */
  M_RING = 1 << 1,     /* may come from a ring (proto/ring_layout.h's
                          PROTO_RING_METHODS; set by the table's init) */
};

/* A row's params are proto/params.h's param_t rows (kinds, bounds, and the
 * session-free checks of their values); dispatch decodes and checks each
 * by its row there, then binds what needs the session (handles, devices).
 * Exposed for the protocol document's test and the protocol fuzzer: what
 * a valid request to each method is. */
typedef struct method {
  const char *name; /* protocol name, "mem.alloc" */
  method_fn fn;
  uint8_t flags;      /* M_* */
  uint8_t since;      /* protocol version that introduced it */
  const param_t *sig; /* its params, in order (NULL: none) */
  uint8_t nsig;       /* entries of sig */
  uint8_t min_params; /* params array length bounds, derived from sig: */
  uint8_t max_params; /* min is 1 + the last required param's index */
} method_t;

/* Decode and run one request message (already framed and decoded) that
 * came on the socket. */
void dispatch_request(session_t *s, uint32_t msgid, const char *method,
                      uint32_t method_len, const msgpack_object *params);
/* The same for a request taken from the session's ring, decoded into
 * @p zone (its params' values go there too): the same checks, then only a
 * method marked M_RING runs; the answer goes to the ring's completions
 * when @p on_cq (one is reserved for it), else to the socket. */
void dispatch_ring_request(session_t *s, msgpack_zone *zone, int on_cq,
                           uint32_t msgid, const char *method,
                           uint32_t method_len, const msgpack_object *params);

/* The method table, sorted by name, and its size (for the protocol
 * document's cross-check, the fuzzer and tests). Each row's min_params and
 * max_params are derived from its signature. */
const method_t *dispatch_methods(unsigned *count);
const method_t *dispatch_find(const char *name, size_t len);
/* The param kind's name as messages and tests say it ("uint"). */
const char *dispatch_kind_name(param_kind_t kind);

#endif
