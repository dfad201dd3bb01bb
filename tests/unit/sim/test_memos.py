"""The memos that spare policy calls and searches change no decision: a run that forgets them before
every call places every job on the same GPUs at the same times, and only works more."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from sim_builders import predictor, truth, truth_table

from horus_operator.placement.base import PredictingPolicy
from horus_operator.placement.cycle import CycleResult, SchedulingCycle
from horus_operator.placement.horus import HorusPolicy
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest
from horus_operator.placement.waitqueue import WaitQueue
from horus_operator.sim.engine import Simulation
from horus_operator.sim.workloads import synthetic

# Subclasses the policy and the cycle to count their work: interpreted only (`make test-compiled`).
pytestmark = pytest.mark.interpreted


class CountingHorus(HorusPolicy):
    """Counts the windows it searches; `forget`: without what the previous call searched."""

    def __init__(self, *, forget: bool) -> None:
        super().__init__(predictor())
        self.forget = forget
        self.windows = 0

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        if self.forget:
            self._searched = None
        return super().schedule(snapshot, queue)

    def _choose(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.windows += 1
        return super()._choose(*args, **kwargs)


def asked_again(policy: PredictingPolicy) -> PredictingPolicy:
    """`policy` as the cycle drove it before its answers said `Settled`: a call reads `scan_depth` jobs
    (lazily, as the walk reaches them) and the cycle asks again after every call that placed."""
    schedule = policy.schedule

    def unsettled(snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        head = itertools.islice(queue, policy.limits.scan_depth)
        return list(schedule(snapshot, head))  # type: ignore[arg-type]

    policy.schedule = unsettled  # type: ignore[method-assign]
    return policy


class CountingCycle(SchedulingCycle):
    """Counts the policy's calls; `forget`: without the questions it answered with nothing."""

    def __init__(self, policy: PredictingPolicy, *, forget: bool) -> None:
        super().__init__(policy)
        self.forget = forget
        self.calls = 0
        schedule = policy.schedule

        def counted(snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
            self.calls += 1
            return schedule(snapshot, queue)

        policy.schedule = counted  # type: ignore[method-assign]

    def run(
        self,
        snapshot: ClusterSnapshot,
        queue: WaitQueue,
        *,
        explain: Callable[[JobRequest], bool] | None = None,
    ) -> CycleResult:
        if self.forget:
            self._unanswered = None
        return super().run(snapshot, queue, explain=explain)


def schedule_of(tmp_path: Path, cycle: SchedulingCycle) -> list[tuple[str, str, tuple[int, ...], float]]:
    # A queue longer than a call reads (scan_depth 256), arrivals while it is long, and a full cluster.
    world = synthetic(truth_table(tmp_path), random.Random(5), jobs=800, gpus=16)
    result = Simulation(world, cycle, truth(tmp_path)).run()
    return [(record.key, record.node, record.gpu_indices, record.start_s) for record in result.records]


def test_horus_decides_the_same_without_its_memo_of_the_previous_search(tmp_path: Path) -> None:
    remembering, forgetting = CountingHorus(forget=False), CountingHorus(forget=True)
    assert schedule_of(tmp_path, SchedulingCycle(remembering)) == schedule_of(
        tmp_path, SchedulingCycle(forgetting)
    )
    assert remembering.windows < forgetting.windows


@pytest.mark.parametrize("policy", ["binpack", "exclusive"])
def test_placements_that_only_take_room_spare_the_confirming_call(tmp_path: Path, policy: str) -> None:
    """Where a placement only takes room, a call that reads one job further for each it placed has read
    all that the calls after it would, which place nothing: its answer is `Settled` and the cycle is
    spared them."""
    settled = CountingCycle(make_policy(policy, predictor=predictor()), forget=False)
    unsettled = CountingCycle(asked_again(make_policy(policy, predictor=predictor())), forget=False)
    assert schedule_of(tmp_path, settled) == schedule_of(tmp_path, unsettled)
    assert settled.calls < unsettled.calls


@pytest.mark.parametrize("policy", ["horus", "binpack", "exclusive"])
def test_the_cycle_decides_the_same_asking_every_question_again(tmp_path: Path, policy: str) -> None:
    remembering = CountingCycle(make_policy(policy, predictor=predictor()), forget=False)
    forgetting = CountingCycle(make_policy(policy, predictor=predictor()), forget=True)
    assert schedule_of(tmp_path, remembering) == schedule_of(tmp_path, forgetting)
    assert remembering.calls < forgetting.calls
