"""DRA binding end to end on the real local control plane (issue 18, item 4): `horus run --binding dra`,
the fake agents publishing each kwok node's GPUs as ResourceSlices of driver gpu.nvidia.com (as NVIDIA's
DRA driver does on real nodes), and kube-scheduler's DynamicResources plugin allocating the claims.

kwok nodes have no kubelet, so nothing prepares a claimed device on the node: what is tested is the
allocation (which device kube-scheduler gives each claim), never what a container then sees.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dra_harness
import pytest
from dljob_harness import (
    apply,
    condition,
    dljobs,
    get_json,
    horus_pods,
    only_nodes,
    predicted_pairs,
    wait_phases,
)
from dra_harness import allocated_uuid, device_uuids, stored_claims

from horus_operator import devcluster
from horus_operator.operator.dra import claims
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import FAST_SETTINGS, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dra_node(cluster: devcluster.LocalCluster) -> str:
    return dra_harness.dra_node(cluster)


@pytest.fixture(scope="module")
def operator(
    cluster: devcluster.LocalCluster, dra_node: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The fake agents of every GPU node (ResourceSlices, GPUNodes) and `horus run --binding dra`."""
    logs = tmp_path_factory.mktemp("dra")
    settings = {**FAST_SETTINGS, "HORUS_BINDING": "dra", "HORUS_SHARING": "mps"}
    with dra_harness.operator_beside_agents(cluster, logs, settings) as process:
        yield process


def horus_claims_allocated(
    cluster: devcluster.LocalCluster, namespace: str, count: int
) -> dict[str, Any] | None:
    found = {n: c for n, c in stored_claims(cluster, namespace).items() if n.startswith("horus-")}
    done = len(found) == count and all((c.get("status") or {}).get("allocation") for c in found.values())
    return found if done else None


def _all_allocated(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, dict[str, Any]] | None:
    jobs = dljobs(cluster, namespace)
    return (
        jobs if all(condition(j, "ClaimsAllocated").get("status") == "True" for j in jobs.values()) else None
    )


def user_claim(name: str, uuid: str) -> list[dict[str, Any]]:
    """A plain pod (not Horus's) with its own claim for the GPU of `uuid`."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [{"cel": {"expression": claims.uuid_selector(uuid)}}],
                        },
                    }
                ]
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "containers": [
                {"name": "c", "image": "example.invalid/other:1", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }
    return [claim, pod]


def test_claims_are_allocated_exactly_the_gpu_horus_chose_and_co_tenants_share_one_with_mps(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, dra_node: str, namespace: str
) -> None:
    (first, second), _ = predicted_pairs()
    jobs = [
        DLJobBuilder(f"pair-{i}").model(architecture=model).batch_size(batch).spec(maxSlowdown=3.0).obj()
        for i, (model, batch) in enumerate([first, second])
    ]
    alone = DLJobBuilder("alone").spec(binding="dra", maxSlowdown=1.0).obj()  # a whole GPU, no sharing
    with only_nodes(cluster, [dra_node]):  # two GPUs: "alone" takes one, so the pair must share the other
        for job in (alone, *jobs):
            apply(cluster, namespace, job)
            wait_phases(cluster, namespace, [job["metadata"]["name"]], {"Running"}, timeout=90)
    placed = wait_for(
        lambda: _all_allocated(cluster, namespace), timeout=60, what="every DLJob's ClaimsAllocated condition"
    )

    uuids = device_uuids(cluster)
    stored = wait_for(
        lambda: horus_claims_allocated(cluster, namespace, 2), timeout=60, what="two allocated claims"
    )
    pods = {p["metadata"]["labels"]["horus.dev/dljob"]: p for p in horus_pods(cluster, namespace)}
    for name, job in dljobs(cluster, namespace).items():
        status, pod = job["status"], pods[name]
        (claim_name,) = [r["resourceClaimName"] for r in pod["spec"]["resourceClaims"]]
        assert status["claim"] == claim_name and status["binding"] == "dra"
        chosen = pod["metadata"]["annotations"]["horus.dev/gpu-uuids"]
        assert allocated_uuid(stored[claim_name], uuids) == chosen == status["gpus"][0]["uuid"], name
        assert pod["spec"]["nodeName"] == status["node"] == dra_node
        assert not any(
            e["name"] == "NVIDIA_VISIBLE_DEVICES" for e in pod["spec"]["containers"][0].get("env", [])
        )
    assert placed["pair-1"]["status"]["colocatedWith"] == [f"{namespace}/pair-0"]
    assert pods["pair-0"]["spec"]["resourceClaims"] == pods["pair-1"]["spec"]["resourceClaims"]
    shared = stored[placed["pair-0"]["status"]["claim"]]
    reserved = sorted(r["name"] for r in shared["status"]["reservedFor"])
    assert reserved == ["pair-0-0", "pair-1-0"]
    (config,) = shared["spec"]["devices"]["config"]
    parameters = config["opaque"]["parameters"]
    assert (parameters["apiVersion"], parameters["kind"]) == ("resource.nvidia.com/v1beta1", "GpuConfig")
    assert parameters["sharing"]["strategy"] == "MPS"
    created_for = json.loads(shared["metadata"]["annotations"]["horus.dev/sharing"])
    assert parameters["sharing"] == created_for  # pair-0 came alone: its claim has its config for one
    desired = json.loads(shared["metadata"]["annotations"]["horus.dev/desired-sharing"])
    assert desired["mpsConfig"]["defaultActiveThreadPercentage"] < 100  # what the pair calls for now
    assert "config" not in stored[placed["alone"]["status"]["claim"]]["spec"]["devices"]  # whole GPU

    cluster.kubectl("delete", "dljobs", "--all", "-n", namespace)
    wait_for(lambda: not stored_claims(cluster, namespace), timeout=90, what="the claims to go with the jobs")


def test_a_gpu_held_by_someone_elses_claim_is_never_horus_and_a_horus_gpu_never_theirs(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, dra_node: str, namespace: str
) -> None:
    uuids = device_uuids(cluster)
    theirs, free = uuids[(dra_node, "gpu-0")], uuids[(dra_node, "gpu-1")]
    with only_nodes(cluster, [dra_node]):
        apply(cluster, namespace, *user_claim("theirs", theirs))
        wait_for(
            lambda: allocated_uuid(stored_claims(cluster, namespace)["theirs"], uuids),
            timeout=60,
            what="their claim",
        )
        apply(cluster, namespace, *(DLJobBuilder(f"whole-{i}").spec(maxSlowdown=1.0).obj() for i in range(2)))
        jobs = wait_phases(cluster, namespace, ["whole-0"], {"Running"}, timeout=90)
        waiting = wait_phases(cluster, namespace, ["whole-1"], {"Queued"}, timeout=30)["whole-1"]
        assert jobs["whole-0"]["status"]["gpus"][0]["uuid"] == free
        assert waiting["status"]["message"].startswith("waiting")

        apply(cluster, namespace, *user_claim("grabber", free))  # someone wants Horus's GPU
        wait_for(
            lambda: (
                "cannot allocate"
                in condition(get_json(cluster, namespace, "pod", "grabber"), "PodScheduled").get(
                    "message", ""
                )
            ),
            timeout=60,
            what="their pod to be refused Horus's GPU",
        )
        assert not (stored_claims(cluster, namespace)["grabber"].get("status") or {}).get("allocation")
        assert dljobs(cluster, namespace)["whole-1"]["status"]["phase"] == "Queued"  # still not on theirs


def test_an_operator_killed_mid_burst_loses_and_duplicates_nothing(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    models = [("resnet18", 32), ("lstm-lm", 20), ("mobilenet_v2", 32), ("resnet50", 32)]
    burst = [
        DLJobBuilder(f"burst-{i:02d}").model(architecture=m).batch_size(b).runs_for("8s").obj()
        for i, (m, b) in enumerate(models * 4)
    ]
    apply(cluster, namespace, *burst)
    wait_for(lambda: len(horus_pods(cluster, namespace)) >= 3, timeout=60, what="the first pods")
    operator.kill()
    operator.start()
    names = [job["metadata"]["name"] for job in burst]
    jobs = wait_phases(cluster, namespace, names, {"Succeeded", "Failed"}, timeout=240)

    assert {n: j["status"]["phase"] for n, j in jobs.items()} == dict.fromkeys(names, "Succeeded")
    attempts = Counter(p["metadata"]["labels"]["horus.dev/dljob"] for p in horus_pods(cluster, namespace))
    assert attempts == Counter(names)  # one pod each: nothing re-placed, nothing twice
    assert all(j["status"]["claim"] for j in jobs.values())
    wait_for(lambda: not stored_claims(cluster, namespace), timeout=90, what="every claim to be collected")
