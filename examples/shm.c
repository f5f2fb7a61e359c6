/* SPDX-License-Identifier: MIT */
/* examples/shm.c: shared host buffers, copies without the socket, and a
 * zero-copy device buffer.
 *
 * A shared buffer (hipd_shm_create) is memory of this process that the
 * daemon maps too: mem.write_shm and mem.read_shm move bytes between it and
 * device memory without sending them over the socket. A zero-copy buffer
 * (hipd_mem_alloc_zero_copy) goes further: it is a device buffer whose
 * memory is the shared buffer itself, so what a kernel writes there is in
 * this process's memory with no copy at all.
 *
 *   examples/shm [SOCKET]
 *
 * Exits 0 when every transfer brought back what it should, 1 on any
 * failure. A device that cannot map host memory (HIPD_ENOTSUP from
 * mem.alloc_zero_copy) skips the zero-copy part, saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hipd.h>

#define N 1024 /* ints */

static const char add1_src[] =
    "extern \"C\" __global__ void add1(int *p, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] += 1;\n"
    "}\n";

static hipd_conn_t *conn;

static void check(int rc, const char *what)
{
  if (rc >= 0)
    return;
  fprintf(stderr, "shm: %s: %s: %s\n", what, hipd_err_name(rc),
          hipd_last_error(conn));
  hipd_close(conn);
  exit(1);
}

/* Count the ints of @p p that are not @p base + i. */
static int wrong(const int *p, int base)
{
  int bad = 0;

  for (int i = 0; i < N; i++)
    bad += p[i] != base + i;
  return bad;
}

int main(int argc, char **argv)
{
  const int dev = 0;
  const uint32_t grid[3] = {(N + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
  const size_t bytes = N * sizeof(int);
  hipd_shm_t *shm, *zshm;
  hipd_buffer_t buf, zbuf;
  hipd_stream_t st;
  hipd_kernel_t k;
  hipd_args_t *args;
  hipd_call_t *call;
  int *in, *out, rc, bad = 0;

  if (hipd_connect(argc > 1 ? argv[1] : NULL, &conn) < 0) {
    fprintf(stderr, "shm: connect: %s\n", hipd_last_error(NULL));
    return 1;
  }
  check(hipd_kernel_compile_cached(conn, dev, add1_src, "add1", NULL, &k, NULL),
        "kernel.compile_cached");

  /* One shared buffer, two halves: the input, then room for the result.
   * Its memory is ours (hipd_shm_ptr), zero-filled, page-rounded. The
   * hipd_shm_t is ours to free with hipd_shm_free(). */
  check(hipd_shm_create(conn, 2 * bytes, &shm), "shm.create");
  in = hipd_shm_ptr(shm);
  out = in + N;
  for (int i = 0; i < N; i++)
    in[i] = 100 + i;
  printf("shared buffer %#llx: %zu bytes at %p\n",
         (unsigned long long)hipd_shm_handle(shm), hipd_shm_size(shm),
         hipd_shm_ptr(shm));

  /* Shared memory to device, a kernel, device back to shared memory: the
   * daemon copies straight from and to our pages. */
  check(hipd_mem_alloc(conn, dev, N, "int32", &buf), "mem.alloc");
  check(hipd_mem_write_shm(conn, buf, 0, shm, 0, bytes), "mem.write_shm");
  args = hipd_args_new();
  if (args == NULL)
    check(HIPD_ENOMEM, "hipd_args_new");
  check(hipd_args_buffer(args, buf, 0), "args");
  check(hipd_args_i32(args, N), "args");
  check(hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args),
        "kernel.run");
  check(hipd_mem_read_shm(conn, buf, 0, shm, bytes, bytes), "mem.read_shm");
  bad += wrong(out, 101);
  printf("write_shm, add1, read_shm: out[0] = %d, out[%d] = %d\n", out[0],
         N - 1, out[N - 1]);

  /* The same on a stream of our own. The _async forms are answered once
   * the copy has completed on the stream, so the pipelined (_begin) form
   * is how to go on meanwhile: the call completes in hipd_wait(). Until
   * then the shared bytes must not change (write) or be read (read). */
  check(hipd_stream_create(conn, dev, &st), "stream.create");
  check(hipd_mem_write_shm_async_begin(conn, buf, 0, shm, bytes, bytes, st,
                                       &call),
        "mem.write_shm_async");
  check(hipd_wait(call), "mem.write_shm_async");
  check(hipd_kernel_run(conn, k, grid, block, 0, st, args), "kernel.run");
  check(hipd_mem_read_shm_async(conn, buf, 0, shm, 0, bytes, st),
        "mem.read_shm_async");
  bad += wrong(in, 102);
  printf("on stream %#llx: in[0] = %d (101 + 1)\n",
         (unsigned long long)hipd_stream_id(st), in[0]);

  /* Zero copy: a device buffer whose memory is a shared buffer. The
   * kernel adds 1 in place; the result is in our memory as soon as the
   * kernel has run, with no read. */
  check(hipd_shm_create(conn, bytes, &zshm), "shm.create");
  memcpy(hipd_shm_ptr(zshm), in, bytes); /* 102 + i */
  rc = hipd_mem_alloc_zero_copy(conn, dev, zshm, &zbuf);
  if (rc == HIPD_ENOTSUP) {
    printf("zero copy: not on this device (%s)\n", hipd_last_error(conn));
  } else {
    hipd_info_t *info;
    int zc = 0;

    check(rc, "mem.alloc_zero_copy");
    check(hipd_mem_info(conn, zbuf, &info), "mem.info");
    check(hipd_info_bool(info, "zero_copy", &zc), "mem.info zero_copy");
    hipd_info_free(info); /* every record is the caller's to free */
    hipd_args_clear(args);
    check(hipd_args_buffer(args, zbuf, 0), "args");
    check(hipd_args_i32(args, N), "args");
    check(hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args),
          "kernel.run");
    bad += wrong(hipd_shm_ptr(zshm), 103);
    printf("zero copy (mem.info zero_copy %d): the kernel wrote %d into "
           "our memory\n",
           zc, ((int *)hipd_shm_ptr(zshm))[0]);
    if (!zc)
      bad++;
    /* The daemon keeps its mapping until the zero-copy buffer goes too. */
    check(hipd_mem_free(conn, zbuf), "mem.free");
  }

  hipd_args_free(args);
  check(hipd_shm_free(conn, zshm), "shm.free");
  check(hipd_shm_free(conn, shm), "shm.free"); /* also unmaps it here */
  hipd_close(conn);
  if (bad != 0) {
    fprintf(stderr, "shm: %d values wrong\n", bad);
    return 1;
  }
  printf("shm: OK\n");
  return 0;
}
