/* daemon/dispatch.c: the method table and the request life cycle. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "log.h"
#include "methods/methods.h"

/* The method table, sorted by name (dispatch_find searches it). Adding a
 * method is one row here and one handler in methods/. The protocol
 * document proto/PROTOCOL.md lists the same methods. */
static const method_t methods[] = {
    /* name                handler               min max flags  since */
    {"backend.info", m_backend_info, 0, 0, 0, 1},
    {"cache.clear", m_cache_clear, 0, 0, 0, 1},
    {"cache.stats", m_cache_stats, 0, 0, 0, 1},
    {"daemon.info", m_daemon_info, 0, 0, 0, 1},
    {"device.count", m_device_count, 0, 0, 0, 1},
    {"device.current", m_device_current, 0, 0, 0, 1},
    {"device.get", m_device_get, 0, 1, 0, 1},
    {"device.list", m_device_list, 0, 0, 0, 1},
    {"device.set_current", m_device_set_current, 1, 1, 0, 1},
    {"device.synchronize", m_device_synchronize, 0, 1, 0, 1},
    {"event.create", m_event_create, 0, 1, 0, 1},
    {"event.destroy", m_event_destroy, 1, 1, 0, 1},
    {"event.elapsed", m_event_elapsed, 2, 2, 0, 1},
    {"event.query", m_event_query, 1, 1, 0, 1},
    {"event.record", m_event_record, 1, 2, 0, 1},
    {"event.synchronize", m_event_synchronize, 1, 1, 0, 1},
    {"execute_direct", m_execute_direct, 0, 255, 0, 1},
    {"hello", m_hello, 0, 2, M_PREHELLO, 1},
    {"intrinsics.find", m_intrinsics_find, 1, 2, 0, 1},
    {"intrinsics.list", m_intrinsics_list, 0, 1, 0, 1},
    {"intrinsics.register", m_intrinsics_register, 3, 4, 0, 1},
    {"kernel.compile", m_kernel_compile, 2, 4, 0, 1},
    {"kernel.compile_cached", m_kernel_compile_cached, 2, 4, 0, 1},
    {"kernel.compile_ir", m_kernel_compile_ir, 1, 5, 0, 1},
    {"kernel.destroy", m_kernel_destroy, 1, 1, 0, 1},
    {"kernel.generate_source", m_kernel_generate_source, 1, 4, 0, 1},
    {"kernel.info", m_kernel_info, 1, 1, 0, 1},
    {"kernel.launch", m_kernel_launch, 6, 7, 0, 1},
    {"mem.alloc", m_mem_alloc, 2, 3, 0, 1},
    {"mem.alloc_custom", m_mem_alloc_custom, 2, 3, 0, 1},
    {"mem.alloc_zero_copy", m_mem_alloc_zero_copy, 1, 2, 0, 1},
    {"mem.copy", m_mem_copy, 5, 5, 0, 1},
    {"mem.copy_async", m_mem_copy_async, 6, 6, 0, 1},
    {"mem.free", m_mem_free, 1, 1, 0, 1},
    {"mem.info", m_mem_info, 1, 1, 0, 1},
    {"mem.memset", m_mem_memset, 4, 4, 0, 1},
    {"mem.memset_async", m_mem_memset_async, 5, 5, 0, 1},
    {"mem.read", m_mem_read, 3, 3, 0, 1},
    {"mem.read_async", m_mem_read_async, 4, 4, 0, 1},
    {"mem.read_shm", m_mem_read_shm, 5, 5, 0, 1},
    {"mem.read_shm_async", m_mem_read_shm_async, 6, 6, 0, 1},
    {"mem.size", m_mem_size, 1, 1, 0, 1},
    {"mem.write", m_mem_write, 3, 3, 0, 1},
    {"mem.write_async", m_mem_write_async, 4, 4, 0, 1},
    {"mem.write_shm", m_mem_write_shm, 5, 5, 0, 1},
    {"mem.write_shm_async", m_mem_write_shm_async, 6, 6, 0, 1},
    {"ping", m_ping, 0, 1, M_PREHELLO, 1},
    {"profile.disable", m_profile_disable, 0, 0, 0, 1},
    {"profile.enable", m_profile_enable, 0, 0, 0, 1},
    {"run_source", m_run_source, 7, 7, 0, 1},
    {"session.info", m_session_info, 0, 0, 0, 1},
    {"session.profile", m_session_profile, 0, 1, 0, 1},
    {"shm.create", m_shm_create, 1, 1, 0, 1},
    {"shm.free", m_shm_free, 1, 1, 0, 1},
    {"stream.create", m_stream_create, 0, 1, 0, 1},
    {"stream.default", m_stream_default, 0, 1, 0, 1},
    {"stream.destroy", m_stream_destroy, 1, 1, 0, 1},
    {"stream.query", m_stream_query, 1, 1, 0, 1},
    {"stream.synchronize", m_stream_synchronize, 1, 1, 0, 1},
    {"supported_source_langs", m_supported_source_langs, 0, 1, 0, 1},
};

const method_t *dispatch_methods(unsigned *count)
{
  *count = sizeof(methods) / sizeof(methods[0]);
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
  size_t lo = 0, hi = sizeof(methods) / sizeof(methods[0]);

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

/* ---------------------------------------------------------------- replies */

#define REPLY_INITIAL 128

static int call_begin(call_t *c)
{
  if (c->answered) {
    /* A handler bug: keep the first answer. */
    log_error(c->s->id, "%s: answered twice", c->m ? c->m->name : "?");
    return -1;
  }
  c->answered = 1;
  msgpack_sbuffer_init(&c->out);
  /* Most replies take a few dozen bytes: start small rather than with the
   * sbuffer's 8 KiB (it doubles from here as needed). */
  if ((c->out.data = malloc(REPLY_INITIAL)) != NULL)
    c->out.alloc = REPLY_INITIAL;
  msgpack_packer_init(&c->pk, &c->out, msgpack_sbuffer_write);
  return 0;
}

msgpack_packer *call_result(call_t *c)
{
  static msgpack_sbuffer scratch; /* loop thread only */
  static msgpack_packer scratch_pk;

  if (call_begin(c) != 0) {
    /* Keep the first answer; pack this one where it is thrown away. */
    msgpack_sbuffer_clear(&scratch);
    msgpack_packer_init(&scratch_pk, &scratch, msgpack_sbuffer_write);
    return &scratch_pk;
  }
  proto_pack_response(&c->pk, c->msgid);
  return &c->pk;
}

void call_result_bin(call_t *c, void *data, size_t len)
{
  msgpack_packer *pk = call_result(c);

  msgpack_pack_bin(pk, len);
  if (pk != &c->pk) {
    free(data);
    return;
  }
  c->tail = data;
  c->tail_len = len;
}

static int call_failv(call_t *c, int code, const char *fmt, va_list ap)
{
  char text[16384]; /* room for a compiler log */
  int n = 0;

  if (call_begin(c) != 0)
    return code;
  if (c->m != NULL)
    n = snprintf(text, sizeof(text), "%s: ", c->m->name);
  vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
  proto_pack_error_response(&c->pk, c->msgid, code, "%s", text);
  log_debug(c->s->id, "error %s: %s", hipd_err_name(code), text);
  return code;
}

int call_fail(call_t *c, int code, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  call_failv(c, code, fmt, ap);
  va_end(ap);
  return code;
}

/* Hand the packed answer to the session. */
static void call_send(call_t *c)
{
  if (!c->answered)
    call_fail(c, HIPD_EINTERNAL, "handler returned without an answer");
  size_t len = c->out.size;
  char *data = msgpack_sbuffer_release(&c->out);
  session_send(c->s, data, len, c->tail, c->tail_len);
  c->tail = NULL;
  session_request_done(c->s);
}

call_t *call_defer(call_t *c)
{
  call_t *h = malloc(sizeof(*h));

  if (h == NULL) {
    call_fail(c, HIPD_ENOMEM, "out of memory");
    return NULL;
  }
  *h = *c;
  h->params = NULL;
  h->nparams = 0;
  h->deferred = 0;
  c->deferred = 1;
  session_incref(h->s);
  return h;
}

void call_finish(call_t *c)
{
  session_t *s = c->s;

  call_send(c);
  free(c);
  session_decref(s);
}

/* ------------------------------------------------------------- dispatch */

void dispatch_request(session_t *s, uint32_t msgid, const char *method,
                      uint32_t method_len, const msgpack_object *params)
{
  call_t c = {.s = s, .msgid = msgid, .params = params};
  const method_t *m = dispatch_find(method, method_len);

  s->inflight++;
  c.nparams = params->via.array.size;
  c.m = m;
  if (s->d->stopping) {
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
    log_debug(s->id, "-> %s #%u", m->name, msgid);
    m->fn(&c);
    if (c.deferred) {
      /* The heap copy answers later; this one was never answered. */
      if (c.answered)
        msgpack_sbuffer_destroy(&c.out);
      return;
    }
  }
  call_send(&c);
}

/* ---------------------------------------------------------- param readers */

static const msgpack_object *arg(call_t *c, unsigned i)
{
  return i < c->nparams ? &c->params->via.array.ptr[i] : NULL;
}

int call_arg_present(call_t *c, unsigned i)
{
  const msgpack_object *o = arg(c, i);

  return o != NULL && o->type != MSGPACK_OBJECT_NIL;
}

static int bad_type(call_t *c, unsigned i, const char *what,
                    const char *expected)
{
  const msgpack_object *o = arg(c, i);

  return call_fail(c, HIPD_EPARAMS, "param %u (%s) must be %s, not %s", i, what,
                   expected, o ? proto_obj_type_name(o) : "missing");
}

int call_arg_required(call_t *c, unsigned i, const char *what,
                      const char *expected)
{
  return call_arg_present(c, i) ? 0 : bad_type(c, i, what, expected);
}

int call_arg_uint(call_t *c, unsigned i, const char *what, uint64_t max,
                  uint64_t *out)
{
  const msgpack_object *o = arg(c, i);
  int rc;

  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  rc = proto_obj_uint(o, max, out);
  if (rc == HIPD_ERANGE)
    return call_fail(c, HIPD_ERANGE, "param %u (%s) must be between 0 and %llu",
                     i, what, (unsigned long long)max);
  if (rc != 0)
    return bad_type(c, i, what, "an unsigned integer");
  return 0;
}

int call_arg_int(call_t *c, unsigned i, const char *what, int64_t min,
                 int64_t max, int64_t *out)
{
  const msgpack_object *o = arg(c, i);
  int rc;

  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  rc = proto_obj_int(o, min, max, out);
  if (rc == HIPD_ERANGE)
    return call_fail(c, HIPD_ERANGE,
                     "param %u (%s) must be between %lld and %lld", i, what,
                     (long long)min, (long long)max);
  if (rc != 0)
    return bad_type(c, i, what, "an integer");
  return 0;
}

int call_arg_double(call_t *c, unsigned i, const char *what, double *out)
{
  const msgpack_object *o = arg(c, i);

  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  if (proto_obj_double(o, out) != 0)
    return bad_type(c, i, what, "a number");
  return 0;
}

int call_arg_bool(call_t *c, unsigned i, const char *what, int *out)
{
  const msgpack_object *o = arg(c, i);

  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  if (o->type != MSGPACK_OBJECT_BOOLEAN)
    return bad_type(c, i, what, "a boolean");
  *out = o->via.boolean;
  return 0;
}

int call_arg_bytes(call_t *c, unsigned i, const char *what, const char **ptr,
                   size_t *len)
{
  const msgpack_object *o = arg(c, i);

  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  if (proto_obj_bytes(o, ptr, len) != 0)
    return bad_type(c, i, what, "bin or str");
  return 0;
}

int call_arg_str(call_t *c, unsigned i, const char *what, char *buf,
                 size_t size)
{
  const char *p;
  size_t n;
  const msgpack_object *o = arg(c, i);

  if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
    return 0;
  if (o->type != MSGPACK_OBJECT_STR)
    return bad_type(c, i, what, "a string");
  p = o->via.str.ptr;
  n = o->via.str.size;
  if (n >= size)
    return call_fail(c, HIPD_EPARAMS,
                     "param %u (%s) is %zu bytes long, more than %zu", i, what,
                     n, size - 1);
  if (memchr(p, '\0', n) != NULL)
    return call_fail(c, HIPD_EPARAMS, "param %u (%s) contains a NUL byte", i,
                     what);
  memcpy(buf, p, n);
  buf[n] = '\0';
  return 0;
}

int call_fail_handle(call_t *c, const char *what, uint64_t h,
                     handle_type_t type, int rc)
{
  unsigned long long v = (unsigned long long)h;
  const char *tn = handles_type_name(type);

  switch (rc) {
  case HIPD_EFOREIGN:
    return call_fail(c, rc, "%s 0x%llx belongs to another session", what, v);
  case HIPD_ESTALE:
    return call_fail(c, rc, "%s 0x%llx was already freed", what, v);
  case HIPD_EHANDLETYPE:
    return call_fail(c, rc, "%s 0x%llx is not a %s handle", what, v, tn);
  default:
    return call_fail(c, HIPD_EHANDLE, "%s 0x%llx is not a valid %s handle",
                     what, v, tn);
  }
}

int call_arg_handle(call_t *c, unsigned i, const char *what, handle_type_t type,
                    uint64_t *h, void **obj)
{
  const msgpack_object *o = arg(c, i);
  int rc;

  if (o == NULL || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
    return bad_type(c, i, what, "a handle (unsigned integer)");
  *h = o->via.u64;
  rc = handles_get(&c->s->handles, *h, type, obj);
  if (rc != 0)
    return call_fail_handle(c, what, *h, type, rc);
  return 0;
}
