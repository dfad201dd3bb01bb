"""A DLJob's pod template: what in it would override Horus's GPU assignment, and what it asks of a node.

Pure. The CRD schema refuses the same overrides (crds/dljob.yaml); the operator checks again because a
DLJob stored under an older CRD, or with the schema bypassed, must still never choose its own GPU or
node. Each finding is an `InvalidJob` naming the template field and value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api import keys
from horus_operator.api.dljob import InvalidJob
from horus_operator.operator import apierrors

FIELD = "spec.template.spec"
GPU_ENV = frozenset({"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"})  # Horus sets them
GPU_RESOURCE_PREFIX = "nvidia.com/"
NODE_FIELDS = ("nodeName", "nodeSelector", "affinity")  # Horus picks the node
CONTAINER_LISTS = ("initContainers", "containers")

_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def check(template: Mapping[str, Any]) -> None:
    """Raise `InvalidJob` for the first field that would choose the node or the GPUs for Horus, or
    write Horus's own record of a placement."""
    _check_metadata(template.get("metadata") or {})
    spec = template.get("spec") or {}
    for name in NODE_FIELDS:
        if spec.get(name):
            raise InvalidJob(f"{FIELD}.{name}", spec[name], "Horus picks the node (by its GPUs); remove it")
    if spec.get("resourceClaims"):  # a claim of its own could name any GPU, outside Horus's books
        raise InvalidJob(
            f"{FIELD}.resourceClaims",
            spec["resourceClaims"],
            "Horus assigns the GPU (under DRA binding through its own ResourceClaim); remove it",
        )
    for where, container in containers(spec):
        _check_container(where, container)


def _check_metadata(metadata: Mapping[str, Any]) -> None:
    """Horus's labels and annotations on a pod are its record of the placement (which GPUs, which
    claims); one copied from the template would be read back as if Horus had written it."""
    for kind in ("labels", "annotations"):
        for key in sorted(metadata.get(kind) or {}):
            if key.startswith(keys.PREFIX):
                raise InvalidJob(
                    f"spec.template.metadata.{kind}", key, f"keys under {keys.PREFIX} are Horus's own"
                )


def _check_container(where: str, container: Mapping[str, Any]) -> None:
    for i, env in enumerate(container.get("env") or []):
        if env.get("name") in GPU_ENV:
            raise InvalidJob(f"{where}.env[{i}].name", env["name"], "set by Horus, which assigns the GPU")
    for kind in ("requests", "limits"):
        for resource in (container.get("resources") or {}).get(kind) or {}:
            if resource.startswith(GPU_RESOURCE_PREFIX):
                raise InvalidJob(
                    f"{where}.resources.{kind}", resource, "GPU resources are refused; Horus assigns the GPU"
                )
    if (container.get("securityContext") or {}).get("privileged"):
        raise InvalidJob(
            f"{where}.securityContext.privileged", True, "a privileged container sees every GPU of its node"
        )


def containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each init container and container of a pod spec, with its field path in the DLJob."""
    for kind in CONTAINER_LISTS:
        for i, container in enumerate(spec.get(kind) or []):
            yield f"{FIELD}.{kind}[{i}]", container


def quantity(text: object) -> float:
    """A Kubernetes quantity ("500m", "4Gi", "1e3", 2) as a number (one too large for a float is
    infinite: more than any node has); ValueError when it is none."""
    match = _QUANTITY.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, suffix = match.group(1), match.group(2) or ""
    if suffix in _BINARY:
        return float(number) * 1024.0 ** _BINARY[suffix]
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    return float(f"{number}e{exponent}")


@dataclass(frozen=True)
class Request:
    """What the pod asks of a node for one resource, and the template field most of it comes from."""

    resource: str
    amount: float
    field: str
    value: object


def pod_requests(template: Mapping[str, Any]) -> dict[str, Request]:
    """Per resource, what kube-scheduler asks a node for: the containers' requests summed (a limit stands
    in for a missing request), or the largest init container's (they run one at a time), whichever is
    more. Unparseable quantities are skipped: the schema, or else the API server, refuses them."""
    spec = template.get("spec") or {}
    summed: dict[str, Request] = {}
    for own in _requests(spec.get("containers") or [], "containers"):
        previous = summed.get(own.resource)
        if previous is None:
            summed[own.resource] = own
        else:
            largest = max(previous, own, key=lambda r: r.amount)
            summed[own.resource] = Request(
                own.resource, previous.amount + own.amount, largest.field, largest.value
            )
    for own in _requests(spec.get("initContainers") or [], "initContainers"):
        if own.resource not in summed or own.amount > summed[own.resource].amount:
            summed[own.resource] = own
    return summed


def _requests(containers: Iterable[Mapping[str, Any]], kind: str) -> Iterator[Request]:
    for i, container in enumerate(containers):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource in {**limits, **requests}:
            given, raw = (
                ("requests", requests[resource]) if resource in requests else ("limits", limits[resource])
            )
            try:
                amount = quantity(raw)
            except ValueError:
                continue
            yield Request(resource, amount, f"{FIELD}.{kind}[{i}].resources.{given}.{resource}", raw)


def host_cpus(template: Mapping[str, Any]) -> float:
    """CPU cores the job may keep busy beside its training loop (`Workload.host_cpus`): what its pod may
    use beyond one core, by its containers' CPU limits, else their requests (a limit, where given, is
    what the containers can take; init containers have ended before training starts)."""
    cores = 0.0
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        given = (resources.get("limits") or {}).get("cpu", (resources.get("requests") or {}).get("cpu"))
        try:
            cores += quantity(given) if given is not None else 0.0
        except ValueError:
            continue  # the schema, or else the API server, refuses it
    return max(0.0, cores - 1.0) if math.isfinite(cores) else 0.0


def allocatable(node: Mapping[str, Any]) -> dict[str, float]:
    """Per resource, what the Node object offers (`status.allocatable`); unparseable quantities left out."""
    offered: dict[str, float] = {}
    for resource, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            offered[resource] = quantity(raw)
        except ValueError:
            continue
    return offered


def largest_allocatable(nodes: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Per resource, the most any of `nodes` offers (each an `allocatable`)."""
    largest: dict[str, float] = {}
    for offered in nodes:
        for resource, amount in offered.items():
            largest[resource] = max(largest.get(resource, 0.0), amount)
    return largest


def beyond_every_node(template: Mapping[str, Any], largest: Mapping[str, float]) -> InvalidJob | None:
    """The first resource the pod asks more of than any node offers (`largest_allocatable` of the GPU
    nodes), or None. Without nodes nothing is judged. Such a pod is unschedulable wherever Horus puts it."""
    if not largest:
        return None
    for resource, request in sorted(pod_requests(template).items()):
        most = largest.get(resource, 0.0)
        if request.amount > most:
            return InvalidJob(
                request.field,
                request.value,
                f"the pod asks for {request.amount:g} {resource} in all; no GPU node has more than "
                f"{most:g} allocatable",
            )
    return None


def refused(pod: Mapping[str, Any], reason: str, body: str) -> InvalidJob:
    """The API server's refusal (its Status `body`) of the pod built from the template, as the template
    field it names first; the user fixes the template, so the pod's own field paths are translated.
    Without a field (a quota, an admission webhook or policy), what the API server said, on one line:
    never the Status's JSON."""
    message, causes = apierrors.explained(body)
    if not causes:
        return InvalidJob("spec.template", None, f"pod refused ({reason}): {message or 'no reason given'}")
    first, *others = causes
    also = "".join(f"; also {_template_field(c.field)}: {c.message}" for c in others)
    return InvalidJob(
        _template_field(first.field), _at(pod, first.field), f"pod refused ({reason}): {first.message}{also}"
    )


def _template_field(pod_field: str) -> str:
    """A pod's field path as the DLJob's: the pod's spec and metadata come from the template's."""
    if pod_field.startswith(("spec.", "metadata.")):
        return f"spec.template.{pod_field}"
    return f"spec.template (pod field {pod_field})"


def _at(document: Any, path: str) -> Any:
    """The value at an API field path such as `spec.containers[0].name`, None where there is none."""
    for step in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        try:
            document = document[int(step[1:-1])] if step.startswith("[") else document[step]
        except (KeyError, IndexError, TypeError):
            return None
    return document
