/* SPDX-License-Identifier: MIT */
/* daemon/config/conffile.c: reading hipd.conf with inih (conffile.h). */
#include "config.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conffile.h"
#include "hipd.h"

/* The reader inih calls for each line: fgets, counting lines (inih's
 * handler is not told the line) and catching a line longer than inih's
 * buffer, which inih would split into two entries. */
typedef struct {
  FILE *f;
  unsigned line;     /* of the last line read */
  unsigned too_long; /* the first line that did not fit, 0: none */
  int max;           /* the longest line inih takes */
  conf_file_t *out;
  hipd_err_t *err;
  int rc;
} reader_t;

static char *read_line_cb(char *str, int num, void *stream)
{
  reader_t *r = stream;
  size_t len;

  if (fgets(str, num, r->f) == NULL)
    return NULL;
  r->line++;
  len = strlen(str);
  r->max = num - 2; /* its buffer holds the newline and a NUL */
  if (len == (size_t)num - 1 && str[len - 1] != '\n' && !feof(r->f)) {
    int c;
    if (r->too_long == 0)
      r->too_long = r->line;
    /* The rest of the line is dropped: the error stops the start. */
    while ((c = fgetc(r->f)) != EOF && c != '\n')
      ;
  }
  return str;
}

static int entry_cb(void *user, const char *section, const char *name,
                    const char *value)
{
  reader_t *r = user;
  conf_entry_t *e;

  if (r->rc != 0)
    return 1;
  if (section[0] != '\0' && strcmp(section, CONF_SECTION) != 0) {
    r->rc = err_set(r->err, HIPD_EINVAL,
                    "%s:%u: \"%s\" is in section [%s]: entries go before "
                    "any section or in [" CONF_SECTION "]",
                    r->out->path, r->line, name, section);
    return 1;
  }
  e = realloc(r->out->e, (r->out->n + 1) * sizeof(*e));
  if (e == NULL) {
    r->rc = err_set(r->err, HIPD_ENOMEM, "%s: out of memory", r->out->path);
    return 1;
  }
  r->out->e = e;
  e = &r->out->e[r->out->n];
  e->name = strdup(name);
  e->value = strdup(value != NULL ? value : "");
  e->line = r->line;
  if (e->name == NULL || e->value == NULL) {
    free(e->name);
    free(e->value);
    r->rc = err_set(r->err, HIPD_ENOMEM, "%s: out of memory", r->out->path);
    return 1;
  }
  r->out->n++;
  return 1;
}

int conf_read(const char *path, int must_exist, conf_file_t *out,
              hipd_err_t *err)
{
  reader_t r = {.out = out, .err = err};
  int line;

  memset(out, 0, sizeof(*out));
  err_clear(err);
  if ((out->path = strdup(path)) == NULL)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  if ((r.f = fopen(path, "re")) == NULL) {
    if (errno == ENOENT && !must_exist)
      return 0;
    return err_set(err, errno == ENOENT ? HIPD_ENOENT : HIPD_EIO, "%s: %s",
                   path, strerror(errno));
  }
  line = ini_parse_stream(read_line_cb, &r, entry_cb, &r);
  if (r.rc == 0 && ferror(r.f))
    r.rc = err_set(err, HIPD_EIO, "%s: %s", path, strerror(errno));
  fclose(r.f);
  if (r.rc != 0)
    return r.rc;
  if (r.too_long != 0)
    return err_set(err, HIPD_EINVAL,
                   "%s:%u: line too long (inih reads lines of up to %d "
                   "characters)",
                   path, r.too_long, r.max);
  if (line > 0)
    return err_set(err, HIPD_EINVAL,
                   "%s:%d: not \"name = value\", a [section] or a comment",
                   path, line);
  if (line < 0)
    return err_set(err, HIPD_ENOMEM, "%s: out of memory", path);
  return 0;
}

void conf_free(conf_file_t *c)
{
  for (size_t i = 0; i < c->n; i++) {
    free(c->e[i].name);
    free(c->e[i].value);
  }
  free(c->e);
  free(c->path);
  memset(c, 0, sizeof(*c));
}

int conf_bool(const char *value)
{
  static const char *const yes[] = {"yes", "true", "1"};
  static const char *const no[] = {"no", "false", "0"};

  for (int i = 0; i < 3; i++) {
    if (strcasecmp(value, yes[i]) == 0)
      return 1;
    if (strcasecmp(value, no[i]) == 0)
      return 0;
  }
  return HIPD_EINVAL;
}
