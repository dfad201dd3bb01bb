"""Online correction: the shipped slowdown model (the prior), corrected by what the cluster observes.

Pure: no clock, no I/O; callers hand in observations with their times and persist the state.

**What is learned.** For a job i observed next to its co-tenants on a GPU type, the residual is
r = ln(observed slowdown) − ln(prior's predicted slowdown), kept at two levels:
- per (GPU type, job signature): every sample of i, whatever its co-tenant;
- per (GPU type, job signature, co-tenant signature), "per pair where seen": samples of i next to
  exactly that one co-tenant (i's slowdown next to j; j's next to i is its own entry).
A signature is (model, batch size, precision, features key): what the predictor itself tells apart.

**Shrinkage toward the prior, empirical Bayes.** Each level is a normal mean under a normal prior: with n
samples of mean m the posterior mean is (n·m + k·μ) / (n + k), where k = σ²/τ² is the noise variance
of one sample over the variance of the prior's error: the prior counts as k samples. The job level
shrinks toward μ = 0 (the model is right), the pair level toward the job level. σ (`NOISE_SD`, 0.1 in
log space: an observed slowdown within about 10%) is assumed; τ² is estimated per GPU type from the
residuals themselves (their mean square less σ²), starting from k = `PRIOR_STRENGTH` (2) as if
`SPREAD_PSEUDO_SAMPLES` (10) residuals had shown that much, and kept within `STRENGTH_RANGE`. So a
model that has been right on this GPU keeps its predictions until evidence piles up, and one that is
far off (a GPU it never saw) gives way after one or two co-locations. `strength(gpu)` says k now. The
corrected slowdown is max(1, prior · e^c). A job with more than one co-tenant gets the job level only
(pairs are pairwise).

**Alone rates by signature.** An observed slowdown needs the job's rate alone. In a busy cluster a job
may never run alone (a new co-tenant joins as soon as one leaves), so the rate alone that jobs of the
same signature showed on the same GPU type stands in (`note_alone` / `alone_rate`; a running mean,
bounded like the job level). Jobs of one signature train the same graph at the same batch size; code
around it (data loading) may differ, which this assumes away.

**Forgetting.** A level's weight stops growing at `MAX_WEIGHT` samples (a running mean with weight
1/min(n, MAX_WEIGHT)), so a cluster that changes (a driver, a library) is relearned; the count reported
stays the true one.

**Bounded.** At most `MAX_PAIRS` pair and `MAX_JOBS` job (and alone-rate) entries, the least recently
updated dropped first; the ids of samples already learned (one co-location counts once, across restarts
too) are kept for the newest `MAX_SEEN`.

**Implausible samples are refused** (`rejection`): a job alone (no interference to learn), on a GPU
marked unhealthy, a sample taken before the job's current placement (a rate left over from an earlier
pod or GPU), or an observed slowdown outside `PLAUSIBLE_SLOWDOWN` (a broken rate, not interference).

**Explainable.** `basis(gpu, workloads)`: per workload, "observed" and how many samples stand behind its
correction (the pair's where seen, else the job's), or "prior" and 0.

**Persisted** as JSON (`to_dict` / `load`) tied to the prior it corrects (`prior_id`): residuals
against another model mean nothing, so a saved state for another prior is not loaded.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from horus_operator.prediction.api import OBSERVED, PRIOR, Basis, JobPrediction, Predictor, Workload

NOISE_SD = 0.1  # σ: one observed slowdown's error, in log space
PRIOR_STRENGTH = 2.0  # k = σ²/τ² before any residual is seen: the prior counts as this many samples
SPREAD_PSEUDO_SAMPLES = 10  # how many residuals that initial k is worth
STRENGTH_RANGE = (0.1, 20.0)  # k stays within: never all trust in one sample, never none
MAX_WEIGHT = 50  # samples; beyond it older evidence fades
MAX_PAIRS = 4096
MAX_JOBS = 1024
MAX_SEEN = 8192
PLAUSIBLE_SLOWDOWN = (0.5, 20.0)  # observed slowdowns outside are broken rates, not interference
FORMAT = 1  # of the persisted state

Signature = tuple[str, int, str, str]  # model, batch size, precision, features key
JobKey = tuple[str, Signature]
PairKey = tuple[str, Signature, Signature]


def signature(workload: Workload) -> Signature:
    return (workload.model, workload.batch_size, workload.precision, workload.features_key)


@dataclass(frozen=True)
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


@dataclass
class _Evidence:
    samples: int = 0
    mean: float = 0.0  # mean log residual, weighting the newest `max_weight` samples

    def add(self, residual: float, max_weight: int) -> None:
        self.samples += 1
        self.mean += (residual - self.mean) / min(self.samples, max_weight)

    def shrunk(self, toward: float, strength: float, max_weight: int) -> float:
        weight = min(self.samples, max_weight)
        return (weight * self.mean + strength * toward) / (weight + strength)


def _initial_mean_square() -> float:
    """σ² + τ₀², with τ₀² = σ²/PRIOR_STRENGTH."""
    return NOISE_SD**2 * (1 + 1 / PRIOR_STRENGTH)


class Correction:
    """The learned residuals. Updated from one thread; read from any (single dict lookups)."""

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
        self._jobs: OrderedDict[JobKey, _Evidence] = OrderedDict()
        self._pairs: OrderedDict[PairKey, _Evidence] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._alone: OrderedDict[JobKey, _Evidence] = OrderedDict()  # steps/s alone (`mean`)
        # per GPU type: the residuals' mean square against the prior (σ² + τ²; `mean` of an _Evidence)
        self._spread: dict[str, _Evidence] = {}
        self._strength: dict[str, float] = {}
        self.revision = 0  # bumped on every change: predictions cached against an older one are stale

    def __len__(self) -> int:
        return len(self._jobs) + len(self._pairs)

    def seen(self, sample_id: str) -> bool:
        return sample_id in self._seen

    def note_alone(self, gpu: str, workload: Workload, steps_per_second: float) -> None:
        """A job of `workload`'s signature was seen running alone on `gpu` at this rate."""
        if math.isfinite(steps_per_second) and steps_per_second > 0:
            key = (gpu, signature(workload))
            _touch(self._alone, key, self._caps[0]).add(steps_per_second, self.max_weight)

    def alone_rate(self, gpu: str, workload: Workload) -> float | None:
        """What jobs of `workload`'s signature showed alone on `gpu` (steps/s), if any was seen."""
        found = self._alone.get((gpu, signature(workload)))
        return found.mean if found else None

    def strength(self, gpu: str) -> float:
        """k on `gpu`: how many samples the prior is worth there now."""
        return self._strength.get(gpu, PRIOR_STRENGTH)

    def add(
        self, gpu: str, workload: Workload, cotenants: Sequence[Workload], residual: float, sample_id: str
    ) -> None:
        spread = self._spread.setdefault(gpu, _Evidence(0, _initial_mean_square()))
        spread.samples += 1
        weight = min(spread.samples + SPREAD_PSEUDO_SAMPLES, self.max_weight)
        spread.mean += (residual**2 - spread.mean) / weight
        self._strength[gpu] = _strength(spread.mean)
        own = signature(workload)
        _touch(self._jobs, (gpu, own), self._caps[0]).add(residual, self.max_weight)
        if len(cotenants) == 1:
            _touch(self._pairs, (gpu, own, signature(cotenants[0])), self._caps[1]).add(
                residual, self.max_weight
            )
        self._seen[sample_id] = None
        self._seen.move_to_end(sample_id)
        _trim(self._seen, self._caps[2])
        self.revision += 1

    def log_factor(self, gpu: str, workload: Workload, cotenants: Sequence[Workload]) -> float:
        """c: the corrected slowdown is the prior's times e^c."""
        own, strength = signature(workload), self.strength(gpu)
        job = self._jobs.get((gpu, own))
        level = job.shrunk(0.0, strength, self.max_weight) if job else 0.0
        pair = self._pairs.get((gpu, own, signature(cotenants[0]))) if len(cotenants) == 1 else None
        return pair.shrunk(level, strength, self.max_weight) if pair else level

    def basis(self, gpu: str, workload: Workload, cotenants: Sequence[Workload]) -> Basis:
        own = signature(workload)
        pair = self._pairs.get((gpu, own, signature(cotenants[0]))) if len(cotenants) == 1 else None
        evidence = pair or self._jobs.get((gpu, own))
        return Basis(OBSERVED, evidence.samples) if evidence else Basis(PRIOR, 0)

    # -- persistence -------------------------------------------------------------------------------
    def to_dict(self, prior_id: str) -> dict[str, Any]:
        """Oldest first, so loading keeps which entries go first."""
        return {
            "format": FORMAT,
            "prior": prior_id,
            "spread": [[gpu, e.samples, e.mean] for gpu, e in self._spread.items()],
            "jobs": [[gpu, *own, e.samples, e.mean] for (gpu, own), e in self._jobs.items()],
            "pairs": [[gpu, *own, *other, e.samples, e.mean] for (gpu, own, other), e in self._pairs.items()],
            "seen": list(self._seen),
            "alone": [[gpu, *own, e.samples, e.mean] for (gpu, own), e in self._alone.items()],
        }

    def load(self, state: Mapping[str, Any], prior_id: str) -> bool:
        """Replace this state with a saved one; False (unchanged) when it corrects another prior.
        `ValueError` naming the field on a malformed state."""
        if state.get("format") != FORMAT:
            raise ValueError(f"format: {state.get('format')!r}, expected {FORMAT}")
        if state.get("prior") != prior_id:
            return False
        jobs = OrderedDict((_job_key(row, "jobs"), _evidence(row, "jobs")) for row in _rows(state, "jobs", 7))
        pairs = OrderedDict((_pair_key(row), _evidence(row, "pairs")) for row in _rows(state, "pairs", 11))
        spread = {str(row[0]): _evidence(row, "spread") for row in _rows(state, "spread", 3)}
        alone = OrderedDict(
            (_job_key(row, "alone"), _evidence(row, "alone")) for row in _rows(state, "alone", 7)
        )
        seen = state.get("seen", [])
        if not isinstance(seen, list) or not all(isinstance(s, str) for s in seen):
            raise ValueError("seen: expected a list of sample ids")
        self._jobs, self._pairs, self._alone = jobs, pairs, alone
        self._spread = spread
        self._strength = {gpu: _strength(e.mean) for gpu, e in spread.items()}
        self._seen = OrderedDict.fromkeys(seen)
        for table, cap in (
            (self._jobs, self._caps[0]),
            (self._alone, self._caps[0]),
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
        return self.prior.job(workload, gpu)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        predicted = self.prior.slowdowns(gpu, workloads, memory_mib)
        if predicted is None or len(workloads) < 2 or not len(self.correction):
            return predicted
        return tuple(
            max(1.0, slowdown * math.exp(self.correction.log_factor(gpu, w, _others(workloads, i))))
            for i, (w, slowdown) in enumerate(zip(workloads, predicted, strict=True))
        )

    def basis(self, gpu: str, workloads: Sequence[Workload]) -> tuple[Basis, ...]:
        """Per workload, where its predicted slowdown next to the others comes from."""
        if len(workloads) < 2:
            return tuple(Basis(PRIOR, 0) for _ in workloads)
        return tuple(self.correction.basis(gpu, w, _others(workloads, i)) for i, w in enumerate(workloads))

    def learn(self, observation: Observation) -> str | None:
        """Learn from one observation; why it was refused, or None when it was learned."""
        why = rejection(observation)
        if why is None and self.correction.seen(observation.sample_id):
            why = "already learned"
        if why is not None:
            return why
        together = [observation.workload, *observation.cotenants]
        predicted = self.prior.slowdowns(observation.gpu, together, observation.memory_mib)
        if predicted is None:
            return "the prior says these jobs cannot share a GPU"
        residual = math.log(max(1.0, observation.slowdown)) - math.log(max(1.0, predicted[0]))
        self.correction.add(
            observation.gpu, observation.workload, observation.cotenants, residual, observation.sample_id
        )
        return None


def _strength(mean_square: float) -> float:
    """k = σ²/τ², τ² being the residuals' mean square less the noise σ², within STRENGTH_RANGE."""
    low, high = STRENGTH_RANGE
    prior_variance = max(mean_square - NOISE_SD**2, NOISE_SD**2 / high)
    return min(high, max(low, NOISE_SD**2 / prior_variance))


def _others(workloads: Sequence[Workload], i: int) -> tuple[Workload, ...]:
    return tuple(w for j, w in enumerate(workloads) if j != i)


def _touch(table: OrderedDict[Any, _Evidence], key: Any, cap: int) -> _Evidence:
    """The entry for `key` (new if absent), now the most recently updated; the oldest beyond `cap` go."""
    evidence = table.pop(key, None) or _Evidence()
    table[key] = evidence
    _trim(table, cap)
    return evidence


def _trim(table: OrderedDict[Any, Any], cap: int) -> None:
    while len(table) > cap:
        table.popitem(last=False)


def _rows(state: Mapping[str, Any], name: str, width: int) -> list[list[Any]]:
    rows = state.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == width for r in rows):
        raise ValueError(f"{name}: expected a list of {width}-element rows")
    return rows


def _signature(values: Sequence[Any], name: str) -> Signature:
    model, batch, precision, features_key = values
    if not (isinstance(model, str) and isinstance(batch, int) and isinstance(precision, str)):
        raise ValueError(f"{name}: bad job signature {list(values)!r}")
    return (model, batch, precision, str(features_key))


def _job_key(row: list[Any], name: str) -> JobKey:
    return (str(row[0]), _signature(row[1:5], name))


def _pair_key(row: list[Any]) -> PairKey:
    return (str(row[0]), _signature(row[1:5], "pairs"), _signature(row[5:9], "pairs"))


def _evidence(row: list[Any], name: str) -> _Evidence:
    samples, mean = row[-2], row[-1]
    if not (
        isinstance(samples, int) and samples > 0 and isinstance(mean, int | float) and math.isfinite(mean)
    ):
        raise ValueError(f"{name}: bad evidence {row[-2:]!r} (samples > 0, finite mean)")
    return _Evidence(samples, float(mean))
