#!/usr/bin/env bash
# Build hack/gitops-health (horus-gitops-health) from its Go modules, cached (hack/lib/go-tool.sh),
# like hack/build-helm.sh builds helm. It evaluates DLJobs the way Flux
# (kstatus, sigs.k8s.io/cli-utils) and Argo CD (a Lua health check run by gopher-lua) do;
# tests/e2e/test_gitops_health.py runs it on objects read back from the local control plane.
#
# Versions: KSTATUS_VERSION (cli-utils) and GOPHER_LUA_VERSION below (HORUS_KSTATUS_VERSION,
# HORUS_GOPHER_LUA_VERSION override); k8s.io/api and apimachinery at the control plane's
# (K8S_VERSION in hack/control-plane.env, as v0.x), whose modules that build already downloaded.
# Output: $HORUS_CACHE/gitops-health/<versions>-<hash of main.go>/bin/horus-gitops-health.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/go-tool.sh
source "$HERE/lib/go-tool.sh"
KSTATUS_VERSION="${HORUS_KSTATUS_VERSION:-v0.37.2}"
GOPHER_LUA_VERSION="${HORUS_GOPHER_LUA_VERSION:-v1.1.2}"
K8S_MODULES_VERSION="v0.${K8S_VERSION#v1.}"
SOURCE="$HERE/gitops-health/main.go"
KEY="$KSTATUS_VERSION-$GOPHER_LUA_VERSION-$K8S_MODULES_VERSION-$(sha256sum "$SOURCE" | cut -c1-12)"

build_gitops_health() {
  cp "$SOURCE" main.go
  tool_log "fetching cli-utils $KSTATUS_VERSION, gopher-lua $GOPHER_LUA_VERSION, k8s.io modules $K8S_MODULES_VERSION"
  go get "sigs.k8s.io/cli-utils@$KSTATUS_VERSION" "github.com/yuin/gopher-lua@$GOPHER_LUA_VERSION" \
    "k8s.io/api@$K8S_MODULES_VERSION" "k8s.io/apimachinery@$K8S_MODULES_VERSION" >&2
  go mod tidy >&2
  tool_log "building horus-gitops-health"
  go build -trimpath -ldflags "-s -w" -o "$1" .
}

go_tool horus-gitops-health "$CACHE/gitops-health/$KEY" build_gitops_health
