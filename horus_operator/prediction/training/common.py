"""What every training pipeline shares: fold settings, scores, the booster fit, model-file metadata."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from horus_operator.prediction import catalog, datasets, measured
from horus_operator.prediction.api import UnknownModelError

CATALOG_FILE = Path(catalog.__file__).with_name("data") / "catalog.json"
PAIR_FOLDS = 5
SEED = 0
# The held-out-row split: like the evaluation data, (GPU type, pair) rows held out at random, so most
# have the same pair measured on another GPU type and the same models at other batch sizes.
ROW_HOLDOUT_FRACTION = 0.45
ROW_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class CvScore:
    model: float
    baseline: float
    samples: int

    def as_dict(self) -> dict[str, float | None]:
        # No test rows (a tiny user data set): null rather than NaN, which JSON lacks.
        return {
            "mape": None if self.samples == 0 else round(self.model, 4),
            "baseline_mape": None if self.samples == 0 else round(self.baseline, 4),
            "samples": self.samples,
        }


def mape_optimal_constant(values: np.ndarray) -> float:
    """The constant c minimising mean(|c - v| / v): the median of v weighted by 1/v."""
    order = np.argsort(values)
    weights = 1.0 / values[order]
    cumulative = np.cumsum(weights)
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2.0)])


def fit_booster(
    matrix: np.ndarray,
    target: np.ndarray,
    columns: tuple[str, ...],
    params: dict[str, object],
    rounds: int,
    weights: np.ndarray | None = None,
) -> xgb.Booster:
    data = xgb.DMatrix(matrix, label=target, weight=weights, feature_names=list(columns))
    return xgb.train(dict(params), data, num_boost_round=rounds)


def slowdown_samples(pairs_csv: str | Path) -> pd.DataFrame:
    return datasets.pair_samples(datasets.read_csv(pairs_csv, datasets.PAIR_CSV_COLUMNS))


def host_cpus(path: str | Path | None) -> dict[str, float]:
    """Catalog model -> CPU cores its measured jobs kept busy beside the training loop (a CSV with
    `model,host_cpus`, e.g. data/colocation/gavel_host_cpus.csv); {} without a file: nothing known."""
    if path is None:
        return {}
    return {catalog_name(model) or model: cpus for model, cpus in measured.read_host_cpus(path).items()}


def metadata_entry(
    data: str | Path, columns: list[str], metrics: dict[str, Any], samples: int
) -> dict[str, Any]:
    return {
        "data_file": Path(data).name,
        "data_sha256": datasets.sha256_of(data),
        # The models learn from catalog features: a regenerated catalog calls for retraining.
        "catalog_sha256": datasets.sha256_of(CATALOG_FILE),
        "trained": datetime.date.today().isoformat(),
        "features": columns,
        "samples": samples,
        "cv": metrics,
    }


def catalog_name(name: str) -> str | None:
    """The catalog model a measurement's model name refers to, or None."""
    try:
        return catalog.canonical(name)
    except UnknownModelError:
        return None
