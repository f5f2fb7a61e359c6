/* SPDX-License-Identifier: MIT */
/* daemon/util/err.h: the one carrier of an error between layers: a code
 * and a bounded message that names the problem, as it goes on the wire
 * ("mem.write: offset 4096 + 8192 bytes exceeds buffer of 8192 bytes").
 *
 * A compiler's log is not an error message: it stays a buffer of its own
 * (kernels.c's build log), and a driver's last message stays the
 * thread-local drv_last_error() of drivers/driver.h, read right after the
 * call that failed. */
#ifndef HIPD_UTIL_ERR_H
#define HIPD_UTIL_ERR_H

#include <stdarg.h>

#define HIPD_ERR_MSG_MAX 256

typedef struct {
  int code;                   /* 0 or a negative HIPD_E* code */
  char msg[HIPD_ERR_MSG_MAX]; /* "" or what failed, NUL-terminated */
} hipd_err_t;

/* Set @p e to @p code and a printf-formatted message (truncated to fit).
 * @return code, so that `return err_set(e, HIPD_EINVAL, ...)` reads.
 * @p e may be NULL: then only the code is returned. */
int err_set(hipd_err_t *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int err_setv(hipd_err_t *e, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* No error: code 0, empty message. */
static inline void err_clear(hipd_err_t *e)
{
  e->code = 0;
  e->msg[0] = '\0';
}

#endif
