"""An index of GPUs by occupancy, so a policy finds candidates without rescanning the cluster per job.

`ClusterIndex.build(snapshot)` indexes a snapshot once (O(GPUs + running jobs)); callers that see every
change (the simulator) keep one index alive and call `add` / `remove` instead, then hand it to policies
in `ClusterSnapshot.index`. A policy places its tentative assignments into the index and takes them out
again before it returns, so the index a caller passes in comes back unchanged.

Three views are kept current:
- empty usable GPUs per node, and nodes bucketed by how many empty usable GPUs they have (best fit:
  the node with the fewest empty GPUs that still fits the job comes first, which keeps whole nodes free
  for multi-GPU jobs);
- shareable GPUs grouped by (GPU type, memory, tenant workloads and their maxSlowdown): every GPU in a
  group answers the same prediction questions, so a policy evaluates a newcomer once per group, not
  once per GPU;
- running jobs by key.

Iteration order is insertion order (dicts, never sets), so the same history gives the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node, RunningJob
from horus_operator.prediction.api import Workload

GpuKey = tuple[str, int]
# (GPU type, GPU memory, sorted (workload, max_slowdown) of the tenants): GPUs with equal keys answer
# every placement question the same way, apart from their live telemetry.
GroupKey = tuple[str, int, tuple[tuple[Workload, float], ...]]


_GROUP_TOKENS: dict[GroupKey, int] = {}


def group_token(key: GroupKey) -> int:
    """A small integer standing for `key`, the same for equal keys in every index of this process.

    Policies memoise verdicts by token: hashing an int costs nothing, hashing a key re-hashes its
    workloads. The table only grows with distinct (GPU, tenants) combinations ever seen.
    """
    return _GROUP_TOKENS.setdefault(key, len(_GROUP_TOKENS))


class Group:
    """Shareable GPUs with equal `GroupKey`s."""

    __slots__ = ("key", "slots", "token")

    def __init__(self, key: GroupKey) -> None:
        self.key = key
        self.token = group_token(key)
        self.slots: dict[GpuKey, GpuSlot] = {}


def wants_whole_gpus(request: JobRequest) -> bool:
    """Multi-GPU jobs run synchronous steps at the pace of their slowest GPU, so one noisy co-tenant
    slows all of them: they get whole GPUs. maxSlowdown 1.0 is an explicit request never to share."""
    return request.gpus > 1 or request.max_slowdown <= 1.0


def workload_order(workload: Workload) -> tuple[str, int, str, str]:
    return (workload.model, workload.batch_size, workload.features_key, workload.precision)


class GpuSlot:
    """One GPU and the jobs on it. Mutable; owned by its `ClusterIndex`."""

    __slots__ = ("gpu", "group", "key", "node", "tenants", "usable")

    def __init__(self, gpu: Gpu, schedulable: bool) -> None:
        self.gpu = gpu
        self.key: GpuKey = gpu.key
        self.node = gpu.node
        self.usable = gpu.healthy and schedulable and not gpu.claimed_by
        self.tenants: list[RunningJob] = []
        self.group: Group | None = None  # the index's group it is filed in, while it is shareable

    @property
    def product(self) -> str:
        return self.gpu.product

    def group_key(self) -> GroupKey:
        if len(self.tenants) == 1:  # most shared GPUs: nothing to sort
            request = self.tenants[0].request
            return (self.gpu.product, self.gpu.memory_mib, ((request.workload, request.max_slowdown),))
        tenants = sorted(
            ((job.request.workload, job.request.max_slowdown) for job in self.tenants),
            key=lambda tenant: (workload_order(tenant[0]), tenant[1]),
        )
        return (self.gpu.product, self.gpu.memory_mib, tuple(tenants))

    def shareable(self) -> bool:
        """Has tenants, none of which wants its GPUs whole."""
        for job in self.tenants:  # a loop, not any(...): asked on every change of the index
            if wants_whole_gpus(job.request):
                return False
        return bool(self.tenants)


class ClusterIndex:
    def __init__(self, nodes: tuple[Node, ...], running: tuple[RunningJob, ...] = ()) -> None:
        self.slots: dict[GpuKey, GpuSlot] = {}
        self.node_slots: dict[str, list[GpuSlot]] = {}
        self.jobs: dict[str, RunningJob] = {}
        self._empty: dict[str, dict[GpuKey, GpuSlot]] = {}
        width = max((len(node.gpus) for node in nodes), default=0)
        self._nodes_by_empty: list[dict[str, None]] = [{} for _ in range(width + 1)]
        # tenant count -> group key -> group
        self._shared: dict[int, dict[GroupKey, Group]] = {}
        self._empty_total = 0
        self.changes = 0  # add/remove calls so far: equal counts on one index mean the same state
        for node in nodes:
            slots = [GpuSlot(gpu, node.schedulable) for gpu in node.gpus]
            self.node_slots[node.name] = slots
            for slot in slots:
                self.slots[slot.key] = slot
        # Bulk load: place every tenant first, then file each GPU once (not once per tenant).
        for job in running:
            self.jobs[job.request.key] = job
            for slot in self._slots_of(job):
                slot.tenants.append(job)
        for name, slots in self.node_slots.items():
            empty = self._empty[name] = {}
            for slot in slots:
                if not slot.usable:
                    continue
                if not slot.tenants:
                    empty[slot.key] = slot
                elif slot.shareable():
                    self._file_shared(slot)
            self._nodes_by_empty[len(empty)][name] = None
            self._empty_total += len(empty)

    @classmethod
    def build(cls, snapshot: ClusterSnapshot) -> ClusterIndex:
        return cls(snapshot.nodes, snapshot.running)

    @classmethod
    def of(cls, snapshot: ClusterSnapshot) -> tuple[ClusterIndex, bool]:
        """The snapshot's own index, borrowed (True: the caller must hand it back as it found it), or a
        fresh one built from it (False)."""
        if isinstance(snapshot.index, ClusterIndex):
            return snapshot.index, True
        return cls.build(snapshot), False

    # -- changes ---------------------------------------------------------------------------------
    def add(self, job: RunningJob) -> None:
        self.changes += 1
        self.jobs[job.request.key] = job
        for slot in self._slots_of(job):
            self._detach(slot)
            slot.tenants.append(job)
            self._attach(slot)

    def remove(self, key: str) -> RunningJob:
        self.changes += 1
        job = self.jobs.pop(key)
        for slot in self._slots_of(job):
            self._detach(slot)
            slot.tenants = [tenant for tenant in slot.tenants if tenant.request.key != key]
            self._attach(slot)
        return job

    # -- queries ---------------------------------------------------------------------------------
    def nodes_with_empty(self, at_least: int) -> Iterator[tuple[str, list[GpuSlot]]]:
        """(node, its empty usable GPUs) for nodes with at least `at_least` of them, best fit first."""
        for bucket in self._nodes_by_empty[max(at_least, 1) :]:
            for node in bucket:
                yield node, list(self._empty[node].values())

    def shared_groups(self, below: int) -> Iterator[Group]:
        """Usable GPUs running 1 .. `below`-1 jobs that all share, grouped (see `GroupKey`)."""
        for count in range(1, below):
            yield from self._shared.get(count, {}).values()

    def has_shared(self, below: int) -> bool:
        """Some GPU is in `shared_groups(below)` (a group is dropped with its last GPU)."""
        shared = self._shared
        return any(shared.get(count) for count in range(1, below))

    def empty_count(self) -> int:
        """Empty usable GPUs in the cluster."""
        return self._empty_total

    # -- bookkeeping -----------------------------------------------------------------------------
    def _slots_of(self, job: RunningJob) -> Iterator[GpuSlot]:
        for gpu_index in job.gpu_indices:
            slot = self.slots.get((job.node, gpu_index))
            if slot is not None:  # a job on a GPU the snapshot no longer lists has nothing to index
                yield slot

    def _detach(self, slot: GpuSlot) -> None:
        if not slot.usable:
            return
        if not slot.tenants:
            self._move_node(slot.node, lambda empty: empty.pop(slot.key))
        elif slot.group is not None:  # filed as shareable: its group is known, no key to work out
            group, slot.group = slot.group, None
            del group.slots[slot.key]
            if not group.slots:
                del self._shared[len(slot.tenants)][group.key]

    def _attach(self, slot: GpuSlot) -> None:
        if not slot.usable:
            return
        if not slot.tenants:
            self._move_node(slot.node, lambda empty: empty.__setitem__(slot.key, slot))
        elif slot.shareable():
            self._file_shared(slot)

    def _file_shared(self, slot: GpuSlot) -> None:
        groups = self._shared.setdefault(len(slot.tenants), {})
        key = slot.group_key()
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key)
        group.slots[slot.key] = slot
        slot.group = group

    def _move_node(self, node: str, change: Callable[[dict[GpuKey, GpuSlot]], object]) -> None:
        empty = self._empty[node]
        before = len(empty)
        self._nodes_by_empty[before].pop(node, None)
        change(empty)
        self._nodes_by_empty[len(empty)][node] = None
        self._empty_total += len(empty) - before
