"""Operator settings: `horus run` builds them once from its flags (each flag also reads an environment
variable, which the Deployment sets) and hands them to the operator through kopf's memo.

The one place their defaults are written: `horus run`'s flags show these, the scheduling loop's
`LoopConfig` starts from them, and the move and queue settings' own defaults (`MoveSettings`,
`queueorder`) are read from there, not copied."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import timedelta

from horus_operator.api.defaults import SETTLED_S
from horus_operator.api.dljob import Binding
from horus_operator.operator.binding.reservations import DeviceMode, ReservationSettings
from horus_operator.operator.dra.claims import Sharing
from horus_operator.placement.moves import MoveSettings
from horus_operator.placement.preemption import PreemptionSettings
from horus_operator.placement.queueorder import DEFAULT_MAX_WAIT_S, Ordering, QueueOrder, Starvation

# The settings' defaults, read from instances: a compiled dataclass's class attribute is a descriptor.
_MOVES, _PREEMPTION, _RESERVATION = MoveSettings(), PreemptionSettings(), ReservationSettings()


@dataclass(frozen=True)
class OperatorConfig:
    models_dir: str | None = None  # None: the models shipped in the package
    policy: str = "horus"
    namespace: str | None = None  # None: all namespaces
    lease_namespace: str = "horus-system"
    identity: str = socket.gethostname()
    resync_seconds: float = 10.0
    unschedulable_grace_seconds: float = 30.0
    not_ready_grace_seconds: float = 300.0  # Kubernetes' default toleration of a NotReady node
    api_workers: int = 32
    telemetry_ttl_seconds: float = 60.0  # a GPUNode older than this: its agent is silent, GPUs unusable
    # a co-tenancy (or a job alone) this old: a rate unchanged since it began counts for it (observed.py)
    observed_settle_seconds: float = SETTLED_S
    binding: Binding = Binding.ENV  # for DLJobs that do not set spec.binding (docs/operator.md)
    sharing: Sharing = Sharing.AUTO  # how co-tenants share a GPU (claims.Sharing)
    dra_served: bool = False  # found at start: the API server serves resource.k8s.io/v1
    # `reserve` binding: the reservation pods' image (the operator's own: it carries `horus reserve`),
    # runtime class and priority class ("": none), and how the job's pods are told the reserved GPU
    # (operator/binding/reservations.py)
    reservation_image: str = _RESERVATION.image
    reservation_runtime_class: str = ""
    reservation_priority_class: str = ""
    reservation_device_mode: DeviceMode = _RESERVATION.device_mode
    # Moving jobs that allow it (placement/moves.py: MoveSettings, whose defaults these are)
    migration_restart_cost_seconds: float = _MOVES.restart_cost_s
    migration_cooldown_seconds: float = _MOVES.cooldown_s
    migration_over_limit_seconds: float = _MOVES.over_limit_for_s
    migration_max_moves: int = _MOVES.max_moves_per_job
    # The order waiting jobs of one priority are served in, and its starvation bound (queueorder.py)
    queue_order: str = QueueOrder.FIFO.value
    max_wait_seconds: float = DEFAULT_MAX_WAIT_S
    starvation_multiple: float | None = None  # None: the order's default (`Starvation.of`); inf: none
    # Under las, running jobs are preempted for waiting ones (placement/preemption.py): a (re)started
    # job runs this long first (and at least 4x its grace period plus the migration restart cost).
    preemption_min_run_seconds: float = _PREEMPTION.min_run_s
    metrics_port: int = 9401  # Prometheus /metrics (operator/metrics.py); 0: none. The agent's is 9400.
    # The pod route (operator/podroute/): pods of other controllers, admitted by the webhook this
    # replica serves on `webhook_port` (None: no webhook, no pod route) with the certificate and key in
    # these files (kopf reloads them when they change); `webhook_host` is the name the API server
    # reaches it by, for the certificate's check.
    webhook_port: int | None = None
    webhook_addr: str = "0.0.0.0"
    webhook_host: str | None = None
    webhook_cert: str | None = None
    webhook_key: str | None = None

    @property
    def pod_route(self) -> bool:
        return self.webhook_port is not None

    @property
    def moves(self) -> MoveSettings:
        return MoveSettings(
            restart_cost_s=self.migration_restart_cost_seconds,
            cooldown_s=self.migration_cooldown_seconds,
            max_moves_per_job=self.migration_max_moves,
            over_limit_for_s=self.migration_over_limit_seconds,
        )

    @property
    def preemption(self) -> PreemptionSettings:
        return PreemptionSettings(
            restart_cost_s=self.migration_restart_cost_seconds, min_run_s=self.preemption_min_run_seconds
        )

    @property
    def ordering(self) -> Ordering:
        order = QueueOrder(self.queue_order)
        starvation = Starvation.of(order, self.max_wait_seconds, self.starvation_multiple)
        return Ordering(order, starvation=starvation)

    @property
    def unschedulable_grace(self) -> timedelta:
        return timedelta(seconds=self.unschedulable_grace_seconds)

    @property
    def not_ready_grace(self) -> timedelta:
        return timedelta(seconds=self.not_ready_grace_seconds)

    @property
    def reservation(self) -> ReservationSettings:
        return ReservationSettings(
            image=self.reservation_image,
            runtime_class=self.reservation_runtime_class,
            priority_class=self.reservation_priority_class,
            device_mode=self.reservation_device_mode,
        )

    @property
    def reserve_cdi(self) -> bool:
        """Whether pods of the pod route may be reserve-bound: a gated pod's containers cannot be told
        a GPU after creation, only its annotations name one (`podroute/admission.py`)."""
        return self.reservation_device_mode == DeviceMode.CDI


@dataclass(frozen=True)
class LoopConfig:
    """The scheduling loop's settings (operator/loop.py), from `OperatorConfig` in `runtime.py`."""

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
    binding: Binding = OperatorConfig.binding  # for DLJobs that do not set spec.binding
    sharing: Sharing = OperatorConfig.sharing  # how co-tenants share a GPU (Sharing)
    dra_served: bool = False  # the API server serves resource.k8s.io/v1: claims and slices are watched
    moves: MoveSettings = field(default_factory=MoveSettings)  # moving jobs that allow it (moves/mover.py)
    graphs_per_namespace: int = 2  # ONNX graphs of one namespace read at once (operator/jobs/graphs.py)
    own_namespace: str = OperatorConfig.lease_namespace  # where the operator runs: its tenancy ConfigMap
    ordering: Ordering = field(default_factory=Ordering)  # the queue order (placement/queueorder.py)
    # under `las`: running jobs preempted for waiting ones (moves/preempter.py)
    preemption: PreemptionSettings = field(default_factory=PreemptionSettings)
    reservation: ReservationSettings = field(default_factory=ReservationSettings)  # `reserve` binding
