/* SPDX-License-Identifier: MIT */
/* daemon/privsep/tenant_pages.c: per-uid counts shared by the session
 * workers of one uid (tenant_pages.h, tenants.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hipd.h"
#include "privsep/tenant_pages.h"
#include "tenants.h"

typedef struct tpage {
  struct tpage *next;
  uid_t uid;
  int fd;
  tenant_page_t *map;
  size_t size;
  uint32_t nslots;
  uint32_t used;  /* slots taken */
  uint8_t *taken; /* nslots flags */
} tpage_t;

static tpage_t *pages;

static tpage_t *page_find(uid_t uid, tpage_t ***link)
{
  tpage_t **l = &pages;

  for (; *l != NULL; l = &(*l)->next)
    if ((*l)->uid == uid)
      break;
  if (link != NULL)
    *link = l;
  return *l;
}

static void page_free(tpage_t *p)
{
  if (p->map != NULL)
    munmap(p->map, p->size);
  if (p->fd >= 0)
    close(p->fd);
  free(p->taken);
  free(p);
}

static tpage_t *page_new(uid_t uid, uint32_t nslots, hipd_err_t *err)
{
  tpage_t *p = calloc(1, sizeof(*p));

  if (p == NULL || (p->taken = calloc(nslots, 1)) == NULL) {
    free(p);
    err_set(err, HIPD_ENOMEM, "out of memory");
    return NULL;
  }
  p->uid = uid;
  p->nslots = nslots;
  p->size = TENANT_PAGE_SIZE(nslots);
  p->fd = memfd_create("hipd-tenant", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  /* Sealed at its size: a worker that could shrink it would fault the
   * listener, which maps it too. */
  if (p->fd < 0 || ftruncate(p->fd, (off_t)p->size) != 0 ||
      fcntl(p->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
          0 ||
      (p->map = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd,
                     0)) == MAP_FAILED) {
    err_set(err, HIPD_EIO, "cannot make the tenant page of uid %u: %s",
            (unsigned)uid, strerror(errno));
    p->map = NULL;
    page_free(p);
    return NULL;
  }
  return p;
}

int tenant_pages_take(uid_t uid, uint32_t nslots, int *fd, uint32_t *slot,
                      hipd_err_t *err)
{
  tpage_t *p = page_find(uid, NULL);

  err_clear(err);
  if (p == NULL) {
    if ((p = page_new(uid, nslots, err)) == NULL)
      return err->code;
    p->next = pages;
    pages = p;
  }
  for (uint32_t i = 0; i < p->nslots; i++)
    if (!p->taken[i]) {
      p->taken[i] = 1;
      p->used++;
      *fd = p->fd;
      *slot = i;
      return 0;
    }
  return err_set(err, HIPD_ETOOMANY, "uid %u has %u session workers already",
                 (unsigned)uid, p->nslots);
}

void tenant_pages_give(uid_t uid, uint32_t slot)
{
  tpage_t **link, *p = page_find(uid, &link);
  tenant_counts_t *mine;

  if (p == NULL || slot >= p->nslots || !p->taken[slot])
    return;
  mine = &p->map->slot[slot];
  for (int c = 0; c < TC_COUNT; c++)
    atomic_fetch_sub(&p->map->total.v[c], atomic_exchange(&mine->v[c], 0));
  p->taken[slot] = 0;
  if (--p->used == 0) {
    *link = p->next;
    page_free(p);
  }
}

void tenant_pages_free(void)
{
  while (pages != NULL) {
    tpage_t *p = pages;
    pages = p->next;
    page_free(p);
  }
}
