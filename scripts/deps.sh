# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# scripts/deps.sh: install hipd's build dependencies on Debian 12.
# Sourced by scripts/quickstart.sh, scripts/test.sh and scripts/sanitize.sh;
# defines functions and the package list, runs nothing by itself.

# Everything a build, `make check` and `make distcheck` need. libamdhip64-dev
# brings the HIP headers and runtime for the AMD driver; without a GPU the
# daemon still builds and serves its CPU device. clang-14 and
# libclang-rt-14-dev (its sanitizer runtimes) are for scripts/sanitize.sh;
# mandoc lints the manual pages (tests/check_man.sh).
# debhelper and lintian build and check the Debian packages
# (scripts/debian-check.sh; dpkg-dev comes with build-essential).
# libmicrohttpd-dev serves --metrics-listen; curl and prometheus (for
# promtool: a 19 MB download, 96 MB installed, of which promtool is 48 MB;
# installed without its recommends) test it (tests/check_metrics.sh).
# slurm-wlm and munge run a one-node Slurm cluster of the test's own
# (tests/check_slurm.sh: contrib/slurm's prolog and epilog); installed
# without recommends, their services are not started by the package (the
# test starts its own daemons, with their own keys, ports and sockets).
# python3-yaml reads the Kubernetes manifests (tests/check_kubernetes.sh).
# openssh-server and openssh-client forward hipd's socket in
# tests/check_remote.sh (its own sshd, port and keys; the package's own
# service is not needed: where systemd runs, `systemctl disable --now ssh`).
# ocaml, ocaml-dune, ocaml-findlib and libalcotest-ocaml-dev build and test
# the OCaml binding (bindings/ocaml, tests/check_ocaml.sh).
# HIPD_BUILD_DEPS is the part that building and running hipd need
# (scripts/quickstart.sh installs only those: none of them starts a
# service); HIPD_DEPS adds what the tests and the other checks use.
HIPD_BUILD_DEPS=(
  build-essential autoconf automake libtool pkg-config
  libuv1-dev libmsgpack-dev check libffi-dev libsystemd-dev libssl-dev
  libseccomp-dev libinih-dev libmicrohttpd-dev libamdhip64-dev
)
HIPD_DEPS=(
  "${HIPD_BUILD_DEPS[@]}"
  mandoc curl prometheus clang-14 libclang-rt-14-dev
  debhelper lintian
  slurm-wlm munge python3-yaml openssh-server openssh-client
  ocaml ocaml-dune ocaml-findlib libalcotest-ocaml-dev
)

# Print a step banner so a failure is easy to place in a long log, after
# the time the previous step took (hipd_steps_done prints the last one).
hipd_step()
{
  hipd_steps_done
  _hipd_step_name=$*
  _hipd_step_start=$SECONDS
  printf '\n==> %s\n' "$*"
}

hipd_steps_done()
{
  if [ -n "${_hipd_step_name:-}" ]; then
    printf '<== %s: %d s\n' "$_hipd_step_name" $((SECONDS - _hipd_step_start))
  fi
  _hipd_step_name=
}

# Print an error and exit non-zero.
hipd_die()
{
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# Print the logs of the tests that failed in the build tree $1 (automake's
# parallel harness writes tests/NAME.log and tests/NAME.trs next to each
# test program), or its test-suite.log when no test says it failed.
hipd_print_failed_tests()
{
  local build=$1 trs logf found=0

  shopt -s nullglob
  for trs in "$build"/tests/*.trs "$build"/tests/*/*.trs; do
    if grep -Eq '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
      logf=${trs%.trs}.log
      found=1
      printf '\n---- %s ----\n' "$logf" >&2
      cat "$logf" >&2 || true
    fi
  done
  shopt -u nullglob
  if [ "$found" -eq 0 ] && [ -f "$build/test-suite.log" ]; then
    printf '\n---- %s ----\n' "$build/test-suite.log" >&2
    cat "$build/test-suite.log" >&2
  fi
}

# Is Debian package $1 installed (not merely known, or removed with its
# configuration files left)? dpkg-query prints the one field, so nothing
# stops reading early: `dpkg -s | grep -q` did, and under pipefail a
# package whose status is longer than one stdio buffer (prometheus: 6 KiB)
# then read as missing whenever grep exited before dpkg's second write
# (SIGPIPE).
hipd_pkg_installed()
{
  local status
  status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
  [ "$status" = "install ok installed" ]
}

# Install the packages of HIPD_DEPS (with "build": of HIPD_BUILD_DEPS) that
# are not installed yet. apt-get update runs once, and only when something
# is missing, so a machine that has everything is not touched (and needs
# neither root nor the network).
hipd_install_deps()
{
  local missing=() pkg want=("${HIPD_DEPS[@]}")

  [ "${1:-}" = build ] && want=("${HIPD_BUILD_DEPS[@]}")
  command -v dpkg >/dev/null 2>&1 ||
    hipd_die "dpkg not found: these scripts expect Debian 12 (install the" \
      "packages listed in scripts/deps.sh by hand elsewhere)"
  for pkg in "${want[@]}"; do
    hipd_pkg_installed "$pkg" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "all ${#want[@]} dependencies are installed"
    return 0
  fi
  echo "missing packages: ${missing[*]}"
  [ "$(id -u)" -eq 0 ] ||
    hipd_die "installing packages needs root: run this script as root (or" \
      "with sudo), or install them yourself: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update || hipd_die "apt-get update failed"
  # prometheus (for promtool) without its recommends: they are only
  # prometheus-node-exporter, another server. The package itself starts a
  # Prometheus server where systemd runs (not in containers that forbid
  # starting services): `systemctl disable --now prometheus` stops it.
  # slurm-wlm and munge without theirs (mailutils, a MTA...): the test
  # runs daemons of its own. Where systemd runs, the packages enable
  # slurmctld, slurmd and munge (`systemctl disable --now` stops them);
  # they fail to start without a configuration, which is harmless.
  local plain=() norec=()
  for pkg in "${missing[@]}"; do
    case $pkg in
    prometheus | slurm-wlm | munge | openssh-server) norec+=("$pkg") ;;
    *) plain+=("$pkg") ;;
    esac
  done
  if [ "${#plain[@]}" -gt 0 ]; then
    apt-get install -y "${plain[@]}" ||
      hipd_die "apt-get install failed for: ${plain[*]}"
  fi
  if [ "${#norec[@]}" -gt 0 ]; then
    apt-get install -y --no-install-recommends "${norec[@]}" ||
      hipd_die "apt-get install failed for: ${norec[*]}"
  fi
  for pkg in "${missing[@]}"; do
    hipd_pkg_installed "$pkg" || hipd_die "package $pkg is still not installed"
  done
}

# Create hipd's accounts if they are missing (as root; a no-op otherwise,
# and when they exist): "hipd" (the socket's group and the device workers'
# account) and "hipd-compile" (the compile helpers'), the ones that
# systemd/hipd.sysusers declares. hipd running as root starts its workers
# and compile helpers under them. Runs from the repository root.
hipd_create_accounts()
{
  if getent passwd hipd >/dev/null && getent group hipd >/dev/null &&
    getent passwd hipd-compile >/dev/null; then
    echo "accounts hipd and hipd-compile exist"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: accounts hipd and hipd-compile not created (hipd then" \
      "runs everything as its own user)"
    return 0
  fi
  if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers "$(pwd)/systemd/hipd.sysusers" ||
      hipd_die "systemd-sysusers systemd/hipd.sysusers failed"
  else
    getent group hipd >/dev/null || groupadd --system hipd ||
      hipd_die "groupadd --system hipd failed"
    getent passwd hipd >/dev/null ||
      useradd --system --gid hipd --no-create-home --home-dir / \
        --shell /usr/sbin/nologin --comment "hipd device workers" hipd ||
      hipd_die "useradd hipd failed"
    getent passwd hipd-compile >/dev/null ||
      useradd --system --user-group --no-create-home --home-dir / \
        --shell /usr/sbin/nologin --comment "hipd compile helpers" \
        hipd-compile || hipd_die "useradd hipd-compile failed"
  fi
  for a in hipd hipd-compile; do
    getent passwd "$a" >/dev/null || hipd_die "account $a is still missing"
  done
  echo "accounts: $(id hipd); $(id hipd-compile)"
}

# Refuse to configure out of tree when the source tree was configured in
# place: configure would stop with a less helpful message.
hipd_check_srcdir_clean()
{
  [ ! -f config.status ] ||
    hipd_die "the source tree was configured in place (config.status exists);" \
      "run 'make distclean' in $(pwd) first"
}

# Run ./bootstrap, then configure in build directory $1 with the remaining
# arguments. Runs from the repository root; leaves the cwd unchanged.
hipd_configure()
{
  local dir=$1

  shift
  hipd_step "bootstrap (autoreconf -fi)"
  ./bootstrap || hipd_die "./bootstrap failed"
  hipd_check_srcdir_clean
  hipd_step "configure in $dir/ $*"
  mkdir -p "$dir"
  (cd "$dir" && ../configure "$@") ||
    hipd_die "configure failed in $dir/ (see $dir/config.log)"
}
