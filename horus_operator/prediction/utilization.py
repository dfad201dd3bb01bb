"""Utilization model: mean GPU utilization of a job running alone, from its graph features.

An XGBoost regressor on design.JOB_COLUMNS trained on log(1 + utilization %), so squared error in
training is the RMSLE the Horus paper reports (0.154).
"""

from __future__ import annotations

import numpy as np

# The data set is small (tens of rows): shallow trees, strong regularisation.
PARAMS: dict[str, object] = {
    "objective": "reg:squarederror",
    "tree_method": "hist",
    "eta": 0.05,
    "max_depth": 2,
    "min_child_weight": 3.0,
    "subsample": 0.8,
    "lambda": 5.0,
    "nthread": 1,  # more threads spin-wait badly on a shared CPU
    "seed": 0,
}
ROUNDS = 150


def label(utilization: np.ndarray) -> np.ndarray:
    """The regression target for utilization fractions (0..1)."""
    return np.log1p(100.0 * np.asarray(utilization, dtype=np.float64))


def from_raw(raw: np.ndarray) -> np.ndarray:
    """Utilization fractions (0..1) from the regressor's raw output."""
    return np.clip(np.expm1(raw) / 100.0, 0.0, 1.0)
