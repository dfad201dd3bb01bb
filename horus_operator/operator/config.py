"""Operator settings: `horus run` builds them once from its flags (each flag also reads an environment
variable, which the Deployment sets) and hands them to the operator through kopf's memo.

The one place their defaults are written: `horus run`'s flags show these, the scheduling loop's
`LoopConfig` starts from them, and the move and queue settings' own defaults (`MoveSettings`,
`queueorder`) are read from there, not copied."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import timedelta

from horus_operator.api.dljob import Binding
from horus_operator.operator.dra.claims import Sharing
from horus_operator.placement.moves import MoveSettings
from horus_operator.placement.preemption import PreemptionSettings
from horus_operator.placement.queueorder import DEFAULT_MAX_WAIT_S, Ordering, QueueOrder, Starvation

# The settings' defaults, read from instances: a compiled dataclass's class attribute is a descriptor.
_MOVES, _PREEMPTION = MoveSettings(), PreemptionSettings()


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
    binding: Binding = Binding.ENV  # for DLJobs that do not set spec.binding (docs/operator.md)
    sharing: Sharing = Sharing.AUTO  # how co-tenants share a GPU (claims.Sharing)
    dra_served: bool = False  # found at start: the API server serves resource.k8s.io/v1
    # Moving jobs that allow it (placement/moves.py: MoveSettings, whose defaults these are)
    migration_restart_cost_seconds: float = _MOVES.restart_cost_s
    migration_cooldown_seconds: float = _MOVES.cooldown_s
    migration_over_limit_seconds: float = _MOVES.over_limit_for_s
    migration_max_moves: int = _MOVES.max_moves_per_job
    # The order waiting jobs of one priority are served in, and its starvation bound (queueorder.py)
    queue_order: str = QueueOrder.FIFO.value
    max_wait_seconds: float = DEFAULT_MAX_WAIT_S
    starvation_multiple: float | None = None
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
        starvation = Starvation(self.max_wait_seconds, self.starvation_multiple)
        return Ordering(QueueOrder(self.queue_order), starvation=starvation)

    @property
    def unschedulable_grace(self) -> timedelta:
        return timedelta(seconds=self.unschedulable_grace_seconds)

    @property
    def not_ready_grace(self) -> timedelta:
        return timedelta(seconds=self.not_ready_grace_seconds)
