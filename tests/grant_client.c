/* SPDX-License-Identifier: MIT */
/* tests/grant_client.c: a client for tests/check_slurm.sh, run inside
 * Slurm jobs (as the job's user) and outside them.
 *
 *   grant_client [--kernel] [--alloc DEV:BYTES]... [--hold FILE]
 *
 * (DEV -1: the first device it sees.)
 * Connects to $HIPD_SOCKET, prints the devices it sees ("devices 1: 0"),
 * does each allocation in order and prints its answer ("alloc 0 65536:
 * OK" or "alloc 0 65536: EQUOTA: ..."), compiles and launches a kernel
 * twice on the first device it sees with --kernel ("kernel: OK"), then
 * with --hold prints "holding" and keeps its session (and its buffers)
 * until FILE exists or the connection ends ("ended: EDISCONNECTED ...").
 * Exit status: 0; 4 when the daemon refused the connection (EPERM); 3
 * when it could not connect otherwise; 5 when the held session was
 * closed under it; 1 when a kernel failed. Allocations that fail do not
 * change the status: the output says. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hipd.h"

static const char *kernel_src =
    "extern \"C\" __global__ void inc(int *p) { p[threadIdx.x] += 1; }\n";

static int kernel(hipd_conn_t *c, int dev)
{
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
  int in[64] = {0};
  hipd_buffer_t b;
  hipd_kernel_t k;
  hipd_args_t *args;
  int rc;

  if ((rc = hipd_mem_alloc(c, dev, sizeof(in), "byte", &b)) != 0 ||
      (rc = hipd_mem_write(c, b, 0, in, sizeof(in))) != 0 ||
      (rc = hipd_kernel_compile_cached(c, dev, kernel_src, "inc", NULL, &k,
                                       NULL)) != 0)
    return rc;
  if ((args = hipd_args_new()) == NULL)
    return HIPD_ENOMEM;
  rc = hipd_args_buffer(args, b, 0);
  for (int i = 0; rc == 0 && i < 2; i++)
    rc = hipd_kernel_launch(c, k, grid, block, 0, HIPD_STREAM_NULL, args);
  hipd_args_free(args);
  if (rc == 0)
    rc = hipd_mem_free(c, b);
  return rc;
}

int main(int argc, char **argv)
{
  const char *hold = NULL;
  hipd_conn_t *c = NULL;
  hipd_info_t *list = NULL;
  int rc, n, first = -1, want_kernel = 0;

  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--kernel") == 0)
      want_kernel = 1;
    else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
      hold = argv[++i];
  rc = hipd_connect2(NULL, "grant_client", &c);
  if (rc != 0) {
    printf("connect: %s: %s\n", hipd_err_name(rc), hipd_last_error(NULL));
    return rc == HIPD_EPERM ? 4 : 3;
  }
  if ((rc = hipd_device_list(c, &list)) != 0) {
    printf("device.list: %s: %s\n", hipd_err_name(rc), hipd_last_error(c));
    return 3;
  }
  n = hipd_info_len(list, "");
  printf("devices %d:", n);
  for (int i = 0; i < n; i++) {
    char path[32];
    int64_t id = -1;
    snprintf(path, sizeof(path), "%d.id", i);
    hipd_info_int(list, path, &id);
    if (first < 0)
      first = (int)id;
    printf(" %lld", (long long)id);
  }
  printf("\n");
  hipd_info_free(list);
  for (int i = 1; i < argc; i++) {
    int dev;
    unsigned long long bytes;
    hipd_buffer_t b;
    if (strcmp(argv[i], "--alloc") != 0 || i + 1 >= argc)
      continue;
    if (sscanf(argv[++i], "%d:%llu", &dev, &bytes) != 2) {
      printf("--alloc %s: not DEV:BYTES\n", argv[i]);
      return 2;
    }
    if (dev < 0)
      dev = first;
    rc = hipd_mem_alloc(c, dev, bytes, "byte", &b);
    if (rc == 0)
      printf("alloc %d %llu: OK\n", dev, bytes);
    else
      printf("alloc %d %llu: %s: %s\n", dev, bytes, hipd_err_name(rc),
             hipd_last_error(c));
  }
  if (want_kernel) {
    rc = first >= 0 ? kernel(c, first) : HIPD_ENODEV;
    printf("kernel: %s%s%s\n", rc == 0 ? "OK" : hipd_err_name(rc),
           rc ? ": " : "", rc ? hipd_last_error(c) : "");
    if (rc != 0)
      return 1;
  }
  if (hold != NULL) {
    printf("holding\n");
    while (access(hold, F_OK) != 0) {
      char buf[8];
      size_t got;
      if ((rc = hipd_ping(c, "x", 1, buf, sizeof(buf), &got)) != 0) {
        printf("ended: %s: %s\n", hipd_err_name(rc), hipd_last_error(c));
        hipd_close(c);
        return 5;
      }
      usleep(100 * 1000);
    }
  }
  hipd_close(c);
  return 0;
}
