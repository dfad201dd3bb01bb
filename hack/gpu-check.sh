#!/usr/bin/env bash
# Real-GPU check of the agent's NVML path (horus_operator/agent/nvml.py). NOT RUNNABLE on machines
# without an NVIDIA GPU and driver: it was prepared without one and has never run (see docs/agent.md).
#
# What it does, on one GPU, with no Kubernetes involved:
#   1. samples the GPU through PynvmlBackend while nothing runs (idle baseline);
#   2. runs training loop A alone, then loop B alone, sampling throughout (utilization, memory,
#      per-process samples; each loop prints its steps/s);
#   3. runs A and B together on the same GPU: their shared steps/s give a measured slowdown;
#   4. writes a report (markdown) with every number measured, to $REPORT (default
#      docs/gpu-check-report.md), in the co-location CSV format too.
#
# Needs: python with torch (CUDA build) and this package installed (`pip install -e .`).
# Usage: hack/gpu-check.sh [seconds-per-phase]    (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."

PHASE_SECONDS="${1:-60}"
PYTHON="${PYTHON:-.venv/bin/python}"
REPORT="${REPORT:-docs/gpu-check-report.md}"
GPU_INDEX="${GPU_INDEX:-0}"
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this machine has no NVIDIA driver" >&2; exit 2; }
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || { echo "torch with CUDA is required (pip install torch)" >&2; exit 2; }

# A small, deterministic training loop on synthetic data; prints its mean steps/s when it ends.
cat >"$WORK/train.py" <<'PY'
import sys, time, torch
from torch import nn
kind, seconds, batch = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
dev = torch.device("cuda")
if kind == "cnn":
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(dev)
    x, y = torch.randn(batch, 3, 64, 64, device=dev), torch.randint(0, 10, (batch,), device=dev)
else:  # "mlp": a different interference profile (GEMM-bound)
    model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(dev)
    x, y = torch.randn(batch, 4096, device=dev), torch.randint(0, 10, (batch,), device=dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
for _ in range(10):  # warm-up (cuDNN autotuning, allocator)
    opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
torch.cuda.synchronize()
steps, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step(); steps += 1
torch.cuda.synchronize()
print(f"{kind} {batch} {steps / (time.perf_counter() - start):.4f}", flush=True)
PY

# Samples through the agent's real backend every 0.5 s until killed; one JSON line per sample.
cat >"$WORK/sample.py" <<'PY'
import json, sys, time
from horus_operator.agent.nvml import PynvmlBackend
from horus_operator.agent.readings import NvmlUnavailableError
backend, gpu_index = PynvmlBackend(), int(sys.argv[1])
while True:
    try:
        s = backend.sample([], time.time())
        g = s.gpus[gpu_index]
        procs = [{"pid": p.pid, "memoryMiB": round(p.memory_mib), "utilization": p.utilization, "podUid": p.pod_uid}
                 for p in s.processes if p.gpu_index == gpu_index]
        print(json.dumps({"t": s.taken_at, "uuid": g.uuid, "product": g.product, "util": g.utilization,
                          "memUsedMiB": round(g.memory_used_mib), "memTotalMiB": g.memory_total_mib,
                          "processes": procs}), flush=True)
    except NvmlUnavailableError as error:
        print(json.dumps({"t": time.time(), "error": str(error)}), flush=True)
    time.sleep(0.5)
PY

phase() {  # phase NAME: sample while the given training loops run
  local name="$1"; shift
  "$PYTHON" "$WORK/sample.py" "$GPU_INDEX" >"$WORK/$name.samples" &
  local sampler=$!
  local pids=()
  for spec in "$@"; do
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES="$GPU_INDEX" "$PYTHON" "$WORK/train.py" $spec "$PHASE_SECONDS" >>"$WORK/$name.rates" &
    pids+=($!)
  done
  if ((${#pids[@]})); then wait "${pids[@]}"; else sleep "$PHASE_SECONDS"; fi
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
}

A="cnn 128"
B="mlp 512"
echo "idle…";   phase idle
echo "A alone…"; phase alone_a "$A"
echo "B alone…"; phase alone_b "$B"
echo "A + B…";  phase shared "$A" "$B"

"$PYTHON" - "$WORK" "$REPORT" "$PHASE_SECONDS" <<'PY'
import json, statistics, sys, subprocess
from pathlib import Path
work, report, seconds = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
def samples(name):
    return [json.loads(l) for l in (work / f"{name}.samples").read_text().splitlines() if l.strip()]
def rates(name):
    path = work / f"{name}.rates"
    return {tuple(l.split()[:2]): float(l.split()[2]) for l in path.read_text().splitlines()} if path.exists() else {}
def summary(name):
    ok = [s for s in samples(name) if "error" not in s]
    errors = len(samples(name)) - len(ok)
    if not ok:
        return f"| {name} | no samples ({errors} NVML errors) | | | |"
    procs = max(len(s["processes"]) for s in ok)
    return (f"| {name} | {statistics.fmean(s['util'] for s in ok):.3f} | {max(s['memUsedMiB'] for s in ok)} "
            f"| {procs} | {len(ok)} ok / {errors} errors |")
alone = {**rates("alone_a"), **rates("alone_b")}
shared = rates("shared")
first = next((s for s in samples("idle") if "error" not in s), {})
lines = [
    "# Real-GPU check of the Horus agent's NVML path", "",
    f"Produced by `hack/gpu-check.sh` ({seconds} s per phase). Every number below was measured by that run.", "",
    f"GPU: {first.get('product', '?')} ({first.get('uuid', '?')}), {first.get('memTotalMiB', '?')} MiB.",
    f"Driver: `{subprocess.run(['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'], capture_output=True, text=True).stdout.strip()}`", "",
    "| phase | mean util | peak memory MiB | max processes seen | samples |", "|---|---|---|---|---|",
    *(summary(n) for n in ("idle", "alone_a", "alone_b", "shared")), "",
    "| job | steps/s alone | steps/s shared | slowdown (alone / shared) |", "|---|---|---|---|",
]
for job, rate in alone.items():
    s = shared.get(job)
    lines.append(f"| {' '.join(job)} | {rate:.3f} | {s:.3f} | {rate / s:.3f} |" if s else f"| {' '.join(job)} | {rate:.3f} | ? | ? |")
keys = list(alone)
if len(keys) == 2 and all(k in shared for k in keys):
    (ma, ba), (mb, bb) = keys
    lines += ["", "As a co-location CSV row (`horus train slowdown --data`; set `gpu` to the trained type):", "",
              "```", "gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared",
              f"?,{ma},{ba},{mb},{bb},{alone[keys[0]]:.4f},{alone[keys[1]]:.4f},{shared[keys[0]]:.4f},{shared[keys[1]]:.4f}",
              "```"]
report.parent.mkdir(parents=True, exist_ok=True)
report.write_text("\n".join(lines) + "\n")
print(report.read_text())
PY
