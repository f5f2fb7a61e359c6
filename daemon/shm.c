/* SPDX-License-Identifier: MIT */
/* daemon/shm.c: host memory shared with a client. See shm.h. */
#include "config.h"

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "shm.h"

int shm_open_fd(int fd, uint64_t size, uid_t peer_uid, shm_t **out,
                hipd_err_t *err)
{
  struct stat st;
  shm_t *m = NULL;
  int seals, rc;
  void *p;

  *out = NULL;
  err_clear(err);
  if (fstat(fd, &st) != 0) {
    rc = err_set(err, HIPD_EINVAL, "cannot stat the descriptor: %s",
                 strerror(errno));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = err_set(err, HIPD_EINVAL,
                 "the descriptor is not a memfd (not a regular file)");
    goto fail;
  }
  if (peer_uid != 0 && st.st_uid != peer_uid) {
    rc = err_set(err, HIPD_EPERM,
                 "the memfd belongs to uid %u, the connection to uid %u",
                 (unsigned)st.st_uid, (unsigned)peer_uid);
    goto fail;
  }
  /* Only a sealed file is safe to map: without F_SEAL_SHRINK the client
   * could truncate it and any access by the daemon or a device would
   * fault. Files other than memfds refuse F_GET_SEALS. */
  seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    rc = err_set(err, HIPD_EINVAL,
                 "the memfd is not sealed against shrinking (F_SEAL_SHRINK)");
    goto fail;
  }
  if (size == 0 || (uint64_t)st.st_size < size) {
    rc = err_set(err, HIPD_EINVAL, "size %llu is %s the memfd's %llu bytes",
                 (unsigned long long)size, size == 0 ? "zero, not" : "beyond",
                 (unsigned long long)st.st_size);
    goto fail;
  }
  /* Page-locking pins every page: more than half the host's memory would
   * starve everything else on the node (a sparse memfd costs the client
   * nothing to make that large). */
  uint64_t phys =
      (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  if (phys > 0 && size > phys / 2) {
    rc = err_set(err, HIPD_ENOMEM,
                 "size %llu exceeds half of the host's %llu bytes of memory",
                 (unsigned long long)size, (unsigned long long)phys);
    goto fail;
  }
  if (size > SIZE_MAX) {
    rc = err_set(err, HIPD_EINVAL, "size %llu cannot be mapped",
                 (unsigned long long)size);
    goto fail;
  }
  m = calloc(1, sizeof(*m));
  if (m == NULL) {
    rc = err_set(err, HIPD_ENOMEM, "out of memory");
    goto fail;
  }
  p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    rc = err_set(err, errno == ENOMEM ? HIPD_ENOMEM : HIPD_EINVAL,
                 "cannot map %llu bytes: %s", (unsigned long long)size,
                 strerror(errno));
    goto fail;
  }
  m->fd = fd;
  m->addr = p;
  m->size = (size_t)size;
  m->refs = 1;
  *out = m;
  return 0;

fail:
  free(m);
  close(fd);
  return rc;
}

/* The device whose driver page-locks host memory: the first that can. */
static device_t *register_device(void)
{
  for (int i = 0; i < devices_count(); i++) {
    device_t *dev = device_get(i);
    if (dev != NULL && dev->drv->host_register != NULL && !dev->lost)
      return dev;
  }
  return NULL;
}

typedef struct {
  task_t t;
  shm_t *m;
  task_t *user;
  void (*user_done)(task_t *);
} reg_task_t;

static void register_run(task_t *t)
{
  reg_task_t *r = (reg_task_t *)t;
  device_t *dev = r->m->reg;
  int rc = dev->drv->host_register(dev->drv, r->m->addr, r->m->size);

  if (rc != 0)
    task_fail(t, rc, "%s", drv_last_error());
}

static void register_done(task_t *t)
{
  reg_task_t *r = (reg_task_t *)t;
  shm_t *m = r->m;

  m->registering = 0;
  if (t->err.code != 0) {
    log_warn(0,
             "shared buffer of %zu bytes not page-locked (%s): copies "
             "with it run at pageable speed",
             m->size, t->err.msg);
    m->reg = NULL;
  }
  r->user->err = t->err;
  r->user_done(r->user);
  shm_unref(m);
  free(r);
}

void shm_register(shm_t *m, task_t *t, void (*done)(task_t *))
{
  device_t *dev = register_device();
  reg_task_t *r;

  t->err.code = 0;
  if (dev == NULL ||
      (r = task_new(sizeof(*r), register_run, register_done)) == NULL) {
    done(t);
    return;
  }
  m->reg = dev;
  m->reg_epoch = device_epoch(dev);
  m->registering = 1;
  shm_ref(m);
  r->m = m;
  r->user = t;
  r->user_done = done;
  exec_submit(dev->service, &r->t);
}

void shm_ref(shm_t *m)
{
  m->refs++;
}

static void release_run(task_t *t)
{
  shm_t *m = ((reg_task_t *)t)->m;

  /* A reset context took its registrations with it. */
  if (m->reg != NULL && device_epoch(m->reg) == m->reg_epoch)
    m->reg->drv->host_unregister(m->reg->drv, m->addr);
  munmap(m->addr, m->size);
  close(m->fd);
}

static void release_done(task_t *t)
{
  free(((reg_task_t *)t)->m);
  free(t);
}

void shm_unref(shm_t *m)
{
  reg_task_t *r;

  if (--m->refs > 0)
    return;
  /* Unregistering waits for the device; unmapping 1 GiB takes a while:
   * neither belongs on the loop. Any service executor will do. */
  device_t *dev = m->reg != NULL ? m->reg : device_get(0);
  if (dev == NULL ||
      (r = task_new(sizeof(*r), release_run, release_done)) == NULL) {
    munmap(m->addr, m->size);
    close(m->fd);
    free(m);
    return;
  }
  r->m = m;
  exec_submit(dev->service, &r->t);
}

void shm_unref_now(shm_t *m)
{
  if (m->refs > 1 || m->reg != NULL) {
    shm_unref(m);
    return;
  }
  munmap(m->addr, m->size);
  close(m->fd);
  free(m);
}

int shm_range_ok(const shm_t *m, uint64_t off, uint64_t len)
{
  return off <= m->size && len <= m->size - off;
}
