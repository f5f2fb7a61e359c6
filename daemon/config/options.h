/* SPDX-License-Identifier: MIT */
/* daemon/config/options.h: hipd's options, stated once.
 *
 * One table (options.c) says, for each option: its name (the long option
 * and the hipd.conf(5) key), the daemon_config_t field it sets, its type
 * and bounds, its default, whether a reload (SIGHUP) applies it or only a
 * restart does, its argument's name and its --help text. Everything else
 * comes from that table: getopt_long's options, parsing and bound checks,
 * --help, the defaults, the file's keys, the copy a reload makes, the
 * list of restart-only changes it logs, and `hipd --list-options` (a
 * hidden, machine-readable dump that tests/check_man.sh compares with
 * hipd(8), hipd.conf(5) and the sample etc/hipd.conf).
 *
 * The table's exceptions are rows of their own kind, marked as such:
 * --device-allow repeats (OPTION_LIST), --help and --version print and
 * exit (OPTION_INFO), --config, --no-config and the internal --worker are
 * command-line only (OPTION_CMDLINE: not in a file, not reloaded), and
 * hipd takes no positional argument.
 *
 * Loop thread (or before the loop): option errors go to stderr, or to the
 * log while reloading (options_set_reloading()).
 */
#ifndef HIPD_CONFIG_OPTIONS_H
#define HIPD_CONFIG_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon.h"
#include "util/err.h"

/* How an option's argument is read, and what its field is. */
typedef enum {
  OPTION_STRING, /* char *: a copy of the argument */
  OPTION_SIZE,   /* a number with K/M/G (util_parse_size) in [lo, hi] */
  OPTION_MODE,   /* octal permission bits, 0 to 0777 */
  OPTION_FLAG,   /* no argument: the int becomes 1 (in a file: a boolean) */
  OPTION_ENUM,   /* one of names[]: the int gets its index */
  OPTION_LIST,   /* repeatable: appended to a char ** and its count */
  OPTION_CUSTOM, /* the row's parse function */
  OPTION_INFO,   /* --help, --version: print and exit; no field */
} option_type_t;

/* When a changed value takes effect. */
typedef enum {
  OPTION_RELOAD,  /* at a reload: copied into the running configuration */
  OPTION_RESTART, /* at start only: a change at a reload is logged */
  OPTION_CMDLINE, /* the command line only: not a hipd.conf key */
} option_when_t;

typedef struct option_spec {
  const char *name; /* long option and hipd.conf key */
  char letter;      /* short option, 0: none */
  option_type_t type;
  option_when_t when;
  size_t offset;       /* the field in daemon_config_t */
  size_t size;         /* its size in bytes */
  size_t count_offset; /* OPTION_LIST: the uint32_t count's field */
  uint64_t lo, hi;     /* OPTION_SIZE: the bounds */
  int64_t def;         /* the default of a number, a mode, an enum, a flag */
  const char *const *names; /* OPTION_ENUM: the values, NULL-ended */
  /* OPTION_CUSTOM: set the field from @p arg; OPTION_STRING: check @p arg
   * before it is kept. @return 0 or HIPD_EINVAL, with @p err's message
   * saying why, or "" for the generic "invalid value" error. */
  int (*parse)(daemon_config_t *cfg, const char *arg, hipd_err_t *err);
  const char *arg;  /* the argument's name in --help, NULL: none */
  const char *help; /* --help's text ('\n' between lines), NULL: hidden */
} option_spec_t;

/* The table, and its row for @p name (NULL: none). */
extern const option_spec_t options_table[];
extern const size_t options_count;
const option_spec_t *options_find(const char *name);

/* The defaults: what a run with no option and no file has. */
void options_defaults(daemon_config_t *cfg);
/* Free what @p cfg owns (every string and list of the table), and zero
 * it. */
void options_free(daemon_config_t *cfg);
/* A deep copy of @p src into @p dst (options_free() frees it). @return 0
 * or HIPD_ENOMEM (@p dst then freed). */
int options_copy(daemon_config_t *dst, const daemon_config_t *src);
/* Whether the field of @p o differs between @p a and @p b. */
int options_differ(const option_spec_t *o, const daemon_config_t *a,
                   const daemon_config_t *b);

/*
 * The whole configuration: the defaults, then the entries of hipd.conf
 * (unless @p cmdline_only, or a worker's command line, or --no-config),
 * then the command line @p argv, which overrides them. @p *args_out gets
 * the options a worker is started with (and told on a reload): the file's
 * entries as options, then @p argv's (argv[0] first, NULL-terminated, all
 * malloc'd; options_args_free()): a worker never reads the file, it gets
 * what its listener read. @return 0, or HIPD_EINVAL (HIPD_ENOMEM) with
 * the error printed (logged while reloading); @p out is then freed.
 */
int options_load(int argc, char **argv, int cmdline_only, daemon_config_t *out,
                 char ***args_out);
void options_args_free(char **args);

/* The configuration file of @p cfg: NULL for none. */
const char *options_file(const daemon_config_t *cfg);

/* Copy into @p run the fields of every OPTION_RELOAD option of @p nc
 * (strings and lists are swapped: @p nc keeps the old ones, for
 * options_free()). */
void options_apply(daemon_config_t *run, daemon_config_t *nc);
/* The names of the OPTION_RESTART options that differ between @p a and
 * @p b, as "socket, devices" in @p buf ("" if none). */
void options_restart_changes(const daemon_config_t *a, const daemon_config_t *b,
                             char *buf, size_t len);

/* While set, option errors are logged (stderr may be the journal), not
 * printed. */
void options_set_reloading(int on);
/* Print an option error: "hipd: [FILE:LINE: ]message" on stderr, or to
 * the log while reloading. */
void options_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --help's text, on @p f. */
void options_usage(FILE *f);

#endif
