/* SPDX-License-Identifier: MIT */
/* tests/lib/testutil.h: small helpers shared by the integration tests (the
 * programs that start a real hipd through tests/lib/harness.c), compiled
 * once in tests/lib/testutil.c (libhipdtest). Every function fails the
 * running test on an unexpected error unless it says it returns one.
 *
 * A program may define, before including this header:
 *   TESTUTIL_CLIENT      the client name connect_to() gives the daemon
 *                        (its log names it), and
 *   TESTUTIL_TIMEOUT_MS  the call timeout of those connections;
 *   TESTUTIL_MAX_DEVICES the most devices device_count() accepts (for
 *                        arrays of that size).
 */
#ifndef HIPD_TESTS_TESTUTIL_H
#define HIPD_TESTS_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hipd.h"
#include "run.h"

/* Assert that a call returns @p want, naming the device (a variable `dev`
 * in scope), the call, its error and the daemon's message. */
#define EXPECT(conn, expr, want)                                               \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    ck_assert_msg(rc_ == (want), "device %d: %s -> %s (%s), expected %s", dev, \
                  #expr, rc_ == 0 ? "0" : hipd_err_name(rc_),                  \
                  hipd_last_error(conn),                                       \
                  (want) == 0 ? "0" : hipd_err_name(want));                    \
  } while (0)
#define OK(conn, expr) EXPECT(conn, expr, 0)

/* Connect to daemon @p d as @p name; a hung daemon fails the test after
 * @p timeout_ms instead of hanging it. */
hipd_conn_t *connect_named(const harness_daemon_t *d, const char *name,
                           int timeout_ms);

#ifdef TESTUTIL_CLIENT
#ifndef TESTUTIL_TIMEOUT_MS
#define TESTUTIL_TIMEOUT_MS 60000
#endif
/* Connect to @p d as this program (TESTUTIL_CLIENT), failing the test on
 * error. */
static inline hipd_conn_t *connect_to(const harness_daemon_t *d)
{
  return connect_named(d, TESTUTIL_CLIENT, TESTUTIL_TIMEOUT_MS);
}
#endif

/* A ping with a 6-byte payload, which must come back unchanged. */
void ping_ok(hipd_conn_t *conn);

/* Stop daemon *@p d (if any) and free it; its log is printed if it exited
 * with an error, and the test then fails. */
void stop_checked(harness_daemon_t **d);

/* The daemon's device count, which these suites need to be at least 2. */
int device_count_min2(hipd_conn_t *conn);

/* The daemon's device count: at least 2, and at most TESTUTIL_MAX_DEVICES
 * where the program defines it. */
static inline int device_count(hipd_conn_t *conn)
{
  int n = device_count_min2(conn);

#ifdef TESTUTIL_MAX_DEVICES
  ck_assert_int_le(n, TESTUTIL_MAX_DEVICES);
#endif
  return n;
}

/* calloc() that fails the test instead of returning NULL (0 bytes: 1). */
void *xmalloc(size_t n);

/* A new kernel argument list. */
hipd_args_t *args_new(void);

/* Fields of a device.get, daemon.info... record; a missing field or one of
 * another type fails the test. */
int64_t info_int(const hipd_info_t *info, const char *path);
uint64_t info_uint(const hipd_info_t *info, const char *path);
double info_double(const hipd_info_t *info, const char *path);
int info_bool(const hipd_info_t *info, const char *path);
const char *info_str(const hipd_info_t *info, const char *path);
/* The integer at @p path, or -1 if there is none: for children that report
 * with REQUIRE (tests/lib/users.h) instead of failing the test. */
int64_t info_get(const hipd_info_t *info, const char *path);

/* Is @p s one of the strings of the array at @p path? */
int info_has_str(const hipd_info_t *info, const char *path, const char *s);

/* Is device @p dev the host (a CPU device)? */
int device_is_cpu(hipd_conn_t *conn, int dev);

/* ------------------------------------------------------------ GPU targets */

/* The HIP platform this hipd compiles for: "amd" (feature hip-amd: no GPU
 * is needed to compile for one), "nvidia" (hip-nvidia), or NULL when it has
 * no HIP compiler. */
const char *testutil_hip_platform(hipd_conn_t *conn);
/* The GPU target to compile for in @p arch: gfx90a on an AMD build, device
 * 0's architecture on an NVIDIA build where device 0 is a GPU; "" when
 * there is none. */
void testutil_gpu_arch(hipd_conn_t *conn, char *arch, size_t size);

/* ----------------------------------------------------------- kernels */

/* fill(int *p, int v, int n): p[i] = v + i for i < n. */
extern const char TESTUTIL_FILL_SRC[];
/* fault(int *p, int n): writes to an address no allocation has: an
 * illegal address on a GPU, a SIGSEGV in the CPU device's runner. */
extern const char TESTUTIL_FAULT_SRC[];

/* ------------------------------------------------------ bytes and files */

/* Fill @p buf with xorshift32 bytes from state @p x (never 0), each the
 * state shifted right by @p shift. */
void testutil_fill_xorshift(void *buf, size_t n, uint32_t x, int shift);
/* Make a fresh directory "PREFIX-XXXXXX" under $HIPD_TEST_TMP (else /tmp)
 * in @p buf. @return 0 or -1 (errno set; @p buf names what failed). */
int testutil_tmpdir(char *buf, size_t size, const char *prefix);
/* Remove @p dir and everything below it (not following links); "" is
 * ignored. */
void testutil_rmtree(const char *dir);

/* ------------------------------------------------------------- programs */

/* A daemon on the CPU devices (--cpu-devices 2) with the kernel cache
 * @p cache_dir, which must start. */
harness_daemon_t *testutil_start_cached(const char *cache_dir);
/* main() of a program whose shared daemon keeps its kernels in a cache
 * directory of the run: the harness (@p name), a fresh directory
 * "PREFIX-XXXXXX" in @p cache, the suite of @p make_suite run, then the
 * directory removed. @return main's exit status. */
int testutil_main_cached(const char *name, const char *prefix, char *cache,
                         size_t size, Suite *(*make_suite)(void));

/* How many descriptors process @p pid has open (/proc/PID/fd), or -1. */
int proc_open_fds(pid_t pid);
/* The same once it has not moved for 200 ms (a daemon's start-up and
 * background work open and close descriptors), or after @p max_ms. */
int proc_open_fds_settled(pid_t pid, int max_ms);

/* What /proc/PID/stat says of a process. */
typedef struct {
  char comm[64];   /* its name */
  char state;      /* R, S, D, Z (a zombie, gone but for its reaping)... */
  pid_t ppid;      /* its parent */
  long long utime; /* CPU time in user space, in clock ticks */
  long long stime; /* and in the kernel */
} proc_stat_t;

/* Read /proc/@p pid/stat into @p st. @return 0, or -1 if there is no such
 * process (or its line cannot be parsed). */
int proc_stat_read(pid_t pid, proc_stat_t *st);
/* Is @p pid @p ancestor or below it (its parents, read in /proc)? */
int proc_in_tree(pid_t pid, pid_t ancestor);
/* A number of /proc/@p pid/status, "@p key: N..." ("Threads", "VmRSS" in
 * kB), or -1. */
long long proc_status_value(pid_t pid, const char *key);

/* A thread of a process tree, and its context switches so far. */
typedef struct {
  pid_t pid, tid;
  char comm[32];       /* the process's name */
  char name[32];       /* the thread's */
  long long waits;     /* voluntary_ctxt_switches: times it slept */
  long long preempted; /* nonvoluntary_ctxt_switches */
} proc_thread_t;

/* The threads of process @p pid, at most @p max into @p out. @return how
 * many, or -1 if they cannot be listed. */
int proc_threads(pid_t pid, proc_thread_t *out, int max);
/* The threads of @p root and of every process below it, at most @p max
 * into @p out. @return how many, or -1 if @p root cannot be read. */
int proc_tree_threads(pid_t root, proc_thread_t *out, int max);

#endif
