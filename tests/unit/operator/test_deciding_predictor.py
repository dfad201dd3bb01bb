"""`horus run --sharing`: where placement keeps co-tenants within the GPU's time (prediction/timeslicing.py).
`timeslicing`: every GPU; `mps`: none (the model's answers); `auto` (the default): the GPUs of env-bound
jobs, which have no MPS daemon, and not those of DRA-bound ones, whose claims run one."""

from __future__ import annotations

import dataclasses

from horus_operator.api.dljob import Binding
from horus_operator.operator.config import OperatorConfig
from horus_operator.operator.dra.claims import Sharing, time_slices
from horus_operator.operator.runtime import deciding_predictor
from horus_operator.placement.fake import TablePredictor
from horus_operator.prediction.api import LearningPredictor, Workload
from horus_operator.prediction.correction import CorrectedPredictor

PAIR = [Workload("a", 1), Workload("b", 1)]
SLICED_PAIR = [dataclasses.replace(w, time_sliced=True) for w in PAIR]


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


def test_auto_lifts_only_co_tenants_whose_workloads_time_slice() -> None:
    deciding = deciding_predictor(OperatorConfig(), _corrected())

    assert OperatorConfig().sharing == Sharing.AUTO
    assert deciding.slowdowns("v100", SLICED_PAIR) == (2.0, 2.0)
    assert deciding.slowdowns("v100", PAIR) == (1.5, 1.5)
    assert isinstance(deciding, LearningPredictor)


def test_env_bound_jobs_time_slice_under_auto_and_dra_bound_ones_under_timeslicing_only() -> None:
    assert [time_slices(Sharing.AUTO, b) for b in (Binding.ENV, Binding.DRA)] == [True, False]
    assert [time_slices(Sharing.MPS, b) for b in (Binding.ENV, Binding.DRA)] == [False, False]
    assert [time_slices(Sharing.TIMESLICING, b) for b in (Binding.ENV, Binding.DRA)] == [True, True]
