/* SPDX-License-Identifier: MIT */
/* tests/check_grants.c: grants (daemon/grants.c; proto/PROTOCOL.md,
 * "Grants") against real daemons, with clients of real other uids.
 *
 * As root the test makes (or reuses) the users hipd_grant_a and
 * hipd_grant_b. The daemons admit root alone by their rules
 * (--allow-users root) and serve two CPU devices, so that a test user
 * reaches hipd only through a grant. Each test user runs a client process
 * (forked, then initgroups/setgid/setuid) that the test drives over a
 * pipe; the admin side is the test itself, root, through libhipd.
 * Checked, in the default worker mode and in --isolation none: without a
 * grant B is refused (EPERM naming the rule); a grant of device 1 admits
 * B to device 1 alone (device 0 EPERM); revoking it closes B's open
 * session with the documented reason, the device's held memory and the
 * grant's go back to zero, and B is refused again; a non-admin cannot
 * grant or revoke (EPERM, the message says it needs root) and sees only
 * its own grants; the quota of a grant bounds its sessions together
 * (EQUOTA naming the grant); a grant survives a SIGHUP and its sessions
 * stay open; the metrics have the grant's series by label, and its
 * counters move with the work under it; revoke answers the usage; bad
 * input is refused with the code and a message naming the problem. Without
 * root: skipped (exit 77). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "run.h"
#include "users.h"

#define USER_A "hipd_grant_a"
#define USER_B "hipd_grant_b"

static uid_t uid_a, uid_b;

static const char *kernel_src =
    "extern \"C\" __global__ void inc(int *p) { p[threadIdx.x] += 1; }\n";

/* The str at @p path of @p info, or "" (absent, or not a str). */
static const char *info_s(const hipd_info_t *info, const char *path)
{
  const char *s = NULL;

  return hipd_info_str(info, path, &s, NULL) == 0 ? s : "";
}

/* ------------------------------------------- clients of another uid */

/* A client process running as a test user, driven over two pipes: one
 * command a line, one answer (rc, a value, a message) each. */
typedef struct {
  pid_t pid;
  int to, from;
} client_t;

typedef struct {
  int32_t rc;
  uint64_t v;
  char msg[512];
} answer_t;

static int write_all(int fd, const void *p, size_t n)
{
  const char *c = p;

  while (n > 0) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n)
{
  char *c = p;

  while (n > 0) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Device writes, reads, and a kernel compiled and launched twice on @p dev
 * (the grant's counters move). */
static int work(hipd_conn_t *c, int dev)
{
  static int in[64], out[64];
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
  hipd_buffer_t b;
  hipd_kernel_t k;
  hipd_args_t *args;
  int rc;

  if ((rc = hipd_mem_alloc(c, dev, sizeof(in), "byte", &b)) != 0 ||
      (rc = hipd_mem_write(c, b, 0, in, sizeof(in))) != 0 ||
      (rc = hipd_kernel_compile_cached(c, dev, kernel_src, "inc", NULL, &k,
                                       NULL)) != 0)
    return rc;
  if ((args = hipd_args_new()) == NULL)
    return HIPD_ENOMEM;
  rc = hipd_args_buffer(args, b, 0);
  for (int i = 0; rc == 0 && i < 2; i++)
    rc = hipd_kernel_launch(c, k, grid, block, 0, HIPD_STREAM_NULL, args);
  hipd_args_free(args);
  if (rc == 0)
    rc = hipd_mem_read(c, b, 0, out, sizeof(out));
  if (rc == 0 && out[5] != 2)
    rc = HIPD_EINTERNAL;
  if (rc == 0)
    rc = hipd_mem_free(c, b);
  return rc;
}

static void client_main(const char *sock, int in, int out)
{
  hipd_conn_t *conns[4] = {0};
  char line[256];

  for (;;) {
    answer_t a = {0};
    hipd_conn_t *c;
    size_t n = 0;
    unsigned k = 0;
    char ch;
    while (n + 1 < sizeof(line) && read(in, &ch, 1) == 1 && ch != '\n')
      line[n++] = ch;
    line[n] = '\0';
    if (n == 0 || strcmp(line, "quit") == 0)
      _exit(0);
    if (strchr(line, ' ') != NULL)
      k = (unsigned)(strchr(line, ' ')[1] - '0') % 4;
    c = conns[k];
    if (strncmp(line, "open ", 5) == 0) {
      a.rc = hipd_connect2(sock, "grants-test", &conns[k]);
      if (a.rc != 0)
        snprintf(a.msg, sizeof(a.msg), "%s", hipd_last_error(NULL));
    } else if (strncmp(line, "count ", 6) == 0) {
      int cnt = -1;
      a.rc = hipd_device_count(c, &cnt);
      a.v = (uint64_t)cnt;
    } else if (strncmp(line, "alloc ", 6) == 0) {
      /* alloc K DEV BYTES: the buffer is kept */
      int dev = 0;
      unsigned long long bytes = 0;
      hipd_buffer_t b;
      sscanf(line + 8, "%d %llu", &dev, &bytes);
      a.rc = hipd_mem_alloc(c, dev, bytes, "byte", &b);
    } else if (strncmp(line, "work ", 5) == 0) {
      a.rc = work(c, atoi(line + 7));
    } else if (strncmp(line, "ping ", 5) == 0) {
      char buf[8];
      size_t got;
      a.rc = hipd_ping(c, "x", 1, buf, sizeof(buf), &got);
    } else if (strncmp(line, "grant ", 6) == 0) {
      const int dev0 = 0;
      a.rc = hipd_grant_add(c, "root", &dev0, 1, 0, "by-a-user", NULL);
    } else if (strncmp(line, "revoke ", 7) == 0) {
      a.rc = hipd_grant_revoke(c, line + 9, NULL, NULL);
    } else if (strncmp(line, "glist ", 6) == 0) {
      hipd_info_t *info = NULL;
      if ((a.rc = hipd_grant_list(c, &info)) == 0) {
        a.v = (uint64_t)hipd_info_len(info, "");
        snprintf(a.msg, sizeof(a.msg), "%s", info_s(info, "0.label"));
        hipd_info_free(info);
      }
    } else if (strncmp(line, "close ", 6) == 0) {
      hipd_close(c);
      conns[k] = NULL;
    } else {
      _exit(4);
    }
    if (a.rc != 0 && c != NULL && a.msg[0] == '\0')
      snprintf(a.msg, sizeof(a.msg), "%s", hipd_last_error(c));
    if (write_all(out, &a, sizeof(a)) != 0)
      _exit(3);
  }
}

static client_t client_start(const char *user, const char *sock)
{
  int to[2], from[2];
  client_t c;

  ck_assert_int_eq(pipe(to), 0);
  ck_assert_int_eq(pipe(from), 0);
  c.pid = fork();
  ck_assert_int_ge(c.pid, 0);
  if (c.pid == 0) {
    close(to[1]);
    close(from[0]);
    if (harness_become(user) != 0)
      _exit(2);
    client_main(sock, to[0], from[1]);
  }
  close(to[0]);
  close(from[1]);
  c.to = to[1];
  c.from = from[0];
  return c;
}

/* Send one command (printf-style), wait for its answer. */
static answer_t client_do(client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static answer_t client_do(client_t *c, const char *fmt, ...)
{
  char line[256];
  answer_t a;
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  ck_assert_int_eq(write_all(c->to, line, (size_t)n), 0);
  ck_assert_msg(read_all(c->from, &a, sizeof(a)) == 0,
                "the client died on '%.*s'", n - 1, line);
  return a;
}

static void client_stop(client_t *c)
{
  int status;

  if (write_all(c->to, "quit\n", 5) != 0)
    kill(c->pid, SIGKILL);
  close(c->to);
  close(c->from);
  waitpid(c->pid, &status, 0);
}

/* ------------------------------------------------------------ the admin */

static hipd_conn_t *admin_open(const harness_daemon_t *d)
{
  hipd_conn_t *c = NULL;

  ck_assert_int_eq(hipd_connect2(d->socket, "grants-admin", &c), 0);
  return c;
}

/* The grant labelled @p label in grant.list, its index, or -1. */
static int grant_index(hipd_conn_t *c, const char *label, hipd_info_t **out)
{
  hipd_info_t *list = NULL;
  int n;

  ck_assert_int_eq(hipd_grant_list(c, &list), 0);
  n = hipd_info_len(list, "");
  *out = list;
  for (int i = 0; i < n; i++) {
    char path[32];
    snprintf(path, sizeof(path), "%d.label", i);
    if (strcmp(info_s(list, path), label) == 0)
      return i;
  }
  return -1;
}

static uint64_t grant_u64(hipd_conn_t *c, const char *label, const char *key)
{
  hipd_info_t *list;
  int i = grant_index(c, label, &list);
  char path[64];
  uint64_t v = UINT64_MAX;

  ck_assert_msg(i >= 0, "no grant '%s' in grant.list", label);
  snprintf(path, sizeof(path), "%d.%s", i, key);
  ck_assert_int_eq(hipd_info_uint(list, path, &v), 0);
  hipd_info_free(list);
  return v;
}

/* The memory hipd's sessions hold on device @p dev (daemon.stats). */
static uint64_t device_held(hipd_conn_t *c, int dev)
{
  hipd_info_t *st = NULL;
  uint64_t held = UINT64_MAX, id;
  char path[48];
  int n;

  ck_assert_int_eq(hipd_daemon_stats(c, &st), 0);
  n = hipd_info_len(st, "devices");
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof(path), "devices.%d.device", i);
    if (hipd_info_uint(st, path, &id) == 0 && id == (uint64_t)dev) {
      snprintf(path, sizeof(path), "devices.%d.mem_held", i);
      ck_assert_int_eq(hipd_info_uint(st, path, &held), 0);
    }
  }
  hipd_info_free(st);
  ck_assert_msg(held != UINT64_MAX, "daemon.stats has no device %d", dev);
  return held;
}

/* Wait up to 5 s for device @p dev's held memory to be @p want. */
static uint64_t device_held_wait(hipd_conn_t *c, int dev, uint64_t want)
{
  uint64_t held = device_held(c, dev);

  for (long long end = harness_now_ms() + 5000;
       held != want && harness_now_ms() < end; held = device_held(c, dev))
    harness_sleep_ms(50);
  return held;
}

/* The value of the first sample of @p series whose line starts with
 * @p head ("name{label=..."), or -1. */
static double metric(hipd_conn_t *c, const char *head)
{
  char *text = NULL, *p;
  double v = -1;

  ck_assert_int_eq(hipd_metrics(c, &text, NULL), 0);
  for (p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, head, strlen(head)) == 0) {
      char *sp = strchr(p, ' ');
      if (sp != NULL)
        v = strtod(sp + 1, NULL);
      break;
    }
  free(text);
  return v;
}

static harness_daemon_t *start(const char *isolation)
{
  return users_start_shared("--devices", "cpu", "--cpu-devices", "2",
                            "--allow-users", "root", "--isolation", isolation,
                            NULL);
}

/* ------------------------------------------------------------- the tests */

/* Refused without a grant; admitted to its devices alone with one; the
 * revoke closes the session under it with the documented reason, frees
 * its memory, and B is refused again. The metrics and the revoke's answer
 * say what the session did. */
static void grant_revoke_flow(const char *isolation)
{
  harness_daemon_t *d = start(isolation);
  hipd_conn_t *root = admin_open(d);
  client_t b = client_start(USER_B, d->socket);
  const int dev1 = 1;
  hipd_info_t *g = NULL, *rv = NULL;
  char head[160];
  uint64_t v;
  answer_t a;

  a = client_do(&b, "open 0");
  ck_assert_int_eq(a.rc, HIPD_EPERM);
  ck_assert_msg(strstr(a.msg, "is not allowed by --allow-users root"),
                "refusal: %s", a.msg);

  ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev1, 1, 0, "job-17", &g), 0);
  ck_assert_str_eq(info_s(g, "label"), "job-17");
  ck_assert_int_eq(hipd_info_uint(g, "uid", &v), 0);
  ck_assert_uint_eq(v, uid_b);
  ck_assert_int_eq(hipd_info_uint(g, "devices.0", &v), 0);
  ck_assert_uint_eq(v, 1);
  hipd_info_free(g);

  a = client_do(&b, "open 0");
  ck_assert_msg(a.rc == 0, "open under the grant: %s", a.msg);
  a = client_do(&b, "count 0");
  ck_assert_int_eq(a.rc, 0);
  ck_assert_uint_eq(a.v, 1); /* device 1 alone */
  a = client_do(&b, "alloc 0 0 4096");
  ck_assert_int_eq(a.rc, HIPD_EPERM);
  ck_assert_msg(strstr(a.msg, "not among its grant's devices"), "%s", a.msg);
  a = client_do(&b, "work 0 1");
  ck_assert_msg(a.rc == 0, "work under the grant: %s", a.msg);
  a = client_do(&b, "alloc 0 1 65536");
  ck_assert_msg(a.rc == 0, "alloc under the grant: %s", a.msg);
  ck_assert_uint_eq(device_held(root, 1), 65536);

  ck_assert_uint_eq(grant_u64(root, "job-17", "sessions"), 1);
  ck_assert_uint_eq(grant_u64(root, "job-17", "mem_held"), 65536);
  ck_assert_uint_eq(grant_u64(root, "job-17", "kernels_launched"), 2);
  snprintf(head, sizeof(head),
           "hipd_grant_kernels_launched_total{label=\"job-17\",uid=\"%u\"",
           (unsigned)uid_b);
  ck_assert_msg(metric(root, head) == 2, "%s is %g", head, metric(root, head));
  snprintf(head, sizeof(head),
           "hipd_grant_memory_held_bytes{label=\"job-17\",uid=\"%u\"",
           (unsigned)uid_b);
  ck_assert_msg(metric(root, head) == 65536, "%s", head);
  snprintf(head, sizeof(head),
           "hipd_grant_memory_peak_bytes{label=\"job-17\",uid=\"%u\"",
           (unsigned)uid_b);
  ck_assert_msg(metric(root, head) >= 65536, "%s", head);

  ck_assert_int_eq(hipd_grant_revoke(root, "job-17", NULL, &rv), 0);
  ck_assert_int_eq(hipd_info_len(rv, ""), 1);
  ck_assert_int_eq(hipd_info_uint(rv, "0.sessions", &v), 0);
  ck_assert_uint_eq(v, 1);
  ck_assert_int_eq(hipd_info_uint(rv, "0.kernels_launched", &v), 0);
  ck_assert_uint_eq(v, 2);
  ck_assert_int_eq(hipd_info_uint(rv, "0.mem_peak", &v), 0);
  ck_assert_uint_ge(v, 65536);
  ck_assert_int_eq(hipd_info_uint(rv, "0.bytes_h2d", &v), 0);
  ck_assert_uint_eq(v, 256);
  hipd_info_free(rv);

  ck_assert_msg(
      harness_log_wait(d,
                       "session closed: access revoked: grant 'job-17' ended "
                       "(revoked by uid 0 (root))",
                       5000),
      "no close with the documented reason");
  a = client_do(&b, "ping 0");
  ck_assert_int_eq(a.rc, HIPD_EDISCONNECTED);
  /* Told why (session.closed, EPERM): libhipd's message carries it. */
  ck_assert_msg(strstr(a.msg, "hipd closed this session: access revoked: "
                              "grant 'job-17' ended") != NULL,
                "the revoked session was not told why: %s", a.msg);
  ck_assert_uint_eq(device_held_wait(root, 1, 0), 0);
  {
    hipd_info_t *list;
    ck_assert_int_eq(grant_index(root, "job-17", &list), -1);
    hipd_info_free(list);
  }
  snprintf(head, sizeof(head), "hipd_grant_sessions{label=\"job-17\"");
  ck_assert_msg(metric(root, head) == -1, "a revoked grant's series stays");
  a = client_do(&b, "open 1");
  ck_assert_int_eq(a.rc, HIPD_EPERM);

  client_stop(&b);
  hipd_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_grant_revoke_workers)
{
  grant_revoke_flow("uid");
}
END_TEST

START_TEST(test_grant_revoke_none)
{
  grant_revoke_flow("none");
}
END_TEST

/* Only admins grant and revoke; anyone lists, a non-admin its own. A
 * revoke leaves the sessions of another grant, and of the same uid under
 * none, alone. */
START_TEST(test_non_admin)
{
  harness_daemon_t *d = start("uid");
  hipd_conn_t *root = admin_open(d);
  client_t a = client_start(USER_A, d->socket),
           b = client_start(USER_B, d->socket);
  const int dev0 = 0;
  answer_t r;

  ck_assert_int_eq(hipd_grant_add(root, USER_A, &dev0, 1, 0, "a-job", NULL), 0);
  ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev0, 1, 0, "b-job", NULL), 0);
  r = client_do(&a, "open 0");
  ck_assert_msg(r.rc == 0, "%s", r.msg);
  r = client_do(&b, "open 0");
  ck_assert_msg(r.rc == 0, "%s", r.msg);
  r = client_do(&a, "grant 0");
  ck_assert_int_eq(r.rc, HIPD_EPERM);
  ck_assert_msg(strstr(r.msg, "grant.add: granting access needs root"), "%s",
                r.msg);
  r = client_do(&a, "revoke 0 b-job");
  ck_assert_int_eq(r.rc, HIPD_EPERM);
  ck_assert_msg(strstr(r.msg, "revoking a grant needs root"), "%s", r.msg);
  r = client_do(&a, "glist 0");
  ck_assert_int_eq(r.rc, 0);
  ck_assert_uint_eq(r.v, 1);
  ck_assert_str_eq(r.msg, "a-job");
  /* Root sees both; B's grant is there still. */
  {
    hipd_info_t *list;
    ck_assert_int_ge(grant_index(root, "b-job", &list), 0);
    ck_assert_int_eq(hipd_info_len(list, ""), 2);
    hipd_info_free(list);
  }
  ck_assert_int_eq(hipd_grant_revoke(root, "a-job", NULL, NULL), 0);
  ck_assert(harness_log_wait(d, "grant 'a-job' ended", 5000));
  r = client_do(&a, "ping 0");
  ck_assert_int_eq(r.rc, HIPD_EDISCONNECTED);
  r = client_do(&b, "ping 0");
  ck_assert_msg(r.rc == 0, "B's session under its own grant: %s", r.msg);
  client_stop(&a);
  client_stop(&b);
  hipd_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A grant's quota bounds its sessions together. */
/* A grant's quota holds for its sessions together, in one worker
 * (--isolation uid) or each in its own (session: the uid's tenant page
 * counts the grant's bytes across them). */
static void quota_in(const char *isolation)
{
  harness_daemon_t *d = start(isolation);
  hipd_conn_t *root = admin_open(d);
  client_t b = client_start(USER_B, d->socket);
  const int devs[2] = {0, 1};
  answer_t r;

  ck_assert_int_eq(
      hipd_grant_add(root, USER_B, devs, 2, 98304, "quota-job", NULL), 0);
  ck_assert_int_eq(client_do(&b, "open 0").rc, 0);
  ck_assert_int_eq(client_do(&b, "open 1").rc, 0);
  r = client_do(&b, "alloc 0 0 49152");
  ck_assert_msg(r.rc == 0, "%s", r.msg);
  r = client_do(&b, "alloc 1 1 65536");
  ck_assert_int_eq(r.rc, HIPD_EQUOTA);
  ck_assert_msg(strstr(r.msg, "65536 bytes would exceed grant 'quota-job''s "
                              "quota of 98304 bytes (49152 in use"),
                "%s", r.msg);
  r = client_do(&b, "alloc 1 1 49152");
  ck_assert_msg(r.rc == 0, "up to the quota: %s", r.msg);
  r = client_do(&b, "alloc 0 0 1");
  ck_assert_int_eq(r.rc, HIPD_EQUOTA);
  ck_assert_uint_eq(grant_u64(root, "quota-job", "mem_held"), 98304);
  /* A session that goes gives its bytes back to the grant. */
  ck_assert_int_eq(client_do(&b, "close 1").rc, 0);
  for (long long end = harness_now_ms() + 5000;
       grant_u64(root, "quota-job", "mem_held") != 49152 &&
       harness_now_ms() < end;)
    harness_sleep_ms(50);
  ck_assert_uint_eq(grant_u64(root, "quota-job", "mem_held"), 49152);
  r = client_do(&b, "alloc 0 1 49152");
  ck_assert_msg(r.rc == 0, "after the other session's close: %s", r.msg);
  if (strcmp(isolation, "uid") == 0)
    ck_assert_uint_eq(grant_u64(root, "quota-job", "mem_peak"), 98304);
  client_stop(&b);
  hipd_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_quota)
{
  quota_in("uid");
}
END_TEST

START_TEST(test_quota_session_workers)
{
  quota_in("session");
}
END_TEST

/* A grant survives a reload; its session stays open, new ones come
 * under it. */
START_TEST(test_reload)
{
  harness_daemon_t *d = start("uid");
  hipd_conn_t *root = admin_open(d);
  client_t b = client_start(USER_B, d->socket);
  const int dev0 = 0;
  answer_t r;

  ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev0, 1, 0, "hup-job", NULL),
                   0);
  ck_assert_int_eq(client_do(&b, "open 0").rc, 0);
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  ck_assert(harness_log_wait(d, "configuration reloaded", 10000));
  ck_assert_uint_eq(grant_u64(root, "hup-job", "sessions"), 1);
  r = client_do(&b, "ping 0");
  ck_assert_msg(r.rc == 0, "the session after the reload: %s", r.msg);
  r = client_do(&b, "open 1");
  ck_assert_msg(r.rc == 0, "a session after the reload: %s", r.msg);
  ck_assert_uint_eq(grant_u64(root, "hup-job", "sessions"), 2);
  client_stop(&b);
  hipd_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* Bad input: the code, and a message that names the problem. */
START_TEST(test_bad_input)
{
  harness_daemon_t *d = start("uid");
  hipd_conn_t *root = admin_open(d);
  const int dev0 = 0, dev7 = 7, dev99 = 99;

  ck_assert_int_eq(
      hipd_grant_add(root, "hipd-no-such-user", &dev0, 1, 0, NULL, NULL),
      HIPD_ENOENT);
  ck_assert_str_eq(hipd_last_error(root),
                   "grant.add: no user 'hipd-no-such-user'");
  ck_assert_int_eq(hipd_grant_add(root, USER_A, &dev7, 1, 0, NULL, NULL),
                   HIPD_ENODEV);
  ck_assert_str_eq(hipd_last_error(root),
                   "grant.add: device 7: this daemon serves 2 devices (ids 0 "
                   "to 1)");
  ck_assert_int_eq(hipd_grant_add(root, USER_A, &dev99, 1, 0, NULL, NULL),
                   HIPD_EPARAMS);
  ck_assert_msg(strstr(hipd_last_error(root), "param 1 (devices)"), "%s",
                hipd_last_error(root));
  ck_assert_int_eq(hipd_grant_add(root, USER_A, NULL, 0, 0, NULL, NULL),
                   HIPD_EPARAMS);
  ck_assert_msg(strstr(hipd_last_error(root), "at least one device"), "%s",
                hipd_last_error(root));
  ck_assert_int_eq(
      hipd_grant_add(root, USER_A, &dev0, 1, 0, "bad label!", NULL),
      HIPD_EPARAMS);
  ck_assert_msg(strstr(hipd_last_error(root), "label"), "%s",
                hipd_last_error(root));
  ck_assert_int_eq(hipd_grant_add(root, USER_A, &dev0, 1, 0, "dup", NULL), 0);
  ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev0, 1, 0, "dup", NULL),
                   HIPD_EEXIST);
  ck_assert_str_eq(hipd_last_error(root),
                   "grant.add: a grant labelled 'dup' exists already");
  ck_assert_int_eq(hipd_grant_revoke(root, "nothing", NULL, NULL), HIPD_ENOENT);
  ck_assert_str_eq(hipd_last_error(root), "grant.revoke: no grant 'nothing'");
  ck_assert_int_eq(hipd_grant_revoke(root, "dup", USER_B, NULL), HIPD_ENOENT);
  ck_assert_int_eq(hipd_grant_revoke(root, NULL, NULL, NULL), HIPD_EPARAMS);
  /* A user holds at most 8 grants at once (a count slot each); one
   * revoked makes room again. */
  for (int i = 0; i < 8; i++) {
    char label[16];
    snprintf(label, sizeof(label), "b%d", i);
    ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev0, 1, 0, label, NULL), 0);
  }
  ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev0, 1, 0, "b8", NULL),
                   HIPD_ETOOMANY);
  ck_assert_msg(strstr(hipd_last_error(root), "has 8 grants already"), "%s",
                hipd_last_error(root));
  ck_assert_int_eq(hipd_grant_revoke(root, "b3", NULL, NULL), 0);
  ck_assert_int_eq(hipd_grant_add(root, USER_B, &dev0, 1, 0, "b8", NULL), 0);
  /* By uid, which needs no account name. */
  {
    char uid[16];
    snprintf(uid, sizeof(uid), "%u", (unsigned)uid_a);
    ck_assert_int_eq(hipd_grant_revoke(root, NULL, uid, NULL), 0);
  }
  hipd_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* An admin revokes a grant its own session came under: it gets the
 * answer, then its session closes with the documented reason. */
START_TEST(test_self_revoke)
{
  const char *modes[] = {"uid", "none"};

  for (int m = 0; m < 2; m++) {
    harness_daemon_t *d = start(modes[m]);
    hipd_conn_t *root = admin_open(d), *under;
    const int dev0 = 0;
    hipd_info_t *rv = NULL;
    uint64_t v = 0;
    char buf[8];
    size_t got;

    ck_assert_int_eq(hipd_grant_add(root, "root", &dev0, 1, 0, "self", NULL),
                     0);
    under = admin_open(d);
    ck_assert_int_eq(hipd_grant_revoke(under, "self", NULL, &rv), 0);
    ck_assert_int_eq(hipd_info_uint(rv, "0.sessions", &v), 0);
    ck_assert_uint_eq(v, 1);
    hipd_info_free(rv);
    ck_assert(harness_log_wait(d, "access revoked: grant 'self' ended", 5000));
    ck_assert_int_eq(hipd_ping(under, "x", 1, buf, sizeof(buf), &got),
                     HIPD_EDISCONNECTED);
    ck_assert_int_eq(hipd_ping(root, "x", 1, buf, sizeof(buf), &got), 0);
    hipd_close(under);
    hipd_close(root);
    ck_assert_int_eq(harness_stop(d), 0);
    harness_free(d);
  }
}
END_TEST

int main(void)
{
  Suite *s = suite_create("grants");
  TCase *tc;
  int failed;

  if (geteuid() != 0) {
    printf("check_grants: SKIP: needs root to create the test users " USER_A
           " and " USER_B " and to run clients as them\n");
    return 77;
  }
  setenv("HIPD_TEST_TMP", "/tmp", 1);
  harness_init("grants");
  if (users_make(USER_A, &uid_a, NULL) != 0 ||
      users_make(USER_B, &uid_b, NULL) != 0 || getpwnam("hipd") == NULL) {
    printf("check_grants: SKIP: cannot create the test users\n");
    harness_fini();
    return 77;
  }
  tc = tcase_create("grants");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_grant_revoke_workers);
  tcase_add_test(tc, test_grant_revoke_none);
  tcase_add_test(tc, test_non_admin);
  tcase_add_test(tc, test_quota);
  tcase_add_test(tc, test_quota_session_workers);
  tcase_add_test(tc, test_reload);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_self_revoke);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
