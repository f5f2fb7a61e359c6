/* hipd.h: the client library of hipd, a GPU execution daemon.
 *
 * A client connects to hipd's Unix socket and calls methods; every call maps
 * to one msgpack-rpc method documented in proto/PROTOCOL.md (`mem.alloc` is
 * hipd_mem_alloc). All types are opaque so that the ABI can grow.
 *
 * Errors: every function returns 0 (or a non-negative count where it says
 * so) or a negative HIPD_E* code. hipd_strerror() and hipd_err_name() describe
 * a code; hipd_last_error() returns the daemon's message for the last failed
 * call of the calling thread on a connection.
 *
 * Threads: a connection may be used from several threads at once. Calls from
 * different threads are pipelined on the one socket.
 */
#ifndef HIPD_H
#define HIPD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define HIPD_EXTERN __attribute__((visibility("default")))
#else
#define HIPD_EXTERN
#endif

/* The error table, shared by daemon and client. The numbers are stable:
 * they travel on the wire and a number, once published, never changes
 * meaning. New codes are appended. XX(name, number, message). */
#define HIPD_ERRNO_MAP(XX)                                                     \
  XX(EINVAL, -1, "invalid argument")                                           \
  XX(ENOMEM, -2, "out of memory")                                              \
  XX(EPROTO, -3, "protocol error")                                             \
  XX(EMSGSIZE, -4, "message too large")                                        \
  XX(ENOMETHOD, -5, "unknown method")                                          \
  XX(EPARAMS, -6, "bad parameters")                                            \
  XX(EHANDLE, -7, "invalid handle")                                            \
  XX(ESTALE, -8, "stale handle (already freed)")                               \
  XX(EFOREIGN, -9, "handle belongs to another session")                        \
  XX(EHANDLETYPE, -10, "handle of the wrong type")                             \
  XX(EDISCONNECTED, -11, "disconnected from the daemon")                       \
  XX(ECONNECT, -12, "cannot connect to the daemon")                            \
  XX(ETIMEDOUT, -13, "timed out")                                              \
  XX(EVERSION, -14, "protocol version not supported")                          \
  XX(EHELLO, -15, "handshake (hello) required first")                          \
  XX(ESHUTDOWN, -16, "daemon is shutting down")                                \
  XX(EIO, -17, "input/output error")                                           \
  XX(ENODEV, -18, "no such device")                                            \
  XX(ERANGE, -19, "out of range")                                              \
  XX(EQUOTA, -20, "quota exceeded")                                            \
  XX(EDEVICE, -21, "device error")                                             \
  XX(ENOTSUP, -22, "not supported")                                            \
  XX(ENOTREADY, -23, "not complete yet")                                       \
  XX(ENOTRECORDED, -24, "event not recorded")                                  \
  XX(ECOMPILE, -25, "compilation failed")                                      \
  XX(ENOKERNEL, -26, "kernel not found")                                       \
  XX(ELAUNCH, -27, "kernel launch failed")                                     \
  XX(ELIMIT, -28, "exceeds a device limit")                                    \
  XX(EDEVLOST, -29, "device context lost")                                     \
  XX(ELANG, -30, "unsupported source language")                                \
  XX(EIR, -31, "malformed IR")                                                 \
  XX(EINTRINSIC, -32, "unknown intrinsic")                                     \
  XX(ESIGNATURE, -33, "arguments do not match the kernel signature")           \
  XX(ETOOMANY, -34, "too many objects")                                        \
  XX(EBUSY, -35, "resource busy")                                              \
  XX(ECANCELED, -36, "operation canceled")                                     \
  XX(EEXIST, -37, "already exists")                                            \
  XX(ENOENT, -38, "no such entry")                                             \
  XX(EPERM, -39, "operation not permitted")                                    \
  XX(EINTERNAL, -40, "internal daemon error")

typedef enum {
#define HIPD_ERR_ENUM_(name, num, msg) HIPD_##name = num,
  HIPD_ERRNO_MAP(HIPD_ERR_ENUM_)
#undef HIPD_ERR_ENUM_
      HIPD_ERRNO_MAX_ = -41
} hipd_errno_t;

/** @return a static description of @p err ("unknown error" if unknown). */
HIPD_EXTERN const char *hipd_strerror(int err);
/** @return the static symbolic name of @p err ("EINVAL"), or "UNKNOWN". */
HIPD_EXTERN const char *hipd_err_name(int err);
/** @return the error number for a symbolic name, or 0 if none has it. */
HIPD_EXTERN int hipd_err_from_name(const char *name);

/** Version of this client library ("0.1.0") and its protocol version. */
HIPD_EXTERN const char *hipd_version(void);
HIPD_EXTERN int hipd_protocol_version(void);

/* ------------------------------------------------------------------ types */

typedef struct hipd_conn hipd_conn_t; /* one connection (session) */
typedef struct hipd_call hipd_call_t; /* one request in flight */
typedef struct hipd_info hipd_info_t; /* a structured result (a record) */

/* ------------------------------------------------------------ connection */

/**
 * Connect to hipd and perform the `hello` handshake.
 * @param path socket path, or NULL for $HIPD_SOCKET, else /run/hipd/hipd.sock
 *        for root or $XDG_RUNTIME_DIR/hipd.sock otherwise.
 * @param out the new connection; the caller releases it with hipd_close().
 * @return 0, HIPD_ECONNECT (nobody listens), HIPD_EVERSION, HIPD_ENOMEM...
 */
HIPD_EXTERN int hipd_connect(const char *path, hipd_conn_t **out);
/** Like hipd_connect() with the client name sent in `hello` (default: the
 *  program's name). */
HIPD_EXTERN int hipd_connect2(const char *path, const char *client_name,
                              hipd_conn_t **out);
/** Close the connection. Calls still pending fail with HIPD_EDISCONNECTED;
 *  their hipd_call_t must still be waited for or freed. No other thread may
 *  use @p conn once this is called. */
HIPD_EXTERN void hipd_close(hipd_conn_t *conn);
/** The daemon's message for the last call that failed on this connection in
 *  the calling thread ("" if none). Valid until that thread's next call. */
HIPD_EXTERN const char *hipd_last_error(hipd_conn_t *conn);
/** The socket's file descriptor (for poll-based event loops), or -1. */
HIPD_EXTERN int hipd_fileno(hipd_conn_t *conn);
/** Per-call timeout in milliseconds for waits on this connection (0: none,
 *  the default). A call past it returns HIPD_ETIMEDOUT. */
HIPD_EXTERN void hipd_set_timeout(hipd_conn_t *conn, int timeout_ms);

/* ------------------------------------------------------------ pipelining */

/**
 * Every method has a synchronous form, hipd_X(conn, ...), and a pipelined
 * form, hipd_X_async(conn, ..., &call), that sends the request and returns at
 * once. The result pointers given to the async form are filled when the reply
 * arrives; they must stay valid until hipd_wait() on the call returns.
 * Replies may arrive in any order; calls may be waited for in any order.
 */
/** Wait for @p call to complete and free it. @return the call's result. */
HIPD_EXTERN int hipd_wait(hipd_call_t *call);
/** @return 1 if @p call has completed (hipd_wait will not block), else 0.
 *  Reads whatever replies have arrived without blocking. */
HIPD_EXTERN int hipd_call_done(hipd_call_t *call);
/** The daemon's error message for a completed, failed call ("" if none).
 *  Valid until hipd_wait() frees the call. */
HIPD_EXTERN const char *hipd_call_error(hipd_call_t *call);

/* ---------------------------------------------------------- info records */

/**
 * A structured result (daemon identity, session details, device record...).
 * Fields are reached by a dotted path: "version", "peer.pid", "features.0".
 * The getters return 0, HIPD_ENOENT (no such field) or HIPD_EHANDLETYPE (the
 * field has another type).
 */
HIPD_EXTERN int hipd_info_int(const hipd_info_t *info, const char *path,
                              int64_t *out);
HIPD_EXTERN int hipd_info_double(const hipd_info_t *info, const char *path,
                                 double *out);
HIPD_EXTERN int hipd_info_bool(const hipd_info_t *info, const char *path,
                               int *out);
/** @p out points into @p info and lives as long as it. Not NUL-safe for
 *  binary strings: use @p len. */
HIPD_EXTERN int hipd_info_str(const hipd_info_t *info, const char *path,
                              const char **out, size_t *len);
/** @return the number of elements of an array or map field, or an error. */
HIPD_EXTERN int hipd_info_len(const hipd_info_t *info, const char *path);
/** Write @p info as JSON-like text into @p buf (truncated to @p size).
 *  @return the length the full text needs (excluding the NUL). */
HIPD_EXTERN int hipd_info_format(const hipd_info_t *info, char *buf,
                                 size_t size);
HIPD_EXTERN void hipd_info_free(hipd_info_t *info);

/* --------------------------------------------------------------- methods */

/** `hello`: repeat the handshake; @p out gets the daemon's identity
 *  (name, version, protocol, features, session). */
HIPD_EXTERN int hipd_hello(hipd_conn_t *conn, hipd_info_t **out);

/** `ping`: the daemon echoes @p len bytes of @p data into @p out (capacity
 *  @p cap; *@p out_len gets the length). HIPD_ERANGE if @p cap is too small. */
HIPD_EXTERN int hipd_ping(hipd_conn_t *conn, const void *data, size_t len,
                          void *out, size_t cap, size_t *out_len);
HIPD_EXTERN int hipd_ping_async(hipd_conn_t *conn, const void *data, size_t len,
                                void *out, size_t cap, size_t *out_len,
                                hipd_call_t **call);

/** `daemon.info`: version, uptime, sessions, build features. */
HIPD_EXTERN int hipd_daemon_info(hipd_conn_t *conn, hipd_info_t **out);
HIPD_EXTERN int hipd_daemon_info_async(hipd_conn_t *conn, hipd_info_t **out,
                                       hipd_call_t **call);

/** `session.info`: this session's id, peer credentials, resource counts. */
HIPD_EXTERN int hipd_session_info(hipd_conn_t *conn, hipd_info_t **out);
HIPD_EXTERN int hipd_session_info_async(hipd_conn_t *conn, hipd_info_t **out,
                                        hipd_call_t **call);

#ifdef __cplusplus
}
#endif
#endif /* HIPD_H */
