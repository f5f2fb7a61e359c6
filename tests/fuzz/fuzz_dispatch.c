/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_dispatch.c: request dispatch on a real daemon, in
 * process: the CPU device, the real server, session, dispatch and methods.
 *
 * The daemon is started once per process, the way daemon/main.c starts it
 * (exec_bridge_init, devices_init, cache_init, server_start,
 * transport_init), listening on a socket in a private temporary
 * directory, with bounded settings (see daemon_start). Each input is one
 * connection: its bytes are a stream of msgpack-rpc messages, sent by a
 * client that lives in the same libuv loop (a uv_poll on a plain socket),
 * so the daemon and the client take turns on one thread and nothing races
 * but the device workers.
 *
 * What the client does with the stream, frame by frame (proto_frame_scan and
 * proto_msg_decode, under the daemon's own limits):
 *  - a request is sent as it is, pipelined, and remembered by msgid;
 *  - a request whose params hold the placeholder fixext1 type 'h' (0x68)
 *    with payload k waits until every earlier request is answered, then is
 *    re-encoded with the placeholder replaced by handle k (mod their
 *    number) of those the daemon returned so far, in request order (any
 *    uint >= 2^40 in a result: a handle's tag is 24 non-zero high bits).
 *    Handles carry a random per-session tag, so a seed corpus can only
 *    name them this way;
 *  - shm.create is sent with a fresh 64 KiB memfd on its bytes (SCM_RIGHTS);
 *  - a notification is sent as it is;
 *  - from the first protocol violation (bytes that are not a frame under
 *    the limits, a message that does not decode, a response) or an
 *    incomplete frame on, the rest is sent as it is.
 *
 * Properties:
 *  - every reply is a well-formed response [1, msgid, error, result] to a
 *    request that was sent and not answered yet; error is nil, or the
 *    object {code, name, message} of PROTOCOL.md, whose code is a known
 *    HIPD_E* code that the daemon may send (not EINTERNAL: "a bug in the
 *    daemon"; not EPROTO or the client-only codes), whose name is that
 *    code's, whose message is not empty, with a nil result;
 *  - without a violation, every request is answered and the daemon does not
 *    close the connection; after one, the daemon closes it;
 *  - the daemon survives: after each input its session is gone and its
 *    device work done, and the next input is served by the same daemon.
 *
 * State between inputs: each input has its own session, so handles,
 * streams, buffers, events, kernels, intrinsics and profiling start afresh;
 * what carries over is process-wide: the in-memory kernel cache, bufpool's
 * cached blocks, session ids and the random handle tags. Replies differ in
 * those values only (and in timing: a compile the cache has is quick).
 * Under libFuzzer kernels are not compiled: HIPD_CXX is set to `false`, so
 * kernel.compile* answer ECOMPILE at once and kernel.launch meets no
 * kernel; a replay uses the host compiler (HIPD_CXX as it is), so the seed
 * kernels compile and launch on the CPU runner. $HIPD_FUZZ_CXX names the
 * compiler to use in both modes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "compile/compile_pool.h"
#include "daemon.h"
#include "device.h"
#include "drivers/cpu/cpu.h"
#include "executor.h"
#include "fuzz.h"
#include "kernels/cache.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "transport.h"

#define PLACEHOLDER_TYPE 0x68 /* 'h' */
#define SHM_FD_SIZE (64 * 1024)
#define HANDLE_MIN ((uint64_t)1 << 40)

/* The HIP runtime (libamdhip64, which devices_init() probes even for
 * --devices cpu) runs threads with a signal stack of its own, from malloc;
 * ASan, at such a thread's end, unmaps the thread's signal stack as if it
 * were its own and stops on the failure. Without ASan this is unused. */
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
  char dir[64];
  char path[96];
  proto_limits_t reply_limits; /* how the client frames replies */
  int verbose;                 /* $HIPD_FUZZ_LOG: log and print replies */
} G;

static void daemon_cleanup(void)
{
  /* The process ends with the fuzzer: remove the socket and its folder. */
  if (G.started) {
    unlink(G.path);
    rmdir(G.dir);
  }
  /* Join libuv's thread pool (the codegen methods use it) now, while the
   * sanitizers' runtime is whole: left to libuv's destructor, a pool
   * thread ends after ASan has begun to tear down, which fails a CHECK
   * in ASan ("unable to unmap") and reads as a crash. */
  uv_library_shutdown();
}

/* Start the daemon as main.c does, with settings that bound one input's
 * cost: 64 MiB of device memory per session (EQUOTA beyond), a small
 * in-memory cache, 4096 handles, 8 streams. */
static void daemon_start(void)
{
  daemon_t *d = &G.d;
  hipd_err_t err;
  const char *cxx = getenv("HIPD_FUZZ_CXX");

  signal(SIGPIPE, SIG_IGN);
  /* Fuzzing: no compiler (`false`), or a mutated kernel source would cost
   * a compile per input. A replay compiles its few seed kernels for real
   * (the daemon's memory cache keeps them) so that launches run. */
  if (cxx != NULL && cxx[0] != '\0')
    setenv("HIPD_CXX", cxx, 1);
  else if (!FUZZ_REPLAY)
    setenv("HIPD_CXX", "false", 1);
  setenv("HIPD_CPU_RUNNER", FUZZ_CPU_RUNNER, 0);
  setenv("HIPD_CPU_HEADER", FUZZ_CPU_HEADER, 0);
  setenv("HIPD_COMPILE_HELPER", FUZZ_COMPILE_HELPER, 0);
  /* Sessions opening and closing at every input would flood the log. */
  G.verbose = getenv("HIPD_FUZZ_LOG") != NULL;
  log_set_level(G.verbose ? HLOG_DEBUG : HLOG_ERROR);

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
  {
    /* Compiles run in the sandboxed helpers, as in hipd. */
    compile_pool_cfg_t ccfg = {.jobs = 2, .timeout_s = 60, .probe = 1};
    FUZZ_CHECK(compile_pool_init(&ccfg, d->loop, &err) == 0,
               "compile_pool_init: %s", err.msg);
  }
  FUZZ_CHECK(server_start(d) == 0, "server_start on %s", G.path);
  transport_init(d);
  G.started = 1;
  atexit(daemon_cleanup);

  proto_limits_default(&G.reply_limits);
  G.reply_limits.max_message = (size_t)1 << 30;
  G.reply_limits.max_depth = PROTO_DEPTH_CAP;
}

/* ------------------------------------------------------------ the client */

typedef struct {
  uint8_t *p;
  size_t len, off;
  int fd; /* sent with the chunk's first byte, or -1 */
} chunk_t;

typedef struct {
  uint32_t msgid;
  int answered;
  uint64_t *handles; /* found in its result, in order */
  uint32_t nhandles;
} req_t;

typedef struct {
  int fd;
  uv_poll_t poll;
  int poll_events;  /* what it is started for, 0: stopped */
  int poll_closing; /* uv_close() was called */
  int poll_closed;
  chunk_t *out;
  size_t nout, out_head, out_cap;
  int write_broken; /* the daemon closed its end (after a violation) */
  uint8_t *in;
  size_t in_len, in_cap;
  int eof;
  req_t *reqs;
  size_t nreqs, reqs_cap;
  size_t unanswered;
} client_t;

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

static void queue_bytes(client_t *c, const uint8_t *p, size_t len, int fd)
{
  if (len == 0) {
    if (fd >= 0)
      close(fd);
    return;
  }
  c->out = grow(c->out, &c->out_cap, c->nout + 1, sizeof(*c->out));
  chunk_t *k = &c->out[c->nout++];
  k->p = malloc(len);
  FUZZ_CHECK(k->p != NULL, "out of memory");
  memcpy(k->p, p, len);
  k->len = len;
  k->off = 0;
  k->fd = fd;
}

static void chunk_free(chunk_t *k)
{
  free(k->p);
  k->p = NULL;
  if (k->fd >= 0)
    close(k->fd);
  k->fd = -1;
}

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
      close(k->fd); /* the daemon has its own copy now */
      k->fd = -1;
    }
    k->off += (size_t)n;
    if (k->off == k->len)
      chunk_free(&c->out[c->out_head++]);
  }
}

/* Handles in a result: every uint at least HANDLE_MIN. */
static void collect_handles(req_t *r, const msgpack_object *o)
{
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= HANDLE_MIN) {
    uint64_t *h = realloc(r->handles, (r->nhandles + 1) * sizeof(*h));
    FUZZ_CHECK(h != NULL, "out of memory");
    r->handles = h;
    r->handles[r->nhandles++] = o->via.u64;
  } else if (o->type == MSGPACK_OBJECT_ARRAY) {
    for (uint32_t i = 0; i < o->via.array.size; i++)
      collect_handles(r, &o->via.array.ptr[i]);
  } else if (o->type == MSGPACK_OBJECT_MAP) {
    for (uint32_t i = 0; i < o->via.map.size; i++)
      collect_handles(r, &o->via.map.ptr[i].val);
  }
}

/* The error object of a reply, as PROTOCOL.md ("Errors") defines it. */
static void check_error(const msgpack_object *e, const msgpack_object *result,
                        uint32_t msgid)
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
  FUZZ_CHECK(proto_obj_streq(name, want), "msgid %u: code %lld named '%.*s'",
             msgid, (long long)v,
             name->type == MSGPACK_OBJECT_STR ? (int)name->via.str.size : 0,
             name->type == MSGPACK_OBJECT_STR ? name->via.str.ptr : "");
  FUZZ_CHECK(message->type == MSGPACK_OBJECT_STR && message->via.str.size > 0 &&
                 message->via.str.size <= 16383,
             "msgid %u: bad message", msgid);
  /* Codes the daemon never answers with (PROTOCOL.md, the table). */
  FUZZ_CHECK(v != HIPD_EINTERNAL && v != HIPD_EPROTO &&
                 v != HIPD_EDISCONNECTED && v != HIPD_ECONNECT,
             "msgid %u: %s: %.*s", msgid, want, (int)message->via.str.size,
             message->via.str.ptr);
  FUZZ_CHECK(result->type == MSGPACK_OBJECT_NIL,
             "msgid %u: an error with a %s result", msgid,
             proto_obj_type_name(result));
}

static void check_reply(client_t *c, const uint8_t *p, size_t n)
{
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = NULL;
  req_t *r = NULL;

  FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
  FUZZ_CHECK(proto_msg_decode(p, n, &zone, &m, &reason) == 0,
             "the daemon sent a message that does not decode: %s", reason);
  FUZZ_CHECK(m.type == PROTO_RESPONSE, "the daemon sent a message of type %d",
             m.type);
  for (size_t i = 0; i < c->nreqs && r == NULL; i++)
    if (c->reqs[i].msgid == m.msgid && !c->reqs[i].answered)
      r = &c->reqs[i];
  FUZZ_CHECK(r != NULL, "a reply to msgid %u, which no unanswered request has",
             m.msgid);
  r->answered = 1;
  c->unanswered--;
  if (G.verbose) {
    const msgpack_object *msg = proto_map_get(m.error, "message");
    fprintf(stderr, "  reply %u: %.*s\n", m.msgid,
            msg && msg->type == MSGPACK_OBJECT_STR ? (int)msg->via.str.size : 2,
            msg && msg->type == MSGPACK_OBJECT_STR ? msg->via.str.ptr : "ok");
  }
  if (m.error->type != MSGPACK_OBJECT_NIL)
    check_error(m.error, m.result, m.msgid);
  else
    collect_handles(r, m.result);
  msgpack_zone_destroy(&zone);
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
    check_reply(c, c->in + off, (size_t)r);
    off += (size_t)r;
  }
  memmove(c->in, c->in + off, c->in_len - off);
  c->in_len -= off;
  if (c->eof)
    FUZZ_CHECK(c->in_len == 0,
               "the connection ended inside a reply (%zu "
               "bytes)",
               c->in_len);
}

static void poll_update(client_t *c);

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

/* Run the loop (daemon and client) until @p done says so. */
static void pump(client_t *c, int (*done)(const client_t *c))
{
  poll_update(c);
  while (!done(c))
    uv_run(&G.loop, UV_RUN_ONCE);
}

static int all_answered(const client_t *c)
{
  return c->unanswered == 0 || c->eof;
}
static int at_eof(const client_t *c)
{
  return c->eof;
}
static int poll_gone(const client_t *c)
{
  return c->poll_closed;
}

static uint64_t session_baseline;
static int daemon_idle(const client_t *c)
{
  (void)c;
  return G.d.sessions_total > session_baseline && G.d.nsessions == 0 &&
         exec_outstanding() == 0;
}

/* ------------------------------------------------- rewriting the stream */

static int has_placeholder(const msgpack_object *o)
{
  switch (o->type) {
  case MSGPACK_OBJECT_EXT:
    return o->via.ext.type == PLACEHOLDER_TYPE && o->via.ext.size == 1;
  case MSGPACK_OBJECT_ARRAY:
    for (uint32_t i = 0; i < o->via.array.size; i++)
      if (has_placeholder(&o->via.array.ptr[i]))
        return 1;
    return 0;
  case MSGPACK_OBJECT_MAP:
    for (uint32_t i = 0; i < o->via.map.size; i++)
      if (has_placeholder(&o->via.map.ptr[i].key) ||
          has_placeholder(&o->via.map.ptr[i].val))
        return 1;
    return 0;
  default:
    return 0;
  }
}

/* The handle a placeholder stands for: the k-th (mod their number) of
 * those returned so far, in request order; k itself (a forged handle) if
 * there are none. */
static uint64_t handle_for(const client_t *c, uint8_t k)
{
  uint64_t total = 0;

  for (size_t i = 0; i < c->nreqs; i++)
    total += c->reqs[i].nhandles;
  if (total == 0)
    return k;
  uint64_t want = k % total;
  for (size_t i = 0; i < c->nreqs; i++) {
    if (want < c->reqs[i].nhandles)
      return c->reqs[i].handles[want];
    want -= c->reqs[i].nhandles;
  }
  return k;
}

static void pack_subst(const client_t *c, msgpack_packer *pk,
                       const msgpack_object *o)
{
  switch (o->type) {
  case MSGPACK_OBJECT_EXT:
    if (o->via.ext.type == PLACEHOLDER_TYPE && o->via.ext.size == 1) {
      msgpack_pack_uint64(pk, handle_for(c, (uint8_t)o->via.ext.ptr[0]));
      return;
    }
    break;
  case MSGPACK_OBJECT_ARRAY:
    msgpack_pack_array(pk, o->via.array.size);
    for (uint32_t i = 0; i < o->via.array.size; i++)
      pack_subst(c, pk, &o->via.array.ptr[i]);
    return;
  case MSGPACK_OBJECT_MAP:
    msgpack_pack_map(pk, o->via.map.size);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
      pack_subst(c, pk, &o->via.map.ptr[i].key);
      pack_subst(c, pk, &o->via.map.ptr[i].val);
    }
    return;
  default:
    break;
  }
  msgpack_pack_object(pk, *o);
}

static int shm_memfd(void)
{
  int fd = memfd_create("hipd-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  FUZZ_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
  FUZZ_CHECK(ftruncate(fd, SHM_FD_SIZE) == 0, "ftruncate: %s", strerror(errno));
  /* As the client library does: shm.create wants it unshrinkable. */
  FUZZ_CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0, "F_ADD_SEALS: %s",
             strerror(errno));
  return fd;
}

static void client_free(client_t *c)
{
  for (size_t i = c->out_head; i < c->nout; i++)
    chunk_free(&c->out[i]);
  free(c->out);
  free(c->in);
  for (size_t i = 0; i < c->nreqs; i++)
    free(c->reqs[i].handles);
  free(c->reqs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  client_t c;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  const proto_limits_t *lim;
  int violation = 0;
  size_t off = 0;

  if (!G.started)
    daemon_start();
  lim = &G.d.cfg.limits;
  memset(&c, 0, sizeof(c));
  session_baseline = G.d.sessions_total;
  c.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(c.fd >= 0, "socket: %s", strerror(errno));
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", G.path);
  FUZZ_CHECK(connect(c.fd, (struct sockaddr *)&addr, sizeof(addr)) == 0,
             "connect %s: %s (the daemon is gone)", G.path, strerror(errno));
  FUZZ_CHECK(uv_poll_init(&G.loop, &c.poll, c.fd) == 0, "uv_poll_init");
  c.poll.data = &c;

  while (off < size) {
    size_t need;
    const char *reason = NULL;
    long long n = proto_frame_scan(lim, data + off, size - off, &need, &reason);
    msgpack_zone zone;
    proto_msg_t m;

    if (n <= 0) {
      violation = n < 0;
      break;
    }
    FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
    if (proto_msg_decode(data + off, (size_t)n, &zone, &m, &reason) != 0 ||
        m.type == PROTO_RESPONSE) {
      msgpack_zone_destroy(&zone);
      violation = 1;
      break;
    }
    if (m.type == PROTO_REQUEST) {
      int fd = m.method_len == 10 && memcmp(m.method, "shm.create", 10) == 0
                   ? shm_memfd()
                   : -1;
      if (has_placeholder(m.params)) {
        msgpack_sbuffer sb;
        msgpack_packer pk;

        pump(&c, all_answered);
        FUZZ_CHECK(!c.eof, "the daemon closed the connection without a "
                           "protocol violation");
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint8(&pk, PROTO_REQUEST);
        msgpack_pack_uint32(&pk, m.msgid);
        msgpack_pack_str(&pk, m.method_len);
        msgpack_pack_str_body(&pk, m.method, m.method_len);
        pack_subst(&c, &pk, m.params);
        queue_bytes(&c, (const uint8_t *)sb.data, sb.size, fd);
        msgpack_sbuffer_destroy(&sb);
      } else {
        queue_bytes(&c, data + off, (size_t)n, fd);
      }
      c.reqs = grow(c.reqs, &c.reqs_cap, c.nreqs + 1, sizeof(*c.reqs));
      c.reqs[c.nreqs++] = (req_t){.msgid = m.msgid};
      c.unanswered++;
    } else {
      queue_bytes(&c, data + off, (size_t)n, -1);
    }
    msgpack_zone_destroy(&zone);
    off += (size_t)n;
  }
  /* A violation or an incomplete frame: the rest goes as it is. */
  queue_bytes(&c, data + off, size - off, -1);

  if (violation) {
    pump(&c, at_eof);
  } else {
    pump(&c, all_answered);
    FUZZ_CHECK(!c.eof,
               "the daemon closed the connection without a protocol "
               "violation (%zu requests unanswered)",
               c.unanswered);
  }
  c.poll_closing = 1;
  uv_close((uv_handle_t *)&c.poll, poll_close_cb);
  pump(&c, poll_gone);
  close(c.fd);
  /* The session goes, and its device work (frees, stream teardown) ends. */
  pump(&c, daemon_idle);
  client_free(&c);
  return 0;
}
