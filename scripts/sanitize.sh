#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/sanitize.sh: build with a sanitizer and run the tests under it.
#
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on),
#         in _build-asan/, every test of make check; the CPU runner is
#         instrumented too.
#   tsan  ThreadSanitizer in _build-tsan/, the suites that run threads:
#         daemon, devices, kernels, CPU kernels, shm, faults, objects, codegen,
#         the CPU runner's sandbox.
#
# The daemons and CPU runners the tests start are child processes whose
# stderr goes to log files, so every report is written to a file of its
# own (log_path) in $BUILD/sanitizer-reports/, made afresh for each run.
# Any report fails the run: the script prints them all and exits 1. It also
# fails when the build or make check fails.
#
# The build uses clang-14 (GCC's ASan and UBSan are two runtimes: UBSan
# then ignores log_path and writes to stderr).
#
# Usage: bash scripts/sanitize.sh asan|tsan
#   JOBS=N            make's -j (default: nproc)
#   SANITIZE_CC=...   the compiler (default: clang-14)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh

MODE=${1:-}
JOBS=${JOBS:-$(nproc)}
SAN_CC=${SANITIZE_CC:-clang-14}
COMMON_CFLAGS="-fno-omit-frame-pointer -g -O1"

case "$MODE" in
asan)
  BUILD=_build-asan
  SAN_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  CHECK_TESTS=() # all of make check
  ;;
tsan)
  BUILD=_build-tsan
  SAN_FLAGS="-fsanitize=thread"
  CHECK_TESTS=(tests/check_daemon_handshake tests/check_daemon_protocol
    tests/check_daemon_lifecycle tests/check_devices_info
    tests/check_devices_memory tests/check_devices_events
    tests/check_devices_sessions tests/check_kernels_run
    tests/check_kernels_errors tests/check_kernels_crashes
    tests/check_kernels_cache tests/check_cpu_kernels tests/check_shm
    tests/check_faults tests/check_objects tests/check_codegen
    tests/check_codegen_run tests/check_cpu_sandbox tests/check_ring)
  # Not tests/fuzz/fuzz_ring: its programs run operations of two streams
  # on one CPU-device buffer unordered, a race of the client's program in
  # the device's memory (as on a GPU) that TSan reports in cpu_memset().
  ;;
*)
  hipd_die "usage: bash scripts/sanitize.sh asan|tsan"
  ;;
esac
SRCDIR=$(pwd)
REPORTS=$SRCDIR/$BUILD/sanitizer-reports

# Print every report file; return 1 if there was one.
print_reports()
{
  local f found=0

  shopt -s nullglob
  for f in "$REPORTS"/*; do
    found=1
    printf '\n---- %s ----\n' "$f" >&2
    cat "$f" >&2
  done
  shopt -u nullglob
  return "$found"
}

hipd_step "dependencies"
hipd_install_deps
command -v "$SAN_CC" >/dev/null 2>&1 || hipd_die "$SAN_CC not found"

hipd_configure "$BUILD" CC="$SAN_CC" CFLAGS="$SAN_FLAGS $COMMON_CFLAGS" \
  LDFLAGS="$SAN_FLAGS"

hipd_step "make -j$JOBS ($MODE)"
make -C "$BUILD" -j"$JOBS" || hipd_die "the $MODE build failed"

rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# The CPU runners of a root hipd run as another uid (nobody, or a tenant's)
# and write their reports here too.
chmod 1777 "$REPORTS"
# Only the options of the sanitizer in use: each runtime also reads the
# common options (log_path) of the others' variables.
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS
if [ "$MODE" = asan ]; then
  # use_sigaltstack=0: libLLVM (which the HIP runtime loads to compile
  # kernels) gives the compiling thread an alternate signal stack from
  # malloc and keeps it; ASan would munmap it when the thread exits, fail,
  # and abort.
  # detect_stack_use_after_return=1: frames whose locals' addresses are
  # taken live on a fake stack, as newer runtimes do by default; the CPU
  # runner's fiber switch must hand fake stacks over correctly.
  # intercept_tls_get_addr=0: LeakSanitizer's scan of the dynamic TLS
  # blocks it tracks through __tls_get_addr crashes its tracer (SIGSEGV on
  # a bogus block, 'Tracer caught signal 11') in daemons that loaded
  # libLLVM; static TLS, where hipd's and libhipd's thread-locals live, is
  # still scanned.
  export ASAN_OPTIONS="log_path=$REPORTS/asan:detect_leaks=1:detect_stack_use_after_return=1:halt_on_error=1:use_sigaltstack=0:intercept_tls_get_addr=0"
  export UBSAN_OPTIONS="log_path=$REPORTS/ubsan:print_stacktrace=1:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$SRCDIR/tests/lsan.supp:print_suppressions=0"
else
  # halt_on_error=0: a race is reported and the process goes on (and exits
  # with status 66), so one run shows every race.
  # io_sync=2: I/O calls order one another. The kernel hands out
  # descriptor numbers: one that came in with SCM_RIGHTS on the loop thread
  # (every libhipd connection sends its ring's memfd) and was closed there
  # comes back from open() on a stream's worker, and without this TSan
  # takes the two creations of that number for a race (seen in
  # check_kernels_crashes and check_faults). The daemon cannot symbolize
  # its reports (its sandbox refuses the symbolizer's fork), so a
  # suppression by function name would not match.
  export TSAN_OPTIONS="log_path=$REPORTS/tsan:halt_on_error=0:exitcode=66:second_deadlock_stack=1:io_sync=2:suppressions=$SRCDIR/tests/tsan.supp"
fi

check_args=()
if [ "${#CHECK_TESTS[@]}" -gt 0 ]; then
  check_args+=("TESTS=${CHECK_TESTS[*]}")
fi
hipd_step "make check ($MODE) ${check_args[*]}"
# Fresh results: no .log or .trs of an earlier run counts.
rm -f "$BUILD"/test-suite.log "$BUILD"/tests/*.log "$BUILD"/tests/*.trs \
  "$BUILD"/tests/*/*.log "$BUILD"/tests/*/*.trs
check_ok=1
make -C "$BUILD" -j"$JOBS" check "${check_args[@]}" || check_ok=0
if [ "$check_ok" -eq 0 ]; then
  hipd_print_failed_tests "$BUILD"
fi

# The protocol fuzzer against the instrumented daemon (its reports land
# in $REPORTS like the tests').
if [ "$MODE" = asan ] && [ "$check_ok" -eq 1 ]; then
  hipd_step "protocol fuzzer (asan, ${PROTOFUZZ_ASAN_SECONDS:-60} s)"
  bash scripts/protofuzz.sh "$BUILD" "${PROTOFUZZ_ASAN_SECONDS:-60}" ||
    check_ok=0
fi

reports_ok=1
print_reports || reports_ok=0
if [ "$reports_ok" -eq 0 ]; then
  hipd_die "$MODE: the sanitizer reported problems (reports above, in $REPORTS/)"
fi
[ "$check_ok" -eq 1 ] || hipd_die "$MODE: make check failed (logs above)"

hipd_steps_done
echo
echo "$MODE: make check passed with no sanitizer report"
