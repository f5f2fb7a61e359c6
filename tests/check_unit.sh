#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_unit.sh: the shipped systemd unit parses cleanly and is
# hardened: `systemd-analyze verify` prints no warning about it, and
# `systemd-analyze security --offline=true` scores its exposure below 5.9
# (the score of the unit before issue 13; lower is better). Skipped (exit
# 77) when systemd-analyze is not installed. Run by make check from the
# build directory, where systemd/hipd.service is generated.
max=5.9
unit=systemd/hipd.service
src=${srcdir:-$(dirname "$0")/..}

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "check_unit: SKIP: systemd-analyze is not installed (Debian: systemd)"
  exit 77
fi
if [ ! -f "$unit" ]; then
  echo "check_unit: $unit was not generated (run make first)"
  exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_unit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# verify: the unit next to its socket unit, run the hipd built here (verify
# checks that the command exists). Any line it prints is a warning.
sed "s|^ExecStart=[^ ]*/hipd |ExecStart=$(pwd)/hipd |" "$unit" >"$tmp/hipd.service"
cp "$src/systemd/hipd.socket" "$tmp/hipd.socket"
systemd-analyze verify --man=no "$tmp/hipd.service" "$tmp/hipd.socket" \
  >"$tmp/verify.txt" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$tmp/verify.txt" ]; then
  echo "check_unit: systemd-analyze verify (exit $rc) complains about the unit:"
  cat "$tmp/verify.txt"
  exit 1
fi

# security: the overall exposure, from the line
#   → Overall exposure level for hipd.service: 2.0 OK 🙂
if ! systemd-analyze security --offline=true --no-pager "$tmp/hipd.service" \
  >"$tmp/security.txt" 2>&1; then
  if grep -q "Unknown command verb\|unrecognized option.*offline" \
    "$tmp/security.txt"; then
    echo "check_unit: SKIP: this systemd-analyze cannot score a unit offline"
    cat "$tmp/security.txt"
    exit 77
  fi
fi
score=$(sed -n 's/.*Overall exposure level for hipd.service: \([0-9][0-9.]*\).*/\1/p' \
  "$tmp/security.txt")
if [ -z "$score" ]; then
  echo "check_unit: no exposure score in systemd-analyze security's output:"
  cat "$tmp/security.txt"
  exit 1
fi
# What is still exposed, for the log.
grep '✗' "$tmp/security.txt"
if awk -v s="$score" -v m="$max" 'BEGIN { exit !(s + 0 >= m + 0) }'; then
  echo "check_unit: exposure $score of hipd.service is not below $max"
  exit 1
fi
echo "check_unit: exposure $score (below $max)"

# With the drop-in that turns on --metrics-listen (systemd/hipd-metrics.conf):
# verify is still silent, the listener may make AF_INET/AF_INET6 sockets
# (it binds the metrics port), and the exposure stays below the bound.
dropin=systemd/hipd-metrics.conf
if [ ! -f "$dropin" ]; then
  echo "check_unit: $dropin was not generated (run make first)"
  exit 1
fi
mkdir "$tmp/hipd.service.d"
sed "s|^ExecStart=[^ ]*/hipd |ExecStart=$(pwd)/hipd |" "$dropin" \
  >"$tmp/hipd.service.d/metrics.conf"
systemd-analyze verify --man=no "$tmp/hipd.service" "$tmp/hipd.socket" \
  >"$tmp/verify.txt" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$tmp/verify.txt" ]; then
  echo "check_unit: systemd-analyze verify (exit $rc) complains about the unit with $dropin:"
  cat "$tmp/verify.txt"
  exit 1
fi
systemd-analyze security --offline=true --no-pager "$tmp/hipd.service" \
  >"$tmp/security.txt" 2>&1
if ! grep -q '✗ RestrictAddressFamilies=~AF_(INET|INET6)' "$tmp/security.txt"; then
  echo "check_unit: with $dropin the service still may not make inet sockets:"
  grep 'RestrictAddressFamilies\|PrivateNetwork' "$tmp/security.txt"
  exit 1
fi
score2=$(sed -n 's/.*Overall exposure level for hipd.service: \([0-9][0-9.]*\).*/\1/p' \
  "$tmp/security.txt")
if [ -z "$score2" ] ||
  awk -v s="$score2" -v m="$max" 'BEGIN { exit !(s + 0 >= m + 0) }'; then
  echo "check_unit: exposure '$score2' of hipd.service with $dropin is not below $max"
  exit 1
fi
echo "check_unit: with $dropin (--metrics-listen): inet sockets allowed, exposure $score2 (below $max)"
exit 0
