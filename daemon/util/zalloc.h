/* SPDX-License-Identifier: MIT */
/* daemon/util/zalloc.h: zeroed memory for the objects made and freed for
 * every request (ops, their argument arrays, pending calls).
 *
 * glibc's calloc() never takes a chunk from the thread's cache of freed
 * chunks (tcache): with calloc() each such object came from the arena,
 * and each free() then found the cache full and went to the arena too,
 * some 500 instructions an object on the loop (callgrind of a ring's
 * kernel launches, 2026-12-06). malloc() takes the cached chunk, and
 * memset() clears it. Use calloc() for anything else. (GCC and clang
 * only: the file uses their asm syntax, as the rest of hipd does.)
 */
#ifndef HIPD_UTIL_ZALLOC_H
#define HIPD_UTIL_ZALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* @p size zeroed bytes, or NULL. */
static inline void *util_zalloc(size_t size)
{
  void *p = malloc(size ? size : 1);

  /* The compiler would make malloc() and memset() one calloc() again:
   * the empty asm hides that p is malloc()'s. */
  __asm__("" : "+r"(p));
  if (p != NULL)
    memset(p, 0, size);
  return p;
}

/* @p n zeroed elements of @p size bytes, or NULL (out of memory, or
 * n * size overflows). */
static inline void *util_zalloc_array(size_t n, size_t size)
{
  if (size != 0 && n > SIZE_MAX / size)
    return NULL;
  return util_zalloc(n * size);
}

#endif
