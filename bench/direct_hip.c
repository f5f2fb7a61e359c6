/* SPDX-License-Identifier: MIT */
/* bench/direct_hip.c: the direct-HIP baselines of hipd_bench.
 *
 * What an application does without hipd, in one process of its own: HIP
 * runtime calls, kernels compiled with hiprtc from the same source hipd
 * compiles (bench/kernels.h, with the options hipd's HIP driver passes:
 * the device's architecture and -std=c++17; a cubin on NVIDIA, as hipd
 * loads). One source for AMD and NVIDIA, built like the HIP driver
 * (daemon/drivers/hip/hip_*.c).
 *
 *   direct_hip MODE [--device N] [options]
 *
 * Each mode prints its results as JSON lines on stdout, one object per
 * line with a "kind" field, which hipd_bench reads; a failure prints
 * {"kind":"error","message":...}, the same message on stderr, and exits 1.
 * MODE is one of
 *   info     the HIP devices and the runtime's versions
 *   rtt      launch an empty kernel and synchronize its stream (--iters)
 *   launch   launch --iters empty kernels, then synchronize once
 *   bw       hipMemcpy H2D and D2H from pinned, pageable and registered
 *            (a shared memfd page-locked, as hipd's shared buffers) host memory
 * at each of --sizes, each for at least --budget seconds compile hiprtc-compile
 * --iters new variants of the compile source and load each (hipModuleLoadData):
 * the cold compile peer     hipMemcpyPeerAsync of --bytes from --device to
 * --peer worker   the sharing figure's client: compile and set up, print
 *            {"kind":"ready"}, wait for a line on stdin, then loop {launch
 *            the small kernel; synchronize} for --seconds
 *   idle     a process holding a context, a stream and a loaded module
 *            after one kernel, doing nothing: the CPU time of its threads
 *            (the runtime's own) over --seconds, after 1 s to settle
 */
#include "config.h"

#ifdef __HIP_PLATFORM_NVIDIA__
#include "drivers/hip/hip_nvidia_compat.h" /* must precede every HIP header */
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#ifdef __HIP_PLATFORM_NVIDIA__
#include <nvrtc.h> /* hiprtcProgram is an nvrtcProgram: for the cubin */
#endif

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_util.h"
#include "kernels.h"
#include "procs.h"
#include "util/clock.h"
#include "util/parse.h"

#ifdef __HIP_PLATFORM_NVIDIA__
#define PLATFORM "nvidia"
#else
#define PLATFORM "amd"
#endif

#define MAX_SIZES 16

static struct {
  const char *mode;
  int device;
  int peer;
  int iters;
  int warmup;
  uint64_t sizes[MAX_SIZES];
  int nsizes;
  double budget;  /* seconds per bandwidth measurement */
  double seconds; /* worker loop */
  int elems;      /* worker kernel size */
  int threads;    /* worker: loops in this one process, one stream each */
  uint64_t bytes; /* peer copy */
} O = {
    .device = 0,
    .peer = 1,
    .iters = 1000,
    .warmup = 100,
    .sizes = {1024, 1 << 20, 256 << 20},
    .nsizes = 3,
    .budget = 0.3,
    .seconds = 3,
    .elems = 65536,
    .bytes = 256 << 20,
};

static void die(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));

/* Report a failure both ways (stdout for hipd_bench, stderr for people)
 * and exit 1. */
static void die(const char *fmt, ...)
{
  char msg[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "direct_hip %s: %s\n", O.mode ? O.mode : "", msg);
  fputs("{\"kind\":\"error\",\"message\":", stdout);
  bu_json_str(stdout, msg);
  fputs("}\n", stdout);
  fflush(stdout);
  exit(1);
}

#define CHECK(call)                                                            \
  do {                                                                         \
    hipError_t e_ = (call);                                                    \
    if (e_ != hipSuccess)                                                      \
      die("%s: %s (%s)", #call, hipGetErrorString(e_), hipGetErrorName(e_));   \
  } while (0)

#define RTC_CHECK(call)                                                        \
  do {                                                                         \
    hiprtcResult r_ = (call);                                                  \
    if (r_ != HIPRTC_SUCCESS)                                                  \
      die("%s: %s", #call, hiprtcGetErrorString(r_));                          \
  } while (0)

static void *xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);

  if (p == NULL)
    die("out of memory for %zu bytes", n);
  return p;
}

/* ---------------------------------------------------------------- kernels */

typedef struct {
  hipModule_t mod;
  hipFunction_t fn;
  double compile_ms;     /* hiprtc: create, compile, get the code */
  double compile_cpu_ms; /* the process's CPU time meanwhile */
  double load_ms;        /* hipModuleLoadData + hipModuleGetFunction */
} kern_t;

/* The target hipd's HIP driver compiles for: on AMD the gfx name without
 * its :feature suffixes, on NVIDIA sm_<major><minor>. */
static void device_arch(int dev, char *arch, size_t size)
{
  hipDeviceProp_t prop;

  CHECK(hipGetDeviceProperties(&prop, dev));
#ifdef __HIP_PLATFORM_AMD__
  snprintf(arch, size, "%.*s", (int)strcspn(prop.gcnArchName, ":"),
           prop.gcnArchName);
  if (strncmp(arch, "gfx", 3) != 0)
    snprintf(arch, size, "gfx%d", prop.gcnArch);
#else
  snprintf(arch, size, "sm_%d%d", prop.major, prop.minor);
#endif
}

/* Compile @p source with hiprtc for device @p dev as hipd does, load it and
 * find kernel @p name, timing both halves. */
static void kernel_build(int dev, const char *source, const char *name,
                         kern_t *k)
{
  char arch[64], target[96];
  const char *opts[2];
  const char *lowered = NULL;
  hiprtcProgram prog;
  size_t size = 0;
  char *code;
  double t0, t1;
  uint64_t c0;

  device_arch(dev, arch, sizeof(arch));
#ifdef __HIP_PLATFORM_AMD__
  snprintf(target, sizeof(target), "--offload-arch=%s", arch);
#else
  snprintf(target, sizeof(target), "--gpu-architecture=%s", arch);
#endif
  opts[0] = target;
  opts[1] = "-std=c++17";

  c0 = util_cpu_ns();
  t0 = bu_now();
  RTC_CHECK(hiprtcCreateProgram(&prog, source, "kernel.hip", 0, NULL, NULL));
  RTC_CHECK(hiprtcAddNameExpression(prog, name));
  if (hiprtcCompileProgram(prog, 2, opts) != HIPRTC_SUCCESS) {
    size_t logsz = 0;
    char *log;

    hiprtcGetProgramLogSize(prog, &logsz);
    log = xmalloc(logsz + 1);
    log[0] = '\0';
    if (logsz > 0)
      hiprtcGetProgramLog(prog, log);
    log[logsz] = '\0';
    die("hiprtc compile for %s failed: %s", arch, log);
  }
  RTC_CHECK(hiprtcGetLoweredName(prog, name, &lowered));
#ifdef __HIP_PLATFORM_NVIDIA__
  if (nvrtcGetCUBINSize(prog, &size) != NVRTC_SUCCESS || size == 0)
    die("nvrtcGetCUBINSize: no cubin for %s", arch);
  code = xmalloc(size);
  if (nvrtcGetCUBIN(prog, code) != NVRTC_SUCCESS)
    die("nvrtcGetCUBIN failed");
#else
  RTC_CHECK(hiprtcGetCodeSize(prog, &size));
  code = xmalloc(size);
  RTC_CHECK(hiprtcGetCode(prog, code));
#endif
  t1 = bu_now();
  k->compile_ms = (t1 - t0) * 1e3;
  k->compile_cpu_ms = (double)(util_cpu_ns() - c0) / 1e6;
  CHECK(hipModuleLoadData(&k->mod, code));
  CHECK(hipModuleGetFunction(&k->fn, k->mod, lowered));
  k->load_ms = (bu_now() - t1) * 1e3;
  free(code);
  RTC_CHECK(hiprtcDestroyProgram(&prog));
}

static void launch_empty(const kern_t *k, hipStream_t s)
{
  static void *none[1];

  CHECK(hipModuleLaunchKernel(k->fn, 1, 1, 1, 1, 1, 1, 0, s, none, NULL));
}

/* Make @p dev current and its context live before anything is timed. */
static void device_open(int dev)
{
  int n = 0;

  CHECK(hipGetDeviceCount(&n));
  if (dev < 0 || dev >= n)
    die("no HIP device %d (there are %d)", dev, n);
  CHECK(hipSetDevice(dev));
  CHECK(hipFree(NULL));
}

/* ------------------------------------------------------------------ modes */

static int mode_idle(void)
{
  enum { MAXT = 64 };
  static tprof_t pa[MAXT], pb[MAXT];
  static uint64_t delta[MAXT];
  uint64_t total, top = 0;
  const char *top_name = "";
  hipStream_t s;
  kern_t k;
  long threads;
  int a, b;
  double t0, t1;

  device_open(O.device);
  CHECK(hipStreamCreate(&s));
  kernel_build(O.device, BENCH_EMPTY_SOURCE, BENCH_EMPTY_NAME, &k);
  launch_empty(&k, s);
  CHECK(hipStreamSynchronize(s));
  bu_sleep(1.0);
  /* As hipd_bench measures hipd's idle (bench/procs.c): run time by
   * thread name. */
  t0 = bu_now();
  a = procs_self_profile("direct_hip", pa, MAXT);
  bu_sleep(O.seconds);
  b = procs_self_profile("direct_hip", pb, MAXT);
  t1 = bu_now();
  total = procs_profile_between(pa, a, pb, b, delta, &threads);
  for (int i = 0; i < b; i++)
    if (delta[i] > top) {
      top = delta[i];
      top_name = pb[i].name;
    }
  printf("{\"kind\":\"idle\",\"seconds\":%.3f,\"cpu_pct\":%.4f,"
         "\"threads\":%ld,\"top_ms\":%.3f,\"top\":",
         t1 - t0, (double)total / 1e9 / (t1 - t0) * 100.0, threads,
         (double)top / 1e6);
  bu_json_str(stdout, top_name);
  puts("}");
  CHECK(hipStreamDestroy(s));
  return 0;
}

static int mode_info(void)
{
  int n = 0, rt = 0, drv = 0;
  hipError_t e = hipGetDeviceCount(&n);

  (void)hipRuntimeGetVersion(&rt);
  (void)hipDriverGetVersion(&drv);
  printf("{\"kind\":\"info\",\"platform\":\"%s\",\"hip_version\":\"%d.%d.%d\","
         "\"runtime_version\":%d,\"driver_version\":%d,\"count\":%d",
         PLATFORM, HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH, rt,
         drv, e == hipSuccess ? n : 0);
  if (e != hipSuccess) {
    char msg[256];

    snprintf(msg, sizeof(msg), "hipGetDeviceCount: %s", hipGetErrorString(e));
    fputs(",\"error\":", stdout);
    bu_json_str(stdout, msg);
    n = 0;
  }
  puts("}");
  for (int i = 0; i < n; i++) {
    hipDeviceProp_t prop;
    char arch[64];

    CHECK(hipGetDeviceProperties(&prop, i));
    device_arch(i, arch, sizeof(arch));
    printf("{\"kind\":\"device\",\"ordinal\":%d,\"name\":", i);
    bu_json_str(stdout, prop.name);
    printf(",\"arch\":\"%s\",\"pci_bus_id\":%d,\"pci_domain_id\":%d,"
           "\"total_mem\":%zu}\n",
           arch, prop.pciBusID, prop.pciDomainID, (size_t)prop.totalGlobalMem);
  }
  return 0;
}

static int mode_rtt(void)
{
  double *us = xmalloc(sizeof(double) * (size_t)O.iters);
  hipStream_t s;
  kern_t k;

  device_open(O.device);
  CHECK(hipStreamCreate(&s));
  kernel_build(O.device, BENCH_EMPTY_SOURCE, BENCH_EMPTY_NAME, &k);
  for (int i = 0; i < O.warmup; i++) {
    launch_empty(&k, s);
    CHECK(hipStreamSynchronize(s));
  }
  for (int i = 0; i < O.iters; i++) {
    double t0 = bu_now();

    launch_empty(&k, s);
    CHECK(hipStreamSynchronize(s));
    us[i] = (bu_now() - t0) * 1e6;
  }
  double mean = bu_mean(us, (size_t)O.iters);
  double med = bu_median(us, (size_t)O.iters);
  printf("{\"kind\":\"rtt\",\"iters\":%d,\"us_median\":%.3f,\"us_mean\":%.3f,"
         "\"us_p10\":%.3f,\"us_p90\":%.3f}\n",
         O.iters, med, mean, bu_quantile(us, (size_t)O.iters, 0.1),
         bu_quantile(us, (size_t)O.iters, 0.9));
  CHECK(hipStreamDestroy(s));
  free(us);
  return 0;
}

static int mode_launch(void)
{
  double rate[3];
  hipStream_t s;
  kern_t k;

  device_open(O.device);
  CHECK(hipStreamCreate(&s));
  kernel_build(O.device, BENCH_EMPTY_SOURCE, BENCH_EMPTY_NAME, &k);
  for (int i = 0; i < O.warmup; i++)
    launch_empty(&k, s);
  CHECK(hipStreamSynchronize(s));
  /* Three batches; the median batch is the figure. */
  for (int r = 0; r < 3; r++) {
    double t0 = bu_now();

    for (int i = 0; i < O.iters; i++)
      launch_empty(&k, s);
    CHECK(hipStreamSynchronize(s));
    rate[r] = O.iters / (bu_now() - t0);
  }
  printf("{\"kind\":\"launch\",\"iters\":%d,\"per_s\":%.1f}\n", O.iters,
         bu_median(rate, 3));
  CHECK(hipStreamDestroy(s));
  return 0;
}

/* hipMemcpy of @p size bytes in direction @p kind, repeated for at least
 * O.budget seconds and 3 times, after one untimed copy. @return GB/s. */
static double copy_rate(void *dst, const void *src, size_t size,
                        hipMemcpyKind kind, int *reps)
{
  double t0, t;
  int n = 0;

  CHECK(hipMemcpy(dst, src, size, kind));
  t0 = bu_now();
  do {
    CHECK(hipMemcpy(dst, src, size, kind));
    n++;
    t = bu_now() - t0;
  } while (t < O.budget || n < 3);
  *reps = n;
  return (double)size * n / t / 1e9;
}

/* Host memory as hipd's shared buffers are: a memfd mapped shared, then
 * page-locked with hipHostRegister (the flags of the HIP driver's
 * hip_shm.c), so that the shared-buffer figures can be told apart into
 * what the registered memory's copies cost and what hipd adds. */
static void *registered_alloc(size_t size)
{
  int fd = memfd_create("direct-hip-shm", MFD_CLOEXEC);
  void *p;

  if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
    die("memfd of %zu bytes: %s", size, strerror(errno));
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    die("mmap of %zu bytes: %s", size, strerror(errno));
  memset(p, 1, size);
  CHECK(hipHostRegister(p, size,
                        hipHostRegisterPortable | hipHostRegisterMapped));
  return p;
}

static int mode_bw(void)
{
  static const char *const modes[] = {"pinned", "pageable", "registered"};
  uint64_t max = 0;
  void *dbuf, *pinned, *pageable, *registered;

  for (int i = 0; i < O.nsizes; i++)
    if (O.sizes[i] > max)
      max = O.sizes[i];
  device_open(O.device);
  CHECK(hipMalloc(&dbuf, max));
  CHECK(hipHostMalloc(&pinned, max, hipHostMallocDefault));
  pageable = xmalloc(max);
  memset(pageable, 1, max); /* touched: the pages exist */
  memset(pinned, 1, max);
  registered = registered_alloc(max);
  for (int i = 0; i < O.nsizes; i++) {
    for (int m = 0; m < 3; m++) {
      void *host = m == 0 ? pinned : m == 1 ? pageable : registered;
      int reps;
      double h2d =
          copy_rate(dbuf, host, O.sizes[i], hipMemcpyHostToDevice, &reps);
      printf("{\"kind\":\"bw\",\"mode\":\"%s\",\"dir\":\"h2d\",\"bytes\":%llu,"
             "\"gbps\":%.4f,\"reps\":%d}\n",
             modes[m], (unsigned long long)O.sizes[i], h2d, reps);
      double d2h =
          copy_rate(host, dbuf, O.sizes[i], hipMemcpyDeviceToHost, &reps);
      printf("{\"kind\":\"bw\",\"mode\":\"%s\",\"dir\":\"d2h\",\"bytes\":%llu,"
             "\"gbps\":%.4f,\"reps\":%d}\n",
             modes[m], (unsigned long long)O.sizes[i], d2h, reps);
      fflush(stdout);
    }
  }
  CHECK(hipFree(dbuf));
  CHECK(hipHostFree(pinned));
  CHECK(hipHostUnregister(registered));
  munmap(registered, max);
  free(pageable);
  return 0;
}

static int mode_compile(void)
{
  double *compile = xmalloc(sizeof(double) * (size_t)O.iters);
  double *load = xmalloc(sizeof(double) * (size_t)O.iters);
  double *cpu = xmalloc(sizeof(double) * (size_t)O.iters);
  double *total = xmalloc(sizeof(double) * (size_t)O.iters);
  unsigned long long run = (unsigned long long)(bu_now() * 1e9) ^
                           ((unsigned long long)getpid() << 32);
  size_t len = strlen(BENCH_SMALL_SOURCE) + 96;
  char *src = xmalloc(len);
  double first;
  kern_t k;

  device_open(O.device);
  /* The process's first compile loads the compiler (and, on AMD, comgr's
   * LLVM): reported, but not part of the figure, as hipd has done it
   * long before. */
  snprintf(src, len, "%s" BENCH_VARIANT_FMT, BENCH_SMALL_SOURCE, run, -1);
  kernel_build(O.device, src, BENCH_SMALL_NAME, &k);
  first = k.compile_ms + k.load_ms;
  CHECK(hipModuleUnload(k.mod));
  for (int i = 0; i < O.iters; i++) {
    snprintf(src, len, "%s" BENCH_VARIANT_FMT, BENCH_SMALL_SOURCE, run, i);
    kernel_build(O.device, src, BENCH_SMALL_NAME, &k);
    compile[i] = k.compile_ms;
    load[i] = k.load_ms;
    cpu[i] = k.compile_cpu_ms;
    total[i] = k.compile_ms + k.load_ms;
    CHECK(hipModuleUnload(k.mod));
  }
  printf("{\"kind\":\"compile\",\"iters\":%d,\"ms_median\":%.4f,"
         "\"compile_ms_median\":%.4f,\"load_ms_median\":%.4f,"
         "\"compile_cpu_ms_median\":%.4f,\"first_ms\":%.4f}\n",
         O.iters, bu_median(total, (size_t)O.iters),
         bu_median(compile, (size_t)O.iters), bu_median(load, (size_t)O.iters),
         bu_median(cpu, (size_t)O.iters), first);
  free(cpu);
  free(compile);
  free(load);
  free(total);
  free(src);
  return 0;
}

static int mode_peer(void)
{
  int can = 0, reps = 0;
  void *src, *dst;
  hipStream_t s;
  double t0, t;

  device_open(O.peer);
  device_open(O.device);
  if (O.peer == O.device)
    die("--peer must differ from --device");
  CHECK(hipDeviceCanAccessPeer(&can, O.device, O.peer));
  if (can) {
    hipError_t e = hipDeviceEnablePeerAccess(O.peer, 0);

    if (e != hipSuccess && e != hipErrorPeerAccessAlreadyEnabled)
      die("hipDeviceEnablePeerAccess: %s", hipGetErrorString(e));
    CHECK(hipSetDevice(O.peer));
    e = hipDeviceEnablePeerAccess(O.device, 0);
    if (e != hipSuccess && e != hipErrorPeerAccessAlreadyEnabled)
      die("hipDeviceEnablePeerAccess: %s", hipGetErrorString(e));
  }
  CHECK(hipSetDevice(O.peer));
  CHECK(hipMalloc(&dst, O.bytes));
  CHECK(hipSetDevice(O.device));
  CHECK(hipMalloc(&src, O.bytes));
  CHECK(hipMemset(src, 7, O.bytes));
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemcpyPeerAsync(dst, O.peer, src, O.device, O.bytes, s));
  CHECK(hipStreamSynchronize(s));
  t0 = bu_now();
  do {
    CHECK(hipMemcpyPeerAsync(dst, O.peer, src, O.device, O.bytes, s));
    CHECK(hipStreamSynchronize(s));
    reps++;
    t = bu_now() - t0;
  } while (t < O.budget || reps < 3);
  printf("{\"kind\":\"peer\",\"bytes\":%llu,\"gbps\":%.4f,\"reps\":%d,"
         "\"peer_access\":%d}\n",
         (unsigned long long)O.bytes, (double)O.bytes * reps / t / 1e9, reps,
         can);
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(src));
  CHECK(hipSetDevice(O.peer));
  CHECK(hipFree(dst));
  return 0;
}

/* One loop of the threaded worker: its own stream and buffer in the
 * process's one context on the device. */
typedef struct {
  pthread_t th;
  kern_t *k;
  pthread_barrier_t *go;
  long long count;
} loop_t;

static void *loop_main(void *arg)
{
  loop_t *l = arg;
  unsigned grid =
      (unsigned)((O.elems + BENCH_SMALL_BLOCK - 1) / BENCH_SMALL_BLOCK);
  int n = O.elems;
  hipStream_t s;
  float *x;
  void *args[2] = {&x, &n};
  double t0;

  CHECK(hipSetDevice(O.device));
  CHECK(hipMalloc((void **)&x, sizeof(float) * (size_t)n));
  CHECK(hipStreamCreate(&s));
  pthread_barrier_wait(l->go);
  t0 = bu_now();
  do {
    CHECK(hipModuleLaunchKernel(l->k->fn, grid, 1, 1, BENCH_SMALL_BLOCK, 1, 1,
                                0, s, args, NULL));
    CHECK(hipStreamSynchronize(s));
    l->count++;
  } while (bu_now() - t0 < O.seconds);
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(x));
  return NULL;
}

/* worker --threads N: N loops at once in this process (one context), the
 * way hipd runs many clients' work: how far one process's runtime scales. */
static int mode_worker_threads(void)
{
  loop_t *loops = calloc((size_t)O.threads, sizeof(*loops));
  pthread_barrier_t go;
  long long count = 0;
  double t0, t;
  kern_t k;

  if (loops == NULL)
    die("out of memory");
  device_open(O.device);
  kernel_build(O.device, BENCH_SMALL_SOURCE, BENCH_SMALL_NAME, &k);
  pthread_barrier_init(&go, NULL, (unsigned)O.threads + 1);
  for (int i = 0; i < O.threads; i++) {
    loops[i].k = &k;
    loops[i].go = &go;
    if (pthread_create(&loops[i].th, NULL, loop_main, &loops[i]) != 0)
      die("pthread_create failed");
  }
  pthread_barrier_wait(&go);
  t0 = bu_now();
  for (int i = 0; i < O.threads; i++) {
    pthread_join(loops[i].th, NULL);
    count += loops[i].count;
  }
  t = bu_now() - t0;
  printf("{\"kind\":\"worker\",\"threads\":%d,\"kernels\":%lld,"
         "\"seconds\":%.6f}\n",
         O.threads, count, t);
  free(loops);
  return 0;
}

static int mode_worker(void)
{
  unsigned grid =
      (unsigned)((O.elems + BENCH_SMALL_BLOCK - 1) / BENCH_SMALL_BLOCK);
  char line[64];
  long long count = 0;
  hipStream_t s;
  float *x;
  int n = O.elems;
  void *args[2] = {&x, &n};
  double t0, t;
  kern_t k;

  device_open(O.device);
  kernel_build(O.device, BENCH_SMALL_SOURCE, BENCH_SMALL_NAME, &k);
  CHECK(hipMalloc((void **)&x, sizeof(float) * (size_t)n));
  CHECK(hipMemset(x, 0, sizeof(float) * (size_t)n));
  CHECK(hipStreamCreate(&s));
  for (int i = 0; i < 10; i++) {
    CHECK(hipModuleLaunchKernel(k.fn, grid, 1, 1, BENCH_SMALL_BLOCK, 1, 1, 0, s,
                                args, NULL));
    CHECK(hipStreamSynchronize(s));
  }
  puts("{\"kind\":\"ready\"}");
  fflush(stdout);
  if (fgets(line, sizeof(line), stdin) == NULL)
    return 0; /* hipd_bench gave up on us */
  t0 = bu_now();
  do {
    CHECK(hipModuleLaunchKernel(k.fn, grid, 1, 1, BENCH_SMALL_BLOCK, 1, 1, 0, s,
                                args, NULL));
    CHECK(hipStreamSynchronize(s));
    count++;
    t = bu_now() - t0;
  } while (t < O.seconds);
  printf("{\"kind\":\"worker\",\"kernels\":%lld,\"seconds\":%.6f}\n", count, t);
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(x));
  return 0;
}

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
  fprintf(f, "Usage: direct_hip MODE [OPTION]...\n"
             "The direct-HIP baselines of hipd_bench; results as JSON lines.\n"
             "MODE: info, rtt, launch, bw, compile, peer, worker or idle.\n"
             "  --device N     HIP device ordinal (0)\n"
             "  --iters N      iterations (rtt, launch, compile)\n"
             "  --warmup N     untimed iterations first (rtt, launch)\n"
             "  --sizes LIST   transfer sizes, K/M/G suffixes (bw)\n"
             "  --budget S     seconds per bandwidth figure (bw, peer)\n"
             "  --peer N       destination device (peer)\n"
             "  --bytes N      bytes per copy (peer)\n"
             "  --seconds S    length of the loop (worker), of the idle\n"
             "                 window (idle)\n"
             "  --elems N      floats the small kernel updates (worker)\n"
             "  --threads N    worker: N loops at once in this process, one\n"
             "                 stream each, started at once (no handshake)\n");
}

static int parse_int(const char *s, int min, int *out)
{
  char *end;
  long v = strtol(s, &end, 10);

  if (end == s || *end != '\0' || v < min || v > 1 << 30)
    return -1;
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"device", required_argument, NULL, 'd'},
      {"iters", required_argument, NULL, 'i'},
      {"warmup", required_argument, NULL, 'w'},
      {"sizes", required_argument, NULL, 'z'},
      {"budget", required_argument, NULL, 'b'},
      {"peer", required_argument, NULL, 'p'},
      {"bytes", required_argument, NULL, 'y'},
      {"seconds", required_argument, NULL, 's'},
      {"elems", required_argument, NULL, 'e'},
      {"threads", required_argument, NULL, 't'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c, bad = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2;
  }
  O.mode = argv[1];
  optind = 2;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'd':
      bad |= parse_int(optarg, 0, &O.device);
      break;
    case 'i':
      bad |= parse_int(optarg, 1, &O.iters);
      break;
    case 'w':
      bad |= parse_int(optarg, 0, &O.warmup);
      break;
    case 'z':
      O.nsizes = bu_parse_size_list(optarg, O.sizes, MAX_SIZES);
      bad |= O.nsizes < 0;
      break;
    case 'b':
      O.budget = atof(optarg);
      bad |= !(O.budget >= 0);
      break;
    case 'p':
      bad |= parse_int(optarg, 0, &O.peer);
      break;
    case 'y':
      bad |= util_parse_size(optarg, 1, UINT64_MAX, &O.bytes) != 0;
      break;
    case 's':
      O.seconds = atof(optarg);
      bad |= !(O.seconds > 0);
      break;
    case 'e':
      bad |= parse_int(optarg, 1, &O.elems);
      break;
    case 't':
      bad |= parse_int(optarg, 1, &O.threads);
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      bad = 1;
    }
  }
  if (bad || optind != argc) {
    usage(stderr);
    die("bad options");
  }
  if (strcmp(O.mode, "info") == 0)
    return mode_info();
  if (strcmp(O.mode, "rtt") == 0)
    return mode_rtt();
  if (strcmp(O.mode, "launch") == 0)
    return mode_launch();
  if (strcmp(O.mode, "bw") == 0)
    return mode_bw();
  if (strcmp(O.mode, "compile") == 0)
    return mode_compile();
  if (strcmp(O.mode, "peer") == 0)
    return mode_peer();
  if (strcmp(O.mode, "idle") == 0)
    return mode_idle();
  if (strcmp(O.mode, "worker") == 0)
    return O.threads > 1 ? mode_worker_threads() : mode_worker();
  die("unknown mode '%s'", O.mode);
}
