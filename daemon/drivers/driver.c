/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver.c: the list of compiled-in drivers. */
#include "config.h"

#include "driver.h"

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
