/* SPDX-License-Identifier: MIT */
/* daemon/log.c: stderr logging. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util/clock.h"
#include "util/ratelimit.h"

#ifdef HAVE_SYSTEMD
/* No CODE_FILE/CODE_LINE/CODE_FUNC: they would all name this file. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>
#endif

static int threshold = HLOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* sd-daemon(3) priorities of the levels: LOG_ERR, LOG_WARNING, LOG_INFO,
 * LOG_DEBUG. */
static const char *const level_prefixes[] = {"<3>", "<4>", "<6>", "<7>"};
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static int journal;        /* stderr is the journal's stream */
static int journal_native; /* ...a socket: send structured fields */

/* systemd.exec(5): $JOURNAL_STREAM is "DEVICE:INODE" of the stream it
 * connected stderr to; stderr is still the journal if it is that file
 * (not redirected since). Workers inherit both, so they prefix too. */
static void journal_detect(void)
{
  const char *js = getenv("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;
  char tail;

  if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
    return;
  if (fstat(STDERR_FILENO, &st) != 0)
    return;
  journal = (unsigned long long)st.st_dev == dev &&
            (unsigned long long)st.st_ino == ino;
  /* The journal's stream is a socket: a file that a test names in
   * $JOURNAL_STREAM gets the prefixed lines, never the real journal. */
  journal_native = journal && S_ISSOCK(st.st_mode);
}

void log_init(void)
{
  pthread_once(&journal_once, journal_detect);
}

int log_to_journal(void)
{
  log_init();
  return journal;
}

void log_set_level(int level)
{
  threshold = level;
}

int log_get_level(void)
{
  return threshold;
}

const char *log_level_name(int level)
{
  return level >= 0 && level < 4 ? level_names[level] : "?";
}

int log_level_parse(const char *name)
{
  for (int i = 0; i < 4; i++)
    if (strcmp(name, level_names[i]) == 0)
      return i;
  if (strcmp(name, "warning") == 0)
    return HLOG_WARN;
  return -1;
}

size_t log_journal_fields(int level, const log_ctx_t *ctx, const char *msg,
                          char *line, size_t linelen, char *buf, size_t buflen,
                          struct iovec *iov)
{
  static const char *const prio[] = {"3", "4", "6", "7"};
  size_t n = 0, used = 0, len;
  int w;

  if (level < 0 || level > HLOG_DEBUG)
    level = HLOG_ERROR;
#define FIELD(...)                                                             \
  do {                                                                         \
    w = snprintf(buf + used, buflen - used, __VA_ARGS__);                      \
    if (w > 0 && (size_t)w < buflen - used) {                                  \
      iov[n].iov_base = buf + used;                                            \
      iov[n++].iov_len = (size_t)w;                                            \
      used += (size_t)w + 1;                                                   \
    }                                                                          \
  } while (0)
  FIELD("PRIORITY=%s", prio[level]);
  FIELD("SYSLOG_IDENTIFIER=hipd");
  if (ctx->sid != 0)
    w = snprintf(line, linelen, "MESSAGE=[s%llu] %s",
                 (unsigned long long)ctx->sid, msg);
  else
    w = snprintf(line, linelen, "MESSAGE=%s", msg);
  len = w < 0 ? 0 : (size_t)w >= linelen ? linelen - 1 : (size_t)w;
  iov[n].iov_base = line;
  iov[n++].iov_len = len;
  if (ctx->sid != 0)
    FIELD("SESSION=%llu", (unsigned long long)ctx->sid);
  if (ctx->uid >= 0)
    FIELD("UID=%lld", ctx->uid);
  if (ctx->device >= 0)
    FIELD("DEVICE=%d", ctx->device);
#undef FIELD
  return n;
}

/* The line as written to stderr: time (or the journal's priority prefix
 * when no structured field could be sent), pid, level, session, text. */
static void write_line(int level, uint64_t sid, const char *text)
{
  char line[2048];
  struct timespec ts;
  struct tm tm;
  int n;

  if (log_to_journal()) {
    /* The journal stamps each line itself; the prefix is its priority. */
    n = snprintf(line, sizeof(line), "%shipd[%d] %-5s ", level_prefixes[level],
                 (int)getpid(), level_names[level]);
  } else {
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ hipd[%d] %-5s ",
                  ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
  }
  if (sid != 0)
    n += snprintf(line + n, sizeof(line) - (size_t)n, "[s%llu] ",
                  (unsigned long long)sid);
  n += snprintf(line + n, sizeof(line) - (size_t)n, "%s", text);
  if (n > (int)sizeof(line) - 2)
    n = (int)sizeof(line) - 2;
  line[n++] = '\n';
  (void)!write(STDERR_FILENO, line, (size_t)n);
}

static void log_vemit(int level, const log_ctx_t *ctx, const char *fmt,
                      va_list ap)
{
  char text[2048];
  int n;

  n = vsnprintf(text, sizeof(text), fmt, ap);
  if (n < 0)
    n = 0;
  if (n > (int)sizeof(text) - 1)
    n = (int)sizeof(text) - 1;
  /* Keep each event on one line even if a message carries newlines. */
  for (int i = 0; i < n; i++)
    if (text[i] == '\n' || text[i] == '\r')
      text[i] = ' ';
#ifdef HAVE_SYSTEMD
  if (log_to_journal() && journal_native) {
    struct iovec iov[LOG_JOURNAL_FIELDS];
    char line[2048 + 32], buf[128];
    size_t k = log_journal_fields(level, ctx, text, line, sizeof(line), buf,
                                  sizeof(buf), iov);
    /* A process whose sandbox refuses the journal's socket (a compile
     * helper) writes its line instead. */
    if (sd_journal_sendv(iov, (int)k) >= 0)
      return;
  }
#endif
  write_line(level, ctx->sid, text);
}

/* ------------------------------------------------- tenants' rate limit */

#define BURST_S 5 /* the burst: this many seconds' worth */

static unsigned tenant_rate = 20; /* log_set_tenant_rate() */

void log_set_tenant_rate(unsigned per_s)
{
  __atomic_store_n(&tenant_rate, per_s, __ATOMIC_RELAXED);
}

/* A token bucket per uid. */
static struct {
  pthread_mutex_t mu;
  ratelimit_t rl;
} tenants = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* May a line about @p uid be written now? @return 1 with the lines
 * suppressed before it in *@p suppressed, or 0 (counted). */
static int tenant_may_log(long long uid, uint64_t *suppressed)
{
  unsigned rate = __atomic_load_n(&tenant_rate, __ATOMIC_RELAXED);
  int ok;

  *suppressed = 0;
  if (rate == 0)
    return 1;
  pthread_mutex_lock(&tenants.mu);
  ok = ratelimit_take(&tenants.rl, uid, util_now_ns(), rate,
                      (double)rate * BURST_S, suppressed);
  pthread_mutex_unlock(&tenants.mu);
  return ok;
}

static void log_vemit_ctx(int level, const log_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void log_emit(int level, const log_ctx_t *ctx, const char *fmt, ...)
{
  uint64_t suppressed = 0;
  va_list ap;

  if (level > threshold)
    return;
  if (ctx->uid >= 0) {
    if (!tenant_may_log(ctx->uid, &suppressed))
      return;
    if (suppressed > 0)
      log_vemit_ctx(HLOG_WARN, &(log_ctx_t){.uid = ctx->uid, .device = -1},
                    "uid %lld: %llu log lines about it suppressed (more "
                    "than %u a second, --log-tenant-rate)",
                    ctx->uid, (unsigned long long)suppressed,
                    __atomic_load_n(&tenant_rate, __ATOMIC_RELAXED));
  }
  va_start(ap, fmt);
  log_vemit(level, ctx, fmt, ap);
  va_end(ap);
}

static void log_vemit_ctx(int level, const log_ctx_t *ctx, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  log_vemit(level, ctx, fmt, ap);
  va_end(ap);
}

void log_msg(int level, uint64_t sid, const char *fmt, ...)
{
  log_ctx_t ctx = {.sid = sid, .uid = -1, .device = -1};
  va_list ap;

  if (level > threshold)
    return;
  va_start(ap, fmt);
  log_vemit(level, &ctx, fmt, ap);
  va_end(ap);
}
