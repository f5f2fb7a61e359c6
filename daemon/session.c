/* SPDX-License-Identifier: MIT */
/* daemon/session.c: one client's session: its state and lifetime, the
 * queues through which a reply, a close or a resumption reaches the
 * transport's next safe point, the descriptors it was sent and its input
 * buffer's hand-over to a handler. Calls nothing above it: the transport
 * (transport.c) does the I/O and runs the safe points. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bufpool.h"
#include "codegen/intrinsics.h"
#include "log.h"
#include "session.h"
#include "tenants.h"
#include "util/array.h"

/* Make sure the next check or prepare phase runs the safe point (the
 * transport's, registered in d->safe_point). */
static void safe_point_arm(daemon_t *d)
{
  if (d->safe_point != NULL)
    d->safe_point(d);
}

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
  for (uint32_t i = 0; i < s->ngather; i++)
    free(s->gather[i].base);
  free(s->gather);
  for (uint32_t i = 0; i < s->nfds; i++)
    close(s->fds[i].fd);
  intr_set_unref(s->intrinsics);
  tenant_put(s);
  free(s->stats); /* stats_session_end() did, unless never torn down */
  drv_output_unref(s->kernel_out);
  bufpool_put(s->in);
  free(s);
}

void session_close(session_t *s, const char *reason)
{
  if (s->closing)
    return;
  s->closing = 1;
  sess_log(HLOG_INFO, s, "session closed: %s (%llu requests)", reason,
           (unsigned long long)s->requests);
  /* Its teardown comes later: it stops counting as connecting now. */
  tenant_connecting_done(s);
  list_remove(&s->node);
  s->d->nsessions--;
  if (s->d->session_ended != NULL)
    s->d->session_ended(s->d, s->id);
  uv_read_stop((uv_stream_t *)&s->pipe);
  /* The rest waits for the safe point: this may run inside a completion
   * or session_send() that still uses the session. */
  session_incref(s);
  list_insert_tail(&s->d->closeq, &s->node);
  safe_point_arm(s->d);
}

void session_close_told(session_t *s, int code, const char *reason)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  if (s->closing)
    return;
  if (s->out_queued == 0) {
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_closed(&pk, code, reason);
    if (sb.data != NULL) {
      uv_buf_t b = uv_buf_init(sb.data, (unsigned)sb.size);
      /* All of it or nothing: a part would leave a broken message. */
      int n = uv_try_write((uv_stream_t *)&s->pipe, &b, 1);
      if (n > 0 && (size_t)n < sb.size)
        log_warn(s->id, "session.closed: only %d of %zu bytes written", n,
                 sb.size);
    }
    msgpack_sbuffer_destroy(&sb);
  }
  session_close(s, reason);
}

void session_send(session_t *s, char *data, size_t len, void *tail,
                  size_t tail_len)
{
  daemon_t *d = s->d;
  size_t bytes = len + tail_len;

  if (s->closing)
    goto drop;
  if (s->out_queued + bytes > d->cfg.output_cap) {
    session_close(s, "output cap exceeded: the client is not reading its "
                     "replies");
    goto drop;
  }
  /* Room for two: the reply and its tail. */
  if (ARRAY_GROW(s->gather, s->ngather + 1, s->gather_cap, 16) != 0) {
    session_close(s, "out of memory queueing a reply");
    goto drop;
  }
  s->gather[s->ngather++] = uv_buf_init(data, (unsigned)len);
  if (tail != NULL)
    s->gather[s->ngather++] = uv_buf_init(tail, (unsigned)tail_len);
  s->gather_bytes += bytes;
  if (s->out_queued == 0)
    s->out_progress_ms = uv_now(d->loop);
  s->out_queued += bytes;
  if (list_empty(&s->flush_node)) {
    session_incref(s);
    list_insert_tail(&d->flushq, &s->flush_node);
  }
  safe_point_arm(d);
  return;

drop:
  free(data);
  free(tail);
}

void *session_steal_input(session_t *s, const void *data, size_t len)
{
  const uint8_t *p = data;
  size_t rest, cap;
  uint8_t *block, *next;

  if (!s->in_dispatch || s->in_next != NULL || s->in == NULL || p < s->in ||
      p + len > s->in + s->in_msg_end)
    return NULL;
  rest = s->in_len - s->in_msg_end;
  cap = rest > SESSION_READ_CHUNK ? rest : SESSION_READ_CHUNK;
  if ((next = malloc(cap)) == NULL)
    return NULL;
  memcpy(next, s->in + s->in_msg_end, rest);
  block = s->in;
  /* The loop in process_input() switches to it after this request; until
   * then s->in stays valid (the block is the caller's from now on). */
  s->in_next = next;
  s->in_next_len = rest;
  s->in_next_cap = cap;
  return block;
}

/* Did descriptor @p f come with the request [s->msg_pos, s->msg_end)? Its
 * read began at or before the request's first byte, the request began in
 * it, and no later request did. */
static int fd_of_request(const session_t *s, const struct session_fd *f)
{
  return f->from <= s->msg_pos && s->msg_pos < f->to && f->to <= s->msg_end;
}

int session_take_fd(session_t *s)
{
  for (uint32_t i = 0; i < s->nfds; i++) {
    if (fd_of_request(s, &s->fds[i])) {
      int fd = s->fds[i].fd;
      memmove(s->fds + i, s->fds + i + 1, (--s->nfds - i) * sizeof(s->fds[0]));
      return fd;
    }
  }
  return -1;
}

/* After a request [msg_pos, msg_end) was handled: close the descriptors it
 * did not claim, and those of reads that no request began in, which no
 * later request can claim either. */
void session_drop_unclaimed_fds(session_t *s)
{
  uint32_t kept = 0;

  for (uint32_t i = 0; i < s->nfds; i++) {
    if (s->fds[i].to <= s->msg_end) {
      log_debug(s->id, "closed a descriptor no request claimed");
      close(s->fds[i].fd);
    } else {
      s->fds[kept++] = s->fds[i];
    }
  }
  s->nfds = kept;
}

int session_add_fd(session_t *s, int fd, uint64_t from, uint64_t to)
{
  if (s->nfds == SESSION_MAX_FDS)
    return HIPD_ETOOMANY;
  s->fds[s->nfds++] = (struct session_fd){fd, from, to};
  return 0;
}

/* May a throttled session read again? */
int session_may_resume(const session_t *s)
{
  return s->read_paused && !s->closing && s->inflight < s->d->cfg.max_inflight;
}

void session_request_done(session_t *s)
{
  s->inflight--;
  if ((session_may_resume(s) ||
       (s->ring_stalled && s->inflight < s->d->cfg.max_inflight)) &&
      list_empty(&s->run_node)) {
    /* Not here: this may be a completion, deep in a call's stack. */
    session_incref(s);
    list_insert_tail(&s->d->runq, &s->run_node);
    safe_point_arm(s->d);
  }
}
