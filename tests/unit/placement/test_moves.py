"""The move planner: a job over its limit moves where the predictions keep everyone within theirs, a
pair is separated onto a free GPU when the gain beats the move's cost, and nothing else moves."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st
from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.moves import (
    Mobility,
    MoveSettings,
    Trigger,
    plan_moves,
    retarget,
)
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, JobRequest, RunningJob

SETTINGS = MoveSettings(restart_cost_s=120.0, cooldown_s=600.0, max_moves_per_job=2, over_limit_for_s=300.0)
# good next to poor: predicted 2.0x each (within the default maxSlowdown 2.0), observed worse.
OVER = Mobility(allowed=True, observed_slowdown=2.6, observed_since=0.0)


def _plan(view: ClusterSnapshot, mobility: dict[str, Mobility], *, waiting: bool = False) -> list:
    return plan_moves(view, CachedPredictions(predictor()), mobility, SETTINGS, waiting=waiting)


def _pair(now: float = 400.0, *, spare: RunningJob | None = None) -> ClusterSnapshot:
    tenants = [running(job("a", "good"), "n0", 0), running(job("b", "poor"), "n0", 0)]
    return snapshot(nodes(1, gpus=2), *tenants, *([spare] if spare else []), now=now)


def _long(key: str, model: str, remaining_s: float | None) -> JobRequest:
    return dataclasses.replace(job(key, model), remaining_s=remaining_s)


def test_a_job_over_its_limit_long_enough_moves_to_an_empty_gpu() -> None:
    (move,) = _plan(_pair(), {"a": OVER})
    assert (move.job, move.trigger) == ("a", Trigger.OVER_LIMIT)
    assert (move.source.node, move.source.gpu_indices) == ("n0", (0,))
    assert (move.target.node, move.target.gpu_indices, move.target.colocated_with) == ("n0", (1,), ())
    assert move.cost_s == 30.0 + 120.0
    assert "2.60x above maxSlowdown 2.00" in move.reason


def test_no_move_before_the_readings_are_sure_nor_for_a_job_within_its_limit() -> None:
    # 2.6x over a limit of 2.0 is sure after one reading past the settling time: 60 + 10 s.
    assert SETTINGS.violation_wait_s(2.6, 2.0) == 70.0
    assert _plan(_pair(now=69.0), {"a": OVER}) == []
    assert _plan(_pair(now=70.0), {"a": OVER})
    barely = dataclasses.replace(OVER, observed_slowdown=2.1)  # 5 % over: 23 readings, 290 s
    assert _plan(_pair(now=289.0), {"a": barely}) == [] and _plan(_pair(now=290.0), {"a": barely})
    assert _plan(_pair(), {"a": dataclasses.replace(OVER, observed_slowdown=1.9)}) == []
    assert _plan(_pair(), {"a": dataclasses.replace(OVER, observed_since=None)}) == []


def test_jobs_that_do_not_allow_it_or_moved_recently_or_often_never_move() -> None:
    assert _plan(_pair(), {"a": dataclasses.replace(OVER, allowed=False)}) == []
    assert _plan(_pair(), {"a": dataclasses.replace(OVER, moves=1, last_move_at=100.0)}) == []
    assert _plan(_pair(), {"a": dataclasses.replace(OVER, moves=2, last_move_at=-1000.0)}) == []
    assert len(_plan(_pair(), {"a": dataclasses.replace(OVER, moves=1, last_move_at=-200.0)})) == 1


def test_without_an_empty_gpu_it_joins_a_gpu_where_everyone_stays_within_limits() -> None:
    fair = running(job("c", "fair"), "n0", 1)  # good next to fair: 1.2x each
    (move,) = _plan(_pair(spare=fair), {"a": OVER})
    assert (move.target.gpu_indices, move.target.colocated_with) == ((1,), ("c",))
    assert move.target.predicted_slowdown == 1.2
    # The owner of c accepts no more than 1.1x: nowhere to go, so a stays.
    strict = running(job("c", "fair", max_slowdown=1.1), "n0", 1)
    assert _plan(_pair(spare=strict), {"a": OVER}) == []


def test_the_owners_limit_decides_over_a_capped_request() -> None:
    capped = running(job("a", "good", max_slowdown=1.5), "n0", 0)
    view = snapshot(nodes(1, gpus=2), capped, running(job("b", "poor"), "n0", 0), now=400.0)
    owner = dataclasses.replace(OVER, observed_slowdown=1.8, max_slowdown=2.0)
    assert _plan(view, {"a": owner}) == []
    assert len(_plan(view, {"a": dataclasses.replace(owner, max_slowdown=None)})) == 1


def _packed(a_remaining: float | None, b_remaining: float | None) -> ClusterSnapshot:
    tenants = [
        running(_long("a", "good", a_remaining), "n0", 0),
        running(_long("b", "fair", b_remaining), "n0", 0),
    ]
    return snapshot(nodes(1, gpus=2), *tenants, now=0.0)


def test_a_pair_is_separated_onto_a_free_gpu_when_the_gain_beats_the_cost() -> None:
    # good+fair: 1.2x each. b leaving: 7200 s x 0.2 + a's min(3600, 7200) x 0.2 = 2160 s; a leaving:
    # 3600 x 0.2 + 3600 x 0.2 = 1440 s. Both beat 150 s; the larger goes, and only one leaves the GPU.
    both = {"a": Mobility(allowed=True), "b": Mobility(allowed=True)}
    (move,) = _plan(_packed(3600.0, 7200.0), both)
    assert (move.job, move.trigger, move.target.gpu_indices) == ("b", Trigger.REPACK, (1,))
    assert "36 min sooner" in move.reason


def test_no_repack_while_jobs_wait_or_when_the_gain_is_small_or_unknown() -> None:
    both = {"a": Mobility(allowed=True), "b": Mobility(allowed=True)}
    assert _plan(_packed(3600.0, 7200.0), both, waiting=True) == []
    assert _plan(_packed(300.0, 300.0), both) == []  # 60 + 60 s < 150 s
    assert _plan(_packed(None, None), both) == []
    # What the caller knows beats the request's figure; the observed slowdown beats the predicted.
    known = {"a": Mobility(allowed=True, remaining_s=3600.0, observed_slowdown=1.5)}
    (move,) = _plan(_packed(None, None), known)
    assert move.job == "a"


def test_a_plan_leaves_a_borrowed_index_as_it_was_and_is_deterministic() -> None:
    view = _pair()
    index = ClusterIndex.build(view)
    borrowed = dataclasses.replace(view, index=index)
    before = {key: sorted(t.request.key for t in slot.tenants) for key, slot in index.slots.items()}
    first = _plan(borrowed, {"a": OVER, "b": OVER})
    after = {key: sorted(t.request.key for t in slot.tenants) for key, slot in index.slots.items()}
    assert before == after and index.empty_count() == 1
    assert first == _plan(borrowed, {"a": OVER, "b": OVER})
    assert [m.job for m in first] == ["a"]  # one leaves; its co-tenant is then alone


def test_a_target_still_free_is_kept_and_one_taken_meanwhile_is_refused() -> None:
    moved = running(job("a", "good"), "n0", 1)
    predictions = CachedPredictions(predictor())
    free = snapshot(nodes(1, gpus=2), running(job("b", "poor"), "n0", 0))
    assignment = retarget(free, predictions, moved, reason="moved")
    assert assignment is not None and (assignment.node, assignment.gpu_indices) == ("n0", (1,))
    strict = snapshot(nodes(1, gpus=2), running(job("c", "poor", max_slowdown=1.5), "n0", 1))
    assert retarget(strict, predictions, moved) is None
    assert retarget(free, predictions, running(job("a", "good"), "gone", 0)) is None


def test_the_cycle_plans_moves_with_its_predictions_and_skips_cooling_nodes() -> None:
    believed = predictor()
    cycle = SchedulingCycle(make_policy("horus", predictor=believed))
    tenants = [running(job("a", "good"), "n0", 0), running(job("b", "poor"), "n0", 0)]
    view = snapshot(nodes(2, gpus=1), *tenants, now=400.0)
    (move,) = cycle.moves(view, {"a": OVER}, SETTINGS, waiting=True)
    assert move.target.node == "n1"
    cycle.cooldowns.note("n1", until=1000.0)
    assert cycle.moves(view, {"a": OVER}, SETTINGS, waiting=True) == []


@given(
    limit=st.floats(1.0, 5.0),
    ratio=st.floats(1.0001, 3.0),
    more=st.floats(0.0, 1.0),
)
def test_the_wait_falls_as_the_violation_grows_and_stays_within_the_settable_bound(
    limit: float, ratio: float, more: float
) -> None:
    """The surer the violation, the sooner the move; never sooner than one reading after settling, never
    later than `over_limit_for_s`, and never for a job within its limit."""
    wait, further = (
        SETTINGS.violation_wait_s(limit * ratio, limit),
        SETTINGS.violation_wait_s(limit * ratio * (1 + more), limit),
    )
    assert further <= wait
    assert SETTINGS.settle_s + SETTINGS.reading_every_s <= further <= wait <= SETTINGS.over_limit_for_s
    assert SETTINGS.violation_wait_s(limit, limit) == float("inf")
