/* daemon/session.c: one connection: read, frame, decode, reply, cleanup. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "codegen/intrinsics.h"
#include "dispatch.h"
#include "log.h"
#include "objects.h"
#include "session.h"

#define READ_CHUNK (64 * 1024)
#define IDLE_BUFFER_KEEP (1 << 20) /* keep at most this much when idle */

typedef struct {
  uv_write_t req;
  session_t *s;
  uv_buf_t bufs[2]; /* the packed reply and its optional payload tail */
  size_t bytes;
} write_req_t;

static void process_input(session_t *s);

void session_incref(session_t *s)
{
  s->refs++;
}

void session_decref(session_t *s)
{
  if (--s->refs > 0)
    return;
  msgpack_zone_destroy(&s->zone);
  handles_destroy(&s->handles);
  intr_set_unref(s->intrinsics);
  free(s->in);
  free(s);
}

static void close_cb(uv_handle_t *h)
{
  session_t *s = h->data;

  session_decref(s);
}

void session_close(session_t *s, const char *reason)
{
  if (s->closing)
    return;
  s->closing = 1;
  log_info(s->id, "session closed: %s (%llu requests)", reason,
           (unsigned long long)s->requests);
  list_remove(&s->node);
  s->d->nsessions--;
  objects_release_session(s);
  uv_read_stop((uv_stream_t *)&s->pipe);
  uv_close((uv_handle_t *)&s->pipe, close_cb);
}

static void write_cb(uv_write_t *req, int status)
{
  write_req_t *w = (write_req_t *)req;
  session_t *s = w->s;

  s->out_queued -= w->bytes;
  s->out_progress_ms = uv_now(s->d->loop);
  free(w->bufs[0].base);
  free(w->bufs[1].base);
  free(w);
  if (status < 0 && !s->closing) {
    char why[128];
    snprintf(why, sizeof(why), "write failed: %s", uv_strerror(status));
    session_close(s, why);
  }
  session_decref(s);
}

void session_send(session_t *s, char *data, size_t len, void *tail,
                  size_t tail_len)
{
  write_req_t *w = NULL;
  size_t bytes = len + tail_len;
  int rc;

  if (s->closing)
    goto drop;
  if (s->out_queued + bytes > s->d->cfg.output_cap) {
    session_close(s, "output cap exceeded: the client is not reading its "
                     "replies");
    goto drop;
  }
  w = malloc(sizeof(*w));
  if (w == NULL) {
    session_close(s, "out of memory queueing a reply");
    goto drop;
  }
  w->s = s;
  w->bytes = bytes;
  w->bufs[0] = uv_buf_init(data, (unsigned)len);
  w->bufs[1] = uv_buf_init(tail, (unsigned)tail_len);
  if (s->out_queued == 0)
    s->out_progress_ms = uv_now(s->d->loop);
  s->out_queued += bytes;
  session_incref(s);
  rc = uv_write(&w->req, (uv_stream_t *)&s->pipe, w->bufs, tail ? 2 : 1,
                write_cb);
  if (rc < 0) {
    s->out_queued -= bytes;
    free(w);
    session_decref(s);
    session_close(s, uv_strerror(rc));
    goto drop;
  }
  return;

drop:
  free(data);
  free(tail);
}

void session_check_stalls(daemon_t *d)
{
  uint64_t now = uv_now(d->loop);
  list_node_t *n, *next;

  for (n = d->sessions.next; n != &d->sessions; n = next) {
    next = n->next;
    session_t *s = list_entry(n, session_t, node);
    if (s->out_queued > 0 && now - s->out_progress_ms > d->cfg.write_timeout_ms)
      session_close(s, "write stalled: the client is not reading its "
                       "replies");
  }
}

static void pause_reading(session_t *s)
{
  if (!s->read_paused) {
    s->read_paused = 1;
    uv_read_stop((uv_stream_t *)&s->pipe);
    log_debug(s->id, "reading paused: %u requests in flight", s->inflight);
  }
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  session_t *s = h->data;
  size_t want = s->in_len + READ_CHUNK;

  (void)suggested;
  /* A message known to be large grows the buffer by doubling towards its
   * size, so a header that merely claims a huge message costs nothing
   * until the bytes arrive. */
  if (s->in_need > want) {
    size_t dbl = s->in_cap * 2;
    want = s->in_need < dbl ? s->in_need : (dbl > want ? dbl : want);
  }
  if (want > s->in_cap) {
    uint8_t *n = realloc(s->in, want);
    if (n == NULL) {
      buf->base = NULL;
      buf->len = 0;
      return;
    }
    s->in = n;
    s->in_cap = want;
  }
  buf->base = (char *)s->in + s->in_len;
  buf->len = s->in_cap - s->in_len;
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
  session_t *s = stream->data;

  (void)buf;
  if (nread == UV_ENOBUFS) {
    session_close(s, "out of memory for the input buffer");
    return;
  }
  if (nread == UV_EOF) {
    session_close(s, "client disconnected");
    return;
  }
  if (nread < 0) {
    session_close(s, uv_strerror((int)nread));
    return;
  }
  s->in_len += (size_t)nread;
  if (s->in_len < s->in_need)
    return;
  session_incref(s);
  process_input(s);
  session_decref(s);
}

static void handle_message(session_t *s, const uint8_t *p, size_t n)
{
  proto_msg_t msg;
  const char *reason = NULL;
  int rc;

  msgpack_zone_clear(&s->zone);
  rc = proto_msg_decode(p, n, &s->zone, &msg, &reason);
  if (rc != 0) {
    char why[160];
    snprintf(why, sizeof(why), "protocol violation: %s", reason);
    session_close(s, why);
    return;
  }
  switch (msg.type) {
  case PROTO_REQUEST:
    s->requests++;
    dispatch_request(s, msg.msgid, msg.method, msg.method_len, msg.params);
    break;
  case PROTO_NOTIFY:
    log_debug(s->id, "ignored notification '%.*s'", (int)msg.method_len,
              msg.method);
    break;
  default:
    session_close(s, "protocol violation: a client sent a response");
    break;
  }
}

/* Run every complete request in the input buffer, unless throttled. */
static void process_input(session_t *s)
{
  size_t off = 0;

  if (s->in_dispatch)
    return; /* the outer loop goes on with what is buffered */
  s->in_dispatch = 1;
  while (!s->closing && off < s->in_len) {
    size_t need = 0;
    const char *reason = NULL;
    long long n;

    if (s->inflight >= s->d->cfg.max_inflight) {
      pause_reading(s);
      break;
    }
    n = proto_frame_scan(&s->d->cfg.limits, s->in + off, s->in_len - off, &need,
                         &reason);
    if (n < 0) {
      char why[160];
      snprintf(why, sizeof(why), "protocol violation: %s", reason);
      session_close(s, why);
      break;
    }
    if (n == 0) {
      s->in_need = need;
      break;
    }
    s->in_need = 0;
    handle_message(s, s->in + off, (size_t)n);
    off += (size_t)n;
  }
  s->in_dispatch = 0;
  if (s->closing)
    return;
  /* Keep the unread tail at the front; let a large idle buffer go. */
  if (off > 0) {
    memmove(s->in, s->in + off, s->in_len - off);
    s->in_len -= off;
    if (s->in_need > off)
      s->in_need -= off;
    else if (s->in_len == 0)
      s->in_need = 0;
  }
  if (s->in_len == 0 && s->in_cap > IDLE_BUFFER_KEEP) {
    free(s->in);
    s->in = NULL;
    s->in_cap = 0;
  }
}

void session_request_done(session_t *s)
{
  s->inflight--;
  if (s->read_paused && !s->closing && s->inflight < s->d->cfg.max_inflight) {
    s->read_paused = 0;
    log_debug(s->id, "reading resumed");
    uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb);
    /* Requests buffered while paused run now (or, inside the dispatch
     * loop, in its next iteration). */
    session_incref(s);
    process_input(s);
    session_decref(s);
  }
}

void session_accept(daemon_t *d, uv_stream_t *server_stream)
{
  session_t *s;
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  uv_os_fd_t fd;
  int rc;

  s = calloc(1, sizeof(*s));
  if (s == NULL) {
    log_error(0, "cannot accept a connection: out of memory");
    return;
  }
  s->d = d;
  s->refs = 1;
  list_init(&s->node);
  uv_pipe_init(d->loop, &s->pipe, 0);
  s->pipe.data = s;
  rc = uv_accept(server_stream, (uv_stream_t *)&s->pipe);
  if (rc < 0) {
    log_warn(0, "accept failed: %s", uv_strerror(rc));
    uv_close((uv_handle_t *)&s->pipe, close_cb);
    return;
  }
  s->id = ++d->next_session_id;
  if (!msgpack_zone_init(&s->zone, 4096)) {
    log_error(s->id, "out of memory for a session");
    uv_close((uv_handle_t *)&s->pipe, close_cb);
    return;
  }
  handles_init(&s->handles, d->cfg.max_handles);
  s->peer_pid = -1;
  s->peer_uid = (uid_t)-1;
  s->peer_gid = (gid_t)-1;
  if (uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0 &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
    s->peer_pid = cred.pid;
    s->peer_uid = cred.uid;
    s->peer_gid = cred.gid;
  }
  snprintf(s->client, sizeof(s->client), "%s", "unknown");
  list_insert_tail(&d->sessions, &s->node);
  d->nsessions++;
  d->sessions_total++;
  if (d->stopping || d->nsessions > d->cfg.max_sessions) {
    session_close(s, d->stopping ? "daemon is shutting down"
                                 : "too many sessions");
    return;
  }
  log_info(s->id, "session opened: peer pid %d uid %d gid %d", (int)s->peer_pid,
           (int)s->peer_uid, (int)s->peer_gid);
  rc = uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb);
  if (rc < 0)
    session_close(s, uv_strerror(rc));
}
