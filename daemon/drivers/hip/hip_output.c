/* SPDX-License-Identifier: MIT */
/* daemon/drivers/hip/hip_output.c: GPU kernels' printf, kept for their
 * sessions (driver_output.h) instead of the process's standard output.
 *
 * The runtime copies what kernels printed from the device's printf buffer
 * to stdout at its own synchronisation points: at the start of the next
 * launch and in a stream or device synchronisation (CUDA's documented
 * flush points; ROCm's hostcall prints as the kernel runs). So stdout is a
 * memfd of ours (hip_output_init), and after those points the driver
 * moves what it holds to the sink of the latest launch of a kernel that
 * can print (its code object mentions printf): with --isolation session
 * that is the session's own; with uid, one of the tenant's sessions.
 * Nothing is done for workers that never launched such a kernel, so the
 * common path costs one atomic load.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hip_internal.h"

/* The most moved at one point; the rest is counted as dropped. */
#define DRAIN_MAX (64u << 10)

static struct {
  pthread_mutex_t mu;
  int fd;             /* the memfd on stdout, -1: not captured */
  atomic_int active;  /* a kernel that prints was launched */
  drv_output_t *last; /* (mu) the latest such launch's sink, a reference */
} hout = {PTHREAD_MUTEX_INITIALIZER, -1, 0, NULL};

void hip_output_init(void)
{
  int fd;

  if (hout.fd >= 0)
    return;
  if ((fd = memfd_create("hipd-gpu-printf", MFD_CLOEXEC)) < 0)
    return; /* then the runtime prints to the process's stdout */
  fflush(stdout);
  if (dup2(fd, STDOUT_FILENO) < 0) {
    close(fd);
    return;
  }
  hout.fd = fd;
}

/* Move what stdout holds to hout.last. Under hout.mu. */
static void drain(void)
{
  struct stat st;

  /* The runtime writes through stdio: its lock keeps it out meanwhile. */
  flockfile(stdout);
  fflush(stdout);
  if (fstat(hout.fd, &st) == 0 && st.st_size > 0) {
    size_t want =
        (uint64_t)st.st_size < DRAIN_MAX ? (size_t)st.st_size : DRAIN_MAX;
    char *buf = malloc(want);
    ssize_t n = buf != NULL ? pread(hout.fd, buf, want, 0) : -1;
    size_t got = n > 0 ? (size_t)n : 0;
    drv_output_append(hout.last, buf, got, (uint64_t)st.st_size - got);
    free(buf);
    (void)!ftruncate(hout.fd, 0);
    (void)lseek(hout.fd, 0, SEEK_SET);
  }
  funlockfile(stdout);
}

void hip_output_launched(int prints, drv_output_t *out)
{
  if (hout.fd < 0 || (!prints && !atomic_load(&hout.active)))
    return;
  pthread_mutex_lock(&hout.mu);
  /* The launch flushed what earlier kernels printed: theirs. */
  drain();
  if (prints && out != hout.last) {
    drv_output_ref(out);
    drv_output_unref(hout.last);
    hout.last = out;
    atomic_store(&hout.active, 1);
  }
  pthread_mutex_unlock(&hout.mu);
}

void hip_output_synced(void)
{
  if (hout.fd < 0 || !atomic_load(&hout.active))
    return;
  pthread_mutex_lock(&hout.mu);
  drain();
  pthread_mutex_unlock(&hout.mu);
}
