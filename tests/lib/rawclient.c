/* SPDX-License-Identifier: MIT */
/* tests/lib/rawclient.c: the hand-written msgpack-rpc client of the tests
 * (tests/lib/rawclient.h). */
#include "config.h"

#define _GNU_SOURCE 1

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "rawclient.h"

raw_t *raw_open(const char *path)
{
  raw_t *r = calloc(1, sizeof(*r));

  ck_assert_ptr_nonnull(r);
  r->wait_ms = 10000;
  r->fd = harness_raw_connect(path);
  ck_assert_msg(r->fd >= 0, "connect %s: %s", path, strerror(errno));
  msgpack_zone_init(&r->zone, 4096);
  msgpack_sbuffer_init(&r->out);
  msgpack_packer_init(&r->pk, &r->out, msgpack_sbuffer_write);
  return r;
}

void raw_close(raw_t *r)
{
  if (r->fd >= 0)
    close(r->fd);
  msgpack_zone_destroy(&r->zone);
  msgpack_sbuffer_destroy(&r->out);
  free(r->buf);
  free(r);
}

/* Send what was packed with r->pk and clear it. @return 0 or -1. */
int raw_flush(raw_t *r)
{
  int rc = harness_raw_send(r->fd, r->out.data, r->out.size);

  msgpack_sbuffer_clear(&r->out);
  return rc;
}

/* Pack the head of a request; its params follow with r->pk. */
void raw_request(raw_t *r, uint32_t msgid, const char *method, uint32_t nparams)
{
  proto_pack_request(&r->pk, msgid, method, nparams);
}

/* The next message from the daemon into r->msg (valid until the next
 * call). @return 1, or 0 if the connection closed or r->wait_ms passed. */
int raw_next(raw_t *r)
{
  long long deadline = harness_now_ms() + r->wait_ms;

  if (r->used > 0) { /* r->buf is NULL before the first read */
    memmove(r->buf, r->buf + r->used, r->len - r->used);
    r->len -= r->used;
    r->used = 0;
  }
  msgpack_zone_clear(&r->zone);
  for (;;) {
    proto_limits_t lim;
    const char *reason = "";
    size_t need = 0;
    long long n;

    proto_limits_default(&lim);
    n = proto_frame_scan(&lim, r->buf, r->len, &need, &reason);
    ck_assert_msg(n >= 0, "the daemon sent bad msgpack: %s", reason);
    if (n > 0) {
      ck_assert_int_eq(
          proto_msg_decode(r->buf, (size_t)n, &r->zone, &r->msg, &reason), 0);
      r->used = (size_t)n;
      return 1;
    }
    if (r->cap - r->len < 65536) {
      r->cap = r->cap * 2 + 65536;
      r->buf = realloc(r->buf, r->cap);
      ck_assert_ptr_nonnull(r->buf);
    }
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t got = recv(r->fd, r->buf + r->len, r->cap - r->len, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
      return 0;
    if (got > 0)
      r->len += (size_t)got;
    else if (harness_now_ms() >= deadline)
      return 0;
  }
}

/* Read the response to @p msgid. @return its error code (0 for a result);
 * the message goes to @p msg (may be NULL). */
int raw_response(raw_t *r, uint32_t msgid, char *msg, size_t size)
{
  const char *text;
  size_t len;
  int code;

  ck_assert_msg(raw_next(r), "no response to request %u", msgid);
  ck_assert_int_eq(r->msg.type, PROTO_RESPONSE);
  ck_assert_uint_eq(r->msg.msgid, msgid);
  if (msg != NULL && size > 0)
    msg[0] = '\0';
  if (r->msg.error->type == MSGPACK_OBJECT_NIL)
    return 0;
  ck_assert_int_eq(proto_error_decode(r->msg.error, &code, &text, &len), 0);
  if (msg != NULL)
    snprintf(msg, size, "%.*s", (int)len, text);
  return code;
}

void raw_hello(raw_t *r)
{
  raw_request(r, 1000000, "hello", 2);
  msgpack_pack_int(&r->pk, hipd_protocol_version());
  proto_pack_cstr(&r->pk, "raw");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 1000000, NULL, 0), 0);
}

/* Send what was packed with r->pk, with descriptor @p fd attached
 * (SCM_RIGHTS) to its first byte. @return 0 or -1. */
int raw_flush_fd(raw_t *r, int fd)
{
  proto_fd_ctl_t ctl;
  struct iovec iov = {.iov_base = r->out.data, .iov_len = r->out.size};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  ssize_t n;

  proto_msg_attach_fd(&mh, &ctl, fd);
  n = sendmsg(r->fd, &mh, MSG_NOSIGNAL);
  msgpack_sbuffer_clear(&r->out);
  return n == (ssize_t)iov.iov_len ? 0 : -1;
}
