"""Jobs that state their share of a GPU (`JobRequest.gpu_milli`, issue 46 item 5): what `room` admits,
where every policy puts them, and FGD's expected fragmentation for fractions (`ShareMix`)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from horus_operator.placement.base import Limits
from horus_operator.placement.binpack import BinpackPolicy
from horus_operator.placement.exclusive import ExclusivePolicy
from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.fragmentation import ShareMix
from horus_operator.placement.horus import HorusPolicy, HorusTunables
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node, Policy, RunningJob
from horus_operator.prediction.api import Workload

PREDICTOR = TablePredictor(jobs={"s": (0.5, 1000.0), "p": (0.5, 1000.0)}, pairs={("s", "s"): (1.0, 1.0)})
LIMITS = Limits(max_jobs_per_gpu=21)
POLICIES: dict[str, Callable[[], Policy]] = {
    "horus": lambda: HorusPolicy(PREDICTOR, LIMITS),
    "horus-bestfit": lambda: HorusPolicy(PREDICTOR, LIMITS, HorusTunables(share_fragmentation=False)),
    "binpack": lambda: BinpackPolicy(PREDICTOR, LIMITS),
    "exclusive": lambda: ExclusivePolicy(PREDICTOR, LIMITS),
}


def stated(key: str, milli: int, gpus: int = 1) -> JobRequest:
    whole = milli >= 1000
    return JobRequest(
        key=key, workload=Workload("s", milli), gpus=gpus, gpu_milli=milli, max_slowdown=1.0 if whole else 1.5
    )


def nodes(count: int, gpus: int) -> tuple[Node, ...]:
    return tuple(
        Node(f"n{n}", tuple(Gpu(f"n{n}", i, "v100", 16384) for i in range(gpus))) for n in range(count)
    )


def replay(policy: Policy, cluster: tuple[Node, ...], requests: list[JobRequest]) -> ClusterIndex:
    """Each request alone, as the openb replay asks them, the placements kept."""
    index = ClusterIndex(cluster)
    for request in requests:
        for assignment in policy.schedule(ClusterSnapshot(nodes=cluster, index=index), [request]):
            index.add(RunningJob(request, assignment.node, assignment.gpu_indices))
    return index


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_stated_shares_on_a_gpu_never_sum_past_a_whole_one(name: str) -> None:
    rng = random.Random(7)
    shares = [rng.choice([100, 250, 300, 500, 700, 1000]) for _ in range(60)]
    requests = [
        stated(f"j{i}", milli, gpus=rng.choice([1, 2]) if milli == 1000 else 1)
        for i, milli in enumerate(shares)
    ]
    index = replay(POLICIES[name](), nodes(3, 4), requests)
    assert index.jobs  # something was placed
    for slot in index.slots.values():
        assert sum(tenant.request.gpu_milli for tenant in slot.tenants) <= 1000
        if any(tenant.request.gpu_milli == 1000 for tenant in slot.tenants):
            assert len(slot.tenants) == 1  # a whole-GPU request is alone on its GPU


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_whole_gpu_request_never_lands_on_a_shared_gpu(name: str) -> None:
    index = replay(POLICIES[name](), nodes(1, 1), [stated("a", 300), stated("b", 1000)])
    assert set(index.jobs) == {"a"}


@pytest.mark.parametrize("name", ["horus", "horus-bestfit", "binpack"])
def test_fractions_share_a_gpu_while_they_fit(name: str) -> None:
    index = replay(POLICIES[name](), nodes(1, 2), [stated("a", 600), stated("b", 400), stated("c", 500)])
    gpu_of = {key: job.gpu_indices for key, job in index.jobs.items()}
    assert gpu_of["a"] == gpu_of["b"] != gpu_of["c"]


def test_stated_and_predicted_jobs_never_share_a_gpu() -> None:
    predicted = JobRequest(key="p", workload=Workload("s", 1))
    for policy in (HorusPolicy(PREDICTOR, LIMITS), BinpackPolicy(PREDICTOR, LIMITS)):
        index = replay(policy, nodes(1, 1), [stated("a", 300), predicted])
        assert set(index.jobs) == {"a"}
        index = replay(policy, nodes(1, 1), [predicted, stated("a", 300)])
        assert set(index.jobs) == {"p"}


def test_share_mix_costs() -> None:
    mix = ShareMix()
    for i, (gpus, milli) in enumerate([(1, 500), (1, 500), (1, 250), (1, 1000), (8, 1000)]):
        mix.note(stated(f"k{i}", milli, gpus))
    mix.note(stated("k0", 500))  # counted once per key
    # 250 of a half-free GPU leaves 250, which only the 250 request fits: 250 x 4/5 stranded, as 500 x 2/5 was
    assert mix.cost_on_shared(500, 250) == pytest.approx(0.0)
    assert mix.cost_on_shared(500, 500) == pytest.approx(-200.0)  # used up
    # a half of a whole eight-GPU node: 500 left (2/5 of requests want more), 7 empty strand for the 8-GPU one
    assert mix.cost_on_empty(8, 500) == pytest.approx(200.0 + 1400.0)
    assert ShareMix().cost_on_empty(8, 500) == 0.0  # nothing seen: best fit decides
