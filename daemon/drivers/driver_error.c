/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver_error.c: the thread-local driver error text
 * (driver_error.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "driver_error.h"

static _Thread_local char last_error[512];

void drv_set_error(const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
}

const char *drv_last_error(void)
{
  return last_error;
}
