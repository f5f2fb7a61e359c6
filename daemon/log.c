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

static int threshold = HLOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* sd-daemon(3) priorities of the levels: LOG_ERR, LOG_WARNING, LOG_INFO,
 * LOG_DEBUG. */
static const char *const level_prefixes[] = {"<3>", "<4>", "<6>", "<7>"};
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static int journal; /* stderr is the journal's stream */

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

void log_msg(int level, uint64_t sid, const char *fmt, ...)
{
  char line[2048];
  struct timespec ts;
  struct tm tm;
  va_list ap;
  int n;

  if (level > threshold)
    return;
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
