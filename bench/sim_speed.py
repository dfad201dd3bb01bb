"""Simulator speed (targets: horus-2500 x 3 policies < 10 s; synthetic 100,000 jobs x 8,192 GPUs
< 120 s), and how run time grows with jobs.

Runs the library directly (as `horus simulate` does, without writing plots), with the shipped models.
The growth sizes keep 100,000 / 8,192 jobs per GPU, so the cluster is as loaded at each size and cost
per job should stay flat if a run grows linearly.

    .venv/bin/python bench/sim_speed.py [--quick] [--models DIR] [--plot PNG]

`--quick` stops after horus-2500 and the smallest synthetic size; `--size JOBS GPUS` runs that one
synthetic size alone (the 1,000,000 x 65,536 run); `--plot` draws CPU seconds against jobs per policy.
The last column is the process's peak resident memory so far (the scenario and every run before).
The first line says which build ran: the sources, or the compiled one (`make compiled`, hack/compile.py;
run it in the tree that holds the build, e.g. `cd out/compiled && PYTHONPATH=$PWD ...` after `make
test-compiled`).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import random
import resource
import time
from pathlib import Path

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.registry import make_policy
from horus_operator.prediction import predictor as prediction
from horus_operator.prediction.measured import gavel_truth
from horus_operator.sim.engine import Simulation
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import Scenario, horus_2500, synthetic


@functools.cache
def load_predictor(models: str | None):  # type: ignore[no-untyped-def]
    """Loaded once per process: the bench measures placement, not model loading."""
    return prediction.load_predictor(models)


POLICIES = ("horus", "exclusive", "binpack")
GROWTH = ((10_000, 820), (30_000, 2_458), (100_000, 8_192))  # 12.2 jobs per GPU at each size


def timed_runs(scenario: Scenario, truth: Truth, models: str | None) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds per policy. On a shared machine wall time includes waits for a core."""
    seconds = {}
    for name in POLICIES:
        predictor = load_predictor(models)
        cycle = SchedulingCycle(make_policy(name, predictor=predictor))
        started, started_cpu = time.perf_counter(), time.process_time()
        Simulation(scenario, cycle, truth).run()
        seconds[name] = (time.perf_counter() - started, time.process_time() - started_cpu)
    return seconds


def peak_rss_gib() -> float:
    """Linux reports ru_maxrss in KiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def cells(seconds: dict[str, tuple[float, float]]) -> str:
    total_wall = sum(wall for wall, _ in seconds.values())
    total_cpu = sum(cpu for _, cpu in seconds.values())
    parts = [f"{wall:7.1f} /{cpu:6.1f}" for wall, cpu in (seconds[name] for name in POLICIES)]
    return "".join(f"{part:>21}" for part in parts) + f"{total_wall:9.1f} /{total_cpu:6.1f}"


def plot(path: Path, growth: list[tuple[int, dict[str, tuple[float, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = [size for size, _ in growth]
    figure, axes = plt.subplots(figsize=(6, 4))
    for name in POLICIES:
        axes.plot(jobs, [seconds[name][1] for _, seconds in growth], marker="o", label=name)
    total = [sum(cpu for _, cpu in seconds.values()) for _, seconds in growth]
    axes.plot(jobs, total, marker="o", color="black", label="all three")
    axes.set_xlabel("jobs (GPUs grow with them: 12.2 jobs per GPU)")
    axes.set_ylabel("CPU seconds per run")
    axes.set_title("horus simulate: cost against jobs")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--models", default=None)
    parser.add_argument("--size", type=int, nargs=2, metavar=("JOBS", "GPUS"), help="run this size alone")
    parser.add_argument("--plot", type=Path, help="write a PNG of CPU seconds against jobs here")
    args = parser.parse_args()
    table = gavel_truth()
    truth = Truth(table, fallback=load_predictor(args.models))

    compiled = importlib.util.find_spec("horus_operator._native__mypyc") is not None
    print("build: " + ("compiled (make compiled)" if compiled else "the sources (interpreted)"))
    header = "".join(f"{name + ' wall/CPU s':>21}" for name in POLICIES)
    print(f"{'jobs':>8} {'GPUs':>6}{header}  total wall/CPU s  CPU ms/job  peak RSS GiB")
    if not args.size:
        seconds = timed_runs(horus_2500(table, random.Random(1)), truth, args.models)
        print(f"{'horus-2500':>15}" + cells(seconds))
    growth = []
    sizes = [tuple(args.size)] if args.size else GROWTH[:1] if args.quick else GROWTH
    for jobs, gpus in sizes:
        seconds = timed_runs(synthetic(table, random.Random(1), jobs=jobs, gpus=gpus), truth, args.models)
        per_job_ms = 1000 * sum(cpu for _, cpu in seconds.values()) / jobs
        print(
            f"{jobs:>8} {gpus:>6}" + cells(seconds) + f"{per_job_ms:12.2f}{peak_rss_gib():14.2f}", flush=True
        )
        growth.append((jobs, seconds))
    if args.plot:
        plot(args.plot, growth)


if __name__ == "__main__":
    main()
