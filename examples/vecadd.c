/* SPDX-License-Identifier: MIT */
/* examples/vecadd.c: compile a HIP kernel through hipd, run it on every
 * device the daemon serves, check the result, and show what the compiled-
 * kernel cache saves.
 *
 *   vecadd [SOCKET]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipd.h"

static const char *source =
    "extern \"C\" __global__ void vecadd(const float *a, const float *b,\n"
    "                                    float *c, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    c[i] = a[i] + b[i];\n"
    "}\n";

static double now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int fail(hipd_conn_t *c, const char *what, int rc)
{
  fprintf(stderr, "vecadd: %s: %s (%s)\n", what, hipd_last_error(c),
          hipd_err_name(rc));
  return 1;
}

/* Compile (first fresh, then through the cache), run and check on @p dev. */
static int run_on(hipd_conn_t *c, int dev, int n)
{
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *out = malloc(bytes);
  hipd_buffer_t da = HIPD_BUFFER_NULL, db = HIPD_BUFFER_NULL,
                dc = HIPD_BUFFER_NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL, k2 = HIPD_KERNEL_NULL;
  hipd_info_t *info = NULL, *dinfo = NULL;
  hipd_args_t *args = hipd_args_new();
  uint32_t block[3] = {256, 1, 1}, grid[3] = {(uint32_t)(n + 255) / 256, 1, 1};
  hipd_info_t *first_info = NULL;
  hipd_kernel_t k0 = HIPD_KERNEL_NULL;
  const char *name = "?", *cache = "?", *first_cache = "?";
  double t0, first, cold, hit;
  int rc, bad = 0;

  for (int i = 0; i < n; i++) {
    a[i] = (float)i;
    b[i] = 2.0f * (float)i;
  }
  if ((rc = hipd_device_get(c, dev, &dinfo)) != 0)
    return fail(c, "device.get", rc);
  hipd_info_str(dinfo, "name", &name, NULL);
  /* Through the cache first: after a daemon restart this comes from disk. */
  t0 = now_ms();
  if ((rc = hipd_kernel_compile_cached(c, dev, source, "vecadd", NULL, &k0,
                                       &first_info)))
    return fail(c, "kernel.compile_cached", rc);
  first = now_ms() - t0;
  hipd_info_str(first_info, "cache", &first_cache, NULL);
  t0 = now_ms();
  if ((rc = hipd_kernel_compile(c, dev, source, "vecadd", NULL, &k, NULL)))
    return fail(c, "kernel.compile", rc);
  cold = now_ms() - t0;
  t0 = now_ms();
  if ((rc = hipd_kernel_compile_cached(c, dev, source, "vecadd", NULL, &k2,
                                       &info)))
    return fail(c, "kernel.compile_cached", rc);
  hit = now_ms() - t0;
  hipd_info_str(info, "cache", &cache, NULL);

  if ((rc = hipd_mem_alloc(c, dev, (uint64_t)n, "float32", &da)) ||
      (rc = hipd_mem_alloc(c, dev, (uint64_t)n, "float32", &db)) ||
      (rc = hipd_mem_alloc(c, dev, (uint64_t)n, "float32", &dc)))
    return fail(c, "mem.alloc", rc);
  if ((rc = hipd_mem_write(c, da, 0, a, bytes)) ||
      (rc = hipd_mem_write(c, db, 0, b, bytes)))
    return fail(c, "mem.write", rc);
  hipd_args_buffer(args, da, 0);
  hipd_args_buffer(args, db, 0);
  hipd_args_buffer(args, dc, 0);
  hipd_args_i32(args, n);
  if ((rc = hipd_kernel_launch(c, k2, grid, block, 0, HIPD_STREAM_NULL, args)))
    return fail(c, "kernel.launch", rc);
  if ((rc = hipd_mem_read(c, dc, 0, out, bytes)))
    return fail(c, "mem.read", rc);
  for (int i = 0; i < n; i++)
    if (fabsf(out[i] - 3.0f * (float)i) > 1e-3f)
      bad++;
  printf("device %d (%s):\n", dev, name);
  printf("  first compile_cached %.3f ms (%s)\n", first, first_cache);
  printf("  cold compile %.1f ms, cached compile %.3f ms (%s): %.0fx\n", cold,
         hit, cache, hit > 0 ? cold / hit : 0.0);
  printf("  vecadd of %d floats: %s\n", n, bad ? "WRONG" : "correct");
  hipd_mem_free(c, da);
  hipd_mem_free(c, db);
  hipd_mem_free(c, dc);
  hipd_kernel_destroy(c, k);
  hipd_kernel_destroy(c, k2);
  hipd_kernel_destroy(c, k0);
  hipd_info_free(first_info);
  hipd_args_free(args);
  hipd_info_free(info);
  hipd_info_free(dinfo);
  free(a);
  free(b);
  free(out);
  return bad != 0;
}

int main(int argc, char **argv)
{
  hipd_conn_t *c;
  int rc, ndev = 0, failed = 0;

  if ((rc = hipd_connect(argc > 1 ? argv[1] : NULL, &c)) != 0) {
    fprintf(stderr, "vecadd: %s\n", hipd_last_error(NULL));
    return 1;
  }
  if ((rc = hipd_device_count(c, &ndev)) != 0)
    return fail(c, "device.count", rc);
  for (int d = 0; d < ndev; d++)
    failed |= run_on(c, d, 1 << 20);
  hipd_close(c);
  return failed;
}
