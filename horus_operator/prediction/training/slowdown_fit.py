"""The slowdown model: pair rows, the neighbour table, the time-slicing prior, cross-validation."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from horus_operator.prediction import (
    artifacts,
    datasets,
    design,
    memory,
    neighbours,
    roofline,
    slowdown,
    validation,
)
from horus_operator.prediction.datasets import FeatureSource
from horus_operator.prediction.gpus import gpu_spec
from horus_operator.prediction.training.common import (
    PAIR_FOLDS,
    ROW_HOLDOUT_FRACTION,
    ROW_SEEDS,
    SEED,
    CvScore,
    catalog_name,
    fit_booster,
    mape_optimal_constant,
    metadata_entry,
    slowdown_samples,
)
from horus_operator.prediction.training.memory_fit import cross_validate_memory, memory_feasibility_data


def slowdown_matrix(samples: pd.DataFrame, source: FeatureSource) -> np.ndarray:
    """PAIR_COLUMNS rows for samples with `gpu, own_model, own_batch, other_model, other_batch`."""
    own = datasets.lookup_all(source, samples["own_model"], samples["own_batch"])
    other = datasets.lookup_all(source, samples["other_model"], samples["other_batch"])
    rows = [
        (design.job_row(a, gpu), design.job_row(b, gpu))
        for a, b, gpu in zip(own, other, samples["gpu"], strict=True)
    ]
    return design.pair_matrix(rows)


def prior_inputs(
    samples: pd.DataFrame,
    source: FeatureSource,
    constants: roofline.RooflineConstants,
    cpus: Mapping[str, float] | None = None,
) -> np.ndarray:
    """slowdown.PRIOR_INPUTS of each sample: both jobs' roofline busy fraction on its GPU (fp32: the
    pair measurements carry no precision) and host CPUs (`cpus`: catalog model -> cores,
    `common.host_cpus`; 0 for a model it does not name)."""
    cpus = cpus or {}
    own = datasets.lookup_all(source, samples["own_model"], samples["own_batch"])
    other = datasets.lookup_all(source, samples["other_model"], samples["other_batch"])
    names = neighbour_queries(samples)
    rows = []
    for a, b, (gpu, (own_name, _), (other_name, _)) in zip(own, other, names, strict=True):
        spec = gpu_spec(gpu)
        own_busy = roofline.estimate(a, spec, "fp32", constants).busy
        other_busy = roofline.estimate(b, spec, "fp32", constants).busy
        rows.append(
            slowdown.SlowdownPrior.inputs(
                (own_busy, cpus.get(own_name, 0.0)), (other_busy, cpus.get(other_name, 0.0))
            )
        )
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(slowdown.PRIOR_INPUTS))


# Search box of the prior's fitted constants (contention, cpu_contention). k at most 3/4: two saturating
# jobs at up to 1 / (1 − k) = 4×, twice time-slicing's 2×, leaving the measured tail beyond it to the
# residual trees; above about 3/4 the fixed point lets a co-runner's CPU load *lower* a job's slowdown
# (the job's longer host phases free the GPU, the co-runner's shorter kernel phases then stretch the job
# less, by more than its host work grew: at k = 0.9 a job 75 % busy beside one 50 % busy goes from 3.57×
# to 3.46× when the co-runner loads a quarter of a core), an artifact of the mean-field solution
# that contradicts the physics it stands for. A CPU core's load at most doubles a co-runner's host work.
PRIOR_BOUNDS: tuple[tuple[float, float], ...] = ((0.0, 0.75), (0.0, 1.0))
PRIOR_STARTS: tuple[tuple[float, float], ...] = ((0.5, 0.0), (0.3, 0.1), (0.7, 0.3))


def fit_prior(inputs: np.ndarray, slowdowns: np.ndarray) -> slowdown.SlowdownPrior:
    """The prior's constants by least absolute deviations of log slowdown (Nelder-Mead inside
    PRIOR_BOUNDS, from PRIOR_STARTS): the prior then predicts the median slowdown, which is what a
    relative-error score rewards, and the heavy tail of the measurements (Gavel's V100 pairs: 8× beside
    1.4× for close configurations) does not drag it the way it drags a least-squares fit."""
    from scipy.optimize import minimize  # scipy comes with xgboost

    target = slowdown.label(slowdowns)
    low, high = np.array(PRIOR_BOUNDS).T

    def law(values: np.ndarray) -> slowdown.SlowdownPrior:
        contention, cpu = np.clip(values, low, high)
        return slowdown.SlowdownPrior(contention=float(contention), cpu_contention=float(cpu))

    def loss(values: np.ndarray) -> float:
        return float(np.mean(np.abs(law(values).log_slowdown(inputs) - target)))

    fits = [minimize(loss, np.array(start), method="Nelder-Mead") for start in PRIOR_STARTS]
    return law(min(fits, key=lambda fit: fit.fun).x)


def residuals(slowdowns: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """What the trees learn: log(measured / prior), `prior` being the prior's log slowdowns."""
    return slowdown.label(slowdowns) - prior


def fit_slowdown(
    matrix: np.ndarray,
    targets: np.ndarray,
    params: dict[str, object] | None = None,
    rounds: int | None = None,
    weights: np.ndarray | None = None,
) -> xgb.Booster:
    """`matrix`: slowdown.GRAPH_COLUMNS, or slowdown.COLUMNS (with the neighbour columns); `targets`: the
    residuals on the prior (`residuals`). Defaults: slowdown.PARAMS and slowdown.ROUNDS as they are at
    call time."""
    columns = slowdown.COLUMNS if matrix.shape[1] == len(slowdown.COLUMNS) else slowdown.GRAPH_COLUMNS
    return fit_booster(
        matrix,
        targets,
        columns,
        slowdown.PARAMS if params is None else params,
        slowdown.ROUNDS if rounds is None else rounds,
        weights,
    )


Query = tuple[str, neighbours.Config, neighbours.Config]  # (gpu, own, other)


def neighbour_queries(samples: pd.DataFrame) -> list[Query]:
    """(gpu, own, other) of every sample, model names as the predictor spells them (catalog names)."""
    names = {
        name: catalog_name(name) or name for name in set(samples["own_model"]) | set(samples["other_model"])
    }
    return [
        (gpu, (names[own_model], int(own_batch)), (names[other_model], int(other_batch)))
        for gpu, own_model, own_batch, other_model, other_batch in zip(
            samples["gpu"], samples["own_model"], samples["own_batch"], samples["other_model"],
            samples["other_batch"], strict=True,
        )
    ]  # fmt: skip


def neighbour_table(
    queries: Sequence[Query], slowdowns: np.ndarray, rows: np.ndarray
) -> neighbours.NeighbourTable:
    """The measurements of `rows` (feasible samples) as a neighbour table."""
    return neighbours.NeighbourTable(
        (*queries[row][0:1], *queries[row][1], *queries[row][2], slowdowns[row]) for row in rows
    )


def with_neighbours(
    matrix: np.ndarray, queries: Sequence[Query], table: neighbours.NeighbourTable
) -> np.ndarray:
    """slowdown.COLUMNS: the design rows with the neighbour columns `table` gives each query."""
    return np.hstack([matrix, table.matrix(queries)])


def neighbour_training_set(
    matrix: np.ndarray,
    queries: Sequence[Query],
    slowdowns: np.ndarray,
    train: np.ndarray,
    targets: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows of slowdown.COLUMNS, their `targets`, weights) to fit on, from the `train` samples; the
    neighbour columns come from the measured `slowdowns`, the targets are each sample's (`residuals`).

    Every training row appears with the neighbour columns of the other training rows (its own pair left
    out: what an unmeasured pair of measured configurations sees), and once more for each of its two
    configurations as if that configuration had never been measured (neighbour columns from the rows
    that do not touch it: what a new batch size sees), weighted slowdown.UNSEEN_CONFIGURATION_WEIGHT.
    Without the second kind the trees lean on columns a new configuration never has.
    """
    parts = [
        (
            with_neighbours(
                matrix[train], [queries[row] for row in train], neighbour_table(queries, slowdowns, train)
            ),
            targets[train],
            np.ones(len(train)),
        )
    ]
    touching: dict[neighbours.Config, list[int]] = {}
    for row in train:
        for configuration in {queries[row][1], queries[row][2]}:
            touching.setdefault(configuration, []).append(int(row))
    for configuration in sorted(touching):
        touched = np.array(touching[configuration])
        unseen = neighbour_table(queries, slowdowns, train[~np.isin(train, touched)])
        parts.append(
            (
                with_neighbours(matrix[touched], [queries[row] for row in touched], unseen),
                targets[touched],
                np.full(len(touched), slowdown.UNSEEN_CONFIGURATION_WEIGHT),
            )
        )
    rows, fitted, weights = (np.concatenate(column) for column in zip(*parts, strict=True))
    return rows, fitted, weights


@dataclass(frozen=True)
class FoldResult:
    actual: np.ndarray
    predicted: np.ndarray
    constant: np.ndarray  # the MAPE-optimal constant of the training fold
    gpu: np.ndarray  # GPU type of each test row

    def only(self, gpu: str) -> FoldResult:
        keep = self.gpu == gpu
        return FoldResult(self.actual[keep], self.predicted[keep], self.constant[keep], self.gpu[keep])


def score(folds: Sequence[FoldResult]) -> CvScore:
    """MAPE over all test rows of the folds (NaN when there are none)."""
    actual = np.concatenate([fold.actual for fold in folds] or [np.empty(0)])
    if len(actual) == 0:
        return CvScore(model=float("nan"), baseline=float("nan"), samples=0)
    return CvScore(
        model=validation.mape(actual, np.concatenate([fold.predicted for fold in folds])),
        baseline=validation.mape(actual, np.concatenate([fold.constant for fold in folds])),
        samples=len(actual),
    )


def cross_validate_slowdown(
    samples: pd.DataFrame,
    matrix: np.ndarray,
    priors: np.ndarray,
    splits: Iterable[validation.Split],
    train_on_placeholders: bool = False,
    params: dict[str, object] | None = None,
    rounds: int | None = None,
    use_neighbours: bool = True,
) -> list[FoldResult]:
    """Model and constant (both fitted on each training fold) on the feasible, measured
    (non-placeholder) test rows of every split. The neighbour columns of every row come from the
    training fold's measurements only (`use_neighbours=False`: the graph-feature model alone). `priors`
    holds each sample's prior inputs (`prior_inputs`); the prior is fitted on each training fold."""
    measured = (samples["feasible"] & ~samples["placeholder"]).to_numpy()
    trainable = samples["feasible"].to_numpy() & (measured | train_on_placeholders)
    target = samples["slowdown"].to_numpy()
    queries = neighbour_queries(samples)
    folds = []
    for train, test in splits:
        train, test = train[trainable[train]], test[measured[test]]
        fitted = fit_fold(matrix, queries, target, priors, train, use_neighbours, params, rounds)
        folds.append(
            FoldResult(
                actual=target[test],
                predicted=fitted.predict(matrix, queries, priors, test),
                constant=np.full(len(test), mape_optimal_constant(target[train])),
                gpu=samples["gpu"].to_numpy()[test],
            )
        )
    return folds


@dataclass(frozen=True)
class FittedSlowdown:
    """A slowdown model fitted on some samples: the prior, the residual trees and, for trees with
    neighbour columns, the neighbour table of the training samples."""

    law: slowdown.SlowdownPrior
    booster: xgb.Booster
    table: neighbours.NeighbourTable | None

    def predict(
        self, matrix: np.ndarray, queries: Sequence[Query], priors: np.ndarray, rows: np.ndarray
    ) -> np.ndarray:
        """Slowdowns of the samples `rows` (indices into the design `matrix`, `queries`, `priors`)."""
        test_rows, prior = slowdown.tree_inputs(matrix[rows], priors[rows], self.law)
        if self.table is not None:
            test_rows = with_neighbours(test_rows, [queries[row] for row in rows], self.table)
        residual = self.booster.inplace_predict(test_rows)
        return slowdown.from_raw(slowdown.blended(residual, test_rows, prior, self.law))


def fit_fold(
    matrix: np.ndarray,
    queries: Sequence[Query],
    slowdowns: np.ndarray,
    priors: np.ndarray,
    train: np.ndarray,
    use_neighbours: bool = True,
    params: dict[str, object] | None = None,
    rounds: int | None = None,
) -> FittedSlowdown:
    """The prior fitted on the `train` samples, then the trees on its residuals, from the design
    `matrix` with the prior's inputs `priors` (and the training samples' neighbour columns unless
    `use_neighbours` is False)."""
    law = fit_prior(priors[train], slowdowns[train])
    inputs, prior = slowdown.tree_inputs(matrix, priors, law)
    targets = residuals(slowdowns, prior)
    if not use_neighbours:
        booster = fit_slowdown(inputs[train], targets[train], params, rounds)
        return FittedSlowdown(law, booster, None)
    rows, fitted, weights = neighbour_training_set(inputs, queries, slowdowns, train, targets)
    booster = fit_slowdown(rows, fitted, params, rounds, weights)
    return FittedSlowdown(law, booster, neighbour_table(queries, slowdowns, train))


def configuration_kinds(configurations: Sequence[str]) -> list[str]:
    """For each "model@batch": "interior" when the model was measured at a smaller and a larger batch
    size, "edge" when only on one side, "architecture" when at no other batch size."""
    batches: dict[str, list[int]] = {}
    for configuration in configurations:
        model, batch = configuration.rsplit("@", 1)
        batches.setdefault(model, []).append(int(batch))
    kinds = []
    for configuration in configurations:
        model, batch = configuration.rsplit("@", 1)
        others = [other for other in batches[model] if other != int(batch)]
        if not others:
            kinds.append("architecture")
        else:
            kinds.append("interior" if min(others) < int(batch) < max(others) else "edge")
    return kinds


def per_gpu(folds: Sequence[FoldResult]) -> dict[str, Any]:
    return {
        gpu: score([fold.only(gpu) for fold in folds]).as_dict()
        for gpu in sorted(set(np.concatenate([fold.gpu for fold in folds])))
    }


def evaluate_slowdown(
    samples: pd.DataFrame, matrix: np.ndarray, priors: np.ndarray, train_on_placeholders: bool = False
) -> dict[str, Any]:
    """MAPE on held-out (GPU type, pair) rows (several random splits, pooled), on held-out pairs (on
    every GPU type at once), on held-out configurations (split into a new batch size of an architecture
    seen at other batch sizes, and a new architecture), and of the graph-feature model alone on the
    held-out rows (the evidence for the neighbour columns)."""
    row_splits = [
        validation.row_holdout(samples, ROW_HOLDOUT_FRACTION, np.random.default_rng(seed))
        for seed in ROW_SEEDS
    ]
    by_row = cross_validate_slowdown(samples, matrix, priors, row_splits, train_on_placeholders)
    configurations = list(validation.configuration_folds(samples))
    by_configuration = cross_validate_slowdown(
        samples, matrix, priors, [split for _, split in configurations], train_on_placeholders
    )
    kinds = configuration_kinds([name for name, _ in configurations])

    def of_kind(*wanted: str) -> dict[str, Any]:
        return score(
            [fold for fold, kind in zip(by_configuration, kinds, strict=True) if kind in wanted]
        ).as_dict()

    pair_splits = validation.pair_folds(samples, PAIR_FOLDS, np.random.default_rng(SEED))
    by_pair = cross_validate_slowdown(samples, matrix, priors, pair_splits, train_on_placeholders)
    return {
        "by_row": score(by_row).as_dict(),
        "by_row_per_gpu": per_gpu(by_row),
        "by_row_without_neighbours": score(
            cross_validate_slowdown(
                samples, matrix, priors, row_splits, train_on_placeholders, use_neighbours=False
            )
        ).as_dict(),
        "by_pair": score(by_pair).as_dict(),
        "by_pair_per_gpu": per_gpu(by_pair),
        "by_configuration": score(by_configuration).as_dict(),
        "by_configuration_per_gpu": per_gpu(by_configuration),
        "by_configuration_new_batch_size": of_kind("interior", "edge"),
        "by_configuration_new_batch_size_between_measured": of_kind("interior"),
        "by_configuration_new_architecture": of_kind("architecture"),
    }


def train_slowdown(
    data: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    train_on_placeholders: bool = True,
    log: Callable[[str], None] = print,
    cpus: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Cross-validate, then fit on all rows; writes slowdown.json, slowdown_prior.json and memory.json
    into `out_dir`. The prior reads busy fractions from `out_dir`'s roofline constants (else the
    shipped ones): calibrate those first. `cpus`: catalog model -> CPU cores its measured jobs kept
    busy beside the training loop (`common.host_cpus`), for the prior's host term.

    The exact-1.000 rows stay in training by default: by-pair CV on the measured rows is no worse with
    them (docs/prediction.md); they are never scored.
    """
    samples = slowdown_samples(data)
    matrix = slowdown_matrix(samples, source)
    priors = prior_inputs(samples, source, artifacts.load_roofline(out_dir), cpus)
    log(f"slowdown: {len(samples)} samples ({int(samples['feasible'].sum())} feasible), cross-validating")
    metrics = evaluate_slowdown(samples, matrix, priors, train_on_placeholders)
    usable = np.flatnonzero(
        (samples["feasible"] & (train_on_placeholders | ~samples["placeholder"])).to_numpy()
    )
    slowdowns = samples["slowdown"].to_numpy()
    queries = neighbour_queries(samples)
    # The predictor rebuilds this table from the file, exactly (tests/unit/prediction/test_neighbours.py).
    table = neighbour_table(queries, slowdowns, usable)
    table_path = artifacts.save_neighbours(out_dir, table)
    fitted = fit_fold(matrix, queries, slowdowns, priors, usable)
    entry = metadata_entry(data, list(slowdown.COLUMNS), metrics, samples=len(usable))
    entry["train_on_placeholders"] = train_on_placeholders
    entry["neighbours_file"] = table_path.name
    entry["neighbours_sha256"] = datasets.sha256_of(table_path)
    entry["neighbours_measurements"] = len(table)
    artifacts.save_booster(out_dir, "slowdown", fitted.booster, entry)
    artifacts.save_prior(
        out_dir, fitted.law, metadata_entry(data, list(slowdown.PRIOR_INPUTS), {}, len(usable))
    )
    log("slowdown: calibrating the memory model on the pairs' feasibility")
    memory_model = memory.calibrate(memory_feasibility_data(samples, source))
    memory_metrics = cross_validate_memory(samples, source)
    artifacts.save_memory(
        out_dir,
        memory_model,
        metadata_entry(
            data, ["param_bytes", "activation_bytes_per_batch"], memory_metrics, samples=len(samples) // 2
        ),
    )
    return {"slowdown": metrics, "memory": memory_metrics, "memory_model": memory_model.to_dict()}
