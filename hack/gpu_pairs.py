"""Catalog models training alone and in co-located pairs on one GPU, read through the agent's NVML path.

Needs the package with its [catalog] extra (torch, a CUDA build; torchvision, transformers) on a GPU
machine. Run from the repository root:

    python hack/gpu_pairs.py --out DIR [--seconds 3.5] [--budget 420] [--configs resnet50:64,gpt2:4]

Each configuration (a catalog entry and a batch size) is one worker process that builds the entry's
reference module (`hack/catalog/torch_models.py`, random weights, synthetic inputs of the entry's sample
shape) and trains it in fp32 with PyTorch's defaults: forward, the mean of its outputs as the loss,
backward, SGD with momentum. The workers stay up, so a run is a signal, not a process start: alone, one
worker trains for `--seconds`; in a pair, two train at once on the same GPU, time-sliced by the driver
(no MPS), as two pods given one GPU by NVIDIA_VISIBLE_DEVICES are. Steps/s counts the steps whose work
finished in the window (the window ends after a device synchronize).

While a run goes, the coordinator samples the GPU through `horus_operator.agent.nvml.PynvmlBackend`,
the agent's real backend, every 0.2 s. Writes, as it goes (a run cut short keeps what was measured):
`isolated.csv`, `pairs.csv` (Gavel's columns, `data/README.md`), `nvml.jsonl` (every sample),
`gpunode.json` (the GPUNode status the agent would publish for the last pair) and `provenance.json`.
Pairs are measured in a seeded random order, so a run cut by `--budget` holds a spread of them.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import multiprocessing as mp
import os
import platform
import random
import sys
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "hack")]

DEFAULT_CONFIGS = (
    # Gavel's job types (its pairs on K80/P100/V100 are the slowdown model's training data)
    "resnet18:64,resnet50:64,transformer:64,lstm-lm:20,recommendation:2048,cyclegan:1,"
    # and models the training data never saw
    "gpt2:4,bert_en_uncased_L-4_H-256_A-4:32,mobilenet_v3_small:32,efficientnet_b0:64"
)
WARM_S = 0.5  # steps before each window, not counted (clocks up, allocator warm)


def _tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _tensors(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _tensors(v)]
    return []


def _batched(example: Any, batch: int, device: str) -> Any:
    """An example input at batch size 1 repeated to `batch` along its first axis."""
    if example.dim() >= 1 and example.shape[0] == 1:
        example = example.expand(batch, *example.shape[1:]).contiguous()
    return example.to(device)


def worker(conn: Any, name: str, batch: int, device: str, read_loss: bool) -> None:
    """Build and warm one configuration, then train for each window the coordinator asks for;
    `read_loss`: read the loss back each step (`loss.item()`, a loop that logs it), which waits for the
    step's GPU work, as data loading and logging do in real loops."""
    import torch
    from catalog import torch_models
    from catalog.entries import ENTRIES

    key = next(entry.key for entry in ENTRIES if entry.name == name)
    torch.manual_seed(0)
    module, examples = torch_models.BUILDERS[key]()
    module = module.to(device).train()
    inputs = tuple(_batched(x, batch, device) for x in examples)
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        outputs = [t for t in _tensors(module(*inputs)) if t.is_floating_point() and t.requires_grad]
        loss = sum(t.float().mean() for t in outputs)
        loss.backward()
        optimizer.step()
        if read_loss:
            loss.item()

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    try:
        for _ in range(3):
            step()
        sync()
    except RuntimeError as error:  # e.g. a module that makes a tensor on the CPU inside forward
        conn.send(("failed", os.getpid(), str(error).splitlines()[0]))
        return
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else 0.0
    conn.send(("ready", os.getpid(), peak))
    while True:
        command = conn.recv()
        if command[0] == "stop":
            return
        _, start_at, seconds = command
        time.sleep(max(0.0, start_at - time.time()))
        while time.time() < start_at + WARM_S:
            step()
        sync()
        steps, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            step()
            steps += 1
        sync()
        conn.send(("done", steps / (time.perf_counter() - began)))


class Sampler:
    """The agent's NVML backend, sampled on a thread while a run goes; None readings without NVML."""

    def __init__(self, log: Path, pod_of_pid: dict[int, str]) -> None:
        from horus_operator.agent.nvml import PynvmlBackend

        self._pod_of_pid = pod_of_pid
        self._backend = PynvmlBackend(read_cgroup=self._cgroup)
        self._log = log
        self.error = ""
        self.samples: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _cgroup(self, pid: int) -> str:
        # The workers are no pods: each is given a cgroup line naming a pod, so the agent's mapping of
        # NVML's PIDs to pods runs as on a node (a PID NVML reports that is not a worker's maps to none).
        pod = self._pod_of_pid.get(pid)
        return f"0::/kubepods/burstable/pod{pod}/train\n" if pod else ""

    def start(self, label: str) -> None:
        self.samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._run, args=(label,), daemon=True)
        self._thread.start()

    def stop(self) -> list[Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples

    def _run(self, label: str) -> None:
        from horus_operator.agent.readings import NvmlUnavailableError

        while not self._stop.wait(0.2):
            try:
                sample = self._backend.sample([], time.time())
            except NvmlUnavailableError as error:  # a finding about the agent's path: kept, and the
                self.error = str(error)  # GPU's own readings still taken
                sample = self._gpu_only()
            if sample is None:
                return
            self.samples.append(sample)
            with self._log.open("a") as out:
                out.write(json.dumps({"run": label, "agent_error": self.error, **asdict(sample)}) + "\n")

    @staticmethod
    def _gpu_only() -> Any:
        """The GPU's utilization and memory straight from pynvml (no per-process readings)."""
        from horus_operator.agent.readings import GpuReading, Sample

        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            memory, rates = (
                pynvml.nvmlDeviceGetMemoryInfo(handle),
                pynvml.nvmlDeviceGetUtilizationRates(handle),
            )
        except Exception:
            return None
        gpu = GpuReading(
            0, "", "", int(memory.total // 2**20), memory.used / 2**20, rates.gpu / 100, rates.memory / 100
        )
        return Sample(taken_at=time.time(), gpus=(gpu,))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _gpu_stats(samples: list[Any]) -> dict[str, Any]:
    gpu = [s.gpus[0] for s in samples if s.gpus]
    return {
        "gpu_util_mean": _mean([g.utilization for g in gpu]),
        "gpu_mem_used_mib": max((g.memory_used_mib for g in gpu), default=None),
        "samples": len(samples),
    }


def _process_stats(samples: list[Any], pid: int) -> tuple[float | None, float | None]:
    mine = [p for s in samples for p in s.processes if p.pid == pid]
    return _mean([p.utilization for p in mine]), max((p.memory_mib for p in mine), default=None)


class Coordinator:
    def __init__(self, configs: list[tuple[str, int]], device: str, seconds: float, read_loss: bool) -> None:
        self.configs, self.device, self.seconds, self.read_loss = configs, device, seconds, read_loss
        self.conns: dict[tuple[str, int], Any] = {}
        self.pids: dict[tuple[str, int], int] = {}
        self.peaks: dict[tuple[str, int], float] = {}
        self.pods = {config: str(uuid.uuid4()) for config in configs}

    def start(self) -> None:
        context = mp.get_context("spawn")
        for config in self.configs:
            parent, child = context.Pipe()
            context.Process(
                target=worker, args=(child, *config, self.device, self.read_loss), daemon=True
            ).start()
            self.conns[config] = parent
        for config, conn in list(self.conns.items()):
            state, pid, detail = conn.recv()
            if state == "failed":
                print(f"dropped {config[0]}:{config[1]}: {detail}", flush=True)
                del self.conns[config]
                continue
            self.pids[config], self.peaks[config] = pid, detail
            print(f"ready {config[0]}:{config[1]} pid {pid} peak {detail:.0f} MiB", flush=True)
        self.configs = list(self.conns)

    def run(self, sampler: Sampler, label: str, configs: tuple[tuple[str, int], ...]) -> tuple[list, list]:
        start_at = time.time() + 0.2
        for config in configs:
            self.conns[config].send(("run", start_at, self.seconds))
        time.sleep(0.2 + WARM_S + 0.1)
        sampler.start(label)
        rates = [self.conns[config].recv()[1] for config in configs]
        return rates, sampler.stop()

    def stop(self) -> None:
        for conn in self.conns.values():
            conn.send(("stop",))


def _writer(path: Path, fields: list[str]) -> Any:
    handle = path.open("w", newline="")
    writer = csv.DictWriter(handle, fields)
    writer.writeheader()
    handle.flush()
    return handle, writer


def _provenance(out: Path, args: argparse.Namespace, device: str) -> None:
    import torch

    facts: dict[str, Any] = {
        "script": "hack/gpu_pairs.py",
        "commit": os.environ.get("GPU_PAIRS_COMMIT")
        or os.popen(f"git -C {ROOT} rev-parse HEAD 2>/dev/null").read().strip(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "seconds_per_window": args.seconds,
        "warm_seconds": WARM_S,
        "loss_read_each_step": args.read_loss,
        "precision": "fp32 (PyTorch defaults)",
        "sharing": "time-sliced by the driver, no MPS",
    }
    if device.startswith("cuda"):
        facts["gpu"] = torch.cuda.get_device_name()
        facts["nvidia_smi"] = os.popen(
            "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv"
        ).read()
    (out / "provenance.json").write_text(json.dumps(facts, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--seconds", type=float, default=3.5, help="measured window per run")
    parser.add_argument("--budget", type=float, default=420, help="seconds after which no run starts")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu-name", default="h200", help="the gpu column's value")
    parser.add_argument("--read-loss", action="store_true", help="loss.item() after every step")
    args = parser.parse_args()
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    configs = [(name, int(batch)) for name, batch in (c.split(":") for c in args.configs.split(","))]
    _provenance(args.out, args, args.device)
    coordinator = Coordinator(configs, args.device, args.seconds, args.read_loss)
    coordinator.start()
    configs = coordinator.configs
    pod_of_pid = {coordinator.pids[c]: coordinator.pods[c] for c in configs}
    sampler = Sampler(args.out / "nvml.jsonl", pod_of_pid)
    isolated_fields = ["gpu", "model", "batch", "tput_alone", "pass", "gpu_util_mean", "process_util_mean"]
    isolated_fields += ["gpu_mem_used_mib", "process_mem_mib", "torch_peak_mib", "samples"]
    iso_handle, isolated = _writer(args.out / "isolated.csv", isolated_fields)
    pair_fields = ["gpu", "model_a", "batch_a", "model_b", "batch_b"]
    pair_fields += ["tput_a_alone", "tput_b_alone", "tput_a_shared", "tput_b_shared", "gpu_util_mean"]
    pair_handle, pairs = _writer(args.out / "pairs.csv", pair_fields)
    alone: dict[tuple[str, int], float] = {}

    def measure_alone(config: tuple[str, int], number: int) -> None:
        (rate,), samples = coordinator.run(sampler, f"alone {config} {number}", (config,))
        alone.setdefault(config, rate)
        process_util, process_mem = _process_stats(samples, coordinator.pids[config])
        row = {"gpu": args.gpu_name, "model": config[0], "batch": config[1], "tput_alone": f"{rate:.4f}"}
        row |= {"pass": number, "process_util_mean": process_util, "process_mem_mib": process_mem}
        isolated.writerow(row | _gpu_stats(samples) | {"torch_peak_mib": round(coordinator.peaks[config])})
        iso_handle.flush()
        print(f"alone {config[0]}:{config[1]} {rate:.2f}/s", flush=True)

    for config in configs:
        measure_alone(config, 1)
    order = list(itertools.combinations(configs, 2))
    random.Random(0).shuffle(order)
    last: list[Any] = []
    for a, b in order:
        if time.monotonic() - began > args.budget:
            print(f"budget spent: {len(order)} pairs wanted", flush=True)
            break
        (rate_a, rate_b), last = coordinator.run(sampler, f"pair {a} {b}", (a, b))
        row = {"gpu": args.gpu_name, "model_a": a[0], "batch_a": a[1], "model_b": b[0], "batch_b": b[1]}
        row |= {"tput_a_alone": f"{alone[a]:.4f}", "tput_b_alone": f"{alone[b]:.4f}"}
        row |= {"tput_a_shared": f"{rate_a:.4f}", "tput_b_shared": f"{rate_b:.4f}"}
        pairs.writerow(row | {"gpu_util_mean": _gpu_stats(last)["gpu_util_mean"]})
        pair_handle.flush()
        print(f"pair {a[0]}+{b[0]}: {alone[a] / rate_a:.2f}x {alone[b] / rate_b:.2f}x", flush=True)
    for config in configs:  # again at the end: how much the alone rates drifted over the run
        if time.monotonic() - began > args.budget + 60:
            break
        measure_alone(config, 2)
    coordinator.stop()
    _agent_status(args.out, last, coordinator, sampler.error)


def _agent_status(out: Path, samples: list[Any], coordinator: Coordinator, error: str) -> None:
    """The GPUNode status the agent would publish from the last pair's samples."""
    from horus_operator.agent import gpunode, summary
    from horus_operator.agent.readings import PodInfo

    pods = [
        PodInfo(uid=coordinator.pods[c], namespace="bench", name=f"{c[0]}-{c[1]}")
        for c in coordinator.configs
    ]
    body: dict[str, Any] = {"nvml_error": error}
    if samples:
        node = summary.summarize(node="gpu-pairs", backend="nvml", samples=samples, pods=pods)
        body["status"] = gpunode.status_body(node, sample_interval=0.2)
    (out / "gpunode.json").write_text(json.dumps(body, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
