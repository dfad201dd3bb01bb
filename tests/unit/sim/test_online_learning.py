"""`--online-learning` in the simulator: what a run feeds the correction, worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_builders import HEADER, predictor, scenario, sim_job, truth

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.registry import make_policy
from horus_operator.prediction.api import OBSERVED, PRIOR, Basis, Workload
from horus_operator.prediction.correction import CorrectedPredictor
from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.engine import Simulation
from horus_operator.sim.learning import OnlineLearning
from horus_operator.sim.truth import Truth

A, B = Workload("a", 1), Workload("b", 1)


def learn_from(tmp_path: Path, jobs: list) -> OnlineLearning:  # type: ignore[type-arg]
    world = scenario(jobs)
    learning = OnlineLearning(CorrectedPredictor(predictor()), "v100", 16384)
    decides = learning.predictor
    Simulation(
        world,
        SchedulingCycle(make_policy("horus", predictor=decides)),
        truth(tmp_path),
        learning=learning,
    ).run()
    return learning


@pytest.mark.parametrize(("y_steps", "learned_at"), [(800, [160.0, 285.0]), (400, [160.0])])
def test_a_co_tenancy_is_learned_a_minute_in_once_the_jobs_rate_alone_is_known(
    tmp_path: Path, y_steps: float, learned_at: list[float]
) -> None:
    # x (a, 10 steps/s alone, 2000 steps) runs alone from 0: a's rate alone is known at 60 s. y (b,
    # 4 steps/s) arrives at 100 and shares (truth: a 1.25x, b 1.6x). At 160 both states have held a
    # minute: x's sample (1.25x next to b) is learned; y's waits, no b was ever seen alone. x has 1000
    # steps left at 8/s at 100, done at 225; y has done 125 s x 2.5 = 312.5 steps by then. With 800
    # steps it runs alone 121.9 s more: b's rate alone is known at 285 and y's sample (1.6x next to a)
    # learned then. With 400 it ends at 246.9, before anyone could see it alone: its sample is lost.
    # Limits generous enough that the prior's upper end on this unproven GPU admits the pair.
    jobs = [
        sim_job("x", "a", 2000, 10, 0, max_slowdown=3.0),
        sim_job("y", "b", y_steps, 4, 100, max_slowdown=3.0),
    ]
    learning = learn_from(tmp_path, jobs)

    assert learning.learned == pytest.approx(learned_at)
    corrected = learning.predictor
    # b's prediction rests on its own sample where learned, else on the GPU level's one (a's)
    assert corrected.basis("v100", [A, B]) == (Basis(OBSERVED, 1), Basis(OBSERVED, 1))
    assert 1.2 < corrected.slowdowns("v100", [A, B])[0] < 1.25  # type: ignore[index]  # toward the truth


def test_a_co_tenancy_shorter_than_a_minute_is_never_observed(tmp_path: Path) -> None:
    # y (b, 4 steps/s, 100 steps) joins x at 100 and runs 2.5 steps/s next to it: done at 140.
    learning = learn_from(tmp_path, [sim_job("x", "a", 2000, 10, 0), sim_job("y", "b", 100, 4, 100)])

    assert learning.learned == []
    assert learning.predictor.basis("v100", [A, B]) == (Basis(PRIOR, 0), Basis(PRIOR, 0))


def test_a_job_alone_a_minute_leaves_its_measured_busy_fraction_for_its_signature(tmp_path: Path) -> None:
    # x (a) runs alone from 0; its state has held a minute at 60 s, when a's util_a_alone (0.15) is kept.
    path = tmp_path / "truth.csv"
    path.write_text(HEADER.rstrip("\n") + ",util_a_alone,util_b_alone\nv100,a,1,b,1,10,4,8,2.5,0.15,\n")
    world = scenario([sim_job("x", "a", 2000, 10, 0)])
    learning = OnlineLearning(CorrectedPredictor(predictor()), "v100", 16384)
    decides = learning.predictor
    Simulation(
        world,
        SchedulingCycle(make_policy("horus", predictor=decides)),
        Truth(TruthTable.from_csv(path), fallback=predictor()),
        learning=learning,
    ).run()

    assert decides.correction.utilization("v100", A) == 0.15
    assert decides.correction.utilization("v100", B) is None  # never ran, and not measured
