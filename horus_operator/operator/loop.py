"""The scheduling loop: one asyncio task that turns cache changes into status updates and placements.

Each cycle (1) re-decides every job whose DLJob or pods changed (`reconcile.decide`), writing only the
statuses that differ, (2) runs the scheduling cycle (`placement.cycle`, the one the simulator runs)
with every job waiting for a pod, on the cluster's `ClusterIndex`, kept across cycles from the cache's
changes as the simulator keeps its own (`placement.keeper`; rebuilt on a resync), then creates the
pods concurrently (after what their bindings need first, e.g. DRA's ResourceClaims; a pod waiting for
its binding keeps its GPUs, `nominations.py`), and (3) lets each binding repair what it keeps
(`operator/binding/`). Creation is idempotent (deterministic names, 409 = done), so a crash between
any two steps is repaired by the next cycle of any replica. Helpers: the cluster views (`views.py`),
what a job is read as (`jobs/reading.py`), its pod made (`jobs/making.py`), why it waits
(`waiting.py`); status writes and Events: `reports.Reporter`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from horus_operator.api import dljob
from horus_operator.api.dljob import InvalidJob
from horus_operator.operator import metrics, status
from horus_operator.operator.binding import served
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.config import LoopConfig
from horus_operator.operator.jobs import oom, reading, reconcile, refusals, template, tenancy, volumes
from horus_operator.operator.jobs.jobspec import WorkloadResolver
from horus_operator.operator.jobs.making import PodMaker
from horus_operator.operator.jobs.reading import JobReader
from horus_operator.operator.kube import Kube
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves.mover import Mover
from horus_operator.operator.moves.preempter import Preempter
from horus_operator.operator.nominations import Nominations
from horus_operator.operator.placing import Pending, Placer
from horus_operator.operator.podroute.route import PodRoute
from horus_operator.operator.reports import Reporter, needs_write
from horus_operator.operator.views import ClusterViews
from horus_operator.operator.waiting import JobRecord, JobRecords
from horus_operator.placement.base import PredictingPolicy
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.queueorder import QueueOrder
from horus_operator.prediction.api import Workload

log = logging.getLogger(__name__)
T = TypeVar("T")


class SchedulingLoop:
    def __init__(
        self,
        *,
        kube: Kube,
        cache: ClusterCache,
        policy: PredictingPolicy,
        resolver: WorkloadResolver,
        config: LoopConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_resync: Callable[[], Awaitable[None]] | None = None,
        metrics: OperatorMetrics | None = None,
        podroute: PodRoute | None = None,
    ) -> None:
        """`on_resync`: reloads whatever else this replica must take over from the cluster when it
        gains the lease (the online correction, `learning.Learning.restore`). `metrics`: where it counts
        (`operator/metrics.py`; a registry of its own when not given). `podroute`: the gated pods of
        other controllers, queued beside the DLJobs and released instead of created
        (`podroute/route.py`); None without the pod route."""
        self._podroute = podroute
        self._kube, self._cache = kube, cache
        self._metrics = metrics = metrics or OperatorMetrics()
        self._on_resync = on_resync
        self._resolver, self._config, self._clock = resolver, config, clock
        self._cycle = SchedulingCycle(
            policy,
            max_batch=config.max_batch,
            max_explanations=config.max_explanations,
            ordering=config.ordering,
        )
        self.reports = Reporter(
            kube=kube, cache=cache, concurrency=config.report_concurrency, metrics=metrics
        )
        self._mover = Mover(
            kube, cache, self._cycle, self.reports, config.moves, every=config.resync_every, metrics=metrics
        )
        self._preempter = (
            Preempter(cache, self._cycle, self.reports, config.preemption, metrics=metrics)
            if config.ordering.order == QueueOrder.LAS
            else None
        )
        self._bindings = served.bindings(kube, cache, config, clock, podroute.placed if podroute else list)
        self._nominations = Nominations()  # forgotten on resync, as the jobs to place are
        self._views = ClusterViews(
            cache=cache,
            bindings=self._bindings,
            mover=self._mover,
            preempter=self._preempter,
            podroute=podroute,
            nominations=self._nominations,
            telemetry_ttl=config.telemetry_ttl,
        )
        self._reader = JobReader(
            kube=kube, cache=cache, resolver=resolver, cycle=self._cycle, config=config, metrics=metrics
        )
        self._records = JobRecords(
            cache=cache, reports=self.reports, podroute=podroute, resync_every=config.resync_every
        )
        self._maker = PodMaker(
            kube=kube,
            cache=cache,
            reader=self._reader,
            records=self._records,
            reports=self.reports,
            metrics=metrics,
        )
        self._placer = Placer(
            cache=cache,
            cycle=self._cycle,
            views=self._views,
            bindings=self._bindings,
            mover=self._mover,
            maker=self._maker,
            records=self._records,
            podroute=podroute,
            metrics=metrics,
            nominations=self._nominations,
        )
        self._pending = self._placer.pending  # the jobs to place: cleared on resync, re-decided
        self._suspects = refusals.NodeSuspects(window_s=config.node_cooldown.total_seconds())

    async def run(self, leading: asyncio.Event) -> None:
        """Forever: while this replica holds the lease, resync once, then cycle on every change."""
        while True:
            await leading.wait()
            if not await self._guarded(self.resync):
                continue
            while leading.is_set():
                await self._guarded(self.cycle)
                await self._idle()

    async def _guarded(self, step: Callable[[], Awaitable[None]]) -> bool:
        """Run one step; a failure (API server unreachable, a bug on one odd object) is logged and the
        step retried by the next round, never allowed to end the loop."""
        try:
            await step()
        except Exception:
            log.exception("scheduling step %s failed; retrying", step.__name__)
            self._metrics.retried(step.__name__)
            await asyncio.sleep(1.0)
            return False
        return True

    async def resync(self) -> None:
        """Rebuild the cache from full lists: the API server is the truth after (re)gaining the lease."""
        namespace = self._config.namespace
        dra = self._config.dra_served
        with self._cache.resyncing():  # the watches keep running: their events meanwhile beat the lists
            listed = await asyncio.gather(
                self._kube.list_dljobs(namespace),
                self._kube.list_horus_pods(namespace),
                self._kube.list_nodes(),
                self._kube.list_claims(namespace) if dra else _nothing(),
                self._kube.list_slices() if dra else _nothing(),
                self._kube.list_volume_claims(namespace),
                self._kube.list_reservation_pods(),
            )
            jobs, horus_pods, nodes, resource_claims, resource_slices, volume_claims, reserving = listed
            self._cache.replace_all(
                jobs=jobs,
                pods=horus_pods,
                nodes=nodes,
                claims=resource_claims,
                resource_slices=resource_slices,
                volume_claims=volume_claims,
                reservation_pods=reserving,
            )
        await self._reader.read_tenancy(self._clock())
        if self._podroute is not None:
            await self._podroute.resync()
        if self._on_resync is not None:
            await self._on_resync()
        self._pending.clear()
        self._nominations.clear()
        self._mover.resynced()
        log.info(
            "resynced: %d DLJobs, %d Horus pods, %d nodes, %d ResourceClaims, %d ResourceSlices",
            len(jobs),
            len(horus_pods),
            len(nodes),
            len(resource_claims),
            len(resource_slices),
        )

    async def _idle(self) -> None:
        """Until something changed; then a batch window for the rest of a burst to arrive, unless
        changes came while the last cycle ran: a burst that gathered meanwhile is decided at once."""
        gathered = bool(self._cache.dirty)
        await self._cache.changed(redecide_every=self._config.resync_every)
        if not gathered:
            await asyncio.sleep(self._config.batch_window)

    async def cycle(self) -> None:
        """Decide the changed jobs, place what waits, then write: a job placed in this cycle gets one
        status write (Scheduled), not two (Queued, then Scheduled)."""
        now = self._clock()
        started = time.perf_counter()
        await self._reader.read_tenancy(now, due_only=True)
        # Moves first: each is recorded in its job's status, which marks the job for this cycle's
        # decisions (they delete its pod and hold its target before anything is placed).
        waiting = self._placer.waiting()
        await self._mover.plan(lambda: self._placer.snapshot(now), now, waiting=bool(waiting))
        if self._preempter is not None:
            queued = (p.request for p in waiting if not p.moving)
            await self._preempter.plan(lambda: self._placer.snapshot(now), queued, now)
        dirty = self._cache.take_dirty()
        routed = self._podroute.take_dirty() if self._podroute is not None else set()
        if self._podroute is not None:
            for stuck in self._podroute.stop_unschedulable(self._config.unschedulable_grace):
                blame = refusals.judge(stuck.scheduling_message).blame
                if blame != refusals.Blame.JOB:
                    key = f"{stuck.namespace}/{stuck.name}"
                    self._suspected(stuck.node, key, now, blames_node=blame == refusals.Blame.NODE)
        for key in routed:
            self._queue_pod(key)
        self._bindings.refresh()
        decisions = {key: await self._decide(key, now) for key in sorted(dirty)}
        # Stuck pods go before placement: a re-decision after placing sees only the new pod.
        first = [d for d in decisions.values() if d and (d[1].delete_pods or d[1].store_first)]
        await asyncio.gather(*(self._before_placing(*d) for d in first))
        self._placer.prune()  # after the decisions: a nomination whose job they changed ends
        placed: set[str] = set()
        if self._pending and (dirty or routed or self._cache.nodes_changed):
            self._cache.nodes_changed = False
            placed = await self._placer.place(now)
            # A routed pod is no DLJob: deciding it as one would forget it (its route keeps its records)
            for key in (k for k in placed if not PodRoute.owns(k)):
                decisions[key] = await self._decide(key, now)
        await self._bindings.repair(bool(dirty))
        writes = [d for d in decisions.values() if d is not None and needs_write(*d)]
        for body, decision in writes:
            self.reports.write_later(body, decision)
        self._metrics.cycled(time.perf_counter() - started)
        self._metrics.refresh(self._gauges)
        if placed or writes:
            log.info(
                "cycle: %d jobs changed, %d placed, %d still waiting, %d status writes in %.0f ms",
                len(dirty),
                len(placed),
                len(self._pending),
                len(writes),
                1000 * (time.perf_counter() - started),
            )

    async def _decide(self, key: str, now: datetime) -> tuple[dict[str, Any], reconcile.Decision] | None:
        body = self._cache.jobs.get(key)
        if body is None:
            known = self._records.get(key) is not None  # a DLJob decided here before, now gone
            self._forget(key)
            if known:
                await self._maker.stop_unowned(key)
            return None
        job = dljob.parse(body)
        record = self._records[key]
        current = body.get("status") or {}
        job_pods = self._cache.job_pods(key)
        # A final job is never resolved again (after a restart, a Failed job's graph is not re-read).
        workload = None if reconcile.is_final(job, current) else self._reader.workload(job)
        verdict = (
            workload
            if isinstance(workload, InvalidJob)
            else self._reader.beyond_tenancy(job, workload, job_pods)
        )
        nodes = self._cache.nodes_summary()
        # Not for a final job (no workload): its newest pod's ending is read once (jobs/oom.py)
        views = self._cache.node_views
        ending = oom.ending(job_pods, current, self._cache.all_pods, views) if workload else None
        decision = reconcile.decide(
            job,
            current,
            job_pods,
            reconcile.Context(
                now=now,
                nodes=self._cache.nodes.keys(),
                unschedulable_grace=self._config.unschedulable_grace,
                not_ready_since=nodes.not_ready_since,
                not_ready_grace=self._config.not_ready_grace,
                verdict=verdict,
                # A pod no GPU node can hold would be refused on each node in turn, cooling them all.
                unsatisfiable=record.unsatisfiable
                or template.beyond_every_node(job.template, nodes.largest_allocatable),
                missing_volume=volumes.missing_claim(job, self._cache.has_volume_claim),
                waiting_message=record.waiting or reading.waiting_message(job),
                queue=record.place,
                extra=status.owned_by_others(current),
                claims=self._cache.claims,
                foreign=self._bindings.taken(),
                preempts=self._preempter is not None,
                oom=ending,
            ),
        )
        if node := decision.avoid_node or decision.suspect_node or decision.passed_node:
            self._metrics.refused(metrics.UNSCHEDULABLE)  # passed over; cooled if to blame (refusals.py)
        if decision.avoid_node:
            self._cycle.cooldowns.note(node, (now + self._config.node_cooldown).timestamp())
        elif node:
            self._suspected(node, key, now, blames_node=bool(decision.suspect_node))
        placeable = workload if isinstance(workload, Workload) and verdict is None else None
        # A request only for a job to place or between pods: most jobs re-decided are running
        wanted = decision.place_attempt is not None or decision.moving is not None
        request = None
        if placeable and wanted:  # past the nodes that refused its pods lately
            avoid = self._suspects.avoided_by(key, now.timestamp())
            request = self._reader.request(job, placeable, body, decision.status, avoid)
        if decision.place_attempt is not None and placeable is not None and request is not None:
            moving = decision.move_to is not None
            binding = self._reader.binding(job)
            self._pending[key] = Pending(decision.place_attempt, job, placeable, binding, request, moving)
        else:
            self._pending.pop(key, None)
        self._mover.note(key, decision.moving, request)
        return body, decision

    def _suspected(self, node: str, key: str, now: datetime, *, blames_node: bool) -> None:
        """`node` refused `key`'s pod: for its own reasons (`blames_node`), cooled for every job once it
        refused another namespace's too."""
        if self._suspects.refused(node, key, now.timestamp(), blames_node=blames_node):
            self._cycle.cooldowns.note(node, (now + self._config.node_cooldown).timestamp())

    def _queue_pod(self, key: str) -> None:
        """A pod of the pod route waits in the one queue while it is gated and Horus can place it."""
        assert self._podroute is not None
        waiting = self._podroute.waiting(key)
        refused = tenancy.refused_priority(waiting.job.priority, self._reader.tenancy) if waiting else None
        if refused is not None:  # its own horus.dev/priority: bounded as a DLJob's spec.priority is
            self._podroute.refuse(key, refused)
        if waiting is None or refused is not None:  # released, gone, or not placeable: nothing kept here
            self._pending.pop(key, None)
            self._records.forget(key)
            return
        request = self._reader.shared(waiting.request, waiting.binding)
        self._pending[key] = Pending(0, waiting.job, waiting.workload, waiting.binding, request)

    async def _before_placing(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        """Store what a decision records first (what deleting its pods takes away, a forgiven OOM), then
        delete the pods it names: a stuck pod at once (its node may never confirm), a moved one with its
        job's grace period."""
        meta, grace = body["metadata"], decision.delete_grace_s
        if decision.store_first:
            patch = status.loop_patch(body.get("status") or {}, decision.status)
            if await self.reports.write(body, patch) is None:
                return  # deleted meanwhile
        if decision.out_of_memory:
            self._metrics.oom_recovered()
            self.reports.post_later(body, kind="Warning", reason=oom.REASON, message=decision.out_of_memory)
        for name in decision.delete_pods:
            log.info("deleting pod %s/%s: %s", meta["namespace"], name, decision.delete_reason)
            await self._kube.delete_pod(meta["namespace"], name, grace or 0)
            if not grace:  # gone at once: its job may be placed again in this cycle
                self._cache.deleted_pod(job_key(body), name)
            if grace is None:
                self.reports.post_later(
                    body, kind="Warning", reason="Replacing", message=decision.delete_reason
                )

    async def settle(self) -> None:
        """Wait for the status writes and Events in flight (tests, shutdown)."""
        await self.reports.settle()
        if self._podroute is not None:
            await self._podroute.settle()

    def _forget(self, key: str) -> None:
        self._mover.forget(key)
        self._suspects.forget(key)
        self._pending.pop(key, None)
        self._records.forget(key)

    def _gauges(self) -> metrics.Gauges:
        """The cluster's gauges (`metrics.refresh`): why jobs wait, phases, GPUs in use and shared."""
        waiting = [
            metrics.pending_reason(_told(self._records.get(k)), moving=p.moving)
            for k, p in self._pending.items()
            if not PodRoute.owns(k)  # DLJobs only: the pod route is not in the metrics yet
        ]
        waiting += [metrics.RESOLVING] * self._reader.reading
        phases = [(body.get("status") or {}).get("phase") or "Pending" for body in self._cache.jobs.values()]
        gpus = sum(len(n.labelled.gpus) for n in self._cache.node_views.values() if n.labelled)
        return metrics.gauges(waiting, phases, self._cache.all_pods(), gpus)


def _told(record: JobRecord | None) -> str:
    return record.waiting if record is not None else ""


async def _nothing() -> list[dict[str, Any]]:
    return []
