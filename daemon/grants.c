/* SPDX-License-Identifier: MIT */
/* daemon/grants.c: access granted at run time (grants.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grants.h"
#include "hipd.h"
#include "session.h"
#include "tenants.h"
#include "util/array.h"

int grants_label_ok(const char *label, size_t len)
{
  if (label == NULL || len == 0 || len > GRANT_LABEL_MAX)
    return 0;
  for (size_t i = 0; i < len; i++) {
    char c = label[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || strchr("._:@+-", c) != NULL) ||
        c == '\0')
      return 0;
  }
  return 1;
}

const grant_t *grants_by_label(const daemon_t *d, const char *label)
{
  const grants_t *t = &d->grants;

  for (uint32_t i = 0; i < t->n; i++)
    if (strcmp(t->g[i].label, label) == 0)
      return &t->g[i];
  return NULL;
}

grant_t *grants_find(const daemon_t *d, uint64_t serial)
{
  const grants_t *t = &d->grants;

  if (serial == 0)
    return NULL;
  for (uint32_t i = 0; i < t->n; i++)
    if (t->g[i].serial == serial)
      return &t->g[i];
  return NULL;
}

const grant_t *grants_newest(const daemon_t *d, uid_t uid)
{
  const grants_t *t = &d->grants;
  const grant_t *best = NULL;

  for (uint32_t i = 0; i < t->n; i++)
    if (t->g[i].uid == uid && (best == NULL || t->g[i].serial > best->serial))
      best = &t->g[i];
  return best;
}

int grants_add(daemon_t *d, uid_t uid, uint64_t devmask, uint64_t quota,
               const char *label, const grant_t **out, hipd_err_t *err)
{
  grants_t *t = &d->grants;
  grant_t g;

  err_clear(err);
  memset(&g, 0, sizeof(g));
  g.serial = t->next_serial + 1;
  /* A slot of counts of its own among the uid's live grants (tenants.h:
   * TC_GRANT0), so that its quota is counted across the uid's workers. */
  {
    int used[TENANT_GRANT_SLOTS] = {0}, n = 0;
    for (uint32_t i = 0; i < t->n; i++)
      if (t->g[i].uid == uid && !used[t->g[i].serial % TENANT_GRANT_SLOTS]) {
        used[t->g[i].serial % TENANT_GRANT_SLOTS] = 1;
        n++;
      }
    if (n >= TENANT_GRANT_SLOTS)
      return err_set(err, HIPD_ETOOMANY,
                     "uid %u has %d grants already (the most one user may "
                     "hold at once)",
                     (unsigned)uid, TENANT_GRANT_SLOTS);
    while (used[g.serial % TENANT_GRANT_SLOTS])
      g.serial++;
  }
  if (label != NULL && label[0] != '\0')
    snprintf(g.label, sizeof(g.label), "%s", label);
  else
    snprintf(g.label, sizeof(g.label), "grant-%llu",
             (unsigned long long)g.serial);
  if (grants_by_label(d, g.label) != NULL)
    return err_set(err, HIPD_EEXIST, "a grant labelled '%s' exists already",
                   g.label);
  if (t->n >= GRANTS_MAX)
    return err_set(err, HIPD_ETOOMANY,
                   "%u grants exist already (the most hipd keeps)", t->n);
  if (ARRAY_GROW(t->g, t->n, t->cap, 8) != 0)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  g.uid = uid;
  g.devmask = devmask;
  g.quota = quota;
  g.since = (uint64_t)time(NULL);
  t->next_serial = g.serial;
  t->g[t->n] = g;
  *out = &t->g[t->n++];
  return 0;
}

int grants_remove(daemon_t *d, uint64_t serial)
{
  grants_t *t = &d->grants;

  for (uint32_t i = 0; i < t->n; i++)
    if (t->g[i].serial == serial) {
      memmove(&t->g[i], &t->g[i + 1], (t->n - i - 1) * sizeof(t->g[0]));
      t->n--;
      return 0;
    }
  return HIPD_ENOENT;
}

int grants_replace(daemon_t *d, const grant_t *in, uint32_t n)
{
  grants_t *t = &d->grants;
  grant_t *g = NULL;

  if (n > 0 && (g = calloc(n, sizeof(*g))) == NULL)
    return HIPD_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    const grant_t *had = grants_find(d, in[i].serial);
    g[i] = in[i];
    /* What its sessions did here stays with it. */
    memset(&g[i].u, 0, sizeof(g[i].u));
    if (had != NULL)
      g[i].u = had->u;
  }
  free(t->g);
  t->g = g;
  t->n = t->cap = n;
  return 0;
}

uint32_t grants_close_revoked(daemon_t *d, const grant_t *old, uint32_t nold,
                              const char *why, int64_t by)
{
  uint32_t closed = 0;

  for (list_node_t *p = d->sessions.next, *next; p != &d->sessions; p = next) {
    session_t *s = list_entry(p, session_t, node);
    const char *label = "?";
    char reason[192];
    next = p->next;
    if (s->grant == 0 || s->closing || grants_find(d, s->grant) != NULL)
      continue;
    for (uint32_t i = 0; i < nold; i++)
      if (old[i].serial == s->grant)
        label = old[i].label;
    snprintf(reason, sizeof(reason), "access revoked: grant '%s' ended%s",
             label, why != NULL ? why : "");
    if (by >= 0 && s->peer_uid == (uid_t)by && s->out_queued > 0) {
      /* The revoker's own uid (an admin), replies on their way (the
       * revoke's answer, when its caller came under the grant): written
       * first, then it closes, as a session that kills itself. */
      snprintf(s->kill_why, sizeof(s->kill_why), "%s", reason);
      s->close_flushed = 1;
    } else {
      session_close_told(s, HIPD_EPERM, reason);
    }
    closed++;
  }
  return closed;
}

grant_usage_t *grants_usage_of(session_t *s)
{
  grant_t *g = grants_find(s->d, s->grant);

  return g != NULL ? &g->u : NULL;
}

void grants_session_begin(session_t *s, uint64_t serial)
{
  grant_t *g = grants_find(s->d, serial);

  s->grant = g != NULL ? serial : 0;
  if (g != NULL) {
    g->u.sessions++;
    s->grant_open = 1;
  }
}

void grants_session_end(session_t *s)
{
  grant_usage_t *u;

  if (!s->grant_open)
    return;
  s->grant_open = 0;
  if ((u = grants_usage_of(s)) != NULL && u->sessions > 0)
    u->sessions--;
}

int grants_mem_reserve(session_t *s, uint64_t bytes, hipd_err_t *err)
{
  grant_t *g = grants_find(s->d, s->grant);
  tenant_counter_t c = TC_GRANT0 + s->grant % TENANT_GRANT_SLOTS;
  uint64_t total;

  err_clear(err);
  if (s->grant == 0)
    return 0;
  /* The grant's bytes in every worker of the uid (the tenant page's slot
   * of the grant, tenants.h), else in this process: reserved first, then
   * checked, so that two workers reserving at once cannot both pass.
   * Counted by the session's grant, there or not, as grants_mem_release()
   * takes it back. */
  if (s->tenant != NULL)
    total = tenant_count_add(s->tenant, c, (int64_t)bytes);
  else
    total = (g != NULL ? g->u.held : 0) + bytes;
  if (g == NULL)
    return 0;
  if (g->quota != 0 && total > g->quota) {
    if (s->tenant != NULL)
      tenant_count_add(s->tenant, c, -(int64_t)bytes);
    return err_set(err, HIPD_EQUOTA,
                   "%llu bytes would exceed grant '%s''s quota of %llu bytes "
                   "(%llu in use by its sessions)",
                   (unsigned long long)bytes, g->label,
                   (unsigned long long)g->quota,
                   (unsigned long long)(total - bytes));
  }
  g->u.held += bytes;
  if (g->u.held > g->u.peak)
    g->u.peak = g->u.held;
  return 0;
}

void grants_mem_release(session_t *s, uint64_t bytes)
{
  grant_t *g = grants_find(s->d, s->grant);

  /* Its slot's count, also after the grant is gone (a revoked grant's
   * sessions free their buffers at their teardown). */
  if (s->grant != 0 && s->tenant != NULL)
    tenant_count_add(s->tenant, TC_GRANT0 + s->grant % TENANT_GRANT_SLOTS,
                     -(int64_t)bytes);
  if (g != NULL)
    g->u.held -= bytes < g->u.held ? bytes : g->u.held;
}

void grants_free(daemon_t *d)
{
  free(d->grants.g);
  memset(&d->grants, 0, sizeof(d->grants));
}
