/* SPDX-License-Identifier: MIT */
/* client/codegen.c: code generation from the Sarek IR
 * (`kernel.generate_source`, `kernel.compile_ir`) and the intrinsic
 * registry (`intrinsics.*`). Same shape as kernel.c: pack the params, name
 * the decoder, let conn.c do the rest. The IR goes as a bin, by reference
 * when large (conn.c does not copy it).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* Pack [x, y, z] (NULL: nil). */
static void block_pack(msgpack_packer *pk, const uint32_t b[3])
{
  if (b == NULL) {
    msgpack_pack_nil(pk);
    return;
  }
  msgpack_pack_array(pk, 3);
  for (int i = 0; i < 3; i++)
    msgpack_pack_uint32(pk, b[i]);
}

/* Pack a NULL-ended string list (NULL: nil). */
static void strings_pack(msgpack_packer *pk, const char *const *list)
{
  uint32_t n = 0;

  if (list == NULL) {
    msgpack_pack_nil(pk);
    return;
  }
  while (list[n] != NULL)
    n++;
  msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < n; i++)
    proto_pack_cstr(pk, list[i]);
}

/* A target: an architecture name, or a device id (current: nil). */
static void target_pack(msgpack_packer *pk, int dev, const char *arch)
{
  if (arch != NULL)
    proto_pack_cstr(pk, arch);
  else
    conn_pack_device(pk, dev);
}

static void ir_pack(msgpack_packer *pk, const void *ir, size_t len)
{
  msgpack_pack_bin(pk, len);
  msgpack_pack_bin_body(pk, ir, len);
}

int hipd_kernel_generate_source(hipd_conn_t *conn, int dev, const char *arch,
                                const void *ir, size_t ir_len,
                                const uint32_t block[3],
                                const char *const *soa_params,
                                hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL || ir == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.generate_source: %s is NULL",
                     out == NULL ? "out" : "ir");
  *out = NULL;
  if (arch == NULL &&
      (err = conn_check_device(conn, "kernel.generate_source", dev)) < 0)
    return err;
  if ((err = conn_call_begin(conn, "kernel.generate_source", 4, &c)) < 0)
    return err;
  ir_pack(&c->pk, ir, ir_len);
  block_pack(&c->pk, block);
  strings_pack(&c->pk, soa_params);
  target_pack(&c->pk, dev, arch);
  err = conn_call_send(c, info_decode, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

static int compile_ir_call(hipd_conn_t *conn, int dev, const char *arch,
                           const void *ir, size_t ir_len,
                           const uint32_t block[3],
                           const char *const *soa_params,
                           const char *const *options, hipd_kernel_t *out,
                           hipd_info_t **info)
{
  hipd_call_t *c, *call;
  int err;

  if (out != NULL)
    *out = HIPD_KERNEL_NULL;
  if (info != NULL)
    *info = NULL;
  if (ir == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.compile_ir: ir is NULL");
  if (arch == NULL &&
      (err = conn_check_device(conn, "kernel.compile_ir", dev)) < 0)
    return err;
  if ((err = conn_call_begin(conn, "kernel.compile_ir", 5, &c)) < 0)
    return err;
  ir_pack(&c->pk, ir, ir_len);
  block_pack(&c->pk, block);
  strings_pack(&c->pk, soa_params);
  strings_pack(&c->pk, options);
  target_pack(&c->pk, dev, arch);
  err = conn_call_send(c, conn_decode_compiled, CONN_OUTS(0, out, info), &call);
  return conn_sync(err, &call);
}

int hipd_kernel_compile_ir(hipd_conn_t *conn, int dev, const void *ir,
                           size_t ir_len, const uint32_t block[3],
                           const char *const *soa_params,
                           const char *const *options, hipd_kernel_t *out,
                           hipd_info_t **info)
{
  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "kernel.compile_ir: out is NULL");
  return compile_ir_call(conn, dev, NULL, ir, ir_len, block, soa_params,
                         options, out, info);
}

int hipd_kernel_compile_ir_for(hipd_conn_t *conn, const char *arch,
                               const void *ir, size_t ir_len,
                               const uint32_t block[3],
                               const char *const *soa_params,
                               const char *const *options, hipd_info_t **info)
{
  if (arch == NULL || arch[0] == '\0') {
    if (info != NULL)
      *info = NULL;
    return conn_fail(conn, HIPD_EINVAL,
                     "kernel.compile_ir: no target architecture");
  }
  return compile_ir_call(conn, 0, arch, ir, ir_len, block, soa_params, options,
                         NULL, info);
}

/* ----------------------------------------------------------- intrinsics */

int hipd_intrinsics_list(hipd_conn_t *conn, int dev, const char *arch,
                         hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "intrinsics.list: out is NULL");
  *out = NULL;
  if (arch == NULL &&
      (err = conn_check_device(conn, "intrinsics.list", dev)) < 0)
    return err;
  if ((err = conn_call_begin(conn, "intrinsics.list", 1, &c)) < 0)
    return err;
  target_pack(&c->pk, dev, arch);
  err = conn_call_send(c, info_decode_array, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

int hipd_intrinsics_find(hipd_conn_t *conn, const char *name, int dev,
                         const char *arch, hipd_info_t **out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL || name == NULL)
    return conn_fail(conn, HIPD_EINVAL, "intrinsics.find: %s is NULL",
                     out == NULL ? "out" : "name");
  *out = NULL;
  if (arch == NULL &&
      (err = conn_check_device(conn, "intrinsics.find", dev)) < 0)
    return err;
  if ((err = conn_call_begin(conn, "intrinsics.find", 2, &c)) < 0)
    return err;
  proto_pack_cstr(&c->pk, name);
  target_pack(&c->pk, dev, arch);
  err = conn_call_send(c, info_decode_array, CONN_OUTS(0, out), &call);
  return conn_sync(err, &call);
}

int hipd_intrinsics_register(hipd_conn_t *conn, const char *name,
                             const char *code, hipd_convergence_t conv,
                             int arity)
{
  static const char *const convs[] = {"uniform", "divergent", "sync"};
  hipd_call_t *c, *call;
  int err;

  if (name == NULL || code == NULL)
    return conn_fail(conn, HIPD_EINVAL, "intrinsics.register: %s is NULL",
                     name == NULL ? "name" : "code");
  if ((unsigned)conv > HIPD_CONV_SYNC)
    return conn_fail(conn, HIPD_EINVAL,
                     "intrinsics.register: unknown convergence class %d",
                     (int)conv);
  if ((err = conn_call_begin(conn, "intrinsics.register", 4, &c)) < 0)
    return err;
  proto_pack_cstr(&c->pk, name);
  proto_pack_cstr(&c->pk, code);
  proto_pack_cstr(&c->pk, convs[conv]);
  if (arity < 0)
    msgpack_pack_nil(&c->pk);
  else
    msgpack_pack_int(&c->pk, arity);
  err = conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), &call);
  return conn_sync(err, &call);
}
