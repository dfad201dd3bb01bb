"""Helpers for the DLJob e2e tests: kubectl shorthands, and the operator as a subprocess (`horus run`,
from `horus_operator.testing.operator_process`, which the benchmarks use too).

The operator runs exactly as users run it, against the session's real control plane; tests act through
kubectl like a user would.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from horus_operator import devcluster
from horus_operator.testing.operator_process import wait_for


def apply(cluster: devcluster.LocalCluster, namespace: str, *manifests: dict[str, Any]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(manifests)}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(items))


def get_json(cluster: devcluster.LocalCluster, namespace: str, *what: str) -> dict[str, Any]:
    return json.loads(cluster.kubectl("get", "-n", namespace, *what, "-o", "json").stdout)


def dljobs(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {item["metadata"]["name"]: item for item in get_json(cluster, namespace, "dljobs")["items"]}


def horus_pods(cluster: devcluster.LocalCluster, namespace: str) -> list[dict[str, Any]]:
    return get_json(cluster, namespace, "pods", "-l", "horus.dev/dljob")["items"]


def condition(job: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (job.get("status") or {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else {}


def wait_phases(
    cluster: devcluster.LocalCluster, namespace: str, names: list[str], phases: set[str], *, timeout: float
) -> dict[str, dict[str, Any]]:
    def reached() -> dict[str, dict[str, Any]] | None:
        jobs = dljobs(cluster, namespace)
        done = all((jobs.get(n, {}).get("status") or {}).get("phase") in phases for n in names)
        return jobs if done else None

    return wait_for(reached, timeout=timeout, what=f"{names} to reach {phases}")


def free_port() -> int:
    """A port nothing listens on now, for a server the test starts next."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
