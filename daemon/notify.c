/* SPDX-License-Identifier: MIT */
/* daemon/notify.c: sd_notify datagrams to $NOTIFY_SOCKET, without
 * libsystemd. See notify.h. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "notify.h"

static struct {
  int fd; /* -1: off */
  struct sockaddr_un addr;
  socklen_t addrlen;
  uint64_t watchdog_usec;
  uv_timer_t watchdog; /* watchdog.data != NULL once started */
  char last_status[512];
} notifier = {.fd = -1};

/* $WATCHDOG_USEC, if it is meant for this process (sd_watchdog_enabled's
 * rules): a positive number, and $WATCHDOG_PID absent or our pid. */
static uint64_t watchdog_from_env(void)
{
  const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
  unsigned long long v;
  char *end;

  if (us == NULL || us[0] < '0' || us[0] > '9')
    return 0;
  errno = 0;
  v = strtoull(us, &end, 10);
  if (errno != 0 || *end != '\0' || v == 0)
    return 0;
  if (pid != NULL && pid[0] != '\0') {
    long p = strtol(pid, &end, 10);
    if (*end != '\0' || p != (long)getpid())
      return 0;
  }
  return v;
}

int notify_open(void)
{
  const char *path = getenv("NOTIFY_SOCKET");
  size_t len;

  if (notifier.fd >= 0)
    return 0;
  if (path == NULL || path[0] == '\0')
    return 0;
  len = strlen(path);
  /* A path, or an abstract name ('@' stands for the leading NUL). Other
   * forms (vsock:) are not for a service on this host's systemd. */
  if ((path[0] != '/' && path[0] != '@') || len < 2 ||
      len > sizeof(notifier.addr.sun_path) - (path[0] == '/')) {
    log_warn(0,
             "NOTIFY_SOCKET=%s is not a Unix socket path or abstract name: "
             "systemd is not told of readiness",
             path);
    return HIPD_EINVAL;
  }
  memset(&notifier.addr, 0, sizeof(notifier.addr));
  notifier.addr.sun_family = AF_UNIX;
  memcpy(notifier.addr.sun_path, path, len);
  if (path[0] == '@') {
    notifier.addr.sun_path[0] = '\0';
    notifier.addrlen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  } else {
    notifier.addrlen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
  }
  notifier.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (notifier.fd < 0) {
    log_warn(0, "notify socket: %s: systemd is not told of readiness",
             strerror(errno));
    return HIPD_EIO;
  }
  notifier.watchdog_usec = watchdog_from_env();
  return 0;
}

int notify_send(const char *msg)
{
  ssize_t n;

  if (notifier.fd < 0)
    return HIPD_EINVAL;
  do
    n = sendto(notifier.fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT,
               (const struct sockaddr *)&notifier.addr, notifier.addrlen);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    /* The first failure is worth a warning (a wrong address, a manager
     * gone); a full queue is not. */
    static int warned;
    if (errno != EAGAIN && !warned) {
      warned = 1;
      log_warn(0, "NOTIFY_SOCKET: %s (further failures at debug level)",
               strerror(errno));
    } else {
      log_debug(0, "NOTIFY_SOCKET: '%.20s...' not sent: %s", msg,
                strerror(errno));
    }
    return HIPD_EIO;
  }
  return 0;
}

void notify_status(const char *status)
{
  char msg[sizeof(notifier.last_status) + 8];

  if (notifier.fd < 0 ||
      strncmp(status, notifier.last_status, sizeof(notifier.last_status)) == 0)
    return;
  snprintf(msg, sizeof(msg), "STATUS=%s", status);
  if (notify_send(msg) == 0)
    snprintf(notifier.last_status, sizeof(notifier.last_status), "%s", status);
}

uint64_t notify_watchdog_usec(void)
{
  return notifier.fd >= 0 ? notifier.watchdog_usec : 0;
}

static void watchdog_cb(uv_timer_t *t)
{
  (void)t;
  notify_send("WATCHDOG=1");
}

int notify_watchdog_start(uv_loop_t *loop)
{
  uint64_t ms;
  int rc;

  if (notify_watchdog_usec() == 0 || notifier.watchdog.data != NULL)
    return 0;
  ms = notifier.watchdog_usec / 2000;
  if (ms == 0)
    ms = 1;
  if ((rc = uv_timer_init(loop, &notifier.watchdog)) != 0)
    return rc;
  notifier.watchdog.data = &notifier;
  /* One now: the period starts when systemd started us, not at READY. */
  notify_send("WATCHDOG=1");
  uv_timer_start(&notifier.watchdog, watchdog_cb, ms, ms);
  uv_unref((uv_handle_t *)&notifier.watchdog);
  log_info(0, "watchdog: WATCHDOG=1 every %llu ms (WatchdogSec %llu ms)",
           (unsigned long long)ms,
           (unsigned long long)(notifier.watchdog_usec / 1000));
  return 0;
}

void notify_close(void)
{
  if (notifier.fd >= 0)
    close(notifier.fd);
  notifier.fd = -1;
}
