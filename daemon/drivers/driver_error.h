/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver_error.h: the thread-local text a driver attaches
 * to the code it returns. Below every driver and the driver list. */
#ifndef HIPD_DRIVER_ERROR_H
#define HIPD_DRIVER_ERROR_H

/* How a driver attaches a message to the code it returns, as errno or
 * cudaGetLastError() do: the driver_t functions return 0 or a negative
 * HIPD_E* code, and on failure set a thread-local message here. It is not
 * a second error carrier: the caller copies it at once, on the same
 * thread and before any other driver call, into the hipd_err_t of
 * util/err.h (task_fail() into task_t.err: objects/, kernels/, shm.c,
 * device.c's reset, methods/device.c) or into a log line (device.c's
 * probe), or a compile log (kernels.c). Kept thread-local so that the
 * driver interface stays a plain table of functions returning codes. */

/* Describe the current thread's last driver failure (printf-style). */
void drv_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The current thread's last driver failure text ("" if none). */
const char *drv_last_error(void);

#endif
