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
