/* SPDX-License-Identifier: MIT */
/* daemon/metrics/http.h: the metrics process, hipd's HTTP face.
 *
 * hipd --worker=metrics, started by the listener (privsep/metrics.h) with
 * its channel at descriptor 3 and the bound, listening TCP socket of
 * --metrics-listen at descriptor 4. It becomes the --user account (when
 * started as root), enters its sandbox (no capabilities, not dumpable,
 * Landlock with no path, the "metrics" seccomp profile: no new socket, no
 * process, no exec), then serves HTTP with libmicrohttpd's own threads:
 * GET or HEAD of /metrics answers the listener's text (Content-Type
 * text/plain; version=0.0.4), any other path 404, any other method 405.
 * A scrape is handed to this process's libuv loop (uv_async), which asks
 * the listener ("metrics" []) and hands the answer back; no answer within
 * 5 s is a 503. When the channel closes (the listener is gone), it exits.
 *
 * Process: the whole of it. Built only with libmicrohttpd.
 */
#ifndef HIPD_METRICS_HTTP_H
#define HIPD_METRICS_HTTP_H

#include "daemon.h"

/* Run the metrics process until its listener goes. @return the process's
 * exit status (0 when the listener closed the channel). */
int metrics_http_main(daemon_t *d);

#endif
