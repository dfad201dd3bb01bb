"""charts/horus: with default values it renders exactly what `kubectl kustomize manifests/` does (parsed
objects compared, not text); each value reaches the objects it names; and `helm install` into the real
local control plane gives an install the operator places a DLJob with, running with nothing but the
chart's ServiceAccount and RBAC, which `helm upgrade` with a changed value rolls. With
`podRoute.enabled=true` it renders what `kubectl kustomize manifests-pod-route/` does (but for the
certificate the values choose), and its install gates and places a labelled Job's pod.

helm is compiled from its Go module (hack/build-helm.sh, cached). Rendering needs no cluster, but it
needs the compiled helm and kubectl, hence the e2e marker. kwok runs no containers: the chart's
operator pods are bound and reported Running and Ready without executing, so the test runs
`horus run` beside them with a token of the chart's ServiceAccount, as tests/e2e/test_manifests.py
does for the kustomize install. The local kube-controller-manager runs no DaemonSet controller, so
the agent's DaemonSet is created and never has pods (helm's `--wait` would wait for them forever):
the install and the upgrade are awaited through the operator's rollout instead. For the same reason
no pod serves the pod webhook behind the chart's Service: the API server is pointed at the local
`horus run` instead (test_helm_install_with_the_pod_route_gates_and_places_a_labelled_jobs_pod)."""

from __future__ import annotations

import base64
import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import podroute_harness as harness
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
WEBHOOK = ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "horus-pods")
WEBHOOK_SECRET = ("v1", "Secret", "horus-system", "horus-webhook-tls")
CERTIFICATE = ("cert-manager.io/v1", "Certificate", "horus-system", "horus-webhook")
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nthe platform's CA\n").decode()
# The pod route with the platform team's certificate: no key is generated, so the output is the same
# every time.
POD_ROUTE = (
    "podRoute.enabled=true",
    "podRoute.certificate.existingSecret=horus-webhook-tls",
    f"podRoute.certificate.caBundle={CA_BUNDLE}",
)


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
    # horus-reservation is fixed: the operator looks for the reserve binding's reservation pods there
    assert namespaced == {"platform-horus", "platform-horus-agent", "horus-reservation"}
    # Everything that names a namespace follows: RBAC subjects, the admission policy's parameters.
    subjects = [s for key, o in objects.items() if key[1].endswith("Binding") for s in o.get("subjects", [])]
    assert {s["namespace"] for s in subjects} == {
        "platform-horus",
        "platform-horus-agent",
        "horus-reservation",
    }
    assert "horus-system" not in json.dumps(list(objects.values()))
    binding = objects[
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "", "horus-dljob-tenancy")
    ]
    assert binding["spec"]["paramRef"]["namespace"] == "platform-horus"
    tenancy = objects[("v1", "ConfigMap", "platform-horus", "horus-tenancy")]
    assert tenancy["data"]["dljobOnlyTenants"] == "true"


def _webhooks(objects: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    return objects[WEBHOOK]["webhooks"]


def test_pod_route_values_render_exactly_the_kustomize_overlay(helm_state: Path) -> None:
    kubectl = devcluster.kubectl_path()
    kustomized = subprocess.run(
        [str(kubectl), "kustomize", str(REPO / "manifests-pod-route")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    expected = by_key(yaml.safe_load_all(kustomized))
    rendered = render(*POD_ROUTE, state=helm_state)

    # The one difference, the certificate: the overlay leaves the caBundle for the platform team to add.
    for webhook in _webhooks(rendered):
        assert webhook["clientConfig"].pop("caBundle") == CA_BUNDLE
    assert sorted(rendered) == sorted(expected)
    for key, obj in expected.items():
        assert rendered[key] == obj, key


def _openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


def test_pod_route_certificate_choices(helm_state: Path, tmp_path: Path) -> None:
    def secret_volume(objects: dict[Any, dict[str, Any]], operator: Any = OPERATOR) -> str:
        volumes = objects[operator]["spec"]["template"]["spec"]["volumes"]
        (secret,) = [v["secret"]["secretName"] for v in volumes if v["name"] == "webhook-tls"]
        return secret

    # By default the chart makes it: a CA, in the caBundle, and a certificate it signs for the Service.
    made = render("podRoute.enabled=true", "namespaces.operator.name=platform-horus", state=helm_state)
    data = made[("v1", "Secret", "platform-horus", "horus-webhook-tls")]["data"]
    assert {w["clientConfig"]["caBundle"] for w in _webhooks(made)} == {data["ca.crt"]}
    made_operator = ("apps/v1", "Deployment", "platform-horus", "horus-operator")
    assert secret_volume(made, made_operator) == "horus-webhook-tls"
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(data[name]))
    ca, cert, key = (str(tmp_path / name) for name in ("ca.crt", "tls.crt", "tls.key"))
    assert _openssl("verify", "-CAfile", ca, cert).strip() == f"{cert}: OK"
    names = _openssl("x509", "-noout", "-ext", "subjectAltName", "-in", cert)
    assert "DNS:horus-webhook.platform-horus.svc, DNS:horus-webhook.platform-horus.svc.cluster.local" in names
    assert _openssl("x509", "-noout", "-pubkey", "-in", cert) == _openssl("pkey", "-pubout", "-in", key)
    assert _env(made[made_operator])["HORUS_WEBHOOK_HOST"] == "horus-webhook.platform-horus.svc"
    service = made[WEBHOOK]["webhooks"][0]["clientConfig"]["service"]
    assert service["namespace"] == "platform-horus"

    # cert-manager: its Certificate writes the same Secret; its CA injector fills the caBundle.
    managed = render(
        "podRoute.enabled=true",
        "podRoute.certificate.certManager.enabled=true",
        "podRoute.certificate.certManager.issuer.name=platform-ca",
        "podRoute.certificate.certManager.issuer.kind=ClusterIssuer",
        state=helm_state,
    )
    certificate = managed[CERTIFICATE]["spec"]
    assert certificate["secretName"] == secret_volume(managed) == "horus-webhook-tls"
    assert certificate["dnsNames"] == [
        "horus-webhook.horus-system.svc",
        "horus-webhook.horus-system.svc.cluster.local",
    ]
    assert certificate["issuerRef"] == {
        "name": "platform-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    annotations = managed[WEBHOOK]["metadata"]["annotations"]
    assert annotations == {"cert-manager.io/inject-ca-from": "horus-system/horus-webhook"}
    assert not [w for w in _webhooks(managed) if "caBundle" in w["clientConfig"]]
    assert WEBHOOK_SECRET not in managed

    # The platform team's Secret, by its name.
    theirs = render(
        "podRoute.enabled=true",
        "podRoute.certificate.existingSecret=platform-webhook-tls",
        f"podRoute.certificate.caBundle={CA_BUNDLE}",
        state=helm_state,
    )
    assert secret_volume(theirs) == "platform-webhook-tls"
    assert [k for k in theirs if k[1] in ("Secret", "Certificate")] == []


def test_pod_route_webhook_values(helm_state: Path) -> None:
    objects = render(
        *POD_ROUTE,
        "podRoute.failurePolicy=Ignore",
        "podRoute.timeoutSeconds=5",
        "podRoute.namespaceSelector.matchLabels.team=ml",
        "namespaces.agent.name=platform-horus-agent",
        state=helm_state,
    )
    by_pod_label, by_namespace = _webhooks(objects)
    for webhook in (by_pod_label, by_namespace):
        assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 5)
        # Horus's own namespaces are never sent, whatever they are called.
        assert webhook["namespaceSelector"]["matchExpressions"][-1] == {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "horus-system", "platform-horus-agent"],
        }
    assert by_namespace["namespaceSelector"]["matchLabels"] == {"team": "ml"}
    assert by_namespace["namespaceSelector"]["matchExpressions"][0]["key"] == "horus.dev/managed"
    assert "matchLabels" not in by_pod_label["namespaceSelector"]


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        (["podRoute.certificate.certManager.enabled=true"], "podRoute.certificate.certManager.issuer.name"),
        (["podRoute.certificate.existingSecret=platform-tls"], "podRoute.certificate.caBundle"),
        (
            [
                "podRoute.certificate.certManager.enabled=true",
                "podRoute.certificate.existingSecret=platform-tls",
            ],
            "certManager.enabled or existingSecret, not both",
        ),
        ([f"podRoute.certificate.caBundle={CA_BUNDLE}"], "set both, or neither"),
    ],
)
def test_the_pod_route_certificate_is_one_choice(helm_state: Path, values: list[str], complaint: str) -> None:
    sets = [arg for value in ["podRoute.enabled=true", *values] for arg in ("--set", value)]
    refused = run_helm("template", RELEASE, str(CHART), *sets, state=helm_state, check=False)
    assert refused.returncode != 0 and complaint in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("operator.binding=pci", "value must be one of 'env', 'dra'"),
        ("operater.replicas=1", "additional properties 'operater' not allowed"),
        ("namespaces.agent.podSecurity.enforce=strict", "value must be one of"),
        ("operator.env.HORUS_POLICY=binpack", "HORUS_POLICY"),  # operator.policy says it
        ("operator.env.HORUS_WEBHOOK_PORT=8443", "HORUS_WEBHOOK_PORT"),  # podRoute sets it
        ("podRoute.failurePolicy=Retry", "value must be one of 'Fail', 'Ignore'"),
        ("podRoute.timeoutSeconds=60", "maximum"),
        ("podRoute.namespaceSelector.matchExpressions[0].operator=Equals", "value must be one of"),
        ("podRoute.certificate.caBundle=-----BEGIN CERTIFICATE-----", "does not match pattern"),
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
        # validation and Pod Security admission; the ServiceMonitor's and cert-manager's Certificate's CRDs
        # are not installed here.
        everything = run_helm(
            "template",
            RELEASE,
            str(CHART),
            "-f",
            str(CHART / "ci" / "everything-on-values.yaml"),
            state=helm_state,
        ).stdout
        objects = [
            o
            for o in yaml.safe_load_all(everything)
            if o and o["kind"] not in ("ServiceMonitor", "Certificate")
        ]
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


def test_helm_install_with_the_pod_route_gates_and_places_a_labelled_jobs_pod(
    cluster: devcluster.LocalCluster, namespace: str, helm_state: Path, tmp_path: Path
) -> None:
    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return run_helm(*args, state=helm_state, kubeconfig=cluster.kubeconfig)

    def installed() -> tuple[dict[str, Any], dict[str, Any]]:
        webhooks = get_json(cluster, "default", "mutatingwebhookconfiguration", "horus-pods")
        return webhooks, get_json(cluster, "horus-system", "secret", "horus-webhook-tls")

    # The chart makes the certificate (the default); --take-ownership: as in the test above.
    helm(
        "install", RELEASE, str(CHART), "-n", namespace, "--take-ownership", "--set", "podRoute.enabled=true"
    )
    try:
        cluster.kubectl(
            "rollout", "status", "deployment/horus-operator", "-n", "horus-system", "--timeout=90s"
        )
        webhooks, secret = installed()
        ca = secret["data"]["ca.crt"]
        assert [w["clientConfig"]["caBundle"] for w in webhooks["webhooks"]] == [ca, ca]

        # An upgrade finds the Secret (lookup) and keeps it: the caBundle the API server trusts is still
        # the CA of the certificate the replicas serve.
        helm(
            "upgrade",
            RELEASE,
            str(CHART),
            "-n",
            namespace,
            "--set",
            "podRoute.enabled=true",
            "--set",
            "podRoute.timeoutSeconds=5",
        )
        webhooks, upgraded = installed()
        assert upgraded["data"] == secret["data"]
        assert [(w["clientConfig"]["caBundle"], w["timeoutSeconds"]) for w in webhooks["webhooks"]] == [
            (ca, 5),
            (ca, 5),
        ]

        # kwok runs no containers, so no pod serves the webhook behind the chart's Service (and the API
        # server could not reach a Service's address here anyway: no kube-proxy). The operator runs beside
        # the chart, as its ServiceAccount, serving the webhook on a loopback port with a certificate for
        # 127.0.0.1; the installed configuration, selectors and failurePolicy as the chart made them, is
        # pointed at it (what podroute_harness.configuration() does with manifests-pod-route/webhook.yaml).
        settings, local = harness.webhook_settings(tmp_path / "tls")
        for webhook, calling_local in zip(webhooks["webhooks"], local["webhooks"], strict=True):
            webhook["clientConfig"] = calling_local["clientConfig"]
        cluster.kubectl("replace", "-f", "-", input=json.dumps(webhooks))
        deployment = get_json(cluster, "horus-system", "deployment", "horus-operator")
        # The Deployment's settings, its HORUS_WEBHOOK_* (port 9443, the Secret's files) replaced by the
        # local ones.
        operator = operator_as_its_service_account(
            cluster, tmp_path, "helm-pod-route", settings={**_env(deployment), **settings}
        )
        operator.start()
        try:
            wait_for(lambda: harness.webhook_ready(cluster, namespace), timeout=60, what="the pod webhook")
            harness.create(cluster, namespace, harness.job("train", completions=1))
            harness.create(cluster, namespace, harness.pod("plain"))

            def bound() -> dict[str, Any] | None:
                found = harness.pods(cluster, namespace, "-l", "job-name=train")
                ok = len(found) == 1 and harness.released(found[0]) and found[0]["spec"].get("nodeName")
                return found[0] if ok else None

            pod = wait_for(bound, timeout=60, what="the Job's pod released and bound")
        finally:
            operator.stop()
        assert "forbidden" not in operator.log_text().lower(), operator.log_tail()
        # The webhook admitted it (the device variable read from Horus's annotation), Horus released it
        # to the node it chose, and kube-scheduler bound it there.
        (env,) = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
        assert (
            env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['horus.dev/visible-devices']"
        )
        assert pod["spec"]["nodeName"] == pod["metadata"]["annotations"]["horus.dev/node"]
        plain = get_json(cluster, namespace, "pod", "plain")
        assert harness.gates(plain) == [] and "horus.dev/node" not in plain["metadata"].get("annotations", {})
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
    left = ("get", "namespace", "horus-system", "horus-agent", "--ignore-not-found", "-o", "name")
    wait_for(
        lambda: not cluster.kubectl(*left).stdout.strip(), timeout=90, what="the chart's namespaces gone"
    )
    gone = cluster.kubectl(
        "get", "mutatingwebhookconfiguration", "horus-pods", "--ignore-not-found", "-o", "name"
    )
    assert not gone.stdout.strip()  # no webhook left to refuse the next tests' labelled pods
