"""Preemption under the `las` queue order: Tiresias' discretized two-dimensional LAS (NSDI'19).

Without preemption `las` is `fifo`: every waiting job has attained nothing, so the least attained
service first is the first come first. With it, as in Tiresias:
- a job's attained GPU-service is GPUs × the time it has run (`Service`), over all its runs; the levels
  (`queueorder.LAS_LEVELS_GPU_S`, below one GPU-hour, below ten, above) are its priority queues, and a
  running job that crosses a threshold is demoted (its level is read from its attained service now);
- a waiting job the cycle could not place may preempt running jobs of a *higher* level (more attained
  service, a lower queue) and of no higher priority, when stopping them empties enough whole GPUs on one
  node for it (`plan_preemptions`). The preempted job goes back to the queue with its progress kept (it
  checkpoints on the stop) and its attained service counted (`JobRequest.attained_gpu_s`), so it lines up
  behind the job it made room for; it pays `PreemptionSettings.cost_s` without progress when it restarts.
  The plan names the GPUs it empties for each waiting job (`Preemption.target`): the caller starts that
  job there (where it still fits), not leaving the emptied GPUs to whichever job the policy would pick;
- within a level first come first served (the queue's order);
- the starvation rule: a preempted job's wait counts from when it queued again (`JobRequest.queued_at`),
  and a waiting job past its starvation bound counts as level 0 (Tiresias promotes it to the highest
  queue), so it may preempt in turn.

What keeps it from thrashing: a job runs at least `min_run_s` after each (re)start before it may be
preempted (at least `min_run_over_cost` × its restart cost, so a preemption never costs most of what the
job ran), a job is preempted at most `max_per_job` times, and the plan empties whole GPUs only where
doing so gives a waiting job room that nothing else gives: a job that fits on GPUs already free waits
for the policy, never preempts.

Pure and deterministic: the time is `snapshot.now`; on a node, GPUs to empty are taken by fewest
tenants, then their tenants' highest level, lowest priority and most attained service, then GPU; of the
nodes, the one needing the fewest preemptions (then the least attained service lost), the first in the
snapshot's order on a tie. No order but `las`
preempts (`SchedulingCycle.preemptions`), so fifo's and shortest-remaining's decisions are what they
were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from horus_operator.placement.index import ClusterIndex, GpuKey, GpuSlot
from horus_operator.placement.queueorder import Standing, las_level
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, RunningJob
from horus_operator.prediction.api import JobPrediction, UnknownGpuError, UnknownModelError, Workload


@dataclass(frozen=True)
class PreemptionSettings:
    """- `grace_period_s`, `restart_cost_s`: the progress a preemption costs its job (the stop's
      checkpoint, then pod start, data loading and warm-up on the restart), as a move costs
      (`placement/moves.py`);
    - `min_run_s`: a job runs at least this long after each (re)start before it may be preempted,
      and at least `min_run_over_cost` × `cost_s`;
    - `max_per_job`: preemptions over a job's life;
    - `scan`: how many waiting jobs from the queue's head a plan looks at."""

    grace_period_s: float = 30.0
    restart_cost_s: float = 120.0
    min_run_s: float = 600.0
    min_run_over_cost: float = 4.0
    max_per_job: int = 10
    scan: int = 64

    @property
    def cost_s(self) -> float:
        return self.grace_period_s + self.restart_cost_s

    @property
    def protected_s(self) -> float:
        """How long a job runs after a (re)start before it may be preempted."""
        return self.protected_for(self.grace_period_s)

    def protected_for(self, grace_period_s: float | None) -> float:
        """`protected_s` of a job stopped with `grace_period_s` to checkpoint (None: `grace_period_s`'s
        default): what its preemption costs is its own grace period, as a move's is."""
        grace = self.grace_period_s if grace_period_s is None else grace_period_s
        return max(self.min_run_s, self.min_run_over_cost * (grace + self.restart_cost_s))


@dataclass(frozen=True)
class Service:
    """What the caller knows of one running job: its attained GPU-seconds by now (all its runs), when it
    last (re)started, how often it has been preempted, and the grace period its pod gets to checkpoint
    when stopped (None: `PreemptionSettings.grace_period_s`)."""

    attained_gpu_s: float
    running_since: float
    preemptions: int = 0
    grace_period_s: float | None = None


@dataclass(frozen=True)
class Preemption:
    """Stop `job` (on `node`, GPUs `gpu_indices`) and queue it again, progress kept, to make room for
    `target`: the waiting job it is preempted for, on the GPUs the preemptions empty for it (whole GPUs;
    the caller places it there where it still fits, `SchedulingCycle.retarget`, as a move's target)."""

    job: str
    node: str
    gpu_indices: tuple[int, ...]
    target: RunningJob
    reason: str

    @property
    def for_job(self) -> str:
        return self.target.request.key


Fits = Callable[[JobRequest, Gpu], bool]  # whether the job alone fits one GPU of this kind


def fits_alone(predict: Callable[[Workload, str], JobPrediction]) -> Fits:
    """Whether a job alone may run on a GPU, as feasibility judges it (`placement/feasibility.py`: the
    predicted memory floor, since a job alone is always tried)."""

    def fits(request: JobRequest, gpu: Gpu) -> bool:
        try:
            prediction = predict(request.workload, gpu.product)
        except (UnknownModelError, UnknownGpuError):
            return False
        floor = prediction.min_memory_mib
        return (prediction.memory_mib if floor is None else floor) <= gpu.memory_mib

    return fits


def waiting_level(request: JobRequest, standing: Standing) -> int:
    """A waiting job's LAS level; 0 once it has starved (or turned critical): promoted to the top."""
    return 0 if standing < Standing.WAITING else las_level(request.attained_gpu_s)


def plan_preemptions(
    snapshot: ClusterSnapshot,
    waiting: Iterable[tuple[JobRequest, Standing]],
    service: Mapping[str, Service],
    settings: PreemptionSettings,
    fits: Fits,
) -> list[Preemption]:
    """Running jobs to preempt on `snapshot` (the cluster once this cycle's assignments run) for the
    jobs still `waiting` (in queue order, with their standing). Each waiting job, from the head, gets the
    node where the fewest preemptions empty enough whole GPUs for it (then the least attained service
    lost); the GPUs it gets are not offered to the jobs behind it, and no job is preempted twice."""
    index, _ = ClusterIndex.of(snapshot)  # read, never changed
    levels = _preemptable(index, service, settings, snapshot.now)
    if not levels:
        return []
    highest = max(level for level, _ in levels.values())
    empty, freeable = _gpus(index, levels)
    plan = _Plan(fits)
    failed: set[tuple[int, int, int, Workload]] = set()  # (GPUs, priority, level, workload) found no room
    for position, (request, standing) in enumerate(waiting):
        if position >= settings.scan:
            break
        level = waiting_level(request, standing)
        shape = (request.gpus, request.priority, level, request.workload)
        if level >= highest or shape in failed:
            continue
        if any(len(plan.free(request, slots)) >= request.gpus for slots in empty.values()):
            continue  # it fits without preempting: the policy chose to let it wait
        best: tuple[tuple[int, float], list[RunningJob], list[GpuKey]] | None = None
        for node, candidates in freeable.items():
            found = plan.victims(request, level, empty.get(node, []), candidates, index)
            if found is None:
                continue
            cost = (len(found[0]), sum(levels[job.request.key][1] for job in found[0]))
            if best is None or cost < best[0]:
                best = (cost, *found)
        if best is None:
            failed.add(shape)
            continue
        _, chosen, gpus = best
        plan.taken.update(gpus)
        target = RunningJob(request, gpus[0][0], tuple(sorted(gpu for _, gpu in gpus)))
        for job in chosen:
            attained = levels[job.request.key][1]
            plan.chosen[job.request.key] = Preemption(
                job=job.request.key,
                node=job.node,
                gpu_indices=job.gpu_indices,
                target=target,
                reason=(
                    f"least attained service: {request.key} (level {level}) waits for GPUs held by "
                    f"{job.request.key} (level {las_level(attained)}, {attained / 3600:.2f} GPU-hours "
                    "attained)"
                ),
            )
    return list(plan.chosen.values())


@dataclass(frozen=True)
class _Freeable:
    """A GPU whose tenants may all be preempted: by a waiting job of a level below `level` (its tenants'
    least) and a priority of at least `priority` (its tenants' highest)."""

    order: tuple[float, ...]  # fewest tenants, then `_victim_order` of its first victim
    slot: GpuSlot
    level: int
    priority: int


def _preemptable(
    index: ClusterIndex, service: Mapping[str, Service], settings: PreemptionSettings, now: float
) -> dict[str, tuple[int, float]]:
    """The running jobs that may be preempted at `now` (by some waiting job): key -> (level, attained)."""
    found: dict[str, tuple[int, float]] = {}
    for key in index.jobs:
        known = service.get(key)
        if known is None or known.preemptions >= settings.max_per_job:
            continue
        if now - known.running_since < settings.protected_for(known.grace_period_s):
            continue
        level = las_level(known.attained_gpu_s)
        if level > 0:  # no waiting job is below level 0
            found[key] = (level, known.attained_gpu_s)
    return found


def _gpus(
    index: ClusterIndex, levels: Mapping[str, tuple[int, float]]
) -> tuple[dict[str, list[GpuSlot]], dict[str, list[_Freeable]]]:
    """Per node, its empty usable GPUs and those preempting could empty (best candidates first)."""
    empty: dict[str, list[GpuSlot]] = {}
    freeable: dict[str, list[_Freeable]] = {}
    for node, slots in index.node_slots.items():
        for slot in slots:
            if not slot.usable:
                continue
            tenants = slot.tenants
            if not tenants:
                empty.setdefault(node, []).append(slot)
            elif all(job.request.key in levels for job in tenants):
                first = min(_victim_order(job, levels) for job in tenants)
                freeable.setdefault(node, []).append(
                    _Freeable(
                        order=(len(tenants), *first),
                        slot=slot,
                        level=min(levels[job.request.key][0] for job in tenants),
                        priority=max(job.request.priority for job in tenants),
                    )
                )
        if node in freeable:
            freeable[node].sort(key=lambda gpu: (gpu.order, gpu.slot.key))
    return empty, freeable


def _victim_order(job: RunningJob, levels: Mapping[str, tuple[int, float]]) -> tuple[float, ...]:
    """Highest level first, then lowest priority, then most attained service."""
    level, attained = levels[job.request.key]
    return (-level, job.request.priority, -attained)


class _Plan:
    """What a plan has handed out so far: GPUs given to waiting jobs, jobs chosen to preempt."""

    def __init__(self, fits: Fits) -> None:
        self._fits = fits
        self._fit: dict[tuple[Workload, str, int], bool] = {}
        self.taken: set[GpuKey] = set()
        self.chosen: dict[str, Preemption] = {}

    def fits(self, request: JobRequest, gpu: Gpu) -> bool:
        key = (request.workload, gpu.product, gpu.memory_mib)
        known = self._fit.get(key)
        if known is None:
            known = self._fit[key] = self._fits(request, gpu)
        return known

    def free(self, request: JobRequest, slots: Iterable[GpuSlot]) -> list[GpuKey]:
        return [slot.key for slot in slots if slot.key not in self.taken and self.fits(request, slot.gpu)]

    def victims(
        self,
        request: JobRequest,
        level: int,
        empty: list[GpuSlot],
        candidates: list[_Freeable],
        index: ClusterIndex,
    ) -> tuple[list[RunningJob], list[GpuKey]] | None:
        """The fewest jobs on one node whose preemption leaves `request.gpus` whole GPUs for `request`
        (with the node's empty ones), and those GPUs; None where no such set exists."""
        gpus = self.free(request, empty)
        options = [
            gpu
            for gpu in candidates
            if gpu.level > level
            and gpu.priority <= request.priority
            and gpu.slot.key not in self.taken
            and not any(job.request.key in self.chosen for job in gpu.slot.tenants)
            and self.fits(request, gpu.slot.gpu)
        ]
        if len(gpus) + len(options) < request.gpus or len(gpus) >= request.gpus:
            return None
        offered = {gpu.slot.key for gpu in options}
        chosen: dict[str, RunningJob] = {}
        for gpu in options:
            if len(gpus) >= request.gpus:
                break
            if gpu.slot.key in gpus:  # emptied already by a multi-GPU job chosen for another GPU
                continue
            for job in gpu.slot.tenants:
                if job.request.key in chosen:
                    continue
                chosen[job.request.key] = job
                # A multi-GPU job empties its other GPUs too, where it is their only tenant.
                for other in job.gpu_indices:
                    key = (job.node, other)
                    emptied = all(tenant.request.key in chosen for tenant in index.slots[key].tenants)
                    if key != gpu.slot.key and key not in gpus and key in offered and emptied:
                        gpus.append(key)
            gpus.append(gpu.slot.key)
        if len(gpus) < request.gpus:
            return None
        return list(chosen.values()), gpus[: request.gpus]
