/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_ipc.c: the wire between hipd's listener and its tenant
 * workers (daemon/privsep: ipc.c, workers.c, worker.c), both of its ends,
 * and the listener's end of its wire to the metrics process (metrics.c),
 * in process.
 *
 * One libuv loop serves the listener side of a real daemon_t (role
 * ROLE_LISTENER, a memory-only kernel cache, the real kernels layer and
 * the CPU device's compiler: no device is initialised, as in a listener)
 * and the fuzz target, which plays the other end of a socket pair.
 *
 * The input's first byte, the mode:
 *   bit 0     0: listener side: the rest is what a worker sends, on a
 *             channel served by workers_adopt();
 *             1: worker side: the rest is what a listener sends, on the
 *             channel of worker_start(), which has four requests pending
 *             (compile as msgid 1, through kernel_build(); cache.stats 2;
 *             cache.clear 3; admin 4, a client's session.list forwarded);
 *   bit 1     compiles may run the real compiler, once for this input (the
 *             per-input budget, below); else they fail at once;
 *   bit 2     a descriptor (a memfd) goes with the first byte sent;
 *   bit 3     the adopted worker's tenant is the daemon's own uid (else
 *             uid 4242, an unprivileged stranger); with bit 0 (bits 0 and
 *             3: 0x09): metrics side: the rest is what a metrics process
 *             sends, on a channel served by metrics_adopt();
 *   bits 4-7  c: the rest is written in chunks of c^3 bytes (c = 0: at
 *             once; at most 256 chunks), the loop running between chunks,
 *             so that messages arrive split at every place.
 *
 * The compile budget: $HIPD_CXX is a script in the target's temporary
 * directory that runs the real compiler ($HIPD_FUZZ_CXX, else c++ on
 * $PATH) only while it finds a token file, which it takes: the target
 * lays one token per input whose bit 1 is set. Other compiles fail at
 * once with a log that says so (ECOMPILE). Under libFuzzer an input that
 * names the `hip` driver in a compile is not run (returns -1): hiprtc
 * would compile in process. The in-memory cache keeps what compiled, so
 * an input repeated is a hit.
 *
 * Listener side, properties:
 *  - every byte the listener sends is a frame under ipc_limits() (the
 *    limits the worker reads it with) and a response [1, msgid, error,
 *    result] to a request that was sent and not answered yet; error is nil
 *    or {code, name, message} with a known code (not EINTERNAL, not
 *    EPROTO), its name, a message, a nil result;
 *  - compile's result is [status <= 0 (0 or a known code), source (a
 *    cache_source_t), key (bin 32), log (str), image (non-empty bin) when
 *    status is 0, else nil, then three uints of timing]; a result comes only
 * for params the target reads as valid too (driver "cpu", the host's arch), and
 * its key is the one kernels_key() gives for those params: the listener keys
 * what it compiles itself;
 *  - cache.stats' result is 13 uints and a str; cache.clear's is nil, and
 *    it succeeds only for the adopted tenant's own uid, when that is 0 or
 *    the daemon's uid;
 *  - admin's result is [status <= 0 (0 or a known code), message (str),
 *    result]: with status 0 a bin holding exactly one msgpack value, else
 *    nil; a view (session.list, daemon.stats, metrics, session.kill) asks
 *    the adopted channel for its report (`report []`, msgids from 1) and
 *    is answered within 2 s whether or not the input answers; what else
 *    the listener sends is a well-formed `kill [id, who]` or `log.level
 *    [level]`; an input that sends a response (to an ask, a report the
 *    listener decodes and checks, or to nothing) makes the channel's fate
 *    its own: then only the messages are checked, not whether it closes;
 *  - one `report` request to the adopted channel at a time, shared by
 *    every view; a view lists no session (the listener handed the channel
 *    no connection, so what its report lists is not its own) and shows no
 *    tenant series of a uid other than the channel's tenant;
 *  - admin requests of the channel in flight: 4 at most, a further one is
 *    answered EBUSY, and EBUSY only then (answers come in the order they
 *    are written: those before it still unanswered were in flight);
 *  - until the first message that breaks the channel (a frame that does
 *    not scan or decode, a response, an unknown method, any descriptor:
 *    bit 2), every request is
 *    answered and the channel stays open; after it, the channel closes;
 *  - a worker cannot leave a descriptor in the listener: while the
 *    channel is open and idle, the memfd sent (bit 2) is not open in the
 *    process;
 *  - the listener stays healthy: after each input (its channel closed, its
 *    compiles done) a fresh adopted channel's cache.stats is answered.
 *
 * Metrics side, properties (as the listener side's, for its methods):
 *  - every byte the listener sends is a response to a `metrics` request
 *    that was sent and not answered yet: a str result (only for params
 *    []), or an error as above;
 *  - until the first message that breaks the channel (a frame that does
 *    not scan or decode, a response, a notification but `ready []`, a
 *    request but `metrics`, any descriptor), every request is answered
 *    and the channel stays open; after it, the channel closes.
 *
 * Worker side, properties:
 *  - everything the worker sends is a well-formed message: the `ready`
 *    and `closed` notifications, the compile request [driver, arch, source
 *    (bin), kernel, [options], refresh], cache.stats [], cache.clear [uid],
 *    admin [op, params]; and answers only to the listener's well-formed
 *    requests: report [] with a report that admin/report.c accepts, kill
 *    [id, who] with a bool;
 *  - each pending request's callback runs exactly once (at the latest
 *    when worker_close() fails what is left) with a status that is 0 or
 *    negative, 0 only if a response with a nil error came for it;
 *  - the worker is told to stop (its stop callback) when the channel
 *    breaks, on `exit`, on a `conn` without a connection (no descriptor,
 *    or one that is not a socket): it is refused, never served; and on a
 *    malformed report, kill or log.level;
 *  - after worker_close() no descriptor that came is left open.
 *
 * Everything else the input does must not crash, hang or leak (ASan).
 * Between inputs the memory cache and the libuv loop carry over; each
 * input has its own channel.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin/admin.h"
#include "admin/report.h"
#include "daemon.h"
#include "fuzz.h"
#include "kernels/cache.h"
#include "kernels/kernels.h"
#include "log.h"
#include "privsep/ipc.h"
#include "privsep/metrics.h"
#include "privsep/wire.h"
#include "privsep/worker.h"
#include "privsep/workers.h"

#define MODE_WORKER 0x01
#define MODE_COMPILE 0x02
#define MODE_FD 0x04
#define MODE_OWN_UID 0x08
#define MODE_METRICS (MODE_WORKER | MODE_OWN_UID)

#define STRANGER_UID 4242
#define MEMFD_NAME "hipd-fuzz-ipc-sent"
#define HEALTH_MSGID 4000000001u

#if defined(__x86_64__)
#define HOST_ARCH "host-x86_64"
#elif defined(__aarch64__)
#define HOST_ARCH "host-aarch64"
#else
#define HOST_ARCH "host"
#endif

/* ASan and the HIP runtime's signal stacks (see fuzz_dispatch.c). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return "use_sigaltstack=0";
}

static struct {
  int started;
  uv_loop_t loop;
  daemon_t d;  /* the listener */
  daemon_t wd; /* the worker side's daemon (worker_start's) */
  char dir[64];
  char cxx[128];   /* the budget script */
  char token[128]; /* its token */
  int verbose;     /* $HIPD_FUZZ_LOG */
} G;

/* ------------------------------------------------------------- set-up */

static void cleanup(void)
{
  if (G.started) {
    unlink(G.token);
    unlink(G.cxx);
    rmdir(G.dir);
  }
  uv_library_shutdown();
}

/* The first executable @p name on $PATH (or @p name with a '/'). */
static int find_program(const char *name, char *out, size_t len)
{
  const char *path = getenv("PATH");

  if (strchr(name, '/') != NULL) {
    snprintf(out, len, "%s", name);
    return access(out, X_OK);
  }
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path != '\0') {
    size_t n = strcspn(path, ":");
    snprintf(out, len, "%.*s/%s", (int)n, path, name);
    if (n > 0 && access(out, X_OK) == 0)
      return 0;
    path += n;
    if (*path == ':')
      path++;
  }
  return -1;
}

/* The budget script: the real compiler while a token is there. Its
 * `--version` (the compiler's id, part of every key) is free. */
static void write_budget_cxx(void)
{
  const char *want = getenv("HIPD_FUZZ_CXX");
  char real[256];
  FILE *f;

  if (find_program(want != NULL && want[0] ? want : "c++", real,
                   sizeof(real)) != 0)
    snprintf(real, sizeof(real), "%s", "false");
  snprintf(G.cxx, sizeof(G.cxx), "%s/cxx", G.dir);
  snprintf(G.token, sizeof(G.token), "%s/token", G.dir);
  f = fopen(G.cxx, "w");
  FUZZ_CHECK(f != NULL, "%s: %s", G.cxx, strerror(errno));
  fprintf(f,
          "#!/bin/sh\n"
          "[ \"$1\" = --version ] && exec '%s' \"$@\"\n"
          "/bin/mv -f '%s' '%s.$$' 2>/dev/null || {\n"
          "  echo 'fuzz_ipc: the compile budget of this input is spent'\n"
          "  exit 1\n"
          "}\n"
          "/bin/rm -f '%s.$$'\n"
          "exec '%s' \"$@\"\n",
          real, G.token, G.token, G.token, real);
  FUZZ_CHECK(fclose(f) == 0 && chmod(G.cxx, 0700) == 0, "%s: %s", G.cxx,
             strerror(errno));
  setenv("HIPD_CXX", G.cxx, 1);
}

static void start(void)
{
  daemon_t *d = &G.d;
  hipd_err_t err;

  signal(SIGPIPE, SIG_IGN);
  G.verbose = getenv("HIPD_FUZZ_LOG") != NULL;
  log_set_level(G.verbose ? HLOG_DEBUG : HLOG_ERROR);
  snprintf(G.dir, sizeof(G.dir), "%s", "/tmp/hipd-fuzz-ipc-XXXXXX");
  FUZZ_CHECK(mkdtemp(G.dir) != NULL, "mkdtemp: %s", strerror(errno));
  G.started = 1;
  atexit(cleanup);
  write_budget_cxx();
  setenv("HIPD_CPU_HEADER", FUZZ_CPU_HEADER, 0);
  FUZZ_CHECK(uv_loop_init(&G.loop) == 0, "uv_loop_init");
  d->loop = &G.loop;
  d->cfg = (daemon_config_t){
      .socket_path = "",
      .max_sessions = 4,
      .max_handles = 4096,
      .listen_fd = -1,
      .cache_dir = "",
      .cache_size = (uint64_t)16 << 20,
      .isolation = ISOLATION_UID,
      .worker_linger_ms = 10000,
  };
  proto_limits_default(&d->cfg.limits);
  d->role = ROLE_LISTENER;
  list_init(&d->sessions);
  d->start_ms = uv_now(d->loop);
  /* The listener initialises no device; its cache is memory only. */
  FUZZ_CHECK(cache_init(d->loop, "", d->cfg.cache_size, &err) == 0,
             "cache_init: %s", err.msg);
  workers_admin_init(d);
  G.wd = *d;
  G.wd.role = ROLE_WORKER;
  list_init(&G.wd.sessions);
}

/* --------------------------------------------------------- helpers */

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

static int memfd_new(void)
{
  int fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC);

  FUZZ_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
  return fd;
}

/* Is a memfd that the target sent open in this process? */
static int sent_fd_open(void)
{
  DIR *dir = opendir("/proc/self/fd");
  struct dirent *e;
  int found = 0;

  FUZZ_CHECK(dir != NULL, "/proc/self/fd: %s", strerror(errno));
  while (!found && (e = readdir(dir)) != NULL) {
    char path[300], link[128];
    ssize_t n;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0)
      continue;
    link[n] = '\0';
    found = strstr(link, MEMFD_NAME) != NULL;
  }
  closedir(dir);
  return found;
}

static void count_cb(uv_handle_t *h, void *arg)
{
  (void)h;
  (*(unsigned *)arg)++;
}

static unsigned handles(void)
{
  unsigned n = 0;

  uv_walk(&G.loop, count_cb, &n);
  return n;
}

static size_t unread(int fd)
{
  int n = 0;

  return ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? (size_t)n : 0;
}

/* ------------------------------------------------------ the peer end */

/* What one side of the target expects of a request it sent. */
typedef struct {
  uint32_t msgid;
  int method; /* M_* */
  int answered;
  /* compile: the target's own reading of the params */
  int valid;       /* params well-formed, driver cpu, host arch;
                      metrics: params [] */
  cache_key_t key; /* kernels_key() of them, when valid */
  /* cache.clear: may succeed */
  int clear_ok;
  /* admin: the op, when it is session.list or metrics (else 0) */
  int op;
  int view; /* admin: a view (waits for the reports) */
} req_t;

enum { OP_NONE, OP_LIST, OP_METRICS };

enum { M_COMPILE, M_STATS, M_CLEAR, M_ADMIN, M_METRICS, M_OTHER };

typedef struct {
  int fd;    /* the target's end */
  int other; /* the served end (not ours to close) */
  int is_worker;
  const uint8_t *out; /* what is left to write */
  size_t out_len, chunk;
  int out_fd;       /* sent with the first byte, or -1 */
  int write_broken; /* EPIPE */
  int blocked;      /* the last write found the socket full */
  uint8_t *in;
  size_t in_len, in_cap;
  int eof;
  int uncertain; /* the input answers the listener: its fate is open */
  req_t *reqs;
  size_t nreqs, reqs_cap;
  size_t unanswered;
  uint64_t progress; /* bytes moved either way */
  uid_t tenant;
  int metrics;          /* the target plays a metrics process (MODE_METRICS) */
  uint32_t report_open; /* the listener's report request, unanswered */
  int one_batch;        /* the whole input was written before a view's answer */
  int dup_msgid;        /* two requests had the same msgid */
  unsigned views_served; /* views answered, not EBUSY */
} peer_t;

static void write_some(peer_t *p, size_t limit)
{
  while (p->out_len > 0 && !p->write_broken) {
    size_t n = p->out_len < limit ? p->out_len : limit;
    struct iovec iov = {.iov_base = (void *)p->out, .iov_len = n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    proto_fd_ctl_t ctl;
    ssize_t w;

    if (p->out_fd >= 0)
      proto_msg_attach_fd(&mh, &ctl, p->out_fd);
    w = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        p->blocked = 1;
        return;
      }
      FUZZ_CHECK(errno == EPIPE || errno == ECONNRESET, "send: %s",
                 strerror(errno));
      p->write_broken = 1;
      return;
    }
    if (p->out_fd >= 0) {
      close(p->out_fd); /* the other side has its copy */
      p->out_fd = -1;
    }
    p->blocked = 0;
    p->out += w;
    p->out_len -= (size_t)w;
    p->progress += (uint64_t)w;
    if (limit != SIZE_MAX)
      return; /* one chunk per turn of the loop */
  }
}

static req_t *req_find(peer_t *p, uint32_t msgid)
{
  for (size_t i = 0; i < p->nreqs; i++)
    if (p->reqs[i].msgid == msgid && !p->reqs[i].answered)
      return &p->reqs[i];
  return NULL;
}

/* The error object of a response, as PROTOCOL.md ("Errors") has it. */
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
  FUZZ_CHECK(proto_obj_streq(name, want), "msgid %u: code %lld misnamed", msgid,
             (long long)v);
  FUZZ_CHECK(message->type == MSGPACK_OBJECT_STR && message->via.str.size > 0,
             "msgid %u: no message", msgid);
  FUZZ_CHECK(v != HIPD_EINTERNAL && v != HIPD_EPROTO, "msgid %u: %s: %.*s",
             msgid, want, (int)message->via.str.size, message->via.str.ptr);
  FUZZ_CHECK(result->type == MSGPACK_OBJECT_NIL,
             "msgid %u: an error with a %s result", msgid,
             proto_obj_type_name(result));
}

/* compile's result: as many elements as the wire's row has (wire.h). */
#define COMPILE_ONE(T, name, ...) +1
enum { COMPILE_RESULT_LEN = 0 WIRE_COMPILE_RESULT(COMPILE_ONE, _) };

static void check_compiled(const req_t *r, const msgpack_object *res)
{
  const msgpack_object *a;
  int64_t status, source;
  uint64_t ns;
  const char *p;
  size_t n;

  FUZZ_CHECK(res->type == MSGPACK_OBJECT_ARRAY &&
                 res->via.array.size == COMPILE_RESULT_LEN,
             "compile %u: the result is a %s, not an array of %d", r->msgid,
             proto_obj_type_name(res), COMPILE_RESULT_LEN);
  for (int i = 5; i < COMPILE_RESULT_LEN; i++)
    FUZZ_CHECK(proto_obj_uint(&res->via.array.ptr[i], UINT64_MAX, &ns) == 0,
               "compile %u: timing element %d is not a uint", r->msgid, i);
  a = res->via.array.ptr;
  FUZZ_CHECK(r->valid,
             "compile %u: a result for params the target reads as invalid",
             r->msgid);
  FUZZ_CHECK(
      proto_obj_int(&a[0], INT32_MIN, 0, &status) == 0 &&
          (status == 0 || strcmp(hipd_err_name((int)status), "UNKNOWN") != 0),
      "compile %u: status is not 0 or a known code", r->msgid);
  FUZZ_CHECK(proto_obj_int(&a[1], CACHE_MISS, CACHE_WAITED, &source) == 0,
             "compile %u: source is not a cache_source_t", r->msgid);
  FUZZ_CHECK(a[2].type == MSGPACK_OBJECT_BIN &&
                 a[2].via.bin.size == CACHE_KEY_SIZE,
             "compile %u: the key is a %s, not a bin of 32", r->msgid,
             proto_obj_type_name(&a[2]));
  FUZZ_CHECK(memcmp(a[2].via.bin.ptr, r->key.b, CACHE_KEY_SIZE) == 0,
             "compile %u: the key is not kernels_key() of the params",
             r->msgid);
  FUZZ_CHECK(a[3].type == MSGPACK_OBJECT_STR, "compile %u: the log is a %s",
             r->msgid, proto_obj_type_name(&a[3]));
  if (status == 0)
    FUZZ_CHECK(proto_obj_bytes(&a[4], &p, &n) == 0 &&
                   a[4].type == MSGPACK_OBJECT_BIN && n > 0,
               "compile %u: success without an image (%s)", r->msgid,
               proto_obj_type_name(&a[4]));
  else
    FUZZ_CHECK(a[4].type == MSGPACK_OBJECT_NIL,
               "compile %u: failure (%lld) with an image", r->msgid,
               (long long)status);
  if (G.verbose)
    fprintf(stderr, "  compile %u: status %lld source %lld log %.*s\n",
            r->msgid, (long long)status, (long long)source,
            (int)a[3].via.str.size, a[3].via.str.ptr);
}

/* admin's result: [status, message, packed result | nil]. */
static void check_admin(const peer_t *p, const req_t *r,
                        const msgpack_object *res)
{
  uint32_t msgid = r->msgid;
  const msgpack_object *a;
  int64_t status;
  msgpack_unpacked u;
  size_t off = 0;

  FUZZ_CHECK(res->type == MSGPACK_OBJECT_ARRAY && res->via.array.size == 3,
             "admin %u: the result is a %s, not an array of 3", msgid,
             proto_obj_type_name(res));
  a = res->via.array.ptr;
  FUZZ_CHECK(
      proto_obj_int(&a[0], INT32_MIN, 0, &status) == 0 &&
          (status == 0 || strcmp(hipd_err_name((int)status), "UNKNOWN") != 0),
      "admin %u: status is not 0 or a known code", msgid);
  FUZZ_CHECK(status != HIPD_EINTERNAL, "admin %u: EINTERNAL", msgid);
  FUZZ_CHECK(a[1].type == MSGPACK_OBJECT_STR, "admin %u: the message is a %s",
             msgid, proto_obj_type_name(&a[1]));
  if (status != 0) {
    FUZZ_CHECK(a[2].type == MSGPACK_OBJECT_NIL && a[1].via.str.size > 0,
               "admin %u: a failure with a result or without a message", msgid);
    return;
  }
  FUZZ_CHECK(a[2].type == MSGPACK_OBJECT_BIN && a[2].via.bin.size > 0,
             "admin %u: success without a result", msgid);
  msgpack_unpacked_init(&u);
  FUZZ_CHECK(msgpack_unpack_next(&u, a[2].via.bin.ptr, a[2].via.bin.size,
                                 &off) == MSGPACK_UNPACK_SUCCESS &&
                 off == a[2].via.bin.size,
             "admin %u: the result is not one msgpack value", msgid);
  /* The listener handed the adopted channel no connection: a session
   * its report lists is none of its own, and no view shows it. */
  if (r->op == OP_LIST)
    FUZZ_CHECK(u.data.type == MSGPACK_OBJECT_ARRAY &&
                   u.data.via.array.size == 0,
               "admin %u: session.list shows a session the listener did not "
               "hand the worker",
               msgid);
  /* A worker's uid records are its own uid's: no other tenant's series. */
  if (r->op == OP_METRICS && u.data.type == MSGPACK_OBJECT_STR) {
    const char *t = u.data.via.str.ptr, *end = t + u.data.via.str.size;
    char own[32];
    int n = snprintf(own, sizeof(own), "uid=\"%u\"", (unsigned)p->tenant);
    for (const char *q = t; q + 5 < end; q++)
      if (memcmp(q, "uid=\"", 5) == 0)
        FUZZ_CHECK((size_t)(end - q) >= (size_t)n &&
                       memcmp(q, own, (size_t)n) == 0,
                   "admin %u: metrics with a tenant series of another uid "
                   "than the worker's (%u): %.20s",
                   msgid, (unsigned)p->tenant, q);
  }
  msgpack_unpacked_destroy(&u);
}

/* Admin requests of @p p sent before @p r, not answered yet. */
static unsigned admin_in_flight(const peer_t *p, const req_t *r)
{
  unsigned n = 0;

  for (const req_t *q = p->reqs; q < r; q++)
    n += q->method == M_ADMIN && q->valid && !q->answered;
  return n;
}

/* cache.stats' counters, as many as the wire's table has (wire.h). */
#define STATS_ONE(T, name, ...) +1
enum { STATS_COUNTERS = 0 WIRE_CACHE_STATS_COUNTERS(STATS_ONE, _) };

static void check_stats(uint32_t msgid, const msgpack_object *res)
{
  uint64_t v;

  FUZZ_CHECK(res->type == MSGPACK_OBJECT_ARRAY &&
                 res->via.array.size == STATS_COUNTERS + 1,
             "cache.stats %u: the result is a %s, not an array of %d", msgid,
             proto_obj_type_name(res), STATS_COUNTERS + 1);
  for (int i = 0; i < STATS_COUNTERS; i++)
    FUZZ_CHECK(proto_obj_uint(&res->via.array.ptr[i], UINT64_MAX, &v) == 0,
               "cache.stats %u: element %d is not a uint", msgid, i);
  FUZZ_CHECK(res->via.array.ptr[STATS_COUNTERS].type == MSGPACK_OBJECT_STR,
             "cache.stats %u: the directory is a %s", msgid,
             proto_obj_type_name(&res->via.array.ptr[STATS_COUNTERS]));
}

static int params_are(const proto_msg_t *m, uint32_t n);

/* A message from the listener (to the worker the target plays). */
static void check_listener_msg(peer_t *p, const uint8_t *b, size_t n)
{
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = NULL;
  req_t *r;

  FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
  FUZZ_CHECK(proto_msg_decode(b, n, &zone, &m, &reason) == 0,
             "the listener sent a message that does not decode: %s", reason);
  if (m.type == PROTO_REQUEST && ipc_is(&m, "report")) {
    FUZZ_CHECK(params_are(&m, 0), "report with params");
    /* One report request at a time, whatever the views asked for. */
    FUZZ_CHECK(p->uncertain || p->report_open == 0,
               "report %u asked while report %u is unanswered", m.msgid,
               p->report_open);
    p->report_open = m.msgid;
    msgpack_zone_destroy(&zone);
    return;
  }
  if (m.type == PROTO_REQUEST && ipc_is(&m, "kill")) {
    uint64_t id;
    const char *who;
    size_t wn;
    FUZZ_CHECK(ipc_param_uint(&m, 0, UINT64_MAX, &id) == 0 &&
                   ipc_param_bytes(&m, 1, 127, &who, &wn) == 0 &&
                   params_are(&m, 2),
               "a malformed kill");
    msgpack_zone_destroy(&zone);
    return;
  }
  if (m.type == PROTO_NOTIFY && ipc_is(&m, "log.level")) {
    uint64_t lvl;
    FUZZ_CHECK(ipc_param_uint(&m, 0, HLOG_DEBUG, &lvl) == 0 &&
                   params_are(&m, 1),
               "a malformed log.level");
    msgpack_zone_destroy(&zone);
    return;
  }
  FUZZ_CHECK(m.type == PROTO_RESPONSE, "the listener sent a message of type %d",
             m.type);
  r = req_find(p, m.msgid);
  FUZZ_CHECK(r != NULL, "a reply to msgid %u, which no unanswered request has",
             m.msgid);
  r->answered = 1;
  p->unanswered--;
  if (r->method == M_ADMIN) {
    /* Answers come in the order the listener wrote them: those before r
     * still unanswered were in flight when r was answered. Four at most
     * (EBUSY beyond), and EBUSY only then. */
    unsigned busy = admin_in_flight(p, r);
    int64_t code = 0;
    if (m.error->type == MSGPACK_OBJECT_MAP)
      for (uint32_t i = 0; i < m.error->via.map.size; i++) {
        const msgpack_object_kv *kv = &m.error->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 4 &&
            memcmp(kv->key.via.str.ptr, "code", 4) == 0)
          proto_obj_int(&kv->val, INT32_MIN, 0, &code);
      }
    /* Served: answered with a view. A view refused at once (EBUSY, or
     * EPARAMS from the admin layer for its params) frees its slot
     * without waiting, so only the views served all waited together. */
    if (r->view && p->views_served == 0 && code == 0)
      p->one_batch = p->out_len == 0 && !p->uncertain;
    if (r->view && code == 0)
      p->views_served++;
    if (p->dup_msgid) {
      /* a reused msgid: which request an answer is for is unknown */
    } else if (!r->valid)
      FUZZ_CHECK(code == HIPD_EPARAMS,
                 "admin %u: a malformed request answered with code %lld, not "
                 "EPARAMS",
                 m.msgid, (long long)code);
    else
      FUZZ_CHECK((code == HIPD_EBUSY) == (busy >= 4),
                 "admin %u: %s with %u admin requests in flight (the limit "
                 "is 4)",
                 m.msgid, code == HIPD_EBUSY ? "EBUSY" : "answered", busy);
  }
  if (m.error->type != MSGPACK_OBJECT_NIL)
    check_error(m.error, m.result, m.msgid);
  else if (r->method == M_COMPILE)
    check_compiled(r, m.result);
  else if (r->method == M_STATS)
    check_stats(m.msgid, m.result);
  else if (r->method == M_ADMIN) {
    if (!p->dup_msgid) /* else which request it answers is unknown */
      check_admin(p, r, m.result);
  } else if (r->method == M_METRICS)
    FUZZ_CHECK(r->valid && m.result->type == MSGPACK_OBJECT_STR,
               "metrics %u: a %s result%s", m.msgid,
               proto_obj_type_name(m.result),
               r->valid ? "" : " for params that are not []");
  else if (r->method == M_CLEAR)
    FUZZ_CHECK(r->clear_ok && m.result->type == MSGPACK_OBJECT_NIL,
               "cache.clear %u: succeeded for a worker of uid %u (%s)", m.msgid,
               (unsigned)p->tenant, proto_obj_type_name(m.result));
  else
    FUZZ_CHECK(0, "msgid %u: a result to an unknown method", m.msgid);
  msgpack_zone_destroy(&zone);
}

static int params_are(const proto_msg_t *m, uint32_t n)
{
  return m->params != NULL && m->params->type == MSGPACK_OBJECT_ARRAY &&
         m->params->via.array.size == n;
}

/* The listener's requests to the worker side (run_worker's scan): what
 * each msgid asked, ASK_NONE once answered. */
enum { ASK_NONE, ASK_REPORT, ASK_KILL };
static struct {
  uint32_t msgid;
  int kind;
} asks[64];
static unsigned nasks;

/* A message from the worker (to the listener the target plays). */
static void check_worker_msg(const uint8_t *b, size_t n)
{
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = NULL;
  const msgpack_object *a;

  FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
  FUZZ_CHECK(proto_msg_decode(b, n, &zone, &m, &reason) == 0,
             "the worker sent a message that does not decode: %s", reason);
  if (m.type == PROTO_RESPONSE) {
    unsigned i;
    for (i = 0; i < nasks; i++)
      if (asks[i].kind != ASK_NONE && asks[i].msgid == m.msgid)
        break;
    FUZZ_CHECK(i < nasks, "the worker answered %u, which was not asked",
               m.msgid);
    FUZZ_CHECK(m.error->type == MSGPACK_OBJECT_NIL,
               "the worker answered %u with an error", m.msgid);
    if (asks[i].kind == ASK_REPORT) {
      report_t *r = report_decode(m.result);
      FUZZ_CHECK(r != NULL, "the worker's report %u does not decode", m.msgid);
      report_free(r);
    } else {
      FUZZ_CHECK(m.result->type == MSGPACK_OBJECT_BOOLEAN,
                 "the worker's answer to kill %u is a %s", m.msgid,
                 proto_obj_type_name(m.result));
    }
    asks[i].kind = ASK_NONE;
    msgpack_zone_destroy(&zone);
    return;
  }
  if (m.type == PROTO_NOTIFY) {
    FUZZ_CHECK(
        (ipc_is(&m, "ready") || ipc_is(&m, "closed")) && params_are(&m, 1),
        "the worker sent the notification %.*s", (int)m.method_len, m.method);
  } else if (ipc_is(&m, "compile")) {
    FUZZ_CHECK(params_are(&m, 6), "compile with %s params",
               proto_obj_type_name(m.params));
    a = m.params->via.array.ptr;
    FUZZ_CHECK(a[0].type == MSGPACK_OBJECT_STR &&
                   a[1].type == MSGPACK_OBJECT_STR &&
                   a[2].type == MSGPACK_OBJECT_BIN &&
                   a[3].type == MSGPACK_OBJECT_STR &&
                   a[4].type == MSGPACK_OBJECT_ARRAY &&
                   a[5].type == MSGPACK_OBJECT_POSITIVE_INTEGER,
               "the worker's compile request is malformed");
  } else if (ipc_is(&m, "admin")) {
    FUZZ_CHECK(params_are(&m, 2) &&
                   m.params->via.array.ptr[0].type == MSGPACK_OBJECT_STR &&
                   m.params->via.array.ptr[1].type == MSGPACK_OBJECT_ARRAY,
               "the worker's admin request is malformed");
  } else {
    FUZZ_CHECK((ipc_is(&m, "cache.stats") && params_are(&m, 0)) ||
                   (ipc_is(&m, "cache.clear") && params_are(&m, 1)),
               "the worker sent the request %.*s", (int)m.method_len, m.method);
  }
  msgpack_zone_destroy(&zone);
}

static void read_some(peer_t *p)
{
  for (;;) {
    p->in = grow(p->in, &p->in_cap, p->in_len + 65536, 1);
    ssize_t n =
        recv(p->fd, p->in + p->in_len, p->in_cap - p->in_len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      break;
    if (n < 0)
      FUZZ_CHECK(errno == ECONNRESET, "recv: %s", strerror(errno));
    if (n <= 0) {
      p->eof = 1;
      break;
    }
    p->in_len += (size_t)n;
    p->progress += (uint64_t)n;
  }
  size_t off = 0;
  for (;;) {
    size_t need;
    const char *reason = NULL;
    long long r = proto_frame_scan(ipc_limits(), p->in + off, p->in_len - off,
                                   &need, &reason);
    FUZZ_CHECK(r >= 0,
               "the %s sent bytes that are not a frame under "
               "ipc_limits(): %s",
               p->is_worker ? "worker" : "listener", reason);
    if (r == 0)
      break;
    if (p->is_worker)
      check_worker_msg(p->in + off, (size_t)r);
    else
      check_listener_msg(p, p->in + off, (size_t)r);
    off += (size_t)r;
  }
  memmove(p->in, p->in + off, p->in_len - off);
  p->in_len -= off;
  if (p->eof)
    FUZZ_CHECK(p->in_len == 0, "the channel ended inside a message (%zu bytes)",
               p->in_len);
}

/* One turn: a chunk out, the loop, what came back. The loop blocks only
 * while a compile runs (its end wakes it). */
static void turn(peer_t *p)
{
  if (!p->eof)
    write_some(p, p->chunk);
  uv_run(&G.loop, cache_pending() > 0 ? UV_RUN_ONCE : UV_RUN_NOWAIT);
  if (!p->eof)
    read_some(p);
}

/* Run until the other side has nothing more to do: everything written
 * (or, once it stopped reading, as much as the socket takes), read by it,
 * answered or closed, no compile running, and three turns without a byte
 * moving. @p stopped: the served side may have stopped reading. */
static void pump_quiet(peer_t *p, const int *stopped)
{
  int still = 0;

  while (still < 3) {
    uint64_t before = p->progress;
    turn(p);
    if (p->eof)
      return;
    if (p->progress == before && cache_pending() == 0 &&
        (p->out_len == 0 || p->write_broken ||
         (p->blocked && stopped != NULL && *stopped)) &&
        unread(p->fd) == 0 &&
        (unread(p->other) == 0 || (stopped != NULL && *stopped)))
      still++;
    else
      still = 0;
  }
}

static void peer_free(peer_t *p)
{
  if (p->out_fd >= 0)
    close(p->out_fd);
  free(p->in);
  free(p->reqs);
}

static void wait_handles(unsigned baseline)
{
  while (handles() > baseline || cache_pending() > 0)
    uv_run(&G.loop, cache_pending() > 0 ? UV_RUN_ONCE : UV_RUN_NOWAIT);
}

/* Where the first message that breaks the channel starts (the scans). */
static size_t break_off;

/* Can a reader of @p n bytes that holds a message at their start never get
 * to see that it breaks the rules? It waits until a frame's `need` is
 * buffered before it scans again (ipc.c): if the bytes of one read end
 * where the scan asks for more than will ever come, it waits for good
 * (a channel with a malformed start, idle; what it costs is bounded by
 * the limits). */
static int may_wait_forever(const uint8_t *b, size_t n)
{
  for (size_t l = 1; l < n; l++) {
    size_t need = 0;
    const char *reason = NULL;
    if (proto_frame_scan(ipc_limits(), b, l, &need, &reason) == 0 && need > n)
      return 1;
  }
  return 0;
}

/* ------------------------------------------------------ listener side */

/* C string of a str/bin param (at most @p cap - 1 bytes, up to a NUL, as
 * the listener copies it). @return 0, or -1 if it is no such param. */
static int param_cstr(const proto_msg_t *m, uint32_t i, size_t max, char *out,
                      size_t cap)
{
  const char *p;
  size_t n;

  if (ipc_param_bytes(m, i, max, &p, &n) != 0 || n >= cap)
    return -1;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

/* The target's reading of compile's params (workers.c's on_compile, from
 * its documentation): @p r->valid and @p r->key. @return -1 if it names
 * the hip driver (see the head comment). */
static int read_compile(const proto_msg_t *m, req_t *r)
{
  char drv[32], arch[64], name[256];
  const char *src;
  size_t src_n;
  const msgpack_object *opts;
  uint64_t refresh;
  char *ov[257];
  size_t nopts = 0;
  const driver_t *dv;
  int rc = 0;

  if (param_cstr(m, 0, 31, drv, sizeof(drv)) == 0 && strcmp(drv, "hip") == 0)
    return -1;
  if (param_cstr(m, 0, 31, drv, sizeof(drv)) != 0 ||
      param_cstr(m, 1, 63, arch, sizeof(arch)) != 0 ||
      ipc_param_bytes(m, 2, (size_t)64 << 20, &src, &src_n) != 0 ||
      param_cstr(m, 3, 255, name, sizeof(name)) != 0 ||
      ipc_param_array(m, 4, 256, &opts) != 0 ||
      ipc_param_uint(m, 5, 1, &refresh) != 0)
    return 0;
  for (uint32_t i = 0; i < opts->via.array.size; i++) {
    const char *o;
    size_t on;
    if (proto_obj_bytes(&opts->via.array.ptr[i], &o, &on) != 0 || on > 4096)
      goto done;
    ov[nopts] = strndup(o, on);
    FUZZ_CHECK(ov[nopts] != NULL, "out of memory");
    nopts++;
  }
  if (strcmp(drv, "cpu") != 0 || strcmp(arch, HOST_ARCH) != 0 ||
      (dv = kernels_driver_named("cpu")) == NULL)
    goto done;
  {
    kernels_key_in_t in = {
        .source = src,
        .source_len = src_n,
        .name = name,
        .opts = (const char *const *)ov,
        .nopts = nopts,
        .arch = arch,
        .drv = dv,
    };
    FUZZ_CHECK(kernels_key(&in, &r->key) == 0, "kernels_key");
  }
  r->valid = 1;
done:
  for (size_t i = 0; i < nopts; i++)
    free(ov[i]);
  return rc;
}

/* What a worker's bytes ask for. @return 1 if they break the channel,
 * -1 if the input is not to be run, else 0. */
static int scan_worker_bytes(peer_t *p, const uint8_t *data, size_t size)
{
  size_t off = 0;

  while (off < size) {
    size_t need;
    const char *reason = NULL;
    long long n =
        proto_frame_scan(ipc_limits(), data + off, size - off, &need, &reason);
    msgpack_zone zone;
    proto_msg_t m;
    int breaks = 0;

    break_off = off;
    if (n < 0)
      return 1;
    if (n == 0)
      return 0; /* an incomplete message: the listener waits */
    FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
    if (proto_msg_decode(data + off, (size_t)n, &zone, &m, &reason) != 0) {
      breaks = 1;
    } else if (p->metrics) {
      /* metrics.c: `ready []`, and `metrics` (checked, answered). */
      if (m.type == PROTO_NOTIFY)
        breaks = !ipc_is(&m, "ready") || !params_are(&m, 0);
      else if (!ipc_is(&m, "metrics"))
        breaks = 1;
      else {
        p->reqs = grow(p->reqs, &p->reqs_cap, p->nreqs + 1, sizeof(*p->reqs));
        p->reqs[p->nreqs++] = (req_t){
            .msgid = m.msgid, .method = M_METRICS, .valid = params_are(&m, 0)};
        p->unanswered++;
      }
    } else if (m.type == PROTO_RESPONSE) {
      /* An answer to the listener's report or kill, or to nothing (that
       * breaks the channel): which, the listener's msgids decide. */
      p->uncertain = 1;
    } else if (m.type == PROTO_NOTIFY) {
      breaks = !ipc_is(&m, "ready") && !ipc_is(&m, "closed");
    } else {
      req_t r = {.msgid = m.msgid, .method = M_OTHER};
      uint64_t uid;
      if (ipc_is(&m, "compile")) {
        r.method = M_COMPILE;
        if (read_compile(&m, &r) != 0 && !FUZZ_REPLAY) {
          msgpack_zone_destroy(&zone);
          return -1;
        }
      } else if (ipc_is(&m, "cache.stats")) {
        r.method = M_STATS;
      } else if (ipc_is(&m, "admin")) {
        const char *op;
        size_t on;
        const msgpack_object *aparams;
        r.method = M_ADMIN;
        /* as the listener checks it before its limit (EPARAMS) */
        r.valid = ipc_param_bytes(&m, 0, 31, &op, &on) == 0 &&
                  ipc_param_array(&m, 1, 4, &aparams) == 0 &&
                  admin_is_op(op, on);
        if (ipc_param_bytes(&m, 0, 31, &op, &on) == 0) {
          if (on == 12 && memcmp(op, "session.list", 12) == 0)
            r.op = OP_LIST;
          else if (on == 7 && memcmp(op, "metrics", 7) == 0)
            r.op = OP_METRICS;
          r.view = r.op != OP_NONE ||
                   (on == 12 && memcmp(op, "daemon.stats", 12) == 0) ||
                   (on == 12 && memcmp(op, "session.kill", 12) == 0);
          r.view = r.view && r.valid;
        }
      } else if (ipc_is(&m, "cache.clear")) {
        r.method = M_CLEAR;
        r.clear_ok = ipc_param_uint(&m, 0, UINT32_MAX, &uid) == 0 &&
                     uid == (uint64_t)p->tenant &&
                     (uid == 0 || uid == (uint64_t)geteuid());
      } else {
        breaks = 1;
      }
      if (!breaks) {
        /* A msgid used twice: answers cannot be told apart, so the
         * count of views served at once is not checked. */
        for (uint32_t i = 0; i < p->nreqs; i++)
          p->dup_msgid |= p->reqs[i].msgid == r.msgid;
        p->reqs = grow(p->reqs, &p->reqs_cap, p->nreqs + 1, sizeof(*p->reqs));
        p->reqs[p->nreqs++] = r;
        p->unanswered++;
      }
    }
    msgpack_zone_destroy(&zone);
    if (breaks)
      return 1;
    off += (size_t)n;
  }
  return 0;
}

/* A fresh adopted channel answers cache.stats. */
static void check_health(void)
{
  static const uint8_t stats[] = {0x94, 0x00, 0xce, 0xee, 0x6b, 0x28, 0x01,
                                  0xab, 'c',  'a',  'c',  'h',  'e',  '.',
                                  's',  't',  'a',  't',  's',  0x90};
  unsigned baseline = handles();
  peer_t p = {.out_fd = -1, .chunk = SIZE_MAX};
  int sv[2];

  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
             "socketpair: %s", strerror(errno));
  p.fd = sv[1];
  p.other = sv[0];
  p.tenant = STRANGER_UID;
  FUZZ_CHECK(workers_adopt(&G.d, sv[0], STRANGER_UID) == 0, "workers_adopt");
  p.reqs = grow(NULL, &p.reqs_cap, 1, sizeof(*p.reqs));
  p.reqs[p.nreqs++] = (req_t){.msgid = HEALTH_MSGID, .method = M_STATS};
  p.unanswered = 1;
  p.out = stats;
  p.out_len = sizeof(stats);
  while (p.unanswered > 0 && !p.eof)
    turn(&p);
  FUZZ_CHECK(p.unanswered == 0,
             "the listener is not healthy: a fresh channel's cache.stats is "
             "not answered");
  close(p.fd);
  wait_handles(baseline);
  peer_free(&p);
}

static int admin_waited;

static void admin_wait_cb(uv_timer_t *t)
{
  (void)t;
  admin_waited = 1;
}

static int run_listener(uint8_t mode, const uint8_t *data, size_t size,
                        size_t chunk)
{
  peer_t p = {.out_fd = -1, .chunk = chunk};
  unsigned baseline = handles();
  int sv[2], breaks;

  p.metrics = (mode & MODE_METRICS) == MODE_METRICS;
  p.tenant = mode & MODE_OWN_UID ? geteuid() : STRANGER_UID;
  if (p.tenant == geteuid() && !(mode & MODE_OWN_UID))
    p.tenant = STRANGER_UID + 1;
  breaks = scan_worker_bytes(&p, data, size);
  if (breaks < 0) {
    peer_free(&p);
    return -1;
  }
  /* A worker sends no descriptor: one breaks the channel. */
  if ((mode & MODE_FD) && size > 0)
    breaks = 1;
  if ((mode & MODE_COMPILE) && !p.metrics) {
    int t = open(G.token, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    FUZZ_CHECK(t >= 0, "%s: %s", G.token, strerror(errno));
    close(t);
  }
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
             "socketpair: %s", strerror(errno));
  p.fd = sv[1];
  p.other = sv[0];
  if (p.metrics)
    FUZZ_CHECK(metrics_adopt(&G.d, sv[0]) == 0, "metrics_adopt");
  else
    FUZZ_CHECK(workers_adopt(&G.d, sv[0], p.tenant) == 0, "workers_adopt");
  p.out = data;
  p.out_len = size;
  if ((mode & MODE_FD) && size > 0)
    p.out_fd = memfd_new();

  pump_quiet(&p, NULL);
  /* A view waits for the adopted channel's report 2 s at most. */
  if (!p.eof && p.unanswered > 0) {
    uv_timer_t t;
    uv_timer_init(&G.loop, &t);
    uv_timer_start(&t, admin_wait_cb, 2500, 0);
    admin_waited = 0;
    while (!admin_waited && !p.eof && p.unanswered > 0) {
      uv_run(&G.loop, UV_RUN_ONCE);
      read_some(&p);
    }
    uv_close((uv_handle_t *)&t, NULL);
    pump_quiet(&p, NULL);
  }
  /* Views that came in one read (a small input written at once) while
   * the report was never answered all waited together: four at most were
   * served, the others refused (EBUSY). */
  if (p.one_batch && !p.uncertain && !p.dup_msgid && size <= 4096)
    FUZZ_CHECK(p.views_served <= 4,
               "%u views of one worker served at once (the limit is 4)",
               p.views_served);
  if (p.uncertain) {
    /* The input answered the listener: whether the channel lives is its
     * own business; the messages were checked. */
  } else if (!breaks) {
    FUZZ_CHECK(!p.eof, "the listener closed the channel of a worker that "
                       "broke no rule");
    FUZZ_CHECK(p.unanswered == 0,
               "%zu requests unanswered, and the listener is idle",
               p.unanswered);
  } else {
    FUZZ_CHECK(p.eof || (!(mode & MODE_FD) &&
                         may_wait_forever(data + break_off, size - break_off)),
               "the listener kept the channel of a worker that broke the "
               "rules (at byte %zu)",
               break_off);
  }
  if (!p.eof && (mode & MODE_FD))
    FUZZ_CHECK(!sent_fd_open(), "the listener holds a descriptor that a "
                                "worker sent");
  close(p.fd);
  wait_handles(baseline);
  unlink(G.token);
  FUZZ_CHECK(!sent_fd_open(), "a descriptor a worker sent is left open");
  peer_free(&p);
  /* An admin's log.level changed this process's level. */
  log_set_level(G.verbose ? HLOG_DEBUG : HLOG_ERROR);
  check_health();
  return 0;
}

/* -------------------------------------------------------- worker side */

static const char kernel_src[] =
    "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n";

/* A request of the worker to its listener, waiting for its answer. */
typedef struct {
  int calls;
  int status;
} pend_t;

static struct {
  pend_t pend[4]; /* compile, cache.stats, cache.clear, admin */
  int stopped;
  uint32_t answered_ok; /* bit i: a nil-error response came for msgid i+1 */
} WS;

static void built_cb(void *ctx, const kernel_result_t *r)
{
  pend_t *p = ctx;

  p->calls++;
  p->status = r->status;
}

static void stats_cb(void *ctx, int status, const cache_stats_t *st)
{
  pend_t *p = ctx;

  p->calls++;
  p->status = status;
  FUZZ_CHECK(status != 0 || st != NULL, "cache.stats: success without stats");
}

static void cleared_cb(void *ctx, int status, const char *msg)
{
  pend_t *p = ctx;

  p->calls++;
  p->status = status;
  FUZZ_CHECK(msg != NULL, "cache.clear: no message");
}

static void admin_cb(void *ctx, int status, const char *msg, const char *res,
                     size_t len)
{
  pend_t *p = ctx;

  p->calls++;
  p->status = status;
  FUZZ_CHECK(status != 0 || (res != NULL && len > 0),
             "admin: success without a result");
  FUZZ_CHECK(status == 0 || msg != NULL, "admin: a failure without a message");
}

static void stop_cb(daemon_t *d, const char *why)
{
  (void)d;
  if (G.verbose)
    fprintf(stderr, "  worker stops: %s\n", why);
  WS.stopped++;
}

/* What a listener's bytes do to the worker. @return 1 if they break the
 * channel; *@p stops: a message that must stop the worker comes first. */
static int scan_listener_bytes(const uint8_t *data, size_t size, int *stops)
{
  size_t off = 0;

  *stops = 0;
  while (off < size) {
    size_t need;
    const char *reason = NULL;
    long long n =
        proto_frame_scan(ipc_limits(), data + off, size - off, &need, &reason);
    msgpack_zone zone;
    proto_msg_t m;

    break_off = off;
    if (n < 0)
      return 1;
    if (n == 0)
      return 0;
    FUZZ_CHECK(msgpack_zone_init(&zone, 4096), "out of memory");
    if (proto_msg_decode(data + off, (size_t)n, &zone, &m, &reason) != 0) {
      msgpack_zone_destroy(&zone);
      return 1;
    }
    if (m.type == PROTO_NOTIFY && (ipc_is(&m, "conn") || ipc_is(&m, "exit")))
      *stops = 1;
    if (m.type == PROTO_RESPONSE && m.msgid >= 1 && m.msgid <= 4 &&
        m.error->type == MSGPACK_OBJECT_NIL)
      WS.answered_ok |= 1u << (m.msgid - 1);
    /* The listener's requests: a malformed one stops the worker, one that
     * is well-formed gets an answer (once nothing stopped it before). */
    if (m.type == PROTO_REQUEST && ipc_is(&m, "report")) {
      if (!params_are(&m, 0))
        *stops = 1;
      else if (!*stops && nasks < 64)
        asks[nasks].msgid = m.msgid, asks[nasks++].kind = ASK_REPORT;
    } else if (m.type == PROTO_REQUEST && ipc_is(&m, "kill")) {
      uint64_t id;
      const char *who;
      size_t wn;
      if (ipc_param_uint(&m, 0, UINT64_MAX, &id) != 0 ||
          ipc_param_bytes(&m, 1, 127, &who, &wn) != 0)
        *stops = 1;
      else if (!*stops && nasks < 64)
        asks[nasks].msgid = m.msgid, asks[nasks++].kind = ASK_KILL;
    } else if (m.type == PROTO_NOTIFY && ipc_is(&m, "log.level")) {
      uint64_t lvl;
      if (ipc_param_uint(&m, 0, HLOG_DEBUG, &lvl) != 0)
        *stops = 1;
    }
    msgpack_zone_destroy(&zone);
    off += (size_t)n;
  }
  return 0;
}

static int run_worker(uint8_t mode, const uint8_t *data, size_t size,
                      size_t chunk)
{
  peer_t p = {.out_fd = -1, .chunk = chunk, .is_worker = 1};
  worker_role_t role = {
      .mode = ISOLATION_UID, .uid = STRANGER_UID, .gid = STRANGER_UID, .id = 1};
  kernel_request_t kr = {.source = kernel_src,
                         .source_len = sizeof(kernel_src) - 1,
                         .name = "k",
                         .arch = HOST_ARCH};
  unsigned baseline = handles();
  hipd_err_t err;
  int sv[2], breaks, stops;

  memset(&WS, 0, sizeof(WS));
  nasks = 0;
  breaks = scan_listener_bytes(data, size, &stops);
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
             "socketpair: %s", strerror(errno));
  p.fd = sv[1];
  p.other = sv[0];
  FUZZ_CHECK(worker_start(&G.wd, &role, sv[0], stop_cb, &err) == 0,
             "worker_start: %s", err.msg);
  /* msgids 1, 2, 3 */
  kernel_build(&kr, built_cb, &WS.pend[0]);
  worker_cache_stats(stats_cb, &WS.pend[1]);
  worker_cache_clear(STRANGER_UID, cleared_cb, &WS.pend[2]);
  {
    admin_args_t list = {.op = ADMIN_SESSION_LIST, .level = -1};
    admin_request(&G.wd, STRANGER_UID, 0, &list, admin_cb, &WS.pend[3]);
  }
  for (int i = 0; i < 4; i++)
    FUZZ_CHECK(WS.pend[i].calls == 0, "request %d answered before it was",
               i + 1);
  p.out = data;
  p.out_len = size;
  if ((mode & MODE_FD) && size > 0)
    p.out_fd = memfd_new();

  pump_quiet(&p, &WS.stopped);
  if (stops)
    FUZZ_CHECK(WS.stopped == 1, "the worker was not told to stop (exit, or "
                                "a conn without its connection)");
  else if (breaks)
    FUZZ_CHECK(WS.stopped == 1 ||
                   may_wait_forever(data + break_off, size - break_off),
               "the worker was not told to stop (the channel broke at byte "
               "%zu)",
               break_off);
  worker_close(&G.wd);
  wait_handles(baseline);
  /* A log.level from the listener changed this process's level. */
  log_set_level(G.verbose ? HLOG_DEBUG : HLOG_ERROR);
  for (int i = 0; i < 4; i++) {
    FUZZ_CHECK(WS.pend[i].calls == 1, "request %d: its callback ran %d times",
               i + 1, WS.pend[i].calls);
    FUZZ_CHECK(WS.pend[i].status <= 0, "request %d: status %d", i + 1,
               WS.pend[i].status);
    FUZZ_CHECK(WS.pend[i].status != 0 || (WS.answered_ok & (1u << i)),
               "request %d: success without a successful answer", i + 1);
  }
  FUZZ_CHECK(WS.stopped <= 1, "the worker was told to stop %d times",
             WS.stopped);
  close(p.fd);
  FUZZ_CHECK(!sent_fd_open(), "a descriptor the listener sent is left open");
  peer_free(&p);
  return 0;
}

/* -------------------------------------------------------------- entry */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode;
  size_t c, chunk;

  if (size == 0)
    return 0;
  if (!G.started)
    start();
  mode = data[0];
  c = mode >> 4;
  chunk = c == 0 ? SIZE_MAX : c * c * c;
  /* At most 256 chunks: an input's cost stays bounded by its size. */
  if (chunk < (size + 255) / 256)
    chunk = (size + 255) / 256;
  if ((mode & MODE_METRICS) == MODE_METRICS)
    return run_listener(mode, data + 1, size - 1, chunk);
  if (mode & MODE_WORKER)
    return run_worker(mode, data + 1, size - 1, chunk);
  return run_listener(mode, data + 1, size - 1, chunk);
}
