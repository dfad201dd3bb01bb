"""`horus run` against a cluster with the CRDs but not the Lease's namespace (issue 14: a developer running
the operator locally): one log line names the namespace and the ways out, the health endpoint says why
this replica does not lead, and once the namespace exists the operator says so once and leads.

The real control plane answers the Lease create with its own 404; `horus run` is a subprocess."""

from __future__ import annotations

import json
import secrets
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dljob_harness import free_port

from horus_operator import devcluster
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

RETRIES_SEEN = 4  # lease steps run every 3 s: the line must stay single over this many retries


def _health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:  # 200: not leading is not dead
        return json.loads(response.read())["scheduling"]


@pytest.fixture
def operator(cluster: devcluster.LocalCluster, tmp_path: Path) -> Iterator[OperatorProcess]:
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    missing = f"horus-lease-{secrets.token_hex(3)}"
    process = OperatorProcess(
        cluster,
        tmp_path / "operator.log",
        identity="e2e-no-namespace",
        lease_namespace=missing,
        liveness=f"http://127.0.0.1:{free_port()}/healthz",
    )
    process.start(wait_for_lease=False)
    yield process
    process.stop()
    cluster.kubectl("delete", "namespace", missing, "--wait=false", check=False)


def test_a_missing_lease_namespace_is_said_once_and_served_by_the_health_endpoint(
    cluster: devcluster.LocalCluster, operator: OperatorProcess
) -> None:
    missing = operator.lease_namespace
    said = f"namespace {missing} does not exist"
    wait_for(lambda: said in operator.log_text(), timeout=90, what="the missing-namespace line")
    time.sleep(RETRIES_SEEN * 3)
    log = operator.log_text()
    (line,) = [line for line in log.splitlines() if said in line]
    assert "kubectl apply -k manifests/" in line and "--lease-namespace" in line, line
    assert "HTTP response" not in log, operator.log_tail()  # no raw dump of the API server's answer

    health = _health(operator.liveness)
    assert health["leading"] is False
    assert said in health["notLeading"], health

    cluster.kubectl("create", "namespace", missing)
    operator.wait_leading(timeout=60)
    log = operator.log_text()
    assert log.count(f"namespace {missing} exists now") == 1, operator.log_tail()
    assert log.count(said) == 1, operator.log_tail()
