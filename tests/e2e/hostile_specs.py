"""Hypothesis strategies for hostile DLJob specs (issue 10, item 3), each with what it must come to.

A `Case` is a change to the shared builder's valid DLJob (`DLJobBuilder`, running 1 s on its kwok pod)
and the outcomes it may have:
- `refused`: the API server refuses it (CRD schema or CEL rule), naming one of `fields`;
- `not-json`: NaN or ±Infinity, which JSON cannot carry: the API server cannot parse the body, so no
  field can be named;
- `failed`: accepted, then `phase: Failed` with a condition naming one of `fields` and the value;
- `placed`: a valid spec after all, placed like any other.
The expectation comes from what the generator did, never from what the cluster answered.
"""

from __future__ import annotations

import gzip
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from horus_operator.prediction import catalog
from horus_operator.prediction.api import UnknownModelError
from horus_operator.prediction.features import PROFILE_NAMES
from horus_operator.testing.builders import IMAGE, DLJobBuilder
from horus_operator.testing.operator_process import REPO

REFUSED, NOT_JSON, FAILED, PLACED = "refused", "not-json", "failed", "placed"
Path = tuple[str | int, ...]
CONTAINER: Path = ("spec", "template", "spec", "containers", 0)
INIT_CONTAINERS: Path = ("spec", "template", "spec", "initContainers")
GRAPH = gzip.decompress((REPO / "horus_operator/prediction/data/graphs/pointnet.onnx.gz").read_bytes())
# Kubernetes names: a ConfigMap is named by a DNS-1123 subdomain; its keys are these characters.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")


@dataclass(frozen=True)
class Case:
    kind: str  # what the generator aimed at
    changes: tuple[tuple[Path, Any], ...]
    fields: tuple[str, ...]  # a refusal or a Failed condition must name one of these (or a field below)
    expect: frozenset[str]
    graph: bytes | None = None  # when set, the job reads its model from a ConfigMap holding these bytes
    onnx_absent: bool = False  # the job names a ConfigMap that does not exist

    def manifest(self, name: str) -> dict[str, Any]:
        body = DLJobBuilder(name).runs_for("1s").obj()
        if self.graph is not None or self.onnx_absent:
            body["spec"]["model"] = {"onnx": {"configMap": config_map_name(name)}}
        for path, value in self.changes:
            put(body, path, value)
        return body


def config_map_name(job: str) -> str:
    return f"{job}-graph"


def dotted(path: Path) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def put(body: dict[str, Any], path: Path, value: Any) -> None:
    *parents, last = path
    node: Any = body
    for step in parents:
        node = node[step] if isinstance(step, int) else node.setdefault(step, {})
    node[last] = value


def _case(kind: str, path: Path, value: Any, expect: str | frozenset[str], *fields: str) -> Case:
    """`value` at `path`; a refusal or Failed condition must name `fields` (by default `path`)."""
    allowed = frozenset({expect}) if isinstance(expect, str) else expect
    return Case(kind, ((path, value),), fields or (dotted(path),), allowed)


# ---- numbers and types ----

BOUNDED_INTEGERS: dict[Path, tuple[int, int]] = {
    ("spec", "batchSize"): (1, 65536),
    ("spec", "gpus"): (1, 8),  # more than any node has, when above 8
    ("spec", "priority"): (-1_000_000, 1_000_000),
    ("spec", "backoffLimit"): (0, 100),
}
TYPED: dict[Path, str] = {
    **dict.fromkeys(BOUNDED_INTEGERS, "integer"),
    ("spec", "maxSlowdown"): "number",
    ("spec", "precision"): "string",
    ("spec", "framework"): "string",
    ("spec", "model"): "object",
    ("spec", "model", "architecture"): "string",
    ("spec", "simulation"): "object",
    ("spec", "simulation", "fail"): "boolean",
    ("spec", "template"): "object",
    ("spec", "template", "spec", "containers"): "array",
    (*CONTAINER, "env"): "array",
    (*CONTAINER, "image"): "string",
    (*CONTAINER, "resources", "requests"): "object",
}
ANY_JSON = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]),  # what a YAML user might mean
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
)


def _of_type(kind: str, value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return {
        "integer": number and float(value).is_integer(),  # 2.0 is an integer to the API server
        "number": number,
        "string": isinstance(value, str),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "boolean": isinstance(value, bool),
    }[kind]


@st.composite
def wrong_types(draw: st.DrawFn) -> Case:
    path, kind = draw(st.sampled_from(list(TYPED.items())))
    value = draw(ANY_JSON.filter(lambda v: not _of_type(kind, v)))
    return _case("wrong type", path, value, REFUSED)


@st.composite
def out_of_range(draw: st.DrawFn) -> Case:
    path = draw(st.sampled_from([*BOUNDED_INTEGERS, ("spec", "maxSlowdown")]))
    if path == ("spec", "maxSlowdown"):
        value: float = draw(
            st.floats(max_value=0.999, allow_infinity=False)
            | st.floats(min_value=100.001, allow_infinity=False)
        )
    else:
        low, high = BOUNDED_INTEGERS[path]
        huge = st.sampled_from([2**63, -(2**63) - 1, 10**30])  # beyond int64: a float to the server
        value = draw(st.integers(max_value=low - 1) | st.integers(min_value=high + 1) | huge)
    return _case("out of range", path, value, REFUSED)


@st.composite
def not_json(draw: st.DrawFn) -> Case:
    path = draw(st.sampled_from([*BOUNDED_INTEGERS, ("spec", "maxSlowdown")]))
    value = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    return _case("NaN or infinity", path, value, NOT_JSON)


@st.composite
def in_range(draw: st.DrawFn) -> Case:
    """Extremes the schema accepts: placed, or Failed naming the field (a batch no GPU can hold)."""
    path = draw(st.sampled_from(list(BOUNDED_INTEGERS)))
    low, high = BOUNDED_INTEGERS[path]
    value = draw(st.sampled_from([low, high]) | st.integers(low, high))
    return _case("extreme but in range", path, value, frozenset({PLACED, FAILED}))


# ---- models ----


def _known(name: str) -> bool:
    try:
        catalog.canonical(name)
    except UnknownModelError:
        return False
    return True


@st.composite
def unknown_models(draw: st.DrawFn) -> Case:
    path = ("spec", "model", "architecture")
    name = draw(st.text(min_size=0, max_size=80))
    if not 1 <= len(name) <= 63:
        return _case("model name length", path, name, REFUSED)
    return _case("unknown model", path, name, PLACED if _known(name) else FAILED)


@st.composite
def onnx_references(draw: st.DrawFn) -> Case:
    onnx: Path = ("spec", "model", "onnx")
    bad_name = st.text(min_size=1, max_size=40).filter(lambda s: DNS_SUBDOMAIN.fullmatch(s) is None)
    bad_key = st.text(min_size=1, max_size=40).filter(lambda s: CONFIG_MAP_KEY.fullmatch(s) is None)
    choice = draw(st.sampled_from(["name", "key", "absent", "contents"]))
    if choice == "name":
        return _case(
            "ONNX ConfigMap name", onnx, {"configMap": draw(bad_name)}, REFUSED, f"{dotted(onnx)}.configMap"
        )
    if choice == "key":
        return _case("ONNX ConfigMap key", (*onnx, "key"), draw(bad_key), REFUSED)
    if choice == "absent":
        return Case("ONNX ConfigMap absent", (), (dotted(onnx),), frozenset({FAILED}), onnx_absent=True)
    contents, expect = draw(_graphs())
    return Case("ONNX contents", (), (dotted(onnx), "spec.batchSize"), expect, graph=contents)


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[bytes, frozenset[str]]:
    """ONNX files: garbage, truncated, bit-flipped (may still parse) or intact."""
    kind = draw(st.sampled_from(["garbage", "truncated", "flipped", "intact"]))
    if kind == "garbage":
        return draw(st.binary(max_size=256)), frozenset({FAILED, PLACED})
    if kind == "truncated":
        return GRAPH[: draw(st.integers(0, len(GRAPH) - 1))], frozenset({FAILED, PLACED})
    if kind == "flipped":
        flipped = bytearray(GRAPH)
        for at in draw(st.lists(st.integers(0, len(GRAPH) - 1), min_size=1, max_size=8)):
            flipped[at] ^= 1 << draw(st.integers(0, 7))
        return bytes(flipped), frozenset({FAILED, PLACED})
    return GRAPH, frozenset({PLACED})


@st.composite
def features(draw: st.DrawFn) -> Case:
    path: Path = ("spec", "model")
    sane = st.floats(0, 1e18)
    if draw(st.booleans()):  # every profile feature, maybe one hostile value
        given = {name: draw(sane) for name in PROFILE_NAMES}
    else:
        given = draw(st.dictionaries(st.sampled_from(PROFILE_NAMES) | st.text(max_size=8), sane, max_size=8))
    if draw(st.booleans()) and given:
        name = draw(st.sampled_from(sorted(given)))
        given[name] = draw(
            st.floats(max_value=-1e-9, allow_infinity=False)
            | st.floats(min_value=1.01e18, allow_infinity=False)
        )
        return _case("feature value", path, {"features": given}, REFUSED, "spec.model.features")
    either = frozenset({FAILED, PLACED})
    return _case("features", path, {"features": given}, either, "spec.model.features", "spec.batchSize")


# ---- pod templates ----

_QUANTITIES = st.sampled_from(["100m", "1", "2", "64Mi", "1Gi"])
# More than any node offers (kwok nodes: 32 CPUs, 256Gi).
_HUGE_QUANTITIES = {
    "cpu": st.sampled_from(["1000", "1e6", "64Mi"]),
    "memory": st.sampled_from(["1Pi", "1e30", "9999999Gi"]),
}
_NOT_QUANTITIES = st.from_regex(r"[A-Za-z ]{1,8}", fullmatch=True)


@st.composite
def gpu_environment(draw: st.DrawFn) -> Case:
    variable = {
        "name": draw(st.sampled_from(["NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"])),
        "value": draw(st.text(max_size=8)),
    }
    if draw(st.booleans()):
        return _case("GPU env", (*CONTAINER, "env"), [{"name": "EPOCHS", "value": "3"}, variable], REFUSED)
    init = [{"name": "init", "image": IMAGE, "env": [variable]}]
    return _case(
        "GPU env (init container)", INIT_CONTAINERS, init, REFUSED, f"{dotted(INIT_CONTAINERS)}[0].env"
    )


@st.composite
def node_pinning(draw: st.DrawFn) -> Case:
    spec: Path = ("spec", "template", "spec")
    hostname = st.just("kubernetes.io/hostname") | st.text(max_size=10)
    choice = draw(st.sampled_from(["nodeName", "nodeSelector", "affinity"]))
    value = {
        "nodeName": st.sampled_from(["gpu-node-0", "a100-node-0"]) | st.text(min_size=1, max_size=20),
        "nodeSelector": st.dictionaries(hostname, st.text(max_size=10), max_size=2),
        "affinity": st.just({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}),
    }[choice]
    return _case("node pinning", (*spec, choice), draw(value), REFUSED)


@st.composite
def privileged(draw: st.DrawFn) -> Case:
    wanted = draw(st.booleans())
    path = (*CONTAINER, "securityContext")
    return _case(
        "privileged",
        path,
        {"privileged": wanted},
        REFUSED if wanted else PLACED,
        f"{dotted(path)}.privileged",
    )


@st.composite
def gpu_resources(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["requests", "limits"]))
    resource = draw(st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.5gb"]))
    amount = draw(st.integers(0, 16) | _QUANTITIES)
    in_init = draw(st.booleans())
    container: Path = (*INIT_CONTAINERS, 0) if in_init else CONTAINER
    value = {kind: {resource: amount}}
    if in_init:
        return _case(
            "GPU resources (init container)",
            INIT_CONTAINERS,
            [{"name": "init", "resources": value}],
            REFUSED,
            f"{dotted(container)}.resources.{kind}",
        )
    return _case(
        "GPU resources", (*container, "resources"), value, REFUSED, f"{dotted(container)}.resources.{kind}"
    )


@st.composite
def cpu_and_memory(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["requests", "limits"]))
    resource = draw(st.sampled_from(["cpu", "memory"]))
    path = (*CONTAINER, "resources")
    where = f"{dotted(path)}.{kind}"
    choice = draw(st.sampled_from(["ordinary", "huge", "malformed"]))
    if choice == "malformed":
        return _case("malformed quantity", path, {kind: {resource: draw(_NOT_QUANTITIES)}}, REFUSED, where)
    quantity = draw(_HUGE_QUANTITIES[resource] if choice == "huge" else _QUANTITIES)
    value = {kind: {resource: quantity}}
    if choice == "huge":
        return _case("more than any node", path, value, FAILED, where)
    other = "limits" if kind == "requests" else "requests"  # a limit below the request: the pod is refused
    value[other] = {resource: draw(_QUANTITIES)}
    return _case("cpu and memory", path, value, frozenset({PLACED, FAILED}))


# One strategy per kind of hostility: each gets its own examples, so every kind is tried.
STRATEGIES: tuple[Callable[[], st.SearchStrategy[Case]], ...] = (
    wrong_types,
    out_of_range,
    not_json,
    in_range,
    unknown_models,
    onnx_references,
    features,
    gpu_environment,
    node_pinning,
    privileged,
    gpu_resources,
    cpu_and_memory,
)
