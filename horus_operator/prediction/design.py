"""Design matrices: the model inputs built from graph features and the GPU type.

Training and prediction build their rows with these same functions, so the models always see the
columns they were trained on. No model identity enters a row: only graph features, batch size and the
GPU's datasheet figures, so predictions carry over to models and configurations never measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from horus_operator.api.defaults import DEFAULT_PRECISION
from horus_operator.prediction import features
from horus_operator.prediction.gpus import GPU_SPECS

TRAINING_FLOPS_FACTOR = 3.0  # forward + backward ≈ 3 × forward FLOPs
_EPS = 1.0

# Job columns derived from the graph features and the GPU, beside the raw FEATURE_NAMES.
_DERIVED_JOB_NAMES: tuple[str, ...] = (
    "gpu_peak_tflops",
    "gpu_bandwidth_gbs",
    "gpu_memory_mib",
    "compute_ms",  # training FLOPs of one step at peak FP32 rate
    "traffic_ms",  # parameters (read, gradient, update) and activations (write, read) at peak bandwidth
    "log_flops_per_batch",
    "log_activation_bytes_per_batch",
    "log_param_bytes",
    "conv_share",
    "linear_share",
    "attention_share",
    "arithmetic_intensity",  # FLOPs per byte of activations and parameters
)
JOB_COLUMNS: tuple[str, ...] = features.FEATURE_NAMES + _DERIVED_JOB_NAMES

# Quantities compared between a job and its co-runner (log ratios and log sums).
_COMPARED = ("compute_ms", "traffic_ms", "flops_per_batch", "activation_bytes_per_batch", "param_bytes")
PAIR_COLUMNS: tuple[str, ...] = (
    tuple(f"self_{name}" for name in JOB_COLUMNS)
    + tuple(f"other_{name}" for name in JOB_COLUMNS)
    + tuple(f"log_ratio_{name}" for name in _COMPARED)
    + tuple(f"log_sum_{name}" for name in _COMPARED)
)


def job_row(
    job_features: Mapping[str, float], gpu: str, precision: str = DEFAULT_PRECISION
) -> dict[str, float]:
    """One job's columns (JOB_COLUMNS) on a GPU from GPU_SPECS; `precision` sets the compute peak."""
    spec = GPU_SPECS[gpu]
    row = {name: float(job_features.get(name, 0.0)) for name in features.FEATURE_NAMES}
    flops = row["flops_per_sample"]
    step_flops = TRAINING_FLOPS_FACTOR * row["flops_per_batch"]
    step_bytes = 3.0 * row["param_bytes"] + 2.0 * row["activation_bytes_per_batch"]
    row.update(
        gpu_peak_tflops=spec.fp32_tflops,
        gpu_bandwidth_gbs=spec.memory_bandwidth_gbs,
        gpu_memory_mib=float(spec.memory_mib),
        compute_ms=step_flops / (spec.peak_tflops(precision) * 1e9),
        traffic_ms=step_bytes / (spec.memory_bandwidth_gbs * 1e6),
        log_flops_per_batch=math.log10(row["flops_per_batch"] + _EPS),
        log_activation_bytes_per_batch=math.log10(row["activation_bytes_per_batch"] + _EPS),
        log_param_bytes=math.log10(row["param_bytes"] + _EPS),
        conv_share=row["conv_flops_per_sample"] / flops if flops else 0.0,
        linear_share=row["linear_flops_per_sample"] / flops if flops else 0.0,
        attention_share=row["attention_flops_per_sample"] / flops if flops else 0.0,
        arithmetic_intensity=step_flops / (step_bytes + _EPS),
    )
    return row


def pair_row(own: Mapping[str, float], other: Mapping[str, float]) -> list[float]:
    """PAIR_COLUMNS for a job (`own`, a job_row) sharing a GPU with `other` (a job_row)."""
    values = [own[name] for name in JOB_COLUMNS] + [other[name] for name in JOB_COLUMNS]
    values += [math.log10((own[name] + _EPS) / (other[name] + _EPS)) for name in _COMPARED]
    values += [math.log10(own[name] + other[name] + _EPS) for name in _COMPARED]
    return values


def pair_matrix(pairs: Sequence[tuple[Mapping[str, float], Mapping[str, float]]]) -> np.ndarray:
    """Rows of PAIR_COLUMNS for (own, other) job rows."""
    return np.array([pair_row(own, other) for own, other in pairs], dtype=np.float32).reshape(
        len(pairs), len(PAIR_COLUMNS)
    )
