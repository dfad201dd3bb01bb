"""A fake NVML for nodes without GPUs (kwok nodes, laptops, CI).

It reports what the pods Horus placed on the node would plausibly do: each pod uses the GPUs named in
its NVIDIA_VISIBLE_DEVICES (indices or UUIDs; without it, the operator's GPU-index annotation) with the
utilization and memory the operator predicted for it (pod annotation). When the predicted utilizations
on one GPU add up to more than 1, the GPU is time-sliced: it is fully busy and each pod gets its
proportional share. Pods without a prediction are left out. Deterministic: the same pods give the same
readings. GPU inventory comes from the node's GPU Feature Discovery labels; GPUs named unhealthy (`horus
agent --fake-unhealthy-gpu NODE:INDEX`) read as a failing GPU would, so placement around a bad GPU can be
tested without one.

With a truth table (`horus agent --backend fake --truth FILE`, the measured pairs `horus simulate
--truth` reads) it reports what the measurements say instead of echoing the predictions: a pod whose
(model, batch size) the table knows (the operator's request annotation) runs at its measured isolated
throughput divided by its measured slowdown next to its co-tenants, and reports that rate as its
progress; its utilization is its busy fraction alone divided by that slowdown (it does 1/slowdown of
its work alone per second): the table's measured one (`util_a_alone`/`util_b_alone` columns), else
its predicted one. A GPU whose co-tenants the table has not measured together (or says cannot
share) falls back to the echo, without a progress rate: the fake never invents a measurement.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from horus_operator.agent.readings import GpuReading, PodInfo, ProcessReading, Sample
from horus_operator.api import keys, pod_annotations
from horus_operator.prediction.api import UnknownGpuError
from horus_operator.prediction.gpus import normalize_gpu
from horus_operator.prediction.measured import TruthTable, Unmeasured


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
            count=int(labels.get(keys.LABEL_GPU_COUNT, "0")),
            product=labels.get(keys.LABEL_GPU_PRODUCT, "unknown"),
            memory_mib=int(labels.get(keys.LABEL_GPU_MEMORY, "0")),
            unhealthy=unhealthy,
        )

    def uuid(self, index: int) -> str:
        """Stable per node and index, shaped like a real GPU UUID."""
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.node}.gpu{index}.horus.dev')}"

    def uuids(self) -> tuple[str, ...]:
        """Every GPU's UUID, in index order."""
        return tuple(self.uuid(index) for index in range(self.count))


@dataclass(frozen=True)
class _Demand:
    pod_uid: str
    utilization: float
    memory_mib: float
    config: tuple[str, int] | None  # (model, batch size), from the operator's request annotation


@dataclass(frozen=True)
class _Run:
    """How one pod runs on one GPU."""

    demand: _Demand
    utilization: float
    steps_per_second: float | None  # None: no measurement says


@dataclass(frozen=True)
class FakeOptions:
    """What `horus agent` tells the fake backend alone (it refuses both with the real one)."""

    unhealthy: frozenset[int] = frozenset()  # GPU indices to report unhealthy
    truth: TruthTable | None = None  # measured pairs to report instead of the predictions


class FakeBackend:
    name = "fake"

    def __init__(self, inventory: FakeInventory, truth: TruthTable | None = None) -> None:
        self._inventory = inventory
        self._truth = truth
        try:
            self._gpu_type = normalize_gpu(inventory.product)
        except UnknownGpuError:
            self._gpu_type = inventory.product  # the truth table will simply not know it

    @property
    def inventory(self) -> FakeInventory:
        return self._inventory

    def sample(self, pods: Sequence[PodInfo], now: float) -> Sample:
        demands = self._demands_by_gpu(pods)
        gpus: list[GpuReading] = []
        processes: list[ProcessReading] = []
        for index in range(self._inventory.count):
            on_gpu = demands.get(index, [])
            runs = self._measured(on_gpu) or _echoed(on_gpu)
            memory_used = min(float(self._inventory.memory_mib), sum(d.memory_mib for d in on_gpu))
            gpus.append(
                GpuReading(
                    index=index,
                    uuid=self._inventory.uuid(index),
                    product=self._inventory.product,
                    memory_total_mib=self._inventory.memory_mib,
                    memory_used_mib=memory_used,
                    utilization=min(1.0, sum(run.utilization for run in runs)),
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
                    pod_uid=run.demand.pod_uid,
                    memory_mib=run.demand.memory_mib,
                    utilization=run.utilization,
                    steps_per_second=run.steps_per_second,
                )
                for run in runs
            )
        return Sample(taken_at=now, gpus=tuple(gpus), processes=tuple(processes))

    def close(self) -> None:
        pass

    def _measured(self, on_gpu: Sequence[_Demand]) -> list[_Run] | None:
        """The runs the truth table measured; None without a table or where it has no measurement."""
        configs = [d.config for d in on_gpu]
        if self._truth is None or not on_gpu or None in configs:
            return None
        known = [c for c in configs if c is not None]
        try:
            slowdowns = self._truth.slowdowns(self._gpu_type, known)
        except Unmeasured:
            return None
        if slowdowns is None:  # measured as unable to share: a real pair would crash, the fake cannot
            return None
        runs = []
        for demand, config, slowdown in zip(on_gpu, known, slowdowns, strict=True):
            alone = self._truth.isolated.get((self._gpu_type, *config))
            rate = alone / slowdown if alone else None
            busy = self._truth.utilization.get((self._gpu_type, *config), demand.utilization)
            runs.append(_Run(demand, busy / slowdown, rate))
        return runs

    def _demands_by_gpu(self, pods: Sequence[PodInfo]) -> dict[int, list[_Demand]]:
        by_uuid = {self._inventory.uuid(i): i for i in range(self._inventory.count)}
        demands: dict[int, list[_Demand]] = {}
        for pod in pods:
            demand = _predicted_demand(pod)
            if demand is None:
                continue
            devices = pod.visible_devices or pod_annotations.split(
                pod.annotations.get(keys.ANNOTATION_GPUS, "")
            )
            for index in _gpu_indices(devices, by_uuid, self._inventory.count):
                demands.setdefault(index, []).append(demand)
        return demands


def _echoed(on_gpu: Sequence[_Demand]) -> list[_Run]:
    """Predictions as readings: demands above a whole GPU time-slice it in proportion."""
    total_demand = sum(d.utilization for d in on_gpu)
    share = 1.0 / total_demand if total_demand > 1.0 else 1.0
    return [_Run(d, d.utilization * share, None) for d in on_gpu]


def _predicted_demand(pod: PodInfo) -> _Demand | None:
    predicted = pod_annotations.predicted_demand(pod.annotations)
    if predicted is None:
        return None
    return _Demand(
        pod_uid=pod.uid,
        utilization=predicted.utilization,
        memory_mib=predicted.memory_mib,
        config=pod_annotations.requested_config(pod.annotations),
    )


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
