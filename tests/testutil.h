/* tests/testutil.h: small helpers shared by the integration tests. */
#ifndef HIPD_TESTS_TESTUTIL_H
#define HIPD_TESTS_TESTUTIL_H

#include <check.h>
#include <stdlib.h>

#include "harness.h"
#include "hipd.h"

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
