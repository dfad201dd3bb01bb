"""Live GPU telemetry (the agents' GPUNode objects, see crds/gpunode.yaml) merged into the placement view.

Pure: `merge` takes the GFD-derived nodes, the GPUNode bodies and the time, and returns nodes whose GPUs
carry their UUID, health and observed memory/utilization. Rules:
- a node without a GPUNode keeps its GPUs as they are (clusters may run without agents);
- a GPUNode older than the TTL (a silent agent), or one whose NVML is unavailable, makes every GPU of
  its node unhealthy;
- a GPU the labels promise but the agent does not list is unhealthy (it fell off the bus);
- under the `reserve` binding, a slot (a GPU index of Horus's books) reads the agent's GPU whose UUID its
  reservation reported, not the same-numbered one: the device plugin chose the physical GPU
  (`slot_readings`).

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
    # (labelled node, usable, reservations) -> merged node: the operator merges the same key every
    # scheduling cycle until the GPUNode changes (then a new NodeTelemetry replaces this one, and its memo).
    _merged: dict[tuple[Node, bool, tuple[tuple[int, str], ...]], Node] = field(
        default_factory=dict, compare=False, repr=False
    )

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
    nodes: Iterable[Node],
    telemetry: Iterable[NodeTelemetry],
    *,
    now: float,
    ttl: float = DEFAULT_TTL_SECONDS,
    reserved: Mapping[str, Mapping[int, str]] | None = None,
) -> tuple[Node, ...]:
    """`telemetry`: parsed GPUNodes (`parse`; the operator's cache parses each once, when it changes);
    `reserved`: node -> slot -> the GPU UUID its reservation reported (`reserve` binding)."""
    by_node = {t.node: t for t in telemetry}
    held = reserved or {}
    return tuple(_merged(node, by_node.get(node.name), now, ttl, held.get(node.name, {})) for node in nodes)


def _merged(
    node: Node, telemetry: NodeTelemetry | None, now: float, ttl: float, reserved: Mapping[int, str]
) -> Node:
    if telemetry is None:
        return node
    usable = telemetry.nvml_available and telemetry.fresh(now, ttl)
    key = (node, usable, tuple(sorted(reserved.items())))
    if key not in telemetry._merged:
        if len(telemetry._merged) >= _MEMO_SIZE:  # the node's labels, schedulability or reservations changed
            telemetry._merged.clear()
        read = slot_readings(telemetry.gpus, reserved) if reserved else telemetry.gpus
        gpus = tuple(_observed(gpu, read.get(gpu.index), usable) for gpu in node.gpus)
        telemetry._merged[key] = dataclasses.replace(node, gpus=gpus)
    return telemetry._merged[key]


def slot_readings(gpus: Mapping[int, GpuTelemetry], reserved: Mapping[int, str]) -> dict[int, GpuTelemetry]:
    """Slot -> the agent's GPU it reads, on a node where `reserved` (slot -> UUID) says which physical GPU
    the device plugin gave the slots' reservations (`gpus`: the agent's GPUs by its own index). A reserved
    slot reads the GPU with its reservation's UUID. Any other slot reads its same-numbered GPU, as without
    reservations, unless a reservation holds that GPU: then the lowest-numbered GPU no slot holds or reads
    (one the plugin still has free), so no GPU's readings count twice. A reservation whose UUID the agent
    does not list leaves its slot to the same rule; a slot left with no GPU to read is absent."""
    by_uuid = {gpu.uuid: gpu for gpu in gpus.values() if gpu.uuid}
    read = {slot: by_uuid[uuid] for slot, uuid in reserved.items() if uuid in by_uuid}
    held = {gpu.index for gpu in read.values()}
    read.update({index: gpu for index, gpu in gpus.items() if index not in held and index not in read})
    displaced = sorted(index for index in held if index not in read)  # slots whose GPU another holds
    taken = {gpu.index for gpu in read.values()}
    free = (gpu for index, gpu in sorted(gpus.items()) if index not in taken)
    read.update(zip(displaced, free, strict=False))
    return read


def _observed(gpu: Gpu, seen: GpuTelemetry | None, usable: bool) -> Gpu:
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
