#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_metrics.sh: --metrics-listen, as Prometheus would use it.
#
# For each of --isolation uid (the default: a listener and tenant workers)
# and --isolation none (one process), a real hipd on the CPU device with
# --metrics-listen 127.0.0.1:PORT (a free port, found by trying):
# - curl -fsS scrapes /metrics; promtool check metrics prints nothing and
#   exits 0; the expected families are there;
# - after client work (examples/vecadd: a compile, transfers, a launch)
#   the counters have moved;
# - /other is 404, POST is 405, HEAD is 200;
# - the metrics process runs as the workers' account (hipd when root, else
#   our own), without capabilities, with no_new_privs and a seccomp filter;
# - killed, it is logged and restarted, and scraping works again;
# - with the listener stopped (SIGSTOP), a scrape is a 503, not a hang;
# - (uid only) 8 connections from 127.0.0.1 that send a header a byte a
#   second hold every slot of that address until the header deadline
#   (5 s), and a scrape gets through again soon after;
# - a port in use, or a bad address, refuses the start with a message.
# Skipped (77) without curl or promtool, or in a build without
# libmicrohttpd. Run by make check from the build directory.
set -u

hipd=${HIPD_BIN:-$(pwd)/hipd}
vecadd=$(pwd)/examples/vecadd
for tool in curl promtool; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check_metrics: SKIP: $tool is not installed (Debian: curl, prometheus)"
    exit 77
  fi
done
tmp=$(mktemp -d "${HIPD_TEST_TMP:-/tmp}/check_metrics.XXXXXX") || exit 1
pid=
slow=
cleanup()
{
  if [ -n "$slow" ]; then
    # shellcheck disable=SC2086 # a list of pids
    kill $slow 2>/dev/null
  fi
  if [ -n "$pid" ]; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail()
{
  echo "check_metrics: FAIL ($mode): $*"
  fails=$((fails + 1))
}

# Wait up to $2 tenths of a second for the log $1 to contain $3.
log_wait()
{
  n=0
  while [ "$n" -lt "$2" ]; do
    grep -qF -- "$3" "$1" && return 0
    sleep 0.1
    n=$((n + 1))
  done
  return 1
}

# The sum of every sample of family $1 in the scrape $2.
family_sum()
{
  awk -v f="$1" '$1 == f || index($1, f "{") == 1 { s += $NF } END { printf "%.0f\n", s }' "$2"
}

# The HTTP status of curl's request $@.
status_of()
{
  curl -sS -o /dev/null -w '%{http_code}' "$@"
}

# Start hipd in --isolation $mode on a free port: sets pid, port, log.
start()
{
  base=$(( ($$ % 2000) * 10 + 30000 ))
  for try in 0 1 2 3 4 5 6 7 8 9; do
    port=$((base + try))
    log=$tmp/$mode.$try.log
    "$hipd" -s "$tmp/$mode.sock" --devices cpu --cache-dir "$tmp/cache-$mode" \
      --isolation "$mode" --log-level debug \
      --metrics-listen "127.0.0.1:$port" >"$log" 2>&1 &
    pid=$!
    n=0
    while [ "$n" -lt 200 ]; do
      if grep -qF "metrics process ready" "$log"; then
        return 0
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"
        pid=
        break
      fi
      sleep 0.1
      n=$((n + 1))
    done
    if grep -q "built without libmicrohttpd" "$log"; then
      echo "check_metrics: SKIP: this hipd was built without libmicrohttpd"
      exit 77
    fi
    grep -qF "address in use" "$log" || break
  done
  echo "check_metrics: hipd --isolation $mode did not start its metrics process:"
  cat "$log"
  exit 1
}

# The pid of the metrics process the log names last.
metrics_pid()
{
  sed -n 's/.*metrics process ready (pid \([0-9]*\)).*/\1/p' "$log" | tail -n 1
}

if [ "$(id -u)" -eq 0 ]; then
  want_uid=$(id -u hipd 2>/dev/null) || {
    echo "check_metrics: SKIP: running as root without the hipd account"
    exit 77
  }
else
  want_uid=$(id -u)
fi

for mode in uid none; do
  start
  url=http://127.0.0.1:$port/metrics
  echo "check_metrics: $mode: hipd pid $pid, metrics at $url"

  # Scrape, lint, families.
  curl -fsS "$url" >"$tmp/m1" || fail "the first scrape failed"
  promtool check metrics <"$tmp/m1" >"$tmp/lint" 2>&1
  rc=$?
  echo "check_metrics: $mode: promtool check metrics: exit $rc, $(wc -l <"$tmp/lint") lines of output"
  cat "$tmp/lint"
  if [ "$rc" -ne 0 ] || [ -s "$tmp/lint" ]; then
    fail "promtool check metrics complains"
  fi
  # The families of the admin spec (admin/prom.c renders them).
  for family in hipd_build_info hipd_uptime_seconds hipd_sessions hipd_tenants \
    hipd_device_info hipd_device_memory_total_bytes \
    hipd_device_memory_held_bytes hipd_device_buffers \
    hipd_device_kernels_launched_total hipd_device_busy_seconds_total \
    hipd_device_transfer_bytes_total hipd_device_faults_total \
    hipd_device_lost hipd_requests_total hipd_compiles_total \
    hipd_cache_hits_total hipd_cache_misses_total hipd_cache_entries \
    hipd_cache_bytes hipd_tenant_mps_active_threads_percent \
    hipd_tenant_mps_device_memory_limit_bytes; do
    grep -q "^# TYPE $family " "$tmp/m1" || fail "no family $family in the scrape"
  done

  grep -q "^hipd_build_info{.*isolation=\"$mode\"" "$tmp/m1" ||
    fail "hipd_build_info does not say isolation=\"$mode\""

  # Client work moves the counters.
  HIPD_SOCKET=$tmp/$mode.sock "$vecadd" "$tmp/$mode.sock" >"$tmp/vecadd.out" 2>&1 ||
    { fail "examples/vecadd failed"; cat "$tmp/vecadd.out"; }
  curl -fsS "$url" >"$tmp/m2" || fail "the scrape after the work failed"
  promtool check metrics <"$tmp/m2" >"$tmp/lint2" 2>&1 && ! [ -s "$tmp/lint2" ] ||
    { fail "promtool check metrics complains about the scrape after the work:"; cat "$tmp/lint2"; }
  # The device (in uid mode the listener holds none: it knows the devices
  # from its workers' reports) and vecadd's tenant, our uid.
  grep -q '^hipd_device_info{device="0",device_name="[^"]*",kind="cpu"} 1$' "$tmp/m2" ||
    fail "no hipd_device_info for the CPU device after the work"
  grep -q "^hipd_tenant_kernels_launched_total{uid=\"$(id -u)\"" "$tmp/m2" ||
    fail "no hipd_tenant_kernels_launched_total for uid $(id -u) after the work"
  for counter in hipd_requests_total hipd_device_kernels_launched_total \
    hipd_device_transfer_bytes_total hipd_compiles_total; do
    a=$(family_sum "$counter" "$tmp/m1")
    b=$(family_sum "$counter" "$tmp/m2")
    echo "check_metrics: $mode: $counter $a -> $b"
    [ "$b" -gt "$a" ] || fail "$counter did not move after client work ($a -> $b)"
  done

  # Paths and methods.
  s=$(status_of "http://127.0.0.1:$port/other")
  [ "$s" = 404 ] || fail "/other answered $s, not 404"
  s=$(status_of -X POST "$url")
  [ "$s" = 405 ] || fail "POST /metrics answered $s, not 405"
  s=$(status_of -I "$url")
  [ "$s" = 200 ] || fail "HEAD /metrics answered $s, not 200"
  curl -fsS -D "$tmp/headers" -o /dev/null "$url"
  grep -qi '^Content-Type: text/plain; version=0.0.4; charset=utf-8' "$tmp/headers" ||
    fail "the Content-Type is not Prometheus's text format: $(grep -i content-type "$tmp/headers")"

  # Slow headers: as many connections as one address may hold (8,
  # MAX_PER_ADDRESS of metrics/http.c), each sending a request's header a
  # byte a second and never finishing it. The idle timeout (10 s) restarts
  # with every byte; the header deadline (5 s from the accept) does not: the
  # 8 are closed, and a scrape from the same address gets through again
  # within a few seconds. Once: the metrics process is the same in both
  # modes.
  if [ "$mode" = uid ]; then
    for i in 1 2 3 4 5 6 7 8; do
      bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        : >"$2"
        for c in G E T " " / m e t r i c s " " H T T P / 1 . 1 x x x x x x; do
          printf %s "$c" >&3 2>/dev/null || exit 0
          sleep 1
        done' slow "$port" "$tmp/slow.$i" 2>/dev/null &
      slow="$slow $!"
    done
    n=0
    while [ "$n" -lt 50 ] && [ "$(find "$tmp" -name 'slow.*' | wc -l)" -lt 8 ]; do
      sleep 0.1
      n=$((n + 1))
    done
    sleep 0.5
    t0=$(date +%s)
    if curl -fsS -m 2 -o /dev/null "$url" 2>/dev/null; then
      fail "a scrape got through while 8 slow connections held the address's slots (the test proves nothing)"
    fi
    ok=
    while [ $(($(date +%s) - t0)) -lt 12 ]; do
      if curl -fsS -m 2 -o /dev/null "$url" 2>/dev/null; then
        ok=$(($(date +%s) - t0))
        break
      fi
      sleep 0.5
    done
    if [ -n "$ok" ]; then
      echo "check_metrics: $mode: a scrape got through ${ok} s after 8 slow-header connections took the address's slots"
    else
      fail "8 connections sending a header a byte a second still keep scrapes out after 12 s"
    fi
    # shellcheck disable=SC2086 # a list of pids
    kill $slow 2>/dev/null
    # shellcheck disable=SC2086
    wait $slow 2>/dev/null
    slow=
  fi

  # Who the metrics process is.
  mp=$(metrics_pid)
  st=/proc/$mp/status
  # real, effective, saved and file-system uid: all the same
  uid=$(awk '/^Uid:/ { print ($2 == $3 && $2 == $4 && $2 == $5) ? $2 : "mixed" }' "$st")
  echo "check_metrics: $mode: metrics process $mp: $(grep -E '^(Uid|CapEff|NoNewPrivs|Seccomp):' "$st" | tr '\t\n' '  ')"
  [ "$uid" = "$want_uid" ] || fail "the metrics process runs as uid $uid, not $want_uid"
  grep -q '^CapEff:[[:space:]]*0000000000000000$' "$st" || fail "the metrics process holds capabilities"
  grep -q '^NoNewPrivs:[[:space:]]*1$' "$st" || fail "the metrics process lacks no_new_privs"
  if ! grep -qF "ASan build: the metrics process" "$log"; then
    grep -q '^Seccomp:[[:space:]]*2$' "$st" || fail "the metrics process has no seccomp filter"
  fi

  # Killed, it comes back.
  kill -KILL "$mp"
  log_wait "$log" 100 "metrics process (pid $mp) was killed by signal 9" ||
    fail "the listener did not log the metrics process's death"
  n=0
  while [ "$n" -lt 150 ] && [ "$(metrics_pid)" = "$mp" ]; do
    sleep 0.1
    n=$((n + 1))
  done
  mp2=$(metrics_pid)
  if [ "$mp2" = "$mp" ]; then
    fail "the metrics process was not restarted"
  else
    echo "check_metrics: $mode: metrics process restarted: pid $mp -> $mp2"
    curl -fsS "$url" >"$tmp/m3" || fail "the scrape after the restart failed"
    grep -q "^hipd_uptime_seconds " "$tmp/m3" || fail "the scrape after the restart has no hipd_uptime_seconds"
  fi
  kill -0 "$pid" 2>/dev/null || fail "hipd exited when its metrics process was killed"

  # A listener that does not answer: 503 after the timeout, not a hang.
  if [ "$mode" = none ]; then
    kill -STOP "$pid"
    s=$(status_of -m 20 "$url")
    kill -CONT "$pid"
    [ "$s" = 503 ] || fail "a scrape of a stopped listener answered $s, not 503"
  fi

  # The port is taken now: a second hipd refuses to start, and says why.
  "$hipd" -s "$tmp/second.sock" --devices cpu --cache-dir '' --isolation "$mode" \
    --metrics-listen "127.0.0.1:$port" >"$tmp/second.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "a second hipd on port $port started"
  grep -qF -- "--metrics-listen 127.0.0.1:$port: address in use" "$tmp/second.log" ||
    { fail "no 'address in use' message for a taken port:"; cat "$tmp/second.log"; }

  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  pid=
  [ "$rc" -eq 0 ] || fail "hipd exited $rc at SIGTERM"
  mp=$(metrics_pid)
  ! kill -0 "$mp" 2>/dev/null || fail "the metrics process $mp outlived hipd"
done

mode=options
for bad in nonsense 127.0.0.1 127.0.0.1:0 127.0.0.1:70000 localhost:9464 '[::1]9464' 1.2.3.4.5:80; do
  "$hipd" -s "$tmp/bad.sock" --devices cpu --metrics-listen "$bad" >"$tmp/bad.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || fail "--metrics-listen '$bad' exited $rc, not 2"
  grep -qF -- "--metrics-listen '$bad'" "$tmp/bad.log" ||
    { fail "--metrics-listen '$bad': the message does not name it:"; cat "$tmp/bad.log"; }
done
echo "check_metrics: a bad address: $(cat "$tmp/bad.log")"

if [ "$fails" -ne 0 ]; then
  echo "check_metrics: $fails failures"
  exit 1
fi
echo "check_metrics: PASS"
