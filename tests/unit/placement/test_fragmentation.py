"""Fragmentation against the waiting jobs' size mix (issue 46, FGD's idea): the arithmetic, and where
horus puts a job on hand-built clusters (numbers from `placement_builders.predictor`)."""

from __future__ import annotations

import pytest
from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.fragmentation import SizeMix
from horus_operator.placement.horus import HorusPolicy, HorusTunables
from horus_operator.placement.types import JobRequest, RunningJob


@pytest.mark.parametrize(
    ("shares", "free", "taken", "cost"),
    [
        ((), 8, 1, 0.0),  # no wide job waits: nothing is stranded
        (((1, 1.0),), 8, 1, 0.0),  # one-GPU jobs use any empty GPU
        (((8, 0.5),), 8, 1, 3.5),  # breaking a whole node strands its other 7 for eight-GPU jobs
        (((8, 0.5),), 7, 1, -0.5),  # a node already broken strands one fewer
        (((2, 1.0),), 2, 1, 1.0),  # a pair left as one GPU
        (((2, 1.0),), 3, 1, 0.0),  # three left as a pair
        (((2, 0.5), (4, 0.5)), 4, 2, 1.0),  # 4 -> 2: fits a 2-GPU job, not a 4-GPU one
    ],
)
def test_cost_is_what_a_placement_adds_to_the_gpus_stranded(
    shares: tuple[tuple[int, float], ...], free: int, taken: int, cost: float
) -> None:
    assert SizeMix(shares).cost(free, taken) == pytest.approx(cost)


def test_the_mix_is_the_queue_s_shares_of_wide_jobs() -> None:
    mix = SizeMix.of([job("a", "good"), job("b", "good", gpus=2), job("c", "good", gpus=8), job("d", "good")])
    assert mix.stranded(7) == pytest.approx(7 * 0.25)  # only the eight-GPU job cannot use 7
    assert mix.stranded(1) == pytest.approx(1 * 0.5)  # the 2- and 8-GPU jobs cannot use 1
    assert not SizeMix.of([job("a", "good")])


def singles(count: int) -> list[JobRequest]:
    """A first window (horus reads 16 jobs at a time) of one kind of one-GPU job."""
    return [job(f"s{i:02d}", "good", at=i) for i in range(count)]


def wide(count: int, gpus: int) -> list[JobRequest]:
    """Wide jobs queued behind the first window: in the mix the call reads, not yet choosing."""
    return [job(f"w{i}", "good", gpus=gpus, at=100 + i) for i in range(count)]


def full_node_with_a_fair_tenant() -> list[RunningJob]:
    """n1's eight GPUs busy with whole-GPU jobs, but GPU 0 runs `fair`, which `good` pairs well with
    (1.2x each, gain 0.67)."""
    jobs = [running(job("fair", "fair"), "n1", 0)]
    return jobs + [running(job(f"x{i}", "poor", max_slowdown=1.0), "n1", i) for i in range(1, 8)]


def first_place(
    queue: list[JobRequest], tenants: list[RunningJob], free_gpus: list[int], **tune: float
) -> str:
    """Where horus puts the first job it places: 'n0' (alone) or 'n1' (sharing)."""
    busy = [running(job(f"b{i}", "poor", max_slowdown=1.0), "n0", i) for i in range(8) if i not in free_gpus]
    policy = HorusPolicy(predictor(), tunables=HorusTunables(**tune))
    first = policy.schedule(snapshot(nodes(2, 8), *busy, *tenants), queue)[0]
    return first.node + ("+" + ",".join(first.colocated_with) if first.colocated_with else "")


@pytest.mark.parametrize(
    ("queue", "tune", "expected"),
    [
        # No wide job waits: an idle GPU is the worst outcome, so the one-GPU job starts alone on n0.
        (singles(16), {}, "n0"),
        # Eight-GPU jobs wait (2 of 18 read): alone on n0 would strand 7 x 2/18 = 0.78 of its GPUs for
        # them, scored 1 - 0.78 = 0.22 < the pairing's 0.67: the job shares the partly used node.
        (singles(16) + wide(2, 8), {}, "n1+fair"),
        # The weight at 0 is the policy as it was: alone on the empty node.
        (singles(16) + wide(2, 8), {"fragmentation_weight": 0.0}, "n0"),
    ],
)
def test_a_one_gpu_job_keeps_the_empty_node_whole_when_eight_gpu_jobs_wait(
    queue: list[JobRequest], tune: dict[str, float], expected: str
) -> None:
    assert first_place(queue, full_node_with_a_fair_tenant(), list(range(8)), **tune) == expected


@pytest.mark.parametrize(
    ("free_on_n0", "free_on_n1", "queue", "expected"),
    [
        # Best fit: the node with fewer empty GPUs, where no wide job waits.
        (2, 3, singles(16), "n0"),
        # 2-GPU jobs wait: taking one of n0's two leaves one no pair can use; one of n1's three leaves a
        # pair.
        (2, 3, singles(16) + wide(4, 2), "n1"),
        # A 2-GPU job where 2-GPU jobs are the mix: 4 -> 2 keeps a pair, 3 -> 1 strands one.
        (3, 4, wide(1, 2), "n1"),
    ],
)
def test_a_job_alone_takes_the_node_it_fragments_least(
    free_on_n0: int, free_on_n1: int, queue: list[JobRequest], expected: str
) -> None:
    whole = [running(job(f"b{i}", "poor", max_slowdown=1.0), "n0", i) for i in range(free_on_n0, 8)]
    whole += [running(job(f"c{i}", "poor", max_slowdown=1.0), "n1", i) for i in range(free_on_n1, 8)]
    policy = HorusPolicy(predictor())
    first = policy.schedule(snapshot(nodes(2, 8), *whole), queue)[0]
    assert first.node == expected
