#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_examples.sh: the example programs (examples/) run against a
# real daemon and exit 0: hello, vecadd, and the tutorials streams, shm,
# codegen and profile. One hipd, the one built here ($HIPD_BIN), on a
# socket and a kernel cache of its own, with the devices of
# $HIPD_EXAMPLES_DEVICES (default: cpu, the device every machine has; "all"
# for every device hipd finds). Each example's output is printed; a failure
# prints hipd's log too. Run by make check from the build directory.
hipd=${HIPD_BIN:-./hipd}
devices=${HIPD_EXAMPLES_DEVICES:-cpu}
examples=${HIPD_EXAMPLES:-"hello vecadd streams shm codegen profile"}
rc=0

dir=$(mktemp -d "${HIPD_TEST_TMP:-${TMPDIR:-/tmp}}/examples.XXXXXX") || exit 1
# As root hipd's workers run as the account hipd: they must reach the
# socket's directory and the cache.
chmod 755 "$dir"
pid=
cleanup()
{
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid"
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

set -- --socket "$dir/hipd.sock" --cache-dir "$dir/cache"
[ "$devices" = all ] || set -- "$@" --devices "$devices"
"$hipd" "$@" >"$dir/hipd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ -S "$dir/hipd.sock" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -S "$dir/hipd.sock" ]; then
  echo "check_examples: hipd did not start; its log:"
  cat "$dir/hipd.log"
  exit 1
fi

for ex in $examples; do
  echo "---- examples/$ex"
  if ! "./examples/$ex" "$dir/hipd.sock"; then
    echo "check_examples: examples/$ex FAILED"
    rc=1
  fi
done
if [ $rc -ne 0 ]; then
  echo "---- hipd's log"
  cat "$dir/hipd.log"
fi
exit $rc
