"""las preemption in the simulator: a schedule worked out by hand, and (properties) that a preempted job
is never lost nor placed twice, keeps its progress, and only gains attained service."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import predictor, scenario, sim_job, truth

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.preemption import Preemption, PreemptionSettings
from horus_operator.placement.queueorder import Ordering, QueueOrder
from horus_operator.placement.registry import make_policy
from horus_operator.sim.engine import Simulation
from horus_operator.sim.preemption import Preempting
from horus_operator.sim.results import RunResult
from horus_operator.sim.workloads import SimJob

SETTINGS = PreemptionSettings(grace_period_s=30.0, restart_cost_s=120.0, min_run_s=600.0)


def las_cycle(policy: str = "exclusive", order: QueueOrder = QueueOrder.LAS) -> SchedulingCycle:
    believed = predictor()
    return SchedulingCycle(make_policy(policy, predictor=believed), ordering=Ordering(order))


class Checked(Simulation):
    """A simulation that checks, after every decision round, that each job is in exactly one place
    (waiting, running or done) and that a job's attained service never falls."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.attained: dict[str, float] = {}
        self.preempted: list[str] = []
        self.for_jobs: list[str] = []

    def decide(self, all_arrived: bool = False) -> None:
        super().decide(all_arrived)
        waiting = {request.key for request in self.queue}
        done = {record.key for record in self.records}
        assert not waiting & set(self.active) and not done & (waiting | set(self.active))
        assert set(self.index.jobs) == set(self.active)
        assert set(self.suspended) <= waiting  # a preempted job waits until it runs again
        for request in self.queue:
            assert request.attained_gpu_s >= self.attained.get(request.key, 0.0)
            self.attained[request.key] = request.attained_gpu_s
        for key, active in self.active.items():
            now = active.attained_gpu_s(self.now)
            assert now >= self.attained.get(key, 0.0)
            self.attained[key] = now

    def _stop(self, preemption: Preemption) -> None:
        self.preempted.append(preemption.job)
        self.for_jobs.append(preemption.for_job)
        super()._stop(preemption)

    def _preempt(self) -> bool:
        before = len(self.for_jobs)
        preempted = super()._preempt()
        # Alone on whole GPUs a job always fits here: each job preempted for has started at once.
        assert all(key not in self.queue_keys() for key in self.for_jobs[before:])
        return preempted

    def queue_keys(self) -> set[str]:
        return {request.key for request in self.queue}


def run(tmp_path: Path, jobs: list[SimJob], *, gpus: int = 1, preempt: bool = True, **kw) -> RunResult:  # type: ignore[no-untyped-def]
    preempting = Preempting(SETTINGS) if preempt else None
    return Checked(scenario(jobs, gpus), las_cycle(**kw), truth(tmp_path), preemption=preempting).run()


@pytest.mark.interpreted  # `Checked` subclasses the simulation: no compiled run (make test-compiled)
def test_a_short_job_preempts_a_long_one_once_it_crosses_a_level_worked_by_hand(tmp_path: Path) -> None:
    # One GPU, whole GPUs only (exclusive). x (a, 10 steps/s, 100,000 steps: 10,000 s alone) starts at 0;
    # y (b, 4 steps/s, 4,000 steps: 1,000 s) arrives at 3,000, when x has attained 3,000 GPU-s (level 0):
    # no preemption. At 3,600 x crosses the first threshold (level 1) and has run past 600 s: y preempts
    # it and runs to 4,600. x, 36,000 steps done, restarts at 4,600, makes no progress for 150 s, and its
    # 64,000 steps left take 6,400 s: done at 11,150.
    jobs = [sim_job("x", "a", 100_000, 10, 0), sim_job("y", "b", 4_000, 4, 3_000)]
    result = run(tmp_path, jobs)

    records = {record.key: record for record in result.records}
    x, y = records["x"], records["y"]
    assert (y.start_s, y.finish_s) == (pytest.approx(3_600.0), pytest.approx(4_600.0))
    assert x.start_s == 0.0  # its first start: its wait is until it first ran
    assert x.finish_s == pytest.approx(11_150.0)
    assert (x.steps_done, y.steps_done) == (pytest.approx(100_000.0), pytest.approx(4_000.0))
    assert result.preemption["preemptions"] == 1


@pytest.mark.interpreted  # `Checked` subclasses the simulation: no compiled run (make test-compiled)
def test_without_preemption_las_is_first_come_first_served(tmp_path: Path) -> None:
    jobs = [sim_job("x", "a", 100_000, 10, 0), sim_job("y", "b", 4_000, 4, 3_000)]
    result = run(tmp_path, jobs, preempt=False)
    records = {record.key: record for record in result.records}
    assert records["x"].finish_s == pytest.approx(10_000.0)
    assert records["y"].finish_s == pytest.approx(11_000.0)
    assert result.preemption == {}


def test_under_fifo_the_preemption_rule_is_inert(tmp_path: Path) -> None:
    jobs = [sim_job("x", "a", 100_000, 10, 0), sim_job("y", "b", 4_000, 4, 3_000)]
    world = scenario(jobs, 1)
    plain = Simulation(world, las_cycle(order=QueueOrder.FIFO), truth(tmp_path)).run()
    armed = Simulation(
        world, las_cycle(order=QueueOrder.FIFO), truth(tmp_path), preemption=Preempting(SETTINGS)
    ).run()
    assert plain.records == armed.records
    assert armed.preemption["preemptions"] == 0


_jobs = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(500, 60_000),  # steps
        st.integers(0, 20_000),  # arrival
    ),
    min_size=1,
    max_size=10,
)


@pytest.mark.interpreted  # `Checked` subclasses the simulation: no compiled run (make test-compiled)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_jobs, st.sampled_from(["exclusive", "horus", "binpack"]), st.integers(1, 3))
def test_property_no_job_is_lost_or_placed_twice_and_progress_is_kept(
    tmp_path: Path, specs, policy, gpus
) -> None:  # type: ignore[no-untyped-def]
    alone = {"a": 10.0, "b": 4.0}
    jobs = [sim_job(f"j{n}", model, steps, alone[model], at) for n, (model, steps, at) in enumerate(specs)]
    result = run(tmp_path, jobs, gpus=gpus, policy=policy)

    assert sorted(record.key for record in result.records) == sorted(job.request.key for job in jobs)
    for record in result.records:
        assert record.steps_done == pytest.approx(record.total_steps)
        # Preempted or not, a job takes at least its time alone after it first started.
        assert record.finish_s - record.start_s >= record.isolated_s - 1e-6
