"""Simulated jobs and clusters: the `horus-2500` and `synthetic` generators (seeded, RNG injected).

`horus-2500`: 2,500 single-GPU training jobs for the default cluster of 16 nodes x 4 V100.
- Job configurations: drawn uniformly from the (model, batch) configurations the truth table measured
  alone on V100 (23 in the shipped training split).
- Durations alone (Philly-like, after Jeon et al., ATC 2019): 80% log-uniform in [30 min, 17 h],
  10% log-uniform in [2 min, 30 min], 10% a long tail log-uniform in [17 h, 80 h]. Total steps =
  isolated throughput x duration.
- maxSlowdown mix: 10% 1.0 (never share), 20% 1.5, 35% 2.0, 25% 2.5, 10% 3.0. Discrete on purpose:
  real users pick round numbers, and it keeps the number of distinct GPU groups small.
- Arrivals: Poisson, rate chosen so mean isolated duration x rate = 2 x GPU count — twice what the
  cluster can serve with whole GPUs, so a queue builds (the regime the Horus papers study).

`synthetic --jobs N --gpus M` is the same generator at another size, for scale runs. All three generators
run on another GPU type the truth table measured with `--gpu` (e.g. p100, k80): the configurations,
throughputs and truth are then that GPU's, and the GPUs have its datasheet memory.

`gavel-generator` (default 300 jobs on 32 V100s, `--jobs`/`--gpus` to change): the single-GPU jobs of
Gavel's own job generator (stanford-futuredata/gavel, scheduler/utils.py `generate_job` with
`_generate_duration`, commit c4fa400), as its makespan experiments use them: every job submitted at
time 0; a configuration drawn uniformly from those the truth table measured alone on V100 (Gavel draws
from its 26 job types, of which the training split has 23); duration alone 60·10^U(1.5, 3) s (32 min to
17 h) with probability 0.8, else 60·10^U(3, 4) s (17 h to 167 h), Gavel's Philly fit; maxSlowdown from
the mix above (Gavel has none).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from horus_operator.placement.types import Gpu, JobRequest, Node
from horus_operator.prediction.api import Workload
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.measured import TruthTable

DEFAULT_GPU = "v100"
HOUR = 3600.0

# (share of jobs, shortest, longest) in seconds; log-uniform within each band
PHILLY_LIKE_DURATIONS = (
    (0.10, 2 * 60.0, 30 * 60.0),
    (0.80, 30 * 60.0, 17 * HOUR),
    (0.10, 17 * HOUR, 80 * HOUR),
)
MAX_SLOWDOWN_MIX = ((1.0, 0.10), (1.5, 0.20), (2.0, 0.35), (2.5, 0.25), (3.0, 0.10))
OVERLOAD = 2.0  # arrival rate x mean isolated duration / GPU count


class WorkloadPool:
    """Hands out one `Workload` object per distinct value. A scenario's jobs of one configuration then
    share it, so the dictionaries keyed by workloads (every prediction cache, the placement index's
    groups, truth's memo) find their key by identity instead of comparing it field by field (the
    dataclass `__eq__`, Python code, on nearly every look-up of a long simulation). Values unchanged."""

    def __init__(self) -> None:
        self._pool: dict[Workload, Workload] = {}

    def __call__(self, workload: Workload) -> Workload:
        return self._pool.setdefault(workload, workload)


@dataclass(frozen=True)
class SimJob:
    request: JobRequest  # submitted_at is the arrival time
    total_steps: float
    steps_per_s_alone: float  # on its GPU type, with all its GPUs
    # The steps the trace gives, where its progress is counted in seconds (`total_steps` then holds
    # seconds): what a DLJob's spec.totalSteps would say, for the operator's estimate (`sim/durations.py`).
    trace_steps: float | None = None

    @property
    def isolated_duration_s(self) -> float:
        return self.total_steps / self.steps_per_s_alone

    @property
    def arrival_s(self) -> float:
        return self.request.submitted_at


@dataclass(frozen=True)
class Scenario:
    name: str
    jobs: tuple[SimJob, ...]  # sorted by arrival
    nodes: tuple[Node, ...]
    gpu: str  # the GPU type, for truth queries
    notes: tuple[str, ...] = ()  # assumptions a loader made, reported with the results

    @property
    def gpu_count(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)


def cluster(gpus: int, per_node: int = 4, product: str = DEFAULT_GPU) -> tuple[Node, ...]:
    """`gpus` GPUs on nodes of `per_node` (the last node takes the remainder), with `product`'s memory."""
    memory_mib = GPU_SPECS[product].memory_mib
    nodes = []
    for first in range(0, gpus, per_node):
        name = f"node-{first // per_node:04d}"
        count = min(per_node, gpus - first)
        nodes.append(Node(name, tuple(Gpu(name, i, product, memory_mib) for i in range(count))))
    return tuple(nodes)


def draw_duration_s(rng: random.Random) -> float:
    pick = rng.random()
    for share, low, high in PHILLY_LIKE_DURATIONS:
        if pick < share:
            return math.exp(rng.uniform(math.log(low), math.log(high)))
        pick -= share
    _, low, high = PHILLY_LIKE_DURATIONS[-1]
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def draw_gavel_duration_s(rng: random.Random) -> float:
    """Gavel's `_generate_duration`, draw for draw (the same two calls on the RNG)."""
    if rng.random() >= 0.8:
        return 60.0 * 10 ** rng.uniform(3, 4)
    return 60.0 * 10 ** rng.uniform(1.5, 3)


def draw_max_slowdown(rng: random.Random) -> float:
    pick = rng.random()
    for value, share in MAX_SLOWDOWN_MIX:
        if pick < share:
            return value
        pick -= share
    return MAX_SLOWDOWN_MIX[-1][0]


def philly_like(
    table: TruthTable, rng: random.Random, *, jobs: int, gpus: int, name: str, gpu: str = DEFAULT_GPU
) -> Scenario:
    configs = table.configs(gpu)
    if not configs:
        raise ValueError(f"the truth table has no {gpu} measurements to draw jobs from")
    drawn = []
    for i in range(jobs):
        model, batch = rng.choice(configs)
        drawn.append((f"job-{i:06d}", model, batch, draw_duration_s(rng), draw_max_slowdown(rng)))
    mean_duration = sum(duration for *_, duration, _ in drawn) / jobs
    rate = OVERLOAD * gpus / mean_duration
    arrival = 0.0
    sim_jobs = []
    shared = WorkloadPool()
    for key, model, batch, duration, max_slowdown in drawn:
        throughput = table.isolated[(gpu, model, batch)]
        workload = shared(Workload(model, batch, host_cpus=table.host_cpus.get(model, 0.0)))
        request = JobRequest(key, workload, 1, max_slowdown, 0, arrival, remaining_s=duration)
        sim_jobs.append(SimJob(request, throughput * duration, throughput))
        arrival += rng.expovariate(rate)
    return Scenario(name, tuple(sim_jobs), cluster(gpus, product=gpu), gpu)


def horus_2500(table: TruthTable, rng: random.Random, gpu: str = DEFAULT_GPU) -> Scenario:
    return philly_like(table, rng, jobs=2500, gpus=64, name="horus-2500", gpu=gpu)


def synthetic(
    table: TruthTable, rng: random.Random, *, jobs: int, gpus: int, gpu: str = DEFAULT_GPU
) -> Scenario:
    return philly_like(table, rng, jobs=jobs, gpus=gpus, name=f"synthetic-{jobs}x{gpus}", gpu=gpu)


def gavel_generator(
    table: TruthTable, rng: random.Random, *, jobs: int = 300, gpus: int = 32, gpu: str = DEFAULT_GPU
) -> Scenario:
    configs = table.configs(gpu)
    sim_jobs = []
    shared = WorkloadPool()
    for i in range(jobs):
        model, batch = rng.choice(configs)
        duration = draw_gavel_duration_s(rng)
        workload = shared(Workload(model, batch, host_cpus=table.host_cpus.get(model, 0.0)))
        request = JobRequest(
            f"job-{i:06d}", workload, 1, draw_max_slowdown(rng), 0, 0.0, remaining_s=duration
        )
        throughput = table.isolated[(gpu, model, batch)]
        sim_jobs.append(SimJob(request, throughput * duration, throughput))
    return Scenario(f"gavel-generator-{jobs}x{gpus}", tuple(sim_jobs), cluster(gpus, product=gpu), gpu)
