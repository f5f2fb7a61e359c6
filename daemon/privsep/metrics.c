/* SPDX-License-Identifier: MIT */
/* daemon/privsep/metrics.c: the listener binds --metrics-listen, runs the
 * unprivileged metrics process and answers its scrapes (metrics.h). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/admin.h"
#include "executor.h"
#include "hipd.h"
#include "log.h"
#include "privsep/ipc.h"
#include "privsep/metrics.h"
#include "privsep/wire.h"
#include "util/account.h"

extern char **environ;

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
/* A metrics process that ran this long before it died restarts after the
 * shortest back-off again. */
#define BACKOFF_RESET_MS 60000
/* Scrapes the metrics process may have in flight here. */
#define MAX_INFLIGHT 8

static struct {
  daemon_t *d;
  int fd; /* the listening TCP socket, -1: none */
  char exe[PATH_MAX];
  char **argv;
  uv_process_t proc; /* proc.data = NULL */
  ipc_chan_t ch;
  int running;       /* proc is a live process (its exit not seen) */
  int adopted;       /* ch is a channel of metrics_adopt(), no process */
  int handles;       /* proc and ch handles still open */
  uint64_t gen;      /* bumped per process: answers go to their own */
  uint64_t started;  /* uv_now() when the process started */
  uint32_t backoff;  /* the next restart's delay, ms */
  uv_timer_t timer;  /* the restart */
  int timer_open;    /* timer initialised and not closed */
  int stopping;      /* metrics_stop() called */
  int term_sent;     /* SIGTERM sent at shutdown */
  uint32_t inflight; /* scrapes asked of admin_metrics_text() */
  uint64_t restarts;
} metrics_proc = {.fd = -1};

int metrics_pid(const daemon_t *d)
{
  (void)d;
  return metrics_proc.running ? metrics_proc.proc.pid : 0;
}

/* ------------------------------------------------------------ the address */

int metrics_addr_parse(const char *spec, struct sockaddr_storage *ss,
                       socklen_t *len, int *loopback, hipd_err_t *err)
{
  char host[INET6_ADDRSTRLEN + 2];
  const char *colon, *port_s;
  char *end;
  unsigned long port;
  size_t hl;

  memset(ss, 0, sizeof(*ss));
  if (spec[0] == '[') {
    const char *rb = strchr(spec, ']');
    if (rb == NULL || rb[1] != ':')
      return err_set(err, HIPD_EINVAL,
                     "'%s' is not [IPV6]:PORT (e.g. [::1]:9464)", spec);
    hl = (size_t)(rb - spec - 1);
    if (hl == 0 || hl >= sizeof(host))
      return err_set(err, HIPD_EINVAL, "'%s': not an IPv6 address", spec);
    memcpy(host, spec + 1, hl);
    host[hl] = '\0';
    port_s = rb + 2;
  } else {
    colon = strrchr(spec, ':');
    if (colon == NULL || strchr(spec, ':') != colon)
      return err_set(err, HIPD_EINVAL,
                     "'%s' is not ADDR:PORT (e.g. 127.0.0.1:9464, "
                     "[::1]:9464)",
                     spec);
    hl = (size_t)(colon - spec);
    if (hl == 0 || hl >= sizeof(host))
      return err_set(err, HIPD_EINVAL, "'%s': not an IPv4 address", spec);
    memcpy(host, spec, hl);
    host[hl] = '\0';
    port_s = colon + 1;
  }
  errno = 0;
  port = strtoul(port_s, &end, 10);
  if (port_s[0] < '0' || port_s[0] > '9' || *end != '\0' || errno != 0 ||
      port == 0 || port > 65535)
    return err_set(err, HIPD_EINVAL, "'%s': the port must be 1 to 65535", spec);
  if (spec[0] == '[') {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
      return err_set(err, HIPD_EINVAL,
                     "'%s': '%s' is not a numeric IPv6 address", spec, host);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    *len = sizeof(*a);
    *loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
                (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) &&
                 a->sin6_addr.s6_addr[12] == 127);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
      return err_set(err, HIPD_EINVAL,
                     "'%s': '%s' is not a numeric IPv4 address", spec, host);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    *len = sizeof(*a);
    *loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  return 0;
}

int metrics_init(daemon_t *d, hipd_err_t *err)
{
  const char *spec = d->cfg.metrics_listen;
  struct sockaddr_storage ss;
  socklen_t len;
  int loopback, fd, one = 1, rc;
  ssize_t n;

  metrics_proc.d = d;
  if (spec == NULL)
    return 0;
  if ((rc = metrics_addr_parse(spec, &ss, &len, &loopback, err)) != 0)
    return err_set(err, rc, "--metrics-listen %s", err->msg);
  n = readlink("/proc/self/exe", metrics_proc.exe,
               sizeof(metrics_proc.exe) - 1);
  if (n <= 0)
    return err_set(err, HIPD_EIO,
                   "--metrics-listen: cannot find this program: readlink "
                   "/proc/self/exe: %s",
                   strerror(errno));
  metrics_proc.exe[n] = '\0';
  /* The metrics process becomes the --user account (sandbox.h): a
   * missing one would fail at every restart, so it stops hipd now. */
  if (geteuid() == 0) {
    account_t acct;
    int found = account_by_name(d->cfg.worker_user, &acct, NULL) == 0;
    if (!found || acct.uid == 0)
      return err_set(err, HIPD_EINVAL,
                     "--metrics-listen: the metrics process's account '%s' "
                     "%s (--user names it)",
                     d->cfg.worker_user, !found ? "does not exist" : "is root");
  }
  fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return err_set(err, HIPD_EIO, "--metrics-listen %s: socket: %s", spec,
                   strerror(errno));
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ss.ss_family == AF_INET6)
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    close(fd);
    return err_set(err, HIPD_EIO, "--metrics-listen %s: %s", spec,
                   e == EADDRINUSE      ? "address in use"
                   : e == EADDRNOTAVAIL ? "no such address on this host"
                   : e == EACCES        ? "permission denied (a port below "
                                          "1024 needs root)"
                                        : strerror(e));
  }
  metrics_proc.fd = fd;
  metrics_proc.backoff = BACKOFF_MIN_MS;
  if (!loopback)
    log_warn(0,
             "--metrics-listen %s is not a loopback address: anyone who can "
             "reach it reads every tenant's usage (users, sessions, memory, "
             "requests)",
             spec);
  return 0;
}

/* ------------------------------------------------------------- scrapes */

typedef struct {
  uint64_t gen;
  uint32_t msgid;
} scrape_t;

static void reply_error(uint32_t msgid, int code, const char *msg)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error_response(&pk, msgid, code, "%s", msg);
  ipc_send(&metrics_proc.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* admin_metrics_text()'s answer: to the process that asked, if it is
 * still the one running. */
static void scrape_done(void *ctx, int status, char *text, size_t len)
{
  scrape_t *s = ctx;
  msgpack_sbuffer sb;
  msgpack_packer pk;

  metrics_proc.inflight--;
  if (s->gen == metrics_proc.gen &&
      (metrics_proc.running || metrics_proc.adopted) &&
      !metrics_proc.ch.broken) {
    if (status != 0 || text == NULL) {
      reply_error(s->msgid, status != 0 ? status : HIPD_EIO,
                  "metrics: the listener could not render the metrics");
    } else {
      msgpack_sbuffer_init(&sb);
      msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
      proto_pack_response(&pk, s->msgid);
      msgpack_pack_str(&pk, (uint32_t)len);
      msgpack_pack_str_body(&pk, text, len);
      ipc_send(&metrics_proc.ch, sb.data, sb.size);
      msgpack_sbuffer_destroy(&sb);
    }
  }
  free(text);
  free(s);
}

/* metrics []: the text of every series (the admin view: whoever reaches
 * the HTTP port sees all, as documented). */
static void on_metrics(void *ctx, const proto_msg_t *m, const void *args)
{
  scrape_t *s;

  (void)ctx;
  /* --isolation none: this process's sessions' early answers (call.h)
   * counted first. */
  exec_bridge_run();
  if (args == NULL) {
    reply_error(m->msgid, HIPD_EPARAMS, "metrics: takes no params");
    return;
  }
  if (metrics_proc.inflight >= MAX_INFLIGHT) {
    reply_error(m->msgid, HIPD_EBUSY, "metrics: too many scrapes at once");
    return;
  }
  if ((s = malloc(sizeof(*s))) == NULL) {
    reply_error(m->msgid, HIPD_ENOMEM, "out of memory");
    return;
  }
  s->gen = metrics_proc.gen;
  s->msgid = m->msgid;
  metrics_proc.inflight++;
  admin_metrics_text(metrics_proc.d, scrape_done, s);
}

/* ready []: the metrics process serves; one with params is refused as an
 * unknown message. */
static void on_ready(void *ctx, const proto_msg_t *m, const void *args)
{
  (void)m;
  if (args == NULL) {
    ipc_break(ctx, "unknown message");
    return;
  }
  log_info(0, "metrics process ready (pid %d): http://%s/metrics",
           metrics_proc.running ? (int)metrics_proc.proc.pid : 0,
           metrics_proc.d->cfg.metrics_listen != NULL
               ? metrics_proc.d->cfg.metrics_listen
               : "-");
}

/* What the listener takes from the metrics process (wire.h). */
static const wire_handler_fn from_metrics[WIRE_NMSG] = {
    [WIRE_METRICS_READY] = on_ready,
    [WIRE_METRICS] = on_metrics,
};

static void on_msg(ipc_chan_t *ch, const proto_msg_t *m)
{
  if (wire_dispatch(from_metrics, WIRE_FROM_METRICS, m, ch) != 0)
    ipc_break(ch, "unknown message");
}

/* --------------------------------------------------------------- process */

static void spawn(void);
static void handle_closed(void);

static void timer_cb(uv_timer_t *t)
{
  (void)t;
  if (!metrics_proc.stopping)
    spawn();
}

/* Both handles of the last process are closed: start the next one after
 * the back-off. */
static void handle_closed(void)
{
  if (--metrics_proc.handles > 0 || metrics_proc.stopping)
    return;
  if (!metrics_proc.timer_open) {
    uv_timer_init(metrics_proc.d->loop, &metrics_proc.timer);
    metrics_proc.timer_open = 1;
  }
  uv_timer_start(&metrics_proc.timer, timer_cb, metrics_proc.backoff, 0);
  metrics_proc.backoff = metrics_proc.backoff * 2 > BACKOFF_MAX_MS
                             ? BACKOFF_MAX_MS
                             : metrics_proc.backoff * 2;
}

static void proc_closed_cb(uv_handle_t *h)
{
  (void)h;
  handle_closed();
}

static void ch_closed(ipc_chan_t *ch)
{
  (void)ch;
  if (metrics_proc.adopted) {
    /* No process, no restart. */
    metrics_proc.adopted = 0;
    metrics_proc.handles--;
    return;
  }
  handle_closed();
}

static void exit_cb(uv_process_t *p, int64_t status, int sig)
{
  uint64_t ran = uv_now(metrics_proc.d->loop) - metrics_proc.started;

  metrics_proc.running = 0;
  if (ran >= BACKOFF_RESET_MS)
    metrics_proc.backoff = BACKOFF_MIN_MS;
  if (metrics_proc.stopping)
    log_info(0, "metrics process (pid %d) exited", (int)p->pid);
  else if (sig != 0)
    log_error(0,
              "metrics process (pid %d) was killed by signal %d (%s); "
              "restarting it in %u ms",
              (int)p->pid, sig, strsignal(sig), (unsigned)metrics_proc.backoff);
  else
    log_warn(0,
             "metrics process (pid %d) exited with status %lld; restarting "
             "it in %u ms",
             (int)p->pid, (long long)status, (unsigned)metrics_proc.backoff);
  uv_close((uv_handle_t *)&metrics_proc.proc, proc_closed_cb);
  ipc_close(&metrics_proc.ch, ch_closed);
}

static void ch_broken(ipc_chan_t *ch, const char *why)
{
  (void)ch;
  if (metrics_proc.adopted) {
    log_debug(0, "adopted metrics channel closed: %s", why);
    ipc_close(&metrics_proc.ch, ch_closed);
    return;
  }
  if (!metrics_proc.running || metrics_proc.stopping)
    return;
  /* Its end closed: it is exiting (exit_cb says how); anything else is
   * a message the listener could not accept. */
  if (strcmp(why, "the other end closed the channel") == 0)
    log_debug(0, "metrics process (pid %d): channel closed",
              (int)metrics_proc.proc.pid);
  else
    log_warn(0, "metrics process (pid %d): channel closed (%s); stopping it",
             (int)metrics_proc.proc.pid, why);
  uv_process_kill(&metrics_proc.proc, SIGKILL);
}

/* The command line of the metrics process: hipd's options and
 * --worker=metrics; its environment: hipd's, without what belongs to the
 * main process alone (systemd's notify socket and watchdog). */
static int exec_args(char ***args_out, char ***env_out)
{
  static char role[] = "--worker=metrics";
  size_t argc = 0, nenv = 0, ne = 0;
  char **args, **env;

  while (metrics_proc.argv[argc] != NULL)
    argc++;
  for (char **e = environ; *e != NULL; e++)
    nenv++;
  args = calloc(argc + 2, sizeof(char *));
  env = calloc(nenv + 1, sizeof(char *));
  if (args == NULL || env == NULL) {
    free(args);
    free(env);
    return HIPD_ENOMEM;
  }
  args[0] = metrics_proc.exe;
  for (size_t i = 1; i < argc; i++)
    args[i] = metrics_proc.argv[i];
  args[argc > 0 ? argc : 1] = role;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "NOTIFY_SOCKET=", 14) != 0 &&
        strncmp(*e, "WATCHDOG_", 9) != 0 && strncmp(*e, "LISTEN_", 7) != 0)
      env[ne++] = *e;
  *args_out = args;
  *env_out = env;
  return 0;
}

static void spawn(void)
{
  uv_process_options_t o = {0};
  uv_stdio_container_t io[5];
  char **args = NULL, **env = NULL;
  int rc;

  if (ipc_init(metrics_proc.d->loop, &metrics_proc.ch) != 0) {
    log_error(0, "cannot start the metrics process: out of memory");
    metrics_proc.handles = 1;
    handle_closed(); /* retried after the back-off */
    return;
  }
  if (exec_args(&args, &env) != 0) {
    log_error(0, "cannot start the metrics process: out of memory");
    metrics_proc.handles = 1;
    ipc_close(&metrics_proc.ch, ch_closed); /* retried after the back-off */
    return;
  }
  metrics_proc.ch.no_handles = 1;
  metrics_proc.gen++;
  io[0].flags = UV_IGNORE;
  io[1].flags = UV_INHERIT_FD;
  io[1].data.fd = 1;
  io[2].flags = UV_INHERIT_FD;
  io[2].data.fd = 2;
  io[3].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
  io[3].data.stream = (uv_stream_t *)&metrics_proc.ch.pipe;
  io[4].flags = UV_INHERIT_FD;
  io[4].data.fd = metrics_proc.fd;
  o.file = metrics_proc.exe;
  o.args = args;
  o.env = env;
  o.stdio = io;
  o.stdio_count = 5;
  o.exit_cb = exit_cb;
  rc = uv_spawn(metrics_proc.d->loop, &metrics_proc.proc, &o);
  free(args);
  free(env);
  metrics_proc.handles = 2;
  if (rc != 0) {
    log_error(0, "cannot start the metrics process: %s; retrying in %u ms",
              uv_strerror(rc), (unsigned)metrics_proc.backoff);
    uv_close((uv_handle_t *)&metrics_proc.proc, proc_closed_cb);
    ipc_close(&metrics_proc.ch, ch_closed);
    return;
  }
  metrics_proc.running = 1;
  metrics_proc.started = uv_now(metrics_proc.d->loop);
  if (metrics_proc.gen > 1)
    metrics_proc.restarts++;
  if ((rc = ipc_start(&metrics_proc.ch, on_msg, ch_broken)) != 0) {
    log_error(0, "metrics process (pid %d): cannot read its channel: %s",
              (int)metrics_proc.proc.pid, uv_strerror(rc));
    uv_process_kill(&metrics_proc.proc, SIGKILL);
  }
}

void metrics_start(daemon_t *d, char **argv)
{
  metrics_proc.d = d;
  if (metrics_proc.fd < 0)
    return;
  metrics_proc.argv = argv;
  spawn();
}

int metrics_adopt(daemon_t *d, int fd)
{
  int rc;

  if (metrics_proc.running || metrics_proc.adopted || metrics_proc.handles > 0)
    return HIPD_EBUSY;
  metrics_proc.d = d;
  rc = ipc_open(d->loop, &metrics_proc.ch, fd);
  if (rc == HIPD_ENOMEM) /* nothing was set up */
    return rc;
  metrics_proc.adopted = 1;
  metrics_proc.handles = 1;
  metrics_proc.gen++;
  metrics_proc.ch.no_handles = 1;
  if (rc != 0 || ipc_start(&metrics_proc.ch, on_msg, ch_broken) != 0) {
    ipc_close(&metrics_proc.ch, ch_closed);
    return HIPD_EIO;
  }
  return 0;
}

uint32_t metrics_stop(daemon_t *d, int force)
{
  (void)d;
  if (!metrics_proc.stopping) {
    metrics_proc.stopping = 1;
    if (metrics_proc.timer_open) {
      uv_close((uv_handle_t *)&metrics_proc.timer, NULL);
      metrics_proc.timer_open = 0;
    }
    if (metrics_proc.fd >= 0) {
      close(metrics_proc.fd);
      metrics_proc.fd = -1;
    }
  }
  if (metrics_proc.running && (force || !metrics_proc.term_sent)) {
    uv_process_kill(&metrics_proc.proc, force ? SIGKILL : SIGTERM);
    metrics_proc.term_sent = 1;
  }
  return metrics_proc.handles > 0 ? 1 : 0;
}
