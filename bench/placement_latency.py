"""Placement decision latency at 1,000 nodes x 8 GPUs with 10,000 running jobs (target: p99 <= 5 ms).

Measures `policy.schedule(snapshot, queue)` two ways:
- *indexed*: the caller keeps a `ClusterIndex` current and passes it in (what the simulator does, and
  what an operator that tracks pod events can do);
- *bare*: a fresh snapshot each call, so the policy indexes 8,000 GPUs and 10,000 jobs first (what an
  operator that rebuilds its snapshot every cycle pays).

Each call is one decision: one queued job (rotating through 100 different ones) against the same busy
cluster (every GPU runs a job, 2,000 of them a pair). Then the indexed p99 at other sizes, to show how
cost grows, and a batch call with 100 queued jobs (time per job started). Real prediction models
(`load_predictor`); every workload is a V100 configuration of the Gavel truth table.

    .venv/bin/python bench/placement_latency.py [--calls 300] [--models DIR]
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time

from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, JobRequest, RunningJob
from horus_operator.prediction import predictor as prediction
from horus_operator.prediction.api import Workload
from horus_operator.prediction.measured import gavel_truth
from horus_operator.sim.workloads import cluster, draw_max_slowdown


@functools.cache
def load_predictor(models: str | None):  # type: ignore[no-untyped-def]
    """Loaded once per process: the bench measures placement, not model loading."""
    return prediction.load_predictor(models)


def world(nodes: int, running_jobs: int, queue: int, seed: int) -> tuple[ClusterSnapshot, list[JobRequest]]:
    """`running_jobs` spread so that every GPU runs one job and the rest pair up (as in a busy cluster)."""
    # the second tenants are not checked against interference: the policy sees whatever runs
    rng = random.Random(seed)
    configs = gavel_truth().configs("v100")
    node_list = cluster(nodes * 8, per_node=8)
    gpus = [gpu for node in node_list for gpu in node.gpus]

    def request(key: str) -> JobRequest:
        model, batch = rng.choice(configs)
        max_slowdown = max(1.5, draw_max_slowdown(rng))  # running pairs must be allowed to share
        return JobRequest(key, Workload(model, batch), 1, max_slowdown, 0, 0.0)

    running = []
    for i in range(running_jobs):
        gpu = gpus[i % len(gpus)]
        running.append(RunningJob(request(f"run-{i}"), gpu.node, (gpu.index,)))
    pending = [request(f"queued-{i}") for i in range(queue)]
    return ClusterSnapshot(nodes=node_list, running=tuple(running)), pending


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(  # type: ignore[no-untyped-def]
    policy_name: str, nodes: int, running_jobs: int, calls: int, bare: bool, models
) -> tuple[float, float, float]:
    """(p50 wall ms, p99 wall ms, p99 CPU ms) of one decision. CPU time leaves out the time the
    process waited for a core, which dominates wall-clock tails on a shared machine."""
    snapshot, pending = world(nodes, running_jobs, 100, seed=1)
    policy = make_policy(policy_name, predictor=load_predictor(models))
    indexed = ClusterSnapshot(nodes=snapshot.nodes, index=ClusterIndex.build(snapshot))
    policy.schedule(indexed, pending)  # warm the prediction memo, as a running operator has
    wall, cpu = [], []
    for call in range(calls):
        queue_now = [pending[call % len(pending)]]
        state = ClusterSnapshot(nodes=snapshot.nodes, running=snapshot.running) if bare else indexed
        started, started_cpu = time.perf_counter(), time.process_time()
        policy.schedule(state, queue_now)
        cpu.append((time.process_time() - started_cpu) * 1000.0)
        wall.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(wall), percentile(wall, 0.99), percentile(cpu, 0.99)


def row(policy: str, path: str, nodes: int, running: int, p50: float, p99: float, cpu99: float) -> str:
    return f"{policy:10} {path:8} {nodes:5} {nodes * 8:5} {running:8} {p50:7.2f} {p99:7.2f} {cpu99:10.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--models", default=None)
    args = parser.parse_args()
    print("policy     path     nodes  GPUs  running  p50 ms  p99 ms  p99 CPU ms")
    for policy_name in ("horus", "binpack", "exclusive"):
        for bare in (False, True):
            calls = args.calls if not bare else max(20, args.calls // 10)
            p50, p99, cpu99 = measure(policy_name, 1000, 10_000, calls, bare, args.models)
            path = "bare" if bare else "indexed"
            print(row(policy_name, path, 1000, 10_000, p50, p99, cpu99))
    print("growth (horus, indexed):")
    for nodes, running_jobs in ((125, 1_250), (250, 2_500), (500, 5_000), (1000, 10_000), (2000, 20_000)):
        p50, p99, cpu99 = measure("horus", nodes, running_jobs, args.calls, False, args.models)
        print(row("horus", "indexed", nodes, running_jobs, p50, p99, cpu99))
    print(f"batch: {batch_ms_per_job(args.models):.2f} ms per job started (horus, 100 queued, indexed)")


def batch_ms_per_job(models) -> float:  # type: ignore[no-untyped-def]
    snapshot, pending = world(1000, 10_000, 100, seed=1)
    policy = make_policy("horus", predictor=load_predictor(models))
    indexed = ClusterSnapshot(nodes=snapshot.nodes, index=ClusterIndex.build(snapshot))
    policy.schedule(indexed, pending)
    started = time.perf_counter()
    assignments = policy.schedule(indexed, pending)
    return (time.perf_counter() - started) * 1000.0 / max(1, len(assignments))


if __name__ == "__main__":
    main()
