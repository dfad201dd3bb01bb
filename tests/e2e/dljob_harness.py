"""Helpers for the DLJob e2e tests: kubectl shorthands, and the operator as a subprocess (`horus run`,
from `horus_operator.testing.operator_process`, which the benchmarks use too).

The operator runs exactly as users run it, against the session's real control plane; tests act through
kubectl like a user would.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import FAST_SETTINGS, OperatorProcess, wait_for


@contextlib.contextmanager
def only_nodes(cluster: devcluster.LocalCluster, keep: list[str]) -> Iterator[None]:
    """Cordon every other node for the duration (the session's nodes are shared, so always uncordon)."""
    names = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    others = [n for n in names if n not in keep]
    if not others:  # kubectl cordon refuses an empty list
        yield
        return
    cluster.kubectl("cordon", *others)
    try:
        yield
    finally:
        cluster.kubectl("uncordon", *others, check=False)


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
    seen: dict[str, dict[str, Any]] = {}

    def reached() -> dict[str, dict[str, Any]] | None:
        jobs = dljobs(cluster, namespace)
        seen.update(jobs)
        done = all((jobs.get(n, {}).get("status") or {}).get("phase") in phases for n in names)
        return jobs if done else None

    try:
        return wait_for(reached, timeout=timeout, what=f"{names} to reach {phases}")
    except AssertionError as timed_out:  # say where they stood: a flake is then readable from CI's log
        statuses = {n: (seen.get(n, {}).get("status") or {}) for n in names}
        last = {n: (status.get("phase"), status.get("message")) for n, status in statuses.items()}
        # The pods as the API server holds them: a job stuck at "waiting to start" beside a Running pod
        # is the operator's lag, beside a Pending one kwok's or kube-scheduler's.
        pods = {
            pod["metadata"]["name"]: (pod["status"].get("phase"), pod["spec"].get("nodeName"))
            for pod in horus_pods(cluster, namespace)
        }
        raise AssertionError(f"{timed_out}; last seen (phase, message): {last}; pods: {pods}") from None


def closed_field_is_defaulted_and_checked(
    cluster: devcluster.LocalCluster,
    namespace: str,
    field: str,
    *,
    default: str,
    bad: str,
    listed: tuple[str, ...],
) -> None:
    """`spec.<field>`, a closed set of values: a server-side dry run of a DLJob without it gets `default`;
    one with `bad` is refused naming the field and the value; `kubectl explain` lists `listed`; nothing is
    created."""

    def dry_run(body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-",
            input=json.dumps(body), check=False,
        )  # fmt: skip

    defaulted = dry_run(DLJobBuilder("plain").runs_for("3s").obj())
    assert defaulted.returncode == 0, defaulted.stderr
    assert json.loads(defaulted.stdout)["spec"][field] == default
    refused = dry_run(DLJobBuilder("refused").runs_for("3s").spec(**{field: bad}).obj())
    assert refused.returncode != 0
    assert f"spec.{field}" in refused.stderr and f'"{bad}"' in refused.stderr, refused.stderr
    explained = cluster.kubectl("explain", f"dljob.spec.{field}").stdout
    assert all(value in explained for value in listed), explained
    assert dljobs(cluster, namespace) == {}


def service_account_kubeconfig(
    cluster: devcluster.LocalCluster, account: str, namespace: str, path: Path
) -> Path:
    """A kubeconfig at `path` that acts as ServiceAccount `namespace/account` (a token, as its pod would
    get), so a process run with it has exactly the account's RBAC."""
    token = cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"] = [{"name": account, "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = account
    path.write_text(yaml.safe_dump(config))
    return path


def operator_as_its_service_account(
    cluster: devcluster.LocalCluster,
    tmp_path: Path,
    identity: str,
    settings: Mapping[str, str] = FAST_SETTINGS,
) -> OperatorProcess:
    """`horus run` as the installed operator's pods would run it: the horus-operator ServiceAccount's token
    (exactly its RBAC), leading in horus-system."""
    as_operator = service_account_kubeconfig(
        cluster, "horus-operator", "horus-system", tmp_path / "operator.config"
    )
    return OperatorProcess(
        cluster,
        tmp_path / "operator.log",
        identity=identity,
        lease_namespace="horus-system",
        kubeconfig=as_operator,
        settings=settings,
    )


def free_port() -> int:
    """A port nothing listens on now, for a server the test starts next."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def predicted_pairs() -> tuple[list[tuple[str, int]], tuple[tuple[str, int], tuple[str, int], float]]:
    """A pair the predictor says shares well, and one it says slows each other down more than a bound
    set between 1 and their predicted slowdowns. Chosen with the operator's own predictor, so the test
    checks that the operator acts on its predictions, not which models the predictor likes."""
    from horus_operator.prediction.api import Workload
    from horus_operator.prediction.predictor import load_predictor

    predictor = load_predictor()
    candidates = [
        ("lstm-lm", 20),
        ("resnet18", 32),
        ("mobilenet_v2", 32),
        ("resnet50", 32),
        ("vgg16", 32),
        ("transformer", 32),
    ]
    scored = []
    for i, a in enumerate(candidates):
        for b in candidates[i:]:
            slowdowns = predictor.slowdowns("v100", [Workload(*a), Workload(*b)])
            if slowdowns is not None:
                scored.append((max(slowdowns), min(slowdowns), a, b))
    best = min(scored)
    assert 1 / best[0] + 1 / best[1] - 1 > 0.2, f"no compatible pair among {candidates}: {scored}"
    worst = max(scored, key=lambda s: s[1])
    bound = 1.0 + (worst[1] - 1.0) / 3  # below both predicted slowdowns by a margin
    assert bound > 1.0
    return [best[2], best[3]], (worst[2], worst[3], round(bound, 3))
