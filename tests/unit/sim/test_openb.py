"""The openb replay as FGD's simulator runs it (issue 46 item 5), on tiny hand-written traces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from horus_operator.placement.base import Limits
from horus_operator.placement.horus import HorusPolicy
from horus_operator.sim.openb import (
    TUNE_RATIO,
    OpenbNode,
    OpenbPod,
    Replay,
    StatedSharePredictor,
    Step,
    allocation_at,
    read_nodes,
    read_pods,
    tuned,
)


def pod(
    name: str, milli: int, gpus: int = 1, cpu: int = 1000, spec: frozenset[str] = frozenset()
) -> OpenbPod:
    return OpenbPod(name, cpu, 1024, gpus, milli if gpus else 0, spec)


def replayed(nodes: list[OpenbNode], pods: list[OpenbPod], hosts: bool = False) -> tuple[list[Step], Replay]:
    run = Replay(nodes, HorusPolicy(StatedSharePredictor(), Limits(max_jobs_per_gpu=21)), hosts)
    return list(run.run(pods)), run


def test_the_100_percent_point_counts_pods_that_failed() -> None:
    """2 GPUs: 600 and 600 take a GPU each, 800 fits neither; 2,000 thousandths requested by then."""
    steps, run = replayed(
        [OpenbNode("n0", 64000, 65536, 2, "V100M16")], [pod("a", 600), pod("b", 600), pod("c", 800)]
    )
    assert [step.requested_milli for step in steps] == [600, 1200, 2000]
    assert [step.allocated_milli for step in steps] == [600, 1200, 1200]
    assert allocation_at(steps, run.capacity_milli) == 60.0


def test_fractions_fill_a_gpu_before_the_next() -> None:
    steps, run = replayed(
        [OpenbNode("n0", 64000, 65536, 2, "T4")], [pod("a", 600), pod("b", 400), pod("c", 1000)]
    )
    assert allocation_at(steps, run.capacity_milli) == 100.0


@pytest.mark.parametrize("hosts", [False, True])
def test_cpu_memory_and_gpu_model_keep_pods_off_nodes(hosts: bool) -> None:
    """Through `avoid_nodes`, or stated to the policy (`hosts`): the same pods fit the same nodes."""
    nodes = [OpenbNode("small", 2000, 65536, 1, "T4"), OpenbNode("big", 64000, 65536, 1, "P100")]
    pods = [
        pod("cpu-heavy", 500, cpu=4000),
        pod("wants-t4", 500, spec=frozenset({"T4"})),
        pod("too-heavy", 500, cpu=64000),
        pod("cpu", 0, gpus=0),
    ]
    steps, _ = replayed(nodes, pods, hosts)
    # cpu-heavy only fits "big"; wants-t4 only "small"; too-heavy nowhere
    assert [step.allocated_milli for step in steps] == [500, 1000, 1000, 1000]


@pytest.mark.parametrize(("hosts", "allocated"), [(False, 3000), (True, 4000)])
def test_stated_cpu_keeps_a_node_s_gpus_usable(hosts: bool, allocated: int) -> None:
    """ "lean" has CPU for one GPU pod per GPU. The CPU pod, on "lean" by the GPU-only rule (least GPU
    left free), strands its second GPU; stated, it goes where it strands none."""
    nodes = [OpenbNode("lean", 8000, 65536, 2, "T4"), OpenbNode("fat", 64000, 65536, 2, "T4")]
    pods = [pod("a", 1000, cpu=4000), pod("cpu", 0, gpus=0, cpu=3000)]
    pods += [pod(name, 1000, cpu=4000) for name in ("b", "c", "d")]
    steps, _ = replayed(nodes, pods, hosts)
    assert steps[-1].allocated_milli == allocated


def test_tuning_requests_130_percent_then_shuffles() -> None:
    pods = [pod(f"p{i}", 500) for i in range(4)] + [pod("cpu", 0, gpus=0)]
    chosen = tuned(pods, capacity_milli=10_000, rng=random.Random(42))
    requested = sum(p.requested_milli for p in chosen)
    assert TUNE_RATIO * 10_000 - 500 < requested <= TUNE_RATIO * 10_000
    assert len({p.name for p in chosen}) == len(chosen)
    assert chosen == tuned(pods, capacity_milli=10_000, rng=random.Random(42))  # seeded
    fewer = tuned([pod(f"p{i}", 1000) for i in range(20)], capacity_milli=10_000, rng=random.Random(1))
    assert sum(p.requested_milli for p in fewer) == 13_000


def test_allocation_at_reads_the_nearest_point_when_none_rounds_to_it() -> None:
    steps = [Step(980, 900), Step(1010, 950)]  # 98 % and 101 %: none at 100, 101 within one
    assert allocation_at(steps, 1000) == 95.0
    assert allocation_at([Step(500, 500)], 1000) is None


def test_reads_fgd_csv_columns(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n")
    (tmp_path / "pods.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "p0,12000,16384,1,460,T4|P100,LS,Running,0,1,0\np1,4000,1024,0,0,,BE,Running,0,1,0\n"
    )
    assert read_nodes(tmp_path / "nodes.csv") == [OpenbNode("n0", 64000, 262144, 2, "P100")]
    assert read_pods(tmp_path / "pods.csv") == [
        OpenbPod("p0", 12000, 16384, 1, 460, frozenset({"T4", "P100"})),
        OpenbPod("p1", 4000, 1024, 0, 0, frozenset()),
    ]


def test_a_pod_list_without_gpu_spec_takes_any_model(tmp_path: Path) -> None:
    # FGD's multi-GPU variants (openb_pod_list_multigpu*.csv) stop at gpu_milli.
    (tmp_path / "pods.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,8000,4096,2,1000\n")
    assert read_pods(tmp_path / "pods.csv") == [OpenbPod("p0", 8000, 4096, 2, 1000, frozenset())]


def test_requested_milli_is_fgds_total() -> None:
    assert pod("p", 250).requested_milli == 250
    assert pod("p", 1000, gpus=4).requested_milli == 4000
