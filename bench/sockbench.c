/* SPDX-License-Identifier: MIT */
/* bench/sockbench.c: see sockbench.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"
#include "procs.h"
#include "sockbench.h"

#define CHUNK ((size_t)1 << 20)

typedef struct {
  int fd;        /* the peer's end */
  size_t msg;    /* ping-pong: bytes per message; 0 for bulk */
  uint64_t bulk; /* bulk: bytes per transfer */
} peer_t;

static int read_full(int fd, void *buf, size_t len)
{
  char *p = buf;

  while (len > 0) {
    ssize_t n = read(fd, p, len);

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* The peer: echo messages, or swallow transfers and acknowledge each,
 * until the bench closes its end. */
static int peer_main(void *arg, int in_fd, int out_fd)
{
  peer_t *pr = arg;
  size_t cap = pr->msg ? pr->msg : CHUNK;
  char *buf = malloc(cap);

  (void)in_fd;
  (void)out_fd;
  if (buf == NULL)
    return 1;
  for (;;) {
    if (pr->msg) {
      if (read_full(pr->fd, buf, pr->msg) != 0)
        return 0;
      if (write_full(pr->fd, buf, pr->msg) != 0)
        return 1;
    } else {
      uint64_t left = pr->bulk;

      while (left > 0) {
        ssize_t n = read(pr->fd, buf, left < cap ? (size_t)left : cap);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0)
          return 0;
        left -= (uint64_t)n;
      }
      if (write_full(pr->fd, "k", 1) != 0)
        return 1;
    }
  }
}

/* Start the peer on one end of a new socket pair; *@p fd gets the other. */
static int peer_start(proc_t *proc, peer_t *pr, int *fd, char *err,
                      size_t errsz)
{
  int sv[2];

  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(err, errsz, "socketpair: %s", strerror(errno));
    return -1;
  }
  pr->fd = sv[1];
  if (proc_fork(proc, peer_main, pr, sv[1]) != 0) {
    snprintf(err, errsz, "fork: %s", strerror(errno));
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  close(sv[1]);
  *fd = sv[0];
  return 0;
}

static void peer_stop(proc_t *proc, int fd)
{
  close(fd);
  proc_wait(proc, 5);
}

int sock_pingpong(size_t msg, int iters, int warmup, double *us_median,
                  double *us_mean, char *err, size_t errsz)
{
  peer_t pr = {.msg = msg};
  double *us = malloc(sizeof(double) * (size_t)iters);
  char *buf = calloc(1, msg);
  proc_t proc;
  int fd, rc = -1;

  if (us == NULL || buf == NULL) {
    snprintf(err, errsz, "out of memory");
    goto out;
  }
  if (peer_start(&proc, &pr, &fd, err, errsz) != 0)
    goto out;
  for (int i = 0; i < warmup + iters; i++) {
    double t0 = bu_now();

    if (write_full(fd, buf, msg) != 0 || read_full(fd, buf, msg) != 0) {
      snprintf(err, errsz, "ping-pong: the peer went away: %s",
               strerror(errno));
      peer_stop(&proc, fd);
      goto out;
    }
    if (i >= warmup)
      us[i - warmup] = (bu_now() - t0) * 1e6;
  }
  peer_stop(&proc, fd);
  *us_mean = bu_mean(us, (size_t)iters);
  *us_median = bu_median(us, (size_t)iters);
  rc = 0;
out:
  free(us);
  free(buf);
  return rc;
}

/* One bulk transfer: @p bytes in chunks, then the peer's byte. */
static int transfer(int fd, const char *buf, size_t chunk, uint64_t bytes)
{
  char ack;

  while (bytes > 0) {
    size_t len = bytes < chunk ? (size_t)bytes : chunk;

    if (write_full(fd, buf, len) != 0)
      return -1;
    bytes -= len;
  }
  return read_full(fd, &ack, 1);
}

int sock_bulk(uint64_t bytes, double budget, double *gbps, char *err,
              size_t errsz)
{
  peer_t pr = {.bulk = bytes};
  size_t chunk = bytes < CHUNK ? (size_t)bytes : CHUNK;
  char *buf = calloc(1, chunk);
  double t0, t;
  proc_t proc;
  int fd, n = 0;

  if (buf == NULL) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  if (peer_start(&proc, &pr, &fd, err, errsz) != 0) {
    free(buf);
    return -1;
  }
  if (transfer(fd, buf, chunk, bytes) != 0)
    goto broken;
  t0 = bu_now();
  do {
    if (transfer(fd, buf, chunk, bytes) != 0)
      goto broken;
    n++;
    t = bu_now() - t0;
  } while (t < budget || n < 3);
  peer_stop(&proc, fd);
  free(buf);
  *gbps = (double)bytes * n / t / 1e9;
  return 0;
broken:
  snprintf(err, errsz, "bulk: the peer went away: %s", strerror(errno));
  peer_stop(&proc, fd);
  free(buf);
  return -1;
}
