"""`reserve` binding end to end on the real local control plane (issue 47): `horus run --binding
reserve`, the kwok nodes advertising `nvidia.com/gpu` as NVIDIA's device plugin would, and the fake
agents playing the reservation pods' NVML step (kwok runs no container: the agent writes a GPU of its
node's inventory on each reservation that has not reported, as `horus reserve` would).

What is checked is the books: Horus's GPUs are held in the kubelet's count by its reservation pods, so
kube-scheduler gives a plain pod asking `nvidia.com/gpu` only the GPUs Horus does not use, and refuses it
once none is left; co-tenants share one reservation's GPU, which their pods are told by UUID. The
operator runs with `--reservation-device-mode cdi` (the default `env` differs only in the pod it makes,
checked by the unit tests): the API server takes the pods' CDI device annotation, and the fake agents
find each pod's GPU through it (its NVIDIA_VISIBLE_DEVICES is `void`), so the jobs' readings arrive.
It serves the pod webhook too (podroute_harness.py): a Job's pods asking `horus.dev/binding: reserve`
are gated with their containers told `void`, wait for their slots' reservations, and are released with
the CDI device annotation of the GPUs those report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import dra_harness
import podroute_harness
import pytest
from dljob_harness import apply, dljobs, get_json, horus_pods, only_nodes, predicted_pairs, wait_phases

from horus_operator import devcluster
from horus_operator.api import keys
from horus_operator.testing.builders import IMAGE, DLJobBuilder
from horus_operator.testing.operator_process import FAST_SETTINGS, REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

NODE = "gpu-node-1"  # 4 GPUs
RESERVATIONS = keys.RESERVATION_NAMESPACE


@pytest.fixture(scope="module")
def operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The reservations' namespace as manifests/ ship it, the fake agents, `horus run --binding reserve`
    serving the pod webhook."""
    logs = tmp_path_factory.mktemp("reserve")
    for manifest in ("namespace.yaml", "reservation.yaml"):
        cluster.kubectl("apply", "-f", str(REPO / "manifests" / manifest))
    settings = {
        **FAST_SETTINGS,
        "HORUS_BINDING": "reserve",
        "HORUS_RESERVATION_IMAGE": IMAGE,
        "HORUS_RESERVATION_DEVICE_MODE": "cdi",
    }
    try:
        with (
            dra_harness.publishing_slices(cluster, logs),
            podroute_harness.serving_webhook(cluster, logs, "e2e-reserve", settings) as process,
        ):
            yield process
    finally:
        cluster.kubectl("delete", "pods", "--all", "-n", RESERVATIONS, "--wait=false", check=False)


def _reservations(cluster: devcluster.LocalCluster) -> list[dict[str, Any]]:
    return get_json(cluster, RESERVATIONS, "pods")["items"]


def _told(pod: dict[str, Any]) -> str:
    """The GPU the pod is told: the UUID its CDI device annotation names, its variable naming none."""
    env = pod["spec"]["containers"][0]["env"]
    assert next(e["value"] for e in env if e["name"] == "NVIDIA_VISIBLE_DEVICES") == "void"
    kind, _, uuid = pod["metadata"]["annotations"]["cdi.k8s.io/horus_gpus"].partition("=")
    assert kind == "nvidia.com/gpu"
    return uuid


def _observed(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {
        name: (job.get("status") or {}).get("observed") or {}
        for name, job in dljobs(cluster, namespace).items()
    }


def _plain(name: str, gpus: int) -> dict[str, Any]:
    """A pod of another scheduler's (kube-scheduler's), asking the device plugin for GPUs."""
    resources = {"limits": {keys.DEVICE_PLUGIN_RESOURCE: str(gpus)}}
    container = {"name": "c", "image": IMAGE, "resources": resources}
    spec = {"nodeSelector": {keys.LABEL_HOSTNAME: NODE}, "containers": [container]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _phase(cluster: devcluster.LocalCluster, namespace: str, name: str) -> str:
    return str(get_json(cluster, namespace, "pod", name).get("status", {}).get("phase"))


def test_reservations_hold_horuss_gpus_in_the_kubelets_books_and_co_tenants_share_one(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    (first, second), _ = predicted_pairs()
    pair = [
        DLJobBuilder(f"pair-{i}").model(architecture=model).batch_size(batch).spec(maxSlowdown=3.0).obj()
        for i, (model, batch) in enumerate([first, second])
    ]
    alone = [DLJobBuilder(f"alone-{i}").spec(maxSlowdown=1.0).obj() for i in range(3)]  # whole GPUs
    with only_nodes(cluster, [NODE]):  # 4 GPUs: three held whole, the pair shares the fourth
        for job in (*alone, *pair):
            apply(cluster, namespace, job)
            wait_phases(cluster, namespace, [job["metadata"]["name"]], {"Running"}, timeout=90)
        reservations = _reservations(cluster)
        assert len(reservations) == 4, [r["metadata"]["name"] for r in reservations]
        reported = {r["metadata"]["annotations"][keys.ANNOTATION_RESERVED_GPU] for r in reservations}
        assert len(reported) == 4  # the plugin (here the fake agent) gave each reservation its own GPU
        pods = {p["metadata"]["labels"][keys.LABEL_JOB]: p for p in horus_pods(cluster, namespace)}
        assert _told(pods["pair-0"]) == _told(pods["pair-1"])  # co-tenants: one slot, one GPU
        assert {_told(pod) for pod in pods.values()} == reported
        assert {p["metadata"]["annotations"][keys.ANNOTATION_BINDING] for p in pods.values()} == {"reserve"}
        # The agent finds each pod on the GPU its annotation names: every job's readings arrive.
        wait_for(
            lambda: all("utilization" in o for o in _observed(cluster, namespace).values()),
            timeout=60,
            what="every job's observed utilization",
        )

        # The kubelet's books hold Horus's four GPUs, though Horus's own pods ask no nvidia.com/gpu:
        # another scheduler's pod asking one is refused, until a Horus job ends and frees its slot.
        apply(cluster, namespace, _plain("other", 1))
        refused = wait_for(lambda: _unschedulable(cluster, namespace, "other"), timeout=60, what="refused")
        assert "nvidia.com/gpu" in refused
        cluster.kubectl("delete", "dljob", "alone-0", "-n", namespace)
        wait_for(lambda: len(_reservations(cluster)) == 3, timeout=60, what="alone-0's reservation gone")
        wait_for(lambda: _phase(cluster, namespace, "other") == "Running", timeout=60, what="other running")
        phases = {name: job["status"]["phase"] for name, job in dljobs(cluster, namespace).items()}
        assert set(phases.values()) == {"Running"} and len(phases) == 4


def _phases(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, str]:
    return {
        name: (job.get("status") or {}).get("phase", "") for name, job in dljobs(cluster, namespace).items()
    }


def _on(cluster: devcluster.LocalCluster, node: str) -> list[dict[str, Any]]:
    return [r for r in _reservations(cluster) if r["spec"]["nodeSelector"][keys.LABEL_HOSTNAME] == node]


def _unschedulable(cluster: devcluster.LocalCluster, namespace: str, name: str) -> str:
    conditions = get_json(cluster, namespace, "pod", name).get("status", {}).get("conditions") or []
    return next(
        (json.dumps(c) for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), ""
    )


def test_where_another_schedulers_pod_holds_a_gpu_horus_passes_that_slot_over(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    # Horus does not watch other schedulers' pods: it learns from kube-scheduler refusing a reservation
    # for want of a device-plugin GPU, deletes it, and counts that slot taken instead of waiting on it.
    node = "gpu-node-0"
    other = _plain("other", 1)
    other["spec"]["nodeSelector"] = {keys.LABEL_HOSTNAME: node}
    with only_nodes(cluster, [node]):
        apply(cluster, namespace, other)
        wait_for(lambda: _phase(cluster, namespace, "other") == "Running", timeout=60, what="other running")
        jobs = [DLJobBuilder(f"whole-{i}").spec(maxSlowdown=1.0).obj() for i in range(4)]
        apply(cluster, namespace, *jobs)
        wait_for(
            lambda: (
                sorted(_phases(cluster, namespace).values()) == ["Queued", "Running", "Running", "Running"]
            ),
            timeout=90,
            what="three jobs running, the fourth waiting",
        )
        wait_for(lambda: len(_on(cluster, node)) == 3, timeout=60, what="the refused reservation deleted")
        waiting = next(j for j in dljobs(cluster, namespace).values() if j["status"]["phase"] == "Queued")
        assert "GPU" in waiting["status"]["message"]
        assert len(horus_pods(cluster, namespace)) == 3


def test_a_jobs_pods_of_the_pod_route_wait_for_their_reservations_and_get_their_cdi_devices(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: podroute_harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    reserve = {**podroute_harness.MODEL, keys.ANNOTATION_BINDING: "reserve"}
    look = podroute_harness.pod("look", labels={keys.LABEL_MANAGED: "true"}, annotations=reserve)
    admitted = json.loads(podroute_harness.create(cluster, namespace, look, dry=True).stdout)
    assert podroute_harness.gates(admitted) == [podroute_harness.GATE]
    assert admitted["spec"]["containers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]

    job = podroute_harness.job("train", completions=2, duration="300s")
    job["spec"]["template"]["metadata"]["annotations"][keys.ANNOTATION_BINDING] = "reserve"
    with only_nodes(cluster, [NODE]):
        podroute_harness.create(cluster, namespace, job)
        pods = wait_for(
            lambda: _running(cluster, namespace, "-l", "job-name=train"),
            timeout=120,
            what="both pods running",
        )
        reported = {  # by the reservations that have reported: another may be on its way or going
            r["metadata"]["annotations"][keys.ANNOTATION_RESERVED_GPU]: r["metadata"]["name"]
            for r in _on(cluster, NODE)
            if keys.ANNOTATION_RESERVED_GPU in r["metadata"]["annotations"]
        }
        for pod in pods:
            annotations = pod["metadata"]["annotations"]
            assert annotations[keys.ANNOTATION_BINDING] == "reserve"
            assert pod["spec"]["nodeName"] == annotations[keys.ANNOTATION_NODE] == NODE
            assert _told(pod) == annotations[keys.ANNOTATION_GPU_UUIDS] and _told(pod) in reported
            slot = f"gpu-{NODE}-{annotations[keys.ANNOTATION_GPUS]}"
            assert reported[_told(pod)] == slot  # the GPU its own slot's reservation holds
        cluster.kubectl("delete", "job", "train", "-n", namespace, "--cascade=foreground", "--wait=false")
        wait_for(lambda: _on(cluster, NODE) == [], timeout=90, what="the reservations gone with the pods")


def _running(cluster: devcluster.LocalCluster, namespace: str, *selector: str) -> list[dict[str, Any]] | None:
    found = podroute_harness.pods(cluster, namespace, *selector)
    done = found and all(
        podroute_harness.released(p) and p["status"].get("phase") == "Running" for p in found
    )
    return found if done else None
