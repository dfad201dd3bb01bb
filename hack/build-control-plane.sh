#!/usr/bin/env bash
# Build the local control plane from Go modules, cached by version.
#
# kube-apiserver, kube-scheduler, kube-controller-manager (garbage collector: owner
# references cascade) and kubectl come from the k8s.io/kubernetes module at one pinned
# release; kwok from sigs.k8s.io/kwok in a module of its own. Nothing prebuilt is
# downloaded: everything is compiled from the Go module proxy.
#
# Output: $HORUS_CACHE/control-plane/<k8s-version>/bin. A second run finds a complete
# bin directory (with a stamp file) and exits at once.
set -euo pipefail

K8S_VERSION="${HORUS_K8S_VERSION:-v1.37.2}"
KWOK_VERSION="${HORUS_KWOK_VERSION:-v0.8.0}"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}"
OUT="$CACHE/control-plane/$K8S_VERSION-kwok-$KWOK_VERSION"
BIN="$OUT/bin"
STAMP="$OUT/.complete"
K8S_CMDS=(kube-apiserver kube-scheduler kube-controller-manager kubectl)

if [[ -f "$STAMP" ]]; then
  echo "control plane $K8S_VERSION (kwok $KWOK_VERSION) already built in $BIN"
  exit 0
fi

command -v go >/dev/null || { echo "error: Go is required (https://go.dev/dl)" >&2; exit 1; }
log() { printf '[build-control-plane %(%H:%M:%S)T] %s\n' -1 "$*"; }
start=$SECONDS
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
staging="v0.${K8S_VERSION#v1.}"

log "resolving k8s.io/kubernetes@$K8S_VERSION"
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[[ -f "$gomod" ]] || { echo "error: k8s.io/kubernetes@$K8S_VERSION not found on the module proxy" >&2; exit 1; }

work="$OUT/src/kubernetes"
rm -rf "$work"; mkdir -p "$work"
cd "$work"
go mod init horus.local/control-plane >/dev/null 2>&1
# k8s.io/kubernetes replaces its staging modules with ./staging/...; those replaces are
# ignored for a dependency, so pin each one to its published v0.<minor>.<patch>.
# Sample-only staging modules may not be published: an empty local module stands in.
empty="$OUT/src/empty"
for mod in $(grep -o 'k8s.io/[a-z0-9-]* => ./staging' "$gomod" | cut -d' ' -f1); do
  if [[ "$mod" == k8s.io/sample-* ]]; then
    mkdir -p "$empty/${mod#k8s.io/}"
    echo "module $mod" > "$empty/${mod#k8s.io/}/go.mod"
    go mod edit -replace "$mod=$empty/${mod#k8s.io/}"
  else
    go mod edit -replace "$mod=$mod@$staging"
  fi
done
log "fetching modules (first run downloads a few hundred MiB)"
tools=()
for c in "${K8S_CMDS[@]}"; do tools+=("k8s.io/kubernetes/cmd/$c@$K8S_VERSION"); done
go get -tool "${tools[@]}"

LD="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
for c in "${K8S_CMDS[@]}"; do
  log "building $c $K8S_VERSION"
  go build -trimpath -ldflags "$LD" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c"
done

log "building kwok $KWOK_VERSION"
kwork="$OUT/src/kwok"
rm -rf "$kwork"; mkdir -p "$kwork"; cd "$kwork"
go mod init horus.local/kwok >/dev/null 2>&1
go get -tool "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" -o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok
# kwok's stock stages ship inside its module; keep a copy beside the binaries.
kdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
rm -rf "$OUT/kwok-stages"; cp -r "$kdir/kustomize/stage" "$OUT/kwok-stages"; chmod -R u+w "$OUT/kwok-stages"

"$BIN/kube-apiserver" --version
echo "$K8S_VERSION kwok $KWOK_VERSION built in $((SECONDS - start))s" > "$STAMP"
log "done in $((SECONDS - start))s: $BIN"
