/* SPDX-License-Identifier: MIT */
/* tests/check_policy.c: tenants and the access policy (PROTOCOL.md,
 * "Tenants and access"), against real daemons (tests/lib/harness.c) on real
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
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "rpc.h"
#include "testutil.h"
#include "users.h"

#define USER_A "hipd_pt_a"
#define USER_B "hipd_pt_b"
#define GROUP_G "hipd_pt_g"

static uid_t uid_a, uid_b;

/* ------------------------------------------------------------ utilities */

static int connect_as(const char *socket, hipd_conn_t **conn)
{
  int rc = hipd_connect2(socket, "check_policy", conn);

  if (rc == 0)
    hipd_set_timeout(*conn, 30000);
  return rc;
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
          "tenant.mem_used %lld", (long long)info_get(info, "tenant.mem_used"));
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

  REQUIRE(connect_as(x->socket, &c) == 0, "connect: %s", hipd_last_error(NULL));
  rc = hipd_mem_alloc(c, 0, 600 * 1024, "byte", &b);
  REQUIRE(rc == 0, "alloc: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  rc = hipd_mem_alloc(c, 0, 600 * 1024, "byte", &b);
  REQUIRE(rc == HIPD_EQUOTA &&
              strstr(hipd_last_error(c), "this session's quota") != NULL,
          "second alloc: %s (%s), not the session quota", hipd_err_name(rc),
          hipd_last_error(c));
  hipd_close(c);
  return 0;
}

START_TEST(test_tenant_mem_quota)
{
  harness_daemon_t *d =
      users_start_shared("--mem-quota", "1M", "--tenant-mem-quota", "1M", NULL);
  ctx_t a = {d->socket, uid_a}, b = {d->socket, uid_b};
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;

  /* uid A holds its quota open in a child while B allocates: run A's two
   * sessions to the refusal, then B. */
  users_as(USER_A, tenant_quota_a, &a);
  users_as(USER_B, tenant_quota_b, &b);
  /* daemon.info reports the tenant limits. */
  ck_assert_int_eq(connect_as(d->socket, &c), 0);
  ck_assert_int_eq(hipd_daemon_info(c, &info), 0);
  ck_assert_int_eq(info_get(info, "limits.tenant_mem_quota"), 1 << 20);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_sessions"), 512);
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

/* max_sessions_a() as uid A on @p d, and the closing logged. */
static void max_sessions_run(harness_daemon_t *d)
{
  ctx_t a = {d->socket, uid_a};
  char want[128];

  users_as(USER_A, max_sessions_a, &a);
  snprintf(want, sizeof(want),
           "session closed: too many sessions for uid %u "
           "(limit 2)",
           (unsigned)uid_a);
  ck_assert_msg(harness_log_wait(d, want, 5000), "the log lacks '%s'", want);
}

START_TEST(test_tenant_max_sessions)
{
  harness_daemon_t *d = users_start_shared("--tenant-max-sessions", "2", NULL);
  hipd_conn_t *r1 = NULL, *r2 = NULL;

  /* root's two sessions do not count against uid A's. */
  ck_assert_int_eq(connect_as(d->socket, &r1), 0);
  ck_assert_int_eq(connect_as(d->socket, &r2), 0);
  max_sessions_run(d);
  hipd_close(r1);
  hipd_close(r2);
  harness_free(d);
}
END_TEST

/* The same with --isolation session: each session has a worker of its
 * own, which sees only it, so the listener counts the uid's sessions. */
START_TEST(test_tenant_max_sessions_session_workers)
{
  harness_daemon_t *d = users_start_shared("--tenant-max-sessions", "2",
                                           "--isolation", "session", NULL);

  max_sessions_run(d);
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
  harness_daemon_t *d = users_start_shared("--tenant-max-streams", "2",
                                           "--tenant-max-handles", "4", NULL);
  ctx_t a = {d->socket, uid_a};

  users_as(USER_A, tenant_objects_a, &a);
  /* uid B's count starts from nothing. */
  users_as(USER_B, tenant_objects_a, &a);
  harness_free(d);
}
END_TEST

/* --tenant-device-share: one uid's buffers on one device stop at the
 * share (here 1% of the CPU device's memory), counted across its sessions;
 * another uid has a share of its own. */
typedef struct {
  const char *socket;
  uid_t uid;
  uint64_t share; /* bytes: 1% of device 0 */
} share_ctx_t;

static int device_share_fn(void *arg, char *msg, size_t msglen)
{
  share_ctx_t *x = arg;
  hipd_conn_t *c1 = NULL, *c2 = NULL;
  hipd_buffer_t b1, b2;
  uint64_t part = x->share / 4 * 3;
  int rc;

  REQUIRE(connect_as(x->socket, &c1) == 0, "connect 1: %s",
          hipd_last_error(NULL));
  REQUIRE(connect_as(x->socket, &c2) == 0, "connect 2: %s",
          hipd_last_error(NULL));
  rc = hipd_mem_alloc(c1, 0, part, "byte", &b1);
  REQUIRE(rc == 0, "alloc of 3/4 of the share: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c1));
  rc = hipd_mem_alloc(c2, 0, part, "byte", &b2);
  REQUIRE(rc == HIPD_EQUOTA &&
              strstr(hipd_last_error(c2), "--tenant-device-share") != NULL,
          "a second 3/4 in another session: %s (%s), not EQUOTA",
          hipd_err_name(rc), hipd_last_error(c2));
  rc = hipd_mem_alloc(c2, 0, x->share / 8, "byte", &b2);
  REQUIRE(rc == 0, "an eighth more: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c2));
  /* Freed: room again. */
  REQUIRE(hipd_mem_free(c1, b1) == 0, "free: %s", hipd_last_error(c1));
  rc = hipd_mem_alloc(c2, 0, part, "byte", &b1);
  REQUIRE(rc == 0, "3/4 after the free: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c2));
  hipd_close(c1);
  hipd_close(c2);
  return 0;
}

START_TEST(test_tenant_device_share)
{
  harness_daemon_t *d;
  share_ctx_t a, b;
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;
  uint64_t total;

  for (int mode = 0; mode < 2; mode++) {
    d = users_start_shared("--tenant-device-share", "1", "--isolation",
                           mode == 0 ? "uid" : "session", NULL);
    ck_assert_int_eq(connect_as(d->socket, &c), 0);
    ck_assert_int_eq(hipd_daemon_info(c, &info), 0);
    ck_assert_int_eq(info_get(info, "limits.tenant_device_share"), 1);
    hipd_info_free(info);
    ck_assert_int_eq(hipd_device_get(c, 0, &info), 0);
    total = (uint64_t)info_get(info, "capabilities.total_global_mem");
    hipd_info_free(info);
    hipd_close(c);
    a = (share_ctx_t){d->socket, uid_a, total / 100};
    b = (share_ctx_t){d->socket, uid_b, total / 100};
    users_as(USER_A, device_share_fn, &a);
    users_as(USER_B, device_share_fn, &b);
    harness_free(d);
  }
}
END_TEST

/* The tenant limits with --isolation session: each session has a worker
 * of its own, and the uid's totals are on the tenant page all of them
 * share (tenants.h), so the same two-session checks hold. */
START_TEST(test_tenant_limits_session_workers)
{
  harness_daemon_t *d =
      users_start_shared("--isolation", "session", "--mem-quota", "1M",
                         "--tenant-mem-quota", "1M", NULL);
  ctx_t a = {d->socket, uid_a}, b = {d->socket, uid_b};

  users_as(USER_A, tenant_quota_a, &a);
  users_as(USER_B, tenant_quota_b, &b);
  harness_free(d);
  d = users_start_shared("--isolation", "session", "--tenant-max-streams", "2",
                         "--tenant-max-handles", "4", NULL);
  a.socket = d->socket;
  users_as(USER_A, tenant_objects_a, &a);
  users_as(USER_B, tenant_objects_a, &a);
  harness_free(d);
}
END_TEST

/* A session worker that dies holding memory leaves no count behind: the
 * listener takes its slot's counts off its uid's totals. */
START_TEST(test_tenant_page_worker_death)
{
  harness_daemon_t *d = users_start_shared("--isolation", "session",
                                           "--tenant-mem-quota", "1M", NULL);
  hipd_conn_t *c1 = NULL, *c2 = NULL;
  hipd_buffer_t b1, b2;
  hipd_info_t *info = NULL;
  char want[96];
  int64_t pid;

  ck_assert_int_eq(connect_as(d->socket, &c1), 0);
  ck_assert_int_eq(connect_as(d->socket, &c2), 0);
  ck_assert_int_eq(hipd_mem_alloc(c1, 0, 600 * 1024, "byte", &b1), 0);
  ck_assert_int_eq(hipd_mem_alloc(c2, 0, 600 * 1024, "byte", &b2), HIPD_EQUOTA);
  ck_assert_int_eq(hipd_daemon_info(c1, &info), 0);
  pid = info_get(info, "isolation.pid");
  hipd_info_free(info);
  ck_assert_int_gt(pid, 1);
  ck_assert_int_ne(pid, d->pid);
  ck_assert_int_eq(kill((pid_t)pid, SIGKILL), 0);
  snprintf(want, sizeof(want), "(pid %lld) was killed by signal 9",
           (long long)pid);
  ck_assert_int_eq(harness_log_wait(d, want, 10000), 1);
  /* The listener gave the slot back in the same callback that logged. */
  ck_assert_int_eq(hipd_mem_alloc(c2, 0, 600 * 1024, "byte", &b2), 0);
  ck_assert_int_eq(hipd_session_info(c2, &info), 0);
  ck_assert_int_eq(info_get(info, "tenant.mem_used"), 600 * 1024);
  ck_assert_int_eq(info_get(info, "tenant.sessions"), 1);
  hipd_info_free(info);
  hipd_close(c1);
  hipd_close(c2);
  harness_free(d);
}
END_TEST

/* --------------------------------------------------------------- policy */

/* Connects and pings. */
static int connect_ok(void *arg, char *msg, size_t msglen)
{
  ctx_t *x = arg;
  hipd_conn_t *c = NULL;
  char out[8];
  size_t n;
  int rc = connect_as(x->socket, &c);

  REQUIRE(rc == 0, "connect: %s (%s)", hipd_err_name(rc),
          hipd_last_error(NULL));
  rc = hipd_ping(c, "hi", 2, out, sizeof(out), &n);
  REQUIRE(rc == 0, "ping: %s", hipd_err_name(rc));
  hipd_close(c);
  return 0;
}

typedef struct {
  const char *socket;
  char want[256]; /* the refusal's message */
} refused_t;

/* Is refused with EPERM and the message. */
static int connect_refused(void *arg, char *msg, size_t msglen)
{
  refused_t *x = arg;
  hipd_conn_t *c = NULL;
  int rc = connect_as(x->socket, &c);

  REQUIRE(rc == HIPD_EPERM, "connect: %s, not EPERM (%s)", hipd_err_name(rc),
          hipd_last_error(NULL));
  REQUIRE(strstr(hipd_last_error(NULL), x->want) != NULL,
          "message '%s' does not say '%s'", hipd_last_error(NULL), x->want);
  return 0;
}

START_TEST(test_allow_users)
{
  harness_daemon_t *d = users_start_shared("--allow-users", USER_A ",0", NULL);
  ctx_t a = {d->socket, uid_a};
  refused_t r = {d->socket, ""};
  hipd_conn_t *c = NULL;
  char logline[300];

  users_as(USER_A, connect_ok, &a);
  snprintf(r.want, sizeof(r.want),
           "hello: uid %u (" USER_B ") is not allowed by --allow-users " USER_A
           ",0",
           (unsigned)uid_b);
  users_as(USER_B, connect_refused, &r);
  snprintf(logline, sizeof(logline), "session closed: not allowed: uid %u (",
           (unsigned)uid_b);
  ck_assert_msg(harness_log_wait(d, logline, 5000), "the log lacks '%s'",
                logline);
  /* root is listed here; hipd's own uid (root) would be allowed anyway. */
  ck_assert_int_eq(connect_as(d->socket, &c), 0);
  hipd_close(c);
  harness_free(d);
}
END_TEST

/* A connection to @p path that says nothing, or -1. */
static int silent_connect(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* What a refused peer reads without sending anything: the bytes until the
 * daemon closes (EOF or reset), at most @p cap, within @p timeout_ms.
 * @return the count, or -1 if the connection is still open then. */
static long read_until_closed(int fd, char *buf, size_t cap, int timeout_ms)
{
  long long deadline = harness_now_ms() + timeout_ms;
  size_t len = 0;

  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    long long left = deadline - harness_now_ms();
    char sink[256];
    ssize_t n;

    if (left <= 0 || poll(&p, 1, (int)left) != 1)
      return -1;
    if (len < cap)
      n = read(fd, buf + len, cap - len);
    else
      n = read(fd, sink, sizeof(sink));
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return (long)len;
    if (n < 0 && errno != EINTR && errno != EAGAIN)
      return -1;
    if (n > 0 && len < cap)
      len += (size_t)n;
  }
}

/* Is buf[0, len) exactly the notification [2, "session.refused", [error]]
 * with EPERM and a message that says @p want? @return 1, or 0 with @p why
 * saying what it is instead. */
static int is_refusal(const char *buf, size_t len, const char *want, char *why,
                      size_t whylen)
{
  proto_limits_t lim;
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = "", *text;
  size_t need, tlen;
  long long n;
  int code, ok = 0;

  proto_limits_default(&lim);
  n = proto_frame_scan(&lim, (const uint8_t *)buf, len, &need, &reason);
  if (n <= 0 || (size_t)n != len) {
    snprintf(why, whylen, "%zu bytes that are not one message (%s)", len,
             n == 0 ? "incomplete" : reason);
    return 0;
  }
  msgpack_zone_init(&zone, 1024);
  if (proto_msg_decode((const uint8_t *)buf, len, &zone, &m, &reason) != 0)
    snprintf(why, whylen, "not msgpack-rpc: %s", reason);
  else if (proto_refused_decode(&m, &code, &text, &tlen) != 1)
    snprintf(why, whylen, "a message of type %d (%.*s), not session.refused",
             m.type, m.type == PROTO_RESPONSE ? 0 : (int)m.method_len,
             m.type == PROTO_RESPONSE ? "" : m.method);
  else if (code != HIPD_EPERM || memmem(text, tlen, want, strlen(want)) == NULL)
    snprintf(why, whylen, "session.refused with %s '%.*s', not EPERM '%s'",
             hipd_err_name(code), (int)tlen, text, want);
  else
    ok = 1;
  msgpack_zone_destroy(&zone);
  return ok;
}

/* Refused connections a uid makes at once in test_refusals_at_once; the
 * daemon answers REFUSAL_BURST of a uid at once, then REFUSAL_RATE a
 * second (policy.c). */
enum { BURST_CONNECTIONS = 64, REFUSAL_BURST = 8, REFUSAL_RATE = 4 };

/* As the refused uid B: a connection that sends nothing reads the refusal
 * within 2 s, then the end; a burst of connections, all held open by this
 * side, are each closed within a few seconds, some answered (the burst),
 * the others past the rate closed without a word. Holds the burst's
 * descriptors until killed. */
static int refusals_b(void *arg, char *msg, size_t msglen)
{
  refused_t *x = arg;
  static int fds[BURST_CONNECTIONS];
  char buf[1024], why[300];
  long long t0;
  long n;
  int fd, answered = 0;

  fd = silent_connect(x->socket);
  REQUIRE(fd >= 0, "connect: %s", strerror(errno));
  n = read_until_closed(fd, buf, sizeof(buf), 2000);
  REQUIRE(n >= 0, "a refused peer that sent nothing was neither answered "
                  "nor closed within 2 s");
  REQUIRE(n > 0, "a refused peer that sent nothing was closed without an "
                 "answer");
  REQUIRE(is_refusal(buf, (size_t)n, x->want, why, sizeof(why)),
          "a refused peer read %s", why);
  close(fd);

  t0 = harness_now_ms();
  for (int i = 0; i < BURST_CONNECTIONS; i++) {
    fds[i] = silent_connect(x->socket);
    REQUIRE(fds[i] >= 0, "burst connection %d: %s", i, strerror(errno));
  }
  for (int i = 0; i < BURST_CONNECTIONS; i++) {
    n = read_until_closed(fds[i], buf, sizeof(buf), 3000);
    REQUIRE(n >= 0, "burst connection %d is still open after 3 s", i);
    if (n > 0) {
      REQUIRE(is_refusal(buf, (size_t)n, x->want, why, sizeof(why)),
              "burst connection %d read %s", i, why);
      answered++;
    }
  }
  /* The one before the burst took a token: at most the rest of the burst
   * and what the rate gave meanwhile. */
  REQUIRE(answered >= 1 &&
              answered <=
                  REFUSAL_BURST +
                      REFUSAL_RATE * (int)((harness_now_ms() - t0) / 1000 + 1),
          "%d of %d refused connections in a burst were answered (a burst "
          "of %d, then %d a second)",
          answered, BURST_CONNECTIONS, REFUSAL_BURST, REFUSAL_RATE);
  snprintf(msg, msglen, "%d of %d answered", answered, BURST_CONNECTIONS);
  return 0;
}

/* With --isolation @p isolation: a refused peer is answered and closed at
 * once, without sending anything (with --hello-timeout 0 nothing else
 * would close it). A burst of refused connections, held open by the peer,
 * holds no descriptor of the process that accepts (the listener, or the
 * one process), and an admitted uid connects meanwhile; once the rate has
 * given tokens again, libhipd is refused with the rule as before. */
static void check_refusals(const char *isolation)
{
  harness_daemon_t *d =
      users_start_shared("--allow-users", USER_A ",0", "--hello-timeout", "0",
                         "--isolation", isolation, NULL);
  ctx_t a = {d->socket, uid_a};
  refused_t r = {d->socket, ""};
  char verdict[512] = "";
  int p[2], before, after, rc = -1;
  ssize_t n;
  pid_t pid;

  snprintf(r.want, sizeof(r.want), "is not allowed by --allow-users");
  before = proc_open_fds_settled(d->pid, 5000);
  ck_assert_int_gt(before, 0);
  ck_assert_int_eq(pipe(p), 0);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char m[400] = "";
    close(p[0]);
    if (harness_become(USER_B) != 0)
      _exit(2);
    rc = refusals_b(&r, m, sizeof(m));
    dprintf(p[1], "%s%s", rc == 0 ? "ok: " : "", m);
    close(p[1]);
    pause(); /* holding the burst's connections */
    _exit(0);
  }
  close(p[1]);
  n = read(p[0], verdict, sizeof(verdict) - 1);
  close(p[0]);
  if (n < 4 || strncmp(verdict, "ok: ", 4) != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_abort_msg("--isolation %s: uid B: %s", isolation,
                 n > 0 ? verdict : "the child died");
  }
  /* The child still holds its end of every connection. What the daemon
   * opens meanwhile for a while of its own (a compile helper's start, a
   * directory read) closes again; a refused connection it kept would not. */
  after = proc_open_fds(d->pid);
  for (int i = 0; i < 30 && after > before + 2; i++) {
    usleep(100 * 1000);
    after = proc_open_fds(d->pid);
  }
  ck_assert_msg(after <= before + 2,
                "--isolation %s: hipd has %d descriptors after a burst of %d "
                "refused connections (held open by the peer), %d before",
                isolation, after, BURST_CONNECTIONS, before);
  /* An admitted uid is not kept out meanwhile. */
  users_as(USER_A, connect_ok, &a);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  /* libhipd's refusal, once the rate gives tokens again. */
  snprintf(r.want, sizeof(r.want),
           "hello: uid %u (" USER_B ") is not allowed by --allow-users " USER_A
           ",0",
           (unsigned)uid_b);
  for (int i = 0; i < 30 && rc != 0; i++) {
    char m[400];
    rc = harness_run_as(USER_B, connect_refused, &r, m, sizeof(m));
    if (rc != 0)
      harness_sleep_ms(100);
  }
  ck_assert_msg(rc == 0,
                "--isolation %s: libhipd was not refused with the rule (%s) "
                "again",
                isolation, r.want);
  harness_free(d);
}

START_TEST(test_refusals_at_once)
{
  check_refusals("uid");
  check_refusals("none");
}
END_TEST

/* With the defaults no uid can take every session: uid A's 512 silent
 * connections (--tenant-max-sessions' default, half of --max-sessions)
 * are held, its 513th is closed at once, and root still connects. */
enum { DEFAULT_TENANT_SESSIONS = 512 };

START_TEST(test_tenant_sessions_default)
{
  /* Silent connections past --tenant-max-connecting would be closed
   * first: that bound has a test of its own. */
  harness_daemon_t *d = users_start_shared(
      "--hello-timeout", "0", "--tenant-max-connecting", "0", NULL);
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;
  int fds[2], rc;
  char verdict[256] = "";
  pid_t pid;

  ck_assert_int_eq(pipe(fds), 0);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    static int held[DEFAULT_TENANT_SESSIONS];
    struct pollfd p;
    char ch;
    int extra;

    close(fds[0]);
    if (harness_become(USER_A) != 0)
      _exit(2);
    for (int i = 0; i < DEFAULT_TENANT_SESSIONS; i++)
      if ((held[i] = silent_connect(d->socket)) < 0) {
        dprintf(fds[1], "silent connection %d: %s", i, strerror(errno));
        _exit(1);
      }
    extra = silent_connect(d->socket);
    p = (struct pollfd){.fd = extra, .events = POLLIN};
    if (extra < 0 || poll(&p, 1, 20000) != 1 || read(extra, &ch, 1) != 0)
      dprintf(fds[1], "connection %d of uid A was not closed at once",
              DEFAULT_TENANT_SESSIONS + 1);
    else
      dprintf(fds[1], "ok");
    close(fds[1]);
    pause(); /* holding the 512 */
    _exit(0);
  }
  close(fds[1]);
  ck_assert_int_ge(read(fds[0], verdict, sizeof(verdict) - 1), 1);
  ck_assert_msg(strcmp(verdict, "ok") == 0, "%s", verdict);
  /* Another uid is not kept out. */
  rc = connect_as(d->socket, &c);
  ck_assert_msg(rc == 0, "root's connect while uid A holds its 512: %s (%s)",
                hipd_err_name(rc), hipd_last_error(NULL));
  ck_assert_int_eq(hipd_daemon_info(c, &info), 0);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_sessions"),
                   DEFAULT_TENANT_SESSIONS);
  hipd_info_free(info);
  hipd_close(c);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  close(fds[0]);
  harness_free(d);
}
END_TEST

/* A uid's connections that say nothing are bounded on their own: once
 * --tenant-max-connecting of them (32 by default) have gone a second
 * without a successful hello, its next connection is closed at once,
 * while a burst of connections that do say hello is not refused, and
 * root and another uid connect; in every --isolation mode. */
enum { CONNECTING_DEFAULT = 32, CONNECTING_LOW = 4 };

typedef struct {
  const char *socket;
  int max;                      /* the daemon's --tenant-max-connecting */
  hipd_conn_t *keeper;          /* uid A's session held throughout */
  int held[CONNECTING_DEFAULT]; /* its connections without a hello */
} connecting_t;

/* A connection to @p path whose hello failed: it asked for protocol 0,
 * and read the error. @return its descriptor, or -1 (@p why says why). */
static int failed_hello_connect(const char *path, char *why, size_t whylen)
{
  int fd = silent_connect(path), code = 0, rc;
  proto_limits_t lim;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_zone zone;
  proto_msg_t m;
  const char *reason = "", *text;
  char buf[1024];
  size_t len = 0, need, tlen;
  struct pollfd p;
  long long n = 0;
  ssize_t w;

  if (fd < 0) {
    snprintf(why, whylen, "connect: %s", strerror(errno));
    return -1;
  }
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_request(&pk, 1, "hello", 1);
  msgpack_pack_int(&pk, 0);
  w = write(fd, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  proto_limits_default(&lim);
  while (w > 0 && n == 0 && len < sizeof(buf)) {
    p = (struct pollfd){.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5000) != 1 ||
        (w = read(fd, buf + len, sizeof(buf) - len)) <= 0)
      break;
    len += (size_t)w;
    n = proto_frame_scan(&lim, (const uint8_t *)buf, len, &need, &reason);
  }
  if (n <= 0) {
    snprintf(why, whylen, "no answer to a hello of protocol 0 (%zu bytes)",
             len);
    close(fd);
    return -1;
  }
  msgpack_zone_init(&zone, 1024);
  rc = proto_msg_decode((const uint8_t *)buf, (size_t)n, &zone, &m, &reason);
  if (rc == 0 && m.type == PROTO_RESPONSE && m.error != NULL)
    (void)proto_error_decode(m.error, &code, &text, &tlen);
  if (code != HIPD_EVERSION) {
    snprintf(why, whylen, "a hello of protocol 0 was answered %s, not EVERSION",
             hipd_err_name(code));
    close(fd);
    fd = -1;
  }
  msgpack_zone_destroy(&zone);
  return fd;
}

/* As uid A: a burst of max + 8 connections that say hello, all served,
 * and held a second: they are past hello, and a new one is served too.
 * Then max - 1 silent connections and one whose hello failed: a second
 * after the daemon took them, A's next connection is closed at once
 * (extras that were not, the daemon being late, are closed by this side).
 * Keeps the burst's first session (so the daemon keeps A's records) and
 * the max. */
static int connecting_a(void *arg, char *msg, size_t msglen)
{
  connecting_t *x = arg;
  hipd_conn_t *burst[CONNECTING_DEFAULT + 9];
  int closed = 0, tries = 0, extra, n, rc;
  struct pollfd p;
  char c, why[256];

  for (int i = 0; i < x->max + 8; i++) {
    rc = connect_as(x->socket, &burst[i]);
    REQUIRE(rc == 0, "burst connection %d: %s (%s)", i, hipd_err_name(rc),
            hipd_last_error(NULL));
  }
  harness_sleep_ms(1200);
  rc = connect_as(x->socket, &burst[x->max + 8]);
  REQUIRE(rc == 0,
          "a connection after %d that said hello a second ago: %s (%s)",
          x->max + 8, hipd_err_name(rc), hipd_last_error(NULL));
  x->keeper = burst[0];
  for (int i = 1; i < x->max + 9; i++)
    hipd_close(burst[i]);
  for (int i = 0; i < x->max - 1; i++) {
    x->held[i] = silent_connect(x->socket);
    REQUIRE(x->held[i] >= 0, "silent connection %d: %s", i, strerror(errno));
  }
  x->held[x->max - 1] = failed_hello_connect(x->socket, why, sizeof(why));
  REQUIRE(x->held[x->max - 1] >= 0, "%s", why);
  /* A second after the daemon took them (a loaded machine may take them
   * late): try a few times. */
  for (; tries < 10 && !closed; tries++) {
    harness_sleep_ms(1200);
    extra = silent_connect(x->socket);
    REQUIRE(extra >= 0, "extra connection %d: %s", tries, strerror(errno));
    p = (struct pollfd){.fd = extra, .events = POLLIN};
    n = poll(&p, 1, 2000);
    closed = n == 1 && read(extra, &c, 1) == 0;
    close(extra);
  }
  REQUIRE(closed,
          "uid A's connections after %d without a hello (one of them "
          "failed) were not closed at once (%d tried)",
          x->max, tries);
  return 0;
}

/* As uid A, after connecting_a(): its connections without a hello are
 * closed, its session kept. None of them is still counted (those closed
 * before hello, the one refused, the failed hello), so max - 1 new silent
 * ones held a second leave room for one that says hello. */
static int connecting_again_a(void *arg, char *msg, size_t msglen)
{
  connecting_t *x = arg;
  hipd_conn_t *c = NULL;
  int rc;

  for (int i = 0; i < x->max; i++)
    close(x->held[i]);
  for (int i = 0; i < x->max - 1; i++) {
    x->held[i] = silent_connect(x->socket);
    REQUIRE(x->held[i] >= 0, "silent connection %d: %s", i, strerror(errno));
  }
  harness_sleep_ms(1200);
  rc = connect_as(x->socket, &c);
  REQUIRE(rc == 0,
          "uid A's connection after %d silent ones, its earlier ones "
          "closed: %s (%s)",
          x->max - 1, hipd_err_name(rc), hipd_last_error(NULL));
  hipd_close(c);
  for (int i = 0; i < x->max - 1; i++)
    close(x->held[i]);
  hipd_close(x->keeper);
  return 0;
}

/* With --isolation @p isolation and --tenant-max-connecting @p max (0:
 * the default): uid A, in a child, runs connecting_a(); root and uid B
 * connect while it holds its connections; then it runs
 * connecting_again_a(). */
static void check_connecting(const char *isolation, int max)
{
  char maxarg[16];
  harness_daemon_t *d;
  connecting_t x = {0};
  ctx_t b;
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;
  char verdict[512] = "", logline[160];
  int up[2], down[2], rc;
  ssize_t n;
  pid_t pid;

  /* Every line of uid A's sessions is logged: the test looks for one. */
  snprintf(maxarg, sizeof(maxarg), "%d", max);
  d = max == 0 ? users_start_shared("--hello-timeout", "0", "--isolation",
                                    isolation, "--log-tenant-rate", "0", NULL)
               : users_start_shared("--hello-timeout", "0", "--isolation",
                                    isolation, "--log-tenant-rate", "0",
                                    "--tenant-max-connecting", maxarg, NULL);
  x.socket = d->socket;
  x.max = max == 0 ? CONNECTING_DEFAULT : max;
  b = (ctx_t){d->socket, uid_b};
  ck_assert_int_eq(pipe(up), 0);
  ck_assert_int_eq(pipe(down), 0);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char m[400] = "", go;
    close(up[0]);
    close(down[1]);
    if (harness_become(USER_A) != 0)
      _exit(2);
    rc = connecting_a(&x, m, sizeof(m));
    dprintf(up[1], "%s%s", rc == 0 ? "ok" : "", m);
    /* Holding its connections until the parent says go. */
    if (rc != 0 || read(down[0], &go, 1) != 1)
      _exit(1);
    rc = connecting_again_a(&x, m, sizeof(m));
    dprintf(up[1], "%s%s", rc == 0 ? "ok" : "", m);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  n = read(up[0], verdict, sizeof(verdict) - 1);
  if (n < 2 || strcmp(verdict, "ok") != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_abort_msg("--isolation %s: uid A: %s", isolation,
                 n > 0 ? verdict : "the child died");
  }
  snprintf(logline, sizeof(logline),
           "session closed: uid %u has %d connections without a hello for "
           "1 s or more (--tenant-max-connecting)",
           (unsigned)uid_a, x.max);
  ck_assert_msg(harness_log_wait(d, logline, 5000),
                "--isolation %s: the log lacks '%s'", isolation, logline);
  /* Root and another uid are not kept out while A holds them. */
  rc = connect_as(d->socket, &c);
  ck_assert_msg(rc == 0, "--isolation %s: root's connect: %s (%s)", isolation,
                hipd_err_name(rc), hipd_last_error(NULL));
  ck_assert_int_eq(hipd_daemon_info(c, &info), 0);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_connecting"), x.max);
  hipd_info_free(info);
  hipd_close(c);
  users_as(USER_B, connect_ok, &b);
  ck_assert_int_eq(write(down[1], "g", 1), 1);
  memset(verdict, 0, sizeof(verdict));
  n = read(up[0], verdict, sizeof(verdict) - 1);
  close(up[0]);
  close(down[1]);
  waitpid(pid, NULL, 0);
  ck_assert_msg(n >= 2 && strcmp(verdict, "ok") == 0,
                "--isolation %s: uid A, once its connections were closed: %s",
                isolation, n > 0 ? verdict : "the child died");
  harness_free(d);
}

START_TEST(test_tenant_connecting)
{
  check_connecting("uid", 0);
  check_connecting("none", CONNECTING_LOW);
}
END_TEST

/* The log is hipd's: a uid that opens and closes sessions in a loop (3
 * lines each: opened, hello, closed) gets a burst of lines, then a few a
 * second, and one line says how many were suppressed. */
enum { FLOOD_SESSIONS = 300 };

static int log_flood_a(void *arg, char *msg, size_t msglen)
{
  ctx_t *x = arg;
  hipd_conn_t *c = NULL;
  int rc;

  for (int i = 0; i < FLOOD_SESSIONS; i++) {
    rc = hipd_connect2(x->socket, "log-flood", &c);
    REQUIRE(rc == 0, "session %d: %s (%s)", i, hipd_err_name(rc),
            hipd_last_error(NULL));
    hipd_close(c);
  }
  /* A line after a pause: the one that says what was suppressed. */
  harness_sleep_ms(300);
  rc = hipd_connect2(x->socket, "log-after", &c);
  REQUIRE(rc == 0, "the last session: %s", hipd_err_name(rc));
  hipd_close(c);
  return 0;
}

/* Lines of @p path that contain @p what. */
static int count_lines(const char *path, const char *what)
{
  char line[4096];
  int n = 0;
  FILE *f = fopen(path, "r");

  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  while (fgets(line, sizeof(line), f) != NULL)
    n += strstr(line, what) != NULL;
  fclose(f);
  return n;
}

START_TEST(test_log_rate)
{
  harness_daemon_t *d = users_start_shared(NULL);
  ctx_t a = {d->socket, uid_a};
  char supp[64];
  int hellos, after;
  long long deadline;

  users_as(USER_A, log_flood_a, &a);
  snprintf(supp, sizeof(supp), "uid %u: ", (unsigned)uid_a);
  /* The worker writes the last lines when it reads the close. */
  deadline = harness_now_ms() + 10000;
  while ((after = count_lines(d->log, "hello from 'log-after'")) == 0 &&
         harness_now_ms() < deadline)
    harness_sleep_ms(50);
  hellos = count_lines(d->log, "hello from 'log-flood'");
  ck_assert_msg(hellos > 0 && hellos < FLOOD_SESSIONS,
                "%d of uid A's %d hello lines were written", hellos,
                FLOOD_SESSIONS);
  ck_assert_msg(after == 1, "the line after the pause: %d", after);
  ck_assert_msg(count_lines(d->log, supp) >= 1 &&
                    count_lines(d->log, "log lines about it suppressed") >= 1,
                "no line says how many of uid A's lines were suppressed");
  harness_free(d);
}
END_TEST

/* --cache-scope: a kernel uid A compiled is a memory hit for uid B with
 * the default (shared: its timing tells B that A compiled it), a miss with
 * "tenant" (B's entry is its own), and a hit for B's second request. */
static const char SCOPE_SRC[] =
    "extern \"C\" __global__ void scoped(int *p) { p[0] = 1234567; }\n";

typedef struct {
  const char *socket;
  int n; /* compiles to make, 1 or 2 */
} scope_t;

/* In the child: where the compiles' binaries came from go back in msg,
 * "miss memory". */
static int scope_compile(void *arg, char *msg, size_t msglen)
{
  scope_t *x = arg;
  hipd_conn_t *c = NULL;
  char got[64] = "";

  REQUIRE(connect_as(x->socket, &c) == 0, "connect: %s", hipd_last_error(NULL));
  for (int i = 0; i < x->n; i++) {
    hipd_kernel_t k = HIPD_KERNEL_NULL;
    hipd_info_t *info = NULL;
    const char *s;
    size_t len;
    int rc =
        hipd_kernel_compile_cached(c, 0, SCOPE_SRC, "scoped", NULL, &k, &info);
    REQUIRE(rc == 0, "compile %d: %s (%s)", i, hipd_err_name(rc),
            hipd_last_error(c));
    REQUIRE(hipd_info_str(info, "cache", &s, &len) == 0 && s != NULL,
            "compile %d: no cache in its info", i);
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%.*s",
             i > 0 ? " " : "", (int)len, s);
    hipd_info_free(info);
  }
  hipd_close(c);
  snprintf(msg, msglen, "%s", got);
  return 0;
}

/* Run scope_compile() as @p user; what it saw into @p out. */
static void scope_as(const char *user, scope_t *x, char *out, size_t n)
{
  int rc = harness_run_as(user, scope_compile, x, out, n);

  ck_assert_msg(rc == 0, "as %s: %s", user, out);
}

static void check_scope(const char *scope, const char *b_first)
{
  harness_daemon_t *d =
      users_start_shared("--cache-dir", "", "--cache-scope", scope, NULL);
  scope_t a = {.socket = d->socket, .n = 1}, b = {.socket = d->socket, .n = 2};
  char got_a[256], got_b[256], want_b[64];

  scope_as(USER_A, &a, got_a, sizeof(got_a));
  scope_as(USER_B, &b, got_b, sizeof(got_b));
  ck_assert_str_eq(got_a, "miss");
  snprintf(want_b, sizeof(want_b), "%s memory", b_first);
  ck_assert_msg(strcmp(got_b, want_b) == 0,
                "--cache-scope %s: uid B's two compiles of uid A's kernel: "
                "'%s', not '%s'",
                scope, got_b, want_b);
  harness_free(d);
}

START_TEST(test_cache_scope)
{
  check_scope("shared", "memory");
  check_scope("tenant", "miss");
}
END_TEST

START_TEST(test_allow_groups)
{
  /* B is a supplementary member of G; A is not. */
  harness_daemon_t *d = users_start_shared("--allow-groups", GROUP_G, NULL);
  ctx_t b = {d->socket, uid_b};
  refused_t r = {d->socket, ""};

  users_as(USER_B, connect_ok, &b);
  snprintf(r.want, sizeof(r.want),
           "uid %u (" USER_A ") is not allowed by --allow-groups " GROUP_G,
           (unsigned)uid_a);
  users_as(USER_A, connect_refused, &r);
  harness_free(d);
}
END_TEST

typedef struct {
  const char *socket;
  int sees_1; /* device 1 is allowed */
  uid_t uid;
  const char *user;
} devctx_t;

static int devices_as(void *arg, char *msg, size_t msglen)
{
  devctx_t *x = arg;
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;
  hipd_buffer_t buf;
  char want[256];
  int n = -1, rc;

  REQUIRE(connect_as(x->socket, &c) == 0, "connect: %s", hipd_last_error(NULL));
  REQUIRE(hipd_device_count(c, &n) == 0, "device.count failed");
  REQUIRE(n == (x->sees_1 ? 2 : 1), "device.count %d", n);
  REQUIRE(hipd_device_list(c, &info) == 0, "device.list failed");
  REQUIRE(info_get(info, "0.id") == 0, "device.list[0].id %lld",
          (long long)info_get(info, "0.id"));
  if (x->sees_1)
    REQUIRE(info_get(info, "1.id") == 1, "device.list[1].id %lld",
            (long long)info_get(info, "1.id"));
  else
    REQUIRE(info_get(info, "1.id") == -1, "device 1 is listed");
  hipd_info_free(info);
  /* Device 0 is open to both. */
  rc = hipd_mem_alloc(c, 0, 64, "byte", &buf);
  REQUIRE(rc == 0, "alloc on 0: %s (%s)", hipd_err_name(rc),
          hipd_last_error(c));
  rc = hipd_mem_alloc(c, 1, 64, "byte", &buf);
  if (x->sees_1) {
    REQUIRE(rc == 0, "alloc on 1: %s (%s)", hipd_err_name(rc),
            hipd_last_error(c));
  } else {
    snprintf(want, sizeof(want),
             "device 1 (cpu:1) is not allowed for uid %u (%s) by "
             "--device-allow cpu:1=" USER_A,
             (unsigned)x->uid, x->user);
    REQUIRE(rc == HIPD_EPERM && strstr(hipd_last_error(c), want) != NULL,
            "alloc on 1: %s (%s), not EPERM '%s'", hipd_err_name(rc),
            hipd_last_error(c), want);
    rc = hipd_device_get(c, 1, &info);
    REQUIRE(rc == HIPD_EPERM, "device.get 1: %s", hipd_err_name(rc));
    rc = hipd_device_set_current(c, 1);
    REQUIRE(rc == HIPD_EPERM, "device.set_current 1: %s", hipd_err_name(rc));
  }
  hipd_close(c);
  return 0;
}

START_TEST(test_device_allow)
{
  harness_daemon_t *d = users_start_shared(
      "--cpu-devices", "2", "--device-allow", "cpu:1=" USER_A, NULL);
  devctx_t a = {d->socket, 1, uid_a, USER_A};
  devctx_t b = {d->socket, 0, uid_b, USER_B};

  users_as(USER_A, devices_as, &a);
  users_as(USER_B, devices_as, &b);
  harness_free(d);
}
END_TEST

/* A rule that names nobody who exists, or no device, stops hipd. */
START_TEST(test_bad_rules)
{
  const char *bad[][3] = {
      {"--allow-users", "hipd_pt_nobody_here", "no user 'hipd_pt_nobody_here'"},
      {"--allow-groups", "hipd_pt_nogroup", "no group 'hipd_pt_nogroup'"},
      {"--device-allow", "cpu:7=" USER_A, "names no device"},
      {"--device-allow", "cpu:0", "is not DEV=LIST"},
  };

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *args[] = {bad[i][0], bad[i][1], NULL};
    harness_daemon_t *d = harness_spawn(NULL, args);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(harness_wait_exit(d, 20000), 1);
    ck_assert_msg(harness_log_contains(d, bad[i][2]),
                  "%s %s: the log lacks "
                  "'%s'",
                  bad[i][0], bad[i][1], bad[i][2]);
    harness_free(d);
  }
}
END_TEST

/* ----------------------------------------------------------------- main */

/* Make the test users and group (kept between runs): B in G
 * (supplementary), A not. @return 0 or -1. */
static int make_users(void)
{
  struct group *g;
  gid_t gid_b;

  if (users_make(USER_A, &uid_a, NULL) != 0 ||
      users_make(USER_B, &uid_b, &gid_b) != 0 ||
      users_make_group(GROUP_G, USER_B, USER_A) != 0)
    return -1;
  g = getgrnam(GROUP_G);
  return g != NULL && gid_b != g->gr_gid ? 0 : -1;
}

int main(void)
{
  Suite *s = suite_create("policy");
  TCase *tc;
  int failed;

  if (geteuid() != 0) {
    printf("check_policy: SKIP: needs root to create the test users " USER_A
           " and " USER_B " (useradd) and to run clients as them\n");
    return 77;
  }
  if (make_users() != 0) {
    printf("check_policy: SKIP: cannot create the test users " USER_A
           ", " USER_B " and group " GROUP_G " (useradd, groupadd, usermod)\n");
    return 77;
  }
  /* The test users reach the daemons' sockets through every directory
   * above them: the build tree may sit under a private one (a home, a
   * mktemp -d), so these daemons live under /tmp instead (harness_init
   * makes the folder, harness_share_socket opens it to traversal only). */
  setenv("HIPD_TEST_TMP", "/tmp", 1);
  harness_init("policy");
  tc = tcase_create("tenants");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_tenant_mem_quota);
  tcase_add_test(tc, test_tenant_max_sessions);
  tcase_add_test(tc, test_tenant_max_sessions_session_workers);
  tcase_add_test(tc, test_tenant_sessions_default);
  tcase_add_test(tc, test_log_rate);
  tcase_add_test(tc, test_tenant_connecting);
  tcase_add_test(tc, test_cache_scope);
  tcase_add_test(tc, test_tenant_streams_handles);
  tcase_add_test(tc, test_tenant_limits_session_workers);
  tcase_add_test(tc, test_tenant_page_worker_death);
  tcase_add_test(tc, test_tenant_device_share);
  suite_add_tcase(s, tc);
  tc = tcase_create("access");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_allow_users);
  tcase_add_test(tc, test_refusals_at_once);
  tcase_add_test(tc, test_allow_groups);
  tcase_add_test(tc, test_device_allow);
  tcase_add_test(tc, test_bad_rules);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
