/* SPDX-License-Identifier: MIT */
/* daemon/server.h: the listening Unix socket. */
#ifndef HIPD_SERVER_H
#define HIPD_SERVER_H

#include "daemon.h"

/* Listen on d->cfg.socket_path (or adopt d->cfg.listen_fd). A stale socket
 * file is removed only when no daemon answers on it. The socket gets mode
 * d->cfg.socket_mode. @return 0, or a negative HIPD_E* code after logging
 * why. */
int server_start(daemon_t *d);

/* Stop accepting, close the socket and remove its file if we created it.
 * Safe to call more than once. */
void server_stop(daemon_t *d, int keep_file);

/* For an in-place restart: a duplicate of the listening socket (without
 * close-on-exec), or -1. Call before server_stop(d, 1). */
int server_dup_listener(daemon_t *d);

/* The default socket path: $HIPD_SOCKET, else /run/hipd/hipd.sock for root,
 * else $XDG_RUNTIME_DIR/hipd.sock. @return a malloc'd string. */
char *server_default_path(void);

#endif
