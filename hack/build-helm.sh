#!/usr/bin/env bash
# Build helm (v4) from its Go module, cached by version (hack/lib/go-tool.sh), like
# hack/build-control-plane.sh builds the control plane. charts/horus is linted (`make lint`),
# rendered and installed (tests) with it. Callers run
#   helm=$(bash hack/build-helm.sh)
#
# Version: HELM_VERSION in hack/control-plane.env (HORUS_HELM_VERSION overrides).
# Output: $HORUS_CACHE/helm/<version>/bin/helm.
set -euo pipefail

# shellcheck source=lib/go-tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-tool.sh"
HELM_VERSION="${HORUS_HELM_VERSION:-$HELM_VERSION}"

build_helm() {
  tool_log "fetching helm.sh/helm/v4@$HELM_VERSION"
  go get -tool "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
  tool_log "building helm $HELM_VERSION"
  # The version helm reports (`helm version`); upstream's Makefile sets the same variable.
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    -o "$1" helm.sh/helm/v4/cmd/helm
}

go_tool helm "$CACHE/helm/$HELM_VERSION" build_helm
