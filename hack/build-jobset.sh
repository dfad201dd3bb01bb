#!/usr/bin/env bash
# Build JobSet's controller manager (sigs.k8s.io/jobset, its `main` package at the module's root) from
# its Go module, cached by version (hack/lib/go-tool.sh), like hack/build-kueue.sh builds Kueue's, and
# copy its CRDs and webhook configuration out of the same module zip (config/components/crd/bases,
# config/components/webhook/manifests.yaml). With the argument `trainer`, the same for Kubeflow
# Trainer's controller manager (github.com/kubeflow/trainer/v2, cmd/trainer-controller-manager), which
# makes each TrainJob into a JobSet (manifests/base/crds, manifests/base/webhook/manifests.yaml).
# tests/e2e/test_jobset.py runs both managers as local processes against the local control plane
# (docs/operator.md, "Gangs"). Callers run
#   jobset=$(bash hack/build-jobset.sh)   # the manager binary; its CRDs are in $(dirname "$jobset")/../crds
#   trainer=$(bash hack/build-jobset.sh trainer)
#
# Versions: JOBSET_VERSION in hack/control-plane.env (HORUS_JOBSET_VERSION overrides), the version whose
# CRD hack/fetch-workload-crds.sh copies too; TRAINER_VERSION below (HORUS_TRAINER_VERSION overrides),
# whose go.mod requires that JobSet. Neither module has a replace directive, so building each as a tool
# of a scratch module resolves the dependencies its go.mod names.
# Output: $HORUS_CACHE/<jobset|trainer>/<version>/bin/<name>, crds/*.yaml and webhook.yaml beside bin/.
set -euo pipefail

# shellcheck source=lib/go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-tool.sh"
JOBSET_VERSION="${HORUS_JOBSET_VERSION:-$JOBSET_VERSION}"
TRAINER_VERSION="${HORUS_TRAINER_VERSION:-${TRAINER_VERSION:-v2.3.0}}"

# copy_manifests MODULE CRDS WEBHOOK OUT: the module's CRD directory to OUT/crds (less its
# kustomization) and its webhook configuration to OUT/webhook.yaml. Done before the build: the binary
# is what marks the build done, so it is present only with them.
copy_manifests() {
  local dir
  dir="$(go list -m -f '{{.Dir}}' "$1")"
  rm -rf "$4/crds" "$4/crds.tmp"
  cp -r "$dir/$2" "$4/crds.tmp"
  chmod -R u+w "$4/crds.tmp"
  rm -f "$4/crds.tmp/kustomization.yaml"
  mv "$4/crds.tmp" "$4/crds"
  cp "$dir/$3" "$4/webhook.yaml"
  chmod u+w "$4/webhook.yaml"
}

build_jobset() {
  tool_log "fetching sigs.k8s.io/jobset@$JOBSET_VERSION"
  go get -tool "sigs.k8s.io/jobset@$JOBSET_VERSION" >&2
  copy_manifests sigs.k8s.io/jobset config/components/crd/bases config/components/webhook/manifests.yaml \
    "$(dirname "$(dirname "$1")")"
  tool_log "building jobset $JOBSET_VERSION"
  # The version the manager logs at start; upstream's Makefile sets the same variable.
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION" \
    -o "$1" sigs.k8s.io/jobset
}

build_trainer() {
  local module=github.com/kubeflow/trainer/v2
  tool_log "fetching $module@$TRAINER_VERSION"
  go get -tool "$module/cmd/trainer-controller-manager@$TRAINER_VERSION" >&2
  copy_manifests "$module" manifests/base/crds manifests/base/webhook/manifests.yaml \
    "$(dirname "$(dirname "$1")")"
  tool_log "building trainer $TRAINER_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$1" "$module/cmd/trainer-controller-manager"
}

case "${1:-jobset}" in
  jobset) go_tool jobset "$CACHE/jobset/$JOBSET_VERSION" build_jobset ;;
  trainer) go_tool trainer "$CACHE/trainer/$TRAINER_VERSION" build_trainer ;;
  *) echo "usage: $0 [jobset|trainer]" >&2; exit 2 ;;
esac
