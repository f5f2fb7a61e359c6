/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_conn.c: connections: open, set up, generate, closed
 * by the daemon or by us; and the checks of every reply read back
 * (tests/protofuzz/protofuzz.h).
 */
#include "config.h"

#include "protofuzz.h"

/* ----------------------------------------------------------- connection */

void conn_free(conn_t *c)
{
  for (int i = 0; i < c->npend; i++)
    compiles -= c->pend[i].compile;
  while (c->wq) {
    chunk_t *k = c->wq;
    c->wq = k->next;
    chunk_free(k);
  }
  if (c->fd >= 0)
    close(c->fd);
  free(c->rbuf);
  free(c);
}

conn_t *conn_open(void)
{
  conn_t *c = calloc(1, sizeof(*c));

  c->fd = harness_raw_connect(daemon_->socket);
  if (c->fd < 0) {
    fail("cannot connect to the daemon: %s", strerror(errno));
    free(c);
    return NULL;
  }
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  c->serial = ++conn_serial;
  c->no_hello = chance(8);
  c->next_msgid = (uint32_t)rnd64();
  c->setup = c->no_hello ? 0 : 1;
  if (c->no_hello && chance(3)) {
    /* Says nothing: the daemon must close it (--hello-timeout). */
    c->doomed = 1;
    c->doomed_at = harness_now_ms();
    c->doom_what = "nothing (no hello)";
    st.silent++;
  }
  c->end_at = harness_now_ms() + 200 + rnd(chance(4) ? 20000 : 4000);
  st.conns++;
  return c;
}

/* The daemon closed @p c (EOF or error on read). */

void conn_closed_by_daemon(conn_t *c)
{
  st.closed_by_daemon++;
  if (!c->doomed && !c->maybe) {
    st.closed_unexpected++;
    if (opt.verbose)
      fprintf(stderr,
              "protofuzz: conn %u closed by the daemon, no violation "
              "sent\n",
              c->serial);
  }
}

/* Close @p c ourselves, in one of four ways. */

void conn_close_ours(conn_t *c)
{
  int how = (int)rnd(4);

  switch (how) {
  case 0: /* plain close, maybe with requests in flight */
    break;
  case 1: { /* reset: SO_LINGER 0 */
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    break;
  }
  case 2: { /* mid-request: half a request, then close */
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_head(&pk, 1, "mem.write");
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint64(&pk, rnd64());
    msgpack_pack_uint8(&pk, 0);
    msgpack_pack_bin(&pk, 4096);
    msgpack_pack_bin_body(&pk, bigbuf, 4096);
    size_t cut = 1 + rnd((uint32_t)sb.size - 1);
    ring_add(c, 1, "truncated, then closed", (const uint8_t *)sb.data, cut);
    (void)!send(c->fd, sb.data, cut, MSG_NOSIGNAL | MSG_DONTWAIT);
    msgpack_sbuffer_destroy(&sb);
    st.truncated++;
    break;
  }
  case 3: /* shut down writing only; the reads go on until closed */
    shutdown(c->fd, SHUT_WR);
    harness_raw_wait_closed(c->fd, 200);
    break;
  }
  st.closed_by_us[how]++;
}

/* Queue the requests a new connection makes first: hello, objects of every
 * kind on both devices, a kernel, a shared buffer. */

static void conn_setup(conn_t *c)
{
  static const char *const seq[] = {
      "hello",         "mem.alloc",    "mem.alloc",    "stream.create",
      "stream.create", "event.create", "event.create", "kernel.compile_cached",
      "shm.create",    "mem.alloc"};
  req_t r;

  for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
    int midx = method_index(seq[i]);
    if (midx < 0)
      continue; /* the coverage check reports it */
    arena_used = 0;
    build(c, &r, midx);
    if (strcmp(seq[i], "hello") == 0) {
      val_t *p = P(&r, 2);
      p[0] = v_uint(1);
      p[1] = v_str("protofuzz");
    } else if (strcmp(seq[i], "kernel.compile_cached") == 0) {
      val_t *p = P(&r, 4);
      p[0] = v_str(FZ_SRC);
      p[1] = v_str("fz");
      p[2] = v_nil();
      p[3] = v_uint(i % NDEV);
      r.create_dev = (int)(i % NDEV);
      r.create_size = KSRC_FZ;
    } else if (strcmp(seq[i], "mem.alloc") == 0 ||
               strcmp(seq[i], "stream.create") == 0 ||
               strcmp(seq[i], "event.create") == 0) {
      int dev = (int)(i % NDEV);
      if (strcmp(seq[i], "mem.alloc") == 0) {
        val_t *p = P(&r, 3);
        p[0] = v_uint(4096);
        p[1] = v_str("byte");
        p[2] = v_uint((uint64_t)dev);
        r.create_size = 4096;
      } else {
        P(&r, 1)[0] = v_uint((uint64_t)dev);
      }
      r.create_dev = dev;
    }
    send_request(c, &r, 0);
  }
}

/* Generate the next message(s) for @p c. */

void conn_generate(conn_t *c)
{
  req_t r;
  int midx;

  if (c->setup) {
    c->setup = 0;
    c->setup_at = harness_now_ms();
    conn_setup(c);
    return;
  }
  /* The objects first: the requests that use them come after. */
  if (c->setup_at && c->npend > 0 && harness_now_ms() - c->setup_at < 10000)
    return;
  c->setup_at = 0;
  if (c->no_hello && c->sent > 20 + rnd(20)) {
    c->no_hello = 0;
    c->setup = 1;
    return;
  }
  switch (rnd(8000)) {
  case 0:
    send_violation(c);
    return;
  case 1:
    send_garbage(c);
    return;
  default:
    break;
  }
  arena_used = 0;
  do {
    do
      midx = pick_method();
    while (compiles >= MAX_COMPILES && is_compile(midx));
    build(c, &r, midx);
  } while (too_costly(&r) && (arena_used = 0, 1));
  /* Descriptors with any request, now and then. */
  if (r.nfds == 0 && chance(100)) {
    int n = 1 + (int)rnd(2);
    for (int i = 0; i < n; i++) {
      int k = (int)rnd(FD_NKINDS);
      int fd = fd_make(k, 65536);
      if (fd >= 0) {
        r.fds[r.nfds] = fd;
        r.fd_kinds[r.nfds++] = k;
      }
    }
  }
  if (!r.no_mutate && rnd(100) < 55) {
    mutate_request(c, &r);
    if (too_costly(&r)) {
      for (int i = 0; i < r.nfds; i++)
        close(r.fds[i]);
      return;
    }
  }
  send_request(c, &r, chance(60));
}

/* --------------------------------------------------------------- replies */

static int code_known(int64_t code)
{
  return code <= -1 && code > HIPD_ERRNO_MAX_ && code != HIPD_EDISCONNECTED &&
         code != HIPD_ECONNECT;
}

static void record_handle(conn_t *c, const pend_t *p, const msgpack_object *res)
{
  const msgpack_object *h = res;

  if (p->create < 0)
    return;
  if (res->type == MSGPACK_OBJECT_MAP)
    h = proto_map_get(res, p->create == K_SHM ? "handle" : "kernel");
  if (h == NULL || h->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return;
  obj_t o = {.h = h->via.u64, .size = p->create_size, .dev = p->create_dev};
  if (p->create == K_BUF && o.size == 0)
    return;
  pool_add(&c->live[p->create], o);
  if (opt.verbose > 1)
    fprintf(stderr, "conn %u: new %d handle 0x%llx\n", c->serial, p->create,
            (unsigned long long)o.h);
  foreign[nforeign < 64 ? nforeign++ : rnd(64)] = o.h;
}

/* Check one reply frame from @p c. */

static void check_reply(conn_t *c, const uint8_t *buf, size_t len)
{
  msgpack_zone zone;
  proto_msg_t msg;
  const char *reason = NULL;
  int i;

  msgpack_zone_init(&zone, 4096);
  if (proto_msg_decode(buf, len, &zone, &msg, &reason) != 0) {
    fail("conn %u: the daemon sent a malformed message: %s", c->serial, reason);
    goto out;
  }
  if (msg.type == PROTO_NOTIFY) {
    /* The one notification the daemon sends a session it serves: why it
     * closes it (a fuzzed session.kill of this connection, a shutdown). */
    const char *why;
    size_t wlen;
    int code;
    if (proto_closed_decode(&msg, &code, &why, &wlen) != 1 ||
        (code != HIPD_ECANCELED && code != HIPD_ESHUTDOWN &&
         code != HIPD_EPERM))
      fail("conn %u: the daemon sent a notification other than a "
           "well-formed session.closed",
           c->serial);
    goto out;
  }
  if (msg.type != PROTO_RESPONSE) {
    fail("conn %u: the daemon sent a message of type %d (only responses and "
         "session.closed are defined)",
         c->serial, msg.type);
    goto out;
  }
  i = pend_find(c, msg.msgid);
  if (i < 0) {
    fail("conn %u: a reply with msgid %u, which is not in flight on this "
         "connection",
         c->serial, msg.msgid);
    goto out;
  }
  pend_t p = c->pend[i];
  c->pend[i] = c->pend[--c->npend];
  compiles -= p.compile;
  st.replies++;
  if (p.midx >= 0 && p.midx < 256)
    st.m_ok[p.midx] += msg.error->type == MSGPACK_OBJECT_NIL;
  const char *mname = p.midx >= 0 ? methods[p.midx].name : "(mutated name)";
  if (msg.error->type == MSGPACK_OBJECT_NIL) {
    st.ok++;
    if (p.midx >= 0 && strcmp(mname, "hello") == 0) {
      const msgpack_object *sid = proto_map_get(msg.result, "session");
      c->hello = 1;
      if (sid != NULL && sid->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        c->sid = sid->via.u64;
    }
    if (p.set_dev >= 0)
      c->current = p.set_dev;
    record_handle(c, &p, msg.result);
    goto out;
  }
  const msgpack_object *e = msg.error;
  if (e->type != MSGPACK_OBJECT_MAP || e->via.map.size != 3) {
    fail("conn %u msgid %u (%s): the error is not a map of 3 keys", c->serial,
         msg.msgid, mname);
    goto out;
  }
  const msgpack_object *code = proto_map_get(e, "code");
  const msgpack_object *name = proto_map_get(e, "name");
  const msgpack_object *text = proto_map_get(e, "message");
  if (code == NULL || code->type != MSGPACK_OBJECT_NEGATIVE_INTEGER ||
      name == NULL || name->type != MSGPACK_OBJECT_STR || text == NULL ||
      text->type != MSGPACK_OBJECT_STR) {
    fail("conn %u msgid %u (%s): the error is not {code: negative int, name: "
         "str, message: str}",
         c->serial, msg.msgid, mname);
    goto out;
  }
  int64_t cv = code->via.i64;
  if (!code_known(cv)) {
    fail("conn %u msgid %u (%s): unknown or client-only error code %" PRId64,
         c->serial, msg.msgid, mname, cv);
    goto out;
  }
  st.by_code[-cv]++;
  if (p.valid && cv == HIPD_EPARAMS) {
    st.valid_eparams++;
    if (opt.verbose)
      fprintf(stderr, "protofuzz: valid %s got EPARAMS: %.*s\n", mname,
              (int)text->via.str.size, text->via.str.ptr);
  }
  const char *want = hipd_err_name((int)cv);
  if (name->via.str.size != strlen(want) ||
      memcmp(name->via.str.ptr, want, name->via.str.size) != 0) {
    fail("conn %u msgid %u (%s): error %" PRId64 " named '%.*s', not '%s'",
         c->serial, msg.msgid, mname, cv, (int)name->via.str.size,
         name->via.str.ptr, want);
    goto out;
  }
  if (text->via.str.size == 0 || text->via.str.size > 16383) {
    fail("conn %u msgid %u (%s): %s with a message of %u bytes", c->serial,
         msg.msgid, mname, want, text->via.str.size);
    goto out;
  }
  if (p.midx >= 0 && cv != HIPD_ENOMETHOD && cv != HIPD_ESHUTDOWN) {
    size_t ml = strlen(mname);
    if (text->via.str.size < ml + 2 || memcmp(text->via.str.ptr, mname, ml) ||
        memcmp(text->via.str.ptr + ml, ": ", 2)) {
      fail("conn %u msgid %u (%s): the message of %s does not begin with "
           "'%s: ': '%.*s'",
           c->serial, msg.msgid, mname, want, mname,
           (int)(text->via.str.size > 200 ? 200 : text->via.str.size),
           text->via.str.ptr);
      goto out;
    }
  }
  if (msg.result->type != MSGPACK_OBJECT_NIL) {
    fail("conn %u msgid %u (%s): an error and a result", c->serial, msg.msgid,
         mname);
    goto out;
  }
  if (cv == HIPD_EINTERNAL) {
    fail("conn %u msgid %u (%s): EINTERNAL: %.*s", c->serial, msg.msgid, mname,
         (int)text->via.str.size, text->via.str.ptr);
    goto out;
  }
  if (opt.verbose > 1)
    fprintf(stderr, "conn %u %s -> %s %.*s\n", c->serial, mname, want,
            (int)(text->via.str.size > 160 ? 160 : text->via.str.size),
            text->via.str.ptr);
out:
  msgpack_zone_destroy(&zone);
}

/* Read what @p c has. @return 0, or -1 once the daemon closed it. */

int conn_read(conn_t *c)
{
  proto_limits_t lim;

  proto_limits_default(&lim);
  for (;;) {
    if (c->rcap - c->rlen < 65536) {
      size_t ncap = c->rcap ? c->rcap * 2 : 262144;
      c->rbuf = realloc(c->rbuf, ncap);
      c->rcap = ncap;
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
    if (n == 0)
      return -1;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        break;
      return -1;
    }
    c->rlen += (size_t)n;
    if ((size_t)n < 65536)
      break;
  }
  size_t off = 0;
  while (off < c->rlen && !failed) {
    size_t need = 0;
    const char *reason = NULL;
    long long n =
        proto_frame_scan(&lim, c->rbuf + off, c->rlen - off, &need, &reason);
    if (n < 0) {
      fail("conn %u: the daemon sent bytes that do not frame: %s", c->serial,
           reason);
      break;
    }
    if (n == 0)
      break;
    check_reply(c, c->rbuf + off, (size_t)n);
    off += (size_t)n;
  }
  memmove(c->rbuf, c->rbuf + off, c->rlen - off);
  c->rlen -= off;
  return 0;
}
