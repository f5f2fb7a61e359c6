/* SPDX-License-Identifier: MIT */
/* tools/hipctl/hipctl.h: what hipctl's files share.
 *
 * hipctl is a client of libhipd like any other: main.c parses the global
 * options and calls one command; each command family has its file
 * (status.c: status and devices; sessions.c: sessions and kill; grants.c:
 * grant, revoke, grants; cache.c;
 * daemon.c: metrics and log-level; run.c: run and the argument syntax;
 * ir.c, which launches through run.c). What they share is below them:
 * common.c (connecting, exit statuses, messages) and out.c (tables, sizes,
 * durations and JSON). Calls point one way: main.c -> commands -> common.c
 * and out.c (tests/check_cycles.sh).
 *
 * Every command returns an exit status (HIPCTL_EXIT_*); hipctl(1) documents
 * them.
 */
#ifndef HIPD_TOOLS_HIPCTL_H
#define HIPD_TOOLS_HIPCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hipd.h"

/* The exit statuses (hipctl(1), EXIT STATUS). */
enum {
  HIPCTL_EXIT_OK = 0,
  HIPCTL_EXIT_ERROR = 1,   /* the daemon answered with an error */
  HIPCTL_EXIT_USAGE = 2,   /* bad command line, unreadable input file */
  HIPCTL_EXIT_CONNECT = 3, /* cannot connect, connection lost, no answer */
  HIPCTL_EXIT_PERM = 4,    /* the daemon refused: EPERM */
  HIPCTL_EXIT_CHECK = 5,   /* run --expect: an output differs */
};

/* The global options and the connection, for every command. */
typedef struct {
  const char *socket; /* --socket, or NULL: the library's default */
  int json;           /* --json */
  int timeout_ms;     /* --timeout (0: none) */
  const char *cmd;    /* the command's name, for messages ("kill") */
  hipd_conn_t *conn;  /* connected by hipctl_connect() */
} hipctl_t;

/* A command: argc/argv start at the command's name. @return an exit
 * status. */
typedef int (*hipctl_cmd_fn)(hipctl_t *h, int argc, char **argv);

int cmd_status(hipctl_t *h, int argc, char **argv);
int cmd_devices(hipctl_t *h, int argc, char **argv);
int cmd_sessions(hipctl_t *h, int argc, char **argv);
int cmd_kill(hipctl_t *h, int argc, char **argv);
int cmd_grant(hipctl_t *h, int argc, char **argv);
int cmd_revoke(hipctl_t *h, int argc, char **argv);
int cmd_grants(hipctl_t *h, int argc, char **argv);
/* grants.c: `status`'s grants table (nothing when there are none, or the
 * daemon has no grants). */
void grants_print_status(hipctl_t *h);
int cmd_cache(hipctl_t *h, int argc, char **argv);
int cmd_metrics(hipctl_t *h, int argc, char **argv);
int cmd_log_level(hipctl_t *h, int argc, char **argv);
int cmd_run(hipctl_t *h, int argc, char **argv);
int cmd_ir(hipctl_t *h, int argc, char **argv);

/* -------------------------------------------------------------- common.c */

/* Connect (once) with the global options. @return 0, or an exit status
 * with the reason printed. */
int hipctl_connect(hipctl_t *h);
/* Print "hipctl: CMD[ WHAT]: ENAME: message" for a failed library call
 * (the daemon's message, else the code's description). @return the exit
 * status that @p err means. */
int hipctl_fail(hipctl_t *h, const char *what, int err);
/* Print "hipctl: CMD: message" and a hint to run CMD --help.
 * @return HIPCTL_EXIT_USAGE. */
int hipctl_usage(hipctl_t *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Is @p arg -h or --help? Then print @p text to stdout. */
int hipctl_help(const char *arg, const char *text);

/* ---------------------------------------------------------------- out.c */

/* Sizes: "512 B", "4.0 KiB", "1.5 GiB". */
void out_size(char *buf, size_t cap, uint64_t bytes);
/* Durations: "0 s", "850 ms", "1.2 s", "3m10s", "2h05m", "3d04h". */
void out_duration_ms(char *buf, size_t cap, double ms);

/* A table: add cells row by row; out_table_print aligns the columns to
 * their widest cell (numbers right, text left) under the header. */
typedef struct out_table out_table_t;
out_table_t *out_table_new(const char *const *header, const char *align);
void out_table_cell(out_table_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void out_table_print(out_table_t *t, FILE *f);
void out_table_free(out_table_t *t);

/* JSON on stdout, one document: a writer that tracks commas. Records
 * (hipd_info_t) go in whole through hipd_info_format(). */
void js_obj_begin(void);
void js_obj_end(void);
void js_arr_begin(void);
void js_arr_end(void);
void js_key(const char *key); /* in an object, before each value */
/* A string value of @p n bytes (which may hold NULs, escaped). */
void js_bytes(const char *s, size_t n);
void js_str(const char *s);
void js_strn(const char *s, size_t n);
void js_int(int64_t v);
void js_uint(uint64_t v);
void js_double(double v);
void js_bool(int v);
void js_null(void);
void js_info(const hipd_info_t *info); /* null for NULL */
void js_end(void);                     /* the newline after the document */

/* Fields of a record, with a default when absent or of another type. */
uint64_t info_u64(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int64_t info_i64(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
double info_dbl(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "" when absent; lives as long as @p info. */
const char *info_s(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Elements of an array (or map) field; 0 when absent. */
int info_n(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A bool field: 0 when absent. */
int info_b(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* 1 if the field is there. */
int info_has(const hipd_info_t *info, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- run.c */

/* Read a whole file (malloc'd, NUL-terminated). @return NULL with the
 * reason printed. */
char *hipctl_read_file(hipctl_t *h, const char *path, size_t *len);

/* The options and arguments of a launch (`run`, `ir --run`): parsed from
 * argv by run_parse(), then run by run_launch() with a loaded kernel. */
typedef struct run_spec run_spec_t;
/* Parse the launch options (--device, --grid, --block, --shared, --print,
 * --expect, --lang, --options, --kernel?) and ARG... from argv[0, argc).
 * Options a caller handles itself are not allowed here. @return the spec
 * or NULL with a usage message printed (*@p status set). */
run_spec_t *run_parse(hipctl_t *h, int argc, char **argv, int *status);
void run_spec_free(run_spec_t *s);
int run_device(const run_spec_t *s);
/* Compiler options, NULL-ended (or NULL). */
const char *const *run_options(const run_spec_t *s);
/* Allocate and fill the buffers, launch @p kernel and wait, print or
 * check the outputs (JSON members "launch" and "outputs" when --json,
 * inside an object the caller has begun). @return an exit status. */
int run_launch(hipctl_t *h, run_spec_t *s, hipd_kernel_t kernel);
/* Match the user's arguments to a generated kernel's parameter list
 * (`arguments` of kernel.compile_ir's @p info): one ARG per IR param, the
 * vec lengths added. @return 0 or an exit status (printed). */
int run_expand_ir(hipctl_t *h, run_spec_t *s, const hipd_info_t *info);
const char *run_lang(const run_spec_t *s);
/* Check @p lang against the device's supported_source_langs. @return 0
 * or an exit status, printed. */
int run_check_lang(hipctl_t *h, int dev, const char *lang);

#endif
