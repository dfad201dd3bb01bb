"""Preempting running DLJobs in the scheduling loop under `--queue-order las` (docs/operator.md, "Queue
order"). The decision is the shared cycle's (`SchedulingCycle.preemptions`, the plan the simulator
executes); this module only records it, the way `mover.py` records a move:

- `plan` (start of a loop cycle, while jobs wait): asks the planner about every job whose pod runs, with
  the attained service its status and pod give (`preemption.service`), and writes each chosen
  preemption into the job's `status.preemptions` (state `Preempting`, its run added to
  `status.attainedGpuSeconds`) and an Event `Preempted`. Deleting the pod (with the job's grace period)
  and queueing the job again follow from that status (`reconcile.decide`), so a restart mid-way resumes.
  Nothing is planned while an earlier preemption's pod still stops: the planner would stop a second
  job for the same waiting one.
- `held`: a preempted pod holds its GPUs in every snapshot until it is gone (a deleted pod holds none in
  the snapshot otherwise), so nothing starts there while it checkpoints.

The job preempted for is placed by the cycle like any waiting job once the GPUs are free: it leads the
queue (the least attained service), but no GPU is held for it as a move's target is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from horus_operator.api import dljob
from horus_operator.operator.apierrors import ApiError, ApiUnavailable
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves import preemption
from horus_operator.operator.reports import Reporter
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.preemption import Preemption, PreemptionSettings, Service
from horus_operator.placement.types import ClusterSnapshot, JobRequest, RunningJob

log = logging.getLogger(__name__)


class Preempter:
    def __init__(
        self,
        cache: ClusterCache,
        cycle: SchedulingCycle,
        reports: Reporter,
        settings: PreemptionSettings,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self._cache, self._cycle, self._reports, self.settings = cache, cycle, reports, settings
        self._metrics = metrics or OperatorMetrics()

    async def plan(
        self, snapshot: Callable[[], ClusterSnapshot], waiting: Iterable[JobRequest], now: datetime
    ) -> None:
        """Record the planner's preemptions for the `waiting` jobs on the cluster `snapshot()` shows."""
        queue = self._cycle.queue(waiting)
        if not queue or self._stopping():
            return
        running = {pod.job_key: pod for pod in self._cache.all_pods() if _preemptable(pod)}
        if not running:
            return
        service = {key: self._service(key, pod, now) for key, pod in running.items()}
        planned = await asyncio.to_thread(self._cycle.preemptions, snapshot(), queue, service, self.settings)
        for chosen in planned:
            await self._record(chosen, running[chosen.job], now)

    def held(self) -> dict[str, tuple[RunningJob, ...]]:
        """The GPUs of preempted pods still being deleted (their pods no longer count as running, yet
        their processes may still hold the GPU), by job key."""
        held: dict[str, tuple[RunningJob, ...]] = {}
        for key, pod in self._stopping_pods():
            if pod.deleting and pod.request is not None:
                held[key] = (*held.get(key, ()), RunningJob(pod.request, pod.node, pod.gpu_indices))
        return held

    def _stopping(self) -> bool:
        return next(self._stopping_pods(), None) is not None

    def _stopping_pods(self) -> Iterator[tuple[str, PodView]]:
        """The pods of recorded preemptions that still run or are being deleted, with their job's key."""
        for key, body in self._cache.jobs.items():
            current = body.get("status") or {}
            if current.get("preemptions"):
                yield from ((key, pod) for pod in preemption.stopping(current, self._cache.job_pods(key)))

    def _service(self, key: str, pod: PodView, now: datetime) -> Service:
        body = self._cache.jobs[key]  # a running pod's job: `all_pods` lists only pods of known jobs
        status = body.get("status") or {}
        return preemption.service(status, pod, now, dljob.parse(body).grace_period_s)

    async def _record(self, chosen: Preemption, pod: PodView, now: datetime) -> None:
        """Write the preemption into the job's status before anything is deleted; its decision deletes."""
        body = self._cache.jobs.get(chosen.job)
        if body is None:
            return
        fields = preemption.recorded(body.get("status") or {}, chosen, pod, now)
        try:
            stored = await self._reports.write(body, fields)
        except (ApiError, ApiUnavailable) as error:  # nothing deleted yet: the job keeps running
            log.warning("preemption of %s not recorded, not preempted: %s", chosen.job, error)
            return
        if stored is None:
            return
        log.info("preempting %s for %s: %s", chosen.job, chosen.for_job, chosen.reason)
        self._metrics.preempted()
        self._reports.post_later(
            stored,
            kind="Normal",
            reason="Preempted",
            message=f"preempted: {chosen.reason}",
        )
        self._cache.mark([chosen.job])


def _preemptable(pod: PodView) -> bool:
    """A pod the planner may stop: running, not already being deleted, placed by Horus."""
    return pod.phase == "Running" and not pod.deleting and pod.request is not None
