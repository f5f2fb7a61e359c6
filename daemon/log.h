/* SPDX-License-Identifier: MIT */
/* daemon/log.h: one line per event on stderr, with levels and session ids. */
#ifndef HIPD_LOG_H
#define HIPD_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum { HLOG_ERROR = 0, HLOG_WARN, HLOG_INFO, HLOG_DEBUG };

/* Find out once whether stderr is the journal ($JOURNAL_STREAM names it):
 * then each line starts with its sd-daemon priority ("<3>" error, "<4>"
 * warn, "<6>" info, "<7>" debug) instead of a time, which the journal
 * adds. Called by the first log_msg() otherwise; call it early (before a
 * sandbox) to be sure. Any thread. */
void log_init(void);
/* @return 1 if lines go to the journal with priority prefixes. */
int log_to_journal(void);

/* Set the threshold; messages above it are dropped. */
void log_set_level(int level);
int log_get_level(void);
/* Parse "error", "warn", "info" or "debug". @return the level or -1. */
int log_level_parse(const char *name);
/* The name of @p level ("info"). */
const char *log_level_name(int level);

/* Write one line: time (or the journal's priority), level, "[s<sid>]" when @p
 * sid is non-zero, text. Safe from any thread (one write(2) per line). */
void log_msg(int level, uint64_t sid, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What a line is about, where the caller knows it: the session (0: none),
 * the peer's uid and the device's global id (-1: not known). A layer that
 * knows them passes them down (session.h's sess_log); log.c looks
 * nothing up. */
typedef struct {
  uint64_t sid;
  long long uid;
  int device;
} log_ctx_t;

/* Lines about a tenant (log_ctx_t's uid known) are rate-limited per uid in
 * each process, so that no tenant can write the log at will: a burst of
 * five seconds' worth, then @p per_s lines a second (default 20; 0: no
 * limit); the lines over it are counted, and the uid's next line that
 * passes is preceded by one saying how many were suppressed. Any thread. */
void log_set_tenant_rate(unsigned per_s);

/* log_msg() with @p ctx: under the journal (stderr is the socket
 * $JOURNAL_STREAM names; built with libsystemd) the line is sent with
 * sd_journal_sendv() as structured fields: PRIORITY, SYSLOG_IDENTIFIER=hipd,
 * MESSAGE, and SESSION=, UID=, DEVICE= where known (log_journal_fields()).
 * Elsewhere, or if the journal does not take it, the same line as log_msg().
 * Any thread. */
void log_emit(int level, const log_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The most fields log_journal_fields() makes. */
#define LOG_JOURNAL_FIELDS 6

/* Fill @p iov (LOG_JOURNAL_FIELDS entries) with the journal fields of a
 * line of @p level about @p ctx, its text @p msg: "PRIORITY=3",
 * "SYSLOG_IDENTIFIER=hipd", "MESSAGE=[s12] msg", then "SESSION=12",
 * "UID=1001", "DEVICE=0" for those known. The short fields are written in
 * @p buf (@p buflen bytes, 128 are enough); MESSAGE points into @p line,
 * which holds "MESSAGE=" and the text (@p linelen bytes). @return the
 * number of fields. Pure: for tests (check_log). */
size_t log_journal_fields(int level, const log_ctx_t *ctx, const char *msg,
                          char *line, size_t linelen, char *buf, size_t buflen,
                          struct iovec *iov);

/* A line about tenant @p uid (and session @p sid, 0: none): rate-limited
 * per uid (above). */
#define log_tenant(level, sid_, uid_, ...)                                     \
  log_emit(                                                                    \
      (level),                                                                 \
      &(log_ctx_t){.sid = (sid_), .uid = (long long)(uid_), .device = -1},     \
      __VA_ARGS__)

#define log_error(sid, ...) log_msg(HLOG_ERROR, (sid), __VA_ARGS__)
#define log_warn(sid, ...) log_msg(HLOG_WARN, (sid), __VA_ARGS__)
#define log_info(sid, ...) log_msg(HLOG_INFO, (sid), __VA_ARGS__)
#define log_debug(sid, ...)                                                    \
  do {                                                                         \
    if (log_get_level() >= HLOG_DEBUG)                                         \
      log_msg(HLOG_DEBUG, (sid), __VA_ARGS__);                                 \
  } while (0)

#endif
