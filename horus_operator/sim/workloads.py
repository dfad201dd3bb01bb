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

`real-mix-900` (issue 46): 900 jobs asking 1, 2, 4 or 8 GPUs on 8 nodes x 8 GPUs over five days, the
size mix of a real cluster's trace (`draw_real_mix`).
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


# Jobs by GPU count in the sample of SenseTime's Venus cluster (Helios traces: Hu et al., SC'21,
# "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters") that Lucid
# (ASPLOS'23) replays, as issue 46 counts it: 618 one-GPU, 96 two-GPU, 90 four-GPU and 96 eight-GPU jobs
# of 900 (68.7 % / 10.7 % / 10.0 % / 10.7 %). Both Helios and Philly (Jeon et al., ATC'19, "Analysis of
# Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads") report most jobs asking one GPU and a
# minority of multi-GPU jobs holding most of the GPU time; jobs wider than a node are left out (placement
# is single-node).
REAL_MIX_SIZES = ((1, 618), (2, 96), (4, 90), (8, 96))
REAL_MIX_SPAN_S = 5 * 24 * HOUR
REAL_MIX_NODES, REAL_MIX_PER_NODE = 8, 8
# Offered GPU-work over what the cluster serves in the span with whole GPUs: near saturation, the regime
# of the table (binpack's makespan 110 h for 120 h of arrivals).
REAL_MIX_LOAD = 0.9


def draw_real_mix(
    table: TruthTable,
    rng: random.Random,
    *,
    sizes: tuple[tuple[int, int], ...] = REAL_MIX_SIZES,
    gpu: str = DEFAULT_GPU,
) -> Scenario:
    """Jobs in exactly the counts of `sizes` ((GPUs, jobs) pairs), shuffled by `rng`; arrivals uniform
    over `REAL_MIX_SPAN_S` (a Poisson process given its count); durations alone drawn from the Philly-like
    mix (`draw_duration_s`) and all scaled by one factor so the GPU-work offered is `REAL_MIX_LOAD` of what
    `REAL_MIX_NODES` x `REAL_MIX_PER_NODE` GPUs serve in the span; configurations and maxSlowdowns as
    horus-2500 draws them. Truth: the table's measured pairs on `gpu`."""
    configs = table.configs(gpu)
    if not configs:
        raise ValueError(f"the truth table has no {gpu} measurements to draw jobs from")
    widths = [width for width, count in sizes for _ in range(count)]
    rng.shuffle(widths)
    arrivals = sorted(rng.uniform(0.0, REAL_MIX_SPAN_S) for _ in widths)
    drawn = [(rng.choice(configs), draw_duration_s(rng), draw_max_slowdown(rng)) for _ in widths]
    gpus = REAL_MIX_NODES * REAL_MIX_PER_NODE
    work = sum(duration * width for (_, duration, _), width in zip(drawn, widths, strict=True))
    scale = REAL_MIX_LOAD * gpus * REAL_MIX_SPAN_S / work
    shared = WorkloadPool()
    sim_jobs = []
    for i, (width, arrival, ((model, batch), duration, max_slowdown)) in enumerate(
        zip(widths, arrivals, drawn, strict=True)
    ):
        throughput = table.isolated[(gpu, model, batch)]
        workload = shared(Workload(model, batch, host_cpus=table.host_cpus.get(model, 0.0)))
        run_s = duration * scale
        request = JobRequest(f"job-{i:06d}", workload, width, max_slowdown, 0, arrival, remaining_s=run_s)
        sim_jobs.append(SimJob(request, throughput * run_s, throughput))
    nodes = cluster(gpus, REAL_MIX_PER_NODE, product=gpu)
    total = sum(count for _, count in sizes)
    return Scenario(f"real-mix-{total}", tuple(sim_jobs), nodes, gpu)


def real_mix_900(table: TruthTable, rng: random.Random, gpu: str = DEFAULT_GPU) -> Scenario:
    return draw_real_mix(table, rng, gpu=gpu)


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
