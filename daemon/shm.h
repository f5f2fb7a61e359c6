/* SPDX-License-Identifier: MIT */
/* daemon/shm.h: host memory shared with a client (zero-copy transfers).
 *
 * A client passes a memfd over its connection (SCM_RIGHTS, see session.c);
 * shm_open_fd() checks it (a regular memfd owned by the peer, sealed against
 * shrinking, so the daemon can never fault on a truncated mapping), maps it
 * and shm_register() page-locks it with the GPU driver on a device's
 * service executor, so transfers between it and device memory run at
 * pinned speed. The object is reference-counted on the loop thread: the
 * session's handle, every transfer using it and every zero-copy buffer made
 * from it hold a reference; the last one unregisters and unmaps it off the
 * loop.
 */
#ifndef HIPD_SHM_H
#define HIPD_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "device.h"
#include "executor.h"
#include "util/err.h"

typedef struct shm {
  int fd;             /* the client's memfd (ours now) */
  void *addr;         /* our mapping of it, MAP_SHARED */
  size_t size;        /* bytes mapped */
  int refs;           /* loop thread only */
  device_t *reg;      /* the device whose driver page-locked it, or NULL */
  uint32_t reg_epoch; /* reg's context generation when it was locked */
  int registering;    /* registration queued or running */
} shm_t;

/* Take ownership of @p fd (closed on failure too), check it and map
 * @p size bytes of it. @p peer_uid is the connection's peer: the memfd must
 * belong to it (or the peer is root). @return 0 with *out (1 reference), or
 * HIPD_EINVAL / HIPD_EPERM / HIPD_ENOMEM, the same code and a message in
 * @p err (cleared on success). */
int shm_open_fd(int fd, uint64_t size, uid_t peer_uid, shm_t **out,
                hipd_err_t *err);

/* Page-lock @p m with the first device whose driver can (HIP), on that
 * device's service executor; then @p done(task) runs on the loop with
 * task->status 0 or the failure (the shm is then used unregistered). With
 * no such device @p done runs at once from here with status 0. The task is
 * the caller's (embed it in a larger struct); done must free it. */
void shm_register(shm_t *m, task_t *t, void (*done)(task_t *));

void shm_ref(shm_t *m);
/* Drop a reference; the last one unregisters and unmaps it off the loop. */
void shm_unref(shm_t *m);

/* shm_unref() for a small mapping no device registered (a ring): the last
 * reference unmaps it here and now, with no task that a stopping daemon
 * would leave undone. Otherwise as shm_unref(). */
void shm_unref_now(shm_t *m);

/* Is [off, off + len) inside @p m (no overflow)? */
int shm_range_ok(const shm_t *m, uint64_t off, uint64_t len);

#endif
