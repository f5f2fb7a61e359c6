/* SPDX-License-Identifier: MIT */
/* daemon/bufpool.h: a small cache of large host buffers.
 *
 * Transfers through the socket need large host buffers: a request's input
 * buffer that a write takes over, the bytes of a read's reply. Fresh
 * memory costs a page fault per page on first touch, which at hundreds of
 * MiB per transfer costs more than the copy itself; the pool hands freed
 * blocks to the next transfer instead. Blocks under BUFPOOL_MIN bytes are
 * plain malloc/free. Thread-safe: blocks are freed on the loop and on
 * driver threads. Their content is stale: users overwrite what they use.
 */
#ifndef HIPD_BUFPOOL_H
#define HIPD_BUFPOOL_H

#include <stddef.h>

#define BUFPOOL_MIN ((size_t)1 << 20)

/* A block of at least @p n bytes (malloc'd, or from the pool), or NULL. */
void *bufpool_get(size_t n);
/* A pooled block of at least @p n bytes, or NULL if none is cached. */
void *bufpool_take(size_t n);
/* Give back a block from bufpool_get() or malloc() (NULL is fine); kept
 * for reuse if large and the pool has room, else freed. */
void bufpool_put(void *p);
/* Whether a block has been unused for @p idle_ms: bufpool_trim(@p idle_ms)
 * would free something. Cheap: no lock while the pool is empty. */
int bufpool_trim_due(unsigned idle_ms);
/* Free the blocks unused for @p idle_ms (the housekeeping timer). */
void bufpool_trim(unsigned idle_ms);

#endif
