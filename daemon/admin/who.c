/* SPDX-License-Identifier: MIT */
/* daemon/admin/who.c: who a uid is, for the admin layer: its user name
 * and whether it is an admin (root, or a member of --admin-group),
 * cached per uid for 60 s so that the loop does not wait for NSS on each
 * request (who.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/who.h"
#include "log.h"
#include "util/account.h"

/* A cached name and admin bit lasts this long. */
#define WHO_CACHE_MS 60000

static struct {
  /* --admin-group, resolved at start and at each reload */
  char group[256]; /* the name resolved, "" none */
  int group_ok;
  gid_t group_gid;
  /* Who is who, per uid. */
  struct who_cache {
    uid_t uid;
    int used, admin;
    uint64_t until_ms;
    char name[64];
  } who[64];
} who_state;

void admin_configure(daemon_t *d)
{
  const char *g = d->cfg.admin_group != NULL ? d->cfg.admin_group : "";
  gid_t gid;

  memset(who_state.who, 0,
         sizeof(who_state.who)); /* the group may have changed */
  snprintf(who_state.group, sizeof(who_state.group), "%s", g);
  who_state.group_ok = 0;
  if (g[0] == '\0')
    return;
  if (account_group_by_name(g, &gid, NULL) != 0) {
    log_warn(0,
             "--admin-group %s: no such group: only root is an admin until "
             "it exists and hipd is reloaded",
             g);
    return;
  }
  who_state.group_gid = gid;
  who_state.group_ok = 1;
}

/* The cached record of @p uid, filled now if it is missing or old. */
static struct who_cache *who_of(daemon_t *d, uid_t uid)
{
  uint64_t now = uv_now(d->loop);
  struct who_cache *c = NULL, *oldest = &who_state.who[0];
  account_t acct;
  gid_t *groups = NULL;
  int ngroups = 0;

  if (strcmp(who_state.group,
             d->cfg.admin_group != NULL ? d->cfg.admin_group : "") != 0)
    admin_configure(d); /* the option changed without admin_configure() */
  for (int i = 0; i < (int)(sizeof(who_state.who) / sizeof(who_state.who[0]));
       i++) {
    if (who_state.who[i].used && who_state.who[i].uid == uid) {
      c = &who_state.who[i];
      break;
    }
    if (!who_state.who[i].used || who_state.who[i].until_ms < oldest->until_ms)
      oldest = &who_state.who[i];
  }
  if (c != NULL && now < c->until_ms)
    return c;
  if (c == NULL)
    c = oldest;
  memset(c, 0, sizeof(*c));
  c->used = 1;
  c->uid = uid;
  c->until_ms = now + WHO_CACHE_MS;
  c->admin = uid == 0;
  if (account_by_uid(uid, &acct, NULL) != 0)
    return c;
  snprintf(c->name, sizeof(c->name), "%.*s", (int)sizeof(c->name) - 1,
           acct.name);
  if (!c->admin && who_state.group_ok &&
      account_groups(&acct, &groups, &ngroups, NULL) == 0) {
    for (int i = 0; i < ngroups; i++)
      if (groups[i] == who_state.group_gid)
        c->admin = 1;
    free(groups);
  }
  return c;
}

int admin_is_admin(daemon_t *d, uid_t uid)
{
  if (uid == 0)
    return 1;
  if (d->cfg.admin_group == NULL || d->cfg.admin_group[0] == '\0')
    return 0;
  return who_of(d, uid)->admin;
}

void admin_uid_who(daemon_t *d, uid_t uid, char *out, size_t size)
{
  const char *name = who_of(d, uid)->name;

  if (name[0] != '\0')
    snprintf(out, size, "uid %u (%s)", (unsigned)uid, name);
  else
    snprintf(out, size, "uid %u", (unsigned)uid);
}

void admin_user_name(daemon_t *d, uint64_t uid, char *out, size_t size)
{
  out[0] = '\0';
  if (uid <= UINT32_MAX)
    snprintf(out, size, "%s", who_of(d, (uid_t)uid)->name);
}
