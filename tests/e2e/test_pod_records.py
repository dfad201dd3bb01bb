"""Horus's records on pods are Horus's alone (issue 44; docs/reliability.md, "Threat model").

The admission policy `horus-pod-records` (manifests/pod-records.yaml, as shipped) on the real local
control plane, the operator serving the pod webhook as its ServiceAccount with the RBAC of manifests/
and manifests-pod-route/. A tenant is a user who may create, patch and delete pods in one namespace
(a Role, acted out through impersonation). Each attempt that once got through is refused by the API
server naming the field: rewriting a released pod's record, visible devices or CDI devices, removing
the scheduling gate, dropping or adding Horus's labels, creating a pod with a made-up record (webhook
or none). What
the owner may write still goes (the progress its job reports, annotations of its own). And where the
policy is bypassed (a cluster admin, whom it does not bind), the operator stops a pod whose record is
not the one it released, and says so in an Event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import podroute_harness as harness
import pytest
from dljob_harness import apply, horus_pods, operator_as_its_service_account
from podroute_harness import GATE, MODEL

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

POLICY = REPO / "manifests" / "pod-records.yaml"
OPERATOR = "system:serviceaccount:horus-system:horus-operator"
MANAGED = {"horus.dev/managed": "true"}


@pytest.fixture(scope="module")
def operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The policy, and `horus run --webhook-port` as the horus-operator ServiceAccount."""
    directory = tmp_path_factory.mktemp("pod-records")
    cluster.kubectl("apply", "-f", str(REPO / "manifests" / "namespace.yaml"))
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    for manifest in ("manifests/serviceaccount.yaml", "manifests/rbac.yaml", "manifests-pod-route/rbac.yaml"):
        cluster.kubectl("apply", "-f", str(REPO / manifest))
    cluster.kubectl("apply", "-f", str(POLICY))
    settings, configuration = harness.webhook_settings(directory / "tls")
    running = operator_as_its_service_account(cluster, directory, "pod-records", settings=settings)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(configuration))
    running.start()
    yield running
    running.stop()
    cluster.kubectl("delete", "mutatingwebhookconfiguration", "horus-pods", check=False)
    cluster.kubectl("delete", "-f", str(POLICY), "--ignore-not-found")  # later modules run without it


class PodTenant:
    """A user who may create, read, patch and delete pods in `namespace`, and nothing else."""

    def __init__(self, cluster: devcluster.LocalCluster, namespace: str) -> None:
        self.cluster, self.namespace, self.user = cluster, namespace, f"tenant@{namespace}"
        verbs = "--verb=create,get,list,watch,update,patch,delete"
        cluster.kubectl("create", "role", "pods", "-n", namespace, verbs, "--resource=pods")
        cluster.kubectl(
            "create", "rolebinding", "pods", "-n", namespace, "--role=pods", f"--user={self.user}"
        )

    def kubectl(self, *args: str, input: str | None = None) -> str:
        """The API server's answer: "" when it took the request, else its message."""
        done = self.cluster.kubectl(*args, "-n", self.namespace, "--as", self.user, input=input, check=False)
        return "" if done.returncode == 0 else done.stderr

    def create(self, pod: dict[str, Any]) -> str:
        return self.kubectl("create", "-f", "-", input=json.dumps(pod))

    def patch(self, name: str, operations: list[dict[str, Any]]) -> str:
        return self.kubectl("patch", "pod", name, "--type=json", "-p", json.dumps(operations))


def _pod(cluster: devcluster.LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    found = cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def _released(cluster: devcluster.LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    pod = _pod(cluster, namespace, name)
    return pod if pod is not None and harness.released(pod) else None


def _names(refusal: str, field: str, keys: dict[str, str]) -> bool:
    """Whether `refusal` names `field` with each of `keys` (in the API server's order)."""
    return f"{field}[" in refusal and all(key in refusal for key in keys)


def _annotation(key: str) -> str:
    return "/metadata/annotations/" + key.replace("/", "~1")


def test_a_tenant_who_may_patch_its_pods_may_not_touch_horuss_records_or_gate(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    tenant = PodTenant(cluster, namespace)
    assert tenant.create(harness.pod("placed", labels=MANAGED, annotations=MODEL)) == ""
    no_graph = {**MODEL, "horus.dev/model": "onnx:absent"}  # stays gated: Horus cannot read its graph
    assert tenant.create(harness.pod("held", labels=MANAGED, annotations=no_graph)) == ""
    placed = wait_for(lambda: _released(cluster, namespace, "placed"), timeout=90, what="the pod released")
    node = placed["metadata"]["annotations"]["horus.dev/node"]
    other = "a100-node-0" if node != "a100-node-0" else "gpu-node-0"

    attempts = {  # what the tenant tries -> what the refusal names
        "record moved": (
            [{"op": "replace", "path": _annotation("horus.dev/node"), "value": other}],
            "metadata.annotations[horus.dev/node]",
        ),
        "every GPU": (
            [{"op": "replace", "path": _annotation("horus.dev/visible-devices"), "value": "all"}],
            "metadata.annotations[horus.dev/visible-devices]",
        ),
        "record dropped": (
            [{"op": "remove", "path": _annotation("horus.dev/request")}],
            "metadata.annotations[horus.dev/request]",
        ),
        "every GPU by CDI": (
            [{"op": "add", "path": _annotation("cdi.k8s.io/horus_gpus"), "value": "nvidia.com/gpu=all"}],
            "metadata.annotations[cdi.k8s.io/horus_gpus]",
        ),
        "label dropped": (
            [{"op": "remove", "path": "/metadata/labels/horus.dev~1managed"}],
            "metadata.labels[horus.dev/managed]",
        ),
    }
    for what, (operations, named) in attempts.items():
        refused = tenant.patch("placed", operations)
        assert named in refused, (what, refused)
    refused = tenant.patch("held", [{"op": "remove", "path": "/spec/schedulingGates/0"}])
    assert "spec.schedulingGates" in refused, refused
    forged = [{"op": "add", "path": _annotation("horus.dev/node"), "value": other}]
    assert "metadata.annotations[horus.dev/node]" in tenant.patch("held", forged)

    # What the owner writes still goes: its job's progress, and annotations of its own.
    assert tenant.kubectl("annotate", "pod", "placed", "horus.dev/progress-steps-per-second=3.5") == ""
    assert tenant.kubectl("annotate", "pod", "placed", "team.example.com/note=mine") == ""
    # The operator may write the records (a server-side dry run as its ServiceAccount).
    as_operator = cluster.kubectl(
        "annotate",
        "pod",
        "placed",
        "-n",
        namespace,
        "--as",
        OPERATOR,
        "--overwrite",
        "--dry-run=server",
        f"horus.dev/node={other}",
        check=False,
    )
    assert as_operator.returncode == 0, as_operator.stderr
    after = _pod(cluster, namespace, "placed")
    assert after is not None and after["metadata"]["annotations"]["horus.dev/node"] == node
    held = _pod(cluster, namespace, "held")
    assert held is not None and harness.gates(held) == [GATE]


def test_a_made_up_record_is_refused_at_creation_and_a_pod_cannot_be_relabelled_into_horus(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    tenant = PodTenant(cluster, namespace)
    record = {"horus.dev/node": "gpu-node-0", "horus.dev/gpus": "0,1,2,3", "horus.dev/visible-devices": "all"}
    # Unlabelled, in a namespace that is not managed: the webhook never sees it.
    refused = tenant.create(harness.pod("forged", annotations={**MODEL, **record}))
    assert _names(refused, "metadata.annotations", record), refused
    cdi = {"cdi.k8s.io/horus_gpus": "nvidia.com/gpu=all"}  # the reserve binding's device annotation
    refused = tenant.create(harness.pod("cdi-forged", annotations={**MODEL, **cdi}))
    assert _names(refused, "metadata.annotations", cdi), refused
    refused = tenant.create(harness.pod("dljob-like", labels={"horus.dev/dljob": "someone-elses"}))
    assert "metadata.labels[horus.dev/dljob]" in refused, refused
    assert tenant.create(harness.pod("plain", annotations=MODEL)) == ""
    refused = tenant.kubectl("label", "pod", "plain", "horus.dev/managed=true")
    assert "metadata.labels[horus.dev/managed]" in refused, refused


def test_where_the_policy_is_bypassed_the_operator_stops_a_pod_whose_record_is_not_horuss(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    harness.create(cluster, namespace, harness.pod("victim", labels=MANAGED, annotations=MODEL))
    wait_for(lambda: _released(cluster, namespace, "victim"), timeout=90, what="the pod released")
    # The cluster admin (system:masters: the policy does not bind them) stands in for a cluster without
    # the policy: the record now points the pod at every GPU of its node.
    cluster.kubectl(
        "annotate", "pod", "victim", "-n", namespace, "--overwrite", "horus.dev/visible-devices=all"
    )
    wait_for(lambda: _pod(cluster, namespace, "victim") is None, timeout=60, what="the operator to stop it")
    events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    told = [
        e["message"] for e in events if e["reason"] == "Tampered" and e["involvedObject"]["name"] == "victim"
    ]
    assert told and "not the one Horus released" in told[0], told


def test_a_dljobs_pod_keeps_its_owner_references_and_outlives_its_dljob_by_no_more_than_a_cycle(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    # Rounds 3 and 4 of issue 44: a tenant who may patch pods removed a DLJob pod's ownerReferences, or
    # flipped `controller`, or added an owner of its own to outlive the DLJob; a DLJob-only tenant deleted
    # the DLJob with --cascade=orphan. Each time the pod kept its GPU while Horus counted it free.
    tenant = PodTenant(cluster, namespace)
    apply(cluster, namespace, DLJobBuilder("owned").obj())
    (pod,) = wait_for(lambda: horus_pods(cluster, namespace), timeout=60, what="the DLJob's pod")
    name = pod["metadata"]["name"]
    assert tenant.create(harness.pod("anchor")) == ""
    anchor = _pod(cluster, namespace, "anchor")
    assert anchor is not None
    extra_owner = {"apiVersion": "v1", "kind": "Pod", "name": "anchor", "uid": anchor["metadata"]["uid"]}
    attempts = {
        "removed": [{"op": "remove", "path": "/metadata/ownerReferences"}],
        "controller flipped": [
            {"op": "replace", "path": "/metadata/ownerReferences/0/controller", "value": False}
        ],
        "owner added": [{"op": "add", "path": "/metadata/ownerReferences/-", "value": extra_owner}],
    }
    for what, operations in attempts.items():
        refused = tenant.patch(name, operations)
        assert "metadata.ownerReferences" in refused, (what, refused)
    # Deleted with orphaning, the garbage collector takes the reference off; the operator stops the pod.
    cluster.kubectl("delete", "dljob", "owned", "-n", namespace, "--cascade=orphan")
    wait_for(lambda: _pod(cluster, namespace, name) is None, timeout=60, what="the orphaned pod stopped")


def test_a_released_pod_kube_scheduler_never_takes_is_deleted_and_its_gpus_freed(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    # Round 3 of issue 44: released, a routed pod holds its GPUs until it ends; one kube-scheduler never
    # takes (a claim that never binds, a node selector added while gated) held them for ever.
    wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
    claim = {  # no StorageClass, no PersistentVolume: it never binds
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "scratch"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(claim))
    tenant = PodTenant(cluster, namespace)
    unbound = harness.pod("unbound", labels=MANAGED, annotations=MODEL)
    unbound["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "scratch"}}]
    assert tenant.create(unbound) == ""
    wait_for(lambda: _released(cluster, namespace, "unbound"), timeout=90, what="the pod released")
    wait_for(lambda: _pod(cluster, namespace, "unbound") is None, timeout=90, what="the pod deleted")
    events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    told = [
        e["message"]
        for e in events
        if e["reason"] == "Replacing" and e["involvedObject"]["name"] == "unbound"
    ]
    assert told and told[0].endswith(
        "for over 10s: pod has unbound immediate PersistentVolumeClaims; deleted, its GPUs freed"
    ), told


def test_with_the_webhook_down_under_ignore_a_made_up_record_is_still_refused(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    """Last in the module: it stops the operator and lets pods past the webhook."""
    operator.stop()
    for index in (0, 1):
        patch = [{"op": "replace", "path": f"/webhooks/{index}/failurePolicy", "value": "Ignore"}]
        cluster.kubectl(
            "patch", "mutatingwebhookconfiguration", "horus-pods", "--type=json", "-p", json.dumps(patch)
        )
    tenant = PodTenant(cluster, namespace)
    record = {"horus.dev/node": "gpu-node-0", "horus.dev/gpus": "0", "horus.dev/request": "{}"}
    refused = tenant.create(harness.pod("forged", labels=MANAGED, annotations={**MODEL, **record}))
    assert _names(refused, "metadata.annotations", record), refused
    # Without a record it is created ungated, unseen by Horus's books (docs/reliability.md: `env` binding).
    assert tenant.create(harness.pod("unplaced", labels=MANAGED, annotations=MODEL)) == ""
    unplaced = _pod(cluster, namespace, "unplaced")
    assert unplaced is not None and harness.gates(unplaced) == []
