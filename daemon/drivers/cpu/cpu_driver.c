/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_driver.c: the host as a device.
 *
 * Memory is host memory in one arena (cpu_arena.h): one memfd for all the
 * buffers, each mapped between PROT_NONE guard gaps, so that the kernel
 * runner maps the same pages at the same addresses with one descriptor,
 * and a kernel that runs past its buffer faults instead of writing into
 * the next one. Streams are ordered by their
 * executors, so each operation here runs to completion when called. Events
 * read the monotonic clock when their stream reaches them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "cpu_arena.h"
#include "cpu_compile.h"
#include "cpu_launcher.h"
#include "cpu_runner_client.h"
#include "drivers/driver.h"
#include "hipd.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"
#include "sanitize.h"
#include "util/clock.h"

typedef struct {
  int dev;
} cpu_stream_t;

typedef struct {
  uint64_t ns; /* monotonic time the stream reached the mark */
} cpu_event_t;

static int device_count = 1;

#if defined(__x86_64__)
#define HOST_ARCH "host-x86_64"
#elif defined(__aarch64__)
#define HOST_ARCH "host-aarch64"
#else
#define HOST_ARCH "host"
#endif

/* The driver's type codes are the CPU device ABI's. */
_Static_assert((int)DRV_T_PTR == (int)HIPD_CPU_T_PTR &&
                   (int)DRV_T_BOOL == (int)HIPD_CPU_T_BOOL &&
                   (int)DRV_T_F32 == (int)HIPD_CPU_T_F32,
               "DRV_T_* must match HIPD_CPU_T_*");

static void find_compiler_id(void);

/* The id of the arena's file as a chunk of the kernel runner. */
#define ARENA_CHUNK 1

/* A live zero-copy buffer, remembered so that a runner started later maps
 * it (the arena's buffers are the arena's record). */
typedef struct live_buf {
  void *ptr;
  size_t size;
  int fd;
  int users; /* buffers on it: zero-copy buffers of one shared memory on
                several CPU devices (or twice) share the runner's mapping */
  struct live_buf *next;
} live_buf_t;

/* A kernel: its id in the runner and its declared parameters. */
typedef struct cpu_kernel {
  uint32_t id;
  drv_sig_t sig;
  struct cpu_kernel *next; /* in its module */
} cpu_kernel_t;

/* A module: the shared object written for the runner, its id there, and
 * the kernels looked up in it (freed with it). */
typedef struct {
  uint32_t id;
  char path[4096];
  cpu_kernel_t *kernels;
} cpu_module_t;

/* Kernel execution state, shared by all CPU devices (they are one host).
 * The runner is started when the first module is loaded. */
static struct {
  pthread_mutex_t mu;
  cpu_runner_t *runner;
  cpu_arena_t *arena; /* made at the first allocation or runner start */
  live_buf_t *bufs;
  char moddir[4096];  /* private directory of loaded modules */
  unsigned nmodules;  /* for unique module file names */
  char compiler[256]; /* compiler_id */
  pthread_once_t compiler_once;
} cpu_state = {.mu = PTHREAD_MUTEX_INITIALIZER,
               .compiler_once = PTHREAD_ONCE_INIT};

static unsigned launch_timeout_ms;

/* cpu_driver_set_runner_user(); runner_uid (uid_t)-1: the default. */
static struct {
  pthread_mutex_t mu;
  uid_t uid;
  gid_t gid;
} runner_account = {PTHREAD_MUTEX_INITIALIZER, (uid_t)-1, (gid_t)-1};

int cpu_driver_abort_launches(void)
{
  /* Without cpu_state.mu, which a launch in flight may hold: the runner object
   * lives until the driver shuts down, after the loop. */
  cpu_runner_t *r = __atomic_load_n(&cpu_state.runner, __ATOMIC_ACQUIRE);

  return r != NULL ? cpu_runner_abort(r) : 0;
}

void cpu_driver_set_runner_user(uid_t uid, gid_t gid)
{
  pthread_mutex_lock(&runner_account.mu);
  runner_account.uid = uid;
  runner_account.gid = gid;
  pthread_mutex_unlock(&runner_account.mu);
}

/* The ids a runner that we start ourselves as root changes to (see
 * cpu.h). @return 0 with @p cfg set, or a code with the driver's error. */
static int runner_ids(cpu_runner_cfg_t *cfg)
{
  hipd_err_t err;
  uid_t uid;
  gid_t gid;

  if (geteuid() != 0 || cpu_launcher_running())
    return 0; /* our own uid, or the launcher's */
  pthread_mutex_lock(&runner_account.mu);
  uid = runner_account.uid;
  gid = runner_account.gid;
  pthread_mutex_unlock(&runner_account.mu);
  if (uid == (uid_t)-1 &&
      sandbox_user_lookup(CPU_RUNNER_DEFAULT_USER, &uid, &gid, &err) != 0) {
    drv_set_error("refusing to run CPU kernels as root: %s", err.msg);
    return HIPD_EPERM;
  }
  if (uid == 0 || gid == 0) {
    drv_set_error("refusing to run CPU kernels as root (runner user uid %u "
                  "gid %u)",
                  (unsigned)uid, (unsigned)gid);
    return HIPD_EPERM;
  }
  cfg->drop_ids = 1;
  cfg->uid = uid;
  cfg->gid = gid;
  return 0;
}

void cpu_driver_set_count(int n)
{
  device_count = n;
}

void cpu_driver_set_launch_timeout(unsigned ms)
{
  launch_timeout_ms = ms;
}

static uint64_t host_reserve; /* cpu_driver_set_host_reserve() */

void cpu_driver_set_host_reserve(uint64_t bytes)
{
  host_reserve = bytes;
}

/* A "key: value" line of a /proc file, as a number (first one found).
 * @return 0, or HIPD_ENOENT (no such file or line). */
static int proc_value(const char *file, const char *key, double *out)
{
  char line[512];
  size_t klen = strlen(key);
  FILE *f = fopen(file, "r");

  if (f == NULL)
    return HIPD_ENOENT;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, key, klen) == 0) {
      char *p = strchr(line + klen, ':');
      if (p != NULL) {
        *out = strtod(p + 1, NULL);
        fclose(f);
        return 0;
      }
    }
  }
  fclose(f);
  return HIPD_ENOENT;
}

/* The CPU's clock in kHz, as a GPU's is given: its peak, the same in every
 * process that asks. cpufreq's cpuinfo_max_freq where the kernel has it;
 * else /proc/cpuinfo's "cpu MHz", which is the current frequency where
 * the CPU scales (two workers read two values: a tenant's device list
 * then differed from root's) and the fixed one where it does not (most
 * virtual machines have no cpufreq). 0 where neither says. */
static int cpu_clock_khz(void)
{
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
  long khz = 0;
  double mhz = 0;

  if (f != NULL) {
    if (fscanf(f, "%ld", &khz) != 1 || khz <= 0 || khz > INT_MAX)
      khz = 0;
    fclose(f);
    if (khz > 0)
      return (int)khz;
  }
  if (proc_value("/proc/cpuinfo", "cpu MHz", &mhz) == 0 && mhz > 0 &&
      mhz < INT_MAX / 1000)
    return (int)mhz * 1000;
  return 0;
}

static void cpu_model(char *buf, size_t size)
{
  char line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");

  snprintf(buf, size, "host CPU");
  if (f == NULL)
    return;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      char *p = strchr(line, ':');
      if (p != NULL) {
        p++;
        while (*p == ' ')
          p++;
        p[strcspn(p, "\n")] = '\0';
        snprintf(buf, size, "%s", p);
      }
      break;
    }
  }
  fclose(f);
}

/* Remove the module directory and the module files still in it (those of
 * modules never unloaded: the process is ending). Idempotent. */
static void moddir_remove(void)
{
  char path[sizeof(cpu_state.moddir) + 32];

  if (cpu_state.moddir[0] == '\0')
    return;
  for (unsigned i = 1; i <= cpu_state.nmodules; i++) {
    snprintf(path, sizeof(path), "%s/module-%u.so", cpu_state.moddir, i);
    unlink(path);
  }
  rmdir(cpu_state.moddir);
  cpu_state.moddir[0] = '\0';
}

/* At exit(), for the ways out of a process that skip devices_shutdown()
 * (device tasks still running at the stop; _exit() and exec() call
 * cpu_driver_cleanup() instead). No lock: exit() may be called by a
 * thread that holds it. */
static pid_t moddir_owner; /* the process that made cpu_state.moddir */

static void moddir_atexit(void)
{
  /* Not in a forked child that calls exit(): the directory is its
   * parent's. */
  if (getpid() == moddir_owner)
    moddir_remove();
}

void cpu_driver_cleanup(void)
{
  pthread_mutex_lock(&cpu_state.mu);
  moddir_remove();
  pthread_mutex_unlock(&cpu_state.mu);
}

static int cpu_init(driver_t *drv, int *count)
{
  (void)drv;
  *count = device_count;
  return 0;
}

static void cpu_shutdown(driver_t *drv)
{
  (void)drv;
  pthread_mutex_lock(&cpu_state.mu);
  cpu_runner_stop(cpu_state.runner);
  cpu_state.runner = NULL;
  /* Buffers still allocated keep the arena (the process is ending). */
  if (cpu_state.arena != NULL && cpu_arena_count(cpu_state.arena) == 0) {
    cpu_arena_destroy(cpu_state.arena);
    cpu_state.arena = NULL;
  }
  moddir_remove();
  pthread_mutex_unlock(&cpu_state.mu);
}

static uint64_t total_memory(void)
{
  long pages = sysconf(_SC_PHYS_PAGES);
  long psize = sysconf(_SC_PAGESIZE);

  return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
}

uint64_t cpu_driver_default_reserve(void)
{
  uint64_t r = total_memory() / 16;

  if (r < (uint64_t)256 << 20)
    r = (uint64_t)256 << 20;
  return r > (uint64_t)8 << 30 ? (uint64_t)8 << 30 : r;
}

/* Whether the host can give @p size more bytes of buffers and keep its
 * reserve. @return 0, or HIPD_ENOMEM with the driver's error set. A host
 * that does not say (no MemAvailable) is not refused. */
static int host_room(size_t size)
{
  uint64_t reserve = host_reserve ? host_reserve : cpu_driver_default_reserve();
  double kib;
  uint64_t avail;

  if (proc_value("/proc/meminfo", "MemAvailable", &kib) != 0 || kib < 0)
    return 0;
  avail = (uint64_t)kib * 1024;
  if (avail >= reserve && avail - reserve >= size)
    return 0;
  drv_set_error("the host has %llu MiB of memory available: %zu bytes of "
                "buffers would leave it less than the %llu MiB hipd keeps "
                "free (--host-mem-reserve)",
                (unsigned long long)(avail >> 20), size,
                (unsigned long long)(reserve >> 20));
  return HIPD_ENOMEM;
}

static int tenant_usage_fd = -1, tenant_limit_fd = -1;

void cpu_driver_set_tenant_memory(int usage_fd, int limit_fd)
{
  tenant_usage_fd = usage_fd;
  tenant_limit_fd = limit_fd;
}

/* Whether the tenant's cgroup can take @p size more bytes: past its limit
 * the kernel's OOM killer would end a process of the tenant's (this one,
 * likely) instead of the allocation failing. Kept short of the limit by a
 * sixteenth of it (at least 32 MiB) for the processes' own memory.
 * @return 0, or HIPD_ENOMEM with the driver's error set. */
static int tenant_room(size_t size)
{
  uint64_t used, limit, slack;

  if (cgroup_read_u64(tenant_usage_fd, &used) != 0 ||
      cgroup_read_u64(tenant_limit_fd, &limit) != 0 || limit == UINT64_MAX)
    return 0;
  slack = limit / 16 > ((uint64_t)32 << 20) ? limit / 16 : (uint64_t)32 << 20;
  if (used < limit && limit - used > slack && limit - used - slack >= size)
    return 0;
  drv_set_error("%zu bytes of buffers would exceed this tenant's host "
                "memory limit of %llu MiB (--tenant-host-mem): its processes "
                "use %llu MiB",
                size, (unsigned long long)(limit >> 20),
                (unsigned long long)(used >> 20));
  return HIPD_ENOMEM;
}

static int cpu_get_caps(driver_t *drv, int dev, dev_caps_t *c)
{
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

  (void)drv;
  memset(c, 0, sizeof(*c));
  cpu_model(c->name, sizeof(c->name));
  if (device_count > 1) {
    size_t n = strlen(c->name);
    snprintf(c->name + n, sizeof(c->name) - n, " (CPU device %d)", dev);
  }
  snprintf(c->arch, sizeof(c->arch), "%s", HOST_ARCH);
  /* Limits follow a common GPU so that code tuned for GPUs runs as is. */
  c->max_threads_per_block = 1024;
  c->max_block_dims[0] = 1024;
  c->max_block_dims[1] = 1024;
  c->max_block_dims[2] = 64;
  c->max_grid_dims[0] = 2147483647;
  c->max_grid_dims[1] = 65535;
  c->max_grid_dims[2] = 65535;
  c->shared_mem_per_block = 64 * 1024;
  c->total_global_mem = total_memory();
  c->cc_major = 0;
  c->cc_minor = 0;
  c->supports_fp64 = 1;
  c->supports_atomics = 1;
  /* The threads of a block are not run in lock-step groups. */
  c->warp_size = 1;
  c->max_registers_per_block = 0; /* no register file to share */
  c->clock_rate_khz = cpu_clock_khz();
  c->multiprocessor_count = ncpu > 0 ? (int)ncpu : 1;
  c->is_cpu = 1;
  c->pci_bus_id = -1;
  return 0;
}

static int cpu_mem_info(driver_t *drv, int dev, uint64_t *free_b,
                        uint64_t *total)
{
  double avail_kb = 0;

  (void)drv;
  (void)dev;
  *total = total_memory();
  if (proc_value("/proc/meminfo", "MemAvailable", &avail_kb) == 0)
    *free_b = (uint64_t)avail_kb * 1024;
  else
    *free_b =
        (uint64_t)sysconf(_SC_AVPHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  return 0;
}

static int cpu_bind_thread(driver_t *drv, int dev)
{
  (void)drv;
  (void)dev;
  return 0;
}

/* Remember a new buffer and map it into the runner if one runs. A buffer
 * the runner cannot map at the same address fails the allocation: kernels
 * could not use it. */
static int track_buffer(const drv_mem_t *m)
{
  live_buf_t *b = malloc(sizeof(*b));
  hipd_err_t err;
  int rc = 0;

  if (b == NULL) {
    drv_set_error("out of memory");
    return HIPD_ENOMEM;
  }
  b->ptr = m->ptr;
  b->size = m->size;
  b->fd = m->fd;
  b->users = 1;
  pthread_mutex_lock(&cpu_state.mu);
  for (live_buf_t *o = cpu_state.bufs; o != NULL; o = o->next) {
    if (o->ptr == m->ptr && o->size == m->size && o->fd == m->fd) {
      o->users++;
      pthread_mutex_unlock(&cpu_state.mu);
      free(b);
      return 0;
    }
  }
  if (cpu_state.runner != NULL &&
      (rc = cpu_runner_map(cpu_state.runner, m->fd, m->ptr, m->size, &err)) !=
          0) {
    drv_set_error("the kernel runner cannot map the buffer: %s", err.msg);
    free(b);
  } else {
    b->next = cpu_state.bufs;
    cpu_state.bufs = b;
  }
  pthread_mutex_unlock(&cpu_state.mu);
  return rc;
}

static void untrack_buffer(void *ptr)
{
  hipd_err_t err;

  pthread_mutex_lock(&cpu_state.mu);
  for (live_buf_t **pp = &cpu_state.bufs; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->ptr == ptr) {
      live_buf_t *b = *pp;
      if (--b->users > 0)
        break;
      *pp = b->next;
      if (cpu_state.runner != NULL)
        cpu_runner_unmap(cpu_state.runner, ptr, &err);
      free(b);
      break;
    }
  }
  pthread_mutex_unlock(&cpu_state.mu);
}

/* The arena's address range: twice the host's memory (a single buffer
 * may be as large as the memory; the rest leaves room for guard gaps and
 * fragmentation), at least 4 GiB. It is address space only: nothing is
 * committed but the buffers. Under ThreadSanitizer, whose application
 * ranges are narrow, 16 GiB at most. */
static size_t arena_span(void)
{
  const uint64_t gib = UINT64_C(1) << 30;
  uint64_t span = (2 * total_memory() + gib - 1) / gib * gib;

  if (span < 4 * gib)
    span = 4 * gib;
#ifdef HIPD_TSAN
  if (span > 16 * gib)
    span = 16 * gib;
#endif
  if (span > SIZE_MAX / 2)
    span = SIZE_MAX / 2;
  return (size_t)span;
}

/* Make the arena if there is none yet. Under cpu_state.mu. */
static int arena_ensure(void)
{
  hipd_err_t err;
  int rc;

  if (cpu_state.arena != NULL)
    return 0;
  rc = cpu_arena_create(arena_span(), &cpu_state.arena, &err);
  if (rc != 0) {
    drv_set_error("%s", err.msg);
    cpu_state.arena = NULL;
  }
  return rc;
}

/* Free the arena ranges the runner held back (cpu_runner_bunmap) and no
 * longer maps. Under cpu_state.mu. */
static void arena_reclaim(void)
{
  uint64_t offs[64];
  size_t n;

  if (cpu_state.runner == NULL || cpu_state.arena == NULL)
    return;
  do {
    n = cpu_runner_reclaim(cpu_state.runner, ARENA_CHUNK, offs, 64);
    for (size_t i = 0; i < n; i++)
      cpu_arena_free(cpu_state.arena,
                     (char *)cpu_arena_base(cpu_state.arena) + offs[i]);
  } while (n == 64);
}

static int cpu_mem_alloc(driver_t *drv, int dev, size_t size, drv_mem_t *out)
{
  uint64_t total = total_memory();
  cpu_arena_buf_t b;
  hipd_err_t err;
  int rc;

  (void)drv;
  (void)dev;
  if (size == 0) {
    drv_set_error("cannot allocate 0 bytes");
    return HIPD_EINVAL;
  }
  if (size > total) {
    drv_set_error("%zu bytes exceed the device's %llu bytes of memory", size,
                  (unsigned long long)total);
    return HIPD_ENOMEM;
  }
  if ((rc = host_room(size)) != 0 || (rc = tenant_room(size)) != 0)
    return rc;
  pthread_mutex_lock(&cpu_state.mu);
  if ((rc = arena_ensure()) != 0)
    goto out;
  arena_reclaim();
  if ((rc = cpu_arena_alloc(cpu_state.arena, size, &b, &err)) != 0) {
    drv_set_error("%s", err.msg);
    goto out;
  }
  if (cpu_state.runner != NULL) {
    cpu_bmap_ent_t e = {b.offset, b.map_size};
    if (cpu_runner_bmap(cpu_state.runner, ARENA_CHUNK, &e, 1, &err) != 0) {
      /* Kernels could not use it. */
      drv_set_error("the kernel runner cannot map the buffer: %s", err.msg);
      cpu_arena_free(cpu_state.arena, b.ptr);
      rc = HIPD_EBUSY;
      goto out;
    }
  }
  out->ptr = b.ptr;
  out->size = size;
  out->fd = -1;
out:
  pthread_mutex_unlock(&cpu_state.mu);
  return rc;
}

static int cpu_mem_free(driver_t *drv, int dev, drv_mem_t *mem)
{
  cpu_arena_buf_t b;
  hipd_err_t err;
  int released = 1;

  (void)drv;
  (void)dev;
  pthread_mutex_lock(&cpu_state.mu);
  if (cpu_state.arena != NULL &&
      cpu_arena_find(cpu_state.arena, mem->ptr, &b) == 0) {
    /* Out of the runner first: a kernel must never reach freed pages. A
     * runner process running a launch keeps them until it ends, so the
     * range is reused only after that (arena_reclaim). */
    if (cpu_state.runner != NULL)
      cpu_runner_bunmap(cpu_state.runner, ARENA_CHUNK, b.offset, &released,
                        &err);
    if (released)
      cpu_arena_free(cpu_state.arena, mem->ptr);
  }
  arena_reclaim();
  pthread_mutex_unlock(&cpu_state.mu);
  mem->ptr = NULL;
  mem->fd = -1;
  return 0;
}

/* A zero-copy buffer is the client's memory itself: the daemon's mapping
 * of its memfd, mapped at the same address in the kernel runner. */
static int cpu_host_map(driver_t *drv, int dev, void *addr, size_t size, int fd,
                        drv_mem_t *out)
{
  (void)drv;
  (void)dev;
  out->ptr = addr;
  out->size = size;
  out->fd = fd;
  if (track_buffer(out) != 0) {
    out->ptr = NULL;
    return HIPD_EBUSY;
  }
  return 0;
}

static int cpu_host_unmap(driver_t *drv, int dev, drv_mem_t *mem)
{
  (void)drv;
  (void)dev;
  untrack_buffer(mem->ptr);
  mem->ptr = NULL;
  return 0;
}

static int cpu_stream_create(driver_t *drv, int dev, void **stream)
{
  cpu_stream_t *s = malloc(sizeof(*s));

  (void)drv;
  if (s == NULL)
    return HIPD_ENOMEM;
  s->dev = dev;
  *stream = s;
  return 0;
}

static int cpu_stream_destroy(driver_t *drv, int dev, void *stream)
{
  (void)drv;
  (void)dev;
  free(stream);
  return 0;
}

static int cpu_copy(driver_t *drv, void *stream, void *dst, const void *src,
                    size_t n)
{
  (void)drv;
  (void)stream;
  memmove(dst, src, n);
  return 0;
}

static int cpu_memset(driver_t *drv, void *stream, void *dst, int value,
                      size_t n)
{
  (void)drv;
  (void)stream;
  memset(dst, value, n);
  return 0;
}

static int cpu_stream_query(driver_t *drv, void *stream)
{
  (void)drv;
  (void)stream;
  return 0; /* every operation completed when it was called */
}

static int cpu_stream_sync(driver_t *drv, void *stream)
{
  (void)drv;
  (void)stream;
  return 0; /* every operation completed when it was called */
}

static int cpu_stream_notify(driver_t *drv, void *stream, drv_notify_fn fn,
                             void *arg)
{
  (void)drv;
  (void)stream;
  fn(arg, 0);
  return 0;
}

static int cpu_event_create(driver_t *drv, int dev, void **event)
{
  cpu_event_t *e = calloc(1, sizeof(*e));

  (void)drv;
  (void)dev;
  if (e == NULL)
    return HIPD_ENOMEM;
  *event = e;
  return 0;
}

static int cpu_event_destroy(driver_t *drv, int dev, void *event)
{
  (void)drv;
  (void)dev;
  free(event);
  return 0;
}

static int cpu_event_record(driver_t *drv, void *event, void *stream)
{
  cpu_event_t *e = event;

  (void)drv;
  (void)stream;
  e->ns = util_now_ns();
  return 0;
}

static int cpu_event_elapsed(driver_t *drv, void *start, void *stop, float *ms)
{
  const cpu_event_t *a = start, *b = stop;

  (void)drv;
  *ms = (float)(((double)b->ns - (double)a->ns) / 1e6);
  return 0;
}

/* ------------------------------------------------------------- kernels */

/* The first line of `CXX --version`, run once, at the first compiler_id
 * (in the compile helper, which reports it to the daemon). */
static void find_compiler_id(void)
{
  const char *cxx = cpu_compile_compiler();
  char *argv[] = {(char *)cxx, "--version", NULL};
  posix_spawn_file_actions_t fa;
  int pipefd[2];
  pid_t pid;
  ssize_t n;

  snprintf(cpu_state.compiler, sizeof(cpu_state.compiler), "%s",
           cxx ? cxx : "none");
  if (cxx == NULL || pipe2(pipefd, O_CLOEXEC) != 0)
    return;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
  if (posix_spawnp(&pid, cxx, &fa, NULL, argv, NULL) == 0) {
    close(pipefd[1]);
    n = read(pipefd[0], cpu_state.compiler, sizeof(cpu_state.compiler) - 1);
    cpu_state.compiler[n > 0 ? n : 0] = '\0';
    cpu_state.compiler[strcspn(cpu_state.compiler, "\n")] = '\0';
    waitpid(pid, NULL, 0);
  } else {
    close(pipefd[1]);
  }
  close(pipefd[0]);
  posix_spawn_file_actions_destroy(&fa);
}

static const char *cpu_compiler_id(driver_t *drv)
{
  (void)drv;
  pthread_once(&cpu_state.compiler_once, find_compiler_id);
  return cpu_state.compiler;
}

static int cpu_arch_supported(driver_t *drv, const char *arch)
{
  (void)drv;
  return strcmp(arch, HOST_ARCH) == 0;
}

static int cpu_compile_image(driver_t *drv, const char *arch, const char *src,
                             size_t len, const char *const *names,
                             size_t nnames, const char *const *opts,
                             size_t nopts, void **image, size_t *image_len,
                             char *log, size_t logsz)
{
  char *so = NULL;
  struct stat st;
  void *buf = NULL;
  int fd = -1, rc;

  if (!cpu_arch_supported(drv, arch)) {
    drv_set_error("the CPU device compiles for its own host only, not %s",
                  arch);
    return HIPD_ENOTSUP;
  }
  rc = cpu_compile(NULL, src, len, names, nnames, opts, nopts, &so, log, logsz);
  if (rc != 0) {
    drv_set_error("%s", rc == HIPD_ECOMPILE ? "compilation failed" : log);
    return rc;
  }
  fd = open(so, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 ||
      (buf = malloc((size_t)st.st_size)) == NULL ||
      read(fd, buf, (size_t)st.st_size) != st.st_size) {
    drv_set_error("cannot read the compiled module: %s", strerror(errno));
    rc = HIPD_EIO;
    free(buf);
    buf = NULL;
  } else {
    *image = buf;
    *image_len = (size_t)st.st_size;
  }
  if (fd >= 0)
    close(fd);
  cpu_compile_free(so);
  return rc;
}

/* The arena's buffers as BMAP entries, for runner_give_arena(). */
typedef struct {
  cpu_bmap_ent_t *ents;
  size_t n;
} arena_list_t;

static void arena_list_cb(void *arg, const cpu_arena_buf_t *b)
{
  arena_list_t *l = arg;

  l->ents[l->n++] = (cpu_bmap_ent_t){b->offset, b->map_size};
}

/* Give a new runner the arena's file and every buffer in it. Under
 * cpu_state.mu. */
static int runner_give_arena(void)
{
  arena_list_t l = {NULL, 0};
  size_t n = cpu_arena_count(cpu_state.arena);
  hipd_err_t err;
  int rc;

  rc = cpu_runner_chunk(
      cpu_state.runner, ARENA_CHUNK, cpu_arena_fd(cpu_state.arena),
      cpu_arena_base(cpu_state.arena), cpu_arena_span(cpu_state.arena), &err);
  if (rc != 0) {
    drv_set_error("the CPU kernel runner cannot map the device's buffers: %s",
                  err.msg);
    return rc;
  }
  if (n == 0)
    return 0;
  if ((l.ents = malloc(n * sizeof(*l.ents))) == NULL) {
    drv_set_error("out of memory");
    return HIPD_ENOMEM;
  }
  cpu_arena_foreach(cpu_state.arena, arena_list_cb, &l);
  rc = cpu_runner_bmap(cpu_state.runner, ARENA_CHUNK, l.ents, l.n, &err);
  if (rc != 0)
    drv_set_error("the CPU kernel runner cannot map the device's buffers: %s",
                  err.msg);
  free(l.ents);
  return rc;
}

/* Start the runner and give it every live buffer. Under cpu_state.mu. */
static int runner_ensure(void)
{
  hipd_err_t err;
  int rc;

  if (cpu_state.runner != NULL)
    return 0;
  if (cpu_state.moddir[0] == '\0') {
    const char *tmp = getenv("TMPDIR");
    snprintf(cpu_state.moddir, sizeof(cpu_state.moddir),
             "%s/hipd-modules-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(cpu_state.moddir) == NULL) {
      drv_set_error("cannot create a module directory: %s", strerror(errno));
      cpu_state.moddir[0] = '\0';
      return HIPD_EIO;
    }
    {
      static int registered;
      moddir_owner = getpid();
      if (!registered && atexit(moddir_atexit) == 0)
        registered = 1;
    }
  }
  /* The runner reserves the arena's range first thing, so that nothing
   * of its own can be where buffers must go. */
  if ((rc = arena_ensure()) != 0)
    return rc;
  {
    cpu_runner_cfg_t cfg = {.timeout_ms = launch_timeout_ms,
                            .reserve_addr = cpu_arena_base(cpu_state.arena),
                            .reserve_size = cpu_arena_span(cpu_state.arena)};
    if ((rc = runner_ids(&cfg)) != 0)
      return rc;
    rc = cpu_runner_start(&cfg, &cpu_state.runner, &err);
  }
  if (rc != 0) {
    drv_set_error("cannot start the CPU kernel runner: %s", err.msg);
    cpu_state.runner = NULL;
    return rc;
  }
  if ((rc = runner_give_arena()) != 0) {
    cpu_runner_stop(cpu_state.runner);
    cpu_state.runner = NULL;
    return rc;
  }
  for (live_buf_t *b = cpu_state.bufs; b != NULL; b = b->next)
    if ((rc = cpu_runner_map(cpu_state.runner, b->fd, b->ptr, b->size, &err)) !=
        0)
      drv_set_error("the kernel runner cannot map a buffer: %s", err.msg);
  return 0;
}

static int cpu_module_load(driver_t *drv, int dev, const void *image,
                           size_t len, void **module)
{
  cpu_module_t *m = calloc(1, sizeof(*m));
  hipd_err_t err;
  int fd, rc;

  (void)drv;
  (void)dev;
  if (m == NULL)
    return HIPD_ENOMEM;
  pthread_mutex_lock(&cpu_state.mu);
  if ((rc = runner_ensure()) != 0)
    goto out;
  snprintf(m->path, sizeof(m->path), "%s/module-%u.so", cpu_state.moddir,
           ++cpu_state.nmodules);
  fd = open(m->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, image, len) != (ssize_t)len) {
    drv_set_error("cannot write the module for the runner: %s",
                  strerror(errno));
    if (fd >= 0)
      close(fd);
    unlink(m->path);
    rc = HIPD_EIO;
    goto out;
  }
  close(fd);
  /* The file stays while the module is loaded: a restarted runner loads
   * it again from there (cpu_runner_client.c's replay). */
  rc = cpu_runner_load(cpu_state.runner, m->path, &m->id, &err);
  if (rc != 0) {
    drv_set_error("%s", err.msg);
    unlink(m->path);
  }
out:
  pthread_mutex_unlock(&cpu_state.mu);
  if (rc != 0) {
    free(m);
    return rc;
  }
  *module = m;
  return 0;
}

static int cpu_module_unload(driver_t *drv, int dev, void *module)
{
  cpu_module_t *m = module;
  hipd_err_t err;

  (void)drv;
  (void)dev;
  pthread_mutex_lock(&cpu_state.mu);
  if (cpu_state.runner != NULL)
    cpu_runner_unload(cpu_state.runner, m->id, &err);
  pthread_mutex_unlock(&cpu_state.mu);
  unlink(m->path);
  while (m->kernels != NULL) {
    cpu_kernel_t *k = m->kernels;
    m->kernels = k->next;
    free(k);
  }
  free(m);
  return 0;
}

static int cpu_kernel_get(driver_t *drv, void *module, const char *name,
                          void **fn, drv_sig_t *sig)
{
  cpu_module_t *m = module;
  cpu_kernel_t *k = calloc(1, sizeof(*k));
  cpu_kernel_sig_t cs;
  hipd_err_t err;
  int rc;

  (void)drv;
  if (k == NULL)
    return HIPD_ENOMEM;
  pthread_mutex_lock(&cpu_state.mu);
  rc = cpu_state.runner
           ? cpu_runner_kernel(cpu_state.runner, m->id, name, &k->id, &cs, &err)
           : HIPD_EDEVICE;
  pthread_mutex_unlock(&cpu_state.mu);
  if (rc != 0) {
    drv_set_error("%s", cpu_state.runner ? err.msg
                                         : "the kernel runner is not running");
    free(k);
    return rc;
  }
  k->sig.known = 1;
  k->sig.nargs = cs.nargs;
  memcpy(k->sig.types, cs.types, cs.nargs);
  *sig = k->sig;
  *fn = k;
  pthread_mutex_lock(&cpu_state.mu);
  k->next = m->kernels;
  m->kernels = k;
  pthread_mutex_unlock(&cpu_state.mu);
  return 0;
}

static int cpu_launch(driver_t *drv, void *stream, void *fn,
                      const uint32_t grid[3], const uint32_t block[3],
                      uint32_t shared, const drv_arg_t *args, uint32_t nargs,
                      drv_output_t *out)
{
  cpu_kernel_t *k = fn;
  cpu_arg_t cargs[DRV_MAX_ARGS];
  cpu_runner_t *r;
  hipd_err_t err;
  int rc;

  (void)drv;
  (void)stream;
  if (nargs > DRV_MAX_ARGS)
    return HIPD_ESIGNATURE;
  for (uint32_t i = 0; i < nargs; i++) {
    switch (args[i].kind) {
    case KARG_PTR:
      cargs[i].ptr = (uint64_t)(uintptr_t)args[i].v.ptr;
      break;
    case KARG_I32:
      cargs[i].i = args[i].v.i32;
      break;
    case KARG_I64:
      cargs[i].i = args[i].v.i64;
      break;
    case KARG_F32:
      cargs[i].f64 = 0;
      cargs[i].f32 = args[i].v.f32;
      break;
    default:
      cargs[i].f64 = args[i].v.f64;
      break;
    }
  }
  pthread_mutex_lock(&cpu_state.mu);
  r = cpu_state.runner;
  pthread_mutex_unlock(&cpu_state.mu);
  if (r == NULL) {
    drv_set_error("the kernel runner is not running");
    return HIPD_EDEVICE;
  }
  /* The runner serializes requests itself; cpu_state.mu is not held across the
   * launch so that allocations on other threads go on meanwhile. */
  rc =
      cpu_runner_launch(r, k->id, grid, block, shared, cargs, nargs, out, &err);
  if (rc != 0)
    drv_set_error("%s", err.msg);
  return rc;
}

static driver_t cpu_driver = {
    .name = "cpu",
    .platform = "host",
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .get_caps = cpu_get_caps,
    .mem_info = cpu_mem_info,
    .bind_thread = cpu_bind_thread,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .host_map = cpu_host_map,
    .host_unmap = cpu_host_unmap,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .copy_d2d = cpu_copy,
    .memset = cpu_memset,
    .stream_query = cpu_stream_query,
    .stream_sync = cpu_stream_sync,
    .stream_notify = cpu_stream_notify,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_elapsed = cpu_event_elapsed,
    .compiler_id = cpu_compiler_id,
    .arch_supported = cpu_arch_supported,
    .compile = cpu_compile_image,
    .module_load = cpu_module_load,
    .module_unload = cpu_module_unload,
    .kernel_get = cpu_kernel_get,
    .launch = cpu_launch,
};

driver_t *driver_cpu(void)
{
  return &cpu_driver;
}
