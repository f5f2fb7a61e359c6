#!/bin/bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2317 # functions run by wait_for and the trap
# tests/check_slurm.sh: hipd's grants under a real Slurm (issue 25).
#
# The test makes a one-node cluster of its own in a temporary directory:
# munged (its own key and socket), slurmctld and slurmd (their own ports,
# state and spool directories, configuration: SLURM_CONF), whose Prolog
# and Epilog are contrib/slurm/hipd-prolog and hipd-epilog, and a hipd
# (CPU devices 0 and 1, --allow-users root: a user reaches it only through
# a grant). The node's two "GPUs" are gres/gpu over two character devices
# the test makes, so that Slurm allocates them and sets SLURM_JOB_GPUS as
# for real GPUs. Jobs are srun's of the test users hipd_slurm_a and
# hipd_slurm_b, which run tests/grant_client. Checked:
#   exclusive mode: B, who has no job, is refused (EPERM) while A's job,
#     which asked for one GPU, reaches hipd and sees exactly the device
#     Slurm gave it, allocates and runs kernels there; when the job ends
#     its grant is gone, the device's memory is back to zero, the epilog
#     logged its usage (2 kernels), and A is refused again;
#   shared mode (hipd shares device 0 between jobs, 96 KiB each): a job of
#     A and one of B at once, each gets its first 64 KiB and EQUOTA for
#     the second (the message names its grant); the device holds both
#     jobs' 128 KiB; when they end, zero, and no grant is left;
#   scancel: a cancelled job's grant is revoked and its memory freed; a
#     process it left behind (setsid, outside Slurm's tracking) keeps its
#     session until the epilog's revoke closes it ("access revoked: ").
# Everything it starts is stopped on exit (trap). Skipped (77) without
# root, python3, slurm-wlm or munge. Run by make check from the build
# directory.
src=${srcdir:-$(dirname "$0")/..}
src=$(cd "$src" && pwd)
build=$(pwd)
hipd=${HIPD_BIN:-$build/hipd}
hipctl=$build/hipctl
client=$build/tests/grant_client
: "${HIPD_CPU_RUNNER:=$build/hipd-cpu-runner}"
: "${HIPD_COMPILE_HELPER:=$build/hipd-compile}"
: "${HIPD_CPU_HEADER:=$src/daemon/drivers/cpu/hipd_cpu_device.h}"
export HIPD_CPU_RUNNER HIPD_COMPILE_HELPER HIPD_CPU_HEADER
user_a=hipd_slurm_a
user_b=hipd_slurm_b
node=$(hostname -s)
fails=0

skip() {
  echo "check_slurm: SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (munged, slurmd and test users)"
for p in munged slurmctld slurmd srun scancel squeue sinfo python3 runuser \
  setsid mknod useradd; do
  command -v "$p" >/dev/null 2>&1 ||
    skip "$p is not installed (slurm-wlm, munge: scripts/deps.sh)"
done
[ -x "$client" ] || skip "$client is not built"

fail() {
  echo "check_slurm: FAIL: $*"
  fails=$((fails + 1))
}
note() { echo "check_slurm: $*"; }

# Under /tmp, so that the test users reach the sockets.
T=$(mktemp -d /tmp/check_slurm.XXXXXX) || exit 1
chmod 755 "$T"
pids=()
cleanup() {
  # Jobs first (their epilogs talk to hipd, their slurmstepd to slurmd and
  # munged), then the cluster, then hipd.
  : >"$T/never" 2>/dev/null # held clients (a stray one too) let go
  if [ -n "${SLURM_CONF:-}" ]; then
    scancel --quiet -p test 2>/dev/null
    for _ in $(seq 75); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null
  done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  # A slurmstepd of this cluster still there (it daemonizes: no child of
  # ours) is found by its SLURM_CONF, and ended.
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$T/slurm.conf" &&
      kill -9 "${p#/proc/}" 2>/dev/null
  done
  if [ "$fails" -gt 0 ]; then
    for f in hipd.log slurmctld.log slurmd.log munged.log prolog.err usage.log; do
      [ -f "$T/$f" ] && { echo "--- $f (last 30 lines)"; tail -n 30 "$T/$f"; }
    done
  fi
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# wait_for SECONDS COMMAND...: until it succeeds.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -ge "$end" ] && return 1
    sleep 0.2
  done
}

for u in "$user_a" "$user_b"; do
  id "$u" >/dev/null 2>&1 || useradd -M -N -s /usr/sbin/nologin "$u" ||
    skip "cannot make the test user $u"
done

# --------------------------------------------------------------- munged
mkdir -m 755 "$T/munge"
head -c 1024 /dev/urandom >"$T/munge/munge.key"
chmod 400 "$T/munge/munge.key"
munged -F -f --socket="$T/munge/munge.sock" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" \
  --seed-file="$T/munge/munged.seed" >/dev/null 2>&1 &
pids+=($!)
wait_for 10 test -S "$T/munge/munge.sock" || { fail "munged did not start"; exit 1; }

# ----------------------------------------------------------------- hipd
sock=$T/hipd.sock
"$hipd" --no-config --socket "$sock" --socket-mode 0666 --devices cpu \
  --cpu-devices 2 --allow-users root --cache-dir "$T/cache" \
  >"$T/hipd.log" 2>&1 &
pids+=($!)
export HIPD_SOCKET=$sock
wait_for 20 "$hipctl" status >/dev/null 2>&1 || { fail "hipd did not start"; exit 1; }

# ---------------------------------------------------------------- Slurm
read -r port_ctld port_d <<<"$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')"
mkdir -p "$T/ctld" "$T/spool"
mkdir -m 1777 "$T/out" # what the jobs write
if ! mknod "$T/gpu0" c 1 3 || ! mknod "$T/gpu1" c 1 5; then
  skip "cannot make the character devices Slurm's gres/gpu needs"
fi
cat >"$T/hipd-slurm.conf" <<EOF
HIPD_SLURM_MODE=exclusive
HIPD_SOCKET=$sock
HIPCTL=$hipctl
HIPD_SLURM_USAGE_LOG=$T/usage.log
EOF
for s in prolog epilog; do
  printf '#!/bin/sh\nHIPD_SLURM_CONF=%s exec %s "$@" 2>>%s\n' \
    "$T/hipd-slurm.conf" "$src/contrib/slurm/hipd-$s" "$T/prolog.err" >"$T/$s"
  chmod 755 "$T/$s"
done
cat >"$T/slurm.conf" <<EOF
ClusterName=hipdtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port_ctld
SlurmdPort=$port_d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/ctld
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
Prolog=$T/prolog
Epilog=$T/epilog
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=5 State=UP
EOF
echo "NodeName=$node Name=gpu File=$T/gpu[0-1]" >"$T/gres.conf"
export SLURM_CONF=$T/slurm.conf
slurmctld -D -c -i -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$node" >/dev/null 2>&1 &
pids+=($!)
node_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
wait_for 30 node_idle || { fail "the node did not come up idle"; exit 1; }
note "cluster up: slurmctld :$port_ctld, slurmd :$port_d, hipd $sock"

# as USER CMD...: a command of a test user, with the cluster's and hipd's
# sockets in its environment (srun passes them to the job).
as() {
  local u=$1
  shift
  (cd /tmp && runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" \
    HIPD_SOCKET="$sock" "$@")
}
# The id of the job named $1 (one of the test's), or nothing.
job_id() { squeue -h -n "$1" -o %i 2>/dev/null | head -n 1; }
held() { # device $1's held bytes (hipctl status --json)
  "$hipctl" status --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
print([x["mem_held"] for x in d["devices"] if x["device"] == int(sys.argv[1])][0])' "$1"
}
grants_n() { "$hipctl" grants --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'; }
grant_field() { # LABEL KEY
  "$hipctl" grants --json | python3 -c 'import json, sys
g = [x for x in json.load(sys.stdin) if x["label"] == sys.argv[1]]
print(g[0][sys.argv[2]] if g else "none")' "$1" "$2"
}
no_grants() { [ "$(grants_n)" = 0 ]; }
held_zero() { [ "$(held 0)" = 0 ] && [ "$(held 1)" = 0 ]; }
holding() { grep -q '^holding' "$1" 2>/dev/null; }

# ------------------------------------------------------ exclusive GPUs
as "$user_b" "$client" >"$T/b0.out" 2>&1
rc=$?
[ "$rc" = 4 ] || fail "B without a job: exit $rc, not 4 (EPERM): $(cat "$T/b0.out")"

as "$user_a" srun -J excl --gres=gpu:1 -n1 "$client" --kernel --alloc -1:65536 \
  --hold "$T/release1" >"$T/a1.out" 2>&1 &
srun1=$!
if wait_for 30 holding "$T/a1.out"; then
  job=$(job_id excl)
  note "exclusive: A's job $job: $(head -n 3 "$T/a1.out" | tr '\n' ' ')"
  gpus=$(scontrol show job -d "$job" | sed -n 's/.*GRES=gpu[^(]*(IDX:\([0-9,-]*\)).*/\1/p' | head -n 1)
  grep -q "^devices 1: $gpus\$" "$T/a1.out" ||
    fail "A's job sees '$(head -n 1 "$T/a1.out")', not Slurm's GPU $gpus alone"
  grep -q '^alloc .* 65536: OK' "$T/a1.out" || fail "A's job could not allocate"
  grep -q '^kernel: OK' "$T/a1.out" || fail "A's job could not run a kernel"
  [ "$(grant_field "slurm-$job" sessions)" = 1 ] ||
    fail "grant slurm-$job: sessions $(grant_field "slurm-$job" sessions), not 1"
  [ "$(held "$gpus")" -ge 65536 ] || fail "device $gpus holds $(held "$gpus") bytes"
  as "$user_b" "$client" >"$T/b1.out" 2>&1
  rc=$?
  [ "$rc" = 4 ] || fail "B during A's job: exit $rc, not 4: $(cat "$T/b1.out")"
  grep -q "is not allowed by --allow-users root" "$T/b1.out" ||
    fail "B's refusal does not name the rule: $(cat "$T/b1.out")"
else
  fail "A's job did not reach hipd: $(cat "$T/a1.out")"
fi
: >"$T/release1"
wait "$srun1" || fail "A's job failed: $(cat "$T/a1.out")"
wait_for 15 no_grants || fail "A's grant is left after the job: $("$hipctl" grants)"
wait_for 10 held_zero || fail "memory held after the job: $(held 0) $(held 1)"
wait_for 10 grep -q "revoked 'slurm-${job:-x}' (uid $(id -u "$user_a")).* 2 kernels" "$T/usage.log" ||
  fail "the epilog's usage line of job $job: $(cat "$T/usage.log" 2>&1)"
as "$user_a" "$client" >"$T/a2.out" 2>&1
rc=$?
[ "$rc" = 4 ] || fail "A after its job: exit $rc, not 4: $(cat "$T/a2.out")"

# ---------------------------------------- shared device, per-job quotas
cat >>"$T/hipd-slurm.conf" <<EOF
HIPD_SLURM_MODE=shared
HIPD_SLURM_DEVICES=0
HIPD_SLURM_QUOTA=96K
EOF
for u in "$user_a" "$user_b"; do
  as "$u" srun -J "shared-$u" -n1 "$client" --alloc 0:65536 --alloc 0:65536 \
    --hold "$T/release2" >"$T/$u.out" 2>&1 &
  eval "srun_$u=\$!"
done
if wait_for 30 holding "$T/$user_a.out" && wait_for 30 holding "$T/$user_b.out"; then
  for u in "$user_a" "$user_b"; do
    job=$(job_id "shared-$u")
    grep -q '^alloc 0 65536: OK' "$T/$u.out" || fail "$u's job: first alloc: $(cat "$T/$u.out")"
    grep -q "^alloc 0 65536: EQUOTA: .*grant 'slurm-$job''s quota of 98304 bytes" "$T/$u.out" ||
      fail "$u's job: second alloc not EQUOTA of its grant: $(cat "$T/$u.out")"
    [ "$(grant_field "slurm-$job" mem_held)" = 65536 ] ||
      fail "grant slurm-$job holds $(grant_field "slurm-$job" mem_held)"
  done
  [ "$(grants_n)" = 2 ] || fail "$(grants_n) grants during the two jobs, not 2"
  [ "$(held 0)" = 131072 ] || fail "device 0 holds $(held 0) bytes, not the jobs' 131072"
  note "shared: two jobs on device 0: $(held 0) bytes held, quotas enforced"
else
  fail "the shared jobs did not both reach hipd: $(cat "$T/$user_a.out" "$T/$user_b.out")"
fi
: >"$T/release2"
eval "wait \$srun_$user_a" || fail "A's shared job failed"
eval "wait \$srun_$user_b" || fail "B's shared job failed"
wait_for 15 no_grants || fail "grants left after the shared jobs: $("$hipctl" grants)"
wait_for 10 held_zero || fail "memory held after the shared jobs: $(held 0)"

# ----------------------------------------------------- scancel, a stray
as "$user_a" srun -J cancel -n1 bash -c "setsid -f '$client' --alloc 0:4096 \
  --hold '$T/never' >'$T/out/stray.out' 2>&1; exec '$client' --alloc 0:65536 \
  --hold '$T/never'" >"$T/c.out" 2>&1 &
srun3=$!
if wait_for 30 holding "$T/c.out" && wait_for 10 holding "$T/out/stray.out"; then
  job=$(job_id cancel)
  [ "$(grant_field "slurm-$job" sessions)" = 2 ] ||
    fail "grant slurm-$job: $(grant_field "slurm-$job" sessions) sessions, not 2"
  scancel "$job"
  wait "$srun3" && fail "srun of a cancelled job exited 0"
  job_gone() { [ -z "$(squeue -h -j "$job" 2>/dev/null)" ]; }
  wait_for 20 job_gone || fail "job $job is still there after scancel"
  wait_for 15 no_grants || fail "the cancelled job's grant is left: $("$hipctl" grants)"
  wait_for 10 held_zero || fail "memory held after scancel: $(held 0)"
  wait_for 10 grep -q '^ended: EDISCONNECTED' "$T/out/stray.out" ||
    fail "the stray process's session was not closed: $(cat "$T/out/stray.out")"
  grep -q "session closed: access revoked: grant 'slurm-$job' ended (revoked by uid 0 (root))" \
    "$T/hipd.log" || fail "no 'access revoked' close in hipd's log"
  note "scancel: job $job's grant revoked, its stray session closed"
else
  fail "the job to cancel did not reach hipd: $(cat "$T/c.out" "$T/out/stray.out" 2>&1)"
fi

if [ "$fails" -gt 0 ]; then
  echo "check_slurm: $fails failures"
  exit 1
fi
echo "check_slurm: PASS"
exit 0
