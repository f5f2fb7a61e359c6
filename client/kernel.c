/* SPDX-License-Identifier: MIT */
/* client/kernel.c: kernels (`kernel.*`, `run_source`,
 * `supported_source_langs`, `execute_direct`) and the compiled-kernel cache
 * (`cache.*`). Same shape as methods.c: pack the params, name the decoder,
 * let conn.c do the rest.
 *
 * Launch arguments travel as an array of [kind, value] pairs (a buffer as
 * ["buf", handle, offset]); hipd_args_t collects them on the client side so
 * that a launch packs them in one go. Floats keep their width on the wire
 * (float32 for "f32", float64 for "f64"): the daemon checks them against the
 * kernel's declared parameters.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "util/array.h"

/* The most arguments a launch takes (the daemon's limit too). */
#define ARGS_MAX 256

/* ------------------------------------------------------------ arguments */

typedef enum {
  ARG_BUF = 0,
  ARG_PTR,
  ARG_I32,
  ARG_I64,
  ARG_F32,
  ARG_F64,
} arg_kind_t;

typedef struct {
  arg_kind_t kind;
  union {
    uint64_t u; /* buffer handle or raw address */
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
  } v;
  uint64_t offset; /* ARG_BUF only */
} arg_t;

struct hipd_args {
  arg_t *a; /* n used of cap */
  size_t n;
  size_t cap;
};

hipd_args_t *hipd_args_new(void)
{
  return calloc(1, sizeof(hipd_args_t));
}

void hipd_args_free(hipd_args_t *args)
{
  if (args == NULL)
    return;
  free(args->a);
  free(args);
}

void hipd_args_clear(hipd_args_t *args)
{
  if (args != NULL)
    args->n = 0;
}

/* Append a slot for one more argument. @return it, or NULL with *err set
 * (HIPD_EINVAL, HIPD_ETOOMANY or HIPD_ENOMEM). */
static arg_t *args_push(hipd_args_t *args, arg_kind_t kind, int *err)
{
  arg_t *slot;

  if (args == NULL) {
    *err = HIPD_EINVAL;
    return NULL;
  }
  if (args->n >= ARGS_MAX) {
    *err = HIPD_ETOOMANY;
    return NULL;
  }
  if (ARRAY_GROW(args->a, args->n, args->cap, 8) != 0) {
    *err = HIPD_ENOMEM;
    return NULL;
  }
  slot = &args->a[args->n++];
  memset(slot, 0, sizeof(*slot));
  slot->kind = kind;
  return slot;
}

int hipd_args_buffer(hipd_args_t *args, hipd_buffer_t buf, uint64_t offset)
{
  int err = 0;
  arg_t *a = args_push(args, ARG_BUF, &err);

  if (a == NULL)
    return err;
  a->v.u = hipd_buffer_id(buf);
  a->offset = offset;
  return 0;
}

int hipd_args_ptr(hipd_args_t *args, uint64_t device_ptr)
{
  int err = 0;
  arg_t *a = args_push(args, ARG_PTR, &err);

  if (a == NULL)
    return err;
  a->v.u = device_ptr;
  return 0;
}

int hipd_args_i32(hipd_args_t *args, int32_t v)
{
  int err = 0;
  arg_t *a = args_push(args, ARG_I32, &err);

  if (a == NULL)
    return err;
  a->v.i32 = v;
  return 0;
}

int hipd_args_i64(hipd_args_t *args, int64_t v)
{
  int err = 0;
  arg_t *a = args_push(args, ARG_I64, &err);

  if (a == NULL)
    return err;
  a->v.i64 = v;
  return 0;
}

int hipd_args_f32(hipd_args_t *args, float v)
{
  int err = 0;
  arg_t *a = args_push(args, ARG_F32, &err);

  if (a == NULL)
    return err;
  a->v.f32 = v;
  return 0;
}

int hipd_args_f64(hipd_args_t *args, double v)
{
  int err = 0;
  arg_t *a = args_push(args, ARG_F64, &err);

  if (a == NULL)
    return err;
  a->v.f64 = v;
  return 0;
}

/* Pack @p args (NULL: none) as the launch's array of [kind, value]. */
static void args_pack(msgpack_packer *pk, const hipd_args_t *args)
{
  size_t n = args ? args->n : 0;

  msgpack_pack_array(pk, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    const arg_t *a = &args->a[i];
    switch (a->kind) {
    case ARG_BUF:
      msgpack_pack_array(pk, 3);
      proto_pack_cstr(pk, "buf");
      msgpack_pack_uint64(pk, a->v.u);
      msgpack_pack_uint64(pk, a->offset);
      break;
    case ARG_PTR:
      msgpack_pack_array(pk, 2);
      proto_pack_cstr(pk, "ptr");
      msgpack_pack_uint64(pk, a->v.u);
      break;
    case ARG_I32:
      msgpack_pack_array(pk, 2);
      proto_pack_cstr(pk, "i32");
      msgpack_pack_int32(pk, a->v.i32);
      break;
    case ARG_I64:
      msgpack_pack_array(pk, 2);
      proto_pack_cstr(pk, "i64");
      msgpack_pack_int64(pk, a->v.i64);
      break;
    case ARG_F32:
      msgpack_pack_array(pk, 2);
      proto_pack_cstr(pk, "f32");
      msgpack_pack_float(pk, a->v.f32);
      break;
    case ARG_F64:
      msgpack_pack_array(pk, 2);
      proto_pack_cstr(pk, "f64");
      msgpack_pack_double(pk, a->v.f64);
      break;
    }
  }
}

/* Pack launch dimensions as [x, y, z]. */
static void dims_pack(msgpack_packer *pk, const uint32_t d[3])
{
  msgpack_pack_array(pk, 3);
  for (int i = 0; i < 3; i++)
    msgpack_pack_uint32(pk, d[i]);
}

/* ------------------------------------------------------------ compiling */

int conn_decode_compiled(hipd_call_t *call, const msgpack_object *result,
                         const conn_outs_t *outs)
{
  const msgpack_object *k;
  hipd_kernel_t *out = outs->p[0];
  int err;

  if (result->type != MSGPACK_OBJECT_MAP)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected a map in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  k = proto_map_get(result, "kernel");
  if (out != NULL && (k == NULL || k->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
                      k->via.u64 == 0))
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: the reply has no kernel handle", call->method);
  /* The record first: a handle is never handed out with a failed call. */
  if ((err = info_decode(call, result, &CONN_OUTS(0, outs->p[1]))) < 0)
    return err;
  if (out != NULL)
    *out = hipd_kernel_from_id(k->via.u64);
  return 0;
}

/* Pack a NULL-ended option list (NULL: nil). */
static void options_pack(msgpack_packer *pk, const char *const *options)
{
  uint32_t n = 0;

  if (options == NULL) {
    msgpack_pack_nil(pk);
    return;
  }
  while (options[n] != NULL)
    n++;
  msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < n; i++)
    proto_pack_cstr(pk, options[i]);
}

/* `kernel.compile[_cached]` for a device (@p arch NULL) or an architecture.
 * @p out and @p info may be NULL. */
static int compile_call(hipd_conn_t *conn, const char *method, int dev,
                        const char *arch, const char *source, const char *name,
                        const char *const *options, hipd_kernel_t *out,
                        hipd_info_t **info)
{
  hipd_call_t *c, *call;
  int err;

  if (out != NULL)
    *out = HIPD_KERNEL_NULL;
  if (info != NULL)
    *info = NULL;
  if (source == NULL || name == NULL)
    return conn_fail(conn, HIPD_EINVAL, "%s: %s is NULL", method,
                     source == NULL ? "source" : "name");
  if (arch == NULL && (err = conn_check_device(conn, method, dev)) < 0)
    return err;
  if ((err = conn_call_begin(conn, method, 4, &c)) < 0)
    return err;
  proto_pack_cstr(&c->pk, source);
  proto_pack_cstr(&c->pk, name);
  options_pack(&c->pk, options);
  if (arch != NULL)
    proto_pack_cstr(&c->pk, arch);
  else
    conn_pack_device(&c->pk, dev);
  err = conn_call_send(c, conn_decode_compiled, CONN_OUTS(0, out, info), &call);
  return conn_sync(err, &call);
}

int hipd_kernel_compile(hipd_conn_t *conn, int dev, const char *source,
                        const char *name, const char *const *options,
                        hipd_kernel_t *out, hipd_info_t **info)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.compile: out is NULL");
  return compile_call(conn, "kernel.compile", dev, NULL, source, name, options,
                      out, info);
}

int hipd_kernel_compile_cached(hipd_conn_t *conn, int dev, const char *source,
                               const char *name, const char *const *options,
                               hipd_kernel_t *out, hipd_info_t **info)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.compile_cached: out is NULL");
  return compile_call(conn, "kernel.compile_cached", dev, NULL, source, name,
                      options, out, info);
}

int hipd_kernel_compile_for(hipd_conn_t *conn, const char *arch,
                            const char *source, const char *name,
                            const char *const *options, int cached,
                            hipd_info_t **info)
{
  const char *method = cached ? "kernel.compile_cached" : "kernel.compile";

  if (arch == NULL || arch[0] == '\0') {
    if (info != NULL)
      *info = NULL;
    return conn_fail(conn, HIPD_EINVAL, "%s: no target architecture", method);
  }
  return compile_call(conn, method, 0, arch, source, name, options, NULL, info);
}

/* ---------------------------------------------------------- the kernels */

int hipd_kernel_info(hipd_conn_t *conn, hipd_kernel_t kernel, hipd_info_t **out)
{
  hipd_call_t *call;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.info: out is NULL");
  *out = NULL;
  return conn_sync(conn_call_handle(conn, "kernel.info", hipd_kernel_id(kernel),
                                    info_decode, CONN_OUTS(0, out), &call),
                   &call);
}

int hipd_kernel_output(hipd_conn_t *conn, uint32_t max, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.output: out is NULL");
  *out = NULL;
  err = conn_call_begin(conn, "kernel.output", max != 0 ? 1 : 0, &c);
  if (err < 0)
    return err;
  if (max != 0)
    msgpack_pack_uint32(&c->pk, max);
  err = conn_call_send(c, info_decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

int hipd_kernel_destroy(hipd_conn_t *conn, hipd_kernel_t kernel)
{
  hipd_call_t *call;

  return conn_sync(conn_call_handle(conn, "kernel.destroy",
                                    hipd_kernel_id(kernel), conn_decode_none,
                                    CONN_OUTS(0, NULL), &call),
                   &call);
}

/* `kernel.launch`, with the `wait` param when @p wait. */
static int launch_begin(hipd_conn_t *conn, hipd_kernel_t kernel,
                        const uint32_t grid[3], const uint32_t block[3],
                        uint32_t shared, hipd_stream_t stream,
                        const hipd_args_t *args, int wait, hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if (grid == NULL || block == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.launch: %s is NULL",
                     grid == NULL ? "grid" : "block");
  if ((err = conn_call_begin(conn, "kernel.launch", wait ? 7 : 6, &c)) < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_kernel_id(kernel));
  dims_pack(&c->pk, grid);
  dims_pack(&c->pk, block);
  msgpack_pack_uint32(&c->pk, shared);
  if (hipd_stream_id(stream) == 0)
    msgpack_pack_nil(&c->pk);
  else
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  args_pack(&c->pk, args);
  if (wait)
    msgpack_pack_true(&c->pk);
  return conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), call);
}

int hipd_kernel_launch_begin(hipd_conn_t *conn, hipd_kernel_t kernel,
                             const uint32_t grid[3], const uint32_t block[3],
                             uint32_t shared, hipd_stream_t stream,
                             const hipd_args_t *args, hipd_call_t **call)
{
  return launch_begin(conn, kernel, grid, block, shared, stream, args, 0, call);
}

int hipd_kernel_run_begin(hipd_conn_t *conn, hipd_kernel_t kernel,
                          const uint32_t grid[3], const uint32_t block[3],
                          uint32_t shared, hipd_stream_t stream,
                          const hipd_args_t *args, hipd_call_t **call)
{
  return launch_begin(conn, kernel, grid, block, shared, stream, args, 1, call);
}

int hipd_kernel_run(hipd_conn_t *conn, hipd_kernel_t kernel,
                    const uint32_t grid[3], const uint32_t block[3],
                    uint32_t shared, hipd_stream_t stream,
                    const hipd_args_t *args)
{
  hipd_call_t *call;

  return conn_sync(hipd_kernel_run_begin(conn, kernel, grid, block, shared,
                                         stream, args, &call),
                   &call);
}

int hipd_kernel_launch(hipd_conn_t *conn, hipd_kernel_t kernel,
                       const uint32_t grid[3], const uint32_t block[3],
                       uint32_t shared, hipd_stream_t stream,
                       const hipd_args_t *args)
{
  hipd_call_t *call;

  return conn_sync(hipd_kernel_launch_begin(conn, kernel, grid, block, shared,
                                            stream, args, &call),
                   &call);
}

/* ------------------------------------------------------- source, direct */

/* run_source with @p wait: 1 sends today's 7 params (the daemon waits for
 * the kernel), 0 adds `wait` false (answered once submitted). */
static int run_source(hipd_conn_t *conn, const char *source, const char *lang,
                      const char *kernel_name, const uint32_t grid[3],
                      const uint32_t block[3], uint32_t shared,
                      const hipd_args_t *args, int wait)
{
  hipd_call_t *c, *call;
  int err;

  if (source == NULL || lang == NULL || kernel_name == NULL || grid == NULL ||
      block == NULL)
    return conn_fail(conn, HIPD_EINVAL,
                     "run_source: the source, language, kernel name, grid "
                     "and block are required");
  if ((err = conn_call_begin(conn, "run_source", wait ? 7 : 8, &c)) < 0)
    return err;
  proto_pack_cstr(&c->pk, source);
  proto_pack_cstr(&c->pk, lang);
  proto_pack_cstr(&c->pk, kernel_name);
  /* On the wire block comes before grid, as in upstream Sarek's Backend
   * API; the C API takes grid first, as every other launch does. */
  dims_pack(&c->pk, block);
  dims_pack(&c->pk, grid);
  msgpack_pack_uint32(&c->pk, shared);
  args_pack(&c->pk, args);
  if (!wait)
    msgpack_pack_false(&c->pk);
  err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}

int hipd_run_source(hipd_conn_t *conn, const char *source, const char *lang,
                    const char *kernel_name, const uint32_t grid[3],
                    const uint32_t block[3], uint32_t shared,
                    const hipd_args_t *args)
{
  return run_source(conn, source, lang, kernel_name, grid, block, shared, args,
                    1);
}

int hipd_run_source_async(hipd_conn_t *conn, const char *source,
                          const char *lang, const char *kernel_name,
                          const uint32_t grid[3], const uint32_t block[3],
                          uint32_t shared, const hipd_args_t *args)
{
  return run_source(conn, source, lang, kernel_name, grid, block, shared, args,
                    0);
}

int hipd_supported_source_langs(hipd_conn_t *conn, int dev, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "supported_source_langs: out is NULL");
  *out = NULL;
  if ((err = conn_check_device(conn, "supported_source_langs", dev)) < 0 ||
      (err = conn_call_begin(conn, "supported_source_langs", 1, &c)) < 0)
    return err;
  conn_pack_device(&c->pk, dev);
  err = conn_call_send(c, info_decode_array, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

int hipd_execute_direct(hipd_conn_t *conn)
{
  hipd_call_t *c, *call;
  int err = conn_call_begin(conn, "execute_direct", 0, &c);

  if (err < 0)
    return err;
  err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}

/* ---------------------------------------------------------------- cache */

int hipd_cache_stats(hipd_conn_t *conn, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "cache.stats: out is NULL");
  *out = NULL;
  if ((err = conn_call_begin(conn, "cache.stats", 0, &c)) < 0)
    return err;
  err = conn_call_send(c, info_decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

int hipd_cache_clear(hipd_conn_t *conn)
{
  hipd_call_t *c, *call;
  int err = conn_call_begin(conn, "cache.clear", 0, &c);

  if (err < 0)
    return err;
  err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}
