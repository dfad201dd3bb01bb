"""What only the operator can judge about a job against this cluster: can any node ever run it?

Pure. A job that asks for more GPUs than any node has, or is predicted to need more memory than any GPU
offers, would wait forever; it fails instead, with a message naming the field and value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from horus_operator.operator.jobspec import InvalidJob, JobSpec
from horus_operator.placement.types import ClusterSnapshot
from horus_operator.prediction.api import JobPrediction, UnknownGpuError, UnknownModelError, Workload

PredictJob = Callable[[Workload, str], JobPrediction]


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


def unsatisfiable(
    job: JobSpec, workload: Workload, capacity: Capacity, predict: PredictJob
) -> InvalidJob | None:
    """Why no node can ever run `job`, or None. A cluster without GPU nodes judges nothing."""
    if capacity.most_gpus == 0:
        return None
    if job.gpus > capacity.most_gpus:
        return InvalidJob("spec.gpus", job.gpus, f"no node has more than {capacity.most_gpus} GPUs")
    largest = capacity.memory_by_width[job.gpus]
    needs: dict[str, float] = {}
    for product, memory_mib in sorted(largest.items()):
        try:
            needs[product] = predict(workload, product).memory_mib
        except (UnknownModelError, UnknownGpuError) as error:
            return InvalidJob(_model_field(job), _model_value(job), str(error))
        if needs[product] <= memory_mib:
            return None
    worst = ", ".join(f"{needs[p]:.0f} MiB on {p} (has {largest[p]})" for p in sorted(needs))
    return InvalidJob("spec.batchSize", job.batch_size, f"predicted GPU memory exceeds every GPU: {worst}")


def _model_field(job: JobSpec) -> str:
    if job.architecture is not None:
        return "spec.model.architecture"
    return "spec.model.onnx" if job.onnx is not None else "spec.model.features"


def _model_value(job: JobSpec) -> object:
    if job.architecture is not None:
        return job.architecture
    if job.onnx is not None:
        return f"{job.onnx.config_map}[{job.onnx.key}]"
    return dict(job.features or {})
