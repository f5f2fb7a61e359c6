/* SPDX-License-Identifier: MIT */
/* bindings/ocaml/src/hipd_ml_stubs.c: the OCaml binding's C side, over
 * libhipd (client/hipd.h). Every stub is hipd_ml_*.
 *
 * Lifetimes. A connection is a hipd_ml_conn_t, reference-counted: the OCaml
 * connection value holds one reference, and so does every handle (buffer,
 * stream, event, kernel) and every shared Bigarray made on it. The
 * connection is closed by Hipd.close, or when the last reference goes.
 * Finalisers never talk to the daemon (they run inside the GC, with the
 * runtime lock held): a handle collected while its connection is open is
 * queued on the connection, and the next call on that connection frees it
 * before doing its own work. Whatever is still queued when the connection
 * closes is released by the daemon with the session.
 *
 * Threads. Every call into libhipd that may wait runs outside the OCaml
 * runtime lock (caml_enter_blocking_section), after the call's inputs are
 * copied out of the OCaml heap: strings are copied, Bigarray data does not
 * move and the Bigarray stays rooted by CAMLparam. A connection counts its
 * calls in flight; Hipd.close waits for them before closing, so no call
 * ever uses a closed libhipd connection.
 *
 * Errors. A failed call raises Hipd.Error (code, message) with libhipd's
 * code and the daemon's message (hipd_last_error), read in the thread that
 * made the call. Bad input found here (a negative size, a dimension out of
 * range) raises the same exception with the code hipd would give.
 */
#define CAML_INTERNALS 1
#define _GNU_SOURCE 1
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <caml/alloc.h>
#include <caml/bigarray.h>
#include <caml/callback.h>
#include <caml/custom.h>
#include <caml/fail.h>
#include <caml/memory.h>
#include <caml/mlvalues.h>
#include <caml/signals.h>

#include "hipd.h"

/* ------------------------------------------------------------ connection */

enum { ML_BUFFER, ML_STREAM, ML_EVENT, ML_KERNEL, ML_SHM };

typedef struct {
  int type;        /* ML_* */
  uint64_t id;     /* the handle, for the first four */
  hipd_shm_t *shm; /* ML_SHM */
} ml_pending_t;

typedef struct hipd_ml_conn {
  pthread_mutex_t mu;    /* guards everything below */
  pthread_cond_t idle;   /* signalled when busy drops to 0 */
  hipd_conn_t *c;        /* NULL once closed */
  int closing;           /* Hipd.close has begun: no new calls */
  int refs;              /* OCaml values that hold this connection */
  int busy;              /* calls in flight */
  ml_pending_t *pending; /* objects collected while open, to release */
  size_t npending, cappending;
} hipd_ml_conn_t;

static void ml_conn_ref(hipd_ml_conn_t *m)
{
  pthread_mutex_lock(&m->mu);
  m->refs++;
  pthread_mutex_unlock(&m->mu);
}

/* Unmap the shared buffers of @p p (the connection is closed: the daemon
 * released them with the session) and free the list. */
static void pending_drop(ml_pending_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i].type == ML_SHM)
      hipd_shm_free(NULL, p[i].shm);
  free(p);
}

/* Drop one reference; the last one closes the connection. May run in a
 * finaliser: hipd_close() does not wait for the daemon. */
static void ml_conn_unref(hipd_ml_conn_t *m)
{
  int last;

  pthread_mutex_lock(&m->mu);
  last = --m->refs == 0;
  pthread_mutex_unlock(&m->mu);
  if (!last)
    return;
  if (m->c != NULL)
    hipd_close(m->c);
  pending_drop(m->pending, m->npending);
  pthread_cond_destroy(&m->idle);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* Queue an object collected by the GC. With the runtime lock held; no
 * OCaml allocation. A closed connection has nothing left to free but the
 * shared buffer's mapping here. */
static void ml_conn_defer(hipd_ml_conn_t *m, int type, uint64_t id,
                          hipd_shm_t *shm)
{
  int done = 0;

  pthread_mutex_lock(&m->mu);
  if (m->c != NULL && !m->closing) {
    if (m->npending == m->cappending) {
      size_t cap = m->cappending ? 2 * m->cappending : 16;
      ml_pending_t *p = realloc(m->pending, cap * sizeof(*p));
      if (p != NULL) {
        m->pending = p;
        m->cappending = cap;
      }
    }
    if (m->npending < m->cappending) {
      m->pending[m->npending].type = type;
      m->pending[m->npending].id = id;
      m->pending[m->npending].shm = shm;
      m->npending++;
      done = 1;
    }
  }
  pthread_mutex_unlock(&m->mu);
  /* Closed (or out of memory for the queue): the daemon frees the object
   * with the session; a shared buffer is still unmapped here. */
  if (!done && type == ML_SHM)
    hipd_shm_free(NULL, shm);
}

/* Release what the GC queued. Outside the runtime lock, during a call
 * (m->busy > 0, so the connection stays open). Errors are ignored: the
 * object may have been freed by the daemon already. */
static void ml_conn_flush(hipd_ml_conn_t *m, hipd_conn_t *c)
{
  ml_pending_t *p;
  size_t n;

  pthread_mutex_lock(&m->mu);
  p = m->pending;
  n = m->npending;
  if (n > 0) {
    m->pending = NULL;
    m->npending = m->cappending = 0;
  }
  pthread_mutex_unlock(&m->mu);
  if (n == 0)
    return;
  for (size_t i = 0; i < n; i++) {
    switch (p[i].type) {
    case ML_BUFFER:
      hipd_mem_free(c, hipd_buffer_from_id(p[i].id));
      break;
    case ML_STREAM:
      hipd_stream_destroy(c, hipd_stream_from_id(p[i].id));
      break;
    case ML_EVENT:
      hipd_event_destroy(c, hipd_event_from_id(p[i].id));
      break;
    case ML_KERNEL:
      hipd_kernel_destroy(c, hipd_kernel_from_id(p[i].id));
      break;
    case ML_SHM:
      hipd_shm_free(c, p[i].shm);
      break;
    }
  }
  free(p);
}

/* The OCaml connection value: a custom block holding one reference. */
#define Mlconn_val(v) (*(hipd_ml_conn_t **)Data_custom_val(v))

static void conn_finalize(value v)
{
  hipd_ml_conn_t *m = Mlconn_val(v);

  if (m != NULL)
    ml_conn_unref(m);
}

static int conn_compare(value a, value b)
{
  uintptr_t x = (uintptr_t)Mlconn_val(a), y = (uintptr_t)Mlconn_val(b);

  return x < y ? -1 : x > y;
}

static struct custom_operations conn_ops = {"hipd.conn",
                                            conn_finalize,
                                            conn_compare,
                                            custom_hash_default,
                                            custom_serialize_default,
                                            custom_deserialize_default,
                                            custom_compare_ext_default,
                                            custom_fixed_length_default};

static value conn_wrap(hipd_ml_conn_t *m)
{
  value v = caml_alloc_custom(&conn_ops, sizeof(hipd_ml_conn_t *), 0, 1);

  Mlconn_val(v) = m;
  return v;
}

/* ---------------------------------------------------------------- errors */

/* Raise Hipd.Error (code, msg). The code is the variant constructor of
 * Hipd.code: constant constructors in the order of HIPD_ERRNO_MAP (-1
 * first), and Unknown_code of int for any other number. */
static void raise_error_owned(int rc, char *owned);

static void raise_error(int rc, const char *msg)
{
  raise_error_owned(rc, strdup(msg ? msg : ""));
}

/* The same with a malloc'd message, freed here (NULL: the code's text). */
static void raise_error_owned(int rc, char *owned)
{
  CAMLparam0();
  CAMLlocal3(code, vmsg, exn);
  const value *id = caml_named_value("hipd.error");
  const char *msg = owned != NULL ? owned : hipd_strerror(rc);

  if (rc < 0 && rc > HIPD_ERRNO_MAX_) {
    code = Val_int(-rc - 1);
  } else {
    code = caml_alloc_small(1, 0);
    Field(code, 0) = Val_int(rc);
  }
  vmsg = caml_copy_string(msg);
  free(owned);
  if (id == NULL)
    caml_failwith(String_val(vmsg));
  exn = caml_alloc_small(3, 0);
  Field(exn, 0) = *id;
  Field(exn, 1) = code;
  Field(exn, 2) = vmsg;
  caml_raise(exn);
  CAMLnoreturn;
}

static void raise_errorf(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void raise_errorf(int rc, const char *fmt, ...)
{
  char buf[512];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  raise_error(rc, buf);
  abort(); /* not reached */
}

CAMLprim value hipd_ml_err_name(value vcode)
{
  return caml_copy_string(hipd_err_name(Int_val(vcode)));
}

CAMLprim value hipd_ml_strerror(value vcode)
{
  return caml_copy_string(hipd_strerror(Int_val(vcode)));
}

CAMLprim value hipd_ml_version(value unit)
{
  (void)unit;
  return caml_copy_string(hipd_version());
}

CAMLprim value hipd_ml_protocol_version(value unit)
{
  (void)unit;
  return Val_int(hipd_protocol_version());
}

/* ----------------------------------------------------------------- calls */

/* One call on a connection: ml_begin() takes it (raising EDISCONNECTED on
 * a closed one), leaves the runtime and releases what the GC queued;
 * ml_end() copies the error message, takes the runtime back, gives the
 * connection back and raises on failure. Between the two, no OCaml value
 * may be touched. */
typedef struct {
  hipd_ml_conn_t *m;
  hipd_conn_t *c;
  int rc;
  char *msg; /* malloc'd copy of hipd_last_error on failure */
} ml_call_t;

static int ml_begin(ml_call_t *k, value vconn)
{
  hipd_ml_conn_t *m = Mlconn_val(vconn);

  k->m = m;
  k->rc = 0;
  k->msg = NULL;
  k->c = NULL;
  pthread_mutex_lock(&m->mu);
  if (m->c == NULL || m->closing) {
    pthread_mutex_unlock(&m->mu);
    k->rc = HIPD_EDISCONNECTED;
    return 0;
  }
  m->busy++;
  k->c = m->c;
  pthread_mutex_unlock(&m->mu);
  caml_enter_blocking_section();
  ml_conn_flush(m, k->c);
  return 1;
}

static void ml_end(ml_call_t *k)
{
  hipd_ml_conn_t *m = k->m;
  const char *e;

  if (k->c == NULL)
    raise_error(k->rc, "the connection was closed (Hipd.close)");
  if (k->rc < 0) {
    e = hipd_last_error(k->c);
    k->msg = strdup(e != NULL && *e != '\0' ? e : hipd_strerror(k->rc));
  }
  pthread_mutex_lock(&m->mu);
  if (--m->busy == 0)
    pthread_cond_broadcast(&m->idle);
  pthread_mutex_unlock(&m->mu);
  caml_leave_blocking_section();
  if (k->rc < 0)
    raise_error_owned(k->rc, k->msg);
}

static char *dup_string(value v)
{
  char *s = strdup(String_val(v));

  if (s == NULL)
    caml_raise_out_of_memory();
  return s;
}

/* An option string: NULL for None. */
static char *dup_opt_string(value v)
{
  return Is_block(v) ? dup_string(Field(v, 0)) : NULL;
}

/* A NULL-ended copy of an OCaml string list (NULL for the empty list when
 * @p empty_null). */
static char **dup_string_list(value l, int empty_null)
{
  size_t n = 0, i = 0;
  char **a;

  for (value p = l; Is_block(p); p = Field(p, 1))
    n++;
  if (n == 0 && empty_null)
    return NULL;
  if ((a = calloc(n + 1, sizeof(*a))) == NULL)
    caml_raise_out_of_memory();
  for (value p = l; Is_block(p); p = Field(p, 1)) {
    if ((a[i++] = strdup(String_val(Field(p, 0)))) == NULL) {
      for (size_t j = 0; j < i; j++)
        free(a[j]);
      free(a);
      caml_raise_out_of_memory();
    }
  }
  return a;
}

static void free_string_list(char **a)
{
  if (a == NULL)
    return;
  for (size_t i = 0; a[i] != NULL; i++)
    free(a[i]);
  free(a);
}

/* A device id: None is the current device. */
static int dev_of(value vopt)
{
  intnat d;

  if (!Is_block(vopt))
    return HIPD_DEVICE_CURRENT;
  d = Long_val(Field(vopt, 0));
  if (d < 0 || d > (intnat)INT_MAX)
    raise_errorf(HIPD_ENODEV, "device %ld: a device id is 0 or more", (long)d);
  return (int)d;
}

static uint64_t u64_of(value v, const char *what)
{
  intnat n = Long_val(v);

  if (n < 0)
    raise_errorf(HIPD_EINVAL, "%s: %ld is negative", what, (long)n);
  return (uint64_t)n;
}

static uint32_t u32_of(value v, const char *what)
{
  intnat n = Long_val(v);

  if (n < 0 || (uintnat)n > UINT32_MAX)
    raise_errorf(HIPD_EINVAL, "%s: %ld out of range (0 to 4294967295)", what,
                 (long)n);
  return (uint32_t)n;
}

/* An (x, y, z) tuple of ints. */
static void dims_of(value v, uint32_t out[3], const char *method,
                    const char *what)
{
  static const char axis[] = "xyz";
  char name[96];

  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof(name), "%s: %s.%c", method, what, axis[i]);
    out[i] = u32_of(Field(v, i), name);
  }
}

CAMLprim value hipd_ml_connect(value vpath, value vname)
{
  CAMLparam2(vpath, vname);
  char *path = dup_opt_string(vpath), *name = dup_opt_string(vname);
  hipd_conn_t *c = NULL;
  hipd_ml_conn_t *m;
  char *msg = NULL;
  int rc;

  caml_enter_blocking_section();
  rc = name != NULL ? hipd_connect2(path, name, &c) : hipd_connect(path, &c);
  if (rc < 0)
    msg = strdup(hipd_last_error(NULL));
  caml_leave_blocking_section();
  free(path);
  free(name);
  if (rc < 0) {
    CAMLlocal1(s);
    s = caml_copy_string(msg ? msg : hipd_strerror(rc));
    free(msg);
    raise_error(rc, String_val(s));
  }
  if ((m = calloc(1, sizeof(*m))) == NULL) {
    hipd_close(c);
    caml_raise_out_of_memory();
  }
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->idle, NULL);
  m->c = c;
  m->refs = 1;
  CAMLreturn(conn_wrap(m));
}

/* Close: no new calls, wait for those in flight, close. Idempotent. */
CAMLprim value hipd_ml_close(value vconn)
{
  CAMLparam1(vconn);
  hipd_ml_conn_t *m = Mlconn_val(vconn);
  hipd_conn_t *c;
  ml_pending_t *p;
  size_t n;

  pthread_mutex_lock(&m->mu);
  if (m->c == NULL || m->closing) {
    pthread_mutex_unlock(&m->mu);
    CAMLreturn(Val_unit);
  }
  m->closing = 1;
  pthread_mutex_unlock(&m->mu);
  caml_enter_blocking_section();
  pthread_mutex_lock(&m->mu);
  while (m->busy > 0)
    pthread_cond_wait(&m->idle, &m->mu);
  c = m->c;
  m->c = NULL;
  p = m->pending;
  n = m->npending;
  m->pending = NULL;
  m->npending = m->cappending = 0;
  pthread_mutex_unlock(&m->mu);
  hipd_close(c);
  pending_drop(p, n);
  caml_leave_blocking_section();
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_is_closed(value vconn)
{
  hipd_ml_conn_t *m = Mlconn_val(vconn);
  int closed;

  pthread_mutex_lock(&m->mu);
  closed = m->c == NULL || m->closing;
  pthread_mutex_unlock(&m->mu);
  return Val_bool(closed);
}

CAMLprim value hipd_ml_set_timeout(value vconn, value vms)
{
  hipd_ml_conn_t *m = Mlconn_val(vconn);

  pthread_mutex_lock(&m->mu);
  if (m->c != NULL && !m->closing)
    hipd_set_timeout(m->c, Int_val(vms));
  pthread_mutex_unlock(&m->mu);
  return Val_unit;
}

/* ---------------------------------------------------------------- handles */

typedef struct {
  hipd_ml_conn_t *m;
  uint64_t id;
  int type;  /* ML_BUFFER ... ML_KERNEL */
  int owned; /* released when collected: 0 once freed explicitly, and for
                the default streams, which are the session's */
} ml_handle_t;

#define Handle_val(v) ((ml_handle_t *)Data_custom_val(v))

static void handle_finalize(value v)
{
  ml_handle_t *h = Handle_val(v);

  if (h->m == NULL)
    return;
  if (h->owned)
    ml_conn_defer(h->m, h->type, h->id, NULL);
  ml_conn_unref(h->m);
  h->m = NULL;
}

static int handle_compare(value a, value b)
{
  ml_handle_t *x = Handle_val(a), *y = Handle_val(b);

  if (x->type != y->type)
    return x->type < y->type ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static intnat handle_hash(value v)
{
  return (intnat)(Handle_val(v)->id ^ (Handle_val(v)->id >> 32));
}

static struct custom_operations handle_ops = {"hipd.handle",
                                              handle_finalize,
                                              handle_compare,
                                              handle_hash,
                                              custom_serialize_default,
                                              custom_deserialize_default,
                                              custom_compare_ext_default,
                                              custom_fixed_length_default};

static value handle_wrap(hipd_ml_conn_t *m, int type, uint64_t id, int owned)
{
  value v = caml_alloc_custom(&handle_ops, sizeof(ml_handle_t), 0, 1);
  ml_handle_t *h = Handle_val(v);

  h->m = m;
  h->id = id;
  h->type = type;
  h->owned = owned;
  ml_conn_ref(m);
  return v;
}

static uint64_t handle_id(value v, int type)
{
  ml_handle_t *h = Handle_val(v);

  if (h->type != type)
    raise_error(HIPD_EHANDLETYPE, "handle of the wrong type");
  return h->id;
}

#define BUF(v) hipd_buffer_from_id(handle_id((v), ML_BUFFER))
#define STREAM(v) hipd_stream_from_id(handle_id((v), ML_STREAM))
#define EVENT(v) hipd_event_from_id(handle_id((v), ML_EVENT))
#define KERNEL(v) hipd_kernel_from_id(handle_id((v), ML_KERNEL))

/* A stream option: None is HIPD_STREAM_NULL. */
static hipd_stream_t stream_opt(value v)
{
  return Is_block(v) ? STREAM(Field(v, 0)) : HIPD_STREAM_NULL;
}

CAMLprim value hipd_ml_handle_id(value vh)
{
  return caml_copy_int64((int64_t)Handle_val(vh)->id);
}

/* The connection a handle was made on, as a new OCaml value. */
CAMLprim value hipd_ml_handle_conn(value vh)
{
  ml_handle_t *h = Handle_val(vh);

  ml_conn_ref(h->m);
  return conn_wrap(h->m);
}

/* Free a handle's object now. The handle keeps its id, so that a later
 * use is the daemon's ESTALE, and is no longer released when collected. */
CAMLprim value hipd_ml_handle_free(value vconn, value vh)
{
  CAMLparam2(vconn, vh);
  ml_handle_t *h = Handle_val(vh);
  uint64_t id = h->id;
  int type = h->type;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    switch (type) {
    case ML_BUFFER:
      k.rc = hipd_mem_free(k.c, hipd_buffer_from_id(id));
      break;
    case ML_STREAM:
      k.rc = hipd_stream_destroy(k.c, hipd_stream_from_id(id));
      break;
    case ML_EVENT:
      k.rc = hipd_event_destroy(k.c, hipd_event_from_id(id));
      break;
    default:
      k.rc = hipd_kernel_destroy(k.c, hipd_kernel_from_id(id));
      break;
    }
  ml_end(&k);
  /* Freed by this call on its own connection: nothing left to release. */
  if (Mlconn_val(vconn) == h->m)
    h->owned = 0;
  CAMLreturn(Val_unit);
}

/* ------------------------------------------------------------ info records */

#define Info_val(v) (*(hipd_info_t **)Data_custom_val(v))

static void info_finalize(value v)
{
  hipd_info_free(Info_val(v));
  Info_val(v) = NULL;
}

static struct custom_operations info_ops = {"hipd.info",
                                            info_finalize,
                                            custom_compare_default,
                                            custom_hash_default,
                                            custom_serialize_default,
                                            custom_deserialize_default,
                                            custom_compare_ext_default,
                                            custom_fixed_length_default};

static value info_wrap(hipd_info_t *info)
{
  value v = caml_alloc_custom(&info_ops, sizeof(hipd_info_t *), 0, 1);

  Info_val(v) = info;
  return v;
}

static void info_check(int rc, const char *path)
{
  if (rc == HIPD_ENOENT)
    raise_errorf(rc, "info: no field '%s'", path);
  if (rc == HIPD_EHANDLETYPE)
    raise_errorf(rc, "info: field '%s' has another type", path);
  if (rc < 0)
    raise_errorf(rc, "info: field '%s': %s", path, hipd_strerror(rc));
}

CAMLprim value hipd_ml_info_int(value vi, value vpath)
{
  int64_t n;

  info_check(hipd_info_int(Info_val(vi), String_val(vpath), &n),
             String_val(vpath));
  return caml_copy_int64(n);
}

CAMLprim value hipd_ml_info_double(value vi, value vpath)
{
  double d;

  info_check(hipd_info_double(Info_val(vi), String_val(vpath), &d),
             String_val(vpath));
  return caml_copy_double(d);
}

CAMLprim value hipd_ml_info_bool(value vi, value vpath)
{
  int b;

  info_check(hipd_info_bool(Info_val(vi), String_val(vpath), &b),
             String_val(vpath));
  return Val_bool(b);
}

CAMLprim value hipd_ml_info_str(value vi, value vpath)
{
  const char *s;
  size_t len;
  value r;

  info_check(hipd_info_str(Info_val(vi), String_val(vpath), &s, &len),
             String_val(vpath));
  r = caml_alloc_string(len);
  memcpy((char *)Bytes_val(r), s, len);
  return r;
}

CAMLprim value hipd_ml_info_len(value vi, value vpath)
{
  int n = hipd_info_len(Info_val(vi), String_val(vpath));

  info_check(n, String_val(vpath));
  return Val_int(n);
}

CAMLprim value hipd_ml_info_format(value vi)
{
  CAMLparam1(vi);
  CAMLlocal1(r);
  int n = hipd_info_format(Info_val(vi), NULL, 0);
  char *buf;

  if (n < 0)
    raise_error(n, "info: cannot format");
  if ((buf = malloc((size_t)n + 1)) == NULL)
    caml_raise_out_of_memory();
  hipd_info_format(Info_val(vi), buf, (size_t)n + 1);
  r = caml_copy_string(buf);
  free(buf);
  CAMLreturn(r);
}

/* The methods that return a record and take only a connection. */
#define INFO_METHOD(ml, call)                                                  \
  CAMLprim value ml(value vconn)                                               \
  {                                                                            \
    CAMLparam1(vconn);                                                         \
    hipd_info_t *info = NULL;                                                  \
    ml_call_t k;                                                               \
    if (ml_begin(&k, vconn))                                                   \
      k.rc = call(k.c, &info);                                                 \
    ml_end(&k);                                                                \
    CAMLreturn(info_wrap(info));                                               \
  }
INFO_METHOD(hipd_ml_hello, hipd_hello)
INFO_METHOD(hipd_ml_backend_info, hipd_backend_info)
INFO_METHOD(hipd_ml_session_info, hipd_session_info)
INFO_METHOD(hipd_ml_device_list, hipd_device_list)
INFO_METHOD(hipd_ml_cache_stats, hipd_cache_stats)

/* ---------------------------------------------------------------- devices */

CAMLprim value hipd_ml_device_count(value vconn)
{
  CAMLparam1(vconn);
  int n = 0;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_device_count(k.c, &n);
  ml_end(&k);
  CAMLreturn(Val_int(n));
}

CAMLprim value hipd_ml_device_get(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_device_get(k.c, dev, &info);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

CAMLprim value hipd_ml_device_set_current(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  intnat d = Long_val(vdev);
  ml_call_t k;

  if (d < 0 || d > INT_MAX)
    raise_errorf(HIPD_ENODEV, "device.set_current: no device %ld", (long)d);
  if (ml_begin(&k, vconn))
    k.rc = hipd_device_set_current(k.c, (int)d);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_device_current(value vconn)
{
  CAMLparam1(vconn);
  int d = 0;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_device_current(k.c, &d);
  ml_end(&k);
  CAMLreturn(Val_int(d));
}

CAMLprim value hipd_ml_device_synchronize(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_device_synchronize(k.c, dev);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

/* ---------------------------------------------------------------- streams */

CAMLprim value hipd_ml_stream_create(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  hipd_stream_t s = HIPD_STREAM_NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_stream_create(k.c, dev, &s);
  ml_end(&k);
  CAMLreturn(handle_wrap(k.m, ML_STREAM, hipd_stream_id(s), 1));
}

CAMLprim value hipd_ml_stream_default(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  hipd_stream_t s = HIPD_STREAM_NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_stream_default(k.c, dev, &s);
  ml_end(&k);
  CAMLreturn(handle_wrap(k.m, ML_STREAM, hipd_stream_id(s), 0));
}

CAMLprim value hipd_ml_stream_synchronize(value vconn, value vs)
{
  CAMLparam2(vconn, vs);
  hipd_stream_t s = STREAM(vs);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_stream_synchronize(k.c, s);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_stream_query(value vconn, value vs)
{
  CAMLparam2(vconn, vs);
  hipd_stream_t s = STREAM(vs);
  int idle = 0;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_stream_query(k.c, s, &idle);
  ml_end(&k);
  CAMLreturn(Val_bool(idle));
}

/* ----------------------------------------------------------------- memory */

CAMLprim value hipd_ml_mem_alloc(value vconn, value vdev, value vcount,
                                 value vkind)
{
  CAMLparam4(vconn, vdev, vcount, vkind);
  int dev = dev_of(vdev);
  uint64_t count = u64_of(vcount, "mem.alloc: count");
  char *kind = dup_string(vkind);
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_alloc(k.c, dev, count, kind, &b);
  free(kind);
  ml_end(&k);
  CAMLreturn(handle_wrap(k.m, ML_BUFFER, hipd_buffer_id(b), 1));
}

CAMLprim value hipd_ml_mem_alloc_custom(value vconn, value vdev, value vcount,
                                        value velem)
{
  CAMLparam4(vconn, vdev, vcount, velem);
  int dev = dev_of(vdev);
  uint64_t count = u64_of(vcount, "mem.alloc_custom: count");
  uint64_t elem = u64_of(velem, "mem.alloc_custom: elem_size");
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_alloc_custom(k.c, dev, count, elem, &b);
  ml_end(&k);
  CAMLreturn(handle_wrap(k.m, ML_BUFFER, hipd_buffer_id(b), 1));
}

CAMLprim value hipd_ml_mem_size(value vconn, value vb)
{
  CAMLparam2(vconn, vb);
  hipd_buffer_t b = BUF(vb);
  uint64_t size = 0;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_size(k.c, b, &size);
  ml_end(&k);
  CAMLreturn(Val_long((intnat)size));
}

CAMLprim value hipd_ml_mem_info(value vconn, value vb)
{
  CAMLparam2(vconn, vb);
  hipd_buffer_t b = BUF(vb);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_info(k.c, b, &info);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

/* ------------------------------------------------------- shared Bigarrays */

/* A Bigarray whose memory is a hipd shared buffer (hipd_shm_t). It has
 * custom operations of its own, copied from the standard Bigarray ones but
 * for the finaliser; the Bigarray primitives copy them to every sub-array,
 * slice and reshape (OCaml PR#8568), and all of them share one proxy, so
 * the mapping lives as long as any view of it. The last view to go
 * releases the shared buffer (queued on its connection). */
typedef struct {
  struct caml_ba_proxy p; /* first: the runtime's view of the proxy */
  hipd_ml_conn_t *m;
  hipd_shm_t *shm;
} ml_shm_proxy_t;

static struct custom_operations shm_ba_ops;
static int shm_ba_ops_ready;

static void shm_ba_finalize(value v)
{
  struct caml_ba_array *b = Caml_ba_array_val(v);
  ml_shm_proxy_t *px = (ml_shm_proxy_t *)b->proxy;

  if (px == NULL || --px->p.refcount > 0)
    return;
  ml_conn_defer(px->m, ML_SHM, 0, px->shm);
  ml_conn_unref(px->m);
  free(px);
}

/* The shared buffer behind Bigarray @p v, or NULL for any other Bigarray;
 * @p off gets the offset of the Bigarray's data in it. */
static ml_shm_proxy_t *shm_of_ba(value v, uint64_t *off)
{
  struct caml_ba_array *b = Caml_ba_array_val(v);
  ml_shm_proxy_t *px;

  if (!shm_ba_ops_ready || Custom_ops_val(v) != &shm_ba_ops)
    return NULL;
  px = (ml_shm_proxy_t *)b->proxy;
  *off = (uint64_t)((char *)b->data - (char *)px->p.data);
  return px;
}

/* Shm.create conn kind_code count: a 1-D C-layout Bigarray of @p count
 * elements of Bigarray kind @p vkind (the runtime's numbering). */
CAMLprim value hipd_ml_shm_create(value vconn, value vkind, value vcount)
{
  CAMLparam3(vconn, vkind, vcount);
  CAMLlocal1(ba);
  int kind = Int_val(vkind);
  intnat count = Long_val(vcount), dim[1];
  hipd_shm_t *shm = NULL;
  ml_shm_proxy_t *px;
  size_t bytes;
  ml_call_t k;

  if (kind < 0 || kind > CAML_BA_CHAR)
    raise_errorf(HIPD_EINVAL, "shm.create: Bigarray kind %d", kind);
  if (count <= 0)
    raise_errorf(HIPD_EINVAL, "shm.create: %ld elements (1 or more)",
                 (long)count);
  if ((uintnat)count > SIZE_MAX / (size_t)caml_ba_element_size[kind])
    raise_errorf(HIPD_EINVAL, "shm.create: %ld elements is too large",
                 (long)count);
  bytes = (size_t)count * (size_t)caml_ba_element_size[kind];
  if (!shm_ba_ops_ready) {
    shm_ba_ops = caml_ba_ops;
    shm_ba_ops.finalize = shm_ba_finalize;
    shm_ba_ops_ready = 1;
  }
  if (ml_begin(&k, vconn))
    k.rc = hipd_shm_create(k.c, bytes, &shm);
  ml_end(&k);
  if ((px = calloc(1, sizeof(*px))) == NULL) {
    ml_conn_defer(k.m, ML_SHM, 0, shm);
    caml_raise_out_of_memory();
  }
  px->p.refcount = 1;
  px->p.data = hipd_shm_ptr(shm);
  px->p.size = hipd_shm_size(shm);
  px->m = k.m;
  px->shm = shm;
  ml_conn_ref(k.m);
  dim[0] = count;
  ba = caml_ba_alloc(kind | CAML_BA_C_LAYOUT | CAML_BA_EXTERNAL, 1, px->p.data,
                     dim);
  Caml_ba_array_val(ba)->flags = kind | CAML_BA_C_LAYOUT | CAML_BA_MAPPED_FILE;
  Caml_ba_array_val(ba)->proxy = &px->p;
  Custom_ops_val(ba) = &shm_ba_ops;
  CAMLreturn(ba);
}

/* Whether @p vba is a shared Bigarray of connection @p vconn. */
CAMLprim value hipd_ml_shm_is_shared(value vconn, value vba)
{
  uint64_t off;
  ml_shm_proxy_t *px = shm_of_ba(vba, &off);

  return Val_bool(px != NULL && px->m == Mlconn_val(vconn));
}

CAMLprim value hipd_ml_shm_any(value vba)
{
  uint64_t off;

  return Val_bool(shm_of_ba(vba, &off) != NULL);
}

CAMLprim value hipd_ml_mem_alloc_zero_copy(value vconn, value vdev, value vba)
{
  CAMLparam3(vconn, vdev, vba);
  int dev = dev_of(vdev);
  uint64_t off = 0;
  ml_shm_proxy_t *px = shm_of_ba(vba, &off);
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  ml_call_t k;

  if (px == NULL)
    raise_error(HIPD_ENOTSUP, "mem.alloc_zero_copy: the Bigarray is not a "
                              "shared buffer (make it with Hipd.Shm.create)");
  if (off != 0)
    raise_error(HIPD_EINVAL, "mem.alloc_zero_copy: the Bigarray is a view "
                             "inside a shared buffer, not the whole of it");
  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_alloc_zero_copy(k.c, dev, px->shm, &b);
  ml_end(&k);
  CAMLreturn(handle_wrap(k.m, ML_BUFFER, hipd_buffer_id(b), 1));
}

/* ------------------------------------------------------------- transfers */

/* The bytes of Bigarray @p vba from element @p vpos, @p vlen elements (-1:
 * to the end). */
static void ba_range(value vba, value vpos, value vlen, char **data,
                     size_t *len, const char *method)
{
  struct caml_ba_array *b = Caml_ba_array_val(vba);
  size_t esize = (size_t)caml_ba_element_size[b->flags & CAML_BA_KIND_MASK];
  size_t n = caml_ba_num_elts(b);
  intnat pos = Long_val(vpos), cnt = Long_val(vlen);

  if (pos < 0 || (size_t)pos > n)
    raise_errorf(HIPD_ERANGE, "%s: element %ld outside a Bigarray of %zu",
                 method, (long)pos, n);
  if (cnt < 0)
    cnt = (intnat)(n - (size_t)pos);
  if ((size_t)cnt > n - (size_t)pos)
    raise_errorf(HIPD_ERANGE,
                 "%s: %ld elements from %ld exceed a Bigarray of %zu", method,
                 (long)cnt, (long)pos, n);
  *data = (char *)b->data + (size_t)pos * esize;
  *len = (size_t)cnt * esize;
}

/* mem.write / mem.read between a Bigarray and a buffer. @p vmode: 0 picks
 * the shared path when the Bigarray is a shared buffer of this
 * connection, else inline; 1 forces inline (the bytes go through the
 * socket). */
CAMLprim value hipd_ml_mem_transfer(value vconn, value vb, value voff,
                                    value vba, value vpos, value vlen,
                                    value vdir, value vmode)
{
  CAMLparam5(vconn, vb, voff, vba, vpos);
  CAMLxparam3(vlen, vdir, vmode);
  hipd_buffer_t b = BUF(vb);
  int d2h = Int_val(vdir), inline_only = Int_val(vmode);
  uint64_t off = u64_of(voff, d2h ? "mem.read: offset" : "mem.write: offset");
  uint64_t shm_off = 0;
  ml_shm_proxy_t *px = inline_only ? NULL : shm_of_ba(vba, &shm_off);
  char *data;
  size_t len;
  ml_call_t k;

  ba_range(vba, vpos, vlen, &data, &len, d2h ? "mem.read" : "mem.write");
  if (px != NULL && px->m != Mlconn_val(vconn))
    px = NULL; /* another connection's shared buffer: inline */
  if (px != NULL)
    shm_off += (uint64_t)(data - (char *)Caml_ba_array_val(vba)->data);
  if (!ml_begin(&k, vconn))
    ;
  else if (px != NULL)
    k.rc = d2h ? hipd_mem_read_shm(k.c, b, off, px->shm, shm_off, len)
               : hipd_mem_write_shm(k.c, b, off, px->shm, shm_off, len);
  else
    k.rc = d2h ? hipd_mem_read(k.c, b, off, data, len)
               : hipd_mem_write(k.c, b, off, data, len);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_mem_transfer_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_mem_transfer(argv[0], argv[1], argv[2], argv[3], argv[4],
                              argv[5], argv[6], argv[7]);
}

/* The same ordered on a stream (mem.write_async / mem.read_async, or their
 * shared forms). */
CAMLprim value hipd_ml_mem_transfer_async(value vconn, value vb, value voff,
                                          value vba, value vdir, value vs)
{
  CAMLparam5(vconn, vb, voff, vba, vdir);
  CAMLxparam1(vs);
  hipd_buffer_t b = BUF(vb);
  hipd_stream_t s = STREAM(vs);
  int d2h = Int_val(vdir);
  uint64_t off = u64_of(voff, "mem: offset"), shm_off = 0;
  ml_shm_proxy_t *px = shm_of_ba(vba, &shm_off);
  char *data = Caml_ba_data_val(vba);
  size_t len = caml_ba_byte_size(Caml_ba_array_val(vba));
  ml_call_t k;

  if (px != NULL && px->m != Mlconn_val(vconn))
    px = NULL;
  if (!ml_begin(&k, vconn))
    ;
  else if (px != NULL)
    k.rc =
        d2h ? hipd_mem_read_shm_async(k.c, b, off, px->shm, shm_off, len, s)
            : hipd_mem_write_shm_async(k.c, b, off, px->shm, shm_off, len, s);
  else
    k.rc = d2h ? hipd_mem_read_async(k.c, b, off, data, len, s)
               : hipd_mem_write_async(k.c, b, off, data, len, s);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_mem_transfer_async_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_mem_transfer_async(argv[0], argv[1], argv[2], argv[3], argv[4],
                                    argv[5]);
}

/* Raw pointers (for custom element types: a Ctypes pointer's address, a
 * C library's buffer). The caller vouches for @p len bytes at @p ptr. */
CAMLprim value hipd_ml_mem_transfer_ptr(value vconn, value vb, value voff,
                                        value vptr, value vlen, value vdir)
{
  CAMLparam5(vconn, vb, voff, vptr, vlen);
  CAMLxparam1(vdir);
  hipd_buffer_t b = BUF(vb);
  int d2h = Int_val(vdir);
  uint64_t off = u64_of(voff, "mem: offset");
  uint64_t len = u64_of(vlen, "mem: byte_size");
  void *ptr = (void *)Nativeint_val(vptr);
  ml_call_t k;

  if (ptr == NULL && len > 0)
    raise_error(HIPD_EINVAL, d2h ? "mem.read: the pointer is NULL"
                                 : "mem.write: the pointer is NULL");
  if (ml_begin(&k, vconn))
    k.rc = d2h ? hipd_mem_read(k.c, b, off, ptr, (size_t)len)
               : hipd_mem_write(k.c, b, off, ptr, (size_t)len);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_mem_transfer_ptr_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_mem_transfer_ptr(argv[0], argv[1], argv[2], argv[3], argv[4],
                                  argv[5]);
}

/* The address of a Bigarray's data, for the raw-pointer transfers. */
CAMLprim value hipd_ml_ba_address(value vba)
{
  return caml_copy_nativeint((intnat)Caml_ba_data_val(vba));
}

CAMLprim value hipd_ml_mem_copy(value vconn, value vdst, value vdoff,
                                value vsrc, value vsoff, value vlen)
{
  CAMLparam5(vconn, vdst, vdoff, vsrc, vsoff);
  CAMLxparam1(vlen);
  hipd_buffer_t dst = BUF(vdst), src = BUF(vsrc);
  uint64_t doff = u64_of(vdoff, "mem.copy: dst_offset");
  uint64_t soff = u64_of(vsoff, "mem.copy: src_offset");
  uint64_t len = u64_of(vlen, "mem.copy: length");
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_copy(k.c, dst, doff, src, soff, (size_t)len);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_mem_copy_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_mem_copy(argv[0], argv[1], argv[2], argv[3], argv[4], argv[5]);
}

CAMLprim value hipd_ml_mem_memset(value vconn, value vb, value voff, value vlen,
                                  value vbyte)
{
  CAMLparam5(vconn, vb, voff, vlen, vbyte);
  hipd_buffer_t b = BUF(vb);
  uint64_t off = u64_of(voff, "mem.memset: offset");
  uint64_t len = u64_of(vlen, "mem.memset: length");
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_mem_memset(k.c, b, off, (size_t)len, Int_val(vbyte) & 0xff);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

/* ----------------------------------------------------------------- events */

CAMLprim value hipd_ml_event_create(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  hipd_event_t e = HIPD_EVENT_NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_event_create(k.c, dev, &e);
  ml_end(&k);
  CAMLreturn(handle_wrap(k.m, ML_EVENT, hipd_event_id(e), 1));
}

CAMLprim value hipd_ml_event_record(value vconn, value ve, value vs)
{
  CAMLparam3(vconn, ve, vs);
  hipd_event_t e = EVENT(ve);
  hipd_stream_t s = stream_opt(vs);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_event_record(k.c, e, s);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_event_query(value vconn, value ve)
{
  CAMLparam2(vconn, ve);
  hipd_event_t e = EVENT(ve);
  int done = 0;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_event_query(k.c, e, &done);
  ml_end(&k);
  CAMLreturn(Val_bool(done));
}

CAMLprim value hipd_ml_event_synchronize(value vconn, value ve)
{
  CAMLparam2(vconn, ve);
  hipd_event_t e = EVENT(ve);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_event_synchronize(k.c, e);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_event_elapsed(value vconn, value vstart, value vstop)
{
  CAMLparam3(vconn, vstart, vstop);
  hipd_event_t a = EVENT(vstart), b = EVENT(vstop);
  float ms = 0;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_event_elapsed(k.c, a, b, &ms);
  ml_end(&k);
  CAMLreturn(caml_copy_double(ms));
}

/* -------------------------------------------------------------- profiling */

CAMLprim value hipd_ml_profile(value vconn, value von)
{
  CAMLparam2(vconn, von);
  int on = Bool_val(von);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = on ? hipd_profile_enable(k.c) : hipd_profile_disable(k.c);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_session_profile(value vconn, value vclear)
{
  CAMLparam2(vconn, vclear);
  int clear = Bool_val(vclear);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_session_profile(k.c, clear, &info);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

/* ---------------------------------------------------------------- kernels */

/* Hipd.arg, in constructor order: Buffer of buffer * int | Ptr of int64 |
 * I32 of int32 | I64 of int64 | F32 of float | F64 of float. Built with
 * the runtime lock held; the launch copies it. */
static hipd_args_t *args_of(value varr, hipd_ml_conn_t *m)
{
  hipd_args_t *a = hipd_args_new();
  mlsize_t n = Wosize_val(varr);
  int rc = 0;

  (void)m;
  if (a == NULL)
    caml_raise_out_of_memory();
  for (mlsize_t i = 0; i < n && rc == 0; i++) {
    value v = Field(varr, i);
    switch (Tag_val(v)) {
    case 0: {
      intnat off = Long_val(Field(v, 1));
      ml_handle_t *h = Handle_val(Field(v, 0));
      if (off < 0) {
        hipd_args_free(a);
        raise_errorf(HIPD_EINVAL, "kernel args: argument %lu: offset %ld",
                     (unsigned long)i, (long)off);
      }
      if (h->type != ML_BUFFER) {
        hipd_args_free(a);
        raise_error(HIPD_EHANDLETYPE, "kernel args: not a buffer");
      }
      rc = hipd_args_buffer(a, hipd_buffer_from_id(h->id), (uint64_t)off);
      break;
    }
    case 1:
      rc = hipd_args_ptr(a, (uint64_t)Int64_val(Field(v, 0)));
      break;
    case 2:
      rc = hipd_args_i32(a, Int32_val(Field(v, 0)));
      break;
    case 3:
      rc = hipd_args_i64(a, Int64_val(Field(v, 0)));
      break;
    case 4:
      rc = hipd_args_f32(a, (float)Double_val(Field(v, 0)));
      break;
    default:
      rc = hipd_args_f64(a, Double_val(Field(v, 0)));
      break;
    }
  }
  if (rc < 0) {
    hipd_args_free(a);
    raise_error(rc, "kernel args: cannot add an argument");
  }
  return a;
}

/* kernel.compile / kernel.compile_cached: (kernel, info). */
CAMLprim value hipd_ml_kernel_compile(value vconn, value vdev, value vsrc,
                                      value vname, value vopts, value vcached)
{
  CAMLparam5(vconn, vdev, vsrc, vname, vopts);
  CAMLxparam1(vcached);
  CAMLlocal2(r, kh);
  int dev = dev_of(vdev), cached = Bool_val(vcached);
  char *src = dup_string(vsrc), *name = dup_string(vname);
  char **opts = dup_string_list(vopts, 1);
  hipd_kernel_t kern = HIPD_KERNEL_NULL;
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = cached
               ? hipd_kernel_compile_cached(k.c, dev, src, name,
                                            (const char *const *)opts, &kern,
                                            &info)
               : hipd_kernel_compile(k.c, dev, src, name,
                                     (const char *const *)opts, &kern, &info);
  free(src);
  free(name);
  free_string_list(opts);
  ml_end(&k);
  kh = handle_wrap(k.m, ML_KERNEL, hipd_kernel_id(kern), 1);
  r = caml_alloc_tuple(2);
  Store_field(r, 0, kh);
  Store_field(r, 1, info_wrap(info));
  CAMLreturn(r);
}

CAMLprim value hipd_ml_kernel_compile_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_kernel_compile(argv[0], argv[1], argv[2], argv[3], argv[4],
                                argv[5]);
}

/* Copy an IR document (an OCaml string of msgpack bytes). */
static void *dup_bytes(value v, size_t *len)
{
  void *p;

  *len = caml_string_length(v);
  if ((p = malloc(*len ? *len : 1)) == NULL)
    caml_raise_out_of_memory();
  memcpy(p, String_val(v), *len);
  return p;
}

/* An optional block (x, y, z). */
static const uint32_t *block_opt(value v, uint32_t buf[3], const char *method)
{
  if (!Is_block(v))
    return NULL;
  dims_of(Field(v, 0), buf, method, "block");
  return buf;
}

CAMLprim value hipd_ml_generate_source(value vconn, value vdev, value varch,
                                       value vir, value vblock, value vsoa)
{
  CAMLparam5(vconn, vdev, varch, vir, vblock);
  CAMLxparam1(vsoa);
  int dev = dev_of(vdev);
  uint32_t bbuf[3];
  const uint32_t *block = block_opt(vblock, bbuf, "kernel.generate_source");
  char *arch = dup_opt_string(varch);
  char **soa = dup_string_list(vsoa, 1);
  size_t len;
  void *ir = dup_bytes(vir, &len);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_kernel_generate_source(k.c, dev, arch, ir, len, block,
                                       (const char *const *)soa, &info);
  free(ir);
  free(arch);
  free_string_list(soa);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

CAMLprim value hipd_ml_generate_source_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_generate_source(argv[0], argv[1], argv[2], argv[3], argv[4],
                                 argv[5]);
}

CAMLprim value hipd_ml_compile_ir(value vconn, value vdev, value vir,
                                  value vblock, value vsoa, value vopts)
{
  CAMLparam5(vconn, vdev, vir, vblock, vsoa);
  CAMLxparam1(vopts);
  CAMLlocal2(r, kh);
  int dev = dev_of(vdev);
  uint32_t bbuf[3];
  const uint32_t *block = block_opt(vblock, bbuf, "kernel.compile_ir");
  char **soa = dup_string_list(vsoa, 1);
  char **opts = dup_string_list(vopts, 1);
  size_t len;
  void *ir = dup_bytes(vir, &len);
  hipd_kernel_t kern = HIPD_KERNEL_NULL;
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_kernel_compile_ir(k.c, dev, ir, len, block,
                                  (const char *const *)soa,
                                  (const char *const *)opts, &kern, &info);
  free(ir);
  free_string_list(soa);
  free_string_list(opts);
  ml_end(&k);
  kh = handle_wrap(k.m, ML_KERNEL, hipd_kernel_id(kern), 1);
  r = caml_alloc_tuple(2);
  Store_field(r, 0, kh);
  Store_field(r, 1, info_wrap(info));
  CAMLreturn(r);
}

CAMLprim value hipd_ml_compile_ir_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_compile_ir(argv[0], argv[1], argv[2], argv[3], argv[4],
                            argv[5]);
}

/* kernel.launch (vwait false) or kernel.launch with wait (true). */
CAMLprim value hipd_ml_kernel_launch(value vconn, value vk, value vgrid,
                                     value vblock, value vshared, value vs,
                                     value vargs, value vwait)
{
  CAMLparam5(vconn, vk, vgrid, vblock, vshared);
  CAMLxparam3(vs, vargs, vwait);
  hipd_kernel_t kern = KERNEL(vk);
  hipd_stream_t s = stream_opt(vs);
  uint32_t grid[3], block[3];
  uint32_t shared = u32_of(vshared, "kernel.launch: shared_mem");
  int wait = Bool_val(vwait);
  hipd_args_t *a;
  ml_call_t k;

  dims_of(vgrid, grid, "kernel.launch", "grid");
  dims_of(vblock, block, "kernel.launch", "block");
  a = args_of(vargs, Mlconn_val(vconn));
  if (ml_begin(&k, vconn))
    k.rc = wait ? hipd_kernel_run(k.c, kern, grid, block, shared, s, a)
                : hipd_kernel_launch(k.c, kern, grid, block, shared, s, a);
  hipd_args_free(a);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_kernel_launch_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_kernel_launch(argv[0], argv[1], argv[2], argv[3], argv[4],
                               argv[5], argv[6], argv[7]);
}

CAMLprim value hipd_ml_kernel_output(value vconn)
{
  CAMLparam1(vconn);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_kernel_output(k.c, 0, &info);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

CAMLprim value hipd_ml_run_source(value vconn, value vsrc, value vlang,
                                  value vname, value vgrid, value vblock,
                                  value vshared, value vargs, value vwait)
{
  CAMLparam5(vconn, vsrc, vlang, vname, vgrid);
  CAMLxparam4(vblock, vshared, vargs, vwait);
  uint32_t grid[3], block[3];
  uint32_t shared = u32_of(vshared, "run_source: shared_mem");
  int wait = Bool_val(vwait);
  char *src, *lang, *name;
  hipd_args_t *a;
  ml_call_t k;

  dims_of(vgrid, grid, "run_source", "grid");
  dims_of(vblock, block, "run_source", "block");
  a = args_of(vargs, Mlconn_val(vconn));
  src = dup_string(vsrc);
  lang = dup_string(vlang);
  name = dup_string(vname);
  if (ml_begin(&k, vconn))
    k.rc = wait ? hipd_run_source(k.c, src, lang, name, grid, block, shared, a)
                : hipd_run_source_async(k.c, src, lang, name, grid, block,
                                        shared, a);
  hipd_args_free(a);
  free(src);
  free(lang);
  free(name);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_run_source_bc(value *argv, int argn)
{
  (void)argn;
  return hipd_ml_run_source(argv[0], argv[1], argv[2], argv[3], argv[4],
                            argv[5], argv[6], argv[7], argv[8]);
}

CAMLprim value hipd_ml_supported_source_langs(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_supported_source_langs(k.c, dev, &info);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

CAMLprim value hipd_ml_execute_direct(value vconn)
{
  CAMLparam1(vconn);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_execute_direct(k.c);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_cache_clear(value vconn)
{
  CAMLparam1(vconn);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_cache_clear(k.c);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

/* ------------------------------------------------------------- intrinsics */

CAMLprim value hipd_ml_intrinsics_list(value vconn, value vdev)
{
  CAMLparam2(vconn, vdev);
  int dev = dev_of(vdev);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_intrinsics_list(k.c, dev, NULL, &info);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

CAMLprim value hipd_ml_intrinsics_find(value vconn, value vname, value vdev)
{
  CAMLparam3(vconn, vname, vdev);
  int dev = dev_of(vdev);
  char *name = dup_string(vname);
  hipd_info_t *info = NULL;
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_intrinsics_find(k.c, name, dev, NULL, &info);
  free(name);
  ml_end(&k);
  CAMLreturn(info_wrap(info));
}

/* vconv: 0 uniform, 1 divergent, 2 sync (Hipd.convergence's order). */
CAMLprim value hipd_ml_intrinsics_register(value vconn, value vname,
                                           value vcode, value vconv,
                                           value varity)
{
  CAMLparam5(vconn, vname, vcode, vconv, varity);
  char *name = dup_string(vname), *code = dup_string(vcode);
  hipd_convergence_t conv = (hipd_convergence_t)Int_val(vconv);
  int arity = Int_val(varity);
  ml_call_t k;

  if (ml_begin(&k, vconn))
    k.rc = hipd_intrinsics_register(k.c, name, code, conv, arity);
  free(name);
  free(code);
  ml_end(&k);
  CAMLreturn(Val_unit);
}

/* ------------------------------------------------------------------ locks */

/* A mutex for the OCaml side's own state (Hipd_backend's tables), so that
 * the library needs no threads library: a thread that must wait for it
 * waits outside the runtime lock, as the threads library's Mutex does, so
 * that the holder (which may have been switched out at an allocation) can
 * run and release it. */
#define Lock_val(v) (*(pthread_mutex_t **)Data_custom_val(v))

static void lock_finalize(value v)
{
  pthread_mutex_t *mu = Lock_val(v);

  if (mu != NULL) {
    pthread_mutex_destroy(mu);
    free(mu);
  }
}

static struct custom_operations lock_ops = {"hipd.lock",
                                            lock_finalize,
                                            custom_compare_default,
                                            custom_hash_default,
                                            custom_serialize_default,
                                            custom_deserialize_default,
                                            custom_compare_ext_default,
                                            custom_fixed_length_default};

CAMLprim value hipd_ml_lock_create(value unit)
{
  pthread_mutex_t *mu = malloc(sizeof(*mu));
  value v;

  (void)unit;
  if (mu == NULL)
    caml_raise_out_of_memory();
  pthread_mutex_init(mu, NULL);
  v = caml_alloc_custom(&lock_ops, sizeof(pthread_mutex_t *), 0, 1);
  Lock_val(v) = mu;
  return v;
}

CAMLprim value hipd_ml_lock_acquire(value vl)
{
  CAMLparam1(vl);
  pthread_mutex_t *mu = Lock_val(vl);

  if (pthread_mutex_trylock(mu) != 0) {
    caml_enter_blocking_section();
    pthread_mutex_lock(mu);
    caml_leave_blocking_section();
  }
  CAMLreturn(Val_unit);
}

CAMLprim value hipd_ml_lock_release(value vl)
{
  pthread_mutex_unlock(Lock_val(vl));
  return Val_unit;
}
