"""DRA binding for the pod route end to end on the real local control plane (issue 29, item 2): the
pod webhook served by `horus run --webhook-port` (default binding env), the fake agents publishing
ResourceSlices (dra_harness.py), and kube-scheduler's DynamicResources plugin allocating the claims.

What it shows: a Job's pod annotated `horus.dev/binding: dra` is gated at creation referencing a
ResourceClaim of its own (named at admission: the pod's spec.resourceClaims cannot change later) and
no GPU variable; Horus creates the claim for the GPU it chose, owned by the pod, releases the pod, and
kube-scheduler binds it there and allocates the claim exactly that GPU; a claim left for another GPU
by an earlier decision (a restart between creating a claim and releasing its pod) is made again for
the GPU chosen now, never doubled; the claims go with their pods; an operator SIGKILLed once a 10-pod
burst's first claim exists leaves, after its restart, exactly one claim per pod, each allocated the
GPU its pod's record names, no pod released twice. kwok nodes have no kubelet: what a
container then sees is not tested (as in test_dra.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import dra_harness
import podroute_harness as harness
import pytest
from dljob_harness import only_nodes
from dra_harness import allocated_uuid, device_uuids, stored_claims
from podroute_harness import GATE, MODEL

from horus_operator import devcluster
from horus_operator.operator.dra import claims
from horus_operator.testing.operator_process import OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

DRA = {**MODEL, "horus.dev/binding": "dra"}
LABELS = {"horus.dev/managed": "true"}


@pytest.fixture(scope="module")
def dra_node(cluster: devcluster.LocalCluster) -> str:
    return dra_harness.dra_node(cluster)


@pytest.fixture(scope="module")
def webhook_operator(
    cluster: devcluster.LocalCluster, dra_node: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    logs = tmp_path_factory.mktemp("pod-route-dra")
    with (
        dra_harness.publishing_slices(cluster, logs),
        harness.serving_webhook(cluster, logs, "e2e-pod-route-dra", {"HORUS_BINDING": "env"}) as operator,
    ):
        yield operator


def _dra_job(name: str, *, completions: int, duration: str) -> dict[str, Any]:
    job = harness.job(name, completions=completions, duration=duration)
    job["spec"]["template"]["metadata"]["annotations"].update(DRA)
    return job


def _bound(cluster: devcluster.LocalCluster, namespace: str, *selector: str) -> list[dict[str, Any]] | None:
    found = harness.pods(cluster, namespace, *selector)
    return found if found and all(harness.released(p) and p["spec"].get("nodeName") for p in found) else None


def _allocated(cluster: devcluster.LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    claim = stored_claims(cluster, namespace).get(name) or {}
    return claim if (claim.get("status") or {}).get("allocation") else None


def _claim_of(pod: dict[str, Any]) -> str:
    (reference,) = pod["spec"]["resourceClaims"]
    return str(reference["resourceClaimName"])


def test_a_dra_bound_pod_gets_its_own_claim_for_the_gpu_horus_chose_and_is_bound_there(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, dra_node: str, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    look = harness.pod("look", labels=LABELS, annotations=DRA)
    admitted = json.loads(harness.create(cluster, namespace, look, dry=True).stdout)
    assert harness.gates(admitted) == [GATE]
    assert admitted["spec"]["resourceClaims"] == [{"name": "gpu-0", "resourceClaimName": "look-gpu-0"}]
    (train,) = admitted["spec"]["containers"]
    assert train["resources"]["claims"] == [{"name": "gpu-0"}]
    assert not any(e["name"] == "NVIDIA_VISIBLE_DEVICES" for e in train.get("env") or [])

    uuids = device_uuids(cluster)
    with only_nodes(cluster, [dra_node]):
        harness.create(cluster, namespace, _dra_job("train", completions=2, duration="300s"))
        pods = wait_for(
            lambda: _bound(cluster, namespace, "-l", "job-name=train"), timeout=120, what="both pods bound"
        )
        assert len(pods) == 2
        chosen = set()
        for pod in pods:
            annotations, name = pod["metadata"]["annotations"], _claim_of(pod)
            assert name.startswith("train-") and name.endswith("-gpu-0")  # generateName + the token
            assert pod["spec"]["nodeName"] == annotations["horus.dev/node"] == dra_node
            assert annotations["horus.dev/binding"] == "dra" and annotations["horus.dev/claims"] == name
            claim = wait_for(
                lambda name=name: _allocated(cluster, namespace, name),
                timeout=60,
                what=f"claim {name} allocated",
            )
            assert allocated_uuid(claim, uuids) == annotations["horus.dev/gpu-uuids"]  # exactly Horus's GPU
            assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
            assert [r["name"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["name"]]
            chosen.add(annotations["horus.dev/gpu-uuids"])
        assert len(chosen) == 2  # each pod a GPU of its own: two claims cannot hold one device

        # Both GPUs are taken: a third pod waits, gated. Its claim as an earlier decision left it, for a
        # GPU it will not get (of another node), is made again for the GPU chosen once one frees.
        late = harness.pod("late", labels=LABELS, annotations=DRA)
        late_uid = json.loads(harness.create(cluster, namespace, late).stdout)["metadata"]["uid"]
        other = next(uuid for (pool, _), uuid in uuids.items() if pool != dra_node)
        left = claims.pod_claim_body(namespace, "late-gpu-0", other, "late", late_uid)
        left_uid = json.loads(harness.create(cluster, namespace, left).stdout)["metadata"]["uid"]
        cluster.kubectl("delete", "job", "train", "-n", namespace, "--cascade=foreground", "--wait=false")
        (placed,) = wait_for(
            lambda: _bound(cluster, namespace, "--field-selector", "metadata.name=late"),
            timeout=120,
            what="late bound",
        )
        claim = wait_for(
            lambda: _allocated(cluster, namespace, "late-gpu-0"),
            timeout=60,
            what="late's claim allocated",
        )
        assert claim["metadata"]["uid"] != left_uid  # made again, not kept for the wrong GPU
        gpu = placed["metadata"]["annotations"]["horus.dev/gpu-uuids"]
        assert gpu in chosen and allocated_uuid(claim, uuids) == gpu
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
            {"cel": {"expression": claims.uuid_selector(gpu)}}
        ]

    cluster.kubectl("delete", "pod", "late", "-n", namespace, "--wait=false")
    wait_for(
        lambda: not stored_claims(cluster, namespace), timeout=120, what="the claims to go with the pods"
    )


def test_an_operator_killed_while_claims_are_made_leaves_each_pod_one_claim_for_its_gpu(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    harness.create(cluster, namespace, _dra_job("burst", completions=10, duration="300s"))
    wait_for(lambda: stored_claims(cluster, namespace), timeout=90, what="the first claim", every=0.1)
    webhook_operator.kill()  # SIGKILL, with the rest of the burst being decided, claimed or released
    first_seen = {
        p["metadata"]["name"]: p["metadata"]["annotations"]["horus.dev/gpu-uuids"]
        for p in harness.pods(cluster, namespace, "-l", "job-name=burst")
        if harness.released(p)
    }
    webhook_operator.start()

    pods = wait_for(
        lambda: (found := _bound(cluster, namespace, "-l", "job-name=burst")) and len(found) == 10 and found,
        timeout=180,
        what="every pod of the burst released and bound",
    )
    uuids = device_uuids(cluster)
    wanted = {_claim_of(pod): pod for pod in pods}
    stored = wait_for(
        lambda: (
            all(_allocated(cluster, namespace, name) for name in wanted) and stored_claims(cluster, namespace)
        ),
        timeout=60,
        what="every claim allocated",
    )
    assert set(stored) == set(wanted)  # one claim per pod: none doubled, none left over
    for name, pod in wanted.items():
        gpu = pod["metadata"]["annotations"]["horus.dev/gpu-uuids"]
        assert allocated_uuid(stored[name], uuids) == gpu, name
        assert first_seen.get(pod["metadata"]["name"], gpu) == gpu, "released twice"
    assert len({allocated_uuid(claim, uuids) for claim in stored.values()}) == 10  # a GPU each
