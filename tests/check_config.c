/* SPDX-License-Identifier: MIT */
/* tests/check_config.c: hipd.conf(5) and SIGHUP reloads, against real
 * daemons (tests/lib/harness.c).
 *
 * What is checked: the file's values take effect (daemon.info's limits),
 * in a [hipd] section or before any; the command line overrides them; an
 * unknown key, a bad value, a bad boolean, a command-line-only option and
 * a missing --config file stop hipd with exit code 2 and a message naming
 * FILE:LINE; SIGHUP with a changed file changes the log level, the limits
 * (an open session meets the new mem-quota at its next allocation, a new
 * session the new max-handles) and the access policy for new connections,
 * while a session stays open and usable, in --isolation none and in the
 * default worker mode (where the worker applies them); a broken file on
 * reload keeps the running configuration whole; a change that needs a
 * restart is logged as such and otherwise ignored; every limit that
 * daemon.info shows follows a reload, in a worker too. And the table of
 * options (daemon/config/options.c), in this process: every option but
 * the command-line-only ones is settable from the file (and passed on to
 * workers), and a reload copies exactly the options the table marks
 * reloadable, logging the others as restart-only. */
#include "config.h"

#include "daemon_util.h"

#include "config/options.h"
#include "privsep/mps.h"
#include "run.h"

#define WAIT_MS 20000

/* Write @p text to @p path (NULL: a fresh hipd.conf) and return the path
 * (a fresh one lives until the program ends). */
static const char *conf_write(const char *path, const char *text)
{
  FILE *f;

  if (path == NULL)
    path = harness_temp_path("hipd.conf");
  f = fopen(path, "w");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  ck_assert_int_ge(fputs(text, f), 0);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

static int64_t limit(hipd_conn_t *conn, const char *name)
{
  hipd_info_t *info = NULL;
  char path[96];
  int64_t v = -1;

  ck_assert_int_eq(hipd_daemon_info(conn, &info), 0);
  snprintf(path, sizeof(path), "limits.%s", name);
  ck_assert_int_eq(hipd_info_int(info, path, &v), 0);
  hipd_info_free(info);
  return v;
}

/* Count the lines of @p d's log that contain @p needle. */
static int log_count(const harness_daemon_t *d, const char *needle)
{
  FILE *f = fopen(d->log, "r");
  char line[4096];
  int n = 0;

  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strstr(line, needle) != NULL)
      n++;
  fclose(f);
  return n;
}

/* Wait until @p needle is in @p n lines of the log. */
static void log_wait_count(const harness_daemon_t *d, const char *needle, int n)
{
  long long deadline = harness_now_ms() + WAIT_MS;

  while (log_count(d, needle) < n && harness_now_ms() < deadline)
    harness_sleep_ms(10);
  if (log_count(d, needle) < n)
    harness_log_dump(d);
  ck_assert_msg(log_count(d, needle) >= n, "'%s' not logged %d times", needle,
                n);
}

/* ------------------------------------------------------------- the file */

START_TEST(test_file_values)
{
  const char *conf = conf_write(NULL, "# hipd.conf of check_config\n"
                                      "max-sessions = 64\n"
                                      "\n"
                                      "[hipd]\n"
                                      "; a comment\n"
                                      "max-handles = 500\n"
                                      "max-message = 2M\n"
                                      "strict-allow = no\n");
  harness_daemon_t *d = harness_start("--devices", "cpu", "--isolation", "none",
                                      "--config", conf, NULL);
  hipd_conn_t *conn;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  ck_assert_int_eq(limit(conn, "max_sessions"), 64);
  ck_assert_int_eq(limit(conn, "max_handles"), 500);
  ck_assert_int_eq(limit(conn, "max_message"), 2 << 20);
  ck_assert_int_eq(limit(conn, "max_streams"), 64); /* the default */
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* The command line wins over the file; the worker (isolation uid) has
 * what its listener read. */
START_TEST(test_cmdline_overrides)
{
  const char *conf =
      conf_write(NULL, "max-sessions = 64\nmax-streams = 8\nmax-depth = 9\n");
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--max-sessions", "32", "--config",
                    conf, "--max-depth=10", NULL);
  hipd_conn_t *conn;

  ck_assert_ptr_nonnull(d);
  conn = connect_to(d);
  ck_assert_int_eq(limit(conn, "max_sessions"), 32);
  ck_assert_int_eq(limit(conn, "max_streams"), 8);
  ck_assert_int_eq(limit(conn, "max_depth"), 10);
  hipd_close(conn);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* hipd does not start, exit code 2, its stderr says @p want. */
static void refused(const char *text, const char *want_fmt)
{
  const char *conf = conf_write(NULL, text);
  const char *args[] = {"--devices", "cpu", "--config", conf, NULL};
  harness_daemon_t *d = harness_spawn(NULL, args);
  char want[1024];

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_wait_exit(d, WAIT_MS), 2);
  snprintf(want, sizeof(want), want_fmt, conf);
  if (!harness_log_contains(d, want))
    harness_log_dump(d);
  ck_assert_msg(harness_log_contains(d, want), "not in the log: %s", want);
  harness_free(d);
}

START_TEST(test_bad_file)
{
  refused("max-sessions = 64\n\n[hipd]\nmax-sesions = 3\n",
          "hipd: %s:4: unknown option \"max-sesions\"");
  refused("max-sessions = lots\n",
          "hipd: %s:1: invalid value 'lots' for max-sessions");
  refused("# x\nstrict-allow = maybe\n",
          "hipd: %s:2: invalid value 'maybe' for strict-allow");
  refused("worker = uid:0:0:1\n",
          "hipd: %s:1: \"worker\" is a command-line option only");
  refused("config = /etc/passwd\n",
          "hipd: %s:1: \"config\" is a command-line option only");
  refused("isolation = some\n",
          "hipd: %s:1: isolation: 'some' is not uid, session or none");
  refused("[other]\nmax-sessions = 3\n", "hipd: %s:2: \"max-sessions\" is in "
                                         "section [other]");
  refused("max-sessions\n", "hipd: %s:1: not \"name = value\"");
}
END_TEST

/* A missing --config file is an error; --config '' and --no-config read
 * none. */
START_TEST(test_missing_file)
{
  const char *missing = harness_temp_path("absent.conf");
  const char *args[] = {"--config", missing, NULL};
  harness_daemon_t *d = harness_spawn(NULL, args);
  char want[600];

  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_wait_exit(d, WAIT_MS), 2);
  snprintf(want, sizeof(want), "hipd: %s: No such file or directory", missing);
  ck_assert_msg(harness_log_contains(d, want), "not in the log: %s", want);
  harness_free(d);
  d = harness_start("--devices", "cpu", "--isolation", "none", "--config", "",
                    NULL);
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* -------------------------------------------------------------- reloads */

/* Allocate @p bytes; @return the status. */
static int alloc_status(hipd_conn_t *conn, size_t bytes, hipd_buffer_t *out)
{
  return hipd_mem_alloc(conn, 0, bytes, "byte", out);
}

static void usable(hipd_conn_t *conn)
{
  unsigned char in[4096], back[4096];
  hipd_buffer_t b;

  fill_random(in, sizeof(in), 7);
  ck_assert_int_eq(alloc_status(conn, sizeof(in), &b), 0);
  ck_assert_int_eq(hipd_mem_write(conn, b, 0, in, sizeof(in)), 0);
  ck_assert_int_eq(hipd_mem_read(conn, b, 0, back, sizeof(back)), 0);
  ck_assert(memcmp(in, back, sizeof(in)) == 0);
  ck_assert_int_eq(hipd_mem_free(conn, b), 0);
}

/* @p reloaded: the lines "configuration reloaded" a reload logs (the
 * listener's, and its worker's). */
static void reload_applies(const char *isolation, int reloaded)
{
  const char *conf = conf_write(NULL, "log-level = info\n"
                                      "max-handles = 1000\n"
                                      "max-sessions = 100\n");
  harness_daemon_t *d = harness_start("--devices", "cpu", "--isolation",
                                      isolation, "--config", conf, NULL);
  hipd_conn_t *a, *b;
  hipd_buffer_t buf[16], big;
  int n, rc;

  ck_assert_ptr_nonnull(d);
  a = connect_to(d);
  usable(a);
  ck_assert_int_eq(alloc_status(a, 2 * MiB, &big), 0);
  ck_assert_int_eq(hipd_mem_free(a, big), 0);
  ck_assert_int_eq(limit(a, "max_handles"), 1000);
  ck_assert_int_eq(log_count(d, " debug "), 0);

  conf_write(conf, "log-level = debug\n"
                   "[hipd]\n"
                   "max-handles = 4\n"
                   "max-sessions = 50\n"
                   "mem-quota = 1M\n"
                   "tenant-max-streams = 7\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "configuration reloaded", reloaded);

  /* The open session goes on, under the new limits from its next request
   * on: the quota refuses 2 MiB now. */
  usable(a);
  ck_assert_int_eq(limit(a, "max_sessions"), 50);
  ck_assert_int_eq(limit(a, "mem_quota"), 1 << 20);
  ck_assert_int_eq(limit(a, "tenant_max_streams"), 7);
  ck_assert_int_eq(alloc_status(a, 2 * MiB, &big), HIPD_EQUOTA);
  /* Its handle table keeps its size: more than 4 buffers. */
  for (n = 0; n < 8; n++)
    ck_assert_int_eq(alloc_status(a, 64, &buf[n]), 0);
  for (n = 0; n < 8; n++)
    ck_assert_int_eq(hipd_mem_free(a, buf[n]), 0);

  /* A new session has the new max-handles: an allocation beyond it is
   * refused. */
  b = connect_to(d);
  ck_assert_int_eq(limit(b, "max_handles"), 4);
  for (n = 0; n < 16; n++)
    if ((rc = alloc_status(b, 64, &buf[n])) != 0)
      break;
  ck_assert_msg(n > 0 && n <= 4, "%d buffers under max-handles 4", n);
  ck_assert_int_ne(rc, 0);
  /* And debug lines are written now. */
  ck_assert_int_gt(log_count(d, " debug "), 0);
  hipd_close(b);
  usable(a);
  hipd_close(a);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_reload_single)
{
  reload_applies("none", 1);
}
END_TEST

START_TEST(test_reload_worker)
{
  reload_applies("uid", 2);
}
END_TEST

/* A broken file on reload: logged with FILE:LINE, nothing changes (not
 * even the entries before the bad one); a fixed file then reloads. */
START_TEST(test_reload_broken)
{
  const char *conf = conf_write(NULL, "max-sessions = 100\n");
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--config", conf, NULL);
  hipd_conn_t *a;
  char want[600];

  ck_assert_ptr_nonnull(d);
  a = connect_to(d);
  conf_write(conf, "max-sessions = 20\nmax-handles = 9\nmax-stream = 3\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "reload failed: the running configuration is kept", 1);
  snprintf(want, sizeof(want), "%s:3: unknown option \"max-stream\"", conf);
  ck_assert_msg(harness_log_contains(d, want), "not logged: %s", want);
  ck_assert_int_eq(harness_wait_exit(d, 100), -1); /* still running */
  usable(a);
  ck_assert_int_eq(limit(a, "max_sessions"), 100);
  ck_assert_int_eq(limit(a, "max_handles"), 1048576);

  /* A policy that cannot be built (a user that does not exist) keeps it
   * too. */
  conf_write(conf, "max-sessions = 20\n"
                   "allow-users = no-such-user-check-config\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "reload failed: the running configuration is kept", 2);
  ck_assert_int_eq(limit(a, "max_sessions"), 100);

  /* A device rule only a worker can check (the listener has no device):
   * a probe worker refuses it before anything changes. */
  conf_write(conf, "max-sessions = 20\ndevice-allow = cpu:7=root\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "reload failed: the running configuration is kept", 3);
  ck_assert(harness_log_contains(d, "'cpu:7' names no device"));
  ck_assert_int_eq(limit(a, "max_sessions"), 100);

  conf_write(conf, "max-sessions = 20\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "configuration reloaded from the listener", 1);
  ck_assert_int_eq(limit(a, "max_sessions"), 20);
  usable(a);
  /* A device rule the probe accepts: the reload finishes when the probe
   * (run on the loop, not waited for) exits. */
  conf_write(conf, "max-sessions = 30\ndevice-allow = cpu:0=root\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "configuration reloaded from the listener", 2);
  ck_assert_int_eq(limit(a, "max_sessions"), 30);
  usable(a);
  hipd_close(a);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* What only a restart changes is logged, and not applied; what can change
 * in the same file is. */
START_TEST(test_reload_restart_only)
{
  const char *conf = conf_write(NULL, "max-streams = 10\n");
  harness_daemon_t *d = harness_start("--devices", "cpu", "--isolation", "none",
                                      "--config", conf, NULL);
  hipd_conn_t *a;

  ck_assert_ptr_nonnull(d);
  a = connect_to(d);
  conf_write(conf, "max-streams = 12\n"
                   "socket-mode = 0600\n"
                   "cache-size = 64M\n"
                   "cpu-devices = 2\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "configuration reloaded", 1);
  ck_assert(harness_log_contains(
      d, "needs a restart: socket-mode, cpu-devices, cache-size"));
  ck_assert_int_eq(limit(a, "max_streams"), 12);
  /* Still one CPU device, the socket where it was. */
  {
    int n = -1;
    ck_assert_int_eq(hipd_device_count(a, &n), 0);
    ck_assert_int_eq(n, 1);
  }
  hipd_close(a);
  a = connect_to(d);
  usable(a);
  hipd_close(a);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* The access policy applies to connections accepted after the reload;
 * the open session keeps running. */
START_TEST(test_reload_policy)
{
  const char *conf = conf_write(NULL, "max-sessions = 100\n");
  harness_daemon_t *d =
      harness_start("--devices", "cpu", "--config", conf, NULL);
  hipd_conn_t *a, *b = NULL;
  hipd_info_t *info = NULL;
  int rc;

  ck_assert_ptr_nonnull(d);
  a = connect_to(d);
  /* Root is allowed by every rule unless strict-allow. */
  conf_write(conf, "allow-users = 54321\nstrict-allow = yes\n");
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, "configuration reloaded from the listener", 1);
  usable(a);
  rc = hipd_connect2(d->socket, "check_config", &b);
  if (rc == 0) {
    rc = hipd_daemon_info(b, &info);
    hipd_info_free(info);
  }
  ck_assert_int_eq(rc, HIPD_EPERM);
  /* Logged once the refusal was sent: it may come after the client's
   * answer. */
  ck_assert_int_eq(
      harness_log_wait(d, "is not allowed by --allow-users 54321", 5000), 1);
  if (b != NULL)
    hipd_close(b);
  usable(a);
  hipd_close(a);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ------------------------------------------------------------ the table */

/* A valid value for option @p o that differs from its default, as a
 * hipd.conf value. */
static const char *table_value(const option_spec_t *o, char *buf, size_t len)
{
  switch (o->type) {
  case OPTION_SIZE:
    snprintf(buf, len, "%llu",
             (unsigned long long)((int64_t)o->hi != o->def ? o->hi : o->lo));
    return buf;
  case OPTION_MODE:
    return "0600";
  case OPTION_FLAG:
    return "yes";
  case OPTION_ENUM: {
    int n = 0;
    while (o->names[n + 1] != NULL)
      n++;
    ck_assert_int_ne(n, o->def);
    return o->names[n];
  }
  case OPTION_LIST:
    if (strcmp(o->name, "mps-active-threads") == 0)
      return "root=75";
    if (strcmp(o->name, "mps-device-mem") == 0)
      return "@0=8G";
    return "cpu:0=root";
  case OPTION_CUSTOM:
    ck_assert_str_eq(o->name, "log-level");
    return "debug";
  case OPTION_STRING:
    if (strcmp(o->name, "metrics-listen") == 0)
      return "127.0.0.1:9464";
    if (strcmp(o->name, "mps-tenants") == 0)
      return "root";
    return "x";
  case OPTION_INFO:
    break;
  }
  ck_abort_msg("--%s: no value for its type", o->name);
  return NULL;
}

/* Whether the options of a file take option @p o. */
static int in_file(const option_spec_t *o)
{
  if (o->when == OPTION_CMDLINE)
    return 0;
#ifndef HAVE_MICROHTTPD
  if (strcmp(o->name, "metrics-listen") == 0)
    return 0; /* refused by a build without libmicrohttpd */
#endif
  return 1;
}

/* A hipd.conf that sets every option a file takes to a value other than
 * its default, loaded into @p cfg. */
static void load_every_option(daemon_config_t *cfg, char ***args)
{
  char text[16384], value[64];
  size_t n = 0;
  const char *conf;
  char *argv[] = {"hipd", "--config", NULL, NULL};

  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (in_file(o))
      n += (size_t)snprintf(text + n, sizeof(text) - n, "%s = %s\n", o->name,
                            table_value(o, value, sizeof(value)));
    ck_assert_uint_lt(n, sizeof(text));
  }
  conf = conf_write(NULL, text);
  argv[2] = (char *)conf;
  ck_assert_int_eq(options_load(3, argv, 0, cfg, args), 0);
}

START_TEST(test_table_file)
{
  daemon_config_t def, cfg;
  char **args = NULL, **def_args = NULL, want[128], value[64];
  char *argv[] = {"hipd", "--no-config", NULL};
  size_t nfile = 0, nargs = 0;

  ck_assert_int_eq(options_load(2, argv, 0, &def, &def_args), 0);
  load_every_option(&cfg, &args);
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    int passed = 0;
    if (!in_file(o))
      continue;
    nfile++;
    ck_assert_msg(options_differ(o, &def, &cfg), "%s = ... changed nothing",
                  o->name);
    /* A worker gets it as an option. */
    if (o->type == OPTION_FLAG)
      snprintf(want, sizeof(want), "--%s", o->name);
    else
      snprintf(want, sizeof(want), "--%s=%s", o->name,
               table_value(o, value, sizeof(value)));
    for (size_t j = 1; args[j] != NULL; j++)
      passed += strcmp(args[j], want) == 0;
    ck_assert_msg(passed == 1, "workers are not given %s", want);
  }
  while (args[nargs] != NULL)
    nargs++;
  /* argv[0], the file's entries, then --config FILE. */
  ck_assert_uint_eq(nargs, 1 + nfile + 2);
  ck_assert_uint_ge(nfile, 40);
  options_args_free(args);
  options_args_free(def_args);
  options_free(&cfg);
  options_free(&def);
}
END_TEST

/* The command-line-only options are refused in a file, and an unknown
 * key too (the messages are test_bad_file's). */
START_TEST(test_table_cmdline_only)
{
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    char text[128];
    daemon_config_t cfg;
    char **args = NULL, *argv[] = {"hipd", "--config", NULL, NULL};
    if (o->when != OPTION_CMDLINE)
      continue;
    snprintf(text, sizeof(text), "%s = 1\n", o->name);
    argv[2] = (char *)conf_write(NULL, text);
    ck_assert_int_eq(options_load(3, argv, 0, &cfg, &args), HIPD_EINVAL);
    ck_assert_ptr_null(args);
  }
}
END_TEST

/* --mps-active-threads and --mps-device-mem: a rule is PERCENT/BYTES or
 * WHO=..., checked when given (its value, that its user or group exists);
 * a worker's share is its user's rule, else its groups', else the plain
 * one, else 50% and no memory limit; among rules of a kind, the last. */
static int mps_load(daemon_config_t *cfg, const char *opt, const char *a,
                    const char *b)
{
  char *argv[] = {"hipd",      "--no-config", (char *)opt, (char *)a,
                  (char *)opt, (char *)b,     NULL};
  char **args = NULL;
  int rc = options_load(b != NULL ? 6 : 4, argv, 1, cfg, &args);

  options_args_free(args);
  return rc;
}

START_TEST(test_mps_rules)
{
  static const char *const bad[] = {
      "0",   "101", "x", "nosuch-hipd-user=50", "@nosuch-hipd-group=50",
      "=50", "@=50"};
  daemon_config_t cfg;
  mps_limits_t lim;
  hipd_err_t err;

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ck_assert_msg(mps_rule_check("mps-active-threads", bad[i], 0, &err) ==
                      HIPD_EINVAL,
                  "'%s' accepted", bad[i]);
    ck_assert_msg(strstr(err.msg, "--mps-active-threads") != NULL, "%s",
                  err.msg);
    ck_assert_int_eq(mps_load(&cfg, "--mps-active-threads", bad[i], NULL),
                     HIPD_EINVAL);
  }
  ck_assert_int_eq(
      mps_rule_check("mps-active-threads", "nosuch-hipd-user=5", 0, &err),
      HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-active-threads: no user 'nosuch-hipd-user'");
  ck_assert_int_eq(
      mps_rule_check("mps-device-mem", "@nosuch-hipd-group=1G", 1, &err),
      HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-device-mem: no group 'nosuch-hipd-group'");
  ck_assert_int_eq(mps_rule_check("mps-device-mem", "1G", 1, &err), 0);
  ck_assert_int_eq(mps_rule_check("mps-device-mem", "0", 1, &err), 0);

  /* No rule: 50%, no memory limit. */
  ck_assert_int_eq(mps_load(&cfg, "--isolation", "uid", NULL), 0);
  mps_limits_for(&cfg, 0, 0, &lim);
  ck_assert_uint_eq(lim.threads, MPS_DEFAULT_THREADS);
  ck_assert_uint_eq(lim.mem, 0);
  options_free(&cfg);
  /* A user's rule, a group's (by gid), the plain one; the last wins. */
  {
    char *argv[] = {"hipd",
                    "--no-config",
                    "--mps-active-threads",
                    "20",
                    "--mps-active-threads",
                    "30",
                    "--mps-active-threads",
                    "@0=60",
                    "--mps-active-threads",
                    "root=90",
                    "--mps-device-mem",
                    "1G",
                    "--mps-device-mem",
                    "0=2G",
                    NULL};
    char **args = NULL;
    ck_assert_int_eq(options_load(14, argv, 1, &cfg, &args), 0);
    options_args_free(args);
  }
  mps_limits_for(&cfg, 0, 0, &lim); /* root: its own rule */
  ck_assert_uint_eq(lim.threads, 90);
  ck_assert_uint_eq(lim.mem, (uint64_t)2 << 30);
  mps_limits_for(&cfg, 65534, 0, &lim); /* in group 0: the group's */
  ck_assert_uint_eq(lim.threads, 60);
  ck_assert_uint_eq(lim.mem, (uint64_t)1 << 30);
  mps_limits_for(&cfg, 65534, 65534, &lim); /* anyone else: the plain */
  ck_assert_uint_eq(lim.threads, 30);
  ck_assert_uint_eq(lim.mem, (uint64_t)1 << 30);
  options_free(&cfg);
}
END_TEST

/* Load --mps-tenants @p value (NULL: the default) into @p cfg and make it
 * the running one, as mps_start() and a reload do. */
static void tenants_load(daemon_config_t *cfg, const char *value)
{
  hipd_err_t err;

  if (value != NULL)
    ck_assert_int_eq(mps_load(cfg, "--mps-tenants", value, NULL), 0);
  else
    ck_assert_int_eq(mps_load(cfg, "--isolation", "uid", NULL), 0);
  ck_assert_int_eq(mps_tenants_set(cfg->mps_tenants, &err), 0);
}

/* --mps-tenants: auto gives the MPS server to one uid's workers at a time
 * (a second uid's get contexts of their own until the first's last client
 * ends), all to everyone, a list to its users and groups; bad values are
 * refused when given, and a bad one set at run time leaves the running one
 * as it was. */
START_TEST(test_mps_tenants)
{
  static const char *const bad[] = {
      "", "a,,b", ",root", "root,", "nosuch-hipd-user", "@nosuch-hipd-group"};
  daemon_config_t cfg;
  hipd_err_t err;
  int counted;

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ck_assert_msg(mps_tenants_check(bad[i], &err) == HIPD_EINVAL,
                  "'%s' accepted", bad[i]);
  ck_assert_int_eq(mps_tenants_check("nosuch-hipd-user", &err), HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: no user 'nosuch-hipd-user'");
  ck_assert_int_eq(mps_tenants_check("root,@nosuch-hipd-group", &err),
                   HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: no group 'nosuch-hipd-group'");
  ck_assert_int_eq(mps_tenants_check("a,,b", &err), HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: 'a,,b' is not auto, all or a "
                            "comma list of users, uids, @groups and @gids");
  ck_assert_int_eq(mps_tenants_check("auto", &err), 0);
  ck_assert_int_eq(mps_tenants_check("all", &err), 0);
  ck_assert_int_eq(mps_tenants_check("root,@0,65534", &err), 0);
  ck_assert_int_eq(mps_load(&cfg, "--mps-tenants", "a,,b", NULL), HIPD_EINVAL);

  /* Without a control daemon nobody is a client. */
  tenants_load(&cfg, "all");
  ck_assert_int_eq(mps_tenant_take(0, 0, &counted), 0);
  options_free(&cfg);
  mps_pretend_active(1);
  /* auto (the default): one uid at a time. */
  tenants_load(&cfg, NULL);
  ck_assert_int_eq(mps_tenant_take(1000, 1000, &counted), 1);
  ck_assert_int_eq(counted, 1);
  ck_assert_int_eq(mps_tenant_take(1000, 1000, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(1001, 1001, &counted), 0);
  ck_assert_int_eq(counted, 0);
  mps_tenant_release(1000);
  ck_assert_int_eq(mps_tenant_take(1001, 1001, &counted), 0);
  mps_tenant_release(1001); /* not counted: no effect */
  mps_tenant_release(1000);
  ck_assert_int_eq(mps_tenant_take(1001, 1001, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(1000, 1000, &counted), 0);
  mps_tenant_release(1001);
  options_free(&cfg);
  /* all: everyone, uncounted. */
  tenants_load(&cfg, "all");
  ck_assert_int_eq(mps_tenant_take(1000, 1000, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(1001, 1001, &counted), 1);
  ck_assert_int_eq(counted, 0);
  options_free(&cfg);
  /* A list: its users and groups (primary or from the group database). */
  tenants_load(&cfg, "root,@100");
  ck_assert_int_eq(mps_tenant_take(0, 0, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(65534, 100, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(65534, 65534, &counted), 0);
  options_free(&cfg);
  /* A user, a uid, a group by name and one by gid, each for its own. */
  tenants_load(&cfg, "root,1000,@root,@100");
  ck_assert_int_eq(mps_tenant_take(0, 65534, &counted), 1);
  ck_assert_int_eq(counted, 0);
  ck_assert_int_eq(mps_tenant_take(1000, 1000, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(65534, 0, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(65534, 100, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(65534, 65534, &counted), 0);
  /* A uid with no account: its primary gid is all its groups. */
  ck_assert_int_eq(mps_tenant_take(4000001, 4000001, &counted), 0);
  /* A bad list at run time: refused, the running one kept. */
  ck_assert_int_eq(mps_tenants_set("root,nosuch-hipd-user", &err), HIPD_EINVAL);
  ck_assert_str_eq(err.msg, "--mps-tenants: no user 'nosuch-hipd-user'");
  ck_assert_int_eq(mps_tenant_take(1000, 1000, &counted), 1);
  ck_assert_int_eq(mps_tenant_take(65534, 65534, &counted), 0);
  options_free(&cfg);
  ck_assert_int_eq(mps_tenants_set(NULL, &err), 0);
  mps_pretend_active(0);
}
END_TEST

/* A reload copies exactly the reloadable options, and names exactly the
 * others as needing a restart, in the table's order. */
START_TEST(test_table_reload)
{
  daemon_config_t def, run, next, want_next;
  char **args = NULL, **def_args = NULL, restart[1024], want[1024];
  char *argv[] = {"hipd", "--no-config", NULL};
  size_t n = 0;

  ck_assert_int_eq(options_load(2, argv, 0, &def, &def_args), 0);
  ck_assert_int_eq(options_copy(&run, &def), 0);
  load_every_option(&next, &args);
  ck_assert_int_eq(options_copy(&want_next, &next), 0);

  options_restart_changes(&def, &next, restart, sizeof(restart));
  want[0] = '\0';
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (o->when == OPTION_RESTART && in_file(o))
      n += (size_t)snprintf(want + n, sizeof(want) - n, "%s%s", n ? ", " : "",
                            o->name);
  }
  ck_assert_str_eq(restart, want);

  options_apply(&run, &next);
  for (size_t i = 0; i < options_count; i++) {
    const option_spec_t *o = &options_table[i];
    if (o->type == OPTION_INFO)
      continue;
    if (o->when == OPTION_RELOAD)
      ck_assert_msg(!options_differ(o, &run, &want_next),
                    "a reload does not apply %s", o->name);
    else
      ck_assert_msg(!options_differ(o, &run, &def),
                    "a reload applies %s, which needs a restart", o->name);
  }
  /* What the reload replaced is the new configuration's to free. */
  options_free(&next);
  options_free(&want_next);
  options_free(&run);
  options_free(&def);
  options_args_free(args);
  options_args_free(def_args);
}
END_TEST

/* Every limit that daemon.info shows follows a reload, in the worker that
 * serves the session (told by its listener) as in the single process. */
static void reload_every_limit(const char *isolation, const char *reloaded)
{
  static const struct {
    const char *option, *value, *info;
    int64_t want;
  } limits[] = {
      {"max-message", "8M", "max_message", 8 << 20},
      {"max-depth", "9", "max_depth", 9},
      {"max-inflight", "33", "max_inflight", 33},
      {"output-cap", "5M", "output_cap", 5 << 20},
      {"max-input-bytes", "16M", "max_input_bytes", 16 << 20},
      {"max-sessions", "77", "max_sessions", 77},
      {"max-handles", "999", "max_handles", 999},
      {"max-streams", "11", "max_streams", 11},
      {"mem-quota", "3M", "mem_quota", 3 << 20},
      {"write-timeout", "4321", "write_timeout_ms", 4321},
      {"hello-timeout", "5432", "hello_timeout_ms", 5432},
      {"request-timeout", "6543", "request_timeout_ms", 6543},
      {"shutdown-timeout", "2345", "shutdown_timeout_ms", 2345},
      {"tenant-mem-quota", "7M", "tenant_mem_quota", 7 << 20},
      {"tenant-max-sessions", "55", "tenant_max_sessions", 55},
      {"tenant-max-handles", "5555", "tenant_max_handles", 5555},
      {"tenant-max-streams", "44", "tenant_max_streams", 44},
  };
  const size_t n = sizeof(limits) / sizeof(limits[0]);
  const char *conf = conf_write(NULL, "max-sessions = 100\n");
  harness_daemon_t *d = harness_start("--devices", "cpu", "--isolation",
                                      isolation, "--config", conf, NULL);
  char text[2048];
  size_t len = 0;
  hipd_conn_t *a;

  ck_assert_ptr_nonnull(d);
  a = connect_to(d);
  for (size_t i = 0; i < n; i++) {
    ck_assert_int_ne(limit(a, limits[i].info), limits[i].want);
    len += (size_t)snprintf(text + len, sizeof(text) - len, "%s = %s\n",
                            limits[i].option, limits[i].value);
  }
  conf_write(conf, text);
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  log_wait_count(d, reloaded, 1);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(limit(a, limits[i].info) == limits[i].want,
                  "%s after a reload: %lld, not %lld", limits[i].info,
                  (long long)limit(a, limits[i].info),
                  (long long)limits[i].want);
  usable(a);
  hipd_close(a);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_reload_every_limit_single)
{
  reload_every_limit("none", "configuration reloaded");
}
END_TEST

START_TEST(test_reload_every_limit_worker)
{
  reload_every_limit("uid", "configuration reloaded from the listener");
}
END_TEST

static Suite *config_suite(void)
{
  Suite *s = suite_create("config");
  TCase *tc;

  tc = tcase_create("file");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_file_values);
  tcase_add_test(tc, test_cmdline_overrides);
  tcase_add_test(tc, test_bad_file);
  tcase_add_test(tc, test_missing_file);
  suite_add_tcase(s, tc);
  tc = tcase_create("reload");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_reload_single);
  tcase_add_test(tc, test_reload_worker);
  tcase_add_test(tc, test_reload_broken);
  tcase_add_test(tc, test_reload_restart_only);
  if (geteuid() == 0)
    tcase_add_test(tc, test_reload_policy);
  tcase_add_test(tc, test_reload_every_limit_single);
  tcase_add_test(tc, test_reload_every_limit_worker);
  suite_add_tcase(s, tc);
  tc = tcase_create("table");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_table_file);
  tcase_add_test(tc, test_table_cmdline_only);
  tcase_add_test(tc, test_table_reload);
  tcase_add_test(tc, test_mps_rules);
  tcase_add_test(tc, test_mps_tenants);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_config");
  failed = test_run(config_suite());
  harness_fini();
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
