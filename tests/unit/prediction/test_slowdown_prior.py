"""The physical slowdown prior: fitted on the measured pairs, blended in where no relative was measured."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from horus_operator.prediction import artifacts, catalog, slowdown
from horus_operator.prediction.api import Workload
from horus_operator.prediction.predictor import XGBoostPredictor
from horus_operator.prediction.slowdown import SlowdownPrior
from horus_operator.prediction.training import common, slowdown_fit

PAIRS = Path(__file__).resolve().parents[3] / "data" / "colocation" / "gavel_pairs_train.csv"


def test_fit_prior_recovers_a_linear_law() -> None:
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(50, 2))
    law = SlowdownPrior(intercept=0.4, step_ratio=0.1, gpu_speed=-0.2)
    fitted = slowdown_fit.fit_prior(inputs, np.exp(law.log_slowdown(inputs)))
    assert fitted.to_dict() == pytest.approx(law.to_dict())


def test_a_few_wild_measurements_do_not_move_the_prior() -> None:
    # Like Gavel's V100 pairs: most follow the law, a few slow down 8x for no visible reason.
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(60, 2))
    law = SlowdownPrior(intercept=0.5, step_ratio=0.07, gpu_speed=-0.2)
    slowdowns = np.exp(law.log_slowdown(inputs))
    slowdowns[:4] *= 8.0
    fitted = slowdown_fit.fit_prior(inputs, slowdowns)
    assert fitted.to_dict() == pytest.approx(law.to_dict(), abs=1e-6)


def test_on_gavels_measurements_slower_gpus_and_longer_step_co_runners_slow_a_job_more() -> None:
    samples = common.slowdown_samples(PAIRS)
    feasible = samples["feasible"].to_numpy()
    priors = slowdown_fit.prior_inputs(samples, catalog.lookup, artifacts.load().roofline)
    prior = slowdown_fit.fit_prior(priors[feasible], samples["slowdown"].to_numpy()[feasible])
    assert prior.gpu_speed < 0
    assert prior.step_ratio > 0


def test_the_prior_enters_only_where_no_neighbour_estimate_exists() -> None:
    pair_only = np.zeros((2, len(slowdown.COLUMNS) - 12))
    raw, prior = np.array([0.2, 0.4]), np.array([1.0, 1.0])
    blended = slowdown.blended(raw, pair_only, prior)
    assert blended == pytest.approx((1 - slowdown.PRIOR_WEIGHT) * raw + slowdown.PRIOR_WEIGHT * prior)


def _with_prior(directory: Path, prior: SlowdownPrior) -> XGBoostPredictor:
    shutil.copytree(artifacts.SHIPPED_DIR, directory, dirs_exist_ok=True)
    artifacts.save_prior(directory, prior, {})
    return XGBoostPredictor(artifacts.load(directory))


def test_the_predictor_blends_the_saved_prior_into_a_pair_never_measured(tmp_path: Path) -> None:
    # A catalog pair Gavel never ran, on a GPU it never measured: no neighbours, so the prior enters.
    query = [("h100", Workload("vgg16", 32), Workload("gpt2", 4))]
    low = _with_prior(tmp_path / "low", SlowdownPrior(intercept=0.0)).pairs(query)[0]
    high = _with_prior(tmp_path / "high", SlowdownPrior(intercept=math.log(4.0))).pairs(query)[0]
    expected = math.exp(slowdown.PRIOR_WEIGHT * math.log(4.0))
    if low.slowdown_a > 1.0:  # from_raw clamps at 1
        assert high.slowdown_a / low.slowdown_a == pytest.approx(expected, rel=1e-4)
    assert high.slowdown_b > low.slowdown_b
