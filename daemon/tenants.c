/* SPDX-License-Identifier: MIT */
/* daemon/tenants.c: the per-uid records that sum what a tenant's sessions
 * hold (tenants.h). Same layer as resources.c, which does the counting. */
#include "config.h"

#include <stdlib.h>

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

int tenant_attach(session_t *s)
{
  daemon_t *d = s->d;
  tenant_t *t = tenant_find(d, s->peer_uid);

  if (t == NULL) {
    if ((t = calloc(1, sizeof(*t))) == NULL)
      return HIPD_ENOMEM;
    t->uid = s->peer_uid;
    list_insert_tail(&d->tenants, &t->node);
  }
  t->refs++;
  t->sessions++;
  s->tenant = t;
  s->tenant_open = 1;
  return 0;
}

void tenant_session_closed(session_t *s)
{
  if (s->tenant != NULL && s->tenant_open) {
    s->tenant_open = 0;
    s->tenant->sessions--;
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
