"""The physical slowdown prior: its shape, its fit on the measured pairs, the bounded residual on top."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_operator.prediction import artifacts, catalog
from horus_operator.prediction.api import Workload
from horus_operator.prediction.predictor import XGBoostPredictor
from horus_operator.prediction.slowdown import SlowdownPrior
from horus_operator.prediction.training import common, slowdown_fit

DATA = Path(__file__).resolve().parents[3] / "data" / "colocation"
PAIRS = DATA / "gavel_pairs_train.csv"
HOST_CPUS = DATA / "gavel_host_cpus.csv"

busy = st.floats(min_value=0.0, max_value=1.0)
cores = st.floats(min_value=0.0, max_value=16.0)
# Every law the fit may return (slowdown_fit.PRIOR_BOUNDS).
(_K_LOW, _K_HIGH), (_CPU_LOW, _CPU_HIGH) = slowdown_fit.PRIOR_BOUNDS
laws = st.builds(
    SlowdownPrior,
    contention=st.floats(min_value=_K_LOW, max_value=_K_HIGH),
    cpu_contention=st.floats(min_value=_CPU_LOW, max_value=_CPU_HIGH),
)


def _slowdown(
    law: SlowdownPrior, own: float, other: float, own_cpus: float = 0.0, other_cpus: float = 0.0
) -> float:
    return float(np.exp(law.log_slowdown(np.array([[own, other, own_cpus, other_cpus]])))[0])


@settings(max_examples=300, deadline=None)
@given(law=laws, own=busy, low=busy, high=busy, own_cpus=cores, other_cpus=cores)
def test_a_busier_co_runner_never_slows_a_job_less(
    law: SlowdownPrior, own: float, low: float, high: float, own_cpus: float, other_cpus: float
) -> None:
    low, high = sorted((low, high))
    assert (
        _slowdown(law, own, high, own_cpus, other_cpus)
        >= _slowdown(law, own, low, own_cpus, other_cpus) - 1e-12
    )


@settings(max_examples=300, deadline=None)
@given(law=laws, own=busy, other=busy, own_cpus=cores, low=cores, high=cores)
def test_a_co_runner_loading_more_cpu_cores_never_slows_a_job_less(
    law: SlowdownPrior, own: float, other: float, own_cpus: float, low: float, high: float
) -> None:
    low, high = sorted((low, high))
    assert _slowdown(law, own, other, own_cpus, high) >= _slowdown(law, own, other, own_cpus, low) - 1e-12


def test_beyond_the_fits_bound_the_fixed_point_would_let_cpu_load_lower_a_slowdown() -> None:
    # Why PRIOR_BOUNDS stops k at 3/4: at 0.9 a job 75 % busy beside one 50 % busy would be predicted
    # less slowed (3.46× against 3.57×) once the co-runner keeps a quarter of a CPU core busy.
    law = SlowdownPrior(contention=0.9, cpu_contention=1.0)
    assert _slowdown(law, 0.75, 0.5, 0.0, 0.25) < _slowdown(law, 0.75, 0.5, 0.0, 0.0)


@settings(max_examples=300, deadline=None)
@given(law=laws, own=st.floats(min_value=0.0, max_value=0.15), other=st.floats(min_value=0.0, max_value=0.15))
def test_two_mostly_idle_jobs_barely_slow_each_other(law: SlowdownPrior, own: float, other: float) -> None:
    # Worst case of the bounded residual: the trees push the prior as far up as they may.
    prior = law.log_slowdown(np.array([[own, other, 0.0, 0.0]]))
    assert math.exp(law.bounded(np.array([10.0]), prior)[0]) <= 1.10


@settings(max_examples=200, deadline=None)
@given(law=laws, own=busy, other=busy, cpus=cores)
def test_the_two_jobs_of_a_pair_solve_one_fixed_point(
    law: SlowdownPrior, own: float, other: float, cpus: float
) -> None:
    # Swapping the pair swaps the answers: the stretches are solved together, not one after the other.
    forward = law.slowdowns(np.array([[own, other, 0.0, cpus]]))
    backward = law.slowdowns(np.array([[other, own, cpus, 0.0]]))
    assert forward[0][0] == pytest.approx(backward[1][0], rel=1e-9)
    assert forward[1][0] == pytest.approx(backward[0][0], rel=1e-9)


def test_time_slicing_two_saturating_jobs_halves_each() -> None:
    assert _slowdown(SlowdownPrior(contention=0.5), 1.0, 1.0) == pytest.approx(2.0)


def test_an_idle_co_runner_slows_nobody_unless_it_loads_the_cpu() -> None:
    law = SlowdownPrior(contention=0.5, cpu_contention=0.25)
    assert _slowdown(law, 0.5, 0.0) == pytest.approx(1.0)
    # Half of the job's step is host work; four busy cores beside it double that half: 1.5.
    assert _slowdown(law, 0.5, 0.0, other_cpus=4.0) == pytest.approx(1.5)


def test_the_residual_can_remove_the_prior_but_never_go_below_one_or_beyond_its_bound() -> None:
    law = SlowdownPrior(residual_bound=2.0)
    prior = np.log(np.array([1.5, 1.5, 1.0]))
    got = law.bounded(np.array([-5.0, 5.0, 5.0]), prior)
    assert got == pytest.approx([0.0, 3 * math.log(1.5), 0.0])


def test_fit_prior_recovers_the_law_it_was_given() -> None:
    rng = np.random.default_rng(0)
    inputs = np.column_stack([rng.uniform(size=(80, 2)), rng.choice([0.0, 4.0, 8.0], size=(80, 2))])
    law = SlowdownPrior(contention=0.4, cpu_contention=0.1)
    fitted = slowdown_fit.fit_prior(inputs, np.exp(law.log_slowdown(inputs)))
    assert fitted.contention == pytest.approx(0.4, abs=1e-3)
    assert fitted.cpu_contention == pytest.approx(0.1, abs=1e-3)


def test_a_few_wild_measurements_do_not_move_the_prior() -> None:
    # Like Gavel's V100 pairs: most follow the law, a few slow down 8x for no visible reason.
    rng = np.random.default_rng(1)
    inputs = np.column_stack([rng.uniform(size=(80, 2)), rng.choice([0.0, 4.0], size=(80, 2))])
    law = SlowdownPrior(contention=0.45, cpu_contention=0.2)
    slowdowns = np.exp(law.log_slowdown(inputs))
    slowdowns[:4] *= 8.0
    fitted = slowdown_fit.fit_prior(inputs, slowdowns)
    assert fitted.contention == pytest.approx(0.45, abs=1e-2)
    assert fitted.cpu_contention == pytest.approx(0.2, abs=1e-2)


def test_on_gavels_measurements_the_gpu_contends_and_the_a3c_workers_load_the_host() -> None:
    samples = common.slowdown_samples(PAIRS)
    feasible = samples["feasible"].to_numpy()
    priors = slowdown_fit.prior_inputs(
        samples, catalog.lookup, artifacts.load().roofline, common.host_cpus(HOST_CPUS)
    )
    prior = slowdown_fit.fit_prior(priors[feasible], samples["slowdown"].to_numpy()[feasible])
    assert 0.25 < prior.contention < 0.6  # between overlapping kernels and worse than time-slicing
    assert prior.cpu_contention > 0


def test_host_cpus_come_from_gavels_command_lines() -> None:
    assert common.host_cpus(HOST_CPUS) == {"a3c": 4.0, "resnet50": 8.0}
    assert common.host_cpus(None) == {}


def test_a_prior_saved_before_the_time_sharing_law_is_refused_with_what_to_do(tmp_path: Path) -> None:
    shutil.copytree(artifacts.SHIPPED_DIR, tmp_path, dirs_exist_ok=True)
    (tmp_path / "slowdown_prior.json").write_text(
        json.dumps({"intercept": 0.9, "step_ratio": 0.07, "gpu_speed": -0.2})
    )
    with pytest.raises(ValueError, match="retrain"):
        artifacts.load(tmp_path)


def _with_prior(directory: Path, prior: SlowdownPrior) -> XGBoostPredictor:
    shutil.copytree(artifacts.SHIPPED_DIR, directory, dirs_exist_ok=True)
    artifacts.save_prior(directory, prior, {})
    return XGBoostPredictor(artifacts.load(directory))


def test_the_predictor_starts_every_pair_from_the_saved_prior(tmp_path: Path) -> None:
    # A catalog pair Gavel never ran, on a GPU it never measured: no neighbours, prior and trees only.
    query = [("h100", Workload("vgg16", 32), Workload("gpt2", 4))]
    none = _with_prior(tmp_path / "none", SlowdownPrior(contention=0.0)).pairs(query)[0]
    some = _with_prior(tmp_path / "some", SlowdownPrior(contention=0.5)).pairs(query)[0]
    assert (none.slowdown_a, none.slowdown_b) == (1.0, 1.0)  # no contention: nothing for the trees to scale
    assert some.slowdown_a > 1.0 and some.slowdown_b > 1.0


def test_a_pods_cpu_load_slows_its_co_runner_through_the_prior(tmp_path: Path) -> None:
    predictor = _with_prior(tmp_path, SlowdownPrior(contention=0.45, cpu_contention=0.3))
    quiet = predictor.pairs([("h100", Workload("resnet18", 32), Workload("ppo", 64))])[0]
    loaded = predictor.pairs([("h100", Workload("resnet18", 32), Workload("ppo", 64, host_cpus=4.0))])[0]
    assert loaded.slowdown_a > quiet.slowdown_a
