/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_source.h: the CPU compile step's source
 * transform, used by cpu_compile.c (private to daemon/drivers/cpu/). */
#ifndef HIPD_CPU_SOURCE_H
#define HIPD_CPU_SOURCE_H

#include <stddef.h>

#include "util/strbuf.h"

/* The name of the source file in the compile directory, and in the log. */
#define SRC_NAME "kernel.hip"

/* printf into the compile log @p log (@p logsz bytes; nothing if NULL). A
 * compile log is not an error carrier: it is the text the client sees. */
void cpu_log_set(char *log, size_t logsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Is [s, s + n) a C identifier ([A-Za-z_][A-Za-z0-9_]*, not empty)? */
int cpu_ident_ok(const char *s, size_t n);
/* Copy @p src (@p len bytes) to @p out, rewriting dynamic shared memory
 * declarations and dropping GPU header includes; line numbers are kept.
 * @return 0, or HIPD_ECOMPILE with @p log naming the line of a declaration
 * it cannot rewrite. */
int cpu_source_transform(const char *src, size_t len, strbuf_t *out, char *log,
                         size_t logsz);
/* Append the exports: one signature function per kernel of @p names. */
void cpu_source_tail(strbuf_t *out, const char *const *names, size_t n);

#endif
