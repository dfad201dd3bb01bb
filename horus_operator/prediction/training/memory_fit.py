"""The memory model: an envelope over measured peaks, a floor under them, feasibility of Gavel's pairs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from horus_operator.prediction import (
    artifacts,
    datasets,
    memory,
    roofline,
    validation,
)
from horus_operator.prediction.datasets import FeatureSource
from horus_operator.prediction.gpus import GPU_SPECS, normalize_gpu
from horus_operator.prediction.training.common import (
    PAIR_FOLDS,
    SEED,
    catalog_name,
    metadata_entry,
    slowdown_samples,
)
from horus_operator.prediction.training.families import family


def memory_feasibility_data(samples: pd.DataFrame, source: FeatureSource) -> memory.FeasibilityData:
    """Every measured pair (first ordering only) and every job alone (each ran alone in Gavel)."""
    first = samples.drop_duplicates("row", keep="first")
    own = datasets.lookup_all(source, first["own_model"], first["own_batch"])
    other = datasets.lookup_all(source, first["other_model"], first["other_batch"])
    alone = first.drop_duplicates(["gpu", "own_model", "own_batch"])
    alone_jobs = datasets.lookup_all(source, alone["own_model"], alone["own_batch"])

    def column(jobs: list[Mapping[str, Any]], name: str) -> np.ndarray:
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
            "family": names.map(lambda name: family(name) if name else None),
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
    entry = metadata_entry(
        peaks_csv, ["param_bytes", "activation_bytes_per_batch", "precision"], metrics, len(samples)
    )
    artifacts.save_memory(out_dir, model, entry)
    return {"memory": metrics, "memory_model": model.to_dict()}
