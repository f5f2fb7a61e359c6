/* SPDX-License-Identifier: MIT */
/* daemon/dispatch.c: the method table and the request life cycle. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/intrinsics.h"
#include "device.h"
#include "dispatch.h"
#include "log.h"
#include "methods/methods.h"
#include "policy.h"

/* The row macros: each param kind's descriptor (see param_kind_t in
 * dispatch.h), as UINT("offset", UINT64_MAX) for a required param and
 * OPT(UINT, "shared_mem", UINT32_MAX) for an optional one. */
/* (clang-format would spread each brace macro over four lines.) */
/* clang-format off */
#define P_UINT_(n, mx) .name = (n), .kind = P_UINT, .max = (mx)
#define P_INT_(n, mn, mx) .name = (n), .kind = P_INT, .min = (mn), .max = (mx)
#define P_BOOL_(n) .name = (n), .kind = P_BOOL
#define P_BYTES_(n) .name = (n), .kind = P_BYTES
#define P_BIN_(n, e) .name = (n), .kind = P_BIN, .expect = (e)
#define P_STR_(n, mx) .name = (n), .kind = P_STR, .max = (mx)
#define P_HANDLE_(n, t) .name = (n), .kind = P_HANDLE, .htype = (t)
#define P_DEVICE_(n) .name = (n), .kind = P_DEVICE, .max = UINT32_MAX
#define P_DIMS_(n) .name = (n), .kind = P_DIMS, .max = UINT32_MAX
#define P_BLOCK_(n, mx) .name = (n), .kind = P_BLOCK, .max = (mx)
#define P_OPTIONS_(n, mx) .name = (n), .kind = P_OPTIONS, .max = (mx)
#define P_NAMES_(n, mx) .name = (n), .kind = P_NAMES, .max = (mx)
#define P_TARGET_(n, mx) .name = (n), .kind = P_TARGET, .max = (mx)
#define P_ARRAY_(n, e) .name = (n), .kind = P_ARRAY, .expect = (e)
#define P_ANY_(n) .name = (n), .kind = P_ANY
#define P_REST_(n, mx) .name = (n), .kind = P_REST, .optional = 1, .max = (mx)

#define UINT(...) {P_UINT_(__VA_ARGS__)}
#define INT(...) {P_INT_(__VA_ARGS__)}
#define BOOL(...) {P_BOOL_(__VA_ARGS__)}
#define BYTES(...) {P_BYTES_(__VA_ARGS__)}
#define BIN(...) {P_BIN_(__VA_ARGS__)}
#define STR(...) {P_STR_(__VA_ARGS__)}
#define HANDLE(...) {P_HANDLE_(__VA_ARGS__)}
#define DEVICE(...) {P_DEVICE_(__VA_ARGS__)}
#define DIMS(...) {P_DIMS_(__VA_ARGS__)}
#define BLOCK(...) {P_BLOCK_(__VA_ARGS__)}
#define OPTIONS(...) {P_OPTIONS_(__VA_ARGS__)}
#define NAMES(...) {P_NAMES_(__VA_ARGS__)}
#define TARGET(...) {P_TARGET_(__VA_ARGS__)}
#define ARRAY(...) {P_ARRAY_(__VA_ARGS__)}
#define ANY(...) {P_ANY_(__VA_ARGS__)}
#define REST(...) {P_REST_(__VA_ARGS__)}
/* An optional param of kind K: OPT(UINT, "shared_mem", UINT32_MAX). */
#define OPT(K, ...) {P_##K##_(__VA_ARGS__), .optional = 1}

/* A row's signature: PARAMS(HANDLE("buffer", HANDLE_BUFFER), ...), or
 * NO_PARAMS. A row of more than CALL_MAX_ARGS params (dispatch keeps room
 * for that many) does not compile: the char array gets a negative size. */
#define PARAMS(...)                                                           \
  .sig = (const param_t[]){__VA_ARGS__},                                     \
  .nsig = sizeof((const param_t[]){__VA_ARGS__}) / sizeof(param_t) +       \
          0 * sizeof(char[sizeof((const param_t[]){__VA_ARGS__}) /          \
                                      sizeof(param_t) <=                    \
                                  CALL_MAX_ARGS                             \
                              ? 1                                           \
                              : -1])
#define NO_PARAMS .sig = NULL, .nsig = 0
/* clang-format on */

#define BUF(n) HANDLE(n, HANDLE_BUFFER)
#define STREAM(n) HANDLE(n, HANDLE_STREAM)
#define EVENT(n) HANDLE(n, HANDLE_EVENT)
#define KERNEL(n) HANDLE(n, HANDLE_KERNEL)
#define SHM(n) HANDLE(n, HANDLE_SHM)
#define U64(n) UINT(n, UINT64_MAX)
#define ARCH_MAX 63    /* an architecture name's bytes ("gfx90a", "sm_90") */
#define SYMBOL_MAX 255 /* a kernel or intrinsic name's bytes */
#define CURRENT_DEVICE OPT(DEVICE, "device")
#define IR_BIN BIN("ir", "bin (the msgpack bytes of the IR document)")
#define LAUNCH_ARGS ARRAY("args", "an array of [kind, value]")

/* The method table, sorted by name (dispatch_find searches it). Adding a
 * method is one row here and one handler in methods/. Each row says what
 * its params are; dispatch checks them all before the handler runs, and
 * min_params/max_params are derived from them (table_init). The protocol
 * document proto/PROTOCOL.md lists the same methods with the same params
 * (tests/check_dispatch.c compares them). */
static method_t methods[] = {
    /* name, handler, flags, since, params */
    {"backend.info", m_backend_info, 0, 1, NO_PARAMS},
    {"cache.clear", m_cache_clear, 0, 1, NO_PARAMS},
    {"cache.list", m_cache_list, 0, 1, NO_PARAMS},
    {"cache.stats", m_cache_stats, 0, 1, NO_PARAMS},
    {"daemon.info", m_daemon_info, 0, 1, NO_PARAMS},
    {"daemon.stats", m_daemon_stats, 0, 1, NO_PARAMS},
    {"device.count", m_device_count, 0, 1, NO_PARAMS},
    {"device.current", m_device_current, 0, 1, NO_PARAMS},
    {"device.get", m_device_get, 0, 1, PARAMS(CURRENT_DEVICE)},
    {"device.list", m_device_list, 0, 1, NO_PARAMS},
    {"device.set_current", m_device_set_current, 0, 1,
     PARAMS(DEVICE("device"))},
    {"device.synchronize", m_device_synchronize, 0, 1, PARAMS(CURRENT_DEVICE)},
    {"event.create", m_event_create, 0, 1, PARAMS(CURRENT_DEVICE)},
    {"event.destroy", m_event_destroy, 0, 1, PARAMS(EVENT("event"))},
    {"event.elapsed", m_event_elapsed, 0, 1,
     PARAMS(EVENT("start"), EVENT("stop"))},
    {"event.query", m_event_query, 0, 1, PARAMS(EVENT("event"))},
    {"event.record", m_event_record, 0, 1,
     PARAMS(EVENT("event"), OPT(HANDLE, "stream", HANDLE_STREAM))},
    {"event.synchronize", m_event_synchronize, 0, 1, PARAMS(EVENT("event"))},
    {"execute_direct", m_execute_direct, 0, 1, PARAMS(REST("params", 255))},
    {"hello", m_hello, M_PREHELLO, 1,
     PARAMS(OPT(INT, "protocol", 0, INT32_MAX),
            OPT(STR, "client_name", sizeof(((session_t *)0)->client) - 1))},
    {"intrinsics.find", m_intrinsics_find, 0, 1,
     PARAMS(STR("name", SYMBOL_MAX), OPT(TARGET, "target", ARCH_MAX))},
    {"intrinsics.list", m_intrinsics_list, 0, 1,
     PARAMS(OPT(TARGET, "target", ARCH_MAX))},
    {"intrinsics.register", m_intrinsics_register, 0, 1,
     PARAMS(STR("name", SYMBOL_MAX), STR("code", INTR_CODE_MAX),
            STR("convergence", 15), OPT(INT, "arity", 0, 64))},
    {"kernel.compile", m_kernel_compile, 0, 1,
     PARAMS(BYTES("source"), STR("name", SYMBOL_MAX),
            OPT(OPTIONS, "options", MAX_OPTIONS),
            OPT(TARGET, "target", ARCH_MAX))},
    {"kernel.compile_cached", m_kernel_compile_cached, 0, 1,
     PARAMS(BYTES("source"), STR("name", SYMBOL_MAX),
            OPT(OPTIONS, "options", MAX_OPTIONS),
            OPT(TARGET, "target", ARCH_MAX))},
    {"kernel.compile_ir", m_kernel_compile_ir, 0, 1,
     PARAMS(IR_BIN, OPT(BLOCK, "block", MAX_BLOCK_THREADS),
            OPT(NAMES, "soa_params", MAX_SOA),
            OPT(OPTIONS, "options", MAX_OPTIONS),
            OPT(TARGET, "target", ARCH_MAX))},
    {"kernel.destroy", m_kernel_destroy, 0, 1, PARAMS(KERNEL("kernel"))},
    {"kernel.generate_source", m_kernel_generate_source, 0, 1,
     PARAMS(IR_BIN, OPT(BLOCK, "block", MAX_BLOCK_THREADS),
            OPT(NAMES, "soa_params", MAX_SOA),
            OPT(TARGET, "target", ARCH_MAX))},
    {"kernel.info", m_kernel_info, 0, 1, PARAMS(KERNEL("kernel"))},
    {"kernel.launch", m_kernel_launch, 0, 1,
     PARAMS(KERNEL("kernel"), DIMS("grid"), DIMS("block"),
            OPT(UINT, "shared_mem", UINT32_MAX),
            OPT(HANDLE, "stream", HANDLE_STREAM), LAUNCH_ARGS,
            OPT(BOOL, "wait"))},
    {"log.level", m_log_level, 0, 1, PARAMS(OPT(STR, "level", 15))},
    {"mem.alloc", m_mem_alloc, 0, 1,
     PARAMS(U64("count"), STR("kind", 15), CURRENT_DEVICE)},
    {"mem.alloc_custom", m_mem_alloc_custom, 0, 1,
     PARAMS(U64("size"), UINT("elem_size", UINT32_MAX), CURRENT_DEVICE)},
    {"mem.alloc_zero_copy", m_mem_alloc_zero_copy, 0, 1,
     PARAMS(SHM("shm"), CURRENT_DEVICE)},
    {"mem.copy", m_mem_copy, 0, 1,
     PARAMS(BUF("dst"), U64("dst_offset"), BUF("src"), U64("src_offset"),
            U64("length"))},
    {"mem.copy_async", m_mem_copy_async, 0, 1,
     PARAMS(BUF("dst"), U64("dst_offset"), BUF("src"), U64("src_offset"),
            U64("length"), STREAM("stream"))},
    {"mem.free", m_mem_free, 0, 1, PARAMS(BUF("buffer"))},
    {"mem.info", m_mem_info, 0, 1, PARAMS(BUF("buffer"))},
    {"mem.memset", m_mem_memset, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), U64("length"), UINT("value", 255))},
    {"mem.memset_async", m_mem_memset_async, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), U64("length"), UINT("value", 255),
            STREAM("stream"))},
    {"mem.read", m_mem_read, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), U64("length"))},
    {"mem.read_async", m_mem_read_async, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), U64("length"), STREAM("stream"))},
    {"mem.read_shm", m_mem_read_shm, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), SHM("shm"), U64("shm_offset"),
            U64("length"))},
    {"mem.read_shm_async", m_mem_read_shm_async, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), SHM("shm"), U64("shm_offset"),
            U64("length"), STREAM("stream"))},
    {"mem.size", m_mem_size, 0, 1, PARAMS(BUF("buffer"))},
    {"mem.write", m_mem_write, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), BYTES("data"))},
    {"mem.write_async", m_mem_write_async, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), BYTES("data"), STREAM("stream"))},
    {"mem.write_shm", m_mem_write_shm, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), SHM("shm"), U64("shm_offset"),
            U64("length"))},
    {"mem.write_shm_async", m_mem_write_shm_async, 0, 1,
     PARAMS(BUF("buffer"), U64("offset"), SHM("shm"), U64("shm_offset"),
            U64("length"), STREAM("stream"))},
    {"metrics", m_metrics, 0, 1, NO_PARAMS},
    {"ping", m_ping, M_PREHELLO, 1, PARAMS(OPT(BYTES, "payload"))},
    {"profile.disable", m_profile_disable, 0, 1, NO_PARAMS},
    {"profile.enable", m_profile_enable, 0, 1, NO_PARAMS},
    {"run_source", m_run_source, 0, 1,
     PARAMS(BYTES("source"), STR("lang", ARCH_MAX),
            STR("kernel_name", SYMBOL_MAX), DIMS("block"), DIMS("grid"),
            OPT(UINT, "shared_mem", UINT32_MAX), LAUNCH_ARGS,
            OPT(BOOL, "wait"))},
    {"session.info", m_session_info, 0, 1, NO_PARAMS},
    {"session.kill", m_session_kill, 0, 1, PARAMS(U64("id"))},
    {"session.list", m_session_list, 0, 1, NO_PARAMS},
    {"session.profile", m_session_profile, 0, 1, PARAMS(OPT(BOOL, "clear"))},
    {"shm.create", m_shm_create, 0, 1, PARAMS(U64("size"))},
    {"shm.free", m_shm_free, 0, 1, PARAMS(SHM("shm"))},
    {"stream.create", m_stream_create, 0, 1, PARAMS(CURRENT_DEVICE)},
    {"stream.default", m_stream_default, 0, 1, PARAMS(CURRENT_DEVICE)},
    {"stream.destroy", m_stream_destroy, 0, 1, PARAMS(STREAM("stream"))},
    {"stream.query", m_stream_query, 0, 1, PARAMS(STREAM("stream"))},
    {"stream.synchronize", m_stream_synchronize, 0, 1,
     PARAMS(STREAM("stream"))},
    {"supported_source_langs", m_supported_source_langs, 0, 1,
     PARAMS(CURRENT_DEVICE)},
};

#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Derive each row's param count bounds from its signature: at least up to
 * the last required param (an optional one before it is given as nil), at
 * most all of them, or P_REST's count more. */
static void table_init(void)
{
  for (size_t r = 0; r < NMETHODS; r++) {
    method_t *m = &methods[r];
    unsigned min = 0, max = m->nsig;

    for (unsigned i = 0; i < m->nsig; i++) {
      if (m->sig[i].kind == P_REST)
        max = i + (unsigned)m->sig[i].max;
      else if (!m->sig[i].optional)
        min = i + 1;
    }
    m->min_params = (uint8_t)min;
    m->max_params = (uint8_t)max;
  }
}

const method_t *dispatch_methods(unsigned *count)
{
  pthread_once(&table_once, table_init);
  *count = NMETHODS;
  return methods;
}

static int name_cmp(const char *name, size_t len, const char *entry)
{
  int c = strncmp(name, entry, len);

  if (c != 0)
    return c;
  return entry[len] == '\0' ? 0 : -1;
}

const method_t *dispatch_find(const char *name, size_t len)
{
  size_t lo = 0, hi = NMETHODS;

  pthread_once(&table_once, table_init);
  /* An empty name (msgpack-c gives it a NULL pointer) matches nothing. */
  if (len == 0 || name == NULL)
    return NULL;
  if (memchr(name, '\0', len) != NULL)
    return NULL;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = name_cmp(name, len, methods[mid].name);
    if (c == 0)
      return &methods[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

/* ---------------------------------------------------------- param checks */

const char *dispatch_kind_name(param_kind_t kind)
{
  static const char *const names[] = {
      [P_UINT] = "uint",        [P_INT] = "int",         [P_BOOL] = "bool",
      [P_BYTES] = "bin or str", [P_BIN] = "bin",         [P_STR] = "str",
      [P_HANDLE] = "handle",    [P_DEVICE] = "device",   [P_DIMS] = "dims",
      [P_BLOCK] = "block",      [P_OPTIONS] = "options", [P_NAMES] = "names",
      [P_TARGET] = "target",    [P_ARRAY] = "array",     [P_ANY] = "any",
      [P_REST] = "rest"};

  return (unsigned)kind < sizeof(names) / sizeof(names[0]) && names[kind]
             ? names[kind]
             : "?";
}

/* The type of a param of kind @p p as messages say it. */
static const char *expected(const param_t *p)
{
  if (p->expect != NULL)
    return p->expect;
  switch (p->kind) {
  case P_UINT:
  case P_DEVICE:
    return "an unsigned integer";
  case P_INT:
    return "an integer";
  case P_BOOL:
    return "a boolean";
  case P_BYTES:
    return "bin or str";
  case P_BIN:
    return "bin";
  case P_STR:
    return "a string";
  case P_HANDLE:
    return "a handle (unsigned integer)";
  case P_TARGET:
    return "a device id (unsigned integer) or an architecture (string)";
  case P_ARRAY:
    return "an array";
  default:
    return "a value";
  }
}

static int bad_type(call_t *c, unsigned i, const param_t *p,
                    const msgpack_object *o)
{
  return call_fail(c, HIPD_EPARAMS, "param %u (%s) must be %s, not %s", i,
                   p->name, expected(p),
                   o ? proto_obj_type_name(o) : "missing");
}

/* A NUL-terminated copy of @p n bytes at @p p in the session's zone, which
 * holds the request's decoded objects until the next request. */
static char *zone_str(call_t *c, const char *p, size_t n)
{
  char *s = msgpack_zone_malloc(&c->s->zone, n + 1);

  if (s != NULL) {
    memcpy(s, p, n);
    s[n] = '\0';
  }
  return s;
}

static int get_uint(call_t *c, unsigned i, const param_t *p,
                    const msgpack_object *o, uint64_t *out)
{
  int rc = proto_obj_uint(o, p->max, out);

  if (rc == HIPD_ERANGE)
    return call_fail(c, HIPD_ERANGE, "param %u (%s) must be between 0 and %llu",
                     i, p->name, (unsigned long long)p->max);
  return rc != 0 ? bad_type(c, i, p, o) : 0;
}

static int get_str(call_t *c, unsigned i, const param_t *p,
                   const msgpack_object *o, arg_t *a)
{
  size_t n = o->via.str.size;

  if (o->type != MSGPACK_OBJECT_STR)
    return bad_type(c, i, p, o);
  if (n > p->max)
    return call_fail(c, HIPD_EPARAMS,
                     "param %u (%s) is %zu bytes long, more than %llu", i,
                     p->name, n, (unsigned long long)p->max);
  if (memchr(o->via.str.ptr, '\0', n) != NULL)
    return call_fail(c, HIPD_EPARAMS, "param %u (%s) contains a NUL byte", i,
                     p->name);
  if ((a->s = zone_str(c, o->via.str.ptr, n)) == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  a->len = n;
  return 0;
}

/* A device id (lost devices are EDEVLOST, as every request naming one). */
static int get_device(call_t *c, unsigned i, const param_t *p,
                      const msgpack_object *o, arg_t *a)
{
  uint64_t id = (uint64_t)c->s->device;
  int rc;

  if (o != NULL && (rc = get_uint(c, i, p, o, &id)) != 0)
    return rc;
  a->dev = device_get((int)id);
  if (a->dev == NULL)
    return call_fail(c, HIPD_ENODEV, "no device %llu (this daemon serves %d)",
                     (unsigned long long)id, devices_count());
  if (!session_may_use_device(c->s, a->dev->id)) {
    hipd_err_t err;
    policy_device_refusal(c->s->d, c->s->peer_who, a->dev, &err);
    return call_fail(c, err.code, "%s", err.msg);
  }
  if (a->dev->lost)
    return check_alive(c, "device", a->dev, 0);
  return 0;
}

/* Launch dims: x, or [x], [x, y] or [x, y, z]; missing ones are 1. */
static int get_dims(call_t *c, unsigned i, const param_t *p,
                    const msgpack_object *o, arg_t *a)
{
  a->dims[0] = a->dims[1] = a->dims[2] = 1;
  if (o != NULL && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
      o->via.u64 <= p->max) {
    a->dims[0] = (uint32_t)o->via.u64;
    return a->dims[0] == 0 ? call_fail(c, HIPD_ELIMIT, "%s.x is 0", p->name)
                           : 0;
  }
  if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 ||
      o->via.array.size > 3)
    goto bad;
  for (uint32_t j = 0; j < o->via.array.size; j++) {
    uint64_t v;
    if (proto_obj_uint(&o->via.array.ptr[j], p->max, &v) != 0)
      goto bad;
    if (v == 0)
      return call_fail(c, HIPD_ELIMIT, "%s.%c is 0", p->name, "xyz"[j]);
    a->dims[j] = (uint32_t)v;
  }
  return 0;
bad:
  return call_fail(c, HIPD_EPARAMS,
                   "param %u (%s) must be [x, y, z] positive integers", i,
                   p->name);
}

/* The code generator's block: each dimension 1 to max, and at most max
 * threads in all. */
static int get_block(call_t *c, unsigned i, const param_t *p,
                     const msgpack_object *o, arg_t *a)
{
  uint64_t threads;

  a->dims[0] = a->dims[1] = a->dims[2] = 1;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 >= 1 &&
      o->via.u64 <= p->max) {
    a->dims[0] = (uint32_t)o->via.u64;
  } else if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 1 &&
             o->via.array.size <= 3) {
    for (uint32_t k = 0; k < o->via.array.size; k++) {
      uint64_t v;
      if (proto_obj_uint(&o->via.array.ptr[k], p->max, &v) != 0 || v == 0)
        goto bad;
      a->dims[k] = (uint32_t)v;
    }
  } else {
    goto bad;
  }
  threads = (uint64_t)a->dims[0] * a->dims[1] * a->dims[2];
  if (threads > p->max)
    return call_fail(c, HIPD_ELIMIT, "a block of %llu threads (at most %llu)",
                     (unsigned long long)threads, (unsigned long long)p->max);
  return 0;
bad:
  return call_fail(c, HIPD_EPARAMS,
                   "param %u (%s) must be [x, y, z], each 1 to %llu", i,
                   p->name, (unsigned long long)p->max);
}

/* An array of strings: compiler options (each under 256 bytes) or names
 * (soa_params: each 1 to 255 bytes). */
static int get_strings(call_t *c, unsigned i, const param_t *p,
                       const msgpack_object *o, arg_t *a)
{
  int names = p->kind == P_NAMES;
  const char **v;
  uint32_t n;

  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > p->max)
    return call_fail(
        c, HIPD_EPARAMS, "param %u (%s) must be an array of at most %llu %s", i,
        p->name, (unsigned long long)p->max, names ? "param names" : "strings");
  n = o->via.array.size;
  v = msgpack_zone_malloc(&c->s->zone, (n ? n : 1) * sizeof(*v));
  if (v == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  for (uint32_t k = 0; k < n; k++) {
    const msgpack_object *e = &o->via.array.ptr[k];
    if (e->type != MSGPACK_OBJECT_STR || e->via.str.size > 255 ||
        (names && e->via.str.size == 0) ||
        memchr(e->via.str.ptr, '\0', e->via.str.size) != NULL) {
      if (names)
        return call_fail(c, HIPD_EPARAMS,
                         "%s[%u] must be a param name (a string of 1 to 255 "
                         "bytes)",
                         p->name, k);
      return call_fail(c, HIPD_EPARAMS,
                       "option %u must be a string of under 256 bytes", k);
    }
    if ((v[k] = zone_str(c, e->via.str.ptr, e->via.str.size)) == NULL)
      return call_fail(c, HIPD_ENOMEM, "out of memory");
  }
  a->strv = v;
  a->n = n;
  return 0;
}

/* Check and convert param @p i (@p o, NULL when absent) by @p p into @p a.
 * @return 0, or the code the call was answered with. */
static int param_get(call_t *c, unsigned i, const param_t *p,
                     const msgpack_object *o, arg_t *a)
{
  int rc;

  a->o = o;
  if (o != NULL && o->type == MSGPACK_OBJECT_NIL)
    o = NULL;
  a->present = o != NULL;
  if (o == NULL) {
    if (!p->optional) {
      if (p->kind == P_DIMS)
        return get_dims(c, i, p, NULL, a);
      return bad_type(c, i, p, a->o);
    }
    /* The defaults: the current device for a device or target. */
    if (p->kind == P_DEVICE || p->kind == P_TARGET)
      return get_device(c, i, p, NULL, a);
    return 0;
  }
  switch (p->kind) {
  case P_UINT:
    return get_uint(c, i, p, o, &a->u);
  case P_INT:
    rc = proto_obj_int(o, p->min, (int64_t)p->max, &a->i);
    if (rc == HIPD_ERANGE)
      return call_fail(c, HIPD_ERANGE,
                       "param %u (%s) must be between %lld and %lld", i,
                       p->name, (long long)p->min, (long long)p->max);
    return rc != 0 ? bad_type(c, i, p, o) : 0;
  case P_BOOL:
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
      return bad_type(c, i, p, o);
    a->b = o->via.boolean;
    return 0;
  case P_BYTES:
    return proto_obj_bytes(o, &a->s, &a->len) != 0 ? bad_type(c, i, p, o) : 0;
  case P_BIN:
    if (o->type != MSGPACK_OBJECT_BIN)
      return bad_type(c, i, p, o);
    a->s = o->via.bin.ptr;
    a->len = o->via.bin.size;
    return 0;
  case P_STR:
    return get_str(c, i, p, o, a);
  case P_HANDLE:
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
      return bad_type(c, i, p, o);
    a->u = o->via.u64;
    rc = handles_get(&c->s->handles, a->u, (handle_type_t)p->htype, &a->obj);
    return rc != 0
               ? call_fail_handle(c, p->name, a->u, (handle_type_t)p->htype, rc)
               : 0;
  case P_DEVICE:
    return get_device(c, i, p, o, a);
  case P_DIMS:
    return get_dims(c, i, p, o, a);
  case P_BLOCK:
    return get_block(c, i, p, o, a);
  case P_OPTIONS:
  case P_NAMES:
    return get_strings(c, i, p, o, a);
  case P_TARGET:
    if (o->type == MSGPACK_OBJECT_STR)
      return get_str(c, i, p, o, a);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
        o->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
      return bad_type(c, i, p, o);
    {
      /* A device id is a uint, bounded as one. */
      param_t dp = *p;
      dp.max = UINT32_MAX;
      return get_device(c, i, &dp, o, a);
    }
  case P_ARRAY:
    return o->type == MSGPACK_OBJECT_ARRAY ? 0 : bad_type(c, i, p, o);
  default: /* P_ANY, P_REST: the handler's */
    return 0;
  }
}

/* Check the params of @p c against its method's signature into @p args.
 * @return 0, or the code the call was answered with. */
static int params_get(call_t *c, arg_t *args)
{
  const method_t *m = c->m;

  for (unsigned i = 0; i < m->nsig && m->sig[i].kind != P_REST; i++) {
    const msgpack_object *o =
        i < c->nparams ? &c->params->via.array.ptr[i] : NULL;
    int rc = param_get(c, i, &m->sig[i], o, &args[i]);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* ------------------------------------------------------------- dispatch */

void dispatch_request(session_t *s, uint32_t msgid, const char *method,
                      uint32_t method_len, const msgpack_object *params)
{
  call_t c = {.s = s, .msgid = msgid, .params = params};
  const method_t *m = dispatch_find(method, method_len);
  arg_t args[CALL_MAX_ARGS];
  int rc;

  s->inflight++;
  c.nparams = params->via.array.size;
  c.m = m;
  c.name = m != NULL ? m->name : NULL;
  if (s->refused) {
    /* The policy refused the peer at connect: say why, then close. */
    call_fail(&c, s->refusal.code, "%s", s->refusal.msg);
    s->close_flushed = 1;
  } else if (s->d->stopping) {
    call_fail(&c, HIPD_ESHUTDOWN, "the daemon is shutting down");
  } else if (m == NULL) {
    call_fail(&c, HIPD_ENOMETHOD, "unknown method '%.*s'",
              (int)(method_len > 64 ? 64 : method_len), method);
  } else if (s->protocol == 0 && !(m->flags & M_PREHELLO)) {
    call_fail(&c, HIPD_EHELLO, "send 'hello' before other methods");
  } else if (c.nparams < m->min_params || c.nparams > m->max_params) {
    if (m->min_params == m->max_params)
      call_fail(&c, HIPD_EPARAMS, "takes %u params, got %u", m->min_params,
                c.nparams);
    else
      call_fail(&c, HIPD_EPARAMS, "takes %u to %u params, got %u",
                m->min_params, m->max_params, c.nparams);
  } else {
    memset(args, 0, sizeof(args));
    c.args = args;
    if (params_get(&c, args) == 0) {
      log_debug(s->id, "-> %s #%u", m->name, msgid);
      rc = m->fn(&c);
      if (c.deferred) {
        /* The heap copy answers later; this one was never answered. */
        if (c.answered)
          msgpack_sbuffer_destroy(&c.out);
        return;
      }
      /* A code returned without an answer is the answer. */
      if (rc < 0 && !c.answered)
        call_fail(&c, rc, "%s", hipd_strerror(rc));
    }
    c.args = NULL;
  }
  call_send(&c);
}
