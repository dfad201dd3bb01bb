"""Moving running jobs: which job to move where, when its slowdown breaks its limit or a GPU frees up.

One move mechanism serves two triggers (issue 16 item 2, issue 17 item 1). The planner is pure: the
caller (the operator's loop, the simulator's engine) says what it knows of each running job
(`Mobility`), and executes the `Move`s it gets back (the job stops, checkpointing, and restarts on the
target GPU; it loses its grace period plus a restart cost in progress).

1. **Over its limit** (`Trigger.OVER_LIMIT`). A job whose *observed* slowdown has stayed above its maxSlowdown
   for as long as the observation noise asks (`MoveSettings.violation_wait_s`: a rate reading is
   noisy, so the nearer the limit the more readings it takes to be sure; at most `over_limit_for_s`)
   moves to a GPU where it and its new co-tenants are *predicted*
   within their limits: an empty GPU where one fits, else the shared GPU that slows it least. The
   predictions are the corrected ones (`prediction/correction.py`): the observation that the pairing
   is bad is what the correction learned from.
2. **Re-pack** (`Trigger.REPACK`). While nothing waits (a waiting job would take the empty GPU: the cycle ran
   first and left it empty only because nothing waiting could use it), a job sharing a GPU moves to an
   empty one when the predicted gain in finishing time exceeds the move's cost:
   `remaining × (current slowdown − 1) + Σ co-tenants min(their remaining, its remaining) ×
   (their current slowdown − their slowdown without it) > grace period + restart cost`. Remaining work
   is in seconds alone (`JobRequest.remaining_s`, or `Mobility.remaining_s` where the caller knows
   better); a job of unknown remaining work is not re-packed (its gain is unknown), and a co-tenant of
   unknown remaining work counts no gain. A co-tenant gains only while the mover would still have run
   beside it, hence the min. Current slowdowns are the observed ones where known, else predicted.

Never moved: a job that does not allow it (`Mobility.allowed`, DLJob `spec.migration.allowed`), a
multi-GPU job (it holds whole GPUs, and no co-tenant slows it), a job moved less than
`cooldown_s` ago or `max_moves_per_job` times already. At most one move per job per plan, and one job
leaves a shared GPU per plan (its co-tenant is then alone). Deterministic: candidates are taken by
largest need (how far over the limit, then the largest gain), then by key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from horus_operator.placement.base import TOLERANCE, Limits, PlacementCall
from horus_operator.placement.index import ClusterIndex, GpuSlot
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import Assignment, ClusterSnapshot, RunningJob
from horus_operator.prediction.correction_estimators import NOISE_SD


class Trigger(StrEnum):
    """Why a job moves (the module's docstring: 1 and 2)."""

    OVER_LIMIT = "over-limit"
    REPACK = "repack"


# One-sided 99 %: a job truly at its limit moves on noise alone at most once in a hundred judgements.
CONFIDENCE_Z = 2.33


@dataclass(frozen=True)
class MoveSettings:
    """- `restart_cost_s`: progress lost by a move beyond the grace period (pod start, data loading,
      warm-up, the work since the last checkpoint): charged against a re-pack's gain, and by the
      simulator as time without progress.
    - `cooldown_s`: at most one move per job per this many seconds.
    - `max_moves_per_job`: moves over a job's life.
    - `over_limit_for_s`: the longest an observed slowdown must stay above the job's maxSlowdown before
      the job is moved; `violation_wait_s` says how long it must for a given reading.
    - `settle_s`: the first readings after a change of co-tenants still average the old co-tenancy's
      rate (the agent's rate window); `reading_every_s`: how often a new rate is read (the agent's
      publish interval); `noise_sd`: one reading's error in log space (`correction_estimators.NOISE_SD`).
    """

    restart_cost_s: float = 120.0
    cooldown_s: float = 1800.0
    max_moves_per_job: int = 3
    over_limit_for_s: float = 300.0
    settle_s: float = 60.0
    reading_every_s: float = 10.0
    noise_sd: float = NOISE_SD

    def violation_wait_s(self, observed: float, limit: float) -> float:
        """How long `observed` must have held above `limit` before the job moves: the settling time, then
        as many readings as make the mean's excess over the limit `CONFIDENCE_Z` standard errors
        (n = ⌈(z·σ / ln(observed/limit))²⌉): one reading at 1.3× the limit, about 23 at 1.05×,
        capped at `over_limit_for_s`. Infinite at or under the limit."""
        if observed <= limit + TOLERANCE:
            return math.inf
        readings = math.ceil((CONFIDENCE_Z * self.noise_sd / math.log(observed / limit)) ** 2)
        return min(self.over_limit_for_s, self.settle_s + max(1, readings) * self.reading_every_s)


@dataclass(frozen=True)
class Mobility:
    """What the caller knows of one running job, beyond its `RunningJob`."""

    allowed: bool = False
    grace_period_s: float = 30.0
    # The owner's limit; None: the request's (the simulator's requests may carry the makespan guard's cap)
    max_slowdown: float | None = None
    observed_slowdown: float | None = None  # its rate alone / its rate now, where measured
    observed_since: float | None = None  # since when that slowdown holds (its current co-tenants)
    remaining_s: float | None = None  # seconds of work left alone; None: the request's `remaining_s`
    moves: int = 0  # done so far
    last_move_at: float | None = None


@dataclass(frozen=True)
class Move:
    job: str
    source: RunningJob  # where it runs now
    target: Assignment  # where it goes, with the predictions there
    trigger: Trigger
    reason: str  # one sentence, for an Event and status.moves
    cost_s: float  # grace period + restart cost: progress the move loses


def plan_moves(
    snapshot: ClusterSnapshot,
    predictions: CachedPredictions,
    mobility: Mapping[str, Mobility],
    settings: MoveSettings,
    *,
    limits: Limits | None = None,
    waiting: bool = False,
) -> list[Move]:
    """The moves to make now on `snapshot` (the cluster with this round's placements in it). `waiting`:
    some job still waits for a GPU (then nothing is re-packed). A borrowed `snapshot.index` comes back
    with the same jobs on the same GPUs (a moved job re-added last in its GPU's tenant list)."""
    index, _ = ClusterIndex.of(snapshot)
    view = dataclasses.replace(snapshot, index=index)
    planner = _Planner(view, index, predictions, mobility, settings)
    try:
        with PlacementCall(view, predictions, limits or Limits()) as call:
            planner.over_limit(call)
            if not waiting:
                planner.repack(call)
    finally:  # the call took the moved jobs off their targets: put them back where they run
        for move in reversed(planner.moves):
            index.add(move.source)
    return planner.moves


def retarget(
    snapshot: ClusterSnapshot,
    predictions: CachedPredictions,
    job: RunningJob,
    *,
    limits: Limits | None = None,
    reason: str = "",
) -> Assignment | None:
    """`job` placed where a move chose (`job.node`, `job.gpu_indices`), if it still fits there: every
    GPU usable and with room, and everyone on them predicted within their limits; None otherwise (the
    job is then placed again by the cycle). For a caller that creates the moved job's new pod only once
    the old one is gone (the operator), by when the target may have changed."""
    index = ClusterIndex.build(snapshot)
    slots = [index.slots.get((job.node, i)) for i in job.gpu_indices]
    if not slots or any(slot is None or not slot.usable for slot in slots):
        return None
    present = [slot for slot in slots if slot is not None]
    with PlacementCall(dataclasses.replace(snapshot, index=index), predictions, limits or Limits()) as call:
        if any(call.room(job.request, slot) for slot in present):
            return None
        if len(present) == 1 and not _within_limits(call, present[0], job, {}):
            return None
        return call.place(job.request, present, reason)


class _Planner:
    def __init__(
        self,
        view: ClusterSnapshot,
        index: ClusterIndex,
        predictions: CachedPredictions,
        mobility: Mapping[str, Mobility],
        settings: MoveSettings,
    ) -> None:
        self.now = view.now
        self.index = index
        self.predictions = predictions
        self.mobility = mobility
        self.settings = settings
        self.moves: list[Move] = []
        self._touched: set[tuple[str, int]] = set()  # GPUs a move of this plan left or joined

    def over_limit(self, call: PlacementCall) -> None:
        candidates = []
        for job, known in self._movable():
            limit = _limit(job, known)
            observed, since = known.observed_slowdown, known.observed_since
            if observed is None or since is None or observed <= limit + TOLERANCE:
                continue
            if self.now - since >= self.settings.violation_wait_s(observed, limit):
                candidates.append((-observed / limit, job.request.key, job))
        for _, key, job in sorted(candidates, key=lambda c: c[:2]):
            if self._slot_of(job).key in self._touched:
                continue
            target = self._best_target(call, job)
            if target is not None:
                observed = self.mobility[key].observed_slowdown or 0.0
                limit = _limit(job, self.mobility[key])
                why = f"observed slowdown {observed:.2f}x above maxSlowdown {limit:.2f}"
                self._move(call, job, target, Trigger.OVER_LIMIT, why)

    def repack(self, call: PlacementCall) -> None:
        candidates = []
        for job, known in self._movable():
            slot = self._slot_of(job)
            if len(slot.tenants) < 2:
                continue
            gain = self._separation_gain(job, slot)
            cost = self._cost(known)
            if gain is not None and gain > cost:
                candidates.append((-gain, job.request.key, job, gain))
        for _, _, job, gain in sorted(candidates, key=lambda c: c[:2]):
            if self._slot_of(job).key in self._touched:
                continue
            target = next(self._empty_slots(call, job), None)
            if target is not None:
                cost = self._cost(self.mobility[job.request.key])
                why = f"re-packed onto a free GPU: predicted {gain / 60:.0f} min sooner, for a "
                why += f"{cost / 60:.1f} min move"
                self._move(call, job, target, Trigger.REPACK, why)

    # -- candidates --------------------------------------------------------------------------------
    def _movable(self) -> Iterator[tuple[RunningJob, Mobility]]:
        settings = self.settings
        for key in sorted(self.mobility):
            known = self.mobility[key]
            job = self.index.jobs.get(key)
            if job is None or not known.allowed or len(job.gpu_indices) != 1:
                continue
            if known.moves >= settings.max_moves_per_job:
                continue
            if known.last_move_at is not None and self.now - known.last_move_at < settings.cooldown_s:
                continue
            yield job, known

    def _slot_of(self, job: RunningJob) -> GpuSlot:
        return self.index.slots[(job.node, job.gpu_indices[0])]

    def _cost(self, known: Mobility) -> float:
        return known.grace_period_s + self.settings.restart_cost_s

    def _best_target(self, call: PlacementCall, job: RunningJob) -> GpuSlot | None:
        """An empty GPU where one fits; else the shared GPU where everyone stays within their limits
        and the job is slowed least."""
        empty = next(self._empty_slots(call, job), None)
        if empty is not None:
            return empty
        best: tuple[float, GpuSlot] | None = None
        for group in self.index.shared_groups(below=call.limits.max_jobs_per_gpu):
            for slot in group.slots.values():
                if slot.key in self._touched or call.room(job.request, slot):
                    continue
                slowdowns = _slowdowns_with(call, slot, job)
                if slowdowns is None or not _within_limits(call, slot, job, self.mobility):
                    continue
                if best is None or slowdowns[-1] < best[0] - TOLERANCE:
                    best = (slowdowns[-1], slot)
        return best[1] if best else None

    def _empty_slots(self, call: PlacementCall, job: RunningJob) -> Iterator[GpuSlot]:
        for _node, empty in self.index.nodes_with_empty(1):
            for slot in empty:
                if slot.key not in self._touched and call.room(job.request, slot) is None:
                    yield slot

    # -- gains -------------------------------------------------------------------------------------
    def _separation_gain(self, job: RunningJob, slot: GpuSlot) -> float | None:
        """Predicted seconds sooner that `job` and its co-tenants finish if `job` leaves `slot` for an
        empty GPU; None when its remaining work is unknown."""
        remaining = self._remaining(job)
        if not remaining:
            return None
        current = self._current(slot)
        gain = remaining * (current[job.request.key] - 1.0)
        others = [tenant for tenant in slot.tenants if tenant.request.key != job.request.key]
        after = self.predictions.slowdowns(
            slot.product, [t.request.workload for t in others], slot.gpu.memory_mib
        ) or (1.0,) * len(others)
        for tenant, slowdown in zip(others, after, strict=True):
            theirs = self._remaining(tenant)
            if theirs:
                gain += min(theirs, remaining) * (current[tenant.request.key] - slowdown)
        return gain

    def _remaining(self, job: RunningJob) -> float | None:
        known = self.mobility.get(job.request.key)
        given = known.remaining_s if known is not None else None
        return given if given is not None else job.request.remaining_s

    def _current(self, slot: GpuSlot) -> dict[str, float]:
        """Each tenant's slowdown now: observed where known, else predicted."""
        predicted = self.predictions.slowdowns(
            slot.product, [t.request.workload for t in slot.tenants], slot.gpu.memory_mib
        ) or (1.0,) * len(slot.tenants)
        current = {}
        for tenant, slowdown in zip(slot.tenants, predicted, strict=True):
            known = self.mobility.get(tenant.request.key)
            observed = known.observed_slowdown if known is not None else None
            current[tenant.request.key] = observed if observed is not None else slowdown
        return current

    # -- the move ----------------------------------------------------------------------------------
    def _move(
        self, call: PlacementCall, job: RunningJob, target: GpuSlot, trigger: Trigger, why: str
    ) -> None:
        source = self._slot_of(job)
        self.index.remove(job.request.key)
        assignment = call.place(job.request, [target], why)
        self._touched.update((source.key, target.key))
        cost = self._cost(self.mobility[job.request.key])
        self.moves.append(Move(job.request.key, job, assignment, trigger, why, cost))


def _limit(job: RunningJob, known: Mobility | None) -> float:
    given = known.max_slowdown if known is not None else None
    return given if given is not None else job.request.max_slowdown


def _slowdowns_with(call: PlacementCall, slot: GpuSlot, job: RunningJob) -> tuple[float, ...] | None:
    together = [t.request.workload for t in slot.tenants] + [job.request.workload]
    return call.predictions.slowdowns(slot.product, together, slot.gpu.memory_mib)


def _within_limits(
    call: PlacementCall, slot: GpuSlot, job: RunningJob, mobility: Mapping[str, Mobility]
) -> bool:
    """Whether `job` joining `slot` keeps everyone there predicted within their limits, with the margin
    placement keeps (`Limits.admits`): a move must not land where a placement would not."""
    slowdowns = _slowdowns_with(call, slot, job)
    if slowdowns is None:
        return False
    everyone = [*slot.tenants, job]
    together = [tenant.request.workload for tenant in everyone]
    spreads = call.predictions.spreads(slot.product, together, slot.gpu.memory_mib)
    return all(
        call.limits.admits(slowdown, _limit(tenant, mobility.get(tenant.request.key)), spread)
        for tenant, slowdown, spread in zip(everyone, slowdowns, spreads, strict=True)
    )
