"""Resolving a DLJob's model into the `Workload` the predictor understands, and the job request the
scheduling cycle places (the spec itself and the checks that need nothing else: `api/dljob.py`).

Pure: reading a ConfigMap file and the catalog are injected, so the checks are unit-tested without a
cluster. Each raises an `InvalidJob` naming the offending field. A model read from a ConfigMap is read
with the operator's rights, which may be more than the DLJob's owner has: a refusal then names the
ConfigMap and the key (field) it could not use, never a value read there (the status is the owner's to
read).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api import defaults, dljob
from horus_operator.api.dljob import (
    HUGGINGFACE,
    INPUT_SHAPE,
    Binding,
    InvalidJob,
    JobSpec,
    OnnxRef,
    share_scope,
)
from horus_operator.placement.types import JobRequest
from horus_operator.prediction import catalog, memory, transformer
from horus_operator.prediction.api import UnknownModelError, Workload
from horus_operator.prediction.features import at_batch
from horus_operator.prediction.gpus import PRECISIONS

CUSTOM_MODEL = "custom"  # Workload.model of jobs described by their own graph features


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
        if job.framework not in memory.RUNTIMES:
            raise InvalidJob("spec.framework", job.framework, f"expected one of {', '.join(memory.RUNTIMES)}")
        return dataclasses.replace(self._model(job), precision=job.precision, framework=job.framework)

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
            dljob.check_features(job.features)
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
        return self._reshaped(job, name, dljob.input_shape(job.input_shape))

    def _reshaped(self, job: JobSpec, name: str, shape: tuple[int, ...]) -> Workload:
        try:
            workload = self.workload_at_shape(name, shape, job.batch_size)
        except ValueError as error:
            raise InvalidJob(INPUT_SHAPE, list(shape), f"{name} cannot take it: {error}") from error
        if workload.features is not None:
            dljob.check_features(at_batch(workload.features, job.batch_size), INPUT_SHAPE)
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
            # The parser's words may quote the data (node names, bytes): its kind of complaint only.
            reason = f"unreadable ONNX graph ({type(error).__name__})"
            raise InvalidJob("spec.model.onnx", where, reason) from error
        dljob.check_features(features, f"spec.model.onnx ({where})")
        return _custom(features, job.batch_size, "onnx:" + _digest(data))

    def _from_huggingface(self, job: JobSpec, spec: Mapping[str, Any]) -> Workload:
        if not isinstance(spec, Mapping):
            raise InvalidJob(HUGGINGFACE, spec, "an object: config or configMap, sequenceLength, …")
        config = self._hf_config(job, spec)
        try:
            described = transformer.describe(config, _hf_training(spec, job.gpus))
        except transformer.ConfigError as error:
            if "configMap" in spec:
                raise _uncountable_config_map(_config_map_ref(job, spec), spec, error) from error
            value = _at_path({**spec, "config": config}, error.key)  # inline: the DLJob's own values
            raise InvalidJob(f"{HUGGINGFACE}.{error.key}", value, _reason(error)) from error
        dljob.check_features(at_batch(described.profile, job.batch_size), HUGGINGFACE)
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
        where = _config_map_ref(job, spec)
        try:
            data = self.read_onnx(
                job.namespace, str(spec["configMap"]), str(spec.get("key", defaults.HF_CONFIG_KEY))
            )
        except LookupError as error:
            raise InvalidJob(f"{HUGGINGFACE}.configMap", where, f"not found: {error}") from error
        try:
            return json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:  # its words quote a byte, or where
            raise InvalidJob(f"{HUGGINGFACE}.configMap", where, "not a JSON config") from error


def _config_map_ref(job: JobSpec, spec: Mapping[str, Any]) -> str:
    """spec.model.huggingface's ConfigMap key as `namespace/name[key]` (names the DLJob gives)."""
    return f"{job.namespace}/{spec['configMap']}[{spec.get('key', defaults.HF_CONFIG_KEY)}]"


# The ConfigError keys (transformer.py) whose reason quotes nothing but the DLJob's own spec.
SPEC_ONLY_REASONS = frozenset(
    {
        "optimizer",
        "lora.rank",
        "lora.dropout",
        "weightsDtype",
        "attention",
        "lossChunks",
        "sharding",
        "gradientAccumulationSteps",
    }
)
# Why a config read from a ConfigMap could not be counted, by key, in words that quote none of its values.
CONFIG_MAP_REASONS: Mapping[str, str] = {
    "config.model_type": "is missing or not a model type Horus counts (docs/prediction.md lists them)",
    "sequenceLength": f"must be 1 to {transformer.MAX_DIMENSION} and within the config's learned positions",
    "lora.targetModules": "names a module that is no linear layer of the config's model",
}
SIZE_REASON = f"is missing, not an integer from 1 to {transformer.MAX_DIMENSION}, or at odds with another"


def _uncountable_config_map(
    where: str, spec: Mapping[str, Any], error: transformer.ConfigError
) -> InvalidJob:
    """A config read from ConfigMap key `where` that cannot be counted, named by its key: the ConfigMap may
    hold what the DLJob's owner may not read (a tenant once got `model_type='db-password=hunter2'` back),
    and transformer.py's reasons quote values, or counts derived from them."""
    if error.key in SPEC_ONLY_REASONS:
        return InvalidJob(f"{HUGGINGFACE}.{error.key}", _at_path(spec, error.key), _reason(error))
    if error.key.startswith("config."):
        reason = CONFIG_MAP_REASONS.get(error.key, SIZE_REASON)
        return InvalidJob(f"{HUGGINGFACE}.configMap", where, f"its {error.key} {reason}")
    reason = CONFIG_MAP_REASONS.get(error.key, "does not fit the config read from the ConfigMap")
    return InvalidJob(f"{HUGGINGFACE}.{error.key}", _at_path(spec, error.key), f"{reason} ({where})")


def _reason(error: transformer.ConfigError) -> str:
    return str(error).split(": ", 1)[1]


def _hf_training(spec: Mapping[str, Any], gpus: int) -> transformer.Training:
    """spec.model.huggingface's training fields, on the job's `gpus` (what a sharded model is split
    over); InvalidJob naming one of the wrong type (the schema types them; an object stored without it
    is checked here)."""
    lora = spec.get("lora")
    if lora is not None and not (isinstance(lora, Mapping) and "rank" in lora):
        raise InvalidJob(f"{HUGGINGFACE}.lora", lora, "an object with a rank")
    targets = (lora or {}).get("targetModules", [])
    if not isinstance(targets, list) or not all(isinstance(name, str) for name in targets):
        raise InvalidJob(f"{HUGGINGFACE}.lora.targetModules", targets, "a list of module names")
    storage, recipe = dljob.huggingface_storage(spec), dljob.huggingface_recipe(spec)
    return transformer.Training(
        sequence_length=_integer(spec, "sequenceLength", None),
        optimizer=str(spec.get("optimizer", defaults.OPTIMIZER)),
        lora=_lora(lora, targets) if lora else None,
        gradient_checkpointing=spec.get("gradientCheckpointing") is True,
        weights_dtype=storage.weights_dtype,
        attention=storage.attention,
        optimizer_in_backward=recipe.optimizer_in_backward,
        loss_chunks=recipe.loss_chunks,
        activation_offloading=recipe.activation_offloading,
        sharding=transformer.shard_over(recipe.sharding, gpus),
        gradient_accumulation_steps=recipe.gradient_accumulation_steps,
        sync_each_batch=recipe.sync_each_batch,
    )


def _lora(lora: Mapping[str, Any], targets: list[str]) -> transformer.Lora:
    dropout = lora.get("dropout", 0.0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise InvalidJob(f"{HUGGINGFACE}.lora.dropout", dropout, "a probability from 0 to under 1")
    return transformer.Lora(_integer(lora, "rank", None, "lora."), tuple(targets), float(dropout))


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


def _digest(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def request(job: JobSpec, workload: Workload, submitted_at: float, binding: str = Binding.ENV) -> JobRequest:
    return JobRequest(
        key=job.key,
        workload=workload,
        gpus=job.gpus,
        max_slowdown=job.max_slowdown,
        priority=job.priority,
        submitted_at=submitted_at,
        share_scope=share_scope(binding, job.namespace),
    )
