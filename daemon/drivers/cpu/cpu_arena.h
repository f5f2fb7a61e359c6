/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_arena.h: where the CPU device's buffers live.
 *
 * One address range reserved PROT_NONE (the arena) backed by one memfd of
 * the same extent: a buffer at file offset O is mapped at base + O, shared
 * and writable, and everything in the range that no buffer maps stays
 * PROT_NONE. The file is sparse: it holds pages only where buffers are, so
 * the whole device needs one descriptor (and the kernel runner one, for the
 * same file) however many buffers there are. It is sized to the whole
 * arena at creation and sealed (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL),
 * so that no process holding it, a kernel in the runner included, can cut
 * it under another's mappings.
 *
 * Layout: every buffer's mapping (whole pages) is followed by
 * CPU_ARENA_GUARD bytes that nothing maps, and the arena starts with such a
 * gap, so two mappings are always that far apart; the buffer is placed at
 * the END of its mapping (its address rounded down to CPU_ARENA_ALIGN), so
 * that an access past its end (by up to CPU_ARENA_GUARD bytes, and past
 * the CPU_ARENA_ALIGN - 1 bytes of slack at most) faults instead of landing
 * in another buffer. The slack before the buffer, in its own first page, is
 * the buffer's alone.
 *
 * Allocation is first fit over a sorted table of extents (used and free,
 * adjacent free ones merged), O(number of extents) per call. Fragmentation
 * costs address space only: a freed extent's pages are given back to the
 * system at once (hole punched in the file) and read as zeros when reused,
 * so no tenant ever sees another buffer's old bytes. The arena refuses an
 * allocation when no free extent is large enough (HIPD_ENOMEM), even if the
 * free space in total would be.
 *
 * Thread safety: none; the caller serializes (the CPU driver's lock).
 * Errors: 0 or a negative HIPD_E* code, with @p err naming the problem.
 */
#ifndef HIPD_DRIVERS_CPU_ARENA_H
#define HIPD_DRIVERS_CPU_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Unmapped bytes after each buffer's mapping (rounded up to pages). */
#define CPU_ARENA_GUARD ((size_t)64 << 10)
/* Alignment of a buffer's address (the HIP/CUDA allocation guarantee). */
#define CPU_ARENA_ALIGN ((size_t)256)

typedef struct cpu_arena cpu_arena_t;

/* One buffer of the arena. */
typedef struct {
  void *ptr;       /* its address: what kernels and copies use */
  size_t size;     /* bytes asked for */
  uint64_t offset; /* of its mapping, in the file and from the base */
  size_t map_size; /* bytes mapped (whole pages, from base + offset) */
} cpu_arena_buf_t;

/**
 * Reserve an arena of @p span bytes (rounded up to pages) and create its
 * file. The range is chosen away from where the system places mappings by
 * default, so that a kernel runner started later can reserve the same
 * range in its own address space (cpu_runner_cfg_t.reserve_addr).
 * @return 0, HIPD_ENOMEM (no address range or no memfd).
 */
int cpu_arena_create(size_t span, cpu_arena_t **out, hipd_err_t *err);

/** Unmap everything, close the file, free @p a (NULL: no-op). Buffers
 *  still allocated are gone with it. */
void cpu_arena_destroy(cpu_arena_t *a);

/**
 * A buffer of @p size bytes, its pages committed now (running out of
 * memory is an allocation error, not a later crash) and zero.
 * @return 0, HIPD_EINVAL (0 bytes), HIPD_ENOMEM (no room in the arena, or
 *         the pages cannot be committed).
 */
int cpu_arena_alloc(cpu_arena_t *a, size_t size, cpu_arena_buf_t *out,
                    hipd_err_t *err);

/** The buffer whose address is @p ptr. @return 0 or HIPD_ENOENT. */
int cpu_arena_find(const cpu_arena_t *a, const void *ptr, cpu_arena_buf_t *out);

/** Free buffer @p ptr: its pages are released (they read as zeros when the
 *  range is reused) and its range is PROT_NONE again. @return 0 or
 *  HIPD_ENOENT (not a buffer of @p a). */
int cpu_arena_free(cpu_arena_t *a, void *ptr);

/** Call @p fn for every buffer, in address order. */
void cpu_arena_foreach(const cpu_arena_t *a,
                       void (*fn)(void *arg, const cpu_arena_buf_t *b),
                       void *arg);

/** The arena's file (owned by @p a), range and number of buffers. */
int cpu_arena_fd(const cpu_arena_t *a);
void *cpu_arena_base(const cpu_arena_t *a);
size_t cpu_arena_span(const cpu_arena_t *a);
size_t cpu_arena_count(const cpu_arena_t *a);

#endif
