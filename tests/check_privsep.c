/* SPDX-License-Identifier: MIT */
/* tests/check_privsep.c: the process model of --isolation (docs/
 * ARCHITECTURE.md, "Processes"; SECURITY.md), against real daemons
 * (tests/lib/harness.c) with clients that run as real other uids.
 *
 * As root the test makes (or reuses) the users hipd_ps_a and hipd_ps_b;
 * each client runs in a forked child that became one of them. What is
 * checked: each uid's sessions are served by a worker process of their
 * own, running as hipd's account, never the listener; with --isolation
 * session every connection has its own; a worker that dies (killed by
 * SIGKILL, as by a fault) costs its own tenant's sessions only, and the
 * tenant's next connection gets a fresh worker; an idle worker exits
 * after --worker-linger; --isolation none serves from the one process.
 * Without root the program is skipped (exit 77), and says so. */
#include "config.h"

#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "testutil.h"
#include "users.h"

#define USER_A "hipd_ps_a"
#define USER_B "hipd_ps_b"

static uid_t uid_a, uid_b, uid_hipd;

/* What daemon.info says of the process serving a session. */
typedef struct {
  int64_t pid, uid, tenant, daemon_pid;
  int64_t spin_cpus; /* spin.cpus */
  int spin_shared;   /* spin.shared */
  char process[32];
} served_t;

static int served_by(hipd_conn_t *c, served_t *out)
{
  hipd_info_t *info = NULL;
  const char *p = NULL;
  size_t plen = 0;
  int rc = hipd_daemon_info(c, &info);

  if (rc != 0)
    return rc;
  out->pid = info_get(info, "isolation.pid");
  out->uid = info_get(info, "isolation.uid");
  out->tenant = info_get(info, "isolation.tenant");
  out->daemon_pid = info_get(info, "pid");
  out->spin_cpus = info_get(info, "spin.cpus");
  out->spin_shared = 0;
  {
    int b = 0;
    if (hipd_info_bool(info, "spin.shared", &b) == 0)
      out->spin_shared = b;
  }
  if (hipd_info_str(info, "isolation.process", &p, &plen) == 0 && p != NULL)
    snprintf(out->process, sizeof(out->process), "%.*s", (int)plen, p);
  else
    out->process[0] = '\0';
  hipd_info_free(info);
  return 0;
}

/* A checked workload: a buffer written and read back. */
static int workload(hipd_conn_t *c, unsigned seed, char *msg, size_t msglen)
{
  unsigned char in[4096], out[4096];
  hipd_buffer_t b;
  int rc;

  for (size_t i = 0; i < sizeof(in); i++)
    in[i] = (unsigned char)(seed * 31 + i);
  rc = hipd_mem_alloc(c, 0, sizeof(in), "byte", &b);
  REQUIRE(rc == 0, "alloc: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  rc = hipd_mem_write(c, b, 0, in, sizeof(in));
  REQUIRE(rc == 0, "write: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  rc = hipd_mem_read(c, b, 0, out, sizeof(out));
  REQUIRE(rc == 0, "read: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  REQUIRE(memcmp(in, out, sizeof(in)) == 0, "read back other bytes");
  rc = hipd_mem_free(c, b);
  REQUIRE(rc == 0, "free: %s", hipd_err_name(rc));
  return 0;
}

typedef struct {
  const char *socket;
  served_t served[2]; /* what two sessions were served by */
  int nconn;
} probe_t;

/* Open two sessions, note who serves each, run the workload in both. */
static int probe_fn(void *arg, char *msg, size_t msglen)
{
  probe_t *x = arg;
  hipd_conn_t *c[2] = {NULL, NULL};
  int rc = 0;

  for (int i = 0; i < x->nconn; i++) {
    REQUIRE(hipd_connect2(x->socket, "check_privsep", &c[i]) == 0,
            "connect: %s", hipd_last_error(NULL));
    hipd_set_timeout(c[i], 30000);
    REQUIRE(served_by(c[i], &x->served[i]) == 0, "daemon.info: %s",
            hipd_last_error(c[i]));
    if ((rc = workload(c[i], (unsigned)i, msg, msglen)) != 0)
      break;
  }
  for (int i = 0; i < x->nconn; i++)
    if (c[i] != NULL)
      hipd_close(c[i]);
  return rc;
}

/* Run probe_fn as @p user (NULL: root, here) in a forked child that
 * became that user, and bring back who served its sessions. */
static void probe_as(const char *user, probe_t *x)
{
  char msg[1024] = "";
  int fds[2], status;
  pid_t pid;

  if (user == NULL) {
    ck_assert_msg(probe_fn(x, msg, sizeof(msg)) == 0, "as root: %s", msg);
    return;
  }
  ck_assert(pipe(fds) == 0);
  pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    int rc = -1;
    close(fds[0]);
    if (harness_become(user) == 0)
      rc = probe_fn(x, msg, sizeof(msg));
    else
      snprintf(msg, sizeof(msg), "cannot become %s", user);
    if (write(fds[1], &rc, sizeof(rc)) != sizeof(rc) ||
        write(fds[1], x->served, sizeof(x->served)) != sizeof(x->served) ||
        write(fds[1], msg, sizeof(msg)) != sizeof(msg))
      _exit(2);
    _exit(0);
  }
  close(fds[1]);
  {
    int rc = -1;
    ck_assert(read(fds[0], &rc, sizeof(rc)) == (ssize_t)sizeof(rc));
    ck_assert(read(fds[0], x->served, sizeof(x->served)) ==
              (ssize_t)sizeof(x->served));
    ck_assert(read(fds[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
    close(fds[0]);
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(rc == 0, "as %s: %s", user, msg);
  }
}

/* /proc/PID/oom_score_adj, or -10000 if it cannot be read. */
static int oom_adj_of(pid_t pid)
{
  char path[64];
  int v = -10000;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
  if ((f = fopen(path, "r")) != NULL) {
    if (fscanf(f, "%d", &v) != 1)
      v = -10000;
    fclose(f);
  }
  return v;
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_worker_per_uid)
{
  harness_daemon_t *d = users_start_shared(NULL);
  probe_t a = {.socket = d->socket, .nconn = 2};
  probe_t b = {.socket = d->socket, .nconn = 1};

  probe_as(USER_A, &a);
  probe_as(USER_B, &b);
  /* Each uid has a worker; both of A's sessions share A's. */
  ck_assert_str_eq(a.served[0].process, "worker");
  ck_assert_int_eq(a.served[0].pid, a.served[1].pid);
  ck_assert_int_ne(a.served[0].pid, b.served[0].pid);
  ck_assert_int_ne(a.served[0].pid, d->pid);
  ck_assert_int_ne(b.served[0].pid, d->pid);
  /* Clients still see hipd's own pid. */
  ck_assert_int_eq(a.served[0].daemon_pid, d->pid);
  /* The workers run as hipd's account and serve their own tenant. */
  ck_assert_int_eq(a.served[0].uid, uid_hipd);
  ck_assert_int_eq(b.served[0].uid, uid_hipd);
  ck_assert_int_eq(a.served[0].tenant, uid_a);
  ck_assert_int_eq(b.served[0].tenant, uid_b);
  /* The OOM killer picks a tenant's worker before the listener. */
  ck_assert_int_lt(oom_adj_of(d->pid), 500);
  ck_assert_int_eq(oom_adj_of((pid_t)a.served[0].pid), 500);
  ck_assert_int_eq(oom_adj_of((pid_t)b.served[0].pid), 500);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_worker_per_session)
{
  harness_daemon_t *d =
      users_start_shared("--isolation", "session", "--spin-cpus", "3", NULL);
  probe_t a = {.socket = d->socket, .nconn = 2};

  probe_as(USER_A, &a);
  ck_assert_str_eq(a.served[0].process, "worker");
  ck_assert_int_ne(a.served[0].pid, a.served[1].pid);
  ck_assert_int_eq(a.served[0].tenant, uid_a);
  /* Both workers poll within the listener's one budget. */
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(a.served[i].spin_cpus, 3);
    ck_assert_msg(a.served[i].spin_shared,
                  "session %d: its worker has no "
                  "share of the spin budget",
                  i);
  }
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_isolation_none)
{
  harness_daemon_t *d = users_start_shared("--isolation", "none", NULL);
  probe_t r = {.socket = d->socket, .nconn = 1};

  probe_as(NULL, &r);
  ck_assert_str_eq(r.served[0].process, "single");
  ck_assert_int_eq(r.served[0].pid, d->pid);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* B's session is open (as root) while A's worker is killed: B goes on,
 * A's next connection gets a fresh worker. */
START_TEST(test_worker_death_contained)
{
  harness_daemon_t *d = users_start_shared(NULL);
  probe_t a = {.socket = d->socket, .nconn = 1};
  probe_t a2 = {.socket = d->socket, .nconn = 1};
  hipd_conn_t *b = NULL;
  served_t sb;
  char msg[1024];
  char want[128];

  ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &b), 0);
  hipd_set_timeout(b, 30000);
  ck_assert_int_eq(served_by(b, &sb), 0);
  ck_assert_msg(workload(b, 1, msg, sizeof(msg)) == 0, "%s", msg);
  probe_as(USER_A, &a);
  ck_assert_int_ne(a.served[0].pid, sb.pid);
  ck_assert_int_gt(a.served[0].pid, 1);
  ck_assert_int_eq(kill((pid_t)a.served[0].pid, SIGKILL), 0);
  snprintf(want, sizeof(want), "(pid %lld) was killed by signal 9",
           (long long)a.served[0].pid);
  ck_assert_msg(harness_log_wait(d, want, 10000) == 1,
                "the listener did not report the worker's death");
  /* Root's session, in another worker, did not notice. */
  ck_assert_msg(workload(b, 2, msg, sizeof(msg)) == 0, "%s", msg);
  probe_as(USER_A, &a2);
  ck_assert_int_ne(a2.served[0].pid, a.served[0].pid);
  hipd_close(b);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_worker_linger)
{
  harness_daemon_t *d = users_start_shared("--worker-linger", "100", NULL);
  probe_t a = {.socket = d->socket, .nconn = 1};
  char want[128];

  probe_as(USER_A, &a);
  snprintf(want, sizeof(want), "worker of uid %u (pid %lld) exited",
           (unsigned)uid_a, (long long)a.served[0].pid);
  ck_assert_msg(harness_log_wait(d, want, 10000) == 1,
                "the idle worker did not exit");
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A worker's account that does not exist stops hipd at start, naming it. */
START_TEST(test_bad_worker_account)
{
  const char *args[] = {"--devices", "cpu", "--user", "hipd_no_such_user",
                        NULL};
  harness_daemon_t *d = harness_spawn(NULL, args);

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_wait_exit(d, 20000), 1);
  ck_assert(harness_log_contains(d, "hipd_no_such_user"));
  harness_free(d);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("privsep");
  TCase *tc;
  struct passwd *pw;
  int failed;

  if (geteuid() != 0) {
    printf("check_privsep: SKIP: needs root to create the test users " USER_A
           " and " USER_B " and to run clients as them\n");
    return 77;
  }
  setenv("HIPD_TEST_TMP", "/tmp", 1);
  harness_init("privsep");
  if (users_make(USER_A, &uid_a, NULL) != 0 ||
      users_make(USER_B, &uid_b, NULL) != 0 ||
      (pw = getpwnam("hipd")) == NULL) {
    printf("check_privsep: SKIP: cannot create the test users (useradd)\n");
    harness_fini();
    return 77;
  }
  uid_hipd = pw->pw_uid;
  tc = tcase_create("workers");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_worker_per_uid);
  tcase_add_test(tc, test_worker_per_session);
  tcase_add_test(tc, test_isolation_none);
  tcase_add_test(tc, test_worker_death_contained);
  tcase_add_test(tc, test_worker_linger);
  tcase_add_test(tc, test_bad_worker_account);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
