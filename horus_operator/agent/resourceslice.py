"""The ResourceSlice (resource.k8s.io/v1) the fake backend publishes for its node, shaped as NVIDIA's DRA
driver for GPUs publishes whole GPUs: driver `gpu.nvidia.com`, one pool named after the node, devices
`gpu-<minor>` with the attributes `type` ("gpu"), `uuid` and `productName` and the capacity `memory`.
On a real cluster the driver's kubelet plugin publishes these; the fake stands in for it on kwok nodes, so
kube-scheduler can allocate ResourceClaims there. Pure.

The driver also publishes `brand`, `architecture`, `cudaComputeCapability`, `driverVersion` and
`cudaDriverVersion`; the fake leaves out what it cannot know rather than invent versions.
"""

from __future__ import annotations

from typing import Any

from horus_operator.agent.fake import FakeInventory
from horus_operator.api import keys


def slice_name(node: str) -> str:
    return f"{node}-{keys.GPU_DRIVER}"


def fake_slice(inventory: FakeInventory, node_uid: str | None) -> dict[str, Any]:
    """The node's GPUs as one ResourceSlice, owned by the Node (deleted with it, as the kubelet's are)."""
    metadata: dict[str, Any] = {
        "name": slice_name(inventory.node),
        "labels": {keys.LABEL_NODE: inventory.node},
    }
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": inventory.node, "uid": node_uid}
        ]
    return {
        "apiVersion": keys.DRA_API_VERSION,
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": keys.GPU_DRIVER,
            "nodeName": inventory.node,
            "pool": {"name": inventory.node, "generation": 1, "resourceSliceCount": 1},
            "devices": [_device(inventory, index) for index in range(inventory.count)],
        },
    }


def _device(inventory: FakeInventory, index: int) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",  # the driver names a GPU by its minor number; the fake's minor is its index
        "attributes": {
            "type": {"string": keys.GPU_DEVICE_TYPE},
            "uuid": {"string": inventory.uuid(index)},
            # NVML's name; GPU Feature Discovery's label is the same with spaces as dashes
            "productName": {"string": inventory.product},
        },
        "capacity": {"memory": {"value": f"{inventory.memory_mib}Mi"}},
    }
