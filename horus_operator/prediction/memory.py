"""GPU memory model: peak memory of a training job, and whether a set of jobs fits on one GPU.

memory_mib = process floor(GPU generation, runtime) + framework overhead(runtime)
             + arena(runtime, in use)
in use     = overhead + (weight_factor × parameter bytes
                         + activation_factor × activation bytes per batch × bytes_scale(precision)) / MiB

`weight_factor` is PARAM_FACTOR = 4 (weights, gradients and Adam's two moments, FP32), plus
HALF_COPY_FACTOR = 0.5 under amp/bf16 (the half-precision weight copies autocast keeps). A job that
says more (`features.MEMORY_NAMES`: a Hugging Face config counted by `transformer`) has its weights as
loaded (in half precision or NF4: no FP32 copy and no autocast copies), the gradients it holds at once
(its trainable parameters' only, LoRA; one parameter's under optimizer-in-backward) in their dtype, its
optimizer's state, and the activations it keeps (checkpointing, SDPA attention, offloading), in place
of those defaults; under FSDP/ZeRO, one GPU's share of them; and what its optimizer's step allocates
beyond its state (torch's foreach Adam: a copy of the parameters), which takes the place of the
activations backward has freed: the larger of the two counts. Activations kept for backward are stored
at half size under amp/bf16. The process floor (`process_floor_mib`: what any training process of a
runtime holds on a GPU generation — CUDA context, cuBLAS/cuDNN workspaces, allocator cache) is data,
`data/process_floor.csv`, each row a measured tiny-model peak or a nearer generation's, saying which.
The overhead above it and the activation factor (activations kept for backward, their gradients in
flight, allocator slack) are calibrated as an envelope: the smallest total prediction under which no
measured PyTorch peak (`data/memory/`, every source) is under-predicted and every job Gavel ran alone
still fits its GPU (`training.train_memory`). The runtime's allocator (`ALLOCATORS`) turns what is in
use into what the process holds: PyTorch's as is, TensorFlow's in doubling regions (and with cuDNN's
autotuning scratch for a job with convolutions); the framework overhead, fitted on that framework's
measured peaks, is what its process holds beyond its floor row and its arena. `calibrate` instead
fits the overhead and activation factor to a set of pair outcomes (a pair that ran fit, one at zero
throughput did not): what `horus train slowdown` does with a user's pairs. A set of jobs is feasible
on a GPU when its predicted memories sum to at most the GPU's memory.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources

import numpy as np

from horus_operator.api.defaults import DEFAULT_FRAMEWORK, DEFAULT_PRECISION
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.roofline import bytes_scale

MIB = 1024.0 * 1024.0
PARAM_FACTOR = 4.0
HALF_COPY_FACTOR = 0.5
# The least any training step holds per parameter byte: the weights and their gradients (plain SGD).
FLOOR_PARAM_FACTOR = 2.0
# The frameworks a job may train with (a DLJob's spec.framework): the per-process floor
# (`data/process_floor.csv`) and the allocator's growth differ by framework.
RUNTIMES: tuple[str, ...] = ("pytorch", "tensorflow")
DEFAULT_RUNTIME = DEFAULT_FRAMEWORK


PROCESS_FLOOR_FILE = resources.files(__package__).joinpath("data", "process_floor.csv")
# A floor the cluster observed (`correction.Correction.process_floor`) replaces the table's up to this
# many times it: a reading taken wrongly (a job whose own least memory the count under-states) raises
# every small job's prediction, so it is bounded. Twice covers the generations' measured spread (1,511
# MiB on Hopper beside 1,133 on Ada) and issue 45's RTX 3090 (about 1,620 MiB over Ada's 1,133).
LEARNED_FLOOR_MAX_RAISE = 2.0


@dataclass(frozen=True)
class Allocator:
    """How a framework's GPU allocator turns the MiB a job has in use into the device memory it holds.

    PyTorch's caching allocator takes what is asked (its rounding is in the fitted envelope). TensorFlow's
    BFC allocator with memory growth on (`bfc_allocator.cc`) extends its arena by a region 2 MiB at
    first, each later one twice the one before, and never gives one back, so a job ends holding the
    sum of doubling regions that first held its peak in use (`arena_mib`; one request larger than the
    next region doubles that region until it fits, which this sum covers as long as requests are small
    beside the arena). TensorFlow autotunes each convolution (cuDNN), trying algorithms whose scratch
    space is taken from the same arena, up to TF_CUDNN_WORKSPACE_LIMIT_IN_MB (4 GiB unless set,
    `conv_ops_gpu.cc`): a job with convolutions has that much more in use while it tunes. The BFC
    allocator cuts a region to what the GPU has left, and autotuning skips an algorithm whose scratch
    does not fit, so the arena outgrows the GPU only where what is in use does (out of memory)."""

    first_region_mib: float | None = None  # None: no regions, the arena is what is in use
    conv_workspace_mib: float = 0.0

    def arena_mib(self, in_use_mib: float, convolutions: bool, room_mib: float = math.inf) -> float:
        """MiB held for `in_use_mib` in use, where the GPU has `room_mib` left for the arena."""
        wanted = in_use_mib + (self.conv_workspace_mib if convolutions else 0.0)
        if self.first_region_mib is None:
            return wanted
        # regions r, 2r, …, 2^n·r sum to (2^(n+1) − 1)·r: the first n that holds `wanted`
        regions = max(0, math.ceil(math.log2(wanted / self.first_region_mib + 1.0)) - 1)
        return max(in_use_mib, min((2.0 ** (regions + 1) - 1.0) * self.first_region_mib, room_mib))


ALLOCATORS: Mapping[str, Allocator] = {
    "pytorch": Allocator(),
    "tensorflow": Allocator(first_region_mib=2.0, conv_workspace_mib=4096.0),
}


@functools.cache
def process_floors() -> Mapping[tuple[str, str], float]:
    """MiB any training process holds on a GPU of a generation under a runtime, by (generation,
    runtime): the packaged table, whose rows say which value was measured and on what, and which is
    a nearer generation's."""
    text = PROCESS_FLOOR_FILE.read_text(encoding="utf-8")
    return {
        (row["generation"], row["runtime"]): float(row["floor_mib"])
        for row in csv.DictReader(io.StringIO(text))
    }


def process_floor_mib(gpu: str | None, runtime: str = DEFAULT_RUNTIME) -> float:
    """The per-process floor of `runtime` on `gpu` (a normalised GPU name); the largest of any
    generation where the GPU is not known. KeyError for a runtime or generation the table lacks."""
    floors = process_floors()
    if gpu is None:
        values = [floor for (_, known), floor in floors.items() if known == runtime]
        if not values:
            raise KeyError(f"no process floor for runtime {runtime!r}")
        return max(values)
    return floors[(GPU_SPECS[gpu].generation, runtime)]


def runtime_floor_mib(gpu: str | None, runtime: str, learned_mib: float | None = None) -> float:
    """The per-process floor a prediction reads: the table's (`process_floor_mib`), or the one the
    cluster learned for this GPU type and runtime, never below the table's (which stays the conservative
    default until the cluster shows more) and at most LEARNED_FLOOR_MAX_RAISE times it."""
    default = process_floor_mib(gpu, runtime)
    if learned_mib is None:
        return default
    return min(max(default, learned_mib), LEARNED_FLOOR_MAX_RAISE * default)


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
    # Whether the per-process floor of the job's GPU generation and runtime comes on top of
    # overhead_mib (`process_floor_mib`); False: overhead_mib alone is the constant (models written
    # before the floor table, or calibrated on pair outcomes).
    process_floor: bool = False
    # MiB a framework's process holds beyond its floor and its allocator's arena (`Allocator`), fitted
    # as the least under which none of its measured peaks is under-predicted
    # (`training.fit_framework_overheads`): for TensorFlow, libraries its tiny-model floor row does not
    # load, or regions that were not a clean doubling; the peaks cannot tell which. Absent: 0.
    framework_overhead_mib: Mapping[str, float] = field(default_factory=dict, hash=False)

    def memory_mib(
        self,
        job_features: Mapping[str, float],
        precision: str = DEFAULT_PRECISION,
        gpu: str | None = None,
        runtime: str = DEFAULT_RUNTIME,
        learned_floor_mib: float | None = None,
    ) -> float:
        """Peak memory of the job alone on a GPU of type `gpu` (a normalised name; None: any GPU,
        the largest floor), trained with `runtime`: what the job has in use (the envelope above the
        floor) as the runtime's allocator holds it, on the runtime's floor (`runtime_floor_mib`: the
        table's, or `learned_floor_mib` where the cluster observed one)."""
        weights = self._state_bytes(job_features, precision)
        activations = self.activation_factor * _activation_bytes(job_features, precision)
        # the optimizer's step runs after backward has freed the activations: its scratch takes their place
        step = job_features.get("optimizer_step_bytes", 0.0)
        in_use = self.overhead_mib + (weights + max(activations, step)) / MIB
        constant = self.constant_mib(gpu, runtime, learned_floor_mib)
        room = GPU_SPECS[gpu].memory_mib - constant if gpu is not None else math.inf
        return constant + ALLOCATORS[runtime].arena_mib(in_use, job_features.get("conv_ops", 0.0) > 0, room)

    def constant_mib(
        self, gpu: str | None = None, runtime: str = DEFAULT_RUNTIME, learned_floor_mib: float | None = None
    ) -> float:
        """What the runtime's process holds outside its allocator's arena: the process floor (where
        the model has one; `runtime_floor_mib`) and the runtime's fitted overhead above it."""
        floor = runtime_floor_mib(gpu, runtime, learned_floor_mib) if self.process_floor else 0.0
        return floor + self.framework_overhead_mib.get(runtime, 0.0)

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
        weights = job_features.get("weight_bytes", (1.0 + half_copies) * param_bytes)
        return weights + _gradient_bytes(job_features) + optimizer

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def weight_factor(param_factor: float, precision: str) -> float:
    """Bytes held per parameter byte: FP32 weights, gradients and optimizer state, plus the
    half-precision weight copies under amp/bf16."""
    return param_factor + (0.0 if precision == DEFAULT_PRECISION else HALF_COPY_FACTOR)


def _weights_and_gradients(job_features: Mapping[str, float]) -> float:
    """FLOOR_PARAM_FACTOR × parameter bytes where every parameter is trained; the weights as loaded and
    the gradients held where the job says so (half-precision or NF4 weights, LoRA, optimizer-in-backward,
    one GPU's share under FSDP/ZeRO)."""
    gradients = (FLOOR_PARAM_FACTOR - 1.0) * _gradient_bytes(job_features)
    return job_features.get("weight_bytes", job_features["param_bytes"]) + gradients


def _gradient_bytes(job_features: Mapping[str, float]) -> float:
    """The gradients held at once: every trainable parameter's (every parameter's, unless the job says
    which are trained), or fewer where the job says so (`gradient_bytes`)."""
    trainable = job_features.get("trainable_param_bytes", job_features["param_bytes"])
    return job_features.get("gradient_bytes", trainable)


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
    # The per-process floor of each sample's GPU (`process_floor_mib`), per job; None: no floor.
    process_floor_mib: np.ndarray | None = None  # shape (n,)


def predicted_feasible(model: MemoryModel, data: FeasibilityData) -> np.ndarray:
    variable = model.param_factor * data.param_bytes + model.activation_factor * data.activation_bytes
    constant = model.overhead_mib
    total = constant * data.jobs + variable.sum(axis=1) / MIB
    if model.process_floor and data.process_floor_mib is not None:
        total = total + data.process_floor_mib * data.jobs
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
