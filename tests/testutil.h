/* tests/testutil.h: small helpers shared by the integration tests. */
#ifndef HIPD_TESTS_TESTUTIL_H
#define HIPD_TESTS_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hipd.h"

/* Assert that a call returns @p want, naming the device (a variable `dev`
 * in scope), the call, its error and the daemon's message. */
#define EXPECT(conn, expr, want)                                               \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    ck_assert_msg(rc_ == (want), "device %d: %s -> %s (%s), expected %s", dev, \
                  #expr, rc_ == 0 ? "0" : hipd_err_name(rc_),                  \
                  hipd_last_error(conn),                                       \
                  (want) == 0 ? "0" : hipd_err_name(want));                    \
  } while (0)
#define OK(conn, expr) EXPECT(conn, expr, 0)

/* Connect to daemon @p d as @p name; a hung daemon fails the test after
 * @p timeout_ms instead of hanging it. */
static inline hipd_conn_t *connect_named(const harness_daemon_t *d,
                                         const char *name, int timeout_ms)
{
  hipd_conn_t *conn = NULL;
  int rc;

  ck_assert_msg(d != NULL, "no daemon");
  rc = hipd_connect2(d->socket, name, &conn);
  ck_assert_msg(rc == 0, "connect: %s (%s)", hipd_err_name(rc),
                hipd_last_error(NULL));
  hipd_set_timeout(conn, timeout_ms);
  return conn;
}

/* Stop daemon *@p d (if any) and free it; its log is printed if it exited
 * with an error, and the test then fails. */
static inline void stop_checked(harness_daemon_t **d)
{
  int code;

  if (*d == NULL)
    return;
  code = harness_stop(*d);
  if (code != 0)
    harness_log_dump(*d);
  harness_free(*d);
  *d = NULL;
  ck_assert_msg(code == 0, "hipd exited with %d", code);
}

/* The daemon's device count, which these suites need to be at least 2. */
static inline int device_count_min2(hipd_conn_t *conn)
{
  int n = -1, dev = -1;

  OK(conn, hipd_device_count(conn, &n));
  ck_assert_int_ge(n, 2);
  return n;
}

static inline int64_t info_int(const hipd_info_t *info, const char *path)
{
  int64_t v = 0;
  int rc = hipd_info_int(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

static inline int info_bool(const hipd_info_t *info, const char *path)
{
  int v = 0;
  int rc = hipd_info_bool(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

static inline const char *info_str(const hipd_info_t *info, const char *path)
{
  const char *s = NULL;
  size_t len = 0;
  int rc = hipd_info_str(info, path, &s, &len);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return s;
}

/* Is @p s one of the strings of the array at @p path? */
static inline int info_has_str(const hipd_info_t *info, const char *path,
                               const char *s)
{
  int n = hipd_info_len(info, path);

  for (int i = 0; i < n; i++) {
    char p[128];
    const char *v = NULL;
    snprintf(p, sizeof(p), "%s%s%d", path, path[0] ? "." : "", i);
    if (hipd_info_str(info, p, &v, NULL) == 0 && strcmp(v, s) == 0)
      return 1;
  }
  return 0;
}

/* Is device @p dev the host (a CPU device)? */
static inline int device_is_cpu(hipd_conn_t *conn, int dev)
{
  hipd_info_t *info = NULL;
  int cpu;

  int rc = hipd_device_get(conn, dev, &info);

  ck_assert_msg(rc == 0, "device.get %d: %s", dev, hipd_last_error(conn));
  cpu = info_bool(info, "is_cpu");
  hipd_info_free(info);
  return cpu;
}

#endif
