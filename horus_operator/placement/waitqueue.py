"""The waiting jobs in the order every cycle reads them (`queueorder.Ordering`), kept sorted as jobs come
and go.

The simulator keeps one queue for a whole run, tens of thousands of jobs long when the cluster is
overloaded, and starts most jobs from near its head. One flat sorted list would move every entry behind
a started job, so a queue of 50,000 cost more to keep than to decide on; the entries are kept in sorted
chunks instead (`_SortedChunks`), and an insert or removal moves at most a chunk.

A job's key is fixed while it waits except when its standing rises (`queueorder.Standing`): when it
starves (`Ordering.starves_at`, known when it is queued: the queue keeps those times in a heap) or turns
critical (its remaining work passes a threshold that falls with time: the queue keeps that work sorted).
`advance` re-inserts those jobs.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from horus_operator.placement.queueorder import Ordering, QueueKey, Standing
from horus_operator.placement.types import JobRequest


class WaitQueue(Sequence[JobRequest]):
    """The waiting jobs, always in `ordering`'s order, and those with known remaining work also by that
    work (the makespan horizon wants the longest). Kept sorted on insert: re-sorting on every event would
    cost more than deciding."""

    def __init__(self, requests: Iterable[JobRequest] = (), *, ordering: Ordering | None = None) -> None:
        self.ordering = ordering or Ordering()
        self._requests: dict[str, JobRequest] = {}
        self._keys: dict[str, QueueKey] = {}  # each waiting job's key as inserted (its standing changes it)
        self._standings: dict[str, Standing] = {}
        # (key, request): the request rides along so iterating reads no dictionary. The key ends with
        # the job's key, so two entries never compare their requests.
        self._order = _SortedChunks()
        self._by_work = _SortedChunks()  # (-remaining_s, job key)
        self._starving: list[tuple[float, int, str, JobRequest]] = []  # (starves at, seq, key, request)
        self._sequence = itertools.count()
        self._now = -math.inf
        self._gang_members: Counter[str] = Counter()  # gang -> its members waiting here
        for request in requests:
            self.add(request)

    def add(self, request: JobRequest) -> None:
        """Queue `request`, replacing a waiting job of the same key."""
        if request.key in self._requests:
            self.remove(request.key)
        self._requests[request.key] = request
        starves_at = self.ordering.starves_at(request)
        starved = starves_at <= self._now
        if not starved and starves_at < math.inf:
            heapq.heappush(self._starving, (starves_at, next(self._sequence), request.key, request))
        self._insert(request, Standing.STARVED if starved else Standing.WAITING)
        if request.remaining_s:
            self._by_work.insert((-request.remaining_s, request.key))
        if request.gang:
            self._gang_members[request.gang] += 1

    def remove(self, key: str) -> JobRequest:
        request = self._requests.pop(key)
        self._order.delete((self._keys.pop(key),))  # sorts just before its entry, after every other
        del self._standings[key]
        if request.remaining_s:
            self._by_work.delete((-request.remaining_s, key))
        if request.gang:
            self._gang_members[request.gang] -= 1
            if not self._gang_members[request.gang]:
                del self._gang_members[request.gang]
        return request

    def gang_members(self, gang: str) -> int:
        """How many members of `gang` wait here."""
        return self._gang_members[gang]

    def advance(self, now: float, horizon: float | None = None) -> None:
        """Moves up the jobs that have starved by `now` (the caller's clock) and, given the makespan
        `horizon`, those that have turned critical (`Ordering.critical_from_s`)."""
        self._now = max(self._now, now)
        starving = self._starving
        while starving and starving[0][0] <= self._now:
            _, _, key, request = heapq.heappop(starving)
            if self._requests.get(key) is request:  # still waiting, not replaced since
                self._rise(key, Standing.STARVED)
        critical_from = self.ordering.critical_from_s(now, horizon)
        if critical_from is not None:
            for negative_work, key in self._by_work:
                if -negative_work < critical_from:
                    break
                self._rise(key, Standing.CRITICAL)

    def _rise(self, key: str, standing: Standing) -> None:
        if self._standings[key] > standing:
            self._order.delete((self._keys[key],))
            self._insert(self._requests[key], standing)

    def standing(self, key: str) -> Standing:
        """Where waiting job `key` lines up within its priority (critical, starved or in the order)."""
        return self._standings[key]

    def longest_remaining_s(self) -> float:
        """The most remaining work of any waiting job (0 when none is known)."""
        first = self._by_work.first()
        return 0.0 if first is None else -first[0]

    def _insert(self, request: JobRequest, standing: Standing) -> None:
        self._standings[request.key] = standing
        order = self._keys[request.key] = self.ordering.key(request, standing)
        self._order.insert((order, request))

    def __contains__(self, item: object) -> bool:
        return isinstance(item, JobRequest) and self._requests.get(item.key) == item

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self) -> Iterator[JobRequest]:
        return map(_REQUEST, self._order)

    @overload
    def __getitem__(self, position: int) -> JobRequest: ...
    @overload
    def __getitem__(self, position: slice) -> list[JobRequest]: ...
    def __getitem__(self, position: int | slice) -> JobRequest | list[JobRequest]:
        if isinstance(position, slice):
            count = prefix_length(position)
            return list(itertools.islice(self, count)) if count is not None else list(self)[position]
        request: JobRequest = _REQUEST(self._order.at(position))
        return request


_REQUEST = operator.itemgetter(1)


def prefix_length(position: slice) -> int | None:
    """n for a slice `[:n]` (what policies take of a queue), None for any other."""
    plain = position.start in (None, 0) and position.step in (None, 1)
    return position.stop if plain and isinstance(position.stop, int) and position.stop >= 0 else None


class _SortedChunks:
    """Distinct tuples in ascending order, held in chunks of at most 2 × `CHUNK` with each chunk's last
    entry beside them, to find an entry's chunk by bisection."""

    CHUNK = 512

    def __init__(self) -> None:
        self._chunks: list[list[tuple[Any, ...]]] = []
        self._lasts: list[tuple[Any, ...]] = []

    def insert(self, entry: tuple[Any, ...]) -> None:
        chunks, lasts = self._chunks, self._lasts
        if not chunks:
            chunks.append([entry])
            lasts.append(entry)
            return
        at = min(bisect.bisect_left(lasts, entry), len(chunks) - 1)
        chunk = chunks[at]
        bisect.insort(chunk, entry)
        lasts[at] = chunk[-1]
        if len(chunk) > 2 * self.CHUNK:
            chunks[at : at + 1] = [chunk[: self.CHUNK], chunk[self.CHUNK :]]
            lasts[at : at + 1] = [chunk[self.CHUNK - 1], chunk[-1]]

    def delete(self, probe: tuple[Any, ...]) -> None:
        """Deletes the first entry not below `probe` (present: the caller knows it is there)."""
        at = bisect.bisect_left(self._lasts, probe)
        chunk = self._chunks[at]
        del chunk[bisect.bisect_left(chunk, probe)]
        if chunk:
            self._lasts[at] = chunk[-1]
        else:
            del self._chunks[at]
            del self._lasts[at]

    def first(self) -> tuple[Any, ...] | None:
        return self._chunks[0][0] if self._chunks else None

    def at(self, position: int) -> tuple[Any, ...]:
        if position < 0:
            position += sum(map(len, self._chunks))
        for chunk in self._chunks:
            if 0 <= position < len(chunk):
                return chunk[position]
            position -= len(chunk)
        raise IndexError("queue position out of range")

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return itertools.chain.from_iterable(self._chunks)
