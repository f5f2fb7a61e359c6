/* SPDX-License-Identifier: MIT */
/* tests/check_kernels_errors.c: what kernel calls refuse: compile errors,
 * launch limits, signatures and argument limits, raw pointers, destroyed
 * kernels; and compiling for a target other than the device's
 * (compile_for). The shared helpers are in tests/lib/kernels_util.h. */
#include "config.h"

#include "kernels_util.h"

/* ---------------------------------------------------------------- errors */

/* A compile error is HIPD_ECOMPILE with the compiler's log, whole. */
START_TEST(test_compile_errors)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;
  char *many;
  size_t len = 0, cap = 64 * 1024;
  char ident[301];

  /* Forty errors with long names: a log well over 4 KiB. */
  memset(ident, 'q', sizeof(ident) - 1);
  ident[sizeof(ident) - 1] = '\0';
  many = xmalloc(cap);
  len += (size_t)snprintf(many + len, cap - len,
                          "extern \"C\" __global__ void many(int *p)\n{\n");
  for (int i = 0; i < 40; i++)
    len += (size_t)snprintf(many + len, cap - len,
                            "  p[%d] = undeclared_%s_%d;\n", i, ident, i);
  snprintf(many + len, cap - len, "}\n");

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = hipd_kernel_from_id(1);
    hipd_info_t *info = (hipd_info_t *)1;
    const char *msg;

    EXPECT(conn,
           hipd_kernel_compile_cached(conn, dev, BROKEN_SRC, "broken", NULL, &k,
                                      &info),
           HIPD_ECOMPILE);
    ck_assert_uint_eq(hipd_kernel_id(k), 0);
    ck_assert_ptr_null(info);
    msg = hipd_last_error(conn);
    ck_assert_msg(names_line_3(msg),
                  "device %d: the log does not name line 3: %s", dev, msg);
    ck_assert_msg(strstr(msg, "this_name_is_not_declared") != NULL,
                  "device %d: the log does not quote the error: %s", dev, msg);
    /* Not cached: the same again fails the same way. */
    EXPECT(conn,
           hipd_kernel_compile(conn, dev, BROKEN_SRC, "broken", NULL, &k, NULL),
           HIPD_ECOMPILE);
    ck_assert(names_line_3(hipd_last_error(conn)));

    EXPECT(conn,
           hipd_kernel_compile_cached(conn, dev, many, "many", NULL, &k, NULL),
           HIPD_ECOMPILE);
    msg = hipd_last_error(conn);
    ck_assert_msg(strlen(msg) > 4096 + 512,
                  "device %d: a log of only %zu bytes came back", dev,
                  strlen(msg));
    ck_assert(names_line_3(msg));
    ck_assert_ptr_nonnull(strstr(msg, "undeclared_qqq"));

    /* The session goes on. */
    k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    vecadd_run(conn, dev, k, 100, HIPD_STREAM_NULL);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  free(many);
  hipd_close(conn);
}
END_TEST

/* Launch geometry past the device's limits is HIPD_ELIMIT, checked before
 * anything runs. */
START_TEST(test_launch_limits)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    int64_t max_threads = device_cap(conn, dev, "max_threads_per_block");
    int64_t max_x = device_cap(conn, dev, "max_block_dims.0");
    int64_t max_z = device_cap(conn, dev, "max_block_dims.2");
    int64_t max_gy = device_cap(conn, dev, "max_grid_dims.1");
    int64_t shared_max = device_cap(conn, dev, "shared_mem_per_block");
    hipd_buffer_t b = float_buffer(conn, dev, 16, NULL);
    hipd_args_t *args = args_new();
    uint32_t grid[3], block[3];

    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_buffer(args, b, 0);
    hipd_args_i32(args, 16);
#define LAUNCH_FAILS(g0, g1, g2, b0, b1, b2, sh)                               \
  do {                                                                         \
    grid[0] = (g0), grid[1] = (g1), grid[2] = (g2);                            \
    block[0] = (b0), block[1] = (b1), block[2] = (b2);                         \
    EXPECT(conn,                                                               \
           hipd_kernel_launch(conn, k, grid, block, (sh), HIPD_STREAM_NULL,    \
                              args),                                           \
           HIPD_ELIMIT);                                                       \
  } while (0)
    ck_assert_int_lt(max_x, 2048);
    LAUNCH_FAILS(1, 1, 1, 2048, 1, 1, 0);
    LAUNCH_FAILS(1, 1, 1, 1, 1, (uint32_t)max_z + 1, 0);
    /* Each dimension within its limit, their product past the block's. */
    if (2 * max_x > max_threads)
      LAUNCH_FAILS(1, 1, 1, (uint32_t)max_x, 1, 2, 0);
    ck_assert_int_le(max_x, max_threads);
    if (max_gy < UINT32_MAX)
      LAUNCH_FAILS(1, (uint32_t)max_gy + 1, 1, 1, 1, 1, 0);
    if (shared_max < UINT32_MAX)
      LAUNCH_FAILS(1, 1, 1, 1, 1, 1, (uint32_t)shared_max + 1);
    LAUNCH_FAILS(0, 1, 1, 1, 1, 1, 0);
    LAUNCH_FAILS(1, 1, 1, 1, 0, 1, 0);
    LAUNCH_FAILS(1, 1, 0, 1, 1, 1, 0);
    LAUNCH_FAILS(1, 1, 1, 0, 0, 0, 0);
#undef LAUNCH_FAILS
    /* At the limits it runs. */
    if (shared_max > 0 && shared_max < UINT32_MAX) {
      block[0] = block[1] = block[2] = 1;
      grid[0] = grid[1] = grid[2] = 1;
      OK(conn, hipd_kernel_launch(conn, k, grid, block, (uint32_t)shared_max,
                                  HIPD_STREAM_NULL, args));
    }
    block[0] = (uint32_t)max_x;
    block[1] = block[2] = 1;
    grid[0] = grid[1] = grid[2] = 1;
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    vecadd_run(conn, dev, k, 50, HIPD_STREAM_NULL);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, b));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}
END_TEST

/* Where the daemon knows a kernel's declaration (the CPU device), the
 * arguments are checked against it. A GPU module does not say, so there a
 * mismatched launch is undefined: not tested. */
START_TEST(test_signature)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev, checked = 0;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile(conn, dev, MIX_SRC, "mix", &info);
    hipd_buffer_t bout, biout;
    hipd_args_t *args = args_new();
    int known = hipd_info_len(info, "params") >= 0;

    hipd_info_free(info);
    if (device_is_cpu(conn, dev))
      ck_assert_msg(known, "device %d: the CPU device must know params", dev);
    if (!known) {
      OK(conn, hipd_kernel_destroy(conn, k));
      hipd_args_free(args);
      continue;
    }
    checked++;
    OK(conn, hipd_mem_alloc(conn, dev, 4, "float64", &bout));
    OK(conn, hipd_mem_alloc(conn, dev, 3, "int64", &biout));
#define MIX_ARGS(A, B, C, D)                                                   \
  do {                                                                         \
    hipd_args_clear(args);                                                     \
    A;                                                                         \
    B;                                                                         \
    C;                                                                         \
    D;                                                                         \
    hipd_args_buffer(args, bout, 0);                                           \
    hipd_args_buffer(args, biout, 0);                                          \
  } while (0)
    /* Too few, too many. */
    hipd_args_clear(args);
    hipd_args_f32(args, 1);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "6"));
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    hipd_args_i32(args, 5);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, NULL),
           HIPD_ESIGNATURE);
    /* A double for the float, a float for the double. */
    MIX_ARGS(hipd_args_f64(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "float"));
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f32(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    /* Integers of the wrong width, a buffer for a scalar, a scalar for a
     * pointer. */
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i32(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i64(args, 4));
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    MIX_ARGS(hipd_args_buffer(args, bout, 0), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    hipd_args_clear(args);
    hipd_args_f32(args, 1);
    hipd_args_f64(args, 2);
    hipd_args_i64(args, 3);
    hipd_args_i32(args, 4);
    hipd_args_i64(args, 5);
    hipd_args_buffer(args, biout, 0);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESIGNATURE);
    /* And right, it runs. */
    MIX_ARGS(hipd_args_f32(args, 1), hipd_args_f64(args, 2),
             hipd_args_i64(args, 3), hipd_args_i32(args, 4));
    OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
#undef MIX_ARGS
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, bout));
    OK(conn, hipd_mem_free(conn, biout));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  ck_assert_int_ge(checked, 2);
  hipd_close(conn);
}
END_TEST

/* The argument list itself: at most 256. */
START_TEST(test_args_limits)
{
  hipd_args_t *args = args_new();

  for (int i = 0; i < 256; i++)
    ck_assert_int_eq(hipd_args_i32(args, i), 0);
  ck_assert_int_eq(hipd_args_i32(args, 0), HIPD_ETOOMANY);
  ck_assert_int_eq(hipd_args_f64(args, 0), HIPD_ETOOMANY);
  hipd_args_clear(args);
  ck_assert_int_eq(hipd_args_f64(args, 0), 0);
  hipd_args_free(args);
  ck_assert_int_eq(hipd_args_i32(NULL, 0), HIPD_EINVAL);
  hipd_args_free(NULL);
}
END_TEST

/* Raw device addresses: accepted inside this session's buffers on the
 * kernel's device, refused anywhere else. */
START_TEST(test_raw_pointers)
{
  enum { N = 256, OFF = 16 };
  hipd_conn_t *conn = connect_to(shared), *other = connect_to(shared);
  int n = device_count(conn), dev;
  float a[N], b[N], c[N];

  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = (float)(1000 + i);
  }
  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    hipd_buffer_t ba = float_buffer(conn, dev, N, a);
    hipd_buffer_t bb = float_buffer(conn, dev, N, b);
    hipd_buffer_t bc = float_buffer(conn, dev, N, NULL);
    hipd_buffer_t theirs = HIPD_BUFFER_NULL, elsewhere = HIPD_BUFFER_NULL;
    hipd_stream_t their_stream = HIPD_STREAM_NULL;
    uint64_t pa, pc, ptheirs;
    hipd_info_t *info = NULL;
    hipd_args_t *args = args_new();
    uint32_t grid[3] = {blocks_for(N, 64), 1, 1}, block[3] = {64, 1, 1};
    int odev = (dev + 1) % n;

    OK(conn, hipd_mem_info(conn, ba, &info));
    pa = info_uint(info, "device_ptr");
    hipd_info_free(info);
    OK(conn, hipd_mem_info(conn, bc, &info));
    pc = info_uint(info, "device_ptr");
    hipd_info_free(info);
    ck_assert_uint_ne(pa, 0);

    /* c[i] = a[i + OFF] + b[i] through raw addresses and offsets. */
    hipd_args_ptr(args, pa + OFF * sizeof(float));
    hipd_args_buffer(args, bb, 0);
    hipd_args_ptr(args, pc);
    hipd_args_i32(args, N - OFF);
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bc, 0, c, sizeof(c)));
    for (int i = 0; i < N - OFF; i++)
      ck_assert_msg(c[i] == a[i + OFF] + b[i], "device %d: c[%d] = %g", dev, i,
                    c[i]);
    for (int i = N - OFF; i < N; i++)
      ck_assert(c[i] == 0.0f);
    /* A buffer with an offset does the same. */
    hipd_args_clear(args);
    hipd_args_buffer(args, ba, OFF * sizeof(float));
    hipd_args_buffer(args, bb, OFF * sizeof(float));
    hipd_args_buffer(args, bc, OFF * sizeof(float));
    hipd_args_i32(args, N - OFF);
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bc, 0, c, sizeof(c)));
    for (int i = OFF; i < N; i++)
      ck_assert(c[i] == a[i] + b[i]);

#define ONE_BAD(ARG0, want)                                                    \
  do {                                                                         \
    hipd_args_clear(args);                                                     \
    ARG0;                                                                      \
    hipd_args_buffer(args, bb, 0);                                             \
    hipd_args_buffer(args, bc, 0);                                             \
    hipd_args_i32(args, N);                                                    \
    EXPECT(                                                                    \
        conn,                                                                  \
        hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args),   \
        want);                                                                 \
  } while (0)
    /* Nowhere near a buffer. */
    ONE_BAD(hipd_args_ptr(args, 4096), HIPD_EPERM);
    ONE_BAD(hipd_args_ptr(args, 0), HIPD_EPERM);
    /* Another session's buffer, on the same device. */
    OK(other, hipd_mem_alloc(other, dev, N, "float32", &theirs));
    OK(other, hipd_mem_info(other, theirs, &info));
    ptheirs = info_uint(info, "device_ptr");
    hipd_info_free(info);
    ONE_BAD(hipd_args_ptr(args, ptheirs), HIPD_EPERM);
    ONE_BAD(hipd_args_ptr(args, ptheirs + 64), HIPD_EPERM);
    /* Their handle is not ours either. */
    ONE_BAD(hipd_args_buffer(args, theirs, 0), HIPD_EFOREIGN);
    /* Our buffer on another device. */
    OK(conn, hipd_mem_alloc(conn, odev, N, "float32", &elsewhere));
    ONE_BAD(hipd_args_buffer(args, elsewhere, 0), HIPD_EINVAL);
    OK(conn, hipd_mem_info(conn, elsewhere, &info));
    ONE_BAD(hipd_args_ptr(args, info_uint(info, "device_ptr")), HIPD_EPERM);
    hipd_info_free(info);
    /* Past the end of ours. */
    ONE_BAD(hipd_args_buffer(args, ba, N * sizeof(float) + 1), HIPD_ERANGE);
#undef ONE_BAD
    /* A stream of another device. */
    OK(conn, hipd_stream_default(conn, odev, &their_stream));
    hipd_args_clear(args);
    hipd_args_buffer(args, ba, 0);
    hipd_args_buffer(args, bb, 0);
    hipd_args_buffer(args, bc, 0);
    hipd_args_i32(args, N);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, grid, block, 0, their_stream, args),
           HIPD_EINVAL);

    /* Nothing was written by the refused launches. */
    OK(conn, hipd_mem_read(conn, bc, 0, c, sizeof(c)));
    for (int i = OFF; i < N; i++)
      ck_assert(c[i] == a[i] + b[i]);
    OK(other, hipd_mem_free(other, theirs));
    OK(conn, hipd_mem_free(conn, elsewhere));
    OK(conn, hipd_mem_free(conn, ba));
    OK(conn, hipd_mem_free(conn, bb));
    OK(conn, hipd_mem_free(conn, bc));
    /* A freed buffer's address is no longer ours. */
    hipd_args_clear(args);
    hipd_args_ptr(args, pa);
    hipd_args_ptr(args, pa);
    hipd_args_ptr(args, pa);
    hipd_args_i32(args, 1);
    EXPECT(conn,
           hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_EPERM);
    hipd_args_free(args);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(other);
  hipd_close(conn);
}
END_TEST

/* Kernel handles of one module: destroying one leaves the other working;
 * a destroyed one is stale. */
START_TEST(test_destroy)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_kernel_t k1 = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    hipd_kernel_t k2 = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
    hipd_info_t *info = NULL;
    hipd_args_t *args = args_new();

    ck_assert_uint_ne(hipd_kernel_id(k1), hipd_kernel_id(k2));
    OK(conn, hipd_kernel_destroy(conn, k1));
    vecadd_run(conn, dev, k2, 500, HIPD_STREAM_NULL);
    hipd_args_i32(args, 0);
    EXPECT(conn,
           hipd_kernel_launch(conn, k1, ONE, ONE, 0, HIPD_STREAM_NULL, args),
           HIPD_ESTALE);
    EXPECT(conn, hipd_kernel_info(conn, k1, &info), HIPD_ESTALE);
    EXPECT(conn, hipd_kernel_destroy(conn, k1), HIPD_ESTALE);
    /* Launches queued just before a destroy still run. */
    {
      hipd_kernel_t k3 = compile(conn, dev, VECADD_SRC, "vecadd", NULL);
      hipd_buffer_t b = float_buffer(conn, dev, 1, NULL);
      float one = 1.0f, v = 0;
      hipd_call_t *call = NULL;
      OK(conn, hipd_mem_write(conn, b, 0, &one, sizeof(one)));
      hipd_args_clear(args);
      hipd_args_buffer(args, b, 0);
      hipd_args_buffer(args, b, 0);
      hipd_args_buffer(args, b, 0);
      hipd_args_i32(args, 1);
      OK(conn, hipd_kernel_launch_begin(conn, k3, ONE, ONE, 0, HIPD_STREAM_NULL,
                                        args, &call));
      OK(conn, hipd_kernel_destroy(conn, k3));
      OK(conn, hipd_wait(call));
      OK(conn, hipd_device_synchronize(conn, dev));
      OK(conn, hipd_mem_read(conn, b, 0, &v, sizeof(v)));
      ck_assert(v == 2.0f);
      OK(conn, hipd_mem_free(conn, b));
    }
    vecadd_run(conn, dev, k2, 10, HIPD_STREAM_NULL);
    OK(conn, hipd_kernel_destroy(conn, k2));
    /* Not a kernel handle at all. */
    EXPECT(conn,
           hipd_kernel_launch(conn, HIPD_KERNEL_NULL, ONE, ONE, 0,
                              HIPD_STREAM_NULL, args),
           HIPD_EHANDLE);
    hipd_args_free(args);
  }
  hipd_close(conn);
}
END_TEST

/* compile_for: compile for an architecture without a device. */
START_TEST(test_compile_for_host)
{
  hipd_conn_t *conn = connect_to(shared);
  int dev = first_cpu_device(conn);
  hipd_info_t *info = NULL;
  char arch[64];
  uint64_t h = 0;

  ck_assert_int_ge(dev, 0);
  OK(conn, hipd_device_get(conn, dev, &info));
  snprintf(arch, sizeof(arch), "%s", info_str(info, "arch"));
  hipd_info_free(info);
  ck_assert_msg(strncmp(arch, "host", 4) == 0, "CPU arch %s", arch);

  OK(conn,
     hipd_kernel_compile_for(conn, arch, VECADD_SRC, "vecadd", NULL, 1, &info));
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  ck_assert_uint_eq(strlen(info_str(info, "key")), 64);
  /* No kernel: nothing was loaded. */
  ck_assert_int_eq(hipd_info_uint(info, "kernel", &h), HIPD_EHANDLETYPE);
  hipd_info_free(info);
  /* And then loading it on the device is a cache hit. */
  {
    hipd_kernel_t k = compile(conn, dev, VECADD_SRC, "vecadd", &info);
    ck_assert_str_eq(info_str(info, "cache"), "memory");
    hipd_info_free(info);
    vecadd_run(conn, dev, k, 64, HIPD_STREAM_NULL);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  /* Options reach the compiler, and are part of the key. */
  {
    static const char src[] =
        "extern \"C\" __global__ void axb(const float *a, float *b)\n"
        "{\n"
        "  b[threadIdx.x] += FACTOR * a[threadIdx.x];\n"
        "}\n";
    const char *const opts[] = {"-DFACTOR=3", "-O2", NULL};
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
    uint32_t block[3] = {4, 1, 1};
    hipd_buffer_t ba = float_buffer(conn, dev, 4, a);
    hipd_buffer_t bb = float_buffer(conn, dev, 4, b);
    hipd_args_t *args = args_new();
    hipd_kernel_t k = HIPD_KERNEL_NULL;

    EXPECT(conn,
           hipd_kernel_compile_cached(conn, dev, src, "axb", NULL, &k, NULL),
           HIPD_ECOMPILE);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "FACTOR"));
    OK(conn, hipd_kernel_compile_cached(conn, dev, src, "axb", opts, &k, NULL));
    hipd_args_buffer(args, ba, 0);
    hipd_args_buffer(args, bb, 0);
    OK(conn,
       hipd_kernel_launch(conn, k, ONE, block, 0, HIPD_STREAM_NULL, args));
    OK(conn, hipd_mem_read(conn, bb, 0, b, sizeof(b)));
    for (int i = 0; i < 4; i++)
      ck_assert(b[i] == 1 + 3 * a[i]);
    hipd_args_free(args);
    OK(conn, hipd_mem_free(conn, ba));
    OK(conn, hipd_mem_free(conn, bb));
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  OK(conn,
     hipd_kernel_compile_for(conn, arch, VECADD_SRC, "vecadd", NULL, 1, NULL));
  EXPECT(
      conn,
      hipd_kernel_compile_for(conn, arch, BROKEN_SRC, "broken", NULL, 1, &info),
      HIPD_ECOMPILE);
  ck_assert(names_line_3(hipd_last_error(conn)));
  EXPECT(conn,
         hipd_kernel_compile_for(conn, "no-such-arch", VECADD_SRC, "vecadd",
                                 NULL, 1, &info),
         HIPD_ENOTSUP);
  EXPECT(
      conn,
      hipd_kernel_compile_for(conn, NULL, VECADD_SRC, "vecadd", NULL, 1, &info),
      HIPD_EINVAL);
  hipd_close(conn);
}
END_TEST

/* hiprtc compiles for AMD GPUs without one: the daemon of an AMD build
 * takes gfx targets on any host. */
START_TEST(test_compile_for_amd)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  int dev = -1;

  OK(conn, hipd_daemon_info(conn, &info));
  if (!info_has_str(info, "features", "hip-amd")) {
    printf("check_kernels: this hipd is not built for AMD HIP (no hip-amd "
           "feature): compile_for gfx90a not tested\n");
    hipd_info_free(info);
    hipd_close(conn);
    return;
  }
  hipd_info_free(info);
  OK(conn, hipd_kernel_compile_for(conn, "gfx90a", VECADD_SRC, "vecadd", NULL,
                                   1, &info));
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  ck_assert_uint_eq(strlen(info_str(info, "key")), 64);
  hipd_info_free(info);
  /* C++ names through hiprtc's name expressions. */
  OK(conn, hipd_kernel_compile_for(conn, "gfx90a", CXX_SRC, "axpy<float>", NULL,
                                   1, &info));
  ck_assert_int_gt(info_int(info, "bytes"), 0);
  hipd_info_free(info);
  EXPECT(conn,
         hipd_kernel_compile_for(conn, "gfx90a", BROKEN_SRC, "broken", NULL, 1,
                                 &info),
         HIPD_ECOMPILE);
  ck_assert_msg(names_line_3(hipd_last_error(conn)),
                "the log does not name line 3: %s", hipd_last_error(conn));
  ck_assert_ptr_nonnull(
      strstr(hipd_last_error(conn), "this_name_is_not_declared"));
  hipd_close(conn);
}
END_TEST

static Suite *kernels_errors_suite(void)
{
  Suite *s = suite_create("kernels_errors");
  TCase *tc;

  tc = tcase_create("errors");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_compile_errors);
  tcase_add_test(tc, test_launch_limits);
  tcase_add_test(tc, test_signature);
  tcase_add_test(tc, test_args_limits);
  tcase_add_test(tc, test_raw_pointers);
  tcase_add_test(tc, test_destroy);
  suite_add_tcase(s, tc);

  tc = tcase_create("compile_for");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_compile_for_host);
  tcase_add_test(tc, test_compile_for_amd);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return kernels_main("check_kernels_errors", kernels_errors_suite);
}
