#!/usr/bin/env bash
# Build the operator image horus-operator:<version> without a container engine (docs/image.md).
#
# A Debian bookworm root filesystem comes from Debian's packages (mmdebstrap, variant "essential"
# plus python3 and libstdc++6, which manylinux wheels such as numpy's and onnx's link against but do
# not bundle: no apt, no compiler); the project's wheel and its runtime dependencies (pyproject's
# main dependencies, never the `train` extra) install into the venv /opt/horus inside it, from
# wheels downloaded here, with --no-index. umoci writes that tree as the image's single layer;
# skopeo turns the OCI layout into a docker-archive for `kind load image-archive`.
#
# Output: out/image/horus-operator-<version>.oci.tar (oci-archive), .docker.tar (docker-archive) and
# bundle/ (the unpacked image as an OCI runtime bundle, what tests/e2e/test_image.py runs).
# Cached in $HORUS_CACHE/image: Debian's .debs and the wheels, reused by the next build. The
# archives are keyed by a hash of their inputs (this script, pyproject.toml, README.md,
# horus_operator/): while it is unchanged the script reports the image and exits.
#
# Reproducible: SOURCE_DATE_EPOCH (unless set, the time of the last commit that touched the inputs)
# fixes every file's mtime (clamped), the image's creation time and the .pyc invalidation mode
# (checked hashes, not mtimes); every tar is sorted by name with numeric owners. What is not fixed
# is what the Debian mirror and the package index serve: docs/image.md, "Reproducibility".
#
# HORUS_DEBIAN_MIRROR: a Debian mirror URI (a dated snapshot, say) instead of Debian's default.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${HORUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/horus}/image"
OUT="$REPO/out/image"
PYTHON="${PYTHON:-python3}"
NAME=horus-operator
VERSION=$("$PYTHON" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
OCI_ARCHIVE="$OUT/$NAME-$VERSION.oci.tar"
DOCKER_ARCHIVE="$OUT/$NAME-$VERSION.docker.tar"
BUNDLE="$OUT/bundle"
STAMP="$OUT/.inputs"
SOURCES=(pyproject.toml README.md horus_operator)  # what the wheel is built from
INPUTS=(hack/build-image.sh "${SOURCES[@]}")
# The uid/gid the manifests run as (runAsUser/runAsGroup), and the image's default user.
NONROOT=65532
ARCH=$(dpkg --print-architecture)
# Debian bookworm's python3 is CPython 3.11 on glibc 2.36: the wheels are chosen for exactly that.
# pip takes a given --platform literally, so every manylinux tag glibc 2.36 runs is listed.
WHEEL_TARGET=(--python-version 3.11 --implementation cp --abi cp311)
for glibc_minor in $(seq 36 -1 17); do WHEEL_TARGET+=(--platform "manylinux_2_${glibc_minor}_$(uname -m)"); done
WHEEL_TARGET+=(--platform "manylinux2014_$(uname -m)")

for tool in mmdebstrap umoci skopeo; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing (hack/install-deps.sh installs it)" >&2; exit 1; }
done
# mmdebstrap's root mode, chroot and umoci unpack; unprivileged alternatives exist but are not tested.
[[ $(id -u) -eq 0 ]] || { echo "error: make image runs as root" >&2; exit 1; }
log() { printf '[build-image %(%H:%M:%S)T] %s\n' -1 "$*"; }
# The files below the given paths that git tracks or would track, NUL-separated.
files() { git ls-files -z --cached --others --exclude-standard "$@"; }
report() {
  local layer_mib
  layer_mib=$(du -sm --apparent-size "$BUNDLE/rootfs" | cut -f1)
  log "$NAME:$VERSION: $(du -m --apparent-size "$OCI_ARCHIVE" | cut -f1) MiB compressed," \
    "$layer_mib MiB unpacked: $OCI_ARCHIVE, $DOCKER_ARCHIVE"
}

export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct -- "${INPUTS[@]}")}"
inputs=$({ echo "$SOURCE_DATE_EPOCH"; files "${INPUTS[@]}" | sort -z | xargs -0 sha256sum; } | sha256sum)
up_to_date() { [[ -f "$STAMP" && "$(cat "$STAMP")" == "$inputs" ]]; }
if up_to_date; then report; exit 0; fi
# One build at a time: a second caller (another shell, the e2e fixture) waits, then finds it built.
mkdir -p "$CACHE/debs" "$CACHE/wheels" "$OUT"
exec 9>"$CACHE/.lock"
flock 9
if up_to_date; then report; exit 0; fi
start=$SECONDS
rm -f "$STAMP"
WORK="$OUT/.work"
rm -rf "$WORK" && mkdir -p "$WORK/project" "$WORK/wheels"

log "wheels: the project's, then its runtime dependencies for CPython 3.11 (downloads once)"
# From a copy of the inputs: setuptools' build/ in the work tree would carry deleted modules along.
mkdir "$WORK/src"
files "${SOURCES[@]}" | tar --null --files-from=- --create --file=- | tar --extract --file=- --directory="$WORK/src"
# (setuptools' deprecation warnings about pyproject's license table are not this build's concern)
PYTHONWARNINGS=ignore "$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$WORK/project" "$WORK/src"
"$PYTHON" -m pip download -q --only-binary=:all: "${WHEEL_TARGET[@]}" --dest "$CACHE/wheels" \
  --find-links "$CACHE/wheels" pip "$WORK"/project/*.whl
# pip download copies the project's wheel there too: the cache keeps only what the index served.
rm -f "$CACHE"/wheels/horus_operator-*.whl
cp "$CACHE"/wheels/*.whl "$WORK"/project/*.whl "$WORK/wheels/"

log "root filesystem: Debian bookworm's essential packages, python3 and libstdc++6, then the venv /opt/horus"
mirrors=()
[[ -n "${HORUS_DEBIAN_MIRROR:-}" ]] && mirrors=("$HORUS_DEBIAN_MIRROR")
# Hooks run on this machine with the root filesystem's path as $1.
install_horus="chroot \"\$1\" python3 -m venv --without-pip /opt/horus
  pip_wheel=\$(cd \"\$1\" && echo tmp/wheels/pip-*.whl)
  chroot \"\$1\" env -i PATH=/usr/bin:/bin SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH /opt/horus/bin/python \
    \"/\$pip_wheel/pip\" install -q --no-index --find-links /tmp/wheels --no-cache-dir \
    --disable-pip-version-check --root-user-action=ignore horus-operator==$VERSION"
add_nonroot="echo 'nonroot:x:$NONROOT:$NONROOT:nonroot:/tmp:/usr/sbin/nologin' >> \"\$1/etc/passwd\"
  echo 'nonroot:x:$NONROOT:' >> \"\$1/etc/group\""
# Nothing a running container needs: package caches and logs, and the build's own leftovers.
clean_up='rm -rf "$1"/tmp/wheels "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/* \
  "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old
  for compiler in cc gcc g++ c++ clang; do [ ! -e "$1/usr/bin/$compiler" ] || { echo "$compiler inside" >&2; exit 1; }; done'
mmdebstrap --quiet --variant=essential --include=python3,libstdc++6 --architectures="$ARCH" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --skip=essential/unlink \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives' --setup-hook="sync-in $CACHE/debs /var/cache/apt/archives" \
  --customize-hook="sync-out /var/cache/apt/archives $CACHE/debs" \
  --customize-hook="copy-in $WORK/wheels /tmp" --customize-hook="$install_horus" \
  --customize-hook="$add_nonroot" --customize-hook="$clean_up" \
  bookworm "$WORK/rootfs.tar" "${mirrors[@]}"

log "OCI image: one layer, the configuration the Deployment relies on"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
image="$WORK/oci:$VERSION"
umoci init --layout "$WORK/oci"
umoci new --image "$image"
umoci raw add-layer --image "$image" --history.created "$created" --history.created_by "hack/build-image.sh" \
  "$WORK/rootfs.tar"
umoci config --image "$image" --no-history --created "$created" --architecture "$ARCH" --os linux \
  --config.user "$NONROOT:$NONROOT" --config.workingdir /tmp \
  --config.entrypoint horus --config.cmd run --config.exposedports 8080/tcp \
  --config.env PATH=/opt/horus/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 --config.env HOME=/tmp \
  --config.label "org.opencontainers.image.version=$VERSION" \
  --config.label "org.opencontainers.image.title=$NAME"
umoci gc --layout "$WORK/oci"

rm -rf "$OCI_ARCHIVE" "$DOCKER_ARCHIVE" "$BUNDLE"
tar --create --file "$OCI_ARCHIVE" --directory "$WORK/oci" --sort=name --mtime="@$SOURCE_DATE_EPOCH" \
  --owner=0 --group=0 --numeric-owner --format=posix --pax-option=delete=atime,delete=ctime .
skopeo copy --quiet "oci:$image" "docker-archive:$DOCKER_ARCHIVE:$NAME:$VERSION"
umoci unpack --image "$image" "$BUNDLE" >/dev/null
rm -rf "$WORK"
echo "$inputs" > "$STAMP"
log "built in $((SECONDS - start))s"
report
