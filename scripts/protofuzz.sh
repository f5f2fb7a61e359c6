#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/protofuzz.sh: run the end-to-end protocol fuzzer (tests/protofuzz/)
# against the hipd of a build directory, for longer than make check does.
#
# Usage: bash scripts/protofuzz.sh BUILD_DIR SECONDS [SEED]
#   BUILD_DIR  a configured build of this tree (_build, _build-asan...); the
#              fuzzer is built there first if needed (make tests/protofuzz/protofuzz)
#   SECONDS    how long to fuzz
#   SEED       the seed (default: a new one, printed); a failure prints the
#              seed and the last requests sent, and rerunning with that seed
#              sends the same requests
# Exit status: the fuzzer's (0: the daemon held; 1: a failure, explained).
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [SEED]" >&2
  exit 2
fi
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
seconds=$2

make -C "$build" -s hipd hipd-cpu-runner tests/protofuzz/protofuzz >&2

export HIPD_BIN="$build/hipd"
export HIPD_CPU_RUNNER="$build/hipd-cpu-runner"
export HIPD_CPU_HEADER="$src/daemon/drivers/cpu/hipd_cpu_device.h"
export HIPD_TEST_TMP="$build/tests"
export PROTOFUZZ_DOC="$src/proto/PROTOCOL.md"
if [ $# -eq 3 ]; then
  export PROTOFUZZ_SEED=$3
fi
# Sanitizer builds: report every error, and fail on them.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
exec "$build/tests/protofuzz/protofuzz" --seconds "$seconds" \
  --ir "$src/tests/codegen/vec_add.ir.json"
