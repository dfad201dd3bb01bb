"""Observed telemetry on the leader: a GPUNode change updates each DLJob's `status.observed`, appends
observed co-locations to the dataset and teaches the online correction (`learning.py`) each job's
observed slowdown next to its co-tenant. `observed.py` computes the first two; this module reads the
cache and writes through the loop's `Reporter`, the one status writer. Wired by `runtime.build`,
fed by `telemetry/handlers.py`."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from horus_operator.api.defaults import DEFAULT_FRAMEWORK, DEFAULT_PRECISION, SETTLED_S
from horus_operator.operator import status
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.cluster_view import NodeView
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.kube import Kube
from horus_operator.operator.reports import Reporter
from horus_operator.operator.telemetry import gpunodes, observed
from horus_operator.operator.telemetry.learning import Learning
from horus_operator.operator.telemetry.store import ObservationStore
from horus_operator.placement.types import Gpu
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import Observation

log = logging.getLogger(__name__)

MAX_PROFILED = 10_000  # jobs whose noted alone period is remembered (one noted twice is harmless)


class Recorder:
    """Appends co-location rows, remembering which pairs are stored to skip re-reading the ConfigMaps."""

    def __init__(self, store: ObservationStore) -> None:
        self.store = store
        self._recorded: set[str] | None = None

    def record(self, row: tuple[str, ...], pair: str) -> None:
        """Blocking: call from a worker thread."""
        if self._recorded is None:
            self._recorded = {p for chunk in self.store.load() for p in chunk.pairs}
        if pair in self._recorded:
            return
        if self.store.record(row, pair):
            log.info("observed co-location recorded: %s", ",".join(row))
        self._recorded.add(pair)


@dataclass
class ObservedTelemetry:
    cache: ClusterCache
    kube: Kube
    recorder: Recorder
    reports: Reporter  # the one status writer, shared with the scheduling loop
    leading: asyncio.Event  # the lease: only the leader writes
    telemetry_ttl_seconds: float
    clock: Callable[[], datetime]
    # how long a co-tenancy (or a job alone) holds before a rate unchanged since it began counts for it
    settle_seconds: float = SETTLED_S
    learning: Learning | None = None  # online correction; None: observe and record only
    # job key -> the alone period whose busy fraction was noted (the newest MAX_PROFILED jobs)
    _profiled: OrderedDict[str, str] = field(default_factory=OrderedDict)

    async def gpunode_changed(self, event_type: str, gpunode: Mapping[str, Any]) -> None:
        if event_type == "DELETED":
            self.cache.drop_gpunode(gpunode)
            return
        now = self.clock()
        parsed = self.cache.put_gpunode(gpunode, received_at=now.timestamp())
        if not self.leading.is_set() or not parsed.fresh(now.timestamp(), self.telemetry_ttl_seconds):
            return
        try:
            await self._update_jobs(gpunode, now)
        except Exception as error:  # telemetry is best effort: never let it disturb the watch
            log.warning("observed status from GPUNode %s not updated: %s", gpunode["metadata"]["name"], error)

    async def _update_jobs(self, gpunode: Mapping[str, Any], now: datetime) -> None:
        gpu = _gpu(self.cache.node_views.get(gpunode["metadata"]["name"]))
        gpu_type = gpu.product if gpu else ""
        entries = observed.pods_on_gpus(gpunode)
        updated: dict[str, Mapping[str, Any]] = {}
        alone_before: dict[str, Any] = {}
        for key, observation in observed.observe_jobs(entries).items():
            job = self.cache.jobs.get(key)
            if job is None:
                continue
            previous = _observed_of(job)
            new = observed.observed_status(
                observation, previous, gpu_type=gpu_type, now=now, settle_s=self.settle_seconds
            )
            updated[key], alone_before[key] = new, previous.get("aloneStepsPerSecond")
            if observed.changed(new, previous):
                await self.reports.write(job, {status.OBSERVED: new})
        for key, reported in updated.items():
            for cotenant in reported.get("sharedRuns") or {}:
                await self._record_pair(key, reported, cotenant, updated)
        if self.learning is not None and gpu is not None:
            healthy = _healthy_jobs(gpunode, entries, now)
            await self._teach(self.learning, gpu, healthy, updated, alone_before)

    async def _teach(
        self,
        learning: Learning,
        gpu: Gpu,
        healthy: Mapping[str, bool],
        updated: Mapping[str, Mapping[str, Any]],
        alone_before: Mapping[str, Any],
    ) -> None:
        """New rates alone first (they stand in for jobs of the same signature that never ran alone),
        then each job's slowdown next to its co-tenant."""
        correction = learning.predictor.correction
        for key, new in updated.items():
            rate, workload = new.get("aloneStepsPerSecond"), self._workload(key)
            if rate and rate != alone_before.get(key) and workload is not None:
                correction.note_alone(gpu.product, workload, float(rate))
            if workload is not None and self._profile_due(key, new):
                memory = new.get("memoryMiB")
                await learning.profile(
                    gpu.product, workload, float(new["utilization"]), float(memory) if memory else None
                )
        lessons = (
            self._observation(key, new, cotenant, gpu, healthy.get(key, False))
            for key, new in updated.items()
            for cotenant in new.get("sharedRuns") or {}
        )
        await learning.learn([lesson for lesson in lessons if lesson is not None])

    def _profile_due(self, key: str, reported: Mapping[str, Any]) -> bool:
        """Whether `key`'s busy fraction alone is now known (`observed.settled_alone`) and not yet noted
        for this alone period."""
        since = observed.settled_alone(reported, self.clock(), settle_s=self.settle_seconds)
        if since is None or self._profiled.get(key) == since:
            return False
        self._profiled[key] = since
        self._profiled.move_to_end(key)
        while len(self._profiled) > MAX_PROFILED:
            self._profiled.popitem(last=False)
        return True

    async def _record_pair(
        self, key: str, own: Mapping[str, Any], cotenant: str, updated: Mapping[str, Mapping[str, Any]]
    ) -> None:
        other = updated.get(cotenant) or _observed_of(self.cache.jobs.get(cotenant))
        side_a = self._side(key, own, cotenant)
        side_b = self._side(cotenant, other, key)
        if side_a is None or side_b is None:
            return
        row = observed.colocation_row(observed.pair_gpu(own, cotenant), side_a, side_b)
        await self.kube.call(self.recorder.record, row, observed.pair_id(side_a, side_b))

    def _side(self, key: str, own: Mapping[str, Any], cotenant: str) -> observed.PairSide | None:
        job = self.cache.jobs.get(key)
        workload = self._workload(key)
        if job is None or workload is None or workload.features is not None:
            return None  # a job described by its own graph has no model name the CSV could carry
        if workload.precision != DEFAULT_PRECISION or workload.framework != DEFAULT_FRAMEWORK:
            return None  # the CSV has no precision or framework column: its rows read as fp32 PyTorch
        return observed.pair_side(
            own,
            cotenant,
            uid=job["metadata"].get("uid", key),
            model=workload.model,
            batch_size=workload.batch_size,
        )

    def _observation(
        self, key: str, own: Mapping[str, Any], cotenant: str, gpu: Gpu, healthy: bool
    ) -> Observation | None:
        """`key`'s observed slowdown next to `cotenant`, once both its rates are known."""
        run = (own.get("sharedRuns") or {}).get(cotenant) or {}
        workload, other = self._workload(key), self._workload(cotenant)
        alone = own.get("aloneStepsPerSecond") or self._alone_rate_of_its_kind(gpu, workload)
        shared, since = run.get("stepsPerSecond"), observed.shared_since(own, cotenant)
        pod, other_pod = self._current_pod(key), self._current_pod(cotenant)
        if not (alone and shared and since and workload and other and pod and other_pod and run.get("gpu")):
            return None
        return Observation(
            sample_id=f"{pod.uid}>{other_pod.uid}",  # these two pods' co-location, learned once
            gpu=str(run["gpu"]),
            workload=workload,
            cotenants=(other,),
            slowdown=float(alone) / float(shared),
            observed_at=since.timestamp(),
            placed_at=pod.created_at.timestamp() if pod.created_at else since.timestamp(),
            gpu_healthy=healthy,
            memory_mib=gpu.memory_mib,
        )

    def _alone_rate_of_its_kind(self, gpu: Gpu, workload: Workload | None) -> float | None:
        """A job that never ran alone: what jobs of its signature showed alone on this GPU type."""
        if self.learning is None or workload is None:
            return None
        return self.learning.predictor.correction.alone_rate(gpu.product, workload)

    def _workload(self, key: str) -> Workload | None:
        requests = [p.request for p in self.cache.job_pods(key) if p.request is not None]
        return requests[0].workload if requests else None

    def _current_pod(self, key: str) -> PodView | None:
        holding = [p for p in self.cache.job_pods(key) if p.holds_gpus]
        return max(holding, key=lambda p: p.attempt, default=None)


def _healthy_jobs(
    gpunode: Mapping[str, Any], entries: Sequence[observed.PodOnGpu], now: datetime
) -> dict[str, bool]:
    """Per job on this node: whether every GPU it uses is reported healthy."""
    gpus = gpunodes.parse(gpunode, received_at=now.timestamp()).gpus
    healthy: dict[str, bool] = {}
    for entry in entries:
        seen = gpus.get(entry.gpu_index)
        healthy[entry.job_key] = healthy.get(entry.job_key, True) and seen is not None and seen.healthy
    return healthy


def _observed_of(job: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((job or {}).get("status") or {}).get(status.OBSERVED) or {}


def _gpu(node: NodeView | None) -> Gpu | None:
    """The node's GPU type and capacity as its labels say (a node has one type of GPU)."""
    labelled = node.labelled if node else None
    return labelled.gpus[0] if labelled and labelled.gpus else None
