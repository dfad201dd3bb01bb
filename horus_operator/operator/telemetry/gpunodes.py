"""Live GPU telemetry (the agents' GPUNode objects, see crds/gpunode.yaml) merged into the placement view.

Pure: `merge` takes the GFD-derived nodes, the GPUNode bodies and the time, and returns nodes whose GPUs
carry their UUID, health and observed memory/utilization. Rules:
- a node without a GPUNode keeps its GPUs as they are (clusters may run without agents);
- a GPUNode older than the TTL (a silent agent), or one whose NVML is unavailable, makes every GPU of
  its node unhealthy;
- a GPU the labels promise but the agent does not list is unhealthy (it fell off the bus).

Freshness is judged on the operator's clock alone, by when a publish was *received*: an agent's
`lastUpdate` is its own wall clock, which may run minutes ahead (its data would look fresh long after
it fell silent) or behind (fresh data would look stale forever). `parse` takes the receipt time and the
node's previous parse: a new `lastUpdate` (a publish) is heard now; an unchanged one (a re-list, a
metadata change) keeps the time it was first heard; a GPUNode seen for the first time (the operator
started) counts from the older of its `lastUpdate` and now, so a long-silent agent is stale at once
when the clocks agree, an agent ahead is trusted one TTL at most, and an agent behind is stale only
until its next publish.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from horus_operator.placement.types import Gpu, Node

DEFAULT_TTL_SECONDS = 60.0
_MEMO_SIZE = 4


@dataclass(frozen=True)
class GpuTelemetry:
    index: int
    uuid: str | None
    healthy: bool
    memory_used_mib: float | None
    utilization: float | None


@dataclass(frozen=True)
class NodeTelemetry:
    node: str
    updated_at: float | None  # the agent's `lastUpdate`, epoch seconds on its clock; None: never published
    nvml_available: bool
    gpus: Mapping[int, GpuTelemetry]
    heard_at: float | None = None  # when that publish reached the operator, on the operator's clock
    # (labelled node, usable) -> merged node: the operator merges the same pair every scheduling cycle
    # until the GPUNode changes (then a new NodeTelemetry replaces this one, and its memo).
    _merged: dict[tuple[Node, bool], Node] = field(default_factory=dict, compare=False, repr=False)

    def fresh(self, now: float, ttl: float) -> bool:
        """`now`: the operator's clock, the one `heard_at` was taken on."""
        return self.heard_at is not None and now - self.heard_at <= ttl


def parse(
    body: Mapping[str, Any], *, received_at: float, previous: NodeTelemetry | None = None
) -> NodeTelemetry:
    """`received_at`: the operator's time now; `previous`: this node's last parse, if any."""
    status = body.get("status") or {}
    gpus = (_gpu(g) for g in status.get("gpus") or [] if "index" in g)
    updated_at = _epoch(status.get("lastUpdate"))
    return NodeTelemetry(
        node=body["metadata"]["name"],
        updated_at=updated_at,
        nvml_available=bool(status.get("nvmlAvailable", False)),
        gpus={g.index: g for g in gpus},
        heard_at=_heard_at(updated_at, received_at, previous),
    )


def _heard_at(updated_at: float | None, received_at: float, previous: NodeTelemetry | None) -> float | None:
    if updated_at is None:
        return None
    if previous is None:
        return min(updated_at, received_at)
    if previous.updated_at == updated_at:
        return previous.heard_at
    return received_at


def merge(
    nodes: Iterable[Node], telemetry: Iterable[NodeTelemetry], *, now: float, ttl: float = DEFAULT_TTL_SECONDS
) -> tuple[Node, ...]:
    """`telemetry`: parsed GPUNodes (`parse`; the operator's cache parses each once, when it changes)."""
    by_node = {t.node: t for t in telemetry}
    return tuple(_merged(node, by_node.get(node.name), now, ttl) for node in nodes)


def _merged(node: Node, telemetry: NodeTelemetry | None, now: float, ttl: float) -> Node:
    if telemetry is None:
        return node
    usable = telemetry.nvml_available and telemetry.fresh(now, ttl)
    key = (node, usable)
    if key not in telemetry._merged:
        if len(telemetry._merged) >= _MEMO_SIZE:  # the node's labels or schedulability changed
            telemetry._merged.clear()
        gpus = tuple(_observed(gpu, telemetry, usable) for gpu in node.gpus)
        telemetry._merged[key] = dataclasses.replace(node, gpus=gpus)
    return telemetry._merged[key]


def _observed(gpu: Gpu, telemetry: NodeTelemetry, usable: bool) -> Gpu:
    seen = telemetry.gpus.get(gpu.index)
    if seen is None:
        return _copy(gpu, healthy=False)
    return _copy(
        gpu,
        uuid=seen.uuid or gpu.uuid,
        healthy=gpu.healthy and usable and seen.healthy,
        observed_memory_used_mib=seen.memory_used_mib if usable else None,
        observed_utilization=seen.utilization if usable else None,
    )


_GPU_FIELDS = tuple(spec.name for spec in dataclasses.fields(Gpu))


def _copy(gpu: Gpu, **changes: Any) -> Gpu:
    """`dataclasses.replace`, faster (8,000 GPUs at 1,000 nodes when a whole cluster reports at once).
    Reads the fields by name: a compiled `Gpu` (`make compiled`) has no `__dict__`."""
    return Gpu(**({name: getattr(gpu, name) for name in _GPU_FIELDS} | changes))


def _gpu(entry: Mapping[str, Any]) -> GpuTelemetry:
    return GpuTelemetry(
        index=int(entry["index"]),
        uuid=entry.get("uuid"),
        healthy=bool(entry.get("healthy", False)),
        memory_used_mib=_number(entry.get("memoryUsedMiB")),
        utilization=_number(entry.get("utilization")),
    )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _epoch(stamp: str | datetime | None) -> float | None:
    if stamp is None:
        return None
    if isinstance(stamp, datetime):
        return stamp.timestamp()
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
