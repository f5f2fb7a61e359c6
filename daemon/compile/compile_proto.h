/* SPDX-License-Identifier: MIT */
/* daemon/compile/compile_proto.h: the wire between hipd (compile_pool.c)
 * and a compile helper (hipd-compile, compile_helper.c).
 *
 * Transport: an AF_UNIX SOCK_STREAM socketpair; the helper's end is the fd
 * named by its --fd=N argument. Both ends are the same build on the same
 * host, but the helper parses client source with a compiler, so the
 * daemon treats everything it says as untrusted: every length is checked
 * against the hard limits below, every string against its bounds, and a
 * message whose fields do not exactly fill its payload is malformed. A
 * malformed message ends the helper (the daemon kills and restarts it).
 *
 * A message is a header, then `len` bytes of payload:
 *
 *   cp_hdr_t { magic CP_MAGIC, op, status, len }      (native byte order)
 *
 * Payload fields are built from two primitives: u32 (native order) and
 * str (u32 length, then that many bytes, no NUL in them, no terminator).
 * blob is like str but may hold any bytes.
 *
 *   HELLO    helper -> daemon, once, first:
 *            u32 version (CP_VERSION), u32 uid, u32 fsview (CP_FSVIEW_*),
 *            str sandbox (what sandbox_enter could not apply, "" if all),
 *            u32 ndrivers, ndrivers x { str name, str compiler_id }
 *   COMPILE  daemon -> helper:
 *            str driver, str arch, u32 nnames, nnames x str,
 *            u32 nopts, nopts x str, blob source
 *   RESULT   helper -> daemon, the answer to one COMPILE:
 *            header status = 0 or a negative HIPD_E* code;
 *            str log (the compiler's own output, or why it failed),
 *            blob image (empty unless status is 0),
 *            u32 flags: CP_RESULT_LEAVING (the helper exits after this
 *            answer: its own CPU time is nearly used up, or a compile was
 *            stopped; the daemon reaps it and starts another for the next
 *            compile), CP_RESULT_TIMED_OUT (this compile was stopped at
 *            the timeout), CP_RESULT_SCRATCH (what the compile left in
 *            the helper's scratch directory could not be removed: it
 *            leaves, with CP_RESULT_LEAVING);
 *            u32 compile_us, u32 cpu_us: the compiler's call in the helper,
 *            its wall-clock time and the helper's CPU time during it (all
 *            its threads; a host compiler's processes not counted), in
 *            microseconds, at most UINT32_MAX
 *
 * One COMPILE at a time: the daemon sends the next only after the RESULT.
 * When the daemon closes its end the helper exits.
 */
#ifndef HIPD_COMPILE_PROTO_H
#define HIPD_COMPILE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

#define CP_MAGIC 0x68634d50u /* "PMch" */
#define CP_VERSION 2

/* Hard limits, checked by both sides. */
#define CP_MAX_SOURCE ((uint32_t)64 << 20) /* bytes of kernel source */
#define CP_MAX_IMAGE ((uint32_t)512 << 20) /* bytes of a compiled image */
#define CP_MAX_LOG ((uint32_t)1 << 20)     /* bytes of log */
#define CP_MAX_STR 4096u                   /* driver, arch, name, option */
#define CP_MAX_NAMES 1024u                 /* kernel names per compile */
#define CP_MAX_OPTS 256u                   /* options per compile */
#define CP_MAX_DRIVERS 8u                  /* drivers in a hello */
#define CP_MAX_HELLO ((uint32_t)64 << 10)
#define CP_MAX_COMPILE                                                         \
  (CP_MAX_SOURCE + (CP_MAX_NAMES + CP_MAX_OPTS + 4) * (CP_MAX_STR + 4) + 16)
#define CP_MAX_RESULT (CP_MAX_IMAGE + CP_MAX_LOG + 32)

enum { CP_OP_HELLO = 1, CP_OP_COMPILE, CP_OP_RESULT };

/* RESULT flags. */
enum {
  CP_RESULT_LEAVING = 1u << 0,
  CP_RESULT_TIMED_OUT = 1u << 1,
  CP_RESULT_SCRATCH = 1u << 2, /* its scratch space could not be emptied */
};

/* How the helper's file-system view is limited. */
enum {
  CP_FSVIEW_NONE = 0,    /* not limited (only when asked: tests of it) */
  CP_FSVIEW_MOUNTNS = 1, /* its own mount (and pid, net) namespace: a tmpfs
                          * root with the toolchain bound read-only */
  CP_FSVIEW_LANDLOCK = 2 /* Landlock: the toolchain read-only, a private
                          * temporary directory read-write */
};

typedef struct {
  uint32_t magic;
  uint32_t op;
  int32_t status;
  uint32_t len; /* payload bytes after the header */
} cp_hdr_t;

/* The largest payload a message of @p op may carry; 0 for an unknown op. */
static inline uint32_t cp_max_payload(uint32_t op)
{
  switch (op) {
  case CP_OP_HELLO:
    return CP_MAX_HELLO;
  case CP_OP_COMPILE:
    return CP_MAX_COMPILE;
  case CP_OP_RESULT:
    return CP_MAX_RESULT;
  default:
    return 0;
  }
}

/* Name of a CP_FSVIEW_* value ("mount namespace", ...). */
const char *cp_fsview_name(uint32_t v);

/* ------------------------------------------------------------ building */

/* A message payload is built in a strbuf_t (util/strbuf.h): a failed
 * append (memory, or past its limit) is kept, and strbuf_failed() says so
 * once the payload is built. */

void cp_put_u32(strbuf_t *b, uint32_t v);
/* @p ns in whole microseconds, UINT32_MAX at most (a RESULT's times). */
uint32_t cp_us(uint64_t ns);
void cp_put_blob(strbuf_t *b, const void *data, size_t len);
void cp_put_str(strbuf_t *b, const char *s);

/* ------------------------------------------------------------- reading */

/* A cursor over a received payload. Every getter fails (returns
 * HIPD_EPROTO, or HIPD_ENOMEM for a copy, and sets @c bad) on a short payload,
 * a length past its bound or, for strings, a NUL byte; after one failure every
 * getter fails. */
typedef struct {
  const unsigned char *p;
  size_t len, off;
  int bad;
} cp_rd_t;

int cp_get_u32(cp_rd_t *r, uint32_t *v);
/* A str of at most @p max bytes: *@p s points into the payload (not
 * terminated), *@p n its length. */
int cp_get_str(cp_rd_t *r, uint32_t max, const char **s, uint32_t *n);
/* The same as a malloc'd NUL-terminated copy (*@p out; free it). */
int cp_get_strdup(cp_rd_t *r, uint32_t max, char **out);
/* A blob of at most @p max bytes (any bytes), pointing into the payload. */
int cp_get_blob(cp_rd_t *r, uint32_t max, const void **p, uint32_t *n);
/* 0 if the whole payload was read and nothing failed, else HIPD_EPROTO. */
int cp_rd_end(const cp_rd_t *r);

/* ------------------------------------------------------------ messages */

/* Write header and payload on stream socket @p fd. Blocking, retries on
 * EINTR, MSG_NOSIGNAL. @return 0, or -1 with errno. */
int cp_send(int fd, uint32_t op, int32_t status, const void *payload,
            size_t len);
/* Read one message from @p fd into *@p hdr and a malloc'd *@p payload
 * (NULL when len is 0). The header is checked (magic, a known op, len
 * within cp_max_payload) before anything is allocated. @p deadline_ms is
 * a util_now_ms() time after which it gives up (0: none).
 * @return 0; -1 with errno: EPROTO (malformed header), ECONNRESET (end of
 * file, even mid-message), ETIMEDOUT, or the read's error. */
int cp_recv(int fd, cp_hdr_t *hdr, unsigned char **payload,
            uint64_t deadline_ms);

#endif
