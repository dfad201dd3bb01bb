"""The operator's scheduling loop alone at scale: how long each placement decision takes inside it.

The operator's `SchedulingLoop` with the real horus policy and models, against the unit tests' fake API
adapter (`tests/unit/operator/operator_builders.FakeKube`: objects in dicts, no API server, no
watches), on `--nodes` nodes x 8 V100 GPUs. DLJobs of the benchmarks' model mix arrive `--per-cycle` at
a time; each loop cycle decides them, places what fits and writes statuses. What it measures is the
operator's own CPU per decision, without the API server, etcd and kwok that share the cores in
`bench/scale.py`:

- *decision*: the wall time of each placement decision that placed, as the loop logs it (`placement: M
  placed, decided in T ms`: the cluster view and the scheduling cycle, before any pod is created); the
  CPU time of every decision (the view and `SchedulingCycle.run`, each timed by its own thread's CPU
  clock: the cycle runs on a worker thread while status writes go on); the CPU time of each whole loop
  cycle; the process's peak resident memory.
- every `--delete-every` cycles the oldest pod is deleted (the watch event the cache sees): its job is
  placed again, so the index also loses jobs.

    .venv/bin/python bench/operator_loop.py [--nodes 1000] [--jobs 10000] [--per-cycle 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement.registry import make_policy
from horus_operator.prediction import catalog
from horus_operator.prediction import predictor as prediction
from horus_operator.testing.builders import DLJobBuilder, bench_job

# The unit tests' fake adapter: the loop runs against it exactly as its unit tests do.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit" / "operator"))
from operator_builders import FakeKube, gpu_node

T = TypeVar("T")


class Decisions(logging.Handler):
    """The loop's `placement: M placed, decided in T ms (C ms CPU)` lines, as (placed, wall ms)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("placement:"):
            placed, decided_ms, _cpu_ms = cast(tuple[int, float, float], record.args)
            self.seen.append((placed, decided_ms))


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def thread_timed(fn: Callable[..., T], into: list[float]) -> Callable[..., T]:
    """`fn`, appending the CPU ms of each call, on the thread that runs it, to `into`."""

    def timed(*args: Any, **kwargs: Any) -> T:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            into.append(1000 * (time.thread_time() - started))

    return timed


async def run(
    nodes: int, jobs: int, per_cycle: int, delete_every: int
) -> tuple[list[float], list[float], list[float]]:
    """The CPU ms of each loop cycle, of each decision's view and of each decision's scheduling cycle
    (the decisions that placed are logged too: `Decisions`)."""
    kube = FakeKube()
    for n in range(nodes):
        kube.nodes[f"node-{n}"] = gpu_node(f"node-{n}", count=8)
    cache = ClusterCache()
    loop = SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=cache,
        policy=make_policy("horus", predictor=prediction.load_predictor(None)),
        resolver=jobspec.WorkloadResolver(
            catalog.canonical, read_onnx=lambda *_: b"", onnx_features=lambda data, batch: {}
        ),
        config=LoopConfig(),
    )
    # The view a decision is made on: the kept index (`_view`), or before it the fresh snapshot.
    views_cpu: list[float] = []
    runs_cpu: list[float] = []
    view = "_view" if hasattr(loop, "_view") else "_snapshot"
    setattr(loop, view, thread_timed(getattr(loop, view), views_cpu))
    loop._cycle.run = thread_timed(loop._cycle.run, runs_cpu)  # type: ignore[method-assign]
    await loop.resync()
    cycle_cpu = []
    for start in range(0, jobs, per_cycle):
        for i in range(start, min(jobs, start + per_cycle)):
            body = DLJobBuilder.stored(f"job-{i}").obj()
            body["spec"] = bench_job(f"job-{i}", i).obj()["spec"]  # the benchmarks' model mix
            cache.put_job(body)
            kube.jobs[job_key(body)] = body
        if delete_every and (start // per_cycle) % delete_every == delete_every - 1 and kube.pods:
            oldest = next(iter(kube.pods))
            cache.drop_pod(kube.pods.pop(oldest))
        started = time.process_time()
        await loop.cycle()
        await loop.settle()
        cycle_cpu.append(1000 * (time.process_time() - started))
    return cycle_cpu, views_cpu, runs_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--per-cycle", type=int, default=20)
    parser.add_argument("--delete-every", type=int, default=5)
    args = parser.parse_args()
    decisions = Decisions()
    logging.getLogger("horus_operator.operator.loop").addHandler(decisions)
    logging.getLogger("horus_operator.operator.loop").setLevel(logging.INFO)
    wall_started = time.perf_counter()
    cycle_cpu, views_cpu, runs_cpu = asyncio.run(
        run(args.nodes, args.jobs, args.per_cycle, args.delete_every)
    )
    decision_cpu = [view + cycle for view, cycle in zip(views_cpu, runs_cpu, strict=True)]
    decided = [ms for _, ms in decisions.seen]
    print(f"{args.nodes} nodes x 8 GPUs, {args.jobs} jobs, {args.per_cycle} per cycle")
    print(f"decisions: {len(decided)}, placing {sum(p for p, _ in decisions.seen)} jobs")
    print(
        f"decision wall ms: p50 {statistics.median(decided):.1f}  p99 {percentile(decided, 0.99):.1f}  "
        f"max {max(decided):.1f}"
    )
    for name, samples in (("decision", decision_cpu), ("  its view", views_cpu), ("  its cycle", runs_cpu)):
        print(f"{name} CPU ms: p50 {statistics.median(samples):.2f}  p99 {percentile(samples, 0.99):.2f}")
    print(f"loop cycle CPU ms: p50 {statistics.median(cycle_cpu):.1f}  p99 {percentile(cycle_cpu, 0.99):.1f}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(f"total wall {time.perf_counter() - wall_started:.0f} s, peak RSS {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
