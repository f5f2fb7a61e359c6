#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_handle_types.sh: the handle types of <hipd.h> are distinct.
# tests/handle_types.c is compiled with the flags an installed <hipd.h>
# gets (hipd.pc's Cflags, -I of the directory holding hipd.h and
# hipd_version.h, nothing else): as it is, it must compile without a
# warning (-Wall -Wextra -pedantic -Werror); with -DHANDLE_TYPES_WRONG,
# which passes a stream to hipd_mem_free(), it must fail to compile, with
# the error on the marked line (so that it fails for that reason, not for
# another). The same again as C++ where a C++ compiler is installed.
# Run by make check from the build directory.
src=${srcdir:-$(dirname "$0")/..}
cc=${HIPD_TEST_CC:-cc}
cxx=${HIPD_TEST_CXX:-c++}
file=$src/tests/handle_types.c
rc=0

inc=$(mktemp -d "${TMPDIR:-/tmp}/hipd-handle-types.XXXXXX") || exit 1
trap 'rm -rf "$inc"' EXIT
# The installed layout: <hipd.h> next to the hipd_version.h configure made.
cp "$src/client/hipd.h" "$inc/" || exit 1
if [ -f client/hipd_version.h ]; then
  cp client/hipd_version.h "$inc/" || exit 1
else
  cp "$src/client/hipd_version.h" "$inc/" || exit 1
fi
line=$(grep -n 'HANDLE_TYPES_WRONG_LINE' "$file" | cut -d: -f1)
[ -n "$line" ] || {
  echo "check_handle_types: no HANDLE_TYPES_WRONG_LINE in $file"
  exit 1
}

# check LANG COMPILER FLAGS...
check()
{
  lang=$1
  comp=$2
  shift 2
  if ! out=$($comp "$@" -I"$inc" -Wall -Wextra -pedantic -Werror \
    -fsyntax-only "$file" 2>&1); then
    echo "check_handle_types: $lang: the right types do not compile:"
    echo "$out"
    rc=1
  else
    echo "check_handle_types: $lang: the right types compile, warning-free"
  fi
  # No -Werror: a type mismatch must be an error, not a warning.
  if out=$($comp "$@" -I"$inc" -DHANDLE_TYPES_WRONG -fsyntax-only \
    "$file" 2>&1); then
    echo "check_handle_types: $lang: a stream passed as a buffer compiles:"
    echo "$out"
    rc=1
  elif ! printf '%s\n' "$out" | grep -q "handle_types\.c:$line:.*error"; then
    echo "check_handle_types: $lang: the wrong types fail, but not at line $line:"
    echo "$out"
    rc=1
  else
    echo "check_handle_types: $lang: a stream passed as a buffer is an error:"
    printf '%s\n' "$out" | grep "handle_types\.c:$line:.*error" | head -n 1
  fi
}

check C "$cc" -std=c99
if command -v "$cxx" >/dev/null 2>&1; then
  check C++ "$cxx" -x c++
else
  echo "check_handle_types: no C++ compiler ($cxx): C++ not checked"
fi
exit $rc
