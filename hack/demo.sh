#!/usr/bin/env bash
# `make demo`: a local control plane with fake GPU nodes, then what the cluster looks like.
# Reuses a running local cluster; `make cluster-down` (or `horus cluster down`) stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
horus=.venv/bin/horus

if ! "$horus" cluster status >/dev/null 2>&1; then
  "$horus" cluster up
fi
export KUBECONFIG="$("$horus" cluster kubeconfig)"
kubectl() { "$horus" cluster kubectl "$@"; }

echo "== fake GPU nodes (labels as NVIDIA GPU Feature Discovery writes them)"
kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count,nvidia.com/gpu.memory
echo
echo "KUBECONFIG=$KUBECONFIG   (stop it with: make cluster-down)"
