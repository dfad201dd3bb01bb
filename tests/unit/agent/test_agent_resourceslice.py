"""The ResourceSlice the fake backend publishes stands in for NVIDIA's DRA driver on kwok nodes, so it
uses the driver's names (in its source: cmd/gpu-kubelet-plugin/deviceinfo.go and the Helm chart's
deviceclass-gpu.yaml)."""

from __future__ import annotations

from agent_builders import inventory

from horus_operator.agent import resourceslice


def test_one_slice_per_node_owned_by_the_node_in_a_pool_named_after_it() -> None:
    body = resourceslice.fake_slice(inventory(count=2), "uid-1")

    assert (body["apiVersion"], body["kind"]) == ("resource.k8s.io/v1", "ResourceSlice")
    assert body["metadata"]["name"] == "node-a-gpu.nvidia.com"
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-1"}
    ]
    spec = body["spec"]
    assert (spec["driver"], spec["nodeName"]) == ("gpu.nvidia.com", "node-a")
    assert spec["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}


def test_each_gpu_is_a_device_with_the_drivers_attribute_and_capacity_names() -> None:
    fake = inventory(count=2, memory_mib=16384)
    devices = resourceslice.fake_slice(fake, None)["spec"]["devices"]

    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert devices[1] == {
        "name": "gpu-1",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": fake.uuid(1)},
            "productName": {"string": "Tesla-V100-SXM2-16GB"},
        },
        "capacity": {"memory": {"value": "16384Mi"}},
    }


def test_a_node_without_a_uid_gets_no_owner_reference() -> None:
    assert "ownerReferences" not in resourceslice.fake_slice(inventory(), None)["metadata"]
