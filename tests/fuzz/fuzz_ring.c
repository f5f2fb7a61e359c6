/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_ring.c: a session's shared-memory ring (proto/PROTOCOL.md,
 * "Rings"; proto/ring_layout.h) on a real daemon, in process: the CPU device,
 * the real server, session, dispatch, methods, daemon/ring.c and
 * daemon/transport_ring.c, driven through a real socket and a real memfd.
 *
 * The daemon is started once per process, as fuzz_dispatch.c starts it (the
 * client lives in the same libuv loop, a uv_poll on a plain socket, so the
 * daemon and the client take turns on one thread: the client writes the
 * ring only between the loop's iterations). Each input is one connection:
 *
 *  - byte 0 chooses the ring's entries (8 << (b & 3)), the daemon's
 *    --max-inflight (2, 4, 16 or 256: (b >> 2) & 3) and --busy-poll (0 or
 *    50 us: bit 4) for this input;
 *  - the client says hello, allocates two 4 KiB buffers (handles A, B), a
 *    stream (S), an event (E), a 64 KiB shared buffer (M, shm.create with a
 *    memfd) and asks for the default stream (D), then opens the ring: a
 *    memfd of proto_ring_size(entries) bytes sealed F_SEAL_SHRINK |
 *    F_SEAL_GROW, mapped, sent with `ring.open [entries]` (SCM_RIGHTS);
 *  - the rest is a program, one opcode byte (mod OP_COUNT) and its operand
 *    bytes at a time (bytes past the end read as 0); see the OP_ enum: write
 *    a slot (a valid request built from the table of ring methods below with
 *    fuzzed params and the handles above, or raw bytes, a length and flags
 *    from the input, at the next index or at one the input picks), set a
 *    slot's `after`, publish sq_tail (+1, all written, +n, a fuzzed value, a
 *    step back), set cq_head (the true tail, +1, behind, ahead, fuzzed),
 *    rewrite a published slot, set cq_wait, overwrite the daemon's own
 *    fields, ring.kick (always, or as a client must), a socket request
 *    (ping, session.info, frees of the handles, mem.memset, stream.synchronize,
 *    a second ring.open...), bytes that break the socket's protocol, a burst
 *    of requests, and runs of the loop (uv_run NOWAIT, or ONCE bounded by a
 *    1 ms timer);
 *  - then a drain, as a well-behaved client: read every completion (cq_head
 *    to the tail), send pings until every `after` is met, kick when sq_kick
 *    says so; when the client left the ring broken beyond repair it adds one
 *    submission so that the daemon must look;
 *  - then the client closes, and the loop runs until the session is torn
 *    down.
 *
 * The client keeps its own account of the daemon's indices (sq_head and
 * cq_tail as the daemon last wrote them, read after every iteration; the
 * daemon's fields the client overwrote with a sentinel are told apart), of
 * each submission the daemon took (the slot's bytes when sq_head passed
 * it: the daemon copies a slot out, so what the client writes later must
 * change nothing), and of each request it sent either way.
 *
 * Properties (a failure aborts with a message):
 *  - the daemon does not crash, and ASan/UBSan stay quiet;
 *  - every completion the daemon publishes is one whole msgpack-rpc response
 *    (len 1..504, proto_frame_scan the whole len, proto_msg_decode, type
 *    response, flags 0) to a ring request the daemon took and did not answer
 *    yet; each request of either path is answered at most once; a socket
 *    request only on the socket; a ring request on the ring, or on the
 *    socket when its completions were full: the client replays the daemon's
 *    rule (a run reserves a completion while cq_res - cq_head < entries),
 *    which must agree with the runs and the answers on the socket that
 *    ring_counts() (session.info's) reports, and with where each answer
 *    comes; an error is PROTOCOL.md's object with a known code other than
 *    EINTERNAL or EPROTO, its message at most RING_MSG_MAX bytes on the
 *    ring; a ring request was run only once the daemon had read its `after`
 *    socket requests (the session's count, read in process);
 *  - sq_head moves only forward, never past the published sq_tail, never
 *    when that tail is more than `entries` ahead, and never past a
 *    submission that broke the ring; cq_tail never moves by more than the
 *    answers owed (submissions taken, not answered);
 *  - while the client's indices were valid (every cq_head it published
 *    within [its previous cq_head, cq_tail], every sq_tail at most `entries`
 *    ahead of sq_head), cq_tail is never more than `entries` ahead of the
 *    published cq_head (and never more than the completions reserved);
 *  - a client that broke the ring: a submission of length 0 or over 496 is
 *    taken and the session is closed at once; a submission whose bytes are
 *    not one request, a tail more than `entries` ahead, a cq_head that can
 *    never be among the completions published, left at the drain, end in
 *    the session's close (socket EOF); the daemon never closes the session
 *    without such a cause (or a socket protocol violation the client sent);
 *  - cq_wait: the daemon moves it from 1 or 3 (asleep; the ring has the
 *    socket doorbell) to 2 when it publishes a completion, touches no
 *    other value, and sends `ring.wake` exactly once per such move (the
 *    only notification it may send);
 *  - order: a request the daemon answers at dispatch (a method no ring takes,
 *    or an unknown one: "markers") published on the ring before the client
 *    wrote socket request k, with every `after` up to it at most k - 1, is
 *    answered before socket request k's answer arrives; and the session
 *    never has more than --max-inflight calls in flight (read in process);
 *  - liveness: a client that broke nothing sees, by the drain's end (5 s),
 *    every submission taken and every request of either path answered;
 *  - idle: with --busy-poll 0, a ring whose state did not change for 64
 *    loop iterations does not keep the loop from blocking (its idle handle);
 *  - teardown: after the close, the session is gone (d->sessions and
 *    d->closeq empty), no ring is polled (d->rings empty, its check, idle
 *    and idle handles stopped), the device work is done, and no descriptor
 *    or mapping of the client's memfds is left in the process.
 *
 * $HIPD_FUZZ_RING_SKIP, a comma-separated list of "order", "inflight",
 * "idle", skips those checks (to fuzz on past a known bug).
 * $HIPD_FUZZ_LOG logs at debug level and prints what the client sees.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "device.h"
#include "drivers/cpu/cpu.h"
#include "executor.h"
#include "fuzz.h"
#include "kernels/cache.h"
#include "log.h"
#include "ring.h"
#include "ring_layout.h"
#include "rpc.h"
#include "server.h"
#include "session.h"
#include "transport.h"

#define HANDLE_MIN ((uint64_t)1 << 40)
#define SHM_SIZE (64 * 1024)
#define BUF_SIZE 4096
#define MAX_OPS 512
#define DRAIN_NS (5ull * 1000 * 1000 * 1000)
#define RING_MEMFD "hipd-fuzz-ring"
#define SHM_MEMFD "hipd-fuzz-shm"

/* As fuzz_dispatch.c: the HIP runtime's threads and ASan's sigaltstack. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return "use_sigaltstack=0";
}

/* ------------------------------------------------------------ the daemon */

static struct {
  int started;
  uv_loop_t loop;
  daemon_t d;
  uv_timer_t watchdog; /* bounds a blocking uv_run */
  char dir[64];
  char path[96];
  proto_limits_t reply_limits;
  int verbose;
  int skip_order, skip_inflight, skip_idle;
} G;

static void daemon_cleanup(void)
{
  if (G.started) {
    unlink(G.path);
    rmdir(G.dir);
  }
  uv_library_shutdown();
}

static void daemon_start(void)
{
  daemon_t *d = &G.d;
  hipd_err_t err;
  const char *skip = getenv("HIPD_FUZZ_RING_SKIP");

  signal(SIGPIPE, SIG_IGN);
  /* Nothing here compiles (kernel.launch meets no kernel). */
  setenv("HIPD_CXX", "false", 1);
  setenv("HIPD_CPU_RUNNER", FUZZ_CPU_RUNNER, 0);
  setenv("HIPD_CPU_HEADER", FUZZ_CPU_HEADER, 0);
  G.verbose = getenv("HIPD_FUZZ_LOG") != NULL;
  log_set_level(G.verbose ? HLOG_DEBUG : HLOG_ERROR);
  if (skip != NULL) {
    G.skip_order = strstr(skip, "order") != NULL;
    G.skip_inflight = strstr(skip, "inflight") != NULL;
    G.skip_idle = strstr(skip, "idle") != NULL;
  }

  snprintf(G.dir, sizeof(G.dir), "%s", "/tmp/hipd-fuzz-XXXXXX");
  FUZZ_CHECK(mkdtemp(G.dir) != NULL, "mkdtemp: %s", strerror(errno));
  snprintf(G.path, sizeof(G.path), "%s/hipd.sock", G.dir);
  FUZZ_CHECK(uv_loop_init(&G.loop) == 0, "uv_loop_init");
  d->loop = &G.loop;
  d->cfg = (daemon_config_t){
      .socket_path = G.path,
      .socket_mode = 0600,
      .max_inflight = 256,
      .output_cap = (size_t)256 << 20,
      .max_input_bytes = (uint64_t)1 << 30,
      .write_timeout_ms = 30000,
      .shutdown_ms = 1000,
      .max_sessions = 4,
      .max_handles = 4096,
      .listen_fd = -1,
      .mem_quota = (uint64_t)64 << 20,
      .max_streams = 8,
      .devices = "cpu",
      .cpu_devices = 1,
      .cache_dir = "",
      .cache_size = (uint64_t)16 << 20,
      .cpu_kernel_timeout_ms = 10000,
      .busy_poll_us = 0,
      .isolation = ISOLATION_NONE,
  };
  proto_limits_default(&d->cfg.limits);
  d->role = ROLE_SINGLE;
  d->accept = transport_accept;
  list_init(&d->sessions);
  d->start_ms = uv_now(d->loop);
  cpu_driver_set_count(d->cfg.cpu_devices);
  cpu_driver_set_launch_timeout(d->cfg.cpu_kernel_timeout_ms);
  exec_set_busy_poll(0);
  FUZZ_CHECK(exec_bridge_init(d->loop) == 0, "exec_bridge_init");
  FUZZ_CHECK(devices_init(d->cfg.devices, &err) == 0, "devices_init: %s",
             err.msg);
  FUZZ_CHECK(cache_init(d->loop, d->cfg.cache_dir, d->cfg.cache_size, &err) ==
                 0,
             "cache_init: %s", err.msg);
  FUZZ_CHECK(server_start(d) == 0, "server_start on %s", G.path);
  transport_init(d);
  uv_timer_init(&G.loop, &G.watchdog);
  G.started = 1;
  atexit(daemon_cleanup);

  proto_limits_default(&G.reply_limits);
  G.reply_limits.max_message = (size_t)1 << 30;
  G.reply_limits.max_depth = PROTO_DEPTH_CAP;
}

/* The input's session, while it is open. */
static session_t *live_session(void)
{
  if (list_empty(&G.d.sessions))
    return NULL;
  return list_entry(G.d.sessions.next, session_t, node);
}

static uint64_t now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ the client */

typedef struct {
  uint8_t *p;
  size_t len, off;
  int fd;
} chunk_t;

/* A request sent on the socket. */
typedef struct {
  uint32_t msgid;
  uint64_t no; /* its position among the socket's requests, from 1 */
  int setup;   /* which handle its result gives (H_*), or -1 */
  int answered;
} sreq_t;

/* A submission the daemon took that is one request. */
typedef struct {
  uint32_t msgid;
  uint32_t idx;
  uint64_t after;
  int dest; /* DEST_*: where the daemon said, when it ran it, its answer goes */
  int answered;
} rreq_t;

enum { DEST_UNKNOWN, DEST_CQ, DEST_SOCKET };

/* A marker published on the ring (order property). */
typedef struct {
  uint32_t idx;
  uint64_t eff_after; /* the largest `after` of it and all before it */
  uint64_t pub_sock;  /* socket requests written when it was published */
  int answered;
} mark_t;

enum { H_A, H_B, H_S, H_E, H_M, H_D, H_COUNT, H_RING = H_COUNT };

enum { BAD_NONE, BAD_LEN, BAD_BYTES };

typedef struct {
  const uint8_t *p;
  size_t n, off;
} input_t;

typedef struct {
  int fd;
  uv_poll_t poll;
  int poll_events, poll_closing, poll_closed;
  chunk_t *out;
  size_t nout, out_head, out_cap;
  int write_broken;
  uint8_t *in;
  size_t in_len, in_cap;
  int eof;

  sreq_t *sreqs;
  size_t nsreqs, sreqs_cap;
  rreq_t *rreqs;
  size_t nrreqs, rreqs_cap;
  size_t rr_open;  /* rreqs before it are answered */
  uint64_t n_owed; /* rreqs not answered */
  /* The runs of submissions (ring_counts()): each reserves a completion
   * while cq_res - cq_head < entries, else its answer takes the socket. */
  size_t run_next;    /* rreqs from it have not run */
  uint64_t runs_seen; /* runs accounted */
  uint64_t ovf_model; /* of them, answered on the socket */
  uint64_t owed_cq;   /* completions reserved and not published */
  uint32_t cq_res;    /* completions reserved (published or owed) */
  int bad_ran;        /* the bad submission ran (and closed the session) */
  mark_t *marks;
  size_t nmarks, marks_cap, marks_open;
  int dup_msgid;               /* two ring requests may share a msgid */
  uint8_t seen_ids[65536 / 8]; /* msgids from 1000 taken on the ring */
  uint64_t sock_queued;        /* socket requests written (queued) so far */
  uint32_t next_msgid;
  uint64_t handles[H_COUNT + 1];
  int setup_failed;

  /* The ring, as the client maps it. */
  void *base;
  size_t size;
  uint32_t E;
  ring_hdr_t *hdr;
  ring_sqe_t *sq;
  ring_cqe_t *cq;
  int ring_open;
  /* What the client published. */
  uint32_t tail, prep, head;
  uint32_t cq_wait; /* the value cq_wait should hold */
  /* The daemon's indices, as it last wrote them. */
  uint32_t d_sqh, d_cqt;
  int sqh_scribbled, cqt_scribbled;
  uint32_t sqh_sentinel, cqt_sentinel;
  uint64_t d_seen_changes; /* observations that saw a change */

  /* What the client did. */
  int justified;       /* it broke something: a close is allowed */
  int head_clean;      /* every cq_head within [previous, cq_tail] */
  int tail_clean;      /* every sq_tail at most E ahead of sq_head */
  int tail_retracted;  /* sq_tail moved back over unseen submissions */
  int rewrote_untaken; /* a published, untaken slot was rewritten */
  int kick_untrusted;  /* the client overwrote sq_kick */
  int sock_broken;     /* garbage on the socket */
  int bad_taken;       /* BAD_*: the daemon took a submission that breaks */
  uint32_t bad_idx;
  uint64_t bad_after;
  uint64_t pub_after_max;
  uint64_t wakes_owed, wakes_got;
  uint64_t sock_msgs; /* messages from the daemon on the socket */
  const char *why;    /* the last thing that broke the ring, for messages */
} client_t;

static client_t C; /* one input's client (static: it is large) */

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
  if (need <= *cap)
    return p;
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need)
    ncap *= 2;
  p = realloc(p, ncap * elem);
  FUZZ_CHECK(p != NULL, "out of memory");
  *cap = ncap;
  return p;
}

/* ------------------------------------------------------ the input's bytes */

static uint8_t in_u8(input_t *in)
{
  return in->off < in->n ? in->p[in->off++] : 0;
}
static uint16_t in_u16(input_t *in)
{
  uint16_t v = in_u8(in);
  return (uint16_t)(v | (uint16_t)in_u8(in) << 8);
}
static uint32_t in_u32(input_t *in)
{
  uint32_t v = in_u16(in);
  return v | (uint32_t)in_u16(in) << 16;
}
static uint64_t in_u64(input_t *in)
{
  uint64_t v = in_u32(in);
  return v | (uint64_t)in_u32(in) << 32;
}

/* ------------------------------------------------------------ the socket */

static void write_some(client_t *c)
{
  while (c->out_head < c->nout && !c->write_broken) {
    chunk_t *k = &c->out[c->out_head];
    struct iovec iov = {.iov_base = k->p + k->off, .iov_len = k->len - k->off};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    proto_fd_ctl_t ctl;
    ssize_t n;

    if (k->fd >= 0 && k->off == 0)
      proto_msg_attach_fd(&mh, &ctl, k->fd);
    n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return;
      FUZZ_CHECK(errno == EPIPE || errno == ECONNRESET, "send: %s",
                 strerror(errno));
      c->write_broken = 1;
      return;
    }
    if (k->fd >= 0) {
      close(k->fd);
      k->fd = -1;
    }
    k->off += (size_t)n;
    if (k->off == k->len) {
      free(k->p);
      k->p = NULL;
      c->out_head++;
    }
  }
}

static void poll_update(client_t *c);

static void queue_bytes(client_t *c, const void *p, size_t len, int fd)
{
  c->out = grow(c->out, &c->out_cap, c->nout + 1, sizeof(*c->out));
  chunk_t *k = &c->out[c->nout++];
  k->p = malloc(len);
  FUZZ_CHECK(k->p != NULL, "out of memory");
  memcpy(k->p, p, len);
  k->len = len;
  k->off = 0;
  k->fd = fd;
  write_some(c);
  poll_update(c);
}

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} buf_t;

static void buf_init(buf_t *b)
{
  msgpack_sbuffer_init(&b->sb);
  msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

/* Send the request packed in @p b (its msgid @p msgid) on the socket. */
static void send_request(client_t *c, buf_t *b, uint32_t msgid, int fd,
                         int setup)
{
  c->sreqs = grow(c->sreqs, &c->sreqs_cap, c->nsreqs + 1, sizeof(*c->sreqs));
  c->sreqs[c->nsreqs++] =
      (sreq_t){.msgid = msgid, .no = ++c->sock_queued, .setup = setup};
  if (msgid >= 1000 && msgid - 1000 < 65536)
    c->seen_ids[(msgid - 1000) / 8] |= (uint8_t)(1u << (msgid % 8));
  queue_bytes(c, b->sb.data, b->sb.size, fd);
  msgpack_sbuffer_destroy(&b->sb);
}

static void send_kick(client_t *c)
{
  buf_t b;

  buf_init(&b);
  proto_pack_notify(&b.pk, RING_KICK, 0);
  queue_bytes(c, b.sb.data, b.sb.size, -1);
  msgpack_sbuffer_destroy(&b.sb);
}

static int make_memfd(const char *name, size_t size, unsigned seals)
{
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

  FUZZ_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
  FUZZ_CHECK(ftruncate(fd, (off_t)size) == 0, "ftruncate: %s", strerror(errno));
  FUZZ_CHECK(fcntl(fd, F_ADD_SEALS, seals) == 0, "F_ADD_SEALS: %s",
             strerror(errno));
  return fd;
}

/* ------------------------------------------------------- checking replies */

/* PROTOCOL.md's error object ("Errors"); a ring's message is cut at
 * RING_MSG_MAX. */
static void check_error(const msgpack_object *e, const msgpack_object *result,
                        uint32_t msgid, int ring)
{
  const msgpack_object *code, *name, *message;
  int64_t v;

  FUZZ_CHECK(e->type == MSGPACK_OBJECT_MAP && e->via.map.size == 3,
             "msgid %u: the error is a %s, not a map of 3", msgid,
             proto_obj_type_name(e));
  code = proto_map_get(e, "code");
  name = proto_map_get(e, "name");
  message = proto_map_get(e, "message");
  FUZZ_CHECK(code != NULL && name != NULL && message != NULL,
             "msgid %u: error without code, name or message", msgid);
  FUZZ_CHECK(proto_obj_int(code, INT32_MIN, -1, &v) == 0,
             "msgid %u: error code is not a negative int", msgid);
  const char *want = hipd_err_name((int)v);
  FUZZ_CHECK(strcmp(want, "UNKNOWN") != 0, "msgid %u: unknown code %lld", msgid,
             (long long)v);
  FUZZ_CHECK(proto_obj_streq(name, want), "msgid %u: code %lld misnamed", msgid,
             (long long)v);
  FUZZ_CHECK(message->type == MSGPACK_OBJECT_STR && message->via.str.size > 0 &&
                 message->via.str.size <= (ring ? RING_MSG_MAX : 16383),
             "msgid %u: bad message (%s, %u bytes%s)", msgid,
             proto_obj_type_name(message),
             message->type == MSGPACK_OBJECT_STR ? message->via.str.size : 0,
             ring ? ", on a ring" : "");
  FUZZ_CHECK(v != HIPD_EINTERNAL && v != HIPD_EPROTO &&
                 v != HIPD_EDISCONNECTED && v != HIPD_ECONNECT,
             "msgid %u: %s: %.*s", msgid, want, (int)message->via.str.size,
             message->via.str.ptr);
  FUZZ_CHECK(result->type == MSGPACK_OBJECT_NIL,
             "msgid %u: an error with a %s result", msgid,
             proto_obj_type_name(result));
}

static uint64_t first_handle(const msgpack_object *o)
{
  uint64_t h;

  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= HANDLE_MIN)
    return o->via.u64;
  if (o->type == MSGPACK_OBJECT_ARRAY)
    for (uint32_t i = 0; i < o->via.array.size; i++)
      if ((h = first_handle(&o->via.array.ptr[i])) != 0)
        return h;
  if (o->type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < o->via.map.size; i++)
      if ((h = first_handle(&o->via.map.ptr[i].val)) != 0)
        return h;
  return 0;
}

static void observe(client_t *c);
static rreq_t *ring_answer(client_t *c, const proto_msg_t *m, int where);

/* Is the order property's account sound? Not once the client broke
 * something, rewrote or withdrew what it published, or ring msgids repeat. */
static int order_on(const client_t *c)
{
  return !G.skip_order && !c->justified && c->tail_clean && c->head_clean &&
         !c->tail_retracted && !c->rewrote_untaken && !c->bad_taken &&
         !c->dup_msgid;
}

/* The order property: every marker published before socket request @p no
 * was written, with every `after` up to it below @p no, was answered. */
static void check_order(client_t *c, uint64_t no)
{
  if (!order_on(c))
    return;
  for (size_t i = c->marks_open; i < c->nmarks; i++) {
    const mark_t *m = &c->marks[i];

    if (m->answered || m->pub_sock >= no || m->eff_after > no - 1)
      continue;
    FUZZ_CHECK(0,
               "order: socket request #%llu was answered before ring "
               "submission %u, which answers at dispatch and was published "
               "before it (after %llu, %llu socket requests written then; "
               "the daemon's sq_head %u, cq_tail %u)",
               (unsigned long long)no, m->idx, (unsigned long long)m->eff_after,
               (unsigned long long)m->pub_sock, c->d_sqh, c->d_cqt);
  }
}

/* One message from the daemon on the socket. */
static void socket_message(client_t *c, const uint8_t *p, size_t n)
{
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = NULL;
  sreq_t *r = NULL;

  FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
  FUZZ_CHECK(proto_msg_decode(p, n, &zone, &m, &reason) == 0,
             "the daemon sent a message that does not decode: %s", reason);
  c->sock_msgs++;
  if (m.type == PROTO_NOTIFY) {
    FUZZ_CHECK(m.method_len == sizeof(RING_WAKE) - 1 &&
                   memcmp(m.method, RING_WAKE, m.method_len) == 0,
               "the daemon sent the notification '%.*s'", (int)m.method_len,
               m.method);
    c->wakes_got++;
    FUZZ_CHECK(c->wakes_got <= c->wakes_owed,
               "ring.wake %llu, but cq_wait went from asleep to 2 %llu times",
               (unsigned long long)c->wakes_got,
               (unsigned long long)c->wakes_owed);
    msgpack_zone_destroy(&zone);
    return;
  }
  FUZZ_CHECK(m.type == PROTO_RESPONSE, "the daemon sent a message of type %d",
             m.type);
  for (size_t i = 0; i < c->nsreqs && r == NULL; i++)
    if (c->sreqs[i].msgid == m.msgid && !c->sreqs[i].answered)
      r = &c->sreqs[i];
  if (r == NULL) {
    /* A ring request the daemon answers here: the completions were full
     * when it ran it. */
    rreq_t *rr = ring_answer(c, &m, DEST_SOCKET);
    int elsewhere = 0;
    for (size_t i = c->rr_open; i < c->nrreqs && rr == NULL; i++)
      elsewhere |= c->rreqs[i].msgid == m.msgid && !c->rreqs[i].answered;
    FUZZ_CHECK(rr != NULL,
               "a reply on the socket to msgid %u, which no unanswered "
               "socket request has%s",
               m.msgid,
               elsewhere ? " (a ring request has it, which the daemon did "
                           "not run or answers on the ring)"
                         : "");
    if (G.verbose)
      fprintf(stderr, "  socket reply %u to ring submission %u\n", m.msgid,
              rr->idx);
    msgpack_zone_destroy(&zone);
    return;
  }
  r->answered = 1;
  if (G.verbose) {
    const msgpack_object *msg = proto_map_get(m.error, "message");
    fprintf(stderr, "  socket reply %u: %.*s\n", m.msgid,
            msg && msg->type == MSGPACK_OBJECT_STR ? (int)msg->via.str.size : 2,
            msg && msg->type == MSGPACK_OBJECT_STR ? msg->via.str.ptr : "ok");
  }
  if (m.error->type != MSGPACK_OBJECT_NIL) {
    check_error(m.error, m.result, m.msgid, 0);
    if (r->setup >= 0)
      c->setup_failed = 1;
  } else if (r->setup >= 0 && r->setup < H_COUNT) {
    c->handles[r->setup] = first_handle(m.result);
    if (c->handles[r->setup] == 0)
      c->setup_failed = 1;
  } else if (r->setup == H_RING) {
    const msgpack_object *e = proto_map_get(m.result, "entries");
    const msgpack_object *sz = proto_map_get(m.result, "size");
    FUZZ_CHECK(e != NULL && e->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                   e->via.u64 == c->E && sz != NULL &&
                   sz->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                   sz->via.u64 == proto_ring_size(c->E),
               "ring.open's result does not say entries %u, size %zu", c->E,
               proto_ring_size(c->E));
    c->ring_open = 1;
  }
  msgpack_zone_destroy(&zone);
  check_order(c, r->no);
}

static void read_some(client_t *c)
{
  for (;;) {
    c->in = grow(c->in, &c->in_cap, c->in_len + 65536, 1);
    ssize_t n =
        recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      break;
    if (n < 0)
      FUZZ_CHECK(errno == ECONNRESET, "recv: %s", strerror(errno));
    if (n <= 0) {
      c->eof = 1;
      break;
    }
    c->in_len += (size_t)n;
  }
  /* What the daemon published on the ring before these replies. */
  observe(c);
  size_t off = 0;
  for (;;) {
    size_t need;
    const char *reason = NULL;
    long long r = proto_frame_scan(&G.reply_limits, c->in + off,
                                   c->in_len - off, &need, &reason);
    FUZZ_CHECK(r >= 0, "the daemon sent bytes that are not a frame: %s",
               reason);
    if (r == 0)
      break;
    socket_message(c, c->in + off, (size_t)r);
    off += (size_t)r;
  }
  memmove(c->in, c->in + off, c->in_len - off);
  c->in_len -= off;
  if (c->eof) {
    FUZZ_CHECK(c->in_len == 0, "the connection ended inside a reply");
    FUZZ_CHECK(c->justified,
               "the daemon closed the session, but the client broke neither "
               "the ring nor the socket's protocol (sq_tail %u, sq_head %u, "
               "cq_head %u, cq_tail %u, entries %u)",
               c->tail, c->d_sqh, c->head, c->d_cqt, c->E);
  }
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
  client_t *c = h->data;

  if (status < 0) {
    c->eof = 1;
  } else {
    if (events & UV_WRITABLE)
      write_some(c);
    if (events & (UV_READABLE | UV_DISCONNECT))
      read_some(c);
  }
  poll_update(c);
}

static void poll_update(client_t *c)
{
  int want = 0;

  if (c->poll_closing)
    return;
  if (!c->eof) {
    want = UV_READABLE;
    if (c->out_head < c->nout && !c->write_broken)
      want |= UV_WRITABLE;
  }
  if (want == c->poll_events)
    return;
  c->poll_events = want;
  if (want == 0)
    uv_poll_stop(&c->poll);
  else
    uv_poll_start(&c->poll, want, poll_cb);
}

static void poll_close_cb(uv_handle_t *h)
{
  ((client_t *)h->data)->poll_closed = 1;
}

/* ------------------------------------------------------------- the ring */

/* A slot's bytes, judged as the daemon must (transport_ring.c's run_one). */
typedef struct {
  int bad; /* BAD_* */
  uint32_t msgid;
  uint64_t after;
  int marker; /* a request answered at dispatch: no ring takes its method */
} slot_view_t;

static slot_view_t slot_judge(const ring_sqe_t *e)
{
  slot_view_t v = {.after = e->after};
  const char *reason = NULL;
  size_t need = 0;
  msgpack_zone zone;
  proto_msg_t m;
  char name[64];

  if (e->len == 0 || e->len > RING_SQE_DATA) {
    v.bad = BAD_LEN;
    return v;
  }
  if (proto_frame_scan(&G.d.cfg.limits, e->data, e->len, &need, &reason) !=
      (long long)e->len) {
    v.bad = BAD_BYTES;
    return v;
  }
  FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
  if (proto_msg_decode(e->data, e->len, &zone, &m, &reason) != 0 ||
      m.type != PROTO_REQUEST) {
    v.bad = BAD_BYTES;
  } else {
    v.msgid = m.msgid;
    if (m.method_len >= sizeof(name)) {
      v.marker = 1;
    } else {
      memcpy(name, m.method, m.method_len);
      name[m.method_len] = '\0';
      v.marker = !proto_ring_method(name) || strlen(name) != m.method_len;
    }
  }
  msgpack_zone_destroy(&zone);
  return v;
}

static ring_sqe_t *slot(client_t *c, uint32_t idx)
{
  return &c->sq[idx & (c->E - 1)];
}

/* The daemon took submission @p idx: what it copied is the slot now (the
 * client writes nothing while the loop runs). */
static void taken(client_t *c, uint32_t idx)
{
  ring_sqe_t e;
  slot_view_t v;

  memcpy(&e, slot(c, idx), sizeof(e));
  v = slot_judge(&e);
  if (G.verbose)
    fprintf(stderr, "  taken %u: len %u after %llu %s msgid %u\n", idx, e.len,
            (unsigned long long)e.after,
            v.bad == BAD_LEN     ? "BAD-LEN"
            : v.bad == BAD_BYTES ? "BAD-BYTES"
                                 : "request",
            v.msgid);
  if (v.bad != BAD_NONE) {
    c->bad_taken = v.bad;
    c->bad_idx = idx;
    c->bad_after = e.after;
    c->justified = 1;
    c->why =
        v.bad == BAD_LEN ? "a submission's length" : "a submission's bytes";
    if (v.bad == BAD_LEN)
      FUZZ_CHECK(G.d.nsessions == 0,
                 "the daemon took submission %u of length %u, but the "
                 "session goes on",
                 idx, e.len);
    return;
  }
  if (v.msgid < 1000 || v.msgid - 1000 >= 65536 ||
      (c->seen_ids[(v.msgid - 1000) / 8] & (1u << (v.msgid % 8))))
    c->dup_msgid = 1;
  else
    c->seen_ids[(v.msgid - 1000) / 8] |= (uint8_t)(1u << (v.msgid % 8));
  c->rreqs = grow(c->rreqs, &c->rreqs_cap, c->nrreqs + 1, sizeof(*c->rreqs));
  c->rreqs[c->nrreqs++] =
      (rreq_t){.msgid = v.msgid, .idx = idx, .after = e.after};
  c->n_owed++;
}

static uint64_t owed(const client_t *c)
{
  return c->n_owed;
}

/* The answer @p m to a ring request came @p where (DEST_CQ: a completion;
 * DEST_SOCKET: on the socket): the unanswered ring request it answers, the
 * daemon having said so when it ran it (unknown only once the session is
 * gone), checked; NULL if none. */
static rreq_t *ring_answer(client_t *c, const proto_msg_t *m, int where)
{
  session_t *s = live_session();
  rreq_t *r = NULL;

  for (size_t i = c->rr_open; i < c->nrreqs && r == NULL; i++)
    if (c->rreqs[i].msgid == m->msgid && !c->rreqs[i].answered &&
        (c->rreqs[i].dest == where ||
         (c->rreqs[i].dest == DEST_UNKNOWN && s == NULL)))
      r = &c->rreqs[i];
  if (r == NULL)
    return NULL;
  r->answered = 1;
  c->n_owed--;
  if (r->dest == DEST_CQ)
    c->owed_cq--;
  while (c->rr_open < c->nrreqs && c->rreqs[c->rr_open].answered)
    c->rr_open++;
  /* Its marker, if it is one (marks are in index order). */
  for (size_t lo = c->marks_open, hi = c->nmarks; lo < hi;) {
    size_t mid = lo + (hi - lo) / 2;
    int32_t d = (int32_t)(c->marks[mid].idx - r->idx);
    if (d == 0) {
      c->marks[mid].answered = 1;
      break;
    }
    if (d < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  while (c->marks_open < c->nmarks && c->marks[c->marks_open].answered)
    c->marks_open++;
  if (m->error->type != MSGPACK_OBJECT_NIL)
    check_error(m->error, m->result, m->msgid, where == DEST_CQ);
  /* It ran only after its `after` socket requests were read. */
  if (s != NULL)
    FUZZ_CHECK(r->after <= s->sock_requests,
               "submission %u (after %llu) was answered with only %llu "
               "socket requests read",
               r->idx, (unsigned long long)r->after,
               (unsigned long long)s->sock_requests);
  FUZZ_CHECK(r->after <= c->sock_queued,
             "submission %u (after %llu) was answered with only %llu socket "
             "requests written",
             r->idx, (unsigned long long)r->after,
             (unsigned long long)c->sock_queued);
  return r;
}

static void completion(client_t *c, uint32_t idx)
{
  const ring_cqe_t *e = &c->cq[idx & (c->E - 1)];
  uint8_t data[RING_CQE_DATA];
  uint32_t len = e->len;
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = NULL;
  size_t need = 0;
  rreq_t *r;

  FUZZ_CHECK(len > 0 && len <= RING_CQE_DATA,
             "completion %u has a length of %u bytes", idx, len);
  FUZZ_CHECK(e->flags == 0, "completion %u has flags %#x", idx, e->flags);
  memcpy(data, e->data, len);
  FUZZ_CHECK(proto_frame_scan(&G.reply_limits, data, len, &need, &reason) ==
                 (long long)len,
             "completion %u (%u bytes) is not one whole message: %s", idx, len,
             reason != NULL ? reason : "short or longer");
  FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
  FUZZ_CHECK(proto_msg_decode(data, len, &zone, &m, &reason) == 0,
             "completion %u does not decode: %s", idx, reason);
  FUZZ_CHECK(m.type == PROTO_RESPONSE, "completion %u is a message of type %d",
             idx, m.type);
  if ((r = ring_answer(c, &m, DEST_CQ)) == NULL) {
    int on_socket = 0, elsewhere = 0;
    for (size_t i = 0; i < c->nsreqs; i++)
      on_socket |= c->sreqs[i].msgid == m.msgid && !c->sreqs[i].answered;
    for (size_t i = c->rr_open; i < c->nrreqs; i++)
      elsewhere |= c->rreqs[i].msgid == m.msgid && !c->rreqs[i].answered;
    FUZZ_CHECK(0,
               "completion %u answers msgid %u, which no unanswered ring "
               "request whose answer the ring owes has%s",
               idx, m.msgid,
               elsewhere   ? " (a ring request the daemon had not run, or "
                             "answered on the socket, has it)"
               : on_socket ? " (a socket request has it: answered on the ring)"
                           : "");
  }
  if (G.verbose) {
    const msgpack_object *msg = proto_map_get(m.error, "message");
    fprintf(stderr, "  completion %u: msgid %u: %.*s\n", idx, m.msgid,
            msg && msg->type == MSGPACK_OBJECT_STR ? (int)msg->via.str.size : 2,
            msg && msg->type == MSGPACK_OBJECT_STR ? msg->via.str.ptr : "ok");
  }
  msgpack_zone_destroy(&zone);
}

/* Read what the daemon wrote to the ring since the last look. */
static void observe(client_t *c)
{
  uint32_t v, nsqh, ncqt, adv, room;
  ring_counts_t rc = {0};
  uint64_t ent, runs, ovf;
  session_t *s;

  if (c->hdr == NULL || !c->ring_open)
    return;
  /* sq_head */
  v = atomic_load_explicit(&c->hdr->sq_head, memory_order_acquire);
  nsqh = c->sqh_scribbled && v == c->sqh_sentinel ? c->d_sqh : v;
  if (nsqh != c->d_sqh) {
    c->sqh_scribbled = 0;
    adv = nsqh - c->d_sqh;
    room = c->tail - c->d_sqh;
    FUZZ_CHECK(room <= c->E,
               "sq_head moved from %u to %u, though sq_tail %u is more than "
               "%u ahead",
               c->d_sqh, nsqh, c->tail, c->E);
    FUZZ_CHECK(adv <= room, "sq_head moved from %u to %u, past sq_tail %u",
               c->d_sqh, nsqh, c->tail);
    FUZZ_CHECK(!c->bad_taken,
               "sq_head moved from %u to %u, past submission %u, which broke "
               "the ring",
               c->d_sqh, nsqh, c->bad_idx);
    for (uint32_t i = 0; i < adv; i++) {
      FUZZ_CHECK(!c->bad_taken,
                 "the daemon took submission %u after submission %u broke "
                 "the ring",
                 c->d_sqh + i, c->bad_idx);
      taken(c, c->d_sqh + i);
    }
    c->d_sqh = nsqh;
    c->d_seen_changes++;
  }
  /* The runs since (each reserved a completion, or not), as the daemon
   * counts them. */
  s = live_session();
  if (s != NULL && s->ring != NULL) {
    ring_counts(s, &rc);
    ent = rc.entries;
    runs = rc.taken;
    ovf = rc.overflowed;
    FUZZ_CHECK(ent == c->E && runs >= c->runs_seen,
               "session.info's ring: entries %llu, %llu submissions run (%llu "
               "before)",
               (unsigned long long)ent, (unsigned long long)runs,
               (unsigned long long)c->runs_seen);
    for (; c->runs_seen < runs; c->runs_seen++) {
      int cq = (uint32_t)(c->cq_res - c->head) < c->E;
      if (c->run_next < c->nrreqs) {
        c->rreqs[c->run_next++].dest = cq ? DEST_CQ : DEST_SOCKET;
        c->owed_cq += cq;
      } else {
        FUZZ_CHECK(c->bad_taken == BAD_BYTES && !c->bad_ran,
                   "the daemon ran %llu submissions, but took only %zu",
                   (unsigned long long)runs, c->nrreqs);
        c->bad_ran = 1;
      }
      if (cq)
        c->cq_res++;
      else
        c->ovf_model++;
    }
    FUZZ_CHECK(ovf == c->ovf_model,
               "%llu submissions answered on the socket, but %llu found the "
               "completions full (cq_head %u, entries %u)",
               (unsigned long long)ovf, (unsigned long long)c->ovf_model,
               c->head, c->E);
  }
  /* cq_tail */
  v = atomic_load_explicit(&c->hdr->cq_tail, memory_order_acquire);
  ncqt = c->cqt_scribbled && v == c->cqt_sentinel ? c->d_cqt : v;
  if (ncqt != c->d_cqt) {
    uint64_t o = owed(c);
    uint32_t from = c->d_cqt;

    c->cqt_scribbled = 0;
    adv = ncqt - c->d_cqt;
    FUZZ_CHECK(adv <= o,
               "cq_tail moved from %u to %u, but only %llu answers are owed",
               c->d_cqt, ncqt, (unsigned long long)o);
    FUZZ_CHECK(s == NULL || adv <= c->owed_cq,
               "cq_tail moved from %u to %u, but only %llu completions are "
               "reserved",
               c->d_cqt, ncqt, (unsigned long long)c->owed_cq);
    if (c->head_clean)
      FUZZ_CHECK(ncqt - c->head <= c->E,
                 "cq_tail %u is more than %u ahead of cq_head %u", ncqt, c->E,
                 c->head);
    /* More than a ring at once overwrote what was not read (only where
     * the client's cq_head let it: checked above). */
    if (adv > c->E)
      from = ncqt - c->E;
    for (uint32_t i = from; i != ncqt; i++)
      completion(c, i);
    /* cq_wait: asleep (either value: the socket doorbell) becomes woken
     * at the first completion. */
    v = atomic_load_explicit(&c->hdr->cq_wait, memory_order_acquire);
    if (c->cq_wait == RING_ASLEEP || c->cq_wait == RING_ASLEEP_SOCKET) {
      FUZZ_CHECK(v == RING_WOKEN,
                 "completions published with cq_wait %u, which is %u",
                 c->cq_wait, v);
      c->cq_wait = RING_WOKEN;
      c->wakes_owed++;
    }
    c->d_cqt = ncqt;
    c->d_seen_changes++;
  }
  if (s != NULL && s->ring != NULL)
    FUZZ_CHECK((uint32_t)rc.completed == c->d_cqt,
               "session.info's ring: %llu completions, cq_tail %u",
               (unsigned long long)rc.completed, c->d_cqt);
  v = atomic_load_explicit(&c->hdr->cq_wait, memory_order_acquire);
  FUZZ_CHECK(v == c->cq_wait, "cq_wait is %u, the client left it %u", v,
             c->cq_wait);
  if (!G.skip_inflight && (s = live_session()) != NULL)
    FUZZ_CHECK(s->inflight <= G.d.cfg.max_inflight,
               "inflight: the session has %u calls in flight, "
               "--max-inflight is %u",
               s->inflight, G.d.cfg.max_inflight);
}

/* ----------------------------------------------------- running the loop */

static void watchdog_cb(uv_timer_t *t)
{
  (void)t;
}

static void run_nowait(client_t *c)
{
  poll_update(c);
  uv_run(&G.loop, UV_RUN_NOWAIT);
  observe(c);
}

/* One iteration of the loop that blocks for at most about @p ms. (The
 * timer repeats: one that fired before the poll would leave it to block.) */
static void run_block(uint64_t ms)
{
  uv_update_time(&G.loop);
  uv_timer_start(&G.watchdog, watchdog_cb, ms, ms);
  uv_run(&G.loop, UV_RUN_ONCE);
  uv_timer_stop(&G.watchdog);
}

static void run_once(client_t *c, uint64_t ms)
{
  poll_update(c);
  run_block(ms);
  observe(c);
}

static int setup_answered(const client_t *c)
{
  for (size_t i = 0; i < c->nsreqs; i++)
    if (!c->sreqs[i].answered)
      return 0;
  return 1;
}

/* ------------------------------------------------------- building requests */

/* The methods a ring takes, and markers (answered at dispatch). Params:
 * B a buffer, S a stream, E an event, M the shared buffer, K a kernel (there
 * is none: any handle), u an offset or length, v a byte, G dims, N nil,
 * A launch args. */
static const struct {
  const char *name;
  const char *sig;
} ring_methods[] = {
    {"event.query", "E"},
    {"event.record", "E"},
    {"event.record", "ES"},
    {"event.synchronize", "E"},
    {"kernel.launch", "KGGNSA"},
    {"mem.copy", "BuBuu"},
    {"mem.copy_async", "BuBuuS"},
    {"mem.memset", "Buuv"},
    {"mem.memset_async", "BuuvS"},
    {"mem.read_shm", "BuMuu"},
    {"mem.read_shm_async", "BuMuuS"},
    {"mem.write_shm", "BuMuu"},
    {"mem.write_shm_async", "BuMuuS"},
    {"stream.query", "S"},
    {"stream.synchronize", "S"},
    {"mem.memset_async", "BuuvS"},
    /* Markers: methods no ring takes, and none at all. */
    {"ping", ""},
    {"ring.open", "u"},
    {"mem.free", "B"},
    {"no.such_method", ""},
};
#define N_RING_METHODS (sizeof(ring_methods) / sizeof(ring_methods[0]))

static void pack_handle(client_t *c, msgpack_packer *pk, input_t *in, int kind)
{
  uint8_t sel = in_u8(in);

  switch (sel & 7) {
  case 0: /* the handle of the param's own kind */
  case 1:
  case 2:
    msgpack_pack_uint64(pk, c->handles[kind == 'B'   ? ((sel >> 3) & 1)
                                       : kind == 'S' ? ((sel & 8) ? H_D : H_S)
                                       : kind == 'E' ? H_E
                                       : kind == 'M' ? H_M
                                                     : H_A]);
    return;
  case 3:
  case 4: /* any of them */
    msgpack_pack_uint64(pk, c->handles[(sel >> 3) % H_COUNT]);
    return;
  case 5: /* forged */
    msgpack_pack_uint64(pk, in_u64(in));
    return;
  case 6:
    msgpack_pack_nil(pk);
    return;
  default:
    proto_pack_cstr(pk, "x");
    return;
  }
}

static uint64_t fuzz_len(input_t *in)
{
  uint8_t b = in_u8(in);

  if (b < 0xc0)
    return (uint64_t)(b % 65) * 64; /* 0..4096 */
  if (b < 0xf0)
    return (uint64_t)BUF_SIZE + (b & 0x3f) - 32; /* near the end */
  return in_u64(in);
}

/* A valid request of the table, msgid @p msgid, into @p b. The method byte's
 * bit 6 drops the last param, bit 7 adds one (EPARAMS). */
static void build_request(client_t *c, buf_t *b, input_t *in, uint32_t msgid)
{
  uint8_t mb = in_u8(in);
  unsigned k = (mb & 0x3f) % N_RING_METHODS;
  const char *sig = ring_methods[k].sig;
  uint32_t n = (uint32_t)strlen(sig);
  uint32_t np = n;

  if ((mb & 0x40) && np > 0)
    np--;
  if (mb & 0x80)
    np++;
  proto_pack_request(&b->pk, msgid, ring_methods[k].name, np);
  for (uint32_t i = 0; i < np; i++) {
    char t = i < n ? sig[i] : 'N';
    switch (t) {
    case 'B':
    case 'S':
    case 'E':
    case 'M':
    case 'K':
      pack_handle(c, &b->pk, in, t);
      break;
    case 'u':
      msgpack_pack_uint64(&b->pk, fuzz_len(in));
      break;
    case 'v': {
      uint8_t v = in_u8(in);
      msgpack_pack_uint32(&b->pk, v >= 0xf8 ? 256 + v : v);
    } break;
    case 'G':
      msgpack_pack_uint32(&b->pk, 1 + in_u8(in) % 4);
      break;
    case 'A':
      msgpack_pack_array(&b->pk, 0);
      break;
    default:
      msgpack_pack_nil(&b->pk);
      break;
    }
  }
}

/* An `after` for a slot: the socket requests written (as a client does),
 * or near it, or anything. */
static uint64_t fuzz_after(client_t *c, input_t *in)
{
  uint8_t a = in_u8(in);

  if ((a & 0xc0) != 0xc0)
    return c->sock_queued;
  if (a & 0x20)
    return in_u64(in);
  uint64_t v = c->sock_queued + (a & 0x1f);
  return v >= 8 ? v - 8 : 0;
}

/* Which slot index an op writes: the next to write, sq_tail, or near it. */
static uint32_t pick_index(client_t *c, input_t *in)
{
  uint8_t s = in_u8(in);

  switch (s & 3) {
  case 0:
  case 1:
    return c->prep;
  case 2:
    return c->tail;
  default:
    return c->tail + (uint32_t)(int32_t)(int8_t)in_u8(in);
  }
}

static void note_write(client_t *c, uint32_t idx)
{
  /* The slot of a published submission not yet taken (whatever index the
   * client meant): what runs changes. */
  if (((idx - c->d_sqh) & (c->E - 1)) < (uint32_t)(c->tail - c->d_sqh) &&
      c->tail_clean)
    c->rewrote_untaken = 1;
  if (idx == c->prep)
    c->prep++;
}

static void write_request(client_t *c, input_t *in, uint32_t idx)
{
  ring_sqe_t *e = slot(c, idx);
  buf_t b;

  buf_init(&b);
  build_request(c, &b, in, c->next_msgid++);
  FUZZ_CHECK(b.sb.size <= RING_SQE_DATA, "a built request of %zu bytes",
             b.sb.size);
  memcpy(e->data, b.sb.data, b.sb.size);
  e->len = (uint32_t)b.sb.size;
  e->flags = 0;
  e->after = fuzz_after(c, in);
  msgpack_sbuffer_destroy(&b.sb);
  note_write(c, idx);
}

static void write_raw(client_t *c, input_t *in, uint32_t idx)
{
  ring_sqe_t *e = slot(c, idx);
  uint16_t len = in_u16(in) % 520; /* 0 and past RING_SQE_DATA too */
  uint8_t fl = in_u8(in);
  size_t n = len < RING_SQE_DATA ? len : RING_SQE_DATA;

  for (size_t i = 0; i < n; i++)
    e->data[i] = in_u8(in);
  e->len = len;
  e->flags = fl & 0x80 ? in_u32(in) : 0;
  e->after = fuzz_after(c, in);
  note_write(c, idx);
}

static void set_tail(client_t *c, uint32_t t)
{
  uint32_t old = c->tail;

  if ((uint32_t)(t - c->d_sqh) > c->E) {
    c->tail_clean = 0;
    c->justified = 1;
    c->why = "sq_tail";
  } else if (c->tail_clean) {
    if ((uint32_t)(t - c->d_sqh) < (uint32_t)(old - c->d_sqh)) {
      c->tail_retracted = 1;
    } else if (order_on(c)) {
      /* Forward: the order property's records. */
      for (uint32_t i = old; i != t; i++) {
        slot_view_t v = slot_judge(slot(c, i));
        if (v.after > c->pub_after_max)
          c->pub_after_max = v.after;
        if (v.bad == BAD_NONE && v.marker) {
          c->marks =
              grow(c->marks, &c->marks_cap, c->nmarks + 1, sizeof(*c->marks));
          c->marks[c->nmarks++] = (mark_t){.idx = i,
                                           .eff_after = c->pub_after_max,
                                           .pub_sock = c->sock_queued};
        }
      }
    }
  }
  c->tail = t;
  if ((uint32_t)(t - c->prep) <= c->E)
    c->prep = t;
  atomic_store_explicit(&c->hdr->sq_tail, t, memory_order_seq_cst);
}

static void set_head(client_t *c, uint32_t h)
{
  if ((uint32_t)(h - c->head) > (uint32_t)(c->d_cqt - c->head)) {
    c->head_clean = 0;
    c->justified = 1;
    c->why = "cq_head";
  }
  c->head = h;
  atomic_store_explicit(&c->hdr->cq_head, h, memory_order_seq_cst);
}

/* As conn_ring_kick_wanted(): the daemon sleeps and something waits. */
static int kick_wanted(const client_t *c)
{
  return c->kick_untrusted ||
         (atomic_load_explicit(&c->hdr->sq_kick, memory_order_seq_cst) != 0 &&
          c->d_sqh != c->tail);
}

/* ---------------------------------------------------------- the program */

enum {
  OP_REQ,      /* a valid request into a slot */
  OP_RAW,      /* raw bytes, a length, flags into a slot */
  OP_AFTER,    /* set a slot's `after` */
  OP_PUBLISH,  /* publish sq_tail */
  OP_HEAD,     /* publish cq_head */
  OP_REWRITE,  /* rewrite a published slot */
  OP_KICK,     /* ring.kick */
  OP_SOCK,     /* a request on the socket */
  OP_RUN,      /* uv_run NOWAIT, 1..8 times */
  OP_WAIT,     /* uv_run ONCE, at most 1 ms */
  OP_CQWAIT,   /* set cq_wait */
  OP_SCRIBBLE, /* overwrite the daemon's own fields */
  OP_GARBAGE,  /* bytes that break the socket's protocol */
  OP_BURST,    /* requests written and published, then kick if wanted */
  OP_COUNT
};

static void sock_op(client_t *c, input_t *in)
{
  uint8_t w = in_u8(in);
  uint32_t msgid = c->next_msgid++;
  int fd = -1;
  buf_t b;

  buf_init(&b);
  switch (w % 10) {
  case 0:
  default:
    proto_pack_request(&b.pk, msgid, "ping", 0);
    break;
  case 1:
    proto_pack_request(&b.pk, msgid, "session.info", 0);
    break;
  case 2:
    proto_pack_request(&b.pk, msgid, "mem.free", 1);
    msgpack_pack_uint64(&b.pk, c->handles[(w >> 4) & 1]);
    break;
  case 3:
    proto_pack_request(&b.pk, msgid, "stream.destroy", 1);
    msgpack_pack_uint64(&b.pk, c->handles[H_S]);
    break;
  case 4:
    proto_pack_request(&b.pk, msgid, "event.destroy", 1);
    msgpack_pack_uint64(&b.pk, c->handles[H_E]);
    break;
  case 5:
    proto_pack_request(&b.pk, msgid, "shm.free", 1);
    msgpack_pack_uint64(&b.pk, c->handles[H_M]);
    break;
  case 6:
    proto_pack_request(&b.pk, msgid, "stream.synchronize", 1);
    msgpack_pack_uint64(&b.pk, c->handles[(w & 0x10) ? H_D : H_S]);
    break;
  case 7: /* a second ring: EEXIST */
    fd = make_memfd(RING_MEMFD, proto_ring_size(c->E),
                    F_SEAL_SHRINK | F_SEAL_GROW);
    proto_pack_request(&b.pk, msgid, "ring.open", 1);
    msgpack_pack_uint32(&b.pk, c->E);
    break;
  case 8:
    proto_pack_request(&b.pk, msgid, "mem.memset", 4);
    msgpack_pack_uint64(&b.pk, c->handles[(w >> 4) & 1]);
    msgpack_pack_uint64(&b.pk, 0);
    msgpack_pack_uint64(&b.pk, fuzz_len(in));
    msgpack_pack_uint32(&b.pk, 7);
    break;
  case 9:
    proto_pack_request(&b.pk, msgid, "stream.query", 1);
    msgpack_pack_uint64(&b.pk, c->handles[H_S]);
    break;
  }
  send_request(c, &b, msgid, fd, -1);
}

static void scribble(client_t *c, input_t *in)
{
  uint8_t w = in_u8(in);

  if (w & 1) {
    c->sqh_sentinel = c->d_sqh ^ 0x80000000u;
    c->sqh_scribbled = 1;
    atomic_store(&c->hdr->sq_head, c->sqh_sentinel);
  }
  if (w & 2) {
    c->cqt_sentinel = c->d_cqt ^ 0x80000000u;
    c->cqt_scribbled = 1;
    atomic_store(&c->hdr->cq_tail, c->cqt_sentinel);
  }
  if (w & 4) {
    atomic_store(&c->hdr->sq_kick, in_u8(in));
    c->kick_untrusted = 1;
  }
  if (w & 8) {
    c->hdr->magic = in_u32(in);
    c->hdr->version = in_u32(in);
    c->hdr->entries = in_u32(in);
    c->hdr->slot = in_u32(in);
  }
}

static void burst(client_t *c, input_t *in)
{
  uint32_t n = 1 + in_u8(in) % (2 * c->E);
  uint32_t t = c->tail;

  if (!c->tail_clean)
    return;
  for (uint32_t i = 0; i < n && (uint32_t)(t - c->d_sqh) < c->E; i++, t++) {
    c->prep = t;
    write_request(c, in, t);
  }
  set_tail(c, t);
  if (kick_wanted(c))
    send_kick(c);
}

static void op(client_t *c, input_t *in)
{
  uint8_t o = in_u8(in) % OP_COUNT, m;

  switch (o) {
  case OP_REQ:
    write_request(c, in, pick_index(c, in));
    break;
  case OP_RAW:
    write_raw(c, in, pick_index(c, in));
    break;
  case OP_AFTER: {
    uint32_t idx = pick_index(c, in);
    slot(c, idx)->after = fuzz_after(c, in);
    note_write(c, idx);
  } break;
  case OP_PUBLISH:
    m = in_u8(in);
    switch (m % 8) {
    case 4:
      set_tail(c, c->prep);
      break;
    case 5:
      set_tail(c, c->tail + in_u8(in) % (c->E + 2));
      break;
    case 6:
      set_tail(c, in_u32(in));
      break;
    case 7:
      set_tail(c, c->tail - in_u8(in) % 4);
      break;
    default:
      set_tail(c, c->tail + 1);
      break;
    }
    if (m & 0x80 && kick_wanted(c))
      send_kick(c);
    break;
  case OP_HEAD:
    m = in_u8(in);
    switch (m % 8) {
    case 3:
      if (c->head != c->d_cqt)
        set_head(c, c->head + 1);
      break;
    case 4:
      set_head(c, in_u32(in));
      break;
    case 5:
      set_head(c, c->d_cqt - in_u8(in) % (2 * c->E));
      break;
    case 6:
      set_head(c, c->d_cqt + 1 + in_u8(in) % 4);
      break;
    case 7:
      break;
    default:
      set_head(c, c->d_cqt);
      break;
    }
    if (m & 0x80 && kick_wanted(c))
      send_kick(c);
    break;
  case OP_REWRITE: {
    uint8_t w = in_u8(in);
    uint32_t span = c->tail - c->d_sqh, idx;
    if (span != 0 && span <= c->E && !(w & 1))
      idx = c->d_sqh + in_u8(in) % span;
    else
      idx = c->d_sqh - 1 - in_u8(in) % c->E;
    if (w & 2)
      write_raw(c, in, idx);
    else
      write_request(c, in, idx);
  } break;
  case OP_KICK:
    if (!(in_u8(in) & 1) || kick_wanted(c))
      send_kick(c);
    break;
  case OP_SOCK:
    sock_op(c, in);
    break;
  case OP_RUN:
    for (unsigned n = 1 + in_u8(in) % 8; n > 0 && !c->eof; n--)
      run_nowait(c);
    break;
  case OP_WAIT:
    run_once(c, 1);
    break;
  case OP_CQWAIT:
    m = in_u8(in);
    c->cq_wait = m < 0x60   ? RING_ASLEEP
                 : m < 0x80 ? RING_ASLEEP_SOCKET
                 : m < 0xf0 ? RING_AWAKE
                            : in_u32(in);
    atomic_store(&c->hdr->cq_wait, c->cq_wait);
    break;
  case OP_SCRIBBLE:
    scribble(c, in);
    break;
  case OP_GARBAGE:
    queue_bytes(c, "\xc1", 1, -1);
    c->justified = 1;
    c->sock_broken = 1;
    c->why = "the socket's bytes";
    break;
  case OP_BURST:
    burst(c, in);
    break;
  }
}

/* ------------------------------------------------------------ the drain */

/* Can sq_head - E .. the head never be valid again? (cq_tail grows by the
 * answers owed at most.) */
static int head_lost(const client_t *c)
{
  uint32_t behind = c->d_cqt - c->head, ahead = c->head - c->d_cqt;

  return behind > c->E && ahead > owed(c);
}

static int all_done(const client_t *c)
{
  if (c->d_sqh != c->tail || owed(c) != 0 || c->wakes_got != c->wakes_owed)
    return 0;
  for (size_t i = 0; i < c->nsreqs; i++)
    if (!c->sreqs[i].answered)
      return 0;
  return 1;
}

/* The idle property, before the drain reads anything: with --busy-poll 0
 * and no device work, a ring whose state does not change for 64 loop
 * iterations keeps no idle handle running (the loop would not block). */
static void quiet_check(client_t *c)
{
  int runs = 0;

  if (G.skip_idle || G.d.cfg.busy_poll_us != 0)
    return;
  for (int i = 0; i < 72 && !c->eof; i++) {
    uint64_t changes = c->d_seen_changes, msgs = c->sock_msgs;
    run_nowait(c);
    if (c->d_seen_changes == changes && c->sock_msgs == msgs &&
        exec_outstanding() == 0 && uv_is_active((uv_handle_t *)&G.d.loop_awake))
      runs++;
    else
      runs = 0;
  }
  FUZZ_CHECK(runs < 64,
             "idle: the ring's state has not changed for %d loop iterations, "
             "yet it keeps the loop from blocking (--busy-poll 0; sq_tail %u, "
             "sq_head %u, cq_head %u, cq_tail %u, %llu answers owed, entries "
             "%u, sq_kick %u)",
             runs, c->tail, c->d_sqh, c->head, c->d_cqt,
             (unsigned long long)owed(c), c->E, atomic_load(&c->hdr->sq_kick));
}

static void drain(client_t *c)
{
  uint64_t max_after = 0, deadline = now_ns() + DRAIN_NS;
  int must_eof = 0, stuck = 0, idle_runs = 0, quiet = 0;
  uint64_t progress;
  uint64_t changes = c->d_seen_changes, msgs = c->sock_msgs;
  const char *cause = "";

  quiet_check(c);
  if (c->eof)
    return;
  /* The largest `after` of what the daemon took and did not answer, and of
   * what is published and not taken. */
  for (size_t i = 0; i < c->nrreqs; i++)
    if (!c->rreqs[i].answered && c->rreqs[i].after > max_after)
      max_after = c->rreqs[i].after;
  if (c->bad_taken && c->bad_after > max_after)
    max_after = c->bad_after;
  if (c->tail_clean)
    for (uint32_t i = c->d_sqh; i != c->tail; i++)
      if (slot(c, i)->after > max_after)
        max_after = slot(c, i)->after;
  if (max_after > c->sock_queued + 64)
    stuck = 1;
  while (!stuck && c->sock_queued < max_after) {
    buf_t b;
    uint32_t msgid = c->next_msgid++;
    buf_init(&b);
    proto_pack_request(&b.pk, msgid, "ping", 0);
    send_request(c, &b, msgid, -1, -1);
  }

  /* Cases where the daemon must close the session. */
  if (c->sock_broken) {
    must_eof = 1;
    cause = "bytes on the socket that are not a message";
  } else if (c->bad_taken == BAD_LEN) {
    must_eof = 1;
    cause = "a submission's length";
  } else if (c->bad_taken == BAD_BYTES && !stuck) {
    must_eof = 1;
    cause = "a submission that is not one request";
  } else if (!stuck && (uint32_t)(c->tail - c->d_sqh) > c->E) {
    must_eof = 1;
    cause = "sq_tail more than a ring ahead";
  } else if (!stuck && !c->bad_taken && head_lost(c) &&
             (uint32_t)(c->tail - c->d_sqh) < c->E) {
    /* One more submission, so that the daemon looks at cq_head. */
    buf_t b;
    ring_sqe_t *e = slot(c, c->tail);
    buf_init(&b);
    proto_pack_request(&b.pk, c->next_msgid++, "ping", 0);
    memcpy(e->data, b.sb.data, b.sb.size);
    e->len = (uint32_t)b.sb.size;
    e->flags = 0;
    e->after = c->sock_queued;
    msgpack_sbuffer_destroy(&b.sb);
    c->prep = c->tail;
    set_tail(c, c->tail + 1);
    must_eof = 1;
    cause = "a cq_head never among the completions";
  }
  if (G.verbose)
    fprintf(stderr,
            "  drain: must_eof %d (%s) stuck %d justified %d (%s) tail %u "
            "sq_head %u head %u cq_tail %u\n",
            must_eof, cause, stuck, c->justified, c->why ? c->why : "-",
            c->tail, c->d_sqh, c->head, c->d_cqt);

  while (!c->eof && now_ns() < deadline) {
    if (!must_eof && c->head != c->d_cqt)
      set_head(c, c->d_cqt); /* read them all */
    if (kick_wanted(c))
      send_kick(c);
    if (!must_eof && all_done(c))
      break;
    /* Nothing to wait for when nothing is required: stop once it is
     * quiet. */
    if (!must_eof && (c->justified || stuck) && quiet >= 16)
      break;
    progress = c->d_seen_changes + c->sock_msgs;
    run_once(c, 1);
    if (progress == c->d_seen_changes + c->sock_msgs && exec_outstanding() == 0)
      quiet++;
    else
      quiet = 0;
    /* The idle property: nothing changes, and the loop would not block.
     * An answer on the socket is a change too: a loop that works through
     * a burst of socket requests, a bounded number a turn, stays awake
     * for the rest (a thousand ring.open found it, ring idle meanwhile). */
    if (c->d_seen_changes == changes && c->sock_msgs == msgs &&
        exec_outstanding() == 0 && G.d.cfg.busy_poll_us == 0 &&
        uv_is_active((uv_handle_t *)&G.d.loop_awake))
      idle_runs++;
    else
      idle_runs = 0;
    changes = c->d_seen_changes;
    msgs = c->sock_msgs;
    FUZZ_CHECK(G.skip_idle || idle_runs < 64,
               "idle: the ring's state has not changed for %d loop "
               "iterations, yet it keeps the loop from blocking (--busy-poll "
               "0; sq_tail %u, sq_head %u, cq_head %u, cq_tail %u, %llu "
               "answers owed, entries %u)",
               idle_runs, c->tail, c->d_sqh, c->head, c->d_cqt,
               (unsigned long long)owed(c), c->E);
  }
  if (must_eof) {
    FUZZ_CHECK(c->eof,
               "the client broke the ring (%s) but the daemon goes on with "
               "it (sq_tail %u, sq_head %u, cq_head %u, cq_tail %u, entries "
               "%u)",
               cause, c->tail, c->d_sqh, c->head, c->d_cqt, c->E);
  } else if (!c->justified && !stuck && !c->eof) {
    size_t unanswered = 0;
    for (size_t i = 0; i < c->nsreqs; i++)
      unanswered += !c->sreqs[i].answered;
    FUZZ_CHECK(all_done(c),
               "liveness: after %llu ms the ring is stalled: sq_tail %u, "
               "sq_head %u, %llu ring answers owed, %zu socket requests "
               "unanswered, %llu of %llu ring.wake (sq_kick %u, cq_head %u, "
               "cq_tail %u, entries %u)",
               (unsigned long long)(DRAIN_NS / 1000000), c->tail, c->d_sqh,
               (unsigned long long)owed(c), unanswered,
               (unsigned long long)c->wakes_got,
               (unsigned long long)c->wakes_owed, atomic_load(&c->hdr->sq_kick),
               c->head, c->d_cqt, c->E);
  }
}

/* ------------------------------------------------------------- teardown */

/* Descriptors or mappings of the client's memfds left in the process. */
static int memfds_left(int maps)
{
  char path[300], link[256];
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;

  if (d != NULL) {
    while ((e = readdir(d)) != NULL) {
      ssize_t l;
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      if ((l = readlink(path, link, sizeof(link) - 1)) <= 0)
        continue;
      link[l] = '\0';
      if (strstr(link, "memfd:hipd-fuzz-") != NULL) {
        n++;
        if (G.verbose)
          fprintf(stderr, "  left: fd %s -> %s\n", e->d_name, link);
      }
    }
    closedir(d);
  }
  if (maps) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    if (f != NULL) {
      while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "memfd:hipd-fuzz-") != NULL) {
          n++;
          if (G.verbose)
            fprintf(stderr, "  left: mapping %s", line);
        }
      fclose(f);
    }
  }
  return n;
}

static int daemon_idle(void)
{
  return G.d.nsessions == 0 && list_empty(&G.d.closeq) &&
         exec_outstanding() == 0 && list_empty(&G.d.rings) &&
         !G.d.rings_polling && !uv_is_active((uv_handle_t *)&G.d.loop_awake);
}

static void client_free(client_t *c)
{
  for (size_t i = c->out_head; i < c->nout; i++) {
    free(c->out[i].p);
    if (c->out[i].fd >= 0)
      close(c->out[i].fd);
  }
  free(c->out);
  free(c->in);
  free(c->sreqs);
  free(c->rreqs);
  free(c->marks);
}

static uint64_t input_count;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  client_t *c = &C;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  input_t in = {.p = data, .n = size};
  uint64_t baseline, deadline;
  uint8_t cfg;
  int ring_fd, nops = 0;
  buf_t b;

  if (!G.started)
    daemon_start();
  memset(c, 0, sizeof(*c));
  c->next_msgid = 1;
  c->head_clean = c->tail_clean = 1;
  for (int i = 0; i <= H_COUNT; i++)
    c->handles[i] = 0;

  cfg = in_u8(&in);
  c->E = RING_MIN_ENTRIES << (cfg & 3);
  G.d.cfg.max_inflight = (uint32_t[]){2, 4, 16, 256}[(cfg >> 2) & 3];
  G.d.cfg.busy_poll_us = (cfg & 0x10) ? 50 : 0;
  baseline = G.d.sessions_total;

  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(c->fd >= 0, "socket: %s", strerror(errno));
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", G.path);
  FUZZ_CHECK(connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) == 0,
             "connect %s: %s (the daemon is gone)", G.path, strerror(errno));
  FUZZ_CHECK(uv_poll_init(&G.loop, &c->poll, c->fd) == 0, "uv_poll_init");
  c->poll.data = c;

  /* The session's objects, then the ring. */
  buf_init(&b);
  proto_pack_request(&b.pk, c->next_msgid, "hello", 2);
  msgpack_pack_uint32(&b.pk, 1);
  proto_pack_cstr(&b.pk, "fuzz-ring");
  send_request(c, &b, c->next_msgid++, -1, -1);
  for (int h = 0; h < H_COUNT; h++) {
    int fd = -1;
    buf_init(&b);
    switch (h) {
    case H_A:
    case H_B:
      proto_pack_request(&b.pk, c->next_msgid, "mem.alloc", 2);
      msgpack_pack_uint32(&b.pk, BUF_SIZE);
      proto_pack_cstr(&b.pk, "byte");
      break;
    case H_S:
      proto_pack_request(&b.pk, c->next_msgid, "stream.create", 0);
      break;
    case H_E:
      proto_pack_request(&b.pk, c->next_msgid, "event.create", 0);
      break;
    case H_M:
      fd = make_memfd(SHM_MEMFD, SHM_SIZE, F_SEAL_SHRINK);
      proto_pack_request(&b.pk, c->next_msgid, "shm.create", 1);
      msgpack_pack_uint32(&b.pk, SHM_SIZE);
      break;
    default:
      proto_pack_request(&b.pk, c->next_msgid, "stream.default", 0);
      break;
    }
    send_request(c, &b, c->next_msgid++, fd, h);
  }
  c->size = proto_ring_size(c->E);
  ring_fd = make_memfd(RING_MEMFD, c->size, F_SEAL_SHRINK | F_SEAL_GROW);
  c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
  FUZZ_CHECK(c->base != MAP_FAILED, "mmap: %s", strerror(errno));
  c->hdr = c->base;
  c->sq = proto_ring_sq(c->base);
  c->cq = proto_ring_cq(c->base, c->E);
  buf_init(&b);
  proto_pack_request(&b.pk, c->next_msgid, "ring.open", 1);
  msgpack_pack_uint32(&b.pk, c->E);
  send_request(c, &b, c->next_msgid++, ring_fd, H_RING); /* closes ring_fd */
  while (!setup_answered(c) && !c->eof)
    run_once(c, 10);
  FUZZ_CHECK(!c->eof && !c->setup_failed && c->ring_open,
             "the session's setup failed (entries %u)", c->E);
  FUZZ_CHECK(c->hdr->magic == RING_MAGIC && c->hdr->version == RING_VERSION &&
                 c->hdr->entries == c->E && c->hdr->slot == RING_SLOT,
             "the ring's header after ring.open: magic %#x version %u "
             "entries %u slot %u",
             c->hdr->magic, c->hdr->version, c->hdr->entries, c->hdr->slot);
  FUZZ_CHECK(live_session() != NULL && live_session()->ring != NULL,
             "ring.open answered, but the session has no ring");
  c->next_msgid = 1000;

  /* The program. */
  while (in.off < in.n && !c->eof && nops++ < MAX_OPS)
    op(c, &in);
  run_nowait(c);
  drain(c);

  /* The close, and the teardown. */
  c->poll_closing = 1;
  uv_close((uv_handle_t *)&c->poll, poll_close_cb);
  while (!c->poll_closed)
    run_block(1);
  close(c->fd);
  munmap(c->base, c->size);
  /* Descriptors the client never got to send (the daemon closed first). */
  for (size_t i = c->out_head; i < c->nout; i++)
    if (c->out[i].fd >= 0) {
      close(c->out[i].fd);
      c->out[i].fd = -1;
    }
  c->hdr = NULL;
  deadline = now_ns() + DRAIN_NS;
  while (!(G.d.sessions_total > baseline && daemon_idle() &&
           memfds_left(0) == 0) &&
         now_ns() < deadline) {
    run_block(1);
  }
  FUZZ_CHECK(G.d.nsessions == 0 && list_empty(&G.d.closeq),
             "teardown: %u sessions left after the client closed",
             G.d.nsessions);
  FUZZ_CHECK(list_empty(&G.d.rings),
             "teardown: a ring is still polled after its session went");
  FUZZ_CHECK(!G.d.rings_polling &&
                 !uv_is_active((uv_handle_t *)&G.d.loop_awake),
             "teardown: the rings' handles still run (polling %d, idle %d)",
             G.d.rings_polling, uv_is_active((uv_handle_t *)&G.d.loop_awake));
  FUZZ_CHECK(exec_outstanding() == 0, "teardown: %u device tasks left",
             exec_outstanding());
  /* The mappings too, now and then (reading the maps costs). */
  FUZZ_CHECK(memfds_left(FUZZ_REPLAY || input_count++ % 64 == 0) == 0,
             "teardown: a descriptor or mapping of the client's memfds is "
             "left in the process");
  client_free(c);
  return 0;
}
