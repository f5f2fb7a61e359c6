/* daemon/dispatch.h: the method table and the life of one request.
 *
 * A request becomes a call_t. Its handler validates the params and either
 * answers at once (call_result() then pack one value, or call_fail()) or
 * defers: call_defer() gives a heap copy that outlives the handler, to be
 * answered later on the loop thread with call_result()/call_fail() and then
 * call_finish(). Params are valid only while the handler runs: a deferred
 * call must copy what it needs.
 */
#ifndef HIPD_DISPATCH_H
#define HIPD_DISPATCH_H

#include <msgpack.h>
#include <stdarg.h>
#include <stdint.h>

#include "handles.h"
#include "session.h"

typedef struct call call_t;
typedef int (*method_fn)(call_t *c);

enum {
  M_PREHELLO = 1 << 0, /* allowed before the hello handshake */
};

typedef struct method {
  const char *name; /* protocol name, "mem.alloc" */
  method_fn fn;
  uint8_t min_params; /* params array length bounds */
  uint8_t max_params;
  uint8_t flags; /* M_* */
  uint8_t since; /* protocol version that introduced it */
} method_t;

struct call {
  session_t *s;
  const method_t *m;
  uint32_t msgid;
  const msgpack_object *params; /* valid during the handler only */
  uint32_t nparams;
  msgpack_sbuffer out; /* the reply being built */
  msgpack_packer pk;
  void *tail; /* malloc'd payload sent after the reply, or NULL */
  size_t tail_len;
  int answered; /* call_result() or call_fail() was used */
  int deferred; /* call_defer() made a copy of this call */
};

/* Decode and run one request message (already framed and decoded). */
void dispatch_request(session_t *s, uint32_t msgid, const char *method,
                      uint32_t method_len, const msgpack_object *params);

/* The method table, sorted by name, and its size (for the protocol
 * document's cross-check and tests). */
const method_t *dispatch_methods(unsigned *count);
const method_t *dispatch_find(const char *name, size_t len);

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
 * with HIPD_ENOMEM and the handler must return). */
call_t *call_defer(call_t *c);
/* Send a deferred call's answer and free it (on the loop thread). */
void call_finish(call_t *c);

/* Parameter readers: each checks param @p i (named @p what in messages)
 * and on failure answers the call with HIPD_EPARAMS/ERANGE naming the
 * param, and returns that code. Optional params that are absent or nil
 * leave *out as it was: use call_arg_present() to tell. */
int call_arg_present(call_t *c, unsigned i);
/* A param that may not be absent or nil: 0, or EPARAMS answered ("param 1
 * (kind) must be a string, not nil"), @p expected naming its type. */
int call_arg_required(call_t *c, unsigned i, const char *what,
                      const char *expected);
int call_arg_uint(call_t *c, unsigned i, const char *what, uint64_t max,
                  uint64_t *out);
int call_arg_int(call_t *c, unsigned i, const char *what, int64_t min,
                 int64_t max, int64_t *out);
int call_arg_double(call_t *c, unsigned i, const char *what, double *out);
int call_arg_bool(call_t *c, unsigned i, const char *what, int *out);
int call_arg_bytes(call_t *c, unsigned i, const char *what, const char **ptr,
                   size_t *len);
/* A string copied into @p buf (NUL-terminated, at most @p size - 1 bytes;
 * longer or embedded NUL is an error). */
int call_arg_str(call_t *c, unsigned i, const char *what, char *buf,
                 size_t size);
/* A handle of the session's table, of @p type. */
int call_arg_handle(call_t *c, unsigned i, const char *what, handle_type_t type,
                    uint64_t *h, void **obj);
/* The error answer for a failed handle lookup (handles_get's code). */
int call_fail_handle(call_t *c, const char *what, uint64_t h,
                     handle_type_t type, int rc);

#endif
