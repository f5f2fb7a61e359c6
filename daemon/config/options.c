/* SPDX-License-Identifier: MIT */
/* daemon/config/options.c: the table of hipd's options, and everything
 * that comes from it (options.h). */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conffile.h"
#include "handles.h"
#include "hipd.h"
#include "log.h"
#include "options.h"
#include "privsep/metrics.h"
#include "privsep/mps.h"
#include "util/parse.h"

/* ------------------------------------------------------------ the table */

#define FIELD(f)                                                               \
  .offset = offsetof(daemon_config_t, f),                                      \
  .size = sizeof(((daemon_config_t *)NULL)->f)
/* The rows of the common kinds: a number in [lo, hi], a string (@p min:
 * its least length; @p check: a validator, or NULL), one of @p names, a
 * flag. */
#define NUMBER(nm, f, low, high, dflt, w, a, h)                                \
  {                                                                            \
    .name = nm, .type = OPTION_SIZE, .when = OPTION_##w, FIELD(f), .lo = low,  \
    .hi = high, .def = dflt, .arg = a, .help = h                               \
  }
#define STRING(nm, f, min, check, w, a, h)                                     \
  {                                                                            \
    .name = nm, .type = OPTION_STRING, .when = OPTION_##w, FIELD(f),           \
    .lo = min, .parse = check, .arg = a, .help = h                             \
  }
#define ENUM(nm, f, values, dflt, w, a, h)                                     \
  {                                                                            \
    .name = nm, .type = OPTION_ENUM, .when = OPTION_##w, FIELD(f),             \
    .names = values, .def = dflt, .arg = a, .help = h                          \
  }
#define FLAG(nm, f, w, h)                                                      \
  {                                                                            \
    .name = nm, .type = OPTION_FLAG, .when = OPTION_##w, FIELD(f), .help = h   \
  }

static const char *const gpu_wait_names[] = {"auto", "spin", "yield", "block",
                                             NULL};
static const char *const isolation_names[] = {"uid", "session", "none", NULL};
static const char *const cache_scope_names[] = {"shared", "tenant", NULL};
static const char *const mps_names[] = {"auto", "on", "off", NULL};
static const char *const cgroups_names[] = {"auto", "off", NULL};
_Static_assert(ISOLATION_UID == 0 && ISOLATION_SESSION == 1 &&
                   ISOLATION_NONE == 2,
               "isolation_names[] follows ISOLATION_*");
_Static_assert(MPS_AUTO == 0 && MPS_ON == 1 && MPS_OFF == 2,
               "mps_names[] follows MPS_*");

static int parse_log_level(daemon_config_t *cfg, const char *arg,
                           hipd_err_t *err)
{
  int lvl = log_level_parse(arg);

  (void)err;
  if (lvl < 0)
    return HIPD_EINVAL;
  cfg->log_level = lvl;
  return 0;
}

static int check_compile_user(daemon_config_t *cfg, const char *arg,
                              hipd_err_t *err)
{
  (void)cfg;
  (void)err;
  if (arg[0] == '\0' || strlen(arg) > 32 || strcmp(arg, "root") == 0)
    return HIPD_EINVAL;
  return 0;
}

static int check_config(daemon_config_t *cfg, const char *arg, hipd_err_t *err)
{
  (void)err;
  cfg->no_config = arg[0] == '\0';
  return 0;
}

static int check_mps_tenants(daemon_config_t *cfg, const char *arg,
                             hipd_err_t *err)
{
  (void)cfg;
  return mps_tenants_check(arg, err);
}

static int check_mps_threads(daemon_config_t *cfg, const char *arg,
                             hipd_err_t *err)
{
  (void)cfg;
  return mps_rule_check("mps-active-threads", arg, 0, err);
}

static int check_mps_mem(daemon_config_t *cfg, const char *arg, hipd_err_t *err)
{
  (void)cfg;
  return mps_rule_check("mps-device-mem", arg, 1, err);
}

static int check_metrics_listen(daemon_config_t *cfg, const char *arg,
                                hipd_err_t *err)
{
  (void)cfg;
  (void)err;
#ifndef HAVE_MICROHTTPD
  (void)arg;
  return err_set(err, HIPD_EINVAL,
                 "--metrics-listen: this hipd was built without "
                 "libmicrohttpd (Debian: libmicrohttpd-dev; configure "
                 "--with-microhttpd)");
#else
  struct sockaddr_storage ss;
  socklen_t sl;
  int lo;
  hipd_err_t e;

  if (metrics_addr_parse(arg, &ss, &sl, &lo, &e) != 0)
    return err_set(err, HIPD_EINVAL, "--metrics-listen %s", e.msg);
  return 0;
#endif
}

/* In --help's order. */
const option_spec_t options_table[] = {
    {.name = "socket",
     .letter = 's',
     .type = OPTION_STRING,
     .when = OPTION_RESTART,
     FIELD(socket_path),
     .arg = "PATH",
     .help = "listen on PATH (default: $HIPD_SOCKET,\n"
             "else /run/hipd/hipd.sock as root, else\n"
             "$XDG_RUNTIME_DIR/hipd.sock)"},
    {.name = "socket-mode",
     .type = OPTION_MODE,
     .when = OPTION_RESTART,
     FIELD(socket_mode),
     .def = 0660,
     .arg = "MODE",
     .help = "octal permissions of the socket (0660)"},
    {.name = "log-level",
     .letter = 'l',
     .type = OPTION_CUSTOM,
     .when = OPTION_RELOAD,
     FIELD(log_level),
     .def = HLOG_INFO,
     .parse = parse_log_level,
     .arg = "LEVEL",
     .help = "error, warn, info (default) or debug"},
    NUMBER("log-tenant-rate", log_tenant_rate, 0, 1000000, 20, RELOAD, "N",
           "lines a second about one uid's sessions,\n"
           "after a burst of five seconds' worth;\n"
           "the rest are counted (20; 0: no limit)"),
    NUMBER("max-message", limits.max_message, 1024, (uint64_t)4 << 30,
           PROTO_DEFAULT_MAX_MESSAGE, RELOAD, "BYTES",
           "largest request accepted (512M)"),
    NUMBER("max-depth", limits.max_depth, 2, PROTO_DEPTH_CAP, 16, RELOAD, "N",
           "deepest nesting of a request (16)"),
    NUMBER("max-inflight", max_inflight, 1, 1 << 20, 256, RELOAD, "N",
           "unanswered requests per session before\n"
           "reading pauses (256)"),
    NUMBER("output-cap", output_cap, 4096, (uint64_t)64 << 30, (int64_t)1 << 30,
           RELOAD, "BYTES",
           "queued reply bytes per session before\n"
           "it is disconnected (1G)"),
    /* 0: 1G, or --max-message if larger (options_finish()). */
    NUMBER("max-input-bytes", max_input_bytes, 1024, (uint64_t)1 << 40, 0,
           RELOAD, "BYTES",
           "input buffered by all sessions together\n"
           "(beyond 128K each); a session that needs\n"
           "more waits its turn (1G, at least\n"
           "--max-message)"),
    NUMBER("write-timeout", write_timeout_ms, 10, UINT32_MAX, 30000, RELOAD,
           "MS",
           "disconnect a session whose replies make\n"
           "no progress for MS (30000)"),
    NUMBER("hello-timeout", hello_timeout_ms, 0, UINT32_MAX, 10000, RELOAD,
           "MS",
           "disconnect a session that has not completed\n"
           "hello within MS (10000; 0: no limit)"),
    NUMBER("request-timeout", request_timeout_ms, 0, UINT32_MAX, 60000, RELOAD,
           "MS",
           "disconnect a session whose request stays\n"
           "incomplete for MS (60000; 0: no limit)"),
    NUMBER("shutdown-timeout", shutdown_ms, 0, UINT32_MAX, 5000, RELOAD, "MS",
           "time in-flight work gets at exit (5000);\n"
           "compiles still running then are abandoned"),
    NUMBER("max-sessions", max_sessions, 1, 1 << 20, 1024, RELOAD, "N",
           "concurrent sessions (1024)"),
    NUMBER("max-handles", max_handles, 1, HANDLES_MAX_DEFAULT * 16ull,
           HANDLES_MAX_DEFAULT, RELOAD, "N", "handles per session (1048576)"),
    NUMBER("max-streams", max_streams, 1, 4096, 64, RELOAD, "N",
           "streams per session (64)"),
    NUMBER("mem-quota", mem_quota, 1, UINT64_MAX >> 1, 0, RELOAD, "BYTES",
           "device memory per session (default:\n"
           "unlimited)"),
    NUMBER("tenant-mem-quota", tenant_mem_quota, 0, UINT64_MAX >> 1, 0, RELOAD,
           "BYTES",
           "device memory of all the sessions of\n"
           "one uid together (default: unlimited)"),
    /* Default 0: cpu_driver_default_reserve() (main.c). */
    NUMBER("host-mem-reserve", host_mem_reserve, (uint64_t)1 << 20,
           UINT64_MAX >> 1, 0, RESTART, "BYTES",
           "host memory the CPU device leaves free:\n"
           "an allocation that would leave less fails\n"
           "with ENOMEM (default: a sixteenth of the\n"
           "host's, 256M to 8G)"),
    NUMBER("tenant-device-share", tenant_device_share, 0, 100, 50, RELOAD,
           "PERCENT",
           "the most of one device's memory that one\n"
           "uid's buffers may hold (50; 0: no limit)"),
    /* Default 0: half of the host's memory (main.c). */
    NUMBER("tenant-host-mem", tenant_host_mem, (uint64_t)16 << 20,
           UINT64_MAX >> 1, 0, RELOAD, "BYTES",
           "host memory of one uid's workers and\n"
           "CPU runners together, in their cgroup\n"
           "(default: half of the host's)"),
    NUMBER("tenant-max-pids", tenant_max_pids, 0, 1 << 22, 4096, RELOAD, "N",
           "processes and threads of one uid's workers\n"
           "and runners, in their cgroup (4096; 0: no\n"
           "limit)"),
    ENUM("cgroups", cgroups, cgroups_names, CGROUPS_AUTO, RESTART, "MODE",
         "auto: each uid's workers, and each compile\n"
         "helper, in a cgroup of its own (cgroup2\n"
         "delegated to hipd, or v1), as root;\n"
         "off: none"),
    NUMBER("tenant-max-sessions", tenant_max_sessions, 0, UINT32_MAX, 512,
           RELOAD, "N",
           "sessions of one uid at once, connections\n"
           "before their hello included (512; 0: no\n"
           "limit)"),
    NUMBER("tenant-max-connecting", tenant_max_connecting, 0, UINT32_MAX, 32,
           RELOAD, "N",
           "connections of one uid that have gone 1 s\n"
           "without a successful hello (32; 0: no\n"
           "limit)"),
    NUMBER("tenant-max-handles", tenant_max_handles, 0, UINT32_MAX, 0, RELOAD,
           "N",
           "handles of all the sessions of one uid\n"
           "(0: no limit, the default)"),
    NUMBER("tenant-max-streams", tenant_max_streams, 0, UINT32_MAX, 0, RELOAD,
           "N",
           "streams made by all the sessions of\n"
           "one uid (0: no limit, the default)"),
    STRING("allow-users", allow_users, 0, NULL, RELOAD, "LIST",
           "only these users (names or uids, comma\n"
           "list) may connect (default: anyone the\n"
           "socket's mode lets in)"),
    STRING("allow-groups", allow_groups, 0, NULL, RELOAD, "LIST",
           "only members of these groups (names or\n"
           "gids) may connect; with --allow-users,\n"
           "either admits"),
    /* Repeatable: each one a rule, in order. */
    {.name = "device-allow",
     .type = OPTION_LIST,
     .when = OPTION_RELOAD,
     FIELD(device_allow),
     .count_offset = offsetof(daemon_config_t, ndevice_allow),
     .arg = "DEV=LIST",
     .help = "only these users and @groups may use\n"
             "device DEV (a global id, hip, cpu, hip:N\n"
             "or cpu:N); repeatable; others do not see\n"
             "it"},
    STRING("admin-group", admin_group, 1, NULL, RELOAD, "GROUP",
           "members of GROUP see and act on every\n"
           "session (session.list, session.kill,\n"
           "log.level); default: root only"),
    FLAG("strict-allow", strict_allow, RELOAD,
         "root and hipd's own user must be listed\n"
         "too (default: always allowed)"),
    STRING("devices", devices, 0, NULL, RESTART, "LIST",
           "serve only these devices: all (default),\n"
           "or a comma list of hip, cpu, hip:N, cpu:N"),
    NUMBER("cpu-devices", cpu_devices, 0, 16, 1, RESTART, "N",
           "how many CPU devices to serve (1)"),
    STRING("cache-dir", cache_dir, 0, NULL, RESTART, "DIR",
           "compiled-kernel cache (default:\n"
           "/var/cache/hipd as root, else\n"
           "$XDG_CACHE_HOME/hipd); '' for memory only"),
    ENUM("cache-scope", cache_scope, cache_scope_names, CACHE_SCOPE_SHARED,
         RESTART, "SCOPE",
         "shared (default: a kernel one uid compiled\n"
         "is a hit for all, and its timing tells so)\n"
         "or tenant (each uid has entries of its own)"),
    NUMBER("cache-size", cache_size, 4096, UINT64_MAX >> 1, (int64_t)1 << 30,
           RESTART, "BYTES", "cache cap, on disk and in memory (1G)"),
    NUMBER("cache-warm", cache_warm, 0, UINT64_MAX >> 1, (int64_t)256 << 20,
           RESTART, "BYTES",
           "at start, load up to BYTES of the disk cache\n"
           "into memory in the background, most\n"
           "recently used first (256M; 0: none)"),
    NUMBER("cpu-kernel-timeout", cpu_kernel_timeout_ms, 0, UINT32_MAX, 600000,
           RELOAD, "MS",
           "stop a CPU-device kernel running\n"
           "longer (600000; 0: no limit)"),
    NUMBER("gpu-kernel-timeout", gpu_kernel_timeout_ms, 0, UINT32_MAX, 600000,
           RELOAD, "MS",
           "end the worker of a uid whose GPU work\n"
           "queued on one stream has not finished MS\n"
           "later (600000; 0: no limit)"),
    /* Defaults 0: min(4, CPUs), 120 s, 4 GiB (compile_pool.c). */
    NUMBER("compile-jobs", compile_jobs, 1, 256, 0, RESTART, "N",
           "compiles at once, each in its own sandboxed\n"
           "hipd-compile helper (default: min(4, CPUs))"),
    NUMBER("compile-timeout", compile_timeout_s, 1, 86400, 0, RESTART, "S",
           "stop a compile running longer (120)"),
    NUMBER("compile-idle-timeout", compile_idle_s, 0, 86400, 10, RESTART, "S",
           "stop a compile whose compiler uses no CPU\n"
           "time for S seconds (10; 0: never; host\n"
           "compilers only, not hiprtc)"),
    STRING("compile-user", compile_user, 1, check_compile_user, RESTART, "NAME",
           "the account compile helpers run as when\n"
           "hipd is root (default: hipd-compile, else\n"
           "nobody; never root)"),
    FLAG("compile-gpu-driver", compile_gpu_driver, RESTART,
         "let compile helpers open the GPU driver:\n"
         "NVRTC then keeps its compute cache, about\n"
         "16 ms less a cold compile on NVIDIA, but\n"
         "the helpers that read every tenant's source\n"
         "reach the driver's ioctls (default: off)"),
    NUMBER("compile-mem", compile_mem, (uint64_t)64 << 20, (uint64_t)1 << 40, 0,
           RESTART, "BYTES",
           "address space of a compile helper and of\n"
           "each compiler process (4G; with\n"
           "--compile-gpu-driver: private writable memory)"),
    /* Defaults 0: 8, 256 MiB (compile_pool.c). */
    NUMBER("tenant-max-compiles", tenant_max_compiles, 1, 65536, 0, RESTART,
           "N",
           "compile requests of one uid waiting or\n"
           "running at once; more get EBUSY (8)"),
    NUMBER("compile-queue-bytes", compile_queue_bytes, (uint64_t)1 << 20,
           (uint64_t)1 << 40, 0, RESTART, "BYTES",
           "kernel source all waiting and running\n"
           "compiles may hold, one uid at most half;\n"
           "more gets EBUSY (256M)"),
    ENUM("gpu-wait", gpu_wait, gpu_wait_names, 0, RESTART, "MODE",
         "how device workers wait for a GPU: auto\n"
         "(the runtime's choice, default), spin,\n"
         "yield or block"),
    /* -1: 50 with 8 or more CPUs, else 0 (main.c). */
    NUMBER("busy-poll", busy_poll_us, 0, 1000000, -1, RESTART, "US",
           "after each event, poll for the next one for\n"
           "US microseconds before sleeping (the loop\n"
           "and the device workers, as many at once as\n"
           "--spin-cpus allow; a loop without a place\n"
           "still polls for its own launches' end):\n"
           "lower latency for a bounded amount of CPU\n"
           "(default: 50 with 8 or more CPUs, else 0)"),
    NUMBER("loop-launch", loop_launch, 0, 4096, 64, RESTART, "N",
           "while a worker's loop busy-polls, it launches\n"
           "kernels on up to N idle GPU streams itself\n"
           "and polls for their end, without the streams'\n"
           "threads (0: never; 64)"),
    /* 0: the CPUs, 4 to 32 (device.c). */
    NUMBER("stream-threads", stream_threads, 0, 1024, 0, RESTART, "N",
           "threads that run the work of a device's\n"
           "streams in each process, started as needed\n"
           "(default: the CPUs, 4 to 32)"),
    /* -1: spin_default_cpus() (main.c). */
    NUMBER("spin-cpus", spin_cpus, 0, 4096, -1, RESTART, "N",
           "threads of all hipd's processes together\n"
           "that may busy-poll at once, fewer while the\n"
           "host has fewer CPUs free (default: half the\n"
           "CPUs with 8 or more, else 1; 0: none)"),
    ENUM("isolation", isolation, isolation_names, ISOLATION_UID, RESTART,
         "MODE",
         "what shares a process: uid (default: one\n"
         "worker process per user), session (one per\n"
         "connection) or none (one process for all:\n"
         "a trusted single-user node only)"),
    /* NULL: "hipd" (main.c). */
    STRING("user", worker_user, 1, NULL, RESTART, "NAME",
           "the workers' account when hipd runs as root\n"
           "(hipd)"),
    NUMBER("tenant-workers", tenant_workers, 1, 1024, 4, RESTART, "N",
           "with --isolation uid, spread one uid's\n"
           "sessions over up to N workers (4)"),
    NUMBER("worker-sessions", worker_sessions, 1, 1u << 20, 4, RESTART, "N",
           "with --tenant-workers, a uid's new session\n"
           "starts a worker of its own only when its\n"
           "least busy worker has N sessions (4)"),
    NUMBER("worker-linger", worker_linger_ms, 0, UINT32_MAX, 10000, RELOAD,
           "MS",
           "how long a worker with no session stays\n"
           "(10000)"),
    ENUM("mps", mps, mps_names, MPS_AUTO, RESTART, "MODE",
         "NVIDIA: start hipd's own MPS control daemon\n"
         "so tenants share the GPU concurrently: auto\n"
         "(default: where installed), on, off"),
    /* NULL: auto (mps.h). */
    STRING("mps-tenants", mps_tenants, 1, check_mps_tenants, RELOAD, "WHO",
           "whose workers are MPS clients: auto\n"
           "(default: one uid's at a time, so a fault\n"
           "never crosses uids), all, or a list of\n"
           "users and @groups; the others get contexts\n"
           "of their own, time-sliced"),
    /* Repeatable, each a rule (mps.h); reloads reach new workers. */
    {.name = "mps-active-threads",
     .type = OPTION_LIST,
     .when = OPTION_RELOAD,
     FIELD(mps_threads),
     .count_offset = offsetof(daemon_config_t, nmps_threads),
     .parse = check_mps_threads,
     .arg = "[WHO=]PERCENT",
     .help = "under MPS, the share of a GPU's SMs one\n"
             "uid's kernels may hold at once (50);\n"
             "WHO= (a user, uid, @group) for one;\n"
             "repeatable"},
    {.name = "mps-device-mem",
     .type = OPTION_LIST,
     .when = OPTION_RELOAD,
     FIELD(mps_mem),
     .count_offset = offsetof(daemon_config_t, nmps_mem),
     .parse = check_mps_mem,
     .arg = "[WHO=]BYTES",
     .help = "under MPS, the device memory one uid's\n"
             "contexts may pin on each GPU (default:\n"
             "no limit beyond --tenant-device-share);\n"
             "WHO= for one; repeatable"},
    STRING("config", config_path, 0, check_config, CMDLINE, "FILE",
           "read the options of FILE first (default:\n" SYSCONFDIR
           "/hipd/hipd.conf, if it exists;\n"
           "hipd.conf(5)); the command line overrides it"),
    FLAG("no-config", no_config, CMDLINE,
         "read no configuration file (as --config '')"),
    STRING("metrics-listen", metrics_listen, 0, check_metrics_listen, RESTART,
           "ADDR:PORT",
           "serve Prometheus metrics over HTTP\n"
           "at /metrics (e.g. 127.0.0.1:9464 or\n"
           "[::1]:9464; default: off); whoever reaches\n"
           "it sees every tenant's usage"),
    /* The exceptions: no field; they print and exit. */
    {.name = "version",
     .letter = 'V',
     .type = OPTION_INFO,
     .when = OPTION_CMDLINE,
     .help = "print the version and exit"},
    {.name = "help",
     .letter = 'h',
     .type = OPTION_INFO,
     .when = OPTION_CMDLINE,
     .help = "print this help and exit"},
    /* Hidden: --worker=ROLE is how the listener starts a worker or the
     * metrics process (privsep/worker.h), not an option for people. */
    STRING("worker", worker_arg, 0, NULL, CMDLINE, "ROLE", NULL),
    /* Hidden: the table, one option a line, for tests/check_man.sh. */
    {.name = "list-options", .type = OPTION_INFO, .when = OPTION_CMDLINE},
};
const size_t options_count = sizeof(options_table) / sizeof(options_table[0]);

const option_spec_t *options_find(const char *name)
{
  for (size_t i = 0; i < options_count; i++)
    if (strcmp(options_table[i].name, name) == 0)
      return &options_table[i];
  return NULL;
}

/* ------------------------------------------------------------ the fields */

static void *field_of(daemon_config_t *cfg, const option_spec_t *o)
{
  return (char *)cfg + o->offset;
}

static const void *cfield_of(const daemon_config_t *cfg, const option_spec_t *o)
{
  return (const char *)cfg + o->offset;
}

static uint32_t *count_of(daemon_config_t *cfg, const option_spec_t *o)
{
  return (uint32_t *)(void *)((char *)cfg + o->count_offset);
}

static uint32_t ccount_of(const daemon_config_t *cfg, const option_spec_t *o)
{
  return *(const uint32_t *)(const void *)((const char *)cfg + o->count_offset);
}

/* Store @p v in a number field of @p size bytes (an int field takes the
 * same bits: -1 is 0xffffffff). */
static void number_set(void *f, size_t size, uint64_t v)
{
  if (size == sizeof(uint64_t)) {
    memcpy(f, &v, sizeof(v));
  } else if (size == sizeof(uint32_t)) {
    uint32_t v32 = (uint32_t)v;
    memcpy(f, &v32, sizeof(v32));
  }
}

_Static_assert(sizeof(int) == sizeof(uint32_t) &&
                   sizeof(unsigned) == sizeof(uint32_t) &&
                   sizeof(size_t) == sizeof(uint64_t),
               "number fields are 4 or 8 bytes");

static int is_string(const option_spec_t *o)
{
  return o->type == OPTION_STRING;
}

static int has_field(const option_spec_t *o)
{
  return o->type != OPTION_INFO;
}

void options_defaults(daemon_config_t *cfg)
{
  memset(cfg, 0, sizeof(*cfg));
  proto_limits_default(&cfg->limits);
  cfg->listen_fd = -1; /* not an option: main.c's */
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (has_field(o) && !is_string(o) && o->type != OPTION_LIST)
      number_set(field_of(cfg, o), o->size, (uint64_t)o->def);
  }
}

void options_free(daemon_config_t *cfg)
{
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (is_string(o)) {
      free(*(char **)field_of(cfg, o));
    } else if (o->type == OPTION_LIST) {
      char **v = *(char ***)field_of(cfg, o);
      for (uint32_t j = 0; j < *count_of(cfg, o); j++)
        free(v[j]);
      free(v);
    }
  }
  memset(cfg, 0, sizeof(*cfg));
}

int options_copy(daemon_config_t *dst, const daemon_config_t *src)
{
  *dst = *src;
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (is_string(o)) {
      char **f = field_of(dst, o);
      if (*f != NULL && (*f = strdup(*f)) == NULL)
        goto fail;
    } else if (o->type == OPTION_LIST) {
      char ***f = field_of(dst, o), **from = *f;
      uint32_t n = *count_of(dst, o);
      *f = NULL;
      *count_of(dst, o) = 0;
      if (n == 0)
        continue;
      if ((*f = calloc(n, sizeof(**f))) == NULL)
        goto fail;
      for (uint32_t j = 0; j < n; j++, (*count_of(dst, o))++)
        if (((*f)[j] = strdup(from[j])) == NULL)
          goto fail;
    }
  }
  return 0;
fail:
  /* The strings not copied yet are still @p src's: drop them first. */
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (is_string(o) &&
        *(char **)field_of(dst, o) == *(char *const *)cfield_of(src, o))
      *(char **)field_of(dst, o) = NULL;
    else if (o->type == OPTION_LIST && *(char ***)field_of(dst, o) ==
                                           *(char **const *)cfield_of(src, o)) {
      *(char ***)field_of(dst, o) = NULL;
      *count_of(dst, o) = 0;
    }
  }
  options_free(dst);
  return HIPD_ENOMEM;
}

static int str_differ(const char *a, const char *b)
{
  return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

int options_differ(const option_spec_t *o, const daemon_config_t *a,
                   const daemon_config_t *b)
{
  const void *fa = cfield_of(a, o), *fb = cfield_of(b, o);

  if (!has_field(o))
    return 0;
  if (is_string(o))
    return str_differ(*(char *const *)fa, *(char *const *)fb);
  if (o->type == OPTION_LIST) {
    char *const *va = *(char **const *)fa, *const *vb = *(char **const *)fb;
    if (ccount_of(a, o) != ccount_of(b, o))
      return 1;
    for (uint32_t j = 0; j < ccount_of(a, o); j++)
      if (strcmp(va[j], vb[j]) != 0)
        return 1;
    return 0;
  }
  return memcmp(fa, fb, o->size) != 0;
}

void options_apply(daemon_config_t *run, daemon_config_t *nc)
{
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    void *fr = field_of(run, o), *fn = field_of(nc, o);

    if (o->when != OPTION_RELOAD || !has_field(o))
      continue;
    if (is_string(o) || o->type == OPTION_LIST) {
      void *t = *(void **)fr;
      *(void **)fr = *(void **)fn;
      *(void **)fn = t;
      if (o->type == OPTION_LIST) {
        uint32_t n = *count_of(run, o);
        *count_of(run, o) = *count_of(nc, o);
        *count_of(nc, o) = n;
      }
    } else {
      memcpy(fr, fn, o->size);
    }
  }
}

void options_restart_changes(const daemon_config_t *a, const daemon_config_t *b,
                             char *buf, size_t len)
{
  size_t n = 0;

  buf[0] = '\0';
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (o->when == OPTION_RESTART && options_differ(o, a, b) && n < len)
      n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", o->name);
  }
}

/* ------------------------------------------------------------ errors */

/* Where the option being parsed came from, for its error: NULL for the
 * command line, else "FILE:LINE". While reloading, errors are logged
 * instead of printed. */
static const char *opt_where;
static int opt_reloading;

void options_set_reloading(int on)
{
  opt_reloading = on;
}

void options_error(const char *fmt, ...)
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

/* ------------------------------------------------------------ --help */

/* The column where --help's text starts. */
#define HELP_COLUMN 27

void options_usage(FILE *f)
{
  fputs("Usage: hipd [OPTION]...\n"
        "GPU execution daemon: serves devices, memory, streams, events and\n"
        "kernels to clients over a Unix socket (msgpack-rpc).\n"
        "\n",
        f);
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    const char *line = o->help, *nl;
    int n;

    if (o->help == NULL)
      continue;
    if (o->letter != 0)
      n = fprintf(f, "  -%c, --%s", o->letter, o->name);
    else
      n = fprintf(f, "      --%s", o->name);
    if (o->arg != NULL)
      n += fprintf(f, " %s", o->arg);
    fprintf(f, "%*s", n < HELP_COLUMN ? HELP_COLUMN - n : 2, "");
    while ((nl = strchr(line, '\n')) != NULL) {
      fprintf(f, "%.*s\n%*s", (int)(nl - line), line, HELP_COLUMN, "");
      line = nl + 1;
    }
    fprintf(f, "%s\n", line);
  }
  fputs("\n"
        "SIGINT/SIGTERM stop accepting, let in-flight requests finish and "
        "exit 0.\n"
        "SIGHUP reloads the configuration file (and the command line): the "
        "log\n"
        "level, limits, quotas and access policy change at once (hipd(8)).\n",
        f);
}

/* `hipd --list-options`: "NAME WHEN TYPE ARG" a line, WHEN reload,
 * restart or cmdline, TYPE the kind of value, ARG "-" for none; hidden
 * options too (tests/check_man.sh). */
static void options_list(FILE *f)
{
  static const char *const types[] = {
      [OPTION_STRING] = "string", [OPTION_SIZE] = "number",
      [OPTION_MODE] = "mode",     [OPTION_FLAG] = "flag",
      [OPTION_ENUM] = "enum",     [OPTION_LIST] = "list",
      [OPTION_CUSTOM] = "custom", [OPTION_INFO] = "info"};
  static const char *const whens[] = {[OPTION_RELOAD] = "reload",
                                      [OPTION_RESTART] = "restart",
                                      [OPTION_CMDLINE] = "cmdline"};

  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    fprintf(f, "%s %s %s %s%s\n", o->name, whens[o->when], types[o->type],
            o->arg != NULL ? o->arg : "-", o->help == NULL ? " hidden" : "");
  }
}

/* ------------------------------------------------------------ parsing */

/* getopt_long's view of the table: a row's val is its letter, or 256 and
 * its index. */
static struct option
    longopts[sizeof(options_table) / sizeof(options_table[0]) + 1];
static char shortopts[64];

static void getopt_tables(void)
{
  size_t n = 0;

  if (longopts[0].name != NULL)
    return;
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    int arg = o->type == OPTION_FLAG || o->type == OPTION_INFO
                  ? no_argument
                  : required_argument;
    longopts[i] = (struct option){o->name, arg, NULL,
                                  o->letter ? o->letter : 256 + (int)i};
    if (o->letter != 0 && n + 3 < sizeof(shortopts)) {
      shortopts[n++] = o->letter;
      if (arg == required_argument)
        shortopts[n++] = ':';
    }
  }
}

static const option_spec_t *option_of_val(int val)
{
  if (val >= 256 && (size_t)(val - 256) < options_count)
    return &options_table[val - 256];
  for (size_t i = 0; i < options_count; i++)
    if (options_table[i].letter != 0 && options_table[i].letter == val)
      return &options_table[i];
  return NULL;
}

/* "a, b, c or d": the values of an OPTION_ENUM, for its error. */
static void enum_names(const option_spec_t *o, char *buf, size_t len)
{
  size_t n = 0, count = 0;

  while (o->names[count] != NULL)
    count++;
  buf[0] = '\0';
  for (size_t i = 0; i < count && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s",
                          i == 0           ? ""
                          : i + 1 == count ? " or "
                                           : ", ",
                          o->names[i]);
}

/* Set the option @p o from @p arg (NULL for one without an argument).
 * @return 0 or a HIPD_E* code, with @p err's message saying why ("": an
 * invalid value, which the caller reports). */
static int option_set(daemon_config_t *cfg, const option_spec_t *o,
                      const char *arg, hipd_err_t *err)
{
  void *f = field_of(cfg, o);
  uint64_t v;
  int rc;

  switch (o->type) {
  case OPTION_STRING: {
    char *copy;
    if (strlen(arg) < o->lo)
      return HIPD_EINVAL;
    if (o->parse != NULL && (rc = o->parse(cfg, arg, err)) != 0)
      return rc;
    if ((copy = strdup(arg)) == NULL)
      return err_set(err, HIPD_ENOMEM, "out of memory");
    free(*(char **)f);
    *(char **)f = copy;
    return 0;
  }
  case OPTION_SIZE:
    if (util_parse_size(arg, o->lo, o->hi, &v) != 0)
      return HIPD_EINVAL;
    number_set(f, o->size, v);
    return 0;
  case OPTION_MODE: {
    char *end;
    long m = strtol(arg, &end, 8);
    if (arg[0] < '0' || arg[0] > '7' || *end != '\0' || m < 0 || m > 0777)
      return HIPD_EINVAL;
    number_set(f, o->size, (uint64_t)m);
    return 0;
  }
  case OPTION_FLAG:
    number_set(f, o->size, 1);
    return 0;
  case OPTION_ENUM: {
    char names[128];
    for (int i = 0; o->names[i] != NULL; i++)
      if (strcmp(arg, o->names[i]) == 0) {
        number_set(f, o->size, (uint64_t)i);
        return 0;
      }
    enum_names(o, names, sizeof(names));
    return err_set(err, HIPD_EINVAL, "%s: '%s' is not %s", o->name, arg, names);
  }
  case OPTION_LIST: {
    char ***list = f, *copy, **grown;
    uint32_t *n = count_of(cfg, o);
    if (o->parse != NULL && (rc = o->parse(cfg, arg, err)) != 0)
      return rc;
    copy = strdup(arg);
    grown = copy != NULL ? realloc(*list, (*n + 1) * sizeof(**list)) : NULL;
    if (grown == NULL) {
      free(copy);
      return err_set(err, HIPD_ENOMEM, "out of memory");
    }
    *list = grown;
    grown[(*n)++] = copy;
    return 0;
  }
  case OPTION_CUSTOM:
    return o->parse(cfg, arg, err);
  case OPTION_INFO:
    break;
  }
  return 0;
}

/* --help, --version, --list-options: print, and exit 0. */
static void option_info(const option_spec_t *o)
{
  if (strcmp(o->name, "version") == 0)
    printf("hipd %s (protocol %d)\n", PACKAGE_VERSION, HIPD_PROTOCOL_VERSION);
  else if (strcmp(o->name, "help") == 0)
    options_usage(stdout);
  else
    options_list(stdout);
  exit(0);
}

/* Apply the options of @p argv to @p cfg (which holds the defaults, or
 * what came before: the config file's entries come first). @return 0 or
 * HIPD_EINVAL (the error printed). The checks between options are
 * options_finish()'s. */
static int parse_options(int argc, char **argv, daemon_config_t *cfg)
{
  int opt;

  getopt_tables();
  optind = 0; /* GNU: start afresh (called once per file entry too) */
  while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    const option_spec_t *o = option_of_val(opt);
    hipd_err_t err;

    if (o == NULL) {
      options_usage(stderr);
      return HIPD_EINVAL;
    }
    if (o->type == OPTION_INFO)
      option_info(o);
    err_clear(&err);
    if (option_set(cfg, o, optarg, &err) == 0)
      continue;
    if (err.msg[0] != '\0')
      options_error("%s", err.msg);
    else
      options_error("invalid value '%s' for %s%s", optarg,
                    opt_where != NULL ? "" : "--", o->name);
    return err.code != 0 ? err.code : HIPD_EINVAL;
  }
  if (optind < argc) {
    options_error("unexpected argument '%s'", argv[optind]);
    return HIPD_EINVAL;
  }
  return 0;
}

/* The checks between options, once all are in. @return 0 or
 * HIPD_EINVAL. */
static int options_finish(daemon_config_t *cfg)
{
  /* The bound must let a session buffer the largest message; unset, it
   * follows a larger --max-message. */
  if (cfg->max_input_bytes == 0) {
    cfg->max_input_bytes = (uint64_t)1 << 30;
    if (cfg->max_input_bytes < cfg->limits.max_message)
      cfg->max_input_bytes = cfg->limits.max_message;
  } else if (cfg->max_input_bytes < cfg->limits.max_message) {
    options_error("--max-input-bytes %llu is below --max-message %llu: the "
                  "largest request could never be buffered",
                  (unsigned long long)cfg->max_input_bytes,
                  (unsigned long long)cfg->limits.max_message);
    return HIPD_EINVAL;
  }
  return 0;
}

/* ------------------------------------------------------------ the file */

void options_args_free(char **args)
{
  for (size_t i = 0; args != NULL && args[i] != NULL; i++)
    free(args[i]);
  free(args);
}

const char *options_file(const daemon_config_t *cfg)
{
  if (cfg->no_config)
    return NULL;
  return cfg->config_path != NULL ? cfg->config_path
                                  : SYSCONFDIR "/hipd/hipd.conf";
}

/* The command-line option of a hipd.conf entry: "--NAME=VALUE", "--NAME"
 * for a boolean that is true, "" for one that is false (the default: no
 * option turns a boolean off). NULL with the error printed. */
static char *entry_option(const conf_entry_t *e)
{
  const option_spec_t *o = options_find(e->name);
  char *opt = NULL;

  if (o == NULL) {
    options_error("unknown option \"%s\"", e->name);
    return NULL;
  }
  if (o->when == OPTION_CMDLINE) {
    options_error("\"%s\" is a command-line option only: not in a "
                  "configuration file",
                  e->name);
    return NULL;
  }
  if (o->type == OPTION_FLAG) {
    int b = conf_bool(e->value);
    if (b < 0) {
      options_error("invalid value '%s' for %s: yes, no, true, false, 1 or 0",
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
    options_error("out of memory");
  return opt;
}

int options_load(int argc, char **argv, int cmdline_only, daemon_config_t *out,
                 char ***args_out)
{
  daemon_config_t first;
  conf_file_t file = {0};
  char **args = NULL, where[PATH_MAX + 32];
  const char *path;
  size_t n = 0;
  int rc = HIPD_EINVAL;

  /* The command line alone first: its errors, --help and --version come
   * before the file, and it says which file. */
  options_defaults(&first);
  options_defaults(out);
  opt_where = NULL;
  if (parse_options(argc, argv, &first) != 0)
    goto fail;
  path = cmdline_only || first.worker_arg != NULL ? NULL : options_file(&first);
  if (path != NULL) {
    hipd_err_t err;
    if (conf_read(path, first.config_path != NULL, &file, &err) != 0) {
      options_error("%s", err.msg);
      goto fail;
    }
  }
  if ((args = calloc(file.n + (size_t)argc + 1, sizeof(*args))) == NULL ||
      (args[n++] = strdup(argv[0])) == NULL) {
    options_error("out of memory");
    rc = HIPD_ENOMEM;
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
      options_error("out of memory");
      rc = HIPD_ENOMEM;
      goto fail;
    }
  *args_out = args;
  args = NULL;
  rc = 0;
fail:
  opt_where = NULL;
  options_args_free(args);
  conf_free(&file);
  options_free(&first);
  if (rc != 0)
    options_free(out);
  return rc;
}
