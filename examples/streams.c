/* SPDX-License-Identifier: MIT */
/* examples/streams.c: two streams, events and a dependency between them.
 *
 * Work on one stream runs in order; work on two streams may overlap. This
 * program fills a buffer and scales it on stream 1, marking the points
 * with events; stream 2 must copy the result only once stream 1 is done
 * with it, so the program waits for the event that marks that point
 * before it queues the copy (protocol 1 orders streams on the host). Then
 * it reads the copy back and prints how long stream 1's work took.
 *
 *   examples/streams [SOCKET]
 *
 * Exits 0 when the copy holds what stream 1 computed, 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>

#include <hipd.h>

#define N 4096

static const char scale_src[] =
    "extern \"C\" __global__ void scale(float *p, float f, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    p[i] *= f;\n"
    "}\n";

static hipd_conn_t *conn;

/* Every call returns 0 or a negative HIPD_E* code: report the code's name
 * and the daemon's message, then stop. */
static void check(int rc, const char *what)
{
  if (rc >= 0)
    return;
  fprintf(stderr, "streams: %s: %s: %s\n", what, hipd_err_name(rc),
          hipd_last_error(conn));
  hipd_close(conn); /* releases every stream, event and buffer made */
  exit(1);
}

int main(int argc, char **argv)
{
  static float host[N], back[N];
  const int dev = HIPD_DEVICE_CURRENT; /* device 0 unless set otherwise */
  const uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  hipd_stream_t s1, s2;
  hipd_event_t start, ready, stop;
  hipd_buffer_t a, b;
  hipd_kernel_t k;
  hipd_args_t *args;
  int done = 0, bad = 0;
  float ms = 0;

  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  if (hipd_connect(argc > 1 ? argv[1] : NULL, &conn) < 0) {
    fprintf(stderr, "streams: connect: %s\n", hipd_last_error(NULL));
    return 1;
  }

  /* Two streams and three events, all on the same device; handles of
   * different kinds are different C types. */
  check(hipd_stream_create(conn, dev, &s1), "stream.create");
  check(hipd_stream_create(conn, dev, &s2), "stream.create");
  check(hipd_event_create(conn, dev, &start), "event.create");
  check(hipd_event_create(conn, dev, &ready), "event.create");
  check(hipd_event_create(conn, dev, &stop), "event.create");
  check(hipd_mem_alloc(conn, dev, N, "float32", &a), "mem.alloc");
  check(hipd_mem_alloc(conn, dev, N, "float32", &b), "mem.alloc");
  check(
      hipd_kernel_compile_cached(conn, dev, scale_src, "scale", NULL, &k, NULL),
      "kernel.compile_cached");
  printf("streams %#llx and %#llx, buffers %#llx and %#llx\n",
         (unsigned long long)hipd_stream_id(s1),
         (unsigned long long)hipd_stream_id(s2),
         (unsigned long long)hipd_buffer_id(a),
         (unsigned long long)hipd_buffer_id(b));

  /* Stream 1: start mark, upload, scale by 3, the "ready" mark, stop mark.
   * Each call returns once its work is queued: the daemon keeps a copy of
   * the uploaded bytes, so host[] could change right away. */
  args = hipd_args_new();
  if (args == NULL)
    check(HIPD_ENOMEM, "hipd_args_new");
  check(hipd_args_buffer(args, a, 0), "args");
  check(hipd_args_f32(args, 3.0f), "args");
  check(hipd_args_i32(args, N), "args");
  check(hipd_event_record(conn, start, s1), "event.record");
  check(hipd_mem_write_async(conn, a, 0, host, sizeof(host), s1),
        "mem.write_async");
  check(hipd_kernel_launch(conn, k, grid, block, 0, s1, args), "kernel.launch");
  check(hipd_event_record(conn, ready, s1), "event.record");
  check(hipd_event_record(conn, stop, s1), "event.record");
  hipd_args_free(args);

  /* The dependency: stream 2 reads buffer a, so its copy must not start
   * before stream 1 has passed the "ready" mark. Streams are not ordered
   * with one another on the device: wait for the event here, then queue. */
  check(hipd_event_synchronize(conn, ready), "event.synchronize");
  check(hipd_mem_copy_async(conn, b, 0, a, 0, sizeof(host), s2),
        "mem.copy_async");
  check(hipd_stream_synchronize(conn, s2), "stream.synchronize");
  printf("stream 2 copied a to b after stream 1 reached the ready event\n");

  /* The copy is done; a synchronous read (default stream) fetches it. */
  check(hipd_mem_read(conn, b, 0, back, sizeof(back)), "mem.read");
  for (int i = 0; i < N; i++)
    if (back[i] != 3.0f * (float)i)
      bad++;

  /* Stream 1 has run to "ready", and "stop" follows it at once. */
  check(hipd_event_synchronize(conn, stop), "event.synchronize");
  check(hipd_event_query(conn, stop, &done), "event.query");
  check(hipd_event_elapsed(conn, start, stop, &ms), "event.elapsed");
  printf("stream 1: upload and scale of %d floats took %.3f ms on the "
         "device (stop event done: %d)\n",
         N, ms, done);

  /* Handles are released explicitly here; hipd_close() would too. */
  check(hipd_event_destroy(conn, start), "event.destroy");
  check(hipd_event_destroy(conn, ready), "event.destroy");
  check(hipd_event_destroy(conn, stop), "event.destroy");
  check(hipd_stream_destroy(conn, s1), "stream.destroy");
  check(hipd_stream_destroy(conn, s2), "stream.destroy");
  check(hipd_mem_free(conn, a), "mem.free");
  check(hipd_mem_free(conn, b), "mem.free");
  check(hipd_kernel_destroy(conn, k), "kernel.destroy");
  hipd_close(conn);
  if (bad != 0 || !done) {
    fprintf(stderr, "streams: %d of %d values wrong, stop done %d\n", bad, N,
            done);
    return 1;
  }
  printf("streams: OK (b[%d] = %g)\n", N - 1, back[N - 1]);
  return 0;
}
