#!/usr/bin/env bash
# The CRDs of Kubeflow's PyTorchJob (github.com/kubeflow/training-operator) and of JobSet
# (sigs.k8s.io/jobset), both Apache-2.0, copied as published out of their Go modules' zips (the Go
# module proxy, as hack/build-kueue.sh copies Kueue's) and cached by version. tests/e2e/test_pod_route.py
# applies them so the examples of examples/pod-route/ can be created on the local control plane: no
# controller of theirs runs there, and on kwok the CRD alone is enough. Callers run
#   crds=$(bash hack/fetch-workload-crds.sh)      # a directory of the two CRDs
#
# Versions: TRAINING_OPERATOR_VERSION and JOBSET_VERSION in hack/control-plane.env.
# Output: $HORUS_CACHE/workload-crds/<versions>/*.yaml
set -euo pipefail

# shellcheck source=control-plane.env
source "$(dirname "${BASH_SOURCE[0]}")/control-plane.env"
TRAINING_OPERATOR_VERSION="${HORUS_TRAINING_OPERATOR_VERSION:-$TRAINING_OPERATOR_VERSION}"
JOBSET_VERSION="${HORUS_JOBSET_VERSION:-$JOBSET_VERSION}"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}"
out="$CACHE/workload-crds/training-operator-$TRAINING_OPERATOR_VERSION-jobset-$JOBSET_VERSION"
if [[ -d "$out" ]]; then echo "$out"; exit 0; fi
command -v go >/dev/null || { echo "error: Go is required (https://go.dev/dl)" >&2; exit 1; }

# copy MODULE VERSION FILE: FILE of the module's zip into the scratch directory.
copy() {
  local listing dir
  listing=$(go mod download -json "$1@$2")
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$listing")
  [[ -n "$dir" ]] || { echo "error: go mod download $1@$2 gave no directory" >&2; exit 1; }
  cp "$dir/$3" "$scratch/"
}

scratch="$out.tmp.$$"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch"
copy github.com/kubeflow/training-operator "$TRAINING_OPERATOR_VERSION" \
  manifests/base/crds/kubeflow.org_pytorchjobs.yaml
copy sigs.k8s.io/jobset "$JOBSET_VERSION" config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml
chmod u+w "$scratch"/*
# Renamed into place whole: a directory present is a complete one (a racing caller's rename wins).
mv -T "$scratch" "$out" 2>/dev/null || true
echo "$out"
