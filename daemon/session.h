/* SPDX-License-Identifier: MIT */
/* daemon/session.h: one client's session, the state that dispatch, the
 * methods and the session's resources work on.
 *
 * A session has an id, the peer's credentials, the negotiated protocol, a
 * current device, its handle table and its resources (resources.h). The
 * transport (transport.h) owns its I/O: it reads the session's bytes into
 * the input buffer below, frames and decodes requests and hands each to
 * dispatch, and writes the replies the session gathered. This file holds
 * what the layers below the transport call: reference counting, closing,
 * queueing a reply, the descriptors the client sent, and the hand-over of
 * the input buffer to a handler; none of it calls up.
 *
 * Lifetime: a session is reference-counted. The connection holds one
 * reference until its pipe's close callback; every deferred call holds one.
 * The memory is freed when the last reference goes, never from inside a
 * callback that still uses it.
 *
 * Safe points: a completion that answers a call only queues the reply (and,
 * if the session was throttled, puts it on the daemon's run queue); a close
 * only marks the session, stops reading and queues it. The loop's check and
 * prepare phases, outside every other callback, then write the queued
 * replies, resume the sessions on the run queue (read again, run their
 * buffered requests) and tear down the closed ones (release their
 * resources, close the pipe): the transport's safe point, which the queues
 * arm through d->safe_point. So no request is dispatched, and no session
 * torn down, on the stack of a completion or of session_send().
 */
#ifndef HIPD_SESSION_H
#define HIPD_SESSION_H

#include <msgpack.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon.h"
#include "drivers/driver_output.h"
#include "handles.h"
#include "log.h"
#include "resources.h"

/* Descriptors a client may send ahead of the requests that claim them. */
#define SESSION_MAX_FDS 8
/* Bytes the input buffer grows by at least per read. */
#define SESSION_READ_CHUNK (64 * 1024)

typedef struct session {
  uv_pipe_t pipe; /* the connection; pipe.data = this */
  daemon_t *d;
  list_node_t node;     /* in d->sessions; once closed, in d->closeq until
                           its teardown */
  list_node_t run_node; /* in d->runq while it waits to resume */
  uint64_t id;          /* unique for the daemon's life, from 1 */
  int refs;             /* see the lifetime note above */
  int closing;          /* session_close() was called */
  pid_t peer_pid;       /* SO_PEERCRED */
  uid_t peer_uid;
  gid_t peer_gid;
  char client[64]; /* name given in hello */
  int protocol;    /* negotiated version, 0 before hello */
  uint8_t *in;     /* bytes read and not yet consumed */
  size_t in_len, in_cap;
  size_t in_need;    /* bytes the next message needs at least */
  int read_paused;   /* reading stopped: too many requests in flight */
  int in_dispatch;   /* inside session_process_input() */
  size_t in_msg_end; /* end of the request being handled, in in */
  uint8_t *in_next;  /* after session_steal_input(): the bytes after the
                        request, to go on with (in_next_len) */
  size_t in_next_len, in_next_cap;
  msgpack_zone zone;      /* decoded objects of the current request */
  uint32_t inflight;      /* requests not yet answered */
  uint64_t requests;      /* requests received (socket and ring) */
  uint64_t sock_requests; /* requests read from the socket: the order of
                             ring submissions against them (ring.h) */
  struct ring *ring;      /* its shared-memory queues (ring.h), or NULL */
  int ring_polled;        /* in d->rings: polled at every loop iteration */
  list_node_t ring_node;  /* in d->rings while ring_polled */
  int ring_stalled;       /* its ring waits for --max-inflight to drop */
  struct ring_decoded *ring_dec; /* its last submission, decoded
                                    (transport_ring.c), or NULL */
  size_t out_queued;             /* reply bytes gathered or handed to libuv, not
                                    yet written */
  uv_buf_t *gather;              /* replies gathered for the next write */
  uint32_t ngather, gather_cap;
  size_t gather_bytes;
  list_node_t flush_node;   /* in d->flushq while gather is not empty */
  uint64_t out_progress_ms; /* last time output moved (or became non-empty) */
  handle_table_t handles;
  int device;       /* current device (global id) */
  res_t res;        /* what it owns beyond the handles (resources.c only) */
  uint64_t in_pos;  /* stream offset of in[0]: bytes consumed before it */
  uint64_t msg_pos; /* the request being handled: its stream offsets */
  uint64_t msg_end;
  uint64_t partial_pos;      /* stream offset of the incomplete request */
  uint64_t partial_since_ms; /* when it was first seen incomplete, 0: none */
  uint64_t opened_ms;        /* uv_now() at accept, for the hello timeout */
  struct session_fd {
    int fd;
    uint64_t from, to;    /* stream offsets of the read that carried it */
  } fds[SESSION_MAX_FDS]; /* descriptors received, not yet claimed */
  uint32_t nfds;
  struct profile *profile;     /* records while profiling is on, else NULL */
  uint32_t profile_gen;        /* profiling periods so far */
  struct intr_set *intrinsics; /* intrinsics.register'ed, NULL: none */
  struct tenant *tenant;       /* its uid's record (tenants.h), NULL
                                  before accept attached it */
  int tenant_open;             /* counted in tenant->sessions */
  list_node_t connecting_node; /* in tenant->connecting until a hello
                                  succeeds or it closes (tenants.h) */
  uint64_t devmask;            /* devices the policy lets it use (bit =
                                  global id) */
  int close_flushed;           /* close once the replies queued so far are
                                  written (the transport checks it) */
  char peer_who[64];           /* "uid 1001 (bob)", for the policy's messages */
  uint64_t grant;              /* the grant it came under (grants.h), 0:
                                  none */
  int grant_open;              /* counted in its grant's sessions */
  struct stats_sess *stats;    /* its counters (stats.h), NULL: none yet */
  drv_output_t *kernel_out;    /* what its kernels printed, for
                                  kernel.output (a reference; NULL until
                                  its first launch) */
  char kill_why[192];          /* session.kill of itself, or a revoke by its own
                                  uid: the close reason once its replies are written
                                  (close_flushed) */

  /* The global bound on buffered input (transport.c). in_room: of
   * d->in_room, what this session holds (for its buffer, or for its next
   * message) beyond the floor; in_want: while it waits, the buffer size
   * it waits room for; in_waiting: reading stopped until room frees, in
   * d->inputq by in_wait_node (which holds a reference); in_starved: the
   * last allocation was refused for lack of room. */
  size_t in_room;
  size_t in_want;
  int in_waiting;
  int in_starved;
  list_node_t in_wait_node;
} session_t;

/* Close the session: log @p reason, stop reading, drop later replies and
 * unlink it from the live sessions; its teardown (releasing its resources,
 * closing the socket) follows at the next safe point. Safe to call more
 * than once, from anywhere on the loop thread. */
void session_close(session_t *s, const char *reason);
/* session_close(), after telling the client why with session.closed
 * (@p code and @p reason) when its socket takes the message at once:
 * nothing else is waiting to be written to it (else it is not told, and
 * sees the connection end only). For the daemon's own reasons: an admin's
 * kill, a shutdown, a lost device. */
void session_close_told(session_t *s, int code, const char *reason);

void session_incref(session_t *s);
void session_decref(session_t *s);

/* Queue one reply: @p len bytes of @p data followed by @p tail_len bytes of
 * @p tail (NULL for none), both malloc'd; ownership passes to the session,
 * which frees them after the write. A large payload travels as the tail so
 * it is never copied into the packed reply. A closing session frees the
 * bytes and drops the reply. May close the session if its output cap is
 * exceeded. */
void session_send(session_t *s, char *data, size_t len, void *tail,
                  size_t tail_len);

/* During a request's handler: take the session's input buffer, which holds
 * the request, if [data, data + len) lies in it. The caller owns the
 * returned block (free() it) and may keep using pointers into it; the
 * session goes on with a copy of the bytes after the request. @return the
 * block, or NULL (the bytes are elsewhere, or out of memory): copy them. */
void *session_steal_input(session_t *s, const void *data, size_t len);

/* A reply to one request left the dispatcher: count it; a throttled
 * session that may read again is resumed at the next safe point. */
void session_request_done(session_t *s);

/*
 * During a request's handler: a descriptor that came with this request,
 * now the caller's; -1 if none. A descriptor belongs to the request whose
 * first byte came in the same read as it, the last such request when
 * several did (the kernel ends a read with the bytes a descriptor rode
 * on). Whatever the request leaves unclaimed is closed once it has been
 * handled, however it was answered, so no descriptor can reach another
 * request.
 */
int session_take_fd(session_t *s);

/* A descriptor @p fd came with the bytes at stream offsets [@p from, @p
 * to): keep it for the request it belongs to. @return 0, or HIPD_ETOOMANY
 * when SESSION_MAX_FDS are kept already (the caller closes @p fd). */
int session_add_fd(session_t *s, int fd, uint64_t from, uint64_t to);
/* After the request [msg_pos, msg_end) was handled: close the descriptors
 * it did not claim, and those of reads no request began in. */
void session_drop_unclaimed_fds(session_t *s);

/* May the session use device @p id (the policy's --device-allow)? */
static inline int session_may_use_device(const session_t *s, int id)
{
  return id >= 0 && id < 64 && ((s->devmask >> id) & 1);
}

/* May a session throttled by --max-inflight read again? */
int session_may_resume(const session_t *s);

/* Log a line about session @p s: its id and its peer's uid go with it
 * (the journal's SESSION= and UID= fields, log_emit()). */
#define sess_log(level, s, ...)                                                \
  log_emit((level),                                                            \
           &(log_ctx_t){                                                       \
               .sid = (s)->id, .uid = (long long)(s)->peer_uid, .device = -1}, \
           __VA_ARGS__)

#endif
