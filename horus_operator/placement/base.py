"""What every policy shares: the per-call scratch state, the capacity filters and wait explanations.

A `PlacementCall` is the scratch state of one `schedule` call (kube-scheduler's CycleState): it indexes
the snapshot once (or borrows the caller's index), records tentative placements so later jobs in the
same call see them, and undoes them on exit so a borrowed index comes back unchanged.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from horus_operator.placement.index import ClusterIndex, GpuKey, GpuSlot, wants_whole_gpus
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import (
    Assignment,
    ClusterSnapshot,
    HostRoom,
    JobRequest,
    Policy,
    RunningJob,
)


@dataclass(frozen=True)
class Limits:
    """Capacity rules every policy applies (the co-location limit is the same for horus and binpack).

    - `max_jobs_per_gpu`: co-tenants per GPU. 2 because measured interference is pairwise; beyond a
      pair the predictor extrapolates.
    - `memory_margin_mib`: headroom kept free on every GPU against memory-prediction error and CUDA
      context growth (the Horus authors' simulator keeps 500 MB).
    - `busy_utilization`: a GPU whose *measured* utilization is at or above this has no room, whatever
      the predictions say.
    - `scan_depth`: how far down the queue one call looks for jobs that fit (backfilling); bounds the
      cost of a call when the queue is long.
    - `qos_margin`: a *predicted* slowdown admits a job only under maxSlowdown / (1 + qos_margin), a
      guard against prediction error (the slowdown model's error is around 7 % on pairs, more on job
      configurations it never saw; 0.15 kept horus-2500 at a handful of violations in 2,500 jobs).
      Every decision that trusts a prediction reads it through `admits`: horus's placements and the
      targets of moves (an interference-blind policy asks no slowdown).
    - `caution_sd`: where the predictor states its uncertainty (a learning predictor's spread: large
      on a GPU type it has seen few co-locations on), the slowdown's upper end, e^(ln s + caution_sd ·
      sd), must fit maxSlowdown too. So on an unproven GPU the first co-locations go to jobs whose
      limit leaves room, and a tight job shares once evidence has narrowed the spread (issue 25).
    """

    max_jobs_per_gpu: int = 2
    memory_margin_mib: float = 500.0
    busy_utilization: float = 0.95
    scan_depth: int = 256
    qos_margin: float = 0.15
    caution_sd: float = 2.0

    def admits(self, predicted_slowdown: float, max_slowdown: float, log_sd: float = 0.0) -> bool:
        """Whether a predicted slowdown keeps a job within its maxSlowdown: under it with the margin,
        and its upper end (`log_sd`: the prediction's stated spread) under it too."""
        return predicted_slowdown <= max_slowdown / (1.0 + self.qos_margin) + TOLERANCE and (
            self.upper_end(predicted_slowdown, log_sd) <= max_slowdown + TOLERANCE
        )

    def upper_end(self, predicted_slowdown: float, log_sd: float) -> float:
        """The cautious upper end of a predicted slowdown whose log has standard deviation `log_sd`."""
        return predicted_slowdown * math.exp(self.caution_sd * log_sd)


TOLERANCE = 1e-9  # float noise: a slowdown computed exactly at a limit is within it


class PredictingPolicy(Policy, Protocol):
    """A policy as the scheduling cycle drives it (every registered one): the one prediction cache over
    its predictor, which the cycle's moves and step times read too, and its capacity rules."""

    predictions: CachedPredictions
    limits: Limits


class RequestKinds:
    """Small integers for kinds of jobs (`of(request)`, by `kind_of`, e.g. workload and GPU count): jobs
    of one kind fit the same places, so a policy that found one fits nowhere skips its likes.

    Remembered per job key while the job's request object stays the same, so a waiting job's kind is
    worked out once, not on every call that reads it (hashing a workload runs Python code). The memo
    forgets every job once it holds `remembered` of them: those are long gone, and it refills with the
    waiting ones. Calls read the head of the queue (`Limits.scan_depth` jobs, the cycle's `max_batch` at
    most), so a few thousand hold them all; a memo as large as a long simulation's backlog spreads them
    over megabytes (binpack at 100,000 jobs ran 5-7 % faster with 4,096 than with 100,000, most likely
    the processor's caches)."""

    def __init__(self, kind_of: Callable[[JobRequest], Hashable], remembered: int = 4_096) -> None:
        self._kind_of = kind_of
        self._remembered = remembered
        self._kinds: dict[Hashable, int] = {}
        self._of_job: dict[str, tuple[JobRequest, int]] = {}

    def of(self, request: JobRequest) -> int:
        """`request`'s kind (a method, not `__call__`: compiled callers then call it natively)."""
        known = self._of_job.get(request.key)
        if known is not None and known[0] is request:
            return known[1]
        kind = self._kinds.setdefault(self._kind_of(request), len(self._kinds))
        if len(self._of_job) >= self._remembered:
            self._of_job.clear()
        self._of_job[request.key] = (request, kind)
        return kind


class PlacementCall:
    """Scratch state of one `schedule` call. Use as a context manager."""

    def __init__(self, snapshot: ClusterSnapshot, predictions: CachedPredictions, limits: Limits) -> None:
        self.snapshot = snapshot
        self.predictions = predictions
        self.limits = limits
        self.index, self._borrowed = ClusterIndex.of(snapshot)
        self.assignments: list[Assignment] = []
        self.placed: set[str] = set()
        self._largest_gpu_mib = -1  # the most memory any GPU of the snapshot has; -1 until asked
        # node -> its room in `snapshot.hosts` less what this call's placements on it asked
        self._hosts_taken: dict[str, HostRoom] = {}

    def __enter__(self) -> PlacementCall:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._borrowed:
            for assignment in reversed(self.assignments):
                self.index.remove(assignment.job)

    def place(self, request: JobRequest, slots: Sequence[GpuSlot], reason: str) -> Assignment:
        """Record `request` on `slots` (one node) and return the Assignment, with predictions filled in."""
        product = slots[0].product
        job = self.predictions.job(request.workload, product)
        tenants = list(slots[0].tenants) if len(slots) == 1 else []
        together = [tenant.request.workload for tenant in tenants] + [request.workload]
        slowdowns = self.predictions.slowdowns(product, together, slots[0].gpu.memory_mib)
        newcomer_slowdown = slowdowns[-1] if slowdowns else 1.0
        basis = self.predictions.basis(product, together)[-1]
        assignment = Assignment(
            job=request.key,
            node=slots[0].node,
            gpu_indices=tuple(slot.key[1] for slot in slots),
            predicted_utilization=job.utilization,
            predicted_memory_mib=job.memory_mib,
            predicted_slowdown=newcomer_slowdown,
            colocated_with=tuple(tenant.request.key for tenant in tenants),
            cotenant_slowdowns={
                tenant.request.key: slowdowns[i] for i, tenant in enumerate(tenants) if slowdowns
            },
            reason=reason,
            slowdown_source=basis.source,
            utilization_source=self.predictions.utilization_source(request.workload, product),
            slowdown_samples=basis.samples,
            predicted_step_s=job.step_s,
        )
        self.index.add(RunningJob(request=request, node=assignment.node, gpu_indices=assignment.gpu_indices))
        host = self.host_room(assignment.node)
        if host is not None and (request.cpu_milli or request.host_memory_mib):
            self._hosts_taken[assignment.node] = HostRoom(
                host.cpu_milli - request.cpu_milli, host.memory_mib - request.host_memory_mib
            )
        self.assignments.append(assignment)
        self.placed.add(request.key)
        return assignment

    # -- capacity filters (None: fits; otherwise why not) ----------------------------------------
    def host_room(self, node: str) -> HostRoom | None:
        """`node`'s CPU and memory left for new pods, this call's placements taken off; None: not
        modelled."""
        taken = self._hosts_taken.get(node)
        if taken is not None:
            return taken
        hosts = self.snapshot.hosts
        return None if hosts is None else hosts.get(node)

    def node_refusal(self, request: JobRequest, node: str) -> str | None:
        """Why `request` may go on no GPU of `node`, whatever the GPU: the node refused its pod lately,
        or has not the CPU or memory it asks left; None: its GPUs decide."""
        if node in request.avoid_nodes:
            return AVOIDED
        if request.cpu_milli or request.host_memory_mib:
            host = self.host_room(node)
            if host is not None and not host.fits(request):
                return HOST_FULL
        return None

    def used_memory_mib(self, slot: GpuSlot) -> float:
        predicted = sum(
            self.predictions.job(tenant.request.workload, slot.product).memory_mib for tenant in slot.tenants
        )
        observed = slot.gpu.observed_memory_used_mib
        return predicted if observed is None else max(predicted, observed)

    def largest_gpu_mib(self) -> int:
        """The most memory any GPU of the snapshot has (asked only for a job predicted over an idle GPU)."""
        if self._largest_gpu_mib < 0:
            self._largest_gpu_mib = max(
                (gpu.memory_mib for node in self.snapshot.nodes for gpu in node.gpus), default=0
            )
        return self._largest_gpu_mib

    def room(self, request: JobRequest, slot: GpuSlot) -> str | None:
        """Why `request` cannot go on `slot` by capacity alone (interference not considered), or None."""
        refusal = self.node_refusal(request, slot.node)
        if refusal is not None:
            return refusal
        if request.gpu_products and slot.product not in request.gpu_products:
            return OTHER_GPU_TYPE
        if len(slot.tenants) >= self.limits.max_jobs_per_gpu:
            return f"GPUs full ({self.limits.max_jobs_per_gpu} jobs each)"
        if slot.tenants and wants_whole_gpus(request):
            return "the job needs whole GPUs and none is free"
        if any(wants_whole_gpus(tenant.request) for tenant in slot.tenants):
            return "GPUs held whole by their jobs"
        if any(tenant.request.share_scope != request.share_scope for tenant in slot.tenants):
            return "GPUs shared under another namespace's ResourceClaim"
        observed_utilization = slot.gpu.observed_utilization
        if observed_utilization is not None and observed_utilization >= self.limits.busy_utilization:
            return f"GPUs measured busy (≥{self.limits.busy_utilization:.0%} utilization)"
        if request.gpu_milli or any(tenant.request.gpu_milli for tenant in slot.tenants):
            return _stated_share_room(request, slot)
        if not slot.tenants and not slot.gpu.observed_memory_used_mib:
            # Alone on an idle GPU a job has all of its memory. Where no GPU of the cluster has more,
            # refusing it for a predicted shortfall would only starve it (the cycle refuses a job whose
            # least memory fits nowhere); where a larger GPU exists, it waits for that one instead of
            # running out of memory here.
            if slot.gpu.memory_mib >= self.largest_gpu_mib():
                return None
            alone = self.predictions.job(request.workload, slot.product).memory_mib
            return (
                None
                if alone <= slot.gpu.memory_mib
                else f"not enough GPU memory (needs {alone:.0f} MiB predicted; larger GPUs exist)"
            )
        needed = self.predictions.job(request.workload, slot.product).memory_mib
        free = slot.gpu.memory_mib - self.used_memory_mib(slot) - self.limits.memory_margin_mib
        if needed > free:
            return f"not enough GPU memory (needs {needed:.0f} MiB predicted)"
        return None

    def unusable(self) -> Iterator[str]:
        """One reason per GPU no job may use: its node is not schedulable, it is not healthy, or another's
        DRA claim holds it."""
        for node in self.snapshot.nodes:
            for gpu in node.gpus:
                if not node.schedulable:
                    yield NODE_UNSCHEDULABLE
                elif not gpu.healthy:
                    yield GPU_UNHEALTHY
                elif gpu.claimed_by:
                    yield GPU_CLAIMED

    def first_with_room(
        self, request: JobRequest, group: Iterable[GpuSlot], held: Container[GpuKey] = ()
    ) -> GpuSlot | None:
        """The first GPU of `group` (the GPUs of one `index.Group`), `held` ones skipped, with room for
        `request`; None when none has.

        A group's GPUs differ only in live telemetry and in their tenants' share scopes, and telemetry
        only takes room away (observed use counts when it exceeds the predicted): once a GPU without
        telemetry whose tenants share the request's scope refuses, every GPU of its group refuses, so
        the scan stops there instead of asking each of thousands of GPUs."""
        for slot in group:
            # A group spans nodes: one node's refusal says nothing of the others'.
            if slot.key in held or self.node_refusal(request, slot.node) is not None:
                continue
            if self.room(request, slot) is None:
                return slot
            untouched = slot.gpu.observed_utilization is None and slot.gpu.observed_memory_used_mib is None
            scope = request.share_scope
            if untouched and all(tenant.request.share_scope == scope for tenant in slot.tenants):
                return None
        return None

    def shared_headroom_mib(self) -> dict[str, float]:
        """GPU type -> the most GPU memory, by prediction, left for a newcomer beside the tenants of any
        shareable GPU below the co-location limit. Telemetry only lowers it (observed use counts when it
        exceeds the predicted), so it bounds what `room` can grant on a shared GPU."""
        headroom: dict[str, float] = {}
        for group in self.index.shared_groups(below=self.limits.max_jobs_per_gpu):
            product, memory_mib, _ = group.key
            predicted = self.predictions.tenants_memory_mib(group)
            free = memory_mib - predicted - self.limits.memory_margin_mib
            headroom[product] = max(free, headroom.get(product, free))
        return headroom

    def may_fit_beside(self, request: JobRequest, headroom: Mapping[str, float]) -> bool:
        """False when `request` is predicted to need more memory than `headroom` (`shared_headroom_mib`)
        leaves on every shared GPU type: then `room` refuses it on every shared GPU."""
        job = self.predictions.job
        return any(job(request.workload, product).memory_mib <= free for product, free in headroom.items())

    def has_room(self) -> bool:
        """Some GPU could still take a job: an empty one, or a shared one below the co-location limit."""
        if self.index.empty_count():
            return True
        return self.index.has_shared(below=self.limits.max_jobs_per_gpu)

    def whole_gpus(self, request: JobRequest) -> list[GpuSlot] | None:
        """`request.gpus` empty GPUs on one node that fit it, best fit first; None when no node has them."""
        if self.index.empty_count() < request.gpus:  # a full cluster: asked of every queued kind of job
            return None
        for _node, empty in self.index.nodes_with_empty(request.gpus):
            fitting = [slot for slot in empty if self.room(request, slot) is None]
            if len(fitting) >= request.gpus:
                return fitting[: request.gpus]
        return None

    def settling_prefix(self, queue: Sequence[JobRequest]) -> Iterator[JobRequest]:
        """The jobs of the queue that this call and the calls after it would read: `scan_depth` jobs and
        one more for each placed so far (the next call reads `scan_depth` of those left), each fetched
        only when the one before has been dealt with, as those calls would reach it. A policy whose
        placements only take room (a job that fits nowhere still fits nowhere after them) has, once it
        has read these, what those calls would answer: nothing, which its answer says (`Settled`)."""
        jobs, read = iter(queue), 0
        while read < self.limits.scan_depth + len(self.assignments):
            request = next(jobs, None)
            if request is None:
                return
            read += 1
            yield request


class PlacedCluster:
    """The cluster a call that placed jobs leaves once its caller has started them, so that what the call
    searched in vain after its last placement need not be searched again by the next call (the cycle
    asks again after every call that placed, unless its answer was `Settled`, and that call nearly
    always finds nothing; horus's are never `Settled`: a placement on an empty GPU opens a pairing).

    The next call is on it when it borrows the same index with exactly as many changes since this call
    handed it back as jobs placed, each held as placed (so those changes were their starts and nothing
    else changed: `ClusterIndex.changed_only_by`), and the predictions are the same."""

    def __init__(self, call: PlacementCall) -> None:
        self._index = call.index
        self._revision = call.predictions.sync()
        self._placed = tuple(call.index.jobs[assignment.job] for assignment in call.assignments)
        self._changes = -1  # the index's once the call has taken its placements out (`handed_back`)

    def handed_back(self) -> None:
        """The call has taken its placements out of the index again: its caller is to add them."""
        self._changes = self._index.changes

    def is_under(self, call: PlacementCall) -> bool:
        index = call.index
        if index is not self._index or not index.changed_only_by(self._changes, self._placed):
            return False
        return call.predictions.sync() == self._revision


WHOLE_GPU_MILLI = 1000  # a GPU in the thousandths jobs state their shares in (`JobRequest.gpu_milli`)


def stated_share_left(slot: GpuSlot) -> int:
    """Thousandths of `slot`'s GPU that the shares its jobs state leave."""
    return WHOLE_GPU_MILLI - sum(tenant.request.gpu_milli for tenant in slot.tenants)


def _stated_share_room(request: JobRequest, slot: GpuSlot) -> str | None:
    """`room` where the job or a tenant states its share: stated shares are a contract (the device
    plugin enforces them), so they sum to at most a whole GPU, and they never mix with predicted jobs,
    whose memory and slowdown a stated share says nothing about."""
    if not request.gpu_milli:
        return "GPUs shared by jobs that state their share"
    if any(not tenant.request.gpu_milli for tenant in slot.tenants):
        return "GPUs shared by jobs that state no share"
    if request.gpu_milli > stated_share_left(slot):
        return f"GPU shares taken (needs {request.gpu_milli}/{WHOLE_GPU_MILLI} of a GPU)"
    return None


# Why a GPU is out of every placement, whatever the job (`PlacementCall.unusable`).
NODE_UNSCHEDULABLE = "node not schedulable (cordoned, NotReady or cooling down)"
GPU_UNHEALTHY = "GPU unhealthy or its agent silent"
AVOIDED = "node refused this job's pod lately (kube-scheduler)"
HOST_FULL = "not enough CPU or memory left on the node"
OTHER_GPU_TYPE = "a GPU type the job does not run on"
GPU_CLAIMED = "GPU held outside Horus (another's ResourceClaim, or the device plugin's)"


def summarise_reasons(reasons: Iterable[str], unusable: Iterable[str] = ()) -> str:
    """'waiting: A (12 GPUs); B (4 GPUs); not usable: C (1 GPU)' from one reason per usable GPU looked
    at (the three most common) and one per GPU no job may use (all of them: a user looking for the GPU
    their job did not get must find it named)."""
    counts = Counter(reasons)
    out = Counter(unusable)
    parts = [_counted(reason, count) for reason, count in counts.most_common(3)]
    if out:
        not_usable = ", ".join(_counted(reason, count) for reason, count in out.most_common())
        parts.append(f"not usable: {not_usable}" if counts else f"no usable GPU: {not_usable}")
    return "waiting: " + ("; ".join(parts) if parts else "no usable GPU")


def _counted(reason: str, count: int) -> str:
    return f"{reason} ({count} GPU{'s' if count > 1 else ''})"
