"""The pod route end to end on the real local control plane: `horus run --webhook-port` as a subprocess
serving the pod webhook as registered by podroute_harness.py (manifests-pod-route/webhook.yaml as
shipped, calling the local process), and batch/v1 Jobs run by the control plane's own Job controller,
their pods run by kwok.

What it shows: a labelled Job's pods are gated at creation (with NVIDIA_VISIBLE_DEVICES read from the
pod's annotation), placed by the scheduling cycle, released by one patch (annotation, node selector,
gate gone) and bound by kube-scheduler to the node Horus chose; a bad annotation is refused at
admission naming the annotation, and no pod is created; pods the selectors do not pick are never sent
to the webhook (they are created while no operator runs, under failurePolicy Fail, and keep no gate);
in a namespace labelled horus.dev/managed, a pod naming its model is gated and placed and any other is
left alone; an operator killed during a burst leaves no pod released twice, none moved, none lost
(the kill is not timed inside a release: tests/unit/operator/test_podroute_loop.py does that); the
overlay manifests-pod-route/ passes a server-side dry run, and its RBAC is all the operator needs; an
indexed Job's 4 pods grouped as a gang are placed all or none: with room for 3, none is released; once
room frees, all 4 are.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kueue_harness
import podroute_harness as harness
import pytest
import yaml
from dljob_harness import only_nodes, operator_as_its_service_account
from podroute_harness import GATE, MODEL

from horus_operator import devcluster
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def webhook_operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    with harness.serving_webhook(cluster, tmp_path_factory.mktemp("pod-route"), "e2e-pod-route") as operator:
        yield operator


def _placed_events(cluster: devcluster.LocalCluster, namespace: str) -> Counter[str]:
    events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return Counter(
        e["involvedObject"]["name"]
        for e in events
        if e["reason"] == "Placed" and e["involvedObject"]["kind"] == "Pod"
    )


def test_a_labelled_jobs_pods_are_gated_placed_on_the_chosen_gpu_released_and_bound(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    # What admission makes of a labelled pod (a server-side dry run shows the mutated pod).
    admitted = json.loads(
        harness.create(
            cluster,
            namespace,
            harness.pod("look", labels={"horus.dev/managed": "true"}, annotations=MODEL),
            dry=True,
        ).stdout
    )
    assert harness.gates(admitted) == [GATE]
    (env,) = [e for e in admitted["spec"]["containers"][0]["env"] if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['horus.dev/visible-devices']"

    harness.create(cluster, namespace, harness.job("train", completions=3))

    def bound() -> list[dict[str, Any]] | None:
        found = harness.pods(cluster, namespace, "-l", "job-name=train")
        ok = len(found) == 3 and all(harness.released(p) and p["spec"].get("nodeName") for p in found)
        return found if ok else None

    pods = wait_for(bound, timeout=90, what="the Job's 3 pods released and bound")
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        node = annotations["horus.dev/node"]
        assert pod["spec"]["nodeName"] == node, "kube-scheduler bound it where Horus chose"
        assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == node
        assert annotations["horus.dev/visible-devices"] == annotations["horus.dev/gpus"]  # no UUIDs: indices
        assert (
            json.loads(annotations["horus.dev/request"])["key"]
            == f"pod:{namespace}/{pod['metadata']['name']}"
        )
        (placed,) = [c for c in pod["status"]["conditions"] if c["type"] == "horus.dev/Placed"] or [None]
        assert placed is None or placed["status"] == "True"
    wait_for(
        lambda: all(
            p["status"].get("phase") in ("Running", "Succeeded")
            for p in harness.pods(cluster, namespace, "-l", "job-name=train")
        ),
        timeout=60,
        what="kwok to run the pods",
    )
    assert all(count == 1 for count in _placed_events(cluster, namespace).values())


def test_a_bad_annotation_is_refused_at_admission_naming_it_and_nothing_is_created(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    bad = harness.pod(
        "bad", labels={"horus.dev/managed": "true"}, annotations={**MODEL, "horus.dev/batch-size": "0"}
    )
    refused = harness.create(cluster, namespace, bad, check=False)
    assert refused.returncode != 0
    assert "metadata.annotations['horus.dev/batch-size']='0'" in refused.stderr, refused.stderr
    unknown = harness.pod(
        "unknown", labels={"horus.dev/managed": "true"}, annotations={**MODEL, "horus.dev/model": "nosuchnet"}
    )
    refused = harness.create(cluster, namespace, unknown, check=False)
    assert "metadata.annotations['horus.dev/model']='nosuchnet'" in refused.stderr, refused.stderr
    gpu = harness.pod("asks-gpu", labels={"horus.dev/managed": "true"}, annotations=MODEL)
    gpu["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    refused = harness.create(cluster, namespace, gpu, check=False)
    # (the API server has defaulted the request from the limit before admission: the request is named)
    assert "spec.containers[0].resources.requests='nvidia.com/gpu'" in refused.stderr, refused.stderr
    assert harness.pods(cluster, namespace) == []


def test_pods_the_selectors_do_not_pick_never_reach_the_webhook_and_a_kill_loses_and_doubles_nothing(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    harness.create(cluster, namespace, harness.job("burst", completions=12, duration="120s"))

    def some_released() -> bool:
        return any(harness.released(p) for p in harness.pods(cluster, namespace, "-l", "job-name=burst"))

    wait_for(some_released, timeout=90, what="the first release", every=0.1)
    webhook_operator.kill()  # SIGKILL, with the rest of the burst being decided or released
    first_seen = {
        p["metadata"]["name"]: p["metadata"]["annotations"]["horus.dev/gpus"]
        for p in harness.pods(cluster, namespace, "-l", "job-name=burst")
        if harness.released(p)
    }

    # No operator runs: under failurePolicy Fail a labelled pod is refused, while pods the selectors do
    # not pick (unlabelled, in a namespace without the label; or labelled "false") are created as usual,
    # without the gate: the API server never called the webhook for them.
    refused = harness.create(
        cluster,
        namespace,
        harness.pod("while-down", labels={"horus.dev/managed": "true"}, annotations=MODEL),
        check=False,
    )
    assert refused.returncode != 0 and "horus.dev" in refused.stderr, refused.stderr
    plain = json.loads(harness.create(cluster, namespace, harness.pod("plain", annotations=MODEL)).stdout)
    opted_out = json.loads(
        harness.create(
            cluster,
            namespace,
            harness.pod("opted-out", labels={"horus.dev/managed": "false"}, annotations=MODEL),
        ).stdout
    )
    for pod in (plain, opted_out):
        assert harness.gates(pod) == [] and "env" not in pod["spec"]["containers"][0]

    webhook_operator.start()

    def all_bound() -> list[dict[str, Any]] | None:
        found = harness.pods(cluster, namespace, "-l", "job-name=burst")
        ok = len(found) == 12 and all(harness.released(p) and p["spec"].get("nodeName") for p in found)
        return found if ok else None

    pods = wait_for(all_bound, timeout=120, what="every pod of the burst released and bound")
    for pod in pods:
        name, annotations = pod["metadata"]["name"], pod["metadata"]["annotations"]
        assert pod["spec"]["nodeName"] == annotations["horus.dev/node"]
        if name in first_seen:
            assert annotations["horus.dev/gpus"] == first_seen[name], f"{name} released twice"
    assert all(count <= 1 for count in _placed_events(cluster, namespace).values())
    # No GPU holds more than its memory: the predictions each release recorded, summed per GPU.
    memory: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        for gpu in annotations["horus.dev/gpus"].split(","):
            memory[(annotations["horus.dev/node"], gpu)] += json.loads(annotations["horus.dev/predicted"])[
                "memoryMiB"
            ]
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    capacity = {
        n["metadata"]["name"]: float(n["metadata"]["labels"].get("nvidia.com/gpu.memory", 0)) for n in nodes
    }
    assert all(used <= capacity[node] for (node, _), used in memory.items()), memory
    # The pods the webhook never saw are kube-scheduler's alone.
    for name in ("plain", "opted-out"):
        pod = json.loads(cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)
        assert "horus.dev/node" not in (pod["metadata"].get("annotations") or {})


def test_the_pod_route_overlay_passes_a_server_side_dry_run(cluster: devcluster.LocalCluster) -> None:
    cluster.kubectl("apply", "-f", str(REPO / "manifests" / "namespace.yaml"))
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    result = cluster.kubectl("apply", "-k", str(REPO / "manifests-pod-route"), "--dry-run=server")
    for expected in (
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/horus-pods",
        "service/horus-webhook",
        "clusterrole.rbac.authorization.k8s.io/horus-operator-pod-route",
        "deployment.apps/horus-operator",
    ):
        assert expected in result.stdout, result.stdout
    assert "PodSecurity" not in result.stderr, result.stderr
    rendered = yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / "manifests-pod-route")).stdout)
    (deployment,) = [
        d for d in rendered if d["kind"] == "Deployment" and d["metadata"]["name"] == "horus-operator"
    ]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HORUS_WEBHOOK_PORT"] == "9443" and env["HORUS_BINDING"] == "env"


def test_a_labelled_namespace_sends_pods_naming_their_model_and_leaves_the_rest(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    cluster.kubectl("label", "namespace", namespace, "horus.dev/managed=true")
    named = json.loads(
        harness.create(cluster, namespace, harness.pod("names-its-model", annotations=MODEL)).stdout
    )
    assert named["metadata"]["labels"]["horus.dev/managed"] == "true"  # so the operator's watch sees it
    assert harness.gates(named) == [GATE]
    other = json.loads(harness.create(cluster, namespace, harness.pod("web-server")).stdout)
    assert harness.gates(other) == [] and "env" not in other["spec"]["containers"][0]
    wait_for(
        lambda: harness.released(
            json.loads(cluster.kubectl("get", "pod", "names-its-model", "-n", namespace, "-o", "json").stdout)
        ),
        timeout=60,
        what="the namespace's GPU pod released",
    )


GANG_NODE = devcluster.GpuNodePool(count=1, gpus_per_node=4, name_prefix="gang-node")
WHOLE_GPU = {**MODEL, "horus.dev/max-slowdown": "1"}  # never shared: one pod per GPU


def _gang_job(name: str, size: int) -> dict[str, Any]:
    """An indexed Job whose `size` pods are one gang (`horus.dev/group`), each on a GPU of its own."""
    job = harness.job(name, completions=size, duration="600s")
    job["spec"]["completionMode"] = "Indexed"
    template = job["spec"]["template"]["metadata"]
    template["annotations"].update({**WHOLE_GPU, "horus.dev/group": name, "horus.dev/group-size": str(size)})
    return job


def _condition(pod: dict[str, Any]) -> dict[str, Any]:
    found = [c for c in pod["status"].get("conditions") or [] if c["type"] == "horus.dev/Placed"]
    return found[0] if found else {}


def test_a_four_pod_gang_is_placed_all_or_none(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    # A node of its own (the session's nodes cordoned first, so the operator has seen that by the time it
    # sees the new node): 4 GPUs, one held by a pod placed before the gang, leaving room for 3.
    with only_nodes(cluster, keep=[]):
        (node,) = cluster.add_nodes(GANG_NODE)
        try:
            labels = {"horus.dev/managed": "true"}
            harness.create(cluster, namespace, harness.pod("holder", labels=labels, annotations=WHOLE_GPU))

            def holder() -> dict[str, Any] | None:
                pod = json.loads(
                    cluster.kubectl("get", "pod", "holder", "-n", namespace, "-o", "json").stdout
                )
                return pod if harness.released(pod) else None

            assert (
                wait_for(holder, timeout=60, what="the holder released")["metadata"]["annotations"][
                    "horus.dev/node"
                ]
                == node
            )
            harness.create(cluster, namespace, _gang_job("ring", 4))

            def told_why() -> list[dict[str, Any]] | None:
                found = harness.pods(cluster, namespace, "-l", "job-name=ring")
                waiting = [p for p in found if "3 of the 4 pods" in _condition(p).get("message", "")]
                return found if len(found) == 4 and len(waiting) == 4 else None

            gang = wait_for(told_why, timeout=90, what="the gang's 4 pods told they wait for room")
            assert not any(harness.released(p) for p in gang), "part of the gang was released"
            assert _condition(gang[0])["message"] == (
                f"waiting: gang group {namespace}/ring is placed all or none, "
                "and 3 of the 4 pods it needs fit now"
            )

            cluster.kubectl("delete", "pod", "holder", "-n", namespace)

            def all_released() -> list[dict[str, Any]] | None:
                found = harness.pods(cluster, namespace, "-l", "job-name=ring")
                ok = len(found) == 4 and all(harness.released(p) and p["spec"].get("nodeName") for p in found)
                return found if ok else None

            pods = wait_for(all_released, timeout=90, what="the whole gang released once room freed")
            where = {(p["spec"]["nodeName"], p["metadata"]["annotations"]["horus.dev/gpus"]) for p in pods}
            assert where == {(node, str(gpu)) for gpu in range(4)}
            assert all(count == 1 for count in _placed_events(cluster, namespace).values())
        finally:
            cluster.kubectl("delete", "namespace", namespace, "--wait=true", check=False)
            cluster.kubectl("delete", "node", node, "--wait=true", check=False)


def _workload_crds(cluster: devcluster.LocalCluster) -> None:
    """Kubeflow's PyTorchJob and JobSet CRDs, as published (`hack/fetch-workload-crds.sh`); server-side,
    as CRDs this large do not fit client-side apply's last-applied annotation."""
    fetched = subprocess.run(
        ["bash", str(REPO / "hack" / "fetch-workload-crds.sh")], check=True, capture_output=True, text=True
    )
    cluster.kubectl("apply", "--server-side", "-f", fetched.stdout.strip())
    crds = ("crd/pytorchjobs.kubeflow.org", "crd/jobsets.jobset.x-k8s.io")

    def both_established() -> bool:  # polled: `kubectl wait` fails on a CRD with no conditions yet
        listed = json.loads(cluster.kubectl("get", *crds, "-o", "json").stdout)["items"]
        conditions = [c for crd in listed for c in (crd.get("status") or {}).get("conditions") or []]
        return sum(c["type"] == "Established" and c["status"] == "True" for c in conditions) == len(crds)

    wait_for(both_established, timeout=60, what="the PyTorchJob and JobSet CRDs established")


def _trainer_pod(job: dict[str, Any], replica: str, index: int) -> dict[str, Any]:
    """A pod of `job` (the PyTorchJob example) as Kubeflow's training operator makes it: the replica's
    template, named and labelled as the operator names and labels it (no operator runs on kwok)."""
    name = job["metadata"]["name"]
    template = job["spec"]["pytorchReplicaSpecs"][replica]["template"]
    labels = {
        **template["metadata"]["labels"],
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/replica-type": replica.lower(),
        "training.kubeflow.org/replica-index": str(index),
    }
    metadata = {"name": f"{name}-{replica.lower()}-{index}", "labels": labels}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**metadata, "annotations": template["metadata"]["annotations"]},
        "spec": {"restartPolicy": "Never", **template["spec"]},
    }


def test_the_pod_route_examples_apply_and_a_pytorchjobs_pods_wait_for_their_whole_gang(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    _workload_crds(cluster)
    kueue_harness.install_crds(cluster)  # kueue-job.yaml's queues, whether or not test_kueue.py ran first
    applied = cluster.kubectl(
        "apply", "-n", namespace, "-f", str(REPO / "examples" / "pod-route"), "--dry-run=server"
    )
    for created in (
        "job.batch/ring-allreduce",
        "pytorchjob.kubeflow.org/resnet-ddp",
        "jobset.jobset.x-k8s.io/bert-slices",
    ):
        assert created in applied.stdout, applied.stdout

    job = yaml.safe_load((REPO / "examples" / "pod-route" / "pytorchjob.yaml").read_text())
    members = [_trainer_pod(job, "Master", 0), *(_trainer_pod(job, "Worker", i) for i in range(3))]
    for pod in members[:3]:
        harness.create(cluster, namespace, pod)

    def told(name: str, words: str) -> bool:
        pod = json.loads(cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)
        return words in _condition(pod).get("message", "")

    seen = f"3 of 4 pods of gang PyTorchJob {namespace}/resnet-ddp seen"
    wait_for(lambda: told("resnet-ddp-master-0", seen), timeout=60, what="the master told its gang is short")
    assert not any(harness.released(p) for p in harness.pods(cluster, namespace))
    harness.create(cluster, namespace, members[3])

    def all_released() -> bool:
        found = harness.pods(cluster, namespace, "-l", "training.kubeflow.org/job-name=resnet-ddp")
        return len(found) == 4 and all(harness.released(p) for p in found)

    wait_for(all_released, timeout=90, what="the PyTorchJob's 4 pods released together")


def test_the_pod_route_works_with_no_more_than_its_manifest_rbac(
    cluster: devcluster.LocalCluster, webhook_operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    """`horus run --webhook-port` with the horus-operator ServiceAccount's token and the RBAC of
    manifests/ and manifests-pod-route/: it releases a pod (patch pods), sets a waiting pod's condition
    (patch pods/status), posts Events and reads a ConfigMap, and is never refused."""
    webhook_operator.stop()  # one operator at a time: this one serves the webhook and places
    for manifest in (REPO / "manifests" / "serviceaccount.yaml", REPO / "manifests" / "rbac.yaml"):
        cluster.kubectl("apply", "-f", str(manifest))
    cluster.kubectl("apply", "-f", str(REPO / "manifests-pod-route" / "rbac.yaml"))
    settings, configuration = harness.webhook_settings(tmp_path / "tls")
    operator = operator_as_its_service_account(cluster, tmp_path, "pod-route-rbac", settings=settings)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(configuration))
    operator.start()
    try:
        wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
        harness.create(
            cluster, namespace, harness.pod("placed", labels={"horus.dev/managed": "true"}, annotations=MODEL)
        )
        missing = {**MODEL, "horus.dev/model": "onnx:absent"}
        harness.create(
            cluster,
            namespace,
            harness.pod("no-graph", labels={"horus.dev/managed": "true"}, annotations=missing),
        )

        def condition(name: str) -> dict[str, Any] | None:
            pod = json.loads(cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)
            found = [c for c in pod["status"].get("conditions") or [] if c["type"] == "horus.dev/Placed"]
            return found[0] if found else None

        placed = wait_for(lambda: condition("placed"), timeout=60, what="the pod released")
        refused = wait_for(lambda: condition("no-graph"), timeout=60, what="the pod without its graph told")
    finally:
        operator.stop()
    assert placed["status"] == "True"
    assert (
        refused["reason"] == "InvalidSpec" and "metadata.annotations['horus.dev/model']" in refused["message"]
    )
    assert _placed_events(cluster, namespace) == Counter({"placed": 1})
    assert "forbidden" not in operator.log_text().lower(), operator.log_tail()
