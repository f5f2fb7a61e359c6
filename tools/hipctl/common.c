/* SPDX-License-Identifier: MIT */
/* tools/hipctl/common.c: what every hipctl command uses: connecting with
 * the global options, the exit status a library code means, and the one
 * way hipctl(1) documents that errors and usage mistakes are printed:
 *
 *   hipctl: kill 42: ENOENT: session.kill: no session 42
 *
 * It calls no command and nothing of main.c.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hipctl.h"

int hipctl_help(const char *arg, const char *text)
{
  if (arg == NULL || (strcmp(arg, "-h") != 0 && strcmp(arg, "--help") != 0))
    return 0;
  fputs(text, stdout);
  return 1;
}

int hipctl_usage(hipctl_t *h, const char *fmt, ...)
{
  va_list ap;

  fprintf(stderr, "hipctl: %s: ", h->cmd ? h->cmd : "usage");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see hipctl %s --help)\n", h->cmd ? h->cmd : "");
  return HIPCTL_EXIT_USAGE;
}

/* The exit status a library code means. */
static int exit_of(int err)
{
  switch (err) {
  case HIPD_ECONNECT:
  case HIPD_EDISCONNECTED:
  case HIPD_ESHUTDOWN:
  case HIPD_ETIMEDOUT:
    return HIPCTL_EXIT_CONNECT;
  case HIPD_EPERM:
    return HIPCTL_EXIT_PERM;
  default:
    return HIPCTL_EXIT_ERROR;
  }
}

int hipctl_fail(hipctl_t *h, const char *what, int err)
{
  const char *msg = hipd_last_error(h->conn);

  if (msg == NULL || *msg == '\0')
    msg = hipd_strerror(err);
  fprintf(stderr, "hipctl: %s%s%s: %s: %s\n", h->cmd, what ? " " : "",
          what ? what : "", hipd_err_name(err), msg);
  return exit_of(err);
}

int hipctl_connect(hipctl_t *h)
{
  int err;

  if (h->conn != NULL)
    return 0;
  err = hipd_connect2(h->socket, "hipctl", &h->conn);
  if (err < 0) {
    const char *msg = hipd_last_error(NULL);
    fprintf(stderr, "hipctl: %s: cannot connect to hipd%s%s: %s: %s\n", h->cmd,
            h->socket ? " at " : "", h->socket ? h->socket : "",
            hipd_err_name(err), msg && *msg ? msg : hipd_strerror(err));
    h->conn = NULL;
    return exit_of(err);
  }
  if (h->timeout_ms > 0)
    hipd_set_timeout(h->conn, h->timeout_ms);
  return 0;
}
