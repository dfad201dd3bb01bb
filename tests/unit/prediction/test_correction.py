import math

import pytest

from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node, Policy, RunningJob
from horus_operator.prediction.api import OBSERVED, PRIOR, Basis, Workload
from horus_operator.prediction.correction import CorrectedPredictor, Correction, Observation
from horus_operator.prediction.correction_estimators import (
    NOISE_SD,
    PRIOR_STRENGTH,
    SCALE_PSEUDO_SXX,
    SCALE_SD,
    SPREAD_PSEUDO_SAMPLES,
    STRENGTH_RANGE,
)

A, B, C = Workload("a", 32), Workload("b", 64), Workload("c", 8)


def prior() -> TablePredictor:
    jobs = {"a": (0.5, 1000.0), "b": (0.5, 1000.0), "c": (0.5, 1000.0)}
    return TablePredictor(jobs, {("a", "b"): (1.2, 1.5), ("a", "c"): (1.1, 1.3), ("b", "c"): (1.4, 1.4)})


def seen(
    slowdown: float, *, job: Workload = A, next_to: Workload = B, sample: str = "s1", **overrides: object
) -> Observation:
    fields: dict[str, object] = {
        "sample_id": sample,
        "gpu": "v100",
        "workload": job,
        "cotenants": (next_to,),
        "slowdown": slowdown,
        "observed_at": 100.0,
        "placed_at": 50.0,
    }
    return Observation(**{**fields, **overrides})  # type: ignore[arg-type]


def test_without_observations_the_prior_answers_and_says_so() -> None:
    corrected = CorrectedPredictor(prior())

    assert corrected.slowdowns("v100", [A, B]) == (1.2, 1.5)
    assert corrected.basis("v100", [A, B]) == (Basis(PRIOR, 0), Basis(PRIOR, 0))


def one_sample_by_hand(x: float, y: float) -> tuple[float, float, float]:
    """The module docstring's formulas after one sample (x = ln prior, y = ln observed), worked by hand:
    the GPU scale b, and k and the job level the sample leaves."""
    initial = NOISE_SD**2 * (1 + 1 / PRIOR_STRENGTH)  # σ² + τ₀²
    scatter = initial + ((y - x) ** 2 - initial) / (1 + SPREAD_PSEUDO_SAMPLES)  # s², residual vs b = 1
    k = NOISE_SD**2 / (scatter - NOISE_SD**2)
    shown = max(0.0, (y / x - 1) ** 2 - scatter / x**2)
    pull = scatter / ((SCALE_PSEUDO_SXX * SCALE_SD**2 + x**2 * shown) / (SCALE_PSEUDO_SXX + x**2))
    scale = min(1.0, (x * y + pull) / (x * x + pull))
    return scale, k, (y - scale * x) / (1 + k)


@pytest.mark.parametrize("observed", [1.05, 2.4])
def test_one_sample_moves_the_gpu_scale_down_and_the_pair_part_of_the_way_toward_it(observed: float) -> None:
    corrected = CorrectedPredictor(prior())
    assert corrected.correction.strength("v100") == PRIOR_STRENGTH

    assert corrected.learn(seen(observed)) is None

    x, y = math.log(1.2), math.log(observed)
    scale, k, job_level = one_sample_by_hand(x, y)
    assert corrected.correction.scale("v100") == pytest.approx(scale)
    assert corrected.correction.strength("v100") == pytest.approx(k)
    assert y / x < scale < 1 if observed < 1.2 else scale == 1  # part of the way down; never up
    pair_level = (y - scale * x + k * job_level) / (1 + k)  # toward the job level
    a_next_to_b, b_next_to_a = corrected.slowdowns("v100", [A, B])  # type: ignore[misc]
    assert a_next_to_b == pytest.approx(math.exp(scale * x + pair_level))
    assert b_next_to_a == pytest.approx(1.5**scale)  # b was not observed: the GPU level only
    assert corrected.basis("v100", [A, B]) == (Basis(OBSERVED, 1), Basis(OBSERVED, 1))


def test_the_job_level_carries_over_to_co_tenants_never_seen_with_it() -> None:
    corrected = CorrectedPredictor(prior())
    corrected.learn(seen(2.4))

    a_next_to_c = corrected.slowdowns("v100", [A, C])[0]  # type: ignore[index]

    _, _, job_level = one_sample_by_hand(math.log(1.2), math.log(2.4))
    assert a_next_to_c == pytest.approx(1.1 * math.exp(job_level))  # the scale stays 1 (upward)
    assert corrected.basis("v100", [A, C])[0] == Basis(OBSERVED, 1)
    assert corrected.slowdowns("p100", [A, B]) == (1.2, 1.5)  # another GPU type learns on its own
    assert corrected.basis("p100", [A, B]) == (Basis(PRIOR, 0), Basis(PRIOR, 0))


def test_the_prior_counts_for_less_where_it_has_been_far_off_and_for_more_where_it_was_right() -> None:
    """Empirical Bayes: k = σ²/τ², τ² from the residuals' mean square less σ², per GPU type. Far off
    here: a is 2x the prior next to b, b 1.4x below it next to c, which no one scale of the GPU explains."""
    far_off, right = CorrectedPredictor(prior()), CorrectedPredictor(prior())
    for i in range(30):
        far_off.learn(seen(2.4, sample=f"s{i}"))  # residual ln 2 against the prior
        far_off.learn(seen(1.0, job=B, next_to=C, sample=f"t{i}"))  # residual -ln 1.4
        right.learn(seen(1.2 * math.exp(NOISE_SD / 2), sample=f"s{i}"))  # within the noise

    assert STRENGTH_RANGE[0] <= far_off.correction.strength("v100") < 0.5
    assert right.correction.strength("v100") > PRIOR_STRENGTH
    assert right.correction.strength("p100") == PRIOR_STRENGTH  # nothing seen there


def test_repeated_evidence_converges_to_what_is_observed() -> None:
    corrected = CorrectedPredictor(prior())
    for i in range(40):
        corrected.learn(seen(2.4, sample=f"s{i}"))

    assert corrected.slowdowns("v100", [A, B])[0] == pytest.approx(2.4, rel=0.01)  # type: ignore[index]
    assert corrected.basis("v100", [A, B])[0] == Basis(OBSERVED, 40)


def test_a_correction_never_predicts_a_speed_up() -> None:
    corrected = CorrectedPredictor(prior())
    for i in range(10):
        corrected.learn(seen(1.0, sample=f"s{i}", job=B, next_to=C))

    assert corrected.slowdowns("v100", [B, C])[0] >= 1.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("observation", "why"),
    [
        (seen(2.0, cotenants=()), "the job ran alone"),
        (seen(2.0, gpu_healthy=False), "its GPU is marked unhealthy"),
        (seen(2.0, observed_at=10.0), "observed before its current placement"),
        (seen(float("nan")), "outside"),
        (seen(80.0), "outside"),
    ],
)
def test_implausible_samples_are_refused_and_change_nothing(observation: Observation, why: str) -> None:
    corrected = CorrectedPredictor(prior())

    refused = corrected.learn(observation)

    assert refused is not None and why in refused
    assert corrected.revision == 0
    assert corrected.slowdowns("v100", [A, B]) == (1.2, 1.5)


def test_one_co_location_is_learned_once() -> None:
    corrected = CorrectedPredictor(prior())

    assert corrected.learn(seen(2.4)) is None
    assert corrected.learn(seen(2.4)) == "already learned"
    assert corrected.basis("v100", [A, B])[0] == Basis(OBSERVED, 1)


def test_old_evidence_fades_beyond_the_weight_cap_so_a_changed_cluster_is_relearned() -> None:
    corrected = CorrectedPredictor(prior(), Correction(max_weight=5))
    for i in range(50):
        corrected.learn(seen(2.4, sample=f"old{i}"))
    for i in range(10):
        corrected.learn(seen(1.2, sample=f"new{i}"))

    assert corrected.slowdowns("v100", [A, B])[0] < 1.4  # type: ignore[index]
    assert corrected.basis("v100", [A, B])[0] == Basis(OBSERVED, 60)


def test_the_state_is_bounded_least_recently_updated_first() -> None:
    correction = Correction(max_pairs=1, max_jobs=1, max_seen=2)
    corrected = CorrectedPredictor(prior(), correction)
    corrected.learn(seen(2.4, sample="1"))
    corrected.learn(seen(2.8, job=B, next_to=C, sample="2"))
    corrected.learn(seen(2.8, job=C, next_to=A, sample="3"))

    assert len(correction) == 3  # the GPU level, and one job and one pair entry
    assert corrected.basis("v100", [A, B])[0] == Basis(OBSERVED, 3)  # a's own evidence is gone
    assert corrected.basis("v100", [C, A])[0] == Basis(OBSERVED, 1)
    assert not correction.seen("1") and correction.seen("3")


def test_the_state_round_trips_for_the_same_prior_only() -> None:
    corrected = CorrectedPredictor(prior())
    corrected.learn(seen(2.4))
    corrected.learn(seen(3.0, job=B, next_to=C, sample="s2"))
    state = corrected.correction.to_dict("model-1")

    restored, other = Correction(), Correction()

    assert restored.load(state, "model-1") is True
    assert other.load(state, "model-2") is False and len(other) == 0
    again = CorrectedPredictor(prior(), restored)
    assert again.slowdowns("v100", [A, B]) == corrected.slowdowns("v100", [A, B])
    assert again.basis("v100", [B, C]) == corrected.basis("v100", [B, C])
    assert restored.seen("s2")


def test_a_state_saved_before_the_framework_loads_with_every_signature_a_pytorch_jobs() -> None:
    corrected = CorrectedPredictor(prior())
    corrected.learn(seen(2.4))
    corrected.learn(seen(3.0, job=B, next_to=C, sample="s2"))
    state = corrected.correction.to_dict("model-1")
    # format 2: the same rows without each signature's framework (the fifth of its values)
    format_2 = {
        **state,
        "format": 2,
        "jobs": [row[:5] + row[6:] for row in state["jobs"]],
        "pairs": [row[:5] + row[6:10] + row[11:] for row in state["pairs"]],
    }
    assert {row[5] for row in state["jobs"]} == {row[5] for row in state["pairs"]} == {"pytorch"}

    restored = Correction()
    assert restored.load(format_2, "model-1") is True
    assert restored.to_dict("model-1") == state


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        ({"format": 99}, "format"),
        ({"jobs": [["v100", "a"]]}, "jobs"),
        ({"pairs": "nope"}, "pairs"),
        ({"jobs": [["v100", "a", 32, "fp32", "", 0, 0.1, 0.2]]}, "jobs"),
        ({"scales": [["v100", 3, 0.1, float("nan")]]}, "scales"),
        ({"format": 1}, "saved before the GPU-level scale"),
        ({"seen": [1, 2]}, "seen"),
    ],
)
def test_a_malformed_state_is_refused_naming_the_field(damage: dict[str, object], field: str) -> None:
    state = {**Correction().to_dict("m"), **damage}

    with pytest.raises(ValueError, match=field):
        Correction().load(state, "m")


def test_placements_cached_before_a_lesson_are_not_reused_after_it() -> None:
    corrected = CorrectedPredictor(prior())
    cached = CachedPredictions(corrected)
    before = cached.slowdowns("v100", [A, B], 16384.0)

    corrected.learn(seen(2.4))

    assert cached.slowdowns("v100", [A, B], 16384.0) != before
    assert cached.basis("v100", [A, B])[0] == Basis(OBSERVED, 1)
    assert CachedPredictions(prior()).basis("v100", [A, B]) == (Basis(PRIOR, 0), Basis(PRIOR, 0))


def b_on_a_gpu() -> tuple[CorrectedPredictor, Policy, ClusterSnapshot]:
    """The horus policy on the corrected prior, and one V100 where job b runs."""
    corrected = CorrectedPredictor(prior())
    gpu = Gpu(node="n0", index=0, product="v100", memory_mib=16384)
    running = RunningJob(JobRequest("ns/b", B, max_slowdown=3.0), "n0", (0,))
    cluster = ClusterSnapshot(nodes=(Node("n0", (gpu,)),), running=(running,))
    return corrected, make_policy("horus", predictor=corrected), cluster


def test_a_placement_says_whether_its_predicted_slowdown_was_observed_and_how_often() -> None:
    corrected, policy, cluster = b_on_a_gpu()
    newcomer = JobRequest("ns/a", A, max_slowdown=3.0)

    (before,) = policy.schedule(cluster, [newcomer])
    corrected.learn(seen(1.5))
    corrected.learn(seen(1.5, sample="s2"))
    (after,) = policy.schedule(cluster, [newcomer])

    assert (before.slowdown_source, before.slowdown_samples, before.predicted_slowdown) == ("prior", 0, 1.2)
    assert (after.slowdown_source, after.slowdown_samples) == ("observed", 2)
    assert 1.2 < after.predicted_slowdown < 1.5


def test_the_next_decision_after_a_lesson_uses_it() -> None:
    """The prior says a fits next to b (1.2x, its upper end well under maxSlowdown 2); a's observed 2.4x
    there says not."""
    corrected, policy, cluster = b_on_a_gpu()
    newcomer = JobRequest("ns/a", A, max_slowdown=2.0)

    before = policy.schedule(cluster, [newcomer])
    for i in range(3):
        corrected.learn(seen(2.4, sample=f"s{i}"))
    after = policy.schedule(cluster, [newcomer])

    assert [a.job for a in before] == ["ns/a"]
    assert after == []
    assert "maxSlowdown" in policy.explain_wait(cluster, newcomer)


def test_on_an_unproven_gpu_a_tight_job_waits_for_evidence_and_a_generous_one_explores() -> None:
    """The prior's 1.2x fits a maxSlowdown of 1.5 with the QoS margin, but its upper end on a GPU type
    without co-locations does not (`Limits.caution_sd`): the tight job waits where a generous one
    shares. Co-locations that confirm about 1.2x narrow the spread, and the tight job shares."""
    corrected, policy, cluster = b_on_a_gpu()
    tight, generous = JobRequest("ns/a", A, max_slowdown=1.5), JobRequest("ns/a", A, max_slowdown=2.5)

    assert policy.schedule(cluster, [tight]) == []
    assert "unproven" in policy.explain_wait(cluster, tight)
    assert [a.job for a in policy.schedule(cluster, [generous])] == ["ns/a"]
    for i in range(8):
        corrected.learn(seen(1.2, sample=f"s{i}"))
    assert [a.job for a in policy.schedule(cluster, [tight])] == ["ns/a"]
