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
overlay manifests-pod-route/ passes a server-side dry run, and its RBAC is all the operator needs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import podroute_harness as harness
import pytest
import yaml
from dljob_harness import operator_as_its_service_account
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
