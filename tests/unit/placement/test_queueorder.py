"""Queue orders: each order's key, the starvation bound, critical jobs at the end of a trace, and (a
property) that a job past its bound gets the next GPU that frees up, the earliest due first."""

from __future__ import annotations

import dataclasses
import heapq
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import job, nodes, predictor

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.queueorder import (
    CRITICAL_SHARE,
    LAS_LEVELS_GPU_S,
    ORDERS,
    Ordering,
    QueueOrder,
    Standing,
    Starvation,
)
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, JobRequest, RunningJob
from horus_operator.placement.waitqueue import WaitQueue

NO_BOUND = Starvation(max_wait_s=None)


def request(
    key: str,
    *,
    at: float = 0.0,
    remaining: float | None = None,
    gpus: int = 1,
    priority: int = 0,
    attained: float = 0.0,
) -> JobRequest:
    made = job(key, "good", gpus=gpus, at=at)
    return dataclasses.replace(made, remaining_s=remaining, priority=priority, attained_gpu_s=attained)


def served(order: QueueOrder, *requests: JobRequest, starvation: Starvation = NO_BOUND) -> list[str]:
    return [r.key for r in WaitQueue(requests, ordering=Ordering(order, starvation=starvation))]


def test_every_order_is_registered() -> None:
    assert set(ORDERS) == set(QueueOrder)


@pytest.mark.parametrize("order", list(QueueOrder))
def test_priority_comes_first_in_every_order(order: QueueOrder) -> None:
    low = request("low", at=0.0, remaining=10.0)
    high = request("high", at=5.0, remaining=1000.0, priority=1, attained=1e6)
    assert served(order, low, high) == ["high", "low"]


def test_fifo_serves_the_oldest_then_the_longest_among_jobs_submitted_together() -> None:
    jobs = (
        request("late", at=2.0, remaining=1.0),
        request("short", at=1.0, remaining=5.0),
        request("long", at=1.0, remaining=50.0),
    )
    assert served(QueueOrder.FIFO, *jobs) == ["long", "short", "late"]


def test_shortest_remaining_weighs_work_by_gpus_and_puts_unknown_lengths_last_in_las_order() -> None:
    jobs = (
        request("wide", at=0.0, remaining=30.0, gpus=4),  # 120 GPU-seconds
        request("narrow", at=1.0, remaining=100.0),  # 100 GPU-seconds
        request("unknown-served", at=0.0, attained=2 * LAS_LEVELS_GPU_S[0]),
        request("unknown-new", at=5.0),
    )
    assert served(QueueOrder.SHORTEST_REMAINING, *jobs) == [
        "narrow", "wide", "unknown-new", "unknown-served",
    ]  # fmt: skip


def test_shortest_remaining_reads_lengths_where_the_caller_says() -> None:
    estimates = {"a": 10.0, "b": 1.0}
    ordering = Ordering(
        QueueOrder.SHORTEST_REMAINING, starvation=NO_BOUND, remaining=lambda r: estimates[r.key]
    )
    key = ordering.key
    a, b = request("a", remaining=1.0), request("b", remaining=10.0)  # the truth says the opposite
    assert key(b, Standing.WAITING) < key(a, Standing.WAITING)


def test_las_serves_the_least_attained_level_first_and_first_come_within_a_level() -> None:
    level = LAS_LEVELS_GPU_S[0]
    jobs = (
        request("served-long", at=0.0, attained=level * 20),
        request("served-a-bit", at=1.0, attained=level / 2),  # same level as never served
        request("new", at=2.0),
        request("served-more", at=0.5, attained=level * 2),
    )
    assert served(QueueOrder.LAS, *jobs) == ["served-a-bit", "new", "served-more", "served-long"]


@pytest.mark.parametrize(
    ("starvation", "length", "expected"),
    [
        (Starvation(max_wait_s=100.0), None, 110.0),
        (Starvation(max_wait_s=100.0, length_multiple=2.0), 30.0, 70.0),
        (Starvation(max_wait_s=100.0, length_multiple=2.0), 80.0, 110.0),
        (Starvation(max_wait_s=None, length_multiple=2.0), None, math.inf),
        (NO_BOUND, 5.0, math.inf),
    ],
)
def test_a_job_starves_at_the_earlier_of_its_bounds(
    starvation: Starvation, length: float | None, expected: float
) -> None:
    assert starvation.starves_at(10.0, length) == expected


@pytest.mark.parametrize(
    ("starvation", "length", "expected"),
    [
        (Starvation(max_wait_s=100.0), 5.0, 110.0),  # no multiple: due when it starves
        (Starvation(max_wait_s=100.0, length_multiple=2.0), 30.0, 70.0),
        (Starvation(max_wait_s=100.0, length_multiple=2.0), 80.0, 170.0),  # starves at 110, not capped
        (Starvation(max_wait_s=100.0, length_multiple=2.0), None, 110.0),
        (NO_BOUND, 5.0, math.inf),
    ],
)
def test_a_job_is_due_once_its_wait_reaches_the_multiple_of_its_length(
    starvation: Starvation, length: float | None, expected: float
) -> None:
    assert starvation.due_at(10.0, length) == expected


def test_the_starved_line_up_by_when_they_were_due() -> None:
    """Under an overload where everyone waits past the cap, lining the starved up by arrival is fifo;
    by due time a short job queued a little later still goes first, and a long one is overtaken only
    by jobs due before it."""
    starvation = Starvation(max_wait_s=100.0, length_multiple=2.0)
    ordering = Ordering(QueueOrder.SHORTEST_REMAINING, starvation=starvation)
    queue = WaitQueue(
        [
            request("long", at=0.0, remaining=500.0),  # starves at 100, due at 1000
            request("unknown", at=10.0),  # starves and is due at 110
            request("short", at=20.0, remaining=40.0),  # starves and is due at 100
            request("short-late", at=990.0, remaining=40.0),  # due at 1070: after "long"
        ],
        ordering=ordering,
    )
    queue.advance(1100.0)
    assert [queue.standing(r.key) for r in queue] == [Standing.STARVED] * 4
    assert [r.key for r in queue] == ["short", "unknown", "long", "short-late"]
    assert ordering.reason(queue[0], Standing.STARVED).endswith("the earliest due first")


def test_a_starved_job_moves_to_the_front_of_its_priority_only() -> None:
    ordering = Ordering(QueueOrder.SHORTEST_REMAINING, starvation=Starvation(max_wait_s=100.0))
    queue = WaitQueue(
        [
            request("old-long", at=0.0, remaining=1000.0),
            request("new-short", at=50.0, remaining=1.0),
            request("urgent", at=60.0, remaining=5000.0, priority=1),
        ],
        ordering=ordering,
    )
    queue.advance(99.0)
    assert [r.key for r in queue] == ["urgent", "new-short", "old-long"]
    queue.advance(100.0)
    assert [r.key for r in queue] == ["urgent", "old-long", "new-short"]
    queue.add(request("already-starved", at=0.0, remaining=2000.0))  # queued past its bound
    # the starved line up as fifo would: submitted together, the longer first
    assert [r.key for r in queue] == ["urgent", "already-starved", "old-long", "new-short"]
    assert queue.remove("old-long").key == "old-long"
    assert [r.key for r in queue] == ["urgent", "already-starved", "new-short"]


def test_at_the_end_of_a_trace_a_job_that_would_set_the_makespan_goes_first() -> None:
    jobs = [request("short", remaining=10.0), request("long", remaining=100.0)]
    srpt = WaitQueue(jobs, ordering=Ordering(QueueOrder.SHORTEST_REMAINING, starvation=NO_BOUND))
    assert CRITICAL_SHARE * 200.0 > 100.0 > CRITICAL_SHARE * 150.0
    srpt.advance(0.0, horizon=200.0)  # 100 s of work, 200 s left: not yet critical
    assert [r.key for r in srpt] == ["short", "long"]
    srpt.advance(50.0, horizon=200.0)
    assert [r.key for r in srpt] == ["long", "short"]
    las = WaitQueue(jobs, ordering=Ordering(QueueOrder.LAS, starvation=NO_BOUND))
    las.advance(1.0, horizon=10.0)  # las reads no lengths
    assert [r.key for r in las] == ["long", "short"]  # submitted together: by key


# (arrival, length, priority) of single-GPU jobs on two GPUs
arrivals = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 40), st.integers(0, 1)), min_size=1, max_size=25
)


@given(arrivals, st.sampled_from(list(QueueOrder)), st.integers(1, 30), st.sampled_from([None, 0.5, 2.0]))
@settings(max_examples=150, deadline=None)
def test_no_job_waits_past_its_bound_while_a_gpu_frees_up(
    jobs: list[tuple[int, int, int]], order: QueueOrder, max_wait: int, multiple: float | None
) -> None:
    """Replays the jobs through the cycle (exclusive GPUs): whenever a cycle starts a job that has not
    starved, no job of its priority that has starved is left waiting — a freed GPU goes to the starved
    first — a starved job starts before none due earlier, and every job starts."""
    starvation = Starvation(max_wait_s=float(max_wait), length_multiple=multiple)
    ordering = Ordering(order, starvation=starvation)
    cycle = SchedulingCycle(make_policy("exclusive", predictor=predictor()), ordering=ordering)
    requests = [
        request(f"j{i:02d}", at=float(at), remaining=float(length), priority=priority)
        for i, (at, length, priority) in enumerate(jobs)
    ]
    started = _replay(cycle, requests, {r.key: r.remaining_s or 0.0 for r in requests}, starvation)
    assert started == {r.key for r in requests}


def _replay(
    cycle: SchedulingCycle, requests: list[JobRequest], length: dict[str, float], starvation: Starvation
) -> set[str]:
    cluster = nodes(1, gpus=2)
    index = ClusterIndex(cluster)
    queue = cycle.queue()
    times = sorted({r.submitted_at for r in requests})
    finishing: list[tuple[float, str]] = []
    started: set[str] = set()
    while times or finishing:
        now = min(times[0] if times else math.inf, finishing[0][0] if finishing else math.inf)
        while finishing and finishing[0][0] <= now:
            index.remove(heapq.heappop(finishing)[1])
        while times and times[0] <= now:
            times.pop(0)
        for r in requests:
            if r.submitted_at == now:
                queue.add(r)
        result = cycle.run(ClusterSnapshot(nodes=cluster, now=now, index=index), queue)
        placed = [result.placed[a.job] for a in result.assignments]
        for r, assignment in zip(placed, result.assignments, strict=True):
            queue.remove(r.key)
            index.add(RunningJob(r, assignment.node, assignment.gpu_indices))
            heapq.heappush(finishing, (now + length[r.key], r.key))
            started.add(r.key)
        left_starved = [w for w in queue if _starved(starvation, w, now)]
        for r in placed:
            if not _starved(starvation, r, now):
                assert r.priority not in {w.priority for w in left_starved}, (now, r.key)
            due_earlier = [
                w.key
                for w in left_starved
                if w.priority == r.priority and _due(starvation, w) < _due(starvation, r)
            ]
            assert not due_earlier, (now, r.key, due_earlier)
    return started


def _starved(starvation: Starvation, request: JobRequest, now: float) -> bool:
    return starvation.starves_at(request.submitted_at, request.remaining_s) <= now


def _due(starvation: Starvation, request: JobRequest) -> float:
    return starvation.due_at(request.submitted_at, request.remaining_s)
