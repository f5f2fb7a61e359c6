/* SPDX-License-Identifier: MIT */
/* daemon/log.c: stderr logging. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int threshold = HLOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(int level)
{
  threshold = level;
}

int log_get_level(void)
{
  return threshold;
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

void log_msg(int level, uint64_t sid, const char *fmt, ...)
{
  char line[2048];
  struct timespec ts;
  struct tm tm;
  va_list ap;
  int n;

  if (level > threshold)
    return;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
  n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ hipd[%d] %-5s ",
                ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
  if (sid != 0)
    n += snprintf(line + n, sizeof(line) - (size_t)n, "[s%llu] ",
                  (unsigned long long)sid);
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof(line) - 2)
    n = (int)sizeof(line) - 2;
  /* Keep each event on one line even if a message carries newlines. */
  for (int i = 0; i < n; i++)
    if (line[i] == '\n' || line[i] == '\r')
      line[i] = ' ';
  line[n++] = '\n';
  (void)!write(STDERR_FILENO, line, (size_t)n);
}
