/* SPDX-License-Identifier: MIT */
/* tests/check_codegen_run.c: kernels generated from the Sarek IR, end to
 * end: a real hipd over a real socket generates, compiles (through the
 * cache) and launches each fixture of tests/codegen, and the results are
 * compared with references computed here in C.
 *
 * Every runtime test runs on every device the daemon serves (it is started
 * with --cpu-devices 2; on a GPU host the HIP devices come first and run
 * the same fixtures). hiprtc compiles every fixture for an AMD target
 * (gfx90a) when hipd is built for AMD HIP, for the GPU's own architecture
 * when it is built for NVIDIA.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "ir_json.h"
#define MAX_DEVICES 64
#define TESTUTIL_CLIENT "check_codegen_run"
#define TESTUTIL_TIMEOUT_MS 120000
#define TESTUTIL_MAX_DEVICES MAX_DEVICES
#include "testutil.h"

#ifndef FIXTURES_DIR
#error "FIXTURES_DIR must name tests/codegen"
#endif

static harness_daemon_t *shared;
static char shared_cache[256];

static const uint32_t ONE[3] = {1, 1, 1};

/* --------------------------------------------------------------- helpers */

/* A fixture: its IR as msgpack bytes and the generator options its
 * annotations give. */
typedef struct {
  char *ir;
  size_t len;
  const char *soa[8];
  char *soa_names[8];
  int nsoa;
  uint32_t block[3];
  int has_block;
  struct {
    char name[256], code[1100], conv[16];
    int arity;
  } reg[8];
  int nreg;
} fixture_t;

static char *fixture_text(const char *name, const char *ext, size_t *len)
{
  char path[512];
  char *text;

  snprintf(path, sizeof(path), "%s/%s%s", FIXTURES_DIR, name, ext);
  text = ir_json_read_file(path, len);
  ck_assert_msg(text != NULL, "%s: %s", path, strerror(errno));
  return text;
}

static msgpack_object annotation(const char *text, const char *key,
                                 msgpack_zone *zone, msgpack_sbuffer *buf)
{
  msgpack_object o = {.type = MSGPACK_OBJECT_NIL};
  char err[300];
  int rc;

  msgpack_sbuffer_init(buf);
  rc = ir_json_member(text, strlen(text), key, buf, err, sizeof(err));
  ck_assert_msg(rc >= 0, "%s", err);
  if (rc == 1)
    ck_assert_int_eq(msgpack_unpack(buf->data, buf->size, NULL, zone, &o),
                     MSGPACK_UNPACK_SUCCESS);
  return o;
}

static void fixture_load(const char *name, fixture_t *f)
{
  size_t len;
  char *text = fixture_text(name, ".ir.json", &len), err[300];
  msgpack_sbuffer mp, b1, b2, b3;
  msgpack_zone zone;
  msgpack_object o;

  memset(f, 0, sizeof(*f));
  msgpack_sbuffer_init(&mp);
  ck_assert_msg(ir_json_to_msgpack(text, len, &mp, err, sizeof(err)) == 0,
                "%s: %s", name, err);
  f->ir = mp.data; /* the sbuffer's memory is the caller's now */
  f->len = mp.size;
  msgpack_zone_init(&zone, 4096);
  o = annotation(text, "_soa_params", &zone, &b1);
  for (uint32_t i = 0; o.type == MSGPACK_OBJECT_ARRAY && i < o.via.array.size;
       i++) {
    f->soa_names[i] = strndup(o.via.array.ptr[i].via.str.ptr,
                              o.via.array.ptr[i].via.str.size);
    f->soa[i] = f->soa_names[i];
    f->nsoa = (int)i + 1;
  }
  o = annotation(text, "_block", &zone, &b2);
  if (o.type == MSGPACK_OBJECT_ARRAY) {
    f->has_block = 1;
    for (int i = 0; i < 3; i++)
      f->block[i] = (uint32_t)o.via.array.ptr[i].via.u64;
  }
  o = annotation(text, "_register", &zone, &b3);
  for (uint32_t i = 0; o.type == MSGPACK_OBJECT_ARRAY && i < o.via.array.size;
       i++) {
    msgpack_object *r = o.via.array.ptr[i].via.array.ptr;
    snprintf(f->reg[i].name, sizeof(f->reg[i].name), "%.*s",
             (int)r[0].via.str.size, r[0].via.str.ptr);
    snprintf(f->reg[i].code, sizeof(f->reg[i].code), "%.*s",
             (int)r[1].via.str.size, r[1].via.str.ptr);
    snprintf(f->reg[i].conv, sizeof(f->reg[i].conv), "%.*s",
             (int)r[2].via.str.size, r[2].via.str.ptr);
    f->reg[i].arity =
        o.via.array.ptr[i].via.array.size > 3 ? (int)r[3].via.u64 : -1;
    f->nreg = (int)i + 1;
  }
  msgpack_sbuffer_destroy(&b1);
  msgpack_sbuffer_destroy(&b2);
  msgpack_sbuffer_destroy(&b3);
  msgpack_zone_destroy(&zone);
  free(text);
}

static void fixture_free(fixture_t *f)
{
  free(f->ir);
  for (int i = 0; i < f->nsoa; i++)
    free(f->soa_names[i]);
}

static const char *const *fixture_soa(fixture_t *f)
{
  f->soa[f->nsoa] = NULL;
  return f->nsoa ? f->soa : NULL;
}

static hipd_convergence_t conv_of(const char *s)
{
  return strcmp(s, "sync") == 0        ? HIPD_CONV_SYNC
         : strcmp(s, "divergent") == 0 ? HIPD_CONV_DIVERGENT
                                       : HIPD_CONV_UNIFORM;
}

/* Register the fixture's intrinsics on this session. */
static void fixture_register(hipd_conn_t *conn, const fixture_t *f)
{
  int dev = -1;

  for (int i = 0; i < f->nreg; i++)
    OK(conn,
       hipd_intrinsics_register(conn, f->reg[i].name, f->reg[i].code,
                                conv_of(f->reg[i].conv), f->reg[i].arity));
}

/* Generate, compile and load fixture @p name on @p dev. */
static hipd_kernel_t compile_fixture(hipd_conn_t *conn, int dev,
                                     const char *name, hipd_info_t **info)
{
  fixture_t f;
  hipd_kernel_t k = HIPD_KERNEL_NULL;

  fixture_load(name, &f);
  fixture_register(conn, &f);
  OK(conn, hipd_kernel_compile_ir(conn, dev, f.ir, f.len,
                                  f.has_block ? f.block : NULL, fixture_soa(&f),
                                  NULL, &k, info));
  ck_assert_uint_ne(hipd_kernel_id(k), 0);
  fixture_free(&f);
  return k;
}

static hipd_buffer_t buffer(hipd_conn_t *conn, int dev, size_t bytes,
                            const void *data)
{
  hipd_buffer_t b = HIPD_BUFFER_NULL;

  OK(conn, hipd_mem_alloc(conn, dev, bytes, "byte", &b));
  if (data != NULL)
    OK(conn, hipd_mem_write(conn, b, 0, data, bytes));
  else
    OK(conn, hipd_mem_memset(conn, b, 0, bytes, 0));
  return b;
}

static void readback(hipd_conn_t *conn, int dev, hipd_buffer_t b, void *out,
                     size_t bytes)
{
  OK(conn, hipd_mem_read(conn, b, 0, out, bytes));
  OK(conn, hipd_mem_free(conn, b));
}

/* A buffer argument followed by its length (a vec param). */
static void arg_vec(hipd_args_t *a, hipd_buffer_t b, int n)
{
  hipd_args_buffer(a, b, 0);
  hipd_args_i32(a, n);
}

static int close_to(double got, double want, double rel)
{
  return fabs(got - want) <= rel * (fabs(want) > 1 ? fabs(want) : 1);
}

/* --------------------------------------------------------- the fixtures */

static void run_vec_add(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 1000 };
  float *a = xmalloc(N * 4), *b = xmalloc(N * 4), *c = xmalloc(N * 4);
  hipd_buffer_t ba, bb, bc;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};

  for (int i = 0; i < N; i++) {
    a[i] = (float)i * 0.5f;
    b[i] = (float)(1000 - i);
  }
  ba = buffer(conn, dev, N * 4, a);
  bb = buffer(conn, dev, N * 4, b);
  bc = buffer(conn, dev, N * 4, NULL);
  arg_vec(args, ba, N);
  arg_vec(args, bb, N);
  arg_vec(args, bc, N);
  hipd_args_i32(args, N - 10); /* the last 10 stay 0 */
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bc, c, N * 4);
  for (int i = 0; i < N; i++)
    ck_assert_msg(c[i] == (i < N - 10 ? a[i] + b[i] : 0.0f),
                  "device %d: c[%d] = %g", dev, i, c[i]);
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  hipd_args_free(args);
  free(a);
  free(b);
  free(c);
}

static void run_math_map(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 512 };
  float *x = xmalloc(N * 4), *y = xmalloc(N * 4);
  double *z = xmalloc(N * 8);
  hipd_buffer_t bx, by, bz;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {N / 64, 1, 1}, block[3] = {64, 1, 1};

  for (int i = 0; i < N; i++)
    x[i] = -3.0f + 6.0f * (float)i / N;
  bx = buffer(conn, dev, N * 4, x);
  by = buffer(conn, dev, N * 4, NULL);
  bz = buffer(conn, dev, N * 8, NULL);
  arg_vec(args, bx, N);
  arg_vec(args, by, N);
  arg_vec(args, bz, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, by, y, N * 4);
  readback(conn, dev, bz, z, N * 8);
  for (int i = 0; i < N; i++) {
    float v = x[i];
    float wy =
        ((sqrtf(fabsf(v)) + sinf(v) * cosf(v)) +
         (expf(-(v * v)) + powf(v, 2.0f))) +
        ((fmaxf(v, 0.5f) - fminf(v, -0.5f)) +
         (fmaf(v, 2.0f, 1.25f) + (floorf(v) + (atan2f(v, 1.0f) + tanhf(v)))));
    double wz = (double)v * 3.0 + (log((double)fabsf(v) + 1.0) + cbrt(v));
    /* GPU math functions may differ from the host's by a few ulps, and
     * compilers may contract a * b + c into an fma */
    ck_assert_msg(close_to(y[i], wy, 1e-4), "device %d: y[%d] = %.9g, not %.9g",
                  dev, i, y[i], wy);
    ck_assert_msg(close_to(z[i], wz, 1e-12),
                  "device %d: z[%d] = %.17g, not %.17g", dev, i, z[i], wz);
  }
  OK(conn, hipd_mem_free(conn, bx));
  hipd_args_free(args);
  free(x);
  free(y);
  free(z);
}

/* Every built-in math intrinsic, on floats and on doubles. */
static void run_math_all(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 64, K = 27 };
  float x[N], *r32 = xmalloc(N * K * 4);
  double xd[N], *r64 = xmalloc(N * K * 8);
  hipd_buffer_t bx, bxd, b32, b64;
  hipd_args_t *args = args_new();
  uint32_t block[3] = {N, 1, 1};

  for (int i = 0; i < N; i++) {
    x[i] = 0.1f + 0.8f * (float)i / N;
    xd[i] = 0.1 + 0.8 * i / N;
  }
  bx = buffer(conn, dev, sizeof(x), x);
  bxd = buffer(conn, dev, sizeof(xd), xd);
  b32 = buffer(conn, dev, N * K * 4, NULL);
  b64 = buffer(conn, dev, N * K * 8, NULL);
  arg_vec(args, bx, N);
  arg_vec(args, bxd, N);
  arg_vec(args, b32, N * K);
  arg_vec(args, b64, N * K);
  OK(conn, hipd_kernel_launch(conn, k, ONE, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, b32, r32, N * K * 4);
  readback(conn, dev, b64, r64, N * K * 8);
  for (int i = 0; i < N; i++) {
    float v = x[i];
    double w = xd[i];
    const float f[K] = {sinf(v),         cosf(v),          tanf(v),
                        asinf(v),        acosf(v),         atanf(v),
                        sinhf(v),        coshf(v),         tanhf(v),
                        expf(v),         exp2f(v),         logf(v),
                        log2f(v),        log10f(v),        sqrtf(v),
                        1.0f / sqrtf(v), cbrtf(v),         floorf(v),
                        ceilf(v),        roundf(v),        truncf(v),
                        fabsf(v),        atan2f(v, 0.75f), powf(v, 0.75f),
                        fminf(v, 0.75f), fmaxf(v, 0.75f),  fmaf(v, 2.0f, 0.5f)};
    const double d[K] = {
        sin(w),        cos(w),        tan(w),          asin(w),
        acos(w),       atan(w),       sinh(w),         cosh(w),
        tanh(w),       exp(w),        exp2(w),         log(w),
        log2(w),       log10(w),      sqrt(w),         1.0 / sqrt(w),
        cbrt(w),       floor(w),      ceil(w),         round(w),
        trunc(w),      fabs(w),       atan2(w, 0.75),  pow(w, 0.75),
        fmin(w, 0.75), fmax(w, 0.75), fma(w, 2.0, 0.5)};
    for (int j = 0; j < K; j++) {
      ck_assert_msg(close_to(r32[i * K + j], f[j], 2e-5),
                    "device %d: float function %d of %.9g = %.9g, not %.9g",
                    dev, j, v, r32[i * K + j], f[j]);
      ck_assert_msg(close_to(r64[i * K + j], d[j], 1e-13),
                    "device %d: double function %d of %.17g = %.17g, not "
                    "%.17g",
                    dev, j, w, r64[i * K + j], d[j]);
    }
  }
  OK(conn, hipd_mem_free(conn, bx));
  OK(conn, hipd_mem_free(conn, bxd));
  hipd_args_free(args);
  free(r32);
  free(r64);
}

static void run_reduce_shared(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 1000, B = 256, G = (N + B - 1) / B };
  int *in = xmalloc(N * 4), partial[G], total = 0, want[G] = {0}, sum = 0;
  hipd_buffer_t bi, bp, bt;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {G, 1, 1}, block[3] = {B, 1, 1}, big[3] = {512, 1, 1};

  for (int i = 0; i < N; i++) {
    in[i] = i % 7 - 3 + (i % 13 == 0 ? 100 : 0);
    want[i / B] += in[i];
    sum += in[i];
  }
  bi = buffer(conn, dev, N * 4, in);
  bp = buffer(conn, dev, G * 4, NULL);
  bt = buffer(conn, dev, 4, NULL);
  arg_vec(args, bi, N);
  arg_vec(args, bp, G);
  arg_vec(args, bt, 1);
  hipd_args_i32(args, N);
  /* generated for blocks of 256 threads: a larger block is refused */
  EXPECT(conn,
         hipd_kernel_launch(conn, k, grid, big, 0, HIPD_STREAM_NULL, args),
         HIPD_ELIMIT);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "at most 256"));
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bp, partial, sizeof(partial));
  readback(conn, dev, bt, &total, 4);
  for (int g = 0; g < G; g++)
    ck_assert_msg(partial[g] == want[g], "device %d: block %d sums %d, not %d",
                  dev, g, partial[g], want[g]);
  ck_assert_int_eq(total, sum);
  OK(conn, hipd_mem_free(conn, bi));
  hipd_args_free(args);
  free(in);
}

/* The C layout of the fixture's records. */
typedef struct {
  float x, y;
} vec2_t;
typedef struct {
  vec2_t pos;
  double mass;
  int id;
  int alive;
} particle_t;

static void run_record_particles(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 300 };
  particle_t *p = xmalloc(N * sizeof(*p)), *q = xmalloc(N * sizeof(*q));
  float *norm = xmalloc(N * 4);
  hipd_buffer_t bp, bn;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {(N + 127) / 128, 1, 1}, block[3] = {128, 1, 1};

  ck_assert_uint_eq(sizeof(particle_t), 24);
  for (int i = 0; i < N; i++) {
    p[i].pos.x = (float)i * 0.5f;
    p[i].pos.y = (float)-i;
    p[i].mass = i * 1.5;
    p[i].id = i;
    p[i].alive = 0;
  }
  bp = buffer(conn, dev, N * sizeof(*p), p);
  bn = buffer(conn, dev, N * 4, NULL);
  arg_vec(args, bp, N);
  arg_vec(args, bn, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bp, q, N * sizeof(*q));
  readback(conn, dev, bn, norm, N * 4);
  for (int i = 0; i < N; i++) {
    float wn = sqrtf(p[i].pos.x * p[i].pos.x + p[i].pos.y * p[i].pos.y);
    ck_assert_msg(q[i].pos.x == p[i].pos.y && q[i].pos.y == p[i].pos.x &&
                      q[i].mass == p[i].mass * 2.0 + 0.5 &&
                      q[i].id == p[i].id + 1 && q[i].alive == (p[i].id > 2),
                  "device %d: particle %d = {{%g, %g}, %g, %d, %d}", dev, i,
                  q[i].pos.x, q[i].pos.y, q[i].mass, q[i].id, q[i].alive);
    ck_assert_msg(close_to(norm[i], wn, 1e-5), "device %d: norm[%d] = %g", dev,
                  i, norm[i]);
  }
  hipd_args_free(args);
  free(p);
  free(q);
  free(norm);
}

/* The C layout of the fixture's variant. */
enum { CIRCLE, RECT, EMPTY };
typedef struct {
  int tag;
  union {
    float Circle_v;
    struct {
      float _0, _1;
    } Rect_v;
  } data;
} shape_t;

static void run_variant_shapes(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 90 };
  shape_t *s = xmalloc(N * sizeof(*s)), *t = xmalloc(N * sizeof(*t));
  float *area = xmalloc(N * 4);
  int *kind = xmalloc(N * 4);
  hipd_buffer_t bs, ba, bk;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {3, 1, 1}, block[3] = {32, 1, 1};

  ck_assert_uint_eq(sizeof(shape_t), 12);
  for (int i = 0; i < N; i++) {
    s[i].tag = i % 3;
    if (i % 3 == CIRCLE)
      s[i].data.Circle_v = (float)i * 0.1f;
    if (i % 3 == RECT) {
      s[i].data.Rect_v._0 = (float)i * 0.2f;
      s[i].data.Rect_v._1 = 0.5f;
    }
  }
  bs = buffer(conn, dev, N * sizeof(*s), s);
  ba = buffer(conn, dev, N * 4, NULL);
  bk = buffer(conn, dev, N * 4, NULL);
  arg_vec(args, bs, N);
  arg_vec(args, ba, N);
  arg_vec(args, bk, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bs, t, N * sizeof(*t));
  readback(conn, dev, ba, area, N * 4);
  readback(conn, dev, bk, kind, N * 4);
  for (int i = 0; i < N; i++) {
    float wa = s[i].tag == CIRCLE
                   ? 3.0f * (s[i].data.Circle_v * s[i].data.Circle_v)
               : s[i].tag == RECT ? s[i].data.Rect_v._0 * s[i].data.Rect_v._1
                                  : 0.0f;
    int wk = s[i].tag == CIRCLE ? 1 : s[i].tag == RECT ? 10 + (int)wa : 0;
    ck_assert_msg(area[i] == wa, "device %d: area[%d] = %g, not %g", dev, i,
                  area[i], wa);
    ck_assert_msg(kind[i] == wk, "device %d: kind[%d] = %d, not %d", dev, i,
                  kind[i], wk);
    if (wa > 10.0f)
      ck_assert_msg(t[i].tag == EMPTY, "device %d: s[%d].tag = %d", dev, i,
                    t[i].tag);
    else
      ck_assert_msg(t[i].tag == CIRCLE && t[i].data.Circle_v == wa,
                    "device %d: s[%d] = {%d, %g}", dev, i, t[i].tag,
                    t[i].data.Circle_v);
  }
  hipd_args_free(args);
  free(s);
  free(t);
  free(area);
  free(kind);
}

static int gcd(int x, int y)
{
  return y == 0 ? x : gcd(y, x % y);
}

static void run_helpers(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 200 };
  int a[N], b[N], g[N];
  float f[N], f2[N];
  hipd_buffer_t ba, bb, bg, bf;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {4, 1, 1}, block[3] = {64, 1, 1};

  for (int i = 0; i < N; i++) {
    a[i] = (i + 1) * 12;
    b[i] = (i % 9 + 1) * 8;
    f[i] = (float)i - 100.5f;
  }
  ba = buffer(conn, dev, sizeof(a), a);
  bb = buffer(conn, dev, sizeof(b), b);
  bg = buffer(conn, dev, sizeof(g), NULL);
  bf = buffer(conn, dev, sizeof(f), f);
  arg_vec(args, ba, N);
  arg_vec(args, bb, N);
  arg_vec(args, bg, N);
  arg_vec(args, bf, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bg, g, sizeof(g));
  readback(conn, dev, bf, f2, sizeof(f2));
  for (int i = 0; i < N; i++) {
    ck_assert_msg(g[i] == 2 * gcd(a[i], b[i]), "device %d: g[%d] = %d", dev, i,
                  g[i]);
    ck_assert_msg(f2[i] == f[i] * f[i], "device %d: f[%d] = %g", dev, i, f2[i]);
  }
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  hipd_args_free(args);
}

static void run_soa_points(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 100 };
  float x[N], y[N], wa[N], out[N];
  int wb[N];
  hipd_buffer_t bx, by, ba, bb, bo;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};

  for (int i = 0; i < N; i++) {
    x[i] = (float)i;
    y[i] = (float)(2 * i);
    wa[i] = 0.5f * (float)i;
    wb[i] = i;
  }
  bx = buffer(conn, dev, sizeof(x), x);
  by = buffer(conn, dev, sizeof(y), y);
  ba = buffer(conn, dev, sizeof(wa), wa);
  bb = buffer(conn, dev, sizeof(wb), wb);
  bo = buffer(conn, dev, sizeof(out), NULL);

  /* The packed (AoS) argument list is refused: the kernel's parameter
   * list is known, so the positional shift is caught. */
  hipd_args_buffer(args, bx, 0);
  hipd_args_i32(args, N);
  arg_vec(args, bo, N);
  EXPECT(conn,
         hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args),
         HIPD_ESIGNATURE);
  ck_assert_ptr_nonnull(
      strstr(hipd_last_error(conn), "takes 7 arguments, got 4"));
  /* So is a kind in the wrong place. */
  hipd_args_clear(args);
  hipd_args_buffer(args, bx, 0);
  hipd_args_buffer(args, by, 0);
  hipd_args_buffer(args, ba, 0);
  hipd_args_i32(args, N);
  hipd_args_buffer(args, bb, 0);
  arg_vec(args, bo, N);
  EXPECT(conn,
         hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args),
         HIPD_ESIGNATURE);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn),
                               "argument 3 is declared pointer; a i32 was "
                               "given"));

  hipd_args_clear(args);
  hipd_args_buffer(args, bx, 0);
  hipd_args_buffer(args, by, 0);
  hipd_args_buffer(args, ba, 0);
  hipd_args_buffer(args, bb, 0);
  hipd_args_i32(args, N);
  arg_vec(args, bo, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  {
    float x2[N], y2[N], wa2[N];
    int wb2[N];
    readback(conn, dev, bx, x2, sizeof(x2));
    readback(conn, dev, by, y2, sizeof(y2));
    readback(conn, dev, ba, wa2, sizeof(wa2));
    readback(conn, dev, bb, wb2, sizeof(wb2));
    readback(conn, dev, bo, out, sizeof(out));
    for (int i = 0; i < N; i++)
      ck_assert_msg(x2[i] == y[i] && y2[i] == x[i] && wa2[i] == wa[i] * 2 &&
                        wb2[i] == (wb[i] + 1) * 10 &&
                        out[i] == y[i] + wa[i] * 2,
                    "device %d: point %d = {%g, %g, {%g, %d}}, out %g", dev, i,
                    x2[i], y2[i], wa2[i], wb2[i], out[i]);
  }
  hipd_args_free(args);
}

static void run_ops(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  int a = -7, b = 3;
  float x = 2.75f;
  double y = 10.0;
  long long l = 1LL << 40;
  int oi[27];
  long long ol[5];
  float of[9];
  double od[7];
  const int wi[27] = {a + b,
                      a - b,
                      a * b,
                      a / b,
                      a % b,
                      a == b,
                      a != b,
                      a<b, a <= b, a>
                          b,
                      a >= b,
                      0,
                      0,
                      b << 3,
                      b >> 2,
                      a & b,
                      a | b,
                      a ^ b,
                      -a,
                      !(a > b),
                      ~a,
                      INT32_MIN,
                      2,
                      1,
                      0,
                      1,
                      2147483647 + a};
  const long long wl[5] = {INT64_MIN, 9007199254740993LL,
                           (long long)a * 4294967296LL, l - 1, INT64_MAX};
  hipd_buffer_t bi, bl, bf, bd;
  hipd_args_t *args = args_new();

  bi = buffer(conn, dev, sizeof(oi), NULL);
  bl = buffer(conn, dev, sizeof(ol), NULL);
  bf = buffer(conn, dev, sizeof(of), NULL);
  bd = buffer(conn, dev, sizeof(od), NULL);
  hipd_args_i32(args, a);
  hipd_args_i32(args, b);
  hipd_args_f32(args, x);
  hipd_args_f64(args, y);
  hipd_args_i64(args, l);
  hipd_args_i32(args, 1);
  arg_vec(args, bi, 27);
  arg_vec(args, bl, 5);
  arg_vec(args, bf, 9);
  arg_vec(args, bd, 7);
  OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bi, oi, sizeof(oi));
  readback(conn, dev, bl, ol, sizeof(ol));
  readback(conn, dev, bf, of, sizeof(of));
  readback(conn, dev, bd, od, sizeof(od));
  for (int i = 0; i < 27; i++)
    ck_assert_msg(oi[i] == wi[i], "device %d: oi[%d] = %d, not %d", dev, i,
                  oi[i], wi[i]);
  for (int i = 0; i < 5; i++)
    ck_assert_msg(ol[i] == wl[i], "device %d: ol[%d] = %lld, not %lld", dev, i,
                  ol[i], wl[i]);
  ck_assert_float_eq(of[0], x * 2.5f);
  ck_assert(isnan(of[1]));
  ck_assert(isinf(of[2]) && of[2] > 0);
  ck_assert(isinf(of[3]) && of[3] < 0);
  ck_assert_float_eq(of[4], 0.1f);
  ck_assert_float_eq(of[5], (float)y);
  ck_assert(of[6] == 0.0f && signbit(of[6]));
  ck_assert_float_eq(of[7], 1e-07f);
  ck_assert_float_eq(of[8], 16777216.0f);
  ck_assert_double_eq(od[0], y / 3.0);
  ck_assert(isnan(od[1]));
  ck_assert_double_eq(od[2], 1e300);
  ck_assert_double_eq(od[3], (double)a);
  ck_assert_double_eq(od[4], 0.1);
  ck_assert(isinf(od[5]) && od[5] < 0);
  ck_assert_double_eq(od[6], (double)l);
  hipd_args_free(args);
}

static void run_control(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  int out[6], w1 = 0, w = 10;
  hipd_buffer_t bo = buffer(conn, dev, sizeof(out), NULL);
  hipd_args_t *args = args_new();

  for (int i = 10; i >= 1; i--)
    w1 = w1 * 2 + i;
  while (w > 1)
    w = w % 2 == 0 ? w / 2 : w * 3 + 1;
  hipd_args_i32(args, 10);
  arg_vec(args, bo, 6);
  OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bo, out, sizeof(out));
  ck_assert_int_eq(out[0], 55);
  ck_assert_int_eq(out[1], w1);
  ck_assert_int_eq(out[2], 3 + 30); /* the loops at INT_MAX and INT_MIN end */
  ck_assert_int_eq(out[3], w);
  ck_assert_int_eq(out[4], 42); /* the native HIP code, not the CUDA one */
  ck_assert_int_eq(out[5], 43);
  hipd_args_free(args);
}

static void run_arrays(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { T = 64 };
  int data[T], raw[T], out[T];
  hipd_buffer_t bd, br, bo;
  hipd_args_t *args = args_new();
  uint32_t block[3] = {T, 1, 1};

  for (int t = 0; t < T; t++) {
    data[t] = 3 * t;
    raw[t] = 100 + t;
  }
  bd = buffer(conn, dev, sizeof(data), data);
  br = buffer(conn, dev, sizeof(raw), raw);
  bo = buffer(conn, dev, sizeof(out), NULL);
  arg_vec(args, bd, T);          /* data: arrinfo, so a length */
  hipd_args_buffer(args, br, 0); /* raw: none */
  arg_vec(args, bo, T);
  OK(conn, hipd_kernel_launch(conn, k, ONE, block, T * sizeof(float),
                              HIPD_STREAM_NULL, args));
  readback(conn, dev, bo, out, sizeof(out));
  for (int t = 0; t < T; t++) {
    int tmp = data[63 - t] + raw[t ^ 1];
    int want = (tmp + T) + (1000 - t);
    ck_assert_msg(out[t] == want, "device %d: out[%d] = %d, not %d", dev, t,
                  out[t], want);
  }
  OK(conn, hipd_mem_free(conn, bd));
  OK(conn, hipd_mem_free(conn, br));
  hipd_args_free(args);
}

static void run_names(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  int out[5];
  hipd_buffer_t bo = buffer(conn, dev, sizeof(out), NULL);
  hipd_args_t *args = args_new();
  static const int want[5] = {605, 49, 49, 13, 42};

  arg_vec(args, bo, 5);
  OK(conn, hipd_kernel_launch(conn, k, ONE, ONE, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bo, out, sizeof(out));
  for (int i = 0; i < 5; i++)
    ck_assert_msg(out[i] == want[i], "device %d: out[%d] = %d, not %d", dev, i,
                  out[i], want[i]);
  hipd_args_free(args);
}

static void run_intrinsics(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { NT = 16 };
  int ids[NT * 16], counters[7] = {0, 0, 0, 0, 0, 1000, -1};
  float fl[NT];
  hipd_buffer_t bi, bc, bf;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {2, 1, 1}, block[3] = {2, 2, 2};

  bi = buffer(conn, dev, sizeof(ids), NULL);
  bc = buffer(conn, dev, sizeof(counters), counters);
  bf = buffer(conn, dev, sizeof(fl), NULL);
  arg_vec(args, bi, NT * 16);
  arg_vec(args, bc, 7);
  arg_vec(args, bf, NT);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bi, ids, sizeof(ids));
  readback(conn, dev, bc, counters, sizeof(counters));
  readback(conn, dev, bf, fl, sizeof(fl));
  for (int bx = 0; bx < 2; bx++)
    for (int tz = 0; tz < 2; tz++)
      for (int ty = 0; ty < 2; ty++)
        for (int tx = 0; tx < 2; tx++) {
          int g = tx + 2 * (ty + 2 * (tz + 2 * bx)), *o = &ids[g * 16];
          int gx = tx + 2 * bx;
          const int want[16] = {
              tx,  ty,     tz,
              bx,  0,      222,
              211, gx,     gx,
              gx,  ty,     tz,
              4,   tx - 1, tx > ty ? (tx > tz ? tx : tz) : (ty > tz ? ty : tz),
              1};
          for (int j = 0; j < 16; j++)
            ck_assert_msg(o[j] == want[j],
                          "device %d: thread (%d,%d,%d) of block %d: value "
                          "%d is %d, not %d",
                          dev, tx, ty, tz, bx, j, o[j], want[j]);
          ck_assert_float_eq(fl[g], (float)g + 0.5f);
        }
  ck_assert_int_eq(counters[0], NT);
  ck_assert_int_eq(counters[1], NT * (NT - 1) / 2);
  ck_assert_int_eq(counters[2], 2 * NT);
  ck_assert_int_eq(counters[3], 4 * NT);
  ck_assert_int_eq(counters[4], -NT * (NT - 1) / 2);
  ck_assert_int_eq(counters[5], 0);
  ck_assert_int_eq(counters[6], NT - 1);
  hipd_args_free(args);
}

/* ------------------------------------------- upstream's golden kernels */

/* sarek/tests/codegen_golden: scalar_vec_add has no bounds check, so it
 * runs over exactly as many threads as elements. */
static void run_scalar_vec_add(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 512 };
  float a[N], b[N], c[N];
  hipd_buffer_t ba, bb, bc;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};

  for (int i = 0; i < N; i++) {
    a[i] = (float)i * 0.37f - 20.0f;
    b[i] = 1.0f / (float)(i + 1);
  }
  ba = buffer(conn, dev, sizeof(a), a);
  bb = buffer(conn, dev, sizeof(b), b);
  bc = buffer(conn, dev, sizeof(c), NULL);
  arg_vec(args, ba, N);
  arg_vec(args, bb, N);
  arg_vec(args, bc, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bc, c, sizeof(c));
  for (int i = 0; i < N; i++)
    ck_assert_msg(c[i] == a[i] + b[i], "device %d: c[%d] = %.9g, not %.9g", dev,
                  i, c[i], a[i] + b[i]);
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  hipd_args_free(args);
}

/* The C layout of record_kernel's Point2. */
typedef struct {
  float x, y;
} point2_t;

static void run_record_kernel(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 256 };
  point2_t p[N], q[N];
  hipd_buffer_t bp;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {2, 1, 1}, block[3] = {128, 1, 1};

  for (int i = 0; i < N; i++) {
    p[i].x = (float)i * 0.3f;
    p[i].y = 7.0f - (float)i * 1.1f;
  }
  bp = buffer(conn, dev, sizeof(p), p);
  arg_vec(args, bp, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bp, q, sizeof(q));
  for (int i = 0; i < N; i++)
    ck_assert_msg(q[i].x == p[i].x * 2.0f && q[i].y == p[i].y * 2.0f,
                  "device %d: pts[%d] = {%.9g, %.9g}, not {%.9g, %.9g}", dev, i,
                  q[i].x, q[i].y, p[i].x * 2.0f, p[i].y * 2.0f);
  hipd_args_free(args);
}

/* The C layout of variant_kernel's Opt (OptNone = 0, OptSome = 1). */
typedef struct {
  int tag;
  union {
    float OptSome_v;
  } data;
} opt_t;

static void run_variant_kernel(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 192 };
  int flags[N];
  opt_t out[N];
  hipd_buffer_t bf, bo;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {3, 1, 1}, block[3] = {64, 1, 1};

  ck_assert_uint_eq(sizeof(opt_t), 8);
  for (int i = 0; i < N; i++) {
    flags[i] = i % 3 == 0 ? 0 : i - 100; /* nonzero of either sign */
    out[i].tag = 7;                      /* neither constructor */
    out[i].data.OptSome_v = -1.0f;
  }
  bf = buffer(conn, dev, sizeof(flags), flags);
  bo = buffer(conn, dev, sizeof(out), out);
  arg_vec(args, bf, N);
  arg_vec(args, bo, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bo, out, sizeof(out));
  for (int i = 0; i < N; i++) {
    int want = flags[i] != 0;
    ck_assert_msg(out[i].tag == want, "device %d: out[%d].tag = %d, not %d",
                  dev, i, out[i].tag, want);
    if (want)
      ck_assert_msg(out[i].data.OptSome_v == 1.0f,
                    "device %d: out[%d] = OptSome %.9g, not OptSome 1", dev, i,
                    out[i].data.OptSome_v);
  }
  OK(conn, hipd_mem_free(conn, bf));
  hipd_args_free(args);
}

/* sin_kernel (path []) and float32_sin_path (path ["Float32"]): b = sin a
 * in float. */
static void run_sin(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 256 };
  float a[N], b[N];
  hipd_buffer_t ba, bb;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {4, 1, 1}, block[3] = {64, 1, 1};

  for (int i = 0; i < N; i++)
    a[i] = -4.0f + 8.0f * (float)i / N;
  ba = buffer(conn, dev, sizeof(a), a);
  bb = buffer(conn, dev, sizeof(b), NULL);
  arg_vec(args, ba, N);
  arg_vec(args, bb, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bb, b, sizeof(b));
  /* GPU sinf is within a few ulps of the host's */
  for (int i = 0; i < N; i++)
    ck_assert_msg(close_to(b[i], sinf(a[i]), 1e-6),
                  "device %d: b[%d] = %.9g, not sin(%.9g) = %.9g", dev, i, b[i],
                  a[i], sinf(a[i]));
  OK(conn, hipd_mem_free(conn, ba));
  hipd_args_free(args);
}

/* --------------------------------------------- upstream's benchmarks */

/* benchmarks/bench_vector_add.ml; n below the length leaves a tail. */
static void run_bench_vector_add(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 1000, TAIL = 5 };
  float *a = xmalloc(N * 4), *b = xmalloc(N * 4), *c = xmalloc(N * 4);
  hipd_buffer_t ba, bb, bc;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};

  for (int i = 0; i < N; i++) {
    a[i] = (float)i * 0.001f;
    b[i] = (float)i * 0.002f;
  }
  ba = buffer(conn, dev, N * 4, a);
  bb = buffer(conn, dev, N * 4, b);
  bc = buffer(conn, dev, N * 4, NULL);
  arg_vec(args, ba, N);
  arg_vec(args, bb, N);
  arg_vec(args, bc, N);
  hipd_args_i32(args, N - TAIL);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bc, c, N * 4);
  for (int i = 0; i < N; i++) {
    float want = i < N - TAIL ? a[i] + b[i] : 0.0f;
    ck_assert_msg(c[i] == want, "device %d: c[%d] = %.9g, not %.9g", dev, i,
                  c[i], want);
  }
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  hipd_args_free(args);
  free(a);
  free(b);
  free(c);
}

/* sarek/tests/e2e/test_stencil.ml: the ends keep what was there. */
static void run_bench_stencil_1d(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 1000 };
  float *in = xmalloc(N * 4), *out = xmalloc(N * 4);
  hipd_buffer_t bi, bo;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};

  for (int i = 0; i < N; i++) {
    in[i] = sinf((float)i * 0.1f);
    out[i] = -7.0f;
  }
  bi = buffer(conn, dev, N * 4, in);
  bo = buffer(conn, dev, N * 4, out);
  arg_vec(args, bi, N);
  arg_vec(args, bo, N);
  hipd_args_i32(args, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bo, out, N * 4);
  for (int i = 0; i < N; i++) {
    float want =
        i == 0 || i == N - 1 ? -7.0f : ((in[i - 1] + in[i]) + in[i + 1]) / 3.0f;
    ck_assert_msg(close_to(out[i], want, 1e-6),
                  "device %d: output[%d] = %.9g, not %.9g", dev, i, out[i],
                  want);
  }
  OK(conn, hipd_mem_free(conn, bi));
  hipd_args_free(args);
  free(in);
  free(out);
}

/* benchmarks/bench_reduction.ml: one partial sum per block of 256, in the
 * kernel's tree order (float additions only, so the result is exact). */
static void run_bench_reduction(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 1000, B = 256, G = (N + B - 1) / B };
  float *in = xmalloc(N * 4), out[G], s[B];
  hipd_buffer_t bi, bo;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {G, 1, 1}, block[3] = {B, 1, 1};

  for (int i = 0; i < N; i++)
    in[i] = (float)(i % 37) * 0.37f - 5.0f + 1.0f / (float)(i + 3);
  bi = buffer(conn, dev, N * 4, in);
  bo = buffer(conn, dev, sizeof(out), NULL);
  arg_vec(args, bi, N);
  arg_vec(args, bo, G);
  hipd_args_i32(args, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bo, out, sizeof(out));
  for (int g = 0; g < G; g++) {
    for (int t = 0; t < B; t++)
      s[t] = g * B + t < N ? in[g * B + t] : 0.0f;
    for (int stride = B / 2; stride > 0; stride /= 2)
      for (int t = 0; t < stride; t++)
        s[t] = s[t] + s[t + stride];
    ck_assert_msg(out[g] == s[0], "device %d: output[%d] = %.9g, not %.9g", dev,
                  g, out[g], s[0]);
  }
  OK(conn, hipd_mem_free(conn, bi));
  hipd_args_free(args);
  free(in);
}

/* benchmarks/bench_matrix_mul_tiled.ml, on sizes that are no multiple of
 * the tile; the values are multiples of 1/4, so every sum is exact
 * whatever the order or contraction. */
static void run_bench_matmul_tiled(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { M = 40, N = 36, K = 50, T = 16 };
  float *a = xmalloc(M * K * 4), *b = xmalloc(K * N * 4),
        *c = xmalloc(M * N * 4);
  hipd_buffer_t ba, bb, bc;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {(N + T - 1) / T, (M + T - 1) / T, 1},
           block[3] = {T, T, 1};

  for (int i = 0; i < M * K; i++)
    a[i] = (float)((i * 7) % 9 - 4) * 0.25f;
  for (int i = 0; i < K * N; i++)
    b[i] = (float)((i * 5) % 7 - 3) * 0.25f;
  for (int i = 0; i < M * N; i++)
    c[i] = -99.0f;
  ba = buffer(conn, dev, M * K * 4, a);
  bb = buffer(conn, dev, K * N * 4, b);
  bc = buffer(conn, dev, M * N * 4, c);
  arg_vec(args, ba, M * K);
  arg_vec(args, bb, K * N);
  arg_vec(args, bc, M * N);
  hipd_args_i32(args, M);
  hipd_args_i32(args, N);
  hipd_args_i32(args, K);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bc, c, M * N * 4);
  for (int row = 0; row < M; row++)
    for (int col = 0; col < N; col++) {
      float want = 0.0f;
      for (int i = 0; i < K; i++)
        want += a[row * K + i] * b[i * N + col];
      ck_assert_msg(c[row * N + col] == want,
                    "device %d: c[%d] (row %d, col %d) = %.9g, not %.9g", dev,
                    row * N + col, row, col, c[row * N + col], want);
    }
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  hipd_args_free(args);
  free(a);
  free(b);
  free(c);
}

/* The radix sort benchmark's keys: both signs, so that the logical shift
 * of the top digit matters. */
enum { RADIX_N = 1000, RADIX_BINS = 256 };

static void radix_keys(int *keys)
{
  for (uint32_t i = 0; i < RADIX_N; i++)
    keys[i] = (int)(i * 2654435761u);
}

static int radix_digit(int v, int shift)
{
  return (int)(((uint32_t)v >> shift) & (RADIX_BINS - 1));
}

/* The histogram of one pass, at the low and the high digit. */
static void run_radix_histogram(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  int keys[RADIX_N], hist[RADIX_BINS], want[RADIX_BINS];
  hipd_buffer_t bk = HIPD_BUFFER_NULL;
  uint32_t grid[3] = {(RADIX_N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  static const int shifts[2] = {0, 24};

  radix_keys(keys);
  bk = buffer(conn, dev, sizeof(keys), keys);
  for (int s = 0; s < 2; s++) {
    hipd_buffer_t bh = buffer(conn, dev, sizeof(hist), NULL);
    hipd_args_t *args = args_new();
    memset(want, 0, sizeof(want));
    for (int i = 0; i < RADIX_N; i++)
      want[radix_digit(keys[i], shifts[s])]++;
    arg_vec(args, bk, RADIX_N);
    arg_vec(args, bh, RADIX_BINS);
    hipd_args_i32(args, RADIX_N);
    hipd_args_i32(args, shifts[s]);
    hipd_args_i32(args, RADIX_BINS - 1);
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    readback(conn, dev, bh, hist, sizeof(hist));
    for (int d = 0; d < RADIX_BINS; d++)
      ck_assert_msg(hist[d] == want[d],
                    "device %d: shift %d: histogram[%d] = %d, not %d", dev,
                    shifts[s], d, hist[d], want[d]);
    hipd_args_free(args);
  }
  OK(conn, hipd_mem_free(conn, bk));
}

static int int_cmp(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* One scatter pass from counters at the exclusive prefix sum: the output
 * is the input, reordered by digit, and each counter ends at its bin's
 * end. The order within a bin is the atomics' (upstream: unstable). */
static void run_radix_scatter(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  int keys[RADIX_N], out[RADIX_N], sorted_in[RADIX_N], hist[RADIX_BINS],
      start[RADIX_BINS], counters[RADIX_BINS];
  hipd_buffer_t bk;
  uint32_t grid[3] = {(RADIX_N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  static const int shifts[2] = {0, 24};

  radix_keys(keys);
  memcpy(sorted_in, keys, sizeof(keys));
  qsort(sorted_in, RADIX_N, sizeof(int), int_cmp);
  bk = buffer(conn, dev, sizeof(keys), keys);
  for (int s = 0; s < 2; s++) {
    hipd_buffer_t bo = buffer(conn, dev, sizeof(out), NULL), bc;
    hipd_args_t *args = args_new();
    memset(hist, 0, sizeof(hist));
    for (int i = 0; i < RADIX_N; i++)
      hist[radix_digit(keys[i], shifts[s])]++;
    for (int d = 0, sum = 0; d < RADIX_BINS; d++) {
      start[d] = sum;
      sum += hist[d];
    }
    bc = buffer(conn, dev, sizeof(start), start);
    arg_vec(args, bk, RADIX_N);
    arg_vec(args, bo, RADIX_N);
    arg_vec(args, bc, RADIX_BINS);
    hipd_args_i32(args, RADIX_N);
    hipd_args_i32(args, shifts[s]);
    hipd_args_i32(args, RADIX_BINS - 1);
    OK(conn,
       hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
    readback(conn, dev, bo, out, sizeof(out));
    readback(conn, dev, bc, counters, sizeof(counters));
    for (int d = 0; d < RADIX_BINS; d++)
      ck_assert_msg(counters[d] == start[d] + hist[d],
                    "device %d: shift %d: counters[%d] = %d, not %d", dev,
                    shifts[s], d, counters[d], start[d] + hist[d]);
    for (int i = 1; i < RADIX_N; i++)
      ck_assert_msg(radix_digit(out[i - 1], shifts[s]) <=
                        radix_digit(out[i], shifts[s]),
                    "device %d: shift %d: output[%d] = %d (digit %d) after "
                    "output[%d] = %d (digit %d)",
                    dev, shifts[s], i, out[i], radix_digit(out[i], shifts[s]),
                    i - 1, out[i - 1], radix_digit(out[i - 1], shifts[s]));
    qsort(out, RADIX_N, sizeof(int), int_cmp);
    for (int i = 0; i < RADIX_N; i++)
      ck_assert_msg(out[i] == sorted_in[i],
                    "device %d: shift %d: the output is no permutation of the "
                    "input: sorted, element %d is %d, not %d",
                    dev, shifts[s], i, out[i], sorted_in[i]);
    hipd_args_free(args);
  }
  OK(conn, hipd_mem_free(conn, bk));
}

typedef struct {
  const char *name;
  void (*run)(hipd_conn_t *conn, int dev, hipd_kernel_t k);
} runtime_t;

/* binary16 references, computed here by another method than hipd's: by
 * scaling and rounding in double (nearbyint: to nearest, ties to even). */
static uint16_t ref_f2h(float f)
{
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f), q, r;
  int e;

  if (isnan(f))
    return 0x7e00;
  if (a >= 65520.0)
    return sign | 0x7c00;
  if (a <
      ldexp(1.0, -14)) /* subnormal: units of 2^-24 (1024: the least normal) */
    return sign | (uint16_t)nearbyint(a / ldexp(1.0, -24));
  frexp(a, &e);
  e -= 1; /* a = 1.m * 2^e */
  q = a / ldexp(1.0, e - 10);
  r = nearbyint(q);
  if (r == 2048.0) {
    r = 1024.0;
    e++;
  }
  if (e > 15)
    return sign | 0x7c00;
  return sign | (uint16_t)((e + 15) << 10) | (uint16_t)(r - 1024.0);
}

static float ref_h2f(uint16_t h)
{
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0    ? ldexp(m, -24)
             : e == 31 ? (m ? NAN : INFINITY)
                       : ldexp(1024 + m, e - 25);
  return (float)((h & 0x8000) ? -v : v);
}

typedef struct {
  uint16_t h;
  float w;
} hp_t;

static void run_f16_u8(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  enum { N = 4096 };
  uint16_t *a = xmalloc(N * 2), *b = xmalloc(N * 2), *c = xmalloc(N * 2),
           *d = xmalloc(N * 2);
  float *f = xmalloc(N * 4);
  double *g = xmalloc(N * 8);
  int *kk = xmalloc(N * 4);
  hp_t *pts = xmalloc(N * sizeof(hp_t)), *pq = xmalloc(N * sizeof(hp_t));
  unsigned char *u = xmalloc(N), *uo = xmalloc(N);
  hipd_buffer_t ba, bb, bc, bd, bf, bg, bk, bp, bu, buo;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {N / 128, 1, 1}, block[3] = {128, 1, 1};
  float m01 = ref_h2f(ref_f2h(-0.1f));

  ck_assert_uint_eq(sizeof(hp_t), 8);
#ifdef __FLT16_MAX__
  /* where the compiler has _Float16, the reference agrees with it */
  for (uint64_t x = 0; x <= 0xffffffffu; x += 65521) {
    uint32_t x32 = (uint32_t)x;
    float v;
    _Float16 h;
    uint16_t hb;
    memcpy(&v, &x32, 4);
    h = (_Float16)v;
    memcpy(&hb, &h, 2);
    if (!isnan(v))
      ck_assert_uint_eq(hb, ref_f2h(v));
  }
#endif
  for (int i = 0; i < N; i++) {
    /* finite halves of every magnitude, ties and subnormals among them */
    a[i] = (uint16_t)((i * 40503u) & 0xffff);
    if ((a[i] & 0x7c00) == 0x7c00)
      a[i] &= 0xbfff;
    b[i] = (uint16_t)(((i * 7919u) ^ 0x3c00) & 0xffff);
    if ((b[i] & 0x7c00) == 0x7c00)
      b[i] &= 0xbfff;
    pts[i].h = (uint16_t)(0x3000 + i);
    pts[i].w = (float)i * 0.25f - 100.0f;
    u[i] = (unsigned char)(i * 7);
  }
  ba = buffer(conn, dev, N * 2, a);
  bb = buffer(conn, dev, N * 2, b);
  bc = buffer(conn, dev, N * 2, NULL);
  bd = buffer(conn, dev, N * 2, NULL);
  bf = buffer(conn, dev, N * 4, NULL);
  bg = buffer(conn, dev, N * 8, NULL);
  bk = buffer(conn, dev, N * 4, NULL);
  bp = buffer(conn, dev, N * sizeof(hp_t), pts);
  bu = buffer(conn, dev, N, u);
  buo = buffer(conn, dev, N, NULL);
  arg_vec(args, ba, N);
  arg_vec(args, bb, N);
  arg_vec(args, bc, N);
  arg_vec(args, bd, N);
  arg_vec(args, bf, N);
  arg_vec(args, bg, N);
  arg_vec(args, bk, N);
  arg_vec(args, bp, N);
  arg_vec(args, bu, N);
  arg_vec(args, buo, N);
  hipd_args_i32(args, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bc, c, N * 2);
  readback(conn, dev, bd, d, N * 2);
  readback(conn, dev, bf, f, N * 4);
  readback(conn, dev, bg, g, N * 8);
  readback(conn, dev, bk, kk, N * 4);
  readback(conn, dev, bp, pq, N * sizeof(hp_t));
  readback(conn, dev, buo, uo, N);
  for (int i = 0; i < N; i++) {
    float ha = ref_h2f(a[i]), hb = ref_h2f(b[i]);
    float prod = ha * hb;
    uint16_t wc = ref_f2h(ha + hb), wd = ref_f2h(prod * m01);
    uint16_t wp = ref_f2h(ref_h2f(pts[i].h) * 2.0f + pts[i].w);
    unsigned char wu = u[i] == 200 ? 7 : (unsigned char)(u[i] + 1);
    ck_assert_msg(c[i] == wc, "device %d: c[%d] = %04x, not %04x (%g + %g)",
                  dev, i, c[i], wc, ha, hb);
    ck_assert_msg(d[i] == wd, "device %d: d[%d] = %04x, not %04x", dev, i, d[i],
                  wd);
    ck_assert_msg(memcmp(&f[i], &ha, 4) == 0, "device %d: f[%d] = %g, not %g",
                  dev, i, f[i], ha);
    ck_assert_msg(g[i] == (double)ha, "device %d: g[%d] = %g", dev, i, g[i]);
    ck_assert_msg(kk[i] == (int)ha, "device %d: k[%d] = %d, not %d", dev, i,
                  kk[i], (int)ha);
    ck_assert_msg(pq[i].h == wp && pq[i].w == pts[i].w,
                  "device %d: pts[%d] = {%04x, %g}, not {%04x, %g}", dev, i,
                  pq[i].h, pq[i].w, wp, pts[i].w);
    ck_assert_msg(uo[i] == wu, "device %d: uo[%d] = %u, not %u", dev, i, uo[i],
                  wu);
  }
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  OK(conn, hipd_mem_free(conn, bu));
  hipd_args_free(args);
  free(a);
  free(b);
  free(c);
  free(d);
  free(f);
  free(g);
  free(kk);
  free(pts);
  free(pq);
  free(u);
  free(uo);
}

/* d = a * b + c for 16x16 tiles: small integers, so that every sum is
 * exact in f32 whatever order the matrix unit adds in. */
static void run_coopmat(hipd_conn_t *conn, int dev, hipd_kernel_t k)
{
  uint16_t a[256], b[256];
  float fa[256], fb[256], c[256], d[256];
  hipd_buffer_t ba, bb, bc, bd;
  hipd_args_t *args = args_new();
  uint32_t block[3] = {64, 1, 1}; /* a wavefront, two warps, 64 CPU threads */

  for (int i = 0; i < 256; i++) {
    fa[i] = (float)((i * 7) % 5 - 2);
    fb[i] = (float)((i * 3) % 7 - 3);
    a[i] = ref_f2h(fa[i]);
    b[i] = ref_f2h(fb[i]);
    c[i] = (float)(i % 11) - 5.0f;
  }
  ba = buffer(conn, dev, sizeof(a), a);
  bb = buffer(conn, dev, sizeof(b), b);
  bc = buffer(conn, dev, sizeof(c), c);
  bd = buffer(conn, dev, sizeof(d), NULL);
  arg_vec(args, ba, 256);
  arg_vec(args, bb, 256);
  arg_vec(args, bc, 256);
  arg_vec(args, bd, 256);
  OK(conn, hipd_kernel_launch(conn, k, ONE, block, 0, HIPD_STREAM_NULL, args));
  readback(conn, dev, bd, d, sizeof(d));
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      float want = c[i * 16 + j];
      for (int kk = 0; kk < 16; kk++)
        want += fa[i * 16 + kk] * fb[kk * 16 + j];
      ck_assert_msg(d[i * 16 + j] == want, "device %d: d[%d][%d] = %g, not %g",
                    dev, i, j, d[i * 16 + j], want);
    }
  OK(conn, hipd_mem_free(conn, ba));
  OK(conn, hipd_mem_free(conn, bb));
  OK(conn, hipd_mem_free(conn, bc));
  hipd_args_free(args);
}

/* Every fixture runs: a fixture without a runner here fails the suite
 * (test_every_fixture_runs). */
static const runtime_t runtimes[] = {
    {"arrays", run_arrays},
    {"bench_matmul_tiled", run_bench_matmul_tiled},
    {"bench_reduction", run_bench_reduction},
    {"bench_stencil_1d", run_bench_stencil_1d},
    {"bench_vector_add", run_bench_vector_add},
    {"control", run_control},
    {"coopmat", run_coopmat},
    {"f16_u8", run_f16_u8},
    {"float32_sin_path", run_sin},
    {"helpers", run_helpers},
    {"intrinsics", run_intrinsics},
    {"math_all", run_math_all},
    {"math_map", run_math_map},
    {"names", run_names},
    {"ops", run_ops},
    {"radix_histogram", run_radix_histogram},
    {"radix_scatter", run_radix_scatter},
    {"record_kernel", run_record_kernel},
    {"record_particles", run_record_particles},
    {"reduce_shared", run_reduce_shared},
    {"scalar_vec_add", run_scalar_vec_add},
    {"sin_kernel", run_sin},
    {"soa_points", run_soa_points},
    {"variant_kernel", run_variant_kernel},
    {"variant_shapes", run_variant_shapes},
    {"vec_add", run_vec_add},
};
#define NRUNTIMES (sizeof(runtimes) / sizeof(runtimes[0]))

/* Fixture @p i of the table, on every device. */
static void run_fixture(size_t i)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), dev;

  for (dev = 0; dev < n; dev++) {
    hipd_info_t *info = NULL;
    hipd_kernel_t k = compile_fixture(conn, dev, runtimes[i].name, &info);
    ck_assert_str_eq(
        info_str(info, "name"),
        strcmp(runtimes[i].name, "reduce_shared") == 0      ? "block_sum"
        : strcmp(runtimes[i].name, "helpers") == 0          ? "use_helpers"
        : strcmp(runtimes[i].name, "record_particles") == 0 ? "particles"
        : strcmp(runtimes[i].name, "variant_shapes") == 0   ? "shapes"
                                                            : runtimes[i].name);
    ck_assert_int_eq(hipd_info_len(info, "params"),
                     hipd_info_len(info, "arguments"));
    hipd_info_free(info);
    runtimes[i].run(conn, dev, k);
    OK(conn, hipd_kernel_destroy(conn, k));
  }
  hipd_close(conn);
}

START_TEST(test_fixture)
{
  run_fixture((size_t)_i);
}
END_TEST

/* Every fixture of tests/codegen has a runner above. */
START_TEST(test_every_fixture_runs)
{
  char path[600];
  int missing = 0;

  for (size_t i = 0; i < NRUNTIMES; i++) {
    snprintf(path, sizeof(path), "%s/%s.ir.json", FIXTURES_DIR,
             runtimes[i].name);
    ck_assert_msg(access(path, R_OK) == 0, "%s: %s", path, strerror(errno));
  }
  {
    DIR *dir = opendir(FIXTURES_DIR);
    struct dirent *e;
    ck_assert_ptr_nonnull(dir);
    while ((e = readdir(dir)) != NULL) {
      size_t len = strlen(e->d_name);
      int found = 0;
      if (len <= 8 || strcmp(e->d_name + len - 8, ".ir.json") != 0)
        continue;
      for (size_t i = 0; i < NRUNTIMES; i++)
        found |= strlen(runtimes[i].name) == len - 8 &&
                 strncmp(runtimes[i].name, e->d_name, len - 8) == 0;
      if (!found) {
        fprintf(stderr, "fixture %s has no runtime test\n", e->d_name);
        missing++;
      }
    }
    closedir(dir);
  }
  ck_assert_int_eq(missing, 0);
}
END_TEST

/* ------------------------------------------------------ through the wire */

/* Cooperative matrices where the target has matrix units; EIR, naming the
 * target, where it has none (through the wire, for architectures: no such
 * GPU is needed). */
START_TEST(test_coopmat_targets)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  fixture_t f;
  int dev = -1; /* for EXPECT's messages */

  fixture_load("coopmat", &f);
  OK(conn, hipd_kernel_generate_source(conn, 0, "gfx90a", f.ir, f.len, NULL,
                                       NULL, &info));
  hipd_info_free(info);
  OK(conn, hipd_kernel_generate_source(conn, 0, "sm_90", f.ir, f.len, NULL,
                                       NULL, &info));
  hipd_info_free(info);
  EXPECT(conn,
         hipd_kernel_generate_source(conn, 0, "gfx1100", f.ir, f.len, NULL,
                                     NULL, &info),
         HIPD_EIR);
  ck_assert_str_eq(hipd_last_error(conn),
                   "kernel.generate_source: kernel.body[0]: coopmat: gfx1100 "
                   "has no matrix cores hipd drives (MFMA: gfx908, gfx90a, "
                   "gfx940 to gfx942): cooperative-matrix operations are not "
                   "available there");
  EXPECT(conn,
         hipd_kernel_generate_source(conn, 0, "sm_61", f.ir, f.len, NULL, NULL,
                                     &info),
         HIPD_EIR);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "sm_61 has no tensor"));
  fixture_free(&f);
  hipd_close(conn);
}
END_TEST

/* kernel.generate_source returns what the golden files hold (for an AMD
 * target), the parameter list, and the platform of a device target. */
START_TEST(test_generate_source)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  fixture_t f;
  size_t len;
  char *golden = fixture_text("soa_points", ".hip", &len);
  const char *src;
  size_t slen;
  int dev = -1;
  static const char *const soa[] = {"pts", NULL};

  fixture_load("soa_points", &f);
  OK(conn, hipd_kernel_generate_source(conn, 0, "gfx90a", f.ir, f.len, NULL,
                                       soa, &info));
  ck_assert_int_eq(hipd_info_str(info, "source", &src, &slen), 0);
  ck_assert_uint_eq(slen, len);
  ck_assert_int_eq(memcmp(src, golden, len), 0);
  ck_assert_str_eq(info_str(info, "platform"), "amd");
  ck_assert_str_eq(info_str(info, "name"), "soa_points");
  ck_assert_int_eq(hipd_info_len(info, "arguments"), 7);
  ck_assert_str_eq(info_str(info, "arguments.0.name"), "pts_x");
  ck_assert_str_eq(info_str(info, "arguments.0.type"), "pointer");
  ck_assert_str_eq(info_str(info, "arguments.0.role"), "leaf");
  ck_assert_str_eq(info_str(info, "arguments.0.param"), "pts");
  ck_assert_str_eq(info_str(info, "arguments.0.field"), "x");
  ck_assert_str_eq(info_str(info, "arguments.3.field"), "w.b");
  ck_assert_str_eq(info_str(info, "arguments.4.name"), "sarek_pts_length");
  ck_assert_str_eq(info_str(info, "arguments.4.role"), "length");
  ck_assert_str_eq(info_str(info, "arguments.4.type"), "int32");
  hipd_info_free(info);
  free(golden);

  /* without soa_params the same IR is the packed layout */
  OK(conn, hipd_kernel_generate_source(conn, 0, "sm_90", f.ir, f.len, NULL,
                                       NULL, &info));
  ck_assert_str_eq(info_str(info, "platform"), "nvidia");
  ck_assert_int_eq(hipd_info_len(info, "arguments"), 4);
  ck_assert_str_eq(info_str(info, "arguments.0.name"), "pts");
  ck_assert_str_eq(info_str(info, "arguments.0.role"), "array");
  hipd_info_free(info);

  /* a device target: the last device is a CPU device */
  {
    int n = device_count(conn);
    OK(conn,
       hipd_kernel_generate_source(conn, n - 1, NULL, f.ir, f.len,
                                   (const uint32_t[3]){64, 2, 1}, NULL, &info));
    ck_assert_str_eq(info_str(info, "platform"), "host");
    ck_assert_int_eq(info_int(info, "max_threads"), 128);
    ck_assert_int_eq(hipd_info_str(info, "source", &src, &slen), 0);
    ck_assert_ptr_nonnull(strstr(src, "__launch_bounds__(128) soa_points("));
    hipd_info_free(info);
  }

  /* bad params */
  EXPECT(conn,
         hipd_kernel_generate_source(conn, 0, "vax11", f.ir, f.len, NULL, NULL,
                                     &info),
         HIPD_EPARAMS);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "unknown architecture"));
  EXPECT(conn,
         hipd_kernel_generate_source(conn, 0, "gfx90a", f.ir, f.len,
                                     (const uint32_t[3]){1024, 2, 1}, NULL,
                                     &info),
         HIPD_ELIMIT);
  EXPECT(conn,
         hipd_kernel_generate_source(conn, 0, "gfx90a", f.ir, f.len,
                                     (const uint32_t[3]){0, 1, 1}, NULL, &info),
         HIPD_EPARAMS);
  EXPECT(conn,
         hipd_kernel_generate_source(conn, 0, "gfx90a", f.ir, f.len, NULL,
                                     (const char *const[]){"nope", NULL},
                                     &info),
         HIPD_EIR);
  ck_assert_str_eq(hipd_last_error(conn),
                   "kernel.generate_source: soa_params[0]: the kernel has no "
                   "param named 'nope'");
  fixture_free(&f);
  hipd_close(conn);
}
END_TEST

/* Malformed IR over the wire: the code and a message naming the method,
 * the path and the problem; the session goes on. */
START_TEST(test_wire_errors)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  fixture_t f;
  msgpack_sbuffer mp;
  char err[300];
  int dev = -1;
  const char *bad =
      "{\"ir\":1,\"kernel\":{\"name\":\"k\",\"params\":[],\"body\":[\"seq\","
      "[[\"empty\"],[\"assign\",[\"var\",7,\"j\"],[\"const\",[\"i32\",1]]]]]}}";

  msgpack_sbuffer_init(&mp);
  ck_assert_int_eq(ir_json_to_msgpack(bad, strlen(bad), &mp, err, sizeof(err)),
                   0);
  EXPECT(conn,
         hipd_kernel_compile_ir(conn, HIPD_DEVICE_CURRENT, mp.data, mp.size,
                                NULL, NULL, NULL, &k, &info),
         HIPD_EIR);
  ck_assert_str_eq(hipd_last_error(conn),
                   "kernel.compile_ir: kernel.body[1].target: var 7 ('j') is "
                   "not declared in this function");
  ck_assert_uint_eq(hipd_kernel_id(k), 0);
  /* truncated */
  EXPECT(conn,
         hipd_kernel_generate_source(conn, HIPD_DEVICE_CURRENT, NULL, mp.data,
                                     mp.size / 2, NULL, NULL, &info),
         HIPD_EIR);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "truncated"));
  /* not even msgpack */
  EXPECT(conn,
         hipd_kernel_generate_source(conn, HIPD_DEVICE_CURRENT, NULL, "\xc1", 1,
                                     NULL, NULL, &info),
         HIPD_EIR);
  ck_assert_str_eq(hipd_last_error(conn),
                   "kernel.generate_source: document: not msgpack: byte 0xc1 "
                   "starts no value");
  msgpack_sbuffer_destroy(&mp);

  /* an intrinsic nobody registered */
  fixture_load("intrinsics", &f);
  EXPECT(conn,
         hipd_kernel_compile_ir(conn, HIPD_DEVICE_CURRENT, f.ir, f.len, NULL,
                                NULL, NULL, &k, &info),
         HIPD_EINTRINSIC);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(conn), "'Sarek.imax3'"));
  fixture_free(&f);

  /* the session is fine */
  k = compile_fixture(conn, HIPD_DEVICE_CURRENT, "vec_add", NULL);
  OK(conn, hipd_kernel_destroy(conn, k));
  hipd_close(conn);
}
END_TEST

/* The IR param must be a bin. */
START_TEST(test_wire_params)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  int dev = -1;

  /* hipd_backend_info lists the IR versions */
  OK(conn, hipd_backend_info(conn, &info));
  ck_assert_int_eq(hipd_info_len(info, "ir_versions"), 2);
  ck_assert_int_eq(info_int(info, "ir_versions.0"), 1);
  ck_assert_int_eq(info_int(info, "ir_versions.1"), 2);
  hipd_info_free(info);
  /* a str where the bin belongs: through the raw protocol */
  {
    int fd = harness_raw_connect(shared->socket);
    msgpack_sbuffer b;
    msgpack_packer pk;
    char reply[4096];
    ssize_t n;
    ck_assert_int_ge(fd, 0);
    msgpack_sbuffer_init(&b);
    msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int(&pk, 0);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "hello", 5);
    msgpack_pack_array(&pk, 0);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int(&pk, 0);
    msgpack_pack_int(&pk, 2);
    msgpack_pack_str_with_body(&pk, "kernel.generate_source", 22);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_str_with_body(&pk, "{}", 2);
    ck_assert_int_eq(harness_raw_send(fd, b.data, b.size), 0);
    msgpack_sbuffer_destroy(&b);
    /* read until the second reply has arrived */
    size_t got = 0;
    long long until = harness_now_ms() + 10000;
    while (got < sizeof(reply) && harness_now_ms() < until &&
           memmem(reply, got, "must be bin", 11) == NULL) {
      n = read(fd, reply + got, sizeof(reply) - got);
      if (n <= 0)
        break;
      got += (size_t)n;
    }
    ck_assert_ptr_nonnull(memmem(reply, got,
                                 "param 0 (ir) must be bin (the msgpack bytes "
                                 "of the IR document), not str",
                                 sizeof("param 0 (ir) must be bin (the msgpack "
                                        "bytes of the IR document), not str") -
                                     1));
    close(fd);
  }
  hipd_close(conn);
}
END_TEST

/* Registrations belong to their session; the registry lists and finds. */
START_TEST(test_intrinsics_registry)
{
  hipd_conn_t *a = connect_to(shared), *b = connect_to(shared);
  hipd_info_t *info = NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  fixture_t f;
  int dev = -1, n, found = 0;

  OK(a, hipd_intrinsics_list(a, 0, "gfx90a", &info));
  n = hipd_info_len(info, "");
  ck_assert_int_gt(n, 50);
  for (int i = 0; i < n; i++) {
    char p[64];
    const char *name;
    snprintf(p, sizeof(p), "%d.name", i);
    name = info_str(info, p);
    if (strcmp(name, "warp_barrier") == 0) {
      snprintf(p, sizeof(p), "%d.code", i);
      ck_assert_ptr_nonnull(strstr(info_str(info, p), "wave_barrier"));
      snprintf(p, sizeof(p), "%d.convergence", i);
      ck_assert_str_eq(info_str(info, p), "sync");
      snprintf(p, sizeof(p), "%d.builtin", i);
      ck_assert(info_bool(info, p));
      found = 1;
    }
  }
  ck_assert(found);
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Gpu.warp_barrier", 0, "sm_90", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "__syncwarp()");
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "atomic_add", 0, "gfx90a", &info));
  ck_assert_int_eq(hipd_info_len(info, ""), 2);
  hipd_info_free(info);
  EXPECT(
      a,
      hipd_intrinsics_find(a, "Gpu.nonesuch", HIPD_DEVICE_CURRENT, NULL, &info),
      HIPD_ENOENT);
  /* Sarek's standard library is built in: path-qualified and by name */
  OK(a, hipd_intrinsics_find(a, "Float32.sin", 0, "gfx90a", &info));
  ck_assert_int_eq(hipd_info_len(info, ""), 1);
  ck_assert_str_eq(info_str(info, "0.name"), "Float32.sin");
  ck_assert_str_eq(info_str(info, "0.code"), "sinf(%s)");
  ck_assert_str_eq(info_str(info, "0.convergence"), "uniform");
  ck_assert(info_bool(info, "0.builtin"));
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Sarek_stdlib.Math.Float32.min", 0, "sm_90",
                             &info));
  ck_assert_str_eq(info_str(info, "0.code"), "fminf(%s, %s)");
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Gpu.atomic_inc_int32", HIPD_DEVICE_CURRENT,
                             NULL, &info));
  ck_assert_str_eq(info_str(info, "0.convergence"), "divergent");
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Gpu.float", HIPD_DEVICE_CURRENT, NULL, &info));
  ck_assert_str_eq(info_str(info, "0.code"), "(float)");
  ck_assert(info_bool(info, "0.builtin"));
  hipd_info_free(info);

  /* registrations: errors, then the fixture's */
  EXPECT(a,
         hipd_intrinsics_register(a, "Float32.sqrt", "sqrtf", HIPD_CONV_UNIFORM,
                                  -1),
         HIPD_EEXIST);
  EXPECT(a,
         hipd_intrinsics_register(a, "evil", "x; system(0)", HIPD_CONV_UNIFORM,
                                  -1),
         HIPD_EPARAMS);
  EXPECT(a, hipd_intrinsics_register(a, "f", "g(%s)", HIPD_CONV_UNIFORM, 2),
         HIPD_EPARAMS);
  fixture_load("intrinsics", &f);
  fixture_register(a, &f);
  OK(a, hipd_intrinsics_find(a, "Gpu.float", HIPD_DEVICE_CURRENT, NULL, &info));
  ck_assert_str_eq(info_str(info, "0.code"), "(float)");
  ck_assert_str_eq(info_str(info, "0.convergence"), "uniform");
  ck_assert(!info_bool(info, "0.builtin"));
  hipd_info_free(info);
  OK(a, hipd_intrinsics_list(a, HIPD_DEVICE_CURRENT, NULL, &info));
  ck_assert_int_eq(hipd_info_len(info, ""), n + 3);
  hipd_info_free(info);
  OK(a, hipd_kernel_compile_ir_for(a, "host-x86_64", f.ir, f.len, NULL, NULL,
                                   NULL, &info));
  hipd_info_free(info);

  /* session b knows nothing of a's registrations: its Gpu.float is the
   * standard library's */
  OK(b, hipd_intrinsics_find(b, "Gpu.float", HIPD_DEVICE_CURRENT, NULL, &info));
  ck_assert(info_bool(info, "0.builtin"));
  hipd_info_free(info);
  EXPECT(b,
         hipd_kernel_compile_ir(b, HIPD_DEVICE_CURRENT, f.ir, f.len, NULL, NULL,
                                NULL, &k, &info),
         HIPD_EINTRINSIC);
  ck_assert_ptr_nonnull(strstr(hipd_last_error(b), "unknown intrinsic"));
  OK(b, hipd_intrinsics_list(b, HIPD_DEVICE_CURRENT, NULL, &info));
  ck_assert_int_eq(hipd_info_len(info, ""), n);
  hipd_info_free(info);
  /* a registration replaces the previous one of the same name */
  OK(a, hipd_intrinsics_register(a, "Gpu.float", "(double)",
                                 HIPD_CONV_DIVERGENT, 1));
  OK(a, hipd_intrinsics_find(a, "Gpu.float", HIPD_DEVICE_CURRENT, NULL, &info));
  ck_assert_str_eq(info_str(info, "0.code"), "(double)");
  ck_assert_int_eq(info_int(info, "0.arity"), 1);
  hipd_info_free(info);
  fixture_free(&f);
  hipd_close(a);
  hipd_close(b);
}
END_TEST

/* A document over 64 KiB is decoded off the loop thread; the answer is
 * the same. */
START_TEST(test_large_ir)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  enum { STMTS = 4000 };
  size_t cap = STMTS * 96 + 512, o = 0;
  char *json = xmalloc(cap), err[300];
  msgpack_sbuffer mp;
  const char *src;
  size_t slen;
  int dev = -1;

  o += (size_t)snprintf(json, cap,
                        "{\"ir\":1,\"kernel\":{\"name\":\"big\",\"params\":[["
                        "\"param\",{\"name\":\"c\",\"id\":0,\"type\":[\"vec\","
                        "[\"i32\"]]},null]],\"body\":[\"seq\",[");
  for (int i = 0; i < STMTS; i++)
    o += (size_t)snprintf(json + o, cap - o,
                          "%s[\"assign\",[\"aelem\",\"c\",[\"const\",[\"i32\","
                          "%d]]],[\"const\",[\"i32\",%d]]]",
                          i ? "," : "", i % 16, i);
  snprintf(json + o, cap - o, "]]}}");
  msgpack_sbuffer_init(&mp);
  ck_assert_int_eq(
      ir_json_to_msgpack(json, strlen(json), &mp, err, sizeof(err)), 0);
  ck_assert_uint_gt(mp.size, 64 << 10);
  OK(conn, hipd_kernel_generate_source(conn, HIPD_DEVICE_CURRENT, NULL, mp.data,
                                       mp.size, NULL, NULL, &info));
  ck_assert_int_eq(hipd_info_str(info, "source", &src, &slen), 0);
  ck_assert_ptr_nonnull(strstr(src, "  c[15] = 3999;\n"));
  hipd_info_free(info);
  /* and a large broken one */
  mp.data[mp.size - 3] = (char)0xc1;
  EXPECT(conn,
         hipd_kernel_generate_source(conn, HIPD_DEVICE_CURRENT, NULL, mp.data,
                                     mp.size, NULL, NULL, &info),
         HIPD_EIR);
  msgpack_sbuffer_destroy(&mp);
  free(json);
  hipd_close(conn);
}
END_TEST

/* The compiled kernel goes through the cache keyed by the generated
 * source: the same IR twice is a hit; kernel.info knows the signature. */
START_TEST(test_cache_and_info)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  hipd_kernel_t k1, k2;
  char key[80];
  int dev = HIPD_DEVICE_CURRENT;

  k1 = compile_fixture(conn, dev, "helpers", &info);
  snprintf(key, sizeof(key), "%s", info_str(info, "key"));
  hipd_info_free(info);
  k2 = compile_fixture(conn, dev, "helpers", &info);
  ck_assert_str_eq(info_str(info, "key"), key);
  ck_assert_str_ne(info_str(info, "cache"), "miss");
  hipd_info_free(info);
  OK(conn, hipd_kernel_info(conn, k2, &info));
  ck_assert_int_eq(hipd_info_len(info, "params"), 8);
  ck_assert_str_eq(info_str(info, "params.0"), "pointer");
  ck_assert_str_eq(info_str(info, "params.1"), "int32");
  hipd_info_free(info);
  OK(conn, hipd_kernel_destroy(conn, k1));
  OK(conn, hipd_kernel_destroy(conn, k2));
  hipd_close(conn);
}
END_TEST

/* hiprtc (or NVRTC) compiles every fixture for the HIP platform this hipd
 * is built for. */
START_TEST(test_compile_for_gpu)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  char arch[64] = "";
  int dev = -1, n;

  testutil_gpu_arch(conn, arch, sizeof(arch));
  if (arch[0] == '\0') {
    printf("check_codegen_run: hipd has no HIP compiler for a GPU target "
           "here: the fixtures were not compiled for a GPU\n");
    hipd_close(conn);
    return;
  }
  n = (int)NRUNTIMES;
  for (int i = 0; i < n; i++) {
    fixture_t f;
    fixture_load(runtimes[i].name, &f);
    fixture_register(conn, &f);
    OK(conn, hipd_kernel_compile_ir_for(conn, arch, f.ir, f.len,
                                        f.has_block ? f.block : NULL,
                                        fixture_soa(&f), NULL, &info));
    ck_assert_msg(info_int(info, "bytes") > 0, "%s for %s: no code",
                  runtimes[i].name, arch);
    ck_assert_str_eq(info_str(info, "platform"),
                     strncmp(arch, "gfx", 3) == 0 ? "amd" : "nvidia");
    hipd_info_free(info);
    fixture_free(&f);
  }
  printf("check_codegen_run: %d fixtures compiled for %s\n", n, arch);
  hipd_close(conn);
}
END_TEST

/* -------------------------------------------------------------- fixtures */

static void shared_setup(void)
{
  shared = testutil_start_cached(shared_cache);
}

static void shared_teardown(void)
{
  stop_checked(&shared);
}

static Suite *codegen_run_suite(void)
{
  Suite *s = suite_create("codegen_run");
  TCase *tc;

  tc = tcase_create("fixtures");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_every_fixture_runs);
  tcase_add_loop_test(tc, test_fixture, 0, (int)NRUNTIMES);
  suite_add_tcase(s, tc);

  tc = tcase_create("methods");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_generate_source);
  tcase_add_test(tc, test_coopmat_targets);
  tcase_add_test(tc, test_wire_errors);
  tcase_add_test(tc, test_wire_params);
  tcase_add_test(tc, test_intrinsics_registry);
  tcase_add_test(tc, test_large_ir);
  tcase_add_test(tc, test_cache_and_info);
  suite_add_tcase(s, tc);

  tc = tcase_create("gpu_compile");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_compile_for_gpu);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return testutil_main_cached("check_codegen_run", "cgcache", shared_cache,
                              sizeof(shared_cache), codegen_run_suite);
}
