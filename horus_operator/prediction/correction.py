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

**The runtime's floor, learned.** The memory model's per-process floor (CUDA context, library
workspaces, allocator cache: `memory.process_floor_mib`) is a table per GPU generation and runtime,
many rows borrowed from a nearer generation. Each reading of a job alone (`note_memory_alone`) less the
least its own model could hold (the prior's `min_memory_mib`: weights and gradients, a fit from below
that no measured peak is under) is at least its runtime's floor on that GPU type; the least such bound
over the readings is kept per (GPU type, runtime) (`note_floor` / `process_floor`) and, once
`FLOOR_MIN_SAMPLES` readings stand behind it, handed to the prior (`Workload.process_floor_mib`), which
reads it in place of the table's within [the table's, `memory.LEARNED_FLOOR_MAX_RAISE` × it]: never
below the default, which stays the conservative answer until the cluster shows more. A job's own
observed peak still wins over the prediction the floor is part of.

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
against another model mean nothing, so a saved state for another prior is not loaded. The learned
floors (`floors`, added in format 3; absent: none learned) ride with it. `FORMAT` 3 (the GPU
level, x and y per entry, the framework in each signature): a state of format 2 is read with every
signature a PyTorch job's (the only framework then); one of format 1 is refused with a `ValueError` that
says so (the operator logs it and starts from the prior).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

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
from horus_operator.prediction.correction_estimators import (
    FLOOR_MIN_SAMPLES,
    MAX_WEIGHT,
    NOISE_SD,
    PRIOR_STRENGTH,
    SCALE_SD,
    SPREAD_PSEUDO_SAMPLES,
    Evidence,
    Peak,
    Residuals,
    RuntimeFloor,
    Scale,
    initial_mean_square,
    log_excess,
    strength_of,
)
from horus_operator.prediction.correction_state import (
    FORMAT,
    JobKey,
    PairKey,
    RuntimeKey,
    Signature,
    gpu_key,
    job_key,
    pair_key,
    read_table,
    runtime_key,
    signature,
    touch,
    trim,
    with_frameworks,
)

MAX_PAIRS = 4096
MAX_JOBS = 1024
MAX_SEEN = 8192
PLAUSIBLE_SLOWDOWN = (0.5, 20.0)  # observed slowdowns outside are broken rates, not interference


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
        self._scales: dict[str, Scale] = {}  # per GPU type (a handful: not bounded)
        self._jobs: OrderedDict[JobKey, Residuals] = OrderedDict()
        self._pairs: OrderedDict[PairKey, Residuals] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._alone: OrderedDict[JobKey, Evidence] = OrderedDict()  # steps/s alone (`mean`)
        self._busy: OrderedDict[JobKey, Evidence] = OrderedDict()  # GPU busy fraction alone (`mean`)
        self._peaks: OrderedDict[JobKey, Peak] = OrderedDict()  # GPU memory alone, the largest seen
        # per (GPU type, runtime): a bound on its process floor from jobs seen alone (a handful: not bounded)
        self._floors: dict[RuntimeKey, RuntimeFloor] = {}
        # per GPU type: the residuals' mean square against the scaled prior (σ² + τ²; `mean` of an Evidence)
        self._spread: dict[str, Evidence] = {}
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
            touch(self._alone, key, self._caps[0], Evidence).add(steps_per_second, self.max_weight)

    def alone_rate(self, gpu: str, workload: Workload) -> float | None:
        """What jobs of `workload`'s signature showed alone on `gpu` (steps/s), if any was seen."""
        found = self._alone.get((gpu, signature(workload)))
        return found.mean if found else None

    def note_utilization(self, gpu: str, workload: Workload, busy: float) -> None:
        """A job of `workload`'s signature was seen keeping `gpu` this busy (0..1) while alone on it."""
        if math.isfinite(busy) and 0.0 <= busy <= 1.0:
            key = (gpu, signature(workload))
            touch(self._busy, key, self._caps[0], Evidence).add(busy, self.max_weight)
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
            entry = touch(self._peaks, key, self._caps[0], Peak)
            before = entry.mib
            entry.add(mib)
            if entry.mib != before:
                self.revision += 1

    def peak_memory(self, gpu: str, workload: Workload) -> float | None:
        """The largest GPU memory (MiB) jobs of `workload`'s signature held alone on `gpu`, if seen."""
        found = self._peaks.get((gpu, signature(workload)))
        return found.mib if found else None

    def note_floor(self, gpu: str, runtime: str, bound_mib: float) -> None:
        """A job of `runtime` held `bound_mib` more alone on `gpu` than its own model could: at least
        the runtime's floor there. A bound at or below 0 says nothing of it (a reading taken before the
        job's model was on the GPU)."""
        if not (math.isfinite(bound_mib) and bound_mib > 0.0):
            return
        before = self.process_floor(gpu, runtime)
        self._floors.setdefault((gpu, runtime), RuntimeFloor()).add(bound_mib)
        if self.process_floor(gpu, runtime) != before:
            self.revision += 1

    def process_floor(self, gpu: str, runtime: str) -> float | None:
        """What any `runtime` process holds on `gpu` as the cluster showed it (the least bound seen),
        once FLOOR_MIN_SAMPLES readings stand behind it; None before (the table's default stands)."""
        found = self._floors.get((gpu, runtime))
        return found.mib if found is not None and found.samples >= FLOOR_MIN_SAMPLES else None

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
        x, y = log_excess(predicted), log_excess(observed)
        residual = y - self.scale(gpu) * x  # against the scaled prior, before this sample
        spread = self._spread.setdefault(gpu, Evidence(0, initial_mean_square()))
        spread.samples += 1
        weight = min(spread.samples + SPREAD_PSEUDO_SAMPLES, self.max_weight)
        spread.mean += (residual**2 - spread.mean) / weight
        self._strength[gpu] = strength_of(spread.mean)
        scale = self._scales.setdefault(gpu, Scale())
        scale.add(x, y, self.max_weight)
        self._scale[gpu] = scale.posterior(spread.mean, self.max_weight)
        own = signature(workload)
        touch(self._jobs, (gpu, own), self._caps[0], Residuals).add(x, y, self.max_weight)
        if len(cotenants) == 1:
            pair = touch(self._pairs, (gpu, own, signature(cotenants[0])), self._caps[1], Residuals)
            pair.add(x, y, self.max_weight)
        self._seen[sample_id] = None
        self._seen.move_to_end(sample_id)
        trim(self._seen, self._caps[2])
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
        return scale * log_excess(predicted) + level

    def log_sd(self, gpu: str, workload: Workload, cotenants: Sequence[Workload], predicted: float) -> float:
        """Posterior standard deviation of `log_slowdown` (module docstring, "Uncertainty")."""
        own = signature(workload)
        level = self._pair(gpu, own, cotenants) or self._jobs.get((gpu, own))
        samples = min(level.samples, self.max_weight) if level else 0
        scale_variance = self._scale.get(gpu, (1.0, SCALE_SD**2))[1]
        return math.sqrt(
            log_excess(predicted) ** 2 * scale_variance + NOISE_SD**2 / (samples + self.strength(gpu))
        )

    def basis(self, gpu: str, workload: Workload, cotenants: Sequence[Workload]) -> Basis:
        own = signature(workload)
        evidence = self._pair(gpu, own, cotenants) or self._jobs.get((gpu, own)) or self._scales.get(gpu)
        return Basis(OBSERVED, evidence.samples) if evidence else FROM_PRIOR

    def _pair(self, gpu: str, own: Signature, cotenants: Sequence[Workload]) -> Residuals | None:
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
            "floors": [[gpu, runtime, e.samples, e.mib] for (gpu, runtime), e in self._floors.items()],
        }

    def load(self, state: Mapping[str, Any], prior_id: str) -> bool:
        """Replace this state with a saved one; False (unchanged) when it corrects another prior.
        `ValueError` naming the field on a malformed state."""
        if state.get("format") == 2:
            state = with_frameworks(state)
        if state.get("format") != FORMAT:
            older = " (saved before the GPU-level scale: it is relearned)" if state.get("format") == 1 else ""
            raise ValueError(f"format: {state.get('format')!r}, expected {FORMAT}{older}")
        if state.get("prior") != prior_id:
            return False
        jobs = read_table(state, "jobs", 9, job_key, Residuals)
        pairs = read_table(state, "pairs", 14, pair_key, Residuals)
        scales = dict(read_table(state, "scales", 4, gpu_key, Scale))
        spread = dict(read_table(state, "spread", 3, gpu_key, Evidence))
        alone = read_table(state, "alone", 8, job_key, Evidence)
        busy = read_table(state, "busy", 8, job_key, Evidence)
        if not all(0.0 <= e.mean <= 1.0 for e in busy.values()):
            raise ValueError("busy: a busy fraction outside 0-1")
        peaks = read_table(state, "peaks", 8, job_key, Peak)  # absent in states saved before it: none
        if not all(e.mib > 0.0 for e in peaks.values()):
            raise ValueError("peaks: a peak memory at or below 0 MiB")
        floors = dict(read_table(state, "floors", 4, runtime_key, RuntimeFloor))  # absent before: none
        if not all(e.mib > 0.0 for e in floors.values()):
            raise ValueError("floors: a process floor at or below 0 MiB")
        seen = state.get("seen", [])
        if not isinstance(seen, list) or not all(isinstance(s, str) for s in seen):
            raise ValueError("seen: expected a list of sample ids")
        self._jobs, self._pairs, self._alone, self._busy, self._scales = jobs, pairs, alone, busy, scales
        self._peaks, self._floors = peaks, floors
        self._spread = spread
        self._strength = {gpu: strength_of(e.mean) for gpu, e in spread.items()}
        self._scale = {
            gpu: s.posterior(spread[gpu].mean if gpu in spread else initial_mean_square(), self.max_weight)
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
            trim(table, cap)
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

    def note_memory_alone(self, gpu: str, workload: Workload, mib: float) -> None:
        """A job of `workload`'s signature held `mib` of GPU memory (the process's, as the node agent
        reads it) alone on `gpu`: its signature's peak there, and a bound on its runtime's floor there,
        the reading less the least its own model could hold (`_least_memory_mib`)."""
        self.correction.note_peak_memory(gpu, workload, mib)
        self.correction.note_floor(gpu, workload.framework, mib - self._least_memory_mib(gpu, workload))

    def _least_memory_mib(self, gpu: str, workload: Workload) -> float:
        """The least `workload`'s model could hold on `gpu` by the prior (`JobPrediction.min_memory_mib`);
        0 where the prior states none or cannot count the job (a model or GPU it does not know): the
        whole reading then bounds the floor, which it still does."""
        as_predicted = dataclasses.replace(workload, peak_memory_mib=None, process_floor_mib=None)
        try:
            least = self.prior.job(as_predicted, gpu).min_memory_mib
        except (KeyError, ValueError):  # unknown model or GPU: `UnknownModelError` is a ValueError
            return 0.0
        return least or 0.0

    def _observed(self, gpu: str, workload: Workload) -> Workload:
        """`workload` carrying the busy fraction and the peak memory its signature showed alone on
        `gpu`, and its runtime's floor there, where the cluster showed them (the prior then reads them
        in place of its own)."""
        busy = self.correction.utilization(gpu, workload) if workload.busy is None else None
        peak = self.correction.peak_memory(gpu, workload) if workload.peak_memory_mib is None else None
        if workload.process_floor_mib is None:
            floor = self.correction.process_floor(gpu, workload.framework)
            if floor is not None:
                workload = dataclasses.replace(workload, process_floor_mib=float(round(floor)))
        if busy is not None:
            # to a percent: the prior caches per busy fraction, and a running mean moves with every sample
            workload = dataclasses.replace(workload, busy=round(busy, 2))
        if peak is not None:
            workload = dataclasses.replace(workload, peak_memory_mib=float(round(peak)))
        return workload


def _others(workloads: Sequence[Workload], i: int) -> tuple[Workload, ...]:
    return tuple(w for j, w in enumerate(workloads) if j != i)
