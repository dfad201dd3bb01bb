"""One `ClusterIndex` kept current across decisions for a caller that hears of changes, not of states
(the operator: its cache sees pods start, end and move, and nodes change), rebuilt when it cannot be
kept.

What holds GPUs is told by *source*, a name under which some running jobs are known (the operator: a
DLJob's pods, a pod the pod route released, a move's held target). Each call names the sources that
changed since the last one with the jobs each holds *now* (level-triggered: a source told twice, or told
after a failed call, comes out right), and how to list every source, which is read only to rebuild.
Sources that are few and read whole on every call (`fleeting`) need no change tracking: one missing
since the last call holds nothing any more.

The index is rebuilt when the caller says its view was replaced (`forget`: a resync), when the nodes
changed in a way `ClusterIndex.follow` cannot show in place, when a call failed half-way, and while two
running jobs share a key (an index holds one job per key: a fresh one is built every call until they
are apart, as every decision did before). Because the index's orders are canonical
(`placement/index.py`), the kept index answers exactly as a fresh `ClusterIndex.build` of the same
nodes and jobs would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.types import Node, RunningJob

Holders = Mapping[str, Sequence[RunningJob]]  # source -> the running jobs it holds


class IndexKeeper:
    def __init__(self) -> None:
        self._index: ClusterIndex | None = None
        self._held: dict[str, tuple[RunningJob, ...]] = {}  # source -> its jobs in the index
        self._source_of: dict[str, str] = {}  # job key -> the source that holds it
        self._fleeting: set[str] = set()  # the fleeting sources of the last call

    def forget(self) -> None:
        """Build the next index afresh: the caller's view of the cluster was replaced."""
        self._index = None

    def index(
        self,
        nodes: tuple[Node, ...],
        changed: Holders,
        every: Callable[[], Holders],
        fleeting: Holders | None = None,
    ) -> ClusterIndex:
        """The index of `nodes` with the jobs every source holds. `changed`: the sources that changed
        since the last call, with their jobs now; `every`: all sources but the fleeting ones, with
        their jobs (called only to rebuild); `fleeting`: sources given whole on every call."""
        fleeting = fleeting or {}
        gone = {source: () for source in self._fleeting.difference(fleeting)}
        self._fleeting = set(fleeting)
        index, self._index = self._index, None  # until the changes are in: a failure leaves a rebuild
        changes = {**changed, **gone, **fleeting}
        if index is not None and index.follow(nodes) and self._hold_all(index, changes):
            self._index = index
            return index
        return self._rebuild(nodes, {**every(), **fleeting})

    def _hold_all(self, index: ClusterIndex, changed: Holders) -> bool:
        """Each source of `changed` holds its jobs in `index`; False where two jobs would share a key."""
        return all(self._hold(index, source, tuple(jobs)) for source, jobs in changed.items())

    def _hold(self, index: ClusterIndex, source: str, jobs: tuple[RunningJob, ...]) -> bool:
        held = self._held.pop(source, ())
        if held == jobs:
            if jobs:
                self._held[source] = jobs
            return True
        for job in held:
            del self._source_of[job.request.key]
            index.remove(job.request.key)
        for job in jobs:
            key = job.request.key
            if key in self._source_of:
                return False
            self._source_of[key] = source
            index.add(job)
        if jobs:
            self._held[source] = jobs
        return True

    def _rebuild(self, nodes: tuple[Node, ...], every: Holders) -> ClusterIndex:
        held = {source: tuple(jobs) for source, jobs in every.items() if jobs}
        running = tuple(job for jobs in held.values() for job in jobs)
        index = ClusterIndex(nodes, running)
        source_of = {job.request.key: source for source, jobs in held.items() for job in jobs}
        if len(source_of) == len(running):  # else two jobs share a key: not kept, built afresh next time
            self._index, self._held, self._source_of = index, held, source_of
        return index
