"""An index of GPUs by occupancy, so a policy finds candidates without rescanning the cluster per job.

`ClusterIndex.build(snapshot)` indexes a snapshot once (O(GPUs + running jobs)); callers that see every
change keep one index alive and call `add` / `remove` (and `follow` when nodes change) instead, then
hand it to policies in `ClusterSnapshot.index`: the simulator, and the operator through
`placement.keeper.IndexKeeper`. A policy places its tentative assignments into the index and takes them
out again before it returns, so the index a caller passes in comes back unchanged.

Three views are kept current:
- empty usable GPUs per node, and nodes bucketed by how many empty usable GPUs they have (best fit:
  the node with the fewest empty GPUs that still fits the job comes first, which keeps whole nodes free
  for multi-GPU jobs);
- shareable GPUs grouped by (GPU type, memory, tenant workloads and their maxSlowdown): every GPU in a
  group answers the same prediction questions, so a policy evaluates a newcomer once per group, not
  once per GPU;
- running jobs by key.

Every order a policy can break a tie by is canonical, a function of the indexed state and never of the
history of changes that led to it, so a kept index and a fresh `build` of the same snapshot give the same
answers: GPUs come in the snapshot's node order, then each node's GPU order (their `rank`); nodes of one
bucket by that order; groups by their first GPU. Only the orders of jobs (`jobs`, a GPU's `tenants`)
follow the order they were added, as a snapshot's `running` lists them; those orders decide no tie
between GPUs. Buckets and a node's empty GPUs stay sorted as GPUs come and go; a group's GPUs and the
groups of one tenant count are re-sorted lazily, on the first read after a change that may have put
them out of order.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping

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
    """Shareable GPUs with equal `GroupKey`s, in rank order."""

    __slots__ = ("_first", "_in_order", "_slots", "_top", "key", "token")

    def __init__(self, key: GroupKey, token: int) -> None:
        self.key = key
        self.token = token  # group_token(key)
        self._slots: dict[GpuKey, GpuSlot] = {}
        self._in_order = True
        self._first: int | None = None  # the least rank among its GPUs (None: to work out again)
        # At least the greatest rank among its GPUs (one that left may have held it): a GPU joining
        # below it may break the order. Kept, not read off the last entry: a dict walks backwards over
        # the holes its deletions left, and GPUs that join and leave again leave them at its end.
        self._top = -1

    @property
    def slots(self) -> dict[GpuKey, GpuSlot]:
        """Its GPUs by rank (sorted here, after a GPU joined out of order)."""
        if not self._in_order:
            # (rank, ...) tuples: ranks are unique, so the sort compares ints alone and calls no key
            ranked = sorted([(slot.rank, key, slot) for key, slot in self._slots.items()])
            self._slots = {key: slot for _, key, slot in ranked}
            self._in_order = True
            # A new dict: no holes to walk
            self._top = next(reversed(self._slots.values())).rank if self._slots else -1
        return self._slots

    def first_rank(self) -> int:
        if self._first is None:
            self._first = next(iter(self.slots.values())).rank
        return self._first

    def join(self, slot: GpuSlot) -> bool:
        """True when `slot` may now come first (the group's order among others may change)."""
        slots = self._slots
        new = not slots
        slots[slot.key] = slot
        if new:
            self._first = self._top = slot.rank
            self._in_order = True
            return True
        if slot.rank < self._top:
            self._in_order = False
        else:
            self._top = slot.rank
        # Ranks are unique: a GPU after the first leaves the group's place among the others as it was.
        if self._first is not None and slot.rank > self._first:
            return False
        self._first = None if self._first is None else slot.rank
        return True

    def leave(self, slot: GpuSlot) -> bool:
        """True when `slot` may have come first."""
        del self._slots[slot.key]
        if self._first is not None and slot.rank != self._first:
            return False
        self._first = None
        return True

    def __bool__(self) -> bool:
        return bool(self._slots)


def wants_whole_gpus(request: JobRequest) -> bool:
    """Multi-GPU jobs run synchronous steps at the pace of their slowest GPU, so one noisy co-tenant
    slows all of them: they get whole GPUs. maxSlowdown 1.0 is an explicit request never to share."""
    return request.gpus > 1 or request.max_slowdown <= 1.0


def workload_order(workload: Workload) -> tuple[str, int, str, str, str, float, float, float]:
    """A total order over what tells workloads apart (every field `Workload` compares), so that a set of
    co-tenants has one canonical order: one group and one cached answer per set, whatever the order the
    jobs came in. An unobserved busy fraction or peak sorts before every observed one."""
    return (
        workload.model,
        workload.batch_size,
        workload.features_key,
        workload.precision,
        workload.framework,
        workload.host_cpus,
        -1.0 if workload.busy is None else workload.busy,
        -1.0 if workload.peak_memory_mib is None else workload.peak_memory_mib,
    )


class GpuSlot:
    """One GPU and the jobs on it. Mutable; owned by its `ClusterIndex`."""

    __slots__ = ("gpu", "group", "key", "node", "rank", "tenants", "usable")

    def __init__(self, gpu: Gpu, schedulable: bool, rank: int) -> None:
        self.key: GpuKey = gpu.key
        self.node = gpu.node
        self.rank = rank  # its place in the snapshot's order of GPUs (node order, then the node's order)
        self.tenants: list[RunningJob] = []
        self.group: Group | None = None  # the index's group it is filed in, while it is shareable
        self.show(gpu, schedulable)

    def show(self, gpu: Gpu, schedulable: bool) -> None:
        """The GPU as its node now reports it (health, telemetry, claims)."""
        self.gpu = gpu
        self.usable = gpu.healthy and schedulable and not gpu.claimed_by

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
        self.nodes = nodes  # as indexed, and as `follow` last brought them
        self.slots: dict[GpuKey, GpuSlot] = {}
        self.node_slots: dict[str, list[GpuSlot]] = {}
        self.jobs: dict[str, RunningJob] = {}
        self._empty: dict[str, dict[GpuKey, GpuSlot]] = {}
        self._node_rank: dict[str, int] = {}
        self._node_names: list[str] = []  # by rank; a node `follow` dropped keeps its place unused
        self._next_rank = 0  # of the next GPU: ranks only grow, so a node added later comes last
        # empty GPUs -> the ranks of the nodes with that many, sorted
        self._nodes_by_empty: list[list[int]] = [[]]
        # tenant count -> group token -> group; by first GPU once the count is out of `_unsorted`
        # (by token, not key: an int hashes at once, a key hashes its workloads again)
        self._shared: dict[int, dict[int, Group]] = {}
        self._unsorted: set[int] = set()
        self._empty_total = 0
        self.changes = 0  # add/remove/follow changes so far: equal counts on one index mean the same state
        # node -> `changes` when it last changed (absent: never since it was indexed), so a reader that
        # derives something from one node's GPUs (`nodefrag.NodeStates`) redoes it only for those changed
        self._node_changed_at: dict[str, int] = {}
        for node in nodes:
            self._list(node)
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
            self._nodes_by_empty[len(empty)].append(self._node_rank[name])
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
        self._changing(job.node)
        self.jobs[job.request.key] = job
        for slot in self._slots_of(job):
            self._detach(slot)
            slot.tenants.append(job)
            self._attach(slot)

    def remove(self, key: str) -> RunningJob:
        job = self.jobs.pop(key)
        self._changing(job.node)
        for slot in self._slots_of(job):
            self._detach(slot)
            slot.tenants = [tenant for tenant in slot.tenants if tenant.request.key != key]
            self._attach(slot)
        return job

    def follow(self, nodes: tuple[Node, ...]) -> bool:
        """Brings the index to `nodes` in place: nodes gone are dropped, nodes new at the end added
        (with the indexed jobs that run on them), changed ones shown (health, telemetry, claims,
        schedulable). False, and nothing changed, where only a fresh index keeps the order canonical:
        nodes reordered, a new node before an indexed one, a node's GPUs added or removed."""
        if nodes is self.nodes:
            return True
        listed = {node.name for node in nodes}
        staying = [node for node in self.nodes if node.name in listed]
        # The staying nodes first, in their order (so the rest are all new), each with its GPUs.
        if len(listed) != len(nodes) or not all(map(_same_gpus, nodes[: len(staying)], staying)):
            return False
        for node in self.nodes:
            if node.name not in listed:
                self._drop(node.name)
        for node, before in zip(nodes, staying, strict=False):
            if node is not before and node != before:
                self._show(node)
        for node in nodes[len(staying) :]:
            self._add_node(node)
        self.nodes = nodes
        return True

    # -- queries ---------------------------------------------------------------------------------
    def nodes_with_empty(self, at_least: int) -> Iterator[tuple[str, list[GpuSlot]]]:
        """(node, its empty usable GPUs) for nodes with at least `at_least` of them, best fit first."""
        for count in range(max(at_least, 1), len(self._nodes_by_empty)):
            yield from self.nodes_with_exactly(count)

    def nodes_with_exactly(self, count: int) -> Iterator[tuple[str, list[GpuSlot]]]:
        """(node, its empty usable GPUs) for nodes with exactly `count` of them, in node order."""
        if count >= len(self._nodes_by_empty):
            return
        names = self._node_names
        for rank in self._nodes_by_empty[count]:
            node = names[rank]
            yield node, list(self._empty[node].values())

    def empty_counts(self) -> list[int]:
        """The numbers of empty usable GPUs some node has (above 0), ascending."""
        return [count for count, bucket in enumerate(self._nodes_by_empty) if count and bucket]

    def shared_groups(self, below: int) -> Iterable[Group]:
        """Usable GPUs running 1 .. `below`-1 jobs that all share, grouped (see `GroupKey`)."""
        if below == 2:  # the usual co-location limit: one tenant count, read without a generator
            return self._groups(1).values()
        return itertools.chain.from_iterable(self._groups(count).values() for count in range(1, below))

    def changed_only_by(self, changes: int, started: Iterable[RunningJob]) -> bool:
        """Whether all that changed since the index counted `changes`, when it held none of `started`,
        is that it added them: exactly as many changes as jobs, each held now as started (the same
        request on the same GPUs), and only an add makes a job held."""
        started = tuple(started)
        return self.changes == changes + len(started) and all(map(self._holds, started))

    def _holds(self, job: RunningJob) -> bool:
        held = self.jobs.get(job.request.key)
        if held is None or held.request is not job.request:
            return False
        return (held.node, held.gpu_indices) == (job.node, job.gpu_indices)

    def has_shared(self, below: int) -> bool:
        """Some GPU is in `shared_groups(below)` (a group is dropped with its last GPU)."""
        shared = self._shared
        return any(shared.get(count) for count in range(1, below))

    def empty_count(self) -> int:
        """Empty usable GPUs in the cluster."""
        return self._empty_total

    @property
    def node_changes(self) -> Mapping[str, int]:
        """Node -> `changes` when it last changed; absent where it has not since it was indexed."""
        return self._node_changed_at

    # -- bookkeeping -----------------------------------------------------------------------------
    def _changing(self, node: str) -> None:
        self.changes += 1
        self._node_changed_at[node] = self.changes

    def _groups(self, count: int) -> dict[int, Group]:
        groups = self._shared.get(count, {})
        if count in self._unsorted:
            self._unsorted.discard(count)
            # (first rank, ...) tuples: no two groups share a GPU, so the sort compares ints alone
            ranked = sorted([(group.first_rank(), token, group) for token, group in groups.items()])
            groups = self._shared[count] = {token: group for _, token, group in ranked}
        return groups

    def _slots_of(self, job: RunningJob) -> Iterator[GpuSlot]:
        for gpu_index in job.gpu_indices:
            slot = self.slots.get((job.node, gpu_index))
            if slot is not None:  # a job on a GPU the snapshot no longer lists has nothing to index
                yield slot

    def _list(self, node: Node) -> list[GpuSlot]:
        """Ranks `node` after every node listed so far, and its GPUs after theirs."""
        slots = [GpuSlot(gpu, node.schedulable, self._next_rank + i) for i, gpu in enumerate(node.gpus)]
        self._next_rank += len(slots)
        self._node_rank[node.name] = len(self._node_names)
        self._node_names.append(node.name)
        self.node_slots[node.name] = slots
        self.slots.update((slot.key, slot) for slot in slots)
        while len(self._nodes_by_empty) <= len(slots):
            self._nodes_by_empty.append([])
        return slots

    def _add_node(self, node: Node) -> None:
        self._changing(node.name)
        slots = self._list(node)
        self._empty[node.name] = {}
        self._nodes_by_empty[0].append(self._node_rank[node.name])  # the highest rank: sorted
        for job in self.jobs.values():  # jobs the index holds already on GPUs it did not list
            if job.node == node.name:
                for slot in self._slots_of(job):
                    slot.tenants.append(job)
        for slot in slots:
            self._attach(slot)

    def _drop(self, name: str) -> None:
        """Forgets node `name`; the jobs on it stay (a fresh index keeps them, on no GPU)."""
        self._changing(name)
        for slot in self.node_slots.pop(name):
            self._detach(slot)
            del self.slots[slot.key]
        del self._empty[name]
        bucket = self._nodes_by_empty[0]  # every GPU detached: it has no empty GPU left
        del bucket[bisect.bisect_left(bucket, self._node_rank.pop(name))]

    def _show(self, node: Node) -> None:
        self._changing(node.name)
        for slot, gpu in zip(self.node_slots[node.name], node.gpus, strict=True):
            self._detach(slot)
            slot.show(gpu, node.schedulable)
            self._attach(slot)

    def _detach(self, slot: GpuSlot) -> None:
        if not slot.usable:
            return
        if not slot.tenants:
            self._move_node(slot.node, lambda empty: empty.pop(slot.key))
        elif slot.group is not None:  # filed as shareable: its group is known, no key to work out
            group, slot.group = slot.group, None
            count = len(slot.tenants)
            if group.leave(slot):
                self._unsorted.add(count)
            if not group:
                del self._shared[count][group.token]

    def _attach(self, slot: GpuSlot) -> None:
        if not slot.usable:
            return
        if not slot.tenants:
            self._move_node(slot.node, lambda empty: _put_ranked(empty, slot))
        elif slot.shareable():
            self._file_shared(slot)

    def _file_shared(self, slot: GpuSlot) -> None:
        count = len(slot.tenants)
        groups = self._shared.setdefault(count, {})
        key = slot.group_key()
        token = group_token(key)
        group = groups.get(token)
        if group is None:
            group = groups[token] = Group(key, token)
        if group.join(slot):
            self._unsorted.add(count)
        slot.group = group

    def _move_node(self, node: str, change: Callable[[dict[GpuKey, GpuSlot]], object]) -> None:
        empty = self._empty[node]
        before = len(empty)
        rank = self._node_rank[node]
        bucket = self._nodes_by_empty[before]
        del bucket[bisect.bisect_left(bucket, rank)]
        change(empty)
        bisect.insort(self._nodes_by_empty[len(empty)], rank)
        self._empty_total += len(empty) - before


def _by_rank(item: tuple[GpuKey, GpuSlot]) -> int:
    return item[1].rank


def _put_ranked(slots: dict[GpuKey, GpuSlot], slot: GpuSlot) -> None:
    """Files `slot` in `slots` (a node's few empty GPUs), keeping them in rank order."""
    last = next(reversed(slots.values()), None)
    slots[slot.key] = slot
    if last is not None and slot.rank < last.rank:
        ordered = sorted(slots.items(), key=_by_rank)
        slots.clear()
        slots.update(ordered)


def _same_gpus(node: Node, indexed: Node) -> bool:
    """The same node with the same GPUs (by index), whatever their state."""
    if node is indexed:
        return True
    if node.name != indexed.name or len(node.gpus) != len(indexed.gpus):
        return False
    return all(gpu.index == old.index for gpu, old in zip(node.gpus, indexed.gpus, strict=True))
