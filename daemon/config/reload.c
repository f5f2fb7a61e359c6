/* SPDX-License-Identifier: MIT */
/* daemon/config/reload.c: SIGHUP, the configuration read again
 * (reload.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "drivers/cpu/cpu.h"
#include "hipd.h"
#include "log.h"
#include "notify.h"
#include "objects/watchdog.h"
#include "options.h"
#include "policy.h"
#include "privsep/mps.h"
#include "privsep/workers.h"
#include "reload.h"
#include "sandbox/cgroup.h"
#include "util/clock.h"

/* What reload_init() kept, and a reload waiting for its worker check
 * (workers_probe_start()). */
static struct {
  daemon_config_t start_cfg; /* the configuration at start */
  int argc;
  char **argv;
  char **worker_args; /* what workers are started with */
  int pending;        /* a reload waits for its probe worker */
  daemon_config_t nc; /* ... with this configuration */
  char **args;        /* ... and these worker options */
} reload_state;

int reload_init(const daemon_config_t *cfg, int argc, char **argv,
                char **worker_args)
{
  reload_state.argc = argc;
  reload_state.argv = argv;
  reload_state.worker_args = worker_args;
  return options_copy(&reload_state.start_cfg, cfg);
}

char **reload_worker_args(void)
{
  return reload_state.worker_args;
}

void reload_fini(void)
{
  options_free(&reload_state.start_cfg);
  options_args_free(reload_state.worker_args);
  reload_state.worker_args = NULL;
}

/*
 * Make @p nc the running configuration of what can change at run time
 * (the table's OPTION_RELOAD rows): the log level, the limits, quotas and
 * timeouts (read where they are checked, so a new session, request or
 * allocation meets the new value; a session's handle table is sized when
 * it opens), and the access policy (checked at accept, and at each device
 * use against the device rules of the session's connect) and, in the
 * listener, --mps-tenants (for the workers it starts next). The access
 * policy and the --mps-tenants list are built first: if either fails,
 * nothing changes. @p nc keeps the old values, for options_free().
 * @return 0 or their error (logged).
 */
static int config_apply(daemon_t *d, daemon_config_t *nc)
{
  daemon_t probe = *d;
  hipd_err_t err;
  int rc;

  probe.cfg = *nc;
  if ((rc = policy_init(&probe, &err)) != 0) {
    log_error(0, "%s", err.msg[0] ? err.msg : hipd_strerror(err.code));
    return rc;
  }
  if (d->role == ROLE_LISTENER &&
      (rc = mps_tenants_set(nc->mps_tenants, &err)) != 0) {
    log_error(0, "%s", err.msg);
    policy_free(&probe);
    return rc;
  }
  policy_free(d);
  d->policy = probe.policy;
  options_apply(&d->cfg, nc);
  log_set_level(d->cfg.log_level);
  log_set_tenant_rate(d->cfg.log_tenant_rate);
  if (d->cfg.tenant_host_mem == 0)
    d->cfg.tenant_host_mem = cgroup_default_tenant_mem();
  if (d->role != ROLE_WORKER)
    cgroup_set_tenant_limits(d->cfg.tenant_host_mem, d->cfg.tenant_max_pids);
  if (d->role != ROLE_LISTENER) {
    cpu_driver_set_launch_timeout(d->cfg.cpu_kernel_timeout_ms);
    watchdog_set_timeout(d->cfg.gpu_kernel_timeout_ms);
  }
  return 0;
}

static int device_rules_differ(const daemon_config_t *a,
                               const daemon_config_t *b)
{
  return options_differ(options_find("device-allow"), a, b);
}

static void notify_reloading(void)
{
  char msg[96];

  snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
           (unsigned long long)(util_now_ns() / 1000));
  notify_send(msg);
}

/* The reload's second half: apply @p nc (the options @p args), then free
 * both. */
static void reload_apply(daemon_t *d, daemon_config_t *nc, char **args)
{
  char restart[256];
  const char *path = options_file(&d->cfg);

  if (config_apply(d, nc) != 0) {
    log_error(0, "reload failed: the running configuration is kept");
    goto done;
  }
  options_restart_changes(&reload_state.start_cfg, nc, restart,
                          sizeof(restart));
  if (restart[0] != '\0')
    log_warn(0, "changed in %s, needs a restart: %s",
             path != NULL ? path : "the configuration", restart);
  if (d->role == ROLE_LISTENER) {
    workers_set_args(d, args);
    workers_reload(d);
  }
  if (d->role != ROLE_WORKER)
    admin_configure(d);
  options_args_free(reload_state.worker_args);
  reload_state.worker_args = args;
  args = NULL;
  log_info(0,
           "configuration reloaded: log level %s, max-sessions %u, "
           "max-handles %u (new sessions), max-message %llu",
           log_level_name(d->cfg.log_level), d->cfg.max_sessions,
           d->cfg.max_handles, (unsigned long long)d->cfg.limits.max_message);
done:
  options_args_free(args);
  options_free(nc);
  notify_send("READY=1");
}

/* The worker check of a reload is over. */
static void reload_probed(daemon_t *d, int ok, void *ctx)
{
  (void)ctx;
  reload_state.pending = 0;
  if (!ok || d->stopping) {
    if (!ok)
      log_error(0, "a worker could not start with these options (its error "
                   "is above)");
    log_error(0, "reload failed: the running configuration is kept");
    options_args_free(reload_state.args);
    reload_state.args = NULL;
    options_free(&reload_state.nc);
    notify_send("READY=1");
    return;
  }
  reload_apply(d, &reload_state.nc, reload_state.args);
  reload_state.args = NULL;
}

void reload_start(daemon_t *d)
{
  daemon_config_t nc;
  char **args = NULL;
  const char *path = options_file(&d->cfg);

  if (reload_state.pending) {
    log_warn(0, "SIGHUP: the last reload is still checking its options: "
                "ignored");
    return;
  }
  notify_reloading();
  log_info(0, "SIGHUP: reloading %s", path != NULL ? path : "(no file)");
  options_set_reloading(1);
  if (options_load(reload_state.argc, reload_state.argv, 0, &nc, &args) != 0) {
    options_set_reloading(0);
    log_error(0, "reload failed: the running configuration is kept");
    notify_send("READY=1");
    return;
  }
  options_set_reloading(0);
  /* The listener holds no device: a worker checks the device rules. Ask
   * one (as at start) before anything changes. */
  if (d->role == ROLE_LISTENER && device_rules_differ(&d->cfg, &nc)) {
    hipd_err_t err;
    int rc;
    workers_set_args(d, args);
    rc = workers_probe_start(d, reload_probed, NULL, &err);
    workers_set_args(d, reload_state.worker_args);
    if (rc != 0) {
      log_error(0, "%s", err.msg);
      log_error(0, "reload failed: the running configuration is kept");
      options_args_free(args);
      options_free(&nc);
      notify_send("READY=1");
      return;
    }
    reload_state.pending = 1;
    reload_state.nc = nc;
    reload_state.args = args;
    return;
  }
  reload_apply(d, &nc, args);
}

void reload_worker(daemon_t *d, int argc, char **argv)
{
  daemon_config_t nc;
  char **args = NULL;

  options_set_reloading(1);
  if (options_load(argc, argv, 1, &nc, &args) != 0) {
    options_set_reloading(0);
    log_error(0, "reload failed: this worker keeps its configuration");
    return;
  }
  options_set_reloading(0);
  if (config_apply(d, &nc) != 0)
    log_error(0, "reload failed: this worker keeps its configuration");
  else
    log_info(0,
             "configuration reloaded from the listener: max-handles %u "
             "(new sessions)",
             d->cfg.max_handles);
  options_args_free(args);
  options_free(&nc);
}
