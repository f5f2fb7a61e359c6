/* tests/protofuzz.c: an end-to-end protocol fuzzer for hipd.
 *
 * It starts a real hipd (tests/harness.c: CPU devices, small limits) and
 * talks to it over several raw connections at once. For every method of the
 * daemon's own table (dispatch_methods(), linked from libhipdcore, so a new
 * method cannot be missed) it has a template that builds a valid request
 * from the live handles that connection created: buffers, streams, events,
 * kernels compiled from a small HIP source, shared buffers from memfds. It
 * sends those requests as they are, or mutated (arity, types, huge and
 * negative integers, floats, nil, strings and bins empty and oversized,
 * nested containers, stale, foreign, forged and wrong-kind handles, method
 * names), and breaks the protocol on purpose (bad msgids, wrong message
 * shapes, decode limits, truncated frames, garbage bytes). It passes
 * descriptors of many kinds over SCM_RIGHTS, with shm.create and with any
 * request, and closes connections at random, with requests in flight.
 *
 * Meanwhile a well-behaved session (libhipd, in a thread of its own)
 * allocates, writes, launches a kernel, reads back and compares, with
 * streams, events and shared buffers, the whole time.
 *
 * It fails (exit 1, with the seed and the last requests sent) when:
 * - the daemon dies, or does not exit 0 on SIGTERM at the end;
 * - a reply is malformed: not [1, msgid, error, result], a msgid that was
 *   not sent on that connection or was answered already, an error that is
 *   not {code: int, name: str, message: str}, with an unknown or
 *   client-only code, a name that is not the code's, an empty message, a
 *   message that does not begin with the method's name, a result with an
 *   error; or EINTERNAL;
 * - a connection that broke the protocol is not closed;
 * - the well-behaved session gets one wrong answer or error;
 * - a `session closed: REASON` line of the daemon's log has a REASON that
 *   starts with none of the first column of the table "Why a session is
 *   closed" of proto/PROTOCOL.md (read when it runs: --doc or
 *   $PROTOFUZZ_DOC), or the log reports a sanitizer error.
 *
 * Usage: protofuzz [--seconds N] [--seed S] [--requests N] [--doc PATH]
 *                  [--ir PATH] [--conns N] [--verbose]
 * $PROTOFUZZ_SECONDS and $PROTOFUZZ_SEED give the defaults. A seed makes
 * the requests the fuzzer generates the same; what the daemon answers when
 * depends on timing, so a run is reproducible in its inputs, not its
 * interleaving.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "harness.h"
#include "hipd.h"
#include "ir_json.h"
#include "rpc.h"

#ifndef PROTOFUZZ_SRCDIR
#define PROTOFUZZ_SRCDIR "."
#endif

/* ------------------------------------------------------------ settings */

#define MAX_CONNS 16
#define MAX_FDS 16         /* descriptors sent with one message */
#define POOL_MAX 24        /* live objects of one kind a connection keeps */
#define MAX_PEND 512       /* requests in flight on one connection */
#define PEND_HIGH 40       /* stop generating above this many */
#define WQ_HIGH (1u << 20) /* or above this many bytes queued */
#define DOOMED_MS 30000    /* a violation must close within this */
#define MAYBE_MS 3000      /* garbage: we close ourselves after this */
#define MAX_MESSAGE "8M"   /* --max-message of the daemon */
#define BIG_LEN (1u << 20) /* the largest string or bin param */
#define ARENA_SIZE (16u << 20)
#define RING 48 /* requests kept for the reproducer */
#define NDEV 2  /* --cpu-devices */

static struct {
  int seconds;
  uint64_t seed;
  uint64_t max_requests;
  const char *doc;
  const char *ir;
  int conns;
  int verbose;
} opt = {12, 0, UINT64_MAX, NULL, NULL, 6, 0};

/* ------------------------------------------------------------ failures */

static int failed;
static char fail_text[4096];

static void ring_dump(void);

/* Record the first failure; the main loop stops at the next turn. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
  va_list ap;

  if (failed)
    return;
  failed = 1;
  va_start(ap, fmt);
  vsnprintf(fail_text, sizeof(fail_text), fmt, ap);
  va_end(ap);
  fprintf(stderr, "protofuzz: FAIL: %s\n", fail_text);
}

/* ---------------------------------------------------------------- PRNG */

/* splitmix64: the fuzzer's own, so a seed means the same on every libc. */
typedef struct {
  uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r)
{
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static rng_t rng; /* the main thread's */

static uint64_t rnd64(void)
{
  return rng_next(&rng);
}
static uint32_t rnd(uint32_t n)
{
  return n == 0 ? 0 : (uint32_t)(rnd64() % n);
}
/* One chance in @p n. */
static int chance(uint32_t n)
{
  return rnd(n) == 0;
}

/* ---------------------------------------------------------- statistics */

static struct {
  uint64_t requests, valid, mutated, violations, notifications, garbage;
  uint64_t truncated, stalled, silent, replies, ok, by_code[64];
  uint64_t conns, closed_by_us[4], closed_by_daemon, closed_unexpected;
  uint64_t fds_sent, fds_by_kind[32];
  uint64_t valid_eparams;
  uint64_t m_sent[256], m_ok[256];
} st;

/* ---------------------------------------------------------- value tree */

/* A msgpack value to be packed; requests are built and mutated as trees,
 * allocated in an arena that is reset for each request. */
enum { V_NIL, V_BOOL, V_INT, V_UINT, V_F32, V_F64, V_STR, V_BIN, V_ARR, V_MAP };

typedef struct val {
  uint8_t t;
  uint32_t n; /* bytes of a str or bin; elements of an array; map pairs */
  union {
    int64_t i;
    uint64_t u;
    double f;
    int b;
  } x;
  const char *p;    /* str or bin bytes */
  struct val *kids; /* array: n; map: 2n (key, value, ...) */
} val_t;

static uint8_t *arena;
static size_t arena_used;

static void *aalloc(size_t n)
{
  void *p;

  n = (n + 15) & ~(size_t)15;
  if (arena_used + n > ARENA_SIZE) {
    fprintf(stderr, "protofuzz: arena exhausted (a fuzzer bug)\n");
    abort();
  }
  p = arena + arena_used;
  arena_used += n;
  memset(p, 0, n);
  return p;
}

static char *bigbuf; /* BIG_LEN printable bytes, no NUL */

static val_t v_nil(void)
{
  return (val_t){.t = V_NIL};
}
static val_t v_bool(int b)
{
  return (val_t){.t = V_BOOL, .x.b = b};
}
static val_t v_uint(uint64_t u)
{
  return (val_t){.t = V_UINT, .x.u = u};
}
static val_t v_int(int64_t i)
{
  return i >= 0 ? v_uint((uint64_t)i) : (val_t){.t = V_INT, .x.i = i};
}
static val_t v_f32(double f)
{
  return (val_t){.t = V_F32, .x.f = f};
}
static val_t v_f64(double f)
{
  return (val_t){.t = V_F64, .x.f = f};
}
static val_t v_strn(const char *p, size_t n)
{
  return (val_t){.t = V_STR, .p = p, .n = (uint32_t)n};
}
static val_t v_str(const char *s)
{
  return v_strn(s, strlen(s));
}
static val_t v_bin(const void *p, size_t n)
{
  return (val_t){.t = V_BIN, .p = p, .n = (uint32_t)n};
}
static val_t v_arr(uint32_t n)
{
  val_t v = {.t = V_ARR, .n = n};

  v.kids = aalloc(sizeof(val_t) * (n ? n : 1));
  return v;
}
static val_t v_map(uint32_t n)
{
  val_t v = {.t = V_MAP, .n = n};

  v.kids = aalloc(sizeof(val_t) * 2 * (n ? n : 1));
  return v;
}

static void pack_val(msgpack_packer *pk, const val_t *v)
{
  switch (v->t) {
  case V_NIL:
    msgpack_pack_nil(pk);
    break;
  case V_BOOL:
    v->x.b ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    break;
  case V_INT:
    msgpack_pack_int64(pk, v->x.i);
    break;
  case V_UINT:
    msgpack_pack_uint64(pk, v->x.u);
    break;
  case V_F32:
    msgpack_pack_float(pk, (float)v->x.f);
    break;
  case V_F64:
    msgpack_pack_double(pk, v->x.f);
    break;
  case V_STR:
    msgpack_pack_str(pk, v->n);
    msgpack_pack_str_body(pk, v->p, v->n);
    break;
  case V_BIN:
    msgpack_pack_bin(pk, v->n);
    msgpack_pack_bin_body(pk, v->p, v->n);
    break;
  case V_ARR:
    msgpack_pack_array(pk, v->n);
    for (uint32_t i = 0; i < v->n; i++)
      pack_val(pk, &v->kids[i]);
    break;
  case V_MAP:
    msgpack_pack_map(pk, v->n);
    for (uint32_t i = 0; i < 2 * v->n; i++)
      pack_val(pk, &v->kids[i]);
    break;
  }
}

/* ------------------------------------------------------------- objects */

enum { K_BUF, K_STREAM, K_EVENT, K_KERNEL, K_SHM, K_NKINDS };

typedef struct {
  uint64_t h;
  uint64_t size; /* buffer, shm: bytes; kernel: which source (KSRC_*) */
  int dev;
} obj_t;

typedef struct {
  obj_t o[POOL_MAX];
  int n;
} pool_t;

enum { KSRC_FZ, KSRC_CRASH, KSRC_IR };

static void pool_add(pool_t *p, obj_t o)
{
  if (p->n == POOL_MAX) /* forget the oldest: it stays alive, unnamed */
    memmove(p->o, p->o + 1, sizeof(p->o[0]) * --p->n);
  p->o[p->n++] = o;
}

static obj_t *pool_pick(pool_t *p)
{
  return p->n ? &p->o[rnd((uint32_t)p->n)] : NULL;
}

static void pool_remove(pool_t *p, uint64_t h)
{
  for (int i = 0; i < p->n; i++)
    if (p->o[i].h == h) {
      memmove(p->o + i, p->o + i + 1, sizeof(p->o[0]) * (p->n - i - 1));
      p->n--;
      return;
    }
}

/* Handles of every session the fuzzer opened, live or gone: foreign to all
 * the others. */
static uint64_t foreign[64];
static unsigned nforeign;

/* ---------------------------------------------------------- connections */

typedef struct chunk {
  struct chunk *next;
  uint8_t *data;
  size_t len, off;
  int nfds;
  int fds[MAX_FDS];
} chunk_t;

typedef struct {
  uint32_t msgid;
  int16_t midx;  /* index in methods[], or -1 */
  int8_t create; /* K_* a success creates, or -1 */
  int8_t create_dev;
  uint64_t create_size;
  int set_dev; /* device.set_current: the device, or -1 */
  int valid;   /* sent as its template made it */
  int compile; /* may run the compiler: holds a compile token */
} pend_t;

typedef struct conn {
  int fd;
  unsigned serial;
  int hello;    /* a hello succeeded */
  int no_hello; /* this one delays its hello */
  int current;  /* its current device as far as we know */
  int doomed;   /* a violation was sent: the daemon must close it */
  int maybe;    /* garbage was sent: it may close it */
  long long doomed_at;
  const char *doom_what; /* what it was sent */
  uint64_t sid;          /* its session id, from hello */
  uint64_t sent;
  pool_t live[K_NKINDS];
  pool_t stale[K_NKINDS];
  pend_t pend[MAX_PEND];
  int npend;
  uint32_t next_msgid;
  uint8_t *rbuf;
  size_t rlen, rcap;
  chunk_t *wq, *wq_tail;
  size_t wq_bytes;
  int setup;          /* setup requests still to send */
  long long setup_at; /* when they were sent: wait for their replies */
  long long end_at;   /* when its life ends: a violation, garbage or a close */
} conn_t;

static conn_t *conns[MAX_CONNS];
/* Requests in flight that may run the C++ compiler (each takes a second or
 * more of CPU): at most MAX_COMPILES at once, for the daemon's thread pool
 * and the machine. */
#define MAX_COMPILES 2
static int compiles;
static unsigned conn_serial;
static harness_daemon_t *daemon_;

/* ------------------------------------------------------ the method table */

static const method_t *methods;
static unsigned nmethods;

/* Does method @p midx compile (kernel.compile*, run_source)? */
static int is_compile(int midx)
{
  const char *m = methods[midx].name;

  return strncmp(m, "kernel.compile", 14) == 0 || strcmp(m, "run_source") == 0;
}

static int method_index(const char *name)
{
  for (unsigned i = 0; i < nmethods; i++)
    if (strcmp(methods[i].name, name) == 0)
      return (int)i;
  return -1;
}

/* ---------------------------------------------------------- descriptors */

enum {
  FD_MEMFD_GOOD,     /* sealed against shrinking, large enough */
  FD_MEMFD_SMALL,    /* sealed, 4096 bytes */
  FD_MEMFD_EMPTY,    /* sealed, 0 bytes */
  FD_MEMFD_UNSEALED, /* no seals */
  FD_MEMFD_WSEAL,    /* sealed against writing too */
  FD_PIPE_R,
  FD_PIPE_W,
  FD_SOCKETPAIR,
  FD_DGRAM,
  FD_EVENTFD,
  FD_TIMERFD,
  FD_DEVNULL,
  FD_REGULAR,
  FD_DIRECTORY,
  FD_OPATH,
  FD_EPOLL,
  FD_PIDFD,
  FD_SIGNALFD,
  FD_INOTIFY,
  FD_HIPD_CONN, /* another connection to the daemon */
  FD_NKINDS
};
static const char *const fd_names[FD_NKINDS] = {
    "memfd-sealed",  "memfd-small", "memfd-empty", "memfd-unsealed",
    "memfd-wsealed", "pipe-read",   "pipe-write",  "socketpair",
    "dgram-socket",  "eventfd",     "timerfd",     "/dev/null",
    "regular-file",  "directory",   "O_PATH",      "epoll",
    "pidfd",         "signalfd",    "inotify",     "hipd-connection"};

static char regular_path[512];

static int memfd(size_t size, unsigned seals)
{
  int fd = memfd_create("protofuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  if (fd < 0)
    return -1;
  if (size && ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return -1;
  }
  if (seals)
    fcntl(fd, F_ADD_SEALS, seals);
  return fd;
}

/* A new descriptor of @p kind (the caller closes it), or -1. */
static int fd_make(int kind, size_t shm_size)
{
  int p[2], fd = -1;

  switch (kind) {
  case FD_MEMFD_GOOD:
    return memfd(shm_size,
                 F_SEAL_SHRINK | (chance(2) ? F_SEAL_GROW | F_SEAL_SEAL : 0));
  case FD_MEMFD_SMALL:
    return memfd(4096, F_SEAL_SHRINK);
  case FD_MEMFD_EMPTY:
    return memfd(0, F_SEAL_SHRINK | F_SEAL_GROW);
  case FD_MEMFD_UNSEALED:
    return memfd(shm_size, 0);
  case FD_MEMFD_WSEAL:
    return memfd(shm_size, F_SEAL_SHRINK | F_SEAL_WRITE);
  case FD_PIPE_R:
  case FD_PIPE_W:
    if (pipe2(p, O_CLOEXEC) != 0)
      return -1;
    close(p[kind == FD_PIPE_R ? 1 : 0]);
    return p[kind == FD_PIPE_R ? 0 : 1];
  case FD_SOCKETPAIR:
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0)
      return -1;
    close(p[1]);
    return p[0];
  case FD_DGRAM:
    return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  case FD_EVENTFD:
    return eventfd(0, EFD_CLOEXEC);
  case FD_TIMERFD:
    return timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  case FD_DEVNULL:
    return open("/dev/null", O_RDWR | O_CLOEXEC);
  case FD_REGULAR:
    return open(regular_path, O_RDWR | O_CLOEXEC);
  case FD_DIRECTORY:
    return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  case FD_OPATH:
    return open(regular_path, O_PATH | O_CLOEXEC);
  case FD_EPOLL:
    return epoll_create1(EPOLL_CLOEXEC);
  case FD_PIDFD:
#ifdef SYS_pidfd_open
    fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
#endif
    return fd;
  case FD_SIGNALFD: {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    return signalfd(-1, &set, SFD_CLOEXEC);
  }
  case FD_INOTIFY:
    return inotify_init1(IN_CLOEXEC);
  case FD_HIPD_CONN:
    return harness_raw_connect(daemon_->socket);
  }
  return -1;
}

/* ------------------------------------------------------------ requests */

typedef struct req {
  int midx;
  const char *method; /* may be mutated */
  uint32_t method_len;
  int method_bin; /* send the name as bin */
  val_t params;   /* an array, unless mutated */
  int create;     /* K_* a success creates, or -1 */
  int create_dev;
  uint64_t create_size;
  int set_dev;
  int no_mutate; /* this request must stay valid (memory safety) */
  int nfds, fds[4], fd_kinds[4];
  char mut[96]; /* what was done to it */
} req_t;

typedef void (*tmpl_fn)(conn_t *c, req_t *r);

static val_t *P(req_t *r, uint32_t n)
{
  r->params = v_arr(n);
  return r->params.kids;
}

static obj_t *pick(conn_t *c, int kind)
{
  return pool_pick(&c->live[kind]);
}

/* A handle value for @p o, or a forged one when there is none. */
static val_t v_h(const obj_t *o)
{
  return v_uint(o ? o->h : rnd64());
}

/* A device param: an id, mostly valid, or nil. */
static val_t v_dev(conn_t *c, req_t *r)
{
  int d = (int)rnd(NDEV);

  if (chance(4)) {
    r->create_dev = c->current;
    return v_nil();
  }
  r->create_dev = d;
  return v_uint((uint64_t)d);
}

/* Pick a buffer, preferably of device @p dev (-1: any). */
static obj_t *pick_buf(conn_t *c, int dev)
{
  pool_t *p = &c->live[K_BUF];

  if (dev >= 0)
    for (int tries = 0; tries < 4 && p->n; tries++) {
      obj_t *o = pool_pick(p);
      if (o->dev == dev)
        return o;
    }
  return pool_pick(p);
}

static obj_t *pick_stream(conn_t *c, int dev)
{
  pool_t *p = &c->live[K_STREAM];

  for (int tries = 0; tries < 4 && p->n; tries++) {
    obj_t *o = pool_pick(p);
    if (dev < 0 || o->dev == dev)
      return o;
  }
  return pool_pick(p);
}

/* An offset and a length inside @p size bytes, bounded by @p max. */
static void range_in(uint64_t size, uint64_t max, uint64_t *off, uint64_t *len)
{
  *off = size ? rnd((uint32_t)size) : 0;
  *len = rnd((uint32_t)(size - *off + 1));
  if (*len > max)
    *len = max;
}

static const char *FZ_SRC =
    "extern \"C\" __global__ void fz(unsigned char *p, int v, long long w,\n"
    "                                float f, double d)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    p[0] = (unsigned char)(v + w + (long long)f + (long long)d);\n"
    "}\n"
    "extern \"C\" __global__ void fzcrash(int *p)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    *(volatile int *)(p - p) = 1;\n"
    "}\n";

static uint8_t *ir_doc; /* the IR fixture's msgpack bytes */
static size_t ir_len;

/* [x, y, z] small dimensions, or a bare x. */
static val_t v_dims(uint32_t max)
{
  if (chance(3))
    return v_uint(1 + rnd(max));
  uint32_t n = 1 + rnd(3);
  val_t a = v_arr(n);
  for (uint32_t i = 0; i < n; i++)
    a.kids[i] = v_uint(1 + (i == 0 ? rnd(max) : rnd(2)));
  return a;
}

/* fz's arguments: [buf p], [i32 v], [i64 w], [f32 f], [f64 d]. */
static val_t v_fz_args(conn_t *c, int dev)
{
  val_t a = v_arr(5), e;
  obj_t *b = pick_buf(c, dev);

  if (b != NULL && chance(3) == 0 && b->size) {
    e = v_arr(3);
    e.kids[0] = v_str("buf");
    e.kids[1] = v_h(b);
    e.kids[2] = v_uint(rnd((uint32_t)b->size));
  } else {
    e = v_arr(2);
    e.kids[0] = v_str("buf");
    e.kids[1] = v_h(b);
  }
  a.kids[0] = e;
  const char *kinds[4] = {"i32", "i64", "f32", "f64"};
  for (int i = 0; i < 4; i++) {
    e = v_arr(2);
    e.kids[0] = v_str(kinds[i]);
    e.kids[1] = i < 2 ? v_int((int64_t)rnd(1000) - 500)
                      : (i == 2 ? v_f32(1.5) : v_f64(-2.25));
    a.kids[i + 1] = e;
  }
  return a;
}

/* vec_add's arguments for buffers of at least 4 * n bytes. */
static val_t v_ir_args(conn_t *c, int dev, uint32_t *n_out)
{
  val_t a = v_arr(7), e;
  obj_t *b[3];
  uint64_t minsize = UINT64_MAX;

  for (int i = 0; i < 3; i++) {
    b[i] = pick_buf(c, dev);
    if (b[i] == NULL || b[i]->dev != dev) {
      *n_out = 0;
      return v_nil();
    }
    if (b[i]->size < minsize)
      minsize = b[i]->size;
  }
  uint32_t n = (uint32_t)(minsize / 4);
  if (n > 4096)
    n = 4096;
  for (int i = 0; i < 3; i++) {
    e = v_arr(2);
    e.kids[0] = v_str("buf");
    e.kids[1] = v_h(b[i]);
    a.kids[2 * i] = e;
    e = v_arr(2);
    e.kids[0] = v_str("i32");
    e.kids[1] = v_uint(n);
    a.kids[2 * i + 1] = e;
  }
  e = v_arr(2);
  e.kids[0] = v_str("i32");
  e.kids[1] = v_uint(n);
  a.kids[6] = e;
  *n_out = n;
  return a;
}

/* ---- the templates, one per method ---- */

static void t_none(conn_t *c, req_t *r)
{
  (void)c;
  P(r, 0);
}
static void t_dev_opt(conn_t *c, req_t *r)
{
  if (chance(3))
    P(r, 0);
  else
    P(r, 1)[0] = v_dev(c, r);
}
static void t_set_current(conn_t *c, req_t *r)
{
  int d = (int)rnd(NDEV);
  P(r, 1)[0] = v_uint((uint64_t)d);
  r->set_dev = d;
}
static void t_create_stream(conn_t *c, req_t *r)
{
  t_dev_opt(c, r);
  if (r->params.n == 0)
    r->create_dev = c->current;
  r->create = K_STREAM;
}
static void t_create_event(conn_t *c, req_t *r)
{
  t_create_stream(c, r);
  r->create = K_EVENT;
}
static void t_one(conn_t *c, req_t *r, int kind)
{
  P(r, 1)[0] = v_h(pick(c, kind));
}
static void t_event(conn_t *c, req_t *r)
{
  t_one(c, r, K_EVENT);
}
static void t_stream(conn_t *c, req_t *r)
{
  t_one(c, r, K_STREAM);
}
static void t_kernel(conn_t *c, req_t *r)
{
  t_one(c, r, K_KERNEL);
}
static void t_buffer(conn_t *c, req_t *r)
{
  t_one(c, r, K_BUF);
}
static void t_event_elapsed(conn_t *c, req_t *r)
{
  val_t *p = P(r, 2);
  p[0] = v_h(pick(c, K_EVENT));
  p[1] = v_h(pick(c, K_EVENT));
}
static void t_event_record(conn_t *c, req_t *r)
{
  obj_t *e = pick(c, K_EVENT);
  if (chance(3)) {
    P(r, 1)[0] = v_h(e);
    return;
  }
  val_t *p = P(r, 2);
  p[0] = v_h(e);
  p[1] = chance(4) ? v_nil() : v_h(pick_stream(c, e ? e->dev : -1));
}
static void t_execute_direct(conn_t *c, req_t *r)
{
  (void)c;
  uint32_t n = rnd(4);
  val_t *p = P(r, n);
  for (uint32_t i = 0; i < n; i++)
    p[i] = v_uint(i);
}
static void t_hello(conn_t *c, req_t *r)
{
  (void)c;
  uint32_t n = rnd(3);
  val_t *p = P(r, n);
  if (n > 0)
    p[0] = chance(3) ? v_nil() : v_uint(1 + rnd(3));
  if (n > 1)
    p[1] = chance(4) ? v_str("") : v_str("protofuzz");
}
static void t_ping(conn_t *c, req_t *r)
{
  (void)c;
  if (chance(4)) {
    P(r, 0);
    return;
  }
  uint32_t len = chance(20) ? rnd(BIG_LEN) : rnd(256);
  P(r, 1)[0] = chance(2) ? v_bin(bigbuf, len) : v_strn(bigbuf, len);
}
static val_t v_target(conn_t *c, req_t *r)
{
  switch (rnd(4)) {
  case 0:
    return v_nil();
  case 1:
    return v_str("host-x86_64");
  default:
    return v_dev(c, r);
  }
}
static void t_intr_find(conn_t *c, req_t *r)
{
  static const char *const names[] = {"sin", "Float32.sqrt", "global_thread_id",
                                      "Fz.f1", "nosuch"};
  if (chance(2)) {
    P(r, 1)[0] = v_str(names[rnd(5)]);
    return;
  }
  val_t *p = P(r, 2);
  p[0] = v_str(names[rnd(5)]);
  p[1] = v_target(c, r);
}
static void t_intr_list(conn_t *c, req_t *r)
{
  if (chance(2))
    P(r, 0);
  else
    P(r, 1)[0] = v_target(c, r);
}
static void t_intr_register(conn_t *c, req_t *r)
{
  (void)c;
  char *name = aalloc(32);
  snprintf(name, 32, "Fz.f%u", rnd(8));
  uint32_t n = 3 + rnd(2);
  val_t *p = P(r, n);
  p[0] = v_str(name);
  int ph = chance(2);
  p[1] = v_str(ph ? "(%s + 1)" : "warpSize");
  p[2] = v_str(chance(2) ? "uniform" : "divergent");
  if (n == 4)
    p[3] = chance(3) ? v_nil() : v_uint(ph ? 1 : rnd(2));
}
static void t_compile(conn_t *c, req_t *r)
{
  uint32_t n = 2 + rnd(3);
  val_t *p = P(r, n);
  int crash = chance(6);

  p[0] = chance(2) ? v_str(FZ_SRC) : v_bin(FZ_SRC, strlen(FZ_SRC));
  p[1] = v_str(crash ? "fzcrash" : "fz");
  r->create_size = crash ? KSRC_CRASH : KSRC_FZ;
  r->create_dev = c->current;
  if (n > 2) {
    if (chance(2)) {
      p[2] = v_nil();
    } else {
      p[2] = v_arr(1);
      p[2].kids[0] = v_str(chance(2) ? "-O1" : "-DFZ=1");
    }
  }
  if (n > 3)
    p[3] = v_target(c, r);
  r->create = K_KERNEL;
}
static void t_compile_ir(conn_t *c, req_t *r)
{
  uint32_t n = 1 + rnd(5);
  val_t *p = P(r, n);

  p[0] = v_bin(ir_doc, ir_len);
  r->create_dev = c->current;
  r->create_size = KSRC_IR;
  for (uint32_t i = 1; i < n; i++)
    p[i] = v_nil();
  if (n > 1 && chance(2))
    p[1] = v_uint(64);
  if (n > 4)
    p[4] = v_target(c, r);
  r->create = K_KERNEL;
}
static void t_generate_source(conn_t *c, req_t *r)
{
  uint32_t n = 1 + rnd(4);
  val_t *p = P(r, n);

  p[0] = v_bin(ir_doc, ir_len);
  for (uint32_t i = 1; i < n; i++)
    p[i] = v_nil();
  if (n > 1 && chance(2))
    p[1] = v_dims(32);
  if (n > 3)
    p[3] = v_target(c, r);
}
static void t_launch(conn_t *c, req_t *r)
{
  obj_t *k = pick(c, K_KERNEL);
  int dev = k ? k->dev : 0;
  uint32_t n = 6 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_h(k);
  p[1] = v_dims(8);
  p[2] = v_dims(32);
  p[3] = chance(2) ? v_nil() : v_uint(rnd(1024));
  p[4] = chance(3) ? v_nil() : v_h(pick_stream(c, dev));
  if (n > 6)
    p[6] = v_bool((int)rnd(2));
  if (k != NULL && k->size == KSRC_IR) {
    uint32_t elems = 0;
    p[5] = v_ir_args(c, dev, &elems);
    r->no_mutate = 1; /* a wrong length would write out of bounds */
    if (elems == 0)
      p[0] = v_uint(0);
  } else if (k != NULL && k->size == KSRC_CRASH) {
    p[5] = v_arr(1);
    p[5].kids[0] = v_arr(2);
    p[5].kids[0].kids[0] = v_str("buf");
    p[5].kids[0].kids[1] = v_h(pick_buf(c, dev));
  } else {
    p[5] = v_fz_args(c, dev);
  }
}
static void t_run_source(conn_t *c, req_t *r)
{
  val_t *p = P(r, 7);

  p[0] = v_str(FZ_SRC);
  p[1] = v_str("hip");
  p[2] = v_str("fz");
  p[3] = v_dims(32);
  p[4] = v_dims(8);
  p[5] = chance(2) ? v_nil() : v_uint(0);
  p[6] = v_fz_args(c, c->current);
}
static void t_mem_alloc(conn_t *c, req_t *r)
{
  static const char *const kinds[] = {
      "int8",  "uint8",  "byte",    "int16", "uint16", "float16",
      "int32", "uint32", "float32", "int64", "uint64", "float64"};
  static const int sizes[] = {1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8};
  int k = (int)rnd(12);
  uint64_t count = 1 + rnd(chance(8) ? 65536 : 1024);
  uint32_t n = 2 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_uint(count);
  p[1] = v_str(kinds[k]);
  r->create_dev = c->current;
  if (n > 2)
    p[2] = v_dev(c, r);
  r->create = K_BUF;
  r->create_size = count * (uint64_t)sizes[k];
}
static void t_mem_alloc_custom(conn_t *c, req_t *r)
{
  uint64_t count = 1 + rnd(256), es = 1 + rnd(64);
  uint32_t n = 2 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_uint(count);
  p[1] = v_uint(es);
  r->create_dev = c->current;
  if (n > 2)
    p[2] = v_dev(c, r);
  r->create = K_BUF;
  r->create_size = count * es;
}
static void t_mem_alloc_zero_copy(conn_t *c, req_t *r)
{
  obj_t *s = pick(c, K_SHM);
  uint32_t n = 1 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_h(s);
  r->create_dev = c->current;
  if (n > 1)
    p[1] = v_dev(c, r);
  r->create = K_BUF;
  r->create_size = s ? s->size : 0;
}
static void t_mem_copy_common(conn_t *c, req_t *r, int async)
{
  obj_t *d = pick_buf(c, -1);
  obj_t *s = pick_buf(c, d ? d->dev : -1);
  uint64_t doff = 0, soff = 0, len = 0, l2 = 0;
  val_t *p = P(r, async ? 6 : 5);

  if (d)
    range_in(d->size, 65536, &doff, &len);
  if (s)
    range_in(s->size, 65536, &soff, &l2);
  if (l2 < len)
    len = l2;
  p[0] = v_h(d);
  p[1] = v_uint(doff);
  p[2] = v_h(s);
  p[3] = v_uint(soff);
  p[4] = v_uint(len);
  if (async)
    p[5] = v_h(pick_stream(c, d ? d->dev : -1));
}
static void t_mem_copy(conn_t *c, req_t *r)
{
  t_mem_copy_common(c, r, 0);
}
static void t_mem_copy_async(conn_t *c, req_t *r)
{
  t_mem_copy_common(c, r, 1);
}
/* Free an object of @p kind, but keep the last one: others need it. With
 * one or none, a stale handle (or a forged one). */
static void t_destroy(conn_t *c, req_t *r, int kind)
{
  pool_t *st_ = &c->stale[kind];

  if (c->live[kind].n >= 2)
    P(r, 1)[0] = v_h(pick(c, kind));
  else
    P(r, 1)[0] = v_uint(st_->n ? st_->o[rnd((uint32_t)st_->n)].h : rnd64());
}
static void t_mem_free(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_BUF);
}
static void t_event_destroy(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_EVENT);
}
static void t_stream_destroy(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_STREAM);
}
static void t_kernel_destroy(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_KERNEL);
}
static void t_shm_free(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_SHM);
}
static void t_memset_common(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1);
  uint64_t off = 0, len = 0;
  val_t *p = P(r, async ? 5 : 4);

  if (b)
    range_in(b->size, UINT32_MAX, &off, &len);
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = v_uint(len);
  p[3] = v_uint(rnd(256));
  if (async)
    p[4] = v_h(pick_stream(c, b ? b->dev : -1));
}
static void t_memset(conn_t *c, req_t *r)
{
  t_memset_common(c, r, 0);
}
static void t_memset_async(conn_t *c, req_t *r)
{
  t_memset_common(c, r, 1);
}
static void t_read_common(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1);
  uint64_t off = 0, len = 0;
  val_t *p = P(r, async ? 4 : 3);

  if (b)
    range_in(b->size, 1 << 20, &off, &len);
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = v_uint(len);
  if (async)
    p[3] = v_h(pick_stream(c, b ? b->dev : -1));
}
static void t_read(conn_t *c, req_t *r)
{
  t_read_common(c, r, 0);
}
static void t_read_async(conn_t *c, req_t *r)
{
  t_read_common(c, r, 1);
}
static void t_write_common(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1);
  uint64_t off = 0, len = 0;
  val_t *p = P(r, async ? 4 : 3);

  if (b)
    range_in(b->size, 65536, &off, &len);
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = chance(3) ? v_strn(bigbuf, len) : v_bin(bigbuf, len);
  if (async)
    p[3] = v_h(pick_stream(c, b ? b->dev : -1));
}
static void t_write(conn_t *c, req_t *r)
{
  t_write_common(c, r, 0);
}
static void t_write_async(conn_t *c, req_t *r)
{
  t_write_common(c, r, 1);
}
static void t_shm_xfer(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1), *s = pick(c, K_SHM);
  uint64_t off = 0, soff = 0, len = 0, l2 = 0;
  val_t *p = P(r, async ? 6 : 5);

  if (b)
    range_in(b->size, 1 << 20, &off, &len);
  if (s)
    range_in(s->size, 1 << 20, &soff, &l2);
  if (l2 < len)
    len = l2;
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = v_h(s);
  p[3] = v_uint(soff);
  p[4] = v_uint(len);
  if (async)
    p[5] = v_h(pick_stream(c, b ? b->dev : -1));
}
static void t_shm_sync(conn_t *c, req_t *r)
{
  t_shm_xfer(c, r, 0);
}
static void t_shm_async(conn_t *c, req_t *r)
{
  t_shm_xfer(c, r, 1);
}
static void t_session_profile(conn_t *c, req_t *r)
{
  (void)c;
  if (chance(2))
    P(r, 0);
  else
    P(r, 1)[0] = v_bool((int)rnd(2));
}
static void t_shm_create(conn_t *c, req_t *r)
{
  static const size_t sizes[] = {4096, 65536, 65536 + 4096, 1 << 20};
  size_t size = sizes[rnd(4)];
  int kind = FD_MEMFD_GOOD;

  (void)c;
  P(r, 1)[0] = v_uint(size);
  if (chance(5))
    kind = (int)rnd(FD_NKINDS);
  if (!chance(12)) {
    int fd = fd_make(kind, size);
    if (fd >= 0) {
      r->fds[0] = fd;
      r->fd_kinds[0] = kind;
      r->nfds = 1;
    }
  }
  r->create = K_SHM;
  r->create_size = size;
}

typedef struct {
  const char *name;
  tmpl_fn fn;
  int weight; /* relative frequency */
} tmpl_t;

static const tmpl_t templates[] = {
    {"backend.info", t_none, 2},
    {"cache.clear", t_none, 1},
    {"cache.stats", t_none, 2},
    {"daemon.info", t_none, 2},
    {"device.count", t_none, 2},
    {"device.current", t_none, 2},
    {"device.get", t_dev_opt, 2},
    {"device.list", t_none, 2},
    {"device.set_current", t_set_current, 3},
    {"device.synchronize", t_dev_opt, 3},
    {"event.create", t_create_event, 8},
    {"event.destroy", t_event_destroy, 5},
    {"event.elapsed", t_event_elapsed, 6},
    {"event.query", t_event, 6},
    {"event.record", t_event_record, 10},
    {"event.synchronize", t_event, 6},
    {"execute_direct", t_execute_direct, 2},
    {"hello", t_hello, 2},
    {"intrinsics.find", t_intr_find, 2},
    {"intrinsics.list", t_intr_list, 1},
    {"intrinsics.register", t_intr_register, 2},
    {"kernel.compile", t_compile, 1},
    {"kernel.compile_cached", t_compile, 2},
    {"kernel.compile_ir", t_compile_ir, 1},
    {"kernel.destroy", t_kernel_destroy, 2},
    {"kernel.generate_source", t_generate_source, 3},
    {"kernel.info", t_kernel, 4},
    {"kernel.launch", t_launch, 10},
    {"mem.alloc", t_mem_alloc, 10},
    {"mem.alloc_custom", t_mem_alloc_custom, 5},
    {"mem.alloc_zero_copy", t_mem_alloc_zero_copy, 4},
    {"mem.copy", t_mem_copy, 6},
    {"mem.copy_async", t_mem_copy_async, 6},
    {"mem.free", t_mem_free, 10},
    {"mem.info", t_buffer, 4},
    {"mem.memset", t_memset, 5},
    {"mem.memset_async", t_memset_async, 5},
    {"mem.read", t_read, 6},
    {"mem.read_async", t_read_async, 6},
    {"mem.read_shm", t_shm_sync, 5},
    {"mem.read_shm_async", t_shm_async, 5},
    {"mem.size", t_buffer, 4},
    {"mem.write", t_write, 6},
    {"mem.write_async", t_write_async, 6},
    {"mem.write_shm", t_shm_sync, 5},
    {"mem.write_shm_async", t_shm_async, 5},
    {"ping", t_ping, 4},
    {"profile.disable", t_none, 2},
    {"profile.enable", t_none, 2},
    {"run_source", t_run_source, 1},
    {"session.info", t_none, 3},
    {"session.profile", t_session_profile, 2},
    {"shm.create", t_shm_create, 6},
    {"shm.free", t_shm_free, 4},
    {"stream.create", t_create_stream, 6},
    {"stream.default", t_create_stream, 3},
    {"stream.destroy", t_stream_destroy, 5},
    {"stream.query", t_stream, 5},
    {"stream.synchronize", t_stream, 5},
    {"supported_source_langs", t_dev_opt, 2},
};
#define NTEMPLATES (sizeof(templates) / sizeof(templates[0]))

/* Per method of the table: its template, or NULL. */
static const tmpl_t **tmpl_of;
static int weight_total;

/* Every method of the table has a template and every template a method.
 * @return the number of problems (printed). */
static int check_coverage(void)
{
  int bad = 0;

  tmpl_of = calloc(nmethods, sizeof(*tmpl_of));
  for (unsigned i = 0; i < nmethods; i++) {
    for (size_t j = 0; j < NTEMPLATES; j++)
      if (strcmp(templates[j].name, methods[i].name) == 0)
        tmpl_of[i] = &templates[j];
    if (tmpl_of[i] == NULL) {
      fprintf(stderr,
              "protofuzz: method '%s' of the table has no template in "
              "tests/protofuzz.c: add one\n",
              methods[i].name);
      bad++;
    } else {
      weight_total += tmpl_of[i]->weight;
    }
  }
  for (size_t j = 0; j < NTEMPLATES; j++)
    if (method_index(templates[j].name) < 0) {
      fprintf(stderr, "protofuzz: template '%s' names no method of the table\n",
              templates[j].name);
      bad++;
    }
  return bad;
}

static int pick_method(void)
{
  int w = (int)rnd((uint32_t)weight_total);

  for (unsigned i = 0; i < nmethods; i++) {
    w -= tmpl_of[i]->weight;
    if (w < 0)
      return (int)i;
  }
  return 0;
}

/* ------------------------------------------------------------ mutation */

static uint64_t pick_stale(conn_t *c)
{
  pool_t *p = &c->stale[rnd(K_NKINDS)];
  return p->n ? p->o[rnd((uint32_t)p->n)].h : rnd64();
}

/* A random value of any type, for a param that does not expect it (or,
 * by chance, does). Nesting stays within the decode limit. */
static val_t random_value(conn_t *c, int depth)
{
  static const uint64_t huge[] = {1ull << 31, (1ull << 32) - 1,
                                  1ull << 32, 1ull << 63,
                                  UINT64_MAX, 65536,
                                  1025,       256};
  static const int64_t neg[] = {
      -1, -2, INT32_MIN, INT64_MIN, -(int64_t)(1ull << 32), -255};
  static const uint32_t lens[] = {1,   15,   16,    63,    64,     255,
                                  256, 1024, 16384, 65536, BIG_LEN};
  val_t v;

  switch (rnd(depth >= 3 ? 16 : 19)) {
  case 0:
    return v_nil();
  case 1:
    return v_bool((int)rnd(2));
  case 2:
    return v_int((int64_t)rnd(11) - 5);
  case 3:
    return v_int(neg[rnd(6)]);
  case 4:
    return v_uint(huge[rnd(8)]);
  case 5: {
    static const double f[] = {0.0, 1.0, 1.5, -1.0, 1e30};
    return v_f32(chance(5) ? NAN : f[rnd(5)]);
  }
  case 6: {
    static const double f[] = {0.0, 1.0, 4096.0, -0.0, 1e300};
    return v_f64(chance(5) ? INFINITY : f[rnd(5)]);
  }
  case 7:
    return v_strn("", 0);
  case 8:
    return v_strn(bigbuf, lens[rnd(chance(8) ? 11 : 8)]);
  case 9: {
    char *s = aalloc(8);
    memcpy(s, "ab\0cd", 5);
    return v_strn(s, 5);
  }
  case 10:
    return v_bin(bigbuf, chance(2) ? 0 : lens[rnd(chance(8) ? 11 : 8)]);
  case 11:
    return v_uint(rnd64());
  case 12:
    return v_uint(pick_stale(c));
  case 13:
    return v_uint(nforeign ? foreign[rnd(nforeign)] : rnd64());
  case 14: {
    obj_t *o = pick(c, (int)rnd(K_NKINDS));
    return v_uint(o ? o->h : 0);
  }
  case 15:
    return v_uint(0);
  case 16: {
    uint32_t n = rnd(5);
    v = v_arr(n);
    for (uint32_t i = 0; i < n; i++)
      v.kids[i] = random_value(c, depth + 1);
    return v;
  }
  case 17: {
    uint32_t n = rnd(4);
    v = v_map(n);
    for (uint32_t i = 0; i < n; i++) {
      v.kids[2 * i] = chance(4) ? random_value(c, depth + 1)
                                : v_str(chance(2) ? "code" : "x");
      v.kids[2 * i + 1] = random_value(c, depth + 1);
    }
    return v;
  }
  default: {
    /* A chain of nested arrays, up to the depth the daemon accepts for a
     * param at this depth. */
    uint32_t n = 1 + rnd(12 - (uint32_t)depth);
    val_t top = v_arr(1), *cur = &top;
    for (uint32_t i = 1; i < n; i++) {
      cur->kids[0] = v_arr(1);
      cur = &cur->kids[0];
    }
    cur->kids[0] = v_uint(1);
    return top;
  }
  }
}

/* Replace one value somewhere inside @p v (an array or map) at random. */
static void mutate_nested(conn_t *c, val_t *v, int depth)
{
  if ((v->t != V_ARR && v->t != V_MAP) || v->n == 0) {
    *v = random_value(c, depth);
    return;
  }
  val_t *k = &v->kids[rnd(v->t == V_MAP ? 2 * v->n : v->n)];
  if ((k->t == V_ARR || k->t == V_MAP) && chance(2))
    mutate_nested(c, k, depth + 1);
  else
    *k = random_value(c, depth + 1);
}

/* Mutate a request in place, in a way that stays within the protocol: the
 * daemon must answer it. */
static void mutate_request(conn_t *c, req_t *r)
{
  val_t *p = &r->params;
  uint32_t i;

  switch (rnd(12)) {
  case 0: /* one param fewer */
    if (p->n > 0) {
      p->n--;
      snprintf(r->mut, sizeof(r->mut), "dropped last param");
      break;
    }
    /* fall through */
  case 1: { /* more params */
    uint32_t extra = chance(6) ? 250 + rnd(20) : 1 + rnd(3);
    val_t np = v_arr(p->n + extra);
    memcpy(np.kids, p->kids, sizeof(val_t) * p->n);
    for (i = p->n; i < np.n; i++)
      np.kids[i] = chance(2) ? v_nil() : random_value(c, 2);
    *p = np;
    snprintf(r->mut, sizeof(r->mut), "%u extra params", extra);
    break;
  }
  case 2: /* no params */
    p->n = 0;
    snprintf(r->mut, sizeof(r->mut), "no params");
    break;
  case 3:
  case 4:
  case 5:
  case 6: /* one param replaced */
    if (p->n == 0)
      goto method;
    i = rnd(p->n);
    p->kids[i] = random_value(c, 2);
    snprintf(r->mut, sizeof(r->mut), "param %u replaced", i);
    break;
  case 7:
  case 8: /* something inside a param */
    if (p->n == 0)
      goto method;
    i = rnd(p->n);
    mutate_nested(c, &p->kids[i], 2);
    snprintf(r->mut, sizeof(r->mut), "inside param %u", i);
    break;
  case 9: /* params not an array is a violation: see mutate_frame */
  case 10:
  method : {
    /* The method name. */
    static const char *const names[] = {
        "",    "HELLO", "mem.", "mem.alloc ", "nosuch.method",
        "pin", "pingg", "zzz",  "a.b.c.d.e.f"};
    switch (rnd(5)) {
    case 0:
      r->method = names[rnd(9)];
      r->method_len = (uint32_t)strlen(r->method);
      break;
    case 1: { /* with a NUL byte */
      char *s = aalloc(r->method_len + 2);
      memcpy(s, r->method, r->method_len);
      s[r->method_len] = '\0';
      s[r->method_len + 1] = 'x';
      r->method = s;
      r->method_len += 2;
      break;
    }
    case 2: /* long */
      r->method = bigbuf;
      r->method_len = 64 + rnd(4096);
      break;
    case 3: /* truncated */
      if (r->method_len > 0)
        r->method_len = rnd(r->method_len);
      break;
    default: /* as bin: accepted, the same method */
      r->method_bin = 1;
      break;
    }
    snprintf(r->mut, sizeof(r->mut), "method name '%.*s'%s",
             (int)(r->method_len > 24 ? 24 : r->method_len), r->method,
             r->method_bin ? " as bin" : "");
    break;
  }
  default: /* two mutations */
    mutate_request(c, r);
    char first[96];
    memcpy(first, r->mut, sizeof(first));
    mutate_request(c, r);
    size_t l = strlen(r->mut);
    snprintf(r->mut + l, sizeof(r->mut) - l, ", %s", first);
    break;
  }
}

/* --------------------------------------------------------------- output */

static struct {
  unsigned conn;
  uint32_t msgid;
  char what[128];
  uint8_t head[512];
  size_t len, kept;
} ring[RING];
static unsigned ring_next;

static void ring_add(const conn_t *c, uint32_t msgid, const char *what,
                     const uint8_t *data, size_t len)
{
  unsigned i = ring_next++ % RING;

  ring[i].conn = c->serial;
  ring[i].msgid = msgid;
  snprintf(ring[i].what, sizeof(ring[i].what), "%s", what);
  ring[i].len = len;
  ring[i].kept = len < sizeof(ring[i].head) ? len : sizeof(ring[i].head);
  memcpy(ring[i].head, data, ring[i].kept);
}

static void ring_dump(void)
{
  unsigned n = ring_next < RING ? ring_next : RING;

  fprintf(stderr, "protofuzz: the last %u messages sent (oldest first):\n", n);
  for (unsigned k = ring_next - n; k < ring_next; k++) {
    unsigned i = k % RING;
    char text[600];
    msgpack_unpacked u;
    size_t off = 0;

    text[0] = '\0';
    msgpack_unpacked_init(&u);
    if (ring[i].kept == ring[i].len &&
        msgpack_unpack_next(&u, (const char *)ring[i].head, ring[i].kept,
                            &off) == MSGPACK_UNPACK_SUCCESS &&
        off == ring[i].len)
      msgpack_object_print_buffer(text, sizeof(text), u.data);
    msgpack_unpacked_destroy(&u);
    if (text[0] == '\0') {
      size_t o = 0;
      for (size_t b = 0; b < ring[i].kept && b < 96 && o + 3 < sizeof(text);
           b++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%02x",
                              ring[i].head[b]);
    }
    fprintf(stderr, "  conn %u msgid %u [%s] %zu bytes: %s%s\n", ring[i].conn,
            ring[i].msgid, ring[i].what, ring[i].len, text,
            ring[i].kept < ring[i].len ? " ..." : "");
  }
}

static void wq_push(conn_t *c, const void *data, size_t len, const int *fds,
                    int nfds)
{
  chunk_t *k = calloc(1, sizeof(*k));

  k->data = malloc(len ? len : 1);
  memcpy(k->data, data, len);
  k->len = len;
  k->nfds = nfds;
  for (int i = 0; i < nfds; i++)
    k->fds[i] = fds[i];
  if (c->wq_tail)
    c->wq_tail->next = k;
  else
    c->wq = k;
  c->wq_tail = k;
  c->wq_bytes += len;
}

static void chunk_free(chunk_t *k)
{
  for (int i = 0; i < k->nfds; i++)
    close(k->fds[i]);
  free(k->data);
  free(k);
}

/* Write what can be written. @return 0, or -1 if the connection broke. */
static int conn_flush(conn_t *c)
{
  while (c->wq) {
    chunk_t *k = c->wq;
    struct iovec iov = {.iov_base = k->data + k->off,
                        .iov_len = k->len - k->off};
    union {
      struct cmsghdr h;
      char space[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;

    if (k->nfds > 0 && k->off == 0) {
      memset(&ctl, 0, sizeof(ctl));
      mh.msg_control = ctl.space;
      mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k->nfds);
      struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k->nfds);
      memcpy(CMSG_DATA(cm), k->fds, sizeof(int) * (size_t)k->nfds);
    }
    n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        return 0;
      return -1;
    }
    if (k->nfds > 0 && k->off == 0) {
      for (int i = 0; i < k->nfds; i++)
        close(k->fds[i]);
      k->nfds = 0;
    }
    k->off += (size_t)n;
    c->wq_bytes -= (size_t)n;
    if (k->off == k->len) {
      c->wq = k->next;
      if (c->wq == NULL)
        c->wq_tail = NULL;
      chunk_free(k);
    }
  }
  return 0;
}

static int pend_find(conn_t *c, uint32_t msgid)
{
  for (int i = 0; i < c->npend; i++)
    if (c->pend[i].msgid == msgid)
      return i;
  return -1;
}

static uint32_t new_msgid(conn_t *c)
{
  uint32_t id;

  do {
    if (chance(50))
      id = chance(2) ? 0 : UINT32_MAX;
    else
      id = c->next_msgid++;
  } while (pend_find(c, id) >= 0);
  return id;
}

/* Expect a reply to @p msgid, for method @p midx (-1: a mutated name). */
static pend_t *pend_add(conn_t *c, uint32_t msgid, int midx)
{
  pend_t *p;

  if (c->npend == MAX_PEND)
    return NULL;
  p = &c->pend[c->npend++];
  memset(p, 0, sizeof(*p));
  p->msgid = msgid;
  p->midx = (int16_t)midx;
  p->create = -1;
  p->set_dev = -1;
  return p;
}

/* A request that frees an object: its handle goes from the live pool to
 * the stale one, whether or not the daemon takes the request. */
static void forget_freed(conn_t *c, const req_t *r)
{
  static const struct {
    const char *m;
    int kind;
  } frees[] = {{"mem.free", K_BUF},
               {"stream.destroy", K_STREAM},
               {"event.destroy", K_EVENT},
               {"kernel.destroy", K_KERNEL},
               {"shm.free", K_SHM}};

  if (r->midx < 0 || r->params.t != V_ARR || r->params.n == 0 ||
      r->params.kids[0].t != V_UINT)
    return;
  for (size_t i = 0; i < sizeof(frees) / sizeof(frees[0]); i++)
    if (strcmp(methods[r->midx].name, frees[i].m) == 0) {
      uint64_t h = r->params.kids[0].x.u;
      pool_remove(&c->live[frees[i].kind], h);
      pool_add(&c->stale[frees[i].kind], (obj_t){.h = h});
    }
}

/* Pack and queue request @p r. */
static void send_request(conn_t *c, req_t *r, int is_notify)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t msgid = 0;
  char what[128];

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  if (is_notify) {
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint8(&pk, 2);
  } else {
    msgid = new_msgid(c);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, 0);
    msgpack_pack_uint32(&pk, msgid);
  }
  if (r->method_bin) {
    msgpack_pack_bin(&pk, r->method_len);
    msgpack_pack_bin_body(&pk, r->method, r->method_len);
  } else {
    msgpack_pack_str(&pk, r->method_len);
    msgpack_pack_str_body(&pk, r->method, r->method_len);
  }
  pack_val(&pk, &r->params);
  snprintf(what, sizeof(what), "%s%s%s%s", is_notify ? "notification " : "",
           r->mut[0] ? r->mut : "valid", r->nfds ? ", with fds" : "", "");
  ring_add(c, msgid, what, (const uint8_t *)sb.data, sb.size);
  if (!is_notify) {
    int same = r->midx >= 0 && r->method_len == strlen(methods[r->midx].name) &&
               memcmp(r->method, methods[r->midx].name, r->method_len) == 0;
    pend_t *p = pend_add(c, msgid, same ? r->midx : -1);
    if (p != NULL) {
      p->create = (int8_t)(r->mut[0] ? -1 : r->create);
      p->create_dev = (int8_t)r->create_dev;
      p->create_size = r->create_size;
      p->set_dev = r->set_dev;
      p->valid = r->mut[0] == '\0';
      if (r->midx >= 0 && is_compile(r->midx)) {
        p->compile = 1;
        compiles++;
      }
    }
  }
  st.requests++;
  if (is_notify)
    st.notifications++;
  else if (r->mut[0])
    st.mutated++;
  else
    st.valid++;
  for (int i = 0; i < r->nfds; i++)
    st.fds_by_kind[r->fd_kinds[i]]++;
  st.fds_sent += (uint64_t)r->nfds;
  forget_freed(c, r);
  if (r->midx >= 0 && r->midx < 256)
    st.m_sent[r->midx]++;
  wq_push(c, sb.data, sb.size, r->fds, r->nfds);
  r->nfds = 0;
  c->sent++;
  msgpack_sbuffer_destroy(&sb);
}

/* Build a request for method @p midx from its template. */
static void build(conn_t *c, req_t *r, int midx)
{
  memset(r, 0, sizeof(*r));
  r->midx = midx;
  r->method = methods[midx].name;
  r->method_len = (uint32_t)strlen(r->method);
  r->create = -1;
  r->set_dev = -1;
  r->create_dev = c->current;
  tmpl_of[midx]->fn(c, r);
}

/* The threads a launch's geometry asks for, or 0 when it is not one. */
static uint64_t dims_product(const val_t *v)
{
  if (v->t == V_UINT)
    return v->x.u;
  if (v->t != V_ARR || v->n == 0 || v->n > 3)
    return 0;
  uint64_t p = 1;
  for (uint32_t i = 0; i < v->n; i++) {
    if (v->kids[i].t != V_UINT || v->kids[i].x.u == 0)
      return 0;
    p *= v->kids[i].x.u;
    if (p > (1ull << 40))
      return 1ull << 40;
  }
  return p;
}

/* A launch that would keep the one CPU kernel runner busy for long (all
 * sessions share it): most are not sent. */
static int too_costly(const req_t *r)
{
  const char *m = methods[r->midx].name;
  int gi, bi;

  if (strcmp(m, "kernel.launch") == 0)
    gi = 1, bi = 2;
  else if (strcmp(m, "run_source") == 0)
    gi = 4, bi = 3;
  else
    return 0;
  if (r->params.t != V_ARR || r->params.n <= (uint32_t)(gi > bi ? gi : bi))
    return 0;
  uint64_t g = dims_product(&r->params.kids[gi]);
  uint64_t b = dims_product(&r->params.kids[bi]);
  return g * b > (1u << 16) && b <= 1024 && !chance(40);
}

/* ------------------------------------------------- protocol violations */

static void pack_head(msgpack_packer *pk, uint32_t msgid, const char *m)
{
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, 0);
  msgpack_pack_uint32(pk, msgid);
  msgpack_pack_str(pk, strlen(m));
  msgpack_pack_str_body(pk, m, strlen(m));
}

/* Send a message that breaks the protocol: the daemon must close the
 * connection. */
static void send_violation(conn_t *c)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  char what[96];
  int kind = (int)rnd(16);
  uint8_t raw[16];
  size_t nraw = 0;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  switch (kind) {
  case 0: /* negative msgid */
  case 1: /* msgid above 2^32-1 */
  case 2: /* float, str or nil msgid */
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, 0);
    if (kind == 0)
      msgpack_pack_int64(&pk, -1 - (int64_t)rnd(1000));
    else if (kind == 1)
      msgpack_pack_uint64(&pk, (1ull << 32) + rnd(1000));
    else if (chance(3))
      msgpack_pack_double(&pk, 1.0);
    else if (chance(2))
      msgpack_pack_str_with_body(&pk, "7", 1);
    else
      msgpack_pack_nil(&pk);
    msgpack_pack_str_with_body(&pk, "ping", 4);
    msgpack_pack_array(&pk, 0);
    snprintf(what, sizeof(what), "bad msgid");
    break;
  case 3: /* not an array */
    if (chance(2))
      msgpack_pack_uint32(&pk, rnd64() & 0x7fffffff);
    else {
      msgpack_pack_map(&pk, 1);
      msgpack_pack_nil(&pk);
      msgpack_pack_nil(&pk);
    }
    snprintf(what, sizeof(what), "not an array");
    break;
  case 4: /* a request of 3 or 5 elements, an empty array */
    msgpack_pack_array(&pk, chance(3) ? 0 : (chance(2) ? 3 : 5));
    if (sb.size == 1 && sb.data[0] == (char)0x90)
      ;
    else {
      msgpack_pack_uint8(&pk, 0);
      msgpack_pack_uint32(&pk, 1);
      msgpack_pack_str_with_body(&pk, "ping", 4);
      if (((uint8_t)sb.data[0] & 0x0f) == 5) {
        msgpack_pack_array(&pk, 0);
        msgpack_pack_nil(&pk);
      }
    }
    snprintf(what, sizeof(what), "wrong request arity");
    break;
  case 5: /* a response from the client */
    proto_pack_response(&pk, 1);
    msgpack_pack_nil(&pk);
    snprintf(what, sizeof(what), "response from the client");
    break;
  case 6: /* unknown message type */
    msgpack_pack_array(&pk, 4);
    if (chance(2))
      msgpack_pack_uint8(&pk, 3 + (uint8_t)rnd(200));
    else
      msgpack_pack_int8(&pk, -1);
    msgpack_pack_uint32(&pk, 1);
    msgpack_pack_str_with_body(&pk, "ping", 4);
    msgpack_pack_array(&pk, 0);
    snprintf(what, sizeof(what), "unknown message type");
    break;
  case 7: /* method not a string */
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, 0);
    msgpack_pack_uint32(&pk, 1);
    if (chance(2))
      msgpack_pack_uint8(&pk, 7);
    else
      msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 0);
    snprintf(what, sizeof(what), "method not a string");
    break;
  case 8: /* params not an array */
    pack_head(&pk, 1, "ping");
    if (chance(2))
      msgpack_pack_map(&pk, 0);
    else
      msgpack_pack_nil(&pk);
    snprintf(what, sizeof(what), "params not an array");
    break;
  case 9: { /* nested deeper than --max-depth */
    unsigned depth = 17 + rnd(10);
    pack_head(&pk, 1, "ping");
    for (unsigned i = 0; i < depth; i++)
      msgpack_pack_array(&pk, 1);
    msgpack_pack_nil(&pk);
    snprintf(what, sizeof(what), "nested %u deep", depth);
    break;
  }
  case 10: /* an array or map declared larger than its limit */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 1);
    if (chance(2))
      msgpack_pack_array(&pk, (1u << 20) + 1 + rnd(1000));
    else
      msgpack_pack_map(&pk, (1u << 16) + 1 + rnd(1000));
    snprintf(what, sizeof(what), "container over its limit (header only)");
    break;
  case 11: /* a str or bin declared larger than the message limit */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 1);
    if (chance(2))
      msgpack_pack_str(&pk, (9u << 20) + rnd(1u << 30));
    else
      msgpack_pack_bin(&pk, (9u << 20) + rnd(1u << 30));
    snprintf(what, sizeof(what), "str/bin over the message limit (header)");
    break;
  case 12: /* the byte 0xc1 */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 1);
    raw[nraw++] = 0xc1;
    snprintf(what, sizeof(what), "0xc1");
    break;
  case 13: /* too many values: 4M + 1 nils in five arrays */
    pack_head(&pk, 1, "ping");
    msgpack_pack_array(&pk, 5);
    for (int a = 0; a < 5; a++) {
      uint32_t n = a < 4 ? (1u << 20) - 2 : 100;
      msgpack_pack_array(&pk, n);
      for (uint32_t i = 0; i < n; i++)
        msgpack_pack_nil(&pk);
    }
    snprintf(what, sizeof(what), "too many values");
    break;
  case 14: /* more than 8 descriptors for an incomplete request */
  default: {
    int fds[MAX_FDS], n = 0, want = 9 + (int)rnd(MAX_FDS - 8);
    pack_head(&pk, new_msgid(c), "ping");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_bin(&pk, 64);
    msgpack_pack_bin_body(&pk, bigbuf, 64);
    size_t cut = 1 + rnd((uint32_t)sb.size - 1);
    for (int i = 0; i < want; i++) {
      int k = (int)rnd(FD_NKINDS);
      /* Only kinds the daemon can take, so that the close is the
       * violation and not a refused descriptor (both are fine). */
      if (k == FD_OPATH || k == FD_HIPD_CONN)
        k = FD_EVENTFD;
      int fd = fd_make(k, 4096);
      if (fd >= 0) {
        fds[n++] = fd;
        st.fds_by_kind[k]++;
        st.fds_sent++;
      }
    }
    ring_add(c, 0, "an incomplete request with 9 or more descriptors",
             (const uint8_t *)sb.data, cut);
    wq_push(c, sb.data, cut, fds, n);
    msgpack_sbuffer_destroy(&sb);
    c->doomed = 1;
    c->doomed_at = harness_now_ms();
    c->doom_what = "more than 8 descriptors with an incomplete request";
    st.violations++;
    st.requests++;
    return;
  }
  }
  if (nraw)
    msgpack_sbuffer_write(&sb, (const char *)raw, nraw);
  ring_add(c, 0, what, (const uint8_t *)sb.data, sb.size);
  wq_push(c, sb.data, sb.size, NULL, 0);
  msgpack_sbuffer_destroy(&sb);
  c->doomed = 1;
  c->doomed_at = harness_now_ms();
  c->doom_what = "a protocol violation";
  st.violations++;
  st.requests++;
}

/* Send the first bytes of a request, and no more: the daemon must close
 * the connection (--request-timeout). */
static void send_stall(conn_t *c)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  pack_head(&pk, new_msgid(c), "mem.write");
  msgpack_pack_array(&pk, 3);
  msgpack_pack_uint64(&pk, rnd64());
  msgpack_pack_uint8(&pk, 0);
  msgpack_pack_bin(&pk, 4096);
  msgpack_pack_bin_body(&pk, bigbuf, 4096);
  size_t cut = 1 + rnd((uint32_t)sb.size - 1);
  ring_add(c, 0, "truncated, kept open", (const uint8_t *)sb.data, cut);
  wq_push(c, sb.data, cut, NULL, 0);
  msgpack_sbuffer_destroy(&sb);
  c->doomed = 1;
  c->doomed_at = harness_now_ms();
  c->doom_what = "a truncated request";
  st.stalled++;
  st.requests++;
}

/* Send random bytes. */
static void send_garbage(conn_t *c)
{
  uint8_t g[64];
  size_t n = 1 + rnd(sizeof(g));

  for (size_t i = 0; i < n; i++)
    g[i] = (uint8_t)rnd64();
  ring_add(c, 0, "garbage", g, n);
  wq_push(c, g, n, NULL, 0);
  c->maybe = 1;
  c->doomed_at = harness_now_ms();
  st.garbage++;
  st.requests++;
}

/* ----------------------------------------------------------- connection */

static void conn_free(conn_t *c)
{
  for (int i = 0; i < c->npend; i++)
    compiles -= c->pend[i].compile;
  while (c->wq) {
    chunk_t *k = c->wq;
    c->wq = k->next;
    chunk_free(k);
  }
  if (c->fd >= 0)
    close(c->fd);
  free(c->rbuf);
  free(c);
}

static conn_t *conn_open(void)
{
  conn_t *c = calloc(1, sizeof(*c));

  c->fd = harness_raw_connect(daemon_->socket);
  if (c->fd < 0) {
    fail("cannot connect to the daemon: %s", strerror(errno));
    free(c);
    return NULL;
  }
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  c->serial = ++conn_serial;
  c->no_hello = chance(8);
  c->next_msgid = (uint32_t)rnd64();
  c->setup = c->no_hello ? 0 : 1;
  if (c->no_hello && chance(3)) {
    /* Says nothing: the daemon must close it (--hello-timeout). */
    c->doomed = 1;
    c->doomed_at = harness_now_ms();
    c->doom_what = "nothing (no hello)";
    st.silent++;
  }
  c->end_at = harness_now_ms() + 200 + rnd(chance(4) ? 20000 : 4000);
  st.conns++;
  return c;
}

/* The daemon closed @p c (EOF or error on read). */
static void conn_closed_by_daemon(conn_t *c)
{
  st.closed_by_daemon++;
  if (!c->doomed && !c->maybe) {
    st.closed_unexpected++;
    if (opt.verbose)
      fprintf(stderr,
              "protofuzz: conn %u closed by the daemon, no violation "
              "sent\n",
              c->serial);
  }
}

/* Close @p c ourselves, in one of four ways. */
static void conn_close_ours(conn_t *c)
{
  int how = (int)rnd(4);

  switch (how) {
  case 0: /* plain close, maybe with requests in flight */
    break;
  case 1: { /* reset: SO_LINGER 0 */
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    break;
  }
  case 2: { /* mid-request: half a request, then close */
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_head(&pk, 1, "mem.write");
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint64(&pk, rnd64());
    msgpack_pack_uint8(&pk, 0);
    msgpack_pack_bin(&pk, 4096);
    msgpack_pack_bin_body(&pk, bigbuf, 4096);
    size_t cut = 1 + rnd((uint32_t)sb.size - 1);
    ring_add(c, 1, "truncated, then closed", (const uint8_t *)sb.data, cut);
    (void)!send(c->fd, sb.data, cut, MSG_NOSIGNAL | MSG_DONTWAIT);
    msgpack_sbuffer_destroy(&sb);
    st.truncated++;
    break;
  }
  case 3: /* shut down writing only; the reads go on until closed */
    shutdown(c->fd, SHUT_WR);
    harness_raw_wait_closed(c->fd, 200);
    break;
  }
  st.closed_by_us[how]++;
}

/* Queue the requests a new connection makes first: hello, objects of every
 * kind on both devices, a kernel, a shared buffer. */
static void conn_setup(conn_t *c)
{
  static const char *const seq[] = {
      "hello",         "mem.alloc",    "mem.alloc",    "stream.create",
      "stream.create", "event.create", "event.create", "kernel.compile_cached",
      "shm.create",    "mem.alloc"};
  req_t r;

  for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
    int midx = method_index(seq[i]);
    if (midx < 0)
      continue; /* the coverage check reports it */
    arena_used = 0;
    build(c, &r, midx);
    if (strcmp(seq[i], "hello") == 0) {
      val_t *p = P(&r, 2);
      p[0] = v_uint(1);
      p[1] = v_str("protofuzz");
    } else if (strcmp(seq[i], "kernel.compile_cached") == 0) {
      val_t *p = P(&r, 4);
      p[0] = v_str(FZ_SRC);
      p[1] = v_str("fz");
      p[2] = v_nil();
      p[3] = v_uint(i % NDEV);
      r.create_dev = (int)(i % NDEV);
      r.create_size = KSRC_FZ;
    } else if (strcmp(seq[i], "mem.alloc") == 0 ||
               strcmp(seq[i], "stream.create") == 0 ||
               strcmp(seq[i], "event.create") == 0) {
      int dev = (int)(i % NDEV);
      if (strcmp(seq[i], "mem.alloc") == 0) {
        val_t *p = P(&r, 3);
        p[0] = v_uint(4096);
        p[1] = v_str("byte");
        p[2] = v_uint((uint64_t)dev);
        r.create_size = 4096;
      } else {
        P(&r, 1)[0] = v_uint((uint64_t)dev);
      }
      r.create_dev = dev;
    }
    send_request(c, &r, 0);
  }
}

/* Generate the next message(s) for @p c. */
static void conn_generate(conn_t *c)
{
  req_t r;
  int midx;

  if (c->setup) {
    c->setup = 0;
    c->setup_at = harness_now_ms();
    conn_setup(c);
    return;
  }
  /* The objects first: the requests that use them come after. */
  if (c->setup_at && c->npend > 0 && harness_now_ms() - c->setup_at < 10000)
    return;
  c->setup_at = 0;
  if (c->no_hello && c->sent > 20 + rnd(20)) {
    c->no_hello = 0;
    c->setup = 1;
    return;
  }
  switch (rnd(8000)) {
  case 0:
    send_violation(c);
    return;
  case 1:
    send_garbage(c);
    return;
  default:
    break;
  }
  arena_used = 0;
  do {
    do
      midx = pick_method();
    while (compiles >= MAX_COMPILES && is_compile(midx));
    build(c, &r, midx);
  } while (too_costly(&r) && (arena_used = 0, 1));
  /* Descriptors with any request, now and then. */
  if (r.nfds == 0 && chance(100)) {
    int n = 1 + (int)rnd(2);
    for (int i = 0; i < n; i++) {
      int k = (int)rnd(FD_NKINDS);
      int fd = fd_make(k, 65536);
      if (fd >= 0) {
        r.fds[r.nfds] = fd;
        r.fd_kinds[r.nfds++] = k;
      }
    }
  }
  if (!r.no_mutate && rnd(100) < 55) {
    mutate_request(c, &r);
    if (too_costly(&r)) {
      for (int i = 0; i < r.nfds; i++)
        close(r.fds[i]);
      return;
    }
  }
  send_request(c, &r, chance(60));
}

/* --------------------------------------------------------------- replies */

static int code_known(int64_t code)
{
  return code <= -1 && code > HIPD_ERRNO_MAX_ && code != HIPD_EDISCONNECTED &&
         code != HIPD_ECONNECT;
}

static void record_handle(conn_t *c, const pend_t *p, const msgpack_object *res)
{
  const msgpack_object *h = res;

  if (p->create < 0)
    return;
  if (res->type == MSGPACK_OBJECT_MAP)
    h = proto_map_get(res, p->create == K_SHM ? "handle" : "kernel");
  if (h == NULL || h->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return;
  obj_t o = {.h = h->via.u64, .size = p->create_size, .dev = p->create_dev};
  if (p->create == K_BUF && o.size == 0)
    return;
  pool_add(&c->live[p->create], o);
  if (opt.verbose > 1)
    fprintf(stderr, "conn %u: new %d handle 0x%llx\n", c->serial, p->create,
            (unsigned long long)o.h);
  foreign[nforeign < 64 ? nforeign++ : rnd(64)] = o.h;
}

/* Check one reply frame from @p c. */
static void check_reply(conn_t *c, const uint8_t *buf, size_t len)
{
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason = NULL;
  int i;

  msgpack_zone_init(&zone, 4096);
  if (proto_msg_decode(buf, len, &zone, &msg, &reason) != 0) {
    fail("conn %u: the daemon sent a malformed message: %s", c->serial, reason);
    goto out;
  }
  if (msg.type != PROTO_RESPONSE) {
    fail("conn %u: the daemon sent a message of type %d (only responses are "
         "defined)",
         c->serial, msg.type);
    goto out;
  }
  i = pend_find(c, msg.msgid);
  if (i < 0) {
    fail("conn %u: a reply with msgid %u, which is not in flight on this "
         "connection",
         c->serial, msg.msgid);
    goto out;
  }
  pend_t p = c->pend[i];
  c->pend[i] = c->pend[--c->npend];
  compiles -= p.compile;
  st.replies++;
  if (p.midx >= 0 && p.midx < 256)
    st.m_ok[p.midx] += msg.error->type == MSGPACK_OBJECT_NIL;
  const char *mname = p.midx >= 0 ? methods[p.midx].name : "(mutated name)";
  if (msg.error->type == MSGPACK_OBJECT_NIL) {
    st.ok++;
    if (p.midx >= 0 && strcmp(mname, "hello") == 0) {
      const msgpack_object *sid = proto_map_get(msg.result, "session");
      c->hello = 1;
      if (sid != NULL && sid->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        c->sid = sid->via.u64;
    }
    if (p.set_dev >= 0)
      c->current = p.set_dev;
    record_handle(c, &p, msg.result);
    goto out;
  }
  const msgpack_object *e = msg.error;
  if (e->type != MSGPACK_OBJECT_MAP || e->via.map.size != 3) {
    fail("conn %u msgid %u (%s): the error is not a map of 3 keys", c->serial,
         msg.msgid, mname);
    goto out;
  }
  const msgpack_object *code = proto_map_get(e, "code");
  const msgpack_object *name = proto_map_get(e, "name");
  const msgpack_object *text = proto_map_get(e, "message");
  if (code == NULL || code->type != MSGPACK_OBJECT_NEGATIVE_INTEGER ||
      name == NULL || name->type != MSGPACK_OBJECT_STR || text == NULL ||
      text->type != MSGPACK_OBJECT_STR) {
    fail("conn %u msgid %u (%s): the error is not {code: negative int, name: "
         "str, message: str}",
         c->serial, msg.msgid, mname);
    goto out;
  }
  int64_t cv = code->via.i64;
  if (!code_known(cv)) {
    fail("conn %u msgid %u (%s): unknown or client-only error code %" PRId64,
         c->serial, msg.msgid, mname, cv);
    goto out;
  }
  st.by_code[-cv]++;
  if (p.valid && cv == HIPD_EPARAMS) {
    st.valid_eparams++;
    if (opt.verbose)
      fprintf(stderr, "protofuzz: valid %s got EPARAMS: %.*s\n", mname,
              (int)text->via.str.size, text->via.str.ptr);
  }
  const char *want = hipd_err_name((int)cv);
  if (name->via.str.size != strlen(want) ||
      memcmp(name->via.str.ptr, want, name->via.str.size) != 0) {
    fail("conn %u msgid %u (%s): error %" PRId64 " named '%.*s', not '%s'",
         c->serial, msg.msgid, mname, cv, (int)name->via.str.size,
         name->via.str.ptr, want);
    goto out;
  }
  if (text->via.str.size == 0 || text->via.str.size > 16383) {
    fail("conn %u msgid %u (%s): %s with a message of %u bytes", c->serial,
         msg.msgid, mname, want, text->via.str.size);
    goto out;
  }
  if (p.midx >= 0 && cv != HIPD_ENOMETHOD && cv != HIPD_ESHUTDOWN) {
    size_t ml = strlen(mname);
    if (text->via.str.size < ml + 2 || memcmp(text->via.str.ptr, mname, ml) ||
        memcmp(text->via.str.ptr + ml, ": ", 2)) {
      fail("conn %u msgid %u (%s): the message of %s does not begin with "
           "'%s: ': '%.*s'",
           c->serial, msg.msgid, mname, want, mname,
           (int)(text->via.str.size > 200 ? 200 : text->via.str.size),
           text->via.str.ptr);
      goto out;
    }
  }
  if (msg.result->type != MSGPACK_OBJECT_NIL) {
    fail("conn %u msgid %u (%s): an error and a result", c->serial, msg.msgid,
         mname);
    goto out;
  }
  if (cv == HIPD_EINTERNAL) {
    fail("conn %u msgid %u (%s): EINTERNAL: %.*s", c->serial, msg.msgid, mname,
         (int)text->via.str.size, text->via.str.ptr);
    goto out;
  }
  if (opt.verbose > 1)
    fprintf(stderr, "conn %u %s -> %s %.*s\n", c->serial, mname, want,
            (int)(text->via.str.size > 160 ? 160 : text->via.str.size),
            text->via.str.ptr);
out:
  msgpack_zone_destroy(&zone);
}

/* Read what @p c has. @return 0, or -1 once the daemon closed it. */
static int conn_read(conn_t *c)
{
  proto_limits_t lim;

  proto_limits_default(&lim);
  for (;;) {
    if (c->rcap - c->rlen < 65536) {
      size_t ncap = c->rcap ? c->rcap * 2 : 262144;
      c->rbuf = realloc(c->rbuf, ncap);
      c->rcap = ncap;
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
    if (n == 0)
      return -1;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        break;
      return -1;
    }
    c->rlen += (size_t)n;
    if ((size_t)n < 65536)
      break;
  }
  size_t off = 0;
  while (off < c->rlen && !failed) {
    size_t need = 0;
    const char *reason = NULL;
    long long n =
        proto_frame_scan(&lim, c->rbuf + off, c->rlen - off, &need, &reason);
    if (n < 0) {
      fail("conn %u: the daemon sent bytes that do not frame: %s", c->serial,
           reason);
      break;
    }
    if (n == 0)
      break;
    check_reply(c, c->rbuf + off, (size_t)n);
    off += (size_t)n;
  }
  memmove(c->rbuf, c->rbuf + off, c->rlen - off);
  c->rlen -= off;
  return 0;
}

/* ------------------------------------------------- the well-behaved one */

static volatile int good_stop;
static volatile uint64_t good_rounds, good_ops;
static char good_fail[2048];
static const char *GOOD_SRC =
    "extern \"C\" __global__ void good(unsigned *y, const unsigned *x,\n"
    "                                  unsigned a, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    y[i] = y[i] * 3u + x[i] + a;\n"
    "}\n";

#define GOOD(conn, expr)                                                       \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    good_ops++;                                                                \
    if (rc_ != 0) {                                                            \
      snprintf(good_fail, sizeof(good_fail), "round %llu: %s -> %s (%s)",      \
               (unsigned long long)good_rounds, #expr, hipd_err_name(rc_),     \
               hipd_last_error(conn));                                         \
      goto out;                                                                \
    }                                                                          \
  } while (0)
#define GOOD_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      int n_ = snprintf(good_fail, sizeof(good_fail),                          \
                        "round %llu: ", (unsigned long long)good_rounds);      \
      snprintf(good_fail + n_, sizeof(good_fail) - (size_t)n_, __VA_ARGS__);   \
      goto out;                                                                \
    }                                                                          \
  } while (0)

/* One connection's life: kernels on both devices, then rounds until
 * @p rounds are done or the fuzzer stops. @return 0, or -1 (good_fail). */
static int good_session(rng_t *gr, int rounds)
{
  hipd_conn_t *conn = NULL;
  hipd_kernel_t k[NDEV] = {0};
  hipd_shm_t *shm = NULL;
  hipd_args_t *args = hipd_args_new();
  uint32_t *x = NULL, *y = NULL, *back = NULL;
  int rc = -1;

  GOOD(NULL, hipd_connect2(daemon_->socket, "protofuzz-good", &conn));
  hipd_set_timeout(conn, 120000);
  for (int d = 0; d < NDEV; d++)
    GOOD(conn, hipd_kernel_compile_cached(conn, d, GOOD_SRC, "good", NULL,
                                          &k[d], NULL));
  GOOD(conn, hipd_shm_create(conn, 65536, &shm));
  for (int round = 0; round < rounds && !good_stop; round++, good_rounds++) {
    int dev = (int)(rng_next(gr) % NDEV);
    int n = 1 + (int)(rng_next(gr) % 4096);
    uint32_t a = (uint32_t)rng_next(gr);
    hipd_buffer_t bx = 0, by = 0;
    hipd_stream_t s = 0;
    hipd_event_t e0 = 0, e1 = 0;
    float ms = -1;
    int idle = 0;
    char pong[16];
    size_t pong_len = 0;

    x = malloc(4 * (size_t)n);
    y = malloc(4 * (size_t)n);
    back = malloc(4 * (size_t)n);
    for (int i = 0; i < n; i++) {
      x[i] = (uint32_t)rng_next(gr);
      y[i] = (uint32_t)rng_next(gr);
    }
    GOOD(conn, hipd_ping(conn, "good", 4, pong, sizeof(pong), &pong_len));
    GOOD_CHECK(pong_len == 4 && memcmp(pong, "good", 4) == 0, "ping echo");
    GOOD(conn, hipd_mem_alloc(conn, dev, (uint64_t)n, "uint32", &bx));
    GOOD(conn, hipd_mem_alloc(conn, dev, (uint64_t)n, "uint32", &by));
    GOOD(conn, hipd_stream_create(conn, dev, &s));
    GOOD(conn, hipd_event_create(conn, dev, &e0));
    GOOD(conn, hipd_event_create(conn, dev, &e1));
    GOOD(conn, hipd_mem_write(conn, bx, 0, x, 4 * (size_t)n));
    GOOD(conn, hipd_mem_write_async(conn, by, 0, y, 4 * (size_t)n, s));
    GOOD(conn, hipd_event_record(conn, e0, s));
    hipd_args_clear(args);
    hipd_args_buffer(args, by, 0);
    hipd_args_buffer(args, bx, 0);
    hipd_args_i32(args, (int32_t)a);
    hipd_args_i32(args, n);
    uint32_t grid[3] = {(uint32_t)(n + 127) / 128, 1, 1},
             block[3] = {128, 1, 1};
    GOOD(conn, hipd_kernel_launch(conn, k[dev], grid, block, 0, s, args));
    GOOD(conn, hipd_event_record(conn, e1, s));
    GOOD(conn, hipd_event_synchronize(conn, e1));
    GOOD(conn, hipd_event_elapsed(conn, e0, e1, &ms));
    GOOD_CHECK(ms >= 0, "event.elapsed %f ms between marks in order", ms);
    GOOD(conn, hipd_mem_read_async(conn, by, 0, back, 4 * (size_t)n, s));
    for (int i = 0; i < n; i++)
      GOOD_CHECK(back[i] == y[i] * 3u + x[i] + a,
                 "device %d: y[%d] = %u after the kernel, expected %u", dev, i,
                 back[i], y[i] * 3u + x[i] + a);
    GOOD(conn, hipd_stream_synchronize(conn, s));
    GOOD(conn, hipd_stream_query(conn, s, &idle));
    GOOD_CHECK(idle == 1, "stream.query after stream.synchronize: %d", idle);
    /* memset then copy into y, read back. */
    int half = n / 2;
    GOOD(conn, hipd_mem_memset(conn, bx, 0, 4 * (size_t)half, 0xab));
    GOOD(conn, hipd_mem_copy(conn, by, 0, bx, 0, 4 * (size_t)n));
    GOOD(conn, hipd_mem_read(conn, by, 0, back, 4 * (size_t)n));
    for (int i = 0; i < n; i++)
      GOOD_CHECK(back[i] == (i < half ? 0xababababu : x[i]),
                 "device %d: y[%d] = %08x after memset and copy", dev, i,
                 back[i]);
    /* Through the shared buffer. */
    uint8_t *sp = hipd_shm_ptr(shm);
    size_t sl = 4 * (size_t)n < 32768 ? 4 * (size_t)n : 32768;
    for (size_t i = 0; i < sl; i++)
      sp[i] = (uint8_t)(i * 7 + round);
    GOOD(conn, hipd_mem_write_shm(conn, by, 0, shm, 0, sl));
    GOOD(conn, hipd_mem_read_shm(conn, by, 0, shm, 32768, sl));
    for (size_t i = 0; i < sl; i++)
      GOOD_CHECK(sp[32768 + i] == (uint8_t)(i * 7 + round),
                 "device %d: shared byte %zu after write_shm/read_shm", dev, i);
    /* The session's resources are what it holds. */
    hipd_info_t *info = NULL;
    int64_t nb = -1;
    GOOD(conn, hipd_session_info(conn, &info));
    hipd_info_int(info, "resources.buffers", &nb);
    hipd_info_free(info);
    GOOD_CHECK(nb == 2, "session.info resources.buffers = %lld, holds 2",
               (long long)nb);
    GOOD(conn, hipd_event_destroy(conn, e0));
    GOOD(conn, hipd_event_destroy(conn, e1));
    GOOD(conn, hipd_stream_destroy(conn, s));
    GOOD(conn, hipd_mem_free(conn, bx));
    GOOD(conn, hipd_mem_free(conn, by));
    free(x);
    free(y);
    free(back);
    x = y = back = NULL;
  }
  rc = 0;
out:
  free(x);
  free(y);
  free(back);
  if (shm != NULL && conn != NULL)
    hipd_shm_free(conn, shm);
  hipd_args_free(args);
  if (conn != NULL)
    hipd_close(conn);
  return rc;
}

static void *good_main(void *arg)
{
  rng_t gr = {.s = opt.seed ^ 0x600d600d600dull};

  (void)arg;
  while (!good_stop)
    if (good_session(&gr, 10 + (int)(rng_next(&gr) % 30)) != 0)
      break;
  return NULL;
}

/* ------------------------------------------------------ the log, the doc */

static char *read_file(const char *path, size_t *len)
{
  return ir_json_read_file(path, len);
}

/* The reasons of the table "Why a session is closed" of PROTOCOL.md. */
static char reasons[32][96];
static int nreasons;

static int load_reasons(const char *path)
{
  size_t len = 0;
  char *text = read_file(path, &len);
  char *line, *save = NULL;
  int in_section = 0, in_table = 0;

  if (text == NULL) {
    fprintf(stderr, "protofuzz: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  for (line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (!in_section) {
      in_section = strstr(line, "**Why a session is closed.**") != NULL;
      continue;
    }
    if (line[0] != '|') {
      if (in_table)
        break;
      continue;
    }
    in_table = 1;
    char *end = strchr(line + 1, '|');
    char *b1 = strchr(line + 1, '`');
    if (end == NULL || b1 == NULL || b1 > end)
      continue; /* the header and the rule */
    char *b2 = strchr(b1 + 1, '`');
    if (b2 == NULL || b2 > end || nreasons == 32)
      continue;
    snprintf(reasons[nreasons++], sizeof(reasons[0]), "%.*s",
             (int)(b2 - b1 - 1), b1 + 1);
  }
  free(text);
  if (nreasons == 0) {
    fprintf(stderr,
            "protofuzz: no table of reasons under 'Why a session is "
            "closed' in %s\n",
            path);
    return -1;
  }
  return 0;
}

static struct {
  char reason[96];
  uint64_t n;
} closes[64];
static int ncloses;

/* Check every close in the daemon's log. @return the number of problems. */
static int check_log(const char *path, uint64_t *opened_out,
                     uint64_t *closed_out)
{
  size_t len = 0;
  char *text = read_file(path, &len);
  char *line, *save = NULL;
  int bad = 0;
  uint64_t opened = 0, closed = 0;

  if (text == NULL) {
    fprintf(stderr, "protofuzz: cannot read the daemon's log %s\n", path);
    return 1;
  }
  for (line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (strstr(line, "runtime error:") || strstr(line, "AddressSanitizer") ||
        strstr(line, "LeakSanitizer") || strstr(line, "ThreadSanitizer")) {
      fprintf(stderr, "protofuzz: the daemon's log reports: %s\n", line);
      bad++;
    }
    if (strstr(line, "session opened:"))
      opened++;
    char *r = strstr(line, "session closed: ");
    if (r == NULL)
      continue;
    closed++;
    r += strlen("session closed: ");
    /* Strip the trailing " (N requests)". */
    char *tail = strrchr(r, '(');
    if (tail != NULL && tail > r && tail[-1] == ' ' &&
        strstr(tail, " requests)") != NULL)
      tail[-1] = '\0';
    int ok = 0;
    for (int i = 0; i < nreasons && !ok; i++)
      ok = strncmp(r, reasons[i], strlen(reasons[i])) == 0;
    if (!ok) {
      fprintf(stderr, "protofuzz: undocumented close reason: '%s'\n", r);
      bad++;
    }
    int j;
    for (j = 0; j < ncloses; j++)
      if (strcmp(closes[j].reason, r) == 0)
        break;
    if (j == ncloses && ncloses < 64)
      snprintf(closes[ncloses++].reason, sizeof(closes[0].reason), "%s", r);
    if (j < 64)
      closes[j].n++;
  }
  free(text);
  *opened_out = opened;
  *closed_out = closed;
  return bad;
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
  fprintf(stderr, "usage: protofuzz [--seconds N] [--seed S] [--requests N] "
                  "[--doc PROTOCOL.md] [--ir FILE.ir.json] [--conns N] "
                  "[--verbose]\n");
  exit(2);
}

static void parse_args(int argc, char **argv)
{
  const char *env;

  if ((env = getenv("PROTOFUZZ_SECONDS")) != NULL && env[0])
    opt.seconds = atoi(env);
  if ((env = getenv("PROTOFUZZ_SEED")) != NULL && env[0])
    opt.seed = strtoull(env, NULL, 0);
  else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    opt.seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32);
  }
  opt.doc = getenv("PROTOFUZZ_DOC");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      opt.verbose++;
      continue;
    }
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--seconds") == 0)
      opt.seconds = atoi(v);
    else if (strcmp(a, "--seed") == 0)
      opt.seed = strtoull(v, NULL, 0);
    else if (strcmp(a, "--requests") == 0)
      opt.max_requests = strtoull(v, NULL, 0);
    else if (strcmp(a, "--doc") == 0)
      opt.doc = v;
    else if (strcmp(a, "--ir") == 0)
      opt.ir = v;
    else if (strcmp(a, "--conns") == 0)
      opt.conns = atoi(v);
    else
      usage();
  }
  if (opt.doc == NULL || opt.doc[0] == '\0')
    opt.doc = PROTOFUZZ_SRCDIR "/proto/PROTOCOL.md";
  if (opt.ir == NULL)
    opt.ir = PROTOFUZZ_SRCDIR "/tests/codegen/vec_add.ir.json";
  if (opt.conns < 1)
    opt.conns = 1;
  if (opt.conns > MAX_CONNS)
    opt.conns = MAX_CONNS;
  if (opt.seconds < 1)
    opt.seconds = 1;
}

static int load_ir(void)
{
  size_t len = 0;
  char err[256];
  char *text = ir_json_read_file(opt.ir, &len);
  msgpack_sbuffer sb;

  if (text == NULL) {
    fprintf(stderr, "protofuzz: cannot read %s: %s\n", opt.ir, strerror(errno));
    return -1;
  }
  msgpack_sbuffer_init(&sb);
  if (ir_json_to_msgpack(text, len, &sb, err, sizeof(err)) != 0) {
    fprintf(stderr, "protofuzz: %s: %s\n", opt.ir, err);
    free(text);
    msgpack_sbuffer_destroy(&sb);
    return -1;
  }
  free(text);
  ir_doc = (uint8_t *)sb.data; /* kept to the end */
  ir_len = sb.size;
  return 0;
}

static void print_stats(double secs)
{
  fprintf(stderr,
          "protofuzz: %.1f s, %llu messages (%.0f/s): %llu valid, %llu "
          "mutated, %llu notifications, %llu violations, %llu garbage, %llu "
          "truncated and closed, %llu truncated and kept open; %llu "
          "connections silent\n",
          secs, (unsigned long long)st.requests, st.requests / secs,
          (unsigned long long)st.valid, (unsigned long long)st.mutated,
          (unsigned long long)st.notifications,
          (unsigned long long)st.violations, (unsigned long long)st.garbage,
          (unsigned long long)st.truncated, (unsigned long long)st.stalled,
          (unsigned long long)st.silent);
  fprintf(stderr, "protofuzz: %llu replies: %llu ok",
          (unsigned long long)st.replies, (unsigned long long)st.ok);
  for (int i = 1; i < 64; i++)
    if (st.by_code[i])
      fprintf(stderr, ", %llu %s", (unsigned long long)st.by_code[i],
              hipd_err_name(-i));
  fprintf(stderr, "\n");
  fprintf(stderr,
          "protofuzz: %llu connections; closed by us %llu (close %llu, reset "
          "%llu, mid-request %llu, shutdown %llu); by the daemon %llu (%llu "
          "with no violation sent)\n",
          (unsigned long long)st.conns,
          (unsigned long long)(st.closed_by_us[0] + st.closed_by_us[1] +
                               st.closed_by_us[2] + st.closed_by_us[3]),
          (unsigned long long)st.closed_by_us[0],
          (unsigned long long)st.closed_by_us[1],
          (unsigned long long)st.closed_by_us[2],
          (unsigned long long)st.closed_by_us[3],
          (unsigned long long)st.closed_by_daemon,
          (unsigned long long)st.closed_unexpected);
  fprintf(stderr,
          "protofuzz: %llu descriptors sent:", (unsigned long long)st.fds_sent);
  for (int k = 0; k < FD_NKINDS; k++)
    fprintf(stderr, " %s %llu", fd_names[k],
            (unsigned long long)st.fds_by_kind[k]);
  fprintf(stderr, "\n");
  fprintf(stderr, "protofuzz: well-behaved session: %llu rounds, %llu calls\n",
          (unsigned long long)good_rounds, (unsigned long long)good_ops);
}

int main(int argc, char **argv)
{
  pthread_t good;
  int good_started = 0, code, rc = 1;
  char quota_dir[512];
  long long t0, deadline;
  uint64_t opened = 0, closed = 0;

  parse_args(argc, argv);
  rng.s = opt.seed;
  signal(SIGPIPE, SIG_IGN);
  fprintf(stderr,
          "protofuzz: seed %llu, %d s, %d connections (rerun: "
          "protofuzz --seed %llu --seconds %d)\n",
          (unsigned long long)opt.seed, opt.seconds, opt.conns,
          (unsigned long long)opt.seed, opt.seconds);

  methods = dispatch_methods(&nmethods);
  if (check_coverage() != 0)
    return 1;
  if (load_reasons(opt.doc) != 0 || load_ir() != 0)
    return 1;
  fprintf(stderr, "protofuzz: %u methods, %d close reasons from %s\n", nmethods,
          nreasons, opt.doc);

  arena = malloc(ARENA_SIZE);
  bigbuf = malloc(BIG_LEN);
  for (size_t i = 0; i < BIG_LEN; i++)
    bigbuf[i] = (char)('a' + (i * 7 + i / 26) % 26);

  if (harness_init("protofuzz") != 0)
    return 1;
  snprintf(quota_dir, sizeof(quota_dir), "%s", harness_temp_path("regular"));
  snprintf(regular_path, sizeof(regular_path), "%s", quota_dir);
  {
    int fd = open(regular_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      (void)!write(fd, bigbuf, 65536);
      close(fd);
    }
  }
  /* The CPU devices only, on a GPU host too: a mutated launch can pass any
   * address as a `ptr` argument, and a GPU fault costs every session of the
   * device its context (until tenants are isolated in processes), which
   * would fail the well-behaved session for a reason this fuzzer does not
   * test. */
  daemon_ = harness_start(
      "--devices", "cpu", "--cpu-devices", "2", "--cache-dir", "", "--mem-quota", "64M",
      "--max-message", MAX_MESSAGE, "--max-inflight", "16", "--max-handles",
      "128", "--max-streams", "8", "--output-cap", "64M", "--write-timeout",
      "5000", "--cpu-kernel-timeout", "3000", "--shutdown-timeout", "3000",
      "--hello-timeout", "3000", "--request-timeout", "3000", NULL);
  if (daemon_ == NULL)
    goto done;

  if (pthread_create(&good, NULL, good_main, NULL) == 0)
    good_started = 1;

  t0 = harness_now_ms();
  deadline = t0 + (long long)opt.seconds * 1000;
  while (!failed && harness_now_ms() < deadline &&
         st.requests < opt.max_requests) {
    struct pollfd pfd[MAX_CONNS];
    long long now = harness_now_ms();

    if (harness_wait_exit(daemon_, 0) != -1) {
      fail("the daemon exited (status %d)", daemon_->status);
      break;
    }
    if (good_fail[0]) {
      fail("the well-behaved session failed: %s", good_fail);
      break;
    }
    for (int i = 0; i < opt.conns; i++) {
      conn_t *c = conns[i];
      if (c == NULL) {
        conns[i] = conn_open();
        continue;
      }
      if (c->doomed && now - c->doomed_at > DOOMED_MS) {
        fail("conn %u (session %llu): not closed %d ms after it sent %s "
             "(%d requests in flight, %zu bytes not written)",
             c->serial, (unsigned long long)c->sid, DOOMED_MS, c->doom_what,
             c->npend, c->wq_bytes);
        break;
      }
      if (c->maybe && !c->doomed && now - c->doomed_at > MAYBE_MS) {
        st.closed_by_us[0]++;
        conn_free(c);
        conns[i] = NULL;
        continue;
      }
      if (!c->doomed && !c->maybe && now >= c->end_at) {
        uint32_t how = rnd(20);
        if (how < 7)
          send_violation(c);
        else if (how < 10)
          send_garbage(c);
        else if (how < 13)
          send_stall(c);
        else
          c->end_at = 0; /* closed just below */
      }
      if (!c->doomed && !c->maybe) {
        if (c->end_at == 0 || chance(20000)) {
          conn_close_ours(c);
          conn_free(c);
          conns[i] = NULL;
          continue;
        }
        for (int b = 0; b < 4 && c->npend < PEND_HIGH &&
                        c->wq_bytes < WQ_HIGH && !c->doomed && !c->maybe;
             b++)
          conn_generate(c);
      }
    }
    int n = 0;
    for (int i = 0; i < opt.conns; i++) {
      pfd[i].fd = conns[i] ? conns[i]->fd : -1;
      pfd[i].events = POLLIN | (conns[i] && conns[i]->wq ? POLLOUT : 0);
      pfd[i].revents = 0;
      n++;
    }
    if (poll(pfd, (nfds_t)n, 5) < 0 && errno != EINTR) {
      fail("poll: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < opt.conns && !failed; i++) {
      conn_t *c = conns[i];
      int dead = 0;
      if (c == NULL)
        continue;
      if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
        dead = conn_read(c) != 0;
      if (!dead && c->wq && conn_flush(c) != 0)
        dead = conn_read(c) != 0 || 1;
      if (dead) {
        conn_closed_by_daemon(c);
        conn_free(c);
        conns[i] = NULL;
      }
    }
  }
  double secs = (harness_now_ms() - t0) / 1000.0;

  /* Connections that broke the protocol must still be closed. */
  long long wait_until = harness_now_ms() + DOOMED_MS;
  for (int i = 0; i < opt.conns && !failed; i++) {
    conn_t *c = conns[i];
    if (c == NULL)
      continue;
    while (c->doomed && !failed) {
      struct pollfd p = {.fd = c->fd, .events = POLLIN};
      if (harness_now_ms() > wait_until) {
        fail("conn %u (session %llu): not closed %lld ms after it sent %s "
             "(%d requests in flight, %zu bytes not written)",
             c->serial, (unsigned long long)c->sid,
             harness_now_ms() - c->doomed_at, c->doom_what, c->npend,
             c->wq_bytes);
        break;
      }
      poll(&p, 1, 100);
      if (c->wq)
        conn_flush(c);
      if (conn_read(c) != 0)
        break;
    }
  }
  for (int i = 0; i < opt.conns; i++)
    if (conns[i]) {
      conn_free(conns[i]);
      conns[i] = NULL;
    }
  /* The well-behaved session compiles its kernel first, which may take a
   * while on a loaded machine: give it time for one round. */
  for (long long until = harness_now_ms() + 120000;
       good_started && good_rounds == 0 && !good_fail[0] &&
       harness_now_ms() < until;)
    harness_sleep_ms(50);
  good_stop = 1;
  if (good_started)
    pthread_join(good, NULL);
  if (good_fail[0])
    fail("the well-behaved session failed: %s", good_fail);
  if (!failed && good_rounds == 0)
    fail("the well-behaved session completed no round");

  code = harness_stop(daemon_);
  if (code != 0)
    fail("hipd exited with %d on SIGTERM", code);
  int bad = check_log(daemon_->log, &opened, &closed);
  if (bad)
    fail("%d problems in the daemon's log (above)", bad);
  if (closed < opened)
    fail("%llu sessions opened, %llu closed in the log",
         (unsigned long long)opened, (unsigned long long)closed);

  print_stats(secs);
  fprintf(stderr, "protofuzz: sessions in the log: %llu opened, %llu closed:",
          (unsigned long long)opened, (unsigned long long)closed);
  for (int j = 0; j < ncloses; j++)
    fprintf(stderr, "%s %llu '%s'", j ? "," : "",
            (unsigned long long)closes[j].n, closes[j].reason);
  fprintf(stderr, "\n");
  int never = 0;
  fprintf(stderr, "protofuzz: methods never answered with success:");
  for (unsigned i = 0; i < nmethods && i < 256; i++)
    if (st.m_ok[i] == 0) {
      fprintf(stderr, " %s (%llu sent)", methods[i].name,
              (unsigned long long)st.m_sent[i]);
      never++;
    }
  fprintf(stderr, "%s\n", never ? "" : " none");
  fprintf(stderr,
          "protofuzz: %llu requests sent as their template made them "
          "got EPARAMS\n",
          (unsigned long long)st.valid_eparams);
  if (failed) {
    ring_dump();
    harness_log_dump(daemon_);
    fprintf(stderr, "protofuzz: FAILED (seed %llu): %s\n",
            (unsigned long long)opt.seed, fail_text);
  } else {
    fprintf(stderr, "protofuzz: PASS (seed %llu)\n",
            (unsigned long long)opt.seed);
    rc = 0;
  }
  harness_free(daemon_);
done:
  harness_fini();
  free(arena);
  free(bigbuf);
  free(ir_doc);
  free(tmpl_of);
  return rc;
}
