#!/usr/bin/env bash
# `make demo`: a local control plane with fake GPU nodes, the Horus operator, the examples and a burst
# of jobs that, with them, outnumbers the GPUs (so Horus has to choose who shares with whom), a live view of
# `kubectl get dljobs` until all finish, then a summary.
# Reuses a running local cluster; `make cluster-down` (or `horus cluster down`) stops it.
# HORUS_BINDING=dra binds the pods through DRA ResourceClaims (one per GPU, shared by its co-tenants, MPS
# limits from the predictions; allocated by kube-scheduler) instead of NVIDIA_VISIBLE_DEVICES.
# HORUS_BINDING=reserve holds each GPU Horus uses with a reservation pod asking the device plugin for
# nvidia.com/gpu (the fake agents report the GPU each was given), as on a GPU Operator cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
horus=.venv/bin/horus
python=.venv/bin/python
NAMESPACE=${HORUS_DEMO_NAMESPACE:-horus-demo}
export HORUS_BINDING=${HORUS_BINDING:-env}  # read by `horus run --binding`

if ! "$horus" cluster status >/dev/null 2>&1; then
  "$horus" cluster up
fi
export KUBECONFIG="$("$horus" cluster kubeconfig)"
kubectl() { "$horus" cluster kubectl "$@"; }
# Beside the V100s (16 GB), one node of 24 GB cards: where examples/llama-lora.yaml (Llama-2-7B LoRA,
# ~20 GiB) fits and nothing smaller does.
if ! kubectl get node rtx4090-node-0 >/dev/null 2>&1; then
  "$horus" cluster add-nodes --count 1 --gpus-per-node 2 --gpu-product NVIDIA-GeForce-RTX-4090 \
    --gpu-memory 24564 --name-prefix rtx4090-node
fi

echo "== fake GPU nodes (labels as NVIDIA GPU Feature Discovery writes them)"
kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count,nvidia.com/gpu.memory
echo

echo "== CRDs and the operator (horus run --binding $HORUS_BINDING, in the background; log in $(dirname "$KUBECONFIG")/operator.log)"
kubectl apply -k crds/
if [[ $HORUS_BINDING == reserve ]]; then
  kubectl apply -f manifests/namespace.yaml -f manifests/reservation.yaml >/dev/null
fi
kubectl wait --for=condition=Established crd/dljobs.horus.dev --timeout=60s >/dev/null
operator_log="$(dirname "$KUBECONFIG")/operator.log"
HORUS_LEASE_NAMESPACE=default HORUS_IDENTITY=demo HORUS_RESYNC_SECONDS=2 \
  "$horus" run -A --liveness "" --log-format plain >"$operator_log" 2>&1 &
operator_pid=$!
# The node agents with the fake NVML backend (kwok nodes have no GPUs): GPUNode telemetry, and
# status.observed beside status.predicted (`kubectl get gpunodes`, `kubectl get dljobs -o wide`); they
# also publish each node's GPUs as a ResourceSlice, as NVIDIA's DRA driver would (DRA binding).
"$horus" agent --backend fake --all-nodes --metrics-port 0 >"$(dirname "$KUBECONFIG")/agent.log" 2>&1 &
agent_pid=$!
trap 'kill "$operator_pid" "$agent_pid" 2>/dev/null || true' EXIT
echo

echo "== a fresh namespace $NAMESPACE: the examples, then enough jobs to fill every GPU"
kubectl delete namespace "$NAMESPACE" --ignore-not-found --wait=true >/dev/null
kubectl create namespace "$NAMESPACE" >/dev/null
kubectl apply -n "$NAMESPACE" -k examples/
gpus=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.labels.nvidia\.com/gpu\.count}{"\n"}{end}' |
  awk '{s += $1} END {print s}')
"$python" - "$gpus" <<'PY' | kubectl apply -n "$NAMESPACE" -f - >/dev/null
import json, sys
# Light jobs (an RL policy, a recommender) beside GPU-saturating ones: env-bound co-tenants time-slice,
# so two saturating jobs slow each other at least 2x and share only with a light one.
models = [("resnet18", 64), ("lstm-lm", 20), ("ppo", 64), ("mobilenet_v2", 32), ("resnet50", 32),
          ("neumf", 256), ("transformer", 32)]
jobs = []
for i in range(int(sys.argv[1])):
    model, batch = models[i % len(models)]
    jobs.append({
        "apiVersion": "horus.dev/v1alpha1", "kind": "DLJob", "metadata": {"name": f"burst-{i:02d}"},
        "spec": {"model": {"architecture": model}, "batchSize": batch,
                 "simulation": {"duration": f"{10 + 5 * (i % 3)}s"},
                 "template": {"spec": {"containers": [{"name": "train", "image": "example.invalid/train:1"}]}}},
    })
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}))
PY
echo "submitted the 5 examples and $gpus more jobs for $gpus GPUs"
sleep 2

finished() {  # every DLJob Succeeded or Failed
  kubectl get dljobs -n "$NAMESPACE" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
    awk '$0 != "Succeeded" && $0 != "Failed" {busy = 1} END {exit busy}'
}
until finished; do
  clear 2>/dev/null || true
  echo "== kubectl get dljobs -n $NAMESPACE   ($(date +%T); refreshes every 2 s)"
  kubectl get dljobs -n "$NAMESPACE" --sort-by=.status.node
  if [[ $HORUS_BINDING == dra ]]; then
    echo
    echo "== kubectl get resourceclaims -n $NAMESPACE   (allocated by kube-scheduler; reserved for the pods sharing them)"
    kubectl get resourceclaims -n "$NAMESPACE" \
      -o custom-columns='NAME:.metadata.name,DEVICE:.status.allocation.devices.results[0].device,RESERVED FOR:.status.reservedFor[*].name,MPS:.metadata.annotations.horus\.dev/sharing'
  fi
  if [[ $HORUS_BINDING == reserve ]]; then
    echo
    echo "== kubectl get pods -n horus-reservation   (one per GPU Horus uses; each holds nvidia.com/gpu: 1)"
    kubectl get pods -n horus-reservation \
      -o custom-columns='NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase,GPU:.metadata.annotations.reservation\.horus\.dev/gpu-uuid'
  fi
  sleep 2
done
echo "== final state"
kubectl get dljobs -n "$NAMESPACE" --sort-by=.status.node
echo

echo "== summary"
kubectl get dljobs -n "$NAMESPACE" -o json | "$python" -c '
import json, sys
from collections import Counter
jobs = json.load(sys.stdin)["items"]
status = [j.get("status", {}) for j in jobs]
phases = Counter(s.get("phase") for s in status)
gpus = {(s["node"], g["index"]) for s in status if s.get("node") for g in s.get("gpus", [])}
pairs = sorted({tuple(sorted([j["metadata"]["namespace"] + "/" + j["metadata"]["name"], other]))
                for j, s in zip(jobs, status) for other in s.get("colocatedWith", [])})
slowdowns = [s["predicted"]["slowdown"] for s in status if s.get("predicted")]
print(f"jobs: {len(jobs)}  ({dict(phases)})")
print(f"GPUs used: {len(gpus)}")
print(f"co-located pairs: {len(pairs)}")
for a, b in pairs[:10]:
    print(f"  {a}  +  {b}")
if slowdowns:
    shared = [x for x in slowdowns if x > 1.0]
    print(f"predicted slowdown: mean {sum(slowdowns)/len(slowdowns):.2f}x, max {max(slowdowns):.2f}x, "
          f"{len(shared)} jobs predicted slower than alone")
'
echo
echo "== GPU telemetry from the node agents (fake NVML backend)"
kubectl get gpunodes
echo
if [[ $HORUS_BINDING == dra ]]; then
  echo "== ResourceClaims left in $NAMESPACE (each is deleted once its last job ended)"
  kubectl get resourceclaims -n "$NAMESPACE"
  echo
fi
if [[ $HORUS_BINDING == reserve ]]; then
  echo "== reservation pods left (each is deleted once no job holds its GPU)"
  kubectl get pods -n horus-reservation
  echo
fi
echo "KUBECONFIG=$KUBECONFIG   (stop it with: make cluster-down)"
