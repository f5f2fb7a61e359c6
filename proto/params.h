/* SPDX-License-Identifier: MIT */
/* proto/params.h: the rows that describe a request's params, and the checks
 * of their values that need no session, handle table or device.
 *
 * A method's signature is an array of param_t, one per position (the
 * daemon's method table, daemon/dispatch.c, holds one per method). Each
 * row gives the param's name, its kind and the kind's bounds. Checking one
 * param is three steps:
 *
 *   1. decode: from its wire form into a param_value_t. For msgpack that is
 *      proto_param_decode(), which checks the type and fills the kind's
 *      fields, copying strings into a zone;
 *   2. check: the values against the row (bounds, dims that are 0, sizes,
 *      counts, launch-argument kinds). proto_param_decode() runs these
 *      checks itself, element by element in wire order, so that the first
 *      fault found is the one a client has always been told about;
 *   3. bind: what needs the session: handles looked up in its table,
 *      devices it may use (the daemon's dispatch.c).
 *
 * A caller whose params do not come as msgpack (a shared-memory ring whose
 * fixed-size descriptors name handles and an argument block) fills a
 * param_value_t per row itself, from the descriptor's fields, and calls
 * proto_param_check() on each: the same rows and the same checks as the
 * socket path, with the same messages; then binds as dispatch does.
 *
 * Faults are values: a code (HIPD_E*) and the message a client is sent
 * after the method's name ("param 1 (offset) must be ..."). Nothing here
 * touches a session or a device; this file is linked by the daemon and the
 * client library alike (libproto).
 */
#ifndef HIPD_PROTO_PARAMS_H
#define HIPD_PROTO_PARAMS_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

struct device;

/* The kinds of param a row can declare, and what the value holds (see
 * param_value_t). Every kind but P_REST accepts nil or absence only when
 * the param is optional (present is then 0); a required param given as nil
 * is EPARAMS ("param 1 (kind) must be a string, not nil"). */
typedef enum param_kind {
  P_UINT = 1,    /* uint, 0 to max: .u; ERANGE "must be between 0 and max" */
  P_INT,         /* int, min to max: .i */
  P_BOOL,        /* bool: .b */
  P_BYTES,       /* bin or str: .s (not NUL-terminated), .len */
  P_BIN,         /* bin only: .s, .len */
  P_STR,         /* str of at most max bytes, no NUL: .s (a NUL-terminated
                    copy), .len */
  P_HANDLE,      /* a handle of type htype: .u (the handle); bound: .obj;
                    the handle codes name the param */
  P_DEVICE,      /* a device id: .u; bound: .dev; optional: absent or nil is
                    the session's current device (present is 0, dev set);
                    ENODEV for no such device, EDEVLOST for a lost one */
  P_DIMS,        /* launch dims: uint or [x] to [x, y, z], each at most max;
                    a 0 is ELIMIT ("grid.y is 0"): .dims (missing ones 1) */
  P_BLOCK,       /* codegen block: uint or [x, y, z], each 1 to max, product
                    at most max (ELIMIT): .dims */
  P_OPTIONS,     /* array of at most max str, each under 256 bytes, no NUL:
                    .strv (NUL-terminated copies), .n */
  P_NAMES,       /* array of at most max str, each 1 to 255 bytes, no NUL
                    (soa_params): .strv, .n */
  P_TARGET,      /* a device id (.u; bound: .dev) or an architecture, a str of
                    at most max bytes (.s, .dev NULL); optional: absent or nil
                    is the current device */
  P_LAUNCH_ARGS, /* kernel arguments: an array of at most max
                    [kind, value(, offset)]: .largs, .n */
  P_ANY,         /* any value the handler reads itself: .o */
  P_REST,        /* last: 0 to max more params of any type, not read */
} param_kind_t;

/* One param of a method's signature: its name (as in PROTOCOL.md), its
 * kind, and the kind's bounds. */
typedef struct param {
  const char *name;   /* "offset" */
  uint8_t kind;       /* P_* */
  uint8_t optional;   /* absent or nil allowed */
  uint8_t htype;      /* P_HANDLE: the daemon's handle type */
  int64_t min;        /* P_INT */
  uint64_t max;       /* P_UINT, P_INT, P_DIMS, P_BLOCK: the value;
                         P_STR, P_TARGET: bytes; P_OPTIONS, P_NAMES,
                         P_LAUNCH_ARGS, P_REST: count */
  const char *expect; /* the type as messages say it, where not the
                         kind's own ("bin (the msgpack bytes of ...)") */
} param_t;

/* The kinds of a launch argument ([kind, value] on the wire). */
typedef enum param_larg_kind {
  LARG_BUF = 1, /* ["buf", handle(, offset)]: .u the handle, .off */
  LARG_PTR,     /* ["ptr", address]: .u, a device address */
  LARG_I32,     /* ["i32", int in 32 bits]: .i32 */
  LARG_I64,     /* ["i64", int]: .i64 */
  LARG_F32,     /* ["f32", number]: .f32 */
  LARG_F64,     /* ["f64", number]: .f64 */
} param_larg_kind_t;

/* The most launch arguments a launch takes (the driver's DRV_MAX_ARGS). */
#define PARAM_LAUNCH_MAX 256

/* One launch argument, decoded and checked; a buffer or pointer is still
 * to be bound (looked up among the session's buffers). */
typedef struct param_larg {
  uint8_t kind; /* LARG_* */
  uint64_t u;   /* LARG_BUF: the handle as given (any value, the bind's
                   error names it); LARG_PTR: the address */
  uint64_t off; /* LARG_BUF: the offset into the buffer (0 if none) */
  union {
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
  } v;
} param_larg_t;

/* A param's value, by the fields its kind sets (param_kind_t). obj and dev
 * are the bind's (dispatch's handle and device lookups); proto never sets
 * or reads them. */
typedef struct param_value {
  int present;               /* given and not nil */
  uint64_t u;                /* P_UINT; P_HANDLE: the handle; P_DEVICE,
                                P_TARGET: a device id */
  int64_t i;                 /* P_INT */
  int b;                     /* P_BOOL */
  const char *s;             /* P_BYTES, P_BIN: the bytes; P_STR, P_TARGET's
                                architecture: NUL-terminated */
  size_t len;                /* bytes of s */
  void *obj;                 /* P_HANDLE: the handle's object (bound) */
  struct device *dev;        /* P_DEVICE; P_TARGET: the device, or NULL for
                                an architecture (bound) */
  uint32_t dims[3];          /* P_DIMS, P_BLOCK */
  const char *const *strv;   /* P_OPTIONS, P_NAMES: n strings */
  const param_larg_t *largs; /* P_LAUNCH_ARGS: n arguments */
  uint32_t n;
  const msgpack_object *o; /* the param as decoded, NULL when absent */
} param_value_t;

/* A check's answer when it fails: the code and the message (without the
 * method's name, which the daemon puts first). */
typedef struct param_fault {
  int code;
  char msg[256];
} param_fault_t;

/* The kind's name as messages and tests say it ("uint"); "?" if none. */
const char *proto_param_kind_name(param_kind_t kind);

/* Decode param @p i, @p o (NULL when absent), by row @p p into @p v and
 * check it (proto_param_check's checks, in wire order): strings, string
 * lists and launch arguments are copied into @p zone, which must outlive
 * @p v. A nil or absent optional param is not present. Device ids are not
 * looked up: that is the bind's.
 * @return 0, or the fault's code with @p f filled in. */
int proto_param_decode(const param_t *p, unsigned i, const msgpack_object *o,
                       msgpack_zone *zone, param_value_t *v, param_fault_t *f);

/* Check the value @p v of param @p i against row @p p, as
 * proto_param_decode() does, for a caller that filled @p v itself (not
 * from msgpack): present or optional; P_UINT, P_INT in bounds; P_STR,
 * P_TARGET's architecture of at most max bytes without a NUL; P_DIMS,
 * P_BLOCK each in bounds and not 0 (P_BLOCK: the product too); P_OPTIONS,
 * P_NAMES counts and sizes; P_LAUNCH_ARGS the count and the kinds.
 * @return 0, or the fault's code with @p f filled in. */
int proto_param_check(const param_t *p, unsigned i, const param_value_t *v,
                      param_fault_t *f);

#endif
