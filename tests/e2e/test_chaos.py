"""Faults during a burst, on a control plane of this module's own (its API server and etcd get killed):
no job lost, no job with two live pods, no GPU's memory oversubscribed. `bench/chaos.py` runs the same
scenarios at 1,000 jobs and reports failover and drain times."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from horus_operator import devcluster
from horus_operator.testing import chaos
from horus_operator.testing.operator_process import REPO

pytestmark = pytest.mark.e2e

JOBS = 200
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
        local.kubectl("wait", "--for=condition=Established", "crd/dljobs.horus.dev", "--timeout=60s")
        yield local
    finally:
        local.down()


@pytest.mark.parametrize("name", list(SCALED_DOWN))
def test_a_burst_survives_the_faults(
    chaos_cluster: devcluster.LocalCluster, name: str, tmp_path: Path
) -> None:
    run = chaos.ChaosRun(chaos_cluster, f"chaos-{name}", tmp_path, seed=7)
    outcome = run.run(SCALED_DOWN[name], JOBS, duration="15s", fault_window_s=30.0, deadline_s=600.0)
    assert len(outcome.faults) == sum(
        getattr(SCALED_DOWN[name], kind)
        for kind in ("operator_kills", "apiserver_restarts", "etcd_restarts", "leader_kills")
    )
    assert outcome.polls >= 10, outcome.as_dict()  # the zeros below were watched, not assumed
    assert (outcome.lost, outcome.duplicated, outcome.oversubscribed) == (0, 0, 0), outcome.as_dict()
