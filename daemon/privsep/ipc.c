/* SPDX-License-Identifier: MIT */
/* daemon/privsep/ipc.c: the listener-worker channel (ipc.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "hipd.h"
#include "privsep/ipc.h"
#include "spin.h"

#define READ_CHUNK 65536

static const proto_limits_t limits = {
    .max_message = IPC_MAX_MESSAGE,
    .max_depth = 6,
    .max_array = 4096,
    .max_map = 64,
    .max_objects = 65536,
};

const proto_limits_t *ipc_limits(void)
{
  return &limits;
}

static int common_init(ipc_chan_t *ch)
{
  memset(ch, 0, sizeof(*ch));
  if (!msgpack_zone_init(&ch->zone, 4096))
    return HIPD_ENOMEM;
  ch->next_msgid = 1;
  return 0;
}

int ipc_init(uv_loop_t *loop, ipc_chan_t *ch)
{
  int rc = common_init(ch);

  if (rc != 0)
    return rc;
  uv_pipe_init(loop, &ch->pipe, 1);
  ch->pipe.data = ch;
  return 0;
}

int ipc_open(uv_loop_t *loop, ipc_chan_t *ch, int fd)
{
  int rc = ipc_init(loop, ch);

  if (rc != 0)
    return rc;
  return uv_pipe_open(&ch->pipe, fd);
}

static void broken(ipc_chan_t *ch, const char *why)
{
  if (ch->broken)
    return;
  ch->broken = 1;
  if (ch->reading)
    uv_read_stop((uv_stream_t *)&ch->pipe);
  ch->reading = 0;
  if (ch->on_broken != NULL)
    ch->on_broken(ch, why);
}

void ipc_break(ipc_chan_t *ch, const char *why)
{
  broken(ch, why);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  ipc_chan_t *ch = h->data;
  size_t want = ch->in_len + READ_CHUNK;

  (void)suggested;
  if (ch->in_need > want)
    want = ch->in_need;
  if (want > ch->in_cap) {
    uint8_t *n = realloc(ch->in, want);
    if (n == NULL) {
      buf->base = NULL;
      buf->len = 0;
      return;
    }
    ch->in = n;
    ch->in_cap = want;
  }
  buf->base = (char *)ch->in + ch->in_len;
  buf->len = ch->in_cap - ch->in_len;
}

/* Deliver every whole message buffered. */
static void process(ipc_chan_t *ch)
{
  size_t pos = 0;

  while (!ch->broken && !ch->closing && pos < ch->in_len) {
    const char *reason = NULL;
    size_t need = 0;
    long long n = proto_frame_scan(&limits, ch->in + pos, ch->in_len - pos,
                                   &need, &reason);
    proto_msg_t msg;

    if (n < 0) {
      broken(ch, reason != NULL ? reason : "malformed message");
      return;
    }
    if (n == 0) {
      /* need counts from pos, which the memmove below makes 0. */
      ch->in_need = need;
      break;
    }
    if (proto_msg_decode(ch->in + pos, (size_t)n, &ch->zone, &msg, &reason) !=
        0) {
      broken(ch, reason != NULL ? reason : "not a msgpack-rpc message");
      return;
    }
    ch->on_msg(ch, &msg);
    msgpack_zone_clear(&ch->zone);
    pos += (size_t)n;
    ch->in_need = 0;
  }
  if (pos > 0 && !ch->broken) {
    memmove(ch->in, ch->in + pos, ch->in_len - pos);
    ch->in_len -= pos;
  }
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
  ipc_chan_t *ch = stream->data;

  (void)buf;
  if (nread == 0)
    return;
  if (nread == UV_ENOBUFS) {
    broken(ch, "out of memory for the channel's input");
    return;
  }
  if (nread == UV_EOF) {
    broken(ch, "the other end closed the channel");
    return;
  }
  if (nread < 0) {
    broken(ch, uv_strerror((int)nread));
    return;
  }
  ch->in_len += (size_t)nread;
  spin_note_work(); /* a compile, a session, an answer: the loop polls */
  /* libuv keeps a descriptor that came until someone accepts it: on a
   * channel that takes none it would stay open for the channel's life. */
  if (ch->no_handles && uv_pipe_pending_count(&ch->pipe) > 0) {
    broken(ch, "a descriptor came on a channel that takes none");
    return;
  }
  if (ch->in_len < ch->in_need)
    return;
  process(ch);
}

int ipc_start(ipc_chan_t *ch, ipc_msg_fn on_msg, ipc_broken_fn on_broken)
{
  int rc;

  ch->on_msg = on_msg;
  ch->on_broken = on_broken;
  rc = uv_read_start((uv_stream_t *)&ch->pipe, alloc_cb, read_cb);
  if (rc == 0)
    ch->reading = 1;
  return rc;
}

typedef struct {
  uv_write_t req;
  ipc_chan_t *ch;
  uv_pipe_t *handed; /* closed and freed once sent */
  size_t len;
  char data[];
} send_t;

static void write_cb(uv_write_t *req, int status)
{
  send_t *s = (send_t *)req;

  if (s->handed != NULL)
    uv_close((uv_handle_t *)s->handed, (uv_close_cb)free);
  if (status < 0 && status != UV_ECANCELED)
    broken(s->ch, uv_strerror(status));
  free(s);
}

static int send_common(ipc_chan_t *ch, const void *data, size_t len,
                       uv_pipe_t *handed)
{
  send_t *s;
  uv_buf_t b;
  int rc;

  if (!ch->broken && !ch->closing &&
      uv_stream_get_write_queue_size((uv_stream_t *)&ch->pipe) >
          IPC_MAX_QUEUED) {
    /* The peer reads nothing: no more memory for it. */
    if (handed != NULL)
      uv_close((uv_handle_t *)handed, (uv_close_cb)free);
    broken(ch, "the peer does not read: more than 320 MiB queued to it");
    return UV_ENOBUFS;
  }
  if (ch->broken || ch->closing || (s = malloc(sizeof(*s) + len)) == NULL) {
    if (handed != NULL)
      uv_close((uv_handle_t *)handed, (uv_close_cb)free);
    return ch->broken || ch->closing ? UV_EPIPE : UV_ENOMEM;
  }
  s->ch = ch;
  s->handed = handed;
  s->len = len;
  memcpy(s->data, data, len);
  b = uv_buf_init(s->data, (unsigned)len);
  rc = handed != NULL
           ? uv_write2(&s->req, (uv_stream_t *)&ch->pipe, &b, 1,
                       (uv_stream_t *)handed, write_cb)
           : uv_write(&s->req, (uv_stream_t *)&ch->pipe, &b, 1, write_cb);
  if (rc < 0) {
    if (handed != NULL)
      uv_close((uv_handle_t *)handed, (uv_close_cb)free);
    free(s);
    broken(ch, uv_strerror(rc));
  }
  return rc;
}

int ipc_send(ipc_chan_t *ch, const void *data, size_t len)
{
  return send_common(ch, data, len, NULL);
}

int ipc_send_handle(ipc_chan_t *ch, const void *data, size_t len,
                    uv_pipe_t *conn)
{
  return send_common(ch, data, len, conn);
}

int ipc_accept(ipc_chan_t *ch, uv_stream_t *client)
{
  if (uv_pipe_pending_count(&ch->pipe) <= 0 ||
      uv_pipe_pending_type(&ch->pipe) != UV_NAMED_PIPE)
    return HIPD_EPROTO;
  return uv_accept((uv_stream_t *)&ch->pipe, client) == 0 ? 0 : HIPD_EPROTO;
}

static void close_cb(uv_handle_t *h)
{
  ipc_chan_t *ch = h->data;

  free(ch->in);
  ch->in = NULL;
  msgpack_zone_destroy(&ch->zone);
  if (ch->on_closed != NULL)
    ch->on_closed(ch);
}

void ipc_close(ipc_chan_t *ch, ipc_closed_fn closed)
{
  if (ch->closing)
    return;
  ch->closing = 1;
  ch->broken = 1;
  ch->on_closed = closed;
  uv_close((uv_handle_t *)&ch->pipe, close_cb);
}

/* ------------------------------------------------------------------ params */

static const msgpack_object *param(const proto_msg_t *msg, uint32_t i)
{
  if (msg->params == NULL || msg->params->type != MSGPACK_OBJECT_ARRAY ||
      i >= msg->params->via.array.size)
    return NULL;
  return &msg->params->via.array.ptr[i];
}

int ipc_param_uint(const proto_msg_t *msg, uint32_t i, uint64_t max,
                   uint64_t *out)
{
  const msgpack_object *o = param(msg, i);

  return o != NULL && proto_obj_uint(o, max, out) == 0 ? 0 : HIPD_EINVAL;
}

int ipc_param_bytes(const proto_msg_t *msg, uint32_t i, size_t max,
                    const char **p, size_t *len)
{
  const msgpack_object *o = param(msg, i);

  if (o == NULL || proto_obj_bytes(o, p, len) != 0 || *len > max)
    return HIPD_EINVAL;
  return 0;
}

int ipc_param_array(const proto_msg_t *msg, uint32_t i, uint32_t max,
                    const msgpack_object **out)
{
  const msgpack_object *o = param(msg, i);

  if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > max)
    return HIPD_EINVAL;
  *out = o;
  return 0;
}

int ipc_is(const proto_msg_t *msg, const char *name)
{
  size_t n = strlen(name);

  return msg->method != NULL && msg->method_len == n &&
         memcmp(msg->method, name, n) == 0;
}
