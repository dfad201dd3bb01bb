"""GPU inventory from ResourceSlices (NVIDIA's DRA driver, or the fake agent standing in for it) gives
the same snapshot as GPU Feature Discovery labels."""

from __future__ import annotations

import dataclasses

import pytest
from operator_builders import gpu_node

from horus_operator.agent import gpunode as agent_gpunode
from horus_operator.agent import resourceslice, summary
from horus_operator.agent.fake import FakeBackend, FakeInventory
from horus_operator.operator import cluster_view
from horus_operator.operator.dra import slices
from horus_operator.operator.telemetry import gpunodes
from horus_operator.placement.index import ClusterIndex

NOW = 1_800_000_000.0


def _fake_agent(node_body: dict) -> tuple[dict, gpunodes.NodeTelemetry]:
    """The ResourceSlice and the GPUNode a fake agent publishes for the node (agent code, no API)."""
    name, labels = node_body["metadata"]["name"], node_body["metadata"]["labels"]
    backend = FakeBackend(FakeInventory.from_node_labels(name, labels))
    sample = backend.sample([], NOW)
    status = agent_gpunode.status_body(
        summary.summarize(node=name, backend="fake", samples=[sample], pods=[]), sample_interval=1.0
    )
    return resourceslice.fake_slice(backend.inventory, "uid"), gpunodes.parse(
        {"metadata": {"name": name}, **status}, received_at=NOW
    )


@pytest.mark.parametrize(
    ("product", "memory_mib", "count"),
    [("Tesla-V100-SXM2-16GB", 16384, 4), ("NVIDIA-A100-SXM4-40GB", 40960, 8)],
)
def test_slices_and_gfd_labels_give_the_same_snapshot(product: str, memory_mib: int, count: int) -> None:
    labelled = gpu_node("n1", count=count, product=product, memory_mib=memory_mib)
    resource_slice, report = _fake_agent(labelled)
    driver_only = {**labelled, "metadata": {"name": "n1", "labels": {}}}  # no GFD on the node

    from_labels = cluster_view.build_snapshot([cluster_view.view(labelled)], [], now=NOW, gpunodes=[report])
    from_slices = cluster_view.build_snapshot(
        [cluster_view.view(driver_only)],
        [],
        now=NOW,
        gpunodes=[report],
        slice_gpus=slices.gpus([resource_slice]),
    )

    assert from_slices == from_labels
    assert all(gpu.uuid for gpu in from_slices.nodes[0].gpus)  # the slice alone names them too


def test_slices_alone_give_the_labels_gpus_with_their_uuids() -> None:
    labelled = gpu_node("n1", count=2)
    resource_slice, _ = _fake_agent(labelled)

    (from_labels,) = cluster_view.build_snapshot([cluster_view.view(labelled)], [], now=NOW).nodes
    (from_slices,) = cluster_view.build_snapshot(
        [cluster_view.view(labelled)], [], now=NOW, slice_gpus=slices.gpus([resource_slice])
    ).nodes

    assert [dataclasses.replace(g, uuid=None) for g in from_slices.gpus] == list(from_labels.gpus)
    assert [g.uuid for g in from_slices.gpus] == [FakeInventory("n1", 2, "", 0).uuid(i) for i in range(2)]


def _device(
    name: str,
    uuid: str,
    product: str = "NVIDIA A100-SXM4-40GB",
    memory: str = "42949672960",
    kind: str = "gpu",
) -> dict:
    attributes = {
        "type": {"string": kind},
        "uuid": {"string": uuid},
        "productName": {"string": product},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Ampere"},
        "cudaComputeCapability": {"version": "8.0.0"},
    }
    return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def test_a_driver_slice_indexes_whole_gpus_by_minor_and_leaves_out_mig_devices_and_other_drivers() -> None:
    driver_slice = {
        "metadata": {"name": "n1-gpu.nvidia.com-x7k2"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
            "devices": [
                _device("gpu-10", "GPU-c"),
                _device("gpu-2", "GPU-b"),
                _device("gpu-0-mig-9-4-1", "MIG-x", memory="5Gi", kind="mig"),
                _device("gpu-0", "GPU-a"),
            ],
        },
    }
    other_driver = {
        "metadata": {"name": "nic"},
        "spec": {"driver": "net.example.com", "nodeName": "n1", "devices": []},
    }

    found = slices.by_node(slices.gpus([driver_slice, other_driver]))
    node = slices.node_from_slices("n1", found["n1"], schedulable=True)

    assert node is not None
    assert [(g.index, g.uuid) for g in node.gpus] == [(0, "GPU-a"), (1, "GPU-b"), (2, "GPU-c")]
    assert {(g.product, g.product_label, g.memory_mib) for g in node.gpus} == {
        ("a100-40gb", "NVIDIA-A100-SXM4-40GB", 40960)  # NVML's name with dashes, as GFD labels it
    }


def test_gpus_unknown_to_the_models_leave_the_node_out() -> None:
    unknown = {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "devices": [_device("gpu-0", "GPU-a", product="Voodoo 5500")],
        }
    }

    assert slices.node_from_slices("n1", slices.gpus([unknown]), schedulable=True) is None


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("16Gi", 16384),
        ("16384Mi", 16384),
        ("17179869184", 16384),
        ("16G", 15258),
        ("40Gi", 40960),
        ("x", None),
        ("", None),
    ],
)
def test_memory_quantities_in_mib(text: str, mib: int | None) -> None:
    assert slices.quantity_mib(text) == mib


def test_a_gpu_someone_elses_claim_holds_is_marked_and_never_usable() -> None:
    labelled = gpu_node("n1", count=2)
    resource_slice, _ = _fake_agent(labelled)
    held_uuid = slices.gpus([resource_slice])[1].uuid

    snapshot = cluster_view.build_snapshot(
        [cluster_view.view(labelled)],
        [],
        now=NOW,
        slice_gpus=slices.gpus([resource_slice]),
        claimed={held_uuid: "team-b/mine"},
    )

    assert [g.claimed_by for g in snapshot.nodes[0].gpus] == ["", "team-b/mine"]
    index = ClusterIndex.build(snapshot)
    assert [slot.usable for slot in index.node_slots["n1"]] == [True, False]
    assert index.empty_count() == 1
