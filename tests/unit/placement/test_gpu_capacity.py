"""Fit and prediction read one capacity: the memory the GPU's node reports, not its type's datasheet."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from placement_builders import job, predictor, running

from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, Gpu, Node
from horus_operator.prediction.api import JobPrediction, Workload
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.predictor import load_predictor


class CapacityRecorder:
    """A predictor that notes the capacity each slowdown question is asked at."""

    def __init__(self, inner: TablePredictor) -> None:
        self.inner = inner
        self.capacities: set[float | None] = set()

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return self.inner.job(workload, gpu)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        self.capacities.add(memory_mib)
        return self.inner.slowdowns(gpu, workloads, memory_mib)


@pytest.mark.parametrize("policy", ["horus", "binpack"])  # the policies that share
def test_policies_ask_about_sharing_at_the_memory_the_node_reports(policy: str) -> None:
    gpu = Gpu.labelled("n0", 0, "Tesla-V100-SXM2-32GB", 32_500)  # what NVML reports, not 32 GiB
    resident = job("ns/good", "good", max_slowdown=10.0)
    snapshot = ClusterSnapshot(nodes=(Node("n0", (gpu,)),), running=(running(resident, "n0", 0),))
    recorder = CapacityRecorder(predictor())
    make_policy(policy, predictor=recorder).schedule(snapshot, [job("ns/fair", "fair", max_slowdown=10.0)])
    assert recorder.capacities == {32_500}


def test_the_predictor_judges_a_set_full_at_the_capacity_it_is_given() -> None:
    model = load_predictor()
    pair = [Workload("resnet50", 128), Workload("resnet50", 128)]
    together = 2 * model.job(pair[0], "v100").memory_mib
    assert together > GPU_SPECS["v100"].memory_mib
    assert model.slowdowns("v100", pair) is None  # no node known: the datasheet's 16 GiB
    assert model.slowdowns("v100", pair, memory_mib=together + 1) is not None
    assert model.slowdowns("v100", pair, memory_mib=together - 1) is None


@pytest.mark.parametrize("policy", ["horus", "binpack"])
def test_a_gpu_measured_busy_is_passed_over_for_its_twin_and_a_full_twin_refuses_for_its_group(
    policy: str,
) -> None:
    # Telemetry only takes room away: the busy GPU 0 is skipped for GPU 1, which has the same tenant.
    busy = Gpu("n0", 0, "v100", 16384, observed_utilization=0.99)
    node = Node("n0", (busy, Gpu("n0", 1, "v100", 16384)))
    tenants = [running(job(f"t{i}", "good", max_slowdown=10.0), "n0", i) for i in range(2)]
    newcomer = job("new", "fair", max_slowdown=10.0)
    placed = make_policy(policy, predictor=predictor()).schedule(
        ClusterSnapshot(nodes=(node,), running=tuple(tenants)), [newcomer]
    )
    assert [(a.job, a.gpu_indices) for a in placed] == [("new", (1,))]
    # Beside 12,000 MiB tenants no GPU has room for 4,000 MiB more: none is chosen.
    heavy = [running(job(f"h{i}", "huge", max_slowdown=10.0), "n0", i) for i in range(2)]
    crowded = ClusterSnapshot(nodes=(node,), running=tuple(heavy))
    assert make_policy(policy, predictor=predictor()).schedule(crowded, [newcomer]) == []


@pytest.mark.parametrize("policy", ["horus", "binpack"])
def test_a_twin_shared_under_another_scope_does_not_stand_for_its_group(policy: str) -> None:
    # GPU 0's tenant shares under another namespace's claim; GPU 1's twin tenant under the newcomer's.
    node = Node("n0", (Gpu("n0", 0, "v100", 16384), Gpu("n0", 1, "v100", 16384)))
    tenants = [
        running(dataclasses.replace(job(f"t{i}", "good", max_slowdown=10.0), share_scope=scope), "n0", i)
        for i, scope in enumerate(("other", "mine"))
    ]
    newcomer = dataclasses.replace(job("new", "fair", max_slowdown=10.0), share_scope="mine")
    placed = make_policy(policy, predictor=predictor()).schedule(
        ClusterSnapshot(nodes=(node,), running=tuple(tenants)), [newcomer]
    )
    assert [(a.job, a.gpu_indices) for a in placed] == [("new", (1,))]


@pytest.mark.parametrize("policy", ["horus", "binpack", "exclusive"])
def test_a_job_predicted_over_an_idle_gpu_waits_for_a_larger_one_and_takes_the_largest_there_is(
    policy: str,
) -> None:
    small = Node("n0", (Gpu("n0", 0, "v100", 16384),))
    large = Node("n1", (Gpu("n1", 0, "a100", 40960),))
    giant = job("ns/giant", "giant", max_slowdown=10.0)  # 20,000 MiB predicted
    placed = make_policy(policy, predictor=predictor()).schedule(
        ClusterSnapshot(nodes=(small, large)), [giant]
    )
    assert [(a.job, a.node) for a in placed] == [("ns/giant", "n1")]
    # The larger GPU held whole by another job: it waits rather than run out of memory on the smaller.
    holder = running(job("ns/holder", "huge", max_slowdown=1.0), "n1", 0)
    busy = ClusterSnapshot(nodes=(small, large), running=(holder,))
    assert make_policy(policy, predictor=predictor()).schedule(busy, [giant]) == []
    # Where no GPU has more, it is tried alone on the largest there is (the cycle refuses only a job whose
    # least memory fits nowhere).
    placed = make_policy(policy, predictor=predictor()).schedule(ClusterSnapshot(nodes=(small,)), [giant])
    assert [(a.job, a.node) for a in placed] == [("ns/giant", "n0")]
