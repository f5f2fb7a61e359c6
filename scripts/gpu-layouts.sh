#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/gpu-layouts.sh: the sharing figure at N clients under each
# process layout the daemon offers, side by side in one run (issue 22:
# "N sessions of one tenant scaling with cores", "N=16 as 16 tenants").
#
# In a built tree (scripts/gpu-check.sh leaves one):
#
#   bash scripts/gpu-layouts.sh OUTDIR [CLIENTS [SECONDS]]
#
# runs bench/hipd_bench once per layout below (--only share, or tenants
# for the uid layouts; --no-mps but for the first, which also measures
# CLIENTS direct processes under MPS and 1 client against direct HIP),
# each with its own daemon, and prints one line per layout: kernels/s,
# the ratio to MPS from the first run, CPU per kernel. Each run's output
# and JSON are kept in OUTDIR. CLIENTS: 16 by default; SECONDS: 2.
# Run it as root (the uid layouts run clients as other users).
# Environment: HIPD_BENCH_ARGS, more options for every run.
set -uo pipefail

out=${1:?usage: gpu-layouts.sh OUTDIR [CLIENTS [SECONDS]]}
n=${2:-16}
seconds=${3:-2}
[ -x bench/hipd_bench ] || {
  echo "gpu-layouts.sh: run it in a built tree (bench/hipd_bench)" >&2
  exit 1
}
mkdir -p "$out" || exit 1
# shellcheck disable=SC2206
extra=(${HIPD_BENCH_ARGS:-})

# name|sections|daemon options (space-separated, each passed as
# --daemon-arg=OPTION)
layouts=(
  "default|share|"
  "spin-all|share|--spin-cpus=$(nproc)"
  "workers-8x2|share|--tenant-workers=8 --worker-sessions=2 --spin-cpus=$(nproc)"
  "workers-16x1|share|--tenant-workers=16 --worker-sessions=1 --spin-cpus=$(nproc)"
  "uids-mps-auto|tenants|"
  "uids-mps-all|tenants|--mps-tenants=all --spin-cpus=$(nproc)"
)

rc=0
first=1
for l in "${layouts[@]}"; do
  IFS='|' read -r name only opts <<<"$l"
  args=(--only "$only" --seconds "$seconds" --json "$out/$name.json")
  if [ "$first" = 1 ]; then
    args+=(--clients "1,$n")
  else
    args+=(--clients "$n" --no-mps)
  fi
  for o in $opts; do
    args+=("--daemon-arg=$o")
  done
  echo "gpu-layouts: $name: hipd_bench ${args[*]} ${extra[*]}" >&2
  ./bench/hipd_bench "${args[@]}" "${extra[@]}" >"$out/$name.txt" 2>&1 || {
    echo "gpu-layouts: $name: hipd_bench failed (exit $?), see $out/$name.txt" >&2
    rc=1
  }
  first=0
done

python3 - "$out" "$n" "${layouts[@]}" <<'EOF'
import json, math, os, sys

out, n = sys.argv[1], int(sys.argv[2])
names = [l.split('|')[0] for l in sys.argv[3:]]


def figures(name):
    try:
        with open(os.path.join(out, name + '.json')) as f:
            return {x['name']: x for x in json.load(f)['figures']}
    except (OSError, ValueError, KeyError):
        return {}


def base(fig, key):
    for b in fig.get('baselines') or []:
        if b.get('name') == key and isinstance(b.get('value'), (int, float)):
            return b['value']
    return math.nan


first = figures(names[0])
mps = base(first.get('share_n%d' % n, {}), 'mps')
print('%-15s %14s %10s %16s' % ('layout', 'kernels/s', 'x MPS', 'CPU us/kernel'))
for name in names:
    f = figures(name)
    # section 8b's K may differ from n (2 to 16): its one figure
    each = [v for k, v in f.items() if k.startswith('tenants_n') and
            k.endswith('_each')]
    fig = f.get('share_n%d' % n) or (each[0] if each else {})
    cpu = f.get('cpu_n%d' % n, {}).get('hipd')
    v = fig.get('hipd')
    if not isinstance(v, (int, float)):
        print('%-15s %14s' % (name, 'n/a'))
        continue
    print('%-15s %14.0f %10s %16s' % (
        name, v, '%.3f' % (v / mps) if mps == mps and mps > 0 else 'n/a',
        '%.2f' % cpu if isinstance(cpu, (int, float)) else '-'))
if mps == mps:
    print('MPS, %d direct processes: %.0f kernels/s' % (n, mps))
EOF
exit $rc
