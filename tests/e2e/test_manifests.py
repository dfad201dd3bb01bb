"""`kubectl apply -k manifests/` installs Horus: checked by a server-side dry run against the real
apiserver (admission, schema and RBAC validation), plus static checks of what the install promises."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from dljob_harness import apply, dljobs, get_json, operator_as_its_service_account, wait_phases

from horus_operator import devcluster
from horus_operator.testing.builders import IMAGE, DLJobBuilder
from horus_operator.testing.operator_process import wait_for

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"


def _documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _documents() if d["kind"] == kind]


@pytest.fixture(scope="module")
def installed_basics(cluster: devcluster.LocalCluster) -> None:
    """What a dry run cannot stand in for, applied for real: the namespaces (a dry run's objects must
    live in namespaces that exist, and their Pod Security labels are what admission reads) and the CRDs
    (the DLJobs and GPUNodes of later steps need them established)."""
    cluster.kubectl("apply", "-f", str(MANIFESTS / "namespace.yaml"))
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev", "gpunodes.horus.dev")
    # What the NVIDIA container toolkit installs on a GPU cluster; the agent's pods name it.
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps({**runtime_class, "handler": "nvidia"}))


@pytest.mark.e2e
def test_server_side_dry_run_accepts_the_install(
    cluster: devcluster.LocalCluster, installed_basics: None
) -> None:
    result = cluster.kubectl("apply", "-k", str(MANIFESTS), "--dry-run=server")
    for expected in (
        "customresourcedefinition.apiextensions.k8s.io/dljobs.horus.dev",
        "namespace/horus-system",
        "namespace/horus-agent",
        "serviceaccount/horus-operator",
        "serviceaccount/horus-agent",
        "clusterrole.rbac.authorization.k8s.io/horus-operator",
        "clusterrole.rbac.authorization.k8s.io/horus-agent",
        "role.rbac.authorization.k8s.io/horus-operator-leader-election",
        "role.rbac.authorization.k8s.io/horus-operator-observations",
        "deployment.apps/horus-operator",
        "daemonset.apps/horus-agent",
    ):
        assert expected in result.stdout, result.stdout
    assert "PodSecurity" not in result.stderr, result.stderr  # no workload violates its namespace's level


@pytest.mark.e2e
@pytest.mark.parametrize(
    "manifest", sorted(p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")
)
def test_each_manifest_passes_a_server_side_dry_run_alone(
    cluster: devcluster.LocalCluster, installed_basics: None, manifest: str
) -> None:
    result = cluster.kubectl("apply", "-f", str(MANIFESTS / manifest), "--dry-run=server", check=False)
    assert result.returncode == 0 and "Warning" not in result.stderr, result.stderr


def pod_of(manifest: str, name: str) -> dict[str, Any]:
    """The Pod a workload's controller would create from `manifest`'s template."""
    (workload,) = [d for d in yaml.safe_load_all((MANIFESTS / manifest).read_text()) if d]
    template = workload["spec"]["template"]
    metadata = {**template["metadata"], "name": name, "namespace": workload["metadata"]["namespace"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def dry_run_pod(cluster: devcluster.LocalCluster, pod: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)


@pytest.mark.e2e
def test_the_operators_pod_is_admitted_under_pod_security_restricted(
    cluster: devcluster.LocalCluster, installed_basics: None
) -> None:
    labels = get_json(cluster, "default", "namespace", "horus-system")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"

    admitted = dry_run_pod(cluster, pod_of("operator.yaml", "horus-operator-dry-run"))

    assert admitted.returncode == 0 and "Warning" not in admitted.stderr, admitted.stderr


@pytest.mark.e2e
def test_the_agents_pod_breaks_pod_security_restricted_by_host_pid_alone(
    cluster: devcluster.LocalCluster, installed_basics: None
) -> None:
    agent = pod_of("agent-daemonset.yaml", "horus-agent-dry-run")
    in_restricted = {**agent, "metadata": {**agent["metadata"], "namespace": "horus-system"}}

    admitted = dry_run_pod(cluster, agent)  # in horus-agent, which enforces "privileged"
    refused = dry_run_pod(cluster, in_restricted)

    assert admitted.returncode == 0, admitted.stderr
    assert refused.returncode != 0
    assert refused.stderr.strip().endswith(
        'violates PodSecurity "restricted:latest": host namespaces (hostPID=true)'
    ), refused.stderr


@pytest.mark.e2e
def test_the_operator_works_with_no_more_than_its_manifest_rbac(
    cluster: devcluster.LocalCluster, installed_basics: None, namespace: str, tmp_path: Path
) -> None:
    """`horus run` with the horus-operator ServiceAccount's token: it leads (Lease), places a job and
    writes its status and Events, reads an ONNX ConfigMap, deletes and re-places a pod no node takes,
    and is never refused (a missing verb would be logged as Forbidden)."""
    for manifest in ("serviceaccount.yaml", "rbac.yaml"):
        cluster.kubectl("apply", "-f", str(MANIFESTS / manifest))
    operator = operator_as_its_service_account(cluster, tmp_path, "rbac-e2e")
    cluster.kubectl(
        "create", "configmap", "garbage", "-n", namespace, "--from-literal=model.onnx=not protobuf"
    )
    # A claim that never binds (no StorageClass, no PersistentVolume): no node can take the pod, which the
    # operator cannot judge in advance (a claim that does not exist it can: that job waits, no pod made).
    never_binds = {
        "storageClassName": "",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "unbound"},
            "spec": never_binds,
        },
    )
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "unbound"}}
    no_node = {"containers": [{"name": "train", "image": IMAGE}], "volumes": [claim]}
    operator.start()
    try:
        apply(
            cluster,
            namespace,
            DLJobBuilder("placed").obj(),
            DLJobBuilder("bad-onnx").model(onnx={"configMap": "garbage"}).obj(),
            DLJobBuilder("no-node-fits").spec(template={"spec": no_node}).obj(),
        )
        jobs = wait_phases(cluster, namespace, ["placed"], {"Running"}, timeout=60)
        wait_phases(cluster, namespace, ["bad-onnx"], {"Failed"}, timeout=60)
        try:
            replaced = wait_for(
                lambda: (
                    cluster.kubectl(
                        "get", "events", "-n", namespace, "--field-selector", "reason=Replacing", "-o", "name"
                    ).stdout
                ),
                timeout=60,
                what="the unschedulable pod deleted and its job re-placed",
            )
        except AssertionError as timeout:  # CI failed here once: say what the job and the operator did
            job = dljobs(cluster, namespace).get("no-node-fits", {}).get("status")
            raise AssertionError(f"{timeout}\nno-node-fits: {job}\n{operator.log_tail(80)}") from None
    finally:
        operator.stop()

    assert "unreadable ONNX graph" in dljobs(cluster, namespace)["bad-onnx"]["status"]["message"]
    assert jobs["placed"]["status"]["node"] and replaced
    events = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", "reason=Placed", "-o", "name"
    )
    assert events.stdout.strip(), "no Placed event"
    assert "forbidden" not in operator.log_text().lower(), operator.log_tail()


@pytest.mark.e2e
@pytest.mark.parametrize("flag", ["-f", "-k"])
def test_crds_and_examples_apply_with_f_and_k(
    cluster: devcluster.LocalCluster, namespace: str, flag: str
) -> None:
    # Both spellings work (tests/unit/test_manifest_dirs.py says why). DLJobs need their CRD for real.
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    crds = cluster.kubectl("apply", flag, str(REPO / "crds"), "--dry-run=server").stdout
    assert "customresourcedefinition.apiextensions.k8s.io/gpunodes.horus.dev" in crds, crds
    jobs = cluster.kubectl("apply", "-n", namespace, flag, str(REPO / "examples"), "--dry-run=server")
    assert "dljob.horus.dev/cnn-resnet50" in jobs.stdout, jobs.stdout


@pytest.mark.e2e
def test_the_dashboard_applies_into_the_namespace_given(
    cluster: devcluster.LocalCluster, namespace: str
) -> None:
    """manifests/dashboards/ has no namespace of its own: it goes where Grafana's sidecar looks."""
    result = cluster.kubectl(
        "apply", "-n", namespace, "-k", str(MANIFESTS / "dashboards"), "--dry-run=server"
    )
    assert "configmap/horus-dashboard" in result.stdout, result.stdout
    rendered = yaml.safe_load(cluster.kubectl("kustomize", str(MANIFESTS / "dashboards")).stdout)
    assert rendered["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "namespace" not in rendered["metadata"]


def test_rbac_has_no_wildcards() -> None:
    for role in _kind("ClusterRole") + _kind("Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)


def test_operator_runs_non_root_read_only_with_requests_and_a_liveness_probe() -> None:
    (deployment,) = _kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["serviceAccountName"] == "horus-operator"


def test_the_kustomization_tags_the_image_with_the_project_version() -> None:
    (image,) = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["images"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert (image["name"], image["newTag"]) == (project["name"], project["version"])
    for kind in ("Deployment", "DaemonSet"):
        for workload in _kind(kind):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                assert container["image"] == image["name"], (kind, container["image"])


@pytest.mark.e2e
def test_kustomize_sets_every_workloads_image_from_one_line(cluster: devcluster.LocalCluster) -> None:
    (image,) = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["images"]
    rendered = yaml.safe_load_all(cluster.kubectl("kustomize", str(MANIFESTS)).stdout)
    images = {
        (document["kind"], container["image"])
        for document in rendered
        if document["kind"] in ("Deployment", "DaemonSet")
        for container in document["spec"]["template"]["spec"]["containers"]
    }
    expected = f"{image['newName']}:{image['newTag']}"
    assert images == {("Deployment", expected), ("DaemonSet", expected)}
