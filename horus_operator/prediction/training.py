"""Training pipelines: measurement CSV -> cross-validated metrics -> model files with metadata.

`horus train` and `hack/train_models.py` (which regenerates the shipped models) both call
`train_slowdown`; the roofline constants behind utilization come from measured step times
(`train_step_times`, the shipped models) or measured utilizations (`train_utilization`, `horus train`).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xgboost as xgb

from horus_operator.prediction import (
    artifacts,
    catalog,
    datasets,
    design,
    memory,
    neighbours,
    roofline,
    slowdown,
    validation,
)
from horus_operator.prediction.api import UnknownModelError
from horus_operator.prediction.datasets import FeatureSource
from horus_operator.prediction.gpus import GPU_SPECS, GpuSpec, gpu_spec, normalize_gpu

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


# ---- slowdown ----


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
    samples: pd.DataFrame, source: FeatureSource, constants: roofline.RooflineConstants
) -> np.ndarray:
    """slowdown.SlowdownPrior inputs of each sample, from the roofline step times on its GPU (fp32: the
    pair measurements carry no precision)."""
    own = datasets.lookup_all(source, samples["own_model"], samples["own_batch"])
    other = datasets.lookup_all(source, samples["other_model"], samples["other_batch"])
    rows = []
    for a, b, gpu in zip(own, other, samples["gpu"], strict=True):
        spec = gpu_spec(gpu)
        own_ms = roofline.estimate(a, spec, "fp32", constants).step_ms
        other_ms = roofline.estimate(b, spec, "fp32", constants).step_ms
        rows.append(slowdown.SlowdownPrior.inputs(own_ms, other_ms, spec.fp32_tflops))
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2)


def fit_prior(inputs: np.ndarray, slowdowns: np.ndarray) -> slowdown.SlowdownPrior:
    """Least squares of log slowdown on the prior's two inputs."""
    design_matrix = np.column_stack([np.ones(len(inputs)), inputs])
    intercept, step_ratio, gpu_speed = np.linalg.lstsq(design_matrix, slowdown.label(slowdowns), rcond=None)[
        0
    ]
    return slowdown.SlowdownPrior(float(intercept), float(step_ratio), float(gpu_speed))


def fit_slowdown(
    matrix: np.ndarray,
    slowdowns: np.ndarray,
    params: dict[str, object] | None = None,
    rounds: int | None = None,
    weights: np.ndarray | None = None,
) -> xgb.Booster:
    """`matrix`: design.PAIR_COLUMNS, or slowdown.COLUMNS (with the neighbour columns).
    Defaults: slowdown.PARAMS and slowdown.ROUNDS as they are at call time."""
    columns = slowdown.COLUMNS if matrix.shape[1] == len(slowdown.COLUMNS) else design.PAIR_COLUMNS
    return fit_booster(
        matrix,
        slowdown.label(slowdowns),
        columns,
        slowdown.PARAMS if params is None else params,
        slowdown.ROUNDS if rounds is None else rounds,
        weights,
    )


def slowdown_samples(pairs_csv: str | Path) -> pd.DataFrame:
    return datasets.pair_samples(datasets.read_csv(pairs_csv, datasets.PAIR_CSV_COLUMNS))


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
    matrix: np.ndarray, queries: Sequence[Query], slowdowns: np.ndarray, train: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows of slowdown.COLUMNS, slowdowns, weights) to fit on, from the `train` samples.

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
            slowdowns[train],
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
                slowdowns[touched],
                np.full(len(touched), slowdown.UNSEEN_CONFIGURATION_WEIGHT),
            )
        )
    rows, targets, weights = (np.concatenate(column) for column in zip(*parts, strict=True))
    return rows, targets, weights


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
        if use_neighbours:
            rows, slowdowns, weights = neighbour_training_set(matrix, queries, target, train)
            booster = fit_slowdown(rows, slowdowns, params, rounds, weights)
            table = neighbour_table(queries, target, train)
            test_rows = with_neighbours(matrix[test], [queries[row] for row in test], table)
        else:
            booster = fit_slowdown(matrix[train], target[train], params, rounds)
            test_rows = matrix[test]
        raw = booster.inplace_predict(test_rows)
        prior = fit_prior(priors[train], target[train]).log_slowdown(priors[test])
        folds.append(
            FoldResult(
                actual=target[test],
                predicted=slowdown.from_raw(slowdown.blended(raw, test_rows, prior)),
                constant=np.full(len(test), mape_optimal_constant(target[train])),
                gpu=samples["gpu"].to_numpy()[test],
            )
        )
    return folds


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


def memory_feasibility_data(samples: pd.DataFrame, source: FeatureSource) -> memory.FeasibilityData:
    """Every measured pair (first ordering only) and every job alone (each ran alone in Gavel)."""
    first = samples.drop_duplicates("row", keep="first")
    own = datasets.lookup_all(source, first["own_model"], first["own_batch"])
    other = datasets.lookup_all(source, first["other_model"], first["other_batch"])
    alone = first.drop_duplicates(["gpu", "own_model", "own_batch"])
    alone_jobs = datasets.lookup_all(source, alone["own_model"], alone["own_batch"])

    def column(jobs: list, name: str) -> np.ndarray:
        return np.array([job[name] for job in jobs], dtype=np.float64)

    def stacked(name: str) -> np.ndarray:
        pairs = np.stack([column(own, name), column(other, name)], axis=1)
        singles = np.stack([column(alone_jobs, name), np.zeros(len(alone_jobs))], axis=1)
        return np.concatenate([pairs, singles])

    capacity = pd.concat([first["gpu"], alone["gpu"]]).map(lambda gpu: GPU_SPECS[gpu].memory_mib).to_numpy()
    return memory.FeasibilityData(
        param_bytes=stacked("param_bytes"),
        activation_bytes=stacked("activation_bytes_per_batch"),
        jobs=np.concatenate([np.full(len(first), 2), np.ones(len(alone_jobs))]),
        capacity_mib=capacity.astype(np.float64),
        feasible=np.concatenate([first["feasible"].to_numpy(), np.ones(len(alone_jobs), dtype=bool)]),
    )


def cross_validate_memory(samples: pd.DataFrame, source: FeatureSource) -> dict[str, float]:
    """Balanced accuracy of the calibrated memory rule on held-out pairs (pair folds) vs. 'always fits'."""
    first = samples.drop_duplicates("row", keep="first").reset_index(drop=True)
    scores = []
    for train, test in validation.pair_folds(first, PAIR_FOLDS, np.random.default_rng(SEED)):
        model = memory.calibrate(memory_feasibility_data(first.iloc[train], source))
        held_out = memory_feasibility_data(first.iloc[test], source)
        pairs_only = held_out.jobs == 2
        predicted = memory.predicted_feasible(model, held_out)[pairs_only]
        scores.append(memory.balanced_accuracy(predicted, held_out.feasible[pairs_only]))
    return {"balanced_accuracy": round(float(np.mean(scores)), 4), "baseline_balanced_accuracy": 0.5}


# ---- memory: an envelope over measured peaks ----

# milabench's scaling observations (data/memory/): one training process alone on its GPU per row.
PEAK_CSV_COLUMNS: tuple[str, ...] = (
    "gpu",
    "bench",
    "model_arg",
    "precision_arg",
    "plan_method",
    "batch_size",
    "memory_mib",
)
# milabench's precision arguments; tf32 keeps FP32 storage, tf32-fp16 is fp16 autocast.
_PEAK_PRECISIONS = {
    "fp32": "fp32",
    "tf32": "fp32",
    "fp16": "amp",
    "tf32-fp16": "amp",
    "bfloat16": "bf16",
    "bf16-mixed": "bf16",
}
# Benchmarks whose peak is set by a pass at another precision than their argument: milabench's
# synthetic loader (benchmate/dataloader.py, generate_tensor_classification) runs the model forward
# once in FP32 with autograd on, at the full batch of 3x244x244 images, before training under
# fp16 autocast; the allocator keeps that peak (about twice the `resnet50` runs' at equal batch).
_PEAK_SET_AT = {"resnet50-noio": "fp32"}
MIN_OVERHEAD_MIB = 256.0  # a CUDA context alone takes more
MIN_ACTIVATION_FACTOR = 1.0  # at least the graph's activations: a lower floor under-covers held-out BERT


def peak_samples(path: str | Path, canonical: Callable[[str], str | None]) -> pd.DataFrame:
    """`gpu, model, batch, precision, measured_mib` of the single-process rows naming a catalog model;
    `attrs["dropped"]` lists the benchmarks' models the catalog lacks."""
    table = datasets.read_csv(path, PEAK_CSV_COLUMNS)
    table = table[table["plan_method"] == "per_gpu"]
    names = table["model_arg"].fillna("").astype(str).map(lambda name: canonical(name) if name else None)
    samples = pd.DataFrame(
        {
            "gpu": table["gpu"].map(normalize_gpu),
            "model": names,
            "batch": table["batch_size"].astype(int),
            "precision": table["bench"]
            .map(_PEAK_SET_AT)
            .fillna(table["precision_arg"].fillna("fp32").map(_PEAK_PRECISIONS)),
            "measured_mib": table["memory_mib"].astype(float),
            "family": names.map(lambda name: FAMILIES.get(name or "", name)),
        }
    )
    known = samples["model"].notna() & samples["precision"].notna()
    kept = samples[known].reset_index(drop=True)
    kept.attrs["dropped"] = sorted(set(table["model_arg"].fillna("(none)").astype(str)[~known.to_numpy()]))
    return kept


def _memory_terms(
    param_bytes: np.ndarray, activation_bytes: np.ndarray, precisions: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(fixed MiB from the weights, MiB per unit of activation factor) of each job."""
    weights = np.array([memory.weight_factor(memory.PARAM_FACTOR, p) for p in precisions]) * param_bytes
    scaled = activation_bytes * np.array([roofline.bytes_scale(p) for p in precisions])
    return weights / memory.MIB, scaled / memory.MIB


def peak_terms(samples: pd.DataFrame, source: FeatureSource) -> tuple[np.ndarray, np.ndarray]:
    jobs = datasets.lookup_all(source, samples["model"], samples["batch"])
    return _memory_terms(
        np.array([job["param_bytes"] for job in jobs]),
        np.array([job["activation_bytes_per_batch"] for job in jobs]),
        samples["precision"].tolist(),
    )


def fit_memory_envelope(
    peaks: tuple[np.ndarray, np.ndarray, np.ndarray], singles: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> memory.MemoryModel:
    """The (overhead, activation factor) minimising the summed prediction over the measured peaks
    subject to: no peak under-predicted, every single job (weights MiB, activation MiB, capacity) fits,
    overhead ≥ MIN_OVERHEAD_MIB and activation factor ≥ 1 (activations are kept for backward). A
    linear programme; if the singles cannot all fit under the peaks' envelope, the peaks win (a
    measured peak is a fact, a feasibility outcome an inference) and ValueError is not raised."""
    from scipy.optimize import linprog  # scipy comes with xgboost

    weights, activations, measured = peaks
    s_weights, s_activations, capacity = singles
    objective = [len(measured), float(activations.sum())]
    covers = (np.column_stack([-np.ones(len(measured)), -activations]), -(measured - weights))
    fit_alone = (np.column_stack([np.ones(len(capacity)), s_activations]), capacity - s_weights)
    bounds = [(MIN_OVERHEAD_MIB, None), (MIN_ACTIVATION_FACTOR, None)]
    result = linprog(objective, A_ub=np.vstack([covers[0], fit_alone[0]]),
                     b_ub=np.concatenate([covers[1], fit_alone[1]]), bounds=bounds)  # fmt: skip
    if result.status != 0:
        result = linprog(objective, A_ub=covers[0], b_ub=covers[1], bounds=bounds)
    overhead, factor = result.x
    return memory.MemoryModel(overhead_mib=float(overhead), activation_factor=float(factor))


def fit_memory_floor(
    param_mib: np.ndarray, activations: np.ndarray, measured: np.ndarray, model: memory.MemoryModel
) -> memory.MemoryModel:
    """`model` with its floor: the (overhead, activation factor) maximising the summed prediction
    with memory.FLOOR_PARAM_FACTOR × parameters, subject to no measured peak being over-predicted
    (both non-negative). A linear programme, the envelope's mirror image."""
    from scipy.optimize import linprog  # scipy comes with xgboost

    fixed = memory.FLOOR_PARAM_FACTOR * param_mib
    result = linprog(
        [-len(measured), -float(activations.sum())],
        A_ub=np.column_stack([np.ones(len(measured)), activations]),
        b_ub=measured - fixed,
        bounds=[(0.0, None), (0.0, None)],
    )
    overhead, factor = result.x if result.status == 0 else (0.0, 0.0)
    return dataclasses.replace(
        model, floor_overhead_mib=float(overhead), floor_activation_factor=float(factor)
    )


def memory_scores(
    model: memory.MemoryModel, terms: tuple[np.ndarray, np.ndarray], measured: np.ndarray
) -> dict[str, float]:
    predicted = model.overhead_mib + terms[0] + model.activation_factor * terms[1]
    ratio = predicted / measured
    return {
        "share_under_10pct": round(float(np.mean(ratio < 0.9)), 4),
        "share_under": round(float(np.mean(ratio < 1.0)), 4),
        "median_predicted_over_measured": round(float(np.median(ratio)), 3),
        "samples": len(measured),
    }


def gavel_singles(pairs_csv: str | Path, source: FeatureSource) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = memory_feasibility_data(slowdown_samples(pairs_csv), source)
    alone = data.jobs == 1
    weights, activations = _memory_terms(
        data.param_bytes[alone, 0], data.activation_bytes[alone, 0], ["fp32"] * int(alone.sum())
    )
    return weights, activations, data.capacity_mib[alone]


def train_memory(
    peaks_csv: str | Path,
    pairs_csv: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Calibrate the memory model as an envelope over measured peaks (see `fit_memory_envelope`),
    reporting held-out GPUs and architecture families; writes memory.json."""
    samples = peak_samples(peaks_csv, catalog_name)
    log(f"memory: {len(samples)} measured peaks of {samples['model'].nunique()} catalog models; "
        f"not in the catalog: {', '.join(samples.attrs['dropped'])}")  # fmt: skip
    weights, activations = peak_terms(samples, source)
    measured = samples["measured_mib"].to_numpy()
    singles = gavel_singles(pairs_csv, source)
    metrics: dict[str, Any] = {}
    for split in ("gpu", "family"):
        held_out = {}
        for group in sorted(set(samples[split])):
            test = (samples[split] == group).to_numpy()
            model = fit_memory_envelope((weights[~test], activations[~test], measured[~test]), singles)
            held_out[group] = memory_scores(model, (weights[test], activations[test]), measured[test])
        metrics[f"leave_one_{split}_out"] = held_out
    model = fit_memory_envelope((weights, activations, measured), singles)
    metrics["in_sample"] = memory_scores(model, (weights, activations), measured)
    param_mib = np.array(
        [job["param_bytes"] for job in datasets.lookup_all(source, samples["model"], samples["batch"])]
    )
    model = fit_memory_floor(param_mib / memory.MIB, activations, measured, model)
    feasibility = memory_feasibility_data(slowdown_samples(pairs_csv), source)
    pairs = feasibility.jobs == 2
    predicted = memory.predicted_feasible(model, feasibility)
    metrics["gavel_singles_fit"] = round(float(predicted[~pairs].mean()), 4)
    metrics["gavel_pairs_balanced_accuracy"] = round(
        memory.balanced_accuracy(predicted[pairs], feasibility.feasible[pairs]), 4
    )
    entry = _entry(
        peaks_csv, ["param_bytes", "activation_bytes_per_batch", "precision"], metrics, len(samples)
    )
    artifacts.save_memory(out_dir, model, entry)
    return {"memory": metrics, "memory_model": model.to_dict()}


def train_slowdown(
    data: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    train_on_placeholders: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Cross-validate, then fit on all rows; writes slowdown.json, slowdown_prior.json and memory.json
    into `out_dir`. The prior reads step times from `out_dir`'s roofline constants (else the shipped
    ones): calibrate those first.

    The exact-1.000 rows stay in training by default: by-pair CV on the measured rows is no worse with
    them (docs/prediction.md); they are never scored.
    """
    samples = slowdown_samples(data)
    matrix = slowdown_matrix(samples, source)
    priors = prior_inputs(samples, source, artifacts.load_roofline(out_dir))
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
    rows, targets, weights = neighbour_training_set(matrix, queries, slowdowns, usable)
    booster = fit_slowdown(rows, targets, weights=weights)
    entry = _entry(data, list(slowdown.COLUMNS), metrics, samples=len(usable))
    entry["train_on_placeholders"] = train_on_placeholders
    entry["neighbours_file"] = table_path.name
    entry["neighbours_sha256"] = datasets.sha256_of(table_path)
    entry["neighbours_measurements"] = len(table)
    artifacts.save_booster(out_dir, "slowdown", booster, entry)
    prior = fit_prior(priors[usable], slowdowns[usable])
    artifacts.save_prior(out_dir, prior, _entry(data, ["log_step_ratio", "log_fp32_tflops"], {}, len(usable)))
    log("slowdown: calibrating the memory model on the pairs' feasibility")
    memory_model = memory.calibrate(memory_feasibility_data(samples, source))
    memory_metrics = cross_validate_memory(samples, source)
    artifacts.save_memory(
        out_dir,
        memory_model,
        _entry(
            data, ["param_bytes", "activation_bytes_per_batch"], memory_metrics, samples=len(samples) // 2
        ),
    )
    return {"slowdown": metrics, "memory": memory_metrics, "memory_model": memory_model.to_dict()}


# ---- utilization: the roofline constants ----

# Gavel's single-job throughputs (steps/s), the step times the roofline constants are calibrated on.
STEP_TIME_CSV_COLUMNS: tuple[str, ...] = ("gpu", "model", "batch", "tput_alone")
# Architecture families: held out together, so a family's other sizes never leak into its test.
FAMILIES: dict[str, str] = {
    "resnet18": "resnet",
    "resnet34": "resnet",
    "resnet50": "resnet",
    "resnet101": "resnet",
    "resnet152": "resnet",
    "resnext50_32x4d": "resnet",
    "resnext101_32x8d": "resnet",
    "resnext101_64x4d": "resnet",
    "wide_resnet50_2": "resnet",
    "wide_resnet101_2": "resnet",
    **{
        name: "vgg"
        for name in ("vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn")
    },
    **{name: "densenet" for name in ("densenet121", "densenet161", "densenet169", "densenet201")},
    **{
        name: "regnet"
        for name in (
            "regnet_x_400mf",
            "regnet_x_800mf",
            "regnet_x_1_6gf",
            "regnet_x_3_2gf",
            "regnet_y_400mf",
            "regnet_y_800mf",
            "regnet_y_1_6gf",
            "regnet_y_3_2gf",
            "regnet_y_128gf",
        )
    },
    **{
        name: "mobile"
        for name in (
            "mobilenet_v2",
            "mobilenet_v3_large",
            "mobilenet_v3_small",
            "mnasnet0_75",
            "mnasnet1_0",
            "efficientnet_b0",
        )
    },
    **{name: "vit" for name in ("vit_b_16", "vit_b_32", "vit_l_16")},
    **{name: "swin" for name in ("swin_t", "swin_s")},
    **{name: "convnext" for name in ("convnext_tiny", "convnext_small", "convnext_large")},
    "inception_v3-imagenet": "inception",
    "transformer": "transformer",
    "lstm-lm": "lstm",
    "recommendation": "recommendation",
    "a3c": "a3c",
    "cyclegan": "cyclegan",
}


@dataclass(frozen=True)
class JobSamples:
    """Measured single jobs: features at their batch size, the GPU's datasheet row, and a measurement."""

    jobs: list[dict[str, float]]
    specs: list[GpuSpec]
    precisions: list[str]
    measured: np.ndarray  # step time in ms, or utilization 0..1
    gpus: np.ndarray
    models: np.ndarray


def job_samples(samples: pd.DataFrame, source: FeatureSource, measured: np.ndarray) -> JobSamples:
    return JobSamples(
        jobs=[dict(job) for job in datasets.lookup_all(source, samples["model"], samples["batch"])],
        specs=[gpu_spec(gpu) for gpu in samples["gpu"]],
        precisions=list(samples["precision"]) if "precision" in samples else ["fp32"] * len(samples),
        measured=np.asarray(measured, dtype=np.float64),
        gpus=samples["gpu"].to_numpy(),
        models=samples["model"].to_numpy(),
    )


def step_times(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> np.ndarray:
    return np.array([_estimate(data, i, constants).step_ms for i in keep])


def busy_fractions(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> np.ndarray:
    return np.array([_estimate(data, i, constants).busy for i in keep])


def _estimate(data: JobSamples, index: int, constants: roofline.RooflineConstants) -> roofline.StepEstimate:
    return roofline.estimate(data.jobs[index], data.specs[index], data.precisions[index], constants)


def step_time_error(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> float:
    """Mean absolute log error of the predicted step times (robust to the few host-bound jobs whose
    time goes to work outside the graph, such as A3C's game emulator)."""
    return float(np.mean(np.abs(np.log(step_times(data, constants, keep)) - np.log(data.measured[keep]))))


def utilization_error(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> float:
    """RMSLE on utilization in percent, as the Horus papers report it."""
    return validation.rmsle(100.0 * data.measured[keep], 100.0 * busy_fractions(data, constants, keep))


ROOFLINE_PRIOR_PULL = 0.01  # per squared log-unit from the defaults; the losses are ~0.5 log-units
CALIBRATION_RESTARTS = 5


def calibrate_roofline(
    loss: Callable[[roofline.RooflineConstants], float],
    start: roofline.RooflineConstants | None = None,
) -> roofline.RooflineConstants:
    """The constants minimising `loss`, searched in log space from `start` (Nelder-Mead, restarted:
    few parameters, a loss with kinks where a job turns host-bound). A weak pull towards the defaults
    (ROOFLINE_PRIOR_PULL) keeps a constant the data cannot see where physics puts it: without AMP
    measurements the tensor-path efficiency, without memory-bound jobs the bandwidth efficiency,
    would otherwise drift to a bound."""
    from scipy.optimize import minimize  # scipy comes with xgboost

    defaults = np.log(list(roofline.RooflineConstants().to_dict().values()))

    def penalised(x: np.ndarray) -> float:
        return loss(roofline.RooflineConstants(*np.exp(x))) + ROOFLINE_PRIOR_PULL * float(
            np.mean((x - defaults) ** 2)
        )

    # Nelder-Mead stalls on kinked losses: restart it from its own optimum until it stops improving.
    best = np.log(list(start.to_dict().values())) if start else defaults
    best_value = penalised(best)
    for _ in range(CALIBRATION_RESTARTS):
        result = minimize(
            penalised,
            best,
            method="Nelder-Mead",
            bounds=[(np.log(low), np.log(high)) for low, high in roofline.CONSTANT_BOUNDS],
            options={"maxiter": 4000, "xatol": 1e-4, "fatol": 1e-9, "adaptive": True},
        )
        improved = best_value - result.fun > 1e-7
        if result.fun < best_value:
            best, best_value = result.x, float(result.fun)
        if not improved:
            break
    return roofline.RooflineConstants(*(float(value) for value in np.exp(best)))


def held_out_step_times(data: JobSamples, groups: np.ndarray) -> dict[str, Any]:
    """Step-time error on each group (a GPU type or an architecture family) with the constants
    calibrated on the others, beside the error of one constant step time (the training median)."""
    result: dict[str, Any] = {}
    everything = np.arange(len(data.measured))
    for group in sorted(set(groups)):
        train, test = everything[groups != group], everything[groups == group]
        constants = calibrate_roofline(lambda c, train=train: step_time_error(data, c, train))
        median = np.median(data.measured[train])
        result[group] = {
            "log_error": round(step_time_error(data, constants, test), 4),
            "baseline_log_error": round(float(np.mean(np.abs(np.log(median / data.measured[test])))), 4),
            "samples": len(test),
        }
    return result


# timm's model names for the catalog's torchvision models where they differ (same architecture).
TIMM_NAMES: dict[str, str] = {
    "vit_base_patch16_224": "vit_b_16",
    "vit_base_patch32_224": "vit_b_32",
    "vit_large_patch16_224": "vit_l_16",
    "mobilenetv3_large_100": "mobilenet_v3_large",
    "mobilenetv3_small_100": "mobilenet_v3_small",
    "mobilenetv2_100": "mobilenet_v2",
    "swin_tiny_patch4_window7_224": "swin_t",
    "swin_small_patch4_window7_224": "swin_s",
    "mnasnet_075": "mnasnet0_75",
    "mnasnet_100": "mnasnet1_0",
    "inception_v3": "inception_v3-imagenet",
    **{f"regnet{kind}_{size}": f"regnet_{kind}_{name}"
       for kind in ("x", "y")
       for size, name in (("004", "400mf"), ("008", "800mf"), ("016", "1_6gf"), ("032", "3_2gf"))},
}  # fmt: skip
TIMM_CSV_COLUMNS: tuple[str, ...] = (
    "layout",
    "model",
    "train_step_time",
    "train_batch_size",
    "train_img_size",
)


def timm_step_times(path: str | Path, source: FeatureSource) -> pd.DataFrame:
    """`gpu, model, batch, precision, step_ms` of timm's RTX 3090 AMP training benchmark for the
    catalog models among it: NCHW rows (the catalog's layout) at the catalog entry's image size."""
    table = datasets.read_csv(path, TIMM_CSV_COLUMNS)
    rows = []
    for layout, model, step_ms, batch, image in table[list(TIMM_CSV_COLUMNS)].itertuples(index=False):
        name = catalog_name(TIMM_NAMES.get(model, model))
        if layout != "nchw" or name is None:
            continue
        side = math.sqrt(source(name, 1)["input_bytes_per_sample"] / (3 * 4))  # 3 FP32 channels
        if round(side) == int(image):
            rows.append(("rtx-3090", name, int(batch), "amp", float(step_ms)))
    return pd.DataFrame(rows, columns=["gpu", "model", "batch", "precision", "step_ms"])


def train_step_times(
    data: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    timm: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Calibrate the roofline constants on measured single-job step times (Gavel's `tput_alone`, FP32,
    and, given `timm`, timm's RTX 3090 AMP benchmark); writes roofline.json. Reports the error on
    each GPU type and each architecture family held out."""
    table = datasets.read_csv(data, STEP_TIME_CSV_COLUMNS)
    table["gpu"] = table["gpu"].map(normalize_gpu)
    table["precision"] = "fp32"
    table["step_ms"] = 1000.0 / table["tput_alone"]
    if timm is not None:
        table = pd.concat([table, timm_step_times(timm, source)], ignore_index=True)
    samples = job_samples(table, source, table["step_ms"].to_numpy())
    log(f"utilization: calibrating the step-time model on {len(table)} measured step times")
    everything = np.arange(len(samples.measured))
    constants = calibrate_roofline(lambda c: step_time_error(samples, c, everything))
    metrics = {
        "log_error": round(step_time_error(samples, constants, everything), 4),
        "leave_one_gpu_out": held_out_step_times(samples, samples.gpus),
        "leave_one_family_out": held_out_step_times(
            samples, np.array([FAMILIES.get(model, model) for model in samples.models])
        ),
    }
    entry = _entry(data, list(STEP_TIME_CSV_COLUMNS), metrics, samples=len(table))
    if timm is not None:
        entry["timm_file"], entry["timm_sha256"] = Path(timm).name, datasets.sha256_of(timm)
    artifacts.save_roofline(out_dir, constants, entry)
    return {"utilization": metrics, "roofline": constants.to_dict()}


def train_utilization(
    data: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    canonical: Callable[[str], str | None],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Calibrate the roofline constants on measured utilizations (alnair's columns); writes
    roofline.json. Cross-validated leaving one model out, beside the training mean as a constant."""
    table = datasets.read_csv(data, datasets.UTILIZATION_CSV_COLUMNS)
    samples = datasets.utilization_samples(table, canonical)
    if samples.attrs["dropped"]:
        log(f"utilization: no graph features for {', '.join(samples.attrs['dropped'])}: rows dropped")
    data_set = job_samples(samples, source, samples["utilization"].to_numpy())
    actual, predicted, constant = [], [], []
    for train, test in validation.group_folds(
        samples["model"].tolist(), samples["model"].nunique(), np.random.default_rng(SEED)
    ):
        constants = calibrate_roofline(lambda c, train=train: utilization_error(data_set, c, train))
        actual.append(data_set.measured[test])
        predicted.append(busy_fractions(data_set, constants, test))
        mean_percent = np.expm1(np.mean(np.log1p(100.0 * data_set.measured[train])))
        constant.append(np.full(len(test), mean_percent / 100.0))
    percent = [100.0 * np.concatenate(values) for values in (actual, predicted, constant)]
    metrics = {
        "rmsle": round(validation.rmsle(percent[0], percent[1]), 4),
        "baseline_rmsle": round(validation.rmsle(percent[0], percent[2]), 4),
        "samples": len(percent[0]),
        "models": int(samples["model"].nunique()),
    }
    everything = np.arange(len(data_set.measured))
    constants = calibrate_roofline(lambda c: utilization_error(data_set, c, everything))
    entry = _entry(data, list(datasets.UTILIZATION_CSV_COLUMNS), metrics, samples=len(samples))
    entry["dropped_models"] = samples.attrs["dropped"]
    artifacts.save_roofline(out_dir, constants, entry)
    return {"utilization": metrics, "roofline": constants.to_dict()}


def _entry(data: str | Path, columns: list[str], metrics: dict[str, Any], samples: int) -> dict[str, Any]:
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
