"""The simulator's side of the makespan guard: the horizon it keeps, and a schedule worked by hand."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from sim_builders import cycle, scenario, sim_job, truth, truth_table

from horus_operator.sim.engine import Simulation
from horus_operator.sim.horizon import Horizon
from horus_operator.sim.workloads import gavel_generator


def _known(job):  # type: ignore[no-untyped-def]
    """`job` with its remaining work known, as traces give it."""
    return replace(job, request=replace(job.request, remaining_s=job.isolated_duration_s))


def test_the_horizon_falls_with_the_work_done_and_drops_finished_jobs() -> None:
    horizon = Horizon(gpus=2)
    horizon.arrived(300.0)
    horizon.running("a", version=1, alone_finish_s=120.0)
    assert horizon.at(0.0, longest_waiting_s=50.0, version_of={"a": 1}.get) == 150.0  # 300 s of work / 2
    horizon.worked(100.0)
    assert horizon.at(20.0, longest_waiting_s=50.0, version_of={"a": 1}.get) == 120.0  # a's 100 s left
    assert horizon.at(20.0, longest_waiting_s=50.0, version_of={}.get) == 120.0  # 200 s / 2 = 100 s
    horizon.dropped(200.0)
    assert horizon.at(20.0, longest_waiting_s=0.0, version_of={}.get) == 20.0


def test_a_long_job_known_to_set_the_makespan_runs_alone(tmp_path: Path) -> None:
    # One GPU, both jobs at 0. x: 100 s alone, y: 10 s alone. Horizon max(100, 110 / 1) = 110: x may be
    # slowed 1.1x at most, under the sharing floor, so it runs alone (longest first) and y follows.
    x, y = _known(sim_job("x", "a", 1000, 10, 0)), _known(sim_job("y", "b", 40, 4, 0))
    result = Simulation(scenario([x, y]), cycle("horus"), truth(tmp_path)).run()
    jobs = {record.key: record for record in result.records}
    assert (jobs["x"].start_s, jobs["x"].finish_s, jobs["x"].worst_true_slowdown) == (0.0, 100.0, 1.0)
    assert (jobs["y"].start_s, jobs["y"].finish_s) == (100.0, pytest.approx(110.0))


def test_without_known_durations_the_same_jobs_share(tmp_path: Path) -> None:
    # No remaining work known: no horizon, and horus pairs them (a 1.25x, b 1.6x by truth).
    x, y = sim_job("x", "a", 1000, 10, 0), sim_job("y", "b", 40, 4, 0)
    result = Simulation(scenario([x, y]), cycle("horus"), truth(tmp_path)).run()
    assert all(record.colocated_s > 0 for record in result.records)


def test_gavel_generator_draws_gavels_durations_all_at_once(tmp_path: Path) -> None:
    world = gavel_generator(truth_table(tmp_path), random.Random(1), jobs=200, gpus=8)
    durations = [job.isolated_duration_s for job in world.jobs]
    assert all(60 * 10**1.5 <= d <= 60 * 10**4 for d in durations)
    long_share = sum(d > 60 * 10**3 for d in durations) / len(durations)
    assert 0.1 < long_share < 0.3  # Gavel: 20% from the long band
    assert {job.arrival_s for job in world.jobs} == {0.0}
    assert [job.request.remaining_s for job in world.jobs] == pytest.approx(durations)
    assert world == gavel_generator(truth_table(tmp_path), random.Random(1), jobs=200, gpus=8)
