/* SPDX-License-Identifier: MIT */
/* tests/check_kernels_run.c: kernels that run, on every device: vector
 * add, reductions, histograms, grids, dynamic shared memory, scalar
 * arguments, C++ names, and kernels run straight from their source. The
 * shared helpers are in tests/lib/kernels_util.h. */
#include "config.h"

#include "kernels_util.h"

/* ------------------------------------------------------------ running */

/* Vector add on every device: the record of a compile, launches on the
 * default stream and on a stream of its own, and pipelined launches. */
START_TEST(test_vecadd)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    enum { N = 10000, PIPE = 4 };
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", &info);
    const char *cache = info_str(info, "cache");
    hipd_stream_t st = HIPD_STREAM_NULL;
    hipd_buffer_t bufs[PIPE];
    hipd_call_t *calls[PIPE];

    ck_assert_uint_eq(info_uint(info, "kernel"), hipd_kernel_id(k));
    ck_assert_msg(strcmp(cache, "miss") == 0 || strcmp(cache, "memory") == 0 ||
                      strcmp(cache, "disk") == 0 ||
                      strcmp(cache, "waited") == 0,
                  "device %d: cache %s", dev, cache);
    ck_assert_uint_eq(strlen(info_str(info, "key")), 64);
    ck_assert_int_gt(info_int(info, "bytes"), 0);
    {
      double ms = -1;
      ck_assert_int_eq(hipd_info_double(info, "compile_ms", &ms), 0);
      ck_assert(ms >= 0);
    }
    if (device_is_cpu(conn, dev)) {
      /* The CPU device knows the declaration. */
      ck_assert_int_eq(hipd_info_len(info, "params"), 4);
      ck_assert_str_eq(info_str(info, "params.0"), "pointer");
      ck_assert_str_eq(info_str(info, "params.2"), "pointer");
      ck_assert_str_eq(info_str(info, "params.3"), "int32");
    }
    hipd_info_free(info);

    OK(conn, hipd_kernel_info(conn, k, &info));
    ck_assert_str_eq(info_str(info, "name"), "vecadd");
    ck_assert_int_eq(info_int(info, "device"), dev);
    hipd_info_free(info);

    vecadd_run(conn, dev, k, N, HIPD_STREAM_NULL);
    vecadd_run(conn, dev, k, 1, HIPD_STREAM_NULL);
    OK(conn, hipd_stream_create(conn, dev, &st));
    vecadd_run(conn, dev, k, 777, st);

    /* Pipelined: each launch adds 1 to its own element of a buffer. */
    {
      hipd_buffer_t ones = HIPD_BUFFER_NULL;
      float x = 1.0f;
      OK(conn, hipd_mem_alloc(conn, dev, 1, "float32", &ones));
      OK(conn, hipd_mem_write(conn, ones, 0, &x, sizeof(x)));
      for (int i = 0; i < PIPE; i++) {
        hipd_args_t *args = args_new();
        bufs[i] = float_buffer(conn, dev, 1, NULL);
        hipd_args_buffer(args, bufs[i], 0);
        hipd_args_buffer(args, ones, 0);
        hipd_args_buffer(args, bufs[i], 0);
        hipd_args_i32(args, 1);
        OK(conn,
           hipd_kernel_launch_begin(conn, k, ONE, ONE, 0, st, args, &calls[i]));
        /* The arguments were packed: they may go at once. */
        hipd_args_free(args);
      }
      for (int i = 0; i < PIPE; i++)
        OK(conn, hipd_wait(calls[i]));
      OK(conn, hipd_stream_synchronize(conn, st));
      for (int i = 0; i < PIPE; i++) {
        float v = 0;
        OK(conn, hipd_mem_read(conn, bufs[i], 0, &v, sizeof(v)));
        ck_assert_msg(v == 1.0f, "device %d: pipelined launch %d left %g", dev,
                      i, v);
        OK(conn, hipd_mem_free(conn, bufs[i]));
      }
      OK(conn, hipd_mem_free(conn, ones));
    }
    OK(conn, hipd_stream_destroy(conn, st));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* A reduction over many blocks of 256 threads: shared memory, barriers,
 * an atomic. */
START_TEST(test_reduce)
{
  enum { BLOCK = 256, GRID = 300, N = BLOCK * GRID - 17 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  int *in = xmalloc(N * sizeof(int)), *partial = xmalloc(GRID * sizeof(int));
  long long want_total = 0;

  for (int i = 0; i < N; i++) {
    in[i] = (int)((i * 7919u) % 1000) - 300;
    want_total += in[i];
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, REDUCE_SRC, "block_sum", NULL);
    hipd_buffer_t bin, bpart, btotal;
    uint32_t grid[3] = {GRID, 1, 1}, block[3] = {BLOCK, 1, 1};
    hipd_args_t *args = args_new();
    int total = 0;

    OK(conn, hipd_mem_alloc(conn, dev, N, "int32", &bin));
    OK(conn, hipd_mem_alloc(conn, dev, GRID, "int32", &bpart));
    OK(conn, hipd_mem_alloc(conn, dev, 1, "int32", &btotal));
    OK(conn, hipd_mem_write(conn, bin, 0, in, N * sizeof(int)));
    OK(conn, hipd_mem_memset(conn, btotal, 0, sizeof(int), 0));
    hipd_args_buffer(args, bin, 0);
    hipd_args_buffer(args, bpart, 0);
    hipd_args_buffer(args, btotal, 0);
    hipd_args_i32(args, N);
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bpart, 0, partial, GRID * sizeof(int)));
    OK(conn, hipd_mem_read(conn, btotal, 0, &total, sizeof(int)));
    for (int b = 0; b < GRID; b++) {
      long long want = 0;
      for (int i = b * BLOCK; i < (b + 1) * BLOCK && i < N; i++)
        want += in[i];
      ck_assert_msg(partial[b] == want,
                    "device %d: block %d summed to %d, expected %lld", dev, b,
                    partial[b], want);
    }
    ck_assert_msg(total == want_total, "device %d: total %d, expected %lld",
                  dev, total, want_total);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bin));
    OK(conn, hipd_mem_free(conn, bpart));
    OK(conn, hipd_mem_free(conn, btotal));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  free(in);
  free(partial);
  hipd_close(conn);
}
END_TEST

/* A histogram of 200003 bytes: atomics in shared and global memory. */
START_TEST(test_histogram)
{
  enum { N = 200003 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  unsigned char *data = xmalloc(N);
  unsigned want[256] = {0}, bins[256];
  uint32_t x = 12345;

  for (int i = 0; i < N; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    /* Skewed, so that many threads hit the same bins. */
    data[i] = (unsigned char)((x & 1) ? (x >> 8) & 0xff : (x >> 8) & 0x7);
    want[data[i]]++;
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, HIST_SRC, "histogram", NULL);
    hipd_buffer_t bdata, bbins;
    uint32_t grid[3] = {32, 1, 1}, block[3] = {128, 1, 1};
    hipd_args_t *args = args_new();

    OK(conn, hipd_mem_alloc(conn, dev, N, "uint8", &bdata));
    OK(conn, hipd_mem_alloc(conn, dev, 256, "uint32", &bbins));
    OK(conn, hipd_mem_write(conn, bdata, 0, data, N));
    OK(conn, hipd_mem_memset(conn, bbins, 0, sizeof(bins), 0));
    hipd_args_buffer(args, bdata, 0);
    hipd_args_buffer(args, bbins, 0);
    hipd_args_i32(args, N);
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bbins, 0, bins, sizeof(bins)));
    for (int b = 0; b < 256; b++)
      ck_assert_msg(bins[b] == want[b], "device %d: bin %d = %u, expected %u",
                    dev, b, bins[b], want[b]);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bdata));
    OK(conn, hipd_mem_free(conn, bbins));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  free(data);
  hipd_close(conn);
}
END_TEST

/* Launch index3d over a grid and check every element's (x, y, z). */
static void grid_check(hipd_conn_t *conn, int dev, hipd_kernel_t k,
                       const uint32_t grid[3], const uint32_t block[3],
                       const int shape[3])
{
  size_t count = (size_t)shape[0] * shape[1] * shape[2];
  int *out = xmalloc(count * 4 * sizeof(int));
  int threads =
      (int)(grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]);
  hipd_buffer_t b;
  hipd_args_t *args = args_new();

  OK(conn, hipd_mem_alloc(conn, dev, count * 4, "int32", &b));
  OK(conn, hipd_mem_memset(conn, b, 0, count * 4 * sizeof(int), 0xff));
  hipd_args_buffer(args, b, 0);
  hipd_args_i32(args, shape[0]);
  hipd_args_i32(args, shape[1]);
  hipd_args_i32(args, shape[2]);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  OK(conn, hipd_mem_read(conn, b, 0, out, count * 4 * sizeof(int)));
  for (int z = 0; z < shape[2]; z++)
    for (int y = 0; y < shape[1]; y++)
      for (int x = 0; x < shape[0]; x++) {
        const int *e = &out[4 * (((size_t)z * shape[1] + y) * shape[0] + x)];
        ck_assert_msg(e[0] == x && e[1] == y && e[2] == z && e[3] == threads,
                      "device %d: element (%d,%d,%d) holds (%d,%d,%d) of %d "
                      "threads, expected %d",
                      dev, x, y, z, e[0], e[1], e[2], e[3], threads);
      }
  hipd_args_free(args);
  OK(conn, hipd_mem_free(conn, b));
  free(out);
}

/* 2-D and 3-D grids: every thread's global index is where it should be. */
START_TEST(test_grids)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, INDEX_SRC, "index3d", NULL);
    /* 2-D, with partial blocks at the edges. */
    const uint32_t g2[3] = {4, 3, 1}, b2[3] = {16, 8, 1};
    const int s2[3] = {60, 20, 1};
    /* 3-D, with partial blocks in every dimension. */
    const uint32_t g3[3] = {3, 2, 4}, b3[3] = {8, 4, 2};
    const int s3[3] = {20, 7, 7};
    /* Only z. */
    const uint32_t gz[3] = {1, 1, 5}, bz[3] = {1, 1, 8};
    const int sz[3] = {1, 1, 40};

    grid_check(conn, dev, k, g2, b2, s2);
    grid_check(conn, dev, k, g3, b3, s3);
    grid_check(conn, dev, k, gz, bz, sz);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* Dynamic shared memory (`extern __shared__`), sized by the launch. */
START_TEST(test_dynamic_shared)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, DYN_SRC, "dyn_reverse", NULL);
    const uint32_t sizes[2] = {200, 1024};

    for (int s = 0; s < 2; s++) {
      uint32_t block[3] = {sizes[s], 1, 1}, grid[3] = {7, 1, 1};
      size_t count = (size_t)block[0] * grid[0];
      float *in = xmalloc(count * sizeof(float));
      float *out = xmalloc(count * sizeof(float));
      hipd_buffer_t bin, bout;
      hipd_args_t *args = args_new();

      for (size_t i = 0; i < count; i++)
        in[i] = (float)i + 0.25f;
      bin = float_buffer(conn, dev, count, in);
      bout = float_buffer(conn, dev, count, NULL);
      hipd_args_buffer(args, bin, 0);
      hipd_args_buffer(args, bout, 0);
      OK(conn, hipd_kernel_launch(conn, k, grid, block,
                                  block[0] * (uint32_t)sizeof(float),
                                  HIPD_STREAM_NULL, args));
      OK(conn, hipd_mem_read(conn, bout, 0, out, count * sizeof(float)));
      for (size_t b = 0; b < grid[0]; b++)
        for (size_t t = 0; t < block[0]; t++) {
          size_t i = b * block[0] + t;
          float want = in[b * block[0] + block[0] - 1 - t];
          ck_assert_msg(out[i] == want,
                        "device %d: block %zu thread %zu read %g, expected %g",
                        dev, b, t, out[i], want);
        }
      hipd_args_free(args);
      OK(conn, hipd_mem_free(conn, bin));
      OK(conn, hipd_mem_free(conn, bout));
      free(in);
      free(out);
    }
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* float, double, long long and int arguments, and their combination. */
START_TEST(test_scalar_args)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  /* Exact in float; a * b + d is exact in double (no rounding to differ
   * with or without a fused multiply-add). */
  const float a = 1.5f + 1.0f / (1 << 20);
  const double b = 2.25;
  const int64_t c = -((int64_t)1 << 40) - 3;
  const int32_t d = -7;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile(conn, dev, MIX_SRC, "mix", &info);
    hipd_buffer_t bout, biout;
    double out[4];
    int64_t iout[3];
    hipd_args_t *args = args_new();

    if (device_is_cpu(conn, dev)) {
      static const char *const want[] = {"float", "double",  "int64",
                                         "int32", "pointer", "pointer"};
      ck_assert_int_eq(hipd_info_len(info, "params"), 6);
      for (int i = 0; i < 6; i++) {
        char p[16];
        snprintf(p, sizeof(p), "params.%d", i);
        ck_assert_str_eq(info_str(info, p), want[i]);
      }
    }
    hipd_info_free(info);
    OK(conn, hipd_mem_alloc(conn, dev, 4, "float64", &bout));
    OK(conn, hipd_mem_alloc(conn, dev, 3, "int64", &biout));
    hipd_args_f32(args, a);
    hipd_args_f64(args, b);
    hipd_args_i64(args, c);
    hipd_args_i32(args, d);
    hipd_args_buffer(args, bout, 0);
    hipd_args_buffer(args, biout, 0);
    OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bout, 0, out, sizeof(out)));
    OK(conn, hipd_mem_read(conn, biout, 0, iout, sizeof(iout)));
    ck_assert_msg(out[0] == (double)a, "device %d: a arrived as %.17g", dev,
                  out[0]);
    ck_assert_msg(out[1] == b, "device %d: b arrived as %.17g", dev, out[1]);
    ck_assert_msg(out[2] == (double)a * b + d,
                  "device %d: a * b + d = %.17g, expected %.17g", dev, out[2],
                  (double)a * b + d);
    ck_assert_msg(fabs(out[3] - (1.5 + (double)a)) < 1e-12,
                  "device %d: sqrt(b) + fabsf(a) = %.17g", dev, out[3]);
    ck_assert_msg(iout[0] == c, "device %d: c arrived as %lld", dev,
                  (long long)iout[0]);
    ck_assert_int_eq(iout[1], c + d);
    ck_assert_int_eq(iout[2], 8);

    /* The largest values too. */
    hipd_args_clear(args);
    hipd_args_f32(args, -3.0e38f);
    hipd_args_f64(args, 1.0e300);
    hipd_args_i64(args, INT64_MAX);
    hipd_args_i32(args, INT32_MIN);
    hipd_args_buffer(args, bout, 0);
    hipd_args_buffer(args, biout, 0);
    OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bout, 0, out, sizeof(out)));
    OK(conn, hipd_mem_read(conn, biout, 0, iout, sizeof(iout)));
    ck_assert(out[0] == (double)-3.0e38f);
    ck_assert(out[1] == 1.0e300);
    ck_assert_int_eq(iout[0], INT64_MAX);
    ck_assert_int_eq(iout[1], INT64_MAX + (int64_t)INT32_MIN);

    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bout));
    OK(conn, hipd_mem_free(conn, biout));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* Kernels that are not extern "C": a plain C++ function (its name is
 * mangled) and a template instance, compiled by their C++ names. Both the
 * CPU device (cpu_compile.h) and hiprtc (name expressions) take them. */
START_TEST(test_cxx_names)
{
  enum { N = 1000 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
  float *out = xmalloc(N * sizeof(float));

  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = (float)(N - i);
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t ks = compile(conn, dev, CXX_SRC, "scale", NULL);
    hipd_kernel_t ka = compile(conn, dev, CXX_SRC, "axpy<float>", NULL);
    hipd_buffer_t bx = float_buffer(conn, dev, N, x);
    hipd_buffer_t by = float_buffer(conn, dev, N, y);
    uint32_t grid[3] = {blocks_for(N, 64), 1, 1}, block[3] = {64, 1, 1};
    hipd_args_t *args = args_new();
    hipd_info_t *info = NULL;

    OK(conn, hipd_kernel_info(conn, ka, &info));
    ck_assert_str_eq(info_str(info, "name"), "axpy<float>");
    hipd_info_free(info);

    /* x *= 3 */
    hipd_args_buffer(args, bx, 0);
    hipd_args_f32(args, 3.0f);
    hipd_args_i32(args, N);
    OK(conn,
       hipd_kernel_launch(conn, ks, grid, block, 0, HIPD_STREAM_NULL, args));
    /* y = 0.5 * x + y */
    hipd_args_clear(args);
    hipd_args_f32(args, 0.5f);
    hipd_args_buffer(args, bx, 0);
    hipd_args_buffer(args, by, 0);
    hipd_args_i32(args, N);
    OK(conn,
       hipd_kernel_launch(conn, ka, grid, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, by, 0, out, N * sizeof(float)));
    for (int i = 0; i < N; i++) {
      float want = 0.5f * (3.0f * x[i]) + y[i];
      ck_assert_msg(out[i] == want, "device %d: y[%d] = %g, expected %g", dev,
                    i, out[i], want);
    }
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bx));
    OK(conn, hipd_mem_free(conn, by));
    OK(conn, hipd_kernel_destroy(conn, ks));
    OK(conn, hipd_kernel_destroy(conn, ka));
  }
  free(x);
  free(y);
  free(out);
  hipd_close(conn);
}
END_TEST

/* The geometry a kernel was launched with: grid x, y, block x, y. */
static const char GEOM_SRC[] =
    "extern \"C\" __global__ void geom(int *out)\n"
    "{\n"
    "  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 &&\n"
    "      threadIdx.y == 0) {\n"
    "    out[0] = gridDim.x;\n"
    "    out[1] = gridDim.y;\n"
    "    out[2] = blockDim.x;\n"
    "    out[3] = blockDim.y;\n"
    "  }\n"
    "}\n";

/* run_source: compile, launch and wait in one call, on the current
 * device; and the languages. */
START_TEST(test_run_source)
{
  enum { N = 3000 };
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  float *a = xmalloc(N * sizeof(float)), *b = xmalloc(N * sizeof(float));
  float *c = xmalloc(N * sizeof(float));

  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = 0.25f * (float)i;
  }
  for (dev = 0; dev < n; dev++) {
    hipd_buffer_t ba = float_buffer(conn, dev, N, a);
    hipd_buffer_t bb = float_buffer(conn, dev, N, b);
    hipd_buffer_t bc = float_buffer(conn, dev, N, NULL);
    uint32_t block[3] = {256, 1, 1}, grid[3] = {blocks_for(N, 256), 1, 1};
    hipd_args_t *args = args_new();
    hipd_info_t *langs = NULL;

    OK(conn, hipd_supported_source_langs(conn, dev, &langs));
    ck_assert_msg(info_has_str(langs, "", "hip"),
                  "device %d: \"hip\" is not a supported language", dev);
    hipd_info_free(langs);

    OK(conn, hipd_device_set_current(conn, dev));
    hipd_args_buffer(args, ba, 0);
    hipd_args_buffer(args, bb, 0);
    hipd_args_buffer(args, bc, 0);
    hipd_args_i32(args, N);
    OK(conn, hipd_run_source(conn, VECADD_SRC, "hip", "vecadd", grid, block, 0,
                             args));
    /* run_source returns once the kernel has run. */
    OK(conn, hipd_mem_read(conn, bc, 0, c, N * sizeof(float)));
    for (int i = 0; i < N; i++)
      ck_assert_msg(c[i] == a[i] + b[i], "device %d: c[%d] = %g", dev, i, c[i]);

    EXPECT(conn,
           hipd_run_source(conn, VECADD_SRC, "opencl", "vecadd", grid, block, 0,
                           args),
           HIPD_ELANG);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "opencl"));

    /* Grid first, then block, as in hipd_kernel_launch() (the wire sends
     * block first: the library must swap them). The kernel reports the
     * geometry it ran with. */
    {
      uint32_t g[3] = {3, 2, 1}, bl[3] = {8, 4, 1};
      int32_t geom[4] = {0};
      hipd_buffer_t bg = HIPD_BUFFER_NULL;

      OK(conn, hipd_mem_alloc(conn, dev, 4, "int32", &bg));
      hipd_args_clear(args);
      hipd_args_buffer(args, bg, 0);
      OK(conn, hipd_run_source(conn, GEOM_SRC, "hip", "geom", g, bl, 0, args));
      OK(conn, hipd_mem_read(conn, bg, 0, geom, sizeof(geom)));
      ck_assert_msg(geom[0] == 3 && geom[1] == 2 && geom[2] == 8 &&
                        geom[3] == 4,
                    "device %d: run_source ran grid %dx%d, block %dx%d; "
                    "asked for grid 3x2, block 8x4",
                    dev, geom[0], geom[1], geom[2], geom[3]);
      OK(conn, hipd_mem_free(conn, bg));
    }
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, ba));
    OK(conn, hipd_mem_free(conn, bb));
    OK(conn, hipd_mem_free(conn, bc));
  }
  dev = -1;
  {
    hipd_info_t *langs = NULL;
    OK(conn, hipd_supported_source_langs(conn, HIPD_DEVICE_CURRENT, &langs));
    ck_assert(info_has_str(langs, "", "hip"));
    hipd_info_free(langs);
  }
  EXPECT(conn, hipd_execute_direct(conn), HIPD_ENOTSUP);
  free(a);
  free(b);
  free(c);
  hipd_close(conn);
}
END_TEST

/* A kernel's printf comes back to its session through kernel.output, not
 * to the daemon's log; each call takes what it returns; another session
 * sees none of it. On the CPU device a launch keeps at most 32 KiB and
 * counts the rest as dropped. */
static const char SAY_SRC[] =
    "extern \"C\" __global__ void say(int tag)\n"
    "{\n"
    "  if (threadIdx.x == 0)\n"
    "    printf(\"kernel %d says hello from block %d\\n\", tag,\n"
    "           (int)blockIdx.x);\n"
    "}\n"
    "extern \"C\" __global__ void flood(int lines)\n"
    "{\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0)\n"
    "    for (int i = 0; i < lines; i++)\n"
    "      printf(\"%063d\\n\", i);\n"
    "}\n";

/* kernel.output of @p conn: its bytes into @p buf (NUL-terminated),
 * @return their count; *@p dropped. */
static size_t take_output(hipd_conn_t *conn, uint32_t max, char *buf,
                          size_t cap, uint64_t *dropped)
{
  hipd_info_t *info = NULL;
  const char *p = NULL;
  size_t len = 0;
  const int dev = -1; /* OK() names it */

  OK(conn, hipd_kernel_output(conn, max, &info));
  ck_assert_int_eq(hipd_info_str(info, "output", &p, &len), 0);
  ck_assert_int_eq(hipd_info_uint(info, "dropped", dropped), 0);
  ck_assert_uint_lt(len, cap);
  memcpy(buf, p, len);
  buf[len] = '\0';
  hipd_info_free(info);
  return len;
}

START_TEST(test_kernel_output)
{
  hipd_conn_t *conn = connect_to(shared), *other = connect_to(shared);
  int n = device_count(conn), dev;
  const uint32_t grid[3] = {3, 1, 1}, block[3] = {32, 1, 1};
  static char buf[80 * 1024];
  uint64_t dropped;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t say = compile(conn, dev, SAY_SRC, "say", NULL);
    hipd_args_t *args = args_new();
    char want[64];
    size_t len;

    hipd_args_i32(args, 7 + dev);
    OK(conn,
       hipd_kernel_run(conn, say, grid, block, 0, HIPD_STREAM_NULL, args));
    len = take_output(conn, 0, buf, sizeof(buf), &dropped);
    for (int b = 0; b < 3; b++) {
      snprintf(want, sizeof(want), "kernel %d says hello from block %d\n",
               7 + dev, b);
      ck_assert_msg(strstr(buf, want) != NULL,
                    "device %d: \"%s\" not in the %zu bytes of output: %s", dev,
                    want, len, buf);
    }
    ck_assert_uint_eq(dropped, 0);
    /* Taken: nothing is left, and the other session never had any. */
    ck_assert_uint_eq(take_output(conn, 0, buf, sizeof(buf), &dropped), 0);
    ck_assert_uint_eq(take_output(other, 0, buf, sizeof(buf), &dropped), 0);
    /* max: the first bytes, then the rest. */
    OK(conn, hipd_kernel_run(conn, say, ONE, block, 0, HIPD_STREAM_NULL, args));
    ck_assert_uint_eq(take_output(conn, 7, buf, sizeof(buf), &dropped), 7);
    ck_assert_str_eq(buf, "kernel ");
    len = take_output(conn, 0, buf, sizeof(buf), &dropped);
    snprintf(want, sizeof(want), "%d says hello from block 0\n", 7 + dev);
    ck_assert_str_eq(buf, want);
    if (device_is_cpu(conn, dev)) {
      hipd_kernel_t flood = compile(conn, dev, SAY_SRC, "flood", NULL);
      hipd_args_clear(args);
      hipd_args_i32(args, 1000); /* 64000 bytes */
      OK(conn,
         hipd_kernel_run(conn, flood, ONE, ONE, 0, HIPD_STREAM_NULL, args));
      len = take_output(conn, 0, buf, sizeof(buf), &dropped);
      ck_assert_uint_eq(len, 32768);
      ck_assert_uint_eq(dropped, 64000 - 32768);
      ck_assert(strncmp(buf, "000000", 6) == 0);
      OK(conn, hipd_kernel_destroy(conn, flood));
    }
    hipd_args_free(args);
    OK(conn, hipd_kernel_destroy(conn, say));
  }
  ck_assert_msg(!harness_log_contains(shared, "says hello from block"),
                "a kernel's printf reached the daemon's log");
  hipd_close(other);
  hipd_close(conn);
}
END_TEST

static Suite *kernels_run_suite(void)
{
  Suite *s = suite_create("kernels_run");
  TCase *tc;

  /* The first TCase compiles most kernels (about a second each on the CPU
   * device); the later ones find them in the shared cache directory. */
  tc = tcase_create("run");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_vecadd);
  tcase_add_test(tc, test_reduce);
  tcase_add_test(tc, test_histogram);
  tcase_add_test(tc, test_grids);
  tcase_add_test(tc, test_dynamic_shared);
  tcase_add_test(tc, test_scalar_args);
  tcase_add_test(tc, test_cxx_names);
  tcase_add_test(tc, test_run_source);
  tcase_add_test(tc, test_kernel_output);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return kernels_main("check_kernels_run", kernels_run_suite);
}
