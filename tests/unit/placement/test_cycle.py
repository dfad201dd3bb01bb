"""The scheduling cycle: queue order, repeating until settled, feasibility, cooldowns, explanations."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from placement_builders import job, nodes, predictor, running, snapshot

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.feasibility import Cause
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest
from horus_operator.placement.waitqueue import WaitQueue


def _cycle(policy: str = "exclusive", **tunables: object) -> SchedulingCycle:
    believed = predictor()
    return SchedulingCycle(make_policy(policy, predictor=believed, **tunables))


def test_the_queue_is_priority_then_arrival_then_key() -> None:
    late_urgent = dataclasses.replace(job("z", "good", at=9.0), priority=1)
    queue = WaitQueue([job("b", "good", at=1.0), job("a", "good", at=1.0), late_urgent, job("c", "good")])
    assert [request.key for request in queue] == ["z", "c", "a", "b"]
    queue.remove("c")
    queue.add(dataclasses.replace(job("a", "good", at=1.0), max_slowdown=1.0))  # replaces, keeps its place
    assert [request.key for request in queue] == ["z", "a", "b"]
    assert queue[1].max_slowdown == 1.0


def test_the_cycle_asks_again_until_nothing_more_is_placed() -> None:
    # scan_depth 1: one call looks at one job; a burst of three still starts in one cycle.
    queue = WaitQueue([job(key, "good", at=i) for i, key in enumerate("abc")])
    result = _cycle(scan_depth=1).run(snapshot(nodes(1, gpus=4)), queue)
    assert [a.job for a in result.assignments] == ["a", "b", "c"]


def test_higher_priority_goes_first_when_gpus_are_scarce() -> None:
    queue = WaitQueue(
        [job("early", "good", at=0.0), dataclasses.replace(job("urgent", "good", at=5.0), priority=2)]
    )
    result = _cycle().run(snapshot(nodes(1, gpus=1)), queue)
    assert [a.job for a in result.assignments] == ["urgent"]


def test_a_job_no_node_can_run_is_taken_off_the_queue() -> None:
    queue = WaitQueue([job("wide", "good", gpus=4), job("giant", "giant"), job("fine", "good")])
    result = _cycle().run(snapshot(nodes(2, gpus=2)), queue)
    assert {key: problem.cause for key, problem in result.unsatisfiable.items()} == {
        "wide": Cause.GPUS,
        "giant": Cause.MEMORY,
    }
    assert [a.job for a in result.assignments] == ["fine"]


def test_a_cooling_node_is_skipped_until_its_time_is_up() -> None:
    cycle = _cycle()
    cycle.cooldowns.note("n0", until=100.0)
    queue = WaitQueue([job("a", "good")])
    assert [a.node for a in cycle.run(snapshot(nodes(2, gpus=1), now=50.0), queue).assignments] == ["n1"]
    assert [a.node for a in cycle.run(snapshot(nodes(2, gpus=1), now=100.0), queue).assignments] == ["n0"]


def test_a_borrowed_index_comes_back_unchanged_and_waiting_jobs_are_explained() -> None:
    cluster = nodes(1, gpus=1)
    index = ClusterIndex(cluster, (running(job("old", "good"), "n0", 0),))
    view = dataclasses.replace(snapshot(cluster), index=index)
    queue = WaitQueue([job("a", "poor"), job("b", "poor")])
    result = _cycle("horus").run(view, queue, explain=lambda request: request.key == "b")
    assert list(index.jobs) == ["old"]
    assert set(result.explanations) == {"b"} and result.explanations["b"].startswith("waiting")


class _Counting:
    """A policy that counts the questions it is asked."""

    def __init__(self, name: str) -> None:
        self.inner = make_policy(name, predictor=predictor())
        self.name = self.inner.name
        self.predictions, self.limits = self.inner.predictions, self.inner.limits
        self.asked = 0
        self.explained: list[str] = []

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        self.asked += 1
        return self.inner.schedule(snapshot, queue)

    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        self.explained.append(request.key)
        return self.inner.explain_wait(snapshot, request)


def test_waiting_jobs_alike_are_explained_once_a_cycle_and_told_the_same() -> None:
    cluster = nodes(1, gpus=1)
    view = dataclasses.replace(
        snapshot(cluster), index=ClusterIndex(cluster, (running(job("old", "good"), "n0", 0),))
    )
    tight = dataclasses.replace(job("tight", "poor", at=9.0), max_slowdown=1.0)
    queue = WaitQueue([*(job(f"like-{i}", "poor", at=float(i)) for i in range(5)), tight])
    policy = _Counting("horus")
    result = SchedulingCycle(policy).run(view, queue, explain=lambda request: True)
    assert policy.explained == ["like-0", "tight"]
    assert len(result.explanations) == 6
    assert len({result.explanations[f"like-{i}"] for i in range(5)}) == 1
    assert result.explanations["tight"] != result.explanations["like-0"]


def test_a_question_answered_with_nothing_is_asked_again_only_when_what_the_policy_saw_changed() -> None:
    cluster = nodes(1, gpus=1)
    index = ClusterIndex(cluster, (running(job("old", "good"), "n0", 0),))
    view = dataclasses.replace(snapshot(cluster), index=index)
    policy = _Counting("exclusive")
    cycle = SchedulingCycle(policy)
    queue = WaitQueue([job("a", "good", at=1.0)])
    assert not cycle.run(view, queue).assignments and policy.asked == 1
    queue.add(job("later", "good", at=2.0))  # behind the job the policy read: nothing it saw changed
    assert not cycle.run(dataclasses.replace(view, now=5.0), queue).assignments and policy.asked == 1
    queue.add(dataclasses.replace(job("urgent", "good", at=3.0), priority=1))  # ahead of it: news
    assert not cycle.run(view, queue).assignments and policy.asked == 2
    index.remove("old")  # the cluster changed; exclusive's answer is Settled: no confirming call
    assert [a.job for a in cycle.run(view, queue).assignments] == ["urgent"] and policy.asked == 3


def test_without_a_borrowed_index_every_cycle_asks() -> None:
    policy = _Counting("exclusive")
    cycle = SchedulingCycle(policy)
    full = snapshot(nodes(1, gpus=1), running(job("old", "good"), "n0", 0))
    queue = WaitQueue([job("a", "good")])
    cycle.run(full, queue)
    cycle.run(full, queue)
    assert policy.asked == 2


def test_a_job_queued_again_with_another_request_is_judged_again() -> None:
    """A cycle's walk takes the jobs the last walk found feasible as feasible without looking them up
    only where the job is that very request: a job requeued with a request no node can run is judged."""
    cluster = nodes(1, gpus=1)
    index = ClusterIndex(cluster, (running(job("old", "good"), "n0", 0),))
    view = dataclasses.replace(snapshot(cluster), index=index)
    queue = WaitQueue([job("a", "good"), job("b", "good"), job("c", "good")])
    cycle = _cycle()
    first = cycle.run(view, queue, explain=lambda request: True)
    assert set(first.explanations) == {"a", "b", "c"} and not first.unsatisfiable
    queue.add(job("b", "giant"))  # replaces b's request
    again = cycle.run(view, queue, explain=lambda request: True)
    assert {key: problem.cause for key, problem in again.unsatisfiable.items()} == {"b": Cause.MEMORY}
    assert set(again.explanations) == {"a", "c"}
