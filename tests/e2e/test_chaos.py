"""Faults during a burst, on a control plane of this module's own (its API server and etcd get killed,
its nodes deleted or failed): no job lost, no job with two live pods, no GPU's memory oversubscribed.
`bench/chaos.py` runs the same scenarios at 1,000 jobs and reports failover and drain times."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from horus_operator import devcluster
from horus_operator.testing import chaos
from horus_operator.testing.operator_process import REPO

pytestmark = pytest.mark.e2e

JOBS = 96  # over a 24 s fault window, three per GPU: a queue waits through every fault
# Fewer GPUs than jobs, so a queue waits through the faults (and failover can be measured).
POOL = devcluster.GpuNodePool(count=8, gpus_per_node=4, name_prefix="chaos-node")
SCALED_DOWN = {
    "operator-kills": chaos.Scenario("operator-kills", operator_kills=3),
    "control-plane-restarts": chaos.Scenario("control-plane-restarts", apiserver_restarts=1, etcd_restarts=1),
    "two-replicas": chaos.Scenario("two-replicas", replicas=2, leader_kills=2),
}


@pytest.fixture(scope="module")
def chaos_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devcluster.LocalCluster]:
    local = devcluster.LocalCluster(tmp_path_factory.mktemp("chaos-cluster"), pools=(POOL,))
    local.up()
    try:
        local.kubectl("apply", "-k", str(REPO / "crds"))
        local.wait_established("dljobs.horus.dev")
        yield local
    finally:
        local.down()


@pytest.mark.parametrize("name", list(SCALED_DOWN))
def test_a_burst_survives_the_faults(
    chaos_cluster: devcluster.LocalCluster, name: str, tmp_path: Path
) -> None:
    run = chaos.ChaosRun(chaos_cluster, f"chaos-{name}", tmp_path, seed=7)
    # Jobs of 8 s over a 24 s window: the queue still waits through every fault, and the three runs
    # drain within the e2e suite's 20 minutes (bench/chaos.py runs the full scale).
    outcome = run.run(SCALED_DOWN[name], JOBS, duration="8s", fault_window_s=24.0, deadline_s=600.0)
    assert len(outcome.faults) == sum(
        getattr(SCALED_DOWN[name], kind)
        for kind in ("operator_kills", "apiserver_restarts", "etcd_restarts", "leader_kills")
    )
    assert outcome.polls >= 10, outcome.as_dict()  # the zeros below were watched, not assumed
    assert (outcome.lost, outcome.duplicated, outcome.oversubscribed) == (0, 0, 0), outcome.as_dict()


def test_a_burst_survives_losing_a_node_and_another_turning_not_ready(
    chaos_cluster: devcluster.LocalCluster, tmp_path: Path
) -> None:
    """Each fault hits the node running the most Horus pods at that moment: the deleted node's jobs are
    placed again at once, the NotReady node's after the operator's grace (10 s in tests; the jobs run
    30 s, longer than the grace, since kwok would still finish them on the failed node)."""
    scenario = chaos.Scenario("node-faults", node_deletions=1, node_failures=1)
    run = chaos.ChaosRun(chaos_cluster, "chaos-node-faults", tmp_path, seed=7)
    try:
        outcome = run.run(scenario, 32, duration="30s", fault_window_s=12.0, deadline_s=300.0)
    finally:  # the module's cluster gets its capacity back for whatever runs after
        for node, fault in run.faulted_nodes.items():
            if fault == "node-fail":
                chaos_cluster.revive_node(node)
        deleted = sum(fault == "node-delete" for fault in run.faulted_nodes.values())
        chaos_cluster.add_nodes(dataclasses.replace(POOL, count=deleted))

    assert len(outcome.faults) == 2 and outcome.stranded > 0, outcome.as_dict()  # the faults hit jobs
    assert outcome.polls >= 10, outcome.as_dict()
    assert (outcome.lost, outcome.duplicated, outcome.oversubscribed) == (0, 0, 0), outcome.as_dict()
    replacing = chaos_cluster.kubectl(
        "get", "events", "-n", "chaos-node-faults", "--field-selector", "reason=Replacing",
        "-o", "jsonpath={.items[*].message}",
    ).stdout  # fmt: skip
    (deleted_node,) = [node for node, fault in run.faulted_nodes.items() if fault == "node-delete"]
    (failed_node,) = [node for node, fault in run.faulted_nodes.items() if fault == "node-fail"]
    assert f"node {deleted_node} is gone" in replacing, replacing
    assert f"node {failed_node} NotReady for over 10s" in replacing, replacing
