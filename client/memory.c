/* SPDX-License-Identifier: MIT */
/* client/memory.c: device memory (`mem.*`). Bytes written travel by
 * reference from the caller's buffer into the socket (conn.c packs params
 * of 4 KiB and more without copying them); bytes read are copied once, from
 * the reply straight into the caller's buffer.
 */
#include "config.h"

#include <string.h>

#include "conn.h"

/* The bytes of `mem.read[_async]` into p[0], which holds exactly n bytes:
 * a reply of another length is the daemon's mistake, not a short read. */
static int read_decode(hipd_call_t *call, const msgpack_object *result,
                       const conn_outs_t *outs)
{
  const char *p;
  size_t len;

  if (proto_obj_bytes(result, &p, &len) < 0)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: expected bytes in the reply, got %s",
                          call->method, proto_obj_type_name(result));
  if (len != outs->n)
    return conn_call_fail(call, HIPD_EPROTO,
                          "%s: asked for %zu bytes, the daemon sent %zu",
                          call->method, outs->n, len);
  if (len > 0)
    memcpy(outs->p[0], p, len);
  return 0;
}

/* ---------------------------------------------------------- allocation */

static int alloc_send(hipd_call_t *c, int dev, hipd_buffer_t *out)
{
  hipd_call_t *call;

  conn_pack_device(&c->pk, dev);
  return conn_sync(
      conn_call_send(c, conn_decode_uint, CONN_OUTS(0, &out->id_), &call),
      &call);
}

int hipd_mem_alloc(hipd_conn_t *conn, int dev, uint64_t count, const char *kind,
                   hipd_buffer_t *out)
{
  hipd_call_t *c;
  int err;

  if (out == NULL || kind == NULL)
    return conn_fail(conn, HIPD_EINVAL, "mem.alloc: %s is NULL",
                     out == NULL ? "out" : "kind");
  *out = HIPD_BUFFER_NULL;
  if ((err = conn_check_device(conn, "mem.alloc", dev)) < 0 ||
      (err = conn_call_begin(conn, "mem.alloc", 3, &c)) < 0)
    return err;
  msgpack_pack_uint64(&c->pk, count);
  proto_pack_cstr(&c->pk, kind);
  return alloc_send(c, dev, out);
}

int hipd_mem_alloc_custom(hipd_conn_t *conn, int dev, uint64_t count,
                          uint64_t elem_size, hipd_buffer_t *out)
{
  hipd_call_t *c;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "mem.alloc_custom: out is NULL");
  *out = HIPD_BUFFER_NULL;
  if ((err = conn_check_device(conn, "mem.alloc_custom", dev)) < 0 ||
      (err = conn_call_begin(conn, "mem.alloc_custom", 3, &c)) < 0)
    return err;
  msgpack_pack_uint64(&c->pk, count);
  msgpack_pack_uint64(&c->pk, elem_size);
  return alloc_send(c, dev, out);
}

int hipd_mem_free(hipd_conn_t *conn, hipd_buffer_t buf)
{
  hipd_call_t *call;

  return conn_sync(conn_call_handle(conn, "mem.free", hipd_buffer_id(buf),
                                    conn_decode_none, CONN_OUTS(0, NULL),
                                    &call),
                   &call);
}

/* --------------------------------------------------------------- writes */

/* `mem.write` (stream 0: no stream param) or `mem.write_async`. */
static int write_begin(hipd_conn_t *conn, const char *method, hipd_buffer_t buf,
                       uint64_t offset, const void *data, size_t len,
                       int with_stream, hipd_stream_t stream,
                       hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if (data == NULL && len > 0)
    return conn_fail(conn, HIPD_EINVAL, "%s: data is NULL", method);
  err = conn_call_begin(conn, method, with_stream ? 4 : 3, &c);
  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_buffer_id(buf));
  msgpack_pack_uint64(&c->pk, offset);
  msgpack_pack_bin_with_body(&c->pk, data, len);
  if (with_stream)
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  return conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), call);
}

int hipd_mem_write(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                   const void *data, size_t len)
{
  hipd_call_t *call;

  return conn_sync(write_begin(conn, "mem.write", buf, offset, data, len, 0,
                               HIPD_STREAM_NULL, &call),
                   &call);
}

int hipd_mem_write_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                               uint64_t offset, const void *data, size_t len,
                               hipd_stream_t stream, hipd_call_t **call)
{
  return write_begin(conn, "mem.write_async", buf, offset, data, len, 1, stream,
                     call);
}

int hipd_mem_write_async(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                         const void *data, size_t len, hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(
      hipd_mem_write_async_begin(conn, buf, offset, data, len, stream, &call),
      &call);
}

/* ---------------------------------------------------------------- reads */

static int read_begin(hipd_conn_t *conn, const char *method, hipd_buffer_t buf,
                      uint64_t offset, void *out, size_t len, int with_stream,
                      hipd_stream_t stream, hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if (out == NULL && len > 0)
    return conn_fail(conn, HIPD_EINVAL, "%s: out is NULL", method);
  err = conn_call_begin(conn, method, with_stream ? 4 : 3, &c);
  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_buffer_id(buf));
  msgpack_pack_uint64(&c->pk, offset);
  msgpack_pack_uint64(&c->pk, len);
  if (with_stream)
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  /* A large reply's bytes go from the socket into @p out, not through the
   * receive buffer (conn.c). */
  c->direct_dst = out;
  c->direct_len = len;
  return conn_call_send(c, read_decode, CONN_OUTS(len, out), call);
}

int hipd_mem_read(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                  void *out, size_t len)
{
  hipd_call_t *call;

  return conn_sync(read_begin(conn, "mem.read", buf, offset, out, len, 0,
                              HIPD_STREAM_NULL, &call),
                   &call);
}

int hipd_mem_read_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                              uint64_t offset, void *out, size_t len,
                              hipd_stream_t stream, hipd_call_t **call)
{
  return read_begin(conn, "mem.read_async", buf, offset, out, len, 1, stream,
                    call);
}

int hipd_mem_read_async(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                        void *out, size_t len, hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(
      hipd_mem_read_async_begin(conn, buf, offset, out, len, stream, &call),
      &call);
}

/* ---------------------------------------------------------------- copies */

static int copy_begin(hipd_conn_t *conn, const char *method, hipd_buffer_t dst,
                      uint64_t dst_offset, hipd_buffer_t src,
                      uint64_t src_offset, size_t len, int with_stream,
                      hipd_stream_t stream, hipd_call_t **call)
{
  hipd_call_t *c;
  int err = conn_call_begin(conn, method, with_stream ? 6 : 5, &c);

  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_buffer_id(dst));
  msgpack_pack_uint64(&c->pk, dst_offset);
  msgpack_pack_uint64(&c->pk, hipd_buffer_id(src));
  msgpack_pack_uint64(&c->pk, src_offset);
  msgpack_pack_uint64(&c->pk, len);
  if (with_stream)
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  return conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), call);
}

static int copy_sync(hipd_conn_t *conn, const char *method, hipd_buffer_t dst,
                     uint64_t dst_offset, hipd_buffer_t src,
                     uint64_t src_offset, size_t len, int with_stream,
                     hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(copy_begin(conn, method, dst, dst_offset, src, src_offset,
                              len, with_stream, stream, &call),
                   &call);
}

int hipd_mem_copy(hipd_conn_t *conn, hipd_buffer_t dst, uint64_t dst_offset,
                  hipd_buffer_t src, uint64_t src_offset, size_t len)
{
  return copy_sync(conn, "mem.copy", dst, dst_offset, src, src_offset, len, 0,
                   HIPD_STREAM_NULL);
}

int hipd_mem_copy_async_begin(hipd_conn_t *conn, hipd_buffer_t dst,
                              uint64_t dst_offset, hipd_buffer_t src,
                              uint64_t src_offset, size_t len,
                              hipd_stream_t stream, hipd_call_t **call)
{
  return copy_begin(conn, "mem.copy_async", dst, dst_offset, src, src_offset,
                    len, 1, stream, call);
}

int hipd_mem_copy_async(hipd_conn_t *conn, hipd_buffer_t dst,
                        uint64_t dst_offset, hipd_buffer_t src,
                        uint64_t src_offset, size_t len, hipd_stream_t stream)
{
  return copy_sync(conn, "mem.copy_async", dst, dst_offset, src, src_offset,
                   len, 1, stream);
}

/* --------------------------------------------------------------- memsets */

/* @p value is converted to unsigned char, as by C's memset() (so -1 fills
 * with 0xff, as in HIP code). */
static int memset_begin(hipd_conn_t *conn, const char *method,
                        hipd_buffer_t buf, uint64_t offset, size_t len,
                        int value, int with_stream, hipd_stream_t stream,
                        hipd_call_t **call)
{
  hipd_call_t *c;
  int err = conn_call_begin(conn, method, with_stream ? 5 : 4, &c);

  if (err < 0)
    return err;
  msgpack_pack_uint64(&c->pk, hipd_buffer_id(buf));
  msgpack_pack_uint64(&c->pk, offset);
  msgpack_pack_uint64(&c->pk, len);
  msgpack_pack_unsigned_char(&c->pk, (unsigned char)value);
  if (with_stream)
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  return conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), call);
}

static int memset_sync(hipd_conn_t *conn, const char *method, hipd_buffer_t buf,
                       uint64_t offset, size_t len, int value, int with_stream,
                       hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(memset_begin(conn, method, buf, offset, len, value,
                                with_stream, stream, &call),
                   &call);
}

int hipd_mem_memset(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                    size_t len, int value)
{
  return memset_sync(conn, "mem.memset", buf, offset, len, value, 0,
                     HIPD_STREAM_NULL);
}

int hipd_mem_memset_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                                uint64_t offset, size_t len, int value,
                                hipd_stream_t stream, hipd_call_t **call)
{
  return memset_begin(conn, "mem.memset_async", buf, offset, len, value, 1,
                      stream, call);
}

int hipd_mem_memset_async(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                          size_t len, int value, hipd_stream_t stream)
{
  return memset_sync(conn, "mem.memset_async", buf, offset, len, value, 1,
                     stream);
}

/* ----------------------------------------------------------- inspection */

int hipd_mem_size(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t *size)
{
  hipd_call_t *call;

  if (size == NULL)
    return conn_fail(conn, HIPD_EINVAL, "mem.size: size is NULL");
  return conn_sync(conn_call_handle(conn, "mem.size", hipd_buffer_id(buf),
                                    conn_decode_uint, CONN_OUTS(0, size),
                                    &call),
                   &call);
}

int hipd_mem_info(hipd_conn_t *conn, hipd_buffer_t buf, hipd_info_t **out)
{
  hipd_call_t *call;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "mem.info: out is NULL");
  *out = NULL;
  return conn_sync(conn_call_handle(conn, "mem.info", hipd_buffer_id(buf),
                                    info_decode, CONN_OUTS(0, out), &call),
                   &call);
}
