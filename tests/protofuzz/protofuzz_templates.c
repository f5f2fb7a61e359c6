/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_templates.c: the request templates: for every
 * method of the daemon's table, a valid request built from the live handles of
 * a connection, and the weighted pick of the next method
 * (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"
#include "ring_layout.h"

/* ------------------------------------------------------------ requests */

val_t *P(req_t *r, uint32_t n)
{
  r->params = v_arr(n);
  return r->params.kids;
}

obj_t *pick(conn_t *c, int kind)
{
  return pool_pick(&c->live[kind]);
}

/* A handle value for @p o, or a forged one when there is none. */

static val_t v_h(const obj_t *o)
{
  return v_uint(o ? o->h : rnd64());
}

/* A device param: an id, mostly valid, or nil. */

static val_t v_dev(conn_t *c, req_t *r)
{
  int d = (int)rnd(NDEV);

  if (chance(4)) {
    r->create_dev = c->current;
    return v_nil();
  }
  r->create_dev = d;
  return v_uint((uint64_t)d);
}

/* Pick a buffer, preferably of device @p dev (-1: any). */

static obj_t *pick_buf(conn_t *c, int dev)
{
  pool_t *p = &c->live[K_BUF];

  if (dev >= 0)
    for (int tries = 0; tries < 4 && p->n; tries++) {
      obj_t *o = pool_pick(p);
      if (o->dev == dev)
        return o;
    }
  return pool_pick(p);
}

static obj_t *pick_stream(conn_t *c, int dev)
{
  pool_t *p = &c->live[K_STREAM];

  for (int tries = 0; tries < 4 && p->n; tries++) {
    obj_t *o = pool_pick(p);
    if (dev < 0 || o->dev == dev)
      return o;
  }
  return pool_pick(p);
}

/* An offset and a length inside @p size bytes, bounded by @p max. */

static void range_in(uint64_t size, uint64_t max, uint64_t *off, uint64_t *len)
{
  *off = size ? rnd((uint32_t)size) : 0;
  *len = rnd((uint32_t)(size - *off + 1));
  if (*len > max)
    *len = max;
}

const char *FZ_SRC =
    "extern \"C\" __global__ void fz(unsigned char *p, int v, long long w,\n"
    "                                float f, double d)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    p[0] = (unsigned char)(v + w + (long long)f + (long long)d);\n"
    "}\n"
    "extern \"C\" __global__ void fzcrash(int *p)\n"
    "{\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    *(volatile int *)(p - p) = 1;\n"
    "}\n";

uint8_t *ir_doc; /* the IR fixture's msgpack bytes */

size_t ir_len;

/* [x, y, z] small dimensions, or a bare x. */

static val_t v_dims(uint32_t max)
{
  if (chance(3))
    return v_uint(1 + rnd(max));
  uint32_t n = 1 + rnd(3);
  val_t a = v_arr(n);
  for (uint32_t i = 0; i < n; i++)
    a.kids[i] = v_uint(1 + (i == 0 ? rnd(max) : rnd(2)));
  return a;
}

/* fz's arguments: [buf p], [i32 v], [i64 w], [f32 f], [f64 d]. */

static val_t v_fz_args(conn_t *c, int dev)
{
  val_t a = v_arr(5), e;
  obj_t *b = pick_buf(c, dev);

  if (b != NULL && chance(3) == 0 && b->size) {
    e = v_arr(3);
    e.kids[0] = v_str("buf");
    e.kids[1] = v_h(b);
    e.kids[2] = v_uint(rnd((uint32_t)b->size));
  } else {
    e = v_arr(2);
    e.kids[0] = v_str("buf");
    e.kids[1] = v_h(b);
  }
  a.kids[0] = e;
  const char *kinds[4] = {"i32", "i64", "f32", "f64"};
  for (int i = 0; i < 4; i++) {
    e = v_arr(2);
    e.kids[0] = v_str(kinds[i]);
    e.kids[1] = i < 2 ? v_int((int64_t)rnd(1000) - 500)
                      : (i == 2 ? v_f32(1.5) : v_f64(-2.25));
    a.kids[i + 1] = e;
  }
  return a;
}

/* vec_add's arguments for buffers of at least 4 * n bytes. */

static val_t v_ir_args(conn_t *c, int dev, uint32_t *n_out)
{
  val_t a = v_arr(7), e;
  obj_t *b[3];
  uint64_t minsize = UINT64_MAX;

  for (int i = 0; i < 3; i++) {
    b[i] = pick_buf(c, dev);
    if (b[i] == NULL || b[i]->dev != dev) {
      *n_out = 0;
      return v_nil();
    }
    if (b[i]->size < minsize)
      minsize = b[i]->size;
  }
  uint32_t n = (uint32_t)(minsize / 4);
  if (n > 4096)
    n = 4096;
  for (int i = 0; i < 3; i++) {
    e = v_arr(2);
    e.kids[0] = v_str("buf");
    e.kids[1] = v_h(b[i]);
    a.kids[2 * i] = e;
    e = v_arr(2);
    e.kids[0] = v_str("i32");
    e.kids[1] = v_uint(n);
    a.kids[2 * i + 1] = e;
  }
  e = v_arr(2);
  e.kids[0] = v_str("i32");
  e.kids[1] = v_uint(n);
  a.kids[6] = e;
  *n_out = n;
  return a;
}

/* ---- the templates, one per method ---- */

static void t_none(conn_t *c, req_t *r)
{
  (void)c;
  P(r, 0);
}

static void t_dev_opt(conn_t *c, req_t *r)
{
  if (chance(3))
    P(r, 0);
  else
    P(r, 1)[0] = v_dev(c, r);
}

static void t_set_current(conn_t *c, req_t *r)
{
  int d = (int)rnd(NDEV);
  P(r, 1)[0] = v_uint((uint64_t)d);
  r->set_dev = d;
}

static void t_create_stream(conn_t *c, req_t *r)
{
  t_dev_opt(c, r);
  if (r->params.n == 0)
    r->create_dev = c->current;
  r->create = K_STREAM;
}

static void t_create_event(conn_t *c, req_t *r)
{
  t_create_stream(c, r);
  r->create = K_EVENT;
}

static void t_one(conn_t *c, req_t *r, int kind)
{
  P(r, 1)[0] = v_h(pick(c, kind));
}

static void t_event(conn_t *c, req_t *r)
{
  t_one(c, r, K_EVENT);
}

static void t_stream(conn_t *c, req_t *r)
{
  t_one(c, r, K_STREAM);
}

static void t_kernel(conn_t *c, req_t *r)
{
  t_one(c, r, K_KERNEL);
}

static void t_buffer(conn_t *c, req_t *r)
{
  t_one(c, r, K_BUF);
}

static void t_event_elapsed(conn_t *c, req_t *r)
{
  val_t *p = P(r, 2);
  p[0] = v_h(pick(c, K_EVENT));
  p[1] = v_h(pick(c, K_EVENT));
}

static void t_event_record(conn_t *c, req_t *r)
{
  obj_t *e = pick(c, K_EVENT);
  if (chance(3)) {
    P(r, 1)[0] = v_h(e);
    return;
  }
  val_t *p = P(r, 2);
  p[0] = v_h(e);
  p[1] = chance(4) ? v_nil() : v_h(pick_stream(c, e ? e->dev : -1));
}

static void t_execute_direct(conn_t *c, req_t *r)
{
  (void)c;
  uint32_t n = rnd(4);
  val_t *p = P(r, n);
  for (uint32_t i = 0; i < n; i++)
    p[i] = v_uint(i);
}

static void t_hello(conn_t *c, req_t *r)
{
  (void)c;
  uint32_t n = rnd(3);
  val_t *p = P(r, n);
  if (n > 0)
    p[0] = chance(3) ? v_nil() : v_uint(1 + rnd(3));
  if (n > 1)
    p[1] = chance(4) ? v_str("") : v_str("protofuzz");
}

static void t_ping(conn_t *c, req_t *r)
{
  (void)c;
  if (chance(4)) {
    P(r, 0);
    return;
  }
  uint32_t len = chance(20) ? rnd(BIG_LEN) : rnd(256);
  P(r, 1)[0] = chance(2) ? v_bin(bigbuf, len) : v_strn(bigbuf, len);
}

static val_t v_target(conn_t *c, req_t *r)
{
  switch (rnd(4)) {
  case 0:
    return v_nil();
  case 1:
    return v_str("host-x86_64");
  default:
    return v_dev(c, r);
  }
}

static void t_intr_find(conn_t *c, req_t *r)
{
  static const char *const names[] = {"sin", "Float32.sqrt", "global_thread_id",
                                      "Fz.f1", "nosuch"};
  if (chance(2)) {
    P(r, 1)[0] = v_str(names[rnd(5)]);
    return;
  }
  val_t *p = P(r, 2);
  p[0] = v_str(names[rnd(5)]);
  p[1] = v_target(c, r);
}

static void t_intr_list(conn_t *c, req_t *r)
{
  if (chance(2))
    P(r, 0);
  else
    P(r, 1)[0] = v_target(c, r);
}

static void t_intr_register(conn_t *c, req_t *r)
{
  (void)c;
  char *name = aalloc(32);
  snprintf(name, 32, "Fz.f%u", rnd(8));
  uint32_t n = 3 + rnd(2);
  val_t *p = P(r, n);
  p[0] = v_str(name);
  int ph = chance(2);
  p[1] = v_str(ph ? "(%s + 1)" : "warpSize");
  p[2] = v_str(chance(2) ? "uniform" : "divergent");
  if (n == 4)
    p[3] = chance(3) ? v_nil() : v_uint(ph ? 1 : rnd(2));
}

static void t_compile(conn_t *c, req_t *r)
{
  uint32_t n = 2 + rnd(3);
  val_t *p = P(r, n);
  int crash = chance(6);

  p[0] = chance(2) ? v_str(FZ_SRC) : v_bin(FZ_SRC, strlen(FZ_SRC));
  p[1] = v_str(crash ? "fzcrash" : "fz");
  r->create_size = crash ? KSRC_CRASH : KSRC_FZ;
  r->create_dev = c->current;
  if (n > 2) {
    if (chance(2)) {
      p[2] = v_nil();
    } else {
      p[2] = v_arr(1);
      p[2].kids[0] = v_str(chance(2) ? "-O1" : "-DFZ=1");
    }
  }
  if (n > 3)
    p[3] = v_target(c, r);
  r->create = K_KERNEL;
}

static void t_compile_ir(conn_t *c, req_t *r)
{
  uint32_t n = 1 + rnd(5);
  val_t *p = P(r, n);

  p[0] = v_bin(ir_doc, ir_len);
  r->create_dev = c->current;
  r->create_size = KSRC_IR;
  for (uint32_t i = 1; i < n; i++)
    p[i] = v_nil();
  if (n > 1 && chance(2))
    p[1] = v_uint(64);
  if (n > 4)
    p[4] = v_target(c, r);
  r->create = K_KERNEL;
}

static void t_generate_source(conn_t *c, req_t *r)
{
  uint32_t n = 1 + rnd(4);
  val_t *p = P(r, n);

  p[0] = v_bin(ir_doc, ir_len);
  for (uint32_t i = 1; i < n; i++)
    p[i] = v_nil();
  if (n > 1 && chance(2))
    p[1] = v_dims(32);
  if (n > 3)
    p[3] = v_target(c, r);
}

static void t_launch(conn_t *c, req_t *r)
{
  obj_t *k = pick(c, K_KERNEL);
  int dev = k ? k->dev : 0;
  uint32_t n = 6 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_h(k);
  p[1] = v_dims(8);
  p[2] = v_dims(32);
  p[3] = chance(2) ? v_nil() : v_uint(rnd(1024));
  p[4] = chance(3) ? v_nil() : v_h(pick_stream(c, dev));
  if (n > 6)
    p[6] = v_bool((int)rnd(2));
  if (k != NULL && k->size == KSRC_IR) {
    uint32_t elems = 0;
    p[5] = v_ir_args(c, dev, &elems);
    r->no_mutate = 1; /* a wrong length would write out of bounds */
    if (elems == 0)
      p[0] = v_uint(0);
  } else if (k != NULL && k->size == KSRC_CRASH) {
    p[5] = v_arr(1);
    p[5].kids[0] = v_arr(2);
    p[5].kids[0].kids[0] = v_str("buf");
    p[5].kids[0].kids[1] = v_h(pick_buf(c, dev));
  } else {
    p[5] = v_fz_args(c, dev);
  }
}

static void t_run_source(conn_t *c, req_t *r)
{
  val_t *p = P(r, 7);

  p[0] = v_str(FZ_SRC);
  p[1] = v_str("hip");
  p[2] = v_str("fz");
  p[3] = v_dims(32);
  p[4] = v_dims(8);
  p[5] = chance(2) ? v_nil() : v_uint(0);
  p[6] = v_fz_args(c, c->current);
}

static void t_mem_alloc(conn_t *c, req_t *r)
{
  static const char *const kinds[] = {
      "int8",  "uint8",  "byte",    "int16", "uint16", "float16",
      "int32", "uint32", "float32", "int64", "uint64", "float64"};
  static const int sizes[] = {1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8};
  int k = (int)rnd(12);
  uint64_t count = 1 + rnd(chance(8) ? 65536 : 1024);
  uint32_t n = 2 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_uint(count);
  p[1] = v_str(kinds[k]);
  r->create_dev = c->current;
  if (n > 2)
    p[2] = v_dev(c, r);
  r->create = K_BUF;
  r->create_size = count * (uint64_t)sizes[k];
}

static void t_mem_alloc_custom(conn_t *c, req_t *r)
{
  uint64_t count = 1 + rnd(256), es = 1 + rnd(64);
  uint32_t n = 2 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_uint(count);
  p[1] = v_uint(es);
  r->create_dev = c->current;
  if (n > 2)
    p[2] = v_dev(c, r);
  r->create = K_BUF;
  r->create_size = count * es;
}

static void t_mem_alloc_zero_copy(conn_t *c, req_t *r)
{
  obj_t *s = pick(c, K_SHM);
  uint32_t n = 1 + rnd(2);
  val_t *p = P(r, n);

  p[0] = v_h(s);
  r->create_dev = c->current;
  if (n > 1)
    p[1] = v_dev(c, r);
  r->create = K_BUF;
  r->create_size = s ? s->size : 0;
}

static void t_mem_copy_common(conn_t *c, req_t *r, int async)
{
  obj_t *d = pick_buf(c, -1);
  obj_t *s = pick_buf(c, d ? d->dev : -1);
  uint64_t doff = 0, soff = 0, len = 0, l2 = 0;
  val_t *p = P(r, async ? 6 : 5);

  if (d)
    range_in(d->size, 65536, &doff, &len);
  if (s)
    range_in(s->size, 65536, &soff, &l2);
  if (l2 < len)
    len = l2;
  p[0] = v_h(d);
  p[1] = v_uint(doff);
  p[2] = v_h(s);
  p[3] = v_uint(soff);
  p[4] = v_uint(len);
  if (async)
    p[5] = v_h(pick_stream(c, d ? d->dev : -1));
}

static void t_mem_copy(conn_t *c, req_t *r)
{
  t_mem_copy_common(c, r, 0);
}

static void t_mem_copy_async(conn_t *c, req_t *r)
{
  t_mem_copy_common(c, r, 1);
}

/* Free an object of @p kind, but keep the last one: others need it. With
 * one or none, a stale handle (or a forged one). */

static void t_destroy(conn_t *c, req_t *r, int kind)
{
  pool_t *st_ = &c->stale[kind];

  if (c->live[kind].n >= 2)
    P(r, 1)[0] = v_h(pick(c, kind));
  else
    P(r, 1)[0] = v_uint(st_->n ? st_->o[rnd((uint32_t)st_->n)].h : rnd64());
}

static void t_mem_free(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_BUF);
}

static void t_event_destroy(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_EVENT);
}

static void t_stream_destroy(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_STREAM);
}

static void t_kernel_destroy(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_KERNEL);
}

static void t_shm_free(conn_t *c, req_t *r)
{
  t_destroy(c, r, K_SHM);
}

static void t_memset_common(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1);
  uint64_t off = 0, len = 0;
  val_t *p = P(r, async ? 5 : 4);

  if (b)
    range_in(b->size, UINT32_MAX, &off, &len);
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = v_uint(len);
  p[3] = v_uint(rnd(256));
  if (async)
    p[4] = v_h(pick_stream(c, b ? b->dev : -1));
}

static void t_memset(conn_t *c, req_t *r)
{
  t_memset_common(c, r, 0);
}

static void t_memset_async(conn_t *c, req_t *r)
{
  t_memset_common(c, r, 1);
}

static void t_read_common(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1);
  uint64_t off = 0, len = 0;
  val_t *p = P(r, async ? 4 : 3);

  if (b)
    range_in(b->size, 1 << 20, &off, &len);
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = v_uint(len);
  if (async)
    p[3] = v_h(pick_stream(c, b ? b->dev : -1));
}

static void t_read(conn_t *c, req_t *r)
{
  t_read_common(c, r, 0);
}

static void t_read_async(conn_t *c, req_t *r)
{
  t_read_common(c, r, 1);
}

static void t_write_common(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1);
  uint64_t off = 0, len = 0;
  val_t *p = P(r, async ? 4 : 3);

  if (b)
    range_in(b->size, 65536, &off, &len);
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = chance(3) ? v_strn(bigbuf, len) : v_bin(bigbuf, len);
  if (async)
    p[3] = v_h(pick_stream(c, b ? b->dev : -1));
}

static void t_write(conn_t *c, req_t *r)
{
  t_write_common(c, r, 0);
}

static void t_write_async(conn_t *c, req_t *r)
{
  t_write_common(c, r, 1);
}

static void t_shm_xfer(conn_t *c, req_t *r, int async)
{
  obj_t *b = pick_buf(c, -1), *s = pick(c, K_SHM);
  uint64_t off = 0, soff = 0, len = 0, l2 = 0;
  val_t *p = P(r, async ? 6 : 5);

  if (b)
    range_in(b->size, 1 << 20, &off, &len);
  if (s)
    range_in(s->size, 1 << 20, &soff, &l2);
  if (l2 < len)
    len = l2;
  p[0] = v_h(b);
  p[1] = v_uint(off);
  p[2] = v_h(s);
  p[3] = v_uint(soff);
  p[4] = v_uint(len);
  if (async)
    p[5] = v_h(pick_stream(c, b ? b->dev : -1));
}

static void t_shm_sync(conn_t *c, req_t *r)
{
  t_shm_xfer(c, r, 0);
}

static void t_shm_async(conn_t *c, req_t *r)
{
  t_shm_xfer(c, r, 1);
}

static void t_session_profile(conn_t *c, req_t *r)
{
  (void)c;
  if (chance(2))
    P(r, 0);
  else
    P(r, 1)[0] = v_bool((int)rnd(2));
}

/* kernel.output: no max, a small one, 0, the largest, or one too large. */
static void t_kernel_output(conn_t *c, req_t *r)
{
  static const uint64_t max[] = {1, 64, 0, 1u << 20, (1u << 20) + 1};

  (void)c;
  if (chance(3))
    P(r, 0);
  else
    P(r, 1)[0] = v_uint(max[rnd(5)]);
}

/* ring.open: mostly a good ring, sometimes sizes and descriptors it must
 * refuse (the ring itself is exercised by tests/fuzz/fuzz_ring.c). */
static void t_ring_open(conn_t *c, req_t *r)
{
  static const uint64_t entries[] = {8, 64, 256, 1024, 100, 2048, 0, 4};
  uint64_t n = entries[rnd(8)];
  size_t size = proto_ring_size(n <= RING_MAX_ENTRIES ? (uint32_t)n : 8);
  int kind = FD_MEMFD_GOOD;

  (void)c;
  if (chance(4))
    P(r, 0);
  else
    P(r, 1)[0] = v_uint(n);
  if (chance(5))
    kind = (int)rnd(FD_NKINDS);
  if (chance(6))
    size /= 2;
  if (!chance(12)) {
    int fd = fd_make(kind, size);
    if (fd >= 0) {
      r->fds[0] = fd;
      r->fd_kinds[0] = kind;
      r->nfds = 1;
    }
  }
}

static void t_shm_create(conn_t *c, req_t *r)
{
  static const size_t sizes[] = {4096, 65536, 65536 + 4096, 1 << 20};
  size_t size = sizes[rnd(4)];
  int kind = FD_MEMFD_GOOD;

  (void)c;
  P(r, 1)[0] = v_uint(size);
  if (chance(5))
    kind = (int)rnd(FD_NKINDS);
  if (!chance(12)) {
    int fd = fd_make(kind, size);
    if (fd >= 0) {
      r->fds[0] = fd;
      r->fd_kinds[0] = kind;
      r->nfds = 1;
    }
  }
  r->create = K_SHM;
  r->create_size = size;
}

/* session.kill of a session that cannot exist (ENOENT): a real id would
 * close another connection of the fuzzer. Kept valid. */
static void t_session_kill(conn_t *c, req_t *r)
{
  (void)c;
  P(r, 1)[0] = v_uint(rnd64() | ((uint64_t)1 << 63));
  r->no_mutate = 1;
}

/* grant.add for a user that cannot exist (ENOENT as root, EPERM
 * otherwise): a real grant would change who the fuzzer's connections
 * are. Kept valid. */
static void t_grant_add(conn_t *c, req_t *r)
{
  val_t *p = P(r, 4), devs = v_arr(1);

  (void)c;
  devs.kids[0] = v_uint(rnd(2));
  p[0] = v_str("hipd-protofuzz-no-such-user");
  p[1] = devs;
  p[2] = v_uint(rnd(1 << 20));
  p[3] = chance(2) ? v_nil() : v_str("protofuzz");
  r->no_mutate = 1;
}

/* grant.revoke of a label no grant has (ENOENT, or EPERM). Kept valid. */
static void t_grant_revoke(conn_t *c, req_t *r)
{
  (void)c;
  P(r, 1)[0] = v_str("hipd-protofuzz-none");
  r->no_mutate = 1;
}

/* log.level: read, or set to the level the daemon runs at (info), so that
 * the fuzzer's reading of the log does not change. Kept valid. */
static void t_log_level(conn_t *c, req_t *r)
{
  (void)c;
  if (chance(2))
    P(r, 0);
  else
    P(r, 1)[0] = v_str("info");
  r->no_mutate = 1;
}

static const tmpl_t templates[] = {
    {"backend.info", t_none, 2},
    {"cache.clear", t_none, 1},
    {"cache.list", t_none, 1},
    {"cache.stats", t_none, 2},
    {"daemon.info", t_none, 2},
    {"daemon.stats", t_none, 1},
    {"device.count", t_none, 2},
    {"device.current", t_none, 2},
    {"device.get", t_dev_opt, 2},
    {"device.list", t_none, 2},
    {"device.set_current", t_set_current, 3},
    {"device.synchronize", t_dev_opt, 3},
    {"event.create", t_create_event, 8},
    {"event.destroy", t_event_destroy, 5},
    {"event.elapsed", t_event_elapsed, 6},
    {"event.query", t_event, 6},
    {"event.record", t_event_record, 10},
    {"event.synchronize", t_event, 6},
    {"execute_direct", t_execute_direct, 2},
    {"grant.add", t_grant_add, 1},
    {"grant.list", t_none, 1},
    {"grant.revoke", t_grant_revoke, 1},
    {"hello", t_hello, 2},
    {"intrinsics.find", t_intr_find, 2},
    {"intrinsics.list", t_intr_list, 1},
    {"intrinsics.register", t_intr_register, 2},
    {"kernel.compile", t_compile, 1},
    {"kernel.compile_cached", t_compile, 2},
    {"kernel.compile_ir", t_compile_ir, 1},
    {"kernel.destroy", t_kernel_destroy, 2},
    {"kernel.generate_source", t_generate_source, 3},
    {"kernel.info", t_kernel, 4},
    {"kernel.launch", t_launch, 10},
    {"kernel.output", t_kernel_output, 2},
    {"log.level", t_log_level, 1},
    {"mem.alloc", t_mem_alloc, 10},
    {"mem.alloc_custom", t_mem_alloc_custom, 5},
    {"mem.alloc_zero_copy", t_mem_alloc_zero_copy, 4},
    {"mem.copy", t_mem_copy, 6},
    {"mem.copy_async", t_mem_copy_async, 6},
    {"mem.free", t_mem_free, 10},
    {"mem.info", t_buffer, 4},
    {"mem.memset", t_memset, 5},
    {"mem.memset_async", t_memset_async, 5},
    {"mem.read", t_read, 6},
    {"mem.read_async", t_read_async, 6},
    {"mem.read_shm", t_shm_sync, 5},
    {"mem.read_shm_async", t_shm_async, 5},
    {"mem.size", t_buffer, 4},
    {"mem.write", t_write, 6},
    {"mem.write_async", t_write_async, 6},
    {"mem.write_shm", t_shm_sync, 5},
    {"mem.write_shm_async", t_shm_async, 5},
    {"metrics", t_none, 1},
    {"ping", t_ping, 4},
    {"profile.disable", t_none, 2},
    {"profile.enable", t_none, 2},
    {"ring.open", t_ring_open, 2},
    {"run_source", t_run_source, 1},
    {"session.info", t_none, 3},
    {"session.kill", t_session_kill, 1},
    {"session.list", t_none, 1},
    {"session.profile", t_session_profile, 2},
    {"shm.create", t_shm_create, 6},
    {"shm.free", t_shm_free, 4},
    {"stream.create", t_create_stream, 6},
    {"stream.default", t_create_stream, 3},
    {"stream.destroy", t_stream_destroy, 5},
    {"stream.query", t_stream, 5},
    {"stream.synchronize", t_stream, 5},
    {"supported_source_langs", t_dev_opt, 2},
};

#define NTEMPLATES (sizeof(templates) / sizeof(templates[0]))

/* Per method of the table: its template, or NULL. */

const tmpl_t **tmpl_of;

static int weight_total;

/* Every method of the table has a template and every template a method.
 * @return the number of problems (printed). */

int check_coverage(void)
{
  int bad = 0;

  tmpl_of = calloc(nmethods, sizeof(*tmpl_of));
  for (unsigned i = 0; i < nmethods; i++) {
    for (size_t j = 0; j < NTEMPLATES; j++)
      if (strcmp(templates[j].name, methods[i].name) == 0)
        tmpl_of[i] = &templates[j];
    if (tmpl_of[i] == NULL) {
      fprintf(stderr,
              "protofuzz: method '%s' of the table has no template in "
              "tests/protofuzz/protofuzz.c: add one\n",
              methods[i].name);
      bad++;
    } else {
      weight_total += tmpl_of[i]->weight;
    }
  }
  for (size_t j = 0; j < NTEMPLATES; j++)
    if (method_index(templates[j].name) < 0) {
      fprintf(stderr, "protofuzz: template '%s' names no method of the table\n",
              templates[j].name);
      bad++;
    }
  return bad;
}

int pick_method(void)
{
  int w = (int)rnd((uint32_t)weight_total);

  for (unsigned i = 0; i < nmethods; i++) {
    w -= tmpl_of[i]->weight;
    if (w < 0)
      return (int)i;
  }
  return 0;
}
