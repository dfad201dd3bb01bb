#!/usr/bin/env bash
# Build the local control plane from Go modules, cached by version.
#
# kube-apiserver, kube-scheduler, kube-controller-manager (garbage collector: owner
# references cascade) and kubectl come from the k8s.io/kubernetes module at one pinned
# release; etcd from go.etcd.io/etcd/server/v3 at the version that release's own go.mod
# requires; kwok from sigs.k8s.io/kwok. Each lives in a scratch module of its own. Nothing
# prebuilt is downloaded: everything is compiled from the Go module proxy.
#
# Versions: hack/control-plane.env (HORUS_K8S_VERSION / HORUS_KWOK_VERSION override).
# Output: $HORUS_CACHE/control-plane/<k8s-version>-kwok-<kwok-version>/bin. Every binary is
# built only if missing; a `.complete` stamp is written last, and with it present (and every
# binary there) the script exits at once.
#
# Restartable: a run stopped anywhere (killed, a failed download, a full disk) leaves only
# whole files behind. Each binary and the kwok stages are written under a temporary name and
# renamed into place when complete, so the next run keeps what finished and rebuilds the rest.
#
# No pipeline here may end with a reader that stops early (`| head`, `| grep -q`): under
# pipefail the writer's SIGPIPE (exit 141) would fail the build (tests/unit/test_scripts.py).
set -euo pipefail

# shellcheck source=control-plane.env
source "$(dirname "${BASH_SOURCE[0]}")/control-plane.env"
K8S_VERSION="${HORUS_K8S_VERSION:-$K8S_VERSION}"
KWOK_VERSION="${HORUS_KWOK_VERSION:-$KWOK_VERSION}"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}"
OUT="$CACHE/control-plane/$K8S_VERSION-kwok-$KWOK_VERSION"
BIN="$OUT/bin"
STAMP="$OUT/.complete"
K8S_CMDS=(kube-apiserver kube-scheduler kube-controller-manager kubectl)
ALL_BINARIES=("${K8S_CMDS[@]}" etcd kwok)

missing() { for b in "$@"; do [[ -x "$BIN/$b" ]] || return 0; done; return 1; }
exit_if_built() {
  if [[ -f "$STAMP" ]] && ! missing "${ALL_BINARIES[@]}"; then
    echo "control plane $K8S_VERSION (kwok $KWOK_VERSION) already built in $BIN"
    exit 0
  fi
}

exit_if_built
# One build at a time per output directory: a second caller (another shell, the e2e fixture)
# waits here and then finds everything built.
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
exit_if_built

command -v go >/dev/null || { echo "error: Go is required (https://go.dev/dl)" >&2; exit 1; }
log() { printf '[build-control-plane %(%H:%M:%S)T] %s\n' -1 "$*"; }
start=$SECONDS
mkdir -p "$BIN"
rm -f "$STAMP"
# Leftovers of an interrupted run: never trusted, always redone.
rm -rf "$BIN"/.*.tmp "$OUT"/.kwok-stages.tmp
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# A fresh scratch module in $OUT/src/<name>; the caller is left inside it.
scratch_module() {
  rm -rf "$OUT/src/$1"; mkdir -p "$OUT/src/$1"; cd "$OUT/src/$1"
  go mod init "horus.local/$1" >/dev/null 2>&1
}

# go build into a temporary name, then rename: an interrupted build leaves no half-written binary.
build_to_bin() { # <name> <ldflags> <package>
  log "building $1"
  go build -trimpath -ldflags "$2" -o "$BIN/.$1.tmp" "$3"
  mv "$BIN/.$1.tmp" "$BIN/$1"
}

log "resolving k8s.io/kubernetes@$K8S_VERSION"
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[[ -f "$gomod" ]] || { echo "error: k8s.io/kubernetes@$K8S_VERSION not found on the module proxy" >&2; exit 1; }

if missing "${K8S_CMDS[@]}"; then
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  staging="v0.${K8S_VERSION#v1.}"
  scratch_module kubernetes
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
    missing "$c" && build_to_bin "$c" "$LD" "k8s.io/kubernetes/cmd/$c"
  done
fi

if missing etcd; then
  # Debian's etcd 3.4 lacks watch-progress requests: kube-apiserver >= 1.35 then refuses the
  # streaming lists that client-go >= 1.35 informers (kwok's among them) open, and they stall.
  # Use the etcd this Kubernetes release is developed against.
  ETCD_VERSION=$(sed -n 's/^\s*go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\).*/\1/p' "$gomod")
  [[ -n "$ETCD_VERSION" ]] || { echo "error: no go.etcd.io/etcd/server/v3 in $gomod" >&2; exit 1; }
  scratch_module etcd
  # etcd's own main package is this one call, in a module that cannot be a dependency.
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  build_to_bin etcd "-s -w" .
fi

if missing kwok || [[ ! -d "$OUT/kwok-stages" ]]; then
  scratch_module kwok
  go get -tool "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  build_to_bin kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok
  # kwok's stock stages ship inside its module; keep a copy beside the binaries.
  kdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  cp -r "$kdir/kustomize/stage" "$OUT/.kwok-stages.tmp"; chmod -R u+w "$OUT/.kwok-stages.tmp"
  rm -rf "$OUT/kwok-stages"; mv "$OUT/.kwok-stages.tmp" "$OUT/kwok-stages"
fi

"$BIN/kube-apiserver" --version
etcd_version=$("$BIN/etcd" --version)
echo "${etcd_version%%$'\n'*}"
echo "$K8S_VERSION kwok $KWOK_VERSION built in $((SECONDS - start))s" > "$STAMP"
log "done in $((SECONDS - start))s: $BIN"
