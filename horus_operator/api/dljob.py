"""A DLJob's spec as typed values, and the checks that need nothing but the spec (the CRD's schema makes
most; these hold for objects stored without it). Resolving the model into a workload the predictor
understands is the operator's (`operator/jobs/jobspec.py`): it reads ConfigMaps and counts graphs.

An `InvalidJob` names the offending field and value; the operator turns it into a Failed condition
instead of retrying.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from horus_operator.api import defaults

HUGGINGFACE = "spec.model.huggingface"
INPUT_SHAPE = "spec.model.inputShape"


class Binding(StrEnum):
    """spec.binding: how the pod gets its GPU (docs/operator.md compares them)."""

    ENV = "env"  # a nodeSelector and NVIDIA_VISIBLE_DEVICES
    DRA = "dra"  # a ResourceClaim per GPU
    RESERVE = "reserve"  # a reservation pod per GPU asks the device plugin; the pod gets its GPU's UUID


class InvalidJob(ValueError):
    """A DLJob the operator cannot run as written: `field` and `value` say which part is wrong."""

    def __init__(self, field_path: str, value: object, reason: str) -> None:
        super().__init__(f"{field_path}={value!r}: {reason}")
        self.field_path = field_path
        self.value = value
        self.reason = reason


@dataclass(frozen=True)
class OnnxRef:
    config_map: str
    key: str


@dataclass(frozen=True)
class JobSpec:
    namespace: str
    name: str
    uid: str
    generation: int
    batch_size: int
    gpus: int
    max_slowdown: float
    priority: int
    backoff_limit: int
    precision: str = (
        defaults.DEFAULT_PRECISION
    )  # checked by WorkloadResolver (the schema's enum may be bypassed)
    # spec.framework: checked by WorkloadResolver against the frameworks the memory model knows
    framework: str = defaults.DEFAULT_FRAMEWORK
    architecture: str | None = None
    onnx: OnnxRef | None = None
    features: Mapping[str, float] | None = field(default=None, compare=False)
    # spec.model.huggingface as written: checked by WorkloadResolver, which names each bad field
    huggingface: Mapping[str, Any] | None = field(default=None, compare=False)
    # spec.model.inputShape as written (per sample, e.g. [3, 32, 32]); checked by WorkloadResolver
    input_shape: Any = field(default=None, compare=False)
    simulated_duration: str | None = None
    simulated_failure: bool = False
    template: Mapping[str, Any] = field(default_factory=dict, compare=False)
    binding: str | None = None  # None: the operator's default (`horus run --binding`)
    total_steps: int | None = None  # spec.totalSteps, when the owner knows it
    migration_allowed: bool = False  # spec.migration.allowed: Horus may move the running job
    grace_period_s: int = (
        defaults.GRACE_PERIOD_S
    )  # spec.migration.gracePeriodSeconds: to checkpoint after SIGTERM

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def config_map_field(self) -> str | None:
        """The model field whose ConfigMap must be read to resolve the workload (an API call: off the
        scheduling loop), if any."""
        if self.onnx is not None:
            return "spec.model.onnx"
        if isinstance(self.huggingface, Mapping) and "configMap" in self.huggingface:
            return f"{HUGGINGFACE}.configMap"
        return None

    @property
    def resolved_off_loop(self) -> bool:
        """Resolving the workload takes an API call or a graph to count (`graphs.GraphQueue`)."""
        return self.config_map_field is not None or self.input_shape is not None


def parse(body: Mapping[str, Any]) -> JobSpec:
    """The typed spec of a DLJob object (`defaults`, as in crds/dljob.yaml, for objects the API server has
    not defaulted, e.g. in tests)."""
    meta = body["metadata"]
    spec = body.get("spec", {})
    model = spec.get("model", {})
    simulation = spec.get("simulation", {})
    migration = spec.get("migration") or {}
    onnx = model.get("onnx")
    return JobSpec(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta.get("uid", ""),
        generation=int(meta.get("generation", 1)),
        batch_size=int(spec.get("batchSize", defaults.BATCH_SIZE)),
        gpus=int(spec.get("gpus", defaults.GPUS)),
        max_slowdown=float(spec.get("maxSlowdown", defaults.MAX_SLOWDOWN)),
        priority=int(spec.get("priority", defaults.PRIORITY)),
        backoff_limit=int(spec.get("backoffLimit", defaults.BACKOFF_LIMIT)),
        precision=str(spec.get("precision", defaults.DEFAULT_PRECISION)),
        framework=str(spec.get("framework", defaults.DEFAULT_FRAMEWORK)),
        architecture=model.get("architecture"),
        onnx=OnnxRef(onnx["configMap"], onnx.get("key", defaults.ONNX_KEY)) if onnx else None,
        features={k: float(v) for k, v in model["features"].items()} if "features" in model else None,
        huggingface=model.get("huggingface"),
        input_shape=model.get("inputShape"),
        simulated_duration=simulation.get("duration"),
        simulated_failure=bool(simulation.get("fail", False)),
        template=spec.get("template", {}),
        binding=spec.get("binding"),
        total_steps=int(spec["totalSteps"]) if spec.get("totalSteps") is not None else None,
        # Only an explicit true allows moving (an object stored without the schema may hold "false").
        migration_allowed=migration.get("allowed") is True,
        grace_period_s=max(0, int(migration.get("gracePeriodSeconds", defaults.GRACE_PERIOD_S))),
    )


def binding_of(job: JobSpec, *, default: Binding, dra_served: bool) -> Binding:
    """The binding `job` runs under; `InvalidJob` for one this cluster cannot give (the schema's enum
    may be bypassed, and DRA needs resource.k8s.io/v1)."""
    chosen = job.binding or default
    try:
        binding = Binding(chosen)
    except ValueError:
        raise InvalidJob("spec.binding", chosen, f"expected one of {', '.join(Binding)}") from None
    if binding is Binding.DRA and not dra_served:
        raise InvalidJob("spec.binding", chosen, "the API server does not serve resource.k8s.io/v1 (DRA)")
    return binding


def share_scope(binding: str, namespace: str) -> str:
    """`JobRequest.share_scope`: DRA-bound jobs share a GPU only within their namespace, whose one
    ResourceClaim for it they all reference (a pod can reference claims of its own namespace only)."""
    return f"{Binding.DRA}/{namespace}" if binding == Binding.DRA else ""


# Beyond these no training step can run on any GPU node: a graph whose shapes say more (a "shape bomb"
# of 4.7e49 FLOPs was once placed with 1.5 GiB predicted) describes no real job. A step of 1e20 FLOPs
# takes over three hours on eight GPUs of 1e15 FLOP/s; 1e13 parameters are five times the largest model
# trained; 1e15 bytes (a petabyte) is a thousand times the GPU memory of the largest node.
PHYSICAL_LIMITS: Mapping[str, float] = {
    "flops_per_sample": 1e18,
    "flops_per_batch": 1e20,
    "params": 1e13,
    "param_bytes": 1e15,
    "activation_bytes_per_sample": 1e15,
    "activation_bytes_per_batch": 1e15,
    "input_bytes_per_sample": 1e15,
    "input_bytes_per_batch": 1e15,
}


def check_features(features: Mapping[str, float], field_path: str = "spec.model.features") -> None:
    """Counts and sizes: a negative one would predict negative memory and let co-tenants overfill a GPU
    (the schema refuses it; a DLJob stored under an older CRD is checked here), and one beyond
    `PHYSICAL_LIMITS` describes no job a GPU could run."""
    for name, value in sorted(features.items()):
        if not math.isfinite(value) or value < 0:
            raise InvalidJob(f"{field_path}.{name}", value, "a count or size: finite and at least 0")
        if value > PHYSICAL_LIMITS.get(name, math.inf):
            raise InvalidJob(
                f"{field_path}.{name}", value, f"beyond any GPU node (at most {PHYSICAL_LIMITS[name]:g})"
            )


# Per-sample dimensions a shape may have, and the largest size of one (as the CRD's): a million pixels
# on a side or tokens in a sequence is beyond any training job, and the counts stay far from
# overflowing (PHYSICAL_LIMITS then refuses what no GPU could run).
MAX_SHAPE_RANK, MAX_SHAPE_SIZE = 4, 1 << 20


def input_shape(value: object) -> tuple[int, ...]:
    """spec.model.inputShape as sizes; InvalidJob naming it when it is not 1–4 sizes of at least 1."""
    sizes = value if isinstance(value, list) else [value]
    if not 1 <= len(sizes) <= MAX_SHAPE_RANK or not all(
        isinstance(size, int) and not isinstance(size, bool) and 1 <= size <= MAX_SHAPE_SIZE for size in sizes
    ):
        raise InvalidJob(
            INPUT_SHAPE, value, f"1 to {MAX_SHAPE_RANK} sizes from 1 to {MAX_SHAPE_SIZE}, e.g. [3, 32, 32]"
        )
    return tuple(sizes)


@dataclass(frozen=True)
class HuggingfaceStorage:
    """How spec.model.huggingface says the job stores its model: what `transformer.Training` takes as
    `weights_dtype` and `attention`."""

    weights_dtype: str | None  # None: the config's torch_dtype decides (`transformer.weights_dtype`)
    attention: str


def huggingface_storage(spec: Mapping[str, Any]) -> HuggingfaceStorage:
    """spec.model.huggingface's weightsDtype and attention, defaulted as crds/dljob.yaml does;
    InvalidJob naming one outside the CRD's enum (an object stored without the schema, or under a CRD
    from before the fields, which then gets the defaults)."""
    weights = spec.get("weightsDtype")
    if weights is not None:
        _one_of(spec, "weightsDtype", defaults.WEIGHTS_DTYPES, weights)
    return HuggingfaceStorage(weights, _one_of(spec, "attention", defaults.ATTENTIONS, defaults.ATTENTION))


@dataclass(frozen=True)
class HuggingfaceRecipe:
    """How spec.model.huggingface says the job saves memory (issue 45): what `transformer.Training`
    takes as `optimizer_in_backward`, `loss_chunks`, `activation_offloading`, with spec.gpus,
    `sharding`, and `gradient_accumulation_steps` and `sync_each_batch`."""

    optimizer_in_backward: bool = False
    loss_chunks: int = defaults.LOSS_CHUNKS
    activation_offloading: bool = False
    sharding: str = defaults.SHARDING
    gradient_accumulation_steps: int = 1
    sync_each_batch: bool = False


def huggingface_recipe(spec: Mapping[str, Any]) -> HuggingfaceRecipe:
    """spec.model.huggingface's optimizerInBackward, lossChunks, activationOffloading, sharding,
    gradientAccumulationSteps and syncEachBatch, defaulted as crds/dljob.yaml does; InvalidJob naming
    one the CRD's schema would refuse."""
    return HuggingfaceRecipe(
        optimizer_in_backward=_flag(spec, "optimizerInBackward"),
        loss_chunks=_count(spec, "lossChunks", defaults.LOSS_CHUNKS),
        activation_offloading=_flag(spec, "activationOffloading"),
        sharding=_one_of(spec, "sharding", defaults.SHARDINGS, defaults.SHARDING),
        gradient_accumulation_steps=_count(spec, "gradientAccumulationSteps", 1),
        sync_each_batch=_flag(spec, "syncEachBatch"),
    )


def _count(spec: Mapping[str, Any], key: str, default: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SHAPE_SIZE:
        raise InvalidJob(f"{HUGGINGFACE}.{key}", value, f"an integer from 1 to {MAX_SHAPE_SIZE}")
    return value


def _one_of(spec: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str) -> str:
    value = spec.get(key, default)
    if value not in choices:
        raise InvalidJob(f"{HUGGINGFACE}.{key}", value, f"one of {', '.join(choices)}")
    return str(value)


def _flag(spec: Mapping[str, Any], key: str) -> bool:
    value = spec.get(key, False)
    if not isinstance(value, bool):
        raise InvalidJob(f"{HUGGINGFACE}.{key}", value, "true or false")
    return value


def created_at(body: Mapping[str, Any]) -> float:
    """When the DLJob was created (epoch seconds; 0 when not yet stored): its place in the queue."""
    stamp = body["metadata"].get("creationTimestamp")
    if not stamp:
        return 0.0
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
