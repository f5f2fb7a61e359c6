#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/check_layers.sh: no #include in daemon/ points up a layer.
#
# Each file of daemon/ belongs to a layer (docs/ARCHITECTURE.md); a file
# may include headers of its own layer or of layers below it, never above.
# A file that no rule below places fails the check, so a new file is placed
# on purpose. Run by make check (srcdir from $srcdir, else the script's
# parent folder).
set -uo pipefail

top=${srcdir:-$(dirname "$0")/..}
cd "$top" || exit 1

# The layer of daemon/PATH, top (0) to bottom; "" if none.
layer_of()
{
  case "$1" in
  main.c | config/*) echo 0 ;;
  server.c | server.h | privsep/* | metrics/*) echo 1 ;;
  transport.c | transport.h | transport_ring.c | transport_ring.h) echo 2 ;;
  dispatch.c | dispatch.h) echo 3 ;;
  methods/*) echo 4 ;;
  admin/*) echo 5 ;;
  call.c | call.h) echo 6 ;;
  session.c | session.h | resources.c | resources.h | profile.c | profile.h | \
    tenants.c | tenants.h | policy.c | policy.h | grants.c | grants.h | \
    stats.c | stats.h | \
    ring.c | ring.h) echo 7 ;;
  objects/*) echo 8 ;;
  kernels/* | compile/*) echo 9 ;;
  device.c | device.h | shm.c | shm.h) echo 10 ;;
  executor.c | executor.h | spin.c | spin.h | loop_turn.c | loop_turn.h) echo 11 ;;
  drivers/*) echo 12 ;;
  codegen/*) echo 13 ;;
  log.c | log.h | notify.c | notify.h | handles.c | handles.h | bufpool.c | \
    bufpool.h | sanitize.h | daemon.h | util/* | sandbox/*) echo 14 ;;
  *) echo "" ;;
  esac
}
# The layers' names in rank order: the rows of docs/ARCHITECTURE.md's
# layer table, down to "utilities", must name the same, in this order.
names=("start-up and options" listener transport dispatch methods admin calls
  "sessions and resources" objects "kernels and cache" devices executors
  drivers codegen utilities)

fail=0
doc=docs/ARCHITECTURE.md
mapfile -t rows < <(sed -n '/^| Layer |/,/^$/p' "$doc" | sed -n '3,$p' |
  sed -n 's/^| \([^|]*[^ |]\) *|.*/\1/p' | sed '/^utilities$/q')
if [ "${rows[*]}" != "${names[*]}" ]; then
  echo "$doc: the layer table's rows (${rows[*]}) are not this script's ranks (${names[*]})"
  fail=1
fi

checked=0
while IFS= read -r f; do
  rel=${f#daemon/}
  from=$(layer_of "$rel")
  if [ -z "$from" ]; then
    echo "daemon/$rel: in no layer (place it in tests/check_layers.sh and docs/ARCHITECTURE.md)"
    fail=1
    continue
  fi
  dir=$(dirname "$rel")
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    # Resolve as the compiler does: the file's own folder, then -I daemon,
    # proto and client (which are below every layer of the daemon).
    if [ -f "daemon/$dir/$inc" ]; then
      target=$(realpath -m --relative-to=daemon "daemon/$dir/$inc")
    elif [ -f "daemon/$inc" ]; then
      target=$inc
    elif [ -f "proto/$inc" ] || [ -f "client/$inc" ] || [ "$inc" = config.h ]; then
      continue
    else
      echo "daemon/$rel: includes \"$inc\", which is not in the tree"
      fail=1
      continue
    fi
    to=$(layer_of "$target")
    checked=$((checked + 1))
    if [ -z "$to" ]; then
      echo "daemon/$rel: includes daemon/$target, which is in no layer"
      fail=1
    elif [ "$to" -lt "$from" ]; then
      echo "daemon/$rel (${names[$from]}) includes daemon/$target (${names[$to]}): up a layer"
      fail=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find daemon -name '*.[ch]' | sort)

if [ "$fail" -ne 0 ]; then
  echo "check_layers: FAIL"
  exit 1
fi
echo "check_layers: $checked includes in daemon/, none points up a layer"
