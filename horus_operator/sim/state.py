"""The simulator's books while it runs: each running job's state, and the cluster's running totals."""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload
from horus_operator.sim.results import Sample
from horus_operator.sim.workloads import SimJob


@dataclass(eq=False)
class ActiveJob:
    job: SimJob
    request: JobRequest  # as placed (an OOM restart asks for a whole GPU)
    node: str
    gpu_indices: tuple[int, ...]
    start_s: float
    since_s: float
    remaining_steps: float
    steps_done: float = 0.0
    slowdown: float = 1.0
    colocated: bool = False
    measured: bool = True
    version: int = 0
    worst_slowdown: float = 1.0
    colocated_s: float = 0.0
    measured_colocated_s: float = 0.0
    cotenants: tuple[tuple[str, Workload], ...] = ()  # since `since_s`
    state_since: float = 0.0  # when its co-tenants (and so its slowdown) last changed
    paused_until: float = 0.0  # a moved job makes no progress until then (grace period + restart cost)
    over_limit_s: float = 0.0  # time its true slowdown was above its maxSlowdown as submitted
    run_since: float = 0.0  # when it last (re)started: its attained service grows from then

    def attained_gpu_s(self, now: float) -> float:
        """GPU-seconds of service by `now`, over all its runs (las, `sim/preemption.py`)."""
        return self.request.attained_gpu_s + (now - self.run_since) * len(self.gpu_indices)

    def remaining_alone_s(self, now: float) -> float:
        """Seconds of work left alone at `now` (its progress since `since_s` included)."""
        working = max(0.0, now - max(self.since_s, self.paused_until))
        done = min(self.remaining_steps, working * self.job.steps_per_s_alone / self.slowdown)
        return (self.remaining_steps - done) / self.job.steps_per_s_alone


@dataclass
class Totals:
    busy_gpus: int = 0
    throughput: float = 0.0
    busy_gpu_s: float = 0.0
    throughput_gpu_s: float = 0.0
    colocated_s: float = 0.0
    measured_colocated_s: float = 0.0
    samples: list[Sample] = field(default_factory=list)
