"""charts/horus: with default values it renders exactly what `kubectl kustomize manifests/` does (parsed
objects compared, not text); each value reaches the objects it names; and `helm install` into the real
local control plane gives an install the operator places a DLJob with, running with nothing but the
chart's ServiceAccount and RBAC, which `helm upgrade` with a changed value rolls.

helm is compiled from its Go module (hack/build-helm.sh, cached). Rendering needs no cluster, but it
needs the compiled helm and kubectl, hence the e2e marker. kwok runs no containers: the chart's
operator pods are bound and reported Running and Ready without executing, so the test runs
`horus run` beside them with a token of the chart's ServiceAccount, as tests/e2e/test_manifests.py
does for the kustomize install. The local kube-controller-manager runs no DaemonSet controller, so
the agent's DaemonSet is created and never has pods (helm's `--wait` would wait for them forever):
the install and the upgrade are awaited through the operator's rollout instead."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from dljob_harness import apply, get_json, operator_as_its_service_account, wait_phases
from helm_harness import CHART, RELEASE, by_key, render, run_helm

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import FAST_SETTINGS, REPO, wait_for

pytestmark = pytest.mark.e2e

OPERATOR = ("apps/v1", "Deployment", "horus-system", "horus-operator")
AGENT = ("apps/v1", "DaemonSet", "horus-agent", "horus-agent")


@pytest.fixture(scope="module")
def helm_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return container


def _env(workload: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in _container(workload)["env"] if "value" in e}


def test_default_values_render_exactly_the_kustomize_install(helm_state: Path) -> None:
    kubectl = devcluster.kubectl_path()
    kustomized = subprocess.run(
        [str(kubectl), "kustomize", str(REPO / "manifests")], capture_output=True, text=True, check=True
    ).stdout
    expected = by_key(yaml.safe_load_all(kustomized))
    rendered = render(state=helm_state)

    assert sorted(rendered) == sorted(expected)
    for key, obj in expected.items():
        assert rendered[key] == obj, key


def test_the_chart_ships_the_project_version_and_crds(helm_state: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["appVersion"] == version
    # The chart's copies of the CRDs are the CRDs (helm installs only files inside the chart).
    for crd in ("dljob.yaml", "gpunode.yaml"):
        assert (CHART / "crds" / crd).read_text() == (REPO / "crds" / crd).read_text(), (
            f"charts/horus/crds/{crd} differs from crds/{crd}: cp crds/{crd} charts/horus/crds/"
        )


def test_operator_values_reach_the_deployment(helm_state: Path) -> None:
    objects = render(
        "image.registry=registry.example.com/platform",
        "image.tag=1.2.3",
        "operator.replicas=3",
        "operator.binding=dra",
        "operator.sharing=timeslicing",
        "operator.queueOrder=las",
        "operator.resources.requests.cpu=1",
        "operator.env.HORUS_MAX_WAIT_SECONDS=3600",
        "imagePullSecrets[0].name=regcred",
        state=helm_state,
    )
    operator = objects[OPERATOR]
    pod = operator["spec"]["template"]["spec"]

    assert operator["spec"]["replicas"] == 3
    assert _container(operator)["image"] == "registry.example.com/platform/horus-operator:1.2.3"
    assert _container(objects[AGENT])["image"] == "registry.example.com/platform/horus-operator:1.2.3"
    assert _env(operator) | {
        "HORUS_BINDING": "dra",
        "HORUS_SHARING": "timeslicing",
        "HORUS_QUEUE_ORDER": "las",
        "HORUS_MAX_WAIT_SECONDS": "3600",
    } == _env(operator)
    assert _container(operator)["resources"]["requests"] == {"cpu": 1, "memory": "512Mi"}
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]

    pinned = render("image.digest=sha256:0123abcd", state=helm_state)
    assert _container(pinned[OPERATOR])["image"] == "horus-operator@sha256:0123abcd"


def test_agent_off_leaves_out_its_namespace_rbac_and_daemonset(helm_state: Path) -> None:
    objects = render("agent.enabled=false", state=helm_state)
    agent_objects = [
        key for key, obj in objects.items() if key[2] == "horus-agent" or key[3] == "horus-agent"
    ]
    assert agent_objects == []
    assert OPERATOR in objects


def test_metrics_values(helm_state: Path) -> None:
    def scrape_annotations(objects: dict[Any, dict[str, Any]], workload: Any = AGENT) -> dict[str, str]:
        return objects[workload]["spec"]["template"]["metadata"].get("annotations", {})

    default = render(state=helm_state)
    off = render("metrics.enabled=false", state=helm_state)
    monitored = render(
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
        "agent.metricsPort=9500",
        "operator.metricsPort=9501",
        "operator.podAnnotations.team=ml",
        state=helm_state,
    )

    assert scrape_annotations(default)["prometheus.io/port"] == "9400"
    assert scrape_annotations(default, OPERATOR)["prometheus.io/port"] == "9401"
    assert scrape_annotations(off) == {} and scrape_annotations(off, OPERATOR) == {}
    assert scrape_annotations(monitored, OPERATOR) == {
        "team": "ml",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9501",
        "prometheus.io/path": "/metrics",
    }
    assert _env(monitored[OPERATOR])["HORUS_METRICS_PORT"] == "9501"
    assert {"name": "metrics", "containerPort": 9501} in _container(monitored[OPERATOR])["ports"]
    operator_service = monitored[("v1", "Service", "horus-system", "horus-operator-metrics")]
    operator_monitor = monitored[
        ("monitoring.coreos.com/v1", "ServiceMonitor", "horus-system", "horus-operator")
    ]
    operator_pod_labels = monitored[OPERATOR]["spec"]["template"]["metadata"]["labels"]
    assert operator_service["spec"]["selector"].items() <= operator_pod_labels.items()
    assert operator_service["spec"]["ports"] == [{"name": "metrics", "port": 9501, "targetPort": "metrics"}]
    assert (
        operator_monitor["spec"]["selector"]["matchLabels"].items()
        <= operator_service["metadata"]["labels"].items()
    )
    assert not [key for key in default if key[1] in ("Service", "ServiceMonitor")]
    service = monitored[("v1", "Service", "horus-agent", "horus-agent-metrics")]
    monitor = monitored[("monitoring.coreos.com/v1", "ServiceMonitor", "horus-agent", "horus-agent")]
    agent_pod_labels = monitored[AGENT]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= agent_pod_labels.items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9500, "targetPort": "metrics"}]
    assert _container(monitored[AGENT])["ports"] == [{"name": "metrics", "containerPort": 9500}]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_namespaces_and_their_pod_security_labels(helm_state: Path) -> None:
    objects = render(
        "namespaces.operator.name=platform-horus",
        "namespaces.operator.podSecurity.enforce=baseline",
        "namespaces.agent.name=platform-horus-agent",
        "tenancy.dljobOnlyTenants=true",
        state=helm_state,
    )
    operator_ns = objects[("v1", "Namespace", "", "platform-horus")]["metadata"]["labels"]
    assert operator_ns["pod-security.kubernetes.io/enforce"] == "baseline"
    assert operator_ns["pod-security.kubernetes.io/audit"] == "restricted"
    agent_ns = objects[("v1", "Namespace", "", "platform-horus-agent")]["metadata"]["labels"]
    assert agent_ns["pod-security.kubernetes.io/enforce"] == "privileged"
    namespaced = {key[2] for key in objects if key[2]}
    assert namespaced == {"platform-horus", "platform-horus-agent"}
    # Everything that names a namespace follows: RBAC subjects, the admission policy's parameters.
    subjects = [s for key, o in objects.items() if key[1].endswith("Binding") for s in o.get("subjects", [])]
    assert {s["namespace"] for s in subjects} == {"platform-horus", "platform-horus-agent"}
    assert "horus-system" not in json.dumps(list(objects.values()))
    binding = objects[
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "", "horus-dljob-tenancy")
    ]
    assert binding["spec"]["paramRef"]["namespace"] == "platform-horus"
    tenancy = objects[("v1", "ConfigMap", "platform-horus", "horus-tenancy")]
    assert tenancy["data"]["dljobOnlyTenants"] == "true"


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("operator.binding=pci", "value must be one of 'env', 'dra'"),
        ("operater.replicas=1", "additional properties 'operater' not allowed"),
        ("namespaces.agent.podSecurity.enforce=strict", "value must be one of"),
        ("operator.env.HORUS_POLICY=binpack", "HORUS_POLICY"),  # operator.policy says it
    ],
)
def test_the_schema_refuses_what_the_operator_would(helm_state: Path, value: str, complaint: str) -> None:
    refused = run_helm("template", RELEASE, str(CHART), "--set", value, state=helm_state, check=False)
    assert refused.returncode != 0 and complaint in refused.stderr, refused.stderr


def _replica_sets(cluster: devcluster.LocalCluster) -> dict[str, dict[str, Any]]:
    found = get_json(cluster, "horus-system", "replicasets", "-l", "app.kubernetes.io/component=operator")
    return {rs["metadata"]["labels"]["pod-template-hash"]: rs for rs in found["items"]}


def test_helm_install_places_a_dljob_and_upgrade_rolls_the_operator(
    cluster: devcluster.LocalCluster, namespace: str, helm_state: Path, tmp_path: Path
) -> None:
    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return run_helm(*args, state=helm_state, kubeconfig=cluster.kubeconfig)

    # Release recorded in the test's namespace; the chart creates horus-system and horus-agent. Other
    # tests of the session apply manifests/ with kubectl: --take-ownership adopts what they left.
    helm("install", RELEASE, str(CHART), "-n", namespace, "--take-ownership")
    try:
        cluster.kubectl(
            "rollout", "status", "deployment/horus-operator", "-n", "horus-system", "--timeout=90s"
        )
        (first_hash,) = _replica_sets(cluster)
        deployment = get_json(cluster, "horus-system", "deployment", "horus-operator")
        labels = get_json(cluster, "default", "namespace", "horus-system")["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"

        # The operator as the chart's pods would run it: its ServiceAccount, its Lease namespace, the
        # settings its Deployment sets.
        operator = operator_as_its_service_account(
            cluster, tmp_path, "helm-e2e", settings={**_env(deployment), **FAST_SETTINGS}
        )
        operator.start()
        try:
            apply(cluster, namespace, DLJobBuilder("placed").obj())
            jobs = wait_phases(cluster, namespace, ["placed"], {"Running"}, timeout=60)
            # Gone while its operator runs (which removes its finalizer): a DLJob left in the namespace
            # being deleted would be the next test's operator's to finish, in a namespace refusing Events.
            cluster.kubectl("delete", "dljob", "placed", "-n", namespace, "--timeout=60s")
        finally:
            operator.stop()
        assert jobs["placed"]["status"]["node"]
        assert "forbidden" not in operator.log_text().lower(), operator.log_tail()

        # A changed value rolls the operator: a new pod template, a new ReplicaSet, the old one drained.
        helm("upgrade", RELEASE, str(CHART), "-n", namespace, "--set", "operator.queueOrder=las")
        cluster.kubectl(
            "rollout", "status", "deployment/horus-operator", "-n", "horus-system", "--timeout=90s"
        )
        replica_sets = _replica_sets(cluster)
        (second_hash,) = set(replica_sets) - {first_hash}
        new = replica_sets[second_hash]
        assert _env(new)["HORUS_QUEUE_ORDER"] == "las"
        assert new["status"]["readyReplicas"] == 2
        assert replica_sets[first_hash]["spec"]["replicas"] == 0
        history = helm("history", RELEASE, "-n", namespace, "-o", "json").stdout
        assert [r["status"] for r in json.loads(history)] == ["superseded", "deployed"]

        # Every optional value at once (what `make lint` lints too), through the API server's own
        # validation and Pod Security admission; the ServiceMonitor's CRD is not installed here.
        everything = run_helm(
            "template",
            RELEASE,
            str(CHART),
            "-f",
            str(CHART / "ci" / "everything-on-values.yaml"),
            state=helm_state,
        ).stdout
        objects = [o for o in yaml.safe_load_all(everything) if o and o["kind"] != "ServiceMonitor"]
        items = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        dry_run = ("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-")
        checked = cluster.kubectl(*dry_run, input=items, check=False)
        # kubectl's notice about objects an earlier test of the session applied client-side (it moves
        # their last-applied annotation to server-side apply) is not about the chart: every other
        # warning (Pod Security admission's first) is.
        warnings = [
            line
            for line in checked.stderr.splitlines()
            if line.startswith("Warning") and "last-applied-configuration" not in line
        ]
        assert checked.returncode == 0 and not warnings, checked.stderr
    finally:
        run_helm(
            "uninstall",
            RELEASE,
            "-n",
            namespace,
            "--wait",
            "--timeout=120s",
            state=helm_state,
            kubeconfig=cluster.kubeconfig,
            check=False,
        )
    # Later tests apply manifests/ with kubectl: leave no namespace of the chart's terminating.
    left = ("get", "namespace", "horus-system", "horus-agent", "--ignore-not-found", "-o", "name")
    wait_for(
        lambda: not cluster.kubectl(*left).stdout.strip(), timeout=90, what="the chart's namespaces gone"
    )
