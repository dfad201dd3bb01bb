"""Can any node of this cluster ever run a job? Asked by the scheduling cycle before placement.

A job that asks for more GPUs than any node has, or is predicted to need more memory than any GPU
offers, would wait forever; the cycle takes it off the queue with an `Unsatisfiable` verdict instead
(the operator fails the DLJob, naming the field; the simulator records the job as rejected).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from horus_operator.placement.types import ClusterSnapshot, JobRequest
from horus_operator.prediction.api import JobPrediction, UnknownGpuError, UnknownModelError, Workload

PredictJob = Callable[[Workload, str], JobPrediction]


class Cause(StrEnum):
    """Which part of the request no node can meet (the operator names the DLJob field from it)."""

    GPUS = "gpus"
    MEMORY = "memory"
    MODEL = "model"  # the predictor does not know the model or the GPU type


@dataclass(frozen=True)
class Unsatisfiable:
    cause: Cause
    message: str


@dataclass(frozen=True)
class Capacity:
    """The most any node offers: computed once per snapshot, then asked for every waiting job."""

    most_gpus: int
    # GPU count k -> GPU type -> most memory of a GPU of that type on a node with at least k GPUs
    memory_by_width: Mapping[int, Mapping[str, int]]

    @classmethod
    def of(cls, snapshot: ClusterSnapshot) -> Capacity:
        most_gpus = max((len(node.gpus) for node in snapshot.nodes), default=0)
        memory_by_width: dict[int, dict[str, int]] = {k: {} for k in range(1, most_gpus + 1)}
        for node in snapshot.nodes:
            for width in range(1, len(node.gpus) + 1):
                largest = memory_by_width[width]
                for gpu in node.gpus:
                    largest[gpu.product] = max(largest.get(gpu.product, 0), gpu.memory_mib)
        return cls(most_gpus=most_gpus, memory_by_width=memory_by_width)


def unsatisfiable(request: JobRequest, capacity: Capacity, predict: PredictJob) -> Unsatisfiable | None:
    """Why no node can ever run `request`, or None. A cluster without GPU nodes judges nothing."""
    if capacity.most_gpus == 0:
        return None
    if request.gpus > capacity.most_gpus:
        return Unsatisfiable(Cause.GPUS, f"no node has more than {capacity.most_gpus} GPUs")
    largest = capacity.memory_by_width[request.gpus]
    needs: dict[str, float] = {}
    for product, memory_mib in sorted(largest.items()):
        try:
            prediction = predict(request.workload, product)
        except (UnknownModelError, UnknownGpuError) as error:
            return Unsatisfiable(Cause.MODEL, str(error))
        # The floor, not the packing envelope: refuse only what certainly cannot run (the envelope
        # errs high by design, and a job alone on a GPU is always tried).
        floor = prediction.min_memory_mib
        needs[product] = prediction.memory_mib if floor is None else floor
        if needs[product] <= memory_mib:
            return None
    worst = ", ".join(f"{needs[p]:.0f} MiB on {p} (has {largest[p]})" for p in sorted(needs))
    return Unsatisfiable(Cause.MEMORY, f"even the least GPU memory predicted exceeds every GPU: {worst}")
