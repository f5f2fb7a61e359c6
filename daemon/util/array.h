/* SPDX-License-Identifier: MIT */
/* daemon/util/array.h: the one growable-array idiom.
 *
 *   if (ARRAY_GROW(v->items, v->n, v->cap, 8) != 0)
 *     return HIPD_ENOMEM;
 *   v->items[v->n++] = x;
 *
 * Header-only (a macro: the count and capacity may be of any unsigned
 * type); every layer and program may include it. */
#ifndef HIPD_UTIL_ARRAY_H
#define HIPD_UTIL_ARRAY_H

#include <stdint.h>
#include <stdlib.h>

#include "hipd.h"

/* Make room in the array @p arr (an lvalue of pointer type, @p cap
 * elements allocated) for the element at index @p n: when n >= cap, the
 * capacity doubles (from @p first when it is 0) and @p arr is realloc'd.
 * Evaluates to 0, or HIPD_ENOMEM (the capacity would overflow, or realloc
 * failed) with @p arr and @p cap unchanged. New elements are not
 * initialised. Evaluates @p arr and @p cap more than once. */
#define ARRAY_GROW(arr, n, cap, first)                                         \
  __extension__({                                                              \
    int grow_rc_ = 0;                                                          \
    if ((n) >= (cap)) {                                                        \
      __typeof__(cap) grow_cap_ = (cap) ? (cap)*2 : (first);                   \
      size_t grow_bytes_;                                                      \
      void *grow_p_ = NULL;                                                    \
      if (grow_cap_ > (cap) &&                                                 \
          !__builtin_mul_overflow((size_t)grow_cap_, sizeof(*(arr)),           \
                                  &grow_bytes_))                               \
        grow_p_ = realloc((arr), grow_bytes_);                                 \
      if (grow_p_ == NULL) {                                                   \
        grow_rc_ = HIPD_ENOMEM;                                                \
      } else {                                                                 \
        (arr) = grow_p_;                                                       \
        (cap) = grow_cap_;                                                     \
      }                                                                        \
    }                                                                          \
    grow_rc_;                                                                  \
  })

#endif
