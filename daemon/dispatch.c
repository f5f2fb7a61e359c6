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
#include "ring_layout.h"

/* The row fragments a signature's KIND stands for (methods.h's PARAMS_*
 * lists; param_kind_t in proto/params.h says what each kind checks). */
/* clang-format off */
#define UINT(mx) .kind = P_UINT, .max = (mx)
#define U64 UINT(UINT64_MAX)
#define INT(mn, mx) .kind = P_INT, .min = (mn), .max = (mx)
#define BOOL .kind = P_BOOL
#define BYTES .kind = P_BYTES
#define STR(mx) .kind = P_STR, .max = (mx)
#define HANDLE(t) .kind = P_HANDLE, .htype = (t)
#define BUF HANDLE(HANDLE_BUFFER)
#define STREAM HANDLE(HANDLE_STREAM)
#define EVENT HANDLE(HANDLE_EVENT)
#define KERNEL HANDLE(HANDLE_KERNEL)
#define SHM HANDLE(HANDLE_SHM)
#define DEVICE .kind = P_DEVICE, .max = UINT32_MAX
#define DIMS .kind = P_DIMS, .max = UINT32_MAX
#define BLOCK(mx) .kind = P_BLOCK, .max = (mx)
#define OPTIONS(mx) .kind = P_OPTIONS, .max = (mx)
#define NAMES(mx) .kind = P_NAMES, .max = (mx)
#define TARGET(mx) .kind = P_TARGET, .max = (mx)
#define IR .kind = P_BIN, .expect = "bin (the msgpack bytes of the IR document)"
#define LAUNCH_ARGS .kind = P_LAUNCH_ARGS, .max = PARAM_LAUNCH_MAX, \
                    .expect = "an array of [kind, value]"
#define REST(mx) .kind = P_REST, .optional = 1, .max = (mx)
#define ANY .kind = P_ANY

/* A signature's rows and count, from its PARAMS_ list. */
#define SIG_REQ(n, kind) {.name = #n, kind},
#define SIG_OPT(n, kind) {.name = #n, kind, .optional = 1},
#define SIG_ONE(n, kind) +1
#define SIG_COUNT(sig) (0 PARAMS_##sig(SIG_ONE, SIG_ONE))
#define SIG_ROWS(sig) (const param_t[]){PARAMS_##sig(SIG_REQ, SIG_OPT)}

/* The method table, sorted by name (dispatch_find searches it). Adding a
 * method is one row here, a signature in methods.h (or one it shares) and
 * one handler in methods/. A row is
 *   T(name, handler, signature, flags, since): the handler m_HANDLER gets
 *     the signature's typed view (methods.h: SIGNATURE_args_t);
 *   U(name, handler, signature, flags, since): the handler gets the call
 *     only (it reads no params, or reads c->params itself: admin.c);
 *   N(name, handler, flags, since): no params.
 * Dispatch checks every param by the signature's rows before the handler
 * runs, and min_params/max_params are derived from them (table_init). The
 * protocol document proto/PROTOCOL.md lists the same methods with the same
 * params (tests/check_dispatch.c compares them). */
#define METHOD_TABLE(T, U, N)                                                  \
  N("backend.info", backend_info, 0, 1)                                        \
  N("cache.clear", cache_clear, 0, 1)                                          \
  N("cache.list", cache_list, 0, 1)                                            \
  N("cache.stats", cache_stats, 0, 1)                                          \
  N("daemon.info", daemon_info, 0, 1)                                          \
  N("daemon.stats", daemon_stats, 0, 1)                                        \
  N("device.count", device_count, 0, 1)                                        \
  N("device.current", device_current, 0, 1)                                    \
  T("device.get", device_get, device, 0, 1)                                    \
  N("device.list", device_list, 0, 1)                                          \
  T("device.set_current", device_set_current, set_device, 0, 1)                \
  T("device.synchronize", device_synchronize, device, 0, 1)                    \
  T("event.create", event_create, device, 0, 1)                                \
  T("event.destroy", event_destroy, event, 0, 1)                               \
  T("event.elapsed", event_elapsed, event_elapsed, 0, 1)                       \
  T("event.query", event_query, event, 0, 1)                                   \
  T("event.record", event_record, event_record, 0, 1)                          \
  T("event.synchronize", event_synchronize, event, 0, 1)                       \
  U("execute_direct", execute_direct, rest, 0, 1)                              \
  T("grant.add", grant_add, grant_add, 0, 1)                                   \
  N("grant.list", grant_list, 0, 1)                                            \
  T("grant.revoke", grant_revoke, grant_revoke, 0, 1)                          \
  T("hello", hello, hello, M_PREHELLO, 1)                                      \
  T("intrinsics.find", intrinsics_find, intrinsics_find, 0, 1)                 \
  T("intrinsics.list", intrinsics_list, target, 0, 1)                          \
  T("intrinsics.register", intrinsics_register, intrinsics_register, 0, 1)     \
  T("kernel.compile", kernel_compile, kernel_compile, 0, 1)                    \
  T("kernel.compile_cached", kernel_compile_cached, kernel_compile, 0, 1)      \
  T("kernel.compile_ir", kernel_compile_ir, kernel_compile_ir, 0, 1)           \
  T("kernel.destroy", kernel_destroy, kernel, 0, 1)                            \
  T("kernel.generate_source", kernel_generate_source, kernel_generate_source,  \
    0, 1)                                                                      \
  T("kernel.info", kernel_info, kernel, 0, 1)                                  \
  T("kernel.launch", kernel_launch, kernel_launch, 0, 1)                       \
  T("kernel.output", kernel_output, kernel_output, 0, 1)                       \
  T("log.level", log_level, log_level, 0, 1)                                   \
  T("mem.alloc", mem_alloc, mem_alloc, 0, 1)                                   \
  T("mem.alloc_custom", mem_alloc_custom, mem_alloc_custom, 0, 1)              \
  T("mem.alloc_zero_copy", mem_alloc_zero_copy, mem_alloc_zero_copy, 0, 1)     \
  T("mem.copy", mem_copy, mem_copy, 0, 1)                                      \
  T("mem.copy_async", mem_copy_async, mem_copy_async, 0, 1)                    \
  T("mem.free", mem_free, buffer, 0, 1)                                        \
  T("mem.info", mem_info, buffer, 0, 1)                                        \
  T("mem.memset", mem_memset, mem_memset, 0, 1)                                \
  T("mem.memset_async", mem_memset_async, mem_memset_async, 0, 1)              \
  T("mem.read", mem_read, mem_read, 0, 1)                                      \
  T("mem.read_async", mem_read_async, mem_read_async, 0, 1)                    \
  T("mem.read_shm", mem_read_shm, mem_shm, 0, 1)                               \
  T("mem.read_shm_async", mem_read_shm_async, mem_shm_async, 0, 1)             \
  T("mem.size", mem_size, buffer, 0, 1)                                        \
  T("mem.write", mem_write, mem_write, 0, 1)                                   \
  T("mem.write_async", mem_write_async, mem_write_async, 0, 1)                 \
  T("mem.write_shm", mem_write_shm, mem_shm, 0, 1)                             \
  T("mem.write_shm_async", mem_write_shm_async, mem_shm_async, 0, 1)           \
  N("metrics", metrics, 0, 1)                                                  \
  T("ping", ping, ping, M_PREHELLO, 1)                                         \
  N("profile.disable", profile_disable, 0, 1)                                  \
  N("profile.enable", profile_enable, 0, 1)                                    \
  T("ring.open", ring_open, ring_open, 0, 1)                                   \
  T("run_source", run_source, run_source, 0, 1)                                \
  N("session.info", session_info, 0, 1)                                        \
  T("session.kill", session_kill, session_kill, 0, 1)                          \
  N("session.list", session_list, 0, 1)                                        \
  T("session.profile", session_profile, session_profile, 0, 1)                 \
  T("shm.create", shm_create, shm_create, 0, 1)                                \
  T("shm.free", shm_free, shm, 0, 1)                                           \
  T("stream.create", stream_create, device, 0, 1)                              \
  T("stream.default", stream_default, device, 0, 1)                            \
  T("stream.destroy", stream_destroy, stream, 0, 1)                            \
  T("stream.query", stream_query, stream, 0, 1)                                \
  T("stream.synchronize", stream_synchronize, stream, 0, 1)                    \
  T("supported_source_langs", supported_source_langs, device, 0, 1)

/* Each typed handler is called through a wrapper that gives it its view of
 * the args array (laid out as the array: the assertion checks it, and
 * that dispatch keeps room for as many params as the signature has). */
#define WRAP_T(nm, h, sg, fl, ver)                                            \
  _Static_assert(sizeof(sg##_args_t) == SIG_COUNT(sg) * sizeof(arg_t) &&       \
                     SIG_COUNT(sg) <= CALL_MAX_ARGS,                           \
                 nm ": its view is not its args");                             \
  static int h##_typed(call_t *c)                                             \
  {                                                                            \
    return m_##h(c, (const sg##_args_t *)c->args);                            \
  }
#define WRAP_NONE(...)
METHOD_TABLE(WRAP_T, WRAP_NONE, WRAP_NONE)

#define ROW_T(nm, h, sg, fl, ver)                                             \
  {.name = nm, .fn = h##_typed, .flags = fl, .since = ver,                    \
   .sig = SIG_ROWS(sg), .nsig = SIG_COUNT(sg)},
#define ROW_U(nm, h, sg, fl, ver)                                             \
  {.name = nm, .fn = m_##h, .flags = fl, .since = ver,                        \
   .sig = SIG_ROWS(sg), .nsig = SIG_COUNT(sg)},
#define ROW_N(nm, h, fl, ver)                                                 \
  {.name = nm, .fn = m_##h, .flags = fl, .since = ver},

static method_t methods[] = {METHOD_TABLE(ROW_T, ROW_U, ROW_N)};
/* clang-format on */

#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* The methods by a hash of their names (open addressing, linear probing):
 * a lookup hashes the name once and compares one or two rows, where the
 * binary search of the sorted table made six string comparisons (about
 * 400 instructions of every request, callgrind, 2026-12-06). */
#define FIND_SLOTS 256 /* a power of two, over 3 times NMETHODS */
static uint8_t find_slot[FIND_SLOTS]; /* row + 1; 0: empty */
static uint8_t name_len[NMETHODS];    /* each row's name length */

static uint32_t name_hash(const char *name, size_t len)
{
  uint32_t h = 2166136261u; /* FNV-1a */

  for (size_t i = 0; i < len; i++)
    h = (h ^ (uint8_t)name[i]) * 16777619u;
  return h;
}

/* Derive each row's param count bounds from its signature: at least up to
 * the last required param (an optional one before it is given as nil), at
 * most all of them, or P_REST's count more. */
static void table_init(void)
{
  _Static_assert(NMETHODS * 3 < FIND_SLOTS, "find_slot has room");
  for (size_t r = 0; r < NMETHODS; r++) {
    method_t *m = &methods[r];
    unsigned min = 0, max = m->nsig;
    size_t len = strlen(m->name);
    uint32_t h = name_hash(m->name, len) & (FIND_SLOTS - 1);

    while (find_slot[h] != 0)
      h = (h + 1) & (FIND_SLOTS - 1);
    find_slot[h] = (uint8_t)(r + 1);
    name_len[r] = (uint8_t)len;

    if (proto_ring_method(m->name))
      m->flags |= M_RING;
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

const method_t *dispatch_find(const char *name, size_t len)
{
  uint32_t h;

  pthread_once(&table_once, table_init);
  /* An empty name (msgpack-c gives it a NULL pointer) matches nothing;
   * nor does one with a NUL (no row's length and bytes hold one). */
  if (len == 0 || name == NULL || len > UINT8_MAX)
    return NULL;
  for (h = name_hash(name, len) & (FIND_SLOTS - 1); find_slot[h] != 0;
       h = (h + 1) & (FIND_SLOTS - 1)) {
    const method_t *m = &methods[find_slot[h] - 1];

    if (name_len[find_slot[h] - 1] == len && memcmp(m->name, name, len) == 0)
      return m;
  }
  return NULL;
}

/* ---------------------------------------------------------- param checks */

const char *dispatch_kind_name(param_kind_t kind)
{
  return proto_param_kind_name(kind);
}

/* Bind device @p id (the session's current device when @p given is 0) for
 * param @p a: it exists, the session may use it, it is not lost. */
static int bind_device(call_t *c, int given, uint64_t id, arg_t *a)
{
  if (!given)
    id = (uint64_t)c->s->device;
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
    return meth_check_alive(c, "device", a->dev, 0);
  return 0;
}

/* Decode and check param @p i (@p o, NULL when absent) by row @p p into
 * @p a (proto/params.h: everything that needs no session), then bind what
 * does: the handle's object, the device.
 * @return 0, or the code the call was answered with. */
static int param_get(call_t *c, unsigned i, const param_t *p,
                     const msgpack_object *o, arg_t *a)
{
  param_fault_t f;
  int rc;

  if (proto_param_decode(p, i, o, c->zone, a, &f) != 0)
    return call_fail(c, f.code, "%s", f.msg);
  switch (p->kind) {
  case P_HANDLE:
    if (!a->present)
      return 0;
    rc = handles_get(&c->s->handles, a->u, (handle_type_t)p->htype, &a->obj);
    return rc != 0
               ? call_fail_handle(c, p->name, a->u, (handle_type_t)p->htype, rc)
               : 0;
  case P_DEVICE:
    return bind_device(c, a->present, a->u, a);
  case P_TARGET:
    /* An architecture names no device. */
    return a->present && a->s != NULL ? 0 : bind_device(c, a->present, a->u, a);
  default:
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

static void request_run(session_t *s, msgpack_zone *zone, int via_ring,
                        int on_cq, uint32_t msgid, const char *method,
                        uint32_t method_len, const msgpack_object *params)
{
  call_t c = {.s = s,
              .msgid = msgid,
              .params = params,
              .zone = zone,
              .via_ring = via_ring,
              .on_cq = on_cq};
  const method_t *m = dispatch_find(method, method_len);
  arg_t args[CALL_MAX_ARGS];
  int rc;

  s->inflight++;
  c.nparams = params->via.array.size;
  c.m = m;
  c.name = m != NULL ? m->name : NULL;
  if (s->d->stopping) {
    call_fail(&c, HIPD_ESHUTDOWN, "the daemon is shutting down");
  } else if (m == NULL) {
    call_fail(&c, HIPD_ENOMETHOD, "unknown method '%.*s'",
              (int)(method_len > 64 ? 64 : method_len), method);
  } else if (via_ring && !(m->flags & M_RING)) {
    call_fail(&c, HIPD_EINVAL,
              "cannot come from a ring (it takes the operations on streams "
              "and their waits; send it on the socket)");
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

void dispatch_request(session_t *s, uint32_t msgid, const char *method,
                      uint32_t method_len, const msgpack_object *params)
{
  request_run(s, &s->zone, 0, 0, msgid, method, method_len, params);
}

void dispatch_ring_request(session_t *s, msgpack_zone *zone, int on_cq,
                           uint32_t msgid, const char *method,
                           uint32_t method_len, const msgpack_object *params)
{
  request_run(s, zone, 1, on_cq, msgid, method, method_len, params);
}
