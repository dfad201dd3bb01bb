"""Co-location slowdown model: how much a job slows down sharing one GPU with another job.

A single XGBoost regressor predicts log(slowdown) of a job from the GPU's datasheet figures, its own
graph features and its co-runner's (design.PAIR_COLUMNS), and from what the training measurements say
about the pair's relatives (neighbours.NEIGHBOUR_COLUMNS: the same pair on other GPU types, neighbouring
batch sizes, each job's mean slowdown over its partners). It is trained on both orderings of every
measured pair, so (a with b) and (b with a) are two samples. Its output is blended with a direct
estimate from the neighbours (`blended`).

Sets of more than two jobs (not in the training data) extrapolate by adding the pairwise excesses:
s_i = 1 + Σ_j (s_ij − 1). Under pure time slicing of k identical jobs each pair gives s = 2 and the sum
gives k, the time-sharing slowdown; a product of pairwise slowdowns would give 2^(k−1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from horus_operator.prediction import design, neighbours

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
# Weight of the training copies whose neighbour columns treat one configuration as never measured
# (training.neighbour_training_set); chosen by cross-validation.
UNSEEN_CONFIGURATION_WEIGHT = 0.5
# Share of neighbours.direct_estimate in a prediction where it exists; chosen by cross-validation
# (0.2-0.35 best on held-out rows and new batch sizes alike, docs/prediction.md).
DIRECT_WEIGHT = 0.3
COLUMNS: tuple[str, ...] = design.PAIR_COLUMNS + neighbours.NEIGHBOUR_COLUMNS


def label(slowdowns: np.ndarray) -> np.ndarray:
    """The regression target for measured slowdowns."""
    return np.log(np.asarray(slowdowns, dtype=np.float64))


def from_raw(raw: np.ndarray) -> np.ndarray:
    """Slowdowns (>= 1) from the regressor's raw output."""
    return np.maximum(1.0, np.exp(raw))


def blended(raw: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """The regressor's raw output for rows of COLUMNS, blended with the neighbours' direct estimate
    where there is one (weight DIRECT_WEIGHT); unchanged for rows of design.PAIR_COLUMNS alone."""
    if matrix.shape[1] != len(COLUMNS):
        return raw
    direct = neighbours.direct_estimate(matrix[:, len(design.PAIR_COLUMNS) :])
    return np.where(
        np.isnan(direct), raw, (1.0 - DIRECT_WEIGHT) * raw + DIRECT_WEIGHT * np.nan_to_num(direct)
    )


def combine(pairwise: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Slowdown of each job in a set from `pairwise[i][j]`, the slowdown of i sharing with j (the
    diagonal is ignored): pairwise excesses add."""
    return tuple(
        1.0 + sum(s_ij - 1.0 for j, s_ij in enumerate(row) if j != i) for i, row in enumerate(pairwise)
    )
