/* SPDX-License-Identifier: MIT */
/* tests/check_devices_sessions.c: what a session may hold (quotas), what
 * its end releases (session cleanup), and sessions and streams at work at
 * once, on one device or two, without holding each other up. The shared
 * helpers are in tests/lib/devices_util.h. */
#include "config.h"

#include <signal.h>
#include <sys/prctl.h>

#include "devices_util.h"
#include "run.h"
#include "sanitize.h"

/* ------------------------------------------------------------------ quota */

START_TEST(test_quota)
{
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--mem-quota", "1M", NULL);
  hipd_conn_t *conn = connect_to(d), *other;
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t a = HIPD_BUFFER_NULL, b = HIPD_BUFFER_NULL;

    OK(conn, hipd_mem_alloc(conn, dev, 512 * KiB, "byte", &a));
    EXPECT(conn, hipd_mem_alloc(conn, dev, 600 * KiB, "byte", &b), HIPD_EQUOTA);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "quota"));
    /* The quota is the session's, across devices. */
    EXPECT(conn, hipd_mem_alloc(conn, (dev + 1) % n, 600 * KiB, "byte", &b),
           HIPD_EQUOTA);
    OK(conn, hipd_mem_free(conn, a));
    OK(conn, hipd_mem_alloc(conn, dev, 600 * KiB, "byte", &b));
    OK(conn, hipd_mem_free(conn, b));
  }
  /* Another session has a quota of its own. */
  {
    hipd_buffer_t a = HIPD_BUFFER_NULL, b = HIPD_BUFFER_NULL;
    dev = 0;
    other = connect_to(d);
    OK(conn, hipd_mem_alloc(conn, 0, MiB, "byte", &a));
    OK(other, hipd_mem_alloc(other, 0, MiB, "byte", &b));
    EXPECT(conn, hipd_mem_alloc(conn, 0, 1, "byte", &a), HIPD_EQUOTA);
    hipd_close(other);
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* -------------------------------------------------------- session cleanup */

#define CHILD_BYTES (64 * MiB)

/* The forked client: allocate and use memory on every device, say so on
 * @p fd, then wait to be killed. Never returns; no check calls here. */
static void cleanup_child(const char *path, int fd)
{
  hipd_conn_t *conn = NULL;
  uint8_t chunk[4096];
  int n = 0;
  char ok = 'R';

  memset(chunk, 0xee, sizeof(chunk));
  if (hipd_connect(path, &conn) != 0 || hipd_device_count(conn, &n) != 0)
    ok = 'E';
  for (int dev = 0; ok == 'R' && dev < n; dev++) {
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
    hipd_event_t ev = HIPD_EVENT_NULL;
    if (hipd_mem_alloc(conn, dev, CHILD_BYTES, "byte", &buf) != 0 ||
        hipd_mem_memset(conn, buf, 0, CHILD_BYTES, 1) != 0 ||
        hipd_mem_write(conn, buf, 4096, chunk, sizeof(chunk)) != 0 ||
        hipd_stream_create(conn, dev, &st) != 0 ||
        hipd_event_create(conn, dev, &ev) != 0 ||
        hipd_event_record(conn, ev, st) != 0)
      ok = 'E';
    if (ok == 'R') /* leave work queued as it dies */
      hipd_mem_memset_async(conn, buf, 0, CHILD_BYTES, 2, st);
  }
  if (write(fd, &ok, 1) != 1)
    _exit(2);
  for (;;)
    pause();
}

/* A client killed with SIGKILL while holding memory, streams and events
 * on every device: the daemon frees all of it. */
START_TEST(test_session_cleanup)
{
  harness_daemon_t *d = harness_start("--cpu-devices", "2", NULL);
  hipd_conn_t *conn = connect_to(d);
  int n = device_count(conn), dev = -1, fds[2], status;
  int64_t base_bytes[64], base_bufs[64];
  struct pollfd pfd;
  long long deadline;
  char ready = 0;
  pid_t child;

  ck_assert_int_le(n, 64);
  for (dev = 0; dev < n; dev++)
    device_usage(conn, dev, &base_bytes[dev], &base_bufs[dev]);
  /* An explicit free gives the memory back to the device's accounting. */
  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t buf = HIPD_BUFFER_NULL;
    int64_t bytes, bufs;
    OK(conn, hipd_mem_alloc(conn, dev, MiB, "byte", &buf));
    device_usage(conn, dev, &bytes, &bufs);
    ck_assert_int_eq(bytes, base_bytes[dev] + (int64_t)MiB);
    ck_assert_int_eq(bufs, base_bufs[dev] + 1);
    OK(conn, hipd_mem_free(conn, buf));
    deadline = harness_now_ms() + 10000;
    for (;;) {
      device_usage(conn, dev, &bytes, &bufs);
      if (bytes == base_bytes[dev] && bufs == base_bufs[dev])
        break;
      ck_assert_msg(harness_now_ms() < deadline,
                    "device %d: after mem.free, %lld bytes in %lld buffers "
                    "(baseline %lld in %lld)",
                    dev, (long long)bytes, (long long)bufs,
                    (long long)base_bytes[dev], (long long)base_bufs[dev]);
      harness_sleep_ms(10);
    }
  }
  ck_assert_int_eq(pipe(fds), 0);
  child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    close(fds[0]);
    cleanup_child(d->socket, fds[1]);
  }
  close(fds[1]);
  pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
  ck_assert_msg(poll(&pfd, 1, 60000) == 1, "the client never got ready");
  ck_assert_int_eq(read(fds[0], &ready, 1), 1);
  close(fds[0]);
  if (ready != 'R') {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    ck_abort_msg("the client failed to set up");
  }
  /* The daemon counts what the client holds... */
  for (dev = 0; dev < n; dev++) {
    int64_t bytes, bufs;
    device_usage(conn, dev, &bytes, &bufs);
    ck_assert_int_ge(bytes, base_bytes[dev] + (int64_t)CHILD_BYTES);
    ck_assert_int_ge(bufs, base_bufs[dev] + 1);
  }
  ck_assert_int_eq(kill(child, SIGKILL), 0);
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  /* ...and gives it all back once the client is gone. */
  deadline = harness_now_ms() + 10000;
  for (dev = 0; dev < n; dev++) {
    int64_t bytes, bufs;
    for (;;) {
      device_usage(conn, dev, &bytes, &bufs);
      if (bytes == base_bytes[dev] && bufs == base_bufs[dev])
        break;
      ck_assert_msg(harness_now_ms() < deadline,
                    "device %d: %lld bytes in %lld buffers left (baseline "
                    "%lld in %lld)",
                    dev, (long long)bytes, (long long)bufs,
                    (long long)base_bytes[dev], (long long)base_bufs[dev]);
      harness_sleep_ms(10);
    }
  }
  {
    hipd_info_t *info = NULL;
    int64_t sessions = -1;
    deadline = harness_now_ms() + 10000;
    do {
      OK(conn, hipd_daemon_info(conn, &info));
      sessions = info_int(info, "sessions");
      hipd_info_free(info);
    } while (sessions != 1 && harness_now_ms() < deadline &&
             (harness_sleep_ms(10), 1));
    ck_assert_int_eq(sessions, 1);
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

typedef struct {
  int dev;
  int failures;
  char why[256];
} pair_t;

static void *pair_main(void *arg)
{
  enum { LEN = 1 << 20, ROUNDS = 20 };
  pair_t *p = arg;
  hipd_conn_t *c = NULL;
  unsigned char *in = malloc(LEN), *out = malloc(LEN);
  hipd_buffer_t a = HIPD_BUFFER_NULL, b = HIPD_BUFFER_NULL;

  if (hipd_connect(shared->socket, &c) != 0 || in == NULL || out == NULL ||
      hipd_mem_alloc(c, p->dev, LEN, "uint8", &a) != 0 ||
      hipd_mem_alloc(c, p->dev, LEN, "uint8", &b) != 0) {
    p->failures++;
    snprintf(p->why, sizeof(p->why), "setup on device %d: %s", p->dev,
             c ? hipd_last_error(c) : hipd_last_error(NULL));
    goto out;
  }
  for (int r = 0; r < ROUNDS; r++) {
    fill_random(in, LEN, (unsigned)(p->dev * 1000 + r));
    if (hipd_mem_write(c, a, 0, in, LEN) != 0 ||
        hipd_mem_copy(c, b, 0, a, 0, LEN) != 0 ||
        hipd_mem_read(c, b, 0, out, LEN) != 0 || memcmp(in, out, LEN) != 0) {
      p->failures++;
      snprintf(p->why, sizeof(p->why), "device %d round %d: %s", p->dev, r,
               hipd_last_error(c));
      break;
    }
  }
out:
  if (c != NULL)
    hipd_close(c);
  free(in);
  free(out);
  return NULL;
}

START_TEST(test_sessions_on_two_devices)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn);
  pair_t p[2] = {{.dev = 0}, {.dev = n > 1 ? 1 : 0}};
  pthread_t t[2];

  hipd_close(conn);
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, pair_main, &p[i]), 0);
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    ck_assert_msg(p[i].failures == 0, "%s", p[i].why);
  }
}
END_TEST

/* The tests below show that a request is not held up by a stream's work:
 * answered while that work is still pending. A loaded machine (CI runs
 * tests side by side on 2 cores) can delay the answer past even a long
 * memset, so each tries up to BUSY_TRIES times: a request that waits for
 * the work fails every try. On the CPU device a try is often inconclusive
 * (the memset ends before the request is read), hence 8. */
enum { BUSY_TRIES = 8 };

/* Client A waits in stream.synchronize behind large memsets while client B
 * pings and reads device records: B is served before A's wait returns. */
START_TEST(test_concurrent_sessions)
{
  hipd_conn_t *a = connect_to(shared), *b = connect_to(shared);
  int n = device_count(b), dev;

  for (dev = 0; dev < n; dev++) {
    int served = 0;

    for (int try = 0; try < BUSY_TRIES && !served; try++) {
      hipd_info_t *info = NULL;
      busy_t busy;

      busy_start(&busy, a, dev);
      for (int i = 0; i < 10; i++) {
        char out[8];
        size_t len = 0;
        OK(b, hipd_ping(b, "B", 1, out, sizeof(out), &len));
      }
      for (int other = 0; other < n; other++) {
        OK(b, hipd_device_get(b, other, &info));
        hipd_info_free(info);
      }
      OK(b, hipd_session_info(b, &info));
      hipd_info_free(info);
      served = busy_pending(&busy);
      busy_finish(&busy, dev);
    }
    ck_assert_msg(served,
                  "device %d: A's work finished before B was served, %d "
                  "times",
                  dev, BUSY_TRIES);
  }
  hipd_close(a);
  hipd_close(b);
}
END_TEST

/* stream.query answers at once, busy, while the stream has work: it must
 * not wait behind that work. */
START_TEST(test_stream_query_busy)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    int answered = 0;

    for (int try = 0; try < BUSY_TRIES && !answered; try++) {
      int idle = -1;
      busy_t busy;

      busy_start(&busy, conn, dev);
      OK(conn, hipd_stream_query(conn, busy.st, &idle));
      /* Answered while the work was still pending, and busy. "Idle" with
       * the work's own answer not yet here is inconclusive, not a
       * failure: the stream is idle as soon as the device is done, and
       * that answer comes after. */
      ck_assert_int_ge(idle, 0);
      answered = busy_pending(&busy) && idle == 0;
      busy_finish(&busy, dev);
    }
    ck_assert_msg(answered,
                  "device %d: stream.query waited for the stream's work, %d "
                  "times",
                  dev, BUSY_TRIES);
  }
  hipd_close(conn);
}
END_TEST

/* Many pipelined transfers on two streams of one device, then both
 * synchronized: each stream's buffer holds exactly its own writes. */
START_TEST(test_two_streams)
{
  enum { CHUNKS = 64, CHUNK = 4096 };
  const size_t cap = (size_t)CHUNKS * CHUNK;
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  uint8_t *x = xmalloc(cap), *y = xmalloc(cap), *back = xmalloc(cap);
  hipd_call_t *calls[2 * CHUNKS];

  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t bx = HIPD_BUFFER_NULL, by = HIPD_BUFFER_NULL;
    hipd_stream_t s1 = HIPD_STREAM_NULL, s2 = HIPD_STREAM_NULL;
    int idle = 0;

    fill_random(x, cap, (unsigned)dev * 2 + 1);
    fill_random(y, cap, (unsigned)dev * 2 + 2);
    OK(conn, hipd_stream_create(conn, dev, &s1));
    OK(conn, hipd_stream_create(conn, dev, &s2));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &bx));
    OK(conn, hipd_mem_alloc(conn, dev, cap, "byte", &by));
    OK(conn, hipd_mem_memset_async(conn, bx, 0, cap, 0, s1));
    OK(conn, hipd_mem_memset_async(conn, by, 0, cap, 0, s2));
    for (int i = 0; i < CHUNKS; i++) {
      OK(conn, hipd_mem_write_async_begin(conn, bx, (size_t)i * CHUNK,
                                          x + (size_t)i * CHUNK, CHUNK, s1,
                                          &calls[2 * i]));
      OK(conn, hipd_mem_write_async_begin(conn, by, (size_t)i * CHUNK,
                                          y + (size_t)i * CHUNK, CHUNK, s2,
                                          &calls[2 * i + 1]));
    }
    OK(conn, hipd_stream_synchronize(conn, s1));
    OK(conn, hipd_stream_synchronize(conn, s2));
    for (int i = 0; i < 2 * CHUNKS; i++)
      OK(conn, hipd_wait(calls[i]));
    OK(conn, hipd_stream_query(conn, s1, &idle));
    ck_assert_int_eq(idle, 1);
    OK(conn, hipd_stream_query(conn, s2, &idle));
    ck_assert_int_eq(idle, 1);
    OK(conn, hipd_mem_read(conn, bx, 0, back, cap));
    ASSERT_SAME(back, x, cap, "stream 1's buffer");
    OK(conn, hipd_mem_read(conn, by, 0, back, cap));
    ASSERT_SAME(back, y, cap, "stream 2's buffer");
    OK(conn, hipd_device_synchronize(conn, dev));
    OK(conn, hipd_stream_destroy(conn, s1));
    OK(conn, hipd_stream_destroy(conn, s2));
    OK(conn, hipd_mem_free(conn, bx));
    OK(conn, hipd_mem_free(conn, by));
  }
  free(x);
  free(y);
  free(back);
  hipd_close(conn);
}
END_TEST

/* A daemon that has run kernels and keeps its client's session, stream
 * and buffers sleeps: no thread of the listener or of any process below
 * it (workers, runners, helpers) wakes more than 9 times in 5 s once
 * the work is done (issue 22: "Idle: 0% CPU, no polling when no client
 * is active"). What is left is the housekeeping timer, once a second; it
 * wakes a pool thread to trim the transfer buffers only when one has
 * been unused for 10 s. The daemon busy-polls (--busy-poll, --spin-cpus,
 * as on a machine of 8 CPUs or more), so that the spin budget's tuning,
 * which the listener runs while sessions are open, is idle too. The CUDA
 * runtime's own threads ("cuda-EvtHandlr"...) are not ours: the bench's
 * idle figure sets them beside a direct HIP process. */
START_TEST(test_idle_sleeps)
{
  /* In 5 s: 5 or 6 housekeeping ticks, the listener's report request and
   * a trim, and one to spare; a second timer a second would make 10 or
   * more. */
  enum { N = 4096, MAXT = 512, WINDOW_MS = 5000, MAX_WAKES = 9 };
  static proc_thread_t a[MAXT], b[MAXT];
  static int out[N];
  harness_daemon_t *d = harness_start("--cpu-devices", "2", "--busy-poll", "50",
                                      "--spin-cpus", "2", NULL);
  hipd_conn_t *conn = connect_to(d);
  int n = device_count(conn), na, nb;
  uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
  hipd_buffer_t bufs[16];
  hipd_stream_t st[16];
  char msg[2048] = "";
  size_t off = 0;

  ck_assert_int_le(n, 16);
  for (int dev = 0; dev < n; dev++) {
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    hipd_args_t *args = hipd_args_new();

    OK(conn, hipd_stream_create(conn, dev, &st[dev]));
    OK(conn, hipd_mem_alloc(conn, dev, N * sizeof(int), "int32", &bufs[dev]));
    OK(conn, hipd_kernel_compile_cached(conn, dev, TESTUTIL_FILL_SRC, "fill",
                                        NULL, &k, NULL));
    for (int r = 0; r < 20; r++) {
      hipd_args_clear(args);
      hipd_args_buffer(args, bufs[dev], 0);
      hipd_args_i32(args, r);
      hipd_args_i32(args, N);
      OK(conn, hipd_kernel_run(conn, k, grid, block, 0, st[dev], args));
    }
    OK(conn, hipd_stream_synchronize(conn, st[dev]));
    OK(conn, hipd_mem_read(conn, bufs[dev], 0, out, sizeof(out)));
    ck_assert_int_eq(out[N - 1], 19 + N - 1);
    hipd_args_free(args);
    hipd_kernel_destroy(conn, k);
  }
  /* Past every pool thread's idle exit (2 s) and the GPU watchdog's last
   * sample (a quarter second). */
  harness_sleep_ms(2500);
  na = proc_tree_threads(d->pid, a, MAXT);
  ck_assert_int_gt(na, 0);
  harness_sleep_ms(WINDOW_MS);
  nb = proc_tree_threads(d->pid, b, MAXT);
  ck_assert_int_gt(nb, 0);
  for (int i = 0; i < nb; i++) {
    long long wakes = -1;

    if (strncmp(b[i].name, "cuda", 4) == 0)
      continue;
    for (int j = 0; j < na; j++)
      if (a[j].tid == b[i].tid)
        wakes = b[i].waits - a[j].waits;
    if (wakes > MAX_WAKES && off + 120 < sizeof(msg))
      off += (size_t)snprintf(msg + off, sizeof(msg) - off,
                              " %s[%d] thread %s[%d]: %lld;", b[i].comm,
                              (int)b[i].pid, b[i].name, (int)b[i].tid, wakes);
  }
  ck_assert_msg(off == 0,
                "idle threads woke more than %d times in %d ms (%d devices, "
                "%d threads):%s",
                MAX_WAKES, WINDOW_MS, n, nb, msg);
  for (int dev = 0; dev < n; dev++) {
    OK(conn, hipd_mem_free(conn, bufs[dev]));
    OK(conn, hipd_stream_destroy(conn, st[dev]));
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* -------------------------------------------------------- the spin budget */

/* The host's runnable tasks now (/proc/loadavg's 4th field), this
 * thread among them, or -1. */
static int runnable_tasks(void)
{
  unsigned running = 0, total = 0;
  FILE *f = fopen("/proc/loadavg", "r");
  int n = f != NULL ? fscanf(f, "%*f %*f %*f %u/%u", &running, &total) : 0;

  if (f != NULL)
    fclose(f);
  return n == 2 ? (int)running : -1;
}

/* spin.allowed of the daemon serving @p conn, or -1. */
static int64_t spin_allowed(hipd_conn_t *conn)
{
  hipd_info_t *info = NULL;
  uint64_t v = 0;
  int rc = hipd_daemon_info(conn, &info);

  if (rc == 0)
    rc = hipd_info_uint(info, "spin.allowed", &v);
  hipd_info_free(info);
  return rc == 0 ? (int64_t)v : -1;
}

/* A host full for a moment takes every place of the spin budget
 * (spin.allowed 0); once it is free again the places come back, with the
 * session still open. At 0 nobody can poll, and the budget was sampled
 * only after someone polled: it stayed at 0 until every session had
 * closed. Now the listener's housekeeping looks once a second while fewer
 * places than the cap are allowed. */
START_TEST(test_spin_budget_recovers)
{
  enum { MAX_BURNERS = 256 };
  static pid_t burners[MAX_BURNERS];
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int nb = (int)(online * 4 < MAX_BURNERS ? online * 4 : MAX_BURNERS);
  harness_daemon_t *d = harness_start("--cpu-devices", "1", "--busy-poll", "50",
                                      "--spin-cpus", "2", NULL);
  hipd_conn_t *conn = connect_to(d);
  int64_t allowed = spin_allowed(conn);
  long long t0, free_since = -1;

  ck_assert_int_ge(allowed, 0);
  /* Four runnable tasks a CPU: none is free. */
  for (int i = 0; i < nb; i++) {
    burners[i] = fork();
    ck_assert_int_ge(burners[i], 0);
    if (burners[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (;;)
        __asm__ volatile("" ::: "memory");
    }
  }
  /* Each daemon.info is work, after which the daemon polls while places
   * are left, and the listener samples the host while someone polls. */
  t0 = harness_now_ms();
  while ((allowed = spin_allowed(conn)) != 0 && harness_now_ms() - t0 < 15000)
    harness_sleep_ms(20);
  for (int i = 0; i < nb; i++)
    kill(burners[i], SIGKILL);
  for (int i = 0; i < nb; i++)
    waitpid(burners[i], NULL, 0);
  ck_assert_msg(allowed == 0,
                "with %d busy processes on %ld CPUs the spin budget still "
                "allowed %lld places after 15 s",
                nb, online, (long long)allowed);
  /* The session stays open, and keeps asking. The host may be busy with
   * other work (CI runs tests side by side on two CPUs): then 0 places is
   * right. So the budget must give a place back once this test has seen a
   * CPU free in every look over 2.5 s: at most one runnable task a CPU,
   * this thread among them, as the listener counts itself among its own. */
  t0 = harness_now_ms();
  while ((allowed = spin_allowed(conn)) == 0 && harness_now_ms() - t0 < 30000) {
    int r = runnable_tasks();

    if (r < 0 || r > online)
      free_since = -1;
    else if (free_since < 0)
      free_since = harness_now_ms();
    ck_assert_msg(free_since < 0 || harness_now_ms() - free_since < 2500,
                  "the spin budget allowed no place while the host had a "
                  "CPU free for 2.5 s (%ld CPUs)",
                  online);
    harness_sleep_ms(100);
  }
  if (allowed == 0)
    fprintf(stderr,
            "test_spin_budget_recovers: the host had no CPU free for 2.5 s "
            "in 30 s: the recovery was not seen\n");
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* session.info's count of the ring's answers from a stream's thread. */
static int64_t answered_early(hipd_conn_t *conn, int dev)
{
  hipd_info_t *info = NULL;
  int64_t v;

  OK(conn, hipd_session_info(conn, &info));
  v = info_int(info, "ring.answered_early");
  hipd_info_free(info);
  return v;
}

/* With no place of the spin budget for anyone (--spin-cpus 0), a worker's
 * loop that launched a kernel itself on a GPU still waits for its end,
 * for up to --busy-poll, and answers it: the stream's thread would wait
 * spinning as much, after a wake-up each way. Before, a loop without a
 * place handed every launch it waited for to the stream's thread, which
 * answered it (session.info's ring.answered_early). With --gpu-wait block
 * it still does, which shows that the count tells the two apart. The
 * kernels' results are checked on every device; the CPU device runs its
 * kernels on the stream's threads whatever the budget. */
static void own_waits_run(const char *gpu_wait)
{
  enum { N = 4096, RUNS = 200 };
  static int out[N];
  harness_daemon_t *d =
      harness_start("--cpu-devices", "2", "--busy-poll", "100000",
                    "--spin-cpus", "0", "--gpu-wait", gpu_wait, NULL);
  hipd_conn_t *conn = connect_to(d);
  int n = device_count(conn);
  uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
  hipd_info_t *info = NULL;
  int dev = -1;

  OK(conn, hipd_daemon_info(conn, &info));
  ck_assert_int_eq(info_int(info, "spin.cpus"), 0);
  hipd_info_free(info);
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    hipd_args_t *args = hipd_args_new();
    hipd_buffer_t b = HIPD_BUFFER_NULL;
    hipd_stream_t st = HIPD_STREAM_NULL;
    int64_t early0, early;

    OK(conn, hipd_stream_create(conn, dev, &st));
    OK(conn, hipd_mem_alloc(conn, dev, N * sizeof(int), "int32", &b));
    OK(conn, hipd_kernel_compile_cached(conn, dev, TESTUTIL_FILL_SRC, "fill",
                                        NULL, &k, NULL));
    early0 = answered_early(conn, dev);
    for (int r = 0; r < RUNS; r++) {
      hipd_args_clear(args);
      hipd_args_buffer(args, b, 0);
      hipd_args_i32(args, r);
      hipd_args_i32(args, N);
      OK(conn, hipd_kernel_run(conn, k, grid, block, 0, st, args));
      if (r % 50 == 0 || r == RUNS - 1) {
        OK(conn, hipd_mem_read(conn, b, 0, out, sizeof(out)));
        ck_assert_int_eq(out[0], r);
        ck_assert_int_eq(out[N - 1], r + N - 1);
      }
    }
    early = answered_early(conn, dev) - early0;
    fprintf(stderr,
            "test_loop_waits_own_kernels: device %d (%s), --gpu-wait %s: "
            "%lld of %d kernels answered by the stream's thread\n",
            dev, device_is_cpu(conn, dev) ? "cpu" : "gpu", gpu_wait,
            (long long)early, RUNS);
    if (!device_is_cpu(conn, dev) && strcmp(gpu_wait, "auto") == 0)
      ck_assert_msg(early <= RUNS / 10,
                    "device %d, no place to spin: %lld of %d kernels were "
                    "handed to the stream's thread, which answered them",
                    dev, (long long)early, RUNS);
    else if (!device_is_cpu(conn, dev))
      ck_assert_msg(early >= RUNS / 2,
                    "device %d, --gpu-wait %s: only %lld of %d kernels "
                    "were answered by the stream's thread",
                    dev, gpu_wait, (long long)early, RUNS);
    hipd_args_free(args);
    OK(conn, hipd_kernel_destroy(conn, k));
    OK(conn, hipd_mem_free(conn, b));
    OK(conn, hipd_stream_destroy(conn, st));
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_loop_waits_own_kernels)
{
  own_waits_run("auto");
  own_waits_run("block");
}
END_TEST

static Suite *devices_sessions_suite(void)
{
  Suite *s = suite_create("devices_sessions");
  TCase *tc;

  tc = tcase_create("sessions");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_quota);
  tcase_add_test(tc, test_session_cleanup);
  suite_add_tcase(s, tc);

  tc = tcase_create("concurrency");
  tcase_set_timeout(tc, 180);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_concurrent_sessions);
  tcase_add_test(tc, test_sessions_on_two_devices);
  tcase_add_test(tc, test_stream_query_busy);
  tcase_add_test(tc, test_two_streams);
#if !defined(HIPD_ASAN) && !defined(HIPD_TSAN)
  /* (A sanitizer's runtime has background threads of its own that wake
   * on a timer: ThreadSanitizer's ten times a second.) */
  tcase_add_test(tc, test_idle_sleeps);
#endif
  suite_add_tcase(s, tc);

  tc = tcase_create("spin");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, test_spin_budget_recovers);
  tcase_add_test(tc, test_loop_waits_own_kernels);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_devices_sessions");
  failed = test_run(devices_sessions_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
