"""`real-mix-900` (issue 46): a real cluster's mix of job sizes, drawn reproducibly."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_builders import HEADER, ROWS, predictor, truth_table

from horus_operator.commands import simulate as command
from horus_operator.sim import workloads
from horus_operator.sim.workloads import REAL_MIX_SIZES, draw_real_mix, real_mix_900


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_the_sizes_are_the_published_mix_on_8_nodes_of_8(tmp_path: Path, seed: int) -> None:
    world = real_mix_900(truth_table(tmp_path), random.Random(seed))
    sizes = Counter(job.request.gpus for job in world.jobs)
    assert sizes == dict(REAL_MIX_SIZES) == {1: 618, 2: 96, 4: 90, 8: 96}
    # within a tolerance of the shares too (exact here: the counts are drawn without replacement)
    assert sizes[1] / len(world.jobs) == pytest.approx(0.687, abs=0.005)
    assert [len(node.gpus) for node in world.nodes] == [8] * 8


def test_arrivals_span_five_days_and_the_load_is_as_stated(tmp_path: Path) -> None:
    world = real_mix_900(truth_table(tmp_path), random.Random(1))
    arrivals = [job.arrival_s for job in world.jobs]
    assert arrivals == sorted(arrivals)
    assert arrivals[0] >= 0.0 and arrivals[-1] <= workloads.REAL_MIX_SPAN_S
    work = sum(job.isolated_duration_s * job.request.gpus for job in world.jobs)
    offered = workloads.REAL_MIX_LOAD * world.gpu_count * workloads.REAL_MIX_SPAN_S
    assert work == pytest.approx(offered)


def test_a_seed_draws_the_same_jobs_and_another_seed_others(tmp_path: Path) -> None:
    table = truth_table(tmp_path)
    assert real_mix_900(table, random.Random(3)) == real_mix_900(table, random.Random(3))
    assert real_mix_900(table, random.Random(3)).jobs != real_mix_900(table, random.Random(4)).jobs


def test_other_counts_draw_those_counts(tmp_path: Path) -> None:
    world = draw_real_mix(truth_table(tmp_path), random.Random(1), sizes=((1, 5), (8, 2)))
    assert sorted(job.request.gpus for job in world.jobs) == [1, 1, 1, 1, 1, 8, 8]
    assert world.name == "real-mix-7"


def test_simulate_runs_it_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command, "_predictor", lambda models: predictor())
    # A smaller mix through the same command path: the named workload's shape, fewer jobs.
    monkeypatch.setattr(
        command,
        "real_mix_900",
        lambda table, rng, gpu: draw_real_mix(table, rng, sizes=((1, 20), (2, 3), (4, 3), (8, 3)), gpu=gpu),
    )
    truth = tmp_path / "truth.csv"
    truth.write_text(HEADER + ROWS)
    args = ["--workload", "real-mix-900", "--truth", str(truth), "--output", str(tmp_path / "out")]
    result = CliRunner().invoke(command.simulate, args)
    assert result.exit_code == 0, result.output
    assert "real-mix-29: 29 jobs on 64 GPUs" in result.output
    assert CliRunner().invoke(command.simulate, [*args, "--jobs", "5"]).exit_code != 0
