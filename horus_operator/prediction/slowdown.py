"""Co-location slowdown model: how much a job slows down sharing one GPU with another job.

Every prediction starts from a physical prior (`SlowdownPrior`): time-sharing of the GPU and of the
host CPU, from each job's predicted busy fraction and CPU load alone on the GPU. A single XGBoost
regressor learns the residual, log(measured / prior), from the GPU's datasheet figures, both jobs'
graph features (design.PAIR_COLUMNS), the prior's inputs (PRIOR_INPUTS) and what the training
measurements say about the pair's relatives (neighbours.NEIGHBOUR_COLUMNS: the same pair on other GPU
types, neighbouring batch sizes, each job's mean slowdown over its partners). Where no measured relative
vouches for it, the residual is bounded relative to the prior, so where the physics says two jobs
barely meet on the GPU no tree can say otherwise. It is trained on both orderings of every measured
pair, so (a with b) and (b with a) are two samples. Where the pair has measured relatives, the result
is blended with their direct estimate (`blended`), and where one job of the pair was measured, with
that job's measured score.

Sets of more than two jobs (not in the training data) extrapolate by adding the pairwise excesses:
s_i = 1 + Σ_j (s_ij − 1). Under pure time slicing of k identical jobs each pair gives s = 2 and the sum
gives k, the time-sharing slowdown; a product of pairwise slowdowns would give 2^(k−1).
"""

from __future__ import annotations

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
# Share of the trees' residual kept where no measured relative vouches for it (a GPU type or
# configuration never measured): the trees learned how the measured GPUs depart from the prior, which
# need not hold elsewhere. Leaving one GPU type out (pooled MAPE / Spearman): 1.0 0.260 / +0.37,
# 0.5 0.239 / +0.33, 0.3 0.236 / +0.27; chosen on that split, so its numbers are slightly optimistic.
UNVOUCHED_RESIDUAL_WEIGHT = 0.5
# The prior's inputs for an ordered pair (own job, co-runner), each job alone on the pair's GPU:
# roofline busy fractions (`roofline.StepEstimate.busy`) and the CPU cores each job keeps busy beside
# its training loop (`api.Workload.host_cpus`). The trees see them and the prior's answer too, so that
# they can tell where the prior errs (by-pair MAPE 0.094 without them, 0.087 with; 0.091 without the
# answer).
PRIOR_INPUTS: tuple[str, ...] = ("own_busy", "other_busy", "own_host_cpus", "other_host_cpus")
# The trees' inputs without neighbour columns (a model trained without them), and with them.
GRAPH_COLUMNS: tuple[str, ...] = design.PAIR_COLUMNS + PRIOR_INPUTS + ("prior_log_slowdown",)
COLUMNS: tuple[str, ...] = GRAPH_COLUMNS + neighbours.NEIGHBOUR_COLUMNS
_FIXED_POINT_ITERATIONS = 60  # the stretch map contracts (k < 1); 60 rounds settle to < 1e-9
_SETTLED = 1e-12  # a stretch that moves less than this between rounds has settled


@dataclass(frozen=True)
class SlowdownPrior:
    """Time-sharing physics of two jobs on one GPU, from what each does alone (docs/prediction.md).

    A job's step alternates between GPU work (its busy fraction u of the step alone) and host work
    (1 − u: dispatch, data loading, synchronisation). Sharing stretches each part:
    - GPU: while the co-runner's kernels run, the job gets a share 1 − k of the GPU (k = `contention`;
      time-slicing two contexts gives k = 1/2, overlapping kernels less). The co-runner runs kernels a
      fraction v of the wall time, independent of the job's phase, so the job's GPU work stretches by
      g = 1 / (1 − k·v).
    - host: each CPU core the co-runner keeps busy beside its training loop (data-loader workers,
      simulators) stretches the job's host work by `cpu_contention`: h = 1 + cpu_contention × cores.
    The slowdown is s = (1 − u)·h + u·g, and v = u·g / s for each job: both stretches depend on each
    other, solved as a fixed point. It is 1 when either job leaves the GPU idle (u → 0, no CPU load),
    grows with the co-runner's busy fraction, and is 1 / (1 − k) for two saturating jobs (2 under
    time-slicing). No step-time or GPU-name term: a faster GPU enters through lower busy fractions.

    The slowdown trees (`slowdown.json`) are a residual on top. Where no measured relative of the pair
    vouches for them (`blended`), they may scale the prior's log slowdown by a factor between 0 and
    1 + `residual_bound` only, so where the prior says "no contention" the trees cannot invent it, and
    off the training distribution the physics dominates (`bounded`).
    """

    contention: float = 0.5
    cpu_contention: float = 0.0
    # Gavel's residuals, log(measured / fitted prior) ÷ log(prior): median 0.06, 75th percentile 0.5,
    # 90th 2.9 (jobs the roofline sees nearly idle that measure 2×): 2 lets the trees follow most of
    # the measured spread and keeps two jobs ≤ 15 % busy under 1.10 whatever the trees say.
    residual_bound: float = 2.0

    @staticmethod
    def inputs(own: Sequence[float], other: Sequence[float]) -> tuple[float, ...]:
        """PRIOR_INPUTS of an ordered pair from each job's (busy fraction, host CPUs)."""
        return own[0], other[0], own[1], other[1]

    def log_slowdown(self, inputs: np.ndarray) -> np.ndarray:
        """Log slowdown of the own job for rows of PRIOR_INPUTS."""
        return np.log(self.slowdowns(inputs)[0])

    def slowdowns(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(own job's, co-runner's) slowdowns for rows of PRIOR_INPUTS."""
        busy_a, busy_b, cpus_a, cpus_b = np.clip(
            np.asarray(inputs, dtype=np.float64).reshape(-1, len(PRIOR_INPUTS)), 0.0, None
        ).T
        busy_a, busy_b, k = np.minimum(busy_a, 1.0), np.minimum(busy_b, 1.0), self.contention
        host_a, host_b = 1.0 + self.cpu_contention * cpus_b, 1.0 + self.cpu_contention * cpus_a
        stretch_a, stretch_b = np.ones_like(busy_a), np.ones_like(busy_b)
        for _ in range(_FIXED_POINT_ITERATIONS):
            # Both shares of wall time from the same iterate: each stays ≤ 1, so 1 − k·v ≥ 1 − k > 0.
            running_a = busy_a * stretch_a / ((1.0 - busy_a) * host_a + busy_a * stretch_a)
            running_b = busy_b * stretch_b / ((1.0 - busy_b) * host_b + busy_b * stretch_b)
            previous = np.concatenate([stretch_a, stretch_b])
            stretch_a, stretch_b = 1.0 / (1.0 - k * running_b), 1.0 / (1.0 - k * running_a)
            if np.max(np.abs(np.concatenate([stretch_a, stretch_b]) - previous), initial=0.0) < _SETTLED:
                break  # a placement query's few pairs mostly settle in a few rounds
        return (1.0 - busy_a) * host_a + busy_a * stretch_a, (1.0 - busy_b) * host_b + busy_b * stretch_b

    def bounded(self, residual: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """Log slowdown: the prior's `prior` plus the trees' `residual`, clipped so that the result
        lies between 0 (no slowdown) and (1 + residual_bound) × prior."""
        excess = np.maximum(prior, 0.0)
        return prior + np.clip(residual, -excess, self.residual_bound * excess)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, float], source: str = "") -> SlowdownPrior:
        """Read a saved prior; one saved before the time-sharing prior (`intercept`, `step_ratio`,
        `gpu_speed`) belongs to trees that are not residuals, so it is refused with what to do."""
        if "intercept" in values:
            raise ValueError(
                f"{source or 'slowdown prior'}: saved by a release before the time-sharing prior; "
                "retrain with `horus train slowdown` (the trees are now residuals on the prior)"
            )
        return cls(**values)


def tree_inputs(pairs: np.ndarray, inputs: np.ndarray, law: SlowdownPrior) -> tuple[np.ndarray, np.ndarray]:
    """(rows of GRAPH_COLUMNS, the prior's log slowdowns) from rows of design.PAIR_COLUMNS and of
    PRIOR_INPUTS."""
    inputs = np.asarray(inputs, dtype=np.float64).reshape(len(pairs), len(PRIOR_INPUTS))
    prior = law.log_slowdown(inputs)
    return np.hstack([pairs, inputs, prior[:, None]]), prior


def label(slowdowns: np.ndarray) -> np.ndarray:
    """The regression target for measured slowdowns."""
    return np.log(np.asarray(slowdowns, dtype=np.float64))


def from_raw(raw: np.ndarray) -> np.ndarray:
    """Slowdowns (>= 1) from the regressor's raw output."""
    return np.maximum(1.0, np.exp(raw))


def blended(residual: np.ndarray, matrix: np.ndarray, prior: np.ndarray, law: SlowdownPrior) -> np.ndarray:
    """Log slowdowns for rows of COLUMNS (or of GRAPH_COLUMNS alone, which have no neighbour
    estimate): the physical prior's `prior` plus the trees' `residual`.

    Where the pair has measured relatives on this GPU type (the neighbours' direct estimate), those
    measurements vouch for the trees and the residual is not bounded; the result is blended with the
    direct estimate (weight DIRECT_WEIGHT). Everywhere else (a GPU type or configuration never
    measured) the residual is shrunk (UNVOUCHED_RESIDUAL_WEIGHT) and bounded by `law`, and the physics
    dominates; where the measurements know one job of the pair but not the other (a new architecture
    beside a measured one), their one-sided estimate enters with the same DIRECT_WEIGHT."""
    physical = law.bounded(UNVOUCHED_RESIDUAL_WEIGHT * residual, prior)
    if matrix.shape[1] != len(COLUMNS):
        return physical
    columns = matrix[:, len(GRAPH_COLUMNS) :]
    one_sided = neighbours.one_sided_estimate(columns)
    with_one_side = (1.0 - DIRECT_WEIGHT) * physical + DIRECT_WEIGHT * np.nan_to_num(one_sided)
    without = np.where(np.isnan(one_sided), physical, with_one_side)
    direct = neighbours.direct_estimate(columns)
    vouched = (1.0 - DIRECT_WEIGHT) * (prior + residual) + DIRECT_WEIGHT * np.nan_to_num(direct)
    return np.where(np.isnan(direct), without, vouched)


def combine(pairwise: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Slowdown of each job in a set from `pairwise[i][j]`, the slowdown of i sharing with j (the
    diagonal is ignored): pairwise excesses add."""
    return tuple(
        1.0 + sum(s_ij - 1.0 for j, s_ij in enumerate(row) if j != i) for i, row in enumerate(pairwise)
    )
