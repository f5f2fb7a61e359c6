/* tests/check_policy.c: tenants (PROTOCOL.md, "Tenants and access"),
 * against real daemons (tests/harness.c) on real
 * sockets, with clients that run as real other uids.
 *
 * As root the test makes two users and a group of its own (useradd,
 * groupadd; kept for the next run): hipd_pt_a, and hipd_pt_b, a
 * supplementary member of hipd_pt_g. Each client runs in a forked child
 * that became one of them (harness_run_as()); the daemons run as root, on
 * sockets the children may reach (--socket-mode 0666 in directories that
 * others may search but not list). Without root the whole program is
 * skipped (exit 77), and says so. */
#include "config.h"

#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"

#define USER_A "hipd_pt_a"
#define USER_B "hipd_pt_b"
#define GROUP_G "hipd_pt_g"

static uid_t uid_a, uid_b;

/* ------------------------------------------------------------ utilities */

/* In a child: fail with a message (returned through harness_run_as). */
#define REQUIRE(cond, ...)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      snprintf(msg, msglen, __VA_ARGS__);                                      \
      return -1;                                                               \
    }                                                                          \
  } while (0)

/* Start a daemon that other uids can reach, with the extra options. */
static harness_daemon_t *start_shared(const char *arg, ...)
{
  const char *args[32] = {"--socket-mode", "0666"};
  int n = 2;
  va_list ap;
  harness_daemon_t *d;

  va_start(ap, arg);
  for (const char *a = arg; a != NULL && n < 31; a = va_arg(ap, const char *))
    args[n++] = a;
  va_end(ap);
  args[n] = NULL;
  d = harness_startv(args);
  ck_assert_msg(d != NULL, "the daemon did not start");
  ck_assert_msg(harness_share_socket(d) == 0, "cannot open the directories");
  return d;
}

/* Run @p fn as @p user; fail the test with its message unless it passed. */
static void as_user(const char *user, int (*fn)(void *, char *, size_t),
                    void *arg)
{
  char msg[1024];
  int rc = harness_run_as(user, fn, arg, msg, sizeof(msg));

  ck_assert_msg(rc == 0, "as %s: %s", user, msg);
}

static int connect_as(const char *socket, hipd_conn_t **conn)
{
  int rc = hipd_connect2(socket, "check_policy", conn);

  if (rc == 0)
    hipd_set_timeout(*conn, 30000);
  return rc;
}

static int64_t info_get(hipd_info_t *info, const char *path)
{
  int64_t v = -1;

  (void)hipd_info_int(info, path, &v);
  return v;
}

/* -------------------------------------------------------------- tenants */

typedef struct {
  const char *socket;
  uid_t uid;
} ctx_t;

/* Two sessions of one uid: 600 KiB each fits the session quota (1 MiB)
 * but not the tenant's (1 MiB for both). */
static int tenant_quota_a(void *arg, char *msg, size_t msglen)
{
  ctx_t *x = arg;
  hipd_conn_t *c1 = NULL, *c2 = NULL;
  hipd_buffer_t b1, b2;
  hipd_info_t *info = NULL;
  char want[256];
  int rc;

  REQUIRE(connect_as(x->socket, &c1) == 0, "connect 1: %s",
          hipd_last_error(NULL));
  REQUIRE(connect_as(x->socket, &c2) == 0, "connect 2: %s",
          hipd_last_error(NULL));
  rc = hipd_mem_alloc(c1, 0, 600 * 1024, "byte", &b1);
  REQUIRE(rc == 0, "alloc in session 1: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c1));
  rc = hipd_mem_alloc(c2, 0, 600 * 1024, "byte", &b2);
  REQUIRE(rc == HIPD_EQUOTA, "alloc in session 2: %s, not EQUOTA (%s)",
          hipd_err_name(rc), hipd_last_error(c2));
  snprintf(want, sizeof(want),
           "614400 bytes would exceed tenant uid %u's quota of 1048576 bytes "
           "(614400 in use by its 2 sessions)",
           (unsigned)x->uid);
  REQUIRE(strstr(hipd_last_error(c2), want) != NULL,
          "message '%s' does not say '%s'", hipd_last_error(c2), want);
  /* A smaller one still fits; session.info reports the tenant's use. */
  rc = hipd_mem_alloc(c2, 0, 400 * 1024, "byte", &b2);
  REQUIRE(rc == 0, "alloc of 400 KiB: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c2));
  rc = hipd_session_info(c2, &info);
  REQUIRE(rc == 0, "session.info: %s", hipd_err_name(rc));
  REQUIRE(info_get(info, "tenant.uid") == (int64_t)x->uid, "tenant.uid %lld",
          (long long)info_get(info, "tenant.uid"));
  REQUIRE(info_get(info, "tenant.sessions") == 2, "tenant.sessions %lld",
          (long long)info_get(info, "tenant.sessions"));
  REQUIRE(info_get(info, "tenant.mem_used") == 1000 * 1024,
          "tenant.mem_used %lld",
          (long long)info_get(info, "tenant.mem_used"));
  hipd_info_free(info);
  /* Freeing in one session makes room in the other. */
  rc = hipd_mem_free(c1, b1);
  REQUIRE(rc == 0, "free: %s", hipd_err_name(rc));
  rc = hipd_mem_alloc(c2, 0, 600 * 1024, "byte", &b2);
  REQUIRE(rc == 0, "alloc after the free: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c2));
  hipd_close(c1);
  hipd_close(c2);
  return 0;
}

/* Another uid has a quota of its own; the session quota still applies. */
static int tenant_quota_b(void *arg, char *msg, size_t msglen)
{
  ctx_t *x = arg;
  hipd_conn_t *c = NULL;
  hipd_buffer_t b;
  int rc;

  REQUIRE(connect_as(x->socket, &c) == 0, "connect: %s",
          hipd_last_error(NULL));
  rc = hipd_mem_alloc(c, 0, 600 * 1024, "byte", &b);
  REQUIRE(rc == 0, "alloc: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  rc = hipd_mem_alloc(c, 0, 600 * 1024, "byte", &b);
  REQUIRE(rc == HIPD_EQUOTA && strstr(hipd_last_error(c),
                                      "this session's quota") != NULL,
          "second alloc: %s (%s), not the session quota", hipd_err_name(rc),
          hipd_last_error(c));
  hipd_close(c);
  return 0;
}

START_TEST(test_tenant_mem_quota)
{
  harness_daemon_t *d = start_shared("--mem-quota", "1M", "--tenant-mem-quota",
                                     "1M", NULL);
  ctx_t a = {d->socket, uid_a}, b = {d->socket, uid_b};
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;

  /* uid A holds its quota open in a child while B allocates: run A's two
   * sessions to the refusal, then B. */
  as_user(USER_A, tenant_quota_a, &a);
  as_user(USER_B, tenant_quota_b, &b);
  /* daemon.info reports the tenant limits. */
  ck_assert_int_eq(connect_as(d->socket, &c), 0);
  ck_assert_int_eq(hipd_daemon_info(c, &info), 0);
  ck_assert_int_eq(info_get(info, "limits.tenant_mem_quota"), 1 << 20);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_sessions"), 0);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_handles"), 0);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_streams"), 0);
  hipd_info_free(info);
  hipd_close(c);
  harness_free(d);
}
END_TEST

/* With --tenant-max-sessions 2: two sessions, the third refused. */
static int max_sessions_a(void *arg, char *msg, size_t msglen)
{
  ctx_t *x = arg;
  hipd_conn_t *c1 = NULL, *c2 = NULL, *c3 = NULL;
  int rc;

  REQUIRE(connect_as(x->socket, &c1) == 0, "connect 1: %s",
          hipd_last_error(NULL));
  REQUIRE(connect_as(x->socket, &c2) == 0, "connect 2: %s",
          hipd_last_error(NULL));
  rc = connect_as(x->socket, &c3);
  REQUIRE(rc == HIPD_ECONNECT, "connect 3: %s, not ECONNECT",
          hipd_err_name(rc));
  hipd_close(c2);
  /* A place freed is a place again (the close is seen at once, the
   * teardown at the daemon's next safe point: retry briefly). */
  for (int i = 0; i < 100 && (rc = connect_as(x->socket, &c3)) != 0; i++)
    harness_sleep_ms(20);
  REQUIRE(rc == 0, "connect after a close: %s", hipd_err_name(rc));
  hipd_close(c3);
  hipd_close(c1);
  return 0;
}

START_TEST(test_tenant_max_sessions)
{
  harness_daemon_t *d = start_shared("--tenant-max-sessions", "2", NULL);
  ctx_t a = {d->socket, uid_a};
  hipd_conn_t *r1 = NULL, *r2 = NULL;
  char want[128];

  /* root's two sessions do not count against uid A's. */
  ck_assert_int_eq(connect_as(d->socket, &r1), 0);
  ck_assert_int_eq(connect_as(d->socket, &r2), 0);
  as_user(USER_A, max_sessions_a, &a);
  snprintf(want, sizeof(want), "session closed: too many sessions for uid %u "
           "(limit 2)", (unsigned)uid_a);
  ck_assert_msg(harness_log_wait(d, want, 5000), "the log lacks '%s'", want);
  hipd_close(r1);
  hipd_close(r2);
  harness_free(d);
}
END_TEST

/* --tenant-max-streams 2 and --tenant-max-handles: across two sessions. */
static int tenant_objects_a(void *arg, char *msg, size_t msglen)
{
  ctx_t *x = arg;
  hipd_conn_t *c1 = NULL, *c2 = NULL;
  hipd_stream_t st;
  hipd_buffer_t b;
  int rc;

  REQUIRE(connect_as(x->socket, &c1) == 0, "connect 1: %s",
          hipd_last_error(NULL));
  REQUIRE(connect_as(x->socket, &c2) == 0, "connect 2: %s",
          hipd_last_error(NULL));
  REQUIRE(hipd_stream_create(c1, 0, &st) == 0, "stream 1: %s",
          hipd_last_error(c1));
  REQUIRE(hipd_stream_create(c2, 0, &st) == 0, "stream 2: %s",
          hipd_last_error(c2));
  rc = hipd_stream_create(c2, 0, &st);
  REQUIRE(rc == HIPD_ETOOMANY &&
              strstr(hipd_last_error(c2), "already has 2 streams in its 2 "
                                          "sessions (the tenant limit)"),
          "stream 3: %s (%s)", hipd_err_name(rc), hipd_last_error(c2));
  /* Two stream handles are held; the handle cap is 4. */
  REQUIRE(hipd_mem_alloc(c1, 0, 16, "byte", &b) == 0, "buffer 1: %s",
          hipd_last_error(c1));
  REQUIRE(hipd_mem_alloc(c2, 0, 16, "byte", &b) == 0, "buffer 2: %s",
          hipd_last_error(c2));
  rc = hipd_mem_alloc(c1, 0, 16, "byte", &b);
  REQUIRE(rc == HIPD_ETOOMANY, "buffer 3: %s, not ETOOMANY (%s)",
          hipd_err_name(rc), hipd_last_error(c1));
  hipd_close(c1);
  hipd_close(c2);
  return 0;
}

START_TEST(test_tenant_streams_handles)
{
  harness_daemon_t *d = start_shared("--tenant-max-streams", "2",
                                     "--tenant-max-handles", "4", NULL);
  ctx_t a = {d->socket, uid_a};

  as_user(USER_A, tenant_objects_a, &a);
  /* uid B's count starts from nothing. */
  as_user(USER_B, tenant_objects_a, &a);
  harness_free(d);
}
END_TEST

/* ----------------------------------------------------------------- main */

/* Make the test users and group (kept between runs). @return 0 or -1. */
static int make_users(void)
{
  struct passwd *pw;
  struct group *g;

  if (getgrnam(GROUP_G) == NULL &&
      system("groupadd " GROUP_G " >/dev/null 2>&1") != 0)
    return -1;
  if (getpwnam(USER_A) == NULL &&
      system("useradd -M -N -s /usr/sbin/nologin " USER_A
             " >/dev/null 2>&1") != 0)
    return -1;
  if (getpwnam(USER_B) == NULL &&
      system("useradd -M -N -s /usr/sbin/nologin " USER_B
             " >/dev/null 2>&1") != 0)
    return -1;
  /* B in G (supplementary), A not. */
  if (system("usermod -a -G " GROUP_G " " USER_B " >/dev/null 2>&1") != 0 ||
      system("gpasswd -d " USER_A " " GROUP_G " >/dev/null 2>&1; true") != 0)
    return -1;
  if ((pw = getpwnam(USER_A)) == NULL)
    return -1;
  uid_a = pw->pw_uid;
  if ((pw = getpwnam(USER_B)) == NULL)
    return -1;
  uid_b = pw->pw_uid;
  g = getgrnam(GROUP_G);
  return g != NULL && pw->pw_gid != g->gr_gid ? 0 : -1;
}

int main(void)
{
  Suite *s = suite_create("policy");
  TCase *tc;
  SRunner *sr;
  int failed;

  if (geteuid() != 0) {
    printf("check_policy: SKIP: needs root to create the test users "
           USER_A " and " USER_B " (useradd) and to run clients as them\n");
    return 77;
  }
  if (make_users() != 0) {
    printf("check_policy: SKIP: cannot create the test users " USER_A ", "
           USER_B " and group " GROUP_G " (useradd, groupadd, usermod)\n");
    return 77;
  }
  harness_init("policy");
  tc = tcase_create("tenants");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_tenant_mem_quota);
  tcase_add_test(tc, test_tenant_max_sessions);
  tcase_add_test(tc, test_tenant_streams_handles);
  suite_add_tcase(s, tc);
  sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
