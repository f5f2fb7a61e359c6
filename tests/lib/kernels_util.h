/* SPDX-License-Identifier: MIT */
/* tests/lib/kernels_util.h: what the check_kernels_* programs share: the
 * kernels, the helpers that compile, fill and launch them, the cache
 * directories, and the daemon of the TCases that share one.
 *
 * Those programs test kernels end to end: compile, launch, check the
 * results, through libhipd against a real hipd (tests/lib/harness.c) with the
 * real host compiler and the real CPU kernel runner:
 *   check_kernels_run.c      kernels that run and what they compute;
 *   check_kernels_errors.c   compile errors, launch and argument limits,
 *                            signatures, destroy, and compile_for targets;
 *   check_kernels_crashes.c  kernels that crash, sessions killed in a
 *                            launch, and the CPU kernel timeout;
 *   check_kernels_cache.c    the kernel cache on disk, across daemons and
 *                            under concurrent compiles.
 *
 * The kernels are written in the HIP/CUDA subset that both the CPU device
 * and a GPU take (hipd_cpu_device.h), and every kernel test runs on every
 * device the daemon serves: it is started with --cpu-devices 2, and on a GPU
 * host the HIP devices come first and are covered the same way. Tests that
 * only make sense on one kind of device say why where they skip.
 *
 * A CPU-device compile takes about a second, so the daemons of a program's
 * kernel TCases share one cache directory (made fresh for its run): each
 * kernel is compiled once, later daemons find it on disk. The cache tests
 * use directories of their own. No assertion depends on how long anything
 * takes. Compiled once in tests/lib/kernels_util.c (libhipdtest_kernels).
 */
#ifndef HIPD_TESTS_KERNELS_UTIL_H
#define HIPD_TESTS_KERNELS_UTIL_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#define MAX_DEVICES 64
#define TESTUTIL_CLIENT "check_kernels"
#define TESTUTIL_TIMEOUT_MS 120000
#define TESTUTIL_MAX_DEVICES MAX_DEVICES
#include "testutil.h"

/* The daemon of the TCases that share one (started by an unchecked
 * fixture, in check's runner process), and the cache directory all such
 * daemons use (made by kernels_main()). */
extern harness_daemon_t *shared;
extern char shared_cache[256];

/* --------------------------------------------------------------- kernels */

extern const char VECADD_SRC[];
/* A tree reduction in shared memory with barriers: one partial sum per
 * block, and the total through an atomic. */
extern const char REDUCE_SRC[];
/* A histogram: per-block bins in shared memory, merged with atomics. */
extern const char HIST_SRC[];
/* Every thread writes its global (x, y, z) index and the grid's shape. */
extern const char INDEX_SRC[];
/* Dynamic shared memory: each block reverses its slice through it. */
extern const char DYN_SRC[];
/* Scalars of every width: each must arrive whole. */
extern const char MIX_SRC[];
/* C++ names: a plain (mangled) kernel and a template. */
extern const char CXX_SRC[];
/* Thread @p which writes through @p bad (NULL). The address comes in as a
 * number so that the compiler cannot see it is NULL (GCC drops a store
 * through a pointer it knows to be NULL, even a volatile one). */
extern const char CRASH_SRC[];
/* An error on line 3. */
extern const char BROKEN_SRC[];

/* ---------------------------------------------------------------- checks */

/* Does a compiler log point at line 3? GCC, clang and hiprtc write
 * "kernel.hip:3:10: error", NVRTC "kernel.hip(3): error". */
int names_line_3(const char *log);

/* A capability of device @p dev ("capabilities.<name>"). */
int64_t device_cap(hipd_conn_t *conn, int dev, const char *name);

/* The first CPU device, or -1. */
int first_cpu_device(hipd_conn_t *conn);

/* A grid or block of one. */
extern const uint32_t ONE[3];

/* Compile @p name of @p src through the cache on @p dev; *@p info (if not
 * NULL) gets the record. */
hipd_kernel_t compile(hipd_conn_t *conn, int dev, const char *src,
                      const char *name, hipd_info_t **info);

/* A buffer of @p n floats on @p dev holding @p data (NULL: zeros). */
hipd_buffer_t float_buffer(hipd_conn_t *conn, int dev, size_t n,
                           const float *data);

/* The grid that covers @p n items with blocks of @p block. */
static inline uint32_t blocks_for(size_t n, uint32_t block)
{
  return (uint32_t)((n + block - 1) / block);
}

/* Vector add with kernel @p k on @p dev (its buffers fresh), on @p stream
 * (0: the default one); checks every element. */
void vecadd_run(hipd_conn_t *conn, int dev, hipd_kernel_t k, int n,
                hipd_stream_t stream);

/* ------------------------------------------------------ cache directories */

/* A fresh directory for a daemon's --cache-dir, in @p buf. */
void cache_dir_make(char *buf, size_t size);
/* Remove @p dir and what it holds ("" is ignored). */
void cache_dir_remove(const char *dir);
/* The number of entries (*.hkc) in @p dir; the last one's path in
 * @p path. */
int cache_entries(const char *dir, char *path, size_t size);

/* A daemon on the CPU devices with the cache @p dir, which must start. */
harness_daemon_t *start_with_cache(const char *dir);
/* The same with --cache-warm @p warm ("0": a restart loads nothing ahead
 * of the requests, which then read the disk). */
harness_daemon_t *start_with_cache_warm(const char *dir, const char *warm);
/* Stop @p d, which must exit 0, and free it. */
void stop_daemon(harness_daemon_t *d);
/* The fixture of the shared daemon (on shared_cache). */
void shared_setup(void);
void shared_teardown(void);

/* main() of a check_kernels_* program: the harness, a private shared cache
 * directory for the suite's shared daemon, the suite run, and cleanup.
 * @return main's exit status. */
int kernels_main(const char *name, Suite *(*make_suite)(void));

#endif
