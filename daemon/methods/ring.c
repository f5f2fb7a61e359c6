/* SPDX-License-Identifier: MIT */
/* daemon/methods/ring.c: the session's shared-memory queues (ring.open).
 * The ring itself is daemon/ring.c; the transport polls it. */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "methods.h"
#include "ring.h"
#include "session.h"

/* ring.open [entries?, doorbell?] -> {entries, slot, size, doorbell}: the
 * memfd came with this request's bytes (SCM_RIGHTS), sized and sealed by
 * the client (proto/ring_layout.h); doorbell "socket" (the default) or
 * "futex" says how a sleeping client is woken. */
int m_ring_open(call_t *c, const ring_open_args_t *a)
{
  session_t *s = c->s;
  uint64_t entries = a->entries.present ? a->entries.u : RING_DEFAULT_ENTRIES;
  /* Claimed first, so that a bad request cannot leave it to the next. */
  int fd = session_take_fd(s);
  int futex = 0;
  hipd_err_t err;
  pack_map_t m;
  int rc;

  if (a->doorbell.present) {
    if (strcmp(a->doorbell.s, RING_DOORBELL_FUTEX) == 0) {
      futex = 1;
    } else if (strcmp(a->doorbell.s, RING_DOORBELL_SOCKET) != 0) {
      if (fd >= 0)
        close(fd);
      return call_fail(c, HIPD_EINVAL,
                       "doorbell '%s' is not one of " RING_DOORBELL_SOCKET
                       ", " RING_DOORBELL_FUTEX,
                       a->doorbell.s);
    }
  }
  if (fd < 0)
    return call_fail(c, HIPD_EINVAL,
                     "no file descriptor came with the request "
                     "(send the memfd with SCM_RIGHTS on its bytes)");
  if ((rc = ring_open(s, fd, entries, futex, &err)) != 0)
    return call_fail(c, rc, "%s", err.msg);
  pack_map_begin(&m, call_result(c));
  pack_kv_u64(&m, "entries", entries);
  pack_kv_u64(&m, "slot", RING_SLOT);
  pack_kv_u64(&m, "size", proto_ring_size((uint32_t)entries));
  pack_kv_str(&m, "doorbell",
              futex ? RING_DOORBELL_FUTEX : RING_DOORBELL_SOCKET);
  pack_map_end(&m);
  return 0;
}
