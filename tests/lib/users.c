/* SPDX-License-Identifier: MIT */
/* tests/lib/users.c: the test users and the daemons they reach (see
 * users.h). */
#include "config.h"

#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "users.h"

/* system() of a command line built from @p fmt, its output discarded.
 * @return 0 if it exited 0, else -1. */
static int run_quiet(const char *fmt, const char *a, const char *b)
{
  char cmd[256], line[320];

  snprintf(cmd, sizeof(cmd), fmt, a, b);
  snprintf(line, sizeof(line), "%s >/dev/null 2>&1", cmd);
  return system(line) == 0 ? 0 : -1;
}

int users_make(const char *name, uid_t *uid, gid_t *gid)
{
  struct passwd *pw = getpwnam(name);

  if (pw == NULL) {
    if (run_quiet("useradd -M -N -s /usr/sbin/nologin %s%s", name, "") != 0 ||
        (pw = getpwnam(name)) == NULL)
      return -1;
  }
  if (uid != NULL)
    *uid = pw->pw_uid;
  if (gid != NULL)
    *gid = pw->pw_gid;
  return 0;
}

int users_make_group(const char *group, const char *member,
                     const char *not_member)
{
  if (getgrnam(group) == NULL && run_quiet("groupadd %s%s", group, "") != 0)
    return -1;
  if (run_quiet("usermod -a -G %s %s", group, member) != 0)
    return -1;
  /* Not a member already is as good as taken out. */
  if (not_member != NULL)
    (void)run_quiet("gpasswd -d %s %s", not_member, group);
  return 0;
}

harness_daemon_t *users_start_sharedv(const char *devices,
                                      const char *const *extra)
{
  const char *args[40] = {"--socket-mode", "0666", "--devices", devices};
  int n = 4;
  harness_daemon_t *d;

  for (; extra != NULL && *extra != NULL && n < 39; extra++)
    args[n++] = *extra;
  args[n] = NULL;
  d = harness_startv(args);
  ck_assert_msg(d != NULL, "the daemon did not start");
  ck_assert_msg(harness_share_socket(d) == 0, "cannot open the directories");
  return d;
}

harness_daemon_t *users_start_shared(const char *arg, ...)
{
  const char *extra[32];
  int n = 0;
  va_list ap;

  va_start(ap, arg);
  for (const char *a = arg; a != NULL && n < 31; a = va_arg(ap, const char *))
    extra[n++] = a;
  va_end(ap);
  extra[n] = NULL;
  return users_start_sharedv("cpu", extra);
}

void users_as(const char *user, int (*fn)(void *, char *, size_t), void *arg)
{
  char msg[2048];
  int rc = harness_run_as(user, fn, arg, msg, sizeof(msg));

  ck_assert_msg(rc == 0, "as %s: %s", user, msg);
}
