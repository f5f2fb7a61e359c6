#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/gpu-check.sh: build a release tarball on a GPU machine without a
# package registry and run every test there, plus the examples, against
# the GPU (HIP on NVIDIA) and the CPU device.
#
# On the build machine:   make dist && ../shared/offline-deps/fetch .offline libssl-dev libssl3
# On the GPU machine:     bash scripts/gpu-check.sh hipd-X.Y.Z.tar.gz .offline OUTDIR
# (with GPU_CHECK_BENCH=1 in the environment it also runs make bench, with
# GPU_CHECK_LAYOUTS=1 scripts/gpu-layouts.sh, with
# GPU_CHECK_ASAN=1 make check in an AddressSanitizer build; GPU_CHECK_JOBS
# sets make check's parallelism, 4 by default; check_multi_device runs
# again on the GPU beside a CPU device, and on two GPUs where there are)
#
# Writes the configure summary, test logs and example output into OUTDIR.
set -uo pipefail
tarball=${1:?usage: gpu-check.sh TARBALL OFFLINE_DEPS OUTDIR}
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
deps=${2:?usage: gpu-check.sh TARBALL OFFLINE_DEPS OUTDIR}
out=${3:?usage: gpu-check.sh TARBALL OFFLINE_DEPS OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# shellcheck source=/dev/null
. "$deps/env.sh"
# Debian's multiarch headers (ffi.h) sit where only Debian's gcc looks.
export CPATH="$(cd "$deps" && pwd)/root/usr/include/x86_64-linux-gnu:$CPATH"
work=$(mktemp -d)
# hipd's workers, CPU runners and compile helpers run as other accounts
# (hipd, the tenants, hipd-compile): they must reach the build tree.
chmod 0755 "$work"
tar xzf "$tarball" -C "$work"
cd "$work"/hipd-* || exit 1
nvidia-smi -L > "$out/gpus.txt" 2>&1
# The accounts hipd runs its workers and compile helpers as, as the
# packages (and scripts/test.sh) make them: the shell tests start a root
# hipd that needs them.
# shellcheck source=deps.sh
(. scripts/deps.sh && hipd_create_accounts) > "$out/accounts.txt" 2>&1 ||
  { cat "$out/accounts.txt"; exit 1; }
./configure --with-hip=nvidia --with-cuda=/usr/local/cuda > "$out/configure.txt" 2>&1 ||
  { tail -30 "$out/configure.txt"; exit 1; }
tail -16 "$out/configure.txt"
make -j"$(nproc)" > "$out/make.txt" 2>&1 || { tail -40 "$out/make.txt"; exit 1; }
# The GPU fault test also runs with hipd's own MPS server.
HIPD_TEST_MPS=1 make -j"${GPU_CHECK_JOBS:-4}" check > "$out/check.txt" 2>&1
rc=$?
grep -E '^(PASS|FAIL|ERROR|SKIP|# )' "$out/check.txt"
cp tests/*.log "$out/" 2>/dev/null
# Tenants on two devices (check_multi_device): the GPU beside a CPU
# device, and where nvidia-smi lists two GPUs or more the first two GPUs
# (both listed alike in every tenant's worker, --device-allow per uid, two
# tenants side by side, copies between them byte for byte, a fault on
# device 0 beside a tenant on device 1 with and without MPS), then the
# bench's copies between the GPUs against direct HIP's peer copies and its
# sharing spread over both against MPS spread alike.
ngpus=$(grep -c '^GPU ' "$out/gpus.txt")
modes=
[ "$ngpus" -ge 1 ] && modes=mixed
[ "$ngpus" -ge 2 ] && modes="hip mixed"
for m in $modes; do
  echo "== check_multi_device, HIPD_TEST_DEVICES=$m ($ngpus GPUs)"
  HIPD_TEST_DEVICES=$m HIPD_TEST_MPS=1 make check TESTS=tests/check_multi_device \
    > "$out/check-multi-$m.txt" 2>&1 || rc=1
  grep -E '^(PASS|FAIL|ERROR|SKIP)' "$out/check-multi-$m.txt"
  cp tests/check_multi_device.log "$out/check_multi_device-$m.log" 2>/dev/null
  grep '^check_multi_device:' "$out/check_multi_device-$m.log"
done
if [ "$ngpus" -ge 2 ]; then
  ./bench/hipd_bench --only peer,spread --seconds 2 \
    > "$out/bench-multi-gpu.txt" 2>&1 || rc=1
  sed -n '/^figure/,$p' "$out/bench-multi-gpu.txt"
fi
# The OCaml binding's suite and examples again, on every device (device 0 is
# the GPU). The GPU machine has no OCaml: build them where it is (make check
# there leaves them in _build/bindings/ocaml/_dune: default/test/
# test_hipd.exe and examples/default/{vector_add,matmul,reduction}.exe),
# carry them in a folder and name it in HIPD_OCAML_PREBUILT; without it the
# check says SKIP.
HIPD_OCAML_DEVICES=all make check TESTS=tests/check_ocaml.sh \
  > "$out/check-ocaml-gpu.txt" 2>&1 || rc=1
grep -E '^(PASS|FAIL|ERROR|SKIP)' "$out/check-ocaml-gpu.txt"
cp tests/check_ocaml.log "$out/check_ocaml-gpu.log" 2>/dev/null
# The examples against a daemon serving the GPU and the CPU device, run
# from the build tree like the tests.
export HIPD_CPU_RUNNER=$PWD/hipd-cpu-runner
export HIPD_CPU_HEADER=$PWD/daemon/drivers/cpu/hipd_cpu_device.h
sock=$work/hipd.sock
./hipd --socket "$sock" --cache-dir "$work/cache" > "$out/hipd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
./examples/hello "$sock" > "$out/hello.txt" 2>&1 || rc=1
./examples/vecadd "$sock" > "$out/vecadd.txt" 2>&1 || rc=1
./examples/xcopy "$sock" 256 > "$out/xcopy.txt" 2>&1 || rc=1
kill -TERM "$pid"
wait "$pid" || rc=1
# A restart: the cached kernel comes from disk.
./hipd --socket "$sock" --cache-dir "$work/cache" >> "$out/hipd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
./examples/vecadd "$sock" > "$out/vecadd-restart.txt" 2>&1 || rc=1
kill -TERM "$pid"
wait "$pid" || rc=1
cat "$out/hello.txt" "$out/vecadd.txt" "$out/vecadd-restart.txt" "$out/xcopy.txt"
# Operations on the GPU: the tutorials against the GPU, then what an admin
# sees of them (hipctl, and the metrics over HTTP, scraped with curl when
# the machine has it).
port=$((20000 + RANDOM % 20000))
./hipd --socket "$sock" --cache-dir "$work/cache" \
  --metrics-listen "127.0.0.1:$port" >> "$out/hipd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
for ex in streams shm codegen profile; do
  ./examples/$ex "$sock" > "$out/$ex.txt" 2>&1 || { echo "examples/$ex failed"; rc=1; }
done
# A session that holds a GPU buffer while hipctl looks (an "ir --run"
# session ends before the listing, so a kernel run from a file holds it).
printf '%s\n' 'extern "C" __global__ void add1(float *a, int n)' \
  '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1.0f; }' \
  > "$work/add1.hip"
./hipctl --socket "$sock" run "$work/add1.hip" add1 --device 0 \
  buf:f32:4096=iota i32:4096 --expect 1=1,2,3 > "$out/hipctl-run.txt" 2>&1 ||
  { echo "hipctl run on the GPU failed"; rc=1; }
for c in status devices sessions "cache stats" "cache list"; do
  echo "== hipctl $c" >> "$out/hipctl.txt"
  ./hipctl --socket "$sock" $c >> "$out/hipctl.txt" 2>&1 || { echo "hipctl $c failed"; rc=1; }
done
./hipctl --socket "$sock" --json status > "$out/hipctl-status.json" 2>&1 || rc=1
./hipctl --socket "$sock" metrics > "$out/hipctl-metrics.txt" 2>&1 || rc=1
if command -v curl >/dev/null 2>&1; then
  curl -fsS "http://127.0.0.1:$port/metrics" > "$out/metrics.txt" 2>&1 ||
    { echo "curl of the metrics failed"; rc=1; }
fi
kill -TERM "$pid"
wait "$pid" || rc=1
echo "== operations on the GPU"
cat "$out/hipctl-run.txt" "$out/hipctl.txt"
grep -E '^hipd_device_(kernels_launched_total|busy_seconds_total|memory_held_bytes|transfer_bytes_total)' \
  "$out/metrics.txt" "$out/hipctl-metrics.txt" 2>/dev/null | head -20
# make check again in an AddressSanitizer build (GCC's: the GPU machine has
# no clang), when asked for with GPU_CHECK_ASAN=1. Leak checking is off
# there: the CUDA driver keeps allocations until the process exits, which
# LeakSanitizer would report in every daemon. Reports go to files; any
# report fails the run.
if [ -n "${GPU_CHECK_ASAN:-}" ]; then
  # A source tree of its own: the first one is configured in place.
  mkdir -p "$work/asan-src" && tar xzf "$tarball" -C "$work/asan-src"
  asan=$(echo "$work"/asan-src/hipd-*)/asan
  mkdir -p "$asan" && (
    cd "$asan" &&
      ../configure --with-hip=nvidia --with-cuda=/usr/local/cuda \
        CFLAGS="-fsanitize=address -fno-omit-frame-pointer -g -O1" \
        LDFLAGS="-fsanitize=address" > "$out/asan-configure.txt" 2>&1 &&
      make -j"$(nproc)" > "$out/asan-make.txt" 2>&1
  ) || { tail -30 "$out/asan-configure.txt" "$out/asan-make.txt"; rc=1; }
  # The reports directory must be reachable and writable by every account
  # hipd runs processes as (workers, runners, compile helpers).
  reports=$work/asan-reports
  mkdir -p "$reports" && chmod 1777 "$reports"
  ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=0:detect_stack_use_after_return=1:halt_on_error=1:use_sigaltstack=0" \
    make -C "$asan" -j4 check > "$out/asan-check.txt" 2>&1 || rc=1
  echo "== make check under ASan"
  grep -E '^(PASS|FAIL|ERROR|SKIP|# )' "$out/asan-check.txt"
  mkdir -p "$out/asan-reports"
  cp "$reports"/* "$out/asan-reports/" 2>/dev/null
  if [ -n "$(ls "$out/asan-reports")" ]; then
    echo "ASan reports:"; head -60 "$out"/asan-reports/*; rc=1
  else
    echo "no ASan report"
  fi
  mkdir -p "$out/asan-logs"
  cp "$asan"/tests/*.log "$out/asan-logs/" 2>/dev/null
fi
# The benchmarks (bench/README.md), when asked for: GPU_CHECK_BENCH=1, or
# the options to give hipd_bench (GPU_CHECK_BENCH='--clients 1,4,16').
if [ -n "${GPU_CHECK_BENCH:-}" ]; then
  [ "$GPU_CHECK_BENCH" = 1 ] && GPU_CHECK_BENCH=
  make bench BENCH_FLAGS="$GPU_CHECK_BENCH" > "$out/bench.txt" 2>&1 || rc=1
  cp bench/results.json "$out/bench-results.json" 2>/dev/null
  sed -n '/^figure/,$p' "$out/bench.txt"
fi
# The sharing figure under each process layout (scripts/gpu-layouts.sh),
# when asked for: GPU_CHECK_LAYOUTS='CLIENTS [SECONDS]' (or 1: 16 clients).
if [ -n "${GPU_CHECK_LAYOUTS:-}" ]; then
  [ "$GPU_CHECK_LAYOUTS" = 1 ] && GPU_CHECK_LAYOUTS=16
  # shellcheck disable=SC2086
  bash scripts/gpu-layouts.sh "$out/layouts" $GPU_CHECK_LAYOUTS \
    > "$out/layouts.txt" 2>&1 || rc=1
  grep -A20 '^layout ' "$out/layouts.txt"
fi
# One file back: the device tool returns a few files only.
tar czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
exit $rc
