"""Neighbour features: what the shipped measurements say about a pair's close relatives.

A co-location pair that was not measured usually has measured relatives: the same pair on another GPU
type, the same models at neighbouring batch sizes on the same GPU, and each job's other pairs. The
columns here (NEIGHBOUR_COLUMNS) summarise them for the slowdown model, beside the graph features:

- `nb_pair_<gpu>`: log-slowdown of the same ordered pair on each *other* GPU type (NaN on the row's own
  GPU type and where unmeasured), and `nb_pair_mean` their mean;
- `nb_own_batch` / `nb_other_batch`: the same pair on the same GPU with the job (resp. its co-runner) at
  the other measured batch sizes of its architecture, interpolated in log batch size (flat beyond the
  measured range);
- `nb_victim` / `nb_aggressor`: the job's mean log-slowdown over its partners on this GPU, and the mean
  log-slowdown the co-runner inflicts on its partners; `nb_victim_batches` / `nb_aggressor_batches` the
  same scores interpolated from the other batch sizes of the architecture (what an unmeasured batch size
  gets); `nb_additive`: victim + aggressor − the GPU's mean, a two-factor collaborative-filtering guess
  (`one_sided_estimate` is its value when only one of the two jobs was measured).

Every value comes from (GPU type, model name, batch size) and the measurements: no profiling of the job.
A row's own measurement (its GPU type and unordered pair) is always left out, so training rows see what
an unmeasured pair sees. A new architecture gets NaN everywhere (the trees' missing-value branches then
leave the prediction to the graph features). Pure Python and numpy: the predictor builds rows at runtime.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from horus_operator.prediction.gpus import MEASURED_GPU_TYPES

Config = tuple[str, int]  # (model name, batch size)
# (gpu, own model, own batch, other model, other batch, slowdown)
Measurement = tuple[str, str, int, str, int, float]

MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "gpu",
    "own_model",
    "own_batch",
    "other_model",
    "other_batch",
    "slowdown",
)
NEIGHBOUR_COLUMNS: tuple[str, ...] = (
    *(f"nb_pair_{gpu}" for gpu in MEASURED_GPU_TYPES),
    "nb_pair_mean",
    "nb_own_batch",
    "nb_other_batch",
    "nb_victim",
    "nb_victim_batches",
    "nb_aggressor",
    "nb_aggressor_batches",
    "nb_additive",
)
_NAN = float("nan")


@dataclass
class _Mean:
    total: float = 0.0
    count: int = 0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1

    def without(self, value: float | None) -> float:
        """The mean with one contribution (`value`, if not None) taken out; NaN when none is left."""
        total, count = (self.total, self.count) if value is None else (self.total - value, self.count - 1)
        return total / count if count > 0 else _NAN


class NeighbourTable:
    """Measured log-slowdowns of ordered pairs, indexed for the neighbour look-ups."""

    def __init__(self, measurements: Iterable[Measurement]) -> None:
        # (gpu, own, other) -> the measured slowdown, kept as given so the table round-trips exactly
        self._slowdowns: dict[tuple[str, Config, Config], float] = {
            (gpu, (own_model, int(own_batch)), (other_model, int(other_batch))): float(value)
            for gpu, own_model, own_batch, other_model, other_batch, value in measurements
        }
        self._pairs = {key: math.log(value) for key, value in self._slowdowns.items()}
        self._victim: dict[tuple[str, Config], _Mean] = defaultdict(_Mean)
        self._aggressor: dict[tuple[str, Config], _Mean] = defaultdict(_Mean)
        self._gpu_mean: dict[str, _Mean] = defaultdict(_Mean)
        # (gpu, model) -> batch sizes measured; (gpu, model, partner) -> {batch: log-slowdown}, both roles
        self._batches: dict[tuple[str, str], set[int]] = defaultdict(set)
        self._as_own: dict[tuple[str, str, Config], dict[int, float]] = defaultdict(dict)
        self._as_other: dict[tuple[str, str, Config], dict[int, float]] = defaultdict(dict)
        for (gpu, own, other), value in self._pairs.items():
            self._victim[(gpu, own)].add(value)
            self._aggressor[(gpu, other)].add(value)
            self._gpu_mean[gpu].add(value)
            self._batches[(gpu, own[0])].add(own[1])
            self._as_own[(gpu, own[0], other)][own[1]] = value
            self._as_other[(gpu, other[0], own)][other[1]] = value

    def __len__(self) -> int:
        return len(self._pairs)

    def measurements(self) -> list[Measurement]:
        return [
            (gpu, own[0], own[1], other[0], other[1], value)
            for (gpu, own, other), value in sorted(self._slowdowns.items())
        ]

    def row(self, gpu: str, own: Config, other: Config) -> list[float]:
        """NEIGHBOUR_COLUMNS for `own` sharing a `gpu` with `other`, its own measurement left out."""
        same_pair = [
            self._pairs.get((other_gpu, own, other), _NAN) if other_gpu != gpu else _NAN
            for other_gpu in MEASURED_GPU_TYPES
        ]
        measured = [value for value in same_pair if not math.isnan(value)]
        # The left-out measurement's contributions to the scores (if it is in the table).
        own_value = self._pairs.get((gpu, own, other))
        victim = self._victim[(gpu, own)].without(own_value) if (gpu, own) in self._victim else _NAN
        aggressor = (
            self._aggressor[(gpu, other)].without(own_value) if (gpu, other) in self._aggressor else _NAN
        )
        victim_batches = self._interpolate_score(self._victim, gpu, own)
        aggressor_batches = self._interpolate_score(self._aggressor, gpu, other)
        return [
            *same_pair,
            sum(measured) / len(measured) if measured else _NAN,
            _interpolate(self._as_own.get((gpu, own[0], other), {}), own[1]),
            _interpolate(self._as_other.get((gpu, other[0], own), {}), other[1]),
            victim,
            victim_batches,
            aggressor,
            aggressor_batches,
            _additive(
                victim if not math.isnan(victim) else victim_batches,
                aggressor if not math.isnan(aggressor) else aggressor_batches,
                self._gpu_mean[gpu].without(None) if gpu in self._gpu_mean else _NAN,
            ),
        ]

    def matrix(self, queries: Sequence[tuple[str, Config, Config]]) -> np.ndarray:
        return np.array([self.row(*query) for query in queries], dtype=np.float32).reshape(
            len(queries), len(NEIGHBOUR_COLUMNS)
        )

    def _interpolate_score(self, scores: dict[tuple[str, Config], _Mean], gpu: str, config: Config) -> float:
        """A victim or aggressor score of `config` from the other batch sizes of its architecture."""
        points = {}
        for batch in self._batches.get((gpu, config[0]), ()):
            key = (gpu, (config[0], batch))
            if batch != config[1] and key in scores:
                points[batch] = scores[key].without(None)
        return _interpolate(points, config[1])


def _interpolate(values_by_batch: dict[int, float], batch: int) -> float:
    """Linear in log batch size between the nearest measured batch sizes other than `batch`, flat beyond
    them; NaN when there are none."""
    points = sorted((math.log(other), value) for other, value in values_by_batch.items() if other != batch)
    points = [(x, y) for x, y in points if not math.isnan(y)]
    if not points:
        return _NAN
    xs, ys = zip(*points, strict=True)
    return float(np.interp(math.log(batch), xs, ys))


def _additive(victim: float, aggressor: float, gpu_mean: float) -> float:
    return victim + aggressor - gpu_mean


def one_sided_estimate(columns: np.ndarray) -> np.ndarray:
    """A log-slowdown from the one job of the pair the measurements know (rows of NEIGHBOUR_COLUMNS),
    NaN where they know neither or both (then `nb_additive` exists). It is `nb_additive` with the
    unknown job's factor set to the GPU's average: the known job's victim score (own job measured, the
    co-runner new) or the co-runner's aggressor score (own job new: a new architecture beside a measured
    one). Scores at other batch sizes stand in for an unmeasured batch size, as in `nb_additive`."""

    def score(measured: str, batches: str) -> np.ndarray:
        value = columns[:, NEIGHBOUR_COLUMNS.index(measured)]
        return np.where(np.isnan(value), columns[:, NEIGHBOUR_COLUMNS.index(batches)], value)

    victim = score("nb_victim", "nb_victim_batches")
    aggressor = score("nb_aggressor", "nb_aggressor_batches")
    return np.where(np.isnan(victim), aggressor, np.where(np.isnan(aggressor), victim, np.nan))


def direct_estimate(columns: np.ndarray) -> np.ndarray:
    """A log-slowdown straight from the neighbour columns (rows of NEIGHBOUR_COLUMNS), NaN where there
    is nothing to go on: the same pair on the same GPU at neighbouring batch sizes (the mean of
    `nb_own_batch` and `nb_other_batch` where measured), else `nb_additive`."""
    batches = columns[:, [NEIGHBOUR_COLUMNS.index("nb_own_batch"), NEIGHBOUR_COLUMNS.index("nb_other_batch")]]
    measured = ~np.isnan(batches)
    count = measured.sum(axis=1)
    mean = np.where(count > 0, np.where(measured, batches, 0.0).sum(axis=1) / np.maximum(count, 1), np.nan)
    return np.where(count > 0, mean, columns[:, NEIGHBOUR_COLUMNS.index("nb_additive")])
