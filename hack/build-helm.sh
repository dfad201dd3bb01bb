#!/usr/bin/env bash
# Build helm (v4) from its Go module, cached by version, like hack/build-control-plane.sh builds
# the control plane: nothing prebuilt is downloaded. charts/horus is linted (`make lint`),
# rendered and installed (tests) with it.
#
# Version: HELM_VERSION in hack/control-plane.env (HORUS_HELM_VERSION overrides).
# Output: $HORUS_CACHE/helm/<version>/bin/helm, written under a temporary name and renamed into
# place, so an interrupted build leaves nothing half-written; with it present the script exits at once.
# Its stdout is the binary's path and nothing else (the build's log goes to stderr), so callers run
#   helm=$(bash hack/build-helm.sh)
set -euo pipefail

# shellcheck source=control-plane.env
source "$(dirname "${BASH_SOURCE[0]}")/control-plane.env"
HELM_VERSION="${HORUS_HELM_VERSION:-$HELM_VERSION}"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}"
OUT="$CACHE/helm/$HELM_VERSION"
BIN="$OUT/bin"

if [[ -x "$BIN/helm" ]]; then echo "$BIN/helm"; exit 0; fi
# One build at a time per version: a second caller waits, then finds it built.
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if [[ -x "$BIN/helm" ]]; then echo "$BIN/helm"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required (https://go.dev/dl)" >&2; exit 1; }
log() { printf '[build-helm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
start=$SECONDS
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$BIN"
rm -f "$BIN/.helm.tmp"
rm -rf "$OUT/src"; mkdir -p "$OUT/src"; cd "$OUT/src"
go mod init horus.local/helm >/dev/null 2>&1
log "fetching helm.sh/helm/v4@$HELM_VERSION"
go get -tool "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
log "building helm $HELM_VERSION"
# The version helm reports (`helm version`); upstream's Makefile sets the same variable.
go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  -o "$BIN/.helm.tmp" helm.sh/helm/v4/cmd/helm
mv "$BIN/.helm.tmp" "$BIN/helm"
log "done in $((SECONDS - start))s"
echo "$BIN/helm"
