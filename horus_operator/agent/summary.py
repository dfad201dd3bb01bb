"""Aggregation of a publish window's samples into one per-node summary. Pure.

Per GPU: mean utilization over the window and peak memory (placement must see the worst case of memory,
the typical case of utilization), and health as the newest sample says. Per pod and GPU: mean
utilization (a sample where the pod ran nothing counts as 0) and peak memory, plus the progress the job
last reported on its pod (or, where it reports none, the latest the backend itself knows: the fake's
measured rate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

from horus_operator.agent.readings import GpuReading, PodInfo, Sample
from horus_operator.api import keys


@dataclass(frozen=True)
class PodUsage:
    namespace: str
    name: str
    uid: str
    job: str | None
    utilization: float
    memory_mib: float
    steps_per_second: float | None


@dataclass(frozen=True)
class GpuSummary:
    index: int
    uuid: str
    product: str
    memory_total_mib: int
    memory_used_mib: float | None  # None: unknown (NVML unavailable)
    utilization: float | None
    memory_utilization: float | None
    healthy: bool
    pods: tuple[PodUsage, ...] = ()


@dataclass(frozen=True)
class NodeSummary:
    node: str
    backend: str
    taken_at: float  # the newest sample's time, agent clock (or the failure's time)
    window_seconds: float
    nvml_available: bool
    message: str
    gpus: tuple[GpuSummary, ...]


def summarize(*, node: str, backend: str, samples: Sequence[Sample], pods: Sequence[PodInfo]) -> NodeSummary:
    """The summary of a non-empty window of successful samples (NVML answered)."""
    if not samples:
        raise ValueError("summarize needs at least one sample")
    pods_by_uid = {p.uid: p for p in pods}
    latest = samples[-1]
    return NodeSummary(
        node=node,
        backend=backend,
        taken_at=latest.taken_at,
        window_seconds=latest.taken_at - samples[0].taken_at,
        nvml_available=True,
        message="",
        gpus=tuple(_gpu_summary(gpu, samples, pods_by_uid) for gpu in latest.gpus),
    )


def unavailable(
    *, node: str, backend: str, now: float, message: str, known_gpus: Sequence[GpuReading]
) -> NodeSummary:
    """NVML is missing or failing: the GPUs seen before (if any) are reported, all unhealthy."""
    return NodeSummary(
        node=node,
        backend=backend,
        taken_at=now,
        window_seconds=0.0,
        nvml_available=False,
        message=message,
        gpus=tuple(
            GpuSummary(
                index=g.index,
                uuid=g.uuid,
                product=g.product,
                memory_total_mib=g.memory_total_mib,
                memory_used_mib=None,
                utilization=None,
                memory_utilization=None,
                healthy=False,
            )
            for g in known_gpus
        ),
    )


def _gpu_summary(
    gpu: GpuReading, samples: Sequence[Sample], pods_by_uid: Mapping[str, PodInfo]
) -> GpuSummary:
    readings = [g for s in samples for g in s.gpus if g.index == gpu.index]
    return GpuSummary(
        index=gpu.index,
        uuid=gpu.uuid,
        product=gpu.product,
        memory_total_mib=gpu.memory_total_mib,
        memory_used_mib=max(r.memory_used_mib for r in readings),
        utilization=fmean(r.utilization for r in readings),
        memory_utilization=fmean(r.memory_utilization for r in readings),
        healthy=gpu.healthy,  # as the newest sample says: a health change is published at once
        pods=_pod_usages(gpu.index, samples, pods_by_uid),
    )


def _pod_usages(
    gpu_index: int, samples: Sequence[Sample], pods_by_uid: Mapping[str, PodInfo]
) -> tuple[PodUsage, ...]:
    utilization_sums: dict[str, float] = {}
    memory_peaks: dict[str, float] = {}
    backend_rates: dict[str, float] = {}  # the latest progress the backend reported per pod
    for sample in samples:
        utilization_now: dict[str, float] = {}
        memory_now: dict[str, float] = {}
        for process in sample.processes:
            uid = process.pod_uid
            if process.gpu_index == gpu_index and uid is not None and uid in pods_by_uid:
                utilization_now[uid] = utilization_now.get(uid, 0.0) + process.utilization
                memory_now[uid] = memory_now.get(uid, 0.0) + process.memory_mib
                if process.steps_per_second:
                    backend_rates[uid] = process.steps_per_second
        for uid, utilization in utilization_now.items():
            utilization_sums[uid] = utilization_sums.get(uid, 0.0) + utilization
            memory_peaks[uid] = max(memory_peaks.get(uid, 0.0), memory_now[uid])
    return tuple(
        _pod_usage(
            pods_by_uid[uid],
            utilization_sums.get(uid, 0.0) / len(samples),
            memory_peaks[uid],
            backend_rates.get(uid),
        )
        for uid in sorted(memory_peaks, key=lambda u: pods_by_uid[u].key)
    )


def _pod_usage(pod: PodInfo, utilization: float, memory_mib: float, backend_rate: float | None) -> PodUsage:
    return PodUsage(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        job=pod.labels.get(keys.LABEL_JOB),
        utilization=utilization,
        memory_mib=memory_mib,
        steps_per_second=reported_progress(pod) or backend_rate,
    )


def reported_progress(pod: PodInfo) -> float | None:
    try:
        steps_per_second = float(pod.annotations[keys.ANNOTATION_PROGRESS])
    except (KeyError, ValueError):
        return None
    return steps_per_second if steps_per_second > 0 else None
