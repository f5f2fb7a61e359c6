/* SPDX-License-Identifier: MIT */
/* tests/testutil.h: small helpers shared by the integration tests (the
 * programs that start a real hipd through tests/harness.c). Everything here
 * is static inline, so a program pays only for what it uses.
 *
 * A program may define, before including this header:
 *   TESTUTIL_CLIENT      the client name connect_to() gives the daemon
 *                        (its log names it), and
 *   TESTUTIL_TIMEOUT_MS  the call timeout of those connections;
 *   TESTUTIL_MAX_DEVICES the most devices device_count() accepts (for
 *                        arrays of that size).
 */
#ifndef HIPD_TESTS_TESTUTIL_H
#define HIPD_TESTS_TESTUTIL_H

#include <check.h>
#include <stdint.h>
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
  ck_assert_msg(rc == 0, "connect to %s: %s (%s)", d->socket, hipd_err_name(rc),
                hipd_last_error(NULL));
  hipd_set_timeout(conn, timeout_ms);
  return conn;
}

#ifdef TESTUTIL_CLIENT
#ifndef TESTUTIL_TIMEOUT_MS
#define TESTUTIL_TIMEOUT_MS 60000
#endif
/* Connect to @p d as this program (TESTUTIL_CLIENT), failing the test on
 * error. */
static inline hipd_conn_t *connect_to(const harness_daemon_t *d)
{
  return connect_named(d, TESTUTIL_CLIENT, TESTUTIL_TIMEOUT_MS);
}
#endif

/* A ping with a 6-byte payload, which must come back unchanged. */
static inline void ping_ok(hipd_conn_t *conn)
{
  char out[16];
  size_t n = 0;
  int rc = hipd_ping(conn, "alive?", 6, out, sizeof(out), &n);

  ck_assert_msg(rc == 0, "ping: %s (%s)", hipd_err_name(rc),
                hipd_last_error(conn));
  ck_assert_uint_eq(n, 6);
  ck_assert_int_eq(memcmp(out, "alive?", 6), 0);
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

/* The daemon's device count: at least 2, and at most TESTUTIL_MAX_DEVICES
 * where the program defines it. */
static inline int device_count(hipd_conn_t *conn)
{
  int n = device_count_min2(conn);

#ifdef TESTUTIL_MAX_DEVICES
  ck_assert_int_le(n, TESTUTIL_MAX_DEVICES);
#endif
  return n;
}

/* calloc() that fails the test instead of returning NULL (0 bytes: 1). */
static inline void *xmalloc(size_t n)
{
  void *p = calloc(1, n ? n : 1);

  ck_assert_ptr_nonnull(p);
  return p;
}

/* A new kernel argument list. */
static inline hipd_args_t *args_new(void)
{
  hipd_args_t *a = hipd_args_new();

  ck_assert_ptr_nonnull(a);
  return a;
}

/* Fields of a device.get, daemon.info... record; a missing field or one of
 * another type fails the test. */
static inline int64_t info_int(const hipd_info_t *info, const char *path)
{
  int64_t v = 0;
  int rc = hipd_info_int(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

static inline uint64_t info_uint(const hipd_info_t *info, const char *path)
{
  uint64_t v = 0;
  int rc = hipd_info_uint(info, path, &v);

  ck_assert_msg(rc == 0, "info field %s: %s", path, hipd_err_name(rc));
  return v;
}

static inline double info_double(const hipd_info_t *info, const char *path)
{
  double v = 0;
  int rc = hipd_info_double(info, path, &v);

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
