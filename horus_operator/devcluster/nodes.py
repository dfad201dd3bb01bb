"""Fake GPU nodes: Node objects that look like GPU nodes labelled by NVIDIA GPU Feature Discovery.

kwok manages the nodes carrying `kwok.x-k8s.io/node: fake` (it marks them Ready, keeps their lease
fresh and "runs" the pods bound to them); nothing executes. The stock node-initialize stage keeps the
labels and the capacity given here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from horus_operator.api import keys

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_LABEL = "horus.dev/fake-node"  # lets `add_nodes` and tests find the nodes made here
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuNodePool:
    """`count` identical fake nodes named `<name_prefix>-<index>`."""

    count: int = 4
    gpus_per_node: int = 4
    gpu_product: str = "Tesla-V100-SXM2-16GB"
    gpu_memory_mib: int = 16384
    cpu: str = "32"
    memory: str = "256Gi"
    max_pods: int = 110
    name_prefix: str = "gpu-node"

    def __post_init__(self) -> None:
        if self.count < 0 or self.gpus_per_node < 0 or self.gpu_memory_mib <= 0:
            raise ValueError(f"invalid node pool {self}")


def gfd_labels(pool: GpuNodePool) -> dict[str, str]:
    """The labels GPU Feature Discovery puts on a node with this pool's GPUs."""
    return {
        keys.LABEL_GPU_PRESENT: "true",
        keys.LABEL_GPU_PRODUCT: pool.gpu_product,
        keys.LABEL_GPU_COUNT: str(pool.gpus_per_node),
        keys.LABEL_GPU_MEMORY: str(pool.gpu_memory_mib),
    }


def node_manifest(pool: GpuNodePool, name: str) -> dict[str, Any]:
    resources = {
        "cpu": pool.cpu,
        "memory": pool.memory,
        "pods": str(pool.max_pods),
        GPU_RESOURCE: str(pool.gpus_per_node),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                FAKE_NODE_LABEL: "true",
                **gfd_labels(pool),
            },
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def not_ready_status(at: datetime) -> dict[str, Any]:
    """A strategic-merge status patch: the node's kubelet reports it NotReady since `at` (conditions
    merge by type, so the others stay)."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "container runtime is down (horus devcluster fault injection)",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
    return {"status": {"conditions": [ready]}}


def pool_manifests(pool: GpuNodePool, first_index: int = 0) -> list[dict[str, Any]]:
    """Node objects for the pool, numbered from `first_index` (so later pools extend earlier ones)."""
    indices = range(first_index, first_index + pool.count)
    return [node_manifest(pool, f"{pool.name_prefix}-{index}") for index in indices]


def next_index(existing_names: list[str], name_prefix: str) -> int:
    """The first index after every existing `<name_prefix>-<n>` node."""
    taken = [
        int(suffix)
        for name in existing_names
        if name.startswith(f"{name_prefix}-") and (suffix := name[len(name_prefix) + 1 :]).isdigit()
    ]
    return max(taken, default=-1) + 1
