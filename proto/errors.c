/* SPDX-License-Identifier: MIT */
/* proto/errors.c: names and messages of the error table in hipd.h. */
#include <string.h>

#include "hipd.h"

const char *hipd_strerror(int err)
{
  switch (err) {
#define XX(name, num, msg)                                                     \
  case num:                                                                    \
    return msg;
    HIPD_ERRNO_MAP(XX)
#undef XX
  case 0:
    return "success";
  default:
    return "unknown error";
  }
}

const char *hipd_err_name(int err)
{
  switch (err) {
#define XX(name, num, msg)                                                     \
  case num:                                                                    \
    return #name;
    HIPD_ERRNO_MAP(XX)
#undef XX
  case 0:
    return "OK";
  default:
    return "UNKNOWN";
  }
}

int hipd_err_from_name(const char *name)
{
#define XX(ename, num, msg)                                                    \
  if (strcmp(name, #ename) == 0)                                               \
    return num;
  HIPD_ERRNO_MAP(XX)
#undef XX
  return 0;
}
