"""Share or wait against the queue (issue 46, item 2): while a multi-GPU job finds no node with enough
empty GPUs, a one-GPU job shares a GPU rather than open an empty one, when the pairing's score beats
1 - `wide_wait_cost` (numbers from `placement_builders.predictor`: good+fair gain 0.67, good+good 0.54)."""

from __future__ import annotations

from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.horus import HorusPolicy, HorusTunables
from horus_operator.placement.types import Assignment, JobRequest

SMALL = job("small", "good")
WIDE = job("wide", "good", gpus=2, at=1.0)
DEFAULT = HorusTunables()


def place(
    queue: list[JobRequest],
    tenant: str = "fair",
    node_count: int = 2,
    tunables: HorusTunables = DEFAULT,
) -> list[Assignment]:
    """horus's placements on nodes of two GPUs: n0's GPU 0 runs `tenant`, n1's a job that wants its GPU
    whole, the other GPUs and any further nodes (`node_count` > 2) are empty."""
    busy = [running(job(tenant, tenant), "n0", 0), running(job("whole", "poor", max_slowdown=1.0), "n1", 0)]
    policy = HorusPolicy(predictor(), tunables=tunables)
    return policy.schedule(snapshot(nodes(node_count, gpus=2), *busy), queue)


def test_a_one_gpu_job_shares_rather_than_open_an_empty_gpu_while_a_wide_job_waits() -> None:
    [shared] = place([SMALL, WIDE])
    assert (shared.job, shared.node, shared.gpu_indices, shared.colocated_with) == (
        "small",
        "n0",
        (0,),
        ("fair",),
    )
    assert "keeps empty GPUs for waiting multi-GPU jobs" in shared.reason


def test_without_a_waiting_wide_job_it_takes_the_empty_gpu() -> None:
    [alone] = place([SMALL])
    assert alone.colocated_with == ()


def test_a_pairing_must_beat_what_opening_the_empty_gpu_costs() -> None:
    [alone] = place([SMALL, WIDE], tenant="good")  # gain 0.54 < 1 - the default 0.4
    assert alone.colocated_with == ()
    [shared] = place([SMALL, WIDE], tenant="good", tunables=HorusTunables(wide_wait_cost=0.5))
    assert shared.colocated_with == ("good",)


def test_a_cost_of_0_opens_the_empty_gpu() -> None:
    [alone] = place([SMALL, WIDE], tunables=HorusTunables(wide_wait_cost=0.0))
    assert alone.colocated_with == ()


def test_a_wide_job_that_fits_does_not_make_others_share() -> None:
    placed = {a.job: a for a in place([SMALL, WIDE], node_count=3)}
    assert placed["wide"].node == "n2"
    assert placed["small"].colocated_with == ()
