"""Cross-validation splits and error metrics for the prediction models.

Splits are index arrays into a sample table. `pair_folds` keeps both orderings of a pair (on every GPU
type) in the same fold: the model never sees the pair it is tested on. `configuration_folds` holds out
one job configuration (model + batch size) at a time with every pair that touches it, on every GPU
type: the model has never seen that configuration at all. `row_holdout` holds out random (GPU type,
pair) rows, as the evaluation data do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

Split = tuple[np.ndarray, np.ndarray]  # (train indices, test indices)


def group_folds(groups: Sequence[str], n_splits: int, rng: np.random.Generator) -> list[Split]:
    """K folds over shuffled distinct groups; a group's rows are all in one test fold."""
    labels = pd.Series(list(groups))
    distinct = labels.unique()
    rng.shuffle(distinct)
    fold_of_group = {group: number % n_splits for number, group in enumerate(distinct)}
    fold = labels.map(fold_of_group).to_numpy()
    indices = np.arange(len(labels))
    return [(indices[fold != k], indices[fold == k]) for k in range(n_splits)]


def pair_folds(samples: pd.DataFrame, n_splits: int, rng: np.random.Generator) -> list[Split]:
    return group_folds(samples["pair_id"].tolist(), n_splits, rng)


def row_holdout(samples: pd.DataFrame, fraction: float, rng: np.random.Generator) -> Split:
    """One split holding out `fraction` of the (GPU type, pair) rows at random, both orderings together;
    the same pair on other GPU types may stay in training."""
    rows = (samples["gpu"] + "|" + samples["pair_id"]).to_numpy()
    distinct = np.unique(rows)
    held_out = rng.choice(distinct, round(fraction * len(distinct)), replace=False)
    test = np.isin(rows, held_out)
    indices = np.arange(len(rows))
    return indices[~test], indices[test]


def configuration_folds(samples: pd.DataFrame) -> Iterator[tuple[str, Split]]:
    """(configuration, split) for each configuration: test = rows where it is either job."""
    indices = np.arange(len(samples))
    configurations = sorted(set(samples["own_config"]) | set(samples["other_config"]))
    for configuration in configurations:
        touches = (
            (samples["own_config"] == configuration) | (samples["other_config"] == configuration)
        ).to_numpy()
        yield configuration, (indices[~touches], indices[touches])


def mape(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Mean absolute percentage error (a fraction: 0.07 is 7%)."""
    actual = np.asarray(actual, dtype=np.float64)
    return float(np.mean(np.abs(np.asarray(predicted, dtype=np.float64) - actual) / actual))


def rmsle(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Root mean squared logarithmic error, sqrt(mean((log(1+p) - log(1+a))^2))."""
    difference = np.log1p(np.asarray(predicted, dtype=np.float64)) - np.log1p(
        np.asarray(actual, dtype=np.float64)
    )
    return float(np.sqrt(np.mean(difference**2)))
