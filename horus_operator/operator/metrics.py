"""The operator's Prometheus metrics on /metrics (docs/operator.md, "Metrics"): one registry, its metric
objects, and the one-line calls the loop, the mover, the reporter, the elector, the API adapter and the
online correction make. It counts and times; it decides nothing.

Every replica serves its own registry. Counters and histograms count what this process did; the gauges
of the cluster (`refresh`) are the leader's view, set while it leads and cleared when it stops, so
summing the replicas counts each job once. Names follow Prometheus' conventions: `_total` counters,
`_seconds` durations, no unit where there is none."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server
from prometheus_client import Counter as PromCounter

from horus_operator.operator.apierrors import ApiError
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.jobs.reconcile import Phase

# A decision takes milliseconds; a cycle with status writes and pods, up to seconds.
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# ln(observed slowdown / predicted slowdown): 0 is a perfect prediction, ±0.1 is about ±10 %.
LOG_RATIO_BUCKETS = (-1.0, -0.5, -0.25, -0.1, -0.05, 0.0, 0.05, 0.1, 0.25, 0.5, 1.0)

# Why a job waits for a pod (`horus_dljobs_pending{reason}`).
QUEUED = "queued"  # its turn has not come (not yet looked at, or jobs ahead go first)
NO_FIT = "no_fit"  # the policy found no GPU it fits on now (its status message says why)
MOVING = "moving"  # between the pods of a move
BLOCKED = "blocked"  # placed, but its pod cannot be made yet (a GPU in no ResourceSlice, a pod name taken)
RESOLVING = "resolving"  # its model graph or config is being read
PENDING_REASONS = (QUEUED, NO_FIT, MOVING, BLOCKED, RESOLVING)
# The loop's own waiting messages (operator/loop.py) that say the pod cannot be made yet.
_BLOCKED_MESSAGES = ("is in no ResourceSlice", "of an earlier owner is being deleted", "is not this DLJob's")

# Why a job was refused (`horus_refusals_total{reason}`).
UNSATISFIABLE = "unsatisfiable"  # no node of this cluster could ever run it: failed
INVALID_SPEC = "invalid_spec"  # its spec cannot run as written: failed
POD_REJECTED = "pod_rejected"  # the API server refused its pod (400, 403, 422): failed
UNSCHEDULABLE = "unschedulable"  # its pod's node could not take it: re-placed, the node cooled


def pending_reason(message: str, *, moving: bool) -> str:
    """The reason label of a job waiting for a pod, from the loop's last word to it (its status message)."""
    if moving:
        return MOVING
    if not message or message.endswith(" go first"):
        return QUEUED
    if any(fragment in message for fragment in _BLOCKED_MESSAGES):
        return BLOCKED
    return NO_FIT


@dataclass(frozen=True)
class Gauges:
    """The cluster as the leader sees it, at the end of a cycle."""

    pending: Mapping[str, int]  # reason -> jobs waiting for a pod
    phases: Mapping[str, int]  # DLJob phase -> jobs
    gpus: int  # GPUs of the nodes GPU Feature Discovery labelled
    gpus_in_use: int  # GPUs holding at least one Horus pod
    gpus_shared: int  # GPUs holding pods of two or more DLJobs


def gauges(waiting: Iterable[str], phases: Iterable[str], pods: Iterable[PodView], gpus: int) -> Gauges:
    """`waiting`: one reason per job waiting for a pod; `phases`: one phase per DLJob; `pods`: Horus's."""
    tenants: dict[tuple[str, int], set[tuple[str, str]]] = {}
    for pod in pods:
        if pod.holds_gpus:
            job = (pod.namespace, pod.job_name)
            for index in pod.gpu_indices:
                tenants.setdefault((pod.node, index), set()).add(job)
    return Gauges(
        pending=Counter(waiting),
        phases=Counter(phases),
        gpus=gpus,
        gpus_in_use=len(tenants),
        gpus_shared=sum(1 for jobs in tenants.values() if len(jobs) > 1),
    )


@dataclass
class OperatorMetrics:
    """`registry`: a fresh one per instance unless given (tests never share the default registry);
    `refresh_every`: seconds between two `refresh`es at most (they read every job and pod: about 50 ms
    at 10,000 jobs, on the event loop, so not every cycle; Prometheus scrapes every 15 to 30 s)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    refresh_every: float = 5.0
    _refreshed_at: float = field(default=-math.inf, init=False)

    def __post_init__(self) -> None:
        r = self.registry
        self.cycle_seconds = Histogram(
            "horus_cycle_duration_seconds",
            "One scheduling-loop cycle: decisions, placement, pod creation, queued status writes",
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.decision_seconds = Histogram(
            "horus_decision_duration_seconds",
            "One placement decision: the cluster snapshot and the scheduling cycle, before any pod",
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.pending = Gauge(
            "horus_dljobs_pending", "DLJobs waiting for a pod, by reason", ["reason"], registry=r
        )
        self.phases = Gauge("horus_dljobs", "DLJobs by status phase", ["phase"], registry=r)
        self.gpus = Gauge("horus_gpus", "GPUs of the nodes GPU Feature Discovery labelled", registry=r)
        self.gpus_in_use = Gauge("horus_gpus_in_use", "GPUs holding at least one Horus pod", registry=r)
        self.gpus_shared = Gauge("horus_gpus_shared", "GPUs holding pods of two or more DLJobs", registry=r)
        self.placements = PromCounter(
            "horus_placements", "Pods created for placed DLJobs (moves included)", ["binding"], registry=r
        )
        self.refusals = PromCounter(
            "horus_refusals", "DLJobs or their pods refused, by reason", ["reason"], registry=r
        )
        self.moves = PromCounter("horus_moves", "Moves recorded, by trigger", ["trigger"], registry=r)
        self.preemptions = PromCounter(
            "horus_preemptions", "Running DLJobs preempted for a waiting one (queue order las)", registry=r
        )
        self.oom_recoveries = PromCounter(
            "horus_oom_recoveries",
            "DLJob pods that ran out of GPU memory beside a co-tenant, their jobs retried alone",
            registry=r,
        )
        self.log_ratio = Histogram(
            "horus_slowdown_log_ratio",
            "ln(observed / predicted slowdown) of each new co-location observed, per GPU type",
            ["gpu"],
            buckets=LOG_RATIO_BUCKETS,
            registry=r,
        )
        self.samples = PromCounter(
            "horus_correction_samples",
            "Co-location samples offered to the online correction, per GPU type and result",
            ["gpu", "result"],
            registry=r,
        )
        self.api_errors = PromCounter(
            "horus_api_errors",
            "API calls that failed, by status code (unavailable: no answer)",
            ["code"],
            registry=r,
        )
        self.retries = PromCounter(
            "horus_retries", "Failed steps retried later, by step", ["step"], registry=r
        )
        self.leader = Gauge("horus_leader", "1 while this replica holds the operator Lease", registry=r)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)

    # -- the calls the operator makes ---------------------------------------------------------------
    def cycled(self, seconds: float) -> None:
        self.cycle_seconds.observe(seconds)

    def decided(self, seconds: float) -> None:
        self.decision_seconds.observe(seconds)

    def placed(self, binding: str) -> None:
        self.placements.labels(binding=binding).inc()

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason=reason).inc()

    def moved(self, trigger: str) -> None:
        self.moves.labels(trigger=trigger).inc()

    def preempted(self) -> None:
        self.preemptions.inc()

    def oom_recovered(self) -> None:
        self.oom_recoveries.inc()

    def api_error(self, error: Exception) -> None:
        code = str(error.status) if isinstance(error, ApiError) else "unavailable"
        self.api_errors.labels(code=code).inc()

    def retried(self, step: str) -> None:
        self.retries.labels(step=step).inc()

    def sample(self, gpu: str, *, predicted: float | None, observed: float, refused: str | None) -> None:
        """A co-location offered to the online correction: `predicted`, the slowdown placement read
        before this lesson (None: the prior says the jobs cannot share)."""
        self.samples.labels(gpu=gpu, result="refused" if refused else "learned").inc()
        if predicted and observed > 0:
            self.log_ratio.labels(gpu=gpu).observe(math.log(observed / predicted))

    def leading(self, held: bool) -> None:
        self.leader.set(1 if held else 0)
        if not held:  # the cluster's gauges are the leader's; a standby's would count jobs twice
            for gauge in (self.pending, self.phases):
                gauge.clear()
            for plain in (self.gpus, self.gpus_in_use, self.gpus_shared):
                plain.set(0)
            self._refreshed_at = -math.inf

    def refresh(self, read: Callable[[], Gauges]) -> None:
        """Set the cluster's gauges from `read()`, at most once per `refresh_every` seconds."""
        now = time.monotonic()
        if now - self._refreshed_at < self.refresh_every:
            return
        self._refreshed_at = now
        seen = read()
        for reason in PENDING_REASONS:
            self.pending.labels(reason=reason).set(seen.pending.get(reason, 0))
        for phase in {*Phase, *seen.phases}:
            self.phases.labels(phase=phase).set(seen.phases.get(phase, 0))
        self.gpus.set(seen.gpus)
        self.gpus_in_use.set(seen.gpus_in_use)
        self.gpus_shared.set(seen.gpus_shared)
