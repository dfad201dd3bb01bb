"""Cross-validation: the shipped slowdown model's recipe beats a constant on pairs it never saw.

The full evaluation (hack/train_models.py, numbers in docs/prediction.md) takes minutes; this check runs
the same pipeline with the shipped hyper-parameters but fewer, larger boosting steps to stay fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from horus_operator.prediction import artifacts, catalog, slowdown, validation
from horus_operator.prediction.training import common, slowdown_fit

HOST_CPUS = Path(__file__).resolve().parents[3] / "data" / "colocation" / "gavel_host_cpus.csv"
PAIRS = Path(__file__).resolve().parents[3] / "data" / "colocation" / "gavel_pairs_train.csv"
QUICK = slowdown.PARAMS | {"eta": 0.15}
QUICK_ROUNDS = 120


def test_slowdown_beats_constant_on_held_out_pairs() -> None:
    samples = common.slowdown_samples(PAIRS)
    matrix = slowdown_fit.slowdown_matrix(samples, catalog.lookup)
    folds = validation.pair_folds(samples, 5, np.random.default_rng(0))
    result = slowdown_fit.score(
        slowdown_fit.cross_validate_slowdown(
            samples, matrix, _priors(samples), folds, params=QUICK, rounds=QUICK_ROUNDS
        )
    )
    assert result.samples > 900
    # The constant scores about 0.23; the model must do markedly better, not just tie.
    assert result.model < 0.7 * result.baseline


def test_neighbour_columns_help_on_held_out_rows() -> None:
    samples = common.slowdown_samples(PAIRS)
    matrix = slowdown_fit.slowdown_matrix(samples, catalog.lookup)
    split = [validation.row_holdout(samples, common.ROW_HOLDOUT_FRACTION, np.random.default_rng(0))]
    priors = _priors(samples)

    def held_out_mape(use_neighbours: bool) -> float:
        folds = slowdown_fit.cross_validate_slowdown(
            samples, matrix, priors, split, params=QUICK, rounds=QUICK_ROUNDS, use_neighbours=use_neighbours
        )
        return slowdown_fit.score(folds).model

    assert held_out_mape(use_neighbours=True) < held_out_mape(use_neighbours=False)


def _priors(samples: object) -> np.ndarray:
    return slowdown_fit.prior_inputs(
        samples, catalog.lookup, artifacts.load().roofline, common.host_cpus(HOST_CPUS)
    )


def test_slowdown_beats_constant_on_a_gpu_type_it_never_saw() -> None:
    """Leave one GPU type out (bench/prediction_transfer.py reports the full table)."""
    samples = common.slowdown_samples(PAIRS)
    matrix = slowdown_fit.slowdown_matrix(samples, catalog.lookup)
    gpus = samples["gpu"].to_numpy()
    everything = np.arange(len(samples))
    folds = [(everything[gpus != gpu], everything[gpus == gpu]) for gpu in sorted(set(gpus))]
    result = slowdown_fit.score(
        slowdown_fit.cross_validate_slowdown(
            samples, matrix, _priors(samples), folds, params=QUICK, rounds=QUICK_ROUNDS
        )
    )
    assert result.model < result.baseline


def _iqr(values: np.ndarray) -> float:
    high, low = np.quantile(values, [0.75, 0.25])
    return float(high - low)


@pytest.mark.xfail(
    strict=True,
    reason="issue 25: on Gavel's K80 and V100 the roofline sees nearly every job saturating, so the "
    "time-sharing prior predicts about one value per GPU (docs/prediction.md, Transfer)",
)
def test_on_a_gpu_left_out_the_predictions_keep_half_the_measured_spread() -> None:
    samples = common.slowdown_samples(PAIRS)
    matrix = slowdown_fit.slowdown_matrix(samples, catalog.lookup)
    gpus = samples["gpu"].to_numpy()
    everything = np.arange(len(samples))
    folds = [(everything[gpus != gpu], everything[gpus == gpu]) for gpu in sorted(set(gpus))]
    results = slowdown_fit.cross_validate_slowdown(
        samples, matrix, _priors(samples), folds, params=QUICK, rounds=QUICK_ROUNDS
    )
    ratios = {fold.gpu[0]: _iqr(fold.predicted) / _iqr(fold.actual) for fold in results}
    assert min(ratios.values()) >= 0.5, ratios


def test_row_holdout_keeps_both_orderings_of_a_gpu_pair_together() -> None:
    samples = common.slowdown_samples(PAIRS)
    rows = samples["gpu"] + "|" + samples["pair_id"]
    train, test = validation.row_holdout(samples, 0.45, np.random.default_rng(3))
    assert not set(rows.iloc[train]) & set(rows.iloc[test])
    assert abs(rows.iloc[test].nunique() / rows.nunique() - 0.45) < 0.01
    # Unlike pair_folds, a held-out pair usually stays measured on another GPU type.
    assert set(samples["pair_id"].iloc[train]) & set(samples["pair_id"].iloc[test])


def test_pair_folds_hold_out_both_orderings_on_every_gpu() -> None:
    samples = common.slowdown_samples(PAIRS)
    for train, test in validation.pair_folds(samples, 5, np.random.default_rng(0)):
        assert not set(samples["pair_id"].iloc[train]) & set(samples["pair_id"].iloc[test])


def test_configuration_folds_hold_out_every_pair_touching_the_configuration() -> None:
    samples = common.slowdown_samples(PAIRS)
    for configuration, (train, _) in validation.configuration_folds(samples):
        seen = set(samples["own_config"].iloc[train]) | set(samples["other_config"].iloc[train])
        assert configuration not in seen


def test_mape_optimal_constant_minimises_mape() -> None:
    values = np.array([1.0, 1.2, 1.5, 2.0, 4.0, 8.0])
    best = common.mape_optimal_constant(values)
    for other in np.linspace(1.0, 8.0, 71):
        assert validation.mape(values, np.full(6, best)) <= validation.mape(values, np.full(6, other)) + 1e-12


def test_configuration_kinds() -> None:
    names = ["lstm-lm@5", "lstm-lm@10", "lstm-lm@40", "a3c@1"]
    assert slowdown_fit.configuration_kinds(names) == ["edge", "interior", "edge", "architecture"]
