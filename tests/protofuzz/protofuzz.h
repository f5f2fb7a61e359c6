/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz.h: the parts of the protocol fuzzer
 * (tests/protofuzz/protofuzz.c, which says what it does and how it fails) and
 * what they share: the settings, the value tree, connections, requests and the
 * method templates, and the state of the run. Private to the fuzzer's files:
 *   protofuzz.c             options, start-up, the main loop, statistics;
 *   protofuzz_common.c      failures, the PRNG, the value tree, object pools,
 *                           the connection and method tables;
 *   protofuzz_fds.c         descriptors of every kind to pass with requests;
 *   protofuzz_templates.c   a valid request for every method of the table;
 *   protofuzz_mutate.c      mutated requests;
 *   protofuzz_send.c        the reproducer's ring, write queues, requests
 *                           in flight;
 *   protofuzz_violations.c  protocol violations, stalls and garbage;
 *   protofuzz_conn.c        connections and the checks of every reply;
 *   protofuzz_good.c        the well-behaved session;
 *   protofuzz_log.c         the daemon's log against proto/PROTOCOL.md.
 */
#ifndef HIPD_TESTS_PROTOFUZZ_H
#define HIPD_TESTS_PROTOFUZZ_H

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

struct pf_opt {
  int seconds;
  uint64_t seed;
  uint64_t max_requests;
  const char *doc;
  const char *ir;
  int conns;
  int verbose;
};

/* splitmix64: the fuzzer's own, so a seed means the same on every libc. */

typedef struct {
  uint64_t s;
} rng_t;

struct pf_st {
  uint64_t requests, valid, mutated, violations, notifications, garbage;
  uint64_t truncated, stalled, silent, replies, ok, by_code[64];
  uint64_t conns, closed_by_us[4], closed_by_daemon, closed_unexpected;
  uint64_t fds_sent, fds_by_kind[32];
  uint64_t valid_eparams;
  uint64_t m_sent[256], m_ok[256];
};

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

/* Requests in flight that may run the C++ compiler (each takes a second or
 * more of CPU): at most MAX_COMPILES at once, for the daemon's thread pool
 * and the machine. */

#define MAX_COMPILES 2

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

typedef struct {
  const char *name;
  tmpl_fn fn;
  int weight; /* relative frequency */
} tmpl_t;

struct pf_closes {
  char reason[96];
  uint64_t n;
};

extern struct pf_opt opt;
extern int failed;
extern char fail_text[4096];
void ring_dump(void);
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t rng_next(rng_t *r);
extern rng_t rng;
uint64_t rnd64(void);
uint32_t rnd(uint32_t n);
/* One chance in @p n. */
int chance(uint32_t n);
extern struct pf_st st;
extern uint8_t *arena;
extern size_t arena_used;
void *aalloc(size_t n);
extern char *bigbuf;
val_t v_nil(void);
val_t v_bool(int b);
val_t v_uint(uint64_t u);
val_t v_int(int64_t i);
val_t v_f32(double f);
val_t v_f64(double f);
val_t v_strn(const char *p, size_t n);
val_t v_str(const char *s);
val_t v_bin(const void *p, size_t n);
val_t v_arr(uint32_t n);
val_t v_map(uint32_t n);
void pack_val(msgpack_packer *pk, const val_t *v);
void pool_add(pool_t *p, obj_t o);
obj_t *pool_pick(pool_t *p);
void pool_remove(pool_t *p, uint64_t h);
extern uint64_t foreign[64];
extern unsigned nforeign;
extern conn_t *conns[MAX_CONNS];
extern int compiles;
extern unsigned conn_serial;
extern harness_daemon_t *daemon_;
extern const method_t *methods;
extern unsigned nmethods;
/* Does method @p midx compile (kernel.compile*, run_source)? */
int is_compile(int midx);
int method_index(const char *name);
extern const char *const fd_names[FD_NKINDS];
extern char regular_path[512];
/* A new descriptor of @p kind (the caller closes it), or -1. */
int fd_make(int kind, size_t shm_size);
val_t *P(req_t *r, uint32_t n);
obj_t *pick(conn_t *c, int kind);
extern const char *FZ_SRC;
extern uint8_t *ir_doc;
extern size_t ir_len;
extern const tmpl_t **tmpl_of;
/* Every method of the table has a template and every template a method.
 * @return the number of problems (printed). */
int check_coverage(void);
int pick_method(void);
/* Mutate a request in place, in a way that stays within the protocol: the
 * daemon must answer it. */
void mutate_request(conn_t *c, req_t *r);
void ring_add(const conn_t *c, uint32_t msgid, const char *what,
              const uint8_t *data, size_t len);
void wq_push(conn_t *c, const void *data, size_t len, const int *fds, int nfds);
void chunk_free(chunk_t *k);
/* Write what can be written. @return 0, or -1 if the connection broke. */
int conn_flush(conn_t *c);
int pend_find(conn_t *c, uint32_t msgid);
uint32_t new_msgid(conn_t *c);
/* Pack and queue request @p r. */
void send_request(conn_t *c, req_t *r, int is_notify);
/* Build a request for method @p midx from its template. */
void build(conn_t *c, req_t *r, int midx);
/* A launch that would keep the one CPU kernel runner busy for long (all
 * sessions share it): most are not sent. */
int too_costly(const req_t *r);
void pack_head(msgpack_packer *pk, uint32_t msgid, const char *m);
/* Send a message that breaks the protocol: the daemon must close the
 * connection. */
void send_violation(conn_t *c);
/* Send the first bytes of a request, and no more: the daemon must close
 * the connection (--request-timeout). */
void send_stall(conn_t *c);
/* Send random bytes. */
void send_garbage(conn_t *c);
void conn_free(conn_t *c);
conn_t *conn_open(void);
/* The daemon closed @p c (EOF or error on read). */
void conn_closed_by_daemon(conn_t *c);
/* Close @p c ourselves, in one of four ways. */
void conn_close_ours(conn_t *c);
/* Generate the next message(s) for @p c. */
void conn_generate(conn_t *c);
/* Read what @p c has. @return 0, or -1 once the daemon closed it. */
int conn_read(conn_t *c);
extern volatile int good_stop;
extern volatile uint64_t good_rounds, good_ops;
extern char good_fail[2048];
void *good_main(void *arg);
extern char reasons[32][96];
extern int nreasons;
int load_reasons(const char *path);
extern struct pf_closes closes[64];
extern int ncloses;
/* Check every close in the daemon's log. @return the number of problems. */
int check_log(const char *path, uint64_t *opened_out, uint64_t *closed_out);

#endif
