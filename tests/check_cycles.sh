#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/check_cycles.sh: no circle between the files of daemon/, client/
# and tools/.
#
# A file's module is its path without .c or .h (daemon/session.c and
# daemon/session.h are one module, daemon/session); a private extension
# header X_internal.h belongs to module X when there is one (client/conn.c,
# conn.h and conn_internal.h are client/conn). Two graphs of modules
# are checked:
#  - includes: module A -> module B when a file of A has #include "..." of
#    a file of B (resolved as the compiler does: the file's own folder,
#    then daemon/, proto/, client/, tools/);
#  - calls (when the objects are built, as under make check): A -> B when
#    an object built from A.c uses a symbol that an object built from B.c
#    defines (nm).
# A circle is a set of two or more modules that reach each other. Every
# circle fails the check unless it is listed in the allowance below, one
# line per circle (its modules sorted, space-separated, with the graph in
# front), each with a comment saying whose it is. An allowed circle that is
# gone is reported, so the list only shrinks. Run by make check (srcdir
# from $srcdir, else the script's parent folder; objects from the current
# folder).
set -uo pipefail

top=${srcdir:-$(dirname "$0")/..}
build=$(pwd)
cd "$top" || exit 1
top=$(pwd)

# Circles left for now, each with what closes it. The workers files'
# circle is one module split by job, whose parts call each other through
# the private header they share (workers_pool.h): to be opened next (the
# shared state behind one of them).
allowed=(
  # the HIP driver, one module in files that share hip_internal.h: the
  # platform file (hip_amd/hip_nvidia) calls back into the runtime compiler
  # (hip_rtc_setup, hip_rtc_code) and the error mapping (hip_err_code); a
  # file of those below the platform closes it
  "calls: daemon/drivers/hip/hip_compile daemon/drivers/hip/hip_module daemon/drivers/hip/hip_platform daemon/drivers/hip/hip_runtime daemon/drivers/hip/hip_shm"
  # session_t embeds res_t and the tenant: resources, session, stats and
  # tenants include each other's headers (the calls point one way now);
  # grants counts a session's memory and work for its grant as tenants
  # does for its uid, so it reads session_t too
  "includes: daemon/grants daemon/resources daemon/session daemon/stats daemon/tenants"
  # the split of workers.c (workers_pool.h); workers_route left it when
  # refusals stopped waiting (nothing of it is called back)
  "calls: daemon/privsep/workers daemon/privsep/workers_admin daemon/privsep/workers_compile daemon/privsep/workers_probe"
)

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The module of a file of the tree.
module()
{
  local m=${1%.[ch]}
  # The HIP driver's platform file is hip_amd or hip_nvidia, whichever the
  # build has: one module either way, so the check reads the same on both.
  case "$m" in
  */drivers/hip/hip_amd | */drivers/hip/hip_nvidia) m=${m%/*}/hip_platform ;;
  esac
  case "$m" in
  *_internal) [ -f "${m%_internal}.c" ] || [ -f "${m%_internal}.h" ] && m=${m%_internal} ;;
  esac
  echo "$m"
}

# ---------------------------------------------------------------- includes
while IFS= read -r f; do
  from=$(module "$f")
  dir=$(dirname "$f")
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    target=
    for base in "$dir" daemon proto client tools; do
      if [ -f "$base/$inc" ]; then
        target=$base/$inc
        case "$inc" in
        *..*) target=$(realpath -m --relative-to=. "$target") ;;
        esac
        break
      fi
    done
    case "$target" in
    daemon/* | client/* | tools/*) echo "$from $(module "$target")" ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find daemon client tools -name '*.[ch]' | sort) >"$tmp/includes"

# ------------------------------------------------------------------- calls
# The source module of each built object ("OBJECT MODULE" lines):
# daemon/x/NAME.o is daemon/x/NAME.c, or daemon/x/SRC.c for an object named
# TARGET-SRC.o (automake's per-target objects); objects of libtool
# libraries are in .libs/.
have_calls=0
if command -v nm >/dev/null && [ -d "$build/daemon" ]; then
  (cd "$build" && find daemon client tools -name '*.o' 2>/dev/null | sort) >"$tmp/objects"
  while IFS= read -r o; do
    dir=${o%/*}
    dir=${dir%/.libs}
    name=${o##*/}
    name=${name%.o}
    if [ -f "$dir/$name.c" ]; then
      echo "$o $(module "$dir/$name.c")"
    elif [ -f "$dir/${name#*-}.c" ]; then
      echo "$o $(module "$dir/${name#*-}.c")"
    fi
  done <"$tmp/objects" >"$tmp/modules"
  if [ -s "$tmp/modules" ]; then
    have_calls=1
    (cd "$build" && cut -d' ' -f1 "$tmp/modules" | xargs nm -A -g --defined-only) >"$tmp/defined" 2>/dev/null
    (cd "$build" && cut -d' ' -f1 "$tmp/modules" | xargs nm -A -u) >"$tmp/undefined" 2>/dev/null
    # A symbol defined by one module only (main aside) ties its users to it.
    awk 'FILENAME == ARGV[1] { mod[$1] = $2; next }
         { i = index($0, ":"); m = mod[substr($0, 1, i - 1)]; k = split(substr($0, i + 1), f, " ") }
         FILENAME == ARGV[2] { if (k == 3 && f[2] ~ /^[TDBRV]$/ && !((m, f[3]) in seen)) {
             seen[m, f[3]] = 1; n[f[3]]++; def[f[3]] = m } next }
         { if (n[f[k]] == 1 && def[f[k]] != m) print m, def[f[k]] }' \
      "$tmp/modules" "$tmp/defined" "$tmp/undefined" | sort -u >"$tmp/calls"
  fi
fi

# Print each circle of the edges on stdin ("FROM TO" lines): its modules,
# sorted, on one line.
circles()
{
  awk '{ if ($1 != $2) { adj[$1] = adj[$1] " " $2; nodes[$1]; nodes[$2] } }
    END {
      for (s in nodes) {
        delete seen; n = 0; q[++n] = s; seen[s] = 1
        for (i = 1; i <= n; i++) {
          k = split(adj[q[i]], next_, " ")
          for (j = 1; j <= k; j++)
            if (!(next_[j] in seen)) { seen[next_[j]] = 1; q[++n] = next_[j] }
        }
        for (t in seen) reach[s, t] = 1
      }
      for (s in nodes) {
        line = ""
        for (t in nodes)
          if (t != s && reach[s, t] && reach[t, s]) line = line " " t
        if (line != "") print s line
      }
    }' | while read -r -a mods; do
    printf '%s\n' "${mods[@]}" | sort | paste -sd' '
  done | sort -u
}

{
  circles <"$tmp/includes" | sed 's/^/includes: /'
  [ "$have_calls" -eq 0 ] || circles <"$tmp/calls" | sed 's/^/calls: /'
} >"$tmp/found"

fail=0
while IFS= read -r c; do
  ok=0
  for a in "${allowed[@]}"; do
    [ "$c" = "$a" ] && ok=1
  done
  if [ "$ok" -eq 1 ]; then
    echo "allowed for now: $c"
  else
    echo "circle: $c"
    fail=1
  fi
done <"$tmp/found"
for a in "${allowed[@]}"; do
  case "$a" in
  calls:*) [ "$have_calls" -eq 1 ] || continue ;;
  esac
  grep -qxF "$a" "$tmp/found" || echo "gone (remove it from the allowance): $a"
done

nin=$(wc -l <"$tmp/includes")
ncalls=0
[ "$have_calls" -eq 0 ] || ncalls=$(wc -l <"$tmp/calls")
if [ "$fail" -ne 0 ]; then
  echo "check_cycles: FAIL"
  exit 1
fi
if [ "$have_calls" -eq 0 ]; then
  echo "check_cycles: $nin includes, no circle (calls not checked: no objects in $build)"
else
  echo "check_cycles: $nin includes and $ncalls calls between modules, no circle"
fi
