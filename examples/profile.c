/* SPDX-License-Identifier: MIT */
/* examples/profile.c: time a session's transfers and launches on the
 * device.
 *
 * While profiling is on (profile.enable), hipd times each memory operation
 * and kernel launch of this session between two device events and keeps a
 * record of it; session.profile returns the records. Note that a timed
 * operation waits for the device, so while profiling is on the _async
 * calls are answered once their work is done.
 *
 *   examples/profile [SOCKET]
 *
 * Prints one line per record and exits 0 when the four operations below
 * were recorded, in order, 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hipd.h>

#define N (1 << 16)

static const char square_src[] =
    "extern \"C\" __global__ void square(float *p, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] = p[i] * p[i];\n"
    "}\n";

static hipd_conn_t *conn;

static void check(int rc, const char *what)
{
  if (rc >= 0)
    return;
  fprintf(stderr, "profile: %s: %s: %s\n", what, hipd_err_name(rc),
          hipd_last_error(conn));
  hipd_close(conn);
  exit(1);
}

int main(int argc, char **argv)
{
  static float host[N];
  static const char *const expected[] = {"mem.memset", "mem.write",
                                         "kernel.launch", "mem.read"};
  const int dev = HIPD_DEVICE_CURRENT;
  const uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
  hipd_buffer_t buf;
  hipd_stream_t st;
  hipd_kernel_t k;
  hipd_args_t *args;
  hipd_info_t *prof;
  int64_t dropped = -1;
  int n, bad = 0;

  for (int i = 0; i < N; i++)
    host[i] = (float)(i % 100);
  if (hipd_connect(argc > 1 ? argv[1] : NULL, &conn) < 0) {
    fprintf(stderr, "profile: connect: %s\n", hipd_last_error(NULL));
    return 1;
  }
  /* Set up first: compiling and allocating are not timed anyway. */
  check(hipd_kernel_compile_cached(conn, dev, square_src, "square", NULL, &k,
                                   NULL),
        "kernel.compile_cached");
  check(hipd_mem_alloc(conn, dev, N, "float32", &buf), "mem.alloc");
  check(hipd_stream_create(conn, dev, &st), "stream.create");
  args = hipd_args_new();
  if (args == NULL)
    check(HIPD_ENOMEM, "hipd_args_new");
  check(hipd_args_buffer(args, buf, 0), "args");
  check(hipd_args_i32(args, N), "args");

  /* The profiled part: four operations, on the default stream and on st. */
  check(hipd_profile_enable(conn), "profile.enable");
  check(hipd_mem_memset(conn, buf, 0, sizeof(host), 0), "mem.memset");
  check(hipd_mem_write_async(conn, buf, 0, host, sizeof(host), st),
        "mem.write_async");
  check(hipd_kernel_launch(conn, k, grid, block, 0, st, args), "kernel.launch");
  check(hipd_mem_read_async(conn, buf, 0, host, sizeof(host), st),
        "mem.read_async");
  check(hipd_stream_synchronize(conn, st), "stream.synchronize");

  /* Read the records (and empty them: clear = 1), before profile.disable,
   * which discards them. The record is ours to free. */
  check(hipd_session_profile(conn, 1, &prof), "session.profile");
  hipd_info_int(prof, "dropped", &dropped);
  n = hipd_info_len(prof, "records");
  check(n, "records");
  printf("%d records (%lld dropped)\n", n, (long long)dropped);
  printf("  %-14s %-18s %10s %12s %12s\n", "op", "stream", "bytes", "start ms",
         "device ms");
  for (int i = 0; i < n; i++) {
    char path[64];
    const char *op = "?";
    uint64_t stream = 0, bytes = 0;
    double start = 0, end = 0;

    snprintf(path, sizeof(path), "records.%d.op", i);
    check(hipd_info_str(prof, path, &op, NULL), path);
    snprintf(path, sizeof(path), "records.%d.stream", i);
    check(hipd_info_uint(prof, path, &stream), path);
    snprintf(path, sizeof(path), "records.%d.bytes", i);
    check(hipd_info_uint(prof, path, &bytes), path);
    snprintf(path, sizeof(path), "records.%d.start_ms", i);
    check(hipd_info_double(prof, path, &start), path);
    snprintf(path, sizeof(path), "records.%d.end_ms", i);
    check(hipd_info_double(prof, path, &end), path);
    printf("  %-14s %#-18llx %10llu %12.3f %12.3f\n", op,
           (unsigned long long)stream, (unsigned long long)bytes, start,
           end - start);
    /* The stream in a record is the handle as hipd_stream_id() gives it. */
    if (i < 4 && (strcmp(op, expected[i]) != 0 ||
                  (i > 0 && stream != hipd_stream_id(st))))
      bad++;
  }
  hipd_info_free(prof);
  check(hipd_profile_disable(conn), "profile.disable");
  hipd_args_free(args);
  hipd_close(conn);
  if (n != 4 || bad != 0) {
    fprintf(stderr,
            "profile: expected memset, write, launch, read; got %d "
            "records, %d unexpected\n",
            n, bad);
    return 1;
  }
  printf("profile: OK (host[99] = %g)\n", host[99]);
  return 0;
}
