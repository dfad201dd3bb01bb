#!/usr/bin/env bash
# System packages the project needs and Python/Go cannot bring: etcd from Debian, and openssl
# (the local cluster's service-account key). kubectl is compiled with the control plane
# (Debian's kubernetes-client is too old for v1.37).
set -euo pipefail
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v openssl >/dev/null || need+=(openssl)
command -v go >/dev/null || { echo "error: Go >= 1.26 is required to compile the control plane (Debian's golang-go is too old)" >&2; exit 1; }
if ((${#need[@]})); then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
