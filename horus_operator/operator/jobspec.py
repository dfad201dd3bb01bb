"""A DLJob's spec as typed values, and the checks only the operator can make (the schema makes the rest).

Pure: reading an ONNX ConfigMap and the catalog are injected, so the checks are unit-tested without a
cluster. An `InvalidJob` names the offending field and value; the operator turns it into a Failed
condition instead of retrying.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from horus_operator.placement.types import JobRequest
from horus_operator.prediction import catalog, transformer
from horus_operator.prediction.api import UnknownModelError, Workload
from horus_operator.prediction.features import at_batch
from horus_operator.prediction.gpus import DEFAULT_PRECISION, PRECISIONS

CUSTOM_MODEL = "custom"  # Workload.model of jobs described by their own graph features
HUGGINGFACE = "spec.model.huggingface"
HF_CONFIG_KEY = "config.json"  # spec.model.huggingface.key's default
INPUT_SHAPE = "spec.model.inputShape"
ENV, DRA = "env", "dra"  # spec.binding: how the pod gets its GPU (docs/operator.md compares them)
BINDINGS = (ENV, DRA)


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
    precision: str = DEFAULT_PRECISION  # checked by WorkloadResolver (the schema's enum may be bypassed)
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
    grace_period_s: int = 30  # spec.migration.gracePeriodSeconds: to checkpoint after SIGTERM

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
    """The typed spec of a DLJob object (defaults as in crds/dljob.yaml, for objects the API server has
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
        batch_size=int(spec.get("batchSize", 1)),
        gpus=int(spec.get("gpus", 1)),
        max_slowdown=float(spec.get("maxSlowdown", 2.0)),
        priority=int(spec.get("priority", 0)),
        backoff_limit=int(spec.get("backoffLimit", 3)),
        precision=str(spec.get("precision", DEFAULT_PRECISION)),
        architecture=model.get("architecture"),
        onnx=OnnxRef(onnx["configMap"], onnx.get("key", "model.onnx")) if onnx else None,
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
        grace_period_s=max(0, int(migration.get("gracePeriodSeconds", 30))),
    )


def binding_of(job: JobSpec, *, default: str, dra_served: bool) -> str:
    """The binding `job` runs under; `InvalidJob` for one this cluster cannot give (the schema's enum
    may be bypassed, and DRA needs resource.k8s.io/v1)."""
    chosen = job.binding or default
    if chosen not in BINDINGS:
        raise InvalidJob("spec.binding", chosen, f"expected one of {', '.join(BINDINGS)}")
    if chosen == DRA and not dra_served:
        raise InvalidJob("spec.binding", chosen, "the API server does not serve resource.k8s.io/v1 (DRA)")
    return chosen


def share_scope(binding: str, namespace: str) -> str:
    """`JobRequest.share_scope`: DRA-bound jobs share a GPU only within their namespace, whose one
    ResourceClaim for it they all reference (a pod can reference claims of its own namespace only)."""
    return f"{DRA}/{namespace}" if binding == DRA else ""


@dataclass(frozen=True)
class WorkloadResolver:
    """Turns a spec's model into a `Workload` the predictor understands.

    `canonical_model` maps a catalog name to its canonical form (raising `UnknownModelError`);
    `read_onnx(namespace, config_map, key)` returns the file's bytes (raising `LookupError` when absent);
    `onnx_features(data, batch_size)` computes graph features (raising on an unreadable graph);
    `workload_at_shape(name, shape, batch_size)` is a catalog model counted at another input shape
    (raising ValueError for a shape its graph cannot take). `read_onnx` reads any ConfigMap file: the
    Hugging Face route reads its config.json with it too.
    """

    canonical_model: Callable[[str], str]
    read_onnx: Callable[[str, str, str], bytes]
    onnx_features: Callable[[bytes, int], Mapping[str, float]]
    workload_at_shape: Callable[[str, tuple[int, ...], int], Workload] = catalog.workload_at_shape

    def workload(self, job: JobSpec) -> Workload:
        if job.precision not in PRECISIONS:  # before reading any ConfigMap
            raise InvalidJob("spec.precision", job.precision, f"expected one of {', '.join(PRECISIONS)}")
        return dataclasses.replace(self._model(job), precision=job.precision)

    def _model(self, job: JobSpec) -> Workload:
        if job.input_shape is not None and job.architecture is None:
            raise InvalidJob(
                INPUT_SHAPE,
                job.input_shape,
                "applies to spec.model.architecture (an ONNX graph has its own shapes; a Hugging Face "
                "config takes sequenceLength)",
            )
        if job.architecture is not None:
            return self._catalog(job)
        if job.onnx is not None:
            return self._from_onnx(job, job.onnx)
        if job.huggingface is not None:
            return self._from_huggingface(job, job.huggingface)
        if job.features is not None:
            _check_features(job.features)
            return _custom(
                job.features, job.batch_size, "features:" + _digest(repr(sorted(job.features.items())))
            )
        raise InvalidJob("spec.model", None, "set one of architecture, onnx, huggingface, features")

    def _catalog(self, job: JobSpec) -> Workload:
        try:
            name = self.canonical_model(job.architecture or "")
        except UnknownModelError as error:
            raise InvalidJob("spec.model.architecture", job.architecture, str(error)) from error
        if job.input_shape is None:
            return Workload(model=name, batch_size=job.batch_size)
        return self._reshaped(job, name, _input_shape(job.input_shape))

    def _reshaped(self, job: JobSpec, name: str, shape: tuple[int, ...]) -> Workload:
        try:
            workload = self.workload_at_shape(name, shape, job.batch_size)
        except ValueError as error:
            raise InvalidJob(INPUT_SHAPE, list(shape), f"{name} cannot take it: {error}") from error
        if workload.features is not None:
            _check_features(at_batch(workload.features, job.batch_size), INPUT_SHAPE)
        return workload

    def _from_onnx(self, job: JobSpec, ref: OnnxRef) -> Workload:
        where = f"{job.namespace}/{ref.config_map}[{ref.key}]"
        try:
            data = self.read_onnx(job.namespace, ref.config_map, ref.key)
        except LookupError as error:
            raise InvalidJob("spec.model.onnx", where, f"not found: {error}") from error
        try:
            features = self.onnx_features(data, job.batch_size)
        except Exception as error:  # any parse failure of user data is the user's input error
            raise InvalidJob("spec.model.onnx", where, f"unreadable ONNX graph: {error}") from error
        _check_features(features, f"spec.model.onnx ({where})")
        return _custom(features, job.batch_size, "onnx:" + _digest(data))

    def _from_huggingface(self, job: JobSpec, spec: Mapping[str, Any]) -> Workload:
        if not isinstance(spec, Mapping):
            raise InvalidJob(HUGGINGFACE, spec, "an object: config or configMap, sequenceLength, …")
        config = self._hf_config(job, spec)
        try:
            described = transformer.describe(config, _hf_training(spec))
        except transformer.ConfigError as error:
            value = _at_path({**spec, "config": config}, error.key)
            raise InvalidJob(f"{HUGGINGFACE}.{error.key}", value, str(error).split(": ", 1)[1]) from error
        _check_features(at_batch(described.profile, job.batch_size), HUGGINGFACE)
        return _custom(described.profile, job.batch_size, "huggingface:" + described.key)

    def _hf_config(self, job: JobSpec, spec: Mapping[str, Any]) -> Mapping[str, Any]:
        """The config.json: inline, or read from a ConfigMap key of the job's namespace."""
        if ("config" in spec) == ("configMap" in spec):
            raise InvalidJob(HUGGINGFACE, sorted(spec), "set exactly one of config, configMap")
        if "config" in spec:
            config, where = spec["config"], f"{HUGGINGFACE}.config"
        else:
            config, where = self._hf_config_map(job, spec), f"{HUGGINGFACE}.configMap"
        if not isinstance(config, Mapping):
            raise InvalidJob(where, type(config).__name__, "a config.json holds one JSON object")
        return config

    def _hf_config_map(self, job: JobSpec, spec: Mapping[str, Any]) -> object:
        where = f"{job.namespace}/{spec['configMap']}[{spec.get('key', HF_CONFIG_KEY)}]"
        try:
            data = self.read_onnx(job.namespace, str(spec["configMap"]), str(spec.get("key", HF_CONFIG_KEY)))
        except LookupError as error:
            raise InvalidJob(f"{HUGGINGFACE}.configMap", where, f"not found: {error}") from error
        try:
            return json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InvalidJob(f"{HUGGINGFACE}.configMap", where, f"not a JSON config: {error}") from error


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


def _check_features(features: Mapping[str, float], field_path: str = "spec.model.features") -> None:
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


def _hf_training(spec: Mapping[str, Any]) -> transformer.Training:
    """spec.model.huggingface's training fields; InvalidJob naming one of the wrong type (the schema
    types them; an object stored without it is checked here)."""
    lora = spec.get("lora")
    if lora is not None and not (isinstance(lora, Mapping) and "rank" in lora):
        raise InvalidJob(f"{HUGGINGFACE}.lora", lora, "an object with a rank")
    targets = (lora or {}).get("targetModules", [])
    if not isinstance(targets, list) or not all(isinstance(name, str) for name in targets):
        raise InvalidJob(f"{HUGGINGFACE}.lora.targetModules", targets, "a list of module names")
    return transformer.Training(
        sequence_length=_integer(spec, "sequenceLength", None),
        optimizer=str(spec.get("optimizer", transformer.DEFAULT_OPTIMIZER)),
        lora=transformer.Lora(_integer(lora, "rank", None, "lora."), tuple(targets)) if lora else None,
        gradient_checkpointing=spec.get("gradientCheckpointing") is True,
    )


def _integer(spec: Mapping[str, Any], key: str, default: int | None, prefix: str = "") -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"{HUGGINGFACE}.{prefix}{key}", value, "an integer is required")
    return value


def _at_path(spec: Mapping[str, Any], path: str) -> object:
    """The value at a dotted path (`config.hidden_size`), None where there is none."""
    value: object = spec
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _custom(features: Mapping[str, float], batch_size: int, key: str) -> Workload:
    return Workload(model=CUSTOM_MODEL, batch_size=batch_size, features=dict(features), features_key=key)


# Per-sample dimensions a shape may have, and the largest size of one (as the CRD's): a million pixels
# on a side or tokens in a sequence is beyond any training job, and the counts stay far from
# overflowing (PHYSICAL_LIMITS then refuses what no GPU could run).
MAX_SHAPE_RANK, MAX_SHAPE_SIZE = 4, 1 << 20


def _input_shape(value: object) -> tuple[int, ...]:
    """spec.model.inputShape as sizes; InvalidJob naming it when it is not 1–4 sizes of at least 1."""
    sizes = value if isinstance(value, list) else [value]
    if not 1 <= len(sizes) <= MAX_SHAPE_RANK or not all(
        isinstance(size, int) and not isinstance(size, bool) and 1 <= size <= MAX_SHAPE_SIZE for size in sizes
    ):
        raise InvalidJob(
            INPUT_SHAPE, value, f"1 to {MAX_SHAPE_RANK} sizes from 1 to {MAX_SHAPE_SIZE}, e.g. [3, 32, 32]"
        )
    return tuple(sizes)


def _digest(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def created_at(body: Mapping[str, Any]) -> float:
    """When the DLJob was created (epoch seconds; 0 when not yet stored): its place in the queue."""
    stamp = body["metadata"].get("creationTimestamp")
    if not stamp:
        return 0.0
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def request(job: JobSpec, workload: Workload, submitted_at: float, binding: str = ENV) -> JobRequest:
    return JobRequest(
        key=job.key,
        workload=workload,
        gpus=job.gpus,
        max_slowdown=job.max_slowdown,
        priority=job.priority,
        submitted_at=submitted_at,
        share_scope=share_scope(binding, job.namespace),
    )
