"""A fixed predictor states a spread on a GPU type its slowdown model never saw, none on one it was
trained on (issue 25, item 3: a tight job shares once the upper end of its predicted slowdown fits)."""

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from horus_operator.placement.base import Limits
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.prediction import artifacts
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import Correction, unproven_log_sd
from horus_operator.prediction.neighbours import NeighbourTable
from horus_operator.prediction.predictor import XGBoostPredictor, load_predictor

PAIR = [Workload("resnet50", 32), Workload("resnet18", 128)]
# The RTX 3090 case: jobs that leave the GPU mostly idle (observed busy fractions ≤ 15 %).
IDLE_PAIR = [Workload("resnet50", 32, busy=0.1), Workload("resnet18", 128, busy=0.15)]


def without(gpu: str) -> XGBoostPredictor:
    """The shipped models with `gpu`'s pairs gone from the neighbour table, as a leave-`gpu`-out model's
    table is (`hack/train_models.py --exclude-gpu`)."""
    models = artifacts.load()
    assert models.neighbours is not None
    kept = [row for row in models.neighbours.measurements() if row[0] != gpu]
    return XGBoostPredictor(dataclasses.replace(models, neighbours=NeighbourTable(kept)))


def test_the_shipped_models_state_no_spread_on_the_gpus_they_were_trained_on() -> None:
    predictor = load_predictor()
    assert predictor.models.neighbours is not None and predictor.models.neighbours.gpus == {
        "k80",
        "p100",
        "v100",
    }
    for gpu in ("k80", "p100", "v100"):
        assert predictor.spreads(gpu, PAIR) == (0.0, 0.0)
        assert CachedPredictions(predictor).spreads(gpu, PAIR, 32768.0) == (0.0, 0.0)


def test_a_gpu_never_seen_gets_the_spread_of_a_correction_without_evidence() -> None:
    predictor = load_predictor()
    slowdowns = predictor.slowdowns("rtx-3090", PAIR)
    assert slowdowns is not None

    spreads = predictor.spreads("rtx-3090", PAIR)

    empty = Correction()
    assert spreads == tuple(
        empty.log_sd("rtx-3090", w, [PAIR[1 - i]], s)
        for i, (w, s) in enumerate(zip(PAIR, slowdowns, strict=True))
    )
    assert CachedPredictions(predictor).spreads("rtx-3090", PAIR, 24576.0) == spreads
    assert predictor.spreads("rtx-3090", PAIR[:1]) == (0.0,)  # alone: no slowdown to be unsure of
    assert predictor.spreads("rtx-3090", [*PAIR, Workload("bert-large", 512)]) is None  # cannot share


def test_the_gpu_a_leave_one_out_model_was_trained_without_registers_as_unseen() -> None:
    predictor = without("v100")

    assert all(spread > 0.0 for spread in predictor.spreads("v100", PAIR))  # type: ignore[union-attr]
    assert predictor.spreads("p100", PAIR) == (0.0, 0.0)


def test_two_nearly_idle_jobs_still_share_at_a_tight_limit_on_a_gpu_never_seen() -> None:
    predictor = CachedPredictions(load_predictor())
    slowdowns = predictor.slowdowns("rtx-3090", IDLE_PAIR, 24576.0)
    assert slowdowns is not None

    spreads = predictor.spreads("rtx-3090", IDLE_PAIR, 24576.0)

    assert all(spread > 0.0 for spread in spreads)
    assert all(Limits().admits(s, 1.5, sd) for s, sd in zip(slowdowns, spreads, strict=True))


@given(st.floats(0.5, 10.0), st.floats(0.5, 10.0))
def test_the_unproven_spread_grows_with_the_predicted_slowdown(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert unproven_log_sd(low) <= unproven_log_sd(high)
    assert unproven_log_sd(low) == Correction().log_sd("any", PAIR[0], PAIR[1:], low)
