"""las preemption on the real control plane: with every GPU taken, a new job waits; once the running job
of most attained GPU-service has run past its protection, the operator records the preemption in that
job's status, deletes its pod, and starts the new job on the GPUs it left; the preempted job waits in the
queue, its attained service kept in its status.

An hour of GPU-service would take an hour to attain here, so the test writes it into one job's status,
where the operator keeps it (`status.attainedGpuSeconds`, docs/operator.md, "Queue order"): the job
stands for one that ran that long before a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dljob_harness import apply, dljobs, get_json, horus_pods, only_nodes, wait_phases

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import FAST_SETTINGS, REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

# The session's nodes: two with 4 V100s, one with 8 A100s (conftest.E2E_POOLS): three jobs fill them.
# Nodes other tests added are cordoned for the test.
SESSION_NODES = ["gpu-node-0", "gpu-node-1", "a100-node-0"]
FILLERS = {"long-run": 4, "short-run": 4, "wide": 8}
# A (re)started job runs 4x (its grace period + restart cost 0) before it may be preempted: 8 s here.
GRACE_S = 2
PROTECTED_S = 4 * GRACE_S


@pytest.fixture
def operator(cluster: devcluster.LocalCluster, tmp_path: Path) -> Iterator[OperatorProcess]:
    """`horus run --queue-order las` with the exclusive policy (the new job cannot share a GPU)."""
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    settings = {
        **FAST_SETTINGS,
        "HORUS_POLICY": "exclusive",
        "HORUS_QUEUE_ORDER": "las",
        "HORUS_MIGRATION_RESTART_COST_SECONDS": "0",
        "HORUS_PREEMPTION_MIN_RUN_SECONDS": "0",
    }
    process = OperatorProcess(
        cluster, tmp_path / "operator.log", identity="e2e-las-operator", settings=settings
    )
    process.start()
    yield process
    process.stop()


def status(cluster: devcluster.LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    return dljobs(cluster, namespace).get(name, {}).get("status") or {}


def job(name: str, gpus: int) -> dict[str, Any]:
    builder = DLJobBuilder(name).model(architecture="resnet50").batch_size(32)
    return builder.spec(gpus=gpus, migration={"gracePeriodSeconds": GRACE_S}).obj()


def test_the_job_of_most_attained_service_is_preempted_for_a_new_one(
    cluster: devcluster.LocalCluster, namespace: str, operator: OperatorProcess
) -> None:
    with only_nodes(cluster, SESSION_NODES):
        try:
            _preempted_for_a_new_one(cluster, namespace)
        finally:
            _free_the_session_nodes(cluster, namespace)


def _free_the_session_nodes(cluster: devcluster.LocalCluster, namespace: str) -> None:
    """This test fills every GPU of the session's nodes: its pods are removed at once, not left to the
    namespace's deletion and their grace period, during which kube-scheduler still counts their GPUs and
    the next test's pods stay Pending."""
    cluster.kubectl("delete", "dljobs", "--all", "-n", namespace, "--wait=false")
    cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", check=False)
    wait_for(lambda: not horus_pods(cluster, namespace), timeout=60, what="the test's pods gone")


def _preempted_for_a_new_one(cluster: devcluster.LocalCluster, namespace: str) -> None:
    apply(cluster, namespace, *(job(name, gpus) for name, gpus in FILLERS.items()))
    wait_phases(cluster, namespace, list(FILLERS), {"Running"}, timeout=120)
    attained = json.dumps({"status": {"attainedGpuSeconds": 100000}})  # level 2: past ten GPU-hours
    cluster.kubectl(
        "patch", "dljob", "-n", namespace, "long-run", "--subresource=status", "--type=merge", "-p", attained
    )
    node = status(cluster, namespace, "long-run")["node"]

    apply(cluster, namespace, job("new", 4))
    wait_for(
        lambda: status(cluster, namespace, "new").get("phase") == "Running",
        timeout=PROTECTED_S + 120,
        what="the new job running after a preemption",
    )

    new, preempted = status(cluster, namespace, "new"), status(cluster, namespace, "long-run")
    assert new["node"] == node, "the new job starts on the GPUs the preempted one left"
    (entry,) = preempted["preemptions"]
    assert entry["for"] == f"{namespace}/new" and entry["attempt"] == 0
    assert "least attained service" in entry["reason"]
    assert preempted["phase"] == "Queued"
    assert preempted["attainedGpuSeconds"] >= 100000 + 4 * PROTECTED_S  # its last run counted
    assert [
        p["metadata"]["name"] for p in horus_pods(cluster, namespace) if "long-run" in p["metadata"]["name"]
    ] == []
    for name in ("short-run", "wide"):
        assert "preemptions" not in status(cluster, namespace, name), f"{name} is at the new job's level"
    found = get_json(cluster, namespace, "events", "--field-selector", "involvedObject.name=long-run")
    assert "Preempted" in [e["reason"] for e in found["items"]]
