"""What only the operator can judge about a job against this cluster: can any node ever run it?

Pure. A job that asks for more GPUs than any node has, or is predicted to need more memory than any GPU
offers, would wait forever; it fails instead, with a message naming the field and value.
"""

from __future__ import annotations

from collections.abc import Callable

from horus_operator.operator.jobspec import InvalidJob, JobSpec
from horus_operator.placement.types import ClusterSnapshot
from horus_operator.prediction.api import JobPrediction, UnknownGpuError, UnknownModelError, Workload

PredictJob = Callable[[Workload, str], JobPrediction]


def unsatisfiable(
    job: JobSpec, workload: Workload, snapshot: ClusterSnapshot, predict: PredictJob
) -> InvalidJob | None:
    """Why no node of `snapshot` can ever run `job`, or None. A cluster without GPU nodes judges nothing."""
    if not snapshot.nodes:
        return None
    most_gpus = max(len(node.gpus) for node in snapshot.nodes)
    if job.gpus > most_gpus:
        return InvalidJob("spec.gpus", job.gpus, f"no node has more than {most_gpus} GPUs")
    largest: dict[str, int] = {}  # GPU type -> most memory of any GPU of that type
    for node in snapshot.nodes:
        if len(node.gpus) >= job.gpus:
            for gpu in node.gpus:
                largest[gpu.product] = max(largest.get(gpu.product, 0), gpu.memory_mib)
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
