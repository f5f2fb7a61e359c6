/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_good.c: the well-behaved session: libhipd in a
 * thread of its own, allocating, writing, launching, reading back and comparing
 * the whole time (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

/* ------------------------------------------------- the well-behaved one */

volatile int good_stop;

volatile uint64_t good_rounds, good_ops;

char good_fail[2048];

static const char *GOOD_SRC =
    "extern \"C\" __global__ void good(unsigned *y, const unsigned *x,\n"
    "                                  unsigned a, int n)\n"
    "{\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n)\n"
    "    y[i] = y[i] * 3u + x[i] + a;\n"
    "}\n";

#define GOOD(conn, expr)                                                       \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    good_ops++;                                                                \
    if (rc_ != 0) {                                                            \
      snprintf(good_fail, sizeof(good_fail), "round %llu: %s -> %s (%s)",      \
               (unsigned long long)good_rounds, #expr, hipd_err_name(rc_),     \
               hipd_last_error(conn));                                         \
      goto out;                                                                \
    }                                                                          \
  } while (0)

#define GOOD_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      int n_ = snprintf(good_fail, sizeof(good_fail),                          \
                        "round %llu: ", (unsigned long long)good_rounds);      \
      snprintf(good_fail + n_, sizeof(good_fail) - (size_t)n_, __VA_ARGS__);   \
      goto out;                                                                \
    }                                                                          \
  } while (0)

/* One connection's life: kernels on both devices, then rounds until
 * @p rounds are done or the fuzzer stops. @return 0, or -1 (good_fail). */

static int good_session(rng_t *gr, int rounds)
{
  hipd_conn_t *conn = NULL;
  hipd_kernel_t k[NDEV] = {0};
  hipd_shm_t *shm = NULL;
  hipd_args_t *args = hipd_args_new();
  uint32_t *x = NULL, *y = NULL, *back = NULL;
  int rc = -1;

  GOOD(NULL, hipd_connect2(daemon_->socket, "protofuzz-good", &conn));
  hipd_set_timeout(conn, 120000);
  for (int d = 0; d < NDEV; d++) {
    /* The fuzzer is the same uid: its compiles can fill the uid's share
     * of the compile queue (--tenant-max-compiles), which answers EBUSY,
     * and a well-behaved client tries again a little later. */
    int crc, tries = 0;
    while ((crc = hipd_kernel_compile_cached(conn, d, GOOD_SRC, "good", NULL,
                                             &k[d], NULL)) == HIPD_EBUSY &&
           tries++ < 1200)
      usleep(50000);
    GOOD(conn, crc);
  }
  GOOD(conn, hipd_shm_create(conn, 65536, &shm));
  for (int round = 0; round < rounds && !good_stop; round++, good_rounds++) {
    int dev = (int)(rng_next(gr) % NDEV);
    int n = 1 + (int)(rng_next(gr) % 4096);
    uint32_t a = (uint32_t)rng_next(gr);
    hipd_buffer_t bx = HIPD_BUFFER_NULL, by = HIPD_BUFFER_NULL;
    hipd_stream_t s = HIPD_STREAM_NULL;
    hipd_event_t e0 = HIPD_EVENT_NULL, e1 = HIPD_EVENT_NULL;
    float ms = -1;
    int idle = 0;
    char pong[16];
    size_t pong_len = 0;

    x = malloc(4 * (size_t)n);
    y = malloc(4 * (size_t)n);
    back = malloc(4 * (size_t)n);
    for (int i = 0; i < n; i++) {
      x[i] = (uint32_t)rng_next(gr);
      y[i] = (uint32_t)rng_next(gr);
    }
    GOOD(conn, hipd_ping(conn, "good", 4, pong, sizeof(pong), &pong_len));
    GOOD_CHECK(pong_len == 4 && memcmp(pong, "good", 4) == 0, "ping echo");
    GOOD(conn, hipd_mem_alloc(conn, dev, (uint64_t)n, "uint32", &bx));
    GOOD(conn, hipd_mem_alloc(conn, dev, (uint64_t)n, "uint32", &by));
    GOOD(conn, hipd_stream_create(conn, dev, &s));
    GOOD(conn, hipd_event_create(conn, dev, &e0));
    GOOD(conn, hipd_event_create(conn, dev, &e1));
    GOOD(conn, hipd_mem_write(conn, bx, 0, x, 4 * (size_t)n));
    GOOD(conn, hipd_mem_write_async(conn, by, 0, y, 4 * (size_t)n, s));
    GOOD(conn, hipd_event_record(conn, e0, s));
    hipd_args_clear(args);
    hipd_args_buffer(args, by, 0);
    hipd_args_buffer(args, bx, 0);
    hipd_args_i32(args, (int32_t)a);
    hipd_args_i32(args, n);
    uint32_t grid[3] = {(uint32_t)(n + 127) / 128, 1, 1},
             block[3] = {128, 1, 1};
    GOOD(conn, hipd_kernel_launch(conn, k[dev], grid, block, 0, s, args));
    GOOD(conn, hipd_event_record(conn, e1, s));
    GOOD(conn, hipd_event_synchronize(conn, e1));
    GOOD(conn, hipd_event_elapsed(conn, e0, e1, &ms));
    GOOD_CHECK(ms >= 0, "event.elapsed %f ms between marks in order", ms);
    GOOD(conn, hipd_mem_read_async(conn, by, 0, back, 4 * (size_t)n, s));
    for (int i = 0; i < n; i++)
      GOOD_CHECK(back[i] == y[i] * 3u + x[i] + a,
                 "device %d: y[%d] = %u after the kernel, expected %u", dev, i,
                 back[i], y[i] * 3u + x[i] + a);
    GOOD(conn, hipd_stream_synchronize(conn, s));
    GOOD(conn, hipd_stream_query(conn, s, &idle));
    GOOD_CHECK(idle == 1, "stream.query after stream.synchronize: %d", idle);
    /* memset then copy into y, read back. */
    int half = n / 2;
    GOOD(conn, hipd_mem_memset(conn, bx, 0, 4 * (size_t)half, 0xab));
    GOOD(conn, hipd_mem_copy(conn, by, 0, bx, 0, 4 * (size_t)n));
    GOOD(conn, hipd_mem_read(conn, by, 0, back, 4 * (size_t)n));
    for (int i = 0; i < n; i++)
      GOOD_CHECK(back[i] == (i < half ? 0xababababu : x[i]),
                 "device %d: y[%d] = %08x after memset and copy", dev, i,
                 back[i]);
    /* Through the shared buffer. */
    uint8_t *sp = hipd_shm_ptr(shm);
    size_t sl = 4 * (size_t)n < 32768 ? 4 * (size_t)n : 32768;
    for (size_t i = 0; i < sl; i++)
      sp[i] = (uint8_t)(i * 7 + round);
    GOOD(conn, hipd_mem_write_shm(conn, by, 0, shm, 0, sl));
    GOOD(conn, hipd_mem_read_shm(conn, by, 0, shm, 32768, sl));
    for (size_t i = 0; i < sl; i++)
      GOOD_CHECK(sp[32768 + i] == (uint8_t)(i * 7 + round),
                 "device %d: shared byte %zu after write_shm/read_shm", dev, i);
    /* The session's resources are what it holds. */
    hipd_info_t *info = NULL;
    int64_t nb = -1;
    GOOD(conn, hipd_session_info(conn, &info));
    hipd_info_int(info, "resources.buffers", &nb);
    hipd_info_free(info);
    GOOD_CHECK(nb == 2, "session.info resources.buffers = %lld, holds 2",
               (long long)nb);
    GOOD(conn, hipd_event_destroy(conn, e0));
    GOOD(conn, hipd_event_destroy(conn, e1));
    GOOD(conn, hipd_stream_destroy(conn, s));
    GOOD(conn, hipd_mem_free(conn, bx));
    GOOD(conn, hipd_mem_free(conn, by));
    free(x);
    free(y);
    free(back);
    x = y = back = NULL;
  }
  rc = 0;
out:
  free(x);
  free(y);
  free(back);
  if (shm != NULL && conn != NULL)
    hipd_shm_free(conn, shm);
  hipd_args_free(args);
  if (conn != NULL)
    hipd_close(conn);
  return rc;
}

void *good_main(void *arg)
{
  rng_t gr = {.s = opt.seed ^ 0x600d600d600dull};

  (void)arg;
  while (!good_stop)
    if (good_session(&gr, 10 + (int)(rng_next(&gr) % 30)) != 0)
      break;
  return NULL;
}
