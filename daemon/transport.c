/* SPDX-License-Identifier: MIT */
/* daemon/transport.c: the connections' I/O: accept, read, frame and decode
 * requests (proto/) and hand each to dispatch, write the gathered replies;
 * the time limits; and the loop's safe points (flush_all, in the check and
 * prepare phases), where replies are written, throttled sessions resume
 * and closed sessions are torn down (see session.h). Calls dispatch (one
 * request at a time), the session state (session.c) and resources.c (the
 * release at teardown); never the object layer. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bufpool.h"
#include "dispatch.h"
#include "executor.h"
#include "grants.h"
#include "log.h"
#include "loop_turn.h"
#include "policy.h"
#include "resources.h"
#include "ring.h"
#include "session.h"
#include "spin.h"
#include "tenants.h"
#include "transport.h"
#include "transport_ring.h"

#define IDLE_BUFFER_KEEP (1 << 20) /* keep at most this much when idle */
/* What every session may buffer whatever the others hold: its first
 * read's buffer and a small request. Not counted against
 * --max-input-bytes (--max-sessions of them at most), so a session with
 * small requests is never held up by the bound. */
#define INPUT_FLOOR (2 * (size_t)SESSION_READ_CHUNK)

typedef struct {
  uv_write_t req;
  session_t *s;
  uv_buf_t *bufs; /* the replies (and their payload tails), each malloc'd */
  uint32_t nbufs;
  size_t bytes;
} write_req_t;

static void process_input(session_t *s);
static void resume(session_t *s);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/*
 * The global bound on buffered input (--max-input-bytes). Each session's
 * input buffer may hold INPUT_FLOOR bytes freely; beyond that it holds
 * "room" (s->in_room, summed in d->in_room), and the room of all sessions
 * together stays within the bound. A session that needs more room takes,
 * at once, enough for the whole message it is reading (its size is known
 * from the frame's headers: s->in_need), so that once admitted a message
 * reads to its end without waiting again, and sessions never each hold
 * part of what they need while waiting for the rest. When the room is not
 * there, or other sessions wait already, the session stops reading and
 * waits its turn in d->inputq, first come first served: a session that
 * sends large requests back to back cannot starve the others, since its
 * next message queues behind them. Room comes back when a buffer is
 * consumed, given to a handler or freed, and at a session's teardown; the
 * next safe point admits the waiters it fits, in order. A session that
 * holds room and never completes its message is closed by
 * --request-timeout (which does not run while it waits its turn); if
 * every session holding room waits for more (messages whose size grew as
 * their headers arrived), none could progress: the one holding the most
 * is closed ("input bound").
 */

/* The room a buffer of @p cap bytes holds. */
static size_t room_of(size_t cap)
{
  return cap > INPUT_FLOOR ? cap - INPUT_FLOOR : 0;
}

/* Let @p s hold room for a buffer of @p cap bytes. @return 1 if it does
 * (it may hold more already), 0 if the bound, or sessions waiting ahead of
 * it, leave none. */
static int room_take(session_t *s, size_t cap)
{
  daemon_t *d = s->d;
  size_t want = room_of(cap);

  if (want <= s->in_room)
    return 1;
  if (!list_empty(&d->inputq) && d->inputq.next != &s->in_wait_node)
    return 0; /* others were first */
  if (d->in_room - s->in_room + want > d->cfg.max_input_bytes)
    return 0;
  d->in_room += want - s->in_room;
  s->in_room = want;
  return 1;
}

/* Give back what @p s holds beyond what its buffer and its next message
 * need (all of it with @p all, at its teardown); the next safe point
 * admits the sessions that waited for it. */
static void room_settle(session_t *s, int all)
{
  daemon_t *d = s->d;
  size_t keep =
      all ? 0 : room_of(s->in_cap > s->in_need ? s->in_cap : s->in_need);

  if (keep >= s->in_room)
    return;
  d->in_room -= s->in_room - keep;
  s->in_room = keep;
  if (!list_empty(&d->inputq))
    d->safe_point(d);
}

/* Let go of the part of @p s's input buffer that neither its bytes nor its
 * next message need, and of the room it held (while sessions wait for
 * room: an idle buffer is otherwise kept up to IDLE_BUFFER_KEEP). Not
 * while its requests are being handled. */
static void input_shrink(session_t *s)
{
  size_t need = s->in_len + SESSION_READ_CHUNK;

  if (s->in_need > need)
    need = s->in_need;
  if (s->in_dispatch || s->closing || s->in_cap <= INPUT_FLOOR ||
      need >= s->in_cap)
    return;
  if (s->in_len == 0) {
    bufpool_put(s->in);
    s->in = NULL;
    s->in_cap = 0;
  } else {
    uint8_t *n = realloc(s->in, need);
    if (n != NULL) {
      s->in = n;
      s->in_cap = need;
    }
  }
  room_settle(s, 0);
}

/* Stop reading @p s until room for a buffer of s->in_want bytes is there;
 * it joins the end of the queue. The other sessions let go of the room
 * they hold and do not need. */
static void input_wait(session_t *s)
{
  daemon_t *d = s->d;

  s->in_starved = 0;
  if (s->in_waiting)
    return;
  for (list_node_t *n = d->sessions.next; n != &d->sessions; n = n->next) {
    session_t *o = list_entry(n, session_t, node);
    if (o != s)
      input_shrink(o);
  }
  s->in_waiting = 1;
  uv_read_stop((uv_stream_t *)&s->pipe);
  session_incref(s);
  list_insert_tail(&d->inputq, &s->in_wait_node);
  log_debug(s->id,
            "reading paused: %zu bytes of input buffered, waiting for room "
            "(%llu of --max-input-bytes %llu held)",
            s->in_len, (unsigned long long)d->in_room,
            (unsigned long long)d->cfg.max_input_bytes);
  d->safe_point(d);
}

/* Leave the queue (admitted, or the session is torn down). */
static void input_unqueue(session_t *s)
{
  if (!s->in_waiting)
    return;
  s->in_waiting = 0;
  list_remove(&s->in_wait_node);
  session_decref(s);
}

/* At a safe point: admit the waiting sessions that the room now fits, in
 * order, and read them again; if the first cannot be admitted and all the
 * room is held by waiting sessions, close the one that holds the most. */
static void input_admit(daemon_t *d)
{
  while (!list_empty(&d->inputq)) {
    session_t *s = list_entry(d->inputq.next, session_t, in_wait_node);
    uint64_t waiting_room = 0;
    session_t *largest = NULL;
    char why[200];

    if (!s->closing && room_take(s, s->in_want)) {
      session_incref(s);
      input_unqueue(s);
      /* The time it waited does not count against its request. */
      if (s->partial_since_ms != 0)
        s->partial_since_ms = uv_now(d->loop);
      log_debug(s->id, "reading resumed: input room for %zu bytes", s->in_want);
      if (uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb) != 0)
        session_close(s, "connection error: cannot read again");
      session_decref(s);
      continue;
    }
    if (s->closing) {
      input_unqueue(s); /* its teardown gives its room back */
      continue;
    }
    for (list_node_t *n = d->inputq.next; n != &d->inputq; n = n->next) {
      session_t *w = list_entry(n, session_t, in_wait_node);
      waiting_room += w->in_room;
      if (largest == NULL || w->in_room > largest->in_room)
        largest = w;
    }
    if (waiting_room < d->in_room || largest->in_room == 0)
      return; /* sessions that read hold room: theirs will come back */
    snprintf(why, sizeof(why),
             "input bound: every session holding input room waits for more "
             "(%llu bytes, --max-input-bytes %llu); this one held %zu",
             (unsigned long long)d->in_room,
             (unsigned long long)d->cfg.max_input_bytes, largest->in_room);
    input_unqueue(largest);
    room_settle(largest, 1);
    session_close(largest, why);
  }
}

static void close_cb(uv_handle_t *h)
{
  session_t *s = h->data;

  session_decref(s);
}

/* At a safe point: release what a closed session owns and close its
 * socket (the close callback drops the connection's reference). */
static void session_teardown(session_t *s)
{
  if (!list_empty(&s->run_node)) {
    list_remove(&s->run_node);
    session_decref(s);
  }
  input_unqueue(s);
  room_settle(s, 1);
  transport_ring_forget(s);
  res_release_all(s);
  uv_close((uv_handle_t *)&s->pipe, close_cb);
}

static void write_cb(uv_write_t *req, int status)
{
  write_req_t *w = (write_req_t *)req;
  session_t *s = w->s;

  s->out_queued -= w->bytes;
  s->out_progress_ms = uv_now(s->d->loop);
  for (uint32_t i = 0; i < w->nbufs; i++)
    bufpool_put(w->bufs[i].base);
  free(w->bufs);
  free(w);
  if (status < 0 && !s->closing) {
    char why[128];
    snprintf(why, sizeof(why), "write failed: %s", uv_strerror(status));
    session_close(s, why);
  }
  if (s->close_flushed && !s->closing && s->out_queued == 0)
    /* session.kill of itself (admin.h): its answer is out, now it goes. */
    session_close(s, s->kill_why);
  session_decref(s);
}

/* Drop the replies gathered for @p s (it is closing). */
static void gather_free(session_t *s)
{
  for (uint32_t i = 0; i < s->ngather; i++)
    free(s->gather[i].base);
  free(s->gather);
  s->gather = NULL;
  s->out_queued -= s->gather_bytes;
  s->ngather = s->gather_cap = 0;
  s->gather_bytes = 0;
}

/* Write what @p s gathered, as one uv_write (one writev). */
static void session_flush(session_t *s)
{
  write_req_t *w;
  int rc;

  if (s->closing) {
    gather_free(s);
    return;
  }
  w = malloc(sizeof(*w));
  if (w == NULL) {
    session_close(s, "out of memory writing replies");
    gather_free(s);
    return;
  }
  w->s = s;
  w->bufs = s->gather;
  w->nbufs = s->ngather;
  w->bytes = s->gather_bytes;
  s->gather = NULL;
  s->ngather = s->gather_cap = 0;
  s->gather_bytes = 0;
  session_incref(s);
  rc = uv_write(&w->req, (uv_stream_t *)&s->pipe, w->bufs, w->nbufs, write_cb);
  if (rc < 0) {
    write_cb(&w->req, rc); /* frees, closes the session */
  } else {
    ring_nudge(s); /* a client asleep on its ring's futex reads it */
  }
}

/* Tear down the sessions closed so far. */
static void finish_closes(daemon_t *d)
{
  while (!list_empty(&d->closeq)) {
    session_t *s = list_entry(d->closeq.next, session_t, node);
    list_remove(&s->node);
    session_teardown(s);
    session_decref(s);
  }
}

/* The safe point, after the poll phase (replies made by requests and
 * completed device work) and before the next (replies made by timers and
 * close callbacks), outside any other callback: write what every session
 * gathered, resume the throttled sessions that may read again (which may
 * answer more requests), tear down the sessions closed meanwhile, and
 * read again the sessions that waited for input room it now has; until
 * none of them has work left. */
static void flush_all(daemon_t *d)
{
  /* Room given back since the last safe point (consumed buffers) and by
   * the closes below; a session input_admit() closes is torn down here. */
  input_admit(d);
  while (!list_empty(&d->flushq) || !list_empty(&d->runq) ||
         !list_empty(&d->closeq)) {
    while (!list_empty(&d->flushq)) {
      session_t *s = list_entry(d->flushq.next, session_t, flush_node);
      list_remove(&s->flush_node);
      list_init(&s->flush_node);
      session_flush(s);
      session_decref(s);
    }
    while (!list_empty(&d->runq)) {
      session_t *s = list_entry(d->runq.next, session_t, run_node);
      list_remove(&s->run_node);
      resume(s);
      session_decref(s);
    }
    finish_closes(d);
    input_admit(d);
  }
  if (d->flush_active) {
    d->flush_active = 0;
    uv_check_stop(&d->flush_check);
    uv_prepare_stop(&d->flush_prepare);
  }
}

static void flush_check_cb(uv_check_t *h)
{
  flush_all(h->data);
}

static void flush_prepare_cb(uv_prepare_t *h)
{
  flush_all(h->data);
}

/* Make sure the next check or prepare phase runs flush_all(). */
static void safe_point_arm(daemon_t *d)
{
  if (!d->flush_active) {
    d->flush_active = 1;
    uv_check_start(&d->flush_check, flush_check_cb);
    uv_prepare_start(&d->flush_prepare, flush_prepare_cb);
  }
}

void transport_init(daemon_t *d)
{
  list_init(&d->flushq);
  list_init(&d->runq);
  list_init(&d->closeq);
  list_init(&d->tenants);
  list_init(&d->inputq);
  uv_check_init(d->loop, &d->flush_check);
  uv_prepare_init(d->loop, &d->flush_prepare);
  d->flush_check.data = d->flush_prepare.data = d;
  loop_turn_init(d);
  d->safe_point = safe_point_arm;
  transport_ring_init(d);
}

void transport_close(daemon_t *d)
{
  flush_all(d);
  transport_ring_close(d);
  loop_turn_close(d);
  uv_close((uv_handle_t *)&d->flush_check, NULL);
  uv_close((uv_handle_t *)&d->flush_prepare, NULL);
}

void transport_check_timeouts(daemon_t *d)
{
  const daemon_config_t *cfg = &d->cfg;
  uint64_t now = uv_now(d->loop);
  list_node_t *n, *next;
  char why[128];

  for (n = d->sessions.next; n != &d->sessions; n = next) {
    next = n->next;
    session_t *s = list_entry(n, session_t, node);
    if (s->out_queued > 0 && now - s->out_progress_ms > cfg->write_timeout_ms) {
      session_close(s, "write stalled: the client is not reading its "
                       "replies");
    } else if (cfg->hello_timeout_ms != 0 && s->protocol == 0 &&
               now - s->opened_ms > cfg->hello_timeout_ms) {
      snprintf(why, sizeof(why),
               "handshake timeout: no successful hello within %u ms",
               cfg->hello_timeout_ms);
      session_close(s, why);
    } else if (cfg->request_timeout_ms != 0 && s->partial_since_ms != 0 &&
               !s->read_paused && !s->in_waiting &&
               now - s->partial_since_ms > cfg->request_timeout_ms) {
      /* A throttled session, or one waiting for input room, is not read:
       * its incomplete request is then not the client's doing. */
      snprintf(why, sizeof(why),
               "request timeout: a request incomplete for more than %u ms",
               cfg->request_timeout_ms);
      session_close(s, why);
    }
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

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  session_t *s = h->data;
  size_t want = s->in_len + SESSION_READ_CHUNK;

  (void)suggested;
  /* Room for the whole message (or at least this read) before the buffer
   * grows; without it, read into what the buffer has left, and when
   * nothing is left wait for room (read_cb sees UV_ENOBUFS). */
  if (want > s->in_cap &&
      !room_take(s, s->in_need > want ? s->in_need : want)) {
    if (s->in_cap > s->in_len) {
      buf->base = (char *)s->in + s->in_len;
      buf->len = s->in_cap - s->in_len;
      return;
    }
    s->in_starved = 1;
    s->in_want = s->in_need > want ? s->in_need : want;
    buf->base = NULL;
    buf->len = 0;
    return;
  }
  /* A message known to be large grows the buffer by doubling towards its
   * size, so a header that merely claims a huge message costs nothing
   * until the bytes arrive. */
  if (s->in_need > want) {
    size_t dbl = s->in_cap * 2;
    uint8_t *n;
    /* Its bytes are coming: a cached block of the whole size costs nothing
     * (fresh memory costs a page fault per page). */
    if (s->in_need > s->in_cap && (n = bufpool_take(s->in_need)) != NULL) {
      memcpy(n, s->in, s->in_len);
      bufpool_put(s->in);
      s->in = n;
      s->in_cap = s->in_need;
    }
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

static void fd_pipe_close_cb(uv_handle_t *h)
{
  free(h);
}

/*
 * Move the descriptors that came with the bytes just read, stream offsets
 * [from, to), into s->fds.
 * libuv hands a received descriptor out only through uv_accept() into a
 * handle; a throwaway pipe handle takes it, we keep a duplicate and close
 * the handle. More than SESSION_MAX_FDS unclaimed descriptors is a
 * protocol violation. @return 0, or a negative code with the session closing.
 */
static int collect_fds(session_t *s, uint64_t from, uint64_t to)
{
  while (uv_pipe_pending_count(&s->pipe) > 0) {
    uv_pipe_t *tmp = malloc(sizeof(*tmp));
    uv_os_fd_t fd = -1;
    int dup_fd = -1;

    if (tmp == NULL) {
      session_close(s, "out of memory for a received descriptor");
      return HIPD_ENOMEM;
    }
    uv_pipe_init(s->d->loop, tmp, 0);
    if (uv_accept((uv_stream_t *)&s->pipe, (uv_stream_t *)tmp) == 0 &&
        uv_fileno((uv_handle_t *)tmp, &fd) == 0)
      dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    uv_close((uv_handle_t *)tmp, fd_pipe_close_cb);
    if (dup_fd < 0) {
      session_close(s, "cannot take a descriptor the client sent");
      return HIPD_EIO;
    }
    if (session_add_fd(s, dup_fd, from, to) != 0) {
      close(dup_fd);
      session_close(s, "protocol violation: more than 8 descriptors sent "
                       "and not claimed by requests");
      return HIPD_ETOOMANY;
    }
  }
  return 0;
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
  session_t *s = stream->data;

  (void)buf;
  /* What a client was answered early (call.h) is finished before
   * anything it sends next: its session's counts, its objects'
   * references, its calls in flight. The answer may reach the client,
   * and its next request us, before the bridge's wake-up does. */
  exec_bridge_run();
  if (nread == UV_ENOBUFS && s->in_starved) {
    input_wait(s); /* --max-input-bytes: its turn comes */
    return;
  }
  if (nread == UV_ENOBUFS) {
    session_close(s, "out of memory for the input buffer");
    return;
  }
  if (nread == UV_EOF) {
    session_close(s, "client disconnected");
    return;
  }
  if (nread < 0) {
    char why[128];
    snprintf(why, sizeof(why), "connection error: %s", uv_strerror((int)nread));
    session_close(s, why);
    return;
  }
  s->in_len += (size_t)nread;
  if (uv_pipe_pending_count(&s->pipe) > 0 &&
      collect_fds(s, s->in_pos + s->in_len - (size_t)nread,
                  s->in_pos + s->in_len) != 0)
    return;
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
    s->sock_requests++;
    spin_note_work();
    dispatch_request(s, msg.msgid, msg.method, msg.method_len, msg.params);
    break;
  case PROTO_NOTIFY:
    if (msg.method_len == sizeof(RING_KICK) - 1 &&
        memcmp(msg.method, RING_KICK, msg.method_len) == 0) {
      transport_ring_kick(s);
      break;
    }
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

    /* What the client submitted on its ring before this message runs
     * first; one left waiting for --max-inflight holds this message too
     * (the cap below), since it may have been published before it. */
    if (s->ring != NULL && (transport_ring_run(s), s->closing))
      break;
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
      /* The request timeout counts from when this request was first seen
       * incomplete. */
      if (s->partial_since_ms == 0 || s->partial_pos != s->in_pos + off) {
        s->partial_pos = s->in_pos + off;
        s->partial_since_ms = uv_now(s->d->loop);
        if (s->partial_since_ms == 0)
          s->partial_since_ms = 1;
      }
      break;
    }
    s->in_need = 0;
    s->partial_since_ms = 0;
    s->in_msg_end = off + (size_t)n;
    s->msg_pos = s->in_pos + off;
    s->msg_end = s->msg_pos + (uint64_t)n;
    handle_message(s, s->in + off, (size_t)n);
    if (s->nfds > 0 && !s->closing)
      session_drop_unclaimed_fds(s);
    off += (size_t)n;
    if (s->in_next != NULL) {
      /* The handler took the buffer: go on with what followed. */
      s->in = s->in_next;
      s->in_len = s->in_next_len;
      s->in_cap = s->in_next_cap;
      s->in_next = NULL;
      s->in_pos += off;
      off = 0;
    }
  }
  s->in_dispatch = 0;
  if (s->ring != NULL && !s->closing)
    transport_ring_run(s); /* what waited for these requests */
  if (s->closing)
    return;
  if (s->in_len == off)
    s->partial_since_ms = 0; /* nothing incomplete (or all consumed) */
  /* Keep the unread tail at the front; let a large idle buffer go. */
  if (off > 0) {
    memmove(s->in, s->in + off, s->in_len - off);
    s->in_pos += off;
    s->in_len -= off;
    if (s->in_need > off)
      s->in_need -= off;
    else if (s->in_len == 0)
      s->in_need = 0;
  }
  if (!list_empty(&s->d->inputq)) {
    input_shrink(s); /* others wait for room */
  } else if (s->in_len == 0 && s->in_cap > IDLE_BUFFER_KEEP) {
    bufpool_put(s->in);
    s->in = NULL;
    s->in_cap = 0;
  }
  room_settle(s, 0);
}

/* At a safe point: read again, and run the requests buffered while
 * throttled. */
static void resume(session_t *s)
{
  if (s->ring_stalled && !s->closing)
    transport_ring_run(s); /* its calls in flight dropped under the cap */
  if (!session_may_resume(s))
    return;
  s->read_paused = 0;
  /* The time it was not read does not count against its request. */
  if (s->partial_since_ms != 0)
    s->partial_since_ms = uv_now(s->d->loop);
  log_debug(s->id, "reading resumed");
  uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb);
  process_input(s);
}

uint32_t transport_idle_close(daemon_t *d, int force)
{
  list_node_t *n, *next;

  for (n = d->sessions.next; n != &d->sessions; n = next) {
    next = n->next;
    session_t *s = list_entry(n, session_t, node);
    if (d->close_code != 0 &&
        (force || (s->inflight == 0 && s->out_queued == 0)))
      session_close_told(s, d->close_code, d->close_why);
    else if (force || (s->inflight == 0 && s->out_queued == 0))
      session_close_told(s, HIPD_ESHUTDOWN,
                         force ? "daemon shutdown (in-flight work abandoned)"
                               : "daemon shutdown");
  }
  finish_closes(d);
  return d->nsessions;
}

void transport_accept(daemon_t *d, uv_stream_t *server_stream)
{
  session_t *s;
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  hipd_err_t refusal;
  uint64_t grant = 0;
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
  list_init(&s->flush_node);
  list_init(&s->run_node);
  list_init(&s->in_wait_node);
  list_init(&s->ring_node);
  list_init(&s->connecting_node);
  /* An IPC pipe receives descriptors (shared host buffers, SCM_RIGHTS). */
  uv_pipe_init(d->loop, &s->pipe, 1);
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
  s->opened_ms = uv_now(d->loop);
  list_insert_tail(&d->sessions, &s->node);
  d->nsessions++;
  d->sessions_total++;
  if (tenant_attach(s) != 0) {
    session_close(s, "out of memory for the session's tenant");
    return;
  }
  if (d->role == ROLE_WORKER && d->tenant_mode == ISOLATION_UID &&
      s->peer_uid != d->tenant_uid) {
    /* Defence in depth: the listener routes by uid. */
    log_error(s->id, "a connection of uid %u reached the worker of uid %u",
              (unsigned)s->peer_uid, (unsigned)d->tenant_uid);
    session_close(s, "connection of another tenant");
    return;
  }
  if (d->stopping || d->nsessions > d->cfg.max_sessions) {
    session_close(s, d->stopping ? "daemon is shutting down"
                                 : "too many sessions");
    return;
  }
  if (d->cfg.tenant_max_sessions != 0 &&
      tenant_count(s->tenant, TC_SESSIONS) > d->cfg.tenant_max_sessions) {
    char why[96];
    snprintf(why, sizeof(why), "too many sessions for uid %u (limit %u)",
             (unsigned)s->peer_uid, d->cfg.tenant_max_sessions);
    session_close(s, why);
    return;
  }
  /* The policy: a refused peer is told why at once (policy_refuse) and
   * closed, never read. */
  if (policy_check_peer(d, s->peer_uid, s->peer_gid, s->peer_who,
                        sizeof(s->peer_who), &s->devmask, &grant,
                        &refusal) != 0) {
    char why[HIPD_ERR_MSG_MAX + 96];
    if (uv_fileno((uv_handle_t *)&s->pipe, &fd) == 0)
      policy_refuse(d, fd, s->peer_uid, &refusal, why, sizeof(why));
    else
      snprintf(why, sizeof(why), "not allowed: %s", refusal.msg);
    session_close(s, why);
    return;
  }
  /* Connections not yet past hello hold a descriptor and a buffer each
   * for up to --hello-timeout: a few silent ones per uid. With workers the
   * listener bounds them (privsep/workers_route.c), with the same policy;
   * this one is not counted, being within the grace. */
  if (d->role == ROLE_SINGLE) {
    char why[160];
    if (tenant_connecting_check(
            &d->cfg, s->peer_uid,
            tenant_connecting_count(s->tenant, s->opened_ms), why,
            sizeof(why)) != 0) {
      session_close(s, why);
      return;
    }
  }
  grants_session_begin(s, grant);
  if (s->grant != 0)
    sess_log(HLOG_INFO, s,
             "session opened: peer pid %d uid %d gid %d, under grant '%s'",
             (int)s->peer_pid, (int)s->peer_uid, (int)s->peer_gid,
             grants_find(d, s->grant)->label);
  else
    sess_log(HLOG_INFO, s, "session opened: peer pid %d uid %d gid %d",
             (int)s->peer_pid, (int)s->peer_uid, (int)s->peer_gid);
  /* The current device is the first the peer may use. */
  s->device = s->devmask != 0 ? __builtin_ctzll(s->devmask) : 0;
  rc = uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb);
  if (rc < 0) {
    char why[128];
    snprintf(why, sizeof(why), "connection error: %s", uv_strerror(rc));
    session_close(s, why);
  }
}
