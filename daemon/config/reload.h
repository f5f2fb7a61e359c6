/* SPDX-License-Identifier: MIT */
/* daemon/config/reload.h: SIGHUP, the configuration read again.
 *
 * A reload reads hipd.conf and the command line hipd was started with
 * again (options_load()), builds the access policy, and only then, all or
 * nothing, copies what a reload may change (the OPTION_RELOAD rows of
 * options.c's table) into the running configuration; the OPTION_RESTART
 * options that differ from the start are logged as needing a restart.
 * The listener tells its workers the new options; a worker applies what
 * its listener read. Loop thread.
 */
#ifndef HIPD_CONFIG_RELOAD_H
#define HIPD_CONFIG_RELOAD_H

#include "daemon.h"

/* Keep what a reload needs: the configuration at start (a copy, for the
 * restart-only comparison), the command line (@p argv must outlive the
 * daemon) and the options workers are started with (@p worker_args, from
 * options_load(); owned from now on). @return 0 or HIPD_ENOMEM. */
int reload_init(const daemon_config_t *cfg, int argc, char **argv,
                char **worker_args);
/* The options workers are started with now (reload_init()'s, or the last
 * reload's). */
char **reload_worker_args(void);
/* SIGHUP in the listener or the single process. When the device rules
 * change, a worker checks them first without blocking the loop: the
 * reload finishes when it is done. */
void reload_start(daemon_t *d);
/* A worker's reload: the options its listener read (worker_on_reload()). */
void reload_worker(daemon_t *d, int argc, char **argv);
/* Free what reload_init() kept. */
void reload_fini(void);

#endif
