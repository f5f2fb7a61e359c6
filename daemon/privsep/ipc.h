/* SPDX-License-Identifier: MIT */
/* daemon/privsep/ipc.h: the wire between hipd's listener and its tenant
 * workers.
 *
 * One channel per worker: a Unix socket pair made by the listener, opened
 * in both processes as a libuv IPC pipe, so that a message can carry a
 * client connection (SCM_RIGHTS). The bytes are msgpack-rpc messages
 * (proto/rpc.h), framed and decoded by the same scanner as client
 * requests, under limits of their own (ipc_limits()). The listener treats
 * every message from a worker as untrusted input: each method checks its
 * params (ipc_param_*) and a message that breaks the format closes the
 * channel, which ends that worker. The methods are listed in
 * docs/ARCHITECTURE.md ("Processes").
 *
 * Loop thread only, in both processes.
 */
#ifndef HIPD_PRIVSEP_IPC_H
#define HIPD_PRIVSEP_IPC_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rpc.h"

/* A message of a channel may carry a compiled binary: 256 MiB at most. */
#define IPC_MAX_MESSAGE ((size_t)256 << 20)
/* Bytes queued to a peer that does not read, at most: one message at its
 * largest (a compiled image) and 64 MiB more. A send beyond breaks the
 * channel (the listener then ends that worker). */
#define IPC_MAX_QUEUED (IPC_MAX_MESSAGE + ((size_t)64 << 20))

typedef struct ipc_chan ipc_chan_t;

/* A message arrived. @p msg and what it points to live until the callback
 * returns. */
typedef void (*ipc_msg_fn)(ipc_chan_t *ch, const proto_msg_t *msg);
/* The channel broke (EOF, an error, a malformed message): @p why says
 * which. The callback may ipc_close() the channel; nothing else is
 * delivered after it. */
typedef void (*ipc_broken_fn)(ipc_chan_t *ch, const char *why);
/* The channel's memory may be released (after ipc_close()). */
typedef void (*ipc_closed_fn)(ipc_chan_t *ch);

struct ipc_chan {
  uv_pipe_t pipe; /* ipc = 1; pipe.data = this channel */
  uint8_t *in;    /* bytes received, not yet a whole message */
  size_t in_len, in_cap, in_need;
  msgpack_zone zone;
  ipc_msg_fn on_msg;
  ipc_broken_fn on_broken;
  ipc_closed_fn on_closed;
  void *data; /* the owner's */
  uint32_t next_msgid;
  int reading, broken, closing;
  int no_handles; /* set by the owner: a descriptor that comes breaks the
                     channel (the listener's ends: workers send none) */
};

/* The decode limits of every channel. */
const proto_limits_t *ipc_limits(void);

/* Set up @p ch on @p loop, not yet connected: the listener passes
 * &ch->pipe to uv_spawn() as the stdio slot of the worker's end. */
int ipc_init(uv_loop_t *loop, ipc_chan_t *ch);
/* Set up @p ch on the inherited socket @p fd (the worker's end). */
int ipc_open(uv_loop_t *loop, ipc_chan_t *ch, int fd);
/* Start delivering messages. @return 0 or a negative libuv code. */
int ipc_start(ipc_chan_t *ch, ipc_msg_fn on_msg, ipc_broken_fn on_broken);

/* Send the @p len bytes at @p data (copied). @return 0 or a negative
 * libuv code (the channel is then broken). */
int ipc_send(ipc_chan_t *ch, const void *data, size_t len);
/* The same, with the connection @p conn (malloc'd, accepted): it is closed
 * and freed here once sent, or at once on failure. */
int ipc_send_handle(ipc_chan_t *ch, const void *data, size_t len,
                    uv_pipe_t *conn);

/* Take the connection that came with the message being delivered into
 * @p client (an initialised uv_pipe_t). @return 0, or HIPD_EPROTO when
 * none came. */
int ipc_accept(ipc_chan_t *ch, uv_stream_t *client);

/* Treat the channel as broken (a message its owner cannot accept): no
 * message is delivered after this one, and on_broken runs with @p why. */
void ipc_break(ipc_chan_t *ch, const char *why);

/* Close; @p closed runs once libuv has let go of the pipe. */
void ipc_close(ipc_chan_t *ch, ipc_closed_fn closed);

/* ---- params of a received message (each returns 0 or HIPD_EINVAL) ---- */
/* param @p i of @p msg as an unsigned integer of at most @p max. */
int ipc_param_uint(const proto_msg_t *msg, uint32_t i, uint64_t max,
                   uint64_t *out);
/* param @p i as a string or binary of at most @p max bytes (not copied,
 * not NUL-ended). */
int ipc_param_bytes(const proto_msg_t *msg, uint32_t i, size_t max,
                    const char **p, size_t *len);
/* param @p i as an array: @p out gets it. */
int ipc_param_array(const proto_msg_t *msg, uint32_t i, uint32_t max,
                    const msgpack_object **out);
/* Is @p msg the method @p name? */
int ipc_is(const proto_msg_t *msg, const char *name);

#endif
