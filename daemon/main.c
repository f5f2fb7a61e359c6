/* SPDX-License-Identifier: MIT */
/* daemon/main.c: options, start-up, signals and orderly shutdown of hipd. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "admin/admin.h"
#include "bufpool.h"
#include "compile/compile_pool.h"
#include "conffile.h"
#include "daemon.h"
#include "device.h"
#include "drivers/cpu/cpu.h"
#include "drivers/cpu/cpu_compile.h"
#include "drivers/cpu/cpu_launcher.h"
#include "executor.h"
#include "handles.h"
#include "hipd.h"
#include "kernels/cache.h"
#include "log.h"
#include "metrics/http.h"
#include "notify.h"
#include "policy.h"
#include "privsep/metrics.h"
#include "privsep/mps.h"
#include "privsep/worker.h"
#include "privsep/workers.h"
#include "sandbox/sandbox.h"
#include "sanitize.h"
#include "server.h"
#include "transport.h"
#include "util/clock.h"
#include "util/parse.h"

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

static void usage(FILE *f)
{
  fprintf(
      f,
      "Usage: hipd [OPTION]...\n"
      "GPU execution daemon: serves devices, memory, streams, events and\n"
      "kernels to clients over a Unix socket (msgpack-rpc).\n"
      "\n"
      "  -s, --socket PATH        listen on PATH (default: $HIPD_SOCKET,\n"
      "                           else /run/hipd/hipd.sock as root, else\n"
      "                           $XDG_RUNTIME_DIR/hipd.sock)\n"
      "      --socket-mode MODE   octal permissions of the socket (0660)\n"
      "  -l, --log-level LEVEL    error, warn, info (default) or debug\n"
      "      --max-message BYTES  largest request accepted (512M)\n"
      "      --max-depth N        deepest nesting of a request (16)\n"
      "      --max-inflight N     unanswered requests per session before\n"
      "                           reading pauses (256)\n"
      "      --output-cap BYTES   queued reply bytes per session before\n"
      "                           it is disconnected (1G)\n"
      "      --max-input-bytes BYTES  input buffered by all sessions together\n"
      "                           (beyond 128K each); a session that needs\n"
      "                           more waits its turn (1G, at least\n"
      "                           --max-message)\n"
      "      --write-timeout MS   disconnect a session whose replies make\n"
      "                           no progress for MS (30000)\n"
      "      --hello-timeout MS   disconnect a session that has not completed\n"
      "                           hello within MS (10000; 0: no limit)\n"
      "      --request-timeout MS disconnect a session whose request stays\n"
      "                           incomplete for MS (60000; 0: no limit)\n"
      "      --shutdown-timeout MS  time in-flight work gets at exit (5000);\n"
      "                           compiles still running then are abandoned\n"
      "      --max-sessions N     concurrent sessions (1024)\n"
      "      --max-handles N      handles per session (1048576)\n"
      "      --max-streams N      streams per session (64)\n"
      "      --mem-quota BYTES    device memory per session (default:\n"
      "                           unlimited)\n"
      "      --tenant-mem-quota BYTES  device memory of all the sessions of\n"
      "                           one uid together (default: unlimited)\n"
      "      --tenant-max-sessions N  sessions of one uid at once (0: no\n"
      "                           limit, the default)\n"
      "      --tenant-max-handles N   handles of all the sessions of one uid\n"
      "                           (0: no limit, the default)\n"
      "      --tenant-max-streams N   streams made by all the sessions of\n"
      "                           one uid (0: no limit, the default)\n"
      "      --allow-users LIST   only these users (names or uids, comma\n"
      "                           list) may connect (default: anyone the\n"
      "                           socket's mode lets in)\n"
      "      --allow-groups LIST  only members of these groups (names or\n"
      "                           gids) may connect; with --allow-users,\n"
      "                           either admits\n"
      "      --device-allow DEV=LIST  only these users and @groups may use\n"
      "                           device DEV (a global id, hip, cpu, hip:N\n"
      "                           or cpu:N); repeatable; others do not see\n"
      "                           it\n"
      "      --admin-group GROUP  members of GROUP see and act on every\n"
      "                           session (session.list, session.kill,\n"
      "                           log.level); default: root only\n"
      "      --strict-allow       root and hipd's own user must be listed\n"
      "                           too (default: always allowed)\n"
      "      --devices LIST       serve only these devices: all (default),\n"
      "                           or a comma list of hip, cpu, hip:N, cpu:N\n"
      "      --cpu-devices N      how many CPU devices to serve (1)\n"
      "      --cache-dir DIR      compiled-kernel cache (default:\n"
      "                           /var/cache/hipd as root, else\n"
      "                           $XDG_CACHE_HOME/hipd); '' for memory only\n"
      "      --cache-size BYTES   cache cap, on disk and in memory (1G)\n"
      "      --cpu-kernel-timeout MS  stop a CPU-device kernel running\n"
      "                           longer (600000; 0: no limit)\n"
      "      --compile-jobs N     compiles at once, each in its own sandboxed\n"
      "                           hipd-compile helper (default: min(4, CPUs))\n"
      "      --compile-timeout S  stop a compile running longer (120)\n"
      "      --compile-user NAME  the account compile helpers run as when\n"
      "                           hipd is root (default: hipd-compile, else\n"
      "                           nobody; never root)\n"
      "      --compile-mem BYTES  address space of a compile helper and of\n"
      "                           each compiler process (4G)\n"
      "      --gpu-wait MODE      how device workers wait for a GPU: auto\n"
      "                           (the runtime's choice, default), spin,\n"
      "                           yield or block\n"
      "      --busy-poll US       after each event, poll for the next one for\n"
      "                           US microseconds before sleeping (the loop\n"
      "                           and the device workers): lower latency for\n"
      "                           a bounded amount of CPU (default: 50 with 8\n"
      "                           or more CPUs, else 0)\n"
      "      --isolation MODE     what shares a process: uid (default: one\n"
      "                           worker process per user), session (one per\n"
      "                           connection) or none (one process for all:\n"
      "                           a trusted single-user node only)\n"
      "      --user NAME          the workers' account when hipd runs as root\n"
      "                           (hipd)\n"
      "      --worker-linger MS   how long a worker with no session stays\n"
      "                           (10000)\n"
      "      --mps MODE           NVIDIA: start hipd's own MPS control daemon\n"
      "                           so tenants share the GPU concurrently: auto\n"
      "                           (default: where installed), on, off\n"
      "      --config FILE        read the options of FILE first (default:\n"
      "                           " SYSCONFDIR
      "/hipd/hipd.conf, if it exists;\n"
      "                           hipd.conf(5)); the command line overrides "
      "it\n"
      "      --no-config          read no configuration file (as --config '')\n"
      "      --metrics-listen ADDR:PORT  serve Prometheus metrics over HTTP\n"
      "                           at /metrics (e.g. 127.0.0.1:9464 or\n"
      "                           [::1]:9464; default: off); whoever reaches\n"
      "                           it sees every tenant's usage\n"
      "  -V, --version            print the version and exit\n"
      "  -h, --help               print this help and exit\n"
      "\n"
      "SIGINT/SIGTERM stop accepting, let in-flight requests finish and "
      "exit 0.\n"
      "SIGHUP reloads the configuration file (and the command line): the log\n"
      "level, limits, quotas and access policy change at once (hipd(8)).\n");
}

enum {
  OPT_SOCKET_MODE = 256,
  OPT_MAX_MESSAGE,
  OPT_MAX_DEPTH,
  OPT_MAX_INFLIGHT,
  OPT_OUTPUT_CAP,
  OPT_MAX_INPUT_BYTES,
  OPT_WRITE_TIMEOUT,
  OPT_SHUTDOWN_TIMEOUT,
  OPT_HELLO_TIMEOUT,
  OPT_REQUEST_TIMEOUT,
  OPT_MAX_SESSIONS,
  OPT_MAX_HANDLES,
  OPT_MAX_STREAMS,
  OPT_MEM_QUOTA,
  OPT_DEVICES,
  OPT_CPU_DEVICES,
  OPT_CACHE_DIR,
  OPT_CACHE_SIZE,
  OPT_CPU_KERNEL_TIMEOUT,
  OPT_BUSY_POLL,
  OPT_GPU_WAIT,
  OPT_TENANT_MEM_QUOTA,
  OPT_TENANT_MAX_SESSIONS,
  OPT_TENANT_MAX_HANDLES,
  OPT_TENANT_MAX_STREAMS,
  OPT_ALLOW_USERS,
  OPT_ALLOW_GROUPS,
  OPT_DEVICE_ALLOW,
  OPT_STRICT_ALLOW,
  OPT_ADMIN_GROUP,
  OPT_ISOLATION,
  OPT_USER,
  OPT_WORKER_LINGER,
  OPT_MPS,
  OPT_WORKER,
  OPT_METRICS_LISTEN,
  OPT_COMPILE_JOBS,
  OPT_COMPILE_TIMEOUT,
  OPT_COMPILE_USER,
  OPT_COMPILE_MEM,
  OPT_CONFIG,
  OPT_NO_CONFIG,
};

/* Every option; hipd.conf(5) takes each under the same name, but those
 * of file_refused[]. */
static const struct option longopts[] = {
    {"socket", required_argument, NULL, 's'},
    {"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
    {"log-level", required_argument, NULL, 'l'},
    {"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
    {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
    {"max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT},
    {"output-cap", required_argument, NULL, OPT_OUTPUT_CAP},
    {"max-input-bytes", required_argument, NULL, OPT_MAX_INPUT_BYTES},
    {"write-timeout", required_argument, NULL, OPT_WRITE_TIMEOUT},
    {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT},
    {"hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT},
    {"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
    {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
    {"max-handles", required_argument, NULL, OPT_MAX_HANDLES},
    {"max-streams", required_argument, NULL, OPT_MAX_STREAMS},
    {"mem-quota", required_argument, NULL, OPT_MEM_QUOTA},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"cpu-devices", required_argument, NULL, OPT_CPU_DEVICES},
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
    {"cpu-kernel-timeout", required_argument, NULL, OPT_CPU_KERNEL_TIMEOUT},
    {"busy-poll", required_argument, NULL, OPT_BUSY_POLL},
    {"gpu-wait", required_argument, NULL, OPT_GPU_WAIT},
    {"tenant-mem-quota", required_argument, NULL, OPT_TENANT_MEM_QUOTA},
    {"tenant-max-sessions", required_argument, NULL, OPT_TENANT_MAX_SESSIONS},
    {"tenant-max-handles", required_argument, NULL, OPT_TENANT_MAX_HANDLES},
    {"tenant-max-streams", required_argument, NULL, OPT_TENANT_MAX_STREAMS},
    {"allow-users", required_argument, NULL, OPT_ALLOW_USERS},
    {"allow-groups", required_argument, NULL, OPT_ALLOW_GROUPS},
    {"admin-group", required_argument, NULL, OPT_ADMIN_GROUP},
    {"device-allow", required_argument, NULL, OPT_DEVICE_ALLOW},
    {"strict-allow", no_argument, NULL, OPT_STRICT_ALLOW},
    {"isolation", required_argument, NULL, OPT_ISOLATION},
    {"user", required_argument, NULL, OPT_USER},
    {"worker-linger", required_argument, NULL, OPT_WORKER_LINGER},
    {"mps", required_argument, NULL, OPT_MPS},
    {"worker", required_argument, NULL, OPT_WORKER},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    {"compile-jobs", required_argument, NULL, OPT_COMPILE_JOBS},
    {"compile-timeout", required_argument, NULL, OPT_COMPILE_TIMEOUT},
    {"compile-user", required_argument, NULL, OPT_COMPILE_USER},
    {"compile-mem", required_argument, NULL, OPT_COMPILE_MEM},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"no-config", no_argument, NULL, OPT_NO_CONFIG},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* Options that make no sense in a file: what to read, and what is not
 * configuration. */
static const char *const file_refused[] = {"config", "no-config", "worker",
                                           "help",   "version",   NULL};

/* Where the option being parsed came from, for its error: NULL for the
 * command line, else "FILE:LINE". While reloading, errors are logged
 * (stderr may be the journal) instead of printed. */
static const char *opt_where;
static int opt_reloading;

static void opt_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void opt_error(const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (opt_reloading)
    log_error(0, "%s%s%s", opt_where ? opt_where : "", opt_where ? ": " : "",
              msg);
  else
    fprintf(stderr, "hipd: %s%s%s\n", opt_where ? opt_where : "",
            opt_where ? ": " : "", msg);
}

/* Apply the options of @p argv to @p cfg (which holds the defaults, or
 * what came before: the config file's entries come first). @return 0 or
 * -1 (the error printed). The checks between options are
 * options_finish()'s. */
static int parse_options(int argc, char **argv, daemon_config_t *cfg)
{
  uint64_t v;
  int opt, lvl;

  optind = 0; /* GNU: start afresh (called once per file entry too) */

  while ((opt = getopt_long(argc, argv, "s:l:Vh", longopts, NULL)) != -1) {
    switch (opt) {
    case 's':
      free(cfg->socket_path);
      cfg->socket_path = strdup(optarg);
      break;
    case OPT_SOCKET_MODE: {
      char *end;
      long m = strtol(optarg, &end, 8);
      if (optarg[0] < '0' || optarg[0] > '7' || *end != '\0' || m < 0 ||
          m > 0777)
        goto bad;
      cfg->socket_mode = (unsigned)m;
    } break;
    case 'l':
      if ((lvl = log_level_parse(optarg)) < 0)
        goto bad;
      cfg->log_level = lvl;
      break;
    case OPT_MAX_MESSAGE:
      if (util_parse_size(optarg, 1024, (uint64_t)4 << 30, &v) != 0)
        goto bad;
      cfg->limits.max_message = v;
      break;
    case OPT_MAX_DEPTH:
      if (util_parse_size(optarg, 2, PROTO_DEPTH_CAP, &v) != 0)
        goto bad;
      cfg->limits.max_depth = (unsigned)v;
      break;
    case OPT_MAX_INFLIGHT:
      if (util_parse_size(optarg, 1, 1 << 20, &v) != 0)
        goto bad;
      cfg->max_inflight = (uint32_t)v;
      break;
    case OPT_OUTPUT_CAP:
      if (util_parse_size(optarg, 4096, (uint64_t)64 << 30, &v) != 0)
        goto bad;
      cfg->output_cap = v;
      break;
    case OPT_MAX_INPUT_BYTES:
      if (util_parse_size(optarg, 1024, (uint64_t)1 << 40, &v) != 0)
        goto bad;
      cfg->max_input_bytes = v;
      break;
    case OPT_WRITE_TIMEOUT:
      if (util_parse_size(optarg, 10, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->write_timeout_ms = (uint32_t)v;
      break;
    case OPT_HELLO_TIMEOUT:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->hello_timeout_ms = (uint32_t)v;
      break;
    case OPT_REQUEST_TIMEOUT:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->request_timeout_ms = (uint32_t)v;
      break;
    case OPT_SHUTDOWN_TIMEOUT:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->shutdown_ms = (uint32_t)v;
      break;
    case OPT_MAX_SESSIONS:
      if (util_parse_size(optarg, 1, 1 << 20, &v) != 0)
        goto bad;
      cfg->max_sessions = (uint32_t)v;
      break;
    case OPT_MAX_HANDLES:
      if (util_parse_size(optarg, 1, HANDLES_MAX_DEFAULT * 16ull, &v) != 0)
        goto bad;
      cfg->max_handles = (uint32_t)v;
      break;
    case OPT_MAX_STREAMS:
      if (util_parse_size(optarg, 1, 4096, &v) != 0)
        goto bad;
      cfg->max_streams = (uint32_t)v;
      break;
    case OPT_MEM_QUOTA:
      if (util_parse_size(optarg, 1, UINT64_MAX >> 1, &v) != 0)
        goto bad;
      cfg->mem_quota = v;
      break;
    case OPT_TENANT_MEM_QUOTA:
      if (util_parse_size(optarg, 0, UINT64_MAX >> 1, &v) != 0)
        goto bad;
      cfg->tenant_mem_quota = v;
      break;
    case OPT_TENANT_MAX_SESSIONS:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->tenant_max_sessions = (uint32_t)v;
      break;
    case OPT_TENANT_MAX_HANDLES:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->tenant_max_handles = (uint32_t)v;
      break;
    case OPT_TENANT_MAX_STREAMS:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->tenant_max_streams = (uint32_t)v;
      break;
    case OPT_ALLOW_USERS:
      free(cfg->allow_users);
      cfg->allow_users = strdup(optarg);
      break;
    case OPT_ALLOW_GROUPS:
      free(cfg->allow_groups);
      cfg->allow_groups = strdup(optarg);
      break;
    case OPT_DEVICE_ALLOW: {
      char **n =
          realloc(cfg->device_allow, (cfg->ndevice_allow + 1) * sizeof(*n));
      if (n == NULL)
        return -1;
      cfg->device_allow = n;
      cfg->device_allow[cfg->ndevice_allow++] = strdup(optarg);
      break;
    }
    case OPT_STRICT_ALLOW:
      cfg->strict_allow = 1;
      break;
    case OPT_COMPILE_JOBS:
      if (util_parse_size(optarg, 1, 256, &v) != 0)
        goto bad;
      cfg->compile_jobs = (uint32_t)v;
      break;
    case OPT_COMPILE_TIMEOUT:
      if (util_parse_size(optarg, 1, 86400, &v) != 0)
        goto bad;
      cfg->compile_timeout_s = (uint32_t)v;
      break;
    case OPT_COMPILE_USER:
      if (optarg[0] == '\0' || strlen(optarg) > 32 ||
          strcmp(optarg, "root") == 0)
        goto bad;
      free(cfg->compile_user);
      cfg->compile_user = strdup(optarg);
      break;
    case OPT_COMPILE_MEM:
      if (util_parse_size(optarg, (uint64_t)64 << 20, (uint64_t)1 << 40, &v) !=
          0)
        goto bad;
      cfg->compile_mem = v;
      break;
    case OPT_DEVICES:
      free(cfg->devices);
      cfg->devices = strdup(optarg);
      break;
    case OPT_CPU_DEVICES:
      if (util_parse_size(optarg, 0, 16, &v) != 0)
        goto bad;
      cfg->cpu_devices = (int)v;
      break;
    case OPT_GPU_WAIT: {
      static const char *const modes[] = {"auto", "spin", "yield", "block"};
      int m = -1;
      for (int i = 0; i < 4; i++)
        if (strcmp(optarg, modes[i]) == 0)
          m = i;
      if (m < 0) {
        opt_error("gpu-wait: '%s' is not auto, spin, yield or block", optarg);
        return -1;
      }
      cfg->gpu_wait = m;
      break;
    }
    case OPT_BUSY_POLL:
      if (util_parse_size(optarg, 0, 1000000, &v) != 0)
        goto bad;
      cfg->busy_poll_us = (int)v;
      break;
    case OPT_CPU_KERNEL_TIMEOUT:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->cpu_kernel_timeout_ms = (uint32_t)v;
      break;
    case OPT_CACHE_DIR:
      free(cfg->cache_dir);
      cfg->cache_dir = strdup(optarg);
      break;
    case OPT_CACHE_SIZE:
      if (util_parse_size(optarg, 4096, UINT64_MAX >> 1, &v) != 0)
        goto bad;
      cfg->cache_size = v;
      break;
    case OPT_ISOLATION:
      if (strcmp(optarg, "uid") == 0)
        cfg->isolation = ISOLATION_UID;
      else if (strcmp(optarg, "session") == 0)
        cfg->isolation = ISOLATION_SESSION;
      else if (strcmp(optarg, "none") == 0)
        cfg->isolation = ISOLATION_NONE;
      else {
        opt_error("isolation: '%s' is not uid, session or none", optarg);
        return -1;
      }
      break;
    case OPT_ADMIN_GROUP:
      if (optarg[0] == '\0')
        goto bad;
      free(cfg->admin_group);
      cfg->admin_group = strdup(optarg);
      break;
    case OPT_USER:
      if (optarg[0] == '\0')
        goto bad;
      free(cfg->worker_user);
      cfg->worker_user = strdup(optarg);
      break;
    case OPT_WORKER_LINGER:
      if (util_parse_size(optarg, 0, UINT32_MAX, &v) != 0)
        goto bad;
      cfg->worker_linger_ms = (uint32_t)v;
      break;
    case OPT_MPS:
      if (strcmp(optarg, "auto") == 0)
        cfg->mps = MPS_AUTO;
      else if (strcmp(optarg, "on") == 0)
        cfg->mps = MPS_ON;
      else if (strcmp(optarg, "off") == 0)
        cfg->mps = MPS_OFF;
      else {
        opt_error("mps: '%s' is not auto, on or off", optarg);
        return -1;
      }
      break;
    case OPT_WORKER:
      free(cfg->worker_arg);
      cfg->worker_arg = strdup(optarg);
      break;
    case OPT_CONFIG:
      free(cfg->config_path);
      cfg->config_path = strdup(optarg);
      cfg->no_config = optarg[0] == '\0';
      break;
    case OPT_NO_CONFIG:
      cfg->no_config = 1;
      break;
    case OPT_METRICS_LISTEN: {
      struct sockaddr_storage ss;
      socklen_t sl;
      int lo;
      hipd_err_t e;
#ifndef HAVE_MICROHTTPD
      opt_error("--metrics-listen: this hipd was built without "
                "libmicrohttpd (Debian: libmicrohttpd-dev; configure "
                "--with-microhttpd)");
      return -1;
#endif
      if (metrics_addr_parse(optarg, &ss, &sl, &lo, &e) != 0) {
        opt_error("--metrics-listen %s", e.msg);
        return -1;
      }
      free(cfg->metrics_listen);
      cfg->metrics_listen = strdup(optarg);
      break;
    }
    case 'V':
      printf("hipd %s (protocol %d)\n", PACKAGE_VERSION, HIPD_PROTOCOL_VERSION);
      exit(0);
    case 'h':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      return -1;
    }
    continue;
  bad:
    for (const struct option *o = longopts; o->name; o++)
      if (o->val == opt)
        opt_error("invalid value '%s' for %s%s", optarg,
                  opt_where != NULL ? "" : "--", o->name);
    return -1;
  }
  if (optind < argc) {
    opt_error("unexpected argument '%s'", argv[optind]);
    return -1;
  }
  return 0;
}

/* The checks between options, once all are in. @return 0 or -1. */
static int options_finish(daemon_config_t *cfg)
{
  /* The bound must let a session buffer the largest message; unset, it
   * follows a larger --max-message. */
  if (cfg->max_input_bytes == 0) {
    cfg->max_input_bytes = (uint64_t)1 << 30;
    if (cfg->max_input_bytes < cfg->limits.max_message)
      cfg->max_input_bytes = cfg->limits.max_message;
  } else if (cfg->max_input_bytes < cfg->limits.max_message) {
    opt_error("--max-input-bytes %llu is below --max-message %llu: the "
              "largest request could never be buffered",
              (unsigned long long)cfg->max_input_bytes,
              (unsigned long long)cfg->limits.max_message);
    return -1;
  }
  return 0;
}

/* The configuration's defaults: what a run with no option and no file
 * has. */
static void cfg_defaults(daemon_config_t *c)
{
  *c = (daemon_config_t){
      .socket_mode = 0660,
      .max_inflight = 256,
      .output_cap = (size_t)1 << 30,
      .write_timeout_ms = 30000,
      .hello_timeout_ms = 10000,
      .request_timeout_ms = 60000,
      .shutdown_ms = 5000,
      .max_sessions = 1024,
      .max_handles = HANDLES_MAX_DEFAULT,
      .listen_fd = -1,
      .max_streams = 64,
      .cpu_devices = 1,
      .cache_size = (uint64_t)1 << 30,
      .cpu_kernel_timeout_ms = 600000,
      .busy_poll_us = -1,
      .isolation = ISOLATION_UID,
      .worker_linger_ms = 10000,
      .mps = MPS_AUTO,
      .log_level = HLOG_INFO,
  };
  proto_limits_default(&c->limits);
}

/* Free the strings of @p c (not the policy: daemon_t's). */
static void cfg_free(daemon_config_t *c)
{
  free(c->socket_path);
  free(c->devices);
  free(c->cache_dir);
  free(c->compile_user);
  free(c->allow_users);
  free(c->allow_groups);
  free(c->admin_group);
  free(c->metrics_listen);
  for (uint32_t i = 0; i < c->ndevice_allow; i++)
    free(c->device_allow[i]);
  free(c->device_allow);
  free(c->worker_user);
  free(c->worker_arg);
  free(c->config_path);
  memset(c, 0, sizeof(*c));
}

static void args_free(char **v)
{
  for (size_t i = 0; v != NULL && v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

/* The file's path for @p c: NULL for none. */
static const char *cfg_file(const daemon_config_t *c)
{
  if (c->no_config)
    return NULL;
  return c->config_path != NULL ? c->config_path : SYSCONFDIR "/hipd/hipd.conf";
}

/* The command-line option of a hipd.conf entry: "--NAME=VALUE", "--NAME"
 * for a boolean that is true, "" for one that is false (the default: no
 * option turns a boolean off). NULL with the error printed. */
static char *entry_option(const conf_entry_t *e)
{
  const struct option *o;
  char *opt = NULL;

  for (o = longopts; o->name != NULL; o++)
    if (strcmp(o->name, e->name) == 0)
      break;
  if (o->name == NULL) {
    opt_error("unknown option \"%s\"", e->name);
    return NULL;
  }
  for (int i = 0; file_refused[i] != NULL; i++)
    if (strcmp(e->name, file_refused[i]) == 0) {
      opt_error("\"%s\" is a command-line option only: not in a "
                "configuration file",
                e->name);
      return NULL;
    }
  if (o->has_arg == no_argument) {
    int b = conf_bool(e->value);
    if (b < 0) {
      opt_error("invalid value '%s' for %s: yes, no, true, false, 1 or 0",
                e->value, e->name);
      return NULL;
    }
    opt = b ? NULL : strdup("");
    if (b && asprintf(&opt, "--%s", e->name) < 0)
      opt = NULL;
  } else if (asprintf(&opt, "--%s=%s", e->name, e->value) < 0) {
    opt = NULL;
  }
  if (opt == NULL)
    opt_error("out of memory");
  return opt;
}

/*
 * The whole configuration: the defaults, then the entries of hipd.conf
 * (unless @p cmdline_only, or a worker's command line, or --no-config),
 * then the command line @p argv, which overrides them. @p *args_out gets
 * the options a worker is started with (and told on a reload): the file's
 * entries as options, then @p argv's (argv[0] first, NULL-terminated, all
 * malloc'd): a worker never reads the file, it gets what its listener
 * read. @return 0, or -1 with the error printed (logged while
 * reloading).
 */
static int cfg_load(int argc, char **argv, int cmdline_only,
                    daemon_config_t *out, char ***args_out)
{
  daemon_config_t first;
  conf_file_t file = {0};
  char **args = NULL, where[PATH_MAX + 32];
  const char *path;
  size_t n = 0;
  int rc = -1;

  /* The command line alone first: its errors, --help and --version come
   * before the file, and it says which file. */
  cfg_defaults(&first);
  cfg_defaults(out);
  opt_where = NULL;
  if (parse_options(argc, argv, &first) != 0)
    goto fail;
  path = cmdline_only || first.worker_arg != NULL ? NULL : cfg_file(&first);
  if (path != NULL) {
    hipd_err_t err;
    if (conf_read(path, first.config_path != NULL, &file, &err) != 0) {
      opt_error("%s", err.msg);
      goto fail;
    }
  }
  if ((args = calloc(file.n + (size_t)argc + 1, sizeof(*args))) == NULL ||
      (args[n++] = strdup(argv[0])) == NULL) {
    opt_error("out of memory");
    goto fail;
  }
  for (size_t i = 0; i < file.n; i++) {
    char *opt, *mini[3];
    snprintf(where, sizeof(where), "%s:%u", file.path, file.e[i].line);
    opt_where = where;
    if ((opt = entry_option(&file.e[i])) == NULL)
      goto fail;
    if (opt[0] == '\0') {
      free(opt);
      continue;
    }
    args[n++] = opt;
    mini[0] = argv[0];
    mini[1] = opt;
    mini[2] = NULL;
    if (parse_options(2, mini, out) != 0)
      goto fail;
  }
  opt_where = NULL;
  if (parse_options(argc, argv, out) != 0 || options_finish(out) != 0)
    goto fail;
  for (int i = 1; i < argc; i++)
    if ((args[n++] = strdup(argv[i])) == NULL) {
      opt_error("out of memory");
      goto fail;
    }
  *args_out = args;
  args = NULL;
  rc = 0;
fail:
  opt_where = NULL;
  args_free(args);
  conf_free(&file);
  cfg_free(&first);
  if (rc != 0)
    cfg_free(out);
  return rc;
}

/* ---------------------------------------------------------------- reload */

/* What the configuration was at start, for the options that only a
 * restart changes (its strings are copies). */
static daemon_config_t start_cfg;
static int start_argc;
static char **start_argv;
static char **worker_args; /* what workers are started with (cfg_load) */

static char *dup_or_null(const char *s)
{
  return s != NULL ? strdup(s) : NULL;
}

static void start_cfg_keep(const daemon_config_t *c)
{
  start_cfg = *c;
  start_cfg.socket_path = dup_or_null(c->socket_path);
  start_cfg.devices = dup_or_null(c->devices);
  start_cfg.cache_dir = dup_or_null(c->cache_dir);
  start_cfg.compile_user = dup_or_null(c->compile_user);
  start_cfg.worker_user = dup_or_null(c->worker_user);
  start_cfg.metrics_listen = dup_or_null(c->metrics_listen);
  start_cfg.allow_users = start_cfg.allow_groups = NULL;
  start_cfg.admin_group = NULL;
  start_cfg.device_allow = NULL;
  start_cfg.ndevice_allow = 0;
  start_cfg.worker_arg = start_cfg.config_path = NULL;
}

static int str_differ(const char *a, const char *b)
{
  return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

/* The names of the options that differ between @p a and @p b and that
 * only a restart applies, as "socket, devices" in @p buf ("" if none). */
static void restart_changes(const daemon_config_t *a, const daemon_config_t *b,
                            char *buf, size_t len)
{
  struct {
    const char *name;
    int differ;
  } opts[] = {
      {"socket", str_differ(a->socket_path, b->socket_path)},
      {"socket-mode", a->socket_mode != b->socket_mode},
      {"devices", str_differ(a->devices, b->devices)},
      {"cpu-devices", a->cpu_devices != b->cpu_devices},
      {"cache-dir", str_differ(a->cache_dir, b->cache_dir)},
      {"cache-size", a->cache_size != b->cache_size},
      {"compile-jobs", a->compile_jobs != b->compile_jobs},
      {"compile-timeout", a->compile_timeout_s != b->compile_timeout_s},
      {"compile-user", str_differ(a->compile_user, b->compile_user)},
      {"compile-mem", a->compile_mem != b->compile_mem},
      {"busy-poll", a->busy_poll_us != b->busy_poll_us},
      {"gpu-wait", a->gpu_wait != b->gpu_wait},
      {"isolation", a->isolation != b->isolation},
      {"user", str_differ(a->worker_user, b->worker_user)},
      {"mps", a->mps != b->mps},
      {"metrics-listen", str_differ(a->metrics_listen, b->metrics_listen)},
  };
  size_t n = 0;

  buf[0] = '\0';
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (opts[i].differ && n < len)
      n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
                            opts[i].name);
}

static int device_rules_differ(const daemon_config_t *a,
                               const daemon_config_t *b)
{
  if (a->ndevice_allow != b->ndevice_allow)
    return 1;
  for (uint32_t i = 0; i < a->ndevice_allow; i++)
    if (strcmp(a->device_allow[i], b->device_allow[i]) != 0)
      return 1;
  return 0;
}

#define SWAP(x, y)                                                             \
  do {                                                                         \
    __typeof__(x) t_ = (x);                                                    \
    (x) = (y);                                                                 \
    (y) = t_;                                                                  \
  } while (0)

/*
 * Make @p nc the running configuration of what can change at run time:
 * the log level, the limits, quotas and timeouts (read where they are
 * checked, so a new session, request or allocation meets the new value;
 * a session's handle table is sized when it opens), and the access
 * policy (checked at accept, and at each device use against the device
 * rules of the session's connect). The access policy is built first: if
 * it fails, nothing changes. @p nc keeps the old values, for cfg_free().
 * @return 0 or -1 (logged).
 */
static int cfg_apply(daemon_t *d, daemon_config_t *nc)
{
  daemon_t probe = *d;
  daemon_config_t *c = &d->cfg;
  hipd_err_t err;

  probe.cfg = *nc;
  if (policy_init(&probe, &err) != 0) {
    log_error(0, "%s", err.msg[0] ? err.msg : hipd_strerror(err.code));
    return -1;
  }
  policy_free(d);
  d->policy = probe.policy;
  log_set_level(nc->log_level);
  c->log_level = nc->log_level;
  c->limits = nc->limits;
  c->max_inflight = nc->max_inflight;
  c->output_cap = nc->output_cap;
  c->max_input_bytes = nc->max_input_bytes;
  c->write_timeout_ms = nc->write_timeout_ms;
  c->hello_timeout_ms = nc->hello_timeout_ms;
  c->request_timeout_ms = nc->request_timeout_ms;
  c->shutdown_ms = nc->shutdown_ms;
  c->max_sessions = nc->max_sessions;
  c->max_handles = nc->max_handles;
  c->max_streams = nc->max_streams;
  c->mem_quota = nc->mem_quota;
  c->tenant_mem_quota = nc->tenant_mem_quota;
  c->tenant_max_sessions = nc->tenant_max_sessions;
  c->tenant_max_handles = nc->tenant_max_handles;
  c->tenant_max_streams = nc->tenant_max_streams;
  c->cpu_kernel_timeout_ms = nc->cpu_kernel_timeout_ms;
  c->worker_linger_ms = nc->worker_linger_ms;
  c->strict_allow = nc->strict_allow;
  SWAP(c->allow_users, nc->allow_users);
  SWAP(c->allow_groups, nc->allow_groups);
  SWAP(c->admin_group, nc->admin_group);
  SWAP(c->device_allow, nc->device_allow);
  SWAP(c->ndevice_allow, nc->ndevice_allow);
  if (d->role != ROLE_LISTENER)
    cpu_driver_set_launch_timeout(c->cpu_kernel_timeout_ms);
  return 0;
}

static void notify_reloading(void)
{
  struct timespec ts;
  char msg[96];

  clock_gettime(CLOCK_MONOTONIC, &ts);
  snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
           (unsigned long long)ts.tv_sec * 1000000ull +
               (unsigned long long)ts.tv_nsec / 1000);
  notify_send(msg);
}

/* A reload waiting for its worker check (workers_probe_start()). */
static struct {
  int pending;
  daemon_config_t nc;
  char **args;
} R;

/* The reload's second half: apply @p nc (the options @p args), then free
 * both. */
static void reload_apply(daemon_t *d, daemon_config_t *nc, char **args)
{
  char restart[256];
  const char *path = cfg_file(&d->cfg);

  if (cfg_apply(d, nc) != 0) {
    log_error(0, "reload failed: the running configuration is kept");
    goto done;
  }
  restart_changes(&start_cfg, nc, restart, sizeof(restart));
  if (restart[0] != '\0')
    log_warn(0, "changed in %s, needs a restart: %s",
             path != NULL ? path : "the configuration", restart);
  if (d->role == ROLE_LISTENER) {
    workers_set_args(d, args);
    workers_reload(d);
  }
  if (d->role != ROLE_WORKER)
    admin_configure(d);
  args_free(worker_args);
  worker_args = args;
  args = NULL;
  log_info(0,
           "configuration reloaded: log level %s, max-sessions %u, "
           "max-handles %u (new sessions), max-message %llu",
           log_level_name(d->cfg.log_level), d->cfg.max_sessions,
           d->cfg.max_handles, (unsigned long long)d->cfg.limits.max_message);
done:
  args_free(args);
  cfg_free(nc);
  notify_send("READY=1");
}

/* The worker check of a reload is over. */
static void reload_probed(daemon_t *d, int ok, void *ctx)
{
  (void)ctx;
  R.pending = 0;
  if (!ok || d->stopping) {
    if (!ok)
      log_error(0, "a worker could not start with these options (its error "
                   "is above)");
    log_error(0, "reload failed: the running configuration is kept");
    args_free(R.args);
    R.args = NULL;
    cfg_free(&R.nc);
    notify_send("READY=1");
    return;
  }
  reload_apply(d, &R.nc, R.args);
  R.args = NULL;
}

/* SIGHUP in the listener (or the single process): read hipd.conf and the
 * command line again and apply what can change; all or nothing. When the
 * device rules change, a worker checks them first without blocking the
 * loop (30 s at most): the reload finishes when it is done. */
static void reload(daemon_t *d)
{
  daemon_config_t nc;
  char **args = NULL;
  const char *path = cfg_file(&d->cfg);

  if (R.pending) {
    log_warn(0, "SIGHUP: the last reload is still checking its options: "
                "ignored");
    return;
  }
  notify_reloading();
  log_info(0, "SIGHUP: reloading %s", path != NULL ? path : "(no file)");
  opt_reloading = 1;
  if (cfg_load(start_argc, start_argv, 0, &nc, &args) != 0) {
    opt_reloading = 0;
    log_error(0, "reload failed: the running configuration is kept");
    args_free(args);
    cfg_free(&nc);
    notify_send("READY=1");
    return;
  }
  opt_reloading = 0;
  /* The listener holds no device: a worker checks the device rules. Ask
   * one (as at start) before anything changes. */
  if (d->role == ROLE_LISTENER && device_rules_differ(&d->cfg, &nc)) {
    hipd_err_t err;
    int rc;
    workers_set_args(d, args);
    rc = workers_probe_start(d, reload_probed, NULL, &err);
    workers_set_args(d, worker_args);
    if (rc != 0) {
      log_error(0, "%s", err.msg);
      log_error(0, "reload failed: the running configuration is kept");
      args_free(args);
      cfg_free(&nc);
      notify_send("READY=1");
      return;
    }
    R.pending = 1;
    R.nc = nc;
    R.args = args;
    return;
  }
  reload_apply(d, &nc, args);
}

/* A worker's reload: the options its listener read (worker.c). */
static void worker_reload_cb(daemon_t *d, int argc, char **argv)
{
  daemon_config_t nc;
  char **args = NULL;

  opt_reloading = 1;
  if (cfg_load(argc, argv, 1, &nc, &args) != 0) {
    opt_reloading = 0;
    log_error(0, "reload failed: this worker keeps its configuration");
    return;
  }
  opt_reloading = 0;
  if (cfg_apply(d, &nc) != 0)
    log_error(0, "reload failed: this worker keeps its configuration");
  else
    log_info(0,
             "configuration reloaded from the listener: max-handles %u "
             "(new sessions)",
             d->cfg.max_handles);
  args_free(args);
  cfg_free(&nc);
}

/*
 * Run the loop until nothing is left to run. With --busy-poll, after the
 * events of an iteration the loop polls its backend (epoll) fd without
 * blocking for up to that long before it sleeps: a request or a device
 * completion arriving meanwhile is served without the wake-up latency of a
 * sleeping thread (several microseconds per hop, more from deep CPU idle
 * states). Timers due meanwhile run when the spin ends.
 */
static void run_loop(daemon_t *d)
{
  uint64_t spin_ns = (uint64_t)d->cfg.busy_poll_us * 1000;
  struct pollfd pfd = {.fd = uv_backend_fd(d->loop), .events = POLLIN};

  if (spin_ns == 0 || pfd.fd < 0) {
    uv_run(d->loop, UV_RUN_DEFAULT);
    return;
  }
  while (uv_run(d->loop, UV_RUN_NOWAIT) != 0 && !abandoned) {
    uint64_t until = util_now_ns() + spin_ns;
    int ready = 0;

    while (!ready && util_now_ns() < until)
      ready = poll(&pfd, 1, 0) > 0;
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
  log_info(0, "%u compiles still running at shutdown: %u compilers killed",
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
    transport_close(d);
    if (d->role == ROLE_WORKER)
      worker_close(d);
    stop_compiles(d);
  }
}

/* Stop accepting, let in-flight work finish (bounded), end the loop. */
static void begin_stop(daemon_t *d, const char *why)
{
  d->stopping = 1;
  log_info(0, "%s: stopping (%u sessions, up to %u ms for in-flight work)", why,
           d->nsessions, d->cfg.shutdown_ms);
  server_stop(d, restart_fd >= 0);
  if (restart_fd < 0)
    notify_send("STOPPING=1");
  shutdown_deadline = uv_now(d->loop) + d->cfg.shutdown_ms;
  uv_timer_init(d->loop, &shutdown_timer);
  shutdown_timer.data = d;
  uv_timer_start(&shutdown_timer, shutdown_tick_cb, 0, 20);
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
  reload(d);
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
  if (d->role == ROLE_WORKER) {
    /* Only this tenant's sessions are lost: the listener starts a fresh
     * worker, with a fresh runtime, for the tenant's next connection. */
    snprintf(why, sizeof(why),
             "device %d cannot be reset in this process: this worker exits",
             dev->id);
    begin_stop(d, why);
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

static void trim_work_cb(uv_work_t *w)
{
  (void)w;
  bufpool_trim(10000);
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
  /* At most once a second, and only when it changed. */
  if (d->role != ROLE_WORKER)
    status_update(d);
  /* Transfer buffers unused for 10 s go back to the system. */
  if (!trim_busy &&
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
  struct passwd pwb, *pw = NULL;
  char buf[4096];

  if (getpwnam_r(user, &pwb, buf, sizeof(buf), &pw) != 0 || pw == NULL)
    return err_set(err, HIPD_EINVAL, "the worker account '%s' does not exist",
                   user);
  if (pw->pw_uid == 0)
    return err_set(err, HIPD_EINVAL, "--user %s is root", user);
  if (initgroups(pw->pw_name, pw->pw_gid) != 0 ||
      setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
      setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
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

  log_init();
  if (cfg_load(argc, argv, 0, &d->cfg, &worker_args) != 0)
    return 2;
  log_set_level(d->cfg.log_level);
  start_argc = argc;
  start_argv = argv;
  start_cfg_keep(&d->cfg);
  if (d->cfg.worker_user == NULL)
    d->cfg.worker_user = strdup("hipd");
  d->daemon_uid = geteuid();
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
  cpu_driver_set_count(d->cfg.cpu_devices);
  cpu_driver_set_launch_timeout(d->cfg.cpu_kernel_timeout_ms);
  if (d->cfg.busy_poll_us < 0)
    d->cfg.busy_poll_us = sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 50 : 0;
  exec_set_busy_poll((uint32_t)d->cfg.busy_poll_us);
#ifdef HAVE_HIP
  hip_driver_set_wait(d->cfg.gpu_wait);
#endif
  if ((rc = exec_bridge_init(d->loop)) != 0) {
    log_error(0, "cannot start the worker bridge: %s", uv_strerror(rc));
    return 1;
  }
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
        (rc = workers_init(d, worker_args, &err)) != 0) {
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
      log_debug(0, "worker check: the options are valid");
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
    if (cache_init(d->loop, d->role == ROLE_WORKER ? "" : d->cfg.cache_dir,
                   d->cfg.cache_size, &err) != 0) {
      log_error(0, "not started: %s", err.msg);
      return 1;
    }
  }
  if (d->role != ROLE_WORKER) {
    /* The listener (or the single process) compiles, in helpers; a
     * worker asks its listener. */
    hipd_err_t err;
    compile_pool_cfg_t ccfg = {.jobs = d->cfg.compile_jobs,
                               .timeout_s = d->cfg.compile_timeout_s,
                               .user = d->cfg.compile_user,
                               .mem_limit = d->cfg.compile_mem,
                               .probe = 1};
    compile_pool_stats_t cst;
    if (compile_pool_init(&ccfg, d->loop, &err) != 0) {
      log_error(0, "not started: %s", err.msg);
      return 1;
    }
    compile_pool_get_stats(&cst);
    log_info(0, "compile helpers: %u, as uid %lld, file system view: %s%s%s",
             cst.jobs, (long long)cst.uid, cst.fsview_name,
             cst.sandbox[0] ? "; not applied: " : "", cst.sandbox);
  }
  if (d->role == ROLE_LISTENER) {
    hipd_err_t err;
    struct passwd pwb, *pw = NULL;
    char buf[4096];
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (geteuid() == 0 &&
        getpwnam_r(d->cfg.worker_user, &pwb, buf, sizeof(buf), &pw) == 0 &&
        pw != NULL) {
      uid = pw->pw_uid;
      gid = pw->pw_gid;
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
    worker_on_reload(worker_reload_cb);
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
  if (d->role != ROLE_WORKER)
    metrics_start(d, argv);
  transport_init(d);
  uv_timer_init(d->loop, &d->housekeeping);
  d->housekeeping.data = d;
  uv_timer_start(&d->housekeeping, housekeeping_cb, 1000, 1000);
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
  cache_shutdown();
  admin_free();
  policy_free(d);
  log_info(0, "stopped");
  notify_close();
  cfg_free(&d->cfg);
  cfg_free(&start_cfg);
  args_free(worker_args);
  return 0;
}
