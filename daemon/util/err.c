/* SPDX-License-Identifier: MIT */
/* daemon/util/err.c: the error carrier (err.h). */
#include "config.h"

#include <stdio.h>

#include "util/err.h"

int err_setv(hipd_err_t *e, int code, const char *fmt, va_list ap)
{
  if (e == NULL)
    return code;
  e->code = code;
  vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
  return code;
}

int err_set(hipd_err_t *e, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  err_setv(e, code, fmt, ap);
  va_end(ap);
  return code;
}
