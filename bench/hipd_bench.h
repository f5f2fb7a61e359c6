/* SPDX-License-Identifier: MIT */
/* bench/hipd_bench.h: what the files of hipd_bench share: its options and
 * run state (hb), the direct_hip runs, the client kernels and the sections.
 * hipd_bench.c holds the options and main; hb_daemon.c its own daemon,
 * the temporary directory and the signals; hb_direct.c the direct_hip
 * runs and device discovery; hb_rtt.c the client kernels and sections 1
 * and 2 (round trip, launch); hb_bw.c section 3 (bandwidth); hb_compile.c
 * section 4 (compile); hb_share.c sections 5 to 7 (sharing a GPU,
 * spreading over GPUs, MPS, GPU-to-GPU copies); hb_tenants.c section 8
 * (two tenants sharing a GPU) and --isolation-compare. Private to bench/.
 */
#ifndef HIPD_BENCH_HIPD_BENCH_H
#define HIPD_BENCH_HIPD_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hipd.h"
#include "procs.h"
#include "report.h"

#ifndef BENCH_BUILDDIR
#define BENCH_BUILDDIR "."
#endif
#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

#define MAX_DEVICES 64
#define MAX_CLIENTS 8   /* client counts of --clients */
#define MAX_WORKERS 256 /* clients of one sharing run */
#define MAX_SIZES 8
#define MAX_DAEMON_ARGS 16
#define CALL_TIMEOUT_MS 120000 /* any one hipd call */

/* How a client launches a kernel and waits for it (--sync). */
enum { SYNC_RUN, SYNC_CORKED, SYNC_CALLS, SYNC_MODES };
extern const char *const hb_sync_names[SYNC_MODES];
extern const char *const hb_sync_how[SYNC_MODES];

/* A sharing run whose MPS baseline is measured after all the others. A
 * later run with the same clients and devices reuses the earlier one's
 * measurement (the tenants figure reuses the sharing figure's). */
typedef struct {
  figure_t *fig;
  int devs[MAX_DEVICES];
  int ndevs;
  int n;
  char label[64]; /* of the baseline; "" for the sharing figure's */
  /* once measured (hb_share_mps) */
  int done;
  double mps, mps_lo; /* NAN with mps_na when not measured */
  int mps_seen;
  char mps_na[240];
  figure_t *cpu_fig; /* the CPU-per-kernel figure of the run, or NULL */
  double mps_cpu;    /* the MPS processes' CPU per kernel, µs */
} share_run_t;

/* What a sharing run cost: CPU time per kernel (µs, of the clients and
 * the daemon's processes) and the daemon's threads once all were set up
 * (the clients' without a daemon). */
typedef struct {
  double cpu_us;
  long threads;
} hb_cost_t;

/* One client process of a sharing run: its device, whether it keeps to
 * the socket (HIPD_RING=0: no ring) and, when user[0] is not '\0', the
 * account it switches to before it connects (the bench must be root). */
typedef struct {
  int dev;
  int socket_only;
  char user[32];
  uid_t uid;
  gid_t gid;
  pid_t parent; /* the bench, set by hb_share_run */
} hb_client_t;

struct hb_state {
  /* options */
  const char *socket;  /* a running daemon, or NULL: start our own */
  const char *dev_arg; /* --device */
  int smoke;
  const char *json_path;
  unsigned only;
  int clients[MAX_CLIENTS], nclients;
  int spread_devs[MAX_DEVICES], nspread; /* --spread=LIST */
  int spread_forced;                     /* --spread given */
  int peer_devs[2], npeer;               /* --peer A,B */
  uint64_t sizes[MAX_SIZES];
  int nsizes;
  const char *daemon_args[MAX_DAEMON_ARGS];
  int ndaemon_args;
  double timeout;
  double share_seconds;
  int share_elems;
  int no_mps;
  int sync_mode;         /* SYNC_* */
  int isolation_compare; /* --isolation-compare */
  int hipd_only;         /* sections measure hipd alone, no baselines */
  int profile;           /* --profile: sharing runs print their threads */
  /* iteration counts, from --smoke */
  int rtt_iters, rtt_warmup, launch_iters, compile_variants, compile_hits;
  double bw_budget;
  uint64_t peer_bytes;
  /* programs */
  char hipd_bin[512], direct_bin[512];
  /* the run */
  char tmp[256], sock[320], cache[320], log[320];
  proc_t daemon;
  int own_daemon;
  int socket_open;           /* start our daemon with --socket-mode 0666 */
  const char *isolation_arg; /* --isolation for our daemon, NULL: none */
  char isolation[16];        /* daemon.info isolation.mode ("?" if none) */
  char mps_info[200];        /* daemon.info isolation.mps */
  long listener_pid;         /* daemon.info pid: hipd's main process */
  const char *sock_path;     /* what clients connect to (NULL: the default) */
  hipd_conn_t *conn;
  devinfo_t devs[MAX_DEVICES];
  int ndevs, dev;
  char hipd_version[32], features[128], date[40], host[128];
  /* the direct-HIP runtime, from direct_hip info */
  int have_direct;
  char direct_na[240];
  char platform[16], hip_version[32];
  long long runtime_version, driver_version;
  share_run_t shares[2 * MAX_CLIENTS];
  int nshares;
  unsigned long long run_id;
};

/* The options and the run (hipd_bench.c). */
extern struct hb_state hb;

/* A failed hipd call: its name, the code and the daemon's message. */
int hb_hfail(figure_t *f, hipd_conn_t *c, const char *what, int rc);

/* hb_daemon.c */
void hb_signals_setup(void);
void hb_tmp_remove(void);
/* Make the temporary directory hb.tmp. @return 0 or -1. */
int hb_tmp_make(void);
/* Start our daemon on hb.sock with the cache in hb.cache and wait until it
 * accepts connections; hb.socket_open lets other users in, hb.isolation_arg
 * is its --isolation (hb_daemon.c). @return 0 or -1 (its log is printed). */
int hb_daemon_start(void);
/* Stop our daemon as an administrator would (SIGTERM), killing it (and its
 * CPU runner) if it has not exited after 20 s. @return 0 if it exited
 * cleanly. */
int hb_daemon_stop(void);
/* Open hb.conn. @return 0 or -1 (said why). */
int hb_conn_open(void);
void hb_conn_close(void);
/* Restart our daemon with the same cache directory (the disk figure).
 * @return 0 or -1. */
int hb_daemon_restart(void);

/* hb_direct.c */
#define DIRECT_LINES 64
typedef struct {
  char line[DIRECT_LINES][512];
  int n;
  char err[600];
} dout_t;

/* Run direct_hip with @p args (the mode first; NULL-ended), collecting its
 * JSON lines, for @p timeout seconds at most; a line of kind @p want must
 * be among them. @return 0, or -1 with the reason in out->err. */
int hb_direct_run(const char *const *args, double timeout, const char *want,
                  dout_t *out);
/* The first line of @p kind in @p out, or NULL. */
const char *hb_dout_find(const dout_t *out, const char *kind);
/* The number @p key of JSON line @p line, or NAN. */
double hb_dnum(const char *line, const char *key);
/* Run direct_hip with @p args for the line of kind @p kind and make its
 * number @p field baseline @p id (@p label) of @p f (see hb_direct.c).
 * @return the value, or NAN. */
double hb_direct_baseline(figure_t *f, const char *id, const char *label,
                          const char *const *args, const char *kind,
                          const char *field, const char *field2, double *v2);
/* Is there a direct baseline on hipd device @p dev? If not, why not goes
 * to @p why. */
int hb_direct_ok(int dev, const char **why);
/* @p v in decimal, in @p buf. @return buf. */
const char *hb_itoa_tmp(int v, char *buf, size_t size);
/* The string @p path of @p info into @p out ("?" if none). */
void hb_info_strcpy(const hipd_info_t *info, const char *path, char *out,
                    size_t size);
/* The daemon's identity and devices, then which HIP ordinal each of its
 * HIP devices is for direct_hip. @return 0 or -1. */
int hb_discover(void);

/* hb_rtt.c: the client kernels */
/* What a section needs on the daemon: a kernel, a stream, its arguments
 * and, for the small kernel, its buffer. */
typedef struct {
  hipd_conn_t *c;
  hipd_kernel_t k;
  hipd_stream_t s;
  hipd_args_t *args;
  hipd_buffer_t buf;
  uint32_t grid[3], block[3];
  char err[600]; /* the failure, when a call returned one */
} hk_t;

/* Compile (through the cache) and set up the empty kernel, or with
 * @p elems > 0 the small one over that many floats, on @p dev. */
int hb_hk_open(hk_t *h, hipd_conn_t *c, int dev, int elems);
void hb_hk_close(hk_t *h);
/* Launch the kernel and wait until it has run, the @p mode way (SYNC_*).
 * @return 0 or a hipd code (h->err). */
int hb_hk_launch_sync(hk_t *h, int mode);

/* The sections */
void hb_sec_rtt(void);     /* hb_rtt.c */
void hb_sec_launch(void);  /* hb_rtt.c */
void hb_sec_bw(void);      /* hb_bw.c */
void hb_sec_compile(void); /* hb_compile.c */
/* hb_share.c: the sharing figures on @p devs: hipd and independent
 * processes now, MPS later (hb_share_mps), for each client count. */
/* The CPU the daemon uses with no client at work (idle_cpu). */
void hb_sec_idle(void);
void hb_sec_share(const int *devs, int ndevs, const char *suffix);
void hb_share_mps(void);
void hb_sec_peer(int a, int b);
/* Register @p f for an MPS baseline (id "mps", @p label or the sharing
 * figure's when NULL) of @p n direct-HIP processes on @p devs, measured by
 * hb_share_mps() once hipd is stopped, or reused from an earlier
 * registration with the same clients and devices. */
void hb_share_mps_later(figure_t *f, const int *devs, int ndevs, int n,
                        const char *label);
/* Run @p n hipd clients as @p clients say (forked; each connects, sets up
 * the small kernel, says ready; all start together and loop for
 * hb.share_seconds). *@p agg gets the sum of their rates (kernels/s),
 * *@p lo the slowest one's. @p worker_pids (n entries, or NULL) gets the
 * pid of the daemon process serving each client (daemon.info
 * isolation.pid, or -1), known before @p during (if not NULL) runs once
 * they have all started. *@p cost (may be NULL) gets the CPU time per
 * kernel, µs, of the clients and of every process under hb.listener_pid
 * while they ran, and that tree's threads once the clients were set up. @return
 * 0, or -1 with the reason in @p err. */
int hb_share_run(hb_client_t *clients, int n, void (*during)(void *),
                 void *during_arg, double *agg, double *lo, hb_cost_t *cost,
                 long *worker_pids, char *err, size_t errsz);

/* hb_tenants.c */
/* Read daemon.info's isolation (hb.isolation, hb.mps_info) on hb.conn. */
void hb_isolation_read(void);
/* Will the tenants section run clients as two uids (the bench is root)? */
int hb_tenants_possible(void);
/* Section 8: two tenants (uids) sharing hb.dev, against one tenant and
 * MPS. */
void hb_sec_tenants(void);
/* --isolation-compare: stop our daemon, start one with --isolation none,
 * measure hipd's side of the round trip (@p rtt), launch (@p launch) and
 * sharing (@p share) figures again on it, and add one figure per figure
 * compared: this run's value against the one-process daemon's. */
void hb_isolation_compare(int rtt, int launch, int share);

#endif
