/* SPDX-License-Identifier: MIT */
/* daemon/log.h: one line per event on stderr, with levels and session ids. */
#ifndef HIPD_LOG_H
#define HIPD_LOG_H

#include <stdint.h>

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

#define log_error(sid, ...) log_msg(HLOG_ERROR, (sid), __VA_ARGS__)
#define log_warn(sid, ...) log_msg(HLOG_WARN, (sid), __VA_ARGS__)
#define log_info(sid, ...) log_msg(HLOG_INFO, (sid), __VA_ARGS__)
#define log_debug(sid, ...)                                                    \
  do {                                                                         \
    if (log_get_level() >= HLOG_DEBUG)                                         \
      log_msg(HLOG_DEBUG, (sid), __VA_ARGS__);                                 \
  } while (0)

#endif
