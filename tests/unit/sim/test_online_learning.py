"""`--online-learning` in the simulator: what a run feeds the correction, worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_builders import predictor, scenario, sim_job, truth

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.registry import make_policy
from horus_operator.prediction.api import OBSERVED, PRIOR, Basis, Workload
from horus_operator.prediction.correction import CorrectedPredictor
from horus_operator.sim.engine import Simulation
from horus_operator.sim.learning import OnlineLearning

A, B, C = Workload("a", 1), Workload("b", 1), Workload("c", 1)


def learn_from(tmp_path: Path, jobs: list) -> OnlineLearning:  # type: ignore[type-arg]
    world = scenario(jobs)
    learning = OnlineLearning(CorrectedPredictor(predictor()), "v100", 16384)
    decides = learning.predictor
    Simulation(
        world,
        SchedulingCycle(make_policy("horus", predictor=decides), decides),
        truth(tmp_path),
        learning=learning,
    ).run()
    return learning


@pytest.mark.parametrize(("y_steps", "learned"), [(800, 2), (400, 1)])
def test_a_shared_interval_is_learned_once_each_job_has_also_run_alone_long_enough(
    tmp_path: Path, y_steps: float, learned: int
) -> None:
    # x (a, 10 steps/s alone, 2000 steps) runs alone 0-100 s: its alone rate is known. y (b, 4 steps/s)
    # arrives at 100 and shares (truth: a 1.25x, b 1.6x): x has 1000 steps left at 8/s, done at 225.
    # x's sample (1.25x next to b) is learned then. y did 125 s x 2.5 = 312.5 steps; with 800 steps it
    # runs 121.9 s alone afterwards and its sample (1.6x next to a) is learned; with 400 only 21.9 s,
    # shorter than the operator needs to see a rate (60 s), so its alone rate, and its sample, never are.
    learning = learn_from(tmp_path, [sim_job("x", "a", 2000, 10, 0), sim_job("y", "b", y_steps, 4, 100)])

    assert learning.learned[0] == pytest.approx(225.0)
    assert len(learning.learned) == learned
    corrected = learning.predictor
    assert corrected.basis("v100", [A, B]) == (
        Basis(OBSERVED, 1),
        Basis(OBSERVED, 1) if learned == 2 else Basis(PRIOR, 0),
    )
    assert 1.2 < corrected.slowdowns("v100", [A, B])[0] < 1.25  # type: ignore[index]  # toward the truth


def test_slowdowns_truth_did_not_measure_are_not_learned(tmp_path: Path) -> None:
    # b+c is not in the truth table: the predictor stood in for truth, so there is nothing to learn.
    learning = learn_from(tmp_path, [sim_job("x", "b", 2000, 4, 0), sim_job("z", "c", 400, 2, 100)])

    assert learning.learned == []
    assert learning.predictor.basis("v100", [B, C]) == (Basis(PRIOR, 0), Basis(PRIOR, 0))
