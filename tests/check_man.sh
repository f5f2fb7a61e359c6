#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_man.sh: the manual pages (man/) are clean under
# `mandoc -T lint -W warning` (no warning, no error), and they and the
# sample etc/hipd.conf agree with hipd's table of options
# (daemon/config/options.c), as the built `hipd --list-options` dumps it
# (NAME WHEN TYPE ARG [hidden] a line; WHEN is reload, restart or cmdline):
# - hipd(8) documents every option that --help shows (.It ... Fl -NAME in
#   OPTIONS), and documents no option the table lacks;
# - its SIGHUP entry names exactly the options a reload applies, and so
#   does hipd.conf(5)'s "What a reload changes";
# - hipd.conf(5) names each command-line-only option that --help shows;
# - etc/hipd.conf has a commented-out "#NAME = ..." for exactly the
#   options a file takes, each under a "# --- ... (reload|restart...) ---"
#   header that says when it applies ("(restart; NAME: reload)" names the
#   exceptions).
# Skipped (exit 77) when mandoc is not installed. Run by make check from
# the build directory.
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

table=$("$hipd" --list-options) || {
  echo "check_man: $hipd --list-options failed"
  exit 1
}
[ -n "$table" ] || {
  echo "check_man: $hipd --list-options listed nothing"
  exit 1
}
# The names of the table's rows whose fields match an awk condition.
rows() { printf '%s\n' "$table" | awk "$1 { print \$1 }" | sort -u; }
shown=$(rows '$5 != "hidden"')
all=$(rows 1)
reload=$(rows '$2 == "reload"')
file=$(rows '$2 != "cmdline"')

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# differ WANT HAVE WHAT-WANT WHAT-HAVE: the names in WANT and not in
# HAVE, and the reverse, each an error.
differ() {
  printf '%s\n' "$1" | sed '/^$/d' | sort -u >"$tmp/want"
  printf '%s\n' "$2" | sed '/^$/d' | sort -u >"$tmp/have"
  for o in $(comm -23 "$tmp/want" "$tmp/have"); do
    echo "check_man: $3 has $o; $4 does not"
    rc=1
  done
  for o in $(comm -13 "$tmp/want" "$tmp/have"); do
    echo "check_man: $4 has $o; $3 does not"
    rc=1
  done
}

# hipd(8), OPTIONS: the options of its .It lines (.It Fl s , Fl -socket Ar
# PATH).
man8=$(sed -n '/^\.Sh OPTIONS/,/^\.Sh /p' "$src/man/hipd.8" |
  grep '^\.It ' | grep -oE 'Fl -[a-z][a-z0-9-]*' | sed 's/^Fl -//')
differ "$shown" "$man8" "hipd --list-options (not hidden)" "man/hipd.8 OPTIONS"
# hipd(8), SIGNALS: what its SIGHUP entry says a reload changes.
hup=$(sed -n '/^\.It Dv SIGHUP/,/^\.It Dv /p' "$src/man/hipd.8" |
  grep -E '(^\.| )Fl ' | grep -oE ' -[a-z][a-z0-9-]*' | sed 's/^ -//')
differ "$reload" "$hup" "hipd --list-options (reload)" "man/hipd.8 SIGHUP"
# hipd.conf(5): its "What a reload changes", and the options refused in a
# file.
conf5=$(sed -n '/^\.Ss What a reload changes/,/^\.S[sh] /p' \
  "$src/man/hipd.conf.5" | grep -E '^\.(Cm|Pq|Po) ' |
  sed 's/^\.[A-Za-z]* //' | tr ' ' '\n' |
  grep -E '^[a-z][a-z0-9-]*$' | grep -vxE 'Cm|Pq|Po|Pc')
differ "$reload" "$conf5" "hipd --list-options (reload)" \
  "man/hipd.conf.5 \"What a reload changes\""
for o in $(rows '$2 == "cmdline" && $5 != "hidden"'); do
  if ! grep -qE "^\.Cm $o( |$)" "$src/man/hipd.conf.5"; then
    echo "check_man: --$o is command-line only; man/hipd.conf.5 does not say so"
    rc=1
  fi
done
# The sample hipd.conf: every option a file takes, commented out, under a
# header that says when it applies.
sample=$(awk '
  /^# --- .*\(.*\) ---$/ {
    h = $0; sub(/^[^(]*\(/, "", h); sub(/\).*$/, "", h)
    n = split(h, part, /; */); mode = part[1]; sub(/ .*/, "", mode)
    delete except
    for (i = 2; i <= n; i++) if (split(part[i], kv, /: */) == 2) except[kv[1]] = kv[2]
    next
  }
  /^#[a-z][a-z0-9-]* = / {
    name = substr($1, 2)
    print name, (name in except ? except[name] : mode)
  }' "$src/etc/hipd.conf")
differ "$file" "$(printf '%s\n' "$sample" | awk '{ print $1 }')" \
  "hipd --list-options (file keys)" "etc/hipd.conf"
printf '%s\n' "$sample" | while read -r name when; do
  [ -n "$name" ] || continue
  want=$(printf '%s\n' "$table" | awk -v n="$name" '$1 == n { print $2 }')
  if [ -n "$want" ] && [ "$want" != "$when" ]; then
    echo "check_man: etc/hipd.conf puts $name under ($when); hipd --list-options says $want"
    echo fail >"$tmp/sample_fail"
  fi
done
[ -f "$tmp/sample_fail" ] && rc=1
echo "check_man: $(printf '%s\n' "$all" | wc -l) options of hipd --list-options checked against man/hipd.8, man/hipd.conf.5 and etc/hipd.conf"
exit $rc
