/* SPDX-License-Identifier: MIT */
/* tests/check_ring.c: the shared-memory submission path (proto/PROTOCOL.md,
 * "Rings"; proto/ring_layout.h) end to end, against real hipd daemons on
 * the CPU device and real sockets:
 *   - libhipd on its ring, transparently: results, session.info's counts,
 *     HIPD_RING=0, the kick path (--busy-poll 0) and the polled one
 *     (--busy-poll 200), a worker process (--isolation uid);
 *   - the order of the two paths: socket-only requests and ring requests
 *     interleaved on streams, with errors each delivered to its own call;
 *   - a hand-written ring client (rr_t below, over tests/lib/rawclient.h)
 *     that breaks every rule a ring has: garbage slots, impossible indices,
 *     lengths, methods that may not come from a ring, slots rewritten after
 *     publishing, the order of the paths at --max-inflight, a flood, one
 *     killed in the middle of its submissions, bad ring.open requests,
 *     both completion doorbells (futex and socket);
 *   - rings at their limit: a full completion queue (answers move to the
 *     socket), a client that never reads its completions, or nothing at all
 *     (--output-cap);
 *   - and, after each group, no descriptor, thread or byte left behind in
 *     the daemon (/proc of its pid, daemon.stats, device.get).
 * Every daemon serves the CPU device alone (device 0, --devices cpu) with
 * --isolation none (the daemon's pid is the process that maps the rings),
 * unless a TCase says otherwise. The daemons share one kernel cache
 * directory made for the run, so each kernel is compiled once. The shared
 * helpers are in tests/lib/daemon_util.h, the raw client in
 * tests/lib/rawclient.h.
 */
#include "config.h"

#include "daemon_util.h"

#include <dirent.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "ring_layout.h"
#include "run.h"

/* The kernel cache of the run's daemons (made by main()). */
static char cache_dir[256];

/* The daemon of the TCase at work (an unchecked fixture starts it in
 * check's runner process) and whether its clients busy-poll. */
static harness_daemon_t *shared;
static const char *shared_tcase; /* its TCase, for messages */
static int shared_polled;

static harness_daemon_t *start_daemon(const char *busy_poll,
                                      const char *isolation,
                                      const char *output_cap)
{
  harness_daemon_t *d = harness_start(
      "--devices", "cpu", "--isolation", isolation, "--cache-dir", cache_dir,
      "--busy-poll", busy_poll, "--output-cap", output_cap, NULL);

  if (d == NULL)
    abort();
  return d;
}

static void kick_setup(void)
{
  shared_tcase = "kick";
  /* 0 is the default on this 2-core machine anyway: said outright so
   * that a machine with 8 cores runs the kick path here too. */
  shared = start_daemon("0", "none", "1G");
  shared_polled = 0;
}

static void polled_setup(void)
{
  shared_tcase = "polled";
  shared = start_daemon("200", "none", "1G");
  shared_polled = 1;
}

static void workers_setup(void)
{
  shared_tcase = "workers";
  shared = start_daemon("0", "uid", "1G");
  shared_polled = 0;
}

/* A TCase's daemon that did not exit cleanly (crashed, most likely, in
 * one of its tests): main() fails the program. */
static int daemons_failed;

/* The teardown runs in check's runner process, where a failed assertion
 * would end the whole program without its results: say it, and count it. */
static void shared_stop(void)
{
  int code;

  if (shared == NULL)
    return;
  code = harness_stop(shared);
  if (code != 0) {
    fprintf(stderr,
            "check_ring: the daemon of TCase '%s' exited with %d; its "
            "log:\n",
            shared_tcase, code);
    harness_log_dump(shared);
    daemons_failed++;
  }
  harness_free(shared);
  shared = NULL;
}

/* Is the TCase's daemon still running? (From /proc: it is the child of
 * check's runner process, not of this test's.) */
static int daemon_running(void)
{
  proc_stat_t st;

  return proc_stat_read(shared->pid, &st) == 0 && st.state != 'Z' &&
         st.state != 'X';
}

/* Fail at once, saying why, when an earlier test took the daemon down. */
static void daemon_alive(void)
{
  ck_assert_msg(daemon_running(),
                "the daemon of this TCase is gone: it died in this test or "
                "an earlier one (its log is printed at the end)");
}

static hipd_conn_t *connect_ring(const char *name)
{
  daemon_alive();
  hipd_conn_t *conn = connect_named(shared, name, 60000);

  if (shared_polled)
    hipd_set_busy_poll(conn, 200);
  return conn;
}

/* session.info's ring counts. */
typedef struct {
  int64_t entries, requests, completions, on_socket, early, kicks, all;
} ring_counts_t;

static ring_counts_t ring_counts(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  ring_counts_t c;
  int dev = 0;

  OK(conn, hipd_session_info(conn, &info));
  c.entries = info_int(info, "ring.entries");
  c.requests = info_int(info, "ring.requests");
  c.completions = info_int(info, "ring.completions");
  c.on_socket = info_int(info, "ring.answered_on_socket");
  c.early = info_int(info, "ring.answered_early");
  c.kicks = info_int(info, "ring.kicks");
  c.all = info_int(info, "requests");
  hipd_info_free(info);
  return c;
}

/* ---------------------------------------------------------------- kernels */

static const char AXPY_SRC[] =
    "extern \"C\" __global__ void axpy(float *y, const float *x, float a,\n"
    "                                  int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n";

/* out[idx] = out[idx] * 31 + v: each launch's effect depends on every
 * operation on that cell before it. */
static const char MIX_SRC[] =
    "extern \"C\" __global__ void mix(unsigned *out, int idx, int v)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    out[idx] = out[idx] * 31u + (unsigned)v;\n"
    "}\n";

static const uint32_t ONE3[3] = {1, 1, 1};

/* hipd_kernel_run of MIX_SRC's mix on the null stream: out[0] mixed with
 * @p v, waited for. */
static void mix_run(hipd_conn_t *conn, hipd_kernel_t k, hipd_buffer_t out,
                    int v)
{
  hipd_args_t *args = args_new();
  int dev = 0;

  OK(conn, hipd_args_buffer(args, out, 0));
  OK(conn, hipd_args_i32(args, 0));
  OK(conn, hipd_args_i32(args, v));
  OK(conn, hipd_kernel_run(conn, k, ONE3, ONE3, 0, HIPD_STREAM_NULL, args));
  hipd_args_free(args);
}

static hipd_kernel_t compile_cpu(hipd_conn_t *conn, const char *src,
                                 const char *name)
{
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  int dev = 0;

  OK(conn, hipd_kernel_compile_cached(conn, 0, src, name, NULL, &k, NULL));
  ck_assert_uint_ne(hipd_kernel_id(k), 0);
  return k;
}

/* ============================================= 1. libhipd, transparently */

/* Everything a program does with buffers, kernels, streams, events and
 * shared buffers, through hipd_* calls that go on the ring where they can:
 * the results are right, and session.info counts the ring's share. With
 * @p ring 0 ($HIPD_RING=0) the same on the socket alone. */
static void transparent(int ring, int futex)
{
  enum { N = 4096, BATCH = 200 };
  float *x = xmalloc(N * 4), *y = xmalloc(N * 4), *back = xmalloc(N * 4);
  uint32_t *u = xmalloc(N * 4);
  hipd_buffer_t bx = HIPD_BUFFER_NULL, by = HIPD_BUFFER_NULL,
                bo = HIPD_BUFFER_NULL;
  const uint32_t grid[3] = {(N + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
  hipd_stream_t st = HIPD_STREAM_NULL;
  hipd_event_t ev = HIPD_EVENT_NULL;
  hipd_call_t **calls = xmalloc(BATCH * sizeof(*calls));
  hipd_shm_t *shm = NULL;
  hipd_args_t *args = args_new();
  hipd_conn_t *conn;
  ring_counts_t c0, c1;
  int dev = 0, idle = 0, done = 0, nring = 0, nall = 0, nearly = 0;

  if (!ring)
    ck_assert_int_eq(setenv("HIPD_RING", "0", 1), 0);
  conn = connect_ring(ring ? "ring-transparent" : "ring-off");
  unsetenv("HIPD_RING");
  c0 = ring_counts(conn);
  ck_assert_int_eq(c0.entries, ring ? RING_DEFAULT_ENTRIES : 0);
  ck_assert_int_eq(c0.requests, 0);
  ck_assert_int_eq(c0.completions, 0);

  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 97) * 0.5f;
    y[i] = (float)(i % 13);
  }
  OK(conn, hipd_mem_alloc(conn, 0, N, "float32", &bx));
  OK(conn, hipd_mem_alloc(conn, 0, N, "float32", &by));
  OK(conn, hipd_mem_alloc(conn, 0, N, "float32", &bo));
  OK(conn, hipd_mem_write(conn, bx, 0, x, N * 4));
  OK(conn, hipd_mem_write(conn, by, 0, y, N * 4));
  hipd_kernel_t k = compile_cpu(conn, AXPY_SRC, "axpy");
  OK(conn, hipd_args_buffer(args, by, 0));
  OK(conn, hipd_args_buffer(args, bx, 0));
  OK(conn, hipd_args_f32(args, 2.0f));
  OK(conn, hipd_args_i32(args, N));
  nall += 6;

  /* A launch and its wait in one request (kernel.launch with wait). */
  OK(conn, hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  nring++;
  nearly++;
  OK(conn, hipd_mem_read(conn, by, 0, back, N * 4));
  nall += 2;
  for (int i = 0; i < N; i++)
    ck_assert_msg(back[i] == 2.0f * x[i] + y[i], "y[%d] = %g", i, back[i]);

  /* On a stream: a memset, two launches, the waits and queries. */
  OK(conn, hipd_stream_create(conn, 0, &st));
  OK(conn, hipd_event_create(conn, 0, &ev));
  nall += 2;
  OK(conn, hipd_mem_memset_async(conn, by, 0, N * 4, 0, st));
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, st, args));
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, st, args));
  OK(conn, hipd_event_record(conn, ev, st));
  OK(conn, hipd_event_synchronize(conn, ev));
  OK(conn, hipd_event_query(conn, ev, &done));
  ck_assert_int_eq(done, 1);
  OK(conn, hipd_stream_synchronize(conn, st));
  OK(conn, hipd_stream_query(conn, st, &idle));
  ck_assert_int_eq(idle, 1);
  /* y = 4x now; out = y, then its first 16 bytes 0xff, copied async. */
  OK(conn, hipd_mem_copy(conn, bo, 0, by, 0, N * 4));
  OK(conn, hipd_mem_memset(conn, by, 0, 16, 0xff));
  OK(conn, hipd_mem_copy_async(conn, bo, 0, by, 0, 8, st));
  OK(conn, hipd_stream_synchronize(conn, st));
  nring += 12;
  nall += 12;
  nearly += 2; /* the synchronisations (not the launches: no wait) */
  OK(conn, hipd_mem_read(conn, bo, 0, u, N * 4));
  nall++;
  ck_assert_uint_eq(u[0], 0xffffffffu);
  ck_assert_uint_eq(u[1], 0xffffffffu);
  memcpy(back, u, N * 4);
  for (int i = 2; i < N; i++)
    ck_assert_msg(back[i] == 4.0f * x[i], "out[%d] = %g", i, back[i]);

  /* Shared buffers: the transfers of mem.*_shm* go on the ring too. */
  OK(conn, hipd_shm_create(conn, N * 4, &shm));
  nall++;
  memcpy(hipd_shm_ptr(shm), x, N * 4);
  OK(conn, hipd_mem_write_shm(conn, by, 0, shm, 0, N * 4));
  OK(conn, hipd_mem_read_shm(conn, bo, 0, shm, 0, 64));
  ck_assert_uint_eq(((uint32_t *)hipd_shm_ptr(shm))[0], 0xffffffffu);
  OK(conn, hipd_mem_read_shm(conn, by, 0, shm, 0, N * 4));
  ck_assert_int_eq(memcmp(hipd_shm_ptr(shm), x, N * 4), 0);
  OK(conn, hipd_mem_write_shm_async(conn, bo, 0, shm, 0, N * 4, st));
  memset(hipd_shm_ptr(shm), 0, N * 4);
  OK(conn, hipd_mem_read_shm_async(conn, bo, 0, shm, 0, N * 4, st));
  ck_assert_int_eq(memcmp(hipd_shm_ptr(shm), x, N * 4), 0);
  nring += 5;
  nall += 5;

  /* Pipelined, fewer than a ring holds (test_pipeline_deep goes past
   * it): in stream order, the last memset of each cell wins. */
  for (int i = 0; i < BATCH; i++)
    OK(conn, hipd_mem_memset_async_begin(conn, by, (uint64_t)(i % 64) * 64, 64,
                                         i & 0xff, st, &calls[i]));
  for (int i = 0; i < BATCH; i++)
    ck_assert_int_eq(hipd_wait(calls[i]), 0);
  OK(conn, hipd_stream_synchronize(conn, st));
  OK(conn, hipd_mem_read(conn, by, 0, u, 64 * 64));
  nring += BATCH + 1;
  nall += BATCH + 2;
  nearly++;
  for (int i = 0; i < 64 * 16; i++) {
    int c = i / 16, last = (BATCH - 1 - c) / 64 * 64 + c;
    ck_assert_msg(u[i] == (uint32_t)(last & 0xff) * 0x01010101u,
                  "word %d: %08x, expected the memset of op %d", i, u[i], last);
  }

  c1 = ring_counts(conn);
  nall++; /* this session.info */
  ck_assert_int_eq(c1.all - c0.all, nall);
  if (ring) {
    /* Every ring-capable call went on the ring (none found it full), and
     * all were answered there. */
    ck_assert_int_eq(c1.entries, RING_DEFAULT_ENTRIES);
    ck_assert_int_ge(c1.requests - c0.requests, nring);
    ck_assert_int_le(c1.requests - c0.requests, nring);
    ck_assert_int_eq(c1.completions - c0.completions,
                     c1.requests - c0.requests);
    ck_assert_int_eq(c1.on_socket, 0);
    /* On the CPU device every launch and synchronisation ends on its
     * stream's thread, which answers it there with the futex doorbell
     * (call.h's early answers); with the socket doorbell the loop does. */
    ck_assert_int_eq(c1.early - c0.early, futex ? nearly : 0);
  } else {
    ck_assert_int_eq(c1.entries, 0);
    ck_assert_int_eq(c1.requests, 0);
    ck_assert_int_eq(c1.completions, 0);
  }

  OK(conn, hipd_shm_free(conn, shm));
  OK(conn, hipd_event_destroy(conn, ev));
  OK(conn, hipd_stream_destroy(conn, st));
  OK(conn, hipd_kernel_destroy(conn, k));
  OK(conn, hipd_mem_free(conn, bx));
  OK(conn, hipd_mem_free(conn, by));
  OK(conn, hipd_mem_free(conn, bo));
  hipd_args_free(args);
  hipd_close(conn);
  free(calls);
  free(x);
  free(y);
  free(back);
  free(u);
}

START_TEST(test_transparent)
{
  transparent(1, 1);
}
END_TEST

START_TEST(test_transparent_off)
{
  transparent(0, 0);
}
END_TEST

/* libhipd with the socket doorbell (HIPD_RING_DOORBELL=socket), as a
 * client of the protocol's default does. */
START_TEST(test_transparent_socket_bell)
{
  setenv("HIPD_RING_DOORBELL", RING_DOORBELL_SOCKET, 1);
  transparent(1, 0);
  unsetenv("HIPD_RING_DOORBELL");
}
END_TEST

static void other_client_ok(const char *name);

/* An answer a stream's thread sent early (call.h) is finished on the
 * loop before anything its client sends next: right after each
 * hipd_kernel_run, session.info on the socket finds no call in flight but
 * itself, and the launches' effects are all there. */
START_TEST(test_early_then_socket)
{
  enum { N = 300 };
  hipd_conn_t *conn = connect_ring("ring-early");
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_info_t *info = NULL;
  ring_counts_t c0, c1;
  uint32_t got = 0, want = 0;
  int dev = 0;

  hipd_kernel_t k = compile_cpu(conn, MIX_SRC, "mix");
  OK(conn, hipd_mem_alloc(conn, 0, 4, "uint32", &b));
  OK(conn, hipd_mem_memset(conn, b, 0, 4, 0));
  c0 = ring_counts(conn);
  for (int i = 0; i < N; i++) {
    mix_run(conn, k, b, i);
    want = want * 31u + (uint32_t)i;
    OK(conn, hipd_session_info(conn, &info));
    ck_assert_msg(info_int(info, "inflight") == 1,
                  "launch %d: session.info found %lld calls in flight, not "
                  "only itself",
                  i, (long long)info_int(info, "inflight"));
    hipd_info_free(info);
  }
  c1 = ring_counts(conn);
  ck_assert_int_eq(c1.early - c0.early, N);
  OK(conn, hipd_mem_read(conn, b, 0, &got, 4));
  ck_assert_uint_eq(got, want);
  OK(conn, hipd_mem_free(conn, b));
  OK(conn, hipd_kernel_destroy(conn, k));
  hipd_close(conn);
  daemon_alive();
}
END_TEST

/* One ring.kick a submission at most. A client that waits sleeps (no
 * spin here), and so does the daemon (--busy-poll 0): each launch finds
 * it asleep and rings the doorbell as it submits; the waiting thread's
 * look before it sleeps must not ring again for the same submission,
 * whose kick is in the socket already (it did, for every launch: two
 * system calls a kernel for the client, and a second notification for
 * the daemon to read and decode). */
START_TEST(test_one_kick_a_submission)
{
  enum { N = 200 };
  hipd_conn_t *conn = connect_ring("ring-kicks");
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  ring_counts_t c0, c1;
  int64_t kicks, subs;
  int dev = 0;

  hipd_kernel_t k = compile_cpu(conn, MIX_SRC, "mix");
  OK(conn, hipd_mem_alloc(conn, 0, 4, "uint32", &b));
  hipd_set_busy_poll(conn, 0);
  c0 = ring_counts(conn);
  for (int i = 0; i < N; i++) {
    mix_run(conn, k, b, i);
  }
  c1 = ring_counts(conn);
  kicks = c1.kicks - c0.kicks;
  subs = c1.requests - c0.requests;
  ck_assert_msg(subs >= N, "%d launches, %lld submissions on the ring", N,
                (long long)subs);
  ck_assert_msg(kicks > 0,
                "%d launches to a daemon that does not poll, and no "
                "ring.kick",
                N);
  ck_assert_msg(kicks <= subs, "%lld ring.kick for %lld submissions",
                (long long)kicks, (long long)subs);
  OK(conn, hipd_mem_free(conn, b));
  OK(conn, hipd_kernel_destroy(conn, k));
  hipd_close(conn);
  daemon_alive();
}
END_TEST

/* A client of libhipd that launches without end, each launch answered
 * early by its stream's thread; it says so after 200, then is killed. */
static void early_child(int wfd)
{
  hipd_conn_t *conn = connect_named(shared, "early-killed", 20000);
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_stream_t st = HIPD_STREAM_NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  hipd_args_t *args = hipd_args_new();

  if (args == NULL ||
      hipd_kernel_compile_cached(conn, 0, MIX_SRC, "mix", NULL, &k, NULL) ||
      hipd_mem_alloc(conn, 0, 4, "uint32", &b) ||
      hipd_stream_create(conn, 0, &st) || hipd_args_buffer(args, b, 0) ||
      hipd_args_i32(args, 0) || hipd_args_i32(args, 1))
    _exit(3);
  for (long long i = 0;; i++) {
    if (hipd_kernel_launch(conn, k, ONE3, ONE3, 0, st, args) != 0)
      _exit(4);
    if (i == 200 && write(wfd, "R", 1) != 1)
      _exit(2);
  }
}

/* @p rounds times: fork a client, @p child(wfd), which writes a byte on wfd
 * once it is busy, and SIGKILL it @p base_us + round * @p step_us later.
 * Its session must go, and a client beside it (beside-@p name) and one
 * after them all (after-@p name) are served. */
static void kill_busy_children(const char *name, int rounds,
                               void (*child)(int wfd), unsigned base_us,
                               unsigned step_us)
{
  char beside[64], after[64];
  hipd_conn_t *conn;
  int64_t before;

  snprintf(beside, sizeof(beside), "beside-%s", name);
  snprintf(after, sizeof(after), "after-%s", name);
  conn = connect_named(shared, beside, 20000);
  before = daemon_sessions(conn);
  for (int round = 0; round < rounds; round++) {
    int fds[2], status = 0;
    char c = 0;
    pid_t pid;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      child(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    ck_assert_msg(read(fds[0], &c, 1) == 1, "%s: the child failed", name);
    close(fds[0]);
    usleep(base_us + step_us * (unsigned)round);
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    wait_sessions(conn, before);
    ping_ok(conn);
  }
  daemon_alive();
  hipd_close(conn);
  other_client_ok(after);
}

/* Killed while its stream's thread answers its launches early: the ring
 * goes with its session while answers for it may still be on their way
 * (ring.h's early references). The daemon goes on, and so does a client
 * beside it. */
START_TEST(test_early_killed_client)
{
  kill_busy_children("early-killed", 4, early_child, 0, 500);
}
END_TEST

/* The session's id. */
static uint64_t conn_session_id(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  int64_t id;
  int dev = 0; /* for OK() */

  OK(conn, hipd_session_info(conn, &info));
  id = info_int(info, "id");
  hipd_info_free(info);
  return (uint64_t)id;
}

/* A thread of libhipd asleep on its ring's futex doorbell (it waits for a
 * long memset, without spinning) is woken for everything, not only for
 * its completion: another thread's request on the socket and its reply,
 * and the end of its session (session.kill from another connection), which
 * fails its call. The connections' timeouts turn a missed wake into a
 * failure. */
START_TEST(test_futex_sleepers)
{
  hipd_conn_t *conn = connect_ring("futex-sleeper");
  hipd_conn_t *other = connect_ring("futex-killer");
  uint64_t id = conn_session_id(conn);
  busy_t b;
  int rc, dev = 0; /* for OK() */

  hipd_set_busy_poll(conn, 0);
  busy_start(&b, conn, BUSY_BYTES);
  /* The memset's thread sleeps; a ping on the socket goes out and back. */
  for (int i = 0; i < 20; i++)
    ping_ok(conn);
  OK(other, hipd_session_kill(other, id));
  rc = busy_join(&b);
  ck_assert_msg(rc == 0 || rc == HIPD_EDISCONNECTED, "memset: %s",
                hipd_err_name(rc));
  rc = hipd_ping(conn, "x", 1, NULL, 0, NULL);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "ping after the kill: %s",
                hipd_err_name(rc));
  hipd_close(conn);
  hipd_close(other);
}
END_TEST

/* A long reply on the socket (a 64 MiB mem.read) to a client whose ring
 * has the futex doorbell and that does not spin: it comes in many pieces,
 * as the client reads, and the daemon writes each without a word, so the
 * client must watch its socket, not sleep on the futex, while the reply is
 * due. The connection's timeout (10 s; the read takes well under one here)
 * turns sleeping through the pieces (50 ms each) into a failure. */
START_TEST(test_futex_long_reply)
{
  enum { LEN = 64 << 20 };
  hipd_conn_t *conn = connect_ring("futex-long-reply");
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  uint8_t *back = xmalloc(LEN);
  int dev = 0; /* for OK() */

  hipd_set_busy_poll(conn, 0);
  hipd_set_timeout(conn, 10000);
  OK(conn, hipd_mem_alloc(conn, 0, LEN, "byte", &b));
  OK(conn, hipd_mem_memset(conn, b, 0, LEN, 0x3c));
  for (int i = 0; i < 2; i++) {
    memset(back, 0, LEN);
    OK(conn, hipd_mem_read(conn, b, 0, back, LEN));
    ck_assert_uint_eq(back[0], 0x3c);
    ck_assert_uint_eq(back[LEN - 1], 0x3c);
  }
  OK(conn, hipd_mem_free(conn, b));
  hipd_close(conn);
  free(back);
}
END_TEST

/* With the futex doorbell, a thread whose answer is due on the socket (a
 * mem.read behind a long memset on the default stream) sleeps on the
 * socket, not on the futex: another thread's ring calls (stream.query of
 * a stream with work queued, answered at once) must still be answered
 * meanwhile, their completions rung with ring.wake
 * (RING_ASLEEP_SOCKET). They once waited for the read: the daemon rang
 * the futex nobody slept on. A loaded machine could delay the ring calls
 * past the memset, so this tries up to 3 times. */
typedef struct {
  hipd_conn_t *conn;
  hipd_stream_t st;
  hipd_buffer_t small;
  atomic_int read_done;
  int during, rc; /* calls answered while the read was due */
} socket_sleeper_t;

static void *socket_sleeper_ring_main(void *arg)
{
  socket_sleeper_t *t = arg;

  hipd_call_t *queued = NULL;
  int rc;

  /* Queued behind the memset (the CPU device runs one op at a time, and
   * answers it when done: not waited for here), so that each
   * stream.query below is answered at once, without asking the device. */
  t->rc =
      hipd_mem_memset_async_begin(t->conn, t->small, 0, 64, 1, t->st, &queued);
  while (t->rc == 0 && !atomic_load(&t->read_done)) {
    int idle = -1;
    t->rc = hipd_stream_query(t->conn, t->st, &idle);
    if (t->rc == 0 && !atomic_load(&t->read_done))
      t->during++;
  }
  if (queued != NULL && (rc = hipd_wait(queued)) != 0 && t->rc == 0)
    t->rc = rc;
  return NULL;
}

START_TEST(test_futex_socket_sleeper)
{
  hipd_conn_t *conn = connect_ring("futex-socket-sleeper");
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_stream_t def = HIPD_STREAM_NULL;
  socket_sleeper_t t = {.conn = conn};
  int dev = 0, tries = 0; /* for OK() */

  hipd_set_busy_poll(conn, 0);
  OK(conn, hipd_mem_alloc(conn, 0, BUSY_BYTES, "byte", &b));
  OK(conn, hipd_stream_default(conn, 0, &def));
  OK(conn, hipd_stream_create(conn, 0, &t.st));
  OK(conn, hipd_mem_alloc(conn, 0, 64, "byte", &t.small));
  while (tries++ < 3 && t.during < 3) {
    pthread_t th;
    uint8_t back[4];

    t.during = 0;
    atomic_store(&t.read_done, 0);
    hipd_call_t *memset = NULL;

    OK(conn, hipd_mem_memset_async_begin(conn, b, 0, BUSY_BYTES, tries, def,
                                         &memset));
    ck_assert_int_eq(pthread_create(&th, NULL, socket_sleeper_ring_main, &t),
                     0);
    OK(conn, hipd_mem_read(conn, b, 0, back, sizeof(back)));
    atomic_store(&t.read_done, 1);
    pthread_join(th, NULL);
    OK(conn, hipd_wait(memset));
    ck_assert_msg(t.rc == 0, "ring calls: %s (%s)", hipd_err_name(t.rc),
                  hipd_last_error(conn));
    ck_assert_uint_eq(back[0], (uint8_t)tries);
  }
  ck_assert_msg(t.during >= 3,
                "%d ring calls answered while a mem.read was due, %d times",
                t.during, tries - 1);
  OK(conn, hipd_stream_destroy(conn, t.st));
  OK(conn, hipd_mem_free(conn, t.small));
  OK(conn, hipd_mem_free(conn, b));
  hipd_close(conn);
}
END_TEST

/* Pipelined past the ring: DEEP memsets begun before any is waited for.
 * Those that find the ring full go on the socket; with its completions
 * all unread the daemon answers on the socket too: the library must match
 * every answer from either path and keep reading while it sends. Every
 * call is answered; the last memset of each cell wins. The connection's
 * timeout turns a hang into a failure. */
START_TEST(test_pipeline_deep)
{
  enum { DEEP = 2000, CELL = 64 };
  hipd_conn_t *conn = connect_ring("ring-deep");
  hipd_call_t **calls = xmalloc(DEEP * sizeof(*calls));
  uint32_t *u = xmalloc(CELL * 64);
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_stream_t st = HIPD_STREAM_NULL;
  ring_counts_t c0, c1;
  int dev = 0, begun = 0, rc = 0;

  hipd_set_timeout(conn, 5000);
  c0 = ring_counts(conn);
  ck_assert_int_eq(c0.entries, RING_DEFAULT_ENTRIES);
  OK(conn, hipd_mem_alloc(conn, 0, CELL * 64, "byte", &b));
  OK(conn, hipd_stream_create(conn, 0, &st));
  for (; begun < DEEP; begun++)
    if ((rc = hipd_mem_memset_async_begin(
             conn, b, (uint64_t)(begun % 64) * CELL, CELL, begun & 0xff, st,
             &calls[begun])) != 0)
      break;
  ck_assert_msg(rc == 0, "begin %d of %d: %s (%s)", begun, DEEP,
                hipd_err_name(rc), hipd_last_error(conn));
  for (int i = 0; i < begun; i++)
    ck_assert_int_eq(hipd_wait(calls[i]), 0);
  OK(conn, hipd_stream_synchronize(conn, st));
  OK(conn, hipd_mem_read(conn, b, 0, u, CELL * 64));
  for (int i = 0; i < CELL * 16; i++) {
    int c = i / 16, last = (DEEP - 1 - c) / 64 * 64 + c;
    ck_assert_msg(u[i] == (uint32_t)(last & 0xff) * 0x01010101u,
                  "word %d: %08x, expected the memset of op %d", i, u[i], last);
  }
  c1 = ring_counts(conn);
  /* More than a ring's worth came on the ring; each was answered on it,
   * or on the socket while its completions were all unread. */
  ck_assert_int_gt(c1.requests - c0.requests, RING_DEFAULT_ENTRIES);
  ck_assert_int_eq(c1.requests, c1.completions + c1.on_socket);
  OK(conn, hipd_stream_destroy(conn, st));
  OK(conn, hipd_mem_free(conn, b));
  hipd_close(conn);
  free(calls);
  free(u);
}
END_TEST

/* ================================================ 2. order across paths */

/* On one stream per thread, a random mix of mem.write_async with data
 * (socket only), mem.memset_async and kernel.launch of MIX_SRC (ring, when
 * it has room), pipelined WINDOW deep, over CELLS cells: the final cells
 * are right only if the daemon ran them in the order issued. Every
 * BAD_EVERY-th operation fails on purpose, alternately a launch naming a
 * freed buffer (ESTALE) and a memset past the buffer's end (ERANGE): that
 * call, and only it, gets that code. */
enum {
  ORDER_THREADS = 4,
  ORDER_OPS = 1500,
  CELLS = 16,
  WINDOW = 48,
  BAD_EVERY = 29
};

typedef struct {
  hipd_conn_t *conn;
  hipd_kernel_t k;
  hipd_buffer_t freed;
  int idx;
  hipd_buffer_t buf;
  hipd_stream_t st;
  uint32_t model[CELLS];
  int writes, rings, bad;
  char why[512];
} order_t;

static uint32_t xs32(uint32_t *s)
{
  uint32_t x = *s;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *s = x;
}

static void *order_main(void *arg)
{
  order_t *o = arg;
  hipd_call_t *calls[WINDOW];
  int want[WINDOW];
  uint32_t vals[WINDOW];
  uint32_t seed = 0x9e3779b9u * (uint32_t)(o->idx + 1);
  hipd_args_t *args = hipd_args_new();
  int rc = 0;

  for (int i = 0; i < ORDER_OPS + WINDOW && o->why[0] == '\0'; i++) {
    int slot = i % WINDOW;

    if (i >= WINDOW) {
      /* The oldest call of the window: its code must be the one wanted. */
      int got = hipd_wait(calls[slot]);

      if (got != want[slot]) {
        snprintf(o->why, sizeof(o->why),
                 "stream %d op %d: %s (%s), expected %s", o->idx, i - WINDOW,
                 got == 0 ? "0" : hipd_err_name(got),
                 got == 0 ? "" : hipd_last_error(o->conn),
                 want[slot] == 0 ? "0" : hipd_err_name(want[slot]));
        /* The rest of the window is still to be waited for. */
        for (int j = i - WINDOW + 1; j < i && j < ORDER_OPS; j++)
          hipd_wait(calls[j % WINDOW]);
        break;
      }
    }
    if (i >= ORDER_OPS)
      continue;
    uint32_t r = xs32(&seed);
    int cell = (int)(r % CELLS);
    uint32_t v = xs32(&seed);
    want[slot] = 0;
    if (i % BAD_EVERY == BAD_EVERY - 1) {
      o->bad++;
      if ((i / BAD_EVERY) % 2 == 0) {
        hipd_args_clear(args);
        hipd_args_buffer(args, o->freed, 0);
        hipd_args_i32(args, cell);
        hipd_args_i32(args, (int32_t)v);
        want[slot] = HIPD_ESTALE;
        rc = hipd_kernel_launch_begin(o->conn, o->k, ONE3, ONE3, 0, o->st, args,
                                      &calls[slot]);
      } else {
        want[slot] = HIPD_ERANGE;
        rc = hipd_mem_memset_async_begin(o->conn, o->buf, CELLS * 4 - 2, 4, 1,
                                         o->st, &calls[slot]);
      }
    } else if (r % 3 == 0) {
      vals[slot] = v;
      o->model[cell] = v;
      o->writes++;
      rc = hipd_mem_write_async_begin(o->conn, o->buf, (uint64_t)cell * 4,
                                      &vals[slot], 4, o->st, &calls[slot]);
    } else if (r % 3 == 1) {
      uint8_t b = (uint8_t)v;
      o->model[cell] = b * 0x01010101u;
      o->rings++;
      rc = hipd_mem_memset_async_begin(o->conn, o->buf, (uint64_t)cell * 4, 4,
                                       b, o->st, &calls[slot]);
    } else {
      o->model[cell] = o->model[cell] * 31u + v;
      o->rings++;
      hipd_args_clear(args);
      hipd_args_buffer(args, o->buf, 0);
      hipd_args_i32(args, cell);
      hipd_args_i32(args, (int32_t)v);
      rc = hipd_kernel_launch_begin(o->conn, o->k, ONE3, ONE3, 0, o->st, args,
                                    &calls[slot]);
    }
    if (rc != 0) {
      snprintf(o->why, sizeof(o->why), "stream %d op %d: begin: %s (%s)",
               o->idx, i, hipd_err_name(rc), hipd_last_error(o->conn));
      /* The window's calls still pending are waited for below. */
      for (int j = (i >= WINDOW ? i - WINDOW + 1 : 0); j < i; j++)
        hipd_wait(calls[j % WINDOW]);
      break;
    }
  }
  hipd_args_free(args);
  return NULL;
}

/* ORDER_THREADS threads on one connection, a stream each. */
static void order_run(void)
{
  hipd_conn_t *conn = connect_ring("ring-order");
  order_t o[ORDER_THREADS];
  pthread_t th[ORDER_THREADS];
  hipd_buffer_t freed = HIPD_BUFFER_NULL;
  hipd_kernel_t k = compile_cpu(conn, MIX_SRC, "mix");
  ring_counts_t c0, c1;
  int dev = 0, ops = 0;

  c0 = ring_counts(conn);
  ck_assert_int_eq(c0.entries, RING_DEFAULT_ENTRIES);
  OK(conn, hipd_mem_alloc(conn, 0, CELLS, "uint32", &freed));
  OK(conn, hipd_mem_free(conn, freed));
  memset(o, 0, sizeof(o));
  for (int t = 0; t < ORDER_THREADS; t++) {
    o[t].conn = conn;
    o[t].k = k;
    o[t].freed = freed;
    o[t].idx = t;
    OK(conn, hipd_mem_alloc(conn, 0, CELLS, "uint32", &o[t].buf));
    OK(conn, hipd_mem_memset(conn, o[t].buf, 0, CELLS * 4, 0));
    OK(conn, hipd_stream_create(conn, 0, &o[t].st));
  }
  for (int t = 0; t < ORDER_THREADS; t++)
    ck_assert_int_eq(pthread_create(&th[t], NULL, order_main, &o[t]), 0);
  for (int t = 0; t < ORDER_THREADS; t++)
    pthread_join(th[t], NULL);
  for (int t = 0; t < ORDER_THREADS; t++) {
    uint32_t cells[CELLS];

    ck_assert_msg(o[t].why[0] == '\0', "%s", o[t].why);
    ck_assert_int_gt(o[t].writes, 100);
    ck_assert_int_gt(o[t].rings, 100);
    OK(conn, hipd_stream_synchronize(conn, o[t].st));
    OK(conn, hipd_mem_read(conn, o[t].buf, 0, cells, sizeof(cells)));
    for (int c = 0; c < CELLS; c++)
      ck_assert_msg(cells[c] == o[t].model[c],
                    "stream %d cell %d: %08x, expected %08x", t, c, cells[c],
                    o[t].model[c]);
    ops += ORDER_OPS;
  }
  c1 = ring_counts(conn);
  /* The ring carried a good share of them, and answered all it took. */
  ck_assert_int_gt(c1.requests - c0.requests, ops / 4);
  ck_assert_int_eq(c1.requests, c1.completions + c1.on_socket);
  for (int t = 0; t < ORDER_THREADS; t++) {
    OK(conn, hipd_stream_destroy(conn, o[t].st));
    OK(conn, hipd_mem_free(conn, o[t].buf));
  }
  OK(conn, hipd_kernel_destroy(conn, k));
  hipd_close(conn);
}

START_TEST(test_order)
{
  order_run();
}
END_TEST

/* ===================================================== a raw ring client */

/* A session driven by hand: the socket through tests/lib/rawclient.h, the
 * ring mapped here, every index and slot written by the test. */
typedef struct {
  raw_t *r;
  uint8_t *base; /* the ring's mapping */
  size_t size;
  uint32_t entries;
  ring_hdr_t *hdr;
  ring_sqe_t *sq;
  ring_cqe_t *cq;
  uint32_t sq_tail, cq_head; /* ours */
  uint64_t sock;             /* requests written on the socket (hello too) */
  int kicks, kicks_dropped;  /* doorbells sent; found the socket full */
  long long kicked_ms;       /* when rr_reap() last rang while idle */
  msgpack_sbuffer sb;        /* the submission being packed */
  msgpack_packer pk;
  msgpack_zone zone;
  proto_msg_t msg; /* the last completion read: */
  int code;        /* its error code, 0 for a result */
  char text[RING_CQE_DATA + 1];
  uint8_t cbuf[RING_CQE_DATA]; /* its bytes, copied out */
} rr_t;

static rr_t *rr_open(const harness_daemon_t *d)
{
  rr_t *rr = xmalloc(sizeof(*rr));

  daemon_alive();
  rr->r = raw_open(d->socket);
  raw_hello(rr->r);
  rr->sock = 1;
  msgpack_sbuffer_init(&rr->sb);
  msgpack_packer_init(&rr->pk, &rr->sb, msgpack_sbuffer_write);
  msgpack_zone_init(&rr->zone, 4096);
  return rr;
}

static void rr_close(rr_t *rr)
{
  if (rr->base != NULL)
    munmap(rr->base, rr->size);
  raw_close(rr->r);
  msgpack_sbuffer_destroy(&rr->sb);
  msgpack_zone_destroy(&rr->zone);
  free(rr);
}

/* ---- the socket ---- */

/* Send what was packed with rr->r->pk (with descriptor @p fd unless -1):
 * one request more on the socket. */
static void rr_sock_send(rr_t *rr, int fd)
{
  ck_assert_int_eq(fd >= 0 ? raw_flush_fd(rr->r, fd) : raw_flush(rr->r), 0);
  rr->sock++;
}

/* Send the request packed and read its answer (rr->r->msg). */
static int rr_sock_call(rr_t *rr, uint32_t msgid, char *msg, size_t size)
{
  rr_sock_send(rr, -1);
  return raw_response(rr->r, msgid, msg, size);
}

/* A handle the request answers with; the request must succeed. */
static uint64_t rr_sock_handle(rr_t *rr, uint32_t msgid)
{
  char msg[512];
  int rc = rr_sock_call(rr, msgid, msg, sizeof(msg));

  ck_assert_msg(rc == 0, "request %u: %s (%s)", msgid, hipd_err_name(rc), msg);
  ck_assert_int_eq(rr->r->msg.result->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
  return rr->r->msg.result->via.u64;
}

static uint64_t rr_alloc(rr_t *rr, uint64_t bytes)
{
  raw_request(rr->r, 9001, "mem.alloc", 2);
  msgpack_pack_uint64(&rr->r->pk, bytes);
  proto_pack_cstr(&rr->r->pk, "byte");
  return rr_sock_handle(rr, 9001);
}

static uint64_t rr_stream(rr_t *rr)
{
  raw_request(rr->r, 9002, "stream.create", 1);
  msgpack_pack_uint64(&rr->r->pk, 0);
  return rr_sock_handle(rr, 9002);
}

/* The session's id (session.info). */
static uint64_t rr_session_id(rr_t *rr)
{
  uint64_t id = 0;

  raw_request(rr->r, 9003, "session.info", 0);
  ck_assert_int_eq(rr_sock_call(rr, 9003, NULL, 0), 0);
  ck_assert_int_eq(
      proto_obj_uint(proto_map_get(rr->r->msg.result, "id"), UINT64_MAX, &id),
      0);
  return id;
}

/* Read @p len bytes of buffer @p buf over the socket into @p out. */
static void rr_read(rr_t *rr, uint64_t buf, void *out, size_t len)
{
  raw_request(rr->r, 9004, "mem.read", 3);
  msgpack_pack_uint64(&rr->r->pk, buf);
  msgpack_pack_uint64(&rr->r->pk, 0);
  msgpack_pack_uint64(&rr->r->pk, len);
  ck_assert_int_eq(rr_sock_call(rr, 9004, NULL, 0), 0);
  ck_assert_int_eq(rr->r->msg.result->type, MSGPACK_OBJECT_BIN);
  ck_assert_uint_eq(rr->r->msg.result->via.bin.size, len);
  memcpy(out, rr->r->msg.result->via.bin.ptr, len);
}

/* Read the first @p len bytes (at most 4096) of buffer @p buf over the
 * socket: each must be @p value. */
static void rr_expect_filled(rr_t *rr, uint64_t buf, size_t len, uint8_t value)
{
  uint8_t back[4096];

  ck_assert_uint_le(len, sizeof(back));
  rr_read(rr, buf, back, len);
  for (size_t i = 0; i < len; i++)
    ck_assert_msg(back[i] == value, "byte %zu of buffer 0x%llx: %02x, not %02x",
                  i, (unsigned long long)buf, back[i], value);
}

/* Has the daemon closed the connection (without waiting)? */
static int rr_peer_closed(rr_t *rr)
{
  struct pollfd pfd = {.fd = rr->r->fd, .events = POLLIN};
  char c;

  if (poll(&pfd, 1, 0) <= 0)
    return 0;
  if (pfd.revents & (POLLHUP | POLLERR))
    return 1;
  return recv(rr->r->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- the ring ---- */

/* A memfd of @p size bytes with @p seals. */
static int ring_memfd(size_t size, int seals)
{
  int fd = memfd_create("check-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
  if (seals != 0)
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

/* ring.open with descriptor @p fd (-1: none) and @p nparams params, the
 * first @p entries. @return the answer's code; the result is rr->r->msg. */
static int rr_ring_open_fd(rr_t *rr, int fd, uint32_t nparams, uint64_t entries,
                           char *msg, size_t size)
{
  raw_request(rr->r, 9005, "ring.open", nparams);
  for (uint32_t i = 0; i < nparams; i++)
    msgpack_pack_uint64(&rr->r->pk, entries);
  rr_sock_send(rr, fd);
  return raw_response(rr->r, 9005, msg, size);
}

/* ring.open [entries, @p bell] with descriptor @p fd. @return the
 * answer's code; the result is rr->r->msg. */
static int rr_ring_open_bell(rr_t *rr, int fd, uint64_t entries,
                             const char *bell, char *msg, size_t size)
{
  raw_request(rr->r, 9006, "ring.open", 2);
  msgpack_pack_uint64(&rr->r->pk, entries);
  proto_pack_cstr(&rr->r->pk, bell);
  rr_sock_send(rr, fd);
  return raw_response(rr->r, 9006, msg, size);
}

/* Make, seal, map and open a ring of @p entries with doorbell @p bell
 * (NULL: ring.open without the param, whose default is "socket"). */
static void rr_ring_bell(rr_t *rr, uint32_t entries, const char *bell)
{
  size_t size = proto_ring_size(entries);
  int fd = ring_memfd(size, F_SEAL_SHRINK | F_SEAL_GROW);
  uint64_t v = 0;
  char msg[512];
  int rc;

  rr->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ck_assert(rr->base != MAP_FAILED);
  rr->size = size;
  rr->entries = entries;
  rr->hdr = (ring_hdr_t *)rr->base;
  rr->sq = proto_ring_sq(rr->base);
  rr->cq = proto_ring_cq(rr->base, entries);
  /* Whatever is there before, the daemon's indices start at 0. */
  atomic_store(&rr->hdr->sq_head, 1234);
  atomic_store(&rr->hdr->cq_tail, 777);
  rc = bell != NULL ? rr_ring_open_bell(rr, fd, entries, bell, msg, sizeof(msg))
                    : rr_ring_open_fd(rr, fd, 1, entries, msg, sizeof(msg));
  close(fd); /* the mapping is all we need */
  ck_assert_msg(rc == 0, "ring.open: %s (%s)", hipd_err_name(rc), msg);
  {
    const msgpack_object *o = proto_map_get(rr->r->msg.result, "doorbell");
    const char *want = bell != NULL ? bell : RING_DOORBELL_SOCKET;

    ck_assert(o != NULL && o->type == MSGPACK_OBJECT_STR);
    ck_assert_msg(o->via.str.size == strlen(want) &&
                      memcmp(o->via.str.ptr, want, o->via.str.size) == 0,
                  "ring.open answered doorbell '%.*s', not '%s'",
                  (int)o->via.str.size, o->via.str.ptr, want);
  }
  ck_assert_int_eq(proto_obj_uint(proto_map_get(rr->r->msg.result, "entries"),
                                  UINT32_MAX, &v),
                   0);
  ck_assert_uint_eq(v, entries);
  ck_assert_int_eq(
      proto_obj_uint(proto_map_get(rr->r->msg.result, "slot"), UINT32_MAX, &v),
      0);
  ck_assert_uint_eq(v, RING_SLOT);
  ck_assert_int_eq(
      proto_obj_uint(proto_map_get(rr->r->msg.result, "size"), UINT64_MAX, &v),
      0);
  ck_assert_uint_eq(v, size);
  ck_assert_uint_eq(rr->hdr->magic, RING_MAGIC);
  ck_assert_uint_eq(rr->hdr->version, RING_VERSION);
  ck_assert_uint_eq(rr->hdr->entries, entries);
  ck_assert_uint_eq(rr->hdr->slot, RING_SLOT);
  ck_assert_uint_eq(atomic_load(&rr->hdr->sq_head), 0);
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_tail), 0);
  ck_assert_uint_eq(atomic_load(&rr->hdr->sq_kick), 1);
}

/* Make, seal, map and open a ring of @p entries, as libhipd did before
 * the futex doorbell (ring.open [entries]). */
static void rr_ring(rr_t *rr, uint32_t entries)
{
  rr_ring_bell(rr, entries, NULL);
}

/* Start packing a submission. */
static msgpack_packer *rr_begin(rr_t *rr, uint32_t msgid, const char *method,
                                uint32_t nparams)
{
  msgpack_sbuffer_clear(&rr->sb);
  proto_pack_request(&rr->pk, msgid, method, nparams);
  return &rr->pk;
}

/* Write @p n bytes of @p data into the next SQ slot, its length field
 * @p len and its `after` @p after, and publish it. */
static void rr_put(rr_t *rr, const void *data, size_t n, uint32_t len,
                   uint64_t after)
{
  ring_sqe_t *e = &rr->sq[rr->sq_tail & (rr->entries - 1)];

  memcpy(e->data, data, n < RING_SQE_DATA ? n : RING_SQE_DATA);
  e->len = len;
  e->flags = 0;
  e->after = after;
  rr->sq_tail++;
  atomic_store_explicit(&rr->hdr->sq_tail, rr->sq_tail, memory_order_seq_cst);
}

/* Publish what rr_begin() and its params packed, after the socket's
 * requests so far. */
static void rr_publish(rr_t *rr)
{
  ck_assert_uint_le(rr->sb.size, RING_SQE_DATA);
  rr_put(rr, rr->sb.data, rr->sb.size, (uint32_t)rr->sb.size, rr->sock);
}

/* The doorbell, unconditionally: a notification, no answer, sent without
 * blocking (a daemon that stopped reading the socket must not hang the
 * test): one that finds the socket full is counted and dropped. @return 0,
 * or -1 (dropped, or the connection is gone). */
static int rr_ring_kick(rr_t *rr)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  ssize_t n;
  int e;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_notify(&pk, RING_KICK, 0);
  n = send(rr->r->fd, sb.data, sb.size, MSG_DONTWAIT | MSG_NOSIGNAL);
  e = errno;
  ck_assert(n < 0 || (size_t)n == sb.size); /* a few bytes go whole */
  msgpack_sbuffer_destroy(&sb);
  if (n > 0) {
    rr->kicks++;
    return 0;
  }
  if (e == EAGAIN || e == EWOULDBLOCK)
    rr->kicks_dropped++;
  return -1;
}

/* The doorbell as the protocol wants it: when the daemon stopped polling
 * and submissions wait. */
static void rr_kick(rr_t *rr)
{
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load(&rr->hdr->sq_kick) != 0 &&
      atomic_load(&rr->hdr->sq_head) != rr->sq_tail)
    rr_ring_kick(rr);
}

/* Publish and ring the doorbell if needed. */
static void rr_submit(rr_t *rr)
{
  rr_publish(rr);
  rr_kick(rr);
}

/* The next completion within @p ms: decoded into rr->msg, rr->code and
 * rr->text, and popped. @return 1, or 0 if none came. */
static int rr_reap(rr_t *rr, int ms)
{
  long long deadline = harness_now_ms() + ms;

  for (;;) {
    uint32_t tail =
        atomic_load_explicit(&rr->hdr->cq_tail, memory_order_acquire);

    if (tail != rr->cq_head) {
      const ring_cqe_t *e = &rr->cq[rr->cq_head & (rr->entries - 1)];
      const char *reason = "", *t = NULL;
      uint32_t len = e->len;
      size_t tlen = 0;
      int code = 0;

      ck_assert_msg(len > 0 && len <= RING_CQE_DATA, "a completion of %u bytes",
                    len);
      memcpy(rr->cbuf, e->data, len);
      rr->cq_head++;
      atomic_store_explicit(&rr->hdr->cq_head, rr->cq_head,
                            memory_order_seq_cst);
      /* A completion read while submissions wait: the doorbell if the
       * daemon sleeps. */
      rr_kick(rr);
      msgpack_zone_clear(&rr->zone);
      ck_assert_msg(
          proto_msg_decode(rr->cbuf, len, &rr->zone, &rr->msg, &reason) == 0,
          "a completion: %s", reason);
      ck_assert_int_eq(rr->msg.type, PROTO_RESPONSE);
      rr->code = 0;
      rr->text[0] = '\0';
      if (rr->msg.error->type != MSGPACK_OBJECT_NIL) {
        ck_assert_int_eq(proto_error_decode(rr->msg.error, &code, &t, &tlen),
                         0);
        rr->code = code;
        snprintf(rr->text, sizeof(rr->text), "%.*s", (int)tlen, t);
      }
      return 1;
    }
    /* Submissions wait: tell a sleeping daemon, now and then. */
    if (harness_now_ms() - rr->kicked_ms >= 5) {
      rr_kick(rr);
      rr->kicked_ms = harness_now_ms();
    }
    if (harness_now_ms() >= deadline)
      return 0;
    usleep(100);
  }
}

/* The completion of @p msgid, next: @return its code (text in rr->text). */
static int rr_answer(rr_t *rr, uint32_t msgid)
{
  ck_assert_msg(rr_reap(rr, 20000), "no completion for %u", msgid);
  ck_assert_uint_eq(rr->msg.msgid, msgid);
  return rr->code;
}

/* mem.memset [buf, off, len, value] (on the default stream) packed. */
static void rr_pack_memset(rr_t *rr, uint32_t msgid, uint64_t buf, uint64_t off,
                           uint64_t len, unsigned value)
{
  msgpack_packer *pk = rr_begin(rr, msgid, "mem.memset", 4);

  msgpack_pack_uint64(pk, buf);
  msgpack_pack_uint64(pk, off);
  msgpack_pack_uint64(pk, len);
  msgpack_pack_unsigned_int(pk, value);
}

/* mem.memset_async [buf, off, len, value, stream] packed. */
static void rr_pack_memset_async(rr_t *rr, uint32_t msgid, uint64_t buf,
                                 uint64_t off, uint64_t len, unsigned value,
                                 uint64_t stream)
{
  msgpack_packer *pk = rr_begin(rr, msgid, "mem.memset_async", 5);

  msgpack_pack_uint64(pk, buf);
  msgpack_pack_uint64(pk, off);
  msgpack_pack_uint64(pk, len);
  msgpack_pack_unsigned_int(pk, value);
  msgpack_pack_uint64(pk, stream);
}

/* A memset through the ring that must succeed. */
static void rr_memset_ok(rr_t *rr, uint32_t msgid, uint64_t buf, uint64_t off,
                         uint64_t len, unsigned value)
{
  rr_pack_memset(rr, msgid, buf, off, len, value);
  rr_submit(rr);
  ck_assert_msg(rr_answer(rr, msgid) == 0, "memset %u: %s (%s)", msgid,
                hipd_err_name(rr->code), rr->text);
}

/* ---- the daemon, from outside ---- */

/* Another client, through libhipd and its ring, gets everything right. */
static void other_client_ok(const char *name)
{
  hipd_conn_t *conn;
  int dev = 0;

  daemon_alive();
  conn = connect_named(shared, name, 60000);
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  uint8_t back[256];
  ring_counts_t c;

  ping_ok(conn);
  OK(conn, hipd_mem_alloc(conn, 0, sizeof(back), "byte", &b));
  OK(conn, hipd_mem_memset(conn, b, 0, sizeof(back), 0x5c));
  OK(conn, hipd_mem_read(conn, b, 0, back, sizeof(back)));
  for (size_t i = 0; i < sizeof(back); i++)
    ck_assert_uint_eq(back[i], 0x5c);
  c = ring_counts(conn);
  ck_assert_int_eq(c.entries, RING_DEFAULT_ENTRIES);
  ck_assert_int_ge(c.requests, 1);
  OK(conn, hipd_mem_free(conn, b));
  hipd_close(conn);
}

/* The session of @p rr was closed by the daemon, which logged @p why. */
static void rr_expect_closed(rr_t *rr, const char *why)
{
  ck_assert_msg(harness_raw_wait_closed(rr->r->fd, 10000),
                "the session was not closed (%s)", why);
  ck_assert_msg(harness_log_wait(shared, why, 5000), "no '%s' in the log", why);
}

/* The names of @p pid's threads, for messages. */
static void proc_thread_names(pid_t pid, char *buf, size_t size)
{
  static proc_thread_t t[512];
  int n = proc_threads(pid, t, 512);
  size_t off = 0;

  buf[0] = '\0';
  for (int i = 0; i < n && off + 40 < size; i++)
    off += (size_t)snprintf(buf + off, size - off, "%s%s", off ? " " : "",
                            t[i].name);
}

/* How many of @p pid's threads have a name that starts with @p prefix, or
 * -1 if they cannot be listed. */
static int proc_threads_named(pid_t pid, const char *prefix)
{
  static proc_thread_t t[512];
  int n = proc_threads(pid, t, 512), count = 0;

  for (int i = 0; i < n; i++)
    count += strncmp(t[i].name, prefix, strlen(prefix)) == 0;
  return n < 0 ? -1 : count;
}

/* The CPU time of @p pid so far (utime + stime), in clock ticks. */
static long long proc_cpu_ticks(pid_t pid)
{
  proc_stat_t st;

  return proc_stat_read(pid, &st) == 0 ? st.utime + st.stime : -1;
}

/* ======================================================= 3. hostile rings */

/* A session with a ring of @p entries and a buffer of @p bytes, whose
 * ring works: one memset through it. */
static rr_t *rr_session(uint32_t entries, uint64_t bytes, uint64_t *buf)
{
  rr_t *rr = rr_open(shared);

  rr_ring(rr, entries);
  *buf = rr_alloc(rr, bytes);
  rr_memset_ok(rr, 1, *buf, 0, bytes, 0x11);
  return rr;
}

/* (a), (d) What a slot may hold that is not one whole request: */
typedef struct {
  const char *name;
  const char *why; /* in the log line of the session's close */
} garbage_t;

static const garbage_t garbage[] = {
    {"bytes that are not msgpack",
     "session closed: protocol violation: a ring submission"},
    {"a truncated request",
     "protocol violation: a ring submission is not a whole message"},
    {"two requests in one slot",
     "protocol violation: a ring submission holds more than one message"},
    {"a response", "protocol violation: a ring submission that is not a "
                   "request"},
    {"a notification", "protocol violation: a ring submission that is not a "
                       "request"},
    {"a request of 3 elements", "protocol violation: a ring submission: "},
    {"a msgid that is not a u32", "protocol violation: a ring submission: "},
    {"msgpack nested too deep", "protocol violation: a ring submission "},
    {"len 0", "protocol violation: ring submission 1 has a length of 0 bytes"},
    {"len 497",
     "protocol violation: ring submission 1 has a length of 497 bytes"},
    {"len 0xffffffff", "protocol violation: ring submission 1 has a length of "
                       "4294967295 bytes"},
};

START_TEST(test_garbage_slot)
{
  const garbage_t *g = &garbage[_i];
  uint64_t buf;
  rr_t *rr = rr_session(8, 4096, &buf);
  uint8_t bytes[RING_SQE_DATA];
  msgpack_packer *pk;
  size_t n;

  switch (_i) {
  case 0:
    fill_random(bytes, sizeof(bytes), 77);
    bytes[0] = 0xc1; /* never msgpack */
    rr_put(rr, bytes, 40, 40, rr->sock);
    break;
  case 1:
    rr_pack_memset(rr, 2, buf, 0, 16, 1);
    rr_put(rr, rr->sb.data, rr->sb.size - 3, (uint32_t)rr->sb.size - 3,
           rr->sock);
    break;
  case 2:
    rr_pack_memset(rr, 2, buf, 0, 16, 1);
    n = rr->sb.size;
    memcpy(bytes, rr->sb.data, n);
    memcpy(bytes + n, rr->sb.data, n);
    rr_put(rr, bytes, 2 * n, (uint32_t)(2 * n), rr->sock);
    break;
  case 3:
    msgpack_sbuffer_clear(&rr->sb);
    msgpack_pack_array(&rr->pk, 4);
    msgpack_pack_uint8(&rr->pk, 1);
    msgpack_pack_uint8(&rr->pk, 2);
    msgpack_pack_nil(&rr->pk);
    msgpack_pack_nil(&rr->pk);
    rr_publish(rr);
    break;
  case 4:
    msgpack_sbuffer_clear(&rr->sb);
    proto_pack_notify(&rr->pk, "mem.memset", 0);
    rr_publish(rr);
    break;
  case 5:
    msgpack_sbuffer_clear(&rr->sb);
    msgpack_pack_array(&rr->pk, 3);
    msgpack_pack_uint8(&rr->pk, 0);
    msgpack_pack_uint8(&rr->pk, 2);
    proto_pack_cstr(&rr->pk, "stream.query");
    rr_publish(rr);
    break;
  case 6:
    msgpack_sbuffer_clear(&rr->sb);
    msgpack_pack_array(&rr->pk, 4);
    msgpack_pack_uint8(&rr->pk, 0);
    msgpack_pack_int(&rr->pk, -2);
    proto_pack_cstr(&rr->pk, "stream.query");
    msgpack_pack_array(&rr->pk, 0);
    rr_publish(rr);
    break;
  case 7:
    pk = rr_begin(rr, 2, "mem.memset", 4);
    for (int i = 0; i < 40; i++)
      msgpack_pack_array(pk, 1);
    msgpack_pack_nil(pk);
    for (int i = 0; i < 3; i++)
      msgpack_pack_nil(pk);
    rr_publish(rr);
    break;
  case 8:
  case 9:
  case 10:
    rr_pack_memset(rr, 2, buf, 0, 16, 1);
    rr_put(rr, rr->sb.data, rr->sb.size,
           _i == 8   ? 0
           : _i == 9 ? RING_SQE_DATA + 1
                     : UINT32_MAX,
           rr->sock);
    break;
  }
  rr_kick(rr);
  rr_expect_closed(rr, g->why);
  /* The submission answered nothing. */
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_tail), 1);
  rr_close(rr);
  other_client_ok("after-garbage");
}
END_TEST

/* (b) An SQ tail more than a ring ahead of what the daemon took; (c) a
 * CQ head the daemon never published, ahead of its tail or more than a
 * ring behind it. Each closes the session at the daemon's next look. */
START_TEST(test_bad_indices)
{
  uint64_t buf;
  rr_t *rr = rr_session(8, 4096, &buf);
  const char *why = NULL;

  switch (_i) {
  case 0: /* 9 ahead of the 1 taken */
    rr->sq_tail += 9;
    atomic_store(&rr->hdr->sq_tail, rr->sq_tail);
    why = "protocol violation: ring submission tail 10 is more than a ring "
          "ahead of the 1 taken";
    break;
  case 1: /* far ahead: "behind", modulo 2^32 */
    rr->sq_tail = 0x80000000u;
    atomic_store(&rr->hdr->sq_tail, rr->sq_tail);
    why = "protocol violation: ring submission tail 2147483648 is more than";
    break;
  case 2: /* a completion head past the one completion published */
    atomic_store(&rr->hdr->cq_head, 2);
    rr_pack_memset(rr, 2, buf, 0, 16, 1);
    rr_publish(rr);
    why = "protocol violation: ring completion head 2 is not among the 1 "
          "completions published";
    break;
  case 3: /* one more than a ring behind */
    atomic_store(&rr->hdr->cq_head, 0xfffffff0u);
    rr_pack_memset(rr, 2, buf, 0, 16, 1);
    rr_publish(rr);
    why = "protocol violation: ring completion head 4294967280 is not among";
    break;
  }
  rr_ring_kick(rr);
  rr_expect_closed(rr, why);
  rr_close(rr);
  other_client_ok("after-indices");
}
END_TEST

/* (e) Methods a ring does not take: answered EINVAL on the ring ("cannot
 * come from a ring"), and nothing done; the session goes on. A bad request
 * of a ring method is answered there as on the socket, word for word. */
START_TEST(test_not_ring_methods)
{
  static const char *const methods[] = {
      "mem.alloc",   "hello",         "ring.open",       "session.info",
      "shm.create",  "mem.write",     "mem.write_async", "mem.read",
      "mem.free",    "stream.create", "kernel.compile",  "session.kill",
      "daemon.info", "ping",
  };
  const size_t nm = sizeof(methods) / sizeof(methods[0]);
  uint64_t buf, id;
  rr_t *rr = rr_session(8, 4096, &buf);
  char sockmsg[512], ringmsg[512];
  const size_t fill = 64; /* bytes memset, then read */
  int sockrc;

  id = rr_session_id(rr);
  for (size_t i = 0; i < nm; i++) {
    msgpack_packer *pk = rr_begin(rr, 100 + (uint32_t)i, methods[i],
                                  strcmp(methods[i], "mem.alloc") == 0 ? 2 : 1);
    if (strcmp(methods[i], "mem.alloc") == 0) {
      msgpack_pack_uint64(pk, 4096);
      proto_pack_cstr(pk, "byte");
    } else if (strcmp(methods[i], "session.kill") == 0) {
      msgpack_pack_uint64(pk, id);
    } else {
      msgpack_pack_uint64(pk, 8);
    }
    rr_submit(rr);
    ck_assert_int_eq(rr_answer(rr, 100 + (uint32_t)i), HIPD_EINVAL);
    ck_assert_msg(strstr(rr->text, "cannot come from a ring") != NULL, "%s: %s",
                  methods[i], rr->text);
  }
  /* Unknown methods are unknown either way. */
  rr_begin(rr, 200, "no.such_method", 0);
  rr_submit(rr);
  ck_assert_int_eq(rr_answer(rr, 200), HIPD_ENOMETHOD);
  ck_assert_msg(strstr(rr->text, "no.such_method") != NULL, "%s", rr->text);
  /* The same bad request on both paths: the same code and message. */
  for (int k = 0; k < 3; k++) {
    msgpack_packer *pk;
    rr_begin(rr, 201, "mem.memset", k == 0 ? 2 : 4);
    pk = &rr->pk;
    raw_request(rr->r, 201, "mem.memset", k == 0 ? 2 : 4);
    for (int side = 0; side < 2; side++) {
      msgpack_packer *p = side == 0 ? pk : &rr->r->pk;
      msgpack_pack_uint64(p, k == 2 ? buf + 1 : buf);
      msgpack_pack_uint64(p, k == 1 ? 4090 : 0);
      if (k != 0) {
        msgpack_pack_uint64(p, 16);
        msgpack_pack_uint64(p, k == 1 ? 1 : 300);
      }
    }
    sockrc = rr_sock_call(rr, 201, sockmsg, sizeof(sockmsg));
    rr_submit(rr);
    ck_assert_int_eq(rr_answer(rr, 201), sockrc);
    snprintf(ringmsg, sizeof(ringmsg), "%s", rr->text);
    ck_assert_int_ne(sockrc, 0);
    ck_assert_str_eq(ringmsg, sockmsg);
  }
  /* Nothing ran: the session holds the one buffer it had, its ring and
   * its socket work. */
  raw_request(rr->r, 300, "session.info", 0);
  ck_assert_int_eq(rr_sock_call(rr, 300, NULL, 0), 0);
  {
    const msgpack_object *res = proto_map_get(rr->r->msg.result, "resources");
    const msgpack_object *ring = proto_map_get(rr->r->msg.result, "ring");
    uint64_t v = 0;
    ck_assert_int_eq(
        proto_obj_uint(proto_map_get(res, "buffers"), UINT64_MAX, &v), 0);
    ck_assert_uint_eq(v, 1);
    ck_assert_int_eq(
        proto_obj_uint(proto_map_get(ring, "requests"), UINT64_MAX, &v), 0);
    ck_assert_uint_eq(v, 1 + nm + 1 + 3);
    ck_assert_int_eq(
        proto_obj_uint(proto_map_get(ring, "completions"), UINT64_MAX, &v), 0);
    ck_assert_uint_eq(v, 1 + nm + 1 + 3);
  }
  rr_memset_ok(rr, 301, buf, 0, fill, 0x42);
  rr_expect_filled(rr, buf, fill, 0x42);
  rr_close(rr);
}
END_TEST

/* A request repeated but for its msgid is not decoded again
 * (transport_ring.c keeps each session's last one decoded): each copy is
 * still answered under its own msgid, whatever the msgid's encoding
 * (fixint, 8, 16, 32 bits; a 64-bit or a signed encoding of the same
 * value takes the full decode), and each still runs on what the session
 * holds then: a handle freed between two copies is refused, not reused. */
START_TEST(test_repeated_requests)
{
  static const uint32_t ids[] = {5,     6,     127,   128,        255, 256,
                                 65535, 65536, 70000, UINT32_MAX, 7};
  uint64_t buf, other;
  rr_t *rr = rr_session(8, 4096, &buf);
  uint8_t req[RING_SQE_DATA];
  const size_t fill = 64; /* bytes memset, then read */
  size_t len;

  other = rr_alloc(rr, 4096);
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    unsigned value = 0x20 + (i == 4 ? 1 : 0); /* one differs in between */
    rr_memset_ok(rr, ids[i], buf, 0, fill, value);
    rr_expect_filled(rr, buf, fill, value);
  }
  /* The same request with its msgid 9 as a uint 64 (0xcf) and as an int
   * 8 (0xd0): the same bytes after it as the last one. */
  rr_pack_memset(rr, 7, buf, 0, fill, 0x20);
  ck_assert_uint_ge(rr->sb.size, 3);
  ck_assert_uint_eq((uint8_t)rr->sb.data[2], 7); /* fixint msgid */
  len = rr->sb.size - 3;
  req[0] = 0x94;
  req[1] = 0x00;
  req[2] = 0xcf;
  memset(req + 3, 0, 7);
  req[10] = 9;
  memcpy(req + 11, rr->sb.data + 3, len);
  rr_put(rr, req, 11 + len, (uint32_t)(11 + len), rr->sock);
  rr_kick(rr);
  ck_assert_int_eq(rr_answer(rr, 9), 0);
  req[2] = 0xd0;
  req[3] = 10;
  memmove(req + 4, req + 11, len);
  rr_put(rr, req, 4 + len, (uint32_t)(4 + len), rr->sock);
  rr_kick(rr);
  ck_assert_int_eq(rr_answer(rr, 10), 0);
  /* The same request again once its buffer is gone: refused. */
  raw_request(rr->r, 9010, "mem.free", 1);
  msgpack_pack_uint64(&rr->r->pk, buf);
  ck_assert_int_eq(rr_sock_call(rr, 9010, NULL, 0), 0);
  rr_pack_memset(rr, 11, buf, 0, fill, 0x20);
  rr_submit(rr);
  ck_assert_int_eq(rr_answer(rr, 11), HIPD_ESTALE);
  /* And the other buffer, by the same method: a new request. */
  rr_memset_ok(rr, 12, other, 0, fill, 0x33);
  rr_expect_filled(rr, other, fill, 0x33);
  rr_close(rr);
}
END_TEST

/* A reload that lowers --max-depth holds for a submission the session's
 * decode cache has (transport_ring.c): the same bytes, scanned again under
 * the new limit, break the ring as any new submission would. A launch's
 * grid is 3 deep ([0, id, method, [k, [1, 1, 1], ...]]); its kernel handle
 * is bogus, so the first two copies are dispatched and answered EHANDLE. */
START_TEST(test_repeated_after_reload)
{
  char conf[512];
  FILE *f;
  rr_t *rr;

  snprintf(conf, sizeof(conf), "%s", harness_temp_path("ring-reload.conf"));
  ck_assert_ptr_nonnull(f = fopen(conf, "w"));
  fputs("[hipd]\nmax-depth = 16\n", f);
  fclose(f);
  shared_tcase = "reload";
  shared = harness_start("--devices", "cpu", "--isolation", "none",
                         "--busy-poll", "0", "--config", conf, NULL);
  ck_assert_ptr_nonnull(shared);
  rr = rr_open(shared);
  rr_ring(rr, 8);
  for (uint32_t id = 1; id <= 3; id++) {
    msgpack_packer *pk = rr_begin(rr, id, "kernel.launch", 6);
    msgpack_pack_uint64(pk, 12345); /* no such kernel */
    for (int d = 0; d < 2; d++) {
      msgpack_pack_array(pk, 3);
      for (int i = 0; i < 3; i++)
        msgpack_pack_uint32(pk, 1);
    }
    msgpack_pack_uint32(pk, 0);
    msgpack_pack_nil(pk);
    msgpack_pack_array(pk, 0);
    if (id == 3) {
      ck_assert_ptr_nonnull(f = fopen(conf, "w"));
      fputs("[hipd]\nmax-depth = 2\n", f);
      fclose(f);
      ck_assert_int_eq(kill(shared->pid, SIGHUP), 0);
      ck_assert(harness_log_wait(shared, "configuration reloaded", 10000));
      rr_submit(rr);
      rr_expect_closed(rr, "values nested deeper than the maximum depth");
      break;
    }
    rr_submit(rr);
    ck_assert_int_eq(rr_answer(rr, id), HIPD_EHANDLE);
  }
  rr_close(rr);
  ck_assert_int_eq(harness_stop(shared), 0);
  harness_free(shared);
  shared = NULL;
}
END_TEST

/* The order of the two paths, by hand: a submission whose `after` counts
 * a socket request not yet written waits for it; a socket request runs
 * after the submissions published before it, even unannounced (no kick). */
START_TEST(test_after)
{
  uint64_t buf;
  rr_t *rr = rr_session(8, 4096, &buf);
  const size_t fill = 16; /* bytes memset, then read */

  /* R (0x22) after S (0x33), published first and kicked: it waits. */
  rr_pack_memset(rr, 10, buf, 0, 16, 0x22);
  rr_put(rr, rr->sb.data, rr->sb.size, (uint32_t)rr->sb.size, rr->sock + 1);
  rr_ring_kick(rr);
  ck_assert_int_eq(rr_reap(rr, 300), 0);
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_tail), 1);
  raw_request(rr->r, 11, "mem.memset", 4);
  msgpack_pack_uint64(&rr->r->pk, buf);
  msgpack_pack_uint64(&rr->r->pk, 0);
  msgpack_pack_uint64(&rr->r->pk, 16);
  msgpack_pack_uint64(&rr->r->pk, 0x33);
  ck_assert_int_eq(rr_sock_call(rr, 11, NULL, 0), 0);
  ck_assert_int_eq(rr_answer(rr, 10), 0);
  rr_expect_filled(rr, buf, fill, 0x22);

  /* Let the daemon fall asleep on the ring, then R (0x44) published
   * without a kick, then S (0x55) on the socket: R runs first. */
  for (int i = 0; i < 200 && atomic_load(&rr->hdr->sq_kick) == 0; i++)
    harness_sleep_ms(5);
  ck_assert_uint_eq(atomic_load(&rr->hdr->sq_kick), 1);
  rr_pack_memset(rr, 12, buf, 0, 16, 0x44);
  rr_publish(rr);
  raw_request(rr->r, 13, "mem.memset", 4);
  msgpack_pack_uint64(&rr->r->pk, buf);
  msgpack_pack_uint64(&rr->r->pk, 0);
  msgpack_pack_uint64(&rr->r->pk, 16);
  msgpack_pack_uint64(&rr->r->pk, 0x55);
  ck_assert_int_eq(rr_sock_call(rr, 13, NULL, 0), 0);
  ck_assert_int_eq(rr_answer(rr, 12), 0);
  rr_expect_filled(rr, buf, fill, 0x55);

  /* An `after` no socket will reach stalls this ring only: the socket and
   * other sessions go on. */
  rr_pack_memset(rr, 14, buf, 0, 16, 0x66);
  rr_put(rr, rr->sb.data, rr->sb.size, (uint32_t)rr->sb.size, UINT64_MAX);
  rr_ring_kick(rr);
  raw_request(rr->r, 15, "ping", 0);
  ck_assert_int_eq(rr_sock_call(rr, 15, NULL, 0), 0);
  ck_assert_int_eq(rr_reap(rr, 200), 0);
  other_client_ok("after-stalled");
  rr_close(rr);
}
END_TEST

/* The order of the two paths at --max-inflight (2 here, a daemon of its
 * own): two memsets in flight on a stream, taken from the ring, bring the
 * session to its limit, with a third submission R published after them;
 * then a socket request S, which must run after R. The daemon takes S's
 * bytes at once (it had fewer than 2 calls in flight when it looked), runs
 * the ring first, and R finds the limit reached: S must then wait for R,
 * not overtake it. The last memset to the small buffer is S's. */
START_TEST(test_after_at_max_inflight)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--isolation", "none", "--cache-dir",
                    cache_dir, "--busy-poll", "0", "--max-inflight", "2", NULL);
  const uint64_t big_len = 64 * MiB;
  uint64_t big, small, st;
  uint8_t back[16];
  rr_t *rr;
  int rc;

  ck_assert_ptr_nonnull(d);
  rr = rr_open(d);
  rr_ring(rr, 8);
  big = rr_alloc(rr, big_len);
  small = rr_alloc(rr, sizeof(back));
  st = rr_stream(rr);
  for (int round = 0; round < 5; round++) {
    /* Published, not announced: the daemon sleeps on the ring (sq_kick)
     * and finds them when S comes. */
    for (int i = 0; i < 200 && atomic_load(&rr->hdr->sq_kick) == 0; i++)
      harness_sleep_ms(5);
    for (uint32_t i = 0; i < 2; i++) {
      rr_pack_memset_async(rr, 100 + i, big, 0, big_len, i + round, st);
      rr_publish(rr);
    }
    rr_pack_memset(rr, 102, small, 0, sizeof(back), 0x11);
    rr_publish(rr);
    raw_request(rr->r, 103, "mem.memset", 4);
    msgpack_pack_uint64(&rr->r->pk, small);
    msgpack_pack_uint64(&rr->r->pk, 0);
    msgpack_pack_uint64(&rr->r->pk, sizeof(back));
    msgpack_pack_uint64(&rr->r->pk, 0x22);
    rr_sock_send(rr, -1);
    rc = raw_response(rr->r, 103, NULL, 0);
    ck_assert_int_eq(rc, 0);
    for (int i = 0; i < 3; i++) {
      ck_assert_msg(rr_reap(rr, 20000), "round %d: %d completions of 3", round,
                    i);
      ck_assert_int_eq(rr->code, 0);
    }
    rr_read(rr, small, back, sizeof(back));
    /* Until 0283bf5, process_input() (transport.c) went on to the socket's
     * message whatever transport_ring_run() stopped at: at
     * RING_WAIT_INFLIGHT, R was still in the ring, and S overtook it. */
    ck_assert_msg(back[0] == 0x22,
                  "round %d: the small buffer holds %02x: the socket's "
                  "memset (22) ran before the ring's (11) published before "
                  "it",
                  round, back[0]);
  }
  rr_close(rr);
  stop_checked(&d);
}
END_TEST

/* (f) A thread that keeps rewriting the slot last published while the
 * daemon takes the submissions. Strict rounds rewrite only what makes a
 * slot invalid whatever the moment the daemon copies it (its first byte,
 * 0xc1, or its length): every submission then either runs as published or
 * the session is closed. The memsets go to a zero-copy buffer (this
 * process's own memory) so that what ran is seen even after the session
 * is gone. Chaos rounds rewrite whole slots with random bytes: the daemon
 * survives. Another client works meanwhile throughout. */
enum { TRASH_ENTRIES = 16, TRASH_OPS = 300 };

typedef struct {
  rr_t *rr;
  pthread_mutex_t mu;
  atomic_int stop;
  int64_t victim; /* the submission being rewritten, -1: none (mu) */
  int chaos;
  int odds; /* 1 in odds published submissions is rewritten */
  unsigned rewrites;
} trash_t;

static void *trash_main(void *arg)
{
  trash_t *t = arg;
  uint32_t seed = 0x1234567u;

  while (!atomic_load(&t->stop)) {
    pthread_mutex_lock(&t->mu);
    if (t->victim >= 0) {
      volatile ring_sqe_t *e =
          &t->rr->sq[(uint32_t)t->victim & (t->rr->entries - 1)];
      uint32_t r = xs32(&seed);
      if (t->chaos) {
        for (int i = 0; i < 8; i++)
          ((volatile uint8_t *)e)[xs32(&seed) % RING_SLOT] = (uint8_t)r;
        if (r % 7 == 0)
          e->len = xs32(&seed) % (RING_SQE_DATA + 8);
      } else if (r % 2 == 0) {
        e->data[0] = 0xc1;
      } else {
        e->len = e->len ^ (1u + (r >> 8) % 31);
      }
      t->rewrites++;
    }
    pthread_mutex_unlock(&t->mu);
    for (volatile int i = 0; i < (int)(seed % 2000); i++)
      ;
  }
  return NULL;
}

/* Another client at work until *stop: every call must succeed. */
typedef struct {
  atomic_int stop;
  int rounds;
  char why[512];
} bystander_t;

static void *bystander_main(void *arg)
{
  bystander_t *b = arg;
  hipd_conn_t *conn = NULL;
  hipd_buffer_t buf = HIPD_BUFFER_NULL;
  uint32_t back[64];
  int rc;

  if ((rc = hipd_connect2(shared->socket, "bystander", &conn)) != 0) {
    snprintf(b->why, sizeof(b->why), "connect: %s", hipd_err_name(rc));
    return NULL;
  }
  hipd_set_timeout(conn, 20000);
  if ((rc = hipd_mem_alloc(conn, 0, 64, "uint32", &buf)) != 0)
    snprintf(b->why, sizeof(b->why), "alloc: %s", hipd_last_error(conn));
  while (b->why[0] == '\0' && !atomic_load(&b->stop)) {
    int v = b->rounds & 0xff;
    if ((rc = hipd_mem_memset(conn, buf, 0, sizeof(back), v)) != 0 ||
        (rc = hipd_mem_read(conn, buf, 0, back, sizeof(back))) != 0) {
      snprintf(b->why, sizeof(b->why), "round %d: %s (%s)", b->rounds,
               hipd_err_name(rc), hipd_last_error(conn));
      break;
    }
    if (back[63] != (uint32_t)v * 0x01010101u) {
      snprintf(b->why, sizeof(b->why), "round %d: read %08x", b->rounds,
               back[63]);
      break;
    }
    b->rounds++;
  }
  hipd_close(conn);
  return NULL;
}

static void bystander_start(bystander_t *b, pthread_t *th)
{
  memset(b, 0, sizeof(*b));
  ck_assert_int_eq(pthread_create(th, NULL, bystander_main, b), 0);
}

static void bystander_finish(bystander_t *b, pthread_t th)
{
  atomic_store(&b->stop, 1);
  pthread_join(th, NULL);
  ck_assert_msg(b->why[0] == '\0', "the other client: %s", b->why);
  ck_assert_int_gt(b->rounds, 0);
}

/* A completion of a round: in a strict one, the success of a submission
 * published once. @return 1. */
static int trash_answer(rr_t *rr, int chaos, uint8_t *answered)
{
  if (chaos)
    return 1; /* whatever the daemon made of the bytes it copied */
  ck_assert_uint_lt(rr->msg.msgid, TRASH_OPS);
  ck_assert_msg(rr->code == 0, "op %u: %s (%s)", rr->msg.msgid,
                hipd_err_name(rr->code), rr->text);
  ck_assert_msg(!answered[rr->msg.msgid], "op %u answered twice",
                rr->msg.msgid);
  answered[rr->msg.msgid] = 1;
  return 1;
}

/* One round; @return 1 if the daemon closed the session. */
static int trash_round(int chaos, int odds, unsigned *rewrites)
{
  const size_t zsize = 4096 * 2;
  rr_t *rr = rr_open(shared);
  int shmfd = ring_memfd(zsize, F_SEAL_SHRINK | F_SEAL_GROW);
  uint8_t *z = mmap(NULL, zsize, PROT_READ | PROT_WRITE, MAP_SHARED, shmfd, 0);
  uint8_t answered[TRASH_OPS] = {0};
  uint64_t shm, zb;
  trash_t t = {.rr = rr, .victim = -1, .chaos = chaos, .odds = odds};
  pthread_t th;
  long long deadline;
  int closed = 0, got = 0;

  ck_assert(z != MAP_FAILED);
  rr_ring(rr, TRASH_ENTRIES);
  raw_request(rr->r, 50, "shm.create", 1);
  msgpack_pack_uint64(&rr->r->pk, zsize);
  rr_sock_send(rr, shmfd);
  ck_assert_int_eq(raw_response(rr->r, 50, NULL, 0), 0);
  ck_assert_int_eq(proto_obj_uint(proto_map_get(rr->r->msg.result, "handle"),
                                  UINT64_MAX, &shm),
                   0);
  close(shmfd);
  raw_request(rr->r, 51, "mem.alloc_zero_copy", 2);
  msgpack_pack_uint64(&rr->r->pk, shm);
  msgpack_pack_uint64(&rr->r->pk, 0);
  zb = rr_sock_handle(rr, 51);

  pthread_mutex_init(&t.mu, NULL);
  ck_assert_int_eq(pthread_create(&th, NULL, trash_main, &t), 0);
  /* A chaos round may stall its own ring (a random `after`). */
  deadline = harness_now_ms() + (chaos ? 150 : 5000);
  for (int i = 0; i < TRASH_OPS && !closed; i++) {
    /* Room in the ring, reading as we wait: fewer than a ring's worth
     * outstanding, so that the daemon never waits for us to read (the
     * limit is test_full_ring's). */
    while (!closed &&
           (rr->sq_tail - atomic_load(&rr->hdr->sq_head) >= rr->entries - 1 ||
            rr->sq_tail - rr->cq_head >= rr->entries - 1)) {
      if (rr_reap(rr, 1))
        got += trash_answer(rr, chaos, answered);
      closed = rr_peer_closed(rr) || harness_now_ms() > deadline;
    }
    if (closed)
      break;
    while (rr_reap(rr, 0)) /* what is answered, as a client reads it */
      got += trash_answer(rr, chaos, answered);
    pthread_mutex_lock(&t.mu);
    rr_pack_memset(rr, (uint32_t)i, zb, (uint64_t)i * 8, 8, 1 + i % 255);
    rr_publish(rr);
    /* Most are left alone, so that some rounds run to their end. */
    t.victim = rand() % t.odds == 0 ? (int64_t)rr->sq_tail - 1 : -1;
    pthread_mutex_unlock(&t.mu);
    rr_kick(rr);
  }
  /* The rest of the answers, or the end of the session. */
  while (!closed && got < TRASH_OPS) {
    if (rr_reap(rr, 1))
      got += trash_answer(rr, chaos, answered);
    closed = rr_peer_closed(rr) || harness_now_ms() > deadline;
  }
  atomic_store(&t.stop, 1);
  pthread_join(th, NULL);
  pthread_mutex_destroy(&t.mu);
  *rewrites += t.rewrites;
  if (!chaos) {
    /* A strict round never stalls: it was closed, or all were answered. */
    ck_assert_msg(harness_now_ms() <= deadline,
                  "a strict round stalled: %d of %d answered", got, TRASH_OPS);
    if (closed)
      ck_assert(harness_raw_wait_closed(rr->r->fd, 10000));
    /* What ran ran as published; an answered one ran. */
    for (int i = 0; i < TRASH_OPS; i++) {
      uint8_t v = (uint8_t)(1 + i % 255);
      for (int j = 0; j < 8; j++) {
        uint8_t b = z[i * 8 + j];
        ck_assert_msg(b == v || (b == 0 && !answered[i]),
                      "op %d byte %d: %02x (published %02x, %s)", i, j, b, v,
                      answered[i] ? "answered" : "not answered");
      }
    }
    if (!closed)
      ck_assert_int_eq(got, TRASH_OPS);
  }
  munmap(z, zsize);
  rr_close(rr);
  return closed;
}

START_TEST(test_rewritten_slots)
{
  bystander_t b;
  pthread_t bt;
  int closed = 0, rounds = 0;
  unsigned rewrites = 0;
  long long until = harness_now_ms() + 1500;

  srand(42 + (unsigned)_i);
  bystander_start(&b, &bt);
  /* From every submission rewritten to one in 512. */
  while (rounds < 30 && (rounds < 10 || harness_now_ms() < until)) {
    closed += trash_round(_i, 1 << (rounds % 10), &rewrites);
    rounds++;
  }
  fprintf(stderr,
          "check_ring: %s rewrites: %d rounds, %d closed, %u rewrites\n",
          _i ? "chaos" : "strict", rounds, closed, rewrites);
  ck_assert_uint_gt(rewrites, 0);
  if (!_i && closed > 0)
    ck_assert(harness_log_contains(shared, "protocol violation: a ring "
                                           "submission") ||
              harness_log_contains(shared, "protocol violation: ring "
                                           "submission"));
  bystander_finish(&b, bt);
  daemon_alive();
  other_client_ok("after-rewrites");
}
END_TEST

/* ---- rings at their limit ---- */

/* The answers of a raw session's ring submissions, from either path, as
 * msgids below LIMIT_IDS: each must come once, and succeed. */
enum { LIMIT_IDS = 4096 };

typedef struct {
  uint8_t seen[LIMIT_IDS];
  int on_ring, on_socket;
} answers_t;

static void answer_seen(answers_t *a, uint32_t msgid, int code,
                        const char *where)
{
  ck_assert_msg(msgid < LIMIT_IDS, "an answer to %u on the %s", msgid, where);
  ck_assert_msg(code == 0, "%u on the %s: %s", msgid, where,
                hipd_err_name(code));
  ck_assert_msg(!a->seen[msgid], "%u answered twice (the second on the %s)",
                msgid, where);
  a->seen[msgid] = 1;
}

/* Every completion published now. */
static void reap_ring(rr_t *rr, answers_t *a, int ms)
{
  while (rr_reap(rr, ms)) {
    answer_seen(a, rr->msg.msgid, rr->code, "ring");
    a->on_ring++;
  }
}

/* Every message on the socket now (waiting up to @p ms for the first):
 * answers to ring submissions; the answer to socket request @p sock_id
 * (0: none) sets *@p sock_back. */
static void reap_socket(rr_t *rr, answers_t *a, int ms, uint32_t sock_id,
                        int *sock_back)
{
  struct pollfd pfd = {.fd = rr->r->fd, .events = POLLIN};

  /* What raw_next() read past its last message is in its buffer already,
   * where poll() cannot see it. */
  while (rr->r->len > rr->r->used || poll(&pfd, 1, ms) == 1) {
    int code = 0;
    const char *t;
    size_t tl;

    ms = 0;
    ck_assert_msg(raw_next(rr->r), "the session was closed");
    if (rr->r->msg.type == PROTO_NOTIFY)
      continue; /* ring.wake */
    ck_assert_int_eq(rr->r->msg.type, PROTO_RESPONSE);
    if (rr->r->msg.error->type != MSGPACK_OBJECT_NIL)
      ck_assert_int_eq(proto_error_decode(rr->r->msg.error, &code, &t, &tl), 0);
    if (sock_id != 0 && rr->r->msg.msgid == sock_id) {
      ck_assert_int_eq(code, 0);
      *sock_back = 1;
      continue;
    }
    answer_seen(a, rr->r->msg.msgid, code, "socket");
    a->on_socket++;
  }
}

/* session.info's ring map of a raw session. */
static void rr_ring_info(rr_t *rr, uint64_t *requests, uint64_t *completions,
                         uint64_t *on_socket)
{
  const msgpack_object *ring;

  raw_request(rr->r, 9006, "session.info", 0);
  ck_assert_int_eq(rr_sock_call(rr, 9006, NULL, 0), 0);
  ring = proto_map_get(rr->r->msg.result, "ring");
  ck_assert_int_eq(
      proto_obj_uint(proto_map_get(ring, "requests"), UINT64_MAX, requests), 0);
  ck_assert_int_eq(proto_obj_uint(proto_map_get(ring, "completions"),
                                  UINT64_MAX, completions),
                   0);
  ck_assert_int_eq(proto_obj_uint(proto_map_get(ring, "answered_on_socket"),
                                  UINT64_MAX, on_socket),
                   0);
}

/* A ring's worth (@p e) of memsets with msgids @p id..., answered on the
 * ring and left unread; then a ring's worth more, which the daemon takes
 * all the same and answers on the socket (PROTOCOL.md, "Completing").
 * The session had rr->cq_head completions before, read. */
static void rr_fill_unread(rr_t *rr, uint32_t e, uint32_t id, uint64_t buf,
                           uint64_t st, answers_t *a)
{
  uint32_t cq0 = rr->cq_head;
  long long deadline;

  for (uint32_t i = 0; i < e; i++) {
    rr_pack_memset_async(rr, id + i, buf, (id + i) * 4, 4, (id + i) & 0xff, st);
    rr_publish(rr);
  }
  rr_kick(rr);
  for (int k = 0; k < 2000 && atomic_load(&rr->hdr->cq_tail) != cq0 + e; k++)
    harness_sleep_ms(5);
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_tail), cq0 + e);
  for (uint32_t i = e; i < 2 * e; i++) {
    rr_pack_memset_async(rr, id + i, buf, (id + i) * 4, 4, (id + i) & 0xff, st);
    rr_publish(rr);
  }
  rr_kick(rr);
  deadline = harness_now_ms() + 10000;
  while (a->on_socket < (int)e && harness_now_ms() < deadline)
    reap_socket(rr, a, 10, 0, NULL);
  ck_assert_msg(a->on_socket == (int)e, "%d answers of %u on the socket",
                a->on_socket, e);
  for (uint32_t i = e; i < 2 * e; i++)
    ck_assert_msg(a->seen[id + i], "%u not answered on the socket", id + i);
  ck_assert_uint_eq(atomic_load(&rr->hdr->sq_head), rr->sq_tail);
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_tail), cq0 + e);
}

/* (g) A full ring: with a ring's worth of answers unread, the daemon
 * still takes what comes and answers it on the socket; once the client
 * reads its completions the ring carries the answers again. Nothing is
 * lost: each submission is answered once, on one path, and ran. Five
 * times round the ring. */
START_TEST(test_full_ring)
{
  enum { E = 8, ROUNDS = 5 };
  uint64_t buf, st, requests, completions, on_socket;
  rr_t *rr = rr_session(E, 4 * 4 * E * ROUNDS, &buf);
  uint32_t cells[4 * E * ROUNDS];
  answers_t a = {.on_ring = 0};
  uint32_t id = 0;

  st = rr_stream(rr);
  for (int round = 0; round < ROUNDS; round++) {
    int ring0 = a.on_ring, sock0 = a.on_socket;

    a.on_socket = 0;
    rr_fill_unread(rr, E, id, buf, st, &a);
    a.on_socket += sock0;
    id += 2 * E;
    /* Read them: the ring has room again, and answers there. */
    reap_ring(rr, &a, 0);
    ck_assert_int_eq(a.on_ring - ring0, E);
    for (uint32_t i = 0; i < 2 * E; i++, id++) {
      rr_pack_memset_async(rr, id, buf, id * 4, 4, id & 0xff, st);
      rr_submit(rr);
      ck_assert_msg(rr_reap(rr, 20000), "round %d: no completion for %u", round,
                    id);
      answer_seen(&a, rr->msg.msgid, rr->code, "ring");
      a.on_ring++;
    }
    reap_socket(rr, &a, 50, 0, NULL);
    ck_assert_int_eq(rr_reap(rr, 50), 0);
    ck_assert_int_eq(a.on_socket - sock0, E);
  }
  for (uint32_t i = 0; i < id; i++)
    ck_assert_msg(a.seen[i], "%u never answered", i);
  rr_ring_info(rr, &requests, &completions, &on_socket);
  ck_assert_uint_eq(requests, 1 + id);
  ck_assert_uint_eq(on_socket, E * ROUNDS);
  ck_assert_uint_eq(completions, 1 + id - E * ROUNDS);
  raw_request(rr->r, 7000, "stream.synchronize", 1);
  msgpack_pack_uint64(&rr->r->pk, st);
  ck_assert_int_eq(rr_sock_call(rr, 7000, NULL, 0), 0);
  rr_read(rr, buf, cells, sizeof(cells));
  for (uint32_t i = 0; i < id; i++)
    ck_assert_uint_eq(cells[i], (i & 0xff) * 0x01010101u);
  rr_close(rr);
}
END_TEST

/* Is session @p id in session.list? */
static int session_listed(hipd_conn_t *conn, uint64_t id)
{
  hipd_info_t *info = NULL;
  int dev = 0, n, found = 0;

  OK(conn, hipd_session_list(conn, &info));
  n = hipd_info_len(info, "");
  ck_assert_int_ge(n, 0);
  for (int i = 0; i < n; i++) {
    char path[32];
    snprintf(path, sizeof(path), "%d.id", i);
    if (info_uint(info, path) == id)
      found = 1;
  }
  hipd_info_free(info);
  return found;
}

/* (h) A client that never reads its completions: its ring's answers move
 * to its socket, its socket requests are answered as ever, and another
 * session is served meanwhile. Then the session is killed (_i 0) or its
 * client hangs up (_i 1): it is torn down. */
START_TEST(test_unread_completions)
{
  enum { E = 8 };
  uint64_t buf, st, id;
  rr_t *rr = rr_session(E, 4096, &buf);
  hipd_conn_t *other = connect_named(shared, "beside-unread", 20000);
  answers_t a = {.on_ring = 0};
  long long t0, t1, deadline;
  int dev = 0, back = 0;

  st = rr_stream(rr);
  id = rr_session_id(rr);
  ck_assert(session_listed(other, id));
  rr_fill_unread(rr, E, 10, buf, st, &a);
  /* More submissions, and a ping on the socket after them: all answered
   * there (in any order: replies may overtake one another). */
  for (uint32_t i = 0; i < 3; i++) {
    rr_pack_memset_async(rr, 10 + 2 * E + i, buf, i * 4, 4, i, st);
    rr_publish(rr);
  }
  rr_kick(rr);
  raw_request(rr->r, 500, "ping", 0);
  rr_sock_send(rr, -1);
  deadline = harness_now_ms() + 10000;
  while (harness_now_ms() < deadline &&
         (!back || !a.seen[10 + 2 * E] || !a.seen[10 + 2 * E + 1] ||
          !a.seen[10 + 2 * E + 2]))
    reap_socket(rr, &a, 10, 500, &back);
  ck_assert_msg(back, "the ping was not answered");
  for (uint32_t i = 0; i < 3; i++)
    ck_assert_msg(a.seen[10 + 2 * E + i], "%u was not answered",
                  10 + 2 * E + i);
  /* Another session, on its ring and its socket, is not held up. */
  t0 = harness_now_ms();
  for (int i = 0; i < 100; i++) {
    hipd_buffer_t b = HIPD_BUFFER_NULL;
    uint8_t bytes[64];
    ping_ok(other);
    OK(other, hipd_mem_alloc(other, 0, sizeof(bytes), "byte", &b));
    OK(other, hipd_mem_memset(other, b, 0, sizeof(bytes), i));
    OK(other, hipd_mem_read(other, b, 0, bytes, sizeof(bytes)));
    ck_assert_uint_eq(bytes[63], (uint8_t)i);
    OK(other, hipd_mem_free(other, b));
  }
  t1 = harness_now_ms();
  /* Generous: 500 round trips; a session starved by the first would time
   * out instead. */
  ck_assert_msg(t1 - t0 < 10000, "500 requests took %lld ms", t1 - t0);
  /* The completions are still there, unread. */
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_tail), rr->cq_head + E);
  if (_i == 0) {
    OK(other, hipd_session_kill(other, id));
    ck_assert(harness_raw_wait_closed(rr->r->fd, 10000));
    ck_assert(harness_log_wait(shared, "session closed: killed", 5000));
  } else {
    close(rr->r->fd);
    rr->r->fd = -1;
  }
  for (int i = 0; i < 500 && session_listed(other, id); i++)
    harness_sleep_ms(10);
  ck_assert_msg(!session_listed(other, id), "session %llu is still listed",
                (unsigned long long)id);
  rr_close(rr);
  hipd_close(other);
  other_client_ok("after-unread");
}
END_TEST

/* A client that keeps its ring at its limit, as a deep pipeline does: it
 * reads one completion, publishes one submission, and rings the doorbell
 * when sq_kick says the daemon sleeps, as the protocol wants; it reads its
 * socket too. Each submission is answered once, on one path or the other;
 * the doorbells are read (one that finds the socket full means the daemon
 * stopped reading it); a socket request is answered. */
START_TEST(test_ring_at_limit)
{
  enum { E = 8, CYCLES = 1000, PING_AT = 200 };
  uint64_t buf, st;
  rr_t *rr = rr_session(E, 4096, &buf);
  answers_t a = {.on_ring = 0};
  int ping_back = 0, ping_cycle = -1;
  uint32_t id = 10;

  st = rr_stream(rr);
  rr_fill_unread(rr, E, id, buf, st, &a);
  id += 2 * E;
  for (int n = 0; n < CYCLES; n++) {
    long long deadline = harness_now_ms() + 10000;

    ck_assert_msg(rr_reap(rr, 10000), "cycle %d: no completion", n);
    answer_seen(&a, rr->msg.msgid, rr->code, "ring");
    a.on_ring++;
    while (rr->sq_tail - atomic_load(&rr->hdr->sq_head) >= E) {
      ck_assert_msg(harness_now_ms() < deadline,
                    "cycle %d: sq_head stays at %u", n,
                    atomic_load(&rr->hdr->sq_head));
      usleep(50);
    }
    ck_assert_uint_lt(id, LIMIT_IDS);
    rr_pack_memset_async(rr, id, buf, (id % 1024) * 4, 4, id & 0xff, st);
    id++;
    rr_submit(rr);
    ck_assert_msg(rr->kicks_dropped == 0,
                  "cycle %d: ring.kick %d found the socket full: the daemon "
                  "has not read its socket since its ring reached its limit",
                  n, rr->kicks + 1);
    if (n == PING_AT) {
      raw_request(rr->r, 8000, "ping", 0);
      rr_sock_send(rr, -1);
    }
    reap_socket(rr, &a, 0, n >= PING_AT ? 8000 : 0, &ping_back);
    if (ping_back && ping_cycle < 0)
      ping_cycle = n;
  }
  /* The rest, from either path. */
  for (long long deadline = harness_now_ms() + 10000;
       harness_now_ms() < deadline;) {
    int all = 1;
    reap_ring(rr, &a, 1);
    reap_socket(rr, &a, 1, 8000, &ping_back);
    if (ping_back && ping_cycle < 0)
      ping_cycle = CYCLES;
    for (uint32_t i = 10; i < id && all; i++)
      all = a.seen[i];
    if (all && ping_back)
      break;
  }
  for (uint32_t i = 10; i < id; i++)
    ck_assert_msg(a.seen[i], "%u never answered", i);
  ck_assert_msg(ping_back, "a ping sent at cycle %d was never answered",
                PING_AT);
  fprintf(stderr,
          "check_ring: at the limit: %d kicks, %d answers on the ring, %d on "
          "the socket, ping answered %d cycles later\n",
          rr->kicks, a.on_ring, a.on_socket, ping_cycle - PING_AT);
  rr_close(rr);
}
END_TEST

/* With answers unread on its ring (and more answered on its socket), a
 * ring costs the daemon no CPU once its client stops: with --busy-poll 0
 * a sleeping ring, whatever it holds, costs nothing (PROTOCOL.md: "an idle
 * ring costs nothing"). */
START_TEST(test_held_ring_sleeps)
{
  enum { E = 8 };
  uint64_t buf, st;
  rr_t *rr = rr_session(E, 4096, &buf);
  long hz = sysconf(_SC_CLK_TCK);
  long long c0, c1, idle0, idle1;
  answers_t a = {.on_ring = 0};

  st = rr_stream(rr);
  /* The daemon's own idle use, for the message. */
  idle0 = proc_cpu_ticks(shared->pid);
  harness_sleep_ms(500);
  idle1 = proc_cpu_ticks(shared->pid);
  rr_fill_unread(rr, E, 10, buf, st, &a);
  c0 = proc_cpu_ticks(shared->pid);
  harness_sleep_ms(1000);
  c1 = proc_cpu_ticks(shared->pid);
  /* Then the rest is read. */
  reap_ring(rr, &a, 0);
  for (uint32_t i = 10; i < 10 + 2 * E; i++)
    ck_assert_msg(a.seen[i], "%u never answered", i);
  rr_close(rr);
  ck_assert_msg((c1 - c0) * 1000 / hz < 250,
                "the daemon used %lld ms of CPU in 1000 ms while a ring held "
                "answers its client did not read (%lld ms in 500 ms idle)",
                (c1 - c0) * 1000 / hz, (idle1 - idle0) * 1000 / hz);
}
END_TEST

/* A client that reads nothing at all, its ring nor its socket, while it
 * keeps submitting: its answers pile up on its socket until the output cap
 * (--output-cap, 1M for this TCase's daemon) closes the session; the
 * daemon's memory is bounded and another client is served. Ten times:
 * the daemon once left such a ring awake (sq_kick 0, so no doorbell)
 * while its loop blocked until the next timer, in about one run of six
 * (a watcher changed as the replies filled the socket, and
 * uv_backend_timeout() said 0: loop_turn_may_block()). */
START_TEST(test_reads_nothing)
{
  enum { E = 64 };
  uint64_t buf, st;
  rr_t *rr = rr_session(E, 4096, &buf);
  long long deadline = harness_now_ms() + 20000;
  uint32_t id = 0;
  int closed = 0, capped = harness_log_count(shared, "output cap exceeded");

  st = rr_stream(rr);
  while (!closed && harness_now_ms() < deadline) {
    while (rr->sq_tail - atomic_load(&rr->hdr->sq_head) < E) {
      /* Answered at once: a stream handle of another session's tag. */
      msgpack_packer *pk = rr_begin(rr, id++, "stream.query", 1);
      msgpack_pack_uint64(pk, st ^ 0x5a5a00000000ull);
      rr_publish(rr);
    }
    rr_kick(rr);
    closed = rr_peer_closed(rr);
    if (!closed)
      usleep(100);
  }
  ck_assert_msg(closed, "%u submissions, never read, and the session is open",
                id);
  /* This run's close, not an earlier run's (the log is the TCase's). */
  ck_assert_msg(harness_raw_wait_closed(rr->r->fd, 10000),
                "the session was not closed");
  for (long long until = harness_now_ms() + 5000;
       harness_log_count(shared, "output cap exceeded") == capped &&
       harness_now_ms() < until;)
    harness_sleep_ms(20);
  ck_assert_int_eq(harness_log_count(shared, "output cap exceeded"),
                   capped + 1);
  rr_close(rr);
  other_client_ok("after-reads-nothing");
}
END_TEST

/* A client that keeps its ring busy (submits and reads as fast as it can)
 * cannot keep the daemon's loop to itself: another session's socket
 * requests are still answered. */
typedef struct {
  atomic_int stop;
  atomic_llong done;
  long long failed;
  int bad; /* submit requests answered at once (an error), not queued */
} flood_t;

static void *flood_main(void *arg)
{
  flood_t *f = arg;
  uint64_t buf, st;
  rr_t *rr = rr_session(64, 4096, &buf);
  uint32_t id = 0;

  st = rr_stream(rr);
  while (!atomic_load(&f->stop)) {
    while (rr->sq_tail - atomic_load(&rr->hdr->sq_head) < rr->entries - 1 &&
           rr->sq_tail - rr->cq_head < rr->entries) {
      msgpack_packer *pk = rr_begin(rr, id++, "stream.query", 1);
      msgpack_pack_uint64(pk, f->bad ? st ^ 0x5a5a00000000ull : st);
      rr_publish(rr);
    }
    rr_kick(rr);
    while (rr_reap(rr, 0)) {
      if ((rr->code != 0) != f->bad)
        f->failed++;
      atomic_fetch_add(&f->done, 1);
    }
  }
  rr_close(rr);
  return NULL;
}

START_TEST(test_flood_is_fair)
{
  flood_t f = {.bad = _i};
  pthread_t th;
  hipd_conn_t *other = connect_named(shared, "beside-flood", 20000);
  long long worst = 0;

  ck_assert_int_eq(setenv("HIPD_RING", "0", 1), 0);
  hipd_close(other);
  other = connect_named(shared, "beside-flood", 20000);
  unsetenv("HIPD_RING");
  hipd_set_timeout(other, 5000);
  ck_assert_int_eq(pthread_create(&th, NULL, flood_main, &f), 0);
  while (atomic_load(&f.done) < 1000)
    harness_sleep_ms(5);
  for (int i = 0; i < 50; i++) {
    long long t = harness_now_ms();
    ping_ok(other);
    if (harness_now_ms() - t > worst)
      worst = harness_now_ms() - t;
  }
  atomic_store(&f.stop, 1);
  pthread_join(th, NULL);
  fprintf(stderr,
          "check_ring: flood (%s): %lld ring requests, worst ping %lld ms\n",
          f.bad ? "errors" : "queries", (long long)atomic_load(&f.done), worst);
  ck_assert_int_eq(f.failed, 0);
  hipd_close(other);
}
END_TEST

/* (i) A client killed (SIGKILL) in the middle of its submissions: the
 * daemon closes its session and goes on. The child never returns. */
static void killed_child(int wfd)
{
  uint64_t buf, st;
  rr_t *rr = rr_session(32, 4096, &buf);
  uint32_t id = 0;
  long long done = 0;
  int told = 0;

  st = rr_stream(rr);
  for (;;) {
    if (rr->sq_tail - atomic_load(&rr->hdr->sq_head) < rr->entries - 1 &&
        rr->sq_tail - rr->cq_head < rr->entries) {
      rr_pack_memset_async(rr, id, buf, (id % 1024) * 4, 4, id & 0xff, st);
      id++;
      rr_publish(rr);
    }
    rr_kick(rr);
    while (rr_reap(rr, 0))
      done++;
    if (!told && done >= 200) {
      told = 1;
      if (write(wfd, "R", 1) != 1)
        _exit(2);
    }
  }
}

START_TEST(test_killed_client)
{
  kill_busy_children("killed", 3, killed_child, 1000, 7000);
}
END_TEST

/* (j) ring.open refused: each error, and the session goes on without a
 * ring until one opens; then a second one is EEXIST. */
START_TEST(test_ring_open_errors)
{
  const int seals = F_SEAL_SHRINK | F_SEAL_GROW;
  const size_t size = proto_ring_size(RING_MAX_ENTRIES);
  rr_t *rr = rr_open(shared);
  char msg[512];
  uint64_t buf;
  int fd, p[2];
  static const struct {
    uint64_t entries;
    int code;
    const char *msg;
  } bad[] = {
      {100, HIPD_EINVAL, "entries 100 is not a power of two from 8 to 1024"},
      {4, HIPD_EINVAL, "entries 4 is not a power of two from 8 to 1024"},
      {0, HIPD_EINVAL, "entries 0 is not a power of two from 8 to 1024"},
      {1023, HIPD_EINVAL, "entries 1023 is not a power of two"},
      /* The param's bound (ERANGE) says it before ring.open would
       * (EINVAL); PROTOCOL.md lists only the latter. */
      {2048, 0, NULL},
  };

  /* No descriptor. */
  ck_assert_int_eq(rr_ring_open_fd(rr, -1, 1, 8, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "ring.open: no file descriptor came with the "
                            "request") != NULL,
                "%s", msg);
  /* Entries. */
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    fd = ring_memfd(size, seals);
    int rc = rr_ring_open_fd(rr, fd, 1, bad[i].entries, msg, sizeof(msg));
    if (bad[i].msg == NULL) {
      ck_assert_msg((rc == HIPD_ERANGE &&
                     strstr(msg, "param 0 (entries) must be between 0 and "
                                 "1024") != NULL) ||
                        (rc == HIPD_EINVAL &&
                         strstr(msg, "is not a power of two") != NULL),
                    "entries %llu: %s (%s)", (unsigned long long)bad[i].entries,
                    hipd_err_name(rc), msg);
    } else {
      ck_assert_msg(rc == bad[i].code && strstr(msg, bad[i].msg) != NULL,
                    "entries %llu: %s (%s)", (unsigned long long)bad[i].entries,
                    hipd_err_name(rc), msg);
    }
    close(fd);
  }
  /* The memfd's checks, as shm.create's. */
  fd = ring_memfd(proto_ring_size(8), 0);
  ck_assert_int_eq(rr_ring_open_fd(rr, fd, 1, 8, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "F_SEAL_SHRINK") != NULL, "%s", msg);
  close(fd);
  fd = ring_memfd(proto_ring_size(8) - 4096, seals);
  ck_assert_int_eq(rr_ring_open_fd(rr, fd, 1, 8, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "beyond the memfd's") != NULL, "%s", msg);
  close(fd);
  /* The default is 256 entries: a memfd sized for 8 is too small. */
  fd = ring_memfd(proto_ring_size(8), seals);
  ck_assert_int_eq(rr_ring_open_fd(rr, fd, 0, 0, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "beyond the memfd's") != NULL, "%s", msg);
  close(fd);
  ck_assert_int_eq(pipe(p), 0);
  ck_assert_int_eq(rr_ring_open_fd(rr, p[0], 1, 8, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "not a memfd") != NULL, "%s", msg);
  close(p[0]);
  close(p[1]);
  /* Sealed against writing: the daemon cannot map it for its writes. */
  fd = ring_memfd(proto_ring_size(8), seals | F_SEAL_WRITE);
  ck_assert_int_ne(rr_ring_open_fd(rr, fd, 1, 8, msg, sizeof(msg)), 0);
  close(fd);
  /* Params. */
  fd = ring_memfd(proto_ring_size(8), seals);
  ck_assert_int_eq(rr_ring_open_fd(rr, fd, 2, 8, msg, sizeof(msg)),
                   HIPD_EPARAMS);
  close(fd);
  /* Still no ring; a ring.kick without one is ignored. */
  ck_assert_int_eq(rr_ring_kick(rr), 0);
  raw_request(rr->r, 60, "session.info", 0);
  ck_assert_int_eq(rr_sock_call(rr, 60, NULL, 0), 0);
  {
    uint64_t v = 1;
    const msgpack_object *ring = proto_map_get(rr->r->msg.result, "ring");
    ck_assert_int_eq(
        proto_obj_uint(proto_map_get(ring, "entries"), UINT64_MAX, &v), 0);
    ck_assert_uint_eq(v, 0);
  }
  /* A good one, then a second: EEXIST, and the first still works. */
  rr_ring(rr, 8);
  fd = ring_memfd(proto_ring_size(8), seals);
  ck_assert_int_eq(rr_ring_open_fd(rr, fd, 1, 8, msg, sizeof(msg)),
                   HIPD_EEXIST);
  ck_assert_msg(strstr(msg, "the session has a ring already") != NULL, "%s",
                msg);
  close(fd);
  buf = rr_alloc(rr, 4096);
  rr_memset_ok(rr, 61, buf, 0, 4096, 7);
  rr_close(rr);

  /* Before hello. */
  {
    raw_t *r = raw_open(shared->socket);
    fd = ring_memfd(proto_ring_size(8), seals);
    raw_request(r, 1, "ring.open", 1);
    msgpack_pack_uint64(&r->pk, 8);
    ck_assert_int_eq(raw_flush_fd(r, fd), 0);
    ck_assert_int_eq(raw_response(r, 1, msg, sizeof(msg)), HIPD_EHELLO);
    close(fd);
    raw_close(r);
  }
  /* Every size a power of two from 8 to 1024 opens. */
  for (uint32_t e = RING_MIN_ENTRIES; e <= RING_MAX_ENTRIES; e *= 2) {
    rr = rr_open(shared);
    rr_ring(rr, e);
    buf = rr_alloc(rr, 64);
    rr_memset_ok(rr, 62, buf, 0, 64, 9);
    rr_close(rr);
  }
}
END_TEST

/* ============================================================== 4. leaks */

/* What the hostile TCase's daemon holds with no session (its fixture
 * measures it after a warm-up session that made what the tests make). */
static int base_fds;
static long base_threads;
static int64_t base_bytes, base_bufs;
static char base_names[1024];

/* Plain libhipd without check's asserts: the fixture runs in check's
 * runner process. With @p ring 0, on the socket alone (the daemon's
 * thread pools start as the work of either path first needs them, and
 * stay). @return 0 or -1. */
static int warm_up(int ring)
{
  hipd_conn_t *c = NULL;
  hipd_buffer_t b = HIPD_BUFFER_NULL, z = HIPD_BUFFER_NULL;
  hipd_stream_t st = HIPD_STREAM_NULL;
  hipd_event_t ev = HIPD_EVENT_NULL;
  hipd_shm_t *shm = NULL;
  uint8_t back[64];
  int idle = 0, rc;

  if (!ring)
    setenv("HIPD_RING", "0", 1);
  rc = hipd_connect2(shared->socket, "warm-up", &c);
  unsetenv("HIPD_RING");
  if (rc != 0)
    return -1;
  hipd_set_timeout(c, 20000);
  if (hipd_mem_alloc(c, 0, 4096, "byte", &b) != 0 ||
      hipd_mem_memset(c, b, 0, 4096, 1) != 0 ||
      hipd_stream_create(c, 0, &st) != 0 ||
      hipd_mem_memset_async(c, b, 0, 4096, 2, st) != 0 ||
      hipd_stream_query(c, st, &idle) != 0 ||
      hipd_event_create(c, 0, &ev) != 0 || hipd_event_record(c, ev, st) != 0 ||
      hipd_event_synchronize(c, ev) != 0 ||
      hipd_shm_create(c, 8192, &shm) != 0 ||
      hipd_mem_alloc_zero_copy(c, 0, shm, &z) != 0 ||
      hipd_mem_memset(c, z, 0, 64, 3) != 0 ||
      hipd_stream_synchronize(c, st) != 0 ||
      hipd_mem_read(c, b, 0, back, sizeof(back)) != 0) {
    fprintf(stderr, "warm-up: %s\n", hipd_last_error(c));
    if (shm != NULL)
      hipd_shm_free(c, shm);
    hipd_close(c);
    return -1;
  }
  /* The session's end frees the rest; the shared buffer's client side
   * (which holds the connection) goes here. */
  hipd_shm_free(c, shm);
  hipd_close(c);
  return 0;
}

/* With one session of ours: the sessions, the device's figures. */
static int census(int64_t *sessions, int64_t *bytes, int64_t *bufs)
{
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;
  int rc;

  if (hipd_connect2(shared->socket, "census", &c) != 0)
    return -1;
  for (int i = 0; i < 1000; i++) {
    if ((rc = hipd_daemon_info(c, &info)) != 0)
      break;
    hipd_info_int(info, "sessions", sessions);
    hipd_info_free(info);
    if (*sessions == 1)
      break;
    harness_sleep_ms(10);
  }
  if (rc == 0 && (rc = hipd_device_get(c, 0, &info)) == 0) {
    hipd_info_int(info, "memory.hipd_allocated", bytes);
    hipd_info_int(info, "memory.hipd_buffers", bufs);
    hipd_info_free(info);
  }
  hipd_close(c);
  return rc == 0 ? 0 : -1;
}

/* The daemon's descriptors and threads once they settle (a closed
 * session's are released at the loop's next safe point). */
static void settle(int *fds, long *threads)
{
  int f = -1;
  long t = -1;

  for (int i = 0; i < 50; i++) {
    harness_sleep_ms(20);
    int f2 = proc_open_fds(shared->pid);
    long t2 = (long)proc_status_value(shared->pid, "Threads");
    if (f2 == f && t2 == t && i >= 5)
      break;
    f = f2;
    t = t2;
  }
  *fds = f;
  *threads = t;
}

/* The daemon of a TCase whose last test is test_no_leaks, measured. */
static void measured_setup(const char *name, const char *output_cap)
{
  int64_t sessions = -1;

  shared_tcase = name;
  shared = start_daemon("0", "none", output_cap);
  shared_polled = 0;
  if (warm_up(1) != 0 || warm_up(0) != 0 || warm_up(1) != 0 ||
      census(&sessions, &base_bytes, &base_bufs) != 0 || sessions != 1) {
    fprintf(stderr, "check_ring: the hostile daemon's warm-up failed\n");
    abort();
  }
  /* The daemon starts libuv's thread pool at start-up, for good; the
   * stream threads the warm-up started beyond each device's first end
   * after 2 s idle (executor.h): the baseline is after that, with one
   * stream thread a device (one service thread each). */
  harness_sleep_ms(1300);
  for (long long until = harness_now_ms() + 10000;
       proc_threads_named(shared->pid, "hipd-st") !=
           proc_threads_named(shared->pid, "hipd-svc") &&
       harness_now_ms() < until;)
    harness_sleep_ms(50);
  settle(&base_fds, &base_threads);
  proc_thread_names(shared->pid, base_names, sizeof(base_names));
  if (base_fds <= 0 || base_threads <= 0)
    abort();
}

static void hostile_setup(void)
{
  measured_setup("hostile", "1G");
}

/* A small output cap, for test_reads_nothing. */
static void limits_setup(void)
{
  measured_setup("limits", "1M");
}

/* After every test above on this daemon: nothing of theirs is left. */
/* Is something to read on @p rr's socket within @p ms? */
static int rr_sock_readable(rr_t *rr, int ms)
{
  struct pollfd pfd = {.fd = rr->r->fd, .events = POLLIN};

  return rr->r->len > rr->r->used || poll(&pfd, 1, ms) == 1;
}

/* Sleep on the futex doorbell as libhipd does, until the daemon moves
 * cq_wait off 1 (10 s at most). @return the value it left. */
static uint32_t rr_futex_sleep(rr_t *rr)
{
  long long deadline = harness_now_ms() + 10000;
  uint32_t v;

  while ((v = atomic_load(&rr->hdr->cq_wait)) == 1 &&
         harness_now_ms() < deadline)
    proto_ring_futex_wait(&rr->hdr->cq_wait, 1, 100);
  return v;
}

/* Open @p rr's ring of 8 with doorbell @p bell, make a buffer and check the
 * ring with one memset; then, asleep (cq_wait @p asleep), submit another
 * (msgid 2), whose completion must wake us. */
static void rr_asleep_memset(rr_t *rr, const char *bell, uint32_t asleep)
{
  uint64_t buf;

  rr_ring_bell(rr, 8, bell);
  buf = rr_alloc(rr, 4096);
  rr_memset_ok(rr, 1, buf, 0, 4096, 0x11);
  atomic_store(&rr->hdr->cq_wait, asleep);
  rr_pack_memset(rr, 2, buf, 0, 4096, 0x22);
  rr_submit(rr);
}

/* The next message on @p rr's socket is ring.wake (10 s at most), and the
 * daemon left cq_wait at RING_WOKEN. */
static void rr_ring_wake_ok(rr_t *rr)
{
  ck_assert_msg(rr_sock_readable(rr, 10000), "no ring.wake");
  ck_assert(raw_next(rr->r));
  ck_assert_int_eq(rr->r->msg.type, PROTO_NOTIFY);
  ck_assert(rr->r->msg.method_len == sizeof(RING_WAKE) - 1 &&
            memcmp(rr->r->msg.method, RING_WAKE, rr->r->msg.method_len) == 0);
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_wait), RING_WOKEN);
}

/* (k) The completion doorbells: ring.open's `doorbell` and its errors;
 * with "futex", a client asleep on cq_wait is woken by the daemon (cq_wait
 * 1 to 2) for a completion, without a word on the socket, and for a reply
 * on its socket; asleep on its socket (cq_wait 3), by ring.wake; with
 * "socket", by the notification ring.wake. */
START_TEST(test_doorbells)
{
  static const struct {
    const char *bell;
    uint32_t asleep;
  } by_wake[] = {{RING_DOORBELL_FUTEX, RING_ASLEEP_SOCKET},
                 {RING_DOORBELL_SOCKET, RING_ASLEEP},
                 {RING_DOORBELL_SOCKET, RING_ASLEEP_SOCKET}};
  const int seals = F_SEAL_SHRINK | F_SEAL_GROW;
  rr_t *rr = rr_open(shared);
  char msg[512];
  int fd, rc;

  fd = ring_memfd(proto_ring_size(8), seals);
  rc = rr_ring_open_bell(rr, fd, 8, "bell", msg, sizeof(msg));
  ck_assert_msg(rc == HIPD_EINVAL &&
                    strstr(msg, "doorbell 'bell' is not one of socket, "
                                "futex") != NULL,
                "%s (%s)", hipd_err_name(rc), msg);
  close(fd);
  fd = ring_memfd(proto_ring_size(8), seals);
  raw_request(rr->r, 9007, "ring.open", 2);
  msgpack_pack_uint64(&rr->r->pk, 8);
  msgpack_pack_uint64(&rr->r->pk, 1);
  rr_sock_send(rr, fd);
  rc = raw_response(rr->r, 9007, msg, sizeof(msg));
  ck_assert_msg(rc == HIPD_EPARAMS && strstr(msg, "param 1 (doorbell)") != NULL,
                "%s (%s)", hipd_err_name(rc), msg);
  close(fd);

  /* The session goes on, and takes a futex ring. Asleep: a completion
   * wakes us, and nothing comes on the socket. */
  rr_asleep_memset(rr, RING_DOORBELL_FUTEX, RING_ASLEEP);
  ck_assert_uint_eq(rr_futex_sleep(rr), 2);
  atomic_store(&rr->hdr->cq_wait, 0);
  ck_assert_int_eq(rr_answer(rr, 2), 0);
  ck_assert_msg(!rr_sock_readable(rr, 100),
                "the futex doorbell also wrote to the socket");
  /* Asleep: a reply on the socket wakes us too. */
  atomic_store(&rr->hdr->cq_wait, 1);
  raw_request(rr->r, 9008, "ping", 0);
  rr_sock_send(rr, -1);
  ck_assert_uint_eq(rr_futex_sleep(rr), 2);
  atomic_store(&rr->hdr->cq_wait, 0);
  ck_assert_int_eq(raw_response(rr->r, 9008, msg, sizeof(msg)), 0);
  rr_close(rr);

  /* The futex doorbell, asleep on the socket (RING_ASLEEP_SOCKET): a reply
   * on the socket leaves cq_wait alone (the reply itself wakes such a
   * sleeper); a completion comes with ring.wake (below). */
  rr = rr_open(shared);
  rr_ring_bell(rr, 8, RING_DOORBELL_FUTEX);
  atomic_store(&rr->hdr->cq_wait, RING_ASLEEP_SOCKET);
  raw_request(rr->r, 9009, "ping", 0);
  rr_sock_send(rr, -1);
  ck_assert_int_eq(raw_response(rr->r, 9009, msg, sizeof(msg)), 0);
  ck_assert_uint_eq(atomic_load(&rr->hdr->cq_wait), RING_ASLEEP_SOCKET);
  rr_close(rr);
  /* ring.wake, once per sleep: the futex doorbell asleep on the socket,
   * and the socket doorbell with either value. */
  for (size_t i = 0; i < sizeof(by_wake) / sizeof(by_wake[0]); i++) {
    rr = rr_open(shared);
    rr_asleep_memset(rr, by_wake[i].bell, by_wake[i].asleep);
    rr_ring_wake_ok(rr);
    atomic_store(&rr->hdr->cq_wait, RING_AWAKE);
    ck_assert_int_eq(rr_answer(rr, 2), 0);
    rr_close(rr);
  }
  other_client_ok("after the doorbells");
}
END_TEST

START_TEST(test_no_leaks)
{
  int64_t sessions = -1, bytes = -1, bufs = -1;
  long long deadline = harness_now_ms() + 5000;
  long threads = -1;
  int fds = -1;
  char names[1024];

  ck_assert_int_eq(census(&sessions, &bytes, &bufs), 0);
  if (sessions != 1) {
    hipd_conn_t *c = connect_named(shared, "census-list", 20000);
    hipd_info_t *info = NULL;
    char list[2048];
    int dev = 0;
    OK(c, hipd_session_list(c, &info));
    hipd_info_format(info, list, sizeof(list));
    hipd_info_free(info);
    hipd_close(c);
    ck_abort_msg("%lld sessions are left besides this one: %s",
                 (long long)sessions - 1, list);
  }
  ck_assert_int_eq(bytes, base_bytes);
  ck_assert_int_eq(bufs, base_bufs);
  for (;;) {
    settle(&fds, &threads);
    if ((fds == base_fds && threads == base_threads) ||
        harness_now_ms() > deadline)
      break;
  }
  ck_assert_msg(fds == base_fds, "the daemon has %d descriptors, %d before",
                fds, base_fds);
  proc_thread_names(shared->pid, names, sizeof(names));
  ck_assert_msg(threads == base_threads,
                "the daemon has %ld threads (%s), %ld before (%s)", threads,
                names, base_threads, base_names);
  daemon_alive();
}
END_TEST

/* ============================================================== the suite */

static Suite *ring_suite(void)
{
  Suite *s = suite_create("ring");
  TCase *tc;

  tc = tcase_create("kick");
  tcase_add_unchecked_fixture(tc, kick_setup, shared_stop);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_transparent);
  tcase_add_test(tc, test_transparent_off);
  tcase_add_test(tc, test_transparent_socket_bell);
  tcase_add_test(tc, test_futex_sleepers);
  tcase_add_test(tc, test_futex_long_reply);
  tcase_add_test(tc, test_futex_socket_sleeper);
  tcase_add_test(tc, test_order);
  tcase_add_test(tc, test_pipeline_deep);
  tcase_add_test(tc, test_early_then_socket);
  tcase_add_test(tc, test_early_killed_client);
  tcase_add_test(tc, test_one_kick_a_submission);
  suite_add_tcase(s, tc);

  tc = tcase_create("polled");
  tcase_add_unchecked_fixture(tc, polled_setup, shared_stop);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_transparent);
  tcase_add_test(tc, test_order);
  tcase_add_test(tc, test_pipeline_deep);
  tcase_add_test(tc, test_early_then_socket);
  suite_add_tcase(s, tc);

  tc = tcase_create("workers");
  tcase_add_unchecked_fixture(tc, workers_setup, shared_stop);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_transparent);
  tcase_add_test(tc, test_early_then_socket);
  tcase_add_test(tc, test_early_killed_client);
  suite_add_tcase(s, tc);

  /* One daemon for all: the last test checks what they left behind. None
   * lets its ring reach its limit (a ring's worth of answers owed or
   * unread), which the next TCase is about. */
  tc = tcase_create("hostile");
  tcase_add_unchecked_fixture(tc, hostile_setup, shared_stop);
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_garbage_slot, 0,
                      (int)(sizeof(garbage) / sizeof(garbage[0])));
  tcase_add_loop_test(tc, test_bad_indices, 0, 4);
  tcase_add_test(tc, test_not_ring_methods);
  tcase_add_test(tc, test_repeated_requests);
  tcase_add_test(tc, test_after);
  tcase_add_test(tc, test_after_at_max_inflight);
  tcase_add_loop_test(tc, test_rewritten_slots, 0, 2);
  tcase_add_loop_test(tc, test_flood_is_fair, 0, 2);
  tcase_add_test(tc, test_killed_client);
  tcase_add_test(tc, test_ring_open_errors);
  tcase_add_test(tc, test_doorbells);
  tcase_add_test(tc, test_no_leaks);
  suite_add_tcase(s, tc);

  /* A daemon of its own, reloaded. */
  tc = tcase_create("reload");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_repeated_after_reload);
  suite_add_tcase(s, tc);

  /* Rings at their limit (answers owed and unread fill the completion
   * queue), and what they leave behind. */
  tc = tcase_create("limits");
  tcase_add_unchecked_fixture(tc, limits_setup, shared_stop);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_full_ring);
  tcase_add_loop_test(tc, test_unread_completions, 0, 2);
  tcase_add_test(tc, test_ring_at_limit);
  tcase_add_test(tc, test_held_ring_sleeps);
  tcase_add_loop_test(tc, test_reads_nothing, 0, 10);
  tcase_add_test(tc, test_no_leaks);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  /* As testutil_main_cached(), with the daemons' exits counted too. */
  harness_init("check_ring");
  if (testutil_tmpdir(cache_dir, sizeof(cache_dir), "ringcache") != 0) {
    fprintf(stderr, "mkdtemp %s: %s\n", cache_dir, strerror(errno));
    return EXIT_FAILURE;
  }
  failed = test_run(ring_suite());
  testutil_rmtree(cache_dir);
  harness_fini();
  return failed == 0 && daemons_failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
