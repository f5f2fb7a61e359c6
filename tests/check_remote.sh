#!/bin/bash
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2317 # functions run by wait_for and the trap
# tests/check_remote.sh: a node's hipd used from elsewhere through SSH's
# forwarding of its Unix socket (docs/REMOTE.md, issue 25).
#
# The test starts a real sshd of its own (its host key, its port on
# 127.0.0.1, its configuration: key login for one test user, no password,
# no PAM) and a hipd (the CPU device) as root, then, as a client would,
# `ssh -N -L LOCAL.sock:hipd.sock` to the test user. Checked:
#   - hipctl and libhipd reach hipd through the local socket with
#     HIPD_SOCKET alone (hipctl status; examples/hello end to end);
#   - hipd sees the SSH login's user, not the client's (root here): the
#     session hipctl lists for itself through the forward is the test
#     user's uid;
#   - what docs/REMOTE.md says does not cross: a shared buffer (its memfd
#     travels as SCM_RIGHTS, which SSH drops) fails with hipd's clear
#     error, not a hang; the ring is refused and libhipd goes on over the
#     socket (examples/hello above runs with the ring's attempt).
# Everything it starts is stopped on exit (trap). Skipped (77) without
# root, sshd (openssh-server) or ssh (openssh-client). Run by make check
# from the build directory.
src=${srcdir:-$(dirname "$0")/..}
src=$(cd "$src" && pwd)
build=$(pwd)
hipd=${HIPD_BIN:-$build/hipd}
hipctl=$build/hipctl
: "${HIPD_CPU_RUNNER:=$build/hipd-cpu-runner}"
: "${HIPD_COMPILE_HELPER:=$build/hipd-compile}"
: "${HIPD_CPU_HEADER:=$src/daemon/drivers/cpu/hipd_cpu_device.h}"
export HIPD_CPU_RUNNER HIPD_COMPILE_HELPER HIPD_CPU_HEADER
user=hipd_ssh_a
fails=0

skip() {
  echo "check_remote: SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (an sshd of its own and a test user)"
sshd=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd" ] || skip "sshd is not installed (openssh-server: scripts/deps.sh)"
for p in ssh ssh-keygen useradd usermod; do
  command -v "$p" >/dev/null 2>&1 || skip "$p is not installed"
done
for p in "$hipd" "$hipctl" "$build/examples/hello" "$build/examples/shm"; do
  [ -x "$p" ] || skip "$p is not built"
done

fail() {
  echo "check_remote: FAIL: $*"
  fails=$((fails + 1))
}
note() { echo "check_remote: $*"; }

T=$(mktemp -d /tmp/check_remote.XXXXXX) || exit 1
chmod 755 "$T"
pids=()
made_run_sshd=0
cleanup() {
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
  if [ "$fails" -gt 0 ]; then
    for f in sshd.log ssh.log hipd.log; do
      [ -f "$T/$f" ] && { echo "--- $f (last 30 lines)"; tail -n 30 "$T/$f"; }
    done
  fi
  [ "$made_run_sshd" = 1 ] && rmdir /run/sshd 2>/dev/null
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

# The test user: a shell sshd accepts, no password but not locked (with
# UsePAM no, sshd refuses an account whose password field starts with !).
id "$user" >/dev/null 2>&1 || useradd -M -N -s /bin/sh "$user" ||
  skip "cannot make the test user $user"
usermod -p '*' "$user" || skip "cannot unlock $user for key logins"
uid=$(id -u "$user")

# sshd's privilege separation directory, if the package did not make it.
if [ ! -d /run/sshd ]; then
  mkdir -m 0755 /run/sshd && made_run_sshd=1
fi
ssh-keygen -q -t ed25519 -N '' -f "$T/host_key" || exit 1
ssh-keygen -q -t ed25519 -N '' -f "$T/id" || exit 1
mkdir -m 755 "$T/keys"
cp "$T/id.pub" "$T/keys/$user"
chmod 644 "$T/keys/$user"
# A free port on loopback, by trying.
port=
for p in $(shuf -i 20000-60000 -n 20); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    port=$p
    break
  fi
done
[ -n "$port" ] || skip "no free port found"
cat >"$T/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $T/host_key
PidFile $T/sshd.pid
AuthorizedKeysFile $T/keys/%u
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $user
AllowStreamLocalForwarding yes
X11Forwarding no
PrintMotd no
EOF
"$sshd" -t -f "$T/sshd_config" || skip "sshd refuses the test's configuration"
"$sshd" -D -e -f "$T/sshd_config" >"$T/sshd.log" 2>&1 &
pids+=($!)

# hipd, as root, on a socket the test user may open.
mkdir -m 755 "$T/run"
"$hipd" --no-config --socket "$T/run/hipd.sock" --socket-mode 0666 \
  --devices cpu --cache-dir "$T/cache" >"$T/hipd.log" 2>&1 &
pids+=($!)
wait_for 20 test -S "$T/run/hipd.sock" || {
  fail "hipd did not start"
  exit 1
}
wait_for 10 grep -q "Server listening" "$T/sshd.log" || {
  fail "sshd did not start"
  exit 1
}

# The forward, as a client would make it.
fwd=$T/fwd/gpu01.sock
mkdir -m 700 "$T/fwd"
ssh -N -i "$T/id" -p "$port" -o BatchMode=yes -o StrictHostKeyChecking=no \
  -o UserKnownHostsFile=/dev/null -o ExitOnForwardFailure=yes \
  -o StreamLocalBindUnlink=yes -L "$fwd:$T/run/hipd.sock" \
  "$user@127.0.0.1" >"$T/ssh.log" 2>&1 &
ssh_pid=$!
pids+=("$ssh_pid")
wait_for 20 test -S "$fwd" || {
  fail "the forwarded socket did not appear"
  exit 1
}

# hipctl and libhipd with HIPD_SOCKET alone.
export HIPD_SOCKET=$fwd
if ! "$hipctl" status >"$T/status.out" 2>&1; then
  fail "hipctl status through the forward: $(cat "$T/status.out")"
fi
grep -q "isolation" "$T/status.out" || fail "hipctl status printed: $(head -3 "$T/status.out")"
if ! timeout 120 "$build/examples/hello" >"$T/hello.out" 2>&1; then
  fail "examples/hello through the forward: $(tail -5 "$T/hello.out")"
fi
grep -qx "bye" "$T/hello.out" || fail "examples/hello did not end: $(tail -3 "$T/hello.out")"

# Who hipd sees: the login's user. hipctl lists the sessions its caller
# may see, its own among them: through the forward, as that user.
"$hipctl" --json sessions >"$T/sessions.json" 2>&1 ||
  fail "hipctl sessions through the forward: $(head -c 300 "$T/sessions.json")"
seen=$(grep -o '"client": "hipctl", "tenant": "[^"]*"' "$T/sessions.json" | head -1)
if ! grep -q "\"uid\": $uid, " "$T/sessions.json"; then
  fail "hipd does not see the forwarded session as uid $uid ($user): $(head -c 400 "$T/sessions.json")"
elif grep -q '"uid": 0, ' "$T/sessions.json"; then
  fail "a forwarded session is root's: $(head -c 400 "$T/sessions.json")"
else
  note "hipd sees the forwarded session as uid $uid ($user), the SSH login's ($seen)"
fi

# What does not cross: a shared buffer's memfd. A clear error, no hang.
timeout 60 "$build/examples/shm" >"$T/shm.out" 2>&1
rc=$?
if [ "$rc" = 124 ]; then
  fail "examples/shm hung through the forward"
elif [ "$rc" = 0 ]; then
  fail "examples/shm succeeded through the forward (its memfd cannot cross)"
elif ! grep -q "no file descriptor came with the request" "$T/shm.out"; then
  fail "examples/shm failed without hipd's reason: $(tail -3 "$T/shm.out")"
else
  note "a shared buffer through the forward: $(grep -m1 'no file descriptor' "$T/shm.out")"
fi

if [ "$fails" -gt 0 ]; then
  echo "check_remote: $fails checks FAILED"
  exit 1
fi
note "hipctl and libhipd through a real sshd's forward of hipd's socket"
exit 0
