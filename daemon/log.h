/* SPDX-License-Identifier: MIT */
/* daemon/log.h: one line per event on stderr, with levels and session ids. */
#ifndef HIPD_LOG_H
#define HIPD_LOG_H

#include <stdint.h>

enum { HLOG_ERROR = 0, HLOG_WARN, HLOG_INFO, HLOG_DEBUG };

/* Set the threshold; messages above it are dropped. */
void log_set_level(int level);
int log_get_level(void);
/* Parse "error", "warn", "info" or "debug". @return the level or -1. */
int log_level_parse(const char *name);

/* Write one line: time, level, "[s<sid>]" when @p sid is non-zero, text.
 * Safe from any thread (one write(2) per line). */
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
