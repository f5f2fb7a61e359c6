/* SPDX-License-Identifier: MIT */
/* examples/codegen.c: a kernel from the Sarek IR, generated and run.
 *
 * Sarek describes a kernel as a tree (proto/IR.md) that travels as msgpack.
 * hipd turns it into HIP source for a device (kernel.generate_source), or
 * generates, compiles and loads it in one call (kernel.compile_ir), after
 * which the daemon knows the kernel's parameter list and checks every
 * launch against it. This program builds the IR of IR.md's example,
 *
 *   let%kernel vec_add (a : float32 vector) (b : float32 vector)
 *                      (c : float32 vector) (n : int32) =
 *     let i = global_thread_id in if i < n then c.(i) <- a.(i) +. b.(i)
 *
 * with a few lines of msgpack encoding (a real producer has its own
 * encoder; `hipd-ir pack FILE.ir.json` makes the bytes from the JSON form),
 * prints the generated source and the launch arguments it expects, then
 * compiles it, runs it and checks the sums.
 *
 *   examples/codegen [SOCKET]
 *
 * Exits 0 when every sum is right, 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hipd.h>

#define N 1000

/* ------------------------------------------- just enough of msgpack */

/* The IR document's bytes, built front to back. */
typedef struct {
  unsigned char b[1024];
  size_t n;
} mp_t;

static void mp_byte(mp_t *w, unsigned v)
{
  if (w->n < sizeof(w->b))
    w->b[w->n] = (unsigned char)v;
  w->n++; /* past sizeof(b): detected once, in main */
}

static void mp_map(mp_t *w, unsigned n)
{
  mp_byte(w, 0x80 | n);
} /* n<16 */
static void mp_array(mp_t *w, unsigned n)
{
  mp_byte(w, 0x90 | n);
} /* <16 */
static void mp_int(mp_t *w, unsigned v)
{
  mp_byte(w, v);
} /* <128 */
static void mp_nil(mp_t *w)
{
  mp_byte(w, 0xc0);
}

static void mp_str(mp_t *w, const char *s) /* fewer than 32 bytes */
{
  size_t len = strlen(s);

  mp_byte(w, 0xa0 | (unsigned)len);
  for (size_t i = 0; i < len; i++)
    mp_byte(w, (unsigned char)s[i]);
}

/* ------------------------------------------------------- IR nodes */

/* A type node of one element type: ["f32"]. */
static void ir_type(mp_t *w, const char *elt)
{
  mp_array(w, 1);
  mp_str(w, elt);
}

/* A var record: {"name": name, "id": id, "type": type}; @p vec makes the
 * type ["vec", [elt]]. */
static void ir_var(mp_t *w, const char *name, unsigned id, const char *elt,
                   int vec)
{
  mp_map(w, 3);
  mp_str(w, "name");
  mp_str(w, name);
  mp_str(w, "id");
  mp_int(w, id);
  mp_str(w, "type");
  if (vec) {
    mp_array(w, 2);
    mp_str(w, "vec");
  }
  ir_type(w, elt);
}

/* A kernel param: ["param", var, arrinfo]; a vec of floats in global
 * memory has the arrinfo {"elt": ["f32"], "mem": "global"}, a scalar nil. */
static void ir_param(mp_t *w, const char *name, unsigned id, int vec)
{
  mp_array(w, 3);
  mp_str(w, "param");
  ir_var(w, name, id, vec ? "f32" : "i32", vec);
  if (vec) {
    mp_map(w, 2);
    mp_str(w, "elt");
    ir_type(w, "f32");
    mp_str(w, "mem");
    mp_str(w, "global");
  } else {
    mp_nil(w);
  }
}

/* A use of a variable: ["var", id, name]. */
static void ir_use(mp_t *w, unsigned id, const char *name)
{
  mp_array(w, 3);
  mp_str(w, "var");
  mp_int(w, id);
  mp_str(w, name);
}

/* An element of vec @p arr at variable i: [tag, arr, ["var", 4, "i"]],
 * tag "aread" to read it, "aelem" to assign it. */
static void ir_elem(mp_t *w, const char *tag, const char *arr)
{
  mp_array(w, 3);
  mp_str(w, tag);
  mp_str(w, arr);
  ir_use(w, 4, "i");
}

static void build_vec_add(mp_t *w)
{
  mp_map(w, 2); /* the document */
  mp_str(w, "ir");
  mp_int(w, 1); /* IR version 1 */
  mp_str(w, "kernel");
  mp_map(w, 3);
  mp_str(w, "name");
  mp_str(w, "vec_add");
  mp_str(w, "params");
  mp_array(w, 4);
  ir_param(w, "a", 0, 1);
  ir_param(w, "b", 1, 1);
  ir_param(w, "c", 2, 1);
  ir_param(w, "n", 3, 0);
  mp_str(w, "body");
  /* let i = global_thread_id in ... */
  mp_array(w, 4);
  mp_str(w, "let");
  ir_var(w, "i", 4, "i32", 0);
  mp_array(w, 4);
  mp_str(w, "intrinsic");
  mp_array(w, 1);
  mp_str(w, "Gpu");
  mp_str(w, "global_thread_id");
  mp_array(w, 0);
  /* if i < n then c.(i) <- a.(i) +. b.(i) (no else: nil) */
  mp_array(w, 4);
  mp_str(w, "if");
  mp_array(w, 4);
  mp_str(w, "binop");
  mp_str(w, "lt");
  ir_use(w, 4, "i");
  ir_use(w, 3, "n");
  mp_array(w, 3);
  mp_str(w, "assign");
  ir_elem(w, "aelem", "c");
  mp_array(w, 4);
  mp_str(w, "binop");
  mp_str(w, "add");
  ir_elem(w, "aread", "a");
  ir_elem(w, "aread", "b");
  mp_nil(w);
}

/* ------------------------------------------------------------ main */

static hipd_conn_t *conn;

static void check(int rc, const char *what)
{
  if (rc >= 0)
    return;
  fprintf(stderr, "codegen: %s: %s: %s\n", what, hipd_err_name(rc),
          hipd_last_error(conn));
  hipd_close(conn);
  exit(1);
}

int main(int argc, char **argv)
{
  static float a[N], b[N], c[N];
  const int dev = HIPD_DEVICE_CURRENT;
  const uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  hipd_buffer_t ba, bb, bc;
  hipd_info_t *gen, *info;
  hipd_kernel_t k;
  hipd_args_t *args;
  const char *source = "", *name = "?", *kind = "?";
  char path[64];
  int nargs, bad = 0;
  mp_t ir = {.n = 0};

  build_vec_add(&ir);
  if (ir.n > sizeof(ir.b)) {
    fprintf(stderr, "codegen: the IR is larger than its buffer\n");
    return 1;
  }
  if (hipd_connect(argc > 1 ? argv[1] : NULL, &conn) < 0) {
    fprintf(stderr, "codegen: connect: %s\n", hipd_last_error(NULL));
    return 1;
  }

  /* 1. The source hipd generates for the current device, and the kernel's
   *    parameter list after lowering: each vec becomes a pointer and an
   *    int length. The record is ours: hipd_info_free(). */
  check(hipd_kernel_generate_source(conn, dev, NULL, ir.b, ir.n, NULL, NULL,
                                    &gen),
        "kernel.generate_source");
  check(hipd_info_str(gen, "source", &source, NULL), "source");
  printf("IR: %zu bytes of msgpack; generated source:\n%s\n", ir.n, source);
  nargs = hipd_info_len(gen, "arguments");
  check(nargs, "arguments");
  printf("launch arguments:");
  for (int i = 0; i < nargs; i++) {
    snprintf(path, sizeof(path), "arguments.%d.name", i);
    hipd_info_str(gen, path, &name, NULL);
    snprintf(path, sizeof(path), "arguments.%d.type", i);
    hipd_info_str(gen, path, &kind, NULL);
    printf(" %s (%s)%s", name, kind, i + 1 < nargs ? "," : "\n");
  }
  hipd_info_free(gen);

  /* 2. Generate, compile (through the cache) and load it. */
  check(hipd_kernel_compile_ir(conn, dev, ir.b, ir.n, NULL, NULL, NULL, &k,
                               &info),
        "kernel.compile_ir");
  hipd_info_str(info, "cache", &kind, NULL);
  printf("compiled kernel %#llx (cache: %s)\n",
         (unsigned long long)hipd_kernel_id(k), kind);
  hipd_info_free(info);

  /* 3. Run it: the arguments in the order printed above. A launch that
   *    does not match them is HIPD_ESIGNATURE, before anything runs. */
  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  check(hipd_mem_alloc(conn, dev, N, "float32", &ba), "mem.alloc");
  check(hipd_mem_alloc(conn, dev, N, "float32", &bb), "mem.alloc");
  check(hipd_mem_alloc(conn, dev, N, "float32", &bc), "mem.alloc");
  check(hipd_mem_write(conn, ba, 0, a, sizeof(a)), "mem.write");
  check(hipd_mem_write(conn, bb, 0, b, sizeof(b)), "mem.write");
  args = hipd_args_new();
  if (args == NULL)
    check(HIPD_ENOMEM, "hipd_args_new");
  hipd_args_i32(args, N); /* wrong on purpose: a float* comes first */
  if (hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args) !=
      HIPD_ESIGNATURE) {
    fprintf(stderr, "codegen: a mismatched launch was not refused\n");
    return 1;
  }
  printf("a mismatched launch is refused: %s\n", hipd_last_error(conn));
  hipd_args_clear(args);
  check(hipd_args_buffer(args, ba, 0), "args"); /* a */
  check(hipd_args_i32(args, N), "args");        /* its length */
  check(hipd_args_buffer(args, bb, 0), "args"); /* b */
  check(hipd_args_i32(args, N), "args");
  check(hipd_args_buffer(args, bc, 0), "args"); /* c */
  check(hipd_args_i32(args, N), "args");
  check(hipd_args_i32(args, N), "args"); /* n */
  check(hipd_kernel_run(conn, k, grid, block, 0, HIPD_STREAM_NULL, args),
        "kernel.run");
  check(hipd_mem_read(conn, bc, 0, c, sizeof(c)), "mem.read");
  for (int i = 0; i < N; i++)
    bad += c[i] != a[i] + b[i];
  hipd_args_free(args);
  hipd_close(conn); /* the buffers and the kernel go with the session */
  if (bad != 0) {
    fprintf(stderr, "codegen: %d of %d sums wrong\n", bad, N);
    return 1;
  }
  printf("codegen: OK (c[%d] = %g)\n", N - 1, c[N - 1]);
  return 0;
}
