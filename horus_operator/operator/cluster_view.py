"""The cluster as a placement policy sees it, built only from what the API server shows.

`gpu_nodes` turns Node objects (GPU Feature Discovery labels, or the ResourceSlices of NVIDIA's DRA
driver where it runs: `slices.py`) into the nodes a policy sees, with node-agent telemetry (UUIDs,
health, observed memory) merged and GPUs that someone else's ResourceClaim holds marked, so every
decision sees one consistent view; `running_jobs` turns the pods Horus placed (their GPU-assignment
annotations) into running jobs; `build_snapshot` is both in one `ClusterSnapshot`. The scheduling
loop keeps its index of the running jobs across decisions (`placement.keeper`), reading only the
pods that changed.

Each Node object is read once per change, into a `NodeView` (the cache keeps one per node): the nodes
are read every scheduling cycle, and at 1,000 nodes parsing every node's labels into GPUs each time was
most of a cycle.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.dra import slices
from horus_operator.operator.dra.slices import SliceGpu
from horus_operator.operator.jobs import template
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.telemetry.gpunodes import DEFAULT_TTL_SECONDS, NodeTelemetry, merge
from horus_operator.placement.types import Assignment, ClusterSnapshot, Gpu, Node, RunningJob
from horus_operator.prediction.api import UnknownGpuError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeView:
    """What the operator reads of one Node object."""

    name: str
    labelled: Node | None  # its GPUs as GPU Feature Discovery's labels give them; None: no (known) GPUs
    schedulable: bool
    hostname: str
    not_ready_since: datetime | None  # see `not_ready_since`
    allocatable: Mapping[str, float]  # status.allocatable, as numbers (unparseable quantities left out)


def view(body: Mapping[str, Any]) -> NodeView:
    return NodeView(
        name=body["metadata"]["name"],
        labelled=gpu_node(body),
        schedulable=is_schedulable(body),
        hostname=hostname(body),
        not_ready_since=not_ready_since(body),
        allocatable=template.allocatable(body),
    )


@dataclass(frozen=True)
class NodesSummary:
    """What decisions read of all nodes at once."""

    largest_allocatable: dict[str, float]  # per resource, the most a GPU node offers
    not_ready_since: dict[str, datetime]  # node -> since when it is not Ready (see `not_ready_since`)
    # The GPU type most of the cluster's GPUs are (None without GPU nodes): where a waiting job's length
    # is estimated, before anyone knows where it will run.
    common_gpu: str | None = None


def summarise(nodes: Iterable[NodeView]) -> NodesSummary:
    listed = list(nodes)
    counts = Counter(gpu.product for n in listed if n.labelled for gpu in n.labelled.gpus)
    return NodesSummary(
        largest_allocatable=template.largest_allocatable(n.allocatable for n in listed if n.labelled),
        not_ready_since={n.name: n.not_ready_since for n in listed if n.not_ready_since is not None},
        common_gpu=min(counts, key=lambda product: (-counts[product], product)) if counts else None,
    )


def build_snapshot(
    nodes: Iterable[NodeView],
    pods: Iterable[PodView],
    *,
    now: float,
    gpunodes: Iterable[NodeTelemetry] = (),
    telemetry_ttl: float = DEFAULT_TTL_SECONDS,
    slice_gpus: Iterable[SliceGpu] = (),
    claimed: Mapping[str, str] | None = None,
    previous: tuple[Node, ...] = (),
) -> ClusterSnapshot:
    """The snapshot of `gpu_nodes` (the same arguments) with the jobs `pods` run (`running_jobs`)."""
    listed = gpu_nodes(
        nodes,
        now=now,
        gpunodes=gpunodes,
        telemetry_ttl=telemetry_ttl,
        slice_gpus=slice_gpus,
        claimed=claimed,
        previous=previous,
    )
    return ClusterSnapshot(nodes=listed, running=running_jobs(pods), now=now)


def gpu_nodes(
    nodes: Iterable[NodeView],
    *,
    now: float,
    gpunodes: Iterable[NodeTelemetry] = (),
    telemetry_ttl: float = DEFAULT_TTL_SECONDS,
    slice_gpus: Iterable[SliceGpu] = (),
    claimed: Mapping[str, str] | None = None,
    claimed_slots: Mapping[tuple[str, int], str] | None = None,
    reserved: Mapping[str, Mapping[int, str]] | None = None,
    previous: tuple[Node, ...] = (),
) -> tuple[Node, ...]:
    """`nodes`: the Node objects (`view`); `gpunodes`: the agents' GPUNodes (parsed: `merge`); `now`:
    epoch seconds on the operator's clock, the one the GPUNodes were heard on; `slice_gpus`: the GPUs
    ResourceSlices list (`slices.gpus`); `claimed`: GPU UUID -> the claim not Horus's that holds it
    (`claims.foreign_holders`); `claimed_slots`: (node, GPU index) -> who holds it outside Horus's books
    where the GPU is known by its slot alone (`reserve` binding: the device plugin refused a reservation
    there); `reserved`: node -> slot -> the GPU UUID its reservation reported (`reserve` binding: the
    slot's telemetry is that GPU's, `gpunodes.slot_readings`); `previous`: the nodes of the last
    snapshot, handed out again when these are the very same (the scheduling cycle judges which jobs fit
    anywhere once per tuple of nodes, a walk over every GPU, and a kept index follows them without a
    look)."""
    listed = slices.by_node(slice_gpus)
    inventory = (_inventory(node, listed.get(node.name)) for node in nodes)
    known = (node for node in inventory if node is not None)
    merged = merge(known, gpunodes, now=now, ttl=telemetry_ttl, reserved=reserved)
    if claimed or claimed_slots:
        merged = tuple(_mark_claimed(node, claimed or {}, claimed_slots or {}) for node in merged)
    if len(merged) == len(previous) and all(map(operator.is_, merged, previous)):
        return previous
    return merged


def running_jobs(pods: Iterable[PodView]) -> tuple[RunningJob, ...]:
    """The jobs of the pods that hold GPUs."""
    return tuple(
        RunningJob(request=pod.request, node=pod.node, gpu_indices=pod.gpu_indices)
        for pod in pods
        if pod.holds_gpus and pod.request is not None
    )


def _inventory(node: NodeView, listed: list[SliceGpu] | None) -> Node | None:
    """From the node's ResourceSlices where the driver publishes them, else from its GFD labels."""
    if listed:
        return slices.node_from_slices(node.name, listed, schedulable=node.schedulable)
    return node.labelled


def _mark_claimed(node: Node, claimed: Mapping[str, str], slots: Mapping[tuple[str, int], str]) -> Node:
    holders = [claimed.get(gpu.uuid or "") or slots.get((node.name, gpu.index), "") for gpu in node.gpus]
    if not any(holders):
        return node
    gpus = tuple(
        dataclasses.replace(gpu, claimed_by=holder) if holder else gpu
        for gpu, holder in zip(node.gpus, holders, strict=True)
    )
    return dataclasses.replace(node, gpus=gpus)


def gpu_node(body: Mapping[str, Any]) -> Node | None:
    """The GPUs of a node from its GFD labels; None for a node without (known) GPUs."""
    meta = body["metadata"]
    labels = meta.get("labels") or {}
    product_label = labels.get(keys.LABEL_GPU_PRODUCT)
    count = _int(labels.get(keys.LABEL_GPU_COUNT))
    memory_mib = _int(labels.get(keys.LABEL_GPU_MEMORY))
    if not product_label or not count or not memory_mib:
        return None
    name = meta["name"]
    try:
        gpus = tuple(Gpu.labelled(name, i, product_label, memory_mib) for i in range(count))
    except UnknownGpuError:
        log.warning("node %s: GPU %r unknown to the models; not scheduling on it", name, product_label)
        return None
    return Node(name=name, gpus=gpus, schedulable=is_schedulable(body))


def is_schedulable(body: Mapping[str, Any]) -> bool:
    if (body.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def not_ready_since(body: Mapping[str, Any]) -> datetime | None:
    """Since when the node's Ready condition is not True: its last transition, which the kubelet and the
    node lifecycle controller always set (None without one: for how long it has not been ready is
    unknown), or None for a Ready node."""
    conditions = (body.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") == "True" or not ready.get("lastTransitionTime"):
        return None
    return datetime.fromisoformat(str(ready["lastTransitionTime"]).replace("Z", "+00:00"))


def gpu_uuids(nodes: Mapping[str, Node], assignment: Assignment) -> tuple[str | None, ...]:
    """The UUIDs of an assignment's GPUs where the snapshot's `nodes` (by name) know them; () for a node
    they do not list."""
    node = nodes.get(assignment.node)
    if node is None:
        return ()
    by_index = {gpu.index: gpu.uuid for gpu in node.gpus}
    return tuple(by_index.get(i) for i in assignment.gpu_indices)


def hostname(body: Mapping[str, Any]) -> str:
    meta = body["metadata"]
    return (meta.get("labels") or {}).get(keys.LABEL_HOSTNAME, meta["name"])


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0
