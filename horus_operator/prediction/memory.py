"""GPU memory model: peak memory of a training job, and whether a set of jobs fits on one GPU.

memory_mib = overhead
             + (weight_factor × parameter bytes
                + activation_factor × activation bytes per batch × bytes_scale(precision)) / MiB

`weight_factor` is PARAM_FACTOR = 4 (weights, gradients and Adam's two moments, FP32), plus
HALF_COPY_FACTOR = 0.5 under amp/bf16 (the half-precision weight copies autocast keeps). A job that
says more (`features.MEMORY_NAMES`: a Hugging Face config counted by `transformer`) has gradients and
optimizer state for its trainable parameters only (LoRA), its optimizer's state, and the activations
gradient checkpointing keeps, in place of those defaults. Activations
kept for backward are stored at half size under amp/bf16. The overhead (CUDA context, framework
workspaces) and the activation factor (activations kept for backward, their gradients in flight,
allocator slack) are calibrated as an envelope: the smallest total prediction under which no
measured peak (`data/memory/`) is under-predicted and every job Gavel ran alone still fits its GPU
(`training.train_memory`). `calibrate` instead fits them to a set of pair outcomes (a pair that ran
fit, one at zero throughput did not): what `horus train slowdown` does with a user's pairs. A set of
jobs is feasible on a GPU when its predicted memories sum to at most the GPU's memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from horus_operator.api.defaults import DEFAULT_PRECISION
from horus_operator.prediction.roofline import bytes_scale

MIB = 1024.0 * 1024.0
PARAM_FACTOR = 4.0
HALF_COPY_FACTOR = 0.5
# The least any training step holds per parameter byte: the weights and their gradients (plain SGD).
FLOOR_PARAM_FACTOR = 2.0


@dataclass(frozen=True)
class MemoryModel:
    overhead_mib: float
    activation_factor: float
    param_factor: float = PARAM_FACTOR
    # The floor: the same formula fitted from below (never above a measured peak,
    # `training.fit_memory_floor`), with FLOOR_PARAM_FACTOR. A job is refused as too big for every GPU
    # only when even its floor is.
    floor_overhead_mib: float = 0.0
    floor_activation_factor: float = 0.0

    def memory_mib(self, job_features: Mapping[str, float], precision: str = DEFAULT_PRECISION) -> float:
        weights = self._state_bytes(job_features, precision)
        activations = _activation_bytes(job_features, precision)
        variable = weights + self.activation_factor * activations
        return self.overhead_mib + variable / MIB

    def floor_mib(self, job_features: Mapping[str, float], precision: str = DEFAULT_PRECISION) -> float:
        """The least peak memory the job could have: below this it certainly does not run."""
        activations = _activation_bytes(job_features, precision)
        variable = _weights_and_gradients(job_features) + self.floor_activation_factor * activations
        return self.floor_overhead_mib + variable / MIB

    def _state_bytes(self, job_features: Mapping[str, float], precision: str) -> float:
        """Weights, half copies, gradients and optimizer state. Without the memory terms of
        `features.MEMORY_NAMES` this is weight_factor × parameter bytes: every parameter trained with
        param_factor − 2 optimizer values per weight (Adam's two moments)."""
        param_bytes = job_features["param_bytes"]
        half_copies = weight_factor(self.param_factor, precision) - self.param_factor
        trainable = job_features.get("trainable_param_bytes", param_bytes)
        optimizer = job_features.get("optimizer_state_bytes", (self.param_factor - 2.0) * trainable)
        return (1.0 + half_copies) * param_bytes + trainable + optimizer

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def weight_factor(param_factor: float, precision: str) -> float:
    """Bytes held per parameter byte: FP32 weights, gradients and optimizer state, plus the
    half-precision weight copies under amp/bf16."""
    return param_factor + (0.0 if precision == DEFAULT_PRECISION else HALF_COPY_FACTOR)


def _weights_and_gradients(job_features: Mapping[str, float]) -> float:
    """FLOOR_PARAM_FACTOR × parameter bytes where every parameter is trained; only the trained ones'
    gradients where the job says which (LoRA)."""
    param_bytes = job_features["param_bytes"]
    trainable = job_features.get("trainable_param_bytes", param_bytes)
    return param_bytes + (FLOOR_PARAM_FACTOR - 1.0) * trainable


def _activation_bytes(job_features: Mapping[str, float], precision: str) -> float:
    """Activation bytes of the batch held for backward: the graph's, or fewer under checkpointing, at
    half size under amp/bf16; and what is held at FP32 whatever the precision (a language model's loss
    over its vocabulary, which no forward graph holds)."""
    kept = job_features.get("kept_activation_bytes_per_batch", job_features["activation_bytes_per_batch"])
    return kept * bytes_scale(precision) + job_features.get("fp32_activation_bytes_per_batch", 0.0)


def fits(memories_mib: Sequence[float], capacity_mib: float) -> bool:
    return sum(memories_mib) <= capacity_mib


@dataclass(frozen=True)
class FeasibilityData:
    """Per sample (a job alone or a pair): parameter and activation bytes of its jobs (zero where a
    single job has no partner), the GPU memory, and the outcome."""

    param_bytes: np.ndarray  # shape (n, 2)
    activation_bytes: np.ndarray  # shape (n, 2)
    jobs: np.ndarray  # shape (n,): 1 or 2
    capacity_mib: np.ndarray  # shape (n,)
    feasible: np.ndarray  # shape (n,), bool


def predicted_feasible(model: MemoryModel, data: FeasibilityData) -> np.ndarray:
    variable = model.param_factor * data.param_bytes + model.activation_factor * data.activation_bytes
    total = model.overhead_mib * data.jobs + variable.sum(axis=1) / MIB
    return total <= data.capacity_mib


def balanced_accuracy(predicted: np.ndarray, actual: np.ndarray) -> float:
    """Mean of the recall on feasible and on infeasible samples (0.5 for a constant answer)."""
    recalls = [
        np.mean(predicted[actual == outcome] == outcome)
        for outcome in (True, False)
        if np.any(actual == outcome)
    ]
    return float(np.mean(recalls))


OVERHEAD_GRID_MIB = tuple(np.arange(0.0, 2049.0, 64.0))
ACTIVATION_FACTOR_GRID = tuple(np.round(np.geomspace(0.05, 8.0, 56), 4))


def calibrate(data: FeasibilityData) -> MemoryModel:
    """The grid point with the best balanced accuracy on the pairs among those under which every job
    measured alone fits (a job that ran must stay placeable); ties go to the most memory (the safe
    side). ValueError if no grid point lets every single job fit."""
    singles = data.jobs == 1
    best: tuple[float, float, float] | None = None
    for overhead, factor in itertools.product(OVERHEAD_GRID_MIB, ACTIVATION_FACTOR_GRID):
        model = MemoryModel(overhead_mib=float(overhead), activation_factor=float(factor))
        feasible = predicted_feasible(model, data)
        if not feasible[singles].all():
            continue
        score = balanced_accuracy(feasible[~singles], data.feasible[~singles])
        key = (score, float(overhead), float(factor))
        if best is None or key > best:
            best = key
    if best is None:
        raise ValueError("no memory model lets every job measured alone fit on its GPU")
    return MemoryModel(overhead_mib=best[1], activation_factor=best[2])
