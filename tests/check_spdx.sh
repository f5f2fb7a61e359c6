#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_spdx.sh: every source and script file of hipd's carries its
# SPDX licence line (LICENSE is the MIT licence). Fails naming each file
# without it.
#
# The files are the tracked ones (git ls-files) in a git checkout, otherwise
# every file under $srcdir (make distcheck runs from a tarball), less build
# trees (a directory holding config.status), autotools' own files and the
# binary fuzz corpus. Which kinds need which line:
#   *.c *.h                          line 1: /* SPDX-License-Identifier: MIT */
#   configure.ac                     line 1: dnl SPDX-License-Identifier: MIT
#   *.ml *.mli (bindings/ocaml,      line 1: (* SPDX-License-Identifier: MIT *)
#     examples/ocaml)
#   dune files (not dune-project,    line 1: ; SPDX-License-Identifier: MIT
#     whose first line is its lang)
#   shell scripts, Makefile.am,      line 1, or line 2 after a #! line:
#   systemd/, tsan.supp, hipd.pc.in    # SPDX-License-Identifier: MIT
# Generated golden outputs (tests/codegen/*.hip, *.ir.json), JSON, msgpack
# corpora and Markdown are not checked.
#
# `tests/check_spdx.sh --list` prints each checked file and its kind.
set -u

srcdir=${srcdir:-$(dirname "$0")/..}
cd "$srcdir" || exit 99

spdx='SPDX-License-Identifier: MIT'
list_only=0
[ "${1:-}" = --list ] && list_only=1

# Tracked files when $srcdir is the top of a git work tree (not merely inside
# one: distcheck unpacks its tarball inside the build tree of a checkout).
files() {
  top=$(git rev-parse --show-toplevel 2>/dev/null) &&
    [ "$(cd "$top" && pwd -P)" = "$(pwd -P)" ] && {
    git ls-files
    return
  }
  find . \( -name .git -o -name autom4te.cache -o -path ./build-aux \
    -o -path ./m4 -o -path ./tests/fuzz/corpus \) -prune \
    -o -type d -exec test -e '{}/config.status' ';' ! -path . -prune \
    -o -type f -print | sed 's|^\./||' | grep -v '^config\.h$'
}

# kind FILE: c, dnl, hash (line 1, or 2 after #!), or nothing.
kind() {
  case $1 in
  tests/fuzz/corpus/*) ;;
  *.c | *.h) echo c ;;
  *.ml | *.mli) echo ml ;;
  dune | */dune) echo dune ;;
  configure.ac) echo dnl ;;
  *.sh | bootstrap | .ci/run | tests/fuzz/cxx-syntax-only | Makefile.am | \
    systemd/hipd.service.in | systemd/hipd.socket | systemd/hipd.sysusers | \
    systemd/hipd.tmpfiles | tests/tsan.supp | client/hipd.pc.in)
    echo hash
    ;;
  esac
}

checked=0
bad=0
for f in $(files | LC_ALL=C sort); do
  k=$(kind "$f")
  [ -n "$k" ] || continue
  if [ "$list_only" = 1 ]; then
    echo "$k $f"
    continue
  fi
  checked=$((checked + 1))
  first=$(sed -n 1p "$f")
  case $k in
  c) want="/* $spdx */" got=$first ;;
  dnl) want="dnl $spdx" got=$first ;;
  ml) want="(* $spdx *)" got=$first ;;
  dune) want="; $spdx" got=$first ;;
  hash)
    want="# $spdx"
    case $first in
    '#!'*) got=$(sed -n 2p "$f") ;;
    *) got=$first ;;
    esac
    ;;
  esac
  if [ "$got" != "$want" ]; then
    echo "check_spdx: $f: no '$want' line where it belongs" >&2
    bad=$((bad + 1))
  fi
done
[ "$list_only" = 1 ] && exit 0
echo "check_spdx: $checked files checked, $bad without the SPDX line"
[ "$checked" -gt 0 ] || {
  echo "check_spdx: no files found under $(pwd)" >&2
  exit 99
}
[ "$bad" -eq 0 ]
