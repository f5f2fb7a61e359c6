#!/bin/sh
# SPDX-License-Identifier: MIT
# bindings/ocaml/bench/run.sh: the OCaml binding's bandwidth beside the C
# client's, in one run against one daemon: starts the hipd of a build tree
# on a private socket (the CPU device unless told otherwise), runs
# bench/hipd_bench --only bw (the C client) and then the OCaml bench on
# it, and prints each figure with both rates and their ratio.
#
#   bindings/ocaml/bench/run.sh BUILD_DIR [SIZES [DEVICES]]
#   e.g. bindings/ocaml/bench/run.sh _build 1M,256M cpu
#
# On a machine without OCaml (the GPU machine), build bench_ocaml.exe
# where OCaml is and name its folder in HIPD_OCAML_PREBUILT.
set -eu
build=$(cd "${1:?usage: run.sh BUILD_DIR [SIZES [DEVICES]]}" && pwd)
sizes=${2:-1M,256M}
devices=${3:-cpu}
src=$(cd "$(dirname "$0")/../../.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/hipd-ocaml-bench.XXXXXX")
chmod 755 "$dir"
pid=
cleanup()
{
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

HIPD_CPU_RUNNER=$build/hipd-cpu-runner HIPD_COMPILE_HELPER=$build/hipd-compile \
  HIPD_CPU_HEADER=$src/daemon/drivers/cpu/hipd_cpu_device.h \
  "$build/hipd" --socket "$dir/hipd.sock" --cache-dir "$dir/cache" \
  --devices "$devices" >"$dir/hipd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ -S "$dir/hipd.sock" ] && break
  sleep 0.1
done
[ -S "$dir/hipd.sock" ] || { cat "$dir/hipd.log"; exit 1; }
export HIPD_SOCKET="$dir/hipd.sock" DUNE_CACHE=disabled
export HIPD_BUILDDIR="$build" HIPD_SRCDIR="$src"
if [ -n "${HIPD_OCAML_PREBUILT:-}" ]; then
  bench=$HIPD_OCAML_PREBUILT/bench_ocaml.exe
  export LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  mkdir -p "$build/bindings/ocaml/_dune"
  dune build --root "$src/bindings/ocaml" --build-dir "$build/bindings/ocaml/_dune" \
    --profile release ./bench/bench_ocaml.exe 2>&1
  bench=$build/bindings/ocaml/_dune/default/bench/bench_ocaml.exe
fi

"$build/bench/hipd_bench" --socket "$dir/hipd.sock" --device 0 --only bw \
  --sizes "$sizes" --no-mps --json "$dir/c.json" >"$dir/c.txt" 2>&1 ||
  { cat "$dir/c.txt"; exit 1; }
"$bench" --device 0 \
  --sizes "$sizes" >"$dir/ocaml.txt"
cat "$dir/ocaml.txt" | head -n 1
python3 - "$dir/c.json" "$dir/ocaml.txt" <<'PY'
import json, sys
c = {f["name"]: f["hipd"] for f in json.load(open(sys.argv[1]))["figures"]}
print("%-22s %12s %12s %8s" % ("figure", "C client", "OCaml", "OCaml/C"))
for line in open(sys.argv[2]):
    if line.startswith("#"):
        continue
    name, rate = line.split()[0], float(line.split()[1])
    base = c.get(name)
    ratio = "%.2fx" % (rate / base) if base else "n/a"
    print("%-22s %7.3f GB/s %7.3f GB/s %8s" % (name, base or float("nan"), rate, ratio))
PY
