"""Helpers for the DLJob e2e tests: the operator as a subprocess (`horus run`), and kubectl shorthands.

The operator runs exactly as users run it, against the session's real control plane; tests act through
kubectl like a user would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from horus_operator import devcluster

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class OperatorProcess:
    """`horus run` in the background; the same identity across restarts (like a restarted container),
    so a restarted operator takes its Lease back at once."""

    def __init__(
        self,
        cluster: devcluster.LocalCluster,
        log_path: Path,
        *,
        identity: str = "e2e-operator",
        lease_namespace: str = "default",
        liveness: str = "",
    ) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.identity = identity
        self.lease_namespace = lease_namespace
        self.liveness = liveness  # "" serves no health endpoint
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_for_lease: bool = True) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "HORUS_LEASE_NAMESPACE": self.lease_namespace,
            "HORUS_IDENTITY": self.identity,
            "HORUS_RESYNC_SECONDS": "2",
            "HORUS_UNSCHEDULABLE_GRACE_SECONDS": "10",
        }
        argv = [
            sys.executable,
            "-c",
            "from horus_operator.cli import main; main()",
            "run",
            "--all-namespaces",
        ]
        argv += ["--liveness", self.liveness, "--log-format", "plain"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        if wait_for_lease:
            self.wait_leading()

    def wait_leading(self, timeout: float = 90) -> None:
        wait_for(self._leading, timeout=timeout, what="the operator to take its Lease")

    def kill(self) -> None:
        """SIGKILL: no clean-up, like a crashed or evicted operator."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
            self.process = None

    def _leading(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"operator exited; log:\n{self.log_tail()}")
        lease = self.cluster.kubectl(
            "get",
            "lease",
            "horus-operator",
            "-n",
            self.lease_namespace,
            "-o",
            "jsonpath={.spec.holderIdentity}",
            check=False,
        )
        # The loop's first resync follows the lease within a moment.
        return lease.returncode == 0 and lease.stdout.strip() == self.identity

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def wait_for(condition: Callable[[], T], *, timeout: float, what: str, every: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


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
