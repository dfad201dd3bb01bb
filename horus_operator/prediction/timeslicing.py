"""Co-tenants that time-slice a GPU share its time, each its fair share: their slowdowns follow from it.

Without MPS, the kernels of two CUDA contexts never run at once: the GPU runs one context's kernels,
then the other's. A job that keeps the GPU busy a fraction u of its step alone needs that much of the
GPU's time at its alone speed, u / s of it when slowed s×. So co-tenants i on one GPU satisfy

    Σ u_i / s_i ≤ 1        (GPU time conserved; context switches only take more)

and two jobs that each keep the GPU busy all the time are each slowed at least 2×. The H200 measured
this (docs/evaluation.md, "Measured on an H200": 2.1-2.2× for two saturating jobs). The slowdown model
was trained on Gavel's pairs, whose kernels overlapped (on Gavel's V100 the median pair's Σ 1 / s_i is
1.39 with nearly every job saturating), and often predicts two saturating jobs under 2× each: fine
where MPS lets kernels overlap, too little where co-tenants time-slice.

How that time is split follows from how the GPU serves contexts: each in turn, while it has work. A
job that asks less than an equal split gets all it asks (its kernels wait only for a turn), and the
busier ones share the rest: max-min fairness (`fair_shares`). So a job's slowdown is at least its busy
fraction over its share: two saturating jobs 2× each; a saturating job beside one 30 % busy 1 / 0.7 =
1.43×, while the light one owes nothing to the split (the H200 measured 1.5-1.7× and 0.95-1.2× for such
pairs). These floors imply Σ u_i / s_i ≤ 1. `conserve_gpu_time` raises each prediction below its floor
onto it: it never lowers a slowdown, and leaves alone any set of co-tenants whose demands fit (Σ u_i ≤
1).

A job served in full (its demand within its share) loses no GPU time to the split: it only waits for
a turn while another context holds the GPU. The slowdown prior (`slowdown.SlowdownPrior`) is the upper
end of that wait: every kernel of a loop that never overlaps its host work with the GPU's waits behind
the co-runner's. The trees on top of it learnt from Gavel's pairs, whose kernels overlapped and whose
light jobs contended for the host, to split a pair nearly evenly, which time-slicing does not (the
H200 measured a launch-bound job 1.07× beside a saturating one, the model said 1.59×). So such a job's
slowdown is at most the prior's (`served_in_full`), but only where its busy fraction was measured
(`Workload.busy`, or observed alone by a learning predictor): a roofline guess that calls a saturating
job light would have it served in full when it is not (the H200's EfficientNet-B0, predicted 34 %
busy, measured 99 %). Lowering every light job's slowdown to a fair-share answer from predicted busy
fractions, the fair-share prior, was tried and not shipped (docs/evaluation.md, "Measured on an H200").

`time_sliced(predictor)` answers with it: the caller decides where co-tenants time-slice (`horus simulate
--time-sliced`: everywhere; the operator per job, by its binding and `--sharing`: `operator/dra/claims.py`,
`time_slices`). The busy fractions are the predictor's (`job().utilization`: observed where the cluster saw
the job's kind alone, else the roofline's).
"""

from __future__ import annotations

from collections.abc import Sequence

from horus_operator.prediction.api import (
    OBSERVED,
    Basis,
    JobPrediction,
    LearningPredictor,
    PhysicalPredictor,
    Predictor,
    Workload,
)


def fair_shares(busy: Sequence[float]) -> tuple[float, ...]:
    """Each co-tenant's share of the GPU's time when a time-slicing GPU serves demands `busy` (each
    job's busy fraction alone) max-min fairly: a job asking less than an equal split of what is left
    gets all it asks, the others split the rest equally."""
    demands = [min(1.0, max(0.0, u)) for u in busy]
    shares = [0.0] * len(demands)
    left, waiting = 1.0, len(demands)
    for i in sorted(range(len(demands)), key=demands.__getitem__):
        shares[i] = min(demands[i], left / waiting)
        left, waiting = left - shares[i], waiting - 1
    return tuple(shares)


def conserve_gpu_time(slowdowns: Sequence[float], busy: Sequence[float]) -> tuple[float, ...]:
    """`slowdowns`, each raised to what its job's fair share of the GPU's time allows (busy / share,
    `fair_shares`); unchanged where every co-tenant's share covers its demand."""
    return tuple(
        max(s, u / share) if u > share else s
        for s, u, share in zip(slowdowns, busy, fair_shares(busy), strict=True)
    )


def served_in_full(
    slowdowns: Sequence[float], busy: Sequence[float], prior: Sequence[float], measured: Sequence[bool]
) -> tuple[float, ...]:
    """`slowdowns`, each job whose `measured` busy fraction is within its fair share held to at most
    the `prior`'s answer for it (never under 1); the others unchanged."""
    return tuple(
        min(s, max(1.0, p)) if known and not u > share else s
        for s, u, share, p, known in zip(slowdowns, busy, fair_shares(busy), prior, measured, strict=True)
    )


def within_fair_shares(
    predictor: Predictor, gpu: str, workloads: Sequence[Workload], slowdowns: Sequence[float]
) -> tuple[float, ...]:
    """`slowdowns` of `workloads` sharing one `gpu` by time-slicing, with the busy fractions `predictor`
    reads: raised to their fair shares (`conserve_gpu_time`), and those served in full held to the
    physical prior where `predictor` has one (`served_in_full`)."""
    busy = [predictor.job(workload, gpu).utilization for workload in workloads]
    floored = conserve_gpu_time(slowdowns, busy)
    prior = predictor.prior_slowdowns(gpu, workloads) if isinstance(predictor, PhysicalPredictor) else None
    if prior is None:
        return floored
    measured = [_busy_measured(predictor, workload, gpu) for workload in workloads]
    return served_in_full(floored, busy, prior, measured)


def _busy_measured(predictor: Predictor, workload: Workload, gpu: str) -> bool:
    """The workload carries a measured busy fraction, or the cluster saw its kind alone on `gpu`."""
    if workload.busy is not None:
        return True
    return (
        isinstance(predictor, LearningPredictor) and predictor.utilization_source(workload, gpu) == OBSERVED
    )


class TimeSliced:
    """A `Predictor` for GPUs whose co-tenants time-slice: `predictor`'s answers, each slowdown within what
    its job's fair share of the GPU's time says (`within_fair_shares`). `every`: on every set of co-tenants
    (the simulator's `--time-sliced` cluster); else on a set where a workload says it time-slices
    (`Workload.time_sliced`: the operator knows per job, from its binding)."""

    def __init__(self, predictor: Predictor, *, every: bool = True) -> None:
        self.predictor = predictor
        self.every = every

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return self.predictor.job(workload, gpu)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        predicted = self.predictor.slowdowns(gpu, workloads, memory_mib)
        if predicted is None or len(workloads) < 2:
            return predicted
        if not self.every and not any(workload.time_sliced for workload in workloads):
            return predicted
        return within_fair_shares(self.predictor, gpu, workloads, predicted)


class LearningTimeSliced(TimeSliced):
    """`TimeSliced` around a `LearningPredictor`: what it has learnt, and how sure it is, pass through."""

    def __init__(self, predictor: LearningPredictor, *, every: bool = True) -> None:
        super().__init__(predictor, every=every)
        self.learning = predictor

    @property
    def revision(self) -> int:
        return self.learning.revision

    def basis(self, gpu: str, workloads: Sequence[Workload]) -> tuple[Basis, ...]:
        return self.learning.basis(gpu, workloads)

    def utilization_source(self, workload: Workload, gpu: str) -> str:
        return self.learning.utilization_source(workload, gpu)

    def spreads(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        return self.learning.spreads(gpu, workloads, memory_mib)


def time_sliced(predictor: Predictor, *, every: bool = True) -> TimeSliced:
    """`predictor` for time-sliced GPUs (`every`: all of them, else those `Workload.time_sliced` names),
    learning where it learns."""
    if isinstance(predictor, LearningPredictor):
        return LearningTimeSliced(predictor, every=every)
    return TimeSliced(predictor, every=every)
