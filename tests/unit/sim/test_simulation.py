"""The simulator: a schedule worked out by hand, conservation, truth fallbacks and determinism."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from sim_builders import HEADER, ROWS, cycle, scenario, sim_job, truth, truth_table

from horus_operator.placement import oom
from horus_operator.placement.registry import POLICIES
from horus_operator.prediction.measured import TruthTable, read_host_cpus
from horus_operator.sim.engine import Simulation
from horus_operator.sim.metrics import SUMMARY_KEYS, lower_bound_makespan_s, summarise
from horus_operator.sim.workloads import synthetic


def run(tmp_path: Path, policy: str, jobs: list, gpus: int = 1):  # type: ignore[no-untyped-def]
    world = scenario(jobs, gpus)
    result = Simulation(world, cycle(policy), truth(tmp_path)).run()
    return world, result, {r.key: r for r in result.records}


def test_two_jobs_sharing_one_gpu_worked_by_hand(tmp_path: Path) -> None:
    # x (model a, 10 steps/s alone, 1000 steps) arrives at 0 and runs alone: 10 steps/s.
    # y (model b, 4 steps/s alone, 400 steps) arrives at 50; horus predicts a+b at 1.2x/1.5x (gain > 0.1,
    # both under 2.0/1.08) and co-locates. Truth: a 1.25x -> 8 steps/s, b 1.6x -> 2.5 steps/s.
    # At 50 x has 500 steps left: done at 50 + 500/8 = 112.5; y has done 62.5*2.5 = 156.25 steps by then,
    # 243.75 left alone at 4/s -> done at 112.5 + 60.9375 = 173.4375.
    world, result, jobs = run(
        tmp_path, "horus", [sim_job("x", "a", 1000, 10, 0), sim_job("y", "b", 400, 4, 50)]
    )
    assert jobs["x"].finish_s == pytest.approx(112.5)
    assert jobs["y"].start_s == 50
    assert jobs["y"].finish_s == pytest.approx(173.4375)
    assert jobs["y"].worst_true_slowdown == pytest.approx(1.6)
    summary = summarise(result, world)
    assert summary["makespan_s"] == pytest.approx(173.4375)
    assert summary["qos_violations"] == 0
    assert summary["truth_coverage"] == 1.0
    # busy 173.4375 s on the one GPU; throughput 1/1.25 + 1/1.6 = 1.425 for 62.5 s, 1 otherwise
    assert summary["normalised_throughput_per_gpu"] == pytest.approx((62.5 * 1.425 + 110.9375) / 173.4375)


def test_exclusive_runs_the_same_jobs_one_after_the_other(tmp_path: Path) -> None:
    _, _, jobs = run(tmp_path, "exclusive", [sim_job("x", "a", 1000, 10, 0), sim_job("y", "b", 400, 4, 50)])
    assert (jobs["y"].start_s, jobs["y"].finish_s) == (100, 200)


def test_a_placement_truth_says_cannot_share_restarts_the_job_whole(tmp_path: Path) -> None:
    # binpack puts c next to a (memory fits); truth says a+c cannot share: c restarts on a whole GPU.
    _, _, jobs = run(tmp_path, "binpack", [sim_job("x", "a", 1000, 10, 0), sim_job("z", "c", 20, 2, 1)])
    assert jobs["z"].oom_restarts == 1
    assert jobs["z"].start_s == 100 and jobs["z"].colocated_s == 0


def test_a_job_restarted_after_an_oom_queues_as_the_operator_retries_it(tmp_path: Path) -> None:
    # The operator's rule (placement/oom.py): alone, its memory raised from the 3,000 MiB it was placed
    # with.
    world = scenario([sim_job("x", "a", 1000, 10, 0), sim_job("z", "c", 20, 2, 1)])
    sim = Simulation(world, cycle("binpack"), truth(tmp_path))
    sim.run()
    assert sim.raised_mib == {"z": 3000.0 * oom.MEMORY_FACTOR}


def test_unmeasured_pairs_fall_back_to_the_predictor_and_lower_coverage(tmp_path: Path) -> None:
    # b+c is not in the truth table: the predictor's 1.3x stands in, and coverage drops below 1.
    world, result, jobs = run(tmp_path, "horus", [sim_job("x", "b", 400, 4, 0), sim_job("z", "c", 20, 2, 1)])
    assert jobs["z"].worst_true_slowdown == pytest.approx(1.3)
    assert summarise(result, world)["truth_coverage"] == 0.0


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_job_finishes_and_steps_are_conserved(tmp_path: Path, policy: str) -> None:
    table = truth_table(tmp_path)
    world = synthetic(table, random.Random(7), jobs=60, gpus=4)
    result = Simulation(world, cycle(policy), truth(tmp_path)).run()
    assert sorted(r.key for r in result.records) == sorted(j.request.key for j in world.jobs)
    for record in result.records:
        assert record.steps_done == pytest.approx(record.total_steps, rel=1e-9)
        assert record.arrival_s <= record.start_s < record.finish_s
        # a job never runs faster than alone
        assert record.finish_s - record.start_s >= record.isolated_s * (1 - 1e-9)
    assert result.samples[-1].time_s == max(r.finish_s for r in result.records)  # no stale events
    summary = summarise(result, world)
    assert tuple(summary) == SUMMARY_KEYS
    assert summary["makespan_s"] >= lower_bound_makespan_s(world) * (1 - 1e-9) or policy != "exclusive"


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_same_seed_same_schedule(tmp_path: Path, policy: str) -> None:
    def once() -> list:  # type: ignore[type-arg]
        world = synthetic(truth_table(tmp_path), random.Random(3), jobs=40, gpus=4)
        result = Simulation(world, cycle(policy), truth(tmp_path)).run()
        return [(r.key, r.node, r.gpu_indices, r.start_s, r.finish_s) for r in result.records]

    assert once() == once()


def test_lower_bound_is_work_over_gpus_or_the_latest_lone_finish(tmp_path: Path) -> None:
    world = scenario([sim_job("x", "a", 1000, 10, 0), sim_job("y", "b", 400, 4, 50)], gpus=2)
    # work: (100 + 100) / 2 = 100; latest lone finish: 50 + 100 = 150
    assert lower_bound_makespan_s(world) == 150


def test_a_job_no_node_fits_is_rejected_as_the_operator_fails_it(tmp_path: Path) -> None:
    wide = sim_job("wide", "a", 100, 10, 0)
    wide = replace(wide, request=replace(wide.request, gpus=2))
    world, result, jobs = run(tmp_path, "horus", [wide, sim_job("x", "a", 100, 10, 1)])
    assert list(jobs) == ["x"]
    assert result.rejected == {"wide": "no node has more than 1 GPUs"}
    assert summarise(result, world)["lower_bound_makespan_s"] == 10  # the bound counts only x


def test_a_higher_priority_overtakes_earlier_arrivals(tmp_path: Path) -> None:
    # x runs until 100; y (arrived at 1) and urgent (arrived at 2, priority 1) wait for the one GPU.
    urgent = sim_job("urgent", "b", 400, 4, 2)
    urgent = replace(urgent, request=replace(urgent.request, priority=1))
    _, _, jobs = run(
        tmp_path, "exclusive", [sim_job("x", "a", 1000, 10, 0), sim_job("y", "b", 400, 4, 1), urgent]
    )
    assert jobs["urgent"].start_s == 100 and jobs["y"].start_s == 200


def test_simulated_jobs_carry_the_host_cpus_their_pods_would_declare(tmp_path: Path) -> None:
    cpus = tmp_path / "cpus.csv"
    cpus.write_text("model,host_cpus,source\nb,4,four emulator workers\n")
    path = tmp_path / "truth.csv"
    path.write_text(HEADER + ROWS)
    table = TruthTable.from_csv(path, read_host_cpus(cpus))
    jobs = synthetic(table, random.Random(1), jobs=40, gpus=4, gpu="v100").jobs
    by_model = {job.request.workload.model: job.request.workload.host_cpus for job in jobs}
    assert by_model == {"a": 0.0, "b": 4.0, "c": 0.0}


def test_jobs_of_one_configuration_share_one_workload_object(tmp_path: Path) -> None:
    """Equal workloads as one object: the simulation's dictionaries keyed by workload then match keys
    by identity (`WorkloadPool`)."""
    path = tmp_path / "truth.csv"
    path.write_text(HEADER + ROWS)
    jobs = synthetic(TruthTable.from_csv(path), random.Random(1), jobs=40, gpus=4, gpu="v100").jobs
    workloads = [job.request.workload for job in jobs]
    assert len({id(workload) for workload in workloads}) == len(set(workloads)) < len(workloads)
