/* SPDX-License-Identifier: MIT */
/* client/shm.c: shared host buffers (`shm.*`, `mem.*_shm*`,
 * `mem.alloc_zero_copy`). The memory is a memfd of this process, sealed
 * against shrinking and passed to the daemon with the `shm.create`
 * request (SCM_RIGHTS); no transfer through it moves bytes over the socket.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conn.h"
#include "conn_internal.h"
#include "util/clock.h"

struct hipd_shm {
  void *addr;
  size_t size;
  uint64_t handle;
  int fd;
  hipd_conn_t *conn; /* its connection, referenced until hipd_shm_free(),
                        so that a free after hipd_close() is safe */
};

/* The `shm.create` result: {handle, size, registered}. */
static int register_decode(hipd_call_t *call, const msgpack_object *result,
                           const conn_outs_t *outs)
{
  hipd_shm_t *m = outs->p[0];

  if (result->type != MSGPACK_OBJECT_MAP)
    return conn_call_fail(call, HIPD_EPROTO, "%s: expected a map, got %s",
                          call->method, proto_obj_type_name(result));
  for (uint32_t i = 0; i < result->via.map.size; i++) {
    const msgpack_object_kv *kv = &result->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 6 &&
        memcmp(kv->key.via.str.ptr, "handle", 6) == 0 &&
        kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      m->handle = kv->val.via.u64;
  }
  if (m->handle == 0)
    return conn_call_fail(call, HIPD_EPROTO, "%s: no handle in the reply",
                          call->method);
  return 0;
}

int hipd_shm_create(hipd_conn_t *conn, size_t size, hipd_shm_t **out)
{
  long page = sysconf(_SC_PAGESIZE);
  hipd_call_t *c, *call;
  hipd_shm_t *m;
  int err;

  if (out == NULL)
    return conn_fail(conn, HIPD_EINVAL, "shm.create: out is NULL");
  *out = NULL;
  if (size == 0)
    return conn_fail(conn, HIPD_EINVAL, "shm.create: size is 0");
  if (size > SIZE_MAX - (size_t)page)
    return conn_fail(conn, HIPD_EINVAL, "shm.create: size %zu too large", size);
  size = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
  if ((m = calloc(1, sizeof(*m))) == NULL)
    return conn_fail(conn, HIPD_ENOMEM, "shm.create: out of memory");
  m->fd = memfd_create("hipd-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m->fd < 0) {
    err = errno == ENOMEM ? HIPD_ENOMEM : HIPD_ENOTSUP;
    conn_fail(conn, err, "shm.create: memfd_create: %s", strerror(errno));
    free(m);
    return err;
  }
  /* Sealed against shrinking, so that nothing can truncate it under the
   * daemon's mapping; F_SEAL_SEAL keeps the seals as they are. */
  if (ftruncate(m->fd, (off_t)size) != 0 ||
      fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
          0) {
    err = errno == ENOSPC || errno == ENOMEM ? HIPD_ENOMEM : HIPD_EINVAL;
    conn_fail(conn, err, "shm.create: preparing %zu bytes: %s", size,
              strerror(errno));
    goto fail;
  }
  m->addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
  if (m->addr == MAP_FAILED) {
    m->addr = NULL;
    err = HIPD_ENOMEM;
    conn_fail(conn, err, "shm.create: mapping %zu bytes: %s", size,
              strerror(errno));
    goto fail;
  }
  m->size = size;
  if ((err = conn_call_begin(conn, "shm.create", 1, &c)) < 0)
    goto fail;
  msgpack_pack_uint64(&c->pk, size);
  c->send_fd = m->fd;
  err = conn_sync(conn_call_send(c, register_decode, CONN_OUTS(0, m), &call),
                  &call);
  if (err < 0)
    goto fail;
  /* The daemon has its own descriptor now; the mapping is all we need. */
  close(m->fd);
  m->fd = -1;
  pthread_mutex_lock(&conn->lock);
  conn->refs++;
  pthread_mutex_unlock(&conn->lock);
  m->conn = conn;
  *out = m;
  return 0;

fail:
  if (m->addr != NULL)
    munmap(m->addr, m->size);
  if (m->fd >= 0)
    close(m->fd);
  free(m);
  return err;
}

void *hipd_shm_ptr(const hipd_shm_t *shm)
{
  return shm != NULL ? shm->addr : NULL;
}

size_t hipd_shm_size(const hipd_shm_t *shm)
{
  return shm != NULL ? shm->size : 0;
}

uint64_t hipd_shm_handle(const hipd_shm_t *shm)
{
  return shm != NULL ? shm->handle : 0;
}

int hipd_shm_free(hipd_conn_t *conn, hipd_shm_t *shm)
{
  hipd_call_t *call;
  int err;

  if (shm == NULL)
    return conn_fail(conn, HIPD_EINVAL, "shm.free: shm is NULL");
  if (conn != NULL && conn != shm->conn)
    return conn_fail(conn, HIPD_EFOREIGN,
                     "shm.free: the shared buffer belongs to another "
                     "connection");
  /* shm's reference keeps the connection's memory even after hipd_close():
   * the request then fails at once with HIPD_EDISCONNECTED. */
  conn = shm->conn;
  err = conn_sync(conn_call_handle(conn, "shm.free", shm->handle,
                                   conn_decode_none, CONN_OUTS(0, NULL), &call),
                  &call);
  munmap(shm->addr, shm->size);
  free(shm);
  conn_unref(conn);
  return err;
}

/* `mem.{write,read}_shm[_async]`: with_stream adds the stream param. */
static int xfer_begin(hipd_conn_t *conn, const char *method, hipd_buffer_t buf,
                      uint64_t offset, const hipd_shm_t *shm,
                      uint64_t shm_offset, size_t len, int with_stream,
                      hipd_stream_t stream, hipd_call_t **call)
{
  hipd_call_t *c;
  int err;

  if (shm == NULL)
    return conn_fail(conn, HIPD_EINVAL, "%s: shm is NULL", method);
  if ((err = conn_call_begin(conn, method, with_stream ? 6 : 5, &c)) < 0)
    return err;
  c->spin_extra_us = conn_xfer_spin_us(conn, len);
  msgpack_pack_uint64(&c->pk, hipd_buffer_id(buf));
  msgpack_pack_uint64(&c->pk, offset);
  msgpack_pack_uint64(&c->pk, shm->handle);
  msgpack_pack_uint64(&c->pk, shm_offset);
  msgpack_pack_uint64(&c->pk, len);
  if (with_stream)
    msgpack_pack_uint64(&c->pk, hipd_stream_id(stream));
  return conn_call_send(c, conn_decode_none, CONN_OUTS(0, NULL), call);
}

/* A synchronous copy on the default stream, timed: its rate is what the
 * next copies' waits expect (conn_xfer_learn). */
static int xfer_sync(hipd_conn_t *conn, const char *method, hipd_buffer_t buf,
                     uint64_t offset, const hipd_shm_t *shm,
                     uint64_t shm_offset, size_t len)
{
  uint64_t t0 = util_now_ns();
  hipd_call_t *call;
  int err;

  err = conn_sync(xfer_begin(conn, method, buf, offset, shm, shm_offset, len, 0,
                             HIPD_STREAM_NULL, &call),
                  &call);
  if (err == 0)
    conn_xfer_learn(conn, len, util_now_ns() - t0);
  return err;
}

int hipd_mem_write_shm(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                       const hipd_shm_t *shm, uint64_t shm_offset, size_t len)
{
  return xfer_sync(conn, "mem.write_shm", buf, offset, shm, shm_offset, len);
}

int hipd_mem_write_shm_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                                   uint64_t offset, const hipd_shm_t *shm,
                                   uint64_t shm_offset, size_t len,
                                   hipd_stream_t stream, hipd_call_t **call)
{
  return xfer_begin(conn, "mem.write_shm_async", buf, offset, shm, shm_offset,
                    len, 1, stream, call);
}

int hipd_mem_write_shm_async(hipd_conn_t *conn, hipd_buffer_t buf,
                             uint64_t offset, const hipd_shm_t *shm,
                             uint64_t shm_offset, size_t len,
                             hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(hipd_mem_write_shm_async_begin(
                       conn, buf, offset, shm, shm_offset, len, stream, &call),
                   &call);
}

int hipd_mem_read_shm(hipd_conn_t *conn, hipd_buffer_t buf, uint64_t offset,
                      const hipd_shm_t *shm, uint64_t shm_offset, size_t len)
{
  return xfer_sync(conn, "mem.read_shm", buf, offset, shm, shm_offset, len);
}

int hipd_mem_read_shm_async_begin(hipd_conn_t *conn, hipd_buffer_t buf,
                                  uint64_t offset, const hipd_shm_t *shm,
                                  uint64_t shm_offset, size_t len,
                                  hipd_stream_t stream, hipd_call_t **call)
{
  return xfer_begin(conn, "mem.read_shm_async", buf, offset, shm, shm_offset,
                    len, 1, stream, call);
}

int hipd_mem_read_shm_async(hipd_conn_t *conn, hipd_buffer_t buf,
                            uint64_t offset, const hipd_shm_t *shm,
                            uint64_t shm_offset, size_t len,
                            hipd_stream_t stream)
{
  hipd_call_t *call;

  return conn_sync(hipd_mem_read_shm_async_begin(
                       conn, buf, offset, shm, shm_offset, len, stream, &call),
                   &call);
}

int hipd_mem_alloc_zero_copy(hipd_conn_t *conn, int dev, const hipd_shm_t *shm,
                             hipd_buffer_t *out)
{
  hipd_call_t *c, *call;
  int err;

  if (out == NULL || shm == NULL)
    return conn_fail(conn, HIPD_EINVAL, "mem.alloc_zero_copy: %s is NULL",
                     out == NULL ? "out" : "shm");
  *out = HIPD_BUFFER_NULL;
  if ((err = conn_check_device(conn, "mem.alloc_zero_copy", dev)) < 0 ||
      (err = conn_call_begin(conn, "mem.alloc_zero_copy", 2, &c)) < 0)
    return err;
  msgpack_pack_uint64(&c->pk, shm->handle);
  conn_pack_device(&c->pk, dev);
  return conn_sync(
      conn_call_send(c, conn_decode_uint, CONN_OUTS(0, &out->id_), &call),
      &call);
}
