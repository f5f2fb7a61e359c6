/* SPDX-License-Identifier: MIT */
/* daemon/metrics/http.c: the metrics process: libmicrohttpd in a sandbox,
 * asking the listener for each scrape (http.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "metrics/http.h"
#include "privsep/ipc.h"
#include "privsep/metrics.h"
#include "privsep/wire.h"
#include "sandbox/sandbox.h"
#include "util/clock.h"

/* How long a scrape waits for the listener's text before it is a 503. */
#define SCRAPE_TIMEOUT_MS 5000
/* HTTP connections at once (each has a thread of libmicrohttpd's), and
 * from one address. */
#define MAX_CONNECTIONS 16
#define MAX_PER_ADDRESS 8
/* An idle connection is closed after this many seconds. */
#define IDLE_TIMEOUT_S 10
/* A connection's request headers must all be in within this many seconds
 * of its accept (or of the answer to its previous request); timer_cb shuts
 * down one that is late, within a second more. The idle timeout alone
 * restarts with every byte: clients that send a header a byte a second
 * would hold every slot for ever. */
#define HEADER_DEADLINE_S 5
/* A request's header block (the response is not counted). */
#define REQUEST_MEMORY (16 * 1024)
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One scrape, shared by the HTTP thread that waits for it and the loop
 * that asks the listener. Fields marked (mu) are read and written under
 * http.mu; (loop) on the loop thread only. */
typedef struct scrape {
  struct scrape *next; /* http.queue (mu), then http.pending (loop) */
  pthread_cond_t cond;
  int refs;          /* (mu) the waiting thread's and the loop's */
  int done;          /* (mu) the answer is in */
  int ok;            /* (mu) text is the metrics, else why says why not */
  char *text;        /* (mu) malloc'd */
  size_t len;        /* (mu) */
  char why[192];     /* (mu) */
  uint32_t msgid;    /* (loop) */
  uint64_t deadline; /* (loop) uv_now() */
} scrape_t;

/* One HTTP connection, for the header deadline: made when libmicrohttpd
 * accepts it (notify_cb, its socket context), gone when it is closed,
 * before its descriptor is (libmicrohttpd's order). Fields under http.mu. */
typedef struct conn_slot {
  int fd;            /* -1: free */
  uint64_t since_ms; /* util_now_ms() at the accept or the last answer */
  int headers;       /* the current request's headers are in */
  int cut;           /* shut down for being late */
} conn_slot_t;

static struct {
  daemon_t *d;
  uv_loop_t *loop;
  ipc_chan_t ch;
  uv_async_t async; /* scrapes queued by the HTTP threads */
  uv_timer_t timer; /* gives up on scrapes the listener does not answer */
  struct MHD_Daemon *mhd;
  pthread_mutex_t mu;
  scrape_t *queue; /* (mu) new scrapes, for the loop */
  int closed;      /* (mu) the listener is gone: no more scrapes */
  conn_slot_t conns[MAX_CONNECTIONS]; /* (mu) */
  scrape_t *pending;                  /* (loop) asked, not yet answered */
  int stopping;                       /* (loop) */
} http = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The request handler's mark of a request whose headers were seen. */
static int seen_mark;

/* ------------------------------------------------------------ scrapes */

/* Under http.mu. */
static void scrape_unref_locked(scrape_t *s)
{
  if (--s->refs > 0)
    return;
  pthread_cond_destroy(&s->cond);
  free(s->text);
  free(s);
}

/* Hand the answer to the waiting thread (the loop's reference goes). Takes
 * @p text (malloc'd) when @p ok. */
static void scrape_finish(scrape_t *s, int ok, char *text, size_t len,
                          const char *why)
{
  pthread_mutex_lock(&http.mu);
  if (!s->done) {
    s->done = 1;
    s->ok = ok;
    s->text = text;
    s->len = len;
    text = NULL;
    snprintf(s->why, sizeof(s->why), "%s", why != NULL ? why : "");
    pthread_cond_signal(&s->cond);
  }
  scrape_unref_locked(s);
  pthread_mutex_unlock(&http.mu);
  free(text);
}

static void fail_pending(const char *why)
{
  while (http.pending != NULL) {
    scrape_t *s = http.pending;
    http.pending = s->next;
    scrape_finish(s, 0, NULL, 0, why);
  }
}

/* The loop takes the scrapes queued by the HTTP threads and asks the
 * listener for each. */
static void async_cb(uv_async_t *a)
{
  scrape_t *q;

  (void)a;
  pthread_mutex_lock(&http.mu);
  q = http.queue;
  http.queue = NULL;
  pthread_mutex_unlock(&http.mu);
  while (q != NULL) {
    scrape_t *s = q;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int rc;

    q = s->next;
    if (http.stopping || http.ch.broken) {
      scrape_finish(s, 0, NULL, 0, "the listener is gone");
      continue;
    }
    s->msgid = http.ch.next_msgid++;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    wire_pack_head(&pk, WIRE_METRICS, s->msgid);
    rc = ipc_send(&http.ch, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    if (rc != 0) {
      scrape_finish(s, 0, NULL, 0, "the listener is gone");
      continue;
    }
    s->deadline = uv_now(http.loop) + SCRAPE_TIMEOUT_MS;
    s->next = http.pending;
    http.pending = s;
  }
}

/* Shut down the connections whose request headers are late
 * (HEADER_DEADLINE_S): the connection's thread sees the end of its input
 * and closes it. A slot is freed before its descriptor is closed, so
 * under http.mu the descriptor is still the connection's. */
static void cut_late_headers(void)
{
  uint64_t now = util_now_ms();

  pthread_mutex_lock(&http.mu);
  for (size_t i = 0; i < MAX_CONNECTIONS; i++) {
    conn_slot_t *k = &http.conns[i];
    if (k->fd < 0 || k->headers || k->cut ||
        now - k->since_ms < HEADER_DEADLINE_S * 1000u)
      continue;
    k->cut = 1;
    shutdown(k->fd, SHUT_RDWR);
    log_debug(0,
              "metrics http: a connection closed: no complete request "
              "headers within %d s",
              HEADER_DEADLINE_S);
  }
  pthread_mutex_unlock(&http.mu);
}

static void timer_cb(uv_timer_t *t)
{
  uint64_t now = uv_now(http.loop);

  (void)t;
  cut_late_headers();
  for (scrape_t **pp = &http.pending; *pp != NULL;) {
    scrape_t *s = *pp;
    if (now >= s->deadline) {
      *pp = s->next;
      scrape_finish(s, 0, NULL, 0, "the listener did not answer in time");
    } else {
      pp = &s->next;
    }
  }
}

/* An answer of the listener: [1, msgid, nil, text] or an error. */
static void on_response(const proto_msg_t *m)
{
  scrape_t *s = NULL;
  const char *p;
  size_t n;
  char *text;

  for (scrape_t **pp = &http.pending; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->msgid == m->msgid) {
      s = *pp;
      *pp = s->next;
      break;
    }
  if (s == NULL) {
    /* Given up on already (timer_cb). */
    log_debug(0, "metrics: a late answer to scrape %u", m->msgid);
    return;
  }
  if (m->error != NULL && m->error->type != MSGPACK_OBJECT_NIL) {
    int code;
    const char *msg;
    size_t mlen;
    char why[192];
    if (proto_error_decode(m->error, &code, &msg, &mlen) != 0) {
      msg = "a malformed error";
      mlen = strlen(msg);
    }
    snprintf(why, sizeof(why), "%.*s", (int)mlen, msg);
    scrape_finish(s, 0, NULL, 0, why);
    return;
  }
  if (m->result == NULL || proto_obj_bytes(m->result, &p, &n) != 0) {
    scrape_finish(s, 0, NULL, 0, "a malformed answer from the listener");
    ipc_break(&http.ch, "a malformed answer to metrics");
    return;
  }
  if ((text = malloc(n > 0 ? n : 1)) == NULL) {
    scrape_finish(s, 0, NULL, 0, "out of memory");
    return;
  }
  memcpy(text, p, n);
  scrape_finish(s, 1, text, n, NULL);
}

static void on_msg(ipc_chan_t *ch, const proto_msg_t *m)
{
  if (m->type == PROTO_RESPONSE)
    on_response(m);
  else
    ipc_break(ch, "unknown message");
}

static void closed_cb(uv_handle_t *h)
{
  (void)h;
}

/* The listener is gone (or broke the format): answer every waiting
 * scrape, stop the HTTP server (its threads join once their scrapes are
 * answered) and let the loop end. */
static void ch_broken(ipc_chan_t *ch, const char *why)
{
  scrape_t *q;

  if (http.stopping)
    return;
  http.stopping = 1;
  log_debug(0, "metrics process: channel closed (%s): exiting", why);
  pthread_mutex_lock(&http.mu);
  http.closed = 1;
  q = http.queue;
  http.queue = NULL;
  pthread_mutex_unlock(&http.mu);
  while (q != NULL) {
    scrape_t *s = q;
    q = s->next;
    scrape_finish(s, 0, NULL, 0, "the listener is gone");
  }
  fail_pending("the listener is gone");
  if (http.mhd != NULL)
    MHD_stop_daemon(http.mhd);
  http.mhd = NULL;
  ipc_close(ch, NULL);
  uv_close((uv_handle_t *)&http.async, closed_cb);
  uv_close((uv_handle_t *)&http.timer, closed_cb);
}

/* --------------------------------------------------------------- HTTP */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
                               const char *type, char *body, size_t len,
                               enum MHD_ResponseMemoryMode mode)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
  enum MHD_Result ret;

  if (r == NULL) {
    if (mode == MHD_RESPMEM_MUST_FREE)
      free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status,
                                    const char *msg)
{
  return respond(c, status, "text/plain; charset=utf-8", (char *)msg,
                 strlen(msg), MHD_RESPMEM_MUST_COPY);
}

/* On an HTTP thread: hand a scrape to the loop and wait for it, at most
 * SCRAPE_TIMEOUT_MS (the loop gives up at the same time; this wait is the
 * backstop if the loop itself is stuck). */
static enum MHD_Result serve_metrics(struct MHD_Connection *c)
{
  scrape_t *s = calloc(1, sizeof(*s));
  pthread_condattr_t ca;
  struct timespec until;
  char msg[256];
  char *text = NULL;
  size_t len = 0;
  int ok;

  if (s == NULL)
    return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                        "hipd: metrics unavailable: out of memory\n");
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cond, &ca);
  pthread_condattr_destroy(&ca);
  s->refs = 2;
  pthread_mutex_lock(&http.mu);
  if (http.closed) {
    pthread_mutex_unlock(&http.mu);
    pthread_cond_destroy(&s->cond);
    free(s);
    return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                        "hipd: metrics unavailable: hipd is stopping\n");
  }
  s->next = http.queue;
  http.queue = s;
  pthread_mutex_unlock(&http.mu);
  uv_async_send(&http.async);

  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += SCRAPE_TIMEOUT_MS / 1000 + 1;
  pthread_mutex_lock(&http.mu);
  while (!s->done)
    if (pthread_cond_timedwait(&s->cond, &http.mu, &until) == ETIMEDOUT)
      break;
  ok = s->done && s->ok;
  if (ok) {
    text = s->text;
    len = s->len;
    s->text = NULL;
  } else {
    snprintf(msg, sizeof(msg), "hipd: metrics unavailable: %s\n",
             s->done ? s->why : "no answer in time");
  }
  scrape_unref_locked(s);
  pthread_mutex_unlock(&http.mu);
  if (!ok)
    return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
  return respond(c, MHD_HTTP_OK, CONTENT_TYPE, text, len,
                 MHD_RESPMEM_MUST_FREE);
}

/* libmicrohttpd accepted or closed a connection (its polling thread): a
 * slot for the header deadline, or none if the table is full (then only
 * the idle timeout applies). */
static void notify_cb(void *cls, struct MHD_Connection *c, void **socket_ctx,
                      enum MHD_ConnectionNotificationCode toe)
{
  const union MHD_ConnectionInfo *info;
  conn_slot_t *k = *socket_ctx;

  (void)cls;
  pthread_mutex_lock(&http.mu);
  if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    if (k != NULL)
      k->fd = -1;
    *socket_ctx = NULL;
  } else if ((info = MHD_get_connection_info(
                  c, MHD_CONNECTION_INFO_CONNECTION_FD)) != NULL) {
    for (size_t i = 0; i < MAX_CONNECTIONS; i++)
      if (http.conns[i].fd < 0) {
        k = &http.conns[i];
        *k = (conn_slot_t){.fd = info->connect_fd, .since_ms = util_now_ms()};
        *socket_ctx = k;
        break;
      }
  }
  pthread_mutex_unlock(&http.mu);
}

/* The slot of connection @p c, or NULL. */
static conn_slot_t *conn_slot(struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

  return info != NULL ? info->socket_context : NULL;
}

/* A request of @p c is answered (or given up): the deadline starts again
 * for its next one. */
static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
  conn_slot_t *k = conn_slot(c);

  (void)cls;
  (void)con_cls;
  (void)toe;
  if (k == NULL)
    return;
  pthread_mutex_lock(&http.mu);
  k->headers = 0;
  k->since_ms = util_now_ms();
  pthread_mutex_unlock(&http.mu);
}

static enum MHD_Result request_cb(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
  (void)cls;
  (void)version;
  (void)upload;
  if (*con_cls == NULL) {
    /* The headers: answer once a body (if any) has been read. */
    conn_slot_t *k = conn_slot(c);
    if (k != NULL) {
      pthread_mutex_lock(&http.mu);
      k->headers = 1;
      pthread_mutex_unlock(&http.mu);
    }
    *con_cls = &seen_mark;
    return MHD_YES;
  }
  if (*upload_size != 0) {
    *upload_size = 0; /* a body is read and ignored */
    return MHD_YES;
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                        "hipd: only GET and HEAD are served\n");
  if (strcmp(url, "/metrics") != 0)
    return respond_text(c, MHD_HTTP_NOT_FOUND,
                        "hipd: not found: the metrics are at /metrics\n");
  return serve_metrics(c);
}

/* libmicrohttpd's own messages, through hipd's log. */
static void mhd_log_cb(void *cls, const char *fmt, va_list ap)
{
  char buf[512];
  size_t n;

  (void)cls;
  vsnprintf(buf, sizeof(buf), fmt, ap);
  n = strlen(buf);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    buf[--n] = '\0';
  log_warn(0, "metrics http: %s", buf);
}

/* ------------------------------------------------------------ the process */

/* Become the --user account (as root), lose every privilege, and allow
 * only the system calls of the "metrics" profile. */
static int confine(daemon_t *d, hipd_err_t *err)
{
  sandbox_spec_t spec;
  int rc;

  sandbox_spec_init(&spec);
  if (geteuid() == 0) {
    if ((rc = sandbox_user_lookup(d->cfg.worker_user, &spec.uid, &spec.gid,
                                  err)) != 0)
      return rc;
    if (spec.uid == 0)
      return err_set(err, HIPD_EINVAL, "--user %s is root", d->cfg.worker_user);
    spec.change_ids = true;
  }
  /* Its descriptors: the channel, the listening socket, the loop's and
   * libmicrohttpd's, one per connection. */
  spec.rlim.nofile = 64 + 2 * MAX_CONNECTIONS;
  spec.landlock = true; /* no path at all */
#ifdef HIPD_ASAN
  /* As for the workers (main.c): LeakSanitizer's exit check needs ptrace,
   * which the profile and a non-dumpable process refuse. */
  log_info(0, "ASan build: the metrics process runs without its seccomp "
              "profile and stays dumpable, for the leak checker");
#else
  spec.no_dumpable = true;
  spec.profile = SANDBOX_PROFILE_METRICS;
#endif
  if ((rc = sandbox_enter(&spec, err)) != 0)
    return rc;
  if (err->msg[0] != '\0')
    log_warn(0, "metrics sandbox: not applied: %s", err->msg);
  return 0;
}

int metrics_http_main(daemon_t *d)
{
  int fd = METRICS_LISTEN_FD, accepting = 0, fl, rc;
  socklen_t alen = sizeof(accepting);
  hipd_err_t err = {0};
  msgpack_sbuffer sb;
  msgpack_packer pk;

  http.d = d;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &alen) != 0 ||
      !accepting) {
    log_error(0,
              "metrics process: descriptor %d is not a listening socket "
              "(hipd starts this process itself: --metrics-listen)",
              fd);
    return 1;
  }
  fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    log_error(0, "metrics process: descriptor %d: %s", fd, strerror(errno));
    return 1;
  }
  http.loop = uv_default_loop();
  if ((rc = ipc_open(http.loop, &http.ch, METRICS_CHANNEL_FD)) != 0) {
    log_error(0, "metrics process: no channel at descriptor %d: %s",
              METRICS_CHANNEL_FD, rc < 0 ? hipd_strerror(rc) : "?");
    return 1;
  }
  http.ch.no_handles = 1;
  for (size_t i = 0; i < MAX_CONNECTIONS; i++)
    http.conns[i].fd = -1;
  uv_async_init(http.loop, &http.async, async_cb);
  uv_timer_init(http.loop, &http.timer);
  if (confine(d, &err) != 0) {
    log_error(0, "metrics process not started: %s", err.msg);
    return 1;
  }
  if ((rc = ipc_start(&http.ch, on_msg, ch_broken)) != 0) {
    log_error(0, "metrics process: cannot read its channel: %s",
              uv_strerror(rc));
    return 1;
  }
  http.mhd = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
          MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
      0, NULL, NULL, request_cb, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log_cb,
      NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned)MAX_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)REQUEST_MEMORY, MHD_OPTION_THREAD_STACK_SIZE,
      (size_t)(256 * 1024), MHD_OPTION_NOTIFY_CONNECTION, notify_cb, NULL,
      MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL, MHD_OPTION_END);
  if (http.mhd == NULL) {
    log_error(0, "metrics process: libmicrohttpd did not start on the "
                 "socket of --metrics-listen (its reason is above)");
    return 1;
  }
  uv_timer_start(&http.timer, timer_cb, 1000, 1000);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  wire_pack_head(&pk, WIRE_METRICS_READY, 0);
  ipc_send(&http.ch, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  log_debug(0, "metrics process serving (pid %d, uid %u)", (int)getpid(),
            (unsigned)geteuid());

  uv_run(http.loop, UV_RUN_DEFAULT);
  uv_loop_close(http.loop);
  return 0;
}
