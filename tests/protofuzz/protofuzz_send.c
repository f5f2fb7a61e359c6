/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_send.c: the way out: the ring of requests kept for
 * the reproducer, write queues with descriptors, requests in flight, and the
 * requests too costly to send (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

/* --------------------------------------------------------------- output */

static struct {
  unsigned conn;
  uint32_t msgid;
  char what[128];
  uint8_t head[512];
  size_t len, kept;
} ring[RING];

static unsigned ring_next;

void ring_add(const conn_t *c, uint32_t msgid, const char *what,
              const uint8_t *data, size_t len)
{
  unsigned i = ring_next++ % RING;

  ring[i].conn = c->serial;
  ring[i].msgid = msgid;
  snprintf(ring[i].what, sizeof(ring[i].what), "%s", what);
  ring[i].len = len;
  ring[i].kept = len < sizeof(ring[i].head) ? len : sizeof(ring[i].head);
  memcpy(ring[i].head, data, ring[i].kept);
}

void ring_dump(void)
{
  unsigned n = ring_next < RING ? ring_next : RING;

  fprintf(stderr, "protofuzz: the last %u messages sent (oldest first):\n", n);
  for (unsigned k = ring_next - n; k < ring_next; k++) {
    unsigned i = k % RING;
    char text[600];
    msgpack_unpacked u;
    size_t off = 0;

    text[0] = '\0';
    msgpack_unpacked_init(&u);
    if (ring[i].kept == ring[i].len &&
        msgpack_unpack_next(&u, (const char *)ring[i].head, ring[i].kept,
                            &off) == MSGPACK_UNPACK_SUCCESS &&
        off == ring[i].len)
      msgpack_object_print_buffer(text, sizeof(text), u.data);
    msgpack_unpacked_destroy(&u);
    if (text[0] == '\0') {
      size_t o = 0;
      for (size_t b = 0; b < ring[i].kept && b < 96 && o + 3 < sizeof(text);
           b++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%02x",
                              ring[i].head[b]);
    }
    fprintf(stderr, "  conn %u msgid %u [%s] %zu bytes: %s%s\n", ring[i].conn,
            ring[i].msgid, ring[i].what, ring[i].len, text,
            ring[i].kept < ring[i].len ? " ..." : "");
  }
}

void wq_push(conn_t *c, const void *data, size_t len, const int *fds, int nfds)
{
  chunk_t *k = calloc(1, sizeof(*k));

  k->data = malloc(len ? len : 1);
  memcpy(k->data, data, len);
  k->len = len;
  k->nfds = nfds;
  for (int i = 0; i < nfds; i++)
    k->fds[i] = fds[i];
  if (c->wq_tail)
    c->wq_tail->next = k;
  else
    c->wq = k;
  c->wq_tail = k;
  c->wq_bytes += len;
}

void chunk_free(chunk_t *k)
{
  for (int i = 0; i < k->nfds; i++)
    close(k->fds[i]);
  free(k->data);
  free(k);
}

/* Write what can be written. @return 0, or -1 if the connection broke. */

int conn_flush(conn_t *c)
{
  while (c->wq) {
    chunk_t *k = c->wq;
    struct iovec iov = {.iov_base = k->data + k->off,
                        .iov_len = k->len - k->off};
    union {
      struct cmsghdr h;
      char space[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;

    if (k->nfds > 0 && k->off == 0) {
      memset(&ctl, 0, sizeof(ctl));
      mh.msg_control = ctl.space;
      mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k->nfds);
      struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k->nfds);
      memcpy(CMSG_DATA(cm), k->fds, sizeof(int) * (size_t)k->nfds);
    }
    n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        return 0;
      return -1;
    }
    if (k->nfds > 0 && k->off == 0) {
      for (int i = 0; i < k->nfds; i++)
        close(k->fds[i]);
      k->nfds = 0;
    }
    k->off += (size_t)n;
    c->wq_bytes -= (size_t)n;
    if (k->off == k->len) {
      c->wq = k->next;
      if (c->wq == NULL)
        c->wq_tail = NULL;
      chunk_free(k);
    }
  }
  return 0;
}

int pend_find(conn_t *c, uint32_t msgid)
{
  for (int i = 0; i < c->npend; i++)
    if (c->pend[i].msgid == msgid)
      return i;
  return -1;
}

uint32_t new_msgid(conn_t *c)
{
  uint32_t id;

  do {
    if (chance(50))
      id = chance(2) ? 0 : UINT32_MAX;
    else
      id = c->next_msgid++;
  } while (pend_find(c, id) >= 0);
  return id;
}

/* Expect a reply to @p msgid, for method @p midx (-1: a mutated name). */

static pend_t *pend_add(conn_t *c, uint32_t msgid, int midx)
{
  pend_t *p;

  if (c->npend == MAX_PEND)
    return NULL;
  p = &c->pend[c->npend++];
  memset(p, 0, sizeof(*p));
  p->msgid = msgid;
  p->midx = (int16_t)midx;
  p->create = -1;
  p->set_dev = -1;
  return p;
}

/* A request that frees an object: its handle goes from the live pool to
 * the stale one, whether or not the daemon takes the request. */

static void forget_freed(conn_t *c, const req_t *r)
{
  static const struct {
    const char *m;
    int kind;
  } frees[] = {{"mem.free", K_BUF},
               {"stream.destroy", K_STREAM},
               {"event.destroy", K_EVENT},
               {"kernel.destroy", K_KERNEL},
               {"shm.free", K_SHM}};

  if (r->midx < 0 || r->params.t != V_ARR || r->params.n == 0 ||
      r->params.kids[0].t != V_UINT)
    return;
  for (size_t i = 0; i < sizeof(frees) / sizeof(frees[0]); i++)
    if (strcmp(methods[r->midx].name, frees[i].m) == 0) {
      uint64_t h = r->params.kids[0].x.u;
      pool_remove(&c->live[frees[i].kind], h);
      pool_add(&c->stale[frees[i].kind], (obj_t){.h = h});
    }
}

/* Pack and queue request @p r. */

void send_request(conn_t *c, req_t *r, int is_notify)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint32_t msgid = 0;
  char what[128];

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  if (is_notify) {
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint8(&pk, 2);
  } else {
    msgid = new_msgid(c);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, 0);
    msgpack_pack_uint32(&pk, msgid);
  }
  if (r->method_bin) {
    msgpack_pack_bin(&pk, r->method_len);
    msgpack_pack_bin_body(&pk, r->method, r->method_len);
  } else {
    msgpack_pack_str(&pk, r->method_len);
    msgpack_pack_str_body(&pk, r->method, r->method_len);
  }
  pack_val(&pk, &r->params);
  snprintf(what, sizeof(what), "%s%s%s%s", is_notify ? "notification " : "",
           r->mut[0] ? r->mut : "valid", r->nfds ? ", with fds" : "", "");
  ring_add(c, msgid, what, (const uint8_t *)sb.data, sb.size);
  if (!is_notify) {
    int same = r->midx >= 0 && r->method_len == strlen(methods[r->midx].name) &&
               memcmp(r->method, methods[r->midx].name, r->method_len) == 0;
    pend_t *p = pend_add(c, msgid, same ? r->midx : -1);
    if (p != NULL) {
      p->create = (int8_t)(r->mut[0] ? -1 : r->create);
      p->create_dev = (int8_t)r->create_dev;
      p->create_size = r->create_size;
      p->set_dev = r->set_dev;
      p->valid = r->mut[0] == '\0';
      if (r->midx >= 0 && is_compile(r->midx)) {
        p->compile = 1;
        compiles++;
      }
    }
  }
  st.requests++;
  if (is_notify)
    st.notifications++;
  else if (r->mut[0])
    st.mutated++;
  else
    st.valid++;
  for (int i = 0; i < r->nfds; i++)
    st.fds_by_kind[r->fd_kinds[i]]++;
  st.fds_sent += (uint64_t)r->nfds;
  forget_freed(c, r);
  if (r->midx >= 0 && r->midx < 256)
    st.m_sent[r->midx]++;
  wq_push(c, sb.data, sb.size, r->fds, r->nfds);
  r->nfds = 0;
  c->sent++;
  msgpack_sbuffer_destroy(&sb);
}

/* Build a request for method @p midx from its template. */

void build(conn_t *c, req_t *r, int midx)
{
  memset(r, 0, sizeof(*r));
  r->midx = midx;
  r->method = methods[midx].name;
  r->method_len = (uint32_t)strlen(r->method);
  r->create = -1;
  r->set_dev = -1;
  r->create_dev = c->current;
  tmpl_of[midx]->fn(c, r);
}

/* The threads a launch's geometry asks for, or 0 when it is not one. */

static uint64_t dims_product(const val_t *v)
{
  if (v->t == V_UINT)
    return v->x.u;
  if (v->t != V_ARR || v->n == 0 || v->n > 3)
    return 0;
  uint64_t p = 1;
  for (uint32_t i = 0; i < v->n; i++) {
    if (v->kids[i].t != V_UINT || v->kids[i].x.u == 0)
      return 0;
    p *= v->kids[i].x.u;
    if (p > (1ull << 40))
      return 1ull << 40;
  }
  return p;
}

/* A launch that would keep the one CPU kernel runner busy for long (all
 * sessions share it): most are not sent. */

int too_costly(const req_t *r)
{
  const char *m = methods[r->midx].name;
  int gi, bi;

  if (strcmp(m, "kernel.launch") == 0)
    gi = 1, bi = 2;
  else if (strcmp(m, "run_source") == 0)
    gi = 4, bi = 3;
  else
    return 0;
  if (r->params.t != V_ARR || r->params.n <= (uint32_t)(gi > bi ? gi : bi))
    return 0;
  uint64_t g = dims_product(&r->params.kids[gi]);
  uint64_t b = dims_product(&r->params.kids[bi]);
  return g * b > (1u << 16) && b <= 1024 && !chance(40);
}
