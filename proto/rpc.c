/* SPDX-License-Identifier: MIT */
/* proto/rpc.c: framing, decoding and encoding of hipd's msgpack-rpc. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "rpc.h"

void proto_limits_default(proto_limits_t *lim)
{
  lim->max_message = PROTO_DEFAULT_MAX_MESSAGE;
  lim->max_depth = 16;
  lim->max_array = 1u << 20;
  lim->max_map = 1u << 16;
  lim->max_objects = 4u << 20;
}

static uint64_t read_be(const uint8_t *p, unsigned n)
{
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++)
    v = (v << 8) | p[i];
  return v;
}

/* Size of the header of the object starting with byte @p b, the width of
 * its length field (0 when the length is in the byte itself or fixed), and
 * the fixed payload or child count encoded in the byte. Returns 0 for the
 * one byte msgpack never uses (0xc1). */
typedef struct {
  uint8_t head;     /* header bytes, including the type byte */
  uint8_t len_size; /* bytes of the big-endian length field after the type */
  uint8_t kind;     /* K_SCALAR, K_BYTES (payload), K_ARRAY, K_MAP */
  uint32_t fixed;   /* payload bytes or child count when len_size == 0 */
} head_t;

enum { K_SCALAR, K_BYTES, K_ARRAY, K_MAP };

static int head_of(uint8_t b, head_t *h)
{
  h->len_size = 0;
  h->fixed = 0;
  h->kind = K_SCALAR;
  h->head = 1;
  if (b <= 0x7f || b >= 0xe0)
    return 1;
  if (b <= 0x8f) {
    h->kind = K_MAP;
    h->fixed = b & 0x0f;
    return 1;
  }
  if (b <= 0x9f) {
    h->kind = K_ARRAY;
    h->fixed = b & 0x0f;
    return 1;
  }
  if (b <= 0xbf) {
    h->kind = K_BYTES;
    h->fixed = b & 0x1f;
    return 1;
  }
  switch (b) {
  case 0xc0: /* nil */
  case 0xc2: /* false */
  case 0xc3: /* true */
    return 1;
  case 0xc4:
  case 0xc5:
  case 0xc6: /* bin 8/16/32 */
    h->kind = K_BYTES;
    h->len_size = (uint8_t)(1u << (b - 0xc4));
    h->head = 1 + h->len_size;
    return 1;
  case 0xc7:
  case 0xc8:
  case 0xc9: /* ext 8/16/32: length, then a type */
    h->kind = K_BYTES;
    h->len_size = (uint8_t)(1u << (b - 0xc7));
    h->head = 2 + h->len_size;
    return 1;
  case 0xca:
    h->head = 5;
    return 1; /* float 32 */
  case 0xcb:
    h->head = 9;
    return 1; /* float 64 */
  case 0xcc:
  case 0xcd:
  case 0xce:
  case 0xcf: /* uint 8..64 */
    h->head = (uint8_t)(1 + (1u << (b - 0xcc)));
    return 1;
  case 0xd0:
  case 0xd1:
  case 0xd2:
  case 0xd3: /* int 8..64 */
    h->head = (uint8_t)(1 + (1u << (b - 0xd0)));
    return 1;
  case 0xd4:
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8: /* fixext */
    h->kind = K_BYTES;
    h->head = 2;
    h->fixed = 1u << (b - 0xd4);
    return 1;
  case 0xd9:
  case 0xda:
  case 0xdb: /* str 8/16/32 */
    h->kind = K_BYTES;
    h->len_size = (uint8_t)(1u << (b - 0xd9));
    h->head = 1 + h->len_size;
    return 1;
  case 0xdc:
  case 0xdd: /* array 16/32 */
    h->kind = K_ARRAY;
    h->len_size = (uint8_t)(2u << (b - 0xdc));
    h->head = 1 + h->len_size;
    return 1;
  case 0xde:
  case 0xdf: /* map 16/32 */
    h->kind = K_MAP;
    h->len_size = (uint8_t)(2u << (b - 0xde));
    h->head = 1 + h->len_size;
    return 1;
  default: /* 0xc1, never used */
    return 0;
  }
}

long long proto_frame_scan(const proto_limits_t *lim, const uint8_t *buf,
                           size_t len, size_t *need, const char **reason)
{
  /* left[d]: values still to come at depth d (maps count keys and values). */
  uint64_t left[PROTO_DEPTH_CAP + 1];
  /* The sum of left[]: each value still to come takes at least one byte,
   * so a message whose headers already need more than max_message is
   * refused at once (PROTOCOL.md), however its counts are spread over
   * nesting levels. */
  uint64_t owed = 1;
  unsigned depth = 0;
  unsigned max_depth =
      lim->max_depth < PROTO_DEPTH_CAP ? lim->max_depth : PROTO_DEPTH_CAP;
  uint64_t pos = 0;
  uint64_t objects = 0;
  head_t h;

  left[0] = 1;
  for (;;) {
    if (pos >= len)
      goto incomplete;
    if (!head_of(buf[pos], &h)) {
      *reason = "invalid msgpack type byte 0xc1";
      return HIPD_EPROTO;
    }
    if (++objects > lim->max_objects) {
      *reason = "too many values in one message";
      return HIPD_EMSGSIZE;
    }
    if (pos + h.head + owed - 1 > lim->max_message) {
      *reason = "message larger than the maximum message size";
      return HIPD_EMSGSIZE;
    }
    if (pos + h.head > len)
      goto incomplete;
    /* The length field, if any, always follows the type byte. */
    uint64_t n = h.len_size ? read_be(buf + pos + 1, h.len_size) : h.fixed;
    pos += h.head;
    left[depth]--;
    owed--;
    if (h.kind == K_BYTES) {
      pos += n;
      if (pos + owed > lim->max_message) {
        *reason = "message larger than the maximum message size";
        return HIPD_EMSGSIZE;
      }
    } else if (h.kind == K_ARRAY || h.kind == K_MAP) {
      if (h.kind == K_ARRAY && n > lim->max_array) {
        *reason = "array longer than the maximum array length";
        return HIPD_EMSGSIZE;
      }
      if (h.kind == K_MAP && n > lim->max_map) {
        *reason = "map larger than the maximum map size";
        return HIPD_EMSGSIZE;
      }
      if (h.kind == K_MAP)
        n *= 2;
      /* Every value takes at least one byte. */
      if (pos + owed + n > lim->max_message) {
        *reason = "message larger than the maximum message size";
        return HIPD_EMSGSIZE;
      }
      /* Empty arrays and maps do not count against max_depth (see
       * PROTOCOL.md), but msgpack-c checks its stack before it looks at
       * the count: it has no room for one below PROTO_DEPTH_CAP open
       * containers. */
      if (depth + 1 > (n > 0 ? max_depth : PROTO_DEPTH_CAP)) {
        *reason = "values nested deeper than the maximum depth";
        return HIPD_EPROTO;
      }
      if (n > 0) {
        left[++depth] = n;
        owed += n;
      }
    }
    while (depth > 0 && left[depth] == 0)
      depth--;
    if (depth == 0 && left[0] == 0) {
      if (pos > len)
        goto incomplete;
      return (long long)pos;
    }
  }

incomplete : {
  /* Whatever is still to come takes at least one byte per value. */
  uint64_t least = pos + owed;
  if (least <= len)
    least = len + 1;
  *need = (size_t)least;
  return 0;
}
}

int proto_msg_decode(const uint8_t *buf, size_t len, msgpack_zone *zone,
                     proto_msg_t *msg, const char **reason)
{
  msgpack_object *root;
  size_t off = 0;

  memset(msg, 0, sizeof(*msg));
  root = msgpack_zone_malloc(zone, sizeof(*root));
  if (root == NULL) {
    *reason = "out of memory decoding a message";
    return HIPD_ENOMEM;
  }
  switch (msgpack_unpack((const char *)buf, len, &off, zone, root)) {
  case MSGPACK_UNPACK_SUCCESS:
    break;
  case MSGPACK_UNPACK_NOMEM_ERROR:
    *reason = "out of memory decoding a message";
    return HIPD_ENOMEM;
  case MSGPACK_UNPACK_EXTRA_BYTES:
    *reason = "bytes after the end of a message";
    return HIPD_EPROTO;
  default:
    *reason = "malformed msgpack";
    return HIPD_EPROTO;
  }
  if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size == 0) {
    *reason = "a message must be a non-empty array";
    return HIPD_EPROTO;
  }
  const msgpack_object *a = root->via.array.ptr;
  uint32_t n = root->via.array.size;
  if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || a[0].via.u64 > 2) {
    *reason = "unknown message type (must be 0, 1 or 2)";
    return HIPD_EPROTO;
  }
  msg->type = (int)a[0].via.u64;
  if (msg->type != PROTO_NOTIFY) {
    if (n != 4) {
      *reason = msg->type == PROTO_REQUEST ? "a request must have 4 elements"
                                           : "a response must have 4 elements";
      return HIPD_EPROTO;
    }
    if (a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        a[1].via.u64 > UINT32_MAX) {
      *reason = "msgid must be an unsigned 32-bit integer";
      return HIPD_EPROTO;
    }
    msg->msgid = (uint32_t)a[1].via.u64;
  } else if (n != 3) {
    *reason = "a notification must have 3 elements";
    return HIPD_EPROTO;
  }
  if (msg->type == PROTO_RESPONSE) {
    msg->error = &a[2];
    msg->result = &a[3];
    return 0;
  }
  const msgpack_object *m = &a[msg->type == PROTO_REQUEST ? 2 : 1];
  const msgpack_object *p = &a[msg->type == PROTO_REQUEST ? 3 : 2];
  if (m->type != MSGPACK_OBJECT_STR && m->type != MSGPACK_OBJECT_BIN) {
    *reason = "method name must be a string";
    return HIPD_EPROTO;
  }
  if (p->type != MSGPACK_OBJECT_ARRAY) {
    *reason = "params must be an array";
    return HIPD_EPROTO;
  }
  msg->method = m->via.str.ptr;
  msg->method_len = m->via.str.size;
  msg->params = p;
  return 0;
}

/* ------------------------------------------------------------- encoding */

void proto_pack_cstr(msgpack_packer *pk, const char *s)
{
  if (s == NULL) {
    msgpack_pack_nil(pk);
    return;
  }
  size_t n = strlen(s);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

void proto_pack_request(msgpack_packer *pk, uint32_t msgid, const char *method,
                        uint32_t nparams)
{
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, PROTO_REQUEST);
  msgpack_pack_uint32(pk, msgid);
  proto_pack_cstr(pk, method);
  msgpack_pack_array(pk, nparams);
}

int proto_smallbuf_write(void *data, const char *buf, size_t len)
{
  proto_smallbuf_t *sb = data;

  if (len > sizeof(sb->b) - sb->len)
    return -1;
  memcpy(sb->b + sb->len, buf, len);
  sb->len += len;
  return 0;
}

void proto_pack_response(msgpack_packer *pk, uint32_t msgid)
{
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, PROTO_RESPONSE);
  msgpack_pack_uint32(pk, msgid);
  msgpack_pack_nil(pk);
}

void proto_pack_notify(msgpack_packer *pk, const char *method, uint32_t nparams)
{
  msgpack_pack_array(pk, 3);
  msgpack_pack_uint8(pk, PROTO_NOTIFY);
  proto_pack_cstr(pk, method);
  msgpack_pack_array(pk, nparams);
}

void proto_pack_error(msgpack_packer *pk, int code, const char *message)
{
  msgpack_pack_map(pk, 3);
  proto_pack_cstr(pk, "code");
  msgpack_pack_int(pk, code);
  proto_pack_cstr(pk, "name");
  proto_pack_cstr(pk, hipd_err_name(code));
  proto_pack_cstr(pk, "message");
  proto_pack_cstr(pk, message ? message : hipd_strerror(code));
}

void proto_pack_error_responsev(msgpack_packer *pk, uint32_t msgid, int code,
                                const char *fmt, va_list ap)
{
  char text[16384];

  vsnprintf(text, sizeof(text), fmt, ap);
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, PROTO_RESPONSE);
  msgpack_pack_uint32(pk, msgid);
  proto_pack_error(pk, code, text);
  msgpack_pack_nil(pk);
}

void proto_pack_error_response(msgpack_packer *pk, uint32_t msgid, int code,
                               const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  proto_pack_error_responsev(pk, msgid, code, fmt, ap);
  va_end(ap);
}

int proto_error_decode(const msgpack_object *o, int *code, const char **msg,
                       size_t *len)
{
  const msgpack_object *c, *m;
  int64_t v;

  if (o->type != MSGPACK_OBJECT_MAP)
    return HIPD_EPROTO;
  c = proto_map_get(o, "code");
  m = proto_map_get(o, "message");
  if (c == NULL || proto_obj_int(c, INT32_MIN, INT32_MAX, &v) != 0)
    return HIPD_EPROTO;
  *code = (int)v;
  if (m == NULL || proto_obj_bytes(m, msg, len) != 0) {
    *msg = "";
    *len = 0;
  }
  return 0;
}

void proto_pack_refused(msgpack_packer *pk, int code, const char *message)
{
  proto_pack_notify(pk, PROTO_SESSION_REFUSED, 1);
  proto_pack_error(pk, code, message);
}

void proto_pack_closed(msgpack_packer *pk, int code, const char *message)
{
  proto_pack_notify(pk, PROTO_SESSION_CLOSED, 1);
  proto_pack_error(pk, code, message);
}

/* Is @p m notification @p name, with an error object first? */
static int notify_error_decode(const proto_msg_t *m, const char *name,
                               int *code, const char **msg, size_t *len)
{
  size_t n = strlen(name);

  if (m->type != PROTO_NOTIFY || m->method_len != n ||
      memcmp(m->method, name, n) != 0)
    return 0;
  if (m->params->via.array.size < 1 ||
      proto_error_decode(&m->params->via.array.ptr[0], code, msg, len) != 0)
    return HIPD_EPROTO;
  return 1;
}

int proto_refused_decode(const proto_msg_t *m, int *code, const char **msg,
                         size_t *len)
{
  return notify_error_decode(m, PROTO_SESSION_REFUSED, code, msg, len);
}

int proto_closed_decode(const proto_msg_t *m, int *code, const char **msg,
                        size_t *len)
{
  return notify_error_decode(m, PROTO_SESSION_CLOSED, code, msg, len);
}

/* ------------------------------------------------------------- reading */

int proto_obj_streq(const msgpack_object *o, const char *s)
{
  size_t n = strlen(s);

  return (o->type == MSGPACK_OBJECT_STR || o->type == MSGPACK_OBJECT_BIN) &&
         o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

const msgpack_object *proto_map_get(const msgpack_object *o, const char *key)
{
  if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (uint32_t i = 0; i < o->via.map.size; i++)
    if (proto_obj_streq(&o->via.map.ptr[i].key, key))
      return &o->via.map.ptr[i].val;
  return NULL;
}

int proto_obj_int(const msgpack_object *o, int64_t min, int64_t max,
                  int64_t *out)
{
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (o->via.u64 > (uint64_t)INT64_MAX || (int64_t)o->via.u64 > max ||
        (int64_t)o->via.u64 < min)
      return HIPD_ERANGE;
    *out = (int64_t)o->via.u64;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    if (o->via.i64 < min || o->via.i64 > max)
      return HIPD_ERANGE;
    *out = o->via.i64;
    return 0;
  }
  return HIPD_EPARAMS;
}

int proto_obj_uint(const msgpack_object *o, uint64_t max, uint64_t *out)
{
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (o->via.u64 > max)
      return HIPD_ERANGE;
    *out = o->via.u64;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    return HIPD_ERANGE;
  return HIPD_EPARAMS;
}

int proto_obj_double(const msgpack_object *o, double *out)
{
  switch (o->type) {
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    *out = o->via.f64;
    return 0;
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    *out = (double)o->via.u64;
    return 0;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    *out = (double)o->via.i64;
    return 0;
  default:
    return HIPD_EPARAMS;
  }
}

int proto_obj_bytes(const msgpack_object *o, const char **ptr, size_t *len)
{
  if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
    return HIPD_EPARAMS;
  *ptr = o->via.str.ptr;
  *len = o->via.str.size;
  return 0;
}

const char *proto_obj_type_name(const msgpack_object *o)
{
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    return "nil";
  case MSGPACK_OBJECT_BOOLEAN:
    return "bool";
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return "int";
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    return "float";
  case MSGPACK_OBJECT_STR:
    return "str";
  case MSGPACK_OBJECT_BIN:
    return "bin";
  case MSGPACK_OBJECT_ARRAY:
    return "array";
  case MSGPACK_OBJECT_MAP:
    return "map";
  case MSGPACK_OBJECT_EXT:
    return "ext";
  default:
    return "unknown";
  }
}

void proto_msg_attach_fd(struct msghdr *mh, proto_fd_ctl_t *ctl, int fd)
{
  struct cmsghdr *cm;

  memset(ctl, 0, sizeof(*ctl));
  mh->msg_control = ctl->space;
  mh->msg_controllen = sizeof(ctl->space);
  cm = CMSG_FIRSTHDR(mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
}
