/* SPDX-License-Identifier: MIT */
/* tests/lib/rawclient.h: a msgpack-rpc client written by hand over a plain
 * socket, for the tests that must send what libhipd never would (bad
 * frames, descriptors, requests before hello) and read the replies as they
 * come. Compiled once in tests/lib/rawclient.c (libhipdtest). Every
 * function fails the running test on an unexpected error unless it says
 * it returns one.
 */
#ifndef HIPD_TESTS_RAWCLIENT_H
#define HIPD_TESTS_RAWCLIENT_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h"

/* A client speaking msgpack-rpc by hand over a plain socket. */
typedef struct {
  int fd;
  uint8_t *buf;
  size_t len, cap, used; /* used: bytes of the message last returned */
  msgpack_zone zone;
  proto_msg_t msg;
  msgpack_sbuffer out;
  msgpack_packer pk;
  int wait_ms; /* how long raw_next() waits for a message: 10 s by default */
} raw_t;

/* Connect to the socket at @p path (no handshake). */
raw_t *raw_open(const char *path);
/* Close the connection and free @p r. */
void raw_close(raw_t *r);
/* Send what was packed with r->pk and clear it. @return 0 or -1. */
int raw_flush(raw_t *r);
/* Pack the head of a request; its params follow with r->pk. */
void raw_request(raw_t *r, uint32_t msgid, const char *method,
                 uint32_t nparams);
/* The next message from the daemon into r->msg (valid until the next
 * call). @return 1, or 0 if the connection closed or 10 s passed. */
int raw_next(raw_t *r);
/* Read the response to @p msgid. @return its error code (0 for a result);
 * the message goes to @p msg (may be NULL). */
int raw_response(raw_t *r, uint32_t msgid, char *msg, size_t size);
/* The handshake (hello, as client "raw"), which must succeed. */
void raw_hello(raw_t *r);
/* Send what was packed with r->pk, with descriptor @p fd attached
 * (SCM_RIGHTS) to its first byte. @return 0 or -1. */
int raw_flush_fd(raw_t *r, int fd);

#endif
