"""The spread placement reads on a GPU type the models never saw (issue 25, item 3): the online
correction states one before any evidence, decisions from the models alone state none (a fixed
predictor stating the correction's was measured and not shipped: docs/evaluation.md, issue 25)."""

from hypothesis import given
from hypothesis import strategies as st

from horus_operator.placement.base import Limits
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Correction
from horus_operator.prediction.predictor import load_predictor

PAIR = [Workload("resnet50", 32), Workload("resnet18", 128)]
# The RTX 3090 case: jobs that leave the GPU mostly idle (observed busy fractions ≤ 15 %).
IDLE_PAIR = [Workload("resnet50", 32, busy=0.1), Workload("resnet18", 128, busy=0.15)]
RTX_3090_MIB = 24576.0


def test_decisions_from_the_models_alone_state_no_spread_on_any_gpu() -> None:
    predictions = CachedPredictions(load_predictor())
    for gpu in ("v100", "p100", "k80", "rtx-3090"):
        assert predictions.spreads(gpu, PAIR, RTX_3090_MIB) == (0.0, 0.0)


def test_two_nearly_idle_jobs_share_at_a_tight_limit_on_a_gpu_never_seen() -> None:
    """The correction's spread before any co-location grows with the predicted excess, so it must not
    stop two jobs that barely use the GPU from sharing where maxSlowdown is 1.5."""
    predictions = CachedPredictions(CorrectedPredictor(load_predictor()))
    slowdowns = predictions.slowdowns("rtx-3090", IDLE_PAIR, RTX_3090_MIB)
    assert slowdowns is not None

    spreads = predictions.spreads("rtx-3090", IDLE_PAIR, RTX_3090_MIB)

    assert all(spread > 0.0 for spread in spreads)
    assert all(Limits().admits(s, 1.5, sd) for s, sd in zip(slowdowns, spreads, strict=True))


@given(st.floats(0.5, 10.0), st.floats(0.5, 10.0))
def test_the_spread_before_any_evidence_grows_with_the_predicted_slowdown(a: float, b: float) -> None:
    low, high = sorted((a, b))
    empty = Correction()
    assert empty.log_sd("gpu", PAIR[0], PAIR[1:], low) <= empty.log_sd("gpu", PAIR[0], PAIR[1:], high)
