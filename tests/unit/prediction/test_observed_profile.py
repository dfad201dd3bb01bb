"""A job's observed solo busy fraction replaces the roofline's in the slowdown prior (issue 25, item 2)."""

from pathlib import Path

import pytest

from horus_operator.placement.fake import TablePredictor
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Correction
from horus_operator.prediction.measured import TruthTable
from horus_operator.prediction.predictor import load_predictor

HEADER = "gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared"
RESNET, OTHER = Workload("resnet50", 32), Workload("resnet18", 128)  # both saturate a V100 by the roofline


def test_the_truth_table_reads_busy_fractions_alone_where_given(tmp_path: Path) -> None:
    path = tmp_path / "truth.csv"
    path.write_text(f"{HEADER},util_a_alone,util_b_alone\nv100,a,1,b,2,10,4,8,2.5,0.12,\n")

    table = TruthTable.from_csv(path)

    assert table.utilization == {("v100", "a", 1): 0.12}  # b's cell is blank: not measured
    path.write_text(f"{HEADER},util_a_alone,util_b_alone\nv100,a,1,b,2,10,4,8,2.5,12,0.5\n")
    with pytest.raises(ValueError, match="util_a_alone"):
        TruthTable.from_csv(path)
    path.write_text(f"{HEADER}\nv100,a,1,b,2,10,4,8,2.5\n")
    assert TruthTable.from_csv(path).utilization == {}


def test_an_observed_low_busy_fraction_lowers_the_prior_for_both_jobs() -> None:
    """Time-sharing physics: a job that keeps the GPU 10 % busy barely slows, or is slowed by, anyone."""
    predictor = load_predictor()
    light = Workload("resnet50", 32, busy=0.1)

    assert predictor.job(light, "v100").utilization == 0.1
    assert predictor.job(RESNET, "v100").utilization > 0.5
    roofline = predictor.slowdowns("v100", [RESNET, OTHER])
    observed = predictor.slowdowns("v100", [light, OTHER])
    assert roofline is not None and observed is not None
    assert observed[0] < roofline[0] and observed[1] < roofline[1]
    both_light = predictor.slowdowns("v100", [light, Workload("resnet18", 128, busy=0.12)])
    assert both_light is not None and all(b < o for b, o in zip(both_light, observed, strict=True))


def test_a_signature_seen_alone_is_predicted_from_its_observed_busy_fraction() -> None:
    predictor = load_predictor()
    corrected = CorrectedPredictor(predictor)
    before = corrected.slowdowns("v100", [RESNET, OTHER])
    revision = corrected.revision

    corrected.correction.note_utilization("v100", Workload("resnet50", 32), 0.1)  # another job, same kind

    assert corrected.revision > revision  # placements cached before must not be reused
    assert corrected.correction.utilization("v100", RESNET) == 0.1
    assert corrected.job(RESNET, "v100").utilization == 0.1
    assert corrected.slowdowns("v100", [RESNET, OTHER]) == predictor.slowdowns(
        "v100", [Workload("resnet50", 32, busy=0.1), OTHER]
    )
    assert corrected.slowdowns("v100", [RESNET, OTHER]) != before
    assert corrected.slowdowns("p100", [RESNET, OTHER]) == predictor.slowdowns("p100", [RESNET, OTHER])


def test_busy_fractions_outside_0_1_are_not_kept_and_they_survive_a_restart() -> None:
    correction = Correction()
    correction.note_utilization("v100", RESNET, 0.3)
    correction.note_utilization("v100", RESNET, 0.5)
    correction.note_utilization("v100", OTHER, 1.7)
    correction.note_utilization("v100", OTHER, float("nan"))

    restored = Correction()
    assert restored.load(correction.to_dict("m"), "m")

    assert restored.utilization("v100", RESNET) == pytest.approx(0.4)
    assert restored.utilization("v100", OTHER) is None
    state = correction.to_dict("m")
    state["busy"] = [["v100", "resnet18", 128, "fp32", "", "pytorch", 1, 1.5]]
    with pytest.raises(ValueError, match="busy"):
        Correction().load(state, "m")


def test_a_prior_that_ignores_busy_fractions_is_unchanged_by_them() -> None:
    jobs = {"resnet50": (0.9, 1000.0), "resnet18": (0.9, 1000.0)}
    table = TablePredictor(jobs, {("resnet50", "resnet18"): (1.5, 1.6)})
    corrected = CorrectedPredictor(table)
    corrected.correction.note_utilization("v100", RESNET, 0.1)

    assert corrected.slowdowns("v100", [RESNET, OTHER]) == (1.5, 1.6)
