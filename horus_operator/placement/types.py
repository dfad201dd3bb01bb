"""Cluster state as a policy sees it, and what a policy answers.

Extend these types with defaulted fields; never rename a field (the operator, agent and simulator all
build them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from mypy_extensions import mypyc_attr

from horus_operator.api import defaults
from horus_operator.prediction.api import Workload
from horus_operator.prediction.gpus import gpu_spec


@dataclass(frozen=True)
class Gpu:
    """One GPU, identified once (`labelled`): `product` is the key of its datasheet entry
    (`gpus.GPU_SPECS`), the type every prediction is asked about; `memory_mib` is the capacity its node
    reports, which fit and prediction both read."""

    node: str
    index: int
    product: str  # the GPU table's name (prediction/gpus.py), e.g. "v100"
    memory_mib: int  # as the node reports it (nvidia.com/gpu.memory); may differ from the datasheet's
    uuid: str | None = None
    healthy: bool = True  # False: unhealthy, or its agent is silent beyond the TTL
    observed_memory_used_mib: float | None = None  # live telemetry, when an agent reports it
    observed_utilization: float | None = None  # 0..1, live telemetry
    product_label: str = ""  # as GPU Feature Discovery reported it ("" where no node did: the simulator)
    # A DRA ResourceClaim that is not Horus's holds this GPU ("namespace/name"): never placed on.
    claimed_by: str = ""

    @classmethod
    def labelled(cls, node: str, index: int, product_label: str, memory_mib: int) -> Gpu:
        """A GPU from its node's labels; `UnknownGpuError` for a product the GPU table does not know."""
        spec = gpu_spec(product_label)
        return cls(
            node=node, index=index, product=spec.name, memory_mib=memory_mib, product_label=product_label
        )

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.index)


@dataclass(frozen=True)
class Node:
    name: str
    gpus: tuple[Gpu, ...]
    schedulable: bool = True


@dataclass(frozen=True)
class JobRequest:
    """A job waiting for GPUs. `key` is unique (the operator uses "namespace/name")."""

    key: str
    workload: Workload
    gpus: int = 1
    max_slowdown: float = defaults.MAX_SLOWDOWN  # 1.0: never share
    priority: int = 0
    submitted_at: float = 0.0  # seconds, on the caller's clock
    # Seconds of work left if it ran alone (spec.totalSteps at the predicted or observed step rate; the
    # simulator's trace durations); None when nobody knows. Longer work goes first among equals.
    remaining_s: float | None = None
    # Jobs share a GPU only with jobs of the same scope. "" for all in the simulator and for env-bound
    # jobs; the operator gives DRA-bound jobs their namespace's: co-tenants share one ResourceClaim, and
    # a pod can reference claims of its own namespace only.
    share_scope: str = ""
    # GPU-seconds of service the job has had (time run × GPUs) before it queued again; what `las`
    # orders by (placement/queueorder.py). 0 for a job that never ran.
    attained_gpu_s: float = 0.0
    # When it queued again after a preemption (`placement/preemption.py`), on the caller's clock; None:
    # it has queued once, at `submitted_at`. The starvation bound counts its wait from here.
    queued_at: float | None = None
    # A gang (`placement/gangs.py`): jobs sharing a non-empty `gang` are placed all in one cycle or none
    # of them. `gang_size` counts its members, `gang_placed` those already holding GPUs (a gang whose
    # release was cut short: the rest is placed together). "" with size 1: a job of its own.
    gang: str = ""
    gang_size: int = 1
    gang_placed: int = 0
    # Nodes kube-scheduler refused this job's pods on lately (CPU, memory, taints: what the policy does not
    # see), which this job's placements pass over; other jobs may still go there (operator/jobs/refusals.py).
    # Empty in the simulator, which models no such refusals.
    avoid_nodes: frozenset[str] = frozenset()
    # A share of each of its GPUs the job states itself, in thousandths (fractional requests as KAI or
    # HAMi take them; 1000: whole GPUs): `PlacementCall.room` puts it only where the stated shares of a
    # GPU's jobs sum to at most 1000, never beside a job that states none, and asks no prediction of
    # its memory there. 0: it states none, and Horus predicts what it needs.
    gpu_milli: int = 0
    # What its pod asks of its node besides GPUs (Kubernetes requests: CPU in thousandths of a core,
    # memory in MiB), where the caller models them (`ClusterSnapshot.hosts`): placements pass over nodes
    # without that much left, and a fragmentation score counts a node's GPUs as lost to the requests its
    # CPU or memory no longer fits (`placement/nodefrag.py`). 0: not stated, any node's room fits.
    cpu_milli: int = 0
    host_memory_mib: int = 0
    # The GPU types it may run on (`Gpu.product`); placements pass over the others. Empty: any.
    gpu_products: frozenset[str] = frozenset()

    def states_host(self) -> bool:
        """Whether it states what it needs beyond its GPUs (CPU, memory or GPU types)."""
        return bool(self.cpu_milli or self.host_memory_mib or self.gpu_products)


def explained_alike(
    request: JobRequest,
) -> tuple[Workload, int, float, str, frozenset[str], int, int, int, frozenset[str]]:
    """What a policy's `explain_wait` may read of a request: waiting jobs equal in it wait, on one
    cluster, for the same reasons (a queue of many like jobs is explained once, not once per job: each
    explanation scans every GPU)."""
    return (
        request.workload,
        request.gpus,
        request.max_slowdown,
        request.share_scope,
        request.avoid_nodes,
        request.gpu_milli,
        request.cpu_milli,
        request.host_memory_mib,
        request.gpu_products,
    )


@dataclass(frozen=True)
class RunningJob:
    request: JobRequest
    node: str
    gpu_indices: tuple[int, ...]

    # Written out, not generated: a placement makes several, and compiled (`make compiled`) this is
    # native code, where the generated frozen `__init__` stays Python calling `object.__setattr__`.
    def __init__(self, request: JobRequest, node: str, gpu_indices: tuple[int, ...]) -> None:
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "gpu_indices", gpu_indices)


class KeptIndex(Protocol):
    """What a snapshot's kept index (`placement.index.ClusterIndex`, built from these types: naming it
    here would make the two modules import each other) tells a reader of the snapshot."""

    @property
    def jobs(self) -> dict[str, RunningJob]:
        """The running jobs it holds, by key."""
        ...


class HostRoom(NamedTuple):
    """What a node has left for new pods besides GPUs: CPU in thousandths of a core, memory in MiB. A
    tuple: placement's fragmentation memo keys on it (`nodefrag.NodeState`), hashed natively."""

    cpu_milli: int
    memory_mib: int

    def fits(self, request: JobRequest) -> bool:
        """Whether `request`'s CPU and memory asks fit in what is left."""
        return request.cpu_milli <= self.cpu_milli and request.host_memory_mib <= self.memory_mib


@dataclass(frozen=True)
class ClusterSnapshot:
    nodes: tuple[Node, ...]
    running: tuple[RunningJob, ...] = ()
    now: float = 0.0
    # Optional `placement.index.ClusterIndex` of exactly this state, kept current by callers that see
    # every change (the simulator; the operator, `placement.keeper`) so a policy need not re-index the
    # cluster on every call. When given it is authoritative and `running` may be left empty; policies
    # return it unchanged (`ClusterIndex.of` borrows it, or builds one where none is given).
    index: KeptIndex | None = field(default=None, compare=False, repr=False)
    # The earliest time all known work could be done (`placement.makespan.horizon_s`), where the caller
    # knows the jobs' remaining work; None: unknown, and no makespan guard applies.
    horizon_s: float | None = None
    # Node -> its CPU and memory left for new pods, where the caller models them (every pod's requests,
    # GPU or not, taken off the node's allocatable); None, or a node not in it: not modelled, any job's
    # `cpu_milli` and `host_memory_mib` fit.
    hosts: Mapping[str, HostRoom] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Assignment:
    """One placement decision: bind `job` to GPUs `gpu_indices` of `node`."""

    job: str  # JobRequest.key
    node: str
    gpu_indices: tuple[int, ...]
    predicted_utilization: float = 0.0
    predicted_memory_mib: float = 0.0
    predicted_slowdown: float = 1.0  # of the newcomer
    colocated_with: tuple[str, ...] = ()  # keys of jobs already on those GPUs
    cotenant_slowdowns: dict[str, float] = field(default_factory=dict)  # predicted, after placement
    reason: str = ""  # one human sentence on why here, e.g. for a Kubernetes Event
    # Where predicted_slowdown comes from: the model alone ("prior") or corrected by observations, and
    # how many (prediction.api.Basis)
    slowdown_source: str = "prior"
    utilization_source: str = "predicted"  # or "observed": a job of its signature was seen alone
    slowdown_samples: int = 0
    predicted_step_s: float | None = None  # seconds per step alone on these GPUs (JobPrediction.step_s)


# mypyc (`make compiled`) builds no native subclass of list; an ordinary class here.
@mypyc_attr(native_class=False)
class Settled(list[Assignment]):
    """A `schedule` answer that also says what the next call would: nothing. A policy returns its
    assignments as `Settled` where it has read every job a call right after it would read (the queue
    without the placed jobs, on the cluster with them started) and can prove that call places none; the
    scheduling cycle then does not ask it (every cycle that places ends with such a call otherwise)."""


class Policy(Protocol):
    """One decision method, like kube-scheduler's filter -> score -> bind, and its explanation."""

    name: str

    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        """Assignments for some of `queue` given `snapshot`; jobs left out wait for a later call.

        Assignments in one answer are consistent with each other (the policy accounts for its own
        earlier assignments in the same call). The answer depends on the cluster and the jobs of
        `queue` the policy reads, never on `snapshot.now`: the scheduling cycle does not ask again a
        question answered with nothing while neither changed, nor the question after a `Settled`
        answer.
        """
        ...

    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        """One line on why `request`, not placed by `schedule`, still waits on `snapshot` (the cluster
        with the call's assignments in it), e.g. for a Kubernetes Event. O(GPUs). It reads of the
        request only what `explained_alike` returns: jobs alike are told once per cycle."""
        ...
