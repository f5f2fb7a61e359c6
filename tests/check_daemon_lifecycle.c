/* SPDX-License-Identifier: MIT */
/* tests/check_daemon_lifecycle.c: the daemon's end and its socket file:
 * shutdown with clients connected, work in flight and compiles running
 * (their helpers killed); a stale socket file, a second daemon on the same
 * socket, the socket's mode. The shared helpers are in tests/lib/daemon_util.h.
 */
#include "config.h"

#include "daemon_util.h"
#include "run.h"

#include <dirent.h>

/* ------------------------------------------------------------- lifecycle */

/* Wait until the daemon has read the synchronize @p call sent on @p conn
 * after busy_start(): it counts three requests in flight (the memset, the
 * synchronize and the session.info asking), or the call is already done.
 * A request still in the socket when SIGTERM comes is refused with
 * ESHUTDOWN, which is not what these tests are about. */
static void wait_sync_read(hipd_conn_t *conn, hipd_call_t *call)
{
  long long deadline = harness_now_ms() + 10000;

  while (!hipd_call_done(call) && session_inflight(conn) < 3) {
    ck_assert_msg(harness_now_ms() < deadline,
                  "the daemon never read the synchronize");
    harness_sleep_ms(1);
  }
}

/* SIGTERM with clients connected: work in flight finishes or fails with
 * EDISCONNECTED, later calls fail with EDISCONNECTED, nothing hangs, the
 * daemon exits 0 and removes its socket. */
START_TEST(test_shutdown_with_clients)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  hipd_call_t *sync_call = NULL;
  hipd_conn_t *idle, *busy;
  struct stat st;
  int rc;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  idle = connect_to(d);
  busy = connect_to(d);
  ping_ok(idle);
  busy_start(&b, busy, BUSY_BYTES);
  ck_assert_int_eq(hipd_stream_synchronize_begin(busy, b.st, &sync_call), 0);
  wait_sync_read(busy, sync_call);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  ck_assert_msg(stat(d->socket, &st) != 0 && errno == ENOENT,
                "the socket file is still there");

  rc = busy_join(&b);
  ck_assert_msg(rc == 0 || rc == HIPD_EDISCONNECTED, "memset: %s",
                hipd_err_name(rc));
  rc = hipd_wait(sync_call);
  ck_assert_msg(rc == 0 || rc == HIPD_EDISCONNECTED, "synchronize: %s",
                hipd_err_name(rc));
  rc = hipd_ping(idle, "x", 1, NULL, 0, NULL);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "ping after exit: %s",
                hipd_err_name(rc));
  rc = hipd_stream_synchronize(busy, b.st);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "call after exit: %s",
                hipd_err_name(rc));
  ck_assert(harness_log_contains(d, "stopping"));
  ck_assert(harness_log_contains(d, "stopped"));
  hipd_close(idle);
  hipd_close(busy);
  harness_free(d);
}
END_TEST

/* Wait (up to 20 s) until @p c knows why its connection ended. */
static const char *lost_reason(hipd_conn_t *c, int *code)
{
  const char *why = NULL;

  for (int i = 0; i < 2000 && (why = hipd_conn_lost_reason(c, code)) == NULL;
       i++)
    harness_sleep_ms(10);
  return why;
}

/* A session hipd closes for a reason of its own is told why last
 * (session.closed), and libhipd reports it in one call: an admin's
 * session.kill (ECANCELED), then a shutdown (ESHUTDOWN). While the
 * connection is up there is no reason; calls after the end fail with
 * EDISCONNECTED and carry the reason. */
START_TEST(test_closed_sessions_are_told)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  hipd_conn_t *admin, *victim, *idle;
  hipd_info_t *info;
  uint64_t id = 0;
  const char *why;
  int code = 0, rc;

  ck_assert_ptr_nonnull(d);
  admin = connect_to(d);
  victim = connect_to(d);
  idle = connect_to(d);
  ping_ok(victim);
  ck_assert_ptr_null(hipd_conn_lost_reason(victim, &code));
  ck_assert_int_eq(hipd_session_info(victim, &info), 0);
  ck_assert_int_eq(hipd_info_uint(info, "id", &id), 0);
  hipd_info_free(info);
  ck_assert_int_eq(hipd_session_kill(admin, id), 0);
  why = lost_reason(victim, &code);
  ck_assert_msg(why != NULL, "the killed session was not told");
  ck_assert_msg(code == HIPD_ECANCELED, "code %s (%s)", hipd_err_name(code),
                why);
  ck_assert_msg(strcmp(why, "hipd closed this session: killed by uid 0 "
                            "(root)") == 0,
                "reason '%s'", why);
  rc = hipd_ping(victim, "x", 1, NULL, 0, NULL);
  ck_assert_int_eq(rc, HIPD_EDISCONNECTED);
  ck_assert_msg(strstr(hipd_last_error(victim), "killed by uid 0") != NULL,
                "ping after the kill: %s", hipd_last_error(victim));
  /* The others go on, and are told of the shutdown. */
  ping_ok(idle);
  ck_assert_ptr_null(hipd_conn_lost_reason(idle, &code));
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  why = lost_reason(idle, &code);
  ck_assert_msg(why != NULL, "the idle session was not told");
  ck_assert_msg(code == HIPD_ESHUTDOWN, "code %s (%s)", hipd_err_name(code),
                why);
  ck_assert_str_eq(why, "hipd closed this session: daemon shutdown");
  hipd_close(admin);
  hipd_close(victim);
  hipd_close(idle);
  harness_free(d);
}
END_TEST

/* With --shutdown-timeout 0, work still in flight at SIGTERM is abandoned:
 * its calls fail with EDISCONNECTED at once and the daemon exits 0. A
 * second session holds buffers (device memory and a shared buffer mapped
 * for the device) and nothing in flight: they are freed by the same forced
 * close, on the device's service thread, after the loop stopped taking
 * completions; under ASan, LeakSanitizer fails the run if such a free's
 * completion is lost instead of left to the exit (CI, 2026-12-06). */
START_TEST(test_shutdown_abandons_work)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--shutdown-timeout", "0", NULL);
  hipd_call_t *sync_call = NULL;
  hipd_conn_t *conn, *holder;
  hipd_buffer_t bufs[8], zc;
  hipd_shm_t *shm = NULL;
  struct stat st;
  int rc;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  holder = connect_to(d);
  for (int i = 0; i < 8; i++)
    ck_assert_int_eq(hipd_mem_alloc(holder, 0, 1024 + i, "float32", &bufs[i]),
                     0);
  ck_assert_int_eq(hipd_shm_create(holder, 65536, &shm), 0);
  ck_assert_int_eq(hipd_mem_alloc_zero_copy(holder, 0, shm, &zc), 0);
  conn = connect_to(d);
  busy_start(&b, conn, BUSY_BYTES);
  ck_assert_int_eq(hipd_stream_synchronize_begin(conn, b.st, &sync_call), 0);
  wait_sync_read(conn, sync_call);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  rc = hipd_wait(sync_call);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "synchronize: %s", hipd_err_name(rc));
  rc = busy_join(&b);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "memset: %s", hipd_err_name(rc));
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  ck_assert(stat(d->socket, &st) != 0 && errno == ENOENT);
  ck_assert(harness_log_contains(d, "in-flight work abandoned"));
  hipd_close(conn);
  hipd_close(holder);
  hipd_shm_free(NULL, shm);
  harness_free(d);
}
END_TEST

/* Send kernel.compile of @p src (kernel "k") as request @p msgid. */
static void raw_compile(raw_t *r, uint32_t msgid, const char *src)
{
  raw_request(r, msgid, "kernel.compile", 2);
  proto_pack_cstr(&r->pk, src);
  proto_pack_cstr(&r->pk, "k");
  ck_assert_int_eq(raw_flush(r), 0);
}

/* A kernel whose compile takes minutes: a thousand constants, each under
 * GCC's constexpr operation limit, each taking seconds. */
static const char SLOW_SRC[] =
    "constexpr long spin(long n, long s)\n"
    "{\n"
    "  long x = s;\n"
    "  for (long i = 0; i < n; i++)\n"
    "    for (long j = 0; j < n; j++)\n"
    "      for (long k = 0; k < n; k++)\n"
    "        x += i ^ j ^ k;\n"
    "  return x;\n"
    "}\n"
    "#define R(x) constexpr long v##x = spin(200, x);\n"
    "#define R10(x) R(x##0) R(x##1) R(x##2) R(x##3) R(x##4) R(x##5) "
    "R(x##6) R(x##7) R(x##8) R(x##9)\n"
    "#define R100(x) R10(x##0) R10(x##1) R10(x##2) R10(x##3) R10(x##4) "
    "R10(x##5) R10(x##6) R10(x##7) R10(x##8) R10(x##9)\n"
    "R100(1) R100(2) R100(3) R100(4) R100(5) R100(6) R100(7) R100(8)\n"
    "extern \"C\" __global__ void k(long *p) { p[0] = v1000 + v8999; }\n";

/* Is process @p pid alive (not gone, nor a zombie waiting to be reaped)?
 * Its /proc/PID/stat in *@p st. */
static int proc_alive(pid_t pid, proc_stat_t *st)
{
  return proc_stat_read(pid, st) == 0 && st->state != 'Z';
}

/* A compiler process (not hipd-compile itself) that descends from
 * @p daemon, waiting up to 60 s for one; 0 if none. */
static pid_t compiler_of(pid_t daemon)
{
  long long deadline = harness_now_ms() + 60000;

  while (harness_now_ms() < deadline) {
    DIR *dir = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;

    while (dir != NULL && found == 0 && (e = readdir(dir)) != NULL) {
      pid_t pid = (pid_t)atoi(e->d_name);
      proc_stat_t st;

      if (pid <= 0 || pid == daemon || !proc_alive(pid, &st) ||
          strcmp(st.comm, "hipd-compile") == 0 ||
          strcmp(st.comm, "hipd-cpu-runner") == 0)
        continue;
      if (proc_in_tree(pid, daemon))
        found = pid;
    }
    if (dir != NULL)
      closedir(dir);
    if (found != 0)
      return found;
    harness_sleep_ms(20);
  }
  return 0;
}

/* Wait up to @p ms for process @p pid to be gone (or a zombie). */
static int process_gone(pid_t pid, int ms)
{
  long long deadline = harness_now_ms() + ms;
  proc_stat_t st;

  while (proc_alive(pid, &st)) {
    if (harness_now_ms() > deadline)
      return 0;
    harness_sleep_ms(20);
  }
  return 1;
}

/* SIGTERM while a compile runs, with --shutdown-timeout 1500: requests are
 * answered ESHUTDOWN (and close the descriptor they carried), the session
 * is closed at the deadline, the compile helpers are killed with their
 * compilers, and hipd exits 0 within the timeout and a bounded margin, not
 * when the compile ends. */
START_TEST(test_shutdown_stops_compiles)
{
  harness_daemon_t *d;
  char msg[256];
  pid_t cc;
  int rfd;
  raw_t *r;

  d = harness_start("--devices", "cpu", "--shutdown-timeout", "1500",
                    "--cache-dir", "", NULL);
  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_compile(r, 1, SLOW_SRC);
  cc = compiler_of(d->pid);
  ck_assert_msg(cc > 0, "the compiler never ran");
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  /* The process serving the session is stopping (with --isolation uid,
   * the worker, told by the listener: its line counts the session). */
  ck_assert(harness_log_wait(d, "stopping (1 sessions", 5000));
  ck_assert_int_eq(raw_with_pipe(r, 2, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_ESHUTDOWN);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ESHUTDOWN kept the descriptor");
  close(rfd);
  ck_assert_int_eq(harness_wait_exit(d, 1500 + 8000), 0);
  ck_assert(harness_log_contains(d, "compilers killed"));
  /* The compiler is gone with its helper. */
  ck_assert_msg(process_gone(cc, 5000), "compiler %d still runs", (int)cc);
  raw_close(r);
  harness_free(d);
}
END_TEST

/* With --shutdown-timeout 0 and a compile running, hipd still exits 0 at
 * once: the helpers are killed (in their pid namespace, every compiler
 * they started goes with them), so nothing is left to abandon and no
 * compiler outlives the daemon. */
START_TEST(test_shutdown_kills_helpers)
{
  harness_daemon_t *d;
  raw_t *r;
  pid_t cc;

  d = harness_start("--devices", "cpu", "--shutdown-timeout", "0",
                    "--cache-dir", "", NULL);
  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_compile(r, 1, SLOW_SRC);
  cc = compiler_of(d->pid);
  ck_assert_msg(cc > 0, "the compiler never ran");
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_int_eq(harness_wait_exit(d, 8000), 0);
  ck_assert(harness_log_contains(d, "stopped"));
  if (geteuid() == 0)
    ck_assert_msg(process_gone(cc, 5000), "compiler %d outlived hipd", (int)cc);
  else
    kill(cc, SIGKILL); /* Landlock view: no pid namespace */
  raw_close(r);
  harness_free(d);
}
END_TEST

/* A socket file nobody listens on (a crashed daemon's) is replaced. */
START_TEST(test_stale_socket)
{
  const char *path = harness_temp_path("stale.sock");
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  harness_daemon_t *d;
  hipd_conn_t *conn;
  struct stat st;
  int fd;

  ck_assert_ptr_nonnull(path);
  strcpy(sa.sun_path, path);
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(fd);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(S_ISSOCK(st.st_mode));

  d = harness_spawn(path, NULL);
  ck_assert_ptr_nonnull(d);
  ck_assert_msg(harness_wait_ready(d, 20000) == 0,
                "hipd did not start over a stale socket file");
  ck_assert(harness_log_contains(d, "stale socket"));
  conn = connect_to(d);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  ck_assert(stat(path, &st) != 0 && errno == ENOENT);
  harness_free(d);
}
END_TEST

/* A second daemon on a live socket refuses to start and leaves the first
 * one (and its socket file) alone. */
START_TEST(test_second_daemon)
{
  harness_daemon_t *first = harness_start(NULL), *second;
  hipd_conn_t *conn;
  struct stat st;
  int code;

  ck_assert_ptr_nonnull(first);
  conn = connect_to(first);
  second = harness_spawn(first->socket, NULL);
  ck_assert_ptr_nonnull(second);
  code = harness_wait_exit(second, 20000);
  ck_assert_msg(code > 0, "the second daemon %s",
                code == 0 ? "exited 0" : "is still running");
  ck_assert(harness_log_contains(second, "another daemon"));
  ck_assert_int_eq(stat(first->socket, &st), 0);
  ping_ok(conn);
  hipd_close(conn);
  conn = connect_to(first);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(first), 0);
  harness_free(second);
  harness_free(first);
}
END_TEST

START_TEST(test_socket_mode)
{
  harness_daemon_t *d = harness_start(NULL), *d2;
  hipd_conn_t *conn;
  struct stat st;

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(stat(d->socket, &st), 0);
  ck_assert(S_ISSOCK(st.st_mode));
  ck_assert_msg((st.st_mode & 07777) == 0660, "default mode %04o",
                (unsigned)(st.st_mode & 07777));
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);

  d2 = harness_start("--socket-mode", "0600", NULL);
  ck_assert_ptr_nonnull(d2);
  ck_assert_int_eq(stat(d2->socket, &st), 0);
  ck_assert_msg((st.st_mode & 07777) == 0600, "mode %04o",
                (unsigned)(st.st_mode & 07777));
  conn = connect_to(d2);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d2), 0);
  harness_free(d2);
}
END_TEST

static Suite *daemon_lifecycle_suite(void)
{
  Suite *s = suite_create("daemon_lifecycle");
  TCase *tc;

  tc = tcase_create("lifecycle");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_shutdown_with_clients);
  tcase_add_test(tc, test_closed_sessions_are_told);
  tcase_add_test(tc, test_shutdown_abandons_work);
  tcase_add_test(tc, test_shutdown_stops_compiles);
  tcase_add_test(tc, test_shutdown_kills_helpers);
  tcase_add_test(tc, test_stale_socket);
  tcase_add_test(tc, test_second_daemon);
  tcase_add_test(tc, test_socket_mode);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_daemon_lifecycle");
  failed = test_run(daemon_lifecycle_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
