/* SPDX-License-Identifier: MIT */
/* examples/xcopy.c: copy a buffer between every pair of devices the daemon
 * serves, check it byte for byte, and print the bandwidth of each path.
 *
 *   xcopy [SOCKET] [MIB]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipd.h"

static double now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
  size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 256, len = mib << 20;
  unsigned char *in = malloc(len), *out = malloc(len);
  hipd_buffer_t buf[16] = {0};
  hipd_conn_t *c;
  int n = 0, rc, bad = 0;

  if (in == NULL || out == NULL)
    return 1;
  if (hipd_connect(argc > 1 ? argv[1] : NULL, &c) != 0) {
    fprintf(stderr, "xcopy: %s\n", hipd_last_error(NULL));
    return 1;
  }
  hipd_device_count(c, &n);
  if (n > 16)
    n = 16;
  for (size_t i = 0; i < len; i++)
    in[i] = (unsigned char)(i * 131 + 7);
  for (int d = 0; d < n; d++)
    if ((rc = hipd_mem_alloc(c, d, len, "byte", &buf[d])) != 0) {
      fprintf(stderr, "xcopy: device %d: %s\n", d, hipd_last_error(c));
      return 1;
    }
  printf("%zu MiB copies (mem.copy, synchronous):\n", mib);
  for (int s = 0; s < n; s++) {
    for (int d = 0; d < n; d++) {
      double t0, t;
      if (s == d)
        continue;
      hipd_mem_write(c, buf[s], 0, in, len);
      hipd_mem_memset(c, buf[d], 0, len, 0);
      hipd_mem_copy(c, buf[d], 0, buf[s], 0, len); /* warm-up */
      t0 = now_s();
      rc = hipd_mem_copy(c, buf[d], 0, buf[s], 0, len);
      t = now_s() - t0;
      if (rc != 0) {
        fprintf(stderr, "xcopy: %d -> %d: %s\n", s, d, hipd_last_error(c));
        return 1;
      }
      hipd_mem_read(c, buf[d], 0, out, len);
      int ok = memcmp(in, out, len) == 0;
      bad += !ok;
      printf("  device %d -> %d: %7.2f GB/s  %s\n", s, d, len / t / 1e9,
             ok ? "identical" : "DIFFERENT");
    }
  }
  hipd_close(c);
  free(in);
  free(out);
  return bad != 0;
}
