/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_log.c: the daemon's log: every `session closed:
 * REASON` line against the table "Why a session is closed" of
 * proto/PROTOCOL.md, and sanitizer reports (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

/* ------------------------------------------------------ the log, the doc */

static char *read_file(const char *path, size_t *len)
{
  return ir_json_read_file(path, len);
}

/* The reasons of the table "Why a session is closed" of PROTOCOL.md. */

char reasons[32][96];

int nreasons;

int load_reasons(const char *path)
{
  size_t len = 0;
  char *text = read_file(path, &len);
  char *line, *save = NULL;
  int in_section = 0, in_table = 0;

  if (text == NULL) {
    fprintf(stderr, "protofuzz: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  for (line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (!in_section) {
      in_section = strstr(line, "**Why a session is closed.**") != NULL;
      continue;
    }
    if (line[0] != '|') {
      if (in_table)
        break;
      continue;
    }
    in_table = 1;
    char *end = strchr(line + 1, '|');
    char *b1 = strchr(line + 1, '`');
    if (end == NULL || b1 == NULL || b1 > end)
      continue; /* the header and the rule */
    char *b2 = strchr(b1 + 1, '`');
    if (b2 == NULL || b2 > end || nreasons == 32)
      continue;
    snprintf(reasons[nreasons++], sizeof(reasons[0]), "%.*s",
             (int)(b2 - b1 - 1), b1 + 1);
  }
  free(text);
  if (nreasons == 0) {
    fprintf(stderr,
            "protofuzz: no table of reasons under 'Why a session is "
            "closed' in %s\n",
            path);
    return -1;
  }
  return 0;
}

struct pf_closes closes[64];

int ncloses;

/* Check every close in the daemon's log. @return the number of problems. */

int check_log(const char *path, uint64_t *opened_out, uint64_t *closed_out)
{
  size_t len = 0;
  char *text = read_file(path, &len);
  char *line, *save = NULL;
  int bad = 0;
  uint64_t opened = 0, closed = 0;

  if (text == NULL) {
    fprintf(stderr, "protofuzz: cannot read the daemon's log %s\n", path);
    return 1;
  }
  for (line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (strstr(line, "runtime error:") || strstr(line, "AddressSanitizer") ||
        strstr(line, "LeakSanitizer") || strstr(line, "ThreadSanitizer")) {
      fprintf(stderr, "protofuzz: the daemon's log reports: %s\n", line);
      bad++;
    }
    if (strstr(line, "session opened:"))
      opened++;
    char *r = strstr(line, "session closed: ");
    if (r == NULL)
      continue;
    closed++;
    r += strlen("session closed: ");
    /* Strip the trailing " (N requests)". */
    char *tail = strrchr(r, '(');
    if (tail != NULL && tail > r && tail[-1] == ' ' &&
        strstr(tail, " requests)") != NULL)
      tail[-1] = '\0';
    int ok = 0;
    for (int i = 0; i < nreasons && !ok; i++)
      ok = strncmp(r, reasons[i], strlen(reasons[i])) == 0;
    if (!ok) {
      fprintf(stderr, "protofuzz: undocumented close reason: '%s'\n", r);
      bad++;
    }
    int j;
    for (j = 0; j < ncloses; j++)
      if (strcmp(closes[j].reason, r) == 0)
        break;
    if (j == ncloses && ncloses < 64)
      snprintf(closes[ncloses++].reason, sizeof(closes[0].reason), "%s", r);
    if (j < 64)
      closes[j].n++;
  }
  free(text);
  *opened_out = opened;
  *closed_out = closed;
  return bad;
}
