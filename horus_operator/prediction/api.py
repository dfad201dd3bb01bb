"""The prediction interface every consumer (placement, operator, simulator) programs against."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Workload:
    """What a job trains: a catalog model name and batch size, or its own graph features.

    `features` is None for catalog models (the predictor looks them up); jobs described by an ONNX
    graph or by precomputed features carry them here, keyed by the feature names in `features.py`.
    """

    model: str
    batch_size: int
    features: Mapping[str, float] | None = field(default=None, compare=False, hash=False)
    # Identifies custom features for caching and equality (e.g. a hash of the ONNX file).
    features_key: str = ""
    # Arithmetic the job trains in: fp32, amp (FP16 autocast) or bf16 (gpus.PRECISIONS).
    precision: str = "fp32"
    # The framework it trains with (`memory.RUNTIMES`): its allocator sets the memory held beyond the
    # model's own bytes (`memory.MemoryModel.memory_mib`).
    framework: str = "pytorch"
    # CPU cores the job keeps busy beside its training loop (data-loader workers, simulator processes):
    # what its pod may use beyond one core (its CPU limit, else its request), 0 where nothing says.
    # The slowdown prior's host-contention term reads it; a job's own steps are predicted without it.
    host_cpus: float = 0.0
    # The job's GPU busy fraction alone (0..1) as the cluster observed it on the GPU type it is asked
    # about, where it did (`correction.CorrectedPredictor` sets it from `Correction.utilization`); the
    # slowdown prior and the predicted utilization read it instead of the roofline's. None: predicted.
    busy: float | None = None
    # The job's peak GPU memory alone (MiB) as the cluster observed it on the GPU type it is asked
    # about (`Correction.peak_memory`): it wins over the predicted memory. None: predicted.
    peak_memory_mib: float | None = None
    # What any process of its framework holds on that GPU type before its model counts (MiB), as the
    # cluster observed it (`Correction.process_floor`): it stands in for the table's default
    # (`memory.runtime_floor_mib`). None: the table's.
    process_floor_mib: float | None = None
    # Its GPU's co-tenants time-slice (no MPS: the kernels of two processes never run at once), so
    # placement keeps them within the GPU's time (`timeslicing.py`). Set by the operator from the job's
    # binding and `horus run --sharing`.
    time_sliced: bool = False
    # The hash of the fields compared, kept: workloads key the placement index's groups and every
    # prediction cache, and are hashed millions of times in a long simulation.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(_compared_fields(self)))

    def __hash__(self) -> int:
        return self._hash

    def __setstate__(self, state: dict[str, object]) -> None:
        """Unpickled: the hash again, since another process may hash strings with another seed."""
        self.__dict__.update(state)
        self.__post_init__()


# The values `Workload.__eq__` compares, in field order: what its kept hash is of.
_compared_fields = operator.attrgetter(*(spec.name for spec in fields(Workload) if spec.compare))


@dataclass(frozen=True)
class JobPrediction:
    """A job running alone on one GPU of a given type."""

    utilization: float  # mean GPU utilization, 0..1
    memory_mib: float  # peak GPU memory: an envelope, never below a measured peak (what packing reads)
    # The least peak memory it could have (never above a measured peak): what "no GPU can hold it"
    # reads. None where the predictor has no floor; the peak stands in.
    min_memory_mib: float | None = None
    # Seconds per training step alone (the roofline's step time); None where the predictor has no step
    # model. With a job's spec.totalSteps it says when the job will end.
    step_s: float | None = None
    # Where `memory_mib` comes from (`memory_spread`: a graph, the catalog's or a job's own; its memory
    # terms; or an observed peak): how far it may be off, so how much a job is given beside others.
    # Empty where the predictor does not say (the prediction is then taken as it is).
    memory_source: str = ""


class Predictor(Protocol):
    """Predicts from model features alone (no profiling)."""

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        """Utilization and memory of `workload` alone on a GPU of type `gpu` (e.g. "v100")."""
        ...

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        """Slowdown (alone throughput / shared throughput, >= 1) of each workload when all of them
        share one GPU of type `gpu`; None when they cannot share it (e.g. out of memory). `memory_mib`
        is that GPU's capacity as its node reports it, the one placement checks fit against; None:
        the datasheet's, where no node is known (the CLI)."""
        ...


PRIOR, OBSERVED = "prior", "observed"
PREDICTED = "predicted"  # a utilization from the job's graph, not yet one the cluster observed


@dataclass(frozen=True)
class Basis:
    """Where a predicted slowdown comes from: the model alone (PRIOR) or corrected by OBSERVED samples.

    A predictor that learns is a `LearningPredictor`; one that is not is a fixed prior."""

    source: str
    samples: int


FROM_PRIOR = Basis(PRIOR, 0)  # the model alone: one value, not a new object per question


@runtime_checkable
class LearningPredictor(Predictor, Protocol):
    """A predictor corrected by what the cluster observes (`correction.CorrectedPredictor`): placement's
    cache reads these members where the predictor has them, and treats any other as a fixed prior."""

    @property
    def revision(self) -> int:
        """Changes whenever its answers may: cached answers from an older revision are stale."""
        ...

    def basis(self, gpu: str, workloads: Sequence[Workload]) -> tuple[Basis, ...]:
        """Per workload, whether its slowdown beside the others is the prior's or corrected by samples."""
        ...

    def utilization_source(self, workload: Workload, gpu: str) -> str:
        """OBSERVED where `job` answers from a busy fraction the cluster saw, else PREDICTED."""
        ...

    def spreads(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        """Per workload, the standard deviation of ln(its slowdown) next to the others: how far the
        answer may be off while this GPU type is unproven. None where `slowdowns` is."""
        ...


@runtime_checkable
class PhysicalPredictor(Predictor, Protocol):
    """A predictor whose slowdowns start from a physical prior it can answer with alone
    (`slowdown.SlowdownPrior`: time-sharing of the GPU and the host, from each job's busy fraction and
    CPU load): what time-slicing bounds a job by where it is served all the GPU time it asks
    (prediction/timeslicing.py)."""

    def prior_slowdowns(self, gpu: str, workloads: Sequence[Workload]) -> tuple[float, ...] | None:
        """The prior's slowdown of each workload beside the others on one `gpu`, from the busy fractions
        `job` reads, no learned residual or correction in it; None where there is no such prior."""
        ...


class UnknownModelError(ValueError):
    """A model name that is neither in the catalog nor described by features."""


class UnknownGpuError(ValueError):
    """A GPU type the models were not trained for and cannot map to a known one."""
