/* SPDX-License-Identifier: MIT */
/* daemon/config/conffile.h: reading hipd.conf (hipd.conf(5)), with inih.
 *
 * The file is INI: "name = value" lines, '#' or ';' comments on lines of
 * their own (and ';' after a space ending a value), entries outside any
 * section or in the section [hipd]; any other section is an error, so
 * that a typo in a section name is not silently ignored. What a name
 * means is not known here: options.c turns each entry into the
 * command-line option of the same name. Every entry keeps its line, for
 * messages
 * ("/etc/hipd/hipd.conf:12: unknown option \"max-sesions\"").
 *
 * A utility: no libuv, no daemon state. Any thread, one file at a time
 * per conf_file_t.
 */
#ifndef HIPD_CONFFILE_H
#define HIPD_CONFFILE_H

#include <stddef.h>

#include "util/err.h"

/* The section entries may be in, besides none. */
#define CONF_SECTION "hipd"

typedef struct {
  char *name;    /* the key, as written (inih trims the spaces) */
  char *value;   /* its value, "" for "name =" */
  unsigned line; /* where it is, from 1 */
} conf_entry_t;

typedef struct {
  char *path;      /* the file read (a copy) */
  conf_entry_t *e; /* in file order; a name may come more than once */
  size_t n;
} conf_file_t;

/* Read @p path into @p out (which the caller frees with conf_free(), also
 * after an error). When the file does not exist and @p must_exist is 0,
 * that is an empty file. @return 0; HIPD_ENOENT (missing, and
 * @p must_exist); HIPD_EIO (cannot be read: "PATH: Permission denied");
 * HIPD_EINVAL for a syntax error, a line longer than inih takes, or a
 * section other than [hipd], with @p err naming "PATH:LINE: what". */
int conf_read(const char *path, int must_exist, conf_file_t *out,
              hipd_err_t *err);
void conf_free(conf_file_t *c);

/* A boolean value: yes, true, 1 (1) or no, false, 0 (0), in any case;
 * @return HIPD_EINVAL for anything else. */
int conf_bool(const char *value);

#endif
