"""`horus run` as a subprocess against a local control plane, for e2e tests and benchmarks.

The operator runs exactly as users run it; callers start, kill (SIGKILL, like a crashed or evicted
pod) and restart it, and wait for it to hold the operator Lease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar, TypeVar

from horus_operator import devcluster

REPO = Path(__file__).resolve().parents[2]
LEASE_NAME = "horus-operator"
RESYNC_LINE = "resynced: "  # operator/loop.py logs it when a resync after taking the Lease is done
# Tests want a restarted operator to catch up, give up on unplaceable jobs and leave dead nodes quickly.
FAST_SETTINGS = {
    "HORUS_RESYNC_SECONDS": "2",
    "HORUS_UNSCHEDULABLE_GRACE_SECONDS": "10",
    "HORUS_NOT_READY_GRACE_SECONDS": "10",
}
T = TypeVar("T")


def wait_for(condition: Callable[[], T], *, timeout: float, what: str, every: float = 0.5) -> T:
    """Poll `condition` until it returns something true; AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def lease_holder(cluster: devcluster.LocalCluster, namespace: str = "default") -> str:
    """The identity holding the operator Lease, "" when there is none (yet)."""
    found = cluster.kubectl(
        "get", "lease", LEASE_NAME, "-n", namespace, "-o", "jsonpath={.spec.holderIdentity}", check=False
    )
    return found.stdout.strip() if found.returncode == 0 else ""


class OperatorProcess:
    """`horus run` in the background; the same identity across restarts (like a restarted container),
    so a restarted operator takes its Lease back at once."""

    # Every one started in this process: a failing e2e test's report carries the logs of those that wrote
    # during the test (tests/e2e/conftest.py).
    started: ClassVar[set[OperatorProcess]] = set()

    def __init__(
        self,
        cluster: devcluster.LocalCluster,
        log_path: Path,
        *,
        identity: str = "e2e-operator",
        lease_namespace: str = "default",
        liveness: str = "",
        settings: Mapping[str, str] = FAST_SETTINGS,
        nice: int = 0,
        kubeconfig: Path | None = None,
        metrics_port: int = 0,
    ) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.identity = identity
        self.lease_namespace = lease_namespace
        self.liveness = liveness  # "" serves no health endpoint
        self.settings = dict(settings)  # HORUS_* environment settings (`horus run --help` lists them)
        self.nice = nice  # one small machine: the operator competes with the API server for CPU
        self.kubeconfig = kubeconfig or cluster.kubeconfig  # whose rights it runs with (default: admin)
        self.metrics_port = metrics_port  # 0 serves no /metrics (replicas on one host would share a port)
        self.process: subprocess.Popen[bytes] | None = None
        self._resyncs_at_start = 0

    def start(self, *, wait_for_lease: bool = True) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HORUS_LEASE_NAMESPACE": self.lease_namespace,
            "HORUS_IDENTITY": self.identity,
            "HORUS_METRICS_PORT": str(self.metrics_port),
            **self.settings,
        }
        argv = [
            sys.executable,
            "-c",
            "from horus_operator.cli import main; main()",
            "run",
            "--all-namespaces",
        ]
        argv += ["--liveness", self.liveness, "--log-format", "plain"]
        if self.nice:
            argv = ["nice", "-n", str(self.nice), *argv]
        self._resyncs_at_start = self.log_text().count(RESYNC_LINE)  # the log is kept across restarts
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        OperatorProcess.started.add(self)
        if wait_for_lease:
            self.wait_leading()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_leading(self, timeout: float = 90) -> None:
        # Polled often: `_leading` reads the log until the operator says it resynced, which costs no
        # kubectl process competing with the starting operator for the CPU.
        what = f"{self.identity} to take the operator Lease"
        wait_for(self._leading, timeout=timeout, what=what, every=0.1)

    def kill(self) -> None:
        """SIGKILL: no clean-up, like a crashed or evicted operator."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process)
            self.process = None

    def _leading(self) -> bool:
        if not self.running:
            raise AssertionError(f"operator {self.identity} exited; log:\n{self.log_tail()}")
        # Leading and through its first resync: only then does the operator place anything, so a test
        # that expects placements (or times them) starts counting from a ready operator. The log first:
        # reading it is cheap, and it shows the resync only once the operator has taken the Lease.
        if self.log_text().count(RESYNC_LINE) <= self._resyncs_at_start:
            return False
        return lease_holder(self.cluster, self.lease_namespace) == self.identity

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
