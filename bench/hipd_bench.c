/* SPDX-License-Identifier: MIT */
/* bench/hipd_bench.c: hipd's benchmarks (bench/README.md).
 *
 * Measures what a client gets through hipd next to what it would get
 * without it, in the same run, on the same device, and prints each figure
 * as a ratio against its baselines, with the target where the issue sets
 * one; the same figures go to a JSON file.
 *
 *   hipd_bench [--socket PATH] [--device N|cpu] [--smoke] [--json FILE]
 *              [--only LIST] [--clients LIST] [--spread[=LIST]] ...
 *
 * By default the bench starts its own hipd (the one built in this tree, or
 * $HIPD_BIN) on a private socket with a private cache directory, and stops
 * it at the end; the disk-cache figure restarts it. The direct-HIP
 * baselines are bench/direct_hip runs (child processes, so that no HIP
 * runtime lives in this process, which forks clients); the socket
 * baselines are bench/sockbench.c. Nothing is left behind: every child is
 * killed if the bench is interrupted or runs past --timeout.
 *
 * This file holds the sections' table, the options and main. The rest is
 * next to it, behind hipd_bench.h: hb_daemon.c (its own daemon, signals),
 * hb_direct.c (the direct_hip runs, discovery), and one file per section:
 * hb_rtt.c (1, 2: round trip, launch), hb_bw.c (3), hb_compile.c (4) and
 * hb_share.c (5 to 7: sharing, spread, MPS, peer copies), hb_tenants.c
 * (8: two tenants; --isolation-compare).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "hipd_bench.h"
#include "mps.h"

enum {
  SEC_RTT = 1 << 0,
  SEC_LAUNCH = 1 << 1,
  SEC_BW = 1 << 2,
  SEC_COMPILE = 1 << 3,
  SEC_SHARE = 1 << 4,
  SEC_SPREAD = 1 << 5,
  SEC_PEER = 1 << 6,
  SEC_TENANTS = 1 << 7,
  SEC_ALL = (1 << 8) - 1,
};

static const struct {
  const char *name;
  unsigned bit;
} sections[] = {
    {"rtt", SEC_RTT},         {"launch", SEC_LAUNCH},   {"bw", SEC_BW},
    {"compile", SEC_COMPILE}, {"share", SEC_SHARE},     {"spread", SEC_SPREAD},
    {"peer", SEC_PEER},       {"tenants", SEC_TENANTS},
};

/* The --sync modes (SYNC_*): names and what each does. */
const char *const hb_sync_names[SYNC_MODES] = {"run", "corked", "calls"};
const char *const hb_sync_how[SYNC_MODES] = {
    "kernel.launch with wait (hipd_kernel_run): one request, answered once "
    "the kernel has run",
    "kernel.launch_begin + stream.synchronize_begin, corked (one write), "
    "both replies waited for",
    "kernel.launch then stream.synchronize: two calls, two round trips",
};

struct hb_state hb = {
    .only = SEC_ALL,
    .timeout = 0,
};

/* A failed hipd call: its name, the code and the daemon's message. */
int hb_hfail(figure_t *f, hipd_conn_t *c, const char *what, int rc)
{
  fig_fail(f, "%s: %s: %s", what, hipd_err_name(rc), hipd_last_error(c));
  return rc;
}

/* ----------------------------------------------------------------- output */

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
  fprintf(
      f,
      "Usage: hipd_bench [OPTION]...\n"
      "hipd's benchmarks: each figure next to its baselines, measured in\n"
      "the same run on the same device (bench/README.md).\n"
      "\n"
      "  --socket PATH      use the hipd listening there (default: start\n"
      "                     our own, $HIPD_BIN or this tree's, on a private\n"
      "                     socket and cache directory)\n"
      "  --daemon-arg ARG   pass ARG to the hipd we start (repeatable)\n"
      "  --device N|cpu|gpu hipd device to measure (default: 0)\n"
      "  --smoke            tiny counts: seconds, for make check\n"
      "  --json FILE        write the figures as JSON to FILE\n"
      "  --only LIST        sections: rtt,launch,bw,compile,share,spread,\n"
      "                     peer,tenants (default: all; spread and peer\n"
      "                     need 2 devices, tenants needs root)\n"
      "  --clients LIST     sharing: client counts (1,4,16; smoke 1,4)\n"
      "  --spread[=LIST]    sharing also over the devices of LIST, client i\n"
      "                     on device i mod n (default: every GPU; runs by\n"
      "                     itself when hipd serves 2 or more GPUs)\n"
      "  --peer A,B         device pair of the copy figure (default: the\n"
      "                     first two GPUs, when there are 2)\n"
      "  --sizes LIST       bandwidth sizes, K/M/G suffixes (1K,1M,256M;\n"
      "                     smoke 1K,1M)\n"
      "  --seconds S        sharing: length of each run (3; smoke 0.3)\n"
      "  --elems N          sharing: floats per small kernel (65536; smoke "
      "1024)\n"
      "  --no-mps           skip the MPS baseline\n"
      "  --profile          sharing: where hipd's and the clients' CPU time\n"
      "                     and context switches go, per kernel, by thread\n"
      "  --isolation-compare  measure the rtt, launch and share figures\n"
      "                     again on a second hipd with --isolation none\n"
      "                     and report each figure's ratio to it\n"
      "  --sync MODE        how clients wait for a kernel: run (one request,\n"
      "                     the default), corked (launch + synchronize\n"
      "                     written together) or calls (two round trips)\n"
      "  --timeout S        stop everything after S seconds (900; smoke 300)\n"
      "  -h, --help         this help\n"
      "\n"
      "Environment: HIPD_BIN (the daemon), HIPD_BENCH_DIRECT (direct_hip).\n");
}

static int parse_args(int argc, char **argv)
{
  enum {
    OPT_SOCKET = 256,
    OPT_DAEMON_ARG,
    OPT_DEVICE,
    OPT_SMOKE,
    OPT_JSON,
    OPT_ONLY,
    OPT_CLIENTS,
    OPT_SPREAD,
    OPT_PEER,
    OPT_SIZES,
    OPT_SECONDS,
    OPT_ELEMS,
    OPT_NO_MPS,
    OPT_PROFILE,
    OPT_ISOLATION_COMPARE,
    OPT_SYNC,
    OPT_TIMEOUT,
  };
  static const struct option longopts[] = {
      {"socket", required_argument, NULL, OPT_SOCKET},
      {"daemon-arg", required_argument, NULL, OPT_DAEMON_ARG},
      {"device", required_argument, NULL, OPT_DEVICE},
      {"smoke", no_argument, NULL, OPT_SMOKE},
      {"json", required_argument, NULL, OPT_JSON},
      {"only", required_argument, NULL, OPT_ONLY},
      {"clients", required_argument, NULL, OPT_CLIENTS},
      {"spread", optional_argument, NULL, OPT_SPREAD},
      {"peer", required_argument, NULL, OPT_PEER},
      {"sizes", required_argument, NULL, OPT_SIZES},
      {"seconds", required_argument, NULL, OPT_SECONDS},
      {"elems", required_argument, NULL, OPT_ELEMS},
      {"no-mps", no_argument, NULL, OPT_NO_MPS},
      {"profile", no_argument, NULL, OPT_PROFILE},
      {"isolation-compare", no_argument, NULL, OPT_ISOLATION_COMPARE},
      {"sync", required_argument, NULL, OPT_SYNC},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c, nclients = -1, nsizes = -1;
  double seconds = -1, timeout = -1;
  long elems = -1;

  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
    case OPT_SOCKET:
      hb.socket = optarg;
      break;
    case OPT_DAEMON_ARG:
      if (hb.ndaemon_args == MAX_DAEMON_ARGS) {
        note("too many --daemon-arg");
        return -1;
      }
      hb.daemon_args[hb.ndaemon_args++] = optarg;
      break;
    case OPT_DEVICE:
      hb.dev_arg = optarg;
      break;
    case OPT_SMOKE:
      hb.smoke = 1;
      break;
    case OPT_JSON:
      hb.json_path = optarg;
      break;
    case OPT_ONLY: {
      char buf[256], *save = NULL, *tok;

      snprintf(buf, sizeof(buf), "%s", optarg);
      hb.only = 0;
      for (tok = strtok_r(buf, ",", &save); tok != NULL;
           tok = strtok_r(NULL, ",", &save)) {
        size_t i;

        for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
          if (strcmp(tok, sections[i].name) == 0)
            break;
        if (i == sizeof(sections) / sizeof(sections[0])) {
          note("--only: unknown section '%s'", tok);
          return -1;
        }
        hb.only |= sections[i].bit;
      }
      break;
    }
    case OPT_CLIENTS:
      nclients = bu_parse_int_list(optarg, hb.clients, MAX_CLIENTS);
      for (int i = 0; i < nclients; i++)
        if (hb.clients[i] < 1 || hb.clients[i] > MAX_WORKERS)
          nclients = -2;
      if (nclients < 0) {
        note("--clients: a comma list of 1 to %d", MAX_WORKERS);
        return -1;
      }
      hb.nclients = nclients;
      break;
    case OPT_SPREAD:
      hb.spread_forced = 1;
      if (optarg != NULL && (hb.nspread = bu_parse_int_list(
                                 optarg, hb.spread_devs, MAX_DEVICES)) < 1) {
        note("--spread: a comma list of device ids");
        return -1;
      }
      break;
    case OPT_PEER:
      if (bu_parse_int_list(optarg, hb.peer_devs, 2) != 2 ||
          hb.peer_devs[0] == hb.peer_devs[1]) {
        note("--peer: two different device ids, A,B");
        return -1;
      }
      hb.npeer = 2;
      break;
    case OPT_SIZES:
      nsizes = bu_parse_size_list(optarg, hb.sizes, MAX_SIZES);
      if (nsizes < 0) {
        note("--sizes: a comma list of sizes such as 1K,1M,256M");
        return -1;
      }
      hb.nsizes = nsizes;
      break;
    case OPT_SECONDS:
      seconds = atof(optarg);
      if (!(seconds > 0 && seconds < 3600)) {
        note("--seconds: between 0 and 3600");
        return -1;
      }
      break;
    case OPT_ELEMS:
      elems = atol(optarg);
      if (elems < 1 || elems > 1 << 28) {
        note("--elems: 1 to 2^28");
        return -1;
      }
      break;
    case OPT_PROFILE:
      hb.profile = 1;
      break;
    case OPT_NO_MPS:
      hb.no_mps = 1;
      break;
    case OPT_ISOLATION_COMPARE:
      hb.isolation_compare = 1;
      break;
    case OPT_SYNC:
      for (hb.sync_mode = 0; hb.sync_mode < SYNC_MODES; hb.sync_mode++)
        if (strcmp(optarg, hb_sync_names[hb.sync_mode]) == 0)
          break;
      if (hb.sync_mode == SYNC_MODES) {
        note("--sync: run, corked or calls");
        return -1;
      }
      break;
    case OPT_TIMEOUT:
      timeout = atof(optarg);
      if (!(timeout >= 1)) {
        note("--timeout: at least 1 second");
        return -1;
      }
      break;
    case 'h':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      return -1;
    }
  }
  if (optind != argc) {
    usage(stderr);
    return -1;
  }
  /* Counts: full, or a few seconds in all for --smoke. */
  hb.rtt_iters = hb.smoke ? 200 : 20000;
  hb.rtt_warmup = hb.smoke ? 20 : 1000;
  hb.launch_iters = hb.smoke ? 300 : 50000;
  hb.compile_variants = hb.smoke ? 1 : 16;
  hb.compile_hits = hb.smoke ? 10 : 200;
  hb.bw_budget = hb.smoke ? 0.02 : 0.3;
  hb.peer_bytes = hb.smoke ? (uint64_t)1 << 20 : (uint64_t)256 << 20;
  hb.share_seconds = seconds > 0 ? seconds : hb.smoke ? 0.3 : 3;
  hb.share_elems = elems > 0 ? (int)elems : hb.smoke ? 1024 : 65536;
  hb.timeout = timeout > 0 ? timeout : hb.smoke ? 300 : 900;
  if (nclients < 0) {
    static const int full[] = {1, 4, 16}, smoke[] = {1, 4};

    hb.nclients = hb.smoke ? 2 : 3;
    memcpy(hb.clients, hb.smoke ? smoke : full,
           sizeof(int) * (size_t)hb.nclients);
  }
  if (nsizes < 0) {
    hb.nsizes = hb.smoke ? 2 : 3;
    hb.sizes[0] = 1024;
    hb.sizes[1] = 1 << 20;
    hb.sizes[2] = (uint64_t)256 << 20;
  }
  return 0;
}

/* The device --device names, once the daemon's devices are known. */
static int pick_device(void)
{
  const char *a = hb.dev_arg ? hb.dev_arg : "0";

  if (strcmp(a, "cpu") == 0 || strcmp(a, "gpu") == 0) {
    for (int i = 0; i < hb.ndevs; i++)
      if (hb.devs[i].is_cpu == (a[0] == 'c'))
        return hb.dev = i;
    note("--device %s: the daemon serves no %s device", a,
         a[0] == 'c' ? "CPU" : "GPU");
    return -1;
  }
  char *end;
  long v = strtol(a, &end, 10);
  if (end == a || *end != '\0' || v < 0 || v >= hb.ndevs) {
    note("--device %s: the daemon serves devices 0 to %d", a, hb.ndevs - 1);
    return -1;
  }
  return hb.dev = (int)v;
}

static void programs_find(void)
{
  const char *env = getenv("HIPD_BIN");

  if (env != NULL && env[0] != '\0')
    snprintf(hb.hipd_bin, sizeof(hb.hipd_bin), "%s", env);
  else
    snprintf(hb.hipd_bin, sizeof(hb.hipd_bin), "%s/hipd", BENCH_BUILDDIR);
  env = getenv("HIPD_BENCH_DIRECT");
  if (env != NULL)
    snprintf(hb.direct_bin, sizeof(hb.direct_bin), "%s", env);
#ifdef HAVE_HIP
  else
    snprintf(hb.direct_bin, sizeof(hb.direct_bin), "%s/bench/direct_hip",
             BENCH_BUILDDIR);
#endif
}

/* ------------------------------------------------------------------- main */

/* Write the JSON file, if one was asked for: after each section (so that
 * an interrupted run leaves what it measured) and, @p complete, at the
 * end. @return 0 or -1. */
static int json_save(int complete)
{
  report_meta_t meta = {
      .hipd_version = hb.hipd_version,
      .features = hb.features,
      .date = hb.date,
      .host = hb.host,
      .mode = hb.smoke ? "smoke" : "full",
      .isolation = hb.isolation,
      .complete = complete,
      .own_daemon = hb.own_daemon,
      .devs = hb.devs,
      .ndevs = hb.ndevs,
      .device = hb.dev,
      .platform = hb.platform,
      .hip_version = hb.hip_version,
      .runtime_version = hb.runtime_version,
      .driver_version = hb.driver_version,
  };

  return hb.json_path != NULL ? report_write_json(hb.json_path, &meta) : 0;
}

static int cleanup(void)
{
  int rc = 0;

  if (mps_active())
    mps_stop();
  hb_conn_close();
  if (hb.own_daemon && hb_daemon_stop() != 0)
    rc = -1;
  hb_tmp_remove();
  return rc;
}

int main(int argc, char **argv)
{
  time_t now = time(NULL);
  struct tm tm;
  int rc = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (parse_args(argc, argv) != 0)
    return 2;
  programs_find();
  hb_signals_setup();
  alarm((unsigned)hb.timeout);
  gmtime_r(&now, &tm);
  strftime(hb.date, sizeof(hb.date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  gethostname(hb.host, sizeof(hb.host) - 1);
  hb.run_id = (unsigned long long)now << 20 ^ (unsigned long long)getpid();
  if (hb_tmp_make() != 0)
    return 2;

  if (hb.socket != NULL) {
    hb.sock_path = hb.socket;
  } else {
    snprintf(hb.sock, sizeof(hb.sock), "%s/hipd.sock", hb.tmp);
    snprintf(hb.cache, sizeof(hb.cache), "%s/cache", hb.tmp);
    snprintf(hb.log, sizeof(hb.log), "%s/hipd.log", hb.tmp);
    hb.sock_path = hb.sock;
    /* the tenants figure's clients run as other users */
    hb.socket_open = (hb.only & SEC_TENANTS) && hb_tenants_possible();
    note("starting %s", hb.hipd_bin);
    if (hb_daemon_start() != 0) {
      cleanup();
      return 2;
    }
    hb.own_daemon = 1;
  }
  if (hb_conn_open() != 0 || hb_discover() != 0 || pick_device() < 0) {
    cleanup();
    return 2;
  }
  report_set_device(hb.dev, hb.devs[hb.dev].is_cpu);
  hb_isolation_read();
  note("hipd %s (%s, --isolation %s), device %d: %s (%s, %s)", hb.hipd_version,
       hb.features, hb.isolation, hb.dev, hb.devs[hb.dev].name,
       hb.devs[hb.dev].driver, hb.devs[hb.dev].arch);
  if (hb.devs[hb.dev].hip_ord >= 0)
    note("direct HIP baselines on HIP device %d (HIP %s, runtime %lld, "
         "driver %lld)",
         hb.devs[hb.dev].hip_ord, hb.hip_version, hb.runtime_version,
         hb.driver_version);
  else
    note("no direct HIP baselines: %s", hb.devs[hb.dev].na);

  if (hb.only & SEC_RTT)
    hb_sec_rtt(), json_save(0);
  if (hb.only & SEC_LAUNCH)
    hb_sec_launch(), json_save(0);
  if (hb.only & SEC_BW)
    hb_sec_bw(), json_save(0);
  if (hb.only & SEC_COMPILE)
    hb_sec_compile(), json_save(0);
  if (hb.only & SEC_PEER) {
    int a = -1, b = -1;

    if (hb.npeer == 2) {
      a = hb.peer_devs[0];
      b = hb.peer_devs[1];
      if (a >= hb.ndevs || b >= hb.ndevs) {
        note("--peer %d,%d: the daemon serves devices 0 to %d", a, b,
             hb.ndevs - 1);
        a = b = -1;
        report_failure();
      }
    } else {
      for (int i = 0; i < hb.ndevs && b < 0; i++) {
        if (hb.devs[i].is_cpu)
          continue;
        if (a < 0)
          a = i;
        else
          b = i;
      }
    }
    if (a >= 0 && b >= 0)
      hb_sec_peer(a, b), json_save(0);
  }
  if (hb.only & SEC_SHARE) {
    hb_sec_share(&hb.dev, 1, ""), json_save(0);
    hb_sec_idle(), json_save(0);
  }
  if (hb.only & SEC_SPREAD) {
    int devs[MAX_DEVICES], n = 0;

    if (hb.nspread > 0) {
      for (int i = 0; i < hb.nspread; i++) {
        if (hb.spread_devs[i] >= hb.ndevs) {
          note("--spread: no device %d", hb.spread_devs[i]);
          report_failure();
          n = 0;
          break;
        }
        devs[n++] = hb.spread_devs[i];
      }
    } else {
      for (int i = 0; i < hb.ndevs; i++)
        if (!hb.devs[i].is_cpu)
          devs[n++] = i;
    }
    if (n >= 2 || (hb.spread_forced && n >= 1))
      hb_sec_share(devs, n, "_spread"), json_save(0);
    else if (hb.spread_forced)
      note("--spread: the daemon serves %d GPU(s); give --spread=LIST", n);
  }
  if (hb.only & SEC_TENANTS)
    hb_sec_tenants(), json_save(0);
  if (hb.isolation_compare && (hb.only & (SEC_RTT | SEC_LAUNCH | SEC_SHARE))) {
    hb_isolation_compare(!!(hb.only & SEC_RTT), !!(hb.only & SEC_LAUNCH),
                         !!(hb.only & SEC_SHARE));
    json_save(0);
  } else if (hb.isolation_compare) {
    note("--isolation-compare: none of rtt, launch, share runs: nothing to "
         "compare");
  }
  if (hb.only & (SEC_SHARE | SEC_SPREAD | SEC_TENANTS)) {
    /* hipd has nothing left to measure: the MPS server gets a GPU that no
     * context of ours shares with it. */
    if (hb.own_daemon && hb.nshares > 0 && !hb.devs[hb.dev].is_cpu) {
      hb_conn_close();
      if (hb_daemon_stop() != 0)
        report_failure();
    }
    hb_share_mps();
  }

  report_print(stdout);
  rc = json_save(1);
  if (hb.json_path != NULL && rc == 0)
    note("figures written to %s", hb.json_path);
  if (cleanup() != 0)
    rc = -1;
  if (report_failures() > 0)
    note("%d figure(s) or baseline(s) failed: see above", report_failures());
  return rc != 0 || report_failures() > 0 ? 1 : 0;
}
