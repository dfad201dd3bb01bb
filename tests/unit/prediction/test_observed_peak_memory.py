"""A job's observed peak memory alone wins over the predicted one (issue 26, item 3; issue 25, item 2)."""

from __future__ import annotations

import pytest

from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Correction
from horus_operator.prediction.predictor import load_predictor

RESNET, OTHER = Workload("resnet50", 128), Workload("resnet50", 96)


def test_an_observed_peak_replaces_the_envelope_and_bounds_the_floor() -> None:
    predictor = load_predictor()
    predicted = predictor.job(RESNET, "v100")
    observed = predictor.job(Workload("resnet50", 128, peak_memory_mib=9000.0), "v100")
    assert predicted.memory_mib > 16384 > 9000  # the envelope: more than a V100 holds
    assert observed.memory_mib == 9000
    assert observed.min_memory_mib is not None and predicted.min_memory_mib is not None
    assert observed.min_memory_mib == min(predicted.min_memory_mib, 9000)
    assert observed.utilization == predicted.utilization


def test_a_signature_seen_alone_is_packed_by_its_observed_peak_on_that_gpu_type_only() -> None:
    corrected = CorrectedPredictor(load_predictor())
    assert corrected.slowdowns("v100", [RESNET, OTHER]) is None  # predicted: they cannot share 16 GiB
    revision = corrected.revision

    corrected.correction.note_peak_memory("v100", Workload("resnet50", 128), 7000.0)
    corrected.correction.note_peak_memory("v100", Workload("resnet50", 96), 6000.0)
    corrected.correction.note_peak_memory("v100", Workload("resnet50", 96), 5000.0)  # the largest stays

    assert corrected.revision > revision  # placements cached before must not be reused
    assert corrected.job(RESNET, "v100").memory_mib == 7000
    assert corrected.job(OTHER, "v100").memory_mib == 6000
    assert corrected.slowdowns("v100", [RESNET, OTHER]) is not None  # 13,000 MiB observed: they fit
    assert corrected.job(RESNET, "p100").memory_mib > 16384  # never seen on a P100: predicted


@pytest.mark.parametrize("reading", [0.0, -5.0, float("nan"), float("inf")])
def test_no_peak_is_kept_from_a_broken_reading(reading: float) -> None:
    correction = Correction()
    correction.note_peak_memory("v100", RESNET, reading)
    assert correction.peak_memory("v100", RESNET) is None


def test_observed_peaks_survive_a_restart_and_older_states_load_without_them() -> None:
    correction = Correction()
    correction.note_peak_memory("v100", RESNET, 7000.0)
    correction.note_peak_memory("v100", RESNET, 7500.0)
    state = correction.to_dict("prior")
    assert state["peaks"] == [["v100", "resnet50", 128, "fp32", "", "pytorch", 2, 7500.0]]

    restored = Correction()
    assert restored.load(state, "prior")
    assert restored.peak_memory("v100", RESNET) == 7500

    older = {key: value for key, value in state.items() if key != "peaks"}
    assert Correction().load(older, "prior")
    with pytest.raises(ValueError, match="peaks"):
        Correction().load(
            {**state, "peaks": [["v100", "resnet50", 128, "fp32", "", "pytorch", 1, 0.0]]}, "prior"
        )


def test_a_peak_seen_under_one_framework_is_not_another_frameworks() -> None:
    corrected = CorrectedPredictor(load_predictor())
    tensorflow = Workload("resnet50", 128, framework="tensorflow")
    corrected.correction.note_peak_memory("v100", RESNET, 7000.0)
    assert corrected.job(RESNET, "v100").memory_mib == 7000
    assert corrected.job(tensorflow, "v100").memory_mib > 16384  # its own prediction


def test_a_state_saved_before_the_framework_reads_every_signature_as_pytorchs() -> None:
    correction = Correction()
    correction.note_peak_memory("v100", RESNET, 7000.0)
    state = correction.to_dict("prior")
    format_2 = {**state, "format": 2, "peaks": [["v100", "resnet50", 128, "fp32", "", 1, 7000.0]]}
    restored = Correction()
    assert restored.load(format_2, "prior")
    assert restored.to_dict("prior") == state
