"""Placing the jobs that wait: the scheduling cycle run on the cluster's view, then, for each placement,
what its binding needs first and its pod made (a DLJob's) or released (a pod of the pod route).

The jobs to place (`pending`) are what the loop's decisions left: each with its request as decided, its
binding and whether it is between pods of a move (placed on its target while that still fits). A placement
whose pod waits for its binding (`reserve`: the reservations' GPUs) is kept on its GPUs meanwhile
(`nominations.py`) instead of being decided again each cycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from horus_operator.api.dljob import JobSpec
from horus_operator.operator import cluster_view, metrics
from horus_operator.operator.binding import Bindings, Bound
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods
from horus_operator.operator.jobs.feasibility import as_invalid
from horus_operator.operator.jobs.making import PodMaker
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves.mover import Mover
from horus_operator.operator.nominations import Nomination, Nominations
from horus_operator.operator.podroute.route import PodRoute
from horus_operator.operator.views import ClusterViews
from horus_operator.operator.waiting import JobRecords
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, Node
from horus_operator.prediction.api import Workload

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Pending:
    """A job waiting for its next pod, as its latest decision left it."""

    attempt: int
    job: JobSpec
    workload: Workload
    binding: str
    request: JobRequest  # what the cycle places: built once per decision
    moving: bool = False  # between pods of a move: placed on its target if that still fits


class Placer:
    def __init__(
        self,
        *,
        cache: ClusterCache,
        cycle: SchedulingCycle,
        views: ClusterViews,
        bindings: Bindings,
        mover: Mover,
        maker: PodMaker,
        records: JobRecords,
        podroute: PodRoute | None,
        metrics: OperatorMetrics,
        nominations: Nominations,
    ) -> None:
        self._cache, self._cycle, self._views, self._bindings = cache, cycle, views, bindings
        self._mover, self._maker, self._records, self._podroute = mover, maker, records, podroute
        self._metrics, self._nominations = metrics, nominations
        self.pending: dict[str, Pending] = {}  # the jobs to place: cleared on resync, re-decided

    def waiting(self) -> list[Pending]:
        """The jobs to place but those kept on a placement that awaits its pod (they wait for no GPU)."""
        return [pending for key, pending in self.pending.items() if key not in self._nominations]

    def prune(self) -> None:
        """End the nominations no longer standing (`nominations.py`): their jobs are decided afresh."""
        for key, nomination in self._nominations.items():
            wanted = nomination.stands_for(self.pending.get(key))
            if not wanted or not self._bindings.of(nomination.binding).keeps(nomination.assignment):
                log.info("%s: its placement on %s is decided again", key, nomination.assignment.node)
                self._nominations.drop(key)

    def snapshot(self, now: datetime) -> ClusterSnapshot:
        return self._views.snapshot(now, moving=[k for k, p in self.pending.items() if p.moving])

    async def place(self, now: datetime) -> set[str]:
        """Place waiting jobs (a moved one on its target where it still fits); returns the keys whose
        pods (or verdicts) changed."""
        started, started_cpu = time.perf_counter(), time.thread_time()
        moving = [k for k, p in self.pending.items() if p.moving]
        moved = self._mover.retarget(self.snapshot(now), moving) if moving else {}
        kept = self._nominations.items()
        view = self._views.view(now)  # the nominated placements hold their GPUs in it
        queue = self._cycle.queue(
            pending.request
            for key, pending in self.pending.items()
            if key not in moved and key not in self._nominations
        )
        view_cpu_s = time.thread_time() - started_cpu
        # Off the event loop: a cycle over a long queue takes long enough to delay watch events.
        try:
            result, cycle_cpu_s = await asyncio.to_thread(
                _with_thread_cpu,
                self._cycle.run,
                view,
                queue,
                explain=lambda request: self._records.explanation_due(request, now),
            )
        except Exception:  # a policy that failed half-way may have left its tentative jobs in the index
            self._views.forget()
            raise
        decided_ms = 1000 * (time.perf_counter() - started)  # the snapshot and the cycle, before any pod
        # Its own CPU, without the waits for a core or the GIL that the wall time includes
        decided_cpu_ms = 1000 * (view_cpu_s + cycle_cpu_s)
        self._metrics.decided(decided_ms / 1000)
        for key, problem in result.unsatisfiable.items():
            invalid = as_invalid(self.pending.pop(key).job, problem)
            if self._podroute is not None and self._podroute.owns(key):
                self._podroute.refuse(key, invalid)  # judged again when the pod or a resync says so
                continue
            self._metrics.refused(metrics.UNSATISFIABLE)
            self._records[key].unsatisfiable = invalid
            self._cache.mark([key])
        assignments = [*moved.values(), *result.assignments]
        nodes = {node.name: node for node in view.nodes}
        await self._bindings.prepare([b for b in (self._bound(a, nodes) for a in assignments) if b])
        await asyncio.gather(
            *(self._bind(a, result.placed.get(a.job), nodes, now) for a in assignments),
            *(self._bind(n.assignment, n.request, nodes, now) for _, n in kept),
        )
        for key, message in result.explanations.items():
            self._records.note_waiting(key, message, now)
        skip = {a.job for a in assignments} | set(result.unsatisfiable)
        self._records.note_places(queue, result.explanations, self._cycle.ordering, skip=skip)
        placed = {a.job for a in assignments}
        if placed:  # bench/scale.py reads these lines
            log.info(
                "placement: %d placed, decided in %.1f ms (%.1f ms CPU)",
                len(placed),
                decided_ms,
                decided_cpu_ms,
            )
        return placed | {key for key, _ in kept} | {r.key for r in queue if r.key in self._cache.dirty}

    def _bound(self, assignment: Assignment, nodes: Mapping[str, Node]) -> Bound | None:
        """A placement of this cycle as its binding reads it before the pod exists."""
        pending = self.pending.get(assignment.job)
        if pending is None:
            return None
        uuids = tuple(cluster_view.gpu_uuids(nodes, assignment))
        predicted = pods.predicted(assignment)
        routed = self._podroute is not None and self._podroute.owns(assignment.job)
        return Bound(
            pending.binding, pending.job.namespace, assignment, uuids, pending.request, predicted, routed
        )

    async def _bind(
        self, assignment: Assignment, placed: JobRequest | None, nodes: Mapping[str, Node], now: datetime
    ) -> None:
        """Make the pod of `assignment` (or release the routed pod); `placed`: its request as the cycle
        placed it (None for a job placed on its move's target), which the pod records."""
        pending = self.pending.pop(assignment.job, None)
        if pending is None:
            return
        uuids = cluster_view.gpu_uuids(nodes, assignment)
        binder = self._bindings.of(pending.binding)
        if (unready := binder.unready(assignment, uuids)) is not None:
            self.pending[assignment.job] = pending
            if not pending.moving and binder.keeps(assignment):  # a move's target is held by the mover
                request = placed or pending.request
                nomination = Nomination(assignment, request, pending.attempt, pending.job, pending.binding)
                self._nominations.nominate(assignment.job, nomination)
            self._records.note_waiting(assignment.job, unready, now)
            return
        self._nominations.drop(assignment.job)
        hostname = self._cache.node_views[assignment.node].hostname
        told, cdi_devices = binder.gpu_uuids(assignment, uuids), binder.cdi_devices(assignment, uuids)
        if self._podroute is not None and self._podroute.owns(assignment.job):
            request = placed or pending.request
            await self._podroute.release(assignment, request, hostname, told, cdi_devices)
            return
        placement = pods.Placement(
            job=pending.job,
            request=placed or pending.request,
            assignment=assignment,
            attempt=pending.attempt,
            hostname=hostname,
            gpu_uuids=told,
            claims=binder.pod_claims(assignment, uuids),
            cdi_devices=cdi_devices,
            binding=pending.binding,
        )
        await self._maker.make(placement, pending.binding, moving=pending.moving, now=now)


def _with_thread_cpu(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """`fn`'s answer and the CPU seconds it took on the thread that ran it."""
    started = time.thread_time()
    answer = fn(*args, **kwargs)
    return answer, time.thread_time() - started
