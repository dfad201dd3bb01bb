"""Helpers for the e2e tests of the pod route (test_pod_route.py, test_kueue.py): `horus run
--webhook-port` serving the pod webhook over HTTPS (a certificate from `devcluster.webhook`), registered
by the MutatingWebhookConfiguration of manifests-pod-route/webhook.yaml with its selectors and
failurePolicy as shipped (only the clientConfig points at the local process); the Job and pod shapes
those tests create, and what they read back.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from dljob_harness import free_port

from horus_operator import devcluster
from horus_operator.devcluster.webhook import serving_certificate
from horus_operator.testing.operator_process import FAST_SETTINGS, REPO, OperatorProcess

WEBHOOK_MANIFEST = REPO / "manifests-pod-route" / "webhook.yaml"
GATE = "horus.dev/placement"
MODEL = {"horus.dev/model": "resnet50", "horus.dev/batch-size": "32", "horus.dev/max-slowdown": "3"}


def configuration(url: str, ca_bundle: bytes) -> dict[str, Any]:
    """The shipped configuration, calling the local operator instead of the in-cluster Service."""
    config = yaml.safe_load(WEBHOOK_MANIFEST.read_text())
    for webhook in config["webhooks"]:
        path = webhook["clientConfig"]["service"]["path"]
        webhook["clientConfig"] = {"url": url + path, "caBundle": base64.b64encode(ca_bundle).decode()}
    return config


def webhook_settings(directory: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The operator's settings to serve the webhook on a free loopback port with a fresh certificate in
    `directory`, and the webhook configuration that calls it there."""
    cert, key = serving_certificate(directory)
    port = free_port()
    settings = {
        **FAST_SETTINGS,
        "HORUS_WEBHOOK_PORT": str(port),
        "HORUS_WEBHOOK_ADDR": "127.0.0.1",
        "HORUS_WEBHOOK_HOST": "127.0.0.1",
        "HORUS_WEBHOOK_CERT": str(cert),
        "HORUS_WEBHOOK_KEY": str(key),
    }
    return settings, configuration(f"https://127.0.0.1:{port}", cert.read_bytes())


@contextlib.contextmanager
def serving_webhook(
    cluster: devcluster.LocalCluster, directory: Path, identity: str, extra: Mapping[str, str] | None = None
) -> Iterator[OperatorProcess]:
    """The operator serving the pod webhook, registered for the duration (logs and TLS in `directory`;
    `extra`: more of its settings)."""
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    settings, config = webhook_settings(directory / "tls")
    operator = OperatorProcess(
        cluster, directory / "operator.log", identity=identity, settings={**settings, **(extra or {})}
    )
    cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "horus-pods", check=False)


def pod(
    name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "trainer:1"}]},
    }


def job(name: str, *, completions: int, duration: str = "30s") -> dict[str, Any]:
    """A batch/v1 Job whose pods ask Horus for a GPU each and end `duration` after they run (kwok)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": {"horus.dev/managed": "true"},
                    "annotations": {**MODEL, "pod-complete.stage.kwok.x-k8s.io/delay": duration},
                },
                "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "trainer:1"}]},
            },
        },
    }


def create(
    cluster: devcluster.LocalCluster, namespace: str, obj: dict, *, check: bool = True, dry: bool = False
):
    args = ["create", "-n", namespace, "-f", "-", "-o", "json"]
    if dry:
        args.append("--dry-run=server")
    return cluster.kubectl(*args, input=json.dumps(obj), check=check)


def pods(cluster: devcluster.LocalCluster, namespace: str, *selector: str) -> list[dict[str, Any]]:
    listed = cluster.kubectl("get", "pods", "-n", namespace, *selector, "-o", "json").stdout
    return json.loads(listed)["items"]


def gates(pod: dict[str, Any]) -> list[str]:
    return [gate["name"] for gate in pod["spec"].get("schedulingGates") or []]


def released(pod: dict[str, Any]) -> bool:
    return "horus.dev/node" in (pod["metadata"].get("annotations") or {}) and GATE not in gates(pod)


def webhook_ready(cluster: devcluster.LocalCluster, namespace: str) -> bool:
    probe = create(
        cluster,
        namespace,
        pod("probe", labels={"horus.dev/managed": "true"}, annotations=MODEL),
        check=False,
        dry=True,
    )
    return probe.returncode == 0 and GATE in gates(json.loads(probe.stdout))
