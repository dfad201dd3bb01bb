"""Fragmentation against the size mix of the jobs to come: which node's empty GPUs a job should take.

FGD (Weng et al., "Beware of Fragmentation", USENIX ATC 2023) places each task where the *expected*
fragmentation of the cluster grows least, the expectation taken over the tasks likely to come (their
sizes' popularity). Here, for whole GPUs on one node: a node with `free` empty GPUs strands, for a job
asking `size` GPUs, all `free` of them when `free < size` (that job cannot start there), none otherwise;
a one-GPU job fits any empty or shareable GPU, so it strands nothing. Against a mix of sizes the node
strands `free` x the share of jobs wider than `free`. A placement's cost is what it adds to that.

The mix is that of the queued jobs a call reads (pure: nothing remembered between calls). Under a mix
of one-GPU jobs only every cost is 0 and the order is best fit (the fewest empty GPUs first), what
placement did before. Shared slots: a GPU with a co-tenant below the co-location limit is not empty, so
a job that shares it costs nothing here; the node model has no NVLink groups, so a node is the unit.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Iterable

from horus_operator.placement.types import JobRequest


class SizeMix:
    """Shares of jobs by GPU count (counts above one only: a one-GPU job is never stranded)."""

    __slots__ = ("_wide",)

    def __init__(self, shares: Iterable[tuple[int, float]] = ()) -> None:
        self._wide = tuple(sorted((size, share) for size, share in shares if size > 1 and share > 0.0))

    @classmethod
    def of(cls, requests: Iterable[JobRequest]) -> SizeMix:
        counts = Counter(request.gpus for request in requests)
        total = sum(counts.values())
        return cls((size, count / total) for size, count in counts.items()) if total else cls()

    def __bool__(self) -> bool:
        return bool(self._wide)

    def stranded(self, free: int) -> float:
        """Expected empty GPUs of a node with `free` of them that the next job, drawn from the mix,
        cannot use."""
        return free * sum((share for size, share in self._wide if free < size), 0.0)

    def cost(self, free: int, taken: int) -> float:
        """What taking `taken` of a node's `free` empty GPUs adds to the GPUs it strands (negative: a
        node already stranding GPUs is used up)."""
        return self.stranded(free - taken) - self.stranded(free)

    def node_order(self, taken: int, counts: Iterable[int]) -> list[int]:
        """The empty-GPU counts (of `counts`, those with room for `taken`) in the order to try their
        nodes: best fit among those that strand no more GPUs than they do now, then the rest by what
        they add. Not least cost first, FGD's order: that takes a GPU from a node with 7 of 8 empty
        (already stranding 7 for an eight-GPU job, so it costs nothing) before one with 2, and the
        nodes closest to whole never drain (real-mix-900, horus, fifo: eight-GPU jobs waited 9.6 h
        instead of 3.0 h; docs/evaluation.md)."""
        return sorted(
            (free for free in counts if free >= taken),
            key=lambda free: (max(0.0, self.cost(free, taken)), free),
        )


WHOLE_GPU = 1000  # thousandths of a GPU, as jobs state their shares (`JobRequest.gpu_milli`)


class ShareMix:
    """The stated requests (`JobRequest.gpu_milli`) seen so far, and FGD's expected fragmentation against
    them: the thousandths of a GPU left free where the next request, drawn from the mix, cannot use
    them. A GPU with `free` thousandths left strands them for every request stating more per GPU (a
    whole-GPU request states 1000, so a partly used GPU strands its rest for it); a node's empty GPUs
    are stranded whole for multi-GPU requests wider than they are (`SizeMix`). A placement's cost is
    what it adds to that, measured on the GPU it takes and its node's empty GPUs (a node's other shared
    GPUs do not change, so they add nothing here). FGD measures whole nodes, CPU included: so does
    `nodefrag.NodeMix`, once requests state CPU, memory or GPU types.

    Seen so far: every stated request a policy reads is counted once, by key, because with one job at a
    time (Alibaba's replay, `sim/openb.py`) a queue's mix would be the job alone."""

    __slots__ = ("_above", "_counts", "_keys", "_shares", "_sizes", "_total")

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._counts: dict[tuple[int, int], int] = {}  # (GPUs, thousandths of each) -> requests
        self._total = 0
        self._shares: list[int] = []  # the distinct thousandths per GPU requested, ascending
        self._above: list[int] = [0]  # requests stating at least `_shares[i]`; 0 past the last
        self._sizes = SizeMix()

    def note(self, request: JobRequest) -> None:
        """Count `request` (once per key) if it states its share."""
        if not request.gpu_milli or request.key in self._keys:
            return
        self._keys.add(request.key)
        kind = (request.gpus, request.gpu_milli)
        self._counts[kind] = self._counts.get(kind, 0) + 1
        self._total += 1
        per_gpu: Counter[int] = Counter()
        by_size: Counter[int] = Counter()
        for (gpus, milli), count in self._counts.items():
            per_gpu[milli] += count
            by_size[gpus] += count
        self._shares = sorted(per_gpu)
        from_the_top = (per_gpu[milli] for milli in reversed(self._shares))
        self._above = list(itertools.accumulate(from_the_top, initial=0))[::-1]
        self._sizes = SizeMix((gpus, count / self._total) for gpus, count in by_size.items())

    @property
    def sizes(self) -> SizeMix:
        """The mix by GPU count, for whole GPUs taken on a node (`SizeMix.node_order`)."""
        return self._sizes

    def _stranded_on_gpu(self, free: int) -> float:
        """Expected thousandths of a GPU with `free` left that the next request cannot use: all of them
        for a request stating more."""
        if free <= 0 or not self._total:
            return 0.0
        return free * self._above[bisect.bisect_right(self._shares, free)] / self._total

    def cost_on_shared(self, free: int, share: int) -> float:
        """What `share` thousandths taken from a partly used GPU with `free` left add to the stranded."""
        return self._stranded_on_gpu(free - share) - self._stranded_on_gpu(free)

    def cost_on_empty(self, empty: int, share: int) -> float:
        """What `share` thousandths taken from one of a node's `empty` GPUs add to the stranded: the
        GPU's rest, and the node's empty GPUs for wider requests (in thousandths)."""
        node = self._sizes.cost(empty, 1) * WHOLE_GPU
        return self._stranded_on_gpu(WHOLE_GPU - share) + node
