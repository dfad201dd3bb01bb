"""A fake NVML for nodes without GPUs (kwok nodes, laptops, CI).

It reports what the pods Horus placed on the node would plausibly do: each pod uses the GPUs named in
its NVIDIA_VISIBLE_DEVICES (indices or UUIDs; without it, the operator's GPU-index annotation) with the
utilization and memory the operator predicted for it (pod annotation). When the predicted utilizations
on one GPU add up to more than 1, the GPU is time-sliced: it is fully busy and each pod gets its
proportional share. Pods without a prediction are left out. Deterministic: the same pods give the same
readings. GPU inventory comes from the node's GPU Feature Discovery labels; GPUs named unhealthy (`horus
agent --fake-unhealthy-gpu NODE:INDEX`) read as a failing GPU would, so placement around a bad GPU can be
tested without one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from horus_operator.agent.readings import GpuReading, PodInfo, ProcessReading, Sample

# Written by the operator on the pods it creates (same strings as operator/keys.py; a unit test checks).
PREDICTED_ANNOTATION = "horus.dev/predicted"  # JSON {"utilization": 0..1, "memoryMiB": ..., ...}
GPUS_ANNOTATION = "horus.dev/gpus"  # "0,1": GPU indices, used when the pod has no NVIDIA_VISIBLE_DEVICES

# GPU Feature Discovery labels describing a node's GPUs (kwok nodes carry them too)
GFD_COUNT_LABEL = "nvidia.com/gpu.count"
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
GFD_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB


@dataclass(frozen=True)
class FakeInventory:
    node: str
    count: int
    product: str
    memory_mib: int
    unhealthy: frozenset[int] = frozenset()  # GPU indices that report unhealthy

    @classmethod
    def from_node_labels(
        cls, node: str, labels: Mapping[str, str], unhealthy: frozenset[int] = frozenset()
    ) -> FakeInventory:
        return cls(
            node=node,
            count=int(labels.get(GFD_COUNT_LABEL, "0")),
            product=labels.get(GFD_PRODUCT_LABEL, "unknown"),
            memory_mib=int(labels.get(GFD_MEMORY_LABEL, "0")),
            unhealthy=unhealthy,
        )

    def uuid(self, index: int) -> str:
        """Stable per node and index, shaped like a real GPU UUID."""
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.node}.gpu{index}.horus.dev')}"


@dataclass(frozen=True)
class _Demand:
    pod_uid: str
    utilization: float
    memory_mib: float


class FakeBackend:
    name = "fake"

    def __init__(self, inventory: FakeInventory) -> None:
        self._inventory = inventory

    @property
    def inventory(self) -> FakeInventory:
        return self._inventory

    def sample(self, pods: Sequence[PodInfo], now: float) -> Sample:
        demands = self._demands_by_gpu(pods)
        gpus: list[GpuReading] = []
        processes: list[ProcessReading] = []
        for index in range(self._inventory.count):
            on_gpu = demands.get(index, [])
            total_demand = sum(d.utilization for d in on_gpu)
            share = 1.0 / total_demand if total_demand > 1.0 else 1.0
            memory_used = min(float(self._inventory.memory_mib), sum(d.memory_mib for d in on_gpu))
            gpus.append(
                GpuReading(
                    index=index,
                    uuid=self._inventory.uuid(index),
                    product=self._inventory.product,
                    memory_total_mib=self._inventory.memory_mib,
                    memory_used_mib=memory_used,
                    utilization=min(1.0, total_demand),
                    memory_utilization=memory_used / self._inventory.memory_mib
                    if self._inventory.memory_mib
                    else 0.0,
                    healthy=index not in self._inventory.unhealthy,
                )
            )
            processes.extend(
                ProcessReading(
                    gpu_index=index,
                    pid=0,
                    pod_uid=d.pod_uid,
                    memory_mib=d.memory_mib,
                    utilization=d.utilization * share,
                )
                for d in on_gpu
            )
        return Sample(taken_at=now, gpus=tuple(gpus), processes=tuple(processes))

    def close(self) -> None:
        pass

    def _demands_by_gpu(self, pods: Sequence[PodInfo]) -> dict[int, list[_Demand]]:
        by_uuid = {self._inventory.uuid(i): i for i in range(self._inventory.count)}
        demands: dict[int, list[_Demand]] = {}
        for pod in pods:
            demand = _predicted_demand(pod)
            if demand is None:
                continue
            devices = pod.visible_devices or _split(pod.annotations.get(GPUS_ANNOTATION, ""))
            for index in _gpu_indices(devices, by_uuid, self._inventory.count):
                demands.setdefault(index, []).append(demand)
        return demands


def _predicted_demand(pod: PodInfo) -> _Demand | None:
    try:
        predicted = json.loads(pod.annotations[PREDICTED_ANNOTATION])
        utilization = float(predicted["utilization"])
        memory_mib = float(predicted["memoryMiB"])
    except (KeyError, ValueError, TypeError):
        return None
    return _Demand(pod_uid=pod.uid, utilization=max(0.0, utilization), memory_mib=max(0.0, memory_mib))


def _gpu_indices(visible_devices: Sequence[str], by_uuid: Mapping[str, int], count: int) -> list[int]:
    """NVIDIA_VISIBLE_DEVICES semantics: indices, UUIDs, "all"; unknown entries are ignored."""
    if "all" in visible_devices:
        return list(range(count))
    indices: list[int] = []
    for device in visible_devices:
        index = by_uuid.get(device)
        if index is None and device.isdigit() and int(device) < count:
            index = int(device)
        if index is not None and index not in indices:
            indices.append(index)
    return indices


def _split(devices: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in devices.split(",") if d.strip())
