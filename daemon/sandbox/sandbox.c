/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox.c: the probe, identities, capabilities, rlimits,
 * the clean environment and sandbox_enter(), which applies them in order.
 * Landlock is in sandbox_landlock.c, seccomp in sandbox_seccomp.c; the
 * contract is in sandbox.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hipd.h"
#include "sandbox.h"
#include "sandbox_internal.h"
#include "sanitize.h"
#include "util/account.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* ---------------------------------------------------------------- probe */

/* Whether the calling thread holds any effective capability. */
static bool caps_held(void)
{
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];

  memset(d, 0, sizeof(d));
  if (syscall(SYS_capget, &h, d) != 0)
    return false;
  return d[0].effective != 0 || d[1].effective != 0;
}

/* Whether the calling thread may change the bounding set. */
static bool has_setpcap(void)
{
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];

  memset(d, 0, sizeof(d));
  if (syscall(SYS_capget, &h, d) != 0)
    return false;
  return (d[CAP_SETPCAP / 32].effective & (1u << (CAP_SETPCAP % 32))) != 0;
}

void sandbox_probe(sandbox_support_t *out)
{
  pid_t pid;
  int st;

  memset(out, 0, sizeof(*out));
  out->root = geteuid() == 0;
  out->caps = caps_held();
  out->no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
  out->seccomp_on = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2;
  out->seccomp = sandbox_seccomp_available();
  out->landlock_abi = sandbox_landlock_abi();
  /* Namespaces: try in a child, which exits with a bit mask. */
  pid = fork();
  if (pid == 0) {
    int bits = 0;
    if (unshare(CLONE_NEWNS) == 0)
      bits |= 2; /* root: a mount namespace of its own */
    if (unshare(CLONE_NEWUSER) == 0) {
      bits |= 1;
      if (!(bits & 2) && unshare(CLONE_NEWNS) == 0)
        bits |= 2; /* inside the new user namespace */
    }
    _exit(bits);
  }
  if (pid < 0)
    return;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR)
      return;
  }
  if (WIFEXITED(st)) {
    out->userns = (WEXITSTATUS(st) & 1) != 0;
    out->mountns = (WEXITSTATUS(st) & 2) != 0;
  }
}

int sandbox_support_format(const sandbox_support_t *s, char *buf, size_t n)
{
  char ll[32];

  if (s->landlock_abi > 0)
    snprintf(ll, sizeof(ll), "landlock abi %d", s->landlock_abi);
  else
    snprintf(ll, sizeof(ll), "no landlock");
  return snprintf(
      buf, n, "%s%s, %s%s, %s, %s, %s%s", s->root ? "root" : "not root",
      s->caps ? " (capabilities)" : "", s->seccomp ? "seccomp" : "no seccomp",
      s->seccomp_on ? " (a filter is on)" : "", ll,
      s->userns ? "userns" : "no userns", s->mountns ? "mountns" : "no mountns",
      s->no_new_privs ? ", no_new_privs set" : "");
}

/* ----------------------------------------------------------- identities */

int sandbox_oom_adj(int adj, hipd_err_t *err)
{
  char buf[16];
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC), n, ok;

  if (fd < 0)
    return err_set(err, HIPD_EIO, "/proc/self/oom_score_adj: %s",
                   strerror(errno));
  n = snprintf(buf, sizeof(buf), "%d", adj);
  ok = write(fd, buf, (size_t)n) == n;
  if (!ok)
    err_set(err, HIPD_EIO, "oom_score_adj %d: %s", adj, strerror(errno));
  close(fd);
  return ok ? 0 : HIPD_EIO;
}

int sandbox_user_lookup(const char *name, uid_t *uid, gid_t *gid,
                        hipd_err_t *err)
{
  account_t a;
  int rc;

  err_clear(err);
  rc = account_by_name(name, &a, err);
  if (rc == HIPD_ENOENT)
    return err_set(err, HIPD_ENOENT,
                   "no account '%s' (create it, e.g. "
                   "useradd --system --no-create-home --shell "
                   "/usr/sbin/nologin %s)",
                   name, name);
  if (rc != 0)
    return rc;
  *uid = a.uid;
  *gid = a.gid;
  return 0;
}

int sandbox_drop_ids(uid_t uid, gid_t gid, hipd_err_t *err)
{
  uid_t ru, eu, su;
  gid_t rg, eg, sg, groups[2];
  int n;

  err_clear(err);
  if (uid == 0 || gid == 0)
    return err_set(err, HIPD_EINVAL,
                   "refusing to drop to uid %u gid %u: root is no drop",
                   (unsigned)uid, (unsigned)gid);
  getresuid(&ru, &eu, &su);
  getresgid(&rg, &eg, &sg);
  if (eu != 0) {
    if (ru == uid && eu == uid && su == uid && rg == gid && eg == gid &&
        sg == gid)
      return 0; /* already that identity */
    return err_set(err, HIPD_EPERM,
                   "cannot change to uid %u gid %u: not running as root "
                   "(uid %u, gid %u)",
                   (unsigned)uid, (unsigned)gid, (unsigned)eu, (unsigned)eg);
  }
  if (setgroups(1, &gid) != 0)
    return err_set(err, HIPD_EPERM, "setgroups(%u): %s", (unsigned)gid,
                   strerror(errno));
  if (setresgid(gid, gid, gid) != 0)
    return err_set(err, HIPD_EPERM, "setresgid(%u): %s", (unsigned)gid,
                   strerror(errno));
  if (setresuid(uid, uid, uid) != 0)
    return err_set(err, HIPD_EPERM, "setresuid(%u): %s", (unsigned)uid,
                   strerror(errno));
  /* Verify: the ids are the ones asked for, and root cannot come back. */
  getresuid(&ru, &eu, &su);
  getresgid(&rg, &eg, &sg);
  n = getgroups(2, groups);
  if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid ||
      sg != gid || n != 1 || groups[0] != gid)
    return err_set(err, HIPD_EPERM,
                   "after dropping to uid %u gid %u the ids are uid "
                   "%u/%u/%u gid %u/%u/%u with %d groups",
                   (unsigned)uid, (unsigned)gid, (unsigned)ru, (unsigned)eu,
                   (unsigned)su, (unsigned)rg, (unsigned)eg, (unsigned)sg, n);
  if (setresuid(0, 0, 0) == 0 || setresgid(0, 0, 0) == 0 ||
      setgroups(0, NULL) == 0)
    return err_set(err, HIPD_EPERM,
                   "dropped to uid %u gid %u, but root can be regained",
                   (unsigned)uid, (unsigned)gid);
  return 0;
}

/* --------------------------------------------------------- capabilities */

/* Empty the bounding set (needs CAP_SETPCAP) and the ambient set. */
static int drop_bounding(hipd_err_t *err)
{
  if (has_setpcap()) {
    for (int cap = 0; cap <= 63; cap++) {
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
        return err_set(err, HIPD_EPERM, "PR_CAPBSET_DROP %d: %s", cap,
                       strerror(errno));
    }
  }
  /* EINVAL: a kernel without ambient capabilities has none to clear. */
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 &&
      errno != EINVAL)
    return err_set(err, HIPD_EPERM, "PR_CAP_AMBIENT_CLEAR_ALL: %s",
                   strerror(errno));
  return 0;
}

/* Effective, permitted and inheritable to nothing. */
static int drop_sets(hipd_err_t *err)
{
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];

  memset(d, 0, sizeof(d));
  if (syscall(SYS_capset, &h, d) != 0)
    return err_set(err, HIPD_EPERM, "capset to no capabilities: %s",
                   strerror(errno));
  if (caps_held())
    return err_set(err, HIPD_EPERM, "capabilities remain after capset");
  return 0;
}

int sandbox_drop_caps(hipd_err_t *err)
{
  int rc;

  err_clear(err);
  if ((rc = drop_bounding(err)) != 0)
    return rc;
  return drop_sets(err);
}

/* ------------------------------------------------------------- rlimits */

static int set_limit(int res, const char *name, rlim_t v, hipd_err_t *err)
{
  struct rlimit cur, want;

  if (v == SANDBOX_RLIM_KEEP)
    return 0;
  if (getrlimit(res, &cur) != 0)
    cur.rlim_max = RLIM_INFINITY;
  /* Never above the current hard limit: only root could raise it, and a
   * sandbox only lowers. */
  if (cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max)
    v = cur.rlim_max;
  want.rlim_cur = want.rlim_max = v;
  if (setrlimit(res, &want) != 0)
    return err_set(err, HIPD_EPERM, "setrlimit(%s, %llu): %s", name,
                   (unsigned long long)v, strerror(errno));
  return 0;
}

static int set_limits(const sandbox_spec_t *s, hipd_err_t *err)
{
  int rc = 0;

  if ((rc = set_limit(RLIMIT_CPU, "RLIMIT_CPU", s->rlim.cpu_s, err)) != 0 ||
      (rc = set_limit(RLIMIT_AS, "RLIMIT_AS", s->rlim.as, err)) != 0 ||
      (rc = set_limit(RLIMIT_DATA, "RLIMIT_DATA", s->rlim.data, err)) != 0 ||
      (rc = set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", s->rlim.fsize, err)) != 0 ||
      (rc = set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", s->rlim.nofile, err)) !=
          0 ||
      (rc = set_limit(RLIMIT_NPROC, "RLIMIT_NPROC", s->rlim.nproc, err)) != 0 ||
      (rc = set_limit(RLIMIT_CORE, "RLIMIT_CORE", s->rlim.core, err)) != 0)
    return rc;
  return 0;
}

/* ------------------------------------------------------------ threads */

/* The process's thread count from /proc/self/status; 0 if unknown. */
static int thread_count(void)
{
  FILE *f = fopen("/proc/self/status", "re");
  char line[256];
  int n = 0;

  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "Threads:", 8) == 0) {
      n = atoi(line + 8);
      break;
    }
  }
  fclose(f);
  return n;
}

/* ---------------------------------------------------------------- enter */

void sandbox_spec_init(sandbox_spec_t *spec)
{
  memset(spec, 0, sizeof(*spec));
  spec->uid = (uid_t)-1;
  spec->gid = (gid_t)-1;
  spec->rlim.cpu_s = SANDBOX_RLIM_KEEP;
  spec->rlim.as = SANDBOX_RLIM_KEEP;
  spec->rlim.data = SANDBOX_RLIM_KEEP;
  spec->rlim.fsize = SANDBOX_RLIM_KEEP;
  spec->rlim.nofile = SANDBOX_RLIM_KEEP;
  spec->rlim.nproc = SANDBOX_RLIM_KEEP;
  spec->rlim.core = 0;
  spec->landlock_scope = true;
  spec->profile = SANDBOX_PROFILE_NONE;
}

/* Append "; what" to the report of what was not applied. */
static void note(char *buf, size_t size, const char *what)
{
  size_t used = strlen(buf);

  snprintf(buf + used, size - used, "%s%s", used ? "; " : "", what);
}

int sandbox_enter(const sandbox_spec_t *spec, hipd_err_t *err)
{
  char skipped[HIPD_ERR_MSG_MAX] = "";
  char why[HIPD_ERR_MSG_MAX];
  int rc, n;

  err_clear(err);
  n = thread_count();
  if (n > 1 && !spec->allow_threads)
    return err_set(err, HIPD_EINVAL,
                   "sandbox_enter: %d threads are running; capabilities and "
                   "Landlock apply to the calling thread only, so enter the "
                   "sandbox before starting threads",
                   n);
  /* The bounding set first: changing it needs CAP_SETPCAP, which the id
   * change takes away. */
  if ((rc = drop_bounding(err)) != 0)
    return rc;
  if (spec->change_ids &&
      (rc = sandbox_drop_ids(spec->uid, spec->gid, err)) != 0)
    return rc;
  if ((rc = drop_sets(err)) != 0)
    return rc;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return err_set(err, HIPD_EPERM, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
  if (spec->no_dumpable && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return err_set(err, HIPD_EPERM, "PR_SET_DUMPABLE 0: %s", strerror(errno));
  if ((rc = set_limits(spec, err)) != 0)
    return rc;
  if (spec->landlock) {
    why[0] = '\0';
    rc = sandbox_landlock_apply(spec, why, sizeof(why), err);
    if (rc < 0)
      return rc;
    if (rc > 0) { /* not available */
      if (spec->require & SANDBOX_REQUIRE_LANDLOCK)
        return err_set(err, HIPD_ENOTSUP, "landlock required: %s", why);
      note(skipped, sizeof(skipped), why);
    } else if (why[0] != '\0') {
      note(skipped, sizeof(skipped), why); /* e.g. a missing path */
    }
  }
  if (spec->profile != SANDBOX_PROFILE_NONE) {
    if (!sandbox_seccomp_available()) {
      if (spec->require & SANDBOX_REQUIRE_SECCOMP)
        return err_set(err, HIPD_ENOTSUP,
                       "seccomp required: the kernel offers no seccomp "
                       "filters");
      note(skipped, sizeof(skipped), "seccomp: not supported by the kernel");
    } else if ((rc = sandbox_seccomp_apply(spec->profile, err)) != 0) {
      return rc;
    }
  }
  err_clear(err);
  snprintf(err->msg, sizeof(err->msg), "%s", skipped);
  return 0;
}

/* ---------------------------------------------------------- environment */

#if defined(HIPD_ASAN) || defined(HIPD_TSAN)
static const char *const sanitizer_vars[] = {
    "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", NULL};
#else
static const char *const sanitizer_vars[] = {NULL};
#endif

/* Add NAME=value of @p name (or @p name itself if it holds a '=') at
 * env[*i] if set. @return 0 or HIPD_ENOMEM. */
static int env_add(char **env, size_t *i, const char *name)
{
  const char *v;
  size_t len;

  if (strchr(name, '=') != NULL)
    return (env[(*i)++] = strdup(name)) == NULL ? HIPD_ENOMEM : 0;
  if ((v = getenv(name)) == NULL)
    return 0;
  len = strlen(name) + strlen(v) + 2;
  if ((env[*i] = malloc(len)) == NULL)
    return HIPD_ENOMEM;
  snprintf(env[(*i)++], len, "%s=%s", name, v);
  return 0;
}

size_t sandbox_sanitizer_paths(sandbox_path_t *paths, size_t *n, size_t max,
                               char *buf, size_t bufsz)
{
  size_t added = 0, used = 0;

  for (size_t k = 0; sanitizer_vars[k] != NULL; k++) {
    const char *v = getenv(sanitizer_vars[k]), *lp, *end, *slash;
    size_t len;
    if (v == NULL || (lp = strstr(v, "log_path=")) == NULL)
      continue;
    lp += 9;
    end = strchr(lp, ':');
    if (end == NULL)
      end = lp + strlen(lp);
    /* The directory: up to the last '/' within the value. */
    slash = NULL;
    for (const char *c = lp; c < end; c++)
      if (*c == '/')
        slash = c;
    if (slash == NULL || slash == lp || *n >= max)
      continue;
    len = (size_t)(slash - lp);
    if (used + len + 1 > bufsz)
      break;
    memcpy(buf + used, lp, len);
    buf[used + len] = '\0';
    paths[(*n)++] =
        (sandbox_path_t){buf + used, SANDBOX_FS_READ | SANDBOX_FS_WRITE};
    used += len + 1;
    added++;
  }
  return added;
}

char **sandbox_clean_env(const char *const *keep)
{
  size_t n = 2, i = 0;
  char **env;

  for (size_t k = 0; keep != NULL && keep[k] != NULL; k++)
    n++;
  for (size_t k = 0; sanitizer_vars[k] != NULL; k++)
    n++;
  env = calloc(n + 1, sizeof(*env));
  if (env == NULL)
    return NULL;
  if ((env[i++] = strdup("PATH=/usr/bin:/bin")) == NULL ||
      (env[i++] = strdup("LANG=C")) == NULL)
    goto fail;
  for (size_t k = 0; keep != NULL && keep[k] != NULL; k++)
    if (env_add(env, &i, keep[k]) != 0)
      goto fail;
  for (size_t k = 0; sanitizer_vars[k] != NULL; k++)
    if (env_add(env, &i, sanitizer_vars[k]) != 0)
      goto fail;
  env[i] = NULL;
  return env;

fail:
  sandbox_env_free(env);
  return NULL;
}

void sandbox_env_free(char **env)
{
  if (env == NULL)
    return;
  for (size_t i = 0; env[i] != NULL; i++)
    free(env[i]);
  free(env);
}
