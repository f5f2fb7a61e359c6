/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_shm.c: host memory shared with clients, for the HIP
 * driver (driver.h's host_register, host_unregister, host_map and
 * host_unmap).
 */
#include "config.h"

#include "hip_internal.h"

#include <stdio.h>

#include "drivers/driver.h"
#include "hipd.h"

/* Portable: page-locked for every device, not only the current one;
 * mapped: a device address exists for it (zero-copy buffers). */
int hip_host_register(driver_t *drv, void *addr, size_t size)
{
  hipError_t err;

  (void)drv;
  err = hipHostRegister(addr, size,
                        hipHostRegisterPortable | hipHostRegisterMapped);
  if (err != hipSuccess) {
    char call[80];

    snprintf(call, sizeof(call), "hipHostRegister of %zu bytes", size);
    return hip_report_error(call, err);
  }
  return 0;
}

int hip_host_unregister(driver_t *drv, void *addr)
{
  hipError_t err;

  (void)drv;
  err = hipHostUnregister(addr);
  if (err != hipSuccess)
    return hip_report_error("hipHostUnregister", err);
  return 0;
}

int hip_host_map(driver_t *drv, int dev, void *addr, size_t size, int fd,
                 drv_mem_t *out)
{
  void *dptr = NULL;
  hipError_t err;
  int can = 0, prev, rc;

  (void)drv;
  (void)fd;
  err = hipDeviceGetAttribute(&can, hipDeviceAttributeCanMapHostMemory, dev);
  if (err != hipSuccess)
    return hip_report_error("hipDeviceGetAttribute(CanMapHostMemory)", err);
  if (!can) {
    drv_set_error("device %d cannot map host memory", dev);
    return HIPD_ENOTSUP;
  }
  if ((rc = hip_enter_device(dev, &prev)) != 0)
    return rc;
  err = hipHostGetDevicePointer(&dptr, addr, 0);
  hip_leave_device(dev, prev);
  if (err != hipSuccess)
    return hip_report_error("hipHostGetDevicePointer", err);
  out->ptr = dptr;
  out->size = size;
  out->fd = -1;
  return 0;
}

int hip_host_unmap(driver_t *drv, int dev, drv_mem_t *mem)
{
  (void)drv;
  (void)dev;
  mem->ptr = NULL;
  return 0;
}
