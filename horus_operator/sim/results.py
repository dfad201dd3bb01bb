"""What a simulation run produces: one record per finished job, the cluster's samples, the totals."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobRecord:
    key: str
    model: str
    batch_size: int
    gpus: int
    max_slowdown: float  # as submitted
    arrival_s: float
    start_s: float
    finish_s: float
    isolated_s: float
    total_steps: float
    steps_done: float
    worst_true_slowdown: float
    colocated_s: float
    oom_restarts: int
    node: str
    gpu_indices: tuple[int, ...]
    priority: int = 0  # as submitted (CSV columns are only ever appended)
    moves: int = 0  # `--migration`: times it was moved
    over_limit_s: float = 0.0  # time its true slowdown was above its maxSlowdown (the last CSV column)

    @property
    def wait_s(self) -> float:
        return self.start_s - self.arrival_s

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class Sample:
    """Cluster state from `time_s` until the next sample."""

    time_s: float
    busy_gpus: int
    normalised_throughput: float  # sum over running jobs of GPUs x (shared / alone throughput)
    queued: int


@dataclass(frozen=True)
class RunResult:
    policy: str
    records: tuple[JobRecord, ...]
    samples: tuple[Sample, ...]
    busy_gpu_s: float
    throughput_gpu_s: float  # integral of normalised throughput over time
    colocated_s: float
    measured_colocated_s: float  # co-located job-time whose slowdown came from measured pairs
    rejected: dict[str, str] = field(default_factory=dict)  # jobs no node can run -> why (never started)
    migration: dict[str, object] = field(
        default_factory=dict
    )  # `--migration`: what moved (`Migration.summary`)
    preemption: dict[str, object] = field(default_factory=dict)  # `--queue-order las`: `Preempting.summary`
