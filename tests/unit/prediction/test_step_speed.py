"""A GPU type's step speed, learnt from the kinds of job seen alone on it, moves the busy fraction of
every kind not seen yet (issue 25, item 3: learn the GPU, not only the pair)."""

import math

import pytest

from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import MIN_SPEED_KINDS, CorrectedPredictor, Correction
from horus_operator.prediction.predictor import load_predictor

GPU = "h100"
SEEN = (Workload("resnet18", 64), Workload("mobilenet_v3_small", 32), Workload("densenet121", 32))
UNSEEN = Workload("efficientnet_b0", 64)  # host-bound by the roofline: the speeds move its busy fraction


def _roofline(corrected: CorrectedPredictor, workload: Workload) -> tuple[float, float]:
    """The prior's GPU and host seconds of a step of `workload` alone on GPU."""
    predicted = corrected.prior.job(workload, GPU)
    assert predicted.step_s and predicted.host_s
    return predicted.utilization * predicted.step_s, predicted.host_s


def _run_alone(
    corrected: CorrectedPredictor, workload: Workload, gpu_scale: float, host_scale: float
) -> None:
    """Note what a job would show alone on a GPU type whose kernels and host run at these multiples of
    the prior's times."""
    gpu_s, host_s = _roofline(corrected, workload)
    gpu_s, host_s = gpu_s * gpu_scale, host_s * host_scale
    corrected.note_alone(GPU, workload, 1.0 / max(gpu_s, host_s))
    corrected.note_utilization(GPU, workload, gpu_s / max(gpu_s, host_s))


def _busy_at(corrected: CorrectedPredictor, workload: Workload, gpu_scale: float, host_scale: float) -> float:
    gpu_s, host_s = _roofline(corrected, workload)
    return gpu_s * gpu_scale / max(gpu_s * gpu_scale, host_s * host_scale)


def test_kinds_seen_alone_set_the_busy_fraction_of_a_kind_never_seen() -> None:
    corrected = CorrectedPredictor(load_predictor())
    before = corrected.job(UNSEEN, GPU).utilization
    for workload in SEEN:
        _run_alone(corrected, workload, gpu_scale=0.5, host_scale=0.3)

    levels = corrected.correction.step_levels(GPU)

    assert levels == pytest.approx((math.log(0.5), math.log(0.3)))
    expected = _busy_at(corrected, UNSEEN, 0.5, 0.3)
    assert corrected.job(UNSEEN, GPU).utilization == pytest.approx(expected, abs=0.005)
    assert corrected.job(UNSEEN, GPU).utilization != pytest.approx(before, abs=0.01)
    assert corrected.utilization_source(UNSEEN, GPU) == "predicted"
    assert corrected.job(UNSEEN, "v100") == corrected.prior.job(UNSEEN, "v100")  # another GPU type


def test_fewer_kinds_than_the_minimum_leave_the_roofline_alone() -> None:
    corrected = CorrectedPredictor(load_predictor())
    for workload in SEEN[: MIN_SPEED_KINDS - 1]:
        _run_alone(corrected, workload, gpu_scale=0.5, host_scale=0.3)

    assert corrected.correction.step_levels(GPU) is None
    assert corrected.job(UNSEEN, GPU) == corrected.prior.job(UNSEEN, GPU)


def test_a_kind_observed_alone_keeps_its_own_busy_fraction() -> None:
    corrected = CorrectedPredictor(load_predictor())
    for workload in SEEN:
        _run_alone(corrected, workload, gpu_scale=0.5, host_scale=0.3)
    corrected.note_utilization(GPU, UNSEEN, 0.42)

    assert corrected.job(UNSEEN, GPU).utilization == 0.42
    assert corrected.utilization_source(UNSEEN, GPU) == "observed"


def test_without_host_bound_kinds_the_host_keeps_the_roofline_s_share() -> None:
    """Jobs that saturate the GPU say how fast its kernels run, not how fast its host is: the busy
    fractions of the prior stand."""
    corrected = CorrectedPredictor(load_predictor())
    for workload in SEEN:
        gpu_s, _ = _roofline(corrected, workload)
        corrected.note_alone(GPU, workload, 1.0 / (gpu_s * 0.5))
        corrected.note_utilization(GPU, workload, 1.0)

    levels = corrected.correction.step_levels(GPU)

    assert levels is not None and levels[0] == levels[1]
    assert corrected.job(UNSEEN, GPU).utilization == pytest.approx(
        corrected.prior.job(UNSEEN, GPU).utilization, abs=0.005
    )


def test_one_job_bounded_by_its_loader_does_not_set_the_host_speed() -> None:
    """A median over kinds: a job that keeps the GPU 5 % busy because of its input pipeline is one vote."""
    corrected = CorrectedPredictor(load_predictor())
    for workload in SEEN:
        _run_alone(corrected, workload, gpu_scale=0.5, host_scale=0.3)
    loader_bound = Workload("resnet50", 32)
    gpu_s, _ = _roofline(corrected, loader_bound)
    corrected.note_alone(GPU, loader_bound, 0.05 / (gpu_s * 0.5))
    corrected.note_utilization(GPU, loader_bound, 0.05)

    levels = corrected.correction.step_levels(GPU)

    assert levels is not None and levels[1] == pytest.approx(math.log(0.3))


def test_learning_the_speed_invalidates_cached_placements_and_survives_a_restart() -> None:
    corrected = CorrectedPredictor(load_predictor())
    for workload in SEEN:
        _run_alone(corrected, workload, gpu_scale=0.5, host_scale=0.3)
    revision = corrected.revision
    corrected.note_alone(GPU, SEEN[0], 2 * corrected.correction.alone_rate(GPU, SEEN[0]))  # type: ignore[operator]

    assert corrected.revision > revision
    state = corrected.correction.to_dict("m")
    restored = Correction()
    assert restored.load(state, "m")
    assert restored.step_levels(GPU) == corrected.correction.step_levels(GPU)
    state.pop("steps")
    assert Correction().load(state, "m")  # a state saved before the step speed: none learnt yet
    state["steps"] = [[GPU, "resnet18", 64, "fp32", "", "pytorch", 1, 0.0, 0.01]]
    with pytest.raises(ValueError, match="steps"):
        Correction().load(state, "m")
