"""The scheduling loop: one asyncio task that turns cache changes into status updates and placements.

Each cycle (1) re-decides every job whose DLJob or pods changed (`reconcile.decide`), writing only the
statuses that differ, (2) runs the scheduling cycle (`placement.cycle`, the one the simulator runs)
with every job waiting for a pod, on the cluster's `ClusterIndex`, kept across cycles from the cache's
changes as the simulator keeps its own (`placement.keeper`; rebuilt on a resync), then creates the
pods concurrently (DRA-bound ones after their ResourceClaims), and (3) brings Horus's claims in line
with its pods (`binding.ClaimKeeper`). Creation is idempotent (deterministic names, 409 = done), so a
crash between any two steps is repaired by the next cycle of any replica. Status writes and Events:
`reports.Reporter`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from horus_operator.api import dljob
from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.api.keys import GPU_DRIVER
from horus_operator.operator import cluster_view, metrics, status
from horus_operator.operator.apierrors import ApiError
from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.config import OperatorConfig
from horus_operator.operator.dra import claims
from horus_operator.operator.dra.keeper import ClaimKeeper
from horus_operator.operator.jobs import jobspec, oom, pods, reconcile, refusals, template, tenancy, volumes
from horus_operator.operator.jobs.feasibility import as_invalid
from horus_operator.operator.jobs.graphs import GraphQueue
from horus_operator.operator.jobs.jobspec import WorkloadResolver
from horus_operator.operator.kube import Kube
from horus_operator.operator.messages import placed_message
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.moves import preemption
from horus_operator.operator.moves.mover import Mover
from horus_operator.operator.moves.preempter import Preempter
from horus_operator.operator.podroute.route import PodRoute
from horus_operator.operator.reports import Reporter, needs_write
from horus_operator.placement.base import PredictingPolicy
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.keeper import Holders, IndexKeeper
from horus_operator.placement.moves import MoveSettings
from horus_operator.placement.preemption import PreemptionSettings
from horus_operator.placement.queueorder import Ordering, QueueOrder
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, Node, RunningJob
from horus_operator.placement.waitqueue import WaitQueue
from horus_operator.prediction.api import Workload

log = logging.getLogger(__name__)
T = TypeVar("T")

READING_GRAPH = "waiting: reading its model graph (spec.model.onnx)"
READING_CONFIG = "waiting: reading its model config (spec.model.huggingface.configMap)"
COUNTING_SHAPE = "waiting: counting its model at spec.model.inputShape"
MAX_NAME_CONFLICTS = 3  # re-decisions (one per resync period) that meet a foreign pod before the job fails


@dataclass(frozen=True)
class LoopConfig:
    namespace: str | None = None  # None: all namespaces
    # seconds; re-decides every job (timers such as unschedulable pods)
    resync_every: float = OperatorConfig.resync_seconds
    unschedulable_grace: timedelta = timedelta(seconds=OperatorConfig.unschedulable_grace_seconds)
    # a pod on a node NotReady longer is re-placed
    not_ready_grace: timedelta = timedelta(seconds=OperatorConfig.not_ready_grace_seconds)
    max_batch: int = 1000  # most waiting jobs considered per cycle
    max_explanations: int = 50  # waiting jobs (from the head of the queue) told why, per cycle
    node_cooldown: timedelta = timedelta(minutes=2)  # a node to blame for an unschedulable pod is skipped
    # Status writes and Events in flight at once. Pod creation is the critical path of a burst; reports
    # queue behind it instead of competing for the API server (they converge moments later).
    report_concurrency: int = 4
    batch_window: float = 0.2  # seconds to let a burst of watch events gather before a cycle
    telemetry_ttl: float = OperatorConfig.telemetry_ttl_seconds  # seconds; see operator/telemetry/gpunodes.py
    binding: dljob.Binding = OperatorConfig.binding  # for DLJobs that do not set spec.binding
    sharing: claims.Sharing = OperatorConfig.sharing  # how co-tenants share a GPU (claims.Sharing)
    dra_served: bool = False  # the API server serves resource.k8s.io/v1: claims and slices are watched
    moves: MoveSettings = field(default_factory=MoveSettings)  # moving jobs that allow it (moves/mover.py)
    graphs_per_namespace: int = 2  # ONNX graphs of one namespace read at once (operator/jobs/graphs.py)
    own_namespace: str = OperatorConfig.lease_namespace  # where the operator runs: its tenancy ConfigMap
    ordering: Ordering = field(default_factory=Ordering)  # the queue order (placement/queueorder.py)
    # under `las`: running jobs preempted for waiting ones (moves/preempter.py)
    preemption: PreemptionSettings = field(default_factory=PreemptionSettings)


@dataclass
class _Pending:
    """A job waiting for its next pod, as its latest decision left it."""

    attempt: int
    job: JobSpec
    workload: Workload
    binding: str
    request: JobRequest  # what the cycle places: built once per decision
    moving: bool = False  # between pods of a move: placed on its target if that still fits


@dataclass(slots=True)
class _JobRecord:
    """What the loop has told or learnt of one DLJob between decisions; forgotten with the job."""

    waiting: str = ""  # why it still waits (its status message; an Event when it changes)
    explained_at: datetime | None = None  # its last wait explanation: one per resync period at most
    place: dict[str, Any] | None = None  # its status.queue, while it waits
    unsatisfiable: InvalidJob | None = None  # no node of this cluster could ever take it
    name_conflicts: int = 0  # tries that met a foreign pod of its pod's name


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
        self._claims = (
            ClaimKeeper(kube=kube, cache=cache, sharing=config.sharing) if config.dra_served else None
        )
        self._foreign: dict[str, str] = {}  # GPU UUID -> the claim not Horus's that holds it
        self._graphs = GraphQueue(
            lambda job: kube.call(resolver.workload, job),
            lambda key: cache.mark([key]),
            per_namespace=config.graphs_per_namespace,
        )
        self._pending: dict[str, _Pending] = {}  # the jobs to place: cleared on resync, re-decided
        self._records: dict[str, _JobRecord] = {}  # job key -> what the loop holds for it
        self._workloads: dict[tuple[str, int], Workload | InvalidJob] = {}  # (uid, generation) -> verdict
        self._gpu_nodes: tuple[Node, ...] = ()  # the last view's nodes (`gpu_nodes`'s `previous`)
        self._kept = IndexKeeper()  # the cluster's index, by the cache's changes (`_view`)
        self._tenancy = tenancy.Tenancy()
        self._suspects = refusals.NodeSuspects(window_s=config.node_cooldown.total_seconds())
        self._tenancy_read_at: datetime | None = None

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
        dra = self._claims is not None
        with self._cache.resyncing():  # the watches keep running: their events meanwhile beat the lists
            jobs, horus_pods, nodes, resource_claims, resource_slices, volume_claims = await asyncio.gather(
                self._kube.list_dljobs(namespace),
                self._kube.list_horus_pods(namespace),
                self._kube.list_nodes(),
                self._kube.list_claims(namespace) if dra else _nothing(),
                self._kube.list_slices() if dra else _nothing(),
                self._kube.list_volume_claims(namespace),
            )
            self._cache.replace_all(
                jobs=jobs,
                pods=horus_pods,
                nodes=nodes,
                claims=resource_claims,
                resource_slices=resource_slices,
                volume_claims=volume_claims,
            )
        await self._read_tenancy(self._clock())
        if self._podroute is not None:
            await self._podroute.resync()
        if self._on_resync is not None:
            await self._on_resync()
        self._pending.clear()
        self._mover.resynced()
        log.info(
            "resynced: %d DLJobs, %d Horus pods, %d nodes, %d ResourceClaims, %d ResourceSlices",
            len(jobs),
            len(horus_pods),
            len(nodes),
            len(resource_claims),
            len(resource_slices),
        )

    async def _read_tenancy(self, now: datetime) -> None:
        """The platform team's tenancy setting, read again every resync period; a change re-judges
        every job."""
        self._tenancy_read_at = now
        data = await self._kube.read_config_map_data(self._config.own_namespace, tenancy.CONFIG_MAP)
        read = tenancy.parse(data)
        if read != self._tenancy:
            log.info("tenancy: %s", read)
            self._tenancy = read
            self._cache.mark(self._cache.jobs)

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
        if (now - (self._tenancy_read_at or now)).total_seconds() >= self._config.resync_every:
            await self._read_tenancy(now)
        # Moves first: each is recorded in its job's status, which marks the job for this cycle's
        # decisions (they delete its pod and hold its target before anything is placed).
        await self._mover.plan(lambda: self._snapshot(now), now, waiting=bool(self._pending))
        if self._preempter is not None:
            waiting = (p.request for p in self._pending.values() if not p.moving)
            await self._preempter.plan(lambda: self._snapshot(now), waiting, now)
        dirty = self._cache.take_dirty()
        routed = self._podroute.take_dirty() if self._podroute is not None else set()
        if self._podroute is not None:
            for stuck in self._podroute.stop_unschedulable(self._config.unschedulable_grace):
                if refusals.judge(stuck.scheduling_message).blame != refusals.Blame.JOB:
                    self._suspected(stuck.node, f"{stuck.namespace}/{stuck.name}", now)
        for key in routed:
            self._queue_pod(key)
        if self._claims is not None:
            self._foreign = claims.foreign_holders(self._cache.claims.values(), self._cache.devices())
        decisions = {key: await self._decide(key, now) for key in sorted(dirty)}
        # Stuck pods go before placement: a re-decision after placing sees only the new pod.
        first = [d for d in decisions.values() if d and (d[1].delete_pods or d[1].store_first)]
        await asyncio.gather(*(self._before_placing(*d) for d in first))
        placed: set[str] = set()
        if self._pending and (dirty or routed or self._cache.nodes_changed):
            self._cache.nodes_changed = False
            placed = await self._place(now)
            for key in placed:
                decisions[key] = await self._decide(key, now)
        if self._claims is not None and (dirty or self._cache.claims_changed):
            await self._claims.reconcile()
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
            self._forget(key)
            return None
        job = dljob.parse(body)
        record = self._record(key)
        current = body.get("status") or {}
        job_pods = self._cache.job_pods(key)
        # A final job is never resolved again (after a restart, a Failed job's graph is not re-read).
        workload = None if reconcile.is_final(job, current) else self._workload(job)
        verdict = (
            workload if isinstance(workload, InvalidJob) else self._beyond_tenancy(job, workload, job_pods)
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
                waiting_message=record.waiting or _reading(job),
                queue=record.place,
                extra=status.owned_by_others(current),
                claims=self._cache.claims,
                foreign=self._foreign,
                preempts=self._preempter is not None,
                oom=ending,
            ),
        )
        if node := decision.avoid_node or decision.suspect_node:  # passed over; cooled if to blame (refusals)
            self._metrics.refused(metrics.UNSCHEDULABLE)
        if decision.avoid_node:
            self._cycle.cooldowns.note(node, (now + self._config.node_cooldown).timestamp())
        elif node:
            self._suspected(node, key, now)
        placeable = workload if isinstance(workload, Workload) and verdict is None else None
        # A request only for a job to place or between pods: most jobs re-decided are running
        wanted = decision.place_attempt is not None or decision.moving is not None
        request = None
        if placeable and wanted:  # past the nodes that refused its pods lately
            avoid = self._suspects.avoided_by(key, now.timestamp())
            request = self._request(job, placeable, body, decision.status, avoid)
        if decision.place_attempt is not None and placeable is not None and request is not None:
            moving = decision.move_to is not None
            binding = self._binding(job)
            self._pending[key] = _Pending(decision.place_attempt, job, placeable, binding, request, moving)
        else:
            self._pending.pop(key, None)
        self._mover.note(key, decision.moving, request)
        return body, decision

    def _suspected(self, node: str, key: str, now: datetime) -> None:
        """`node` refused `key`'s pod: cooled for every job once it refused another namespace's too."""
        if self._suspects.refused(node, key, now.timestamp()):
            self._cycle.cooldowns.note(node, (now + self._config.node_cooldown).timestamp())

    def _queue_pod(self, key: str) -> None:
        """A pod of the pod route waits in the one queue while it is gated and Horus can place it."""
        assert self._podroute is not None
        waiting = self._podroute.waiting(key)
        refused = tenancy.refused_priority(waiting.job.priority, self._tenancy) if waiting else None
        if refused is not None:  # its own horus.dev/priority: bounded as a DLJob's spec.priority is
            self._podroute.refuse(key, refused)
        if waiting is None or refused is not None:  # released, gone, or not placeable: nothing kept here
            self._pending.pop(key, None)
            self._records.pop(key, None)
            return
        request = self._shared(waiting.request, waiting.binding)
        self._pending[key] = _Pending(0, waiting.job, waiting.workload, waiting.binding, request)

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

    def _binding(self, job: JobSpec) -> str:
        return dljob.binding_of(job, default=self._config.binding, dra_served=self._config.dra_served)

    def _beyond_tenancy(
        self, job: JobSpec, workload: Workload | None, job_pods: Sequence[pods.PodView]
    ) -> InvalidJob | None:
        """What a DLJob-only tenant's template may not ask (tenancy.py). Judged at each decision of a job
        not yet placed, since the platform team's setting may change; a job already running goes on."""
        if workload is None or job_pods:
            return None
        try:
            tenancy.check_job(job, self._tenancy)
        except InvalidJob as invalid:
            return invalid
        return None

    def _workload(self, job: JobSpec) -> Workload | InvalidJob | None:
        """The job's workload, or why it cannot run; None while its ONNX graph or Hugging Face config is
        read from its ConfigMap, or its graph counted at spec.model.inputShape, in the background
        (`graphs.GraphQueue`: the job is re-decided once it is)."""
        cache_key = (job.uid, job.generation)
        if cache_key not in self._workloads:
            try:
                template.check(job.template)
                self._binding(job)  # a binding this cluster cannot give fails the job like a bad model
                verdict = self._graphs.verdict(job) if job.resolved_off_loop else self._resolver.workload(job)
            except InvalidJob as invalid:
                verdict = invalid
            if verdict is None:
                return None
            if isinstance(verdict, InvalidJob):
                self._metrics.refused(metrics.INVALID_SPEC)
            if isinstance(verdict, Workload):  # what the pod may keep busy beside its training loop
                verdict = dataclasses.replace(verdict, host_cpus=template.host_cpus(job.template))
            self._workloads[cache_key] = verdict
        return self._workloads[cache_key]

    def _record(self, key: str) -> _JobRecord:
        return self._records.setdefault(key, _JobRecord())

    def _forget(self, key: str) -> None:
        self._mover.forget(key)
        self._suspects.forget(key)
        self._pending.pop(key, None)
        self._records.pop(key, None)

    def _snapshot(self, now: datetime) -> ClusterSnapshot:
        """The cluster as the API server shows it, with the targets of jobs between pods and the GPUs of
        preempted pods still stopping held."""
        stopping = tuple(job for jobs in self._stopping().values() for job in jobs)
        snapshot = ClusterSnapshot(
            nodes=self._nodes_now(now),
            running=cluster_view.running_jobs([*self._cache.all_pods(), *self._routed()]) + stopping,
            now=now.timestamp(),
        )
        return self._mover.reserved(snapshot, but=[k for k, p in self._pending.items() if p.moving])

    def _view(self, now: datetime) -> ClusterSnapshot:
        """The cluster as the API server shows it, with the targets of all jobs between pods held, on
        the kept index: only the jobs whose pods changed since the last view are read again."""
        changed = self._cache.take_holders_changed()
        if changed is None:  # a resync: the cache was replaced
            self._kept.forget()
        nodes = self._nodes_now(now)
        holders = self._kept.index(
            nodes,
            {key: self._holding(key) for key in changed or ()},
            every=lambda: {key: self._holding(key) for key in self._cache.pods},
            fleeting=self._fleeting_holders(),
        )
        return ClusterSnapshot(nodes=nodes, now=now.timestamp(), index=holders)

    def _nodes_now(self, now: datetime) -> tuple[Node, ...]:
        self._gpu_nodes = cluster_view.gpu_nodes(
            self._cache.node_views.values(),
            now=now.timestamp(),
            gpunodes=self._cache.gpunodes.values(),
            telemetry_ttl=self._config.telemetry_ttl,
            slice_gpus=self._cache.slice_gpus(),
            claimed=self._foreign,
            previous=self._gpu_nodes,
        )
        return self._gpu_nodes

    def _holding(self, key: str) -> tuple[RunningJob, ...]:
        return cluster_view.running_jobs(self._cache.job_pods(key))

    def _routed(self) -> list[pods.PodView]:
        return self._podroute.placed() if self._podroute is not None else []

    def _fleeting_holders(self) -> Holders:
        """The holders read whole for every view (few): the pods the pod route released, the targets
        held for jobs between pods, and preempted pods still stopping."""
        routed = {f"pod-route {pod.namespace}/{pod.name}": pod for pod in self._routed()}
        holders: dict[str, tuple[RunningJob, ...]] = {
            source: cluster_view.running_jobs([pod]) for source, pod in routed.items()
        }
        holders.update((f"move {job.request.key}", (job,)) for job in self._mover.held())
        holders.update((f"preempted {key}", jobs) for key, jobs in self._stopping().items())
        return holders

    def _stopping(self) -> dict[str, tuple[RunningJob, ...]]:
        """The GPUs that preempted pods still being deleted hold, by job key."""
        return self._preempter.held() if self._preempter is not None else {}

    def _gauges(self) -> metrics.Gauges:
        """The cluster's gauges (`metrics.refresh`): why jobs wait, phases, GPUs in use and shared."""
        records = self._records
        waiting = [
            metrics.pending_reason(records[k].waiting if k in records else "", moving=p.moving)
            for k, p in self._pending.items()
            if not PodRoute.owns(k)  # DLJobs only: the pod route is not in the metrics yet
        ]
        waiting += [metrics.RESOLVING] * self._graphs.reading
        phases = [(body.get("status") or {}).get("phase") or "Pending" for body in self._cache.jobs.values()]
        gpus = sum(len(n.labelled.gpus) for n in self._cache.node_views.values() if n.labelled)
        return metrics.gauges(waiting, phases, self._cache.all_pods(), gpus)

    def _request(
        self,
        job: JobSpec,
        workload: Workload,
        body: Mapping[str, Any],
        current: Mapping[str, Any],
        avoid: frozenset[str],
    ) -> JobRequest:
        """What the cycle places; from its status as decided (`current`): its attained service and when
        it queued again after a preemption (`moves/preemption.py`), and whether it runs alone since it
        ran out of memory (`jobs/oom.py`); past the nodes that refused its pods lately (`avoid`)."""
        binding = self._binding(job)
        request = self._shared(jobspec.request(job, workload, dljob.created_at(body), binding), binding)
        return dataclasses.replace(
            oom.as_recorded(request, current),
            remaining_s=self._length_s(job, workload),
            attained_gpu_s=preemption.attained_gpu_s(current),
            queued_at=preemption.queued_at(current),
            avoid_nodes=avoid,
        )

    def _shared(self, request: JobRequest, binding: str) -> JobRequest:
        """`request`, its workload saying whether its GPU's co-tenants time-slice (`claims.time_slices`):
        the placement's predictor keeps those within the GPU's time (`runtime.deciding_predictor`)."""
        if not claims.time_slices(self._config.sharing, binding):
            return request
        sliced = dataclasses.replace(request.workload, time_sliced=True)
        return dataclasses.replace(request, workload=sliced)

    def _length_s(self, job: JobSpec, workload: Workload) -> float | None:
        """The job's work alone, as the queue orders read it: `spec.totalSteps` at the predicted step
        time on the cluster's most common GPU type; None without totalSteps or a step model."""
        gpu = self._cache.nodes_summary().common_gpu
        if not job.total_steps or gpu is None:
            return None
        step_s = self._cycle.step_s(workload, gpu)
        return job.total_steps * step_s if step_s else None

    async def _place(self, now: datetime) -> set[str]:
        """Place waiting jobs (a moved one on its target where it still fits); returns the keys whose
        pods (or verdicts) changed."""
        started, started_cpu = time.perf_counter(), time.thread_time()
        moving = [k for k, p in self._pending.items() if p.moving]
        moved = self._mover.retarget(self._snapshot(now), moving) if moving else {}
        view = self._view(now)
        queue = self._cycle.queue(
            pending.request for key, pending in self._pending.items() if key not in moved
        )
        view_cpu_s = time.thread_time() - started_cpu
        # Off the event loop: a cycle over a long queue takes long enough to delay watch events.
        try:
            result, cycle_cpu_s = await asyncio.to_thread(
                _with_thread_cpu,
                self._cycle.run,
                view,
                queue,
                explain=lambda request: self._explanation_due(request, now),
            )
        except Exception:  # a policy that failed half-way may have left its tentative jobs in the index
            self._kept.forget()
            raise
        decided_ms = 1000 * (time.perf_counter() - started)  # the snapshot and the cycle, before any pod
        # Its own CPU, without the waits for a core or the GIL that the wall time includes
        decided_cpu_ms = 1000 * (view_cpu_s + cycle_cpu_s)
        self._metrics.decided(decided_ms / 1000)
        for key, problem in result.unsatisfiable.items():
            invalid = as_invalid(self._pending.pop(key).job, problem)
            if self._podroute is not None and self._podroute.owns(key):
                self._podroute.refuse(key, invalid)  # judged again when the pod or a resync says so
                continue
            self._metrics.refused(metrics.UNSATISFIABLE)
            self._record(key).unsatisfiable = invalid
            self._cache.mark([key])
        assignments = [*moved.values(), *result.assignments]
        nodes = {node.name: node for node in view.nodes}
        if self._claims is not None:
            await self._claims.prepare(self._claim_holders(assignments, nodes))
        await asyncio.gather(*(self._bind(a, result.placed.get(a.job), nodes, now) for a in assignments))
        for key, message in result.explanations.items():
            self._note_waiting(key, message, now)
        self._note_places(
            queue, result.explanations, skip={a.job for a in assignments} | set(result.unsatisfiable)
        )
        placed = {a.job for a in assignments}
        if placed:  # bench/scale.py reads these lines
            log.info(
                "placement: %d placed, decided in %.1f ms (%.1f ms CPU)",
                len(placed),
                decided_ms,
                decided_cpu_ms,
            )
        return placed | {r.key for r in queue if r.key in self._cache.dirty}

    def _claim_holders(self, assignments: list[Assignment], nodes: Mapping[str, Node]) -> list[claims.Holder]:
        """The DRA-bound placements of this cycle as holders of their GPUs' claims."""
        holders = []
        for assignment in assignments:
            pending = self._pending.get(assignment.job)
            uuids = cluster_view.gpu_uuids(nodes, assignment)
            if pending is None or pending.binding != dljob.Binding.DRA or not all(uuids):
                continue
            if self._podroute is not None and self._podroute.owns(assignment.job):
                continue  # its own claims, which the pod route makes as it releases the pod
            request = pending.request
            namespace, predicted = pending.job.namespace, pods.predicted(assignment)
            holders.append(
                claims.holder(namespace, assignment.node, [u or "" for u in uuids], request, predicted)
            )
        return holders

    async def _bind(
        self, assignment: Assignment, placed: JobRequest | None, nodes: Mapping[str, Node], now: datetime
    ) -> None:
        """Create the pod of `assignment`; `placed`: its request as the cycle placed it (None for a job
        placed on its move's target), which the pod records."""
        pending = self._pending.pop(assignment.job, None)
        uuids = cluster_view.gpu_uuids(nodes, assignment)
        if pending is None:
            return
        if pending.binding == dljob.Binding.DRA and not all(uuids):  # a GPU no ResourceSlice lists (yet)
            self._pending[assignment.job] = pending
            where = f"{assignment.node} GPU {','.join(map(str, assignment.gpu_indices))}"
            self._note_waiting(
                assignment.job, f"waiting: {where} is in no ResourceSlice of {GPU_DRIVER}", now
            )
            return
        if self._podroute is not None and self._podroute.owns(assignment.job):
            hostname = self._cache.node_views[assignment.node].hostname
            await self._podroute.release(assignment, placed or pending.request, hostname, uuids)
            return
        body = self._cache.jobs.get(assignment.job)
        if body is None:
            return
        placement = pods.Placement(
            job=pending.job,
            request=placed or pending.request,
            assignment=assignment,
            attempt=pending.attempt,
            hostname=self._cache.node_views[assignment.node].hostname,
            gpu_uuids=uuids,
            claims=claims.claim_names(assignment.node, uuids) if pending.binding == dljob.Binding.DRA else (),
        )
        pod = pods.build_pod(placement)
        try:
            stored, created = await self._kube.create_pod(pod)
        except ApiError as error:
            if error.status in (400, 403, 422):  # the template itself is refused: the user must fix it
                invalid = template.refused(pod, error.reason, error.body)
                self._metrics.refused(metrics.POD_REJECTED)
                self._workloads[(pending.job.uid, pending.job.generation)] = invalid
                self._cache.mark([assignment.job])
                return
            raise
        if pods.controlling_dljob(stored["metadata"]) != pending.job.uid:
            self._name_taken(pending.job, stored, now)
            return
        record = self._record(assignment.job)
        record.name_conflicts, record.place, record.waiting = 0, None, ""
        self._cache.put_pod(stored)
        if created:
            self._metrics.placed(pending.binding)
            reason = "Moved" if pending.moving else "Placed"
            self.reports.post_later(body, kind="Normal", reason=reason, message=placed_message(assignment))

    def _name_taken(self, job: JobSpec, pod: Mapping[str, Any], now: datetime) -> None:
        """The pod name of the job's attempt belongs to a pod the job does not control. One still being
        deleted (left by an earlier DLJob of the same name) is waited for; any other fails the job after
        `MAX_NAME_CONFLICTS` tries, never adopted: its GPUs, phase and annotations
        are not Horus's."""
        meta = pod["metadata"]
        where = f"pod {meta['namespace']}/{meta['name']}"
        if meta.get("deletionTimestamp"):
            self._note_waiting(job.key, f"waiting: {where} of an earlier owner is being deleted", now)
            return
        record = self._record(job.key)
        record.name_conflicts += 1
        if record.name_conflicts < MAX_NAME_CONFLICTS:
            # The same message each time: only the first marks the job, later tries come with the
            # periodic re-decision, so a pod the garbage collector is about to delete has time to go.
            self._note_waiting(job.key, f"waiting: {where} exists and is not this DLJob's", now)
            return
        self._workloads[(job.uid, job.generation)] = InvalidJob(
            "metadata.name",
            job.name,
            f"{where} exists and is not this DLJob's (another owner, or none); delete it, or submit the "
            "job under another name",
        )
        self._cache.mark([job.key])

    def _note_places(self, queue: WaitQueue, told: Collection[str], *, skip: Collection[str]) -> None:
        """The queue place (status.queue) of the waiting jobs just told why they wait: the head of the
        queue, each at most once per resync period (`_explanation_due`), so positions cost no status
        write per job per cycle."""
        left, position, waiting = set(told), 0, len(queue) - len(skip)
        ordering = self._cycle.ordering
        for request in queue:
            if not left:
                return
            if request.key in skip:
                continue
            position += 1
            if request.key in left:
                left.discard(request.key)
                self._record(request.key).place = {
                    "position": position,
                    "waiting": waiting,
                    "order": str(ordering.order),
                    "reason": ordering.reason(request, queue.standing(request.key)),
                }

    def _explanation_due(self, request: JobRequest, now: datetime) -> bool:
        """At most one explanation per job per resync period: an explanation scans every GPU."""
        last = self._record(request.key).explained_at
        return last is None or (now - last).total_seconds() >= self._config.resync_every

    def _note_waiting(self, key: str, message: str, now: datetime) -> None:
        """Say why a job still waits: in its status message, and an Event when the reason changed."""
        if self._podroute is not None and self._podroute.owns(key):
            self._podroute.explain(key, message)  # an Event and the pod's condition
            return
        body = self._cache.jobs.get(key)
        if body is None:  # deleted meanwhile: its record is gone, and stays gone
            return
        record = self._record(key)
        record.explained_at = now
        if record.waiting == message:
            return
        record.waiting = message
        self._cache.mark([key])
        self.reports.post_later(body, kind="Normal", reason="Waiting", message=message)


def _with_thread_cpu(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """`fn`'s answer and the CPU seconds it took on the thread that ran it."""
    started = time.thread_time()
    answer = fn(*args, **kwargs)
    return answer, time.thread_time() - started


async def _nothing() -> list[dict[str, Any]]:
    return []


def _reading(job: JobSpec) -> str:
    """What a job resolved off the loop waits for meanwhile (`graphs.GraphQueue`)."""
    if job.onnx is not None:
        return READING_GRAPH
    if job.config_map_field:
        return READING_CONFIG
    return COUNTING_SHAPE if job.input_shape is not None else ""
