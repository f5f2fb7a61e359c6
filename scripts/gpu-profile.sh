#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/gpu-profile.sh: where a busy worker's loop spends its time while
# N clients share a device, by function: the profile behind issue 22's
# figures in bench/RESULTS.md, in one command instead of a page of notes.
#
# In a built tree (scripts/gpu-check.sh leaves one), with perf:
#
#   bash scripts/gpu-profile.sh OUTDIR [CLIENTS [SECONDS]]
#
# runs `bench/hipd_bench --only share --clients CLIENTS --no-mps` (16 and
# 1.5 by default) and, once the sharing run is under way, records the hipd
# process that uses the most CPU (a worker) for SECONDS with DWARF call
# graphs, and the whole machine without them. It writes to OUTDIR:
#   bench.txt        the bench's output
#   worker.txt       the worker's functions, each with what it calls
#                    (perf report --children), 1 % and more
#   worker-self.txt  the same by the function's own time
#   machine.txt      every process by command and shared object
# Environment: PERF (the perf program, default: perf on PATH; a perf
# carried to the GPU machine with its libraries needs PERF_LD_LIBRARY_PATH
# too), HIPD_BENCH_ARGS (more options for hipd_bench: --device cpu,
# --daemon-arg ...). Run it as root: the worker runs as another user and
# is not dumpable (its sandbox), which perf -p may only attach to as root.
set -uo pipefail

out=${1:?usage: gpu-profile.sh OUTDIR [CLIENTS [SECONDS]]}
clients=${2:-16}
seconds=${3:-1.5}
perf=${PERF:-perf}
[ -x bench/hipd_bench ] || { echo "gpu-profile.sh: run it in a built tree (bench/hipd_bench)" >&2; exit 1; }
mkdir -p "$out" || exit 1

run_perf() {
  if [ -n "${PERF_LD_LIBRARY_PATH:-}" ]; then
    env LD_LIBRARY_PATH="$PERF_LD_LIBRARY_PATH" "$perf" "$@"
  else
    "$perf" "$@"
  fi
}
run_perf --version > /dev/null 2>&1 || { echo "gpu-profile.sh: no perf ($perf)" >&2; exit 1; }

# The sharing run lasts long enough for both recordings and the bench's
# set-up (its daemon, the compile, the clients' start).
run_s=$(awk -v s="$seconds" 'BEGIN { printf "%d", 2 * s + 4 }')
# shellcheck disable=SC2086
./bench/hipd_bench --only share --clients "$clients" --seconds "$run_s" \
  --no-mps ${HIPD_BENCH_ARGS:-} > "$out/bench.txt" 2>&1 &
bench=$!
# Wait for the clients: the busiest hipd process then is a worker.
pid=
for _ in $(seq 200); do
  sleep 0.1
  if grep -q "sharing: $clients hipd clients" "$out/bench.txt" 2>/dev/null; then
    sleep 1
    pid=$(ps -eo pid,comm,pcpu --sort=-pcpu | awk '$2 == "hipd" { print $1; exit }')
    break
  fi
done
rc=0
if [ -z "$pid" ]; then
  echo "gpu-profile.sh: the sharing run did not start (see $out/bench.txt)" >&2
  rc=1
else
  echo "gpu-profile.sh: recording hipd $pid for $seconds s"
  run_perf record --call-graph dwarf,8192 -F 499 -p "$pid" -o "$out/worker.data" \
    -- sleep "$seconds" > "$out/perf-record.txt" 2>&1 || rc=1
  run_perf record -F 999 -a -o "$out/machine.data" -- sleep "$seconds" \
    >> "$out/perf-record.txt" 2>&1 || rc=1
fi
wait "$bench" || rc=1
if [ -n "$pid" ]; then
  run_perf report -i "$out/worker.data" --children --sort sym --stdio -g none \
    --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' > "$out/worker.txt"
  run_perf report -i "$out/worker.data" --no-children --sort dso,sym --stdio \
    -g none --percent-limit 0.5 2>/dev/null | grep -v '^#' | grep -v '^$' \
    > "$out/worker-self.txt"
  run_perf report -i "$out/machine.data" --sort comm,dso --stdio -g none \
    --percent-limit 0.2 2>/dev/null | grep -v '^#' | grep -v '^$' > "$out/machine.txt"
  rm -f "$out/worker.data" "$out/machine.data"
  head -40 "$out/worker.txt"
fi
grep -E '^(share_n|cpu_n)' "$out/bench.txt"
exit $rc
