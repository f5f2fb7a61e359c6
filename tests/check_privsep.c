/* SPDX-License-Identifier: MIT */
/* tests/check_privsep.c: the process model of --isolation (docs/
 * ARCHITECTURE.md, "Processes"; SECURITY.md), against real daemons
 * (tests/lib/harness.c) with clients that run as real other uids.
 *
 * As root the test makes (or reuses) the users hipd_ps_a and hipd_ps_b;
 * each client runs in a forked child that became one of them. What is
 * checked: each uid's sessions are served by a worker process of their
 * own, running as hipd's account, never the listener; with --isolation
 * session every connection has its own; a worker that dies (killed by
 * SIGKILL, as by a fault) costs its own tenant's sessions only, and the
 * tenant's next connection gets a fresh worker; an idle worker exits
 * after --worker-linger; --isolation none serves from the one process.
 * Without root the program is skipped (exit 77), and says so. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "testutil.h"
#include "users.h"

#define USER_A "hipd_ps_a"
#define USER_B "hipd_ps_b"

static uid_t uid_a, uid_b, uid_hipd;

/* What daemon.info says of the process serving a session. */
typedef struct {
  int64_t pid, uid, tenant, daemon_pid;
  int64_t spin_cpus; /* spin.cpus */
  int spin_shared;   /* spin.shared */
  char process[32];
} served_t;

static int served_by(hipd_conn_t *c, served_t *out)
{
  hipd_info_t *info = NULL;
  const char *p = NULL;
  size_t plen = 0;
  int rc = hipd_daemon_info(c, &info);

  if (rc != 0)
    return rc;
  out->pid = info_get(info, "isolation.pid");
  out->uid = info_get(info, "isolation.uid");
  out->tenant = info_get(info, "isolation.tenant");
  out->daemon_pid = info_get(info, "pid");
  out->spin_cpus = info_get(info, "spin.cpus");
  out->spin_shared = 0;
  {
    int b = 0;
    if (hipd_info_bool(info, "spin.shared", &b) == 0)
      out->spin_shared = b;
  }
  if (hipd_info_str(info, "isolation.process", &p, &plen) == 0 && p != NULL)
    snprintf(out->process, sizeof(out->process), "%.*s", (int)plen, p);
  else
    out->process[0] = '\0';
  hipd_info_free(info);
  return 0;
}

/* A checked workload: a buffer written and read back. */
static int workload(hipd_conn_t *c, unsigned seed, char *msg, size_t msglen)
{
  unsigned char in[4096], out[4096];
  hipd_buffer_t b;
  int rc;

  for (size_t i = 0; i < sizeof(in); i++)
    in[i] = (unsigned char)(seed * 31 + i);
  rc = hipd_mem_alloc(c, 0, sizeof(in), "byte", &b);
  REQUIRE(rc == 0, "alloc: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  rc = hipd_mem_write(c, b, 0, in, sizeof(in));
  REQUIRE(rc == 0, "write: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  rc = hipd_mem_read(c, b, 0, out, sizeof(out));
  REQUIRE(rc == 0, "read: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  REQUIRE(memcmp(in, out, sizeof(in)) == 0, "read back other bytes");
  rc = hipd_mem_free(c, b);
  REQUIRE(rc == 0, "free: %s", hipd_err_name(rc));
  return 0;
}

typedef struct {
  const char *socket;
  served_t served[2]; /* what two sessions were served by */
  int nconn;
} probe_t;

/* Open two sessions, note who serves each, run the workload in both. */
static int probe_fn(void *arg, char *msg, size_t msglen)
{
  probe_t *x = arg;
  hipd_conn_t *c[2] = {NULL, NULL};
  int rc = 0;

  for (int i = 0; i < x->nconn; i++) {
    REQUIRE(hipd_connect2(x->socket, "check_privsep", &c[i]) == 0,
            "connect: %s", hipd_last_error(NULL));
    hipd_set_timeout(c[i], 30000);
    REQUIRE(served_by(c[i], &x->served[i]) == 0, "daemon.info: %s",
            hipd_last_error(c[i]));
    if ((rc = workload(c[i], (unsigned)i, msg, msglen)) != 0)
      break;
  }
  for (int i = 0; i < x->nconn; i++)
    if (c[i] != NULL)
      hipd_close(c[i]);
  return rc;
}

/* Run probe_fn as @p user (NULL: root, here) in a forked child that
 * became that user, and bring back who served its sessions. */
static void probe_as(const char *user, probe_t *x)
{
  char msg[1024] = "";
  int fds[2], status;
  pid_t pid;

  if (user == NULL) {
    ck_assert_msg(probe_fn(x, msg, sizeof(msg)) == 0, "as root: %s", msg);
    return;
  }
  ck_assert(pipe(fds) == 0);
  pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    int rc = -1;
    close(fds[0]);
    if (harness_become(user) == 0)
      rc = probe_fn(x, msg, sizeof(msg));
    else
      snprintf(msg, sizeof(msg), "cannot become %s", user);
    if (write(fds[1], &rc, sizeof(rc)) != sizeof(rc) ||
        write(fds[1], x->served, sizeof(x->served)) != sizeof(x->served) ||
        write(fds[1], msg, sizeof(msg)) != sizeof(msg))
      _exit(2);
    _exit(0);
  }
  close(fds[1]);
  {
    int rc = -1;
    ck_assert(read(fds[0], &rc, sizeof(rc)) == (ssize_t)sizeof(rc));
    ck_assert(read(fds[0], x->served, sizeof(x->served)) ==
              (ssize_t)sizeof(x->served));
    ck_assert(read(fds[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg));
    close(fds[0]);
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(rc == 0, "as %s: %s", user, msg);
  }
}

/* /proc/PID/oom_score_adj, or -10000 if it cannot be read. */
static int oom_adj_of(pid_t pid)
{
  char path[64];
  int v = -10000;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
  if ((f = fopen(path, "r")) != NULL) {
    if (fscanf(f, "%d", &v) != 1)
      v = -10000;
    fclose(f);
  }
  return v;
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_worker_per_uid)
{
  harness_daemon_t *d = users_start_shared(NULL);
  probe_t a = {.socket = d->socket, .nconn = 2};
  probe_t b = {.socket = d->socket, .nconn = 1};

  probe_as(USER_A, &a);
  probe_as(USER_B, &b);
  /* Each uid has a worker; both of A's sessions share A's. */
  ck_assert_str_eq(a.served[0].process, "worker");
  ck_assert_int_eq(a.served[0].pid, a.served[1].pid);
  ck_assert_int_ne(a.served[0].pid, b.served[0].pid);
  ck_assert_int_ne(a.served[0].pid, d->pid);
  ck_assert_int_ne(b.served[0].pid, d->pid);
  /* Clients still see hipd's own pid. */
  ck_assert_int_eq(a.served[0].daemon_pid, d->pid);
  /* The workers run as hipd's account and serve their own tenant. */
  ck_assert_int_eq(a.served[0].uid, uid_hipd);
  ck_assert_int_eq(b.served[0].uid, uid_hipd);
  ck_assert_int_eq(a.served[0].tenant, uid_a);
  ck_assert_int_eq(b.served[0].tenant, uid_b);
  /* The OOM killer picks a tenant's worker before the listener. */
  ck_assert_int_lt(oom_adj_of(d->pid), 500);
  ck_assert_int_eq(oom_adj_of((pid_t)a.served[0].pid), 500);
  ck_assert_int_eq(oom_adj_of((pid_t)b.served[0].pid), 500);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* --tenant-workers 2 --worker-sessions 1: a uid's second session gets a
 * worker of its own, its third the one with fewer sessions; the tenant's
 * limits still count both (the tenant page): two sessions at 600 KiB of a
 * 1 MiB quota. */
START_TEST(test_tenant_workers)
{
  harness_daemon_t *d =
      users_start_shared("--tenant-workers", "2", "--worker-sessions", "1",
                         "--tenant-mem-quota", "1M", "--devices", "cpu", NULL);
  hipd_conn_t *c[3] = {NULL, NULL, NULL};
  served_t sv[3];
  hipd_buffer_t b;

  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &c[i]), 0);
    hipd_set_timeout(c[i], 30000);
    ck_assert_int_eq(served_by(c[i], &sv[i]), 0);
    ck_assert_str_eq(sv[i].process, "worker");
  }
  ck_assert_int_ne(sv[0].pid, sv[1].pid);
  ck_assert_msg(sv[2].pid == sv[0].pid || sv[2].pid == sv[1].pid,
                "a third worker (pid %lld) for a uid with --tenant-workers 2",
                (long long)sv[2].pid);
  ck_assert_int_eq(hipd_mem_alloc(c[0], 0, 600 * 1024, "byte", &b), 0);
  ck_assert_int_eq(hipd_mem_alloc(c[1], 0, 600 * 1024, "byte", &b),
                   HIPD_EQUOTA);
  for (int i = 0; i < 3; i++)
    hipd_close(c[i]);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* The defaults (--tenant-workers 4, --worker-sessions 4): a uid's first
 * four sessions share a worker, its fifth starts a second one, and its
 * sixth goes to that one (the least busy). On the CPU device alone: on an
 * NVIDIA GPU a uid spreads only as an MPS client (hipd(8)). */
START_TEST(test_worker_sessions)
{
  harness_daemon_t *d = users_start_shared("--devices", "cpu", NULL);
  hipd_conn_t *c[6] = {NULL};
  served_t sv[6];

  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &c[i]), 0);
    hipd_set_timeout(c[i], 30000);
    ck_assert_int_eq(served_by(c[i], &sv[i]), 0);
    ck_assert_str_eq(sv[i].process, "worker");
  }
  for (int i = 1; i < 4; i++)
    ck_assert_msg(sv[i].pid == sv[0].pid,
                  "session %d of 4 has worker %lld, not the first's %lld", i,
                  (long long)sv[i].pid, (long long)sv[0].pid);
  ck_assert_msg(sv[4].pid != sv[0].pid,
                "the fifth session joined a worker that had 4 already");
  ck_assert_int_eq(sv[5].pid, sv[4].pid);
  for (int i = 0; i < 6; i++)
    hipd_close(c[i]);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_worker_per_session)
{
  harness_daemon_t *d =
      users_start_shared("--isolation", "session", "--spin-cpus", "3", NULL);
  probe_t a = {.socket = d->socket, .nconn = 2};

  probe_as(USER_A, &a);
  ck_assert_str_eq(a.served[0].process, "worker");
  ck_assert_int_ne(a.served[0].pid, a.served[1].pid);
  ck_assert_int_eq(a.served[0].tenant, uid_a);
  /* Both workers poll within the listener's one budget. */
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(a.served[i].spin_cpus, 3);
    ck_assert_msg(a.served[i].spin_shared,
                  "session %d: its worker has no "
                  "share of the spin budget",
                  i);
  }
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_isolation_none)
{
  harness_daemon_t *d = users_start_shared("--isolation", "none", NULL);
  probe_t r = {.socket = d->socket, .nconn = 1};

  probe_as(NULL, &r);
  ck_assert_str_eq(r.served[0].process, "single");
  ck_assert_int_eq(r.served[0].pid, d->pid);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* B's session is open (as root) while A's worker is killed: B goes on,
 * A's next connection gets a fresh worker. */
START_TEST(test_worker_death_contained)
{
  harness_daemon_t *d = users_start_shared(NULL);
  probe_t a = {.socket = d->socket, .nconn = 1};
  probe_t a2 = {.socket = d->socket, .nconn = 1};
  hipd_conn_t *b = NULL;
  served_t sb;
  char msg[1024];
  char want[128];

  ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &b), 0);
  hipd_set_timeout(b, 30000);
  ck_assert_int_eq(served_by(b, &sb), 0);
  ck_assert_msg(workload(b, 1, msg, sizeof(msg)) == 0, "%s", msg);
  probe_as(USER_A, &a);
  ck_assert_int_ne(a.served[0].pid, sb.pid);
  ck_assert_int_gt(a.served[0].pid, 1);
  ck_assert_int_eq(kill((pid_t)a.served[0].pid, SIGKILL), 0);
  snprintf(want, sizeof(want), "(pid %lld) was killed by signal 9",
           (long long)a.served[0].pid);
  ck_assert_msg(harness_log_wait(d, want, 10000) == 1,
                "the listener did not report the worker's death");
  /* Root's session, in another worker, did not notice. */
  ck_assert_msg(workload(b, 2, msg, sizeof(msg)) == 0, "%s", msg);
  probe_as(USER_A, &a2);
  ck_assert_int_ne(a2.served[0].pid, a.served[0].pid);
  hipd_close(b);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

START_TEST(test_worker_linger)
{
  harness_daemon_t *d = users_start_shared("--worker-linger", "100", NULL);
  probe_t a = {.socket = d->socket, .nconn = 1};
  char want[128];

  probe_as(USER_A, &a);
  snprintf(want, sizeof(want), "worker of uid %u (pid %lld) exited",
           (unsigned)uid_a, (long long)a.served[0].pid);
  ck_assert_msg(harness_log_wait(d, want, 10000) == 1,
                "the idle worker did not exit");
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ---------------------------------------------------------------- cgroups */

/* The path of @p pid's group in the v1 hierarchy @p ctl ("memory",
 * "pids"), or in cgroup2 for NULL, into @p out; 0, or -1 without one. */
static int cgroup_of(pid_t pid, const char *ctl, char *out, size_t cap)
{
  char path[64], line[4096];
  int rc = -1;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
  if ((f = fopen(path, "r")) == NULL)
    return -1;
  while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
    char *c = strchr(line, ':'), *p;
    if (c == NULL || (p = strchr(++c, ':')) == NULL)
      continue;
    *p++ = '\0';
    p[strcspn(p, "\n")] = '\0';
    if (ctl == NULL ? *c == '\0' : strstr(c, ctl) != NULL) {
      snprintf(out, cap, "/sys/fs/cgroup%s%s%s", ctl ? "/" : "", ctl ? ctl : "",
               p);
      rc = 0;
    }
  }
  fclose(f);
  return rc;
}

/* Whether this host gives hipd groups to make: the v1 memory controller
 * as here on the CI machines. */
static int have_v1_memory(void)
{
  char p[4096];

  return cgroup_of(getpid(), "memory", p, sizeof(p)) == 0;
}

/* How the cgroup tests run here: CG_V1 (the hierarchies, where hipd makes
 * hipd-PID under its own group), CG_V2 (cgroup2 only: a group made for the
 * daemon alone, as systemd's Delegate= would, given to the harness in
 * HIPD_TEST_CGROUP), or CG_NONE (skipped, and said why). */
enum { CG_NONE, CG_V1, CG_V2 };
static char cg_v2_dir[4096];

static int cg_words(const char *path, const char *a, const char *b)
{
  char buf[512] = "";
  FILE *f = fopen(path, "r");

  if (f == NULL)
    return 0;
  if (fgets(buf, sizeof(buf), f) == NULL)
    buf[0] = '\0';
  fclose(f);
  return strstr(buf, a) != NULL && strstr(buf, b) != NULL;
}

static int cg_begin(const char *test)
{
  char own[4096], path[4300];

  if (have_v1_memory())
    return CG_V1;
  if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) != 0 ||
      cgroup_of(getpid(), NULL, own, sizeof(own)) != 0) {
    fprintf(stderr, "%s: skipped (neither v1 memory nor cgroup2 here)\n", test);
    return CG_NONE;
  }
  if (own[strlen(own) - 1] == '/')
    own[strlen(own) - 1] = '\0';
  /* The nearest group, ours or an ancestor, that gives its children the
   * memory and pids controllers (ours cannot once it holds processes: the
   * "no internal processes" rule); the daemon's group goes under it. */
  for (;;) {
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", own);
    if (cg_words(path, "memory", "pids"))
      break;
    if (strcmp(own, "/sys/fs/cgroup") == 0 || strrchr(own, '/') == NULL) {
      fprintf(stderr,
              "%s: skipped (no group above this process gives its children "
              "the memory and pids controllers)\n",
              test);
      return CG_NONE;
    }
    *strrchr(own, '/') = '\0';
  }
  snprintf(cg_v2_dir, sizeof(cg_v2_dir), "%s/hipd-test-%d", own, (int)getpid());
  snprintf(path, sizeof(path), "%s/cgroup.controllers", cg_v2_dir);
  if (mkdir(cg_v2_dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "%s: skipped (cannot make %s: %s)\n", test, cg_v2_dir,
            strerror(errno));
    return CG_NONE;
  }
  if (!cg_words(path, "memory", "pids")) {
    fprintf(stderr, "%s: skipped (%s has no memory and pids controllers)\n",
            test, cg_v2_dir);
    rmdir(cg_v2_dir);
    return CG_NONE;
  }
  setenv("HIPD_TEST_CGROUP", cg_v2_dir, 1);
  return CG_V2;
}

/* After the daemon started (the variable is for it alone), and after it
 * stopped (with @p stopped: the group it was given goes). */
static void cg_end(int mode, int stopped)
{
  char leaf[4200];

  unsetenv("HIPD_TEST_CGROUP");
  if (mode != CG_V2 || !stopped)
    return;
  snprintf(leaf, sizeof(leaf), "%s/hipd-listener", cg_v2_dir);
  rmdir(leaf);
  rmdir(cg_v2_dir);
}

/* The number in file @p name of directory @p dir, or -1. */
static long long file_num(const char *dir, const char *name)
{
  char path[4200];
  long long v = -1;
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  if ((f = fopen(path, "r")) != NULL) {
    if (fscanf(f, "%lld", &v) != 1)
      v = -1;
    fclose(f);
  }
  return v;
}

/* The group of @p pid in hierarchy @p ctl ends in /@p leaf. */
static void assert_group(pid_t pid, const char *ctl, const char *leaf,
                         char *dir, size_t cap)
{
  size_t n, l = strlen(leaf);

  ck_assert_msg(cgroup_of(pid, ctl, dir, cap) == 0, "pid %d: no %s cgroup",
                (int)pid, ctl);
  n = strlen(dir);
  ck_assert_msg(
      n > l && strcmp(dir + n - l, leaf) == 0 && dir[n - l - 1] == '/',
      "pid %d is in the %s cgroup %s, not .../%s", (int)pid, ctl, dir, leaf);
}

/* A compile helper of listener @p listener (its first one found). */
static pid_t compile_helper_of(pid_t listener)
{
  DIR *proc = opendir("/proc");
  struct dirent *de;
  pid_t found = -1;

  while (proc != NULL && found < 0 && (de = readdir(proc)) != NULL) {
    char path[300], stat[512], comm[64];
    int ppid;
    FILE *f;
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
    if ((f = fopen(path, "r")) == NULL)
      continue;
    if (fgets(stat, sizeof(stat), f) != NULL &&
        sscanf(stat, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 &&
        ppid == (int)listener && strcmp(comm, "hipd-compile") == 0)
      found = (pid_t)atoi(de->d_name);
    fclose(f);
  }
  if (proc != NULL)
    closedir(proc);
  return found;
}

/* Each uid's worker is in a group of its tenant's with the configured
 * limits, each compile helper in one of its own; the groups go with the
 * daemon. */
START_TEST(test_cgroup_per_tenant)
{
  harness_daemon_t *d;
  probe_t a = {.nconn = 1}, r = {.nconn = 1};
  char dir[4096], base[4096], leaf[64];
  hipd_conn_t *c;
  hipd_info_t *info = NULL;
  const char *st = NULL;
  size_t stlen = 0;
  pid_t helper;
  int mode = cg_begin("test_cgroup_per_tenant");
  const char *mem = mode == CG_V1 ? "memory" : NULL;
  const char *pids = mode == CG_V1 ? "pids" : NULL;
  const char *mem_max = mode == CG_V1 ? "memory.limit_in_bytes" : "memory.max";
  char max_rel[64];

  if (mode == CG_NONE)
    return;
  d = users_start_shared("--tenant-host-mem", "300M", "--tenant-max-pids",
                         "321", "--worker-linger", "60000", NULL);
  cg_end(mode, 0);
  a.socket = r.socket = d->socket;
  probe_as(USER_A, &a);
  probe_as(NULL, &r);
  ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &c), 0);
  ck_assert_int_eq(hipd_daemon_info(c, &info), 0);
  ck_assert_int_eq(hipd_info_str(info, "isolation.cgroups", &st, &stlen), 0);
  ck_assert_msg(stlen > 3 && strncmp(st, mode == CG_V1 ? "v1 " : "v2 ", 3) == 0,
                "isolation.cgroups: %.*s", (int)stlen, st);
  ck_assert_int_eq(info_get(info, "limits.tenant_host_mem"), 300 << 20);
  ck_assert_int_eq(info_get(info, "limits.tenant_max_pids"), 321);
  hipd_info_free(info);
  hipd_close(c);

  /* The tenant's group holds the limits; its workers are in its leaf
   * "worker", its runners' launcher in "runners" (a pids.max of its own,
   * below the tenant's: the worker keeps room for its threads). */
  snprintf(max_rel, sizeof(max_rel), "../%s", mem_max);
  snprintf(leaf, sizeof(leaf), "tenant-%u/worker", (unsigned)uid_a);
  assert_group((pid_t)a.served[0].pid, mem, leaf, dir, sizeof(dir));
  ck_assert_int_eq(file_num(dir, max_rel), 300 << 20);
  assert_group((pid_t)a.served[0].pid, pids, leaf, dir, sizeof(dir));
  ck_assert_int_eq(file_num(dir, "../pids.max"), 321);
  ck_assert_int_lt(file_num(dir, "../runners/pids.max"), 321);
  ck_assert_int_gt(file_num(dir, "../runners/pids.max"), 200);
  ck_assert_int_gt(file_num(dir, "../runners/cgroup.procs"), 1);
  assert_group((pid_t)r.served[0].pid, mem, "tenant-0/worker", dir,
               sizeof(dir));
  *strrchr(dir, '/') = '\0';
  /* The listener: v1, where it was, above the groups it made; v2, in the
   * leaf hipd-listener of the group it was given, beside them. */
  ck_assert_int_eq(cgroup_of(d->pid, mem, base, sizeof(base)), 0);
  if (mode == CG_V2) {
    assert_group(d->pid, NULL, "hipd-listener", base, sizeof(base));
    snprintf(base, sizeof(base), "%s", cg_v2_dir);
  }
  ck_assert_msg(strncmp(dir, base, strlen(base)) == 0 &&
                    strlen(dir) > strlen(base),
                "%s is not under the listener's %s", dir, base);
  helper = compile_helper_of(d->pid);
  ck_assert_int_gt(helper, 0);
  assert_group(helper, mem, "compile-0", base, sizeof(base));
  ck_assert_int_gt(file_num(base, mem_max), 1LL << 30);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  /* Removed with the daemon. */
  ck_assert_msg(access(dir, F_OK) != 0, "%s is still there", dir);
  cg_end(mode, 1);
}
END_TEST

/* The tenants' limits follow a reload (SIGHUP): memory.max and pids.max
 * of the groups that exist, the runners' leaf's share with them. */
static void conf_put(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");

  ck_assert_ptr_nonnull(f);
  ck_assert_int_ge(fputs(text, f), 0);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_cgroup_reload)
{
  int mode = cg_begin("test_cgroup_reload");
  const char *mem = mode == CG_V1 ? "memory" : NULL;
  const char *pids = mode == CG_V1 ? "pids" : NULL;
  const char *max =
      mode == CG_V1 ? "../memory.limit_in_bytes" : "../memory.max";
  const char *conf = harness_temp_path("privsep-hipd.conf");
  harness_daemon_t *d;
  hipd_conn_t *c = NULL;
  served_t sv;
  char dir[4096];

  if (mode == CG_NONE)
    return;
  ck_assert_ptr_nonnull(conf);
  conf_put(conf, "tenant-host-mem = 300M\ntenant-max-pids = 321\n");
  d = users_start_shared("--config", conf, "--worker-linger", "60000", NULL);
  cg_end(mode, 0);
  ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &c), 0);
  ck_assert_int_eq(served_by(c, &sv), 0);
  assert_group((pid_t)sv.pid, mem, "tenant-0/worker", dir, sizeof(dir));
  ck_assert_int_eq(file_num(dir, max), 300 << 20);
  conf_put(conf, "tenant-host-mem = 400M\ntenant-max-pids = 500\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  ck_assert_int_eq(harness_log_wait(d, "configuration reloaded", 10000), 1);
  ck_assert_int_eq(file_num(dir, max), 400 << 20);
  assert_group((pid_t)sv.pid, pids, "tenant-0/worker", dir, sizeof(dir));
  ck_assert_int_eq(file_num(dir, "../pids.max"), 500);
  /* All but an eighth (62) for the runners. */
  ck_assert_int_eq(file_num(dir, "../runners/pids.max"), 500 - 62);
  hipd_close(c);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  cg_end(mode, 1);
}
END_TEST

/* A tenant's CPU-device buffers stop at its host memory limit with ENOMEM
 * (not the OOM killer), and its worker goes on; another uid allocates in
 * its own group. */
static int fill_fn(void *arg, char *msg, size_t msglen)
{
  const char *socket = arg;
  hipd_buffer_t b[64];
  hipd_conn_t *c = NULL;
  int n = 0, rc = 0;

  REQUIRE(hipd_connect2(socket, "check_privsep", &c) == 0, "connect: %s",
          hipd_last_error(NULL));
  hipd_set_timeout(c, 30000);
  while (n < 64 &&
         (rc = hipd_mem_alloc(c, 0, (size_t)16 << 20, "byte", &b[n])) == 0) {
    rc = hipd_mem_memset(c, b[n], 0, (size_t)16 << 20, 7);
    REQUIRE(rc == 0, "memset: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
    n++;
  }
  REQUIRE(rc == HIPD_ENOMEM, "%d x 16 MiB allocated, then %s (%s)", n,
          hipd_err_name(rc), hipd_last_error(c));
  REQUIRE(strstr(hipd_last_error(c), "--tenant-host-mem") != NULL, "%s",
          hipd_last_error(c));
  /* Room again once a buffer is freed; the worker still serves. */
  REQUIRE(n > 0, "not even one buffer: %s", hipd_last_error(c));
  REQUIRE(hipd_mem_free(c, b[n - 1]) == 0, "free: %s", hipd_last_error(c));
  rc = workload(c, 3, msg, msglen);
  hipd_close(c);
  if (rc == 0)
    snprintf(msg, msglen, "%d", n - 1);
  return rc;
}

START_TEST(test_cgroup_memory_limit)
{
  harness_daemon_t *d;
  hipd_conn_t *c;
  hipd_buffer_t big;
  char msg[1024] = "", want[128];
  int n;

  int mode = cg_begin("test_cgroup_memory_limit");

  if (mode == CG_NONE)
    return;
  d = users_start_shared("--tenant-host-mem", "192M", NULL);
  cg_end(mode, 0);
  ck_assert_msg(harness_run_as(USER_A, fill_fn, d->socket, msg, sizeof(msg)) ==
                    0,
                "as " USER_A ": %s", msg);
  n = atoi(msg);
  /* 192 MiB less the slack and the processes' own memory. */
  ck_assert_msg(n >= 1 && n < 12, "%d buffers of 16 MiB", n);
  snprintf(want, sizeof(want), "worker of uid %u", (unsigned)uid_a);
  ck_assert_msg(!harness_log_contains(d, "OOM killer"),
                "the OOM killer ended a process");
  /* Root's tenant has a group of its own. */
  ck_assert_int_eq(hipd_connect2(d->socket, "check_privsep", &c), 0);
  hipd_set_timeout(c, 30000);
  ck_assert_int_eq(hipd_mem_alloc(c, 0, (size_t)128 << 20, "byte", &big), 0);
  ck_assert_int_eq(hipd_mem_memset(c, big, 0, (size_t)128 << 20, 1), 0);
  ck_assert_int_eq(hipd_mem_free(c, big), 0);
  hipd_close(c);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  cg_end(mode, 1);
}
END_TEST

/* A CPU kernel that makes threads without end stops at the tenant's
 * --tenant-max-pids; the tenant's worker and another uid go on. */
#define THREADS_SRC                                                            \
  "#include <pthread.h>\n"                                                     \
  "#include <unistd.h>\n"                                                      \
  "static void *nap(void *a) { (void)a; usleep(1500000); return 0; }\n"        \
  "extern \"C\" __global__ void spawn(int *out, int n)\n"                      \
  "{\n"                                                                        \
  "  static pthread_t t[1024];\n"                                              \
  "  pthread_attr_t at;\n"                                                     \
  "  int made = 0;\n"                                                          \
  "  if (blockIdx.x != 0 || threadIdx.x != 0)\n"                               \
  "    return;\n"                                                              \
  "  pthread_attr_init(&at);\n"                                                \
  "  pthread_attr_setstacksize(&at, 65536);\n"                                 \
  "  while (made < n && made < 1024 &&\n"                                      \
  "         pthread_create(&t[made], &at, nap, 0) == 0)\n"                     \
  "    made++;\n"                                                              \
  "  out[0] = made;\n"                                                         \
  "  for (int i = 0; i < made; i++)\n"                                         \
  "    pthread_join(t[i], 0);\n"                                               \
  "}\n"

static int threads_fn(void *arg, char *msg, size_t msglen)
{
  const char *socket = arg;
  const uint32_t one[3] = {1, 1, 1};
  hipd_conn_t *c = NULL;
  hipd_kernel_t k;
  hipd_buffer_t b;
  hipd_args_t *args;
  int32_t made = -1;
  int rc;

  REQUIRE(hipd_connect2(socket, "check_privsep", &c) == 0, "connect: %s",
          hipd_last_error(NULL));
  hipd_set_timeout(c, 60000);
  rc = hipd_kernel_compile(c, 0, THREADS_SRC, "spawn", NULL, &k, NULL);
  REQUIRE(rc == 0, "compile: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  REQUIRE(hipd_mem_alloc(c, 0, sizeof(made), "int32", &b) == 0, "alloc: %s",
          hipd_last_error(c));
  args = hipd_args_new();
  hipd_args_buffer(args, b, 0);
  hipd_args_i32(args, 400);
  rc = hipd_kernel_run(c, k, one, one, 0, HIPD_STREAM_NULL, args);
  hipd_args_free(args);
  REQUIRE(rc == 0, "run: %s (%s)", hipd_err_name(rc), hipd_last_error(c));
  REQUIRE(hipd_mem_read(c, b, 0, &made, sizeof(made)) == 0, "read: %s",
          hipd_last_error(c));
  /* The tenant's worker still serves, and its runner still runs. */
  rc = workload(c, 5, msg, msglen);
  hipd_close(c);
  if (rc == 0)
    snprintf(msg, msglen, "%d", (int)made);
  return rc;
}

START_TEST(test_cgroup_pids_limit)
{
  harness_daemon_t *d;
  probe_t r = {.nconn = 1};
  char msg[1024] = "";
  int made;

  int mode = cg_begin("test_cgroup_pids_limit");

  if (mode == CG_NONE)
    return;
  d = users_start_shared("--tenant-max-pids", "100", NULL);
  cg_end(mode, 0);
  r.socket = d->socket;
  ck_assert_msg(
      harness_run_as(USER_A, threads_fn, d->socket, msg, sizeof(msg)) == 0,
      "as " USER_A ": %s", msg);
  made = atoi(msg);
  ck_assert_msg(made >= 1 && made < 100,
                "the kernel made %d threads with --tenant-max-pids 100", made);
  probe_as(NULL, &r);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
  cg_end(mode, 1);
}
END_TEST

/* A worker's account that does not exist stops hipd at start, naming it. */
START_TEST(test_bad_worker_account)
{
  const char *args[] = {"--devices", "cpu", "--user", "hipd_no_such_user",
                        NULL};
  harness_daemon_t *d = harness_spawn(NULL, args);

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_wait_exit(d, 20000), 1);
  ck_assert(harness_log_contains(d, "hipd_no_such_user"));
  harness_free(d);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("privsep");
  TCase *tc;
  struct passwd *pw;
  int failed;

  if (geteuid() != 0) {
    printf("check_privsep: SKIP: needs root to create the test users " USER_A
           " and " USER_B " and to run clients as them\n");
    return 77;
  }
  setenv("HIPD_TEST_TMP", "/tmp", 1);
  harness_init("privsep");
  if (users_make(USER_A, &uid_a, NULL) != 0 ||
      users_make(USER_B, &uid_b, NULL) != 0 ||
      (pw = getpwnam("hipd")) == NULL) {
    printf("check_privsep: SKIP: cannot create the test users (useradd)\n");
    harness_fini();
    return 77;
  }
  uid_hipd = pw->pw_uid;
  tc = tcase_create("workers");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_worker_per_uid);
  tcase_add_test(tc, test_worker_per_session);
  tcase_add_test(tc, test_tenant_workers);
  tcase_add_test(tc, test_worker_sessions);
  tcase_add_test(tc, test_isolation_none);
  tcase_add_test(tc, test_worker_death_contained);
  tcase_add_test(tc, test_worker_linger);
  tcase_add_test(tc, test_bad_worker_account);
  suite_add_tcase(s, tc);
  tc = tcase_create("cgroups");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, test_cgroup_per_tenant);
  tcase_add_test(tc, test_cgroup_reload);
  tcase_add_test(tc, test_cgroup_memory_limit);
  tcase_add_test(tc, test_cgroup_pids_limit);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
