"""Co-location slowdown model: how much a job slows down sharing one GPU with another job.

A single XGBoost regressor predicts log(slowdown) of a job from the GPU's datasheet figures, its own
graph features and its co-runner's (design.PAIR_COLUMNS), and from what the training measurements say
about the pair's relatives (neighbours.NEIGHBOUR_COLUMNS: the same pair on other GPU types, neighbouring
batch sizes, each job's mean slowdown over its partners). It is trained on both orderings of every
measured pair, so (a with b) and (b with a) are two samples. Its output is blended with a direct
estimate from the neighbours (`blended`) where the pair has measured relatives, and otherwise with a
physical prior (`SlowdownPrior`) and, where one job of the pair was measured, that job's measured
score: on a GPU or with an architecture the measurements never saw, the trees alone rank pairs poorly
(docs/prediction.md, "Transfer").

Sets of more than two jobs (not in the training data) extrapolate by adding the pairwise excesses:
s_i = 1 + Σ_j (s_ij − 1). Under pure time slicing of k identical jobs each pair gives s = 2 and the sum
gives k, the time-sharing slowdown; a product of pairwise slowdowns would give 2^(k−1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

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
# Share of the physical prior in a prediction without a neighbour estimate; chosen on the transfer splits
# (0.3-0.7 all improved on the trees alone; bench/prediction_transfer.py).
PRIOR_WEIGHT = 0.5
COLUMNS: tuple[str, ...] = design.PAIR_COLUMNS + neighbours.NEIGHBOUR_COLUMNS


@dataclass(frozen=True)
class SlowdownPrior:
    """log(slowdown) = intercept + step_ratio × log(other's step / own step) + gpu_speed × log(FP32 TFLOPS).

    Time-slicing physics in two terms, both from the roofline step-time estimate and the GPU table:
    a co-runner with longer steps (longer kernels, more GPU work between synchronisations) holds the GPU
    longer each time the job waits for it; and the faster the GPU, the more of each step is host time
    the co-runner can use, so the less two jobs contend (Gavel: median 1.89 on the K80, 1.66 on the
    P100, 1.49 on the V100). Fitted by least squares on the measured pairs (`training.fit_prior`).
    """

    intercept: float = 0.5
    step_ratio: float = 0.0
    gpu_speed: float = 0.0

    @staticmethod
    def inputs(own_step_ms: float, other_step_ms: float, fp32_tflops: float) -> tuple[float, float]:
        return math.log(other_step_ms / own_step_ms), math.log(fp32_tflops)

    def log_slowdown(self, inputs: np.ndarray) -> np.ndarray:
        """For rows of `inputs` (log step ratio, log FP32 TFLOPS)."""
        inputs = np.asarray(inputs, dtype=np.float64).reshape(-1, 2)
        return self.intercept + self.step_ratio * inputs[:, 0] + self.gpu_speed * inputs[:, 1]

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def label(slowdowns: np.ndarray) -> np.ndarray:
    """The regression target for measured slowdowns."""
    return np.log(np.asarray(slowdowns, dtype=np.float64))


def from_raw(raw: np.ndarray) -> np.ndarray:
    """Slowdowns (>= 1) from the regressor's raw output."""
    return np.maximum(1.0, np.exp(raw))


def blended(raw: np.ndarray, matrix: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """The regressor's raw output for rows of COLUMNS (or of design.PAIR_COLUMNS alone, which have no
    neighbour estimate), blended with the neighbours' direct estimate where there is one (weight
    DIRECT_WEIGHT), else with `prior`, the physical prior's log slowdowns (weight PRIOR_WEIGHT). Where
    the measurements know one job of the pair but not the other (a new architecture beside a measured
    one), their one-sided estimate enters that blend with the same DIRECT_WEIGHT."""
    without = (1.0 - PRIOR_WEIGHT) * raw + PRIOR_WEIGHT * prior
    if matrix.shape[1] != len(COLUMNS):
        return without
    columns = matrix[:, len(design.PAIR_COLUMNS) :]
    one_sided = neighbours.one_sided_estimate(columns)
    with_one_side = (1.0 - DIRECT_WEIGHT) * without + DIRECT_WEIGHT * np.nan_to_num(one_sided)
    without = np.where(np.isnan(one_sided), without, with_one_side)
    direct = neighbours.direct_estimate(columns)
    return np.where(
        np.isnan(direct), without, (1.0 - DIRECT_WEIGHT) * raw + DIRECT_WEIGHT * np.nan_to_num(direct)
    )


def combine(pairwise: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Slowdown of each job in a set from `pairwise[i][j]`, the slowdown of i sharing with j (the
    diagonal is ignored): pairwise excesses add."""
    return tuple(
        1.0 + sum(s_ij - 1.0 for j, s_ij in enumerate(row) if j != i) for i, row in enumerate(pairwise)
    )
