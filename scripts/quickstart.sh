#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/quickstart.sh: from a fresh Debian 12 machine (as root) to a running
# hipd answering a client: install what is missing, bootstrap, configure in
# _build/, build, start hipd on a temporary socket, run examples/hello against
# it, stop hipd with SIGTERM and check that it exited 0.
#
# Usage: bash scripts/quickstart.sh      (JOBS=N to change make's -j)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh

JOBS=${JOBS:-$(nproc)}
BUILD=_build

hipd_step "dependencies"
# What building and running need; scripts/test.sh installs what the tests
# use besides (Slurm, an sshd, Prometheus...).
hipd_install_deps build

hipd_step "accounts"
hipd_create_accounts

hipd_configure "$BUILD"

hipd_step "make -j$JOBS"
make -C "$BUILD" -j"$JOBS" || hipd_die "the build failed"
[ -x "$BUILD/hipd" ] || hipd_die "$BUILD/hipd was not built"
[ -x "$BUILD/examples/hello" ] || hipd_die "$BUILD/examples/hello was not built"

# hipd runs on a socket of its own, so it neither needs nor disturbs a
# system-wide daemon on /run/hipd/hipd.sock.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hipd-quickstart.XXXXXX")
sock=$tmp/hipd.sock
log=$tmp/hipd.log
hipd_pid=

# On any failure, stop the daemon we started and point at its log.
cleanup()
{
  local rc=$?

  if [ -n "$hipd_pid" ] && kill -0 "$hipd_pid" 2>/dev/null; then
    kill -TERM "$hipd_pid" 2>/dev/null || true
    wait "$hipd_pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ]; then
    echo "quick start FAILED (exit $rc); hipd's log: $log" >&2
    if [ -s "$log" ]; then
      echo "---- last lines of $log ----" >&2
      tail -n 20 "$log" >&2
    fi
  fi
}
trap cleanup EXIT

hipd_step "start $BUILD/hipd on $sock (log: $log)"
"$BUILD/hipd" --socket "$sock" --log-level debug >"$log" 2>&1 &
hipd_pid=$!

# Wait up to 10 s for the socket, failing at once if hipd dies.
for _ in $(seq 100); do
  [ -S "$sock" ] && break
  kill -0 "$hipd_pid" 2>/dev/null || hipd_die "hipd exited during start-up"
  sleep 0.1
done
[ -S "$sock" ] || hipd_die "hipd did not create $sock within 10 s"
# hipd binds the socket file a moment before it listens on it.
sleep 0.2

hipd_step "$BUILD/examples/hello $sock"
"$BUILD/examples/hello" "$sock" || hipd_die "examples/hello failed"

hipd_step "stop hipd (SIGTERM)"
kill -TERM "$hipd_pid"
# hipd gives in-flight work up to 5 s (--shutdown-timeout), then exits.
for _ in $(seq 100); do
  kill -0 "$hipd_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$hipd_pid" 2>/dev/null; then
  hipd_die "hipd still runs 10 s after SIGTERM"
fi
rc=0
wait "$hipd_pid" || rc=$?
hipd_pid=
[ "$rc" -eq 0 ] || hipd_die "hipd exited with status $rc after SIGTERM"
[ ! -e "$sock" ] || hipd_die "hipd left its socket $sock behind"

echo
echo "quick start OK: hipd built in $BUILD/, served examples/hello and exited 0"
echo "hipd's log: $log"
