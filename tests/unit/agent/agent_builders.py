"""Test-object builders for the agent's inputs."""

from __future__ import annotations

import json

from horus_operator.agent.fake import FakeInventory
from horus_operator.agent.readings import GpuReading, PodInfo, ProcessReading, Sample
from horus_operator.api import keys


def pod(
    name: str,
    *,
    devices: tuple[str, ...] = ("0",),
    utilization: float | None = 0.5,
    memory_mib: float = 1000.0,
    job: str | None = None,
    steps_per_second: float | None = None,
    namespace: str = "default",
    trains: tuple[str, int] | None = None,  # (model, batch size), as the operator's request annotation says
) -> PodInfo:
    annotations: dict[str, str] = {}
    if trains is not None:
        annotations[keys.ANNOTATION_REQUEST] = json.dumps({"model": trains[0], "batchSize": trains[1]})
    if utilization is not None:
        annotations[keys.ANNOTATION_PREDICTED] = json.dumps(
            {"utilization": utilization, "memoryMiB": memory_mib, "slowdown": 1.0}
        )
    if steps_per_second is not None:
        annotations[keys.ANNOTATION_PROGRESS] = str(steps_per_second)
    return PodInfo(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        labels={keys.LABEL_JOB: job} if job else {},
        annotations=annotations,
        visible_devices=devices,
    )


def inventory(count: int = 2, memory_mib: int = 16384) -> FakeInventory:
    return FakeInventory(node="node-a", count=count, product="Tesla-V100-SXM2-16GB", memory_mib=memory_mib)


def gpu(index: int = 0, *, utilization: float = 0.5, memory_used_mib: float = 1000.0) -> GpuReading:
    return GpuReading(
        index=index,
        uuid=f"GPU-{index}",
        product="Tesla V100-SXM2-16GB",
        memory_total_mib=16384,
        memory_used_mib=memory_used_mib,
        utilization=utilization,
        memory_utilization=utilization / 2,
    )


def sample(at: float, *gpus: GpuReading, processes: tuple[ProcessReading, ...] = ()) -> Sample:
    return Sample(taken_at=at, gpus=gpus, processes=processes)


def process(
    pod_uid: str | None,
    *,
    gpu_index: int = 0,
    utilization: float = 0.5,
    memory_mib: float = 500.0,
    pid: int = 1,
    steps_per_second: float | None = None,
) -> ProcessReading:
    return ProcessReading(
        gpu_index=gpu_index,
        pid=pid,
        pod_uid=pod_uid,
        memory_mib=memory_mib,
        utilization=utilization,
        steps_per_second=steps_per_second,
    )
