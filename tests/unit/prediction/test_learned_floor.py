"""The runtime's process floor learned from jobs seen alone (issue 45, item 3): it replaces the table's
default once enough readings stand behind it, never below the default and never above its bound, and a
job's own observed peak keeps winning. The readings are hand-made inputs, not measurements."""

from __future__ import annotations

import pytest

from horus_operator.prediction import memory
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Correction
from horus_operator.prediction.correction_estimators import FLOOR_MIN_SAMPLES
from horus_operator.prediction.predictor import load_predictor

GPU = "rtx-3090"  # Ampere: its PyTorch floor in the table is borrowed from Ada
SMALL = Workload("a3c", 1)  # a tiny graph: its prediction is mostly the floor
SEEN = [Workload("ppo", 1), Workload("dqn", 1), Workload("td3", 1), Workload("a2c", 1)]
READING_MIB = 2000.0  # what each job seen alone is read holding (a hand-made reading)


def _corrected() -> CorrectedPredictor:
    return CorrectedPredictor(load_predictor(), Correction())


def _seen_alone(corrected: CorrectedPredictor, readings: int, mib: float = READING_MIB) -> None:
    for workload in SEEN[:readings]:
        corrected.note_memory_alone(GPU, workload, mib)


def test_a_floor_observed_on_a_gpu_type_raises_small_jobs_to_at_least_it() -> None:
    corrected = _corrected()
    before = corrected.job(SMALL, GPU).memory_mib
    _seen_alone(corrected, FLOOR_MIN_SAMPLES)

    learned = corrected.correction.process_floor(GPU, "pytorch")
    assert learned is not None and learned > memory.process_floor_mib(GPU, "pytorch")
    after = corrected.job(SMALL, GPU).memory_mib
    assert after >= learned
    raised = memory.runtime_floor_mib(GPU, "pytorch", learned) - memory.process_floor_mib(GPU, "pytorch")
    assert after - before == pytest.approx(raised, abs=1.0)
    # per GPU type and runtime: another GPU type, or TensorFlow on this one, keeps its table's floor
    assert corrected.job(SMALL, "a100-40gb").memory_mib == load_predictor().job(SMALL, "a100-40gb").memory_mib
    tensorflow = Workload("a3c", 1, framework="tensorflow")
    assert corrected.job(tensorflow, GPU).memory_mib == load_predictor().job(tensorflow, GPU).memory_mib


def test_too_few_readings_change_nothing() -> None:
    corrected = _corrected()
    before = corrected.job(SMALL, GPU)
    _seen_alone(corrected, FLOOR_MIN_SAMPLES - 1)

    assert corrected.correction.process_floor(GPU, "pytorch") is None
    assert corrected.job(SMALL, GPU) == before


def test_the_least_bound_is_kept_and_never_taken_below_the_default_nor_above_its_bound() -> None:
    default = memory.process_floor_mib(GPU, "pytorch")
    assert memory.runtime_floor_mib(GPU, "pytorch", default / 2) == default
    assert memory.runtime_floor_mib(GPU, "pytorch", 100 * default) == memory.LEARNED_FLOOR_MAX_RAISE * default
    correction = Correction()
    for bound in (3000.0, 1800.0, 2400.0, -50.0, float("nan")):  # the last two say nothing of it
        correction.note_floor(GPU, "pytorch", bound)
    assert correction.process_floor(GPU, "pytorch") == 1800.0

    corrected = _corrected()
    before = corrected.job(SMALL, GPU).memory_mib
    _seen_alone(corrected, FLOOR_MIN_SAMPLES, mib=200.0)  # smaller than the default floor
    assert corrected.job(SMALL, GPU).memory_mib == before


def test_a_jobs_own_observed_peak_still_wins() -> None:
    corrected = _corrected()
    own = Workload("resnet50", 32)
    corrected.note_memory_alone(GPU, own, 5000.0)
    _seen_alone(corrected, FLOOR_MIN_SAMPLES, mib=4000.0)

    assert corrected.correction.process_floor(GPU, "pytorch") is not None
    assert corrected.job(own, GPU).memory_mib == 5000.0
    assert corrected.job(Workload("resnet50", 32, peak_memory_mib=6000.0), GPU).memory_mib == 6000.0


def test_the_learned_floor_is_saved_with_the_correction() -> None:
    corrected = _corrected()
    _seen_alone(corrected, FLOOR_MIN_SAMPLES)
    state = corrected.correction.to_dict("prior")

    restored = Correction()
    assert restored.load(state, "prior")
    assert restored.process_floor(GPU, "pytorch") == corrected.correction.process_floor(GPU, "pytorch")
    older = {name: rows for name, rows in state.items() if name != "floors"}  # saved before floors
    assert Correction().load(older, "prior")
    with pytest.raises(ValueError, match="floors"):
        Correction().load({**state, "floors": [[GPU, "pytorch", 3, 0.0]]}, "prior")
