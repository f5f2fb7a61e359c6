/* SPDX-License-Identifier: MIT */
/* daemon/util/account.c: the one account lookup (account.h). */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "hipd.h"

#define BUF_FIRST 4096
#define BUF_MAX (16u << 20)

/* The errors getpw*_r / getgr*_r give for "no such entry" besides 0. */
static int is_missing(int e)
{
  return e == 0 || e == ENOENT || e == ESRCH || e == EBADF || e == EPERM;
}

/* Grow *@p buf (of *@p size bytes) for a retry after ERANGE.
 * @return 0, or HIPD_ENOMEM (past BUF_MAX too). */
static int buf_grow(char **buf, size_t *size)
{
  size_t want = *size ? *size * 2 : BUF_FIRST;
  char *n;

  if (want > BUF_MAX || (n = realloc(*buf, want)) == NULL)
    return HIPD_ENOMEM;
  *buf = n;
  *size = want;
  return 0;
}

static int pw_copy(const struct passwd *pw, account_t *a, hipd_err_t *err,
                   const char *what)
{
  size_t len = strlen(pw->pw_name);

  if (len >= sizeof(a->name))
    return err_set(err, HIPD_ERANGE, "account %s: name of %zu bytes", what,
                   len);
  a->uid = pw->pw_uid;
  a->gid = pw->pw_gid;
  memcpy(a->name, pw->pw_name, len + 1);
  return 0;
}

/* The one loop: getpwnam_r (by name) or getpwuid_r (by uid). */
static int pw_lookup(const char *name, uid_t uid, account_t *a, hipd_err_t *err)
{
  struct passwd pwb, *pw = NULL;
  char *buf = NULL, what[64];
  size_t size = 0;
  int e, rc;

  if (name != NULL)
    snprintf(what, sizeof(what), "'%.48s'", name);
  else
    snprintf(what, sizeof(what), "of uid %u", (unsigned)uid);
  do {
    if ((rc = buf_grow(&buf, &size)) != 0) {
      free(buf);
      return err_set(err, rc, "account %s: out of memory", what);
    }
    e = name != NULL ? getpwnam_r(name, &pwb, buf, size, &pw)
                     : getpwuid_r(uid, &pwb, buf, size, &pw);
  } while (pw == NULL && e == ERANGE);
  if (pw == NULL)
    rc = is_missing(e) ? err_set(err, HIPD_ENOENT, "no account %s", what)
                       : err_set(err, HIPD_EIO, "cannot look up account %s: %s",
                                 what, strerror(e));
  else
    rc = pw_copy(pw, a, err, what);
  free(buf);
  return rc;
}

int account_by_name(const char *name, account_t *a, hipd_err_t *err)
{
  if (name == NULL || name[0] == '\0')
    return err_set(err, HIPD_EINVAL, "no account name given");
  return pw_lookup(name, 0, a, err);
}

int account_by_uid(uid_t uid, account_t *a, hipd_err_t *err)
{
  return pw_lookup(NULL, uid, a, err);
}

/* getgrnam_r (by name) or getgrgid_r (by gid); copies the gid or name. */
static int gr_lookup(const char *name, gid_t gid, gid_t *gid_out,
                     char *name_out, size_t name_size, hipd_err_t *err)
{
  struct group grb, *gr = NULL;
  char *buf = NULL, what[64];
  size_t size = 0;
  int e, rc = 0;

  if (name != NULL)
    snprintf(what, sizeof(what), "'%.48s'", name);
  else
    snprintf(what, sizeof(what), "of gid %u", (unsigned)gid);
  do {
    if ((rc = buf_grow(&buf, &size)) != 0) {
      free(buf);
      return err_set(err, rc, "group %s: out of memory", what);
    }
    e = name != NULL ? getgrnam_r(name, &grb, buf, size, &gr)
                     : getgrgid_r(gid, &grb, buf, size, &gr);
  } while (gr == NULL && e == ERANGE);
  if (gr == NULL) {
    rc = is_missing(e) ? err_set(err, HIPD_ENOENT, "no group %s", what)
                       : err_set(err, HIPD_EIO, "cannot look up group %s: %s",
                                 what, strerror(e));
  } else if (gid_out != NULL) {
    *gid_out = gr->gr_gid;
  } else if (strlen(gr->gr_name) >= name_size) {
    rc = err_set(err, HIPD_ERANGE, "group %s: name too long", what);
  } else {
    strcpy(name_out, gr->gr_name);
  }
  free(buf);
  return rc;
}

int account_group_by_name(const char *name, gid_t *gid, hipd_err_t *err)
{
  if (name == NULL || name[0] == '\0')
    return err_set(err, HIPD_EINVAL, "no group name given");
  return gr_lookup(name, 0, gid, NULL, 0, err);
}

int account_group_name(gid_t gid, char *name, size_t size, hipd_err_t *err)
{
  return gr_lookup(NULL, gid, NULL, name, size, err);
}

int account_groups(const account_t *a, gid_t **gids, int *n, hipd_err_t *err)
{
  int want = 32;
  gid_t *v = NULL;

  for (;;) {
    gid_t *g = realloc(v, (size_t)want * sizeof(*v));
    int got = want;

    if (g == NULL) {
      free(v);
      return err_set(err, HIPD_ENOMEM, "groups of '%s': out of memory",
                     a->name);
    }
    v = g;
    if (getgrouplist(a->name, a->gid, v, &got) >= 0) {
      *gids = v;
      *n = got;
      return 0;
    }
    /* got is now the number needed; guard against a list that keeps
     * growing between calls. */
    if (got <= want || got > 65536) {
      free(v);
      return err_set(err, HIPD_EIO, "cannot list the groups of '%s'", a->name);
    }
    want = got;
  }
}
