#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/bench-smoke.sh: hipd_bench in its seconds-long smoke mode on the CPU
# device, with its own daemon, socket and cache directory, and (for the
# --isolation-compare figures) a second one with --isolation none. Asserts
# only that it completes, reports every figure and counts the daemon's
# processes in its CPU figures; timings are never checked. The tenants
# figures run their clients as two users, then each as a user of its own,
# when run as root, and are reported as not applicable otherwise.
json=tests/bench-smoke.json
rm -f "$json"
./bench/hipd_bench --smoke --device cpu --daemon-arg=--devices=cpu \
  --daemon-arg=--cpu-devices=2 --spread=0,1 --peer 0,1 --isolation-compare \
  --timeout 240 --json "$json" > tests/bench-smoke.out 2>&1
rc=$?
cat tests/bench-smoke.out
[ "$rc" = 0 ] || exit 1
# The CPU figures count the daemon's process tree: one that lost it (a
# stale pid after the compile figure's restart) reports the clients alone.
if grep -q "its CPU is not counted" tests/bench-smoke.out; then
  echo "bench-smoke: a CPU figure missed the daemon's processes"
  exit 1
fi
test -s "$json" || { echo "bench-smoke: no $json"; exit 1; }
grep -q '"complete": true' "$json" || { echo "bench-smoke: $json is not complete"; exit 1; }
missing=0
for name in sync_rtt launch_throughput \
  h2d_shm_1KiB d2h_shm_1KiB h2d_inline_1KiB d2h_inline_1KiB \
  h2d_shm_1MiB d2h_shm_1MiB h2d_inline_1MiB d2h_inline_1MiB \
  compile_cold compile_hit_memory compile_hit_memory_loaded compile_hit_disk \
  compile_hit_after_restart \
  share_n1 share_n4 share_n1_spread share_n4_spread peer_copy_0_to_1_1MiB \
  tenants_n4 tenants_n4_each isolation_sync_rtt isolation_launch_throughput \
  isolation_share_n1 isolation_share_n4; do
  if ! grep -q "\"name\": \"$name\"" "$json"; then
    echo "bench-smoke: figure $name is missing from $json"
    missing=1
  fi
done
exit $missing
