"""The pod route's spec: a pod of any controller (a Job's, a PyTorchJob's, one made by hand) says in
annotations what a DLJob says in its spec, and this one parser turns them into the same `JobSpec`.

Each annotation sets one DLJob field (`FIELDS`); the annotations become a DLJob-shaped spec that
`dljob.parse` reads, and every check after it (these bounds, which are the CRD's; the operator's
`WorkloadResolver`: catalog names, precision, ONNX graphs, Hugging Face configs, input shapes) is the
DLJob's own. An `InvalidJob` from any of them is renamed by `renamed` to the annotation that set the
field, e.g. `metadata.annotations['horus.dev/batch-size']='0': at least 1`, so the owner of a pod is
told what to fix in the words of the pod.

    horus.dev/model: resnet50 | onnx:<configmap>[/<key>] | huggingface:<configmap>[/<key>]
    horus.dev/batch-size: "64"            (required)
    horus.dev/precision: fp32|amp|bf16    horus.dev/max-slowdown: "1.5"   horus.dev/gpu-count: "1"
    horus.dev/framework: pytorch|tensorflow
    horus.dev/priority: "0"               horus.dev/total-steps: "10000"
    horus.dev/input-shape: 3x32x32        (with a catalog name)
    horus.dev/sequence-length, optimizer, lora-rank, lora-target-modules, gradient-checkpointing,
        weights-dtype, attention, optimizer-in-backward, loss-chunks, activation-offloading, sharding,
        lora-dropout, gradient-accumulation-steps, sync-each-batch
                                          (with huggingface:)
    horus.dev/group: <name>               horus.dev/group-size: "4"   (a gang: `group`)
    horus.dev/binding: env|dra            (default: the operator's `--binding`; `env` where that is reserve)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api import defaults, dljob, keys
from horus_operator.api.dljob import InvalidJob, JobSpec

ONNX_PREFIX = "onnx:"
HUGGINGFACE_PREFIX = "huggingface:"
MODEL_FORMS = "a catalog name, onnx:<configmap>[/<key>] or huggingface:<configmap>[/<key>]"

# The DLJob field each annotation sets (the longest match names an error's annotation).
FIELDS: Mapping[str, str] = {
    "spec.model": keys.ANNOTATION_MODEL,
    "spec.model.architecture": keys.ANNOTATION_MODEL,
    "spec.model.onnx": keys.ANNOTATION_MODEL,
    dljob.HUGGINGFACE: keys.ANNOTATION_MODEL,
    f"{dljob.HUGGINGFACE}.sequenceLength": keys.ANNOTATION_SEQUENCE_LENGTH,
    f"{dljob.HUGGINGFACE}.optimizer": keys.ANNOTATION_OPTIMIZER,
    f"{dljob.HUGGINGFACE}.lora": keys.ANNOTATION_LORA_RANK,
    f"{dljob.HUGGINGFACE}.lora.targetModules": keys.ANNOTATION_LORA_TARGETS,
    f"{dljob.HUGGINGFACE}.lora.dropout": keys.ANNOTATION_LORA_DROPOUT,
    f"{dljob.HUGGINGFACE}.gradientCheckpointing": keys.ANNOTATION_GRADIENT_CHECKPOINTING,
    f"{dljob.HUGGINGFACE}.weightsDtype": keys.ANNOTATION_WEIGHTS_DTYPE,
    f"{dljob.HUGGINGFACE}.attention": keys.ANNOTATION_ATTENTION,
    f"{dljob.HUGGINGFACE}.optimizerInBackward": keys.ANNOTATION_OPTIMIZER_IN_BACKWARD,
    f"{dljob.HUGGINGFACE}.lossChunks": keys.ANNOTATION_LOSS_CHUNKS,
    f"{dljob.HUGGINGFACE}.activationOffloading": keys.ANNOTATION_ACTIVATION_OFFLOADING,
    f"{dljob.HUGGINGFACE}.sharding": keys.ANNOTATION_SHARDING,
    f"{dljob.HUGGINGFACE}.gradientAccumulationSteps": keys.ANNOTATION_GRADIENT_ACCUMULATION_STEPS,
    f"{dljob.HUGGINGFACE}.syncEachBatch": keys.ANNOTATION_SYNC_EACH_BATCH,
    dljob.INPUT_SHAPE: keys.ANNOTATION_INPUT_SHAPE,
    "spec.batchSize": keys.ANNOTATION_BATCH_SIZE,
    "spec.precision": keys.ANNOTATION_PRECISION,
    "spec.framework": keys.ANNOTATION_FRAMEWORK,
    "spec.maxSlowdown": keys.ANNOTATION_MAX_SLOWDOWN,
    "spec.gpus": keys.ANNOTATION_GPU_COUNT,
    "spec.priority": keys.ANNOTATION_PRIORITY,
    "spec.totalSteps": keys.ANNOTATION_TOTAL_STEPS,
    # Also Horus's record of the binding it gave (`jobs/pods.placement_annotations`): the same word.
    "spec.binding": keys.ANNOTATION_BINDING,
}

# The owner's annotations (`FIELDS`' keys); every other horus.dev/ annotation on a pod is Horus's record
# of a placement and may not be written by its owner (`placement_records`).
SPEC_ANNOTATIONS = frozenset(FIELDS.values()) | {keys.ANNOTATION_GROUP, keys.ANNOTATION_GROUP_SIZE}
# The horus.dev/ annotations a pod's owner writes: the spec's at creation, the progress its job reports
# while it runs. Every other one is Horus's placement record (the admission policy
# manifests/pod-records.yaml lists the same keys).
OWNER_ANNOTATIONS = SPEC_ANNOTATIONS | {keys.ANNOTATION_PROGRESS}

# The workloads whose pods are a gang by their own label (or annotation), named as messages name them.
WORKLOAD_LABELS: Mapping[str, str] = {"PyTorchJob": keys.LABEL_PYTORCHJOB, "JobSet": keys.LABEL_JOBSET}
GROUP_SIZE_BOUNDS = (1, 10_000)

# The CRD's bounds (crds/dljob.yaml), which the API server checks for a DLJob and this module for a pod.
BOUNDS: Mapping[str, tuple[float, float]] = {
    "spec.batchSize": (1, 65536),
    "spec.gpus": (1, 8),
    "spec.maxSlowdown": (1.0, 100.0),
    "spec.priority": (-1_000_000, 1_000_000),
    "spec.totalSteps": (1, math.inf),
}


def annotation_field(key: str) -> str:
    """How an error names an annotation: the path `kubectl explain` and JSONPath use."""
    return f"metadata.annotations['{key}']"


def request_key(namespace: str, name: str) -> str:
    """The pod's key in the scheduling queue (and in `horus.dev/request`): apart from any DLJob's."""
    return f"pod:{namespace}/{name}"


def is_request_key(key: str) -> bool:
    return key.startswith("pod:")


def own_claims_scope(key: str) -> str:
    """`JobRequest.share_scope` of a DRA-bound pod of the pod route (queue key `key`): a scope of its own,
    so it shares its GPUs with nobody. Its ResourceClaims are named at admission, before any GPU is
    chosen, so they are its own, and two claims cannot hold one device (unlike a DLJob's pods, which
    Horus creates after placing, referencing the one claim of each GPU their co-tenants share)."""
    return f"{dljob.Binding.DRA}/{key}"


def wants_horus(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """Whether a pod asks to be placed by Horus: labelled `horus.dev/managed: "true"`, or, unlabelled, it
    names its model (what a namespace labelled `horus.dev/managed: "true"` sends here). `"false"` on
    the pod opts it out of its namespace's choice."""
    label = labels.get(keys.LABEL_MANAGED)
    if label is not None:
        return label == "true"
    return keys.ANNOTATION_MODEL in annotations


def placement_records(annotations: Mapping[str, str]) -> list[str]:
    """The horus.dev/ annotations on a pod that only Horus writes (its record of where the pod runs): all
    but the spec's and the progress its own training job reports."""
    return sorted(k for k in annotations if k.startswith(keys.PREFIX) and k not in OWNER_ANNOTATIONS)


def parse(pod: Mapping[str, Any], *, namespace: str = "") -> JobSpec:
    """The `JobSpec` a pod's annotations describe; `InvalidJob` naming the annotation at fault.
    `namespace`: where the pod is created when its body does not say yet (at admission)."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    body = {
        "metadata": {
            "namespace": meta.get("namespace") or namespace,
            "name": meta.get("name") or meta.get("generateName") or "",
            "uid": meta.get("uid", ""),
            "generation": 1,
        },
        "spec": _spec(annotations),
    }
    try:
        job = dljob.parse(body)
        check_bounds(job)
    except InvalidJob as invalid:
        raise renamed(invalid, annotations) from None
    return job


@dataclass(frozen=True)
class Group:
    """The gang a pod belongs to: its pods are placed all or none (`placement/gangs.py`)."""

    name: str  # unique in the cluster: what named it, the namespace, the name ("PyTorchJob ns/mnist")
    size: int  # its pods in all


def group(pod: Mapping[str, Any], *, namespace: str = "") -> Group | None:
    """The gang `pod` belongs to, None for a pod placed on its own; `InvalidJob` naming the annotation.

    `horus.dev/group` names it where given; otherwise a PyTorchJob's or a JobSet's pods are a gang by
    their workload's label. Horus reads no owner object: the size is `horus.dev/group-size`, which the
    workload's pod templates carry (a PyTorchJob's: the sum of its replicaSpecs' replicas; a JobSet's:
    its replicated jobs' replicas × parallelism)."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    named = _group_name(labels, annotations)
    size_field = annotation_field(keys.ANNOTATION_GROUP_SIZE)
    if named is None:
        if keys.ANNOTATION_GROUP_SIZE in annotations:
            reason = f"given without {keys.ANNOTATION_GROUP} (nor a PyTorchJob's or JobSet's pod label)"
            raise InvalidJob(size_field, annotations[keys.ANNOTATION_GROUP_SIZE], reason)
        return None
    kind, name = named
    if keys.ANNOTATION_GROUP_SIZE not in annotations:
        raise InvalidJob(size_field, None, f"required for the pods of a {kind}: how many pods it has in all")
    size = _number(annotations, keys.ANNOTATION_GROUP_SIZE, int)
    low, high = GROUP_SIZE_BOUNDS
    if not low <= size <= high:
        raise InvalidJob(size_field, annotations[keys.ANNOTATION_GROUP_SIZE], f"from {low} to {high}")
    return Group(f"{kind} {meta.get('namespace') or namespace}/{name}", size)


def _group_name(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[str, str] | None:
    """(what named the group, its name): `horus.dev/group` first, then a workload's label."""
    if keys.ANNOTATION_GROUP in annotations:
        name = annotations[keys.ANNOTATION_GROUP].strip()
        if not name:
            raise InvalidJob(
                annotation_field(keys.ANNOTATION_GROUP), annotations[keys.ANNOTATION_GROUP], "a name"
            )
        return "group", name
    for kind, key in WORKLOAD_LABELS.items():
        name = (labels.get(key) or annotations.get(key) or "").strip()
        if name:
            return kind, name
    return None


def check_bounds(job: JobSpec) -> None:
    """The CRD's minimum and maximum of each number, named as the DLJob names it."""
    values = {
        "spec.batchSize": job.batch_size,
        "spec.gpus": job.gpus,
        "spec.maxSlowdown": job.max_slowdown,
        "spec.priority": job.priority,
        "spec.totalSteps": job.total_steps,
    }
    for path, value in values.items():
        low, high = BOUNDS[path]
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            within = f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
            raise InvalidJob(path, value, within)


def renamed(invalid: InvalidJob, annotations: Mapping[str, str]) -> InvalidJob:
    """The same error, naming the annotation that set the DLJob field it names, with the annotation's
    text as the value (an error deeper inside, such as a Hugging Face config's key, keeps its own path
    in the reason)."""
    path = invalid.field_path
    matches = [f for f in FIELDS if path == f or (path.startswith(f) and not path[len(f)].isalnum())]
    if not matches:
        return invalid
    field = max(matches, key=len)
    key = FIELDS[field]
    reason = invalid.reason if path == field else f"{path}={invalid.value!r}: {invalid.reason}"
    renamed_error = InvalidJob(annotation_field(key), annotations.get(key), reason)
    renamed_error.__cause__ = invalid.__cause__
    return renamed_error


def _spec(annotations: Mapping[str, str]) -> dict[str, Any]:
    """A DLJob spec from the annotations; the numbers converted here (an annotation is text)."""
    spec: dict[str, Any] = {"model": _model(annotations)}
    if keys.ANNOTATION_BATCH_SIZE not in annotations:
        raise InvalidJob(
            annotation_field(keys.ANNOTATION_BATCH_SIZE), None, "required: the per-GPU batch size"
        )
    spec["batchSize"] = _number(annotations, keys.ANNOTATION_BATCH_SIZE, int)
    optional: Mapping[str, tuple[str, type]] = {
        "gpus": (keys.ANNOTATION_GPU_COUNT, int),
        "maxSlowdown": (keys.ANNOTATION_MAX_SLOWDOWN, float),
        "priority": (keys.ANNOTATION_PRIORITY, int),
        "totalSteps": (keys.ANNOTATION_TOTAL_STEPS, int),
    }
    for field, (key, kind) in optional.items():
        if key in annotations:
            spec[field] = _number(annotations, key, kind)
    spec["precision"] = annotations.get(keys.ANNOTATION_PRECISION, defaults.DEFAULT_PRECISION).strip()
    spec["framework"] = annotations.get(keys.ANNOTATION_FRAMEWORK, defaults.DEFAULT_FRAMEWORK).strip()
    if keys.ANNOTATION_BINDING in annotations:  # checked by `dljob.binding_of`, as spec.binding is
        spec["binding"] = annotations[keys.ANNOTATION_BINDING].strip()
    return spec


def _model(annotations: Mapping[str, str]) -> dict[str, Any]:
    text = annotations.get(keys.ANNOTATION_MODEL, "").strip()
    if not text:
        raise InvalidJob(
            annotation_field(keys.ANNOTATION_MODEL),
            annotations.get(keys.ANNOTATION_MODEL),
            (f"required: {MODEL_FORMS}"),
        )
    if text.startswith(ONNX_PREFIX):
        name, key = _config_map(annotations, ONNX_PREFIX, defaults.ONNX_KEY)
        return {"onnx": {"configMap": name, "key": key}}
    if text.startswith(HUGGINGFACE_PREFIX):
        name, key = _config_map(annotations, HUGGINGFACE_PREFIX, defaults.HF_CONFIG_KEY)
        return {"huggingface": {"configMap": name, "key": key, **_huggingface(annotations)}}
    model: dict[str, Any] = {"architecture": text}
    if keys.ANNOTATION_INPUT_SHAPE in annotations:
        model["inputShape"] = _shape(annotations)
    return model


def _config_map(annotations: Mapping[str, str], prefix: str, default_key: str) -> tuple[str, str]:
    text = annotations[keys.ANNOTATION_MODEL].strip()
    name, _, key = text[len(prefix) :].partition("/")
    if not name:
        raise InvalidJob(annotation_field(keys.ANNOTATION_MODEL), text, f"name a ConfigMap: {MODEL_FORMS}")
    return name, key or default_key


# spec.model.huggingface's fields that one annotation each sets as written: words the resolver checks
# against the CRD's enums (`dljob.huggingface_storage`, `huggingface_recipe`), and the converted ones.
_HUGGINGFACE_WORDS: Mapping[str, str] = {
    "optimizer": keys.ANNOTATION_OPTIMIZER,
    "weightsDtype": keys.ANNOTATION_WEIGHTS_DTYPE,
    "attention": keys.ANNOTATION_ATTENTION,
    "sharding": keys.ANNOTATION_SHARDING,
}
_HUGGINGFACE_NUMBERS: Mapping[str, str] = {
    "sequenceLength": keys.ANNOTATION_SEQUENCE_LENGTH,
    "lossChunks": keys.ANNOTATION_LOSS_CHUNKS,
    "gradientAccumulationSteps": keys.ANNOTATION_GRADIENT_ACCUMULATION_STEPS,
}
_HUGGINGFACE_FLAGS: Mapping[str, str] = {
    "gradientCheckpointing": keys.ANNOTATION_GRADIENT_CHECKPOINTING,
    "optimizerInBackward": keys.ANNOTATION_OPTIMIZER_IN_BACKWARD,
    "activationOffloading": keys.ANNOTATION_ACTIVATION_OFFLOADING,
    "syncEachBatch": keys.ANNOTATION_SYNC_EACH_BATCH,
}


def _huggingface(annotations: Mapping[str, str]) -> dict[str, Any]:
    """The training fields of spec.model.huggingface; the resolver checks them as it checks a DLJob's."""
    fields: dict[str, Any] = {
        field: annotations[key].strip() for field, key in _HUGGINGFACE_WORDS.items() if key in annotations
    }
    for field, key in _HUGGINGFACE_NUMBERS.items():
        if key in annotations:
            fields[field] = _number(annotations, key, int)
    for field, key in _HUGGINGFACE_FLAGS.items():
        if key in annotations:
            fields[field] = _flag(annotations, key)
    if keys.ANNOTATION_LORA_RANK in annotations:
        targets = annotations.get(keys.ANNOTATION_LORA_TARGETS, "")
        fields["lora"] = {
            "rank": _number(annotations, keys.ANNOTATION_LORA_RANK, int),
            "targetModules": [t.strip() for t in targets.split(",") if t.strip()],
        }
        if keys.ANNOTATION_LORA_DROPOUT in annotations:
            fields["lora"]["dropout"] = _number(annotations, keys.ANNOTATION_LORA_DROPOUT, float)
    return fields


def _flag(annotations: Mapping[str, str], key: str) -> bool:
    value = annotations[key].strip()
    if value not in ("true", "false"):
        raise InvalidJob(annotation_field(key), annotations[key], "true or false")
    return value == "true"


def _shape(annotations: Mapping[str, str]) -> list[int] | str:
    """ "3x32x32" as sizes; what is not sizes is handed on as written, for `dljob.input_shape` to refuse."""
    text = annotations[keys.ANNOTATION_INPUT_SHAPE].strip()
    parts = text.lower().split("x")
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else text


def _number(annotations: Mapping[str, str], key: str, kind: type) -> Any:
    text = annotations[key].strip()
    try:
        value = kind(text)
    except ValueError:
        raise InvalidJob(
            annotation_field(key), annotations[key], f"{'an integer' if kind is int else 'a number'}"
        ) from None
    return value
