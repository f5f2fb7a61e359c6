/* SPDX-License-Identifier: MIT */
/* daemon/dispatch.h: the method table and the life of one request.
 *
 * Each row of the table names a method, its handler and the signature of
 * its params: one param_t per position (sd-bus's vtable signature, spelled
 * out). A request becomes a call_t; dispatch checks the param count the
 * signature allows, then checks and converts every param in order, with
 * the messages PROTOCOL.md documents, and only then runs the handler with
 * the typed values in c->args[i]. The handler either answers at once
 * (call_result() then pack one value, or call_fail()) or defers:
 * call_defer() gives a heap copy that outlives the handler, to be answered
 * later on the loop thread with call_result()/call_fail() and then
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
#include "session.h"

typedef int (*method_fn)(call_t *c);

enum {
  M_PREHELLO = 1 << 0, /* allowed before the hello handshake */
};

/* The kinds of param a row can declare, and what dispatch gives the
 * handler in its arg_t. Every kind but P_REST accepts nil or absence only
 * when the param is optional (arg_t.present is then 0); a required param
 * given as nil is EPARAMS ("param 1 (kind) must be a string, not nil"). */
typedef enum param_kind {
  P_UINT = 1, /* uint, 0 to max: .u; ERANGE "must be between 0 and max" */
  P_INT,      /* int, min to max: .i */
  P_BOOL,     /* bool: .b */
  P_BYTES,    /* bin or str: .s (not NUL-terminated), .len */
  P_BIN,      /* bin only: .s, .len */
  P_STR,      /* str of at most max bytes, no NUL: .s (a NUL-terminated
                 copy), .len */
  P_HANDLE,   /* a handle of type htype, looked up: .u (the handle), .obj;
                 the handle codes name the param (call_fail_handle) */
  P_DEVICE,   /* a device id: .dev; optional: absent or nil is the
                 session's current device (present is 0, dev set);
                 ENODEV for no such device, EDEVLOST for a lost one */
  P_DIMS,     /* launch dims: uint or [x] to [x, y, z], each at most max;
                 a 0 is ELIMIT ("grid.y is 0"): .dims (missing ones 1) */
  P_BLOCK,    /* codegen block: uint or [x, y, z], each 1 to max, product
                 at most max (ELIMIT): .dims */
  P_OPTIONS,  /* array of at most max str, each under 256 bytes, no NUL:
                 .strv (NUL-terminated copies), .n */
  P_NAMES,    /* array of at most max str, each 1 to 255 bytes, no NUL
                 (soa_params): .strv, .n */
  P_TARGET,   /* a device id (.dev) or an architecture, a str of at most
                 max bytes (.s); optional: absent or nil is the current
                 device */
  P_ARRAY,    /* an array the handler reads itself (launch args): .o */
  P_ANY,      /* any value the handler reads itself: .o */
  P_REST,     /* last: 0 to max more params of any type, not read */
} param_kind_t;

/* One param of a method's signature: its name (as in PROTOCOL.md), its
 * kind, and the kind's bounds. Exposed for the protocol document's test
 * and the protocol fuzzer: what a valid request to each method is. */
typedef struct param {
  const char *name;   /* "offset" */
  uint8_t kind;       /* P_* */
  uint8_t optional;   /* absent or nil allowed */
  uint8_t htype;      /* P_HANDLE: the handle_type_t */
  int64_t min;        /* P_INT */
  uint64_t max;       /* P_UINT, P_INT, P_DIMS, P_BLOCK: the value;
                         P_STR, P_TARGET: bytes; P_OPTIONS, P_NAMES,
                         P_REST: count */
  const char *expect; /* the type as messages say it, where not the
                         kind's own ("bin (the msgpack bytes of ...)") */
} param_t;

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

/* Decode and run one request message (already framed and decoded). */
void dispatch_request(session_t *s, uint32_t msgid, const char *method,
                      uint32_t method_len, const msgpack_object *params);

/* The method table, sorted by name, and its size (for the protocol
 * document's cross-check, the fuzzer and tests). Each row's min_params and
 * max_params are derived from its signature. */
const method_t *dispatch_methods(unsigned *count);
const method_t *dispatch_find(const char *name, size_t len);
/* The param kind's name as messages and tests say it ("uint"). */
const char *dispatch_kind_name(param_kind_t kind);

#endif
