/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver.c: the list of compiled-in drivers and the
 * thread-local driver error text. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "driver.h"

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

driver_t **drivers_compiled(void)
{
  static driver_t *list[3];

  if (list[0] == NULL) {
    int n = 0;
#ifdef HAVE_HIP
    list[n++] = driver_hip();
#endif
    list[n++] = driver_cpu();
    list[n] = NULL;
  }
  return list;
}
