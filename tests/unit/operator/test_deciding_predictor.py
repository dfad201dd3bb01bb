"""`horus run --sharing timeslicing` makes placement keep co-tenants within the GPU's time; `mps` keeps
the model's answers (prediction/timeslicing.py)."""

from __future__ import annotations

from horus_operator.operator.config import OperatorConfig
from horus_operator.operator.dra.claims import Sharing
from horus_operator.operator.runtime import deciding_predictor
from horus_operator.placement.fake import TablePredictor
from horus_operator.prediction.api import LearningPredictor, Workload
from horus_operator.prediction.correction import CorrectedPredictor

PAIR = [Workload("a", 1), Workload("b", 1)]


def _corrected() -> CorrectedPredictor:
    return CorrectedPredictor(
        TablePredictor({"a": (1.0, 1000.0), "b": (1.0, 1000.0)}, {("a", "b"): (1.5, 1.5)})
    )


def test_timeslicing_lifts_two_saturating_jobs_to_twice_their_time_and_keeps_learning() -> None:
    deciding = deciding_predictor(OperatorConfig(sharing=Sharing.TIMESLICING), _corrected())

    assert deciding.slowdowns("v100", PAIR) == (2.0, 2.0)
    assert isinstance(deciding, LearningPredictor)


def test_mps_decides_with_the_corrected_model_itself() -> None:
    predictor = _corrected()

    assert deciding_predictor(OperatorConfig(sharing=Sharing.MPS), predictor) is predictor
