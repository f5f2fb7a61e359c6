/* SPDX-License-Identifier: MIT */
/* daemon/util/parse.c: option values (parse.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

int util_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
  unsigned long long v;
  unsigned shift = 0;
  char *end;

  if (s == NULL || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    v = strtoull(s, &end, 16);
  else
    v = strtoull(s, &end, 10);
  if (errno == ERANGE)
    return -ERANGE;
  if (errno != 0 || end == s)
    return -EINVAL;
  switch (*end) {
  case 'k':
  case 'K':
    shift = 10;
    break;
  case 'm':
  case 'M':
    shift = 20;
    break;
  case 'g':
  case 'G':
    shift = 30;
    break;
  default:
    break;
  }
  if (shift != 0) {
    end++;
    if (v > (UINT64_MAX >> shift))
      return -ERANGE;
    v <<= shift;
  }
  if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
    end += strlen(end);
  if (*end != '\0')
    return -EINVAL;
  if (v < min || v > max)
    return -ERANGE;
  *out = v;
  return 0;
}

int util_parse_id(const char *s, uint32_t *out)
{
  unsigned long v;
  char *end;

  if (s == NULL || *s < '0' || *s > '9')
    return 0;
  errno = 0;
  v = strtoul(s, &end, 10);
  if (*end != '\0' || errno != 0 || v >= (uint32_t)-1)
    return 0;
  *out = (uint32_t)v;
  return 1;
}
