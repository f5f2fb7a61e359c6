/* daemon/drivers/cpu.c: the host as a device.
 *
 * Memory is host memory backed by a memfd (so that a helper process and,
 * later, clients can map the same pages). Streams are ordered by their
 * executors, so each operation here runs to completion when called. Events
 * read the monotonic clock when their stream reaches them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "driver.h"
#include "hipd.h"

typedef struct {
  int dev;
} cpu_stream_t;

typedef struct {
  uint64_t ns; /* monotonic time the stream reached the mark */
} cpu_event_t;

static int device_count = 1;

void cpu_driver_set_count(int n)
{
  device_count = n;
}

/* A "key: value" line of a /proc file, as a number (first one found). */
static int proc_value(const char *file, const char *key, double *out)
{
  char line[512];
  size_t klen = strlen(key);
  FILE *f = fopen(file, "r");

  if (f == NULL)
    return -1;
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
  return -1;
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

static int cpu_init(driver_t *drv, int *count)
{
  (void)drv;
  *count = device_count;
  return 0;
}

static void cpu_shutdown(driver_t *drv)
{
  (void)drv;
}

static uint64_t total_memory(void)
{
  long pages = sysconf(_SC_PHYS_PAGES);
  long psize = sysconf(_SC_PAGESIZE);

  return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
}

static int cpu_get_caps(driver_t *drv, int dev, dev_caps_t *c)
{
  double mhz = 0;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

  (void)drv;
  memset(c, 0, sizeof(*c));
  cpu_model(c->name, sizeof(c->name));
  if (device_count > 1) {
    size_t n = strlen(c->name);
    snprintf(c->name + n, sizeof(c->name) - n, " (CPU device %d)", dev);
  }
#if defined(__x86_64__)
  snprintf(c->arch, sizeof(c->arch), "host-x86_64");
#elif defined(__aarch64__)
  snprintf(c->arch, sizeof(c->arch), "host-aarch64");
#else
  snprintf(c->arch, sizeof(c->arch), "host");
#endif
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
  if (proc_value("/proc/cpuinfo", "cpu MHz", &mhz) == 0)
    c->clock_rate_khz = (int)(mhz * 1000.0);
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

static int cpu_mem_alloc(driver_t *drv, int dev, size_t size, drv_mem_t *out)
{
  uint64_t total = total_memory();
  int fd;
  void *p;

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
  fd = memfd_create("hipd-cpu-buffer", MFD_CLOEXEC);
  if (fd < 0) {
    drv_set_error("memfd_create: %s", strerror(errno));
    return HIPD_ENOMEM;
  }
  /* Commit the pages now, as a GPU commits device memory at allocation:
   * running out of memory is an allocation error, not a later crash. */
  int rc = posix_fallocate(fd, 0, (off_t)size);
  if (rc != 0) {
    drv_set_error("cannot commit %zu bytes: %s", size, strerror(rc));
    close(fd);
    return HIPD_ENOMEM;
  }
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    drv_set_error("mmap of %zu bytes: %s", size, strerror(errno));
    close(fd);
    return HIPD_ENOMEM;
  }
  out->ptr = p;
  out->size = size;
  out->fd = fd;
  return 0;
}

static int cpu_mem_free(driver_t *drv, int dev, drv_mem_t *mem)
{
  (void)drv;
  (void)dev;
  munmap(mem->ptr, mem->size);
  if (mem->fd >= 0)
    close(mem->fd);
  mem->ptr = NULL;
  mem->fd = -1;
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
  struct timespec ts;
  cpu_event_t *e = event;

  (void)drv;
  (void)stream;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  e->ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  return 0;
}

static int cpu_event_elapsed(driver_t *drv, void *start, void *stop, float *ms)
{
  const cpu_event_t *a = start, *b = stop;

  (void)drv;
  *ms = (float)(((double)b->ns - (double)a->ns) / 1e6);
  return 0;
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
};

driver_t *driver_cpu(void)
{
  return &cpu_driver;
}
