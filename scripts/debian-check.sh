#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/debian-check.sh: build hipd's Debian packages (debian/) and try
# them as an admin would, on this machine (Debian 12, as root):
#   1. dpkg-buildpackage -us -uc -b with DEB_BUILD_OPTIONS=nocheck, in a
#      copy of the tree in a temporary directory (dpkg-buildpackage writes
#      the packages into the parent of the tree);
#   2. lintian on the .changes: any error fails the script (warnings are
#      printed);
#   3. dpkg -i of hipd, libhipd0, libhipd-dev and libhipd-ocaml-dev (the
#      OCaml binding, found by ocamlfind), and a check that their
#      files are where they belong;
#   4. examples/hello, vecadd and the tutorials built against the installed
#      libhipd-dev (pkg-config hipd), run against the installed daemon
#      started by hand (--devices cpu, on a socket in the temporary
#      directory, reading the installed /etc/hipd/hipd.conf): vecadd compiles and runs a kernel, so the installed
#      helpers in /usr/libexec and the header in /usr/share/hipd are used;
#      then the installed hipctl: status, and a kernel run from a file;
#   5. dpkg --purge of the four packages, also when a step failed, and a
#      check that nothing of them is left.
# The daemon started here is stopped whatever happens. The accounts "hipd"
# and "hipd-compile" stay (Debian keeps system accounts on purge; CI's
# accounts step makes them anyway).
#
# Usage: bash scripts/debian-check.sh
#   KEEP=1   keep the temporary directory (the packages, build.log)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh

PKGS=(hipd libhipd0 libhipd-dev libhipd-ocaml-dev)

[ "$(id -u)" -eq 0 ] || hipd_die "debian-check.sh installs packages: run it as root"
[ -d debian ] || hipd_die "no debian/ directory in $(pwd)"
for pkg in "${PKGS[@]}"; do
  # Never remove an install that this script did not make.
  if dpkg -s "$pkg" >/dev/null 2>&1; then
    hipd_die "package $pkg is installed already: remove it first" \
      "(dpkg --purge ${PKGS[*]})"
  fi
done
for tool in dpkg-buildpackage dh lintian pkg-config cc; do
  command -v "$tool" >/dev/null 2>&1 ||
    hipd_die "$tool not found (scripts/deps.sh's packages: hipd_install_deps)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hipd-debian.XXXXXX")
# Reachable by the account "hipd", whose workers run from under it (the
# daemon's TMPDIR below; the build tree, were its tests run).
chmod 0711 "$tmp"
daemon_pid=
installed=0
# /run/hipd, made by the package's tmpfiles.d at install: removed again at
# the end if it was not there before.
run_dir_was_there=0
[ ! -e /run/hipd ] || run_dir_was_there=1

# Stop the daemon, purge what was installed, remove the temporary directory.
cleanup()
{
  local rc=$?

  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  if [ "$installed" -eq 1 ]; then
    echo "purging ${PKGS[*]}"
    dpkg --purge "${PKGS[@]}" || rc=1
  fi
  if [ "$run_dir_was_there" -eq 0 ] && [ -d /run/hipd ]; then
    rmdir /run/hipd/mps /run/hipd 2>/dev/null || true
  fi
  if [ "${KEEP:-0}" = 1 ]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT

hipd_step "debian: copy the tree to $tmp/hipd"
mkdir "$tmp/hipd"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # What git tracks and what it would track (debian/ before it is
  # committed), none of the build outputs.
  git ls-files -co --exclude-standard -z |
    (xargs -0 cp --parents -t "$tmp/hipd" 2>/dev/null || true)
  # Files git knows but that were deleted in the work tree are skipped.
else
  tar -C . --exclude=./_build\* -cf - . | tar -C "$tmp/hipd" -xf -
fi

hipd_step "debian: dpkg-buildpackage -us -uc -b (nocheck)"
if ! (cd "$tmp/hipd" &&
  DEB_BUILD_OPTIONS="nocheck parallel=${JOBS:-$(nproc)}" \
    dpkg-buildpackage -us -uc -b >"$tmp/build.log" 2>&1); then
  tail -n 60 "$tmp/build.log" >&2
  hipd_die "dpkg-buildpackage failed (the end of its log above)"
fi
grep -E '^dpkg-gensymbols: warning' "$tmp/build.log" || true
changes=$(echo "$tmp"/hipd_*.changes)
[ -f "$changes" ] || hipd_die "no .changes file in $tmp"
ls -l "$tmp"/*.deb

hipd_step "debian: lintian (errors fail)"
# lintian refuses to run as root without --allow-root.
lintian --allow-root --fail-on error --display-info "$changes" ||
  hipd_die "lintian found errors (E: lines above)"

hipd_step "debian: dpkg -i ${PKGS[*]}"
debs=()
for pkg in "${PKGS[@]}"; do
  debs+=("$(echo "$tmp/${pkg}"_*.deb)")
done
installed=1
dpkg -i "${debs[@]}" || hipd_die "dpkg -i failed"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for f in /usr/bin/hipd /usr/libexec/hipd-cpu-runner /usr/libexec/hipd-compile \
  /usr/bin/hipd-ir /usr/bin/hipctl; do
  [ -x "$f" ] || hipd_die "$f is missing or not executable"
done
for f in /usr/share/hipd/hipd_cpu_device.h /lib/systemd/system/hipd.service \
  /lib/systemd/system/hipd.socket /usr/lib/sysusers.d/hipd.conf \
  /usr/lib/tmpfiles.d/hipd.conf /usr/share/doc/hipd/copyright \
  /usr/share/doc/hipd/PROTOCOL.md.gz /usr/share/man/man8/hipd.8.gz \
  /usr/share/man/man5/hipd.conf.5.gz /etc/hipd/hipd.conf /usr/share/man/man1/hipctl.1.gz \
  /usr/share/man/man3/libhipd.3.gz /usr/include/hipd.h /usr/include/hipd_version.h \
  "/usr/lib/$multiarch/libhipd.so" "/usr/lib/$multiarch/libhipd.so.0" \
  "/usr/lib/$multiarch/pkgconfig/hipd.pc"; do
  [ -e "$f" ] || hipd_die "$f is missing"
done
# The sample configuration is a conffile: an admin's edits survive upgrades.
dpkg-query -W -f='${Conffiles}\n' hipd | grep '^ */etc/hipd/hipd.conf ' >/dev/null ||
  hipd_die "/etc/hipd/hipd.conf is not a conffile of hipd"
grep -q '^ExecStart=/usr/bin/hipd ' /lib/systemd/system/hipd.service ||
  hipd_die "hipd.service does not start /usr/bin/hipd"
for a in hipd hipd-compile; do
  getent passwd "$a" >/dev/null || hipd_die "postinst did not create account $a"
done
echo "pkg-config hipd: $(pkg-config --modversion hipd)" \
  "$(pkg-config --cflags --libs hipd)"
# The OCaml binding, where ocamlfind looks.
loc=$(ocamlfind query hipd 2>&1) || hipd_die "ocamlfind query hipd: $loc"
[ "$loc" = /usr/lib/ocaml/hipd ] || hipd_die "ocamlfind finds hipd in $loc"
[ -e /usr/lib/ocaml/stublibs/dllhipd_stubs.so ] ||
  hipd_die "the OCaml binding's stubs are missing"
echo "ocamlfind query hipd: $loc"

hipd_step "debian: the examples against the installed daemon"
# examples/hello.c includes the build's config.h for nothing it needs.
: >"$tmp/config.h"
for ex in hello vecadd streams shm codegen profile; do
  # shellcheck disable=SC2046 # pkg-config's words are separate arguments
  cc -I"$tmp" -o "$tmp/$ex" "examples/$ex.c" $(pkg-config --cflags --libs hipd) -lm ||
    hipd_die "examples/$ex.c does not build against libhipd-dev"
done
# (/lib is /usr/lib on a merged-/usr system: compare the files.)
linked=$(ldd "$tmp/hello" | awk '$1 == "libhipd.so.0" { print $3 }')
if [ -z "$linked" ] || [ "$(readlink -f "$linked")" != \
  "$(readlink -f "/usr/lib/$multiarch/libhipd.so.0")" ]; then
  hipd_die "examples/hello is not linked to the installed libhipd.so.0 ($linked)"
fi
echo "examples/hello uses $linked"
sock=$tmp/hipd.sock
# Its own compiled-kernel cache (not root's /var/cache/hipd) and a TMPDIR
# that goes with $tmp (the worker, as "hipd", makes its module directories
# there: sticky and writable by all, like /tmp).
mkdir -m 1777 "$tmp/t"
TMPDIR=$tmp/t /usr/bin/hipd --socket "$sock" --devices cpu --cache-dir "$tmp/cache" \
  >"$tmp/hipd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
  [ -S "$sock" ] && break
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -S "$sock" ]; then
  cat "$tmp/hipd.log" >&2
  hipd_die "the installed hipd did not create $sock (its log above)"
fi
for ex in hello vecadd streams shm codegen profile; do
  if ! "$tmp/$ex" "$sock"; then
    cat "$tmp/hipd.log" >&2
    hipd_die "examples/$ex failed against the installed hipd (its log above)"
  fi
done
# The installed hipctl: the daemon's status, and a kernel from a file.
cat >"$tmp/add1.hip" <<'HIP'
extern "C" __global__ void add1(float *x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] += 1.0f;
}
HIP
if ! /usr/bin/hipctl --socket "$sock" status ||
  ! /usr/bin/hipctl --socket "$sock" run "$tmp/add1.hip" add1 \
    buf:f32:100=iota i32:100 --print 1:4 --expect 1=1,2,3,4; then
  cat "$tmp/hipd.log" >&2
  hipd_die "the installed hipctl failed against the installed hipd (its log above)"
fi
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
daemon_pid=
[ "$rc" -eq 0 ] || {
  cat "$tmp/hipd.log" >&2
  hipd_die "the installed hipd exited $rc on SIGTERM"
}

hipd_step "debian: dpkg --purge ${PKGS[*]}"
installed=0
dpkg --purge "${PKGS[@]}" || hipd_die "dpkg --purge failed"
for pkg in "${PKGS[@]}"; do
  if dpkg -s "$pkg" >/dev/null 2>&1; then
    hipd_die "$pkg is still known to dpkg after the purge"
  fi
done
for f in /usr/bin/hipd /usr/bin/hipctl /usr/libexec/hipd-cpu-runner /usr/include/hipd.h \
  /lib/systemd/system/hipd.socket /usr/share/hipd /etc/hipd/hipd.conf; do
  [ ! -e "$f" ] || hipd_die "$f is left after the purge"
done
hipd_steps_done
echo "debian packages: built, lintian clean at error level, installed, used, purged"
