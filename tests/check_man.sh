#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_man.sh: the manual pages (man/) are clean under
# `mandoc -T lint -W warning` (no warning, no error), and hipd.8 cannot
# fall behind the daemon: every long option that the built `hipd --help`
# lists appears in it as an option (.Fl -NAME), and in the sample
# etc/hipd.conf as a commented-out entry. Skipped (exit 77) when
# mandoc is not installed. Run by make check from the build directory.
src=${srcdir:-$(dirname "$0")/..}
hipd=${HIPD_BIN:-./hipd}
pages="man/hipd.8 man/hipd.conf.5 man/libhipd.3 man/hipctl.1"
rc=0

if ! command -v mandoc >/dev/null 2>&1; then
  echo "check_man: SKIP: mandoc is not installed (Debian: mandoc)"
  exit 77
fi
for p in $pages; do
  # Warnings and errors only: -W warning leaves out the style notes (and
  # the cross references to pages not installed here).
  out=$(mandoc -T lint -W warning "$src/$p" 2>&1)
  if [ -n "$out" ]; then
    echo "check_man: $p: mandoc -T lint -W warning:"
    echo "$out"
    rc=1
  else
    echo "check_man: $p: lint clean"
  fi
done

help=$("$hipd" --help) || {
  echo "check_man: $hipd --help failed"
  exit 1
}
opts=$(printf '%s\n' "$help" | grep -oE '(^|[ ,])--[a-z][a-z0-9-]*' |
  sed 's/^[ ,]*--//' | sort -u)
[ -n "$opts" ] || {
  echo "check_man: no long option found in $hipd --help"
  exit 1
}
n=0
for o in $opts; do
  n=$((n + 1))
  # .Fl -NAME, anywhere on a macro line (.It Fl s , Fl -socket Ar PATH).
  if ! grep -qE "(^\.| )Fl -$o( |$)" "$src/man/hipd.8"; then
    echo "check_man: hipd --help lists --$o; man/hipd.8 does not document it"
    rc=1
  fi
done
echo "check_man: $n long options of hipd --help checked against man/hipd.8"
# The sample hipd.conf lists every option a file takes, commented out.
for o in $opts; do
  case $o in config | no-config | help | version) continue ;; esac
  if ! grep -qE "^#$o = " "$src/etc/hipd.conf"; then
    echo "check_man: hipd --help lists --$o; etc/hipd.conf has no '#$o = ...'"
    rc=1
  fi
done
echo "check_man: the options of hipd --help checked against etc/hipd.conf"
exit $rc
