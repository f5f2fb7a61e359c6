#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/test.sh: the full check, as CI runs it (.ci/run): install what is
# missing, bootstrap, configure in _build/, build, make check, the protocol
# fuzzer, make distcheck, the Debian packages (scripts/debian-check.sh), the
# sanitizer builds (scripts/sanitize.sh asan and tsan) and the libFuzzer
# targets (scripts/fuzz.sh). Each step prints how long it took.
# If a CUDA toolkit is in /usr/local/cuda, also configure and build (not run)
# the HIP-on-NVIDIA variant in _build-nvidia/.
#
# Usage: bash scripts/test.sh
#   JOBS=N                        make's -j (default: nproc)
#   DISTCHECK_CONFIGURE_FLAGS=... passed to make distcheck when set
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh

JOBS=${JOBS:-$(nproc)}
BUILD=_build

hipd_step "dependencies"
hipd_install_deps

hipd_step "accounts"
hipd_create_accounts

hipd_configure "$BUILD"

hipd_step "make -j$JOBS"
make -C "$BUILD" -j"$JOBS" || hipd_die "the build failed"

hipd_step "make check"
if ! make -C "$BUILD" -j"$JOBS" check; then
  hipd_print_failed_tests "$BUILD"
  hipd_die "make check failed (logs above)"
fi

# The end-to-end protocol fuzzer (tests/protofuzz/) for longer than its
# run in make check.
hipd_step "protocol fuzzer (${PROTOFUZZ_SECONDS:-180} s)"
bash scripts/protofuzz.sh "$BUILD" "${PROTOFUZZ_SECONDS:-180}" ||
  hipd_die "the protocol fuzzer failed (seed and last requests above)"

hipd_step "make distcheck"
distcheck_args=()
if [ -n "${DISTCHECK_CONFIGURE_FLAGS+set}" ]; then
  distcheck_args+=("DISTCHECK_CONFIGURE_FLAGS=$DISTCHECK_CONFIGURE_FLAGS")
fi
if ! make -C "$BUILD" -j"$JOBS" distcheck "${distcheck_args[@]}"; then
  # Its tests ran in the unpacked tarball's build tree.
  for sub in "$BUILD"/hipd-*/_build/sub; do
    [ -d "$sub" ] && hipd_print_failed_tests "$sub"
  done
  hipd_die "make distcheck failed (logs above)"
fi

# The Debian packages (debian/): built without their test suite (make check
# ran above), lintian clean at error level, installed, the examples run
# against the installed daemon, purged.
hipd_step "Debian packages (scripts/debian-check.sh)"
JOBS=$JOBS bash scripts/debian-check.sh || hipd_die "the Debian package check failed"

# The sanitizers: every test under ASan+UBSan+LSan (then the protocol
# fuzzer under them), the threaded suites under TSan. Any report fails.
hipd_steps_done
JOBS=$JOBS bash scripts/sanitize.sh asan || hipd_die "the ASan/UBSan run failed (reports above)"
JOBS=$JOBS bash scripts/sanitize.sh tsan || hipd_die "the TSan run failed (reports above)"

# The libFuzzer targets of tests/fuzz, FUZZ_SECONDS (60) each.
JOBS=$JOBS bash scripts/fuzz.sh || hipd_die "fuzzing found a problem (reproducers above)"

# The HIP-on-NVIDIA driver only has to compile and link here: its tests need
# an NVIDIA GPU.
if [ -d /usr/local/cuda ]; then
  hipd_step "HIP on NVIDIA: configure and build _build-nvidia/"
  mkdir -p _build-nvidia
  (cd _build-nvidia && ../configure --with-hip=nvidia --with-cuda=/usr/local/cuda) ||
    hipd_die "configure --with-hip=nvidia failed (see _build-nvidia/config.log)"
  make -C _build-nvidia -j"$JOBS" || hipd_die "the --with-hip=nvidia build failed"
else
  echo
  echo "/usr/local/cuda not found: skipping the --with-hip=nvidia build"
fi

hipd_steps_done
echo
echo "all checks passed in $SECONDS s"
