/* SPDX-License-Identifier: MIT */
/* daemon/drivers/driver_output.h: what kernels print, kept for the
 * session that launched them.
 *
 * A kernel's printf never reaches hipd's log: the CPU runner writes its
 * standard output and error into a file of its own and returns what a
 * launch printed with the launch's answer; on a GPU the runtime's printf
 * buffer is flushed into a file of the worker's (hip_output.c). Either way
 * the bytes are appended to the launch's drv_output_t, which its session
 * owns and kernel.output reads (methods/kernel.c). Bounded: past its
 * capacity, bytes are counted as dropped, never kept.
 *
 * Thread-safe: appended from device threads, taken on the loop thread;
 * reference-counted (the session holds one, each launch in flight one).
 */
#ifndef HIPD_DRIVER_OUTPUT_H
#define HIPD_DRIVER_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct drv_output drv_output_t;

/* A new sink keeping at most @p cap bytes, with one reference; NULL when
 * out of memory. */
drv_output_t *drv_output_new(size_t cap);
void drv_output_ref(drv_output_t *o);
void drv_output_unref(drv_output_t *o);

/* Append @p n bytes (as many as fit; the rest is dropped), and count
 * @p dropped more that were lost before they got here. NULL @p o: all is
 * dropped. */
void drv_output_append(drv_output_t *o, const void *p, size_t n,
                       uint64_t dropped);

/* Move up to @p cap bytes, the oldest first, into @p dst: @return how many;
 * *@p dropped gets the bytes dropped since the last take (and is reset
 * when everything was taken). */
size_t drv_output_take(drv_output_t *o, void *dst, size_t cap,
                       uint64_t *dropped);

#endif
