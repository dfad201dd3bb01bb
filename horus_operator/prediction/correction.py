"""Online correction: the shipped slowdown model (the prior), corrected by what the cluster observes.

Pure: no clock, no I/O; callers hand in observations with their times and persist the state.

**What is learned.** For a job i observed next to its co-tenants on a GPU type, with x = ln(the
prior's predicted slowdown) and y = ln(observed slowdown) (both floored at 1: log excess slowdown), at
three levels:
- per GPU type, a *scale* b ≤ 1 of the prior's log slowdown: least squares through the origin of y on
  x over every sample on that GPU, so that the corrected log slowdown is b·x before the levels below;
- per (GPU type, job signature): the residual y − b·x of every sample of i, whatever its co-tenant;
- per (GPU type, job signature, co-tenant signature), "per pair where seen": residuals of i next to
  exactly that one co-tenant (i's slowdown next to j; j's next to i is its own entry).
A signature is (model, batch size, precision, features key, framework): what the predictor itself tells
apart (a TensorFlow job holds more memory than a PyTorch job of the same graph).
The job and pair levels keep the mean x and y of their samples, so their residual is always against the
GPU's current scale (not the one when a sample came in).

**Why a scale, not an offset, at the GPU level.** Off the training distribution the model's typical
error is the size of the *excess* slowdown for every pair of a GPU: the prior says 1.5× where a GPU
shares well and truth is 1.03×, while two saturating jobs truly slow each other 1.8×. An additive log
offset learnt from the first pairs would shift every other pair by the same amount, the saturating
ones too; a scale shrinks or stretches each pair's excess in proportion and leaves pairs the prior
calls harmless (x ≈ 0) harmless, as the physics says (a job that leaves the GPU idle slows nobody on
any GPU). Gavel's data cannot tell the two apart (`bench/gpu_bias_shape.py`: on each held-out GPU
a scale leaves slightly less log error than an offset, both barely less than the prior, because there
the error is mostly pair by pair; docs/prediction.md, "Online correction"), so the physics decides. A
pair that differs from the scaled prior is what the job and pair levels are for.

**Only downward.** The scale is capped at 1: the GPU level may shrink the prior's excess for every pair,
never stretch it. The two directions are not alike for a scheduler that learns from the co-locations it
makes: a stretch applied to every pair of a GPU can push all of them past what sharing gains, no job
shares any more and nothing is observed that could undo it; a shrink makes more pairs share and is
checked by what they show. On the leave-K80-out bench the uncapped scale did exactly that: the first six
samples were A3C pairs (its four emulator processes slow partners on the host, 1.5–3.2× where the
prior said 1.2–1.4×), the scale went to 2.7, no other co-location was learned from in the whole run
and the makespan was exclusive GPUs' (1.001×). A job or pair worse than the prior still corrects
upward at its own level, where a stretch stops only its own sharing.

**Shrinkage toward the prior, empirical Bayes.** The scale has a normal prior N(1, τ_b²): with Sxx =
Σx², Sxy = Σxy its posterior mean is (Sxy + λ)/(Sxx + λ) and variance s²/(Sxx + λ), λ = s²/τ_b², where
s² = σ² + τ² is one sample's variance about the scaled prior (the noise and the jobs' own deviations,
the mean square below: a sample from one odd pair is not a GPU's scale). τ_b² starts at `SCALE_SD`²
(0.5: a GPU's excess off by half either way is unremarkable), worth `SCALE_PSEUDO_SXX` of Σx², and moves
toward what the GPU's samples show, (b̂ − 1)² less b̂'s sampling variance s²/Sxx, as Σx² grows: a GPU
far off the prior gives way after a handful of co-locations, one near it keeps b near 1, and samples
near x = 0 (which say nothing about a scale) move it little. The job and pair levels are normal means
under a normal prior: with n samples of mean residual m the posterior mean is (n·m + k·μ) / (n + k),
where k = σ²/τ² is the noise variance of one sample over the variance of the prior's error: the prior
counts as k samples. The job level shrinks toward μ = 0 (the scaled prior is right), the pair level
toward the job level. σ (`NOISE_SD`, 0.1 in log space: an observed slowdown within about 10%) is
assumed; τ² is estimated per GPU type from the residuals against the scaled prior as each sample arrives
(their mean square less σ²), starting from k = `PRIOR_STRENGTH` (2) as if `SPREAD_PSEUDO_SAMPLES` (10)
residuals had shown that much, and kept within `STRENGTH_RANGE`. So a model that has been right on this
GPU keeps its predictions until evidence piles up, and one that is far off (a GPU it never saw) gives
way after one or two co-locations. `strength(gpu)` says k now, `scale(gpu)` the scale. The corrected
slowdown is max(1, e^(b·x + c)), c the job or pair level. A job with more than one co-tenant gets the
GPU and job levels only (pairs are pairwise).

**Uncertainty.** `log_sd` (and `CorrectedPredictor.spreads`): the posterior standard deviation of the
corrected log slowdown, the root of x²·var(b) + σ²/(n + k) (n the samples of the level used, 0 where
none; the two taken as independent). A caller can let jobs whose maxSlowdown leaves room share first on a GPU
still unproven, and a tight job once the upper end fits.

**Alone rates by signature.** An observed slowdown needs the job's rate alone. In a busy cluster a job
may never run alone (a new co-tenant joins as soon as one leaves), so the rate alone that jobs of the
same signature showed on the same GPU type stands in (`note_alone` / `alone_rate`; a running mean,
bounded like the job level). Jobs of one signature train the same graph at the same batch size; code
around it (data loading) may differ, which this assumes away.

**Observed solo profiles.** The roofline predicts a job's GPU busy fraction from its graph, which cannot
see a data loader or a CPU-bound environment. Once a job has run alone, its busy fraction as the node
agent observed it is kept per (GPU type, signature) (`note_utilization` / `utilization`; a running
mean, bounded like the job level), and `CorrectedPredictor` hands it to the prior (`Workload.busy`) in
place of the roofline's, for that job and later jobs of its signature: in the slowdown prior, in the
residuals it learns against, in `job().utilization`. Residuals learnt before a job's profile was
observed were against the roofline's prior; they stay, and fade like any other evidence. The GPU
memory the agent read for the job in that same alone period is kept beside it, the largest seen
(`note_peak_memory` / `peak_memory`), and handed to the prior as `Workload.peak_memory_mib`: a
measured peak wins over the memory envelope in `job().memory_mib`, hence in packing and in
`slowdowns`' feasibility (issue 26, item 3).

**Forgetting.** A level's weight stops growing at `MAX_WEIGHT` samples (a running mean with weight
1/min(n, MAX_WEIGHT)), so a cluster that changes (a driver, a library) is relearned; the count reported
stays the true one.

**Bounded.** At most `MAX_PAIRS` pair and `MAX_JOBS` job (and alone-rate, and busy-fraction) entries,
the least recently updated dropped first; the ids of samples already learned (one co-location counts
once, across restarts too) are kept for the newest `MAX_SEEN`.

**Implausible samples are refused** (`rejection`): a job alone (no interference to learn), on a GPU
marked unhealthy, a sample taken before the job's current placement (a rate left over from an earlier
pod or GPU), or an observed slowdown outside `PLAUSIBLE_SLOWDOWN` (a broken rate, not interference).

**Explainable.** `basis(gpu, workloads)`: per workload, "observed" and how many samples stand behind its
correction (the pair's where seen, else the job's, else the GPU level's: co-locations of other jobs on
that GPU type), or "prior" and 0.

**Persisted** as JSON (`to_dict` / `load`) tied to the prior it corrects (`prior_id`): residuals
against another model mean nothing, so a saved state for another prior is not loaded. `FORMAT` 3 (the GPU
level, x and y per entry, the framework in each signature): a state of format 2 is read with every
signature a PyTorch job's (the only framework then); one of format 1 is refused with a `ValueError` that
says so (the operator logs it and starts from the prior).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from horus_operator.api.defaults import DEFAULT_FRAMEWORK
from horus_operator.prediction.api import (
    FROM_PRIOR,
    OBSERVED,
    PREDICTED,
    Basis,
    JobPrediction,
    PhysicalPredictor,
    Predictor,
    Workload,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

NOISE_SD = 0.1  # σ: one observed slowdown's error, in log space
SCALE_SD = 0.5  # τ_b before evidence: the GPU-level scale's prior N(1, τ_b²)
SCALE_PSEUDO_SXX = 1.0  # Σx² that SCALE_SD is worth (about 6 samples the prior put at 1.5×)
PRIOR_STRENGTH = 2.0  # k = σ²/τ² before any residual is seen: the prior counts as this many samples
SPREAD_PSEUDO_SAMPLES = 10  # how many residuals that initial k is worth
STRENGTH_RANGE = (0.1, 20.0)  # k stays within: never all trust in one sample, never none
MAX_WEIGHT = 50  # samples; beyond it older evidence fades
MAX_PAIRS = 4096
MAX_JOBS = 1024
MAX_SEEN = 8192
PLAUSIBLE_SLOWDOWN = (0.5, 20.0)  # observed slowdowns outside are broken rates, not interference
FORMAT = 3  # of the persisted state (2: the GPU-level scale; x and y per entry; 3: the framework)

_Entry = TypeVar("_Entry", bound="DataclassInstance")
_Key = TypeVar("_Key")
Signature = tuple[str, int, str, str, str]  # model, batch size, precision, features key, framework
JobKey = tuple[str, Signature]
PairKey = tuple[str, Signature, Signature]


def signature(workload: Workload) -> Signature:
    return (
        workload.model,
        workload.batch_size,
        workload.precision,
        workload.features_key,
        workload.framework,
    )


@dataclasses.dataclass(frozen=True)
class Observation:
    """One job's observed slowdown over one co-tenancy, as the cluster (or the simulator) saw it."""

    sample_id: str  # identifies the co-location (e.g. both jobs' UIDs): it is learned once
    gpu: str  # the GPU type as the predictor knows it
    workload: Workload
    cotenants: tuple[Workload, ...]  # the other jobs on its GPU while it was observed
    slowdown: float  # its rate alone / its rate next to them
    observed_at: float  # seconds, the caller's clock
    placed_at: float  # when its current placement began, same clock
    gpu_healthy: bool = True
    memory_mib: float | None = None  # the GPU's capacity (see `Predictor.slowdowns`)


def rejection(observation: Observation) -> str | None:
    """Why `observation` must not be learned from, or None."""
    low, high = PLAUSIBLE_SLOWDOWN
    if not observation.cotenants:
        return "the job ran alone"
    if not observation.gpu_healthy:
        return "its GPU is marked unhealthy"
    if observation.observed_at < observation.placed_at:
        return "observed before its current placement"
    if not (math.isfinite(observation.slowdown) and low <= observation.slowdown <= high):
        return f"observed slowdown {observation.slowdown!r} is outside [{low}, {high}]"
    return None


@dataclasses.dataclass
class _Evidence:
    samples: int = 0
    mean: float = 0.0  # mean log residual, weighting the newest `max_weight` samples

    def add(self, residual: float, max_weight: int) -> None:
        self.samples += 1
        self.mean += (residual - self.mean) / min(self.samples, max_weight)

    def shrunk(self, toward: float, strength: float, max_weight: int) -> float:
        weight = min(self.samples, max_weight)
        return (weight * self.mean + strength * toward) / (weight + strength)


@dataclasses.dataclass
class _Peak:
    """The largest GPU memory (MiB) a job signature was seen holding alone, over `samples` readings."""

    samples: int = 0
    mib: float = 0.0

    def add(self, mib: float) -> None:
        self.samples += 1
        self.mib = max(self.mib, mib)


@dataclasses.dataclass
class _Residuals:
    """A job or pair level: the mean x (ln prior) and y (ln observed) of its samples, newest-weighted."""

    samples: int = 0
    x: float = 0.0
    y: float = 0.0

    def add(self, x: float, y: float, max_weight: int) -> None:
        self.samples += 1
        weight = min(self.samples, max_weight)
        self.x += (x - self.x) / weight
        self.y += (y - self.y) / weight

    def shrunk(self, scale: float, toward: float, strength: float, max_weight: int) -> float:
        """Posterior mean residual against the prior scaled by `scale`."""
        weight = min(self.samples, max_weight)
        return (weight * (self.y - scale * self.x) + strength * toward) / (weight + strength)


@dataclasses.dataclass
class _Scale:
    """A GPU level: mean x² and xy of its samples (least squares through the origin), newest-weighted."""

    samples: int = 0
    xx: float = 0.0
    xy: float = 0.0

    def add(self, x: float, y: float, max_weight: int) -> None:
        self.samples += 1
        weight = min(self.samples, max_weight)
        self.xx += (x * x - self.xx) / weight
        self.xy += (x * y - self.xy) / weight

    def posterior(self, scatter: float, max_weight: int) -> tuple[float, float]:
        """Mean and variance of the scale b under its prior N(1, τ_b²), τ_b estimated (module docstring);
        `scatter`: one sample's variance about the scaled prior."""
        sxx = min(self.samples, max_weight) * self.xx
        if sxx <= 0:
            return 1.0, SCALE_SD**2
        shown = max(0.0, (self.xy / self.xx - 1) ** 2 - scatter / sxx)  # (b̂ − 1)² less its noise
        prior_variance = (SCALE_PSEUDO_SXX * SCALE_SD**2 + sxx * shown) / (SCALE_PSEUDO_SXX + sxx)
        pull = scatter / prior_variance  # λ: how much Σx² the prior is worth
        # never above 1: a GPU-wide stretch would stop every co-location, and with them the evidence
        # that could undo it (module docstring, "Only downward")
        return min(1.0, (sxx * self.xy / self.xx + pull) / (sxx + pull)), scatter / (sxx + pull)


def _initial_mean_square() -> float:
    """σ² + τ₀², with τ₀² = σ²/PRIOR_STRENGTH."""
    return NOISE_SD**2 * (1 + 1 / PRIOR_STRENGTH)


class Correction:
    """The learned corrections. Updated from one thread; read from any (single dict lookups)."""

    def __init__(
        self,
        *,
        max_weight: int = MAX_WEIGHT,
        max_pairs: int = MAX_PAIRS,
        max_jobs: int = MAX_JOBS,
        max_seen: int = MAX_SEEN,
    ) -> None:
        if max_weight < 1:
            raise ValueError("max_weight must be >= 1")
        self.max_weight = max_weight
        self._caps = (max_jobs, max_pairs, max_seen)
        self._scales: dict[str, _Scale] = {}  # per GPU type (a handful: not bounded)
        self._jobs: OrderedDict[JobKey, _Residuals] = OrderedDict()
        self._pairs: OrderedDict[PairKey, _Residuals] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._alone: OrderedDict[JobKey, _Evidence] = OrderedDict()  # steps/s alone (`mean`)
        self._busy: OrderedDict[JobKey, _Evidence] = OrderedDict()  # GPU busy fraction alone (`mean`)
        self._peaks: OrderedDict[JobKey, _Peak] = OrderedDict()  # GPU memory alone, the largest seen
        # per GPU type: the residuals' mean square against the scaled prior (σ² + τ²; `mean` of an _Evidence)
        self._spread: dict[str, _Evidence] = {}
        self._strength: dict[str, float] = {}
        self._scale: dict[str, tuple[float, float]] = {}  # per GPU type: the scale's posterior (mean, var)
        self.revision = 0  # bumped on every change: predictions cached against an older one are stale

    def __len__(self) -> int:
        return len(self._scales) + len(self._jobs) + len(self._pairs)

    def seen(self, sample_id: str) -> bool:
        return sample_id in self._seen

    def note_alone(self, gpu: str, workload: Workload, steps_per_second: float) -> None:
        """A job of `workload`'s signature was seen running alone on `gpu` at this rate."""
        if math.isfinite(steps_per_second) and steps_per_second > 0:
            key = (gpu, signature(workload))
            _touch(self._alone, key, self._caps[0], _Evidence).add(steps_per_second, self.max_weight)

    def alone_rate(self, gpu: str, workload: Workload) -> float | None:
        """What jobs of `workload`'s signature showed alone on `gpu` (steps/s), if any was seen."""
        found = self._alone.get((gpu, signature(workload)))
        return found.mean if found else None

    def note_utilization(self, gpu: str, workload: Workload, busy: float) -> None:
        """A job of `workload`'s signature was seen keeping `gpu` this busy (0..1) while alone on it."""
        if math.isfinite(busy) and 0.0 <= busy <= 1.0:
            key = (gpu, signature(workload))
            _touch(self._busy, key, self._caps[0], _Evidence).add(busy, self.max_weight)
            self.revision += 1

    def utilization(self, gpu: str, workload: Workload) -> float | None:
        """The busy fraction jobs of `workload`'s signature showed alone on `gpu`, if any was seen."""
        found = self._busy.get((gpu, signature(workload)))
        return found.mean if found else None

    def note_peak_memory(self, gpu: str, workload: Workload, mib: float) -> None:
        """A job of `workload`'s signature was seen holding this much GPU memory (MiB, the process's
        as the node agent reads it) while alone on `gpu`."""
        if math.isfinite(mib) and mib > 0.0:
            key = (gpu, signature(workload))
            entry = _touch(self._peaks, key, self._caps[0], _Peak)
            before = entry.mib
            entry.add(mib)
            if entry.mib != before:
                self.revision += 1

    def peak_memory(self, gpu: str, workload: Workload) -> float | None:
        """The largest GPU memory (MiB) jobs of `workload`'s signature held alone on `gpu`, if seen."""
        found = self._peaks.get((gpu, signature(workload)))
        return found.mib if found else None

    def strength(self, gpu: str) -> float:
        """k on `gpu`: how many samples the prior is worth there now."""
        return self._strength.get(gpu, PRIOR_STRENGTH)

    def scale(self, gpu: str) -> float:
        """b on `gpu`: the prior's log slowdown there is multiplied by it (1 before any sample)."""
        return self._scale.get(gpu, (1.0, 0.0))[0]

    def add(
        self,
        gpu: str,
        workload: Workload,
        cotenants: Sequence[Workload],
        *,
        predicted: float,
        observed: float,
        sample_id: str,
    ) -> None:
        """Learn one sample: the prior's `predicted` and the `observed` slowdown of `workload`."""
        x, y = _log_excess(predicted), _log_excess(observed)
        residual = y - self.scale(gpu) * x  # against the scaled prior, before this sample
        spread = self._spread.setdefault(gpu, _Evidence(0, _initial_mean_square()))
        spread.samples += 1
        weight = min(spread.samples + SPREAD_PSEUDO_SAMPLES, self.max_weight)
        spread.mean += (residual**2 - spread.mean) / weight
        self._strength[gpu] = _strength(spread.mean)
        scale = self._scales.setdefault(gpu, _Scale())
        scale.add(x, y, self.max_weight)
        self._scale[gpu] = scale.posterior(spread.mean, self.max_weight)
        own = signature(workload)
        _touch(self._jobs, (gpu, own), self._caps[0], _Residuals).add(x, y, self.max_weight)
        if len(cotenants) == 1:
            pair = _touch(self._pairs, (gpu, own, signature(cotenants[0])), self._caps[1], _Residuals)
            pair.add(x, y, self.max_weight)
        self._seen[sample_id] = None
        self._seen.move_to_end(sample_id)
        _trim(self._seen, self._caps[2])
        self.revision += 1

    def log_slowdown(
        self, gpu: str, workload: Workload, cotenants: Sequence[Workload], predicted: float
    ) -> float:
        """ln of the corrected slowdown of `workload` next to `cotenants`, the prior predicting `predicted`
        (before the floor at 1)."""
        own, strength, scale = signature(workload), self.strength(gpu), self.scale(gpu)
        job = self._jobs.get((gpu, own))
        level = job.shrunk(scale, 0.0, strength, self.max_weight) if job else 0.0
        pair = self._pair(gpu, own, cotenants)
        if pair:
            level = pair.shrunk(scale, level, strength, self.max_weight)
        return scale * _log_excess(predicted) + level

    def log_sd(self, gpu: str, workload: Workload, cotenants: Sequence[Workload], predicted: float) -> float:
        """Posterior standard deviation of `log_slowdown` (module docstring, "Uncertainty")."""
        own = signature(workload)
        level = self._pair(gpu, own, cotenants) or self._jobs.get((gpu, own))
        samples = min(level.samples, self.max_weight) if level else 0
        scale_variance = self._scale.get(gpu, (1.0, SCALE_SD**2))[1]
        return math.sqrt(
            _log_excess(predicted) ** 2 * scale_variance + NOISE_SD**2 / (samples + self.strength(gpu))
        )

    def basis(self, gpu: str, workload: Workload, cotenants: Sequence[Workload]) -> Basis:
        own = signature(workload)
        evidence = self._pair(gpu, own, cotenants) or self._jobs.get((gpu, own)) or self._scales.get(gpu)
        return Basis(OBSERVED, evidence.samples) if evidence else FROM_PRIOR

    def _pair(self, gpu: str, own: Signature, cotenants: Sequence[Workload]) -> _Residuals | None:
        return self._pairs.get((gpu, own, signature(cotenants[0]))) if len(cotenants) == 1 else None

    # -- persistence -------------------------------------------------------------------------------
    def to_dict(self, prior_id: str) -> dict[str, Any]:
        """Oldest first, so loading keeps which entries go first."""
        return {
            "format": FORMAT,
            "prior": prior_id,
            "spread": [[gpu, e.samples, e.mean] for gpu, e in self._spread.items()],
            "scales": [[gpu, s.samples, s.xx, s.xy] for gpu, s in self._scales.items()],
            "jobs": [[gpu, *own, e.samples, e.x, e.y] for (gpu, own), e in self._jobs.items()],
            "pairs": [
                [gpu, *own, *other, e.samples, e.x, e.y] for (gpu, own, other), e in self._pairs.items()
            ],
            "seen": list(self._seen),
            "alone": [[gpu, *own, e.samples, e.mean] for (gpu, own), e in self._alone.items()],
            "busy": [[gpu, *own, e.samples, e.mean] for (gpu, own), e in self._busy.items()],
            "peaks": [[gpu, *own, e.samples, e.mib] for (gpu, own), e in self._peaks.items()],
        }

    def load(self, state: Mapping[str, Any], prior_id: str) -> bool:
        """Replace this state with a saved one; False (unchanged) when it corrects another prior.
        `ValueError` naming the field on a malformed state."""
        if state.get("format") == 2:
            state = _with_frameworks(state)
        if state.get("format") != FORMAT:
            older = " (saved before the GPU-level scale: it is relearned)" if state.get("format") == 1 else ""
            raise ValueError(f"format: {state.get('format')!r}, expected {FORMAT}{older}")
        if state.get("prior") != prior_id:
            return False
        jobs = _table(state, "jobs", 9, _job_key, _Residuals)
        pairs = _table(state, "pairs", 14, _pair_key, _Residuals)
        scales = dict(_table(state, "scales", 4, _gpu_key, _Scale))
        spread = dict(_table(state, "spread", 3, _gpu_key, _Evidence))
        alone = _table(state, "alone", 8, _job_key, _Evidence)
        busy = _table(state, "busy", 8, _job_key, _Evidence)
        if not all(0.0 <= e.mean <= 1.0 for e in busy.values()):
            raise ValueError("busy: a busy fraction outside 0-1")
        peaks = _table(state, "peaks", 8, _job_key, _Peak)  # absent in states saved before it: none
        if not all(e.mib > 0.0 for e in peaks.values()):
            raise ValueError("peaks: a peak memory at or below 0 MiB")
        seen = state.get("seen", [])
        if not isinstance(seen, list) or not all(isinstance(s, str) for s in seen):
            raise ValueError("seen: expected a list of sample ids")
        self._jobs, self._pairs, self._alone, self._busy, self._scales = jobs, pairs, alone, busy, scales
        self._peaks = peaks
        self._spread = spread
        self._strength = {gpu: _strength(e.mean) for gpu, e in spread.items()}
        self._scale = {
            gpu: s.posterior(spread[gpu].mean if gpu in spread else _initial_mean_square(), self.max_weight)
            for gpu, s in scales.items()
        }
        self._seen = OrderedDict.fromkeys(seen)
        for table, cap in (
            (self._jobs, self._caps[0]),
            (self._alone, self._caps[0]),
            (self._busy, self._caps[0]),
            (self._peaks, self._caps[0]),
            (self._pairs, self._caps[1]),
            (self._seen, self._caps[2]),
        ):
            _trim(table, cap)
        self.revision += 1
        return True


class CorrectedPredictor:
    """A `Predictor`: the prior's answers, slowdowns corrected by what was observed."""

    def __init__(self, prior: Predictor, correction: Correction | None = None) -> None:
        self.prior = prior
        self.correction = correction if correction is not None else Correction()

    @property
    def revision(self) -> int:
        return self.correction.revision

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return self.prior.job(self._observed(gpu, workload), gpu)

    def utilization_source(self, workload: Workload, gpu: str) -> str:
        """ "observed" once jobs of `workload`'s signature were seen alone on `gpu` (`job` then reads
        their busy fraction), else "predicted"."""
        return OBSERVED if self.correction.utilization(gpu, workload) is not None else PREDICTED

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        predicted = self._prior_slowdowns(gpu, workloads, memory_mib)
        if predicted is None or len(workloads) < 2 or not len(self.correction):
            return predicted
        return tuple(
            max(1.0, math.exp(self.correction.log_slowdown(gpu, w, _others(workloads, i), slowdown)))
            for i, (w, slowdown) in enumerate(zip(workloads, predicted, strict=True))
        )

    def prior_slowdowns(self, gpu: str, workloads: Sequence[Workload]) -> tuple[float, ...] | None:
        """The prior predictor's physical prior (`PhysicalPredictor`) at the busy fractions observed
        alone, where they were; None where the prior predictor has none."""
        if not isinstance(self.prior, PhysicalPredictor):
            return None
        return self.prior.prior_slowdowns(gpu, [self._observed(gpu, workload) for workload in workloads])

    def spreads(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        """Per workload, the posterior standard deviation of ln(its corrected slowdown) next to the
        others (`Correction.log_sd`): e^(ln slowdown + 2·sd) is a cautious upper end. None where
        `slowdowns` is."""
        predicted = self._prior_slowdowns(gpu, workloads, memory_mib)
        if predicted is None:
            return None
        if len(workloads) < 2:
            return tuple(0.0 for _ in workloads)
        return tuple(
            self.correction.log_sd(gpu, w, _others(workloads, i), slowdown)
            for i, (w, slowdown) in enumerate(zip(workloads, predicted, strict=True))
        )

    def basis(self, gpu: str, workloads: Sequence[Workload]) -> tuple[Basis, ...]:
        """Per workload, where its predicted slowdown next to the others comes from."""
        if len(workloads) < 2:
            return (FROM_PRIOR,) * len(workloads)
        return tuple(self.correction.basis(gpu, w, _others(workloads, i)) for i, w in enumerate(workloads))

    def learn(self, observation: Observation) -> str | None:
        """Learn from one observation; why it was refused, or None when it was learned."""
        why = rejection(observation)
        if why is None and self.correction.seen(observation.sample_id):
            why = "already learned"
        if why is not None:
            return why
        together = [observation.workload, *observation.cotenants]
        predicted = self._prior_slowdowns(observation.gpu, together, observation.memory_mib)
        if predicted is None:
            return "the prior says these jobs cannot share a GPU"
        self.correction.add(
            observation.gpu,
            observation.workload,
            observation.cotenants,
            predicted=predicted[0],
            observed=observation.slowdown,
            sample_id=observation.sample_id,
        )
        return None

    def _prior_slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None
    ) -> tuple[float, ...] | None:
        """The prior's slowdowns, each job's busy fraction the observed one where there is one."""
        return self.prior.slowdowns(gpu, [self._observed(gpu, w) for w in workloads], memory_mib)

    def _observed(self, gpu: str, workload: Workload) -> Workload:
        """`workload` carrying the busy fraction and the peak memory its signature showed alone on
        `gpu`, where it did (the prior then reads them in place of its own)."""
        busy = self.correction.utilization(gpu, workload) if workload.busy is None else None
        peak = self.correction.peak_memory(gpu, workload) if workload.peak_memory_mib is None else None
        if busy is not None:
            # to a percent: the prior caches per busy fraction, and a running mean moves with every sample
            workload = dataclasses.replace(workload, busy=round(busy, 2))
        if peak is not None:
            workload = dataclasses.replace(workload, peak_memory_mib=float(round(peak)))
        return workload


def _strength(mean_square: float) -> float:
    """k = σ²/τ², τ² being the residuals' mean square less the noise σ², within STRENGTH_RANGE."""
    low, high = STRENGTH_RANGE
    prior_variance = max(mean_square - NOISE_SD**2, NOISE_SD**2 / high)
    return min(high, max(low, NOISE_SD**2 / prior_variance))


def _others(workloads: Sequence[Workload], i: int) -> tuple[Workload, ...]:
    return tuple(w for j, w in enumerate(workloads) if j != i)


def _log_excess(slowdown: float) -> float:
    """ln of a slowdown floored at 1: how much slower than alone, in log space."""
    return math.log(max(1.0, slowdown))


def _touch(table: OrderedDict[Any, _Entry], key: Any, cap: int, new: Callable[[], _Entry]) -> _Entry:
    """The entry for `key` (`new()` if absent), now the most recently updated; the oldest beyond `cap` go."""
    entry = table.pop(key, None) or new()
    table[key] = entry
    _trim(table, cap)
    return entry


def _trim(table: OrderedDict[Any, Any], cap: int) -> None:
    while len(table) > cap:
        table.popitem(last=False)


def _table(
    state: Mapping[str, Any],
    name: str,
    width: int,
    key: Callable[[list[Any], str], _Key],
    make: type[_Entry],
) -> OrderedDict[_Key, _Entry]:
    """A persisted table: rows of `width`, each a key and then `make`'s fields (a sample count, numbers)."""
    rows = state.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == width for r in rows):
        raise ValueError(f"{name}: expected a list of {width}-element rows")
    fields = len(dataclasses.fields(make))
    return OrderedDict((key(row, name), make(*_numbers(row, name, fields - 1))) for row in rows)


def _signature(values: Sequence[Any], name: str) -> Signature:
    model, batch, precision, features_key, framework = values
    if not (
        isinstance(model, str)
        and isinstance(batch, int)
        and isinstance(precision, str)
        and isinstance(framework, str)
    ):
        raise ValueError(f"{name}: bad job signature {list(values)!r}")
    return (model, batch, precision, str(features_key), framework)


_SIGNATURE_WIDTH = 5


def _job_key(row: list[Any], name: str) -> JobKey:
    return (str(row[0]), _signature(row[1 : 1 + _SIGNATURE_WIDTH], name))


def _pair_key(row: list[Any], name: str) -> PairKey:
    own, other = row[1 : 1 + _SIGNATURE_WIDTH], row[1 + _SIGNATURE_WIDTH : 1 + 2 * _SIGNATURE_WIDTH]
    return (str(row[0]), _signature(own, name), _signature(other, name))


# The signatures each row of a format-2 table holds after its GPU (4 values each: no framework).
_FORMAT_2_SIGNATURES = {"jobs": 1, "pairs": 2, "alone": 1, "busy": 1, "peaks": 1}


def _with_frameworks(state: Mapping[str, Any]) -> dict[str, Any]:
    """A format-2 state as format 3: each signature a PyTorch job's, the only framework a job could
    say it trained with then. Rows that are not lists are left for `_table` to refuse."""
    widened: dict[str, Any] = {**state, "format": FORMAT}
    for name, count in _FORMAT_2_SIGNATURES.items():
        rows = state.get(name, [])
        if isinstance(rows, list):
            widened[name] = [_with_framework(row, count) if isinstance(row, list) else row for row in rows]
    return widened


def _with_framework(row: list[Any], signatures: int) -> list[Any]:
    out = row[:1]
    for start in range(1, 1 + 4 * signatures, 4):
        out += [*row[start : start + 4], DEFAULT_FRAMEWORK]
    return out + row[1 + 4 * signatures :]


def _gpu_key(row: list[Any], name: str) -> str:
    return str(row[0])


def _numbers(row: list[Any], name: str, count: int) -> tuple[Any, ...]:
    """A row's sample count (> 0) and the `count` finite numbers after it, at its end."""
    samples, values = row[-count - 1], row[-count:]
    if not (
        isinstance(samples, int)
        and samples > 0
        and all(isinstance(v, int | float) and math.isfinite(v) for v in values)
    ):
        raise ValueError(f"{name}: bad evidence {row[-count - 1 :]!r} (samples > 0, finite numbers)")
    return (samples, *(float(v) for v in values))
