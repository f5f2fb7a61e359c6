/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/cgroup.c: control groups per tenant and per compile
 * helper (cgroup.h). Files under /sys/fs/cgroup only; no libuv. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "hipd.h"

#define CG_ROOT "/sys/fs/cgroup"
#define LISTENER_LEAF "hipd-listener"

static struct {
  cgroup_mode_t mode;
  char state[2 * PATH_MAX + 96];
  /* v2: [0] is the base; v1: [0] the memory base, [1] the pids base. */
  char base[2][PATH_MAX];
  uint64_t mem_max;  /* tenants' memory.max, 0: none */
  uint32_t pids_max; /* tenants' pids.max, 0: none */
  uid_t *uids;       /* the tenants' groups made */
  size_t nuids, cap;
  unsigned helpers; /* compile-0 .. compile-(helpers - 1) may exist */
} cg;

/* ----------------------------------------------------------------- files */

static int write_text(const char *dir, const char *name, const char *text)
{
  char path[PATH_MAX];
  int fd, e = 0;
  size_t len = strlen(text);

  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
    return ENAMETOOLONG;
  if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
    return errno;
  if (write(fd, text, len) != (ssize_t)len)
    e = errno ? errno : EIO;
  close(fd);
  return e;
}

static int read_text(const char *dir, const char *name, char *buf, size_t cap)
{
  char path[PATH_MAX];
  ssize_t n;
  int fd;

  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
    return ENAMETOOLONG;
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return errno;
  n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0)
    return errno;
  buf[n] = '\0';
  return 0;
}

static uint64_t parse_u64(const char *s)
{
  if (strncmp(s, "max", 3) == 0)
    return UINT64_MAX;
  return strtoull(s, NULL, 10);
}

int cgroup_read_u64(int fd, uint64_t *out)
{
  char buf[64];
  ssize_t n;

  if (fd < 0 || (n = pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
    return -1;
  buf[n] = '\0';
  *out = parse_u64(buf);
  return 0;
}

/* The value of "@p key N" in a flat keyed file (memory.events, v1's
 * memory.oom_control). */
static uint64_t keyed_value(const char *text, const char *key)
{
  size_t kl = strlen(key);

  for (const char *p = text; p != NULL && *p != '\0';) {
    if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
      return strtoull(p + kl + 1, NULL, 10);
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  return 0;
}

/* Whether the comma- or space-separated @p list holds @p word. */
static bool has_word(const char *list, const char *word)
{
  size_t wl = strlen(word);

  for (const char *p = list; (p = strstr(p, word)) != NULL; p += wl)
    if ((p == list || p[-1] == ',' || p[-1] == ' ') &&
        (p[wl] == '\0' || p[wl] == ',' || p[wl] == ' ' || p[wl] == '\n'))
      return true;
  return false;
}

static void set_none(const char *fmt, const char *arg, int e)
{
  char why[PATH_MAX + 32];

  snprintf(why, sizeof(why), fmt, arg);
  cg.mode = CGROUP_NONE;
  if (e != 0)
    snprintf(cg.state, sizeof(cg.state), "none: %s: %s", why, strerror(e));
  else
    snprintf(cg.state, sizeof(cg.state), "none: %s", why);
}

/* ------------------------------------------------------------------ setup */

/* rmdir a tenant's leaves (sandbox/cgroup.h: "worker", "runners"), then
 * the group; with @p wait, a little longer for processes still exiting. */
static void remove_group(const char *path, bool wait)
{
  static const char *const leaves[] = {"worker", "runners"};
  char sub[PATH_MAX];

  for (int tries = 0; tries < (wait ? 100 : 1); tries++) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++)
      if (snprintf(sub, sizeof(sub), "%s/%s", path, leaves[i]) <
          (int)sizeof(sub))
        (void)rmdir(sub);
    if (rmdir(path) == 0 || errno != EBUSY)
      return;
    if (wait)
      nanosleep(&ts, NULL);
  }
}

/* Empty groups of earlier hipds of this host that died without removing
 * theirs (v1: "hipd-PID" of a PID that is gone). */
static void remove_stale(const char *own)
{
  DIR *dir = opendir(own);
  struct dirent *de;

  if (dir == NULL)
    return;
  while ((de = readdir(dir)) != NULL) {
    char path[PATH_MAX], sub[PATH_MAX];
    long pid;
    char *end;
    DIR *inner;
    struct dirent *ie;

    if (strncmp(de->d_name, "hipd-", 5) != 0)
      continue;
    pid = strtol(de->d_name + 5, &end, 10);
    /* Alive, or not ours to judge. */
    if (*end != '\0' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", own, de->d_name) >=
        (int)sizeof(path))
      continue;
    if ((inner = opendir(path)) != NULL) {
      while ((ie = readdir(inner)) != NULL)
        if (strncmp(ie->d_name, "tenant-", 7) == 0 ||
            strncmp(ie->d_name, "compile-", 8) == 0) {
          if (snprintf(sub, sizeof(sub), "%s/%s", path, ie->d_name) <
              (int)sizeof(sub))
            remove_group(sub, false);
        }
      closedir(inner);
    }
    (void)rmdir(path);
  }
  closedir(dir);
}

static int make_dir(const char *path)
{
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return errno;
  return 0;
}

static void setup_v1(const char *mem, const char *pids)
{
  const char *ctl[2] = {"memory", "pids"}, *own[2] = {mem, pids};
  char dir[PATH_MAX];
  struct stat st;
  int e;

  for (int i = 0; i < 2; i++) {
    snprintf(dir, sizeof(dir), CG_ROOT "/%s%s", ctl[i],
             strcmp(own[i], "/") == 0 ? "" : own[i]);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
      return set_none("the v1 %s hierarchy is not at " CG_ROOT, ctl[i], 0);
    remove_stale(dir);
    if (snprintf(cg.base[i], sizeof(cg.base[i]), "%s/hipd-%d", dir,
                 (int)getpid()) >= (int)sizeof(cg.base[i]) ||
        strchr(cg.base[i], ':') != NULL)
      return set_none("%s: an unusable path", dir, 0);
    if ((e = make_dir(cg.base[i])) != 0) {
      if (i == 1)
        (void)rmdir(cg.base[0]);
      return set_none("cannot make %s", cg.base[i], e);
    }
  }
  cg.mode = CGROUP_V1;
  snprintf(cg.state, sizeof(cg.state), "v1 %s %s", cg.base[0], cg.base[1]);
}

static void setup_v2(const char *path)
{
  char own[PATH_MAX], leaf[PATH_MAX], buf[4096], pid[24];
  size_t len;
  int e;

  if (strcmp(path, "/") == 0)
    return set_none("hipd is in the root cgroup (run it as a systemd "
                    "service with Delegate=yes)%s",
                    "", 0);
  snprintf(own, sizeof(own), CG_ROOT "%s", path);
  /* Restarted in place: the leaf made by the hipd before this exec. */
  len = strlen(own);
  if (len > sizeof(LISTENER_LEAF) &&
      strcmp(own + len - strlen(LISTENER_LEAF), LISTENER_LEAF) == 0 &&
      own[len - strlen(LISTENER_LEAF) - 1] == '/')
    own[len - strlen(LISTENER_LEAF) - 1] = '\0';
  if (strchr(own, ':') != NULL)
    return set_none("%s: an unusable path", own, 0);
  if ((e = read_text(own, "cgroup.controllers", buf, sizeof(buf))) != 0)
    return set_none("cannot read %s/cgroup.controllers", own, e);
  if (!has_word(buf, "memory") || !has_word(buf, "pids"))
    return set_none("the cgroup %s offers no memory and pids controllers "
                    "(not delegated to hipd: Delegate=yes)",
                    own, 0);
  if ((e = read_text(own, "cgroup.procs", buf, sizeof(buf))) != 0)
    return set_none("cannot read %s/cgroup.procs", own, e);
  for (char *p = buf; *p != '\0';) {
    if (strtol(p, &p, 10) != (long)getpid())
      return set_none("the cgroup %s holds processes other than hipd (not "
                      "delegated to it)",
                      own, 0);
    while (*p == '\n')
      p++;
  }
  snprintf(leaf, sizeof(leaf), "%s/" LISTENER_LEAF, own);
  snprintf(pid, sizeof(pid), "%d", (int)getpid());
  if ((e = make_dir(leaf)) != 0)
    return set_none("cannot make %s", leaf, e);
  if ((e = write_text(leaf, "cgroup.procs", pid)) != 0)
    return set_none("cannot move hipd into %s", leaf, e);
  if ((e = write_text(own, "cgroup.subtree_control", "+memory +pids")) != 0)
    return set_none("cannot enable memory and pids under %s", own, e);
  snprintf(cg.base[0], sizeof(cg.base[0]), "%s", own);
  cg.mode = CGROUP_V2;
  snprintf(cg.state, sizeof(cg.state), "v2 %s", own);
}

void cgroup_setup(bool enabled)
{
  char line[PATH_MAX + 64], mem[PATH_MAX] = "", pids[PATH_MAX] = "",
                            unified[PATH_MAX] = "";
  bool have_unified = false;
  FILE *f;

  cg.mode = CGROUP_NONE;
  if (!enabled)
    return set_none("off (--cgroups off)%s", "", 0);
  if (geteuid() != 0)
    return set_none("hipd is not root%s", "", 0);
  if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
    return set_none("cannot read /proc/self/cgroup%s", "", errno);
  while (fgets(line, sizeof(line), f) != NULL) {
    char *ctl = strchr(line, ':'), *path;
    if (ctl == NULL || (path = strchr(++ctl, ':')) == NULL)
      continue;
    *path++ = '\0';
    path[strcspn(path, "\n")] = '\0';
    if (*ctl == '\0') {
      snprintf(unified, sizeof(unified), "%s", path);
      have_unified = true;
    }
    if (has_word(ctl, "memory"))
      snprintf(mem, sizeof(mem), "%s", path);
    if (has_word(ctl, "pids"))
      snprintf(pids, sizeof(pids), "%s", path);
  }
  fclose(f);
  if (mem[0] != '\0' && pids[0] != '\0')
    return setup_v1(mem, pids);
  if (have_unified && access(CG_ROOT "/cgroup.controllers", F_OK) == 0)
    return setup_v2(unified);
  set_none("no memory and pids controllers for hipd%s", "", 0);
}

cgroup_mode_t cgroup_mode(void)
{
  return cg.mode;
}

const char *cgroup_state(void)
{
  return cg.state[0] != '\0' ? cg.state : "none: not set up";
}

/* ---------------------------------------------------------------- groups */

/* The group @p name's directories: one (v2) or two (v1). */
static unsigned group_dirs(const char *name, char dirs[2][PATH_MAX])
{
  unsigned n = cg.mode == CGROUP_V1 ? 2 : cg.mode == CGROUP_V2 ? 1 : 0;

  for (unsigned i = 0; i < n; i++)
    snprintf(dirs[i], PATH_MAX, "%s/%s", cg.base[i], name);
  return n;
}

/* Memory and process limits on the group at @p dirs. */
static int set_limits(char dirs[2][PATH_MAX], uint64_t mem_max,
                      uint32_t pids_max)
{
  char v[32];
  int e;

  if (cg.mode == CGROUP_V1) {
    snprintf(v, sizeof(v), mem_max ? "%" PRIu64 : "-1", mem_max);
    if ((e = write_text(dirs[0], "memory.limit_in_bytes", v)) != 0)
      return e;
  } else {
    snprintf(v, sizeof(v), mem_max ? "%" PRIu64 : "max", mem_max);
    if ((e = write_text(dirs[0], "memory.max", v)) != 0)
      return e;
  }
  snprintf(v, sizeof(v), pids_max ? "%" PRIu32 : "max", pids_max);
  return write_text(dirs[cg.mode == CGROUP_V1 ? 1 : 0], "pids.max", v);
}

static int make_group(const char *name, uint64_t mem_max, uint32_t pids_max,
                      char dirs[2][PATH_MAX], hipd_err_t *err)
{
  unsigned n = group_dirs(name, dirs);
  int e;

  for (unsigned i = 0; i < n; i++)
    if ((e = make_dir(dirs[i])) != 0)
      return err_set(err, HIPD_EIO, "cannot make the cgroup %s: %s", dirs[i],
                     strerror(e));
  if ((e = set_limits(dirs, mem_max, pids_max)) != 0)
    return err_set(err, HIPD_EIO, "cannot set the limits of the cgroup %s: %s",
                   dirs[0], strerror(e));
  return 0;
}

uint64_t cgroup_default_tenant_mem(void)
{
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

  return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 2 : 0;
}

/* The runners' share of a tenant's processes: all but an eighth (at
 * least 32), kept for its workers' threads, so that a kernel that makes
 * threads without end cannot stop its own worker from answering. */
static uint32_t runners_pids(uint32_t pids_max)
{
  uint32_t keep = pids_max / 8 > 32 ? pids_max / 8 : 32;

  return pids_max == 0 ? 0 : pids_max > keep + 1 ? pids_max - keep : 1;
}

/* A tenant's group: @p dirs with the limits, and its two leaves (a
 * process may only be in a leaf under cgroup2): "worker" for its workers,
 * "runners" for its CPU runners' launchers and runners. */
static int make_tenant(uid_t uid, char dirs[2][PATH_MAX], hipd_err_t *err)
{
  static const char *const leaves[] = {"worker", "runners"};
  char name[32], leaf[2][PATH_MAX];
  unsigned n;
  int rc, e;

  snprintf(name, sizeof(name), "tenant-%u", (unsigned)uid);
  if ((rc = make_group(name, cg.mem_max, cg.pids_max, dirs, err)) != 0)
    return rc;
  n = cg.mode == CGROUP_V1 ? 2 : 1;
  if (cg.mode == CGROUP_V2 &&
      (e = write_text(dirs[0], "cgroup.subtree_control", "+memory +pids")) != 0)
    return err_set(err, HIPD_EIO, "cannot enable memory and pids under %s: %s",
                   dirs[0], strerror(e));
  for (int l = 0; l < 2; l++) {
    for (unsigned i = 0; i < n; i++)
      if ((size_t)snprintf(leaf[i], PATH_MAX, "%s/%s", dirs[i], leaves[l]) >=
              PATH_MAX ||
          (e = make_dir(leaf[i])) != 0)
        return err_set(err, HIPD_EIO, "cannot make the cgroup %s: %s", leaf[i],
                       strerror(e ? e : ENAMETOOLONG));
    if (l == 1) {
      char v[24];
      snprintf(v, sizeof(v), cg.pids_max ? "%" PRIu32 : "max",
               runners_pids(cg.pids_max));
      if ((e = write_text(leaf[n - 1], "pids.max", v)) != 0)
        return err_set(err, HIPD_EIO, "cannot limit the cgroup %s: %s",
                       leaf[n - 1], strerror(e));
    }
  }
  return 0;
}

void cgroup_set_tenant_limits(uint64_t mem_max, uint32_t pids_max)
{
  cg.mem_max = mem_max;
  cg.pids_max = pids_max;
  for (size_t i = 0; i < cg.nuids; i++) {
    char name[32], dirs[2][PATH_MAX];
    snprintf(name, sizeof(name), "tenant-%u", (unsigned)cg.uids[i]);
    char runners[PATH_MAX + 16], v[24];
    group_dirs(name, dirs);
    (void)set_limits(dirs, mem_max, pids_max);
    snprintf(runners, sizeof(runners), "%s/runners",
             dirs[cg.mode == CGROUP_V1 ? 1 : 0]);
    snprintf(v, sizeof(v), pids_max ? "%" PRIu32 : "max",
             runners_pids(pids_max));
    (void)write_text(runners, "pids.max", v);
  }
}

/* "HIPD_CGROUP=DIR[:DIR]" for the group at @p dirs. */
static int env_for(char dirs[2][PATH_MAX], char *env, size_t cap,
                   hipd_err_t *err)
{
  if ((size_t)snprintf(env, cap, CGROUP_ENV "=%s%s%s", dirs[0],
                       cg.mode == CGROUP_V1 ? ":" : "",
                       cg.mode == CGROUP_V1 ? dirs[1] : "") >= cap) {
    env[0] = '\0';
    return err_set(err, HIPD_EINVAL, "the cgroup path %s is too long", dirs[0]);
  }
  return 0;
}

int cgroup_tenant_prepare(uid_t uid, char *env, size_t cap, hipd_err_t *err)
{
  char dirs[2][PATH_MAX];
  size_t i;
  int rc;

  err_clear(err);
  env[0] = '\0';
  if (cg.mode == CGROUP_NONE)
    return 0;
  if ((rc = make_tenant(uid, dirs, err)) != 0)
    return rc;
  for (i = 0; i < cg.nuids && cg.uids[i] != uid; i++)
    ;
  if (i == cg.nuids) {
    if (cg.nuids == cg.cap) {
      size_t nc = cg.cap ? cg.cap * 2 : 16;
      uid_t *nu = realloc(cg.uids, nc * sizeof(*nu));
      if (nu == NULL)
        return err_set(err, HIPD_ENOMEM, "out of memory");
      cg.uids = nu;
      cg.cap = nc;
    }
    cg.uids[cg.nuids++] = uid;
  }
  return env_for(dirs, env, cap, err);
}

int cgroup_helper_prepare(unsigned index, uint64_t mem_max, uint32_t pids_max,
                          char *env, size_t cap, hipd_err_t *err)
{
  char name[32], dirs[2][PATH_MAX];
  int rc;

  err_clear(err);
  env[0] = '\0';
  if (cg.mode == CGROUP_NONE)
    return 0;
  snprintf(name, sizeof(name), "compile-%u", index);
  if ((rc = make_group(name, mem_max, pids_max, dirs, err)) != 0)
    return rc;
  if (index >= cg.helpers)
    cg.helpers = index + 1;
  return env_for(dirs, env, cap, err);
}

int cgroup_tenant_usage(uid_t uid, cgroup_usage_t *out)
{
  char name[32], dirs[2][PATH_MAX], buf[1024];
  bool v1 = cg.mode == CGROUP_V1;
  size_t i;

  for (i = 0; i < cg.nuids && cg.uids[i] != uid; i++)
    ;
  if (cg.mode == CGROUP_NONE || i == cg.nuids)
    return HIPD_ENOENT;
  snprintf(name, sizeof(name), "tenant-%u", (unsigned)uid);
  group_dirs(name, dirs);
  memset(out, 0, sizeof(*out));
  if (read_text(dirs[0], v1 ? "memory.usage_in_bytes" : "memory.current", buf,
                sizeof(buf)) == 0)
    out->mem_current = parse_u64(buf);
  out->mem_max = UINT64_MAX;
  if (read_text(dirs[0], v1 ? "memory.limit_in_bytes" : "memory.max", buf,
                sizeof(buf)) == 0)
    out->mem_max = parse_u64(buf);
  if (read_text(dirs[0], v1 ? "memory.oom_control" : "memory.events", buf,
                sizeof(buf)) == 0)
    out->oom_kills = keyed_value(buf, "oom_kill");
  if (read_text(dirs[v1 ? 1 : 0], "pids.current", buf, sizeof(buf)) == 0)
    out->pids_current = (uint32_t)parse_u64(buf);
  out->pids_max = UINT32_MAX;
  if (read_text(dirs[v1 ? 1 : 0], "pids.max", buf, sizeof(buf)) == 0) {
    uint64_t v = parse_u64(buf);
    out->pids_max = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
  }
  return 0;
}

void cgroup_teardown(void)
{
  char name[32], dirs[2][PATH_MAX];
  unsigned n;

  if (cg.mode == CGROUP_NONE)
    return;
  for (size_t i = 0; i < cg.nuids; i++) {
    snprintf(name, sizeof(name), "tenant-%u", (unsigned)cg.uids[i]);
    n = group_dirs(name, dirs);
    for (unsigned k = 0; k < n; k++)
      remove_group(dirs[k], true);
  }
  for (unsigned i = 0; i < cg.helpers; i++) {
    snprintf(name, sizeof(name), "compile-%u", i);
    n = group_dirs(name, dirs);
    for (unsigned k = 0; k < n; k++)
      remove_group(dirs[k], true);
  }
  /* v1: the base too (the listener is not in it). v2's base is the
   * listener's own group, which holds it. */
  if (cg.mode == CGROUP_V1)
    for (unsigned k = 0; k < 2; k++)
      remove_group(cg.base[k], true);
  free(cg.uids);
  cg.uids = NULL;
  cg.nuids = cg.cap = 0;
  cg.helpers = 0;
  cg.mode = CGROUP_NONE;
}

/* ----------------------------------------------------------------- worker */

/* What cgroup_enter_runners() writes to: made by cgroup_join(). */
static char runners_procs[2][PATH_MAX + 32];

int cgroup_join(const char *leaf, int *usage_fd, int *limit_fd, hipd_err_t *err)
{
  const char *v = getenv(CGROUP_ENV);
  char dirs[2][PATH_MAX], path[PATH_MAX + 32];
  unsigned n = 0;
  bool v1;
  int e;

  err_clear(err);
  *usage_fd = *limit_fd = -1;
  if (v == NULL || *v == '\0') {
    unsetenv(CGROUP_ENV);
    set_none("its listener made none (its log says why)%s", "", 0);
    return 0;
  }
  for (const char *p = v; *p != '\0' && n < 2; n++) {
    size_t len = strcspn(p, ":");
    if (len == 0 || len >= PATH_MAX ||
        strncmp(p, CG_ROOT "/", sizeof(CG_ROOT)) != 0 ||
        memmem(p, len, "/..", 3) != NULL) {
      unsetenv(CGROUP_ENV);
      return err_set(err, HIPD_EINVAL, CGROUP_ENV ": '%s' is not a cgroup", v);
    }
    memcpy(dirs[n], p, len);
    dirs[n][len] = '\0';
    p += len + (p[len] == ':');
  }
  unsetenv(CGROUP_ENV);
  v1 = n == 2;
  for (unsigned i = 0; i < n; i++) {
    if (snprintf(path, sizeof(path), "%s%s%s", dirs[i], leaf ? "/" : "",
                 leaf ? leaf : "") >= (int)sizeof(path) ||
        (leaf != NULL && snprintf(runners_procs[i], sizeof(runners_procs[i]),
                                  "%s/runners/cgroup.procs",
                                  dirs[i]) >= (int)sizeof(runners_procs[i])))
      return err_set(err, HIPD_EINVAL, CGROUP_ENV ": a path too long");
    if ((e = write_text(path, "cgroup.procs", "0")) != 0)
      return err_set(err, HIPD_EIO, "cannot join the cgroup %s: %s", path,
                     strerror(e));
  }
  cg.mode = v1 ? CGROUP_V1 : CGROUP_V2;
  snprintf(cg.state, sizeof(cg.state), "%s %s%s%s", v1 ? "v1" : "v2", dirs[0],
           v1 ? " " : "", v1 ? dirs[1] : "");
  /* The group's, not the leaf's: its limit is the group's. */
  snprintf(path, sizeof(path), "%s/%s", dirs[0],
           v1 ? "memory.usage_in_bytes" : "memory.current");
  *usage_fd = open(path, O_RDONLY | O_CLOEXEC);
  snprintf(path, sizeof(path), "%s/%s", dirs[0],
           v1 ? "memory.limit_in_bytes" : "memory.max");
  *limit_fd = open(path, O_RDONLY | O_CLOEXEC);
  return 0;
}

int cgroup_enter_runners(void)
{
  for (int i = 0; i < 2; i++) {
    int fd;
    if (runners_procs[i][0] == '\0')
      continue;
    if ((fd = open(runners_procs[i], O_WRONLY | O_CLOEXEC)) < 0)
      return -1;
    if (write(fd, "0", 1) != 1) {
      close(fd);
      return -1;
    }
    close(fd);
  }
  return 0;
}
