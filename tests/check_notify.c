/* SPDX-License-Identifier: MIT */
/* tests/check_notify.c: hipd and its service manager, without systemd:
 * the sd_notify datagrams (READY=1 with MAINPID, STATUS lines that follow
 * the sessions, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1 at
 * SIGTERM) on a socket the test binds itself, sent by the listener only
 * (the sender's pid of every datagram, from SCM_CREDENTIALS); the
 * journal's priority prefixes when $JOURNAL_STREAM names stderr, workers'
 * lines included; SIGHUP, a reload (RELOADING=1, READY=1), which hipd
 * survives with its sessions and its socket. The shared helpers are in
 * tests/lib/daemon_util.h. */
#include "config.h"

#include "daemon_util.h"
#include "run.h"

#define NOTIFY_WAIT_MS 20000

/* The test's end of NOTIFY_SOCKET: a datagram socket that receives the
 * sender's credentials with each message. */
typedef struct {
  int fd;
  char env[128]; /* what NOTIFY_SOCKET is set to */
} notify_sock_t;

/* Bind a path socket, or with @p abstract an abstract one ("@name"). */
static void notify_sock_open(notify_sock_t *ns, int abstract)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  socklen_t len;
  int one = 1;

  ns->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(ns->fd, 0);
  if (abstract) {
    snprintf(ns->env, sizeof(ns->env), "@hipd-check-notify-%d-%lld",
             (int)getpid(), harness_now_ms());
    memcpy(a.sun_path, ns->env, strlen(ns->env));
    a.sun_path[0] = '\0';
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(ns->env));
  } else {
    snprintf(ns->env, sizeof(ns->env), "%s", harness_temp_path("notify"));
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", ns->env);
    len = sizeof(a);
  }
  ck_assert_msg(bind(ns->fd, (struct sockaddr *)&a, len) == 0, "bind %s: %s",
                ns->env, strerror(errno));
  ck_assert_int_eq(
      setsockopt(ns->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
  ck_assert_int_eq(setenv("NOTIFY_SOCKET", ns->env, 1), 0);
}

/* Receive datagrams until one contains @p needle (copied to @p out), for
 * @p timeout_ms at most. Every datagram must come from @p sender (the
 * daemon's main process: workers never notify). @return 1 if found. */
static int notify_wait(notify_sock_t *ns, pid_t sender, const char *needle,
                       char *out, size_t outlen, int timeout_ms)
{
  long long deadline = harness_now_ms() + timeout_ms;

  for (;;) {
    char buf[4096], cbuf[CMSG_SPACE(sizeof(struct ucred))];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cbuf,
                        .msg_controllen = sizeof(cbuf)};
    struct pollfd p = {.fd = ns->fd, .events = POLLIN};
    long long left = deadline - harness_now_ms();
    struct cmsghdr *c;
    pid_t from = -1;
    ssize_t n;

    if (left <= 0 || poll(&p, 1, (int)left) <= 0)
      return 0;
    n = recvmsg(ns->fd, &mh, MSG_DONTWAIT);
    if (n < 0)
      continue;
    buf[n] = '\0';
    for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        struct ucred cr;
        memcpy(&cr, CMSG_DATA(c), sizeof(cr));
        from = cr.pid;
      }
    ck_assert_msg(from == sender,
                  "notify message '%s' from pid %d, not hipd's main "
                  "process %d",
                  buf, (int)from, (int)sender);
    if (strstr(buf, needle) != NULL) {
      if (out != NULL)
        snprintf(out, outlen, "%s", buf);
      return 1;
    }
  }
}

/* Count the lines of @p d's log that contain @p needle. */
static int log_count(const harness_daemon_t *d, const char *needle)
{
  FILE *f = fopen(d->log, "r");
  char line[4096];
  int n = 0;

  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strstr(line, needle) != NULL)
      n++;
  fclose(f);
  return n;
}

/* ------------------------------------------------------------- sd_notify */

/* The listener (isolation uid): READY=1 with its pid, WATCHDOG=1 several
 * times, STATUS following a session's open and close, STOPPING=1 at
 * SIGTERM; nothing from the worker. */
START_TEST(test_notify_listener)
{
  notify_sock_t ns;
  harness_daemon_t *d;
  hipd_conn_t *conn;
  char msg[4096], want[64];

  notify_sock_open(&ns, 0);
  ck_assert_int_eq(setenv("WATCHDOG_USEC", "200000", 1), 0);
  d = harness_start("--devices", "cpu", NULL);
  ck_assert_ptr_nonnull(d);

  ck_assert_msg(
      notify_wait(&ns, d->pid, "READY=1", msg, sizeof(msg), NOTIFY_WAIT_MS),
      "no READY=1");
  snprintf(want, sizeof(want), "MAINPID=%d", (int)d->pid);
  ck_assert_msg(strstr(msg, want) != NULL, "READY without %s: '%s'", want, msg);
  for (int i = 0; i < 3; i++)
    ck_assert_msg(
        notify_wait(&ns, d->pid, "WATCHDOG=1", NULL, 0, NOTIFY_WAIT_MS),
        "WATCHDOG=1 number %d did not come", i + 1);
  ck_assert(harness_log_contains(d, "watchdog: WATCHDOG=1 every 100 ms"));

  conn = connect_to(d);
  ping_ok(conn);
  ck_assert_msg(notify_wait(&ns, d->pid, "STATUS=1 session, 1 tenant worker",
                            msg, sizeof(msg), NOTIFY_WAIT_MS),
                "no STATUS with the session");
  hipd_close(conn);
  ck_assert_msg(notify_wait(&ns, d->pid, "STATUS=0 sessions", msg, sizeof(msg),
                            NOTIFY_WAIT_MS),
                "no STATUS after the session closed");

  /* A reload (SIGHUP), as Type=notify-reload has it: RELOADING=1 with
   * the time, then READY=1. */
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  ck_assert_msg(
      notify_wait(&ns, d->pid, "RELOADING=1", msg, sizeof(msg), NOTIFY_WAIT_MS),
      "no RELOADING=1");
  ck_assert_msg(strstr(msg, "\nMONOTONIC_USEC=") != NULL,
                "RELOADING=1 without MONOTONIC_USEC: '%s'", msg);
  ck_assert_msg(notify_wait(&ns, d->pid, "READY=1", NULL, 0, NOTIFY_WAIT_MS),
                "no READY=1 after the reload");

  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  ck_assert_msg(notify_wait(&ns, d->pid, "STOPPING=1", NULL, 0, NOTIFY_WAIT_MS),
                "no STOPPING=1");
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  harness_free(d);
  close(ns.fd);
}
END_TEST

/* One process (isolation none), on an abstract socket: READY=1, STATUS
 * with sessions and devices; WATCHDOG_PID of another process: no
 * watchdog. */
START_TEST(test_notify_single_abstract)
{
  notify_sock_t ns;
  harness_daemon_t *d;
  hipd_conn_t *conn;
  char msg[4096];

  notify_sock_open(&ns, 1);
  ck_assert_int_eq(setenv("WATCHDOG_USEC", "200000", 1), 0);
  ck_assert_int_eq(setenv("WATCHDOG_PID", "1", 1), 0);
  d = harness_start("--devices", "cpu", "--isolation", "none", NULL);
  ck_assert_ptr_nonnull(d);
  ck_assert_msg(
      notify_wait(&ns, d->pid, "READY=1", msg, sizeof(msg), NOTIFY_WAIT_MS),
      "no READY=1 on %s", ns.env);
  conn = connect_to(d);
  ping_ok(conn);
  ck_assert_msg(notify_wait(&ns, d->pid, "STATUS=1 session, 1 device (0 lost)",
                            msg, sizeof(msg), NOTIFY_WAIT_MS),
                "no STATUS with the session");
  hipd_close(conn);
  ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
  /* Whatever came before STOPPING=1, none was a watchdog message. */
  for (;;) {
    ck_assert_msg(
        notify_wait(&ns, d->pid, "", msg, sizeof(msg), NOTIFY_WAIT_MS),
        "no STOPPING=1");
    ck_assert_msg(strstr(msg, "WATCHDOG=1") == NULL,
                  "WATCHDOG=1 for WATCHDOG_PID=1");
    if (strstr(msg, "STOPPING=1") != NULL)
      break;
  }
  ck_assert_int_eq(harness_wait_exit(d, 20000), 0);
  ck_assert(!harness_log_contains(d, "watchdog:"));
  harness_free(d);
  close(ns.fd);
}
END_TEST

/* --------------------------------------------------------------- journal */

/* Every line of @p d's log starts with a priority prefix, none with a
 * time. */
static void assert_all_prefixed(const harness_daemon_t *d)
{
  FILE *f = fopen(d->log, "r");
  char line[4096];
  int n = 0;

  ck_assert_ptr_nonnull(f);
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strstr(line, "hipd[") == NULL)
      continue; /* not a log line of hipd's (a tool's own output) */
    ck_assert_msg(line[0] == '<' && line[1] >= '0' && line[1] <= '7' &&
                      line[2] == '>',
                  "a line without a priority: %s", line);
    n++;
  }
  fclose(f);
  ck_assert_int_gt(n, 0);
}

/* stderr is the journal: "<6>" on info lines, the worker's too, "<3>" on
 * an error (a worker killed), no time stamps. */
START_TEST(test_journal_prefixes)
{
  harness_daemon_t *d;
  hipd_conn_t *conn;
  const char *p;
  int wpid;

  harness_journal_stream = 1;
  d = harness_start("--devices", "cpu", NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  ping_ok(conn);
  ck_assert(harness_log_wait(d, " ready (pid ", 10000));
  ck_assert(harness_log_contains(d, "<6>hipd["));
  {
    FILE *f = fopen(d->log, "r");
    char line[4096];
    wpid = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
      if ((p = strstr(line, " ready (pid ")) != NULL)
        wpid = atoi(p + strlen(" ready (pid "));
    if (f != NULL)
      fclose(f);
  }
  ck_assert_int_gt(wpid, 0);
  /* The worker's own lines are prefixed: it inherited JOURNAL_STREAM. */
  {
    char want[64];
    snprintf(want, sizeof(want), "<6>hipd[%d] info  hipd ", wpid);
    ck_assert_msg(harness_log_contains(d, want), "no worker line '%s'", want);
  }
  ck_assert_int_eq(kill(wpid, SIGKILL), 0);
  ck_assert(harness_log_wait(d, "was killed by signal", 10000));
  {
    FILE *f = fopen(d->log, "r");
    char line[4096];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
      if (strstr(line, "was killed by signal") != NULL)
        ck_assert_msg(strncmp(line, "<3>hipd[", 8) == 0, "error line: %s",
                      line);
    if (f != NULL)
      fclose(f);
  }
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  assert_all_prefixed(d);
  harness_free(d);
  harness_journal_stream = 0;
}
END_TEST

/* JOURNAL_STREAM naming another file (stderr was redirected since): plain
 * lines with times. */
START_TEST(test_journal_other_stream)
{
  harness_daemon_t *d;

  ck_assert_int_eq(setenv("JOURNAL_STREAM", "1:1", 1), 0);
  d = harness_start("--devices", "cpu", "--isolation", "none", NULL);
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_stop(d), 0);
  ck_assert(!harness_log_contains(d, "<6>"));
  ck_assert(harness_log_contains(d, "Z hipd["));
  harness_free(d);
}
END_TEST

/* ---------------------------------------------------------------- SIGHUP */

/* SIGHUP with a session open, listener and worker (isolation uid) or one
 * process: a reload (with no file, of the same options), logged by the
 * worker too, the session goes on, the socket
 * takes new connections, SIGTERM still stops hipd cleanly. */
static void sighup_survives(const char *isolation, int lines)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--isolation", isolation, NULL);
  hipd_conn_t *conn, *conn2;
  struct stat st;
  long long deadline;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  ping_ok(conn);
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  deadline = harness_now_ms() + 10000;
  while (log_count(d, "configuration reloaded") < lines &&
         harness_now_ms() < deadline)
    harness_sleep_ms(10);
  ck_assert_int_eq(log_count(d, "configuration reloaded"), lines);
  ck_assert_int_eq(harness_wait_exit(d, 200), -1); /* still running */
  ping_ok(conn);
  ck_assert_int_eq(stat(d->socket, &st), 0);
  conn2 = connect_to(d);
  ping_ok(conn2);
  ck_assert_int_eq(daemon_sessions(conn2), 2);
  hipd_close(conn2);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_sighup_listener)
{
  sighup_survives("uid", 2);
}
END_TEST

START_TEST(test_sighup_single)
{
  sighup_survives("none", 1);
}
END_TEST

static Suite *notify_suite(void)
{
  Suite *s = suite_create("notify");
  TCase *tc;

  tc = tcase_create("sd_notify");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_notify_listener);
  tcase_add_test(tc, test_notify_single_abstract);
  suite_add_tcase(s, tc);
  tc = tcase_create("journal");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_journal_prefixes);
  tcase_add_test(tc, test_journal_other_stream);
  suite_add_tcase(s, tc);
  tc = tcase_create("sighup");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_sighup_listener);
  tcase_add_test(tc, test_sighup_single);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_notify");
  failed = test_run(notify_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
