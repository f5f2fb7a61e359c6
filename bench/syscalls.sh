#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/syscalls.sh: the system calls a kernel costs, by thread, on the
# ring path of one client (hipd_bench's share_n1), counted by `perf trace`.
#
#   bench/syscalls.sh [BUILD_DIR] [-- HIPD_BENCH_OPTION...]
#
# Starts this build's hipd on a private socket (--cache-dir '', its
# --busy-poll $HIPD_BUSY_POLL, default 0: a loop that sleeps, as a
# tenant's worker of one session does), runs hipd_bench's share figure
# against it with one client ($CLIENT_BUSY_POLL_US, default 0: a client
# that sleeps too), and after a second of warm-up traces the daemon's
# processes and the client for $TRACE_SECONDS (default 1). The kernels of
# that window are the daemon's hipd_device_kernels_launched_total at the
# window's two ends (hipctl metrics, whose connections the listener's
# accept4 marks in the trace). Prints, for each thread with at least one
# call every ten kernels, its system calls a kernel and the main ones.
# Extra daemon options: $HIPD_DAEMON_ARGS. The default device is the CPU
# device (pass `-- --device 0` for a GPU). Needs perf (linux-perf); the
# counts are timing-independent enough to compare trees on a busy
# machine, where times are not.
set -euo pipefail

build=${1:-.}
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
build=$(cd "$build" && pwd)
command -v perf >/dev/null || { echo "syscalls.sh: perf not found" >&2; exit 77; }
if [ ! -x "$build/hipd" ] || [ ! -x "$build/bench/hipd_bench" ]; then
  echo "syscalls.sh: no hipd and bench/hipd_bench in $build" >&2
  exit 2
fi
srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile")
trace_s=${TRACE_SECONDS:-1}
tmp=$(mktemp -d)
dpid=
bpid=
ppid=
cleanup()
{
  [ -n "$ppid" ] && kill -INT "$ppid" 2>/dev/null
  [ -n "$bpid" ] && kill "$bpid" 2>/dev/null
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

export HIPD_CPU_RUNNER=${HIPD_CPU_RUNNER:-$build/hipd-cpu-runner}
export HIPD_CPU_HEADER=${HIPD_CPU_HEADER:-$srcdir/daemon/drivers/cpu/hipd_cpu_device.h}
# shellcheck disable=SC2086
"$build/hipd" --socket "$tmp/s" --cache-dir '' \
  --busy-poll "${HIPD_BUSY_POLL:-0}" ${HIPD_DAEMON_ARGS:-} \
  >"$tmp/hipd.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$tmp/s" ] && break; sleep 0.1; done
[ -S "$tmp/s" ] || { cat "$tmp/hipd.log" >&2; exit 1; }

launched()
{
  "$build/hipctl" --socket "$tmp/s" metrics |
    awk '/^hipd_device_kernels_launched_total/ { n += $2 } END { print n + 0 }'
}

HIPD_BUSY_POLL_US=${CLIENT_BUSY_POLL_US:-0} "$build/bench/hipd_bench" \
  --socket "$tmp/s" --only share --clients 1 --no-mps \
  --seconds $((trace_s + 3)) --device cpu "$@" >"$tmp/bench.txt" 2>&1 &
bpid=$!
sleep 1.5
# The daemon's processes (the listener, its workers and their helpers)
# and the bench's client, which is the bench's child.
pids=$dpid
for _ in 1 2 3; do
  more=$(pgrep -d, -P "$pids" || true)
  [ -n "$more" ] && pids="$dpid,$more"
done
pids=$(echo "$pids" | tr ',' '\n' | sort -u | paste -sd,)
client=$(pgrep -d, -P "$bpid" -x hipd_bench || true)
perf trace -T -p "$pids${client:+,$client}" -o "$tmp/trace.txt" \
  >/dev/null 2>&1 &
ppid=$!
for _ in $(seq 100); do [ -s "$tmp/trace.txt" ] && break; sleep 0.05; done
# The window: from one hipctl connection to the next, which the listener
# accepts (accept4) as it reads the kernels counted.
k0=$(launched)
sleep "$trace_s"
k1=$(launched)
sleep 0.2
kill -INT "$ppid"
wait "$ppid" || true
ppid=
wait "$bpid" || { cat "$tmp/bench.txt" >&2; exit 1; }
bpid=
grep -E '^share_n1 ' "$tmp/bench.txt" | tr -s ' ' | cut -d' ' -f1,2
python3 - "$tmp/trace.txt" $((k1 - k0)) "$dpid" <<'EOF'
import re, sys

kernels, listener = int(sys.argv[2]), sys.argv[3]
line_re = re.compile(r'^\s*([0-9.]+) \(\s*[0-9.]*\s*(?:ms)?\): (\S+)/(\d+) (.*)$')
events = []
for line in open(sys.argv[1]):
    m = line_re.match(line)
    if m and '[continued]' not in m.group(4):
        events.append((float(m.group(1)), m.group(2) + '/' + m.group(3),
                       m.group(3), m.group(4)))
marks = [e[0] for e in events if e[2] == listener and
         e[3].startswith('accept4(') and not re.search(r'= -1|EAGAIN', e[3])]
if len(marks) < 2 or kernels <= 0:
    sys.exit('syscalls.sh: no window (%d accepts, %d kernels)' %
             (len(marks), kernels))
t0, t1 = marks[0], marks[1]
threads = {}
for ts, name, _, call in events:
    if t0 <= ts < t1:
        c = threads.setdefault(name, {})
        sc = call.split('(', 1)[0]
        c[sc] = c.get(sc, 0) + 1
print('%d kernels in %.0f ms traced; system calls a kernel:' %
      (kernels, t1 - t0))
for name, calls in sorted(threads.items()):
    total = sum(calls.values())
    if total * 10 < kernels:
        continue
    main = sorted(calls.items(), key=lambda c: -c[1])
    print('  %-26s %5.2f  %s' % (name, total / kernels, ' '.join(
        '%s %.2f' % (c, n / kernels) for c, n in main if n * 20 >= kernels)))
EOF
