/* SPDX-License-Identifier: MIT */
/* daemon/daemon.h: the daemon's configuration and global state.
 *
 * There is one daemon_t per process, owned by main.c. Everything in it is
 * used on the loop thread only unless a field says otherwise.
 */
#ifndef HIPD_DAEMON_H
#define HIPD_DAEMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "rpc.h"

/* An intrusive doubly linked list (circular, with a head node). */
typedef struct list_node {
  struct list_node *prev, *next;
} list_node_t;

static inline void list_init(list_node_t *h)
{
  h->prev = h->next = h;
}
static inline int list_empty(const list_node_t *h)
{
  return h->next == h;
}
static inline void list_insert_tail(list_node_t *h, list_node_t *n)
{
  n->prev = h->prev;
  n->next = h;
  h->prev->next = n;
  h->prev = n;
}
static inline void list_remove(list_node_t *n)
{
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}
#define list_entry(ptr, type, member)                                          \
  ((type *)((char *)(ptr)-offsetof(type, member)))

/* --isolation: what a tenant is, and so which sessions share a process. */
enum {
  ISOLATION_UID = 0, /* a worker process per peer uid (the default) */
  ISOLATION_SESSION, /* a worker process per connection */
  ISOLATION_NONE,    /* one process serves everyone (trusted node only) */
};

/* The part of hipd this process plays. */
enum {
  ROLE_SINGLE = 0, /* --isolation none: listens and serves */
  ROLE_LISTENER,   /* listens, routes to workers, holds the cache */
  ROLE_WORKER,     /* serves one tenant's sessions (privsep/worker.h) */
};

/* What the options set: config/options.c's table says which option sets
 * which field, its bounds, its default and whether a reload applies it. */
/* --cache-scope: who may hit whose entries of the kernel cache. */
enum {
  CACHE_SCOPE_SHARED = 0, /* everyone's (a hit tells that a source was
                           * compiled before: SECURITY.md) */
  CACHE_SCOPE_TENANT = 1, /* each uid its own (the uid is in the key) */
};

/* --cgroups: whether tenants and compile helpers get cgroups. */
enum {
  CGROUPS_AUTO = 0, /* where hipd may make them (sandbox/cgroup.h) */
  CGROUPS_OFF = 1,
};

typedef struct daemon_config {
  char *socket_path;           /* where to listen */
  unsigned socket_mode;        /* permission bits of the socket file */
  proto_limits_t limits;       /* decode limits for requests */
  uint32_t max_inflight;       /* requests a session may have unanswered */
  size_t output_cap;           /* bytes of replies queued for one session */
  uint32_t write_timeout_ms;   /* a session with no write progress is dropped */
  uint32_t hello_timeout_ms;   /* a session without hello by then, 0: none */
  uint32_t request_timeout_ms; /* a request incomplete that long, 0: none */
  uint32_t shutdown_ms;        /* how long in-flight work may take at exit */
  uint32_t max_sessions;       /* connections at once */
  uint32_t max_handles;        /* handles per session */
  int listen_fd;               /* inherited socket (systemd), or -1 */
  uint64_t mem_quota;          /* device bytes per session, 0: unlimited */
  uint32_t max_streams;        /* streams per session */
  char *devices;               /* --devices selection, NULL: all */
  int cpu_devices;             /* CPU devices to serve */
  char *cache_dir;             /* kernel cache directory, "" for none */
  uint64_t cache_size;         /* its cap in bytes */
  uint64_t cache_warm;         /* bytes of it loaded into memory at start */
  int cache_scope;             /* CACHE_SCOPE_* */
  uint32_t cpu_kernel_timeout_ms; /* CPU-device launch limit, 0: none */
  uint32_t compile_jobs;          /* compile helpers, 0: min(4, CPUs) */
  uint32_t compile_timeout_s;     /* per compile, 0: 120 */
  uint32_t compile_idle_s;        /* no CPU that long ends one, 0: never */
  char *compile_user;             /* helpers' account, NULL: default */
  uint64_t compile_mem;           /* helpers' address space, 0: 4 GiB */
  int compile_gpu_driver;         /* helpers may open the GPU driver */
  uint32_t tenant_max_compiles;   /* one uid's compiles outstanding, 0: 8 */
  uint64_t compile_queue_bytes;   /* sources they hold, 0: 256 MiB */
  int busy_poll_us;         /* spin before sleeping (loop, workers); -1: auto */
  int loop_launch;          /* GPU streams the loop launches on itself */
  uint32_t stream_threads;  /* a device's stream pool; 0: auto (device.c) */
  uint32_t log_tenant_rate; /* lines a second about one uid; 0: no limit */
  int spin_cpus;            /* spinners at once, all processes; -1: auto */
  int gpu_wait;             /* hip_driver_set_wait() mode */
  /* Per tenant (one uid, all its sessions together); 0: no limit. */
  uint64_t tenant_mem_quota;      /* device bytes */
  uint64_t host_mem_reserve;      /* CPU device: host memory kept free; 0:
                                   * cpu_driver_default_reserve() */
  uint32_t tenant_device_share;   /* percent of a device's memory */
  uint64_t tenant_host_mem;       /* cgroup memory of a uid's workers; 0:
                                   * half of the host's (main.c) */
  uint32_t tenant_max_pids;       /* cgroup pids of a uid's workers */
  int cgroups;                    /* CGROUPS_* */
  uint32_t tenant_max_sessions;   /* sessions at once */
  uint32_t tenant_max_connecting; /* of them, before their hello */
  uint32_t tenant_max_handles;    /* handles */
  uint32_t tenant_max_streams;    /* streams made with stream.create */
  /* Who may connect and use which device (policy.c); NULL: no rule. */
  char *allow_users;   /* --allow-users, as given */
  char *allow_groups;  /* --allow-groups, as given */
  char **device_allow; /* --device-allow rules, as given */
  uint32_t ndevice_allow;
  int strict_allow;  /* --strict-allow: root and hipd's uid are not implied */
  char *admin_group; /* --admin-group: its members are admins (admin.h) */
  int isolation;     /* ISOLATION_* */
  char *worker_user; /* --user: the workers' account (when root) */
  uint32_t worker_linger_ms; /* an idle worker lives this long */
  uint32_t tenant_workers;   /* --isolation uid: workers one uid may have */
  uint32_t worker_sessions;  /* sessions a worker takes before the next */
  int mps;                   /* MPS_* (privsep/mps.h) */
  uint32_t gpu_kernel_timeout_ms; /* objects/watchdog.h; 0: no limit */
  char *mps_tenants;              /* --mps-tenants: auto, all or a list */
  char **mps_threads;             /* --mps-active-threads rules, as given */
  uint32_t nmps_threads;
  char **mps_mem; /* --mps-device-mem rules, as given */
  uint32_t nmps_mem;
  char *worker_arg;     /* --worker=MODE:UID:GID:ID, internal */
  char *metrics_listen; /* --metrics-listen ADDR:PORT, NULL: off */

  /* --max-input-bytes: the input that all sessions together may have
   * buffered beyond each one's floor (transport.c). */
  uint64_t max_input_bytes;

  /* Where the options came from (config/options.c, hipd.conf(5)). */
  int log_level;     /* --log-level: HLOG_* */
  char *config_path; /* --config FILE, NULL: the default file */
  int no_config;     /* --no-config or --config '': no file */
} daemon_config_t;

typedef struct server server_t;
struct policy;
struct grant;

/* The grants of this process (grants.h): every grant in the listener or
 * the one process, a worker's uid's in a worker. */
typedef struct grants {
  struct grant *g;
  uint32_t n, cap;
  uint64_t next_serial; /* the last serial given (the listener's) */
} grants_t;

typedef struct hipd_daemon {
  uv_loop_t *loop;
  daemon_config_t cfg;
  uint64_t start_ms;    /* uv_now() at start */
  server_t *server;     /* the listening socket */
  list_node_t sessions; /* live sessions (session_t.node) */
  uint32_t nsessions;
  uint64_t sessions_total; /* sessions accepted since start */
  uint64_t next_session_id;
  int stopping;            /* SIGINT/SIGTERM seen */
  uv_timer_t housekeeping; /* write-stall checks */
  /* Replies are gathered per session while the loop handles events and
   * written once per session per loop iteration (session.c). */
  list_node_t flushq;         /* sessions with replies gathered */
  uv_check_t flush_check;     /* writes them after the poll phase... */
  uv_prepare_t flush_prepare; /* ...or before polling again */
  int flush_active;           /* the two handles are started */
  /* Arms the transport's safe point (transport.c sets it): the session
   * queues call it when they gain work. */
  void (*safe_point)(struct hipd_daemon *d);
  /* Sessions whose rings are polled (transport_ring.c): a check handle
   * runs them, a prepare handle puts them to sleep when the loop may
   * block. */
  list_node_t rings;
  uv_check_t ring_check;
  uv_prepare_t ring_prepare;
  int rings_polling;
  /* Active for one turn of the loop, which then does not block
   * (loop_turn.h). */
  uv_idle_t loop_awake;
  int loop_nowait; /* main.c: the loop's current run never blocks */
  /* Work left for that safe point, off the stack of the callback that
   * made it (session.c): */
  list_node_t runq;      /* throttled sessions to resume (session_t.run_node) */
  list_node_t closeq;    /* closed sessions to tear down (session_t.node) */
  list_node_t tenants;   /* tenants with a session (tenants.c) */
  struct policy *policy; /* parsed access rules, NULL: everyone (policy.c) */
  grants_t grants;       /* access granted at run time (grants.c) */
  int worker_devices;    /* the listener: the devices its probe worker
                            found (grant.add checks ids against it) */
  int role;              /* ROLE_* */
  /* How a new connection is taken: into a session here (transport), or
   * handed to a tenant worker (privsep/workers.c). */
  void (*accept)(struct hipd_daemon *d, uv_stream_t *server);
  /* A worker's: the tenant it serves (every session's peer is checked
   * against it in uid mode) and the hook that tells the listener of a
   * session's end. */
  int tenant_mode;
  uid_t tenant_uid;
  uid_t daemon_uid;        /* hipd's own uid (a worker: its listener's) */
  pid_t daemon_pid;        /* hipd's pid (a worker: its listener's) */
  const char *gpu_sharing; /* how tenants share the GPU (privsep/mps.h) */
  int close_code;          /* while stopping, what sessions are told (0: */
  char close_why[256];     /* ESHUTDOWN, "daemon shutdown") */
  uint32_t mps_threads;    /* this worker's MPS SM share, percent; 0: none */
  uint64_t mps_mem;        /* and its pinned memory per GPU; 0: no limit */
  void (*session_ended)(struct hipd_daemon *d, uint64_t id);
  /* A session said hello (a worker tells its listener, which bounds the
   * connections of a uid not yet past it). */
  void (*session_hello)(struct hipd_daemon *d, uint64_t id);

  /* The global bound on buffered input (transport.c): the room that all
   * sessions' input buffers hold beyond their floor, at most
   * cfg.max_input_bytes, and the sessions waiting for room, first come
   * first served (session_t.in_wait_node). */
  uint64_t in_room;
  list_node_t inputq;
} daemon_t;

/* Build features ("cpu", "hip-nvidia"...) as a static NULL-ended list. */
const char *const *daemon_features(void);

#endif
