#!/usr/bin/env bash
# System packages the project needs and Python/Go cannot bring: openssl (the local cluster's
# service-account key); mmdebstrap, umoci and skopeo (`make image`: a Debian root filesystem written
# as an OCI image without a container engine) and runc (tests/e2e/test_image.py runs that image; crun
# 1.8 in bookworm refuses hosts with cgroup v1 and v2 mounted side by side, runc does not).
# Everything else of the control plane — etcd, kube-apiserver, kubectl, kwok — is compiled by
# hack/build-control-plane.sh (Debian's etcd 3.4 and kubectl 1.20 are too old for Kubernetes 1.37),
# which needs Go >= 1.26, as do hack/build-helm.sh (helm, for charts/horus) and hack/build-kueue.sh
# (Kueue, for tests/e2e/test_kueue.py, whose manager runs under util-linux's unshare). gcc compiles
# what mypyc writes (`make test-compiled`); the Python that made .venv brings its own headers.
set -euo pipefail
need=()
command -v openssl >/dev/null || need+=(openssl)
{ command -v flock && command -v unshare; } >/dev/null || need+=(util-linux)
command -v gcc >/dev/null || need+=(gcc)  # make test-compiled: mypyc's C (hack/compile.py)
for tool in mmdebstrap umoci skopeo runc; do command -v "$tool" >/dev/null || need+=("$tool"); done
command -v go >/dev/null || { echo "error: Go >= 1.26 is required to compile the control plane (Debian's golang-go is too old)" >&2; exit 1; }
if ((${#need[@]})); then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
