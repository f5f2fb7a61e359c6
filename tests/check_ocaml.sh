#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_ocaml.sh: the OCaml binding (bindings/ocaml) against a real
# hipd: builds the library with dune against this build tree's libhipd
# (never an installed one), runs its alcotest suite (`dune test`), then
# builds the OCaml examples (examples/ocaml) as an outside program would,
# through findlib, and runs each. One hipd, the one built here ($HIPD_BIN),
# on a socket and cache of its own, serving the devices of
# $HIPD_OCAML_DEVICES (default cpu; "all" for every device, as
# scripts/gpu-check.sh runs it); $HIPD_SOCKET tells libhipd where.
# SKIP (77) when ocamlfind, dune or alcotest are missing.
hipd=${HIPD_BIN:-./hipd}
devices=${HIPD_OCAML_DEVICES:-cpu}
top_srcdir=$(cd "${srcdir:-.}" && pwd) || exit 1
top_builddir=$(pwd)

# HIPD_OCAML_PREBUILT=DIR: run the suite and the examples built elsewhere
# (DIR holds test_hipd.exe, vector_add.exe, matmul.exe, reduction.exe:
# native programs, whose only library of ours is libhipd, found through
# LD_LIBRARY_PATH), where OCaml is not installed: the GPU machine.
prebuilt=${HIPD_OCAML_PREBUILT:-}
if [ -z "$prebuilt" ]; then
  for tool in ocamlfind dune; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "SKIP: $tool not found (Debian: ocaml-findlib, ocaml-dune)"
      exit 77
    fi
  done
  for pkg in alcotest threads; do
    if ! ocamlfind query "$pkg" >/dev/null 2>&1; then
      echo "SKIP: the OCaml package $pkg is missing (Debian: libalcotest-ocaml-dev)"
      exit 77
    fi
  done
elif [ ! -x "$prebuilt/test_hipd.exe" ]; then
  echo "check_ocaml: HIPD_OCAML_PREBUILT=$prebuilt has no test_hipd.exe"
  exit 1
fi
if [ ! -f "$top_builddir/.libs/libhipd.so" ]; then
  echo "check_ocaml: no libhipd in $top_builddir/.libs: run from the build tree"
  exit 1
fi
# A sanitizer build's libhipd needs the sanitizer's runtime, which OCaml's
# linker does not bring: the suite runs in the plain build (scripts/test.sh
# runs both).
if nm -D "$top_builddir/.libs/libhipd.so" 2>/dev/null |
  grep -E ' U __(asan|tsan|ubsan)_' >/dev/null; then
  echo "SKIP: this libhipd is built with a sanitizer; OCaml programs cannot link it (the plain build runs the suite)"
  exit 77
fi

dir=$(mktemp -d "${HIPD_TEST_TMP:-${TMPDIR:-/tmp}}/ocaml.XXXXXX") || exit 1
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
  echo "check_ocaml: hipd did not start; its log:"
  cat "$dir/hipd.log"
  exit 1
fi

# dune writes only under --build-dir (the source tree may be read-only, as
# in make distcheck), and no cache in $HOME.
HIPD_SOCKET=$dir/hipd.sock
HIPD_SRCDIR=$top_srcdir
HIPD_BUILDDIR=$top_builddir
DUNE_CACHE=disabled
export HIPD_SOCKET HIPD_SRCDIR HIPD_BUILDDIR DUNE_CACHE
rc=0
if [ -n "$prebuilt" ]; then
  export LD_LIBRARY_PATH="$top_builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "---- $prebuilt/test_hipd.exe (built elsewhere)"
  "$prebuilt/test_hipd.exe" || rc=1
  for ex in vector_add matmul reduction; do
    [ $rc -eq 0 ] || break
    echo "---- examples/ocaml/$ex (built elsewhere)"
    "$prebuilt/$ex.exe" || { echo "check_ocaml: $ex FAILED"; rc=1; }
  done
else
  bdir=$top_builddir/bindings/ocaml/_dune
  mkdir -p "$bdir/examples" || exit 1

  echo "---- dune build and test (bindings/ocaml)"
  if ! dune build --root "$top_srcdir/bindings/ocaml" --build-dir "$bdir" -j 2 \
    --force @install @runtest 2>&1; then
    echo "check_ocaml: the binding's build or tests FAILED"
    rc=1
  fi

  if [ $rc -eq 0 ]; then
    echo "---- examples/ocaml (through findlib: OCAMLPATH=$bdir/install/default/lib)"
    if ! OCAMLPATH=$bdir/install/default/lib dune build \
      --root "$top_srcdir/examples/ocaml" --build-dir "$bdir/examples" -j 2 2>&1; then
      echo "check_ocaml: the OCaml examples did not build"
      rc=1
    fi
    for ex in vector_add matmul reduction; do
      [ $rc -eq 0 ] || break
      echo "---- examples/ocaml/$ex"
      if ! "$bdir/examples/default/$ex.exe"; then
        echo "check_ocaml: examples/ocaml/$ex FAILED"
        rc=1
      fi
    done
  fi
fi
if [ $rc -ne 0 ]; then
  echo "---- hipd's log"
  cat "$dir/hipd.log"
fi
exit $rc
