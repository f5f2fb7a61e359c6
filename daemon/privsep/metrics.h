/* SPDX-License-Identifier: MIT */
/* daemon/privsep/metrics.h: the listener's side of --metrics-listen.
 *
 * hipd's listener (or the single process of --isolation none) never
 * parses HTTP: it binds the TCP socket of --metrics-listen at start (so a
 * privileged port works and a bad address stops hipd at once), and starts
 * the metrics process, this program again with --worker=metrics, the
 * listening socket at descriptor 4 and a channel (ipc.h) at descriptor 3.
 * That process (daemon/metrics/http.h) becomes the --user account, enters
 * its sandbox and serves HTTP with libmicrohttpd; for each scrape it asks
 * here ("metrics" [], answered with the text of admin_metrics_text(), the
 * admin view). A metrics process that dies is logged and started again
 * after a back-off (1 s, doubling up to 60 s); hipd goes on serving
 * meanwhile. The same process serves every --isolation mode.
 *
 * Loop thread only.
 */
#ifndef HIPD_PRIVSEP_METRICS_H
#define HIPD_PRIVSEP_METRICS_H

#include <stdint.h>
#include <sys/socket.h>

#include "daemon.h"
#include "util/err.h"

/* Where the metrics process's socket is: the descriptors it gets. */
#define METRICS_CHANNEL_FD 3
#define METRICS_LISTEN_FD 4

/* Parse @p spec, "ADDR:PORT" with a numeric IPv4 address or a bracketed
 * IPv6 one ("127.0.0.1:9464", "[::1]:9464"), port 1 to 65535, into
 * @p ss / @p len; *@p loopback says whether the address is a loopback
 * one. @return 0, or HIPD_EINVAL with @p err naming the problem. */
int metrics_addr_parse(const char *spec, struct sockaddr_storage *ss,
                       socklen_t *len, int *loopback, hipd_err_t *err);

/* With --metrics-listen set: bind and listen on its address (a
 * non-loopback one is logged as a warning). @return 0 (also when the
 * option is unset), or a negative code with @p err saying
 * "--metrics-listen ADDR: address in use" or the like. */
int metrics_init(daemon_t *d, hipd_err_t *err);

/* Start the metrics process (nothing without --metrics-listen); @p argv
 * is hipd's command line, which it gets too. Failures are logged and
 * retried with the back-off; hipd goes on. */
void metrics_start(daemon_t *d, char **argv);

/* Shutdown: no restart any more; the metrics process is told to stop
 * (SIGTERM) on the first call, killed when @p force. @return 1 while it
 * or a handle of this module is still there, else 0. */
uint32_t metrics_stop(daemon_t *d, int force);

/* Serve the listener's side of a metrics channel at @p fd (one end of a
 * socket pair) as if a metrics process were there, without one: for the
 * wire's fuzz target (tests/fuzz/fuzz_ipc.c), which plays the process.
 * The channel closes on EOF or a malformed message; no restart follows.
 * @return 0, HIPD_EBUSY while a metrics process or another such channel
 * is there, or a negative code. */
int metrics_adopt(daemon_t *d, int fd);

/* The metrics process's pid, 0 when none runs (tests, the status line). */
int metrics_pid(const daemon_t *d);

#endif
