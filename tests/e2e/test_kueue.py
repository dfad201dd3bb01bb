"""Kueue and Horus on the real local control plane: Kueue's manager (kueue_harness.py, built from its Go
module) decides when a Job may start, by its ClusterQueue's quota; Horus's pod webhook and scheduling
cycle (podroute_harness.py) decide where each of the admitted Job's pods runs; kube-scheduler binds.

What it shows: a Job naming a LocalQueue, created suspended (as Kueue's own Job webhook leaves it), is
admitted by Kueue (its Workload admitted, the Job unsuspended); its pods are gated by Horus at creation,
placed on the GPUs Horus chose and bound there, with no scheduling gate of Kueue's; a second Job over
the quota stays suspended, with no pod, until the first has finished, and is then admitted and placed
the same way (the Jobs are examples/pod-route/kueue-job.yaml's, which passes a server-side dry run).
A ResourceFlavor that picks nodes (nodeLabels) would choose the node for Horus: Kueue injects them into
the pod template as a node selector at admission, and Horus's webhook refuses the pods naming
spec.nodeSelector (docs/operator.md, "With Kueue").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import podroute_harness as harness
import pytest
import yaml
from kueue_harness import API, QUEUE_LABEL, KueueManager, install_crds

from horus_operator import devcluster
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "pod-route" / "kueue-job.yaml"
CPU_PER_POD = 1


@pytest.fixture(scope="module")
def kueue(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KueueManager]:
    install_crds(cluster)
    manager = KueueManager(cluster, tmp_path_factory.mktemp("kueue"))
    manager.start()
    try:
        yield manager
    finally:
        manager.stop()


@pytest.fixture(scope="module")
def webhook_operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with harness.serving_webhook(cluster, tmp_path_factory.mktemp("pod-route"), "e2e-kueue") as operator:
        yield operator


@contextlib.contextmanager
def local_queue(
    cluster: devcluster.LocalCluster, namespace: str, *, cpu: int, node_labels: dict[str, str] | None = None
) -> Iterator[str]:
    """A ResourceFlavor, a ClusterQueue with `cpu` of it and a LocalQueue in `namespace` pointing at it,
    all named after the namespace; removed (the Jobs first, while Kueue runs to drop its finalizers)."""
    flavor: dict[str, Any] = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": namespace}}
    if node_labels:
        flavor["spec"] = {"nodeLabels": node_labels}
    quota = {"name": "cpu", "nominalQuota": str(cpu)}
    cluster_queue = {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": namespace},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": namespace, "resources": [quota]}]}
            ],
        },
    }
    queue = {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": "gpus", "namespace": namespace},
        "spec": {"clusterQueue": namespace},
    }
    objects = {"apiVersion": "v1", "kind": "List", "items": [flavor, cluster_queue, queue]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(objects))
    try:
        yield "gpus"
    finally:
        cluster.kubectl("delete", "jobs", "--all", "-n", namespace, "--cascade=foreground", "--timeout=60s")
        cluster.kubectl("delete", "-f", "-", "--timeout=60s", input=json.dumps(objects))


def example(kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in yaml.safe_load_all(EXAMPLE.read_text()) if doc["kind"] == kind]
    return found


def kueue_job(name: str, queue: str, *, completions: int, duration: str) -> dict[str, Any]:
    """The example's Job (suspended, naming its queue, its pods asking for Horus), in `queue`, each pod
    asking for CPU_PER_POD cpu only (the resource the test's ClusterQueue covers) and ended by kwok
    `duration` after it runs."""
    job = example("Job")
    job["metadata"] = {"name": name, "labels": {QUEUE_LABEL: queue}}
    job["spec"].update(completions=completions, parallelism=completions)
    template = job["spec"]["template"]
    template["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"] = duration
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": str(CPU_PER_POD)}}
    return job


def get(cluster: devcluster.LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)


def workload(cluster: devcluster.LocalCluster, namespace: str, job: str) -> dict[str, Any] | None:
    """The Workload Kueue made for Job `job`, None before it has made one."""
    listed = json.loads(cluster.kubectl("get", "workloads", "-n", namespace, "-o", "json").stdout)["items"]
    owned = [w for w in listed if any(o["name"] == job for o in w["metadata"].get("ownerReferences") or [])]
    return owned[0] if owned else None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    found = [c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def over_quota(cluster: devcluster.LocalCluster, namespace: str, job: str) -> dict[str, Any] | None:
    """The QuotaReserved condition of Job `job`'s Workload while Kueue holds it for lack of quota."""
    reserved = condition(workload(cluster, namespace, job), "QuotaReserved")
    return reserved if reserved.get("status") == "False" else None


def bound_pods(
    cluster: devcluster.LocalCluster, namespace: str, job: str, count: int
) -> list[dict[str, Any]]:
    def bound() -> list[dict[str, Any]] | None:
        found = harness.pods(cluster, namespace, "-l", f"job-name={job}")
        ok = len(found) == count and all(harness.released(p) and p["spec"].get("nodeName") for p in found)
        return found if ok else None

    return wait_for(bound, timeout=60, what=f"Job {job}'s {count} pods released by Horus and bound")


def assert_placed_by_horus(pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        node = pod["metadata"]["annotations"]["horus.dev/node"]
        assert pod["spec"]["nodeName"] == node, "kube-scheduler bound it where Horus chose"
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": node}  # the flavor adds none
        assert harness.gates(pod) == [], "no gate left, Horus's nor Kueue's"
        annotations = pod["metadata"]["annotations"]
        assert annotations["horus.dev/visible-devices"] == annotations["horus.dev/gpus"]  # the GPUs it chose
        (env,) = pod["spec"]["containers"][0]["env"]  # from Horus's webhook, at the pod's creation
        assert (
            env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['horus.dev/visible-devices']"
        )


def test_kueue_admits_by_its_quota_and_horus_places_the_admitted_jobs_pods(
    cluster: devcluster.LocalCluster, kueue: KueueManager, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    with local_queue(cluster, namespace, cpu=3 * CPU_PER_POD) as queue:
        harness.create(cluster, namespace, kueue_job("first", queue, completions=3, duration="20s"))
        first = bound_pods(cluster, namespace, "first", 3)
        assert_placed_by_horus(first)
        admitted = workload(cluster, namespace, "first")
        assert condition(admitted, "Admitted").get("status") == "True", admitted
        assert admitted is not None and admitted["status"]["admission"]["clusterQueue"] == namespace

        # Over the quota while the first runs: Kueue keeps it suspended, so no pod reaches Horus.
        harness.create(cluster, namespace, kueue_job("second", queue, completions=2, duration="5s"))
        held = wait_for(
            lambda: over_quota(cluster, namespace, "second"),
            timeout=30,
            what="Kueue to find the second Job over its quota",
        )
        assert "cpu" in held["message"], held  # Kueue names the resource short of quota
        assert condition(workload(cluster, namespace, "second"), "Admitted").get("status") != "True"
        assert get(cluster, namespace, "job", "second")["spec"]["suspend"] is True
        assert harness.pods(cluster, namespace, "-l", "job-name=second") == []
        # read after the hold was seen, so the first had not finished when Kueue held the second
        assert condition(workload(cluster, namespace, "first"), "Finished").get("status") != "True"

        # The first ends (kwok completes its pods): Kueue frees its quota and admits the second.
        second = bound_pods(cluster, namespace, "second", 2)
        assert_placed_by_horus(second)
        assert condition(workload(cluster, namespace, "first"), "Finished").get("status") == "True"
        assert get(cluster, namespace, "job", "second")["spec"]["suspend"] is False


def test_a_flavor_that_picks_nodes_is_refused_by_horus_naming_the_node_selector(
    cluster: devcluster.LocalCluster, kueue: KueueManager, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    v100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB"}
    with local_queue(cluster, namespace, cpu=CPU_PER_POD, node_labels=v100) as queue:
        harness.create(cluster, namespace, kueue_job("pinned", queue, completions=1, duration="5s"))

        def refusal() -> str:
            listed = cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
            return next(
                (
                    e["message"]
                    for e in json.loads(listed)["items"]
                    if e["reason"] == "FailedCreate" and e["involvedObject"]["name"] == "pinned"
                ),
                "",
            )

        message = wait_for(refusal, timeout=60, what="the Job controller told the pod was refused")
        assert "spec.nodeSelector" in message and "Horus picks the node" in message, message
        job = get(cluster, namespace, "job", "pinned")
        assert job["spec"]["template"]["spec"]["nodeSelector"] == v100, "Kueue injected the flavor's labels"
        assert harness.pods(cluster, namespace, "-l", "job-name=pinned") == []


def test_the_example_passes_a_server_side_dry_run(
    cluster: devcluster.LocalCluster, kueue: KueueManager, namespace: str
) -> None:
    result = cluster.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE), "--dry-run=server")
    for expected in (
        "resourceflavor.kueue.x-k8s.io/horus-gpus",
        "clusterqueue.kueue.x-k8s.io/training",
        "localqueue.kueue.x-k8s.io/training",
        "job.batch/resnet50-kueue",
    ):
        assert expected in result.stdout, result.stdout
