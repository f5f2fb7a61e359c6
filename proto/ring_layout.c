/* SPDX-License-Identifier: MIT */
/* proto/ring_layout.c: the methods a ring takes. See ring_layout.h. */
#include "config.h"

#include <string.h>

#include "ring_layout.h"

#define RING_NAME(n) n,

int proto_ring_method(const char *method)
{
  static const char *const names[] = {PROTO_RING_METHODS(RING_NAME)};

  if (method == NULL)
    return 0;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(names[i], method) == 0)
      return 1;
  return 0;
}
