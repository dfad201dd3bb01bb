"""GPU inventory from ResourceSlices, where NVIDIA's DRA driver publishes the node's GPUs. Pure.

A node with devices of driver `gpu.nvidia.com` and type `gpu` gets its GPUs from them (UUID, product,
memory), whatever its GPU Feature Discovery labels say; other nodes keep the labels' (`cluster_view`).
Both give the same `Node`: the product label is NVML's product name with spaces as dashes (what GFD
writes), the memory is the device's `memory` capacity in MiB (NVML's total, GFD's label), and the GPUs
are indexed in order of the driver's device names `gpu-<minor>` (the minor numbers NVML enumerates by).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.jobs import template
from horus_operator.placement.types import Gpu, Node
from horus_operator.prediction.api import UnknownGpuError

log = logging.getLogger(__name__)

_MINOR = re.compile(r"^gpu-([0-9]+)$")


@dataclass(frozen=True)
class SliceGpu:
    """One whole GPU a ResourceSlice lists."""

    node: str
    pool: str
    device: str  # the device name, e.g. "gpu-0"
    uuid: str
    product_label: str
    memory_mib: int

    @property
    def order(self) -> tuple[int, str]:
        minor = _MINOR.match(self.device)
        return (int(minor.group(1)) if minor else 1 << 30, self.device)


def quantity_mib(text: str) -> int | None:
    """A Kubernetes quantity of bytes ("16Gi", "17179869184", "16G") in whole MiB; None if unreadable."""
    try:
        return int(template.quantity(text)) // 2**20
    except (ValueError, OverflowError):
        return None


def gpus(slices: Iterable[Mapping[str, Any]]) -> list[SliceGpu]:
    """The whole GPUs of driver `gpu.nvidia.com` in `slices` (MIG devices and other drivers left out)."""
    found: list[SliceGpu] = []
    for body in slices:
        spec = body.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != keys.GPU_DRIVER or not node:
            continue
        pool = (spec.get("pool") or {}).get("name", node)
        found.extend(g for g in (_gpu(node, pool, d) for d in spec.get("devices") or []) if g is not None)
    return found


def _gpu(node: str, pool: str, device: Mapping[str, Any]) -> SliceGpu | None:
    attributes = device.get("attributes") or {}
    if _string(attributes, "type") != keys.GPU_DEVICE_TYPE:
        return None
    memory = quantity_mib(((device.get("capacity") or {}).get("memory") or {}).get("value", ""))
    uuid, product = _string(attributes, "uuid"), _string(attributes, "productName")
    if not uuid or not product or not memory:
        return None
    return SliceGpu(
        node=node,
        pool=pool,
        device=device["name"],
        uuid=uuid,
        product_label=product.replace(" ", "-"),
        memory_mib=memory,
    )


def _string(attributes: Mapping[str, Any], name: str) -> str:
    """An attribute's string value; attributes may also be written with the driver's domain prefix."""
    value = attributes.get(name) or attributes.get(f"{keys.GPU_DRIVER}/{name}") or {}
    return str(value.get("string") or "")


def by_node(found: Iterable[SliceGpu]) -> dict[str, list[SliceGpu]]:
    """GPUs per node, in the order of their minor numbers (their index on the node)."""
    nodes: dict[str, list[SliceGpu]] = {}
    for gpu in found:
        nodes.setdefault(gpu.node, []).append(gpu)
    return {node: sorted(listed, key=lambda g: g.order) for node, listed in nodes.items()}


def node_from_slices(name: str, listed: list[SliceGpu], *, schedulable: bool) -> Node | None:
    """The node as placement sees it, from its GPUs in ResourceSlices; None for GPUs unknown to the models."""
    try:
        gpus_ = tuple(
            Gpu.labelled(name, index, gpu.product_label, gpu.memory_mib) for index, gpu in enumerate(listed)
        )
    except UnknownGpuError:
        log.warning(
            "node %s: GPU %r unknown to the models; not scheduling on it", name, listed[0].product_label
        )
        return None
    return Node(
        name=name,
        gpus=tuple(dataclasses.replace(g, uuid=s.uuid) for g, s in zip(gpus_, listed, strict=True)),
        schedulable=schedulable,
    )
