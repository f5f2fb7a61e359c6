/* SPDX-License-Identifier: MIT */
/* daemon/policy.c: the access rules (policy.h): parsing them at start,
 * deciding for a peer at connect, and the messages that name the rule. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device.h"
#include "drivers/driver.h"
#include "grants.h"
#include "hipd.h"
#include "policy.h"
#include "rpc.h"
#include "util/account.h"
#include "util/clock.h"
#include "util/parse.h"
#include "util/ratelimit.h"
#include "util/who_list.h"

#define POLICY_MAX_DEVICES 64
#define POLICY_MAX_GROUPS 1024

struct policy {
  int users_set, groups_set; /* --allow-users / --allow-groups given */
  who_list_t users, groups;
  int strict;      /* --strict-allow: root and self are not implied */
  uid_t self;      /* hipd's uid */
  int need_groups; /* a rule names a group: read the peer's groups */
  struct {
    int set;        /* a --device-allow rule names this device */
    who_list_t who; /* the union of its rules' lists */
    char *text;     /* its rules, for messages */
  } dev[POLICY_MAX_DEVICES];
  ratelimit_t answered; /* refusals told, per uid (policy_refuse) */
};

/* Append the words of comma list @p text to @p l (who_list_parse()),
 * noting whether a rule names a group. */
static int list_parse(struct policy *p, const char *opt, const char *text,
                      who_kind_t kind, who_list_t *l, hipd_err_t *err)
{
  int rc = who_list_parse(l, opt, text, kind, err);

  p->need_groups |= l->groups;
  return rc;
}

/* Does @p spec ("3", "cpu", "cpu:1") name device @p dev? */
static int names_device(const char *spec, const device_t *dev)
{
  const char *colon = strchr(spec, ':');
  uint32_t v;

  if (util_parse_id(spec, &v))
    return (int)v == dev->id;
  if (colon == NULL)
    return strcmp(spec, dev->drv->name) == 0;
  return strlen(dev->drv->name) == (size_t)(colon - spec) &&
         strncmp(spec, dev->drv->name, (size_t)(colon - spec)) == 0 &&
         util_parse_id(colon + 1, &v) && (int)v == dev->local;
}

static int device_rule(struct policy *p, const char *rule, hipd_err_t *err)
{
  const char *eq = strchr(rule, '=');
  char spec[64];
  int matched = 0, rc;

  if (eq == NULL || eq == rule || (size_t)(eq - rule) >= sizeof(spec)) {
    return err_set(err, HIPD_EINVAL, "--device-allow: '%s' is not DEV=LIST",
                   rule);
  }
  memcpy(spec, rule, (size_t)(eq - rule));
  spec[eq - rule] = '\0';
  for (int i = 0; i < devices_count() && i < POLICY_MAX_DEVICES; i++) {
    const device_t *dev = device_get(i);
    char *t;
    if (!names_device(spec, dev))
      continue;
    matched = 1;
    rc =
        list_parse(p, "--device-allow", eq + 1, WHO_MIXED, &p->dev[i].who, err);
    if (rc != 0)
      return rc;
    p->dev[i].set = 1;
    if (p->dev[i].text == NULL)
      t = strdup(rule);
    else if (asprintf(&t, "%s --device-allow %s", p->dev[i].text, rule) < 0)
      t = NULL;
    if (t == NULL)
      return HIPD_ENOMEM;
    free(p->dev[i].text);
    p->dev[i].text = t;
  }
  if (!matched) {
    return err_set(err, HIPD_EINVAL,
                   "--device-allow: '%s' names no device this daemon serves",
                   spec);
  }
  return 0;
}

void policy_free(daemon_t *d)
{
  struct policy *p = d->policy;

  if (p == NULL)
    return;
  who_list_free(&p->users);
  who_list_free(&p->groups);
  for (int i = 0; i < POLICY_MAX_DEVICES; i++) {
    who_list_free(&p->dev[i].who);
    free(p->dev[i].text);
  }
  free(p);
  d->policy = NULL;
}

int policy_init(daemon_t *d, hipd_err_t *err)
{
  const daemon_config_t *cfg = &d->cfg;
  struct policy *p;
  int rc = 0;

  d->policy = NULL;
  err_clear(err);
  if (cfg->allow_users == NULL && cfg->allow_groups == NULL &&
      cfg->ndevice_allow == 0)
    return 0;
  if ((p = calloc(1, sizeof(*p))) == NULL)
    return err->code = HIPD_ENOMEM;
  d->policy = p;
  p->strict = cfg->strict_allow;
  p->self = d->daemon_uid;
  if (cfg->allow_users != NULL) {
    p->users_set = 1;
    rc = list_parse(p, "--allow-users", cfg->allow_users, WHO_USERS, &p->users,
                    err);
  }
  if (rc == 0 && cfg->allow_groups != NULL) {
    p->groups_set = 1;
    rc = list_parse(p, "--allow-groups", cfg->allow_groups, WHO_GROUPS,
                    &p->groups, err);
  }
  /* The listener serves no device: its workers check the device rules. */
  for (uint32_t i = 0;
       rc == 0 && d->role != ROLE_LISTENER && i < cfg->ndevice_allow; i++)
    rc = device_rule(p, cfg->device_allow[i], err);
  if (rc != 0) {
    err->code = rc; /* with no message for HIPD_ENOMEM */
    policy_free(d);
  }
  return rc;
}

int policy_check_peer(const daemon_t *d, uid_t uid, gid_t gid, char *who,
                      size_t wholen, uint64_t *devmask, uint64_t *grant,
                      hipd_err_t *err)
{
  const struct policy *p = d->policy;
  const daemon_config_t *cfg = &d->cfg;
  const grant_t *g = grants_newest(d, uid);
  int ndev = devices_count(), ngids = 1, implied;
  uint64_t every = ndev >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << ndev) - 1;
  gid_t gids[POLICY_MAX_GROUPS];
  account_t a;
  int known;

  err_clear(err);
  *devmask = every;
  if (grant != NULL)
    *grant = g != NULL ? g->serial : 0;
  if (p == NULL) {
    snprintf(who, wholen, "uid %u", (unsigned)uid);
    return 0;
  }
  known = account_by_uid(uid, &a, NULL) == 0;
  if (known)
    snprintf(who, wholen, "uid %u (%s)", (unsigned)uid, a.name);
  else
    snprintf(who, wholen, "uid %u", (unsigned)uid);
  gids[0] = gid;
  if (p->need_groups && known) {
    /* The user's groups from the group database, after the peer's own
     * primary gid: the first POLICY_MAX_GROUPS - 1 of them. */
    gid_t *all;
    int n;
    if (account_groups(&a, &all, &n, NULL) == 0) {
      if (n > POLICY_MAX_GROUPS - 1)
        n = POLICY_MAX_GROUPS - 1;
      memcpy(gids + 1, all, (size_t)n * sizeof(gids[0]));
      ngids = 1 + n;
      free(all);
    }
  }
  implied = !p->strict && (uid == 0 || uid == p->self);
  if ((p->users_set || p->groups_set) && !implied &&
      !(p->users_set && who_list_match(&p->users, uid, gids, ngids)) &&
      !(p->groups_set && who_list_match(&p->groups, uid, gids, ngids))) {
    if (g != NULL) {
      /* Not admitted by the rules, but by its grant: its devices alone. */
      *devmask = g->devmask & every;
      return 0;
    }
    if (p->users_set && p->groups_set)
      err_set(err, HIPD_EPERM,
              "%s is not allowed by --allow-users %s nor --allow-groups %s",
              who, cfg->allow_users, cfg->allow_groups);
    else if (p->users_set)
      err_set(err, HIPD_EPERM, "%s is not allowed by --allow-users %s", who,
              cfg->allow_users);
    else
      err_set(err, HIPD_EPERM, "%s is not allowed by --allow-groups %s", who,
              cfg->allow_groups);
    *devmask = 0;
    return HIPD_EPERM;
  }
  for (int i = 0; i < ndev && i < POLICY_MAX_DEVICES; i++)
    if (p->dev[i].set && !implied &&
        !who_list_match(&p->dev[i].who, uid, gids, ngids))
      *devmask &= ~((uint64_t)1 << i);
  /* A grant adds its devices to what the rules allow. */
  if (g != NULL)
    *devmask |= g->devmask & every;
  return 0;
}

int policy_refuse(daemon_t *d, int fd, uid_t uid, const hipd_err_t *err,
                  char *why, size_t whylen)
{
  struct policy *p = d->policy;
  msgpack_sbuffer sb;
  msgpack_packer pk;
  ssize_t n = -1;

  if (p != NULL && !ratelimit_take(&p->answered, uid, util_now_ns(),
                                   REFUSAL_RATE, REFUSAL_BURST, NULL)) {
    snprintf(why, whylen,
             "not allowed: %s (not told: uid %u is past its refusals told, "
             "%d at once and %d a second)",
             err->msg, (unsigned)uid, REFUSAL_BURST, REFUSAL_RATE);
    return 0;
  }
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_refused(&pk, err->code, err->msg);
  if (sb.data == NULL)
    errno = ENOMEM;
  else
    do
      n = send(fd, sb.data, sb.size, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sb.size) {
    snprintf(why, whylen, "not allowed: %s", err->msg);
  } else {
    /* A fresh socket takes a few hundred bytes: this is a peer gone
     * already, or a partial message the client takes for the end. */
    snprintf(why, whylen, "not allowed: %s (not told: %s)", err->msg,
             n < 0 ? strerror(errno) : "the socket took part of it");
    n = -1;
  }
  msgpack_sbuffer_destroy(&sb);
  return n >= 0;
}

void policy_device_refusal(const daemon_t *d, const char *who,
                           const device_t *dev, hipd_err_t *err)
{
  const struct policy *p = d->policy;
  const char *rule =
      p != NULL && dev->id < POLICY_MAX_DEVICES ? p->dev[dev->id].text : NULL;

  if (p == NULL || rule == NULL)
    err_set(err, HIPD_EPERM,
            "device %d (%s:%d) is not allowed for %s: it is not among its "
            "grant's devices",
            dev->id, dev->drv->name, dev->local, who);
  else
    err_set(err, HIPD_EPERM,
            "device %d (%s:%d) is not allowed for %s by "
            "--device-allow %s",
            dev->id, dev->drv->name, dev->local, who, rule);
}
