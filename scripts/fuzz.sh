#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/fuzz.sh: build the fuzz targets of tests/fuzz as libFuzzer
# programs (clang, ASan, UBSan) in _build-fuzz/ and run each for a bounded
# time from a copy of its seed corpus. Fails if any target finds a crash, a
# leak, a timeout or a property failure, and prints the reproducer's path
# and its bytes (base64).
#
# Usage: bash scripts/fuzz.sh [TARGET...]   (frame ir ir_json dispatch ipc ring; all)
#   FUZZ_SECONDS=N   seconds per target (default 60)
#   FUZZ_OUT=DIR     working corpora, logs and reproducers
#                    (default _build-fuzz/fuzz-out; emptied first)
#   JOBS=N           make's -j (default: nproc)
#   CC=...           the clang to use (default: clang-14, else clang)
#
# Reproduce a finding: _build-fuzz/tests/fuzz/fuzz_TARGET FILE. Once fixed,
# add FILE to tests/fuzz/corpus/TARGET/ (or, better, to corpus_gen.c) so
# that `make check` replays it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh

JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
BUILD=_build-fuzz
OUT=${FUZZ_OUT:-$BUILD/fuzz-out}
if [ -z "${CC:-}" ]; then
  if command -v clang-14 >/dev/null 2>&1; then CC=clang-14; else CC=clang; fi
fi
CXX=${CXX:-${CC/clang/clang++}}
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(frame ir ir_json dispatch ipc ring)
for t in "${targets[@]}"; do
  [ -d "tests/fuzz/corpus/$t" ] || hipd_die "unknown fuzz target '$t' (no tests/fuzz/corpus/$t)"
done
command -v "$CC" >/dev/null 2>&1 || hipd_die "$CC not found: fuzzing needs clang (Debian: clang-14 libclang-rt-14-dev)"

hipd_configure "$BUILD" CC="$CC" CXX="$CXX" --enable-fuzzing

hipd_step "make -j$JOBS (fuzz targets)"
progs=()
for t in "${targets[@]}"; do progs+=("tests/fuzz/fuzz_$t"); done
# fuzz_dispatch's and fuzz_ring's daemons start the CPU device's kernel runner.
make -C "$BUILD" -j"$JOBS" "${progs[@]}" hipd-cpu-runner hipd-compile ||
  hipd_die "the fuzz build failed"

# A reproducer in the log itself, so that a finding of a CI run, whose
# clone and files are gone, can still be replayed: base64 of up to 64 KiB.
print_input()
{
  local size
  size=$(stat -c %s "$2")
  if [ "$size" -gt 65536 ]; then
    echo "fuzz_$1: the reproducer has $size bytes, too many to print"
    return
  fi
  echo "fuzz_$1: the reproducer's $size bytes in base64 (base64 -d > FILE):"
  base64 -w 76 "$2"
  echo "fuzz_$1: end of the reproducer"
}

rm -rf "$OUT"
failed=()
for t in "${targets[@]}"; do
  hipd_step "fuzz_$t for ${FUZZ_SECONDS}s"
  dir=$OUT/$t
  mkdir -p "$dir/corpus"
  cp tests/fuzz/corpus/"$t"/* "$dir/corpus/"
  rc=0
  "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -timeout=25 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$dir/" \
    "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  shopt -s nullglob
  found=("$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir"/slow-unit-*)
  shopt -u nullglob
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  echo "fuzz_$t: ${runs:-no summary}, ${rate:-?} runs/s, corpus $(find "$dir/corpus" -type f | wc -l) files"
  if [ "$rc" -ne 0 ] || [ "${#found[@]}" -gt 0 ]; then
    tail -n 40 "$dir/log" >&2
    for f in "${found[@]}"; do
      echo "fuzz_$t: reproducer: $f (run: $BUILD/tests/fuzz/fuzz_$t $f)" >&2
      print_input "$t" "$f" >&2
    done
    [ "${#found[@]}" -gt 0 ] || echo "fuzz_$t: exit status $rc (log: $dir/log)" >&2
    failed+=("$t")
  fi
done

hipd_steps_done
echo
if [ "${#failed[@]}" -gt 0 ]; then
  hipd_die "fuzzing found problems in: ${failed[*]} (logs and reproducers under $OUT)"
fi
echo "fuzzing found nothing in ${targets[*]} (${FUZZ_SECONDS}s each)"
