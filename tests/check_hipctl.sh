#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_hipctl.sh: hipctl, the built binary, against a real hipd
# (--devices cpu, a private socket and cache): each command's human and
# --json output (the JSON parsed with python3's json module, fields
# checked), and an exit status of each class: usage 2, no daemon 3, EPERM
# 4 (log-level set as nobody, through setpriv), a failed --expect 5, a
# daemon error 1. Commands whose daemon methods this daemon lacks (the
# admin methods: session.list, session.kill, daemon.stats, metrics,
# log.level, cache.list) are skipped with a message saying so.
# Run by make check from the build directory.
src=${srcdir:-$(dirname "$0")/..}
build=$(pwd)
hipd=${HIPD_BIN:-$build/hipd}
hipctl=${HIPCTL_BIN:-$build/hipctl}
: "${HIPD_CPU_RUNNER:=$build/hipd-cpu-runner}"
: "${HIPD_COMPILE_HELPER:=$build/hipd-compile}"
: "${HIPD_CPU_HEADER:=$src/daemon/drivers/cpu/hipd_cpu_device.h}"
export HIPD_CPU_RUNNER HIPD_COMPILE_HELPER HIPD_CPU_HEADER
fails=0
skips=0

command -v python3 >/dev/null 2>&1 || {
  echo "check_hipctl: SKIP: python3 is not installed"
  exit 77
}
# Under /tmp, so that the second uid can reach the socket.
dir=$(mktemp -d /tmp/check_hipctl.XXXXXX) || exit 1
chmod 755 "$dir"
sock=$dir/hipd.sock
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "check_hipctl: FAIL: $*"
  fails=$((fails + 1))
}
skip() {
  echo "check_hipctl: SKIP: $*"
  skips=$((skips + 1))
}
# hc NAME WANT_RC ARGS...: run hipctl, keep stdout in $dir/out and stderr
# in $dir/err, and check the exit status.
hc() {
  name=$1 want=$2
  shift 2
  "$hipctl" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$name: hipctl $* exited $rc, not $want"
    sed 's/^/  stdout: /' "$dir/out" | head -20
    sed 's/^/  stderr: /' "$dir/err" | head -20
    return 1
  fi
  return 0
}
# js NAME PYTHON-EXPR: evaluate the expression on the JSON in $dir/out (as
# d); it must be true.
js() {
  python3 - "$dir/out" "$2" <<'PY' || fail "$1: $2 (output: $(head -c 600 "$dir/out"))"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
has() { grep -q -- "$2" "$dir/out" || fail "$1: stdout lacks '$2': $(head -c 600 "$dir/out")"; }
has_err() { grep -q -- "$2" "$dir/err" || fail "$1: stderr lacks '$2': $(cat "$dir/err")"; }
# Does the daemon know METHOD? (ENOMETHOD in hipctl's message otherwise.)
no_method() { grep -q "ENOMETHOD" "$dir/err"; }

# ----------------------------------------------------- without a daemon
hc version 0 --version && has version "hipctl "
hc help 0 --help && has help "log-level"
hc no-command 2
hc unknown-command 2 frobnicate && has_err unknown-command "unknown command"
hc bad-timeout 2 --timeout soon status
hc bad-kill 2 kill abc && has_err bad-kill "not a session id"
hc bad-level 2 log-level loud
hc run-usage 2 run
hc run-bad-arg 2 run x.hip k q:5 && has_err run-bad-arg "argument 1"
hc cmd-help 0 run --help && has cmd-help "buf:TYPE:COUNT"
hc no-daemon 3 status && has_err no-daemon "ECONNECT"

# ------------------------------------------------------------- a daemon
"$hipd" --socket "$sock" --socket-mode 0666 --devices cpu \
  --cache-dir "$dir/cache" >"$dir/hipd.log" 2>&1 &
pid=$!
i=0
until "$hipctl" --socket "$sock" status >/dev/null 2>&1; do
  i=$((i + 1))
  if [ $i -gt 200 ] || ! kill -0 $pid 2>/dev/null; then
    echo "check_hipctl: the daemon did not start:"
    cat "$dir/hipd.log"
    exit 1
  fi
  sleep 0.1
done

cat >"$dir/vecadd.hip" <<'HIP'
extern "C" __global__ void vecadd(const float *a, const float *b, float *c,
                                  int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] + b[i];
}
HIP

hc status 0 status && has status "hipd 0.1" && has status "DEV" && has status "cpu"
hc status-json 0 --json status &&
  js status-json 'd["daemon"]["name"] == "hipd" and d["devices"][0]["kind"] == "cpu" and d["devices"][0]["mem_total"] > 0 and "stats" in d'
hc devices 0 devices && has devices "host-" && has devices "TOTAL"
hc devices-json 0 devices --json &&
  js devices-json 'd[0]["device"] == 0 and d[0]["arch"].startswith("host") and d[0]["mem_total"] >= d[0]["mem_free"] > 0'

# run: a vector add from a file, its output checked.
hc run 0 run "$dir/vecadd.hip" vecadd buf:f32:1000=iota buf:f32:1000=1 \
  buf:f32:1000 i32:1000 --print 3:4 --expect 3=1,2,3,4 &&
  has run "1 2 3 4 ... (4 of 1000)" && has run "as expected"
hc run-json 0 --json run "$dir/vecadd.hip" vecadd buf:f32:8=iota \
  buf:f32:8=0.5 buf:f32:8 i32:8 --print 3 --block 4 &&
  js run-json 'd["outputs"][0]["values"] == [0.5 + i for i in range(8)] and d["grid"] == [2, 1, 1] and d["compile"]["cache"] in ("miss", "memory", "disk", "waited") and d["status"] == 0'
hc run-check 5 run "$dir/vecadd.hip" vecadd buf:f32:16=iota buf:f32:16=iota \
  buf:f32:16 i32:16 --expect 3=0,2,4,7 && has_err run-check "element 3 is 6, expected 7"
hc run-nokernel 1 run "$dir/vecadd.hip" nosuch buf:f32:4 && has_err run-nokernel "run nosuch: E"
hc run-int 0 run "$dir/vecadd.hip" vecadd buf:f32:3=1,2,3 buf:f32:3=10 buf:f32:3 \
  i32:3 --expect 3=11,12,13
# What the kernel prints comes back with the run (kernel.output).
cat >"$dir/say.hip" <<'HIP'
extern "C" __global__ void say(int n)
{
  if (threadIdx.x == 0)
    printf("block %d of %d says hi\n", (int)blockIdx.x, n);
}
HIP
hc run-printf 0 run "$dir/say.hip" say i32:2 --grid 2 &&
  has run-printf "block 0 of 2 says hi" && has run-printf "block 1 of 2 says hi"
hc run-printf-json 0 --json run "$dir/say.hip" say i32:1 &&
  js run-printf-json 'd["printed"] == "block 0 of 1 says hi\n" and d["printed_dropped"] == 0'

# ir: a fixture of tests/codegen/, generated and run.
hc ir 0 ir "$src/tests/codegen/vec_add.ir.json" && has ir "__global__ void vec_add"
hc ir-json 0 --json ir "$src/tests/codegen/vec_add.ir.json" &&
  js ir-json '"vec_add(" in d["generated"]["source"] and [a["role"] for a in d["generated"]["arguments"]][:2] == ["array", "length"]'
hc ir-run 0 ir "$src/tests/codegen/vec_add.ir.json" --run buf:f32:100=iota \
  buf:f32:100=iota buf:f32:100 i32:100 --print 3:5 --expect 3=0,2,4,6,8 &&
  has ir-run "0 2 4 6 8"
hc ir-run-json 0 --json ir "$src/tests/codegen/vec_add.ir.json" --run \
  buf:f32:4=1 buf:f32:4=2 buf:f32:4 i32:4 --print 3 &&
  js ir-run-json 'd["outputs"][0]["values"] == [3.0] * 4 and d["name"] == "vec_add"'
hc ir-source-run 0 ir "$src/tests/codegen/vec_add.ir.json" --source --run \
  buf:f32:2=1 buf:f32:2=1 buf:f32:2 i32:2 --expect 3=2,2 &&
  has ir-source-run "__global__ void vec_add" && has ir-source-run "as expected"
hc ir-bad-args 2 ir "$src/tests/codegen/vec_add.ir.json" --run buf:f32:4 i32:4

# cache: prewarm twice (a miss or a hit, then a hit), stats, list, clear.
hc prewarm 0 cache prewarm "$dir/vecadd.hip" --device all --options "-DX=1" &&
  has prewarm "vecadd" && has prewarm "miss"
hc prewarm-json 0 --json cache prewarm "$dir/vecadd.hip" --options "-DX=1" &&
  js prewarm-json 'd["results"][0]["hit"] is True and d["results"][0]["kernel"] == "vecadd" and len(d["results"][0]["key"]) == 64'
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["key"])' "$dir/out")
hc prewarm-lang 1 cache prewarm "$dir/vecadd.hip" --lang cobol && has_err prewarm-lang "cobol"
hc cache-stats 0 cache stats && has cache-stats "misses"
hc cache-stats-json 0 --json cache stats && js cache-stats-json 'd["misses"] >= 1 and d["entries"] >= 1'
"$hipctl" --socket "$sock" cache list >"$dir/out" 2>"$dir/err"
if no_method; then
  skip "cache list: this daemon has no cache.list (the admin methods are not merged)"
else
  hc cache-list 0 cache list && has cache-list "$key"
  hc cache-list-json 0 --json cache list &&
    js cache-list-json "any(e['key'] == '$key' and e['bytes'] > 0 for e in d)"
fi
# as_nobody ARGS...: hipctl as a second uid (stdout, stderr as hc's).
as_nobody() {
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
    "$hipctl" --socket "$sock" "$@" >"$dir/out" 2>"$dir/err"
}
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1 &&
  id nobody >/dev/null 2>&1; then
  second_uid=1
  as_nobody cache clear
  rc=$?
  [ $rc -eq 4 ] || fail "cache clear as nobody: exited $rc, not 4: $(cat "$dir/err")"
  has_err cache-clear-eperm "cache clear: EPERM: "
  # The cache's keys tell which sources were compiled: admins only.
  as_nobody cache list
  rc=$?
  [ $rc -eq 4 ] || fail "cache list as nobody: exited $rc, not 4: $(cat "$dir/err")"
  has_err cache-list-eperm "cache list: EPERM: "
else
  second_uid=
  skip "EPERM: not root, or no setpriv, or no user nobody"
fi
hc cache-clear 0 cache clear && has cache-clear "cleared"
hc cache-clear-json 0 --json cache clear && js cache-clear-json 'd == {"cleared": True}'

# ------------------------------------------------ the admin methods
"$hipctl" --socket "$sock" log-level >"$dir/out" 2>"$dir/err"
if no_method; then
  skip "sessions, kill, metrics, log-level, status's node-wide figures: this daemon has no admin methods (branch admin not merged)"
else
  # A session that stays: a raw client that says hello and waits.
  python3 - "$sock" >"$dir/sleeper" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
name = b"sleeper"
s.sendall(bytes([0x94, 0, 1, 0xa5]) + b"hello" + bytes([0x92, 1, 0xa0 | len(name)]) + name)
while s.recv(65536):
    pass
print("closed", flush=True)
PY
  sleeper=$!
  i=0
  until hc sessions-json 0 --json sessions && python3 -c 'import json,sys; sys.exit(0 if any(s["client"] == "sleeper" for s in json.load(open(sys.argv[1]))) else 1)' "$dir/out"; do
    i=$((i + 1))
    [ $i -gt 100 ] && { fail "sessions: the sleeper's session never showed"; break; }
    sleep 0.1
  done
  js sessions-json 'all(k in s for s in d for k in ("id", "pid", "uid", "user", "client", "tenant", "devices", "streams", "kernels_launched", "busy_ns", "age_ms"))'
  sid=$(python3 -c 'import json,sys; print([s["id"] for s in json.load(open(sys.argv[1])) if s["client"] == "sleeper"][0])' "$dir/out")
  hc sessions 0 sessions && has sessions "CLIENT" && has sessions "sleeper"
  hc kill 0 kill "$sid" && has kill "killed session $sid"
  wait "$sleeper"
  grep -q closed "$dir/sleeper" || fail "kill: the sleeper's connection stayed open"
  sleeper=
  hc kill-gone 1 kill "$sid" && has_err kill-gone "kill $sid: ENOENT"
  hc kill-json 1 --json kill 999999 && js kill-json 'd["killed"] == [] and d["failed"][0]["code"] == "ENOENT"'
  hc metrics 0 metrics && has metrics "hipd_build_info"
  hc metrics-json 0 --json metrics && js metrics-json '"hipd_uptime_seconds" in d["text"]'
  hc log-level 0 log-level && has log-level "info"
  hc log-level-set 0 --json log-level debug && js log-level-set 'd == {"level": "debug"}'
  hc log-level-back 0 log-level info && has log-level-back "info"
  if [ -n "$second_uid" ]; then
    as_nobody log-level debug
    rc=$?
    [ $rc -eq 4 ] || fail "log-level as nobody: exited $rc, not 4: $(cat "$dir/err")"
    has_err log-level-eperm "log-level debug: EPERM: "
  fi
  hc status-human 0 status && has status-human "accepted since start), tenants " && has status-human "KERNELS"
  hc status-stats 0 --json status &&
    js status-stats 'd["stats"]["isolation"] == "uid" and d["devices"][0]["kernels_launched"] >= 1'
fi

# The daemon gone: exit status 3 for a command that needs it.
kill "$pid" && wait "$pid" 2>/dev/null
pid=
hc daemon-gone 3 devices

echo "check_hipctl: $fails failed, $skips skipped"
[ "$fails" -eq 0 ]
