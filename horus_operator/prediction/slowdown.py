"""Co-location slowdown model: how much a job slows down sharing one GPU with another job.

A single XGBoost regressor predicts log(slowdown) of a job from the GPU's datasheet figures, its own
graph features and its co-runner's (design.PAIR_COLUMNS). It is trained on both orderings of every
measured pair, so (a with b) and (b with a) are two samples.

Sets of more than two jobs (not in the training data) extrapolate by adding the pairwise excesses:
s_i = 1 + Σ_j (s_ij − 1). Under pure time slicing of k identical jobs each pair gives s = 2 and the sum
gives k, the time-sharing slowdown; a product of pairwise slowdowns would give 2^(k−1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PARAMS: dict[str, object] = {
    "objective": "reg:squarederror",
    "tree_method": "hist",
    "eta": 0.03,
    "max_depth": 6,
    "min_child_weight": 1.0,
    "subsample": 0.8,
    "colsample_bytree": 0.5,
    "lambda": 1.0,
    "nthread": 1,  # more threads spin-wait badly on a shared CPU
    "seed": 0,
}
ROUNDS = 600


def label(slowdowns: np.ndarray) -> np.ndarray:
    """The regression target for measured slowdowns."""
    return np.log(np.asarray(slowdowns, dtype=np.float64))


def from_raw(raw: np.ndarray) -> np.ndarray:
    """Slowdowns (>= 1) from the regressor's raw output."""
    return np.maximum(1.0, np.exp(raw))


def combine(pairwise: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Slowdown of each job in a set from `pairwise[i][j]`, the slowdown of i sharing with j (the
    diagonal is ignored): pairwise excesses add."""
    return tuple(
        1.0 + sum(s_ij - 1.0 for j, s_ij in enumerate(row) if j != i) for i, row in enumerate(pairwise)
    )
