"""`kubectl apply -k manifests/` installs Horus: checked by a server-side dry run against the real
apiserver (admission, schema and RBAC validation), plus static checks of what the install promises."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from horus_operator import devcluster

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


@pytest.mark.e2e
def test_server_side_dry_run_accepts_the_install(cluster: devcluster.LocalCluster) -> None:
    # A dry run creates nothing, so the namespace its objects live in must exist for real.
    cluster.kubectl("create", "namespace", "horus-system", check=False)
    result = cluster.kubectl("apply", "-k", str(MANIFESTS), "--dry-run=server")
    for expected in (
        "customresourcedefinition.apiextensions.k8s.io/dljobs.horus.dev",
        "serviceaccount/horus-operator",
        "clusterrole.rbac.authorization.k8s.io/horus-operator",
        "deployment.apps/horus-operator",
    ):
        assert expected in result.stdout, result.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("flag", ["-f", "-k"])
def test_crds_and_examples_apply_with_f_and_k(
    cluster: devcluster.LocalCluster, namespace: str, flag: str
) -> None:
    # Both spellings work (tests/unit/test_manifest_dirs.py says why). DLJobs need their CRD for real.
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/dljobs.horus.dev", "--timeout=60s")
    crds = cluster.kubectl("apply", flag, str(REPO / "crds"), "--dry-run=server").stdout
    assert "customresourcedefinition.apiextensions.k8s.io/gpunodes.horus.dev" in crds, crds
    jobs = cluster.kubectl("apply", "-n", namespace, flag, str(REPO / "examples"), "--dry-run=server")
    assert "dljob.horus.dev/cnn-resnet50" in jobs.stdout, jobs.stdout


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
