"""Assembles the operator from its settings: API client, predictor, policy, cache, lease, loop and the
telemetry updates, all on one clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.config import OperatorConfig
from horus_operator.operator.dra.claims import Sharing
from horus_operator.operator.jobs.graphs import GraphReader, onnx_features
from horus_operator.operator.jobs.jobspec import WorkloadResolver
from horus_operator.operator.kube import Kube, load_client
from horus_operator.operator.leader import LeaderElector, LeaseConfig
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.operator.podroute.route import PodRoute
from horus_operator.operator.telemetry.learning import CorrectionStore, Learning
from horus_operator.operator.telemetry.store import ObservationStore
from horus_operator.operator.telemetry.updates import ObservedTelemetry, Recorder
from horus_operator.placement.queueorder import QueueOrder
from horus_operator.placement.registry import make_policy
from horus_operator.prediction import catalog
from horus_operator.prediction.api import Predictor
from horus_operator.prediction.correction import CorrectedPredictor
from horus_operator.prediction.predictor import load_predictor
from horus_operator.prediction.timeslicing import time_sliced

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    config: OperatorConfig
    cache: ClusterCache
    kube: Kube
    elector: LeaderElector
    loop: SchedulingLoop
    observing: ObservedTelemetry
    graph_reader: GraphReader
    resolver: WorkloadResolver  # also the webhook's, which judges a pod's model at admission
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    podroute: PodRoute | None = None  # pods of other controllers (`horus run --webhook-port`)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        if self.config.metrics_port:
            self.metrics.serve(self.config.metrics_port)
        self.tasks = [
            asyncio.create_task(self.elector.run(), name="horus-lease"),
            asyncio.create_task(self.loop.run(self.elector.leading), name="horus-scheduling"),
        ]
        for task in self.tasks:
            task.add_done_callback(_crash_loudly)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Let status writes and Events in flight land before the API client's threads go (briefly: the
        # API server may be what is gone; the next leader re-derives anything lost).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.loop.settle(), timeout=5)
        self.kube.close()
        self.graph_reader.close()


def _wall_clock() -> datetime:
    return datetime.now(UTC)


# Said once at start under `--queue-order las`: running DLJobs will be stopped and queued again.
LAS_PREEMPTS = (
    "--queue-order las: a running DLJob may be preempted for a waiting one of less attained GPU-service "
    "once it has run %.0f s since its (re)start (docs/operator.md, 'Queue order')"
)


def deciding_predictor(config: OperatorConfig, predictor: CorrectedPredictor) -> Predictor:
    """What placement decides with: `predictor`, each job within its fair share of the GPU's time where
    co-tenants time-slice (the jobs' workloads say where: `claims.time_slices`; prediction/timeslicing.py).
    Under `--sharing mps` none does; under `timeslicing` every set, also of pods placed before their workloads
    said so."""
    if config.sharing == Sharing.MPS:
        return predictor
    return time_sliced(predictor, every=config.sharing == Sharing.TIMESLICING)


def build(config: OperatorConfig, clock: Callable[[], datetime] = _wall_clock) -> Runtime:
    if config.queue_order == QueueOrder.LAS:
        log.info(LAS_PREEMPTS, config.preemption.protected_s)
    metrics = OperatorMetrics()
    kube = Kube(
        load_client(pool_size=config.api_workers), workers=config.api_workers, on_error=metrics.api_error
    )
    prior = load_predictor(config.models_dir)
    predictor = CorrectedPredictor(prior)  # the shipped model, corrected online by what is observed
    deciding = deciding_predictor(config, predictor)
    learning = Learning(
        predictor,
        kube,
        CorrectionStore(kube, config.lease_namespace),
        prior_id=prior.models.identity(),
        metrics=metrics,
        placement_reads=deciding,
    )
    graph_reader = GraphReader(onnx_features)
    resolver = WorkloadResolver(
        canonical_model=catalog.canonical,
        read_onnx=kube.read_config_map_file,
        onnx_features=graph_reader,
    )
    cache = ClusterCache()
    podroute = (
        PodRoute(
            kube=kube,
            cache=cache,
            resolver=resolver,
            namespace=config.namespace,
            clock=clock,
            reserve_cdi=config.reserve_cdi,
        )
        if config.pod_route
        else None
    )
    loop = SchedulingLoop(
        kube=kube,
        cache=cache,
        policy=make_policy(config.policy, predictor=deciding),
        resolver=resolver,
        config=LoopConfig(
            namespace=config.namespace,
            resync_every=config.resync_seconds,
            unschedulable_grace=config.unschedulable_grace,
            not_ready_grace=config.not_ready_grace,
            telemetry_ttl=config.telemetry_ttl_seconds,
            binding=config.binding,
            sharing=config.sharing,
            dra_served=config.dra_served,
            moves=config.moves,
            own_namespace=config.lease_namespace,
            ordering=config.ordering,
            preemption=config.preemption,
            reservation=config.reservation,
        ),
        clock=clock,
        on_resync=learning.restore,
        metrics=metrics,
        podroute=podroute,
    )
    elector = LeaderElector(
        kube,
        LeaseConfig(namespace=config.lease_namespace, identity=config.identity),
        clock=clock,
        metrics=metrics,
    )
    observing = ObservedTelemetry(
        cache=cache,
        kube=kube,
        recorder=Recorder(ObservationStore(kube, config.lease_namespace)),
        reports=loop.reports,
        leading=elector.leading,
        telemetry_ttl_seconds=config.telemetry_ttl_seconds,
        clock=clock,
        learning=learning,
        settle_seconds=config.observed_settle_seconds,
    )
    return Runtime(
        config=config,
        cache=cache,
        kube=kube,
        elector=elector,
        loop=loop,
        observing=observing,
        graph_reader=graph_reader,
        metrics=metrics,
        resolver=resolver,
        podroute=podroute,
    )


def _crash_loudly(task: asyncio.Task[None]) -> None:
    """A background task must never die silently: log it (the liveness probe then fails)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped", task.get_name(), exc_info=task.exception())
