"""FGD's expected fragmentation of whole nodes, for requests that state what they need beyond GPUs.

FGD (Weng et al., "Beware of Fragmentation", USENIX ATC 2023) measures per node the GPU capacity the
next request cannot use, in expectation over the kinds of requests seen (each weighed by how often it
came). For a kind the node cannot host at all, every free thousandth of its GPUs is lost: its CPU or
memory left is short of the kind's ask, its GPUs are of a type the kind does not run on, or fewer of
its GPUs have the share the kind asks than it asks GPUs. For a kind it can host, the free thousandths
of the GPUs with less left than that share are lost. A placement costs what it adds to its node's
measure, and so does a pod asking no GPU: the CPU it takes can leave the node's GPUs to nobody.

One departure from FGD, where CPU or memory binds: FGD counts a node's GPUs usable by a kind whenever
its CPU and memory fit one more of it, and all lost once they fit none. But GPUs the node's CPU cannot
feed are lost already: where its GPUs could take n more requests of a kind one after another and its
CPU and memory only m < n, only m/n of what those GPUs offer the kind is usable (`_Shape.fed`). Where
CPU and memory fit as many as the GPUs (CPU does not bind), the measure is FGD's. Without this, taking
CPU from a node whose CPU binds looks costlier than it is (all its GPUs lost at once, the step FGD's
count takes), and taking it from a node whose CPU does not bind looks free; when CPU runs out before
GPUs, fractions went to empty GPUs of CPU-rich nodes, fragmenting them, to spare CPU-poor nodes whose
GPUs their CPU could not have fed anyway (openb's cpu250 trace: 93.1 % allocated against 94.3 % on the
GPU view alone).

`fragmentation.ShareMix` is the same measure where requests state only their GPU share: then a node's
GPUs are independent, and one GPU and the node's empty count say what a placement adds. Once requests
state CPU, memory or GPU types (`JobRequest.states_host`), a node's CPU and GPU type couple its GPUs,
so the measure is taken on whole nodes (`NodeState`): a rare GPU type's GPUs count for the kinds that
can use nothing else, and a node whose CPU is nearly gone strands its GPUs.

Nodes carry one GPU type (as GPU Feature Discovery labels them); the co-location limit is not modelled
(a GPU's stated shares bound its tenants long before it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from horus_operator.placement.base import WHOLE_GPU_MILLI, PlacementCall, stated_share_left
from horus_operator.placement.index import ClusterIndex, GpuKey, GpuSlot, wants_whole_gpus
from horus_operator.placement.types import HostRoom, JobRequest

# The weights are refreshed once the requests seen have grown by this fraction since they were last
# (every request while few are seen): a node's measure is remembered between refreshes, and weights
# moved by a sixteenth change which placement costs least very little.
REFRESH_GROWTH = 16


class NodeState(NamedTuple):
    """What a node's measure depends on: its GPU type, CPU and memory left (None: not modelled), and
    the thousandths each GPU still offers a stated share, descending, GPUs with none left out."""

    product: str
    host: HostRoom | None
    free: tuple[int, ...]

    def fits(self, request: JobRequest) -> bool:
        """Whether its CPU and memory left fit `request`'s asks."""
        return self.host is None or self.host.fits(request)

    def after(self, request: JobRequest, taken: Sequence[int] = ()) -> NodeState:
        """The node once `request` takes one GPU offering each of `taken` (whole: nothing left of them
        to others), and its CPU and memory."""
        free = list(self.free)
        for offered in taken:
            free.remove(offered)
            rest = 0 if wants_whole_gpus(request) else offered - request.gpu_milli
            if rest > 0:
                free.append(rest)
        host = self.host
        if host is not None:
            host = HostRoom(host.cpu_milli - request.cpu_milli, host.memory_mib - request.host_memory_mib)
        return NodeState(self.product, host, tuple(sorted(free, reverse=True)))


class RequestKind(NamedTuple):
    gpus: int
    share: int  # thousandths of each GPU
    products: frozenset[str]  # empty: any
    cpu_milli: int
    memory_mib: int


class _Shape:
    """The kinds seen that ask one GPU shape (count, share, GPU types), whatever their CPU and memory:
    how much of a node's GPUs they can use, and how many of them a node's CPU and memory feed."""

    __slots__ = ("_fed", "_hosts", "gpus", "products", "share")

    def __init__(
        self, gpus: int, share: int, products: frozenset[str], hosts: Iterable[tuple[int, int, int]]
    ) -> None:
        self.gpus = gpus
        self.share = share
        self.products = products
        self._hosts = sorted(hosts)  # (CPU, memory, requests) by CPU
        self._fed: dict[tuple[HostRoom | None, int], float] = {}

    def usable(self, free: tuple[int, ...]) -> int:
        """Thousandths of the GPUs offering `free` (descending) that one of these could use: those on
        GPUs with its share left, where there are as many as it asks; else none."""
        enough = 0
        for offered in free:
            if offered < self.share:
                break
            enough += 1
        return sum(free[:enough]) if enough >= self.gpus else 0

    def copies(self, free: tuple[int, ...]) -> int:
        """How many of these the GPUs offering `free` could take, one after another."""
        if self.share >= WHOLE_GPU_MILLI:
            return sum(1 for offered in free if offered >= WHOLE_GPU_MILLI) // self.gpus
        return sum(offered // self.share for offered in free if offered >= self.share)

    def fed(self, host: HostRoom | None, copies: int) -> float:
        """How many of these requests a node's CPU and memory left feed, where its GPUs could take
        `copies` of each: a kind whose asks fit m < `copies` times counts m/`copies` of its requests
        (its GPUs beyond what the CPU and memory feed are lost to it), one that fits `copies` times or
        more counts all, one that fits none none. All where not modelled."""
        key = (host, copies)
        fed = self._fed.get(key)
        if fed is None:
            if host is None:
                fed = float(sum(count for _, _, count in self._hosts))
            else:
                cpu, memory_left = host
                fed = 0.0
                for cpu_ask, memory, count in self._hosts:
                    if cpu_ask > cpu:
                        break  # by CPU: no further one fits
                    if memory > memory_left:
                        continue
                    times = min(
                        cpu // cpu_ask if cpu_ask else copies, memory_left // memory if memory else copies
                    )
                    fed += count * (min(1.0, times / copies) if copies > 0 else 1.0)
            self._fed[key] = fed
        return fed


class NodeMix:
    """The stated requests seen so far, by kind (`RequestKind`), and FGD's measure of a node against
    them (thousandths of its GPUs the next request, drawn from them, cannot use). Each request is
    counted once, by key."""

    __slots__ = (
        "_costs",
        "_counts",
        "_keys",
        "_measures",
        "_on_product",
        "_shapes",
        "_total",
        "_weighed",
        "states_host",
    )

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._counts: Counter[RequestKind] = Counter()
        self._total = 0
        self._weighed = 0  # requests counted when the shapes were last built
        self._shapes: list[_Shape] = []
        self._on_product: dict[str, list[_Shape]] = {}  # GPU type -> the shapes that may run on it
        self._measures: dict[NodeState, float] = {}
        self._costs: dict[tuple[NodeState, tuple[int, ...], int, int, bool, int, int], float] = {}
        self.states_host = False  # some request seen states CPU, memory or GPU types

    def note(self, request: JobRequest) -> None:
        """Count `request` (once per key) if it states its share."""
        if not request.gpu_milli or request.key in self._keys:
            return
        self._keys.add(request.key)
        self.states_host = self.states_host or request.states_host()
        self._counts[_kind(request)] += 1
        self._total += 1
        if self._total - self._weighed >= max(1, self._weighed // REFRESH_GROWTH):
            self._reweigh()

    def _reweigh(self) -> None:
        self._weighed = self._total
        self._shapes = self._build_shapes()
        self._on_product.clear()
        self._measures.clear()
        self._costs.clear()

    def measure(self, state: NodeState) -> float:
        """Expected thousandths of the node's free GPU share the next request cannot use (of what
        it could, the part beyond what the node's CPU and memory feed counted lost: `_Shape.fed`)."""
        known = self._measures.get(state)
        if known is not None:
            return known
        total = sum(state.free)
        lost = float(total)
        if total and self._weighed:
            usable = 0.0
            for shape in self._shapes_on(state.product):
                on_gpus = shape.usable(state.free)
                if on_gpus:  # most shapes fit no GPU of a full node: its host room is not asked
                    usable += on_gpus * shape.fed(state.host, shape.copies(state.free))
            lost -= usable / self._weighed
        self._measures[state] = lost
        return lost

    def cost(self, state: NodeState, request: JobRequest, taken: Sequence[int] = ()) -> float:
        """What `request` taking GPUs offering `taken` (and its CPU and memory) adds to the measure."""
        key = (
            state,
            tuple(taken),
            request.gpus,
            request.gpu_milli,
            wants_whole_gpus(request),
            request.cpu_milli,
            request.host_memory_mib,
        )
        cost = self._costs.get(key)
        if cost is None:
            cost = self._costs[key] = self.measure(state.after(request, taken)) - self.measure(state)
        return cost

    def _shapes_on(self, product: str) -> list[_Shape]:
        shapes = self._on_product.get(product)
        if shapes is None:
            shapes = self._on_product[product] = [
                shape for shape in self._shapes if not shape.products or product in shape.products
            ]
        return shapes

    def _build_shapes(self) -> list[_Shape]:
        hosts: dict[tuple[int, int, frozenset[str]], list[tuple[int, int, int]]] = {}
        for kind, count in self._counts.items():
            shape = (kind.gpus, kind.share, kind.products)
            hosts.setdefault(shape, []).append((kind.cpu_milli, kind.memory_mib, count))
        return [_Shape(gpus, share, products, rows) for (gpus, share, products), rows in hosts.items()]


def _kind(request: JobRequest) -> RequestKind:
    return RequestKind(
        request.gpus, request.gpu_milli, request.gpu_products, request.cpu_milli, request.host_memory_mib
    )


def offered(slot: GpuSlot) -> int:
    """Thousandths of `slot`'s GPU a stated share may still take: none where a tenant holds it whole or
    states no share (`PlacementCall.room`), or it is not usable."""
    if not slot.usable:
        return 0
    for tenant in slot.tenants:
        if wants_whole_gpus(tenant.request) or not tenant.request.gpu_milli:
            return 0
    return stated_share_left(slot)


# Nodes alike (one `NodeState`), each with its position in the index's node order
Groups = dict[NodeState, dict[str, int]]


class NodeStates:
    """The nodes of one kept index grouped by `NodeState`, a node regrouped only when its GPUs (the
    index's `node_changes`) or its host room (a new object) changed: a call weighs each state once."""

    __slots__ = ("_groups", "_index", "_rows")

    def __init__(self) -> None:
        self._index: ClusterIndex | None = None
        self._rows: dict[str, tuple[int, HostRoom | None, NodeState]] = {}  # when changed, host, state
        self._groups: Groups = {}

    def grouped(self, index: ClusterIndex, host_of: Callable[[str], HostRoom | None]) -> Groups:
        """`index`'s nodes by state, `host_of` giving each node's CPU and memory left (None: not
        modelled). The answer is this object's own, current until the next call."""
        if index is not self._index or len(self._rows) > len(index.node_slots):  # another, or nodes gone
            self._index = index
            self._rows.clear()
            self._groups.clear()
        changes, rows = index.node_changes, self._rows
        for position, node in enumerate(index.node_slots):
            host = host_of(node)
            changed_at = changes.get(node, -1)
            row = rows.get(node)
            if row is not None and row[0] == changed_at and row[1] is host:
                continue
            if row is not None:
                self._ungroup(node, row[2])
            state = _state_of(index.node_slots[node], host)
            self._groups.setdefault(state, {})[node] = position
            rows[node] = (changed_at, host, state)
        return self._groups

    def _ungroup(self, node: str, state: NodeState) -> None:
        group = self._groups[state]
        del group[node]
        if not group:
            del self._groups[state]


def _state_of(slots: Sequence[GpuSlot], host: HostRoom | None) -> NodeState:
    free = sorted((left for left in map(offered, slots) if left > 0), reverse=True)
    return NodeState(slots[0].product if slots else "", host, tuple(free))


def _in_order(nodes: dict[str, int]) -> list[str]:
    return sorted(nodes, key=nodes.__getitem__)


def cheapest_slots(
    call: PlacementCall, request: JobRequest, held: set[GpuKey], mix: NodeMix, states: NodeStates
) -> tuple[GpuSlot, ...] | None:
    """GPUs for `request` (stated share) on the node where it adds least to the node's measure, then
    leaves least on the GPU it takes, then on the node (best fit), then the first node."""
    groups = states.grouped(call.index, call.host_room)
    # (cost, thousandths left on the GPU, on the node, first node's position, GPUs' offers, state)
    options: list[tuple[float, int, int, int, tuple[int, ...], NodeState]] = []
    whole = wants_whole_gpus(request)
    for state, nodes in groups.items():
        if not state.free or not state.fits(request):
            continue
        if request.gpu_products and state.product not in request.gpu_products:
            continue
        first, total = min(nodes.values()), sum(state.free)
        for taken in _choices(state.free, request):
            left = 0 if whole else taken[0] - request.gpu_milli
            options.append((mix.cost(state, request, taken), left, total, first, taken, state))
    options.sort()
    for *_, taken, state in options:
        for node in _in_order(groups[state]):
            if call.node_refusal(request, node) is None:
                slots = _slots_offering(call, request, held, node, taken)
                if slots is not None:
                    return slots
    return None


def _choices(free: tuple[int, ...], request: JobRequest) -> Iterator[tuple[int, ...]]:
    """The GPUs `request` could take on a node offering `free`, by what they offer: whole GPUs where it
    wants them whole, else one GPU of each distinct offer at least its share."""
    if wants_whole_gpus(request):
        whole = sum(1 for offered in free if offered >= WHOLE_GPU_MILLI)
        if whole >= request.gpus:
            yield (WHOLE_GPU_MILLI,) * request.gpus
        return
    for offered in sorted(set(free)):
        if offered >= request.gpu_milli:
            yield (offered,)


def _slots_offering(
    call: PlacementCall, request: JobRequest, held: set[GpuKey], node: str, taken: tuple[int, ...]
) -> tuple[GpuSlot, ...] | None:
    """GPUs of `node` offering `taken` that have room for `request`; None where too few have."""
    wanted = Counter(taken)
    slots = []
    for slot in call.index.node_slots[node]:
        share = offered(slot)
        if wanted[share] and slot.key not in held and call.room(request, slot) is None:
            wanted[share] -= 1
            slots.append(slot)
    return tuple(slots) if len(slots) == len(taken) else None


def least_costly_host(mix: NodeMix, request: JobRequest, groups: Groups) -> str | None:
    """The node where `request`, asking no GPU, adds least to the measure (its CPU and memory can strand
    GPUs), then the one with least GPU share free, then least CPU left, then the first; None where no
    node has its CPU and memory left."""
    best: tuple[float, int, int, int] | None = None
    chosen = None
    for state, nodes in groups.items():
        if not state.fits(request):
            continue
        first = min(nodes.values())
        key = (mix.cost(state, request), sum(state.free), state.host.cpu_milli if state.host else 0, first)
        if best is None or key < best:
            best, chosen = key, _in_order(nodes)[0]
    return chosen
