/* SPDX-License-Identifier: MIT */
/* tests/check_journal.c: hipd's lines as journal fields (daemon/log.c).
 *
 * The fields a line is sent with (log_journal_fields(): PRIORITY,
 * SYSLOG_IDENTIFIER, MESSAGE, SESSION, UID, DEVICE), checked on the
 * function itself; and, as root and where hipd is built with libsystemd,
 * a real daemon (listener and worker) whose stderr is a socket named by
 * $JOURNAL_STREAM, as under systemd, in a mount namespace of the test's
 * where /run/systemd/journal/socket is the test's own datagram socket (no
 * journald runs here): the session's lines arrive there with SESSION= and
 * UID=, from the sandboxed worker too. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "log.h"
#include "run.h"

/* The fields as one string, "A=1|B=2". */
static void joined(const struct iovec *iov, size_t n, char *out, size_t len)
{
  size_t used = 0;

  out[0] = '\0';
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%.*s", i ? "|" : "",
                             (int)iov[i].iov_len, (char *)iov[i].iov_base);
}

START_TEST(test_fields)
{
  struct iovec iov[LOG_JOURNAL_FIELDS];
  char line[256], buf[128], all[512];
  log_ctx_t ctx = {.sid = 12, .uid = 1001, .device = 0};
  log_ctx_t none = {.sid = 0, .uid = -1, .device = -1};
  size_t n;

  n = log_journal_fields(HLOG_WARN, &ctx, "quota exceeded", line, sizeof(line),
                         buf, sizeof(buf), iov);
  joined(iov, n, all, sizeof(all));
  ck_assert_str_eq(all, "PRIORITY=4|SYSLOG_IDENTIFIER=hipd|MESSAGE=[s12] "
                        "quota exceeded|SESSION=12|UID=1001|DEVICE=0");
  n = log_journal_fields(HLOG_DEBUG, &none, "x", line, sizeof(line), buf,
                         sizeof(buf), iov);
  joined(iov, n, all, sizeof(all));
  ck_assert_str_eq(all, "PRIORITY=7|SYSLOG_IDENTIFIER=hipd|MESSAGE=x");
  /* Root's uid is a uid; error and info priorities. */
  ctx = (log_ctx_t){.sid = 0, .uid = 0, .device = -1};
  n = log_journal_fields(HLOG_ERROR, &ctx, "e", line, sizeof(line), buf,
                         sizeof(buf), iov);
  joined(iov, n, all, sizeof(all));
  ck_assert_str_eq(all, "PRIORITY=3|SYSLOG_IDENTIFIER=hipd|MESSAGE=e|UID=0");
  n = log_journal_fields(HLOG_INFO, &none, "i", line, sizeof(line), buf,
                         sizeof(buf), iov);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(memcmp(iov[0].iov_base, "PRIORITY=6", 10), 0);
  /* A message longer than the line is cut, never overrun. */
  {
    char big[600];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    n = log_journal_fields(HLOG_INFO, &none, big, line, sizeof(line), buf,
                           sizeof(buf), iov);
    ck_assert_int_eq(iov[2].iov_len, sizeof(line) - 1);
  }
}
END_TEST

#ifdef HAVE_SYSTEMD
/* What the test's journal received: a thread reads the socket at once,
 * as journald does (its queue holds a few datagrams: a sender that finds
 * it full waits). */
#define JOURNAL_MAX 512
static struct {
  pthread_mutex_t lock;
  char *dgram[JOURNAL_MAX];
  int n;
  int fd;
} J = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *journal_reader(void *arg)
{
  char buf[8192];

  (void)arg;
  for (;;) {
    ssize_t n = recv(J.fd, buf, sizeof(buf) - 1, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return NULL;
    buf[n] = '\0';
    pthread_mutex_lock(&J.lock);
    if (J.n < JOURNAL_MAX)
      J.dgram[J.n++] = strdup(buf);
    pthread_mutex_unlock(&J.lock);
  }
}

/* Wait until a datagram has all of @p want (NULL-ended), for 20 s at
 * most; copy it to @p got. @return 1 if one did. */
static int journal_wait(const char *const *want, char *got, size_t gotlen)
{
  long long deadline = harness_now_ms() + 20000;

  do {
    pthread_mutex_lock(&J.lock);
    for (int i = 0; i < J.n; i++) {
      int all = J.dgram[i] != NULL;
      for (int k = 0; all && want[k] != NULL; k++)
        if (strstr(J.dgram[i], want[k]) == NULL)
          all = 0;
      if (all) {
        snprintf(got, gotlen, "%s", J.dgram[i]);
        pthread_mutex_unlock(&J.lock);
        return 1;
      }
    }
    pthread_mutex_unlock(&J.lock);
    harness_sleep_ms(10);
  } while (harness_now_ms() < deadline);
  return 0;
}

START_TEST(test_daemon_fields)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  const char *bin = getenv("HIPD_BIN") ? getenv("HIPD_BIN") : "./hipd";
  const char *sock = harness_temp_path("hipd.sock");
  int jfd, pair[2], status;
  hipd_conn_t *conn = NULL;
  char got[8192], sid[64], js[64];
  struct stat st;
  pid_t pid;

  /* The journal's socket, in a /run/systemd of this test's own. */
  ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
  ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
  ck_assert_int_eq(mount("tmpfs", "/run/systemd", "tmpfs", 0, "mode=0755"), 0);
  ck_assert_int_eq(mkdir("/run/systemd/journal", 0755), 0);
  jfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(jfd, 0);
  snprintf(a.sun_path, sizeof(a.sun_path), "/run/systemd/journal/socket");
  ck_assert_int_eq(bind(jfd, (struct sockaddr *)&a, sizeof(a)), 0);
  /* The workers (the account hipd) log too. */
  ck_assert_int_eq(chmod(a.sun_path, 0666), 0);
  {
    pthread_t t;
    J.fd = jfd;
    ck_assert_int_eq(pthread_create(&t, NULL, journal_reader, NULL), 0);
    pthread_detach(t);
  }

  /* stderr a stream socket, as systemd connects it to journald. */
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ck_assert_int_eq(fstat(pair[1], &st), 0);
  snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(pair[1], 2);
    setenv("JOURNAL_STREAM", js, 1);
    execl(bin, bin, "--socket", sock, "--no-config", "--devices", "cpu",
          "--cache-dir", "", (char *)NULL);
    _exit(127);
  }
  close(pair[1]);
  for (int i = 0; i < 2000 && conn == NULL; i++) {
    if (hipd_connect2(sock, "check_journal", &conn) != 0) {
      conn = NULL;
      harness_sleep_ms(10);
    }
  }
  ck_assert_msg(conn != NULL, "hipd did not start");
  {
    /* The worker's line of the session's open: structured, with the
     * session (the id of MESSAGE's "[sN]") and the peer's uid (root: 0). */
    const char *want[] = {
        "MESSAGE=[s",   "] session opened",         "SESSION=", "UID=0\n",
        "PRIORITY=6\n", "SYSLOG_IDENTIFIER=hipd\n", NULL};
    unsigned long long id = 0;
    ck_assert_msg(journal_wait(want, got, sizeof(got)),
                  "no 'session opened' datagram with SESSION= and UID=0");
    ck_assert_int_eq(sscanf(strstr(got, "MESSAGE=[s"), "MESSAGE=[s%llu]", &id),
                     1);
    snprintf(sid, sizeof(sid), "SESSION=%llu\n", id);
    ck_assert_msg(strstr(got, sid) != NULL, "no %s in '%s'", sid, got);
  }
  hipd_close(conn);
  {
    const char *want[] = {"] session closed", sid, "UID=0\n", NULL};
    ck_assert_msg(journal_wait(want, got, sizeof(got)),
                  "no 'session closed' datagram with %s", sid);
  }
  kill(pid, SIGTERM);
  {
    /* The listener's last line. */
    const char *want[] = {"MESSAGE=stopped\n", "PRIORITY=6\n", NULL};
    ck_assert_msg(journal_wait(want, got, sizeof(got)),
                  "no 'stopped' datagram");
  }
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(pair[0]);
}
END_TEST
#endif

int main(void)
{
  Suite *s = suite_create("journal");
  TCase *tc = tcase_create("fields");
  int failed;

  harness_init("check_journal");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_fields);
#ifdef HAVE_SYSTEMD
  if (geteuid() == 0)
    tcase_add_test(tc, test_daemon_fields);
  else
    printf("check_journal: the daemon's fields need root (a mount "
           "namespace for the journal's socket): not checked\n");
#else
  printf("check_journal: built without libsystemd: lines keep their "
         "<N> prefixes; the daemon's fields are not checked\n");
#endif
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
