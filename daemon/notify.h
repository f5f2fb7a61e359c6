/* SPDX-License-Identifier: MIT */
/* daemon/notify.h: messages to the service manager (the sd_notify(3)
 * protocol), without libsystemd.
 *
 * systemd (Type=notify) gives the service the address of a datagram
 * socket in $NOTIFY_SOCKET: a path, or an abstract name written with a
 * leading '@'. Each message is one datagram of newline-separated
 * VARIABLE=value lines (READY=1, STOPPING=1, STATUS=..., MAINPID=...,
 * WATCHDOG=1, and RELOADING=1 with MONOTONIC_USEC= around a SIGHUP
 * reload, then READY=1 again). hipd writes them itself, so that a build without
 * libsystemd still reports readiness to a Type=notify unit. Without
 * $NOTIFY_SOCKET every call here does nothing.
 *
 * Only the process systemd started (the listener, or the single process
 * of --isolation none) notifies: workers are started without
 * NOTIFY_SOCKET (privsep/workers.c) and never call notify_open().
 *
 * Loop thread only.
 */
#ifndef HIPD_NOTIFY_H
#define HIPD_NOTIFY_H

#include <stdint.h>
#include <uv.h>

/* Open the socket $NOTIFY_SOCKET names, and read $WATCHDOG_USEC (taken
 * when $WATCHDOG_PID is absent or this process's pid). The environment is
 * left as it is (an in-place restart exec()s with it). @return 0 (also
 * when there is no $NOTIFY_SOCKET: notifying is then off), or a negative
 * code when the address is unusable (logged; notifying stays off). */
int notify_open(void);

/* Send @p msg (VARIABLE=value lines) as one datagram. Never blocks: a
 * message the manager's full queue does not take is dropped (logged at
 * debug). @return 0, or a negative code (nothing sent, or off). */
int notify_send(const char *msg);

/* Send STATUS=@p status, unless it is the status sent last. */
void notify_status(const char *status);

/* The watchdog period systemd asked for (WatchdogSec=), in microseconds;
 * 0 when there is none (or notifying is off). */
uint64_t notify_watchdog_usec(void);

/* With a watchdog period, send WATCHDOG=1 at half of it from a timer on
 * @p loop (it proves the loop runs). The timer keeps no loop alive.
 * @return 0 or a libuv error. */
int notify_watchdog_start(uv_loop_t *loop);

/* Close the socket, after the loop's last run (the watchdog timer is
 * closed with the loop's other handles). */
void notify_close(void);

#endif
