"""las preemption (placement/preemption.py): whom a waiting job preempts, whom never, and (properties)
that no other order ever preempts and that a plan never preempts a job twice or gives a GPU twice."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_builders import job, nodes, predictor, running

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.preemption import Preemption, PreemptionSettings, Service, waiting_level
from horus_operator.placement.queueorder import LAS_LEVELS_GPU_S, Ordering, QueueOrder, Standing, Starvation
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, JobRequest, RunningJob

SETTINGS = PreemptionSettings()
LEVEL_1 = LAS_LEVELS_GPU_S[0] + 1.0  # attained GPU-seconds just past the first threshold
NOW = 100_000.0


def cycle(order: QueueOrder = QueueOrder.LAS, starvation: Starvation | None = None) -> SchedulingCycle:
    ordering = Ordering(order, starvation=starvation or Starvation(max_wait_s=None))
    return SchedulingCycle(make_policy("exclusive", predictor=predictor()), ordering=ordering)


def request(
    key: str, *, gpus: int = 1, at: float = NOW, priority: int = 0, attained: float = 0.0
) -> JobRequest:
    return dataclasses.replace(job(key, "good", gpus=gpus, at=at), priority=priority, attained_gpu_s=attained)


def plan(
    the_cycle: SchedulingCycle,
    jobs: list[RunningJob],
    waiting: list[JobRequest],
    service: dict[str, Service],
    *,
    node_count: int = 1,
    gpus: int = 2,
) -> list[Preemption]:
    snapshot = ClusterSnapshot(nodes=nodes(node_count, gpus), running=tuple(jobs), now=NOW)
    queue = the_cycle.queue(waiting)
    queue.advance(NOW)
    return the_cycle.preemptions(snapshot, queue, service, SETTINGS)


def served(attained: float, since: float = 0.0, preemptions: int = 0) -> Service:
    return Service(attained_gpu_s=attained, running_since=since, preemptions=preemptions)


def full_cluster() -> tuple[list[RunningJob], dict[str, Service]]:
    """Two GPUs: `old` (level 2) on GPU 0, `mid` (level 1) on GPU 1, both past their protected time."""
    jobs = [running(request("old", at=0.0), "n0", 0), running(request("mid", at=0.0), "n0", 1)]
    return jobs, {"old": served(10 * LAS_LEVELS_GPU_S[1]), "mid": served(LEVEL_1)}


def test_a_new_job_preempts_the_running_job_of_most_attained_service() -> None:
    jobs, service = full_cluster()
    made = plan(cycle(), jobs, [request("new")], service)
    assert [(p.job, p.for_job, p.node, p.gpu_indices) for p in made] == [("old", "new", "n0", (0,))]
    assert "level 0" in made[0].reason and "level 2" in made[0].reason


def test_two_new_jobs_preempt_two_running_jobs_never_one_twice() -> None:
    jobs, service = full_cluster()
    made = plan(cycle(), jobs, [request("new", at=NOW), request("newer", at=NOW + 1)], service)
    assert [(p.job, p.for_job) for p in made] == [("old", "new"), ("mid", "newer")]


@pytest.mark.parametrize("order", [QueueOrder.FIFO, QueueOrder.SHORTEST_REMAINING])
def test_no_other_order_preempts(order: QueueOrder) -> None:
    jobs, service = full_cluster()
    assert plan(cycle(order), jobs, [request("new")], service) == []


def test_only_a_lower_level_preempts() -> None:
    jobs, service = full_cluster()
    # A waiting job of level 1 may preempt the level-2 job, not the level-1 one; one of level 2 neither.
    made = plan(cycle(), jobs, [request("one", attained=LEVEL_1), request("two", attained=4e4)], service)
    assert [(p.job, p.for_job) for p in made] == [("old", "one")]


def test_running_jobs_of_level_0_protected_or_preempted_enough_are_never_preempted() -> None:
    jobs, _ = full_cluster()
    young = {"old": served(100.0), "mid": served(LAS_LEVELS_GPU_S[0] - 1)}
    assert plan(cycle(), jobs, [request("new")], young) == []
    just_started = {key: served(1e6, since=NOW - SETTINGS.protected_s + 1) for key in ("old", "mid")}
    assert plan(cycle(), jobs, [request("new")], just_started) == []
    worn = {key: served(1e6, preemptions=SETTINGS.max_per_job) for key in ("old", "mid")}
    assert plan(cycle(), jobs, [request("new")], worn) == []


def test_a_job_that_checkpoints_faster_is_protected_for_less() -> None:
    """Protection is `min_run_over_cost` x what a preemption costs the job: its own grace period to
    checkpoint (as a move's cost is) plus the restart."""
    quick = PreemptionSettings(min_run_s=0.0, restart_cost_s=0.0)
    jobs, _ = full_cluster()
    snapshot = ClusterSnapshot(nodes=nodes(1, 2), running=tuple(jobs), now=NOW)
    started = NOW - 20.0  # past 4 x 3 s, not past 4 x the default 30 s

    def planned(grace: float | None) -> list[str]:
        service = {key: Service(1e6, started, grace_period_s=grace) for key in ("old", "mid")}
        the_cycle = cycle()
        queue = the_cycle.queue([request("new")])
        queue.advance(NOW)
        return [p.job for p in the_cycle.preemptions(snapshot, queue, service, quick)]

    assert quick.protected_for(3.0) == 12.0 and quick.protected_for(None) == quick.protected_s == 120.0
    assert planned(None) == [] and planned(30.0) == []
    assert len(planned(3.0)) == 1


def test_a_running_job_of_higher_priority_is_never_preempted() -> None:
    jobs = [running(request("vip", priority=1), "n0", 0), running(request("plain"), "n0", 1)]
    service = {"vip": served(1e6), "plain": served(LEVEL_1)}
    made = plan(cycle(), jobs, [request("new")], service)
    assert [p.job for p in made] == ["plain"]


def test_a_job_that_fits_a_free_gpu_preempts_nothing() -> None:
    jobs, service = full_cluster()
    made = plan(cycle(), jobs, [request("new")], service, gpus=3)
    assert made == []


def test_a_multi_gpu_job_preempts_on_one_node_only_where_it_then_fits() -> None:
    # Two nodes of two GPUs: n0 holds one long job on GPU 0 (GPU 1 empty), n1 two long jobs. A 2-GPU job
    # needs one preemption on n0, two on n1: n0.
    jobs = [
        running(request("a", at=0.0), "n0", 0),
        running(request("b", at=0.0), "n1", 0),
        running(request("c", at=0.0), "n1", 1),
    ]
    service = {key: served(1e6) for key in ("a", "b", "c")}
    made = plan(cycle(), jobs, [request("wide", gpus=2)], service, node_count=2)
    assert [(p.job, p.node) for p in made] == [("a", "n0")]


def test_a_starved_job_counts_as_level_0() -> None:
    starved = request("starved", at=0.0, attained=LEVEL_1)
    assert waiting_level(starved, Standing.STARVED) == 0
    assert waiting_level(starved, Standing.WAITING) == 1
    jobs = [running(request("mid", at=0.0), "n0", 0)]
    the_cycle = cycle(starvation=Starvation(max_wait_s=3600.0))
    made = plan(the_cycle, jobs, [starved], {"mid": served(LEVEL_1)}, gpus=1)
    assert [(p.job, p.for_job) for p in made] == [("mid", "starved")]


def test_a_preempted_job_starves_from_when_it_queued_again() -> None:
    ordering = Ordering(QueueOrder.LAS, starvation=Starvation(max_wait_s=3600.0))
    again = dataclasses.replace(request("again", at=0.0, attained=LEVEL_1), queued_at=NOW)
    assert ordering.starves_at(again) == NOW + 3600.0
    assert ordering.starves_at(dataclasses.replace(again, queued_at=None)) == 3600.0


# -- properties ------------------------------------------------------------------------------------

_state = st.tuples(
    st.lists(  # running jobs: (GPUs, attained GPU-seconds, seconds since start, priority)
        st.tuples(
            st.integers(1, 2),
            st.sampled_from([0.0, 100.0, LEVEL_1, 5e4]),
            st.sampled_from([0.0, 500.0, 5000.0]),
            st.integers(0, 1),
        ),
        min_size=3,
        max_size=8,
    ),
    st.lists(  # waiting jobs: (GPUs, attained, priority)
        st.tuples(st.integers(1, 2), st.sampled_from([0.0, LEVEL_1, 5e4]), st.integers(0, 1)),
        min_size=1,
        max_size=6,
    ),
)


def _build(
    state: tuple[list[tuple[int, float, float, int]], list[tuple[int, float, int]]],
) -> tuple[list[RunningJob], dict[str, Service], list[JobRequest]]:
    """Running jobs packed onto 3 nodes × 2 GPUs where they fit (whole GPUs), and the waiting ones."""
    free = {(f"n{n}", i) for n in range(3) for i in range(2)}
    jobs, service = [], {}
    for number, (gpus, attained, ran, priority) in enumerate(state[0]):
        for node in ("n0", "n1", "n2"):
            empty = sorted(i for n, i in free if n == node)
            if len(empty) >= gpus:
                key = f"r{number}"
                jobs.append(running(request(key, gpus=gpus, at=0.0, priority=priority), node, *empty[:gpus]))
                service[key] = served(attained, since=NOW - ran)
                free -= {(node, i) for i in empty[:gpus]}
                break
    waiting = [
        request(f"w{number}", gpus=gpus, at=NOW + number, priority=priority, attained=attained)
        for number, (gpus, attained, priority) in enumerate(state[1])
    ]
    return jobs, service, waiting


@settings(max_examples=150, deadline=None)
@given(_state, st.sampled_from([QueueOrder.FIFO, QueueOrder.SHORTEST_REMAINING]))
def test_property_fifo_and_shortest_remaining_never_preempt(state, order) -> None:  # type: ignore[no-untyped-def]
    jobs, service, waiting = _build(state)
    assert plan(cycle(order), jobs, waiting, service, node_count=3) == []


@settings(max_examples=300, deadline=None)
@given(_state)
def test_property_a_plan_preempts_each_job_once_by_the_rule_and_makes_room(state) -> None:  # type: ignore[no-untyped-def]
    jobs, service, waiting = _build(state)
    made = plan(cycle(), jobs, waiting, service, node_count=3)
    by_key = {job.request.key: job for job in jobs}
    waiting_by_key = {request.key: request for request in waiting}
    assert len({p.job for p in made}) == len(made)  # never one job twice
    index = ClusterIndex(nodes(3, 2), tuple(jobs))
    for preemption in made:
        victim, waiter = by_key[preemption.job], waiting_by_key[preemption.for_job]
        assert (preemption.node, preemption.gpu_indices) == (victim.node, victim.gpu_indices)
        attained, since = (
            service[victim.request.key].attained_gpu_s,
            service[victim.request.key].running_since,
        )
        assert NOW - since >= SETTINGS.protected_s
        assert waiting_level(waiter, Standing.WAITING) < waiting_level(
            dataclasses.replace(waiter, attained_gpu_s=attained), Standing.WAITING
        )
        assert victim.request.priority <= waiter.priority
    # Once the victims are gone, each job preempted for has its own whole GPUs on one node: its target.
    for key in {p.job for p in made}:
        index.remove(key)
    given: set[tuple[str, int]] = set()
    for target in {p.for_job: p.target for p in made}.values():
        assert len(target.gpu_indices) == waiting_by_key[target.request.key].gpus
        gpus = {(target.node, i) for i in target.gpu_indices}
        assert all(not index.slots[gpu].tenants for gpu in gpus)
        assert not gpus & given
        given |= gpus
