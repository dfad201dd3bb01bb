"""The makespan guard: the horizon, the cap on maxSlowdown, and where the cycle applies it."""

from __future__ import annotations

import dataclasses

import pytest
from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.makespan import SHARING_FLOOR, guarded, horizon_s
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import JobRequest
from horus_operator.placement.waitqueue import WaitQueue


def _long(key: str, remaining_s: float, *, at: float = 0.0, max_slowdown: float = 3.0) -> JobRequest:
    return dataclasses.replace(job(key, "good", at=at, max_slowdown=max_slowdown), remaining_s=remaining_s)


def test_the_horizon_is_the_longest_job_or_the_work_spread_over_the_gpus() -> None:
    assert horizon_s(10.0, work_left_gpu_s=400.0, gpus=8, longest_remaining_s=100.0) == 110.0
    assert horizon_s(10.0, work_left_gpu_s=1600.0, gpus=8, longest_remaining_s=100.0) == 210.0


def test_a_job_may_be_slowed_only_as_far_as_it_still_ends_by_the_horizon() -> None:
    # 100 s of work, 190 s to the horizon: 1.9x at most, rounded down to the cap step.
    capped = guarded(_long("a", 100.0), now=10.0, horizon=200.0)
    assert capped.max_slowdown == pytest.approx(1.9)
    assert capped.remaining_s == 100.0
    # Under the sharing floor a cap means a whole GPU.
    assert guarded(_long("b", 100.0), now=0.0, horizon=100.0 * (SHARING_FLOOR - 0.01)).max_slowdown == 1.0


def test_jobs_with_room_or_without_a_known_horizon_or_duration_are_left_alone() -> None:
    roomy = _long("a", 10.0)
    assert guarded(roomy, now=0.0, horizon=1000.0) is roomy
    assert guarded(roomy, now=0.0, horizon=None) is roomy
    unknown = job("b", "good")
    assert guarded(unknown, now=0.0, horizon=1.0) is unknown
    whole = _long("c", 100.0, max_slowdown=1.0)
    assert guarded(whole, now=0.0, horizon=100.0) is whole


def test_jobs_submitted_together_queue_longest_work_first() -> None:
    queue = WaitQueue(
        [_long("short", 10.0), _long("long", 500.0), job("unknown", "good"), _long("mid", 50.0)]
    )
    assert [request.key for request in queue] == ["long", "mid", "short", "unknown"]
    assert queue.longest_remaining_s() == 500.0
    queue.remove("long")
    assert queue.longest_remaining_s() == 50.0
    # Arrival still comes first: a long job submitted later does not overtake.
    queue.add(_long("later", 900.0, at=1.0))
    assert [request.key for request in queue][-1] == "later"


def _cycle() -> SchedulingCycle:
    believed = predictor()
    return SchedulingCycle(make_policy("horus", predictor=believed))


def test_the_cycle_places_the_capped_request_when_a_gpu_is_free() -> None:
    cluster = nodes(1, gpus=2)
    view = dataclasses.replace(snapshot(cluster), horizon_s=120.0)
    result = _cycle().run(view, WaitQueue([_long("long", 100.0)]))
    assert [a.job for a in result.assignments] == ["long"]
    assert result.placed["long"].max_slowdown == 1.0  # 1.2x tolerable: under the sharing floor


def test_the_guard_waits_for_a_free_gpu_rather_than_hold_a_job_back() -> None:
    # Both GPUs busy: capping the newcomer to a whole GPU would only make it wait, so it may share.
    cluster = nodes(1, gpus=2)
    tenants = [running(job(f"t{i}", "good"), "n0", i) for i in range(2)]
    view = dataclasses.replace(snapshot(cluster, *tenants), horizon_s=120.0)
    result = _cycle().run(view, WaitQueue([_long("long", 100.0)]))
    assert result.placed["long"].max_slowdown == 3.0
