# One cached build of a single-binary Go tool from its modules (helm, the GitOps health checker), for
# scripts that `source` this after `set -euo pipefail`: nothing prebuilt is downloaded. The binary is
# written under a temporary name and renamed into place, so an interrupted build leaves nothing
# half-written; with it present the build is skipped at once; a second caller waits on the lock and
# then finds it built. stdout is the binary's path and nothing else (the build's log goes to stderr),
# so callers run `tool=$(bash hack/build-….sh)`.
#
#   build() { go get …; go build … -o "$1" …; }   # run inside a fresh scratch module; $1: the output
#   go_tool NAME OUT build                         # OUT: the cache directory of this version

# shellcheck source=../control-plane.env
source "$(dirname "${BASH_SOURCE[0]}")/../control-plane.env"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}"

tool_log() { printf '[build %s %(%H:%M:%S)T] %s\n' "$TOOL" -1 "$*" >&2; }

go_tool() {
  local out=$2 build=$3
  TOOL=$1
  local bin="$out/bin"
  if [[ -x "$bin/$TOOL" ]]; then echo "$bin/$TOOL"; return 0; fi
  mkdir -p "$out"
  exec 9>"$out/.lock"
  flock 9
  if [[ -x "$bin/$TOOL" ]]; then echo "$bin/$TOOL"; return 0; fi

  command -v go >/dev/null || { echo "error: Go is required (https://go.dev/dl)" >&2; exit 1; }
  local start=$SECONDS
  export CGO_ENABLED=0 GOFLAGS=-mod=mod
  mkdir -p "$bin"
  rm -f "$bin/.$TOOL.tmp"
  rm -rf "$out/src"
  mkdir -p "$out/src"
  (
    cd "$out/src"
    go mod init "horus.local/$TOOL" >/dev/null 2>&1
    "$build" "$bin/.$TOOL.tmp"
  )
  mv "$bin/.$TOOL.tmp" "$bin/$TOOL"
  tool_log "done in $((SECONDS - start))s"
  echo "$bin/$TOOL"
}
