/* SPDX-License-Identifier: MIT */
/* proto/rpc.h: the msgpack-rpc wire format of hipd, linked by daemon and
 * client alike (libproto.la, a libtool convenience library).
 *
 *   request       [0, msgid, method, params]
 *   response      [1, msgid, error, result]
 *   notification  [2, method, params]
 *
 * A stream carries messages back to back. proto_frame_scan() finds where
 * one ends without decoding it, enforcing the decode limits; only a complete
 * message that passed those limits is handed to msgpack-c by
 * proto_msg_decode(). The error object of a response is always the map
 * {"code": int, "name": str, "message": str} (see PROTOCOL.md).
 */
#ifndef HIPD_PROTO_RPC_H
#define HIPD_PROTO_RPC_H

#include <msgpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hipd.h"

enum {
  PROTO_REQUEST = 0,
  PROTO_RESPONSE = 1,
  PROTO_NOTIFY = 2,
};

/* Decode limits. Oversize or malformed input is a protocol violation. */
typedef struct {
  size_t max_message;   /* bytes of one message */
  unsigned max_depth;   /* nesting of arrays/maps; at most PROTO_DEPTH_CAP */
  uint32_t max_array;   /* elements of one array */
  uint32_t max_map;     /* pairs of one map */
  uint32_t max_objects; /* objects (every value) in one message */
} proto_limits_t;

#define PROTO_DEPTH_CAP 32 /* msgpack-c's own unpack stack depth */
#define PROTO_DEFAULT_MAX_MESSAGE ((size_t)512 << 20)

/* Fill @p lim with the defaults: 512 MiB messages, depth 16, 1M-element
 * arrays, 64K-pair maps, 4M objects. */
void proto_limits_default(proto_limits_t *lim);

/*
 * Look for the end of the first msgpack object in buf[0, len).
 * @return the object's size in bytes (> 0) when it is complete;
 *         0 when more bytes are needed: *need gets the least total size the
 *           object can have given what was seen (a caller may wait until
 *           that many bytes are buffered before scanning again);
 *         HIPD_EMSGSIZE or HIPD_EPROTO when a limit is broken or the bytes
 *           are not msgpack: *reason gets a static description.
 * The scan never reads past @p len and allocates nothing.
 */
long long proto_frame_scan(const proto_limits_t *lim, const uint8_t *buf,
                           size_t len, size_t *need, const char **reason);

/* One decoded message. Pointers refer into the decoded object tree, which
 * refers into the bytes it was decoded from (strings and binaries are not
 * copied): keep both the zone and those bytes alive while it is used. */
typedef struct {
  int type;           /* PROTO_REQUEST, _RESPONSE or _NOTIFY */
  uint32_t msgid;     /* request and response */
  const char *method; /* request and notification; not NUL-ended */
  uint32_t method_len;
  const msgpack_object *params; /* request and notification: an array */
  const msgpack_object *error;  /* response: nil or the error object */
  const msgpack_object *result; /* response */
} proto_msg_t;

/*
 * Decode the complete message buf[0, len) (as framed by proto_frame_scan)
 * into @p msg, with its objects allocated in @p zone.
 * @return 0, or HIPD_EPROTO with *reason set when it is not a valid
 *         msgpack-rpc message (not an array, wrong arity, unknown type,
 *         msgid out of range, method not a string, params not an array...).
 */
int proto_msg_decode(const uint8_t *buf, size_t len, msgpack_zone *zone,
                     proto_msg_t *msg, const char **reason);

/* ---- encoding: the caller owns the packer and its buffer ---- */

/* A few bytes packed without an allocation (a kick, an answer of nil):
 * msgpack_packer_init(&pk, &b, proto_smallbuf_write) on a zeroed one. */
typedef struct {
  char b[32];
  size_t len;
} proto_smallbuf_t;
/* msgpack's writer into a proto_smallbuf_t (@p data): -1 when it is full. */
int proto_smallbuf_write(void *data, const char *buf, size_t len);

/* Pack the head of a request; the caller then packs exactly @p nparams
 * values. */
void proto_pack_request(msgpack_packer *pk, uint32_t msgid, const char *method,
                        uint32_t nparams);
/* Pack the head of a successful response ([1, msgid, nil, ...]); the caller
 * then packs the result value. */
void proto_pack_response(msgpack_packer *pk, uint32_t msgid);
/* Pack a whole error response; the message is printf-formatted. */
void proto_pack_error_response(msgpack_packer *pk, uint32_t msgid, int code,
                               const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void proto_pack_error_responsev(msgpack_packer *pk, uint32_t msgid, int code,
                                const char *fmt, va_list ap);
/* Pack a notification head; the caller packs @p nparams values. */
void proto_pack_notify(msgpack_packer *pk, const char *method,
                       uint32_t nparams);
/* Pack the error object {"code","name","message"}. */
void proto_pack_error(msgpack_packer *pk, int code, const char *message);
/* Pack a NUL-terminated string (nil for NULL). */
void proto_pack_cstr(msgpack_packer *pk, const char *s);

/* Read an error object. @return 0 with *code and the message (not
 * NUL-terminated; *len bytes), or HIPD_EPROTO if @p o is not one. A code the
 * client does not know is passed through; its name is ignored. */
int proto_error_decode(const msgpack_object *o, int *code, const char **msg,
                       size_t *len);

/* ---- the daemon's notifications (PROTOCOL.md, "Messages") ---- */

/* The one message a peer that the access policy refuses reads, at once and
 * without asking, before the daemon closes its connection:
 * [2, "session.refused", [error]], the error object as in a response. */
#define PROTO_SESSION_REFUSED "session.refused"

/* The message a session the daemon closes for a reason of its own (an
 * admin's session.kill, a shutdown, a lost device, a kernel past its time
 * limit) reads last, when its socket takes it at once:
 * [2, "session.closed", [error]], the error object as in a response. */
#define PROTO_SESSION_CLOSED "session.closed"

/* Pack session.refused with @p code and @p message. */
void proto_pack_refused(msgpack_packer *pk, int code, const char *message);
/* Pack session.closed with @p code and @p message. */
void proto_pack_closed(msgpack_packer *pk, int code, const char *message);
/* Is @p m session.refused? @return 1 with its code and message (not
 * NUL-terminated; *len bytes), 0 if it is another message, or HIPD_EPROTO
 * if it is session.refused without an error object. */
int proto_refused_decode(const proto_msg_t *m, int *code, const char **msg,
                         size_t *len);
/* The same for session.closed. */
int proto_closed_decode(const proto_msg_t *m, int *code, const char **msg,
                        size_t *len);

/* ---- reading decoded objects ---- */

/* Value of key @p key (NUL-terminated) in map @p o, or NULL. */
const msgpack_object *proto_map_get(const msgpack_object *o, const char *key);
/* Integer value of @p o in [min, max]: 0, HIPD_EPARAMS if not an integer,
 * HIPD_ERANGE if outside. Floats are not integers. */
int proto_obj_int(const msgpack_object *o, int64_t min, int64_t max,
                  int64_t *out);
int proto_obj_uint(const msgpack_object *o, uint64_t max, uint64_t *out);
/* Number (int or float) as double. */
int proto_obj_double(const msgpack_object *o, double *out);
/* str or bin payload: 0 or HIPD_EPARAMS. */
int proto_obj_bytes(const msgpack_object *o, const char **ptr, size_t *len);
/* Equal to the NUL-terminated string @p s? */
int proto_obj_streq(const msgpack_object *o, const char *s);
/* Name of the type of @p o ("nil", "int", "str"...), for messages. */
const char *proto_obj_type_name(const msgpack_object *o);

/* ---- passing a descriptor over a Unix socket (SCM_RIGHTS) ---- */

/* Room for one descriptor in a message's ancillary data. */
typedef union {
  struct cmsghdr h;
  char space[CMSG_SPACE(sizeof(int))];
} proto_fd_ctl_t;

/* Attach descriptor @p fd to the message @p mh for sendmsg(), with @p ctl
 * (which must live until then) as its control buffer. */
void proto_msg_attach_fd(struct msghdr *mh, proto_fd_ctl_t *ctl, int fd);

#endif /* HIPD_PROTO_RPC_H */
