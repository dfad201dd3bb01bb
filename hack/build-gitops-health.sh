#!/usr/bin/env bash
# Build hack/gitops-health (horus-gitops-health) from its Go modules, cached, like
# hack/build-helm.sh builds helm: nothing prebuilt is downloaded. It evaluates DLJobs the way Flux
# (kstatus, sigs.k8s.io/cli-utils) and Argo CD (a Lua health check run by gopher-lua) do;
# tests/e2e/test_gitops_health.py runs it on objects read back from the local control plane.
#
# Versions: KSTATUS_VERSION (cli-utils) and GOPHER_LUA_VERSION below (HORUS_KSTATUS_VERSION,
# HORUS_GOPHER_LUA_VERSION override); k8s.io/api and apimachinery at the control plane's
# (K8S_VERSION in hack/control-plane.env, as v0.x), whose modules that build already downloaded.
# Output: $HORUS_CACHE/gitops-health/<versions>-<hash of main.go>/bin/horus-gitops-health, written
# under a temporary name and renamed into place; with it present the script exits at once. Its
# stdout is the binary's path and nothing else (the build's log goes to stderr).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=control-plane.env
source "$HERE/control-plane.env"
KSTATUS_VERSION="${HORUS_KSTATUS_VERSION:-v0.37.2}"
GOPHER_LUA_VERSION="${HORUS_GOPHER_LUA_VERSION:-v1.1.2}"
K8S_MODULES_VERSION="v0.${K8S_VERSION#v1.}"
SOURCE="$HERE/gitops-health/main.go"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}"
KEY="$KSTATUS_VERSION-$GOPHER_LUA_VERSION-$K8S_MODULES_VERSION-$(sha256sum "$SOURCE" | cut -c1-12)"
OUT="$CACHE/gitops-health/$KEY"
BIN="$OUT/bin"

if [[ -x "$BIN/horus-gitops-health" ]]; then echo "$BIN/horus-gitops-health"; exit 0; fi
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if [[ -x "$BIN/horus-gitops-health" ]]; then echo "$BIN/horus-gitops-health"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required (https://go.dev/dl)" >&2; exit 1; }
log() { printf '[build-gitops-health %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
start=$SECONDS
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$BIN"
rm -f "$BIN/.horus-gitops-health.tmp"
rm -rf "$OUT/src"; mkdir -p "$OUT/src"; cd "$OUT/src"
cp "$SOURCE" main.go
go mod init horus.local/gitops-health >/dev/null 2>&1
log "fetching cli-utils $KSTATUS_VERSION, gopher-lua $GOPHER_LUA_VERSION, k8s.io modules $K8S_MODULES_VERSION"
go get "sigs.k8s.io/cli-utils@$KSTATUS_VERSION" "github.com/yuin/gopher-lua@$GOPHER_LUA_VERSION" \
  "k8s.io/api@$K8S_MODULES_VERSION" "k8s.io/apimachinery@$K8S_MODULES_VERSION" >&2
go mod tidy >&2
log "building horus-gitops-health"
go build -trimpath -ldflags "-s -w" -o "$BIN/.horus-gitops-health.tmp" .
mv "$BIN/.horus-gitops-health.tmp" "$BIN/horus-gitops-health"
log "done in $((SECONDS - start))s"
echo "$BIN/horus-gitops-health"
