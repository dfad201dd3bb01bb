"""What one NVML sampling pass sees, and the pods it is matched against. Plain frozen data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    product: str  # as NVML names it, e.g. "Tesla V100-SXM2-16GB"
    memory_total_mib: int
    memory_used_mib: float
    utilization: float  # SM busy fraction over NVML's last sample period, 0..1
    memory_utilization: float  # memory-controller busy fraction, 0..1
    healthy: bool = True  # False: the GPU needs a reset or is failing (no new job should go there)


@dataclass(frozen=True)
class ProcessReading:
    """One GPU process, already mapped to the pod that owns it (None: not a pod, e.g. a host process)."""

    gpu_index: int
    pid: int
    pod_uid: str | None
    memory_mib: float
    utilization: float  # this process's SM share, 0..1
    # Training progress the backend itself knows (the fake with a truth table); NVML knows none
    steps_per_second: float | None = None


@dataclass(frozen=True)
class Sample:
    taken_at: float  # seconds, agent clock
    gpus: tuple[GpuReading, ...]
    processes: tuple[ProcessReading, ...] = ()


@dataclass(frozen=True)
class PodInfo:
    """The part of a pod on this node that the agent needs."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The GPUs its CDI device annotations name, else the NVIDIA_VISIBLE_DEVICES entries of its containers
    # (indices or GPU UUIDs), in order, deduplicated
    visible_devices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class NvmlUnavailableError(RuntimeError):
    """NVML is missing or failed: the node's GPUs must be reported unavailable for placement."""
