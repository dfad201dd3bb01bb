"""`horus reserve`, the program of a `reserve` binding's reservation pod (operator/binding/reservations.py).

The pod asks NVIDIA's device plugin for one GPU; the container runtime then shows this container that one
GPU alone. The program reads its UUID through NVML, writes it on its own pod
(`reservation.horus.dev/gpu-uuid`), and holds the GPU until the pod is deleted. It never starts a CUDA
context: the GPU's memory stays the jobs'.

On a local cluster (kwok: no device plugin, no GPU) the fake agent plays this step instead, from a watch
of the reservation pods (agent/fakereserve.py): `reservations_to_report` picks, for each reservation pod
on a node that has not reported, a GPU of the node's inventory no other reservation there reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType

from horus_operator.agent.readings import NvmlUnavailableError, PodInfo
from horus_operator.api import keys


def reserved_uuid(nvml: ModuleType) -> str:
    """The UUID of the one GPU this container sees. More than one means the pod asked for more than the
    reservation does, or the runtime ignores the plugin's choice: refused, not guessed."""
    try:
        nvml.nvmlInit()
        try:
            count = nvml.nvmlDeviceGetCount()
            if count != 1:
                raise NvmlUnavailableError(
                    f"NVML shows {count} GPUs to this reservation, not the 1 the device plugin gave it "
                    "(is the nvidia runtime class set? see docs/operator.md, reserve binding)"
                )
            uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(0))
        finally:
            nvml.nvmlShutdown()
    except nvml.NVMLError as error:
        raise NvmlUnavailableError(f"NVML: {error}") from error
    return uuid.decode() if isinstance(uuid, bytes) else str(uuid)


def reservations_to_report(
    pods: Sequence[PodInfo], uuids: Sequence[str], reported: Mapping[str, str] | None = None
) -> dict[tuple[str, str], str]:
    """(namespace, name) -> the GPU to report, for the node's reservation pods that have reported none:
    `uuids` (the node's GPUs in index order) that no reservation holds yet, lowest index first.
    `reported`: pod UID -> the GPU this agent gave it. As a device plugin's, that choice stands for the
    pod's life: a copy of the pod older than the agent's own annotation (a watch event sent before it
    landed) shows it silent, and it must be neither given another GPU nor its GPU another pod."""
    given = reported or {}
    reservations = [p for p in pods if keys.LABEL_RESERVATION_NODE in p.labels]
    taken = {p.annotations.get(keys.ANNOTATION_RESERVED_GPU) or given.get(p.uid) for p in reservations}
    free = [uuid for uuid in uuids if uuid not in taken]
    silent = sorted(
        (
            p
            for p in reservations
            if not p.annotations.get(keys.ANNOTATION_RESERVED_GPU) and p.uid not in given
        ),
        key=lambda p: (p.namespace, p.name),
    )
    return {(p.namespace, p.name): uuid for p, uuid in zip(silent, free, strict=False)}
