/* SPDX-License-Identifier: MIT */
/* daemon/call.c: one call's life below dispatch: building its answer
 * (a result or an error naming the method), deferring it, and handing the
 * answer to its session. The methods answer through these; dispatch
 * creates the call and runs the handler (dispatch.c). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "log.h"
#include "ring.h"
#include "stats.h"

/* ---------------------------------------------------------------- replies */

#define REPLY_INITIAL 128

static int call_begin(call_t *c)
{
  if (c->answered) {
    /* A handler bug: keep the first answer. */
    log_error(c->s->id, "%s: answered twice", c->name ? c->name : "?");
    return HIPD_EINTERNAL;
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
  /* A ring's completion has a slot's room: its message is cut there. */
  size_t cap = c->on_cq ? RING_MSG_MAX : sizeof(text);
  int n = 0;

  if (call_begin(c) != 0)
    return code;
  c->code = code;
  if (c->name != NULL)
    n = snprintf(text, cap, "%s: ", c->name);
  vsnprintf(text + n, cap - (size_t)n, fmt, ap);
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

void call_send(call_t *c)
{
  if (!c->answered)
    call_fail(c, HIPD_EINTERNAL, "handler returned without an answer");
  size_t len = c->out.size;
  char *data = msgpack_sbuffer_release(&c->out);
  stats_request(c->s, c->name, c->code);
  if (c->early != RING_EARLY_NONE) {
    /* Answered already, from the thread that saw its end. */
    free(data);
    free(c->tail);
    if (c->early == RING_EARLY_WAKE)
      ring_wake_socket(c->s);
  } else if (c->on_cq) {
    ring_reply(c->s, c->msgid, data, len, c->tail, c->tail_len);
  } else {
    session_send(c->s, data, len, c->tail, c->tail_len);
  }
  c->tail = NULL;
  ring_early_unref(c->early_ring);
  c->early_ring = NULL;
  session_request_done(c->s);
}

int call_early_enable(call_t *d)
{
  if (d->on_cq && d->early_ring == NULL)
    d->early_ring = ring_early_ref(d->s);
  return d->early_ring != NULL;
}

int call_early_nil(call_t *d)
{
  if (d->early_ring == NULL || d->early != RING_EARLY_NONE)
    return 0;
  d->early = ring_reply_nil(d->early_ring, d->msgid);
  return d->early != RING_EARLY_NONE;
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
  h->args = NULL;
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

/* ---------------------------------------------------------- handle errors */

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
