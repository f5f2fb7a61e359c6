/* SPDX-License-Identifier: MIT */
/* tests/check_daemon_protocol.c: what the daemon does with what it should
 * not get: requests before hello, unknown methods and bad params (an error
 * reply, the session goes on); protocol violations, stray notifications,
 * descriptors, handshake and request timeouts, disconnects with work in
 * flight, a client that never reads (the session is closed), and the
 * global bound on buffered input (--max-input-bytes). The
 * shared helpers are in tests/lib/daemon_util.h, the raw client in
 * tests/lib/rawclient.h. */
#include "config.h"

#include "daemon_util.h"
#include "run.h"

/* ----------------------------------------------------------- bad requests */

START_TEST(test_before_hello)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;
  char msg[256];

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_request(r, 1, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 1, msg, sizeof(msg)), HIPD_EHELLO);
  ck_assert_msg(strstr(msg, "hello") != NULL, "message: %s", msg);
  raw_request(r, 2, "mem.alloc", 2);
  msgpack_pack_int(&r->pk, 16);
  proto_pack_cstr(&r->pk, "byte");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 2, NULL, 0), HIPD_EHELLO);
  /* ping needs no handshake (a liveness probe). */
  raw_request(r, 3, "ping", 1);
  msgpack_pack_bin_with_body(&r->pk, "pre", 3);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 3, NULL, 0), 0);
  ck_assert_int_eq(r->msg.result->type, MSGPACK_OBJECT_BIN);
  ck_assert_uint_eq(r->msg.result->via.bin.size, 3);
  /* After hello the same request works. */
  raw_hello(r);
  raw_request(r, 4, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 4, NULL, 0), 0);
  ck_assert_int_eq(r->msg.result->type, MSGPACK_OBJECT_MAP);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_unknown_method)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;
  char msg[256];

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_request(r, 7, "no.such_method", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 7, msg, sizeof(msg)), HIPD_ENOMETHOD);
  ck_assert_msg(strstr(msg, "no.such_method") != NULL, "message: %s", msg);
  /* The session goes on. */
  raw_request(r, 8, "ping", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 8, NULL, 0), 0);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_bad_params)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;
  char msg[256];

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  /* Too few. */
  raw_request(r, 1, "mem.size", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 1, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "mem.size") != NULL, "message: %s", msg);
  /* Too many. */
  raw_request(r, 2, "ping", 2);
  msgpack_pack_nil(&r->pk);
  msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 2, NULL, 0), HIPD_EPARAMS);
  /* Wrong types. */
  raw_request(r, 3, "device.get", 1);
  proto_pack_cstr(&r->pk, "zero");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 3, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "device") != NULL, "message: %s", msg);
  raw_request(r, 4, "mem.alloc", 2);
  proto_pack_cstr(&r->pk, "16");
  proto_pack_cstr(&r->pk, "byte");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 4, NULL, 0), HIPD_EPARAMS);
  raw_request(r, 5, "ping", 1);
  msgpack_pack_int(&r->pk, 5);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 5, NULL, 0), HIPD_EPARAMS);
  raw_request(r, 6, "mem.free", 1);
  proto_pack_cstr(&r->pk, "handle");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 6, NULL, 0), HIPD_EPARAMS);
  /* A nil where a required string goes is named as such. */
  raw_request(r, 8, "mem.alloc", 2);
  msgpack_pack_uint64(&r->pk, 16);
  msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 8, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "param 1 (kind) must be a string, not nil"),
                "message: %s", msg);
  /* So is a nil where a required integer goes: not read as 0. */
  raw_request(r, 9, "mem.alloc", 2);
  msgpack_pack_nil(&r->pk);
  proto_pack_cstr(&r->pk, "byte");
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 9, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(
      strstr(msg, "param 0 (count) must be an unsigned integer, not nil"),
      "message: %s", msg);
  raw_request(r, 10, "device.set_current", 1);
  msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 10, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(
      strstr(msg, "param 0 (device) must be an unsigned integer, not nil"),
      "message: %s", msg);
  /* An optional param before a required one may be nil, not absent. */
  raw_request(r, 11, "run_source", 7);
  proto_pack_cstr(&r->pk, "src");
  msgpack_pack_nil(&r->pk);
  for (int i = 0; i < 5; i++)
    msgpack_pack_nil(&r->pk);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 11, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "param 1 (lang) must be a string, not nil"),
                "message: %s", msg);
  /* Bounds: an integer's range, a string's length, a target's type. */
  raw_request(r, 12, "hello", 1);
  msgpack_pack_int(&r->pk, -1);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 12, msg, sizeof(msg)), HIPD_ERANGE);
  ck_assert_msg(
      strstr(msg, "hello: param 0 (protocol) must be between 0 and 2147483647"),
      "message: %s", msg);
  {
    char name[256];
    memset(name, 'a', sizeof(name));
    raw_request(r, 13, "intrinsics.find", 1);
    msgpack_pack_str_with_body(&r->pk, name, sizeof(name));
    ck_assert_int_eq(raw_flush(r), 0);
    ck_assert_int_eq(raw_response(r, 13, msg, sizeof(msg)), HIPD_EPARAMS);
    ck_assert_msg(
        strstr(msg, "param 0 (name) is 256 bytes long, more than 255"),
        "message: %s", msg);
  }
  raw_request(r, 14, "kernel.compile", 4);
  proto_pack_cstr(&r->pk, "src");
  proto_pack_cstr(&r->pk, "k");
  msgpack_pack_nil(&r->pk);
  msgpack_pack_bin_with_body(&r->pk, "x", 1);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 14, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "param 3 (target) must be a device id (unsigned "
                            "integer) or an architecture (string), not bin"),
                "message: %s", msg);
  raw_request(r, 15, "kernel.compile", 3);
  proto_pack_cstr(&r->pk, "src");
  proto_pack_cstr(&r->pk, "k");
  msgpack_pack_array(&r->pk, 1);
  msgpack_pack_int(&r->pk, 3);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 15, msg, sizeof(msg)), HIPD_EPARAMS);
  ck_assert_msg(strstr(msg, "option 0 must be a string of under 256 bytes"),
                "message: %s", msg);
  /* execute_direct takes any params, and reads none. */
  raw_request(r, 16, "execute_direct", 3);
  msgpack_pack_nil(&r->pk);
  msgpack_pack_map(&r->pk, 0);
  msgpack_pack_int(&r->pk, -5);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 16, msg, sizeof(msg)), HIPD_ENOTSUP);
  /* The session goes on. */
  raw_request(r, 7, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 7, NULL, 0), 0);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ---------------------------------------------------------- violations */

/* Bytes that break the protocol, and the reason the daemon logs. */
typedef struct {
  const char *name;
  const char *reason;
  void (*pack)(msgpack_packer *pk);
} violation_t;

static void pack_not_array(msgpack_packer *pk)
{
  msgpack_pack_int(pk, 5);
}

static void pack_type7(msgpack_packer *pk)
{
  msgpack_pack_array(pk, 4);
  msgpack_pack_int(pk, 7);
  msgpack_pack_int(pk, 1);
  proto_pack_cstr(pk, "ping");
  msgpack_pack_array(pk, 0);
}

static void pack_oversize(msgpack_packer *pk)
{
  size_t n = 100 << 10;
  char *big = calloc(1, n);

  proto_pack_request(pk, 1, "ping", 1);
  msgpack_pack_bin_with_body(pk, big, n);
  free(big);
}

static void pack_too_deep(msgpack_packer *pk)
{
  proto_pack_request(pk, 1, "ping", 1);
  for (int i = 0; i < 12; i++)
    msgpack_pack_array(pk, 1);
  msgpack_pack_nil(pk);
}

static void pack_c1(msgpack_packer *pk)
{
  static const char c1 = (char)0xc1;

  msgpack_pack_array(pk, 4);
  pk->callback(pk->data, &c1, 1);
}

static void pack_response(msgpack_packer *pk)
{
  proto_pack_response(pk, 1);
  msgpack_pack_nil(pk);
}

static const violation_t violations[] = {
    {"not an array", "a message must be a non-empty array", pack_not_array},
    {"type 7", "unknown message type", pack_type7},
    {"oversize", "larger than the maximum message size", pack_oversize},
    {"too deep", "nested deeper than the maximum depth", pack_too_deep},
    {"0xc1", "invalid msgpack type byte 0xc1", pack_c1},
    {"a response", "a client sent a response", pack_response},
};

/* Each violation closes its own connection, logged with its reason; a
 * client connected all along is not disturbed. */
START_TEST(test_protocol_violations)
{
  harness_daemon_t *d =
      harness_start("--max-message", "64K", "--max-depth", "8", NULL);
  const violation_t *v = &violations[_i];
  hipd_conn_t *keeper;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  keeper = connect_to(d);
  r = raw_open(d->socket);
  raw_hello(r);
  v->pack(&r->pk);
  raw_flush(r); /* may fail half-way once the daemon hangs up */
  ck_assert_msg(harness_raw_wait_closed(r->fd, 10000),
                "%s: the daemon kept the connection open", v->name);
  ck_assert_msg(harness_log_wait(d, v->reason, 5000),
                "%s: the log does not say '%s'", v->name, v->reason);
  ck_assert(harness_log_contains(d, "protocol violation"));
  ping_ok(keeper);
  wait_sessions(keeper, 1);
  raw_close(r);
  hipd_close(keeper);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_unknown_notification)
{
  harness_daemon_t *d = harness_start(NULL);
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);
  proto_pack_notify(&r->pk, "no.such_notification", 1);
  msgpack_pack_int(&r->pk, 1);
  raw_request(r, 42, "ping", 1);
  msgpack_pack_bin_with_body(&r->pk, "still here", 10);
  ck_assert_int_eq(raw_flush(r), 0);
  /* The next message is the ping's reply: nothing answers a
   * notification. */
  ck_assert_int_eq(raw_response(r, 42, NULL, 0), 0);
  ck_assert_uint_eq(r->msg.result->via.bin.size, 10);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A memfd of @p size bytes with @p seals added. */
static int memfd_sealed(size_t size, int seals)
{
  int fd = memfd_create("check-daemon", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
  if (seals != 0)
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

/* shm.create with descriptor @p fd (-1: none) for @p size bytes.
 * @return the error code; the message goes to @p msg. */
static int raw_shm_create(raw_t *r, uint32_t msgid, int fd, uint64_t size,
                          char *msg, size_t msgsz)
{
  raw_request(r, msgid, "shm.create", 1);
  msgpack_pack_uint64(&r->pk, size);
  ck_assert_int_eq(fd >= 0 ? raw_flush_fd(r, fd) : raw_flush(r), 0);
  return raw_response(r, msgid, msg, msgsz);
}

/* Descriptors on the connection: only a memfd of the peer, sealed against
 * shrinking and as large as claimed, is taken; each refusal says why and
 * the session goes on. Descriptors nobody claims are a violation. */
START_TEST(test_shm_descriptors)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  char msg[256], path[256];
  int pipefd[2], fd;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);
  raw_hello(r);

  ck_assert_int_eq(raw_shm_create(r, 1, -1, 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "no file descriptor") != NULL, "%s", msg);

  fd = memfd_sealed(8192, 0);
  ck_assert_int_eq(raw_shm_create(r, 2, fd, 8192, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "F_SEAL_SHRINK") != NULL, "%s", msg);
  close(fd);

  fd = memfd_sealed(8192, F_SEAL_SHRINK);
  ck_assert_int_eq(raw_shm_create(r, 3, fd, 16384, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "beyond") != NULL, "%s", msg);
  ck_assert_int_eq(raw_shm_create(r, 4, fd, 8192, msg, sizeof(msg)), 0);
  ck_assert_int_eq(r->msg.result->type, MSGPACK_OBJECT_MAP);
  close(fd);

  /* A sparse memfd as large as the host's memory costs nothing to make;
   * pinning it would starve the node. */
  {
    uint64_t phys =
        (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    fd = memfd_sealed((size_t)phys, F_SEAL_SHRINK);
    ck_assert_int_eq(raw_shm_create(r, 40, fd, phys, msg, sizeof(msg)),
                     HIPD_ENOMEM);
    ck_assert_msg(strstr(msg, "half of the host") != NULL, "%s", msg);
    close(fd);
  }

  ck_assert_int_eq(pipe(pipefd), 0);
  ck_assert_int_eq(raw_shm_create(r, 5, pipefd[0], 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "not a memfd") != NULL, "%s", msg);
  close(pipefd[0]);
  close(pipefd[1]);

  /* A file on disk cannot be sealed: refused as unsealed. */
  snprintf(path, sizeof(path), "%s", harness_temp_path("not-memfd"));
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 4096), 0);
  ck_assert_int_eq(raw_shm_create(r, 6, fd, 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  close(fd);
  unlink(path);

  /* The session is still fine. */
  raw_request(r, 7, "ping", 0);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, 7, NULL, 0), 0);

  /* Nine descriptors received while one request is still incomplete (its
   * bytes one at a time, each with a descriptor): none is claimed yet, and
   * the ninth is a violation. The daemon goes on. */
  fd = memfd_sealed(4096, F_SEAL_SHRINK);
  raw_request(r, 100, "ping", 1);
  proto_pack_cstr(&r->pk, "sixteen bytes...");
  {
    msgpack_sbuffer whole = r->out;
    ck_assert_uint_gt(whole.size, 9);
    msgpack_sbuffer_init(&r->out);
    for (size_t i = 0; i < 9; i++) {
      msgpack_sbuffer_write(&r->out, whole.data + i, 1);
      if (raw_flush_fd(r, fd) != 0)
        break;
    }
    msgpack_sbuffer_destroy(&whole);
  }
  close(fd);
  ck_assert_int_eq(harness_raw_wait_closed(r->fd, 5000), 1);
  ck_assert(harness_log_wait(d, "more than 8 descriptors", 5000));
  raw_close(r);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A descriptor belongs to the request it came with: a request refused
 * before its handler runs (no hello, unknown method, wrong arity), or one
 * that takes no descriptor, closes it, and the next shm.create gets its own
 * (not a leftover: memfd A sent with a refused request, then memfd B). */
START_TEST(test_fd_claimed_by_its_request)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  char msg[256];
  int rfd, fd;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  r = raw_open(d->socket);

  ck_assert_int_eq(raw_with_pipe(r, 1, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_EHELLO);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "EHELLO kept the descriptor");
  close(rfd);
  raw_hello(r);

  ck_assert_int_eq(raw_with_pipe(r, 2, "shm.creat", 1, &rfd, msg, sizeof(msg)),
                   HIPD_ENOMETHOD);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ENOMETHOD kept the descriptor");
  close(rfd);

  ck_assert_int_eq(raw_with_pipe(r, 3, "shm.create", 2, &rfd, msg, sizeof(msg)),
                   HIPD_EPARAMS);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "EPARAMS kept the descriptor");
  close(rfd);

  ck_assert_int_eq(raw_with_pipe(r, 4, "ping", 0, &rfd, msg, sizeof(msg)), 0);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "ping kept the descriptor");
  close(rfd);

  ck_assert_int_eq(raw_with_pipe(r, 5, "shm.create", 1, &rfd, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "not a memfd") != NULL, "%s", msg);
  ck_assert_msg(pipe_writer_gone(rfd, 5000), "EINVAL kept the descriptor");
  close(rfd);

  /* memfd A (4096 bytes) with a shm.create of the wrong arity, then memfd
   * B (8192 bytes) with a good one: B is the one it gets. */
  fd = memfd_sealed(4096, F_SEAL_SHRINK);
  raw_request(r, 6, "shm.create", 2);
  msgpack_pack_uint64(&r->pk, 4096);
  msgpack_pack_uint64(&r->pk, 4096);
  ck_assert_int_eq(raw_flush_fd(r, fd), 0);
  ck_assert_int_eq(raw_response(r, 6, msg, sizeof(msg)), HIPD_EPARAMS);
  close(fd);
  fd = memfd_sealed(8192, F_SEAL_SHRINK);
  ck_assert_int_eq(raw_shm_create(r, 7, fd, 8192, msg, sizeof(msg)), 0);
  close(fd);
  /* ...and the next one without a descriptor finds none. */
  ck_assert_int_eq(raw_shm_create(r, 8, -1, 4096, msg, sizeof(msg)),
                   HIPD_EINVAL);
  ck_assert_msg(strstr(msg, "no file descriptor") != NULL, "%s", msg);
  raw_close(r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A connection that never completes hello is closed after --hello-timeout;
 * one that did stays. */
START_TEST(test_hello_timeout)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--hello-timeout", "300", NULL);
  raw_t *silent, *ok;
  hipd_conn_t *conn;
  int fd;

  ck_assert_ptr_nonnull(d);
  ok = raw_open(d->socket);
  raw_hello(ok);
  silent = raw_open(d->socket);
  /* A ping is allowed before hello but does not stand for it. */
  raw_request(silent, 1, "ping", 0);
  ck_assert_int_eq(raw_flush(silent), 0);
  ck_assert_int_eq(raw_response(silent, 1, NULL, 0), 0);
  fd = harness_raw_connect(d->socket);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(harness_raw_wait_closed(fd, 10000), 1);
  ck_assert_int_eq(harness_raw_wait_closed(silent->fd, 10000), 1);
  ck_assert(harness_log_wait(d, "handshake timeout", 5000));
  close(fd);
  raw_close(silent);
  raw_request(ok, 2, "ping", 0);
  ck_assert_int_eq(raw_flush(ok), 0);
  ck_assert_int_eq(raw_response(ok, 2, NULL, 0), 0);
  raw_close(ok);
  conn = connect_to(d);
  ping_ok(conn);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A request whose first bytes came and whose rest does not come within
 * --request-timeout closes its session; a session that sends whole
 * requests slowly, or none, stays. */
START_TEST(test_request_timeout)
{
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--request-timeout", "300", NULL);
  raw_t *half, *slow;
  long long end;

  ck_assert_ptr_nonnull(d);
  half = raw_open(d->socket);
  raw_hello(half);
  slow = raw_open(d->socket);
  raw_hello(slow);
  raw_request(half, 1, "ping", 1);
  proto_pack_cstr(&half->pk, "a payload that never ends");
  ck_assert_int_eq(
      harness_raw_send(half->fd, half->out.data, half->out.size - 5), 0);
  msgpack_sbuffer_clear(&half->out);
  /* Whole pings, slower than the timeout in all, each quick: fine. */
  end = harness_now_ms() + 1500;
  for (uint32_t id = 10; harness_now_ms() < end; id++) {
    raw_request(slow, id, "ping", 0);
    ck_assert_int_eq(raw_flush(slow), 0);
    ck_assert_int_eq(raw_response(slow, id, NULL, 0), 0);
    harness_sleep_ms(100);
  }
  ck_assert_int_eq(harness_raw_wait_closed(half->fd, 10000), 1);
  ck_assert(harness_log_wait(d, "request timeout", 5000));
  raw_close(half);
  raw_request(slow, 1, "ping", 0);
  ck_assert_int_eq(raw_flush(slow), 0);
  ck_assert_int_eq(raw_response(slow, 1, NULL, 0), 0);
  raw_close(slow);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A client that hangs up with 100 requests in flight, one of them a large
 * allocation still running, leaves nothing behind. */
START_TEST(test_disconnect_inflight)
{
  harness_daemon_t *d = harness_start("--devices", "cpu", NULL);
  hipd_info_t *dev = NULL;
  hipd_conn_t *keeper;
  long long deadline;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  keeper = connect_to(d);
  r = raw_open(d->socket);
  raw_hello(r);
  raw_request(r, 1, "mem.alloc", 2);
  msgpack_pack_uint64(&r->pk, 256 * MiB);
  proto_pack_cstr(&r->pk, "byte");
  raw_request(r, 2, "device.get", 0);
  for (uint32_t i = 3; i <= 100; i++) {
    raw_request(r, i, "ping", 1);
    msgpack_pack_bin_with_body(&r->pk, "x", 1);
  }
  ck_assert_int_eq(raw_flush(r), 0);
  raw_close(r);

  ping_ok(keeper);
  wait_sessions(keeper, 1);
  /* The allocation that finished for nobody is freed. */
  deadline = harness_now_ms() + 10000;
  for (;;) {
    int64_t allocated, buffers;
    ck_assert_int_eq(hipd_device_get(keeper, 0, &dev), 0);
    allocated = info_int(dev, "memory.hipd_allocated");
    buffers = info_int(dev, "memory.hipd_buffers");
    hipd_info_free(dev);
    if (allocated == 0 && buffers == 0)
      break;
    ck_assert_msg(harness_now_ms() < deadline,
                  "%lld bytes in %lld buffers still allocated",
                  (long long)allocated, (long long)buffers);
    harness_sleep_ms(10);
  }
  ping_ok(keeper);
  hipd_close(keeper);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ---------------------------------------------------------- backpressure */

/* A client that sends large pings and never reads the replies is cut off
 * at the output cap; the daemon goes on. */
START_TEST(test_output_cap)
{
  harness_daemon_t *d = harness_start("--output-cap", "1M", NULL);
  size_t payload = 256 << 10;
  char *body = calloc(1, payload);
  int sent = 0, closed;
  hipd_conn_t *keeper;
  raw_t *r;

  ck_assert_ptr_nonnull(d);
  keeper = connect_to(d);
  r = raw_open(d->socket);
  raw_hello(r);
  /* 64 MiB of replies at most; the daemon hangs up long before. */
  for (; sent < 256; sent++) {
    raw_request(r, (uint32_t)sent, "ping", 1);
    msgpack_pack_bin_with_body(&r->pk, body, payload);
    if (raw_flush(r) != 0)
      break;
  }
  closed = harness_raw_wait_closed(r->fd, 10000);
  ck_assert_msg(closed, "still connected after %d unread 256 KiB replies",
                sent);
  ck_assert_msg(harness_log_wait(d, "output cap", 5000) ||
                    harness_log_contains(d, "write stalled"),
                "the log does not say why the client was cut off");
  ping_ok(keeper);
  wait_sessions(keeper, 1);
  raw_close(r);
  hipd_close(keeper);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  free(body);
}
END_TEST

/* ------------------------------------------------- the global input bound */

/* The daemon's resident memory, in bytes (VmRSS). */
static size_t daemon_rss(const harness_daemon_t *d)
{
  long long kb = proc_status_value(d->pid, "VmRSS");

  ck_assert_msg(kb >= 0, "cannot read /proc/%d/status", (int)d->pid);
  return (size_t)kb * 1024;
}

/* One large ping sent by a thread: the request's head and its first
 * @c first bytes of payload, then, once @c go is set, the rest. */
typedef struct {
  raw_t *r;
  const uint8_t *payload;
  size_t size, first;
  int part1_done; /* the first part is written (atomic) */
  int rc;         /* 0, or -1 if a write failed */
  volatile int *go;
  pthread_t thread;
} flood_t;

static void *flood_main(void *arg)
{
  flood_t *f = arg;

  f->rc = harness_raw_send(f->r->fd, f->r->out.data, f->r->out.size);
  if (f->rc == 0)
    f->rc = harness_raw_send(f->r->fd, f->payload, f->first);
  __atomic_store_n(&f->part1_done, 1, __ATOMIC_SEQ_CST);
  while (f->rc == 0 && !__atomic_load_n(f->go, __ATOMIC_SEQ_CST))
    harness_sleep_ms(5);
  if (f->rc == 0)
    f->rc =
        harness_raw_send(f->r->fd, f->payload + f->first, f->size - f->first);
  return NULL;
}

static int floods_part1_done(const flood_t *f, int n)
{
  int done = 0;

  for (int i = 0; i < n; i++)
    done += __atomic_load_n(&f[i].part1_done, __ATOMIC_SEQ_CST);
  return done;
}

/* A well-behaved session: small pings, one of 32 KiB, daemon.info. */
static void good_session_works(raw_t *good, uint32_t id, uint64_t bound)
{
  static uint8_t body[32 << 10];

  raw_request(good, id, "ping", 0);
  ck_assert_int_eq(raw_flush(good), 0);
  ck_assert_int_eq(raw_response(good, id, NULL, 0), 0);
  fill_random(body, sizeof(body), id);
  raw_request(good, id + 1, "ping", 1);
  msgpack_pack_bin_with_body(&good->pk, body, sizeof(body));
  ck_assert_int_eq(raw_flush(good), 0);
  ck_assert_int_eq(raw_response(good, id + 1, NULL, 0), 0);
  ck_assert_int_eq(good->msg.result->type, MSGPACK_OBJECT_BIN);
  ck_assert_uint_eq(good->msg.result->via.bin.size, sizeof(body));
  ck_assert(memcmp(good->msg.result->via.bin.ptr, body, sizeof(body)) == 0);
  raw_request(good, id + 2, "daemon.info", 0);
  ck_assert_int_eq(raw_flush(good), 0);
  ck_assert_int_eq(raw_response(good, id + 2, NULL, 0), 0);
  ck_assert_int_eq(good->msg.result->type, MSGPACK_OBJECT_MAP);
  {
    const msgpack_object_map *m = &good->msg.result->via.map;
    int found = 0;
    for (uint32_t i = 0; i < m->size; i++) {
      const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
      if (k->type != MSGPACK_OBJECT_STR || k->via.str.size != 6 ||
          memcmp(k->via.str.ptr, "limits", 6) != 0)
        continue;
      ck_assert_int_eq(v->type, MSGPACK_OBJECT_MAP);
      ck_assert_uint_eq(v->via.map.size, 22);
      for (uint32_t j = 0; j < v->via.map.size; j++) {
        const msgpack_object *lk = &v->via.map.ptr[j].key;
        if (lk->via.str.size == 15 &&
            memcmp(lk->via.str.ptr, "max_input_bytes", 15) == 0) {
          ck_assert_uint_eq(v->via.map.ptr[j].val.via.u64, bound);
          found = 1;
        }
      }
    }
    ck_assert_msg(found, "daemon.info has no limits.max_input_bytes");
  }
}

#define FLOODERS 16

/* Many sessions each send a large request and stop before its end: the
 * process that serves them buffers no more than --max-input-bytes of them
 * (at most 4 of these 16 MiB requests fit in 64 MiB: the others wait for
 * room, their writes blocked), its memory stays bounded, and a
 * well-behaved session is answered meanwhile. Once the requests are
 * finished, every one of them is answered, in turn. The bound is a
 * process's: one worker serves all the sessions here. */
START_TEST(test_input_bound)
{
  const size_t size = 16 * MiB - 4096, first = 12 * MiB;
  const uint64_t bound = 64 * MiB;
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--max-input-bytes", "64M",
                    "--max-message", "16M", "--request-timeout", "0",
                    "--write-timeout", "120000", "--tenant-workers", "1", NULL);
  flood_t f[FLOODERS];
  volatile int go = 0;
  uint8_t *payload = malloc(size);
  size_t rss0, rss1;
  long long deadline;
  raw_t *good;
  int done;

  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(payload);
  fill_random(payload, size, 7);
  good = raw_open(d->socket);
  raw_hello(good);
  good_session_works(good, 10, bound);
  rss0 = daemon_rss(d);

  memset(f, 0, sizeof(f));
  for (int i = 0; i < FLOODERS; i++) {
    f[i].r = raw_open(d->socket);
    /* The 16 echoes of 16 MiB are served a few at a time under the bound:
     * a session's reply can come after the others' (slow under TSan). */
    f[i].r->wait_ms = 120000;
    raw_hello(f[i].r);
    raw_request(f[i].r, 100 + (uint32_t)i, "ping", 1);
    msgpack_pack_bin(&f[i].r->pk, (uint32_t)size);
    f[i].payload = payload;
    f[i].size = size;
    f[i].first = first;
    f[i].go = &go;
    ck_assert_int_eq(pthread_create(&f[i].thread, NULL, flood_main, &f[i]), 0);
  }
  /* 4 sessions are admitted and take their 12 MiB; the other 12 wait,
   * with at most the floor (128 KiB) buffered each. */
  deadline = harness_now_ms() + 20000;
  while ((done = floods_part1_done(f, FLOODERS)) < 4 &&
         harness_now_ms() < deadline)
    harness_sleep_ms(10);
  ck_assert_msg(done == 4, "%d sessions could send 12 MiB, expected 4", done);
  /* The others stay blocked while a good session is served. */
  good_session_works(good, 20, bound);
  harness_sleep_ms(200);
  good_session_works(good, 30, bound);
  done = floods_part1_done(f, FLOODERS);
  ck_assert_msg(done == 4, "%d sessions sent 12 MiB past a bound of 64 MiB",
                done);
  rss1 = daemon_rss(d);
  printf("test_input_bound: daemon RSS %zu KiB before the floods, %zu KiB "
         "with 16 x 12 MiB sent against a bound of 64 MiB\n",
         rss0 >> 10, rss1 >> 10);
  /* Without the bound, 16 x 12 MiB = 192 MiB would be buffered. */
  ck_assert_msg(rss1 < rss0 + bound + 32 * MiB,
                "the daemon's RSS grew from %zu to %zu bytes", rss0, rss1);

  /* The requests end: each is answered with its payload. */
  __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < FLOODERS; i++) {
    ck_assert_int_eq(raw_response(f[i].r, 100 + (uint32_t)i, NULL, 0), 0);
    ck_assert_int_eq(f[i].r->msg.result->type, MSGPACK_OBJECT_BIN);
    ck_assert_uint_eq(f[i].r->msg.result->via.bin.size, size);
    ck_assert(memcmp(f[i].r->msg.result->via.bin.ptr, payload, size) == 0);
    pthread_join(f[i].thread, NULL);
    ck_assert_int_eq(f[i].rc, 0);
    raw_close(f[i].r);
  }
  good_session_works(good, 40, bound);
  ck_assert(!harness_log_contains(d, "input bound"));
  raw_close(good);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  free(payload);
}
END_TEST

/* A request whose size grows as its headers come in (two binaries: the
 * second's size is seen only after the first) is admitted for its first
 * part. Two such sessions, each admitted for its first 7 MiB, then both
 * waiting for 7 MiB more under a bound of 16 MiB: neither could ever go
 * on, so the one holding the most is closed ("input bound") and the other
 * is served. */
START_TEST(test_input_bound_stuck)
{
  const size_t part = 7 * MiB;
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--max-input-bytes", "16M",
                    "--max-message", "16M", "--request-timeout", "0", NULL);
  flood_t f[2];
  volatile int go = 0;
  uint8_t *payload = calloc(1, 2 * part + 64);
  int closed = 0, answered = 0;
  long long deadline;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  raw_t *good;

  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(payload);
  good = raw_open(d->socket);
  raw_hello(good);
  /* After the request's head: the first binary's 7 MiB, the second's
   * head, its 7 MiB. */
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_bin(&pk, (uint32_t)part);
  memcpy(payload + part, sb.data, sb.size);
  memset(f, 0, sizeof(f));
  for (int i = 0; i < 2; i++) {
    f[i].r = raw_open(d->socket);
    raw_hello(f[i].r);
    /* [bin, bin] as ping's params: answered EPARAMS, once whole. */
    raw_request(f[i].r, 5, "ping", 2);
    msgpack_pack_bin(&f[i].r->pk, (uint32_t)part);
    f[i].payload = payload;
    f[i].size = 2 * part + sb.size;
    f[i].first = MiB; /* both are admitted for the first binary... */
    f[i].go = &go;
    ck_assert_int_eq(pthread_create(&f[i].thread, NULL, flood_main, &f[i]), 0);
  }
  msgpack_sbuffer_destroy(&sb);
  deadline = harness_now_ms() + 20000;
  while (floods_part1_done(f, 2) < 2 && harness_now_ms() < deadline)
    harness_sleep_ms(10);
  ck_assert_int_eq(floods_part1_done(f, 2), 2);
  /* ...before either sees that it needs 7 MiB more. */
  __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
  ck_assert(harness_log_wait(d, "input bound", 20000));
  for (int i = 0; i < 2; i++) {
    int code;
    const char *text;
    size_t len;

    if (!raw_next(f[i].r)) {
      closed++;
      continue;
    }
    ck_assert_int_eq(f[i].r->msg.type, PROTO_RESPONSE);
    ck_assert_uint_eq(f[i].r->msg.msgid, 5);
    ck_assert_int_eq(proto_error_decode(f[i].r->msg.error, &code, &text, &len),
                     0);
    ck_assert_int_eq(code, HIPD_EPARAMS);
    answered++;
  }
  ck_assert_int_eq(answered, 1);
  ck_assert_int_eq(closed, 1);
  for (int i = 0; i < 2; i++) {
    shutdown(f[i].r->fd, SHUT_RDWR);
    pthread_join(f[i].thread, NULL);
    raw_close(f[i].r);
  }
  good_session_works(good, 10, 16 * MiB);
  raw_close(good);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  free(payload);
}
END_TEST

/* A bound below the largest message is refused at start; without the
 * option it follows a larger --max-message. */
START_TEST(test_input_bound_option)
{
  const char *const low[] = {"--devices", "cpu", "--max-input-bytes", "1M",
                             NULL};
  harness_daemon_t *d = harness_spawn(NULL, low);
  hipd_conn_t *conn;
  hipd_info_t *info = NULL;

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_wait_exit(d, 10000), 2);
  ck_assert(harness_log_contains(d, "--max-input-bytes"));
  harness_free(d);

  d = harness_start("--devices", "cpu", "--max-message", "2G", NULL);
  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  ck_assert_int_eq(hipd_daemon_info(conn, &info), 0);
  ck_assert_int_eq(info_int(info, "limits.max_input_bytes"), (int64_t)2 << 30);
  hipd_info_free(info);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

static Suite *daemon_protocol_suite(void)
{
  Suite *s = suite_create("daemon_protocol");
  TCase *tc;

  tc = tcase_create("bad requests");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_before_hello);
  tcase_add_test(tc, test_unknown_method);
  tcase_add_test(tc, test_bad_params);
  suite_add_tcase(s, tc);

  tc = tcase_create("violations");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_protocol_violations, 0,
                      sizeof(violations) / sizeof(violations[0]));
  tcase_add_test(tc, test_unknown_notification);
  tcase_add_test(tc, test_shm_descriptors);
  tcase_add_test(tc, test_fd_claimed_by_its_request);
  tcase_add_test(tc, test_hello_timeout);
  tcase_add_test(tc, test_request_timeout);
  tcase_add_test(tc, test_disconnect_inflight);
  tcase_add_test(tc, test_output_cap);
  suite_add_tcase(s, tc);

  tc = tcase_create("input bound");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_input_bound);
  tcase_add_test(tc, test_input_bound_stuck);
  tcase_add_test(tc, test_input_bound_option);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_daemon_protocol");
  failed = test_run(daemon_protocol_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
