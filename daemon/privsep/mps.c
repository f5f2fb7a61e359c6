/* SPDX-License-Identifier: MIT */
/* daemon/privsep/mps.c: hipd's private MPS control daemon (mps.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "privsep/mps.h"
#include "util/account.h"
#include "util/parse.h"
#include "util/who_list.h"

#define CONTROL "nvidia-cuda-mps-control"

static struct {
  int active;
  char dir[128];      /* the private directory */
  char pipe_env[192]; /* CUDA_MPS_PIPE_DIRECTORY=... */
  char log_env[192];  /* CUDA_MPS_LOG_DIRECTORY=... */
  char control[4096]; /* the control program */
  char state[448];
  int as_user;
  uid_t uid;
  gid_t gid;
  char user[64];
} mps;

enum { TENANTS_AUTO, TENANTS_ALL, TENANTS_LIST };

/* --mps-tenants as it runs (mps_tenants_set): parsed, its names resolved,
 * once per start or reload, not for each worker. */
static struct {
  int mode;        /* TENANTS_* */
  who_list_t list; /* TENANTS_LIST: its users and groups */
} tenants;

static int find_control(char *out, size_t len)
{
  const char *path = getenv("PATH");
  char buf[4096];

  snprintf(buf, sizeof(buf), "%s:/usr/bin:/usr/local/cuda/bin",
           path != NULL ? path : "");
  for (char *save = NULL, *p = strtok_r(buf, ":", &save); p != NULL;
       p = strtok_r(NULL, ":", &save)) {
    snprintf(out, len, "%s/%s", p, CONTROL);
    if (access(out, X_OK) == 0)
      return 0;
  }
  return HIPD_ENOENT;
}

/* Run the control program (with "-d", or fed @p input) as the worker
 * account; @return its exit status, or -1 (as a shell says of a program
 * that did not exit: not a hipd code). Blocking, bounded by 10 s. */
static int run_control(const char *arg, const char *input)
{
  int in[2] = {-1, -1}, status = 0;
  pid_t pid;

  if (input != NULL && pipe2(in, O_CLOEXEC) != 0)
    return -1;
  pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    char *argv[] = {mps.control, (char *)arg, NULL};
    char *envp[] = {mps.pipe_env, mps.log_env, "PATH=/usr/bin:/bin", NULL};
    int nul = open("/dev/null", O_RDWR);
    if (input != NULL)
      dup2(in[0], 0);
    else if (nul >= 0)
      dup2(nul, 0);
    if (nul >= 0)
      dup2(nul, 1);
    if (mps.as_user && (initgroups(mps.user, mps.gid) != 0 ||
                        setresgid(mps.gid, mps.gid, mps.gid) ||
                        setresuid(mps.uid, mps.uid, mps.uid)))
      _exit(126);
    /* The directory is made by the account that uses it: the listener
     * keeps no CAP_CHOWN (the unit drops it). */
    if (arg != NULL && mkdir(mps.dir, 0700) != 0 && errno != EEXIST)
      _exit(125);
    execve(mps.control, arg != NULL ? argv : (char *[]){mps.control, NULL},
           envp);
    _exit(127);
  }
  if (input != NULL) {
    close(in[0]);
    if (write(in[1], input, strlen(input)) < 0)
      status = -1;
    close(in[1]);
  }
  for (int i = 0; i < 1000; i++) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0)
      return -1;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

static int unavailable(daemon_t *d, hipd_err_t *err, const char *why)
{
  snprintf(mps.state, sizeof(mps.state),
           "unavailable: %s; tenants time-slice the "
           "GPU",
           why);
  if (d->cfg.mps == MPS_ON)
    return err_set(err, HIPD_ENOTSUP, "--mps on: %s", why);
  log_info(0, "MPS %s", mps.state);
  return 0;
}

int mps_start(daemon_t *d, const char *user, uid_t uid, gid_t gid,
              hipd_err_t *err)
{
  const char *base = getenv("RUNTIME_DIRECTORY");
  char ctl[192];

  /* Which workers are to be its clients: parsed here once, and again at
   * each reload (mps_tenants_set), not for each worker. */
  if (mps_tenants_set(d->cfg.mps_tenants, err) != 0)
    return err->code;
  if (d->cfg.mps == MPS_OFF) {
    snprintf(mps.state, sizeof(mps.state),
             "off (--mps off): tenants time-slice the GPU");
    return 0;
  }
#if !defined(HAVE_HIP) || !defined(HIPD_HIP_PLATFORM)
  (void)user;
  (void)uid;
  (void)gid;
  (void)base;
  (void)ctl;
  return unavailable(d, err, "this build has no NVIDIA GPU support");
#else
  if (strcmp(HIPD_HIP_PLATFORM, "nvidia") != 0) {
    snprintf(mps.state, sizeof(mps.state),
             "not needed: on AMD, processes' queues run concurrently in "
             "separate GPU address spaces");
    return 0;
  }
  if (d->cfg.devices != NULL && strcmp(d->cfg.devices, "cpu") == 0)
    return unavailable(d, err, "--devices cpu: no GPU is served");
  if (find_control(mps.control, sizeof(mps.control)) != 0)
    return unavailable(d, err, CONTROL " is not installed");
  snprintf(mps.dir, sizeof(mps.dir), "%s/hipd-mps-XXXXXX",
           base != NULL && base[0] == '/' ? base : "/tmp");
  if (mkdtemp(mps.dir) == NULL)
    return unavailable(d, err, "cannot create its private directory");
  mps.as_user = geteuid() == 0;
  mps.uid = uid;
  mps.gid = gid;
  snprintf(mps.user, sizeof(mps.user), "%s", user != NULL ? user : "");
  if (mps.as_user && chown(mps.dir, uid, gid) != 0) {
    rmdir(mps.dir);
    return unavailable(d, err,
                       "cannot give its directory to the worker "
                       "account");
  }
  snprintf(mps.pipe_env, sizeof(mps.pipe_env), "CUDA_MPS_PIPE_DIRECTORY=%s",
           mps.dir);
  snprintf(mps.log_env, sizeof(mps.log_env), "CUDA_MPS_LOG_DIRECTORY=%s",
           mps.dir);
  if (run_control("-d", NULL) != 0)
    return unavailable(d, err,
                       CONTROL " -d failed (or its directory "
                               "could not be made)");
  /* The control daemon makes its socket once it runs. */
  snprintf(ctl, sizeof(ctl), "%s/control", mps.dir);
  for (int i = 0; i < 200 && access(ctl, F_OK) != 0; i++)
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  mps.active = 1;
  snprintf(mps.state, sizeof(mps.state),
           "active (hipd's own control daemon, pipe directory %s): tenants "
           "run concurrently, each in its own GPU address space; a fatal "
           "GPU fault of one tenant also ends the others' contexts on that "
           "GPU (--mps off keeps faults with their tenant, and time-slices)",
           mps.dir);
  log_info(0, "MPS %s", mps.state);
  return 0;
#endif
}

static void remove_tree(const char *dir)
{
  char cmd[256];
  pid_t pid;

  /* The control daemon's logs and sockets: a few plain entries. */
  snprintf(cmd, sizeof(cmd), "%s", dir);
  pid = fork();
  if (pid == 0) {
    execl("/bin/rm", "rm", "-rf", "--", cmd, (char *)NULL);
    _exit(127);
  }
  if (pid > 0)
    waitpid(pid, NULL, 0);
}

void mps_stop(void)
{
  who_list_free(&tenants.list);
  tenants.mode = TENANTS_AUTO;
  if (!mps.active)
    return;
  mps.active = 0;
  if (run_control(NULL, "quit\n") != 0)
    log_warn(0, "MPS: the control daemon did not acknowledge quit");
  else
    log_info(0, "MPS control daemon stopped");
  if (strcmp(mps.dir, "/run/hipd/mps") != 0)
    remove_tree(mps.dir);
}

size_t mps_worker_env(char **env, size_t max, int client)
{
  static char flag[] = "HIPD_MPS=1", out[] = "HIPD_MPS=0";
  size_t n = 0;

  if (!mps.active || max < 3)
    return 0;
  if (!client) {
    env[n++] = out;
    return n;
  }
  env[n++] = mps.pipe_env;
  env[n++] = mps.log_env;
  env[n++] = flag;
  return n;
}

const char *mps_state(void)
{
  if (mps.state[0] == '\0') {
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY"),
               *flag = getenv("HIPD_MPS");
    if (flag != NULL && strcmp(flag, "0") == 0)
      snprintf(mps.state, sizeof(mps.state),
               "not used by this tenant (--mps-tenants): its worker has GPU "
               "contexts of its own, time-sliced with the MPS server's "
               "clients; a fault of theirs does not reach it");
    else if (flag != NULL && dir != NULL)
      snprintf(mps.state, sizeof(mps.state),
               "active (hipd's own control daemon, pipe directory %s): "
               "tenants run concurrently, each in its own GPU address space; "
               "a fatal GPU fault of one tenant also ends the others' "
               "contexts on that GPU (--mps off keeps faults with their "
               "tenant, and time-slices)",
               dir);
    else
      snprintf(mps.state, sizeof(mps.state),
               "not used: tenants time-slice the GPU");
  }
  return mps.state;
}

int mps_active(void)
{
  const char *flag = getenv("HIPD_MPS");

  return mps.active || (flag != NULL && strcmp(flag, "1") == 0);
}

/* ------------------------------------------------- which tenants are in */

#define TENANT_GIDS_MAX 256

/* The groups of tenant @p uid for its rules: its primary @p gid, then
 * those the group database gives its user (the first TENANT_GIDS_MAX
 * in all). @return how many are in @p gids. */
static int tenant_gids(uid_t uid, gid_t gid, gid_t gids[TENANT_GIDS_MAX])
{
  int ngids = 1;
  account_t a;

  gids[0] = gid;
  if (account_by_uid(uid, &a, NULL) == 0) {
    gid_t *all;
    int n;
    if (account_groups(&a, &all, &n, NULL) == 0) {
      for (int i = 0; i < n && ngids < TENANT_GIDS_MAX; i++)
        gids[ngids++] = all[i];
      free(all);
    }
  }
  return ngids;
}

static struct {
  int owned;      /* auto: a uid's workers are the clients */
  uid_t owner;    /* that uid */
  unsigned users; /* its client workers alive */
} in_mps;

/* Parse --mps-tenants @p value (NULL: auto) into *@p mode and, for a
 * list, @p l (empty before). @return 0, or HIPD_EINVAL / HIPD_ENOMEM with
 * @p err saying why and @p l left empty. */
static int tenants_parse(const char *value, int *mode, who_list_t *l,
                         hipd_err_t *err)
{
  int rc;

  err_clear(err);
  *mode = TENANTS_AUTO;
  if (value == NULL || strcmp(value, "auto") == 0)
    return 0;
  if (strcmp(value, "all") == 0) {
    *mode = TENANTS_ALL;
    return 0;
  }
  if (value[0] == '\0' || value[0] == ',' || value[strlen(value) - 1] == ',' ||
      strstr(value, ",,") != NULL)
    return err_set(err, HIPD_EINVAL,
                   "--mps-tenants: '%s' is not auto, all or a comma list of "
                   "users, uids, @groups and @gids",
                   value);
  rc = who_list_parse(l, "--mps-tenants", value, WHO_MIXED, err);
  if (rc == HIPD_ENOMEM)
    err_set(err, rc, "--mps-tenants: out of memory");
  if (rc != 0) {
    who_list_free(l);
    return rc;
  }
  *mode = TENANTS_LIST;
  return 0;
}

int mps_tenants_check(const char *value, hipd_err_t *err)
{
  who_list_t l = {0};
  int mode, rc = tenants_parse(value, &mode, &l, err);

  who_list_free(&l);
  return rc;
}

int mps_tenants_set(const char *value, hipd_err_t *err)
{
  who_list_t l = {0};
  int mode, rc = tenants_parse(value, &mode, &l, err);

  if (rc != 0)
    return rc;
  who_list_free(&tenants.list);
  tenants.mode = mode;
  tenants.list = l;
  return 0;
}

/* Would a worker of @p uid started now be an MPS client? */
static int would_take(uid_t uid, gid_t gid)
{
  gid_t gids[TENANT_GIDS_MAX];
  int ngids = 1;

  if (!mps.active)
    return 0;
  switch (tenants.mode) {
  case TENANTS_ALL:
    return 1;
  case TENANTS_LIST:
    /* The groups are read only when the list names one. */
    gids[0] = gid;
    if (tenants.list.groups)
      ngids = tenant_gids(uid, gid, gids);
    return who_list_match(&tenants.list, uid, gids, ngids);
  default:
    return !in_mps.owned || in_mps.owner == uid;
  }
}

int mps_tenant_may_spread(const daemon_config_t *cfg, uid_t uid, gid_t gid)
{
  /* Only NVIDIA time-slices the contexts of separate processes, and only
   * where hipd serves its GPUs (--devices: all, or a hip entry). */
#if defined(HAVE_HIP) && defined(HIPD_HIP_PLATFORM)
  if (strcmp(HIPD_HIP_PLATFORM, "nvidia") == 0 &&
      (cfg->devices == NULL || strstr(cfg->devices, "all") != NULL ||
       strstr(cfg->devices, "hip") != NULL))
    return would_take(uid, gid);
#endif
  (void)cfg;
  (void)uid;
  (void)gid;
  return 1;
}

int mps_tenant_take(uid_t uid, gid_t gid, int *counted)
{
  *counted = 0;
  if (!would_take(uid, gid))
    return 0;
  if (tenants.mode != TENANTS_AUTO)
    return 1;
  in_mps.owned = 1;
  in_mps.owner = uid;
  in_mps.users++;
  *counted = 1;
  return 1;
}

void mps_pretend_active(int on)
{
  mps.active = on;
}

void mps_tenant_release(uid_t uid)
{
  if (!in_mps.owned || in_mps.owner != uid || in_mps.users == 0)
    return;
  if (--in_mps.users == 0)
    in_mps.owned = 0;
}

/* ------------------------------------------------------ per-tenant limits */

#define THREADS_ENV "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#define MEM_ENV "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"

/* A rule's value: @p is_mem a size (0 allowed), else a percentage. */
static int rule_value(const char *text, int is_mem, uint64_t *out)
{
  if (is_mem)
    return util_parse_size(text, 0, (uint64_t)1 << 50, out);
  return util_parse_size(text, 1, 100, out);
}

int mps_rule_check(const char *opt, const char *rule, int is_mem,
                   hipd_err_t *err)
{
  const char *eq = strchr(rule, '='), *value = eq != NULL ? eq + 1 : rule;
  char who[128];
  uint64_t v;
  uint32_t id;

  err_clear(err);
  if (rule_value(value, is_mem, &v) != 0)
    return err_set(err, HIPD_EINVAL,
                   "--%s: '%s' is not %s or WHO=%s (WHO a user, uid, @group "
                   "or @gid)",
                   opt, rule, is_mem ? "a size" : "a percentage 1-100",
                   is_mem ? "SIZE" : "PERCENT");
  if (eq == NULL)
    return 0;
  if (eq == rule || (size_t)(eq - rule) >= sizeof(who) ||
      (rule[0] == '@' && eq == rule + 1))
    return err_set(err, HIPD_EINVAL, "--%s: '%s' names nobody before '='", opt,
                   rule);
  memcpy(who, rule, (size_t)(eq - rule));
  who[eq - rule] = '\0';
  if (who[0] == '@') {
    gid_t g;
    if (!util_parse_id(who + 1, &id) &&
        account_group_by_name(who + 1, &g, NULL) != 0)
      return err_set(err, HIPD_EINVAL, "--%s: no group '%s'", opt, who + 1);
  } else if (!util_parse_id(who, &id)) {
    account_t a;
    if (account_by_name(who, &a, NULL) != 0)
      return err_set(err, HIPD_EINVAL, "--%s: no user '%s'", opt, who);
  }
  return 0;
}

/* The value the rules @p rules give the tenant (@p uid, groups @p gids),
 * or @p dflt. */
static uint64_t rules_pick(char *const *rules, uint32_t n, int is_mem,
                           uid_t uid, const gid_t *gids, int ngids,
                           uint64_t dflt)
{
  uint64_t plain = dflt, group = 0, user = 0, v;
  int have_group = 0, have_user = 0;

  for (uint32_t i = 0; i < n; i++) {
    const char *eq = strchr(rules[i], '=');
    char who[128];
    uint32_t id;
    if (rule_value(eq != NULL ? eq + 1 : rules[i], is_mem, &v) != 0)
      continue; /* checked when given */
    if (eq == NULL) {
      plain = v;
      continue;
    }
    if ((size_t)(eq - rules[i]) >= sizeof(who))
      continue;
    memcpy(who, rules[i], (size_t)(eq - rules[i]));
    who[eq - rules[i]] = '\0';
    if (who[0] == '@') {
      gid_t g = 0;
      if (util_parse_id(who + 1, &id))
        g = (gid_t)id;
      else if (account_group_by_name(who + 1, &g, NULL) != 0)
        continue;
      for (int k = 0; k < ngids; k++)
        if (gids[k] == g) {
          group = v;
          have_group = 1;
        }
    } else {
      account_t a;
      if (util_parse_id(who, &id))
        a.uid = (uid_t)id;
      else if (account_by_name(who, &a, NULL) != 0)
        continue;
      if (a.uid == uid) {
        user = v;
        have_user = 1;
      }
    }
  }
  return have_user ? user : have_group ? group : plain;
}

void mps_limits_for(const daemon_config_t *cfg, uid_t uid, gid_t gid,
                    mps_limits_t *out)
{
  gid_t gids[TENANT_GIDS_MAX];
  int ngids = 1;

  gids[0] = gid;
  if (cfg->nmps_threads > 0 || cfg->nmps_mem > 0)
    ngids = tenant_gids(uid, gid, gids);
  out->threads = (uint32_t)rules_pick(cfg->mps_threads, cfg->nmps_threads, 0,
                                      uid, gids, ngids, MPS_DEFAULT_THREADS);
  out->mem = rules_pick(cfg->mps_mem, cfg->nmps_mem, 1, uid, gids, ngids, 0);
}

/* How many GPUs a worker's CUDA numbers (see mps_limits_env). */
static unsigned gpus_seen(void)
{
  const char *vis = getenv("CUDA_VISIBLE_DEVICES");
  unsigned n = 0;
  DIR *dir;

  if (vis != NULL) {
    if (vis[0] == '\0')
      return 0;
    n = 1;
    for (; *vis != '\0'; vis++)
      n += *vis == ',';
    return n;
  }
  if ((dir = opendir("/proc/driver/nvidia/gpus")) == NULL)
    return 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

size_t mps_limits_env(const mps_limits_t *lim, char *buf0, char *buf1,
                      size_t size, char **env)
{
  unsigned ngpus;
  size_t n = 0;

  if (!mps.active)
    return 0;
  ngpus = lim->mem != 0 ? gpus_seen() : 0;
  snprintf(buf0, size, THREADS_ENV "=%u", (unsigned)lim->threads);
  env[n++] = buf0;
  if (lim->mem != 0 && ngpus > 0) {
    /* "0=4096M,1=4096M": one entry per GPU ordinal, in MiB. */
    size_t used = (size_t)snprintf(buf1, size, MEM_ENV "=");
    for (unsigned i = 0; i < ngpus && used < size; i++)
      used += (size_t)snprintf(
          buf1 + used, size - used, "%s%u=%lluM", i ? "," : "", i,
          (unsigned long long)((lim->mem + (1 << 20) - 1) >> 20));
    if (used < size)
      env[n++] = buf1;
  }
  return n;
}

int mps_limits_here(mps_limits_t *out)
{
  const char *t = getenv(THREADS_ENV), *m = getenv(MEM_ENV);
  uint64_t v;

  if (!mps_active() || t == NULL || util_parse_size(t, 1, 100, &v) != 0)
    return 0;
  out->threads = (uint32_t)v;
  out->mem = 0;
  if (m != NULL) {
    /* The first GPU's entry: every GPU gets the same. */
    const char *eq = strchr(m, '=');
    char num[32];
    size_t k = 0;
    if (eq != NULL) {
      for (eq++; *eq >= '0' && *eq <= '9' && k + 1 < sizeof(num); eq++)
        num[k++] = *eq;
      num[k] = '\0';
      if (k > 0 && (*eq == 'M' || *eq == 'm'))
        out->mem = strtoull(num, NULL, 10) << 20;
    }
  }
  return 1;
}
