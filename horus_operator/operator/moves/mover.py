"""Moving running DLJobs in the scheduling loop (`spec.migration.allowed`; docs/operator.md, "Moving
jobs"). The decision is the shared cycle's (`SchedulingCycle.moves`, the planner the simulator runs);
this module only records it and keeps the target GPU for the job until its new pod exists:

- `plan` (start of a loop cycle, at most once per `every` seconds): asks the planner about every job
  that allows moving and whose pod runs, and writes each chosen move into the job's `status.moves`
  (state `Moving`) and an Event `Moving`. Nothing else: deleting the pod (with the job's grace period)
  and creating the next one follow from that status (`reconcile.decide`, `operator/moves/migration.py`),
  the level-triggered way the loop re-places any pod, so a restart mid-move resumes it.
- `reserved`: while a job is between pods its target GPU is held for it in every snapshot, so the
  cycle places nothing else there meanwhile.
- `retarget`: once its old pod is gone, the job is placed on its target if it still fits there
  (`SchedulingCycle.retarget`), else it waits for the cycle like any job.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from horus_operator.api import dljob
from horus_operator.operator.apierrors import ApiError, ApiUnavailable
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.kube import Kube
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves import migration
from horus_operator.operator.reports import Reporter
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.moves import Mobility, Move, MoveSettings
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, RunningJob

log = logging.getLogger(__name__)


class Mover:
    def __init__(
        self,
        kube: Kube,
        cache: ClusterCache,
        cycle: SchedulingCycle,
        reports: Reporter,
        settings: MoveSettings,
        *,
        every: float,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        """`every`: seconds between plans at most (the loop's resync period)."""
        self._kube, self._cache, self._cycle, self._reports = kube, cache, cycle, reports
        self._metrics = metrics or OperatorMetrics()
        self.settings, self._every = settings, every
        self._planned_at: datetime | None = None
        self._reserved: dict[str, RunningJob] = {}  # job key -> the target its move holds for it
        self._decided = False  # every job decided since the last resync: reservations are known

    def resynced(self) -> None:
        """After a resync nothing is planned until every job has been decided once: the moves under
        way (their held targets) are known only then."""
        self._reserved.clear()
        self._decided = False

    # -- deciding ----------------------------------------------------------------------------------
    async def plan(self, snapshot: Callable[[], ClusterSnapshot], now: datetime, *, waiting: bool) -> None:
        """Record the planner's moves on the cluster `snapshot()` shows (built only when some job could
        move); `waiting`: jobs wait for a GPU."""
        if not self._decided:
            self._decided = True  # the cycle this call begins decides every job (a resync marks all)
            return
        if self._planned_at is not None and (now - self._planned_at).total_seconds() < self._every:
            return
        self._planned_at = now
        candidates = dict(self._candidates(now))
        if not candidates:
            return
        mobility = {key: known for key, (_, known) in candidates.items()}
        view = snapshot()
        moves = await asyncio.to_thread(self._cycle.moves, view, mobility, self.settings, waiting=waiting)
        for move in moves:
            await self._record(move, candidates[move.job][0], now)

    def _candidates(self, now: datetime) -> Iterable[tuple[str, tuple[PodView, Mobility]]]:
        """Jobs that allow moving, whose pod runs and that are not already moving."""
        for pod in self._cache.all_pods():
            body = self._cache.jobs.get(pod.job_key)
            if body is None or pod.phase != "Running" or pod.deleting or pod.request is None:
                continue
            job = dljob.parse(body)
            current = body.get("status") or {}
            moving = migration.in_progress(job, current, self._cache.job_pods(pod.job_key))
            if job.migration_allowed and moving is None:
                yield pod.job_key, (pod, migration.mobility(job, current, pod, now))

    async def _record(self, move: Move, pod: PodView, now: datetime) -> None:
        """Write the move into the job's status before anything is deleted; then its decision deletes."""
        body = self._cache.jobs.get(move.job)
        if body is None:
            return
        current = body.get("status") or {}
        moves = [*(current.get("moves") or []), migration.entry(move, pod.attempt, now)]
        try:
            stored = await self._reports.write(body, {"moves": moves})
        except (ApiError, ApiUnavailable) as error:  # nothing deleted yet: the job stays where it is
            log.warning("move of %s not recorded, not moved: %s", move.job, error)
            return
        if stored is None:
            return
        source = migration.where(pod.node, pod.gpu_indices)
        target = migration.where(move.target.node, move.target.gpu_indices)
        log.info("moving %s from %s to %s: %s", move.job, source, target, move.reason)
        self._metrics.moved(move.trigger)
        self._reports.post_later(
            stored, kind="Normal", reason="Moving", message=f"moving to {target}: {move.reason}"
        )
        self._cache.mark([move.job])

    # -- holding the target ------------------------------------------------------------------------
    def note(self, key: str, moving: migration.InProgress | None, request: JobRequest | None) -> None:
        """After each decision of job `key` (the move it found under way): hold its target meanwhile."""
        if moving is None or request is None:
            self._reserved.pop(key, None)
            return
        self._reserved[key] = RunningJob(request, moving.node, moving.gpu_indices)

    def forget(self, key: str) -> None:
        self._reserved.pop(key, None)

    def reserved(self, snapshot: ClusterSnapshot, *, but: Iterable[str] = ()) -> ClusterSnapshot:
        """`snapshot` with the targets of jobs between pods held (all but `but`'s)."""
        held = self.held(but=but)
        return dataclasses.replace(snapshot, running=snapshot.running + held) if held else snapshot

    def held(self, *, but: Iterable[str] = ()) -> tuple[RunningJob, ...]:
        """The targets of jobs between pods (all but `but`'s), by job key."""
        skip = set(but)
        return tuple(job for key, job in sorted(self._reserved.items()) if key not in skip)

    def retarget(self, snapshot: ClusterSnapshot, keys: Iterable[str]) -> dict[str, Assignment]:
        """The jobs among `keys` whose old pod is gone, placed on their targets where those still fit
        (`snapshot`: the pods; each placed job holds its GPU for the next)."""
        placed: dict[str, Assignment] = {}
        for key in sorted(k for k in keys if k in self._reserved):
            target = self._reserved[key]
            view = self.reserved(snapshot, but=[key])
            assignment = self._cycle.retarget(
                view, target, "moved here: " + _reason(self._cache.jobs.get(key))
            )
            if assignment is not None:
                placed[key] = assignment
            else:  # the cycle places it as any waiting job, and nothing holds the old target
                log.info("%s: its move's target %s no longer fits; placing it again", key, target.node)
                self._reserved.pop(key)
        return placed


def _reason(body: Mapping[str, Any] | None) -> str:
    moves = ((body or {}).get("status") or {}).get("moves") or [{}]
    return str(moves[-1].get("reason", ""))
