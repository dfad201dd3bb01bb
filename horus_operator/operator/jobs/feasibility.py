"""A job no node can ever run (`placement.feasibility`) as the DLJob field and value the user must change.

Pure. The scheduling cycle judges the request; this names what in the DLJob's spec made it unsatisfiable.
"""

from __future__ import annotations

from horus_operator.api.dljob import HUGGINGFACE, InvalidJob, JobSpec
from horus_operator.placement.feasibility import Cause, Unsatisfiable


def as_invalid(job: JobSpec, problem: Unsatisfiable) -> InvalidJob:
    if problem.cause is Cause.GPUS:
        return InvalidJob("spec.gpus", job.gpus, problem.message)
    if problem.cause is Cause.MEMORY:
        # The batch is the one lever of a catalog model; a model of the user's own has a size too.
        own = (
            "" if job.architecture is not None else f"; the model's own size ({_model_field(job)}) counts too"
        )
        return InvalidJob("spec.batchSize", job.batch_size, problem.message + own)
    return InvalidJob(_model_field(job), _model_value(job), problem.message)


def _model_field(job: JobSpec) -> str:
    if job.architecture is not None:
        return "spec.model.architecture"
    if job.huggingface is not None:
        return HUGGINGFACE
    return "spec.model.onnx" if job.onnx is not None else "spec.model.features"


def _model_value(job: JobSpec) -> object:
    if job.architecture is not None:
        return job.architecture
    if job.onnx is not None:
        return f"{job.onnx.config_map}[{job.onnx.key}]"
    if job.huggingface is not None:
        return {key: value for key, value in job.huggingface.items() if key != "config"}
    return dict(job.features or {})
