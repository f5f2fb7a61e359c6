#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_kubernetes.sh: contrib/kubernetes/'s manifests checked without
# a cluster (contrib/kubernetes/check_manifests.py: they parse, hipd runs
# with the unit's capabilities and no more, the pod reaches its socket as
# a non-root uid hipd admits, the ConfigMap's hipd.conf keys are options
# of the hipd built here). Skipped without python3 and its yaml module.
src=${srcdir:-$(dirname "$0")/..}
hipd=${HIPD_BIN:-$(pwd)/hipd}
python3 -c 'import yaml' 2>/dev/null || {
  echo "check_kubernetes: SKIP: python3 with its yaml module (python3-yaml) is not installed"
  exit 77
}
exec python3 "$src/contrib/kubernetes/check_manifests.py" "$hipd"
