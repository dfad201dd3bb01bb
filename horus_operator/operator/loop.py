"""The scheduling loop: one asyncio task that turns cache changes into status updates and placements.

Each cycle (1) re-decides every job whose DLJob or pods changed (`reconcile.decide`), writing only the
statuses that differ, and (2) hands all jobs waiting for a pod to the placement policy in ONE call on a
fresh `ClusterSnapshot`, then creates the pods concurrently. Pod creation is idempotent (deterministic
names, 409 = done), so a crash between any two steps is repaired by the next cycle of any replica.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from horus_operator.operator import cluster_view, jobspec, pods, reconcile, status
from horus_operator.operator.apierrors import ApiError
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.feasibility import Capacity, unsatisfiable
from horus_operator.operator.jobspec import InvalidJob, JobSpec, WorkloadResolver
from horus_operator.operator.kube import Kube
from horus_operator.operator.messages import placed_message
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.registry import explain_wait, queue_order
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, Policy, RunningJob
from horus_operator.prediction.api import JobPrediction, Predictor, Workload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopConfig:
    namespace: str | None = None  # None: all namespaces
    resync_every: float = 10.0  # seconds; re-decides every job (timers such as unschedulable pods)
    unschedulable_grace: timedelta = timedelta(seconds=30)
    max_batch: int = 1000  # most waiting jobs considered per cycle
    max_explanations: int = 50  # waiting jobs (from the head of the queue) told why, per cycle
    node_cooldown: timedelta = timedelta(minutes=2)  # a node that left a Horus pod unschedulable is skipped
    # Status writes and Events in flight at once. Pod creation is the critical path of a burst; reports
    # queue behind it instead of competing for the API server (they converge moments later).
    report_concurrency: int = 4
    batch_window: float = 0.2  # seconds to let a burst of watch events gather before a cycle
    telemetry_ttl: float = 60.0  # seconds; see operator/telemetry.py


@dataclass
class _Pending:
    attempt: int
    job: JobSpec
    workload: Workload


class SchedulingLoop:
    def __init__(
        self,
        *,
        kube: Kube,
        cache: ClusterCache,
        policy: Policy,
        predictor: Predictor,
        resolver: WorkloadResolver,
        config: LoopConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._kube, self._cache, self._policy, self._predictor = kube, cache, policy, predictor
        self._resolver, self._config, self._clock = resolver, config, clock
        self._pending: dict[str, _Pending] = {}
        self._waiting: dict[str, str] = {}  # job key -> why it still waits
        self._workloads: dict[tuple[str, int], Workload | InvalidJob] = {}  # (uid, generation) -> verdict
        self._unsatisfiable: dict[str, InvalidJob] = {}
        self._predictions: dict[tuple[Workload, str], JobPrediction] = {}
        self._explained_at: dict[str, datetime] = {}
        self._events: set[asyncio.Task[None]] = set()  # Events being posted
        self._cooling: dict[str, datetime] = {}  # node -> until when placements avoid it
        self._writing: dict[str, asyncio.Task[None]] = {}  # job key -> its status write in flight
        self._rewrite: set[str] = set()  # jobs re-decided while a write was in flight
        self._reporting = asyncio.Semaphore(config.report_concurrency)

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
            await asyncio.sleep(1.0)
            return False
        return True

    async def resync(self) -> None:
        """Rebuild the cache from full lists: the API server is the truth after (re)gaining the lease."""
        namespace = self._config.namespace
        jobs, horus_pods, nodes = await asyncio.gather(
            self._kube.list_dljobs(namespace), self._kube.list_horus_pods(namespace), self._kube.list_nodes()
        )
        self._cache.replace_all(jobs=jobs, pods=horus_pods, nodes=nodes)
        self._pending.clear()
        log.info("resynced: %d DLJobs, %d Horus pods, %d nodes", len(jobs), len(horus_pods), len(nodes))

    async def _idle(self) -> None:
        if not self._cache.dirty:
            try:
                await asyncio.wait_for(self._cache.wake.wait(), timeout=self._config.resync_every)
            except TimeoutError:
                self._cache.mark(self._cache.jobs)
        await asyncio.sleep(self._config.batch_window)

    async def cycle(self) -> None:
        """Decide the changed jobs, place what waits, then write: a job placed in this cycle gets one
        status write (Scheduled), not two (Queued, then Scheduled)."""
        now = self._clock()
        started = time.perf_counter()
        dirty = self._cache.take_dirty()
        decisions = {key: await self._decide(key, now) for key in sorted(dirty)}
        # Stuck pods go before placement: a re-decision after placing sees only the new pod.
        await asyncio.gather(*(self._remove_stuck(*d) for d in decisions.values() if d and d[1].delete_pods))
        placed: set[str] = set()
        if self._pending and (dirty or self._cache.nodes_changed):
            self._cache.nodes_changed = False
            placed = await self._place(now)
            for key in placed:
                decisions[key] = await self._decide(key, now)
        writes = [d for d in decisions.values() if d is not None and _needs_write(*d)]
        for body, decision in writes:
            self._write_later(body, decision)
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
            self._forget(key)
            return None
        job = jobspec.parse(body)
        workload = await self._workload(job)
        current = body.get("status") or {}
        decision = reconcile.decide(
            job,
            current,
            list(self._cache.pods.get(key, {}).values()),
            reconcile.Context(
                now=now,
                nodes=self._cache.nodes.keys(),
                unschedulable_grace=self._config.unschedulable_grace,
                verdict=workload if isinstance(workload, InvalidJob) else None,
                unsatisfiable=self._unsatisfiable.get(key),
                waiting_message=self._waiting.get(key, ""),
                extra=status.owned_by_others(current),
            ),
        )
        if decision.avoid_node:
            self._cooling[decision.avoid_node] = now + self._config.node_cooldown
        if decision.place_attempt is not None and isinstance(workload, Workload):
            self._pending[key] = _Pending(decision.place_attempt, job, workload)
        else:
            self._pending.pop(key, None)
        return body, decision

    async def _remove_stuck(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        meta = body["metadata"]
        for name in decision.delete_pods:
            log.info("deleting pod %s/%s: %s", meta["namespace"], name, decision.delete_reason)
            await self._kube.delete_pod(meta["namespace"], name)
            self._post_later(body, kind="Warning", reason="Replacing", message=decision.delete_reason)

    def _write_later(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        """Write a status without holding up the next cycle. One write per job at a time, in order: while
        one is in flight the job is re-decided once it lands (against the status it stored)."""
        key = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
        if key in self._writing:
            self._rewrite.add(key)
            return
        task = asyncio.create_task(self._apply(body, decision))
        self._writing[key] = task
        task.add_done_callback(lambda done: self._written(key, done))

    def _written(self, key: str, task: asyncio.Task[None]) -> None:
        self._writing.pop(key, None)
        failed = not task.cancelled() and task.exception() is not None
        if failed:
            log.warning("status write for %s failed (retried): %s", key, task.exception())
        if failed or key in self._rewrite:
            self._rewrite.discard(key)
            self._cache.mark([key])

    async def settle(self) -> None:
        """Wait for the status writes and Events in flight (tests, shutdown)."""
        await asyncio.gather(*self._writing.values(), *self._events, return_exceptions=True)

    async def _apply(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        async with self._reporting:
            await self._write_status(body, decision)

    async def _write_status(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        current = body.get("status") or {}
        if decision.status != current:
            await status.write(self._kube, self._cache, body, status.loop_patch(current, decision.status))
            if (
                decision.status.get("phase") == "Failed"
                and (body.get("status") or {}).get("phase") != "Failed"
            ):
                self._post_later(body, kind="Warning", reason="Failed", message=decision.status["message"])

    async def _workload(self, job: JobSpec) -> Workload | InvalidJob:
        cache_key = (job.uid, job.generation)
        if cache_key not in self._workloads:
            try:  # an ONNX job reads its ConfigMap: off the event loop
                resolve = self._resolver.workload
                self._workloads[cache_key] = await self._kube.call(resolve, job) if job.onnx else resolve(job)
            except InvalidJob as invalid:
                self._workloads[cache_key] = invalid
        return self._workloads[cache_key]

    def _post_later(self, body: Mapping[str, Any], *, kind: str, reason: str, message: str) -> None:
        """Post an Event without holding up the cycle (Events are best effort)."""
        task = asyncio.create_task(self._post_event(body, kind=kind, reason=reason, message=message))
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def _post_event(self, body: Mapping[str, Any], *, kind: str, reason: str, message: str) -> None:
        async with self._reporting:
            await self._kube.post_event(body, kind=kind, reason=reason, message=message)

    def _forget(self, key: str) -> None:
        self._explained_at.pop(key, None)
        self._pending.pop(key, None)
        self._waiting.pop(key, None)
        self._unsatisfiable.pop(key, None)

    async def _place(self, now: datetime) -> set[str]:
        """Place waiting jobs; returns the keys whose pods (or verdicts) changed."""
        snapshot = cluster_view.build_snapshot(
            self._cache.nodes.values(),
            self._cache.all_pods(),
            now=now.timestamp(),
            gpunodes=self._cache.gpunodes.values(),
            telemetry_ttl=self._config.telemetry_ttl,
        )
        snapshot = self._without_cooling_nodes(snapshot, now)
        queue = self._queue(snapshot)
        if not queue:
            return set()
        assignments = await self._schedule_all(snapshot, queue)
        await asyncio.gather(*(self._bind(a, snapshot) for a in assignments))
        placed = {a.job for a in assignments}
        waiting = [r for r in queue if r.key not in placed]
        if waiting:
            after = _with_assignments(snapshot, assignments, queue)
            after = dataclasses.replace(
                after, index=ClusterIndex.build(after)
            )  # one index for all explanations
            for request in waiting[: self._config.max_explanations]:
                self._note_waiting(request, after, now)
        return placed | {r.key for r in queue if r.key in self._cache.dirty}

    async def _schedule_all(self, snapshot: ClusterSnapshot, queue: list[JobRequest]) -> list[Assignment]:
        """Call the policy until it places nothing more: one call looks only a bounded way down the
        queue (`Limits.scan_depth`), and a burst should not wait a cycle per slice."""
        assignments: list[Assignment] = []
        remaining = queue
        while remaining:
            view = _with_assignments(snapshot, assignments, queue) if assignments else snapshot
            more = await asyncio.to_thread(self._policy.schedule, view, remaining)
            if not more:
                break
            assignments += more
            chosen = {a.job for a in more}
            remaining = [r for r in remaining if r.key not in chosen]
        return assignments

    def _without_cooling_nodes(self, snapshot: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        """Nodes that recently left a Horus pod unschedulable (CPU, memory, taints the policy cannot see)
        count as unschedulable for a while, so the re-placed job goes elsewhere."""
        self._cooling = {node: until for node, until in self._cooling.items() if until > now}
        if not self._cooling:
            return snapshot
        nodes = tuple(
            dataclasses.replace(node, schedulable=False) if node.name in self._cooling else node
            for node in snapshot.nodes
        )
        return dataclasses.replace(snapshot, nodes=nodes)

    def _queue(self, snapshot: ClusterSnapshot) -> list[JobRequest]:
        queue = []
        capacity = Capacity.of(snapshot)
        for key, pending in list(self._pending.items()):
            problem = unsatisfiable(pending.job, pending.workload, capacity, self._predict)
            if problem is not None:
                self._unsatisfiable[key] = problem
                self._pending.pop(key)
                self._cache.mark([key])
                continue
            submitted = _created(self._cache.jobs[key])
            queue.append(jobspec.request(pending.job, pending.workload, submitted))
        queue.sort(key=queue_order)
        return queue[: self._config.max_batch]

    def _predict(self, workload: Workload, gpu: str) -> JobPrediction:
        if (workload, gpu) not in self._predictions:
            self._predictions[(workload, gpu)] = self._predictor.job(workload, gpu)
        return self._predictions[(workload, gpu)]

    async def _bind(self, assignment: Assignment, snapshot: ClusterSnapshot) -> None:
        pending = self._pending.pop(assignment.job, None)
        body = self._cache.jobs.get(assignment.job)
        if pending is None or body is None:
            return
        placement = pods.Placement(
            job=pending.job,
            request=jobspec.request(pending.job, pending.workload, _created(body)),
            assignment=assignment,
            attempt=pending.attempt,
            hostname=cluster_view.hostname(self._cache.nodes[assignment.node]),
            gpu_uuids=_uuids(snapshot, assignment),
        )
        try:
            stored, created = await self._kube.create_pod(pods.build_pod(placement))
        except ApiError as error:
            if error.status in (400, 403, 422):  # the template itself is refused: the user must fix it
                invalid = InvalidJob(
                    "spec.template", pending.job.name, f"pod refused: {error.reason} {error.body}"
                )
                self._workloads[(pending.job.uid, pending.job.generation)] = invalid
                self._cache.mark([assignment.job])
                return
            raise
        self._waiting.pop(assignment.job, None)
        self._cache.put_pod(stored)
        if created:
            self._post_later(body, kind="Normal", reason="Placed", message=placed_message(assignment))

    def _note_waiting(self, request: JobRequest, snapshot: ClusterSnapshot, now: datetime) -> None:
        """Say why a job still waits (status message and an Event), at most once per resync period: the
        explanation costs a scan of all GPUs."""
        last = self._explained_at.get(request.key)
        if last is not None and (now - last).total_seconds() < self._config.resync_every:
            return
        self._explained_at[request.key] = now
        message = explain_wait(self._policy, snapshot, request)
        if self._waiting.get(request.key) == message:
            return
        self._waiting[request.key] = message
        self._cache.mark([request.key])
        body = self._cache.jobs.get(request.key)
        if body is not None:
            self._post_later(body, kind="Normal", reason="Waiting", message=message)


def _needs_write(body: Mapping[str, Any], decision: reconcile.Decision) -> bool:
    return decision.status != (body.get("status") or {})


def _created(body: Mapping[str, Any]) -> float:
    stamp = body["metadata"].get("creationTimestamp")
    if not stamp:
        return 0.0
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _uuids(snapshot: ClusterSnapshot, assignment: Assignment) -> tuple[str | None, ...]:
    node = next((n for n in snapshot.nodes if n.name == assignment.node), None)
    if node is None:
        return ()
    by_index = {gpu.index: gpu.uuid for gpu in node.gpus}
    return tuple(by_index.get(i) for i in assignment.gpu_indices)


def _with_assignments(
    snapshot: ClusterSnapshot, assignments: list[Assignment], queue: list[JobRequest]
) -> ClusterSnapshot:
    """`snapshot` as it is once `assignments` run: the view a waiting job's explanation must see."""
    requests = {r.key: r for r in queue}
    placed = tuple(
        RunningJob(requests[a.job], a.node, a.gpu_indices) for a in assignments if a.job in requests
    )
    return dataclasses.replace(snapshot, running=snapshot.running + placed, index=None)
