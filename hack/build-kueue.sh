#!/usr/bin/env bash
# Build Kueue's manager from its Go module, cached by version (hack/lib/go-tool.sh), like
# hack/build-helm.sh builds helm, and copy its CRDs out of the same module zip
# (config/components/crd/bases). tests/e2e/test_kueue.py runs the manager as a local process against
# the local control plane (docs/operator.md, "With Kueue"). Callers run
#   kueue=$(bash hack/build-kueue.sh)      # the manager binary; its CRDs are in $(dirname "$kueue")/../crds
#
# Version: KUEUE_VERSION in hack/control-plane.env (HORUS_KUEUE_VERSION overrides).
# Output: $HORUS_CACHE/kueue/<version>/bin/kueue and $HORUS_CACHE/kueue/<version>/crds/*.yaml.
set -euo pipefail

# shellcheck source=lib/go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-tool.sh"
KUEUE_VERSION="${HORUS_KUEUE_VERSION:-$KUEUE_VERSION}"

build_kueue() {
  local crds
  crds="$(dirname "$(dirname "$1")")/crds"
  tool_log "fetching sigs.k8s.io/kueue@$KUEUE_VERSION"
  go get -tool "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2
  # The CRDs first: the binary is what marks the build done, so it is present only with them.
  rm -rf "$crds" "$crds.tmp"
  cp -r "$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components/crd/bases" "$crds.tmp"
  chmod -R u+w "$crds.tmp"
  rm -f "$crds.tmp/kustomization.yaml"
  mv "$crds.tmp" "$crds"
  tool_log "building kueue $KUEUE_VERSION"
  # The version the manager logs at start; upstream's Makefile sets the same variable.
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    -o "$1" sigs.k8s.io/kueue/cmd/kueue
}

go_tool kueue "$CACHE/kueue/$KUEUE_VERSION" build_kueue
