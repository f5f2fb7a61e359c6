/* tests/check_daemon_lifecycle.c: the daemon's end and its socket file:
 * shutdown with clients connected, work in flight and compiles running or
 * abandoned; a stale socket file, a second daemon on the same socket, the
 * socket's mode. The shared helpers are in tests/daemon_util.h. */
#include "config.h"

#include "daemon_util.h"

/* ------------------------------------------------------------- lifecycle */

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

/* With --shutdown-timeout 0, work still in flight at SIGTERM is abandoned:
 * its calls fail with EDISCONNECTED at once and the daemon exits 0. */
START_TEST(test_shutdown_abandons_work)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--shutdown-timeout", "0", NULL);
  hipd_call_t *sync_call = NULL;
  hipd_conn_t *conn;
  struct stat st;
  int rc;
  busy_t b;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  busy_start(&b, conn, BUSY_BYTES);
  ck_assert_int_eq(hipd_stream_synchronize_begin(conn, b.st, &sync_call), 0);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  rc = hipd_wait(sync_call);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "synchronize: %s", hipd_err_name(rc));
  rc = busy_join(&b);
  ck_assert_msg(rc == HIPD_EDISCONNECTED, "memset: %s", hipd_err_name(rc));
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  ck_assert(stat(d->socket, &st) != 0 && errno == ENOENT);
  ck_assert(harness_log_contains(d, "in-flight work abandoned"));
  hipd_close(conn);
  harness_free(d);
}
END_TEST

/* Send kernel.compile of a kernel that #includes @p path (a FIFO nobody
 * writes: the compiler blocks reading it) as request @p msgid. */
static void raw_compile_include(raw_t *r, uint32_t msgid, const char *path)
{
  char src[512];

  snprintf(src, sizeof(src),
           "#include \"%s\"\n"
           "extern \"C\" __global__ void k(int *p) { *p = 1; }\n",
           path);
  raw_request(r, msgid, "kernel.compile", 2);
  proto_pack_cstr(&r->pk, src);
  proto_pack_cstr(&r->pk, "k");
  ck_assert_int_eq(raw_flush(r), 0);
}

/* Wait until a process has FIFO @p path open for reading; @return a write
 * end (which keeps that reader blocked), or -1 after 60 s (a loaded machine). */
static int fifo_wait_reader(const char *path)
{
  long long deadline = harness_now_ms() + 60000;
  int fd;

  while ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
    if (errno != ENXIO || harness_now_ms() > deadline)
      return -1;
    harness_sleep_ms(20);
  }
  return fd;
}

/* SIGTERM while a compile runs, with --shutdown-timeout 1500: requests are
 * answered ESHUTDOWN (and close the descriptor they carried), the session
 * is closed at the deadline, the compiler is killed, and hipd exits 0
 * within the timeout and a bounded margin, not when the compile ends. */
START_TEST(test_shutdown_stops_compiles)
{
  const char *fifo = harness_temp_path("include.fifo");
  harness_daemon_t *d;
  char msg[256];
  int wfd, rfd;
  raw_t *r;

  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  d = harness_start("--devices", "cpu", "--shutdown-timeout", "1500",
                    "--cache-dir", "", NULL);
  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_compile_include(r, 1, fifo);
  wfd = fifo_wait_reader(fifo);
  ck_assert_msg(wfd >= 0, "the compiler never opened the FIFO");
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert(harness_log_wait(d, "stopping", 5000));
  ck_assert_int_eq(raw_with_pipe(r, 2, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_ESHUTDOWN);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ESHUTDOWN kept the descriptor");
  close(rfd);
  ck_assert_int_eq(harness_wait_exit(d, 1500 + 8000), 0);
  ck_assert(harness_log_contains(d, "compilers killed"));
  /* The compiler is gone: nobody reads the FIFO any more. */
  {
    struct pollfd p = {.fd = wfd, .events = POLLOUT};
    ck_assert_int_eq(poll(&p, 1, 5000), 1);
    ck_assert_msg(p.revents & POLLERR, "the FIFO still has a reader");
  }
  close(wfd);
  raw_close(r);
  unlink(fifo);
  harness_free(d);
}
END_TEST

/* A compile that cannot be stopped (here a compiler whose helper left its
 * process group and holds the output pipe; on a GPU, hiprtc in process) is
 * abandoned: hipd exits 0 shortly after the drain instead of waiting for
 * the compile's own timeout (60 s). */
START_TEST(test_shutdown_abandons_compile)
{
  const char *dir = harness_temp_path("cxx");
  char script[600], pidfile[600];
  harness_daemon_t *d;
  FILE *f;
  raw_t *r;
  long pid = 0;

  snprintf(script, sizeof(script), "%s.sh", dir);
  snprintf(pidfile, sizeof(pidfile), "%s.pid", dir);
  f = fopen(script, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "#!/bin/sh\n"
          "[ \"$1\" = --version ] && { echo 'stuck-cxx 1'; exit 0; }\n"
          "setsid sh -c 'echo $$ > %s; exec sleep 120' &\n"
          "exec sleep 120\n",
          pidfile);
  fclose(f);
  ck_assert_int_eq(chmod(script, 0700), 0);
  setenv("HIPD_CXX", script, 1);
  d = harness_start("--devices", "cpu", "--shutdown-timeout", "500",
                    "--cache-dir", "", NULL);
  unsetenv("HIPD_CXX");
  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_compile_include(r, 1, "/dev/null");
  for (int i = 0; i < 3000 && (f = fopen(pidfile, "r")) == NULL; i++)
    harness_sleep_ms(20);
  ck_assert_msg(f != NULL, "the compiler never ran");
  harness_sleep_ms(50);
  ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
  fclose(f);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_int_eq(harness_wait_exit(d, 500 + 8000), 0);
  ck_assert(harness_log_contains(d, "abandoned"));
  kill((pid_t)pid, SIGKILL);
  raw_close(r);
  unlink(script);
  unlink(pidfile);
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
  tcase_add_test(tc, test_shutdown_abandons_work);
  tcase_add_test(tc, test_shutdown_stops_compiles);
  tcase_add_test(tc, test_shutdown_abandons_compile);
  tcase_add_test(tc, test_stale_socket);
  tcase_add_test(tc, test_second_daemon);
  tcase_add_test(tc, test_socket_mode);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  SRunner *sr;
  int failed;

  harness_init("check_daemon_lifecycle");
  sr = srunner_create(daemon_lifecycle_suite());
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
