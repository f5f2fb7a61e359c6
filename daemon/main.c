/* SPDX-License-Identifier: MIT */
/* daemon/main.c: start-up, signals, orderly shutdown and the in-place
 * restart of hipd; its options are config/options.c's, a reload
 * config/reload.c's. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/admin.h"
#include "bufpool.h"
#include "compile/compile_pool.h"
#include "config/options.h"
#include "config/reload.h"
#include "daemon.h"
#include "device.h"
#include "drivers/cpu/cpu.h"
#include "drivers/cpu/cpu_compile.h"
#include "drivers/cpu/cpu_launcher.h"
#include "executor.h"
#include "hipd.h"
#include "kernels/cache.h"
#include "log.h"
#include "loop_turn.h"
#include "metrics/http.h"
#include "notify.h"
#include "objects/objects.h"
#include "policy.h"
#include "privsep/metrics.h"
#include "privsep/mps.h"
#include "privsep/tenant_pages.h"
#include "privsep/worker.h"
#include "privsep/workers.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sanitize.h"
#include "server.h"
#include "spin.h"
#include "tenants.h"
#include "transport.h"
#include "transport_ring.h"
#include "util/account.h"
#include "util/clock.h"
#include "util/cpus.h"

static daemon_t daemon_state;
static uv_signal_t sig_int, sig_term, sig_hup;
static uv_timer_t shutdown_timer;
static uint64_t shutdown_deadline;
/* Once the drain is over, compiles still running are given this long to
 * end after their compilers were killed; then they are abandoned: the
 * process exits without waiting for the pool threads that run them (an
 * in-process hiprtc compile cannot be stopped). */
#define ABANDON_MARGIN_MS 1000
static uv_timer_t abandon_timer;
/* How long after --shutdown-timeout a worker that has not exited is
 * killed. */
#define WORKER_EXIT_GRACE_MS 3000
static int abandoned;       /* the loop was stopped with compiles running */
static int restart_fd = -1; /* the listener kept for an in-place restart */

/*
 * Run the loop until nothing is left to run. With --busy-poll, after the
 * events of an iteration the loop polls its backend (epoll) fd without
 * blocking for up to that long before it sleeps: a request or a device
 * completion arriving meanwhile is served without the wake-up latency of a
 * sleeping thread (several microseconds per hop, more from deep CPU idle
 * states), and so is a submission on a ring the loop polls. Timers due
 * meanwhile run when the spin ends.
 */
/* Before the loop polls: if it may block, the launches it made itself
 * and waits for go to their streams' executors (objects/submit.c),
 * which wake it when they end. */
static uv_prepare_t inline_prepare;

static void inline_prepare_cb(uv_prepare_t *h)
{
  daemon_t *d = h->data;

  if (op_inline_waiting() && loop_turn_may_block(d))
    op_inline_park();
}

/*
 * May a loop that got no place of the spin budget still poll, for as
 * long as --busy-poll, for the end of the kernels it launched itself and
 * waits for? Yes, unless --gpu-wait asks device waits to yield or block.
 * Otherwise they go to their streams' threads (inline_prepare_cb), which
 * wait for the device spinning as much (the runtime's default spins
 * while a process has no more contexts than the host has CPUs), but
 * only after a wake-up of that thread, and end with a wake-up of the
 * loop: two more a kernel, where every thread sleeps between kernels
 * (one session a worker, sixteen tenants on sixteen CPUs). The poll
 * stops as soon as no such kernel is left: it never waits for requests
 * uncounted.
 */
static int own_wait(const daemon_t *d)
{
  return op_inline_waiting() && (d->cfg.gpu_wait == 0 || d->cfg.gpu_wait == 1);
}

static void run_loop(daemon_t *d)
{
  uint64_t spin_ns = (uint64_t)d->cfg.busy_poll_us * 1000;
  struct pollfd pfd = {.fd = uv_backend_fd(d->loop), .events = POLLIN};

  if (spin_ns == 0 || pfd.fd < 0) {
    uv_run(d->loop, UV_RUN_DEFAULT);
    return;
  }
  uint64_t work = spin_work_count() - 1; /* the first turn polls */
  uint64_t last_work = 0;

  for (;;) {
    uint64_t now, until, now_work;
    int ready = 0, alive, busy, placed;

    d->loop_nowait = 1; /* this run does not block: rings stay awake */
    alive = uv_run(d->loop, UV_RUN_NOWAIT);
    d->loop_nowait = 0;
    if (alive == 0 || abandoned)
      break;
    now = util_now_ns();
    until = now + spin_ns;
    /* Poll within a spin window of the last turn that brought work (since
     * the last look) or found device work in flight: a turn a timer alone
     * woke long after sleeps again at once (spin.h). The turn that
     * answers a kernel's end brings no request itself, and the client's
     * next request follows it within microseconds: it must find the loop
     * polling, not asleep (the sync round trip doubled without). */
    now_work = spin_work_count();
    if (now_work != work || exec_outstanding() != 0 || op_inline_waiting())
      last_work = now;
    busy = now - last_work < spin_ns;
    work = now_work;

    /* A ring's submission comes without an event: look at the polled
     * rings too, at the executors' completions, which come without
     * their wake-up while the bridge is watched (executor.h), and at the
     * streams of the launches the loop made itself. The loop's own
     * descriptors cost a system call to look at: every 4th turn. With a
     * place of the spin budget; without one, only while a kernel the
     * loop launched itself is waited for (own_wait()), and no longer. */
    placed = busy && spin_enter();
    if (placed || (busy && own_wait(d))) {
      exec_bridge_watch(1);
      for (unsigned turn = 0; !ready && util_now_ns() < until; turn++) {
        ready = exec_bridge_pending() || transport_rings_pending(d) ||
                (op_inline_waiting() && op_inline_poll() > 0) ||
                ((turn & 3) == 0 && poll(&pfd, 1, 0) > 0);
        if (!ready)
          util_cpu_relax();
      }
      if (exec_bridge_watch(0))
        ready = 1;
      if (placed)
        spin_leave();
    }
    exec_bridge_run();
    if (!ready && uv_run(d->loop, UV_RUN_ONCE) == 0)
      break;
  }
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

static void abandon_cb(uv_timer_t *t)
{
  daemon_t *d = t->data;

  log_warn(0,
           "%u compiles still running %u ms after the drain: abandoned "
           "(hipd exits without waiting for them)",
           cache_pending(), ABANDON_MARGIN_MS);
  abandoned = 1;
  uv_stop(d->loop);
}

/* The drain is over: nothing but compiles may keep the loop alive now.
 * Kill the compilers that run as processes; whatever still runs after the
 * margin (a compile in this process) is abandoned. The timer does not keep
 * the loop alive itself. */
static void stop_compiles(daemon_t *d)
{
  unsigned killed = cpu_compile_stop_all() + compile_pool_stop_all();

  if (cache_pending() == 0)
    return;
  log_info(0,
           "%u compiles or cache writes still running at shutdown: %u "
           "compilers killed",
           cache_pending(), killed);
  uv_timer_init(d->loop, &abandon_timer);
  abandon_timer.data = d;
  uv_timer_start(&abandon_timer, abandon_cb, ABANDON_MARGIN_MS, 0);
  uv_unref((uv_handle_t *)&abandon_timer);
}

/* Close idle sessions; once none is left or time is up, close the rest and
 * let the loop end. */
static void shutdown_tick_cb(uv_timer_t *t)
{
  daemon_t *d = t->data;
  int force = uv_now(d->loop) >= shutdown_deadline;
  uint32_t left = transport_idle_close(d, force);

  /* Each worker drains its own sessions within --shutdown-timeout; it is
   * killed only if it is still there well after that. */
  if (d->role == ROLE_LISTENER)
    left += workers_stop(d, uv_now(d->loop) >=
                                shutdown_deadline + WORKER_EXIT_GRACE_MS);
  if (d->role != ROLE_WORKER)
    left += metrics_stop(d, uv_now(d->loop) >=
                                shutdown_deadline + WORKER_EXIT_GRACE_MS);

  /* Device work of closed sessions (frees, stream teardown) finishes too,
   * unless time is up. */
  if (left == 0 && (force || exec_outstanding() == 0)) {
    uv_timer_stop(t);
    exec_bridge_close();
    uv_close((uv_handle_t *)t, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&d->housekeeping, NULL);
    spin_tune_close();
    transport_close(d);
    if (d->role == ROLE_WORKER)
      worker_close(d);
    stop_compiles(d);
  }
}

/* How long a process whose GPU context is lost for good waits for work in
 * flight: work on that device only fails, and its tenants wait for the
 * fresh process (PROTOCOL.md, "Kernel faults"). */
#define LOST_DRAIN_MS 300

/* Stop accepting, let in-flight work finish (bounded by @p drain_ms), end
 * the loop. */
static void begin_stop_within(daemon_t *d, const char *why, uint32_t drain_ms)
{
  d->stopping = 1;
  log_info(0, "%s: stopping (%u sessions, up to %u ms for in-flight work)", why,
           d->nsessions, drain_ms);
  server_stop(d, restart_fd >= 0);
  if (restart_fd < 0)
    notify_send("STOPPING=1");
  shutdown_deadline = uv_now(d->loop) + drain_ms;
  uv_timer_init(d->loop, &shutdown_timer);
  shutdown_timer.data = d;
  uv_timer_start(&shutdown_timer, shutdown_tick_cb, 0, 20);
}

static void begin_stop(daemon_t *d, const char *why)
{
  begin_stop_within(d, why, d->cfg.shutdown_ms);
}

static void signal_cb(uv_signal_t *sig, int signum)
{
  daemon_t *d = sig->data;
  if (d->stopping && restart_fd >= 0) {
    /* Asked to stop while draining for a restart: stop instead. */
    log_info(0, "%s: stopping instead of restarting", strsignal(signum));
    close(restart_fd);
    restart_fd = -1;
    return;
  }
  if (d->stopping) {
    log_warn(0, "second %s: stopping now", strsignal(signum));
    shutdown_deadline = 0;
    return;
  }
  begin_stop(d, strsignal(signum));
}

/* SIGHUP, which would end hipd by default (exit 129, the socket file left
 * behind): the listener (or the single process) reloads its configuration
 * (reload()) and tells its workers; a worker takes its configuration from
 * its listener, not from a signal. */
static void hup_cb(uv_signal_t *sig, int signum)
{
  daemon_t *d = sig->data;

  (void)signum;
  if (d->stopping) {
    log_info(0, "SIGHUP while stopping: not reloaded");
    return;
  }
  if (d->role == ROLE_WORKER) {
    log_info(0,
             "SIGHUP: a worker reloads when its listener says so: "
             "ignored (send it to the listener, pid %d)",
             (int)d->daemon_pid);
    return;
  }
  reload_start(d);
}

/* What the service manager shows (systemctl status): the listener's
 * sessions and tenant workers (it holds no device), or the single
 * process's sessions and devices. */
static void status_update(daemon_t *d)
{
  char st[256];

  if (d->role == ROLE_LISTENER) {
    uint32_t n = workers_sessions(d), w = workers_count(d);
    snprintf(st, sizeof(st), "%u session%s, %u tenant worker%s%s", n,
             n == 1 ? "" : "s", w, w == 1 ? "" : "s",
             d->stopping ? ", stopping" : "");
  } else {
    int nd = devices_count(), lost = 0;
    for (int i = 0; i < nd; i++) {
      device_t *dev = device_get(i);
      if (dev != NULL && (dev->lost || dev->unrecoverable))
        lost++;
    }
    snprintf(st, sizeof(st), "%u session%s, %d device%s (%d lost)%s",
             d->nsessions, d->nsessions == 1 ? "" : "s", nd, nd == 1 ? "" : "s",
             lost, d->stopping ? ", stopping" : "");
  }
  notify_status(st);
}

/* A device lost its context and the runtime cannot reset it in this
 * process (CUDA: a sticky fault is unrecoverable until the process ends).
 * Restart in place: same pid, same listening socket, fresh runtime. Every
 * session is closed (clients see "disconnected" and reconnect). */
static void unrecoverable_cb(device_t *dev, void *arg)
{
  daemon_t *d = arg;
  char why[128];

  if (d->stopping)
    return;
  /* Its sessions are told why (session.closed). */
  d->close_code = HIPD_EDEVLOST;
  snprintf(d->close_why, sizeof(d->close_why),
           "device %d lost its context after a kernel fault (under MPS, any "
           "tenant's fault on that GPU) and cannot be reset in this process: "
           "connect again",
           dev->id);
  if (d->role == ROLE_WORKER) {
    /* Only this tenant's sessions are lost: the listener starts a fresh
     * worker, with a fresh runtime, for the tenant's next connection. Its
     * work in flight on the lost device can only fail: no long drain. */
    snprintf(why, sizeof(why),
             "device %d cannot be reset in this process: this worker exits",
             dev->id);
    begin_stop_within(d, why,
                      d->cfg.shutdown_ms < LOST_DRAIN_MS ? d->cfg.shutdown_ms
                                                         : LOST_DRAIN_MS);
    return;
  }
  restart_fd = server_dup_listener(d);
  if (restart_fd < 0) {
    log_error(0,
              "cannot keep the listening socket for a restart; device "
              "%d stays unavailable until hipd is restarted",
              dev->id);
    return;
  }
  snprintf(why, sizeof(why),
           "device %d cannot be reset in this process: restarting hipd",
           dev->id);
  begin_stop(d, why);
}

/* Replace this process with a fresh hipd on the same socket. Returns only
 * if that fails. */
static void restart_in_place(daemon_t *d, char **argv)
{
  char pid[32];

  if (restart_fd != 3) {
    if (dup2(restart_fd, 3) < 0)
      return;
    close(restart_fd);
  }
  snprintf(pid, sizeof(pid), "%d", (int)getpid());
  setenv("LISTEN_PID", pid, 1);
  setenv("LISTEN_FDS", "1", 1);
  setenv("HIPD_OWNS_SOCKET", "1", 1);
  log_info(0, "restarting in place (pid %s) on %s", pid, d->cfg.socket_path);
  cpu_driver_cleanup(); /* the new image makes its own */
  execv("/proc/self/exe", argv);
  log_error(0, "restart failed: %s", strerror(errno));
}

/* The listening socket handed over by systemd (socket activation) or by an
 * in-place restart: LISTEN_PID is ours and LISTEN_FDS is 1. */
static int inherited_listener(void)
{
  const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
  int fd = -1;

  if (pid != NULL && n != NULL && atoi(pid) == (int)getpid()) {
    if (atoi(n) != 1) {
      log_error(0, "%s sockets were passed; hipd takes exactly one", n);
      exit(1);
    }
    fd = 3;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  return fd;
}

/* Trimming the transfer-buffer pool, on libuv's thread pool: off the
 * loop (unmapping a large block takes milliseconds) and off every
 * device's queue. One at a time. */
static uv_work_t trim_work;
static int trim_busy;

/* How long a transfer buffer stays in the pool unused. */
#define TRIM_IDLE_MS 10000

static void trim_work_cb(uv_work_t *w)
{
  (void)w;
  bufpool_trim(TRIM_IDLE_MS);
}

static void trim_after_cb(uv_work_t *w, int status)
{
  (void)w;
  (void)status;
  trim_busy = 0;
}

static void housekeeping_cb(uv_timer_t *t)
{
  daemon_t *d = t->data;

  transport_check_timeouts(d);
  if (d->role == ROLE_LISTENER)
    workers_housekeeping(d);
  /* The spin budget follows the free CPUs while there are sessions. */
  if (d->role != ROLE_WORKER)
    spin_tune_set(d->loop, d->role == ROLE_LISTENER ? workers_sessions(d) > 0
                                                    : d->nsessions > 0);
  /* At most once a second, and only when it changed. */
  if (d->role != ROLE_WORKER)
    status_update(d);
  /* Transfer buffers unused for 10 s go back to the system; a pool
   * thread is woken for it only when one is that old. */
  if (!trim_busy && bufpool_trim_due(TRIM_IDLE_MS) &&
      uv_queue_work(d->loop, &trim_work, trim_work_cb, trim_after_cb) == 0)
    trim_busy = 1;
}

/* A worker's stop request (the listener said exit, or is gone). */
static void worker_stop_cb(daemon_t *d, const char *why)
{
  if (!d->stopping)
    begin_stop(d, why);
}

/* A worker started as root becomes the workers' account (with its
 * groups: GPU device nodes are often group-owned), for good. */
static int drop_to_worker_account(const char *user, hipd_err_t *err)
{
  account_t pw;
  int rc;

  if ((rc = account_by_name(user, &pw, NULL)) != 0)
    return err_set(err, rc == HIPD_ENOMEM ? rc : HIPD_EINVAL,
                   "the worker account '%s' does not exist", user);
  if (pw.uid == 0)
    return err_set(err, HIPD_EINVAL, "--user %s is root", user);
  if (initgroups(pw.name, pw.gid) != 0 ||
      setresgid(pw.gid, pw.gid, pw.gid) != 0 ||
      setresuid(pw.uid, pw.uid, pw.uid) != 0)
    return err_set(err, HIPD_EPERM, "cannot become %s: %s", user,
                   strerror(errno));
  if (setuid(0) == 0 || geteuid() == 0)
    return err_set(err, HIPD_EPERM, "could regain root after becoming %s",
                   user);
  return 0;
}

/* Everything a worker does before its loop runs. */
static int worker_setup(daemon_t *d, worker_role_t *role, hipd_err_t *err)
{
  int rc;

  if (worker_role_parse(d->cfg.worker_arg, role) != 0)
    return err_set(err, HIPD_EINVAL, "--worker: '%s' is not MODE:UID:GID:ID",
                   d->cfg.worker_arg);
  d->role = ROLE_WORKER;
  d->tenant_mode = role->mode;
  d->tenant_uid = role->uid;
  d->daemon_uid = geteuid();
  /* First, while root: the tenant's cgroup, which the launcher and the
   * runners inherit, and which its CPU-device allocations stay within. */
  if (role->mode != WORKER_PROBE) {
    int usage_fd, limit_fd;
    if ((rc = cgroup_join("worker", &usage_fd, &limit_fd, err)) != 0)
      return rc;
    cpu_driver_set_tenant_memory(usage_fd, limit_fd);
    /* A session's worker: its uid's totals are on the tenant page. */
    if ((rc = tenant_page_attach(err)) != 0)
      return rc;
  }
  /* Before the launcher starts: it and the runners inherit it. */
  if (role->mode != WORKER_PROBE) {
    hipd_err_t oerr;
    if (sandbox_oom_adj(SANDBOX_TENANT_OOM_ADJ, &oerr) != 0)
      log_warn(0, "the OOM killer does not pick this worker first: %s",
               oerr.msg);
  }
  if (role->mode != WORKER_PROBE) {
    /* The tenant's CPU kernels run as the tenant: its runners are started
     * by a launcher that becomes the tenant now, while this process may
     * still change ids (a root tenant's run as nobody). Without root, the
     * launcher keeps our ids: the worker's seccomp profile forbids fork
     * and exec, so runners always come from the launcher. */
    uid_t ru = geteuid() == 0 ? role->uid : getuid();
    gid_t rg = geteuid() == 0 ? role->gid : getgid();
    if (geteuid() == 0 && ru == 0 &&
        (rc = sandbox_user_lookup(CPU_RUNNER_DEFAULT_USER, &ru, &rg, err)) != 0)
      return rc;
    if ((rc = cpu_launcher_start(ru, rg, err)) != 0)
      return rc;
  }
  /* The spin budget, mapped after the launcher started, so that no
   * process of the tenant's ever maps it. */
  if (role->spin_slot >= 0) {
    hipd_err_t serr;
    if (spin_budget_attach(WORKER_SPIN_FD, (uint32_t)role->spin_slot, &serr) !=
        0)
      log_warn(0, "this worker never busy-polls: %s", serr.msg);
  } else {
    spin_budget_disable();
  }
  if (geteuid() == 0 &&
      (rc = drop_to_worker_account(d->cfg.worker_user, err)) != 0)
    return rc;
    /* No core dump, no ptrace by the same account, no privilege gained by
     * exec, and the worker's system calls only (no process, no exec, no
     * network socket): the seccomp filter covers the device runtimes'
     * threads too, all started after this. */
#ifdef HIPD_ASAN
  /* LeakSanitizer checks a worker at exit with a tracer that clones and
   * ptraces it, which the worker profile refuses and a non-dumpable
   * process forbids: an ASan build keeps the worker's leak check and runs
   * it without both (every other build, and check_sandbox, test them). */
  log_info(0, "ASan build: this worker runs without its seccomp profile "
              "and stays dumpable, for the leak checker");
#else
  {
    sandbox_spec_t spec;
    sandbox_spec_init(&spec);
    spec.no_dumpable = true;
    spec.profile = SANDBOX_PROFILE_WORKER;
    spec.allow_threads = true; /* a sanitizer's background thread */
    if ((rc = sandbox_enter(&spec, err)) != 0)
      return rc;
    if (err->msg[0] != '\0')
      log_warn(0, "worker sandbox: not applied: %s", err->msg);
  }
#endif
  return 0;
}

int main(int argc, char **argv)
{
  daemon_t *d = &daemon_state;
  worker_role_t role = {0};
  int rc;

  char **worker_args;

  log_init();
  if (options_load(argc, argv, 0, &d->cfg, &worker_args) != 0)
    return 2;
  log_set_level(d->cfg.log_level);
  log_set_tenant_rate(d->cfg.log_tenant_rate);
  if (reload_init(&d->cfg, argc, argv, worker_args) != 0) {
    log_error(0, "not started: out of memory");
    return 1;
  }
  if (d->cfg.worker_user == NULL)
    d->cfg.worker_user = strdup("hipd");
  d->daemon_uid = geteuid();
  /* Every session is a descriptor (a refused peer's, the listener's): as
   * many as the hard limit allows, not the soft limit's usual 1024. */
  {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  if (d->cfg.worker_arg != NULL && strcmp(d->cfg.worker_arg, "metrics") == 0) {
#ifdef HAVE_MICROHTTPD
    /* The metrics process (metrics/http.h): nothing else of hipd runs.
     * A SIGHUP is the listener's (a reload), not its. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    return metrics_http_main(d);
#else
    log_error(0, "--worker=metrics: built without libmicrohttpd");
    return 1;
#endif
  }
  if (d->cfg.worker_arg != NULL) {
    hipd_err_t err;
    if (worker_setup(d, &role, &err) != 0) {
      log_error(0, "worker not started: %s", err.msg);
      return 1;
    }
  } else {
    d->role = d->cfg.isolation == ISOLATION_NONE ? ROLE_SINGLE : ROLE_LISTENER;
    /* Socket activation, or an in-place restart: the socket is fd 3. */
    d->cfg.listen_fd = inherited_listener();
  }
  if (d->cfg.socket_path == NULL)
    d->cfg.socket_path = server_default_path();
  /* A worker's parent is its listener: hipd's pid, as clients know it. */
  d->daemon_pid = d->role == ROLE_WORKER ? getppid() : getpid();
  signal(SIGPIPE, SIG_IGN);
  /* Until the loop catches it (hup_cb), a SIGHUP must not end hipd
   * either. Children started with uv_spawn get the default back. */
  signal(SIGHUP, SIG_IGN);
  if (d->role != ROLE_WORKER)
    (void)notify_open();
  /* Requests allocate and free small blocks at a high rate: keep freed
   * heap memory instead of giving it back at every dip (each give-back
   * costs page faults on the next rise). Large transfer buffers have
   * bufpool. */
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_TOP_PAD, 16 << 20);

  d->loop = uv_default_loop();
  list_init(&d->sessions);
  d->start_ms = uv_now(d->loop);
  d->accept = d->role == ROLE_LISTENER ? workers_accept : transport_accept;
  if (d->role == ROLE_WORKER && role.mode == WORKER_PROBE)
    log_debug(0, "checking the options as a worker (pid %d, uid %u)",
              (int)getpid(), (unsigned)geteuid());
  else if (d->role == ROLE_WORKER)
    log_info(0, "hipd %s worker for %s %u starting (pid %d, uid %u)",
             PACKAGE_VERSION,
             role.mode == ISOLATION_SESSION ? "a session of uid" : "uid",
             (unsigned)role.uid, (int)getpid(), (unsigned)geteuid());
  else
    log_info(0, "hipd %s starting (protocol %d, pid %d, isolation %s)",
             PACKAGE_VERSION, HIPD_PROTOCOL_VERSION, (int)getpid(),
             d->cfg.isolation == ISOLATION_UID       ? "uid"
             : d->cfg.isolation == ISOLATION_SESSION ? "session"
                                                     : "none");
  if (d->cfg.tenant_host_mem == 0)
    d->cfg.tenant_host_mem = cgroup_default_tenant_mem();
  if (d->role != ROLE_WORKER) {
    /* Before any process is started: they inherit where we are. */
    cgroup_setup(d->cfg.cgroups == CGROUPS_AUTO);
    cgroup_set_tenant_limits(d->cfg.tenant_host_mem, d->cfg.tenant_max_pids);
    log_info(0, "cgroups: %s", cgroup_state());
  }
  cpu_driver_set_count(d->cfg.cpu_devices);
  devices_set_stream_threads(d->cfg.stream_threads);
  cpu_driver_set_launch_timeout(d->cfg.cpu_kernel_timeout_ms);
  if (d->cfg.host_mem_reserve == 0)
    d->cfg.host_mem_reserve = cpu_driver_default_reserve();
  cpu_driver_set_host_reserve(d->cfg.host_mem_reserve);
  if (d->cfg.busy_poll_us < 0)
    d->cfg.busy_poll_us = sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 50 : 0;
  exec_set_busy_poll((uint32_t)d->cfg.busy_poll_us);
  /* Launches from the loop need its polling (run_loop). */
  op_inline_enable(d->cfg.busy_poll_us > 0 && d->role != ROLE_LISTENER
                       ? (unsigned)d->cfg.loop_launch
                       : 0);
  if (d->cfg.spin_cpus < 0)
    d->cfg.spin_cpus = (int)spin_default_cpus();
  if (d->role != ROLE_WORKER) {
    /* One budget for every process of this hipd: a worker per session at
     * most, and those still exiting. */
    hipd_err_t err;
    if (spin_budget_create((uint32_t)d->cfg.spin_cpus, d->cfg.max_sessions + 64,
                           &err) != 0)
      log_warn(0, "hipd never busy-polls: %s", err.msg);
  }
#ifdef HAVE_HIP
  hip_driver_set_wait(d->cfg.gpu_wait);
#endif
  if ((rc = exec_bridge_init(d->loop)) != 0) {
    log_error(0, "cannot start the worker bridge: %s", uv_strerror(rc));
    return 1;
  }
  uv_prepare_init(d->loop, &inline_prepare);
  inline_prepare.data = d;
  uv_prepare_start(&inline_prepare, inline_prepare_cb);
  uv_unref((uv_handle_t *)&inline_prepare);
  {
    hipd_err_t err;
    /* The listener holds no device: its workers do. */
    if (d->role != ROLE_LISTENER &&
        (rc = devices_init(d->cfg.devices, &err)) != 0) {
      log_error(0, "not started: %s", err.msg[0] ? err.msg : hipd_strerror(rc));
      return 1;
    }
    if ((rc = policy_init(d, &err)) != 0) {
      log_error(0, "not started: %s", err.msg[0] ? err.msg : hipd_strerror(rc));
      return 1;
    }
    if (d->role == ROLE_LISTENER &&
        (rc = workers_init(d, reload_worker_args(), &err)) != 0) {
      log_error(0, "not started: %s", err.msg);
      return 1;
    }
    if (d->role == ROLE_LISTENER)
      workers_admin_init(d);
    if (d->role != ROLE_WORKER)
      admin_configure(d);
    /* Bound now, so that a bad address stops hipd before it listens. */
    if (d->role != ROLE_WORKER && (rc = metrics_init(d, &err)) != 0) {
      log_error(0, "not started: %s", err.msg);
      return 1;
    }
    if (d->role == ROLE_WORKER && role.mode == WORKER_PROBE) {
      const char *fd = getenv(WORKER_PROBE_FD_ENV);
      log_debug(0, "worker check: the options are valid");
      if (fd != NULL && strcmp(fd, "3") == 0) {
        /* The listener learns how many devices a worker serves. */
        dprintf(3, "%d\n", devices_count());
        close(3);
      }
      policy_free(d);
      devices_shutdown();
      return 0;
    }
  }
  if (d->cfg.cache_dir == NULL)
    d->cfg.cache_dir = cache_default_dir();
  {
    hipd_err_t err;
    /* A worker's kernels come from its listener's cache: it keeps none on
     * disk (and could not write the listener's). */
    kernels_set_cache_per_tenant(d->cfg.cache_scope == CACHE_SCOPE_TENANT);
    if (cache_init(d->loop, d->role == ROLE_WORKER ? "" : d->cfg.cache_dir,
                   d->cfg.cache_size, &err) != 0) {
      log_error(0, "not started: %s", err.msg);
      return 1;
    }
    /* What was hot before the restart, back in memory meanwhile. */
    if (d->role != ROLE_WORKER)
      cache_warm(d->cfg.cache_warm);
  }
  if (d->role != ROLE_WORKER) {
    /* The listener (or the single process) compiles, in helpers; a
     * worker asks its listener. */
    hipd_err_t err;
    compile_pool_cfg_t ccfg = {.jobs = d->cfg.compile_jobs,
                               .timeout_s = d->cfg.compile_timeout_s,
                               .idle_timeout_s = d->cfg.compile_idle_s,
                               .user = d->cfg.compile_user,
                               .mem_limit = d->cfg.compile_mem,
                               .gpu_driver = d->cfg.compile_gpu_driver,
                               .tenant_max = d->cfg.tenant_max_compiles,
                               .queue_bytes = d->cfg.compile_queue_bytes,
                               .probe = 1};
    compile_pool_stats_t cst;
    if (compile_pool_init(&ccfg, d->loop, &err) != 0) {
      log_error(0, "not started: %s", err.msg);
      return 1;
    }
    compile_pool_get_stats(&cst);
    log_info(0,
             "compile helpers: %u, as uid %lld, file system view: %s, GPU "
             "driver: %s%s%s",
             cst.jobs, (long long)cst.uid, cst.fsview_name,
             d->cfg.compile_gpu_driver ? "open (--compile-gpu-driver)"
                                       : "closed",
             cst.sandbox[0] ? "; not applied: " : "", cst.sandbox);
  }
  if (d->role == ROLE_LISTENER) {
    hipd_err_t err;
    account_t pw;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (geteuid() == 0 && account_by_name(d->cfg.worker_user, &pw, NULL) == 0) {
      uid = pw.uid;
      gid = pw.gid;
    }
    if (mps_start(d, d->cfg.worker_user, uid, gid, &err) != 0 ||
        workers_probe(d, &err) != 0) {
      log_error(0, "not started: %s", err.msg);
      mps_stop();
      return 1;
    }
  }
  /* The signals are caught before the socket listens: a SIGTERM that comes
   * as soon as a client could connect is a clean stop (its callback runs
   * in the loop's first iteration), not the default action's death with
   * the socket file left behind. */
  uv_signal_init(d->loop, &sig_int);
  uv_signal_init(d->loop, &sig_term);
  sig_int.data = sig_term.data = d;
  uv_signal_start(&sig_int, signal_cb, SIGINT);
  uv_signal_start(&sig_term, signal_cb, SIGTERM);
  /* SIGHUP keeps no loop alive: the final walk closes it. */
  uv_signal_init(d->loop, &sig_hup);
  sig_hup.data = d;
  uv_signal_start(&sig_hup, hup_cb, SIGHUP);
  uv_unref((uv_handle_t *)&sig_hup);
  if (d->role == ROLE_WORKER) {
    hipd_err_t err;
    d->session_ended = worker_session_closed;
    d->session_hello = worker_session_hello;
    worker_on_reload(reload_worker);
    if (worker_start(d, &role, 3, worker_stop_cb, &err) != 0) {
      log_error(0, "worker not started: %s", err.msg);
      return 1;
    }
  } else if ((rc = server_start(d)) != 0) {
    server_stop(d, 0);
    compile_pool_shutdown();
    exec_bridge_close();
    uv_close((uv_handle_t *)&sig_int, NULL);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_run(d->loop, UV_RUN_DEFAULT);
    mps_stop();
    log_error(0, "not started: %s", hipd_strerror(rc));
    return 1;
  }
  d->gpu_sharing = mps_state();
  {
    mps_limits_t lim;
    if (mps_limits_here(&lim)) {
      d->mps_threads = lim.threads;
      d->mps_mem = lim.mem;
    }
  }
  if (d->role != ROLE_WORKER)
    metrics_start(d, argv);
  transport_init(d);
  uv_timer_init(d->loop, &d->housekeeping);
  d->housekeeping.data = d;
  uv_timer_start(&d->housekeeping, housekeeping_cb, 1000, 1000);
  /* libuv starts its thread pool at the first work queued, and the loop
   * thread waits there for each pool thread to start. A first trim (of
   * an empty pool) starts it now, not mid-run: at a first trim due, in an
   * idle loop, test_idle_sleeps counted those waits as wakes (7 in 3 s on
   * an H100), and new threads beside the sessions'. */
  if (uv_queue_work(d->loop, &trim_work, trim_work_cb, trim_after_cb) == 0)
    trim_busy = 1;
  devices_on_unrecoverable(unrecoverable_cb, d);
  if (d->role != ROLE_WORKER) {
    char msg[PATH_MAX + 64];
    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=listening on %s\nMAINPID=%d",
             d->cfg.socket_path, (int)getpid());
    notify_send(msg);
    notify_watchdog_start(d->loop);
  }

  run_loop(d);

  if (abandoned) {
    /* Pool threads still compile: neither the loop nor the devices can be
     * shut down, and exit() would join those threads (libuv's destructor).
     * The socket file is gone already (server_stop), unless it is kept
     * for a restart, which exec() makes regardless of the threads. */
    if (restart_fd >= 0) {
      restart_in_place(d, argv);
      return 1;
    }
    if (d->role == ROLE_LISTENER)
      mps_stop();
    log_info(0, "stopped (compiles abandoned)");
    cpu_driver_cleanup();
    fflush(NULL);
    _exit(0);
  }
  /* The helpers are killed, the pool's threads joined. */
  compile_pool_shutdown();
  /* Anything left (should be nothing) is closed before the loop goes. */
  uv_walk(d->loop, close_walk_cb, NULL);
  uv_run(d->loop, UV_RUN_DEFAULT);
  uv_loop_close(d->loop);
  if (restart_fd >= 0) {
    /* The lost device's runtime cannot be shut down cleanly: exec now. */
    restart_in_place(d, argv);
    return 1;
  }
  if (d->role == ROLE_LISTENER)
    mps_stop();
  else if (exec_outstanding() == 0)
    devices_shutdown();
  else if (d->role != ROLE_LISTENER)
    log_warn(0,
             "%u device tasks did not finish in time; exiting without "
             "waiting for them",
             exec_outstanding());
  if (d->role != ROLE_WORKER)
    cgroup_teardown();
  if (d->role == ROLE_LISTENER)
    tenant_pages_free();
  cache_shutdown();
  admin_free();
  policy_free(d);
  log_info(0, "stopped");
  notify_close();
  options_free(&d->cfg);
  reload_fini();
  return 0;
}
