"""Fake GPU nodes look like nodes labelled by NVIDIA GPU Feature Discovery."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from horus_operator.devcluster import nodes


def test_node_has_gfd_labels_kwok_annotation_and_gpu_capacity() -> None:
    pool = nodes.GpuNodePool(gpus_per_node=8, gpu_product="NVIDIA-A100-SXM4-40GB", gpu_memory_mib=40960)

    node = nodes.node_manifest(pool, "a100-0")

    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == "40960"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["kubernetes.io/hostname"] == "a100-0"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    for resources in (node["status"]["capacity"], node["status"]["allocatable"]):
        assert resources["nvidia.com/gpu"] == "8"
        assert resources["pods"] == "110"
        assert {"cpu", "memory"} <= set(resources)
    assert "taints" not in node.get("spec", {})  # kwok's documented NoSchedule taint would need tolerations


def test_pool_numbers_nodes_after_existing_ones_of_its_prefix() -> None:
    existing = ["gpu-node-0", "gpu-node-1", "gpu-node-7", "other-9", "gpu-node-x"]

    first = nodes.next_index(existing, "gpu-node")
    names = [node["metadata"]["name"] for node in nodes.pool_manifests(nodes.GpuNodePool(count=2), first)]

    assert names == ["gpu-node-8", "gpu-node-9"]
    assert nodes.next_index(existing, "bench") == 0


def test_invalid_pool_is_refused() -> None:
    with pytest.raises(ValueError):
        nodes.GpuNodePool(count=-1)


def test_a_failed_node_reports_not_ready_since_the_moment_given() -> None:
    at = datetime(2026, 12, 3, 12, 0, 5, tzinfo=UTC)

    (ready,) = nodes.not_ready_status(at)["status"]["conditions"]

    assert (ready["type"], ready["status"], ready["lastTransitionTime"]) == (
        "Ready",
        "False",
        "2026-12-03T12:00:05Z",
    )
