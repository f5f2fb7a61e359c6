/* SPDX-License-Identifier: MIT */
/* daemon/tenants.c: the per-uid records that sum what a tenant's sessions
 * hold (tenants.h). Same layer as resources.c, which does the counting. */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hipd.h"
#include "session.h"
#include "tenants.h"

tenant_t *tenant_find(daemon_t *d, uid_t uid)
{
  for (list_node_t *n = d->tenants.next; n != &d->tenants; n = n->next) {
    tenant_t *t = list_entry(n, tenant_t, node);
    if (t->uid == uid)
      return t;
  }
  return NULL;
}

/* This worker's place on its uid's page (tenant_page_attach). */
static tenant_page_t *page;
static uint32_t page_slot;

int tenant_page_attach(hipd_err_t *err)
{
  const char *v = getenv(TENANT_SLOT_ENV);
  struct stat st;
  char *end;
  unsigned long slot;
  void *map;

  err_clear(err);
  if (v == NULL)
    return 0;
  slot = strtoul(v, &end, 10);
  unsetenv(TENANT_SLOT_ENV);
  if (*end != '\0' || slot > UINT32_MAX / 2 ||
      fstat(TENANT_PAGE_FD, &st) != 0 ||
      (uint64_t)st.st_size < TENANT_PAGE_SIZE(slot + 1))
    return err_set(err, HIPD_EINVAL,
                   "the tenant page (fd %d, slot %s) is not usable",
                   TENANT_PAGE_FD, v);
  map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
             TENANT_PAGE_FD, 0);
  close(TENANT_PAGE_FD);
  if (map == MAP_FAILED)
    return err_set(err, HIPD_EIO, "cannot map the tenant page: %s",
                   strerror(errno));
  page = map;
  page_slot = (uint32_t)slot;
  return 0;
}

uint64_t tenant_count_add(tenant_t *t, tenant_counter_t c, int64_t delta)
{
  t->here[c] += (uint64_t)delta;
  if (t->total == NULL)
    return t->here[c];
  atomic_fetch_add(&t->mine->v[c], (uint64_t)delta);
  return atomic_fetch_add(&t->total->v[c], (uint64_t)delta) + (uint64_t)delta;
}

uint64_t tenant_count(const tenant_t *t, tenant_counter_t c)
{
  return t->total != NULL ? atomic_load(&t->total->v[c]) : t->here[c];
}

int tenant_attach(session_t *s)
{
  daemon_t *d = s->d;
  tenant_t *t = tenant_find(d, s->peer_uid);

  if (t == NULL) {
    if ((t = calloc(1, sizeof(*t))) == NULL)
      return HIPD_ENOMEM;
    t->uid = s->peer_uid;
    /* A session-mode worker serves one uid: the page is that uid's. */
    if (page != NULL && d->tenant_uid == s->peer_uid) {
      t->total = &page->total;
      t->mine = &page->slot[page_slot];
    }
    list_init(&t->connecting);
    list_insert_tail(&d->tenants, &t->node);
  }
  t->refs++;
  tenant_count_add(t, TC_SESSIONS, 1);
  s->tenant = t;
  s->tenant_open = 1;
  list_insert_tail(&t->connecting, &s->connecting_node);
  return 0;
}

void tenant_connecting_done(session_t *s)
{
  /* Linked by tenant_attach(), which set s->tenant; list_remove() leaves
   * the node linked to itself, so a second removal is none. */
  if (s->tenant != NULL)
    list_remove(&s->connecting_node);
}

uint32_t tenant_connecting_count(const tenant_t *t, uint64_t now_ms)
{
  uint32_t n = 0;

  /* Oldest first: the first one within the grace ends the count. */
  for (const list_node_t *p = t->connecting.next; p != &t->connecting;
       p = p->next) {
    const session_t *s = list_entry(p, session_t, connecting_node);
    if (now_ms - s->opened_ms < TENANT_CONNECTING_GRACE_MS)
      break;
    n++;
  }
  return n;
}

int tenant_connecting_check(const daemon_config_t *cfg, uid_t uid,
                            uint32_t silent, char *why, size_t whylen)
{
  if (cfg->tenant_max_connecting == 0 || silent < cfg->tenant_max_connecting)
    return 0;
  snprintf(why, whylen,
           "uid %u has %u connections without a hello for 1 s or more "
           "(--tenant-max-connecting)",
           (unsigned)uid, cfg->tenant_max_connecting);
  return HIPD_ETOOMANY;
}

void tenant_session_closed(session_t *s)
{
  tenant_connecting_done(s);
  if (s->tenant != NULL && s->tenant_open) {
    s->tenant_open = 0;
    tenant_count_add(s->tenant, TC_SESSIONS, -1);
  }
}

void tenant_put(session_t *s)
{
  tenant_t *t = s->tenant;

  if (t == NULL)
    return;
  tenant_session_closed(s);
  s->tenant = NULL;
  if (--t->refs == 0) {
    list_remove(&t->node);
    free(t);
  }
}
